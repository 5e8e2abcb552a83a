//! The frozen fixtures of `tests/fixtures` (the vault-v1 and vault-v2 backing stores, their
//! key files and manifests): copying one to a scratch place and the expected
//! tree.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use sha2::Digest;

/// The repository's `tests/fixtures`.
pub fn fixtures_dir() -> PathBuf {
    PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../../tests/fixtures"))
}

/// A copy of `src` at `dst` (which must not exist): directories, regular
/// files and symlinks (as symlinks, never followed).
///
/// # Panics
/// On any I/O error.
pub fn copy_tree(src: &Path, dst: &Path) {
    std::fs::create_dir(dst).unwrap_or_else(|e| panic!("mkdir {}: {e}", dst.display()));
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

/// The vault-v1 fixture copied into `dir`: returns (backing directory
/// `dir/vault-v1`, key file `dir/vault-v1.key`).
pub fn copy_vault_v1(dir: &Path) -> (PathBuf, PathBuf) {
    copy_vault(dir, "vault-v1")
}

/// The vault-v2 fixture (vault format 2) copied into `dir`: returns
/// (backing directory `dir/vault-v2`, key file `dir/vault-v2.key`).
pub fn copy_vault_v2(dir: &Path) -> (PathBuf, PathBuf) {
    copy_vault(dir, "vault-v2")
}

/// The fixture vault `name` (`vault-v1`, `vault-v2`) copied into `dir`:
/// (backing directory `dir/NAME`, key file `dir/NAME.key`).
pub fn copy_vault(dir: &Path, name: &str) -> (PathBuf, PathBuf) {
    let cipher = dir.join(name);
    copy_tree(&fixtures_dir().join(name), &cipher);
    let key = dir.join(format!("{name}.key"));
    std::fs::copy(fixtures_dir().join(format!("{name}.key")), &key).unwrap();
    (cipher, key)
}

/// One entry of a tree: (type `dir`/`file`/`symlink`, size or 0, sha256
/// hex of a file or a symlink's target).
pub type Entry = (String, u64, String);

/// A tree by relative path (`a/b`).
pub type Tree = BTreeMap<String, Entry>;

/// The entry of a directory.
pub fn dir_entry() -> Entry {
    ("dir".into(), 0, String::new())
}

/// The entry of a symlink to `target`.
pub fn symlink_entry(target: &str) -> Entry {
    ("symlink".into(), 0, target.to_owned())
}

/// The entry of a regular file holding `data`.
pub fn file_entry(data: &[u8]) -> Entry {
    (
        "file".into(),
        data.len() as u64,
        hex::encode(sha2::Sha256::digest(data)),
    )
}

/// The expected tree of the vault-v1 fixture
/// (`tests/fixtures/vault-v1.manifest.json`).
pub fn vault_v1_manifest() -> Tree {
    manifest("vault-v1")
}

/// The expected tree of the vault-v2 fixture
/// (`tests/fixtures/vault-v2.manifest.json`).
pub fn vault_v2_manifest() -> Tree {
    manifest("vault-v2")
}

/// The expected tree of the fixture vault `name`
/// (`tests/fixtures/NAME.manifest.json`).
pub fn manifest(name: &str) -> Tree {
    let path = fixtures_dir().join(format!("{name}.manifest.json"));
    let text = std::fs::read_to_string(&path).unwrap();
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

/// The tree below `dir` through std::fs (a mount, say), asserting on the
/// way that a file's and a symlink's `st_size` match what reading gives.
pub fn walk_dir(dir: &Path) -> Tree {
    let mut out = Tree::new();
    walk_into(dir, "", &mut out);
    out
}

fn walk_into(dir: &Path, prefix: &str, out: &mut Tree) {
    for e in std::fs::read_dir(dir).unwrap() {
        let e = e.unwrap();
        let rel = format!("{prefix}{}", e.file_name().to_str().unwrap());
        let meta = std::fs::symlink_metadata(e.path()).unwrap();
        if meta.is_dir() {
            out.insert(rel.clone(), dir_entry());
            walk_into(&e.path(), &format!("{rel}/"), out);
        } else if meta.file_type().is_symlink() {
            let target = std::fs::read_link(e.path()).unwrap();
            let target = target.to_str().unwrap().to_owned();
            assert_eq!(meta.len(), target.len() as u64, "{rel}: symlink size");
            out.insert(rel, symlink_entry(&target));
        } else {
            let data = std::fs::read(e.path()).unwrap();
            assert_eq!(meta.len(), data.len() as u64, "{rel}: size");
            out.insert(rel, file_entry(&data));
        }
    }
}
