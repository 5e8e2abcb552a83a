//! The module driven by `pamtester` (scripts/setup.sh) through a PAM
//! service file written by the test (`/etc/pam.d/fsrs-test-<pid>`, removed
//! after, always), for a test user whose login protector and directory are
//! made by the real `fscrypt` on a loop ext4 (`FSCRYPT_ROOT_MNT`, and the
//! module's `root_mnt=`). Skipped loudly without root, loop devices,
//! `fscrypt` or `pamtester`.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use test_support::loopdev::{MKFS_4K, scratch_ext4};
use test_support::skip::tool_available;
use test_support::tempdir::TempDir;
use test_support::users::TestUser;

/// The module next to the test binary's target directory.
/// The module as `cargo test` builds it (beside this test binary in
/// `target/*/deps`; the lib is also an rlib only so that cargo builds it
/// for the tests), or as `cargo build` leaves it (in `target/*`).
fn module() -> PathBuf {
    let exe = std::env::current_exe().unwrap();
    let deps = exe.parent().unwrap();
    let so = deps.join("libpam_fscrypt_rs.so");
    if so.is_file() {
        return so;
    }
    deps.parent().unwrap().join("libpam_fscrypt_rs.so")
}

/// A PAM service file, removed on drop.
struct Service {
    name: String,
}

impl Service {
    fn new(tag: &str, text: &str) -> Service {
        let name = format!("fsrs-test-{tag}-{}", std::process::id());
        std::fs::write(Path::new("/etc/pam.d").join(&name), text).unwrap();
        Service { name }
    }
}

impl Drop for Service {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(Path::new("/etc/pam.d").join(&self.name));
    }
}

fn pamtester(service: &Service, user: &str, ops: &[&str], stdin: &[u8]) -> Output {
    let mut c = Command::new("pamtester");
    c.arg(&service.name).arg(user).args(ops);
    test_support::run::output(&mut c, stdin)
}

fn text(o: &Output) -> String {
    format!(
        "status {:?}\nstdout: {}\nstderr: {}",
        o.status.code(),
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

fn readable(f: &Path, want: &str) -> bool {
    std::fs::read_to_string(f).is_ok_and(|s| s == want)
}

#[test]
fn login_unlocks_logout_locks_password_change_rewraps() {
    let t = "pam_module";
    if !tool_available(t, "fscrypt", &["--version"], "fscrypt (scripts/setup.sh)")
        || !tool_available(t, "pamtester", &["-v"], "pamtester (scripts/setup.sh)")
    {
        return;
    }
    let so = module();
    assert!(so.is_file(), "{} not built", so.display());
    let Some(fs) = scratch_ext4(t, 32, MKFS_4K) else {
        return;
    };
    let Some(user) = TestUser::new(t, "p", "Old-Login-Pw-31") else {
        return;
    };
    // A session count left by an earlier failed run (same uid) would make
    // close_session think another session is still open.
    let count = format!("/run/fscrypt-rs/{}.count", user.uid);
    let _ = std::fs::remove_file(&count);
    let tmp = TempDir::new(t);
    let mnt = fs.mount_point();
    let gfs = |args: &[&str], stdin: &[u8]| {
        let mut c = Command::new("fscrypt");
        c.args(args)
            .env("FSCRYPT_CONF", tmp.join("fscrypt.conf"))
            .env("FSCRYPT_ROOT_MNT", mnt);
        test_support::run::output(&mut c, stdin)
    };
    let o = gfs(&["setup", "--time=1ms", "--quiet"], b"");
    assert!(o.status.success(), "{}", text(&o));
    let dir = mnt.join("home");
    std::fs::create_dir(&dir).unwrap();
    std::os::unix::fs::chown(&dir, Some(user.uid), Some(user.uid)).unwrap();
    let ua = format!("--user={}", user.name);
    let o = gfs(
        &[
            "encrypt",
            dir.to_str().unwrap(),
            "--source=pam_passphrase",
            &ua,
            "--quiet",
        ],
        b"Old-Login-Pw-31\n",
    );
    assert!(o.status.success(), "{}", text(&o));
    std::fs::write(dir.join("f"), "secret").unwrap();
    let o = gfs(&["lock", dir.to_str().unwrap(), &ua, "--quiet"], b"");
    assert!(o.status.success(), "{}", text(&o));
    assert!(!readable(&dir.join("f"), "secret"));

    let m = format!("{} root_mnt={}", so.display(), mnt.display());
    let strict = Service::new(
        "s",
        &format!(
            "auth required pam_unix.so\nauth optional {m}\naccount required pam_permit.so\n\
             session optional {m} lock_policies\npassword required pam_unix.so\n\
             password optional {m}\n"
        ),
    );
    // Wrong password: pam_unix refuses; nothing unlocked.
    let o = pamtester(
        &strict,
        &user.name,
        &["authenticate", "open_session"],
        b"wrong\n",
    );
    assert!(!o.status.success(), "{}", text(&o));
    assert!(!readable(&dir.join("f"), "secret"));
    // A wrong password that gets through (pam_unix optional): the session
    // opens (the module never aborts a login), still locked.
    let lax = Service::new(
        "l",
        &format!(
            "auth optional pam_unix.so\nauth optional {m}\nauth required pam_permit.so\n\
             account required pam_permit.so\nsession optional {m}\n"
        ),
    );
    let o = pamtester(
        &lax,
        &user.name,
        &["authenticate", "open_session", "close_session"],
        b"wrong\n",
    );
    assert!(o.status.success(), "{}", text(&o));
    assert!(!readable(&dir.join("f"), "secret"));
    // Right password: unlocked at open_session, locked at close_session.
    let o = pamtester(
        &strict,
        &user.name,
        &["authenticate", "open_session"],
        b"Old-Login-Pw-31\n",
    );
    assert!(o.status.success(), "{}", text(&o));
    assert!(
        readable(&dir.join("f"), "secret"),
        "not unlocked at open_session"
    );
    let o = pamtester(&strict, &user.name, &["close_session"], b"");
    assert!(o.status.success(), "{}", text(&o));
    assert!(
        !readable(&dir.join("f"), "secret"),
        "not locked at close_session"
    );

    // The key added at login is the user's (added with the user's fsuid,
    // as google/fscrypt's module does): the user locks it without root.
    let o = pamtester(
        &strict,
        &user.name,
        &["authenticate", "open_session"],
        b"Old-Login-Pw-31\n",
    );
    assert!(o.status.success(), "{}", text(&o));
    assert!(readable(&dir.join("f"), "secret"));
    let mut c = test_support::users::as_user(user.uid, user.uid, "fscrypt");
    c.args(["lock", dir.to_str().unwrap(), "--quiet"])
        .env("FSCRYPT_CONF", tmp.join("fscrypt.conf"))
        .env("FSCRYPT_ROOT_MNT", mnt);
    let o = test_support::run::output(&mut c, b"");
    assert!(o.status.success(), "the user could not lock: {}", text(&o));
    assert!(!readable(&dir.join("f"), "secret"));
    let o = pamtester(&strict, &user.name, &["close_session"], b"");
    assert!(o.status.success(), "{}", text(&o));

    // Password change through PAM: the login protector is re-wrapped; the
    // new password unlocks (module and fscrypt), the old one no longer.
    let o = pamtester(
        &strict,
        &user.name,
        &["chauthtok(PAM_CHANGE_EXPIRED_AUTHTOK)"],
        b"Old-Login-Pw-31\nNew-Login-Pw-47x\nNew-Login-Pw-47x\n",
    );
    assert!(o.status.success(), "{}", text(&o));
    let o = pamtester(
        &strict,
        &user.name,
        &["authenticate", "open_session"],
        b"New-Login-Pw-47x\n",
    );
    assert!(o.status.success(), "{}", text(&o));
    assert!(
        readable(&dir.join("f"), "secret"),
        "new password did not unlock"
    );
    let o = pamtester(&strict, &user.name, &["close_session"], b"");
    assert!(o.status.success(), "{}", text(&o));
    assert!(!readable(&dir.join("f"), "secret"));
    let o = gfs(
        &["unlock", dir.to_str().unwrap(), &ua, "--quiet"],
        b"Old-Login-Pw-31\n",
    );
    assert!(
        !o.status.success(),
        "fscrypt took the old password: {}",
        text(&o)
    );
    let o = gfs(
        &["unlock", dir.to_str().unwrap(), &ua, "--quiet"],
        b"New-Login-Pw-47x\n",
    );
    assert!(o.status.success(), "{}", text(&o));
    assert!(readable(&dir.join("f"), "secret"));
    let _ = std::fs::remove_file(&count);
}
