//! Property tests: parsers never panic on arbitrary bytes and round-trip what
//! they accept; contents, filenames, symlinks and no-key names round-trip for
//! every mode pair, policy flag combination, padding and data unit size.

use fscrypt::nokey::{self, NoKeyName, legacy};
use fscrypt::{
    Context, EncryptionMode, FileType, InodeCrypt, InodeParams, MasterKey, Policy, PolicyFlags,
    PolicyV1, PolicyV2, fname, symlink,
};
use proptest::prelude::*;

/// Valid (version, contents, filenames, flags-without-padding) shapes.
fn policy_shapes() -> Vec<(bool, u8, u8, u8)> {
    let mut v = Vec::new();
    for &(c, f) in &[(1u8, 4u8), (5, 6), (9, 9), (1, 10), (7, 8)] {
        for v2 in [false, true] {
            for extra in [0u8, 0x04, 0x08, 0x10] {
                v.push((v2, c, f, extra));
            }
        }
    }
    v
}

fn make_policy(mk: &MasterKey, v2: bool, c: u8, f: u8, flags: u8, log2: u8) -> Policy {
    if v2 {
        Policy::V2(PolicyV2 {
            contents_mode: EncryptionMode(c),
            filenames_mode: EncryptionMode(f),
            flags: PolicyFlags(flags),
            log2_data_unit_size: log2,
            master_key_identifier: mk.identifier(),
        })
    } else {
        Policy::V1(PolicyV1 {
            contents_mode: EncryptionMode(c),
            filenames_mode: EncryptionMode(f),
            flags: PolicyFlags(flags),
            master_key_descriptor: mk.e4crypt_descriptor(),
        })
    }
}

fn master() -> MasterKey {
    let raw: Vec<u8> = (0..64u8)
        .map(|i| i.wrapping_mul(73).wrapping_add(5))
        .collect();
    MasterKey::new(&raw).unwrap()
}

fn inode(
    mk: &MasterKey,
    policy: &Policy,
    nonce: [u8; 16],
    file_type: FileType,
    ino: u64,
    block: u32,
) -> InodeCrypt {
    InodeCrypt::new(
        mk,
        &Context::new(policy, nonce),
        &InodeParams {
            file_type,
            ino,
            fs_uuid: [0x6e; 16],
            fs_block_size: block,
        },
    )
    .unwrap()
}

fn name_strategy() -> impl Strategy<Value = Vec<u8>> {
    prop::collection::vec(
        any::<u8>().prop_filter("no NUL or '/'", |b| *b != 0 && *b != b'/'),
        1..=255,
    )
    .prop_filter("not . or ..", |n| n != b"." && n != b"..")
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn policy_parse_never_panics(bytes in prop::collection::vec(any::<u8>(), 0..48)) {
        if let Ok(p) = Policy::parse_unvalidated(&bytes) {
            prop_assert_eq!(p.to_bytes(), bytes.clone());
        }
        if let Ok(p) = Policy::parse(&bytes) {
            prop_assert!(p.validate().is_ok());
            prop_assert_eq!(p.to_bytes(), bytes);
        }
    }

    #[test]
    fn context_parse_never_panics(bytes in prop::collection::vec(any::<u8>(), 0..64)) {
        if let Ok(c) = Context::parse(&bytes) {
            prop_assert_eq!(&*c.to_bytes(), &bytes[..]);
            let _ = c.validate();
            prop_assert_eq!(c.nonce(), &bytes[bytes.len() - 16..]);
        }
    }

    #[test]
    fn structured_policies_round_trip(v2: bool, c: u8, f: u8, flags: u8, log2: u8, id: [u8; 16]) {
        let mk_id = fscrypt::KeyIdentifier(id);
        let p = if v2 {
            Policy::V2(PolicyV2 { contents_mode: EncryptionMode(c), filenames_mode: EncryptionMode(f),
                flags: PolicyFlags(flags), log2_data_unit_size: log2, master_key_identifier: mk_id })
        } else {
            Policy::V1(PolicyV1 { contents_mode: EncryptionMode(c), filenames_mode: EncryptionMode(f),
                flags: PolicyFlags(flags), master_key_descriptor: fscrypt::KeyDescriptor([id[0]; 8]) })
        };
        let bytes = p.to_bytes();
        match p.validate() {
            Ok(()) => prop_assert_eq!(Policy::parse(&bytes).unwrap(), p),
            Err(e) => prop_assert_eq!(Policy::parse(&bytes).unwrap_err(), e),
        }
        let ctx = Context::new(&p, [c; 16]);
        prop_assert_eq!(Context::parse(&ctx.to_bytes()).unwrap(), ctx);
    }

    #[test]
    fn nokey_decoders_never_panic(bytes in prop::collection::vec(any::<u8>(), 0..300)) {
        if let Ok(n) = NoKeyName::decode(&bytes) {
            // Re-encoding gives the canonical form, which decodes to the same
            // name (the kernel, like us, also accepts a trailing zero char).
            let again = n.encode();
            prop_assert_eq!(NoKeyName::decode(again.as_bytes()).unwrap(), n);
        }
        let _ = legacy::decode_v5_6(&bytes);
        let _ = legacy::decode_pre_5_6(&bytes);
        let _ = symlink::parse_blob(&bytes);
    }

    #[test]
    fn nokey_names_round_trip(ct in prop::collection::vec(any::<u8>(), 1..600), hash: u32, minor: u32) {
        let name = nokey::encode(&ct, hash, minor);
        prop_assert!(name.len() <= nokey::NOKEY_NAME_MAX);
        prop_assert!(name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_'));
        let d = NoKeyName::decode(name.as_bytes()).unwrap();
        prop_assert_eq!((d.hash, d.minor_hash), (hash, minor));
        prop_assert!(d.matches(&ct));
        prop_assert_eq!(d.ciphertext().is_some(), ct.len() <= nokey::NOKEY_BYTES);
        let mut other = ct.clone();
        let last = other.len() - 1;
        other[last] ^= 1;
        prop_assert!(!d.matches(&other));
        let old = legacy::encode_v5_6(&ct, hash, minor);
        prop_assert!(legacy::decode_v5_6(old.as_bytes()).unwrap().matches(&ct));
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 96, ..ProptestConfig::default() })]

    /// Every valid mode pair × flag set × data unit size: decrypt(encrypt(x))
    /// = x, the ciphertext differs, and a run equals its units one by one.
    #[test]
    fn contents_round_trip(
        shape in prop::sample::select(policy_shapes()),
        log2 in prop::sample::select(vec![0u8, 9, 10, 11, 12, 13, 14, 15, 16]),
        units in 1usize..4,
        first in 0u64..(u32::MAX as u64 - 8),
        nonce: [u8; 16],
        ino in 1u64..u32::MAX as u64,
        seed: u8,
    ) {
        let (v2, c, f, extra) = shape;
        let mk = master();
        let p = make_policy(&mk, v2, c, f, 0x03 | extra, if v2 { log2 } else { 0 });
        prop_assume!(p.validate_for_block_size(65536).is_ok());
        let file = inode(&mk, &p, nonce, FileType::Regular, ino, 65536);
        let du = file.data_unit_size();
        prop_assert_eq!(du, if v2 && log2 != 0 { 1 << log2 } else { 65536 });
        let plain: Vec<u8> = (0..units * du).map(|i| (i as u8).wrapping_mul(seed | 1)).collect();
        let mut buf = plain.clone();
        file.encrypt_data_units(first, &mut buf).unwrap();
        prop_assert!(buf != plain);
        let mut one_by_one = plain.clone();
        for (k, unit) in one_by_one.chunks_mut(du).enumerate() {
            file.encrypt_data_units(first + k as u64, unit).unwrap();
        }
        prop_assert!(one_by_one == buf);
        file.decrypt_data_units(first, &mut buf).unwrap();
        prop_assert!(buf == plain);
        // Partial units are refused without touching the buffer.
        let mut short = plain[..du - 16].to_vec();
        prop_assert!(file.encrypt_data_units(first, &mut short).is_err());
        prop_assert!(short[..] == plain[..du - 16]);
    }

    /// Every valid mode pair × flags × padding: names round-trip with the
    /// §7.2 length, and so do symlink targets and no-key names.
    #[test]
    fn filenames_round_trip(
        shape in prop::sample::select(policy_shapes()),
        pad in 0u8..4,
        name in name_strategy(),
        nonce: [u8; 16],
        ino in 1u64..u32::MAX as u64,
    ) {
        let (v2, c, f, extra) = shape;
        let mk = master();
        let p = make_policy(&mk, v2, c, f, pad | extra, 0);
        prop_assume!(p.validate().is_ok());
        let dir = inode(&mk, &p, nonce, FileType::Directory, ino, 4096);
        let ct = dir.encrypt_filename(&name).unwrap();
        prop_assert_eq!(ct.len(), fname::encrypted_size(name.len(), 4 << pad, 255).unwrap());
        prop_assert_eq!(&*dir.decrypt_filename(&ct).unwrap(), &name[..]);
        prop_assert_eq!(&*dir.encrypt_filename(&name).unwrap(), &*ct, "deterministic");
        prop_assert!(NoKeyName::decode(nokey::encode(&ct, 0, 0).as_bytes()).unwrap().matches(&ct));

        let link = inode(&mk, &p, nonce, FileType::Symlink, ino, 4096);
        let blob = link.encrypt_symlink(&name, 4096).unwrap();
        prop_assert_eq!(link.decrypt_symlink(&blob).unwrap(), name);
    }

    /// Decrypting arbitrary ciphertext never panics.
    #[test]
    fn decrypt_arbitrary_names(ct in prop::collection::vec(any::<u8>(), 0..300), shape in prop::sample::select(policy_shapes())) {
        let (v2, c, f, extra) = shape;
        let mk = master();
        let p = make_policy(&mk, v2, c, f, 0x03 | extra, 0);
        prop_assume!(p.validate().is_ok());
        let dir = inode(&mk, &p, [9; 16], FileType::Directory, 77, 4096);
        if let Ok(n) = dir.decrypt_filename(&ct) {
            prop_assert!(!n.is_empty() && !n.contains(&0) && !n.contains(&b'/'));
        }
        let link = inode(&mk, &p, [9; 16], FileType::Symlink, 77, 4096);
        let _ = link.decrypt_symlink(&ct);
    }
}

#[test]
fn name_limits() {
    let mk = master();
    let p = make_policy(&mk, true, 1, 4, 3, 0);
    let dir = inode(&mk, &p, [1; 16], FileType::Directory, 5, 4096);
    assert!(dir.encrypt_filename(&[b'a'; 256]).is_err());
    assert_eq!(dir.encrypt_filename(&[b'a'; 255]).unwrap().len(), 255);
    assert!(dir.encrypt_filename(b"").is_err());
    assert!(dir.encrypt_filename(b"a/b").is_err());
    assert!(dir.encrypt_filename(b"a\0b").is_err());
    assert_eq!(&*dir.encrypt_filename(b".").unwrap(), b".");
    assert_eq!(&*dir.decrypt_filename(b"..").unwrap(), b"..");
    assert!(dir.decrypt_filename(&[1; 15]).is_err());
    assert!(dir.decrypt_filename(&[1; 256]).is_err());
    let link = inode(&mk, &p, [1; 16], FileType::Symlink, 6, 4096);
    assert_eq!(
        link.encrypt_symlink(&[b'x'; 4093], 4096).unwrap().len(),
        4096
    );
    assert!(link.encrypt_symlink(&[b'x'; 4094], 4096).is_err());
    let file = inode(&mk, &p, [1; 16], FileType::Regular, 7, 4096);
    assert!(file.encrypt_filename(b"x").is_err());
    assert!(dir.encrypt_data_units(0, &mut [0; 4096]).is_err());
}

#[test]
fn key_rules() {
    use fscrypt::{Error, KeyError};
    assert!(matches!(
        MasterKey::new(&[1; 15]),
        Err(KeyError::BadMasterKeySize(15))
    ));
    assert!(matches!(
        MasterKey::new(&[1; 65]),
        Err(KeyError::BadMasterKeySize(65))
    ));
    let mk = master();
    let other = MasterKey::new(&[7; 64]).unwrap();
    let p = make_policy(&mk, true, 1, 4, 3, 0);
    let params = InodeParams {
        file_type: FileType::Regular,
        ino: 9,
        fs_uuid: [0; 16],
        fs_block_size: 4096,
    };
    let ctx = Context::new(&p, [3; 16]);
    assert!(matches!(
        InodeCrypt::new(&other, &ctx, &params),
        Err(Error::Key(KeyError::WrongKey { .. }))
    ));
    let f = InodeCrypt::new(&mk, &ctx, &params).unwrap();
    assert_eq!(f.nonce(), &[3; 16]);

    // v2: security strength (32 for AES-256-XTS, 16 for AES-128-CBC-ESSIV).
    let k16: Vec<u8> = (0..16u8).map(|i| i * 3 + 1).collect();
    let k32: Vec<u8> = (0..32u8).map(|i| i * 5 + 2).collect();
    let short = MasterKey::new(&k16).unwrap();
    let p16 = make_policy(&short, true, 1, 4, 3, 0);
    assert!(matches!(
        InodeCrypt::new(&short, &Context::new(&p16, [3; 16]), &params),
        Err(Error::Key(KeyError::MasterKeyTooShort {
            need: 32,
            have: 16,
            ..
        }))
    ));
    let p16b = make_policy(&short, true, 5, 6, 3, 0);
    assert!(InodeCrypt::new(&short, &Context::new(&p16b, [3; 16]), &params).is_ok());
    let mid = MasterKey::new(&k32).unwrap();
    let p32 = make_policy(&mid, true, 1, 4, 3, 0);
    assert!(InodeCrypt::new(&mid, &Context::new(&p32, [3; 16]), &params).is_ok());
    // v1: key size (64 for AES-256-XTS).
    let p32v1 = make_policy(&mid, false, 1, 4, 3, 0);
    assert!(matches!(
        InodeCrypt::new(&mid, &Context::new(&p32v1, [3; 16]), &params),
        Err(Error::Key(KeyError::MasterKeyTooShort {
            need: 64,
            have: 32,
            version: 1,
            ..
        }))
    ));
    // IV_INO_LBLK_* needs 32-bit inode numbers.
    let lblk = make_policy(&mk, true, 1, 4, 0x0b, 0);
    let big = InodeParams {
        ino: 1 << 32,
        ..params
    };
    assert!(InodeCrypt::new(&mk, &Context::new(&lblk, [3; 16]), &big).is_err());
    assert!(format!("{mk:?}").contains("identifier") && !format!("{mk:?}").contains("secret"));
}
