//! Checking a user's login password with PAM, as an application (the
//! other side of `pam_fscrypt_rs.so`): google/fscrypt checks the login
//! passphrase before it makes a login (`pam_passphrase`) protector with it,
//! since a protector wrapped with a mistyped password never opens at login.
//!
//! PAM authenticates the user through the service `fscrypt` (the one
//! google/fscrypt uses; without `/etc/pam.d/fscrypt` PAM applies
//! `/etc/pam.d/other`, on Debian the common-auth stack). `libpam.so.0` is
//! loaded at run time (`dlopen`), so building needs no PAM headers, and callers decide what a
//! system without PAM means ([`PamAuthError::Unavailable`]). The
//! conversation answers the password prompt with the passphrase; PAM frees
//! (and Linux-PAM's modules wipe) the copy it is given.

#![allow(unsafe_code)]

use std::ffi::{CStr, CString, c_char, c_int, c_void};

const PAM_SUCCESS: c_int = 0;
const PAM_BUF_ERR: c_int = 5;
const PAM_CONV_ERR: c_int = 19;
const PAM_SILENT: c_int = 0x8000;
const PAM_PROMPT_ECHO_OFF: c_int = 1;
const PAM_PROMPT_ECHO_ON: c_int = 2;

#[repr(C)]
struct PamMessage {
    msg_style: c_int,
    msg: *const c_char,
}

#[repr(C)]
struct PamResponse {
    resp: *mut c_char,
    resp_retcode: c_int,
}

type ConvFn = unsafe extern "C" fn(
    c_int,
    *mut *const PamMessage,
    *mut *mut PamResponse,
    *mut c_void,
) -> c_int;

#[repr(C)]
struct PamConv {
    conv: ConvFn,
    appdata_ptr: *mut c_void,
}

type StartFn =
    unsafe extern "C" fn(*const c_char, *const c_char, *const PamConv, *mut *mut c_void) -> c_int;
type AuthFn = unsafe extern "C" fn(*mut c_void, c_int) -> c_int;
type EndFn = unsafe extern "C" fn(*mut c_void, c_int) -> c_int;

/// What the conversation answers: the passphrase (NUL-free) for hidden
/// prompts, the user name for visible ones.
struct Answers<'a> {
    pass: &'a [u8],
    user: &'a CStr,
}

/// The conversation: one malloc'd response per message (PAM frees them).
unsafe extern "C" fn converse(
    n: c_int,
    msgs: *mut *const PamMessage,
    out: *mut *mut PamResponse,
    data: *mut c_void,
) -> c_int {
    if n <= 0 || msgs.is_null() || out.is_null() || data.is_null() {
        return PAM_CONV_ERR;
    }
    // SAFETY: `data` is the `Answers` given to pam_start, alive for the
    // whole transaction; PAM passes `n` valid message pointers (Linux-PAM
    // layout: an array of pointers) and an out pointer.
    unsafe {
        let a = &*(data as *const Answers<'_>);
        let resp = libc::calloc(n as usize, std::mem::size_of::<PamResponse>()) as *mut PamResponse;
        if resp.is_null() {
            return PAM_BUF_ERR;
        }
        for i in 0..n as usize {
            let m = &**msgs.add(i);
            let text: &[u8] = match m.msg_style {
                PAM_PROMPT_ECHO_OFF => a.pass,
                PAM_PROMPT_ECHO_ON => a.user.to_bytes(),
                _ => continue, // messages: nothing to answer
            };
            let s = libc::calloc(text.len() + 1, 1) as *mut u8;
            if s.is_null() {
                for j in 0..i {
                    libc::free((*resp.add(j)).resp as *mut c_void);
                }
                libc::free(resp as *mut c_void);
                return PAM_BUF_ERR;
            }
            std::ptr::copy_nonoverlapping(text.as_ptr(), s, text.len());
            (*resp.add(i)).resp = s as *mut c_char;
        }
        *out = resp;
    }
    PAM_SUCCESS
}

/// The PAM entry points, from `libpam.so.0`; `None` when it cannot be
/// loaded. The library stays loaded (never `dlclose`d).
fn pam() -> Option<(StartFn, AuthFn, EndFn)> {
    // SAFETY: dlopen/dlsym with NUL-terminated names; the symbols have the
    // C signatures of <security/pam_appl.h> declared above.
    unsafe {
        let h = libc::dlopen(c"libpam.so.0".as_ptr(), libc::RTLD_NOW | libc::RTLD_LOCAL);
        if h.is_null() {
            return None;
        }
        let sym = |name: &CStr| libc::dlsym(h, name.as_ptr());
        let (s, a, e) = (sym(c"pam_start"), sym(c"pam_authenticate"), sym(c"pam_end"));
        if s.is_null() || a.is_null() || e.is_null() {
            return None;
        }
        Some((
            std::mem::transmute::<*mut c_void, StartFn>(s),
            std::mem::transmute::<*mut c_void, AuthFn>(a),
            std::mem::transmute::<*mut c_void, EndFn>(e),
        ))
    }
}

/// Why a password check did not pass.
#[derive(Debug, thiserror::Error)]
pub enum PamAuthError {
    /// `libpam.so.0` (or one of its entry points) could not be loaded.
    #[error("libpam.so.0 could not be loaded")]
    Unavailable,
    /// PAM refused the password (the PAM error number).
    #[error("PAM refused the password (PAM error {0})")]
    Refused(i32),
    /// The transaction could not start (the PAM error number).
    #[error("PAM could not start (PAM error {0})")]
    Start(i32),
    /// A user name or password with a NUL byte.
    #[error("a user name or password cannot contain a NUL byte")]
    Nul,
}

/// Checks that `pass` is `user`'s password with `pam_authenticate` in the
/// PAM service `service` (google/fscrypt uses `fscrypt`). Root can check
/// any user; others, with pam_unix, only themselves.
///
/// # Errors
/// [`PamAuthError`].
pub fn check_password(service: &str, user: &str, pass: &[u8]) -> Result<(), PamAuthError> {
    let (start, authenticate, end) = pam().ok_or(PamAuthError::Unavailable)?;
    if pass.contains(&0) {
        return Err(PamAuthError::Nul);
    }
    let cuser = CString::new(user).map_err(|_| PamAuthError::Nul)?;
    let cservice = CString::new(service).map_err(|_| PamAuthError::Nul)?;
    let answers = Answers { pass, user: &cuser };
    let conv = PamConv {
        conv: converse,
        appdata_ptr: &answers as *const Answers<'_> as *mut c_void,
    };
    let mut h: *mut c_void = std::ptr::null_mut();
    // SAFETY: valid C strings, a conversation whose data outlives the
    // transaction, and a handle pointer; the handle is ended here.
    let rc = unsafe {
        let rc = start(cservice.as_ptr(), cuser.as_ptr(), &conv, &mut h);
        if rc != PAM_SUCCESS {
            return Err(PamAuthError::Start(rc));
        }
        let rc = authenticate(h, PAM_SILENT);
        end(h, rc);
        rc
    };
    if rc == PAM_SUCCESS {
        Ok(())
    } else {
        Err(PamAuthError::Refused(rc))
    }
}
