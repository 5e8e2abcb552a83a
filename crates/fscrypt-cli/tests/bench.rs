//! `fscrypt-rs bench --quick --json` end to end: a row for every algorithm
//! and every registered implementation, one selected per algorithm, the
//! vault MAC's implementations and their cost beside AES-256-XTS. Speeds
//! are not asserted (CI machines vary); shapes and invariants are.

use std::collections::BTreeSet;
use std::process::Command;

use serde_json::Value;

#[test]
fn quick_json_has_a_row_per_algorithm() {
    let out = test_support::run::succeed(Command::new(env!("CARGO_BIN_EXE_fscrypt-rs")).args([
        "bench",
        "--quick",
        "--json",
        "--no-openssl",
    ]));
    let v: Value = serde_json::from_slice(&out.stdout).expect("valid JSON");
    let rows = v["implementations"].as_array().expect("implementations");
    let algs: BTreeSet<&str> = rows
        .iter()
        .map(|r| r["algorithm"].as_str().expect("algorithm"))
        .collect();
    let expected: BTreeSet<&str> = fscrypt_crypto::Algorithm::ALL
        .iter()
        .map(|a| a.name())
        .collect();
    assert_eq!(algs, expected, "one or more rows per fscrypt algorithm");
    // Every registered implementation has a row.
    let registered = fscrypt_crypto::registry::default_registry()
        .implementations()
        .count();
    assert_eq!(rows.len(), registered);
    for alg in &expected {
        let selected = rows
            .iter()
            .filter(|r| r["algorithm"] == *alg && r["selected"] == true)
            .count();
        assert_eq!(selected, 1, "{alg}: exactly one selected implementation");
        assert!(v["selected"][alg].is_string(), "{alg} in the selected map");
    }
    for r in rows {
        let name = r["implementation"].as_str().unwrap_or("?");
        if r["skipped"].is_string() {
            continue;
        }
        let contents = r["used_for_contents"] == true;
        let filenames = r["used_for_filenames"] == true;
        assert!(contents || filenames, "{name}: a role");
        assert_eq!(
            r["encrypt"].is_object(),
            contents,
            "{name}: data-unit encrypt row"
        );
        assert_eq!(
            r["decrypt"].is_object(),
            contents,
            "{name}: data-unit decrypt row"
        );
        let names = r["names"].as_array().expect("names");
        assert_eq!(
            names.len(),
            if filenames { 3 } else { 0 },
            "{name}: 16/32/64-byte names"
        );
        assert!(
            r["key_schedule"]["ns"]["median"].as_f64().is_some(),
            "{name}: key setup"
        );
        if contents {
            let e = &r["encrypt"];
            assert_eq!(e["bytes"], 4096);
            let (min, med, max) = (
                e["mb_per_s"]["min"].as_f64().unwrap_or(-1.0),
                e["mb_per_s"]["median"].as_f64().unwrap_or(-1.0),
                e["mb_per_s"]["max"].as_f64().unwrap_or(-1.0),
            );
            assert!(
                0.0 < min && min <= med && med <= max,
                "{name}: {min} {med} {max}"
            );
            // The counting allocator is installed in the binary.
            assert!(
                e["allocs_per_call"].as_f64().is_some(),
                "{name}: allocations counted"
            );
        }
    }
    assert_eq!(v["allocation_counting"], true);
    assert!(v["hkdf_per_file_key"]["ns"]["median"].as_f64().is_some());

    // The vault MAC: every registered implementation, measured over
    // 4096-byte messages, the built-in one self-tested and selected.
    let macs = v["macs"].as_array().expect("macs");
    assert_eq!(
        macs.len(),
        fscrypt_crypto::registry::default_registry()
            .mac_report()
            .len()
    );
    for m in macs {
        assert_eq!(m["algorithm"], "POLYVAL-AES-256-MAC");
        let name = m["implementation"].as_str().expect("implementation");
        assert!(
            m["self_test"].as_str().unwrap_or("").starts_with("passed"),
            "{name}: {}",
            m["self_test"]
        );
        let t = &m["tag"];
        assert_eq!(t["bytes"], 4096, "{name}");
        let (min, med, max) = (
            t["mb_per_s"]["min"].as_f64().unwrap_or(-1.0),
            t["mb_per_s"]["median"].as_f64().unwrap_or(-1.0),
            t["mb_per_s"]["max"].as_f64().unwrap_or(-1.0),
        );
        assert!(
            0.0 < min && min <= med && med <= max,
            "{name}: {min} {med} {max}"
        );
        // A tag must not allocate (the MacKey contract).
        assert_eq!(t["allocs_per_call"], 0.0, "{name}: allocations per tag");
        assert!(m["key_schedule"]["ns"]["median"].as_f64().is_some());
    }
    let selected: Vec<&Value> = macs.iter().filter(|m| m["selected"] == true).collect();
    assert_eq!(selected.len(), 1, "exactly one selected MAC");
    assert_eq!(
        selected[0]["implementation"],
        "polyval-aes-256-mac-rustcrypto"
    );
    assert_eq!(selected[0]["verdict"], "selected");
    assert_eq!(
        v["selected"]["POLYVAL-AES-256-MAC"],
        "polyval-aes-256-mac-rustcrypto"
    );
    // Its cost per data unit beside the selected AES-256-XTS encryption.
    let c = &v["mac_vs_xts"];
    assert_eq!(c["data_unit_size"], 4096);
    assert_eq!(c["mac_implementation"], "polyval-aes-256-mac-rustcrypto");
    assert_eq!(c["xts_implementation"], v["selected"]["AES-256-XTS"]);
    let (mac_ns, xts_ns, ratio) = (
        c["mac_ns"].as_f64().unwrap_or(-1.0),
        c["xts_encrypt_ns"].as_f64().unwrap_or(-1.0),
        c["ratio"].as_f64().unwrap_or(-1.0),
    );
    assert!(mac_ns > 0.0 && xts_ns > 0.0, "{c}");
    assert!((ratio - mac_ns / xts_ns).abs() < 1e-9, "{c}");
}

#[test]
fn bad_data_unit_size_is_refused() {
    let out = Command::new(env!("CARGO_BIN_EXE_fscrypt-rs"))
        .args(["bench", "--quick", "--data-unit-size", "100"])
        .output()
        .expect("run fscrypt-rs bench");
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("data-unit-size"));
}

/// The counting allocator is in `fscrypt-rs-bench` only: the `fscrypt-rs`
/// binary (the mount daemon) does not link it, and `fscrypt-rs bench` still
/// reports allocation counts by handing over to `fscrypt-rs-bench`.
#[test]
fn counting_allocator_only_in_the_bench_binary() {
    let daemon = std::fs::read(env!("CARGO_BIN_EXE_fscrypt-rs")).expect("read fscrypt-rs");
    let bench =
        std::fs::read(env!("CARGO_BIN_EXE_fscrypt-rs-bench")).expect("read fscrypt-rs-bench");
    let has = |bin: &[u8]| bin.windows(11).any(|w| w == b"stats_alloc");
    assert!(
        has(&bench),
        "fscrypt-rs-bench must carry the counting allocator"
    );
    assert!(
        !has(&daemon),
        "fscrypt-rs must not carry the counting allocator"
    );
    let out = test_support::run::succeed(Command::new(env!("CARGO_BIN_EXE_fscrypt-rs")).args([
        "bench",
        "--quick",
        "--json",
        "--no-openssl",
        "--only",
        "AES-256-XTS",
    ]));
    let v: Value = serde_json::from_slice(&out.stdout).expect("valid JSON");
    assert_eq!(
        v["allocation_counting"], true,
        "bench hands over to fscrypt-rs-bench"
    );
    // --only AES-256-XTS leaves the MAC out.
    assert_eq!(v["macs"], serde_json::json!([]));
    assert_eq!(v["mac_vs_xts"], Value::Null);
}

/// `--only POLYVAL-AES-256-MAC` measures the MAC alone (case-insensitive).
#[test]
fn only_the_mac() {
    let out = test_support::run::succeed(Command::new(env!("CARGO_BIN_EXE_fscrypt-rs")).args([
        "bench",
        "--quick",
        "--json",
        "--no-openssl",
        "--only",
        "polyval-aes-256-mac",
    ]));
    let v: Value = serde_json::from_slice(&out.stdout).expect("valid JSON");
    assert_eq!(v["implementations"], serde_json::json!([]));
    assert_eq!(
        v["macs"][0]["implementation"],
        "polyval-aes-256-mac-rustcrypto"
    );
    assert!(v["macs"][0]["tag"]["ns"]["median"].as_f64().is_some());
}

/// The text report fits a 120-column terminal.
#[test]
fn text_report_fits_120_columns() {
    let out = test_support::run::succeed(Command::new(env!("CARGO_BIN_EXE_fscrypt-rs")).args([
        "bench",
        "--quick",
        "--no-openssl",
    ]));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("Registry") && text.contains("Filenames"));
    // The MAC's registry row, its measured row and its cost per unit.
    assert!(
        text.contains("\nPOLYVAL-AES-256-MAC\n  polyval-aes-256-mac-rustcrypto *"),
        "{text}"
    );
    let registry_row = text
        .lines()
        .find(|l| l.starts_with("  polyval-aes-256-mac-rustcrypto *"))
        .expect("MAC registry row");
    assert!(
        registry_row.contains("passed (3 vectors)") && registry_row.ends_with("selected"),
        "{registry_row}"
    );
    assert!(
        text.contains("\nVault MAC POLYVAL-AES-256-MAC (one tag per data unit"),
        "{text}"
    );
    assert!(
        text.lines()
            .any(|l| l.starts_with("polyval-aes-256-mac-rustcrypto *  ")),
        "{text}"
    );
    let cost = text
        .lines()
        .find(|l| l.starts_with("MAC cost per 4 KiB unit relative to AES-256-XTS: "))
        .unwrap_or_else(|| panic!("no MAC cost line in:\n{text}"));
    let ratio: f64 = cost
        .rsplit(' ')
        .next()
        .and_then(|r| r.parse().ok())
        .unwrap_or_else(|| panic!("ratio in {cost}"));
    assert!(ratio > 0.0, "{cost}");
    for line in text.lines() {
        assert!(
            line.chars().count() <= 120,
            "{} columns: {line}",
            line.chars().count()
        );
    }
}
