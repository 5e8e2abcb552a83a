//! Mounting: a vault ([`mount`], [`mount_on`], [`mount_background`]) or
//! any other back-end through the same session code.
//!
//! | module | concern |
//! |---|---|
//! | `session.rs` | fuser options, the engine of a back-end, mount(2) or `fusermount3`, serving until unmounted |
//! | `fusermount.rs` | the `fusermount3` protocol (mounting without root) |
//! | `mountpoint.rs` | [`MountPoint`]: the directory mounted on, held open and checked |
//! | `readahead.rs` | the mount's read-ahead raised to one request's size |
//! | `unmount.rs` | [`unmount`]: umount(2) or `fusermount3 -u`, busy mounts named |
//! | this file | the vault: [`MountConfig`], its lock, [`BackgroundMount`] |

mod fusermount;
mod idle;
mod mountpoint;
mod readahead;
pub(crate) mod session;
mod unmount;

use std::os::fd::AsFd;
use std::path::{Path, PathBuf};
use std::sync::Arc;

pub use self::mountpoint::{MountPoint, parent_risk};
use self::session::{Engine, MountedSession, Options, new_session};
pub use self::unmount::unmount;
use crate::backend::Backend;
use crate::error::{Error, Result};
use crate::fs::{EncryptedFs, FsOptions, Sharing};
use crate::ring::Ring;
use crate::stats::{RequestStats, StatsSnapshot};
use fscrypt_vault::VaultLock;

/// The inode table size `fscrypt-rs mount` keeps a vault's daemon near
/// ([`MountConfig::inode_limit`]): 100,000 inodes (a daemon peak under
/// 100 MiB with a million files, bench/RESULTS.md "Scale"), more than a
/// build tree or a mail store touches at once.
pub const DEFAULT_INODE_LIMIT: usize = 100_000;

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
    ///
    /// Who checks permissions follows from it
    /// ([`MountConfig::kernel_checks_permissions`]). With `allow_other` (or
    /// [`MountConfig::acl`]) the mount carries `default_permissions`: the
    /// kernel checks the mode bits, owners, sticky directories and the
    /// caller's supplementary groups before any request reaches the daemon,
    /// which may be root and acts for every user. Without it the kernel
    /// lets only processes of the mounting user through (real, effective
    /// and saved uid and gid all the mounting user's: `fs/fuse/dir.c`,
    /// `fuse_allow_current_process`; not even root otherwise), and the
    /// daemon runs as that user: the backing filesystem, whose objects
    /// carry the vault's modes and owners, checks each of the daemon's
    /// calls with exactly the caller's rights, as gocryptfs without
    /// `-allow_other` has it. The daemon adds the checks its cached
    /// descriptors would skip (open, opendir, truncate by path, access(2):
    /// [`crate::FsOptions::check_access`]). That saves the kernel's
    /// re-fetch of a directory's attributes after each change in it: one
    /// round trip per create, unlink, mkdir, rmdir and rename.
    pub allow_other: bool,
    /// Honour setuid/setgid bits (`-o suid`); off by default (`nosuid`).
    /// Root only: [`mount`] refuses it for any other caller.
    pub suid: bool,
    /// Let device nodes open (`-o dev`); off by default (`nodev`). Root
    /// only: [`mount`] refuses it for any other caller.
    pub dev: bool,
    /// Run no program from the mount (`-o noexec`, `MS_NOEXEC`); off by
    /// default.
    pub noexec: bool,
    /// Source name shown in /proc/mounts.
    pub fs_name: String,
    /// `-o sharedstorage`: other mounts (other machines on one NAS or
    /// synced folder) may serve the same backing directory at the same
    /// time; see [`Sharing`](crate::Sharing).
    pub shared_storage: bool,
    /// `-o acl` (gocryptfs's `-acl`): POSIX ACLs, kept as the backing
    /// objects' own ACLs and enforced by the kernel; off by default, since
    /// the kernel then asks for each entry's ACL when `ls -l` lists it.
    pub acl: bool,
    /// Keep the daemon's inode table near this many inodes: above it, the
    /// mount asks the kernel to drop cached inodes nothing uses
    /// (`FUSE_NOTIFY_PRUNE`, FUSE 7.45, Linux 6.18; older kernels: one
    /// info line, no limit), down to three quarters of it. Each entry is a few
    /// hundred bytes ([`crate::INODE_STATE_BYTES`] and the names of its
    /// links); a dropped one costs a LOOKUP when used again. `None`: the
    /// table holds an entry per inode the kernel caches, however many.
    /// [`DEFAULT_INODE_LIMIT`] is what `fscrypt-rs mount` uses.
    pub inode_limit: Option<usize>,
    /// `-o default_permissions`: the kernel's checks even without
    /// `allow_other` ([`MountConfig::kernel_checks_permissions`]), at one
    /// round trip per change in a directory.
    pub default_permissions: bool,
    /// Serve through FUSE over io_uring when the kernel offers it (Linux
    /// 6.14+, after root enabled `/sys/module/fuse/parameters/
    /// enable_uring`): one queue and serving thread per CPU, so that a
    /// request wakes a thread on its caller's CPU. Without the kernel's
    /// offer the mount serves `/dev/fuse` as always.
    pub io_uring: bool,
    /// Unmount once the mount served no FUSE request for this long and
    /// holds no open file or directory (`-o idle`, gocryptfs `-idle`), as
    /// [`unmount`] would; a busy refusal waits for another idle period.
    /// [`mount`] and [`mount_on`] only (not [`mount_background`]); `None`:
    /// never.
    pub idle: Option<std::time::Duration>,
    /// Format 3: the directory of this machine's memory of the file
    /// generations it saw in this vault
    /// ([`GenerationStore`](fscrypt_vault::integrity::generations::GenerationStore),
    /// usually its `default_dir`), to catch a file put back to an earlier
    /// version of itself. `None`: rollback is not detected.
    pub state_dir: Option<PathBuf>,
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
            .field("suid", &self.suid)
            .field("dev", &self.dev)
            .field("noexec", &self.noexec)
            .field("fs_name", &self.fs_name)
            .field("shared_storage", &self.shared_storage)
            .field("acl", &self.acl)
            .field("default_permissions", &self.default_permissions)
            .field("inode_limit", &self.inode_limit)
            .field("io_uring", &self.io_uring)
            .field("idle", &self.idle)
            .field("state_dir", &self.state_dir)
            .finish()
    }
}

impl MountConfig {
    /// Whether the mount carries `default_permissions` (see
    /// [`MountConfig::allow_other`]): when asked for, with `allow_other`,
    /// and with `acl`
    /// (the kernel enforces ACLs only with its own checks, and turns them
    /// on itself for FUSE_POSIX_ACL).
    pub fn kernel_checks_permissions(&self) -> bool {
        self.allow_other || self.acl || self.default_permissions
    }

    /// The session options of this mount.
    fn options(&self) -> Options {
        Options {
            fs_name: self.fs_name.clone(),
            read_only: self.read_only,
            allow_other: self.allow_other,
            default_permissions: self.kernel_checks_permissions(),
            suid: self.suid,
            dev: self.dev,
            noexec: self.noexec,
            io_uring: self.io_uring,
        }
    }
}

/// Whether the backing directory `dir` cannot be written: it is on a
/// read-only mount or filesystem (statvfs `ST_RDONLY`), or this process
/// may not write it (access(2) `W_OK` with its effective ids; EROFS
/// included). A directory that cannot be examined counts as writable (the
/// mount then fails on it with its own reason).
pub fn backing_read_only(dir: &Path) -> bool {
    use rustix::fs::{Access, AtFlags, CWD, StatVfsMountFlags};
    if rustix::fs::statvfs(dir).is_ok_and(|s| s.f_flag.contains(StatVfsMountFlags::RDONLY)) {
        return true;
    }
    matches!(
        rustix::fs::accessat(CWD, dir, Access::WRITE_OK, AtFlags::EACCESS),
        Err(rustix::io::Errno::ROFS | rustix::io::Errno::ACCESS | rustix::io::Errno::PERM)
    )
}

/// The engine of the vault `config` describes, and its lock (held for as
/// long as the vault is served). A read-write mount of a backing directory
/// that cannot be written ([`backing_read_only`]) is made read-only, with
/// a warning: the kernel then refuses writes (EROFS) and the mount shows
/// `ro`, instead of every write failing in the daemon.
fn prepare(
    mut config: MountConfig,
    mountpoint: &MountPoint,
) -> Result<(Engine<EncryptedFs>, VaultLock)> {
    if !config.read_only && backing_read_only(&config.backing_dir) {
        log::warn!("fscrypt-fuse: backing directory is read-only: mounting read-only");
        config.read_only = true;
    }
    let options = config.options();
    session::check(&options, mountpoint)?;
    // Before the filesystem opens (and recovers) anything: one daemon per
    // vault, or with -o sharedstorage any number of them, the first one
    // alone (exclusive while it recovers, then shared).
    let dir = &config.backing_dir;
    let mount_err = |e: fscrypt_vault::lock::LockError| Error::Mount(e.to_string());
    let (lock, sharing) = if config.shared_storage {
        match VaultLock::try_acquire(dir).map_err(mount_err)? {
            Some(l) => (l, Sharing::SharedAlone),
            None => (
                VaultLock::acquire_shared(dir).map_err(mount_err)?,
                Sharing::SharedWithOthers,
            ),
        }
    } else {
        (
            VaultLock::acquire(dir).map_err(mount_err)?,
            Sharing::Exclusive,
        )
    };
    let check_access = !config.kernel_checks_permissions();
    let mut fs = EncryptedFs::new(
        dir,
        config.policy,
        config.master_key,
        FsOptions {
            read_only: config.read_only,
            sharing,
            acl: config.acl,
            check_access,
            inode_limit: config.inode_limit,
        },
    )?;
    if fs.format() == crate::layout::Format::V3
        && let Some(state) = &config.state_dir
    {
        match fscrypt_vault::integrity::generations::GenerationStore::open(state) {
            Ok(g) => fs.remember_generations(g),
            Err(e) => log::warn!(
                "fscrypt-fuse: cannot open {} ({e}); files put back to an earlier version will not be noticed",
                state.display()
            ),
        }
    }
    if sharing == Sharing::SharedAlone {
        lock.share(dir).map_err(mount_err)?;
    }
    if sharing != Sharing::Exclusive {
        fs.hold_shared_lock(lock.as_fd().try_clone_to_owned().map_err(Error::Io)?);
    }
    Ok((session::engine(fs, &options), lock))
}

/// Mounts the vault at `mountpoint` and serves it until it is unmounted
/// (`fscrypt-rs unmount`, `fusermount3 -u`, `umount`) or the process gets
/// SIGTERM, SIGINT or SIGHUP, which unmount cleanly.
///
/// The daemon holds the vault's lock ([`VaultLock`]) while it serves it.
/// Without root the setuid `fusermount3` mounts (`/dev/fuse` must be
/// accessible to the user); the daemon keeps running as the caller.
///
/// # Errors
/// [`Error::Mount`] when FUSE is unavailable (naming why), the mountpoint is
/// bad or the vault is mounted already, [`Error::Corrupt`]/[`Error::Io`]
/// when the backing directory cannot be used.
pub fn mount(config: MountConfig, mountpoint: &Path) -> Result<()> {
    mount_on(config, &MountPoint::open(mountpoint)?)
}

/// [`mount`] onto a mount point opened (and checked) before: the mount
/// goes on exactly the directory `mountpoint` holds, wherever its path now
/// leads (see [`MountPoint`]).
///
/// # Errors
/// As [`mount`].
pub fn mount_on(mut config: MountConfig, mountpoint: &MountPoint) -> Result<()> {
    // This process is the daemon: nothing of it may reach a core file.
    if let Err(e) =
        rustix::process::set_dumpable_behavior(rustix::process::DumpableBehavior::NotDumpable)
    {
        log::warn!("fscrypt-fuse: cannot make the daemon non-dumpable: {e}");
    }
    config.backing_dir = std::fs::canonicalize(&config.backing_dir).map_err(|e| {
        Error::Mount(format!(
            "backing directory {}: {e}",
            config.backing_dir.display()
        ))
    })?;
    let idle = config.idle;
    let (engine, _lock) = prepare(config, mountpoint)?;
    session::serve(engine, mountpoint, idle)
}

/// How long [`BackgroundMount::unmount`] waits for a busy mount.
const BUSY_PATIENCE: std::time::Duration = std::time::Duration::from_secs(2);

/// A mount served by a background thread; dropping it unmounts.
#[derive(Debug)]
pub struct BackgroundMount {
    session: Option<fuser::BackgroundSession>,
    mountpoint: PathBuf,
    own_mount: bool,
    stats: Arc<RequestStats>,
    ring: Arc<Ring>,
    /// Released after the session ends (field order: dropped last).
    _lock: Option<VaultLock>,
}

impl BackgroundMount {
    /// Unmounts and waits for the serving thread. A busy mount is tried
    /// again for up to 2 s (see `unmount_patiently`).
    ///
    /// # Errors
    /// [`Error::Mount`] if the mount stays busy (naming its holders) or
    /// cannot be unmounted (the mount is then still served); [`Error::Io`]
    /// if the serving thread ended with an error.
    pub fn unmount(mut self) -> Result<()> {
        self.stop()
    }

    fn stop(&mut self) -> Result<()> {
        if self.session.is_none() {
            return Ok(());
        }
        if self.own_mount {
            // Kept served until it is unmounted: a refused unmount leaves
            // a working mount, not a dead one.
            self.unmount_patiently()?;
        }
        let Some(s) = self.session.take() else {
            return Ok(());
        };
        let r = if self.own_mount {
            // The serving thread ends when the kernel drops the connection.
            session::session_ended(s.join())
        } else {
            session::session_ended(s.umount_and_join())
        };
        self.ring.join();
        r
    }

    /// Unmounts, waiting up to [`BUSY_PATIENCE`] while the mount is busy:
    /// in a process that mounts in the background, another of its threads
    /// may be between fork and exec, its child holding a copy of a
    /// descriptor opened on the mount for that moment. A mount still busy
    /// after that is refused, naming its holders.
    fn unmount_patiently(&self) -> Result<()> {
        let deadline = std::time::Instant::now() + BUSY_PATIENCE;
        loop {
            match unmount::try_unmount(&self.mountpoint) {
                Ok(()) => return Ok(()),
                Err(unmount::Refusal::Busy) if std::time::Instant::now() < deadline => {
                    std::thread::sleep(std::time::Duration::from_millis(20));
                }
                Err(unmount::Refusal::Busy) => {
                    return Err(Error::Mount(crate::busy::describe(&self.mountpoint)));
                }
                Err(unmount::Refusal::Other(e)) => return Err(e),
            }
        }
    }

    /// Where it is mounted.
    pub fn mountpoint(&self) -> &Path {
        &self.mountpoint
    }

    /// The FUSE requests this mount has served so far, per opcode.
    pub fn stats(&self) -> StatsSnapshot {
        self.stats.snapshot()
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
/// embedding). Unlike [`mount`], signals, the working directory, the
/// dumpable flag and the umask are left alone: files are created with the
/// mode the kernel passes masked once more by this process's umask, so set
/// it to 0 where exact modes matter.
///
/// # Errors
/// As [`mount`].
pub fn mount_background(config: MountConfig, mountpoint: &Path) -> Result<BackgroundMount> {
    let mp = MountPoint::open(mountpoint)?;
    let (engine, lock) = prepare(config, &mp)?;
    background(engine, &mp, Some(lock))
}

/// Mounts `engine` at `mp`, served by a background thread; `lock` is
/// released once the session ended.
pub(crate) fn background<B: Backend>(
    engine: Engine<B>,
    mp: &MountPoint,
    lock: Option<VaultLock>,
) -> Result<BackgroundMount> {
    let Engine { adapter, ring, fc } = engine;
    let stats = adapter.stats();
    let MountedSession { session, own_mount } = new_session(adapter, mp, fc, Some(&ring))?;
    let session = session.spawn().map_err(Error::Io)?;
    Ok(BackgroundMount {
        session: Some(session),
        mountpoint: mp.path().to_path_buf(),
        own_mount,
        stats,
        ring,
        _lock: lock,
    })
}
