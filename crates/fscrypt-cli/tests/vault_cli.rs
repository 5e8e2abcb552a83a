//! Integration tests of `fscrypt-rs init/mount/unmount/demo` and
//! `mount.fscrypt-rs`, spawning the real binaries.
//!
//! Tests that mount need root and /dev/fuse; without them they print a loud
//! reason to stderr and return. Every mount is undone by a guard's Drop.
//! Argon2id runs with cheap test parameters (FSCRYPT_RS_INSECURE_ARGON2_PARAMS).

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use test_support::skip::can_mount;
use test_support::tree::grep_tree;
use test_support::{MountGuard, TempDir, is_mounted, os_args as args, text};

const BIN: &str = env!("CARGO_BIN_EXE_fscrypt-rs");
const EXIT_WRONG_SECRET: i32 = 12;

fn run(args: &[&std::ffi::OsStr], stdin: &[u8]) -> Output {
    test_support::cli::run(Path::new(BIN), args, stdin)
}

/// The mount(8) helper: a symlink named `mount.fscrypt-rs` to the binary.
fn helper(t: &TempDir) -> PathBuf {
    let dir = t.sub("sbin");
    let link = dir.join("mount.fscrypt-rs");
    if !link.exists() {
        std::os::unix::fs::symlink(BIN, &link).unwrap();
    }
    link
}

fn config_of(dir: &Path) -> PathBuf {
    dir.join("fscrypt.vault.json")
}

/// Makes a vault protected by a new key file; returns the key file path.
fn init_with_key(t: &TempDir, cipher: &Path) -> PathBuf {
    let key = t.path().join("vault.key");
    let out = run(args!["init", cipher, "--new-key-file", key], b"");
    assert!(out.status.success(), "init failed: {}", text(&out.stderr));
    key
}

#[test]
fn init_with_key_file_writes_0600_config_and_prints_identifier() {
    let t = TempDir::new("init-key");
    let cipher = t.sub("cipher");
    let key = init_with_key(&t, &cipher);
    let meta = std::fs::metadata(config_of(&cipher)).unwrap();
    assert_eq!(meta.permissions().mode() & 0o777, 0o600);
    let key_meta = std::fs::metadata(&key).unwrap();
    assert_eq!(key_meta.permissions().mode() & 0o777, 0o600);
    assert_eq!(key_meta.len(), 64);
    let config = std::fs::read_to_string(config_of(&cipher)).unwrap();
    assert!(config.contains("\"kind\": \"key_file\""), "{config}");
    assert!(!config.contains("\"kind\": \"passphrase\""), "{config}");
    // The identifier printed is the one stored in the policy.
    let json: serde_json::Value = serde_json::from_str(&config).unwrap();
    let id = json["policy"]["master_key_identifier"]
        .as_str()
        .unwrap()
        .to_owned();
    assert_eq!(id.len(), 32);
    let out = run(args!["init", t.sub("other"), "--key-file", key], b"");
    assert!(out.status.success(), "{}", text(&out.stderr));
    let other: serde_json::Value =
        serde_json::from_slice(&std::fs::read(config_of(&t.path().join("other"))).unwrap())
            .unwrap();
    // Same key file, another vault: a different random master key.
    assert_ne!(
        other["policy"]["master_key_identifier"].as_str().unwrap(),
        id
    );
    let stdout = text(&run(args!["init", t.sub("third"), "--key-file", key], b"").stdout);
    let third: serde_json::Value =
        serde_json::from_slice(&std::fs::read(config_of(&t.path().join("third"))).unwrap())
            .unwrap();
    assert!(
        stdout.contains(third["policy"]["master_key_identifier"].as_str().unwrap()),
        "{stdout}"
    );
    // Defaults: AES-256-XTS (1), AES-256-CTS (4), padding 32 (flags 3).
    assert_eq!(json["policy"]["contents_encryption_mode"], 1);
    assert_eq!(json["policy"]["filenames_encryption_mode"], 4);
    assert_eq!(json["policy"]["flags"], 3);
}

#[test]
fn init_with_passphrase_from_stdin() {
    let t = TempDir::new("init-pass");
    let cipher = t.sub("cipher");
    let out = run(
        args!["init", cipher, "--no-recovery-key"],
        b"hunter2 but longer\n",
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
    let json: serde_json::Value =
        serde_json::from_slice(&std::fs::read(config_of(&cipher)).unwrap()).unwrap();
    let p = &json["protectors"][0];
    assert_eq!(p["kind"], "passphrase");
    assert_eq!(p["kdf"], "argon2id");
    assert_eq!(p["m_cost_kib"], 64);
    assert_eq!(json["protectors"].as_array().unwrap().len(), 1);
    // An empty passphrase is refused and leaves the directory empty.
    let empty = t.sub("empty");
    let out = run(args!["init", empty], b"\n");
    assert!(!out.status.success());
    assert_eq!(std::fs::read_dir(&empty).unwrap().count(), 0);
}

#[test]
fn init_never_overwrites() {
    let t = TempDir::new("init-twice");
    let cipher = t.sub("cipher");
    init_with_key(&t, &cipher);
    let before = std::fs::read(config_of(&cipher)).unwrap();
    let out = run(
        args![
            "init",
            cipher,
            "--new-key-file",
            t.path().join("second.key")
        ],
        b"",
    );
    assert!(!out.status.success());
    assert!(
        text(&out.stderr).contains("already a vault"),
        "{}",
        text(&out.stderr)
    );
    assert_eq!(std::fs::read(config_of(&cipher)).unwrap(), before);
    assert!(
        !t.path().join("second.key").exists(),
        "no key file for a refused init"
    );
    // A non-empty directory is refused too.
    let full = t.sub("full");
    std::fs::write(full.join("x"), b"x").unwrap();
    let out = run(
        args!["init", full, "--new-key-file", t.path().join("third.key")],
        b"",
    );
    assert!(!out.status.success());
    assert!(
        text(&out.stderr).contains("not empty"),
        "{}",
        text(&out.stderr)
    );
}

#[test]
fn init_refuses_inode_number_flags_and_bad_policies() {
    let t = TempDir::new("init-flags");
    for flag in ["--iv-ino-lblk-64", "--iv-ino-lblk-32"] {
        let cipher = t.sub(flag);
        let out = run(
            args!["init", cipher, flag, "--new-key-file", cipher.join("k")],
            b"",
        );
        assert!(!out.status.success());
        let err = text(&out.stderr);
        assert!(err.contains("inode numbers"), "{err}");
        assert_eq!(err.trim().lines().count(), 1, "one-line reason: {err}");
        assert_eq!(std::fs::read_dir(&cipher).unwrap().count(), 0);
    }
    // DIRECT_KEY needs Adiantum.
    let cipher = t.sub("direct");
    let out = run(
        args![
            "init",
            cipher,
            "--direct-key",
            "--new-key-file",
            t.path().join("k1")
        ],
        b"",
    );
    assert!(!out.status.success());
    // Adiantum with DIRECT_KEY is fine.
    let out = run(
        args![
            "init",
            cipher,
            "--contents",
            "adiantum",
            "--filenames",
            "adiantum",
            "--direct-key",
            "--new-key-file",
            t.path().join("k2")
        ],
        b"",
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
    let json: serde_json::Value =
        serde_json::from_slice(&std::fs::read(config_of(&cipher)).unwrap()).unwrap();
    assert_eq!(json["policy"]["contents_encryption_mode"], 9);
    assert_eq!(json["policy"]["flags"], 3 | 4);
    // Bad padding, bad data unit sizes, mismatched modes.
    for bad in [
        &["--padding", "12"][..],
        &["--data-unit-size", "8192"],
        &["--data-unit-size", "256"],
        &["--data-unit-size", "1000"],
        &["--contents", "sm4-xts"],
    ] {
        let dir = t.sub(format!("bad{}", bad.join("")));
        let mut owned: Vec<std::ffi::OsString> = vec!["init".into(), dir.clone().into()];
        owned.extend(bad.iter().map(|s| s.into()));
        owned.push("--new-key-file".into());
        owned.push(dir.join("k").into());
        let a: Vec<&std::ffi::OsStr> = owned.iter().map(|s| s.as_os_str()).collect();
        let out = run(&a, b"");
        assert!(!out.status.success(), "{bad:?} accepted");
    }
}

#[test]
fn wrong_passphrase_or_key_exits_12_without_retrying() {
    let t = TempDir::new("wrong");
    let cipher = t.sub("cipher");
    let mnt = t.sub("mnt");
    let out = run(args!["init", cipher], b"right passphrase\n");
    assert!(out.status.success(), "{}", text(&out.stderr));
    // Several lines on stdin: only the first is read, once.
    let out = run(
        args!["mount", cipher, mnt],
        b"wrong passphrase\nright passphrase\n",
    );
    assert_eq!(
        out.status.code(),
        Some(EXIT_WRONG_SECRET),
        "{}",
        text(&out.stderr)
    );
    assert!(
        text(&out.stderr).contains("wrong passphrase"),
        "{}",
        text(&out.stderr)
    );
    assert_eq!(text(&out.stderr).matches("wrong passphrase").count(), 1);
    // A key file on a passphrase-only vault is a different error.
    let key = t.path().join("k");
    std::fs::write(&key, [7u8; 32]).unwrap();
    std::fs::set_permissions(&key, std::fs::Permissions::from_mode(0o600)).unwrap();
    let out = run(args!["mount", cipher, mnt, "--key-file", key], b"");
    assert!(!out.status.success());
    assert_ne!(out.status.code(), Some(EXIT_WRONG_SECRET));

    let cipher2 = t.sub("cipher2");
    init_with_key(&t, &cipher2);
    let wrong = t.path().join("wrong.key");
    std::fs::write(&wrong, [1u8; 64]).unwrap();
    std::fs::set_permissions(&wrong, std::fs::Permissions::from_mode(0o600)).unwrap();
    let out = run(args!["mount", cipher2, mnt, "--key-file", wrong], b"");
    assert_eq!(
        out.status.code(),
        Some(EXIT_WRONG_SECRET),
        "{}",
        text(&out.stderr)
    );
    assert!(
        text(&out.stderr).contains("wrong key file"),
        "{}",
        text(&out.stderr)
    );
    // No passphrase protector: refused before any prompt.
    let out = run(args!["mount", cipher2, mnt], b"some passphrase\n");
    assert!(!out.status.success());
    assert_ne!(out.status.code(), Some(EXIT_WRONG_SECRET));
    assert!(
        text(&out.stderr).contains("no passphrase protector"),
        "{}",
        text(&out.stderr)
    );
    // The mount helper passes the code on.
    let out = test_support::cli::run(
        &helper(&t),
        args![cipher2, mnt, "-o", format!("keyfile={}", wrong.display())],
        b"",
    );
    assert_eq!(
        out.status.code(),
        Some(EXIT_WRONG_SECRET),
        "{}",
        text(&out.stderr)
    );
    // A key file of the wrong size is refused before any unwrapping.
    std::fs::write(&wrong, [1u8; 48]).unwrap();
    let out = run(args!["mount", cipher2, mnt, "--key-file", wrong], b"");
    assert!(!out.status.success());
    assert_ne!(out.status.code(), Some(EXIT_WRONG_SECRET));
    assert!(
        text(&out.stderr).contains("32 or 64"),
        "{}",
        text(&out.stderr)
    );
}

// ---------------------------------------------------------------- mounting

fn unmount(mnt: &Path) {
    test_support::mount::unmount_with(Path::new(BIN), mnt);
}

#[test]
fn mount_unmount_round_trip_with_key_file_and_passphrase() {
    if !can_mount("mount_unmount_round_trip_with_key_file_and_passphrase") {
        return;
    }
    let t = TempDir::new("mount");
    let cipher = t.sub("cipher");
    let mnt = t.sub("mnt");
    let key = t.path().join("vault.key");
    let out = run(
        args!["init", cipher, "--new-key-file", key, "--passphrase"],
        b"open sesame\n",
    );
    assert!(out.status.success(), "{}", text(&out.stderr));

    // Background mount with the key file: returns once mounted.
    let out = run(args!["mount", cipher, mnt, "--key-file", key], b"");
    assert!(out.status.success(), "mount: {}", text(&out.stderr));
    let guard = MountGuard::new(BIN, &mnt);
    assert!(is_mounted(&mnt));
    std::fs::create_dir(mnt.join("SECRETDIRNAME")).unwrap();
    std::fs::write(
        mnt.join("SECRETDIRNAME/notes.txt"),
        b"MARKER-CONTENTS-0123456789",
    )
    .unwrap();
    std::os::unix::fs::symlink("SECRETDIRNAME/notes.txt", mnt.join("link")).unwrap();
    assert_eq!(
        std::fs::read(mnt.join("link")).unwrap(),
        b"MARKER-CONTENTS-0123456789"
    );
    unmount(&mnt);
    assert!(grep_tree(&cipher, b"MARKER-CONTENTS").is_empty());
    assert!(grep_tree(&cipher, b"SECRETDIRNAME").is_empty());

    // Again with the passphrase from stdin.
    let out = run(args!["mount", cipher, mnt], b"open sesame\n");
    assert!(out.status.success(), "mount: {}", text(&out.stderr));
    assert_eq!(
        std::fs::read(mnt.join("SECRETDIRNAME/notes.txt")).unwrap(),
        b"MARKER-CONTENTS-0123456789"
    );
    unmount(&mnt);

    // Through the mount(8) helper, read-only, key file as an option.
    let out = test_support::cli::run(
        &helper(&t),
        args![
            cipher,
            mnt,
            "-o",
            format!("ro,keyfile={},nofail", key.display())
        ],
        b"",
    );
    assert!(
        out.status.success(),
        "mount.fscrypt-rs: {}",
        text(&out.stderr)
    );
    assert_eq!(
        std::fs::read_link(mnt.join("link")).unwrap(),
        Path::new("SECRETDIRNAME/notes.txt")
    );
    assert!(
        std::fs::write(mnt.join("new"), b"x").is_err(),
        "read-only mount accepted a write"
    );
    unmount(&mnt);
    drop(guard);
}

#[test]
fn locked_mount_shows_no_key_names_and_refuses_contents() {
    if !can_mount("locked_mount_shows_no_key_names_and_refuses_contents") {
        return;
    }
    let t = TempDir::new("locked");
    let cipher = t.sub("cipher");
    let mnt = t.sub("mnt");
    let key = init_with_key(&t, &cipher);
    let out = run(args!["mount", cipher, mnt, "--key-file", key], b"");
    assert!(out.status.success(), "mount: {}", text(&out.stderr));
    let guard = MountGuard::new(BIN, &mnt);
    for name in ["alpha.txt", "beta.txt", "gamma"] {
        std::fs::write(mnt.join(name), name.as_bytes()).unwrap();
    }
    unmount(&mnt);

    let out = run(args!["mount", cipher, mnt, "--locked"], b"");
    assert!(
        out.status.success(),
        "mount --locked: {}",
        text(&out.stderr)
    );
    let names: Vec<String> = std::fs::read_dir(&mnt)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    assert_eq!(names.len(), 3, "{names:?}");
    for n in &names {
        assert!(
            !["alpha.txt", "beta.txt", "gamma"].contains(&n.as_str()),
            "{n}"
        );
        let err = std::fs::read(mnt.join(n)).unwrap_err();
        assert_eq!(
            err.raw_os_error(),
            Some(126),
            "ENOKEY expected for {n}: {err}"
        );
    }
    assert!(std::fs::write(mnt.join("new"), b"x").is_err());
    unmount(&mnt);
    drop(guard);
}

#[test]
fn demo_runs_end_to_end_and_cleans_up() {
    if !can_mount("demo_runs_end_to_end_and_cleans_up") {
        return;
    }
    let t = TempDir::new("demo");
    let src = t.sub("src");
    std::fs::create_dir_all(src.join("a/b")).unwrap();
    std::fs::write(
        src.join("readme.txt"),
        b"the demo source tree, first file\n".repeat(100),
    )
    .unwrap();
    std::fs::write(
        src.join("a/one.bin"),
        (0..10_000u32).map(|i| i as u8).collect::<Vec<_>>(),
    )
    .unwrap();
    std::fs::write(src.join("a/b/empty"), b"").unwrap();
    std::fs::write(src.join(format!("a/{}", "n".repeat(200))), b"long name").unwrap();
    std::os::unix::fs::symlink("a/one.bin", src.join("link")).unwrap();
    let tmp = t.sub("tmp");
    let out = run(args!["demo", "--source", src, "--tmp", tmp], b"");
    let stdout = text(&out.stdout);
    assert!(
        out.status.success(),
        "demo failed:\n{stdout}\n{}",
        text(&out.stderr)
    );
    assert!(stdout.contains("4 files identical"), "{stdout}");
    assert!(stdout.contains("all steps passed"), "{stdout}");
    assert_eq!(
        std::fs::read_dir(&tmp).unwrap().count(),
        0,
        "demo left files behind"
    );
}

#[test]
fn foreground_mount_serves_until_sigterm() {
    if !can_mount("foreground_mount_serves_until_sigterm") {
        return;
    }
    let t = TempDir::new("fg");
    let cipher = t.sub("cipher");
    let mnt = t.sub("mnt");
    let key = init_with_key(&t, &cipher);
    let mut child = Command::new(BIN)
        .arg("mount")
        .arg(&cipher)
        .arg(&mnt)
        .arg("--key-file")
        .arg(&key)
        .arg("--foreground")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let guard = MountGuard::new(BIN, &mnt);
    let start = Instant::now();
    while !is_mounted(&mnt) {
        assert!(
            child.try_wait().unwrap().is_none(),
            "foreground mount exited early"
        );
        assert!(
            start.elapsed() < Duration::from_secs(30),
            "mount did not appear"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    std::fs::write(mnt.join("f"), b"served in the foreground").unwrap();
    assert!(
        child.try_wait().unwrap().is_none(),
        "--foreground must not detach"
    );
    let killed = Command::new("kill")
        .arg("-TERM")
        .arg(child.id().to_string())
        .status()
        .unwrap();
    assert!(killed.success());
    let start = Instant::now();
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        assert!(
            start.elapsed() < Duration::from_secs(30),
            "no exit after SIGTERM"
        );
        std::thread::sleep(Duration::from_millis(10));
    };
    assert!(status.success(), "{status}");
    assert!(!is_mounted(&mnt));
    drop(guard);
    // The data is in the vault.
    let out = run(args!["mount", cipher, mnt, "--key-file", key], b"");
    assert!(out.status.success(), "{}", text(&out.stderr));
    let guard = MountGuard::new(BIN, &mnt);
    assert_eq!(
        std::fs::read(mnt.join("f")).unwrap(),
        b"served in the foreground"
    );
    unmount(&mnt);
    drop(guard);
}

#[test]
fn every_policy_option_mounts_and_round_trips() {
    if !can_mount("every_policy_option_mounts_and_round_trips") {
        return;
    }
    let t = TempDir::new("policies");
    let cases: &[&[&str]] = &[
        &[
            "--contents",
            "adiantum",
            "--filenames",
            "adiantum",
            "--direct-key",
        ],
        &["--contents", "adiantum", "--filenames", "adiantum"],
        &["--filenames", "aes-256-hctr2", "--padding", "16"],
        &[
            "--contents",
            "aes-128-cbc-essiv",
            "--filenames",
            "aes-128-cts",
            "--padding",
            "4",
        ],
        &[
            "--contents",
            "sm4-xts",
            "--filenames",
            "sm4-cts",
            "--padding",
            "8",
        ],
        &["--data-unit-size", "512"],
        &["--data-unit-size", "1024", "--padding", "32"],
    ];
    for (i, opts) in cases.iter().enumerate() {
        let cipher = t.sub(format!("c{i}"));
        let mnt = t.sub(format!("m{i}"));
        let key = t.path().join(format!("k{i}"));
        let mut owned: Vec<std::ffi::OsString> = vec!["init".into(), cipher.clone().into()];
        owned.extend(opts.iter().map(|s| s.into()));
        owned.push("--new-key-file".into());
        owned.push(key.clone().into());
        let a: Vec<&std::ffi::OsStr> = owned.iter().map(|s| s.as_os_str()).collect();
        let out = run(&a, b"");
        assert!(out.status.success(), "{opts:?}: {}", text(&out.stderr));

        let out = run(args!["mount", cipher, mnt, "--key-file", key], b"");
        assert!(
            out.status.success(),
            "{opts:?}: mount: {}",
            text(&out.stderr)
        );
        let guard = MountGuard::new(BIN, &mnt);
        let data: Vec<u8> = (0..5000u32).map(|x| (x * 31 % 251) as u8).collect();
        std::fs::create_dir(mnt.join("a directory")).unwrap();
        std::fs::write(mnt.join("a directory/file.bin"), &data).unwrap();
        unmount(&mnt);
        let out = run(args!["mount", cipher, mnt, "--key-file", key], b"");
        assert!(
            out.status.success(),
            "{opts:?}: remount: {}",
            text(&out.stderr)
        );
        assert_eq!(
            std::fs::read(mnt.join("a directory/file.bin")).unwrap(),
            data,
            "{opts:?}"
        );
        unmount(&mnt);
        drop(guard);
    }
}
