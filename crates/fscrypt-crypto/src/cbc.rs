//! CBC building blocks (ours, over RustCrypto block ciphers) shared by
//! CBC-CTS (spec §2.2) and CBC-ESSIV (spec §2.3).
//!
//! The loops run *inside* one `encrypt_with_backend` / `decrypt_with_backend`
//! call (the cipher crate's rank-2 closures), so the AES round keys are loaded
//! into registers once per message instead of once per block, and the loop is
//! compiled with the backend's target features (AES-NI / VAES).

#![forbid(unsafe_code)]

use cipher::consts::U16;
use cipher::{
    Array, BlockCipherDecBackend, BlockCipherDecClosure, BlockCipherEncBackend,
    BlockCipherEncClosure, BlockSizeUser, ParBlocksSizeUser,
};

use crate::block::{Block, as_blocks_mut, load, store, xor_in};

/// Blocks per batch for batched CBC decryption (saved ciphertext on the stack:
/// 256 × 16 = 4 KiB, one 4096-byte data unit).
pub(crate) const DEC_BATCH: usize = 256;

/// Encrypts any number of blocks with a backend: full `ParBlocks` groups,
/// then the tail.
#[inline(always)]
pub(crate) fn enc_blocks<B: BlockCipherEncBackend<BlockSize = U16>>(be: &B, blocks: &mut [Block]) {
    let (par, tail) =
        Array::<Block, <B as ParBlocksSizeUser>::ParBlocksSize>::slice_as_chunks_mut(blocks);
    for p in par {
        be.encrypt_par_blocks_inplace(p);
    }
    be.encrypt_tail_blocks_inplace(tail);
}

/// Decrypts any number of blocks with a backend.
#[inline(always)]
pub(crate) fn dec_blocks<B: BlockCipherDecBackend<BlockSize = U16>>(be: &B, blocks: &mut [Block]) {
    let (par, tail) =
        Array::<Block, <B as ParBlocksSizeUser>::ParBlocksSize>::slice_as_chunks_mut(blocks);
    for p in par {
        be.decrypt_par_blocks_inplace(p);
    }
    be.decrypt_tail_blocks_inplace(tail);
}

/// CBC-encrypts whole blocks in place from chaining value `prev`; returns the
/// last ciphertext block. CBC encryption is inherently serial.
#[inline(always)]
pub(crate) fn encrypt_with<B: BlockCipherEncBackend<BlockSize = U16>>(
    be: &B,
    mut prev: u128,
    blocks: &mut [Block],
) -> u128 {
    for b in blocks.iter_mut() {
        xor_in(b, prev);
        be.encrypt_block_inplace(b);
        prev = load(b);
    }
    prev
}

/// CBC-decrypts whole blocks in place from chaining value `prev`. `batched`:
/// decrypt up to [`DEC_BATCH`] blocks per backend call (parallel AES), else
/// one block at a time (the reference path).
#[inline(always)]
pub(crate) fn decrypt_with<B: BlockCipherDecBackend<BlockSize = U16>>(
    be: &B,
    mut prev: u128,
    blocks: &mut [Block],
    batched: bool,
) {
    // Decryptions of different blocks are independent, so the one-block loop
    // already overlaps them; batching pays off only for long runs (and would
    // zero a 4 KiB buffer for every filename).
    if !batched || blocks.len() <= 16 {
        for b in blocks.iter_mut() {
            let ct = load(b);
            be.decrypt_block_inplace(b);
            xor_in(b, prev);
            prev = ct;
        }
        return;
    }
    let mut saved = [0u128; DEC_BATCH];
    for chunk in blocks.chunks_mut(DEC_BATCH) {
        for (s, b) in saved.iter_mut().zip(chunk.iter()) {
            *s = load(b);
        }
        dec_blocks(be, chunk);
        for (b, s) in chunk.iter_mut().zip(saved.iter()) {
            xor_in(b, prev);
            prev = *s;
        }
    }
}

/// Plain CBC encryption of a block-aligned buffer as one backend closure.
pub(crate) struct CbcEncrypt<'a> {
    /// Initial chaining value (the IV) as a little-endian integer.
    pub iv: u128,
    /// Buffer, a multiple of 16 bytes.
    pub data: &'a mut [u8],
}

impl BlockSizeUser for CbcEncrypt<'_> {
    type BlockSize = U16;
}

impl BlockCipherEncClosure for CbcEncrypt<'_> {
    #[inline(always)]
    fn call<B: BlockCipherEncBackend<BlockSize = U16>>(self, be: &B) {
        let (blocks, _) = as_blocks_mut(self.data);
        encrypt_with(be, self.iv, blocks);
    }
}

/// Plain CBC decryption of a block-aligned buffer as one backend closure.
pub(crate) struct CbcDecrypt<'a> {
    /// Initial chaining value (the IV) as a little-endian integer.
    pub iv: u128,
    /// Buffer, a multiple of 16 bytes.
    pub data: &'a mut [u8],
    /// Batched (parallel) or one-block-at-a-time decryption.
    pub batched: bool,
}

impl BlockSizeUser for CbcDecrypt<'_> {
    type BlockSize = U16;
}

impl BlockCipherDecClosure for CbcDecrypt<'_> {
    #[inline(always)]
    fn call<B: BlockCipherDecBackend<BlockSize = U16>>(self, be: &B) {
        let (blocks, _) = as_blocks_mut(self.data);
        decrypt_with(be, self.iv, blocks, self.batched);
    }
}

/// CBC-CTS (CS3) encryption of a whole message (≥ 16 bytes, checked by the
/// caller) as one backend closure (spec §2.2).
pub(crate) struct CtsEncrypt<'a> {
    /// IV as a little-endian integer.
    pub iv: u128,
    /// The message.
    pub data: &'a mut [u8],
}

impl BlockSizeUser for CtsEncrypt<'_> {
    type BlockSize = U16;
}

impl BlockCipherEncClosure for CtsEncrypt<'_> {
    #[inline(always)]
    fn call<B: BlockCipherEncBackend<BlockSize = U16>>(self, be: &B) {
        let data = self.data;
        let n = data.len();
        if n.is_multiple_of(16) {
            // Whole blocks (every padded filename, and n == 16): plain CBC
            // with the last two ciphertext blocks swapped.
            let (blocks, _) = as_blocks_mut(data);
            encrypt_with(be, self.iv, blocks);
            if let [.., a, b] = blocks {
                core::mem::swap(a, b);
            }
            return;
        }
        // m = ceil(n/16) blocks, the last one d bytes long (1..=16).
        let m = n.div_ceil(16);
        let d = n - 16 * (m - 1);
        let (head, last) = data.split_at_mut(16 * (m - 1));
        let (blocks, _) = as_blocks_mut(head);
        let c_prev = encrypt_with(be, self.iv, blocks); // C_{m-1}
        let mut x = Block::default();
        x[..d].copy_from_slice(last);
        let xv = load(&x) ^ c_prev;
        store(&mut x, xv);
        be.encrypt_block_inplace(&mut x); // X = E(C_{m-1} ^ (P_m || 0))
        last.copy_from_slice(&c_prev.to_le_bytes()[..d]);
        if let Some(pen) = blocks.last_mut() {
            *pen = x;
        }
    }
}

/// CBC-CTS (CS3) decryption of a whole message (≥ 16 bytes) as one backend
/// closure (spec §2.2).
pub(crate) struct CtsDecrypt<'a> {
    /// IV as a little-endian integer.
    pub iv: u128,
    /// The message.
    pub data: &'a mut [u8],
    /// Batched (parallel) or one-block-at-a-time CBC decryption.
    pub batched: bool,
}

impl BlockSizeUser for CtsDecrypt<'_> {
    type BlockSize = U16;
}

impl BlockCipherDecClosure for CtsDecrypt<'_> {
    #[inline(always)]
    fn call<B: BlockCipherDecBackend<BlockSize = U16>>(self, be: &B) {
        let data = self.data;
        let n = data.len();
        let m = n.div_ceil(16);
        let d = n - 16 * (m.max(1) - 1);
        let cbc_len = if n.is_multiple_of(16) {
            // Undo the swap; then plain CBC (the last two blocks decrypt
            // independently of each other).
            let (blocks, _) = as_blocks_mut(data);
            if let [.., a, b] = blocks {
                core::mem::swap(a, b);
            }
            n
        } else {
            // Undo the swap: D = D_K(X); C_{m-1} = C'[0..d] || D[d..16];
            // P_m = D[0..d] ^ C'[0..d]. Then blocks 1..m-1 are ordinary CBC.
            let (head, last) = data.split_at_mut(16 * (m - 1));
            let (blocks, _) = as_blocks_mut(head);
            if let Some(pen) = blocks.last_mut() {
                let mut dd = *pen;
                be.decrypt_block_inplace(&mut dd);
                let mut c_prev = dd;
                c_prev[..d].copy_from_slice(last);
                for (l, (a, b)) in last.iter_mut().zip(dd.iter().zip(c_prev.iter())) {
                    *l = a ^ b;
                }
                *pen = c_prev;
            }
            16 * (m - 1)
        };
        let (blocks, _) = as_blocks_mut(&mut data[..cbc_len]);
        decrypt_with(be, self.iv, blocks, self.batched);
    }
}
