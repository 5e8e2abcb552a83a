//! The frozen fixtures `tests/fixtures/vault-v1` (vault format 1) and
//! `vault-v2` (format 2) mounted for real: a copy is mounted with its key
//! file through `fscrypt-rs mount` and compared with its
//! `NAME.manifest.json` through std::fs; then mounted locked.
//! `fscrypt-rs info` shows the data format of both. Needs root and
//! /dev/fuse for the mounts (skips loudly without).

use std::process::Command;

use test_support::fixture::{copy_vault, manifest, walk_dir};
use test_support::mount::wait_unmounted;
use test_support::{MountGuard, TempDir};

const BIN: &str = env!("CARGO_BIN_EXE_fscrypt-rs");

/// Mounts a copy of the fixture `name` with its key (read-only) and
/// compares it with its manifest, then mounted locked: the same number of
/// top entries, under no-key names.
fn fixture_mounts_and_matches_manifest(test: &str, name: &str) {
    if !test_support::skip::can_mount(test) {
        return;
    }
    let tmp = TempDir::new(&format!("cli-fixture-{name}"));
    let (cipher, key) = copy_vault(tmp.path(), name);
    let mnt = tmp.sub("mnt");
    // Format 3 mounts remember generations: in the test's own directory,
    // never the machine's state directory.
    let state = tmp.sub("state");

    let out = Command::new(BIN)
        .env(fscrypt_vault::integrity::generations::STATE_DIR_ENV, &state)
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
    assert_eq!(walk_dir(&mnt), manifest(name));
    let st = Command::new(BIN).arg("unmount").arg(&mnt).status().unwrap();
    assert!(st.success());
    assert!(wait_unmounted(&mnt, std::time::Duration::from_secs(60)));

    // Locked: the same number of entries at the top, under no-key names.
    let out = Command::new(BIN)
        .env(fscrypt_vault::integrity::generations::STATE_DIR_ENV, &state)
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
    let manifest = manifest(name);
    let expected_top = manifest.keys().filter(|k| !k.contains('/')).count();
    assert_eq!(top.len(), expected_top);
    assert!(top.iter().all(|n| !manifest.contains_key(n)), "{top:?}");
    drop(guard);
}

#[test]
fn vault_v1_fixture_mounts_and_matches_manifest() {
    fixture_mounts_and_matches_manifest("vault_v1_fixture_mounts_and_matches_manifest", "vault-v1");
}

#[test]
fn vault_v2_fixture_mounts_and_matches_manifest() {
    fixture_mounts_and_matches_manifest("vault_v2_fixture_mounts_and_matches_manifest", "vault-v2");
}

#[test]
fn vault_v3_fixture_mounts_and_matches_manifest() {
    fixture_mounts_and_matches_manifest("vault_v3_fixture_mounts_and_matches_manifest", "vault-v3");
}

#[test]
fn info_shows_the_data_format() {
    for (name, want) in [("vault-v1", 1), ("vault-v2", 2), ("vault-v3", 3)] {
        let dir = test_support::fixture::fixtures_dir().join(name);
        let out = Command::new(BIN).arg("info").arg(&dir).output().unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let text = String::from_utf8(out.stdout).unwrap();
        assert!(
            text.contains(&format!("  data format: {want} ("))
                || text.contains("  data format: 3\n"),
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
