//! The frozen fixture `tests/fixtures/vault-v1` mounted for real: a copy
//! is mounted with its key file through `fscrypt-rs mount` and compared
//! with `tests/fixtures/vault-v1.manifest.json` through std::fs; then
//! mounted locked. Needs root and /dev/fuse (skips loudly without).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

const BIN: &str = env!("CARGO_BIN_EXE_fscrypt-rs");
const FIXTURES: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../../tests/fixtures");

struct TempDir(PathBuf);

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn is_mounted(path: &Path) -> bool {
    let info = std::fs::read_to_string("/proc/self/mountinfo").unwrap();
    let want = path.to_str().unwrap();
    info.lines().any(|l| l.split(' ').nth(4) == Some(want))
}

/// Unmounts on drop.
struct MountGuard(PathBuf);

impl Drop for MountGuard {
    fn drop(&mut self) {
        if is_mounted(&self.0) {
            let _ = Command::new(BIN).arg("unmount").arg(&self.0).status();
        }
        if is_mounted(&self.0) {
            let _ = Command::new("umount").arg("-l").arg(&self.0).status();
        }
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

fn walk(dir: &Path, prefix: &str, out: &mut Tree) {
    for e in std::fs::read_dir(dir).unwrap() {
        let e = e.unwrap();
        let rel = format!("{prefix}{}", e.file_name().to_str().unwrap());
        let meta = std::fs::symlink_metadata(e.path()).unwrap();
        if meta.is_dir() {
            out.insert(rel.clone(), ("dir".into(), 0, String::new()));
            walk(&e.path(), &format!("{rel}/"), out);
        } else if meta.file_type().is_symlink() {
            let target = std::fs::read_link(e.path()).unwrap();
            let target = target.to_str().unwrap().to_owned();
            assert_eq!(meta.len(), target.len() as u64, "{rel}: symlink size");
            out.insert(rel, ("symlink".into(), 0, target));
        } else {
            let data = std::fs::read(e.path()).unwrap();
            assert_eq!(meta.len(), data.len() as u64, "{rel}: size");
            let sum = hex(&fscrypt_crypto::sha256(&data));
            out.insert(rel, ("file".into(), data.len() as u64, sum));
        }
    }
}

#[test]
fn vault_v1_fixture_mounts_and_matches_manifest() {
    let root = rustix::process::geteuid().is_root();
    if !root || !Path::new("/dev/fuse").exists() {
        eprintln!("SKIPPED: the fixture mount test needs root and /dev/fuse (root: {root})");
        return;
    }
    let tmp = TempDir(
        std::env::temp_dir().join(format!("fscrypt-cli-fixture-v1-{}", std::process::id())),
    );
    let _ = std::fs::remove_dir_all(&tmp.0);
    std::fs::create_dir(&tmp.0).unwrap();
    let cipher = tmp.0.join("vault-v1");
    copy_tree(&Path::new(FIXTURES).join("vault-v1"), &cipher);
    let key = tmp.0.join("vault-v1.key");
    std::fs::copy(format!("{FIXTURES}/vault-v1.key"), &key).unwrap();
    let mnt = tmp.0.join("mnt");
    std::fs::create_dir(&mnt).unwrap();

    let out = Command::new(BIN)
        .arg("mount")
        .arg(&cipher)
        .arg(&mnt)
        .arg("--key-file")
        .arg(&key)
        .arg("-o")
        .arg("ro")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let guard = MountGuard(mnt.clone());
    let mut got = Tree::new();
    walk(&mnt, "", &mut got);
    assert_eq!(got, manifest());
    let st = Command::new(BIN).arg("unmount").arg(&mnt).status().unwrap();
    assert!(st.success());
    while is_mounted(&mnt) {
        std::thread::sleep(std::time::Duration::from_millis(10));
    }

    // Locked: the same number of entries at the top, under no-key names.
    let out = Command::new(BIN)
        .arg("mount")
        .arg(&cipher)
        .arg(&mnt)
        .arg("--locked")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let top: Vec<String> = std::fs::read_dir(&mnt)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    let expected_top = manifest().keys().filter(|k| !k.contains('/')).count();
    assert_eq!(top.len(), expected_top);
    assert!(top.iter().all(|n| !manifest().contains_key(n)), "{top:?}");
    drop(guard);
}
