//! `fscrypt-rs bench`: the algorithm table that decided fscrypt's crypto
//! policy, measured on this machine for every registered implementation.
//!
//! Measurement lives in `fscrypt_crypto::bench`; this module picks the options,
//! drives a progress bar on stderr and prints a table or JSON. The vault MAC
//! (POLYVAL-AES-256-MAC) is measured like the ciphers and set beside the
//! selected AES-256-XTS: what a tag adds per data unit.

use std::fmt::Write as _;
use std::io::Write as _;
use std::process::ExitCode;

use anyhow::{Context as _, bail};
use indicatif::{ProgressBar, ProgressStyle};
use serde::Serialize;
use serde_json::json;

use fscrypt_crypto::bench::{
    self, AllocCounter, ImplementationResult, MacResult, OpResult, Options,
};
use fscrypt_crypto::mac::MAC_ALGORITHM_NAME;

/// Arguments of `fscrypt-rs bench`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// Print machine-readable JSON instead of tables.
    #[arg(long)]
    pub json: bool,
    /// A few seconds in total (for CI): short warm-up, 3 short runs.
    #[arg(long)]
    pub quick: bool,
    /// Data unit size in bytes for the contents rows (multiple of 16, 16..=65536).
    #[arg(long, default_value_t = 4096, value_name = "BYTES")]
    pub data_unit_size: usize,
    /// Timed runs per measurement (default 7, or 3 with --quick).
    #[arg(long)]
    pub runs: Option<usize>,
    /// Skip the `openssl speed` reference row.
    #[arg(long)]
    pub no_openssl: bool,
    /// Measure only this algorithm (e.g. AES-256-XTS, or POLYVAL-AES-256-MAC
    /// for the vault MAC; case-insensitive); repeatable. Default: all.
    #[arg(long, value_name = "ALGORITHM")]
    pub only: Vec<String>,
}

#[derive(Serialize)]
struct Report {
    data_unit_size: usize,
    runs: usize,
    warmup_ms: u128,
    run_ms: u128,
    threads: usize,
    allocation_counting: bool,
    hkdf_per_file_key: Option<OpResult>,
    implementations: Vec<ImplementationResult>,
    macs: Vec<MacResult>,
    mac_vs_xts: Option<MacCost>,
    raw_awslc_xts_encrypt: Option<OpResult>,
    openssl: Option<OpensslReference>,
}

/// The benchmark binary beside this one, which installs the counting
/// allocator: `fscrypt-rs` (also the mount daemon) never carries one.
pub const COUNTING_BINARY: &str = "fscrypt-rs-bench";

/// Runs `fscrypt-rs bench`: hands over to `fscrypt-rs-bench` (same
/// arguments) when it is installed beside this binary, so that allocations
/// are counted; otherwise measures here without allocation counts.
///
/// # Errors
/// As [`run`]; starting `fscrypt-rs-bench` fails.
pub fn exec(args: Args) -> anyhow::Result<ExitCode> {
    use std::os::unix::process::CommandExt as _;
    let sibling = std::env::current_exe()
        .ok()
        .and_then(|exe| Some(exe.parent()?.join(COUNTING_BINARY)))
        .filter(|p| p.is_file());
    if let Some(bin) = sibling {
        let err = std::process::Command::new(&bin)
            .args(std::env::args_os().skip(2))
            .exec();
        return Err(err).with_context(|| format!("starting {}", bin.display()));
    }
    run(args, None)
}

/// Measures and prints the report; `counter` counts heap allocations (the
/// `fscrypt-rs-bench` binary's allocator), `None` leaves them uncounted.
///
/// # Errors
/// A bad `--data-unit-size` or `--runs`, or stdout failing.
pub fn run(args: Args, counter: Option<AllocCounter>) -> anyhow::Result<ExitCode> {
    let counter = counter.unwrap_or(no_counter);
    let dus = args.data_unit_size;
    if !(16..=65536).contains(&dus) || !dus.is_multiple_of(16) {
        bail!("--data-unit-size must be a multiple of 16 between 16 and 65536, got {dus}");
    }
    let mut opts = if args.quick {
        Options::quick(dus, counter)
    } else {
        Options::full(dus, counter)
    };
    if let Some(r) = args.runs {
        if r == 0 {
            bail!("--runs must be at least 1");
        }
        opts.runs = r;
    }
    let reg = bench::default_registry();
    let mut plan = bench::plan(reg);
    let mut mac_plan = bench::mac_plan(reg);
    if !args.only.is_empty() {
        let wanted = |name: &str| args.only.iter().any(|o| o.eq_ignore_ascii_case(name));
        plan.retain(|(imp, _, _)| wanted(imp.algorithm.name()));
        if !wanted(MAC_ALGORITHM_NAME) {
            mac_plan.clear();
        }
        if plan.is_empty() && mac_plan.is_empty() {
            let names: Vec<&str> = fscrypt_crypto::Algorithm::ALL
                .iter()
                .map(|a| a.name())
                .chain([MAC_ALGORITHM_NAME])
                .collect();
            bail!("--only matches no algorithm; known: {}", names.join(", "));
        }
    }
    let total: u64 = plan
        .iter()
        .map(|(imp, _, _)| bench::steps(&opts, imp.algorithm))
        .sum::<u64>()
        + mac_plan.len() as u64 * bench::mac_steps()
        + 2;
    let pb = ProgressBar::new(total);
    pb.set_style(
        ProgressStyle::with_template("{prefix:>34} [{bar:30}] {pos}/{len} {msg}")
            .unwrap_or_else(|_| ProgressStyle::default_bar())
            .progress_chars("=> "),
    );

    pb.set_prefix("HKDF-SHA512");
    // The per-file key of the largest mode (AES-256-XTS, 64 bytes).
    let hkdf = bench::measure_hkdf(&opts, 64).ok();
    pb.inc(1);
    let hkdf_ns = hkdf.as_ref().map(|h| h.ns.median);

    let mut rows = Vec::with_capacity(plan.len());
    for (imp, verdict, self_test) in &plan {
        pb.set_prefix(format!("{} {}", imp.algorithm.name(), imp.name));
        let r =
            bench::measure_implementation(&opts, imp, verdict, self_test.clone(), hkdf_ns, |m| {
                pb.set_message(m.to_owned());
                pb.inc(1);
            });
        rows.push(r);
    }
    let mut macs = Vec::with_capacity(mac_plan.len());
    for (imp, verdict, self_test) in &mac_plan {
        pb.set_prefix(format!("{MAC_ALGORITHM_NAME} {}", imp.name));
        macs.push(bench::measure_mac(
            &opts,
            imp,
            verdict,
            self_test.clone(),
            |m| {
                pb.set_message(m.to_owned());
                pb.inc(1);
            },
        ));
    }
    let mac_vs_xts = mac_cost(&macs, &rows);
    pb.set_prefix("raw aws-lc EVP_aes_256_xts");
    let raw = bench::measure_raw_awslc_xts(&opts).ok();
    pb.inc(1);
    let openssl = if args.no_openssl {
        None
    } else {
        pb.set_prefix("openssl speed");
        pb.set_message("");
        openssl_reference(dus, if args.quick { 1 } else { 3 })
    };
    pb.finish_and_clear();

    let report = Report {
        data_unit_size: dus,
        runs: opts.runs,
        warmup_ms: opts.warmup.as_millis(),
        run_ms: opts.run_time.as_millis(),
        threads: 1,
        allocation_counting: counter().is_some(),
        hkdf_per_file_key: hkdf,
        implementations: rows,
        macs,
        mac_vs_xts,
        raw_awslc_xts_encrypt: raw,
        openssl,
    };
    let text = if args.json {
        let mut v = serde_json::to_value(&report).context("serializing the report")?;
        v["selected"] = json!(
            report
                .implementations
                .iter()
                .filter(|r| r.selected)
                .map(|r| (r.algorithm, r.implementation))
                .chain(
                    report
                        .macs
                        .iter()
                        .filter(|m| m.selected)
                        .map(|m| (m.algorithm, m.implementation))
                )
                .collect::<std::collections::BTreeMap<_, _>>()
        );
        let mut s = serde_json::to_string_pretty(&v).context("serializing the report")?;
        s.push('\n');
        s
    } else {
        render(&report)
    };
    std::io::stdout().lock().write_all(text.as_bytes())?;
    Ok(ExitCode::SUCCESS)
}

fn no_counter() -> Option<u64> {
    None
}

/// The selected MAC's tag set beside the selected AES-256-XTS encryption of
/// one data unit of the same size: what authenticating a unit adds.
#[derive(Debug, Clone, Serialize)]
struct MacCost {
    /// Bytes per data unit (the MAC's message and the XTS unit).
    data_unit_size: usize,
    /// The selected MAC implementation.
    mac_implementation: &'static str,
    /// ns per tag (median).
    mac_ns: f64,
    /// The selected AES-256-XTS implementation.
    xts_implementation: &'static str,
    /// ns per data-unit encryption (median).
    xts_encrypt_ns: f64,
    /// `mac_ns / xts_encrypt_ns`: 0.5 means a tag costs half an encryption.
    ratio: f64,
}

/// [`MacCost`] from the measured rows; `None` when the selected MAC or the
/// selected AES-256-XTS was not measured (`--only`, skipped, or none selected).
fn mac_cost(macs: &[MacResult], ciphers: &[ImplementationResult]) -> Option<MacCost> {
    let mac = macs.iter().find(|m| m.selected)?;
    let tag = mac.tag.as_ref()?;
    let xts = ciphers
        .iter()
        .find(|i| i.selected && i.algorithm == fscrypt_crypto::Algorithm::Aes256Xts.name())?;
    let enc = xts.encrypt.as_ref()?;
    if enc.ns.median <= 0.0 || enc.bytes != tag.bytes {
        return None;
    }
    Some(MacCost {
        data_unit_size: tag.bytes,
        mac_implementation: mac.implementation,
        mac_ns: tag.ns.median,
        xts_implementation: xts.implementation,
        xts_encrypt_ns: enc.ns.median,
        ratio: tag.ns.median / enc.ns.median,
    })
}

/// `4 KiB` for 4096, `512 B` for 512: a data unit size for prose.
fn unit_size(bytes: usize) -> String {
    if bytes >= 1024 && bytes.is_multiple_of(1024) {
        format!("{} KiB", bytes / 1024)
    } else {
        format!("{bytes} B")
    }
}

fn mbps(o: &Option<OpResult>) -> String {
    match o {
        Some(o) => format!(
            "{:.0} ({:.0}..{:.0})",
            o.mb_per_s.median, o.mb_per_s.min, o.mb_per_s.max
        ),
        None => "-".into(),
    }
}

fn allocs(v: Option<f64>) -> String {
    match v {
        Some(a) if a == a.trunc() => format!("{a:.0}"),
        Some(a) => format!("{a:.2}"),
        None => "?".into(),
    }
}

fn table(head: &[String], rows: &[Vec<String>]) -> String {
    let w: Vec<usize> = (0..head.len())
        .map(|i| {
            rows.iter()
                .map(|r| r[i].chars().count())
                .chain([head[i].chars().count()])
                .max()
                .unwrap_or(0)
        })
        .collect();
    let mut s = String::new();
    let line = |s: &mut String, cells: &[String]| {
        let parts: Vec<String> = cells
            .iter()
            .zip(&w)
            .map(|(c, w)| format!("{c:<w$}"))
            .collect();
        let _ = writeln!(s, "{}", parts.join("  ").trim_end());
    };
    line(&mut s, head);
    line(
        &mut s,
        &w.iter().map(|w| "-".repeat(*w)).collect::<Vec<_>>(),
    );
    for r in rows {
        line(&mut s, r);
    }
    s
}

/// The text report; every line fits a 120-column terminal.
fn render(r: &Report) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "fscrypt-rs bench: single thread, data unit {} bytes; {} timed runs of ~{} ms after\n\
         {} ms warm-up; median (min..max). MB/s = 10^6 bytes/s.",
        r.data_unit_size, r.runs, r.run_ms, r.warmup_ms
    );
    let _ = writeln!(
        s,
        "Selection: highest priority among implementations without a refused property\n\
         (asynchronous, allocates_per_request, offload) that passed their self-test.\n"
    );
    // Registry: one block per algorithm, so the rows fit the terminal.
    let _ = writeln!(s, "Registry (* = selected):");
    let head: Vec<String> = ["implementation", "prio", "props", "self-test", "selection"]
        .map(String::from)
        .to_vec();
    // (algorithm, implementation, selected, priority, properties, self-test,
    // selection or why skipped): ciphers then MACs, highest priority first.
    type RegistryRow<'a> = (&'a str, &'a str, bool, u32, &'a str, &'a str, &'a str);
    let entries = r
        .implementations
        .iter()
        .map(|i| -> RegistryRow {
            (
                i.algorithm,
                i.implementation,
                i.selected,
                i.priority,
                &i.properties,
                &i.self_test,
                i.skipped.as_deref().unwrap_or(&i.verdict),
            )
        })
        .chain(r.macs.iter().map(|m| -> RegistryRow {
            (
                m.algorithm,
                m.implementation,
                m.selected,
                m.priority,
                &m.properties,
                &m.self_test,
                m.skipped.as_deref().unwrap_or(&m.verdict),
            )
        }));
    let mut rows: Vec<Vec<String>> = Vec::new();
    let mut last_alg = "";
    for (alg, name, selected, priority, props, self_test, status) in entries {
        if alg != last_alg {
            let mut head = vec![String::new(); 5];
            head[0] = alg.to_owned();
            rows.push(head);
            last_alg = alg;
        }
        rows.push(vec![
            format!("  {name}{}", if selected { " *" } else { "" }),
            priority.to_string(),
            props.to_owned(),
            self_test.to_owned(),
            status.to_owned(),
        ]);
    }
    s.push_str(&table(&head, &rows));

    // Key setup: the per-file key (HKDF expand + key schedule), the key
    // schedule alone, and its heap allocations.
    let key_setup = |i: &ImplementationResult| match (&i.key_schedule, i.per_file_key_setup_ns) {
        (Some(k), Some(total)) => format!(
            "{total:.0} / {:.0} / {}",
            k.ns.median,
            allocs(k.allocs_per_call)
        ),
        (Some(k), None) => format!("- / {:.0} / {}", k.ns.median, allocs(k.allocs_per_call)),
        _ => "-".into(),
    };
    let name = |i: &ImplementationResult| {
        format!("{}{}", i.implementation, if i.selected { " *" } else { "" })
    };
    let _ = writeln!(s, "\nContents (one data unit per call):");
    let head: Vec<String> = [
        "implementation",
        "encrypt MB/s",
        "decrypt MB/s",
        "allocs/op",
        "setup ns/sched/allocs",
    ]
    .map(String::from)
    .to_vec();
    let rows: Vec<Vec<String>> = r
        .implementations
        .iter()
        .filter(|i| i.used_for_contents && i.skipped.is_none())
        .map(|i| {
            let a = i
                .encrypt
                .as_ref()
                .and_then(|o| o.allocs_per_call)
                .into_iter()
                .chain(i.decrypt.as_ref().and_then(|o| o.allocs_per_call))
                .fold(None, |m: Option<f64>, v| Some(m.map_or(v, |m| m.max(v))));
            vec![
                name(i),
                mbps(&i.encrypt),
                mbps(&i.decrypt),
                allocs(a),
                key_setup(i),
            ]
        })
        .collect();
    s.push_str(&table(&head, &rows));

    let sizes: Vec<usize> = r
        .implementations
        .iter()
        .flat_map(|i| i.names.iter().map(|n| n.len))
        .fold(Vec::new(), |mut v, l| {
            if !v.contains(&l) {
                v.push(l);
            }
            v
        });
    let _ = writeln!(s, "\nFilenames (ns per name, encrypt / decrypt):");
    let mut head: Vec<String> = vec!["implementation".into()];
    head.extend(sizes.iter().map(|l| format!("{l} B")));
    head.push("allocs/op".into());
    head.push("setup ns/sched/allocs".into());
    let rows: Vec<Vec<String>> = r
        .implementations
        .iter()
        .filter(|i| i.used_for_filenames && i.skipped.is_none())
        .map(|i| {
            let mut row = vec![name(i)];
            for l in &sizes {
                row.push(match i.names.iter().find(|n| n.len == *l) {
                    Some(n) => format!("{:.0} / {:.0}", n.encrypt.ns.median, n.decrypt.ns.median),
                    None => "-".into(),
                });
            }
            let a = i
                .names
                .iter()
                .flat_map(|n| [n.encrypt.allocs_per_call, n.decrypt.allocs_per_call])
                .flatten()
                .fold(None, |m: Option<f64>, v| Some(m.map_or(v, |m| m.max(v))));
            row.push(allocs(a));
            row.push(key_setup(i));
            row
        })
        .collect();
    s.push_str(&table(&head, &rows));

    if !r.macs.is_empty() {
        let _ = writeln!(
            s,
            "\nVault MAC {MAC_ALGORITHM_NAME} (one tag per data unit, + {} B domain):",
            bench::MAC_AAD_BYTES
        );
        let head: Vec<String> = ["implementation", "tag MB/s", "allocs/op", "setup ns/allocs"]
            .map(String::from)
            .to_vec();
        let rows: Vec<Vec<String>> = r
            .macs
            .iter()
            .filter(|m| m.skipped.is_none())
            .map(|m| {
                vec![
                    format!("{}{}", m.implementation, if m.selected { " *" } else { "" }),
                    mbps(&m.tag),
                    allocs(m.tag.as_ref().and_then(|t| t.allocs_per_call)),
                    match &m.key_schedule {
                        Some(k) => format!("{:.0} / {}", k.ns.median, allocs(k.allocs_per_call)),
                        None => "-".into(),
                    },
                ]
            })
            .collect();
        s.push_str(&table(&head, &rows));
        match &r.mac_vs_xts {
            Some(c) => {
                let _ = writeln!(
                    s,
                    "MAC cost per {} unit relative to AES-256-XTS: {:.2}\n  \
                     ({} {:.0} ns per tag; {} {:.0} ns per encryption)",
                    unit_size(c.data_unit_size),
                    c.ratio,
                    c.mac_implementation,
                    c.mac_ns,
                    c.xts_implementation,
                    c.xts_encrypt_ns
                );
            }
            None => {
                let _ = writeln!(
                    s,
                    "MAC cost relative to AES-256-XTS: not measured (it needs the selected MAC \
                     and the selected AES-256-XTS; see --only)"
                );
            }
        }
    }

    let _ = writeln!(s, "\nReferences:");
    if let Some(h) = &r.hkdf_per_file_key {
        let _ = writeln!(
            s,
            "  HKDF-SHA512 expand of a 64-byte per-file key: {:.0} ns ({:.0}..{:.0}), {} allocs\n  \
             (included in \"setup ns\" above; sched = the key schedule alone)",
            h.ns.median,
            h.ns.min,
            h.ns.max,
            allocs(h.allocs_per_call)
        );
    }
    let ours = r
        .implementations
        .iter()
        .find(|i| i.selected && i.kernel_name == "xts(aes)")
        .and_then(|i| {
            i.encrypt
                .as_ref()
                .map(|e| (i.implementation, e.mb_per_s.median))
        });
    if let Some(raw) = &r.raw_awslc_xts_encrypt {
        let _ = write!(
            s,
            "  raw aws-lc EVP_aes_256_xts encrypt: {}",
            mbps(&Some(raw.clone()))
        );
        if let Some((name, v)) = ours {
            let _ = write!(
                s,
                " MB/s; selected {name} = {:.2}x raw",
                v / raw.mb_per_s.median
            );
        }
        let _ = writeln!(s);
    }
    match &r.openssl {
        Some(o) => {
            let _ = writeln!(
                s,
                "  {}: encrypt {:.0} MB/s, decrypt {} ({})",
                o.command,
                o.encrypt_mb_per_s,
                o.decrypt_mb_per_s
                    .map(|d| format!("{d:.0} MB/s"))
                    .unwrap_or_else(|| "-".into()),
                o.version
            );
        }
        None => {
            let _ = writeln!(s, "  openssl speed: not run (no openssl, or --no-openssl)");
        }
    }
    if !r.allocation_counting {
        let _ = writeln!(
            s,
            "  allocations: not counted ({COUNTING_BINARY} is not installed beside fscrypt-rs)"
        );
    }
    let _ = writeln!(
        s,
        "  * = selected by the registry. Numbers from a shared machine are noisy."
    );
    s
}

/// `openssl speed -evp aes-256-xts` as an outside reference, when the
/// `openssl` program exists.
#[derive(Debug, Clone, Serialize)]
pub struct OpensslReference {
    /// `openssl version` output.
    pub version: String,
    /// The command run (encryption).
    pub command: String,
    /// Encryption MB/s (10^6 bytes/s).
    pub encrypt_mb_per_s: f64,
    /// Decryption MB/s (with `-decrypt`), when it parsed.
    pub decrypt_mb_per_s: Option<f64>,
}

/// Parses the result line of `openssl speed -evp CIPHER -bytes N`: the
/// figure (in 1000s of bytes per second, suffix `k`) on the line starting
/// with the cipher name, returned in MB/s.
pub fn parse_openssl_speed(output: &str, cipher: &str) -> Option<f64> {
    output
        .lines()
        .rev()
        .find(|l| {
            l.split_whitespace()
                .next()
                .is_some_and(|w| w.eq_ignore_ascii_case(cipher))
        })
        .and_then(|l| l.split_whitespace().last())
        .and_then(|v| v.strip_suffix('k'))
        .and_then(|v| v.parse::<f64>().ok())
        .map(|k| k / 1000.0)
}

/// Runs `openssl speed` for AES-256-XTS on `data_unit_size`-byte buffers
/// for `seconds` each way; `None` when openssl is missing or fails.
pub fn openssl_reference(data_unit_size: usize, seconds: u32) -> Option<OpensslReference> {
    use std::process::Command;
    let version = Command::new("openssl").arg("version").output().ok()?;
    if !version.status.success() {
        return None;
    }
    let args = |decrypt: bool| {
        let mut a: Vec<String> = vec!["speed".into()];
        if decrypt {
            a.push("-decrypt".into());
        }
        a.extend(
            [
                "-evp",
                "aes-256-xts",
                "-bytes",
                &data_unit_size.to_string(),
                "-seconds",
                &seconds.to_string(),
            ]
            .map(String::from),
        );
        a
    };
    let run = |decrypt: bool| -> Option<f64> {
        let out = Command::new("openssl").args(args(decrypt)).output().ok()?;
        if !out.status.success() {
            return None;
        }
        parse_openssl_speed(&String::from_utf8_lossy(&out.stdout), "AES-256-XTS")
    };
    let encrypt_mb_per_s = run(false)?;
    Some(OpensslReference {
        version: String::from_utf8_lossy(&version.stdout).trim().to_owned(),
        command: format!("openssl {}", args(false).join(" ")),
        encrypt_mb_per_s,
        decrypt_mb_per_s: run(true),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    use fscrypt_crypto::bench::{NsPerCall, Throughput};

    fn op(bytes: usize, ns: f64) -> OpResult {
        let t = bytes as f64 * 1e3 / ns;
        OpResult {
            bytes,
            ns: NsPerCall {
                median: ns,
                min: ns,
                max: ns,
                calls_per_run: 1,
                runs: vec![ns],
            },
            mb_per_s: Throughput {
                median: t,
                min: t,
                max: t,
            },
            allocs_per_call: Some(0.0),
        }
    }

    fn xts(name: &'static str, selected: bool, ns: f64) -> ImplementationResult {
        ImplementationResult {
            algorithm: "AES-256-XTS",
            kernel_name: "xts(aes)",
            implementation: name,
            priority: 1,
            used_for_contents: true,
            used_for_filenames: false,
            properties: "-".into(),
            self_test: "passed (2 vectors)".into(),
            selected,
            verdict: if selected {
                "selected"
            } else {
                "lower priority than x"
            }
            .into(),
            encrypt: Some(op(4096, ns)),
            decrypt: Some(op(4096, ns)),
            names: Vec::new(),
            key_schedule: None,
            per_file_key_setup_ns: None,
            skipped: None,
        }
    }

    fn mac(name: &'static str, selected: bool, ns: f64) -> MacResult {
        MacResult {
            algorithm: MAC_ALGORITHM_NAME,
            implementation: name,
            priority: 1,
            properties: "-".into(),
            self_test: "passed (3 vectors)".into(),
            selected,
            verdict: if selected {
                "selected"
            } else {
                "lower priority than m"
            }
            .into(),
            tag: Some(op(4096, ns)),
            key_schedule: Some(op(48, 100.0)),
            skipped: None,
        }
    }

    fn report(macs: Vec<MacResult>, implementations: Vec<ImplementationResult>) -> Report {
        Report {
            data_unit_size: 4096,
            runs: 1,
            warmup_ms: 1,
            run_ms: 1,
            threads: 1,
            allocation_counting: true,
            hkdf_per_file_key: None,
            mac_vs_xts: mac_cost(&macs, &implementations),
            implementations,
            macs,
            raw_awslc_xts_encrypt: None,
            openssl: None,
        }
    }

    #[test]
    fn mac_cost_compares_the_selected_mac_with_the_selected_xts() {
        let c = mac_cost(
            &[mac("slow-mac", false, 9000.0), mac("m", true, 600.0)],
            &[xts("slow-xts", false, 3000.0), xts("x", true, 400.0)],
        )
        .expect("both measured");
        assert_eq!((c.mac_implementation, c.xts_implementation), ("m", "x"));
        assert!((c.ratio - 1.5).abs() < 1e-12);
        assert_eq!(c.data_unit_size, 4096);
        // Without the selected XTS (--only), or without a MAC: no figure.
        assert!(mac_cost(&[mac("m", true, 600.0)], &[xts("x", false, 400.0)]).is_none());
        assert!(mac_cost(&[], &[xts("x", true, 400.0)]).is_none());
        let mut skipped = mac("m", true, 600.0);
        skipped.tag = None;
        assert!(mac_cost(&[skipped], &[xts("x", true, 400.0)]).is_none());
    }

    #[test]
    fn the_text_shows_the_mac_rows_and_its_cost_per_unit() {
        let text = render(&report(
            vec![mac("m-fast", true, 600.0), mac("m-slow", false, 1200.0)],
            vec![xts("x", true, 400.0)],
        ));
        assert!(text.contains("\nPOLYVAL-AES-256-MAC\n  m-fast *"), "{text}");
        assert!(text.contains("\n  m-slow    "), "{text}");
        assert!(
            text.contains("MAC cost per 4 KiB unit relative to AES-256-XTS: 1.50\n  (m-fast 600 ns per tag; x 400 ns per encryption)"),
            "{text}"
        );
        // 4096 B in 600 ns = 6827 MB/s.
        let row = text
            .lines()
            .find(|l| l.starts_with("m-fast *"))
            .unwrap_or_else(|| panic!("no tag row in:\n{text}"));
        let cells: Vec<&str> = row
            .split("  ")
            .map(str::trim)
            .filter(|c| !c.is_empty())
            .collect();
        assert_eq!(cells, ["m-fast *", "6827 (6827..6827)", "0", "100 / 0"]);
        let text = render(&report(vec![mac("m", true, 600.0)], Vec::new()));
        assert!(
            text.contains("MAC cost relative to AES-256-XTS: not measured"),
            "{text}"
        );
        let text = render(&report(Vec::new(), vec![xts("x", true, 400.0)]));
        assert!(!text.contains("MAC"), "{text}");
    }

    #[test]
    fn unit_sizes_read_naturally() {
        assert_eq!(unit_size(4096), "4 KiB");
        assert_eq!(unit_size(65536), "64 KiB");
        assert_eq!(unit_size(512), "512 B");
        assert_eq!(unit_size(1040), "1040 B");
    }

    #[test]
    fn openssl_speed_output_parses() {
        let out = "The 'numbers' are in 1000s of bytes per second processed.\n\
                   type           4096 bytes\n\
                   AES-256-XTS    8107701.87k\n";
        let v = parse_openssl_speed(out, "AES-256-XTS").unwrap();
        assert!((v - 8107.70187).abs() < 1e-6);
        assert_eq!(parse_openssl_speed("garbage\n", "AES-256-XTS"), None);
    }
}
