//! CBC-CTS, variant CS3 (RFC 3962 / Linux `cts(cbc(...))`), over any 128-bit
//! block cipher (spec §2.2): a one-block message is plain CBC; longer messages
//! always swap the last two blocks, even when the length is a multiple of 16.

#![forbid(unsafe_code)]

use cipher::consts::U16;
use cipher::{BlockCipherDecrypt, BlockCipherEncrypt, KeyInit};

use crate::{CipherKey, Error, cbc};

/// A CBC-CTS key. `batched` selects batched CBC decryption (`decrypt_blocks`)
/// over the one-block-at-a-time reference path.
pub(crate) struct Cts<C> {
    cipher: C,
    name: &'static str,
    batched: bool,
}

/// Reads a 16-byte IV as a little-endian integer.
pub(crate) fn iv16(name: &'static str, iv: &[u8]) -> Result<u128, Error> {
    let iv: &[u8; 16] = iv.try_into().map_err(|_| Error::InvalidIvLength {
        algorithm: name,
        expected: 16,
        actual: iv.len(),
    })?;
    Ok(u128::from_le_bytes(*iv))
}

impl<C> Cts<C>
where
    C: BlockCipherEncrypt<BlockSize = U16> + BlockCipherDecrypt<BlockSize = U16> + KeyInit,
{
    /// Sets up the key schedule.
    pub(crate) fn new(name: &'static str, key: &[u8], batched: bool) -> Result<Self, Error> {
        let cipher = C::new_from_slice(key).map_err(|_| Error::InvalidKeyLength {
            algorithm: name,
            expected: C::key_size(),
            actual: key.len(),
        })?;
        Ok(Cts {
            cipher,
            name,
            batched,
        })
    }

    fn check(&self, iv: &[u8], data: &[u8]) -> Result<u128, Error> {
        let iv = iv16(self.name, iv)?;
        if data.len() < 16 {
            return Err(Error::MessageTooShort {
                algorithm: self.name,
                min: 16,
                actual: data.len(),
            });
        }
        Ok(iv)
    }

    /// Encrypts `data` (≥ 16 bytes) in place (spec §2.2).
    pub(crate) fn encrypt(&self, iv: &[u8], data: &mut [u8]) -> Result<(), Error> {
        let iv = self.check(iv, data)?;
        self.cipher
            .encrypt_with_backend(cbc::CtsEncrypt { iv, data });
        Ok(())
    }

    /// Decrypts `data` (≥ 16 bytes) in place (spec §2.2).
    pub(crate) fn decrypt(&self, iv: &[u8], data: &mut [u8]) -> Result<(), Error> {
        let iv = self.check(iv, data)?;
        self.cipher.decrypt_with_backend(cbc::CtsDecrypt {
            iv,
            data,
            batched: self.batched,
        });
        Ok(())
    }
}

impl<C> CipherKey for Cts<C>
where
    C: BlockCipherEncrypt<BlockSize = U16>
        + BlockCipherDecrypt<BlockSize = U16>
        + KeyInit
        + Send
        + Sync,
{
    fn encrypt(&self, iv: &[u8], data: &mut [u8]) -> Result<(), Error> {
        Cts::encrypt(self, iv, data)
    }
    fn decrypt(&self, iv: &[u8], data: &mut [u8]) -> Result<(), Error> {
        Cts::decrypt(self, iv, data)
    }
}
