//! `fscrypt-rs metadata` subcommands and google/fscrypt's `metadata` on the
//! same files.

use super::*;

#[test]
fn metadata_subcommands_interoperate() {
    let Some(env) = Env::new("gfs_metadata_edit", false) else {
        return;
    };
    let d = env.locked_by_fscrypt("d", "first", b"old-pp", ("f", "data"));
    let j = env.status_json(&d);
    let pol = j["policy"]["master_key_identifier"]
        .as_str()
        .unwrap()
        .to_string();
    let p1 = j["fscrypt_metadata"]["protectors"][0]["descriptor"]
        .as_str()
        .unwrap()
        .to_string();
    let m = p(env.mnt());
    let (prot1, polref) = (format!("{m}:{p1}"), format!("{m}:{pol}"));

    // change-passphrase by fscrypt-rs: a wrong old one changes nothing;
    // then fscrypt takes the new one and refuses the old.
    let before = metadata_snapshot(env.mnt());
    let o = env.rs(
        &["metadata", "change-passphrase", "--protector", &prot1],
        b"bad\nnew-pp\n",
    );
    assert_eq!(code(&o), 12, "{}", text(&o));
    assert_eq!(metadata_snapshot(env.mnt()), before);
    ok(
        &env.rs(
            &["metadata", "change-passphrase", "--protector", &prot1],
            b"old-pp\nnew-pp\n",
        ),
        "fscrypt-rs metadata change-passphrase",
    );
    let o = env.gfs(&["unlock", p(&d), "--quiet"], b"old-pp");
    assert!(
        !o.status.success(),
        "fscrypt unlocked with the old passphrase"
    );
    assert!(!readable(&d.join("f"), "data"));
    ok(
        &env.gfs(&["unlock", p(&d), "--quiet"], b"new-pp"),
        "fscrypt unlock (new)",
    );
    assert!(readable(&d.join("f"), "data"));
    ok(&env.gfs(&["lock", p(&d), "--quiet"], b""), "fscrypt lock");

    // create protector + add-protector-to-policy by fscrypt-rs; fscrypt
    // unlocks with the added one.
    let o = env.rs(
        &[
            "metadata",
            "create",
            "protector",
            m,
            "--source",
            "custom_passphrase",
            "--name",
            "second",
            "--json",
        ],
        b"second-pp\n",
    );
    ok(&o, "fscrypt-rs metadata create protector");
    let j: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let p2 = j["protector"]["descriptor"].as_str().unwrap().to_string();
    let prot2 = format!("{m}:{p2}");
    ok(
        &env.rs(
            &[
                "metadata",
                "add-protector-to-policy",
                "--protector",
                &prot2,
                "--policy",
                &polref,
            ],
            b"second-pp\nnew-pp\n",
        ),
        "fscrypt-rs metadata add-protector-to-policy",
    );
    let uw = format!("--unlock-with={prot2}");
    ok(
        &env.gfs(&["unlock", p(&d), &uw, "--quiet"], b"second-pp"),
        "fscrypt unlock with the added protector",
    );
    assert!(readable(&d.join("f"), "data"));
    ok(&env.gfs(&["lock", p(&d), "--quiet"], b""), "fscrypt lock");

    // destroy refuses a protector still in use; remove it from the policy,
    // then destroy; the last protector cannot be removed.
    let o = env.rs(&["metadata", "destroy", "--protector", &prot1], b"");
    assert!(!o.status.success(), "{}", text(&o));
    ok(
        &env.rs(
            &[
                "metadata",
                "remove-protector-from-policy",
                "--protector",
                &prot1,
                "--policy",
                &polref,
            ],
            b"",
        ),
        "fscrypt-rs metadata remove-protector-from-policy",
    );
    ok(
        &env.rs(&["metadata", "destroy", "--protector", &prot1], b""),
        "fscrypt-rs metadata destroy --protector",
    );
    assert!(!env.mnt().join(".fscrypt/protectors").join(&p1).exists());
    let o = env.rs(
        &[
            "metadata",
            "remove-protector-from-policy",
            "--protector",
            &prot2,
            "--policy",
            &polref,
        ],
        b"",
    );
    assert!(!o.status.success(), "{}", text(&o));
    ok(
        &env.gfs(&["unlock", p(&d), "--quiet"], b"second-pp"),
        "fscrypt unlock (only p2)",
    );
    assert!(readable(&d.join("f"), "data"));

    // create policy by fscrypt-rs: fscrypt's dump lists it; destroy it.
    let o = env.rs(
        &[
            "metadata",
            "create",
            "policy",
            m,
            "--protector",
            &prot2,
            "--json",
        ],
        b"second-pp\n",
    );
    ok(&o, "fscrypt-rs metadata create policy");
    let j: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let pol2 = j["policy"].as_str().unwrap().to_string();
    let dump = env.gfs(&["metadata", "dump", &format!("--policy={m}:{pol2}")], b"");
    ok(&dump, "fscrypt metadata dump");
    assert!(
        String::from_utf8_lossy(&dump.stdout).contains(&pol2),
        "{}",
        text(&dump)
    );
    ok(
        &env.rs(
            &["metadata", "destroy", "--policy", &format!("{m}:{pol2}")],
            b"",
        ),
        "fscrypt-rs metadata destroy --policy",
    );
    assert!(!env.mnt().join(".fscrypt/policies").join(&pol2).exists());
}
