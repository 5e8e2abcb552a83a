//! Secrets stay in the mount daemon: started by the real binary (`init
//! --new-key-file --passphrase`, then `mount --key-file --log-file` with
//! `RUST_LOG=trace` and core dumps allowed), the daemon leaves no core file
//! when it gets SIGSEGV (twice: Rust's stack-guard handler swallows the
//! first), its argv and environment, its log and the backing store hold
//! neither the key file's bytes (raw or hex) nor the passphrase, the log is
//! 0600, and the trace log carries no plaintext file name.
//!
//! Needs root and /dev/fuse; without them it prints a loud reason and
//! returns. The mount is undone by a guard's Drop.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::{Duration, Instant};

use test_support::cli::CHEAP_ARGON2;
use test_support::skip::can_mount;
use test_support::tree::tree_bytes;
use test_support::{MountGuard, TempDir, contains, hex, is_mounted, os_args as args, text};

const BIN: &str = env!("CARGO_BIN_EXE_fscrypt-rs");
const PASSPHRASE: &[u8] = b"correct-horse-PASSPHRASE-7f3e";
const NAMES: [&str; 3] = ["PLAINNAME-alpha", "PLAINDIR-beta", "PLAINLINK-gamma"];

/// Runs `sh -c script BIN args...` in `cwd` with `stdin`, killing it after
/// 60 s.
fn run_sh(script: &str, args: &[&std::ffi::OsStr], cwd: &Path, stdin: &[u8]) -> Output {
    test_support::run::output(
        Command::new("/bin/sh")
            .arg("-c")
            .arg(script)
            .arg(BIN)
            .args(args)
            .current_dir(cwd)
            .env("FSCRYPT_RS_INSECURE_ARGON2_PARAMS", CHEAP_ARGON2)
            .env("RUST_LOG", "trace"),
        stdin,
    )
}

/// The pid of the daemon serving `mnt`: the process whose argv has
/// `--master-key-stdin` and `mnt`.
fn daemon_pid(mnt: &Path) -> Option<u32> {
    test_support::procs::pid_with_args(&[b"--master-key-stdin", mnt.as_os_str().as_encoded_bytes()])
}

/// Core files (`core`, `core.*`) directly in `dir`.
fn cores_in(dir: &Path) -> Vec<PathBuf> {
    std::fs::read_dir(dir)
        .map(|rd| {
            rd.flatten()
                .map(|e| e.path())
                .filter(|p| {
                    let n = p.file_name().unwrap().to_string_lossy();
                    (n == "core" || n.starts_with("core.")) && p.is_file()
                })
                .collect()
        })
        .unwrap_or_default()
}

/// The needles of `secrets` found in `hay`, by label.
fn leaks(hay: &[u8], secrets: &[(&str, Vec<u8>)]) -> Vec<String> {
    secrets
        .iter()
        .filter(|(_, s)| contains(hay, s))
        .map(|(l, _)| (*l).to_owned())
        .collect()
}

#[test]
fn daemon_keeps_its_secrets() {
    if !can_mount("daemon_keeps_its_secrets") {
        return;
    }
    let started = Instant::now();
    let t = TempDir::new("secrets");
    let (cipher, mnt) = (t.sub("cipher"), t.sub("mnt"));
    let key = t.join("vault.key");
    let log = t.join("daemon.log");
    // The caller's working directory: where a core file landed before.
    let cwd = t.sub("cwd");
    let mut passline = PASSPHRASE.to_vec();
    passline.push(b'\n');
    let out = run_sh(
        "exec \"$0\" \"$@\"",
        args!["init", cipher, "--new-key-file", key, "--passphrase"],
        &cwd,
        &passline,
    );
    assert!(out.status.success(), "init: {}", text(&out.stderr));
    let key_bytes = std::fs::read(&key).unwrap();
    assert_eq!(key_bytes.len(), 64);
    let secrets = [
        ("key file bytes", key_bytes.clone()),
        ("key file hex", hex(&key_bytes).into_bytes()),
        ("key file HEX", hex(&key_bytes).to_uppercase().into_bytes()),
        ("passphrase", PASSPHRASE.to_vec()),
    ];

    // Core dumps allowed for the mount and its daemon, which would write
    // them (core_pattern `core`) into their working directory.
    let out = run_sh(
        "ulimit -c unlimited && exec \"$0\" \"$@\"",
        args!["mount", cipher, mnt, "--key-file", key, "--log-file", log],
        &cwd,
        b"",
    );
    assert!(out.status.success(), "mount: {}", text(&out.stderr));
    let guard = MountGuard::new(BIN, &mnt);
    assert!(is_mounted(&mnt));
    let pid = daemon_pid(&mnt).expect("daemon process");
    let mut failures = Vec::new();

    // Plaintext names through the mount, with requests the trace log sees.
    std::fs::write(mnt.join(NAMES[0]), b"PLAINCONTENTS-0123456789").unwrap();
    std::fs::create_dir(mnt.join(NAMES[1])).unwrap();
    std::os::unix::fs::symlink(NAMES[0], mnt.join(NAMES[2])).unwrap();
    let _ = std::fs::read_dir(&mnt).unwrap().count();
    for n in NAMES {
        let _ = std::fs::symlink_metadata(mnt.join(n)).unwrap();
    }
    assert_eq!(
        std::fs::read(mnt.join(NAMES[2])).unwrap(),
        b"PLAINCONTENTS-0123456789"
    );
    let _ = std::fs::symlink_metadata(mnt.join("PLAINNAME-missing"));
    std::fs::rename(mnt.join(NAMES[1]), mnt.join("PLAINNAME-renamed")).unwrap();

    for what in ["cmdline", "environ"] {
        let data = std::fs::read(format!("/proc/{pid}/{what}")).unwrap();
        for l in leaks(&data, &secrets) {
            failures.push(format!("/proc/{pid}/{what} holds the {l}"));
        }
    }
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let cwd_link = std::fs::read_link(format!("/proc/{pid}/cwd")).unwrap();
    if cwd_link != Path::new("/") {
        failures.push(format!("daemon's cwd is {}", cwd_link.display()));
    }

    // SIGSEGV, and again while it lives (Rust's stack-guard handler
    // swallows the first one), then wait for the kernel to finish.
    for (round, wait) in [(1, 1), (2, 20)] {
        if round == 2 && !Path::new(&format!("/proc/{pid}")).exists() {
            break;
        }
        let _ = Command::new("kill")
            .arg("-SEGV")
            .arg(pid.to_string())
            .status();
        let start = Instant::now();
        while Path::new(&format!("/proc/{pid}")).exists()
            && start.elapsed() < Duration::from_secs(wait)
        {
            std::thread::sleep(Duration::from_millis(20));
        }
    }
    drop(guard);
    let pattern = std::fs::read_to_string("/proc/sys/kernel/core_pattern").unwrap_or_default();
    if pattern.starts_with('|') {
        eprintln!(
            "core file check not run: core_pattern is a pipe ({})",
            pattern.trim()
        );
    }
    for dir in [
        Path::new("/"),
        &cwd,
        t.path(),
        &std::env::current_dir().unwrap(),
    ] {
        for core in cores_in(dir) {
            failures.push(format!("core file {}", core.display()));
            let _ = std::fs::remove_file(&core);
        }
    }

    let log_meta = std::fs::metadata(&log).unwrap();
    let mode = log_meta.permissions().mode() & 0o7777;
    if mode != 0o600 {
        failures.push(format!("log file mode {mode:o}"));
    }
    let log_bytes = std::fs::read(&log).unwrap();
    for l in leaks(&log_bytes, &secrets) {
        failures.push(format!("the log holds the {l}"));
    }
    for n in NAMES
        .iter()
        .chain(&["PLAINNAME-missing", "PLAINNAME-renamed", "PLAINCONTENTS"])
    {
        if contains(&log_bytes, n.as_bytes()) {
            failures.push(format!("the trace log holds the plaintext {n:?}"));
        }
    }
    for l in leaks(&tree_bytes(&cipher), &secrets) {
        failures.push(format!("the backing store holds the {l}"));
    }
    eprintln!("log:\n{}", text(&log_bytes));
    eprintln!(
        "daemon {pid}: log {} bytes, mode {mode:o}, cwd {}, {} s",
        log_bytes.len(),
        cwd_link.display(),
        started.elapsed().as_secs_f32()
    );
    assert!(
        failures.is_empty(),
        "{} leaks:\n{}\n(daemon status: {})",
        failures.len(),
        failures.join("\n"),
        status.lines().take(3).collect::<Vec<_>>().join("; ")
    );
}
