//! The part of libfido2's C API (`<fido.h>`, libfido2 1.x, stable ABI
//! `libfido2.so.1`) this module uses, loaded at run time with `dlopen`:
//! building needs no libfido2 headers, and a system without libfido2 only
//! loses FIDO2 protectors ([`lib`] says how to install it).
//!
//! [`Dev`], [`Cred`], [`Assert`] and [`DevList`] own the C objects and
//! free them on drop.

#![allow(unsafe_code)]

use std::ffi::{CStr, CString, c_char, c_int, c_void};
use std::sync::OnceLock;

use crate::Error;

/// `FIDO_OK`.
pub const FIDO_OK: c_int = 0x00;
/// `FIDO_ERR_NO_CREDENTIALS`: the authenticator holds none of the allowed credentials.
pub const FIDO_ERR_NO_CREDENTIALS: c_int = 0x2e;
/// `FIDO_ERR_USER_ACTION_TIMEOUT`: nobody touched the key in time.
pub const FIDO_ERR_USER_ACTION_TIMEOUT: c_int = 0x2f;
/// `FIDO_ERR_ACTION_TIMEOUT`: as above (CTAP 2.1 name).
pub const FIDO_ERR_ACTION_TIMEOUT: c_int = 0x3a;
/// `FIDO_ERR_OPERATION_DENIED`: the user refused.
pub const FIDO_ERR_OPERATION_DENIED: c_int = 0x27;
/// `FIDO_ERR_PIN_INVALID`: wrong PIN, tries left.
pub const FIDO_ERR_PIN_INVALID: c_int = 0x31;
/// `FIDO_ERR_PIN_BLOCKED`: no PIN tries left (the key must be reset).
pub const FIDO_ERR_PIN_BLOCKED: c_int = 0x32;
/// `FIDO_ERR_PIN_AUTH_INVALID`: the PIN token did not authenticate the request.
pub const FIDO_ERR_PIN_AUTH_INVALID: c_int = 0x33;
/// `FIDO_ERR_PIN_AUTH_BLOCKED`: three wrong PINs in a row; replug the key.
pub const FIDO_ERR_PIN_AUTH_BLOCKED: c_int = 0x34;
/// `FIDO_ERR_PIN_NOT_SET`.
pub const FIDO_ERR_PIN_NOT_SET: c_int = 0x35;
/// `FIDO_ERR_PIN_REQUIRED`: the request needed a PIN.
pub const FIDO_ERR_PIN_REQUIRED: c_int = 0x36;
/// `FIDO_ERR_UNSUPPORTED_OPTION`.
pub const FIDO_ERR_UNSUPPORTED_OPTION: c_int = 0x2b;
/// `FIDO_ERR_UNSUPPORTED_EXTENSION`.
pub const FIDO_ERR_UNSUPPORTED_EXTENSION: c_int = 0x16;

/// `COSE_ES256`: ECDSA P-256 with SHA-256, the one algorithm every FIDO2 key has.
const COSE_ES256: c_int = -7;
/// `FIDO_EXT_HMAC_SECRET`.
const FIDO_EXT_HMAC_SECRET: c_int = 0x01;
/// `FIDO_OPT_OMIT`, `FIDO_OPT_FALSE`, `FIDO_OPT_TRUE` (`fido_opt_t`).
pub const FIDO_OPT_OMIT: c_int = 0;
/// See [`FIDO_OPT_OMIT`].
pub const FIDO_OPT_FALSE: c_int = 1;
/// See [`FIDO_OPT_OMIT`].
pub const FIDO_OPT_TRUE: c_int = 2;

/// `fido_dev_io_t`: replaces libfido2's HID I/O (see `super::unix`).
#[repr(C)]
pub struct DevIo {
    /// Opens the path, returns a handle or NULL.
    pub open: unsafe extern "C" fn(*const c_char) -> *mut c_void,
    /// Closes a handle.
    pub close: unsafe extern "C" fn(*mut c_void),
    /// Reads exactly one report (64 bytes) within `ms` milliseconds (-1: no limit).
    pub read: unsafe extern "C" fn(*mut c_void, *mut u8, usize, c_int) -> c_int,
    /// Writes one report: a report-ID byte (0) and 64 bytes.
    pub write: unsafe extern "C" fn(*mut c_void, *const u8, usize) -> c_int,
}

type P = *mut c_void;
type CP = *const c_void;

macro_rules! functions {
    ($($name:ident: fn($($arg:ty),*) $(-> $ret:ty)?;)*) => {
        /// libfido2's entry points, resolved once.
        #[allow(non_snake_case)]
        pub struct Lib {
            $(pub $name: unsafe extern "C" fn($($arg),*) $(-> $ret)?,)*
        }

        impl Lib {
            /// Resolves every entry point from `handle`.
            ///
            /// # Safety
            /// `handle` is a live `dlopen` handle of libfido2 1.x.
            unsafe fn resolve(handle: P) -> Result<Lib, String> {
                Ok(Lib {
                    $($name: {
                        let name = concat!(stringify!($name), "\0");
                        // SAFETY: a NUL-terminated name; the caller's handle.
                        let sym = unsafe { libc::dlsym(handle, name.as_ptr().cast()) };
                        if sym.is_null() {
                            return Err(format!("libfido2.so.1 has no {}", stringify!($name)));
                        }
                        // SAFETY: the symbol is the C function of <fido.h> with this
                        // signature (libfido2 1.x keeps its ABI stable).
                        unsafe {
                            std::mem::transmute::<P, unsafe extern "C" fn($($arg),*) $(-> $ret)?>(sym)
                        }
                    },)*
                })
            }
        }
    };
}

functions! {
    fido_init: fn(c_int);
    fido_strerr: fn(c_int) -> *const c_char;
    fido_dev_new: fn() -> P;
    fido_dev_free: fn(*mut P);
    fido_dev_set_io_functions: fn(P, *const DevIo) -> c_int;
    fido_dev_open: fn(P, *const c_char) -> c_int;
    fido_dev_close: fn(P) -> c_int;
    fido_dev_is_fido2: fn(CP) -> bool;
    fido_dev_has_pin: fn(CP) -> bool;
    fido_dev_get_retry_count: fn(P, *mut c_int) -> c_int;
    fido_dev_get_cbor_info: fn(P, P) -> c_int;
    fido_dev_make_cred: fn(P, P, *const c_char) -> c_int;
    fido_dev_get_assert: fn(P, P, *const c_char) -> c_int;
    fido_dev_info_new: fn(usize) -> P;
    fido_dev_info_free: fn(*mut P, usize);
    fido_dev_info_manifest: fn(P, usize, *mut usize) -> c_int;
    fido_dev_info_ptr: fn(CP, usize) -> CP;
    fido_dev_info_path: fn(CP) -> *const c_char;
    fido_dev_info_product_string: fn(CP) -> *const c_char;
    fido_dev_info_manufacturer_string: fn(CP) -> *const c_char;
    fido_cbor_info_new: fn() -> P;
    fido_cbor_info_free: fn(*mut P);
    fido_cbor_info_extensions_ptr: fn(CP) -> *const *const c_char;
    fido_cbor_info_extensions_len: fn(CP) -> usize;
    fido_cred_new: fn() -> P;
    fido_cred_free: fn(*mut P);
    fido_cred_set_type: fn(P, c_int) -> c_int;
    fido_cred_set_clientdata_hash: fn(P, *const u8, usize) -> c_int;
    fido_cred_set_rp: fn(P, *const c_char, *const c_char) -> c_int;
    fido_cred_set_user: fn(P, *const u8, usize, *const c_char, *const c_char, *const c_char) -> c_int;
    fido_cred_set_extensions: fn(P, c_int) -> c_int;
    fido_cred_set_rk: fn(P, c_int) -> c_int;
    fido_cred_id_ptr: fn(CP) -> *const u8;
    fido_cred_id_len: fn(CP) -> usize;
    fido_assert_new: fn() -> P;
    fido_assert_free: fn(*mut P);
    fido_assert_set_rp: fn(P, *const c_char) -> c_int;
    fido_assert_set_clientdata_hash: fn(P, *const u8, usize) -> c_int;
    fido_assert_allow_cred: fn(P, *const u8, usize) -> c_int;
    fido_assert_set_extensions: fn(P, c_int) -> c_int;
    fido_assert_set_hmac_salt: fn(P, *const u8, usize) -> c_int;
    fido_assert_set_up: fn(P, c_int) -> c_int;
    fido_assert_set_uv: fn(P, c_int) -> c_int;
    fido_assert_count: fn(CP) -> usize;
    fido_assert_hmac_secret_ptr: fn(CP, usize) -> *const u8;
    fido_assert_hmac_secret_len: fn(CP, usize) -> usize;
}

/// libfido2, loaded (and `fido_init`ed) on first use and never unloaded.
///
/// # Errors
/// [`Error::Device`] saying to install libfido2 when `libfido2.so.1` cannot
/// be loaded.
pub fn lib() -> Result<&'static Lib, Error> {
    static LIB: OnceLock<Result<Lib, String>> = OnceLock::new();
    LIB.get_or_init(|| {
        // SAFETY: dlopen with a NUL-terminated name; the library is never closed.
        let handle = unsafe { libc::dlopen(c"libfido2.so.1".as_ptr(), libc::RTLD_NOW | libc::RTLD_LOCAL) };
        if handle.is_null() {
            return Err("libfido2.so.1 could not be loaded".to_string());
        }
        // SAFETY: a live libfido2 handle.
        let lib = unsafe { Lib::resolve(handle) }?;
        // SAFETY: fido_init has no preconditions (0: no debug output).
        unsafe { (lib.fido_init)(0) };
        Ok(lib)
    })
    .as_ref()
    .map_err(|e| {
        Error::Device(format!(
            "FIDO2 protectors need libfido2 ({e}): install it (Debian/Ubuntu: apt install libfido2-1)"
        ))
    })
}

/// libfido2's text for an error code (`fido_strerr`).
pub fn strerr(lib: &Lib, code: c_int) -> String {
    // SAFETY: fido_strerr returns a static NUL-terminated string for every code.
    let s = unsafe { (lib.fido_strerr)(code) };
    if s.is_null() {
        return format!("error {code}");
    }
    // SAFETY: non-NULL, NUL-terminated, static.
    unsafe { CStr::from_ptr(s) }.to_string_lossy().into_owned()
}

/// A string for libfido2 (no NUL bytes).
pub fn cstring(s: &str) -> Result<CString, Error> {
    CString::new(s).map_err(|_| Error::Invalid(format!("{s:?} contains a NUL byte")))
}

/// Copies a C string that may be NULL.
fn opt_string(s: *const c_char) -> Option<String> {
    if s.is_null() {
        return None;
    }
    // SAFETY: non-NULL strings from libfido2 are NUL-terminated and live as
    // long as their owner, which outlives this call.
    Some(unsafe { CStr::from_ptr(s) }.to_string_lossy().into_owned())
}

/// Fails with `what` and libfido2's text unless `r` is [`FIDO_OK`].
pub fn check(lib: &Lib, r: c_int, what: &str) -> Result<(), Error> {
    if r == FIDO_OK {
        Ok(())
    } else {
        Err(Error::Device(format!("{what} failed: {}", strerr(lib, r))))
    }
}

/// An open (or openable) `fido_dev_t`, closed and freed on drop.
pub struct Dev {
    lib: &'static Lib,
    ptr: P,
    open: bool,
}

impl Dev {
    /// A new device object; `io`, if given, replaces the HID transport and
    /// must live as long as the device (it is `'static`).
    pub fn new(lib: &'static Lib, io: Option<&'static DevIo>) -> Result<Dev, Error> {
        // SAFETY: no preconditions; NULL on allocation failure.
        let ptr = unsafe { (lib.fido_dev_new)() };
        if ptr.is_null() {
            return Err(Error::Device("fido_dev_new failed (out of memory)".into()));
        }
        let dev = Dev {
            lib,
            ptr,
            open: false,
        };
        if let Some(io) = io {
            // SAFETY: a live device, not yet open; `io` is 'static.
            let r = unsafe { (lib.fido_dev_set_io_functions)(ptr, io) };
            check(lib, r, "setting the FIDO2 transport")?;
        }
        Ok(dev)
    }

    /// `fido_dev_open`: CTAPHID_INIT and authenticatorGetInfo.
    pub fn open(&mut self, path: &str) -> Result<(), c_int> {
        let path = CString::new(path).map_err(|_| FIDO_ERR_UNSUPPORTED_OPTION)?;
        // SAFETY: a live, closed device and a NUL-terminated path.
        let r = unsafe { (self.lib.fido_dev_open)(self.ptr, path.as_ptr()) };
        if r == FIDO_OK {
            self.open = true;
            Ok(())
        } else {
            Err(r)
        }
    }

    /// Whether the device speaks CTAP2 (not only U2F).
    pub fn is_fido2(&self) -> bool {
        // SAFETY: a live device.
        unsafe { (self.lib.fido_dev_is_fido2)(self.ptr) }
    }

    /// Whether a PIN is set (`clientPin` option true).
    pub fn has_pin(&self) -> bool {
        // SAFETY: a live device.
        unsafe { (self.lib.fido_dev_has_pin)(self.ptr) }
    }

    /// PIN tries left, if the device says.
    pub fn retry_count(&self) -> Option<i32> {
        let mut n: c_int = 0;
        // SAFETY: a live open device and a valid out pointer.
        let r = unsafe { (self.lib.fido_dev_get_retry_count)(self.ptr, &mut n) };
        (r == FIDO_OK).then_some(n)
    }

    /// The extensions authenticatorGetInfo lists.
    pub fn extensions(&self) -> Result<Vec<String>, c_int> {
        let lib = self.lib;
        // SAFETY: no preconditions.
        let mut info = unsafe { (lib.fido_cbor_info_new)() };
        if info.is_null() {
            return Err(super::ffi::FIDO_ERR_UNSUPPORTED_OPTION);
        }
        // SAFETY: a live open device and a live info object.
        let r = unsafe { (lib.fido_dev_get_cbor_info)(self.ptr, info) };
        let mut out = Vec::new();
        if r == FIDO_OK {
            // SAFETY: the info object owns `len` string pointers.
            let (ptr, len) = unsafe {
                (
                    (lib.fido_cbor_info_extensions_ptr)(info),
                    (lib.fido_cbor_info_extensions_len)(info),
                )
            };
            for i in 0..len {
                // SAFETY: i < len, and the array lives with `info`.
                if let Some(s) = opt_string(unsafe { *ptr.add(i) }) {
                    out.push(s);
                }
            }
        }
        // SAFETY: frees the object made above, once.
        unsafe { (lib.fido_cbor_info_free)(&mut info) };
        if r == FIDO_OK { Ok(out) } else { Err(r) }
    }

    /// `fido_dev_make_cred` with `pin` (if any).
    pub fn make_cred(&self, cred: &Cred, pin: Option<&CStr>) -> c_int {
        // SAFETY: a live open device, a live credential, a NUL-terminated PIN or NULL.
        unsafe {
            (self.lib.fido_dev_make_cred)(
                self.ptr,
                cred.ptr,
                pin.map_or(std::ptr::null(), CStr::as_ptr),
            )
        }
    }

    /// `fido_dev_get_assert` with `pin` (if any).
    pub fn get_assert(&self, assert: &Assert, pin: Option<&CStr>) -> c_int {
        // SAFETY: a live open device, a live assertion, a NUL-terminated PIN or NULL.
        unsafe {
            (self.lib.fido_dev_get_assert)(
                self.ptr,
                assert.ptr,
                pin.map_or(std::ptr::null(), CStr::as_ptr),
            )
        }
    }
}

impl Drop for Dev {
    fn drop(&mut self) {
        // SAFETY: the device is live; closed only if it was opened, freed once.
        unsafe {
            if self.open {
                (self.lib.fido_dev_close)(self.ptr);
            }
            (self.lib.fido_dev_free)(&mut self.ptr);
        }
    }
}

/// A `fido_cred_t` (authenticatorMakeCredential), freed on drop.
pub struct Cred {
    lib: &'static Lib,
    ptr: P,
}

impl Cred {
    /// A non-resident ES256 credential request for `rp_id` and the user
    /// handle `user_id`, with the hmac-secret extension.
    pub fn new(
        lib: &'static Lib,
        rp_id: &CStr,
        user_id: &[u8],
        cdh: &[u8; 32],
    ) -> Result<Cred, Error> {
        // SAFETY: no preconditions; NULL on allocation failure.
        let ptr = unsafe { (lib.fido_cred_new)() };
        if ptr.is_null() {
            return Err(Error::Device("fido_cred_new failed (out of memory)".into()));
        }
        let cred = Cred { lib, ptr };
        // SAFETY: a live credential; every pointer is valid for its length
        // and every string NUL-terminated; libfido2 copies them all.
        unsafe {
            check(
                lib,
                (lib.fido_cred_set_type)(ptr, COSE_ES256),
                "fido_cred_set_type",
            )?;
            check(
                lib,
                (lib.fido_cred_set_clientdata_hash)(ptr, cdh.as_ptr(), cdh.len()),
                "fido_cred_set_clientdata_hash",
            )?;
            check(
                lib,
                (lib.fido_cred_set_rp)(ptr, rp_id.as_ptr(), rp_id.as_ptr()),
                "fido_cred_set_rp",
            )?;
            check(
                lib,
                (lib.fido_cred_set_user)(
                    ptr,
                    user_id.as_ptr(),
                    user_id.len(),
                    c"fscrypt-rs".as_ptr(),
                    c"fscrypt-rs protector".as_ptr(),
                    std::ptr::null(),
                ),
                "fido_cred_set_user",
            )?;
            check(
                lib,
                (lib.fido_cred_set_extensions)(ptr, FIDO_EXT_HMAC_SECRET),
                "fido_cred_set_extensions",
            )?;
            check(
                lib,
                (lib.fido_cred_set_rk)(ptr, FIDO_OPT_FALSE),
                "fido_cred_set_rk",
            )?;
        }
        Ok(cred)
    }

    /// The credential id the authenticator returned.
    pub fn id(&self) -> Vec<u8> {
        // SAFETY: the pointer and length describe one buffer owned by the credential.
        unsafe {
            let (p, n) = (
                (self.lib.fido_cred_id_ptr)(self.ptr),
                (self.lib.fido_cred_id_len)(self.ptr),
            );
            if p.is_null() {
                Vec::new()
            } else {
                std::slice::from_raw_parts(p, n).to_vec()
            }
        }
    }
}

impl Drop for Cred {
    fn drop(&mut self) {
        // SAFETY: freed once.
        unsafe { (self.lib.fido_cred_free)(&mut self.ptr) };
    }
}

/// A `fido_assert_t` (authenticatorGetAssertion), freed on drop (libfido2
/// wipes the hmac-secret output when it frees it).
pub struct Assert {
    lib: &'static Lib,
    ptr: P,
}

impl Assert {
    /// An assertion request for `rp_id` allowing only `cred_id`; with
    /// `salt` the hmac-secret extension, and user presence as `up`.
    pub fn new(
        lib: &'static Lib,
        rp_id: &CStr,
        cred_id: &[u8],
        cdh: &[u8; 32],
        salt: Option<&[u8; 32]>,
        up: bool,
    ) -> Result<Assert, Error> {
        // SAFETY: no preconditions; NULL on allocation failure.
        let ptr = unsafe { (lib.fido_assert_new)() };
        if ptr.is_null() {
            return Err(Error::Device(
                "fido_assert_new failed (out of memory)".into(),
            ));
        }
        let assert = Assert { lib, ptr };
        // SAFETY: a live assertion; every pointer valid for its length,
        // strings NUL-terminated; libfido2 copies them.
        unsafe {
            check(
                lib,
                (lib.fido_assert_set_rp)(ptr, rp_id.as_ptr()),
                "fido_assert_set_rp",
            )?;
            check(
                lib,
                (lib.fido_assert_set_clientdata_hash)(ptr, cdh.as_ptr(), cdh.len()),
                "fido_assert_set_clientdata_hash",
            )?;
            check(
                lib,
                (lib.fido_assert_allow_cred)(ptr, cred_id.as_ptr(), cred_id.len()),
                "fido_assert_allow_cred",
            )?;
            if let Some(salt) = salt {
                check(
                    lib,
                    (lib.fido_assert_set_extensions)(ptr, FIDO_EXT_HMAC_SECRET),
                    "fido_assert_set_extensions",
                )?;
                check(
                    lib,
                    (lib.fido_assert_set_hmac_salt)(ptr, salt.as_ptr(), salt.len()),
                    "fido_assert_set_hmac_salt",
                )?;
            }
            check(
                lib,
                (lib.fido_assert_set_up)(ptr, if up { FIDO_OPT_TRUE } else { FIDO_OPT_FALSE }),
                "fido_assert_set_up",
            )?;
            check(
                lib,
                (lib.fido_assert_set_uv)(ptr, FIDO_OPT_OMIT),
                "fido_assert_set_uv",
            )?;
        }
        Ok(assert)
    }

    /// The first statement's hmac-secret output (`None` if the authenticator gave none).
    pub fn hmac_secret(&self) -> Option<zeroize::Zeroizing<Vec<u8>>> {
        // SAFETY: index 0 checked against the count; pointer and length
        // describe one buffer owned by the assertion.
        unsafe {
            if (self.lib.fido_assert_count)(self.ptr) < 1 {
                return None;
            }
            let (p, n) = (
                (self.lib.fido_assert_hmac_secret_ptr)(self.ptr, 0),
                (self.lib.fido_assert_hmac_secret_len)(self.ptr, 0),
            );
            if p.is_null() || n == 0 {
                return None;
            }
            Some(zeroize::Zeroizing::new(
                std::slice::from_raw_parts(p, n).to_vec(),
            ))
        }
    }
}

impl Drop for Assert {
    fn drop(&mut self) {
        // SAFETY: freed once.
        unsafe { (self.lib.fido_assert_free)(&mut self.ptr) };
    }
}

/// One HID authenticator libfido2 found.
#[derive(Clone, Debug)]
pub struct DevInfo {
    /// Its hidraw path (`/dev/hidraw3`).
    pub path: String,
    /// "Manufacturer Product", as the device names itself.
    pub product: String,
}

/// The HID FIDO authenticators present (`fido_dev_info_manifest`, at most 64).
pub fn manifest(lib: &'static Lib) -> Result<Vec<DevInfo>, Error> {
    const MAX: usize = 64;
    // SAFETY: no preconditions; NULL on allocation failure.
    let mut list = unsafe { (lib.fido_dev_info_new)(MAX) };
    if list.is_null() {
        return Err(Error::Device(
            "fido_dev_info_new failed (out of memory)".into(),
        ));
    }
    let mut n = 0usize;
    // SAFETY: a live list of MAX entries and a valid out pointer.
    let r = unsafe { (lib.fido_dev_info_manifest)(list, MAX, &mut n) };
    let mut out = Vec::new();
    if r == FIDO_OK {
        for i in 0..n.min(MAX) {
            // SAFETY: i < n <= MAX entries of the live list; the strings live with it.
            let (path, maker, product) = unsafe {
                let di = (lib.fido_dev_info_ptr)(list, i);
                (
                    opt_string((lib.fido_dev_info_path)(di)),
                    opt_string((lib.fido_dev_info_manufacturer_string)(di)),
                    opt_string((lib.fido_dev_info_product_string)(di)),
                )
            };
            if let Some(path) = path {
                let product = [maker, product]
                    .into_iter()
                    .flatten()
                    .filter(|s| !s.is_empty())
                    .collect::<Vec<_>>()
                    .join(" ");
                out.push(DevInfo { path, product });
            }
        }
    }
    // SAFETY: frees the list made above, once.
    unsafe { (lib.fido_dev_info_free)(&mut list, MAX) };
    check(lib, r, "listing FIDO2 devices")?;
    Ok(out)
}
