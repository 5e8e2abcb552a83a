//! Issue 11, items 2, 6 and 7, through the real binary: the passphrase
//! cost (`init --kdf-time`, `--argon2-memory`, `--argon2-passes`; costs
//! bounded in time; "deriving the key (about N s)..."), the config opened
//! only as a regular file, passphrases from `--passfile`/`--extpass` and
//! the `passfile=`/`extpass=` mount options (also through mount(8) in a
//! private mount namespace), and `fscrypt-rs info`.
//!
//! Tests that mount need root and /dev/fuse; without them they print a loud
//! reason to stderr and return. Every mount is undone by a guard's Drop.

use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use test_support::cli::CHEAP_ARGON2;
use test_support::{MountGuard, TempDir, is_mounted, text};

const BIN: &str = env!("CARGO_BIN_EXE_fscrypt-rs");
const ARGON2_ENV: &str = "FSCRYPT_RS_INSECURE_ARGON2_PARAMS";
const EXIT_WRONG_SECRET: i32 = 12;
const PASSPHRASE: &str = "correct horse battery staple";

/// A file `name` in `t` holding `contents`, mode 0600.
fn secret_file(t: &TempDir, name: &str, contents: &[u8]) -> PathBuf {
    let p = t.join(name);
    std::fs::write(&p, contents).unwrap();
    std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o600)).unwrap();
    p
}

/// A command line: each argument anything that is `AsRef<OsStr>`.
macro_rules! args {
    ($($a:expr),* $(,)?) => { Vec::from([$(std::ffi::OsStr::new(&$a).to_owned()),*]) };
}

type Argv = Vec<std::ffi::OsString>;

/// Runs `bin` with `stdin` as its standard input (a pipe), the cheap test
/// Argon2id costs unless `cheap` is false, killing it after `limit`.
fn run_full(
    bin: &Path,
    args: &[std::ffi::OsString],
    stdin: &[u8],
    cheap: bool,
    limit: Duration,
) -> Output {
    let mut cmd = Command::new(bin);
    cmd.args(args);
    if cheap {
        cmd.env(ARGON2_ENV, CHEAP_ARGON2);
    } else {
        cmd.env_remove(ARGON2_ENV);
    }
    test_support::run::output_within(&mut cmd, stdin, limit)
}

fn run(args: &[std::ffi::OsString], stdin: &[u8]) -> Output {
    run_full(Path::new(BIN), args, stdin, true, Duration::from_secs(60))
}

/// Like [`run`], with the vault's real Argon2id costs.
fn run_real_cost(args: &[std::ffi::OsString], stdin: &[u8]) -> Output {
    run_full(Path::new(BIN), args, stdin, false, Duration::from_secs(60))
}

fn config_of(dir: &Path) -> PathBuf {
    dir.join("fscrypt.vault.json")
}

fn config_json(dir: &Path) -> serde_json::Value {
    serde_json::from_slice(&std::fs::read(config_of(dir)).unwrap()).unwrap()
}

fn assert_ok(out: &Output, what: &str) {
    assert!(
        out.status.success(),
        "{what}: {}{}",
        text(&out.stdout),
        text(&out.stderr)
    );
}

// ------------------------------------------------------- passphrase cost

#[test]
fn cost_options_set_the_stored_cost() {
    let t = TempDir::new("options");
    let pass = secret_file(&t, "pass", format!("{PASSPHRASE}\n").as_bytes());
    // Explicit memory and passes: stored exactly, no calibration.
    let a = t.sub("a");
    let out = run_real_cost(
        &args![
            "init",
            a,
            "--passfile",
            pass,
            "--argon2-memory",
            "8",
            "--argon2-passes",
            "3"
        ],
        b"",
    );
    assert_ok(&out, "init --argon2-memory 8 --argon2-passes 3");
    assert!(
        !text(&out.stderr).contains("measuring"),
        "{}",
        text(&out.stderr)
    );
    let p = &config_json(&a)["protectors"][0];
    assert_eq!(
        (&p["m_cost_kib"], &p["t_cost"], &p["p_cost"]),
        (&8192.into(), &3.into(), &1.into())
    );
    assert!(
        text(&out.stdout).contains("Argon2id m=8192 KiB t=3 p=1"),
        "{}",
        text(&out.stdout)
    );
    // Memory alone with a short --kdf-time: the passes are calibrated.
    let b = t.sub("b");
    let out = run_real_cost(
        &args![
            "init",
            b,
            "--passfile",
            pass,
            "--argon2-memory",
            "8",
            "--kdf-time",
            "0.1"
        ],
        b"",
    );
    assert_ok(&out, "init --argon2-memory 8 --kdf-time 0.1");
    assert!(
        text(&out.stderr).contains("measuring Argon2id on this machine (aiming at 0.10 s"),
        "{}",
        text(&out.stderr)
    );
    let p = &config_json(&b)["protectors"][0];
    assert_eq!(p["m_cost_kib"], 8192);
    assert!(p["t_cost"].as_u64().unwrap() >= 1);
    // The stored cost unlocks (info shows it; a wrong passphrase is 12).
    let out = run_real_cost(&args!["info", b], b"");
    assert_ok(&out, "info");
    assert!(
        text(&out.stdout).contains("m=8192 KiB"),
        "{}",
        text(&out.stdout)
    );

    // Refused before anything is made: out-of-range values, a cost over
    // the bound, passes without memory.
    for (bad, needle) in [
        (vec!["--kdf-time", "0"], "--kdf-time 0 is out of range"),
        (vec!["--kdf-time", "600"], "--kdf-time 600 is out of range"),
        (
            vec!["--argon2-memory", "0"],
            "--argon2-memory 0 is out of range",
        ),
        (
            vec!["--argon2-memory", "4096", "--argon2-passes", "9"],
            "m*t must be at most 32 GiB",
        ),
        (vec!["--argon2-passes", "3"], "--argon2-memory"),
        (
            vec![
                "--kdf-time",
                "1",
                "--argon2-memory",
                "8",
                "--argon2-passes",
                "3",
            ],
            "cannot be used with",
        ),
    ] {
        let c = t.sub("refused");
        let mut argv: Argv = args!["init", c, "--passfile", pass];
        argv.extend(bad.iter().map(std::ffi::OsString::from));
        let out = run_real_cost(&argv, b"");
        assert!(!out.status.success(), "{bad:?} accepted");
        assert!(
            text(&out.stderr).contains(needle),
            "{bad:?}: {}",
            text(&out.stderr)
        );
        assert_eq!(std::fs::read_dir(&c).unwrap().count(), 0, "{bad:?}");
    }
}

#[test]
fn slow_derivations_are_announced_at_init_and_mount() {
    let t = TempDir::new("announce");
    let pass = secret_file(&t, "pass", PASSPHRASE.as_bytes());
    let wrong = secret_file(&t, "wrong", b"not it");
    let cipher = t.sub("cipher");
    let mnt = t.sub("mnt");
    // 256 MiB x 6 passes: about 0.7 to 3 s on the machines this runs on.
    let start = Instant::now();
    let out = run_real_cost(
        &args![
            "init",
            cipher,
            "--passfile",
            pass,
            "--argon2-memory",
            "256",
            "--argon2-passes",
            "6"
        ],
        b"",
    );
    let init_time = start.elapsed();
    assert_ok(&out, "init");
    let announced = text(&out.stderr).contains("deriving the key (about ");
    eprintln!("init took {init_time:?}, announced: {announced}");
    // The estimate may be off, but not by a factor of two.
    if init_time > Duration::from_secs(3) {
        assert!(announced, "{init_time:?}: {}", text(&out.stderr));
    }
    // A wrong passphrase at mount (no FUSE needed: it fails before
    // mounting) and at passwd: the same cost, announced the same way, then
    // exit 12.
    let wrong_and_announced = |argv: &[std::ffi::OsString], stdin: &[u8]| {
        let start = Instant::now();
        let out = run_real_cost(argv, stdin);
        let took = start.elapsed();
        assert_eq!(
            out.status.code(),
            Some(EXIT_WRONG_SECRET),
            "{}",
            text(&out.stderr)
        );
        if took > Duration::from_secs(3) {
            assert!(
                text(&out.stderr).contains("deriving the key (about "),
                "{took:?}: {}",
                text(&out.stderr)
            );
        }
    };
    wrong_and_announced(&args!["mount", cipher, mnt, "--passfile", wrong], b"");
    wrong_and_announced(&args!["passwd", cipher], b"not it\n");
    // Cheap costs are never announced.
    let cheap = t.sub("cheap");
    let out = run(&args!["init", cheap, "--passfile", pass], b"");
    assert_ok(&out, "cheap init");
    assert!(
        !text(&out.stderr).contains("deriving"),
        "{}",
        text(&out.stderr)
    );
}

/// A vault with both protectors (cheap Argon2id); returns the key file.
fn vault_with_both(t: &TempDir, cipher: &Path) -> PathBuf {
    let pass = secret_file(t, "both.pass", PASSPHRASE.as_bytes());
    let name = cipher.file_name().unwrap().to_str().unwrap();
    let key = t.path().join(format!("{name}.key"));
    let out = run(
        &args!["init", cipher, "--new-key-file", key, "--passfile", pass],
        b"",
    );
    assert_ok(&out, "init with both protectors");
    key
}

#[test]
fn oversized_costs_in_a_config_are_refused_at_once_with_a_message() {
    let t = TempDir::new("oversized");
    let cipher = t.sub("cipher");
    let mnt = t.sub("mnt");
    let key = vault_with_both(&t, &cipher);
    let good = std::fs::read_to_string(config_of(&cipher)).unwrap();
    assert!(good.contains("\"m_cost_kib\": 64,"), "{good}");
    // 256 MiB x 1000 passes: over 3 minutes per try; accepted before.
    let hostile = good
        .replace("\"m_cost_kib\": 64,", "\"m_cost_kib\": 262144,")
        .replace("\"t_cost\": 1,", "\"t_cost\": 1000,");
    std::fs::write(config_of(&cipher), hostile).unwrap();
    for argv in [
        args![
            "mount",
            cipher,
            mnt,
            "--passfile",
            t.path().join("both.pass")
        ],
        args!["mount", cipher, mnt, "--key-file", key],
        args!["info", cipher],
    ] {
        let start = Instant::now();
        let out = run_full(Path::new(BIN), &argv, b"", false, Duration::from_secs(30));
        assert!(!out.status.success(), "{argv:?} accepted a hostile cost");
        assert_ne!(out.status.code(), Some(EXIT_WRONG_SECRET));
        let err = text(&out.stderr);
        assert!(
            err.contains("m*t must be at most 32 GiB"),
            "{argv:?}: {err}"
        );
        assert!(err.contains("restore it from a backup"), "{err}");
        assert!(start.elapsed() < Duration::from_secs(10), "{argv:?}");
    }
}

#[test]
fn a_fifo_config_is_refused_at_once() {
    let t = TempDir::new("fifo");
    let cipher = t.sub("cipher");
    let mnt = t.sub("mnt");
    let key = vault_with_both(&t, &cipher);
    std::fs::remove_file(config_of(&cipher)).unwrap();
    let status = Command::new("mkfifo")
        .arg(config_of(&cipher))
        .status()
        .unwrap();
    assert!(status.success());
    // Before: open(2) of a FIFO without a writer waits forever.
    for argv in [
        args!["mount", cipher, mnt, "--key-file", key],
        args!["info", cipher],
    ] {
        let start = Instant::now();
        let out = run_full(Path::new(BIN), &argv, b"", true, Duration::from_secs(20));
        assert!(!out.status.success());
        let err = text(&out.stderr);
        assert!(
            err.contains("the config is a FIFO, not a regular file"),
            "{err}"
        );
        assert_eq!(err.matches("FIFO").count(), 1, "said once: {err}");
        assert!(start.elapsed() < Duration::from_secs(10));
    }
    // A symlink in its place is refused too (O_NOFOLLOW).
    std::fs::remove_file(config_of(&cipher)).unwrap();
    let elsewhere = t.sub("other");
    vault_with_both(&t, &elsewhere);
    std::os::unix::fs::symlink(config_of(&elsewhere), config_of(&cipher)).unwrap();
    let out = run(&args!["info", cipher], b"");
    assert!(!out.status.success());
    assert!(
        text(&out.stderr).contains("a symbolic link, not a regular file"),
        "{}",
        text(&out.stderr)
    );
}

// ---------------------------------------------------------------- info

#[test]
fn info_shows_format_policy_identifier_and_costs_but_no_secret() {
    let t = TempDir::new("info");
    let cipher = t.sub("cipher");
    vault_with_both(&t, &cipher);
    let config = config_json(&cipher);
    let out = run(&args!["info", cipher], b"");
    assert_ok(&out, "info");
    let shown = text(&out.stdout);
    let id = config["policy"]["master_key_identifier"].as_str().unwrap();
    for needle in [
        // init adds a recovery key, so the config is version 2 (named protectors).
        "format: fscrypt-rs vault, version 2",
        "created: 20",
        &format!("key identifier: {id}"),
        "contents AES-256-XTS (1), filenames AES-256-CTS-CBC (4), padding 32",
        "data unit 4096 bytes",
        "protectors: 3",
        "1. passphrase: passphrase, Argon2id v1.3, m=64 KiB, t=1, p=1",
        "2. key-file: key file, HKDF-SHA512",
        "3. recovery-key: recovery key, HKDF-SHA512",
    ] {
        assert!(shown.contains(needle), "{needle:?} missing from:\n{shown}");
    }
    let out = run(&args!["info", cipher, "--json"], b"");
    assert_ok(&out, "info --json");
    let json_text = text(&out.stdout);
    let json: serde_json::Value = serde_json::from_str(&json_text).unwrap();
    assert_eq!(json["format"], "fscrypt-rs vault");
    assert_eq!(json["version"], 2);
    assert_eq!(json["created"], config["protectors"][0]["created"]);
    assert!(json["created_utc"].as_str().unwrap().ends_with('Z'));
    assert_eq!(json["key_identifier"], id);
    assert_eq!(json["policy"]["contents_encryption_mode"], 1);
    assert_eq!(json["policy"]["filenames_encryption_mode"], 4);
    assert_eq!(json["policy"]["padding"], 32);
    assert_eq!(json["policy"]["data_unit_size"], 4096);
    let p = &json["protectors"];
    assert_eq!(p[0]["kind"], "passphrase");
    assert_eq!(p[0]["m_cost_kib"], 64);
    assert_eq!(p[0]["t_cost"], 1);
    assert_eq!(p[0]["p_cost"], 1);
    assert!(p[0]["estimated_unlock_seconds"].is_number());
    assert_eq!(p[1]["kind"], "key_file");
    assert_eq!(p[2]["kind"], "recovery_key");
    // No wrapped key, nonce or salt, in either form.
    for protector in config["protectors"].as_array().unwrap() {
        for field in ["wrapped_key", "nonce", "salt"] {
            let value = protector[field].as_str().unwrap();
            assert!(!shown.contains(value), "text shows a {field}");
            assert!(!json_text.contains(value), "JSON shows a {field}");
        }
    }
    assert!(!json_text.contains("wrapped") && !shown.contains("wrapped"));
    // The frozen v1 fixture has no creation time.
    let fixture = concat!(env!("CARGO_MANIFEST_DIR"), "/../../tests/fixtures/vault-v1");
    let out = run(&args!["info", fixture], b"");
    assert_ok(&out, "info fixture");
    assert!(text(&out.stdout).contains("created: not recorded"));
    // Not a vault.
    let out = run(&args!["info", t.sub("empty")], b"");
    assert!(!out.status.success());
}

// ------------------------------------------- passphrase files and commands

#[test]
fn passfile_and_extpass_read_the_first_line_and_refuse_bad_sources() {
    let t = TempDir::new("sources");
    let mnt = t.sub("mnt");
    // init --passfile: only the first line, without its line end (CRLF too).
    let a = t.sub("a");
    let pass = secret_file(
        &t,
        "pass",
        format!("{PASSPHRASE}\r\nsecond line\n").as_bytes(),
    );
    assert_ok(
        &run(&args!["init", a, "--passfile", pass], b""),
        "init --passfile",
    );
    // The same passphrase from stdin opens it: a wrong one would be 12, so
    // `mount` failing later than the unlock (no FUSE in this test: the
    // mount point is a file) shows the passphrase was right.
    let not_dir = secret_file(&t, "not-a-dir", b"");
    let out = run(
        &args!["mount", a, not_dir],
        format!("{PASSPHRASE}\n").as_bytes(),
    );
    assert_ne!(
        out.status.code(),
        Some(EXIT_WRONG_SECRET),
        "{}",
        text(&out.stderr)
    );
    // init --extpass: the command's first line.
    let b = t.sub("b");
    let cmd = format!("printf '%s\\n%s\\n' '{PASSPHRASE}' ignored");
    assert_ok(
        &run(&args!["init", b, "--extpass", cmd], b""),
        "init --extpass",
    );
    let both = |dir: &Path| std::fs::read(config_of(dir)).unwrap();
    assert_ne!(both(&a), both(&b));
    // Wrong passphrases exit 12, however given.
    let wrong = secret_file(&t, "wrong", b"wrong passphrase\n");
    for argv in [
        args!["mount", a, mnt, "--passfile", wrong],
        args!["mount", a, mnt, "--extpass", "echo wrong passphrase"],
        args![
            "mount",
            a,
            mnt,
            "-o",
            format!("passfile={}", wrong.display())
        ],
        args!["mount", a, mnt, "-o", "extpass=echo wrong"],
    ] {
        let out = run(&argv, b"");
        assert_eq!(
            out.status.code(),
            Some(EXIT_WRONG_SECRET),
            "{argv:?}: {}",
            text(&out.stderr)
        );
    }
    // Bad sources: a clear error, never 12.
    let empty = secret_file(&t, "empty", b"\nsecond\n");
    for (argv, needle) in [
        (args!["mount", a, mnt, "--passfile", empty], "is empty"),
        (
            args!["mount", a, mnt, "--passfile", t.path().join("missing")],
            "opening passphrase file",
        ),
        (
            args!["mount", a, mnt, "--extpass", "echo x; exit 3"],
            "the --extpass command failed (exit status: 3)",
        ),
        (args!["mount", a, mnt, "--extpass", "true"], "is empty"),
        (
            args!["mount", a, mnt, "--passfile", pass, "--extpass", "true"],
            "cannot be used with",
        ),
        (
            args!["mount", a, mnt, "--passfile", pass, "--key-file", pass],
            "cannot be used with",
        ),
        (
            args![
                "mount",
                a,
                mnt,
                "-o",
                format!("passfile={},keyfile=/k", pass.display())
            ],
            "only one of",
        ),
        (args!["init", t.sub("c"), "--passfile", empty], "is empty"),
    ] {
        let out = run(&argv, b"");
        assert!(!out.status.success(), "{argv:?} accepted");
        assert_ne!(out.status.code(), Some(EXIT_WRONG_SECRET), "{argv:?}");
        assert!(
            text(&out.stderr).contains(needle),
            "{argv:?}: {}",
            text(&out.stderr)
        );
    }
    // A passfile others may read is used, with a warning.
    std::fs::set_permissions(&wrong, std::fs::Permissions::from_mode(0o644)).unwrap();
    let out = run(&args!["mount", a, mnt, "--passfile", wrong], b"");
    assert!(
        text(&out.stderr).contains("readable by other users"),
        "{}",
        text(&out.stderr)
    );
}

// ---------------------------------------------------------------- mounting

fn can_mount() -> bool {
    test_support::skip::can_mount(module_path!())
}

fn unmount(mnt: &Path) {
    test_support::mount::unmount_with(Path::new(BIN), mnt);
}

/// True if some process's command line contains `needle`.
fn on_some_command_line(needle: &[u8]) -> bool {
    std::fs::read_dir("/proc").unwrap().flatten().any(|e| {
        std::fs::read(e.path().join("cmdline"))
            .is_ok_and(|c| c.windows(needle.len()).any(|w| w == needle))
    })
}

#[test]
fn passfile_and_extpass_mount_a_passphrase_vault() {
    if !can_mount() {
        return;
    }
    // A passphrase of its own: other tests of this file put PASSPHRASE on
    // command lines on purpose (`--extpass 'printf ...'`), concurrently,
    // and the scan below looks at every process.
    const OWN: &str = "mount sources passphrase, on no command line";
    let t = TempDir::new("mount-sources");
    let cipher = t.sub("cipher");
    let mnt = t.sub("mnt");
    let pass = secret_file(&t, "pass", format!("{OWN}\n").as_bytes());
    assert_ok(
        &run(&args!["init", cipher, "--passfile", pass], b""),
        "init",
    );
    let mnt_canon = std::fs::canonicalize(&mnt).unwrap();
    let guard = MountGuard::new(BIN, &mnt_canon);
    let ways = [
        args!["mount", cipher, mnt, "--passfile", pass],
        args![
            "mount",
            cipher,
            mnt,
            "--extpass",
            format!("cat '{}'", pass.display())
        ],
        args![
            "mount",
            cipher,
            mnt,
            "-o",
            format!("passfile={}", pass.display())
        ],
        args![
            "mount",
            cipher,
            mnt,
            "-o",
            format!("extpass=cat {}", pass.display())
        ],
    ];
    for (i, argv) in ways.iter().enumerate() {
        assert_ok(&run(argv, b""), &format!("{argv:?}"));
        assert!(is_mounted(&mnt_canon));
        // Never on a command line of ours (the daemon's included).
        assert!(!on_some_command_line(OWN.as_bytes()));
        let name = mnt.join(format!("file{i}"));
        std::fs::write(&name, format!("written by way {i}")).unwrap();
        for j in 0..=i {
            assert_eq!(
                std::fs::read_to_string(mnt.join(format!("file{j}"))).unwrap(),
                format!("written by way {j}")
            );
        }
        unmount(&mnt_canon);
    }
    drop(guard);
}

#[test]
fn mount8_with_passfile_in_a_private_mount_namespace() {
    if !can_mount() {
        return;
    }
    if !Path::new("/usr/bin/unshare").exists() || !Path::new("/usr/bin/mount").exists() {
        eprintln!("SKIPPED: needs unshare(1) and mount(8) in /usr/bin");
        return;
    }
    let t = TempDir::new("mount8");
    let cipher = t.sub("cipher");
    let mnt = t.sub("mnt");
    let pass = secret_file(&t, "pass", format!("{PASSPHRASE}\n").as_bytes());
    let wrong = secret_file(&t, "wrong", b"wrong\n");
    assert_ok(
        &run(&args!["init", cipher, "--passfile", pass], b""),
        "init",
    );
    // mount(8) looks for /sbin/mount.<type>: in a private mount namespace,
    // a directory with our helper is bound over /sbin (only there).
    let sbin = t.sub("sbin");
    std::os::unix::fs::symlink(BIN, sbin.join("mount.fscrypt-rs")).unwrap();
    let script = r#"
        set -u
        mount --bind "$SBIN" /sbin || exit 90
        trap 'umount -l "$MNT" 2>/dev/null' EXIT
        mount -t fscrypt-rs -o "passfile=$WRONG" "$CIPHER" "$MNT"
        echo "wrong=$?"
        mount -t fscrypt-rs -o "passfile=$PASS,nofail" "$CIPHER" "$MNT" || exit 91
        echo hello-from-mount8 > "$MNT/greeting" || exit 92
        cat "$MNT/greeting"
        umount "$MNT" || exit 93
        mount -t fscrypt-rs -o "ro,passfile=$PASS" "$CIPHER" "$MNT" || exit 94
        cat "$MNT/greeting"
        umount "$MNT" || exit 95
    "#;
    let mut child = Command::new("/usr/bin/unshare")
        .args([
            "--mount",
            "--propagation",
            "private",
            "/bin/sh",
            "-c",
            script,
        ])
        .env("SBIN", &sbin)
        .env("MNT", std::fs::canonicalize(&mnt).unwrap())
        .env("CIPHER", &cipher)
        .env("PASS", &pass)
        .env("WRONG", &wrong)
        .env(ARGON2_ENV, CHEAP_ARGON2)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let start = Instant::now();
    while child.try_wait().unwrap().is_none() {
        if start.elapsed() > Duration::from_secs(60) {
            let _ = child.kill();
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let out = child.wait_with_output().unwrap();
    let stdout = text(&out.stdout);
    if out.status.code() == Some(90) {
        eprintln!(
            "SKIPPED: cannot bind-mount in a private mount namespace: {}",
            text(&out.stderr)
        );
        return;
    }
    assert!(out.status.success(), "{stdout}{}", text(&out.stderr));
    assert!(
        stdout.contains(&format!("wrong={EXIT_WRONG_SECRET}")),
        "{stdout}{}",
        text(&out.stderr)
    );
    assert_eq!(stdout.matches("hello-from-mount8").count(), 2, "{stdout}");
    // Nothing leaked into our namespace.
    assert!(!is_mounted(&std::fs::canonicalize(&mnt).unwrap()));
}

// ------------------------------------------ refuse before asking (issue 26)

/// `init` refuses a directory that cannot hold a new vault before it reads
/// a passphrase or calibrates Argon2id (real costs here: the old order
/// spent a calibration first): not empty, already a vault, a `--config`
/// inside it. Stdin is empty, so a command that asked first would fail on
/// the empty passphrase instead.
#[test]
fn init_refuses_the_directory_before_asking_for_a_passphrase() {
    let t = TempDir::new("refuse-first");
    let full = t.sub("full");
    std::fs::write(full.join("x"), b"x").unwrap();
    let vault = t.sub("vault");
    let key = t.join("k.key");
    assert_ok(
        &run(&args!["init", vault, "--new-key-file", key], b""),
        "init",
    );
    let empty = t.sub("empty");
    for (argv, needle) in [
        (args!["init", full], "is not empty"),
        (
            args!["init", full, "--passphrase", "--key-file", key],
            "is not empty",
        ),
        (args!["init", vault], "already a vault"),
        (
            args!["init", empty, "--config", empty.join("c.json")],
            "is inside the cipher directory",
        ),
    ] {
        for stdin in [&b""[..], format!("{PASSPHRASE}\n").as_bytes()] {
            let start = Instant::now();
            let out = run_real_cost(&argv, stdin);
            let err = text(&out.stderr);
            assert!(!out.status.success(), "{argv:?} accepted");
            assert!(err.contains(needle), "{argv:?}: {err}");
            assert!(!err.contains("passphrase"), "{argv:?}: {err}");
            assert!(
                !err.contains("Argon2id"),
                "{argv:?} calibrated first: {err}"
            );
            assert_eq!(err.trim().lines().count(), 1, "{argv:?}: {err}");
            assert!(start.elapsed() < Duration::from_secs(5), "{argv:?}");
        }
    }
    assert_eq!(std::fs::read_dir(&empty).unwrap().count(), 0);
    assert_eq!(std::fs::read_dir(&full).unwrap().count(), 1);
}

/// With stdin not a terminal, an empty first line is refused with a line
/// that says where a passphrase can come from (`--passfile`, `--extpass`),
/// not only "the passphrase is empty"; nothing is created.
#[test]
fn an_empty_stdin_names_the_passphrase_options() {
    let t = TempDir::new("empty-stdin");
    let c = t.sub("c");
    for stdin in [&b""[..], b"\n"] {
        let out = run(&args!["init", c], stdin);
        let err = text(&out.stderr);
        assert!(!out.status.success());
        assert!(
            err.contains("stdin")
                && err.contains("--passfile FILE")
                && err.contains("--extpass CMD"),
            "{err}"
        );
        assert_eq!(err.trim().lines().count(), 1, "{err}");
        assert_eq!(std::fs::read_dir(&c).unwrap().count(), 0);
    }
}

/// Runs the binary with a pseudo-terminal as its stdin, `typed` written to
/// the terminal (as if typed), stderr captured.
fn run_on_terminal(args: &[std::ffi::OsString], typed: &[u8]) -> Output {
    use rustix::pty::{OpenptFlags, grantpt, openpt, ptsname, unlockpt};
    let master = openpt(OpenptFlags::RDWR | OpenptFlags::NOCTTY).unwrap();
    grantpt(&master).unwrap();
    unlockpt(&master).unwrap();
    let name = ptsname(&master, Vec::new()).unwrap();
    let slave = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .custom_flags(libc::O_NOCTTY)
        .open(name.to_str().unwrap())
        .unwrap();
    let child = Command::new(BIN)
        .args(args)
        .env(ARGON2_ENV, CHEAP_ARGON2)
        .stdin(Stdio::from(slave))
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    rustix::io::write(&master, typed).unwrap();
    let out = child.wait_with_output().unwrap();
    drop(master);
    out
}

/// Two passphrases that differ at the terminal stop `init` with a line
/// saying that nothing was created, and nothing is.
#[test]
fn mismatched_passphrases_at_init_say_nothing_was_created() {
    let t = TempDir::new("mismatch");
    let c = t.sub("c");
    let out = run_on_terminal(&args!["init", c], b"first one\nsecond one\n");
    let err = text(&out.stderr);
    assert!(!out.status.success(), "{err}");
    assert!(err.contains("the two passphrases differ"), "{err}");
    assert!(err.contains("nothing was created"), "{err}");
    assert_eq!(std::fs::read_dir(&c).unwrap().count(), 0);
    // The same passphrase twice makes the vault (the terminal path works).
    let out = run_on_terminal(
        &args!["init", c, "--no-recovery-key"],
        b"same one\nsame one\n",
    );
    assert_ok(&out, "init at a terminal");
    assert!(config_of(&c).exists());
}
