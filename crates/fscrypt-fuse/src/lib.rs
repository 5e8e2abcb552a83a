//! fscrypt-fuse (skeleton)
