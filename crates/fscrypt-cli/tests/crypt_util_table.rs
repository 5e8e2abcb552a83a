//! `fscrypt-rs crypt` against answers recorded from xfstests'
//! `fscrypt-crypt-util` (`tests/crypt_util_table.jsonl`, written by
//! `scripts/crypt-util-diff.py record` from a reference built from
//! kdave/xfstests): for every command line, the same exit status, and the
//! same stdout (length and SHA-256) — including what the reference refuses
//! (status 1), its usage errors (status 2) and the partial output written
//! before a unit the cipher refuses. `--help` is compared by status: its text
//! is ours.

use std::process::Command;

use serde_json::Value;

const BIN: &str = env!("CARGO_BIN_EXE_fscrypt-rs");

/// The stdin of a recorded case (the script's `stdin_bytes`).
fn stdin_bytes(n: usize) -> Vec<u8> {
    (0..n).map(|i| ((i * 31 + 7) % 256) as u8).collect()
}

fn load() -> Vec<Value> {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/crypt_util_table.jsonl");
    std::fs::read_to_string(path)
        .unwrap_or_else(|e| panic!("{path}: {e}"))
        .lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{l}: {e}")))
        .collect()
}

/// Runs one case; `None` if ours answers as the reference did, else why not.
fn check(case: &Value) -> Option<String> {
    let args: Vec<&str> = case["args"]
        .as_array()
        .expect("args")
        .iter()
        .map(|a| a.as_str().expect("string arg"))
        .collect();
    let n = case["stdin_len"].as_u64().expect("stdin_len") as usize;
    let out =
        test_support::run::output(Command::new(BIN).arg("crypt").args(&args), &stdin_bytes(n));
    let want = case["status"].as_i64().expect("status") as i32;
    let got = out.status.code().unwrap_or(-1);
    if got != want {
        return Some(format!(
            "{args:?} (stdin {n} B): exit {got}, the reference exits {want}; stderr: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    if case["help"].as_bool() == Some(true) {
        return (!out.stdout.starts_with(b"En/decrypt stdin"))
            .then(|| format!("{args:?}: no help on stdout"));
    }
    let want_len = case["stdout_len"].as_u64().expect("stdout_len") as usize;
    let want_sha = case["stdout_sha256"].as_str().expect("stdout_sha256");
    let got_sha = hex::encode(fscrypt_crypto::sha256(&out.stdout));
    if out.stdout.len() != want_len || got_sha != want_sha {
        return Some(format!(
            "{args:?} (stdin {n} B): {} bytes out (sha256 {got_sha}), the reference writes \
             {want_len} (sha256 {want_sha})",
            out.stdout.len()
        ));
    }
    None
}

#[test]
fn matches_recorded_reference_answers() {
    let cases = load();
    assert!(cases.len() >= 100, "table has only {} cases", cases.len());
    for status in [0, 1, 2] {
        assert!(
            cases.iter().any(|c| c["status"] == status),
            "no case with status {status}"
        );
    }
    // Two workers: the machine is shared.
    let (a, b) = cases.split_at(cases.len() / 2);
    let failures: Vec<String> = std::thread::scope(|s| {
        let h = s.spawn(|| a.iter().filter_map(check).collect::<Vec<_>>());
        let mut f: Vec<String> = b.iter().filter_map(check).collect();
        f.extend(h.join().expect("worker"));
        f
    });
    assert!(
        failures.is_empty(),
        "{} of {} cases differ from the reference:\n{}",
        failures.len(),
        cases.len(),
        failures.join("\n")
    );
}
