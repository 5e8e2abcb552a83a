//! Running commands as another user through `setpriv` (util-linux); check
//! [`crate::skip::setpriv_available`] first.

use std::process::Command;

/// The unprivileged user the permission tests act as (`nobody`).
pub const NOBODY: u32 = 65534;

/// `setpriv --reuid=<uid> --regid=<gid> --clear-groups -- <program>`: add
/// the program's arguments to the returned command.
pub fn as_user(uid: u32, gid: u32, program: impl AsRef<std::ffi::OsStr>) -> Command {
    let mut c = Command::new("setpriv");
    c.arg(format!("--reuid={uid}"))
        .arg(format!("--regid={gid}"))
        .arg("--clear-groups")
        .arg("--")
        .arg(program);
    c
}

/// `sh -c <script> sh <args...>` as uid and gid 65534 with no
/// supplementary groups (`$1`... are the further arguments).
pub fn nobody_sh(script: &str) -> Command {
    let mut c = as_user(NOBODY, NOBODY, "/bin/sh");
    c.args(["-c", script, "sh"]);
    c
}

/// A local user made for one test (`useradd`, password set with
/// `chpasswd`), removed with `userdel` when dropped, even on failure.
pub struct TestUser {
    /// The user name.
    pub name: String,
    /// The uid.
    pub uid: u32,
}

impl TestUser {
    /// Creates user `fsrs<tag><pid>` (no home directory, no login shell)
    /// with `password`; `None` (after a loud reason) when not root or
    /// `useradd`/`chpasswd` are missing or fail.
    pub fn new(test: &str, tag: &str, password: &str) -> Option<TestUser> {
        if !crate::skip::is_root() {
            crate::skip::skip(test, "needs root to create a test user");
            return None;
        }
        let name = format!("fsrs{tag}{}", std::process::id());
        let _ = Command::new("userdel").arg(&name).output();
        let ok = Command::new("useradd")
            .args(["--no-create-home", "--shell", "/usr/sbin/nologin", &name])
            .output()
            .map(|o| o.status.success())
            .unwrap_or(false);
        if !ok {
            crate::skip::skip(test, "useradd failed (is the passwd package installed?)");
            return None;
        }
        let user = TestUser {
            uid: uid_of(&name).expect("the new user has a uid"),
            name,
        };
        user.set_password(password);
        Some(user)
    }

    /// Sets the user's password with `chpasswd`.
    ///
    /// # Panics
    /// If `chpasswd` fails.
    pub fn set_password(&self, password: &str) {
        let o = crate::run::output(
            &mut Command::new("chpasswd"),
            format!("{}:{password}\n", self.name).as_bytes(),
        );
        assert!(
            o.status.success(),
            "chpasswd: {}",
            crate::run::text(&o.stderr)
        );
    }
}

impl Drop for TestUser {
    fn drop(&mut self) {
        let _ = Command::new("userdel").arg(&self.name).output();
    }
}

/// The uid of `name` (`id -u`).
pub fn uid_of(name: &str) -> Option<u32> {
    let o = Command::new("id").args(["-u", name]).output().ok()?;
    String::from_utf8(o.stdout).ok()?.trim().parse().ok()
}
