//! The frozen fixture `tests/fixtures/vault-v1` (made once by
//! `tests/fixtures/make-vault-v1.sh`) must stay readable by every later
//! version. This reads it without FUSE: the vault config through
//! `fscrypt_fuse::vault`, the tree through `EncryptedFs`, and compares it
//! with `tests/fixtures/vault-v1.manifest.json`. The mounted check is in
//! `crates/fscrypt-cli/tests/fixture_vault_v1.rs`.

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::path::{Path, PathBuf};

use fscrypt_fuse::vault::Vault;
use fscrypt_fuse::{EncryptedFs, FsOptions, InodeNo, ROOT};

const FIXTURES: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../../tests/fixtures");
const PASSPHRASE: &[u8] = b"fscrypt-rs vault-v1 fixture";

struct TempDir(PathBuf);

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn copy_tree(src: &Path, dst: &Path) {
    std::fs::create_dir(dst).unwrap();
    for e in std::fs::read_dir(src).unwrap() {
        let e = e.unwrap();
        let (s, d) = (e.path(), dst.join(e.file_name()));
        let ft = e.file_type().unwrap();
        if ft.is_symlink() {
            std::os::unix::fs::symlink(std::fs::read_link(&s).unwrap(), &d).unwrap();
        } else if ft.is_dir() {
            copy_tree(&s, &d);
        } else {
            std::fs::copy(&s, &d).unwrap();
        }
    }
}

type Tree = BTreeMap<String, (String, u64, String)>;

/// The expected tree: path → (type, size or 0, sha256 hex or symlink target).
fn manifest() -> Tree {
    let text = std::fs::read_to_string(format!("{FIXTURES}/vault-v1.manifest.json")).unwrap();
    let v: serde_json::Value = serde_json::from_str(&text).unwrap();
    v.as_array()
        .unwrap()
        .iter()
        .map(|e| {
            let kind = e["type"].as_str().unwrap().to_owned();
            let size = e["size"].as_u64().unwrap_or(0);
            let extra = e["sha256"]
                .as_str()
                .or(e["target"].as_str())
                .unwrap_or("")
                .to_owned();
            (e["path"].as_str().unwrap().to_owned(), (kind, size, extra))
        })
        .collect()
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

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
                out.insert(rel.clone(), ("dir".into(), 0, String::new()));
                walk(fs, ino, &format!("{rel}/"), out);
            }
            fuser::FileType::Symlink => {
                let target = fs.readlink(ino).unwrap();
                let target = String::from_utf8(target).unwrap();
                out.insert(rel, ("symlink".into(), 0, target));
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
                let sum = hex(&fscrypt_crypto::sha256(&data));
                out.insert(rel, ("file".into(), data.len() as u64, sum));
            }
        }
    }
}

#[test]
fn vault_v1_fixture_reads_without_fuse() {
    let src = Path::new(FIXTURES).join("vault-v1");
    let tmp =
        TempDir(std::env::temp_dir().join(format!("fscrypt-fixture-v1-{}", std::process::id())));
    let _ = std::fs::remove_dir_all(&tmp.0);
    copy_tree(&src, &tmp.0);

    let vault = Vault::open(&tmp.0).unwrap();
    let policy = *vault.policy();
    assert_eq!(policy.contents_mode, fscrypt::EncryptionMode::AES_256_XTS);
    assert_eq!(policy.filenames_mode, fscrypt::EncryptionMode::AES_256_CTS);
    assert_eq!(policy.flags.padding(), 32);
    let key = std::fs::read(format!("{FIXTURES}/vault-v1.key")).unwrap();
    let master = vault.unlock_with_key_file(&key).unwrap();
    // The passphrase protector opens the same master key.
    let again = vault.unlock_with_passphrase(PASSPHRASE).unwrap();
    assert_eq!(master.as_bytes(), again.as_bytes());
    assert!(matches!(
        vault.unlock_with_passphrase(b"not the passphrase"),
        Err(fscrypt_fuse::vault::Error::WrongPassphrase)
    ));

    let fs = EncryptedFs::new(&tmp.0, policy, Some(master), FsOptions { read_only: true }).unwrap();
    let mut got = Tree::new();
    walk(&fs, ROOT, "", &mut got);
    assert_eq!(got, manifest());
}
