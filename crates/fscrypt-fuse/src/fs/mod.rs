//! `EncryptedFs`: the filesystem logic, independent of FUSE, one module per
//! concern: `names` (name encryption, no-key names, long-name side files),
//! `backing` (locating and reading backing objects), `offsets` (plaintext
//! ranges to data units), `attr`, `create`, `remove`, `contents`, `dir` and
//! `xattr` (the operations). Names, no-key names and symlink blobs are
//! handled through `fscrypt::hooks` only.
//!
//! Every method returns `Result<_, Error>`; the FUSE adapter (`fuse.rs`) only
//! converts arguments and maps errors to errno with [`Error::errno`].
//!
//! The backing store is accessed with `*at` system calls relative to the
//! backing directory fds held by directory inodes, so renames of ancestors
//! never invalidate anything. The storage format is described in
//! `fscrypt_vault::layout` and `docs/vault-format.md`.

mod attr;
mod backing;
mod contents;
mod create;
mod dir;
mod engine;
mod names;
mod offsets;
mod recover;
mod remove;
mod size;
pub(crate) mod tags;
mod xattr;

use std::cell::RefCell;
use std::collections::HashSet;
use std::fs::File;
use std::io;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use fuser::FileType;
use rustix::fs::{Mode, OFlags};

use crate::crypt::Keys;
use crate::error::{Error, Result, WrongType};
use crate::handles::HandleTable;
use crate::inodes::{Ident, Inode, InodeNo, InodeTable, Kind, ROOT};
use crate::layout::{self, Format};
use fscrypt_vault::integrity::generations::GenerationStore;

/// Who is calling (from the FUSE request): owner of created entries.
#[derive(Debug, Clone, Copy)]
pub struct Caller {
    /// Effective user id.
    pub uid: u32,
    /// Effective group id.
    pub gid: u32,
}

/// A time to set: a given time or "now".
#[derive(Debug, Clone, Copy)]
pub enum SetTime {
    /// A specific time.
    At(SystemTime),
    /// The current time.
    Now,
}

/// Attribute changes of `setattr`.
#[derive(Debug, Clone, Copy, Default)]
pub struct SetAttr {
    /// New permission bits (incl. setuid/setgid/sticky).
    pub mode: Option<u32>,
    /// New owner.
    pub uid: Option<u32>,
    /// New group.
    pub gid: Option<u32>,
    /// New plaintext size (truncate).
    pub size: Option<u64>,
    /// New access time.
    pub atime: Option<SetTime>,
    /// New modification time.
    pub mtime: Option<SetTime>,
    /// Made through an open file (`ftruncate`, `futimens`: FUSE's
    /// `FATTR_FH`), whose opener was already allowed to write; a truncate
    /// without it is checked for write permission where the daemon checks
    /// ([`FsOptions::check_access`]).
    pub through_handle: bool,
}

/// Filesystem statistics (`statfs`).
#[derive(Debug, Clone, Copy)]
pub struct FsStats {
    /// Total blocks (`frsize` units).
    pub blocks: u64,
    /// Free blocks.
    pub bfree: u64,
    /// Blocks available to unprivileged users.
    pub bavail: u64,
    /// Total inodes.
    pub files: u64,
    /// Free inodes.
    pub ffree: u64,
    /// Block size.
    pub bsize: u32,
    /// Maximum name length (255).
    pub namelen: u32,
    /// Fragment size.
    pub frsize: u32,
}

/// Options of [`EncryptedFs::new`].
#[derive(Debug, Clone, Copy, Default)]
pub struct FsOptions {
    /// Refuse every modification with EROFS.
    pub read_only: bool,
    /// Whether other mounts may serve the same backing directory.
    pub sharing: Sharing,
    /// Serve POSIX ACLs (`-o acl`, see [`crate::Backend::posix_acl`]).
    pub acl: bool,
    /// The mount has no `default_permissions` (only the mounting user, as
    /// whom the daemon runs, reaches it: [`crate::MountConfig::allow_other`]).
    /// The backing filesystem then checks each call with the caller's
    /// rights, and the daemon checks what its cached descriptors would
    /// otherwise let through, with `faccessat` on the backing object: an
    /// OPEN's access mode, an OPENDIR's read permission, a truncate not
    /// made through an open handle (write permission), and ACCESS
    /// (access(2), chdir). `false`: the kernel checked before the request
    /// came (`default_permissions`), and ACCESS never comes.
    pub check_access: bool,
    /// Keep the inode table near this many inodes by asking the kernel to
    /// drop cached ones nothing uses (`FUSE_NOTIFY_PRUNE`, Linux 6.18;
    /// [`crate::MountConfig::inode_limit`]); `None`: no limit.
    pub inode_limit: Option<usize>,
}

/// Whether other mounts serve the vault's backing directory beside this
/// one (`-o sharedstorage`, issue 23: two machines on one NAS or synced
/// folder; `docs/vault-format.md` §11a).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Sharing {
    /// The only mount (the vault lock is exclusive): the kernel caches
    /// names and attributes for [`Backend::TTL`](crate::Backend::TTL), the
    /// recovery pass runs when the last mount did not end cleanly, and a
    /// clean unmount leaves the clean marker.
    #[default]
    Exclusive,
    /// `-o sharedstorage`, no other mount at mount time: no caching of
    /// names or attributes (a change through another mount shows at
    /// once), the recovery pass runs as for [`Sharing::Exclusive`], and
    /// only the last mount to go leaves the clean marker (see
    /// [`EncryptedFs::hold_shared_lock`]).
    SharedAlone,
    /// `-o sharedstorage` while other mounts serve the vault: as
    /// [`Sharing::SharedAlone`] without the recovery pass, since the other
    /// mounts' objects under construction look like a crash's leftovers.
    SharedWithOthers,
}

/// Where an inode's backing object is: the open file's fd, the directory's
/// fd, or an `O_PATH` fd of the object found (and verified) through a link.
enum Loc {
    Fd(Arc<File>),
    DirFd(Arc<Inode>),
    Path(backing::Found),
}

thread_local! {
    static IO_BUF: RefCell<Vec<u8>> = const { RefCell::new(Vec::new()) };
}

/// The encrypted filesystem over a backing directory.
#[derive(Debug)]
pub struct EncryptedFs {
    keys: Keys,
    du: u64,
    /// The vault's format (version byte of the root's `fscrypt.dir`): where a
    /// regular file's size lives (header or backing length).
    format: Format,
    opts: FsOptions,
    inodes: InodeTable,
    handles: HandleTable,
    backing_root: PathBuf,
    /// The daemon's effective uid and gid, read once at mount (they never
    /// change), so that creating a file needs no extra syscalls for them.
    euid: u32,
    egid: u32,
    /// The vault's owner: the uid owning the backing root (see
    /// `backing::EncryptedFs::check_vault_object`).
    vault_uid: u32,
    /// Held for writing while a rename through the mount moves backing
    /// entries and then our links with them; `find` takes it for reading
    /// when no link led to the object, so that it never judges links that
    /// are one step behind the backing store (see `backing.rs`).
    renames: RwLock<()>,
    /// On shared storage: a descriptor of the vault lock's open directory
    /// (shared with the mount's [`fscrypt_vault::VaultLock`]), to find out
    /// at the end whether this mount is the last one.
    shared_lock: Option<OwnedFd>,
    /// Format 3: the generations this machine saw per file, to catch a file
    /// put back to an earlier version of itself (`None`: not checked; see
    /// [`EncryptedFs::remember_generations`]).
    generations: Option<GenerationStore>,
    /// The corruption reports already logged (backing path, inode, reason),
    /// so that the kernel's retries of one failed read (readahead, then
    /// the synchronous read) log one line, not one per request. Cleared
    /// when it reaches [`LOGGED_MAX`] entries.
    logged: Mutex<HashSet<String>>,
}

/// How many distinct corruption reports [`EncryptedFs`] remembers before it
/// forgets them all (and logs each again once).
const LOGGED_MAX: usize = 4096;

fn sys(e: rustix::io::Errno) -> Error {
    Error::Sys(e)
}

fn to_system_time(sec: i64, nsec: i64) -> SystemTime {
    if sec >= 0 {
        UNIX_EPOCH + Duration::new(sec as u64, nsec.clamp(0, 999_999_999) as u32)
    } else {
        UNIX_EPOCH
            .checked_sub(Duration::new(sec.unsigned_abs(), 0))
            .and_then(|t| t.checked_add(Duration::new(0, nsec.clamp(0, 999_999_999) as u32)))
            .unwrap_or(UNIX_EPOCH)
    }
}

fn kind_of(mode: u32) -> Kind {
    match mode & libc::S_IFMT {
        libc::S_IFDIR => Kind::Dir,
        libc::S_IFREG => Kind::File,
        libc::S_IFLNK => Kind::Symlink,
        _ => Kind::Special,
    }
}

fn fuse_type(mode: u32) -> FileType {
    match mode & libc::S_IFMT {
        libc::S_IFDIR => FileType::Directory,
        libc::S_IFREG => FileType::RegularFile,
        libc::S_IFLNK => FileType::Symlink,
        libc::S_IFIFO => FileType::NamedPipe,
        libc::S_IFSOCK => FileType::Socket,
        libc::S_IFCHR => FileType::CharDevice,
        _ => FileType::BlockDevice,
    }
}

/// Reads up to `buf.len()` bytes at `off`, zero-filling past the backing EOF
/// ([`layout::read_zero_filled`]).
fn pread_full(f: &File, buf: &mut [u8], off: u64) -> io::Result<()> {
    layout::read_zero_filled(f, off, buf)
}

fn is_zero(b: &[u8]) -> bool {
    // An unwritten (hole) data unit reads as all zeros; real ciphertext is
    // all-zero with probability 2^-(8*unit size).
    let chunks = b.chunks_exact(16);
    let rem = chunks.remainder();
    chunks
        .map(|c| u128::from_ne_bytes(<[u8; 16]>::try_from(c).unwrap_or([1; 16])))
        .all(|w| w == 0)
        && rem.iter().all(|&x| x == 0)
}

impl EncryptedFs {
    /// Opens the filesystem over `backing_dir`, whose root metadata file must
    /// carry `policy` (see [`crate::create_root`]). `master` = `None` gives a
    /// locked filesystem.
    ///
    /// # Errors
    /// [`Error::Io`]/[`Error::Sys`] if the directory cannot be opened,
    /// [`Error::Corrupt`] if its metadata file is missing or of another policy,
    /// [`Error::Format`] if the key does not fit the policy.
    pub fn new(
        backing_dir: &Path,
        policy: fscrypt::PolicyV2,
        master: Option<fscrypt::MasterKey>,
        opts: FsOptions,
    ) -> Result<EncryptedFs> {
        let keys = Keys::new(policy, master);
        let fd = rustix::fs::open(
            backing_dir,
            OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC,
            Mode::empty(),
        )
        .map_err(sys)?;
        let st = rustix::fs::fstat(&fd).map_err(sys)?;
        let format = backing::dir_format(fd.as_fd())?;
        // The root's context is read (and checked) by `dir_crypt` below.
        let ident = Ident {
            dev: st.st_dev,
            ino: st.st_ino,
            kind: Kind::Dir,
            context: None,
        };
        let root = Inode::new(ROOT, ident, Some(fd), None, 0);
        let fs = EncryptedFs {
            du: keys.data_unit_size(),
            format,
            keys,
            opts,
            inodes: InodeTable::new(root),
            handles: HandleTable::new(),
            backing_root: backing_dir.to_path_buf(),
            euid: rustix::process::geteuid().as_raw(),
            egid: rustix::process::getegid().as_raw(),
            vault_uid: st.st_uid,
            renames: RwLock::new(()),
            shared_lock: None,
            generations: None,
            logged: Mutex::new(HashSet::new()),
        };
        let root = fs.inode(ROOT)?;
        let ctx = fs.dir_context(&root)?;
        if fs.keys.unlocked() {
            fs.dir_crypt(&root)?;
        } else {
            fs.keys.check_context(&ctx)?;
        }
        fs.recover_at_mount()?;
        Ok(fs)
    }

    /// Whether the master key is present.
    pub fn unlocked(&self) -> bool {
        self.keys.unlocked()
    }

    /// Data unit size in bytes.
    pub fn data_unit_size(&self) -> u64 {
        self.du
    }

    /// The vault's on-disk format (`docs/vault-format.md` §4, §4a).
    pub fn format(&self) -> Format {
        self.format
    }

    // -----------------------------------------------------------------------
    // helpers

    fn inode(&self, ino: InodeNo) -> Result<Arc<Inode>> {
        self.inodes.get(ino).ok_or(Error::NotFound)
    }

    /// Whether other mounts serve the backing directory too.
    pub fn sharing(&self) -> Sharing {
        self.opts.sharing
    }

    /// Whether POSIX ACLs are served (`-o acl`).
    pub fn acl(&self) -> bool {
        self.opts.acl
    }

    /// On shared storage, hands over a duplicate of the vault lock's
    /// descriptor (`dup` of [`fscrypt_vault::VaultLock`]'s fd: the same
    /// lock), so that the end of the mount can tell whether it is the last
    /// one: it then turns the lock exclusive and leaves the clean marker.
    pub fn hold_shared_lock(&mut self, fd: OwnedFd) {
        self.shared_lock = Some(fd);
    }

    /// Format 3: checks every file opened against `store`, this machine's
    /// memory of the generations it saw, and adds to it (rollback
    /// detection, `docs/vault-format.md` §4b). Without it (tests that do not
    /// need it, or no state directory) rollback is not detected. The store
    /// is compacted when the filesystem is dropped.
    pub fn remember_generations(&mut self, store: GenerationStore) {
        self.generations = Some(store);
    }

    fn writable(&self) -> Result<()> {
        if self.opts.read_only {
            Err(Error::ReadOnly)
        } else {
            Ok(())
        }
    }

    /// ENOKEY on a locked mount: for contents, and before a new inode is
    /// set up (as `fscrypt_prepare_new_inode()`); names go through the hooks.
    fn need_key(&self) -> Result<()> {
        if self.keys.unlocked() {
            Ok(())
        } else {
            Err(Error::NoKey)
        }
    }

    fn dir_fd<'a>(&self, dir: &'a Inode) -> Result<BorrowedFd<'a>> {
        match (&dir.kind, &dir.dir_fd) {
            (Kind::Dir, Some(fd)) => Ok(fd.as_fd()),
            _ => Err(Error::WrongType(WrongType::NotDir)),
        }
    }

    /// Backing path of an inode, for log lines.
    pub fn backing_path(&self, inode: &Inode) -> PathBuf {
        let mut parts = Vec::new();
        let mut cur = inode.first_link();
        let mut guard = 0;
        while let Some(l) = cur {
            parts.push(l.name.name.clone());
            cur = l.parent.first_link();
            guard += 1;
            if guard > 4096 {
                break;
            }
        }
        let mut p = self.backing_root.clone();
        for part in parts.iter().rev() {
            p.push(part);
        }
        p
    }

    /// Backing path of inode `ino` if it is known, for log lines (base64url
    /// names only: never plaintext).
    pub fn backing_path_of(&self, ino: InodeNo) -> Option<PathBuf> {
        self.inodes.get(ino).map(|i| self.backing_path(&i))
    }

    /// Logs corruption of `inode` (with its backing path) and passes the error on.
    fn note<T>(&self, inode: &Inode, what: Option<&str>, r: Result<T>) -> Result<T> {
        if let Err(e) = &r
            && e.is_corruption()
        {
            let mut p = self.backing_path(inode);
            if let Some(w) = what {
                p.push(w);
            }
            let line = format!("{} (inode {}): {e}", p.display(), inode.ino.0);
            // Once per report: a failed read is retried by the kernel.
            let first = match self.logged.lock() {
                Ok(mut seen) => {
                    if seen.len() >= LOGGED_MAX {
                        seen.clear();
                    }
                    seen.insert(line.clone())
                }
                Err(_) => true,
            };
            if first {
                log::error!("fscrypt-fuse: corrupt backing object {line}");
            }
        }
        r
    }
}
