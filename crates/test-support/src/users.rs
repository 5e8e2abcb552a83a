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
