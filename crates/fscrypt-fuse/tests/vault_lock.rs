//! One daemon per vault: the lock on the backing root refuses a second
//! mount of a mounted vault (two daemons would serve each other stale
//! names, sizes and inodes) and is released when the mount ends.

use test_support::fuse::Vault;
use test_support::{TempDir, fuse_available, is_mounted};

#[test]
fn a_mounted_vault_cannot_be_mounted_twice() {
    if !fuse_available("a_mounted_vault_cannot_be_mounted_twice") {
        return;
    }
    let mut v = Vault::new("lock");
    let second = TempDir::new("lock-second");
    let err = fscrypt_fuse::mount_background(v.config(true), second.path())
        .expect_err("a second mount of a mounted vault");
    assert!(err.to_string().contains("already mounted"), "{err}");
    assert!(!is_mounted(second.path()));
    assert!(fscrypt_fuse::VaultLock::is_held(v.backing.path()).unwrap());
    // Released with the mount: mounting elsewhere works now.
    if let Some(m) = v.mount.take() {
        m.unmount().unwrap();
    }
    assert!(!fscrypt_fuse::VaultLock::is_held(v.backing.path()).unwrap());
    let m = fscrypt_fuse::mount_background(v.config(false), second.path()).expect("mount");
    m.unmount().unwrap();
}
