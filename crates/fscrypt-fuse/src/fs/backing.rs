//! Backing objects: opening them safely, proving that an object is the one
//! an inode was looked up as, reading its header or symlink, building its
//! attributes, owner and mode of new entries.
//!
//! The backing directory is untrusted input. Every open of a backing entry
//! goes through [`open_entry`] (the `safe-open` crate): one path component,
//! `openat2` with `RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS |
//! RESOLVE_NO_MAGICLINKS | RESOLVE_NO_XDEV` and `O_NOFOLLOW`, so no symlink (final component
//! included), `..` or mount point is ever followed. Attribute changes act on
//! the opened object: `f*` calls on real fds, `*at(fd, "", AT_EMPTY_PATH)`
//! on `O_PATH` fds, or `/proc/self/fd/N` of an `O_PATH` fd of a verified
//! non-symlink (a symlink's mode is never changed: EOPNOTSUPP, like lchmod).
//! See `inodes.rs` for how identity is checked.

use std::fs::File;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};
use std::sync::Arc;
use std::time::UNIX_EPOCH;

use fscrypt::ContextV2;
use fscrypt::hooks::get_symlink;
use fuser::FileAttr;
use rustix::fs::{AtFlags, Mode, OFlags, Stat};
use rustix::io::Errno;

use crate::crypt::{NodeCrypt, NodeKind};
use crate::error::{Corruption, Error, Result};
use crate::inodes::{Ident, Inode, Kind, Link};
use crate::layout::{self, BackingName, Format, HEADER_SIZE, HEADER_USED, Header, HeaderKind};

use super::tags::TaggedFile;
use super::{Caller, EncryptedFs, Loc, fuse_type, kind_of, pread_full, sys, to_system_time};

fn stale() -> Error {
    Error::Stale
}

/// Opens the backing entry `name` (one component) in `dir` without following
/// any symlink or crossing any mount point: [`safe_open::open_entry`] with
/// [`safe_open::Mounts::Stay`]; `O_CLOEXEC | O_NOFOLLOW` are always added.
/// With `O_PATH` a final symlink gives an fd of the link.
///
/// # Errors
/// [`Error::InvalidName`] for a name that is not one component,
/// [`Error::MountPoint`] (EXDEV) for a mount point, [`Error::Stale`] when
/// renames in the backing store keep racing the lookup,
/// `ELOOP` for a symlink (without `O_PATH`), the usual open errors.
pub(crate) fn open_entry(
    dir: BorrowedFd<'_>,
    name: &str,
    flags: OFlags,
    mode: Mode,
) -> Result<OwnedFd> {
    safe_open::open_entry(dir, name.as_bytes(), flags, mode, safe_open::Mounts::Stay).map_err(|e| {
        match e {
            safe_open::Error::InvalidName => Error::InvalidName,
            safe_open::Error::MountPoint => Error::MountPoint,
            safe_open::Error::Raced => stale(),
            safe_open::Error::Sys(e) => sys(e),
        }
    })
}

/// `/proc/self/fd/N` of an fd (to reopen or act on an `O_PATH` fd).
pub(crate) fn proc_path(fd: BorrowedFd<'_>) -> String {
    format!("/proc/self/fd/{}", fd.as_raw_fd())
}

/// Reopens the object of an `O_PATH` fd of a regular file with `flags`.
pub(super) fn reopen(path: &OwnedFd, flags: OFlags) -> Result<File> {
    let fd = rustix::fs::open(
        proc_path(path.as_fd()).as_str(),
        flags | OFlags::CLOEXEC | OFlags::NOCTTY,
        Mode::empty(),
    )
    .map_err(sys)?;
    Ok(File::from(fd))
}

/// Reads the first [`HEADER_USED`] bytes of the metadata file of the backing
/// directory `fd` (short when the file is).
fn read_dir_meta(fd: BorrowedFd<'_>) -> Result<Vec<u8>> {
    let meta = open_entry(fd, layout::DIR_META_NAME, OFlags::RDONLY, Mode::empty()).map_err(
        |e| match e {
            Error::Sys(Errno::NOENT) => Error::Corrupt(Corruption::MissingDirMeta),
            e => e,
        },
    )?;
    let f = File::from(meta);
    let mut b = vec![0u8; HEADER_USED];
    let mut n = 0;
    while n < HEADER_USED {
        match std::os::unix::fs::FileExt::read_at(&f, &mut b[n..], n as u64)? {
            0 => break,
            k => n += k,
        }
    }
    b.truncate(n);
    Ok(b)
}

/// The format of the vault whose backing root is `fd`: the version byte of
/// its `fscrypt.dir` (`docs/vault-format.md` §4a).
///
/// # Errors
/// [`Error::Corrupt`] when the metadata file is missing or damaged.
pub(crate) fn dir_format(fd: BorrowedFd<'_>) -> Result<Format> {
    Ok(Header::parse_format(
        &read_dir_meta(fd)?,
        HeaderKind::Directory,
    )?)
}

/// A backing object proven to be a given inode's (or just looked up).
pub(crate) struct Found {
    /// An `O_PATH` fd of the object.
    pub path: OwnedFd,
    /// Its `fstat`.
    pub st: Stat,
    /// Regular files: the object opened for reading (or read-write).
    pub file: Option<File>,
    /// Symlinks: the stored target.
    pub target: Option<Vec<u8>>,
}

/// What a lookup learned about a backing object.
struct Probe {
    ident: Ident,
    size: u64,
    dir_fd: Option<OwnedFd>,
}

impl EncryptedFs {
    /// Reads and checks a regular file's header through `f`. Its `size` is
    /// the plaintext size: the header's field in format 1, decoded from the
    /// backing length in format 2.
    pub(super) fn read_file_header(&self, f: &File) -> Result<Header> {
        let mut b = [0u8; HEADER_USED];
        pread_full(f, &mut b, 0)?;
        let len = rustix::fs::fstat(f).map_err(sys)?.st_size as u64;
        if len < HEADER_USED as u64 {
            return Err(Error::Corrupt(Corruption::ShortHeader));
        }
        let mut h = Header::parse_as(&b, HeaderKind::File, self.format)?;
        self.keys.check_context(&h.context)?;
        h.size = self.sizes().size_from(h.size, len, self.du)?;
        Ok(h)
    }

    /// Formats 2 and 3: the plaintext size of a regular file whose backing
    /// length is `len` (format 3: the size it hints).
    pub(super) fn size_of_len(&self, len: u64) -> Result<u64> {
        self.sizes().size_from(0, len, self.du)
    }

    /// Reads and checks a directory's metadata context through its fd.
    pub(super) fn read_dir_context(&self, fd: BorrowedFd<'_>) -> Result<ContextV2> {
        let h = Header::parse_as(&read_dir_meta(fd)?, HeaderKind::Directory, self.format)?;
        self.keys.check_context(&h.context)?;
        Ok(h.context)
    }

    /// Decodes a stored symlink target into context and blob; format 3:
    /// checking its tag when `check_tag` (readlink), not when only the
    /// context is needed (a lookup, finding the object).
    fn decode_target(&self, target: &[u8], check_tag: bool) -> Result<(ContextV2, Vec<u8>)> {
        self.decode_backing_symlink(target, check_tag)
            .and_then(|(ctx, blob)| {
                self.keys.check_context(&ctx)?;
                Ok((ctx, blob))
            })
    }

    /// Corruption becomes `None` (logged), other errors pass.
    fn ctx_or_none(
        &self,
        parent: &Inode,
        bname: &BackingName,
        r: Result<(ContextV2, u64)>,
    ) -> Result<(Option<ContextV2>, u64)> {
        match self.note(parent, Some(&bname.name), r) {
            Ok((c, s)) => Ok((Some(c), s)),
            Err(e) if e.is_corruption() => Ok((None, 0)),
            Err(e) => Err(e),
        }
    }

    /// Learns everything identifying about a just-opened entry.
    fn probe(
        &self,
        parent: &Inode,
        bname: &BackingName,
        path: &OwnedFd,
        st: &Stat,
    ) -> Result<Probe> {
        let kind = kind_of(st.st_mode);
        let mut dir_fd = None;
        let (context, size) = match kind {
            // Format 2: nothing is read at lookup (the size is the length,
            // the context is read when the file is opened).
            Kind::File if !self.sizes().header_at_lookup() => (None, 0),
            Kind::File => {
                let f = reopen(path, OFlags::RDONLY)?;
                let r = self.read_file_header(&f).map(|h| (h.context, h.size));
                self.ctx_or_none(parent, bname, r)?
            }
            Kind::Dir => {
                let d = rustix::fs::openat(
                    path,
                    ".",
                    OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC,
                    Mode::empty(),
                )
                .map_err(sys)?;
                let r = self.read_dir_context(d.as_fd()).map(|c| (c, 0));
                dir_fd = Some(d);
                self.ctx_or_none(parent, bname, r)?
            }
            Kind::Symlink => {
                let t = rustix::fs::readlinkat(path, "", Vec::new()).map_err(sys)?;
                let r = self.decode_target(t.as_bytes(), false).map(|(c, _)| (c, 0));
                self.ctx_or_none(parent, bname, r)?
            }
            Kind::Special => (None, 0),
        };
        Ok(Probe {
            ident: Ident {
                dev: st.st_dev,
                ino: st.st_ino,
                kind,
                context,
            },
            size,
            dir_fd,
        })
    }

    /// Finds `inode`'s backing object through its links, proving identity:
    /// same device, inode number and type, and for files and symlinks the
    /// same context as looked up. `write`: for regular files, open the
    /// object read-write (`Some(true)`) or read-only (otherwise).
    ///
    /// # Errors
    /// `ESTALE` if no link leads to the object any more; open errors.
    pub(super) fn find(&self, inode: &Inode, write: Option<bool>) -> Result<Found> {
        if let Some(f) = self.find_by_links(inode, write)? {
            return Ok(f);
        }
        // A rename through the mount moves our links right after the backing
        // rename: once none is half done, the links are in step with the
        // backing store and are tried again (a bounded wait, not a guess).
        {
            let _settled = self.renames.read()?;
            if let Some(f) = self.find_by_links(inode, write)? {
                return Ok(f);
            }
        }
        let orphan = inode.orphan.lock()?.as_ref().map(|fd| fd.try_clone());
        if let Some(fd) = orphan {
            let fd = fd.map_err(Error::Io)?;
            if let Some(f) = self.check_found(inode, fd, write)? {
                return Ok(f);
            }
        }
        Err(stale())
    }

    /// One pass over `inode`'s links: the first that leads to its object.
    fn find_by_links(&self, inode: &Inode, write: Option<bool>) -> Result<Option<Found>> {
        let mut i = 0;
        while let Some(l) = inode.link_at(i) {
            i += 1;
            match self.try_link(inode, &l, write) {
                Ok(Some(f)) => return Ok(Some(f)),
                Ok(None) | Err(Error::Sys(Errno::NOENT)) => {}
                Err(e) => return Err(e),
            }
        }
        Ok(None)
    }

    /// Before the last known name of a file goes (unlink, rename over):
    /// an `O_PATH` fd of the object if `inode` is it, to keep it reachable.
    pub(super) fn keep_reachable(&self, inode: &Inode, parent: &Inode, name: &BackingName) {
        if inode.kind != Kind::File || inode.link_count() != 1 || !inode.has_link(parent.ino, name)
        {
            return;
        }
        let Some(l) = inode.first_link() else {
            return;
        };
        if let Ok(Some(f)) = self.try_link(inode, &l, None)
            && let Ok(mut o) = inode.orphan.lock()
        {
            *o = Some(f.path);
        }
    }

    fn try_link(&self, inode: &Inode, l: &Link, write: Option<bool>) -> Result<Option<Found>> {
        let path = open_entry(
            self.dir_fd(&l.parent)?,
            l.name.name.as_str(),
            OFlags::PATH,
            Mode::empty(),
        )?;
        self.check_found(inode, path, write)
    }

    /// Whether the object of the `O_PATH` fd `path` is `inode`'s (see `find`).
    fn check_found(
        &self,
        inode: &Inode,
        path: OwnedFd,
        write: Option<bool>,
    ) -> Result<Option<Found>> {
        let st = rustix::fs::fstat(&path).map_err(sys)?;
        let id = &inode.ident;
        if st.st_dev != id.dev || st.st_ino != id.ino || kind_of(st.st_mode) != id.kind {
            return Ok(None);
        }
        let mut found = Found {
            path,
            st,
            file: None,
            target: None,
        };
        match id.kind {
            // Format 2 identity is (device, inode number, type); the header
            // is read from the opened object itself, only when contents are
            // needed.
            Kind::File if !self.sizes().header_at_lookup() && write.is_none() => {}
            Kind::File => {
                if write == Some(true) && self.check_vault_object(inode, &found.st).is_err() {
                    // EACCES, not EPERM: an open that did not ask to write
                    // falls back to reading, as for a read-only object.
                    return Err(Error::Sys(Errno::ACCESS));
                }
                let flags = if write == Some(true) {
                    OFlags::RDWR
                } else {
                    OFlags::RDONLY
                };
                let f = reopen(&found.path, flags)?;
                if let Some(ctx) = id.context {
                    match self.read_file_header(&f) {
                        Ok(h) if h.context == ctx => {}
                        _ => return Ok(None),
                    }
                }
                found.file = Some(f);
            }
            Kind::Symlink => {
                let t = rustix::fs::readlinkat(&found.path, "", Vec::new()).map_err(sys)?;
                if let Some(ctx) = id.context {
                    match self.decode_target(t.as_bytes(), false) {
                        Ok((c, _)) if c == ctx => {}
                        _ => return Ok(None),
                    }
                }
                found.target = Some(t.into_bytes());
            }
            Kind::Dir | Kind::Special => {}
        }
        Ok(Some(found))
    }

    /// Refuses (`EPERM`, one log line without names) changing an object
    /// that is not the vault's: a non-directory that has more links than
    /// the vault knows of (`inode`'s links seen through the mount that still
    /// name it, see [`Self::live_links`]) and whose owner is not the vault's
    /// owner (the uid owning the backing root). A
    /// foreign file hard-linked into the backing store (e.g. a root-owned
    /// file linked there by someone who can write the backing directory)
    /// is such an object: its other link lies outside the vault. Vault
    /// files of other owners (created or chown'ed through a mount run by
    /// root) pass while every link of theirs has been looked up, and files
    /// of the vault owner always pass: the daemon changes nothing the owner
    /// could not (`docs/vault-format.md` §10).
    ///
    /// # Errors
    /// [`Error::NotPermitted`] for an object that is not the vault's.
    pub(super) fn check_vault_object(&self, inode: &Inode, st: &Stat) -> Result<()> {
        #[allow(clippy::unnecessary_cast)] // `st_nlink` is u32 on some targets
        let links = st.st_nlink as u64;
        if kind_of(st.st_mode) == Kind::Dir || links <= 1 || st.st_uid == self.vault_uid {
            return Ok(());
        }
        let mut known = 0;
        // A rename through the mount moves our links right after the backing
        // rename (as in `find`): a short count is taken again.
        for round in 0..3 {
            known = self.live_links(inode, st);
            if links <= known || round == 2 {
                break;
            }
            std::thread::yield_now();
        }
        if links <= known {
            return Ok(());
        }
        log::error!(
            "fscrypt-fuse: backing object (device {}, inode {}) has {links} links, {known} of them known to the vault, and belongs to uid {}, not to the vault owner {}: refusing to change it (remove the foreign link from the backing directory)",
            st.st_dev,
            st.st_ino,
            st.st_uid,
            self.vault_uid
        );
        Err(Error::NotPermitted)
    }

    /// How many of `inode`'s known links name the object `st` right now
    /// (an `fstatat` without following of each, same device and inode
    /// number). A known link that names nothing or another object (renamed
    /// or removed in the backing store behind the mount) does not count: it
    /// must not vouch for a link the vault never saw. It is not dropped
    /// either: a rename through the mount finds the inodes to move by their
    /// old link right after the backing rename, and must still find it.
    /// Each backing entry counts once, by its directory's device and inode
    /// number and its name: two inodes of one backing directory (its stored
    /// context changed between lookups) do not make one link two.
    fn live_links(&self, inode: &Inode, st: &Stat) -> u64 {
        let mut seen = std::collections::HashSet::new();
        let mut i = 0;
        while let Some(l) = inode.link_at(i) {
            i += 1;
            if let Some(pfd) = self.link_names(&l, st)
                && let Ok(d) = rustix::fs::fstat(pfd)
            {
                seen.insert((d.st_dev, d.st_ino, l.name.name));
            }
        }
        seen.len() as u64
    }

    /// Whether the known link `l` names the object `st` right now (an
    /// `fstatat` without following, same device and inode number): then
    /// its parent directory's fd. A link renamed or removed in the backing
    /// store behind the mount (by an attacker, or by another mount of a
    /// shared vault) gives `None`.
    pub(super) fn link_names<'a>(&self, l: &'a Link, st: &Stat) -> Option<BorrowedFd<'a>> {
        let pfd = self.dir_fd(&l.parent).ok()?;
        let s = rustix::fs::statat(pfd, l.name.name.as_str(), AtFlags::SYMLINK_NOFOLLOW).ok()?;
        (s.st_dev == st.st_dev && s.st_ino == st.st_ino).then_some(pfd)
    }

    /// The `fstat` of the object at `loc`, after [`Self::check_vault_object`]:
    /// for every operation that changes an object's metadata.
    pub(super) fn stat_changeable(&self, inode: &Inode, loc: &Loc) -> Result<Stat> {
        let st = self.stat_loc(loc)?;
        self.check_vault_object(inode, &st)?;
        Ok(st)
    }

    pub(super) fn loc(&self, inode: &Arc<Inode>) -> Result<Loc> {
        if inode.kind == Kind::Dir {
            return Ok(Loc::DirFd(inode.clone()));
        }
        if inode.kind == Kind::File
            && let Ok(st) = inode.file.read()
            && let Some(fd) = &st.fd
        {
            return Ok(Loc::Fd(fd.clone()));
        }
        Ok(Loc::Path(self.find(inode, None)?))
    }

    pub(super) fn stat_loc(&self, loc: &Loc) -> Result<Stat> {
        match loc {
            Loc::Fd(f) => rustix::fs::fstat(f).map_err(sys),
            Loc::DirFd(d) => rustix::fs::fstat(self.dir_fd(d)?).map_err(sys),
            Loc::Path(f) => rustix::fs::fstat(&f.path).map_err(sys),
        }
    }

    /// The real fd behind a location, if it has one (files and directories).
    pub(super) fn loc_fd<'a>(&self, loc: &'a Loc) -> Result<Option<BorrowedFd<'a>>> {
        Ok(match loc {
            Loc::Fd(f) => Some(f.as_fd()),
            Loc::DirFd(d) => Some(self.dir_fd(d)?),
            Loc::Path(f) => f.file.as_ref().map(|f| f.as_fd()),
        })
    }

    /// Whether the daemon may access the object at `loc` with `mask`
    /// (access(2)'s mode; 0: it exists), asked of the backing filesystem
    /// through the descriptor's `/proc/self/fd` link (the object itself,
    /// whatever its name now is): the daemon's rights, which are the
    /// caller's where this is asked ([`super::FsOptions::check_access`]).
    ///
    /// # Errors
    /// `EACCES`, `EROFS`, backing errors.
    pub(super) fn access_loc(&self, loc: &Loc, mask: u32) -> Result<()> {
        let fd = match loc {
            Loc::Fd(f) => f.as_fd(),
            Loc::DirFd(d) => self.dir_fd(d)?,
            Loc::Path(f) => f.path.as_fd(),
        };
        let access = rustix::fs::Access::from_bits_truncate(mask & 0o7);
        rustix::fs::accessat(
            rustix::fs::CWD,
            proc_path(fd).as_str(),
            access,
            AtFlags::empty(),
        )
        .map_err(sys)
    }

    /// [`Self::access_loc`] of `inode` where the daemon checks
    /// ([`super::FsOptions::check_access`]); nothing otherwise (the kernel
    /// checked, `default_permissions`).
    ///
    /// # Errors
    /// As [`Self::access_loc`].
    pub(super) fn check_access(&self, inode: &Arc<Inode>, mask: u32) -> Result<()> {
        if !self.opts.check_access {
            return Ok(());
        }
        self.access_loc(&self.loc(inode)?, mask)
    }

    /// Changes owner and/or group of the object at `loc` (never a symlink's target).
    pub(super) fn chown_loc(
        &self,
        loc: &Loc,
        uid: Option<rustix::fs::Uid>,
        gid: Option<rustix::fs::Gid>,
    ) -> Result<()> {
        match (self.loc_fd(loc)?, loc) {
            (Some(fd), _) => rustix::fs::fchown(fd, uid, gid).map_err(sys),
            (None, Loc::Path(f)) => {
                rustix::fs::chownat(&f.path, "", uid, gid, AtFlags::EMPTY_PATH).map_err(sys)
            }
            (None, _) => Err(stale()),
        }
    }

    /// Changes the mode of the object at `loc`; EOPNOTSUPP for symlinks.
    pub(super) fn chmod_loc(&self, loc: &Loc, mode: u32) -> Result<()> {
        let m = Mode::from_raw_mode(mode & 0o7777);
        match (self.loc_fd(loc)?, loc) {
            (Some(fd), _) => rustix::fs::fchmod(fd, m).map_err(sys),
            (None, Loc::Path(f)) => chmod_path_fd(&f.path, &f.st, m),
            (None, _) => Err(stale()),
        }
    }

    /// Sets the times of the object at `loc` (never a symlink's target).
    pub(super) fn utimens_loc(&self, loc: &Loc, ts: &rustix::fs::Timestamps) -> Result<()> {
        match (self.loc_fd(loc)?, loc) {
            (Some(fd), _) => rustix::fs::futimens(fd, ts).map_err(sys),
            (None, Loc::Path(f)) => {
                rustix::fs::utimensat(&f.path, "", ts, AtFlags::EMPTY_PATH).map_err(sys)
            }
            (None, _) => Err(stale()),
        }
    }

    /// Builds a file's contents key (not cached: it lives in the open
    /// file's state only while handles are open).
    pub(super) fn file_crypt(&self, inode: &Inode) -> Result<NodeCrypt> {
        self.need_key()?;
        let ctx = self.file_context(inode)?;
        self.note(
            inode,
            None,
            self.keys
                .node_crypt(&ctx, NodeKind::File, inode.backing_ino),
        )
    }

    /// Format 2: a file's contents key and plaintext size, from the header
    /// and length of `f`, the object just opened (and proven to be
    /// `inode`'s), so a key is never used on another object's data.
    pub(super) fn file_crypt_of(&self, inode: &Inode, f: &File) -> Result<(NodeCrypt, u64)> {
        self.need_key()?;
        let h = self.note(inode, None, self.read_file_header(f))?;
        let c = self
            .keys
            .node_crypt(&h.context, NodeKind::File, inode.backing_ino);
        Ok((self.note(inode, None, c)?, h.size))
    }

    /// A file's context, or its corruption error (re-read for the reason).
    pub(super) fn file_context(&self, inode: &Inode) -> Result<ContextV2> {
        if let Some(c) = inode.context() {
            return Ok(c);
        }
        let f = self.find(inode, None)?;
        let r = match &f.file {
            Some(file) => self.read_file_header(file).map(|_| ()),
            None => Err(Error::Corrupt(Corruption::ShortHeader)),
        };
        self.note(inode, None, r)?;
        // Readable now but not when looked up: let the kernel look it up again.
        Err(stale())
    }

    pub(super) fn symlink_parts(&self, inode: &Arc<Inode>) -> Result<(ContextV2, Vec<u8>)> {
        let f = self.find(inode, None)?;
        let t = f.target.unwrap_or_default();
        let r = self.decode_target(&t, true);
        self.note(inode, None, r)
    }

    /// The target as presented ([`get_symlink`], spec §7.4): plaintext with
    /// the key, without it the no-key name of the ciphertext (hashes 0).
    pub(super) fn symlink_target(&self, inode: &Arc<Inode>) -> Result<Vec<u8>> {
        let (ctx, blob) = self.symlink_parts(inode)?;
        // The key is built per readlink and dropped: symlinks are small and
        // rarely read, and a cached key would cost kilobytes per inode.
        let crypt = if self.keys.unlocked() {
            let r = self
                .keys
                .node_crypt(&ctx, NodeKind::Symlink, inode.backing_ino);
            Some(self.note(inode, None, r)?)
        } else {
            None
        };
        let r = get_symlink(crypt.as_deref(), &blob).map_err(Error::from);
        self.note(inode, None, r)
    }

    pub(super) fn attr_from(&self, inode: &Arc<Inode>, st: &Stat) -> Result<FileAttr> {
        let mode = st.st_mode;
        let size = match inode.kind {
            // A damaged header or symlink still stats (size 0), so that the
            // object can be listed, renamed and deleted; reading it gives EIO.
            Kind::File => self.sizes().attr_size(self, inode, st)?,
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
    /// lookup of it. The entry is opened once (`O_PATH`, nothing followed);
    /// its identity, header or target all come through that one fd.
    pub(super) fn lookup_backing(
        &self,
        parent: &Arc<Inode>,
        bname: &BackingName,
    ) -> Result<(Arc<Inode>, Stat)> {
        let pfd = self.dir_fd(parent)?;
        if !self.sizes().header_at_lookup()
            && let Some(st) = self.stat_plain_file(parent, pfd, bname)?
        {
            let ident = Ident {
                dev: st.st_dev,
                ino: st.st_ino,
                kind: Kind::File,
                context: None,
            };
            let inode = self.inodes.lookup_or_insert(ident, |no| -> Result<Inode> {
                Ok(Inode::new(no, ident, None, None, 0))
            })?;
            inode.add_link(parent, bname);
            return Ok((inode, st));
        }
        let path = match open_entry(pfd, bname.name.as_str(), OFlags::PATH, Mode::empty()) {
            Err(Error::MountPoint) => {
                let mut p = self.backing_path(parent);
                p.push(&bname.name);
                log::error!(
                    "fscrypt-fuse: backing entry {} is a mount point; not entering it",
                    p.display()
                );
                return Err(Error::MountPoint);
            }
            r => r?,
        };
        let st = rustix::fs::fstat(&path).map_err(sys)?;
        let probe = self.probe(parent, bname, &path, &st)?;
        let Probe {
            ident,
            size,
            dir_fd,
        } = probe;
        let inode = self.inodes.lookup_or_insert(ident, |no| -> Result<Inode> {
            Ok(Inode::new(no, ident, dir_fd, None, size))
        })?;
        inode.add_link(parent, bname);
        Ok((inode, st))
    }

    /// Format 2 lookup of a regular file: one `fstatat` of the entry (no
    /// open, no read: the backing length is the size). `None` for anything
    /// but a regular file on the parent's device (a directory, symlink, node
    /// or mount point takes the `O_PATH` way, which checks and logs them).
    /// A length that encodes no size is logged; the file stats as size 0
    /// and opening it gives EIO.
    fn stat_plain_file(
        &self,
        parent: &Inode,
        pfd: BorrowedFd<'_>,
        bname: &BackingName,
    ) -> Result<Option<Stat>> {
        let st =
            rustix::fs::statat(pfd, bname.name.as_str(), AtFlags::SYMLINK_NOFOLLOW).map_err(sys)?;
        if kind_of(st.st_mode) != Kind::File || st.st_dev != parent.ident.dev {
            return Ok(None);
        }
        let r = self.size_of_len(st.st_size as u64);
        let _ = self.note(parent, Some(&bname.name), r);
        Ok(Some(st))
    }

    /// Registers a regular file just created through `file` (header with
    /// `ctx` written, size 0) as `parent`/`bname`, opened once read-write
    /// (format 3: with its first record's state `tagged`).
    pub(super) fn register_created_file(
        &self,
        parent: &Arc<Inode>,
        bname: &BackingName,
        file: File,
        st: &Stat,
        ctx: ContextV2,
        tagged: Option<TaggedFile>,
    ) -> Result<Arc<Inode>> {
        let ident = Ident {
            dev: st.st_dev,
            ino: st.st_ino,
            kind: Kind::File,
            context: self.sizes().identity_context(ctx),
        };
        let inode = self.inodes.lookup_or_insert(ident, |no| -> Result<Inode> {
            Ok(Inode::new(no, ident, None, None, 0))
        })?;
        inode.add_link(parent, bname);
        let crypt = self.sizes().created_crypt(self, &inode, &ctx)?;
        let mut fs = inode.file.write()?;
        fs.size = 0;
        fs.fd = Some(Arc::new(file));
        fs.fd_writable = true;
        fs.opens += 1;
        fs.crypt = Some(crypt);
        fs.tagged = tagged.map(Box::new);
        drop(fs);
        Ok(inode)
    }

    /// Registers a directory just created (fd `dfd`, `fstat` `st`) as
    /// `parent`/`bname`.
    pub(super) fn register_dir(
        &self,
        parent: &Arc<Inode>,
        bname: &BackingName,
        dfd: OwnedFd,
        st: &Stat,
    ) -> Result<Arc<Inode>> {
        let ctx = self.read_dir_context(dfd.as_fd())?;
        let ident = Ident {
            dev: st.st_dev,
            ino: st.st_ino,
            kind: Kind::Dir,
            context: Some(ctx),
        };
        let inode = self.inodes.lookup_or_insert(ident, |no| -> Result<Inode> {
            Ok(Inode::new(no, ident, Some(dfd), None, 0))
        })?;
        inode.add_link(parent, bname);
        Ok(inode)
    }

    /// Sets the mode of the entry `name` of `dir` just created (never
    /// following a symlink planted under that name).
    pub(super) fn chmod_entry(&self, dir: BorrowedFd<'_>, name: &str, mode: u32) -> Result<()> {
        let path = open_entry(dir, name, OFlags::PATH, Mode::empty())?;
        let st = rustix::fs::fstat(&path).map_err(sys)?;
        chmod_path_fd(&path, &st, Mode::from_raw_mode(mode & 0o7777))
    }

    /// Creates the hard link `newparent`/`bname` of `inode`'s object (found
    /// and verified first, then linked by fd, not by name).
    pub(super) fn link_backing(
        &self,
        inode: &Inode,
        newparent: &Inode,
        bname: &BackingName,
    ) -> Result<()> {
        let f = self.find(inode, None)?;
        let npfd = self.dir_fd(newparent)?;
        match rustix::fs::linkat(&f.path, "", npfd, bname.name.as_str(), AtFlags::EMPTY_PATH) {
            // AT_EMPTY_PATH needs CAP_DAC_READ_SEARCH; unprivileged daemons
            // link through the magic link (never of a symlink: that could
            // resolve further).
            Err(Errno::NOENT) if inode.kind != Kind::Symlink => rustix::fs::linkat(
                rustix::fs::CWD,
                proc_path(f.path.as_fd()).as_str(),
                npfd,
                bname.name.as_str(),
                AtFlags::SYMLINK_FOLLOW,
            )
            .map_err(sys),
            r => r.map_err(sys),
        }
    }

    pub(super) fn set_owner_mode(
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
    pub(super) fn new_gid(&self, parent: &Inode, caller: Caller) -> Result<(u32, bool)> {
        let st = rustix::fs::fstat(self.dir_fd(parent)?).map_err(sys)?;
        if st.st_mode & libc::S_ISGID != 0 {
            Ok((st.st_gid, true))
        } else {
            Ok((caller.gid, false))
        }
    }
}

/// chmod of the object of an `O_PATH` fd (`st` its fstat): through
/// `/proc/self/fd/N`, which resolves to the object itself; refused for
/// symlinks (the magic link of a symlink's fd would reach the link, and
/// Linux has no symlink modes: EOPNOTSUPP as lchmod).
fn chmod_path_fd(path: &OwnedFd, st: &Stat, m: Mode) -> Result<()> {
    if kind_of(st.st_mode) == Kind::Symlink {
        return Err(Error::NotSupported);
    }
    rustix::fs::chmod(proc_path(path.as_fd()).as_str(), m).map_err(sys)
}
