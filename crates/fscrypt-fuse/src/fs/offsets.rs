//! Plaintext byte ranges to data units: the one place of the arithmetic
//! between plaintext offsets, data unit indexes and the partly covered units
//! at either end of a range (as gocryptfs keeps it in
//! `contentenc/offsets.go`). Data unit `i` holds plaintext bytes
//! `i * du .. (i + 1) * du`; where it is stored is `layout::unit_offset`.
//!
//! `du` is always the vault's data unit size (a power of two, 512..=65536).

/// Offset in a format 1 file's header of its plaintext size field (8 bytes, then
/// the 8-byte checksum: the 16 bytes of `Header::size_update_bytes()`), as
/// in the header table of `layout::Header` and `docs/vault-format.md`.
pub(crate) const HEADER_SIZE_FIELD: u64 = crate::layout::field::SIZE_UPDATE.start as u64;

/// The data units a non-empty plaintext byte range `offset..end` touches.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Units {
    /// Index of the first unit.
    pub first: u64,
    /// Index one past the last unit.
    pub last: u64,
    /// Where the range starts inside the first unit.
    pub head: usize,
    /// How many bytes of the last unit the range covers; 0 when it ends on
    /// a unit boundary (the last unit is whole).
    pub tail: usize,
    du: u64,
}

impl Units {
    /// The units of `offset..end` (`offset < end`; an empty range gives the
    /// one unit holding `offset`, with nothing of it covered).
    pub fn of_range(offset: u64, end: u64, du: u64) -> Units {
        let end = end.max(offset);
        let first = offset / du;
        let last = end.div_ceil(du).max(first + 1);
        Units {
            first,
            last,
            head: (offset - first * du) as usize,
            tail: (end % du) as usize,
            du,
        }
    }

    /// Number of units.
    pub fn count(&self) -> u64 {
        self.last - self.first
    }

    /// Bytes of all units together: the buffer the range is processed in.
    pub fn len(&self) -> usize {
        (self.count() * self.du) as usize
    }

    /// Byte range of unit `idx` (one of these units) in that buffer.
    pub fn in_buf(&self, idx: u64) -> std::ops::Range<usize> {
        let s = ((idx - self.first) * self.du) as usize;
        s..s + self.du as usize
    }

    /// The first unit when the range starts inside it (its bytes before the
    /// range must be read first).
    pub fn partial_head(&self) -> Option<u64> {
        (self.head != 0).then_some(self.first)
    }

    /// The last unit when the range ends inside it and it is not already the
    /// partial head (its bytes after the range must be read first).
    pub fn partial_tail(&self) -> Option<u64> {
        let t = self.last - 1;
        (self.tail != 0 && (t != self.first || self.head == 0)).then_some(t)
    }
}

/// Plaintext offset where unit `idx` starts.
pub(crate) fn unit_start(idx: u64, du: u64) -> u64 {
    idx * du
}

/// Index of the unit holding plaintext byte `pos`.
pub(crate) fn unit_of(pos: u64, du: u64) -> u64 {
    pos / du
}

/// How many bytes of unit `idx` lie before `size` (`du` when the unit is
/// wholly inside the file, 0 when it is wholly past EOF).
pub(crate) fn bytes_before(idx: u64, size: u64, du: u64) -> usize {
    size.saturating_sub(unit_start(idx, du)).min(du) as usize
}

/// The unit holding EOF of a `size`-byte file and how many of its bytes
/// are inside the file, when EOF is inside a unit (`None` when `size` is a
/// multiple of `du`: no unit is partly past EOF).
pub(crate) fn eof_unit(size: u64, du: u64) -> Option<(u64, usize)> {
    (!size.is_multiple_of(du)).then(|| (size / du, (size % du) as usize))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// The model: which unit each byte is in, byte by byte.
    fn model(offset: u64, len: u64, du: u64) -> (u64, u64, usize, usize, Option<u64>, Option<u64>) {
        let units: Vec<u64> = (offset..offset + len).map(|p| p / du).collect();
        let first = units[0];
        let last = units[units.len() - 1] + 1;
        let covered = |u: u64| units.iter().filter(|&&x| x == u).count() as u64;
        let head = (offset - first * du) as usize;
        let tail_cov = covered(last - 1);
        let ends_inside = !(offset + len).is_multiple_of(du);
        let tail = if ends_inside {
            tail_cov as usize + if last - 1 == first { head } else { 0 }
        } else {
            0
        };
        let ph = (covered(first) < du && !offset.is_multiple_of(du)).then_some(first);
        let pt = (ends_inside && ph != Some(last - 1)).then_some(last - 1);
        (first, last, head, tail, ph, pt)
    }

    proptest! {
        #[test]
        fn units_match_the_byte_model(
            log2_du in 9u32..=16,
            offset in prop_oneof![0u64..200_000, (1u64 << 40)..(1u64 << 40) + 200_000],
            len in 1u64..20_000,
        ) {
            let du = 1u64 << log2_du;
            let u = Units::of_range(offset, offset + len, du);
            let (first, last, head, tail, ph, pt) = model(offset, len, du);
            prop_assert_eq!((u.first, u.last, u.head, u.tail), (first, last, head, tail));
            prop_assert_eq!(u.partial_head(), ph);
            prop_assert_eq!(u.partial_tail(), pt);
            prop_assert_eq!(u.len() as u64, (last - first) * du);
            prop_assert_eq!(u.in_buf(last - 1).end, u.len());
            prop_assert_eq!(unit_of(offset, du), first);
            prop_assert_eq!(unit_start(first, du) + head as u64, offset);
        }

        #[test]
        fn eof_and_bytes_before_match_the_byte_model(
            log2_du in 9u32..=16,
            size in 0u64..300_000,
            idx in 0u64..80,
        ) {
            let du = 1u64 << log2_du;
            let inside = (unit_start(idx, du)..unit_start(idx + 1, du)).filter(|&p| p < size).count();
            prop_assert_eq!(bytes_before(idx, size, du), inside);
            let holding_eof = size / du;
            let want = (!size.is_multiple_of(du)).then(|| (holding_eof, bytes_before(holding_eof, size, du)));
            prop_assert_eq!(eof_unit(size, du), want);
        }
    }

    #[test]
    fn known_cases() {
        let u = Units::of_range(4095, 4097, 4096);
        assert_eq!((u.first, u.last, u.head, u.tail), (0, 2, 4095, 1));
        assert_eq!((u.partial_head(), u.partial_tail()), (Some(0), Some(1)));
        let u = Units::of_range(10, 20, 4096);
        assert_eq!((u.partial_head(), u.partial_tail()), (Some(0), None));
        let u = Units::of_range(0, 20, 4096);
        assert_eq!((u.partial_head(), u.partial_tail()), (None, Some(0)));
        let u = Units::of_range(8192, 16384, 4096);
        assert_eq!(
            (u.count(), u.partial_head(), u.partial_tail()),
            (2, None, None)
        );
        use crate::layout::{Header, HeaderKind};
        let h = Header {
            format: crate::layout::Format::V1,
            kind: HeaderKind::File,
            context: fscrypt::ContextV2 {
                policy: fscrypt::PolicyV2::new_default(fscrypt::KeyIdentifier([7; 16])),
                nonce: [7; 16],
            },
            size: 0x0102_0304_0506_0708,
        };
        let b = h.to_bytes();
        let at = HEADER_SIZE_FIELD as usize;
        assert_eq!(b[at..at + 8], h.size.to_le_bytes());
        assert_eq!(b[at..], h.size_update_bytes());
    }
}
