//! The mount point is looked up once (issue 20, item 3): a root `mount`
//! onto a directory another user controls cannot be redirected by swapping
//! it for a symlink between the checks and the mount. And read-only
//! remounts through the mount(8) helper (item 8), and `-o noexec` honoured.
//!
//! The tests need root and /dev/fuse; without them they print a loud reason
//! and return. The race is made deterministic by the documented test seam
//! `FSCRYPT_RS_TEST_PAUSE_BEFORE_MOUNT` (the mount waits after its checks
//! until the test has swapped the mount point). Every mount is undone.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use test_support::procs::ChildGuard;
use test_support::skip::can_mount;
use test_support::users::NOBODY;
use test_support::{TempDir, clear_mount, is_mounted, os_args as args, text};

const BIN: &str = env!("CARGO_BIN_EXE_fscrypt-rs");
const PAUSE_ENV: &str = "FSCRYPT_RS_TEST_PAUSE_BEFORE_MOUNT";

/// A vault in `t` protected by a new key file: (cipher dir, key file).
fn vault(t: &TempDir) -> (PathBuf, PathBuf) {
    let cipher = t.sub("cipher");
    let key = t.path().join("vault.key");
    let out = test_support::cli::run(
        Path::new(BIN),
        args!["init", cipher, "--new-key-file", key],
        b"",
    );
    assert!(out.status.success(), "init: {}", text(&out.stderr));
    (cipher, key)
}

/// Unmounts whatever is on `path` when dropped (also when a test panics).
struct Clear(PathBuf);

impl Drop for Clear {
    fn drop(&mut self) {
        clear_mount(&self.0);
    }
}

/// The fscrypt-rs mounts whose source is `cipher`.
fn mounts_of(cipher: &Path) -> Vec<String> {
    let info = std::fs::read_to_string("/proc/self/mountinfo").unwrap();
    let want = cipher.to_str().unwrap();
    info.lines()
        .filter(|l| l.contains(" - fuse.fscrypt-rs ") && l.contains(&format!(" {want} ")))
        .map(str::to_owned)
        .collect()
}

#[test]
fn a_mount_point_swapped_for_a_symlink_is_not_followed() {
    let test = "a_mount_point_swapped_for_a_symlink_is_not_followed";
    if !can_mount(test) {
        return;
    }
    let t = TempDir::new("mount-race");
    let (cipher, key) = vault(&t);
    // /tmp/…/x belongs to another user, and so does x/mnt.
    let x = t.sub("x");
    let mnt = x.join("mnt");
    std::fs::create_dir(&mnt).unwrap();
    std::os::unix::fs::chown(&x, Some(NOBODY), Some(NOBODY)).unwrap();
    std::os::unix::fs::chown(&mnt, Some(NOBODY), Some(NOBODY)).unwrap();
    // The directory the swap points at: root's.
    let target = t.sub("root-only");
    std::fs::set_permissions(&target, std::fs::Permissions::from_mode(0o700)).unwrap();
    let pause = t.sub("pause");
    let moved = x.join("mnt.orig");
    let _clear = [
        Clear(target.clone()),
        Clear(moved.clone()),
        Clear(mnt.clone()),
    ];

    let child = Command::new(BIN)
        .args(args!["mount", cipher, mnt, "--key-file", key])
        .env(PAUSE_ENV, &pause)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut child = ChildGuard(child);
    test_support::procs::wait_for("the mount to pause", Duration::from_secs(30), || {
        pause.join("PAUSED").exists()
    });
    // The other user's move: the checked directory away, a symlink to
    // root's directory in its place.
    std::fs::rename(&mnt, &moved).unwrap();
    std::os::unix::fs::symlink(&target, &mnt).unwrap();
    std::fs::write(pause.join("RESUME"), b"").unwrap();

    let start = Instant::now();
    let status = loop {
        assert!(
            !is_mounted(&target),
            "the vault was mounted on the symlink's target {}",
            target.display()
        );
        if let Some(st) = child.0.try_wait().unwrap() {
            break st;
        }
        assert!(
            start.elapsed() < Duration::from_secs(90),
            "mount did not finish"
        );
        std::thread::sleep(Duration::from_millis(20));
    };
    let mut stderr = String::new();
    use std::io::Read;
    child
        .0
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut stderr)
        .unwrap();
    assert!(!is_mounted(&target), "mounted on {}", target.display());
    // Mounted on the directory that was checked (now mnt.orig), or refused.
    if status.success() {
        assert!(
            is_mounted(&moved),
            "mounted, but not on {}",
            moved.display()
        );
        assert!(
            std::fs::read_dir(&target).unwrap().next().is_none(),
            "the target shows entries"
        );
        std::fs::write(moved.join("hello"), b"hi").unwrap();
        clear_mount(&moved);
    }
    // The warning about the parent directory another user owns.
    assert!(
        stderr.contains("warning: another user could replace the mount point"),
        "{stderr}"
    );
    // No mount of the vault is left anywhere (a dead one included).
    test_support::procs::wait_for("the daemon to go", Duration::from_secs(10), || {
        mounts_of(&cipher).is_empty()
    });
}

#[test]
fn mount8_remounts_a_vault_read_only_and_back() {
    let test = "mount8_remounts_a_vault_read_only_and_back";
    if !can_mount(test) {
        return;
    }
    if !Path::new("/usr/bin/unshare").exists() || !Path::new("/usr/bin/mount").exists() {
        test_support::skip::skip(test, "needs unshare(1) and mount(8) in /usr/bin");
        return;
    }
    let t = TempDir::new("remount");
    let (cipher, key) = vault(&t);
    let mnt = t.sub("mnt");
    // mount(8) looks for /sbin/mount.<type>: in a private mount namespace,
    // a directory with our helper (both names, as README says) is bound
    // over /sbin (only there).
    let sbin = t.sub("sbin");
    for name in ["mount.fscrypt-rs", "mount.fuse.fscrypt-rs"] {
        std::os::unix::fs::symlink(BIN, sbin.join(name)).unwrap();
    }
    // As xfstests does: `mount -o remount,ro MNT`, no type, no source.
    let script = r#"
        set -u
        mount --bind "$SBIN" /sbin || exit 90
        trap 'umount -l "$MNT" 2>/dev/null' EXIT
        mount -t fscrypt-rs -o "keyfile=$KEY" "$CIPHER" "$MNT" || exit 91
        echo before > "$MNT/f" || exit 92
        mount -o remount,ro "$MNT" || exit 93
        grep -q " $MNT ro," /proc/self/mountinfo || exit 94
        echo x 2>/dev/null > "$MNT/g" && exit 95
        echo y 2>/dev/null >> "$MNT/f" && exit 96
        mkdir "$MNT/d" 2>&1 | grep -q "Read-only file system" || exit 97
        cat "$MNT/f"
        mount -o remount,rw "$MNT" || exit 98
        grep -q " $MNT rw,nosuid,nodev" /proc/self/mountinfo || exit 99
        echo after > "$MNT/g" || exit 100
        cat "$MNT/g"
        umount "$MNT" || exit 101
        # A daemon started read-only refuses writes itself: rw is refused.
        mount -t fscrypt-rs -o "ro,keyfile=$KEY" "$CIPHER" "$MNT" || exit 102
        mount -o remount,rw "$MNT" 2>&1 | grep -q "started read-only" || exit 103
        grep -q " $MNT ro," /proc/self/mountinfo || exit 104
        umount "$MNT" || exit 105
        # Not a fscrypt-rs mount: nothing is remounted.
        /sbin/mount.fscrypt-rs "$CIPHER" "$SBIN" -o remount,ro 2>&1 | grep -q "not a fscrypt-rs mount" || exit 106
    "#;
    let child = Command::new("/usr/bin/unshare")
        .args([
            "--mount",
            "--propagation",
            "private",
            "/bin/sh",
            "-c",
            script,
        ])
        .env("SBIN", &sbin)
        .env("MNT", &mnt)
        .env("CIPHER", &cipher)
        .env("KEY", &key)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut child = ChildGuard(child);
    let start = Instant::now();
    while child.0.try_wait().unwrap().is_none() {
        assert!(start.elapsed() < Duration::from_secs(60), "timed out");
        std::thread::sleep(Duration::from_millis(20));
    }
    let mut stdout = String::new();
    let mut stderr = String::new();
    use std::io::Read;
    child
        .0
        .stdout
        .take()
        .unwrap()
        .read_to_string(&mut stdout)
        .unwrap();
    child
        .0
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut stderr)
        .unwrap();
    let status = child.0.wait().unwrap();
    if status.code() == Some(90) {
        test_support::skip::skip(test, &format!("cannot bind-mount over /sbin: {stderr}"));
        return;
    }
    assert!(status.success(), "{status}: {stdout}{stderr}");
    assert_eq!(stdout, "before\nafter\n", "{stderr}");
    assert!(!is_mounted(&mnt));
}

#[test]
fn noexec_is_honoured_not_ignored() {
    let test = "noexec_is_honoured_not_ignored";
    if !can_mount(test) {
        return;
    }
    let t = TempDir::new("noexec");
    let (cipher, key) = vault(&t);
    let mnt = t.sub("mnt");
    let _clear = Clear(mnt.clone());
    let run = |extra: &[&str]| {
        let mut a: Vec<std::ffi::OsString> = vec![
            "mount".into(),
            cipher.clone().into(),
            mnt.clone().into(),
            "--key-file".into(),
            key.clone().into(),
        ];
        a.extend(extra.iter().map(Into::into));
        let a: Vec<&std::ffi::OsStr> = a.iter().map(|s| s.as_os_str()).collect();
        let out = test_support::cli::run(Path::new(BIN), &a, b"");
        assert!(out.status.success(), "mount: {}", text(&out.stderr));
    };
    run(&[]);
    let script = mnt.join("hello.sh");
    std::fs::write(&script, b"#!/bin/sh\necho hello\n").unwrap();
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
    assert_eq!(
        text(&Command::new(&script).output().unwrap().stdout),
        "hello\n"
    );
    test_support::mount::unmount_with(Path::new(BIN), &mnt);
    run(&["-o", "noexec"]);
    let err = Command::new(&script).output().unwrap_err();
    // EACCES: the kernel refuses to run a program from a noexec mount.
    assert_eq!(err.kind(), std::io::ErrorKind::PermissionDenied, "{err}");
    let info = std::fs::read_to_string("/proc/self/mountinfo").unwrap();
    let line = info
        .lines()
        .find(|l| l.split(' ').nth(4) == mnt.to_str())
        .unwrap();
    assert!(line.contains(",noexec"), "{line}");
    test_support::mount::unmount_with(Path::new(BIN), &mnt);
}
