//! The measuring engine behind `fscrypt-rs bench` (feature `bench`): for every fscrypt
//! algorithm and every registered implementation of it, single-thread
//! throughput of data units, cost per filename, key setup cost and heap
//! allocations per operation, plus the registry's selection verdict; and
//! the same for the vault MAC's implementations ([`measure_mac`]: one tag
//! per data unit).
//!
//! This module only times calls into the libraries (`fscrypt_crypto`'s
//! registry and primitives); it contains no cryptography. Method: a warm-up
//! that also sizes the batch, then `runs` timed batches of `iters` calls;
//! each batch gives ns per call, reported as median with min..max.
//! Allocations are counted in a separate, untimed pass through the
//! process's counting allocator when the caller passes one (the
//! `fscrypt-rs-bench` binary installs it; the `fscrypt-rs` binary, which is
//! also the mount daemon, never does), so counting never perturbs the
//! timings.

use std::hint::black_box;
use std::time::{Duration, Instant};

use crate::mac::{MAC_ALGORITHM_NAME, MAC_KEY_SIZE, MacKey};
use crate::registry::{self, Implementation, MacImplementation, Registry, Verdict};
use crate::{Algorithm, CipherKey, HkdfSha512};
use serde::Serialize;

/// Returns the number of heap allocations (and reallocations) made by the
/// process so far; `None` when no counting allocator is installed.
pub type AllocCounter = fn() -> Option<u64>;

/// How long and how often to measure.
#[derive(Debug, Clone)]
pub struct Options {
    /// Data unit size in bytes for the contents rows (spec §3.3: 512..=4096
    /// in kernel fscrypt; any multiple of 16 >= 16 is measured here).
    pub data_unit_size: usize,
    /// Filename lengths in bytes for the filenames rows (already padded).
    pub name_sizes: Vec<usize>,
    /// Warm-up time per measurement (also sizes the batch).
    pub warmup: Duration,
    /// Number of timed batches per measurement.
    pub runs: usize,
    /// Target duration of one timed batch.
    pub run_time: Duration,
    /// Calls made in the untimed allocation-counting pass.
    pub alloc_probe_calls: u32,
    /// The process's allocation counter.
    pub alloc_counter: AllocCounter,
}

impl Options {
    /// Full measurement: 100 ms warm-up, 7 batches of 100 ms.
    pub fn full(data_unit_size: usize, alloc_counter: AllocCounter) -> Options {
        Options {
            data_unit_size,
            name_sizes: vec![16, 32, 64],
            warmup: Duration::from_millis(100),
            runs: 7,
            run_time: Duration::from_millis(100),
            alloc_probe_calls: 64,
            alloc_counter,
        }
    }

    /// Quick measurement for CI (a few seconds in total): 10 ms warm-up,
    /// 3 batches of 10 ms.
    pub fn quick(data_unit_size: usize, alloc_counter: AllocCounter) -> Options {
        Options {
            warmup: Duration::from_millis(10),
            runs: 3,
            run_time: Duration::from_millis(10),
            alloc_probe_calls: 16,
            ..Options::full(data_unit_size, alloc_counter)
        }
    }
}

/// Nanoseconds per call over the timed batches.
#[derive(Debug, Clone, Serialize)]
pub struct NsPerCall {
    /// Median of the batches.
    pub median: f64,
    /// Fastest batch.
    pub min: f64,
    /// Slowest batch.
    pub max: f64,
    /// Calls per batch.
    pub calls_per_run: u64,
    /// Every batch, in order.
    pub runs: Vec<f64>,
}

impl NsPerCall {
    /// Throughput in MB/s (10^6 bytes per second) for `bytes` per call:
    /// (median, min, max), min from the slowest batch.
    pub fn mb_per_s(&self, bytes: usize) -> Throughput {
        let f = |ns: f64| {
            if ns > 0.0 {
                bytes as f64 * 1e3 / ns
            } else {
                0.0
            }
        };
        Throughput {
            median: f(self.median),
            min: f(self.max),
            max: f(self.min),
        }
    }
}

/// A throughput in MB/s (10^6 bytes per second).
#[derive(Debug, Clone, Copy, Serialize)]
pub struct Throughput {
    /// From the median batch.
    pub median: f64,
    /// From the slowest batch.
    pub min: f64,
    /// From the fastest batch.
    pub max: f64,
}

/// Times `f`: warm-up for `opts.warmup` (estimating the cost per call),
/// then `opts.runs` batches sized to last about `opts.run_time` each.
///
/// # Errors
/// The first error `f` returns.
pub fn time_calls<E>(opts: &Options, mut f: impl FnMut() -> Result<(), E>) -> Result<NsPerCall, E> {
    let start = Instant::now();
    let mut warm_calls: u64 = 0;
    while warm_calls < 3 || start.elapsed() < opts.warmup {
        f()?;
        warm_calls += 1;
    }
    let est_ns = (start.elapsed().as_nanos() as f64 / warm_calls as f64).max(1.0);
    let iters = ((opts.run_time.as_nanos() as f64 / est_ns) as u64).clamp(1, 50_000_000);
    let mut runs = Vec::with_capacity(opts.runs);
    for _ in 0..opts.runs.max(1) {
        let t = Instant::now();
        for _ in 0..iters {
            f()?;
        }
        runs.push(t.elapsed().as_nanos() as f64 / iters as f64);
    }
    let mut sorted = runs.clone();
    sorted.sort_by(f64::total_cmp);
    Ok(NsPerCall {
        median: sorted[sorted.len() / 2],
        min: sorted[0],
        max: sorted[sorted.len() - 1],
        calls_per_run: iters,
        runs,
    })
}

/// Heap allocations per call of `f`, from `opts.alloc_probe_calls` untimed
/// calls; `None` without a counting allocator.
///
/// # Errors
/// The first error `f` returns.
pub fn allocations_per_call<E>(
    opts: &Options,
    mut f: impl FnMut() -> Result<(), E>,
) -> Result<Option<f64>, E> {
    let Some(before) = (opts.alloc_counter)() else {
        return Ok(None);
    };
    let n = opts.alloc_probe_calls.max(1);
    for _ in 0..n {
        f()?;
    }
    let after = (opts.alloc_counter)().unwrap_or(before);
    Ok(Some(after.saturating_sub(before) as f64 / f64::from(n)))
}

/// What fscrypt uses an algorithm for (spec §1.1 "used for").
pub fn roles(alg: Algorithm) -> (bool, bool) {
    match alg {
        Algorithm::Aes256Xts | Algorithm::Sm4Xts | Algorithm::Aes128CbcEssiv => (true, false),
        Algorithm::Adiantum => (true, true),
        _ => (false, true),
    }
}

/// A deterministic test key of `len` bytes whose halves differ (XTS refuses
/// equal halves, spec §2.1). Not secret: benchmarks only.
fn bench_key(len: usize) -> Vec<u8> {
    (0..len)
        .map(|i| (i as u8).wrapping_mul(37).wrapping_add(11))
        .collect()
}

/// One measured operation: ns per call, throughput, allocations per call.
#[derive(Debug, Clone, Serialize)]
pub struct OpResult {
    /// Bytes processed per call.
    pub bytes: usize,
    /// Time per call.
    pub ns: NsPerCall,
    /// Throughput from `ns`.
    pub mb_per_s: Throughput,
    /// Heap allocations per call (`None`: not counted).
    pub allocs_per_call: Option<f64>,
}

/// Filename cost for one length.
#[derive(Debug, Clone, Serialize)]
pub struct NameResult {
    /// Name length in bytes (a padded fscrypt name).
    pub len: usize,
    /// Encryption.
    pub encrypt: OpResult,
    /// Decryption.
    pub decrypt: OpResult,
}

/// Everything measured for one implementation.
#[derive(Debug, Clone, Serialize)]
pub struct ImplementationResult {
    /// Algorithm display name (`AES-256-XTS`).
    pub algorithm: &'static str,
    /// Kernel Crypto API name (`xts(aes)`).
    pub kernel_name: &'static str,
    /// Implementation name (`xts-aes-256-awslc`).
    pub implementation: &'static str,
    /// Registry priority.
    pub priority: u32,
    /// fscrypt uses the algorithm for file contents (data units measured).
    pub used_for_contents: bool,
    /// fscrypt uses the algorithm for filenames (names measured).
    pub used_for_filenames: bool,
    /// Refusable properties (`-` for none).
    pub properties: String,
    /// Self-test result.
    pub self_test: String,
    /// `true` for the implementation selection picks.
    pub selected: bool,
    /// Why it is (not) picked: `selected`, `refused property: ...`,
    /// `failed self-test`, `lower priority than ...`.
    pub verdict: String,
    /// Data-unit encryption (contents algorithms).
    pub encrypt: Option<OpResult>,
    /// Data-unit decryption (contents algorithms).
    pub decrypt: Option<OpResult>,
    /// Filenames (filenames algorithms).
    pub names: Vec<NameResult>,
    /// Key schedule alone (the implementation's key constructor).
    pub key_schedule: Option<OpResult>,
    /// Per-file key setup: HKDF-SHA512 expand of the per-file key plus the
    /// key schedule, ns (median sum).
    pub per_file_key_setup_ns: Option<f64>,
    /// Why nothing was measured, if so.
    pub skipped: Option<String>,
}

/// The v2 per-file key derivation cost: one HKDF-SHA512 expand with the
/// per-file info (`"fscrypt\0"`, context byte, 16-byte nonce; spec §4.3)
/// into `key_len` bytes. Measured through `crate::HkdfSha512`.
///
/// # Errors
/// A library error from HKDF.
pub fn measure_hkdf(opts: &Options, key_len: usize) -> Result<OpResult, crate::Error> {
    let master = bench_key(64);
    let hkdf = HkdfSha512::extract(b"", &master);
    let prefix = *b"fscrypt\0";
    let ctx = [2u8]; // HKDF_CONTEXT_PER_FILE_ENC_KEY (spec §1.5)
    let nonce = [0x5au8; 16];
    let mut okm = vec![0u8; key_len];
    let mut call = || hkdf.expand(&[&prefix, &ctx, &nonce], black_box(&mut okm));
    let ns = time_calls(opts, &mut call)?;
    let allocs = allocations_per_call(opts, &mut call)?;
    Ok(OpResult {
        bytes: key_len,
        mb_per_s: ns.mb_per_s(key_len),
        ns,
        allocs_per_call: allocs,
    })
}

fn op(
    opts: &Options,
    bytes: usize,
    mut f: impl FnMut() -> Result<(), crate::Error>,
) -> Result<OpResult, crate::Error> {
    let ns = time_calls(opts, &mut f)?;
    let allocs = allocations_per_call(opts, &mut f)?;
    Ok(OpResult {
        bytes,
        mb_per_s: ns.mb_per_s(bytes),
        ns,
        allocs_per_call: allocs,
    })
}

/// The number of measurement steps [`measure_implementation`] performs for
/// `imp` (for progress bars).
pub fn steps(opts: &Options, alg: Algorithm) -> u64 {
    let (contents, names) = roles(alg);
    1 + if contents { 2 } else { 0 }
        + if names {
            2 * opts.name_sizes.len() as u64
        } else {
            0
        }
}

/// Measures one implementation. `step` is called after each measurement
/// (progress). Implementations that failed their self-test are not
/// measured (their output is wrong); refused ones are measured, to show
/// what refusing them costs or saves.
pub fn measure_implementation(
    opts: &Options,
    imp: &Implementation,
    verdict: &Verdict,
    self_test: String,
    hkdf_ns: Option<f64>,
    mut step: impl FnMut(&str),
) -> ImplementationResult {
    let alg = imp.algorithm;
    let (used_for_contents, used_for_filenames) = roles(alg);
    let mut r = ImplementationResult {
        algorithm: alg.name(),
        kernel_name: alg.kernel_name(),
        implementation: imp.name,
        priority: imp.priority,
        used_for_contents,
        used_for_filenames,
        properties: imp.properties.to_string(),
        self_test,
        selected: matches!(verdict, Verdict::Selected),
        verdict: verdict.to_string(),
        encrypt: None,
        decrypt: None,
        names: Vec::new(),
        key_schedule: None,
        per_file_key_setup_ns: None,
        skipped: None,
    };
    if matches!(verdict, Verdict::SelfTestFailed) {
        r.skipped = Some("failed its self-test: output is wrong, not measured".into());
        step("skipped");
        return r;
    }
    if let Err(e) = measure_into(opts, imp, hkdf_ns, &mut r, &mut step) {
        r.skipped = Some(format!("measurement failed: {e}"));
    }
    r
}

fn measure_into(
    opts: &Options,
    imp: &Implementation,
    hkdf_ns: Option<f64>,
    r: &mut ImplementationResult,
    step: &mut impl FnMut(&str),
) -> Result<(), crate::Error> {
    let alg = imp.algorithm;
    let key_bytes = bench_key(alg.key_size());
    let new_key = imp.new_key;
    let schedule = op(opts, alg.key_size(), || {
        black_box(new_key(black_box(&key_bytes))?);
        Ok(())
    })?;
    r.per_file_key_setup_ns = hkdf_ns.map(|h| h + schedule.ns.median);
    r.key_schedule = Some(schedule);
    step("key setup");
    let key: crate::SecretBox<dyn CipherKey> = new_key(&key_bytes)?;
    let mut iv = vec![0u8; alg.iv_size()];
    let (contents, names) = roles(alg);
    if contents {
        let mut buf: Vec<u8> = (0..opts.data_unit_size).map(|i| i as u8).collect();
        let mut index: u64 = 0;
        let mut enc = || {
            index = index.wrapping_add(1);
            iv[..8].copy_from_slice(&index.to_le_bytes());
            key.encrypt(&iv, black_box(&mut buf))
        };
        r.encrypt = Some(op(opts, opts.data_unit_size, &mut enc)?);
        step("encrypt");
        let mut dec = || key.decrypt(&iv, black_box(&mut buf));
        r.decrypt = Some(op(opts, opts.data_unit_size, &mut dec)?);
        step("decrypt");
    }
    if names {
        for &len in &opts.name_sizes {
            let mut name: Vec<u8> = (0..len).map(|i| b'a' + (i % 26) as u8).collect();
            let encrypt = op(opts, len, || key.encrypt(&iv, black_box(&mut name)))?;
            step("name encrypt");
            let decrypt = op(opts, len, || key.decrypt(&iv, black_box(&mut name)))?;
            step("name decrypt");
            r.names.push(NameResult {
                len,
                encrypt,
                decrypt,
            });
        }
    }
    Ok(())
}

/// The registry rows to measure: every implementation with its verdict and
/// self-test text, in the registry's report order (by algorithm, highest
/// priority first).
pub fn plan(reg: &Registry) -> Vec<(Implementation, Verdict, String)> {
    reg.report()
        .into_iter()
        .map(|row| (row.implementation, row.verdict, row.self_test.to_string()))
        .collect()
}

/// Associated data per vault MAC tag, bytes: the two 16-byte domain blocks
/// (kind, state, index; the object's nonce) of `docs/vault-format.md` §4b.2.
pub const MAC_AAD_BYTES: usize = 32;

/// Everything measured for one MAC implementation.
#[derive(Debug, Clone, Serialize)]
pub struct MacResult {
    /// Algorithm display name ([`MAC_ALGORITHM_NAME`]).
    pub algorithm: &'static str,
    /// Implementation name (`polyval-aes-256-mac-rustcrypto`).
    pub implementation: &'static str,
    /// Registry priority.
    pub priority: u32,
    /// Refusable properties (`-` for none).
    pub properties: String,
    /// Self-test result.
    pub self_test: String,
    /// `true` for the implementation selection picks.
    pub selected: bool,
    /// Why it is (not) picked, as [`ImplementationResult::verdict`].
    pub verdict: String,
    /// One tag over a data-unit-sized message plus [`MAC_AAD_BYTES`] of
    /// associated data; `bytes` (and so MB/s) counts the message only.
    pub tag: Option<OpResult>,
    /// Key schedule alone (the implementation's key constructor, a
    /// [`MAC_KEY_SIZE`]-byte key).
    pub key_schedule: Option<OpResult>,
    /// Why nothing was measured, if so.
    pub skipped: Option<String>,
}

/// The MAC rows to measure: every MAC implementation with its verdict and
/// self-test text, highest priority first (the registry's `mac_report`).
pub fn mac_plan(reg: &Registry) -> Vec<(MacImplementation, Verdict, String)> {
    reg.mac_report()
        .into_iter()
        .map(|row| (row.implementation, row.verdict, row.self_test.to_string()))
        .collect()
}

/// The number of measurement steps [`measure_mac`] performs (for progress
/// bars).
pub fn mac_steps() -> u64 {
    2
}

/// Measures one MAC implementation: its key schedule, then tags of
/// `opts.data_unit_size`-byte messages with [`MAC_AAD_BYTES`] of associated
/// data (the index in it changes per call, as per data unit in a vault).
/// `step` is called after each measurement. Like
/// [`measure_implementation`], an implementation that failed its self-test
/// is not measured.
pub fn measure_mac(
    opts: &Options,
    imp: &MacImplementation,
    verdict: &Verdict,
    self_test: String,
    mut step: impl FnMut(&str),
) -> MacResult {
    let mut r = MacResult {
        algorithm: MAC_ALGORITHM_NAME,
        implementation: imp.name,
        priority: imp.priority,
        properties: imp.properties.to_string(),
        self_test,
        selected: matches!(verdict, Verdict::Selected),
        verdict: verdict.to_string(),
        tag: None,
        key_schedule: None,
        skipped: None,
    };
    if matches!(verdict, Verdict::SelfTestFailed) {
        r.skipped = Some("failed its self-test: output is wrong, not measured".into());
        step("skipped");
        return r;
    }
    if let Err(e) = measure_mac_into(opts, imp, &mut r, &mut step) {
        r.skipped = Some(format!("measurement failed: {e}"));
    }
    r
}

fn measure_mac_into(
    opts: &Options,
    imp: &MacImplementation,
    r: &mut MacResult,
    step: &mut impl FnMut(&str),
) -> Result<(), crate::Error> {
    let key_bytes = bench_key(MAC_KEY_SIZE);
    let new_key = imp.new_key;
    r.key_schedule = Some(op(opts, MAC_KEY_SIZE, || {
        black_box(new_key(black_box(&key_bytes))?);
        Ok(())
    })?);
    step("key setup");
    let key: crate::SecretBox<dyn MacKey> = new_key(&key_bytes)?;
    let msg: Vec<u8> = (0..opts.data_unit_size).map(|i| i as u8).collect();
    let mut aad = [0x5au8; MAC_AAD_BYTES];
    let mut index: u64 = 0;
    r.tag = Some(op(opts, opts.data_unit_size, || {
        index = index.wrapping_add(1);
        aad[8..16].copy_from_slice(&index.to_le_bytes());
        black_box(key.tag_with_nonce(&[0; 12], black_box(&aad), black_box(&msg)));
        Ok(())
    })?);
    step("tag");
    Ok(())
}

/// The default registry (the one `PreparedKey::new` selects from).
pub fn default_registry() -> &'static Registry {
    registry::default_registry()
}

/// Raw aws-lc `EVP_aes_256_xts` encryption of one data unit, as the
/// reference our AES-256-XTS row is compared with (target >= 0.9x).
///
/// # Errors
/// A backend error from aws-lc.
pub fn measure_raw_awslc_xts(opts: &Options) -> Result<OpResult, crate::Error> {
    let key_bytes = bench_key(64);
    let mut key = [0u8; 64];
    key.copy_from_slice(&key_bytes);
    let mut raw = crate::awslc::RawAwsLcXts::new(&key)?;
    let mut buf: Vec<u8> = (0..opts.data_unit_size).map(|i| i as u8).collect();
    let mut index: u64 = 0;
    let mut iv = [0u8; 16];
    op(opts, opts.data_unit_size, || {
        index = index.wrapping_add(1);
        iv[..8].copy_from_slice(&index.to_le_bytes());
        raw.encrypt(&iv, black_box(&mut buf))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn no_counter() -> Option<u64> {
        None
    }

    #[test]
    fn time_calls_counts_and_orders() {
        let opts = Options::quick(4096, no_counter);
        let mut n = 0u64;
        let r = time_calls::<()>(&opts, || {
            n += 1;
            black_box(n);
            Ok(())
        })
        .unwrap();
        assert!(r.min <= r.median && r.median <= r.max);
        assert_eq!(r.runs.len(), opts.runs);
        assert!(n >= r.calls_per_run * opts.runs as u64);
        let t = r.mb_per_s(4096);
        assert!(t.min <= t.median && t.median <= t.max);
    }

    #[test]
    fn every_registered_mac_is_measured_over_a_data_unit() {
        let opts = Options::quick(4096, no_counter);
        let plan = mac_plan(default_registry());
        assert!(!plan.is_empty(), "the built-in MAC is registered");
        for (imp, verdict, st) in &plan {
            let mut steps = 0;
            let r = measure_mac(&opts, imp, verdict, st.clone(), |_| steps += 1);
            assert_eq!(steps, mac_steps(), "{}", imp.name);
            assert_eq!(r.skipped, None, "{}", imp.name);
            let tag = r.tag.expect("tag measured");
            assert_eq!(tag.bytes, 4096);
            assert!(tag.ns.median > 0.0 && tag.mb_per_s.median > 0.0);
            assert!(r.key_schedule.is_some());
        }
        assert_eq!(plan.iter().filter(|p| p.1 == Verdict::Selected).count(), 1);
    }

    #[test]
    fn a_mac_that_failed_its_self_test_is_not_measured() {
        let (imp, _, _) = mac_plan(default_registry()).remove(0);
        let r = measure_mac(
            &Options::quick(4096, no_counter),
            &imp,
            &Verdict::SelfTestFailed,
            "FAILED".into(),
            |_| {},
        );
        assert!(r.tag.is_none() && r.key_schedule.is_none());
        assert!(r.skipped.is_some());
    }

    #[test]
    fn errors_stop_the_measurement() {
        let opts = Options::quick(4096, no_counter);
        assert_eq!(time_calls(&opts, || Err::<(), _>(7)).unwrap_err(), 7);
    }
}
