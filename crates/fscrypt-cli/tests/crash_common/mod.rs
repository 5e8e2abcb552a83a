//! Shared by the crash tests (`crash_points.rs`, `crash_harness.rs`): a
//! vault served by the real binary as a killable daemon, and the full check
//! after a remount (a walk of the mount and of the backing store).

use std::collections::{BTreeMap, HashSet};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use test_support::{TempDir, clear_mount, is_mounted};

pub const BIN: &str = env!("CARGO_BIN_EXE_fscrypt-rs");

/// A vault with a key file, and the daemon serving it (if running).
pub struct Vault {
    pub t: TempDir,
    pub cipher: PathBuf,
    pub mnt: PathBuf,
    pub key: PathBuf,
    pub daemon: Option<Child>,
}

impl Vault {
    pub fn new(tag: &str) -> Vault {
        Vault::with_init(tag, &[])
    }

    /// A vault made by `init --new-key-file` with `extra` arguments.
    pub fn with_init(tag: &str, extra: &[&str]) -> Vault {
        let t = TempDir::new(&format!("crash-{tag}"));
        let (cipher, mnt) = (t.sub("cipher"), t.sub("mnt"));
        let key = t.join("vault.key");
        test_support::run::succeed(
            Command::new(BIN)
                .arg("init")
                .arg(&cipher)
                .arg("--new-key-file")
                .arg(&key)
                .args(extra)
                .env(
                    "FSCRYPT_RS_INSECURE_ARGON2_PARAMS",
                    test_support::cli::CHEAP_ARGON2,
                ),
        );
        Vault {
            t,
            cipher,
            mnt,
            key,
            daemon: None,
        }
    }

    /// Starts the daemon (`crash_at`: the crash point to arm) and waits for
    /// the mount.
    pub fn mount(&mut self, crash_at: Option<&str>) {
        let log = std::fs::File::create(self.t.join("daemon.log")).unwrap();
        let mut cmd = Command::new(BIN);
        cmd.arg("mount")
            .arg(&self.cipher)
            .arg(&self.mnt)
            .arg("--key-file")
            .arg(&self.key)
            .arg("--foreground")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log)
            .env("RUST_LOG", "info")
            .env_remove("FSCRYPT_RS_CRASH_AT");
        if let Some(p) = crash_at {
            cmd.env("FSCRYPT_RS_CRASH_AT", p);
        }
        let mut child = cmd.spawn().unwrap();
        let start = Instant::now();
        while !is_mounted(&self.mnt) {
            if let Some(st) = child.try_wait().unwrap() {
                panic!(
                    "daemon exited before mounting ({st}): {}",
                    std::fs::read_to_string(self.t.join("daemon.log")).unwrap_or_default()
                );
            }
            assert!(
                start.elapsed() < Duration::from_secs(60),
                "mount did not appear"
            );
            std::thread::sleep(Duration::from_millis(5));
        }
        self.daemon = Some(child);
    }

    /// kill -9 of the daemon, then clears the dead mount.
    pub fn kill(&mut self) {
        if let Some(mut c) = self.daemon.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
        clear_mount(&self.mnt);
    }

    /// Waits for the daemon to die by itself (a crash point); false if it
    /// is still alive after `timeout`.
    // Only `crash_points.rs` waits for a crash point; unused in the other.
    #[allow(dead_code)]
    pub fn died_within(&mut self, timeout: Duration) -> bool {
        let start = Instant::now();
        let Some(c) = self.daemon.as_mut() else {
            return true;
        };
        while start.elapsed() < timeout {
            if c.try_wait().unwrap().is_some() {
                self.daemon = None;
                clear_mount(&self.mnt);
                return true;
            }
            std::thread::sleep(Duration::from_millis(5));
        }
        false
    }

    /// A clean unmount (SIGTERM to the daemon, which unmounts).
    pub fn unmount(&mut self) {
        if let Some(mut c) = self.daemon.take() {
            let _ = Command::new("kill")
                .arg("-TERM")
                .arg(c.id().to_string())
                .status();
            let start = Instant::now();
            while c.try_wait().unwrap().is_none() && start.elapsed() < Duration::from_secs(30) {
                std::thread::sleep(Duration::from_millis(10));
            }
            let _ = c.kill();
            let _ = c.wait();
        }
        clear_mount(&self.mnt);
    }

    pub fn p(&self, rel: &str) -> PathBuf {
        self.mnt.join(rel)
    }
}

impl Drop for Vault {
    fn drop(&mut self) {
        self.kill();
    }
}

/// What a full walk of the mount found: relative path → entry.
#[derive(Debug, Clone, PartialEq)]
pub enum Found {
    /// Contents and inode number (hard links share it).
    File(Vec<u8>, u64),
    Dir,
    Symlink(Vec<u8>),
    Other,
}

/// Stats, reads and readlinks everything; returns the problems (EIO,
/// internal names) and the tree.
pub fn walk_mount(root: &Path) -> (Vec<String>, BTreeMap<String, Found>) {
    let mut problems = Vec::new();
    let mut tree = BTreeMap::new();
    let mut stack = vec![(root.to_path_buf(), String::new())];
    while let Some((dir, rel)) = stack.pop() {
        let rd = match std::fs::read_dir(&dir) {
            Ok(rd) => rd,
            Err(e) => {
                problems.push(format!("readdir {rel:?}: {e}"));
                continue;
            }
        };
        for e in rd {
            let e = match e {
                Ok(e) => e,
                Err(err) => {
                    problems.push(format!("readdir entry in {rel:?}: {err}"));
                    continue;
                }
            };
            let name = e.file_name().to_string_lossy().into_owned();
            let r = if rel.is_empty() {
                name.clone()
            } else {
                format!("{rel}/{name}")
            };
            if name.starts_with("fscrypt.") {
                problems.push(format!("internal name visible: {r:?}"));
            }
            let p = e.path();
            let m = match std::fs::symlink_metadata(&p) {
                Ok(m) => m,
                Err(err) => {
                    problems.push(format!("stat {r:?}: {err}"));
                    continue;
                }
            };
            let ft = m.file_type();
            if ft.is_dir() {
                tree.insert(r.clone(), Found::Dir);
                stack.push((p, r));
            } else if ft.is_symlink() {
                match std::fs::read_link(&p) {
                    Ok(t) => {
                        let t = t.into_os_string().into_encoded_bytes();
                        if t.len() as u64 != m.len() {
                            problems.push(format!("symlink {r:?}: st_size != target length"));
                        }
                        tree.insert(r, Found::Symlink(t));
                    }
                    Err(err) => problems.push(format!("readlink {r:?}: {err}")),
                }
            } else if ft.is_file() {
                match std::fs::read(&p) {
                    Ok(d) => {
                        if d.len() as u64 != m.len() {
                            problems.push(format!("file {r:?}: read length != st_size"));
                        }
                        tree.insert(r, Found::File(d, std::os::unix::fs::MetadataExt::ino(&m)));
                    }
                    Err(err) => problems.push(format!("read {r:?}: {err}")),
                }
            } else {
                tree.insert(r, Found::Other);
            }
        }
    }
    (problems, tree)
}

/// Leftovers in the backing store (after a recovery pass there must be none):
/// temporary names, side files without entry, entries without side file,
/// 0-byte backing files, directories without metadata, unreferenced store
/// objects.
pub fn backing_leftovers(cipher: &Path) -> Vec<String> {
    let mut bad = Vec::new();
    let mut referenced = HashSet::new();
    let mut stack = vec![(cipher.to_path_buf(), true)];
    while let Some((dir, _root)) = stack.pop() {
        let names: HashSet<String> = std::fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        if !names.contains("fscrypt.dir") {
            bad.push(format!("no fscrypt.dir in {}", dir.display()));
        }
        for n in &names {
            let p = dir.join(n);
            let m = std::fs::symlink_metadata(&p).unwrap();
            if n.starts_with("fscrypt.tmp.") {
                bad.push(format!("temporary name {}", p.display()));
            }
            if let Some(entry) = n.strip_suffix(".name")
                && n.starts_with("fscrypt.long.")
                && !names.contains(entry)
            {
                bad.push(format!("orphan side file {}", p.display()));
            }
            if n.starts_with("fscrypt.long.")
                && !n.ends_with(".name")
                && !names.contains(&format!("{n}.name"))
            {
                bad.push(format!("long entry without side file {}", p.display()));
            }
            let user = !n.starts_with("fscrypt.")
                || (n.starts_with("fscrypt.long.") && !n.ends_with(".name"));
            if !user {
                continue;
            }
            if m.file_type().is_symlink() {
                let t = std::fs::read_link(&p).unwrap();
                if let Some(id) = t.to_str().and_then(|t| t.strip_prefix("fscrypt.symlink.")) {
                    referenced.insert(id.to_owned());
                }
            } else if m.is_dir() {
                stack.push((p, false));
            } else if m.is_file() && m.len() == 0 {
                bad.push(format!("0-byte backing file {}", p.display()));
            }
        }
    }
    if let Ok(rd) = std::fs::read_dir(cipher.join("fscrypt.symlinks")) {
        for e in rd {
            let n = e.unwrap().file_name().to_string_lossy().into_owned();
            if !referenced.contains(&n) {
                bad.push(format!("unreferenced symlink store object {n}"));
            }
        }
    }
    bad
}

pub fn check_all(v: &Vault, what: &str) -> BTreeMap<String, Found> {
    let (problems, tree) = walk_mount(&v.mnt);
    assert!(problems.is_empty(), "{what}: {problems:#?}");
    let left = backing_leftovers(&v.cipher);
    assert!(left.is_empty(), "{what}: leftovers {left:#?}");
    tree
}
