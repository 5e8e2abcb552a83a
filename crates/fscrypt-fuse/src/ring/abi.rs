//! The FUSE ABI the io_uring transport reads and writes: the kernel's
//! structs of `include/uapi/linux/fuse.h` (protocol 7.42) under their
//! kernel names, `#[repr(C)]` with `zerocopy`'s derives, so that a request
//! is read and a reply written by field, never at a hand-computed byte
//! offset and without unsafe code. Each struct's size is asserted against
//! the kernel's at compile time. Integers are native-endian, as on
//! `/dev/fuse`.
//!
//! Only what `wire.rs` uses is here: the ring entry's header
//! (`fuse_uring_req_header`, `fuse_uring_ent_in_out`), the command area
//! (`fuse_uring_cmd_req`), the request and reply headers, the per-opcode
//! arguments of the opcodes served, and the reply structs.

#![allow(non_camel_case_types)]

use zerocopy::{FromBytes, Immutable, IntoBytes, KnownLayout};

/// Bytes of the in/out header area (`FUSE_URING_IN_OUT_HEADER_SZ`).
pub(super) const FUSE_URING_IN_OUT_HEADER_SZ: usize = 128;
/// Bytes of the per-opcode header area (`FUSE_URING_OP_IN_OUT_SZ`).
pub(super) const FUSE_URING_OP_IN_OUT_SZ: usize = 128;

/// Asserts at compile time that each type has the kernel's size.
macro_rules! sizes {
    ($($t:ty = $n:expr;)*) => {
        $(const _: () = assert!(std::mem::size_of::<$t>() == $n);)*
    };
}

/// `struct fuse_uring_ent_in_out`: after the two header areas of an entry.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, FromBytes, IntoBytes, KnownLayout, Immutable)]
pub(super) struct fuse_uring_ent_in_out {
    pub(super) flags: u64,
    /// The id the reply must be committed with.
    pub(super) commit_id: u64,
    /// Bytes of the payload buffer used by the request (then the reply).
    pub(super) payload_sz: u32,
    pub(super) padding: u32,
    pub(super) reserved: u64,
}

/// `struct fuse_uring_req_header`: an entry's header buffer, registered
/// with the kernel (its address stays fixed while a command is in flight).
#[repr(C)]
#[derive(Debug, Clone, FromBytes, IntoBytes, KnownLayout, Immutable)]
pub(super) struct fuse_uring_req_header {
    /// `fuse_in_header` of the request; `fuse_out_header` of the reply.
    pub(super) in_out: [u8; FUSE_URING_IN_OUT_HEADER_SZ],
    /// The request's per-opcode header (`fuse_read_in`, ...), if any.
    pub(super) op_in: [u8; FUSE_URING_OP_IN_OUT_SZ],
    pub(super) ring_ent_in_out: fuse_uring_ent_in_out,
}

/// `struct fuse_uring_cmd_req`: the io_uring command's 80-byte area.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, FromBytes, IntoBytes, KnownLayout, Immutable)]
pub(super) struct fuse_uring_cmd_req {
    pub(super) flags: u64,
    /// The entry's commit id (COMMIT_AND_FETCH).
    pub(super) commit_id: u64,
    /// The queue: the CPU it serves.
    pub(super) qid: u16,
    pub(super) padding: [u8; 6],
}

/// `struct fuse_in_header`.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, FromBytes, IntoBytes, KnownLayout, Immutable)]
pub(super) struct fuse_in_header {
    pub(super) len: u32,
    pub(super) opcode: u32,
    pub(super) unique: u64,
    pub(super) nodeid: u64,
    pub(super) uid: u32,
    pub(super) gid: u32,
    pub(super) pid: u32,
    /// Bytes of request extensions at the end of the payload, in 8-byte
    /// units.
    pub(super) total_extlen: u16,
    pub(super) padding: u16,
}

/// `struct fuse_out_header`.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, FromBytes, IntoBytes, KnownLayout, Immutable)]
pub(super) struct fuse_out_header {
    pub(super) len: u32,
    /// 0 or a negative errno.
    pub(super) error: i32,
    pub(super) unique: u64,
}

/// `struct fuse_setattr_in`.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, FromBytes, IntoBytes, KnownLayout, Immutable)]
pub(super) struct fuse_setattr_in {
    /// FATTR_* bits: which fields are set.
    pub(super) valid: u32,
    pub(super) padding: u32,
    pub(super) fh: u64,
    pub(super) size: u64,
    pub(super) lock_owner: u64,
    pub(super) atime: u64,
    pub(super) mtime: u64,
    pub(super) ctime: u64,
    pub(super) atimensec: u32,
    pub(super) mtimensec: u32,
    pub(super) ctimensec: u32,
    pub(super) mode: u32,
    pub(super) unused4: u32,
    pub(super) uid: u32,
    pub(super) gid: u32,
    pub(super) unused5: u32,
}

/// `struct fuse_access_in`.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, FromBytes, IntoBytes, KnownLayout, Immutable)]
pub(super) struct fuse_access_in {
    /// access(2)'s mode: R_OK 4, W_OK 2, X_OK 1 (0: exists).
    pub(super) mask: u32,
    pub(super) padding: u32,
}

/// `struct fuse_mknod_in`.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, FromBytes, IntoBytes, KnownLayout, Immutable)]
pub(super) struct fuse_mknod_in {
    pub(super) mode: u32,
    pub(super) rdev: u32,
    pub(super) umask: u32,
    pub(super) padding: u32,
}

/// `struct fuse_mkdir_in`.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, FromBytes, IntoBytes, KnownLayout, Immutable)]
pub(super) struct fuse_mkdir_in {
    pub(super) mode: u32,
    pub(super) umask: u32,
}

/// `struct fuse_rename2_in` (RENAME's `fuse_rename_in` is its first field).
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, FromBytes, IntoBytes, KnownLayout, Immutable)]
pub(super) struct fuse_rename2_in {
    pub(super) newdir: u64,
    pub(super) flags: u32,
    pub(super) padding: u32,
}

/// `struct fuse_rename_in`.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, FromBytes, IntoBytes, KnownLayout, Immutable)]
pub(super) struct fuse_rename_in {
    pub(super) newdir: u64,
}

/// `struct fuse_link_in`.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, FromBytes, IntoBytes, KnownLayout, Immutable)]
pub(super) struct fuse_link_in {
    pub(super) oldnodeid: u64,
}

/// `struct fuse_open_in` (OPEN, OPENDIR).
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, FromBytes, IntoBytes, KnownLayout, Immutable)]
pub(super) struct fuse_open_in {
    pub(super) flags: u32,
    pub(super) open_flags: u32,
}

/// `struct fuse_read_in` (READ, READDIR, READDIRPLUS).
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, FromBytes, IntoBytes, KnownLayout, Immutable)]
pub(super) struct fuse_read_in {
    pub(super) fh: u64,
    pub(super) offset: u64,
    pub(super) size: u32,
    pub(super) read_flags: u32,
    pub(super) lock_owner: u64,
    pub(super) flags: u32,
    pub(super) padding: u32,
}

/// `struct fuse_write_in`.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, FromBytes, IntoBytes, KnownLayout, Immutable)]
pub(super) struct fuse_write_in {
    pub(super) fh: u64,
    pub(super) offset: u64,
    pub(super) size: u32,
    pub(super) write_flags: u32,
    pub(super) lock_owner: u64,
    pub(super) flags: u32,
    pub(super) padding: u32,
}

/// `struct fuse_flush_in` (FLUSH).
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, FromBytes, IntoBytes, KnownLayout, Immutable)]
pub(super) struct fuse_flush_in {
    pub(super) fh: u64,
    pub(super) unused: u32,
    pub(super) padding: u32,
    pub(super) lock_owner: u64,
}

/// `struct fuse_release_in` (RELEASE, RELEASEDIR).
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, FromBytes, IntoBytes, KnownLayout, Immutable)]
pub(super) struct fuse_release_in {
    pub(super) fh: u64,
    pub(super) flags: u32,
    pub(super) release_flags: u32,
    pub(super) lock_owner: u64,
}

/// `struct fuse_fsync_in` (FSYNC, FSYNCDIR).
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, FromBytes, IntoBytes, KnownLayout, Immutable)]
pub(super) struct fuse_fsync_in {
    pub(super) fh: u64,
    pub(super) fsync_flags: u32,
    pub(super) padding: u32,
}

/// `struct fuse_setxattr_in`; without FUSE_SETXATTR_EXT (never
/// negotiated) the kernel sends only `size` and `flags`, and the rest of
/// the header area is zero.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, FromBytes, IntoBytes, KnownLayout, Immutable)]
pub(super) struct fuse_setxattr_in {
    pub(super) size: u32,
    pub(super) flags: u32,
    pub(super) setxattr_flags: u32,
    pub(super) padding: u32,
}

/// `struct fuse_getxattr_in` (GETXATTR, LISTXATTR).
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, FromBytes, IntoBytes, KnownLayout, Immutable)]
pub(super) struct fuse_getxattr_in {
    pub(super) size: u32,
    pub(super) padding: u32,
}

/// `struct fuse_create_in`.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, FromBytes, IntoBytes, KnownLayout, Immutable)]
pub(super) struct fuse_create_in {
    pub(super) flags: u32,
    pub(super) mode: u32,
    pub(super) umask: u32,
    pub(super) open_flags: u32,
}

/// `struct fuse_fallocate_in`.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, FromBytes, IntoBytes, KnownLayout, Immutable)]
pub(super) struct fuse_fallocate_in {
    pub(super) fh: u64,
    pub(super) offset: u64,
    pub(super) length: u64,
    pub(super) mode: u32,
    pub(super) padding: u32,
}

/// `struct fuse_attr`.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, FromBytes, IntoBytes, KnownLayout, Immutable)]
pub(super) struct fuse_attr {
    pub(super) ino: u64,
    pub(super) size: u64,
    pub(super) blocks: u64,
    pub(super) atime: u64,
    pub(super) mtime: u64,
    pub(super) ctime: u64,
    pub(super) atimensec: u32,
    pub(super) mtimensec: u32,
    pub(super) ctimensec: u32,
    /// File type and permission bits.
    pub(super) mode: u32,
    pub(super) nlink: u32,
    pub(super) uid: u32,
    pub(super) gid: u32,
    pub(super) rdev: u32,
    pub(super) blksize: u32,
    pub(super) flags: u32,
}

/// `struct fuse_entry_out`.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, FromBytes, IntoBytes, KnownLayout, Immutable)]
pub(super) struct fuse_entry_out {
    /// 0: a negative entry.
    pub(super) nodeid: u64,
    pub(super) generation: u64,
    pub(super) entry_valid: u64,
    pub(super) attr_valid: u64,
    pub(super) entry_valid_nsec: u32,
    pub(super) attr_valid_nsec: u32,
    pub(super) attr: fuse_attr,
}

/// `struct fuse_attr_out`.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, FromBytes, IntoBytes, KnownLayout, Immutable)]
pub(super) struct fuse_attr_out {
    pub(super) attr_valid: u64,
    pub(super) attr_valid_nsec: u32,
    pub(super) dummy: u32,
    pub(super) attr: fuse_attr,
}

/// `struct fuse_open_out` (OPEN, OPENDIR, and after the entry of CREATE).
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, FromBytes, IntoBytes, KnownLayout, Immutable)]
pub(super) struct fuse_open_out {
    pub(super) fh: u64,
    /// FOPEN_* bits.
    pub(super) open_flags: u32,
    pub(super) backing_id: i32,
}

/// `struct fuse_write_out`.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, FromBytes, IntoBytes, KnownLayout, Immutable)]
pub(super) struct fuse_write_out {
    pub(super) size: u32,
    pub(super) padding: u32,
}

/// `struct fuse_kstatfs` (the whole of `fuse_statfs_out`).
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, FromBytes, IntoBytes, KnownLayout, Immutable)]
pub(super) struct fuse_kstatfs {
    pub(super) blocks: u64,
    pub(super) bfree: u64,
    pub(super) bavail: u64,
    pub(super) files: u64,
    pub(super) ffree: u64,
    pub(super) bsize: u32,
    pub(super) namelen: u32,
    pub(super) frsize: u32,
    pub(super) padding: u32,
    pub(super) spare: [u32; 6],
}

/// `struct fuse_getxattr_out`: the size of a value or list.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, FromBytes, IntoBytes, KnownLayout, Immutable)]
pub(super) struct fuse_getxattr_out {
    pub(super) size: u32,
    pub(super) padding: u32,
}

/// `struct fuse_dirent` without its name (which follows, padded to 8
/// bytes).
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, FromBytes, IntoBytes, KnownLayout, Immutable)]
pub(super) struct fuse_dirent {
    pub(super) ino: u64,
    /// The offset of the next entry.
    pub(super) off: u64,
    pub(super) namelen: u32,
    /// `d_type`: the S_IFMT bits shifted right by 12.
    pub(super) typ: u32,
}

sizes! {
    fuse_uring_ent_in_out = 32;
    fuse_uring_req_header = 288;
    fuse_uring_cmd_req = 24;
    fuse_in_header = 40;
    fuse_out_header = 16;
    fuse_setattr_in = 88;
    fuse_mknod_in = 16;
    fuse_mkdir_in = 8;
    fuse_rename2_in = 16;
    fuse_rename_in = 8;
    fuse_link_in = 8;
    fuse_open_in = 8;
    fuse_read_in = 40;
    fuse_write_in = 40;
    fuse_release_in = 24;
    fuse_fsync_in = 16;
    fuse_setxattr_in = 16;
    fuse_getxattr_in = 8;
    fuse_create_in = 16;
    fuse_fallocate_in = 32;
    fuse_attr = 88;
    fuse_entry_out = 128;
    fuse_attr_out = 104;
    fuse_open_out = 16;
    fuse_write_out = 8;
    fuse_kstatfs = 80;
    fuse_getxattr_out = 8;
    fuse_dirent = 24;
}

// Opcodes (enum fuse_opcode).
pub(super) const FUSE_LOOKUP: u32 = 1;
pub(super) const FUSE_GETATTR: u32 = 3;
pub(super) const FUSE_SETATTR: u32 = 4;
pub(super) const FUSE_READLINK: u32 = 5;
pub(super) const FUSE_SYMLINK: u32 = 6;
pub(super) const FUSE_MKNOD: u32 = 8;
pub(super) const FUSE_MKDIR: u32 = 9;
pub(super) const FUSE_UNLINK: u32 = 10;
pub(super) const FUSE_RMDIR: u32 = 11;
pub(super) const FUSE_RENAME: u32 = 12;
pub(super) const FUSE_LINK: u32 = 13;
pub(super) const FUSE_OPEN: u32 = 14;
pub(super) const FUSE_READ: u32 = 15;
pub(super) const FUSE_WRITE: u32 = 16;
pub(super) const FUSE_STATFS: u32 = 17;
pub(super) const FUSE_RELEASE: u32 = 18;
pub(super) const FUSE_FSYNC: u32 = 20;
pub(super) const FUSE_SETXATTR: u32 = 21;
pub(super) const FUSE_GETXATTR: u32 = 22;
pub(super) const FUSE_LISTXATTR: u32 = 23;
pub(super) const FUSE_REMOVEXATTR: u32 = 24;
pub(super) const FUSE_FLUSH: u32 = 25;
pub(super) const FUSE_OPENDIR: u32 = 27;
pub(super) const FUSE_READDIR: u32 = 28;
pub(super) const FUSE_RELEASEDIR: u32 = 29;
pub(super) const FUSE_FSYNCDIR: u32 = 30;
pub(super) const FUSE_ACCESS: u32 = 34;
pub(super) const FUSE_CREATE: u32 = 35;
pub(super) const FUSE_FALLOCATE: u32 = 43;
pub(super) const FUSE_READDIRPLUS: u32 = 44;
pub(super) const FUSE_RENAME2: u32 = 45;

// fuse_setattr_in.valid bits.
pub(super) const FATTR_MODE: u32 = 1 << 0;
pub(super) const FATTR_UID: u32 = 1 << 1;
pub(super) const FATTR_GID: u32 = 1 << 2;
pub(super) const FATTR_SIZE: u32 = 1 << 3;
pub(super) const FATTR_ATIME: u32 = 1 << 4;
pub(super) const FATTR_MTIME: u32 = 1 << 5;
pub(super) const FATTR_FH: u32 = 1 << 6;
pub(super) const FATTR_ATIME_NOW: u32 = 1 << 7;
pub(super) const FATTR_MTIME_NOW: u32 = 1 << 8;

/// fuse_write_in.write_flags: clear setuid/setgid (KILLPRIV_V2).
pub(super) const FUSE_WRITE_KILL_SUIDGID: u32 = 1 << 2;
/// fuse_fsync_in.fsync_flags: fdatasync.
pub(super) const FUSE_FSYNC_FDATASYNC: u32 = 1 << 0;
