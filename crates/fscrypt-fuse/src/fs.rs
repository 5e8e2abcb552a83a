//! `EncryptedFs`: the filesystem logic, independent of FUSE.
//!
//! Every method returns `Result<_, Error>`; the FUSE adapter (`fuse.rs`) only
//! converts arguments and maps errors to errno with [`Error::errno`].
//!
//! The backing store is accessed with `*at` system calls relative to the
//! backing directory fds held by directory inodes, so renames of ancestors
//! never invalidate anything. The storage format is described in `layout.rs`
//! and `docs/vault-format.md`.

use std::cell::RefCell;
use std::ffi::{OsStr, OsString};
use std::fs::File;
use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use fuser::{FileAttr, FileType};
use rustix::fs::{AtFlags, Mode, OFlags, RenameFlags, Stat, Timespec, Timestamps};

use crate::crypt::{Keys, NodeCrypt, NodeKind};
use crate::error::{Corruption, Error, Result, WrongType};
use crate::handles::{DirEntry, FileHandle, Handle, HandleTable};
use crate::inodes::{FileState, Inode, InodeNo, InodeTable, Kind, Link, ROOT};
use crate::layout::{
    self, BackingName, CONTEXT_SIZE, DIR_META_NAME, EntryName, HEADER_SIZE, HEADER_USED, Header,
    HeaderKind, NAME_MAX, SYMLINK_MAX_BLOB, TMP_PREFIX,
};

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
}

/// Where an inode's backing object is: an fd of it, or (dir fd, name).
enum Loc {
    Fd(Arc<File>),
    DirFd(Arc<Inode>),
    At(Link),
}

thread_local! {
    static IO_BUF: RefCell<Vec<u8>> = const { RefCell::new(Vec::new()) };
}

/// The encrypted filesystem over a backing directory.
#[derive(Debug)]
pub struct EncryptedFs {
    keys: Keys,
    du: u64,
    opts: FsOptions,
    inodes: InodeTable,
    handles: HandleTable,
    backing_root: PathBuf,
    /// The daemon's effective uid and gid, read once at mount (they never
    /// change), so that creating a file needs no extra syscalls for them.
    euid: u32,
    egid: u32,
}

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

fn validate_name(name: &OsStr) -> Result<&[u8]> {
    let b = name.as_bytes();
    if b.is_empty() || b == b"." || b == b".." || b.contains(&b'/') || b.contains(&0) {
        return Err(Error::InvalidName);
    }
    if b.len() > NAME_MAX {
        return Err(Error::NameTooLong);
    }
    Ok(b)
}

/// Reads up to `buf.len()` bytes at `off`, zero-filling past the backing EOF.
fn pread_full(f: &File, buf: &mut [u8], off: u64) -> io::Result<()> {
    let mut done = 0;
    while done < buf.len() {
        match f.read_at(&mut buf[done..], off + done as u64) {
            Ok(0) => break,
            Ok(n) => done += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    buf[done..].fill(0);
    Ok(())
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
    /// [`Error::Crypt`] if the key does not fit the policy.
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
        let root = Inode::new(ROOT, st.st_ino, Kind::Dir, Some(fd), None);
        let fs = EncryptedFs {
            du: keys.data_unit_size(),
            keys,
            opts,
            inodes: InodeTable::new(root),
            handles: HandleTable::new(),
            backing_root: backing_dir.to_path_buf(),
            euid: rustix::process::geteuid().as_raw(),
            egid: rustix::process::getegid().as_raw(),
        };
        let root = fs.inode(ROOT)?;
        let ctx = fs.dir_context(&root)?;
        if fs.keys.unlocked() {
            fs.dir_crypt(&root)?;
        } else {
            fs.keys.check_context(&ctx)?;
        }
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

    // -----------------------------------------------------------------------
    // helpers

    fn inode(&self, ino: InodeNo) -> Result<Arc<Inode>> {
        self.inodes.get(ino).ok_or(Error::NotFound)
    }

    fn writable(&self) -> Result<()> {
        if self.opts.read_only {
            Err(Error::ReadOnly)
        } else {
            Ok(())
        }
    }

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

    /// Logs corruption of `inode` (with its backing path) and passes the error on.
    fn note<T>(&self, inode: &Inode, what: Option<&str>, r: Result<T>) -> Result<T> {
        if let Err(e) = &r
            && e.is_corruption()
        {
            let mut p = self.backing_path(inode);
            if let Some(w) = what {
                p.push(w);
            }
            log::error!("fscrypt-fuse: corrupt backing object {}: {e}", p.display());
        }
        r
    }

    fn dir_context(&self, dir: &Inode) -> Result<[u8; CONTEXT_SIZE]> {
        let r = (|| {
            let fd = self.dir_fd(dir)?;
            let meta = rustix::fs::openat(
                fd,
                DIR_META_NAME,
                OFlags::RDONLY | OFlags::CLOEXEC | OFlags::NOFOLLOW,
                Mode::empty(),
            )
            .map_err(|e| match e {
                rustix::io::Errno::NOENT => Error::Corrupt(Corruption::MissingDirMeta),
                e => sys(e),
            })?;
            let f = File::from(meta);
            let mut b = [0u8; HEADER_USED];
            let mut n = 0;
            while n < HEADER_USED {
                match f.read_at(&mut b[n..], n as u64)? {
                    0 => break,
                    k => n += k,
                }
            }
            let h = Header::parse(&b[..n], HeaderKind::Directory)?;
            self.keys.check_context(&h.context)?;
            Ok(h.context)
        })();
        self.note(dir, Some(DIR_META_NAME), r)
    }

    fn dir_crypt(&self, dir: &Inode) -> Result<NodeCrypt> {
        if let Some(c) = dir.crypt.get() {
            return Ok(c.clone());
        }
        self.need_key()?;
        let ctx = self.dir_context(dir)?;
        let c = self.note(
            dir,
            None,
            self.keys.node_crypt(&ctx, NodeKind::Dir, dir.backing_ino),
        )?;
        let _ = dir.crypt.set(c.clone());
        Ok(c)
    }

    /// The backing name of plaintext `name` in `dir` (needs the key).
    fn encrypt_name(&self, dir: &Inode, name: &OsStr) -> Result<BackingName> {
        let b = validate_name(name)?;
        let crypt = self.dir_crypt(dir)?;
        let ct = crypt
            .encrypt_filename(b)
            .map_err(|e| Error::Crypt(e.to_string()))?;
        Ok(BackingName::from_ciphertext(&ct))
    }

    /// Resolves a name given by the kernel to a backing name: encrypts it with
    /// the key, or decodes a no-key name on a locked mount (spec §8.1).
    fn resolve_name(&self, dir: &Arc<Inode>, name: &OsStr) -> Result<BackingName> {
        if self.keys.unlocked() {
            return self.encrypt_name(dir, name);
        }
        let b = name.as_bytes();
        if b.len() > NAME_MAX {
            return Err(Error::NameTooLong);
        }
        let nk = crate::crypt::nokey_decode(b).ok_or(Error::NotFound)?;
        let mut raw = [0u8; 256];
        let n = layout::b64_decode(b, &mut raw).ok_or(Error::NotFound)?;
        if n != 189 && n >= 8 + 16 {
            let ct = &raw[8..n];
            if nk.matches(ct) {
                return Ok(BackingName::from_ciphertext(ct));
            }
            return Err(Error::NotFound);
        }
        // Long ciphertext: the no-key name holds a prefix and a hash; scan.
        let fd = self.dir_fd(dir)?;
        let mut d = rustix::fs::Dir::read_from(fd).map_err(sys)?;
        while let Some(ent) = d.read() {
            let ent = ent.map_err(sys)?;
            let ename = ent.file_name().to_bytes();
            if let Some(ct) = self.entry_ciphertext(dir, ename)?
                && nk.matches(&ct)
            {
                return Ok(BackingName::from_ciphertext(&ct));
            }
        }
        Err(Error::NotFound)
    }

    /// The ciphertext of a backing entry, `None` for internal names.
    fn entry_ciphertext(&self, dir: &Inode, ename: &[u8]) -> Result<Option<Vec<u8>>> {
        match layout::classify(ename) {
            EntryName::Short(ct) => Ok(Some(ct)),
            EntryName::Internal => Ok(None),
            EntryName::Invalid => {
                let what = String::from_utf8_lossy(ename).into_owned();
                let _ = self.note::<()>(dir, Some(&what), Err(Error::Corrupt(Corruption::BadName)));
                Ok(None)
            }
            EntryName::Long => {
                let entry = String::from_utf8_lossy(ename).into_owned();
                let side = format!("{entry}{}", layout::LONG_NAME_SUFFIX);
                let r = (|| {
                    let fd = self.dir_fd(dir)?;
                    let f = rustix::fs::openat(
                        fd,
                        side.as_str(),
                        OFlags::RDONLY | OFlags::CLOEXEC | OFlags::NOFOLLOW,
                        Mode::empty(),
                    )
                    .map_err(|_| Error::Corrupt(Corruption::BadLongName))?;
                    let f = File::from(f);
                    let mut buf = [0u8; 300];
                    let mut n = 0;
                    loop {
                        match f.read_at(&mut buf[n..], n as u64)? {
                            0 => break,
                            k => n += k,
                        }
                        if n == buf.len() {
                            break;
                        }
                    }
                    layout::check_long_ciphertext(&entry, &buf[..n])?;
                    Ok(buf[..n].to_vec())
                })();
                match self.note(dir, Some(&side), r) {
                    Ok(ct) => Ok(Some(ct)),
                    Err(_) => Ok(None),
                }
            }
        }
    }

    fn write_side_file(&self, dir: &Inode, bname: &BackingName, ct: &[u8]) -> Result<()> {
        let fd = self.dir_fd(dir)?;
        let f = rustix::fs::openat(
            fd,
            bname.side_file().as_str(),
            OFlags::WRONLY | OFlags::CREATE | OFlags::TRUNC | OFlags::CLOEXEC | OFlags::NOFOLLOW,
            Mode::from_raw_mode(0o600),
        )
        .map_err(sys)?;
        File::from(f).write_all_at(ct, 0)?;
        Ok(())
    }

    /// Encrypts `name` for creation in `dir`, writing the long-name side file
    /// first when needed.
    fn name_for_create(&self, dir: &Inode, name: &OsStr) -> Result<BackingName> {
        let b = validate_name(name)?;
        let crypt = self.dir_crypt(dir)?;
        let ct = crypt
            .encrypt_filename(b)
            .map_err(|e| Error::Crypt(e.to_string()))?;
        let bn = BackingName::from_ciphertext(&ct);
        if bn.long {
            self.write_side_file(dir, &bn, &ct)?;
        }
        Ok(bn)
    }

    fn remove_side_file(&self, dir: &Inode, bname: &BackingName) {
        if bname.long
            && let Ok(fd) = self.dir_fd(dir)
        {
            let _ = rustix::fs::unlinkat(fd, bname.side_file().as_str(), AtFlags::empty());
        }
    }

    fn loc(&self, inode: &Arc<Inode>) -> Result<Loc> {
        if inode.kind == Kind::Dir {
            return Ok(Loc::DirFd(inode.clone()));
        }
        if inode.kind == Kind::File
            && let Ok(st) = inode.file.read()
            && let Some(fd) = &st.fd
        {
            return Ok(Loc::Fd(fd.clone()));
        }
        inode.first_link().map(Loc::At).ok_or(Error::NotFound)
    }

    fn stat_loc(&self, loc: &Loc) -> Result<Stat> {
        match loc {
            Loc::Fd(f) => rustix::fs::fstat(f).map_err(sys),
            Loc::DirFd(d) => rustix::fs::fstat(self.dir_fd(d)?).map_err(sys),
            Loc::At(l) => rustix::fs::statat(
                self.dir_fd(&l.parent)?,
                l.name.name.as_str(),
                AtFlags::SYMLINK_NOFOLLOW,
            )
            .map_err(sys),
        }
    }

    fn open_link(&self, l: &Link, write: bool) -> Result<File> {
        let mut flags = OFlags::CLOEXEC | OFlags::NOFOLLOW;
        flags |= if write { OFlags::RDWR } else { OFlags::RDONLY };
        let fd = rustix::fs::openat(
            self.dir_fd(&l.parent)?,
            l.name.name.as_str(),
            flags,
            Mode::empty(),
        )
        .map_err(sys)?;
        Ok(File::from(fd))
    }

    /// Loads a regular file's header into `st` if not loaded yet.
    fn load_file(&self, inode: &Arc<Inode>, st: &mut FileState) -> Result<()> {
        if st.loaded {
            return Ok(());
        }
        let r = (|| {
            let tmp;
            let f: &File = match &st.fd {
                Some(f) => f,
                None => {
                    let l = inode.first_link().ok_or(Error::NotFound)?;
                    tmp = self.open_link(&l, false)?;
                    &tmp
                }
            };
            let mut b = [0u8; HEADER_USED];
            pread_full(f, &mut b, 0)?;
            let len = f.metadata()?.len();
            if len < HEADER_USED as u64 {
                return Err(Error::Corrupt(Corruption::ShortHeader));
            }
            let h = Header::parse(&b, HeaderKind::File)?;
            self.keys.check_context(&h.context)?;
            if len < HEADER_SIZE || !(len - HEADER_SIZE).is_multiple_of(self.du) {
                return Err(Error::Corrupt(Corruption::BadLength));
            }
            Ok(h)
        })();
        let h = self.note(inode, None, r)?;
        st.context = h.context;
        st.size = h.size;
        st.loaded = true;
        Ok(())
    }

    fn file_crypt(&self, inode: &Inode, ctx: &[u8; CONTEXT_SIZE]) -> Result<NodeCrypt> {
        if let Some(c) = inode.crypt.get() {
            return Ok(c.clone());
        }
        self.need_key()?;
        let c = self.note(
            inode,
            None,
            self.keys.node_crypt(ctx, NodeKind::File, inode.backing_ino),
        )?;
        let _ = inode.crypt.set(c.clone());
        Ok(c)
    }

    fn symlink_parts(&self, inode: &Arc<Inode>) -> Result<([u8; CONTEXT_SIZE], Vec<u8>)> {
        let l = inode.first_link().ok_or(Error::NotFound)?;
        let target =
            rustix::fs::readlinkat(self.dir_fd(&l.parent)?, l.name.name.as_str(), Vec::new())
                .map_err(sys)?;
        let r = layout::decode_symlink(target.as_bytes()).and_then(|(ctx, blob)| {
            self.keys.check_context(&ctx)?;
            Ok((ctx, blob))
        });
        self.note(inode, None, r)
    }

    /// The target as presented: plaintext with the key, no-key name without.
    fn symlink_target(&self, inode: &Arc<Inode>) -> Result<Vec<u8>> {
        let (ctx, blob) = self.symlink_parts(inode)?;
        if !self.keys.unlocked() {
            // spec §7.4: without the key the target is the no-key name of the
            // ciphertext (hash = minor_hash = 0).
            if blob.len() < 3 {
                return self.note(inode, None, Err(Error::Corrupt(Corruption::BadSymlink)));
            }
            let len = u16::from_le_bytes([blob[0], blob[1]]) as usize;
            if len == 0 || 2 + len > blob.len() {
                return self.note(inode, None, Err(Error::Corrupt(Corruption::BadSymlink)));
            }
            return Ok(crate::crypt::nokey_name(&blob[2..2 + len]).into_bytes());
        }
        let crypt = match inode.crypt.get() {
            Some(c) => c.clone(),
            None => {
                let c = self.note(
                    inode,
                    None,
                    self.keys
                        .node_crypt(&ctx, NodeKind::Symlink, inode.backing_ino),
                )?;
                let _ = inode.crypt.set(c.clone());
                c
            }
        };
        let r = crypt
            .decrypt_symlink(&blob)
            .map_err(|_| Error::Corrupt(Corruption::BadSymlink));
        self.note(inode, None, r)
    }

    fn attr_from(&self, inode: &Arc<Inode>, st: &Stat) -> Result<FileAttr> {
        let mode = st.st_mode;
        let size = match inode.kind {
            // A damaged header or symlink still stats (size 0), so that the
            // object can be listed, renamed and deleted; reading it gives EIO.
            Kind::File => {
                let mut fs = inode.file.write().map_err(|_| Error::NotFound)?;
                match self.load_file(inode, &mut fs) {
                    Ok(()) => fs.size,
                    Err(e) if e.is_corruption() => 0,
                    Err(e) => return Err(e),
                }
            }
            Kind::Symlink => match inode.symlink_size.get() {
                Some(s) => *s,
                None => match self.symlink_target(inode) {
                    Ok(t) => {
                        let s = t.len() as u64;
                        let _ = inode.symlink_size.set(s);
                        s
                    }
                    Err(e) if e.is_corruption() => 0,
                    Err(e) => return Err(e),
                },
            },
            _ => st.st_size as u64,
        };
        Ok(FileAttr {
            ino: fuser::INodeNo(inode.ino.0),
            size,
            // Regular files: without the header's block, so that `du` and
            // sparse-file tools see the data units only.
            blocks: if inode.kind == Kind::File {
                (st.st_blocks as u64).saturating_sub(HEADER_SIZE / 512)
            } else {
                st.st_blocks as u64
            },
            atime: to_system_time(st.st_atime, st.st_atime_nsec as i64),
            mtime: to_system_time(st.st_mtime, st.st_mtime_nsec as i64),
            ctime: to_system_time(st.st_ctime, st.st_ctime_nsec as i64),
            crtime: UNIX_EPOCH,
            kind: fuse_type(mode),
            perm: (mode & 0o7777) as u16,
            nlink: st.st_nlink as u32,
            uid: st.st_uid,
            gid: st.st_gid,
            rdev: st.st_rdev as u32,
            blksize: 4096,
            flags: 0,
        })
    }

    /// Looks up the backing entry `bname` in `parent` and registers one kernel
    /// lookup of it.
    fn lookup_backing(
        &self,
        parent: &Arc<Inode>,
        bname: &BackingName,
    ) -> Result<(Arc<Inode>, Stat)> {
        let pfd = self.dir_fd(parent)?;
        let st =
            rustix::fs::statat(pfd, bname.name.as_str(), AtFlags::SYMLINK_NOFOLLOW).map_err(sys)?;
        let kind = kind_of(st.st_mode);
        let ino = self.inodes.fuse_ino(st.st_ino);
        let inode = self
            .inodes
            .lookup_or_insert(ino, kind, || -> Result<Inode> {
                let dir_fd = if kind == Kind::Dir {
                    Some(
                        rustix::fs::openat(
                            pfd,
                            bname.name.as_str(),
                            OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
                            Mode::empty(),
                        )
                        .map_err(sys)?,
                    )
                } else {
                    None
                };
                Ok(Inode::new(ino, st.st_ino, kind, dir_fd, None))
            })?;
        inode.add_link(parent, bname);
        Ok((inode, st))
    }

    fn set_owner_mode(
        &self,
        fd: BorrowedFd<'_>,
        caller: Caller,
        gid: u32,
        mode: u32,
        is_symlink_at: Option<&str>,
    ) -> Result<()> {
        let me_uid = self.euid;
        let me_gid = self.egid;
        if let Some(name) = is_symlink_at {
            if caller.uid != me_uid || gid != me_gid {
                rustix::fs::chownat(
                    fd,
                    name,
                    Some(rustix::fs::Uid::from_raw(caller.uid)),
                    Some(rustix::fs::Gid::from_raw(gid)),
                    AtFlags::SYMLINK_NOFOLLOW,
                )
                .map_err(sys)?;
            }
            return Ok(());
        }
        if caller.uid != me_uid || gid != me_gid {
            rustix::fs::fchown(
                fd,
                Some(rustix::fs::Uid::from_raw(caller.uid)),
                Some(rustix::fs::Gid::from_raw(gid)),
            )
            .map_err(sys)?;
        }
        rustix::fs::fchmod(fd, Mode::from_raw_mode(mode & 0o7777)).map_err(sys)?;
        Ok(())
    }

    /// Group of a new entry: the parent's group when the parent is setgid.
    fn new_gid(&self, parent: &Inode, caller: Caller) -> Result<(u32, bool)> {
        let st = rustix::fs::fstat(self.dir_fd(parent)?).map_err(sys)?;
        if st.st_mode & libc::S_ISGID != 0 {
            Ok((st.st_gid, true))
        } else {
            Ok((caller.gid, false))
        }
    }

    // -----------------------------------------------------------------------
    // lookups and attributes

    /// Looks up `name` in `parent` (one kernel lookup is recorded).
    ///
    /// # Errors
    /// `ENOENT`, `ENAMETOOLONG`, `ENOTDIR`, `EIO` for corrupt content.
    pub fn lookup(&self, parent: InodeNo, name: &OsStr) -> Result<FileAttr> {
        let p = self.inode(parent)?;
        if p.kind != Kind::Dir {
            return Err(Error::WrongType(WrongType::NotDir));
        }
        let bname = match self.resolve_name(&p, name) {
            Err(Error::InvalidName) => return Err(Error::NotFound),
            r => r?,
        };
        let (inode, st) = self.lookup_backing(&p, &bname)?;
        match self.attr_from(&inode, &st) {
            Ok(a) => Ok(a),
            Err(e) => {
                self.inodes.forget(inode.ino, 1);
                Err(e)
            }
        }
    }

    /// Drops `n` kernel lookups of `ino`.
    pub fn forget(&self, ino: InodeNo, n: u64) {
        self.inodes.forget(ino, n);
    }

    /// Attributes of `ino`.
    ///
    /// # Errors
    /// `ENOENT` for a stale inode, `EIO` for a corrupt header.
    pub fn getattr(&self, ino: InodeNo) -> Result<FileAttr> {
        let inode = self.inode(ino)?;
        let loc = self.loc(&inode)?;
        let st = self.stat_loc(&loc)?;
        self.attr_from(&inode, &st)
    }

    /// Changes attributes: owner, mode, size (truncate), times — in that order.
    ///
    /// # Errors
    /// `EROFS`, `ENOKEY` (truncate without key), `EISDIR`, backing errors.
    pub fn setattr(&self, ino: InodeNo, a: SetAttr) -> Result<FileAttr> {
        self.writable()?;
        let inode = self.inode(ino)?;
        let loc = self.loc(&inode)?;
        if a.uid.is_some() || a.gid.is_some() {
            let uid = a.uid.map(rustix::fs::Uid::from_raw);
            let gid = a.gid.map(rustix::fs::Gid::from_raw);
            match &loc {
                Loc::Fd(f) => rustix::fs::fchown(f, uid, gid),
                Loc::DirFd(d) => rustix::fs::fchown(self.dir_fd(d)?, uid, gid),
                Loc::At(l) => rustix::fs::chownat(
                    self.dir_fd(&l.parent)?,
                    l.name.name.as_str(),
                    uid,
                    gid,
                    AtFlags::SYMLINK_NOFOLLOW,
                ),
            }
            .map_err(sys)?;
        }
        if let Some(mode) = a.mode {
            let m = Mode::from_raw_mode(mode & 0o7777);
            match &loc {
                Loc::Fd(f) => rustix::fs::fchmod(f, m),
                Loc::DirFd(d) => rustix::fs::fchmod(self.dir_fd(d)?, m),
                Loc::At(l) => rustix::fs::chmodat(
                    self.dir_fd(&l.parent)?,
                    l.name.name.as_str(),
                    m,
                    AtFlags::empty(),
                ),
            }
            .map_err(sys)?;
        }
        if let Some(size) = a.size {
            match inode.kind {
                Kind::File => self.truncate(&inode, size)?,
                Kind::Dir => return Err(Error::WrongType(WrongType::IsDir)),
                _ => return Err(Error::InvalidArgument),
            }
        }
        if a.atime.is_some() || a.mtime.is_some() {
            let conv = |t: Option<SetTime>| match t {
                None => Timespec {
                    tv_sec: 0,
                    tv_nsec: rustix::fs::UTIME_OMIT,
                },
                Some(SetTime::Now) => Timespec {
                    tv_sec: 0,
                    tv_nsec: rustix::fs::UTIME_NOW,
                },
                Some(SetTime::At(t)) => match t.duration_since(UNIX_EPOCH) {
                    Ok(d) => Timespec {
                        tv_sec: d.as_secs() as i64,
                        tv_nsec: d.subsec_nanos() as _,
                    },
                    Err(e) => {
                        let d = e.duration();
                        let mut sec = -(d.as_secs() as i64);
                        let mut nsec = d.subsec_nanos() as i64;
                        if nsec > 0 {
                            sec -= 1;
                            nsec = 1_000_000_000 - nsec;
                        }
                        Timespec {
                            tv_sec: sec,
                            tv_nsec: nsec as _,
                        }
                    }
                },
            };
            let ts = Timestamps {
                last_access: conv(a.atime),
                last_modification: conv(a.mtime),
            };
            match &loc {
                Loc::Fd(f) => rustix::fs::futimens(f, &ts),
                Loc::DirFd(d) => rustix::fs::futimens(self.dir_fd(d)?, &ts),
                Loc::At(l) => rustix::fs::utimensat(
                    self.dir_fd(&l.parent)?,
                    l.name.name.as_str(),
                    &ts,
                    AtFlags::SYMLINK_NOFOLLOW,
                ),
            }
            .map_err(sys)?;
        }
        let st = self.stat_loc(&loc)?;
        self.attr_from(&inode, &st)
    }

    /// Clears setuid, and setgid if group-executable, of a regular file (what
    /// the kernel does when an unprivileged caller writes or truncates).
    ///
    /// # Errors
    /// Backing errors.
    pub fn kill_suid(&self, ino: InodeNo) -> Result<()> {
        let inode = self.inode(ino)?;
        if inode.kind != Kind::File {
            return Ok(());
        }
        let loc = self.loc(&inode)?;
        let st = self.stat_loc(&loc)?;
        let mut mode = st.st_mode & 0o7777;
        let old = mode;
        mode &= !libc::S_ISUID;
        if mode & libc::S_IXGRP != 0 {
            mode &= !libc::S_ISGID;
        }
        if mode == old {
            return Ok(());
        }
        let m = Mode::from_raw_mode(mode);
        match &loc {
            Loc::Fd(f) => rustix::fs::fchmod(f, m),
            Loc::DirFd(d) => rustix::fs::fchmod(self.dir_fd(d)?, m),
            Loc::At(l) => rustix::fs::chmodat(
                self.dir_fd(&l.parent)?,
                l.name.name.as_str(),
                m,
                AtFlags::empty(),
            ),
        }
        .map_err(sys)
    }

    /// The target of a symlink (plaintext; no-key name on a locked mount).
    ///
    /// # Errors
    /// `EINVAL` if not a symlink, `EIO` if corrupt.
    pub fn readlink(&self, ino: InodeNo) -> Result<Vec<u8>> {
        let inode = self.inode(ino)?;
        if inode.kind != Kind::Symlink {
            return Err(Error::WrongType(WrongType::Other));
        }
        self.symlink_target(&inode)
    }

    // -----------------------------------------------------------------------
    // creating entries

    fn finish_create(
        &self,
        parent: &Arc<Inode>,
        bname: &BackingName,
    ) -> Result<(Arc<Inode>, FileAttr)> {
        let (inode, st) = self.lookup_backing(parent, bname)?;
        let attr = self.attr_from(&inode, &st)?;
        Ok((inode, attr))
    }

    /// Creates a device node, FIFO or socket (not encrypted, as in the kernel;
    /// its name is). Regular files made with mknod get a header like `create`.
    ///
    /// # Errors
    /// `ENOKEY`, `EEXIST`, `EROFS`, `ENAMETOOLONG`, backing errors.
    pub fn mknod(
        &self,
        parent: InodeNo,
        name: &OsStr,
        mode: u32,
        rdev: u32,
        caller: Caller,
    ) -> Result<FileAttr> {
        if mode & libc::S_IFMT == libc::S_IFREG || mode & libc::S_IFMT == 0 {
            let (attr, fh) = self.create(parent, name, mode, libc::O_WRONLY, caller)?;
            self.release(fh)?;
            return Ok(attr);
        }
        self.writable()?;
        self.need_key()?;
        let p = self.inode(parent)?;
        let bname = self.name_for_create(&p, name)?;
        let pfd = self.dir_fd(&p)?;
        let ftype = rustix::fs::FileType::from_raw_mode(mode);
        let r = rustix::fs::mknodat(
            pfd,
            bname.name.as_str(),
            ftype,
            Mode::from_raw_mode(0o600),
            rdev as u64,
        )
        .map_err(sys);
        if let Err(e) = r {
            if !matches!(e, Error::Sys(rustix::io::Errno::EXIST)) {
                self.remove_side_file(&p, &bname);
            }
            return Err(e);
        }
        let (gid, _) = self.new_gid(&p, caller)?;
        rustix::fs::chownat(
            pfd,
            bname.name.as_str(),
            Some(rustix::fs::Uid::from_raw(caller.uid)),
            Some(rustix::fs::Gid::from_raw(gid)),
            AtFlags::SYMLINK_NOFOLLOW,
        )
        .map_err(sys)?;
        rustix::fs::chmodat(
            pfd,
            bname.name.as_str(),
            Mode::from_raw_mode(mode & 0o7777),
            AtFlags::empty(),
        )
        .map_err(sys)?;
        Ok(self.finish_create(&p, &bname)?.1)
    }

    /// Creates a directory (atomically: built under a temporary name with its
    /// metadata file, then renamed into place).
    ///
    /// # Errors
    /// `ENOKEY`, `EEXIST`, `EROFS`, `ENAMETOOLONG`, backing errors.
    pub fn mkdir(
        &self,
        parent: InodeNo,
        name: &OsStr,
        mode: u32,
        caller: Caller,
    ) -> Result<FileAttr> {
        self.writable()?;
        self.need_key()?;
        let p = self.inode(parent)?;
        let bname = self.name_for_create(&p, name)?;
        let pfd = self.dir_fd(&p)?;
        let mut rnd = [0u8; 12];
        crate::crypt::random(&mut rnd)?;
        let mut tmp = [0u8; 16];
        let n = layout::b64_encode(&rnd, &mut tmp);
        let tmp_name = format!("{TMP_PREFIX}{}", String::from_utf8_lossy(&tmp[..n]));
        rustix::fs::mkdirat(pfd, tmp_name.as_str(), Mode::from_raw_mode(0o700)).map_err(sys)?;
        let cleanup = |dfd: Option<&OwnedFd>| {
            if let Some(d) = dfd {
                let _ = rustix::fs::unlinkat(d, DIR_META_NAME, AtFlags::empty());
            }
            let _ = rustix::fs::unlinkat(pfd, tmp_name.as_str(), AtFlags::REMOVEDIR);
        };
        let dfd = match rustix::fs::openat(
            pfd,
            tmp_name.as_str(),
            OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
            Mode::empty(),
        ) {
            Ok(d) => d,
            Err(e) => {
                cleanup(None);
                return Err(sys(e));
            }
        };
        let r = (|| -> Result<()> {
            let ctx = self.keys.new_context()?;
            let h = Header {
                kind: HeaderKind::Directory,
                context: ctx,
                size: 0,
            };
            let m = rustix::fs::openat(
                &dfd,
                DIR_META_NAME,
                OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL | OFlags::CLOEXEC,
                Mode::from_raw_mode(0o600),
            )
            .map_err(sys)?;
            File::from(m).write_all_at(&h.to_bytes(), 0)?;
            let (gid, setgid) = self.new_gid(&p, caller)?;
            let mode = if setgid { mode | libc::S_ISGID } else { mode };
            self.set_owner_mode(dfd.as_fd(), caller, gid, mode, None)?;
            rustix::fs::renameat_with(
                pfd,
                tmp_name.as_str(),
                pfd,
                bname.name.as_str(),
                RenameFlags::NOREPLACE,
            )
            .map_err(sys)?;
            Ok(())
        })();
        if let Err(e) = r {
            cleanup(Some(&dfd));
            if !matches!(e, Error::Sys(rustix::io::Errno::EXIST)) {
                self.remove_side_file(&p, &bname);
            }
            return Err(e);
        }
        let st = rustix::fs::fstat(&dfd).map_err(sys)?;
        let ino = self.inodes.fuse_ino(st.st_ino);
        let inode = self
            .inodes
            .lookup_or_insert(ino, Kind::Dir, || -> Result<Inode> {
                Ok(Inode::new(ino, st.st_ino, Kind::Dir, Some(dfd), None))
            })?;
        inode.add_link(&p, &bname);
        self.attr_from(&inode, &st)
    }

    /// Creates a symlink whose target is encrypted with the link's own key
    /// (spec §7.4).
    ///
    /// # Errors
    /// `ENOKEY`, `EEXIST`, `ENAMETOOLONG` (target too long to store), backing errors.
    pub fn symlink(
        &self,
        parent: InodeNo,
        name: &OsStr,
        target: &[u8],
        caller: Caller,
    ) -> Result<FileAttr> {
        self.writable()?;
        self.need_key()?;
        let p = self.inode(parent)?;
        validate_name(name)?;
        if target.is_empty() || target.contains(&0) {
            return Err(Error::InvalidArgument);
        }
        let ctx = self.keys.new_context()?;
        let crypt = self.keys.node_crypt(&ctx, NodeKind::Symlink, 0)?;
        let blob = crypt
            .encrypt_symlink(target, SYMLINK_MAX_BLOB)
            .map_err(|_| Error::NameTooLong)?;
        let encoded = layout::encode_symlink(&ctx, &blob);
        if encoded.len() > layout::BACKING_SYMLINK_MAX {
            return Err(Error::NameTooLong);
        }
        let bname = self.name_for_create(&p, name)?;
        let pfd = self.dir_fd(&p)?;
        if let Err(e) = rustix::fs::symlinkat(encoded.as_str(), pfd, bname.name.as_str()) {
            if e != rustix::io::Errno::EXIST {
                self.remove_side_file(&p, &bname);
            }
            return Err(sys(e));
        }
        let (gid, _) = self.new_gid(&p, caller)?;
        self.set_owner_mode(pfd, caller, gid, 0o777, Some(bname.name.as_str()))?;
        let (inode, st) = self.lookup_backing(&p, &bname)?;
        let _ = inode.crypt.set(crypt);
        let _ = inode.symlink_size.set(target.len() as u64);
        self.attr_from(&inode, &st)
    }

    /// Creates and opens a regular file with a fresh context and header.
    ///
    /// # Errors
    /// `ENOKEY`, `EEXIST`, `EROFS`, `ENAMETOOLONG`, backing errors.
    pub fn create(
        &self,
        parent: InodeNo,
        name: &OsStr,
        mode: u32,
        flags: i32,
        caller: Caller,
    ) -> Result<(FileAttr, FileHandle)> {
        self.writable()?;
        self.need_key()?;
        let p = self.inode(parent)?;
        let bname = self.name_for_create(&p, name)?;
        let pfd = self.dir_fd(&p)?;
        let fd = match rustix::fs::openat(
            pfd,
            bname.name.as_str(),
            OFlags::RDWR | OFlags::CREATE | OFlags::EXCL | OFlags::CLOEXEC | OFlags::NOFOLLOW,
            Mode::from_raw_mode(mode & 0o777),
        ) {
            Ok(fd) => fd,
            Err(e) => {
                if e != rustix::io::Errno::EXIST {
                    self.remove_side_file(&p, &bname);
                }
                return Err(sys(e));
            }
        };
        let file = File::from(fd);
        let r = (|| -> Result<(Stat, [u8; CONTEXT_SIZE])> {
            let ctx = self.keys.new_context()?;
            let h = Header {
                kind: HeaderKind::File,
                context: ctx,
                size: 0,
            };
            let mut region = [0u8; HEADER_SIZE as usize];
            region[..HEADER_USED].copy_from_slice(&h.to_bytes());
            file.write_all_at(&region, 0)?;
            let (gid, _) = self.new_gid(&p, caller)?;
            let me_uid = self.euid;
            let me_gid = self.egid;
            if caller.uid != me_uid || gid != me_gid || mode & 0o7000 != 0 {
                self.set_owner_mode(file.as_fd(), caller, gid, mode, None)?;
            }
            Ok((rustix::fs::fstat(&file).map_err(sys)?, ctx))
        })();
        let (st, ctx) = match r {
            Ok(v) => v,
            Err(e) => {
                let _ = rustix::fs::unlinkat(pfd, bname.name.as_str(), AtFlags::empty());
                self.remove_side_file(&p, &bname);
                return Err(e);
            }
        };
        let ino = self.inodes.fuse_ino(st.st_ino);
        let inode = self
            .inodes
            .lookup_or_insert(ino, Kind::File, || -> Result<Inode> {
                Ok(Inode::new(ino, st.st_ino, Kind::File, None, None))
            })?;
        inode.add_link(&p, &bname);
        {
            let mut fs = inode.file.write().map_err(|_| Error::NotFound)?;
            fs.loaded = true;
            fs.context = ctx;
            fs.size = 0;
            fs.fd = Some(Arc::new(file));
            fs.fd_writable = true;
            fs.opens += 1;
        }
        let attr = self.attr_from(&inode, &st)?;
        let acc = flags & libc::O_ACCMODE;
        let fh = self.handles.insert(Handle::File {
            inode,
            append: flags & libc::O_APPEND != 0,
            write: acc == libc::O_WRONLY || acc == libc::O_RDWR,
        });
        Ok((attr, fh))
    }

    /// Creates a hard link `newparent/newname` to `ino`.
    ///
    /// # Errors
    /// `ENOKEY`, `EEXIST`, `EPERM` for directories, backing errors.
    pub fn link(&self, ino: InodeNo, newparent: InodeNo, newname: &OsStr) -> Result<FileAttr> {
        self.writable()?;
        self.need_key()?;
        let inode = self.inode(ino)?;
        if inode.kind == Kind::Dir {
            return Err(Error::Sys(rustix::io::Errno::PERM));
        }
        let np = self.inode(newparent)?;
        let src = inode.first_link().ok_or(Error::NotFound)?;
        let bname = self.name_for_create(&np, newname)?;
        if let Err(e) = rustix::fs::linkat(
            self.dir_fd(&src.parent)?,
            src.name.name.as_str(),
            self.dir_fd(&np)?,
            bname.name.as_str(),
            AtFlags::empty(),
        ) {
            if e != rustix::io::Errno::EXIST {
                self.remove_side_file(&np, &bname);
            }
            return Err(sys(e));
        }
        Ok(self.finish_create(&np, &bname)?.1)
    }

    // -----------------------------------------------------------------------
    // removing and renaming

    /// Removes a non-directory entry (works without the key, via no-key names).
    ///
    /// # Errors
    /// `ENOENT`, `EISDIR`, `EROFS`, backing errors.
    pub fn unlink(&self, parent: InodeNo, name: &OsStr) -> Result<()> {
        self.writable()?;
        let p = self.inode(parent)?;
        let bname = self.resolve_name(&p, name)?;
        let pfd = self.dir_fd(&p)?;
        let st =
            rustix::fs::statat(pfd, bname.name.as_str(), AtFlags::SYMLINK_NOFOLLOW).map_err(sys)?;
        if kind_of(st.st_mode) == Kind::Dir {
            return Err(Error::WrongType(WrongType::IsDir));
        }
        rustix::fs::unlinkat(pfd, bname.name.as_str(), AtFlags::empty()).map_err(sys)?;
        self.remove_side_file(&p, &bname);
        if let Some(i) = self.inodes.get(self.inodes.fuse_ino(st.st_ino)) {
            i.remove_link(p.ino, &bname);
        }
        Ok(())
    }

    /// Lists a backing directory's user-visible entries (names only).
    fn has_user_entries(&self, dfd: BorrowedFd<'_>) -> Result<bool> {
        let mut d = rustix::fs::Dir::read_from(dfd).map_err(sys)?;
        while let Some(ent) = d.read() {
            let ent = ent.map_err(sys)?;
            match layout::classify(ent.file_name().to_bytes()) {
                EntryName::Internal => {}
                _ => return Ok(true),
            }
        }
        Ok(false)
    }

    /// Removes our internal files (metadata, orphan side files) from a
    /// directory known to have no user entries.
    fn clear_internal(&self, dfd: BorrowedFd<'_>) -> Result<()> {
        let mut names = Vec::new();
        let mut d = rustix::fs::Dir::read_from(dfd).map_err(sys)?;
        while let Some(ent) = d.read() {
            let ent = ent.map_err(sys)?;
            let n = ent.file_name().to_bytes();
            if n != b"." && n != b".." {
                names.push(OsString::from_vec(n.to_vec()));
            }
        }
        for n in names {
            let flags = if rustix::fs::statat(dfd, n.as_os_str(), AtFlags::SYMLINK_NOFOLLOW)
                .map(|s| kind_of(s.st_mode) == Kind::Dir)
                .unwrap_or(false)
            {
                AtFlags::REMOVEDIR
            } else {
                AtFlags::empty()
            };
            rustix::fs::unlinkat(dfd, n.as_os_str(), flags).map_err(sys)?;
        }
        Ok(())
    }

    /// Removes an empty directory (works without the key).
    ///
    /// # Errors
    /// `ENOTEMPTY`, `ENOTDIR`, `ENOENT`, `EROFS`, backing errors.
    pub fn rmdir(&self, parent: InodeNo, name: &OsStr) -> Result<()> {
        self.writable()?;
        let p = self.inode(parent)?;
        let bname = self.resolve_name(&p, name)?;
        let pfd = self.dir_fd(&p)?;
        let dfd = rustix::fs::openat(
            pfd,
            bname.name.as_str(),
            OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
            Mode::empty(),
        )
        .map_err(sys)?;
        if self.has_user_entries(dfd.as_fd())? {
            return Err(Error::Sys(rustix::io::Errno::NOTEMPTY));
        }
        let st = rustix::fs::fstat(&dfd).map_err(sys)?;
        // The kernel holds the victim's lock, so nothing is created inside
        // between the check and the removal.
        self.clear_internal(dfd.as_fd())?;
        rustix::fs::unlinkat(pfd, bname.name.as_str(), AtFlags::REMOVEDIR).map_err(sys)?;
        self.remove_side_file(&p, &bname);
        if let Some(i) = self.inodes.get(self.inodes.fuse_ino(st.st_ino)) {
            i.remove_link(p.ino, &bname);
        }
        Ok(())
    }

    /// Renames an entry (`flags`: RENAME_NOREPLACE, RENAME_EXCHANGE).
    ///
    /// # Errors
    /// `ENOKEY` without the key (as the kernel: no-key names cannot be
    /// renamed), `EEXIST`, `ENOTEMPTY`, `EXDEV`, backing errors.
    pub fn rename(
        &self,
        parent: InodeNo,
        name: &OsStr,
        newparent: InodeNo,
        newname: &OsStr,
        flags: u32,
    ) -> Result<()> {
        self.writable()?;
        self.need_key()?;
        let p = self.inode(parent)?;
        let np = self.inode(newparent)?;
        let ob = self.encrypt_name(&p, name)?;
        let pfd = self.dir_fd(&p)?;
        let npfd = self.dir_fd(&np)?;
        let exchange = flags & libc::RENAME_EXCHANGE != 0;
        let noreplace = flags & libc::RENAME_NOREPLACE != 0;
        if flags & !(libc::RENAME_EXCHANGE | libc::RENAME_NOREPLACE) != 0 {
            return Err(Error::InvalidArgument);
        }
        let src =
            rustix::fs::statat(pfd, ob.name.as_str(), AtFlags::SYMLINK_NOFOLLOW).map_err(sys)?;
        let nb = self.name_for_create(&np, newname)?;
        let dst = match rustix::fs::statat(npfd, nb.name.as_str(), AtFlags::SYMLINK_NOFOLLOW) {
            Ok(s) => Some(s),
            Err(rustix::io::Errno::NOENT) => None,
            Err(e) => return Err(sys(e)),
        };
        if let Some(d) = &dst
            && d.st_ino == src.st_ino
        {
            // Same inode (hard links or same name): POSIX says do nothing.
            return Ok(());
        }
        let mut rflags = RenameFlags::empty();
        if exchange {
            rflags |= RenameFlags::EXCHANGE;
        }
        if noreplace {
            rflags |= RenameFlags::NOREPLACE;
        }
        // Replacing an empty directory: the backing one still holds our
        // metadata file; remove it first and restore it if the rename fails.
        let mut restore: Option<(OwnedFd, Vec<u8>)> = None;
        if let Some(d) = &dst
            && !exchange
            && !noreplace
            && kind_of(d.st_mode) == Kind::Dir
            && kind_of(src.st_mode) == Kind::Dir
        {
            let dfd = rustix::fs::openat(
                npfd,
                nb.name.as_str(),
                OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
                Mode::empty(),
            )
            .map_err(sys)?;
            if self.has_user_entries(dfd.as_fd())? {
                return Err(Error::Sys(rustix::io::Errno::NOTEMPTY));
            }
            let meta = std::fs::read(format!(
                "/proc/self/fd/{}/{}",
                dfd.as_raw_fd(),
                DIR_META_NAME
            ))
            .unwrap_or_default();
            self.clear_internal(dfd.as_fd())?;
            restore = Some((dfd, meta));
        }
        if let Err(e) =
            rustix::fs::renameat_with(pfd, ob.name.as_str(), npfd, nb.name.as_str(), rflags)
        {
            if let Some((dfd, meta)) = restore
                && let Ok(m) = rustix::fs::openat(
                    &dfd,
                    DIR_META_NAME,
                    OFlags::WRONLY | OFlags::CREATE | OFlags::CLOEXEC,
                    Mode::from_raw_mode(0o600),
                )
            {
                let _ = File::from(m).write_all_at(&meta, 0);
            }
            if dst.is_none() {
                self.remove_side_file(&np, &nb);
            }
            return Err(sys(e));
        }
        if !exchange {
            self.remove_side_file(&p, &ob);
        }
        if let Some(i) = self.inodes.get(self.inodes.fuse_ino(src.st_ino)) {
            i.remove_link(p.ino, &ob);
            i.add_link(&np, &nb);
        }
        if let Some(d) = &dst
            && let Some(i) = self.inodes.get(self.inodes.fuse_ino(d.st_ino))
        {
            i.remove_link(np.ino, &nb);
            if exchange {
                i.add_link(&p, &ob);
            }
        }
        Ok(())
    }

    // -----------------------------------------------------------------------
    // file contents

    /// Opens a regular file (`flags` as in open(2)).
    ///
    /// # Errors
    /// `ENOKEY` on a locked mount (as the kernel), `EROFS`, `EIO` if corrupt.
    pub fn open(&self, ino: InodeNo, flags: i32) -> Result<FileHandle> {
        let inode = self.inode(ino)?;
        match inode.kind {
            Kind::File => {}
            Kind::Dir => return Err(Error::WrongType(WrongType::IsDir)),
            _ => return Err(Error::InvalidArgument),
        }
        self.need_key()?;
        let acc = flags & libc::O_ACCMODE;
        let write = acc == libc::O_WRONLY || acc == libc::O_RDWR;
        if write {
            self.writable()?;
        }
        {
            let mut st = inode.file.write().map_err(|_| Error::NotFound)?;
            self.load_file(&inode, &mut st)?;
            self.file_crypt(&inode, &st.context)?;
            if st.fd.is_none() || (write && !st.fd_writable) {
                let l = inode.first_link().ok_or(Error::NotFound)?;
                let want_rw = !self.opts.read_only;
                let f = match self.open_link(&l, want_rw) {
                    Ok(f) => (f, want_rw),
                    Err(_) if !write => (self.open_link(&l, false)?, false),
                    Err(e) => return Err(e),
                };
                if f.1 {
                    // Repair after a crash: nothing may be stored past the
                    // units that cover the size (spec of the format doc).
                    let len = f.0.metadata()?.len();
                    let want = layout::backing_len_for(st.size, self.du);
                    if len > want {
                        f.0.set_len(want)?;
                    }
                }
                st.fd = Some(Arc::new(f.0));
                st.fd_writable = f.1;
            }
            st.opens += 1;
        }
        Ok(self.handles.insert(Handle::File {
            inode,
            append: flags & libc::O_APPEND != 0,
            write,
        }))
    }

    fn file_handle(&self, fh: FileHandle) -> Result<(Arc<Inode>, bool, bool)> {
        match self.handles.get(fh).as_deref() {
            Some(Handle::File {
                inode,
                append,
                write,
            }) => Ok((inode.clone(), *append, *write)),
            Some(Handle::Dir { .. }) => Err(Error::WrongType(WrongType::IsDir)),
            None => Err(Error::Sys(rustix::io::Errno::BADF)),
        }
    }

    /// Reads one data unit `idx` into `dst` (zeros for a hole), masking bytes
    /// at or past `size` (stale tails after a crash never become visible).
    fn read_unit(
        &self,
        f: &File,
        crypt: &NodeCrypt,
        idx: u64,
        dst: &mut [u8],
        size: u64,
    ) -> Result<bool> {
        pread_full(f, dst, layout::unit_offset(idx, self.du))?;
        if is_zero(dst) {
            return Ok(false);
        }
        crypt
            .decrypt_data_units(idx, dst)
            .map_err(|e| Error::Crypt(e.to_string()))?;
        let start = idx * self.du;
        if size < start + self.du {
            let keep = size.saturating_sub(start) as usize;
            dst[keep..].fill(0);
        }
        Ok(true)
    }

    /// Reads `size` bytes at `offset`; the plaintext is left in `buf[range]`.
    ///
    /// # Errors
    /// `EBADF` for a bad handle, backing errors, `EIO` if decryption fails.
    pub fn read(
        &self,
        fh: FileHandle,
        offset: u64,
        size: u32,
        buf: &mut Vec<u8>,
    ) -> Result<std::ops::Range<usize>> {
        let (inode, _, _) = self.file_handle(fh)?;
        let st = inode.file.read().map_err(|_| Error::NotFound)?;
        let f = st.fd.clone().ok_or(Error::Sys(rustix::io::Errno::BADF))?;
        let crypt = self.file_crypt(&inode, &st.context)?;
        if offset >= st.size || size == 0 {
            return Ok(0..0);
        }
        let du = self.du;
        let end = (offset + size as u64).min(st.size);
        let first = offset / du;
        let last = end.div_ceil(du);
        let n = ((last - first) * du) as usize;
        if buf.len() < n {
            buf.resize(n, 0);
        }
        let b = &mut buf[..n];
        pread_full(&f, b, layout::unit_offset(first, du))?;
        // Decrypt runs of stored units; all-zero units are holes.
        let mut i = 0usize;
        let units = (last - first) as usize;
        let dus = du as usize;
        while i < units {
            if is_zero(&b[i * dus..(i + 1) * dus]) {
                i += 1;
                continue;
            }
            let mut j = i + 1;
            while j < units && !is_zero(&b[j * dus..(j + 1) * dus]) {
                j += 1;
            }
            let r = crypt
                .decrypt_data_units(first + i as u64, &mut b[i * dus..j * dus])
                .map_err(|e| Error::Crypt(e.to_string()));
            self.note(&inode, None, r)?;
            i = j;
        }
        let start = (offset - first * du) as usize;
        Ok(start..start + (end - offset) as usize)
    }

    fn write_size(&self, f: &File, st: &FileState) -> Result<()> {
        let h = Header {
            kind: HeaderKind::File,
            context: st.context,
            size: st.size,
        };
        f.write_all_at(&h.size_update_bytes(), 56)?;
        Ok(())
    }

    /// Zeroes the stored tail (past `size`) of the unit holding EOF, if any;
    /// called before the size grows past that unit.
    fn zero_eof_tail(&self, f: &File, crypt: &NodeCrypt, size: u64) -> Result<()> {
        let du = self.du;
        if size.is_multiple_of(du) {
            return Ok(());
        }
        let idx = size / du;
        let mut unit = vec![0u8; du as usize];
        pread_full(f, &mut unit, layout::unit_offset(idx, du))?;
        if is_zero(&unit) {
            return Ok(());
        }
        crypt
            .decrypt_data_units(idx, &mut unit)
            .map_err(|e| Error::Crypt(e.to_string()))?;
        let keep = (size % du) as usize;
        if is_zero(&unit[keep..]) {
            return Ok(());
        }
        unit[keep..].fill(0);
        crypt
            .encrypt_data_units(idx, &mut unit)
            .map_err(|e| Error::Crypt(e.to_string()))?;
        f.write_all_at(&unit, layout::unit_offset(idx, du))?;
        Ok(())
    }

    /// Writes `data` at `offset` (at EOF for O_APPEND handles). Partial data
    /// units are read, decrypted, merged and re-encrypted under the file's
    /// exclusive lock, so concurrent writers never lose updates.
    ///
    /// # Errors
    /// `EBADF`, `EROFS`, `EFBIG`, backing errors, `EIO` if decryption fails.
    pub fn write(&self, fh: FileHandle, offset: u64, data: &[u8]) -> Result<u32> {
        let (inode, append, write) = self.file_handle(fh)?;
        if !write {
            return Err(Error::Sys(rustix::io::Errno::BADF));
        }
        self.writable()?;
        if data.is_empty() {
            return Ok(0);
        }
        let mut st = inode.file.write().map_err(|_| Error::NotFound)?;
        let f = st.fd.clone().ok_or(Error::Sys(rustix::io::Errno::BADF))?;
        let crypt = self.file_crypt(&inode, &st.context)?;
        let offset = if append { st.size } else { offset };
        let du = self.du;
        let end = offset
            .checked_add(data.len() as u64)
            .filter(|e| *e <= i64::MAX as u64)
            .ok_or(Error::Sys(rustix::io::Errno::FBIG))?;
        let old = st.size;
        let first = offset / du;
        let last = end.div_ceil(du);
        if first > old / du {
            self.zero_eof_tail(&f, &crypt, old)?;
        }
        let dus = du as usize;
        let n = ((last - first) * du) as usize;
        IO_BUF.with(|cell| -> Result<()> {
            let mut guard = cell.borrow_mut();
            if guard.len() < n {
                guard.resize(n, 0);
            }
            let buf = &mut guard[..n];
            let head = (offset - first * du) as usize;
            if head != 0 {
                if first * du < old {
                    self.read_unit(&f, &crypt, first, &mut buf[..dus], old)?;
                } else {
                    buf[..dus].fill(0);
                }
            }
            let tail_unit = last - 1;
            if end % du != 0 && (tail_unit != first || head == 0) {
                let t = ((tail_unit - first) * du) as usize;
                if tail_unit * du < old {
                    self.read_unit(&f, &crypt, tail_unit, &mut buf[t..t + dus], old)?;
                } else {
                    buf[t..t + dus].fill(0);
                }
            }
            buf[head..head + data.len()].copy_from_slice(data);
            crypt
                .encrypt_data_units(first, buf)
                .map_err(|e| Error::Crypt(e.to_string()))?;
            f.write_all_at(buf, layout::unit_offset(first, du))?;
            Ok(())
        })?;
        if end > old {
            st.size = end;
            self.write_size(&f, &st)?;
        }
        Ok(data.len() as u32)
    }

    /// Sets the plaintext size under the file's exclusive lock.
    fn truncate(&self, inode: &Arc<Inode>, size: u64) -> Result<()> {
        self.need_key()?;
        if size > i64::MAX as u64 {
            return Err(Error::Sys(rustix::io::Errno::FBIG));
        }
        let mut st = inode.file.write().map_err(|_| Error::NotFound)?;
        self.load_file(inode, &mut st)?;
        let crypt = self.file_crypt(inode, &st.context)?;
        let f: Arc<File> = match (&st.fd, st.fd_writable) {
            (Some(f), true) => f.clone(),
            _ => {
                let l = inode.first_link().ok_or(Error::NotFound)?;
                Arc::new(self.open_link(&l, true)?)
            }
        };
        let du = self.du;
        let old = st.size;
        if size < old {
            if !size.is_multiple_of(du) {
                let idx = size / du;
                let mut unit = vec![0u8; du as usize];
                if self.read_unit(&f, &crypt, idx, &mut unit, size)? {
                    crypt
                        .encrypt_data_units(idx, &mut unit)
                        .map_err(|e| Error::Crypt(e.to_string()))?;
                    f.write_all_at(&unit, layout::unit_offset(idx, du))?;
                }
            }
            let want = layout::backing_len_for(size, du);
            if f.metadata()?.len() > want {
                f.set_len(want)?;
            }
        } else if size > old {
            // Units stored past the old size (an extending write whose size
            // update a crash lost) must not reappear inside the file.
            let want = layout::backing_len_for(old, du);
            if f.metadata()?.len() > want {
                f.set_len(want)?;
            }
            self.zero_eof_tail(&f, &crypt, old)?;
        } else {
            return Ok(());
        }
        st.size = size;
        self.write_size(&f, &st)
    }

    /// Allocates (mode 0: grows the size like truncate; KEEP_SIZE: no-op).
    ///
    /// # Errors
    /// `EOPNOTSUPP` for other modes (punching holes, collapsing ranges: as the
    /// kernel refuses range shifts on encrypted files), backing errors.
    pub fn fallocate(&self, fh: FileHandle, offset: u64, length: u64, mode: i32) -> Result<()> {
        let (inode, _, write) = self.file_handle(fh)?;
        if !write {
            return Err(Error::Sys(rustix::io::Errno::BADF));
        }
        self.writable()?;
        match mode {
            0 => {
                let end = offset
                    .checked_add(length)
                    .ok_or(Error::Sys(rustix::io::Errno::FBIG))?;
                let cur = inode.file.read().map_err(|_| Error::NotFound)?.size;
                if end > cur {
                    self.truncate(&inode, end)?;
                }
                Ok(())
            }
            libc::FALLOC_FL_KEEP_SIZE => Ok(()),
            _ => Err(Error::NotSupported),
        }
    }

    /// Flushes the backing file to stable storage.
    ///
    /// # Errors
    /// `EBADF`, backing errors.
    pub fn fsync(&self, fh: FileHandle, datasync: bool) -> Result<()> {
        let (inode, _, _) = self.file_handle(fh)?;
        let f = inode.file.read().map_err(|_| Error::NotFound)?.fd.clone();
        if let Some(f) = f {
            if datasync {
                f.sync_data()?;
            } else {
                f.sync_all()?;
            }
        }
        Ok(())
    }

    /// Closes a file handle; the backing fd closes with the last handle.
    ///
    /// # Errors
    /// `EBADF` for an unknown handle.
    pub fn release(&self, fh: FileHandle) -> Result<()> {
        match self.handles.remove(fh).as_deref() {
            Some(Handle::File { inode, .. }) => {
                let mut st = inode.file.write().map_err(|_| Error::NotFound)?;
                st.opens = st.opens.saturating_sub(1);
                if st.opens == 0 {
                    st.fd = None;
                }
                Ok(())
            }
            Some(Handle::Dir { .. }) => Ok(()),
            None => Err(Error::Sys(rustix::io::Errno::BADF)),
        }
    }

    // -----------------------------------------------------------------------
    // directories

    /// Opens a directory for listing.
    ///
    /// # Errors
    /// `ENOTDIR`, `ENOENT`.
    pub fn opendir(&self, ino: InodeNo) -> Result<FileHandle> {
        let inode = self.inode(ino)?;
        if inode.kind != Kind::Dir {
            return Err(Error::WrongType(WrongType::NotDir));
        }
        Ok(self.handles.insert(Handle::Dir {
            inode,
            entries: std::sync::Mutex::new(None),
        }))
    }

    fn list(&self, dir: &Arc<Inode>) -> Result<Vec<DirEntry>> {
        let fd = self.dir_fd(dir)?;
        let crypt = if self.keys.unlocked() {
            Some(self.dir_crypt(dir)?)
        } else {
            None
        };
        let parent_ino = dir
            .first_link()
            .map(|l| l.parent.ino.0)
            .unwrap_or(dir.ino.0);
        let mut out = vec![
            DirEntry {
                ino: dir.ino.0,
                kind: Kind::Dir,
                name: OsString::from("."),
            },
            DirEntry {
                ino: parent_ino,
                kind: Kind::Dir,
                name: OsString::from(".."),
            },
        ];
        let mut d = rustix::fs::Dir::read_from(fd).map_err(sys)?;
        while let Some(ent) = d.read() {
            let ent = ent.map_err(sys)?;
            let ename = ent.file_name().to_bytes();
            let Some(ct) = self.entry_ciphertext(dir, ename)? else {
                continue;
            };
            let name = match &crypt {
                Some(c) => match c.decrypt_filename(&ct) {
                    Ok(p) if !p.is_empty() && !p.contains(&b'/') && &*p != b"." && &*p != b".." => {
                        OsString::from_vec(p.to_vec())
                    }
                    _ => {
                        let what = String::from_utf8_lossy(ename).into_owned();
                        let _ = self.note::<()>(
                            dir,
                            Some(&what),
                            Err(Error::Corrupt(Corruption::BadName)),
                        );
                        continue;
                    }
                },
                None => OsString::from(crate::crypt::nokey_name(&ct)),
            };
            let kind = match ent.file_type() {
                rustix::fs::FileType::Directory => Kind::Dir,
                rustix::fs::FileType::RegularFile => Kind::File,
                rustix::fs::FileType::Symlink => Kind::Symlink,
                _ => Kind::Special,
            };
            out.push(DirEntry {
                ino: self.inodes.fuse_ino(ent.ino()).0,
                kind,
                name,
            });
        }
        Ok(out)
    }

    /// Entries of an open directory from `offset` (0 = start; each entry's
    /// offset is its index + 1). `add` returns true when the reply is full.
    ///
    /// # Errors
    /// `EBADF`, backing errors.
    pub fn readdir(
        &self,
        fh: FileHandle,
        offset: u64,
        mut add: impl FnMut(u64, u64, Kind, &OsStr) -> bool,
    ) -> Result<()> {
        let h = self
            .handles
            .get(fh)
            .ok_or(Error::Sys(rustix::io::Errno::BADF))?;
        let Handle::Dir { inode, entries } = &*h else {
            return Err(Error::WrongType(WrongType::NotDir));
        };
        let list = {
            let mut e = entries.lock().map_err(|_| Error::NotFound)?;
            if offset == 0 || e.is_none() {
                *e = Some(Arc::new(self.list(inode)?));
            }
            e.clone().unwrap_or_default()
        };
        for (i, ent) in list.iter().enumerate().skip(offset as usize) {
            if add(ent.ino, i as u64 + 1, ent.kind, &ent.name) {
                break;
            }
        }
        Ok(())
    }

    /// Closes a directory handle.
    ///
    /// # Errors
    /// `EBADF`.
    pub fn releasedir(&self, fh: FileHandle) -> Result<()> {
        self.release(fh)
    }

    /// Flushes a directory to stable storage.
    ///
    /// # Errors
    /// Backing errors.
    pub fn fsyncdir(&self, ino: InodeNo) -> Result<()> {
        let inode = self.inode(ino)?;
        rustix::fs::fsync(self.dir_fd(&inode)?).map_err(sys)
    }

    /// Statistics of the backing filesystem.
    ///
    /// # Errors
    /// Backing errors.
    pub fn statfs(&self) -> Result<FsStats> {
        let root = self.inode(ROOT)?;
        let s = rustix::fs::fstatvfs(self.dir_fd(&root)?).map_err(sys)?;
        Ok(FsStats {
            blocks: s.f_blocks,
            bfree: s.f_bfree,
            bavail: s.f_bavail,
            files: s.f_files,
            ffree: s.f_ffree,
            bsize: s.f_bsize as u32,
            namelen: NAME_MAX as u32,
            frsize: s.f_frsize as u32,
        })
    }

    // -----------------------------------------------------------------------
    // extended attributes: user.* only, stored unencrypted on the backing
    // object (as the kernel: fscrypt does not encrypt xattrs).

    /// Runs an xattr call on the backing object: on its fd when we hold one
    /// (f*xattr), else on `/proc/self/fd/<dir fd>/<name>` without following a
    /// final symlink (l*xattr).
    fn with_xattr_target<T, B>(
        &self,
        loc: &Loc,
        buf: B,
        on_fd: impl FnOnce(BorrowedFd<'_>, B) -> rustix::io::Result<T>,
        on_path: impl FnOnce(&str, B) -> rustix::io::Result<T>,
    ) -> Result<T> {
        match loc {
            Loc::Fd(f) => on_fd(f.as_fd(), buf).map_err(sys),
            Loc::DirFd(d) => on_fd(self.dir_fd(d)?, buf).map_err(sys),
            Loc::At(l) => {
                let p = format!(
                    "/proc/self/fd/{}/{}",
                    self.dir_fd(&l.parent)?.as_raw_fd(),
                    l.name.name
                );
                on_path(&p, buf).map_err(sys)
            }
        }
    }

    fn check_xattr_name(name: &OsStr) -> Result<()> {
        if name.as_bytes().starts_with(b"user.") {
            Ok(())
        } else {
            Err(Error::NotSupported)
        }
    }

    /// Sets a user xattr.
    ///
    /// # Errors
    /// `EOPNOTSUPP` outside `user.`, backing errors.
    pub fn setxattr(&self, ino: InodeNo, name: &OsStr, value: &[u8], flags: i32) -> Result<()> {
        self.writable()?;
        Self::check_xattr_name(name)?;
        let inode = self.inode(ino)?;
        let loc = self.loc(&inode)?;
        let fl = rustix::fs::XattrFlags::from_bits_retain(flags as _);
        self.with_xattr_target(
            &loc,
            (),
            |fd, ()| rustix::fs::fsetxattr(fd, name, value, fl),
            |p, ()| rustix::fs::lsetxattr(p, name, value, fl),
        )
    }

    /// Reads a user xattr; `size` 0 asks for the length. Returns the value.
    ///
    /// # Errors
    /// `ENODATA`, `ERANGE`, `EOPNOTSUPP`, backing errors.
    pub fn getxattr(&self, ino: InodeNo, name: &OsStr, size: u32) -> Result<Vec<u8>> {
        if !name.as_bytes().starts_with(b"user.") {
            return Err(Error::Sys(rustix::io::Errno::NODATA));
        }
        let inode = self.inode(ino)?;
        let loc = self.loc(&inode)?;
        let mut buf = vec![0u8; if size == 0 { 65536 } else { size as usize }];
        let n = self.with_xattr_target(
            &loc,
            &mut buf[..],
            |fd, b| rustix::fs::fgetxattr(fd, name, b),
            |p, b| rustix::fs::lgetxattr(p, name, b),
        )?;
        buf.truncate(n);
        Ok(buf)
    }

    /// Lists xattr names (NUL-separated), `user.` only.
    ///
    /// # Errors
    /// Backing errors.
    pub fn listxattr(&self, ino: InodeNo) -> Result<Vec<u8>> {
        let inode = self.inode(ino)?;
        let loc = self.loc(&inode)?;
        let mut buf = vec![0u8; 65536];
        let n = self.with_xattr_target(
            &loc,
            &mut buf[..],
            |fd, b| rustix::fs::flistxattr(fd, b),
            |p, b| rustix::fs::llistxattr(p, b),
        )?;
        let mut out = Vec::new();
        for name in buf[..n].split(|&b| b == 0) {
            if name.starts_with(b"user.") {
                out.extend_from_slice(name);
                out.push(0);
            }
        }
        Ok(out)
    }

    /// Removes a user xattr.
    ///
    /// # Errors
    /// `ENODATA`, `EOPNOTSUPP`, backing errors.
    pub fn removexattr(&self, ino: InodeNo, name: &OsStr) -> Result<()> {
        self.writable()?;
        Self::check_xattr_name(name)?;
        let inode = self.inode(ino)?;
        let loc = self.loc(&inode)?;
        self.with_xattr_target(
            &loc,
            (),
            |fd, ()| rustix::fs::fremovexattr(fd, name),
            |p, ()| rustix::fs::lremovexattr(p, name),
        )
    }
}

/// Writes the root directory's metadata file (a fresh context of `policy`)
/// into an existing, empty backing directory.
///
/// # Errors
/// [`Error::AlreadyInitialized`] if it already has one, backing errors.
pub fn create_root(backing_dir: &Path, policy: &fscrypt::PolicyV2) -> Result<()> {
    let mut nonce = [0u8; 16];
    crate::crypt::random(&mut nonce)?;
    let h = Header {
        kind: HeaderKind::Directory,
        context: crate::crypt::context_bytes(policy, nonce),
        size: 0,
    };
    let path = backing_dir.join(DIR_META_NAME);
    let f = match std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode_0600()
        .open(&path)
    {
        Ok(f) => f,
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {
            return Err(Error::AlreadyInitialized(backing_dir.to_path_buf()));
        }
        Err(e) => return Err(e.into()),
    };
    f.write_all_at(&h.to_bytes(), 0)?;
    f.sync_all()?;
    Ok(())
}

trait Mode0600 {
    fn mode_0600(&mut self) -> &mut Self;
}
impl Mode0600 for std::fs::OpenOptions {
    fn mode_0600(&mut self) -> &mut Self {
        use std::os::unix::fs::OpenOptionsExt;
        self.mode(0o600)
    }
}
