//! Comparing the copy with the original, object by object: the same names
//! in every directory, and for each object its type, mode, owner, size,
//! modification time, device number, contents, link target, extended
//! attributes, and the same hard-link groups.

use std::collections::HashMap;
use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};

use rustix::fs::{AtFlags, FileType, Mode, OFlags, Stat};

use super::copy::{read_xattrs, same_object};
use super::guard::{Rec, Record};
use super::{ConvertError, Progress, Result, Scan, Step, io, names, open_dir_at, proc_path};

const CHUNK: usize = 1 << 20;

/// Compares two trees (see the module documentation).
pub struct Verifier<'a> {
    /// Source inode -> destination inode, and back.
    fwd: HashMap<u64, u64>,
    back: HashMap<u64, u64>,
    /// What was compared ([`super::guard`]).
    pub(crate) record: Record,
    cancel: &'a AtomicBool,
    progress: &'a mut dyn FnMut(&Progress),
    done: Progress,
    a: Vec<u8>,
    b: Vec<u8>,
}

impl<'a> Verifier<'a> {
    /// A verifier of a tree described by `scan`.
    pub fn new(
        scan: &Scan,
        cancel: &'a AtomicBool,
        progress: &'a mut dyn FnMut(&Progress),
    ) -> Verifier<'a> {
        Verifier {
            fwd: HashMap::new(),
            back: HashMap::new(),
            record: Record::default(),
            cancel,
            progress,
            done: Progress {
                step: Step::Verifying,
                bytes: 0,
                total_bytes: scan.bytes,
                objects: 0,
                total_objects: scan.objects,
            },
            a: vec![0; CHUNK],
            b: vec![0; CHUNK],
        }
    }

    /// Compares directory `src` (and everything below) with `dst`.
    ///
    /// # Errors
    /// [`ConvertError::Mismatch`] naming the first difference, I/O errors,
    /// [`ConvertError::Interrupted`].
    pub fn verify_tree(&mut self, src: &OwnedFd, dst: &OwnedFd) -> Result<()> {
        let s = rustix::fs::fstat(src).map_err(|e| io("stat", "DIR", e))?;
        let d = rustix::fs::fstat(dst).map_err(|e| io("stat", "DIR", e))?;
        self.dir(src, dst, Path::new(""))?;
        self.same_meta(&s, &d, Path::new("."))?;
        // DIR itself too: a chmod of it in the last window is copied in.
        self.record.src.insert(PathBuf::new(), Rec::of(&s));
        self.record.dst.insert(PathBuf::new(), Rec::of(&d));
        self.same_xattrs(src, dst, Path::new("."))
    }

    fn dir(&mut self, src: &OwnedFd, dst: &OwnedFd, rel: &Path) -> Result<()> {
        let (sn, dn) = (names(src, rel)?, names(dst, rel)?);
        if sn != dn {
            let extra = dn.iter().find(|n| !sn.contains(n));
            let missing = sn.iter().find(|n| !dn.contains(n));
            return Err(mismatch(
                rel,
                match (missing, extra) {
                    (Some(m), _) => format!("{:?} is missing", m),
                    (None, Some(e)) => format!("{:?} is extra", e),
                    _ => "different entries".into(),
                },
            ));
        }
        for name in sn {
            if self.cancel.load(Ordering::SeqCst) {
                return Err(ConvertError::Interrupted);
            }
            let rel = rel.join(&name);
            let s = rustix::fs::statat(src, &name, AtFlags::SYMLINK_NOFOLLOW)
                .map_err(|e| io("stat", &rel, e))?;
            let d = rustix::fs::statat(dst, &name, AtFlags::SYMLINK_NOFOLLOW)
                .map_err(|e| io("stat", &rel, e))?;
            self.record.src.insert(rel.clone(), Rec::of(&s));
            self.record.dst.insert(rel.clone(), Rec::of(&d));
            self.same_meta(&s, &d, &rel)?;
            let ft = FileType::from_raw_mode(s.st_mode);
            if ft != FileType::Directory {
                let first = !self.fwd.contains_key(&s.st_ino) && !self.back.contains_key(&d.st_ino);
                if self.fwd.get(&s.st_ino).copied().unwrap_or(d.st_ino) != d.st_ino
                    || self.back.get(&d.st_ino).copied().unwrap_or(s.st_ino) != s.st_ino
                {
                    return Err(mismatch(&rel, "hard links differ".into()));
                }
                self.fwd.insert(s.st_ino, d.st_ino);
                self.back.insert(d.st_ino, s.st_ino);
                if !first {
                    self.tick(0);
                    continue;
                }
            }
            match ft {
                FileType::Directory => {
                    let sd = open_dir_at(src, &name, &rel)?;
                    same_object(&sd, &s, &rel)?;
                    let dd = open_dir_at(dst, &name, &rel)?;
                    self.same_xattrs(&sd, &dd, &rel)?;
                    self.dir(&sd, &dd, &rel)?;
                }
                FileType::RegularFile => {
                    let fl = OFlags::RDONLY
                        | OFlags::NOFOLLOW
                        | OFlags::NONBLOCK
                        | OFlags::NOCTTY
                        | OFlags::CLOEXEC;
                    let sf = rustix::fs::openat(src, &name, fl, Mode::empty())
                        .map_err(|e| io("open", &rel, e))?;
                    same_object(&sf, &s, &rel)?;
                    let df = rustix::fs::openat(dst, &name, fl, Mode::empty())
                        .map_err(|e| io("open", &rel, e))?;
                    self.same_xattrs(&sf, &df, &rel)?;
                    self.same_contents(&sf, &df, s.st_size as u64, &rel)?;
                }
                _ => {
                    if ft == FileType::Symlink {
                        let a = rustix::fs::readlinkat(src, &name, Vec::new())
                            .map_err(|e| io("read link", &rel, e))?;
                        let b = rustix::fs::readlinkat(dst, &name, Vec::new())
                            .map_err(|e| io("read link", &rel, e))?;
                        if a != b {
                            return Err(mismatch(&rel, "link target".into()));
                        }
                    }
                    let fl = OFlags::PATH | OFlags::NOFOLLOW | OFlags::CLOEXEC;
                    let sf = rustix::fs::openat(src, &name, fl, Mode::empty())
                        .map_err(|e| io("open", &rel, e))?;
                    same_object(&sf, &s, &rel)?;
                    let df = rustix::fs::openat(dst, &name, fl, Mode::empty())
                        .map_err(|e| io("open", &rel, e))?;
                    self.same_xattrs(&sf, &df, &rel)?;
                }
            }
            self.tick(0);
        }
        Ok(())
    }

    fn tick(&mut self, bytes: u64) {
        self.done.bytes += bytes;
        if bytes == 0 {
            self.done.objects += 1;
        }
        (self.progress)(&self.done);
    }

    fn same_meta(&self, s: &Stat, d: &Stat, rel: &Path) -> Result<()> {
        let ft = FileType::from_raw_mode(s.st_mode);
        let what = if s.st_mode != d.st_mode {
            "type or mode"
        } else if (s.st_uid, s.st_gid) != (d.st_uid, d.st_gid) {
            "owner"
        } else if ft != FileType::Directory && s.st_size != d.st_size {
            "size"
        } else if (s.st_mtime, s.st_mtime_nsec) != (d.st_mtime, d.st_mtime_nsec) {
            "modification time"
        } else if matches!(ft, FileType::CharacterDevice | FileType::BlockDevice)
            && s.st_rdev != d.st_rdev
        {
            "device number"
        } else {
            return Ok(());
        };
        Err(mismatch(rel, what.into()))
    }

    fn same_xattrs(&mut self, s: &OwnedFd, d: &OwnedFd, rel: &Path) -> Result<()> {
        let a = read_xattrs(&proc_path(s), &mut self.a, rel)?;
        let b = read_xattrs(&proc_path(d), &mut self.b, rel)?;
        let strip = |v: Vec<(Vec<u8>, Vec<u8>)>| -> Vec<(Vec<u8>, Vec<u8>)> {
            v.into_iter()
                .filter(|(n, _)| !n.starts_with(b"security."))
                .collect()
        };
        if strip(a) != strip(b) {
            return Err(mismatch(rel, "extended attributes".into()));
        }
        Ok(())
    }

    fn same_contents(&mut self, s: &OwnedFd, d: &OwnedFd, size: u64, rel: &Path) -> Result<()> {
        let mut off = 0u64;
        while off < size {
            if self.cancel.load(Ordering::SeqCst) {
                return Err(ConvertError::Interrupted);
            }
            let want = ((size - off) as usize).min(CHUNK);
            let n = read_full(s, &mut self.a[..want], off).map_err(|e| io("read", rel, e))?;
            let m = read_full(d, &mut self.b[..want], off).map_err(|e| io("read", rel, e))?;
            if n != want || m != want || self.a[..n] != self.b[..m] {
                return Err(mismatch(rel, "contents".into()));
            }
            off += n as u64;
            self.done.bytes += n as u64;
            (self.progress)(&self.done);
        }
        Ok(())
    }
}

fn read_full(fd: &OwnedFd, buf: &mut [u8], off: u64) -> rustix::io::Result<usize> {
    let mut got = 0;
    while got < buf.len() {
        let n = rustix::io::pread(fd, &mut buf[got..], off + got as u64)?;
        if n == 0 {
            break;
        }
        got += n;
    }
    Ok(got)
}

fn mismatch(rel: &Path, what: String) -> ConvertError {
    ConvertError::Mismatch {
        path: if rel.as_os_str().is_empty() {
            PathBuf::from(".")
        } else {
            rel.to_path_buf()
        },
        what,
    }
}
