//! The one FFI module: AES-256-XTS and AES-CBC (for our CS3 stealing) from
//! aws-lc through `aws-lc-sys`.
//!
//! Why raw FFI: aws-lc-rs does not expose XTS or raw CBC blocks, and
//! `EVP_aes_256_xts` is the fastest AES-XTS available to us (VAES-AVX512
//! assembly). Every `unsafe` block has a `// SAFETY:` comment; the safe types
//! below own every aws-lc object they create and free it on drop.

#![allow(unsafe_code)]

use core::ffi::{c_int, c_uint};
use core::ptr;
use std::sync::{Mutex, MutexGuard};

use aws_lc_sys as sys;
use zeroize::Zeroize;

use crate::cts::iv16;
use crate::{CipherKey, Error};

/// Contexts per XTS key: en/decryption calls on the same key from different
/// threads each take a free context instead of waiting for one.
const POOL: usize = 4;

/// An owned `EVP_CIPHER_CTX` keyed for AES-256-XTS in one direction.
struct Ctx(*mut sys::EVP_CIPHER_CTX);

// SAFETY: an EVP_CIPHER_CTX has no thread affinity; we only ever use it
// through `&mut` (behind a Mutex), so moving it between threads is sound.
unsafe impl Send for Ctx {}

impl Ctx {
    fn new(name: &'static str, key: &[u8; 64], encrypt: bool) -> Result<Ctx, Error> {
        // SAFETY: EVP_CIPHER_CTX_new has no preconditions; it returns NULL on
        // allocation failure, which we check.
        let raw = unsafe { sys::EVP_CIPHER_CTX_new() };
        if raw.is_null() {
            return Err(Error::Backend {
                implementation: name,
                call: "EVP_CIPHER_CTX_new",
            });
        }
        let ctx = Ctx(raw);
        // SAFETY: `ctx.0` is a valid, freshly allocated context; the cipher
        // is a static aws-lc object; `key` points to 64 readable bytes, the
        // key length of EVP_aes_256_xts; the IV is NULL (set per call).
        let ok = unsafe {
            sys::EVP_CipherInit_ex(
                ctx.0,
                sys::EVP_aes_256_xts(),
                ptr::null_mut(),
                key.as_ptr(),
                ptr::null(),
                c_int::from(encrypt),
            )
        };
        if ok != 1 {
            return Err(Error::Backend {
                implementation: name,
                call: "EVP_CipherInit_ex",
            });
        }
        Ok(ctx)
    }

    /// Sets the tweak and processes `data` in place.
    fn run(&mut self, name: &'static str, iv: &[u8; 16], data: &mut [u8]) -> Result<(), Error> {
        let len = c_int::try_from(data.len()).map_err(|_| Error::MessageTooLong {
            algorithm: name,
            max: c_int::MAX as usize,
            actual: data.len(),
        })?;
        // SAFETY: `self.0` is a keyed context we own exclusively (&mut self);
        // NULL cipher/key keep the existing ones; `iv` points to 16 bytes, the
        // XTS IV length; enc = -1 keeps the direction.
        let ok = unsafe {
            sys::EVP_CipherInit_ex(
                self.0,
                ptr::null(),
                ptr::null_mut(),
                ptr::null(),
                iv.as_ptr(),
                -1,
            )
        };
        if ok != 1 {
            return Err(Error::Backend {
                implementation: name,
                call: "EVP_CipherInit_ex",
            });
        }
        let mut out_len: c_int = 0;
        // SAFETY: in and out are the same valid buffer of `len` bytes (aws-lc
        // supports exact in-place operation); `out_len` is a valid c_int.
        let ok = unsafe {
            sys::EVP_CipherUpdate(self.0, data.as_mut_ptr(), &mut out_len, data.as_ptr(), len)
        };
        if ok != 1 || out_len != len {
            return Err(Error::Backend {
                implementation: name,
                call: "EVP_CipherUpdate",
            });
        }
        Ok(())
    }
}

impl Drop for Ctx {
    fn drop(&mut self) {
        // SAFETY: `self.0` was returned by EVP_CIPHER_CTX_new and is freed
        // exactly once here; aws-lc cleanses the key schedule on free.
        unsafe { sys::EVP_CIPHER_CTX_free(self.0) }
    }
}

/// AES-256-XTS through aws-lc `EVP_aes_256_xts` (implementation
/// `xts-aes-256-awslc`). Holds [`POOL`] encryption and decryption contexts.
pub(crate) struct AwsLcXts {
    enc: [Mutex<Ctx>; POOL],
    dec: [Mutex<Ctx>; POOL],
}

/// Implementation name of [`AwsLcXts`].
pub(crate) const XTS_NAME: &str = "xts-aes-256-awslc";

fn lock(pool: &[Mutex<Ctx>; POOL]) -> MutexGuard<'_, Ctx> {
    for m in pool {
        if let Ok(g) = m.try_lock() {
            return g;
        }
    }
    // All busy: wait on the first one. A poisoned lock only means another
    // thread panicked between two aws-lc calls; the context stays valid.
    pool[0].lock().unwrap_or_else(|e| e.into_inner())
}

impl AwsLcXts {
    /// Keys [`POOL`] contexts per direction with the 64-byte key.
    pub(crate) fn new(key: &[u8]) -> Result<Self, Error> {
        let key: &[u8; 64] = key.try_into().map_err(|_| Error::InvalidKeyLength {
            algorithm: XTS_NAME,
            expected: 64,
            actual: key.len(),
        })?;
        let mk = |encrypt| -> Result<[Mutex<Ctx>; POOL], Error> {
            Ok([
                Mutex::new(Ctx::new(XTS_NAME, key, encrypt)?),
                Mutex::new(Ctx::new(XTS_NAME, key, encrypt)?),
                Mutex::new(Ctx::new(XTS_NAME, key, encrypt)?),
                Mutex::new(Ctx::new(XTS_NAME, key, encrypt)?),
            ])
        };
        Ok(AwsLcXts {
            enc: mk(true)?,
            dec: mk(false)?,
        })
    }

    fn crypt(&self, iv: &[u8], data: &mut [u8], encrypt: bool) -> Result<(), Error> {
        let iv: &[u8; 16] = iv.try_into().map_err(|_| Error::InvalidIvLength {
            algorithm: XTS_NAME,
            expected: 16,
            actual: iv.len(),
        })?;
        if data.len() < 16 {
            return Err(Error::MessageTooShort {
                algorithm: XTS_NAME,
                min: 16,
                actual: data.len(),
            });
        }
        let pool = if encrypt { &self.enc } else { &self.dec };
        lock(pool).run(XTS_NAME, iv, data)
    }
}

impl CipherKey for AwsLcXts {
    fn encrypt(&self, iv: &[u8], data: &mut [u8]) -> Result<(), Error> {
        self.crypt(iv, data, true)
    }
    fn decrypt(&self, iv: &[u8], data: &mut [u8]) -> Result<(), Error> {
        self.crypt(iv, data, false)
    }
}

/// An aws-lc `AES_KEY` schedule (plain data: round keys and round count).
struct AesKey(sys::AES_KEY);

impl AesKey {
    fn new(name: &'static str, key: &[u8], encrypt: bool) -> Result<AesKey, Error> {
        let mut k = AesKey(sys::AES_KEY {
            rd_key: [0; 60],
            rounds: 0,
        });
        let bits = c_uint::try_from(key.len() * 8).unwrap_or(0);
        // SAFETY: `key` points to key.len() readable bytes and `bits` is
        // key.len() * 8; `k.0` is a valid, writable AES_KEY.
        let rc = unsafe {
            if encrypt {
                sys::AES_set_encrypt_key(key.as_ptr(), bits, &mut k.0)
            } else {
                sys::AES_set_decrypt_key(key.as_ptr(), bits, &mut k.0)
            }
        };
        if rc != 0 {
            return Err(Error::InvalidKeyLength {
                algorithm: name,
                expected: 32,
                actual: key.len(),
            });
        }
        Ok(k)
    }
}

impl Drop for AesKey {
    fn drop(&mut self) {
        self.0.rd_key.zeroize();
    }
}

/// AES-CBC-CTS (CS3, spec §2.2): aws-lc `AES_cbc_encrypt` for the CBC part
/// and single `AES_encrypt`/`AES_decrypt` calls for our stealing step.
pub(crate) struct AwsLcCbcCts {
    enc: AesKey,
    dec: AesKey,
    name: &'static str,
}

impl AwsLcCbcCts {
    /// Expands the encryption and decryption schedules (16- or 32-byte key).
    pub(crate) fn new(name: &'static str, key: &[u8], key_size: usize) -> Result<Self, Error> {
        if key.len() != key_size {
            return Err(Error::InvalidKeyLength {
                algorithm: name,
                expected: key_size,
                actual: key.len(),
            });
        }
        Ok(AwsLcCbcCts {
            enc: AesKey::new(name, key, true)?,
            dec: AesKey::new(name, key, false)?,
            name,
        })
    }

    fn check(&self, iv: &[u8], data: &[u8]) -> Result<[u8; 16], Error> {
        let iv = iv16(self.name, iv)?.to_le_bytes();
        if data.len() < 16 {
            return Err(Error::MessageTooShort {
                algorithm: self.name,
                min: 16,
                actual: data.len(),
            });
        }
        Ok(iv)
    }

    /// CBC over whole blocks in place; `ivec` is updated to the next chaining value.
    fn cbc(&self, data: &mut [u8], ivec: &mut [u8; 16], encrypt: bool) {
        debug_assert!(data.len().is_multiple_of(16));
        if data.len() <= 64 {
            // Up to four blocks (most filenames): single AES calls are cheaper
            // than entering the CBC routine, and the decryptions are
            // independent so the CPU overlaps them.
            for chunk in data.chunks_exact_mut(16) {
                let Ok(b) = <&mut [u8; 16]>::try_from(chunk) else {
                    continue; // unreachable: chunks_exact(16)
                };
                if encrypt {
                    for (a, v) in b.iter_mut().zip(ivec.iter()) {
                        *a ^= v;
                    }
                    self.block(b, true);
                    *ivec = *b;
                } else {
                    let ct = *b;
                    self.block(b, false);
                    for (a, v) in b.iter_mut().zip(ivec.iter()) {
                        *a ^= v;
                    }
                    *ivec = ct;
                }
            }
            return;
        }
        let key = if encrypt { &self.enc.0 } else { &self.dec.0 };
        // SAFETY: in and out are the same valid buffer of data.len() bytes, a
        // multiple of 16 (aws-lc supports in-place CBC); `key` is an expanded
        // schedule for this direction; `ivec` is 16 writable bytes.
        unsafe {
            sys::AES_cbc_encrypt(
                data.as_ptr(),
                data.as_mut_ptr(),
                data.len(),
                key,
                ivec.as_mut_ptr(),
                c_int::from(encrypt),
            )
        }
    }

    fn block(&self, b: &mut [u8; 16], encrypt: bool) {
        let inp = *b;
        // SAFETY: `inp` and `b` are 16-byte buffers; the key is an expanded
        // schedule for the requested direction.
        unsafe {
            if encrypt {
                sys::AES_encrypt(inp.as_ptr(), b.as_mut_ptr(), &self.enc.0)
            } else {
                sys::AES_decrypt(inp.as_ptr(), b.as_mut_ptr(), &self.dec.0)
            }
        }
    }
}

impl CipherKey for AwsLcCbcCts {
    fn encrypt(&self, iv: &[u8], data: &mut [u8]) -> Result<(), Error> {
        let mut ivec = self.check(iv, data)?;
        let n = data.len();
        if n == 16 {
            self.cbc(data, &mut ivec, true);
            return Ok(());
        }
        if n.is_multiple_of(16) {
            // Whole blocks (every padded filename): CS3 is plain CBC with the
            // last two ciphertext blocks swapped.
            self.cbc(data, &mut ivec, true);
            swap_last_two_blocks(data);
            return Ok(());
        }
        let m = n.div_ceil(16);
        let d = n - 16 * (m - 1);
        let (head, last) = data.split_at_mut(16 * (m - 1));
        self.cbc(head, &mut ivec, true); // ivec = C_{m-1}
        let mut x = ivec;
        for (a, b) in x.iter_mut().zip(last.iter()) {
            *a ^= b;
        }
        self.block(&mut x, true);
        last.copy_from_slice(&ivec[..d]);
        let pen = head.len() - 16;
        head[pen..].copy_from_slice(&x);
        Ok(())
    }

    fn decrypt(&self, iv: &[u8], data: &mut [u8]) -> Result<(), Error> {
        let mut ivec = self.check(iv, data)?;
        let n = data.len();
        if n == 16 {
            self.cbc(data, &mut ivec, false);
            return Ok(());
        }
        if n.is_multiple_of(16) {
            // Undo the swap, then plain CBC: both last blocks decrypt in parallel.
            swap_last_two_blocks(data);
            self.cbc(data, &mut ivec, false);
            return Ok(());
        }
        let m = n.div_ceil(16);
        let d = n - 16 * (m - 1);
        let (head, last) = data.split_at_mut(16 * (m - 1));
        let pen = head.len() - 16;
        let mut dd = [0u8; 16];
        dd.copy_from_slice(&head[pen..]);
        self.block(&mut dd, false);
        let mut c_prev = dd;
        c_prev[..d].copy_from_slice(last);
        for (l, (a, b)) in last.iter_mut().zip(dd.iter().zip(c_prev.iter())) {
            *l = a ^ b;
        }
        head[pen..].copy_from_slice(&c_prev);
        self.cbc(head, &mut ivec, false);
        Ok(())
    }
}

/// Swaps the last two 16-byte blocks of a buffer of ≥ 32 bytes whose length
/// is a multiple of 16 (CS3 with no partial block, spec §2.2).
fn swap_last_two_blocks(data: &mut [u8]) {
    let n = data.len();
    if n >= 32 {
        let (a, b) = data[n - 32..].split_at_mut(16);
        a.swap_with_slice(b);
    }
}

/// One raw `EVP_aes_256_xts` encryption context, for benchmarks that compare
/// our API against a direct aws-lc call (no pool, no checks beyond lengths).
#[doc(hidden)]
pub struct RawAwsLcXts(Ctx);

impl RawAwsLcXts {
    /// Keys an encryption context with a 64-byte key.
    ///
    /// # Errors
    /// [`Error::Backend`] if aws-lc refuses the key (e.g. equal halves).
    pub fn new(key: &[u8; 64]) -> Result<Self, Error> {
        Ok(RawAwsLcXts(Ctx::new("raw-evp-aes-256-xts", key, true)?))
    }

    /// Encrypts `data` in place with tweak `iv`.
    ///
    /// # Errors
    /// [`Error::Backend`] or [`Error::MessageTooLong`] from aws-lc.
    pub fn encrypt(&mut self, iv: &[u8; 16], data: &mut [u8]) -> Result<(), Error> {
        self.0.run("raw-evp-aes-256-xts", iv, data)
    }
}
