//! fscrypt-linux: the Linux kernel side of fscrypt-rs.
//!
//! * [`uapi`] — verbatim `#[repr(C)]` mirror of `include/uapi/linux/fscrypt.h`
//!   and `include/uapi/linux/blk-crypto.h`.
//! * [`ioctl`] — the raw calls (the only `unsafe` in this crate).
//! * [`error`] — errno → explanation, in one place.
//! * [`keyring`], [`policy`], [`blkcrypto`] — safe wrappers using the types of
//!   the `fscrypt` crate.
//! * [`proc_crypto`] — which kernel Crypto API driver fscrypt would get.
//! * [`mountinfo`] — which block device and filesystem hold a path.
//! * [`holders`] — the `/proc` scan: which processes hold files, working
//!   directories or roots below a path or on a set of inodes.
//! * [`verify`] — recompute every encrypted object with `fscrypt` and compare
//!   with the kernel's on-disk bytes (spec §11.2).
//!
//! Spec references are to `docs/spec/FSCRYPT-FORMAT.md`.

pub mod blkcrypto;
pub mod error;
pub mod holders;
pub mod ioctl;
pub mod keyring;
pub mod mountinfo;
pub mod policy;
pub mod proc_crypto;
pub mod uapi;
pub mod verify;

pub use error::{ErrnoContext, Error, Operation};
