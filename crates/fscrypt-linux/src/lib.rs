//! fscrypt-linux: the Linux kernel side of fscrypt-rs.
//!
//! * [`uapi`] — verbatim `#[repr(C)]` mirror of `include/uapi/linux/fscrypt.h`
//!   and `include/uapi/linux/blk-crypto.h`.
//! * [`ioctl`] — the raw calls (with [`pam_auth`], the only `unsafe` in
//!   this crate).
//! * [`error`] — errno → explanation, in one place.
//! * [`keyring`], [`policy`], [`blkcrypto`] — safe wrappers using the types of
//!   the `fscrypt` crate.
//! * [`loopfs`] — scratch loop-device ext4 filesystems for tests and demos.
//! * [`proc_crypto`] — which kernel Crypto API driver fscrypt would get.
//! * [`convert`] — in-place, resumable conversion of a non-empty directory
//!   to kernel fscrypt (copy, verify, exchange, remove).
//! * [`mountinfo`] — which block device and filesystem hold a path.
//! * [`ext4`] — a read-only ext4 reader (superblock, inodes, extents,
//!   directories, xattrs) used to see what the kernel stored on disk.
//! * [`image`] — offline access to kernel-encrypted ext4 images: list,
//!   read and extract with the keys given, no kernel involved.
//! * [`pam_auth`] — checking a login password through PAM (`dlopen`ed).
//! * [`verify`] — recompute every encrypted object with `fscrypt` and compare
//!   with the kernel's on-disk bytes (spec §11.2).
//!
//! Spec references are to `docs/spec/FSCRYPT-FORMAT.md`.

pub mod blkcrypto;
pub mod convert;
pub mod error;
pub mod ext4;
pub mod image;
pub mod ioctl;
pub mod keyring;
pub mod loopfs;
pub mod mountinfo;
pub mod pam_auth;
pub mod policy;
pub mod proc_crypto;
pub mod uapi;
pub mod verify;

pub use error::{ErrnoContext, Error, Operation};
