//! CBC-CTS, variant CS3 (RFC 3962 / Linux `cts(cbc(...))`), over any 128-bit
//! block cipher (spec §2.2): a one-block message is plain CBC; longer messages
//! always swap the last two blocks, even when the length is a multiple of 16.

#![forbid(unsafe_code)]

use cipher::consts::U16;
use cipher::{BlockCipherDecrypt, BlockCipherEncrypt, KeyInit};

use crate::block::{Block, as_blocks_mut, load, store};
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
        let n = data.len();
        if n == 16 {
            let (blocks, _) = as_blocks_mut(data);
            cbc::encrypt(&self.cipher, iv, blocks);
            return Ok(());
        }
        // m = ceil(n/16) blocks, the last one d bytes long (1..=16).
        let m = n.div_ceil(16);
        let d = n - 16 * (m - 1);
        let (head, last) = data.split_at_mut(16 * (m - 1));
        let (blocks, _) = as_blocks_mut(head);
        let c_prev = cbc::encrypt(&self.cipher, iv, blocks); // C_{m-1}
        let mut x = Block::default();
        x[..d].copy_from_slice(last);
        let v = load(&x) ^ c_prev;
        store(&mut x, v);
        self.cipher.encrypt_block(&mut x); // X = E(C_{m-1} ^ (P_m || 0))
        last.copy_from_slice(&c_prev.to_le_bytes()[..d]);
        if let Some(pen) = blocks.last_mut() {
            *pen = x;
        }
        Ok(())
    }

    /// Decrypts `data` (≥ 16 bytes) in place (spec §2.2).
    pub(crate) fn decrypt(&self, iv: &[u8], data: &mut [u8]) -> Result<(), Error> {
        let iv = self.check(iv, data)?;
        let n = data.len();
        let m = n.div_ceil(16);
        let d = n - 16 * (m - 1);
        if n > 16 {
            // Undo the swap: D = D_K(X); C_{m-1} = C'[0..d] || D[d..16];
            // P_m = D[0..d] ^ C'[0..d]. Then blocks 1..m-1 are ordinary CBC.
            let (head, last) = data.split_at_mut(16 * (m - 1));
            let (blocks, _) = as_blocks_mut(head);
            let Some(pen) = blocks.last_mut() else {
                return Ok(()); // unreachable: n > 16 implies m >= 2
            };
            let mut dd = *pen;
            self.cipher.decrypt_block(&mut dd);
            let mut c_prev = dd;
            c_prev[..d].copy_from_slice(last);
            for (l, (a, b)) in last.iter_mut().zip(dd.iter().zip(c_prev.iter())) {
                *l = a ^ b;
            }
            *pen = c_prev;
        }
        let cbc_len = if n == 16 { 16 } else { 16 * (m - 1) };
        let (blocks, _) = as_blocks_mut(&mut data[..cbc_len]);
        if self.batched {
            cbc::decrypt_batched(&self.cipher, iv, blocks);
        } else {
            cbc::decrypt_simple(&self.cipher, iv, blocks);
        }
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
