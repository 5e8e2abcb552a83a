//! One FUSE session over any back-end: the fuser options of a mount
//! ([`Options`]), the engine a back-end is served by ([`engine`]: the
//! fuser adapter and the mount's FUSE over io_uring), mounting
//! ([`new_session`]: mount(2) as root, `fusermount3` otherwise) and serving
//! in the foreground until unmounted ([`serve`]).

use std::path::Path;
use std::sync::Arc;

use super::MountPoint;
use crate::backend::Backend;
use crate::error::{Error, Result};
use crate::fuse::FuseAdapter;
use crate::ring::Ring;
use crate::stats::RequestStats;

/// How a filesystem is mounted, whatever its back-end.
#[derive(Debug, Clone)]
pub(crate) struct Options {
    /// Source name shown in /proc/mounts.
    pub(crate) fs_name: String,
    /// `ro`.
    pub(crate) read_only: bool,
    /// FUSE `allow_other` (else only the mounting user is served).
    pub(crate) allow_other: bool,
    /// FUSE `default_permissions`: the kernel checks modes, owners, groups
    /// and sticky directories before a request reaches the daemon. Needed
    /// whenever the daemon's own rights could exceed a caller's (other
    /// users through `allow_other`; a back-end whose objects' modes no
    /// filesystem enforces for the daemon, as an image's); see
    /// [`MountConfig::allow_other`](crate::MountConfig::allow_other).
    pub(crate) default_permissions: bool,
    /// `suid` (root only; else `nosuid`).
    pub(crate) suid: bool,
    /// `dev` (root only; else `nodev`).
    pub(crate) dev: bool,
    /// `noexec`.
    pub(crate) noexec: bool,
    /// Serve through FUSE over io_uring when the kernel offers it.
    pub(crate) io_uring: bool,
}

/// What serves a mount of back-end `B`: the fuser adapter, the mount's
/// FUSE over io_uring (started at INIT, if at all) and fuser's options.
pub(crate) struct Engine<B> {
    pub(crate) adapter: FuseAdapter<B>,
    pub(crate) ring: Arc<Ring>,
    pub(crate) fc: fuser::Config,
}

/// Checks what every mount needs (FUSE, a directory to mount on, root for
/// `suid`/`dev`) and raises the open-file limit. Before the back-end is
/// made: nothing is opened if the mount cannot be.
///
/// # Errors
/// [`Error::Mount`] naming what is missing.
pub(crate) fn check(options: &Options, mountpoint: &MountPoint) -> Result<()> {
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
    if (options.suid || options.dev) && !rustix::process::geteuid().is_root() {
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
    Ok(())
}

/// The engine serving `fs` with `options`.
pub(crate) fn engine<B: Backend>(fs: B, options: &Options) -> Engine<B> {
    // The ring answers requests itself, so it applies fuser's access rule
    // too: without allow_other, only the mounting user's requests.
    let owner_only = (!options.allow_other).then(|| rustix::process::geteuid().as_raw());
    let ring = Ring::new(options.io_uring, owner_only);
    Engine {
        adapter: FuseAdapter::new(fs, ring.clone()),
        ring,
        fc: fuser_config(options),
    }
}

fn fuser_config(config: &Options) -> fuser::Config {
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
    // nosuid,nodev unless asked for (root only, checked in `engine`).
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
/// us the device (`mount/fusermount.rs`); the session owns no mount either.
pub(super) struct MountedSession<F: fuser::Filesystem> {
    /// The session, not yet run.
    pub(super) session: fuser::Session<F>,
    /// We mounted with mount(2); we unmount, fuser never does.
    pub(super) own_mount: bool,
}

pub(super) fn new_session<F: fuser::Filesystem>(
    adapter: F,
    mp: &MountPoint,
    fc: fuser::Config,
    ring: Option<&Ring>,
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
        let dev = super::fusermount::mount(mountpoint, &fc)?;
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
                let _ = super::unmount(mountpoint);
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
            super::readahead::widen(mountpoint);
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

/// Serves `engine` at `mountpoint` until it is unmounted or the process
/// gets SIGTERM, SIGINT or SIGHUP, which unmount cleanly.
/// With `idle`, it unmounts itself once idle that long (`idle.rs`).
pub(crate) fn serve<B: Backend>(
    engine: Engine<B>,
    mountpoint: &MountPoint,
    idle: Option<std::time::Duration>,
) -> Result<()> {
    let Engine { adapter, ring, fc } = engine;
    let idle = idle.map(|d| (adapter.stats(), d));
    run(adapter, fc, mountpoint, Some(&ring), idle)
}

/// Serves the fuser filesystem `adapter` at `mountpoint` ([`serve`]);
/// `ring`: the mount's FUSE over io_uring, if it may have one; `idle`: the
/// mount's request counters and idle time, if it unmounts when idle.
fn run<F: fuser::Filesystem>(
    adapter: F,
    fc: fuser::Config,
    mountpoint: &MountPoint,
    ring: Option<&Ring>,
    idle: Option<(Arc<RequestStats>, std::time::Duration)>,
) -> Result<()> {
    use signal_hook::consts::{SIGHUP, SIGINT, SIGTERM};
    // Modes are exactly what the kernel passes, with the caller's umask
    // applied (by the kernel, or with FUSE_DONT_MASK by `Ops::creation_mode`
    // where no default ACL is): the daemon's own umask must not mask them a
    // second time.
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
                super::unmount(&target)
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
    // Closing `stop_idle` (dropping it) ends the idle watcher.
    let (stop_idle, idle_watcher) = match idle {
        Some((stats, idle)) => {
            let (tx, rx) = std::sync::mpsc::channel::<()>();
            let mp = mountpoint.try_clone()?;
            let t = std::thread::spawn(move || super::idle::watch(stats, idle, mp, rx));
            (Some(tx), Some(t))
        }
        None => (None, None),
    };
    let r = session.run();
    handle.close();
    let _ = waiter.join();
    drop(stop_idle);
    if let Some(t) = idle_watcher {
        let _ = t.join();
    }
    if let Some(ring) = ring {
        ring.join();
    }
    session_ended(r)
}

/// The result of a FUSE session that ran until its connection went away:
/// ENODEV (fuser already takes it as the end) or, with FUSE over io_uring,
/// ECONNABORTED, which the kernel's teardown of the ring's connection may
/// give the last `/dev/fuse` read of an unmount (Linux 6.14+,
/// fs/fuse/dev_uring.c): both are an ordinary end, not an error.
pub(super) fn session_ended(r: std::io::Result<()>) -> Result<()> {
    match r {
        Err(e) if e.raw_os_error() == Some(libc::ECONNABORTED) => Ok(()),
        r => r.map_err(Error::Io),
    }
}

#[cfg(test)]
mod tests {
    use super::{serving_threads, session_ended};

    #[test]
    fn an_aborted_connection_at_unmount_is_an_ordinary_end() {
        let os = std::io::Error::from_raw_os_error;
        assert!(session_ended(Ok(())).is_ok());
        assert!(session_ended(Err(os(libc::ECONNABORTED))).is_ok());
        assert!(session_ended(Err(os(libc::EIO))).is_err());
    }

    #[test]
    fn one_serving_thread_per_cpu_between_2_and_8() {
        assert_eq!(serving_threads(1), 2);
        assert_eq!(serving_threads(2), 2);
        assert_eq!(serving_threads(6), 6);
        assert_eq!(serving_threads(64), 8);
    }
}
