//! `fscrypt-rs kernel-crypto`: which kernel Crypto API driver kernel fscrypt
//! would get for each of its algorithms, from `/proc/crypto`.
//!
//! The analysis lives in `fscrypt_linux::proc_crypto`; this module only
//! reads the files named on the command line and prints a table or JSON.

use std::fmt::Write as _;
use std::io::Write as _;
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context as _;
use fscrypt_linux::proc_crypto::{
    self, AlgEntry, AlgorithmReport, Arch, Candidate, Lookup, ProcCrypto, Resolution, Severity,
};
use serde_json::{Value, json};

/// Arguments of `fscrypt-rs kernel-crypto`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// Print machine-readable JSON instead of a table.
    #[arg(long)]
    pub json: bool,
    /// Analyse this copy of /proc/crypto instead of the running kernel's.
    #[arg(long, value_name = "FILE", default_value = proc_crypto::PROC_CRYPTO_PATH)]
    pub proc_crypto: PathBuf,
    /// CPU description used for the "CPU has AES instructions" hint.
    #[arg(long, value_name = "FILE", default_value = proc_crypto::PROC_CPUINFO_PATH)]
    pub cpuinfo: PathBuf,
    /// Architecture whose kernel options the advice names (x86_64, aarch64,
    /// arm); default: this machine's.
    #[arg(long)]
    pub arch: Option<String>,
}

/// Runs `fscrypt-rs kernel-crypto`.
///
/// # Errors
/// When /proc/crypto (or the given copy) cannot be read or parsed, or stdout
/// fails.
pub fn exec(args: Args) -> anyhow::Result<ExitCode> {
    let pc = ProcCrypto::read(&args.proc_crypto)?;
    let arch = args
        .arch
        .as_deref()
        .map(Arch::from_name)
        .unwrap_or_else(Arch::current);
    // The hint is optional: a missing cpuinfo just drops it.
    let cpu_aes = std::fs::read_to_string(&args.cpuinfo)
        .ok()
        .and_then(|t| proc_crypto::cpu_has_aes(&t));
    let reports = proc_crypto::analyze(&pc, arch);
    let mut out = std::io::stdout().lock();
    if args.json {
        let v = json!({
            "source": args.proc_crypto.display().to_string(),
            "arch": arch.as_str(),
            "cpu_aes": cpu_aes,
            "fscrypt_mask": "CRYPTO_ALG_ASYNC | CRYPTO_ALG_ALLOCATES_MEMORY | CRYPTO_ALG_KERN_DRIVER_ONLY",
            "algorithms": reports.iter().map(report_json).collect::<Vec<_>>(),
        });
        let mut text = serde_json::to_string_pretty(&v).context("serializing JSON")?;
        text.push('\n');
        out.write_all(text.as_bytes())?;
    } else {
        let text = render_text(&args.proc_crypto, arch, cpu_aes, &reports);
        out.write_all(text.as_bytes())?;
    }
    Ok(ExitCode::SUCCESS)
}

/// One-word verdict for an algorithm.
fn status(r: &AlgorithmReport) -> &'static str {
    if !r.lookup.available() {
        "unavailable"
    } else if r.slow.iter().any(|s| s.severity == Severity::Major) {
        "slow"
    } else if !r.slow.is_empty() {
        "slow-kdf"
    } else {
        "ok"
    }
}

/// The registered entry that determines the speed and flags of what fscrypt
/// gets: the chosen driver, or for a template instance its first part's.
fn effective_entry(l: &Lookup) -> Option<&AlgEntry> {
    match &l.resolution {
        Resolution::Registered { .. } => l.chosen().map(|c| &c.entry),
        Resolution::Template { parts, .. } => parts.first().and_then(effective_entry),
        Resolution::Missing { .. } => None,
    }
}

fn sync_word(e: &AlgEntry) -> &'static str {
    match e.asynchronous {
        Some(true) => "async",
        Some(false) | None => "sync",
    }
}

fn entry_line(e: &AlgEntry) -> String {
    format!(
        "{} (priority {}, {}, internal {}, type {}, module {}, selftest {})",
        e.driver,
        e.priority,
        sync_word(e),
        if e.internal { "yes" } else { "no" },
        if e.alg_type.is_empty() {
            "?"
        } else {
            &e.alg_type
        },
        e.module,
        e.selftest.as_str()
    )
}

fn render_text(
    source: &std::path::Path,
    arch: Arch,
    cpu_aes: Option<bool>,
    reports: &[AlgorithmReport],
) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "Kernel Crypto API drivers for fscrypt (from {}, arch {}, CPU AES instructions: {})",
        source.display(),
        arch.as_str(),
        match cpu_aes {
            Some(true) => "yes",
            Some(false) => "no",
            None => "unknown",
        }
    );
    let _ = writeln!(
        s,
        "fscrypt asks with mask CRYPTO_ALG_ASYNC | CRYPTO_ALG_ALLOCATES_MEMORY | \
         CRYPTO_ALG_KERN_DRIVER_ONLY: async and hardware-offload drivers are refused.\n"
    );
    let shown: Vec<String> = reports
        .iter()
        .map(|r| match r.lookup.driver() {
            Some(d) if matches!(r.lookup.resolution, Resolution::Template { .. }) => {
                format!("{d} *")
            }
            Some(d) => d,
            None => "-".to_owned(),
        })
        .collect();
    let dw = shown.iter().map(String::len).max().unwrap_or(0).max(19);
    let mw = reports
        .iter()
        .filter_map(|r| effective_entry(&r.lookup).map(|e| e.module.len()))
        .max()
        .unwrap_or(0)
        .max(6);
    let _ = writeln!(
        s,
        "{:<24} {:<dw$} {:>5}  {:<5} {:<mw$} {:<8} status",
        "kernel name", "driver fscrypt gets", "prio", "sync", "module", "selftest"
    );
    for (r, driver) in reports.iter().zip(shown) {
        let eff = effective_entry(&r.lookup).filter(|_| r.lookup.available());
        let _ = writeln!(
            s,
            "{:<24} {:<dw$} {:>5}  {:<5} {:<mw$} {:<8} {}{}",
            r.algorithm.kernel_name,
            driver,
            eff.map(|e| e.priority.to_string())
                .unwrap_or_else(|| "-".into()),
            eff.map(|e| if e.asynchronous == Some(true) {
                "async"
            } else {
                "sync"
            })
            .unwrap_or("-"),
            eff.map(|e| e.module.as_str()).unwrap_or("-"),
            eff.map(|e| e.selftest.as_str()).unwrap_or("-"),
            status(r),
            if r.refused.is_empty() {
                ""
            } else {
                ", offload/async refused"
            },
        );
    }
    let _ = writeln!(
        s,
        "* not instantiated yet: the kernel builds it from the parts below on first use \
         (prio/module/selftest shown are the first part's)."
    );
    for r in reports {
        let _ = writeln!(
            s,
            "\n{} — {}",
            r.algorithm.kernel_name, r.algorithm.used_for
        );
        render_lookup(&mut s, &r.lookup, 1);
        for (name, c) in &r.refused {
            let reasons: Vec<String> = c
                .exclusions
                .iter()
                .map(|e| match e {
                    proc_crypto::Exclusion::OffloadFamily(f) => format!("offload family `{f}`"),
                    other => other.tag().to_owned(),
                })
                .collect();
            let _ = writeln!(
                s,
                "  REFUSED by fscrypt's mask: {} (priority {}, for {name}): {}",
                c.entry.driver,
                c.entry.priority,
                reasons.join(", ")
            );
        }
        if let Some(c) = r.lookup.unmasked_pick() {
            let _ = writeln!(
                s,
                "  note: a lookup without fscrypt's mask (dm-crypt, AF_ALG) would get {} (priority {}).",
                c.entry.driver, c.entry.priority
            );
        }
        for sl in &r.slow {
            let hint = if sl.driver.starts_with("aes") && cpu_aes == Some(true) {
                " (this CPU has AES instructions the kernel does not use)"
            } else {
                ""
            };
            let fix = if sl.fix.is_empty() {
                "no faster driver known for this architecture".to_owned()
            } else {
                format!("enable {}", sl.fix.join(" or "))
            };
            let _ = writeln!(
                s,
                "  SLOW{}: {}: {}. Fix: {}{}.",
                if sl.severity == Severity::Minor {
                    " (key setup only)"
                } else {
                    ""
                },
                sl.driver,
                sl.reason,
                fix,
                hint
            );
        }
        if !r.lookup.available() {
            let _ = writeln!(
                s,
                "  UNAVAILABLE: kernel fscrypt cannot use this algorithm unless a module provides \
                 the missing part (files using it fail with ENOPKG)."
            );
        }
    }
    s
}

fn render_lookup(s: &mut String, l: &Lookup, depth: usize) {
    let pad = "  ".repeat(depth);
    match &l.resolution {
        Resolution::Registered { index } => {
            if let Some(c) = l.candidates.get(*index) {
                let _ = writeln!(s, "{pad}{} -> {}", l.name, entry_line(&c.entry));
            }
            for (i, c) in l.candidates.iter().enumerate() {
                if i != *index {
                    render_other(s, &pad, c, i < *index);
                }
            }
        }
        Resolution::Template {
            template,
            config,
            selected_by_fscrypt,
            parts,
        } => {
            let note = if *selected_by_fscrypt {
                format!("{config}, always built with fscrypt")
            } else {
                format!("needs {config}, which /proc/crypto cannot show")
            };
            let why = if l.candidates.is_empty() {
                "not instantiated yet"
            } else {
                "no registered driver qualifies"
            };
            let build = match l.driver() {
                Some(d) => format!("the kernel would build {d}"),
                None => "the kernel cannot build it (a part is missing)".to_owned(),
            };
            let _ = writeln!(
                s,
                "{pad}{} -> {why}; {build} with template `{template}` ({note}) from:",
                l.name,
            );
            for c in &l.candidates {
                render_other(s, &pad, c, true);
            }
            for p in parts {
                render_lookup(s, p, depth + 1);
            }
        }
        Resolution::Missing { config } => {
            let cfg = if config.is_empty() {
                String::new()
            } else {
                format!("; provided by {}", config.join(", "))
            };
            let _ = writeln!(
                s,
                "{pad}{} -> MISSING: no driver registered (the kernel would try module crypto-{}){cfg}",
                l.name, l.name
            );
            for c in &l.candidates {
                render_other(s, &pad, c, true);
            }
        }
    }
}

fn render_other(s: &mut String, pad: &str, c: &Candidate, above: bool) {
    let why = if c.exclusions.is_empty() {
        if above {
            "eligible".to_owned()
        } else {
            "lower priority".to_owned()
        }
    } else {
        c.exclusions
            .iter()
            .map(|e| e.to_string())
            .collect::<Vec<_>>()
            .join("; ")
    };
    let _ = writeln!(
        s,
        "{pad}    not picked: {} (priority {}): {why}",
        c.entry.driver, c.entry.priority
    );
}

fn candidate_json(c: &Candidate, chosen: bool) -> Value {
    json!({
        "driver": c.entry.driver,
        "priority": c.entry.priority,
        "async": c.entry.asynchronous,
        "internal": c.entry.internal,
        "type": c.entry.alg_type,
        "module": c.entry.module,
        "selftest": c.entry.selftest.as_str(),
        "chosen": chosen,
        "excluded": c.exclusions.iter().map(|e| json!({"tag": e.tag(), "reason": e.to_string(), "fscrypt_mask": e.is_fscrypt_mask()})).collect::<Vec<_>>(),
    })
}

fn lookup_json(l: &Lookup) -> Value {
    let chosen_idx = match l.resolution {
        Resolution::Registered { index } => Some(index),
        _ => None,
    };
    let candidates: Vec<Value> = l
        .candidates
        .iter()
        .enumerate()
        .map(|(i, c)| candidate_json(c, Some(i) == chosen_idx))
        .collect();
    let mut v = json!({
        "name": l.name,
        "driver": l.driver(),
        "candidates": candidates,
    });
    match &l.resolution {
        Resolution::Registered { .. } => {
            v["resolution"] = json!("registered");
        }
        Resolution::Template {
            template,
            config,
            selected_by_fscrypt,
            parts,
        } => {
            v["resolution"] = json!("template");
            v["template"] = json!(template);
            v["config"] = json!(config);
            v["selected_by_fscrypt"] = json!(selected_by_fscrypt);
            v["parts"] = Value::Array(parts.iter().map(lookup_json).collect());
        }
        Resolution::Missing { config } => {
            v["resolution"] = json!("missing");
            v["config"] = json!(config);
        }
    }
    v
}

fn report_json(r: &AlgorithmReport) -> Value {
    let eff = effective_entry(&r.lookup);
    json!({
        "kernel_name": r.algorithm.kernel_name,
        "used_for": r.algorithm.used_for,
        "data_path": r.algorithm.data_path,
        "available": r.lookup.available(),
        "instantiated": matches!(r.lookup.resolution, Resolution::Registered { .. }),
        "driver": r.lookup.driver(),
        "priority": eff.map(|e| e.priority),
        "async": eff.and_then(|e| e.asynchronous),
        "internal": eff.map(|e| e.internal),
        "module": eff.map(|e| e.module.clone()),
        "selftest": eff.map(|e| e.selftest.as_str().to_owned()),
        "status": status(r),
        "unmasked_pick": r.lookup.unmasked_pick().map(|c| c.entry.driver.clone()),
        "refused": r.refused.iter().map(|(name, c)| {
            let mut v = candidate_json(c, false);
            v["name"] = json!(name);
            v
        }).collect::<Vec<_>>(),
        "slow": r.slow.iter().map(|s| json!({
            "driver": s.driver,
            "reason": s.reason,
            "fix": s.fix,
            "severity": match s.severity { Severity::Major => "major", Severity::Minor => "minor" },
        })).collect::<Vec<_>>(),
        "lookup": lookup_json(&r.lookup),
    })
}
