//! What the kernel's Crypto API would give fscrypt: a parser for
//! `/proc/crypto` and the driver-selection rules applied to fscrypt's
//! algorithm names.
//!
//! Kernel fscrypt asks the Crypto API for an algorithm *by name* (spec §1.1:
//! `xts(aes)`, `cts(cbc(aes))`, `essiv(cbc(aes),sha256)`,
//! `adiantum(xchacha12,aes)`, `hctr2(aes)`, `xts(sm4)`, `cts(cbc(sm4))`, and
//! `hmac(sha512)` / `sha512` / `sha256` for its KDFs). The Crypto API returns
//! the registered driver with that name and the highest priority, skipping
//! internal and untested drivers and every driver whose flags intersect the
//! caller's mask. fscrypt's mask (`FSCRYPT_CRYPTOAPI_MASK` in
//! fs/crypto/fscrypt_private.h, current kernels) contains
//! `CRYPTO_ALG_ASYNC`, `CRYPTO_ALG_ALLOCATES_MEMORY` and
//! `CRYPTO_ALG_KERN_DRIVER_ONLY`. Only the first is visible in /proc/crypto
//! (`async : yes`); the last marks hardware offload drivers, which we
//! recognise by their known driver-name families (`qat_`, `-caam`, `-qce`,
//! ...). When no registered driver qualifies, or the name was never
//! requested yet, the kernel instantiates the template (`xts`, `cts`, ...)
//! over the best drivers of its parts; /proc/crypto lists such an instance
//! only after its first use, so this module predicts it.
//!
//! This module owns the pure parsing ([`ProcCrypto::parse`] over a `&str`)
//! and the analysis ([`analyze`]); [`ProcCrypto::read`] is the only I/O. It
//! leaves presentation (tables, JSON) to the CLI (`fscrypt-rs kernel-crypto`).
//! It does not load modules or instantiate templates: the report says what
//! the kernel *would* do.

use std::path::PathBuf;

/// Where the kernel lists its registered crypto algorithms.
pub const PROC_CRYPTO_PATH: &str = "/proc/crypto";

/// Where the kernel describes the CPU (used only for the AES-instruction hint).
pub const PROC_CPUINFO_PATH: &str = "/proc/cpuinfo";

/// Errors of parsing or reading `/proc/crypto`.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ProcCryptoError {
    /// The file could not be read (absent on kernels without
    /// `CONFIG_CRYPTO`, or not procfs).
    #[error("cannot read {path}: {source}")]
    Read {
        /// The file that was read.
        path: PathBuf,
        /// The underlying I/O error.
        source: std::io::Error,
    },
    /// A non-blank line is not of the form `key : value`.
    #[error("line {line}: expected `key : value`, found {text:?}")]
    MalformedLine {
        /// 1-based line number.
        line: usize,
        /// The offending line.
        text: String,
    },
    /// An entry lacks one of the fields every entry has (`name`, `driver`,
    /// `priority`).
    #[error("entry starting at line {line}: missing field `{field}`")]
    MissingField {
        /// 1-based line number of the entry's first line.
        line: usize,
        /// The missing field.
        field: &'static str,
    },
    /// The `priority` value is not a decimal integer.
    #[error("line {line}: priority {value:?} is not an integer")]
    BadPriority {
        /// 1-based line number.
        line: usize,
        /// The value found.
        value: String,
    },
}

mod parse;
mod report;
mod select;

pub use parse::{AlgEntry, Arch, ProcCrypto, SelfTest, cpu_has_aes};
pub use report::{AlgorithmReport, FSCRYPT_ALGORITHMS, FscryptAlgorithm, analyze};
pub use select::{
    Candidate, Exclusion, Lookup, OFFLOAD_FAMILIES, Resolution, Severity, SlowFallback, exclusions,
    offload_family, resolve, slow_fallbacks,
};

#[cfg(test)]
mod tests {
    use super::select::split_template;
    use super::*;

    #[test]
    fn split_template_nested() {
        assert_eq!(
            split_template("essiv(cbc(aes),sha256)"),
            Some(("essiv", vec!["cbc(aes)", "sha256"]))
        );
        assert_eq!(split_template("aes"), None);
        assert_eq!(split_template("xts(aes"), None);
        assert_eq!(split_template("xts(a))("), None);
    }

    #[test]
    fn offload_words() {
        assert_eq!(offload_family("qat_aes_xts"), Some("qat"));
        assert_eq!(offload_family("xts-aes-caam-qi2"), Some("caam"));
        assert_eq!(offload_family("xts-aes-vaes-avx2"), None);
        assert_eq!(offload_family("aes-aesni"), None);
        assert_eq!(offload_family("xts(ecb(aes-fixed-time))"), None);
    }

    #[test]
    fn malformed_inputs_are_errors() {
        assert!(matches!(
            ProcCrypto::parse("name : x\ngarbage\n"),
            Err(ProcCryptoError::MalformedLine { line: 2, .. })
        ));
        assert!(matches!(
            ProcCrypto::parse("name : x\ndriver : y\n"),
            Err(ProcCryptoError::MissingField {
                field: "priority",
                ..
            })
        ));
        assert!(matches!(
            ProcCrypto::parse("name : x\ndriver : y\npriority : high\n"),
            Err(ProcCryptoError::BadPriority { line: 3, .. })
        ));
        assert_eq!(ProcCrypto::parse("").map(|p| p.entries.len()).ok(), Some(0));
    }

    #[test]
    fn cpuinfo_flags() {
        assert_eq!(cpu_has_aes("flags\t\t: fpu sse2 aes avx2\n"), Some(true));
        assert_eq!(cpu_has_aes("Features\t: fp asimd evtstrm\n"), Some(false));
        assert_eq!(cpu_has_aes("processor : 0\n"), None);
    }
}
