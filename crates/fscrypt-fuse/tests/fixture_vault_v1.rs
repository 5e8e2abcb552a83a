//! The frozen fixture `tests/fixtures/vault-v1` (made once by
//! `tests/fixtures/make-vault-v1.sh`) must stay readable by every later
//! version. This reads it without FUSE: the vault config through
//! `fscrypt_fuse::vault`, the tree through `EncryptedFs`, and compares it
//! with `tests/fixtures/vault-v1.manifest.json`. The mounted check is in
//! `crates/fscrypt-cli/tests/fixture_vault_v1.rs`.

use std::ffi::OsString;

use fscrypt_fuse::vault::Vault;
use fscrypt_fuse::{EncryptedFs, FsOptions, InodeNo, ROOT};
use test_support::TempDir;
use test_support::fixture::{
    Tree, copy_vault_v1, dir_entry, file_entry, symlink_entry, vault_v1_manifest,
};

const PASSPHRASE: &[u8] = b"fscrypt-rs vault-v1 fixture";

fn walk(fs: &EncryptedFs, dir: InodeNo, prefix: &str, out: &mut Tree) {
    let fh = fs.opendir(dir).unwrap();
    let mut names: Vec<OsString> = Vec::new();
    fs.readdir(fh, 0, |_, _, _, name| {
        if name != "." && name != ".." {
            names.push(name.to_owned());
        }
        false
    })
    .unwrap();
    fs.releasedir(fh).unwrap();
    for name in names {
        let attr = fs.lookup(dir, &name).unwrap();
        let ino = InodeNo(attr.ino.0);
        let rel = format!("{prefix}{}", name.to_str().unwrap());
        match attr.kind {
            fuser::FileType::Directory => {
                out.insert(rel.clone(), dir_entry());
                walk(fs, ino, &format!("{rel}/"), out);
            }
            fuser::FileType::Symlink => {
                let target = fs.readlink(ino).unwrap();
                let target = String::from_utf8(target).unwrap();
                out.insert(rel, symlink_entry(&target));
            }
            _ => {
                let fh = fs.open(ino, libc::O_RDONLY).unwrap();
                let mut data = Vec::new();
                let mut buf = Vec::new();
                loop {
                    let r = fs.read(fh, data.len() as u64, 65536, &mut buf).unwrap();
                    if r.is_empty() {
                        break;
                    }
                    data.extend_from_slice(&buf[r]);
                }
                fs.release(fh).unwrap();
                assert_eq!(data.len() as u64, attr.size, "{rel}: size");
                out.insert(rel, file_entry(&data));
            }
        }
    }
}

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

    let fs =
        EncryptedFs::new(&cipher, policy, Some(master), FsOptions { read_only: true }).unwrap();
    let mut got = Tree::new();
    walk(&fs, ROOT, "", &mut got);
    assert_eq!(got, vault_v1_manifest());
}
