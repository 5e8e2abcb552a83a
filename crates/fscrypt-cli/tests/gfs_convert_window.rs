//! `fscrypt-rs encrypt DIR --convert`: what changes in `DIR` between the
//! verification and the end of the conversion (the review of issue 20),
//! made deterministic with the `FSCRYPT_RS_TEST_PAUSE_*` FIFO seams: a
//! write during the copy-in, a copy-in failing for want of space, another
//! user's file (not root), a directory's chmod.
//!
//! Skipped loudly without root or loop devices.

mod convert_common;

use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::Path;
use std::process::Stdio;
use test_support::run::assert_ok as ok;
use test_support::run::describe as text;

use convert_common::*;

/// `convert_new`'s command for `d`, run in the background with the given
/// `FSCRYPT_RS_TEST_PAUSE_*` seams (variable, FIFO).
fn spawn_paused(env: &Env, d: &Path, seams: &[(&str, &Path)]) -> std::process::Child {
    let key = env.key();
    let mut cmd = env.cmd(&[
        "encrypt",
        p(d),
        "--convert",
        "--source",
        "raw_key",
        "--name",
        "s",
        "--key",
        p(&key),
    ]);
    for (var, f) in seams {
        cmd.env(var, f);
    }
    cmd.stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

/// Review of issue 20: a file changed in the window is copied while DIR
/// is live; a user's write to its place in DIR during that copy (the
/// `FSCRYPT_RS_TEST_PAUSE_BEFORE_REPLACE` seam) is not replaced: the
/// plaintext is kept and named, DIR keeps the user's write.
#[test]
fn a_write_during_the_copy_in_is_not_replaced() {
    let Some(env) = Env::new("convert_copy_in_race", 64) else {
        return;
    };
    let d = env.mnt().join("race");
    std::fs::create_dir(&d).unwrap();
    std::fs::write(d.join("x"), "v1").unwrap();
    let (before, during) = (fifo(&env, "before"), fifo(&env, "during"));
    let mut child = spawn_paused(
        &env,
        &d,
        &[
            ("FSCRYPT_RS_TEST_PAUSE_BEFORE_SWAP", &before),
            ("FSCRYPT_RS_TEST_PAUSE_BEFORE_REPLACE", &during),
        ],
    );
    let w = paused(&mut child, &before);
    std::fs::write(d.join("x"), "v2 in the window").unwrap();
    drop(w);
    let w = paused(&mut child, &during);
    assert!(encrypted(&d));
    std::fs::write(d.join("x"), "v3 during the copy").unwrap();
    drop(w);
    let o = child.wait_with_output().unwrap();
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    assert!(
        String::from_utf8_lossy(&o.stderr).contains('x'),
        "{}",
        text(&o)
    );
    assert_eq!(std::fs::read(d.join("x")).unwrap(), b"v3 during the copy");
    let work = env.mnt().join(".race.fscrypt-convert");
    assert_eq!(
        std::fs::read(work.join("encrypted/x")).unwrap(),
        b"v2 in the window"
    );
    let names: Vec<_> = std::fs::read_dir(&d)
        .unwrap()
        .flatten()
        .map(|e| e.file_name())
        .collect();
    assert_eq!(names, ["x"], "no temporary copy left");
}

/// Names in `d` (sorted).
fn listing(d: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(d)
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    v.sort();
    v
}

/// Fills the file system of `env` (as root, reserved blocks too) up to
/// `free` bytes left, with the file `filler` outside the converted tree.
fn fill(filler: &Path, free: u64) {
    use std::io::Write;
    let mut f = std::fs::File::create(filler).unwrap();
    let chunk = vec![0x11u8; 1 << 20];
    while f.write_all(&chunk).and_then(|()| f.sync_all()).is_ok() {}
    let len = f.metadata().unwrap().len();
    f.set_len(len.saturating_sub(free)).unwrap();
    f.sync_all().unwrap();
}

/// Review of issue 20: an object copied in after the swap that fails
/// mid-copy (here ENOSPC: the disk filled in the window) leaves nothing
/// in DIR, neither part of it under its real name (a new file) nor the
/// temporary copy (a replaced file); once there is space again, a rerun
/// finishes with the whole file.
#[test]
fn a_failed_copy_in_leaves_nothing_in_dir() {
    for (case, new) in [("new", true), ("replaced", false)] {
        let Some(env) = Env::new(&format!("convert_copy_in_enospc_{case}"), 64) else {
            return;
        };
        let d = env.mnt().join("full");
        std::fs::create_dir(&d).unwrap();
        std::fs::write(d.join("small"), "s").unwrap();
        if !new {
            std::fs::write(d.join("big"), "v1").unwrap();
        }
        let before = fifo(&env, "before");
        let mut child = spawn_paused(&env, &d, &[("FSCRYPT_RS_TEST_PAUSE_BEFORE_SWAP", &before)]);
        let w = paused(&mut child, &before);
        let big: Vec<u8> = (0..8u32 << 20).map(|i| (i % 251) as u8).collect();
        std::fs::write(d.join("big"), &big).unwrap();
        let filler = env.mnt().join("filler");
        fill(&filler, 1 << 20);
        drop(w);
        let o = child.wait_with_output().unwrap();
        assert!(!o.status.success(), "{case}: {}", text(&o));
        assert!(encrypted(&d), "{case}");
        let want: &[&str] = if new { &["small"] } else { &["big", "small"] };
        assert_eq!(listing(&d), want, "{case}: {}", text(&o));
        if !new {
            assert_eq!(std::fs::read(d.join("big")).unwrap(), b"v1", "{case}");
        }
        std::fs::remove_file(&filler).unwrap();
        let key = env.key();
        let args = [
            "encrypt",
            p(&d),
            "--convert",
            "--protector",
            &env.protector(),
            "--key",
            p(&key),
        ];
        ok(&env.rs(&args), &format!("{case}: rerun with space"));
        assert!(std::fs::read(d.join("big")).unwrap() == big, "{case}");
        assert!(!env.mnt().join(".full.fscrypt-convert").exists(), "{case}");
    }
}

/// Review of issue 20: run by a user other than root, another user's
/// file created in DIR in the window cannot be given its owner by the
/// copy (chown: EPERM): it is kept and named (exit 1), not an error every
/// rerun repeats; once it is moved away, a rerun finishes.
#[test]
fn another_users_file_in_the_window_is_kept_when_not_root() {
    let test = "convert_window_not_owner";
    if !test_support::skip::setpriv_available(test) {
        return;
    }
    let Some(env) = Env::new(test, 64) else {
        return;
    };
    use test_support::users::NOBODY;
    let (d, key) = env.nobody_home();
    let base = d.parent().unwrap().to_path_buf();
    let before = fifo(&env, "before");
    let run = |seam: bool| {
        let mut c = test_support::users::as_user(NOBODY, NOBODY, BIN);
        c.args(["encrypt", p(&d), "--convert"]);
        if seam {
            c.args(["--source", "raw_key", "--name", "n"])
                .env("FSCRYPT_RS_TEST_PAUSE_BEFORE_SWAP", &before);
        } else {
            c.args(["--protector", &env.protector()]);
        }
        c.args(["--key", p(&key)])
            .env("FSCRYPT_CONF", env.tmp.join("fscrypt.conf"))
            .env("FSCRYPT_ROOT_MNT", env.mnt())
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        c.spawn().unwrap()
    };
    let mut child = run(true);
    let w = paused(&mut child, &before);
    std::fs::write(d.join("roots"), "root's, written in the window").unwrap();
    drop(w);
    let o = child.wait_with_output().unwrap();
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("roots"),
        "{}",
        text(&o)
    );
    assert!(encrypted(&d));
    assert_eq!(listing(&d), ["mine"]);
    let kept = base.join(".home.fscrypt-convert/encrypted/roots");
    assert!(kept.exists());
    // A rerun keeps it again (exit 1, not an I/O error).
    let o = run(false).wait_with_output().unwrap();
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    std::fs::rename(&kept, env.mnt().join("roots.saved")).unwrap();
    let o = run(false).wait_with_output().unwrap();
    ok(&o, "rerun after moving it away");
    assert!(!base.join(".home.fscrypt-convert").exists());
}

/// Review of issue 20: a directory's own mode and owner changed in the
/// window (`chmod 700`, `chown`, on a subdirectory and on DIR itself)
/// are given to the encrypted directory, not lost.
#[test]
fn a_directory_chmod_in_the_window_is_kept() {
    let Some(env) = Env::new("convert_window_dir_mode", 64) else {
        return;
    };
    let d = env.mnt().join("modes");
    std::fs::create_dir_all(d.join("sub")).unwrap();
    std::fs::write(d.join("sub/f"), "f").unwrap();
    std::fs::set_permissions(d.join("sub"), PermissionsExt::from_mode(0o755)).unwrap();
    std::fs::set_permissions(&d, PermissionsExt::from_mode(0o755)).unwrap();
    let before = fifo(&env, "before");
    let mut child = spawn_paused(&env, &d, &[("FSCRYPT_RS_TEST_PAUSE_BEFORE_SWAP", &before)]);
    let w = paused(&mut child, &before);
    std::fs::set_permissions(d.join("sub"), PermissionsExt::from_mode(0o700)).unwrap();
    chown(&d.join("sub"), 1234, 4321);
    std::fs::set_permissions(&d, PermissionsExt::from_mode(0o750)).unwrap();
    drop(w);
    let o = child.wait_with_output().unwrap();
    ok(&o, "convert");
    assert!(encrypted(&d));
    let sub = std::fs::symlink_metadata(d.join("sub")).unwrap();
    assert_eq!(sub.mode() & 0o7777, 0o700);
    assert_eq!((sub.uid(), sub.gid()), (1234, 4321));
    assert_eq!(
        std::fs::symlink_metadata(&d).unwrap().mode() & 0o7777,
        0o750
    );
    assert_eq!(std::fs::read(d.join("sub/f")).unwrap(), b"f");
    assert!(!env.mnt().join(".modes.fscrypt-convert").exists());
}
