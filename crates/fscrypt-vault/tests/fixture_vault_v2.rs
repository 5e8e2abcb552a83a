//! The frozen fixture `tests/fixtures/vault-v2` (vault format 2) opens and
//! unlocks with both protectors through this crate alone, its root metadata
//! says format 2, and `fsck` finds it clean (the fixture `vault-v1` too, by
//! format 1's rules). Read-only except for copies in temporary directories.

use fscrypt::EncryptionMode;
use fscrypt_vault::layout::{self, Format, Header, HeaderKind};
use fscrypt_vault::{Vault, fsck};
use test_support::TempDir;
use test_support::fixture::{copy_vault, fixtures_dir};

#[test]
fn fixture_v2_opens_unlocks_and_is_format_2() {
    let dir = fixtures_dir().join("vault-v2");
    let vault = Vault::open(&dir).unwrap();
    assert!(vault.has_passphrase() && vault.has_key_file());
    assert_eq!(vault.policy().contents_mode, EncryptionMode::AES_256_XTS);
    let key = std::fs::read(fixtures_dir().join("vault-v2.key")).unwrap();
    let by_file = vault.unlock_with_key_file(&key).unwrap();
    let by_pass = vault
        .unlock_with_passphrase(b"fscrypt-rs vault-v2 fixture")
        .unwrap();
    assert_eq!(by_file.as_bytes(), by_pass.as_bytes());
    let meta = std::fs::read(dir.join(layout::DIR_META_NAME)).unwrap();
    assert_eq!(
        Header::parse(&meta, HeaderKind::Directory).unwrap().format,
        Format::V2
    );
    assert_eq!(fscrypt_vault::read_format(&dir).unwrap(), Format::V2);
    assert_eq!(
        fscrypt_vault::read_format(&fixtures_dir().join("vault-v1")).unwrap(),
        Format::V1
    );
}

#[test]
fn fsck_finds_both_fixtures_clean_with_the_key() {
    for name in ["vault-v1", "vault-v2"] {
        let tmp = TempDir::new(&format!("fsck-{name}"));
        let (cipher, key_file) = copy_vault(tmp.path(), name);
        let vault = Vault::open(&cipher).unwrap();
        let master = vault
            .unlock_with_key_file(&std::fs::read(&key_file).unwrap())
            .unwrap();
        let opts = fsck::Options {
            master: Some(&master),
            repair: false,
            check_clean_marker: false,
        };
        let report = fsck::check(&cipher, vault.policy(), &opts).unwrap();
        assert!(report.problems.is_empty(), "{name}: {:#?}", report.problems);
        assert!(report.stats.files >= 8, "{name}: {:?}", report.stats);
    }
}

#[test]
fn fsck_reports_format_2_lengths_that_encode_no_size() {
    let tmp = TempDir::new("fsck-v2-bad");
    let (cipher, _) = copy_vault(tmp.path(), "vault-v2");
    let vault = Vault::open(&cipher).unwrap();
    // The smallest user file of the root: give it a length no size has
    // (4096 + m with 0 < m < 4096), and give another the other format's
    // version byte.
    let mut files: Vec<_> = std::fs::read_dir(&cipher)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| {
            p.is_file()
                && matches!(
                    layout::classify(p.file_name().unwrap().as_encoded_bytes()),
                    layout::EntryName::Short(_)
                )
        })
        .collect();
    files.sort();
    let f = std::fs::OpenOptions::new()
        .write(true)
        .open(&files[0])
        .unwrap();
    f.set_len(4096 + 5).unwrap();
    let mut raw = std::fs::read(&files[1]).unwrap();
    let mut h = Header::parse(&raw, HeaderKind::File).unwrap();
    h.format = Format::V1;
    raw[..layout::HEADER_USED].copy_from_slice(&h.to_bytes());
    std::fs::write(&files[1], raw).unwrap();
    let report = fsck::check(&cipher, vault.policy(), &fsck::Options::default()).unwrap();
    let kinds: Vec<&str> = report.problems.iter().map(|p| p.kind.as_str()).collect();
    assert_eq!(kinds.len(), 2, "{kinds:?}");
    assert!(
        kinds.contains(&"bad-length") && kinds.contains(&"bad-version"),
        "{kinds:?}"
    );
}
