//! TPM 2.0: the secret sealed to the TPM under a PCR policy (and
//! optionally a PIN), through `tss-esapi` over the system's TSS (tpm2-tss).
//!
//! # Scheme
//!
//! Commands and structures are those of the TCG *TPM 2.0 Library*
//! specification (Part 2 structures, Part 3 commands); the parent key is
//! the ECC NIST P-256 storage root key (SRK) template of the TCG *TPM v2.0
//! Provisioning Guidance* §7.5.1.
//!
//! Sealing:
//!
//! 1. **Parent.** `TPM2_CreatePrimary` in the owner hierarchy (empty owner
//!    auth) with the SRK template: ECC NIST P-256, name algorithm SHA-256,
//!    attributes `fixedTPM | fixedParent | sensitiveDataOrigin |
//!    userWithAuth | noDA | restricted | decrypt`, symmetric AES-128-CFB,
//!    scheme and KDF `TPM_ALG_NULL`, `unique.x` and `unique.y` 32 zero bytes
//!    each. The same template on the same TPM gives the same key (derived
//!    from the owner seed), so it is recreated at each use and never
//!    persisted. A TPM whose owner hierarchy was cleared has a new seed and
//!    can no longer load what was sealed under the old one.
//! 2. **PCR values.** The SHA-256 bank's PCRs `pcrs` (default `[7]`, Secure
//!    Boot state) are read with `TPM2_PCR_Read`; `pcrDigest =
//!    SHA-256(PCR[i1] || PCR[i2] || ...)` in ascending index order.
//! 3. **Policy.** In a trial session: `TPM2_PolicyPCR(pcrDigest,
//!    sha256:pcrs)`, then, with a PIN, `TPM2_PolicyAuthValue`;
//!    `TPM2_PolicyGetDigest` gives the object's `authPolicy`.
//! 4. **Sealed object.** `TPM2_Create` under the parent: a `keyedhash`
//!    object (scheme NULL, name algorithm SHA-256), attributes `fixedTPM |
//!    fixedParent | adminWithPolicy` — *not* `userWithAuth` (only the
//!    policy can authorize its use), *not* `noDA` (wrong PINs count toward
//!    the TPM's dictionary-attack lockout) — whose sensitive data is the
//!    32-byte secret and whose `authValue` is, with a PIN,
//!    `SHA-256(PIN as UTF-8)` with trailing zero bytes removed (the TPM
//!    drops them anyway when it computes an HMAC with an authValue, Part
//!    1), else empty. The command runs in an HMAC session salted to the
//!    parent with parameter encryption (AES-128-CFB), so neither the
//!    secret nor the PIN hash cross the bus in the clear.
//!
//! Unsealing:
//!
//! 1. The PCRs are read and compared with the values stored at seal time;
//!    a difference is refused naming the PCRs (before any PIN is asked).
//! 2. The parent is recreated and the object loaded (`TPM2_Load`).
//! 3. With a PIN: a TPM in dictionary-attack lockout
//!    (`TPMA_PERMANENT.inLockout`) is refused before the PIN is asked;
//!    then the PIN hash is set as the object's auth.
//! 4. A policy session salted to the parent, with response encryption,
//!    runs `TPM2_PolicyPCR` (+ `TPM2_PolicyAuthValue`); its digest must
//!    equal the object's `authPolicy` (else the record was altered), and
//!    `TPM2_Unseal` returns the secret.
//!
//! The tests check this layout against tpm2-tools: `tpm2_print` reads
//! `public` and `tpm2_policypcr` + `tpm2_policyauthvalue` give the same
//! `authPolicy`.
//!
//! The TSS libraries print their own diagnostics on stderr (a wrong PIN
//! shows an `ERROR:esys` line); `TSS2_LOG=all+none` silences them.
//!
//! # Stored record ([`Sealed`], JSON)
//!
//! | field      | value                                                                  |
//! |------------|------------------------------------------------------------------------|
//! | `tcti`     | TCTI used when sealing (a hint shown by `describe`, never used to connect) |
//! | `pcr_bank` | `"sha256"` (the only bank supported)                                    |
//! | `pcrs`     | `[{"index": 7, "sha256": <64 hex digits>}, ...]`: each bound PCR and its value at seal time, ascending |
//! | `pin`      | whether the policy includes `PolicyAuthValue` (a PIN is asked)          |
//! | `public`   | the object's marshalled `TPM2B_PUBLIC`, hex (as `tpm2_create -u` writes) |
//! | `private`  | the object's marshalled `TPM2B_PRIVATE`, hex (as `tpm2_create -r` writes) |
//!
//! All of it is public: the private part is encrypted and integrity
//! protected under the TPM's parent key and useless without that TPM.
//!
//! # TCTI
//!
//! The TPM is reached through the TCTI spec (`device:/dev/tpmrm0`,
//! `swtpm:host=127.0.0.1,port=2321`, `mssim:...`, `tabrmd:...`) from the
//! options, else the environment (`TPM2TOOLS_TCTI`, then `TCTI`), else
//! [`DEFAULT_TCTI`].

use std::collections::BTreeMap;
use std::str::FromStr;

use serde::{Deserialize, Serialize};
use sha2::{Digest as _, Sha256};
use tss_esapi::Context;
use tss_esapi::attributes::{ObjectAttributesBuilder, SessionAttributesBuilder};
use tss_esapi::constants::{PropertyTag, SessionType, Tss2ResponseCode};
use tss_esapi::handles::{KeyHandle, ObjectHandle};
use tss_esapi::interface_types::algorithm::{HashingAlgorithm, PublicAlgorithm};
use tss_esapi::interface_types::ecc::EccCurve;
use tss_esapi::interface_types::resource_handles::Hierarchy;
use tss_esapi::interface_types::session_handles::{AuthSession, PolicySession};
use tss_esapi::structures::{
    Auth, Digest, EccParameter, EccPoint, EccScheme, KeyDerivationFunctionScheme, KeyedHashScheme,
    PcrSelectionList, PcrSelectionListBuilder, PcrSlot, Private, Public, PublicBuilder,
    PublicEccParametersBuilder, PublicKeyedHashParameters, SensitiveData, SymmetricDefinition,
    SymmetricDefinitionObject,
};
use tss_esapi::tcti_ldr::TctiNameConf;
use tss_esapi::traits::{Marshall, UnMarshall};
use zeroize::Zeroizing;

use crate::{Error, Interaction, Secret};

/// The TCTI used when neither the options nor the environment name one:
/// the kernel's TPM resource manager.
pub const DEFAULT_TCTI: &str = "device:/dev/tpmrm0";

/// The PCRs bound when the options name none: PCR 7, the Secure Boot
/// policy (TCG PC Client Platform Firmware Profile).
pub const DEFAULT_PCRS: [u8; 1] = [7];

/// The PCR bank the policy reads (the only one supported).
pub const PCR_BANK: &str = "sha256";

/// PCR indices run from 0 to `PCR_COUNT - 1` (PC Client TPMs have 24).
pub const PCR_COUNT: u8 = 24;

/// Size in bytes of a SHA-256 PCR value.
const DIGEST_SIZE: usize = 32;

/// What [`Interaction::pin`] is asked for.
const PIN_PROMPT: &str = "TPM PIN";

/// Options of sealing.
#[derive(Clone, Debug, Default)]
pub struct SealOptions {
    /// TCTI spec (`device:/dev/tpmrm0`, `swtpm:host=127.0.0.1,port=2321`); default: the environment's TCTI (`TPM2TOOLS_TCTI`, `TCTI`), then `device:/dev/tpmrm0`.
    pub tcti: Option<String>,
    /// PCR indices of the SHA-256 bank the policy binds (default `[7]`).
    pub pcrs: Vec<u8>,
    /// Whether a PIN (asked through [`Interaction::pin`]) is also required; subject to the TPM's dictionary-attack lockout.
    pub pin: bool,
}

/// Options of unsealing that override the record.
#[derive(Clone, Debug, Default)]
pub struct UnsealOptions {
    /// TCTI spec overriding the record's.
    pub tcti: Option<String>,
}

/// The stored record (see the module documentation for the scheme). All
/// binary fields are lowercase hex.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Sealed {
    /// The TCTI spec used when sealing: shown by [`describe`], never used
    /// to connect (the record may come from another machine).
    pub tcti: String,
    /// The PCR bank of `pcrs`: always [`PCR_BANK`].
    pub pcr_bank: String,
    /// The bound PCRs with their values at seal time, in strictly
    /// ascending index order; at least one.
    pub pcrs: Vec<PcrValue>,
    /// Whether the policy also requires the PIN (`TPM2_PolicyAuthValue`).
    pub pin: bool,
    /// The sealed object's marshalled `TPM2B_PUBLIC`, hex.
    pub public: String,
    /// The sealed object's marshalled `TPM2B_PRIVATE`, hex.
    pub private: String,
}

/// One bound PCR of a [`Sealed`] record. (A list rather than a JSON map
/// keyed by index: the record sits inside the `kind`-tagged
/// [`crate::Sealed`], whose buffering turns integer map keys into strings.)
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PcrValue {
    /// The PCR index, 0..[`PCR_COUNT`].
    pub index: u8,
    /// Its SHA-256 value at seal time, 64 hex digits.
    pub sha256: String,
}

/// A [`Sealed`] record checked and decoded.
struct Record {
    pcrs: BTreeMap<u8, [u8; DIGEST_SIZE]>,
    pin: bool,
    public: Public,
    private: Private,
}

/// Seals `secret` to the TPM that `options.tcti` (or the environment)
/// names, under PolicyPCR over `options.pcrs` of the SHA-256 bank and,
/// with `options.pin`, PolicyAuthValue with a PIN asked through `ui`
/// (`"TPM PIN"`, confirmed).
///
/// # Errors
/// [`Error::Invalid`] for a PCR index ≥ 24, an unparsable TCTI spec or an
/// empty PIN; [`Error::Device`] when the TPM cannot be reached or fails;
/// whatever `ui.pin` returns.
pub fn seal(
    options: &SealOptions,
    secret: &Secret,
    ui: &mut dyn Interaction,
) -> Result<Sealed, Error> {
    let pcrs = pcr_list(&options.pcrs)?;
    let tcti = tcti_spec(options.tcti.as_deref());
    let conf = parse_tcti(&tcti)?;
    let mut ctx = connect(conf, &tcti)?;
    let auth = if options.pin {
        Some(pin_auth(&ui.pin(PIN_PROMPT, true)?)?)
    } else {
        None
    };
    let dev = |what: &str| {
        let tcti = tcti.clone();
        let what = what.to_owned();
        move |e: tss_esapi::Error| device_error(&what, &tcti, &e)
    };

    let values = read_pcrs(&mut ctx, &pcrs, &tcti)?;
    let selection = selection(&pcrs)?;
    let pcr_digest = pcr_digest(&values)?;

    // The policy digest, from a trial session.
    let trial =
        start_session(&mut ctx, None, SessionType::Trial).map_err(dev("start a trial session"))?;
    let trial_policy = PolicySession::try_from(trial).map_err(dev("start a trial session"))?;
    ctx.policy_pcr(trial_policy, pcr_digest, selection)
        .map_err(dev("compute the PCR policy"))?;
    if options.pin {
        ctx.policy_auth_value(trial_policy)
            .map_err(dev("compute the PIN policy"))?;
    }
    let policy = ctx
        .policy_get_digest(trial_policy)
        .map_err(dev("compute the policy digest"))?;
    flush_session(&mut ctx, trial);

    let primary = create_parent(&mut ctx, &tcti)?;
    let session = start_session(&mut ctx, Some(primary), SessionType::Hmac)
        .map_err(dev("start an HMAC session"))?;
    let (attrs, mask) = SessionAttributesBuilder::new()
        .with_continue_session(true)
        .with_decrypt(true)
        .build();
    ctx.tr_sess_set_attributes(session, attrs, mask)
        .map_err(dev("set the session's attributes"))?;
    let template = sealed_template(policy).map_err(dev("build the sealed object"))?;
    let data = SensitiveData::try_from(&secret.as_bytes()[..]).map_err(dev("seal the secret"))?;
    let created = ctx
        .execute_with_session(Some(session), |ctx| {
            ctx.create(primary, template, auth, Some(data), None, None)
        })
        .map_err(dev("create the sealed object"))?;
    flush_session(&mut ctx, session);
    let _ = ctx.flush_context(primary.into());

    let public = created
        .out_public
        .marshall()
        .map_err(dev("marshal the sealed object"))?;
    Ok(Sealed {
        tcti,
        pcr_bank: PCR_BANK.into(),
        pcrs: values
            .iter()
            .map(|(i, v)| PcrValue {
                index: *i,
                sha256: hex::encode(v),
            })
            .collect(),
        pin: options.pin,
        public: hex::encode(tpm2b(&public)?),
        private: hex::encode(tpm2b(created.out_private.value())?),
    })
}

/// Unseals `sealed` with the TPM that `options.tcti` (or the environment,
/// or [`DEFAULT_TCTI`]) names; asks the PIN through `ui` (`"TPM PIN"`)
/// when the record needs one, after the PCRs were found unchanged.
///
/// # Errors
/// [`Error::WrongSecret`] when the bound PCRs changed (named), for a wrong
/// PIN (counted by the TPM toward its lockout), or when this TPM cannot
/// load the object (sealed by another TPM, or the owner hierarchy was
/// cleared). [`Error::Device`] when the TPM cannot be reached, is in
/// dictionary-attack lockout, or fails. [`Error::Invalid`] for a
/// malformed record or TCTI spec.
pub fn unseal(
    sealed: &Sealed,
    options: &UnsealOptions,
    ui: &mut dyn Interaction,
) -> Result<Secret, Error> {
    let record = parse_record(sealed)?;
    let tcti = tcti_spec(options.tcti.as_deref());
    let conf = parse_tcti(&tcti)?;
    let mut ctx = connect(conf, &tcti)?;
    let dev = |what: &str| {
        let tcti = tcti.clone();
        let what = what.to_owned();
        move |e: tss_esapi::Error| device_error(&what, &tcti, &e)
    };

    let indices: Vec<u8> = record.pcrs.keys().copied().collect();
    let now = read_pcrs(&mut ctx, &indices, &tcti)?;
    let changed: Vec<u8> = record
        .pcrs
        .iter()
        .filter(|(i, v)| now.get(i) != Some(v))
        .map(|(i, _)| *i)
        .collect();
    if !changed.is_empty() {
        return Err(pcrs_changed(&changed));
    }

    let primary = create_parent(&mut ctx, &tcti)?;
    let public = record.public.clone();
    let object = ctx
        .execute_with_nullauth_session(|ctx| ctx.load(primary, record.private.clone(), public))
        .map_err(|e| load_error(&tcti, &e))?;
    if record.pin {
        // TPMA_PERMANENT.inLockout (Part 2 §8.6): no PIN asked for nothing.
        let permanent = ctx.get_tpm_property(PropertyTag::Permanent).ok().flatten();
        if permanent.is_some_and(|p| p & IN_LOCKOUT != 0) {
            return Err(lockout_error(&mut ctx, &tcti));
        }
        let auth = pin_auth(&ui.pin(PIN_PROMPT, false)?)?;
        ctx.tr_set_auth(object.into(), auth)
            .map_err(dev("set the PIN"))?;
    }

    let session = start_session(&mut ctx, Some(primary), SessionType::Policy)
        .map_err(dev("start a policy session"))?;
    let (attrs, mask) = SessionAttributesBuilder::new()
        .with_continue_session(true)
        .with_encrypt(true)
        .build();
    ctx.tr_sess_set_attributes(session, attrs, mask)
        .map_err(dev("set the session's attributes"))?;
    let policy = PolicySession::try_from(session).map_err(dev("start a policy session"))?;
    ctx.policy_pcr(policy, pcr_digest(&record.pcrs)?, selection(&indices)?)
        .map_err(|e| match tpm_rc(&e) {
            // The PCRs moved between the read and the policy.
            Some(RC_VALUE | RC_PCR_CHANGED) => pcrs_changed(&indices),
            _ => device_error("run the PCR policy", &tcti, &e),
        })?;
    if record.pin {
        ctx.policy_auth_value(policy)
            .map_err(dev("run the PIN policy"))?;
    }
    let digest = ctx
        .policy_get_digest(policy)
        .map_err(dev("read the policy digest"))?;
    if digest.value() != record.public.auth_policy().value() {
        return Err(Error::Invalid(
            "the tpm2 record's PCR list or PIN flag does not match its sealed object's policy: \
             the record was altered; unlock with the recovery key or another protector and reseal"
                .into(),
        ));
    }
    let data = ctx
        .execute_with_session(Some(session), |ctx| ctx.unseal(object.into()))
        .map_err(|e| unseal_error(&mut ctx, &tcti, record.pin, &indices, &e))?;
    flush_session(&mut ctx, session);
    let _ = ctx.flush_context(object.into());
    let _ = ctx.flush_context(primary.into());
    Secret::from_slice(data.value())
}

/// `protector list` / `info`: ("device", the TCTI hint), ("pcrs",
/// `sha256:7,14`), ("pin", `yes`/`no`).
pub fn describe(sealed: &Sealed) -> Vec<(&'static str, String)> {
    let pcrs: Vec<String> = sealed.pcrs.iter().map(|p| p.index.to_string()).collect();
    vec![
        ("device", sealed.tcti.clone()),
        ("pcrs", format!("{}:{}", sealed.pcr_bank, pcrs.join(","))),
        ("pin", if sealed.pin { "yes" } else { "no" }.into()),
    ]
}

// ---------------------------------------------------------------------
// Options and the record.

/// The TCTI spec: `option`, else `$TPM2TOOLS_TCTI`, else `$TCTI`, else
/// [`DEFAULT_TCTI`].
fn tcti_spec(option: Option<&str>) -> String {
    let set = |s: &String| !s.is_empty();
    option
        .map(str::to_owned)
        .filter(set)
        .or_else(|| std::env::var("TPM2TOOLS_TCTI").ok().filter(set))
        .or_else(|| std::env::var("TCTI").ok().filter(set))
        .unwrap_or_else(|| DEFAULT_TCTI.into())
}

/// Parses a TCTI spec.
fn parse_tcti(spec: &str) -> Result<TctiNameConf, Error> {
    TctiNameConf::from_str(spec).map_err(|_| {
        Error::Invalid(format!(
            "cannot parse the TCTI '{spec}': use e.g. device:/dev/tpmrm0 or \
             swtpm:host=127.0.0.1,port=2321"
        ))
    })
}

/// The sorted, deduplicated PCR indices to bind ([`DEFAULT_PCRS`] when
/// `pcrs` is empty).
fn pcr_list(pcrs: &[u8]) -> Result<Vec<u8>, Error> {
    let mut list = if pcrs.is_empty() {
        DEFAULT_PCRS.to_vec()
    } else {
        pcrs.to_vec()
    };
    list.sort_unstable();
    list.dedup();
    if let Some(bad) = list.iter().find(|&&i| i >= PCR_COUNT) {
        return Err(Error::Invalid(format!(
            "there is no PCR {bad}: pick PCRs between 0 and {}",
            PCR_COUNT - 1
        )));
    }
    Ok(list)
}

/// Checks and decodes a stored record.
fn parse_record(sealed: &Sealed) -> Result<Record, Error> {
    let bad = |what: &str| {
        Error::Invalid(format!(
            "the tpm2 record is malformed ({what}): restore the vault config or remove \
             this protector"
        ))
    };
    if sealed.pcr_bank != PCR_BANK {
        return Err(bad("its PCR bank is not sha256"));
    }
    if sealed.pcrs.is_empty() {
        return Err(bad("it binds no PCR"));
    }
    let mut pcrs = BTreeMap::new();
    for p in &sealed.pcrs {
        let (i, v) = (p.index, &p.sha256);
        if i >= PCR_COUNT {
            return Err(bad(&format!("PCR {i} does not exist")));
        }
        if pcrs.last_key_value().is_some_and(|(&last, _)| last >= i) {
            return Err(bad("its PCRs are not in ascending order"));
        }
        let mut value = [0u8; DIGEST_SIZE];
        hex::decode_to_slice(v, &mut value)
            .map_err(|_| bad(&format!("the value of PCR {i} is not 64 hex digits")))?;
        pcrs.insert(i, value);
    }
    let public_bytes = hex::decode(&sealed.public).map_err(|_| bad("public is not hex"))?;
    let public_area = untpm2b(&public_bytes).ok_or_else(|| bad("public has a wrong size"))?;
    let public = Public::unmarshall(public_area).map_err(|_| bad("public does not parse"))?;
    // Unmarshalling does not say how much it read: a re-marshal of the
    // same length proves nothing trails.
    if public.marshall().map(|m| m.len()).ok() != Some(public_area.len()) {
        return Err(bad("public has trailing bytes"));
    }
    let Public::KeyedHash {
        object_attributes,
        name_hashing_algorithm,
        ..
    } = &public
    else {
        return Err(bad("public is not a sealed data object"));
    };
    if *name_hashing_algorithm != HashingAlgorithm::Sha256 || object_attributes.user_with_auth() {
        return Err(bad("public is not a policy-bound sealed object"));
    }
    let private_bytes = hex::decode(&sealed.private).map_err(|_| bad("private is not hex"))?;
    let private_area = untpm2b(&private_bytes).ok_or_else(|| bad("private has a wrong size"))?;
    if private_area.is_empty() {
        return Err(bad("private is empty"));
    }
    let private = Private::try_from(private_area).map_err(|_| bad("private is too large"))?;
    Ok(Record {
        pcrs,
        pin: sealed.pin,
        public,
        private,
    })
}

/// `bytes` framed as a TPM2B: a big-endian u16 size, then the bytes.
fn tpm2b(bytes: &[u8]) -> Result<Vec<u8>, Error> {
    let size = u16::try_from(bytes.len())
        .map_err(|_| Error::Device("the TPM returned an oversized object".into()))?;
    let mut out = Vec::with_capacity(bytes.len() + 2);
    out.extend_from_slice(&size.to_be_bytes());
    out.extend_from_slice(bytes);
    Ok(out)
}

/// The contents of a TPM2B whose size field covers exactly the rest of
/// `bytes`, or `None`.
fn untpm2b(bytes: &[u8]) -> Option<&[u8]> {
    let (size, rest) = bytes.split_first_chunk::<2>()?;
    (usize::from(u16::from_be_bytes(*size)) == rest.len()).then_some(rest)
}

/// The object's auth value for `pin`: SHA-256 of its UTF-8 bytes, trailing
/// zero bytes removed.
fn pin_auth(pin: &str) -> Result<Auth, Error> {
    if pin.is_empty() {
        return Err(Error::Invalid(
            "the TPM PIN is empty: type a PIN, or seal without --pin".into(),
        ));
    }
    let mut hash = Zeroizing::new([0u8; DIGEST_SIZE]);
    Sha256::new_with_prefix(pin.as_bytes()).finalize_into((&mut *hash).into());
    let len = hash.iter().rposition(|&b| b != 0).map_or(0, |p| p + 1);
    Auth::try_from(&hash[..len]).map_err(|_| Error::Invalid("the TPM PIN cannot be used".into()))
}

// ---------------------------------------------------------------------
// TPM operations.

/// Opens an ESAPI context on `conf`.
fn connect(conf: TctiNameConf, tcti: &str) -> Result<Context, Error> {
    // The TSS's own reason (connection refused, no such device) went to
    // stderr; its response code says nothing more.
    Context::new(conf).map_err(|_| {
        Error::Device(format!(
            "cannot reach a TPM through '{tcti}': check the TPM is there and you may use it \
             (group tss), or name another with --tcti or TPM2TOOLS_TCTI"
        ))
    })
}

/// The PCR selection of `pcrs` in the SHA-256 bank.
fn selection(pcrs: &[u8]) -> Result<PcrSelectionList, Error> {
    let slots = pcrs
        .iter()
        .map(|&i| {
            PcrSlot::try_from(1u32 << i).map_err(|_| Error::Invalid(format!("there is no PCR {i}")))
        })
        .collect::<Result<Vec<_>, _>>()?;
    PcrSelectionListBuilder::new()
        .with_selection(HashingAlgorithm::Sha256, &slots)
        .build()
        .map_err(|e| Error::Invalid(format!("cannot select PCRs {pcrs:?}: {e}")))
}

/// Reads the SHA-256 values of `pcrs` (a TPM returns at most 8 per call).
fn read_pcrs(
    ctx: &mut Context,
    pcrs: &[u8],
    tcti: &str,
) -> Result<BTreeMap<u8, [u8; DIGEST_SIZE]>, Error> {
    let mut values = BTreeMap::new();
    let mut left: Vec<u8> = pcrs.to_vec();
    while !left.is_empty() {
        let (_, read, digests) = ctx
            .pcr_read(selection(&left)?)
            .map_err(|e| device_error("read the PCRs", tcti, &e))?;
        let mut got: Vec<u8> = Vec::new();
        for s in read.get_selections() {
            if s.hashing_algorithm() == HashingAlgorithm::Sha256 {
                got.extend(s.selected().iter().map(|&slot| {
                    // A slot is a one-bit mask: its bit is the index.
                    u32::from(slot).trailing_zeros() as u8
                }));
            }
        }
        got.sort_unstable();
        if got.is_empty() || got.len() != digests.len() {
            return Err(Error::Device(format!(
                "the TPM at '{tcti}' returned no SHA-256 value for PCRs {left:?}: enable its \
                 SHA-256 PCR bank (tpm2_pcrallocate) or pick other PCRs"
            )));
        }
        for (i, d) in got.iter().zip(digests.value()) {
            let v: [u8; DIGEST_SIZE] = d.value().try_into().map_err(|_| {
                Error::Device(format!("the TPM at '{tcti}' returned a malformed PCR {i}"))
            })?;
            values.insert(*i, v);
        }
        left.retain(|i| !got.contains(i));
    }
    Ok(values)
}

/// `SHA-256(value[i1] || value[i2] || ...)` in ascending index order: the
/// `pcrDigest` of TPM2_PolicyPCR.
fn pcr_digest(values: &BTreeMap<u8, [u8; DIGEST_SIZE]>) -> Result<Digest, Error> {
    let mut h = Sha256::new();
    for v in values.values() {
        h.update(v);
    }
    Digest::try_from(&h.finalize()[..]).map_err(|e| Error::Invalid(format!("PCR digest: {e}")))
}

/// The parent template (module documentation, step 1).
fn parent_template() -> tss_esapi::Result<Public> {
    let attributes = ObjectAttributesBuilder::new()
        .with_fixed_tpm(true)
        .with_fixed_parent(true)
        .with_sensitive_data_origin(true)
        .with_user_with_auth(true)
        .with_no_da(true)
        .with_restricted(true)
        .with_decrypt(true)
        .build()?;
    let zeros = EccParameter::try_from(vec![0u8; 32])?;
    PublicBuilder::new()
        .with_public_algorithm(PublicAlgorithm::Ecc)
        .with_name_hashing_algorithm(HashingAlgorithm::Sha256)
        .with_object_attributes(attributes)
        .with_ecc_parameters(
            PublicEccParametersBuilder::new_restricted_decryption_key(
                SymmetricDefinitionObject::AES_128_CFB,
                EccCurve::NistP256,
            )
            .with_ecc_scheme(EccScheme::Null)
            .with_key_derivation_function_scheme(KeyDerivationFunctionScheme::Null)
            .build()?,
        )
        .with_ecc_unique_identifier(EccPoint::new(zeros.clone(), zeros))
        .build()
}

/// The sealed object's template (module documentation, step 4).
fn sealed_template(policy: Digest) -> tss_esapi::Result<Public> {
    let attributes = ObjectAttributesBuilder::new()
        .with_fixed_tpm(true)
        .with_fixed_parent(true)
        .with_admin_with_policy(true)
        .build()?;
    PublicBuilder::new()
        .with_public_algorithm(PublicAlgorithm::KeyedHash)
        .with_name_hashing_algorithm(HashingAlgorithm::Sha256)
        .with_object_attributes(attributes)
        .with_auth_policy(policy)
        .with_keyed_hash_parameters(PublicKeyedHashParameters::new(KeyedHashScheme::Null))
        .with_keyed_hash_unique_identifier(Digest::default())
        .build()
}

/// Creates the parent key (module documentation, step 1).
fn create_parent(ctx: &mut Context, tcti: &str) -> Result<KeyHandle, Error> {
    let template = parent_template().map_err(|e| device_error("build the parent key", tcti, &e))?;
    ctx.execute_with_nullauth_session(|ctx| {
        ctx.create_primary(Hierarchy::Owner, template, None, None, None, None)
    })
    .map(|r| r.key_handle)
    .map_err(|e| match tpm_rc(&e) {
        Some(RC_BAD_AUTH | RC_AUTH_FAIL) => Error::Device(format!(
            "the TPM at '{tcti}' has an owner password: sealed protectors need the owner \
             hierarchy's auth to be empty (tpm2_changeauth -c owner)"
        )),
        _ => device_error("create the parent key", tcti, &e),
    })
}

/// Starts a session of `kind` (SHA-256), salted to `salt_key` if given, with
/// AES-128-CFB parameter encryption available (none for trial sessions).
fn start_session(
    ctx: &mut Context,
    salt_key: Option<KeyHandle>,
    kind: SessionType,
) -> tss_esapi::Result<AuthSession> {
    let symmetric = if kind == SessionType::Trial {
        SymmetricDefinition::Null
    } else {
        SymmetricDefinition::AES_128_CFB
    };
    ctx.start_auth_session(
        salt_key,
        None,
        None,
        kind,
        symmetric,
        HashingAlgorithm::Sha256,
    )?
    .ok_or(tss_esapi::Error::WrapperError(
        tss_esapi::WrapperErrorKind::WrongValueFromTpm,
    ))
}

/// Flushes a session (best effort: dropping the context flushes it too).
fn flush_session(ctx: &mut Context, session: AuthSession) {
    if let AuthSession::PolicySession(PolicySession::PolicySession { session_handle, .. })
    | AuthSession::HmacSession(
        tss_esapi::interface_types::session_handles::HmacSession::HmacSession {
            session_handle,
            ..
        },
    ) = session
    {
        let _ = ctx.flush_context(ObjectHandle::from(session_handle));
    }
}

// ---------------------------------------------------------------------
// Errors.

/// TPM_RC_VALUE (format one; response codes are in TPM 2.0 Part 2 §6.6).
const RC_VALUE: u32 = 0x084;
/// TPM_RC_AUTH_FAIL: the HMAC check failed and the DA counter went up.
const RC_AUTH_FAIL: u32 = 0x08E;
/// TPM_RC_POLICY_FAIL.
const RC_POLICY_FAIL: u32 = 0x09D;
/// TPM_RC_INTEGRITY: a private blob that this TPM did not make.
const RC_INTEGRITY: u32 = 0x09F;
/// TPM_RC_BAD_AUTH: authorization failure without DA implications.
const RC_BAD_AUTH: u32 = 0x0A2;
/// TPM_RC_PCR_CHANGED (format zero, RC_VER1 + 0x028).
const RC_PCR_CHANGED: u32 = 0x128;
/// TPM_RC_LOCKOUT (format zero warning, RC_WARN + 0x021).
const RC_LOCKOUT: u32 = 0x921;
/// The `inLockout` bit of TPMA_PERMANENT (bit 9; Part 2 §8.6).
const IN_LOCKOUT: u32 = 1 << 9;

/// The TPM's own response code in `e`, with a format-one code's
/// handle/parameter/session number masked out; `None` for errors of the
/// TSS layers (TCTI, ESAPI) and of the wrapper.
fn tpm_rc(e: &tss_esapi::Error) -> Option<u32> {
    let raw = match e {
        tss_esapi::Error::Tss2Error(Tss2ResponseCode::FormatZero(c)) => c.0,
        tss_esapi::Error::Tss2Error(Tss2ResponseCode::FormatOne(c)) => c.0,
        _ => return None,
    };
    if raw >> 16 != 0 {
        return None; // a TSS layer's code (TCTI, SAPI, ESAPI...)
    }
    Some(if raw & 0x80 != 0 { raw & 0xBF } else { raw })
}

/// A [`Error::Device`] for a failed TPM step.
fn device_error(what: &str, tcti: &str, e: &tss_esapi::Error) -> Error {
    Error::Device(format!(
        "the TPM at '{tcti}' failed to {what} ({e}): check the TPM (tpm2_selftest) and try again"
    ))
}

/// The refusal for PCRs that changed since sealing.
fn pcrs_changed(pcrs: &[u8]) -> Error {
    let list: Vec<String> = pcrs.iter().map(u8::to_string).collect();
    let which = if pcrs.len() == 1 { "PCR" } else { "PCRs" };
    Error::WrongSecret(format!(
        "the TPM's {which} {} (sha256) changed since this protector was sealed (firmware, boot \
         or Secure Boot change?): unlock with the recovery key or another protector, then seal it \
         again (`fscrypt-rs protector reseal` for a vault, `fscrypt-rs metadata reseal` for a \
         kernel directory)",
        list.join(", ")
    ))
}

/// Maps a failed TPM2_Load.
fn load_error(tcti: &str, e: &tss_esapi::Error) -> Error {
    match tpm_rc(e) {
        Some(RC_INTEGRITY) => Error::WrongSecret(format!(
            "the TPM at '{tcti}' cannot load this sealed object: it was sealed by another TPM, or \
             this TPM was cleared since; unlock with the recovery key or another protector, then \
             seal it again (`fscrypt-rs protector reseal` or `fscrypt-rs metadata reseal`)"
        )),
        Some(rc) if rc & 0x80 != 0 => Error::Invalid(format!(
            "the TPM at '{tcti}' refuses the tpm2 record's object ({e}): the record is malformed; \
             restore the vault config or remove this protector"
        )),
        _ => device_error("load the sealed object", tcti, e),
    }
}

/// The [`Error::Device`] of a TPM in dictionary-attack lockout.
fn lockout_error(ctx: &mut Context, tcti: &str) -> Error {
    let when = match ctx.get_tpm_property(PropertyTag::LockoutInterval) {
        Ok(Some(0)) | Ok(None) | Err(_) => "only its owner can end it".to_owned(),
        Ok(Some(s)) => format!("it forgets one failure every {s} s"),
    };
    Error::Device(format!(
        "the TPM at '{tcti}' is locked out after too many wrong PINs ({when}); its owner can \
         reset it now with `tpm2_dictionarylockout --clear-lockout`, or unlock with the \
         recovery key or another protector"
    ))
}

/// Maps a failed TPM2_Unseal.
fn unseal_error(
    ctx: &mut Context,
    tcti: &str,
    pin: bool,
    pcrs: &[u8],
    e: &tss_esapi::Error,
) -> Error {
    let mut prop = |tag| ctx.get_tpm_property(tag).ok().flatten();
    match tpm_rc(e) {
        Some(RC_AUTH_FAIL | RC_BAD_AUTH) if pin => {
            let counter = match (
                prop(PropertyTag::LockoutCounter),
                prop(PropertyTag::MaxAuthFail),
            ) {
                (Some(n), Some(max)) if n >= max => " (it is now locked out)".to_owned(),
                (Some(n), Some(max)) => format!(" ({n} of {max} failures counted)"),
                _ => String::new(),
            };
            Error::WrongSecret(format!(
                "wrong TPM PIN: the TPM counts each failure toward its dictionary-attack \
                 lockout{counter}; try again, or unlock with the recovery key or another protector"
            ))
        }
        Some(RC_LOCKOUT) => lockout_error(ctx, tcti),
        Some(RC_POLICY_FAIL | RC_VALUE | RC_PCR_CHANGED) => pcrs_changed(pcrs),
        _ => device_error("unseal the secret", tcti, e),
    }
}

/// See [`crate::Sealed::reseal_options`]: `pcrs` if non-empty, else the
/// record's PCR indices; a PIN if `pin` or the record had one; `tcti` if
/// given, else the environment's (the record's TCTI is only a hint).
pub fn reseal_options(sealed: &Sealed, pcrs: &[u8], pin: bool, tcti: Option<&str>) -> SealOptions {
    SealOptions {
        tcti: tcti.map(str::to_owned),
        pcrs: if pcrs.is_empty() {
            sealed.pcrs.iter().map(|p| p.index).collect()
        } else {
            pcrs.to_vec()
        },
        pin: pin || sealed.pin,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A well-formed record (its object is not from a TPM: the public
    /// part is the real template, the private part arbitrary bytes).
    fn record() -> Sealed {
        let public = sealed_template(Digest::try_from(vec![5u8; 32]).unwrap()).unwrap();
        Sealed {
            tcti: "device:/dev/tpmrm0".into(),
            pcr_bank: "sha256".into(),
            pcrs: vec![
                PcrValue {
                    index: 7,
                    sha256: "00".repeat(32),
                },
                PcrValue {
                    index: 14,
                    sha256: "ab".repeat(32),
                },
            ],
            pin: true,
            public: hex::encode(tpm2b(&public.marshall().unwrap()).unwrap()),
            private: "0004deadbeef".into(),
        }
    }

    fn hex_tpm2b(public: &Public) -> String {
        hex::encode(tpm2b(&public.marshall().unwrap()).unwrap())
    }

    #[test]
    fn describe_names_device_pcrs_and_pin() {
        assert_eq!(
            describe(&record()),
            vec![
                ("device", "device:/dev/tpmrm0".to_owned()),
                ("pcrs", "sha256:7,14".to_owned()),
                ("pin", "yes".to_owned()),
            ]
        );
    }

    #[test]
    fn pcr_list_defaults_sorts_and_refuses_out_of_range() {
        assert_eq!(pcr_list(&[]).unwrap(), vec![7]);
        assert_eq!(pcr_list(&[14, 7, 14]).unwrap(), vec![7, 14]);
        assert!(matches!(pcr_list(&[24]), Err(Error::Invalid(_))));
    }

    #[test]
    fn tpm2b_frames_and_unframes() {
        assert_eq!(tpm2b(b"abc").unwrap(), b"\x00\x03abc");
        assert_eq!(untpm2b(b"\x00\x03abc"), Some(&b"abc"[..]));
        assert_eq!(untpm2b(b"\x00\x04abc"), None);
        assert_eq!(untpm2b(b"\x00\x02abc"), None);
        assert_eq!(untpm2b(b"\x00"), None);
    }

    #[test]
    fn malformed_records_are_invalid() {
        type Edit = Box<dyn Fn(&mut Sealed)>;
        let cases: Vec<(&str, Edit)> = vec![
            ("bank", Box::new(|s| s.pcr_bank = "sha1".into())),
            ("no pcrs", Box::new(|s| s.pcrs.clear())),
            ("pcr 24", Box::new(|s| s.pcrs[1].index = 24)),
            ("short pcr", Box::new(|s| s.pcrs[0].sha256.truncate(62))),
            ("pcrs unsorted", Box::new(|s| s.pcrs.swap(0, 1))),
            ("pcr twice", Box::new(|s| s.pcrs[1].index = 7)),
            ("public hex", Box::new(|s| s.public = "zz".into())),
            ("public size", Box::new(|s| s.public = "0005aa".into())),
            ("public junk", Box::new(|s| s.public = "0002aaaa".into())),
            (
                "public truncated",
                Box::new(|s| s.public.truncate(s.public.len() - 2)),
            ),
            (
                "public trailing",
                Box::new(|s| {
                    let mut b = hex::decode(&s.public).unwrap();
                    b.push(0);
                    let n = u16::from_be_bytes([b[0], b[1]]) + 1;
                    b[..2].copy_from_slice(&n.to_be_bytes());
                    s.public = hex::encode(b);
                }),
            ),
            (
                "public is a key",
                Box::new(|s| s.public = hex_tpm2b(&parent_template().unwrap())),
            ),
            (
                "private hex",
                Box::new(|s| s.private = "0004deadbee".into()),
            ),
            ("private empty", Box::new(|s| s.private = "0000".into())),
            (
                "private size",
                Box::new(|s| s.private = "0005deadbeef".into()),
            ),
            (
                "private huge",
                Box::new(|s| s.private = hex::encode(tpm2b(&[1u8; 4000]).unwrap())),
            ),
        ];
        let good = parse_record(&record()).unwrap();
        assert_eq!(good.pcrs.len(), 2);
        assert!(good.pin);
        for (name, edit) in cases {
            let mut s = record();
            edit(&mut s);
            assert!(matches!(parse_record(&s), Err(Error::Invalid(_))), "{name}");
        }
    }

    #[test]
    fn record_survives_the_tagged_json() {
        let json = crate::Sealed::Tpm2(record()).to_json();
        assert_eq!(json["kind"], "tpm2");
        assert_eq!(json["pcrs"][1]["index"], 14);
        assert_eq!(
            crate::Sealed::from_json(&json).unwrap(),
            crate::Sealed::Tpm2(record())
        );
    }

    #[test]
    fn record_json_refuses_unknown_fields() {
        let mut v = serde_json::to_value(record()).unwrap();
        v["extra"] = serde_json::Value::Bool(true);
        assert!(serde_json::from_value::<Sealed>(v).is_err());
    }

    #[test]
    fn pin_auth_is_sha256_without_trailing_zeros() {
        let a = pin_auth("1234").unwrap();
        let h = Sha256::digest(b"1234");
        let len = h.iter().rposition(|&b| b != 0).unwrap() + 1;
        assert_eq!(a.value(), &h[..len]);
        assert!(matches!(pin_auth(""), Err(Error::Invalid(_))));
    }

    #[test]
    fn pcr_digest_hashes_values_in_index_order() {
        let values = BTreeMap::from([(14, [2u8; 32]), (7, [1u8; 32])]);
        let mut both = [1u8; 64];
        both[32..].fill(2);
        assert_eq!(
            pcr_digest(&values).unwrap().value(),
            &Sha256::digest(both)[..]
        );
    }

    #[test]
    fn tpm_codes_are_masked_and_layers_ignored() {
        use tss_esapi::constants::response_code::{FormatOneResponseCode, FormatZeroResponseCode};
        let one = |rc| {
            tss_esapi::Error::Tss2Error(Tss2ResponseCode::FormatOne(FormatOneResponseCode(rc)))
        };
        let zero = |rc| {
            tss_esapi::Error::Tss2Error(Tss2ResponseCode::FormatZero(FormatZeroResponseCode(rc)))
        };
        // AUTH_FAIL on session 1: 0x98E.
        assert_eq!(tpm_rc(&one(0x98E)), Some(RC_AUTH_FAIL));
        assert_eq!(tpm_rc(&zero(0x921)), Some(RC_LOCKOUT));
        // The TCTI layer's IO error.
        assert_eq!(tpm_rc(&zero(0x000A_000A)), None);
    }
}
