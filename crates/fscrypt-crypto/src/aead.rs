//! XChaCha20-Poly1305 (draft-irtf-cfrg-xchacha-03 over RFC 8439), the AEAD
//! the fscrypt-rs vault wraps master keys with (not part of the kernel
//! format): a thin wrapper over the RustCrypto `chacha20poly1305` crate,
//! in place with a detached tag so plaintext can stay in a
//! [`SecretBuf`](crate::SecretBuf).

#![forbid(unsafe_code)]

use chacha20poly1305::aead::{AeadInPlace, KeyInit};
use chacha20poly1305::{Key, Tag, XChaCha20Poly1305, XNonce};

use crate::Error;

/// Key size in bytes.
pub const KEY_SIZE: usize = 32;
/// Nonce size in bytes (random nonces are safe at this size).
pub const NONCE_SIZE: usize = 24;
/// Authentication tag size in bytes.
pub const TAG_SIZE: usize = 16;

/// Encrypts `buf` in place under `key` and `nonce`, authenticating `ad`
/// too; returns the tag. A nonce must never be used twice with one key.
///
/// # Errors
/// [`Error::MessageTooLong`] for a message over the cipher's limit
/// (256 GiB).
pub fn seal(
    key: &[u8; KEY_SIZE],
    nonce: &[u8; NONCE_SIZE],
    ad: &[u8],
    buf: &mut [u8],
) -> Result<[u8; TAG_SIZE], Error> {
    let cipher = XChaCha20Poly1305::new(Key::from_slice(key));
    let len = buf.len();
    let tag = cipher
        .encrypt_in_place_detached(XNonce::from_slice(nonce), ad, buf)
        .map_err(|_| Error::MessageTooLong {
            algorithm: "XChaCha20-Poly1305",
            max: 1 << 38,
            actual: len,
        })?;
    Ok(tag.into())
}

/// Checks `tag` over `ad` and the ciphertext in `buf`, then decrypts `buf`
/// in place. On failure `buf` is left as it was (still ciphertext).
///
/// # Errors
/// [`Error::AuthenticationFailed`]: wrong key, or nonce, associated data,
/// ciphertext or tag altered.
pub fn open(
    key: &[u8; KEY_SIZE],
    nonce: &[u8; NONCE_SIZE],
    ad: &[u8],
    buf: &mut [u8],
    tag: &[u8; TAG_SIZE],
) -> Result<(), Error> {
    let cipher = XChaCha20Poly1305::new(Key::from_slice(key));
    cipher
        .decrypt_in_place_detached(XNonce::from_slice(nonce), ad, buf, Tag::from_slice(tag))
        .map_err(|_| Error::AuthenticationFailed {
            algorithm: "XChaCha20-Poly1305",
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn h<const N: usize>(s: &str) -> [u8; N] {
        hex::decode(s).unwrap().try_into().unwrap()
    }

    /// draft-irtf-cfrg-xchacha-03, Appendix A.3.1 (AEAD_XChaCha20_Poly1305).
    #[test]
    fn draft_xchacha_test_vector() {
        let key: [u8; 32] = h("808182838485868788898a8b8c8d8e8f909192939495969798999a9b9c9d9e9f");
        let nonce: [u8; 24] = h("404142434445464748494a4b4c4d4e4f5051525354555657");
        let ad = hex::decode("50515253c0c1c2c3c4c5c6c7").unwrap();
        let plaintext: &[u8] = b"Ladies and Gentlemen of the class of '99: If I could offer you \
only one tip for the future, sunscreen would be it.";
        let ciphertext = "bd6d179d3e83d43b9576579493c0e939572a1700252bfaccbed2902c21396cbb\
731c7f1b0b4aa6440bf3a82f4eda7e39ae64c6708c54c216cb96b72e1213b452\
2f8c9ba40db5d945b11b69b982c1bb9e3f3fac2bc369488f76b2383565d3fff9\
21f9664c97637da9768812f615c68b13b52e";
        let tag: [u8; 16] = h("c0875924c1c7987947deafd8780acf49");

        let mut buf = plaintext.to_vec();
        assert_eq!(seal(&key, &nonce, &ad, &mut buf).unwrap(), tag);
        assert_eq!(hex::encode(&buf), ciphertext);
        open(&key, &nonce, &ad, &mut buf, &tag).unwrap();
        assert_eq!(buf, plaintext);
    }

    #[test]
    fn any_change_fails_authentication_and_leaves_the_ciphertext() {
        let (key, nonce, ad) = ([7u8; 32], [9u8; 24], *b"associated");
        let mut sealed = [0x5au8; 64];
        let tag = seal(&key, &nonce, &ad, &mut sealed).unwrap();
        let fails = |k: &[u8; 32], n: &[u8; 24], a: &[u8], c: &[u8; 64], t: &[u8; 16]| {
            let mut b = *c;
            let r = open(k, n, a, &mut b, t);
            assert_eq!(&b, c, "buffer changed on failure");
            matches!(r, Err(Error::AuthenticationFailed { .. }))
        };
        let mut k = key;
        k[0] ^= 1;
        assert!(fails(&k, &nonce, &ad, &sealed, &tag));
        let mut n = nonce;
        n[23] ^= 1;
        assert!(fails(&key, &n, &ad, &sealed, &tag));
        assert!(fails(&key, &nonce, b"associatee", &sealed, &tag));
        let mut c = sealed;
        c[3] ^= 0x80;
        assert!(fails(&key, &nonce, &ad, &c, &tag));
        let mut t = tag;
        t[15] ^= 1;
        assert!(fails(&key, &nonce, &ad, &sealed, &t));
        let mut b = sealed;
        open(&key, &nonce, &ad, &mut b, &tag).unwrap();
        assert_eq!(b, [0x5au8; 64]);
    }
}
