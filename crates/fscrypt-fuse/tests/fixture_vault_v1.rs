//! The frozen fixture `tests/fixtures/vault-v1` (made once by
//! `tests/fixtures/make-vault-v1.sh`) must stay readable by every later
//! version. This reads it without FUSE: the vault config through
//! `fscrypt_fuse::vault`, the tree through `EncryptedFs`, and compares it
//! with `tests/fixtures/vault-v1.manifest.json`. The mounted check is in
//! `crates/fscrypt-cli/tests/fixture_vaults.rs`.

use fscrypt_fuse::vault::Vault;
use fscrypt_fuse::{EncryptedFs, FsOptions};
use test_support::TempDir;
use test_support::fixture::{copy_vault_v1, vault_v1_manifest};
use test_support::fuse::read_tree;

const PASSPHRASE: &[u8] = b"fscrypt-rs vault-v1 fixture";

#[test]
fn vault_v1_fixture_reads_without_fuse() {
    let tmp = TempDir::new("fixture-v1");
    let (cipher, key_file) = copy_vault_v1(tmp.path());

    let vault = Vault::open(&cipher).unwrap();
    let policy = *vault.policy();
    assert_eq!(policy.contents_mode, fscrypt::EncryptionMode::AES_256_XTS);
    assert_eq!(policy.filenames_mode, fscrypt::EncryptionMode::AES_256_CTS);
    assert_eq!(policy.flags.padding(), 32);
    let key = std::fs::read(&key_file).unwrap();
    let master = vault.unlock_with_key_file(&key).unwrap();
    // The passphrase protector opens the same master key.
    let again = vault.unlock_with_passphrase(PASSPHRASE).unwrap();
    assert_eq!(master.as_bytes(), again.as_bytes());
    assert!(matches!(
        vault.unlock_with_passphrase(b"not the passphrase"),
        Err(fscrypt_fuse::vault::Error::WrongPassphrase)
    ));

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
    let (got, _) = read_tree(&fs);
    assert_eq!(got, vault_v1_manifest());
}
