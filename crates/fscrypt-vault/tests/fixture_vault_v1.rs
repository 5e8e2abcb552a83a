//! The frozen fixture `tests/fixtures/vault-v1` opens and unlocks with both
//! protectors through this crate alone (no FUSE), and its root metadata
//! file and names follow [`fscrypt_vault::layout`]. Read-only: nothing is
//! written into the checkout. The tree itself is checked by
//! `crates/fscrypt-fuse/tests/fixture_vault_v1.rs` (without mounting) and
//! `crates/fscrypt-cli/tests/fixture_vaults.rs` (mounted).

use fscrypt::{Context, EncryptionMode};
use fscrypt_vault::layout::{self, EntryName, Header, HeaderKind};
use fscrypt_vault::{Error, Vault};
use test_support::fixture::fixtures_dir;

const PASSPHRASE: &[u8] = b"fscrypt-rs vault-v1 fixture";

#[test]
fn fixture_opens_and_unlocks_with_both_protectors() {
    let vault = Vault::open(&fixtures_dir().join("vault-v1")).unwrap();
    assert!(vault.has_passphrase() && vault.has_key_file());
    assert_eq!(
        vault.key_identifier().to_string(),
        "d5389fd634bda28c4cb7fbbbe6ee2275"
    );
    assert_eq!(vault.policy().contents_mode, EncryptionMode::AES_256_XTS);
    assert_eq!(vault.policy().filenames_mode, EncryptionMode::AES_256_CTS);

    let key = std::fs::read(fixtures_dir().join("vault-v1.key")).unwrap();
    let by_file = vault.unlock_with_key_file(&key).unwrap();
    let by_pass = vault.unlock_with_passphrase(PASSPHRASE).unwrap();
    assert_eq!(by_file.as_bytes(), by_pass.as_bytes());
    assert_eq!(by_file.identifier(), vault.key_identifier());
    assert!(matches!(
        vault.unlock_with_passphrase(b"not the passphrase"),
        Err(Error::WrongPassphrase)
    ));
    let raw = vault.unwrap_with_key_file(&key).unwrap();
    assert_eq!(&*raw, by_file.as_bytes());
}

#[test]
fn fixture_root_and_names_follow_the_layout() {
    let vault = Vault::open(&fixtures_dir().join("vault-v1")).unwrap();
    let meta = std::fs::read(fixtures_dir().join("vault-v1").join(layout::DIR_META_NAME)).unwrap();
    let header = Header::parse(&meta, HeaderKind::Directory).unwrap();
    match Context::parse(&layout::context_bytes(&header.context)).unwrap() {
        Context::V2(c) => assert_eq!(c.policy, *vault.policy()),
        other => panic!("root context is not v2: {other:?}"),
    }
    let mut short = 0;
    for entry in std::fs::read_dir(fixtures_dir().join("vault-v1")).unwrap() {
        let name = entry.unwrap().file_name();
        match layout::classify(name.as_encoded_bytes()) {
            EntryName::Short(ct) => {
                assert_eq!(*layout::BackingName::from_ciphertext(&ct).name, *name);
                short += 1;
            }
            EntryName::Long | EntryName::Internal => {}
            EntryName::Invalid | EntryName::Conflict(_) => {
                panic!("foreign name {name:?} in the fixture")
            }
        }
    }
    assert!(short > 0, "the fixture root has encrypted entries");
}
