//! Mount options of `fscrypt-rs mount` seen on a real mount: `idle`
//! (the mount unmounts itself once unused; an open file keeps it), and
//! `ro` chosen for a backing directory that cannot be written.
//!
//! The tests need root and /dev/fuse; without them they print a loud
//! reason and return. Every mount is undone by a guard.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use test_support::procs::ChildGuard;
use test_support::skip::can_mount;
use test_support::{TempDir, is_mounted, os_args as args, text};

const BIN: &str = env!("CARGO_BIN_EXE_fscrypt-rs");

/// A vault with a key file in `t`: (cipherdir, key file).
fn vault(t: &TempDir) -> (PathBuf, PathBuf) {
    let cipher = t.sub("cipher");
    let key = t.join("vault.key");
    test_support::cli::init_with_key_file(Path::new(BIN), &cipher, &key);
    (cipher, key)
}

/// Polls /proc/self/mountinfo until `mnt` is no mount point, up to 15 s;
/// returns how long that took.
fn unmounted_within_15s(mnt: &Path) -> Option<Duration> {
    let start = Instant::now();
    while start.elapsed() < Duration::from_secs(15) {
        if !is_mounted(mnt) {
            return Some(start.elapsed());
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    None
}

#[test]
fn an_idle_mount_unmounts_itself_unless_a_file_is_open() {
    if !can_mount("an_idle_mount_unmounts_itself_unless_a_file_is_open") {
        return;
    }
    let t = TempDir::new("idle");
    let (cipher, key) = vault(&t);
    let mnt = t.sub("plain");
    let _g = test_support::MountGuard::new(BIN, &mnt);

    // In the foreground (--idle): used, then left alone; the daemon ends
    // by itself, with status 0, once the mount is gone.
    let log = t.join("stderr");
    let daemon = Command::new(BIN)
        .args(args![
            "mount",
            cipher,
            mnt,
            "--key-file",
            key,
            "--foreground",
            "--idle",
            "2s"
        ])
        .env_remove("RUST_LOG")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&log).unwrap())
        .spawn()
        .unwrap();
    let mut daemon = ChildGuard(daemon);
    test_support::procs::wait_for("the mount", Duration::from_secs(30), || is_mounted(&mnt));
    std::fs::write(mnt.join("f"), b"data").unwrap();
    assert_eq!(std::fs::read(mnt.join("f")).unwrap(), b"data");
    let took = unmounted_within_15s(&mnt).expect("an idle mount still mounted after 15 s");
    assert!(
        took >= Duration::from_millis(1500),
        "unmounted {took:?} after the last use, before its idle time of 2 s"
    );
    let start = Instant::now();
    let status = loop {
        if let Some(s) = daemon.0.try_wait().unwrap() {
            break s;
        }
        assert!(
            start.elapsed() < Duration::from_secs(10),
            "the daemon of an unmounted mount still runs"
        );
        std::thread::sleep(Duration::from_millis(20));
    };
    assert!(
        status.success(),
        "daemon: {status}: {}",
        std::fs::read_to_string(&log).unwrap()
    );

    // In the background (-o idle=, as from fstab): a file held open past
    // the idle time keeps the mount; closing it lets the mount go.
    let out = test_support::cli::run(
        Path::new(BIN),
        args!["mount", cipher, mnt, "--key-file", key, "-o", "idle=2s"],
        b"",
    );
    assert!(out.status.success(), "mount: {}", text(&out.stderr));
    assert!(is_mounted(&mnt));
    let held = std::fs::File::open(mnt.join("f")).unwrap();
    std::thread::sleep(Duration::from_secs(5));
    assert!(
        is_mounted(&mnt),
        "unmounted (or tried to) while a file was open"
    );
    let mut data = String::new();
    std::io::Read::read_to_string(&mut &held, &mut data).unwrap();
    assert_eq!(data, "data");
    drop(held);
    let took = unmounted_within_15s(&mnt).expect("still mounted 15 s after the file was closed");
    assert!(took >= Duration::from_millis(1500), "{took:?}");
}

/// The per-mount options (field 6 of /proc/self/mountinfo) of the mount at
/// `path`.
fn mount_options(path: &Path) -> Option<Vec<String>> {
    let info = std::fs::read_to_string("/proc/self/mountinfo").unwrap();
    let want = path.to_str().unwrap();
    info.lines()
        .rev()
        .find(|l| l.split(' ').nth(4) == Some(want))
        .and_then(|l| l.split(' ').nth(5))
        .map(|o| o.split(',').map(str::to_owned).collect())
}

#[test]
fn a_read_only_backing_directory_mounts_read_only_and_says_so() {
    if !can_mount("a_read_only_backing_directory_mounts_read_only_and_says_so") {
        return;
    }
    let t = TempDir::new("robacking");
    let (cipher, key) = vault(&t);
    let mnt = t.sub("plain");
    // A file in the vault, written through an ordinary mount.
    let out = test_support::cli::run(
        Path::new(BIN),
        args!["mount", cipher, mnt, "--key-file", key],
        b"",
    );
    assert!(out.status.success(), "mount: {}", text(&out.stderr));
    std::fs::write(mnt.join("f"), b"data").unwrap();
    test_support::mount::unmount_with(Path::new(BIN), &mnt);

    // The same backing directory through a read-only bind mount (undone
    // last: declared before the mount's guard).
    let ro = t.sub("cipher-ro");
    let sh = |a: &[&std::ffi::OsStr]| {
        let out = Command::new("mount").args(a).output().unwrap();
        assert!(out.status.success(), "mount {a:?}: {}", text(&out.stderr));
    };
    sh(args!["--bind", cipher, ro]);
    let _bind = test_support::BindGuard(ro.clone());
    sh(args!["-o", "remount,bind,ro", ro]);
    let guard = test_support::MountGuard::new(BIN, &mnt);
    let out = test_support::cli::run(
        Path::new(BIN),
        args!["mount", ro, mnt, "--key-file", key],
        b"",
    );
    let err = text(&out.stderr);
    assert!(
        out.status.success(),
        "mount over a read-only backing dir: {err}"
    );
    assert_eq!(err.trim().lines().count(), 1, "not one line: {err:?}");
    assert!(
        err.contains("backing directory is read-only: mounting read-only"),
        "{err:?}"
    );
    let opts = mount_options(&mnt).expect("mounted");
    assert!(opts.iter().any(|o| o == "ro"), "mount options {opts:?}");
    assert!(!opts.iter().any(|o| o == "rw"), "mount options {opts:?}");
    let e = std::fs::write(mnt.join("new"), b"x").unwrap_err();
    assert_eq!(e.raw_os_error(), Some(libc::EROFS), "{e}");
    let e = std::fs::OpenOptions::new()
        .write(true)
        .open(mnt.join("f"))
        .unwrap_err();
    assert_eq!(e.raw_os_error(), Some(libc::EROFS), "{e}");
    assert_eq!(std::fs::read(mnt.join("f")).unwrap(), b"data");
    guard.unmount();

    // Asked for ro: no warning.
    let out = test_support::cli::run(
        Path::new(BIN),
        args!["mount", ro, mnt, "--key-file", key, "-o", "ro"],
        b"",
    );
    assert!(out.status.success(), "mount -o ro: {}", text(&out.stderr));
    assert_eq!(text(&out.stderr), "", "a warning for an ro mount");
    guard.unmount();
}
