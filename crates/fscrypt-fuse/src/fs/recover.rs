//! Crash safety (`docs/vault-format.md`, "Crash safety"): new backing objects
//! are built out of sight (`O_TMPFILE`, or a `fscrypt.tmp.*` name) and linked
//! or renamed into place complete; long symlink targets live in the symlink
//! store; a recovery pass at mount removes what an interrupted operation left
//! behind; the clean-unmount marker tells whether that pass is needed.
//!
//! With the cargo feature `crash-points` (enabled only by the test
//! dev-dependency of `fscrypt-cli`), [`crash_point`] kills the process at the
//! step named by the environment variable `FSCRYPT_RS_CRASH_AT`; without the
//! feature it compiles to nothing.

use std::collections::HashSet;
use std::fs::File;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};
use std::os::unix::fs::FileExt;
use std::sync::atomic::{AtomicBool, Ordering};

use fscrypt::ContextV2;
use rustix::fs::{AtFlags, CWD, FileType, Mode, OFlags, RenameFlags};
use rustix::io::Errno;

use crate::error::{Corruption, Error, Result};
use crate::inodes::ROOT;
use crate::layout::{
    self, CLEAN_MARKER, CONTEXT_SIZE, DIR_META_NAME, EntryName, Format, LONG_NAME_SUFFIX,
    SYMLINK_MARKER_PREFIX, SYMLINK_STORE_DIR,
};
use fscrypt_vault::integrity::symlinks;
use fscrypt_vault::leftovers;

use super::{EncryptedFs, Sharing, sys};

/// Kills the process (SIGKILL, as `kill -9`) when `FSCRYPT_RS_CRASH_AT`
/// equals `point`. Test builds only (feature `crash-points`).
#[cfg(feature = "crash-points")]
pub(crate) fn crash_point(point: &str) {
    static AT: std::sync::OnceLock<Option<String>> = std::sync::OnceLock::new();
    let at = AT.get_or_init(|| std::env::var("FSCRYPT_RS_CRASH_AT").ok());
    if at.as_deref() == Some(point) {
        let _ =
            rustix::process::kill_process(rustix::process::getpid(), rustix::process::Signal::KILL);
        std::process::abort();
    }
}

/// Does nothing: crash points exist only with the `crash-points` feature.
#[cfg(not(feature = "crash-points"))]
#[inline(always)]
pub(crate) fn crash_point(_point: &str) {}

/// A fresh temporary name `fscrypt.tmp.<16 random base64url characters>`.
pub(super) fn tmp_name() -> Result<String> {
    Ok(leftovers::tmp_name()?)
}

/// Set once `O_TMPFILE` turned out unsupported by the backing filesystem.
static NO_TMPFILE: AtomicBool = AtomicBool::new(false);

/// A new regular file not yet visible under its final name: an `O_TMPFILE`
/// inode without a name, or (where the backing filesystem lacks `O_TMPFILE`)
/// a file under a temporary name.
pub(super) struct Unlinked {
    /// The open file (read-write).
    pub file: File,
    tmp: Option<String>,
}

impl Unlinked {
    /// Creates it in `dir` with permission bits `mode`.
    pub(super) fn new(dir: BorrowedFd<'_>, mode: u32) -> Result<Unlinked> {
        if !NO_TMPFILE.load(Ordering::Relaxed) {
            match rustix::fs::openat(
                dir,
                ".",
                OFlags::RDWR | OFlags::TMPFILE | OFlags::CLOEXEC,
                Mode::from_raw_mode(mode),
            ) {
                Ok(fd) => {
                    return Ok(Unlinked {
                        file: File::from(fd),
                        tmp: None,
                    });
                }
                Err(Errno::OPNOTSUPP | Errno::ISDIR | Errno::INVAL) => {
                    NO_TMPFILE.store(true, Ordering::Relaxed);
                }
                Err(e) => return Err(sys(e)),
            }
        }
        let name = tmp_name()?;
        let fd = rustix::fs::openat(
            dir,
            name.as_str(),
            OFlags::RDWR | OFlags::CREATE | OFlags::EXCL | OFlags::CLOEXEC | OFlags::NOFOLLOW,
            Mode::from_raw_mode(mode),
        )
        .map_err(sys)?;
        Ok(Unlinked {
            file: File::from(fd),
            tmp: Some(name),
        })
    }

    /// Gives the file its final `name` in `dir` (the directory it was created
    /// in). Fails with `EEXIST`, changing nothing, when the name is taken.
    pub(super) fn link_as(&self, dir: BorrowedFd<'_>, name: &str) -> Result<()> {
        match &self.tmp {
            Some(t) => {
                rustix::fs::renameat_with(dir, t.as_str(), dir, name, RenameFlags::NOREPLACE)
                    .map_err(sys)
            }
            None => match rustix::fs::linkat(&self.file, "", dir, name, AtFlags::EMPTY_PATH) {
                // AT_EMPTY_PATH needs CAP_DAC_READ_SEARCH; /proc does not.
                Err(Errno::NOENT | Errno::PERM | Errno::ACCESS) => rustix::fs::linkat(
                    CWD,
                    format!("/proc/self/fd/{}", self.file.as_raw_fd()).as_str(),
                    dir,
                    name,
                    AtFlags::SYMLINK_FOLLOW,
                )
                .map_err(sys),
                r => r.map_err(sys),
            },
        }
    }

    /// Removes the temporary name, if any (after a failure).
    pub(super) fn discard(&self, dir: BorrowedFd<'_>) {
        if let Some(t) = &self.tmp {
            let _ = rustix::fs::unlinkat(dir, t.as_str(), AtFlags::empty());
        }
    }
}

/// A backing symlink whose target lives in the store, held while one of its
/// names is removed (see [`EncryptedFs::hold_stored_symlink`]).
pub(super) struct StoredSymlink {
    fd: OwnedFd,
    id: String,
}

/// What the recovery pass did.
#[derive(Debug, Default)]
struct Recovered {
    dirs: u64,
    tmp: u64,
    side_files: u64,
    empty_files: u64,
    restored_meta: u64,
    store_objects: u64,
    /// Format 3 files whose interrupted write session left units past
    /// their size.
    trimmed_files: u64,
    problems: u64,
}

/// How deep the recovery pass descends (one fd per level).
const MAX_DEPTH: usize = leftovers::MAX_DEPTH;

impl EncryptedFs {
    fn with_root<T>(&self, f: impl FnOnce(BorrowedFd<'_>) -> Result<T>) -> Result<T> {
        let root = self.inode(ROOT)?;
        f(self.dir_fd(&root)?)
    }

    fn store_dir(&self, create: bool) -> Result<Option<OwnedFd>> {
        self.with_root(|rfd| {
            let open = || {
                rustix::fs::openat(
                    rfd,
                    SYMLINK_STORE_DIR,
                    OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
                    Mode::empty(),
                )
            };
            match open() {
                Ok(fd) => Ok(Some(fd)),
                Err(Errno::NOENT) if create => {
                    match rustix::fs::mkdirat(rfd, SYMLINK_STORE_DIR, Mode::from_raw_mode(0o700)) {
                        Ok(()) | Err(Errno::EXIST) => {}
                        Err(e) => return Err(sys(e)),
                    }
                    open().map(Some).map_err(sys)
                }
                Err(Errno::NOENT) => Ok(None),
                Err(e) => Err(sys(e)),
            }
        })
    }

    /// Writes the store object of a symlink target too long for a backing
    /// symlink (complete before it gets its name) and returns the backing
    /// symlink target naming it.
    pub(super) fn store_symlink(&self, ctx: &ContextV2, blob: &[u8]) -> Result<String> {
        let object = match self.format {
            Format::V3 => symlinks::encode_store_object(self.keys.integrity()?, ctx, blob),
            _ => layout::encode_store_object(ctx, blob),
        };
        let dir = self.store_dir(true)?.ok_or(Error::NotFound)?;
        let u = Unlinked::new(dir.as_fd(), 0o600)?;
        let r = (|| {
            u.file.write_all_at(&object, 0)?;
            crash_point("symlink:after-store-write");
            loop {
                let mut rnd = [0u8; 16];
                crate::crypt::random(&mut rnd)?;
                let id = layout::store_id(&rnd);
                match u.link_as(dir.as_fd(), &id) {
                    Ok(()) => return Ok(format!("{SYMLINK_MARKER_PREFIX}{id}")),
                    Err(Error::Sys(Errno::EXIST)) => continue,
                    Err(e) => return Err(e),
                }
            }
        })();
        if r.is_err() {
            u.discard(dir.as_fd());
        }
        r
    }

    /// Removes a store object by its backing symlink target (after a failed
    /// creation, or when its symlink's last link is gone).
    pub(super) fn unstore_symlink(&self, marker: &str) {
        if let Some(id) = layout::symlink_marker_id(marker.as_bytes())
            && let Ok(Some(dir)) = self.store_dir(false)
        {
            let _ = rustix::fs::unlinkat(&dir, id, AtFlags::empty());
        }
    }

    /// The largest `fscrypt_symlink_data` blob stored inline in a backing
    /// symlink: [`layout::SYMLINK_MAX_BLOB`] in formats 1 and 2,
    /// [`symlinks::SYMLINK_MAX_BLOB_V3`] (16 bytes less, for the tag) in
    /// format 3. Longer ones go to the symlink store.
    pub(super) fn symlink_max_inline(&self) -> usize {
        match self.format {
            Format::V3 => symlinks::SYMLINK_MAX_BLOB_V3,
            _ => layout::SYMLINK_MAX_BLOB,
        }
    }

    /// The inline backing target of a symlink: `base64url(context ‖ blob)`
    /// in formats 1 and 2, with the blob's tag after it in format 3
    /// ([`symlinks::encode_symlink`]).
    ///
    /// # Errors
    /// Format 3: [`Error::NoKey`] without the key.
    pub(super) fn encode_inline_symlink(&self, ctx: &ContextV2, blob: &[u8]) -> Result<String> {
        Ok(match self.format {
            Format::V3 => symlinks::encode_symlink(self.keys.integrity()?, ctx, blob),
            _ => layout::encode_symlink(ctx, blob),
        })
    }

    /// Decodes a backing symlink target into (context, blob): inline
    /// (base64url) or a marker naming a store object. Format 3: the tag is
    /// split off, and checked when `check_tag` and the key is present
    /// (readlink checks it; finding the object only needs its context).
    ///
    /// # Errors
    /// [`Corruption::BadSymlink`] when it decodes to nothing valid or its
    /// store object is missing or damaged; [`Corruption::BadSymlinkTag`]
    /// when its tag does not verify.
    pub(super) fn decode_backing_symlink(
        &self,
        target: &[u8],
        check_tag: bool,
    ) -> Result<(ContextV2, Vec<u8>)> {
        let v3 = self.format == Format::V3;
        let keys = match v3 && check_tag && self.keys.unlocked() {
            true => Some(self.keys.integrity()?),
            false => None,
        };
        if !layout::is_symlink_marker(target) {
            return Ok(match v3 {
                true => symlinks::decode_symlink(keys, target)?,
                false => layout::decode_symlink(target)?,
            });
        }
        let bad = || Error::Corrupt(Corruption::BadSymlink);
        let id = layout::symlink_marker_id(target).ok_or_else(bad)?;
        let dir = self.store_dir(false)?.ok_or_else(bad)?;
        let f = rustix::fs::openat(
            &dir,
            id,
            OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
            Mode::empty(),
        )
        .map_err(|_| bad())?;
        let f = File::from(f);
        let mut buf = vec![
            0u8;
            symlinks::STORE_OBJECT_MAX_V3
                .max(12 + CONTEXT_SIZE + layout::SYMLINK_MAX_BLOB_STORED + 8)
                + 1
        ];
        let mut n = 0;
        while n < buf.len() {
            match f.read_at(&mut buf[n..], n as u64)? {
                0 => break,
                k => n += k,
            }
        }
        Ok(match v3 {
            true => symlinks::decode_store_object(keys, &buf[..n])?,
            false => layout::decode_store_object(&buf[..n])?,
        })
    }

    /// Before removing the name `name` in `dir` (unlink, rename over it):
    /// when it is a symlink whose target is in the store, keeps an `O_PATH`
    /// handle of it so that [`EncryptedFs::release_stored_symlink`] can tell
    /// whether its last link went.
    pub(super) fn hold_stored_symlink(
        &self,
        dir: BorrowedFd<'_>,
        name: &str,
        st_mode: u32,
    ) -> Option<StoredSymlink> {
        if st_mode & libc::S_IFMT != libc::S_IFLNK {
            return None;
        }
        let fd = rustix::fs::openat(
            dir,
            name,
            OFlags::PATH | OFlags::NOFOLLOW | OFlags::CLOEXEC,
            Mode::empty(),
        )
        .ok()?;
        let target = rustix::fs::readlinkat(&fd, "", Vec::new()).ok()?;
        let id = layout::symlink_marker_id(target.as_bytes())?.to_owned();
        Some(StoredSymlink { fd, id })
    }

    /// After the name was removed: deletes the store object when the symlink
    /// has no link left. A crash in between leaves an unreferenced object,
    /// which the recovery pass removes.
    pub(super) fn release_stored_symlink(&self, held: Option<StoredSymlink>) {
        let Some(h) = held else { return };
        if let Ok(st) = rustix::fs::fstat(&h.fd)
            && st.st_nlink == 0
        {
            crash_point("unlink:before-unstore");
            self.unstore_symlink(&format!("{SYMLINK_MARKER_PREFIX}{}", h.id));
        }
    }

    /// At a read-write mount: consumes the clean-unmount marker, or (when it
    /// is absent: the previous mount did not end cleanly, or the vault
    /// predates the marker) runs the recovery pass over the whole backing
    /// tree before anything is served.
    ///
    /// # Errors
    /// Backing errors on the root directory.
    pub(super) fn recover_at_mount(&self) -> Result<()> {
        if self.opts.read_only {
            return Ok(());
        }
        self.with_root(|rfd| {
            match rustix::fs::unlinkat(rfd, CLEAN_MARKER, AtFlags::empty()) {
                Ok(()) => {
                    // Durable before anything changes, so that a power loss
                    // during this mount does not skip the next recovery.
                    let _ = rustix::fs::fsync(rfd);
                    return Ok(());
                }
                Err(Errno::NOENT) if self.opts.sharing == Sharing::SharedWithOthers => {
                    log::info!(
                        "fscrypt-fuse: other mounts serve this vault (sharedstorage): the crash recovery pass waits for a mount that is alone"
                    );
                    return Ok(());
                }
                Err(Errno::NOENT) => {}
                Err(e) => {
                    log::warn!(
                        "fscrypt-fuse: cannot remove {CLEAN_MARKER} ({e}); skipping crash recovery"
                    );
                    return Ok(());
                }
            }
            let mut rec = Recovered::default();
            let store = self.store_dir(false)?;
            let scan_symlinks = match &store {
                Some(d) => dir_names(d.as_fd())?.iter().any(|(n, _)| !n.is_empty()),
                None => false,
            };
            let mut referenced = HashSet::new();
            self.recover_dir(rfd, 0, &mut rec, scan_symlinks.then_some(&mut referenced))?;
            if let Some(d) = &store {
                for (n, _) in dir_names(d.as_fd())? {
                    if (leftovers::is_temporary(&n)
                        || (layout::is_store_id(&n) && !referenced.contains(&n)))
                        && rustix::fs::unlinkat(d, n.as_slice(), AtFlags::empty()).is_ok()
                    {
                        rec.store_objects += 1;
                    }
                }
            }
            log::info!("fscrypt-fuse: crash recovery pass: {rec:?}");
            Ok(())
        })
    }

    /// One directory of the recovery pass (see `docs/vault-format.md`).
    fn recover_dir(
        &self,
        dfd: BorrowedFd<'_>,
        depth: usize,
        rec: &mut Recovered,
        mut referenced: Option<&mut HashSet<Vec<u8>>>,
    ) -> Result<()> {
        rec.dirs += 1;
        let entries = dir_names(dfd)?;
        let names: HashSet<&[u8]> = entries.iter().map(|(n, _)| n.as_slice()).collect();
        let mut has_meta = false;
        let mut user = 0u64;
        for (n, t) in &entries {
            let n = n.as_slice();
            let shown = String::from_utf8_lossy(n);
            match layout::classify(n) {
                EntryName::Internal => {
                    if n == DIR_META_NAME.as_bytes() {
                        has_meta = true;
                    } else if leftovers::is_temporary(n) {
                        let r = if *t == FileType::Directory {
                            remove_tree(dfd, n)
                        } else {
                            rustix::fs::unlinkat(dfd, n, AtFlags::empty()).map_err(sys)
                        };
                        match r {
                            Ok(()) => rec.tmp += 1,
                            Err(e) => {
                                rec.problems += 1;
                                log::warn!("fscrypt-fuse: recovery: cannot remove {shown}: {e}");
                            }
                        }
                    } else if let Some(entry) = leftovers::side_file_owner(n)
                        && !leftovers::side_file_in_use(entry, &names)
                        && rustix::fs::unlinkat(dfd, n, AtFlags::empty()).is_ok()
                    {
                        rec.side_files += 1;
                    }
                }
                // A conflict copy is the user's (its object is checked when
                // it is opened, as the original's would be).
                EntryName::Invalid | EntryName::Conflict(_) => user += 1,
                kind @ (EntryName::Short(_) | EntryName::Long) => {
                    let long = kind == EntryName::Long;
                    let mut side = n.to_vec();
                    side.extend_from_slice(LONG_NAME_SUFFIX.as_bytes());
                    if long && !names.contains(side.as_slice()) {
                        rec.problems += 1;
                        log::warn!(
                            "fscrypt-fuse: recovery: long-name entry {shown} has no side file (not listable)"
                        );
                    }
                    let mut t = *t;
                    let mut size = None;
                    if t == FileType::Unknown || t == FileType::RegularFile {
                        match rustix::fs::statat(dfd, n, AtFlags::SYMLINK_NOFOLLOW) {
                            Ok(st) => {
                                t = FileType::from_raw_mode(st.st_mode);
                                size = Some(st.st_size);
                            }
                            Err(_) => continue,
                        }
                    }
                    match t {
                        // A 0-byte backing file never held a header: left by a
                        // create interrupted before this version (or by a power
                        // loss before the header reached the disk). It cannot
                        // be read or repaired; remove it.
                        FileType::RegularFile
                            if size.is_some_and(|l| leftovers::is_headerless(l as u64)) =>
                        {
                            if rustix::fs::unlinkat(dfd, n, AtFlags::empty()).is_ok() {
                                rec.empty_files += 1;
                                if long {
                                    let _ = rustix::fs::unlinkat(
                                        dfd,
                                        side.as_slice(),
                                        AtFlags::empty(),
                                    );
                                }
                                log::warn!(
                                    "fscrypt-fuse: recovery: removed empty backing file {shown} (no header)"
                                );
                                continue;
                            }
                            user += 1;
                        }
                        FileType::RegularFile => {
                            user += 1;
                            match self.recover_tagged_file(dfd, n) {
                                Ok(true) => rec.trimmed_files += 1,
                                Ok(false) => {}
                                Err(e) => {
                                    rec.problems += 1;
                                    log::warn!("fscrypt-fuse: recovery: {shown}: {e}");
                                }
                            }
                        }
                        FileType::Directory => {
                            user += 1;
                            if depth >= MAX_DEPTH {
                                continue;
                            }
                            match rustix::fs::openat(
                                dfd,
                                n,
                                OFlags::RDONLY
                                    | OFlags::DIRECTORY
                                    | OFlags::NOFOLLOW
                                    | OFlags::CLOEXEC,
                                Mode::empty(),
                            ) {
                                Ok(sub) => {
                                    if let Err(e) = self.recover_dir(
                                        sub.as_fd(),
                                        depth + 1,
                                        rec,
                                        referenced.as_deref_mut(),
                                    ) {
                                        rec.problems += 1;
                                        log::warn!("fscrypt-fuse: recovery: {shown}: {e}");
                                    }
                                }
                                Err(e) => {
                                    rec.problems += 1;
                                    log::warn!("fscrypt-fuse: recovery: cannot open {shown}: {e}");
                                }
                            }
                        }
                        FileType::Symlink => {
                            user += 1;
                            if let Some(r) = referenced.as_deref_mut()
                                && let Ok(target) = rustix::fs::readlinkat(dfd, n, Vec::new())
                                && let Some(id) = layout::symlink_marker_id(target.as_bytes())
                            {
                                r.insert(id.as_bytes().to_vec());
                            }
                        }
                        _ => user += 1,
                    }
                }
            }
        }
        if !has_meta && depth > 0 {
            if user == 0 {
                // An rmdir (or a rename over this directory) removed the
                // metadata file and was interrupted before the directory
                // went: give it a fresh context again, back to the state
                // before the operation (an empty directory).
                match self.write_dir_meta(dfd) {
                    Ok(()) => rec.restored_meta += 1,
                    Err(e) => {
                        rec.problems += 1;
                        log::warn!("fscrypt-fuse: recovery: cannot restore {DIR_META_NAME}: {e}");
                    }
                }
            } else {
                rec.problems += 1;
                log::warn!(
                    "fscrypt-fuse: recovery: a directory with entries has no {DIR_META_NAME} (corrupt)"
                );
            }
        }
        Ok(())
    }

    /// Writes a fresh directory metadata file into `dfd` (complete before it
    /// gets its name).
    fn write_dir_meta(&self, dfd: BorrowedFd<'_>) -> Result<()> {
        Ok(leftovers::write_dir_meta(
            dfd,
            &self.keys.new_context()?,
            self.format,
        )?)
    }
}

impl Drop for EncryptedFs {
    /// A clean end of the mount: leaves the clean marker, so that the next
    /// mount skips the recovery pass.
    fn drop(&mut self) {
        if let Some(g) = &self.generations {
            // Best effort: the log replays the same without compaction.
            let _ = g.compact();
        }
        if self.opts.read_only {
            return;
        }
        // On shared storage only the last mount leaves the marker: it can
        // turn the (shared) vault lock exclusive. The others leave none, so
        // that a crash of the last one is followed by the recovery pass.
        if self.opts.sharing != Sharing::Exclusive
            && !self.shared_lock.as_ref().is_some_and(|fd| {
                rustix::fs::flock(fd, rustix::fs::FlockOperation::NonBlockingLockExclusive).is_ok()
            })
        {
            return;
        }
        let _ = self.with_root(|rfd| {
            let f = rustix::fs::openat(
                rfd,
                CLEAN_MARKER,
                OFlags::WRONLY | OFlags::CREATE | OFlags::CLOEXEC | OFlags::NOFOLLOW,
                Mode::from_raw_mode(0o600),
            )
            .map_err(sys)?;
            drop(f);
            rustix::fs::fsync(rfd).map_err(sys)
        });
    }
}

/// The entries of a directory (without `.` and `..`) with their types
/// (`fscrypt_vault::leftovers`, shared with `fscrypt-rs fsck`).
fn dir_names(dfd: BorrowedFd<'_>) -> Result<Vec<(Vec<u8>, FileType)>> {
    Ok(leftovers::dir_entries(dfd)?)
}

/// Removes the directory `name` in `parent` and everything in it, never
/// following a symlink (temporary directories only).
fn remove_tree(parent: BorrowedFd<'_>, name: &[u8]) -> Result<()> {
    Ok(leftovers::remove_tree(parent, name)?)
}
