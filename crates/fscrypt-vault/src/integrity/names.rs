//! Format 3 tagged names (`docs/vault-format.md` §4b.6):
//! the backing name of an entry carries a 16-byte tag of its name
//! ciphertext under its parent directory's nonce, so a changed backing name,
//! or one moved into another directory, is detected.
//!
//! Bytes, for a name ciphertext `ct` (16..=255 bytes, spec §6) in the
//! directory of nonce `P`, with `tag = MAC(4 = MacKind::Name, state 0,
//! index 0, P, ct)` (all 16 bytes):
//! - `ct.len() ≤ 175` ([`MAX_INLINE_CT`]): the backing name is
//!   `base64url(ct ‖ tag)` (at most 255 characters);
//! - longer: `fscrypt.long.<base64url(SHA-256(ct))>` as in format 2
//!   (`docs/vault-format.md` §3), and its side file `<name>.name` holds
//!   `ct ‖ tag` (32..=271 bytes).
//!
//! A sync tool's conflict copy is the name the vault wrote with the tool's
//! marker inserted; its tag is checked on the name without the marker.
//!
//! Without the key (a locked mount, fsck without `--key-file`) the tag
//! cannot be checked: [`open_inline`] and [`open_side_file`] only split
//! it off (pass `None` as the keys), so a locked mount lists tampered
//! names like the others (as no-key names), and the check waits for the key.

use fscrypt::{NONCE_SIZE, base64url};
use fscrypt_crypto::sha256;

use super::{IntegrityKeys, MacKind};
use crate::error::Corruption;
use crate::layout::{BackingName, LONG_PREFIX, NAME_MAX};

/// Bytes of the name tag stored after the ciphertext.
pub const NAME_TAG_SIZE: usize = 16;

/// Smallest name ciphertext (spec §6: names are padded to at least 16 bytes).
pub const MIN_CT: usize = 16;

/// Longest name ciphertext stored inline in format 3:
/// `base64url_len(ct + 16) ≤ 255` ⇔ `ct + 16 ≤ 191` ⇔ `ct ≤ 175`. Longer
/// ciphertexts use a long name and its side file.
pub const MAX_INLINE_CT: usize = 175;

/// The tag of name ciphertext `ct` in the directory of nonce `parent`: the
/// full 16-byte `MAC(MacKind::Name, 0, 0, parent, ct)`.
pub fn name_tag(keys: &IntegrityKeys, parent: &[u8; NONCE_SIZE], ct: &[u8]) -> [u8; NAME_TAG_SIZE] {
    keys.tag(MacKind::Name, 0, 0, parent, ct)
}

/// `ct ‖ name_tag(ct)`: the bytes an inline name encodes and a side file
/// holds.
pub fn tagged(keys: &IntegrityKeys, parent: &[u8; NONCE_SIZE], ct: &[u8]) -> Vec<u8> {
    let mut v = Vec::with_capacity(ct.len() + NAME_TAG_SIZE);
    v.extend_from_slice(ct);
    v.extend_from_slice(&name_tag(keys, parent, ct));
    v
}

/// The long backing name of `ct`: `fscrypt.long.<base64url(SHA-256(ct))>`
/// (the tag is in the side file).
fn long_name(ct: &[u8]) -> BackingName {
    let mut buf = [0u8; 64];
    let n = base64url::encode(&sha256(ct), &mut buf);
    BackingName {
        name: format!("{LONG_PREFIX}{}", String::from_utf8_lossy(&buf[..n])),
        long: true,
        marker: None,
    }
}

/// The format 3 backing name of name ciphertext `ct` (16..=255 bytes) in the
/// directory of nonce `parent`: inline `base64url(ct ‖ tag)` up to
/// [`MAX_INLINE_CT`], else the long name (whose side file holds
/// [`tagged`]).
pub fn backing_name(keys: &IntegrityKeys, parent: &[u8; NONCE_SIZE], ct: &[u8]) -> BackingName {
    if ct.len() > MAX_INLINE_CT {
        return long_name(ct);
    }
    let stored = tagged(keys, parent, ct);
    let mut buf = [0u8; NAME_MAX + 1];
    let n = base64url::encode(&stored, &mut buf);
    BackingName {
        name: String::from_utf8_lossy(&buf[..n]).into_owned(),
        long: false,
        marker: None,
    }
}

/// The backing name of a sync tool's conflict copy of the entry of `ct`:
/// [`backing_name`] with `marker` inserted ([`BackingName::with_marker`]).
pub fn conflict_copy(
    keys: &IntegrityKeys,
    parent: &[u8; NONCE_SIZE],
    ct: &[u8],
    marker: &str,
) -> BackingName {
    backing_name(keys, parent, ct).with_marker(marker)
}

/// Splits `ct ‖ tag` and, when `keys` are given, checks the tag under
/// `parent`.
fn split_checked<'a>(
    keys: Option<&IntegrityKeys>,
    parent: &[u8; NONCE_SIZE],
    stored: &'a [u8],
) -> Result<&'a [u8], Corruption> {
    if stored.len() < MIN_CT + NAME_TAG_SIZE || stored.len() > NAME_MAX + NAME_TAG_SIZE {
        return Err(Corruption::BadName);
    }
    let (ct, tag) = stored.split_at(stored.len() - NAME_TAG_SIZE);
    if let Some(k) = keys
        && !k.verify(MacKind::Name, 0, 0, parent, ct, tag)
    {
        return Err(Corruption::BadNameTag);
    }
    Ok(ct)
}

/// The name ciphertext of an inline backing name whose base64url decoding
/// is `stored` (`ct ‖ tag`, as [`crate::layout::classify`] gives it in
/// [`crate::layout::EntryName::Short`]), in the directory of nonce `parent`.
/// With `keys` the tag is checked; without (no key) it is only split off.
///
/// # Errors
/// [`Corruption::BadName`] when `stored` is too short or the ciphertext is
/// longer than the vault writes inline; [`Corruption::BadNameTag`] when the
/// tag does not verify (a changed name, or one from another directory).
pub fn open_inline(
    keys: Option<&IntegrityKeys>,
    parent: &[u8; NONCE_SIZE],
    stored: &[u8],
) -> Result<Vec<u8>, Corruption> {
    let ct = split_checked(keys, parent, stored)?;
    if ct.len() > MAX_INLINE_CT {
        return Err(Corruption::BadName);
    }
    Ok(ct.to_vec())
}

/// The name ciphertext held by the side file of the long-name entry `entry`
/// (`fscrypt.long.<hash>`, without a conflict marker), whose content is
/// `content` (`ct ‖ tag`), in the directory of nonce `parent`. With `keys`
/// the tag is checked; without it is only split off.
///
/// # Errors
/// [`Corruption::BadLongName`] when the content has a bad length, a
/// ciphertext the vault would store inline, or does not hash to `entry`;
/// [`Corruption::BadNameTag`] when the tag does not verify.
pub fn open_side_file(
    keys: Option<&IntegrityKeys>,
    parent: &[u8; NONCE_SIZE],
    entry: &str,
    content: &[u8],
) -> Result<Vec<u8>, Corruption> {
    let ct = split_checked(None, parent, content).map_err(|_| Corruption::BadLongName)?;
    if ct.len() <= MAX_INLINE_CT || ct.len() > NAME_MAX || long_name(ct).name != entry {
        return Err(Corruption::BadLongName);
    }
    split_checked(keys, parent, content).map(<[u8]>::to_vec)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::layout::{EntryName, classify, classify_entry};

    fn keys() -> IntegrityKeys {
        IntegrityKeys::from_raw(&[0x42; 64]).unwrap()
    }

    const P: [u8; 16] = [3; 16];
    const Q: [u8; 16] = [4; 16];

    fn ct(len: usize) -> Vec<u8> {
        (0..len).map(|i| (i * 7 + 1) as u8).collect()
    }

    fn decode(name: &str) -> Vec<u8> {
        match classify(name.as_bytes()) {
            EntryName::Short(b) => b,
            k => panic!("{k:?}"),
        }
    }

    #[test]
    fn inline_names_round_trip_and_the_threshold_is_175() {
        let k = keys();
        for len in [16, 32, 100, 160, 175] {
            let c = ct(len);
            let b = backing_name(&k, &P, &c);
            assert!(!b.long, "{len}");
            assert!(b.name.len() <= NAME_MAX);
            let stored = decode(&b.name);
            assert_eq!(stored.len(), len + 16);
            assert_eq!(open_inline(Some(&k), &P, &stored).unwrap(), c);
            assert_eq!(open_inline(None, &P, &stored).unwrap(), c);
        }
        assert_eq!(backing_name(&k, &P, &ct(175)).name.len(), 255);
        for len in [176, 191, 192, 255] {
            let c = ct(len);
            let b = backing_name(&k, &P, &c);
            assert!(b.long, "{len}");
            assert_eq!(classify(b.name.as_bytes()), EntryName::Long);
            let side = tagged(&k, &P, &c);
            assert_eq!(open_side_file(Some(&k), &P, &b.name, &side).unwrap(), c);
            assert_eq!(open_side_file(None, &P, &b.name, &side).unwrap(), c);
        }
        // Format 2 keeps 176..=191-byte ciphertexts inline; format 3 cannot.
        assert!(!BackingName::from_ciphertext(&ct(176)).long);
    }

    #[test]
    fn any_flipped_bit_of_a_tagged_name_fails() {
        let k = keys();
        let c = ct(48);
        let stored = decode(&backing_name(&k, &P, &c).name);
        for i in 0..stored.len() {
            for bit in 0..8 {
                let mut s = stored.clone();
                s[i] ^= 1 << bit;
                assert!(open_inline(Some(&k), &P, &s).is_err(), "byte {i} bit {bit}");
            }
        }
        // Without the key the tag cannot be checked: a flipped ciphertext
        // bit goes through (a locked mount shows it as a no-key name).
        let mut s = stored.clone();
        s[0] ^= 1;
        assert!(open_inline(None, &P, &s).is_ok());
        assert_eq!(open_inline(Some(&k), &P, &s), Err(Corruption::BadNameTag));
    }

    #[test]
    fn a_name_from_another_directory_fails() {
        let k = keys();
        let c = ct(32);
        let stored = decode(&backing_name(&k, &P, &c).name);
        assert_eq!(
            open_inline(Some(&k), &Q, &stored),
            Err(Corruption::BadNameTag)
        );
        let long = ct(200);
        let b = backing_name(&k, &P, &long);
        assert_eq!(
            open_side_file(Some(&k), &Q, &b.name, &tagged(&k, &P, &long)),
            Err(Corruption::BadNameTag)
        );
        // Another key fails too.
        let other = IntegrityKeys::from_raw(&[0x43; 64]).unwrap();
        assert!(open_inline(Some(&other), &P, &stored).is_err());
    }

    #[test]
    fn side_files_are_checked() {
        let k = keys();
        let c = ct(224);
        let b = backing_name(&k, &P, &c);
        let side = tagged(&k, &P, &c);
        for i in 0..side.len() {
            let mut s = side.clone();
            s[i] ^= 0x10;
            assert!(open_side_file(Some(&k), &P, &b.name, &s).is_err(), "{i}");
        }
        // Another entry's side file, a format 2 side file (no tag), a cut one.
        let d = ct(240);
        assert_eq!(
            open_side_file(Some(&k), &P, &b.name, &tagged(&k, &P, &d)),
            Err(Corruption::BadLongName)
        );
        assert!(open_side_file(Some(&k), &P, &b.name, &c).is_err());
        assert!(open_side_file(Some(&k), &P, &b.name, &side[..20]).is_err());
        // A short ciphertext in a side file is not what the vault writes.
        let s = ct(100);
        let fake = long_name(&s);
        assert_eq!(
            open_side_file(Some(&k), &P, &fake.name, &tagged(&k, &P, &s)),
            Err(Corruption::BadLongName)
        );
    }

    #[test]
    fn malformed_inline_names_are_bad_names() {
        let k = keys();
        assert_eq!(
            open_inline(Some(&k), &P, &[1; 31]),
            Err(Corruption::BadName)
        );
        // A 176-byte ciphertext with a valid tag is never written inline.
        let c = ct(176);
        assert_eq!(
            open_inline(Some(&k), &P, &tagged(&k, &P, &c)),
            Err(Corruption::BadName)
        );
    }

    #[test]
    fn conflict_copies_keep_the_tagged_name_and_add_the_marker() {
        const M: &str = ".sync-conflict-20261205-101010-ABCDEFG";
        let k = keys();
        for len in [32, 200] {
            let c = ct(len);
            let b = conflict_copy(&k, &P, &c, M);
            assert_eq!(b.original(), backing_name(&k, &P, &c).name);
            let (_, copy) = classify_entry(b.name.as_bytes());
            assert_eq!(copy.unwrap().marker, M.as_bytes());
        }
    }
}
