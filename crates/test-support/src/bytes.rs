//! Byte helpers: hex, substring search, deterministic pseudo-random bytes.

/// Lower-case hex of `b`.
pub fn hex(b: impl AsRef<[u8]>) -> String {
    hex::encode(b)
}

/// Whether `needle` occurs in `hay` (an empty needle always does).
pub fn contains(hay: &[u8], needle: &[u8]) -> bool {
    needle.is_empty() || hay.windows(needle.len()).any(|w| w == needle)
}

/// Marsaglia's xorshift64 (shifts 13, 7, 17): deterministic bytes for
/// tests, no RNG dependency. The state is public so a test can carry it.
#[derive(Debug, Clone)]
pub struct XorShift(pub u64);

impl XorShift {
    /// The next state (also the output).
    pub fn next_u64(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
}
