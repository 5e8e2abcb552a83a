//! Which processes keep a mount busy: their open files, working directory
//! or root below the mount point, found through `/proc/*/{fd,cwd,root}`.
//! Processes this user may not inspect are counted, not named.

use std::path::Path;

/// A process using something below a mount point.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Holder {
    /// Its process id.
    pub pid: u32,
    /// Its command name (`/proc/PID/comm`).
    pub command: String,
    /// How it uses the mount: "open file", "working directory", "root".
    pub how: &'static str,
}

/// The processes (other than this one) with an open file, working
/// directory or root at or below `mountpoint`, and how many processes
/// could not be inspected.
pub fn holders(mountpoint: &Path) -> (Vec<Holder>, usize) {
    let me = std::process::id();
    let mut found = Vec::new();
    let mut hidden = 0;
    let Ok(procs) = std::fs::read_dir("/proc") else {
        return (found, 0);
    };
    let below = |p: &Path| p.starts_with(mountpoint);
    for entry in procs.flatten() {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|s| s.parse::<u32>().ok())
        else {
            continue;
        };
        if pid == me {
            continue;
        }
        let dir = entry.path();
        let how = match std::fs::read_link(dir.join("cwd")) {
            Err(_) => {
                if dir.exists() {
                    hidden += 1;
                }
                continue;
            }
            Ok(cwd) if below(&cwd) => Some("working directory"),
            Ok(_) => match std::fs::read_link(dir.join("root")) {
                Ok(root) if below(&root) && root != Path::new("/") => Some("root"),
                _ => None,
            },
        };
        let how = how.or_else(|| {
            let fds = std::fs::read_dir(dir.join("fd")).ok()?;
            fds.flatten()
                .filter_map(|fd| std::fs::read_link(fd.path()).ok())
                .any(|target| below(&target))
                .then_some("open file")
        });
        if let Some(how) = how {
            let command = std::fs::read_to_string(dir.join("comm"))
                .map(|c| c.trim().to_owned())
                .unwrap_or_else(|_| "?".into());
            found.push(Holder { pid, command, how });
        }
    }
    found.sort_by_key(|h| h.pid);
    (found, hidden)
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
