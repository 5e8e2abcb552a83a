//! Encrypted symlink targets: the `struct fscrypt_symlink_data` blob both ways
//! (spec §7.4).
//!
//! Kernel: `fscrypt_prepare_symlink()`, `__fscrypt_encrypt_symlink()`,
//! `fscrypt_get_symlink()`, fs/crypto/hooks.c. The target is encrypted like a
//! filename (`fname.rs`) with the symlink inode's own key and index-0 IV; the
//! blob is
//!
//! | off | size | field |
//! |----:|-----:|-------|
//! | 0 | 2 | le16 ciphertext length L |
//! | 2 | L | ciphertext |
//! | 2 + L | 1 | NUL (counted in the blob; ext4 `i_size` = 2 + L) |

use crate::error::{Error, NameError};
use crate::fname::{FNAME_MIN_MSG_LEN, decrypt_unpad, encrypt_padded, encrypted_size};
use crate::keysetup::{FileType, InodeCrypt};

/// Bytes the blob adds around the ciphertext: the le16 length and the NUL.
pub const SYMLINK_BLOB_OVERHEAD: usize = 3;

/// Frames a ciphertext as an on-disk blob: `le16(L) ‖ ciphertext ‖ 00`.
///
/// # Errors
/// [`NameError::TooLong`] if the ciphertext exceeds 65535 bytes.
pub fn frame_blob(ciphertext: &[u8]) -> Result<Vec<u8>, NameError> {
    let len = u16::try_from(ciphertext.len()).map_err(|_| NameError::TooLong {
        len: ciphertext.len(),
        max: u16::MAX as usize,
    })?;
    let mut blob = Vec::with_capacity(ciphertext.len() + SYMLINK_BLOB_OVERHEAD);
    blob.extend_from_slice(&len.to_le_bytes());
    blob.extend_from_slice(ciphertext);
    blob.push(0);
    Ok(blob)
}

/// The ciphertext inside an on-disk blob (spec §7.4 "On read").
///
/// `blob` is everything the filesystem has (ext4: the 60-byte `i_block` area
/// of a fast symlink or the data block of a slow one); bytes after the NUL
/// are ignored.
///
/// # Errors
/// [`NameError::CorruptSymlink`] when fewer than 3 bytes are available, the
/// length is 0, or `2 + len` exceeds the available bytes (EUCLEAN).
pub fn parse_blob(blob: &[u8]) -> Result<&[u8], NameError> {
    if blob.len() < SYMLINK_BLOB_OVERHEAD {
        return Err(NameError::CorruptSymlink("shorter than 3 bytes"));
    }
    let len = u16::from_le_bytes([blob[0], blob[1]]) as usize;
    if len == 0 {
        return Err(NameError::CorruptSymlink("zero ciphertext length"));
    }
    blob.get(2..2 + len).ok_or(NameError::CorruptSymlink(
        "length field exceeds the stored bytes",
    ))
}

impl InodeCrypt {
    /// Encrypts a symlink target into its on-disk blob (spec §7.4), with this
    /// symlink inode's key. `max_len` is the largest blob the filesystem can
    /// store (ext4: the block size), so the ciphertext is at most
    /// `max_len − 3` bytes.
    ///
    /// # Errors
    /// [`NameError::Empty`]; [`NameError::InvalidPlaintext`] (contains NUL);
    /// [`NameError::TooLong`] (ENAMETOOLONG); [`NameError::NotADirectory`] if
    /// this inode is not a symlink.
    pub fn encrypt_symlink(&self, target: &[u8], max_len: usize) -> Result<Vec<u8>, Error> {
        if self.file_type != FileType::Symlink {
            return Err(NameError::NotADirectory.into());
        }
        if target.is_empty() {
            return Err(NameError::Empty.into());
        }
        if target.contains(&0) {
            return Err(NameError::InvalidPlaintext.into());
        }
        let max_ct = max_len.saturating_sub(SYMLINK_BLOB_OVERHEAD);
        let too_long = NameError::TooLong {
            len: target.len(),
            max: max_ct,
        };
        let len = encrypted_size(target.len(), self.policy.flags().padding(), max_ct)
            .filter(|&l| l >= FNAME_MIN_MSG_LEN)
            .ok_or(too_long)?;
        let mut ct = vec![0u8; len];
        let iv = self.iv.iv(0)?;
        encrypt_padded(&self.key, iv.prefix(self.mode.iv_size), target, &mut ct)?;
        Ok(frame_blob(&ct)?)
    }

    /// Decrypts an on-disk symlink blob to the target (spec §7.4).
    ///
    /// # Errors
    /// [`NameError::CorruptSymlink`] (see [`parse_blob`]; also a ciphertext
    /// shorter than 16 bytes); [`NameError::InvalidDecryptedName`] (target
    /// starting with NUL, or stray bytes after the padding);
    /// [`NameError::NotADirectory`] if this inode is not a symlink.
    pub fn decrypt_symlink(&self, blob: &[u8]) -> Result<Vec<u8>, Error> {
        if self.file_type != FileType::Symlink {
            return Err(NameError::NotADirectory.into());
        }
        let ct = parse_blob(blob)?;
        if ct.len() < FNAME_MIN_MSG_LEN {
            return Err(NameError::CorruptSymlink("ciphertext shorter than 16 bytes").into());
        }
        let mut buf = ct.to_vec();
        let iv = self.iv.iv(0)?;
        let n = decrypt_unpad(&self.key, iv.prefix(self.mode.iv_size), &mut buf)?;
        buf.truncate(n);
        Ok(buf)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn blob_framing() {
        let blob = frame_blob(&[0xaa; 32]).unwrap();
        assert_eq!(blob.len(), 35);
        assert_eq!(&blob[..2], &[32, 0]);
        assert_eq!(blob[34], 0);
        assert_eq!(parse_blob(&blob).unwrap(), &[0xaa; 32]);
        assert!(parse_blob(&[1, 0]).is_err());
        assert!(parse_blob(&[0, 0, 0]).is_err());
        assert!(parse_blob(&[5, 0, 1, 2]).is_err());
        // Without the trailing NUL the ciphertext is still readable.
        assert_eq!(parse_blob(&blob[..34]).unwrap().len(), 32);
    }
}
