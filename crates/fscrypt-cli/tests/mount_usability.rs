//! `fscrypt-rs mount/unmount/status/demo` as a user meets them: mounting
//! without root (uid 65534 through the setuid fusermount3) and no silent
//! surprises (non-empty, stacked, dead and nested mount points, a vault
//! mounted twice, unmounting what is not ours, a busy Ctrl-C, `status` of
//! a vault, what `demo` left out).
//!
//! The tests need root (and setpriv, fusermount3 and a /dev/fuse that uid
//! 65534 may open for the unprivileged ones); without them they print a loud
//! reason and return. Every mount is undone by a guard.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

const BIN: &str = env!("CARGO_BIN_EXE_fscrypt-rs");
const NOBODY: &str = "65534";

/// A temporary directory removed on drop (after the guards unmounted).
struct TempDir(PathBuf);

impl TempDir {
    fn new(tag: &str) -> TempDir {
        let mut rnd = [0u8; 6];
        use std::io::Read;
        std::fs::File::open("/dev/urandom")
            .unwrap()
            .read_exact(&mut rnd)
            .unwrap();
        let hex: String = rnd.iter().map(|b| format!("{b:02x}")).collect();
        let path = std::env::temp_dir().join(format!("fscrypt-usab-{tag}-{hex}"));
        std::fs::create_dir(&path).unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
        TempDir(std::fs::canonicalize(path).unwrap())
    }
    fn path(&self) -> &Path {
        &self.0
    }
    fn sub(&self, name: &str) -> PathBuf {
        let p = self.0.join(name);
        std::fs::create_dir_all(&p).unwrap();
        p
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

fn is_root() -> bool {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("Uid:"))
                .and_then(|l| l.split_whitespace().nth(2).map(|u| u == "0"))
        })
        .unwrap_or(false)
}

fn can_mount(test: &str) -> bool {
    let ok = is_root() && Path::new("/dev/fuse").exists();
    if !ok {
        eprintln!("SKIPPED {test}: needs root and /dev/fuse");
    }
    ok
}

fn is_mounted(path: &Path) -> bool {
    let info = std::fs::read_to_string("/proc/self/mountinfo").unwrap();
    let want = path.to_str().unwrap();
    info.lines().any(|l| l.split(' ').nth(4) == Some(want))
}

/// The mountinfo line of the mount at `path`.
fn mount_line(path: &Path) -> Option<String> {
    let info = std::fs::read_to_string("/proc/self/mountinfo").unwrap();
    let want = path.to_str().unwrap();
    info.lines()
        .find(|l| l.split(' ').nth(4) == Some(want))
        .map(str::to_owned)
}

/// Unmounts on drop (`fscrypt-rs unmount`, then a lazy umount).
struct MountGuard(PathBuf);

impl Drop for MountGuard {
    fn drop(&mut self) {
        for _ in 0..3 {
            if is_mounted(&self.0) {
                let _ = Command::new(BIN)
                    .arg("unmount")
                    .arg(&self.0)
                    .stderr(Stdio::null())
                    .status();
            }
        }
        if is_mounted(&self.0) {
            let _ = Command::new("umount").arg("-l").arg(&self.0).status();
        }
    }
}

/// Kills and reaps a child on drop.
struct ChildGuard(Child);

impl Drop for ChildGuard {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Waits for `cond`, failing after 30 s.
fn wait_for(what: &str, mut cond: impl FnMut() -> bool) {
    let start = Instant::now();
    while !cond() {
        assert!(
            start.elapsed() < Duration::from_secs(30),
            "timed out waiting for {what}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Runs the binary with `args` (as root, or as uid 65534 through setpriv
/// with HOME in `home` and PATH as given), stdin /dev/null, 60 s at most.
fn run_as(nobody: Option<(&Path, &str)>, args: &[&std::ffi::OsStr]) -> Output {
    let mut cmd = match nobody {
        Some((home, path)) => {
            let mut c = Command::new("setpriv");
            c.args([
                "--reuid",
                NOBODY,
                "--regid",
                NOBODY,
                "--clear-groups",
                "env",
            ])
            .arg(format!("HOME={}", home.display()))
            .arg(format!("PATH={path}"))
            .arg(BIN);
            c
        }
        None => Command::new(BIN),
    };
    let mut child = cmd
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let start = Instant::now();
    loop {
        if child.try_wait().unwrap().is_some() {
            return child.wait_with_output().unwrap();
        }
        if start.elapsed() > Duration::from_secs(60) {
            let _ = child.kill();
            panic!("{args:?} did not finish within 60 s");
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

macro_rules! args {
    ($($a:expr),* $(,)?) => { &[$(std::ffi::OsStr::new(&$a)),*] };
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
    let key = t.path().join("vault.key");
    ok(&run(args!["init", cipher, "--new-key-file", key]), "init");
    (cipher, key)
}

// ------------------------------------------------------------ without root

/// Why uid 65534 cannot mount here, if it cannot.
fn nobody_cannot_mount() -> Option<String> {
    if !is_root() {
        return Some("needs root (to become uid 65534 with setpriv)".into());
    }
    if Command::new("setpriv").arg("--version").output().is_err() {
        return Some("needs setpriv (util-linux)".into());
    }
    let fusermount = ["/usr/bin/fusermount3", "/bin/fusermount3"]
        .into_iter()
        .find(|p| Path::new(p).exists());
    let Some(fusermount) = fusermount else {
        return Some("needs fusermount3 (fuse3)".into());
    };
    let mode = std::fs::metadata(fusermount).unwrap().permissions().mode();
    if mode & 0o4000 == 0 {
        return Some(format!("{fusermount} is not setuid"));
    }
    let dev = std::fs::metadata("/dev/fuse").map(|m| m.permissions().mode());
    match dev {
        Ok(m) if m & 0o006 == 0o006 => {}
        Ok(m) => {
            return Some(format!(
                "/dev/fuse is mode {:o}, not 0666 (scripts/setup.sh fixes that)",
                m & 0o777
            ));
        }
        Err(_) => return Some("needs /dev/fuse".into()),
    }
    let exec = Command::new("setpriv")
        .args(["--reuid", NOBODY, "--regid", NOBODY, "--clear-groups"])
        .args(["test", "-x", BIN])
        .status();
    if !exec.is_ok_and(|s| s.success()) {
        return Some(format!("uid 65534 cannot run {BIN}"));
    }
    None
}

/// A 0755 directory owned by uid 65534.
fn nobody_dir(tag: &str) -> TempDir {
    let t = TempDir::new(tag);
    std::process::Command::new("chown")
        .args([&format!("{NOBODY}:{NOBODY}"), t.path().to_str().unwrap()])
        .status()
        .unwrap();
    t
}

/// The uid of the `fscrypt-rs mount --foreground` daemon serving `mnt`.
fn daemon_uid(mnt: &Path) -> Option<u32> {
    for e in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(cmd) = std::fs::read(e.path().join("cmdline")) else {
            continue;
        };
        let argv: Vec<&[u8]> = cmd.split(|&b| b == 0).collect();
        if argv.contains(&&b"--foreground"[..]) && argv.contains(&mnt.to_str().unwrap().as_bytes())
        {
            let status = std::fs::read_to_string(e.path().join("status")).ok()?;
            let uid = status.lines().find(|l| l.starts_with("Uid:"))?;
            return uid.split_whitespace().nth(2)?.parse().ok();
        }
    }
    None
}

#[test]
fn an_ordinary_user_mounts_and_unmounts_through_fusermount3() {
    if let Some(why) = nobody_cannot_mount() {
        eprintln!("SKIPPED an_ordinary_user_mounts_and_unmounts_through_fusermount3: {why}");
        return;
    }
    let t = nobody_dir("nobody");
    let home = t.path().join("home");
    let cipher = t.path().join("cipher");
    let mnt = t.path().join("plain");
    let key = t.path().join("vault.key");
    let path = "/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin";
    let me = Some((home.as_path(), path));
    let mkdirs = Command::new("setpriv")
        .args(["--reuid", NOBODY, "--regid", NOBODY, "--clear-groups"])
        .arg("mkdir")
        .args([&home, &cipher, &mnt])
        .status()
        .unwrap();
    assert!(mkdirs.success());
    ok(
        &run_as(me, args!["init", cipher, "--new-key-file", key]),
        "init as 65534",
    );
    let _guard = MountGuard(mnt.clone());
    let out = run_as(me, args!["mount", cipher, mnt, "--key-file", key]);
    ok(&out, "mount as 65534");
    let line = mount_line(&mnt).expect("mounted");
    assert!(line.contains("fuse.fscrypt-rs"), "{line}");
    assert!(line.contains("user_id=65534"), "{line}");
    assert_eq!(daemon_uid(&mnt), Some(65534), "the daemon runs as the user");
    // Root cannot look into a mount without allow_other; the user writes
    // and reads through a shell of its own.
    let sh = |script: &str| {
        Command::new("setpriv")
            .args(["--reuid", NOBODY, "--regid", NOBODY, "--clear-groups"])
            .args(["sh", "-c", script])
            .output()
            .unwrap()
    };
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
    let guard = MountGuard(mnt.clone());
    let other = t.sub("other");
    let _g_other = MountGuard(other.clone());
    let _g_cipher = MountGuard(cipher.clone());
    let _g_top = MountGuard(t.path().to_path_buf());
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
    let _g_inside = MountGuard(inside.clone());
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

/// The pid of the daemon serving `mnt`.
fn daemon_pid(mnt: &Path) -> u32 {
    for e in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(cmd) = std::fs::read(e.path().join("cmdline")) else {
            continue;
        };
        let argv: Vec<&[u8]> = cmd.split(|&b| b == 0).collect();
        if argv.contains(&&b"--foreground"[..]) && argv.contains(&mnt.to_str().unwrap().as_bytes())
        {
            return e.file_name().to_str().unwrap().parse().unwrap();
        }
    }
    panic!("no daemon for {}", mnt.display());
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
    let _g1 = MountGuard(mnt.clone());
    let _g2 = MountGuard(other.clone());
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
    let pid = daemon_pid(&mnt);
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
    let _g3 = MountGuard(tmpfs.clone());
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
    let _g = MountGuard(mnt.clone());
    let log = t.path().join("stderr");
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
