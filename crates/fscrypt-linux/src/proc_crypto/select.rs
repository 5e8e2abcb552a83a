//! The Crypto API's driver selection: which registered drivers a lookup
//! by name skips ([`Exclusion`]), which are slow fallbacks, and how a name
//! resolves ([`resolve`]), instantiating templates when nothing qualifies.

use std::fmt;

use super::*;

/// Why a registered driver is not handed out for a lookup by name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Exclusion {
    /// `async : yes`. fscrypt's mask contains `CRYPTO_ALG_ASYNC`, so the
    /// Crypto API skips it for fscrypt (other users may still get it).
    Asynchronous,
    /// Driver name of a known hardware offload family (its flags carry
    /// `CRYPTO_ALG_KERN_DRIVER_ONLY`, which fscrypt's mask refuses; the flag
    /// itself is not shown in /proc/crypto). The string is the family token.
    OffloadFamily(&'static str),
    /// `internal : yes`: never returned for a lookup by name.
    Internal,
    /// `selftest` is not `passed`: not tested yet or failed.
    SelfTestNotPassed,
}

impl Exclusion {
    /// `true` for the exclusions that come from fscrypt's mask (any other
    /// Crypto API user could still get the driver).
    pub fn is_fscrypt_mask(&self) -> bool {
        matches!(self, Exclusion::Asynchronous | Exclusion::OffloadFamily(_))
    }

    /// A short machine-readable tag (`async`, `offload`, `internal`,
    /// `selftest`).
    pub fn tag(&self) -> &'static str {
        match self {
            Exclusion::Asynchronous => "async",
            Exclusion::OffloadFamily(_) => "offload",
            Exclusion::Internal => "internal",
            Exclusion::SelfTestNotPassed => "selftest",
        }
    }
}

impl fmt::Display for Exclusion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Exclusion::Asynchronous => {
                f.write_str("asynchronous (async: yes); fscrypt's mask refuses CRYPTO_ALG_ASYNC")
            }
            Exclusion::OffloadFamily(fam) => write!(
                f,
                "hardware offload driver family `{fam}` (CRYPTO_ALG_KERN_DRIVER_ONLY); \
                 fscrypt's mask refuses it"
            ),
            Exclusion::Internal => f.write_str("internal: yes; never returned by name"),
            Exclusion::SelfTestNotPassed => {
                f.write_str("self-test not passed (not run yet or failed)")
            }
        }
    }
}

/// Known hardware offload driver families, matched against the `-`/`_`
/// separated words of a driver name (e.g. `qat_aes_xts`, `xts-aes-caam-qi2`,
/// `xts-aes-qce`, `stm32-cryp`, `xts-aes-ccp`, `hisi_sec_...`,
/// `xts-aes-omap`, `atmel-xts-aes`, `xts-aes-sun8i-ce`, `mtk-aes`,
/// `safexcel-xts-aes`). Source: driver names in the kernel's
/// drivers/crypto/ tree (facts only).
pub const OFFLOAD_FAMILIES: &[&str] = &[
    "qat", "caam", "qce", "stm32", "ccp", "hisi", "omap", "atmel", "sun4i", "sun8i", "mtk",
    "safexcel", "chcr", "ccree", "nitrox", "n5", "artpec6", "talitos", "sahara", "mv", "ixp4xx",
    "rk", "amlogic", "aspeed", "zynqmp", "keembay", "virtio", "padlock", "geode", "img", "s5p",
    "mxs", "octeontx", "otx", "otx2", "cpt", "sec2", "ux500", "starfive", "tegra", "qcom",
];

/// The exclusions that apply to `entry` for a lookup by fscrypt.
pub fn exclusions(entry: &AlgEntry) -> Vec<Exclusion> {
    let mut out = Vec::new();
    if entry.internal {
        out.push(Exclusion::Internal);
    }
    if entry.selftest != SelfTest::Passed {
        out.push(Exclusion::SelfTestNotPassed);
    }
    if entry.asynchronous == Some(true) {
        out.push(Exclusion::Asynchronous);
    }
    if let Some(fam) = offload_family(&entry.driver) {
        out.push(Exclusion::OffloadFamily(fam));
    }
    out
}

/// The offload family of a driver name, if any word of it (split on `-`,
/// `_`, `(`, `)`, `,`) is one of [`OFFLOAD_FAMILIES`].
pub fn offload_family(driver: &str) -> Option<&'static str> {
    driver
        .split(['-', '_', '(', ')', ','])
        .filter(|w| !w.is_empty())
        .find_map(|w| OFFLOAD_FAMILIES.iter().copied().find(|f| *f == w))
}

/// How much a slow fallback matters for fscrypt.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Severity {
    /// On the data path (every data unit or filename): throughput-limiting.
    Major,
    /// Used once per file or key (KDF): noticeable only for many small files.
    Minor,
}

/// A slow generic driver found in the chain the kernel would use.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SlowFallback {
    /// The generic driver's name, e.g. `aes-fixed-time`.
    pub driver: String,
    /// Why it is slow.
    pub reason: &'static str,
    /// Kernel options that register a faster driver on this architecture.
    pub fix: &'static [&'static str],
    /// How much it matters.
    pub severity: Severity,
}

/// The generic drivers we flag, with reason and per-arch fixes.
fn slow_driver(component: &str, arch: Arch) -> Option<SlowFallback> {
    let (reason, severity, x86, arm64, arm): (
        &'static str,
        Severity,
        &'static [&'static str],
        &'static [&'static str],
        &'static [&'static str],
    ) = match component {
        "aes-generic" => (
            "table-based generic C AES: no AES instructions, not constant-time (cache-timing leaks)",
            Severity::Major,
            &["CONFIG_CRYPTO_AES_NI_INTEL"],
            &[
                "CONFIG_CRYPTO_AES_ARM64_CE_BLK",
                "CONFIG_CRYPTO_AES_ARM64_CE",
            ],
            &["CONFIG_CRYPTO_AES_ARM_CE", "CONFIG_CRYPTO_AES_ARM_BS"],
        ),
        "aes-fixed-time" => (
            "constant-time generic C AES (CONFIG_CRYPTO_AES_TI): safe but an order of magnitude \
             slower than AES instructions",
            Severity::Major,
            &["CONFIG_CRYPTO_AES_NI_INTEL"],
            &[
                "CONFIG_CRYPTO_AES_ARM64_CE_BLK",
                "CONFIG_CRYPTO_AES_ARM64_CE",
            ],
            &["CONFIG_CRYPTO_AES_ARM_CE", "CONFIG_CRYPTO_AES_ARM_BS"],
        ),
        "sm4-generic" => (
            "generic C SM4, one block at a time",
            Severity::Major,
            &[
                "CONFIG_CRYPTO_SM4_AESNI_AVX2_X86_64",
                "CONFIG_CRYPTO_SM4_AESNI_AVX_X86_64",
            ],
            &[
                "CONFIG_CRYPTO_SM4_ARM64_CE_BLK",
                "CONFIG_CRYPTO_SM4_ARM64_NEON_BLK",
            ],
            &[],
        ),
        "chacha20-generic" | "xchacha12-generic" | "xchacha20-generic" => (
            "generic C ChaCha, no SIMD",
            Severity::Major,
            &["CONFIG_CRYPTO_CHACHA20_X86_64"],
            &["CONFIG_CRYPTO_CHACHA20_NEON"],
            &["CONFIG_CRYPTO_CHACHA20_NEON"],
        ),
        "nhpoly1305-generic" => (
            "generic C NH hash, no SIMD (Adiantum's hash)",
            Severity::Major,
            &[
                "CONFIG_CRYPTO_NHPOLY1305_AVX2",
                "CONFIG_CRYPTO_NHPOLY1305_SSE2",
            ],
            &["CONFIG_CRYPTO_NHPOLY1305_NEON"],
            &["CONFIG_CRYPTO_NHPOLY1305_NEON"],
        ),
        "polyval-generic" => (
            "generic C POLYVAL, no carry-less multiply (HCTR2's hash)",
            Severity::Major,
            &["CONFIG_CRYPTO_POLYVAL_CLMUL_NI"],
            &["CONFIG_CRYPTO_POLYVAL_ARM64_CE"],
            &[],
        ),
        "sha256-generic" => (
            "generic C SHA-256 (used once per file key or ESSIV key)",
            Severity::Minor,
            &["CONFIG_CRYPTO_SHA256_SSSE3"],
            &["CONFIG_CRYPTO_SHA2_ARM64_CE"],
            &["CONFIG_CRYPTO_SHA2_ARM_CE"],
        ),
        "sha512-generic" => (
            "generic C SHA-512 (HKDF-SHA512, once per file key)",
            Severity::Minor,
            &["CONFIG_CRYPTO_SHA512_SSSE3"],
            &["CONFIG_CRYPTO_SHA512_ARM64_CE"],
            &["CONFIG_CRYPTO_SHA512_ARM"],
        ),
        _ => return None,
    };
    let fix = match arch {
        Arch::X86_64 => x86,
        Arch::Aarch64 => arm64,
        Arch::Arm => arm,
        Arch::Other => &[],
    };
    Some(SlowFallback {
        driver: component.to_owned(),
        reason,
        fix,
        severity,
    })
}

/// The slow generic drivers inside a (possibly nested) driver name such as
/// `xts(ecb(aes-fixed-time))`, once each, in order of appearance.
pub fn slow_fallbacks(driver: &str, arch: Arch) -> Vec<SlowFallback> {
    let mut out: Vec<SlowFallback> = Vec::new();
    for comp in driver.split(['(', ')', ',']).filter(|c| !c.is_empty()) {
        if let Some(s) = slow_driver(comp, arch)
            && !out.iter().any(|o| o.driver == s.driver)
        {
            out.push(s);
        }
    }
    out
}

/// One registered driver considered for a name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Candidate {
    /// The /proc/crypto entry.
    pub entry: AlgEntry,
    /// Why it is not eligible (empty = eligible for fscrypt).
    pub exclusions: Vec<Exclusion>,
}

/// How the kernel would satisfy a lookup by name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Resolution {
    /// A registered driver with this name qualifies; it is
    /// `candidates[index]`.
    Registered {
        /// Index into [`Lookup::candidates`].
        index: usize,
    },
    /// No registered driver qualifies (none is instantiated yet, or all are
    /// refused): the Crypto API's manager builds the template over the best
    /// drivers of its parts.
    Template {
        /// The template, e.g. `xts`.
        template: &'static str,
        /// Kernel option that provides the template.
        config: &'static str,
        /// Whether fscrypt's Kconfig (`FS_ENCRYPTION_ALGS`) selects the
        /// template, i.e. it is present whenever fscrypt is.
        selected_by_fscrypt: bool,
        /// The parts' lookups, in template-argument order.
        parts: Vec<Lookup>,
    },
    /// No registered driver and no template known to build it: the kernel
    /// would try to load module `crypto-<name>` and fail if it does not
    /// exist.
    Missing {
        /// Kernel options that provide the algorithm.
        config: &'static [&'static str],
    },
}

/// The result of resolving one algorithm name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Lookup {
    /// The algorithm name looked up.
    pub name: String,
    /// Registered drivers with this name, highest priority first.
    pub candidates: Vec<Candidate>,
    /// What fscrypt gets.
    pub resolution: Resolution,
}

impl Lookup {
    /// The driver name fscrypt would get: the registered driver's name, or
    /// the predicted instance name (`xts(ecb(aes-fixed-time))`, Linux ≥ 6.7
    /// naming). `None` when some part is missing.
    pub fn driver(&self) -> Option<String> {
        match &self.resolution {
            Resolution::Registered { index } => Some(self.candidates[*index].entry.driver.clone()),
            Resolution::Template {
                template, parts, ..
            } => {
                let mut names = Vec::with_capacity(parts.len());
                for p in parts {
                    names.push(p.driver()?);
                }
                let instance = if *template == "hctr2" {
                    "hctr2_base"
                } else {
                    template
                };
                Some(format!("{instance}({})", names.join(",")))
            }
            Resolution::Missing { .. } => None,
        }
    }

    /// `true` when the kernel can provide the algorithm at all.
    pub fn available(&self) -> bool {
        self.driver().is_some()
    }

    /// The chosen registered candidate, when the resolution is
    /// [`Resolution::Registered`].
    pub fn chosen(&self) -> Option<&Candidate> {
        match self.resolution {
            Resolution::Registered { index } => self.candidates.get(index),
            _ => None,
        }
    }

    /// The driver a lookup *without* fscrypt's mask would get among the
    /// registered ones (what e.g. dm-crypt or AF_ALG users get), when it
    /// differs from fscrypt's choice.
    pub fn unmasked_pick(&self) -> Option<&Candidate> {
        let best = self
            .candidates
            .iter()
            .find(|c| c.exclusions.iter().all(Exclusion::is_fscrypt_mask))?;
        // An eligible `best` is fscrypt's own choice: nothing to contrast.
        (!best.exclusions.is_empty()).then_some(best)
    }

    /// Every lookup in this tree (self first, then parts depth-first).
    pub fn walk(&self) -> Vec<&Lookup> {
        let mut out = vec![self];
        if let Resolution::Template { parts, .. } = &self.resolution {
            for p in parts {
                out.extend(p.walk());
            }
        }
        out
    }
}

/// Splits `tmpl(a,b(c))` into (`tmpl`, [`a`, `b(c)`]); `None` for a plain
/// name or unbalanced parentheses.
pub(super) fn split_template(name: &str) -> Option<(&str, Vec<&str>)> {
    let open = name.find('(')?;
    let inner = name.strip_suffix(')')?.get(open + 1..)?;
    let mut args = Vec::new();
    let (mut depth, mut start) = (0i32, 0usize);
    for (i, ch) in inner.char_indices() {
        match ch {
            '(' => depth += 1,
            ')' => {
                depth -= 1;
                if depth < 0 {
                    return None;
                }
            }
            ',' if depth == 0 => {
                args.push(&inner[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    if depth != 0 {
        return None;
    }
    args.push(&inner[start..]);
    Some((&name[..open], args))
}

/// The parts a template instance is built from, plus its kernel option and
/// whether fscrypt's Kconfig selects it (`FS_ENCRYPTION_ALGS` selects AES,
/// CBC, CTS, ECB, HMAC, SHA512 and XTS). `None` for unknown templates.
fn template_parts(template: &str, args: &[&str]) -> Option<(Vec<String>, &'static str, bool)> {
    let leaf = |a: &str| !a.contains('(');
    match (template, args) {
        // xts over a bare cipher grabs the skcipher `ecb(cipher)`.
        ("xts", [c]) if leaf(c) => Some((vec![format!("ecb({c})")], "CONFIG_CRYPTO_XTS", true)),
        ("xts", [c]) => Some((vec![(*c).to_owned()], "CONFIG_CRYPTO_XTS", true)),
        ("cts", [c]) => Some((vec![(*c).to_owned()], "CONFIG_CRYPTO_CTS", true)),
        // Linux >= 6.7: cbc is an lskcipher template over `ecb(cipher)`.
        ("cbc", [c]) if leaf(c) => Some((vec![format!("ecb({c})")], "CONFIG_CRYPTO_CBC", true)),
        ("ecb", [c]) => Some((vec![(*c).to_owned()], "CONFIG_CRYPTO_ECB", true)),
        ("xctr", [c]) => Some((vec![(*c).to_owned()], "CONFIG_CRYPTO_XCTR", false)),
        ("essiv", [c, h]) => Some((
            vec![(*c).to_owned(), (*h).to_owned()],
            "CONFIG_CRYPTO_ESSIV",
            false,
        )),
        ("adiantum", [s, b]) => Some((
            vec![(*s).to_owned(), (*b).to_owned(), "nhpoly1305".to_owned()],
            "CONFIG_CRYPTO_ADIANTUM",
            false,
        )),
        ("hctr2", [b]) => Some((
            vec![format!("xctr({b})"), "polyval".to_owned()],
            "CONFIG_CRYPTO_HCTR2",
            false,
        )),
        ("hmac", [h]) => Some((vec![(*h).to_owned()], "CONFIG_CRYPTO_HMAC", true)),
        _ => None,
    }
}

/// Kernel options providing a leaf algorithm.
fn leaf_config(name: &str) -> &'static [&'static str] {
    match name {
        "aes" => &["CONFIG_CRYPTO_AES"],
        "sm4" => &["CONFIG_CRYPTO_SM4_GENERIC"],
        "xchacha12" | "xchacha20" | "chacha20" => &["CONFIG_CRYPTO_CHACHA20"],
        "nhpoly1305" => &["CONFIG_CRYPTO_NHPOLY1305"],
        "polyval" => &["CONFIG_CRYPTO_POLYVAL"],
        "sha256" => &["CONFIG_CRYPTO_SHA256"],
        "sha512" => &["CONFIG_CRYPTO_SHA512"],
        _ => &[],
    }
}

/// Resolves `name` the way the Crypto API would for fscrypt: the eligible
/// registered driver with the highest priority, else the template instance
/// over its parts' resolutions, else missing. Depth is bounded by the name's
/// nesting.
pub fn resolve(pc: &ProcCrypto, name: &str) -> Lookup {
    let candidates: Vec<Candidate> = pc
        .by_name(name)
        .into_iter()
        .map(|e| Candidate {
            exclusions: exclusions(e),
            entry: e.clone(),
        })
        .collect();
    let resolution = if let Some(index) = candidates.iter().position(|c| c.exclusions.is_empty()) {
        Resolution::Registered { index }
    } else if let Some((template, args)) = split_template(name) {
        match template_parts(template, &args) {
            Some((parts, config, selected_by_fscrypt)) => Resolution::Template {
                template: static_template(template),
                config,
                selected_by_fscrypt,
                parts: parts.iter().map(|p| resolve(pc, p)).collect(),
            },
            None => Resolution::Missing { config: &[] },
        }
    } else {
        Resolution::Missing {
            config: leaf_config(name),
        }
    };
    Lookup {
        name: name.to_owned(),
        candidates,
        resolution,
    }
}

fn static_template(t: &str) -> &'static str {
    match t {
        "xts" => "xts",
        "cts" => "cts",
        "cbc" => "cbc",
        "ecb" => "ecb",
        "xctr" => "xctr",
        "essiv" => "essiv",
        "adiantum" => "adiantum",
        "hctr2" => "hctr2",
        "hmac" => "hmac",
        _ => "?",
    }
}
