//! Mounts seen from the tests: is a path a mount point, waiting for a mount
//! to appear or go, and guards that always undo a mount, even when the test
//! panics.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

/// Whether `path` is a mount point (field 5 of `/proc/self/mountinfo`; the
/// path must be spelled as the kernel shows it, as temp dirs are).
pub fn is_mounted(path: &Path) -> bool {
    let info = std::fs::read_to_string("/proc/self/mountinfo").unwrap_or_default();
    let want = path.to_string_lossy();
    info.lines().any(|l| l.split(' ').nth(4) == Some(&*want))
}

/// Waits up to `timeout` for `path` to become a mount point; returns
/// whether it did.
pub fn wait_mounted(path: &Path, timeout: Duration) -> bool {
    wait_until(timeout, || is_mounted(path))
}

/// Waits up to `timeout` for `path` to stop being a mount point; returns
/// whether it did.
pub fn wait_unmounted(path: &Path, timeout: Duration) -> bool {
    wait_until(timeout, || !is_mounted(path))
}

fn wait_until(timeout: Duration, mut done: impl FnMut() -> bool) -> bool {
    let start = Instant::now();
    loop {
        if done() {
            return true;
        }
        if start.elapsed() > timeout {
            return false;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Removes whatever is mounted on `mnt` (a dead daemon's mount included):
/// lazy `umount -l`, then `fusermount3 -uz`, until nothing is.
///
/// # Panics
/// If `mnt` is still mounted after 30 s.
pub fn clear_mount(mnt: &Path) {
    let start = Instant::now();
    while is_mounted(mnt) {
        let _ = Command::new("umount").arg("-l").arg(mnt).output();
        if is_mounted(mnt) {
            let _ = Command::new("fusermount3").arg("-uz").arg(mnt).output();
        }
        assert!(
            start.elapsed() < Duration::from_secs(30),
            "cannot unmount {}",
            mnt.display()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// A mount made by the real binary (`fscrypt-rs mount`): dropping the guard
/// runs `<bin> unmount <mnt>`, then a lazy `umount -l` as a last resort (the
/// daemon may have been killed).
#[derive(Debug)]
pub struct MountGuard {
    bin: PathBuf,
    mnt: PathBuf,
}

impl MountGuard {
    /// Guards the mount on `mnt`, undone with `<bin> unmount`.
    pub fn new(bin: impl Into<PathBuf>, mnt: impl Into<PathBuf>) -> MountGuard {
        MountGuard {
            bin: bin.into(),
            mnt: mnt.into(),
        }
    }

    /// The guarded mount point.
    pub fn mount_point(&self) -> &Path {
        &self.mnt
    }

    /// `<bin> unmount <mnt>`, asserting that it succeeds and that the mount
    /// is gone within 10 s.
    pub fn unmount(&self) {
        unmount_with(&self.bin, &self.mnt);
    }
}

impl Drop for MountGuard {
    fn drop(&mut self) {
        if is_mounted(&self.mnt) {
            let _ = Command::new(&self.bin)
                .arg("unmount")
                .arg(&self.mnt)
                .output();
        }
        if is_mounted(&self.mnt) {
            let _ = Command::new("umount").arg("-l").arg(&self.mnt).output();
        }
    }
}

/// `<bin> unmount <mnt>`, asserting that it succeeds and that the mount is
/// gone within 10 s.
pub fn unmount_with(bin: &Path, mnt: &Path) {
    crate::run::succeed(Command::new(bin).arg("unmount").arg(mnt));
    assert!(
        wait_unmounted(mnt, Duration::from_secs(10)),
        "{} still mounted",
        mnt.display()
    );
}

/// A bind mount (or any mount the test made itself), detached on drop.
#[derive(Debug)]
pub struct BindGuard(pub PathBuf);

impl Drop for BindGuard {
    fn drop(&mut self) {
        let _ = rustix::mount::unmount(&self.0, rustix::mount::UnmountFlags::DETACH);
    }
}
