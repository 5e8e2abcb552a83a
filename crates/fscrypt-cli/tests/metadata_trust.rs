//! Other users' google/fscrypt metadata (issue 20 items 1 and 4): with the
//! world-writable `.fscrypt` layout (`setup --all-users`) any local user can
//! plant files beside yours. A planted login protector, a protector with
//! ruinous Argon2 costs or a flood of corrupt policies must not change what
//! another user's `encrypt --source pam_passphrase`, `unlock` or
//! `metadata dump` does, nor how long it takes; a `.fscrypt` owned by
//! another user is refused. As google/fscrypt after CVE-2022-25326/7/8.
//!
//! Each test makes a loop ext4 (`FSCRYPT_ROOT_MNT`) and a config in its
//! temp dir (`FSCRYPT_CONF`), and local test users (`useradd`); skipped
//! loudly without root, loop devices, `setpriv` or `useradd`.

use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::{Duration, Instant};
use test_support::run::assert_ok as ok;
use test_support::run::describe as text;

use fscrypt_metadata::proto::{self, HashingCosts, ProtectorData, SourceType, WrappedKeyData};
use test_support::loopdev::{MKFS_4K, scratch_ext4};
use test_support::loopfs::LoopExt4;
use test_support::tempdir::TempDir;
use test_support::users::{TestUser, as_user};

const BIN: &str = env!("CARGO_BIN_EXE_fscrypt-rs");

/// Sorts before any real descriptor, so a search that stops at the first
/// match (the old code) takes it.
const PLANTED: &str = "0000000000000000";

/// A scratch ext4 set up world-writable by root, and two users: the victim
/// (with a login password) and the attacker.
struct Env {
    fs: LoopExt4,
    tmp: TempDir,
    victim: TestUser,
    attacker: TestUser,
}

impl Env {
    /// `tag`: one letter per test (the test users are named by tag and
    /// process id, and the tests of this file run in parallel).
    fn new(test: &str, tag: &str) -> Option<Env> {
        if !test_support::skip::setpriv_available(test) {
            return None;
        }
        let fs = scratch_ext4(test, 32, MKFS_4K)?;
        let victim = TestUser::new(test, &format!("v{tag}"), "victim-login-pw")?;
        let attacker = TestUser::new(test, &format!("x{tag}"), "attacker-pw")?;
        let env = Env {
            fs,
            tmp: TempDir::new(test),
            victim,
            attacker,
        };
        ok(
            &env.rs(&["setup", "--time", "0.001", "--all-users"], b""),
            "setup",
        );
        let prot = env.mnt().join(".fscrypt/protectors");
        assert_eq!(std::fs::metadata(&prot).unwrap().mode() & 0o7777, 0o1777);
        Some(env)
    }

    fn mnt(&self) -> &Path {
        self.fs.mount_point()
    }

    fn env(&self, c: &mut Command) {
        c.env("FSCRYPT_CONF", self.tmp.join("fscrypt.conf"))
            .env("FSCRYPT_ROOT_MNT", self.mnt());
    }

    /// `fscrypt-rs` as root.
    fn rs(&self, args: &[&str], stdin: &[u8]) -> Output {
        let mut c = Command::new(BIN);
        c.args(args);
        self.env(&mut c);
        test_support::run::output(&mut c, stdin)
    }

    /// `fscrypt-rs` as `uid`, killed (test failure) after `limit`.
    fn rs_as(&self, uid: u32, args: &[&str], stdin: &[u8], limit: Duration) -> Output {
        let mut c = as_user(uid, uid, BIN);
        c.args(args);
        self.env(&mut c);
        test_support::run::output_within(&mut c, stdin, limit)
    }

    /// Writes `bytes` to `path` as the attacker (so the file is theirs,
    /// as in the sticky world-writable directories).
    fn plant(&self, path: &Path, bytes: &[u8]) {
        let mut c = as_user(self.attacker.uid, self.attacker.uid, "/bin/sh");
        c.args(["-c", "cat > \"$1\"", "sh"]).arg(path);
        ok(&test_support::run::output(&mut c, bytes), "plant");
        assert_eq!(std::fs::metadata(path).unwrap().uid(), self.attacker.uid);
    }

    /// A new directory owned by the victim, encrypted by root with the
    /// victim's login protector (created the first time).
    fn login_dir(&self, name: &str) -> (PathBuf, serde_json::Value) {
        let d = self.mnt().join(name);
        std::fs::create_dir(&d).unwrap();
        std::os::unix::fs::chown(&d, Some(self.victim.uid), Some(self.victim.uid)).unwrap();
        let user = format!("--user={}", self.victim.name);
        let o = self.rs(
            &[
                "encrypt",
                p(&d),
                "--source",
                "pam_passphrase",
                &user,
                "--json",
            ],
            b"victim-login-pw\n",
        );
        ok(&o, "encrypt --source pam_passphrase");
        (d, serde_json::from_slice(&o.stdout).unwrap())
    }

    fn set_cross_user(&self, allow: bool) {
        let path = self.tmp.join("fscrypt.conf");
        let mut c =
            fscrypt_metadata::config::Config::parse(&std::fs::read_to_string(&path).unwrap())
                .unwrap();
        c.allow_cross_user_metadata = allow;
        std::fs::write(&path, c.to_json()).unwrap();
    }
}

fn p(path: &Path) -> &str {
    path.to_str().unwrap()
}

/// A login protector for `uid` that no password opens, with these costs.
fn fake_login_protector(uid: u32, costs: HashingCosts) -> Vec<u8> {
    proto::encode_protector(&ProtectorData {
        protector_descriptor: PLANTED.into(),
        source: SourceType::PamPassphrase as i32,
        name: String::new(),
        costs: Some(costs),
        salt: vec![7; 16],
        uid: i64::from(uid),
        wrapped_key: Some(WrappedKeyData {
            iv: vec![1; 16],
            encrypted_key: vec![2; 32],
            hmac: vec![3; 32],
        }),
    })
}

fn cheap() -> HashingCosts {
    HashingCosts {
        time: 1,
        memory: 64,
        parallelism: 1,
        truncation_fixed: true,
    }
}

#[test]
fn a_login_protector_planted_by_another_user_is_ignored() {
    let Some(env) = Env::new("trust_planted_login", "a") else {
        return;
    };
    let (_, first) = env.login_dir("a");
    let real = first["protector"]["descriptor"]
        .as_str()
        .unwrap()
        .to_string();
    let planted = env.mnt().join(".fscrypt/protectors").join(PLANTED);
    env.plant(&planted, &fake_login_protector(env.victim.uid, cheap()));

    // Root's encrypt for the victim and the victim's own find the real
    // login protector, never the planted one (which sorts first).
    let t = Instant::now();
    let (_, j) = env.login_dir("b");
    assert_eq!(j["protector_created"], false, "{j}");
    assert_eq!(j["protector"]["descriptor"], real.as_str(), "{j}");
    let d = env.mnt().join("c");
    std::fs::create_dir(&d).unwrap();
    std::os::unix::fs::chown(&d, Some(env.victim.uid), Some(env.victim.uid)).unwrap();
    let o = env.rs_as(
        env.victim.uid,
        &["encrypt", p(&d), "--source", "pam_passphrase", "--json"],
        b"victim-login-pw\n",
        Duration::from_secs(30),
    );
    ok(&o, "the victim's own encrypt");
    let j: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(j["protector"]["descriptor"], real.as_str(), "{j}");
    assert!(t.elapsed() < Duration::from_secs(20), "{:?}", t.elapsed());
    // The victim's dump does not list it; naming it is refused (exit 21).
    let o = env.rs_as(
        env.victim.uid,
        &["metadata", "dump", p(env.mnt()), "--json"],
        b"",
        Duration::from_secs(30),
    );
    ok(&o, "the victim's metadata dump");
    assert!(!text(&o).contains(PLANTED), "{}", text(&o));
    let o = env.rs_as(
        env.victim.uid,
        &[
            "metadata",
            "change-passphrase",
            "--protector",
            &format!("{}:{PLANTED}", p(env.mnt())),
        ],
        b"x\ny\ny\n",
        Duration::from_secs(30),
    );
    assert_eq!(o.status.code(), Some(21), "{}", text(&o));
    assert!(text(&o).contains("another user"), "{}", text(&o));

    // With allow_cross_user_metadata, the planted protector is considered
    // (google/fscrypt's opt-out): it comes first and does not open.
    env.set_cross_user(true);
    let d = env.mnt().join("e");
    std::fs::create_dir(&d).unwrap();
    let user = format!("--user={}", env.victim.name);
    let o = env.rs(
        &["encrypt", p(&d), "--source", "pam_passphrase", &user],
        b"victim-login-pw\n",
    );
    assert_eq!(o.status.code(), Some(12), "{}", text(&o));
    assert!(text(&o).contains(PLANTED), "{}", text(&o));
}

#[test]
fn a_protector_with_huge_argon2_costs_is_refused_without_hashing() {
    let Some(env) = Env::new("trust_huge_costs", "b") else {
        return;
    };
    let (_, first) = env.login_dir("a");
    let real = first["protector"]["descriptor"]
        .as_str()
        .unwrap()
        .to_string();
    // Written by root (trusted), as a damaged file would be: 2^31 passes
    // (google/fscrypt's format allows up to 2^32), little memory.
    let huge = HashingCosts {
        time: 1 << 31,
        ..cheap()
    };
    let path = env.mnt().join(".fscrypt/protectors").join(PLANTED);
    std::fs::write(&path, fake_login_protector(env.victim.uid, huge)).unwrap();
    let t = Instant::now();
    let user = format!("--user={}", env.victim.name);
    let d = env.mnt().join("b");
    std::fs::create_dir(&d).unwrap();
    let mut c = Command::new(BIN);
    c.args([
        "encrypt",
        p(&d),
        "--source",
        "pam_passphrase",
        &user,
        "--json",
    ]);
    env.env(&mut c);
    let o = test_support::run::output_within(&mut c, b"victim-login-pw\n", Duration::from_secs(30));
    ok(&o, "encrypt beside a protector with huge costs");
    let j: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(j["protector"]["descriptor"], real.as_str(), "{j}");
    assert!(t.elapsed() < Duration::from_secs(20), "{:?}", t.elapsed());
    // The dump names the refused file and why, in one line.
    let o = env.rs(&["metadata", "dump", p(env.mnt())], b"");
    ok(&o, "metadata dump");
    let out = String::from_utf8_lossy(&o.stdout);
    let line = out
        .lines()
        .find(|l| l.contains(PLANTED))
        .unwrap_or_else(|| panic!("{out}"));
    assert!(line.contains("time cost"), "{line}");
}

#[test]
fn a_flood_of_corrupt_policies_does_not_fail_another_users_dump() {
    let Some(env) = Env::new("trust_policy_flood", "c") else {
        return;
    };
    env.login_dir("a");
    let pol = env.mnt().join(".fscrypt/policies");
    let mut script = String::from("set -e\n");
    for i in 0..300 {
        script.push_str(&format!("printf 'garbage' > {}/{i:032x}\n", pol.display()));
    }
    let mut c = as_user(env.attacker.uid, env.attacker.uid, "/bin/sh");
    c.args(["-c", &script]);
    ok(&test_support::run::output(&mut c, b""), "flood");
    // One corrupt file written by root too: listed, never fatal.
    std::fs::write(pol.join(format!("{:032x}", 999)), b"junk").unwrap();

    let o = env.rs_as(
        env.victim.uid,
        &["metadata", "dump", p(env.mnt()), "--json"],
        b"",
        Duration::from_secs(30),
    );
    ok(&o, "the victim's dump");
    let j: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(j["policies"].as_array().unwrap().len(), 1, "{j}");
    let bad = j["unreadable"].as_array().unwrap();
    assert_eq!(bad.len(), 1, "only root's corrupt file is read: {j}");
    assert_eq!(bad[0]["descriptor"], format!("{:032x}", 999));
    // Root reads every file: the dump still succeeds.
    let o = env.rs(&["metadata", "dump", p(env.mnt()), "--json"], b"");
    ok(&o, "root's dump");
    let j: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(j["unreadable"].as_array().unwrap().len(), 301, "{j}");
    // The victim's status on the mount point works too.
    let o = env.rs_as(
        env.victim.uid,
        &["status", p(env.mnt())],
        b"",
        Duration::from_secs(30),
    );
    ok(&o, "the victim's status");
}

#[test]
fn a_metadata_directory_owned_by_another_user_is_refused() {
    let Some(env) = Env::new("trust_foreign_dir", "d") else {
        return;
    };
    let (d, _) = env.login_dir("a");
    ok(&env.rs(&["lock", p(&d), "--quiet"], b""), "lock");
    let base = env.mnt().join(".fscrypt");
    for dir in [base.clone(), base.join("protectors")] {
        std::os::unix::fs::chown(&dir, Some(env.attacker.uid), None).unwrap();
        for args in [
            vec!["metadata", "dump", p(env.mnt())],
            vec!["unlock", p(&d)],
        ] {
            let o = env.rs_as(
                env.victim.uid,
                &args,
                b"victim-login-pw\n",
                Duration::from_secs(30),
            );
            assert_eq!(o.status.code(), Some(21), "{args:?}: {}", text(&o));
            let err = String::from_utf8_lossy(&o.stderr);
            assert_eq!(err.trim().lines().count(), 1, "{err}");
            assert!(
                err.contains("unsafe metadata directory") && err.contains("fscrypt-rs setup"),
                "{err}"
            );
        }
        std::os::unix::fs::chown(&dir, Some(0), None).unwrap();
    }
    // Owned by root again: the victim unlocks.
    let o = env.rs_as(
        env.victim.uid,
        &["unlock", p(&d)],
        b"victim-login-pw\n",
        Duration::from_secs(30),
    );
    ok(&o, "unlock");
}
