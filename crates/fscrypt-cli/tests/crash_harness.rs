//! Crash safety of `fscrypt-rs mount` under random kills, with the real
//! binary as the daemon (`fscrypt-rs mount --foreground` in a child process,
//! killed with SIGKILL): a writer thread does create, write, append,
//! truncate, rename, link, unlink, mkdir, rmdir, symlink and fsync against a
//! model while the daemon is killed at random moments; after each remount
//! every file fsync'd before the kill (and untouched since) reads back
//! exactly and a full tree walk passes. 20 rounds; 200 with
//! FSCRYPT_RS_LONG_TESTS=1.
//!
//! Kills at exact steps are in `crash_points.rs`; the shared vault and
//! checks in `crash_common/mod.rs`.
//!
//! Needs root and /dev/fuse (skips loudly without). Mounts are always undone.

mod crash_common;

use std::collections::BTreeMap;
use std::io::{Seek, SeekFrom, Write};
use std::os::unix::fs::FileExt;
use std::path::Path;
use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crash_common::*;
use test_support::skip::can_mount;

// ------------------------------------------------------------------ harness

/// A small deterministic PRNG (xorshift64*), seeded per round.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
    fn bytes(&mut self, n: usize) -> Vec<u8> {
        (0..n).map(|_| self.next() as u8).collect()
    }
}

/// The model: every path the writer knows, and whether its current state is
/// known to be on disk (fsync'd and untouched since).
#[derive(Debug, Clone)]
enum Node {
    /// Shared content of a file (hard links share the Arc).
    File(Arc<Mutex<FileState>>),
    Dir,
    Symlink(Vec<u8>),
}

#[derive(Debug)]
struct FileState {
    content: Vec<u8>,
    durable: bool,
}

#[derive(Default)]
struct Model {
    nodes: BTreeMap<String, Node>,
}

impl Model {
    fn from_tree(tree: &BTreeMap<String, Found>) -> Model {
        let mut nodes = BTreeMap::new();
        let mut by_ino: BTreeMap<u64, Arc<Mutex<FileState>>> = BTreeMap::new();
        for (p, f) in tree {
            let n = match f {
                Found::File(d, ino) => Node::File(
                    by_ino
                        .entry(*ino)
                        .or_insert_with(|| {
                            Arc::new(Mutex::new(FileState {
                                content: d.clone(),
                                durable: true,
                            }))
                        })
                        .clone(),
                ),
                Found::Dir => Node::Dir,
                Found::Symlink(t) => Node::Symlink(t.clone()),
                Found::Other => continue,
            };
            nodes.insert(p.clone(), n);
        }
        Model { nodes }
    }
    fn of_kind(&self, want: fn(&Node) -> bool) -> Vec<String> {
        self.nodes
            .iter()
            .filter(|(_, n)| want(n))
            .map(|(p, _)| p.clone())
            .collect()
    }
    fn dirs(&self) -> Vec<String> {
        let mut d = vec![String::new()];
        d.extend(self.of_kind(|n| matches!(n, Node::Dir)));
        d
    }
    fn files(&self) -> Vec<String> {
        self.of_kind(|n| matches!(n, Node::File(_)))
    }
    /// Marks everything at or under `path` as not known on disk.
    fn touch(&self, path: &str) {
        for (p, n) in &self.nodes {
            if (p == path || p.starts_with(&format!("{path}/")))
                && let Node::File(f) = n
            {
                f.lock().unwrap().durable = false;
            }
        }
    }
    fn is_empty_dir(&self, path: &str) -> bool {
        !self
            .nodes
            .keys()
            .any(|p| p.starts_with(&format!("{path}/")))
    }
}

fn join(dir: &str, name: &str) -> String {
    if dir.is_empty() {
        name.to_owned()
    } else {
        format!("{dir}/{name}")
    }
}

/// Counters of one run of the harness.
#[derive(Default, Debug)]
struct Tally {
    ops: u64,
    fsyncs: u64,
}

/// One writer op; `Err` only for unexpected errors.
fn writer_op(
    mnt: &Path,
    m: &mut Model,
    rng: &mut Rng,
    seq: &mut u64,
    t: &mut Tally,
) -> Result<(), String> {
    let abs = |rel: &str| mnt.join(rel);
    *seq += 1;
    let fresh = |rng: &mut Rng, seq: u64| {
        if rng.below(6) == 0 {
            format!("n{seq}-{}", "x".repeat(180 + rng.below(60)))
        } else {
            format!("n{seq}")
        }
    };
    let dirs = m.dirs();
    let files = m.files();
    let e = |what: &str, err: std::io::Error| format!("{what}: {err}");
    // Keep the tree bounded: past 120 files, every other op is an unlink.
    let pick = if files.len() > 120 && rng.below(2) == 0 {
        9
    } else {
        rng.below(14)
    };
    match pick {
        // create
        0 | 1 => {
            let p = join(&dirs[rng.below(dirs.len())], &fresh(rng, *seq));
            let data = {
                let n = rng.below(9000);
                rng.bytes(n)
            };
            let st = Arc::new(Mutex::new(FileState {
                content: Vec::new(),
                durable: false,
            }));
            m.nodes.insert(p.clone(), Node::File(st.clone()));
            std::fs::write(abs(&p), &data).map_err(|x| e("create", x))?;
            st.lock().unwrap().content = data;
        }
        // write in place, append, truncate
        2..=4 if !files.is_empty() => {
            let p = &files[rng.below(files.len())];
            let Some(Node::File(st)) = m.nodes.get(p).cloned() else {
                return Ok(());
            };
            m.touch(p);
            let mut f = std::fs::OpenOptions::new()
                .write(true)
                .open(abs(p))
                .map_err(|x| e("open", x))?;
            let mut s = st.lock().unwrap();
            match rng.below(3) {
                0 => {
                    let off = rng.below(s.content.len() + 100);
                    let data = {
                        let n = 1 + rng.below(5000);
                        rng.bytes(n)
                    };
                    f.write_all_at(&data, off as u64)
                        .map_err(|x| e("write", x))?;
                    if s.content.len() < off + data.len() {
                        s.content.resize(off + data.len(), 0);
                    }
                    s.content[off..off + data.len()].copy_from_slice(&data);
                }
                1 => {
                    let data = {
                        let n = 1 + rng.below(5000);
                        rng.bytes(n)
                    };
                    f.seek(SeekFrom::End(0)).map_err(|x| e("seek", x))?;
                    f.write_all(&data).map_err(|x| e("append", x))?;
                    s.content.extend_from_slice(&data);
                }
                _ => {
                    let len = rng.below(s.content.len() + 6000);
                    f.set_len(len as u64).map_err(|x| e("truncate", x))?;
                    s.content.resize(len, 0);
                }
            }
        }
        // fsync
        5 | 6 if !files.is_empty() => {
            let p = &files[rng.below(files.len())];
            let Some(Node::File(st)) = m.nodes.get(p).cloned() else {
                return Ok(());
            };
            let f = std::fs::File::open(abs(p)).map_err(|x| e("open", x))?;
            f.sync_all().map_err(|x| e("fsync", x))?;
            st.lock().unwrap().durable = true;
            t.fsyncs += 1;
        }
        // rename a file, maybe over another
        7 if !files.is_empty() => {
            let src = files[rng.below(files.len())].clone();
            let dst = if rng.below(3) == 0 {
                files[rng.below(files.len())].clone()
            } else {
                join(&dirs[rng.below(dirs.len())], &fresh(rng, *seq))
            };
            if src == dst {
                return Ok(());
            }
            if let (Some(Node::File(a)), Some(Node::File(b))) =
                (m.nodes.get(&src), m.nodes.get(&dst))
                && Arc::ptr_eq(a, b)
            {
                // Two links of one file: rename does nothing (POSIX).
                return Ok(());
            }
            m.touch(&src);
            m.touch(&dst);
            std::fs::rename(abs(&src), abs(&dst)).map_err(|x| e("rename", x))?;
            let n = m.nodes.remove(&src).unwrap();
            m.nodes.insert(dst, n);
        }
        // hard link
        8 if !files.is_empty() => {
            let src = files[rng.below(files.len())].clone();
            let dst = join(&dirs[rng.below(dirs.len())], &fresh(rng, *seq));
            m.touch(&src);
            let n = m.nodes[&src].clone();
            m.nodes.insert(dst.clone(), n);
            std::fs::hard_link(abs(&src), abs(&dst)).map_err(|x| e("link", x))?;
        }
        // unlink a file or symlink
        9 => {
            let cands = m.of_kind(|n| !matches!(n, Node::Dir));
            if cands.is_empty() {
                return Ok(());
            }
            let p = cands[rng.below(cands.len())].clone();
            m.touch(&p);
            std::fs::remove_file(abs(&p)).map_err(|x| e("unlink", x))?;
            m.nodes.remove(&p);
        }
        // mkdir
        10 => {
            if dirs.len() > 12 {
                return Ok(());
            }
            let p = join(&dirs[rng.below(dirs.len())], &fresh(rng, *seq));
            std::fs::create_dir(abs(&p)).map_err(|x| e("mkdir", x))?;
            m.nodes.insert(p, Node::Dir);
        }
        // rmdir an empty dir, or rename an empty dir over another
        11 => {
            let empty: Vec<String> = dirs
                .iter()
                .filter(|d| !d.is_empty() && m.is_empty_dir(d))
                .cloned()
                .collect();
            if empty.is_empty() {
                return Ok(());
            }
            let d = empty[rng.below(empty.len())].clone();
            if empty.len() > 1 && rng.below(2) == 0 {
                let over = empty[rng.below(empty.len())].clone();
                if over == d || over.starts_with(&format!("{d}/")) {
                    return Ok(());
                }
                std::fs::rename(abs(&d), abs(&over)).map_err(|x| e("rename dir", x))?;
                m.nodes.remove(&d);
            } else {
                std::fs::remove_dir(abs(&d)).map_err(|x| e("rmdir", x))?;
                m.nodes.remove(&d);
            }
        }
        // symlink (short, or long: the symlink store)
        _ => {
            let p = join(&dirs[rng.below(dirs.len())], &fresh(rng, *seq));
            let len = if rng.below(3) == 0 {
                3000 + rng.below(1096)
            } else {
                1 + rng.below(100)
            };
            let target: Vec<u8> = (0..len)
                .map(|i| b'a' + ((i + *seq as usize) % 26) as u8)
                .collect();
            let os = std::ffi::OsStr::from_encoded_bytes_unchecked_safe(&target);
            std::os::unix::fs::symlink(os, abs(&p)).map_err(|x| e("symlink", x))?;
            m.nodes.insert(p, Node::Symlink(target));
        }
    }
    t.ops += 1;
    Ok(())
}

/// `OsStr` from ASCII bytes without `unsafe`.
trait FromAscii {
    fn from_encoded_bytes_unchecked_safe(b: &[u8]) -> &std::ffi::OsStr;
}
impl FromAscii for std::ffi::OsStr {
    fn from_encoded_bytes_unchecked_safe(b: &[u8]) -> &std::ffi::OsStr {
        std::ffi::OsStr::new(std::str::from_utf8(b).unwrap())
    }
}

#[test]
fn crash_harness() {
    if !can_mount("crash_harness") {
        return;
    }
    let rounds = test_support::env::short_or_long(20, 200);
    let start = Instant::now();
    let mut v = Vault::new("harness");
    let mut seed = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos() as u64
        | 1;
    let mut tally = Tally::default();
    let mut checked_files = 0u64;
    let mut checked_durable = 0u64;
    let mut failures = Vec::new();
    let mut model = Model::default();
    for round in 0..rounds {
        v.mount(None);
        // After the recovery pass: the previous round's fsync'd files.
        for (p, n) in &model.nodes {
            if let Node::File(st) = n {
                let s = st.lock().unwrap();
                if s.durable {
                    checked_durable += 1;
                    match std::fs::read(v.p(p)) {
                        Ok(d) if d == s.content => {}
                        Ok(d) => failures.push(format!(
                            "round {round}: {p}: fsync'd {} bytes, read back {} different bytes",
                            s.content.len(),
                            d.len()
                        )),
                        Err(e) => failures.push(format!("round {round}: {p}: fsync'd, now {e}")),
                    }
                }
            }
        }
        let (problems, tree) = walk_mount(&v.mnt);
        failures.extend(problems.into_iter().map(|p| format!("round {round}: {p}")));
        // Symlinks are made in one step: one that exists has its target.
        for (p, n) in &model.nodes {
            if let (Node::Symlink(want), Some(Found::Symlink(got))) = (n, tree.get(p))
                && want != got
            {
                failures.push(format!("round {round}: symlink {p}: target changed"));
            }
        }
        failures.extend(
            backing_leftovers(&v.cipher)
                .into_iter()
                .map(|p| format!("round {round}: {p}")),
        );
        checked_files += tree.len() as u64;
        if !failures.is_empty() {
            let ls = Command::new("ls")
                .arg("-laR")
                .arg(&v.cipher)
                .output()
                .unwrap();
            eprintln!("{}", String::from_utf8_lossy(&ls.stdout));
            eprintln!(
                "{}",
                std::fs::read_to_string(v.t.join("daemon.log")).unwrap_or_default()
            );
        }
        assert!(failures.is_empty(), "seed {seed:#x}: {failures:#?}");
        model = Model::from_tree(&tree);

        // Write until the daemon is killed at a random moment.
        seed = seed
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407)
            | 1;
        let mut rng = Rng(seed);
        let killed = Arc::new(AtomicBool::new(false));
        let mnt = v.mnt.clone();
        let k = killed.clone();
        let mut m = std::mem::take(&mut model);
        let writer = std::thread::spawn(move || {
            let mut t = Tally::default();
            let mut seq = round as u64 * 10_000_000;
            let mut err = None;
            while !k.load(Ordering::SeqCst) {
                if let Err(e) = writer_op(&mnt, &mut m, &mut rng, &mut seq, &mut t) {
                    if !k.load(Ordering::SeqCst) {
                        err = Some(e);
                    }
                    break;
                }
            }
            (m, t, err)
        });
        let mut r2 = Rng(seed ^ 0x9e37_79b9_7f4a_7c15);
        std::thread::sleep(Duration::from_millis(50 + r2.below(250) as u64));
        killed.store(true, Ordering::SeqCst);
        v.kill();
        let (m, t, err) = writer.join().unwrap();
        if let Some(e) = err {
            panic!(
                "seed {seed:#x} round {round}: writer error before the kill: {e}\ndaemon log:\n{}",
                std::fs::read_to_string(v.t.join("daemon.log")).unwrap_or_default()
            );
        }
        tally.ops += t.ops;
        tally.fsyncs += t.fsyncs;
        model = m;
    }
    // A last check after a clean unmount.
    v.mount(None);
    let tree = check_all(&v, "final");
    checked_files += tree.len() as u64;
    v.unmount();
    eprintln!(
        "crash_harness: {rounds} rounds, {} ops, {} fsyncs, {checked_durable} fsync'd files read back, \
         {checked_files} entries walked, {} failures ({:.1} s)",
        tally.ops,
        tally.fsyncs,
        failures.len(),
        start.elapsed().as_secs_f64()
    );
}
