//! The tpm2 sealed protector against a real (software) TPM: each test
//! starts its own private swtpm on loopback ([`SwTpm`]), killed on drop.
//! Without swtpm or tpm2-tools the tests print a skip line and return.

use std::time::Instant;

use fscrypt_seal::tpm2::{self, SealOptions, UnsealOptions};
use fscrypt_seal::{Error, Interaction, Secret};
use test_support::swtpm::SwTpm;
use zeroize::Zeroizing;

/// Answers PIN prompts from a list, recording each question; panics when
/// asked once too often (a test that must not prompt says so by giving
/// no answers).
#[derive(Default)]
struct Pins {
    answers: Vec<&'static str>,
    asked: Vec<(String, bool)>,
}

impl Pins {
    fn new(answers: &[&'static str]) -> Pins {
        Pins {
            answers: answers.iter().rev().copied().collect(),
            asked: Vec::new(),
        }
    }
}

impl Interaction for Pins {
    fn pin(&mut self, what: &str, confirm: bool) -> Result<Zeroizing<String>, Error> {
        self.asked.push((what.to_owned(), confirm));
        let pin = self
            .answers
            .pop()
            .expect("asked for a PIN it should not need");
        Ok(Zeroizing::new(pin.to_owned()))
    }

    fn notice(&mut self, _message: &str) {}
}

fn secret() -> Secret {
    Secret::from_bytes(Zeroizing::new(*b"0123456789abcdef0123456789ABCDEF"))
}

fn seal_opts(tpm: &SwTpm, pcrs: &[u8], pin: bool) -> SealOptions {
    SealOptions {
        tcti: Some(tpm.tcti()),
        pcrs: pcrs.to_vec(),
        pin,
    }
}

fn unseal_opts(tpm: &SwTpm) -> UnsealOptions {
    UnsealOptions {
        tcti: Some(tpm.tcti()),
    }
}

fn seal(tpm: &SwTpm, pcrs: &[u8], pin: Option<&'static str>) -> tpm2::Sealed {
    let mut ui = Pins::new(pin.as_slice());
    let sealed = tpm2::seal(&seal_opts(tpm, pcrs, pin.is_some()), &secret(), &mut ui).unwrap();
    if pin.is_some() {
        assert_eq!(ui.asked, vec![("TPM PIN".to_owned(), true)]);
    }
    sealed
}

fn unseal(tpm: &SwTpm, sealed: &tpm2::Sealed, pins: &[&'static str]) -> Result<Secret, Error> {
    tpm2::unseal(sealed, &unseal_opts(tpm), &mut Pins::new(pins))
}

#[test]
fn seal_then_unseal_returns_the_secret() {
    let Some(tpm) = SwTpm::start("seal_then_unseal_returns_the_secret") else {
        return;
    };
    let sealed = seal(&tpm, &[], None);
    assert_eq!(sealed.tcti, tpm.tcti());
    assert_eq!(sealed.pcr_bank, "sha256");
    assert_eq!(
        sealed.pcrs.iter().map(|p| p.index).collect::<Vec<_>>(),
        vec![7]
    );
    assert!(!sealed.pin);
    // Only public data in the record.
    let json = serde_json::to_string(&fscrypt_seal::Sealed::Tpm2(sealed.clone())).unwrap();
    assert!(!json.contains(&hex::encode(secret().as_bytes())));
    assert!(json.contains("\"kind\":\"tpm2\""));

    let got = unseal(&tpm, &sealed, &[]).unwrap();
    assert_eq!(got.as_bytes(), secret().as_bytes());
    // Unsealing again works (nothing left loaded in the TPM's few slots).
    for _ in 0..4 {
        assert_eq!(
            unseal(&tpm, &sealed, &[]).unwrap().as_bytes(),
            secret().as_bytes()
        );
    }
    // The record survives its JSON form.
    let back = fscrypt_seal::Sealed::from_json(&serde_json::from_str(&json).unwrap()).unwrap();
    let got = fscrypt_seal::unseal(
        &back,
        &fscrypt_seal::UnsealOptions {
            tpm2: unseal_opts(&tpm),
            ..Default::default()
        },
        &mut Pins::default(),
    )
    .unwrap();
    assert_eq!(got.as_bytes(), secret().as_bytes());
}

#[test]
fn extended_pcr_7_is_refused_naming_it() {
    let Some(tpm) = SwTpm::start("extended_pcr_7_is_refused_naming_it") else {
        return;
    };
    let sealed = seal(&tpm, &[7], Some("2468"));
    tpm.pcr_extend(7, &"11".repeat(32));
    // No PIN is asked: the refusal comes first.
    let err = unseal(&tpm, &sealed, &[]).unwrap_err();
    let Error::WrongSecret(msg) = &err else {
        panic!("not WrongSecret: {err:?}")
    };
    assert!(msg.contains("PCR 7 "), "{msg}");
    assert!(msg.contains("recovery key"), "{msg}");
    assert!(
        msg.contains("fscrypt-rs protector reseal") && msg.contains("fscrypt-rs metadata reseal"),
        "{msg}"
    );
}

#[test]
fn pcrs_7_and_14_are_bound_and_a_change_names_only_14() {
    let Some(tpm) = SwTpm::start("pcrs_7_and_14_are_bound_and_a_change_names_only_14") else {
        return;
    };
    let sealed = seal(&tpm, &[14, 7], None);
    assert_eq!(
        sealed.pcrs.iter().map(|p| p.index).collect::<Vec<_>>(),
        vec![7, 14]
    );
    assert_eq!(
        tpm2::describe(&sealed),
        vec![
            ("device", tpm.tcti()),
            ("pcrs", "sha256:7,14".to_owned()),
            ("pin", "no".to_owned()),
        ]
    );
    assert_eq!(
        unseal(&tpm, &sealed, &[]).unwrap().as_bytes(),
        secret().as_bytes()
    );
    tpm.pcr_extend(14, &"22".repeat(32));
    let err = unseal(&tpm, &sealed, &[]).unwrap_err();
    let Error::WrongSecret(msg) = &err else {
        panic!("not WrongSecret: {err:?}")
    };
    assert!(msg.contains("PCR 14 "), "{msg}");
    assert!(!msg.contains('7'), "{msg}");
}

#[test]
fn right_pin_unseals_wrong_pin_is_refused() {
    let Some(tpm) = SwTpm::start("right_pin_unseals_wrong_pin_is_refused") else {
        return;
    };
    let sealed = seal(&tpm, &[7], Some("1234"));
    assert!(sealed.pin);
    assert_eq!(tpm2::describe(&sealed)[2], ("pin", "yes".to_owned()));

    let mut ui = Pins::new(&["1234"]);
    let got = tpm2::unseal(&sealed, &unseal_opts(&tpm), &mut ui).unwrap();
    assert_eq!(got.as_bytes(), secret().as_bytes());
    assert_eq!(ui.asked, vec![("TPM PIN".to_owned(), false)]);

    let err = unseal(&tpm, &sealed, &["4321"]).unwrap_err();
    let Error::WrongSecret(msg) = &err else {
        panic!("not WrongSecret: {err:?}")
    };
    assert!(msg.contains("wrong TPM PIN"), "{msg}");
    assert!(msg.contains("lockout"), "{msg}");
    assert!(!msg.contains("4321") && !msg.contains("1234"), "{msg}");
    // A wrong try does not spoil the next right one.
    assert_eq!(
        unseal(&tpm, &sealed, &["1234"]).unwrap().as_bytes(),
        secret().as_bytes()
    );
}

#[test]
fn wrong_pins_lock_the_tpm_out_even_for_the_right_pin() {
    let Some(tpm) = SwTpm::start("wrong_pins_lock_the_tpm_out_even_for_the_right_pin") else {
        return;
    };
    tpm.dictionary_lockout(&[
        "--setup-parameters",
        "--max-tries=2",
        "--recovery-time=600",
        "--lockout-recovery-time=600",
    ]);
    let sealed = seal(&tpm, &[7], Some("1234"));
    for _ in 0..2 {
        let err = unseal(&tpm, &sealed, &["0000"]).unwrap_err();
        assert!(err.is_wrong_secret(), "{err:?}");
    }
    // Locked out: refused before a PIN is even asked.
    let err = unseal(&tpm, &sealed, &[]).unwrap_err();
    let Error::Device(msg) = &err else {
        panic!("not Device: {err:?}")
    };
    assert!(msg.contains("locked out"), "{msg}");
    assert!(msg.contains("600 s"), "{msg}");
    assert!(
        msg.contains("tpm2_dictionarylockout --clear-lockout"),
        "{msg}"
    );
    // The advice works.
    tpm.dictionary_lockout(&["--clear-lockout"]);
    assert_eq!(
        unseal(&tpm, &sealed, &["1234"]).unwrap().as_bytes(),
        secret().as_bytes()
    );
}

#[test]
fn malformed_or_altered_records_are_invalid() {
    let Some(tpm) = SwTpm::start("malformed_or_altered_records_are_invalid") else {
        return;
    };
    let sealed = seal(&tpm, &[7, 14], Some("1234"));
    type Edit = Box<dyn Fn(&mut tpm2::Sealed)>;
    let edits: Vec<(&str, Edit)> = vec![
        (
            "public truncated",
            Box::new(|s| s.public.truncate(s.public.len() / 2)),
        ),
        (
            "public odd hex",
            Box::new(|s| {
                s.public.pop();
            }),
        ),
        (
            "private truncated",
            Box::new(|s| s.private.truncate(s.private.len() - 4)),
        ),
        ("private empty", Box::new(|s| s.private.clear())),
        (
            "pcr value short",
            Box::new(|s| {
                s.pcrs[0].sha256.truncate(62);
            }),
        ),
        (
            "pcr 99",
            Box::new(|s| {
                s.pcrs[1].index = 99;
            }),
        ),
        ("bank", Box::new(|s| s.pcr_bank = "sha1".into())),
        // Well-formed but not what the object was sealed with: the policy
        // digest shows it.
        ("pin flag dropped", Box::new(|s| s.pin = false)),
        (
            "pcr 14 dropped",
            Box::new(|s| {
                s.pcrs.pop();
            }),
        ),
    ];
    for (name, edit) in edits {
        let mut bad = sealed.clone();
        edit(&mut bad);
        match unseal(&tpm, &bad, &["1234"]) {
            Err(Error::Invalid(_)) => {}
            other => panic!("{name}: {other:?}"),
        }
    }
    // The intact record still unseals.
    assert_eq!(
        unseal(&tpm, &sealed, &["1234"]).unwrap().as_bytes(),
        secret().as_bytes()
    );
}

#[test]
fn another_tpm_cannot_unseal() {
    let Some(a) = SwTpm::start("another_tpm_cannot_unseal") else {
        return;
    };
    let Some(b) = SwTpm::start("another_tpm_cannot_unseal") else {
        return;
    };
    let sealed = seal(&a, &[7], None);
    // Both TPMs are fresh: same PCR 7, so the refusal is the load's.
    let err = unseal(&b, &sealed, &[]).unwrap_err();
    let Error::WrongSecret(msg) = &err else {
        panic!("not WrongSecret: {err:?}")
    };
    assert!(msg.contains("another TPM"), "{msg}");
}

#[test]
fn unreachable_tpm_is_a_device_error_naming_the_tcti() {
    let Some(tpm) = SwTpm::start("unreachable_tpm_is_a_device_error_naming_the_tcti") else {
        return;
    };
    let sealed = seal(&tpm, &[7], None);
    let tcti = tpm.tcti();
    drop(tpm);
    let opts = UnsealOptions {
        tcti: Some(tcti.clone()),
    };
    let err = tpm2::unseal(&sealed, &opts, &mut Pins::default()).unwrap_err();
    let Error::Device(msg) = &err else {
        panic!("not Device: {err:?}")
    };
    assert!(msg.contains(&tcti), "{msg}");
    let err = tpm2::seal(
        &SealOptions {
            tcti: Some(tcti.clone()),
            ..Default::default()
        },
        &secret(),
        &mut Pins::default(),
    )
    .unwrap_err();
    assert!(
        matches!(&err, Error::Device(m) if m.contains(&tcti)),
        "{err:?}"
    );
    // An unparsable spec is the caller's mistake.
    let opts = UnsealOptions {
        tcti: Some("nonsense:".into()),
    };
    let err = tpm2::unseal(&sealed, &opts, &mut Pins::default()).unwrap_err();
    assert!(matches!(err, Error::Invalid(_)), "{err:?}");
}

#[test]
fn bad_seal_options_are_invalid() {
    let Some(tpm) = SwTpm::start("bad_seal_options_are_invalid") else {
        return;
    };
    let err = tpm2::seal(
        &seal_opts(&tpm, &[24], false),
        &secret(),
        &mut Pins::default(),
    )
    .unwrap_err();
    assert!(matches!(err, Error::Invalid(_)), "{err:?}");
    let err = tpm2::seal(
        &seal_opts(&tpm, &[7], true),
        &secret(),
        &mut Pins::new(&[""]),
    )
    .unwrap_err();
    assert!(matches!(err, Error::Invalid(_)), "{err:?}");
}

/// The record's `public` is a TPM2B_PUBLIC as tpm2-tools reads it, its
/// object is not `noDA` nor `userWithAuth`, and its policy is what
/// tpm2-tools computes for PolicyPCR(sha256:7,14) + PolicyAuthValue.
#[test]
fn tpm2_tools_agree_on_the_object_and_its_policy() {
    let Some(tpm) = SwTpm::start("tpm2_tools_agree_on_the_object_and_its_policy") else {
        return;
    };
    let sealed = seal(&tpm, &[7, 14], Some("1234"));
    let dir = test_support::TempDir::new("tpm2-tools");
    let public = dir.join("object.pub");
    std::fs::write(&public, hex::decode(&sealed.public).unwrap()).unwrap();
    let out = std::process::Command::new("tpm2_print")
        .args(["-t", "TPM2B_PUBLIC"])
        .arg(&public)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let printed = String::from_utf8(out.stdout).unwrap();
    assert!(
        printed.contains("value: fixedtpm|fixedparent|adminwithpolicy\n"),
        "{printed}"
    );
    assert!(printed.contains("value: keyedhash\n"), "{printed}");
    let policy_line = printed
        .lines()
        .find_map(|l| l.strip_prefix("authorization policy: "))
        .expect("a policy");

    let session = dir.join("session.ctx");
    let policy = dir.join("policy.dat");
    let (session, policy) = (session.to_str().unwrap(), policy.to_str().unwrap());
    tpm.tool("tpm2_startauthsession", &["-S", session]);
    tpm.tool("tpm2_policypcr", &["-S", session, "-l", "sha256:7,14"]);
    tpm.tool("tpm2_policyauthvalue", &["-S", session, "-L", policy]);
    tpm.tool("tpm2_flushcontext", &[session]);
    assert_eq!(policy_line, hex::encode(std::fs::read(policy).unwrap()));
}

/// Not a check: prints how long one unseal takes (run with
/// `--nocapture`).
#[test]
fn unseal_wall_time() {
    let Some(tpm) = SwTpm::start("unseal_wall_time") else {
        return;
    };
    let plain = seal(&tpm, &[7], None);
    let with_pin = seal(&tpm, &[7], Some("1234"));
    let _ = unseal(&tpm, &plain, &[]).unwrap();
    for (name, sealed, pins) in [
        ("no PIN", &plain, &[][..]),
        ("PIN", &with_pin, &["1234"][..]),
    ] {
        let n: u32 = 5;
        let start = Instant::now();
        for _ in 0..n {
            unseal(&tpm, sealed, pins).unwrap();
        }
        eprintln!(
            "tpm2 unseal against swtpm ({name}): {:.1} ms each (mean of {n})",
            start.elapsed().as_secs_f64() * 1000.0 / f64::from(n)
        );
    }
}
