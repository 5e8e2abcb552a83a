//! The same secret options on every vault command that unlocks (issue 23
//! item 8): `fsck`, `passwd`, `protector add` and `protector remove` each
//! take `--passfile`, `--extpass`, `--key-file` and `--recovery-key`, and
//! each of these actually unlocks (the run succeeds with nothing on stdin
//! that could stand in for the secret; a wrong `--passfile` or `--extpass`
//! is exit 12). clap's "unexpected argument ... tip: use '-- --passfile'"
//! never appears. Through the real binary, cheap Argon2id costs, no FUSE.

use std::ffi::{OsStr, OsString};
use std::path::Path;
use std::process::Output;

use test_support::{TempDir, text};

/// An owned command line: each argument a path, `String` or `&str`.
macro_rules! args {
    ($($a:expr),* $(,)?) => { vec![$(OsString::from(&$a)),*] };
}

const BIN: &str = env!("CARGO_BIN_EXE_fscrypt-rs");
const EXIT_WRONG_SECRET: i32 = 12;

/// Runs the binary with `stdin` piped in (never a terminal), and checks
/// that clap did not refuse an option.
fn run(args: impl AsRef<[OsString]>, stdin: &[u8]) -> Output {
    let args = args.as_ref();
    let refs: Vec<&OsStr> = args.iter().map(OsString::as_os_str).collect();
    let out = test_support::cli::run(Path::new(BIN), &refs, stdin);
    let err = text(&out.stderr);
    assert!(
        !err.contains("tip:") && !err.contains("unexpected argument"),
        "{args:?}: clap refused an option: {err}"
    );
    out
}

fn ok(what: &str, out: &Output) -> String {
    assert!(
        out.status.success(),
        "{what}: exit {:?}: {}{}",
        out.status.code(),
        text(&out.stdout),
        text(&out.stderr)
    );
    text(&out.stdout)
}

/// The recovery key printed by `init`.
fn recovery_key_in(stdout: &str) -> String {
    stdout
        .lines()
        .map(str::trim)
        .find(|l| l.len() == 69 && l.split('-').count() == 14)
        .unwrap_or_else(|| panic!("no recovery key in {stdout}"))
        .to_owned()
}

/// The name of the protector `protector add` reports.
fn added_name(stdout: &str) -> String {
    let rest = stdout
        .split("protector \"")
        .nth(1)
        .unwrap_or_else(|| panic!("no protector name in {stdout}"));
    rest[..rest.find('"').unwrap()].to_owned()
}

#[test]
fn every_unlocking_command_takes_every_secret_option() {
    let t = TempDir::new("unlock-options");
    let cipher = t.sub("cipher");
    let key = t.join("vault.key");
    let pass = t.join("pass");
    std::fs::write(&pass, b"the passphrase\n").unwrap();
    std::fs::set_permissions(&pass, std::os::unix::fs::PermissionsExt::from_mode(0o600)).unwrap();
    let wrong = t.join("wrong");
    std::fs::write(&wrong, b"not the passphrase\n").unwrap();
    std::fs::set_permissions(&wrong, std::os::unix::fs::PermissionsExt::from_mode(0o600)).unwrap();
    let init = ok(
        "init",
        &run(
            args!["init", cipher, "--new-key-file", key, "--passphrase"],
            b"the passphrase\n",
        ),
    );
    let rk = recovery_key_in(&init);
    let rk_line = format!("{rk}\n");
    // The secret comes from the file, the command (which reads the file:
    // no secret on any command line), the key file, or the recovery key
    // on stdin. Nothing else is on stdin, so only the option can unlock.
    let extpass = format!("cat '{}'", pass.display());
    let ways: [(&str, Vec<OsString>, &[u8]); 4] = [
        ("--passfile", args!["--passfile", pass], b""),
        ("--extpass", args!["--extpass", extpass], b""),
        ("--key-file", args!["--key-file", key], b""),
        (
            "--recovery-key",
            args!["--recovery-key"],
            rk_line.as_bytes(),
        ),
    ];
    for (flag, secret, stdin) in &ways {
        let with = |cmd: Vec<OsString>| {
            let mut a = cmd;
            a.extend(secret.iter().cloned());
            a
        };
        // fsck: unlocked, so names are decrypted; the vault is clean.
        let out = ok(
            &format!("fsck {flag}"),
            &run(with(args!["fsck", cipher]), stdin),
        );
        assert!(out.contains("with the key"), "fsck {flag}: {out}");
        // protector add: a new recovery key, opened with this secret.
        let out = ok(
            &format!("protector add {flag}"),
            &run(
                with(args!["protector", "add", cipher, "recovery-key"]),
                stdin,
            ),
        );
        let name = added_name(&out);
        // protector remove: that new protector, with the same secret.
        ok(
            &format!("protector remove {flag}"),
            &run(with(args!["protector", "remove", cipher, name]), stdin),
        );
        // passwd: the passphrase "changed" to itself (the new one is the
        // line on stdin after the secret, if any).
        let mut passwd_stdin = stdin.to_vec();
        passwd_stdin.extend_from_slice(b"the passphrase\n");
        let out = ok(
            &format!("passwd {flag}"),
            &run(with(args!["passwd", cipher]), &passwd_stdin),
        );
        assert!(
            out.contains("Changed the passphrase"),
            "passwd {flag}: {out}"
        );
    }
    // The passphrase still opens the vault after the four passwd runs.
    ok(
        "fsck --passfile at the end",
        &run(args!["fsck", cipher, "--passfile", pass], b""),
    );
    // The passfile and the command really are what is checked: a wrong
    // one is a wrong secret (exit 12), on fsck and on protector add.
    let wrong_cmd = format!("cat '{}'", wrong.display());
    for secret in [args!["--passfile", wrong], args!["--extpass", wrong_cmd]] {
        for cmd in &[
            args!["fsck", cipher],
            args!["protector", "add", cipher, "recovery-key"],
            args!["passwd", cipher],
        ] {
            let mut a = cmd.clone();
            a.extend(secret.iter().cloned());
            let out = run(&a, b"never read\n");
            assert_eq!(
                out.status.code(),
                Some(EXIT_WRONG_SECRET),
                "{a:?}: {}",
                text(&out.stderr)
            );
        }
    }
    // Two secrets at once are refused by name (not as unknown options).
    let out = run(
        args!["fsck", cipher, "--passfile", pass, "--key-file", key],
        b"",
    );
    assert!(!out.status.success());
    assert!(
        text(&out.stderr).contains("cannot be used with"),
        "{}",
        text(&out.stderr)
    );
    // protector add key-file: --key-file unlocks; the key file to add is
    // --add-key-file (or --new-key-file), and the message says so.
    let out = run(
        args!["protector", "add", cipher, "key-file", "--key-file", key],
        b"",
    );
    assert!(!out.status.success());
    assert!(
        text(&out.stderr).contains("--add-key-file"),
        "{}",
        text(&out.stderr)
    );
    let second = t.join("second.key");
    std::fs::write(&second, [7u8; 32]).unwrap();
    std::fs::set_permissions(&second, std::os::unix::fs::PermissionsExt::from_mode(0o600)).unwrap();
    ok(
        "protector add key-file --add-key-file",
        &run(
            args![
                "protector",
                "add",
                cipher,
                "key-file",
                "--add-key-file",
                second,
                "--passfile",
                pass
            ],
            b"",
        ),
    );
    ok(
        "fsck with the added key file",
        &run(args!["fsck", cipher, "--key-file", second], b""),
    );
}
