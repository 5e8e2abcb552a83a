//! fscrypt-fuse: a userspace encrypted filesystem (FUSE) that stores a
//! directory tree in the fscrypt format inside any backing directory (the
//! vault), and the read-only FUSE view of a kernel-encrypted ext4 image,
//! both served by one FUSE engine.
//!
//! Every plaintext directory, regular file and symlink of a vault is one
//! backing entry; names are encrypted with the parent directory's key
//! exactly as the kernel does and stored base64url-encoded; file contents
//! are encrypted per data unit with the kernel's keys and IVs after a
//! 4096-byte header holding the file's context and size. The format is
//! specified in `docs/vault-format.md`.
//!
//! | module | concern |
//! |---|---|
//! | `backend.rs` | [`Backend`]: what a filesystem answers to be served (vault, image, reverse view) |
//! | `ops.rs` | the engine: what each request does for any back-end (stats, errno, one log line per failure) |
//! | `fuse.rs` | transport over `/dev/fuse`: the `fuser` adapter, INIT |
//! | `ring/` | transport over io_uring (Linux 6.14+): per-CPU queues, the FUSE ABI as structs |
//! | `error.rs` | [`Error`] and its one errno table ([`Error::errno`]) |
//! | `stats.rs` | request counters per opcode ([`RequestStats`]) |
//! | `fs/` | the vault back-end, [`EncryptedFs`], one module per concern (testable without FUSE) |
//! | `inodes.rs`, `handles.rs` | the vault's inode and handle tables and their locks |
//! | `crypt.rs` | the vault's seam to the `fscrypt` crate |
//! | `image.rs` | the image back-end, [`image::ImageFs`], and `image mount` |
//! | `reverse.rs` | the reverse-mode back-end, [`reverse::ReverseFs`]: a read-only view of a plaintext directory as its format 3 vault (issue 24) |
//! | `mount/` | mounting any back-end: session, `fusermount3`, mount point, read-ahead, unmount |
//! | `busy.rs` | which processes keep a mount busy |
//!
//! The bytes of the vault format ([`layout`]), the root ([`create_root`]),
//! the vault configuration and key protectors ([`vault`]) and the vault
//! lock are the `fscrypt-vault` crate, re-exported here.

// Only `ring/` (io_uring submissions that point at its buffers) may use
// unsafe code, and says why at each use.
#![deny(unsafe_code)]

mod backend;
pub mod busy;
mod crypt;
mod error;
mod fs;
mod fuse;
mod handles;
pub mod image;
mod inodes;
mod mount;
mod ops;
mod prune;
pub mod reverse;
mod ring;
pub mod stats;

pub use crate::backend::Backend;
pub use crate::error::{Corruption, Error, Result, WrongType};
pub use crate::fs::{Caller, EncryptedFs, FsOptions, FsStats, SetAttr, SetTime, Sharing};
pub use crate::handles::FileHandle;
pub use crate::inodes::{
    INODE_STATE_BYTES, InodeNo, Kind, ROOT, inode_table_slots, live_inodes, set_heap_trimmer,
};
pub use crate::mount::{
    BackgroundMount, DEFAULT_INODE_LIMIT, MountConfig, MountPoint, backing_read_only, mount,
    mount_background, mount_on, parent_risk, unmount,
};
pub use crate::stats::{Op, RequestStats, StatsSnapshot};
/// The vault: config, protectors, unlocking (the `fscrypt-vault` crate).
pub use fscrypt_vault as vault;
/// The backing layout: headers, names, symlinks (`fscrypt_vault::layout`).
pub use fscrypt_vault::layout;
/// The vault lock, held by the daemon while it serves a vault
/// (`fscrypt_vault::lock`, shared with `fsck --repair`).
pub use fscrypt_vault::{LockError, VaultLock};
pub use fscrypt_vault::{create_root, create_root_with};
