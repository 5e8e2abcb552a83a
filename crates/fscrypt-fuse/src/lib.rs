//! fscrypt-fuse: a userspace encrypted filesystem (FUSE) that stores a
//! directory tree in the fscrypt format inside any backing directory.
//!
//! Every plaintext directory, regular file and symlink is one backing entry;
//! names are encrypted with the parent directory's key exactly as the kernel
//! does and stored base64url-encoded; file contents are encrypted per data
//! unit with the kernel's keys and IVs after a 4096-byte header holding the
//! file's context and size. The format is specified in `docs/vault-format.md`.
//!
//! Layering: [`EncryptedFs`] (`fs/`, one module per concern) is the filesystem, testable without
//! FUSE; `ops.rs` is what each FUSE request does, for both transports:
//! `fuse.rs`, a thin `fuser` adapter (`/dev/fuse`), and `ring/`, FUSE over
//! io_uring; `inodes.rs` and `handles.rs`
//! own their tables and locks; `crypt.rs` is the seam to the `fscrypt` crate.
//! The bytes of the format ([`layout`]), the root ([`create_root`]) and the
//! vault configuration and key protectors ([`vault`]) are the
//! `fscrypt-vault` crate, re-exported here.

// Only `ring/` (io_uring submissions that point at its buffers) may use
// unsafe code, and says why at each use.
#![deny(unsafe_code)]

pub mod busy;
mod crypt;
mod error;
mod fs;
mod fuse;
mod fusermount;
mod handles;
pub mod image;
mod inodes;
mod lock;
mod mountpoint;
mod ops;
mod ring;
pub mod stats;

use std::path::{Path, PathBuf};

pub use crate::error::{Corruption, Error, Result, WrongType};
pub use crate::fs::{Caller, EncryptedFs, FsOptions, FsStats, SetAttr, SetTime};
pub use crate::handles::FileHandle;
pub use crate::inodes::{
    INODE_STATE_BYTES, InodeNo, Kind, ROOT, inode_table_slots, live_inodes, set_heap_trimmer,
};
pub use crate::lock::VaultLock;
pub use crate::mountpoint::{MountPoint, parent_risk};
pub use crate::stats::{Op, RequestStats, StatsSnapshot};
/// The vault: config, protectors, unlocking (the `fscrypt-vault` crate).
pub use fscrypt_vault as vault;
/// The backing layout: headers, names, symlinks (`fscrypt_vault::layout`).
pub use fscrypt_vault::layout;
pub use fscrypt_vault::{create_root, create_root_with};

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
    /// Every mount carries `default_permissions`: the kernel checks the
    /// mode bits, sticky directories and the caller's supplementary groups
    /// before any request reaches the daemon. There is no mode without
    /// those checks (the daemon, often root, checks nothing itself).
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
    /// Serve through FUSE over io_uring when the kernel offers it (Linux
    /// 6.14+, after root enabled `/sys/module/fuse/parameters/
    /// enable_uring`): one queue and serving thread per CPU, so that a
    /// request wakes a thread on its caller's CPU. Without the kernel's
    /// offer the mount serves `/dev/fuse` as always.
    pub io_uring: bool,
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
            .field("io_uring", &self.io_uring)
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
    // Always: the daemon checks no permissions itself (see `allow_other`).
    opts.push(fuser::MountOption::DefaultPermissions);
    // nosuid,nodev unless asked for (root only, checked in `prepare`).
    opts.push(if config.dev {
        fuser::MountOption::Dev
    } else {
        fuser::MountOption::NoDev
    });
    opts.push(if config.suid {
        fuser::MountOption::Suid
    } else {
        fuser::MountOption::NoSuid
    });
    if config.noexec {
        opts.push(fuser::MountOption::NoExec);
    }
    let mut c = fuser::Config::default();
    c.mount_options = opts;
    c.acl = if config.allow_other {
        fuser::SessionACL::All
    } else {
        fuser::SessionACL::Owner
    };
    c.n_threads = Some(serving_threads(
        std::thread::available_parallelism().map_or(2, usize::from),
    ));
    c.clone_fd = true;
    c
}

/// How many threads read and serve FUSE requests, given the CPUs this
/// process may run on: one per CPU, at least 2 (an asynchronous RELEASE or
/// FORGET never holds up the next synchronous request behind it), at
/// most 8.
///
/// Not more than the CPUs: every request wakes one sleeping reader, the
/// one that has slept longest, and more readers than CPUs only make that
/// one likelier to be cold and on another CPU. On 2 CPUs (bench/RESULTS.md,
/// seed create 2000 files, 8 runs each): 1 thread 4,300 files/s, 2 threads
/// 9,200, 4 threads 8,300, 8 threads 7,500; 4 parallel creators and 4
/// parallel readers the same with 2 or 4.
fn serving_threads(cpus: usize) -> usize {
    cpus.clamp(2, 8)
}

/// What [`prepare`] hands to the mounting code.
struct Prepared {
    adapter: fuse::FuseAdapter,
    /// The mount's FUSE over io_uring (started at INIT, if at all).
    ring: std::sync::Arc<ring::Ring>,
    fc: fuser::Config,
    /// Held for as long as the vault is served.
    lock: VaultLock,
}

fn prepare(config: MountConfig, mountpoint: &MountPoint) -> Result<Prepared> {
    if !Path::new("/dev/fuse").exists() {
        return Err(Error::Mount(
            "/dev/fuse is missing (load the fuse module, install fuse3)".into(),
        ));
    }
    if !mountpoint.is_dir() {
        return Err(Error::Mount(format!(
            "mountpoint {} is not a directory",
            mountpoint.path().display()
        )));
    }
    if (config.suid || config.dev) && !rustix::process::geteuid().is_root() {
        return Err(Error::Mount(
            "the mount options suid and dev are for root only: mount without them".into(),
        ));
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
    // Before the filesystem opens (and recovers) anything: one daemon per
    // vault.
    let lock = VaultLock::acquire(&config.backing_dir)?;
    let fs = EncryptedFs::new(
        &config.backing_dir,
        config.policy,
        config.master_key,
        FsOptions {
            read_only: config.read_only,
        },
    )?;
    // The ring answers requests itself, so it applies fuser's access rule
    // too: without allow_other, only the mounting user's requests.
    let owner_only = (!config.allow_other).then(|| rustix::process::geteuid().as_raw());
    let ring = ring::Ring::new(config.io_uring, owner_only);
    Ok(Prepared {
        adapter: fuse::FuseAdapter::new(fs, ring.clone()),
        ring,
        fc,
        lock,
    })
}

/// A FUSE session on a freshly mounted `mountpoint`.
///
/// As root we mount with mount(2) ourselves and hand the `/dev/fuse` fd to
/// [`fuser::Session::from_fd`], so the session owns no mount. fuser's own
/// mount object, when it is dropped after the kernel already unmounted,
/// unmounts *by path* once more (fuser 0.18's `is_mounted` reads the
/// device's POLLERR as "still mounted"), which can take down a new mount
/// made at the same place in the meantime (unmount, then remount at once).
/// Mounting ourselves also records the subtype (`fuse.fscrypt-rs` in
/// /proc/mounts). Without root, the setuid `fusermount3` mounts and hands
/// us the device (`fusermount.rs`); the session owns no mount either.
struct MountedSession<F: fuser::Filesystem> {
    session: fuser::Session<F>,
    /// We mounted with mount(2); we unmount, fuser never does.
    own_mount: bool,
}

fn new_session<F: fuser::Filesystem>(
    adapter: F,
    mp: &MountPoint,
    fc: fuser::Config,
    ring: Option<&ring::Ring>,
) -> Result<MountedSession<F>> {
    use std::os::fd::AsRawFd;
    // Where the directory is now (it may have been renamed since it was
    // opened; it is still the one that was checked).
    let here = mp.current_path().unwrap_or_else(|| mp.path().to_path_buf());
    let mountpoint = here.as_path();
    if !rustix::process::geteuid().is_root() {
        // fusermount3 looks the path up once more, with the caller's own
        // rights (it mounts `.` after chdir to it, and only where the
        // caller may write): a swap there gains nothing over mounting on
        // the target directly.
        let dev = fusermount::mount(mountpoint, &fc)?;
        if let Some(ring) = ring {
            ring.attach(&dev);
        }
        let acl = fc.acl;
        return match fuser::Session::from_fd(adapter, dev, acl, fc) {
            Ok(session) => Ok(MountedSession {
                session,
                own_mount: true,
            }),
            Err(e) => {
                let _ = unmount(mountpoint);
                Err(Error::Io(e))
            }
        };
    }
    let dev = rustix::fs::open(
        "/dev/fuse",
        rustix::fs::OFlags::RDWR | rustix::fs::OFlags::CLOEXEC,
        rustix::fs::Mode::empty(),
    )
    .map_err(|e| Error::Mount(format!("opening /dev/fuse: {e}")))?;
    let st = mp.stat()?;
    // The kernel's FUSE mount options (fs/fuse/inode.c): the device fd,
    // the root's file type, and the mounting user.
    let mut data = format!(
        "fd={},rootmode={:o},user_id={},group_id={}",
        dev.as_raw_fd(),
        st.st_mode & 0o170000,
        rustix::process::geteuid().as_raw(),
        rustix::process::getegid().as_raw(),
    );
    let mut flags = rustix::mount::MountFlags::empty();
    let (mut source, mut fstype) = ("fscrypt-rs".to_owned(), "fuse".to_owned());
    let (mut dev_ok, mut suid_ok) = (false, false);
    for option in &fc.mount_options {
        match option {
            fuser::MountOption::RO => flags |= rustix::mount::MountFlags::RDONLY,
            fuser::MountOption::NoExec => flags |= rustix::mount::MountFlags::NOEXEC,
            fuser::MountOption::DefaultPermissions => data.push_str(",default_permissions"),
            fuser::MountOption::Dev => dev_ok = true,
            fuser::MountOption::Suid => suid_ok = true,
            fuser::MountOption::FSName(name) => source.clone_from(name),
            fuser::MountOption::Subtype(sub) => fstype = format!("fuse.{sub}"),
            _ => {}
        }
    }
    if !dev_ok {
        flags |= rustix::mount::MountFlags::NODEV;
    }
    if !suid_ok {
        flags |= rustix::mount::MountFlags::NOSUID;
    }
    if fc.acl == fuser::SessionACL::All {
        data.push_str(",allow_other");
    }
    let data = std::ffi::CString::new(data)
        .map_err(|_| Error::Mount("FUSE mount options contain a NUL byte".into()))?;
    // Onto the directory the descriptor holds, whatever its path now
    // names: the kernel resolves /proc/self/fd/N to exactly it.
    rustix::mount::mount(
        source.as_str(),
        mp.proc_path(),
        fstype.as_str(),
        flags,
        data.as_c_str(),
    )
    .map_err(|e| Error::Mount(format!("mount {}: {e}", mountpoint.display())))?;
    if let Some(ring) = ring {
        ring.attach(&dev);
    }
    let acl = fc.acl;
    match fuser::Session::from_fd(adapter, dev, acl, fc) {
        Ok(session) => {
            widen_readahead(mountpoint);
            Ok(MountedSession {
                session,
                own_mount: true,
            })
        }
        Err(e) => {
            let _ = rustix::mount::unmount(
                mountpoint,
                rustix::mount::UnmountFlags::DETACH | rustix::mount::UnmountFlags::NOFOLLOW,
            );
            Err(Error::Io(e))
        }
    }
}

/// Raises the read-ahead of the FUSE mount just made at `mountpoint`
/// (canonical) from the 128 KiB every new FUSE superblock starts with to
/// what one READ may carry ([`ops::MAX_REQUEST`], 1 MiB), through the
/// mount's own bdi, `/sys/class/bdi/MAJ:MIN/read_ahead_kb` (as `blockdev
/// --setra` does for a disk): nothing but this mount changes.
/// The 128 KiB default also caps the `max_readahead` INIT may ask for, so
/// it is raised after INIT (which would lower it again). Sequential reads
/// then reach the daemon as 1 MiB READs, a round trip per MiB instead of
/// per 128 KiB: a cold 1 GiB read 1,550-1,650 -> 1,850-2,020 MB/s on the
/// test VM, random 4 KiB reads unchanged (bench/RESULTS.md).
///
/// Needs root (sysfs); without it, or when the mount is not found in
/// /proc/self/mountinfo, the default stays (one debug line). Reads no
/// file of the mount: nothing serves its requests yet.
fn widen_readahead(mountpoint: &Path) {
    let found = fscrypt_linux::mountinfo::read_mountinfo().map(|all| {
        all.into_iter()
            .rev()
            .find(|m| m.mount_point == mountpoint && m.fs_type.starts_with("fuse"))
    });
    let r = match found {
        Ok(Some(m)) => std::fs::write(
            format!("/sys/class/bdi/{}:{}/read_ahead_kb", m.major, m.minor),
            (ops::MAX_REQUEST / 1024).to_string(),
        )
        .map_err(|e| e.to_string()),
        Ok(None) => Err("not in /proc/self/mountinfo".into()),
        Err(e) => Err(e.to_string()),
    };
    if let Err(e) = r {
        log::debug!("fscrypt-fuse: read-ahead of the mount left at its default: {e}");
    }
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
    let Prepared {
        adapter,
        ring,
        fc,
        lock: _lock,
    } = prepare(config, mountpoint)?;
    serve(adapter, fc, mountpoint, Some(&ring))
}

/// Serves `adapter` at `mountpoint` until it is unmounted or
/// the process gets SIGTERM, SIGINT or SIGHUP, which unmount cleanly.
/// `ring`: the mount's FUSE over io_uring, if it may have one.
fn serve<F: fuser::Filesystem>(
    adapter: F,
    fc: fuser::Config,
    mountpoint: &MountPoint,
    ring: Option<&ring::Ring>,
) -> Result<()> {
    use signal_hook::consts::{SIGHUP, SIGINT, SIGTERM};
    // Modes are exactly what the kernel passes: it has already applied the
    // caller's umask (fuser does not ask for FUSE_DONT_MASK), so the
    // daemon's own umask must not mask them a second time.
    rustix::process::umask(rustix::fs::Mode::empty());
    // Hold no directory busy, and let no relative path (a core file, say)
    // land in the caller's working directory. Every path is absolute now.
    rustix::process::chdir("/")
        .map_err(|e| Error::Mount(format!("changing directory to /: {e}")))?;
    let MountedSession {
        mut session,
        own_mount,
    } = new_session(adapter, mountpoint, fc, ring)?;
    let mut unmounter = session.unmount_callable();
    // Handlers are process-wide (whatever thread the signal lands on); the
    // waiter thread unmounts, which ends `run`. Every signal tries again
    // (a busy mount refuses; Ctrl-C once the files are closed unmounts).
    let mut signals = signal_hook::iterator::Signals::new([SIGTERM, SIGINT, SIGHUP])?;
    let handle = signals.handle();
    let mp = mountpoint.try_clone()?;
    let waiter = std::thread::spawn(move || {
        for sig in signals.forever() {
            log::info!("fscrypt-fuse: signal {sig}: unmounting");
            let target = mp.current_path().unwrap_or_else(|| mp.path().to_path_buf());
            let result = if own_mount {
                unmount(&target)
            } else {
                unmounter.unmount().map_err(Error::Io)
            };
            match result {
                Ok(()) => break,
                Err(Error::Mount(reason)) => log::error!(
                    "fscrypt-fuse: not unmounted: {reason}; press Ctrl-C again to retry \
                     (or run `fscrypt-rs unmount {}`)",
                    target.display()
                ),
                Err(e) => log::error!("fscrypt-fuse: not unmounted: {e}"),
            }
        }
    });
    let r = session.run();
    handle.close();
    let _ = waiter.join();
    if let Some(ring) = ring {
        ring.join();
    }
    r.map_err(Error::Io)
}

/// A mount served by a background thread; dropping it unmounts.
#[derive(Debug)]
pub struct BackgroundMount {
    session: Option<fuser::BackgroundSession>,
    mountpoint: PathBuf,
    own_mount: bool,
    stats: std::sync::Arc<RequestStats>,
    ring: std::sync::Arc<ring::Ring>,
    /// Released after the session ends (field order: dropped last).
    _lock: VaultLock,
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
        let Some(s) = self.session.take() else {
            return Ok(());
        };
        let r = if self.own_mount {
            // The serving thread ends when the kernel drops the connection.
            unmount(&self.mountpoint)?;
            s.join().map_err(Error::Io)
        } else {
            s.umount_and_join().map_err(Error::Io)
        };
        self.ring.join();
        r
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
    let Prepared {
        adapter,
        ring,
        fc,
        lock,
    } = prepare(config, &mp)?;
    let stats = adapter.stats();
    let MountedSession { session, own_mount } = new_session(adapter, &mp, fc, Some(&ring))?;
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

/// Unmounts a vault mounted at `mountpoint` (as root with umount(2), else
/// with `fusermount3 -u`). Works on a dead mount too (its daemon gone).
///
/// # Errors
/// [`Error::Mount`] with the reason in one line: busy (naming the processes
/// that keep it busy), not mounted, or fusermount3's own message.
pub fn unmount(mountpoint: &Path) -> Result<()> {
    if rustix::process::geteuid().is_root() {
        // Never through a symlink put where the mount point was.
        match rustix::mount::unmount(mountpoint, rustix::mount::UnmountFlags::NOFOLLOW) {
            Ok(()) => return Ok(()),
            Err(rustix::io::Errno::BUSY) => {
                return Err(Error::Mount(busy::describe(mountpoint)));
            }
            Err(rustix::io::Errno::INVAL) => {
                return Err(Error::Mount(format!(
                    "{} is not a mount point",
                    mountpoint.display()
                )));
            }
            // Fall back to fusermount3 (e.g. a mount of another namespace).
            Err(_) => {}
        }
    }
    let bin = fusermount::find()
        .map(|p| p.into_os_string())
        .unwrap_or_else(|_| "fusermount3".into());
    let out = std::process::Command::new(&bin)
        .arg("-u")
        .arg("--")
        .arg(mountpoint)
        .stdin(std::process::Stdio::null())
        .output()
        .map_err(|e| Error::Mount(format!("running {}: {e}", bin.to_string_lossy())))?;
    if out.status.success() {
        return Ok(());
    }
    let stderr = String::from_utf8_lossy(&out.stderr);
    let reason = stderr.trim();
    Err(Error::Mount(if reason.contains("busy") {
        busy::describe(mountpoint)
    } else if reason.contains("not found in /etc/mtab") {
        format!(
            "{} is not mounted by this user (fusermount3 unmounts only its caller's mounts)",
            mountpoint.display()
        )
    } else {
        reason.lines().next().unwrap_or(reason).to_owned()
    }))
}

#[cfg(test)]
mod tests {
    use super::serving_threads;

    #[test]
    fn one_serving_thread_per_cpu_between_2_and_8() {
        assert_eq!(serving_threads(1), 2);
        assert_eq!(serving_threads(2), 2);
        assert_eq!(serving_threads(6), 6);
        assert_eq!(serving_threads(64), 8);
    }
}
