//! Filename encryption: padding, en/decryption, "." and ".." (spec §7.1–§7.3).
//!
//! Kernel: `fscrypt_fname_encrypted_size()`, `fscrypt_fname_encrypt()`,
//! `fname_decrypt()`, fs/crypto/fname.c. A directory's names all use the
//! directory's key and the IV for index 0 (deterministic, so lookups work by
//! re-encrypting). No-key names are in `nokey.rs`; symlink targets in
//! `symlink.rs`.

use core::fmt;

use fscrypt_crypto::PreparedKey;

use crate::error::{Error, NameError};
use crate::keysetup::{FileType, InodeCrypt};

/// Longest directory entry name in bytes (`NAME_MAX`).
pub const NAME_MAX: usize = 255;
/// Shortest filename ciphertext in bytes (`FSCRYPT_FNAME_MIN_MSG_LEN`).
pub const FNAME_MIN_MSG_LEN: usize = 16;

/// The ciphertext length of an `n`-byte name (spec §7.2): `max(n, 16)`
/// rounded up to `padding`, capped at `max_len`. `None` when `n > max_len`
/// (ENAMETOOLONG) or `padding` is not a power of two.
///
/// Kernel: `__fscrypt_fname_encrypted_size()`. Example with `padding` 32 and
/// `max_len` 255: 1 → 32, 33 → 64, 240 → 255 (not 256).
pub fn encrypted_size(n: usize, padding: usize, max_len: usize) -> Option<usize> {
    if n > max_len || !padding.is_power_of_two() {
        return None;
    }
    let len = n.max(FNAME_MIN_MSG_LEN).checked_next_multiple_of(padding)?;
    Some(len.min(max_len))
}

/// Whether `name` is "." or "..", which are never encrypted (spec §7.3).
pub fn is_dot_or_dotdot(name: &[u8]) -> bool {
    name == b"." || name == b".."
}

/// A filename (plaintext or ciphertext) of at most 255 bytes in a stack
/// buffer. Derefs to `[u8]`.
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct FnameBuf {
    buf: [u8; NAME_MAX],
    len: u8,
}

impl FnameBuf {
    fn from_slice(s: &[u8]) -> Self {
        let mut buf = [0u8; NAME_MAX];
        let len = s.len().min(NAME_MAX);
        buf[..len].copy_from_slice(&s[..len]);
        Self {
            buf,
            len: len as u8,
        }
    }
}

impl core::ops::Deref for FnameBuf {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        &self.buf[..self.len as usize]
    }
}

impl AsRef<[u8]> for FnameBuf {
    fn as_ref(&self) -> &[u8] {
        self
    }
}

impl fmt::Debug for FnameBuf {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "FnameBuf({:?})", self.escape_ascii().to_string())
    }
}

/// Pads `name` with NULs to `out.len()` and encrypts it in place in `out`.
/// `out.len()` must come from [`encrypted_size`].
pub(crate) fn encrypt_padded(
    key: &PreparedKey,
    iv: &[u8],
    name: &[u8],
    out: &mut [u8],
) -> Result<(), Error> {
    out[..name.len()].copy_from_slice(name);
    out[name.len()..].fill(0);
    key.encrypt(iv, out)?;
    Ok(())
}

/// Decrypts `buf` in place and returns the length of the name before the NUL
/// padding. Rejects an empty result and non-NUL bytes after the first NUL.
pub(crate) fn decrypt_unpad(key: &PreparedKey, iv: &[u8], buf: &mut [u8]) -> Result<usize, Error> {
    key.decrypt(iv, buf)?;
    let n = buf.iter().position(|&b| b == 0).unwrap_or(buf.len());
    if n == 0 || buf[n..].iter().any(|&b| b != 0) {
        return Err(NameError::InvalidDecryptedName.into());
    }
    Ok(n)
}

impl InodeCrypt {
    fn require_name_inode(&self) -> Result<(), NameError> {
        match self.file_type {
            FileType::Directory | FileType::Symlink => Ok(()),
            FileType::Regular => Err(NameError::NotADirectory),
        }
    }

    /// Encrypts a directory entry name of this directory (spec §7.2): NUL-pads
    /// to the policy's padding (minimum 16, capped at 255) and encrypts with
    /// the directory key and index-0 IV. "." and ".." are returned unchanged.
    /// Allocation-free.
    ///
    /// # Errors
    /// [`NameError::Empty`], [`NameError::InvalidPlaintext`] (contains NUL or
    /// '/'), [`NameError::TooLong`] (> 255 bytes: ENAMETOOLONG),
    /// [`NameError::NotADirectory`].
    pub fn encrypt_filename(&self, name: &[u8]) -> Result<FnameBuf, Error> {
        self.require_name_inode()?;
        if name.is_empty() {
            return Err(NameError::Empty.into());
        }
        if is_dot_or_dotdot(name) {
            return Ok(FnameBuf::from_slice(name));
        }
        if name.iter().any(|&b| b == 0 || b == b'/') {
            return Err(NameError::InvalidPlaintext.into());
        }
        let len = encrypted_size(name.len(), self.policy.flags().padding(), NAME_MAX).ok_or(
            NameError::TooLong {
                len: name.len(),
                max: NAME_MAX,
            },
        )?;
        let mut buf = [0u8; NAME_MAX];
        let iv = self.iv.iv(0)?;
        encrypt_padded(
            &self.key,
            iv.prefix(self.mode.iv_size),
            name,
            &mut buf[..len],
        )?;
        Ok(FnameBuf {
            buf,
            len: len as u8,
        })
    }

    /// Decrypts an on-disk entry name of this directory (spec §7.2): decrypts
    /// the whole ciphertext and strips the NUL padding. "." and ".." are
    /// returned unchanged. Allocation-free.
    ///
    /// # Errors
    /// [`NameError::BadCiphertextLength`] (< 16 or > 255 bytes: EUCLEAN);
    /// [`NameError::InvalidDecryptedName`] (empty, contains '/', or non-NUL
    /// bytes after the padding starts: wrong key or corruption);
    /// [`NameError::NotADirectory`].
    pub fn decrypt_filename(&self, ciphertext: &[u8]) -> Result<FnameBuf, Error> {
        self.require_name_inode()?;
        if is_dot_or_dotdot(ciphertext) {
            return Ok(FnameBuf::from_slice(ciphertext));
        }
        if !(FNAME_MIN_MSG_LEN..=NAME_MAX).contains(&ciphertext.len()) {
            return Err(NameError::BadCiphertextLength {
                len: ciphertext.len(),
                min: FNAME_MIN_MSG_LEN,
                max: NAME_MAX,
            }
            .into());
        }
        let mut out = FnameBuf::from_slice(ciphertext);
        let len = out.len as usize;
        let iv = self.iv.iv(0)?;
        let n = decrypt_unpad(&self.key, iv.prefix(self.mode.iv_size), &mut out.buf[..len])?;
        if out.buf[..n].contains(&b'/') {
            return Err(NameError::InvalidDecryptedName.into());
        }
        out.buf[n..].fill(0);
        out.len = n as u8;
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn padding_arithmetic() {
        assert_eq!(encrypted_size(1, 32, 255), Some(32));
        assert_eq!(encrypted_size(33, 32, 255), Some(64));
        assert_eq!(encrypted_size(240, 32, 255), Some(255));
        assert_eq!(encrypted_size(255, 4, 255), Some(255));
        assert_eq!(encrypted_size(256, 4, 255), None);
        for n in 1..=16 {
            assert_eq!(encrypted_size(n, 4, 255), Some(16));
        }
        assert_eq!(encrypted_size(17, 4, 255), Some(20));
        assert_eq!(encrypted_size(17, 8, 255), Some(24));
        assert_eq!(encrypted_size(17, 16, 255), Some(32));
        assert_eq!(encrypted_size(17, 3, 255), None);
        assert_eq!(encrypted_size(100, 32, 4093), Some(128));
    }
}
