//! `fscrypt-rs passwd` and `fscrypt-rs protector list|add|remove`, and the
//! recovery key of `init`, through the real binary: each protector kind
//! unlocks, a removed one no longer does, a wrong old passphrase changes
//! nothing (exit 12, config bytes unchanged), the last protector is never
//! removed, the v1 fixture keeps unlocking after a passphrase change, and
//! (with root and /dev/fuse) a file written before reads back after every
//! change. Argon2id runs with cheap test costs.

use std::path::Path;
use std::process::Output;

use test_support::skip::can_mount;
use test_support::{MountGuard, TempDir, is_mounted, os_args as args, text};

const BIN: &str = env!("CARGO_BIN_EXE_fscrypt-rs");
const FIXTURES: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../../tests/fixtures");
const EXIT_WRONG_SECRET: i32 = 12;

/// Runs the binary with `stdin` piped in (never a terminal); 60 s limit.
fn run(args: &[&std::ffi::OsStr], stdin: &[u8]) -> Output {
    test_support::cli::run(Path::new(BIN), args, stdin)
}

fn ok(out: &Output) -> String {
    assert!(
        out.status.success(),
        "exit {:?}: {}{}",
        out.status.code(),
        text(&out.stdout),
        text(&out.stderr)
    );
    text(&out.stdout)
}

fn config(dir: &Path) -> Vec<u8> {
    std::fs::read(dir.join("fscrypt.vault.json")).unwrap()
}

/// The recovery key printed by `init` or `protector add ... recovery-key`.
fn recovery_key_in(stdout: &str) -> String {
    stdout
        .lines()
        .map(str::trim)
        .find(|l| l.len() == 69 && l.split('-').count() == 14)
        .unwrap_or_else(|| panic!("no recovery key in {stdout}"))
        .to_owned()
}

/// Checks whether `pass` opens a passphrase protector, without FUSE: a
/// `passwd` to the same passphrase (exit 0) or a wrong one (exit 12).
fn passphrase_opens(cipher: &Path, pass: &str) -> bool {
    let out = run(
        args!["passwd", cipher],
        format!("{pass}\n{pass}\n").as_bytes(),
    );
    match out.status.code() {
        Some(0) => true,
        Some(EXIT_WRONG_SECRET) => false,
        _ => panic!("passwd: {}", text(&out.stderr)),
    }
}

#[test]
fn passwd_with_the_wrong_old_passphrase_changes_nothing() {
    let t = TempDir::new("passwd");
    let cipher = t.sub("cipher");
    ok(&run(
        args!["init", cipher, "--no-recovery-key"],
        b"old pass\n",
    ));
    let before = config(&cipher);
    assert!(text(&before).contains("\"version\": 1,"));
    let out = run(args!["passwd", cipher], b"not it\nnew pass\n");
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
    assert_eq!(config(&cipher), before, "config bytes unchanged");
    // The right one: changed, still a version-1 config, old one refused.
    let stdout = ok(&run(args!["passwd", cipher], b"old pass\nnew pass\n"));
    assert!(
        stdout.contains("Changed the passphrase of protector \"passphrase\""),
        "{stdout}"
    );
    let after = config(&cipher);
    assert_ne!(after, before);
    assert!(text(&after).contains("\"version\": 1,"), "{}", text(&after));
    assert!(!passphrase_opens(&cipher, "old pass"));
    assert!(passphrase_opens(&cipher, "new pass"));
    // A key-file protector is not a passphrase: passwd says what to use.
    let key = t.join("k");
    ok(&run(
        args![
            "protector",
            "add",
            cipher,
            "key-file",
            "--new-key-file",
            key
        ],
        b"new pass\n",
    ));
    let out = run(args!["passwd", cipher, "--protector", "key-file"], b"");
    assert!(!out.status.success());
    assert!(
        text(&out.stderr).contains("passwd changes passphrases"),
        "{}",
        text(&out.stderr)
    );
}

#[test]
fn protectors_add_list_remove_and_the_last_is_kept() {
    let t = TempDir::new("prot");
    let cipher = t.sub("cipher");
    let init = ok(&run(args!["init", cipher], b"first\n"));
    let rk = recovery_key_in(&init);
    assert!(text(&config(&cipher)).contains("\"version\": 2,"));
    let list = ok(&run(args!["protector", "list", cipher], b""));
    assert!(
        list.contains("passphrase") && list.contains("recovery-key"),
        "{list}"
    );
    assert!(list.contains("argon2id m=64 KiB t=1 p=1"), "{list}");
    assert!(!list.contains(&rk), "list shows no secret");

    // Add a second passphrase, unlocking with the recovery key typed
    // sloppily (lower case, spaces instead of dashes).
    let sloppy = rk.to_lowercase().replace('-', " ");
    ok(&run(
        args![
            "protector",
            "add",
            cipher,
            "passphrase",
            "--recovery-key",
            "--name",
            "laptop"
        ],
        format!("{sloppy}\nsecond\n").as_bytes(),
    ));
    // Two key files, default names.
    let (k1, k2) = (t.join("k1"), t.join("k2"));
    ok(&run(
        args!["protector", "add", cipher, "key-file", "--new-key-file", k1],
        b"second\n",
    ));
    let out = ok(&run(
        args![
            "protector",
            "add",
            cipher,
            "key-file",
            "--new-key-file",
            k2,
            "--unlock-key-file",
            k1
        ],
        b"",
    ));
    assert!(out.contains("\"key-file-2\""), "{out}");
    // Another recovery key, shown once.
    let out = ok(&run(
        args![
            "protector",
            "add",
            cipher,
            "recovery-key",
            "--unlock-key-file",
            k2
        ],
        b"",
    ));
    let rk2 = recovery_key_in(&out);
    assert_ne!(rk2, rk);
    let list = ok(&run(args!["protector", "list", cipher], b""));
    for name in [
        "passphrase",
        "recovery-key",
        "laptop",
        "key-file",
        "key-file-2",
        "recovery-key-2",
    ] {
        assert!(
            list.lines().any(|l| l.starts_with(&format!("{name} "))),
            "{name}: {list}"
        );
    }
    // A name taken, a wrong unlocking secret: refused, nothing changed.
    let before = config(&cipher);
    let out = run(
        args!["protector", "add", cipher, "passphrase", "--name", "laptop"],
        b"first\nx\n",
    );
    assert!(!out.status.success() && text(&out.stderr).contains("already exists"));
    let out = run(
        args!["protector", "add", cipher, "passphrase"],
        b"wrong\nx\n",
    );
    assert_eq!(out.status.code(), Some(EXIT_WRONG_SECRET));
    let typo = {
        let mut c: Vec<char> = rk.chars().collect();
        c[7] = if c[7] == 'X' { 'Y' } else { 'X' };
        c.into_iter().collect::<String>()
    };
    let out = run(
        args!["protector", "add", cipher, "passphrase", "--recovery-key"],
        format!("{typo}\nx\n").as_bytes(),
    );
    assert_eq!(out.status.code(), Some(EXIT_WRONG_SECRET));
    assert!(
        text(&out.stderr).contains("typo") && text(&out.stderr).contains("group 2"),
        "{}",
        text(&out.stderr)
    );
    assert_eq!(config(&cipher), before);

    // Removing needs a secret of a protector that stays.
    let out = run(
        args!["protector", "remove", cipher, "passphrase"],
        b"first\n",
    );
    assert!(
        !out.status.success() && text(&out.stderr).contains("unlock with one that stays"),
        "{}",
        text(&out.stderr)
    );
    ok(&run(
        args!["protector", "remove", cipher, "passphrase"],
        b"second\n",
    ));
    assert!(!passphrase_opens(&cipher, "first"));
    assert!(passphrase_opens(&cipher, "second"));
    ok(&run(
        args![
            "protector",
            "remove",
            cipher,
            "key-file",
            "--unlock-key-file",
            k2
        ],
        b"",
    ));
    let out = run(
        args![
            "protector",
            "remove",
            cipher,
            "recovery-key",
            "--unlock-key-file",
            k1
        ],
        b"",
    );
    assert_eq!(
        out.status.code(),
        Some(EXIT_WRONG_SECRET),
        "k1 was removed: {}",
        text(&out.stderr)
    );
    ok(&run(
        args![
            "protector",
            "remove",
            cipher,
            "recovery-key",
            "--recovery-key"
        ],
        format!("{rk2}\n").as_bytes(),
    ));
    let out = run(
        args!["protector", "remove", cipher, "laptop", "--recovery-key"],
        format!("{rk}\n").as_bytes(),
    );
    assert_eq!(out.status.code(), Some(EXIT_WRONG_SECRET), "rk was removed");
    ok(&run(
        args![
            "protector",
            "remove",
            cipher,
            "recovery-key-2",
            "--unlock-key-file",
            k2
        ],
        b"",
    ));
    ok(&run(
        args!["protector", "remove", cipher, "key-file-2"],
        b"second\n",
    ));
    // Only "laptop" is left: never removed.
    let before = config(&cipher);
    let out = run(args!["protector", "remove", cipher, "laptop"], b"second\n");
    assert!(!out.status.success());
    assert!(
        text(&out.stderr).contains("last protector"),
        "{}",
        text(&out.stderr)
    );
    assert_eq!(config(&cipher), before);
}

#[test]
fn v1_fixture_keeps_unlocking_after_passwd() {
    let t = TempDir::new("fixture");
    let cipher = t.join("v");
    std::fs::create_dir(&cipher).unwrap();
    std::fs::copy(
        format!("{FIXTURES}/vault-v1/fscrypt.vault.json"),
        cipher.join("fscrypt.vault.json"),
    )
    .unwrap();
    let key = format!("{FIXTURES}/vault-v1.key");
    let list = ok(&run(args!["protector", "list", cipher], b""));
    assert!(
        list.contains("passphrase") && list.contains("key-file"),
        "{list}"
    );
    ok(&run(
        args!["passwd", cipher],
        b"fscrypt-rs vault-v1 fixture\nrenewed\n",
    ));
    let after = text(&config(&cipher));
    assert!(after.contains("\"version\": 1,"), "{after}");
    assert!(passphrase_opens(&cipher, "renewed"));
    // The key file still opens it (a recovery key added with it).
    let out = ok(&run(
        args![
            "protector",
            "add",
            cipher,
            "recovery-key",
            "--unlock-key-file",
            key
        ],
        b"",
    ));
    recovery_key_in(&out);
}

// ---------------------------------------------------------------- mounting

/// Mounts with `extra` args and `stdin`, reads the file, unmounts.
fn read_through_mount(
    cipher: &Path,
    mnt: &Path,
    extra: &[&str],
    stdin: &[u8],
) -> Result<Vec<u8>, i32> {
    let mut a: Vec<&std::ffi::OsStr> = vec!["mount".as_ref(), cipher.as_os_str(), mnt.as_os_str()];
    a.extend(extra.iter().map(std::ffi::OsStr::new));
    let out = run(&a, stdin);
    if !out.status.success() {
        return Err(out.status.code().unwrap_or(-1));
    }
    let _guard = MountGuard::new(BIN, mnt);
    let data = std::fs::read(mnt.join("notes/plan.txt")).unwrap();
    ok(&run(args!["unmount", mnt], b""));
    Ok(data)
}

#[test]
fn each_protector_mounts_and_the_data_survives_every_change() {
    if !can_mount("each_protector_mounts_and_the_data_survives_every_change") {
        return;
    }
    let t = TempDir::new("mount");
    let cipher = t.sub("cipher");
    let mnt = t.sub("mnt");
    let rk = recovery_key_in(&ok(&run(args!["init", cipher], b"alpha\n")));
    const DATA: &[u8] = b"written before any protector change";
    {
        ok(&run(args!["mount", cipher, mnt], b"alpha\n"));
        let _guard = MountGuard::new(BIN, &mnt);
        std::fs::create_dir(mnt.join("notes")).unwrap();
        std::fs::write(mnt.join("notes/plan.txt"), DATA).unwrap();
        ok(&run(args!["unmount", mnt], b""));
    }
    let key = t.join("vault.key");
    let key_s = key.to_str().unwrap().to_owned();
    // The recovery key mounts (typed with dashes as shown).
    assert_eq!(
        read_through_mount(
            &cipher,
            &mnt,
            &["--recovery-key"],
            format!("{rk}\n").as_bytes()
        )
        .unwrap(),
        DATA
    );
    // Add a key file: it mounts.
    ok(&run(
        args![
            "protector",
            "add",
            cipher,
            "key-file",
            "--new-key-file",
            key
        ],
        b"alpha\n",
    ));
    assert_eq!(
        read_through_mount(&cipher, &mnt, &["--key-file", &key_s], b"").unwrap(),
        DATA
    );
    // passwd: the new passphrase mounts, the old one is refused.
    ok(&run(args!["passwd", cipher], b"alpha\nbeta\n"));
    assert_eq!(
        read_through_mount(&cipher, &mnt, &[], b"beta\n").unwrap(),
        DATA
    );
    assert_eq!(
        read_through_mount(&cipher, &mnt, &[], b"alpha\n"),
        Err(EXIT_WRONG_SECRET)
    );
    // Remove the recovery key: it no longer mounts (the vault has none left).
    ok(&run(
        args![
            "protector",
            "remove",
            cipher,
            "recovery-key",
            "--unlock-key-file",
            &key_s
        ],
        b"",
    ));
    let out = run(
        args!["mount", cipher, mnt, "--recovery-key"],
        format!("{rk}\n").as_bytes(),
    );
    assert!(!out.status.success() && !is_mounted(&mnt));
    assert!(
        text(&out.stderr).contains("no recovery key protector"),
        "{}",
        text(&out.stderr)
    );
    // Remove the passphrase: only the key file mounts now.
    ok(&run(
        args![
            "protector",
            "remove",
            cipher,
            "passphrase",
            "--unlock-key-file",
            &key_s
        ],
        b"",
    ));
    assert_eq!(
        read_through_mount(&cipher, &mnt, &["--key-file", &key_s], b"").unwrap(),
        DATA
    );
    let out = run(args!["mount", cipher, mnt], b"beta\n");
    assert!(!out.status.success());
    assert!(!is_mounted(&mnt));
}
