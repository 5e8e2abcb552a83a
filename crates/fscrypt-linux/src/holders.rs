//! Which processes hold what: the one scan of `/proc/<pid>/{cmdline,comm,
//! cwd,root,fd/*}` (proc(5)).
//!
//! [`processes`] lists the processes; [`Process`] reads one of them. On top
//! of it, the three questions the tools ask:
//!
//! - [`holders_below`]: who keeps a mount point busy (an open file, the
//!   working directory or the root at or below a path; `fscrypt-fuse`'s
//!   "mount point is busy" message);
//! - [`open_files_below`]: the open files below a directory (`lock`'s
//!   "still open" list);
//! - [`holding_inodes`]: who holds one of a set of inodes of a device
//!   (`--convert`'s preflight).
//!
//! Processes this user may not inspect are skipped (counted by
//! [`holders_below`]). Nothing here follows a link of a process to open
//! what it names: links are read (`readlink`) or `stat`ed.

use std::collections::HashSet;
use std::io;
use std::path::{Path, PathBuf};

/// One process seen in `/proc` (it may exit at any moment: every read can
/// fail).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Process {
    pid: u32,
    dir: PathBuf,
}

/// The processes in `/proc` (entries whose name is a process id), in the
/// order `/proc` lists them; none when `/proc` cannot be read.
pub fn processes() -> impl Iterator<Item = Process> {
    std::fs::read_dir("/proc")
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| {
            let name = e.file_name();
            let name = name.to_str()?;
            if !name.bytes().all(|b| b.is_ascii_digit()) {
                return None;
            }
            Some(Process {
                pid: name.parse().ok()?,
                dir: e.path(),
            })
        })
}

impl Process {
    /// Its process id.
    pub fn pid(&self) -> u32 {
        self.pid
    }

    /// Whether it still exists (its `/proc/<pid>` directory does).
    pub fn exists(&self) -> bool {
        self.dir.exists()
    }

    /// Its command line, `/proc/<pid>/cmdline`: the arguments, each ended
    /// by a NUL byte (empty for a kernel thread or a zombie).
    pub fn cmdline(&self) -> io::Result<Vec<u8>> {
        std::fs::read(self.dir.join("cmdline"))
    }

    /// Its command name (`/proc/<pid>/comm`, trimmed), `?` when unreadable.
    pub fn command(&self) -> String {
        std::fs::read_to_string(self.dir.join("comm"))
            .map(|c| c.trim().to_owned())
            .unwrap_or_else(|_| "?".into())
    }

    /// Its working directory (`readlink /proc/<pid>/cwd`).
    ///
    /// # Errors
    /// `EACCES` for another user's process (without `CAP_SYS_PTRACE`),
    /// `ENOENT` once it exited.
    pub fn cwd(&self) -> io::Result<PathBuf> {
        std::fs::read_link(self.dir.join("cwd"))
    }

    /// Its root directory (`readlink /proc/<pid>/root`).
    ///
    /// # Errors
    /// As [`Process::cwd`].
    pub fn root(&self) -> io::Result<PathBuf> {
        std::fs::read_link(self.dir.join("root"))
    }

    /// The paths `/proc/<pid>/fd/<n>` of its open file descriptors (links:
    /// read them with `readlink` or `stat` them); `None` when they cannot
    /// be listed.
    pub fn fd_links(&self) -> Option<impl Iterator<Item = PathBuf>> {
        let fds = std::fs::read_dir(self.dir.join("fd")).ok()?;
        Some(fds.flatten().map(|f| f.path()))
    }

    /// Where its open file descriptors point (`readlink` of each
    /// [`Process::fd_links`]; unreadable ones left out).
    pub fn fd_targets(&self) -> Option<impl Iterator<Item = PathBuf>> {
        Some(self.fd_links()?.filter_map(|l| std::fs::read_link(l).ok()))
    }
}

/// A process using something at or below a path ([`holders_below`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Holder {
    /// Its process id.
    pub pid: u32,
    /// Its command name (`/proc/PID/comm`).
    pub command: String,
    /// How it uses the path: "open file", "working directory", "root".
    pub how: &'static str,
}

/// The processes (other than this one) with an open file, working
/// directory or root at or below `path` (one reason each, looked at in the
/// order working directory, root other than `/`, open files), sorted by
/// pid, and how many processes could not be inspected.
pub fn holders_below(path: &Path) -> (Vec<Holder>, usize) {
    let me = std::process::id();
    let mut found = Vec::new();
    let mut hidden = 0;
    let below = |p: &Path| p.starts_with(path);
    for p in processes().filter(|p| p.pid != me) {
        let how = match p.cwd() {
            Err(_) => {
                if p.exists() {
                    hidden += 1;
                }
                continue;
            }
            Ok(cwd) if below(&cwd) => Some("working directory"),
            Ok(_) => match p.root() {
                Ok(root) if below(&root) && root != Path::new("/") => Some("root"),
                _ => None,
            },
        };
        let how = how.or_else(|| {
            p.fd_targets()?
                .any(|target| below(&target))
                .then_some("open file")
        });
        if let Some(how) = how {
            found.push(Holder {
                pid: p.pid,
                command: p.command(),
                how,
            });
        }
    }
    found.sort_by_key(|h| h.pid);
    (found, hidden)
}

/// Up to `max` open files at or below `dir` (its canonical form), as
/// (pid, target), in the order `/proc` lists the processes; this process
/// included; processes that cannot be inspected are missed.
pub fn open_files_below(dir: &Path, max: usize) -> Vec<(u32, PathBuf)> {
    let Ok(dir) = std::fs::canonicalize(dir) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for p in processes() {
        let Some(targets) = p.fd_targets() else {
            continue;
        };
        for target in targets {
            if target.starts_with(&dir) {
                out.push((p.pid, target));
                if out.len() >= max {
                    return out;
                }
            }
        }
    }
    out
}

/// Every open file descriptor, working directory or root directory of
/// another process that is one of `inodes` on device `dev` (matched with
/// `stat` of the `/proc` link, so a renamed or deleted object still
/// counts), as (pid, link target; `None` when it cannot be read), sorted
/// by pid and without repeats. Processes that cannot be inspected are
/// skipped.
pub fn holding_inodes(dev: u64, inodes: &HashSet<u64>) -> Vec<(u32, Option<PathBuf>)> {
    let me = std::process::id();
    let mut out = Vec::new();
    for p in processes().filter(|p| p.pid != me) {
        let mut links = vec![p.dir.join("cwd"), p.dir.join("root")];
        if let Some(fds) = p.fd_links() {
            links.extend(fds);
        }
        for l in links {
            let Ok(st) = rustix::fs::stat(&l) else {
                continue;
            };
            if st.st_dev == dev && inodes.contains(&st.st_ino) {
                out.push((p.pid, std::fs::read_link(&l).ok()));
            }
        }
    }
    out.sort();
    out.dedup();
    out
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::MetadataExt;
    use std::process::{Command, Stdio};

    use test_support::TempDir;
    use test_support::procs::ChildGuard;

    use super::*;

    /// A `sleep` with its working directory in `cwd` and, when given,
    /// `file` open on its standard input.
    fn sleeper(cwd: &Path, file: Option<&Path>) -> ChildGuard {
        let stdin = match file {
            Some(f) => Stdio::from(std::fs::File::open(f).unwrap()),
            None => Stdio::null(),
        };
        ChildGuard(
            Command::new("sleep")
                .arg("30")
                .current_dir(cwd)
                .stdin(stdin)
                .spawn()
                .unwrap(),
        )
    }

    #[test]
    fn processes_lists_this_one_and_reads_it() {
        let me = processes()
            .find(|p| p.pid() == std::process::id())
            .expect("this process in /proc");
        assert!(me.exists());
        assert_eq!(me.cwd().unwrap(), std::env::current_dir().unwrap());
        assert!(!me.cmdline().unwrap().is_empty());
        assert!(me.fd_targets().unwrap().count() >= 1);
    }

    #[test]
    fn holders_below_names_a_working_directory_and_an_open_file() {
        let t = TempDir::new("holders-below");
        let dir = std::fs::canonicalize(t.path()).unwrap();
        std::fs::create_dir(dir.join("sub")).unwrap();
        std::fs::write(dir.join("f"), b"x").unwrap();
        let by_cwd = sleeper(&dir.join("sub"), None);
        let by_file = sleeper(Path::new("/"), Some(&dir.join("f")));
        let (found, _) = holders_below(&dir);
        let how = |pid: u32| found.iter().find(|h| h.pid == pid).map(|h| h.how);
        assert_eq!(how(by_cwd.0.id()), Some("working directory"), "{found:?}");
        assert_eq!(how(by_file.0.id()), Some("open file"), "{found:?}");
        assert_eq!(
            found
                .iter()
                .find(|h| h.pid == by_cwd.0.id())
                .unwrap()
                .command,
            "sleep"
        );
        assert!(found.windows(2).all(|w| w[0].pid < w[1].pid));
        // Nothing of them below another directory.
        let other = TempDir::new("holders-none");
        let (none, _) = holders_below(&std::fs::canonicalize(other.path()).unwrap());
        assert!(none.is_empty(), "{none:?}");
    }

    #[test]
    fn open_files_below_lists_targets_up_to_max() {
        let t = TempDir::new("holders-files");
        let dir = std::fs::canonicalize(t.path()).unwrap();
        std::fs::write(dir.join("a"), b"x").unwrap();
        std::fs::write(dir.join("b"), b"x").unwrap();
        let a = sleeper(Path::new("/"), Some(&dir.join("a")));
        let b = sleeper(Path::new("/"), Some(&dir.join("b")));
        let all = open_files_below(t.path(), 20);
        assert!(all.contains(&(a.0.id(), dir.join("a"))), "{all:?}");
        assert!(all.contains(&(b.0.id(), dir.join("b"))), "{all:?}");
        assert_eq!(open_files_below(t.path(), 1).len(), 1);
        assert!(open_files_below(&dir.join("missing"), 20).is_empty());
    }

    #[test]
    fn holding_inodes_matches_device_and_inode_even_after_a_rename() {
        let t = TempDir::new("holders-inodes");
        let dir = std::fs::canonicalize(t.path()).unwrap();
        std::fs::write(dir.join("f"), b"x").unwrap();
        let md = std::fs::metadata(dir.join("f")).unwrap();
        let child = sleeper(&dir, Some(&dir.join("f")));
        std::fs::rename(dir.join("f"), dir.join("g")).unwrap();
        let dmd = std::fs::metadata(&dir).unwrap();
        let set: HashSet<u64> = [md.ino(), dmd.ino()].into();
        let found = holding_inodes(md.dev(), &set);
        let pid = child.0.id();
        assert!(found.contains(&(pid, Some(dir.join("g")))), "{found:?}");
        assert!(found.contains(&(pid, Some(dir.clone()))), "{found:?}");
        assert!(found.windows(2).all(|w| w[0] < w[1]));
        // Another device: nothing.
        assert!(
            !holding_inodes(md.dev() ^ 1, &set)
                .iter()
                .any(|h| h.0 == pid)
        );
    }
}
