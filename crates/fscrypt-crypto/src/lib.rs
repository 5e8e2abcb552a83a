//! fscrypt-crypto (skeleton)
