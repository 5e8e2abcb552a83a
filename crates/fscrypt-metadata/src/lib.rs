//! google/fscrypt 0.3.x metadata, byte-compatible with the Go tool.
//!
//! * [`proto`]: the protobuf messages of `MOUNT/.fscrypt/{policies,protectors}/`
//!   (`PolicyData`, `ProtectorData`, `WrappedKeyData`, `HashingCosts`,
//!   `EncryptionOptions`), with the same field numbers, and their validity
//!   checks;
//! * [`keys`]: key wrapping (AES-256-CTR + HMAC-SHA256 under keys stretched
//!   with HKDF-SHA256), Argon2id passphrase hashing with the stored costs and
//!   salt, protector and policy descriptors;
//! * [`config`]: the global JSON config (`/etc/fscrypt.conf`, or the file
//!   named by `FSCRYPT_CONF`);
//! * [`store`]: a filesystem's metadata directory (setup modes, atomic
//!   writes, reads that refuse symlinks and oversized or corrupt files);
//! * [`links`]: `protectors/<d>.link` files naming the filesystem (by UUID,
//!   then mount point) that holds a protector;
//! * [`login`]: login (`pam_passphrase`) protectors, kept on the root
//!   filesystem, and the policies they protect;
//! * [`trust`]: whose metadata is believed (owner checks, google/fscrypt's
//!   `allow_cross_user_metadata`), applied by every [`store::Store`] read;
//! * [`recovery`]: recovery passphrases for directories whose login
//!   protector is on another filesystem.
//!
//! The facts (formats, constants, algorithms) were learnt from google/fscrypt's
//! sources (Apache-2.0); no code was copied.

pub mod actions;
pub mod config;
pub mod error;
pub mod keys;
pub mod links;
pub mod login;
pub mod proto;
pub mod recovery;
pub mod store;
pub mod trust;

pub use error::Error;
