//! The provider registry: every implementation of every [`Algorithm`],
//! selection by priority with refused properties and lazy known-answer
//! self-tests (like the Linux crypto API's `cra_priority` plus fscrypt's
//! refusal of `CRYPTO_ALG_ASYNC | CRYPTO_ALG_ALLOCATES_MEMORY |
//! CRYPTO_ALG_KERN_DRIVER_ONLY`, fs/crypto/keysetup.c).
//!
//! Selection for an algorithm returns the highest-priority implementation that
//! (a) has none of the registry's refused [`Properties`] and (b) has passed its
//! self-test. Self-tests run once per implementation, lazily and thread-safely
//! (a `OnceLock` per entry), on the vectors of [`self_test_vectors`]. A
//! failing implementation is logged (name and vector) and skipped; when none
//! is left, selection returns [`Error::NoImplementation`] — never a wrong answer.

#![forbid(unsafe_code)]

use core::fmt;
use core::ops::BitOr;
use std::sync::OnceLock;

use crate::kat::{self, Kat, MacKat};
use crate::mac::{MAC_KEY_SIZE, MacKey, PreparedMac};
use crate::{Algorithm, CipherKey, Error, PreparedKey, SecretBox};

/// Properties of an implementation that fscrypt may refuse (a bit mask).
///
/// Mirrors the Crypto API flags fscrypt refuses since Linux 6.x: drivers that
/// are asynchronous, allocate memory per request, or are driver-only hardware
/// offload engines — for 4096-byte data units they were 30–55× slower than CPU
/// instructions and some returned wrong ciphertext.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Properties(u8);

impl Properties {
    /// No property: a synchronous CPU implementation.
    pub const NONE: Properties = Properties(0);
    /// Completes requests asynchronously (kernel `CRYPTO_ALG_ASYNC`).
    pub const ASYNCHRONOUS: Properties = Properties(1);
    /// Allocates memory for each request (kernel `CRYPTO_ALG_ALLOCATES_MEMORY`).
    pub const ALLOCATES_PER_REQUEST: Properties = Properties(2);
    /// Driver-only hardware offload engine (kernel `CRYPTO_ALG_KERN_DRIVER_ONLY`).
    pub const OFFLOAD: Properties = Properties(4);
    /// The mask fscrypt refuses: all three properties.
    pub const REFUSED_BY_FSCRYPT: Properties = Properties(7);

    /// Whether every property in `other` is set in `self`.
    pub fn contains(self, other: Properties) -> bool {
        self.0 & other.0 == other.0
    }

    /// Properties set in both.
    pub fn intersection(self, other: Properties) -> Properties {
        Properties(self.0 & other.0)
    }

    /// Whether no property is set.
    pub fn is_empty(self) -> bool {
        self.0 == 0
    }

    /// Raw bits (1 = asynchronous, 2 = allocates per request, 4 = offload).
    pub fn bits(self) -> u8 {
        self.0
    }

    /// Names of the set properties: `"asynchronous"`,
    /// `"allocates_per_request"`, `"offload"`, in that order.
    pub fn names(self) -> impl Iterator<Item = &'static str> {
        [
            (Properties::ASYNCHRONOUS, "asynchronous"),
            (Properties::ALLOCATES_PER_REQUEST, "allocates_per_request"),
            (Properties::OFFLOAD, "offload"),
        ]
        .into_iter()
        .filter(move |(p, _)| self.contains(*p))
        .map(|(_, n)| n)
    }
}

impl BitOr for Properties {
    type Output = Properties;
    fn bitor(self, rhs: Properties) -> Properties {
        Properties(self.0 | rhs.0)
    }
}

impl fmt::Debug for Properties {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Properties(")?;
        let mut first = true;
        for n in self.names() {
            if !first {
                write!(f, " | ")?;
            }
            write!(f, "{n}")?;
            first = false;
        }
        if first {
            write!(f, "none")?;
        }
        write!(f, ")")
    }
}

impl fmt::Display for Properties {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut first = true;
        for n in self.names() {
            if !first {
                f.write_str(",")?;
            }
            f.write_str(n)?;
            first = false;
        }
        if first {
            f.write_str("-")?;
        }
        Ok(())
    }
}

/// Builds a keyed instance of an implementation from a key of the algorithm's
/// size. Called once per key (not per data unit); may allocate. The instance
/// (its key schedule) lives in locked, dump-excluded memory
/// ([`SecretBox::cipher_key`]).
pub type KeyConstructor = fn(key: &[u8]) -> Result<SecretBox<dyn CipherKey>, Error>;

/// A registered implementation of one algorithm (registry data, like a kernel
/// `struct crypto_alg`).
#[derive(Clone, Copy)]
pub struct Implementation {
    /// The algorithm implemented.
    pub algorithm: Algorithm,
    /// Unique implementation name, e.g. `"xts-aes-256-awslc"` (like the
    /// kernel's `cra_driver_name`).
    pub name: &'static str,
    /// Selection priority: higher wins (like `cra_priority`).
    pub priority: u32,
    /// Properties that a registry may refuse.
    pub properties: Properties,
    /// Key setup.
    pub new_key: KeyConstructor,
}

impl fmt::Debug for Implementation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Implementation")
            .field("algorithm", &self.algorithm)
            .field("name", &self.name)
            .field("priority", &self.priority)
            .field("properties", &self.properties)
            .finish_non_exhaustive()
    }
}

/// Builds a keyed MAC instance from a [`MAC_KEY_SIZE`]-byte key, in locked,
/// dump-excluded memory ([`SecretBox::mac_key`]). Called once per key.
pub type MacKeyConstructor = fn(key: &[u8]) -> Result<SecretBox<dyn MacKey>, Error>;

/// A registered implementation of the vault's MAC, POLYVAL-then-AES-256
/// ([`crate::mac`]): selected, refused and self-tested like the ciphers'
/// [`Implementation`]s.
#[derive(Clone, Copy)]
pub struct MacImplementation {
    /// Unique implementation name, e.g. `"polyval-aes-256-mac-rustcrypto"`.
    pub name: &'static str,
    /// Selection priority: higher wins.
    pub priority: u32,
    /// Properties that a registry may refuse.
    pub properties: Properties,
    /// Key setup.
    pub new_key: MacKeyConstructor,
}

impl fmt::Debug for MacImplementation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("MacImplementation")
            .field("name", &self.name)
            .field("priority", &self.priority)
            .field("properties", &self.properties)
            .finish_non_exhaustive()
    }
}

/// How a self-test vector failed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SelfTestFailure {
    /// Key setup returned an error.
    KeySetup(Error),
    /// Encryption returned an error.
    Encrypt(Error),
    /// Decryption returned an error.
    Decrypt(Error),
    /// Encryption produced a different ciphertext than the vector's.
    WrongCiphertext,
    /// Decryption did not give back the vector's plaintext.
    WrongPlaintext,
    /// A MAC gave another tag than the vector's.
    WrongTag,
    /// The embedded vector itself does not decode (a bug of this crate).
    MalformedVector,
}

impl fmt::Display for SelfTestFailure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SelfTestFailure::KeySetup(e) => write!(f, "key setup failed: {e}"),
            SelfTestFailure::Encrypt(e) => write!(f, "encryption failed: {e}"),
            SelfTestFailure::Decrypt(e) => write!(f, "decryption failed: {e}"),
            SelfTestFailure::WrongCiphertext => f.write_str("wrong ciphertext"),
            SelfTestFailure::WrongPlaintext => f.write_str("wrong plaintext after decryption"),
            SelfTestFailure::WrongTag => f.write_str("wrong tag"),
            SelfTestFailure::MalformedVector => f.write_str("malformed embedded vector"),
        }
    }
}

/// Result of an implementation's known-answer self-test.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SelfTestStatus {
    /// Every embedded vector for the algorithm passed (count of vectors).
    Passed {
        /// Number of vectors checked.
        vectors: usize,
    },
    /// A vector failed; the implementation is excluded.
    Failed {
        /// Source of the failing vector ([`Kat::source`]).
        vector: &'static str,
        /// What went wrong.
        failure: SelfTestFailure,
    },
}

impl SelfTestStatus {
    /// Whether the self-test passed.
    pub fn passed(&self) -> bool {
        matches!(self, SelfTestStatus::Passed { .. })
    }
}

impl fmt::Display for SelfTestStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SelfTestStatus::Passed { vectors } => write!(f, "passed ({vectors} vectors)"),
            SelfTestStatus::Failed { vector, failure } => {
                write!(f, "FAILED: {failure} on {vector}")
            }
        }
    }
}

/// Why an implementation is or is not the one selected for its algorithm.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// This implementation is selected.
    Selected,
    /// It has properties the registry refuses (the refused subset).
    Refused(Properties),
    /// It failed its self-test.
    SelfTestFailed,
    /// It is usable, but the named implementation has a higher priority.
    LowerPriority {
        /// The selected implementation.
        selected: &'static str,
    },
}

impl fmt::Display for Verdict {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Verdict::Selected => f.write_str("selected"),
            Verdict::Refused(p) => write!(f, "refused property: {p}"),
            Verdict::SelfTestFailed => f.write_str("failed self-test"),
            Verdict::LowerPriority { selected } => write!(f, "lower priority than {selected}"),
        }
    }
}

/// One row of [`Registry::report`].
#[derive(Debug, Clone)]
pub struct ImplementationReport {
    /// The implementation.
    pub implementation: Implementation,
    /// Its self-test result (self-tests are run for the report, refused
    /// implementations included).
    pub self_test: SelfTestStatus,
    /// Whether it is selected, and why not otherwise.
    pub verdict: Verdict,
}

/// One row of [`Registry::mac_report`].
#[derive(Debug, Clone)]
pub struct MacImplementationReport {
    /// The implementation.
    pub implementation: MacImplementation,
    /// Its self-test result.
    pub self_test: SelfTestStatus,
    /// Whether it is selected, and why not otherwise.
    pub verdict: Verdict,
}

struct Entry {
    imp: Implementation,
    status: OnceLock<SelfTestStatus>,
}

struct MacEntry {
    imp: MacImplementation,
    status: OnceLock<SelfTestStatus>,
}

/// A set of implementations plus the refused-properties mask.
///
/// [`default_registry`] is the process-wide one with every built-in
/// implementation; tests build their own with [`Registry::new`] and
/// [`Registry::register`].
pub struct Registry {
    entries: Vec<Entry>,
    refused: Properties,
    /// Selection result per algorithm (index into `entries`), computed once;
    /// reset by the `&mut self` methods that change the inputs.
    selected: [OnceLock<Option<usize>>; 8],
    macs: Vec<MacEntry>,
    /// Selection result for the MAC (index into `macs`), computed once.
    selected_mac: OnceLock<Option<usize>>,
}

impl fmt::Debug for Registry {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Registry")
            .field(
                "implementations",
                &self.entries.iter().map(|e| e.imp.name).collect::<Vec<_>>(),
            )
            .field(
                "mac_implementations",
                &self.macs.iter().map(|e| e.imp.name).collect::<Vec<_>>(),
            )
            .field("refused", &self.refused)
            .finish()
    }
}

impl Default for Registry {
    fn default() -> Self {
        Registry::new()
    }
}

/// Runs the embedded vectors for `imp.algorithm` against `imp`.
fn run_self_test(imp: &Implementation, vectors: &[Kat]) -> SelfTestStatus {
    let mut buf = [0u8; 1024];
    for v in vectors {
        let fail = |failure| SelfTestStatus::Failed {
            vector: v.source,
            failure,
        };
        let key = match (imp.new_key)(v.key) {
            Ok(k) => k,
            Err(e) => return fail(SelfTestFailure::KeySetup(e)),
        };
        let Some(data) = buf.get_mut(..v.ptext.len()) else {
            // Embedded vectors are all shorter than the buffer (checked by a unit test).
            continue;
        };
        data.copy_from_slice(v.ptext);
        if let Err(e) = key.encrypt(v.iv, data) {
            return fail(SelfTestFailure::Encrypt(e));
        }
        if data != v.ctext {
            return fail(SelfTestFailure::WrongCiphertext);
        }
        if let Err(e) = key.decrypt(v.iv, data) {
            return fail(SelfTestFailure::Decrypt(e));
        }
        if data != v.ptext {
            return fail(SelfTestFailure::WrongPlaintext);
        }
    }
    SelfTestStatus::Passed {
        vectors: vectors.len(),
    }
}

/// Runs the MAC vectors against `imp`.
fn run_mac_self_test(imp: &MacImplementation, vectors: &[MacKat]) -> SelfTestStatus {
    fn unhex<const N: usize>(s: &str, out: &mut [u8; N]) -> Option<usize> {
        let n = s.len() / 2;
        for (i, o) in out.iter_mut().enumerate().take(n) {
            *o = u8::from_str_radix(s.get(2 * i..2 * i + 2)?, 16).ok()?;
        }
        (n <= N && s.len().is_multiple_of(2)).then_some(n)
    }
    for v in vectors {
        let fail = |failure| SelfTestStatus::Failed {
            vector: v.source,
            failure,
        };
        let (mut key, mut nonce, mut aad, mut msg, mut tag) = (
            [0u8; MAC_KEY_SIZE],
            [0u8; 12],
            [0u8; 64],
            [0u8; 64],
            [0u8; 16],
        );
        let lens = (
            unhex(v.key, &mut key),
            unhex(v.nonce, &mut nonce),
            unhex(v.aad, &mut aad),
            unhex(v.msg, &mut msg),
            unhex(v.tag, &mut tag),
        );
        let (Some(MAC_KEY_SIZE), Some(12), Some(a), Some(m), Some(16)) = lens else {
            return fail(SelfTestFailure::MalformedVector);
        };
        let mac = match (imp.new_key)(&key) {
            Ok(k) => k,
            Err(e) => return fail(SelfTestFailure::KeySetup(e)),
        };
        if mac.tag_with_nonce(&nonce, &aad[..a], &msg[..m]) != tag {
            return fail(SelfTestFailure::WrongTag);
        }
    }
    SelfTestStatus::Passed {
        vectors: vectors.len(),
    }
}

impl Registry {
    /// An empty registry refusing [`Properties::REFUSED_BY_FSCRYPT`].
    pub fn new() -> Registry {
        Registry {
            entries: Vec::new(),
            refused: Properties::REFUSED_BY_FSCRYPT,
            selected: Default::default(),
            macs: Vec::new(),
            selected_mac: OnceLock::new(),
        }
    }

    /// A registry with every built-in implementation (see
    /// [`builtin_implementations`]), refusing [`Properties::REFUSED_BY_FSCRYPT`].
    pub fn with_builtins() -> Registry {
        let mut r = Registry::new();
        for imp in builtin_implementations() {
            r.register(*imp);
        }
        for imp in crate::providers::BUILTIN_MACS {
            r.register_mac(*imp);
        }
        r
    }

    /// Adds an implementation. Registering a name twice keeps both (names
    /// are for humans; selection is by priority).
    pub fn register(&mut self, imp: Implementation) {
        self.entries.push(Entry {
            imp,
            status: OnceLock::new(),
        });
        self.selected = Default::default();
    }

    /// Adds a MAC implementation.
    pub fn register_mac(&mut self, imp: MacImplementation) {
        self.macs.push(MacEntry {
            imp,
            status: OnceLock::new(),
        });
        self.selected_mac = OnceLock::new();
    }

    /// Sets the refused-properties mask (default: all three properties).
    pub fn set_refused(&mut self, refused: Properties) {
        self.refused = refused;
        self.selected = Default::default();
        self.selected_mac = OnceLock::new();
    }

    /// The refused-properties mask.
    pub fn refused(&self) -> Properties {
        self.refused
    }

    /// Every registered implementation, in registration order.
    pub fn implementations(&self) -> impl Iterator<Item = &Implementation> {
        self.entries.iter().map(|e| &e.imp)
    }

    fn status<'a>(&self, e: &'a Entry) -> &'a SelfTestStatus {
        e.status.get_or_init(|| {
            let st = run_self_test(&e.imp, kat::for_algorithm(e.imp.algorithm));
            if let SelfTestStatus::Failed { vector, failure } = &st {
                log::warn!(
                    "fscrypt-crypto: implementation {} of {} failed its self-test ({failure}) \
                     on vector {vector}; it is excluded",
                    e.imp.name,
                    e.imp.algorithm
                );
            }
            st
        })
    }

    /// Entries for `alg`, highest priority first (stable for equal priority).
    fn candidates(&self, alg: Algorithm) -> Vec<&Entry> {
        let mut c: Vec<&Entry> = self
            .entries
            .iter()
            .filter(|e| e.imp.algorithm == alg)
            .collect();
        c.sort_by_key(|e| core::cmp::Reverse(e.imp.priority));
        c
    }

    /// The implementation used for `alg`: highest priority among those with
    /// no refused property that pass their self-test (run now if needed).
    ///
    /// # Errors
    /// [`Error::NoImplementation`] if none is left.
    pub fn select(&self, alg: Algorithm) -> Result<&Implementation, Error> {
        let slot = Algorithm::ALL.iter().position(|a| *a == alg).unwrap_or(0);
        let chosen = self.selected[slot].get_or_init(|| {
            let mut candidates: Vec<(usize, &Entry)> = self
                .entries
                .iter()
                .enumerate()
                .filter(|(_, e)| e.imp.algorithm == alg)
                .collect();
            candidates.sort_by_key(|(_, e)| core::cmp::Reverse(e.imp.priority));
            let found = candidates.into_iter().find(|(_, e)| {
                e.imp.properties.intersection(self.refused).is_empty() && self.status(e).passed()
            });
            match found {
                Some((i, e)) => {
                    log::debug!("fscrypt-crypto: using {} for {alg}", e.imp.name);
                    Some(i)
                }
                None => {
                    log::warn!("fscrypt-crypto: no usable implementation of {alg}");
                    None
                }
            }
        });
        match chosen.and_then(|i| self.entries.get(i)) {
            Some(e) => Ok(&e.imp),
            None => Err(Error::NoImplementation { algorithm: alg }),
        }
    }

    /// Runs (or returns the cached) self-test of every implementation named
    /// `name`; `None` if no implementation has that name.
    pub fn self_test(&self, name: &str) -> Option<&SelfTestStatus> {
        self.entries
            .iter()
            .find(|e| e.imp.name == name)
            .map(|e| self.status(e))
    }

    /// Prepares `key` for `alg` with the selected implementation.
    ///
    /// # Errors
    /// [`Error::InvalidKeyLength`], [`Error::WeakKey`] (XTS halves equal,
    /// spec §2.1), [`Error::NoImplementation`], or the implementation's own
    /// key-setup error.
    pub fn prepare(&self, alg: Algorithm, key: &[u8]) -> Result<PreparedKey, Error> {
        alg.check_key(key)?;
        let imp = self.select(alg)?;
        let inner = (imp.new_key)(key);
        // The schedule was built on the stack before it moved into locked
        // memory: clear what is left there.
        crate::scrub_stack();
        Ok(PreparedKey::from_parts(alg, imp.name, inner?))
    }

    fn mac_status<'a>(&self, e: &'a MacEntry) -> &'a SelfTestStatus {
        e.status.get_or_init(|| {
            let st = run_mac_self_test(&e.imp, kat::POLYVAL_AES_256_MAC);
            if let SelfTestStatus::Failed { vector, failure } = &st {
                log::warn!(
                    "fscrypt-crypto: MAC implementation {} failed its self-test ({failure}) \
                     on vector {vector}; it is excluded",
                    e.imp.name
                );
            }
            st
        })
    }

    /// MAC entries, highest priority first.
    fn mac_candidates(&self) -> Vec<(usize, &MacEntry)> {
        let mut c: Vec<(usize, &MacEntry)> = self.macs.iter().enumerate().collect();
        c.sort_by_key(|(_, e)| core::cmp::Reverse(e.imp.priority));
        c
    }

    /// The MAC implementation in use: highest priority among those with no
    /// refused property that pass their self-test (run now if needed).
    ///
    /// # Errors
    /// [`Error::NoMacImplementation`] if none is left.
    pub fn select_mac(&self) -> Result<&MacImplementation, Error> {
        let chosen = self.selected_mac.get_or_init(|| {
            let found = self.mac_candidates().into_iter().find(|(_, e)| {
                e.imp.properties.intersection(self.refused).is_empty()
                    && self.mac_status(e).passed()
            });
            match found {
                Some((i, e)) => {
                    log::debug!("fscrypt-crypto: using {} for the vault MAC", e.imp.name);
                    Some(i)
                }
                None => {
                    log::warn!("fscrypt-crypto: no usable MAC implementation");
                    None
                }
            }
        });
        match chosen.and_then(|i| self.macs.get(i)) {
            Some(e) => Ok(&e.imp),
            None => Err(Error::NoMacImplementation),
        }
    }

    /// Prepares a MAC key ([`MAC_KEY_SIZE`] bytes) with the selected
    /// implementation.
    ///
    /// # Errors
    /// [`Error::InvalidKeyLength`], [`Error::NoMacImplementation`], or the
    /// implementation's own key-setup error.
    pub fn prepare_mac(&self, key: &[u8]) -> Result<PreparedMac, Error> {
        if key.len() != MAC_KEY_SIZE {
            return Err(Error::InvalidKeyLength {
                algorithm: crate::mac::MAC_ALGORITHM_NAME,
                expected: MAC_KEY_SIZE,
                actual: key.len(),
            });
        }
        let imp = self.select_mac()?;
        let inner = (imp.new_key)(key);
        crate::scrub_stack();
        Ok(PreparedMac::from_parts(imp.name, inner?))
    }

    /// Every MAC implementation with its self-test result and verdict,
    /// highest priority first (self-tests run for the report).
    pub fn mac_report(&self) -> Vec<MacImplementationReport> {
        let selected = self.select_mac().ok().map(|i| i.name);
        let mut chosen_seen = false;
        self.mac_candidates()
            .into_iter()
            .map(|(_, e)| {
                let st = self.mac_status(e).clone();
                let refused = e.imp.properties.intersection(self.refused);
                let verdict = if !refused.is_empty() {
                    Verdict::Refused(refused)
                } else if !st.passed() {
                    Verdict::SelfTestFailed
                } else if !chosen_seen && Some(e.imp.name) == selected {
                    chosen_seen = true;
                    Verdict::Selected
                } else {
                    Verdict::LowerPriority {
                        selected: selected.unwrap_or("-"),
                    }
                };
                MacImplementationReport {
                    implementation: e.imp,
                    self_test: st,
                    verdict,
                }
            })
            .collect()
    }

    /// Every implementation with its self-test result and selection verdict,
    /// grouped by algorithm in [`Algorithm::ALL`] order, highest priority first.
    /// Runs every self-test, refused implementations included.
    pub fn report(&self) -> Vec<ImplementationReport> {
        let mut out = Vec::new();
        for alg in Algorithm::ALL {
            let selected = self.select(alg).ok().map(|i| i.name);
            let mut chosen_seen = false;
            for e in self.candidates(alg) {
                let st = self.status(e).clone();
                let refused = e.imp.properties.intersection(self.refused);
                let verdict = if !refused.is_empty() {
                    Verdict::Refused(refused)
                } else if !st.passed() {
                    Verdict::SelfTestFailed
                } else if !chosen_seen && Some(e.imp.name) == selected {
                    chosen_seen = true;
                    Verdict::Selected
                } else {
                    Verdict::LowerPriority {
                        selected: selected.unwrap_or("-"),
                    }
                };
                out.push(ImplementationReport {
                    implementation: e.imp,
                    self_test: st,
                    verdict,
                });
            }
        }
        out
    }
}

/// The process-wide registry with every built-in implementation, built on
/// first use. [`PreparedKey::new`] selects from it.
pub fn default_registry() -> &'static Registry {
    static DEFAULT: OnceLock<Registry> = OnceLock::new();
    DEFAULT.get_or_init(Registry::with_builtins)
}

/// The known-answer vectors every implementation of `alg` must pass before it
/// is used (embedded in the crate; each names its source: Linux testmgr.h,
/// the fscrypt-level vectors cross-checked with xfstests, or pyca/cryptography).
pub fn self_test_vectors(alg: Algorithm) -> &'static [Kat] {
    kat::for_algorithm(alg)
}

/// The built-in implementations (all synchronous CPU code, no refused property).
pub fn builtin_implementations() -> &'static [Implementation] {
    crate::providers::BUILTIN
}
