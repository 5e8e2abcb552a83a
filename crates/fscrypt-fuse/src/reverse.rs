//! `fscrypt-rs mount --reverse PLAIN VIEW` (issue 24): a read-only view of
//! a plaintext directory whose tree is the format 3 vault of it, so that a
//! backup tool copying the view makes a complete vault that `fscrypt-rs
//! mount` opens. Served by the same engine (`ops.rs`, `/dev/fuse` and FUSE
//! over io_uring) as the vault; the bytes come from
//! [`fscrypt_vault::reverse`] (`docs/vault-format.md` §13).
//!
//! The view of a directory lists `fscrypt.dir` (its derived context), one
//! entry per plaintext entry under its tagged encrypted name, a side file
//! per long name and, in the root, `fscrypt.vault.json` (the reverse
//! config, [`REVERSE_CONFIG_NAME`], which is itself never listed) and the
//! clean marker `fscrypt.clean`. Regular files are computed on the fly, one
//! group of 128 data units at a time (the last group computed is kept per
//! open file, so a sequential read encrypts each unit once); symlinks carry
//! their encrypted target; FIFOs, sockets and devices are shown as they are.
//! Hard links are separate files (each path has its own nonce). Extended
//! attributes are not shown. Symlink targets too long for the inline form
//! are markers of objects in the root's `fscrypt.symlinks/`, which a walk
//! of the whole view fills when it is opened.
//!
//! The plaintext is untrusted in shape: every object is opened from the
//! root descriptor with `openat2(RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS |
//! RESOLVE_NO_MAGICLINKS)` and `O_NOFOLLOW`, so no symlink in the plaintext
//! is ever followed, and it is read with the daemon's (the mounting user's)
//! rights. Log lines name node ids, never plaintext names or contents.
//! Every request that would write fails with EROFS.

use std::collections::HashMap;
use std::ffi::OsStr;
use std::fs::File;
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, SystemTime};

use fscrypt::{ContextV2, FileType as Ft, InodeCrypt};
use fscrypt_vault::reverse::{
    Excludes, FileView, Group, NonceKind, REVERSE_CONFIG_NAME, ReverseError, ReverseKeys, dir_meta,
};
use fscrypt_vault::{CONFIG_NAME, layout};
use fuser::{FileAttr, FileType, FopenFlags, INodeNo};
use rustix::fs::{Mode, OFlags, ResolveFlags};
use rustix::io::Errno;

use crate::backend::Backend;
use crate::error::WrongType;
use crate::fs::FsStats;
use crate::handles::FileHandle;
use crate::inodes::InodeNo;
use crate::mount::session::{self, Options};
use crate::{Error, Result};

/// Largest read served at once.
const MAX_READ: usize = 1 << 20;
/// Directory listings kept between requests.
const DIR_CACHE: usize = 256;

/// How to mount a reverse view.
#[derive(Debug)]
pub struct ReverseMountConfig {
    /// The plaintext directory.
    pub plain_dir: std::path::PathBuf,
    /// Let other users access the view (FUSE `allow_other`; the kernel
    /// checks the plaintext's modes and owners, `default_permissions`).
    pub allow_other: bool,
    /// Source name shown in /proc/mounts.
    pub fs_name: String,
    /// Serve through FUSE over io_uring when the kernel offers it.
    pub io_uring: bool,
    /// Entries left out of the view.
    pub excludes: Excludes,
    /// Unmount once unused this long (as [`crate::MountConfig::idle`]).
    pub idle: Option<Duration>,
}

impl ReverseMountConfig {
    fn options(&self) -> Options {
        Options {
            fs_name: self.fs_name.clone(),
            read_only: true,
            allow_other: self.allow_other,
            // The daemon reads the plaintext tree with its own rights and
            // serves every file's ciphertext alike: the kernel checks.
            default_permissions: true,
            suid: false,
            dev: false,
            noexec: false,
            io_uring: self.io_uring,
        }
    }
}

/// What a view node is.
#[derive(Debug, Clone)]
enum What {
    /// A plaintext directory (`rel`: its path below the root, `/`-joined,
    /// empty for the root).
    Dir { rel: Vec<u8>, ctx: ContextV2 },
    /// A plaintext regular file and its binding to its view name.
    File {
        rel: Vec<u8>,
        ctx: ContextV2,
        binding: [u8; 16],
    },
    /// A plaintext symlink.
    Symlink { rel: Vec<u8>, ctx: ContextV2 },
    /// A FIFO, socket or device node (not encrypted, as in a vault).
    Special { rel: Vec<u8> },
    /// Bytes made by the view: `fscrypt.dir`, a side file, the clean marker.
    Bytes { data: Arc<[u8]> },
    /// The reverse config, shown as `fscrypt.vault.json`.
    Config,
    /// The symlink store `fscrypt.symlinks/`: the store objects of the
    /// symlinks whose targets do not fit inline.
    Store,
}

impl What {
    fn same_object(&self, other: &What) -> bool {
        match (self, other) {
            (What::Dir { rel: a, ctx: c }, What::Dir { rel: b, ctx: d })
            | (What::Symlink { rel: a, ctx: c }, What::Symlink { rel: b, ctx: d }) => {
                a == b && c == d
            }
            (What::File { rel: a, ctx: c, .. }, What::File { rel: b, ctx: d, .. }) => {
                a == b && c == d
            }
            (What::Special { rel: a }, What::Special { rel: b }) => a == b,
            (What::Bytes { data: a }, What::Bytes { data: b }) => a == b,
            (What::Config, What::Config) | (What::Store, What::Store) => true,
            _ => false,
        }
    }
}

/// A node of the view.
#[derive(Debug)]
struct Node {
    what: What,
}

/// One entry of a directory's view.
#[derive(Debug, Clone)]
struct Entry {
    name: Vec<u8>,
    what: What,
    kind: FileType,
}

/// A directory's view, with the plaintext directory's change stamp it was
/// made from.
#[derive(Debug)]
struct Listing {
    stamp: (u64, i64, u64, i64, u64),
    entries: Vec<Entry>,
    by_name: HashMap<Vec<u8>, usize>,
}

impl Listing {
    /// `entries` sorted by view name, with the index of each name.
    fn new(stamp: (u64, i64, u64, i64, u64), mut entries: Vec<Entry>) -> Listing {
        entries.sort_by(|a, b| a.name.cmp(&b.name));
        let by_name = entries
            .iter()
            .enumerate()
            .map(|(i, e)| (e.name.clone(), i))
            .collect();
        Listing {
            stamp,
            entries,
            by_name,
        }
    }
}

/// The node table: an id is handed out per (parent, view name, object)
/// and kept while the kernel holds lookups of it (FORGET drops it).
#[derive(Debug, Default)]
struct Nodes {
    by_id: HashMap<u64, Arc<Node>>,
    by_name: HashMap<(u64, Vec<u8>), u64>,
    /// Per id: the lookups the kernel holds and the name it was found by.
    refs: HashMap<u64, (u64, (u64, Vec<u8>))>,
}

/// The node id (and inode number) of the entry `name` of directory node
/// `parent`: 63 bits of SHA-256 over both, never 0 or 1 (the root), so
/// the same path has the same inode number at every mount.
fn stable_id(parent: u64, name: &[u8]) -> u64 {
    let mut b = Vec::with_capacity(8 + name.len());
    b.extend_from_slice(&parent.to_le_bytes());
    b.extend_from_slice(name);
    let h = fscrypt_crypto::sha256(&b);
    let mut id = [0u8; 8];
    id.copy_from_slice(&h[..8]);
    (u64::from_le_bytes(id) >> 1).max(2)
}

/// An open file or directory.
enum Handle {
    File(Arc<OpenFile>),
    /// Bytes the view makes ([`What::Bytes`], [`What::Config`]).
    Made(What),
    /// A directory's listing and its node id.
    Dir(u64, Arc<Listing>),
}

/// Groups kept per open file: the kernel's read-ahead asks for a group's
/// parts from several threads at once.
const GROUPS_KEPT: usize = 4;

/// A group being computed or computed: the first reader computes it, the
/// others wait for it (`None`: computing it failed).
type GroupCell = Arc<std::sync::OnceLock<Option<Arc<Group>>>>;

/// An open regular file: its plaintext, its view, its key and the groups
/// computed last.
struct OpenFile {
    plain: File,
    view: FileView,
    crypt: InodeCrypt,
    groups: Mutex<std::collections::VecDeque<(u64, GroupCell)>>,
    /// A data buffer of a group no reader holds any more.
    spare: Mutex<Option<Vec<u8>>>,
}

/// The read-only view of a plaintext directory as a format 3 vault.
pub struct ReverseFs {
    keys: ReverseKeys,
    root: OwnedFd,
    excludes: Excludes,
    /// Owner and times of the bytes the view makes itself: the reverse
    /// config's owner, and the Unix epoch as every time (constant, so a
    /// protector change, which rewrites the config, does not make a backup
    /// copy every `fscrypt.dir` again).
    meta: (u32, u32, SystemTime),
    nodes: Mutex<Nodes>,
    dirs: Mutex<HashMap<u64, Arc<Listing>>>,
    handles: Mutex<HashMap<u64, Handle>>,
    next_fh: AtomicU64,
}

impl std::fmt::Debug for ReverseFs {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ReverseFs").finish_non_exhaustive()
    }
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

fn rev_err(e: ReverseError) -> Error {
    match e {
        ReverseError::Format(e) => Error::Format(e),
        ReverseError::Io(e) => Error::Io(e),
        ReverseError::TargetTooLong => Error::NameTooLong,
        ReverseError::TooLarge => Error::FileTooBig,
        _ => Error::Io(std::io::Error::other("reverse view")),
    }
}

fn time(sec: i64, nsec: u64) -> SystemTime {
    let nsec = u32::try_from(nsec.min(999_999_999)).unwrap_or(0);
    if sec >= 0 {
        SystemTime::UNIX_EPOCH + Duration::new(sec.unsigned_abs(), nsec)
    } else {
        SystemTime::UNIX_EPOCH - Duration::from_secs(sec.unsigned_abs())
            + Duration::from_nanos(u64::from(nsec))
    }
}

fn file_type(mode: u32) -> FileType {
    match mode & libc::S_IFMT {
        libc::S_IFDIR => FileType::Directory,
        libc::S_IFLNK => FileType::Symlink,
        libc::S_IFCHR => FileType::CharDevice,
        libc::S_IFBLK => FileType::BlockDevice,
        libc::S_IFIFO => FileType::NamedPipe,
        libc::S_IFSOCK => FileType::Socket,
        _ => FileType::RegularFile,
    }
}

/// `rel` joined with `name`.
fn join(rel: &[u8], name: &[u8]) -> Vec<u8> {
    let mut v = Vec::with_capacity(rel.len() + 1 + name.len());
    if !rel.is_empty() {
        v.extend_from_slice(rel);
        v.push(b'/');
    }
    v.extend_from_slice(name);
    v
}

impl ReverseFs {
    /// Serves the view of `plain_dir` with `keys`, leaving out what
    /// `excludes` matches.
    ///
    /// # Errors
    /// [`Error::Mount`] when the plaintext directory or its reverse config
    /// cannot be opened.
    pub fn new(keys: ReverseKeys, plain_dir: &Path, excludes: Excludes) -> Result<ReverseFs> {
        let root = rustix::fs::open(
            plain_dir,
            OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC,
            Mode::empty(),
        )
        .map_err(|e| Error::Mount(format!("{}: {e}", plain_dir.display())))?;
        let st = rustix::fs::statat(
            &root,
            REVERSE_CONFIG_NAME,
            rustix::fs::AtFlags::SYMLINK_NOFOLLOW,
        )
        .map_err(|e| {
            Error::Mount(format!(
                "{}: no reverse config ({e}); run `fscrypt-rs init --reverse` first",
                plain_dir.display()
            ))
        })?;
        let root_ctx = keys.root_context();
        let mut nodes = Nodes::default();
        nodes.by_id.insert(
            1,
            Arc::new(Node {
                what: What::Dir {
                    rel: Vec::new(),
                    ctx: root_ctx,
                },
            }),
        );
        Ok(ReverseFs {
            keys,
            root,
            excludes,
            meta: (st.st_uid, st.st_gid, SystemTime::UNIX_EPOCH),
            nodes: Mutex::new(nodes),
            dirs: Mutex::new(HashMap::new()),
            handles: Mutex::new(HashMap::new()),
            next_fh: AtomicU64::new(1),
        })
    }

    /// Opens `rel` below the root, never following a symlink (the final
    /// component included: with `O_PATH` a symlink gives its own fd).
    fn open_rel(&self, rel: &[u8], flags: OFlags) -> Result<OwnedFd> {
        let path: &[u8] = if rel.is_empty() { b"." } else { rel };
        let how = ResolveFlags::BENEATH | ResolveFlags::NO_SYMLINKS | ResolveFlags::NO_MAGICLINKS;
        for _ in 0..safe_open::RETRIES {
            match rustix::fs::openat2(
                &self.root,
                path,
                flags | OFlags::NOFOLLOW | OFlags::CLOEXEC,
                Mode::empty(),
                how,
            ) {
                Err(Errno::AGAIN) => continue,
                Err(Errno::LOOP) => return Err(Error::Stale),
                // No openat2 (before Linux 5.6) or a seccomp filter
                // refusing it: one component at a time, each without
                // following a symlink.
                Err(Errno::NOSYS | Errno::PERM) => return self.open_walk(path, flags),
                r => return r.map_err(|e| Error::Io(e.into())),
            }
        }
        Err(Error::Io(std::io::Error::from(Errno::AGAIN)))
    }

    /// [`ReverseFs::open_rel`] through [`safe_open::open_entry`], one
    /// component at a time.
    fn open_walk(&self, path: &[u8], flags: OFlags) -> Result<OwnedFd> {
        let err = |e: safe_open::Error| match e.errno() {
            Errno::LOOP => Error::Stale,
            e => Error::Io(e.into()),
        };
        let mut dir = rustix::io::dup(&self.root)?;
        let parts: Vec<&[u8]> = path
            .split(|&b| b == b'/')
            .filter(|c| !c.is_empty() && *c != b".")
            .collect();
        let Some((last, inner)) = parts.split_last() else {
            return Ok(rustix::fs::openat(
                &self.root,
                ".",
                flags | OFlags::CLOEXEC,
                Mode::empty(),
            )?);
        };
        for c in inner {
            dir = safe_open::open_entry(
                dir.as_fd(),
                c,
                OFlags::PATH | OFlags::DIRECTORY,
                Mode::empty(),
                safe_open::Mounts::Cross,
            )
            .map_err(err)?;
        }
        safe_open::open_entry(
            dir.as_fd(),
            last,
            flags,
            Mode::empty(),
            safe_open::Mounts::Cross,
        )
        .map_err(err)
    }

    fn stat_rel(&self, rel: &[u8]) -> Result<rustix::fs::Stat> {
        let fd = self.open_rel(rel, OFlags::PATH)?;
        Ok(rustix::fs::fstat(&fd)?)
    }

    fn node(&self, i: u64) -> Result<Arc<Node>> {
        lock(&self.nodes)
            .by_id
            .get(&i)
            .cloned()
            .ok_or(Error::NotFound)
    }

    /// The node id of `what` named `name` in `parent` (the same id as
    /// before while it is the same object), counted as one lookup the
    /// kernel holds (under the table's lock, so a FORGET racing this
    /// lookup never drops the node it returns).
    fn node_id(&self, parent: u64, name: &[u8], what: &What) -> u64 {
        let mut n = lock(&self.nodes);
        let key = (parent, name.to_vec());
        if let Some(&id) = n.by_name.get(&key)
            && n.by_id.get(&id).is_some_and(|o| o.what.same_object(what))
        {
            if let Some(r) = n.refs.get_mut(&id) {
                r.0 += 1;
            }
            return id;
        }
        // Stable: the same id at every mount (backup tools that key their
        // caches on inode numbers, as restic and borg do, see the same
        // file); the next free one if another object holds it.
        let mut id = stable_id(parent, name);
        while n.by_id.contains_key(&id) {
            id = id.wrapping_add(1).max(2);
        }
        n.by_id.insert(id, Arc::new(Node { what: what.clone() }));
        n.refs.insert(id, (1, key.clone()));
        n.by_name.insert(key, id);
        id
    }

    fn bytes_attr(&self, id: u64, len: usize, perm: u16) -> FileAttr {
        let (uid, gid, t) = self.meta;
        FileAttr {
            ino: INodeNo(id),
            size: len as u64,
            blocks: (len as u64).div_ceil(512),
            atime: t,
            mtime: t,
            ctime: t,
            crtime: SystemTime::UNIX_EPOCH,
            kind: FileType::RegularFile,
            perm,
            nlink: 1,
            uid,
            gid,
            rdev: 0,
            blksize: 4096,
            flags: 0,
        }
    }

    fn attr(&self, id: u64, node: &Node) -> Result<FileAttr> {
        let (rel, size) = match &node.what {
            What::Bytes { data } => return Ok(self.bytes_attr(id, data.len(), 0o644)),
            What::Store => {
                let mut a = self.bytes_attr(id, 4096, 0o700);
                a.kind = FileType::Directory;
                a.nlink = 2;
                return Ok(a);
            }
            What::Config => {
                let st = rustix::fs::statat(
                    &self.root,
                    REVERSE_CONFIG_NAME,
                    rustix::fs::AtFlags::SYMLINK_NOFOLLOW,
                )?;
                let mut a = self.bytes_attr(id, st.st_size as usize, (st.st_mode & 0o777) as u16);
                a.uid = st.st_uid;
                a.gid = st.st_gid;
                return Ok(a);
            }
            What::Dir { rel, .. } | What::Special { rel } | What::File { rel, .. } => (rel, None),
            What::Symlink { rel, ctx } => {
                let target = self.view_target(rel, ctx)?;
                (rel, Some(target.len() as u64))
            }
        };
        let st = self.stat_rel(rel)?;
        let kind = file_type(st.st_mode);
        let expected = match &node.what {
            What::Dir { .. } => kind == FileType::Directory,
            What::File { .. } => kind == FileType::RegularFile,
            What::Symlink { .. } => kind == FileType::Symlink,
            _ => !matches!(
                kind,
                FileType::Directory | FileType::RegularFile | FileType::Symlink
            ),
        };
        if !expected {
            return Err(Error::Stale);
        }
        let size = match (&node.what, size) {
            (_, Some(s)) => s,
            (What::File { .. }, None) => fscrypt_vault::integrity::units::len_for_size(
                st.st_size as u64,
                self.keys.data_unit_size(),
            )
            .ok_or(Error::FileTooBig)?,
            (What::Dir { .. }, None) => 4096,
            _ => 0,
        };
        let rdev = match kind {
            FileType::CharDevice | FileType::BlockDevice => st.st_rdev as u32,
            _ => 0,
        };
        Ok(FileAttr {
            ino: INodeNo(id),
            size,
            blocks: size.div_ceil(512),
            atime: time(st.st_atime, st.st_atime_nsec),
            mtime: time(st.st_mtime, st.st_mtime_nsec),
            ctime: time(st.st_ctime, st.st_ctime_nsec),
            crtime: SystemTime::UNIX_EPOCH,
            kind,
            perm: (st.st_mode & 0o7777) as u16,
            nlink: if kind == FileType::Directory {
                st.st_nlink as u32
            } else {
                1
            },
            uid: st.st_uid,
            gid: st.st_gid,
            rdev,
            blksize: 4096,
            flags: 0,
        })
    }

    /// The view target of the symlink at `rel`.
    fn view_target(&self, rel: &[u8], ctx: &ContextV2) -> Result<Vec<u8>> {
        let fd = self.open_rel(rel, OFlags::PATH)?;
        let target = rustix::fs::readlinkat(&fd, "", Vec::new())?;
        let t = self
            .keys
            .symlink_target(ctx, target.as_bytes())
            .map_err(rev_err)?;
        Ok(t.into_bytes())
    }

    /// The view of directory node `id` (cached while the plaintext
    /// directory's change stamp stays the same).
    fn listing(&self, id: u64, rel: &[u8], ctx: &ContextV2) -> Result<Arc<Listing>> {
        let dirfd = self.open_rel(rel, OFlags::RDONLY | OFlags::DIRECTORY)?;
        let st = rustix::fs::fstat(&dirfd)?;
        let stamp = (
            st.st_ino,
            st.st_mtime,
            st.st_mtime_nsec,
            st.st_ctime,
            st.st_ctime_nsec,
        );
        if id != 0
            && let Some(l) = lock(&self.dirs).get(&id)
            && l.stamp == stamp
        {
            return Ok(l.clone());
        }
        let crypt = self.keys.crypt(ctx, Ft::Directory).map_err(rev_err)?;
        let mut entries = vec![Entry {
            name: layout::DIR_META_NAME.as_bytes().to_vec(),
            what: What::Bytes {
                data: Arc::from(&dir_meta(ctx)[..]),
            },
            kind: FileType::RegularFile,
        }];
        if rel.is_empty() {
            entries.push(Entry {
                name: CONFIG_NAME.as_bytes().to_vec(),
                what: What::Config,
                kind: FileType::RegularFile,
            });
            entries.push(Entry {
                name: layout::SYMLINK_STORE_DIR.as_bytes().to_vec(),
                what: What::Store,
                kind: FileType::Directory,
            });
            entries.push(Entry {
                name: layout::CLEAN_MARKER.as_bytes().to_vec(),
                what: What::Bytes {
                    data: Arc::from(&[][..]),
                },
                kind: FileType::RegularFile,
            });
        }
        let mut skipped = 0usize;
        let dir = rustix::fs::Dir::read_from(&dirfd)?;
        for e in dir {
            let e = e?;
            let name = e.file_name().to_bytes();
            if name == b"." || name == b".." {
                continue;
            }
            if rel.is_empty() && name == REVERSE_CONFIG_NAME.as_bytes() {
                continue;
            }
            let child = join(rel, name);
            let kind = match e.file_type() {
                rustix::fs::FileType::Unknown => match self.stat_rel(&child) {
                    Ok(st) => file_type(st.st_mode),
                    Err(_) => continue,
                },
                t => file_type(t.as_raw_mode()),
            };
            if self.excludes.excludes(&child, kind == FileType::Directory) {
                continue;
            }
            let Ok(ct) = self.keys.encrypt_name(&crypt, name) else {
                skipped += 1;
                continue;
            };
            let vname = self.keys.view_name(&ctx.nonce, &ct);
            let what = match kind {
                FileType::Directory => What::Dir {
                    rel: child,
                    ctx: self.keys.dir_context(&ctx.nonce, &ct),
                },
                FileType::RegularFile => What::File {
                    rel: child,
                    ctx: self.keys.object_context(NonceKind::File, &ctx.nonce, &ct),
                    binding: self.keys.binding(&ctx.nonce, &vname),
                },
                FileType::Symlink => {
                    let sctx = self
                        .keys
                        .object_context(NonceKind::Symlink, &ctx.nonce, &ct);
                    if let Err(e) = self.view_target(&child, &sctx) {
                        log::warn!(
                            "fscrypt-fuse: reverse: a symlink in directory node {id} is left \
                             out of the view: {e}"
                        );
                        continue;
                    }
                    What::Symlink {
                        rel: child,
                        ctx: sctx,
                    }
                }
                _ => What::Special { rel: child },
            };
            if vname.long {
                entries.push(Entry {
                    name: vname.side_file().into_bytes(),
                    what: What::Bytes {
                        data: Arc::from(&self.keys.side_file(&ctx.nonce, &ct)[..]),
                    },
                    kind: FileType::RegularFile,
                });
            }
            entries.push(Entry {
                name: vname.name.into_bytes(),
                what,
                kind,
            });
        }
        if skipped > 0 {
            log::warn!(
                "fscrypt-fuse: reverse: directory node {id}: {skipped} names cannot be \
                 encrypted; left out"
            );
        }
        let l = Arc::new(Listing::new(stamp, entries));
        if id != 0 {
            self.cache(id, l.clone());
        }
        Ok(l)
    }

    fn cache(&self, id: u64, l: Arc<Listing>) {
        let mut dirs = lock(&self.dirs);
        if dirs.len() >= DIR_CACHE {
            dirs.clear();
        }
        dirs.insert(id, l);
    }

    /// The listing of directory node `id`; for the symlink store, made
    /// again when `fresh` (at OPENDIR) or not made yet.
    fn dir_listing(&self, id: u64, fresh: bool) -> Result<Arc<Listing>> {
        match &self.node(id)?.what {
            What::Dir { rel, ctx } => self.listing(id, rel, ctx),
            What::Store => {
                if !fresh && let Some(l) = lock(&self.dirs).get(&id) {
                    return Ok(l.clone());
                }
                let l = Arc::new(self.store_listing());
                self.cache(id, l.clone());
                Ok(l)
            }
            _ => Err(Error::WrongType(WrongType::NotDir)),
        }
    }

    /// The symlink store's entries: one object per symlink of the tree
    /// (exclusions applied) whose target does not fit inline, found by a
    /// walk of the whole view. Directories that cannot be read are left
    /// out, as their listing is.
    fn store_listing(&self) -> Listing {
        let mut stack = vec![(Vec::new(), self.keys.root_context())];
        let mut entries = Vec::new();
        while let Some((rel, ctx)) = stack.pop() {
            let Ok(l) = self.listing(0, &rel, &ctx) else {
                continue;
            };
            for e in &l.entries {
                match &e.what {
                    What::Dir { rel, ctx } => stack.push((rel.clone(), *ctx)),
                    What::Symlink { rel, ctx } => {
                        let object = self
                            .open_rel(rel, OFlags::PATH)
                            .and_then(|fd| Ok(rustix::fs::readlinkat(&fd, "", Vec::new())?))
                            .and_then(|t| {
                                self.keys.store_object(ctx, t.as_bytes()).map_err(rev_err)
                            });
                        if let Ok(Some((id, data))) = object {
                            entries.push(Entry {
                                name: id.into_bytes(),
                                what: What::Bytes {
                                    data: Arc::from(&data[..]),
                                },
                                kind: FileType::RegularFile,
                            });
                        }
                    }
                    _ => {}
                }
            }
        }
        Listing::new((0, 0, 0, 0, 0), entries)
    }

    fn open_file(&self, node: &Node) -> Result<OpenFile> {
        let What::File { rel, ctx, binding } = &node.what else {
            return Err(Error::WrongType(WrongType::Other));
        };
        // Checked to be a regular file before it is opened for reading, so
        // a FIFO or device put in its place is never opened.
        let path = self.open_rel(rel, OFlags::PATH)?;
        if rustix::fs::fstat(&path)?.st_mode & libc::S_IFMT != libc::S_IFREG {
            return Err(Error::Stale);
        }
        let fd = match rustix::fs::open(
            format!("/proc/self/fd/{}", std::os::fd::AsRawFd::as_raw_fd(&path)),
            OFlags::RDONLY | OFlags::CLOEXEC | OFlags::NONBLOCK,
            Mode::empty(),
        ) {
            Ok(fd) => fd,
            // No /proc: the path again, without blocking on a FIFO.
            Err(_) => self.open_rel(rel, OFlags::RDONLY | OFlags::NONBLOCK)?,
        };
        let plain = File::from(fd);
        let meta = plain.metadata()?;
        if !meta.is_file() {
            return Err(Error::Stale);
        }
        let view = FileView::new(&self.keys, ctx, meta.len(), *binding).map_err(rev_err)?;
        let crypt = self.keys.crypt(ctx, Ft::Regular).map_err(rev_err)?;
        Ok(OpenFile {
            plain,
            view,
            crypt,
            groups: Mutex::new(std::collections::VecDeque::new()),
            spare: Mutex::new(None),
        })
    }

    fn read_file(&self, f: &OpenFile, offset: u64, size: u32, buf: &mut Vec<u8>) -> Result<usize> {
        let len = u64::from(size)
            .min(MAX_READ as u64)
            .min(f.view.len().saturating_sub(offset)) as usize;
        if buf.len() < len {
            buf.resize(len, 0);
        }
        f.view.read(offset, &mut buf[..len], |g| {
            let cell = {
                let mut groups = lock(&f.groups);
                match groups.iter().find(|(i, _)| *i == g) {
                    Some((_, c)) => c.clone(),
                    None => {
                        let c = GroupCell::default();
                        if groups.len() >= GROUPS_KEPT
                            && let Some((_, old)) = groups.pop_front()
                            && let Ok(old) = Arc::try_unwrap(old)
                            && let Some(Some(old)) = old.into_inner()
                            && let Ok(old) = Arc::try_unwrap(old)
                        {
                            *lock(&f.spare) = Some(old.data);
                        }
                        groups.push_back((g, c.clone()));
                        c
                    }
                }
            };
            let grp = cell.get_or_init(|| {
                let buf = lock(&f.spare).take().unwrap_or_default();
                match f.view.group_into(&self.keys, &f.crypt, &f.plain, g, buf) {
                    Ok(grp) => Some(Arc::new(grp)),
                    Err(e) => {
                        log::warn!("fscrypt-fuse: reverse: reading a file's group {g}: {e}");
                        None
                    }
                }
            });
            match grp {
                Some(grp) => Ok(grp.clone()),
                None => {
                    // Not kept: the next read tries again.
                    lock(&f.groups).retain(|(i, _)| *i != g);
                    Err(Error::Io(std::io::Error::from_raw_os_error(libc::EIO)))
                }
            }
        })?;
        Ok(len)
    }
}

impl Backend for ReverseFs {
    /// The plaintext may change under the view: attributes and names are
    /// cached for one second.
    const TTL: Duration = Duration::from_secs(1);
    const READ_ONLY: bool = true;

    fn lookup(&self, parent: InodeNo, name: &OsStr) -> Result<FileAttr> {
        if name.len() > 255 {
            return Err(Error::NameTooLong);
        }
        let l = self.dir_listing(parent.0, false)?;
        let e = l
            .by_name
            .get(name.as_bytes())
            .and_then(|&i| l.entries.get(i))
            .ok_or(Error::NotFound)?;
        let id = self.node_id(parent.0, &e.name, &e.what);
        let node = self.node(id)?;
        let r = self.attr(id, &node);
        if r.is_err() {
            // The kernel gets no entry: the lookup is not held.
            self.forget(InodeNo(id), 1);
        }
        match r {
            Err(Error::Stale) => Err(Error::NotFound),
            r => r,
        }
    }

    fn forget(&self, i: InodeNo, nlookup: u64) {
        if i.0 == 1 {
            return;
        }
        let mut n = lock(&self.nodes);
        let gone = match n.refs.get_mut(&i.0) {
            Some(r) => {
                r.0 = r.0.saturating_sub(nlookup);
                r.0 == 0
            }
            None => false,
        };
        if gone && let Some((_, key)) = n.refs.remove(&i.0) {
            n.by_id.remove(&i.0);
            if n.by_name.get(&key) == Some(&i.0) {
                n.by_name.remove(&key);
            }
            drop(n);
            lock(&self.dirs).remove(&i.0);
        }
    }

    fn getattr(&self, i: InodeNo) -> Result<FileAttr> {
        let node = self.node(i.0)?;
        self.attr(i.0, &node)
    }

    fn readlink(&self, i: InodeNo) -> Result<Vec<u8>> {
        match &self.node(i.0)?.what {
            What::Symlink { rel, ctx } => self.view_target(rel, ctx),
            _ => Err(Error::WrongType(WrongType::Other)),
        }
    }

    fn open(&self, i: InodeNo, flags: i32) -> Result<(FileHandle, FopenFlags)> {
        if flags & libc::O_ACCMODE != libc::O_RDONLY || flags & libc::O_TRUNC != 0 {
            return Err(Error::ReadOnly);
        }
        let node = self.node(i.0)?;
        let h = match &node.what {
            What::File { .. } => Handle::File(Arc::new(self.open_file(&node)?)),
            What::Bytes { .. } | What::Config => Handle::Made(node.what.clone()),
            _ => return Err(Error::WrongType(WrongType::Other)),
        };
        let fh = self.next_fh.fetch_add(1, Ordering::Relaxed);
        lock(&self.handles).insert(fh, h);
        Ok((FileHandle(fh), FopenFlags::empty()))
    }

    fn read(
        &self,
        h: FileHandle,
        offset: u64,
        size: u32,
        buf: &mut Vec<u8>,
    ) -> Result<std::ops::Range<usize>> {
        let handle = match lock(&self.handles).get(&h.0) {
            Some(Handle::File(f)) => Ok(f.clone()),
            Some(Handle::Made(w)) => Err(w.clone()),
            _ => return Err(Error::BadHandle),
        };
        match handle {
            Ok(f) => Ok(0..self.read_file(&f, offset, size, buf)?),
            Err(what) => {
                let data: Vec<u8> = match what {
                    What::Bytes { data } => data.to_vec(),
                    What::Config => {
                        let fd = safe_open::open_entry(
                            self.root.as_fd(),
                            REVERSE_CONFIG_NAME.as_bytes(),
                            OFlags::RDONLY | OFlags::NONBLOCK,
                            Mode::empty(),
                            safe_open::Mounts::Stay,
                        )
                        .map_err(|e| Error::Io(e.into()))?;
                        let f = File::from(fd);
                        let mut v = Vec::new();
                        std::io::Read::read_to_end(&mut std::io::Read::take(&f, 1 << 16), &mut v)?;
                        v
                    }
                    _ => return Err(Error::BadHandle),
                };
                let start = (offset.min(data.len() as u64)) as usize;
                let end = start.saturating_add(size as usize).min(data.len());
                if buf.len() < end - start {
                    buf.resize(end - start, 0);
                }
                buf[..end - start].copy_from_slice(&data[start..end]);
                Ok(0..end - start)
            }
        }
    }

    fn release(&self, h: FileHandle) -> Result<()> {
        lock(&self.handles).remove(&h.0);
        Ok(())
    }

    fn opendir(&self, i: InodeNo) -> Result<(FileHandle, FopenFlags)> {
        let l = self.dir_listing(i.0, true)?;
        let fh = self.next_fh.fetch_add(1, Ordering::Relaxed);
        lock(&self.handles).insert(fh, Handle::Dir(i.0, l));
        Ok((FileHandle(fh), FopenFlags::empty()))
    }

    fn readdir<F>(&self, h: FileHandle, offset: u64, add: F) -> Result<()>
    where
        F: FnMut(u64, u64, FileType, &OsStr) -> bool,
    {
        let (dir, l) = match lock(&self.handles).get(&h.0) {
            Some(Handle::Dir(d, l)) => (*d, l.clone()),
            _ => return Err(Error::BadHandle),
        };
        // An entry's inode number is the one a lookup gives unless another
        // object held it (the kernel looks each entry up for its node id).
        crate::backend::readdir_listing(
            offset,
            1,
            1,
            &l.entries,
            |e| (stable_id(dir, &e.name), e.kind, OsStr::from_bytes(&e.name)),
            add,
        );
        Ok(())
    }

    fn releasedir(&self, h: FileHandle) -> Result<()> {
        lock(&self.handles).remove(&h.0);
        Ok(())
    }

    fn statfs(&self) -> Result<FsStats> {
        let s = rustix::fs::fstatvfs(&self.root)?;
        Ok(FsStats {
            blocks: s.f_blocks,
            bfree: 0,
            bavail: 0,
            files: s.f_files,
            ffree: 0,
            bsize: s.f_bsize as u32,
            namelen: 255,
            frsize: s.f_frsize as u32,
        })
    }

    fn getxattr(&self, _i: InodeNo, _name: &OsStr, _size: u32, _uid: u32) -> Result<Vec<u8>> {
        // Extended attributes are not part of the view (they would be
        // plaintext in the backup).
        Err(Error::NotSupported)
    }

    fn listxattr(&self, _i: InodeNo, _uid: u32) -> Result<Vec<u8>> {
        Ok(Vec::new())
    }
}

/// Mounts the reverse view of `config.plain_dir` on the mount point `mp`
/// and serves it until it is unmounted (or SIGTERM, SIGINT, SIGHUP).
/// Always `ro`, `default_permissions`, `nosuid`, `nodev`.
///
/// # Errors
/// [`Error::Mount`] when FUSE is unavailable, the mount point is bad or
/// the plaintext directory has no reverse config.
pub fn mount_on(
    keys: ReverseKeys,
    config: ReverseMountConfig,
    mp: &crate::MountPoint,
) -> Result<()> {
    if let Err(e) =
        rustix::process::set_dumpable_behavior(rustix::process::DumpableBehavior::NotDumpable)
    {
        log::warn!("fscrypt-fuse: cannot make the daemon non-dumpable: {e}");
    }
    let options = config.options();
    session::check(&options, mp)?;
    let fs = ReverseFs::new(keys, &config.plain_dir, config.excludes)?;
    session::serve(session::engine(fs, &options), mp, config.idle)
}

/// [`mount_on`] served by a background thread of this process (tests);
/// dropping the returned mount unmounts it.
///
/// # Errors
/// As [`mount_on`].
pub fn mount_background(
    keys: ReverseKeys,
    config: ReverseMountConfig,
    mountpoint: &Path,
) -> Result<crate::BackgroundMount> {
    let mp = crate::MountPoint::open(mountpoint)?;
    let options = config.options();
    session::check(&options, &mp)?;
    let fs = ReverseFs::new(keys, &config.plain_dir, config.excludes)?;
    crate::mount::background(session::engine(fs, &options), &mp, None)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn joins_and_times() {
        assert_eq!(join(b"", b"a"), b"a");
        assert_eq!(join(b"a/b", b"c"), b"a/b/c");
        assert_eq!(time(1, 5), SystemTime::UNIX_EPOCH + Duration::new(1, 5));
        assert_eq!(file_type(libc::S_IFLNK | 0o777), FileType::Symlink);
    }

    fn keys() -> ReverseKeys {
        let master = fscrypt::MasterKey::new(&[0x24; 64]).unwrap();
        let policy = fscrypt::PolicyV2::new_default(master.identifier());
        ReverseKeys::new(master, policy).unwrap()
    }

    /// The entries of directory node `i`: (name, type).
    fn list(fs: &ReverseFs, i: u64) -> Vec<(Vec<u8>, FileType)> {
        let (h, _) = fs.opendir(InodeNo(i)).unwrap();
        let mut out = Vec::new();
        fs.readdir(h, 0, |_, _, kind, name| {
            out.push((name.as_bytes().to_vec(), kind));
            false
        })
        .unwrap();
        fs.releasedir(h).unwrap();
        out
    }

    /// The served view, without FUSE: names, the hidden config, reads
    /// against [`FileView`], no write, no symlink followed, exclusions.
    #[test]
    fn the_backend_serves_the_view() {
        let t = test_support::TempDir::new("reverse-backend");
        let plain = t.path();
        std::fs::write(plain.join(REVERSE_CONFIG_NAME), b"{}").unwrap();
        std::fs::create_dir(plain.join("dir")).unwrap();
        let data: Vec<u8> = (0..600_000u32).map(|i| (i % 253) as u8).collect();
        std::fs::write(plain.join("dir/file"), &data).unwrap();
        std::fs::write(plain.join("skip.tmp"), b"x").unwrap();
        // A symlink to a directory outside: shown as a symlink only.
        std::os::unix::fs::symlink("/", plain.join("up")).unwrap();
        let fs = ReverseFs::new(keys(), plain, Excludes::new(["*.tmp"])).unwrap();
        let root = list(&fs, 1);
        let names: Vec<_> = root.iter().map(|(n, _)| n.clone()).collect();
        assert!(names.contains(&b"fscrypt.dir".to_vec()));
        assert!(names.contains(&b"fscrypt.vault.json".to_vec()));
        assert!(names.contains(&b"fscrypt.clean".to_vec()));
        assert!(!names.contains(&REVERSE_CONFIG_NAME.as_bytes().to_vec()));
        // ., .., four made entries, dir and up (skip.tmp excluded).
        assert_eq!(root.len(), 8, "{names:?}");
        let kinds: Vec<_> = root.iter().map(|(_, k)| *k).collect();
        assert_eq!(kinds.iter().filter(|k| **k == FileType::Symlink).count(), 1);
        let dname = root
            .iter()
            .find(|(n, k)| {
                *k == FileType::Directory && n != b"." && n != b".." && n != b"fscrypt.symlinks"
            })
            .map(|(n, _)| n.clone())
            .unwrap();
        let d = fs.lookup(InodeNo(1), OsStr::from_bytes(&dname)).unwrap();
        let inner = list(&fs, d.ino.0);
        let (fname, _) = inner
            .iter()
            .find(|(n, k)| *k == FileType::RegularFile && n != b"fscrypt.dir")
            .cloned()
            .unwrap();
        let a = fs
            .lookup(InodeNo(d.ino.0), OsStr::from_bytes(&fname))
            .unwrap();
        let hint = fscrypt_vault::integrity::units::len_for_size(data.len() as u64, 4096);
        assert_eq!(Some(a.size), hint);
        assert!(matches!(
            fs.open(InodeNo(a.ino.0), libc::O_WRONLY),
            Err(Error::ReadOnly)
        ));
        let (h, _) = fs.open(InodeNo(a.ino.0), libc::O_RDONLY).unwrap();
        // Reads in odd pieces give the bytes of one whole read.
        let mut whole = Vec::new();
        let r = fs.read(h, 0, a.size as u32, &mut whole).unwrap();
        assert_eq!(r.len() as u64, a.size);
        let mut off = 0u64;
        while off < a.size {
            let mut piece = Vec::new();
            let r = fs.read(h, off, 70_001, &mut piece).unwrap();
            assert_eq!(
                &piece[r.clone()],
                &whole[off as usize..off as usize + r.len()]
            );
            off += r.len() as u64;
        }
        fs.release(h).unwrap();
        // Names that are not in the view are not found.
        assert!(matches!(
            fs.lookup(InodeNo(1), OsStr::new("dir")),
            Err(Error::NotFound)
        ));
        // The walk used without openat2 finds the same file, and the
        // root for an empty path.
        assert!(fs.open_walk(b"dir/file", OFlags::RDONLY).is_ok());
        assert!(fs.open_walk(b"", OFlags::PATH).is_ok());
        // A symlink on the way is not followed.
        assert!(fs.open_walk(b"up/etc", OFlags::PATH).is_err());
        // A directory replaced by a symlink behind the view is never
        // entered: its node fails instead of following the link.
        std::fs::rename(plain.join("dir"), plain.join("moved")).unwrap();
        std::os::unix::fs::symlink("moved", plain.join("dir")).unwrap();
        assert!(fs.opendir(InodeNo(d.ino.0)).is_err());
        assert!(fs.getattr(InodeNo(a.ino.0)).is_err());
        assert!(fs.open_walk(b"dir/file", OFlags::RDONLY).is_err());
    }
}
