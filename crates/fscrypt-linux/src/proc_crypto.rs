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

use std::fmt;
use std::path::{Path, PathBuf};

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

/// Self-test state of one driver (`selftest` line).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SelfTest {
    /// `passed`: the crypto manager's known-answer tests passed (or the
    /// algorithm has none and is allowed untested).
    Passed,
    /// `unknown`: not tested yet, or the test failed. The Crypto API does
    /// not hand out such a driver for a lookup by name.
    Unknown,
    /// Any other value (future kernels).
    Other(String),
}

impl SelfTest {
    fn parse(value: &str) -> SelfTest {
        match value {
            "passed" => SelfTest::Passed,
            "unknown" => SelfTest::Unknown,
            other => SelfTest::Other(other.to_owned()),
        }
    }

    /// The text /proc/crypto shows.
    pub fn as_str(&self) -> &str {
        match self {
            SelfTest::Passed => "passed",
            SelfTest::Unknown => "unknown",
            SelfTest::Other(s) => s,
        }
    }
}

/// One entry of `/proc/crypto` (kernel: one `struct crypto_alg`, printed by
/// `c_show()` in crypto/proc.c).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AlgEntry {
    /// Algorithm name (`cra_name`), e.g. `xts(aes)`.
    pub name: String,
    /// Implementation name (`cra_driver_name`), e.g. `xts-aes-vaes-avx2`.
    pub driver: String,
    /// `kernel` when built in, else the module name.
    pub module: String,
    /// Selection priority (`cra_priority`); higher wins.
    pub priority: i32,
    /// Self-test state.
    pub selftest: SelfTest,
    /// `internal : yes`: only reachable through a wrapper, never by name.
    pub internal: bool,
    /// The `type` line (`skcipher`, `lskcipher`, `cipher`, `shash`, ...), or
    /// empty when absent.
    pub alg_type: String,
    /// The `async` line, present for skcipher/aead/ahash types only.
    pub asynchronous: Option<bool>,
    /// 1-based line number of the entry's `name` line (for messages).
    pub line: usize,
}

/// The parsed contents of `/proc/crypto`, in file order.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ProcCrypto {
    /// Every entry.
    pub entries: Vec<AlgEntry>,
}

impl ProcCrypto {
    /// Parses the text of `/proc/crypto`: entries separated by blank lines,
    /// each line `key : value` (key padded with spaces). Unknown keys are
    /// ignored, so newer kernels' extra lines parse.
    ///
    /// # Errors
    /// [`ProcCryptoError::MalformedLine`] for a line without `:`,
    /// [`ProcCryptoError::MissingField`] for an entry without `name`,
    /// `driver` or `priority`, [`ProcCryptoError::BadPriority`] for a
    /// non-integer priority.
    pub fn parse(text: &str) -> Result<ProcCrypto, ProcCryptoError> {
        let mut entries = Vec::new();
        let mut current: Option<Partial> = None;
        for (idx, raw) in text.lines().enumerate() {
            let line_no = idx + 1;
            if raw.trim().is_empty() {
                if let Some(p) = current.take() {
                    entries.push(p.finish()?);
                }
                continue;
            }
            let Some((key, value)) = raw.split_once(':') else {
                return Err(ProcCryptoError::MalformedLine {
                    line: line_no,
                    text: raw.to_owned(),
                });
            };
            let (key, value) = (key.trim(), value.trim());
            let p = current.get_or_insert_with(|| Partial::new(line_no));
            match key {
                "name" => p.name = Some(value.to_owned()),
                "driver" => p.driver = Some(value.to_owned()),
                "module" => p.module = value.to_owned(),
                "priority" => {
                    let prio = value
                        .parse::<i32>()
                        .map_err(|_| ProcCryptoError::BadPriority {
                            line: line_no,
                            value: value.to_owned(),
                        })?;
                    p.priority = Some(prio);
                }
                "selftest" => p.selftest = SelfTest::parse(value),
                "internal" => p.internal = value == "yes",
                "type" => p.alg_type = value.to_owned(),
                "async" => p.asynchronous = Some(value == "yes"),
                _ => {}
            }
        }
        if let Some(p) = current.take() {
            entries.push(p.finish()?);
        }
        Ok(ProcCrypto { entries })
    }

    /// Reads and parses `path` (normally [`PROC_CRYPTO_PATH`]).
    ///
    /// # Errors
    /// [`ProcCryptoError::Read`] when the file cannot be read, else as
    /// [`ProcCrypto::parse`].
    pub fn read(path: &Path) -> Result<ProcCrypto, ProcCryptoError> {
        let text = std::fs::read_to_string(path).map_err(|source| ProcCryptoError::Read {
            path: path.to_owned(),
            source,
        })?;
        ProcCrypto::parse(&text)
    }

    /// Entries whose algorithm name is `name`, highest priority first (ties
    /// keep file order, i.e. the kernel's list order).
    pub fn by_name(&self, name: &str) -> Vec<&AlgEntry> {
        let mut v: Vec<&AlgEntry> = self.entries.iter().filter(|e| e.name == name).collect();
        v.sort_by_key(|e| std::cmp::Reverse(e.priority));
        v
    }
}

struct Partial {
    line: usize,
    name: Option<String>,
    driver: Option<String>,
    module: String,
    priority: Option<i32>,
    selftest: SelfTest,
    internal: bool,
    alg_type: String,
    asynchronous: Option<bool>,
}

impl Partial {
    fn new(line: usize) -> Partial {
        Partial {
            line,
            name: None,
            driver: None,
            module: String::new(),
            priority: None,
            selftest: SelfTest::Other(String::new()),
            internal: false,
            alg_type: String::new(),
            asynchronous: None,
        }
    }

    fn finish(self) -> Result<AlgEntry, ProcCryptoError> {
        let missing = |field| ProcCryptoError::MissingField {
            line: self.line,
            field,
        };
        Ok(AlgEntry {
            name: self.name.clone().ok_or_else(|| missing("name"))?,
            driver: self.driver.clone().ok_or_else(|| missing("driver"))?,
            priority: self.priority.ok_or_else(|| missing("priority"))?,
            module: self.module,
            selftest: self.selftest,
            internal: self.internal,
            alg_type: self.alg_type,
            asynchronous: self.asynchronous,
            line: self.line,
        })
    }
}

/// CPU architecture, which decides the kernel options that give fast
/// drivers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Arch {
    /// x86-64 (AES-NI, VAES, PCLMULQDQ, AVX2).
    X86_64,
    /// 64-bit Arm (ARMv8 Crypto Extensions, NEON).
    Aarch64,
    /// 32-bit Arm.
    Arm,
    /// Anything else: only generic advice.
    Other,
}

impl Arch {
    /// The architecture this program was built for.
    pub fn current() -> Arch {
        Arch::from_name(std::env::consts::ARCH)
    }

    /// Maps a Rust/`uname -m` architecture name (`x86_64`, `aarch64`,
    /// `arm64`, `arm`, `armv7l`) to an [`Arch`]; unknown names give
    /// [`Arch::Other`].
    pub fn from_name(name: &str) -> Arch {
        match name {
            "x86_64" | "amd64" => Arch::X86_64,
            "aarch64" | "arm64" => Arch::Aarch64,
            n if n.starts_with("arm") => Arch::Arm,
            _ => Arch::Other,
        }
    }

    /// Short name for reports.
    pub fn as_str(self) -> &'static str {
        match self {
            Arch::X86_64 => "x86_64",
            Arch::Aarch64 => "aarch64",
            Arch::Arm => "arm",
            Arch::Other => "other",
        }
    }
}

/// Whether `/proc/cpuinfo` (its text) advertises AES instructions: the `aes`
/// word in an x86 `flags` line or an Arm `Features` line. `None` when the
/// text has neither line (unknown CPU description).
pub fn cpu_has_aes(cpuinfo: &str) -> Option<bool> {
    let mut seen = false;
    for line in cpuinfo.lines() {
        let Some((key, value)) = line.split_once(':') else {
            continue;
        };
        let key = key.trim();
        if key == "flags" || key == "Features" {
            seen = true;
            if value.split_whitespace().any(|w| w == "aes") {
                return Some(true);
            }
        }
    }
    seen.then_some(false)
}

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
fn split_template(name: &str) -> Option<(&str, Vec<&str>)> {
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

#[cfg(test)]
mod tests {
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
