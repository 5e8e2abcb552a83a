//! fscrypt-linux (skeleton)

pub mod proc_crypto;
