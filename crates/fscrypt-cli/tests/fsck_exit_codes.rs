//! `fscrypt-rs fsck`: exit statuses when it cannot run, the refusals to
//! repair a vault in use (vault lock held, real mount), and unlocking with
//! a passphrase on stdin. The vault is made as in `fsck.rs` (shared in
//! `fsck_common/mod.rs`).

mod fsck_common;

use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use fsck_common::*;

#[test]
fn exit_codes_for_what_cannot_run() {
    let v = V::new("exit");
    // Not a vault.
    let out = run(&["fsck".as_ref(), v._tmp.0.as_os_str(), "--no-key".as_ref()]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out.stderr));
    assert!(text(&out.stderr).contains("not a vault"));
    // Bad arguments.
    let out = run(&[
        "fsck".as_ref(),
        v.cipher.as_os_str(),
        "--no-key".as_ref(),
        "--key-file".as_ref(),
        "x".as_ref(),
    ]);
    assert_eq!(out.status.code(), Some(2));
    // A wrong key file: 12, as mount.
    let wrong = v._tmp.0.join("wrong");
    std::fs::write(&wrong, [7u8; 64]).unwrap();
    let out = run(&[
        "fsck".as_ref(),
        v.cipher.as_os_str(),
        "--key-file".as_ref(),
        wrong.as_os_str(),
    ]);
    assert_eq!(out.status.code(), Some(12), "{}", text(&out.stderr));
}

#[test]
fn repair_refused_while_the_vault_lock_is_held() {
    // The mount daemon holds an exclusive flock on the backing root.
    let v = V::new("locked");
    std::fs::write(v.cipher.join("fscrypt.tmp.CCCCCCCCCCCCCCCC"), b"").unwrap();
    let root = std::fs::File::open(&v.cipher).unwrap();
    rustix::fs::flock(&root, rustix::fs::FlockOperation::NonBlockingLockExclusive).unwrap();
    let out = v.fsck(true, &["--repair"]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out.stdout));
    assert!(
        text(&out.stderr).contains("is mounted"),
        "{}",
        text(&out.stderr)
    );
    assert!(v.cipher.join("fscrypt.tmp.CCCCCCCCCCCCCCCC").exists());
    // A check still runs, with a warning.
    let out = v.fsck(false, &[]);
    assert_eq!(out.status.code(), Some(1));
    assert!(text(&out.stderr).contains("is mounted"));
    drop(root);
    assert_eq!(v.fsck(false, &["--repair"]).status.code(), Some(0));
}

fn is_mounted(path: &Path) -> bool {
    fscrypt_linux::mountinfo::mounts_at(path).unwrap_or(0) > 0
}

/// Unmounts on drop, also when the test fails.
struct MountGuard(PathBuf);

impl Drop for MountGuard {
    fn drop(&mut self) {
        if is_mounted(&self.0) {
            let _ = Command::new(BIN).arg("unmount").arg(&self.0).status();
        }
        if is_mounted(&self.0) {
            let _ = Command::new("umount").arg("-l").arg(&self.0).status();
        }
    }
}

#[test]
fn repair_refused_on_a_real_mount() {
    if !rustix::process::geteuid().is_root() || !Path::new("/dev/fuse").exists() {
        eprintln!("SKIPPED: repair_refused_on_a_real_mount needs root and /dev/fuse");
        return;
    }
    let v = V::new("mounted");
    let mnt = v._tmp.0.join("mnt");
    std::fs::create_dir(&mnt).unwrap();
    let out = run(&[
        "mount".as_ref(),
        v.cipher.as_os_str(),
        mnt.as_os_str(),
        "--key-file".as_ref(),
        v.key.as_os_str(),
    ]);
    let _guard = MountGuard(mnt.clone());
    assert!(out.status.success(), "mount: {}", text(&out.stderr));
    std::fs::write(v.cipher.join("fscrypt.tmp.DDDDDDDDDDDDDDDD"), b"").unwrap();
    let out = v.fsck(true, &["--repair"]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out.stdout));
    assert!(
        text(&out.stderr).contains("is mounted"),
        "{}",
        text(&out.stderr)
    );
    assert!(v.cipher.join("fscrypt.tmp.DDDDDDDDDDDDDDDD").exists());
    // Refused before a secret is asked for (issue 26 item 5): no key
    // option and an empty stdin still give "is mounted".
    let out = run(&["fsck".as_ref(), v.cipher.as_os_str(), "--repair".as_ref()]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out.stderr));
    assert!(
        text(&out.stderr).contains("is mounted"),
        "{}",
        text(&out.stderr)
    );
    // A check runs, warns, and does not report the marker the mount removed.
    let (code, r) = v.report(true, &[]);
    assert_eq!(code, 1);
    assert_eq!(r["mounted"], true);
    let p = problems(&v, &r);
    assert_eq!(p.len(), 1, "{p:?}");
    assert_eq!(p[0].0, "temporary");
    drop(_guard);
    assert!(!is_mounted(&mnt));
    let out = v.fsck(true, &["--repair"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stdout));
}

/// Runs the binary with cheap Argon2id costs and `stdin` piped in.
fn run_stdin(args: &[&OsStr], stdin: &[u8]) -> Output {
    use std::io::Write;
    let mut child = Command::new(BIN)
        .args(args)
        .env("FSCRYPT_RS_INSECURE_ARGON2_PARAMS", "m=64,t=1,p=1")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let _ = child.stdin.take().unwrap().write_all(stdin);
    child.wait_with_output().unwrap()
}

#[test]
fn passphrase_unlocks_and_a_wrong_one_exits_12() {
    let tmp = TempDir::new("pass");
    let cipher = tmp.0.join("cipher");
    std::fs::create_dir(&cipher).unwrap();
    let out = run_stdin(&["init".as_ref(), cipher.as_os_str()], b"correct horse\n");
    assert!(out.status.success(), "init: {}", text(&out.stderr));
    let out = run_stdin(&["fsck".as_ref(), cipher.as_os_str()], b"correct horse\n");
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert!(
        text(&out.stdout).contains("(with the key)"),
        "{}",
        text(&out.stdout)
    );
    let out = run_stdin(&["fsck".as_ref(), cipher.as_os_str()], b"wrong\n");
    assert_eq!(out.status.code(), Some(12), "{}", text(&out.stderr));
}

/// `fsck` of a vault the caller may not read: one line, "Permission
/// denied" once (the cause is not repeated after its context), exit 2.
#[test]
fn another_users_vault_is_refused_in_one_line() {
    if !test_support::is_root() {
        eprintln!(
            "\n*** SKIPPING another_users_vault_is_refused_in_one_line: needs root (to run as nobody) ***\n"
        );
        return;
    }
    let v = V::new("other-user");
    let out = test_support::run::output(
        test_support::users::as_user(
            test_support::users::NOBODY,
            test_support::users::NOBODY,
            BIN,
        )
        .args(["fsck".as_ref(), v.cipher.as_os_str(), "--no-key".as_ref()]),
        b"",
    );
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert_eq!(err.matches("Permission denied").count(), 1, "{err}");
    assert_eq!(err.trim().lines().count(), 1, "{err}");
}
