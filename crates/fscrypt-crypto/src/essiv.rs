//! CBC-ESSIV(SHA-256) (spec §2.3): `IV' = AES-256_{SHA-256(K)}(IV)`, then
//! plain CBC with key `K` and no padding. fscrypt uses AES-128 (mode 5); the
//! construction is generic so the testmgr 24/32-byte-key vectors also run.

#![forbid(unsafe_code)]

use aes::Aes256;
use cipher::consts::U16;
use cipher::{BlockCipherDecrypt, BlockCipherEncrypt, KeyInit};
use sha2::{Digest, Sha256};
use zeroize::Zeroize;

use crate::block::{Block, load};
use crate::cts::iv16;
use crate::{CipherKey, Error, cbc};

/// A CBC-ESSIV key: the data cipher and the AES-256 IV-encryption cipher keyed
/// with SHA-256 of the data key.
pub(crate) struct Essiv<C> {
    cipher: C,
    essiv: Aes256,
    name: &'static str,
}

impl<C> Essiv<C>
where
    C: BlockCipherEncrypt<BlockSize = U16> + BlockCipherDecrypt<BlockSize = U16> + KeyInit,
{
    /// Sets up both key schedules.
    pub(crate) fn new(name: &'static str, key: &[u8]) -> Result<Self, Error> {
        let cipher = C::new_from_slice(key).map_err(|_| Error::InvalidKeyLength {
            algorithm: name,
            expected: C::key_size(),
            actual: key.len(),
        })?;
        let mut salt: [u8; 32] = Sha256::digest(key).into();
        let essiv = Aes256::new(&salt.into());
        salt.zeroize();
        Ok(Essiv {
            cipher,
            essiv,
            name,
        })
    }

    fn prepare(&self, iv: &[u8], data: &mut [u8]) -> Result<u128, Error> {
        let iv = iv16(self.name, iv)?;
        if data.len() < 16 {
            return Err(Error::MessageTooShort {
                algorithm: self.name,
                min: 16,
                actual: data.len(),
            });
        }
        if !data.len().is_multiple_of(16) {
            return Err(Error::NotBlockAligned {
                algorithm: self.name,
                block: 16,
                actual: data.len(),
            });
        }
        let mut b = Block::from(iv.to_le_bytes());
        self.essiv.encrypt_block(&mut b);
        Ok(load(&b))
    }
}

impl<C> CipherKey for Essiv<C>
where
    C: BlockCipherEncrypt<BlockSize = U16>
        + BlockCipherDecrypt<BlockSize = U16>
        + KeyInit
        + Send
        + Sync,
{
    fn encrypt(&self, iv: &[u8], data: &mut [u8]) -> Result<(), Error> {
        let iv = self.prepare(iv, data)?;
        self.cipher
            .encrypt_with_backend(cbc::CbcEncrypt { iv, data });
        Ok(())
    }
    fn decrypt(&self, iv: &[u8], data: &mut [u8]) -> Result<(), Error> {
        let iv = self.prepare(iv, data)?;
        self.cipher.decrypt_with_backend(cbc::CbcDecrypt {
            iv,
            data,
            batched: true,
        });
        Ok(())
    }
}
