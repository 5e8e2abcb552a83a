//! The crate's errors: one top-level [`Error`] with a nested cause enum per
//! concern ([`PolicyError`], [`KeyError`], [`NameError`], [`NoKeyError`],
//! [`ContentsError`]), connected by `From`. Every message says what to do.
//!
//! The errno a filesystem front end should report is noted per variant
//! (kernel behaviour); the mapping itself lives in the front ends.

use crate::mode::EncryptionMode;

/// Everything that can go wrong in the fscrypt format layer.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A policy or context is malformed or not supported (EINVAL).
    #[error(transparent)]
    Policy(#[from] PolicyError),
    /// A master key is unusable for this policy (ENOKEY / EINVAL).
    #[error(transparent)]
    Key(#[from] KeyError),
    /// A filename or symlink target cannot be encrypted or decrypted.
    #[error(transparent)]
    Name(#[from] NameError),
    /// A no-key name cannot be decoded (ENOENT).
    #[error(transparent)]
    NoKey(#[from] NoKeyError),
    /// File contents cannot be en/decrypted with these arguments.
    #[error(transparent)]
    Contents(#[from] ContentsError),
    /// The crypto layer refused the operation (a bug or a broken provider).
    #[error("crypto provider error: {0}")]
    Crypto(#[from] fscrypt_crypto::Error),
    /// A filesystem operation the kernel refuses (see [`HookError`]).
    #[error(transparent)]
    Hook(#[from] HookError),
}

/// A directory operation the kernel refuses on encrypted directories
/// (`fs/crypto/hooks.c`, `fscrypt_setup_filename()`; spec §8.1, §10.9).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum HookError {
    /// The operation needs the directory's key and it is absent: creating an
    /// entry, linking or renaming into or out of a locked directory (ENOKEY).
    #[error("the directory's encryption key is not available; unlock it first")]
    KeyRequired,
    /// Without the key, a looked-up name that no directory entry can have:
    /// not a well-formed no-key name (ENOENT).
    #[error("no such entry (not a no-key name of this directory)")]
    NotFound,
    /// Linking or renaming an entry into a directory with another encryption
    /// policy (EXDEV), which the kernel refuses so that a directory holds
    /// entries of its own policy only.
    #[error(
        "the entry is encrypted with another policy than the target directory; copy it instead"
    )]
    CrossPolicy,
}

/// A malformed or unsupported policy/context (spec §3.1–§3.4). The kernel
/// reports all of these as `EINVAL`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum PolicyError {
    /// Zero bytes were given.
    #[error("policy/context is empty; expected 12 or 24 policy bytes or 28 or 40 context bytes")]
    Empty,
    /// The version byte is not 0/2 (policy) or 1/2 (context).
    #[error("unknown policy/context version {0} (policies use 0 or 2, contexts 1 or 2)")]
    UnknownVersion(u8),
    /// The length does not match the version.
    #[error("version {version} needs exactly {expected} bytes, got {got}; the data is corrupt")]
    BadSize {
        /// The version byte.
        version: u8,
        /// Required length in bytes.
        expected: usize,
        /// Given length in bytes.
        got: usize,
    },
    /// Reserved bytes 5..8 of a v2 policy/context are not zero.
    #[error("reserved bytes of the v2 policy are not zero; clear them or upgrade fscrypt-rs")]
    ReservedNonZero,
    /// The (contents, filenames) pair is not allowed for the version (spec §1.2).
    #[error(
        "modes (contents {contents}, filenames {filenames}) are not a valid pair for a \
         v{} policy; use AES-256-XTS/AES-256-CTS-CBC, AES-128-CBC-ESSIV/AES-128-CTS-CBC, \
         Adiantum/Adiantum, or (v2 only) AES-256-XTS/AES-256-HCTR2, SM4-XTS/SM4-CTS-CBC",
        if *version == 0 { 1 } else { 2 }
    )]
    UnsupportedModes {
        /// Contents mode.
        contents: EncryptionMode,
        /// Filenames mode.
        filenames: EncryptionMode,
        /// uapi policy version byte (0 or 2).
        version: u8,
    },
    /// Unknown flag bits are set.
    #[error("unsupported policy flags {0:#04x}; valid bits are 0x07 (v1) and 0x1f (v2)")]
    UnsupportedFlags(u8),
    /// IV_INO_LBLK_64/32 in a v1 policy.
    #[error("flags {0:#04x}: IV_INO_LBLK_64/IV_INO_LBLK_32 need a v2 policy")]
    IvInoLblkNeedsV2(u8),
    /// More than one of DIRECT_KEY, IV_INO_LBLK_64, IV_INO_LBLK_32.
    #[error(
        "flags {0:#04x}: DIRECT_KEY, IV_INO_LBLK_64 and IV_INO_LBLK_32 are mutually exclusive; pick one"
    )]
    IncompatibleFlags(u8),
    /// DIRECT_KEY with modes other than Adiantum/Adiantum.
    #[error(
        "DIRECT_KEY needs Adiantum for both contents and filenames (got {contents}, {filenames})"
    )]
    DirectKeyNeedsAdiantum {
        /// Contents mode.
        contents: EncryptionMode,
        /// Filenames mode.
        filenames: EncryptionMode,
    },
    /// IV_INO_LBLK_* with a contents mode other than AES-256-XTS.
    #[error("IV_INO_LBLK_64/32 need AES-256-XTS contents encryption (got {contents})")]
    IvInoLblkNeedsAesXts {
        /// Contents mode.
        contents: EncryptionMode,
    },
    /// `log2_data_unit_size` outside 0 or 9..=16.
    #[error("log2_data_unit_size {0} is invalid; use 0 (block size) or 9..=16 (512 B..64 KiB)")]
    BadDataUnitSize(u8),
    /// The filesystem block size is not a power of two in 512..=65536.
    #[error("filesystem block size {0} is not a power of two between 512 and 65536")]
    BadBlockSize(u32),
    /// The data unit is larger than the filesystem block.
    #[error(
        "data units of 2^{log2_data_unit_size} bytes exceed the filesystem block size \
         {fs_block_size}; use a smaller log2_data_unit_size or 0"
    )]
    DataUnitLargerThanBlock {
        /// The policy's `log2_data_unit_size`.
        log2_data_unit_size: u8,
        /// The filesystem block size in bytes.
        fs_block_size: u32,
    },
    /// IV_INO_LBLK_32 with sub-block data units (spec §3.3).
    #[error(
        "IV_INO_LBLK_32 does not allow data units smaller than the filesystem block; set log2_data_unit_size to 0"
    )]
    IvInoLblk32NeedsBlockSizedUnits,
    /// A hex key descriptor/identifier string has the wrong form.
    #[error("expected {expected_bytes} bytes as {} hex digits, got {got_chars} characters", expected_bytes * 2)]
    BadHex {
        /// Number of bytes expected.
        expected_bytes: usize,
        /// Length of the given string in bytes.
        got_chars: usize,
    },
}

/// A master key that cannot be used (spec §4.1).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum KeyError {
    /// Raw master keys are 16..=64 bytes.
    #[error("master key is {0} bytes; raw master keys must be 16 to 64 bytes of random data")]
    BadMasterKeySize(usize),
    /// The key is shorter than the mode requires (v2: security strength; v1:
    /// key size). The kernel then treats the key as absent (ENOKEY).
    #[error(
        "master key is {have} bytes but {mode} in a v{version} policy needs at least {need}; \
         use a longer (64-byte) master key"
    )]
    MasterKeyTooShort {
        /// The mode whose key is being set up.
        mode: EncryptionMode,
        /// Policy version (1 or 2).
        version: u8,
        /// Required length in bytes.
        need: usize,
        /// Actual length in bytes.
        have: usize,
    },
    /// The policy's key identifier/descriptor names another key (ENOKEY).
    #[error(
        "the policy names master key {expected} but this key is {actual}; supply the right key"
    )]
    WrongKey {
        /// Identifier/descriptor in the policy (hex).
        expected: String,
        /// Identifier of the key supplied (hex).
        actual: String,
    },
    /// The mode number is unknown.
    #[error("mode {0} is not a known encryption mode")]
    UnknownMode(EncryptionMode),
    /// A hardware-wrapped key was used with a policy other than
    /// IV_INO_LBLK_64/32 (spec §3.4).
    #[error("hardware-wrapped keys work only with IV_INO_LBLK_64 or IV_INO_LBLK_32 policies")]
    HwWrappedNeedsIvInoLblk,
    /// Contents keys of hardware-wrapped keys live in the inline-encryption
    /// hardware and cannot be derived in software (spec §4.6).
    #[error(
        "file contents under a hardware-wrapped key are encrypted by inline-encryption hardware; they cannot be computed in software"
    )]
    HwWrappedContents,
    /// The hardware KDF model needs a 32-byte raw key (spec §4.6).
    #[error("the hardware KDF model needs a 32-byte raw key, got {0} bytes")]
    HwKdfKeySize(usize),
}

/// A filename or symlink target that cannot be processed (spec §7).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum NameError {
    /// Empty names are not valid directory entries.
    #[error("empty name")]
    Empty,
    /// The plaintext does not fit once padded (ENAMETOOLONG).
    #[error("name is {len} bytes; at most {max} bytes fit (ENAMETOOLONG)")]
    TooLong {
        /// Plaintext length in bytes.
        len: usize,
        /// Maximum plaintext length in bytes.
        max: usize,
    },
    /// A plaintext name contains a NUL or '/' (EINVAL).
    #[error("name contains a NUL or '/' byte, which is not allowed in a filename")]
    InvalidPlaintext,
    /// A stored ciphertext name is shorter than 16 bytes or longer than the
    /// maximum (EUCLEAN: corrupt).
    #[error(
        "encrypted name is {len} bytes; valid ciphertext is {min}..={max} bytes, the entry is corrupt"
    )]
    BadCiphertextLength {
        /// Ciphertext length in bytes.
        len: usize,
        /// Minimum (16).
        min: usize,
        /// Maximum.
        max: usize,
    },
    /// A decrypted name is empty, contains '/', or has non-NUL bytes after
    /// NUL padding (EUCLEAN: wrong key or corrupt entry).
    #[error(
        "decrypted name is invalid (empty, contains '/' or stray bytes after NUL padding): wrong key or corrupt entry"
    )]
    InvalidDecryptedName,
    /// A symlink blob is malformed (EUCLEAN).
    #[error("encrypted symlink blob is corrupt ({0})")]
    CorruptSymlink(&'static str),
    /// Filename operations on an inode that is not a directory or symlink.
    #[error("filename encryption needs a directory or symlink inode; this inode is a regular file")]
    NotADirectory,
}

/// base64url input that does not decode ([`crate::base64url`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum Base64Error {
    /// A character outside the base64url alphabet, non-zero leftover bits,
    /// or (canonical decoding) a length no byte string encodes to.
    #[error("not valid unpadded base64url; check the name or target for damage")]
    BadEncoding,
    /// The output buffer cannot hold the decoded bytes.
    #[error("base64url input decodes to more bytes than allowed here")]
    OutputTooSmall,
}

/// A no-key name that does not decode (spec §8.1). The kernel answers lookups
/// of such names with ENOENT.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum NoKeyError {
    /// Longer than the 252 characters any no-key name has.
    #[error("no-key name is {0} characters; no-key names have at most 252")]
    TooLong(usize),
    /// A character outside the base64url alphabet, or non-zero leftover bits.
    #[error("no-key name is not valid unpadded base64url")]
    BadEncoding,
    /// The decoded size is not 9..=157 or 189 bytes.
    #[error("no-key name decodes to {0} bytes; valid sizes are 9..=157 or 189")]
    BadDecodedSize(usize),
}

/// Bad arguments for file contents encryption (spec §5, §6).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ContentsError {
    /// The buffer is not a whole number of data units.
    #[error(
        "buffer of {len} bytes is not a non-zero multiple of the {data_unit_size}-byte data unit; zero-pad the last unit"
    )]
    NotWholeDataUnits {
        /// Buffer length in bytes.
        len: usize,
        /// Data unit size in bytes.
        data_unit_size: usize,
    },
    /// IV_INO_LBLK_* data unit index ≥ 2^32.
    #[error("data unit index {0} does not fit the 32 bits of IV_INO_LBLK_64/32 IVs")]
    IndexTooLarge(u64),
    /// IV_INO_LBLK_* with an inode number ≥ 2^32.
    #[error("inode number {0} does not fit the 32 bits IV_INO_LBLK_64/32 require")]
    InodeNumberTooLarge(u64),
    /// Contents operations on an inode that is not a regular file.
    #[error("contents encryption needs a regular file inode")]
    NotARegularFile,
    /// A data unit size outside 512..=65536 or not a power of two.
    #[error("data unit size {0} is not a power of two between 512 and 65536")]
    BadDataUnitSize(usize),
}
