//! FIDO2 protectors against a real client stack: libfido2 (the library
//! the module drives) talking CTAPHID over a Unix socket (`unix:` devices)
//! to a software CTAP 2.0 authenticator started by each test.
//!
//! The authenticator ([`SoftKey`]) is written here, for these tests: no
//! maintained Rust authenticator speaks CTAP2 `hmac-secret` with the
//! `clientPIN` key agreement (1Password's `passkey-authenticator` only has
//! the PRF form, without PIN protocol), and CI has no `/dev/uhid` for a
//! virtual HID key. It implements exactly what libfido2 sends: CTAPHID
//! INIT/CBOR/PING framing, authenticatorGetInfo, authenticatorClientPIN
//! (getRetries, getKeyAgreement, getPINToken, PIN protocol 1),
//! authenticatorMakeCredential and authenticatorGetAssertion with
//! `hmac-secret` (CTAP 2.1 §12.5: two CredRandoms, with and without UV),
//! following the CTAP 2.1 spec; crypto from RustCrypto.
//!
//! With a real key: `FSCRYPT_RS_FIDO2_DEVICE=/dev/hidrawN cargo test -p
//! fscrypt-seal --test fido2 real_key` (and, if the key has a PIN,
//! `FSCRYPT_RS_FIDO2_PIN_FILE=FILE` holding it); it asks for touches.

use std::collections::VecDeque;
use std::io::{Read, Write};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Instant;

use fscrypt_seal::fido2::{self, SealOptions, UnsealOptions};
use fscrypt_seal::{Error, Interaction, Secret};
use test_support::TempDir;
use zeroize::Zeroizing;

mod soft {
    //! The software authenticator.

    use super::*;
    use aes::cipher::block_padding::NoPadding;
    use aes::cipher::{BlockModeDecrypt, BlockModeEncrypt, KeyIvInit};
    use ciborium::Value;
    use hmac::{Hmac, KeyInit, Mac};
    use p256::ecdsa::signature::Signer;
    use sha2::{Digest, Sha256};

    const CTAPHID_PING: u8 = 0x01;
    const CTAPHID_INIT: u8 = 0x06;
    const CTAPHID_CBOR: u8 = 0x10;
    const CTAPHID_CANCEL: u8 = 0x11;
    const CTAPHID_ERROR: u8 = 0x3f;
    const REPORT: usize = 64;

    const OK: u8 = 0x00;
    const ERR_INVALID_COMMAND: u8 = 0x01;
    const ERR_INVALID_CBOR: u8 = 0x12;
    const ERR_MISSING_PARAMETER: u8 = 0x14;
    const ERR_NO_CREDENTIALS: u8 = 0x2e;
    const ERR_PIN_INVALID: u8 = 0x31;
    const ERR_PIN_BLOCKED: u8 = 0x32;
    const ERR_PIN_AUTH_INVALID: u8 = 0x33;
    const ERR_PIN_AUTH_BLOCKED: u8 = 0x34;
    const ERR_PIN_NOT_SET: u8 = 0x35;
    const ERR_PIN_REQUIRED: u8 = 0x36;

    const AAGUID: [u8; 16] = *b"fscrypt-rs-test!";

    fn hmac(key: &[u8], parts: &[&[u8]]) -> [u8; 32] {
        let mut m = <Hmac<Sha256> as KeyInit>::new_from_slice(key).unwrap();
        for p in parts {
            m.update(p);
        }
        m.finalize().into_bytes().into()
    }

    fn random<const N: usize>() -> [u8; N] {
        let mut b = [0u8; N];
        fscrypt_crypto::random_bytes(&mut b).unwrap();
        b
    }

    /// AES-256-CBC with a zero IV and no padding (PIN protocol 1).
    fn cbc(key: &[u8; 32], data: &[u8], encrypt: bool) -> Option<Vec<u8>> {
        if data.is_empty() || !data.len().is_multiple_of(16) {
            return None;
        }
        let mut buf = data.to_vec();
        let iv = [0u8; 16];
        if encrypt {
            cbc::Encryptor::<aes::Aes256>::new(key.into(), &iv.into())
                .encrypt_padded::<NoPadding>(&mut buf, data.len())
                .ok()?;
        } else {
            cbc::Decryptor::<aes::Aes256>::new(key.into(), &iv.into())
                .decrypt_padded::<NoPadding>(&mut buf)
                .ok()?;
        }
        Some(buf)
    }

    fn cose_key(pk: &p256::PublicKey, alg: i64) -> Value {
        let sec1 = pk.to_sec1_bytes();
        Value::Map(vec![
            (1.into(), 2.into()),
            (3.into(), alg.into()),
            ((-1).into(), 1.into()),
            ((-2).into(), Value::Bytes(sec1[1..33].to_vec())),
            ((-3).into(), Value::Bytes(sec1[33..65].to_vec())),
        ])
    }

    fn parse_cose(v: &Value) -> Option<p256::PublicKey> {
        let m = v.as_map()?;
        let x = get(m, -2)?.as_bytes()?;
        let y = get(m, -3)?.as_bytes()?;
        let mut sec1 = vec![4u8];
        sec1.extend_from_slice(x);
        sec1.extend_from_slice(y);
        p256::PublicKey::from_sec1_bytes(&sec1).ok()
    }

    fn get(m: &[(Value, Value)], k: i64) -> Option<&Value> {
        m.iter()
            .find(|(key, _)| key.as_integer() == Some(k.into()))
            .map(|(_, v)| v)
    }

    fn get_text<'a>(m: &'a [(Value, Value)], k: &str) -> Option<&'a Value> {
        m.iter()
            .find(|(key, _)| key.as_text() == Some(k))
            .map(|(_, v)| v)
    }

    fn encode(v: &Value) -> Vec<u8> {
        let mut out = Vec::new();
        ciborium::into_writer(v, &mut out).unwrap();
        out
    }

    /// The authenticator's state, shared by its connections.
    pub struct State {
        /// Every credential id and CredRandom is derived from this
        /// (a stateless key, like most hardware keys).
        master: [u8; 32],
        pin: Option<String>,
        retries: u8,
        failures_since_power: u8,
        key_agreement: p256::SecretKey,
        pin_token: [u8; 32],
        counter: u32,
    }

    impl State {
        pub fn new(pin: Option<&str>) -> State {
            State {
                master: random(),
                pin: pin.map(str::to_string),
                retries: 8,
                failures_since_power: 0,
                key_agreement: p256::SecretKey::from_slice(&random::<32>()).unwrap(),
                pin_token: random(),
                counter: 0,
            }
        }

        fn shared_secret(&self, platform: &Value) -> Option<[u8; 32]> {
            let pk = parse_cose(platform)?;
            let z =
                p256::ecdh::diffie_hellman(self.key_agreement.to_nonzero_scalar(), pk.as_affine());
            Some(Sha256::digest(z.raw_secret_bytes()).into())
        }

        fn cred_id(&self, rp_hash: &[u8; 32]) -> Vec<u8> {
            let nonce: [u8; 16] = random();
            let tag = hmac(&self.master, &[b"cred", rp_hash, &nonce]);
            [&nonce[..], &tag[..16]].concat()
        }

        fn owns(&self, rp_hash: &[u8; 32], id: &[u8]) -> bool {
            id.len() == 32 && hmac(&self.master, &[b"cred", rp_hash, &id[..16]])[..16] == id[16..]
        }

        fn cred_key(&self, id: &[u8]) -> p256::SecretKey {
            p256::SecretKey::from_slice(&hmac(&self.master, &[b"key", id])).unwrap()
        }

        fn check_pin_auth(
            &self,
            m: &[(Value, Value)],
            pin_auth_key: i64,
            cdh: &[u8],
        ) -> Result<bool, u8> {
            match get(m, pin_auth_key).and_then(Value::as_bytes) {
                None => Ok(false),
                Some(auth) if auth[..] == hmac(&self.pin_token, &[cdh])[..16] => Ok(true),
                Some(_) => Err(ERR_PIN_AUTH_INVALID),
            }
        }

        pub fn handle(&mut self, touches: &AtomicU32, req: &[u8]) -> Vec<u8> {
            let Some((&cmd, body)) = req.split_first() else {
                return vec![ERR_INVALID_COMMAND];
            };
            let params = if body.is_empty() {
                Value::Map(Vec::new())
            } else {
                match ciborium::from_reader::<Value, _>(body) {
                    Ok(v) => v,
                    Err(_) => return vec![ERR_INVALID_CBOR],
                }
            };
            let Some(m) = params.as_map() else {
                return vec![ERR_INVALID_CBOR];
            };
            let reply = match cmd {
                0x01 => self.make_credential(touches, m),
                0x02 => self.get_assertion(touches, m),
                0x04 => Ok(self.get_info()),
                0x06 => self.client_pin(m),
                _ => Err(ERR_INVALID_COMMAND),
            };
            match reply {
                Ok(v) => [vec![OK], encode(&v)].concat(),
                Err(code) => vec![code],
            }
        }

        fn get_info(&self) -> Value {
            Value::Map(vec![
                (1.into(), Value::Array(vec!["FIDO_2_0".into()])),
                (2.into(), Value::Array(vec!["hmac-secret".into()])),
                (3.into(), Value::Bytes(AAGUID.to_vec())),
                (
                    4.into(),
                    Value::Map(vec![
                        ("rk".into(), false.into()),
                        ("up".into(), true.into()),
                        ("clientPin".into(), self.pin.is_some().into()),
                    ]),
                ),
                (5.into(), 1200.into()),
                (6.into(), Value::Array(vec![1.into()])),
            ])
        }

        fn client_pin(&mut self, m: &[(Value, Value)]) -> Result<Value, u8> {
            let sub = get(m, 2)
                .and_then(Value::as_integer)
                .ok_or(ERR_MISSING_PARAMETER)?;
            match i128::from(sub) {
                1 => Ok(Value::Map(vec![(3.into(), self.retries.into())])),
                2 => Ok(Value::Map(vec![(
                    1.into(),
                    cose_key(&self.key_agreement.public_key(), -25),
                )])),
                5 => {
                    let Some(pin) = self.pin.clone() else {
                        return Err(ERR_PIN_NOT_SET);
                    };
                    if self.retries == 0 {
                        return Err(ERR_PIN_BLOCKED);
                    }
                    if self.failures_since_power >= 3 {
                        return Err(ERR_PIN_AUTH_BLOCKED);
                    }
                    let shared = get(m, 3)
                        .and_then(|v| self.shared_secret(v))
                        .ok_or(ERR_MISSING_PARAMETER)?;
                    let enc = get(m, 6)
                        .and_then(Value::as_bytes)
                        .ok_or(ERR_MISSING_PARAMETER)?;
                    self.retries -= 1;
                    let given = cbc(&shared, enc, false).ok_or(ERR_PIN_INVALID)?;
                    if given[..] != Sha256::digest(pin.as_bytes())[..16] {
                        self.key_agreement = p256::SecretKey::from_slice(&random::<32>()).unwrap();
                        self.failures_since_power += 1;
                        return Err(if self.retries == 0 {
                            ERR_PIN_BLOCKED
                        } else if self.failures_since_power >= 3 {
                            ERR_PIN_AUTH_BLOCKED
                        } else {
                            ERR_PIN_INVALID
                        });
                    }
                    self.retries = 8;
                    self.failures_since_power = 0;
                    let token = cbc(&shared, &self.pin_token, true).unwrap();
                    Ok(Value::Map(vec![(2.into(), Value::Bytes(token))]))
                }
                _ => Err(ERR_INVALID_COMMAND),
            }
        }

        fn auth_data(
            &mut self,
            rp_hash: &[u8; 32],
            flags: u8,
            attested: &[u8],
            ext: Option<Value>,
        ) -> Vec<u8> {
            self.counter += 1;
            let mut ad = rp_hash.to_vec();
            ad.push(flags | if ext.is_some() { 0x80 } else { 0 });
            ad.extend_from_slice(&self.counter.to_be_bytes());
            ad.extend_from_slice(attested);
            if let Some(ext) = ext {
                ad.extend_from_slice(&encode(&ext));
            }
            ad
        }

        fn make_credential(
            &mut self,
            touches: &AtomicU32,
            m: &[(Value, Value)],
        ) -> Result<Value, u8> {
            let cdh = get(m, 1)
                .and_then(Value::as_bytes)
                .ok_or(ERR_MISSING_PARAMETER)?
                .clone();
            let rp = get(m, 2)
                .and_then(Value::as_map)
                .ok_or(ERR_MISSING_PARAMETER)?;
            let rp_id = get_text(rp, "id")
                .and_then(Value::as_text)
                .ok_or(ERR_MISSING_PARAMETER)?;
            let rp_hash: [u8; 32] = Sha256::digest(rp_id.as_bytes()).into();
            let uv = self.check_pin_auth(m, 8, &cdh)?;
            if self.pin.is_some() && !uv {
                return Err(ERR_PIN_REQUIRED);
            }
            let hmac_secret = get(m, 6)
                .and_then(Value::as_map)
                .and_then(|e| get_text(e, "hmac-secret"))
                .and_then(Value::as_bool)
                == Some(true);
            touches.fetch_add(1, Ordering::SeqCst);
            let id = self.cred_id(&rp_hash);
            let pk = self.cred_key(&id).public_key();
            let mut attested = AAGUID.to_vec();
            attested.extend_from_slice(&(id.len() as u16).to_be_bytes());
            attested.extend_from_slice(&id);
            attested.extend_from_slice(&encode(&cose_key(&pk, -7)));
            let ext = hmac_secret.then(|| Value::Map(vec![("hmac-secret".into(), true.into())]));
            let flags = 0x01 | 0x40 | if uv { 0x04 } else { 0 };
            let auth_data = self.auth_data(&rp_hash, flags, &attested, ext);
            Ok(Value::Map(vec![
                (1.into(), "none".into()),
                (2.into(), Value::Bytes(auth_data)),
                (3.into(), Value::Map(Vec::new())),
            ]))
        }

        fn get_assertion(
            &mut self,
            touches: &AtomicU32,
            m: &[(Value, Value)],
        ) -> Result<Value, u8> {
            let rp_id = get(m, 1)
                .and_then(Value::as_text)
                .ok_or(ERR_MISSING_PARAMETER)?;
            let rp_hash: [u8; 32] = Sha256::digest(rp_id.as_bytes()).into();
            let cdh = get(m, 2)
                .and_then(Value::as_bytes)
                .ok_or(ERR_MISSING_PARAMETER)?
                .clone();
            let allow = get(m, 3)
                .and_then(Value::as_array)
                .ok_or(ERR_NO_CREDENTIALS)?;
            let id = allow
                .iter()
                .filter_map(|c| {
                    c.as_map()
                        .and_then(|c| get_text(c, "id"))
                        .and_then(Value::as_bytes)
                })
                .find(|id| self.owns(&rp_hash, id))
                .ok_or(ERR_NO_CREDENTIALS)?
                .clone();
            let uv = self.check_pin_auth(m, 6, &cdh)?;
            let up = get(m, 5)
                .and_then(Value::as_map)
                .and_then(|o| get_text(o, "up"))
                .and_then(Value::as_bool)
                .unwrap_or(true);
            if up {
                touches.fetch_add(1, Ordering::SeqCst);
            }
            let ext = match get(m, 4)
                .and_then(Value::as_map)
                .and_then(|e| get_text(e, "hmac-secret"))
            {
                None => None,
                Some(hs) => {
                    let hs = hs.as_map().ok_or(ERR_INVALID_CBOR)?;
                    let shared = get(hs, 1)
                        .and_then(|v| self.shared_secret(v))
                        .ok_or(ERR_MISSING_PARAMETER)?;
                    let salt_enc = get(hs, 2)
                        .and_then(Value::as_bytes)
                        .ok_or(ERR_MISSING_PARAMETER)?;
                    let salt_auth = get(hs, 3)
                        .and_then(Value::as_bytes)
                        .ok_or(ERR_MISSING_PARAMETER)?;
                    if salt_auth[..] != hmac(&shared, &[salt_enc])[..16] {
                        return Err(ERR_PIN_AUTH_INVALID);
                    }
                    let salts = cbc(&shared, salt_enc, false).ok_or(ERR_INVALID_CBOR)?;
                    if salts.len() != 32 && salts.len() != 64 {
                        return Err(ERR_INVALID_CBOR);
                    }
                    let label: &[u8] = if uv {
                        b"CredRandomWithUV"
                    } else {
                        b"CredRandomWithoutUV"
                    };
                    let cred_random = hmac(&self.master, &[label, &id]);
                    let out: Vec<u8> = salts
                        .chunks(32)
                        .flat_map(|s| hmac(&cred_random, &[s]))
                        .collect();
                    let enc = cbc(&shared, &out, true).unwrap();
                    Some(Value::Map(vec![("hmac-secret".into(), Value::Bytes(enc))]))
                }
            };
            let flags = u8::from(up) | if uv { 0x04 } else { 0 };
            let auth_data = self.auth_data(&rp_hash, flags, &[], ext);
            let key = p256::ecdsa::SigningKey::from(self.cred_key(&id));
            let sig: p256::ecdsa::Signature = key.sign(&[&auth_data[..], &cdh[..]].concat());
            Ok(Value::Map(vec![
                (
                    1.into(),
                    Value::Map(vec![
                        ("id".into(), Value::Bytes(id)),
                        ("type".into(), "public-key".into()),
                    ]),
                ),
                (2.into(), Value::Bytes(auth_data)),
                (3.into(), Value::Bytes(sig.to_der().as_bytes().to_vec())),
            ]))
        }
    }

    /// Reads one CTAPHID message (after the report-ID byte libfido2 adds).
    fn read_message(s: &mut UnixStream) -> Option<([u8; 4], u8, Vec<u8>)> {
        let mut pkt = [0u8; REPORT + 1];
        s.read_exact(&mut pkt).ok()?;
        let pkt = &pkt[1..];
        let cid: [u8; 4] = pkt[..4].try_into().unwrap();
        if pkt[4] & 0x80 == 0 {
            return Some((cid, 0, Vec::new())); // a stray continuation: ignored
        }
        let cmd = pkt[4] & 0x7f;
        let len = usize::from(u16::from_be_bytes([pkt[5], pkt[6]]));
        let mut data = pkt[7..].to_vec();
        while data.len() < len {
            let mut cont = [0u8; REPORT + 1];
            s.read_exact(&mut cont).ok()?;
            data.extend_from_slice(&cont[6..]);
        }
        data.truncate(len);
        Some((cid, cmd, data))
    }

    fn write_message(s: &mut UnixStream, cid: [u8; 4], cmd: u8, data: &[u8]) -> Option<()> {
        let mut pkt = [0u8; REPORT];
        pkt[..4].copy_from_slice(&cid);
        pkt[4] = cmd | 0x80;
        pkt[5..7].copy_from_slice(&(data.len() as u16).to_be_bytes());
        let first = data.len().min(REPORT - 7);
        pkt[7..7 + first].copy_from_slice(&data[..first]);
        s.write_all(&pkt).ok()?;
        for (seq, chunk) in data[first..].chunks(REPORT - 5).enumerate() {
            let mut pkt = [0u8; REPORT];
            pkt[..4].copy_from_slice(&cid);
            pkt[4] = seq as u8;
            pkt[5..5 + chunk.len()].copy_from_slice(chunk);
            s.write_all(&pkt).ok()?;
        }
        Some(())
    }

    /// Serves one connection (one `fido_dev_open` .. `fido_dev_close`).
    pub fn serve(mut s: UnixStream, state: &Mutex<State>, touches: &AtomicU32) {
        let mut next_cid = 1u32;
        while let Some((cid, cmd, data)) = read_message(&mut s) {
            let reply = match cmd {
                0 | CTAPHID_CANCEL => continue,
                CTAPHID_INIT => {
                    let mut r = data.clone();
                    r.truncate(8);
                    r.extend_from_slice(&next_cid.to_be_bytes());
                    next_cid += 1;
                    r.extend_from_slice(&[2, 1, 0, 0, 0x04 | 0x08]); // protocol 2, v1.0.0, CBOR, no MSG
                    (CTAPHID_INIT, r)
                }
                CTAPHID_PING => (CTAPHID_PING, data),
                CTAPHID_CBOR => (CTAPHID_CBOR, state.lock().unwrap().handle(touches, &data)),
                _ => (CTAPHID_ERROR, vec![0x01]),
            };
            if write_message(&mut s, cid, reply.0, &reply.1).is_none() {
                return;
            }
        }
    }
}

/// A software FIDO2 key listening on a Unix socket in a private temp dir;
/// stopped (and the dir removed) on drop, panics included.
struct SoftKey {
    _dir: TempDir,
    socket: PathBuf,
    stop: Arc<AtomicBool>,
    touches: Arc<AtomicU32>,
    thread: Option<JoinHandle<()>>,
}

impl SoftKey {
    /// A key with `pin` set (or none).
    fn start(pin: Option<&str>) -> SoftKey {
        let dir = TempDir::new("fido2-softkey");
        let socket = dir.join("key.sock");
        let listener = UnixListener::bind(&socket).unwrap();
        let stop = Arc::new(AtomicBool::new(false));
        let touches = Arc::new(AtomicU32::new(0));
        let state = Arc::new(Mutex::new(soft::State::new(pin)));
        let thread = {
            let (stop, touches) = (stop.clone(), touches.clone());
            std::thread::spawn(move || {
                for conn in listener.incoming() {
                    if stop.load(Ordering::SeqCst) {
                        break;
                    }
                    if let Ok(conn) = conn {
                        soft::serve(conn, &state, &touches);
                    }
                }
            })
        };
        SoftKey {
            _dir: dir,
            socket,
            stop,
            touches,
            thread: Some(thread),
        }
    }

    /// The device option that reaches it.
    fn device(&self) -> PathBuf {
        PathBuf::from(format!("unix:{}", self.socket.display()))
    }

    fn seal_options(&self) -> SealOptions {
        SealOptions {
            device: Some(self.device()),
        }
    }

    fn unseal_options(&self) -> UnsealOptions {
        UnsealOptions {
            device: Some(self.device()),
        }
    }

    fn touches(&self) -> u32 {
        self.touches.load(Ordering::SeqCst)
    }
}

impl Drop for SoftKey {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        let _ = UnixStream::connect(&self.socket); // wakes `accept`
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// Answers PIN prompts from a queue and records notices.
#[derive(Default)]
struct Ui {
    pins: VecDeque<&'static str>,
    asked: Vec<String>,
    notices: Vec<String>,
}

impl Ui {
    fn with_pins(pins: &[&'static str]) -> Ui {
        Ui {
            pins: pins.iter().copied().collect(),
            ..Ui::default()
        }
    }
}

impl Interaction for Ui {
    fn pin(&mut self, what: &str, _confirm: bool) -> Result<Zeroizing<String>, Error> {
        self.asked.push(what.to_string());
        self.pins
            .pop_front()
            .map(|p| Zeroizing::new(p.to_string()))
            .ok_or_else(|| Error::Io("no PIN left in the test".into()))
    }

    fn notice(&mut self, message: &str) {
        self.notices.push(message.to_string());
    }
}

fn libfido2_missing() -> bool {
    let missing = !std::path::Path::new("/usr/lib/x86_64-linux-gnu/libfido2.so.1").exists()
        && !std::path::Path::new("/usr/lib/libfido2.so.1").exists()
        && !std::path::Path::new("/usr/lib64/libfido2.so.1").exists();
    if missing {
        test_support::skip::skip(
            "fido2",
            "libfido2.so.1 is not installed (apt install libfido2-1)",
        );
    }
    missing
}

fn secret() -> Secret {
    Secret::random().unwrap()
}

#[test]
fn round_trip_without_pin() {
    if libfido2_missing() {
        return;
    }
    let key = SoftKey::start(None);
    let s = secret();
    let mut ui = Ui::default();
    let sealed = fido2::seal(&key.seal_options(), &s, &mut ui).unwrap();
    assert!(!sealed.pin);
    assert!(ui.asked.is_empty(), "no PIN is asked of a key without one");
    assert_eq!(
        key.touches(),
        2,
        "makeCredential and getAssertion each want a touch"
    );
    assert_eq!(
        ui.notices.len(),
        2,
        "each touch is announced: {:?}",
        ui.notices
    );
    assert_eq!(sealed.salt.len(), 64);
    assert_eq!(sealed.nonce.len(), 48);
    assert_eq!(sealed.wrapped.len(), 96);
    // Nothing secret in the record: the secret's hex appears nowhere.
    let json = fscrypt_seal::Sealed::Fido2(sealed.clone())
        .to_json()
        .to_string();
    assert!(!json.contains(&hex::encode(s.as_bytes())));

    let mut ui = Ui::default();
    let t = Instant::now();
    let back = fido2::unseal(&sealed, &key.unseal_options(), &mut ui).unwrap();
    eprintln!(
        "fido2 unseal against the software key over libfido2: {:?}",
        t.elapsed()
    );
    assert_eq!(back.as_bytes(), s.as_bytes());
    assert_eq!(key.touches(), 3);
    assert_eq!(ui.notices.len(), 1);

    // Through the crate's dispatch and the JSON form too.
    let record =
        fscrypt_seal::Sealed::from_json(&fscrypt_seal::Sealed::Fido2(sealed).to_json()).unwrap();
    let opts = fscrypt_seal::UnsealOptions {
        fido2: key.unseal_options(),
        ..Default::default()
    };
    let back = fscrypt_seal::unseal(&record, &opts, &mut Ui::default()).unwrap();
    assert_eq!(back.as_bytes(), s.as_bytes());
    let d = record.describe();
    assert_eq!(d[0].0, "device");
    assert_eq!(d[1].0, "credential");
    assert_eq!(d[1].1.len(), 8);
}

#[test]
fn round_trip_with_pin() {
    if libfido2_missing() {
        return;
    }
    let key = SoftKey::start(Some("4321"));
    let s = secret();
    let mut ui = Ui::with_pins(&["4321"]);
    let sealed = fido2::seal(&key.seal_options(), &s, &mut ui).unwrap();
    assert!(sealed.pin, "the PIN was used, so the record says so");
    assert_eq!(ui.asked.len(), 1, "one PIN prompt for sealing");
    let mut ui = Ui::with_pins(&["4321"]);
    let back = fido2::unseal(&sealed, &key.unseal_options(), &mut ui).unwrap();
    assert_eq!(back.as_bytes(), s.as_bytes());
    assert_eq!(ui.asked.len(), 1);
}

#[test]
fn wrong_pin_is_refused_with_tries_left() {
    if libfido2_missing() {
        return;
    }
    let key = SoftKey::start(Some("4321"));
    let s = secret();
    let sealed = fido2::seal(&key.seal_options(), &s, &mut Ui::with_pins(&["4321"])).unwrap();
    let err = fido2::unseal(
        &sealed,
        &key.unseal_options(),
        &mut Ui::with_pins(&["0000"]),
    )
    .unwrap_err();
    assert!(err.is_wrong_secret(), "{err:?}");
    assert!(err.to_string().contains("7 tries left"), "{err}");
    assert!(!err.to_string().contains("0000"));
    // The right PIN still opens it (and resets the count).
    let back = fido2::unseal(
        &sealed,
        &key.unseal_options(),
        &mut Ui::with_pins(&["4321"]),
    )
    .unwrap();
    assert_eq!(back.as_bytes(), s.as_bytes());
}

#[test]
fn wrong_pin_when_sealing_is_refused() {
    if libfido2_missing() {
        return;
    }
    let key = SoftKey::start(Some("4321"));
    let err = fido2::seal(
        &key.seal_options(),
        &secret(),
        &mut Ui::with_pins(&["1111"]),
    )
    .unwrap_err();
    assert!(err.is_wrong_secret(), "{err:?}");
}

#[test]
fn another_authenticator_is_refused() {
    if libfido2_missing() {
        return;
    }
    let (a, b) = (SoftKey::start(None), SoftKey::start(None));
    let sealed = fido2::seal(&a.seal_options(), &secret(), &mut Ui::default()).unwrap();
    let err = fido2::unseal(&sealed, &b.unseal_options(), &mut Ui::default()).unwrap_err();
    assert!(err.is_wrong_secret(), "{err:?}");
    assert!(err.to_string().contains("does not hold"), "{err}");
}

#[test]
fn two_protectors_on_two_authenticators_each_open_their_own() {
    if libfido2_missing() {
        return;
    }
    let (a, b) = (SoftKey::start(None), SoftKey::start(Some("2468")));
    let s = secret();
    let on_a = fido2::seal(&a.seal_options(), &s, &mut Ui::default()).unwrap();
    let on_b = fido2::seal(&b.seal_options(), &s, &mut Ui::with_pins(&["2468"])).unwrap();
    assert_ne!(on_a.credential_id, on_b.credential_id);
    let back_a = fido2::unseal(&on_a, &a.unseal_options(), &mut Ui::default()).unwrap();
    let back_b = fido2::unseal(&on_b, &b.unseal_options(), &mut Ui::with_pins(&["2468"])).unwrap();
    assert_eq!(back_a.as_bytes(), s.as_bytes());
    assert_eq!(back_b.as_bytes(), s.as_bytes());
    let err = fido2::unseal(&on_b, &a.unseal_options(), &mut Ui::default()).unwrap_err();
    assert!(err.is_wrong_secret(), "{err:?}");
}

#[test]
fn altered_record_is_refused() {
    if libfido2_missing() {
        return;
    }
    let key = SoftKey::start(None);
    let sealed = fido2::seal(&key.seal_options(), &secret(), &mut Ui::default()).unwrap();
    // Another salt: the key answers, but with another output.
    let mut other_salt = sealed.clone();
    other_salt.salt = hex::encode([7u8; 32]);
    let err = fido2::unseal(&other_salt, &key.unseal_options(), &mut Ui::default()).unwrap_err();
    assert!(err.is_wrong_secret(), "{err:?}");
    // A flipped ciphertext bit.
    let mut flipped = sealed.clone();
    let mut w = hex::decode(&flipped.wrapped).unwrap();
    w[0] ^= 1;
    flipped.wrapped = hex::encode(w);
    let err = fido2::unseal(&flipped, &key.unseal_options(), &mut Ui::default()).unwrap_err();
    assert!(err.is_wrong_secret(), "{err:?}");
}

#[test]
fn malformed_records_are_invalid() {
    // No device is reached: the record is checked first.
    let good = fido2::Sealed {
        rp_id: "fscrypt-rs".into(),
        credential_id: "00".repeat(32),
        salt: "11".repeat(32),
        pin: false,
        device: "x".into(),
        nonce: "22".repeat(24),
        wrapped: "33".repeat(48),
    };
    let cases: Vec<(&str, fido2::Sealed)> = vec![
        (
            "salt not hex",
            fido2::Sealed {
                salt: "zz".repeat(32),
                ..good.clone()
            },
        ),
        (
            "short salt",
            fido2::Sealed {
                salt: "11".repeat(31),
                ..good.clone()
            },
        ),
        (
            "long nonce",
            fido2::Sealed {
                nonce: "22".repeat(25),
                ..good.clone()
            },
        ),
        (
            "short wrapped",
            fido2::Sealed {
                wrapped: "33".repeat(32),
                ..good.clone()
            },
        ),
        (
            "empty credential",
            fido2::Sealed {
                credential_id: String::new(),
                ..good.clone()
            },
        ),
        (
            "huge credential",
            fido2::Sealed {
                credential_id: "00".repeat(2000),
                ..good.clone()
            },
        ),
        (
            "odd hex",
            fido2::Sealed {
                credential_id: "abc".into(),
                ..good.clone()
            },
        ),
        (
            "empty rp",
            fido2::Sealed {
                rp_id: String::new(),
                ..good.clone()
            },
        ),
        (
            "NUL in rp",
            fido2::Sealed {
                rp_id: "a\0b".into(),
                ..good.clone()
            },
        ),
    ];
    let opts = UnsealOptions {
        device: Some("unix:/nonexistent/fscrypt-rs-test.sock".into()),
    };
    for (what, rec) in cases {
        let err = fido2::unseal(&rec, &opts, &mut Ui::default()).unwrap_err();
        assert!(matches!(err, Error::Invalid(_)), "{what}: {err:?}");
    }
    // Unknown or missing fields in the stored JSON.
    let mut json = fscrypt_seal::Sealed::Fido2(good.clone()).to_json();
    json["extra"] = serde_json_value("1");
    assert!(matches!(
        fscrypt_seal::Sealed::from_json(&json),
        Err(Error::Invalid(_))
    ));
    let mut json = fscrypt_seal::Sealed::Fido2(good).to_json();
    json.as_object_mut().unwrap().remove("salt");
    assert!(matches!(
        fscrypt_seal::Sealed::from_json(&json),
        Err(Error::Invalid(_))
    ));
}

fn serde_json_value(s: &str) -> serde_json::Value {
    serde_json::from_str(s).unwrap()
}

#[test]
fn unreachable_device_is_a_device_error() {
    if libfido2_missing() {
        return;
    }
    let dir = TempDir::new("fido2-nokey");
    let opts = SealOptions {
        device: Some(format!("unix:{}", dir.join("none.sock").display()).into()),
    };
    let err = fido2::seal(&opts, &secret(), &mut Ui::default()).unwrap_err();
    assert!(matches!(err, Error::Device(_)), "{err:?}");
}

/// A round trip with a real key named by `FSCRYPT_RS_FIDO2_DEVICE`.
#[test]
fn real_key_round_trip() {
    let Some(dev) = std::env::var_os("FSCRYPT_RS_FIDO2_DEVICE") else {
        test_support::skip::skip(
            "real_key_round_trip",
            "set FSCRYPT_RS_FIDO2_DEVICE=/dev/hidrawN to use a real key",
        );
        return;
    };
    if libfido2_missing() {
        return;
    }
    struct RealUi(Option<Zeroizing<String>>);
    impl Interaction for RealUi {
        fn pin(&mut self, _what: &str, _confirm: bool) -> Result<Zeroizing<String>, Error> {
            self.0
                .clone()
                .ok_or_else(|| Error::Io("the key has a PIN: set FSCRYPT_RS_FIDO2_PIN_FILE".into()))
        }
        fn notice(&mut self, message: &str) {
            eprintln!("{message}");
        }
    }
    let pin = std::env::var_os("FSCRYPT_RS_FIDO2_PIN_FILE")
        .map(|f| Zeroizing::new(std::fs::read_to_string(f).unwrap().trim_end().to_string()));
    let mut ui = RealUi(pin);
    let s = secret();
    let sealed = fido2::seal(
        &SealOptions {
            device: Some(dev.clone().into()),
        },
        &s,
        &mut ui,
    )
    .unwrap();
    let t = Instant::now();
    let back = fido2::unseal(
        &sealed,
        &UnsealOptions {
            device: Some(dev.into()),
        },
        &mut ui,
    )
    .unwrap();
    eprintln!(
        "fido2 unseal with the real key (touch included): {:?}",
        t.elapsed()
    );
    assert_eq!(back.as_bytes(), s.as_bytes());
}

#[test]
fn three_wrong_pins_lock_until_replugged() {
    if libfido2_missing() {
        return;
    }
    let key = SoftKey::start(Some("4321"));
    let sealed = fido2::seal(
        &key.seal_options(),
        &secret(),
        &mut Ui::with_pins(&["4321"]),
    )
    .unwrap();
    for _ in 0..2 {
        let err = fido2::unseal(
            &sealed,
            &key.unseal_options(),
            &mut Ui::with_pins(&["0000"]),
        )
        .unwrap_err();
        assert!(err.is_wrong_secret(), "{err:?}");
    }
    let err = fido2::unseal(
        &sealed,
        &key.unseal_options(),
        &mut Ui::with_pins(&["0000"]),
    )
    .unwrap_err();
    assert!(matches!(err, Error::Device(_)), "{err:?}");
    assert!(err.to_string().contains("unplug"), "{err}");
    // Even the right PIN is refused until then.
    let err = fido2::unseal(
        &sealed,
        &key.unseal_options(),
        &mut Ui::with_pins(&["4321"]),
    )
    .unwrap_err();
    assert!(matches!(err, Error::Device(_)), "{err:?}");
}

#[test]
fn a_pin_protector_on_a_key_without_pin_is_refused() {
    if libfido2_missing() {
        return;
    }
    let (with_pin, without) = (SoftKey::start(Some("4321")), SoftKey::start(None));
    let sealed = fido2::seal(
        &with_pin.seal_options(),
        &secret(),
        &mut Ui::with_pins(&["4321"]),
    )
    .unwrap();
    let mut ui = Ui::default();
    let err = fido2::unseal(&sealed, &without.unseal_options(), &mut ui).unwrap_err();
    assert!(err.is_wrong_secret(), "{err:?}");
    assert!(
        ui.asked.is_empty(),
        "no PIN is asked of a key that has none"
    );
}
