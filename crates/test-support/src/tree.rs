//! Recursive walks of a directory tree (symlinks are never followed).

use std::path::{Path, PathBuf};

/// Every entry below `dir` (recursively, pre-order, in readdir order);
/// unreadable directories are skipped.
pub fn walk(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    walk_into(dir, &mut out);
    out
}

fn walk_into(dir: &Path, out: &mut Vec<PathBuf>) {
    if let Ok(rd) = std::fs::read_dir(dir) {
        for e in rd.flatten() {
            let p = e.path();
            out.push(p.clone());
            if e.file_type().is_ok_and(|t| t.is_dir()) {
                walk_into(&p, out);
            }
        }
    }
}

/// Every path below `dir`, each followed by a newline and, for a regular
/// file, its contents: one haystack to search for leaked secrets.
pub fn tree_bytes(dir: &Path) -> Vec<u8> {
    let mut out = Vec::new();
    for p in walk(dir) {
        out.extend_from_slice(p.as_os_str().as_encoded_bytes());
        out.push(b'\n');
        if std::fs::symlink_metadata(&p).is_ok_and(|m| m.is_file()) {
            out.extend(std::fs::read(&p).unwrap_or_default());
        }
    }
    out
}

/// The paths below `dir` whose name, or (for regular files) contents,
/// contain `needle`.
pub fn grep_tree(dir: &Path, needle: &[u8]) -> Vec<PathBuf> {
    let mut hits = Vec::new();
    for p in walk(dir) {
        if crate::contains(p.as_os_str().as_encoded_bytes(), needle) {
            hits.push(p.clone());
        }
        if std::fs::symlink_metadata(&p).is_ok_and(|m| m.is_file())
            && crate::contains(&std::fs::read(&p).unwrap_or_default(), needle)
        {
            hits.push(p);
        }
    }
    hits
}

/// The user entries of the backing directory `dir` of a vault: no internal
/// names (`fscrypt.*`, long names and their side files included), sorted.
pub fn user_entries(dir: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| {
            !p.file_name()
                .unwrap()
                .to_string_lossy()
                .starts_with("fscrypt.")
        })
        .collect();
    v.sort();
    v
}

/// The single user entry of the backing directory `dir` ([`user_entries`]).
///
/// # Panics
/// If there is not exactly one.
pub fn only_user_entry(dir: &Path) -> PathBuf {
    let v = user_entries(dir);
    assert_eq!(v.len(), 1, "expected one backing entry in {dir:?}: {v:?}");
    v[0].clone()
}
