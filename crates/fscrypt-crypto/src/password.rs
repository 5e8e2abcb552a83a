//! Argon2id (RFC 9106), the passphrase KDF of the fscrypt-rs vault (not part
//! of the kernel format): a thin wrapper over the RustCrypto `argon2` crate,
//! version 0x13, with its `zeroize` feature so the memory blocks are wiped.

#![forbid(unsafe_code)]

use crate::Error;

/// Largest Argon2id memory cost accepted from stored parameters (a vault
/// config, a google/fscrypt protector or config): 4 GiB, in KiB. A damaged
/// or hostile file must not make an unlock or a login allocate without
/// bound.
pub const ARGON2_MAX_M_COST_KIB: u32 = 4 * 1024 * 1024;
/// Largest number of Argon2id passes accepted from stored parameters.
pub const ARGON2_MAX_T_COST: u32 = 1000;
/// Largest work `m × t` of one derivation accepted from stored parameters,
/// in KiB-passes: 32 GiB (e.g. 4 GiB × 8 passes or 256 MiB × 128 passes).
/// This bounds the time as well as the memory: a machine doing 0.5 to
/// 2 GiB-passes per second needs 16 to 64 s for it, so a damaged or hostile
/// file cannot make an unlock or a login run for much more than a minute; a
/// calibrated 1 s cost is 10 to 60 times smaller.
pub const ARGON2_MAX_WORK_KIB: u64 = 32 * 1024 * 1024;

/// Argon2id v1.3 of `passphrase` and `salt` with memory `m_cost_kib` KiB,
/// `t_cost` passes and `p_cost` lanes, filling `out` (4 bytes or more).
///
/// The parameters are checked by the library (RFC 9106 §3.1 bounds: salt
/// of 8 bytes or more, `m >= 8*p`, `t >= 1`, `1 <= p <= 2^24-1`); callers
/// that read parameters from untrusted input bound them further (memory).
///
/// # Errors
/// [`Error::Argon2`] naming the rejected input.
pub fn argon2id(
    passphrase: &[u8],
    salt: &[u8],
    m_cost_kib: u32,
    t_cost: u32,
    p_cost: u32,
    out: &mut [u8],
) -> Result<(), Error> {
    argon2id_keyed(passphrase, salt, &[], &[], m_cost_kib, t_cost, p_cost, out)
}

/// [`argon2id`] with RFC 9106's optional secret `K` and associated data `X`
/// (used by the known-answer test, RFC 9106 §5.3).
#[allow(clippy::too_many_arguments)]
pub(crate) fn argon2id_keyed(
    passphrase: &[u8],
    salt: &[u8],
    secret: &[u8],
    associated_data: &[u8],
    m_cost_kib: u32,
    t_cost: u32,
    p_cost: u32,
    out: &mut [u8],
) -> Result<(), Error> {
    let lib = |e: argon2::Error| Error::Argon2 {
        reason: argon2_reason(e),
    };
    let params = argon2::ParamsBuilder::new()
        .m_cost(m_cost_kib)
        .t_cost(t_cost)
        .p_cost(p_cost)
        .output_len(out.len())
        .data(argon2::AssociatedData::new(associated_data).map_err(lib)?)
        .build()
        .map_err(lib)?;
    let argon = if secret.is_empty() {
        argon2::Argon2::new(argon2::Algorithm::Argon2id, argon2::Version::V0x13, params)
    } else {
        argon2::Argon2::new_with_secret(
            secret,
            argon2::Algorithm::Argon2id,
            argon2::Version::V0x13,
            params,
        )
        .map_err(lib)?
    };
    argon.hash_password_into(passphrase, salt, out).map_err(lib)
}

/// A fixed description of an `argon2` error (the enum is `Copy`; its
/// `Display` texts are static).
fn argon2_reason(e: argon2::Error) -> &'static str {
    use argon2::Error as E;
    match e {
        E::AdTooLong => "associated data too long",
        E::AlgorithmInvalid => "invalid algorithm",
        E::B64Encoding(_) => "invalid base64",
        E::KeyIdTooLong => "key id too long",
        E::MemoryTooLittle => "memory cost too small (at least 8 KiB per lane)",
        E::MemoryTooMuch => "memory cost too large",
        E::OutputTooShort => "output too short (at least 4 bytes)",
        E::OutputTooLong => "output too long",
        E::PwdTooLong => "passphrase too long",
        E::SaltTooShort => "salt too short (at least 8 bytes)",
        E::SaltTooLong => "salt too long",
        E::SecretTooLong => "secret too long",
        E::ThreadsTooFew => "too few lanes (at least 1)",
        E::ThreadsTooMany => "too many lanes",
        E::TimeTooSmall => "too few passes (at least 1)",
        E::VersionInvalid => "invalid version",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// RFC 9106 §5.3, the Argon2id test vector: password 32 × 0x01, salt
    /// 16 × 0x02, secret 8 × 0x03, associated data 12 × 0x04, m = 32 KiB,
    /// t = 3, p = 4, 32-byte tag.
    #[test]
    fn rfc9106_argon2id_test_vector() {
        let mut tag = [0u8; 32];
        argon2id_keyed(
            &[0x01; 32],
            &[0x02; 16],
            &[0x03; 8],
            &[0x04; 12],
            32,
            3,
            4,
            &mut tag,
        )
        .unwrap();
        assert_eq!(
            hex::encode(tag),
            "0d640df58d78766c08c037a34a8b53c9d01ef0452d75b65eb52520e96b01e659"
        );
    }

    #[test]
    fn library_bounds_are_errors() {
        let mut out = [0u8; 32];
        for (salt, m, t, p) in [
            (&[0u8; 7][..], 64, 1, 1),
            (&[0u8; 16][..], 7, 1, 1),
            (&[0u8; 16][..], 64, 0, 1),
            (&[0u8; 16][..], 64, 1, 0),
        ] {
            assert!(
                matches!(
                    argon2id(b"pw", salt, m, t, p, &mut out),
                    Err(Error::Argon2 { .. })
                ),
                "salt {} m {m} t {t} p {p}",
                salt.len()
            );
        }
        assert!(matches!(
            argon2id(b"pw", &[0u8; 16], 64, 1, 1, &mut [0u8; 3]),
            Err(Error::Argon2 { .. })
        ));
    }
}
