//! A format 3 file's record: its authenticated size, its generation (rollback), whether a writer had it open, and
//! its bindings to names (`docs/vault-format.md` §4b.5).
//!
//! Two copies live in the header region, A at [`RECORD_A`] and B at
//! [`RECORD_B`]; writers alternate, and readers take the valid one with
//! the higher `seq`, so a write torn by a power loss leaves the other.

#![forbid(unsafe_code)]

use fscrypt::NONCE_SIZE;

use super::{IntegrityKeys, MacKind};

/// Backing offset of record A.
pub const RECORD_A: u64 = 1024;

/// Backing offset of record B.
pub const RECORD_B: u64 = 2048;

/// Room for one record, bytes.
pub const RECORD_SPACE: usize = 1024;

/// Bytes before the bindings.
const FIXED: usize = 40;

/// Size of one binding, bytes.
pub const BINDING_SIZE: usize = 16;

/// The most bindings (hard links) a record holds: more links give EMLINK.
pub const MAX_BINDINGS: usize = (RECORD_SPACE - FIXED - 16) / BINDING_SIZE;

/// `flags` bit: a writer had the file open when this record was written
/// (set with the generation bump, cleared when the last writer closes). A
/// record that still has it when no writer of ours is open was left by a
/// crash: the next writer checks the file's slot pairs first.
pub const FLAG_WRITING: u8 = 1;

/// `flags` bit: the file has had more names than [`MAX_BINDINGS`]: its
/// bindings are no longer checked (a file with that many hard links, as
/// backup tools make, is not bound to its place; `docs/vault-format.md`
/// §10 says so).
pub const FLAG_MANY_LINKS: u8 = 2;

/// One record's fields.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileRecord {
    /// +1 per record write; the higher valid one of A and B is current.
    pub seq: u64,
    /// The authenticated plaintext size, bytes.
    pub size: u64,
    /// +1 at the first change of each write session.
    pub generation: u64,
    /// [`FLAG_WRITING`] or 0.
    pub flags: u8,
    /// One binding per name of the file ([`IntegrityKeys::binding`]).
    pub bindings: Vec<[u8; BINDING_SIZE]>,
}

/// Why a stored record is not usable.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum RecordError {
    /// Shorter than its own fields, or more bindings than fit.
    #[error("record is truncated or has too many bindings")]
    Malformed,
    /// Unknown flag bits or non-zero reserved bytes.
    #[error("record has unknown flags or reserved bytes set")]
    Reserved,
    /// The tag does not verify: tampered, torn, or another file's.
    #[error("record tag does not verify")]
    BadTag,
    /// Neither A nor B holds a valid record.
    #[error("no valid record")]
    NoneValid,
}

impl FileRecord {
    /// A new file's first record: size 0, generation 1, bound to one name,
    /// without the writing flag (an empty file has nothing to tear). It
    /// counts as an open write session all the same
    /// ([`FileRecord::session_open`]): the file's first units are written
    /// with no record before them.
    pub fn new(binding: [u8; BINDING_SIZE]) -> FileRecord {
        FileRecord {
            seq: 1,
            size: 0,
            generation: 1,
            flags: 0,
            bindings: vec![binding],
        }
    }

    /// The stored bytes (at most [`RECORD_SPACE`]), tagged under `keys`
    /// for the file with nonce `nonce`.
    ///
    /// # Errors
    /// [`RecordError::Malformed`] with more than [`MAX_BINDINGS`] bindings.
    pub fn encode(
        &self,
        keys: &IntegrityKeys,
        nonce: &[u8; NONCE_SIZE],
    ) -> Result<Vec<u8>, RecordError> {
        if self.bindings.len() > MAX_BINDINGS {
            return Err(RecordError::Malformed);
        }
        let mut b = Vec::with_capacity(FIXED + BINDING_SIZE * self.bindings.len() + 16);
        b.extend_from_slice(&self.seq.to_le_bytes());
        b.extend_from_slice(&self.size.to_le_bytes());
        b.extend_from_slice(&[0; 8]);
        b.extend_from_slice(&self.generation.to_le_bytes());
        b.push(self.flags);
        b.push(self.bindings.len() as u8);
        b.extend_from_slice(&[0; 6]);
        for binding in &self.bindings {
            b.extend_from_slice(binding);
        }
        let tag = keys.tag(MacKind::FileRecord, 0, 0, nonce, &b);
        b.extend_from_slice(&tag);
        Ok(b)
    }

    /// Parses and verifies one stored record (`b` may be the whole
    /// [`RECORD_SPACE`]; bytes after the tag are ignored).
    ///
    /// # Errors
    /// Any [`RecordError`] but `NoneValid`.
    pub fn decode(
        b: &[u8],
        keys: &IntegrityKeys,
        nonce: &[u8; NONCE_SIZE],
    ) -> Result<FileRecord, RecordError> {
        let fixed = b.get(..FIXED).ok_or(RecordError::Malformed)?;
        let n = usize::from(fixed[33]);
        if n > MAX_BINDINGS {
            return Err(RecordError::Malformed);
        }
        let body_len = FIXED + n * BINDING_SIZE;
        let body = b.get(..body_len).ok_or(RecordError::Malformed)?;
        let tag = b
            .get(body_len..body_len + 16)
            .ok_or(RecordError::Malformed)?;
        if !keys.verify(MacKind::FileRecord, 0, 0, nonce, body, tag) {
            return Err(RecordError::BadTag);
        }
        let flags = fixed[32];
        if flags & !(FLAG_WRITING | FLAG_MANY_LINKS) != 0
            || fixed[16..24].iter().any(|&x| x != 0)
            || fixed[34..40].iter().any(|&x| x != 0)
        {
            return Err(RecordError::Reserved);
        }
        let u64_at = |o: usize| {
            let mut w = [0u8; 8];
            w.copy_from_slice(&fixed[o..o + 8]);
            u64::from_le_bytes(w)
        };
        let rec = FileRecord {
            seq: u64_at(0),
            size: u64_at(8),
            generation: u64_at(24),
            flags,
            bindings: body[FIXED..]
                .chunks_exact(BINDING_SIZE)
                .map(|c| {
                    let mut w = [0u8; BINDING_SIZE];
                    w.copy_from_slice(c);
                    w
                })
                .collect(),
        };
        Ok(rec)
    }

    /// The current record of A and B and where the next one goes: the
    /// valid one with the higher `seq` (A on a tie), and the offset of the
    /// other.
    ///
    /// # Errors
    /// [`RecordError::NoneValid`].
    pub fn current(
        a: &[u8],
        b: &[u8],
        keys: &IntegrityKeys,
        nonce: &[u8; NONCE_SIZE],
    ) -> Result<(FileRecord, u64), RecordError> {
        let ra = FileRecord::decode(a, keys, nonce).ok();
        let rb = FileRecord::decode(b, keys, nonce).ok();
        match (ra, rb) {
            (Some(x), Some(y)) if y.seq > x.seq => Ok((y, RECORD_A)),
            (Some(x), _) => Ok((x, RECORD_B)),
            (None, Some(y)) => Ok((y, RECORD_A)),
            (None, None) => Err(RecordError::NoneValid),
        }
    }

    /// Whether a write session may have left units or slots past the size
    /// (`docs/vault-format.md` §4b.4, §4b.5): the record has
    /// [`FLAG_WRITING`], or is a new file's first (sequence 1, size 0),
    /// before which nothing is written at the file's first change. A
    /// backing file longer than the size's hint is then a crash's
    /// leftover (the size wins), not tampering.
    pub fn session_open(&self) -> bool {
        self.flags & FLAG_WRITING != 0 || (self.seq == 1 && self.size == 0)
    }

    /// Whether `binding` is one of this file's names (always, once the
    /// file has had more names than fit: [`FLAG_MANY_LINKS`]).
    pub fn is_bound_to(&self, binding: &[u8; BINDING_SIZE]) -> bool {
        self.flags & FLAG_MANY_LINKS != 0
            || self
                .bindings
                .iter()
                .any(|b| subtle::ConstantTimeEq::ct_eq(&b[..], &binding[..]).into())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn keys() -> IntegrityKeys {
        IntegrityKeys::from_raw(&[0x24; 64]).unwrap()
    }

    const NONCE: [u8; 16] = [5; 16];

    fn record() -> FileRecord {
        FileRecord {
            seq: 9,
            size: 12345,
            generation: 3,
            flags: 0,
            bindings: vec![[1; 16], [2; 16]],
        }
    }

    #[test]
    fn round_trip_and_max_bindings_fit() {
        let k = keys();
        let r = record();
        let b = r.encode(&k, &NONCE).unwrap();
        assert_eq!(FileRecord::decode(&b, &k, &NONCE), Ok(r.clone()));
        let mut padded = b.clone();
        padded.resize(RECORD_SPACE, 0);
        assert_eq!(FileRecord::decode(&padded, &k, &NONCE), Ok(r));
        let full = FileRecord {
            bindings: vec![[7; 16]; MAX_BINDINGS],
            ..record()
        };
        assert!(full.encode(&k, &NONCE).unwrap().len() <= RECORD_SPACE);
        let over = FileRecord {
            bindings: vec![[7; 16]; MAX_BINDINGS + 1],
            ..record()
        };
        assert_eq!(over.encode(&k, &NONCE), Err(RecordError::Malformed));
    }

    #[test]
    fn any_changed_byte_or_other_file_is_refused() {
        let k = keys();
        let b = record().encode(&k, &NONCE).unwrap();
        for i in 0..b.len() {
            let mut t = b.clone();
            t[i] ^= 0x01;
            assert!(FileRecord::decode(&t, &k, &NONCE).is_err(), "byte {i}");
        }
        assert_eq!(
            FileRecord::decode(&b, &k, &[6; 16]),
            Err(RecordError::BadTag)
        );
        assert_eq!(
            FileRecord::decode(&b[..30], &k, &NONCE),
            Err(RecordError::Malformed)
        );
    }

    #[test]
    fn the_newer_valid_copy_wins_and_the_other_is_next() {
        let k = keys();
        let old = record().encode(&k, &NONCE).unwrap();
        let new = FileRecord {
            seq: 10,
            size: 20000,
            ..record()
        };
        let newb = new.encode(&k, &NONCE).unwrap();
        assert_eq!(
            FileRecord::current(&old, &newb, &k, &NONCE),
            Ok((new.clone(), RECORD_A))
        );
        assert_eq!(
            FileRecord::current(&newb, &old, &k, &NONCE),
            Ok((new, RECORD_B))
        );
        // A torn newer copy leaves the older one current.
        let mut torn = newb.clone();
        torn[8] ^= 0xff;
        assert_eq!(
            FileRecord::current(&old, &torn, &k, &NONCE).map(|(r, _)| r.seq),
            Ok(9)
        );
        assert_eq!(
            FileRecord::current(&torn, &[0; 64], &k, &NONCE),
            Err(RecordError::NoneValid)
        );
    }

    #[test]
    fn bindings_are_checked() {
        let r = record();
        assert!(r.is_bound_to(&[2; 16]));
        assert!(!r.is_bound_to(&[3; 16]));
    }
}
