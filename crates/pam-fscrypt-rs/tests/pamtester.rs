//! The module driven by `pamtester` (scripts/setup.sh) through a PAM
//! service file written by the test (`/etc/pam.d/fsrs-test-<pid>`, removed
//! after, always), for a test user whose login protector and directory are
//! made by the real `fscrypt` on a loop ext4 (`FSCRYPT_ROOT_MNT`, and the
//! module's `root_mnt=`). Skipped loudly without root, loop devices,
//! `fscrypt` or `pamtester`.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::{Duration, Instant};
use test_support::run::describe as text;

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

/// A user whose login protector (made by google/fscrypt) protects a locked
/// directory with one file, on a scratch ext4 whose `.fscrypt` is
/// world-writable (01777, as `setup --all-users` makes it), and a second
/// user, the attacker.
struct Login {
    fs: test_support::loopfs::LoopExt4,
    tmp: TempDir,
    user: TestUser,
    attacker: TestUser,
    dir: PathBuf,
}

/// The user's login password in [`Login`].
const LOGIN_PW: &str = "Trust-Login-Pw-8";

impl Login {
    fn new(t: &str, tag: &str) -> Option<Login> {
        Login::with_policy_version(t, tag, 2)
    }

    /// [`Login::new`] with policies of `version` (1: keys in the
    /// filesystem keyring while google/fscrypt makes the directory).
    fn with_policy_version(t: &str, tag: &str, version: i64) -> Option<Login> {
        if !tool_available(t, "fscrypt", &["--version"], "fscrypt (scripts/setup.sh)")
            || !tool_available(t, "pamtester", &["-v"], "pamtester (scripts/setup.sh)")
            || !test_support::skip::setpriv_available(t)
        {
            return None;
        }
        assert!(module().is_file(), "{} not built", module().display());
        let fs = scratch_ext4(t, 32, MKFS_4K)?;
        let user = TestUser::new(t, &format!("u{tag}"), LOGIN_PW)?;
        let attacker = TestUser::new(t, &format!("x{tag}"), "attacker-pw")?;
        let _ = std::fs::remove_file(format!("/run/fscrypt-rs/{}.count", user.uid));
        let l = Login {
            dir: fs.mount_point().join("home"),
            fs,
            tmp: TempDir::new(t),
            user,
            attacker,
        };
        let o = l.gfs(&["setup", "--time=1ms", "--quiet"], b"");
        assert!(o.status.success(), "{}", text(&o));
        if version != 2 {
            l.edit_config(|c| {
                c.options.policy_version = version;
                c.use_fs_keyring_for_v1_policies = true;
            });
        }
        for d in ["policies", "protectors"] {
            let d = l.mnt().join(".fscrypt").join(d);
            std::fs::set_permissions(&d, std::os::unix::fs::PermissionsExt::from_mode(0o1777))
                .unwrap();
        }
        std::fs::create_dir(&l.dir).unwrap();
        std::os::unix::fs::chown(&l.dir, Some(l.user.uid), Some(l.user.uid)).unwrap();
        let ua = format!("--user={}", l.user.name);
        let o = l.gfs(
            &[
                "encrypt",
                p(&l.dir),
                "--source=pam_passphrase",
                &ua,
                "--quiet",
            ],
            format!("{LOGIN_PW}\n").as_bytes(),
        );
        assert!(o.status.success(), "{}", text(&o));
        std::fs::write(l.dir.join("f"), "secret").unwrap();
        let o = l.gfs(&["lock", p(&l.dir), &ua, "--quiet"], b"");
        assert!(o.status.success(), "{}", text(&o));
        assert!(!readable(&l.dir.join("f"), "secret"));
        Some(l)
    }

    fn mnt(&self) -> &Path {
        self.fs.mount_point()
    }

    fn conf(&self) -> PathBuf {
        self.tmp.join("fscrypt.conf")
    }

    fn gfs(&self, args: &[&str], stdin: &[u8]) -> Output {
        let mut c = Command::new("fscrypt");
        c.args(args)
            .env("FSCRYPT_CONF", self.conf())
            .env("FSCRYPT_ROOT_MNT", self.mnt());
        test_support::run::output(&mut c, stdin)
    }

    /// A service with the module for auth and session (`lock_policies`),
    /// reading the test's config (`config=`).
    fn service(&self, tag: &str) -> Service {
        let m = format!(
            "{} root_mnt={} config={}",
            module().display(),
            self.mnt().display(),
            self.conf().display()
        );
        Service::new(
            tag,
            &format!(
                "auth required pam_unix.so\nauth optional {m}\naccount required pam_permit.so\n\
                 session optional {m} lock_policies\n"
            ),
        )
    }

    /// pamtester `ops` with the login password, in `wrap` (a command
    /// prefix, e.g. a shell holding a stuck FUSE mount), killed (a test
    /// failure) after 30 s; and how long it took.
    fn login(&self, service: &Service, ops: &[&str], wrap: &[&str]) -> (Output, Duration) {
        let mut c = Command::new(wrap.first().copied().unwrap_or("pamtester"));
        if !wrap.is_empty() {
            c.args(&wrap[1..]).arg("pamtester");
        }
        c.arg(&service.name).arg(&self.user.name).args(ops);
        let t = Instant::now();
        let o = test_support::run::output_within(
            &mut c,
            format!("{LOGIN_PW}\n").as_bytes(),
            Duration::from_secs(30),
        );
        (o, t.elapsed())
    }

    fn set_cross_user(&self, allow: bool) {
        self.edit_config(|c| c.allow_cross_user_metadata = allow);
    }

    fn edit_config(&self, f: impl FnOnce(&mut fscrypt_metadata::config::Config)) {
        let text = std::fs::read_to_string(self.conf()).unwrap();
        let mut c = fscrypt_metadata::config::Config::parse(&text).unwrap();
        f(&mut c);
        std::fs::write(self.conf(), c.to_json()).unwrap();
    }

    /// The descriptor of the one policy on the filesystem.
    fn policy(&self) -> String {
        let names: Vec<String> = std::fs::read_dir(self.mnt().join(".fscrypt/policies"))
            .unwrap()
            .flatten()
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .collect();
        assert_eq!(names.len(), 1, "{names:?}");
        names[0].clone()
    }

    /// Whether the user's keyrings hold a key described by `descriptor`
    /// (`/proc/keys` as the user lists the keys the user may view: its
    /// user keyring's).
    fn in_user_keyring(&self, descriptor: &str) -> bool {
        let mut c = test_support::users::as_user(self.user.uid, self.user.uid, "cat");
        c.arg("/proc/keys");
        let o = test_support::run::output(&mut c, b"");
        assert!(o.status.success(), "{}", text(&o));
        String::from_utf8_lossy(&o.stdout)
            .lines()
            .any(|l| l.contains("logon") && l.contains(descriptor))
    }

    /// Whether the filesystem keyring holds the key of v1 `descriptor`.
    fn in_fs_keyring(&self, descriptor: &str) -> bool {
        use fscrypt_linux::keyring::{KeyPresence, KeySpec, key_status};
        let raw: [u8; 8] = hex::decode(descriptor).unwrap().try_into().unwrap();
        key_status(self.mnt(), KeySpec::Descriptor(fscrypt::KeyDescriptor(raw)))
            .unwrap()
            .presence
            == KeyPresence::Present
    }
}

impl Drop for Login {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(format!("/run/fscrypt-rs/{}.count", self.user.uid));
    }
}

fn p(path: &Path) -> &str {
    path.to_str().unwrap()
}

/// A login protector for `uid` that no password opens, with `time`
/// Argon2 passes (google/fscrypt's format allows up to 2^32).
fn fake_login_protector(uid: u32, time: i64) -> Vec<u8> {
    use fscrypt_metadata::proto::{self, HashingCosts, ProtectorData, SourceType, WrappedKeyData};
    proto::encode_protector(&ProtectorData {
        // Sorts before any real descriptor.
        protector_descriptor: "0000000000000000".into(),
        source: SourceType::PamPassphrase as i32,
        name: String::new(),
        costs: Some(HashingCosts {
            time,
            memory: 64,
            parallelism: 1,
            truncation_fixed: true,
        }),
        salt: vec![7; 16],
        uid: i64::from(uid),
        wrapped_key: Some(WrappedKeyData {
            iv: vec![1; 16],
            encrypted_key: vec![2; 32],
            hmac: vec![3; 32],
        }),
    })
}

#[test]
fn a_login_protector_planted_by_another_user_does_not_break_login() {
    let t = "pam_planted";
    let Some(l) = Login::new(t, "a") else {
        return;
    };
    let svc = l.service("planted");
    // The attacker plants a login protector for the user in the
    // world-writable directory: cheap costs, no password opens it.
    let planted = l.mnt().join(".fscrypt/protectors/0000000000000000");
    let mut c = test_support::users::as_user(l.attacker.uid, l.attacker.uid, "/bin/sh");
    c.args(["-c", "cat > \"$1\"", "sh"]).arg(&planted);
    let o = test_support::run::output(&mut c, &fake_login_protector(l.user.uid, 1));
    assert!(o.status.success(), "{}", text(&o));

    let (o, took) = l.login(&svc, &["authenticate", "open_session"], &[]);
    assert!(o.status.success(), "{}", text(&o));
    assert!(
        readable(&l.dir.join("f"), "secret"),
        "the planted protector was taken: not unlocked at login"
    );
    assert!(took < Duration::from_secs(10), "login took {took:?}");
    let (o, _) = l.login(&svc, &["close_session"], &[]);
    assert!(o.status.success(), "{}", text(&o));
    assert!(!readable(&l.dir.join("f"), "secret"));

    // With allow_cross_user_metadata the module considers it, as the CLI
    // does (tests/metadata_trust.rs in fscrypt-cli): it comes first and
    // does not open, so nothing is unlocked, and the login still succeeds.
    l.set_cross_user(true);
    let (o, _) = l.login(&svc, &["authenticate", "open_session"], &[]);
    assert!(o.status.success(), "{}", text(&o));
    assert!(!readable(&l.dir.join("f"), "secret"));
    let (o, _) = l.login(&svc, &["close_session"], &[]);
    assert!(o.status.success(), "{}", text(&o));

    // A planted protector with 2^31 passes, cross-user metadata allowed:
    // refused before hashing and skipped, so the login is quick and the
    // real protector unlocks.
    std::fs::remove_file(&planted).unwrap();
    let mut c = test_support::users::as_user(l.attacker.uid, l.attacker.uid, "/bin/sh");
    c.args(["-c", "cat > \"$1\"", "sh"]).arg(&planted);
    let o = test_support::run::output(&mut c, &fake_login_protector(l.user.uid, 1 << 31));
    assert!(o.status.success(), "{}", text(&o));
    let (o, took) = l.login(&svc, &["authenticate", "open_session"], &[]);
    assert!(o.status.success(), "{}", text(&o));
    assert!(took < Duration::from_secs(10), "login took {took:?}");
    assert!(readable(&l.dir.join("f"), "secret"));
    let (o, _) = l.login(&svc, &["close_session"], &[]);
    assert!(o.status.success(), "{}", text(&o));
}

#[test]
fn a_stopped_fuse_daemon_does_not_hang_login_or_logout() {
    let t = "pam_stuck_fuse";
    if !test_support::skip::fuse_available(t) {
        return;
    }
    let Some(l) = Login::new(t, "b") else {
        return;
    };
    let svc = l.service("fuse");
    let stuck = l.tmp.join("stuck");
    std::fs::create_dir(&stuck).unwrap();
    // A FUSE mount whose daemon never answers (as one stopped with
    // SIGSTOP): the shell holds the /dev/fuse descriptor and never reads
    // it. It lives in a private mount namespace (`unshare -m`), so only
    // this login sees it, and goes with the shell.
    let script = "exec 3<>/dev/fuse || exit 97\n\
                  mount -i -t fuse -o fd=3,rootmode=40000,user_id=0,group_id=0 fsrs-stuck \"$1\" \
                  || exit 98\n\
                  grep -q ' fsrs-stuck ' /proc/self/mountinfo || exit 99\n\
                  shift\n\
                  \"$@\" 3<&-\n";
    let wrap = ["unshare", "-m", "sh", "-c", script, "sh", p(&stuck)];
    let (o, took) = l.login(&svc, &["authenticate", "open_session"], &wrap);
    assert!(o.status.success(), "{}", text(&o));
    assert!(took < Duration::from_secs(10), "login took {took:?}");
    assert!(readable(&l.dir.join("f"), "secret"), "not unlocked");
    let (o, took) = l.login(&svc, &["close_session"], &wrap);
    assert!(o.status.success(), "{}", text(&o));
    assert!(took < Duration::from_secs(10), "logout took {took:?}");
    assert!(!readable(&l.dir.join("f"), "secret"), "not locked");
}

/// v1 keys go where the config's `use_fs_keyring_for_v1_policies` says, as
/// with the CLI (fscrypt-cli `gfs_interop.rs`,
/// `v1_policies_both_ways_with_the_{user,filesystem}_keyring`): false
/// (google/fscrypt's default), the user's user keyring; true, the
/// filesystem keyring. Logout removes it from there.
#[test]
fn v1_keys_go_where_use_fs_keyring_for_v1_policies_says() {
    let t = "pam_v1_keyring";
    let Some(l) = Login::with_policy_version(t, "c", 1) else {
        return;
    };
    let d = l.policy();
    assert_eq!(d.len(), 16, "not a v1 policy: {d}");
    let svc = l.service("v1");
    for fs_keyring in [false, true] {
        l.edit_config(|c| c.use_fs_keyring_for_v1_policies = fs_keyring);
        let (o, _) = l.login(&svc, &["authenticate", "open_session"], &[]);
        assert!(o.status.success(), "{}", text(&o));
        assert_eq!(
            l.in_fs_keyring(&d),
            fs_keyring,
            "use_fs_keyring_for_v1_policies: {fs_keyring}: filesystem keyring"
        );
        assert_eq!(
            l.in_user_keyring(&d),
            !fs_keyring,
            "use_fs_keyring_for_v1_policies: {fs_keyring}: user keyring"
        );
        if fs_keyring {
            assert!(readable(&l.dir.join("f"), "secret"));
        }
        let (o, _) = l.login(&svc, &["close_session"], &[]);
        assert!(o.status.success(), "{}", text(&o));
        // An unlinked key stays listed in /proc/keys until the kernel's key
        // garbage collector (asynchronous, security/keys/gc.c) has run.
        let gone = (0..50).any(|_| {
            let gone = !l.in_fs_keyring(&d) && !l.in_user_keyring(&d);
            if !gone {
                std::thread::sleep(Duration::from_millis(100));
            }
            gone
        });
        assert!(gone, "not locked: fs_keyring {fs_keyring}: {}", text(&o));
    }
}

/// The login filesystem's `protectors/` owned by another (non-root) user:
/// the login protector there is used only with
/// `allow_cross_user_metadata`, as the CLI does with a protector reached
/// through a link (fscrypt-cli `gfs_actions.rs`).
#[test]
fn a_login_filesystem_owned_by_another_user_is_used_only_with_cross_user_metadata() {
    let t = "pam_root_owner";
    let Some(l) = Login::new(t, "d") else {
        return;
    };
    let svc = l.service("owner");
    let prot = l.mnt().join(".fscrypt/protectors");
    std::os::unix::fs::chown(&prot, Some(l.attacker.uid), Some(l.attacker.uid)).unwrap();
    let (o, _) = l.login(&svc, &["authenticate", "open_session"], &[]);
    assert!(o.status.success(), "{}", text(&o));
    assert!(
        !readable(&l.dir.join("f"), "secret"),
        "a protector in another user's directory was used"
    );
    let (o, _) = l.login(&svc, &["close_session"], &[]);
    assert!(o.status.success(), "{}", text(&o));
    l.set_cross_user(true);
    let (o, _) = l.login(&svc, &["authenticate", "open_session"], &[]);
    assert!(o.status.success(), "{}", text(&o));
    assert!(readable(&l.dir.join("f"), "secret"));
    let (o, _) = l.login(&svc, &["close_session"], &[]);
    assert!(o.status.success(), "{}", text(&o));
    assert!(!readable(&l.dir.join("f"), "secret"));
}
