//! The built-in implementations registered in the default registry, with
//! their names and priorities.
//!
//! Priorities follow the kernel's habit (higher = preferred): aws-lc's
//! VAES-AVX512 XTS beats our RustCrypto XTS loop (benches: ~0.9x vs ~0.25x
//! of raw aws-lc). For AES-CBC-CTS, aws-lc CBC + our CS3 step measured ~3x
//! faster than RustCrypto on 32-byte names (the `aes` crate's VAES-512
//! backend sets up its round keys per call), so it ranks first; the batched
//! RustCrypto path and a one-block-at-a-time reference follow, so the
//! fall-through on a failing self-test is real.

#![forbid(unsafe_code)]

use aes::{Aes128, Aes256};
use sm4::Sm4;

use crate::adiantum::Adiantum;
use crate::awslc::{AwsLcCbcCts, AwsLcXts};
use crate::cts::Cts;
use crate::essiv::Essiv;
use crate::hctr2::Hctr2;
use crate::registry::{Implementation, Properties};
use crate::xts::Xts;
use crate::{Algorithm, CipherKey, Error, SecretBox};

type Boxed = Result<SecretBox<dyn CipherKey>, Error>;

fn boxed<K: CipherKey + 'static>(k: Result<K, Error>) -> Boxed {
    Ok(SecretBox::cipher_key(k?))
}

const fn cpu(
    algorithm: Algorithm,
    name: &'static str,
    priority: u32,
    new_key: fn(&[u8]) -> Boxed,
) -> Implementation {
    Implementation {
        algorithm,
        name,
        priority,
        properties: Properties::NONE,
        new_key,
    }
}

pub(crate) static BUILTIN: &[Implementation] = &[
    cpu(Algorithm::Aes256Xts, "xts-aes-256-awslc", 800, |k| {
        boxed(AwsLcXts::new(k))
    }),
    cpu(Algorithm::Aes256Xts, "xts-aes-256-rustcrypto", 600, |k| {
        boxed(Xts::<Aes256>::new("xts-aes-256-rustcrypto", k))
    }),
    cpu(Algorithm::Sm4Xts, "xts-sm4-rustcrypto", 300, |k| {
        boxed(Xts::<Sm4>::new("xts-sm4-rustcrypto", k))
    }),
    cpu(
        Algorithm::Aes128CbcCts,
        "cts-cbc-aes-128-rustcrypto",
        400,
        |k| boxed(Cts::<Aes128>::new("cts-cbc-aes-128-rustcrypto", k, true)),
    ),
    cpu(Algorithm::Aes128CbcCts, "cts-cbc-aes-128-awslc", 500, |k| {
        boxed(AwsLcCbcCts::new("cts-cbc-aes-128-awslc", k, 16))
    }),
    cpu(
        Algorithm::Aes128CbcCts,
        "cts-cbc-aes-128-reference",
        100,
        |k| boxed(Cts::<Aes128>::new("cts-cbc-aes-128-reference", k, false)),
    ),
    cpu(
        Algorithm::Aes256CbcCts,
        "cts-cbc-aes-256-rustcrypto",
        400,
        |k| boxed(Cts::<Aes256>::new("cts-cbc-aes-256-rustcrypto", k, true)),
    ),
    cpu(Algorithm::Aes256CbcCts, "cts-cbc-aes-256-awslc", 500, |k| {
        boxed(AwsLcCbcCts::new("cts-cbc-aes-256-awslc", k, 32))
    }),
    cpu(
        Algorithm::Aes256CbcCts,
        "cts-cbc-aes-256-reference",
        100,
        |k| boxed(Cts::<Aes256>::new("cts-cbc-aes-256-reference", k, false)),
    ),
    cpu(Algorithm::Sm4CbcCts, "cts-cbc-sm4-rustcrypto", 300, |k| {
        boxed(Cts::<Sm4>::new("cts-cbc-sm4-rustcrypto", k, true))
    }),
    cpu(Algorithm::Sm4CbcCts, "cts-cbc-sm4-reference", 100, |k| {
        boxed(Cts::<Sm4>::new("cts-cbc-sm4-reference", k, false))
    }),
    cpu(
        Algorithm::Aes128CbcEssiv,
        "essiv-cbc-aes-128-sha256-rustcrypto",
        300,
        |k| {
            boxed(Essiv::<Aes128>::new(
                "essiv-cbc-aes-128-sha256-rustcrypto",
                k,
            ))
        },
    ),
    cpu(
        Algorithm::Adiantum,
        "adiantum-xchacha12-aes-rustcrypto",
        300,
        |k| boxed(Adiantum::new(k)),
    ),
    cpu(
        Algorithm::Aes256Hctr2,
        "hctr2-aes-256-rustcrypto",
        300,
        |k| boxed(Hctr2::<Aes256>::new("hctr2-aes-256-rustcrypto", k)),
    ),
];

/// The built-in MAC implementations (RustCrypto POLYVAL and AES, CPU code
/// with runtime feature detection; no refused property).
pub(crate) static BUILTIN_MACS: &[crate::registry::MacImplementation] =
    &[crate::registry::MacImplementation {
        name: "polyval-aes-256-mac-rustcrypto",
        priority: 500,
        properties: Properties::NONE,
        new_key: |k| Ok(SecretBox::mac_key(crate::mac::PolyvalAes256Mac::new(k)?)),
    }];
