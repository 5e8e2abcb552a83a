//! `fscrypt-rs providers`: every algorithm, and the vault MAC, shows a
//! selected, self-tested CPU implementation, in both the table and the JSON
//! output.

use std::process::Command;

fn run(args: &[&str]) -> (bool, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_fscrypt-rs"))
        .args(args)
        .output()
        .expect("run fscrypt-rs");
    (
        out.status.success(),
        String::from_utf8(out.stdout).expect("utf-8 output"),
    )
}

#[test]
fn providers_json_has_a_selected_implementation_per_algorithm() {
    let (ok, stdout) = run(&["providers", "--json"]);
    assert!(ok);
    let v: serde_json::Value = serde_json::from_str(&stdout).expect("valid JSON");
    let algs = v["algorithms"].as_array().expect("algorithms array");
    assert_eq!(algs.len(), fscrypt_crypto::Algorithm::ALL.len());
    for a in algs {
        let selected = a["selected"]
            .as_str()
            .unwrap_or_else(|| panic!("{a}: none selected"));
        let imps = a["implementations"].as_array().unwrap();
        let sel = imps.iter().find(|i| i["name"] == selected).unwrap();
        assert_eq!(sel["self_test"]["passed"], true);
        assert_eq!(sel["verdict"]["state"], "selected");
        assert_eq!(sel["properties"].as_array().unwrap().len(), 0);
        assert_eq!(
            imps.iter()
                .filter(|i| i["verdict"]["state"] == "selected")
                .count(),
            1,
            "{}",
            a["algorithm"]
        );
    }
    assert_eq!(
        v["refused_properties"],
        serde_json::json!(["asynchronous", "allocates_per_request", "offload"])
    );
    // The vault MAC, from the same registry.
    let macs = v["macs"].as_array().expect("macs array");
    assert_eq!(macs.len(), 1);
    let m = &macs[0];
    assert_eq!(m["algorithm"], "POLYVAL-AES-256-MAC");
    assert_eq!(m["key_size"], 48);
    assert_eq!(m["selected"], "polyval-aes-256-mac-rustcrypto");
    let imps = m["implementations"]
        .as_array()
        .expect("MAC implementations");
    assert_eq!(
        imps.len(),
        fscrypt_crypto::registry::default_registry()
            .mac_report()
            .len()
    );
    let sel = imps
        .iter()
        .find(|i| i["name"] == "polyval-aes-256-mac-rustcrypto")
        .expect("built-in MAC listed");
    assert_eq!(sel["priority"], 500);
    assert_eq!(sel["self_test"]["passed"], true);
    assert_eq!(sel["self_test"]["vectors"], 3);
    assert_eq!(sel["verdict"]["state"], "selected");
    assert_eq!(sel["properties"].as_array().unwrap().len(), 0);
}

#[test]
fn providers_table_lists_every_algorithm() {
    let (ok, stdout) = run(&["providers"]);
    assert!(ok);
    for alg in fscrypt_crypto::Algorithm::ALL {
        assert!(stdout.contains(alg.name()), "{alg} missing from:\n{stdout}");
    }
    assert!(stdout.contains("xts-aes-256-awslc"));
    assert!(stdout.contains("lower priority than"));
    // One selected row per algorithm and one for the vault MAC.
    assert_eq!(
        stdout.matches("  selected").count(),
        fscrypt_crypto::Algorithm::ALL.len() + 1,
        "{stdout}"
    );
    let mac = stdout
        .lines()
        .find(|l| l.starts_with("POLYVAL-AES-256-MAC "))
        .unwrap_or_else(|| panic!("no MAC row in:\n{stdout}"));
    let cells: Vec<&str> = mac
        .split("  ")
        .map(str::trim)
        .filter(|c| !c.is_empty())
        .collect();
    assert_eq!(
        cells,
        [
            "POLYVAL-AES-256-MAC",
            "polyval-aes-256-mac-rustcrypto",
            "500",
            "-",
            "passed (3 vectors)",
            "selected"
        ],
        "{mac}"
    );
}
