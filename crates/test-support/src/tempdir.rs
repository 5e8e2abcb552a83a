//! Temporary directories that remove themselves.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU32, Ordering};

static COUNTER: AtomicU32 = AtomicU32::new(0);

/// A fresh directory (mode 0755) below the system temp dir, removed
/// recursively on drop. The name carries the tag, the process id and a
/// per-process counter, so parallel tests and test binaries never share
/// one; it stays short (Unix socket paths in it are limited to 108 bytes).
#[derive(Debug)]
pub struct TempDir(PathBuf);

impl TempDir {
    /// Creates `fscrypt-rs-<tag>-<pid>-<n>` in the temp dir (a leftover of
    /// that name, from a killed run of the same pid, is removed first).
    ///
    /// # Panics
    /// If the directory cannot be created (a test cannot go on without it).
    pub fn new(tag: &str) -> TempDir {
        let n = COUNTER.fetch_add(1, Ordering::Relaxed);
        let path =
            std::env::temp_dir().join(format!("fscrypt-rs-{tag}-{}-{n}", std::process::id()));
        let _ = std::fs::remove_dir_all(&path);
        std::fs::create_dir_all(&path)
            .unwrap_or_else(|e| panic!("create temp dir {}: {e}", path.display()));
        std::fs::set_permissions(&path, PermissionsExt::from_mode(0o755))
            .unwrap_or_else(|e| panic!("chmod temp dir {}: {e}", path.display()));
        TempDir(path)
    }

    /// The directory.
    pub fn path(&self) -> &Path {
        &self.0
    }

    /// `self.path().join(rel)` (nothing is created).
    pub fn join(&self, rel: impl AsRef<Path>) -> PathBuf {
        self.0.join(rel)
    }

    /// The subdirectory `rel`, created (with its parents) if missing.
    ///
    /// # Panics
    /// If it cannot be created.
    pub fn sub(&self, rel: impl AsRef<Path>) -> PathBuf {
        let p = self.0.join(rel);
        std::fs::create_dir_all(&p).unwrap_or_else(|e| panic!("mkdir {}: {e}", p.display()));
        p
    }
}

impl AsRef<Path> for TempDir {
    fn as_ref(&self) -> &Path {
        &self.0
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}
