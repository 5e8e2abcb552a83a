//! The bytes of one FUSE request and its reply on an io_uring entry, and
//! which [`Ops`] method answers it.
//!
//! The layout is the kernel's (`include/uapi/linux/fuse.h`, protocol 7.42,
//! `fs/fuse/dev_uring.c`), as the structs of [`super::abi`]: an entry's
//! header buffer, `fuse_uring_req_header`, holds the `fuse_in_header`
//! (reply: `fuse_out_header`) in its first area, the request's first
//! argument, its per-opcode header (`fuse_read_in`, ...), in the second,
//! and `fuse_uring_ent_in_out` after that (the commit id and the payload's
//! length); every further argument (names, written data) is in the payload
//! buffer, one after the other, and every reply argument goes there too.
//! Opcodes whose request has no header (LOOKUP, UNLINK, ...) leave the
//! header area empty.
//!
//! Everything here is parsed defensively: a request that is too short or
//! lacks a name's NUL gets EINVAL, an opcode we do not serve ENOSYS, and a
//! reply that would not fit the payload buffer EIO. Nothing panics.

#[cfg(test)]
mod tests;

use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use fuser::{Errno, FileAttr, FileType};
use zerocopy::{FromBytes, FromZeros, Immutable, IntoBytes};

use super::abi::*;
use crate::backend::Backend;
use crate::fs::{Caller, SetAttr, SetTime};
use crate::handles::FileHandle;
use crate::inodes::InodeNo;
use crate::ops::{MAX_REQUEST, Ops, Reply, Xattr};

/// An entry's header buffer, `struct fuse_uring_req_header`.
pub(super) type Header = fuse_uring_req_header;

impl fuse_uring_req_header {
    /// A zeroed header, on the heap (its address is registered with the
    /// kernel).
    pub(super) fn boxed() -> Box<Header> {
        Box::new(Header::new_zeroed())
    }

    /// The id the reply must be committed with.
    pub(super) fn commit_id(&self) -> u64 {
        self.ring_ent_in_out.commit_id
    }

    fn payload_size(&self) -> usize {
        self.ring_ent_in_out.payload_sz as usize
    }

    fn set_payload_size(&mut self, n: usize) {
        self.ring_ent_in_out.payload_sz = n as u32;
    }
}

fn einval() -> Errno {
    Errno::from_i32(libc::EINVAL)
}

/// The request argument `T` at the start of `b` (EINVAL if too short).
fn arg<T: FromBytes>(b: &[u8]) -> Reply<T> {
    T::read_from_prefix(b).map(|(t, _)| t).map_err(|_| einval())
}

fn ino(h: &fuse_in_header) -> InodeNo {
    InodeNo(h.nodeid)
}

fn caller(h: &fuse_in_header) -> Caller {
    Caller {
        uid: h.uid,
        gid: h.gid,
    }
}

/// The NUL-terminated name at the start of `b`, and what follows it.
fn name(b: &[u8]) -> Reply<(&OsStr, &[u8])> {
    let end = b.iter().position(|&c| c == 0).ok_or_else(einval)?;
    Ok((OsStr::from_bytes(&b[..end]), &b[end + 1..]))
}

/// A reply being written into the payload buffer.
struct Out<'a> {
    buf: &'a mut [u8],
    len: usize,
    /// How long the kernel may cache entries and attributes.
    ttl: Duration,
}

impl Out<'_> {
    /// Appends `v`; EIO if the buffer is full (the kernel sized it for
    /// the largest reply it asks for, so this is a bug, not input).
    fn push(&mut self, v: &[u8]) -> Reply<()> {
        let end = self.len + v.len();
        let dst = self.buf.get_mut(self.len..end).ok_or(Errno::EIO)?;
        dst.copy_from_slice(v);
        self.len = end;
        Ok(())
    }

    /// Appends the struct `v`.
    fn put<T: IntoBytes + Immutable>(&mut self, v: &T) -> Reply<()> {
        self.push(v.as_bytes())
    }

    /// `struct fuse_entry_out` for `a` (node id `a.ino`, generation 0).
    fn entry(&mut self, a: &FileAttr) -> Reply<()> {
        self.put(&fuse_entry_out {
            nodeid: a.ino.0,
            generation: 0,
            entry_valid: self.ttl.as_secs(),
            attr_valid: self.ttl.as_secs(),
            entry_valid_nsec: self.ttl.subsec_nanos(),
            attr_valid_nsec: self.ttl.subsec_nanos(),
            attr: attr(a),
        })
    }

    /// One `struct fuse_dirent` (padded to 8 bytes) if it fits in `limit`.
    fn dirent(&mut self, limit: usize, ino: u64, off: u64, typ: u32, name: &OsStr) -> bool {
        let n = name.as_bytes();
        let size = (size_of::<fuse_dirent>() + n.len()).next_multiple_of(8);
        if self.len + size > limit.min(self.buf.len()) {
            return false;
        }
        let start = self.len;
        let d = fuse_dirent {
            ino,
            off,
            namelen: n.len() as u32,
            typ,
        };
        let ok = self.put(&d).is_ok() && self.push(n).is_ok();
        // Zero padding (the buffer holds the request's bytes).
        self.buf[start + size_of::<fuse_dirent>() + n.len()..start + size].fill(0);
        self.len = start + size;
        ok
    }
}

/// `struct fuse_attr` of `a`.
fn attr(a: &FileAttr) -> fuse_attr {
    let (atime, atimensec) = time(a.atime);
    let (mtime, mtimensec) = time(a.mtime);
    let (ctime, ctimensec) = time(a.ctime);
    fuse_attr {
        ino: a.ino.0,
        size: a.size,
        blocks: a.blocks,
        atime: atime as u64,
        mtime: mtime as u64,
        ctime: ctime as u64,
        atimensec,
        mtimensec,
        ctimensec,
        mode: type_bits(a.kind) | u32::from(a.perm),
        nlink: a.nlink,
        uid: a.uid,
        gid: a.gid,
        rdev: a.rdev,
        blksize: a.blksize,
        flags: 0,
    }
}

/// The S_IFMT bits of a file type.
fn type_bits(kind: FileType) -> u32 {
    match kind {
        FileType::NamedPipe => libc::S_IFIFO,
        FileType::CharDevice => libc::S_IFCHR,
        FileType::BlockDevice => libc::S_IFBLK,
        FileType::Directory => libc::S_IFDIR,
        FileType::RegularFile => libc::S_IFREG,
        FileType::Symlink => libc::S_IFLNK,
        FileType::Socket => libc::S_IFSOCK,
    }
}

/// Seconds and nanoseconds since the epoch (negative seconds before it,
/// nanoseconds always forward), as `struct fuse_attr` has times.
fn time(t: SystemTime) -> (i64, u32) {
    match t.duration_since(UNIX_EPOCH) {
        Ok(d) => (
            i64::try_from(d.as_secs()).unwrap_or(i64::MAX),
            d.subsec_nanos(),
        ),
        Err(e) => {
            let d = e.duration();
            let secs = i64::try_from(d.as_secs()).unwrap_or(i64::MAX);
            match d.subsec_nanos() {
                0 => (-secs, 0),
                n => (-secs - 1, 1_000_000_000 - n),
            }
        }
    }
}

fn set_time(now: bool, secs: u64, nsecs: u32) -> SetTime {
    if now {
        SetTime::Now
    } else {
        let secs = secs as i64;
        let t = if secs >= 0 {
            UNIX_EPOCH + Duration::new(secs as u64, nsecs)
        } else {
            UNIX_EPOCH - Duration::from_secs(secs.unsigned_abs())
                + Duration::from_nanos(nsecs.into())
        };
        SetTime::At(t)
    }
}

/// What [`answer`] returns for an opcode it does not serve: ENOSYS on the
/// wire, and not counted (as fuser's defaults for the same opcodes are
/// not). An errno no operation returns (`EDOM`), so that the two cannot
/// be confused.
const UNSERVED: Errno = Errno::EDOM;

/// Answers the request in `header` and `payload` with `ops` and writes the
/// reply in their place: `fuse_out_header` and the reply's length.
/// `payload` holds at least [`super::READ_SLACK`] bytes more than the
/// largest request, so that a READ decrypts into it in place.
/// `owner_only`: as fuser's `SessionACL::Owner` (no `allow_other`), other
/// users get EACCES but for the requests the kernel may send on behalf of
/// an open file whatever the caller (I/O, sync, release, listing).
pub(super) fn serve<B: Backend>(
    ops: &Ops<B>,
    header: &mut Header,
    payload: &mut Vec<u8>,
    owner_only: Option<u32>,
) {
    let h = fuse_in_header::read_from_prefix(&header.in_out)
        .ok()
        .map(|(h, _)| h);
    let n = header.payload_size().min(payload.len());
    let r = match h {
        Some(h) if owner_only.is_some_and(|owner| h.uid != owner) && !any_caller(h.opcode) => {
            Err(Errno::EACCES)
        }
        Some(h) => {
            let extlen = usize::from(h.total_extlen) * 8;
            let input = n.saturating_sub(extlen);
            let r = answer(ops, &h, &header.op_in, payload, input);
            if r != Err(UNSERVED) {
                ops.stats().count_ring();
            }
            r.map_err(|e| if e == UNSERVED { Errno::ENOSYS } else { e })
        }
        None => Err(einval()),
    };
    let (error, len) = match r {
        Ok(len) => (0, len),
        Err(e) => (-e.code(), 0),
    };
    let out = fuse_out_header {
        len: (size_of::<fuse_out_header>() + len) as u32,
        error,
        unique: h.map_or(0, |h| h.unique),
    };
    // Cannot fail: the area is larger than the header.
    let _ = out.write_to_prefix(&mut header.in_out);
    header.set_payload_size(len);
}

/// Requests served whoever the caller, as fuser serves them: those the
/// kernel may send without the caller's ids (on behalf of an open file).
fn any_caller(opcode: u32) -> bool {
    matches!(
        opcode,
        FUSE_READ
            | FUSE_READDIR
            | FUSE_READDIRPLUS
            | FUSE_WRITE
            | FUSE_FSYNC
            | FUSE_FSYNCDIR
            | FUSE_RELEASE
            | FUSE_RELEASEDIR
    )
}

/// The reply's payload length, or the errno to send.
fn answer<B: Backend>(
    ops: &Ops<B>,
    h: &fuse_in_header,
    op: &[u8],
    payload: &mut Vec<u8>,
    input: usize,
) -> Reply<usize> {
    let i = ino(h);
    // Every reply is built after the request's arguments were used: they
    // share the payload buffer.
    let result: Done = {
        let args = &payload[..input];
        match h.opcode {
            FUSE_LOOKUP => Done::Entry(ops.lookup(i, name(args)?.0)?),
            FUSE_GETATTR => Done::Attr(ops.getattr(i)?),
            FUSE_SETATTR => {
                let s: fuse_setattr_in = arg(op)?;
                let has = |bit: u32| s.valid & bit != 0;
                let time = |bit: u32, now: u32, secs: u64, nsecs: u32| {
                    has(bit).then(|| set_time(has(now), secs, nsecs))
                };
                let a = SetAttr {
                    mode: has(FATTR_MODE).then_some(s.mode),
                    uid: has(FATTR_UID).then_some(s.uid),
                    gid: has(FATTR_GID).then_some(s.gid),
                    size: has(FATTR_SIZE).then_some(s.size),
                    atime: time(FATTR_ATIME, FATTR_ATIME_NOW, s.atime, s.atimensec),
                    mtime: time(FATTR_MTIME, FATTR_MTIME_NOW, s.mtime, s.mtimensec),
                    through_handle: has(FATTR_FH),
                };
                Done::Attr(ops.setattr(h.uid, i, a)?)
            }
            FUSE_READLINK => Done::Bytes(ops.readlink(i)?),
            FUSE_SYMLINK => {
                let (link, rest) = name(args)?;
                let (target, _) = name(rest)?;
                Done::Entry(ops.symlink(i, link, target.as_bytes(), caller(h))?)
            }
            FUSE_MKNOD => {
                let m: fuse_mknod_in = arg(op)?;
                Done::Entry(ops.mknod(i, name(args)?.0, (m.mode, m.umask), m.rdev, caller(h))?)
            }
            FUSE_MKDIR => {
                let m: fuse_mkdir_in = arg(op)?;
                Done::Entry(ops.mkdir(i, name(args)?.0, (m.mode, m.umask), caller(h))?)
            }
            FUSE_UNLINK => Done::Empty(ops.unlink(i, name(args)?.0)?),
            FUSE_RMDIR => Done::Empty(ops.rmdir(i, name(args)?.0)?),
            FUSE_RENAME | FUSE_RENAME2 => {
                let (newdir, flags) = if h.opcode == FUSE_RENAME2 {
                    let r: fuse_rename2_in = arg(op)?;
                    (r.newdir, r.flags)
                } else {
                    (arg::<fuse_rename_in>(op)?.newdir, 0)
                };
                let (old, rest) = name(args)?;
                let (new, _) = name(rest)?;
                Done::Empty(ops.rename(i, old, InodeNo(newdir), new, flags)?)
            }
            FUSE_LINK => {
                let l: fuse_link_in = arg(op)?;
                Done::Entry(ops.link(InodeNo(l.oldnodeid), i, name(args)?.0)?)
            }
            FUSE_OPEN => {
                let o: fuse_open_in = arg(op)?;
                let (fh, flags) = ops.open(i, o.flags as i32)?;
                Done::Open(fh, flags.bits())
            }
            FUSE_READ => {
                // Decrypted in place: whole data units, so up to two units
                // (at most READ_SLACK bytes) more than asked for; the
                // buffer is never reallocated (the kernel holds its
                // address), since it is longer than that already.
                let r: fuse_read_in = arg(op)?;
                let size = r.size.min(MAX_REQUEST);
                let at = payload.as_ptr();
                let range = ops.read(FileHandle(r.fh), r.offset, size, payload)?;
                assert_eq!(at, payload.as_ptr(), "the ring payload moved");
                Done::Read(range)
            }
            FUSE_WRITE => {
                let w: fuse_write_in = arg(op)?;
                let data = args.get(..w.size as usize).ok_or_else(einval)?;
                let kill = w.write_flags & FUSE_WRITE_KILL_SUIDGID != 0;
                Done::Write(ops.write(i, FileHandle(w.fh), w.offset, data, kill)?)
            }
            FUSE_STATFS => Done::Statfs(ops.statfs()?),
            FUSE_RELEASE => Done::Empty(ops.release(FileHandle(arg::<fuse_release_in>(op)?.fh))?),
            FUSE_FSYNC => {
                let f: fuse_fsync_in = arg(op)?;
                let datasync = f.fsync_flags & FUSE_FSYNC_FDATASYNC != 0;
                Done::Empty(ops.fsync(FileHandle(f.fh), datasync)?)
            }
            FUSE_SETXATTR => {
                let s: fuse_setxattr_in = arg(op)?;
                let (xname, rest) = name(args)?;
                let value = rest.get(..s.size as usize).ok_or_else(einval)?;
                Done::Empty(ops.setxattr(i, xname, value, s.flags as i32)?)
            }
            FUSE_GETXATTR => {
                let g: fuse_getxattr_in = arg(op)?;
                Done::Xattr(ops.getxattr(h.uid, i, name(args)?.0, g.size)?)
            }
            FUSE_LISTXATTR => {
                let g: fuse_getxattr_in = arg(op)?;
                Done::Xattr(ops.listxattr(h.uid, i, g.size)?)
            }
            FUSE_REMOVEXATTR => Done::Empty(ops.removexattr(i, name(args)?.0)?),
            FUSE_FLUSH => Done::Empty(ops.flush(FileHandle(arg::<fuse_flush_in>(op)?.fh))?),
            FUSE_OPENDIR => {
                let (fh, flags) = ops.opendir(i)?;
                Done::Open(fh, flags.bits())
            }
            FUSE_READDIR | FUSE_READDIRPLUS => {
                let r: fuse_read_in = arg(op)?;
                Done::List {
                    fh: FileHandle(r.fh),
                    offset: r.offset,
                    size: r.size as usize,
                    plus: h.opcode == FUSE_READDIRPLUS,
                }
            }
            FUSE_RELEASEDIR => {
                Done::Empty(ops.releasedir(FileHandle(arg::<fuse_release_in>(op)?.fh))?)
            }
            FUSE_FSYNCDIR => Done::Empty(ops.fsyncdir(i)?),
            FUSE_ACCESS => Done::Empty(ops.access(i, arg::<fuse_access_in>(op)?.mask)?),
            FUSE_CREATE => {
                let c: fuse_create_in = arg(op)?;
                let r = ops.create(
                    i,
                    name(args)?.0,
                    (c.mode, c.umask),
                    c.flags as i32,
                    caller(h),
                )?;
                let (a, fh, open) = r;
                Done::Create(a, fh, open.bits())
            }
            FUSE_FALLOCATE => {
                let f: fuse_fallocate_in = arg(op)?;
                let r = ops.fallocate(FileHandle(f.fh), f.offset, f.length, f.mode as i32);
                Done::Empty(r?)
            }
            // GETLK/SETLK (locks stay local), BMAP, IOCTL, POLL, LSEEK,
            // COPY_FILE_RANGE, SYNCFS, TMPFILE, STATX: as the fuser
            // adapter, which leaves them to fuser's ENOSYS. INIT, FORGET,
            // BATCH_FORGET and INTERRUPT never come on the ring.
            _ => return Err(UNSERVED),
        }
    };
    let mut out = Out {
        buf: payload.as_mut_slice(),
        len: 0,
        ttl: ops.ttl(),
    };
    let open = |fh: FileHandle, flags: u32| fuse_open_out {
        fh: fh.0,
        open_flags: flags,
        backing_id: 0,
    };
    match result {
        Done::Empty(()) => {}
        Done::Entry(a) => out.entry(&a)?,
        Done::Attr(a) => out.put(&fuse_attr_out {
            attr_valid: ops.ttl().as_secs(),
            attr_valid_nsec: ops.ttl().subsec_nanos(),
            dummy: 0,
            attr: attr(&a),
        })?,
        Done::Bytes(v) => out.push(&v)?,
        Done::Open(fh, flags) => out.put(&open(fh, flags))?,
        Done::Create(a, fh, flags) => {
            out.entry(&a)?;
            out.put(&open(fh, flags))?;
        }
        Done::Read(range) => {
            if range.end > out.buf.len() {
                return Err(Errno::EIO);
            }
            out.buf.copy_within(range.clone(), 0);
            out.len = range.len();
        }
        Done::Write(size) => out.put(&fuse_write_out { size, padding: 0 })?,
        Done::Statfs(s) => out.put(&fuse_kstatfs {
            blocks: s.blocks,
            bfree: s.bfree,
            bavail: s.bavail,
            files: s.files,
            ffree: s.ffree,
            bsize: s.bsize,
            namelen: s.namelen,
            frsize: s.frsize,
            padding: 0,
            spare: [0; 6],
        })?,
        Done::Xattr(Xattr::Size(size)) => out.put(&fuse_getxattr_out { size, padding: 0 })?,
        Done::Xattr(Xattr::Data(v)) => out.push(&v)?,
        Done::List {
            fh,
            offset,
            size,
            plus: false,
        } => ops.readdir(fh, offset, |ino, off, kind, name| {
            let typ = type_bits(kind) >> 12;
            !out.dirent(size, ino, off, typ, name)
        })?,
        Done::List {
            fh,
            offset,
            size,
            plus: true,
        } => ops.readdirplus(fh, offset, |off, name, a| {
            let dirent = (size_of::<fuse_dirent>() + name.len()).next_multiple_of(8);
            let need = size_of::<fuse_entry_out>() + dirent;
            if out.len + need > size.min(out.buf.len()) {
                return true;
            }
            // Cannot fail: the room was checked.
            let _ = out.entry(a);
            !out.dirent(usize::MAX, a.ino.0, off, type_bits(a.kind) >> 12, name)
        })?,
    }
    Ok(out.len)
}

/// What a request produced, before it is written into the payload.
enum Done {
    Empty(()),
    Entry(FileAttr),
    Attr(FileAttr),
    Bytes(Vec<u8>),
    Open(FileHandle, u32),
    Create(FileAttr, FileHandle, u32),
    /// Plaintext, at this range of the payload.
    Read(std::ops::Range<usize>),
    Write(u32),
    Statfs(crate::fs::FsStats),
    Xattr(Xattr),
    /// A listing, written straight into the payload.
    List {
        fh: FileHandle,
        offset: u64,
        size: usize,
        plus: bool,
    },
}
