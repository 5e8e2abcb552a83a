//! Reverse mode (issue 24): `fscrypt-rs init --reverse PLAIN` and
//! `fscrypt-rs mount --reverse PLAIN VIEW` on real mounts.
//!
//! - the view is read-only (EROFS for every write);
//! - it is byte-stable: the same plaintext gives the same view bytes across
//!   remounts and on both transports (`/dev/fuse`, FUSE over io_uring);
//! - a copy of the view (rsync, or `cp -a` without rsync) is a vault:
//!   `fsck` finds it clean and a forward mount gives back the plaintext
//!   (`diff -r`, modes, times, symlinks, hard links as files, sparse files),
//!   and a second rsync copies nothing, then exactly the one file changed;
//! - `--exclude` and `--exclude-from` leave entries out;
//! - an ordinary user (uid 65534) mounts a view through fusermount3, and
//!   `-o allow_other` lets another user (a backup daemon's) read it.
//!
//! The tests need root and /dev/fuse; without them they print a loud
//! reason and return. Every mount is undone by a guard.

use std::ffi::OsStr;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use test_support::cli::CHEAP_ARGON2;
use test_support::skip::{can_mount, command_exists};
use test_support::users::{NOBODY, as_user, nobody_sh};
use test_support::{MountGuard, TempDir, is_mounted, os_args as args, text};

const BIN: &str = env!("CARGO_BIN_EXE_fscrypt-rs");

/// The plaintext's own name for the reverse config (hidden in the view).
const REVERSE_CONFIG: &str = ".fscrypt-rs.reverse.json";

fn run(a: &[&OsStr]) -> Output {
    test_support::run::output(
        Command::new(BIN)
            .args(a)
            .env("FSCRYPT_RS_INSECURE_ARGON2_PARAMS", CHEAP_ARGON2),
        b"",
    )
}

fn ok(out: &Output, what: &str) -> String {
    assert!(
        out.status.success(),
        "{what} failed ({}): {}{}",
        out.status,
        text(&out.stdout),
        text(&out.stderr)
    );
    text(&out.stdout)
}

/// A plaintext tree with every kind of object a backup meets.
fn plain_tree(t: &TempDir) -> PathBuf {
    let plain = t.sub("plain");
    std::fs::create_dir_all(plain.join("docs/deep/er")).unwrap();
    std::fs::write(plain.join("hello.txt"), b"hello, world\n").unwrap();
    std::fs::write(plain.join("empty"), b"").unwrap();
    // Over one group of 128 data units, not a multiple of 4096.
    let big: Vec<u8> = (0..700_001u32)
        .map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8)
        .collect();
    std::fs::write(plain.join("docs/big.bin"), &big).unwrap();
    std::fs::write(plain.join("docs/deep/er/note"), b"deep").unwrap();
    // A sparse file: 8 MiB with 3 bytes in the middle.
    let f = std::fs::File::create(plain.join("sparse")).unwrap();
    f.set_len(8 << 20).unwrap();
    std::os::unix::fs::FileExt::write_at(&f, b"mid", 4 << 20).unwrap();
    drop(f);
    // A long name (a long-name side file in the view).
    std::fs::write(plain.join("L".repeat(200)), b"long name").unwrap();
    std::os::unix::fs::symlink("hello.txt", plain.join("link")).unwrap();
    std::os::unix::fs::symlink("/nowhere/at/all", plain.join("docs/dangling")).unwrap();
    // A target too long for a backing symlink: in the symlink store.
    let long_target = format!("{}/end", "t".repeat(3500));
    std::os::unix::fs::symlink(&long_target, plain.join("docs/long-link")).unwrap();
    // Never followed: the view shows a symlink, not the directory.
    std::os::unix::fs::symlink("/etc", plain.join("docs/outside")).unwrap();
    std::fs::hard_link(plain.join("hello.txt"), plain.join("docs/hard")).unwrap();
    std::fs::set_permissions(
        plain.join("docs/deep/er/note"),
        std::fs::Permissions::from_mode(0o640),
    )
    .unwrap();
    // Times the restore must give back.
    let old = std::time::SystemTime::UNIX_EPOCH + std::time::Duration::from_secs(1_600_000_000);
    std::fs::File::options()
        .write(true)
        .open(plain.join("hello.txt"))
        .unwrap()
        .set_modified(old)
        .unwrap();
    plain
}

/// `init --reverse PLAIN --new-key-file KEY`.
fn init_reverse(plain: &Path, key: &Path) {
    ok(
        &run(args!["init", "--reverse", plain, "--new-key-file", key]),
        "init --reverse",
    );
}

/// Mounts the view of `plain` on `view` with the key file and `extra`
/// arguments; the guard unmounts it.
fn mount_reverse(plain: &Path, view: &Path, key: &Path, extra: &[&str]) -> MountGuard {
    let mut a: Vec<&OsStr> = args!["mount", "--reverse", plain, view, "--key-file", key].to_vec();
    a.extend(extra.iter().map(OsStr::new));
    let g = MountGuard::new(BIN, view);
    ok(&run(&a), "mount --reverse");
    assert!(is_mounted(view));
    g
}

/// Everything a byte-stable view must keep: per entry (sorted) its path,
/// inode number, type, mode, mtime, size and bytes (or symlink target).
fn snapshot(root: &Path) -> Vec<u8> {
    fn go(root: &Path, dir: &Path, out: &mut Vec<u8>) {
        let mut names: Vec<_> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        names.sort();
        for n in names {
            let p = dir.join(&n);
            let m = std::fs::symlink_metadata(&p).unwrap();
            let rel = p.strip_prefix(root).unwrap();
            out.extend_from_slice(
                format!(
                    "{} {} {:o} {} {} {}\n",
                    rel.display(),
                    // Stable inode numbers: restic and borg key their
                    // caches on them.
                    m.ino(),
                    m.mode(),
                    m.mtime(),
                    m.mtime_nsec(),
                    m.len()
                )
                .as_bytes(),
            );
            if m.file_type().is_symlink() {
                out.extend_from_slice(std::os::unix::ffi::OsStrExt::as_bytes(
                    std::fs::read_link(&p).unwrap().as_os_str(),
                ));
            } else if m.is_file() {
                out.extend_from_slice(&std::fs::read(&p).unwrap());
            } else if m.is_dir() {
                go(root, &p, out);
            }
        }
    }
    let mut out = Vec::new();
    go(root, root, &mut out);
    out
}

fn has_rsync() -> bool {
    command_exists("rsync", &["--version"])
}

/// `rsync -a --stats SRC/ DST/`: the number of regular files transferred.
fn rsync(src: &Path, dst: &Path) -> u64 {
    let out = test_support::run::output(
        Command::new("rsync")
            .arg("-a")
            .arg("--stats")
            .arg(format!("{}/", src.display()))
            .arg(format!("{}/", dst.display())),
        b"",
    );
    let s = ok(&out, "rsync");
    s.lines()
        .find_map(|l| l.strip_prefix("Number of regular files transferred: "))
        .and_then(|n| n.trim().replace(',', "").parse().ok())
        .unwrap_or_else(|| panic!("no transfer count in: {s}"))
}

#[test]
fn the_view_is_read_only() {
    if !can_mount("the_view_is_read_only") {
        return;
    }
    let t = TempDir::new("rev-ro");
    let plain = plain_tree(&t);
    let key = t.join("key");
    init_reverse(&plain, &key);
    let view = t.sub("view");
    let _g = mount_reverse(&plain, &view, &key, &[]);
    let erofs = |r: std::io::Result<()>, what: &str| {
        let e = r.expect_err(what);
        assert_eq!(e.raw_os_error(), Some(libc::EROFS), "{what}: {e}");
    };
    let file = std::fs::read_dir(&view)
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| std::fs::symlink_metadata(p).unwrap().len() > 4096 && p.is_file())
        .expect("a file in the view");
    erofs(
        std::fs::OpenOptions::new()
            .write(true)
            .open(&file)
            .map(drop),
        "open for writing",
    );
    erofs(std::fs::write(view.join("new"), b"x"), "create");
    erofs(std::fs::remove_file(&file), "unlink");
    erofs(std::fs::create_dir(view.join("d")), "mkdir");
    erofs(
        std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o600)),
        "chmod",
    );
    erofs(std::fs::rename(&file, view.join("x")), "rename");
    erofs(std::os::unix::fs::symlink("a", view.join("s")), "symlink");
    erofs(
        std::fs::remove_file(view.join("fscrypt.vault.json")),
        "unlink the config",
    );
    // The plaintext is untouched, and its names never show.
    assert_eq!(
        std::fs::read(plain.join("hello.txt")).unwrap(),
        b"hello, world\n"
    );
    let names: Vec<String> = std::fs::read_dir(&view)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert!(names.iter().any(|n| n == "fscrypt.vault.json"), "{names:?}");
    assert!(names.iter().any(|n| n == "fscrypt.dir"), "{names:?}");
    for plain_name in ["hello.txt", "docs", "link", "sparse", REVERSE_CONFIG] {
        assert!(!names.iter().any(|n| n == plain_name), "{plain_name} shown");
    }
}

#[test]
fn the_view_is_byte_stable_across_remounts_and_transports() {
    if !can_mount("the_view_is_byte_stable_across_remounts_and_transports") {
        return;
    }
    let t = TempDir::new("rev-stable");
    let plain = plain_tree(&t);
    let key = t.join("key");
    init_reverse(&plain, &key);
    let view = t.sub("view");
    let first = {
        let g = mount_reverse(&plain, &view, &key, &["-o", "noio_uring"]);
        let s = snapshot(&view);
        g.unmount();
        s
    };
    assert!(first.len() > 700_000);
    // Again, through FUSE over io_uring where the kernel offers it (else
    // the same mount falls back to /dev/fuse).
    let g = mount_reverse(&plain, &view, &key, &["-o", "io_uring"]);
    assert!(
        snapshot(&view) == first,
        "the view changed across a remount"
    );
    g.unmount();
    // A plaintext change shows in that file only.
    std::fs::write(plain.join("docs/deep/er/note"), b"DEEP").unwrap();
    let g = mount_reverse(&plain, &view, &key, &[]);
    let second = snapshot(&view);
    g.unmount();
    assert!(second != first);
}

#[test]
fn a_copy_of_the_view_is_a_vault_that_restores_the_plaintext() {
    let test = "a_copy_of_the_view_is_a_vault_that_restores_the_plaintext";
    if !can_mount(test) {
        return;
    }
    let t = TempDir::new("rev-restore");
    let plain = plain_tree(&t);
    rustix::fs::mknodat(
        rustix::fs::CWD,
        plain.join("fifo"),
        rustix::fs::FileType::Fifo,
        rustix::fs::Mode::from_raw_mode(0o644),
        0,
    )
    .unwrap();
    let key = t.join("key");
    init_reverse(&plain, &key);
    let view = t.sub("view");
    let g = mount_reverse(&plain, &view, &key, &[]);
    let backup = t.join("backup");
    let rsync_here = has_rsync();
    if rsync_here {
        std::fs::create_dir(&backup).unwrap();
        assert!(rsync(&view, &backup) > 5);
        // Nothing changed: nothing to copy.
        assert_eq!(rsync(&view, &backup), 0, "a second rsync copied files");
    } else {
        eprintln!(
            "*** {test}: rsync missing: copying with cp -a, the rsync checks are skipped ***"
        );
        ok(
            &test_support::run::output(Command::new("cp").arg("-a").arg(&view).arg(&backup), b""),
            "cp -a",
        );
    }

    // The copy is a clean vault.
    let state = t.sub("state");
    let fsck = test_support::run::output(
        Command::new(BIN)
            .args(args!["fsck", backup, "--key-file", key])
            .env("FSCRYPT_RS_STATE_DIR", &state),
        b"",
    );
    assert_eq!(
        fsck.status.code(),
        Some(0),
        "fsck of the copy: {}{}",
        text(&fsck.stdout),
        text(&fsck.stderr)
    );
    assert!(
        text(&fsck.stdout).contains("clean"),
        "{}",
        text(&fsck.stdout)
    );

    // Mounted forward, it is the plaintext.
    let fwd = t.sub("fwd");
    let fg = MountGuard::new(BIN, &fwd);
    ok(
        &test_support::run::output(
            Command::new(BIN)
                .args(args!["mount", backup, fwd, "--key-file", key, "-o", "ro"])
                .env("FSCRYPT_RS_STATE_DIR", &state),
            b"",
        ),
        "forward mount of the copy",
    );
    let diff = test_support::run::output(
        Command::new("diff")
            .args(["-r", "--no-dereference"])
            .arg(format!("--exclude={REVERSE_CONFIG}"))
            .arg("--exclude=fifo")
            .arg(&plain)
            .arg(&fwd),
        b"",
    );
    assert!(
        diff.status.success(),
        "diff -r: {}{}",
        text(&diff.stdout),
        text(&diff.stderr)
    );
    for rel in [
        "hello.txt",
        "docs/deep/er/note",
        "docs",
        "link",
        "sparse",
        "empty",
        "fifo",
    ] {
        let (a, b) = (
            std::fs::symlink_metadata(plain.join(rel)).unwrap(),
            std::fs::symlink_metadata(fwd.join(rel)).unwrap(),
        );
        assert_eq!(a.mode(), b.mode(), "{rel}: mode");
        // Regular files: rsync leaves a new symlink's or FIFO's time alone
        // when it matches the source's to the second (the view shows the
        // plaintext's; the byte-stability test checks that).
        if a.is_file() {
            assert_eq!(
                (a.mtime(), a.mtime_nsec()),
                (b.mtime(), b.mtime_nsec()),
                "{rel}: mtime"
            );
        }
    }
    assert_eq!(
        std::fs::read_link(fwd.join("docs/dangling")).unwrap(),
        Path::new("/nowhere/at/all")
    );
    assert_eq!(
        std::fs::read_link(fwd.join("docs/long-link"))
            .unwrap()
            .as_os_str()
            .len(),
        3504
    );
    // Hard links come back as separate files with the same bytes.
    assert_eq!(
        std::fs::read(fwd.join("docs/hard")).unwrap(),
        b"hello, world\n"
    );
    assert_eq!(std::fs::metadata(fwd.join("docs/hard")).unwrap().nlink(), 1);
    // The sparse file stays sparse in the copy (its zero units are holes).
    let sparse = std::fs::metadata(fwd.join("sparse")).unwrap();
    assert_eq!(sparse.len(), 8 << 20);
    if rsync_here {
        fg.unmount();
        // One plaintext file changes: rsync copies that one only.
        // (A second later, so that rsync's quick check sees another time.)
        std::thread::sleep(std::time::Duration::from_millis(1100));
        std::fs::write(plain.join("docs/deep/er/note"), b"more").unwrap();
        assert_eq!(rsync(&view, &backup), 1, "after one change");
        assert_eq!(rsync(&view, &backup), 0);
        ok(
            &test_support::run::output(
                Command::new(BIN)
                    .args(args!["mount", backup, fwd, "--key-file", key, "-o", "ro"])
                    .env("FSCRYPT_RS_STATE_DIR", &state),
                b"",
            ),
            "forward mount of the updated copy",
        );
        assert_eq!(
            std::fs::read(fwd.join("docs/deep/er/note")).unwrap(),
            b"more"
        );
        fg.unmount();
    }
    drop(g);
}

#[test]
fn excluded_entries_are_left_out_of_the_view() {
    if !can_mount("excluded_entries_are_left_out_of_the_view") {
        return;
    }
    let t = TempDir::new("rev-exclude");
    let plain = plain_tree(&t);
    std::fs::write(plain.join("scratch.tmp"), b"x").unwrap();
    std::fs::write(plain.join("docs/deep/also.tmp"), b"x").unwrap();
    std::fs::create_dir(plain.join("build")).unwrap();
    std::fs::write(plain.join("build/out"), b"x").unwrap();
    let key = t.join("key");
    init_reverse(&plain, &key);
    let list = t.join("excludes");
    std::fs::write(&list, "# comment\n\n/build/\n").unwrap();
    let view = t.sub("view");
    let count = |dir: &Path| std::fs::read_dir(dir).unwrap().count();
    let all = {
        let g = mount_reverse(&plain, &view, &key, &[]);
        let n = count(&view);
        g.unmount();
        n
    };
    let g = mount_reverse(
        &plain,
        &view,
        &key,
        &[
            "--exclude",
            "*.tmp",
            "--exclude-from",
            list.to_str().unwrap(),
        ],
    );
    assert_eq!(count(&view), all - 2, "scratch.tmp and build/ left out");
    // A copy, mounted forward, lacks exactly the excluded entries.
    let backup = t.join("backup");
    ok(
        &test_support::run::output(Command::new("cp").arg("-a").arg(&view).arg(&backup), b""),
        "cp -a",
    );
    drop(g);
    let fwd = t.sub("fwd");
    let state = t.sub("state");
    let _fg = MountGuard::new(BIN, &fwd);
    ok(
        &test_support::run::output(
            Command::new(BIN)
                .args(args!["mount", backup, fwd, "--key-file", key, "-o", "ro"])
                .env("FSCRYPT_RS_STATE_DIR", &state),
            b"",
        ),
        "forward mount",
    );
    assert!(!fwd.join("scratch.tmp").exists());
    assert!(!fwd.join("docs/deep/also.tmp").exists());
    assert!(!fwd.join("build").exists());
    assert_eq!(
        std::fs::read(fwd.join("docs/deep/er/note")).unwrap(),
        b"deep"
    );
}

#[test]
fn reverse_is_format_3_only() {
    let t = TempDir::new("rev-format");
    let plain = t.sub("plain");
    let key = t.join("key");
    let out = run(args![
        "init",
        "--reverse",
        "--no-integrity",
        plain,
        "--new-key-file",
        key
    ]);
    assert!(!out.status.success());
    let err = text(&out.stderr);
    assert_eq!(err.trim().lines().count(), 1, "not one line: {err}");
    assert!(err.contains("format 3"), "{err}");
    assert!(!plain.join(REVERSE_CONFIG).exists());
    // Twice is refused, once the config is there.
    init_reverse(&plain, &t.join("key2"));
    let out = run(args![
        "init",
        "--reverse",
        plain,
        "--new-key-file",
        t.join("key3")
    ]);
    assert!(!out.status.success(), "a second init --reverse succeeded");
    // A directory never prepared: one line saying what to run.
    let other = t.sub("other");
    let view = t.sub("v");
    let key2 = t.join("key2");
    let out = run(args!["mount", "--reverse", other, view, "--key-file", key2]);
    let err = text(&out.stderr);
    assert!(!out.status.success());
    assert_eq!(err.trim().lines().count(), 1, "{err}");
    assert!(err.contains("init --reverse"), "{err}");
    // Its config is the one in the plaintext directory, never another.
    let config = plain.join(REVERSE_CONFIG);
    let out = run(args![
        "mount",
        "--reverse",
        plain,
        view,
        "--key-file",
        key2,
        "--config",
        config
    ]);
    assert!(!out.status.success());
    assert!(text(&out.stderr).contains("leave out --config"));
    assert!(!is_mounted(&view));
}

#[test]
fn an_ordinary_user_mounts_a_view_and_allow_other_serves_a_backup_user() {
    let test = "an_ordinary_user_mounts_a_view_and_allow_other_serves_a_backup_user";
    if let Some(why) = test_support::skip::unprivileged_mount_unavailable() {
        eprintln!("\n*** SKIPPING {test}: {why} ***\n");
        return;
    }
    // As uid 65534: its plaintext, its init, its mount through fusermount3.
    let t = TempDir::new("rev-nobody");
    std::os::unix::fs::chown(t.path(), Some(NOBODY), Some(NOBODY)).unwrap();
    let (home, plain, view, key) = (
        t.join("home"),
        t.join("plain"),
        t.join("view"),
        t.join("key"),
    );
    // A copy of the binary uid 65534 can run (the build directory may be
    // 0700, as CI's is).
    let bin = t.join("fscrypt-rs");
    std::fs::copy(BIN, &bin).unwrap();
    std::fs::set_permissions(&bin, std::fs::Permissions::from_mode(0o755)).unwrap();
    let nobody = |a: &[&OsStr]| {
        let mut c = as_user(NOBODY, NOBODY, "env");
        c.arg(format!("HOME={}", home.display()))
            .arg("PATH=/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin")
            .arg(format!("FSCRYPT_RS_INSECURE_ARGON2_PARAMS={CHEAP_ARGON2}"))
            .arg(&bin)
            .args(a);
        test_support::run::output(&mut c, b"")
    };
    let mk = as_user(NOBODY, NOBODY, "mkdir")
        .args([&home, &plain, &view])
        .status()
        .unwrap();
    assert!(mk.success());
    let w = nobody_sh(&format!("echo secret-data > {}/f.txt", plain.display()))
        .status()
        .unwrap();
    assert!(w.success());
    ok(
        &nobody(args!["init", "--reverse", plain, "--new-key-file", key]),
        "init --reverse as 65534",
    );
    let _g = MountGuard::new(BIN, &view);
    ok(
        &nobody(args!["mount", "--reverse", plain, view, "--key-file", key]),
        "mount --reverse as 65534",
    );
    let info = std::fs::read_to_string("/proc/self/mountinfo").unwrap();
    let line = info
        .lines()
        .find(|l| l.split(' ').nth(4) == view.to_str())
        .expect("mounted");
    assert!(line.contains("user_id=65534"), "{line}");
    let out = nobody_sh(&format!("ls {} | wc -l", view.display()))
        .output()
        .unwrap();
    // fscrypt.dir, fscrypt.vault.json, fscrypt.clean, fscrypt.symlinks
    // and the file.
    assert_eq!(text(&out.stdout).trim(), "5", "{out:?}");
    let out = nobody_sh(&format!("cat {}/* | grep -c secret-data", view.display()))
        .output()
        .unwrap();
    assert_eq!(text(&out.stdout).trim(), "0", "plaintext in the view");
    ok(&nobody(args!["unmount", view]), "unmount as 65534");

    // Root's view with allow_other: uid 65534 (a backup daemon's user)
    // reads it, as the plaintext's modes allow.
    let t2 = TempDir::new("rev-allow");
    let plain2 = plain_tree(&t2);
    let key2 = t2.join("key");
    init_reverse(&plain2, &key2);
    std::fs::set_permissions(
        plain2.join(REVERSE_CONFIG),
        std::fs::Permissions::from_mode(0o644),
    )
    .unwrap();
    let view2 = t2.sub("view");
    let _g2 = mount_reverse(&plain2, &view2, &key2, &["-o", "allow_other"]);
    let out = nobody_sh(&format!(
        "cat {0}/fscrypt.vault.json >/dev/null && ls {0} | wc -l",
        view2.display()
    ))
    .output()
    .unwrap();
    assert!(out.status.success(), "{out:?}");
    assert!(
        text(&out.stdout).trim().parse::<u32>().unwrap() > 5,
        "{out:?}"
    );
}

/// The view of `plain` mounted in this process through the one FUSE
/// engine (`fscrypt_fuse::reverse::mount_background`), on `/dev/fuse` or
/// FUSE over io_uring; returns its snapshot and the requests it served.
fn view_through_engine(
    t: &TempDir,
    plain: &Path,
    key: &Path,
    io_uring: bool,
) -> (Vec<u8>, fscrypt_fuse::StatsSnapshot) {
    let config = plain.join(REVERSE_CONFIG);
    let vault = fscrypt_vault::Vault::open_with(plain, Some(&config)).unwrap();
    let master = vault
        .unlock_with_key_file(&std::fs::read(key).unwrap())
        .unwrap();
    let keys = fscrypt_vault::reverse::ReverseKeys::new(master, *vault.policy()).unwrap();
    let view = t.sub(if io_uring { "view-ring" } else { "view-dev" });
    let m = fscrypt_fuse::reverse::mount_background(
        keys,
        fscrypt_fuse::reverse::ReverseMountConfig {
            plain_dir: plain.to_path_buf(),
            allow_other: false,
            fs_name: "reverse-engine-test".into(),
            io_uring,
            excludes: fscrypt_vault::reverse::Excludes::default(),
            idle: None,
        },
        &view,
    )
    .unwrap();
    if io_uring {
        // Every CPU's queue registers after INIT: look names up until one
        // arrives through the ring.
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        let mut i = 0;
        while m.stats().through_ring() == 0 {
            assert!(
                std::time::Instant::now() < deadline,
                "no request came through io_uring in 10 s"
            );
            let _ = std::fs::symlink_metadata(view.join(format!("absent-{i}")));
            i += 1;
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
    }
    let before = m.stats();
    let snap = snapshot(&view);
    let served = m.stats().since(&before);
    m.unmount().unwrap();
    (snap, served)
}

/// Both transports serve the same view bytes through the engine. FUSE
/// over io_uring needs the kernel's switch on
/// (`/sys/module/fuse/parameters/enable_uring`, which this test never
/// writes: CI's second pass turns it on); that half is skipped loudly
/// otherwise.
#[test]
fn both_transports_serve_the_same_view() {
    let test = "both_transports_serve_the_same_view";
    if !test_support::skip::fuse_available(test) {
        return;
    }
    let t = TempDir::new("rev-engine");
    let plain = plain_tree(&t);
    let key = t.join("key");
    init_reverse(&plain, &key);
    let (dev, served) = view_through_engine(&t, &plain, &key, false);
    assert!(served.get(fscrypt_fuse::Op::Read) > 0, "{served}");
    assert_eq!(served.through_ring(), 0, "io_uring not asked for");
    match std::fs::read_to_string("/sys/module/fuse/parameters/enable_uring") {
        Ok(v) if matches!(v.trim(), "Y" | "1") => {}
        _ => {
            test_support::skip::skip(
                test,
                "FUSE over io_uring is off (/sys/module/fuse/parameters/enable_uring)",
            );
            return;
        }
    }
    let (ring, served) = view_through_engine(&t, &plain, &key, true);
    assert!(
        served.through_ring() >= served.get(fscrypt_fuse::Op::Read),
        "the READs came through the ring: {served}"
    );
    assert!(ring == dev, "the transports served different bytes");
}

/// `init --reverse` makes the protectors `init` makes: a passphrase (here
/// from `--passfile`) and a recovery key; each unlocks the view, a wrong
/// passphrase exits 12, and a copy of the view opens with either.
#[test]
fn every_protector_kind_unlocks_the_view() {
    if !can_mount("every_protector_kind_unlocks_the_view") {
        return;
    }
    let t = TempDir::new("rev-protectors");
    let plain = t.sub("plain");
    std::fs::write(plain.join("a.txt"), b"protected").unwrap();
    let passfile = t.join("pass");
    std::fs::write(&passfile, "correct horse\n").unwrap();
    let out = ok(
        &run(args!["init", "--reverse", plain, "--passfile", passfile]),
        "init --reverse with a passphrase",
    );
    let rk = out
        .lines()
        .map(str::trim)
        .find(|l| l.len() == 69 && l.split('-').count() == 14)
        .unwrap_or_else(|| panic!("no recovery key in {out}"))
        .to_owned();
    let view = t.sub("view");
    let count = |dir: &Path| std::fs::read_dir(dir).unwrap().count();
    {
        let _g = MountGuard::new(BIN, &view);
        ok(
            &run(args![
                "mount",
                "--reverse",
                plain,
                view,
                "--passfile",
                passfile
            ]),
            "mount --reverse --passfile",
        );
        assert_eq!(count(&view), 5);
    }
    {
        let _g = MountGuard::new(BIN, &view);
        let out = test_support::run::output(
            Command::new(BIN).args(args!["mount", "--reverse", plain, view, "--recovery-key"]),
            format!("{rk}\n").as_bytes(),
        );
        ok(&out, "mount --reverse --recovery-key");
        let backup = t.join("backup");
        ok(
            &test_support::run::output(Command::new("cp").arg("-a").arg(&view).arg(&backup), b""),
            "cp -a",
        );
        drop(_g);
        let fwd = t.sub("fwd");
        let _f = MountGuard::new(BIN, &fwd);
        ok(
            &test_support::run::output(
                Command::new(BIN)
                    .args(args![
                        "mount",
                        backup,
                        fwd,
                        "--passfile",
                        passfile,
                        "-o",
                        "ro"
                    ])
                    .env("FSCRYPT_RS_STATE_DIR", t.sub("state")),
                b"",
            ),
            "forward mount of the copy with the passphrase",
        );
        assert_eq!(std::fs::read(fwd.join("a.txt")).unwrap(), b"protected");
    }
    std::fs::write(&passfile, "wrong\n").unwrap();
    let out = run(args![
        "mount",
        "--reverse",
        plain,
        view,
        "--passfile",
        passfile
    ]);
    assert_eq!(out.status.code(), Some(12), "{}", text(&out.stderr));
    assert!(!is_mounted(&view));
}

/// `--idle` unmounts an unused view, as it does a vault.
#[test]
fn an_idle_view_unmounts_itself() {
    if !can_mount("an_idle_view_unmounts_itself") {
        return;
    }
    let t = TempDir::new("rev-idle");
    let plain = t.sub("plain");
    std::fs::write(plain.join("a"), b"a").unwrap();
    let key = t.join("key");
    init_reverse(&plain, &key);
    let view = t.sub("view");
    let _g = mount_reverse(&plain, &view, &key, &["--idle", "1s"]);
    assert_eq!(std::fs::read_dir(&view).unwrap().count(), 5);
    test_support::procs::wait_for(
        "the idle view to unmount",
        std::time::Duration::from_secs(15),
        || !is_mounted(&view),
    );
}
