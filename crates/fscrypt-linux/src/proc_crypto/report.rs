//! fscrypt's algorithm names and the per-algorithm report ([`analyze`]).

use super::*;

/// What fscrypt uses a kernel algorithm name for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FscryptAlgorithm {
    /// Crypto API name (spec §1.1 "kernel crypto API name" column).
    pub kernel_name: &'static str,
    /// The fscrypt modes or functions using it, for display.
    pub used_for: &'static str,
    /// `true` for data-path algorithms (contents, filenames), `false` for
    /// key derivation.
    pub data_path: bool,
}

/// Every Crypto API name kernel fscrypt requests (spec §1.1, §4.2, §4.3,
/// §2.3).
pub const FSCRYPT_ALGORITHMS: &[FscryptAlgorithm] = &[
    FscryptAlgorithm {
        kernel_name: "xts(aes)",
        used_for: "contents: AES-256-XTS (mode 1)",
        data_path: true,
    },
    FscryptAlgorithm {
        kernel_name: "cts(cbc(aes))",
        used_for: "filenames: AES-256-CTS (mode 4), AES-128-CTS (mode 6)",
        data_path: true,
    },
    FscryptAlgorithm {
        kernel_name: "essiv(cbc(aes),sha256)",
        used_for: "contents: AES-128-CBC-ESSIV (mode 5)",
        data_path: true,
    },
    FscryptAlgorithm {
        kernel_name: "adiantum(xchacha12,aes)",
        used_for: "contents and filenames: Adiantum (mode 9)",
        data_path: true,
    },
    FscryptAlgorithm {
        kernel_name: "hctr2(aes)",
        used_for: "filenames: AES-256-HCTR2 (mode 10)",
        data_path: true,
    },
    FscryptAlgorithm {
        kernel_name: "xts(sm4)",
        used_for: "contents: SM4-XTS (mode 7)",
        data_path: true,
    },
    FscryptAlgorithm {
        kernel_name: "cts(cbc(sm4))",
        used_for: "filenames: SM4-CTS (mode 8)",
        data_path: true,
    },
    FscryptAlgorithm {
        kernel_name: "hmac(sha512)",
        used_for: "v2 key derivation: HKDF-SHA512",
        data_path: false,
    },
    FscryptAlgorithm {
        kernel_name: "sha512",
        used_for: "v2 key derivation: HKDF-SHA512 (via hmac)",
        data_path: false,
    },
    FscryptAlgorithm {
        kernel_name: "sha256",
        used_for: "ESSIV key (mode 5), hw-wrapped/legacy helpers",
        data_path: false,
    },
];

/// The report for one fscrypt algorithm name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AlgorithmReport {
    /// Which algorithm and what fscrypt uses it for.
    pub algorithm: FscryptAlgorithm,
    /// How the kernel resolves it.
    pub lookup: Lookup,
    /// Slow generic drivers in the resolved chain (empty = fine or missing).
    pub slow: Vec<SlowFallback>,
    /// Drivers fscrypt's mask refuses in this tree: (name looked up,
    /// candidate).
    pub refused: Vec<(String, Candidate)>,
}

/// Resolves every name in [`FSCRYPT_ALGORITHMS`] against `pc`.
/// `arch` picks the kernel options named in the slow-fallback advice.
/// KDF algorithms get [`Severity::Minor`] slowness only.
pub fn analyze(pc: &ProcCrypto, arch: Arch) -> Vec<AlgorithmReport> {
    FSCRYPT_ALGORITHMS
        .iter()
        .map(|alg| {
            let lookup = resolve(pc, alg.kernel_name);
            let mut slow = lookup
                .driver()
                .map(|d| slow_fallbacks(&d, arch))
                .unwrap_or_default();
            if !alg.data_path {
                for s in &mut slow {
                    s.severity = Severity::Minor;
                }
            }
            let refused = lookup
                .walk()
                .into_iter()
                .flat_map(|l| {
                    l.candidates
                        .iter()
                        .filter(|c| c.exclusions.iter().any(Exclusion::is_fscrypt_mask))
                        .map(|c| (l.name.clone(), c.clone()))
                })
                .collect();
            AlgorithmReport {
                algorithm: *alg,
                lookup,
                slow,
                refused,
            }
        })
        .collect()
}
