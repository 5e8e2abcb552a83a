//! `fscrypt-rs providers`: the crypto provider registry as a table (or JSON):
//! every registered implementation per algorithm with its priority,
//! properties, self-test result, and why it is or is not selected.

use std::io::Write;
use std::process::ExitCode;

use fscrypt_crypto::Algorithm;
use fscrypt_crypto::registry::{
    ImplementationReport, Properties, SelfTestStatus, Verdict, default_registry,
};
use serde_json::{Value, json};

/// Arguments of `fscrypt-rs providers`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// Print machine-readable JSON instead of a table.
    #[arg(long)]
    pub json: bool,
}

fn props_json(p: Properties) -> Value {
    Value::from(p.names().collect::<Vec<_>>())
}

fn verdict_json(v: &Verdict) -> Value {
    match v {
        Verdict::Selected => json!({ "state": "selected" }),
        Verdict::Refused(p) => json!({ "state": "refused", "refused_properties": props_json(*p) }),
        Verdict::SelfTestFailed => json!({ "state": "self_test_failed" }),
        Verdict::LowerPriority { selected } => {
            json!({ "state": "lower_priority", "selected": selected })
        }
    }
}

fn self_test_json(s: &SelfTestStatus) -> Value {
    match s {
        SelfTestStatus::Passed { vectors } => json!({ "passed": true, "vectors": vectors }),
        SelfTestStatus::Failed { vector, failure } => {
            json!({ "passed": false, "vector": vector, "failure": failure.to_string() })
        }
    }
}

fn to_json(rows: &[ImplementationReport], refused: Properties) -> Value {
    let algorithms: Vec<Value> = Algorithm::ALL
        .iter()
        .map(|&alg| {
            let mine: Vec<&ImplementationReport> = rows
                .iter()
                .filter(|r| r.implementation.algorithm == alg)
                .collect();
            let selected = mine
                .iter()
                .find(|r| r.verdict == Verdict::Selected)
                .map(|r| r.implementation.name);
            json!({
                "algorithm": alg.name(),
                "kernel_name": alg.kernel_name(),
                "key_size": alg.key_size(),
                "iv_size": alg.iv_size(),
                "selected": selected,
                "implementations": mine.iter().map(|r| json!({
                    "name": r.implementation.name,
                    "priority": r.implementation.priority,
                    "properties": props_json(r.implementation.properties),
                    "self_test": self_test_json(&r.self_test),
                    "verdict": verdict_json(&r.verdict),
                })).collect::<Vec<_>>(),
            })
        })
        .collect();
    json!({ "refused_properties": props_json(refused), "algorithms": algorithms })
}

/// Runs `fscrypt-rs providers`. Exit status 1 if some algorithm has no usable
/// implementation.
pub fn exec(args: Args) -> anyhow::Result<ExitCode> {
    let registry = default_registry();
    let rows = registry.report();
    let all_selected = Algorithm::ALL.iter().all(|&alg| {
        rows.iter()
            .any(|r| r.implementation.algorithm == alg && r.verdict == Verdict::Selected)
    });
    let mut out = std::io::stdout().lock();
    if args.json {
        serde_json::to_writer_pretty(&mut out, &to_json(&rows, registry.refused()))?;
        writeln!(out)?;
    } else {
        writeln!(
            out,
            "refused properties: {} (like Linux fscrypt: CRYPTO_ALG_ASYNC | CRYPTO_ALG_ALLOCATES_MEMORY | CRYPTO_ALG_KERN_DRIVER_ONLY)\n",
            registry.refused()
        )?;
        let header = [
            "ALGORITHM",
            "IMPLEMENTATION",
            "PRIORITY",
            "PROPERTIES",
            "SELF-TEST",
            "STATUS",
        ];
        let mut table: Vec<[String; 6]> = vec![header.map(String::from)];
        let mut last_alg = None;
        for r in &rows {
            let alg = r.implementation.algorithm;
            let alg_cell = if last_alg == Some(alg) {
                String::new()
            } else {
                alg.name().to_string()
            };
            last_alg = Some(alg);
            table.push([
                alg_cell,
                r.implementation.name.to_string(),
                r.implementation.priority.to_string(),
                r.implementation.properties.to_string(),
                r.self_test.to_string(),
                r.verdict.to_string(),
            ]);
        }
        let mut widths = [0usize; 6];
        for row in &table {
            for (w, c) in widths.iter_mut().zip(row) {
                *w = (*w).max(c.len());
            }
        }
        for row in &table {
            let mut line = String::new();
            for (i, (c, w)) in row.iter().zip(widths).enumerate() {
                if i + 1 == row.len() {
                    line.push_str(c);
                } else {
                    line.push_str(&format!("{c:<w$}  "));
                }
            }
            writeln!(out, "{}", line.trim_end())?;
        }
        for alg in Algorithm::ALL {
            if !rows
                .iter()
                .any(|r| r.implementation.algorithm == alg && r.verdict == Verdict::Selected)
            {
                writeln!(out, "\n{alg}: NO USABLE IMPLEMENTATION")?;
            }
        }
    }
    Ok(if all_selected {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}
