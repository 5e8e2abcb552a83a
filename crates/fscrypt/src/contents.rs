//! File contents: en/decrypting runs of data units in place (spec §6).
//!
//! Kernel: `fscrypt_crypt_data_unit()`, `fscrypt_encrypt_pagecache_blocks()`,
//! `fscrypt_decrypt_pagecache_blocks()`, fs/crypto/crypto.c. Each data unit is
//! encrypted independently with the inode's key and the IV of its index
//! (`iv.rs`). A partial final unit must be zero-padded to a whole unit by the
//! caller, as the kernel's page cache does (spec §6); [`pad_last_unit`] helps.

use crate::error::{ContentsError, Error};
use crate::keysetup::{FileType, InodeCrypt};

impl InodeCrypt {
    /// Encrypts `data` in place: `data.len() / data_unit_size()` whole data
    /// units with indices `first_index, first_index + 1, …` (spec §5, §6).
    /// Allocation-free. An empty buffer is a no-op.
    ///
    /// # Errors
    /// [`ContentsError::NotARegularFile`]; [`ContentsError::NotWholeDataUnits`];
    /// [`ContentsError::IndexTooLarge`] if an IV_INO_LBLK_* index would reach
    /// 2^32 (or any index would pass 2^64). All checks happen before any byte
    /// is changed.
    pub fn encrypt_data_units(&self, first_index: u64, data: &mut [u8]) -> Result<(), Error> {
        self.crypt_data_units(first_index, data, false)
    }

    /// Decrypts `data` in place; the inverse of
    /// [`InodeCrypt::encrypt_data_units`] with the same arguments.
    ///
    /// # Errors
    /// As [`InodeCrypt::encrypt_data_units`].
    pub fn decrypt_data_units(&self, first_index: u64, data: &mut [u8]) -> Result<(), Error> {
        self.crypt_data_units(first_index, data, true)
    }

    fn crypt_data_units(
        &self,
        first_index: u64,
        data: &mut [u8],
        decrypt: bool,
    ) -> Result<(), Error> {
        if self.file_type != FileType::Regular {
            return Err(ContentsError::NotARegularFile.into());
        }
        let du = self.data_unit_size();
        if !data.len().is_multiple_of(du) {
            return Err(ContentsError::NotWholeDataUnits {
                len: data.len(),
                data_unit_size: du,
            }
            .into());
        }
        let units = (data.len() / du) as u64;
        if units == 0 {
            return Ok(());
        }
        // Validate the whole index range first: no partial state on error.
        let last = first_index
            .checked_add(units - 1)
            .ok_or(ContentsError::IndexTooLarge(u64::MAX))?;
        self.iv.iv(last)?;
        let iv_size = self.mode.iv_size;
        for (i, unit) in data.chunks_exact_mut(du).enumerate() {
            let iv = self.iv.iv(first_index + i as u64)?;
            if decrypt {
                self.key.decrypt(iv.prefix(iv_size), unit)?;
            } else {
                self.key.encrypt(iv.prefix(iv_size), unit)?;
            }
        }
        Ok(())
    }
}

/// Zero-fills `buf[valid..]`, the tail of a final partial data unit past EOF,
/// as the kernel's page cache does before encryption (spec §6). `valid` past
/// the end of `buf` is clamped.
pub fn pad_last_unit(buf: &mut [u8], valid: usize) {
    let start = valid.min(buf.len());
    buf[start..].fill(0);
}
