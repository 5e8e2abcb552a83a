//! `fscrypt-rs providers`: the crypto provider registry as a table (or JSON):
//! every registered implementation per algorithm with its priority,
//! properties, self-test result, and why it is or is not selected; the
//! vault MAC's implementations (POLYVAL-AES-256-MAC) the same way.

use std::io::Write;
use std::process::ExitCode;

use fscrypt_crypto::Algorithm;
use fscrypt_crypto::mac::{MAC_ALGORITHM_NAME, MAC_KEY_SIZE, MAC_TAG_SIZE};
use fscrypt_crypto::registry::{
    ImplementationReport, MacImplementationReport, Properties, Registry, SelfTestStatus, Verdict,
    default_registry,
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

/// One registry row, cipher or MAC: what the table and the JSON show.
#[derive(Debug, Clone, Copy)]
struct Row<'a> {
    name: &'static str,
    priority: u32,
    properties: Properties,
    self_test: &'a SelfTestStatus,
    verdict: &'a Verdict,
}

impl<'a> From<&'a ImplementationReport> for Row<'a> {
    fn from(r: &'a ImplementationReport) -> Self {
        Row {
            name: r.implementation.name,
            priority: r.implementation.priority,
            properties: r.implementation.properties,
            self_test: &r.self_test,
            verdict: &r.verdict,
        }
    }
}

impl<'a> From<&'a MacImplementationReport> for Row<'a> {
    fn from(r: &'a MacImplementationReport) -> Self {
        Row {
            name: r.implementation.name,
            priority: r.implementation.priority,
            properties: r.implementation.properties,
            self_test: &r.self_test,
            verdict: &r.verdict,
        }
    }
}

/// The rows of one algorithm (highest priority first) with the fields of
/// its JSON object besides `algorithm`, `selected` and `implementations`.
struct Group<'a> {
    algorithm: &'static str,
    info: serde_json::Map<String, Value>,
    rows: Vec<Row<'a>>,
}

impl Group<'_> {
    fn selected(&self) -> Option<&'static str> {
        self.rows
            .iter()
            .find(|r| *r.verdict == Verdict::Selected)
            .map(|r| r.name)
    }

    fn to_json(&self) -> Value {
        let mut o = serde_json::Map::new();
        o.insert("algorithm".into(), json!(self.algorithm));
        o.extend(self.info.clone());
        o.insert("selected".into(), json!(self.selected()));
        o.insert(
            "implementations".into(),
            self.rows
                .iter()
                .map(|r| {
                    json!({
                        "name": r.name,
                        "priority": r.priority,
                        "properties": props_json(r.properties),
                        "self_test": self_test_json(r.self_test),
                        "verdict": verdict_json(r.verdict),
                    })
                })
                .collect(),
        );
        Value::Object(o)
    }
}

fn info(v: Value) -> serde_json::Map<String, Value> {
    match v {
        Value::Object(m) => m,
        _ => serde_json::Map::new(),
    }
}

/// The cipher groups, one per [`Algorithm`] in [`Algorithm::ALL`] order.
fn cipher_groups(rows: &[ImplementationReport]) -> Vec<Group<'_>> {
    Algorithm::ALL
        .iter()
        .map(|&alg| Group {
            algorithm: alg.name(),
            info: info(json!({
                "kernel_name": alg.kernel_name(),
                "key_size": alg.key_size(),
                "iv_size": alg.iv_size(),
            })),
            rows: rows
                .iter()
                .filter(|r| r.implementation.algorithm == alg)
                .map(Row::from)
                .collect(),
        })
        .collect()
}

/// The vault MAC's group (fscrypt-rs's own algorithm: no kernel name).
fn mac_group(rows: &[MacImplementationReport]) -> Group<'_> {
    Group {
        algorithm: MAC_ALGORITHM_NAME,
        info: info(json!({ "key_size": MAC_KEY_SIZE, "tag_size": MAC_TAG_SIZE })),
        rows: rows.iter().map(Row::from).collect(),
    }
}

/// `{refused_properties, algorithms: [cipher groups], macs: [MAC group]}`.
fn to_json(ciphers: &[Group], mac: &Group, refused: Properties) -> Value {
    json!({
        "refused_properties": props_json(refused),
        "algorithms": ciphers.iter().map(Group::to_json).collect::<Vec<_>>(),
        "macs": [mac.to_json()],
    })
}

/// The table: a header, then every group's rows, the algorithm named on its
/// first row only; columns padded to the widest cell.
fn table(groups: &[&Group]) -> String {
    let header = [
        "ALGORITHM",
        "IMPLEMENTATION",
        "PRIORITY",
        "PROPERTIES",
        "SELF-TEST",
        "STATUS",
    ];
    let mut table: Vec<[String; 6]> = vec![header.map(String::from)];
    for g in groups {
        for (i, r) in g.rows.iter().enumerate() {
            table.push([
                if i == 0 { g.algorithm } else { "" }.to_string(),
                r.name.to_string(),
                r.priority.to_string(),
                r.properties.to_string(),
                r.self_test.to_string(),
                r.verdict.to_string(),
            ]);
        }
    }
    let mut widths = [0usize; 6];
    for row in &table {
        for (w, c) in widths.iter_mut().zip(row) {
            *w = (*w).max(c.len());
        }
    }
    let mut out = String::new();
    for row in &table {
        let mut line = String::new();
        for (i, (c, w)) in row.iter().zip(widths).enumerate() {
            if i + 1 == row.len() {
                line.push_str(c);
            } else {
                line.push_str(&format!("{c:<w$}  "));
            }
        }
        out.push_str(line.trim_end());
        out.push('\n');
    }
    out
}

/// The output of `providers` for `registry` (JSON or table) and whether
/// every algorithm, the MAC included, has a selected implementation.
fn render(registry: &Registry, as_json: bool) -> anyhow::Result<(String, bool)> {
    let rows = registry.report();
    let mac_rows = registry.mac_report();
    let ciphers = cipher_groups(&rows);
    let mac = mac_group(&mac_rows);
    let groups: Vec<&Group> = ciphers.iter().chain([&mac]).collect();
    let all_selected = groups.iter().all(|g| g.selected().is_some());
    let mut out = String::new();
    if as_json {
        out = serde_json::to_string_pretty(&to_json(&ciphers, &mac, registry.refused()))?;
        out.push('\n');
    } else {
        out.push_str(&format!(
            "refused properties: {} (like Linux fscrypt: CRYPTO_ALG_ASYNC | CRYPTO_ALG_ALLOCATES_MEMORY | CRYPTO_ALG_KERN_DRIVER_ONLY)\n\n",
            registry.refused()
        ));
        out.push_str(&table(&groups));
        for g in groups.iter().filter(|g| g.selected().is_none()) {
            out.push_str(&format!("\n{}: NO USABLE IMPLEMENTATION\n", g.algorithm));
        }
    }
    Ok((out, all_selected))
}

/// Runs `fscrypt-rs providers`. Exit status 1 if some algorithm (or the
/// vault MAC) has no usable implementation.
pub fn exec(args: Args) -> anyhow::Result<ExitCode> {
    let (text, all_selected) = render(default_registry(), args.json)?;
    std::io::stdout().lock().write_all(text.as_bytes())?;
    Ok(if all_selected {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use fscrypt_crypto::SecretBox;
    use fscrypt_crypto::mac::MacKey;
    use fscrypt_crypto::registry::MacImplementation;

    /// A MAC that gives a wrong tag: fails its self-test.
    struct Broken;
    impl MacKey for Broken {
        fn tag_with_nonce(&self, _: &[u8; 12], _: &[u8], _: &[u8]) -> [u8; MAC_TAG_SIZE] {
            [0; MAC_TAG_SIZE]
        }
    }

    fn builtin_mac() -> MacImplementation {
        *Registry::with_builtins()
            .select_mac()
            .expect("built-in MAC")
    }

    fn mac(name: &'static str, priority: u32, properties: Properties) -> MacImplementation {
        MacImplementation {
            name,
            priority,
            properties,
            new_key: |_| Ok(SecretBox::mac_key(Broken)),
        }
    }

    /// Every cipher of the built-ins plus, for the MAC, a broken one above
    /// the built-in and a correct-looking offload one above both.
    fn registry() -> Registry {
        let mut r = Registry::new();
        for imp in fscrypt_crypto::registry::builtin_implementations() {
            r.register(*imp);
        }
        r.register_mac(builtin_mac());
        r.register_mac(mac("broken-mac", 900, Properties::NONE));
        r.register_mac(mac("offload-mac", 1000, Properties::OFFLOAD));
        r
    }

    #[test]
    fn the_table_lists_the_mac_rows_with_their_verdicts() {
        let (text, ok) = render(&registry(), false).unwrap();
        assert!(ok, "{text}");
        let lines: Vec<&str> = text.lines().collect();
        let at = lines
            .iter()
            .position(|l| l.starts_with(MAC_ALGORITHM_NAME))
            .unwrap_or_else(|| panic!("no MAC row in:\n{text}"));
        // Highest priority first; the algorithm is named once.
        assert!(
            lines[at].contains("offload-mac") && lines[at].ends_with("refused property: offload")
        );
        assert!(lines[at + 1].starts_with(' ') && lines[at + 1].contains("broken-mac"));
        assert!(
            lines[at + 1].contains("FAILED: wrong tag")
                && lines[at + 1].ends_with("failed self-test")
        );
        assert!(lines[at + 2].contains(builtin_mac().name) && lines[at + 2].ends_with("selected"));
        // Same columns as the cipher rows.
        let status_col = |l: &str| l.rfind("  ").map(|i| i + 2);
        assert_eq!(status_col(lines[at + 2]), status_col(lines[3]), "{text}");
    }

    #[test]
    fn the_json_has_the_mac_group() {
        let (text, ok) = render(&registry(), true).unwrap();
        assert!(ok);
        let v: Value = serde_json::from_str(&text).unwrap();
        assert_eq!(
            v["algorithms"].as_array().unwrap().len(),
            Algorithm::ALL.len()
        );
        let m = &v["macs"][0];
        assert_eq!(m["algorithm"], MAC_ALGORITHM_NAME);
        assert_eq!(m["key_size"], 48);
        assert_eq!(m["tag_size"], 16);
        assert_eq!(m["selected"], builtin_mac().name);
        let states: Vec<&str> = m["implementations"]
            .as_array()
            .unwrap()
            .iter()
            .map(|i| i["verdict"]["state"].as_str().unwrap())
            .collect();
        assert_eq!(states, ["refused", "self_test_failed", "selected"]);
        assert_eq!(
            m["implementations"][0]["verdict"]["refused_properties"],
            json!(["offload"])
        );
        assert_eq!(m["implementations"][1]["self_test"]["passed"], false);
        assert_eq!(m["implementations"][2]["self_test"]["passed"], true);
    }

    #[test]
    fn no_usable_mac_fails() {
        let mut r = Registry::new();
        for imp in fscrypt_crypto::registry::builtin_implementations() {
            r.register(*imp);
        }
        r.register_mac(mac("offload-mac", 1000, Properties::OFFLOAD));
        let (text, ok) = render(&r, false).unwrap();
        assert!(!ok);
        assert!(
            text.contains("POLYVAL-AES-256-MAC: NO USABLE IMPLEMENTATION"),
            "{text}"
        );
        let (json, ok) = render(&r, true).unwrap();
        assert!(!ok);
        let v: Value = serde_json::from_str(&json).unwrap();
        assert_eq!(v["macs"][0]["selected"], Value::Null);
    }
}
