//! Provider-registry behaviour: refused properties beat priority, failing
//! self-tests fall through to the next implementation, and an empty choice is
//! a clear error — never a wrong answer.

use fscrypt_crypto::registry::{
    Implementation, Properties, Registry, SelfTestFailure, SelfTestStatus, Verdict,
    builtin_implementations,
};
use fscrypt_crypto::{Algorithm, CipherKey, Error, SecretBox};

fn builtin(name: &str) -> Implementation {
    *builtin_implementations()
        .iter()
        .find(|i| i.name == name)
        .unwrap_or_else(|| panic!("no built-in {name}"))
}

/// A registry with only the named built-ins.
fn registry_with(names: &[&str]) -> Registry {
    let mut r = Registry::new();
    for n in names {
        r.register(builtin(n));
    }
    r
}

/// The QAT case of Linux 6.x: an offload driver at priority 4001 against a
/// CPU implementation at 800. Same for asynchronous and per-request-allocating
/// implementations. (They compute correct AES-XTS: only the property matters.)
#[test]
fn refused_properties_are_never_selected_even_at_higher_priority() {
    for props in [
        Properties::OFFLOAD,
        Properties::ASYNCHRONOUS,
        Properties::ALLOCATES_PER_REQUEST,
        Properties::ASYNCHRONOUS | Properties::ALLOCATES_PER_REQUEST | Properties::OFFLOAD,
    ] {
        let mut cpu = builtin("xts-aes-256-rustcrypto");
        cpu.priority = 800;
        let mut qat = builtin("xts-aes-256-awslc");
        qat.name = "qat_aes_xts";
        qat.priority = 4001;
        qat.properties = props;
        let mut r = Registry::new();
        r.register(qat);
        r.register(cpu);
        assert_eq!(
            r.select(Algorithm::Aes256Xts).unwrap().name,
            "xts-aes-256-rustcrypto",
            "{props:?}"
        );
        let key: Vec<u8> = (0..64).collect();
        let pk = r.prepare(Algorithm::Aes256Xts, &key).unwrap();
        assert_eq!(pk.implementation_name(), "xts-aes-256-rustcrypto");
        let rep = r.report();
        let row = rep
            .iter()
            .find(|x| x.implementation.name == "qat_aes_xts")
            .unwrap();
        assert_eq!(row.verdict, Verdict::Refused(props));
        assert!(
            row.self_test.passed(),
            "the offload implementation itself is correct"
        );

        // With an empty refused mask the higher priority wins: the mask is what excludes it.
        r.set_refused(Properties::NONE);
        assert_eq!(r.select(Algorithm::Aes256Xts).unwrap().name, "qat_aes_xts");
    }
}

/// Returns the correct CTS result, except that it corrupts every 32-byte
/// input (like the hardware CTS driver that broke 32-byte padded filenames).
struct BrokenCts(SecretBox<dyn CipherKey>);

impl CipherKey for BrokenCts {
    fn encrypt(&self, iv: &[u8], data: &mut [u8]) -> Result<(), Error> {
        self.0.encrypt(iv, data)?;
        if data.len() == 32 {
            data[31] ^= 1;
        }
        Ok(())
    }
    fn decrypt(&self, iv: &[u8], data: &mut [u8]) -> Result<(), Error> {
        self.0.decrypt(iv, data)
    }
}

/// The log records of this process (the registry logs excluded
/// implementations).
fn captured_logs() -> Vec<String> {
    test_support::logs::capture(log::LevelFilter::Trace);
    test_support::logs::captured()
}

fn broken_cts_key(key: &[u8]) -> Result<SecretBox<dyn CipherKey>, Error> {
    let good = (builtin("cts-cbc-aes-256-reference").new_key)(key)?;
    Ok(SecretBox::cipher_key(BrokenCts(good)))
}

#[test]
fn wrong_32_byte_cts_is_excluded_by_its_self_test() {
    let mut r = registry_with(&["cts-cbc-aes-256-rustcrypto"]);
    r.register(Implementation {
        algorithm: Algorithm::Aes256CbcCts,
        name: "cts-broken-hw",
        priority: 9000,
        properties: Properties::NONE,
        new_key: broken_cts_key,
    });
    captured_logs();
    let chosen = r.select(Algorithm::Aes256CbcCts).unwrap();
    assert_eq!(chosen.name, "cts-cbc-aes-256-rustcrypto");
    let logs = captured_logs();
    assert!(
        logs.iter().any(|l| l.starts_with("WARN")
            && l.contains("cts-broken-hw")
            && l.contains("padded to 32")
            && l.contains("excluded")),
        "no log line naming the implementation and vector: {logs:?}"
    );
    match r.self_test("cts-broken-hw").unwrap() {
        SelfTestStatus::Failed { vector, failure } => {
            assert_eq!(*failure, SelfTestFailure::WrongCiphertext);
            assert!(
                vector.contains("padded to 32"),
                "failing vector is a 32-byte one: {vector}"
            );
        }
        other => panic!("broken implementation passed: {other:?}"),
    }
    let rep = r.report();
    let row = rep
        .iter()
        .find(|x| x.implementation.name == "cts-broken-hw")
        .unwrap();
    assert_eq!(row.verdict, Verdict::SelfTestFailed);

    // A prepared key from this registry gives the correct 32-byte ciphertext.
    let key = [7u8; 32];
    let pk = r.prepare(Algorithm::Aes256CbcCts, &key).unwrap();
    let reference = (builtin("cts-cbc-aes-256-reference").new_key)(&key).unwrap();
    let mut a = [0x41u8; 32];
    let mut b = a;
    pk.encrypt(&[0; 16], &mut a).unwrap();
    reference.encrypt(&[0; 16], &mut b).unwrap();
    assert_eq!(a, b);
}

#[test]
fn no_usable_implementation_is_a_clear_error() {
    let mut r = Registry::new();
    r.register(Implementation {
        algorithm: Algorithm::Aes256CbcCts,
        name: "cts-broken-hw",
        priority: 9000,
        properties: Properties::NONE,
        new_key: broken_cts_key,
    });
    let mut offload = builtin("cts-cbc-aes-256-awslc");
    offload.properties = Properties::OFFLOAD;
    r.register(offload);
    let err = r.select(Algorithm::Aes256CbcCts).unwrap_err();
    assert_eq!(
        err,
        Error::NoImplementation {
            algorithm: Algorithm::Aes256CbcCts
        }
    );
    assert!(matches!(
        r.prepare(Algorithm::Aes256CbcCts, &[1; 32]),
        Err(Error::NoImplementation { .. })
    ));
    assert!(err.to_string().contains("AES-256-CBC-CTS"));
    // An algorithm with nothing registered at all.
    assert!(matches!(
        r.select(Algorithm::Adiantum),
        Err(Error::NoImplementation { .. })
    ));
}

#[test]
fn selection_falls_through_by_priority() {
    let r = registry_with(&[
        "cts-cbc-aes-128-reference",
        "cts-cbc-aes-128-awslc",
        "cts-cbc-aes-128-rustcrypto",
    ]);
    assert_eq!(
        r.select(Algorithm::Aes128CbcCts).unwrap().name,
        "cts-cbc-aes-128-awslc"
    );
    let rep = r.report();
    let verdicts: Vec<_> = rep
        .iter()
        .map(|x| (x.implementation.name, x.verdict.clone()))
        .collect();
    let lower = Verdict::LowerPriority {
        selected: "cts-cbc-aes-128-awslc",
    };
    assert_eq!(
        verdicts,
        vec![
            ("cts-cbc-aes-128-awslc", Verdict::Selected),
            ("cts-cbc-aes-128-rustcrypto", lower.clone()),
            ("cts-cbc-aes-128-reference", lower),
        ]
    );
}

#[test]
fn default_registry_has_a_selected_cpu_implementation_for_every_algorithm() {
    let r = fscrypt_crypto::registry::default_registry();
    for alg in Algorithm::ALL {
        let imp = r.select(alg).unwrap_or_else(|e| panic!("{alg}: {e}"));
        assert!(imp.properties.is_empty());
        let n = r.implementations().filter(|i| i.algorithm == alg).count();
        assert!(n >= 1);
        if matches!(
            alg,
            Algorithm::Aes256Xts | Algorithm::Aes128CbcCts | Algorithm::Aes256CbcCts
        ) {
            assert!(
                n >= 2,
                "{alg} needs two implementations for a real fall-through"
            );
        }
    }
    assert_eq!(r.refused(), Properties::REFUSED_BY_FSCRYPT);
    let selected = r
        .report()
        .iter()
        .filter(|x| x.verdict == Verdict::Selected)
        .count();
    assert_eq!(selected, Algorithm::ALL.len());
}

/// Self-tests run once per implementation even when many threads select at once.
#[test]
fn concurrent_selection_is_consistent() {
    let r = Registry::with_builtins();
    std::thread::scope(|s| {
        let hs: Vec<_> = (0..8)
            .map(|_| s.spawn(|| Algorithm::ALL.map(|a| r.select(a).unwrap().name)))
            .collect();
        let first = Algorithm::ALL.map(|a| r.select(a).unwrap().name);
        for h in hs {
            assert_eq!(h.join().unwrap(), first);
        }
    });
}

fn tamper_mac(_key: &[u8]) -> Result<SecretBox<dyn fscrypt_crypto::mac::MacKey>, Error> {
    struct Broken;
    impl fscrypt_crypto::mac::MacKey for Broken {
        fn tag_with_nonce(&self, _n: &[u8; 12], _a: &[u8], _m: &[u8]) -> [u8; 16] {
            [0; 16]
        }
    }
    Ok(SecretBox::mac_key(Broken))
}

#[test]
fn the_mac_is_self_tested_and_refused_like_the_ciphers() {
    use fscrypt_crypto::registry::MacImplementation;
    let builtins = Registry::with_builtins();
    let builtin = *builtins
        .select_mac()
        .expect("the built-in MAC passes its self-test");
    // Every embedded vector decodes and is checked.
    assert_eq!(
        builtins.mac_report()[0].self_test,
        SelfTestStatus::Passed { vectors: 3 }
    );
    assert_eq!(builtin.name, "polyval-aes-256-mac-rustcrypto");

    // A wrong implementation with a higher priority fails its self-test and
    // is skipped: the built-in one is used.
    let mut r = Registry::new();
    r.register_mac(builtin);
    r.register_mac(MacImplementation {
        name: "broken-mac",
        priority: 10_000,
        properties: Properties::NONE,
        new_key: tamper_mac,
    });
    assert_eq!(r.select_mac().unwrap().name, builtin.name);
    let report = r.mac_report();
    assert_eq!(report[0].implementation.name, "broken-mac");
    assert!(matches!(
        report[0].self_test,
        SelfTestStatus::Failed {
            failure: SelfTestFailure::WrongTag,
            ..
        }
    ));
    assert_eq!(report[0].verdict, Verdict::SelfTestFailed);
    assert_eq!(report[1].verdict, Verdict::Selected);

    // An offload implementation is refused even though it is correct.
    let mut r = Registry::new();
    r.register_mac(MacImplementation {
        properties: Properties::OFFLOAD,
        ..builtin
    });
    assert!(matches!(r.select_mac(), Err(Error::NoMacImplementation)));
    assert!(matches!(
        r.prepare_mac(&[0; 48]),
        Err(Error::NoMacImplementation)
    ));

    // Prepared through the default registry, it gives the tags of the
    // module (RFC 8452-checked) and refuses other key sizes.
    let mac = fscrypt_crypto::mac::PreparedMac::new(&[7; 48]).unwrap();
    let direct = fscrypt_crypto::mac::PolyvalAes256Mac::new(&[7; 48]).unwrap();
    assert_eq!(mac.tag(b"aad", b"msg"), direct.tag(b"aad", b"msg"));
    assert!(mac.verify(b"aad", b"msg", &direct.tag(b"aad", b"msg")[..15]));
    assert!(!mac.verify(b"aad", b"msg!", &direct.tag(b"aad", b"msg")[..15]));
    assert!(!mac.verify(b"aad", b"msg", &[]));
    assert!(matches!(
        fscrypt_crypto::mac::PreparedMac::new(&[7; 32]),
        Err(Error::InvalidKeyLength { .. })
    ));
}
