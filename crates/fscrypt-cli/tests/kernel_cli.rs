//! The kernel-fscrypt subcommands of the `fscrypt-rs` binary against the real
//! kernel, on scratch loop-device ext4 filesystems (issue 4).
//!
//! Without root or loop devices every test prints why and returns.

use std::path::Path;
use std::process::{Command, Output, Stdio};

use test_support::TempDir;
use test_support::loopdev::{MKFS_4K, flip_byte, physical_block, scratch_ext4};
use test_support::loopfs::LoopExt4;
use test_support::skip::setpriv_available;
use test_support::users::as_user;

const BIN: &str = env!("CARGO_BIN_EXE_fscrypt-rs");

fn scratch(test: &str, size_mib: u64) -> Option<LoopExt4> {
    scratch_ext4(test, size_mib, MKFS_4K)
}

/// Run the binary with `stdin` bytes (None: nothing).
fn run(args: &[&str], stdin: Option<&[u8]>) -> Output {
    test_support::run::output(Command::new(BIN).args(args), stdin.unwrap_or_default())
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).trim().to_string()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).trim().to_string()
}

fn key64(seed: u8) -> Vec<u8> {
    (0..64u8)
        .map(|i| i.wrapping_mul(31).wrapping_add(seed))
        .collect()
}

fn p(path: &Path) -> &str {
    path.to_str().expect("utf-8 path")
}

#[test]
fn cli_keys_policies_status() {
    let Some(fs) = scratch("cli_keys_policies_status", 16) else {
        return;
    };
    let mnt = p(fs.mount_point());

    // add-key from stdin prints the identifier (fscryptctl's known answer).
    let mut k = vec![b'a'; 32];
    k.extend_from_slice(&[b'1'; 32]);
    let o = run(&["add-key", mnt], Some(&k));
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(stdout(&o), "912ae510a458723a839a9fad701538ac");
    // --key-file and --json.
    let kf = fs.mount_point().join("keyfile");
    std::fs::write(&kf, b"abcdefghijklmnop").expect("key file");
    let o = run(&["add-key", mnt, "--key-file", p(&kf), "--json"], None);
    assert!(o.status.success(), "{}", stderr(&o));
    let v: serde_json::Value = serde_json::from_str(&stdout(&o)).expect("json");
    assert_eq!(v["identifier"], "7eb80af3f24ef086726a4cea3a154ce0");
    // 15- and 65-byte keys: refused before the ioctl, one-line reason.
    for len in [15usize, 65] {
        let o = run(&["add-key", mnt], Some(&vec![1u8; len]));
        assert!(!o.status.success());
        let e = stderr(&o);
        assert!(
            e.contains(&format!("the key is {len} bytes")) && e.lines().count() == 1,
            "{e}"
        );
    }
    // --json also reports errors that happen before any ioctl.
    let o = run(
        &["add-key", mnt, "--key-file", "/nonexistent/key", "--json"],
        None,
    );
    assert_eq!(o.status.code(), Some(1));
    let v: serde_json::Value = serde_json::from_str(&stdout(&o)).expect("json error");
    assert_eq!(v["ok"], false);
    assert!(stderr(&o).contains("/nonexistent/key"), "{}", stderr(&o));
    // Empty stdin (not a terminal): refused, no prompt.
    let o = run(&["add-key", mnt], None);
    assert!(!o.status.success());
    assert!(stderr(&o).contains("the key is 0 bytes"), "{}", stderr(&o));

    // key-status.
    let id = "912ae510a458723a839a9fad701538ac";
    let o = run(&["key-status", id, mnt], None);
    assert!(o.status.success());
    assert!(stdout(&o).starts_with("Present"), "{}", stdout(&o));
    let o = run(&["key-status", id, mnt, "--json"], None);
    let v: serde_json::Value = serde_json::from_str(&stdout(&o)).expect("json");
    assert_eq!(v["status"], "present");
    assert_eq!(v["user_count"], 1);

    // set-policy defaults, get-policy, nonce, status.
    let d = fs.mount_point().join("enc");
    std::fs::create_dir(&d).expect("mkdir");
    let o = run(&["set-policy", id, p(&d)], None);
    assert!(o.status.success(), "{}", stderr(&o));
    let o = run(&["get-policy", p(&d), "--json"], None);
    assert!(o.status.success(), "{}", stderr(&o));
    let v: serde_json::Value = serde_json::from_str(&stdout(&o)).expect("json");
    assert_eq!(v["version"], 2);
    assert_eq!(v["contents_mode"], "AES-256-XTS");
    assert_eq!(v["filenames_mode"], "AES-256-CTS-CBC");
    assert_eq!(v["padding"], 32);
    assert_eq!(v["master_key_identifier"], id);
    let o = run(&["get-policy", p(&d)], None);
    assert!(stdout(&o).contains("Master key identifier: 912ae510a458723a839a9fad701538ac"));
    let o = run(&["nonce", p(&d)], None);
    assert!(o.status.success());
    assert_eq!(stdout(&o).len(), 32);
    let o = run(&["status", p(&d), "--json"], None);
    assert!(o.status.success(), "{}", stderr(&o));
    let v: serde_json::Value = serde_json::from_str(&stdout(&o)).expect("json");
    assert_eq!(v["encrypted"], true);
    assert_eq!(v["key_status"], "present");
    assert_eq!(v["encryption_supported"], true);
    assert_eq!(v["ext4_stable_inodes"], true);
    let o = run(&["status", mnt], None);
    assert!(
        stdout(&o).contains("Encryption supported: yes"),
        "{}",
        stdout(&o)
    );

    // Flags and modes; the kernel's refusals as one-line reasons.
    for (dir, extra, ok) in [
        ("f64", vec!["--iv-ino-lblk-64"], true),
        ("f32", vec!["--iv-ino-lblk-32", "--padding", "16"], true),
        ("du", vec!["--data-unit-size", "512"], true),
        (
            "essiv",
            vec![
                "--contents",
                "AES-128-CBC-ESSIV",
                "--filenames",
                "AES-128-CTS",
            ],
            true,
        ),
        ("bad-dk", vec!["--direct-key"], false),
        ("bad-pair", vec!["--filenames", "AES-128-CTS"], false),
        (
            "bad-both",
            vec!["--iv-ino-lblk-64", "--iv-ino-lblk-32"],
            false,
        ),
    ] {
        let dd = fs.mount_point().join(dir);
        std::fs::create_dir(&dd).expect("mkdir");
        let mut args = vec!["set-policy", id, p(&dd)];
        args.extend(extra.iter().copied());
        let o = run(&args, None);
        assert_eq!(o.status.success(), ok, "{dir}: {}", stderr(&o));
        if !ok {
            let e = stderr(&o);
            assert!(
                e.contains("rejected the policy v2") && e.lines().count() == 1,
                "{e}"
            );
        }
    }
    // EEXIST and ENOTEMPTY.
    let o = run(&["set-policy", id, p(&d), "--padding", "8"], None);
    assert!(!o.status.success());
    assert!(stderr(&o).contains("different policy"), "{}", stderr(&o));
    std::fs::write(fs.mount_point().join("f64/file"), b"x").expect("write");
    let ne = fs.mount_point().join("plain");
    std::fs::create_dir(&ne).expect("mkdir");
    std::fs::write(ne.join("x"), b"x").expect("write");
    let o = run(&["set-policy", id, p(&ne), "--json"], None);
    assert!(!o.status.success());
    let v: serde_json::Value = serde_json::from_str(&stdout(&o)).expect("json");
    assert_eq!(v["error"], "directory_not_empty");

    // v1 policy with a descriptor key (root).
    let o = run(
        &["add-key", mnt, "--descriptor", "0011223344556677"],
        Some(&key64(3)),
    );
    assert!(o.status.success(), "{}", stderr(&o));
    let v1 = fs.mount_point().join("v1");
    std::fs::create_dir(&v1).expect("mkdir");
    let o = run(&["set-policy", "0011223344556677", p(&v1), "--v1"], None);
    assert!(o.status.success(), "{}", stderr(&o));
    let o = run(&["get-policy", p(&v1), "--json"], None);
    let v: serde_json::Value = serde_json::from_str(&stdout(&o)).expect("json");
    assert_eq!(v["version"], 1);
    assert_eq!(v["master_key_descriptor"], "0011223344556677");

    // Hardware-wrapped keys: clear refusals on this machine.
    let o = run(&["add-key", mnt, "--hw-wrapped"], Some(&[5u8; 100]));
    assert!(!o.status.success());
    eprintln!("add-key --hw-wrapped: {}", stderr(&o));
    let o = run(&["add-key", mnt, "--hw-wrapped"], Some(&[5u8; 129]));
    assert!(
        stderr(&o).contains("the key is 129 bytes"),
        "{}",
        stderr(&o)
    );
    let dev = p(fs.device());
    let o = run(&["generate-key", dev], None);
    assert!(!o.status.success());
    assert!(
        stderr(&o).contains("hardware-wrapped keys are not supported"),
        "{}",
        stderr(&o)
    );
    let o = run(&["import-key", dev], Some(&[1u8; 32]));
    assert!(
        stderr(&o).contains("hardware-wrapped keys are not supported"),
        "{}",
        stderr(&o)
    );
    let o = run(&["prepare-key", dev], Some(&[1u8; 64]));
    assert!(
        stderr(&o).contains("hardware-wrapped keys are not supported"),
        "{}",
        stderr(&o)
    );
}

#[test]
fn cli_remove_key_outcomes() {
    let Some(fs) = scratch("cli_remove_key_outcomes", 16) else {
        return;
    };
    let mnt = p(fs.mount_point());
    let key = key64(7);
    let id = stdout(&run(&["add-key", mnt], Some(&key)));
    let d = fs.mount_point().join("d");
    std::fs::create_dir(&d).expect("mkdir");
    assert!(run(&["set-policy", &id, p(&d)], None).status.success());
    std::fs::write(d.join("f"), b"data").expect("write");

    // Open file: "incompletely removed", exit 3; after closing: removed, 0.
    let f = std::fs::File::open(d.join("f")).expect("open");
    let o = run(&["remove-key", &id, mnt], None);
    assert_eq!(o.status.code(), Some(3), "{}", stderr(&o));
    assert!(stdout(&o).contains("removed, but files still open (incompletely removed)"));
    let o = run(&["key-status", &id, mnt, "--json"], None);
    let v: serde_json::Value = serde_json::from_str(&stdout(&o)).expect("json");
    assert_eq!(v["status"], "incompletely_removed");
    drop(f);
    let o = run(&["remove-key", &id, mnt], None);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(stdout(&o).ends_with(": removed"), "{}", stdout(&o));
    let o = run(&["key-status", &id, mnt], None);
    assert!(stdout(&o).starts_with("Absent"));
    // Removing again: ENOKEY as a one-line reason.
    let o = run(&["remove-key", &id, mnt], None);
    assert_eq!(o.status.code(), Some(1));
    assert!(stderr(&o).contains("not present"), "{}", stderr(&o));

    // Another user also holds the key: removing ours reports it, exit 4.
    if !setpriv_available("cli_remove_key_outcomes (the other-users part)") {
        return;
    }
    assert!(run(&["add-key", mnt], Some(&key)).status.success());
    let o = test_support::run::output(as_user(4242, 4242, BIN).args(["add-key", mnt]), &key);
    assert!(o.status.success(), "other user add-key: {}", stderr(&o));
    let o = run(&["remove-key", &id, mnt], None);
    assert_eq!(o.status.code(), Some(4), "{}", stderr(&o));
    assert!(
        stdout(&o).contains("other users still hold it"),
        "{}",
        stdout(&o)
    );
    let o = run(&["remove-key", &id, mnt, "--all-users"], None);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));

    // The kernel's ENOKEY and EACCES for an unprivileged user, as our
    // messages: setting a v2 policy whose key this user never added, and
    // adding a v1 (descriptor) key.
    assert!(run(&["add-key", mnt], Some(&key)).status.success());
    let ud = fs.mount_point().join("user-dir");
    std::fs::create_dir(&ud).expect("mkdir");
    rustix::fs::chown(
        &ud,
        Some(rustix::fs::Uid::from_raw(4242)),
        Some(rustix::fs::Gid::from_raw(4242)),
    )
    .expect("chown");
    let as_4242 = |args: &[&str], stdin: &[u8]| {
        test_support::run::output(as_user(4242, 4242, BIN).args(args), stdin)
    };
    let o = as_4242(&["set-policy", &id, p(&ud)], b"");
    assert_eq!(o.status.code(), Some(1));
    assert!(
        stderr(&o).contains("(ENOKEY)") && stderr(&o).contains("add-key"),
        "{}",
        stderr(&o)
    );
    let o = as_4242(&["add-key", mnt, "--descriptor", "1122334455667788"], &key);
    assert_eq!(o.status.code(), Some(1));
    assert!(
        stderr(&o).contains("permission denied (EACCES)"),
        "{}",
        stderr(&o)
    );
}

#[test]
fn cli_verify_ok_mismatch_and_speed() {
    let Some(fs) = scratch("cli_verify_ok_mismatch_and_speed", 128) else {
        return;
    };
    let mnt = p(fs.mount_point());
    let key = key64(9);
    let t = TempDir::new("kernel-cli-keys");
    let kf = t.join("key");
    std::fs::write(&kf, &key).expect("key file");
    let id = stdout(&run(&["add-key", mnt, "--key-file", p(&kf)], None));
    let d = fs.mount_point().join("tree");
    std::fs::create_dir(&d).expect("mkdir");
    assert!(
        run(&["set-policy", &id, p(&d), "--iv-ino-lblk-64"], None)
            .status
            .success()
    );
    std::fs::create_dir(d.join("sub")).expect("mkdir");
    std::os::unix::fs::symlink("../some/target", d.join("sub/link")).expect("symlink");
    std::fs::write(d.join("sub/small"), b"hello world").expect("write");
    // 32 MiB of file data for the speed figure.
    let big: Vec<u8> = (0..32u32 << 20)
        .map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8)
        .collect();
    std::fs::write(d.join("big"), &big).expect("write big");

    let o = run(&["verify", p(&d), "--key-file", p(&kf)], None);
    let out = stdout(&o);
    assert_eq!(o.status.code(), Some(0), "{out}\n{}", stderr(&o));
    assert!(
        out.contains("ok        file    ") && out.contains("ok        symlink "),
        "{out}"
    );
    let summary = out
        .lines()
        .find(|l| l.starts_with("verify: "))
        .expect("summary line");
    assert!(
        summary.contains("5 objects: 5 ok, 0 MISMATCH, 0 errors"),
        "{summary}"
    );
    eprintln!(
        "verify speed (fscrypt-rs verify {} --key-file F): {summary}",
        d.display()
    );
    let o = run(&["verify", p(&d), "--key-file", p(&kf), "--json"], None);
    let v: serde_json::Value = serde_json::from_str(&stdout(&o)).expect("json");
    assert_eq!(v["summary"]["ok"], 5);
    assert_eq!(v["summary"]["file_bytes"], (32u64 << 20) + 11);

    // A closed stdout (`verify | head -0`) is not a crash.
    let mut child = Command::new(BIN)
        .args(["verify", p(&d), "--key-file", p(&kf)])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn");
    drop(child.stdout.take());
    let o = child.wait_with_output().expect("wait");
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(!stderr(&o).contains("panicked"), "{}", stderr(&o));

    // A wrong kernel driver: right plaintext in the page cache, other
    // ciphertext on disk. Flip a byte of "sub/small" on the device.
    let _ = std::fs::read(d.join("sub/small")).expect("cache");
    let block = physical_block(fs.device(), &d.join("sub/small"), 0);
    flip_byte(fs.device(), block * 4096 + 3, 1);
    let o = run(&["verify", p(&d), "--key-file", p(&kf), "-q"], None);
    let out = stdout(&o);
    assert_eq!(o.status.code(), Some(3), "{out}");
    let bad: Vec<&str> = out.lines().filter(|l| l.starts_with("MISMATCH")).collect();
    assert_eq!(bad.len(), 1, "{out}");
    assert!(
        bad[0].contains("/sub/small") && bad[0].contains("first difference at byte 3"),
        "{out}"
    );

    // Wrong key file, and key not in the kernel: clear messages up front.
    let other = t.join("key2");
    std::fs::write(&other, key64(10)).expect("key file");
    let o = run(&["verify", p(&d), "--key-file", p(&other)], None);
    assert_eq!(o.status.code(), Some(1));
    assert!(
        stderr(&o).contains("but the key given has identifier"),
        "{}",
        stderr(&o)
    );
    assert!(run(&["remove-key", &id, mnt], None).status.success());
    let o = run(&["verify", p(&d), "--key-file", p(&kf)], None);
    assert_eq!(o.status.code(), Some(1));
    assert!(
        stderr(&o).contains("is not in the filesystem keyring; add it first"),
        "{}",
        stderr(&o)
    );

    // Not ext4: a clear message.
    if Path::new("/dev/shm").is_dir() {
        let o = run(&["verify", "/dev/shm", "--key-file", p(&kf)], None);
        assert!(!o.status.success());
        assert!(stderr(&o).contains("supports only ext4"), "{}", stderr(&o));
    }
}
