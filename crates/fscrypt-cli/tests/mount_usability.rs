//! `fscrypt-rs mount/unmount/status/demo` as a user meets them: mounting
//! without root (uid 65534 through the setuid fusermount3) and no silent
//! surprises (non-empty, stacked, dead and nested mount points, a vault
//! mounted twice, unmounting what is not ours, a busy Ctrl-C, `status` of
//! a vault, what `demo` left out).
//!
//! The tests need root (and setpriv, fusermount3 and a /dev/fuse that uid
//! 65534 may open for the unprivileged ones); without them they print a loud
//! reason and return. Every mount is undone by a guard.

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::Duration;

use test_support::procs::{ChildGuard, mount_daemon, uid_of};
use test_support::skip::can_mount;
use test_support::users::{NOBODY, as_user, nobody_sh};
use test_support::{TempDir, is_mounted, os_args as args, text};

const BIN: &str = env!("CARGO_BIN_EXE_fscrypt-rs");

/// Guards the mount on `mnt` (undone with `fscrypt-rs unmount`).
fn mount_guard(mnt: &Path) -> test_support::MountGuard {
    test_support::MountGuard::new(BIN, mnt)
}

/// The mountinfo line of the mount at `path`.
fn mount_line(path: &Path) -> Option<String> {
    let info = std::fs::read_to_string("/proc/self/mountinfo").unwrap();
    let want = path.to_str().unwrap();
    info.lines()
        .find(|l| l.split(' ').nth(4) == Some(want))
        .map(str::to_owned)
}

/// Waits for `cond`, failing after 30 s.
fn wait_for(what: &str, cond: impl FnMut() -> bool) {
    test_support::procs::wait_for(what, Duration::from_secs(30), cond);
}

/// Runs the binary with `args` (as root, or as uid 65534 through setpriv
/// with HOME in `home` and PATH as given), stdin empty, 60 s at most.
fn run_as(nobody: Option<(&Path, &str)>, args: &[&std::ffi::OsStr]) -> Output {
    let mut cmd = match nobody {
        Some((home, path)) => {
            let mut c = as_user(NOBODY, NOBODY, "env");
            c.arg(format!("HOME={}", home.display()))
                .arg(format!("PATH={path}"))
                .arg(BIN);
            c
        }
        None => Command::new(BIN),
    };
    test_support::run::output(cmd.args(args), b"")
}

fn run(args: &[&std::ffi::OsStr]) -> Output {
    run_as(None, args)
}

fn ok(out: &Output, what: &str) {
    assert!(
        out.status.success(),
        "{what} failed: {}{}",
        text(&out.stdout),
        text(&out.stderr)
    );
}

/// Fails unless the command failed with one line on stderr containing all
/// of `needles`.
fn refused(out: &Output, needles: &[&str]) -> String {
    let err = text(&out.stderr);
    assert!(!out.status.success(), "expected a refusal, got success");
    assert_eq!(err.trim().lines().count(), 1, "not one line: {err}");
    for n in needles {
        assert!(err.contains(n), "{n:?} not in: {err}");
    }
    err
}

/// A vault with a key file in `t`: (cipherdir, key file).
fn vault(t: &TempDir) -> (PathBuf, PathBuf) {
    let cipher = t.sub("cipher");
    let key = t.join("vault.key");
    test_support::cli::init_with_key_file(Path::new(BIN), &cipher, &key);
    (cipher, key)
}

// ------------------------------------------------------------ without root

/// Why uid 65534 cannot mount here, if it cannot (also: it cannot run
/// the binary, as in a 0700 build directory).
fn nobody_cannot_mount() -> Option<String> {
    if let Some(why) = test_support::skip::unprivileged_mount_unavailable() {
        return Some(why);
    }
    let exec = as_user(NOBODY, NOBODY, "test").args(["-x", BIN]).status();
    if !exec.is_ok_and(|s| s.success()) {
        return Some(format!("uid 65534 cannot run {BIN}"));
    }
    None
}

/// A 0755 directory owned by uid 65534.
fn nobody_dir(tag: &str) -> TempDir {
    let t = TempDir::new(tag);
    std::os::unix::fs::chown(t.path(), Some(NOBODY), Some(NOBODY)).unwrap();
    t
}

/// `PATH` for the commands run as nobody.
const NOBODY_PATH: &str = "/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin";

/// In `t` (from [`nobody_dir`]), as nobody: a home, a vault made with a new
/// key file, and an empty mount point: (home, cipherdir, mount point, key).
fn nobody_vault(t: &TempDir) -> (PathBuf, PathBuf, PathBuf, PathBuf) {
    let home = t.join("home");
    let cipher = t.join("cipher");
    let mnt = t.join("plain");
    let key = t.join("vault.key");
    let mkdirs = as_user(NOBODY, NOBODY, "mkdir")
        .args([&home, &cipher, &mnt])
        .status()
        .unwrap();
    assert!(mkdirs.success());
    ok(
        &run_as(
            Some((home.as_path(), NOBODY_PATH)),
            args!["init", cipher, "--new-key-file", key],
        ),
        "init as 65534",
    );
    (home, cipher, mnt, key)
}

#[test]
fn an_ordinary_user_mounts_and_unmounts_through_fusermount3() {
    if let Some(why) = nobody_cannot_mount() {
        eprintln!("SKIPPED an_ordinary_user_mounts_and_unmounts_through_fusermount3: {why}");
        return;
    }
    let t = nobody_dir("nobody");
    let (home, cipher, mnt, key) = nobody_vault(&t);
    let me = Some((home.as_path(), NOBODY_PATH));
    let _guard = mount_guard(&mnt);
    let out = run_as(me, args!["mount", cipher, mnt, "--key-file", key]);
    ok(&out, "mount as 65534");
    let line = mount_line(&mnt).expect("mounted");
    assert!(line.contains("fuse.fscrypt-rs"), "{line}");
    assert!(line.contains("user_id=65534"), "{line}");
    assert_eq!(
        mount_daemon(&mnt).and_then(uid_of),
        Some(65534),
        "the daemon runs as the user"
    );
    // Root cannot look into a mount without allow_other; the user writes
    // and reads through a shell of its own.
    let sh = |script: &str| nobody_sh(script).output().unwrap();
    let file = mnt.join("note.txt");
    let out = sh(&format!(
        "echo 'hello from nobody' > {0} && cat {0}",
        file.display()
    ));
    assert_eq!(text(&out.stdout), "hello from nobody\n", "{out:?}");
    ok(&run_as(me, args!["unmount", mnt]), "unmount as 65534");
    assert!(!is_mounted(&mnt));
    ok(
        &run_as(me, args!["mount", cipher, mnt, "--key-file", key]),
        "remount as 65534",
    );
    let out = sh(&format!("cat {}", file.display()));
    assert_eq!(text(&out.stdout), "hello from nobody\n", "{out:?}");
    ok(&run_as(me, args!["unmount", mnt]), "unmount as 65534");
    // Locked: one no-key name, no contents.
    ok(
        &run_as(me, args!["mount", cipher, mnt, "--locked"]),
        "locked mount as 65534",
    );
    let out = sh(&format!("ls {}", mnt.display()));
    let names = text(&out.stdout);
    assert_eq!(names.lines().count(), 1, "{out:?}");
    assert!(!names.contains("note.txt"), "{names}");
    let out = sh(&format!("cat {}/*", mnt.display()));
    assert!(!out.status.success(), "contents readable without the key");
    ok(
        &run_as(me, args!["unmount", mnt]),
        "unmount locked as 65534",
    );
    assert!(!is_mounted(&mnt));

    // fusermount3 not in PATH: said so, nothing mounted.
    let out = run_as(
        Some((home.as_path(), "/nonexistent")),
        args!["mount", cipher, mnt, "--key-file", key],
    );
    refused(&out, &["fusermount3", "not in PATH"]);
    assert!(!is_mounted(&mnt));
    // allow_other needs user_allow_other in /etc/fuse.conf.
    let conf = std::fs::read_to_string("/etc/fuse.conf").unwrap_or_default();
    if conf.lines().any(|l| l.trim() == "user_allow_other") {
        eprintln!("(allow_other case skipped: /etc/fuse.conf has user_allow_other)");
    } else {
        let out = run_as(
            me,
            args!["mount", cipher, mnt, "--key-file", key, "-o", "allow_other"],
        );
        refused(&out, &["user_allow_other", "/etc/fuse.conf"]);
        assert!(!is_mounted(&mnt));
    }
}

/// What a user's own mount (no `allow_other`, so no `default_permissions`:
/// the backing directory checks the daemon, who is the user) refuses: each
/// mode the user set takes effect as on a local filesystem, including for
/// a file whose descriptor the daemon holds open for writing (the cached
/// descriptor must not let a later open, truncate or access(2) through),
/// and access(2)/chdir(2), which the kernel then asks the daemon about.
#[test]
fn an_ordinary_users_own_mount_refuses_what_the_modes_refuse() {
    if let Some(why) = nobody_cannot_mount() {
        eprintln!("SKIPPED an_ordinary_users_own_mount_refuses_what_the_modes_refuse: {why}");
        return;
    }
    let t = nobody_dir("nobody-modes");
    let (home, cipher, mnt, key) = nobody_vault(&t);
    let me = Some((home.as_path(), NOBODY_PATH));
    let _guard = mount_guard(&mnt);
    let script = r#"
        fail() { echo "FAIL: $*"; exit 1; }
        mkdir "$1/$2" && cd "$1/$2" || fail "a directory in the mount"
        echo one > ro
        exec 3>>ro
        chmod 444 ro
        (echo two > ro) 2>/dev/null && fail "wrote a 0444 file"
        (echo two >> ro) 2>/dev/null && fail "appended to a 0444 file"
        truncate -s 0 ro 2>/dev/null && fail "truncated a 0444 file by name"
        test -w ro && fail "access(W_OK) granted on a 0444 file"
        test -r ro || fail "access(R_OK) refused on a 0444 file"
        test -x ro && fail "access(X_OK) granted on a 0444 file"
        echo three >&3 || fail "a handle opened before the chmod cannot write"
        exec 3>&-
        test "$(cat ro)" = "$(printf 'one
three')" || fail "contents: $(cat ro)"
        echo s > secret && chmod 000 secret
        cat secret 2>/dev/null && fail "read a 0000 file"
        test -r secret && fail "access(R_OK) granted on a 0000 file"
        mkdir d && echo x > d/x && chmod 555 d
        touch d/new 2>/dev/null && fail "created in a 0555 directory"
        mkdir d/sub 2>/dev/null && fail "made a directory in a 0555 directory"
        rm -f d/x 2>/dev/null; test -e d/x || fail "removed from a 0555 directory"
        mv d/x d/y 2>/dev/null && fail "renamed in a 0555 directory"
        test -w d && fail "access(W_OK) granted on a 0555 directory"
        test -x d || fail "access(X_OK) refused on a 0555 directory"
        chmod 755 d && chmod 644 ro secret || fail "chmod back"
        (cd d && ls >/dev/null && rm x) || fail "use the directory again"
        echo four > ro && cat secret >/dev/null || fail "use the files again"
        echo ok
    "#;
    // Without default_permissions (the backing directory checks), then
    // with it (the kernel checks): the same answers.
    for (dp, dir) in [(false, "own"), (true, "kernel")] {
        let mut mount = args!["mount", cipher, mnt, "--key-file", key].to_vec();
        if dp {
            mount.extend_from_slice(args!["-o", "default_permissions"]);
        }
        ok(&run_as(me, &mount), "mount as 65534");
        let line = mount_line(&mnt).expect("mounted");
        assert_eq!(line.contains("default_permissions"), dp, "{line}");
        let out = nobody_sh(script).arg(&mnt).arg(dir).output().unwrap();
        assert_eq!(
            text(&out.stdout),
            "ok\n",
            "{dir}: {}{}",
            text(&out.stdout),
            text(&out.stderr)
        );
        ok(&run_as(me, args!["unmount", mnt]), "unmount as 65534");
    }
}

// ---------------------------------------------------------- no surprises

#[test]
fn refuses_non_empty_nested_and_stacked_mount_points() {
    if !can_mount("refuses_non_empty_nested_and_stacked_mount_points") {
        return;
    }
    let t = TempDir::new("surprise");
    let (cipher, key) = vault(&t);
    let mnt = t.sub("plain");
    std::fs::write(mnt.join("a"), b"under").unwrap();
    std::fs::write(mnt.join("b"), b"under").unwrap();
    // Guards first: a refusal that fails to refuse must not leak a mount.
    let guard = mount_guard(&mnt);
    let other = t.sub("other");
    let _g_other = mount_guard(&other);
    let _g_cipher = mount_guard(&cipher);
    let _g_top = mount_guard(t.path());
    let out = run(args!["mount", cipher, mnt, "--key-file", key]);
    refused(&out, &["not empty", "2 entries", "--nonempty"]);
    assert!(!is_mounted(&mnt));
    // --nonempty mounts over them; they are back after unmounting.
    ok(
        &run(args!["mount", cipher, mnt, "--key-file", key, "--nonempty"]),
        "mount --nonempty",
    );
    assert!(!mnt.join("a").exists());
    // Already a mount: named.
    let out = run(args!["mount", cipher, mnt, "--key-file", key, "--nonempty"]);
    refused(&out, &["already a mount point", "fuse.fscrypt-rs"]);
    // The same vault elsewhere: the first mount point is named.
    let out = run(args!["mount", cipher, other, "--key-file", key]);
    refused(&out, &["already mounted at", mnt.to_str().unwrap()]);
    assert!(!is_mounted(&other));
    ok(&run(args!["unmount", mnt]), "unmount");
    drop(guard);
    assert_eq!(std::fs::read(mnt.join("a")).unwrap(), b"under");
    // The vault as its own mount point, a mount point inside it, the vault
    // inside the mount point.
    let out = run(args!["mount", cipher, cipher, "--key-file", key]);
    refused(&out, &["the vault itself"]);
    let inside = cipher.join("inside");
    std::fs::create_dir(&inside).unwrap();
    let _g_inside = mount_guard(&inside);
    let out = run(args!["mount", cipher, inside, "--key-file", key]);
    refused(&out, &["inside the vault"]);
    std::fs::remove_dir(&inside).unwrap();
    let out = run(args![
        "mount",
        cipher,
        t.path(),
        "--key-file",
        key,
        "--nonempty"
    ]);
    refused(&out, &["is inside the mount point"]);
    assert!(!is_mounted(t.path()) && !is_mounted(&cipher));
}

/// A daemon that was just unmounted may hold the vault lock for a moment
/// while it exits (CI saw `umount; mount` refused as "already mounted"): a
/// holder that lets go within the grace period is waited for, one that
/// keeps it is refused, and a visible live mount is named at once.
#[test]
fn a_lock_let_go_within_the_grace_period_does_not_refuse_the_mount() {
    if !can_mount("a_lock_let_go_within_the_grace_period_does_not_refuse_the_mount") {
        return;
    }
    let t = TempDir::new("grace");
    let (cipher, key) = vault(&t);
    let mnt = t.sub("plain");
    let _g = mount_guard(&mnt);
    // Another holder (as an exiting daemon would be) lets go after 1 s.
    let lock = fscrypt_fuse::VaultLock::try_acquire(&cipher)
        .unwrap()
        .unwrap();
    let release = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_secs(1));
        drop(lock);
    });
    ok(
        &run(args!["mount", cipher, mnt, "--key-file", key]),
        "mount while an exiting holder lets go",
    );
    release.join().unwrap();
    ok(&run(args!["unmount", mnt]), "unmount");
    // A holder that keeps it: refused after the grace period, in one line.
    let lock = fscrypt_fuse::VaultLock::try_acquire(&cipher)
        .unwrap()
        .unwrap();
    let start = std::time::Instant::now();
    let out = run(args!["mount", cipher, mnt, "--key-file", key]);
    refused(&out, &["already mounted", "not visible here"]);
    assert!(start.elapsed() >= fscrypt_fuse::VaultLock::GRACE);
    assert!(!is_mounted(&mnt));
    drop(lock);
}

#[test]
fn dead_mounts_are_named_and_cleared_and_unmount_says_what_is_not_ours() {
    if !can_mount("dead_mounts_are_named_and_cleared_and_unmount_says_what_is_not_ours") {
        return;
    }
    let t = TempDir::new("dead");
    let (cipher, key) = vault(&t);
    let mnt = t.sub("plain");
    let other = t.sub("other");
    let _g1 = mount_guard(&mnt);
    let _g2 = mount_guard(&other);
    ok(
        &run(args!["mount", cipher, mnt, "--key-file", key]),
        "mount",
    );
    // status of the mount and of the backing directory.
    let out = run(args!["status", mnt]);
    ok(&out, "status");
    let s = text(&out.stdout);
    for n in [
        "Vault:",
        cipher.to_str().unwrap(),
        "Key identifier:",
        "Protectors: key file",
        "unlocked",
    ] {
        assert!(s.contains(n), "{n:?} not in {s}");
    }
    assert!(
        !s.contains("not encrypted") && !s.contains("tune2fs"),
        "{s}"
    );
    let out = run(args!["status", cipher, "--json"]);
    ok(&out, "status --json");
    let j: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(j["mounts"][0]["mount_point"], mnt.to_str().unwrap());
    assert_eq!(j["mounts"][0]["state"], "unlocked");
    assert_eq!(j["protectors"][0], "key_file");
    // The daemon dies: the mount is dead.
    let pid = mount_daemon(&mnt).expect("the daemon serving the mount");
    Command::new("kill")
        .args(["-9", &pid.to_string()])
        .status()
        .unwrap();
    wait_for("the daemon to die", || {
        !Path::new(&format!("/proc/{pid}/cmdline")).exists()
            || std::fs::read(format!("/proc/{pid}/cmdline")).is_ok_and(|c| c.is_empty())
    });
    let out = run(args!["mount", cipher, mnt, "--key-file", key]);
    let clear = format!("fusermount3 -u {}", mnt.display());
    refused(&out, &["dead FUSE mount", &clear]);
    let out = run(args!["status", cipher]);
    ok(&out, "status of a dead mount");
    assert!(text(&out.stdout).contains("dead"), "{}", text(&out.stdout));
    // The lock died with the daemon: the vault mounts elsewhere, with a
    // note about the dead mount.
    let out = run(args!["mount", cipher, other, "--key-file", key]);
    ok(&out, "mount after a crash");
    assert!(text(&out.stderr).contains(&clear), "{}", text(&out.stderr));
    ok(&run(args!["unmount", other]), "unmount other");
    // `unmount` clears a dead mount.
    let out = run(args!["unmount", mnt]);
    ok(&out, "unmount of a dead mount");
    assert!(text(&out.stderr).contains("dead"), "{}", text(&out.stderr));
    assert!(!is_mounted(&mnt));
    // Not mounted; not ours.
    let out = run(args!["unmount", mnt]);
    refused(&out, &["is not mounted"]);
    let tmpfs = t.sub("tmpfs");
    let _g3 = mount_guard(&tmpfs);
    let mounted = Command::new("mount")
        .args(["-t", "tmpfs", "-o", "size=1m", "fscrypt-test-tmpfs"])
        .arg(&tmpfs)
        .status()
        .unwrap();
    assert!(mounted.success());
    let out = run(args!["unmount", tmpfs]);
    refused(&out, &["not a fscrypt-rs mount", "tmpfs"]);
    assert!(is_mounted(&tmpfs), "unmount touched a mount not ours");
    Command::new("umount").arg(&tmpfs).status().unwrap();
}

#[test]
fn foreground_is_quiet_and_each_ctrl_c_retries_a_busy_unmount() {
    if !can_mount("foreground_is_quiet_and_each_ctrl_c_retries_a_busy_unmount") {
        return;
    }
    let t = TempDir::new("busy");
    let (cipher, key) = vault(&t);
    let mnt = t.sub("plain");
    let _g = mount_guard(&mnt);
    let log = t.join("stderr");
    let daemon = Command::new(BIN)
        .args([
            "mount".as_ref(),
            cipher.as_os_str(),
            mnt.as_os_str(),
            "--key-file".as_ref(),
            key.as_os_str(),
            "--foreground".as_ref(),
        ])
        .env_remove("RUST_LOG")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&log).unwrap())
        .spawn()
        .unwrap();
    let mut daemon = ChildGuard(daemon);
    wait_for("the mount", || is_mounted(&mnt));
    // Ordinary work, closes included: nothing on stderr.
    std::fs::write(mnt.join("f"), b"data").unwrap();
    assert_eq!(std::fs::read(mnt.join("f")).unwrap(), b"data");
    std::fs::create_dir(mnt.join("d")).unwrap();
    std::fs::remove_dir(mnt.join("d")).unwrap();
    let _ = std::fs::read_dir(&mnt).unwrap().count();
    std::thread::sleep(Duration::from_millis(200));
    assert_eq!(
        std::fs::read_to_string(&log).unwrap(),
        "",
        "--foreground printed"
    );
    // Something keeps the mount busy.
    let sleeper = Command::new("sleep")
        .arg("60")
        .current_dir(&mnt)
        .spawn()
        .unwrap();
    let sleeper_pid = sleeper.id();
    let mut sleeper = ChildGuard(sleeper);
    let sigint = |pid: u32| {
        Command::new("kill")
            .args(["-INT", &pid.to_string()])
            .status()
            .unwrap()
    };
    sigint(daemon.0.id());
    wait_for("the busy message", || {
        std::fs::read_to_string(&log).unwrap().contains("busy")
    });
    assert!(is_mounted(&mnt));
    sigint(daemon.0.id());
    wait_for("the second busy message", || {
        std::fs::read_to_string(&log)
            .unwrap()
            .matches("busy")
            .count()
            >= 2
    });
    let msg = std::fs::read_to_string(&log).unwrap();
    assert!(
        msg.contains(&format!("pid {sleeper_pid} (sleep")),
        "the holder is not named: {msg}"
    );
    assert!(is_mounted(&mnt));
    let _ = sleeper.0.kill();
    let _ = sleeper.0.wait();
    sigint(daemon.0.id());
    wait_for("the daemon to exit", || {
        daemon.0.try_wait().unwrap().is_some()
    });
    assert!(!is_mounted(&mnt));
}

#[test]
fn demo_names_what_it_left_out() {
    if !can_mount("demo_names_what_it_left_out") {
        return;
    }
    let t = TempDir::new("demo");
    let src = t.sub("src");
    for i in 0..3 {
        std::fs::write(src.join(format!("file{i}")), b"x").unwrap();
    }
    let fifo = src.join("a-fifo");
    assert!(
        Command::new("mkfifo")
            .arg(&fifo)
            .status()
            .unwrap()
            .success()
    );
    let out = run(args![
        "demo",
        "--source",
        src,
        "--tmp",
        t.sub("tmp"),
        "--max-files",
        "1"
    ]);
    ok(&out, "demo");
    let s = text(&out.stdout);
    assert!(s.contains("3 entries left out"), "{s}");
    assert!(s.contains("1 device, FIFO or socket: a-fifo"), "{s}");
    assert!(s.contains("2 over --max-files 1: file1, file2"), "{s}");
}

#[test]
fn an_ordinary_users_idle_mount_unmounts_itself_through_fusermount3() {
    if let Some(why) = nobody_cannot_mount() {
        eprintln!(
            "SKIPPED an_ordinary_users_idle_mount_unmounts_itself_through_fusermount3: {why}"
        );
        return;
    }
    let t = nobody_dir("nobody-idle");
    let (home, cipher, mnt, key) = nobody_vault(&t);
    let me = Some((home.as_path(), NOBODY_PATH));
    let _guard = mount_guard(&mnt);
    ok(
        &run_as(
            me,
            args!["mount", cipher, mnt, "--key-file", key, "--idle", "2s"],
        ),
        "mount --idle as 65534",
    );
    assert!(is_mounted(&mnt));
    let daemon = mount_daemon(&mnt).expect("the daemon");
    // The daemon unmounts with fusermount3 -u, as `fscrypt-rs unmount`
    // does without root, and exits.
    wait_for("the idle mount to go", || !is_mounted(&mnt));
    wait_for("the daemon to exit", || {
        !Path::new(&format!("/proc/{daemon}")).exists()
    });
}

/// `unmount` of a path that does not exist says so (not "is not mounted",
/// which sends the user looking for a mount), and how to list the mounts;
/// a directory with nothing mounted says that. Needs no mount.
#[test]
fn unmount_of_a_missing_path_says_it_does_not_exist() {
    let t = TempDir::new("unmount-missing");
    let missing = t.path().join("no-such-mnt");
    let out = run(args!["unmount", missing]);
    let err = refused(
        &out,
        &["no-such-mnt does not exist", "findmnt -t fuse.fscrypt-rs"],
    );
    assert!(!err.contains("is not mounted"), "{err}");
    let out = run(args!["unmount", t.sub("empty")]);
    refused(&out, &["is not mounted", "findmnt -t fuse.fscrypt-rs"]);
}
