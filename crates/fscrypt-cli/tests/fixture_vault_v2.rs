//! The frozen fixture `tests/fixtures/vault-v2` (vault format 2) mounted
//! for real: a copy is mounted with its key file through `fscrypt-rs mount`
//! and compared with `tests/fixtures/vault-v2.manifest.json` through std::fs;
//! then mounted locked. `fscrypt-rs info` shows the data format of both
//! fixtures. Needs root and /dev/fuse for the mounts (skips loudly without).

use std::process::Command;

use test_support::fixture::{copy_vault_v2, vault_v2_manifest, walk_dir};
use test_support::mount::wait_unmounted;
use test_support::{MountGuard, TempDir};

const BIN: &str = env!("CARGO_BIN_EXE_fscrypt-rs");

#[test]
fn vault_v2_fixture_mounts_and_matches_manifest() {
    if !test_support::skip::can_mount("vault_v2_fixture_mounts_and_matches_manifest") {
        return;
    }
    let tmp = TempDir::new("cli-fixture-v2");
    let (cipher, key) = copy_vault_v2(tmp.path());
    let mnt = tmp.sub("mnt");

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
    let guard = MountGuard::new(BIN, &mnt);
    assert_eq!(walk_dir(&mnt), vault_v2_manifest());
    let st = Command::new(BIN).arg("unmount").arg(&mnt).status().unwrap();
    assert!(st.success());
    assert!(wait_unmounted(&mnt, std::time::Duration::from_secs(60)));

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
    let manifest = vault_v2_manifest();
    let expected_top = manifest.keys().filter(|k| !k.contains('/')).count();
    assert_eq!(top.len(), expected_top);
    assert!(top.iter().all(|n| !manifest.contains_key(n)), "{top:?}");
    drop(guard);
}

#[test]
fn info_shows_the_data_format() {
    for (name, want) in [("vault-v1", 1), ("vault-v2", 2)] {
        let dir = test_support::fixture::fixtures_dir().join(name);
        let out = Command::new(BIN).arg("info").arg(&dir).output().unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let text = String::from_utf8(out.stdout).unwrap();
        assert!(
            text.contains(&format!("  data format: {want} (")),
            "{name}: {text}"
        );
        let out = Command::new(BIN)
            .args(["info", "--json"])
            .arg(&dir)
            .output()
            .unwrap();
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(v["data_format"], want, "{name}");
    }
}
