//! `fscrypt-rs kernel-crypto` end to end: the binary on a synthetic
//! /proc/crypto with a QAT-like driver, and on the running kernel's.

use std::process::Command;

use serde_json::Value;

fn run_json(extra: &[&str]) -> Value {
    let out = test_support::run::succeed(
        Command::new(env!("CARGO_BIN_EXE_fscrypt-rs"))
            .arg("kernel-crypto")
            .arg("--json")
            .args(extra),
    );
    serde_json::from_slice(&out.stdout).expect("valid JSON")
}

fn algorithm<'a>(v: &'a Value, name: &str) -> &'a Value {
    v["algorithms"]
        .as_array()
        .expect("algorithms array")
        .iter()
        .find(|a| a["kernel_name"] == name)
        .unwrap_or_else(|| panic!("no row for {name}"))
}

#[test]
fn synthetic_qat_is_refused_in_json() {
    let fixture = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../fscrypt-linux/tests/data/proc-crypto-synthetic-qat.txt"
    );
    let v = run_json(&["--proc-crypto", fixture, "--arch", "x86_64"]);
    let xts = algorithm(&v, "xts(aes)");
    assert_eq!(xts["driver"], "xts-aes-vaes-avx2");
    assert_eq!(xts["priority"], 600);
    assert_eq!(xts["status"], "ok");
    assert_eq!(xts["unmasked_pick"], "qat_aes_xts");
    assert_eq!(xts["refused"][0]["driver"], "qat_aes_xts");
    assert_eq!(xts["refused"][0]["priority"], 4001);
    assert_eq!(xts["refused"][0]["excluded"][0]["tag"], "async");
    let sm4 = algorithm(&v, "xts(sm4)");
    assert_eq!(sm4["status"], "slow");
    assert_eq!(sm4["slow"][0]["driver"], "sm4-generic");
}

#[test]
fn running_kernel_has_a_row_per_fscrypt_algorithm() {
    if !std::path::Path::new("/proc/crypto").exists() {
        eprintln!(
            "SKIP running_kernel_has_a_row_per_fscrypt_algorithm: no /proc/crypto on this kernel"
        );
        return;
    }
    let v = run_json(&[]);
    for name in [
        "xts(aes)",
        "cts(cbc(aes))",
        "essiv(cbc(aes),sha256)",
        "adiantum(xchacha12,aes)",
        "hctr2(aes)",
        "xts(sm4)",
        "cts(cbc(sm4))",
        "hmac(sha512)",
        "sha512",
        "sha256",
    ] {
        let a = algorithm(&v, name);
        assert!(a["status"].is_string(), "{name}: {a}");
    }
    // The text form renders too.
    let out = Command::new(env!("CARGO_BIN_EXE_fscrypt-rs"))
        .arg("kernel-crypto")
        .output()
        .expect("run fscrypt-rs");
    assert!(out.status.success());
    assert!(String::from_utf8_lossy(&out.stdout).contains("xts(aes) — contents"));
}
