//! google/fscrypt habits against the real tool (issue 26 item 4): `status`
//! without a path agrees with `fscrypt status`; `purge` locks what either
//! tool unlocked, both ways; `encrypt --policy` reuses a policy
//! google/fscrypt made, and `fscrypt` unlocks the result.

use super::*;

#[test]
fn status_overview_agrees_with_fscrypt() {
    let Some(env) = Env::new("gfs_habits_overview", false) else {
        return;
    };
    let o = env.gfs(&["status"], b"");
    ok(&o, "fscrypt status");
    let g = String::from_utf8_lossy(&o.stdout).into_owned();
    let row = g
        .lines()
        .find(|l| l.split_whitespace().next() == Some(p(env.mnt())))
        .unwrap_or_else(|| panic!("fscrypt status does not list the mount: {g}"));
    assert!(row.contains("supported") && row.ends_with("Yes"), "{row}");
    let o = env.rs(&["status", "--json"], b"");
    ok(&o, "fscrypt-rs status");
    let j: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let f = j["filesystems"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["mount_point"] == p(env.mnt()))
        .unwrap_or_else(|| panic!("fscrypt-rs status does not list the mount: {j}"));
    assert_eq!(f["encryption"], "supported", "{f}");
    assert_eq!(f["fscrypt_metadata"], true, "{f}");
}

#[test]
fn purge_both_ways() {
    let Some(env) = Env::new("gfs_habits_purge", false) else {
        return;
    };
    let d = env.locked_by_fscrypt("d", "pd", b"purge-pp", ("f", "data"));
    // fscrypt unlocks, fscrypt-rs purges.
    ok(
        &env.gfs(&["unlock", p(&d), "--quiet"], b"purge-pp"),
        "fscrypt unlock",
    );
    assert!(readable(&d.join("f"), "data"));
    ok(
        &env.rs(&["purge", p(env.mnt()), "--force", "--quiet"], b""),
        "fscrypt-rs purge",
    );
    assert!(!readable(&d.join("f"), "data"));
    // fscrypt-rs unlocks, fscrypt purges.
    ok(&env.rs(&["unlock", p(&d), "-q"], b"purge-pp\n"), "unlock");
    assert!(readable(&d.join("f"), "data"));
    ok(
        &env.gfs(&["purge", p(env.mnt()), "--force", "--quiet"], b""),
        "fscrypt purge",
    );
    assert!(!readable(&d.join("f"), "data"));
}

#[test]
fn encrypt_reuses_a_policy_made_by_fscrypt() {
    let Some(env) = Env::new("gfs_habits_reuse", false) else {
        return;
    };
    let d = env.locked_by_fscrypt("d", "pd", b"reuse-pp", ("f", "data"));
    let j = env.status_json(&d);
    let pol = j["policy"]["master_key_identifier"]
        .as_str()
        .unwrap()
        .to_string();
    let e = env.dir("e");
    std::fs::create_dir(&e).unwrap();
    let polref = format!("{}:{pol}", p(env.mnt()));
    ok(
        &env.rs(
            &["encrypt", p(&e), "--policy", &polref, "--skip-unlock", "-q"],
            b"reuse-pp\n",
        ),
        "fscrypt-rs encrypt --policy (fscrypt's policy)",
    );
    // fscrypt sees the same policy on both, and one unlock opens both.
    let o = env.gfs(&["status", p(&e)], b"");
    ok(&o, "fscrypt status e");
    let s = String::from_utf8_lossy(&o.stdout);
    assert!(s.contains(&pol) && s.contains("Unlocked: No"), "{s}");
    ok(
        &env.gfs(&["unlock", p(&d), "--quiet"], b"reuse-pp"),
        "fscrypt unlock d",
    );
    std::fs::write(e.join("g"), "more").unwrap();
    assert!(readable(&d.join("f"), "data") && readable(&e.join("g"), "more"));
    ok(&env.gfs(&["lock", p(&d), "--quiet"], b""), "fscrypt lock d");
    assert!(!readable(&e.join("g"), "more"));
}
