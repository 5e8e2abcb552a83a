//! Format 3 tagged symlink targets (`docs/vault-format.md`
//! §4b.7). With `blob` the kernel's `fscrypt_symlink_data` (spec §7.4,
//! its NUL included), `context` the symlink's 40-byte v2 context of nonce
//! `N`, and `tag = MAC(6 = MacKind::Symlink, state 0, index 0, N, blob)`
//! (all 16 bytes):
//! - inline backing target: `base64url(context ‖ blob ‖ tag)`, for blobs up
//!   to [`SYMLINK_MAX_BLOB_V3`] (3015 bytes: 16 less than format 2's, so
//!   the target stays within 4095 characters);
//! - symlink store object (`docs/vault-format.md` §6): magic `FSCRYPT\0`,
//!   version 3, kind 3, two zero bytes, `context ‖ blob`, then `tag` in
//!   place of format 2's 8-byte SHA-256 checksum.
//!
//! The tag binds the blob to the symlink's own nonce, not to its name
//! (symlinks are not bound to their place). Without the key it cannot be
//! checked: pass `None` and it is only split off (a locked mount shows the
//! no-key target as for the other formats).

use fscrypt::{ContextV2, base64url};

use super::{IntegrityKeys, MacKind};
use crate::error::Corruption;
use crate::layout::{
    CONTEXT_SIZE, MAGIC, STORE_OBJECT_KIND, SYMLINK_MAX_BLOB, SYMLINK_MAX_BLOB_STORED,
    context_bytes, parse_context,
};

/// Bytes of the symlink tag.
pub const SYMLINK_TAG_SIZE: usize = 16;

/// Largest blob stored inline in format 3: `base64url_len(40 + blob + 16) ≤
/// 4095` → `blob ≤ 3015` ([`SYMLINK_MAX_BLOB`] − 16). Longer blobs go to
/// the symlink store.
pub const SYMLINK_MAX_BLOB_V3: usize = SYMLINK_MAX_BLOB - SYMLINK_TAG_SIZE;

/// The header version byte of a format 3 store object.
pub const STORE_OBJECT_VERSION_V3: u8 = 3;

/// Length of a format 3 store object of the largest stored blob (a bound
/// for reads).
pub const STORE_OBJECT_MAX_V3: usize =
    12 + CONTEXT_SIZE + SYMLINK_MAX_BLOB_STORED + SYMLINK_TAG_SIZE;

/// Smallest blob: the 2-byte length, at least one byte, the NUL.
const MIN_BLOB: usize = 3;

fn symlink_tag(keys: &IntegrityKeys, context: &ContextV2, blob: &[u8]) -> [u8; SYMLINK_TAG_SIZE] {
    keys.tag(MacKind::Symlink, 0, 0, &context.nonce, blob)
}

/// `context ‖ blob ‖ tag` split at its parts, the tag checked when `keys`
/// are given.
fn open(
    keys: Option<&IntegrityKeys>,
    raw: &[u8],
    bad: Corruption,
) -> Result<(ContextV2, Vec<u8>), Corruption> {
    if raw.len() < CONTEXT_SIZE + MIN_BLOB + SYMLINK_TAG_SIZE {
        return Err(bad);
    }
    let ctx = parse_context(&raw[..CONTEXT_SIZE])?;
    let (blob, tag) = raw[CONTEXT_SIZE..].split_at(raw.len() - CONTEXT_SIZE - SYMLINK_TAG_SIZE);
    if let Some(k) = keys
        && !k.verify(MacKind::Symlink, 0, 0, &ctx.nonce, blob, tag)
    {
        return Err(Corruption::BadSymlinkTag);
    }
    Ok((ctx, blob.to_vec()))
}

/// Encodes a symlink's context and blob (at most [`SYMLINK_MAX_BLOB_V3`]
/// bytes) into a format 3 inline backing target.
pub fn encode_symlink(keys: &IntegrityKeys, context: &ContextV2, blob: &[u8]) -> String {
    let mut raw = Vec::with_capacity(CONTEXT_SIZE + blob.len() + SYMLINK_TAG_SIZE);
    raw.extend_from_slice(&context_bytes(context));
    raw.extend_from_slice(blob);
    raw.extend_from_slice(&symlink_tag(keys, context, blob));
    let mut out = vec![0u8; base64url::encoded_len(raw.len())];
    let n = base64url::encode(&raw, &mut out);
    out.truncate(n);
    String::from_utf8_lossy(&out).into_owned()
}

/// Decodes a format 3 inline backing target into (context, blob), checking
/// its tag when `keys` are given.
///
/// # Errors
/// [`Corruption::BadSymlink`] when it is not base64url or too short;
/// [`Corruption::BadContext`] when its context bytes are no v2 context;
/// [`Corruption::BadSymlinkTag`] when the tag does not verify.
pub fn decode_symlink(
    keys: Option<&IntegrityKeys>,
    target: &[u8],
) -> Result<(ContextV2, Vec<u8>), Corruption> {
    let mut raw = vec![0u8; target.len()];
    let n = base64url::decode_canonical(target, &mut raw).map_err(|_| Corruption::BadSymlink)?;
    open(keys, &raw[..n], Corruption::BadSymlink)
}

/// Serializes a format 3 symlink store object (layout in the module doc).
pub fn encode_store_object(keys: &IntegrityKeys, context: &ContextV2, blob: &[u8]) -> Vec<u8> {
    let mut b = Vec::with_capacity(12 + CONTEXT_SIZE + blob.len() + SYMLINK_TAG_SIZE);
    b.extend_from_slice(&MAGIC);
    b.extend_from_slice(&[STORE_OBJECT_VERSION_V3, STORE_OBJECT_KIND, 0, 0]);
    b.extend_from_slice(&context_bytes(context));
    b.extend_from_slice(blob);
    b.extend_from_slice(&symlink_tag(keys, context, blob));
    b
}

/// Parses a format 3 symlink store object into (context, blob), checking its
/// tag when `keys` are given.
///
/// # Errors
/// [`Corruption::BadSymlink`] on a bad magic, version, kind or length;
/// [`Corruption::BadContext`] when its context bytes are no v2 context;
/// [`Corruption::BadSymlinkTag`] when the tag does not verify.
pub fn decode_store_object(
    keys: Option<&IntegrityKeys>,
    b: &[u8],
) -> Result<(ContextV2, Vec<u8>), Corruption> {
    let bad = Corruption::BadSymlink;
    if b.len() < 12 || b.len() > STORE_OBJECT_MAX_V3 {
        return Err(bad);
    }
    if b[0..8] != MAGIC || b[8..12] != [STORE_OBJECT_VERSION_V3, STORE_OBJECT_KIND, 0, 0] {
        return Err(bad);
    }
    open(keys, &b[12..], bad)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn keys() -> IntegrityKeys {
        IntegrityKeys::from_raw(&[0x42; 64]).unwrap()
    }

    fn ctx(b: u8) -> ContextV2 {
        ContextV2 {
            policy: fscrypt::PolicyV2::new_default(fscrypt::KeyIdentifier([1; 16])),
            nonce: [b; 16],
        }
    }

    fn blob(len: usize) -> Vec<u8> {
        let mut v: Vec<u8> = (0..len).map(|i| (i * 5 + 2) as u8).collect();
        let l = (len - 3) as u16;
        v[..2].copy_from_slice(&l.to_le_bytes());
        v[len - 1] = 0;
        v
    }

    #[test]
    fn inline_targets_round_trip_and_fit() {
        let k = keys();
        for len in [3, 35, 1000, SYMLINK_MAX_BLOB_V3] {
            let t = encode_symlink(&k, &ctx(7), &blob(len));
            assert!(t.len() <= crate::layout::BACKING_SYMLINK_MAX, "{len}");
            let (c, b) = decode_symlink(Some(&k), t.as_bytes()).unwrap();
            assert_eq!((c, b), (ctx(7), blob(len)));
            assert!(decode_symlink(None, t.as_bytes()).is_ok());
        }
        let over = encode_symlink(&k, &ctx(7), &blob(SYMLINK_MAX_BLOB_V3 + 1));
        assert!(over.len() > crate::layout::BACKING_SYMLINK_MAX);
    }

    #[test]
    fn any_changed_byte_of_a_target_fails() {
        let k = keys();
        let c = ctx(9);
        let mut raw = context_bytes(&c).to_vec();
        raw.extend_from_slice(&blob(40));
        raw.extend_from_slice(&symlink_tag(&k, &c, &blob(40)));
        for i in CONTEXT_SIZE..raw.len() {
            let mut r = raw.clone();
            r[i] ^= 0x01;
            let mut t = vec![0u8; base64url::encoded_len(r.len())];
            let n = base64url::encode(&r, &mut t);
            assert_eq!(
                decode_symlink(Some(&k), &t[..n]),
                Err(Corruption::BadSymlinkTag),
                "{i}"
            );
            assert!(decode_symlink(None, &t[..n]).is_ok());
        }
        // The nonce is in the MAC's domain: another context's tag fails.
        let mut r = raw.clone();
        r[CONTEXT_SIZE - 1] ^= 1;
        let mut t = vec![0u8; base64url::encoded_len(r.len())];
        let n = base64url::encode(&r, &mut t);
        assert_eq!(
            decode_symlink(Some(&k), &t[..n]),
            Err(Corruption::BadSymlinkTag)
        );
        // A format 2 target (no tag) is not a format 3 one.
        let v2 = crate::layout::encode_symlink(&c, &blob(40));
        assert!(decode_symlink(Some(&k), v2.as_bytes()).is_err());
    }

    #[test]
    fn store_objects_round_trip_and_fail_when_changed() {
        let k = keys();
        let b = blob(4000);
        let o = encode_store_object(&k, &ctx(5), &b);
        assert_eq!(o.len(), 12 + CONTEXT_SIZE + 4000 + 16);
        assert_eq!(o[8], 3);
        assert_eq!(
            decode_store_object(Some(&k), &o).unwrap(),
            (ctx(5), b.clone())
        );
        for i in [12 + CONTEXT_SIZE, 100, 2000, o.len() - 1] {
            let mut x = o.clone();
            x[i] ^= 0x80;
            assert_eq!(
                decode_store_object(Some(&k), &x),
                Err(Corruption::BadSymlinkTag),
                "{i}"
            );
        }
        let mut x = o.clone();
        x[8] = 1;
        assert_eq!(
            decode_store_object(Some(&k), &x),
            Err(Corruption::BadSymlink)
        );
        assert!(decode_store_object(Some(&k), &o[..o.len() - 1]).is_err());
        let v2 = crate::layout::encode_store_object(&ctx(5), &b);
        assert!(decode_store_object(Some(&k), &v2).is_err());
        let other = IntegrityKeys::from_raw(&[1; 64]).unwrap();
        assert_eq!(
            decode_store_object(Some(&other), &o),
            Err(Corruption::BadSymlinkTag)
        );
    }
}
