//! Master keys, key identifiers, and per-inode key setup (spec §4).
//!
//! Kernel: fs/crypto/keysetup.c (`fscrypt_setup_encryption_info()`,
//! `setup_per_mode_enc_key()`, `fscrypt_derive_dirhash_key()`,
//! `fscrypt_hash_inode_number()`), fs/crypto/keyring.c (identifiers).
//!
//! [`MasterKey`] owns the raw key (zeroized), its HKDF PRK, its identifier,
//! and a cache of the keys the kernel shares between inodes (DIRECT_KEY and
//! IV_INO_LBLK_* per-mode keys, the inode-hash key). [`InodeCrypt`] is the
//! per-inode state (kernel `struct fscrypt_inode_info`): the prepared key,
//! the IV scheme and the data unit size. Contents, filename and symlink
//! operations on it live in `contents.rs`, `fname.rs` and `symlink.rs`.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};

use fscrypt_crypto::{PreparedKey, SecretBox, SecretBuf};
use zeroize::Zeroizing;

use crate::context::{Context, NONCE_SIZE};
use crate::dirhash::DirHashKey;
use crate::error::{ContentsError, Error, KeyError};
use crate::hkdf::{FscryptHkdf, HkdfContext};
use crate::iv::IvScheme;
use crate::keysetup_v1;
use crate::mode::{EncryptionMode, MAX_MODE_KEY_SIZE, ModeInfo};
use crate::policy::{KEY_IDENTIFIER_SIZE, KeyDescriptor, KeyIdentifier, Policy};

/// Smallest raw master key in bytes (`FSCRYPT_MIN_KEY_SIZE`).
pub const MIN_MASTER_KEY_SIZE: usize = 16;
/// Largest raw master key in bytes (`FSCRYPT_MAX_KEY_SIZE`).
pub const MAX_MASTER_KEY_SIZE: usize = 64;

/// Which kind of secret a [`MasterKey`] holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MasterKeyKind {
    /// A raw key given to `FS_IOC_ADD_ENCRYPTION_KEY` (16..=64 bytes).
    Raw,
    /// The 32-byte software secret of a hardware-wrapped key (spec §4.6):
    /// identifier via HKDF context 8, no software contents keys.
    HwWrappedSoftwareSecret,
}

/// What a cached shared key is (kernel: `mk_direct_keys`,
/// `mk_iv_ino_lblk_64_keys`, `mk_iv_ino_lblk_32_keys`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum SharedKind {
    V1Direct,
    V2Direct,
    IvInoLblk64,
    IvInoLblk32,
}

/// A master key (spec §4.1): 16..=64 random bytes in a
/// [`SecretBuf`] (out of core dumps, locked where allowed, zeroized on drop),
/// with a redacted `Debug`. Not `Clone`.
///
/// Caches its HKDF PRK, its v2 key identifier, the inode-hash key, and every
/// per-mode key the kernel shares between inodes (DIRECT_KEY, IV_INO_LBLK_64,
/// IV_INO_LBLK_32), so building many [`InodeCrypt`]s under one key derives
/// each shared key once. `Send + Sync`; the caches are behind a `Mutex` /
/// `OnceLock` held only while looking up or inserting.
pub struct MasterKey {
    /// The raw key, in pages excluded from core dumps and locked in memory
    /// where the system allows.
    secret: SecretBuf,
    kind: MasterKeyKind,
    hkdf: FscryptHkdf,
    identifier: KeyIdentifier,
    ino_hash_key: OnceLock<SecretBox<[u8; 16]>>,
    /// (kind, mode, fs UUID or zeros) → prepared key. Locked only for the
    /// lookup/insert; derivation happens outside the lock.
    shared: Mutex<SharedKeys>,
}

/// (kind, mode number, filesystem UUID or zeros) → prepared shared key.
type SharedKeys = HashMap<(SharedKind, u8, [u8; 16]), Arc<PreparedKey>>;

impl core::fmt::Debug for MasterKey {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("MasterKey")
            .field("len", &self.secret.len())
            .field("kind", &self.kind)
            .field("identifier", &self.identifier)
            .finish_non_exhaustive()
    }
}

impl MasterKey {
    /// Wraps a raw master key and computes its HKDF PRK and v2 identifier.
    ///
    /// # Errors
    /// [`KeyError::BadMasterKeySize`] unless 16..=64 bytes (spec §4.1).
    pub fn new(raw: &[u8]) -> Result<MasterKey, KeyError> {
        if !(MIN_MASTER_KEY_SIZE..=MAX_MASTER_KEY_SIZE).contains(&raw.len()) {
            return Err(KeyError::BadMasterKeySize(raw.len()));
        }
        Ok(Self::build(raw, MasterKeyKind::Raw))
    }

    /// A master key from the 32-byte software secret of a hardware-wrapped key
    /// (spec §4.6). Its identifier uses HKDF context 8; it can derive filename
    /// keys, hash keys and dirhash keys, but not contents keys (those live in
    /// the inline-encryption hardware: see `hw_wrapped.rs` for the xfstests
    /// software model).
    pub fn from_hw_wrapped_software_secret(sw_secret: &[u8; 32]) -> MasterKey {
        Self::build(sw_secret, MasterKeyKind::HwWrappedSoftwareSecret)
    }

    fn build(raw: &[u8], kind: MasterKeyKind) -> MasterKey {
        let hkdf = FscryptHkdf::new(raw);
        let ctx = match kind {
            MasterKeyKind::Raw => HkdfContext::KeyIdentifierForRawKey,
            MasterKeyKind::HwWrappedSoftwareSecret => HkdfContext::KeyIdentifierForHwWrappedKey,
        };
        let mut id = [0u8; KEY_IDENTIFIER_SIZE];
        // 16 bytes is always within HKDF's output limit.
        let _ = hkdf.expand(ctx, &[], &mut id);
        MasterKey {
            secret: SecretBuf::from_slice(raw),
            kind,
            hkdf,
            identifier: KeyIdentifier(id),
            ino_hash_key: OnceLock::new(),
            shared: Mutex::new(HashMap::new()),
        }
    }

    /// Length of the key in bytes.
    pub fn len(&self) -> usize {
        self.secret.len()
    }

    /// Always false: a master key has at least 16 bytes.
    pub fn is_empty(&self) -> bool {
        self.secret.is_empty()
    }

    /// Raw key or software secret.
    pub fn kind(&self) -> MasterKeyKind {
        self.kind
    }

    /// The raw key bytes (secret; for handing to the kernel keyring).
    pub fn as_bytes(&self) -> &[u8] {
        &self.secret
    }

    /// The v2 key identifier: HKDF(master, ctx 1, "", 16), or ctx 8 for a
    /// hardware-wrapped key's software secret (spec §4.4).
    pub fn identifier(&self) -> KeyIdentifier {
        self.identifier
    }

    /// The descriptor e4crypt and the `fscrypt` tool assign to a v1 key:
    /// `SHA-512(SHA-512(key))[0..8]` (a userspace convention; the kernel
    /// accepts any descriptor, spec §4.2).
    pub fn e4crypt_descriptor(&self) -> KeyDescriptor {
        let inner = Zeroizing::new(fscrypt_crypto::sha512(&self.secret));
        let outer = fscrypt_crypto::sha512(&*inner);
        let mut d = [0u8; 8];
        d.copy_from_slice(&outer[..8]);
        KeyDescriptor(d)
    }

    /// HKDF-Expand under this key with fscrypt's info prefix (spec §4.3), for
    /// callers that need a raw subkey (tests, `fscrypt-rs crypt`).
    ///
    /// # Errors
    /// [`Error::Crypto`] if `out` exceeds HKDF's limit (16320 bytes).
    pub fn hkdf_expand(&self, ctx: HkdfContext, info: &[u8], out: &mut [u8]) -> Result<(), Error> {
        self.hkdf.expand(ctx, info, out)
    }

    /// The inode-hash SipHash key, HKDF(master, ctx 7, "", 16), computed once.
    pub fn inode_hash_key(&self) -> &[u8; 16] {
        self.ino_hash_key.get_or_init(|| {
            let mut k = SecretBox::new([0u8; 16]);
            let _ = self.hkdf.expand(HkdfContext::InodeHashKey, &[], &mut k[..]);
            k
        })
    }

    /// IV_INO_LBLK_32's hashed inode number: low 32 bits of
    /// SipHash-2-4(inode hash key, le64(ino)) (spec §5; kernel
    /// `fscrypt_hash_inode_number()`).
    pub fn hash_inode_number(&self, ino: u64) -> u32 {
        fscrypt_crypto::siphash24(self.inode_hash_key(), &ino.to_le_bytes()) as u32
    }

    /// The SipHash key of a casefolded v2 directory with nonce `dir_nonce`:
    /// HKDF(master, ctx 5, nonce, 16) (spec §9).
    pub fn dirhash_key(&self, dir_nonce: &[u8; NONCE_SIZE]) -> DirHashKey {
        let mut k = [0u8; 16];
        let _ = self.hkdf.expand(HkdfContext::DirhashKey, dir_nonce, &mut k);
        DirHashKey(k)
    }

    /// Checks the master-key length rule for `mode` (spec §4.1): v1 needs the
    /// mode's key size, v2 its security strength.
    fn check_length(&self, mode: &ModeInfo, v2: bool) -> Result<(), KeyError> {
        let need = if v2 {
            mode.security_strength
        } else {
            mode.key_size
        };
        if self.secret.len() < need {
            return Err(KeyError::MasterKeyTooShort {
                mode: mode.mode,
                version: if v2 { 2 } else { 1 },
                need,
                have: self.secret.len(),
            });
        }
        Ok(())
    }

    /// Gets or derives a key the kernel shares between inodes.
    fn shared_key(
        &self,
        kind: SharedKind,
        mode: &ModeInfo,
        fs_uuid: &[u8; 16],
    ) -> Result<Arc<PreparedKey>, Error> {
        let uuid = match kind {
            SharedKind::IvInoLblk64 | SharedKind::IvInoLblk32 => *fs_uuid,
            SharedKind::V1Direct | SharedKind::V2Direct => [0u8; 16],
        };
        let slot = (kind, mode.mode.0, uuid);
        if let Some(k) = self.lock_shared().get(&slot) {
            return Ok(Arc::clone(k));
        }
        let key = Arc::new(match kind {
            SharedKind::V1Direct => {
                let raw = keysetup_v1::v1_direct_key(&self.secret, mode.key_size)
                    .ok_or(KeyError::BadMasterKeySize(self.secret.len()))?;
                PreparedKey::new(mode.algorithm, raw)?
            }
            SharedKind::V2Direct => {
                self.derive_prepared(HkdfContext::DirectKey, &[mode.mode.0], mode)?
            }
            SharedKind::IvInoLblk64 | SharedKind::IvInoLblk32 => {
                let mut info = [0u8; 17];
                info[0] = mode.mode.0;
                info[1..].copy_from_slice(&uuid);
                let ctx = if kind == SharedKind::IvInoLblk64 {
                    HkdfContext::IvInoLblk64Key
                } else {
                    HkdfContext::IvInoLblk32Key
                };
                self.derive_prepared(ctx, &info, mode)?
            }
        });
        Ok(Arc::clone(self.lock_shared().entry(slot).or_insert(key)))
    }

    fn lock_shared(&self) -> std::sync::MutexGuard<'_, SharedKeys> {
        // The map holds no invariant a panicking holder could break.
        self.shared.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn derive_prepared(
        &self,
        ctx: HkdfContext,
        info: &[u8],
        mode: &ModeInfo,
    ) -> Result<PreparedKey, Error> {
        // The derived key never touches ordinary memory: it is expanded
        // into locked memory and prepared from there (the schedule lands in
        // locked memory too, `PreparedKey`).
        let mut k = SecretBox::new([0u8; MAX_MODE_KEY_SIZE]);
        self.hkdf.expand(ctx, info, &mut k[..mode.key_size])?;
        Ok(PreparedKey::new(mode.algorithm, &k[..mode.key_size])?)
    }

    /// The raw key an inode would use for `mode` under `policy` (spec §4.2,
    /// §4.5), for tests and tools that must show derived keys. Inodes use
    /// [`InodeCrypt::new`], which prepares (and caches) the same key.
    ///
    /// # Errors
    /// [`KeyError::UnknownMode`], [`KeyError::MasterKeyTooShort`],
    /// [`Error::Crypto`].
    pub fn derive_raw_key(
        &self,
        policy: &Policy,
        mode: EncryptionMode,
        nonce: &[u8; NONCE_SIZE],
        fs_uuid: &[u8; 16],
    ) -> Result<Zeroizing<Vec<u8>>, Error> {
        let info = mode.info().ok_or(KeyError::UnknownMode(mode))?;
        let v2 = matches!(policy, Policy::V2(_));
        self.check_length(info, v2)?;
        let flags = policy.flags();
        let ks = info.key_size;
        let mut out = Zeroizing::new(vec![0u8; ks]);
        if !v2 {
            if flags.direct_key() {
                out.copy_from_slice(&self.secret[..ks]);
            } else {
                out.copy_from_slice(
                    &keysetup_v1::derive_v1_file_key(&self.secret, nonce, ks)?[..ks],
                );
            }
            return Ok(out);
        }
        let mut lblk_info = [0u8; 17];
        lblk_info[0] = mode.0;
        lblk_info[1..].copy_from_slice(fs_uuid);
        if flags.direct_key() {
            self.hkdf
                .expand(HkdfContext::DirectKey, &[mode.0], &mut out)?;
        } else if flags.iv_ino_lblk_64() {
            self.hkdf
                .expand(HkdfContext::IvInoLblk64Key, &lblk_info, &mut out)?;
        } else if flags.iv_ino_lblk_32() {
            self.hkdf
                .expand(HkdfContext::IvInoLblk32Key, &lblk_info, &mut out)?;
        } else {
            self.hkdf
                .expand(HkdfContext::PerFileEncKey, nonce, &mut out)?;
        }
        Ok(out)
    }
}

/// The type of an encrypted inode; it selects the mode (contents mode for
/// regular files, filenames mode for directories and symlinks, spec §4.5).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum FileType {
    /// A regular file: contents are encrypted in data units.
    Regular,
    /// A directory: entry names are encrypted.
    Directory,
    /// A symlink: the target is encrypted like a filename (spec §7.4).
    Symlink,
}

/// What [`InodeCrypt::new`] needs to know about the inode and its filesystem.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct InodeParams {
    /// Regular file, directory or symlink.
    pub file_type: FileType,
    /// The inode number (used by IV_INO_LBLK_64/32; must fit 32 bits there).
    pub ino: u64,
    /// The filesystem UUID (ext4 `s_uuid`; used by IV_INO_LBLK_64/32 keys).
    pub fs_uuid: [u8; 16],
    /// The filesystem block size in bytes (power of two, 512..=65536): the
    /// data unit size unless the policy sets `log2_data_unit_size`.
    pub fs_block_size: u32,
}

/// The per-inode crypto state (kernel `struct fscrypt_inode_info`): the
/// inode's prepared key for its mode, its IV scheme and data unit size, and
/// for v2 directories the dirhash key.
///
/// Built once per inode by [`InodeCrypt::new`]; then every contents, filename
/// and symlink operation is allocation-free (symlink blobs excepted) and needs
/// only `&self`. `Send + Sync`.
pub struct InodeCrypt {
    pub(crate) policy: Policy,
    pub(crate) file_type: FileType,
    pub(crate) mode: &'static ModeInfo,
    pub(crate) key: Arc<PreparedKey>,
    pub(crate) iv: IvScheme,
    pub(crate) data_unit_bits: u8,
    pub(crate) dirhash_key: Option<DirHashKey>,
    pub(crate) nonce: [u8; NONCE_SIZE],
}

impl core::fmt::Debug for InodeCrypt {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("InodeCrypt")
            .field("policy", &self.policy)
            .field("file_type", &self.file_type)
            .field("mode", &self.mode.mode)
            .field("data_unit_size", &self.data_unit_size())
            .finish_non_exhaustive()
    }
}

impl InodeCrypt {
    /// Sets up an inode's encryption (kernel `fscrypt_setup_encryption_info()`):
    /// validates the context's policy for the filesystem (spec §3.4), checks
    /// that `master` is the policy's key (v2: identifier; v1 descriptors are
    /// not verifiable) and long enough (spec §4.1), derives or fetches the
    /// key (spec §4.2, §4.5), and fixes the IV scheme (spec §5).
    ///
    /// # Errors
    /// [`Error::Policy`] for an unsupported policy or block size;
    /// [`KeyError::WrongKey`], [`KeyError::MasterKeyTooShort`],
    /// [`KeyError::HwWrappedNeedsIvInoLblk`], [`KeyError::HwWrappedContents`];
    /// [`ContentsError::InodeNumberTooLarge`] for IV_INO_LBLK_* with an inode
    /// number ≥ 2^32; [`Error::Crypto`] if the provider refuses the key (e.g.
    /// an XTS key with equal halves).
    pub fn new(
        master: &MasterKey,
        context: &Context,
        params: &InodeParams,
    ) -> Result<InodeCrypt, Error> {
        let policy = context.policy();
        policy.validate()?;
        let data_unit_bits = policy.data_unit_bits(params.fs_block_size)?;
        let v2 = matches!(policy, Policy::V2(_));
        if let Policy::V2(p) = &policy
            && p.master_key_identifier != master.identifier()
        {
            return Err(KeyError::WrongKey {
                expected: p.master_key_identifier.to_string(),
                actual: master.identifier().to_string(),
            }
            .into());
        }
        let mode_num = match params.file_type {
            FileType::Regular => policy.contents_mode(),
            FileType::Directory | FileType::Symlink => policy.filenames_mode(),
        };
        let mode = mode_num.info().ok_or(KeyError::UnknownMode(mode_num))?;
        let flags = policy.flags();
        let lblk = flags.iv_ino_lblk_64() || flags.iv_ino_lblk_32();
        if master.kind == MasterKeyKind::HwWrappedSoftwareSecret {
            if !lblk {
                return Err(KeyError::HwWrappedNeedsIvInoLblk.into());
            }
            if params.file_type == FileType::Regular {
                return Err(KeyError::HwWrappedContents.into());
            }
        } else {
            master.check_length(mode, v2)?;
        }
        let nonce = context.nonce();
        let ino32 = || {
            u32::try_from(params.ino).map_err(|_| ContentsError::InodeNumberTooLarge(params.ino))
        };

        let (key, iv) = if flags.direct_key() {
            let kind = if v2 {
                SharedKind::V2Direct
            } else {
                SharedKind::V1Direct
            };
            (
                master.shared_key(kind, mode, &params.fs_uuid)?,
                IvScheme::DirectKey { nonce: *nonce },
            )
        } else if flags.iv_ino_lblk_64() {
            let ino = ino32()?;
            (
                master.shared_key(SharedKind::IvInoLblk64, mode, &params.fs_uuid)?,
                IvScheme::IvInoLblk64 { ino },
            )
        } else if flags.iv_ino_lblk_32() {
            ino32()?;
            (
                master.shared_key(SharedKind::IvInoLblk32, mode, &params.fs_uuid)?,
                IvScheme::IvInoLblk32 {
                    hashed_ino: master.hash_inode_number(params.ino),
                },
            )
        } else if v2 {
            let k = master.derive_prepared(HkdfContext::PerFileEncKey, nonce, mode)?;
            (Arc::new(k), IvScheme::Default)
        } else {
            let raw = keysetup_v1::derive_v1_file_key(&master.secret, nonce, mode.key_size)?;
            (
                Arc::new(PreparedKey::new(mode.algorithm, &raw[..mode.key_size])?),
                IvScheme::Default,
            )
        };
        let dirhash_key =
            (v2 && params.file_type == FileType::Directory).then(|| master.dirhash_key(nonce));
        Ok(InodeCrypt {
            policy,
            file_type: params.file_type,
            mode,
            key,
            iv,
            data_unit_bits,
            dirhash_key,
            nonce: *nonce,
        })
    }

    /// The inode's policy.
    pub fn policy(&self) -> &Policy {
        &self.policy
    }
    /// The inode's nonce (from its context).
    pub fn nonce(&self) -> &[u8; NONCE_SIZE] {
        &self.nonce
    }
    /// The inode's type.
    pub fn file_type(&self) -> FileType {
        self.file_type
    }
    /// The mode this inode's key is for (contents mode for regular files,
    /// filenames mode otherwise).
    pub fn mode(&self) -> &'static ModeInfo {
        self.mode
    }
    /// The IV scheme (spec §5).
    pub fn iv_scheme(&self) -> &IvScheme {
        &self.iv
    }
    /// Data unit size in bytes (spec §3.3).
    pub fn data_unit_size(&self) -> usize {
        1usize << self.data_unit_bits
    }
    /// log2 of the data unit size.
    pub fn data_unit_bits(&self) -> u8 {
        self.data_unit_bits
    }
    /// Which crypto implementation the key uses (e.g. for logs/benchmarks).
    pub fn implementation_name(&self) -> &'static str {
        self.key.implementation_name()
    }

    /// The casefold dirhash of an already-casefolded name in this (v2)
    /// directory: SipHash-2-4 under HKDF(master, ctx 5, nonce) (spec §9).
    /// `None` for v1 policies and non-directories.
    pub fn dirhash(&self, casefolded_name: &[u8]) -> Option<u64> {
        self.dirhash_key
            .as_ref()
            .map(|k| crate::dirhash::fname_siphash(k, casefolded_name))
    }
}

// Both are shared across threads by the filesystem front ends.
const _: fn() = || {
    fn send_sync<T: Send + Sync>() {}
    send_sync::<MasterKey>();
    send_sync::<InodeCrypt>();
};
