//! `--config FILE`: the vault's config kept outside the cipher directory
//! (issue 23 item 7, gocryptfs `-config`). `init --config F` leaves no
//! config (no wrapped key) in CIPHERDIR; without `--config` every command
//! refuses with one line that names `--config`; `info`, `fsck`, `protector`
//! and `passwd` with `--config F` work and change F only; and (with root
//! and /dev/fuse) `mount --config F` and `mount -o config=F` serve the
//! files. Through the real binary, cheap Argon2id costs.

use std::ffi::{OsStr, OsString};
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::Output;

use test_support::{MountGuard, TempDir, text};

const BIN: &str = env!("CARGO_BIN_EXE_fscrypt-rs");

/// An owned command line: each argument a path, `String` or `&str`.
macro_rules! args {
    ($($a:expr),* $(,)?) => { vec![$(OsString::from(&$a)),*] };
}

fn run(args: impl AsRef<[OsString]>, stdin: &[u8]) -> Output {
    let args = args.as_ref();
    let refs: Vec<&OsStr> = args.iter().map(OsString::as_os_str).collect();
    test_support::cli::run(Path::new(BIN), &refs, stdin)
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

/// The names in `dir`, sorted.
fn names(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    v.sort();
    v
}

/// Asserts that `out` failed with one line on stderr that says the config
/// is missing and names `--config`.
fn refused_without_config(what: &str, out: &Output) {
    let err = text(&out.stderr);
    assert!(!out.status.success(), "{what} worked without --config");
    assert_eq!(err.trim_end().lines().count(), 1, "{what}: {err}");
    assert!(
        err.contains("--config") && err.contains("no config"),
        "{what}: {err}"
    );
}

/// A vault made with `init --config`: (temp dir, cipherdir, config, key).
fn vault_with_outside_config(tag: &str) -> (TempDir, OsString, OsString, OsString) {
    let t = TempDir::new(tag);
    let cipher = t.sub("cipher");
    let keys = t.sub("keys");
    let cfg = keys.join("vault.json");
    let key = keys.join("vault.key");
    let out = ok(
        "init --config",
        &run(
            args![
                "init",
                cipher,
                "--config",
                cfg,
                "--new-key-file",
                key,
                "--no-recovery-key"
            ],
            b"",
        ),
    );
    assert!(out.contains("config:"), "{out}");
    (t, cipher.into(), cfg.into(), key.into())
}

#[test]
fn init_config_keeps_the_wrapped_key_out_of_the_cipherdir() {
    let (t, cipher, cfg, key) = vault_with_outside_config("cfg-edit");
    let cipher_p = Path::new(&cipher);
    let cfg_p = Path::new(&cfg);
    // CIPHERDIR holds the root only; the config is F, 0600.
    assert_eq!(names(cipher_p), ["fscrypt.dir"]);
    let mode = std::fs::metadata(cfg_p).unwrap().permissions().mode();
    assert_eq!(mode & 0o777, 0o600);
    // Without --config: one line naming --config, for every command.
    for (what, cmd) in [
        ("info", args!["info", cipher]),
        ("fsck", args!["fsck", cipher, "--key-file", key]),
        ("protector list", args!["protector", "list", cipher]),
        (
            "protector add",
            args!["protector", "add", cipher, "passphrase", "--key-file", key],
        ),
        ("passwd", args!["passwd", cipher, "--key-file", key]),
        (
            "mount",
            args!["mount", cipher, t.sub("mnt"), "--key-file", key],
        ),
    ] {
        refused_without_config(what, &run(cmd, b"new pass\n"));
    }
    // With it: info and fsck read F.
    let info = ok(
        "info --config",
        &run(args!["info", cipher, "--config", cfg], b""),
    );
    assert!(info.contains("key-file"), "{info}");
    ok(
        "fsck --config",
        &run(
            args!["fsck", cipher, "--config", cfg, "--key-file", key],
            b"",
        ),
    );
    // protector add and passwd change F, and nothing in CIPHERDIR.
    let before = std::fs::read(cfg_p).unwrap();
    ok(
        "protector add --config",
        &run(
            args![
                "protector",
                "add",
                cipher,
                "passphrase",
                "--config",
                cfg,
                "--key-file",
                key
            ],
            b"first pass\n",
        ),
    );
    let added = std::fs::read(cfg_p).unwrap();
    assert_ne!(added, before, "protector add rewrote the config");
    assert_eq!(names(cipher_p), ["fscrypt.dir"]);
    assert_eq!(names(cfg_p.parent().unwrap()), ["vault.json", "vault.key"]);
    let list = ok(
        "protector list --config",
        &run(args!["protector", "list", cipher, "--config", cfg], b""),
    );
    assert!(list.contains("passphrase"), "{list}");
    ok(
        "passwd --config",
        &run(
            args!["passwd", cipher, "--config", cfg],
            b"first pass\nsecond pass\n",
        ),
    );
    assert_ne!(std::fs::read(cfg_p).unwrap(), added, "passwd rewrote it");
    assert_eq!(names(cipher_p), ["fscrypt.dir"]);
    assert_eq!(names(cfg_p.parent().unwrap()), ["vault.json", "vault.key"]);
    let mode = std::fs::metadata(cfg_p).unwrap().permissions().mode();
    assert_eq!(mode & 0o777, 0o600, "still 0600 after the rewrite");
    // The new passphrase opens the vault through F.
    ok(
        "fsck --config with the new passphrase",
        &run(args!["fsck", cipher, "--config", cfg], b"second pass\n"),
    );
    // A second init onto the same F is refused before anything is made.
    let other = t.sub("other");
    let out = run(args!["init", other, "--config", cfg], b"x\n");
    assert!(!out.status.success());
    assert!(
        text(&out.stderr).contains("already exists"),
        "{}",
        text(&out.stderr)
    );
    assert!(names(&other).is_empty());
}

#[test]
fn mount_with_an_outside_config() {
    test_support::need_fuse!();
    let (t, cipher, cfg, key) = vault_with_outside_config("cfg-mount");
    let mnt = t.sub("mnt");
    // Without --config: the one-line reason, nothing mounted.
    let out = run(args!["mount", cipher, mnt, "--key-file", key], b"");
    refused_without_config("mount", &out);
    assert!(!test_support::is_mounted(&mnt));
    // --config F: the files go through.
    ok(
        "mount --config",
        &run(
            args!["mount", cipher, mnt, "--config", cfg, "--key-file", key],
            b"",
        ),
    );
    {
        let _guard = MountGuard::new(BIN, &mnt);
        std::fs::write(mnt.join("note.txt"), b"kept off the cloud").unwrap();
        ok("unmount", &run(args!["unmount", mnt], b""));
    }
    assert!(!Path::new(&cipher).join("fscrypt.vault.json").exists());
    // -o config=F (as in fstab), with keyfile= too.
    let mut opt = OsString::from("config=");
    opt.push(&cfg);
    opt.push(",keyfile=");
    opt.push(&key);
    ok(
        "mount -o config=",
        &run(args!["mount", cipher, mnt, "-o", opt], b""),
    );
    let _guard = MountGuard::new(BIN, &mnt);
    assert_eq!(
        std::fs::read(mnt.join("note.txt")).unwrap(),
        b"kept off the cloud"
    );
    ok("unmount", &run(args!["unmount", mnt], b""));
}
