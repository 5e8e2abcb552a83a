//! The bytes of one FUSE request and its reply on an io_uring entry, and
//! which [`Ops`] method answers it.
//!
//! The layout is the kernel's (`include/uapi/linux/fuse.h`, protocol 7.42,
//! `fs/fuse/dev_uring.c`): an entry's header buffer holds the
//! `fuse_in_header` (reply: `fuse_out_header`) in its first 128 bytes, the
//! request's first argument, its per-opcode header (`fuse_read_in`, ...),
//! in the next 128, and `fuse_uring_ent_in_out` after that (the commit id
//! and the payload's length); every further argument (names, written
//! data) is in the payload buffer, one after the other, and every reply
//! argument goes there too. Opcodes whose request has no header
//! (LOOKUP, UNLINK, ...) leave the header area empty. Integers are
//! native-endian, as on `/dev/fuse`.
//!
//! Everything here is parsed defensively: a request that is too short or
//! lacks a name's NUL gets EINVAL, an opcode we do not serve ENOSYS, and a
//! reply that would not fit the payload buffer EIO. Nothing panics.

use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use fuser::{Errno, FileAttr, FileType};

use crate::fs::{Caller, SetAttr, SetTime};
use crate::handles::FileHandle;
use crate::inodes::InodeNo;
use crate::ops::{MAX_REQUEST, Ops, Reply, TTL, Xattr, ftype};

/// Bytes of the in/out header area (`FUSE_URING_IN_OUT_HEADER_SZ`).
const IN_OUT: usize = 128;
/// Bytes of the per-opcode header area (`FUSE_URING_OP_IN_OUT_SZ`).
const OP_IN: usize = 128;
/// Bytes of `struct fuse_uring_req_header`: both areas and
/// `fuse_uring_ent_in_out` (flags, commit id, payload size, 2 reserved).
pub(super) const HEADER: usize = IN_OUT + OP_IN + 32;

/// An entry's header buffer, `struct fuse_uring_req_header`.
#[repr(C, align(8))]
#[derive(Debug)]
pub(super) struct Header(pub(super) [u8; HEADER]);

impl Header {
    /// A zeroed header.
    pub(super) fn new() -> Header {
        Header([0; HEADER])
    }

    /// The id the reply must be committed with
    /// (`fuse_uring_ent_in_out.commit_id`).
    pub(super) fn commit_id(&self) -> u64 {
        u64_at(&self.0, IN_OUT + OP_IN + 8).unwrap_or(0)
    }

    fn payload_size(&self) -> usize {
        u32_at(&self.0, IN_OUT + OP_IN + 16).unwrap_or(0) as usize
    }

    fn set_payload_size(&mut self, n: usize) {
        put(&mut self.0, IN_OUT + OP_IN + 16, &(n as u32).to_ne_bytes());
    }

    fn op_in(&self) -> &[u8] {
        &self.0[IN_OUT..IN_OUT + OP_IN]
    }
}

// Opcodes (enum fuse_opcode).
const LOOKUP: u32 = 1;
const GETATTR: u32 = 3;
const SETATTR: u32 = 4;
const READLINK: u32 = 5;
const SYMLINK: u32 = 6;
const MKNOD: u32 = 8;
const MKDIR: u32 = 9;
const UNLINK: u32 = 10;
const RMDIR: u32 = 11;
const RENAME: u32 = 12;
const LINK: u32 = 13;
const OPEN: u32 = 14;
const READ: u32 = 15;
const WRITE: u32 = 16;
const STATFS: u32 = 17;
const RELEASE: u32 = 18;
const FSYNC: u32 = 20;
const SETXATTR: u32 = 21;
const GETXATTR: u32 = 22;
const LISTXATTR: u32 = 23;
const REMOVEXATTR: u32 = 24;
const FLUSH: u32 = 25;
const OPENDIR: u32 = 27;
const READDIR: u32 = 28;
const RELEASEDIR: u32 = 29;
const FSYNCDIR: u32 = 30;
const ACCESS: u32 = 34;
const CREATE: u32 = 35;
const FALLOCATE: u32 = 43;
const READDIRPLUS: u32 = 44;
const RENAME2: u32 = 45;

// fuse_setattr_in.valid bits.
const FATTR_MODE: u32 = 1 << 0;
const FATTR_UID: u32 = 1 << 1;
const FATTR_GID: u32 = 1 << 2;
const FATTR_SIZE: u32 = 1 << 3;
const FATTR_ATIME: u32 = 1 << 4;
const FATTR_MTIME: u32 = 1 << 5;
const FATTR_ATIME_NOW: u32 = 1 << 7;
const FATTR_MTIME_NOW: u32 = 1 << 8;

/// fuse_write_in.write_flags: clear setuid/setgid (KILLPRIV_V2).
const FUSE_WRITE_KILL_SUIDGID: u32 = 1 << 2;
/// fuse_fsync_in.fsync_flags: fdatasync.
const FUSE_FSYNC_FDATASYNC: u32 = 1 << 0;

/// `sizeof(struct fuse_entry_out)`: node id, generation, entry and
/// attribute validity (seconds, then nanoseconds), `fuse_attr`.
const ENTRY_OUT: usize = 40 + ATTR;
/// `sizeof(struct fuse_attr)`.
const ATTR: usize = 88;

fn u32_at(b: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_ne_bytes(b.get(at..at + 4)?.try_into().ok()?))
}

fn u64_at(b: &[u8], at: usize) -> Option<u64> {
    Some(u64::from_ne_bytes(b.get(at..at + 8)?.try_into().ok()?))
}

fn put(b: &mut [u8], at: usize, v: &[u8]) {
    b[at..at + v.len()].copy_from_slice(v);
}

fn einval() -> Errno {
    Errno::from_i32(libc::EINVAL)
}

/// The `fuse_in_header` of a request.
#[derive(Debug, Clone, Copy)]
struct InHeader {
    opcode: u32,
    unique: u64,
    nodeid: u64,
    uid: u32,
    gid: u32,
    /// Bytes of request extensions at the end of the payload.
    extlen: usize,
}

impl InHeader {
    fn parse(b: &[u8]) -> Option<InHeader> {
        Some(InHeader {
            opcode: u32_at(b, 4)?,
            unique: u64_at(b, 8)?,
            nodeid: u64_at(b, 16)?,
            uid: u32_at(b, 24)?,
            gid: u32_at(b, 28)?,
            extlen: usize::from(u16::from_ne_bytes(b.get(36..38)?.try_into().ok()?)) * 8,
        })
    }

    fn ino(&self) -> InodeNo {
        InodeNo(self.nodeid)
    }

    fn caller(&self) -> Caller {
        Caller {
            uid: self.uid,
            gid: self.gid,
        }
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

    fn u32(&mut self, v: u32) -> Reply<()> {
        self.push(&v.to_ne_bytes())
    }

    fn u64(&mut self, v: u64) -> Reply<()> {
        self.push(&v.to_ne_bytes())
    }

    /// `struct fuse_attr`.
    fn attr(&mut self, a: &FileAttr) -> Reply<()> {
        let (at, an) = time(a.atime);
        let (mt, mn) = time(a.mtime);
        let (ct, cn) = time(a.ctime);
        for v in [a.ino.0, a.size, a.blocks, at as u64, mt as u64, ct as u64] {
            self.u64(v)?;
        }
        let mode = type_bits(a.kind) | u32::from(a.perm);
        for v in [
            an, mn, cn, mode, a.nlink, a.uid, a.gid, a.rdev, a.blksize, 0,
        ] {
            self.u32(v)?;
        }
        Ok(())
    }

    /// `struct fuse_entry_out` for `a` (node id `a.ino`, generation 0).
    fn entry(&mut self, a: &FileAttr) -> Reply<()> {
        self.u64(a.ino.0)?;
        self.u64(0)?;
        self.validity(TTL)?;
        self.validity(TTL)?;
        self.u32(TTL.subsec_nanos())?;
        self.u32(TTL.subsec_nanos())?;
        self.attr(a)
    }

    fn validity(&mut self, d: Duration) -> Reply<()> {
        self.u64(d.as_secs())
    }

    /// `struct fuse_open_out`.
    fn open(&mut self, h: FileHandle, flags: u32) -> Reply<()> {
        self.u64(h.0)?;
        self.u32(flags)?;
        self.u32(0)
    }

    /// One `struct fuse_dirent` (padded to 8 bytes) if it fits in `limit`.
    fn dirent(&mut self, limit: usize, ino: u64, off: u64, typ: u32, name: &OsStr) -> bool {
        let n = name.as_bytes();
        let size = (24 + n.len()).next_multiple_of(8);
        if self.len + size > limit.min(self.buf.len()) {
            return false;
        }
        let start = self.len;
        let ok = self.u64(ino).is_ok()
            && self.u64(off).is_ok()
            && self.u32(n.len() as u32).is_ok()
            && self.u32(typ).is_ok()
            && self.push(n).is_ok();
        // Zero padding (the buffer holds the request's bytes).
        self.buf[start + 24 + n.len()..start + size].fill(0);
        self.len = start + size;
        ok
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
pub(super) fn serve(
    ops: &Ops,
    header: &mut Header,
    payload: &mut Vec<u8>,
    owner_only: Option<u32>,
) {
    let h = InHeader::parse(&header.0);
    let n = header.payload_size().min(payload.len());
    let r = match h {
        Some(h) if owner_only.is_some_and(|owner| h.uid != owner) && !any_caller(h.opcode) => {
            Err(Errno::EACCES)
        }
        Some(h) => {
            let input = n.saturating_sub(h.extlen);
            let r = answer(ops, &h, header.op_in(), payload, input);
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
    let unique = h.map_or(0, |h| h.unique);
    put(&mut header.0, 0, &((16 + len) as u32).to_ne_bytes());
    put(&mut header.0, 4, &error.to_ne_bytes());
    put(&mut header.0, 8, &unique.to_ne_bytes());
    header.set_payload_size(len);
}

/// Requests served whoever the caller, as fuser serves them: those the
/// kernel may send without the caller's ids (on behalf of an open file).
fn any_caller(opcode: u32) -> bool {
    matches!(
        opcode,
        READ | READDIR | READDIRPLUS | WRITE | FSYNC | FSYNCDIR | RELEASE | RELEASEDIR
    )
}

/// The reply's payload length, or the errno to send.
fn answer(ops: &Ops, h: &InHeader, op: &[u8], payload: &mut Vec<u8>, input: usize) -> Reply<usize> {
    let arg32 = |at: usize| u32_at(op, at).ok_or_else(einval);
    let arg64 = |at: usize| u64_at(op, at).ok_or_else(einval);
    let fh = |at: usize| arg64(at).map(FileHandle);
    let i = h.ino();
    // Every reply is built after the request's arguments were used: they
    // share the payload buffer.
    let result: Done = {
        let args = &payload[..input];
        match h.opcode {
            LOOKUP => Done::Entry(ops.lookup(i, name(args)?.0)?),
            GETATTR => Done::Attr(ops.getattr(i)?),
            SETATTR => {
                let valid = arg32(0)?;
                let has = |bit: u32| valid & bit != 0;
                let time = |bit: u32, now: u32, s: usize, ns: usize| -> Reply<Option<SetTime>> {
                    Ok(if has(bit) {
                        Some(set_time(has(now), arg64(s)?, arg32(ns)?))
                    } else {
                        None
                    })
                };
                let a = SetAttr {
                    mode: has(FATTR_MODE).then(|| arg32(68)).transpose()?,
                    uid: has(FATTR_UID).then(|| arg32(76)).transpose()?,
                    gid: has(FATTR_GID).then(|| arg32(80)).transpose()?,
                    size: has(FATTR_SIZE).then(|| arg64(16)).transpose()?,
                    atime: time(FATTR_ATIME, FATTR_ATIME_NOW, 32, 56)?,
                    mtime: time(FATTR_MTIME, FATTR_MTIME_NOW, 40, 60)?,
                };
                Done::Attr(ops.setattr(h.uid, i, a)?)
            }
            READLINK => Done::Bytes(ops.readlink(i)?),
            SYMLINK => {
                let (link, rest) = name(args)?;
                let (target, _) = name(rest)?;
                Done::Entry(ops.symlink(i, link, target.as_bytes(), h.caller())?)
            }
            MKNOD => {
                let (mode, rdev) = (arg32(0)?, arg32(4)?);
                Done::Entry(ops.mknod(i, name(args)?.0, mode, rdev, h.caller())?)
            }
            MKDIR => Done::Entry(ops.mkdir(i, name(args)?.0, arg32(0)?, h.caller())?),
            UNLINK => Done::Empty(ops.unlink(i, name(args)?.0)?),
            RMDIR => Done::Empty(ops.rmdir(i, name(args)?.0)?),
            RENAME | RENAME2 => {
                let flags = if h.opcode == RENAME2 { arg32(8)? } else { 0 };
                let (old, rest) = name(args)?;
                let (new, _) = name(rest)?;
                Done::Empty(ops.rename(i, old, InodeNo(arg64(0)?), new, flags)?)
            }
            LINK => Done::Entry(ops.link(InodeNo(arg64(0)?), i, name(args)?.0)?),
            OPEN => {
                let (fh, flags) = ops.open(i, arg32(0)? as i32)?;
                Done::Open(fh, flags.bits())
            }
            READ => {
                // Decrypted in place: whole data units, so up to two units
                // (at most READ_SLACK bytes) more than asked for; the
                // buffer is never reallocated (the kernel holds its
                // address), since it is longer than that already.
                let size = arg32(16)?.min(MAX_REQUEST);
                let at = payload.as_ptr();
                let range = ops.read(fh(0)?, arg64(8)?, size, payload)?;
                assert_eq!(at, payload.as_ptr(), "the ring payload moved");
                Done::Read(range)
            }
            WRITE => {
                let size = arg32(16)? as usize;
                let data = args.get(..size).ok_or_else(einval)?;
                let kill = arg32(20)? & FUSE_WRITE_KILL_SUIDGID != 0;
                Done::Write(ops.write(i, fh(0)?, arg64(8)?, data, kill)?)
            }
            STATFS => Done::Statfs(ops.statfs()?),
            RELEASE => Done::Empty(ops.release(fh(0)?)?),
            FSYNC => {
                let datasync = arg32(8)? & FUSE_FSYNC_FDATASYNC != 0;
                Done::Empty(ops.fsync(fh(0)?, datasync)?)
            }
            SETXATTR => {
                // fuse_setxattr_in without FUSE_SETXATTR_EXT (never
                // negotiated): size, flags.
                let size = arg32(0)? as usize;
                let (xname, rest) = name(args)?;
                let value = rest.get(..size).ok_or_else(einval)?;
                Done::Empty(ops.setxattr(i, xname, value, arg32(4)? as i32)?)
            }
            GETXATTR => Done::Xattr(ops.getxattr(i, name(args)?.0, arg32(0)?)?),
            LISTXATTR => Done::Xattr(ops.listxattr(i, arg32(0)?)?),
            REMOVEXATTR => Done::Empty(ops.removexattr(i, name(args)?.0)?),
            FLUSH => Done::Empty(ops.flush()?),
            OPENDIR => Done::Open(ops.opendir(i)?, 0),
            READDIR | READDIRPLUS => Done::List {
                fh: fh(0)?,
                offset: arg64(8)?,
                size: arg32(16)? as usize,
                plus: h.opcode == READDIRPLUS,
            },
            RELEASEDIR => Done::Empty(ops.releasedir(fh(0)?)?),
            FSYNCDIR => Done::Empty(ops.fsyncdir(i)?),
            ACCESS => Done::Empty(ops.access()?),
            CREATE => {
                let (flags, mode) = (arg32(0)? as i32, arg32(4)?);
                let (a, fh, open) = ops.create(i, name(args)?.0, mode, flags, h.caller())?;
                Done::Create(a, fh, open.bits())
            }
            FALLOCATE => {
                let (off, len, mode) = (arg64(8)?, arg64(16)?, arg32(24)? as i32);
                Done::Empty(ops.fallocate(fh(0)?, off, len, mode)?)
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
    };
    match result {
        Done::Empty(()) => {}
        Done::Entry(a) => out.entry(&a)?,
        Done::Attr(a) => {
            out.validity(TTL)?;
            out.u32(TTL.subsec_nanos())?;
            out.u32(0)?;
            out.attr(&a)?;
        }
        Done::Bytes(v) => out.push(&v)?,
        Done::Open(fh, flags) => out.open(fh, flags)?,
        Done::Create(a, fh, flags) => {
            out.entry(&a)?;
            out.open(fh, flags)?;
        }
        Done::Read(range) => {
            if range.end > out.buf.len() {
                return Err(Errno::EIO);
            }
            out.buf.copy_within(range.clone(), 0);
            out.len = range.len();
        }
        Done::Write(n) => {
            out.u32(n)?;
            out.u32(0)?;
        }
        Done::Statfs(s) => {
            for v in [s.blocks, s.bfree, s.bavail, s.files, s.ffree] {
                out.u64(v)?;
            }
            for v in [s.bsize, s.namelen, s.frsize, 0, 0, 0, 0, 0, 0, 0] {
                out.u32(v)?;
            }
        }
        Done::Xattr(Xattr::Size(n)) => {
            out.u32(n)?;
            out.u32(0)?;
        }
        Done::Xattr(Xattr::Data(v)) => out.push(&v)?,
        Done::List {
            fh,
            offset,
            size,
            plus: false,
        } => ops.readdir(fh, offset, |ino, off, kind, name| {
            let typ = type_bits(ftype(kind)) >> 12;
            !out.dirent(size, ino, off, typ, name)
        })?,
        Done::List {
            fh,
            offset,
            size,
            plus: true,
        } => ops.readdirplus(fh, offset, |off, name, a| {
            let need = ENTRY_OUT + (24 + name.len()).next_multiple_of(8);
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

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use fscrypt::{KeyIdentifier, MasterKey, PolicyV2};
    use proptest::prelude::*;
    use test_support::TempDir;

    use super::*;
    use crate::fs::{EncryptedFs, FsOptions};
    use crate::stats::RequestStats;

    const ROOT: u64 = 1;

    fn ops(dir: &TempDir) -> Ops {
        let master = MasterKey::new(&[9u8; 64]).unwrap();
        let id: KeyIdentifier = master.identifier();
        let policy = PolicyV2::new_default(id);
        crate::create_root(dir.path(), &policy).unwrap();
        let fs = EncryptedFs::new(dir.path(), policy, Some(master), FsOptions::default()).unwrap();
        Ops::new(fs, Arc::new(RequestStats::new()))
    }

    /// A ring request: `fuse_in_header` (as root), the per-opcode header
    /// `op`, the further arguments `args`.
    struct Req {
        header: Header,
        payload: Vec<u8>,
    }

    fn req(opcode: u32, nodeid: u64, op: &[u8], args: &[u8]) -> Req {
        let mut header = Header::new();
        let h = &mut header.0;
        put(h, 0, &((40 + op.len() + args.len()) as u32).to_ne_bytes());
        put(h, 4, &opcode.to_ne_bytes());
        put(h, 8, &77u64.to_ne_bytes());
        put(h, 16, &nodeid.to_ne_bytes());
        put(h, IN_OUT, op);
        put(h, IN_OUT + OP_IN + 8, &5u64.to_ne_bytes());
        header.set_payload_size(args.len());
        let mut payload = vec![0xAAu8; 64 * 1024];
        payload[..args.len()].copy_from_slice(args);
        Req { header, payload }
    }

    /// Serves `r`: the errno (0 for success) and the reply's payload.
    fn send(ops: &Ops, mut r: Req) -> (i32, Vec<u8>) {
        serve(ops, &mut r.header, &mut r.payload, None);
        let h = &r.header.0;
        let len = r.header.payload_size();
        assert_eq!(
            u64_at(h, 8),
            Some(77),
            "the reply carries the request's unique"
        );
        assert_eq!(u32_at(h, 0), Some(16 + len as u32), "out header length");
        let error = i32::from_ne_bytes(h[4..8].try_into().unwrap());
        (-error, r.payload[..len].to_vec())
    }

    fn cat(parts: &[&[u8]]) -> Vec<u8> {
        parts.concat()
    }

    fn mode_of_entry(e: &[u8]) -> u32 {
        u32_at(e, 40 + 60).unwrap()
    }

    #[test]
    fn a_directory_made_listed_and_looked_up_through_ring_bytes() {
        let dir = TempDir::new("ring-wire");
        let ops = ops(&dir);
        // MKDIR "sub" (fuse_mkdir_in: mode, umask).
        let (err, e) = send(
            &ops,
            req(
                MKDIR,
                ROOT,
                &cat(&[&0o750u32.to_ne_bytes(), &0u32.to_ne_bytes()]),
                b"sub\0",
            ),
        );
        assert_eq!(err, 0);
        assert_eq!(e.len(), ENTRY_OUT);
        let node = u64_at(&e, 0).unwrap();
        assert!(node > ROOT);
        assert_eq!(u64_at(&e, 16), Some(TTL.as_secs()), "entry validity");
        assert_eq!(mode_of_entry(&e), libc::S_IFDIR | 0o750);
        // LOOKUP finds it, with the same node id; an absent name is a
        // negative entry (node id 0), not an error.
        let (err, e) = send(&ops, req(LOOKUP, ROOT, &[], b"sub\0"));
        assert_eq!((err, u64_at(&e, 0)), (0, Some(node)));
        let (err, e) = send(&ops, req(LOOKUP, ROOT, &[], b"nothing\0"));
        assert_eq!((err, u64_at(&e, 0), e.len()), (0, Some(0), ENTRY_OUT));
        // GETATTR: fuse_attr_out (validity, nsec, dummy, attr).
        let (err, a) = send(&ops, req(GETATTR, node, &[0; 16], &[]));
        assert_eq!((err, a.len()), (0, 16 + ATTR));
        assert_eq!(u64_at(&a, 16), Some(node), "attr.ino");
        assert_eq!(u32_at(&a, 16 + 60), Some(libc::S_IFDIR | 0o750));
        // OPENDIR, then READDIRPLUS of the root: ".", "..", "sub".
        let (err, o) = send(&ops, req(OPENDIR, ROOT, &[0; 8], &[]));
        assert_eq!((err, o.len()), (0, 16));
        let fh = u64_at(&o, 0).unwrap();
        let read_in = |size: u32| {
            cat(&[
                &fh.to_ne_bytes(),
                &0u64.to_ne_bytes(),
                &size.to_ne_bytes(),
                &[0; 20],
            ])
        };
        let (err, list) = send(&ops, req(READDIRPLUS, ROOT, &read_in(4096), &[]));
        assert_eq!(err, 0);
        let mut names = Vec::new();
        let mut at = 0;
        while at < list.len() {
            let d = &list[at + ENTRY_OUT..];
            let namelen = u32_at(d, 16).unwrap() as usize;
            names.push(String::from_utf8(d[24..24 + namelen].to_vec()).unwrap());
            if names.last().map(String::as_str) == Some("sub") {
                assert_eq!(u64_at(&list, at), Some(node), "entry node id");
                assert_eq!(u32_at(d, 20), Some(libc::S_IFDIR >> 12), "d_type");
            }
            at += ENTRY_OUT + (24 + namelen).next_multiple_of(8);
        }
        assert_eq!(at, list.len());
        assert_eq!(names, [".", "..", "sub"]);
        // A reply never exceeds the size the kernel asked for: room for
        // one entry only.
        let one = ENTRY_OUT + 32;
        let (err, list) = send(&ops, req(READDIRPLUS, ROOT, &read_in(one as u32), &[]));
        assert_eq!((err, list.len()), (0, one));
        // Plain READDIR of the same handle: fuse_dirent only.
        let (err, list) = send(&ops, req(READDIR, ROOT, &read_in(4096), &[]));
        assert_eq!((err, list.len()), (0, 3 * 32));
        let (err, _) = send(
            &ops,
            req(RELEASEDIR, ROOT, &cat(&[&fh.to_ne_bytes(), &[0; 16]]), &[]),
        );
        assert_eq!(err, 0);
    }

    #[test]
    fn a_file_created_written_and_read_through_ring_bytes() {
        let dir = TempDir::new("ring-wire-file");
        let ops = ops(&dir);
        // CREATE "f" O_RDWR 0640 (fuse_create_in: flags, mode, umask,
        // open_flags): entry_out then open_out.
        let create_in = cat(&[
            &(libc::O_RDWR as u32).to_ne_bytes(),
            &(libc::S_IFREG | 0o640).to_ne_bytes(),
            &[0; 8],
        ]);
        let (err, c) = send(&ops, req(CREATE, ROOT, &create_in, b"f\0"));
        assert_eq!((err, c.len()), (0, ENTRY_OUT + 16));
        let node = u64_at(&c, 0).unwrap();
        let fh = u64_at(&c, ENTRY_OUT).unwrap();
        assert_eq!(mode_of_entry(&c), libc::S_IFREG | 0o640);
        // WRITE 10,000 bytes at offset 3 (fuse_write_in: fh, offset, size,
        // write_flags, lock_owner, flags, padding).
        let data: Vec<u8> = (0..10_000u32).map(|i| (i % 251) as u8).collect();
        let write_in = cat(&[
            &fh.to_ne_bytes(),
            &3u64.to_ne_bytes(),
            &(data.len() as u32).to_ne_bytes(),
            &[0; 20],
        ]);
        let (err, w) = send(&ops, req(WRITE, node, &write_in, &data));
        assert_eq!((err, u32_at(&w, 0)), (0, Some(10_000)));
        // A WRITE whose size runs past its payload is refused.
        let mut short = write_in.clone();
        short[16..20].copy_from_slice(&20_000u32.to_ne_bytes());
        let (err, _) = send(&ops, req(WRITE, node, &short, &data));
        assert_eq!(err, libc::EINVAL);
        // READ it back (fuse_read_in).
        let read_in = cat(&[
            &fh.to_ne_bytes(),
            &0u64.to_ne_bytes(),
            &65_536u32.to_ne_bytes(),
            &[0; 20],
        ]);
        let (err, r) = send(&ops, req(READ, node, &read_in, &[]));
        assert_eq!((err, r.len()), (0, 10_003));
        assert_eq!(&r[..3], &[0, 0, 0]);
        assert_eq!(&r[3..], &data[..]);
        // SETATTR size 5 (FATTR_SIZE): the new size in the reply.
        let mut setattr_in = [0u8; 88];
        setattr_in[..4].copy_from_slice(&FATTR_SIZE.to_ne_bytes());
        setattr_in[16..24].copy_from_slice(&5u64.to_ne_bytes());
        let (err, a) = send(&ops, req(SETATTR, node, &setattr_in, &[]));
        assert_eq!((err, u64_at(&a, 16 + 8)), (0, Some(5)));
        // xattrs: SETXATTR (size, flags; name, value), GETXATTR of the
        // size, then of the value, LISTXATTR.
        let value = b"v4lue";
        let (err, _) = send(
            &ops,
            req(
                SETXATTR,
                node,
                &cat(&[&5u32.to_ne_bytes(), &[0; 4]]),
                &cat(&[b"user.k\0", value]),
            ),
        );
        assert_eq!(err, 0);
        let (err, s) = send(&ops, req(GETXATTR, node, &[0; 8], b"user.k\0"));
        assert_eq!((err, u32_at(&s, 0)), (0, Some(5)));
        let (err, v) = send(
            &ops,
            req(
                GETXATTR,
                node,
                &cat(&[&64u32.to_ne_bytes(), &[0; 4]]),
                b"user.k\0",
            ),
        );
        assert_eq!((err, v.as_slice()), (0, &value[..]));
        let (err, v) = send(
            &ops,
            req(
                GETXATTR,
                node,
                &cat(&[&2u32.to_ne_bytes(), &[0; 4]]),
                b"user.k\0",
            ),
        );
        assert_eq!((err, v.len()), (libc::ERANGE, 0));
        let (err, l) = send(
            &ops,
            req(LISTXATTR, node, &cat(&[&64u32.to_ne_bytes(), &[0; 4]]), &[]),
        );
        assert_eq!((err, l.as_slice()), (0, &b"user.k\0"[..]));
        // RELEASE, STATFS, then UNLINK; a LOOKUP then finds nothing.
        let (err, _) = send(
            &ops,
            req(RELEASE, node, &cat(&[&fh.to_ne_bytes(), &[0; 16]]), &[]),
        );
        assert_eq!(err, 0);
        let (err, s) = send(&ops, req(STATFS, ROOT, &[], &[]));
        assert_eq!((err, s.len()), (0, 80));
        assert_eq!(send(&ops, req(UNLINK, ROOT, &[], b"f\0")).0, 0);
        assert_eq!(
            u64_at(&send(&ops, req(LOOKUP, ROOT, &[], b"f\0")).1, 0),
            Some(0)
        );
    }

    #[test]
    fn malformed_requests_get_an_errno() {
        let dir = TempDir::new("ring-wire-bad");
        let ops = ops(&dir);
        // A name without its NUL.
        assert_eq!(send(&ops, req(LOOKUP, ROOT, &[], b"abc")).0, libc::EINVAL);
        // An opcode we do not serve (LSEEK), and one that does not exist.
        assert_eq!(send(&ops, req(46, ROOT, &[0; 24], &[])).0, libc::ENOSYS);
        assert_eq!(send(&ops, req(9999, ROOT, &[], &[])).0, libc::ENOSYS);
        // A payload length beyond the buffer is cut to the buffer (the
        // name still ends at its NUL: "x" is not there).
        let mut r = req(LOOKUP, ROOT, &[], b"x\0");
        r.header.set_payload_size(u32::MAX as usize);
        let (err, e) = send(&ops, r);
        assert_eq!((err, u64_at(&e, 0)), (0, Some(0)));
        // A name that fills the whole buffer without a NUL.
        let mut r = req(LOOKUP, ROOT, &[], &[]);
        r.header.set_payload_size(r.payload.len());
        assert_eq!(send(&ops, r).0, libc::EINVAL);
        // Extensions (total_extlen, 8-byte units) are not part of the name.
        let mut r = req(LOOKUP, ROOT, &[], &cat(&[b"x\0", &[0; 8]]));
        put(&mut r.header.0, 36, &1u16.to_ne_bytes());
        let (err, e) = send(&ops, r);
        assert_eq!((err, u64_at(&e, 0)), (0, Some(0)));
    }

    #[test]
    fn without_allow_other_only_the_owner_is_served() {
        let dir = TempDir::new("ring-wire-owner");
        let ops = ops(&dir);
        let as_user = |uid: u32, mut r: Req| {
            put(&mut r.header.0, 24, &uid.to_ne_bytes());
            serve(&ops, &mut r.header, &mut r.payload, Some(1000));
            i32::from_ne_bytes(r.header.0[4..8].try_into().unwrap())
        };
        let mkdir_in = cat(&[&0o755u32.to_ne_bytes(), &0u32.to_ne_bytes()]);
        assert_eq!(
            as_user(1001, req(MKDIR, ROOT, &mkdir_in, b"x\0")),
            -libc::EACCES
        );
        assert_eq!(as_user(0, req(LOOKUP, ROOT, &[], b"x\0")), -libc::EACCES);
        assert_eq!(as_user(1000, req(MKDIR, ROOT, &mkdir_in, b"x\0")), 0);
        // I/O on an open file is served whoever the kernel sends it for
        // (here: a bad handle, so EBADF, not EACCES).
        let read_in = cat(&[&99u64.to_ne_bytes(), &[0; 32]]);
        assert_eq!(as_user(1001, req(READ, ROOT, &read_in, &[])), -libc::EBADF);
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(256))]

        /// Whatever the header and payload hold, serving them answers
        /// with an errno or a reply and never panics.
        #[test]
        fn any_bytes_get_an_answer(
            opcode in 0u32..60,
            nodeid in prop_oneof![Just(1u64), any::<u64>()],
            op in proptest::collection::vec(any::<u8>(), 0..128),
            args in proptest::collection::vec(any::<u8>(), 0..600),
            claimed in prop_oneof![Just(None), any::<u32>().prop_map(Some)],
        ) {
            let dir = TempDir::new("ring-wire-prop");
            let ops = ops(&dir);
            let mut r = req(opcode, nodeid, &op, &args);
            if let Some(n) = claimed {
                r.header.set_payload_size(n as usize);
            }
            let _ = send(&ops, r);
        }
    }
}
