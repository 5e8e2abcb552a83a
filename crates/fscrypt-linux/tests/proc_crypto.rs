//! `/proc/crypto` analysis on a captured copy of a real kernel's list and on
//! synthetic lists with offload drivers.

use fscrypt_linux::proc_crypto::{
    Arch, Exclusion, ProcCrypto, Resolution, SelfTest, Severity, analyze, resolve,
};

fn fixture(name: &str) -> ProcCrypto {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/").to_owned() + name;
    match ProcCrypto::read(std::path::Path::new(&path)) {
        Ok(p) => p,
        Err(e) => panic!("fixture {name}: {e}"),
    }
}

fn report<'a>(
    reports: &'a [fscrypt_linux::proc_crypto::AlgorithmReport],
    name: &str,
) -> &'a fscrypt_linux::proc_crypto::AlgorithmReport {
    match reports.iter().find(|r| r.algorithm.kernel_name == name) {
        Some(r) => r,
        None => panic!("no report for {name}"),
    }
}

#[test]
fn captured_vm_parses_every_entry() {
    let pc = fixture("proc-crypto-x86_64-6.18-aes-ti.txt");
    assert_eq!(pc.entries.len(), 56);
    let aes = pc.by_name("aes");
    assert_eq!(aes.len(), 2);
    assert_eq!(aes[0].driver, "aes-fixed-time");
    assert_eq!(aes[0].priority, 101);
    assert_eq!(aes[1].driver, "aes-generic");
    assert_eq!(aes[0].selftest, SelfTest::Passed);
    assert_eq!(aes[0].alg_type, "cipher");
    assert_eq!(aes[0].module, "kernel");
    let null = pc.by_name("ecb(cipher_null)");
    assert_eq!(null[0].asynchronous, Some(false));
    // Highest priority first among the 24 DRBGs.
    assert_eq!(pc.by_name("stdrng")[0].driver, "drbg_nopr_hmac_sha512");
}

#[test]
fn captured_vm_xts_is_built_from_fixed_time_aes_and_flagged_slow() {
    let pc = fixture("proc-crypto-x86_64-6.18-aes-ti.txt");
    let reports = analyze(&pc, Arch::X86_64);
    let xts = report(&reports, "xts(aes)");
    assert!(
        xts.lookup.candidates.is_empty(),
        "xts(aes) is not instantiated in the capture"
    );
    match &xts.lookup.resolution {
        Resolution::Template {
            template,
            parts,
            selected_by_fscrypt,
            ..
        } => {
            assert_eq!(*template, "xts");
            assert!(selected_by_fscrypt);
            assert_eq!(parts.len(), 1);
            assert_eq!(parts[0].name, "ecb(aes)");
            assert_eq!(parts[0].driver().as_deref(), Some("ecb(aes-fixed-time)"));
        }
        other => panic!("unexpected {other:?}"),
    }
    assert_eq!(
        xts.lookup.driver().as_deref(),
        Some("xts(ecb(aes-fixed-time))")
    );
    assert_eq!(xts.slow.len(), 1);
    assert_eq!(xts.slow[0].driver, "aes-fixed-time");
    assert_eq!(xts.slow[0].severity, Severity::Major);
    assert!(xts.slow[0].fix.contains(&"CONFIG_CRYPTO_AES_NI_INTEL"));
    assert!(xts.refused.is_empty());

    let cts = report(&reports, "cts(cbc(aes))");
    assert_eq!(
        cts.lookup.driver().as_deref(),
        Some("cts(cbc(ecb(aes-fixed-time)))")
    );
    let arm = analyze(&pc, Arch::Aarch64);
    assert!(
        report(&arm, "cts(cbc(aes))").slow[0]
            .fix
            .contains(&"CONFIG_CRYPTO_AES_ARM64_CE_BLK")
    );

    // Registered directly, fast library drivers: nothing to flag.
    let hmac = report(&reports, "hmac(sha512)");
    assert_eq!(hmac.lookup.driver().as_deref(), Some("hmac-sha512-lib"));
    assert!(matches!(
        hmac.lookup.resolution,
        Resolution::Registered { .. }
    ));
    assert!(hmac.slow.is_empty());
    assert_eq!(
        report(&reports, "sha256").lookup.driver().as_deref(),
        Some("sha256-lib")
    );
}

#[test]
fn captured_vm_modes_without_drivers_are_unavailable() {
    let pc = fixture("proc-crypto-x86_64-6.18-aes-ti.txt");
    let reports = analyze(&pc, Arch::X86_64);
    for name in [
        "adiantum(xchacha12,aes)",
        "hctr2(aes)",
        "xts(sm4)",
        "cts(cbc(sm4))",
    ] {
        let r = report(&reports, name);
        assert!(!r.lookup.available(), "{name} should be unavailable");
        assert_eq!(r.lookup.driver(), None);
    }
    // Adiantum lacks xchacha12 and nhpoly1305, not aes.
    let adi = report(&reports, "adiantum(xchacha12,aes)");
    let missing: Vec<&str> = adi
        .lookup
        .walk()
        .into_iter()
        .filter(|l| matches!(l.resolution, Resolution::Missing { .. }))
        .map(|l| l.name.as_str())
        .collect();
    assert_eq!(missing, ["xchacha12", "nhpoly1305"]);
    // ESSIV's parts exist; only the template's own option is unknown.
    let essiv = report(&reports, "essiv(cbc(aes),sha256)");
    assert_eq!(
        essiv.lookup.driver().as_deref(),
        Some("essiv(cbc(ecb(aes-fixed-time)),sha256-lib)")
    );
    assert!(matches!(
        essiv.lookup.resolution,
        Resolution::Template {
            selected_by_fscrypt: false,
            config: "CONFIG_CRYPTO_ESSIV",
            ..
        }
    ));
}

#[test]
fn qat_at_4001_is_refused_and_fscrypt_falls_to_the_sync_driver() {
    let pc = fixture("proc-crypto-synthetic-qat.txt");
    let reports = analyze(&pc, Arch::X86_64);
    let xts = report(&reports, "xts(aes)");
    assert_eq!(xts.lookup.candidates[0].entry.driver, "qat_aes_xts");
    assert_eq!(xts.lookup.candidates[0].entry.priority, 4001);
    assert!(
        xts.lookup.candidates[0]
            .exclusions
            .contains(&Exclusion::Asynchronous)
    );
    assert!(
        xts.lookup.candidates[0]
            .exclusions
            .contains(&Exclusion::OffloadFamily("qat"))
    );
    let chosen = xts.lookup.chosen().map(|c| c.entry.driver.as_str());
    assert_eq!(chosen, Some("xts-aes-vaes-avx2"));
    // Anyone without fscrypt's mask (dm-crypt, AF_ALG) would get QAT.
    assert_eq!(
        xts.lookup.unmasked_pick().map(|c| c.entry.driver.as_str()),
        Some("qat_aes_xts")
    );
    assert_eq!(xts.refused.len(), 1);
    assert!(xts.slow.is_empty());
    // The internal helper never shows up under the public name.
    assert!(xts.lookup.candidates.iter().all(|c| !c.entry.internal));

    // cts(cbc(aes)) is not registered: built over cbc(aes), where QAT is
    // refused as well.
    let cts = report(&reports, "cts(cbc(aes))");
    assert_eq!(cts.lookup.driver().as_deref(), Some("cts(cbc-aes-aesni)"));
    assert_eq!(cts.refused.len(), 1);
    assert_eq!(cts.refused[0].0, "cbc(aes)");
    assert_eq!(cts.refused[0].1.entry.driver, "qat_aes_cbc");

    // Templates over fast parts: Adiantum and HCTR2 available and not slow.
    let adi = report(&reports, "adiantum(xchacha12,aes)");
    assert_eq!(
        adi.lookup.driver().as_deref(),
        Some("adiantum(xchacha12-simd,aes-aesni,nhpoly1305-avx2)")
    );
    assert!(adi.slow.is_empty());
    let hctr2 = report(&reports, "hctr2(aes)");
    assert_eq!(
        hctr2.lookup.driver().as_deref(),
        Some("hctr2_base(xctr(aes-aesni),polyval-clmulni)")
    );
    // SM4 only has the generic driver.
    let sm4 = report(&reports, "xts(sm4)");
    assert_eq!(
        sm4.lookup.driver().as_deref(),
        Some("xts(ecb(sm4-generic))")
    );
    assert_eq!(sm4.slow[0].driver, "sm4-generic");
    // KDF: hmac(sha512) built over the AVX2 SHA-512.
    let hmac = report(&reports, "hmac(sha512)");
    assert_eq!(hmac.lookup.driver().as_deref(), Some("hmac(sha512-avx2)"));
}

#[test]
fn only_refused_drivers_means_template_over_generic_aes() {
    let pc = fixture("proc-crypto-synthetic-offload-only.txt");
    let reports = analyze(&pc, Arch::X86_64);
    let xts = report(&reports, "xts(aes)");
    let drivers: Vec<&str> = xts
        .lookup
        .candidates
        .iter()
        .map(|c| c.entry.driver.as_str())
        .collect();
    assert_eq!(drivers, ["xts-aes-broken", "qat_aes_xts", "xts-aes-ccp"]);
    assert_eq!(
        xts.lookup.candidates[0].exclusions,
        [Exclusion::SelfTestNotPassed]
    );
    assert_eq!(
        xts.lookup.candidates[2].exclusions,
        [Exclusion::OffloadFamily("ccp")]
    );
    // The untested driver is not "refused by fscrypt": nobody gets it.
    assert_eq!(xts.refused.len(), 2);
    assert_eq!(
        xts.lookup.driver().as_deref(),
        Some("xts(ecb(aes-generic))")
    );
    assert_eq!(xts.slow[0].driver, "aes-generic");
    assert_eq!(
        xts.lookup.unmasked_pick().map(|c| c.entry.driver.as_str()),
        Some("qat_aes_xts")
    );
    let hmac = report(&reports, "hmac(sha512)");
    assert_eq!(hmac.slow[0].driver, "sha512-generic");
    assert_eq!(hmac.slow[0].severity, Severity::Minor);
}

#[test]
fn resolve_unknown_template_is_missing() {
    let pc = fixture("proc-crypto-synthetic-qat.txt");
    let l = resolve(&pc, "lrw(serpent)");
    assert!(matches!(l.resolution, Resolution::Missing { .. }));
    assert!(!l.available());
}
