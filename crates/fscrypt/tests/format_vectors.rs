//! Every entry of `testdata/vectors/fscrypt_format_vectors.json` (spec §13) as a
//! check. A failure names the section and entry index.
//!
//! The vectors directory is `$FSCRYPT_VECTORS_DIR`, or the repository's own
//! `testdata/vectors` (a copy of the agreed set; see its README).

use fscrypt::crypt_util::{CryptUtilParams, Kdf, UnitCrypter, cipher_by_name};
use fscrypt::nokey::{self, NoKeyName, legacy};
use fscrypt::{
    Context, EncryptionMode, FileType, HkdfContext, InodeCrypt, InodeParams, IvScheme,
    KeyDescriptor, KeyIdentifier, MasterKey, Policy, PolicyFlags, PolicyV1, PolicyV2, dirhash,
    hooks, hw_wrapped, keysetup_v1,
};
use serde_json::Value;

fn load() -> Value {
    test_support::vectors::load("fscrypt_format_vectors.json")
}

fn s<'a>(v: &'a Value, key: &str) -> &'a str {
    v[key]
        .as_str()
        .unwrap_or_else(|| panic!("field {key} missing in {v}"))
}

fn h(v: &Value, key: &str) -> Vec<u8> {
    hex::decode(s(v, key)).unwrap_or_else(|e| panic!("field {key} is not hex: {e}"))
}

fn h16(v: &Value, key: &str) -> [u8; 16] {
    h(v, key).try_into().expect("16 bytes")
}

fn u(v: &Value, key: &str) -> u64 {
    match &v[key] {
        Value::Number(n) => n.as_u64().expect("u64"),
        Value::String(x) => {
            u64::from_str_radix(x.trim_start_matches("0x"), 16).expect("hex number")
        }
        other => panic!("field {key}: {other}"),
    }
}

/// A master key given either as hex or by the name of an `inputs` entry.
fn master(all: &Value, v: &Value, key: &str) -> Vec<u8> {
    let name = s(v, key);
    match all["inputs"][name].as_str() {
        Some(hex) => hex::decode(hex).expect("inputs hex"),
        None => hex::decode(name).expect("master key hex"),
    }
}

/// `pattern(n, seed)` of the vectors' `inputs`.
fn pattern(n: usize, seed: usize) -> Vec<u8> {
    (0..n)
        .map(|i| ((i * 31 + seed * 7 + (i >> 8)) & 0xff) as u8)
        .collect()
}

/// The other mode of the valid pair (spec §1.2).
fn contents_for_filenames(f: u8) -> u8 {
    match f {
        4 | 10 => 1,
        6 => 5,
        8 => 7,
        9 => 9,
        other => panic!("unexpected filenames mode {other}"),
    }
}
fn filenames_for_contents(c: u8) -> u8 {
    match c {
        1 => 4,
        5 => 6,
        7 => 8,
        9 => 9,
        other => panic!("unexpected contents mode {other}"),
    }
}

fn policy(
    version: u64,
    contents: u8,
    filenames: u8,
    flags: u8,
    log2_du: u8,
    mk: &MasterKey,
) -> Policy {
    if version == 1 {
        Policy::V1(PolicyV1 {
            contents_mode: EncryptionMode(contents),
            filenames_mode: EncryptionMode(filenames),
            flags: PolicyFlags(flags),
            master_key_descriptor: mk.e4crypt_descriptor(),
        })
    } else {
        Policy::V2(PolicyV2 {
            contents_mode: EncryptionMode(contents),
            filenames_mode: EncryptionMode(filenames),
            flags: PolicyFlags(flags),
            log2_data_unit_size: log2_du,
            master_key_identifier: mk.identifier(),
        })
    }
}

#[test]
fn key_identifiers() {
    let all = load();
    let entries = all["key_identifiers"].as_array().unwrap();
    assert_eq!(entries.len(), 6);
    for (i, e) in entries.iter().enumerate() {
        let mk = MasterKey::new(&master(&all, e, "master_key")).unwrap();
        assert_eq!(u(e, "hkdf_context"), 1);
        assert_eq!(
            mk.identifier().to_string(),
            s(e, "key_identifier"),
            "key_identifiers[{i}]"
        );
        if let Some(expected) = e["expected_from_google/fscryptctl test.py"].as_str() {
            assert_eq!(
                mk.identifier().to_string(),
                expected,
                "key_identifiers[{i}] fscryptctl"
            );
        }
        let d: KeyDescriptor = s(e, "e4crypt_style_v1_descriptor").parse().unwrap();
        assert_eq!(
            mk.e4crypt_descriptor(),
            d,
            "key_identifiers[{i}] descriptor"
        );
        // The same through the crypt tool's --dump-key-identifier logic.
        let p = CryptUtilParams {
            kdf: Kdf::HkdfSha512,
            ..Default::default()
        };
        let id = fscrypt::crypt_util::key_identifier(mk.as_bytes(), &p).unwrap();
        assert_eq!(id, mk.identifier(), "key_identifiers[{i}] crypt tool");
    }
}

#[test]
fn v2_hkdf_subkeys() {
    let all = load();
    let entries = all["v2_hkdf_subkeys"].as_array().unwrap();
    assert_eq!(entries.len(), 17);
    let uuid = h16(&all["inputs"], "fs_uuid");
    for (i, e) in entries.iter().enumerate() {
        let mk = MasterKey::new(&master(&all, e, "master_key")).unwrap();
        let ctx_num = u(e, "hkdf_context") as u8;
        let ctx = match ctx_num {
            2 => HkdfContext::PerFileEncKey,
            3 => HkdfContext::DirectKey,
            4 => HkdfContext::IvInoLblk64Key,
            5 => HkdfContext::DirhashKey,
            6 => HkdfContext::IvInoLblk32Key,
            7 => HkdfContext::InodeHashKey,
            n => panic!("unexpected context {n}"),
        };
        let info = h(e, "hkdf_info_after_context_byte");
        let mut full = b"fscrypt\0".to_vec();
        full.push(ctx_num);
        full.extend_from_slice(&info);
        assert_eq!(
            hex::encode(&full),
            s(e, "full_hkdf_info"),
            "v2_hkdf_subkeys[{i}] info"
        );
        let want = h(e, "output");
        let mut out = vec![0u8; want.len()];
        mk.hkdf_expand(ctx, &info, &mut out).unwrap();
        assert_eq!(out, want, "v2_hkdf_subkeys[{i}] {}", s(e, "description"));

        // The same key through the policy-level derivation.
        let (flags, mode) = match ctx_num {
            2 => (0u8, None),
            3 => (0x04, Some(info[0])),
            4 => (0x08, Some(info[0])),
            6 => (0x10, Some(info[0])),
            _ => continue,
        };
        let mode = mode.unwrap_or_else(|| {
            // Per-file keys: the description names the mode.
            let d = s(e, "description");
            let m = d.split("mode ").nth(1).unwrap().split(' ').next().unwrap();
            m.parse().unwrap()
        });
        let p = policy(2, 1, 4, flags, 0, &mk);
        let nonce = h16(&all["inputs"], "nonce");
        let raw = mk
            .derive_raw_key(&p, EncryptionMode(mode), &nonce, &uuid)
            .unwrap();
        assert_eq!(
            &raw[..],
            &want[..],
            "v2_hkdf_subkeys[{i}] via derive_raw_key"
        );
        if ctx_num == 5 {
            unreachable!();
        }
    }
    // Dirhash and inode-hash keys through their dedicated accessors.
    let mk = MasterKey::new(&hex::decode(s(&all["inputs"], "MK64")).unwrap()).unwrap();
    let nonce = h16(&all["inputs"], "nonce");
    for e in entries {
        match u(e, "hkdf_context") {
            5 => assert_eq!(&mk.dirhash_key(&nonce).as_bytes()[..], &h(e, "output")[..]),
            7 => assert_eq!(&mk.inode_hash_key()[..], &h(e, "output")[..]),
            _ => {}
        }
    }
}

#[test]
fn v1_kdf() {
    let all = load();
    let entries = all["v1_kdf"].as_array().unwrap();
    assert_eq!(entries.len(), 3);
    for (i, e) in entries.iter().enumerate() {
        let mk = master(&all, e, "master_key");
        let want = h(e, "derived_key");
        let got = keysetup_v1::derive_v1_file_key(&mk, &h16(e, "nonce"), want.len()).unwrap();
        assert_eq!(&got[..want.len()], &want[..], "v1_kdf[{i}]");
    }
}

#[test]
fn iv_ino_lblk_32_hashed_inode_and_wrap() {
    let all = load();
    let entries = all["iv_ino_lblk_32_hashed_inode"].as_array().unwrap();
    assert_eq!(entries.len(), 4);
    for (i, e) in entries.iter().enumerate() {
        let mk = MasterKey::new(&master(&all, e, "master_key")).unwrap();
        assert_eq!(
            &mk.inode_hash_key()[..],
            &h(e, "siphash_key")[..],
            "hashed_inode[{i}] key"
        );
        let ino = u(e, "inode_number");
        assert_eq!(hex::encode(ino.to_le_bytes()), s(e, "siphash_input_le64"));
        let sip = fscrypt_crypto::siphash24(mk.inode_hash_key(), &ino.to_le_bytes());
        assert_eq!(sip, u(e, "siphash_u64"), "hashed_inode[{i}] siphash");
        assert_eq!(
            mk.hash_inode_number(ino) as u64,
            u(e, "hashed_ino_u32"),
            "hashed_inode[{i}]"
        );
    }
    let wrap = &all["iv_ino_lblk_32_wrap_example"];
    let hashed = u(wrap, "hashed_ino") as u32;
    let examples = wrap["examples"].as_array().unwrap();
    assert_eq!(examples.len(), 4);
    for (i, ex) in examples.iter().enumerate() {
        let iv = IvScheme::IvInoLblk32 { hashed_ino: hashed }
            .iv(u(ex, "index"))
            .unwrap();
        assert_eq!(hex::encode(iv.prefix(16)), s(ex, "iv"), "wrap example {i}");
    }
}

#[test]
fn contents() {
    let all = load();
    let entries = all["contents"].as_array().unwrap();
    assert_eq!(entries.len(), 13);
    for (i, e) in entries.iter().enumerate() {
        let what = format!("contents[{i}] {}", s(e, "description"));
        let mk = MasterKey::new(&master(&all, e, "master_key")).unwrap();
        let version = u(e, "policy_version");
        let cmode = u(e, "contents_mode") as u8;
        let flags = u(e, "flags") as u8;
        let du = u(e, "data_unit_size") as usize;
        let log2 = if du == 4096 {
            0
        } else {
            du.trailing_zeros() as u8
        };
        let p = policy(
            version,
            cmode,
            filenames_for_contents(cmode),
            flags,
            log2,
            &mk,
        );
        let nonce = h16(e, "nonce");
        let uuid = h16(e, "fs_uuid");
        let ino = u(e, "inode_number");
        let raw = mk
            .derive_raw_key(&p, EncryptionMode(cmode), &nonce, &uuid)
            .unwrap();
        assert_eq!(hex::encode(&raw[..]), s(e, "file_enc_key"), "{what}: key");

        let params = InodeParams {
            file_type: FileType::Regular,
            ino,
            fs_uuid: uuid,
            fs_block_size: 4096,
        };
        let f = InodeCrypt::new(&mk, &Context::new(&p, nonce), &params).unwrap();
        assert_eq!(f.data_unit_size(), du, "{what}");
        let first = u(e, "first_data_unit_index");
        let ivs = e["ivs"].as_array().unwrap();
        for (k, iv) in ivs.iter().enumerate() {
            let got = f.iv_scheme().iv(first + k as u64).unwrap();
            assert_eq!(
                hex::encode(got.prefix(f.mode().iv_size)),
                iv.as_str().unwrap(),
                "{what}: iv {k}"
            );
        }
        let ptext = h(e, "ptext");
        let ctext = h(e, "ctext");
        assert_eq!(ptext.len(), ivs.len() * du, "{what}");
        let generator = s(e, "ptext_generator");
        let seed: usize = generator
            .split("seed=")
            .nth(1)
            .unwrap()
            .trim_end_matches(')')
            .parse()
            .unwrap();
        assert_eq!(ptext, pattern(ptext.len(), seed), "{what}: generator");

        let mut buf = ptext.clone();
        f.encrypt_data_units(first, &mut buf).unwrap();
        assert!(buf == ctext, "{what}: ciphertext differs");
        f.decrypt_data_units(first, &mut buf).unwrap();
        assert!(buf == ptext, "{what}: decryption differs");

        // The same through the crypt tool's logic (as xfstests calls it).
        let cipher = EncryptionMode(cmode).info().unwrap();
        let mut cp = CryptUtilParams {
            data_unit_index: first,
            inode_number: ino,
            fs_uuid: Some(uuid),
            file_nonce: Some(nonce),
            mode_num: cmode,
            ..Default::default()
        };
        let fl = PolicyFlags(flags);
        if version == 1 {
            cp.kdf = if fl.direct_key() {
                Kdf::None
            } else {
                Kdf::Aes128Ecb
            };
        } else {
            cp.kdf = Kdf::HkdfSha512;
        }
        cp.direct_key = fl.direct_key();
        cp.iv_ino_lblk_64 = fl.iv_ino_lblk_64();
        cp.iv_ino_lblk_32 = fl.iv_ino_lblk_32();
        if mk.len() < cipher.key_size {
            // xfstests' tool cannot compute this case ("crosscheck": null): like
            // it, the crypt tool refuses a master key shorter than the cipher key.
            assert!(
                UnitCrypter::new(cipher, mk.as_bytes(), &cp).is_err(),
                "{what}"
            );
            continue;
        }
        let mut uc = UnitCrypter::new(cipher, mk.as_bytes(), &cp).unwrap();
        let mut out = ptext.clone();
        for unit in out.chunks_mut(du) {
            assert_eq!(uc.crypt_unit(unit, du, None, false).unwrap(), du);
        }
        assert!(out == ctext, "{what}: crypt tool ciphertext differs");
    }
}

#[test]
fn filenames() {
    let all = load();
    let entries = all["filenames"].as_array().unwrap();
    assert_eq!(entries.len(), 123);
    for (i, e) in entries.iter().enumerate() {
        let what = format!(
            "filenames[{i}] {} len {}",
            s(e, "description"),
            u(e, "name_len")
        );
        let mk = MasterKey::new(&master(&all, e, "master_key")).unwrap();
        let version = u(e, "policy_version");
        let fmode = u(e, "filenames_mode") as u8;
        let flags = u(e, "flags") as u8;
        let p = policy(version, contents_for_filenames(fmode), fmode, flags, 0, &mk);
        assert_eq!(p.flags().padding() as u64, u(e, "padding"), "{what}");
        let nonce = h16(e, "dir_nonce");
        let uuid = h16(e, "fs_uuid");
        let ino = u(e, "dir_inode_number");
        let raw = mk
            .derive_raw_key(&p, EncryptionMode(fmode), &nonce, &uuid)
            .unwrap();
        assert_eq!(hex::encode(&raw[..]), s(e, "dir_key"), "{what}: dir key");
        let params = InodeParams {
            file_type: FileType::Directory,
            ino,
            fs_uuid: uuid,
            fs_block_size: 4096,
        };
        let d = InodeCrypt::new(&mk, &Context::new(&p, nonce), &params).unwrap();
        let iv = d.iv_scheme().iv(0).unwrap();
        assert_eq!(
            hex::encode(iv.prefix(d.mode().iv_size)),
            s(e, "iv"),
            "{what}: iv"
        );

        let name = s(e, "name").as_bytes();
        assert_eq!(name.len() as u64, u(e, "name_len"));
        let ctext = h(e, "ctext");
        assert_eq!(ctext.len() as u64, u(e, "ctext_len"));
        let enc = d.encrypt_filename(name).unwrap();
        assert_eq!(hex::encode(&*enc), s(e, "ctext"), "{what}: ciphertext");
        assert_eq!(
            &*d.decrypt_filename(&ctext).unwrap(),
            name,
            "{what}: decrypt"
        );

        // Current no-key name (linear directory: hash 0/0).
        let nk = nokey::encode(&ctext, 0, 0);
        assert_eq!(&*nk, s(e, "nokey_name"), "{what}: no-key name");
        let dec = NoKeyName::decode(nk.as_bytes()).unwrap();
        assert!(dec.matches(&ctext), "{what}: no-key match");
        let mut other = ctext.clone();
        *other.last_mut().unwrap() ^= 1;
        assert!(
            !dec.matches(&other),
            "{what}: no-key must not match another name"
        );
        assert_eq!(dec.encode(), nk);

        // The same through the hooks a filesystem calls (fs/crypto/hooks.c).
        let l = hooks::FscryptName::for_lookup(Some(&d), name).unwrap();
        assert_eq!(l.disk_name(), Some(&ctext[..]), "{what}: hooks lookup");
        assert_eq!(
            &*hooks::FscryptName::for_create(Some(&d), name).unwrap(),
            &ctext[..],
            "{what}: hooks create"
        );
        assert_eq!(
            &*hooks::present_entry(Some(&d), &ctext, 0, 0).unwrap(),
            name,
            "{what}: hooks present"
        );
        let shown = hooks::present_entry(None, &ctext, 0, 0).unwrap();
        assert_eq!(
            &*shown,
            s(e, "nokey_name").as_bytes(),
            "{what}: hooks no-key"
        );
        let l = hooks::FscryptName::for_lookup(None, &shown).unwrap();
        assert!(
            l.matches(&ctext) && !l.matches(&other),
            "{what}: hooks no-key lookup"
        );

        // Legacy encodings, both ways.
        let old = s(e, "nokey_name_pre_5.15_alphabet");
        assert_eq!(
            legacy::encode_v5_6(&ctext, 0, 0),
            old,
            "{what}: 5.6 no-key name"
        );
        assert!(
            legacy::decode_v5_6(old.as_bytes()).unwrap().matches(&ctext),
            "{what}"
        );
        let older = s(e, "nokey_name_pre_5.6");
        assert_eq!(
            legacy::encode_pre_5_6(&ctext, 0, 0),
            older,
            "{what}: pre-5.6 no-key name"
        );
        assert!(
            legacy::decode_pre_5_6(older.as_bytes())
                .unwrap()
                .matches(&ctext),
            "{what}"
        );

        // The crypt tool in filename mode: --data-unit-size=255 --padding=N.
        let cipher = cipher_by_name(EncryptionMode(fmode).info().unwrap().cipher_name).unwrap();
        let fl = PolicyFlags(flags);
        let cp = CryptUtilParams {
            kdf: if version == 1 {
                if fl.direct_key() {
                    Kdf::None
                } else {
                    Kdf::Aes128Ecb
                }
            } else {
                Kdf::HkdfSha512
            },
            mode_num: fmode,
            file_nonce: Some(nonce),
            direct_key: fl.direct_key(),
            iv_ino_lblk_64: fl.iv_ino_lblk_64(),
            iv_ino_lblk_32: fl.iv_ino_lblk_32(),
            inode_number: ino,
            fs_uuid: Some(uuid),
            ..Default::default()
        };
        let mut uc = UnitCrypter::new(cipher, mk.as_bytes(), &cp).unwrap();
        let mut buf = [0u8; 255];
        buf[..name.len()].copy_from_slice(name);
        let n = uc
            .crypt_unit(&mut buf, name.len(), Some(fl.padding()), false)
            .unwrap();
        assert_eq!(hex::encode(&buf[..n]), s(e, "ctext"), "{what}: crypt tool");
    }
}

#[test]
fn nokey_names_with_dirhash() {
    let all = load();
    let entries = all["nokey_names"].as_array().unwrap();
    assert_eq!(entries.len(), 10);
    for (i, e) in entries.iter().enumerate() {
        let ct = h(e, "ciphertext");
        let (hash, minor) = (u(e, "hash") as u32, u(e, "minor_hash") as u32);
        let nk = nokey::encode(&ct, hash, minor);
        assert_eq!(&*nk, s(e, "nokey_name"), "nokey_names[{i}]");
        assert_eq!(nk.len() as u64, u(e, "nokey_name_len"));
        let dec = NoKeyName::decode(nk.as_bytes()).unwrap();
        assert_eq!(
            (dec.hash, dec.minor_hash),
            (hash, minor),
            "nokey_names[{i}]"
        );
        assert!(dec.matches(&ct), "nokey_names[{i}] match");
        // The decoded struct: dirhash words ‖ bytes ‖ (sha256).
        let st = h(e, "decoded_struct");
        assert_eq!(st.len() as u64, u(e, "decoded_struct_len"));
        assert_eq!(
            &st[8..8 + dec.ciphertext_prefix().len()],
            dec.ciphertext_prefix()
        );
        assert_eq!(
            dec.ciphertext().is_none(),
            st.len() == 189,
            "nokey_names[{i}] long form"
        );
        let mut other = ct.clone();
        *other.last_mut().unwrap() ^= 0x80;
        assert!(
            !dec.matches(&other),
            "nokey_names[{i}] tail change must not match"
        );
    }
}

#[test]
fn casefold_dirhash() {
    let all = load();
    let entries = all["casefold_dirhash"].as_array().unwrap();
    assert_eq!(entries.len(), 3);
    for (i, e) in entries.iter().enumerate() {
        let mk = MasterKey::new(&master(&all, e, "dir_master_key")).unwrap();
        let nonce = h16(e, "dir_nonce");
        let key = mk.dirhash_key(&nonce);
        assert_eq!(
            &key.as_bytes()[..],
            &h(e, "dirhash_key")[..],
            "casefold_dirhash[{i}] key"
        );
        let name = h(e, "casefolded_name_utf8");
        let sip = dirhash::fname_siphash(&key, &name);
        assert_eq!(sip, u(e, "siphash_u64"), "casefold_dirhash[{i}]");
        let (hash, minor) = dirhash::ext4_hash(sip);
        assert_eq!(hash as u64, u(e, "ext4_hash"));
        assert_eq!(minor as u64, u(e, "ext4_minor_hash"));
        assert_eq!(dirhash::f2fs_hash(sip) as u64, u(e, "f2fs_hash_le32_value"));
        // Through a directory's InodeCrypt.
        let p = policy(2, 1, 4, 3, 0, &mk);
        let params = InodeParams {
            file_type: FileType::Directory,
            ino: 2,
            fs_uuid: [0; 16],
            fs_block_size: 4096,
        };
        let d = InodeCrypt::new(&mk, &Context::new(&p, nonce), &params).unwrap();
        assert_eq!(d.dirhash(&name), Some(sip));
    }
}

#[test]
fn symlink() {
    let all = load();
    let e = &all["symlink"];
    let mk = MasterKey::new(&master(&all, e, "master_key")).unwrap();
    let nonce = h16(e, "symlink_nonce");
    let p = policy(2, 1, 4, 3, 0, &mk);
    let raw = mk
        .derive_raw_key(&p, EncryptionMode::AES_256_CTS, &nonce, &[0; 16])
        .unwrap();
    assert_eq!(hex::encode(&raw[..]), s(e, "symlink_key"));
    let params = InodeParams {
        file_type: FileType::Symlink,
        ino: 77,
        fs_uuid: [0; 16],
        fs_block_size: 4096,
    };
    let l = InodeCrypt::new(&mk, &Context::new(&p, nonce), &params).unwrap();
    let blob = l.encrypt_symlink(s(e, "target").as_bytes(), 4096).unwrap();
    assert_eq!(hex::encode(&blob), s(e, "on_disk_blob"));
    assert_eq!(hex::encode(&blob[2..blob.len() - 1]), s(e, "ciphertext"));
    assert_eq!(l.decrypt_symlink(&blob).unwrap(), s(e, "target").as_bytes());
    assert_eq!(
        hooks::get_symlink(Some(&l), &blob).unwrap(),
        s(e, "target").as_bytes()
    );
    let ct = h(e, "ciphertext");
    assert_eq!(
        hooks::get_symlink(None, &blob).unwrap(),
        nokey::encode(&ct, 0, 0).as_bytes()
    );
}

#[test]
fn hw_wrapped_key_xfstests_model() {
    let all = load();
    let e = &all["hw_wrapped_key_xfstests_model"];
    let raw = h(e, "unwrapped_raw_key");
    let sw = hw_wrapped::derive_sw_secret(&raw).unwrap();
    assert_eq!(hex::encode(&sw[..]), s(e, "sw_secret"));
    let ik = hw_wrapped::derive_inline_encryption_key(&raw).unwrap();
    assert_eq!(hex::encode(&ik[..]), s(e, "inline_encryption_key"));
    let mk = MasterKey::from_hw_wrapped_software_secret(&sw);
    let want: KeyIdentifier = s(e, "key_identifier_ctx8").parse().unwrap();
    assert_eq!(mk.identifier(), want);
    let id = fscrypt::crypt_util::key_identifier(
        &raw,
        &CryptUtilParams {
            kdf: Kdf::HkdfSha512,
            enable_hw_kdf: true,
            ..Default::default()
        },
    )
    .unwrap();
    assert_eq!(id, want);

    let ex = &e["contents_example"];
    let uuid = h16(&all["inputs"], "fs_uuid");
    let cp = CryptUtilParams {
        kdf: Kdf::HkdfSha512,
        enable_hw_kdf: true,
        use_inlinecrypt_key: true,
        iv_ino_lblk_64: true,
        mode_num: 1,
        inode_number: u(ex, "inode_number"),
        fs_uuid: Some(uuid),
        data_unit_index: u(ex, "data_unit_index"),
        ..Default::default()
    };
    let cipher = cipher_by_name("AES-256-XTS").unwrap();
    let mut uc = UnitCrypter::new(cipher, &raw, &cp).unwrap();
    assert_eq!(hex::encode(uc.next_iv().prefix(16)), s(ex, "iv"));
    let mut buf = h(ex, "ptext");
    let n = buf.len();
    assert_eq!(uc.crypt_unit(&mut buf, n, None, false).unwrap(), n);
    assert_eq!(hex::encode(&buf), s(ex, "ctext"));

    // A hw-wrapped master key refuses software contents keys and non-LBLK policies.
    let p = policy(2, 1, 4, 0x0b, 0, &mk);
    let reg = InodeParams {
        file_type: FileType::Regular,
        ino: 12,
        fs_uuid: uuid,
        fs_block_size: 4096,
    };
    assert!(InodeCrypt::new(&mk, &Context::new(&p, [1; 16]), &reg).is_err());
    let dir = InodeParams {
        file_type: FileType::Directory,
        ..reg
    };
    assert!(InodeCrypt::new(&mk, &Context::new(&p, [1; 16]), &dir).is_ok());
    let p0 = policy(2, 1, 4, 0x03, 0, &mk);
    assert!(InodeCrypt::new(&mk, &Context::new(&p0, [1; 16]), &dir).is_err());
}
