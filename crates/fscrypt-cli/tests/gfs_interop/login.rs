//! Login protectors made by either tool, used by the other (also across
//! filesystems and with recovery passphrases).

use super::*;

/// The `--user` argument and a test user with a login password.
fn login_user(test: &str, tag: &str, password: &str) -> Option<test_support::users::TestUser> {
    test_support::users::TestUser::new(test, tag, password)
}

#[test]
fn login_protectors_both_ways() {
    let Some(env) = Env::new("gfs_login", false) else {
        return;
    };
    let Some(u1) = login_user("gfs_login", "a", "login-pw-1") else {
        return;
    };
    let Some(u2) = login_user("gfs_login", "b", "login-pw-2") else {
        return;
    };
    let user1 = format!("--user={}", u1.name);
    let (d1, d2, d3) = (env.dir("l1"), env.dir("l2"), env.dir("l3"));
    for d in [&d1, &d2, &d3] {
        std::fs::create_dir(d).unwrap();
    }

    // fscrypt -> fscrypt-rs: a login protector made by fscrypt for u1.
    ok(
        &env.gfs(
            &[
                "encrypt",
                p(&d1),
                "--source=pam_passphrase",
                &user1,
                "--quiet",
            ],
            b"login-pw-1\n",
        ),
        "fscrypt encrypt --source=pam_passphrase",
    );
    std::fs::write(d1.join("f"), "one").unwrap();
    ok(
        &env.gfs(&["lock", p(&d1), &user1, "--quiet"], b""),
        "fscrypt lock",
    );
    assert!(!readable(&d1.join("f"), "one"));
    let st = env.rs(&["status", p(&d1), "--json"], b"");
    ok(&st, "fscrypt-rs status");
    let j: serde_json::Value = serde_json::from_slice(&st.stdout).unwrap();
    let prot = &j["fscrypt_metadata"]["protectors"][0];
    assert_eq!(prot["source"], "pam_passphrase", "{j}");
    assert_eq!(prot["uid"], u1.uid, "{j}");
    let o = env.rs(&["unlock", p(&d1)], b"wrong\n");
    assert_eq!(code(&o), 12, "{}", text(&o));
    ok(
        &env.rs(&["unlock", p(&d1)], b"login-pw-1\n"),
        "fscrypt-rs unlock (login)",
    );
    assert!(readable(&d1.join("f"), "one"));
    ok(
        &env.rs(&["lock", p(&d1), "--quiet"], b""),
        "fscrypt-rs lock",
    );

    // fscrypt-rs reuses u1's login protector for a new directory; fscrypt
    // unlocks it.
    let o = env.rs(
        &[
            "encrypt",
            p(&d2),
            "--source",
            "pam_passphrase",
            "--user",
            &u1.name,
            "--json",
        ],
        b"login-pw-1\n",
    );
    ok(&o, "fscrypt-rs encrypt (existing login protector)");
    let j: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(j["protector_created"], false, "{j}");
    assert_eq!(j["protector"]["descriptor"], prot["descriptor"], "{j}");
    std::fs::write(d2.join("g"), "two").unwrap();
    ok(
        &env.rs(&["lock", p(&d2), "--quiet"], b""),
        "fscrypt-rs lock d2",
    );
    ok(
        &env.gfs(&["unlock", p(&d2), &user1, "--quiet"], b"login-pw-1\n"),
        "fscrypt unlock d2",
    );
    assert!(readable(&d2.join("g"), "two"));

    // fscrypt-rs -> fscrypt: a new login protector for u2. A password that
    // is not u2's login password is refused (PAM, as google/fscrypt
    // checks) and nothing is written.
    let before = metadata_snapshot(env.mnt());
    let o = env.rs(
        &[
            "encrypt",
            p(&d3),
            "--source",
            "pam_passphrase",
            "--user",
            &u2.name,
        ],
        b"not-the-login-pw\n",
    );
    assert_eq!(code(&o), 12, "{}", text(&o));
    assert!(
        text(&o).contains("not the login passphrase"),
        "{}",
        text(&o)
    );
    let o = env.rs(
        &[
            "metadata",
            "create",
            "protector",
            p(env.mnt()),
            "--source",
            "pam_passphrase",
            "--user",
            &u2.name,
        ],
        b"not-the-login-pw\n",
    );
    assert_eq!(code(&o), 12, "{}", text(&o));
    assert_eq!(metadata_snapshot(env.mnt()), before, "metadata written");
    let o = env.rs(
        &[
            "encrypt",
            p(&d3),
            "--source",
            "pam_passphrase",
            "--user",
            &u2.name,
            "--json",
        ],
        b"login-pw-2\n",
    );
    ok(&o, "fscrypt-rs encrypt (new login protector)");
    let j: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(j["protector_created"], true, "{j}");
    assert_eq!(j["protector"]["uid"], u2.uid, "{j}");
    std::fs::write(d3.join("h"), "three").unwrap();
    ok(
        &env.rs(&["lock", p(&d3), "--quiet"], b""),
        "fscrypt-rs lock d3",
    );
    let user2 = format!("--user={}", u2.name);
    let st = env.gfs(&["status", p(&d3)], b"");
    ok(&st, "fscrypt status d3");
    assert!(
        String::from_utf8_lossy(&st.stdout).contains("login protector"),
        "{}",
        text(&st)
    );
    let o = env.gfs(&["unlock", p(&d3), &user2, "--quiet"], b"nope\n");
    assert!(
        !o.status.success(),
        "fscrypt unlocked with a wrong password"
    );
    ok(
        &env.gfs(&["unlock", p(&d3), &user2, "--quiet"], b"login-pw-2\n"),
        "fscrypt unlock d3",
    );
    assert!(readable(&d3.join("h"), "three"));
    // A second login protector for the same user is refused by name.
    let o = env.rs(
        &[
            "encrypt",
            p(&d3),
            "--source",
            "pam_passphrase",
            "--name",
            "x",
        ],
        b"",
    );
    assert!(!o.status.success());
}

#[test]
fn login_protector_linked_from_another_filesystem() {
    let Some(env) = Env::new("gfs_login_link", false) else {
        return;
    };
    let Some(other) = scratch_ext4("gfs_login_link", 32, MKFS_4K) else {
        return;
    };
    let Some(u) = login_user("gfs_login_link", "c", "pw-link") else {
        return;
    };
    let m2 = other.mount_point();
    ok(
        &env.gfs(&["setup", p(m2), "--quiet"], b"y\n"),
        "fscrypt setup MNT2",
    );
    let user = format!("--user={}", u.name);
    let (a, b) = (m2.join("a"), m2.join("b"));
    std::fs::create_dir(&a).unwrap();
    std::fs::create_dir(&b).unwrap();

    // fscrypt: the login protector on the root fs, a link on MNT2.
    ok(
        &env.gfs(
            &[
                "encrypt",
                p(&a),
                "--source=pam_passphrase",
                &user,
                "--no-recovery",
                "--quiet",
            ],
            b"pw-link\n",
        ),
        "fscrypt encrypt on MNT2",
    );
    let links: Vec<_> = std::fs::read_dir(m2.join(".fscrypt/protectors"))
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    assert!(
        links.iter().all(|n| n.ends_with(".link")) && links.len() == 1,
        "{links:?}"
    );
    std::fs::write(a.join("f"), "A").unwrap();
    ok(
        &env.gfs(&["lock", p(&a), &user, "--quiet"], b""),
        "fscrypt lock a",
    );
    ok(
        &env.rs(&["unlock", p(&a)], b"pw-link\n"),
        "fscrypt-rs unlock a (through the link)",
    );
    assert!(readable(&a.join("f"), "A"));

    // fscrypt-rs: reuses the protector through the existing link; fscrypt
    // unlocks.
    ok(
        &env.rs(
            &[
                "encrypt",
                p(&b),
                "--source",
                "pam_passphrase",
                "--user",
                &u.name,
                "--no-recovery",
                "--quiet",
            ],
            b"pw-link\n",
        ),
        "fscrypt-rs encrypt on MNT2",
    );
    std::fs::write(b.join("g"), "B").unwrap();
    ok(
        &env.rs(&["lock", p(&b), "--quiet"], b""),
        "fscrypt-rs lock b",
    );
    ok(
        &env.gfs(&["unlock", p(&b), &user, "--quiet"], b"pw-link\n"),
        "fscrypt unlock b",
    );
    assert!(readable(&b.join("g"), "B"));

    // A link written by fscrypt-rs (the link removed first) is followed by
    // fscrypt.
    let link = m2.join(".fscrypt/protectors").join(&links[0]);
    std::fs::remove_file(&link).unwrap();
    let c = m2.join("c");
    std::fs::create_dir(&c).unwrap();
    ok(
        &env.rs(
            &[
                "encrypt",
                p(&c),
                "--source",
                "pam_passphrase",
                "--user",
                &u.name,
                "--no-recovery",
                "--quiet",
            ],
            b"pw-link\n",
        ),
        "fscrypt-rs encrypt c (writes the link)",
    );
    let t = std::fs::read_to_string(&link).unwrap();
    assert!(t.contains(&format!("PATH={}\n", p(env.mnt()))), "{t}");
    std::fs::write(c.join("h"), "C").unwrap();
    ok(
        &env.rs(&["lock", p(&c), "--quiet"], b""),
        "fscrypt-rs lock c",
    );
    ok(
        &env.gfs(&["unlock", p(&c), &user, "--quiet"], b"pw-link\n"),
        "fscrypt unlock c (fscrypt-rs's link)",
    );
    assert!(readable(&c.join("h"), "C"));

    // Both tools list the linked login protector on MNT2 by its user.
    let by_name = format!("login protector for {}", u.name);
    let o = env.gfs(&["status", p(m2)], b"");
    ok(&o, "fscrypt status MNT2");
    let g = String::from_utf8_lossy(&o.stdout).into_owned();
    assert!(g.contains(&by_name), "fscrypt status MNT2: {g}");
    let o = env.rs(&["status", p(m2)], b"");
    ok(&o, "fscrypt-rs status MNT2");
    let r = String::from_utf8_lossy(&o.stdout).into_owned();
    assert!(
        r.lines()
            .any(|l| l.contains(&by_name) && l.contains("(linked: on")),
        "fscrypt-rs status MNT2 (fscrypt's: {g}): {r}"
    );
}

/// A login protector protecting a directory on another filesystem: like
/// google/fscrypt, `encrypt` adds a recovery passphrase (a second,
/// custom_passphrase protector) and writes it into the directory; the
/// recovery passphrase unlocks through both tools; the user's own
/// `unlock` picks the login protector, root's asks for `--unlock-with`.
#[test]
fn recovery_passphrase_for_a_login_protector_elsewhere() {
    use std::os::unix::fs::MetadataExt;
    let test = "gfs_recovery";
    let Some(env) = Env::new(test, false) else {
        return;
    };
    let Some(other) = scratch_ext4(test, 32, MKFS_4K) else {
        return;
    };
    let Some(u) = login_user(test, "r", "pw-rec") else {
        return;
    };
    let m2 = other.mount_point();
    ok(
        &env.gfs(&["setup", p(m2), "--quiet"], b"y\n"),
        "fscrypt setup MNT2",
    );
    let r = m2.join("r");
    std::fs::create_dir(&r).unwrap();
    std::os::unix::fs::chown(&r, Some(u.uid), Some(u.uid)).unwrap();
    let o = env.rs(
        &[
            "encrypt",
            p(&r),
            "--source",
            "pam_passphrase",
            "--user",
            &u.name,
            "--json",
        ],
        b"pw-rec\n",
    );
    ok(&o, "fscrypt-rs encrypt r");
    let j: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let rid = j["recovery_protector"]["descriptor"]
        .as_str()
        .expect("a recovery protector")
        .to_string();
    assert_eq!(
        j["recovery_protector"]["name"], "Recovery passphrase for r",
        "{j}"
    );
    // Root wrote the metadata on the user's behalf: it is the user's.
    let pol = m2
        .join(".fscrypt/policies")
        .join(j["policy"].as_str().unwrap());
    assert_eq!(
        std::fs::metadata(&pol).unwrap().uid(),
        u.uid,
        "{}",
        pol.display()
    );
    let readme = r.join("fscrypt_recovery_readme.txt");
    assert_eq!(j["recovery_readme"], p(&readme), "{j}");
    let md = std::fs::symlink_metadata(&readme).unwrap();
    assert_eq!((md.mode() & 0o777, md.uid()), (0o600, u.uid));
    let instructions = std::fs::read_to_string(&readme).unwrap();
    let pass = instructions
        .lines()
        .map(str::trim)
        .find(|l| l.len() == 20 && l.bytes().all(|c| c.is_ascii_lowercase()))
        .expect("the passphrase in the readme")
        .to_string();
    std::fs::write(r.join("f"), "R").unwrap();
    let rec = format!("{}:{rid}", p(m2));
    // The readme's command is ready to run: the directory and the
    // protector, no placeholder (issue 26 item 6).
    let abs = std::path::absolute(&r).unwrap();
    assert!(
        instructions.contains(&format!("fscrypt-rs unlock {} --unlock-with ", p(&abs))),
        "{instructions}"
    );
    assert!(!instructions.contains(" DIR "), "{instructions}");
    let lock_all = || {
        ok(
            &env.rs(&["lock", p(&r), "--all-users", "--quiet"], b""),
            "fscrypt-rs lock r",
        )
    };
    lock_all();
    assert!(!readable(&r.join("f"), "R"));

    // google/fscrypt sees both protectors.
    let st = env.gfs(&["status", p(&r)], b"");
    ok(&st, "fscrypt status r");
    let st = String::from_utf8_lossy(&st.stdout).into_owned();
    assert!(
        st.contains("Recovery passphrase for r") && st.contains("login protector"),
        "{st}"
    );

    // Root, not the protector's user, must choose.
    let o = env.rs(&["unlock", p(&r)], b"pw-rec\n");
    assert!(!o.status.success(), "{}", text(&o));
    assert!(
        text(&o).contains("--unlock-with") && text(&o).contains(&rid),
        "{}",
        text(&o)
    );

    // The user's own unlock takes the login protector.
    let mut c = test_support::users::as_user(u.uid, u.uid, BIN);
    c.args(["unlock", p(&r)])
        .env("FSCRYPT_CONF", env.tmp.join("fscrypt.conf"))
        .env("FSCRYPT_ROOT_MNT", env.mnt());
    ok(
        &test_support::run::output(&mut c, b"pw-rec\n"),
        "fscrypt-rs unlock r as the user",
    );
    assert!(readable(&r.join("f"), "R"));
    lock_all();

    // The recovery passphrase, through fscrypt-rs and through fscrypt.
    let o = env.rs(&["unlock", p(&r), "--unlock-with", &rec], b"wrong\n");
    assert_eq!(code(&o), 12, "{}", text(&o));
    ok(
        &env.rs(
            &["unlock", p(&r), "--unlock-with", &rec],
            format!("{pass}\n").as_bytes(),
        ),
        "fscrypt-rs unlock with the recovery passphrase",
    );
    assert!(readable(&r.join("f"), "R"));
    lock_all();
    ok(
        &env.gfs(
            &["unlock", p(&r), &format!("--unlock-with={rec}"), "--quiet"],
            format!("{pass}\n").as_bytes(),
        ),
        "fscrypt unlock with the recovery passphrase",
    );
    assert!(readable(&r.join("f"), "R"));
    lock_all();
}
