//! fscrypt-fuse: a userspace encrypted filesystem (FUSE) that stores a
//! directory tree in the fscrypt format inside any backing directory.
//!
//! Every plaintext directory, regular file and symlink is one backing entry;
//! names are encrypted with the parent directory's key exactly as the kernel
//! does and stored base64url-encoded; file contents are encrypted per data
//! unit with the kernel's keys and IVs after a 4096-byte header holding the
//! file's context and size. The format is specified in `docs/vault-format.md`.
//!
//! Layering: [`EncryptedFs`] (`fs.rs`) is the filesystem, testable without
//! FUSE; `fuse.rs` is a thin `fuser` adapter; `inodes.rs` and `handles.rs`
//! own their tables and locks; `layout.rs` owns the bytes of the format;
//! `crypt.rs` is the seam to the `fscrypt` crate. The vault configuration and
//! key protectors live in `vault.rs`.

#![forbid(unsafe_code)]

mod crypt;
mod error;
mod fs;
mod fuse;
mod handles;
mod inodes;
pub mod layout;
pub mod vault;

use std::path::{Path, PathBuf};

pub use crate::error::{Corruption, Error, Result, WrongType};
pub use crate::fs::{Caller, EncryptedFs, FsOptions, FsStats, SetAttr, SetTime, create_root};
pub use crate::handles::FileHandle;
pub use crate::inodes::{InodeNo, Kind, ROOT};

/// How to mount a vault.
pub struct MountConfig {
    /// The backing (cipher) directory; its root metadata file must exist
    /// ([`create_root`]).
    pub backing_dir: PathBuf,
    /// The vault's root policy.
    pub policy: fscrypt::PolicyV2,
    /// The master key; `None` mounts locked (no-key names, no contents).
    pub master_key: Option<fscrypt::MasterKey>,
    /// Mount read-only.
    pub read_only: bool,
    /// Let other users access the mount (FUSE `allow_other`).
    pub allow_other: bool,
    /// Let the kernel check permissions from the mode bits (`default_permissions`).
    pub default_permissions: bool,
    /// Source name shown in /proc/mounts.
    pub fs_name: String,
}

impl std::fmt::Debug for MountConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MountConfig")
            .field("backing_dir", &self.backing_dir)
            .field("policy", &self.policy)
            .field(
                "master_key",
                &self.master_key.as_ref().map(|_| "<redacted>"),
            )
            .field("read_only", &self.read_only)
            .field("allow_other", &self.allow_other)
            .field("default_permissions", &self.default_permissions)
            .field("fs_name", &self.fs_name)
            .finish()
    }
}

fn fuser_config(config: &MountConfig) -> fuser::Config {
    let mut opts = vec![
        fuser::MountOption::FSName(config.fs_name.clone()),
        fuser::MountOption::Subtype("fscrypt-rs".into()),
    ];
    if config.read_only {
        opts.push(fuser::MountOption::RO);
    }
    if config.default_permissions {
        opts.push(fuser::MountOption::DefaultPermissions);
    }
    if rustix::process::geteuid().is_root() {
        // Device nodes and setuid files behave as on a local filesystem
        // (as root only; needed by the POSIX test suite).
        opts.push(fuser::MountOption::Dev);
        opts.push(fuser::MountOption::Suid);
    }
    let mut c = fuser::Config::default();
    c.mount_options = opts;
    c.acl = if config.allow_other {
        fuser::SessionACL::All
    } else {
        fuser::SessionACL::Owner
    };
    c.n_threads = Some(4);
    c.clone_fd = true;
    c
}

fn prepare(config: MountConfig, mountpoint: &Path) -> Result<(fuse::FuseAdapter, fuser::Config)> {
    if !Path::new("/dev/fuse").exists() {
        return Err(Error::Mount(
            "/dev/fuse is missing (load the fuse module, install fuse3)".into(),
        ));
    }
    if !mountpoint.is_dir() {
        return Err(Error::Mount(format!(
            "mountpoint {} is not a directory",
            mountpoint.display()
        )));
    }
    // Each directory inode holds an fd; allow as many as the system lets us.
    let lim = rustix::process::getrlimit(rustix::process::Resource::Nofile);
    if let Some(max) = lim.maximum {
        let _ = rustix::process::setrlimit(
            rustix::process::Resource::Nofile,
            rustix::process::Rlimit {
                current: Some(max),
                maximum: Some(max),
            },
        );
    }
    let fc = fuser_config(&config);
    let fs = EncryptedFs::new(
        &config.backing_dir,
        config.policy,
        config.master_key,
        FsOptions {
            read_only: config.read_only,
        },
    )?;
    Ok((fuse::FuseAdapter::new(fs), fc))
}

/// Mounts the vault at `mountpoint` and serves it until it is unmounted
/// (`fscrypt-rs unmount`, `fusermount3 -u`, `umount`) or the process gets
/// SIGTERM, SIGINT or SIGHUP, which unmount cleanly.
///
/// # Errors
/// [`Error::Mount`] when FUSE is unavailable or the mountpoint is bad,
/// [`Error::Corrupt`]/[`Error::Io`] when the backing directory cannot be used.
pub fn mount(config: MountConfig, mountpoint: &Path) -> Result<()> {
    use signal_hook::consts::{SIGHUP, SIGINT, SIGTERM};
    let (adapter, fc) = prepare(config, mountpoint)?;
    let mut session = fuser::Session::new(adapter, mountpoint, &fc).map_err(Error::Io)?;
    let mut unmounter = session.unmount_callable();
    // Handlers are process-wide (whatever thread the signal lands on); the
    // waiter thread unmounts, which ends `run`.
    let mut signals = signal_hook::iterator::Signals::new([SIGTERM, SIGINT, SIGHUP])?;
    let handle = signals.handle();
    let waiter = std::thread::spawn(move || {
        if let Some(sig) = signals.forever().next() {
            log::info!("fscrypt-fuse: signal {sig}: unmounting");
            if let Err(e) = unmounter.unmount() {
                log::error!("fscrypt-fuse: unmount failed: {e}");
            }
        }
    });
    let r = session.run();
    handle.close();
    let _ = waiter.join();
    r.map_err(Error::Io)
}

/// A mount served by a background thread; dropping it unmounts.
#[derive(Debug)]
pub struct BackgroundMount {
    session: Option<fuser::BackgroundSession>,
    mountpoint: PathBuf,
}

impl BackgroundMount {
    /// Unmounts and waits for the serving thread.
    ///
    /// # Errors
    /// [`Error::Io`] if unmounting fails.
    pub fn unmount(mut self) -> Result<()> {
        self.stop()
    }

    fn stop(&mut self) -> Result<()> {
        if let Some(s) = self.session.take() {
            s.umount_and_join().map_err(Error::Io)?;
        }
        Ok(())
    }

    /// Where it is mounted.
    pub fn mountpoint(&self) -> &Path {
        &self.mountpoint
    }
}

impl Drop for BackgroundMount {
    fn drop(&mut self) {
        if let Err(e) = self.stop() {
            log::error!(
                "fscrypt-fuse: unmounting {}: {e}",
                self.mountpoint.display()
            );
        }
    }
}

/// Mounts the vault served by a background thread of this process (tests,
/// embedding). Unlike [`mount`], signals are left alone.
///
/// # Errors
/// As [`mount`].
pub fn mount_background(config: MountConfig, mountpoint: &Path) -> Result<BackgroundMount> {
    let (adapter, fc) = prepare(config, mountpoint)?;
    let session = fuser::spawn_mount(adapter, mountpoint, &fc).map_err(Error::Io)?;
    Ok(BackgroundMount {
        session: Some(session),
        mountpoint: mountpoint.to_path_buf(),
    })
}

/// Unmounts a vault mounted at `mountpoint` (as root with umount(2), else
/// with `fusermount3 -u`).
///
/// # Errors
/// [`Error::Mount`] with the reason when neither works.
pub fn unmount(mountpoint: &Path) -> Result<()> {
    if rustix::process::geteuid().is_root()
        && rustix::mount::unmount(mountpoint, rustix::mount::UnmountFlags::empty()).is_ok()
    {
        return Ok(());
    }
    let out = std::process::Command::new("fusermount3")
        .arg("-u")
        .arg(mountpoint)
        .output()
        .map_err(|e| Error::Mount(format!("running fusermount3: {e}")))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(Error::Mount(
            String::from_utf8_lossy(&out.stderr).trim().to_string(),
        ))
    }
}
