//! Skip checks: a test that cannot run here prints a loud reason to stderr
//! (`SKIPPED <test>: <reason>`) and returns instead of failing.

use std::path::Path;
use std::process::Command;

/// Prints the loud skip line for `test`.
pub fn skip(test: &str, reason: &str) {
    eprintln!("SKIPPED {test}: {reason}");
}

/// Whether the effective uid is 0.
pub fn is_root() -> bool {
    rustix::process::geteuid().is_root()
}

/// Whether `program args...` can be started (its exit status is not looked
/// at: only whether it is installed).
pub fn command_exists(program: &str, args: &[&str]) -> bool {
    Command::new(program).args(args).output().is_ok()
}

/// Why uid 65534 cannot mount through `fusermount3` here (not root to
/// become it with `setpriv`, no setuid `fusermount3`, `/dev/fuse` not
/// 0666), or `None` if it can.
pub fn unprivileged_mount_unavailable() -> Option<String> {
    use std::os::unix::fs::PermissionsExt;
    if !is_root() {
        return Some("needs root (to become uid 65534 with setpriv)".into());
    }
    if !command_exists("setpriv", &["--version"]) {
        return Some("needs setpriv (util-linux)".into());
    }
    let Some(fusermount) = ["/usr/bin/fusermount3", "/bin/fusermount3"]
        .into_iter()
        .find(|p| Path::new(p).exists())
    else {
        return Some("needs fusermount3 (fuse3)".into());
    };
    let mode = std::fs::metadata(fusermount).map_or(0, |m| m.permissions().mode());
    if mode & 0o4000 == 0 {
        return Some(format!("{fusermount} is not setuid"));
    }
    match std::fs::metadata("/dev/fuse").map(|m| m.permissions().mode()) {
        Ok(m) if m & 0o006 == 0o006 => None,
        Ok(m) => Some(format!(
            "/dev/fuse is mode {:o}, not 0666 (scripts/setup.sh fixes that)",
            m & 0o777
        )),
        Err(_) => Some("needs /dev/fuse".into()),
    }
}

/// Why real FUSE mounts cannot run here, or `None` if they can.
pub fn fuse_unavailable() -> Option<&'static str> {
    if !Path::new("/dev/fuse").exists() {
        Some("/dev/fuse is missing")
    } else if !is_root() {
        Some("not running as root")
    } else if !command_exists("fusermount3", &["-V"]) {
        Some("fusermount3 is not installed (run scripts/setup.sh)")
    } else {
        None
    }
}

/// Whether real FUSE mounts can run here; prints a loud reason when not.
pub fn fuse_available(test: &str) -> bool {
    match fuse_unavailable() {
        Some(r) => {
            skip(
                test,
                &format!("{r} — real-mount tests cannot run on this machine"),
            );
            false
        }
        None => true,
    }
}

/// Whether `setpriv` (util-linux) is installed; prints a loud reason when not.
pub fn setpriv_available(test: &str) -> bool {
    if command_exists("setpriv", &["--version"]) {
        true
    } else {
        skip(test, "setpriv (util-linux) is missing");
        false
    }
}

/// Whether `program` is installed (probed with `probe_args`); prints a loud
/// reason naming `package` when not.
pub fn tool_available(test: &str, program: &str, probe_args: &[&str], package: &str) -> bool {
    if command_exists(program, probe_args) {
        true
    } else {
        skip(test, &format!("{program} not found (install {package})"));
        false
    }
}

/// Returns from the calling test (after a loud reason) unless real FUSE
/// mounts can run here; the test is named by its module path.
#[macro_export]
macro_rules! need_fuse {
    () => {
        if !$crate::skip::fuse_available(module_path!()) {
            return;
        }
    };
}

/// Why the real binary cannot mount here (it needs root and /dev/fuse), or
/// `None` if it can.
pub fn mount_unavailable() -> Option<String> {
    let root = is_root();
    let fuse = Path::new("/dev/fuse").exists();
    (!root || !fuse).then(|| format!("needs root and /dev/fuse (root: {root}, /dev/fuse: {fuse})"))
}

/// Whether the real binary (`fscrypt-rs mount`) can mount here; prints a
/// loud reason when not.
pub fn can_mount(test: &str) -> bool {
    match mount_unavailable() {
        Some(r) => {
            skip(test, &r);
            false
        }
        None => true,
    }
}
