//! fscrypt-linux (skeleton)
