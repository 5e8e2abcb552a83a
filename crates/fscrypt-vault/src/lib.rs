//! fscrypt-vault: the fscrypt-rs vault without FUSE — its on-disk format
//! (the config file with the root policy and the wrapped master key, the
//! backing layout and header of every object, the filesystem root) and
//! unlocking (passphrase, key file or recovery key → master key), and
//! changing the protectors without touching the data.
//!
//! `fscrypt-rs init`, the vault tests and offline tools use it directly;
//! the filesystem (`fscrypt-fuse`) builds on it. The format is documented
//! in `docs/vault-format.md` ("Vault configuration and protectors" for the
//! config, §1–§9 for the backing layout).
//!
//! | module | owns |
//! |--------|------|
//! | [`config`] | the config file: JSON layout, parsing into fixed-size values and validation, serialization, the bounded read and the atomic never-overwriting write |
//! | [`conflict`] | conflict copies of sync tools (Syncthing, Nextcloud/ownCloud, Dropbox): finding a marker in a backing name and putting it into a plaintext name |
//! | [`protector`] | the passphrase (Argon2id), key-file and recovery-key (HKDF-SHA512) protectors: secret → 32-byte wrapping key; [`RecoveryKey`] and its written form |
//! | [`keys`] | the bottom of the protector layer: secret sizes, the Argon2id override's name, [`ProtectorError`] and [`RecoveryKeyError`] (wrap, cost and protector build on it, one way) |
//! | [`cost`] | Argon2id parameters: bounds, the test override ([`cost::ARGON2_ENV`]), calibration on this machine |
//! | [`wrap`] | key wrapping: XChaCha20-Poly1305 with the root policy as associated data |
//! | [`unlock`] | [`Vault`]: opening a config and unwrapping the master key with a [`Secret`] (config → master key, identifier checked) |
//! | [`edit`] | adding, removing and changing protectors ([`NewSecret`]), committed atomically under the config lock |
//! | [`init`] | [`Vault::init`]: a new vault (master key, policy, protectors, root, config as the commit point) |
//! | [`layout`] | the backing layout: object headers, backing names and long names, symlink encoding, the symlink store object |
//! | [`integrity`] | format 3 (authenticated; bytes in `docs/vault-format.md` §4b): its keys, MAC domains, unit and tag-slot placement, length hints and file records — bytes only, not yet used by a mount |
//! | [`reverse`] | reverse mode: the bytes of a format 3 vault computed from a plaintext directory (derived nonces, names, file views with tags computed on the fly), exclusion patterns |
//! | [`root`] | [`create_root`]: the root directory's metadata file |
//! | [`lock`] | [`VaultLock`]: the `flock` on the backing root held by the mounted daemon and by `fsck --repair` |
//! | [`fsck`] | checking and repairing a vault offline |
//! | [`error`] | [`Error`] (creating, opening, unlocking) and [`Corruption`] (bytes that break the layout) |
//!
//! Every primitive comes from `fscrypt-crypto` (Argon2id, the AEAD,
//! HKDF-SHA512, SHA-256, random bytes) and every format decision from
//! `fscrypt` (policies, contexts, key identifiers); this crate holds no
//! cryptography of its own. Secrets stay in [`fscrypt_crypto::SecretBuf`]
//! or zeroizing buffers.
//!
//! ```no_run
//! use fscrypt_vault::Vault;
//! # fn main() -> Result<(), fscrypt_vault::Error> {
//! let vault = Vault::open("/srv/cipher".as_ref())?;
//! let master = vault.unlock_with_key_file(&std::fs::read("/srv/key").unwrap())?;
//! assert_eq!(master.identifier(), vault.key_identifier());
//! # Ok(()) }
//! ```

#![forbid(unsafe_code)]

pub mod config;
pub mod conflict;
pub mod cost;
pub mod edit;
pub mod error;
pub mod fsck;
pub mod init;
pub mod integrity;
pub mod keys;
pub mod layout;
pub mod leftovers;
pub mod lock;
pub mod protector;
pub mod reverse;
pub mod root;
pub mod unlock;
pub mod usage;
pub mod wrap;

pub use config::{CONFIG_NAME, Protector, ProtectorKind};
pub use cost::{ARGON2_TARGET, Argon2Params};
pub use edit::NewSecret;
pub use error::{Corruption, Error};
pub use init::{Argon2Choice, InitOptions, InitReport, SealedInit};
pub use lock::{LockError, VaultLock};
pub use protector::{ProtectorError, RecoveryKey, RecoveryKeyError};
pub use root::{create_root, create_root_with, read_format};
pub use unlock::{FS_BLOCK_SIZE, Secret, Vault};

#[cfg(test)]
mod tests;
