//! The frozen fixture `tests/fixtures/vault-v2` (vault format 2, made once
//! by `tests/fixtures/make-vault-v2.sh`) must stay readable by every later
//! version. This reads it without FUSE (the vault config, then the tree
//! through `EncryptedFs`), compares it with
//! `tests/fixtures/vault-v2.manifest.json`, and checks that every stored data
//! unit is byte-identical to `fscrypt::InodeCrypt`'s ciphertext (what ext4
//! with kernel fscrypt stores) and every length is format 2's encoding of
//! the size. The mounted check is in
//! `crates/fscrypt-cli/tests/fixture_vaults.rs`.

use std::os::unix::fs::MetadataExt;

use fscrypt::{Context, FileType, InodeCrypt, InodeParams};
use fscrypt_fuse::layout::{self, EntryName, Format, HEADER_SIZE, Header, HeaderKind};
use fscrypt_fuse::vault::Vault;
use fscrypt_fuse::{EncryptedFs, FsOptions};
use test_support::TempDir;
use test_support::fixture::{copy_vault_v2, vault_v2_manifest};
use test_support::fuse::read_tree;

const PASSPHRASE: &[u8] = b"fscrypt-rs vault-v2 fixture";

/// Every user regular file below the backing directory `dir`.
fn backing_files(dir: &std::path::Path, out: &mut Vec<std::path::PathBuf>) {
    for e in std::fs::read_dir(dir).unwrap() {
        let e = e.unwrap();
        let name = e.file_name();
        let ft = e.file_type().unwrap();
        match layout::classify(name.as_encoded_bytes()) {
            EntryName::Short(_) | EntryName::Long if ft.is_dir() => backing_files(&e.path(), out),
            EntryName::Short(_) | EntryName::Long if ft.is_file() => out.push(e.path()),
            _ => {}
        }
    }
}

#[test]
fn vault_v2_fixture_reads_without_fuse_and_holds_kernel_ciphertext() {
    let tmp = TempDir::new("fixture-v2");
    let (cipher, key_file) = copy_vault_v2(tmp.path());

    let vault = Vault::open(&cipher).unwrap();
    let policy = *vault.policy();
    assert_eq!(policy.contents_mode, fscrypt::EncryptionMode::AES_256_XTS);
    assert_eq!(policy.filenames_mode, fscrypt::EncryptionMode::AES_256_CTS);
    let key = std::fs::read(&key_file).unwrap();
    let master = vault.unlock_with_key_file(&key).unwrap();
    let again = vault.unlock_with_passphrase(PASSPHRASE).unwrap();
    assert_eq!(master.as_bytes(), again.as_bytes());
    let master2 = vault.unlock_with_key_file(&key).unwrap();

    let fs = EncryptedFs::new(
        &cipher,
        policy,
        Some(master),
        FsOptions {
            read_only: true,
            ..FsOptions::default()
        },
    )
    .unwrap();
    assert_eq!(fs.format(), Format::V2);
    let (got, data) = read_tree(&fs);
    assert_eq!(got, vault_v2_manifest());

    // The bytes: header (format 2, size field zero), length = format 2's
    // encoding of the size, each stored unit = the kernel's ciphertext of the
    // zero-padded plaintext unit, an unstored (all-zero) unit only where the
    // plaintext is zeros, a zero trailer.
    let du = 4096usize;
    let mut files = Vec::new();
    backing_files(&cipher, &mut files);
    assert_eq!(files.len(), data.len());
    let mut checked_units = 0;
    for b in files {
        let raw = std::fs::read(&b).unwrap();
        let plain = &data[&std::fs::metadata(&b).unwrap().ino()];
        let h = Header::parse(&raw, HeaderKind::File).unwrap();
        assert_eq!((h.format, h.size), (Format::V2, 0), "{}", b.display());
        assert_eq!(
            raw.len() as u64,
            layout::len_for_size_v2(plain.len() as u64, du as u64).unwrap()
        );
        let ctx = Context::parse(&layout::context_bytes(&h.context)).unwrap();
        let crypt = InodeCrypt::new(
            &master2,
            &ctx,
            &InodeParams {
                file_type: FileType::Regular,
                ino: 0,
                fs_uuid: [0u8; 16],
                fs_block_size: 4096,
            },
        )
        .unwrap();
        let units = plain.len().div_ceil(du);
        for i in 0..units {
            let mut unit = vec![0u8; du];
            let end = ((i + 1) * du).min(plain.len());
            unit[..end - i * du].copy_from_slice(&plain[i * du..end]);
            let at = HEADER_SIZE as usize + i * du;
            let stored = &raw[at..at + du];
            if stored.iter().all(|&x| x == 0) {
                assert!(unit.iter().all(|&x| x == 0), "a hole where data is");
                continue;
            }
            crypt.encrypt_data_units(i as u64, &mut unit).unwrap();
            assert_eq!(stored, &unit[..], "{}: data unit {i}", b.display());
            checked_units += 1;
        }
        assert!(
            raw[HEADER_SIZE as usize + units * du..]
                .iter()
                .all(|&x| x == 0)
        );
    }
    assert!(checked_units >= 10, "{checked_units} units checked");
}
