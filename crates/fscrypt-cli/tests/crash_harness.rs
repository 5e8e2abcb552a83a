//! Crash safety of `fscrypt-rs mount`, with the real binary as the daemon
//! (`fscrypt-rs mount --foreground` in a child process, killed with SIGKILL).
//!
//! - `crash_points`: the daemon is killed at exact steps of create, mknod,
//!   mkdir, symlink, long-name side files, unlink, rmdir and rename (the
//!   test-only `FSCRYPT_RS_CRASH_AT` hook of the `crash-points` feature);
//!   after a remount the entry is absent or complete, nothing is unreadable,
//!   no internal name shows, and the backing store holds no leftovers.
//! - `crash_harness`: a writer thread does create, write, append, truncate,
//!   rename, link, unlink, mkdir, rmdir, symlink and fsync against a model
//!   while the daemon is killed at random moments; after each remount every
//!   file fsync'd before the kill (and untouched since) reads back exactly and
//!   a full tree walk passes. 20 rounds; 200 with FSCRYPT_RS_LONG_TESTS=1.
//!
//! Needs root and /dev/fuse (skips loudly without). Mounts are always undone.

use std::collections::{BTreeMap, HashSet};
use std::io::{Seek, SeekFrom, Write};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use test_support::skip::can_mount;
use test_support::{TempDir, clear_mount, is_mounted};

const BIN: &str = env!("CARGO_BIN_EXE_fscrypt-rs");

/// A vault with a key file, and the daemon serving it (if running).
struct Vault {
    t: TempDir,
    cipher: PathBuf,
    mnt: PathBuf,
    key: PathBuf,
    daemon: Option<Child>,
}

impl Vault {
    fn new(tag: &str) -> Vault {
        let t = TempDir::new(&format!("crash-{tag}"));
        let (cipher, mnt) = (t.sub("cipher"), t.sub("mnt"));
        let key = t.join("vault.key");
        test_support::cli::init_with_key_file(Path::new(BIN), &cipher, &key);
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
    fn mount(&mut self, crash_at: Option<&str>) {
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
    fn kill(&mut self) {
        if let Some(mut c) = self.daemon.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
        clear_mount(&self.mnt);
    }

    /// Waits for the daemon to die by itself (a crash point); false if it
    /// is still alive after `timeout`.
    fn died_within(&mut self, timeout: Duration) -> bool {
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
    fn unmount(&mut self) {
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

    fn p(&self, rel: &str) -> PathBuf {
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
enum Found {
    /// Contents and inode number (hard links share it).
    File(Vec<u8>, u64),
    Dir,
    Symlink(Vec<u8>),
    Other,
}

/// Stats, reads and readlinks everything; returns the problems (EIO,
/// internal names) and the tree.
fn walk_mount(root: &Path) -> (Vec<String>, BTreeMap<String, Found>) {
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
fn backing_leftovers(cipher: &Path) -> Vec<String> {
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

fn check_all(v: &Vault, what: &str) -> BTreeMap<String, Found> {
    let (problems, tree) = walk_mount(&v.mnt);
    assert!(problems.is_empty(), "{what}: {problems:#?}");
    let left = backing_leftovers(&v.cipher);
    assert!(left.is_empty(), "{what}: leftovers {left:#?}");
    tree
}

fn long_name(tag: &str) -> String {
    format!("{tag}-{}", "L".repeat(200))
}

fn mkfifo(p: &Path) -> std::io::Result<()> {
    rustix::fs::mknodat(
        rustix::fs::CWD,
        p,
        rustix::fs::FileType::Fifo,
        rustix::fs::Mode::from_raw_mode(0o640),
        0,
    )
    .map_err(std::io::Error::from)
}

/// One crash point: `setup` runs with the point armed (must not reach it),
/// `trigger` must reach it (the daemon dies); `name` is then absent or
/// complete. Returns whether `name` exists after the remount.
fn crash_at(
    v: &mut Vault,
    point: &str,
    setup: &dyn Fn(&Vault),
    trigger: &dyn Fn(&Vault),
    name: &str,
) -> bool {
    v.mount(Some(point));
    setup(v);
    trigger(v);
    assert!(
        v.died_within(Duration::from_secs(20)),
        "crash point {point} was not reached"
    );
    v.mount(None);
    let tree = check_all(v, point);
    let exists = std::fs::symlink_metadata(v.p(name)).is_ok();
    if exists {
        // Complete: usable, removable, and the name can be made again.
        match tree.get(name) {
            Some(Found::Dir) => {
                std::fs::write(v.p(&format!("{name}/inner")), b"in").unwrap();
                std::fs::remove_file(v.p(&format!("{name}/inner"))).unwrap();
                std::fs::remove_dir(v.p(name)).unwrap();
            }
            Some(_) => std::fs::remove_file(v.p(name)).unwrap(),
            None => panic!("{point}: {name} exists but was not listed"),
        }
    }
    std::fs::write(v.p(name), b"again").unwrap();
    assert_eq!(std::fs::read(v.p(name)).unwrap(), b"again");
    std::fs::remove_file(v.p(name)).unwrap();
    v.unmount();
    exists
}

#[test]
fn crash_points() {
    if !can_mount("crash_points") {
        return;
    }
    let start = Instant::now();
    let mut v = Vault::new("points");
    let none = |_: &Vault| {};
    let long = long_name("file");
    let ldir = long_name("dir");
    let lsym = long_name("sym");
    let long_target = "t".repeat(4000);
    type Step = Box<dyn Fn(&Vault)>;
    let cases: Vec<(&str, Step, Step, String)> = vec![
        (
            "create:after-open",
            Box::new(none),
            Box::new(|v: &Vault| {
                let _ = std::fs::write(v.p("f1"), b"x");
            }),
            "f1".into(),
        ),
        (
            "create:after-header",
            Box::new(none),
            Box::new(|v: &Vault| {
                let _ = std::fs::write(v.p("f2"), b"x");
            }),
            "f2".into(),
        ),
        (
            "create:before-link",
            Box::new(none),
            Box::new(|v: &Vault| {
                let _ = std::fs::write(v.p("f3"), b"x");
            }),
            "f3".into(),
        ),
        (
            "create:after-link",
            Box::new(none),
            Box::new(|v: &Vault| {
                let _ = std::fs::write(v.p("f4"), b"x");
            }),
            "f4".into(),
        ),
        (
            "create:after-open",
            Box::new(none),
            Box::new({
                let l = long.clone();
                move |v: &Vault| {
                    let _ = std::fs::write(v.p(&l), b"x");
                }
            }),
            long.clone(),
        ),
        (
            "name:after-side-tmp",
            Box::new(none),
            Box::new({
                let l = long.clone();
                move |v: &Vault| {
                    let _ = std::fs::write(v.p(&l), b"x");
                }
            }),
            long.clone(),
        ),
        (
            "name:after-side",
            Box::new(none),
            Box::new({
                let l = long.clone();
                move |v: &Vault| {
                    let _ = std::fs::write(v.p(&l), b"x");
                }
            }),
            long.clone(),
        ),
        (
            "mknod:after-node",
            Box::new(none),
            Box::new(|v: &Vault| {
                let _ = mkfifo(&v.p("fifo1"));
            }),
            "fifo1".into(),
        ),
        (
            "mknod:before-rename",
            Box::new(none),
            Box::new(|v: &Vault| {
                let _ = mkfifo(&v.p("fifo2"));
            }),
            "fifo2".into(),
        ),
        (
            "mkdir:after-tmpdir",
            Box::new(none),
            Box::new(|v: &Vault| {
                let _ = std::fs::create_dir(v.p("d1"));
            }),
            "d1".into(),
        ),
        (
            "mkdir:after-meta",
            Box::new(none),
            Box::new(|v: &Vault| {
                let _ = std::fs::create_dir(v.p("d2"));
            }),
            "d2".into(),
        ),
        (
            "mkdir:before-rename",
            Box::new(none),
            Box::new({
                let l = ldir.clone();
                move |v: &Vault| {
                    let _ = std::fs::create_dir(v.p(&l));
                }
            }),
            ldir.clone(),
        ),
        (
            "symlink:after-store-write",
            Box::new(none),
            Box::new({
                let t = long_target.clone();
                move |v: &Vault| {
                    let _ = std::os::unix::fs::symlink(&t, v.p("s1"));
                }
            }),
            "s1".into(),
        ),
        (
            "symlink:after-store",
            Box::new(none),
            Box::new({
                let t = long_target.clone();
                move |v: &Vault| {
                    let _ = std::os::unix::fs::symlink(&t, v.p("s2"));
                }
            }),
            "s2".into(),
        ),
        (
            "unlink:after-unlink",
            Box::new({
                let l = long.clone();
                move |v: &Vault| std::fs::write(v.p(&l), b"data").unwrap()
            }),
            Box::new({
                let l = long.clone();
                move |v: &Vault| {
                    let _ = std::fs::remove_file(v.p(&l));
                }
            }),
            long.clone(),
        ),
        (
            "unlink:before-unstore",
            Box::new({
                let (l, t) = (lsym.clone(), long_target.clone());
                move |v: &Vault| std::os::unix::fs::symlink(&t, v.p(&l)).unwrap()
            }),
            Box::new({
                let l = lsym.clone();
                move |v: &Vault| {
                    let _ = std::fs::remove_file(v.p(&l));
                }
            }),
            lsym.clone(),
        ),
        (
            "rmdir:after-clear",
            Box::new(|v: &Vault| std::fs::create_dir(v.p("r1")).unwrap()),
            Box::new(|v: &Vault| {
                let _ = std::fs::remove_dir(v.p("r1"));
            }),
            "r1".into(),
        ),
        (
            "rmdir:after-rmdir",
            Box::new({
                let l = ldir.clone();
                move |v: &Vault| std::fs::create_dir(v.p(&l)).unwrap()
            }),
            Box::new({
                let l = ldir.clone();
                move |v: &Vault| {
                    let _ = std::fs::remove_dir(v.p(&l));
                }
            }),
            ldir.clone(),
        ),
        (
            "rename:after-clear",
            Box::new(|v: &Vault| {
                std::fs::create_dir(v.p("ra")).unwrap();
                std::fs::write(v.p("ra/keep"), b"kept").unwrap();
                std::fs::create_dir(v.p("rb")).unwrap();
            }),
            Box::new(|v: &Vault| {
                let _ = std::fs::rename(v.p("ra"), v.p("rb"));
            }),
            "rb".into(),
        ),
        (
            "rename:after-rename",
            Box::new({
                let (l, t) = (lsym.clone(), long_target.clone());
                move |v: &Vault| {
                    std::os::unix::fs::symlink(&t, v.p(&l)).unwrap();
                    std::fs::write(v.p("src"), b"src").unwrap();
                }
            }),
            Box::new({
                let l = lsym.clone();
                move |v: &Vault| {
                    let _ = std::fs::rename(v.p("src"), v.p(&l));
                }
            }),
            lsym.clone(),
        ),
    ];
    let n = cases.len();
    for (point, setup, trigger, name) in cases {
        crash_at(&mut v, point, &*setup, &*trigger, &name);
        // Leave the tree as it was for the next case (ra/rb, src).
        v.mount(None);
        for extra in ["ra", "rb"] {
            let _ = std::fs::remove_file(v.p(&format!("{extra}/keep")));
            let _ = std::fs::remove_dir(v.p(extra));
        }
        let _ = std::fs::remove_file(v.p("src"));
        check_all(&v, point);
        v.unmount();
    }
    eprintln!(
        "crash_points: {n} crash points, all left an absent or complete entry ({:.1} s)",
        start.elapsed().as_secs_f64()
    );
}

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
            panic!("seed {seed:#x} round {round}: writer error before the kill: {e}");
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
