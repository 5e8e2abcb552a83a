//! google/fscrypt habits a newcomer brings (issue 26 item 4):
//!
//! * `status` without a path: the filesystems that can be encrypted,
//!   whether encryption is enabled and whether they are set up;
//! * `status MNT` lists the protectors linked from MNT (a login protector
//!   on the login filesystem) with where they live, and a login protector
//!   is named by its user ("login protector for alice"), in `status DIR`
//!   too;
//! * `encrypt --policy MNT:ID` gives a second directory an existing
//!   policy; `encrypt --skip-unlock` leaves the new directory locked;
//! * `purge MNT` locks every directory of the filesystem, and refuses
//!   without `--force` when it cannot ask, or for a path that is not a
//!   mount point.
//!
//! Scratch loop ext4 filesystems (the login filesystem is
//! `FSCRYPT_ROOT_MNT`), a config in the test's temp dir (`FSCRYPT_CONF`),
//! a local test user for the login protector. Skipped loudly without root,
//! loop devices, `setpriv` or `useradd`.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use test_support::loopdev::{MKFS_4K, scratch_ext4};
use test_support::loopfs::LoopExt4;
use test_support::run::assert_ok as ok;
use test_support::run::describe as text;
use test_support::tempdir::TempDir;
use test_support::users::{TestUser, as_user};

const BIN: &str = env!("CARGO_BIN_EXE_fscrypt-rs");

const LOGIN_PW: &str = "habit-login-pw-7";
const PW: &[u8] = b"habit-custom-pw\n";

/// The login filesystem and a second one, both set up.
struct Env {
    root: LoopExt4,
    other: LoopExt4,
    tmp: TempDir,
}

impl Env {
    fn new(test: &str) -> Option<Env> {
        let root = scratch_ext4(test, 32, MKFS_4K)?;
        let other = scratch_ext4(test, 32, MKFS_4K)?;
        let env = Env {
            root,
            other,
            tmp: TempDir::new(test),
        };
        ok(&env.rs(&["setup", "--time", "0.001"], b""), "setup");
        ok(&env.rs(&["setup", p(env.mnt())], b""), "setup MNT2");
        Some(env)
    }

    /// The second filesystem's mount point.
    fn mnt(&self) -> &Path {
        self.other.mount_point()
    }

    /// `fscrypt-rs` as root, with this environment's config and login
    /// filesystem.
    fn rs(&self, args: &[&str], stdin: &[u8]) -> Output {
        let mut c = Command::new(BIN);
        c.args(args)
            .env("FSCRYPT_CONF", self.tmp.join("fscrypt.conf"))
            .env("FSCRYPT_ROOT_MNT", self.root.mount_point());
        test_support::run::output(&mut c, stdin)
    }

    fn json(&self, args: &[&str], stdin: &[u8], what: &str) -> serde_json::Value {
        let o = self.rs(args, stdin);
        ok(&o, what);
        serde_json::from_slice(&o.stdout).unwrap_or_else(|e| panic!("{what}: {e}: {}", text(&o)))
    }

    /// A new empty directory on the second filesystem.
    fn dir(&self, name: &str) -> PathBuf {
        let d = self.mnt().join(name);
        std::fs::create_dir(&d).unwrap();
        d
    }

    /// Encrypts `dir` with a new custom-passphrase protector named `name`
    /// (extra arguments after); its policy descriptor.
    fn encrypt(&self, dir: &Path, name: &str, extra: &[&str]) -> String {
        let mut a = vec![
            "encrypt",
            p(dir),
            "--source",
            "custom_passphrase",
            "--name",
            name,
            "--json",
        ];
        a.extend_from_slice(extra);
        let j = self.json(&a, PW, "encrypt");
        j["policy"].as_str().unwrap().to_string()
    }

    /// `status DIR --json`'s key status ("present"/"absent").
    fn key_status(&self, dir: &Path) -> String {
        let j = self.json(&["status", p(dir), "--json"], b"", "status DIR");
        j["key_status"].as_str().unwrap_or_default().to_string()
    }
}

impl Drop for Env {
    fn drop(&mut self) {
        // Every key of the second filesystem out of the kernel before it
        // goes (the loop filesystems unmount in their own Drop).
        let _ = self.rs(&["purge", p(self.mnt()), "--force", "--all-users"], b"");
    }
}

fn p(path: &Path) -> &str {
    path.to_str().unwrap()
}

/// Whether `dir` is unlocked: a file can be made in it.
fn writable(dir: &Path, name: &str) -> bool {
    std::fs::write(dir.join(name), "x").is_ok()
}

#[test]
fn status_names_login_protectors_by_user_and_lists_linked_ones() {
    let t = "gfs_habits_status_link";
    if !test_support::skip::setpriv_available(t) {
        return;
    }
    let Some(env) = Env::new(t) else { return };
    let Some(user) = TestUser::new(t, "hb", LOGIN_PW) else {
        return;
    };
    let dir = env.dir("home");
    std::os::unix::fs::chown(&dir, Some(user.uid), Some(user.uid)).unwrap();
    let u = format!("--user={}", user.name);
    ok(
        &env.rs(
            &[
                "encrypt",
                p(&dir),
                "--source",
                "pam_passphrase",
                &u,
                "--no-recovery",
                "--quiet",
            ],
            format!("{LOGIN_PW}\n").as_bytes(),
        ),
        "encrypt with a login protector on the login filesystem",
    );
    let by_name = format!("login protector for {}", user.name);
    // status DIR: the login protector, through its link, by user name.
    let o = env.rs(&["status", p(&dir)], b"");
    ok(&o, "status DIR");
    let s = String::from_utf8_lossy(&o.stdout);
    assert!(
        s.contains(&by_name) && !s.contains("unreadable"),
        "status DIR: {s}"
    );
    // status MNT lists the linked protector, and where it lives.
    let j = env.json(&["status", p(env.mnt()), "--json"], b"", "status MNT");
    let prots = j["fscrypt_metadata"]["protectors"].as_array().unwrap();
    let linked: Vec<&serde_json::Value> = prots
        .iter()
        .filter(|p| p["linked_from"].is_string())
        .collect();
    assert_eq!(linked.len(), 1, "the linked protector is missing: {j}");
    assert_eq!(linked[0]["description"], by_name.as_str(), "{j}");
    assert_eq!(linked[0]["linked_from"], p(env.root.mount_point()), "{j}");
    let o = env.rs(&["status", p(env.mnt())], b"");
    let s = String::from_utf8_lossy(&o.stdout);
    assert!(
        s.contains(&by_name) && s.contains("(linked: on"),
        "status MNT text: {s}"
    );
    // The user's own status DIR and status MNT say the same.
    for path in [&dir, env.mnt()] {
        let mut c = as_user(user.uid, user.uid, BIN);
        c.args(["status", p(path)])
            .env("FSCRYPT_CONF", env.tmp.join("fscrypt.conf"))
            .env("FSCRYPT_ROOT_MNT", env.root.mount_point());
        let o = test_support::run::output(&mut c, b"");
        ok(&o, "status as the user");
        let s = String::from_utf8_lossy(&o.stdout);
        assert!(
            s.contains(&by_name) && !s.contains("unreadable"),
            "status {} as the user: {s}",
            path.display()
        );
    }
    ok(
        &env.rs(&["lock", p(&dir), "-q", "--all-users"], b""),
        "lock",
    );
}

#[test]
fn status_without_a_path_lists_the_filesystems_that_can_be_encrypted() {
    let t = "gfs_habits_status_all";
    let Some(env) = Env::new(t) else { return };
    // An ext4 without the encrypt feature.
    let Some(plain) = scratch_ext4(t, 32, &["-b", "4096"]) else {
        return;
    };
    let j = env.json(&["status", "--json"], b"", "status");
    let fs = j["filesystems"].as_array().unwrap();
    let find = |m: &Path| {
        fs.iter()
            .find(|f| f["mount_point"] == p(m))
            .unwrap_or_else(|| panic!("{} is not listed: {j}", m.display()))
            .clone()
    };
    let set_up = find(env.mnt());
    assert_eq!(set_up["encryption"], "supported", "{set_up}");
    assert_eq!(set_up["fscrypt_metadata"], true, "{set_up}");
    assert_eq!(set_up["filesystem"], "ext4", "{set_up}");
    let off = find(plain.mount_point());
    assert_eq!(off["encryption"], "not enabled", "{off}");
    assert_eq!(off["fscrypt_metadata"], false, "{off}");
    assert!(j["filesystems_supporting_encryption"].as_u64().unwrap() >= 2);
    // The text: the counts, a row per filesystem, what to do.
    let o = env.rs(&["status"], b"");
    ok(&o, "status");
    let s = String::from_utf8_lossy(&o.stdout);
    assert!(
        s.contains("filesystems supporting encryption:")
            && s.contains("MOUNTPOINT")
            && s.lines()
                .any(|l| l.starts_with(p(plain.mount_point())) && l.contains("not enabled"))
            && s.contains("tune2fs -O encrypt"),
        "{s}"
    );
}

#[test]
fn encrypt_with_an_existing_policy_and_skip_unlock() {
    let t = "gfs_habits_encrypt";
    let Some(env) = Env::new(t) else { return };
    let a = env.dir("a");
    let policy = env.encrypt(&a, "pa", &[]);
    assert!(writable(&a, "f"));
    ok(&env.rs(&["lock", p(&a), "-q"], b""), "lock a");
    // b gets a's policy, left locked.
    let b = env.dir("b");
    let pol = format!("{}:{policy}", p(env.mnt()));
    let j = env.json(
        &[
            "encrypt",
            p(&b),
            "--policy",
            &pol,
            "--skip-unlock",
            "--json",
        ],
        PW,
        "encrypt --policy --skip-unlock",
    );
    assert_eq!(j["policy"], policy.as_str(), "{j}");
    assert_eq!(j["policy_reused"], true, "{j}");
    assert_eq!(j["unlocked"], false, "{j}");
    let jb = env.json(&["status", p(&b), "--json"], b"", "status b");
    assert_eq!(
        jb["fscrypt_metadata"]["policy"],
        policy.as_str(),
        "b does not use a's policy: {jb}"
    );
    assert_eq!(env.key_status(&b), "absent");
    assert!(!writable(&b, "g"), "b is not locked");
    // One unlock opens both.
    ok(&env.rs(&["unlock", p(&a), "-q"], PW), "unlock a");
    assert!(writable(&b, "g") && a.join("f").exists());
    // Reusing an unlocked policy without --skip-unlock: unlocked.
    let c = env.dir("c");
    ok(
        &env.rs(&["encrypt", p(&c), "--policy", &pol, "--quiet"], PW),
        "encrypt --policy (unlocked)",
    );
    assert!(writable(&c, "h"));
    // A wrong passphrase changes nothing.
    let d = env.dir("d");
    let o = env.rs(&["encrypt", p(&d), "--policy", &pol], b"wrong\n");
    assert_eq!(o.status.code(), Some(12), "{}", text(&o));
    let jd = env.json(&["status", p(&d), "--json"], b"", "status d");
    assert_eq!(jd["encrypted"], false, "{jd}");
    // A policy of another filesystem is refused, saying why.
    let root_dir = env.root.mount_point().join("r");
    std::fs::create_dir(&root_dir).unwrap();
    let o = env.rs(&["encrypt", p(&root_dir), "--policy", &pol], PW);
    assert!(!o.status.success(), "{}", text(&o));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("only serves its own filesystem") && err.lines().count() == 1,
        "{err}"
    );
    // --skip-unlock with a new policy: encrypted, locked.
    let e = env.dir("e");
    let pe = env.encrypt(&e, "pe", &["--skip-unlock"]);
    assert_ne!(pe, policy);
    assert_eq!(env.key_status(&e), "absent");
    assert!(!writable(&e, "i"), "e is not locked");
    ok(&env.rs(&["unlock", p(&e), "-q"], PW), "unlock e");
    assert!(writable(&e, "i"));
}

#[test]
fn purge_locks_every_directory_of_the_filesystem() {
    let t = "gfs_habits_purge";
    let Some(env) = Env::new(t) else { return };
    let a = env.dir("a");
    let b = env.dir("b");
    env.encrypt(&a, "pa", &[]);
    env.encrypt(&b, "pb", &[]);
    assert!(writable(&a, "f") && writable(&b, "f"));
    // Without --force and no terminal to ask: refused, nothing locked.
    let o = env.rs(&["purge", p(env.mnt())], b"");
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("add --force"),
        "{}",
        text(&o)
    );
    assert_eq!(env.key_status(&a), "present");
    // A directory is not a mount point.
    let o = env.rs(&["purge", p(&a), "--force"], b"");
    assert!(!o.status.success(), "{}", text(&o));
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("is not a mount point"),
        "{}",
        text(&o)
    );
    let j = env.json(&["purge", p(env.mnt()), "--force", "--json"], b"", "purge");
    let pols = j["policies"].as_array().unwrap();
    assert_eq!(pols.len(), 2, "{j}");
    assert!(pols.iter().all(|p| p["outcome"] == "removed"), "{j}");
    assert_eq!(env.key_status(&a), "absent");
    assert_eq!(env.key_status(&b), "absent");
    assert!(!a.join("f").exists() && !b.join("f").exists());
    // Again: nothing left to remove.
    let o = env.rs(&["purge", p(env.mnt()), "--force"], b"");
    ok(&o, "purge again");
    assert!(
        String::from_utf8_lossy(&o.stdout).contains("0 keys removed, 2 already absent"),
        "{}",
        text(&o)
    );
}

#[test]
fn readme_shows_the_google_fscrypt_habits() {
    let readme = include_str!("../../../README.md");
    for s in [
        "fscrypt-rs status                      # every filesystem",
        "fscrypt-rs encrypt /mnt/more --policy /mnt:POLICY",
        "--skip-unlock",
        "fscrypt-rs purge /mnt",
        "login protector for alice",
        "--all-users",
    ] {
        assert!(readme.contains(s), "the README lacks {s:?}");
    }
}
