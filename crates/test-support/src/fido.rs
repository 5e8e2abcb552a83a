//! A software FIDO2 authenticator for tests (feature `fido`): a CTAP 2.0
//! key ([`SoftKey`]) listening on a Unix socket, which the fido2
//! protector reaches through libfido2 with the test-only device
//! `unix:<socket>` (CI has no `/dev/uhid` for a virtual HID key).
//!
//! No maintained Rust authenticator speaks CTAP2 `hmac-secret` with the
//! `clientPIN` key agreement (1Password's `passkey-authenticator` only has
//! the PRF form, without PIN protocol), so it is written here. It
//! implements exactly what libfido2 sends: CTAPHID INIT/CBOR/PING framing,
//! authenticatorGetInfo, authenticatorClientPIN (getRetries,
//! getKeyAgreement, getPINToken, PIN protocol 1),
//! authenticatorMakeCredential and authenticatorGetAssertion with
//! `hmac-secret` (CTAP 2.1 §12.5: two CredRandoms, with and without UV);
//! crypto from RustCrypto. Every operation that needs user presence is
//! "touched" at once and counted.

use std::io::{Read, Write};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

use crate::TempDir;

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

/// A software FIDO2 key listening on a Unix socket in a private temp dir
/// (reached with the device `unix:<socket>`, see [`SoftKey::device`]);
/// stopped (and the dir removed) on drop, panics included.
pub struct SoftKey {
    _dir: TempDir,
    socket: PathBuf,
    stop: Arc<AtomicBool>,
    touches: Arc<AtomicU32>,
    thread: Option<JoinHandle<()>>,
}

impl SoftKey {
    /// A key with `pin` set (or none).
    pub fn start(pin: Option<&str>) -> SoftKey {
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
    pub fn device(&self) -> PathBuf {
        PathBuf::from(format!("unix:{}", self.socket.display()))
    }

    /// How many times a user touch was given (each operation needing
    /// presence counts one).
    pub fn touches(&self) -> u32 {
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
