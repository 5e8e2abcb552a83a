//! Small 16-byte block helpers shared by the modes (XOR, GF(2^128) doubling,
//! slicing byte buffers into blocks without copying).

#![forbid(unsafe_code)]

use cipher::consts::U16;

/// One 16-byte cipher block as the RustCrypto `cipher` traits want it.
pub(crate) type Block = cipher::Array<u8, U16>;

/// Number of blocks handed to `encrypt_blocks` at once: one whole 4096-byte
/// data unit, so the VAES-512 backend of `aes` 0.9 (64 blocks per parallel
/// call) sets up its round keys once per unit; tweak/keystream buffers stay on
/// the stack (256 × 16 = 4 KiB).
pub(crate) const BATCH: usize = 256;

/// Splits `data` into whole 16-byte blocks and the remaining tail (< 16 bytes).
#[inline]
pub(crate) fn as_blocks_mut(data: &mut [u8]) -> (&mut [Block], &mut [u8]) {
    Block::slice_as_chunks_mut(data)
}

/// Reads a block as a little-endian 128-bit integer.
#[inline(always)]
pub(crate) fn load(b: &Block) -> u128 {
    u128::from_le_bytes(b.0)
}

/// Writes a little-endian 128-bit integer into a block.
#[inline(always)]
pub(crate) fn store(b: &mut Block, v: u128) {
    b.0 = v.to_le_bytes();
}

/// `b ^= v` with `v` a little-endian 128-bit integer.
#[inline(always)]
pub(crate) fn xor_in(b: &mut Block, v: u128) {
    store(b, load(b) ^ v);
}

/// XOR of two byte slices of equal length into `dst`.
#[inline(always)]
pub(crate) fn xor_bytes(dst: &mut [u8], src: &[u8]) {
    for (d, s) in dst.iter_mut().zip(src) {
        *d ^= s;
    }
}

/// Multiplication by α (x) in GF(2^128) with the XTS little-endian convention
/// (IEEE P1619; spec §2.1): shift the le128 integer left by one and reduce with
/// 0x87 if bit 127 was set.
#[inline(always)]
pub(crate) fn mul_alpha(t: u128) -> u128 {
    (t << 1) ^ ((t >> 127) * 0x87)
}
