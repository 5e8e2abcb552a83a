//! The google/fscrypt flow through `fscrypt_actions` (issue 21): what the
//! CLI and the PAM module used to do differently.
//!
//! * `status` locates a policy's protectors as `unlock` does: a login
//!   protector reached through a link file (it lives on the login
//!   filesystem) is described, not reported as missing;
//! * a protector reached through a link is read only when the linked
//!   filesystem's metadata directories are owned by root or the trusted
//!   user (every owner with `allow_cross_user_metadata`), as the PAM module
//!   requires of the login filesystem (`pamtester.rs`,
//!   `a_login_filesystem_owned_by_another_user_is_used_only_with_cross_user_metadata`):
//!   the same answer from both front ends (both already gave it before
//!   the library; the pair keeps them together).
//!
//! Two scratch ext4 filesystems: the login filesystem (`FSCRYPT_ROOT_MNT`)
//! and a second one holding the directories; a config in the test's temp
//! dir (`FSCRYPT_CONF`); local test users. Skipped loudly without root,
//! loop devices, `setpriv` or `useradd`.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::Duration;
use test_support::run::assert_ok as ok;
use test_support::run::describe as text;

use test_support::loopdev::{MKFS_4K, scratch_ext4};
use test_support::loopfs::LoopExt4;
use test_support::tempdir::TempDir;
use test_support::users::{TestUser, as_user};

const BIN: &str = env!("CARGO_BIN_EXE_fscrypt-rs");

const LOGIN_PW: &str = "drift-login-pw-5";

/// The login filesystem and a second one, both set up, and a user whose
/// login protector (on the login filesystem) protects `dir` on the second
/// one through a link file; the directory holds `f` and is locked.
struct Env {
    root: LoopExt4,
    other: LoopExt4,
    tmp: TempDir,
    user: TestUser,
    dir: PathBuf,
}

impl Env {
    fn new(test: &str, tag: &str) -> Option<Env> {
        if !test_support::skip::setpriv_available(test) {
            return None;
        }
        let root = scratch_ext4(test, 32, MKFS_4K)?;
        let other = scratch_ext4(test, 32, MKFS_4K)?;
        let user = TestUser::new(test, tag, LOGIN_PW)?;
        let env = Env {
            dir: other.mount_point().join("home"),
            root,
            other,
            tmp: TempDir::new(test),
            user,
        };
        ok(&env.rs(&["setup", "--time", "0.001"], b""), "setup");
        ok(
            &env.rs(&["setup", p(env.other.mount_point())], b""),
            "setup MNT2",
        );
        std::fs::create_dir(&env.dir).unwrap();
        std::os::unix::fs::chown(&env.dir, Some(env.user.uid), Some(env.user.uid)).unwrap();
        let u = format!("--user={}", env.user.name);
        ok(
            &env.rs(
                &[
                    "encrypt",
                    p(&env.dir),
                    "--source",
                    "pam_passphrase",
                    &u,
                    "--no-recovery",
                    "--quiet",
                ],
                format!("{LOGIN_PW}\n").as_bytes(),
            ),
            "encrypt --source pam_passphrase on MNT2",
        );
        std::fs::write(env.dir.join("f"), "secret").unwrap();
        ok(&env.rs(&["lock", p(&env.dir), "-q"], b""), "lock");
        assert!(!readable(&env.dir.join("f")));
        let links: Vec<String> =
            std::fs::read_dir(env.other.mount_point().join(".fscrypt/protectors"))
                .unwrap()
                .flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect();
        assert!(
            links.len() == 1 && links[0].ends_with(".link"),
            "the protector is not linked: {links:?}"
        );
        Some(env)
    }

    fn cmd(&self, c: &mut Command) {
        c.env("FSCRYPT_CONF", self.tmp.join("fscrypt.conf"))
            .env("FSCRYPT_ROOT_MNT", self.root.mount_point());
    }

    /// `fscrypt-rs` as root.
    fn rs(&self, args: &[&str], stdin: &[u8]) -> Output {
        let mut c = Command::new(BIN);
        c.args(args);
        self.cmd(&mut c);
        test_support::run::output(&mut c, stdin)
    }

    /// `fscrypt-rs` as the user.
    fn rs_as_user(&self, args: &[&str], stdin: &[u8]) -> Output {
        let mut c = as_user(self.user.uid, self.user.uid, BIN);
        c.args(args);
        self.cmd(&mut c);
        test_support::run::output_within(&mut c, stdin, Duration::from_secs(60))
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

impl Drop for Env {
    fn drop(&mut self) {
        let _ = self.rs(&["lock", p(&self.dir), "-q", "--all-users"], b"");
    }
}

fn p(path: &Path) -> &str {
    path.to_str().unwrap()
}

fn readable(f: &Path) -> bool {
    std::fs::read_to_string(f).is_ok_and(|s| s == "secret")
}

#[test]
fn status_follows_protector_links_as_unlock_does() {
    let Some(env) = Env::new("gfs_status_link", "sl") else {
        return;
    };
    let o = env.rs(&["status", p(&env.dir), "--json"], b"");
    ok(&o, "status");
    let j: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let prots = &j["fscrypt_metadata"]["protectors"];
    assert_eq!(prots.as_array().map(Vec::len), Some(1), "{j}");
    assert!(
        prots[0].get("error").is_none(),
        "status did not follow the link: {j}"
    );
    assert_eq!(
        prots[0]["description"],
        format!("login protector for {}", env.user.name),
        "{j}"
    );
    // The text says the same.
    let o = env.rs(&["status", p(&env.dir)], b"");
    ok(&o, "status");
    let t = String::from_utf8_lossy(&o.stdout);
    assert!(
        t.contains(&format!("login protector for {}", env.user.name)) && !t.contains("unreadable"),
        "{t}"
    );
    // And unlock finds the same protector.
    ok(
        &env.rs(&["unlock", p(&env.dir)], format!("{LOGIN_PW}\n").as_bytes()),
        "unlock through the link",
    );
    assert!(readable(&env.dir.join("f")));
}

#[test]
fn a_linked_filesystem_owned_by_another_user_is_used_only_with_cross_user_metadata() {
    let t = "gfs_link_owner";
    let Some(env) = Env::new(t, "lo") else {
        return;
    };
    let Some(other) = TestUser::new(t, "lx", "other-pw") else {
        return;
    };
    // The login filesystem's protectors/ now belongs to another
    // (non-root) user: whatever is in it is that user's to change.
    let prot = env.root.mount_point().join(".fscrypt/protectors");
    std::os::unix::fs::chown(&prot, Some(other.uid), Some(other.uid)).unwrap();
    let o = env.rs_as_user(&["unlock", p(&env.dir)], format!("{LOGIN_PW}\n").as_bytes());
    assert_eq!(
        o.status.code(),
        Some(21),
        "a protector in another user's directory was used: {}",
        text(&o)
    );
    assert!(!readable(&env.dir.join("f")));
    // With allow_cross_user_metadata every owner is trusted.
    env.set_cross_user(true);
    let o = env.rs_as_user(&["unlock", p(&env.dir)], format!("{LOGIN_PW}\n").as_bytes());
    ok(&o, "unlock with allow_cross_user_metadata");
    assert!(readable(&env.dir.join("f")));
}
