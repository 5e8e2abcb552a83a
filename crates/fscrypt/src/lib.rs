//! The Linux fscrypt format, bit-exact with the kernel: modes, policies,
//! contexts, the v1 and v2 key hierarchies, IVs, file contents, filenames,
//! symlink targets, no-key names and casefold dirhash.
//!
//! Specification: `docs/spec/FSCRYPT-FORMAT.md` (cited as "spec §N").
//! Modules mirror fs/crypto in the kernel:
//!
//! | module | owns | kernel |
//! |--------|------|--------|
//! | [`mode`] | the mode table | `fscrypt_modes[]` (keysetup.c) |
//! | [`policy`] | uapi policies, flags, validation (§3) | policy.c |
//! | [`context`] | on-disk contexts (§3.2) | policy.c |
//! | [`hkdf`] | `"fscrypt\0"+ctx` HKDF expansion (§4.3) | hkdf.c |
//! | [`keysetup`] | master keys, identifiers, per-inode keys (§4) | keysetup.c, keyring.c |
//! | [`keysetup_v1`] | AES-128-ECB KDF, v1 DIRECT_KEY (§4.2) | keysetup_v1.c |
//! | [`iv`] | IVs for every flag combination (§5) | crypto.c |
//! | [`contents`] | data units in place (§6) | crypto.c |
//! | [`fname`] | filename padding and en/decryption (§7) | fname.c |
//! | [`symlink`] | symlink blobs (§7.4) | hooks.c |
//! | [`base64url`] | unpadded base64url, kernel and canonical decoding (§8.1) | fname.c |
//! | [`nokey`] | no-key names (§8) | fname.c |
//! | [`hooks`] | what filesystems call: lookup/create names, presented entries, symlink targets, link/rename checks | hooks.c, fname.c |
//! | [`dirhash`] | casefold SipHash (§9) | fname.c, ext4/f2fs hash.c |
//! | [`hw_wrapped`] | xfstests hardware-KDF model (§4.6) | — |
//! | [`crypt_util`] | `fscrypt-rs crypt` (xfstests fscrypt-crypt-util) | — |
//!
//! # Notes for users of the agreed API (fuse, vault, linux)
//!
//! - [`Policy::parse`] checks the layout *and* validates (spec §3.4);
//!   [`Policy::parse_unvalidated`] checks the layout only.
//!   [`Context::parse`] checks the layout only (the kernel's "recognized");
//!   [`Context::validate`] / [`InodeCrypt::new`] decide "supported".
//! - [`Context::to_bytes`] returns a [`ContextBytes`] stack buffer that derefs
//!   to `[u8]` (28 or 40 bytes); [`Policy::to_bytes`] returns a `Vec<u8>`.
//! - [`InodeCrypt::new`] validates the policy for `fs_block_size`, checks the
//!   v2 key identifier against the master key ([`KeyError::WrongKey`]) and the
//!   length rule (spec §4.1), and derives or fetches the key. Build one per
//!   inode and keep it: everything after that is `&self` and allocation-free.
//! - Filename methods need a `Directory`/`Symlink` [`InodeCrypt`], contents
//!   methods a `Regular` one. Directory no-key names: [`nokey::encode`] with the
//!   filesystem's dirhash words (0/0 for linear directories and symlinks);
//!   lookups: [`NoKeyName::decode`] then [`NoKeyName::matches`] per entry.
//! - [`InodeCrypt::encrypt_symlink`]'s `max_len` is the largest on-disk blob
//!   (ext4: the block size); the ciphertext gets `max_len − 3` bytes.
//! - Casefolded v2 directories: [`InodeCrypt::dirhash`] over the already
//!   casefolded name, then [`dirhash::ext4_hash`] / [`dirhash::f2fs_hash`].
//! - Errors map to errno per the variant docs in [`error`].
//!
//! Pure: no I/O, no libc, no global state beyond the crypto provider
//! registry. Bad input yields a typed [`Error`], never a panic. Keys are
//! zeroized and never printed. Hot paths (one data unit, one filename with an
//! [`InodeCrypt`] prepared) do not allocate.
//!
//! ```
//! use fscrypt::{Context, FileType, InodeCrypt, InodeParams, MasterKey, Policy, PolicyV2};
//! let master = MasterKey::new(&[0x42; 64]).unwrap();
//! let policy = Policy::V2(PolicyV2::new_default(master.identifier()));
//! let ctx = Context::new(&policy, [7; 16]);
//! let params = InodeParams { file_type: FileType::Regular, ino: 12, fs_uuid: [0; 16], fs_block_size: 4096 };
//! let file = InodeCrypt::new(&master, &ctx, &params).unwrap();
//! let mut block = vec![0u8; 4096];
//! file.encrypt_data_units(0, &mut block).unwrap();
//! file.decrypt_data_units(0, &mut block).unwrap();
//! assert!(block.iter().all(|&b| b == 0));
//! ```

#![forbid(unsafe_code)]

pub mod base64url;
pub mod contents;
pub mod context;
pub mod crypt_util;
pub mod dirhash;
pub mod error;
pub mod fname;
pub mod hkdf;
pub mod hooks;
pub mod hw_wrapped;
pub mod iv;
pub mod keysetup;
pub mod keysetup_v1;
pub mod mode;
pub mod nokey;
pub mod policy;
pub mod symlink;

pub use context::{Context, ContextBytes, ContextV1, ContextV2, NONCE_SIZE};
pub use dirhash::DirHashKey;
pub use error::{
    Base64Error, ContentsError, Error, HookError, KeyError, NameError, NoKeyError, PolicyError,
};
pub use fname::{FnameBuf, NAME_MAX};
pub use hkdf::HkdfContext;
pub use iv::{Iv, IvScheme};
pub use keysetup::{FileType, InodeCrypt, InodeParams, MasterKey, MasterKeyKind};
pub use mode::{EncryptionMode, MODES, ModeInfo, ModeRole};
pub use nokey::{NoKeyName, NoKeyNameBuf};
pub use policy::{KeyDescriptor, KeyIdentifier, Policy, PolicyFlags, PolicyV1, PolicyV2};
