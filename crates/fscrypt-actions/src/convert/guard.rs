//! The last window of a conversion: between the verification and the
//! exchange, `DIR` is still the plaintext tree and anyone may write to it.
//!
//! The verification records every object it compared (a [`Record`]: inode,
//! change and modification times, size, link count, mode and owner of the
//! original, and inode and change time of its copy), and the record is
//! written to the work directory before the exchange. After the exchange
//! the plaintext tree (now in the work directory) is walked again and
//! compared with the record ([`settle`]): a name that is new, or an object
//! whose change time moved (a write, an append, a chmod, a new link all
//! move it), is copied into `DIR` at the same place (under a temporary
//! name first, removed on any error), replacing the copy there only while
//! that copy is still untouched (its inode and change time as recorded;
//! checked again right before and after the exchange that puts the new
//! copy in place). A recorded directory whose own mode or owner changed
//! gives them to its encrypted copy. What cannot be copied in (including
//! what the caller may not give its owner) is reported and kept.
//!
//! Removal ([`remove_recorded`]) then deletes only non-directories whose
//! inode and change time are the recorded ones (a change time moved by our
//! own removal of another hard link of the inode, with the same
//! modification time and size, still counts as recorded) and directories
//! that are empty; everything else stays in the work directory and is
//! named in the error.
//!
//! Since Linux 6.13 ext4 has multigrain timestamps: a change after the
//! change time was read (by our `stat`) always moves it. On older kernels
//! the granularity is a clock tick: a same-size overwrite within the tick
//! of the verification's `stat` of that file is not told apart (its
//! size and modification time are compared too).
//!
//! Objects deleted or renamed away in the window stay in `DIR` (nothing
//! is removed from the encrypted side).

use std::collections::HashMap;
use std::ffi::{OsStr, OsString};
use std::os::fd::AsFd;
use std::os::fd::OwnedFd;
use std::os::unix::ffi::OsStrExt;
use std::path::{Component, Path, PathBuf};
use std::sync::atomic::AtomicBool;

use rustix::fs::{AtFlags, FileType, RenameFlags, Stat};
use rustix::io::Errno;

use super::copy::Copier;
use super::{ConvertError, Result, io, names, open_dir_at};

/// Name of the record file inside the work directory.
pub const RECORD_FILE: &str = "record";
/// First line of the record file.
const RECORD_MAGIC: &str = "fscrypt-rs convert record v1";
/// Rounds of "compare, copy in" before what still changes is kept.
const ROUNDS: usize = 4;

/// What was verified of one object.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Rec {
    ino: u64,
    ctime: (i64, i64),
    mtime: (i64, i64),
    size: i64,
    nlink: u64,
    mode: u32,
    uid: u32,
    gid: u32,
}

impl Rec {
    /// The record of `st`.
    // `Stat`'s field types differ between architectures.
    #[allow(clippy::unnecessary_cast)]
    pub(crate) fn of(st: &Stat) -> Rec {
        Rec {
            ino: st.st_ino,
            ctime: (st.st_ctime as i64, st.st_ctime_nsec as i64),
            mtime: (st.st_mtime as i64, st.st_mtime_nsec as i64),
            size: st.st_size as i64,
            nlink: st.st_nlink as u64,
            mode: st.st_mode as u32,
            uid: st.st_uid,
            gid: st.st_gid,
        }
    }

    /// `st` is this object, unchanged.
    fn same(&self, st: &Stat) -> bool {
        *self == Rec::of(st)
    }

    /// `st` has this object's mode and owner.
    fn same_meta(&self, st: &Stat) -> bool {
        let now = Rec::of(st);
        (now.mode, now.uid, now.gid) == (self.mode, self.uid, self.gid)
    }

    /// `st` is this object, unchanged but for links removed (by us).
    fn ours(&self, st: &Stat) -> bool {
        let now = Rec::of(st);
        self.same(st)
            || (now.ino == self.ino
                && now.nlink < self.nlink
                && (now.mtime, now.size, now.mode, now.uid, now.gid)
                    == (self.mtime, self.size, self.mode, self.uid, self.gid))
    }
}

impl Rec {
    /// `st` is this object as [`Rec::ours`] allows, but for its change
    /// time (a rename moves it): after our own `RENAME_EXCHANGE`.
    fn renamed(&self, st: &Stat) -> bool {
        let now = Rec::of(st);
        now.ino == self.ino
            && now.nlink <= self.nlink
            && (now.mtime, now.size, now.mode, now.uid, now.gid)
                == (self.mtime, self.size, self.mode, self.uid, self.gid)
    }
}

/// The verified objects, by path relative to `DIR` (`""` is `DIR`).
#[derive(Debug, Default)]
pub(crate) struct Record {
    /// The originals.
    pub(crate) src: HashMap<PathBuf, Rec>,
    /// Their copies.
    pub(crate) dst: HashMap<PathBuf, Rec>,
}

impl Record {
    /// The record file's text: one line per object, `S` (original) or `D`
    /// (copy), the fields in decimal and the path in hex.
    pub(crate) fn to_text(&self) -> Vec<u8> {
        use std::fmt::Write;
        let mut s = String::with_capacity(64 * (self.src.len() + self.dst.len()) + 64);
        s.push_str(RECORD_MAGIC);
        s.push('\n');
        for (tag, map) in [('S', &self.src), ('D', &self.dst)] {
            for (p, r) in map {
                let _ = write!(
                    s,
                    "{tag} {} {} {} {} {} {} {} {} {} {} ",
                    r.ino,
                    r.ctime.0,
                    r.ctime.1,
                    r.mtime.0,
                    r.mtime.1,
                    r.size,
                    r.nlink,
                    r.mode,
                    r.uid,
                    r.gid
                );
                s.push('-');
                for b in p.as_os_str().as_bytes() {
                    let _ = write!(s, "{b:02x}");
                }
                s.push('\n');
            }
        }
        s.into_bytes()
    }

    /// Parses [`Record::to_text`]; `None` when it is not one.
    pub(crate) fn parse(text: &[u8]) -> Option<Record> {
        let text = std::str::from_utf8(text).ok()?;
        let mut lines = text.lines();
        if lines.next()? != RECORD_MAGIC {
            return None;
        }
        let mut rec = Record::default();
        for l in lines {
            let f: Vec<&str> = l.split(' ').collect();
            if f.len() != 12 {
                return None;
            }
            let n = |i: usize| f[i].parse::<i64>().ok();
            let hex = f[11].strip_prefix('-')?;
            if hex.len() % 2 != 0 {
                return None;
            }
            let bytes: Option<Vec<u8>> = (0..hex.len() / 2)
                .map(|i| u8::from_str_radix(hex.get(2 * i..2 * i + 2)?, 16).ok())
                .collect();
            let path = PathBuf::from(OsStr::from_bytes(&bytes?));
            if path
                .components()
                .any(|c| !matches!(c, Component::Normal(_)))
            {
                return None;
            }
            let r = Rec {
                ino: f[1].parse().ok()?,
                ctime: (n(2)?, n(3)?),
                mtime: (n(4)?, n(5)?),
                size: n(6)?,
                nlink: f[7].parse().ok()?,
                mode: f[8].parse().ok()?,
                uid: f[9].parse().ok()?,
                gid: f[10].parse().ok()?,
            };
            match f[0] {
                "S" => rec.src.insert(path, r),
                "D" => rec.dst.insert(path, r),
                _ => return None,
            };
        }
        Some(rec)
    }
}

/// Records `name` in `dirfd` and everything below it into `map`, at `rel`.
fn record_tree(
    dirfd: &OwnedFd,
    name: &OsStr,
    rel: &Path,
    shown: &Path,
    map: &mut HashMap<PathBuf, Rec>,
) -> Result<()> {
    let st = rustix::fs::statat(dirfd, name, AtFlags::SYMLINK_NOFOLLOW)
        .map_err(|e| io("stat", shown, e))?;
    map.insert(rel.to_path_buf(), Rec::of(&st));
    if FileType::from_raw_mode(st.st_mode) == FileType::Directory {
        let sub = open_dir_at(dirfd, name, shown)?;
        for n in names(&sub, shown)? {
            record_tree(&sub, &n, &rel.join(&n), &shown.join(&n), map)?;
        }
    }
    Ok(())
}

/// Paths (relative to the root) of objects below `fd` that are new or
/// changed against `rec` (a new directory is one path; of a recorded
/// directory only its mode and owner are compared, its entries are).
fn changes(
    fd: &OwnedFd,
    rel: &Path,
    shown: &Path,
    rec: &Record,
    out: &mut Vec<PathBuf>,
) -> Result<()> {
    if let Ok(st) = rustix::fs::fstat(fd)
        && rec
            .src
            .get(rel)
            .is_some_and(|x| x.ino == st.st_ino && !x.same_meta(&st))
    {
        out.push(rel.to_path_buf());
    }
    for n in names(fd, &shown.join(rel))? {
        let r = rel.join(&n);
        let st = match rustix::fs::statat(fd, &n, AtFlags::SYMLINK_NOFOLLOW) {
            Ok(st) => st,
            Err(Errno::NOENT) => continue,
            Err(e) => return Err(io("stat", shown.join(&r), e)),
        };
        let is_dir = FileType::from_raw_mode(st.st_mode) == FileType::Directory;
        match rec.src.get(&r) {
            Some(x) if x.ino == st.st_ino && is_dir => {
                let sub = open_dir_at(fd, &n, &shown.join(&r))?;
                changes(&sub, &r, shown, rec, out)?;
            }
            Some(x) if x.same(&st) => {}
            _ => out.push(r),
        }
    }
    Ok(())
}

/// Opens the directory `rel` below `root` one component at a time (no
/// symlink followed); `None` when a component is missing or not a
/// directory.
fn open_rel(root: &OwnedFd, rel: &Path, shown: &Path) -> Result<Option<OwnedFd>> {
    let mut fd = rustix::io::dup(root).map_err(|e| io("dup", shown, e))?;
    for c in rel.components() {
        let Component::Normal(n) = c else {
            return Ok(None);
        };
        fd = match safe_open::open_entry(
            fd.as_fd(),
            n.as_bytes(),
            rustix::fs::OFlags::RDONLY | rustix::fs::OFlags::DIRECTORY,
            rustix::fs::Mode::empty(),
            safe_open::Mounts::Cross,
        )
        .map_err(safe_open::Error::errno)
        {
            Ok(f) => f,
            Err(Errno::NOENT | Errno::NOTDIR | Errno::LOOP) => return Ok(None),
            Err(e) => return Err(io("open", shown.join(rel), e)),
        };
    }
    Ok(Some(fd))
}

/// Copies the new or changed objects of the plaintext tree `plain` into
/// the encrypted `DIR` (`dir`, shown as `shown`) until the plaintext
/// matches the record (updated with what was copied), at most
/// [`ROUNDS`] times. Returns the paths that could not be copied in (the
/// place in `DIR` is taken by something changed since the exchange, or
/// they kept changing).
///
/// # Errors
/// I/O errors, [`ConvertError::Interrupted`].
pub(crate) fn settle(
    plain: &OwnedFd,
    dir: &OwnedFd,
    shown: &Path,
    rec: &mut Record,
    cancel: &AtomicBool,
) -> Result<Vec<PathBuf>> {
    let mut noop = |_: &super::Progress| {};
    let dst_root = rustix::io::dup(dir).map_err(|e| io("dup", shown, e))?;
    let mut copier = Copier::pieces(shown, dst_root, cancel, &mut noop);
    for round in 0..ROUNDS {
        let mut found = Vec::new();
        changes(plain, Path::new(""), shown, rec, &mut found)?;
        if found.is_empty() || round + 1 == ROUNDS {
            return Ok(found);
        }
        let mut stuck = Vec::new();
        for rel in found {
            let recorded_dir = rec
                .src
                .get(&rel)
                .is_some_and(|r| FileType::from_raw_mode(r.mode) == FileType::Directory);
            if recorded_dir {
                if !dir_meta_in(plain, dir, &rel, shown, rec)? {
                    stuck.push(rel);
                }
                continue;
            }
            if !copy_in(plain, dir, &rel, shown, rec, &mut copier)? {
                stuck.push(rel);
            }
        }
        if !stuck.is_empty() {
            return Ok(stuck);
        }
    }
    Ok(Vec::new())
}

/// Gives the directory `rel` in `DIR` the mode and owner its plaintext
/// original was given in the window (a `chmod 700` there is not lost),
/// while the encrypted directory's own are still as recorded; `false`
/// when they were changed there too, or the caller may not (a user other
/// than root giving it another owner).
///
/// # Errors
/// I/O errors.
fn dir_meta_in(
    plain: &OwnedFd,
    dir: &OwnedFd,
    rel: &Path,
    shown: &Path,
    rec: &mut Record,
) -> Result<bool> {
    let path = shown.join(rel);
    let (Some(s), Some(d)) = (open_rel(plain, rel, shown)?, open_rel(dir, rel, shown)?) else {
        return Ok(false);
    };
    let sst = rustix::fs::fstat(&s).map_err(|e| io("stat", &path, e))?;
    let dst = rustix::fs::fstat(&d).map_err(|e| io("stat", &path, e))?;
    let (Some(was), Some(copy)) = (rec.src.get(rel), rec.dst.get(rel)) else {
        return Ok(false);
    };
    // Already given (by a run killed before it wrote the record), or
    // still as recorded.
    let given = (dst.st_mode, dst.st_uid, dst.st_gid) == (sst.st_mode, sst.st_uid, sst.st_gid);
    if sst.st_ino != was.ino || dst.st_ino != copy.ino || !(given || copy.same_meta(&dst)) {
        return Ok(false);
    }
    let set = rustix::fs::fchown(
        &d,
        Some(rustix::fs::Uid::from_raw(sst.st_uid)),
        Some(rustix::fs::Gid::from_raw(sst.st_gid)),
    )
    .and_then(|()| rustix::fs::fchmod(&d, rustix::fs::Mode::from_raw_mode(sst.st_mode & 0o7777)));
    match set {
        Ok(()) => {}
        Err(Errno::PERM | Errno::ACCESS) => return Ok(false),
        Err(e) => return Err(io("set mode and owner of", &path, e)),
    }
    let dst = rustix::fs::fstat(&d).map_err(|e| io("stat", &path, e))?;
    rec.src.insert(rel.to_path_buf(), Rec::of(&sst));
    rec.dst.insert(rel.to_path_buf(), Rec::of(&dst));
    log::info!("convert: a directory's mode or owner changed during the exchange was copied in");
    Ok(true)
}

/// Copies `rel` of the plaintext tree into `DIR`; `false` when its place
/// there is taken by something not recorded.
fn copy_in(
    plain: &OwnedFd,
    dir: &OwnedFd,
    rel: &Path,
    shown: &Path,
    rec: &mut Record,
    copier: &mut Copier<'_>,
) -> Result<bool> {
    let (Some(parent), Some(name)) = (rel.parent(), rel.file_name()) else {
        return Ok(false);
    };
    let path = shown.join(rel);
    let (Some(sp), Some(dp)) = (
        open_rel(plain, parent, shown)?,
        open_rel(dir, parent, shown)?,
    ) else {
        return Ok(false);
    };
    // Recorded before the copy: a change during it shows next round.
    let mut fresh = HashMap::new();
    match record_tree(&sp, name, rel, &path, &mut fresh) {
        Ok(()) => {}
        Err(ConvertError::Io { source, .. }) if source.kind() == std::io::ErrorKind::NotFound => {
            return Ok(true);
        }
        Err(e) => return Err(e),
    }
    let src_dir = fresh
        .get(rel)
        .is_some_and(|r| FileType::from_raw_mode(r.mode) == FileType::Directory);
    let existing = match rustix::fs::statat(&dp, name, AtFlags::SYMLINK_NOFOLLOW) {
        Err(Errno::NOENT) => None,
        Ok(st) => {
            let untouched = rec.dst.get(rel).is_some_and(|r| r.ours(&st));
            if !untouched || src_dir || FileType::from_raw_mode(st.st_mode) == FileType::Directory {
                return Ok(false);
            }
            rec.dst.get(rel).copied()
        }
        Err(e) => return Err(io("stat", &path, e)),
    };
    // Always copied under a temporary name (created exclusively: a name
    // already there makes the copy fail, nothing is replaced), so that a
    // failure never leaves part of it under the real name; removed on
    // any error.
    let tmp = OsString::from(format!(".fscrypt-rs-convert-{}.tmp", std::process::id()));
    copier.stage(rel, &parent.join(&tmp));
    let placed = copy_and_place(copier, &sp, &dp, name, &tmp, rel, existing.as_ref(), &path);
    copier.unstage(matches!(placed, Ok(true)));
    if !placed? {
        return Ok(false);
    }

    rec.src.extend(fresh);
    record_tree(&dp, name, rel, &path, &mut rec.dst)?;
    // The directory's times as in the plaintext (where it changed too).
    let parent_shown = shown.join(parent);
    let pst = rustix::fs::fstat(&sp).map_err(|e| io("stat", &parent_shown, e))?;
    rustix::fs::futimens(&dp, &super::copy::times(&pst))
        .map_err(|e| io("set times of", &parent_shown, e))?;
    log::info!("convert: an object changed during the exchange was copied in");
    Ok(true)
}

/// Copies `name` in `sp` to `tmp` in `dp`, then puts it in place of
/// `name` there: with `RENAME_NOREPLACE` when there was nothing, by
/// [`replace`] of the untouched copy `existing` otherwise. `false` (and
/// the temporary copy removed) when the place was taken meanwhile or the
/// object is not ours to copy; the temporary copy is removed on errors.
#[allow(clippy::too_many_arguments)]
fn copy_and_place(
    copier: &mut Copier<'_>,
    sp: &OwnedFd,
    dp: &OwnedFd,
    name: &OsStr,
    tmp: &OsStr,
    rel: &Path,
    existing: Option<&Rec>,
    path: &Path,
) -> Result<bool> {
    let cancel = AtomicBool::new(false);
    let drop_tmp = || super::remove_tree(dp, tmp, path, &cancel, &mut |_| {});
    if let Err(e) = copier.copy_one(sp, dp, name, tmp, rel) {
        let _ = drop_tmp();
        // Not ours to copy (another user's object, as a user other than
        // root: chown or mknod refused): kept and named, not a failure
        // every rerun repeats.
        return match e {
            ConvertError::Io { source, .. }
                if matches!(source.raw_os_error(), Some(libc::EPERM | libc::EACCES)) =>
            {
                Ok(false)
            }
            e => Err(e),
        };
    }
    super::test_pause("FSCRYPT_RS_TEST_PAUSE_BEFORE_REPLACE");
    if existing.is_some() {
        if !replace(dp, tmp, name, existing, path)? {
            return Ok(false);
        }
    } else {
        match rustix::fs::renameat_with(dp, tmp, dp, name, RenameFlags::NOREPLACE) {
            Ok(()) => {}
            // Created in DIR meanwhile: theirs stays.
            Err(Errno::EXIST) => {
                drop_tmp()?;
                return Ok(false);
            }
            Err(e) => {
                let _ = drop_tmp();
                return Err(io("create", path, e));
            }
        }
    }
    Ok(true)
}

/// Puts the copy `tmp` in `dp` in place of `name` only while `name` is
/// still the untouched copy `was` (`DIR` is live: the user may have
/// written it while the copy was made): checked right before the two
/// are exchanged (`RENAME_EXCHANGE`, atomic), and what was swapped out is
/// checked again (all but its change time, which the exchange moved):
/// when it is not `was`, they are exchanged back. Either way the copy is
/// removed and `false` returned (the caller keeps the plaintext and
/// names it). Otherwise the old copy is removed.
///
/// # Errors
/// I/O errors (the temporary copy is removed first).
fn replace(
    dp: &OwnedFd,
    tmp: &OsStr,
    name: &OsStr,
    was: Option<&Rec>,
    path: &Path,
) -> Result<bool> {
    let cancel = AtomicBool::new(false);
    let drop_tmp = |e: ConvertError| {
        let _ = super::remove_tree(dp, tmp, path, &cancel, &mut |_| {});
        e
    };
    // Checked again right before the exchange (the copy took a while)...
    let ours = |st: &Stat| {
        FileType::from_raw_mode(st.st_mode) != FileType::Directory
            && was.is_some_and(|r| r.ours(st))
    };
    match rustix::fs::statat(dp, name, AtFlags::SYMLINK_NOFOLLOW) {
        Ok(st) if ours(&st) => {}
        Ok(_) | Err(Errno::NOENT) => {
            super::remove_tree(dp, tmp, path, &cancel, &mut |_| {})?;
            return Ok(false);
        }
        Err(e) => return Err(drop_tmp(io("stat", path, e))),
    }
    rustix::fs::renameat_with(dp, tmp, dp, name, RenameFlags::EXCHANGE)
        .map_err(|e| drop_tmp(io("replace", path, e)))?;
    // ... and what came out after it (a write in between moves its
    // modification time or size; the exchange itself moved its change
    // time).
    let old = rustix::fs::statat(dp, tmp, AtFlags::SYMLINK_NOFOLLOW);
    let ours = old.as_ref().is_ok_and(|st| {
        FileType::from_raw_mode(st.st_mode) != FileType::Directory
            && was.is_some_and(|r| r.renamed(st))
    });
    if !ours {
        // Changed since it was checked: the user's version goes back.
        rustix::fs::renameat_with(dp, tmp, dp, name, RenameFlags::EXCHANGE)
            .map_err(|e| io("put back", path, e))?;
        super::remove_tree(dp, tmp, path, &cancel, &mut |_| {})?;
        return Ok(false);
    }
    rustix::fs::unlinkat(dp, tmp, AtFlags::empty()).map_err(|e| io("remove", path, e))?;
    Ok(true)
}

/// Removes the recorded plaintext as the module documentation says.
pub(crate) struct Remover<'a> {
    /// What was verified (and copied in).
    pub(crate) rec: &'a Record,
    /// Polled between objects.
    pub(crate) cancel: &'a AtomicBool,
    /// What was kept, relative to the root.
    pub(crate) kept: Vec<PathBuf>,
    /// Called with the size of each removed regular file.
    pub(crate) removed: &'a mut dyn FnMut(u64),
}

impl Remover<'_> {
    /// Removes `name` in `dirfd` (at `rel` in the plaintext tree, shown as
    /// `shown`) and what is below it, keeping what is not recorded.
    ///
    /// # Errors
    /// I/O errors, [`ConvertError::Interrupted`].
    pub(crate) fn remove(
        &mut self,
        dirfd: &OwnedFd,
        name: &OsStr,
        rel: &Path,
        shown: &Path,
    ) -> Result<()> {
        if self.cancel.load(std::sync::atomic::Ordering::SeqCst) {
            return Err(ConvertError::Interrupted);
        }
        let st = match rustix::fs::statat(dirfd, name, AtFlags::SYMLINK_NOFOLLOW) {
            Ok(st) => st,
            Err(Errno::NOENT) => return Ok(()),
            Err(e) => return Err(io("stat", shown, e)),
        };
        let ft = FileType::from_raw_mode(st.st_mode);
        if ft == FileType::Directory {
            let sub = open_dir_at(dirfd, name, shown)?;
            for n in names(&sub, shown)? {
                self.remove(&sub, &n, &rel.join(&n), &shown.join(&n))?;
            }
            return match rustix::fs::unlinkat(dirfd, name, AtFlags::REMOVEDIR) {
                Ok(()) => Ok(()),
                // Something below was kept (and named).
                Err(Errno::NOTEMPTY | Errno::EXIST) => Ok(()),
                Err(e) => Err(io("remove", shown, e)),
            };
        }
        if !self.rec.src.get(rel).is_some_and(|r| r.ours(&st)) {
            self.kept.push(rel.to_path_buf());
            return Ok(());
        }
        rustix::fs::unlinkat(dirfd, name, AtFlags::empty()).map_err(|e| io("remove", shown, e))?;
        if ft == FileType::RegularFile && st.st_nlink <= 1 {
            (self.removed)(st.st_size as u64);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn record_text_round_trips_and_rejects_bad_paths() {
        let st = rustix::fs::stat("/").unwrap();
        let mut rec = Record::default();
        rec.src.insert(PathBuf::from("a/b c\n"), Rec::of(&st));
        rec.src.insert(PathBuf::new(), Rec::of(&st));
        rec.dst.insert(PathBuf::from("x"), Rec::of(&st));
        let back = Record::parse(&rec.to_text()).unwrap();
        assert_eq!(back.src, rec.src);
        assert_eq!(back.dst, rec.dst);
        let mut bad = Record::default();
        bad.src.insert(PathBuf::from("../etc"), Rec::of(&st));
        assert!(Record::parse(&bad.to_text()).is_none());
        assert!(Record::parse(b"something else\n").is_none());
    }
}
