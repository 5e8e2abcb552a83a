//! Random bytes from the operating system (`getrandom(2)`), for keys,
//! nonces and salts.

#![forbid(unsafe_code)]

use crate::Error;

/// Fills `buf` from the operating system's random number generator
/// (`getrandom(2)`, blocking until it is seeded).
///
/// # Errors
/// [`Error::Random`] if the generator fails.
pub fn random_bytes(buf: &mut [u8]) -> Result<(), Error> {
    getrandom::fill(buf).map_err(|e| Error::Random {
        code: e.raw_os_error(),
    })
}

#[cfg(test)]
mod tests {
    #[test]
    fn fills_and_differs() {
        let (mut a, mut b) = ([0u8; 32], [0u8; 32]);
        super::random_bytes(&mut a).unwrap();
        super::random_bytes(&mut b).unwrap();
        assert_ne!(a, b);
        super::random_bytes(&mut []).unwrap();
    }
}
