//! Which processes keep a mount busy: their open files, working directory
//! or root below the mount point, found by `fscrypt-linux`'s `/proc` scan
//! ([`fscrypt_linux::holders`]), and the message that names them.
//! Processes this user may not inspect are counted, not named.

use std::path::Path;

pub use fscrypt_linux::holders::Holder;

/// The processes (other than this one) with an open file, working
/// directory or root at or below `mountpoint`, and how many processes
/// could not be inspected ([`fscrypt_linux::holders::holders_below`]).
pub fn holders(mountpoint: &Path) -> (Vec<Holder>, usize) {
    fscrypt_linux::holders::holders_below(mountpoint)
}

/// One line naming the processes that keep `mountpoint` busy.
pub fn describe(mountpoint: &Path) -> String {
    let (found, hidden) = holders(mountpoint);
    let mut parts: Vec<String> = found
        .iter()
        .map(|h| format!("pid {} ({}, {})", h.pid, h.command, h.how))
        .collect();
    if parts.is_empty() {
        parts.push("no process found that this user may inspect".into());
    }
    let mut line = format!(
        "{} is busy; in use by {}",
        mountpoint.display(),
        parts.join(", ")
    );
    if hidden > 0 && !rustix::process::geteuid().is_root() {
        line.push_str(&format!(
            " ({hidden} processes of other users not inspected)"
        ));
    }
    line
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_a_process_with_its_cwd_below() {
        let dir = std::env::temp_dir().join(format!("fscrypt-busy-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let dir = std::fs::canonicalize(&dir).unwrap();
        let mut child = std::process::Command::new("sleep")
            .arg("30")
            .current_dir(&dir)
            .spawn()
            .unwrap();
        let (found, _) = holders(&dir);
        let _ = child.kill();
        let _ = child.wait();
        let _ = std::fs::remove_dir(&dir);
        assert!(
            found
                .iter()
                .any(|h| h.pid == child.id() && h.how == "working directory"),
            "{found:?}"
        );
    }
}
