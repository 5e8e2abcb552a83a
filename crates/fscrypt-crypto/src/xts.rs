//! XTS (IEEE P1619) over any 128-bit block cipher, with ciphertext stealing
//! (spec §2.1). The tweak loop is ours; the block cipher is RustCrypto's.
//!
//! Whole blocks are processed in batches of [`BATCH`] so that `aes` 0.9 can
//! use its wide (VAES) backend through `encrypt_blocks`.

#![forbid(unsafe_code)]

use cipher::consts::U16;
use cipher::{
    BlockCipherDecBackend, BlockCipherDecClosure, BlockCipherDecrypt, BlockCipherEncBackend,
    BlockCipherEncClosure, BlockCipherEncrypt, BlockSizeUser, KeyInit,
};

use crate::block::{BATCH, Block, as_blocks_mut, load, mul_alpha, xor_in};
use crate::cbc::{dec_blocks, enc_blocks};
use crate::{CipherKey, Error};

/// An XTS key: data cipher `K1` and tweak cipher `K2` (spec §2.1).
pub(crate) struct Xts<C> {
    data: C,
    tweak: C,
    name: &'static str,
}

impl<C> Xts<C>
where
    C: BlockCipherEncrypt<BlockSize = U16> + BlockCipherDecrypt<BlockSize = U16> + KeyInit,
{
    /// Sets up both key schedules from `key = K1 || K2` (halves of equal size).
    ///
    /// No weak-key check here: that is a policy of [`crate::PreparedKey`]
    /// (the testmgr vectors include an all-zero key).
    pub(crate) fn new(name: &'static str, key: &[u8]) -> Result<Self, Error> {
        let half = C::key_size();
        if key.len() != 2 * half {
            return Err(Error::InvalidKeyLength {
                algorithm: name,
                expected: 2 * half,
                actual: key.len(),
            });
        }
        let (k1, k2) = key.split_at(half);
        let data = C::new_from_slice(k1).map_err(|_| Error::InvalidKeyLength {
            algorithm: name,
            expected: 2 * half,
            actual: key.len(),
        })?;
        let tweak = C::new_from_slice(k2).map_err(|_| Error::InvalidKeyLength {
            algorithm: name,
            expected: 2 * half,
            actual: key.len(),
        })?;
        Ok(Xts { data, tweak, name })
    }

    fn first_tweak(&self, iv: &[u8]) -> Result<u128, Error> {
        let iv: &[u8; 16] = iv.try_into().map_err(|_| Error::InvalidIvLength {
            algorithm: self.name,
            expected: 16,
            actual: iv.len(),
        })?;
        let mut t = Block::from(*iv);
        self.tweak.encrypt_block(&mut t);
        Ok(load(&t))
    }

    /// En/decrypts whole blocks in place, advancing the tweak `t`: one
    /// backend call for the whole run of blocks (round keys set up once).
    #[inline]
    fn blocks(&self, t: &mut u128, blocks: &mut [Block], encrypt: bool) {
        if encrypt {
            self.data.encrypt_with_backend(XtsRun { t, blocks });
        } else {
            self.data.decrypt_with_backend(XtsRun { t, blocks });
        }
    }

    fn one(&self, b: &mut Block, t: u128, encrypt: bool) {
        xor_in(b, t);
        if encrypt {
            self.data.encrypt_block(b);
        } else {
            self.data.decrypt_block(b);
        }
        xor_in(b, t);
    }

    /// En/decrypts `data` (≥ 16 bytes) in place with initial tweak input `iv`.
    pub(crate) fn crypt(&self, iv: &[u8], data: &mut [u8], encrypt: bool) -> Result<(), Error> {
        if data.len() < 16 {
            return Err(Error::MessageTooShort {
                algorithm: self.name,
                min: 16,
                actual: data.len(),
            });
        }
        let mut t = self.first_tweak(iv)?;
        let r = data.len() % 16;
        if r == 0 {
            let (blocks, _) = as_blocks_mut(data);
            self.blocks(&mut t, blocks, encrypt);
            return Ok(());
        }
        // Ciphertext stealing (IEEE P1619 §5.3.2 / §5.4.2): all but the last
        // whole block normally, then the last whole block and the partial tail.
        let full = data.len() / 16;
        let (head, tail) = data.split_at_mut((full - 1) * 16);
        let (blocks, _) = as_blocks_mut(head);
        self.blocks(&mut t, blocks, encrypt);
        let (last_full, partial) = tail.split_at_mut(16);
        let mut b = Block::default();
        b.copy_from_slice(last_full);
        let (t_first, t_second) = if encrypt {
            (t, mul_alpha(t))
        } else {
            (mul_alpha(t), t)
        };
        self.one(&mut b, t_first, encrypt);
        // b = CC (encrypt) or PP (decrypt); swap the stolen bytes.
        let mut stolen = [0u8; 16];
        stolen[..r].copy_from_slice(partial);
        partial.copy_from_slice(&b[..r]);
        b[..r].copy_from_slice(&stolen[..r]);
        self.one(&mut b, t_second, encrypt);
        last_full.copy_from_slice(&b);
        Ok(())
    }
}

/// A run of whole XTS blocks as a backend closure: XOR the tweaks (computed
/// by doubling, kept on the stack for up to [`BATCH`] blocks), one parallel
/// en/decryption over the batch, XOR the tweaks again.
struct XtsRun<'a> {
    t: &'a mut u128,
    blocks: &'a mut [Block],
}

impl BlockSizeUser for XtsRun<'_> {
    type BlockSize = U16;
}

#[inline(always)]
fn xts_run(t: &mut u128, blocks: &mut [Block], crypt: impl FnMut(&mut [Block])) {
    // Short runs (filenames) use a small tweak buffer: zeroing 4 KiB of
    // stack would cost more than encrypting two blocks.
    if blocks.len() <= SMALL {
        xts_run_n::<SMALL>(t, blocks, crypt)
    } else {
        xts_run_n::<BATCH>(t, blocks, crypt)
    }
}

/// Tweak-buffer size for short runs (≤ 256 bytes, every filename).
const SMALL: usize = 16;

#[inline(always)]
fn xts_run_n<const N: usize>(
    t: &mut u128,
    blocks: &mut [Block],
    mut crypt: impl FnMut(&mut [Block]),
) {
    let mut tweaks = [0u128; N];
    for chunk in blocks.chunks_mut(N) {
        for (b, tw) in chunk.iter_mut().zip(tweaks.iter_mut()) {
            *tw = *t;
            xor_in(b, *t);
            *t = mul_alpha(*t);
        }
        crypt(chunk);
        for (b, tw) in chunk.iter_mut().zip(tweaks.iter()) {
            xor_in(b, *tw);
        }
    }
}

impl BlockCipherEncClosure for XtsRun<'_> {
    #[inline(always)]
    fn call<B: BlockCipherEncBackend<BlockSize = U16>>(self, be: &B) {
        xts_run(self.t, self.blocks, |c| enc_blocks(be, c));
    }
}

impl BlockCipherDecClosure for XtsRun<'_> {
    #[inline(always)]
    fn call<B: BlockCipherDecBackend<BlockSize = U16>>(self, be: &B) {
        xts_run(self.t, self.blocks, |c| dec_blocks(be, c));
    }
}

impl<C> CipherKey for Xts<C>
where
    C: BlockCipherEncrypt<BlockSize = U16>
        + BlockCipherDecrypt<BlockSize = U16>
        + KeyInit
        + Send
        + Sync,
{
    fn encrypt(&self, iv: &[u8], data: &mut [u8]) -> Result<(), Error> {
        self.crypt(iv, data, true)
    }
    fn decrypt(&self, iv: &[u8], data: &mut [u8]) -> Result<(), Error> {
        self.crypt(iv, data, false)
    }
}
