//! Where a format 3 file keeps its data units and their tags, the two-slot
//! rule, and the length hint (`docs/vault-format.md` §4b.3,
//! §4b.4).
//!
//! After the 4096-byte header the file is a run of *groups*: a 4096-byte
//! tag block, then [`GROUP_UNITS`] data units. Unit `i` sits at
//! `4096 + (⌊i/128⌋ + 1)·4096 + i·DU`, so every unit stays aligned to `DU`
//! and to the backing block. The tag block holds a [`SlotPair`] (32 bytes)
//! per unit of its group.

#![forbid(unsafe_code)]

use crate::layout::HEADER_SIZE;

/// Data units per group (one tag block's worth of slot pairs).
pub const GROUP_UNITS: u64 = 128;

/// Size of a group's tag block, bytes.
pub const TAG_BLOCK_SIZE: u64 = 4096;

/// Size of one slot, bytes: a state byte and 15 tag bytes.
pub const SLOT_SIZE: usize = 16;

/// Size of a unit's slot pair, bytes.
pub const SLOT_PAIR_SIZE: usize = 2 * SLOT_SIZE;

/// Tag bytes kept in a slot (the first 15 of the 16-byte MAC).
pub const SLOT_TAG_SIZE: usize = SLOT_SIZE - 1;

/// The hole bit of a slot's state byte.
pub const STATE_HOLE: u8 = 0x80;

/// Bytes of one group (tag block and its units) for data unit size `du`.
pub fn group_size(du: u64) -> u64 {
    TAG_BLOCK_SIZE + GROUP_UNITS * du
}

/// Backing offset of data unit `index`, or `None` past `u64`.
pub fn unit_offset(index: u64, du: u64) -> Option<u64> {
    let group = index / GROUP_UNITS;
    HEADER_SIZE
        .checked_add(group.checked_add(1)?.checked_mul(TAG_BLOCK_SIZE)?)?
        .checked_add(index.checked_mul(du)?)
}

/// Backing offset of the tag block of group `group`, or `None` past `u64`.
pub fn tag_block_offset(group: u64, du: u64) -> Option<u64> {
    HEADER_SIZE.checked_add(group.checked_mul(group_size(du))?)
}

/// Backing offset of the slot pair of data unit `index`.
pub fn slot_pair_offset(index: u64, du: u64) -> Option<u64> {
    tag_block_offset(index / GROUP_UNITS, du)?
        .checked_add((index % GROUP_UNITS) * SLOT_PAIR_SIZE as u64)
}

fn unit_end(index: u64, du: u64) -> Option<u64> {
    unit_offset(index, du)?.checked_add(du)
}

/// The length hint of a file of `size` plaintext bytes: 4096 when empty,
/// else the end of its last stored unit plus `size mod DU` (a trailer, as
/// in format 2). `None` when that passes `i64::MAX` (EFBIG).
pub fn len_for_size(size: u64, du: u64) -> Option<u64> {
    if size == 0 {
        return Some(HEADER_SIZE);
    }
    let units = size.div_ceil(du);
    let len = unit_end(units - 1, du)?.checked_add(size % du)?;
    (len <= i64::MAX as u64).then_some(len)
}

/// The size whose hint is `len`, or `None` when `len` is the hint of no
/// size. The inverse of [`len_for_size`]: every hint belongs to exactly one
/// size (property-tested).
pub fn size_from_len(len: u64, du: u64) -> Option<u64> {
    if len == HEADER_SIZE {
        return Some(0);
    }
    let x = len.checked_sub(HEADER_SIZE)?;
    let g = group_size(du);
    let (group, within) = (x / g, x % g);
    // The last unit ending at or before `len`, and what lies past it.
    let (last, rest) = if within >= TAG_BLOCK_SIZE + du {
        let j = (within - TAG_BLOCK_SIZE) / du - 1;
        (group * GROUP_UNITS + j, (within - TAG_BLOCK_SIZE) % du)
    } else if group > 0 {
        (group * GROUP_UNITS - 1, within)
    } else {
        return None;
    };
    if rest >= du {
        return None;
    }
    let size = if rest == 0 {
        (last + 1).checked_mul(du)?
    } else {
        last.checked_mul(du)?.checked_add(rest)?
    };
    (len_for_size(size, du) == Some(len)).then_some(size)
}

/// The next sequence number after `seq` (1..=127, wrapping to 1).
pub fn next_seq(seq: u8) -> u8 {
    if seq >= 0x7f { 1 } else { seq + 1 }
}

/// One stored tag: a state byte (bit 7 hole, bits 0..6 sequence 1..=127)
/// and the first [`SLOT_TAG_SIZE`] bytes of the unit's MAC, which covers
/// the state byte too.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Slot {
    /// The state byte.
    pub state: u8,
    /// The stored tag bytes.
    pub tag: [u8; SLOT_TAG_SIZE],
}

impl Slot {
    /// A slot for a data unit with sequence `seq` and the unit's full MAC.
    pub fn new(seq: u8, hole: bool, mac: &[u8; 16]) -> Slot {
        let mut tag = [0u8; SLOT_TAG_SIZE];
        tag.copy_from_slice(&mac[..SLOT_TAG_SIZE]);
        Slot {
            state: (seq & 0x7f) | if hole { STATE_HOLE } else { 0 },
            tag,
        }
    }

    /// The state byte for sequence `seq`, hole or data.
    pub fn state_for(seq: u8, hole: bool) -> u8 {
        (seq & 0x7f) | if hole { STATE_HOLE } else { 0 }
    }

    /// The sequence number (1..=127 for a stored slot).
    pub fn seq(&self) -> u8 {
        self.state & 0x7f
    }

    /// Whether the slot stands for a hole (the unit reads as zeros).
    pub fn is_hole(&self) -> bool {
        self.state & STATE_HOLE != 0
    }

    /// The 16 stored bytes.
    pub fn to_bytes(&self) -> [u8; SLOT_SIZE] {
        let mut b = [0u8; SLOT_SIZE];
        b[0] = self.state;
        b[1..].copy_from_slice(&self.tag);
        b
    }

    /// Parses 16 stored bytes: `None` for an empty slot (all zero) or a
    /// state with sequence 0, which no writer makes.
    pub fn parse(b: &[u8; SLOT_SIZE]) -> Option<Slot> {
        if b.iter().all(|&x| x == 0) || b[0] & 0x7f == 0 {
            return None;
        }
        let mut tag = [0u8; SLOT_TAG_SIZE];
        tag.copy_from_slice(&b[1..]);
        Some(Slot { state: b[0], tag })
    }
}

/// A unit's two slots: the tag of its current contents and, usually, the
/// tag of its previous contents. Writes put the new tag into the *older*
/// slot before the unit itself, so an interrupted write leaves the old
/// contents readable under the other slot.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct SlotPair {
    /// Slot 0 (bytes 0..16 of the pair) and slot 1 (16..32).
    pub slots: [Option<Slot>; 2],
}

impl SlotPair {
    /// Parses a stored pair.
    pub fn parse(b: &[u8; SLOT_PAIR_SIZE]) -> SlotPair {
        let mut s0 = [0u8; SLOT_SIZE];
        let mut s1 = [0u8; SLOT_SIZE];
        s0.copy_from_slice(&b[..SLOT_SIZE]);
        s1.copy_from_slice(&b[SLOT_SIZE..]);
        SlotPair {
            slots: [Slot::parse(&s0), Slot::parse(&s1)],
        }
    }

    /// Whether neither slot holds a tag (a unit never written: inside the
    /// authenticated size that is tampering).
    pub fn is_empty(&self) -> bool {
        self.slots.iter().all(Option::is_none)
    }

    /// Index (0 or 1) of the newer slot: the one whose sequence follows the
    /// other's, or the only one present. `None` when both are empty.
    pub fn newer(&self) -> Option<usize> {
        match self.slots {
            [None, None] => None,
            [Some(_), None] => Some(0),
            [None, Some(_)] => Some(1),
            [Some(a), Some(b)] => Some(if b.seq() == next_seq(a.seq()) { 1 } else { 0 }),
        }
    }

    /// The slots in the order a reader tries them: newer first.
    pub fn by_age(&self) -> impl Iterator<Item = (usize, Slot)> + '_ {
        let first = self.newer().unwrap_or(0);
        [first, 1 - first]
            .into_iter()
            .filter_map(|i| self.slots[i].map(|s| (i, s)))
    }

    /// Where the next tag goes and its sequence number, when the unit's
    /// current contents verify under slot `current` (or the pair is
    /// empty: `None`): the other slot, with the sequence after `current`'s.
    pub fn next_write(&self, current: Option<usize>) -> (usize, u8) {
        match current.and_then(|i| self.slots[i].map(|s| (i, s))) {
            Some((i, s)) => (1 - i, next_seq(s.seq())),
            None => (0, 1),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const DUS: [u64; 4] = [512, 1024, 2048, 4096];

    #[test]
    fn units_are_aligned_and_never_overlap_tag_blocks() {
        for du in DUS {
            for i in [0, 1, 127, 128, 129, 255, 256, 1000] {
                let off = unit_offset(i, du).unwrap();
                assert_eq!(off % du, 0, "unit {i} du {du}");
                let tb = tag_block_offset(i / GROUP_UNITS, du).unwrap();
                assert!(off >= tb + TAG_BLOCK_SIZE && off + du <= tb + group_size(du));
                let sp = slot_pair_offset(i, du).unwrap();
                assert!(sp >= tb && sp + SLOT_PAIR_SIZE as u64 <= tb + TAG_BLOCK_SIZE);
            }
            assert_eq!(unit_offset(0, du), Some(8192));
            assert_eq!(unit_offset(128, du), Some(4096 + group_size(du) + 4096));
        }
    }

    #[test]
    fn known_length_hints() {
        let du = 4096;
        assert_eq!(len_for_size(0, du), Some(4096));
        assert_eq!(len_for_size(1, du), Some(12288 + 1));
        assert_eq!(len_for_size(4096, du), Some(12288));
        assert_eq!(len_for_size(4097, du), Some(16384 + 1));
        // The 128th unit ends where group 1's tag block starts.
        assert_eq!(len_for_size(128 * 4096, du), Some(4096 + group_size(du)));
        assert_eq!(
            len_for_size(128 * 4096 + 1, du),
            Some(4096 + group_size(du) + 8192 + 1)
        );
        assert_eq!(len_for_size(u64::MAX, du), None);
    }

    #[test]
    fn every_hint_belongs_to_exactly_one_size() {
        for du in [512u64, 4096] {
            let mut seen = std::collections::HashMap::new();
            let span = 4096 + 3 * group_size(du);
            for size in 0..=(3 * GROUP_UNITS * du) {
                if size > 2 * du && size % 97 != 0 && size % du > 2 && size % du < du - 2 {
                    continue; // sample the interior, keep every boundary
                }
                let len = len_for_size(size, du).unwrap();
                assert_eq!(size_from_len(len, du), Some(size), "size {size} du {du}");
                assert!(seen.insert(len, size).is_none());
            }
            for len in 0..span {
                if let Some(size) = size_from_len(len, du) {
                    assert_eq!(len_for_size(size, du), Some(len), "len {len} du {du}");
                }
            }
            // Lengths inside the first tag block and first unit mean nothing.
            assert_eq!(size_from_len(4097, du), None);
            assert_eq!(size_from_len(8192 + du - 1, du), None);
        }
    }

    fn slot(seq: u8) -> Slot {
        Slot::new(seq, false, &[seq; 16])
    }

    #[test]
    fn slot_bytes_round_trip_and_empty_is_none() {
        let s = Slot::new(5, true, &[9; 16]);
        assert!(s.is_hole());
        assert_eq!(s.seq(), 5);
        assert_eq!(Slot::parse(&s.to_bytes()), Some(s));
        assert_eq!(Slot::parse(&[0; 16]), None);
        let mut zero_seq = [0u8; 16];
        zero_seq[0] = STATE_HOLE;
        zero_seq[1] = 1;
        assert_eq!(Slot::parse(&zero_seq), None);
    }

    #[test]
    fn sequence_wraps_without_zero() {
        assert_eq!(next_seq(1), 2);
        assert_eq!(next_seq(126), 127);
        assert_eq!(next_seq(127), 1);
    }

    #[test]
    fn newer_slot_and_next_write() {
        let empty = SlotPair::default();
        assert_eq!(empty.newer(), None);
        assert_eq!(empty.next_write(None), (0, 1));
        let one = SlotPair {
            slots: [Some(slot(1)), None],
        };
        assert_eq!(one.newer(), Some(0));
        assert_eq!(one.next_write(Some(0)), (1, 2));
        let two = SlotPair {
            slots: [Some(slot(3)), Some(slot(2))],
        };
        assert_eq!(two.newer(), Some(0));
        assert_eq!(two.by_age().map(|(i, _)| i).collect::<Vec<_>>(), [0, 1]);
        // Current contents under the newer slot: the older one is reused.
        assert_eq!(two.next_write(Some(0)), (1, 4));
        // An interrupted write left slot 0 newer but not matching: the
        // contents verify under slot 1, so slot 0 is the one to reuse.
        assert_eq!(two.next_write(Some(1)), (0, 3));
        let wrapped = SlotPair {
            slots: [Some(slot(127)), Some(slot(1))],
        };
        assert_eq!(wrapped.newer(), Some(1));
        let mut bytes = [0u8; SLOT_PAIR_SIZE];
        bytes[..16].copy_from_slice(&slot(127).to_bytes());
        bytes[16..].copy_from_slice(&slot(1).to_bytes());
        assert_eq!(SlotPair::parse(&bytes), wrapped);
    }
}
