//! The authenticated vault format (format version 3): its keys, MAC inputs
//! and byte layouts, without I/O. Bytes:
//! `docs/vault-format.md` §4b; reasoning: `docs/design/vault-format-3.md`.
//!
//! | module | owns |
//! |--------|------|
//! | this one | [`IntegrityKeys`]: the MAC key pair and the directory-nonce derivation, from the master key through HKDF-SHA512 with fscrypt-rs's own info prefix; [`MacKind`] and the MAC's domain blocks |
//! | [`units`] | where data units and their tag slots live in a backing file, the two-slot [`units::Slot`] rule, the length hint |
//! | [`generations`] | [`generations::GenerationStore`]: the highest record generation this machine saw per file (rollback detection), an append-only log outside the backing store |
//! | [`record`] | the A/B file records (authenticated size, growth in progress, generation, writing flag, bindings) |
//! | [`names`] | tagged backing names: `base64url(ct ‖ tag)` inline, long names whose side file holds `ct ‖ tag` ("Names") |
//! | [`symlinks`] | tagged symlink targets, inline and in the symlink store ("Symlinks") |
//!
//! Nothing here is used by the kernel or written by formats 1 and 2.

#![forbid(unsafe_code)]

pub mod generations;
pub mod names;
pub mod record;
pub mod symlinks;
pub mod units;

use fscrypt::{MasterKey, NONCE_SIZE};
use fscrypt_crypto::mac::{MAC_KEY_SIZE, MAC_TAG_SIZE, PreparedMac};
use fscrypt_crypto::{Error as CryptoError, HkdfSha512};
use zeroize::Zeroizing;

/// The HKDF-SHA512 info prefix of every key format 3 derives: 17 bytes
/// that differ from the kernel's `"fscrypt\0"` at byte 7 (`-` against NUL),
/// so no derivation of ours can equal one of the kernel's (spec §4.3).
pub const INFO_PREFIX: &[u8; 17] = b"fscrypt-rs vault\0";

/// The purpose byte after [`INFO_PREFIX`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum Purpose {
    /// 48 bytes: the MAC's POLYVAL key `H` (16) then its AES-256 key (32).
    MacKeys = 1,
    /// 16 bytes: a new directory's nonce, from its parent's nonce and its
    /// name ciphertext.
    DirNonce = 2,
    /// 16 bytes: the nonce of an object of a reverse-mode view
    /// ([`crate::reverse`]), from its kind and its path identity.
    ReverseNonce = 3,
}

/// What a tag authenticates: the first byte of the MAC's domain.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum MacKind {
    /// A data unit's ciphertext (empty for a hole), index = unit number.
    DataUnit = 1,
    /// A regular file's record (index 0).
    FileRecord = 2,
    // 3 is reserved: a directory record was designed and never written
    // (directories are not bound to their place, `docs/vault-format.md`
    // §10).
    /// A name ciphertext, under the parent directory's nonce.
    Name = 4,
    /// A binding of a file to one of its names (parent nonce, name
    /// ciphertext).
    Binding = 5,
    /// A symlink's `fscrypt_symlink_data` blob, under the symlink's nonce.
    Symlink = 6,
}

/// The 32-byte MAC domain: `kind ‖ state ‖ 0⁶ ‖ le64(index) ‖ nonce`. It is
/// the MAC's associated data, so a tag is bound to the kind of object, the
/// slot state, the position and the object (or parent directory) it
/// belongs to.
pub fn domain(kind: MacKind, state: u8, index: u64, nonce: &[u8; NONCE_SIZE]) -> [u8; 32] {
    let mut d = [0u8; 32];
    d[0] = kind as u8;
    d[1] = state;
    d[8..16].copy_from_slice(&index.to_le_bytes());
    d[16..].copy_from_slice(nonce);
    d
}

/// The keys of an authenticated vault, derived once per mount from the
/// master key. The MAC (the implementation the `fscrypt-crypto` registry
/// selected after its self-test) and the HKDF PRK live in locked,
/// dump-excluded memory and are zeroized on drop.
pub struct IntegrityKeys {
    mac: PreparedMac,
    hkdf: HkdfSha512,
}

impl core::fmt::Debug for IntegrityKeys {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str("IntegrityKeys { .. }")
    }
}

impl IntegrityKeys {
    /// Derives the keys from `master`: HKDF-Extract with no salt over the
    /// raw key (the same PRK as the kernel's, spec §4.3), then
    /// HKDF-Expand with `INFO_PREFIX ‖ purpose ‖ …`.
    ///
    /// # Errors
    /// [`CryptoError::NoMacImplementation`] when no MAC implementation
    /// passed its self-test.
    pub fn derive(master: &MasterKey) -> Result<IntegrityKeys, CryptoError> {
        Self::from_raw(master.as_bytes())
    }

    /// As [`IntegrityKeys::derive`], from the raw master key bytes.
    ///
    /// # Errors
    /// As [`IntegrityKeys::derive`].
    pub fn from_raw(master: &[u8]) -> Result<IntegrityKeys, CryptoError> {
        let hkdf = HkdfSha512::extract(&[], master);
        let mut k = Zeroizing::new([0u8; MAC_KEY_SIZE]);
        hkdf.expand(&[INFO_PREFIX, &[Purpose::MacKeys as u8]], &mut k[..])?;
        let mac = PreparedMac::new(&k[..])?;
        fscrypt_crypto::scrub_stack();
        Ok(IntegrityKeys { mac, hkdf })
    }

    /// The full 16-byte tag of `payload` in `domain(kind, state, index,
    /// nonce)`.
    pub fn tag(
        &self,
        kind: MacKind,
        state: u8,
        index: u64,
        nonce: &[u8; NONCE_SIZE],
        payload: &[u8],
    ) -> [u8; MAC_TAG_SIZE] {
        self.mac.tag(&domain(kind, state, index, nonce), payload)
    }

    /// Whether `stored` (a prefix of a tag, 1..=16 bytes) is the tag of
    /// `payload` in that domain; constant-time comparison.
    pub fn verify(
        &self,
        kind: MacKind,
        state: u8,
        index: u64,
        nonce: &[u8; NONCE_SIZE],
        payload: &[u8],
        stored: &[u8],
    ) -> bool {
        self.mac
            .verify(&domain(kind, state, index, nonce), payload, stored)
    }

    /// The nonce of a directory created in format 3 as `name_ct` (its name
    /// ciphertext) inside the directory with nonce `parent`:
    /// `HKDF-Expand(INFO_PREFIX ‖ 2 ‖ parent ‖ name_ct, 16)`. The same path
    /// made twice (on two replicas of a synced vault) gets the same nonce.
    pub fn dir_nonce(&self, parent: &[u8; NONCE_SIZE], name_ct: &[u8]) -> [u8; NONCE_SIZE] {
        let mut n = [0u8; NONCE_SIZE];
        // 16 bytes is far below HKDF-SHA512's output limit.
        let _ = self.hkdf.expand(
            &[INFO_PREFIX, &[Purpose::DirNonce as u8], parent, name_ct],
            &mut n,
        );
        n
    }

    /// The nonce of an object of a reverse-mode view
    /// (`docs/vault-format.md` §13): `HKDF-Expand(INFO_PREFIX ‖ 3 ‖ kind ‖
    /// parent ‖ name_ct, 16)`, `kind` 0 for the root (with `parent` and
    /// `name_ct` empty), 1 for a regular file, 2 for a symlink.
    pub fn reverse_nonce(&self, kind: u8, parent: &[u8], name_ct: &[u8]) -> [u8; NONCE_SIZE] {
        let mut n = [0u8; NONCE_SIZE];
        // 16 bytes is far below HKDF-SHA512's output limit.
        let _ = self.hkdf.expand(
            &[
                INFO_PREFIX,
                &[Purpose::ReverseNonce as u8, kind],
                parent,
                name_ct,
            ],
            &mut n,
        );
        n
    }

    /// The 16-byte binding of a file to the name `name_ct` in the directory
    /// with nonce `parent` (stored in the file's record).
    pub fn binding(&self, parent: &[u8; NONCE_SIZE], name_ct: &[u8]) -> [u8; 16] {
        self.tag(MacKind::Binding, 0, 0, parent, name_ct)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn keys() -> IntegrityKeys {
        IntegrityKeys::from_raw(&[0x42; 64]).unwrap()
    }

    #[test]
    fn info_prefix_never_equals_the_kernels() {
        assert_ne!(&INFO_PREFIX[..8], b"fscrypt\0");
        assert_eq!(&INFO_PREFIX[..7], b"fscrypt");
    }

    #[test]
    fn keys_depend_on_the_master_key_and_are_deterministic() {
        let a = keys();
        let b = keys();
        let c = IntegrityKeys::from_raw(&[0x43; 64]).unwrap();
        let n = [1u8; 16];
        let t = a.tag(MacKind::DataUnit, 1, 7, &n, b"unit");
        assert_eq!(t, b.tag(MacKind::DataUnit, 1, 7, &n, b"unit"));
        assert_ne!(t, c.tag(MacKind::DataUnit, 1, 7, &n, b"unit"));
        assert_eq!(a.dir_nonce(&n, b"ct"), b.dir_nonce(&n, b"ct"));
        assert_ne!(a.dir_nonce(&n, b"ct"), c.dir_nonce(&n, b"ct"));
    }

    #[test]
    fn every_domain_field_separates_tags() {
        let k = keys();
        let n = [1u8; 16];
        let mut m = [2u8; 16];
        let base = k.tag(MacKind::DataUnit, 1, 7, &n, b"x");
        assert_ne!(base, k.tag(MacKind::FileRecord, 1, 7, &n, b"x"));
        assert_ne!(base, k.tag(MacKind::DataUnit, 2, 7, &n, b"x"));
        assert_ne!(base, k.tag(MacKind::DataUnit, 1, 8, &n, b"x"));
        assert_ne!(base, k.tag(MacKind::DataUnit, 1, 7, &m, b"x"));
        m = n;
        assert!(k.verify(MacKind::DataUnit, 1, 7, &m, b"x", &base[..15]));
        assert!(!k.verify(MacKind::DataUnit, 1, 7, &m, b"y", &base[..15]));
    }

    #[test]
    fn directory_nonces_depend_on_parent_and_name() {
        let k = keys();
        let p = [3u8; 16];
        let q = [4u8; 16];
        let a = k.dir_nonce(&p, b"name-a");
        assert_ne!(a, k.dir_nonce(&p, b"name-b"));
        assert_ne!(a, k.dir_nonce(&q, b"name-a"));
        assert_ne!(k.binding(&p, b"name-a"), k.binding(&q, b"name-a"));
    }
}
