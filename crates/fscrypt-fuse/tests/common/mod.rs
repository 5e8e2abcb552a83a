//! Shared harness of the real-mount tests: temporary backing directory and
//! mountpoint, a vault root, and a mount guard that unmounts on drop.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU32, Ordering};

use fscrypt::{KeyIdentifier, MasterKey, PolicyV2};
use fscrypt_fuse::{BackgroundMount, MountConfig};

static COUNTER: AtomicU32 = AtomicU32::new(0);

/// A directory removed (recursively) on drop.
pub struct TempDir(pub PathBuf);

impl TempDir {
    pub fn new(tag: &str) -> TempDir {
        let n = COUNTER.fetch_add(1, Ordering::Relaxed);
        let p = std::env::temp_dir().join(format!("fscrypt-fuse-{tag}-{}-{n}", std::process::id()));
        let _ = std::fs::remove_dir_all(&p);
        std::fs::create_dir_all(&p).expect("create temp dir");
        TempDir(p)
    }
    pub fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Whether real FUSE mounts can run here; prints a loud reason when not.
pub fn fuse_available(test: &str) -> bool {
    let reason = if !Path::new("/dev/fuse").exists() {
        Some("/dev/fuse is missing")
    } else if !rustix::process::geteuid().is_root() {
        Some("not running as root")
    } else if std::process::Command::new("fusermount3")
        .arg("-V")
        .output()
        .is_err()
    {
        Some("fusermount3 is not installed (run scripts/setup.sh)")
    } else {
        None
    };
    match reason {
        Some(r) => {
            eprintln!("SKIPPED {test}: {r} — real-mount tests cannot run on this machine");
            false
        }
        None => true,
    }
}

pub const KEY: [u8; 64] = {
    let mut k = [0u8; 64];
    let mut i = 0;
    while i < 64 {
        k[i] = (i as u8).wrapping_mul(7).wrapping_add(3);
        i += 1;
    }
    k
};

pub fn master() -> MasterKey {
    MasterKey::new(&KEY).expect("master key")
}

pub fn policy() -> PolicyV2 {
    let id: KeyIdentifier = master().identifier();
    PolicyV2::new_default(id)
}

/// The mount configuration the tests use.
pub fn mount_config(backing: &Path, policy: PolicyV2, unlocked: bool) -> MountConfig {
    MountConfig {
        backing_dir: backing.to_path_buf(),
        policy,
        master_key: if unlocked { Some(master()) } else { None },
        read_only: false,
        allow_other: true,
        // As on a local filesystem, for the POSIX suites (root only).
        suid: true,
        dev: true,
        fs_name: "fscrypt-test".into(),
    }
}

/// A vault: backing dir (with root context), mountpoint, maybe a live mount.
pub struct Vault {
    pub mount: Option<BackgroundMount>,
    pub mnt: TempDir,
    pub backing: TempDir,
    pub policy: PolicyV2,
}

impl Vault {
    /// A new vault with the default policy, mounted with the key.
    pub fn new(tag: &str) -> Vault {
        Vault::with_policy(tag, policy())
    }

    pub fn with_policy(tag: &str, policy: PolicyV2) -> Vault {
        let backing = TempDir::new(&format!("{tag}-backing"));
        let mnt = TempDir::new(&format!("{tag}-mnt"));
        fscrypt_fuse::create_root(backing.path(), &policy).expect("create_root");
        let mut v = Vault {
            mount: None,
            mnt,
            backing,
            policy,
        };
        v.remount(true);
        v
    }

    pub fn config(&self, unlocked: bool) -> MountConfig {
        mount_config(self.backing.path(), self.policy, unlocked)
    }

    /// (Re)mounts, with the key or locked.
    pub fn remount(&mut self, unlocked: bool) {
        if let Some(m) = self.mount.take() {
            m.unmount().expect("unmount");
        }
        let m =
            fscrypt_fuse::mount_background(self.config(unlocked), self.mnt.path()).expect("mount");
        // Wait until the mount is live.
        for _ in 0..200 {
            if is_mounted(self.mnt.path()) {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        assert!(is_mounted(self.mnt.path()), "mount did not appear");
        self.mount = Some(m);
    }

    pub fn p(&self, rel: &str) -> PathBuf {
        self.mnt.path().join(rel)
    }
}

impl Drop for Vault {
    fn drop(&mut self) {
        if let Some(m) = self.mount.take() {
            let _ = m.unmount();
        }
    }
}

pub fn is_mounted(p: &Path) -> bool {
    let s = std::fs::read_to_string("/proc/self/mountinfo").unwrap_or_default();
    let want = p.to_string_lossy();
    s.lines()
        .any(|l| l.split(' ').nth(4) == Some(&*want) && l.contains("fuse"))
}

/// All files below `dir` (recursively), not following symlinks.
pub fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
    if let Ok(rd) = std::fs::read_dir(dir) {
        for e in rd.flatten() {
            let p = e.path();
            out.push(p.clone());
            if e.file_type().map(|t| t.is_dir()).unwrap_or(false) {
                walk(&p, out);
            }
        }
    }
}
