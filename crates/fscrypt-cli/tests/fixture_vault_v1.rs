//! The frozen fixture `tests/fixtures/vault-v1` mounted for real: a copy
//! is mounted with its key file through `fscrypt-rs mount` and compared
//! with `tests/fixtures/vault-v1.manifest.json` through std::fs; then
//! mounted locked. Needs root and /dev/fuse (skips loudly without).

use std::process::Command;

use test_support::fixture::{copy_vault_v1, vault_v1_manifest, walk_dir};
use test_support::mount::wait_unmounted;
use test_support::{MountGuard, TempDir};

const BIN: &str = env!("CARGO_BIN_EXE_fscrypt-rs");

#[test]
fn vault_v1_fixture_mounts_and_matches_manifest() {
    if !test_support::skip::can_mount("vault_v1_fixture_mounts_and_matches_manifest") {
        return;
    }
    let tmp = TempDir::new("cli-fixture-v1");
    let (cipher, key) = copy_vault_v1(tmp.path());
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
    assert_eq!(walk_dir(&mnt), vault_v1_manifest());
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
    let manifest = vault_v1_manifest();
    let expected_top = manifest.keys().filter(|k| !k.contains('/')).count();
    assert_eq!(top.len(), expected_top);
    assert!(top.iter().all(|n| !manifest.contains_key(n)), "{top:?}");
    drop(guard);
}
