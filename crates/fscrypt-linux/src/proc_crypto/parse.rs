//! Parsing `/proc/crypto` into [`ProcCrypto`] and `/proc/cpuinfo` into
//! what decides the fast drivers ([`Arch`], [`cpu_has_aes`]).

use std::path::Path;

use super::*;

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
