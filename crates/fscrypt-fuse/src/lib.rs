//! fscrypt-fuse (skeleton)
pub mod vault;
