//! fscrypt (skeleton)
