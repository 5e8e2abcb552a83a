//! Each refusal through `openat2` and through the fallback (reached with an
//! `openat2` stand-in answering `ENOSYS` or `EPERM`).

use std::cell::Cell;
use std::fs;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};
use std::os::unix::fs::{PermissionsExt, symlink};
use std::path::Path;

use rustix::fs::FileType;
use test_support::{BindGuard, TempDir, is_root};

use super::*;

fn dir_fd(p: &Path) -> OwnedFd {
    rustix::fs::open(
        p,
        OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC,
        Mode::empty(),
    )
    .unwrap()
}

/// Which way [`open_entry_with`] goes in a test.
#[derive(Clone, Copy, Debug)]
enum Way {
    /// The real `openat2`.
    Openat2,
    /// A kernel without `openat2` (`ENOSYS`).
    NoSys,
    /// A seccomp filter refusing `openat2` (`EPERM`).
    Seccomp,
}

const WAYS: [Way; 3] = [Way::Openat2, Way::NoSys, Way::Seccomp];

/// [`open_entry_with`] the `way` says, with a fresh "openat2 missing" flag;
/// also gives how often the `openat2` stand-in was called.
fn open_way(
    way: Way,
    dir: BorrowedFd<'_>,
    name: &[u8],
    flags: OFlags,
    mounts: Mounts,
) -> (Result<OwnedFd, Error>, usize) {
    let calls = Cell::new(0);
    let missing = AtomicBool::new(false);
    let r = open_entry_with(
        &missing,
        |d, n, f, m, h| {
            calls.set(calls.get() + 1);
            match way {
                Way::Openat2 => rustix::fs::openat2(d, n, f, m, h),
                Way::NoSys => Err(Errno::NOSYS),
                Way::Seccomp => Err(Errno::PERM),
            }
        },
        dir,
        name,
        flags,
        Mode::from_raw_mode(0o600),
        mounts,
    );
    (r, calls.get())
}

fn kind(fd: &OwnedFd) -> FileType {
    FileType::from_raw_mode(rustix::fs::fstat(fd).unwrap().st_mode)
}

#[test]
fn a_plain_entry_opens_and_o_creat_uses_the_mode() {
    let t = TempDir::new("so-plain");
    fs::write(t.path().join("f"), b"x").unwrap();
    let d = dir_fd(t.path());
    for way in WAYS {
        let (r, _) = open_way(way, d.as_fd(), b"f", OFlags::RDONLY, Mounts::Stay);
        assert_eq!(kind(&r.unwrap()), FileType::RegularFile, "{way:?}");
        let name = format!("new-{way:?}");
        let (r, _) = open_way(
            way,
            d.as_fd(),
            name.as_bytes(),
            OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL,
            Mounts::Stay,
        );
        r.unwrap();
        let m = fs::metadata(t.path().join(&name)).unwrap();
        assert_eq!(m.permissions().mode() & 0o777, 0o600, "{way:?}");
    }
}

#[test]
fn a_symlink_is_never_followed() {
    let t = TempDir::new("so-link");
    fs::create_dir(t.path().join("sub")).unwrap();
    fs::write(t.path().join("sub/f"), b"x").unwrap();
    symlink("sub/f", t.path().join("l")).unwrap();
    symlink("sub", t.path().join("dl")).unwrap();
    symlink("/etc", t.path().join("abs")).unwrap();
    let d = dir_fd(t.path());
    for way in WAYS {
        for name in [&b"l"[..], b"dl", b"abs"] {
            let (r, _) = open_way(way, d.as_fd(), name, OFlags::RDONLY, Mounts::Cross);
            assert_eq!(r.unwrap_err(), Error::Sys(Errno::LOOP), "{way:?}");
        }
        // O_PATH: a descriptor of the link itself, never of its target.
        let (r, _) = open_way(way, d.as_fd(), b"l", OFlags::PATH, Mounts::Stay);
        assert_eq!(kind(&r.unwrap()), FileType::Symlink, "{way:?}");
    }
    // The public entry points too.
    assert_eq!(
        open_entry(d.as_fd(), b"l", OFlags::RDONLY, Mode::empty(), Mounts::Stay).unwrap_err(),
        Error::Sys(Errno::LOOP)
    );
    assert_eq!(
        open_fallback(
            d.as_fd(),
            b"dl",
            OFlags::RDONLY,
            Mode::empty(),
            Mounts::Stay
        )
        .unwrap_err(),
        Error::Sys(Errno::LOOP)
    );
}

#[test]
fn dot_dot_and_several_components_are_refused_before_any_open() {
    let t = TempDir::new("so-dots");
    fs::create_dir(t.path().join("sub")).unwrap();
    fs::write(t.path().join("f"), b"x").unwrap();
    let sub = dir_fd(&t.path().join("sub"));
    for way in WAYS {
        for name in [
            &b".."[..],
            b".",
            b"",
            b"../f",
            b"sub/../f",
            b"/etc/passwd",
            b"f\0",
        ] {
            let (r, calls) = open_way(way, sub.as_fd(), name, OFlags::RDONLY, Mounts::Cross);
            assert_eq!(r.unwrap_err(), Error::InvalidName, "{way:?} {name:?}");
            assert_eq!(calls, 0, "{way:?}");
        }
    }
    assert_eq!(
        open_fallback(
            sub.as_fd(),
            b"..",
            OFlags::RDONLY,
            Mode::empty(),
            Mounts::Cross
        )
        .unwrap_err(),
        Error::InvalidName
    );
    assert_eq!(
        open_path_nofollow(Path::new("/"), OFlags::RDONLY, Mode::empty()).unwrap_err(),
        Error::InvalidName
    );
}

#[test]
fn a_magic_link_is_never_followed() {
    let t = TempDir::new("so-magic");
    let f = fs::File::create(t.path().join("f")).unwrap();
    let proc_fd = dir_fd(Path::new("/proc/self/fd"));
    let name = f.as_raw_fd().to_string();
    for way in WAYS {
        let (r, _) = open_way(
            way,
            proc_fd.as_fd(),
            name.as_bytes(),
            OFlags::RDONLY,
            Mounts::Stay,
        );
        assert_eq!(r.unwrap_err(), Error::Sys(Errno::LOOP), "{way:?}");
    }
}

#[test]
fn a_mount_point_is_refused_only_when_asked() {
    if !is_root() {
        test_support::skip::skip("a_mount_point_is_refused_only_when_asked", "not root");
        return;
    }
    let t = TempDir::new("so-xdev");
    let mnt = t.path().join("mnt");
    fs::create_dir(&mnt).unwrap();
    if let Err(e) = rustix::mount::mount(
        "tmpfs",
        &mnt,
        "tmpfs",
        rustix::mount::MountFlags::empty(),
        c"size=64k",
    ) {
        test_support::skip::skip(
            "a_mount_point_is_refused_only_when_asked",
            &format!("mount tmpfs: {e}"),
        );
        return;
    }
    let _guard = BindGuard(mnt.clone());
    let d = dir_fd(t.path());
    for way in WAYS {
        let (r, _) = open_way(
            way,
            d.as_fd(),
            b"mnt",
            OFlags::RDONLY | OFlags::DIRECTORY,
            Mounts::Stay,
        );
        assert_eq!(r.unwrap_err(), Error::MountPoint, "{way:?}");
        let (r, _) = open_way(
            way,
            d.as_fd(),
            b"mnt",
            OFlags::RDONLY | OFlags::DIRECTORY,
            Mounts::Cross,
        );
        assert_eq!(kind(&r.unwrap()), FileType::Directory, "{way:?}");
    }
    // A bind mount of the same filesystem: RESOLVE_NO_XDEV sees it (the
    // fallback's device comparison cannot).
    let (a, b) = (t.path().join("a"), t.path().join("b"));
    fs::create_dir(&a).unwrap();
    fs::create_dir(&b).unwrap();
    rustix::mount::mount_bind(&a, &b).unwrap();
    let _bind = BindGuard(b.clone());
    let (r, _) = open_way(
        Way::Openat2,
        d.as_fd(),
        b"b",
        OFlags::RDONLY | OFlags::DIRECTORY,
        Mounts::Stay,
    );
    assert_eq!(r.unwrap_err(), Error::MountPoint);
}

#[test]
fn enosys_is_remembered_and_eperm_is_not() {
    let t = TempDir::new("so-once");
    fs::write(t.path().join("f"), b"x").unwrap();
    let d = dir_fd(t.path());
    for (answer, remembered) in [(Errno::NOSYS, true), (Errno::PERM, false)] {
        let calls = Cell::new(0);
        let missing = AtomicBool::new(false);
        let stand_in = |_: BorrowedFd<'_>, _: &[u8], _: OFlags, _: Mode, _: ResolveFlags| {
            calls.set(calls.get() + 1);
            Err(answer)
        };
        for _ in 0..3 {
            let fd = open_entry_with(
                &missing,
                stand_in,
                d.as_fd(),
                b"f",
                OFlags::RDONLY,
                Mode::empty(),
                Mounts::Stay,
            )
            .unwrap();
            assert_eq!(kind(&fd), FileType::RegularFile);
        }
        assert_eq!(missing.load(Ordering::Relaxed), remembered, "{answer:?}");
        assert_eq!(calls.get(), if remembered { 1 } else { 3 }, "{answer:?}");
    }
}

#[test]
fn a_lasting_rename_race_is_reported() {
    let t = TempDir::new("so-race");
    fs::write(t.path().join("f"), b"x").unwrap();
    let d = dir_fd(t.path());
    let calls = Cell::new(0);
    let r = open_entry_with(
        &AtomicBool::new(false),
        |_, _, _, _, _| {
            calls.set(calls.get() + 1);
            Err(Errno::AGAIN)
        },
        d.as_fd(),
        b"f",
        OFlags::RDONLY,
        Mode::empty(),
        Mounts::Stay,
    );
    assert_eq!(r.unwrap_err(), Error::Raced);
    assert_eq!(calls.get(), RETRIES);
}

#[test]
fn open_path_nofollow_follows_the_directory_part_only() {
    let t = TempDir::new("so-path");
    fs::create_dir(t.path().join("real")).unwrap();
    fs::write(t.path().join("real/f"), b"x").unwrap();
    symlink("real", t.path().join("via")).unwrap();
    symlink("f", t.path().join("real/l")).unwrap();
    let fd = open_path_nofollow(&t.path().join("via/f"), OFlags::RDONLY, Mode::empty()).unwrap();
    assert_eq!(kind(&fd), FileType::RegularFile);
    assert_eq!(
        open_path_nofollow(&t.path().join("via/l"), OFlags::RDONLY, Mode::empty()).unwrap_err(),
        Error::Sys(Errno::LOOP)
    );
    assert_eq!(
        open_path_nofollow(&t.path().join("none/f"), OFlags::RDONLY, Mode::empty()).unwrap_err(),
        Error::Sys(Errno::NOENT)
    );
}

#[test]
fn errors_become_io_errors_with_their_kind() {
    assert_eq!(
        io::Error::from(Error::MountPoint).kind(),
        io::ErrorKind::CrossesDevices
    );
    assert_eq!(
        io::Error::from(Error::InvalidName).kind(),
        io::ErrorKind::InvalidInput
    );
    assert_eq!(
        io::Error::from(Error::Raced).raw_os_error(),
        Some(Errno::AGAIN.raw_os_error())
    );
    assert_eq!(
        io::Error::from(Error::Sys(Errno::LOOP)).raw_os_error(),
        Some(Errno::LOOP.raw_os_error())
    );
    assert_eq!(Error::MountPoint.errno(), Errno::XDEV);
}
