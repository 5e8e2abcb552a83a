//! base64url (RFC 4648 §5: alphabet `A–Z a–z 0–9 - _`, no padding, bits
//! taken most significant first): the encoding of the kernel's current
//! no-key names (spec §8.1; `fscrypt_base64url_encode/decode()`,
//! fs/crypto/fname.c, Linux ≥ 5.15), and of the vault's backing names and
//! symlink targets (`docs/vault-format.md`). The one implementation of the
//! workspace.
//!
//! [`decode`] accepts what the kernel accepts; [`decode_canonical`] also
//! refuses lengths that no byte string encodes to, so that every byte
//! string has exactly one accepted encoding.

pub use crate::error::Base64Error;

/// The alphabet, indexed by 6-bit value.
const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";

/// Characters that encode `n` bytes: `ceil(8n / 6)` = `ceil(4n / 3)`.
pub const fn encoded_len(n: usize) -> usize {
    (n * 4).div_ceil(3)
}

/// Whether `c` is a character of the base64url alphabet.
pub fn is_alphabet(c: u8) -> bool {
    value(c).is_some()
}

/// The 6-bit value of the alphabet character `c`.
fn value(c: u8) -> Option<u32> {
    Some(match c {
        b'A'..=b'Z' => c - b'A',
        b'a'..=b'z' => c - b'a' + 26,
        b'0'..=b'9' => c - b'0' + 52,
        b'-' => 62,
        b'_' => 63,
        _ => return None,
    } as u32)
}

/// Encodes `src` into `out` and returns the number of characters written,
/// [`encoded_len`]`(src.len())`; unused bits of the last character are
/// zero.
///
/// # Panics
/// If `out` is shorter than [`encoded_len`]`(src.len())`.
pub fn encode(src: &[u8], out: &mut [u8]) -> usize {
    let mut ac: u32 = 0;
    let mut bits = 0u32;
    let mut n = 0;
    for &b in src {
        ac = (ac << 8) | b as u32;
        bits += 8;
        while bits >= 6 {
            bits -= 6;
            out[n] = ALPHABET[((ac >> bits) & 0x3f) as usize];
            n += 1;
        }
    }
    if bits > 0 {
        out[n] = ALPHABET[((ac << (6 - bits)) & 0x3f) as usize];
        n += 1;
    }
    n
}

/// Decodes `src` into `out` as the kernel does and returns the number of
/// bytes written (`floor(6·len / 8)`): every character must be in the
/// alphabet and the bits left over at the end must be zero. A length of
/// `4k + 1` with a zero last character is accepted (its 6 bits are all
/// leftover), as the kernel accepts it.
///
/// # Errors
/// [`Base64Error::BadEncoding`] for a character outside the alphabet or
/// non-zero leftover bits; [`Base64Error::OutputTooSmall`] when `out`
/// cannot hold the decoded bytes.
pub fn decode(src: &[u8], out: &mut [u8]) -> Result<usize, Base64Error> {
    let mut ac: u32 = 0;
    let mut bits = 0u32;
    let mut n = 0;
    for &c in src {
        let v = value(c).ok_or(Base64Error::BadEncoding)?;
        ac = (ac << 6) | v;
        bits += 6;
        if bits >= 8 {
            bits -= 8;
            *out.get_mut(n).ok_or(Base64Error::OutputTooSmall)? = (ac >> bits) as u8;
            n += 1;
        }
        ac &= (1 << bits) - 1;
    }
    if ac != 0 {
        return Err(Base64Error::BadEncoding);
    }
    Ok(n)
}

/// [`decode`], also refusing a length of `4k + 1` (no byte string encodes
/// to it): accepts exactly the outputs of [`encode`].
///
/// # Errors
/// As [`decode`]; [`Base64Error::BadEncoding`] for a length of `4k + 1`.
pub fn decode_canonical(src: &[u8], out: &mut [u8]) -> Result<usize, Base64Error> {
    if src.len() % 4 == 1 {
        return Err(Base64Error::BadEncoding);
    }
    decode(src, out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_all_lengths() {
        for n in 0..200usize {
            let src: Vec<u8> = (0..n).map(|i| (i * 37 + 11) as u8).collect();
            let mut enc = [0u8; 300];
            let e = encode(&src, &mut enc);
            assert_eq!(e, encoded_len(n));
            // Never a `.`: the vault's internal names contain one.
            assert!(!enc[..e].contains(&b'.'));
            for dec_fn in [decode, decode_canonical] {
                let mut dec = [0u8; 300];
                let d = dec_fn(&enc[..e], &mut dec).unwrap();
                assert_eq!(&dec[..d], &src[..]);
            }
        }
    }

    #[test]
    fn known_answers_and_rejects() {
        let mut out = [0u8; 16];
        let n = encode(b"\xfb\xff\xbf", &mut out);
        assert_eq!(&out[..n], b"-_-_");
        let n = encode(b"foob", &mut out);
        assert_eq!(&out[..n], b"Zm9vYg");
        let mut dec = [0u8; 16];
        for dec_fn in [decode, decode_canonical] {
            assert_eq!(
                dec_fn(b"Zm9vYh", &mut dec),
                Err(Base64Error::BadEncoding),
                "non-zero leftover bits"
            );
            assert_eq!(dec_fn(b"Zm9v=", &mut dec), Err(Base64Error::BadEncoding));
            assert_eq!(dec_fn(b"Z", &mut dec), Err(Base64Error::BadEncoding));
            // "AB" = 000000 000001: 8 bits out, the leftover "0001" is not zero.
            assert_eq!(dec_fn(b"AB", &mut dec), Err(Base64Error::BadEncoding));
            assert_eq!(
                dec_fn(b"Zm9vYg", &mut [0u8; 3]),
                Err(Base64Error::OutputTooSmall)
            );
        }
        // 4k+1 characters with zero leftover bits: the kernel's rule takes
        // them, the canonical one does not.
        assert_eq!(decode(b"A", &mut dec), Ok(0));
        assert_eq!(decode(b"Zm9vA", &mut dec), Ok(3));
        assert_eq!(
            decode_canonical(b"A", &mut dec),
            Err(Base64Error::BadEncoding)
        );
        assert_eq!(
            decode_canonical(b"Zm9vA", &mut dec),
            Err(Base64Error::BadEncoding)
        );
    }

    #[test]
    fn alphabet() {
        let all: Vec<u8> = (0..=255u8).filter(|&c| is_alphabet(c)).collect();
        assert_eq!(all.len(), 64);
        assert!(all.iter().all(|c| ALPHABET.contains(c)));
        assert!(!is_alphabet(b'.') && !is_alphabet(b'=') && !is_alphabet(b'+'));
    }

    #[test]
    fn lengths() {
        assert_eq!(encoded_len(0), 0);
        assert_eq!(encoded_len(1), 2);
        assert_eq!(encoded_len(3), 4);
        assert_eq!(encoded_len(189), 252);
        assert_eq!(encoded_len(191), 255);
        assert_eq!(encoded_len(192), 256);
    }
}
