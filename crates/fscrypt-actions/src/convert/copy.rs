//! Copying one tree with all its metadata: contents (sparse holes kept via
//! `SEEK_DATA`/`SEEK_HOLE`), modes, owners, timestamps (set last;
//! directories after their children), extended attributes (POSIX ACLs are
//! the `system.posix_acl_*` attributes), hard links (an inode map), symlinks
//! (copied, never followed) and special files (`mknod`).
//!
//! Every source object is opened relative to its directory's fd with
//! `O_NOFOLLOW` and checked with `fstat` to be the object that was listed.

use std::collections::HashMap;
use std::ffi::OsStr;
use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};

use rustix::fs::{
    AtFlags, FileType, Gid, Mode, OFlags, SeekFrom, Stat, Timespec, Timestamps, Uid, XattrFlags,
};
use rustix::io::Errno;

use super::{ConvertError, Progress, Result, Scan, Step, io, names, open_dir_at, proc_path};

/// Bytes copied per call (and between progress reports).
const CHUNK: usize = 8 << 20;

/// Copies a tree (see the module documentation).
pub struct Copier<'a> {
    root: PathBuf,
    /// Source (dev, ino) of multiply-linked non-directories -> path of the
    /// first copy, relative to the destination root.
    links: HashMap<(u64, u64), PathBuf>,
    dst_root: Option<OwnedFd>,
    /// While an object is copied under a temporary name: its real path
    /// and the temporary one (relative to the destination root).
    staged: Option<(PathBuf, PathBuf)>,
    cancel: &'a AtomicBool,
    progress: &'a mut dyn FnMut(&Progress),
    done: Progress,
    buf: Vec<u8>,
    xbuf: Vec<u8>,
}

impl<'a> Copier<'a> {
    /// A copier of the tree at `root` (for messages) described by `scan`.
    pub fn new(
        root: &Path,
        scan: &Scan,
        cancel: &'a AtomicBool,
        progress: &'a mut dyn FnMut(&Progress),
    ) -> Copier<'a> {
        Copier {
            root: root.to_path_buf(),
            links: HashMap::new(),
            dst_root: None,
            staged: None,
            cancel,
            progress,
            done: Progress {
                step: Step::Copying,
                bytes: 0,
                total_bytes: scan.bytes,
                objects: 0,
                total_objects: scan.objects,
            },
            buf: Vec::new(),
            xbuf: vec![0u8; 1 << 16],
        }
    }

    /// Copies the contents of directory `src` into the empty directory
    /// `dst`, then `src`'s own metadata onto `dst`.
    ///
    /// # Errors
    /// I/O errors, [`ConvertError::Interrupted`].
    pub fn copy_tree(&mut self, src: &OwnedFd, dst: &OwnedFd) -> Result<()> {
        self.dst_root = Some(rustix::io::dup(dst).map_err(|e| io("dup", &self.root, e))?);
        let st = rustix::fs::fstat(src).map_err(|e| io("stat", &self.root, e))?;
        self.copy_dir(src, dst, Path::new(""))?;
        let root = self.root.clone();
        self.set_meta_fd(src, dst, &st, &root)?;
        self.tick(0, 1);
        Ok(())
    }

    fn tick(&mut self, bytes: u64, objects: u64) {
        self.done.bytes += bytes;
        self.done.objects += objects;
        (self.progress)(&self.done);
    }

    fn check_cancel(&self) -> Result<()> {
        if self.cancel.load(Ordering::SeqCst) {
            return Err(ConvertError::Interrupted);
        }
        Ok(())
    }

    fn copy_dir(&mut self, src: &OwnedFd, dst: &OwnedFd, rel: &Path) -> Result<()> {
        let shown = self.root.join(rel);
        for name in names(src, &shown)? {
            self.copy_one(src, dst, &name, &name, &rel.join(&name))?;
        }
        Ok(())
    }

    /// A copier of single objects into the tree `dst_root` (for
    /// [`super::guard`]: objects changed during the exchange); `root` is
    /// the source tree's path, for messages. No progress reports.
    pub(crate) fn pieces(
        root: &Path,
        dst_root: OwnedFd,
        cancel: &'a AtomicBool,
        progress: &'a mut dyn FnMut(&Progress),
    ) -> Copier<'a> {
        let mut c = Copier::new(root, &Scan::default(), cancel, progress);
        c.dst_root = Some(dst_root);
        c
    }

    /// The next [`Copier::copy_one`] of `real` writes it under `tmp` (both
    /// relative to the destination root): hard links to what it copies
    /// are made under `tmp` until [`Copier::unstage`].
    pub(crate) fn stage(&mut self, real: &Path, tmp: &Path) {
        self.staged = Some((real.to_path_buf(), tmp.to_path_buf()));
    }

    /// Ends [`Copier::stage`]: `moved` when the copy is now at its real
    /// path; otherwise it is gone and links are not made to it.
    pub(crate) fn unstage(&mut self, moved: bool) {
        if let Some((real, _)) = self.staged.take()
            && !moved
        {
            self.links.retain(|_, p| !p.starts_with(&real));
        }
    }

    /// Copies `name` in `src` (and everything below it) to `dst_name` in
    /// `dst`; `rel` is its path relative to both roots (hard links to an
    /// earlier copy are made to `rel` of that copy).
    ///
    /// # Errors
    /// I/O errors, [`ConvertError::Mismatch`] when the object was replaced
    /// while being copied, [`ConvertError::Interrupted`].
    pub(crate) fn copy_one(
        &mut self,
        src: &OwnedFd,
        dst: &OwnedFd,
        name: &OsStr,
        dst_name: &OsStr,
        rel: &Path,
    ) -> Result<()> {
        {
            self.check_cancel()?;
            let rel = rel.to_path_buf();
            let path = self.root.join(&rel);
            let st = rustix::fs::statat(src, name, AtFlags::SYMLINK_NOFOLLOW)
                .map_err(|e| io("stat", &path, e))?;
            let ft = FileType::from_raw_mode(st.st_mode);
            if ft != FileType::Directory && st.st_nlink > 1 {
                let key = (st.st_dev, st.st_ino);
                if let Some(first) = self.links.get(&key) {
                    let root = self.dst_root.as_ref().expect("set in copy_tree");
                    let first = match &self.staged {
                        Some((real, tmp)) => match first.strip_prefix(real) {
                            Ok(below) => tmp.join(below),
                            Err(_) => first.clone(),
                        },
                        None => first.clone(),
                    };
                    rustix::fs::linkat(root, &first, dst, dst_name, AtFlags::empty())
                        .map_err(|e| io("link", &path, e))?;
                    self.tick(0, 1);
                    return Ok(());
                }
                self.links.insert(key, rel.clone());
            }
            match ft {
                FileType::Directory => {
                    rustix::fs::mkdirat(dst, dst_name, Mode::from_raw_mode(0o700))
                        .map_err(|e| io("create", &path, e))?;
                    let s = open_dir_at(src, name, &path)?;
                    same_object(&s, &st, &path)?;
                    let d = open_dir_at(dst, dst_name, &path)?;
                    self.copy_dir(&s, &d, &rel)?;
                    self.set_meta_fd(&s, &d, &st, &path)?;
                    self.tick(0, 1);
                }
                FileType::RegularFile => {
                    let s = rustix::fs::openat(
                        src,
                        name,
                        OFlags::RDONLY
                            | OFlags::NOFOLLOW
                            | OFlags::NONBLOCK
                            | OFlags::NOCTTY
                            | OFlags::CLOEXEC,
                        Mode::empty(),
                    )
                    .map_err(|e| io("open", &path, e))?;
                    same_object(&s, &st, &path)?;
                    let d = rustix::fs::openat(
                        dst,
                        dst_name,
                        OFlags::WRONLY
                            | OFlags::CREATE
                            | OFlags::EXCL
                            | OFlags::NOFOLLOW
                            | OFlags::CLOEXEC,
                        Mode::from_raw_mode(0o600),
                    )
                    .map_err(|e| io("create", &path, e))?;
                    self.copy_data(&s, &d, st.st_size as u64, &path)?;
                    self.set_meta_fd(&s, &d, &st, &path)?;
                    self.tick(0, 1);
                }
                FileType::Symlink => {
                    let target = rustix::fs::readlinkat(src, name, Vec::new())
                        .map_err(|e| io("read link", &path, e))?;
                    rustix::fs::symlinkat(target.as_c_str(), dst, dst_name)
                        .map_err(|e| io("create", &path, e))?;
                    self.set_meta_at(src, dst, name, dst_name, &st, &path)?;
                    self.tick(0, 1);
                }
                FileType::Fifo
                | FileType::CharacterDevice
                | FileType::BlockDevice
                | FileType::Socket => {
                    rustix::fs::mknodat(dst, dst_name, ft, Mode::from_raw_mode(0o600), st.st_rdev)
                        .map_err(|e| io("create", &path, e))?;
                    self.set_meta_at(src, dst, name, dst_name, &st, &path)?;
                    self.tick(0, 1);
                }
                FileType::Unknown => {
                    return Err(io(
                        "copy",
                        &path,
                        std::io::Error::other("unknown file type"),
                    ));
                }
            }
        }
        Ok(())
    }

    /// Data ranges only; holes stay holes; the size is set at the end.
    fn copy_data(&mut self, src: &OwnedFd, dst: &OwnedFd, size: u64, path: &Path) -> Result<()> {
        let mut off = 0u64;
        while off < size {
            let data = match rustix::fs::seek(src, SeekFrom::Data(off)) {
                Ok(d) => d,
                Err(Errno::NXIO) => break,
                Err(e) => return Err(io("seek", path, e)),
            };
            let hole = rustix::fs::seek(src, SeekFrom::Hole(data))
                .map_err(|e| io("seek", path, e))?
                .min(size);
            let mut pos = data;
            while pos < hole {
                self.check_cancel()?;
                let len = ((hole - pos) as usize).min(CHUNK);
                let n = self.copy_range(src, dst, pos, len, path)?;
                if n == 0 {
                    // The file shrank under us; verification will say so.
                    break;
                }
                pos += n as u64;
                self.tick(n as u64, 0);
            }
            off = hole.max(pos);
        }
        rustix::fs::ftruncate(dst, size).map_err(|e| io("truncate", path, e))
    }

    fn copy_range(
        &mut self,
        src: &OwnedFd,
        dst: &OwnedFd,
        pos: u64,
        len: usize,
        path: &Path,
    ) -> Result<usize> {
        let (mut i, mut o) = (pos, pos);
        match rustix::fs::copy_file_range(src, Some(&mut i), dst, Some(&mut o), len) {
            Ok(n) => return Ok(n),
            Err(Errno::XDEV | Errno::INVAL | Errno::NOSYS | Errno::OPNOTSUPP) => {}
            Err(e) => return Err(io("copy", path, e)),
        }
        if self.buf.len() < CHUNK {
            self.buf.resize(CHUNK, 0);
        }
        let n =
            rustix::io::pread(src, &mut self.buf[..len], pos).map_err(|e| io("read", path, e))?;
        let mut w = 0;
        while w < n {
            w += rustix::io::pwrite(dst, &self.buf[w..n], pos + w as u64)
                .map_err(|e| io("write", path, e))?;
        }
        Ok(n)
    }

    /// Owner, xattrs, mode, then times, through fds (files, directories).
    fn set_meta_fd(&mut self, src: &OwnedFd, dst: &OwnedFd, st: &Stat, path: &Path) -> Result<()> {
        rustix::fs::fchown(
            dst,
            Some(Uid::from_raw(st.st_uid)),
            Some(Gid::from_raw(st.st_gid)),
        )
        .map_err(|e| io("chown", path, e))?;
        self.copy_xattrs(src, dst, path)?;
        rustix::fs::fchmod(dst, Mode::from_raw_mode(st.st_mode & 0o7777))
            .map_err(|e| io("chmod", path, e))?;
        rustix::fs::futimens(dst, &times(st)).map_err(|e| io("set times of", path, e))
    }

    /// The same for symlinks and special files, by name (no following).
    fn set_meta_at(
        &mut self,
        src_dir: &OwnedFd,
        dst_dir: &OwnedFd,
        name: &OsStr,
        dst_name: &OsStr,
        st: &Stat,
        path: &Path,
    ) -> Result<()> {
        rustix::fs::chownat(
            dst_dir,
            dst_name,
            Some(Uid::from_raw(st.st_uid)),
            Some(Gid::from_raw(st.st_gid)),
            AtFlags::SYMLINK_NOFOLLOW,
        )
        .map_err(|e| io("chown", path, e))?;
        let opath = OFlags::PATH | OFlags::NOFOLLOW | OFlags::CLOEXEC;
        let s = rustix::fs::openat(src_dir, name, opath, Mode::empty())
            .map_err(|e| io("open", path, e))?;
        same_object(&s, st, path)?;
        let d = rustix::fs::openat(dst_dir, dst_name, opath, Mode::empty())
            .map_err(|e| io("open", path, e))?;
        self.copy_xattrs(&s, &d, path)?;
        if FileType::from_raw_mode(st.st_mode) != FileType::Symlink {
            rustix::fs::chmodat(
                dst_dir,
                dst_name,
                Mode::from_raw_mode(st.st_mode & 0o7777),
                AtFlags::empty(),
            )
            .map_err(|e| io("chmod", path, e))?;
        }
        rustix::fs::utimensat(dst_dir, dst_name, &times(st), AtFlags::SYMLINK_NOFOLLOW)
            .map_err(|e| io("set times of", path, e))
    }

    fn copy_xattrs(&mut self, src: &OwnedFd, dst: &OwnedFd, path: &Path) -> Result<()> {
        let (sp, dp) = (proc_path(src), proc_path(dst));
        for (name, value) in read_xattrs(&sp, &mut self.xbuf, path)? {
            match rustix::fs::setxattr(&dp, name.as_slice(), &value, XattrFlags::empty()) {
                Ok(()) => {}
                // Security labels this kernel or policy does not accept
                // (the destination gets its own).
                Err(Errno::OPNOTSUPP | Errno::PERM | Errno::ACCESS)
                    if name.starts_with(b"security.") => {}
                Err(e) => return Err(io("set extended attributes of", path, e)),
            }
        }
        Ok(())
    }
}

/// Every extended attribute of the inode reached by `proc` (a
/// [`proc_path`]), sorted by name.
pub(crate) fn read_xattrs(
    proc: &str,
    buf: &mut Vec<u8>,
    path: &Path,
) -> Result<Vec<(Vec<u8>, Vec<u8>)>> {
    if buf.len() < (1 << 16) {
        buf.resize(1 << 16, 0);
    }
    let n = match rustix::fs::listxattr(proc, &mut buf[..]) {
        Ok(n) => n,
        Err(Errno::OPNOTSUPP) => return Ok(Vec::new()),
        Err(e) => return Err(io("list extended attributes of", path, e)),
    };
    let list: Vec<Vec<u8>> = buf[..n]
        .split(|b| *b == 0)
        .filter(|s| !s.is_empty())
        .map(<[u8]>::to_vec)
        .collect();
    let mut out = Vec::with_capacity(list.len());
    for name in list {
        let n = match rustix::fs::getxattr(proc, name.as_slice(), &mut buf[..]) {
            Ok(n) => n,
            Err(Errno::NODATA) => continue,
            Err(e) => return Err(io("read extended attributes of", path, e)),
        };
        out.push((name, buf[..n].to_vec()));
    }
    out.sort();
    Ok(out)
}

/// Access and modification times of `st`, for `futimens`.
pub(crate) fn times(st: &Stat) -> Timestamps {
    Timestamps {
        last_access: Timespec {
            tv_sec: st.st_atime as _,
            tv_nsec: st.st_atime_nsec as _,
        },
        last_modification: Timespec {
            tv_sec: st.st_mtime as _,
            tv_nsec: st.st_mtime_nsec as _,
        },
    }
}

/// The opened fd is the object that was listed (no swap in between).
pub(crate) fn same_object(fd: &OwnedFd, st: &Stat, path: &Path) -> Result<()> {
    let now = rustix::fs::fstat(fd).map_err(|e| io("stat", path, e))?;
    if now.st_dev != st.st_dev || now.st_ino != st.st_ino {
        return Err(ConvertError::Mismatch {
            path: path.to_path_buf(),
            what: "it was replaced while being copied".into(),
        });
    }
    Ok(())
}
