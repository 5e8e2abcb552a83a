//! `pam_fscrypt_rs.so`: a PAM module for google/fscrypt login protectors.
//!
//! * `auth`: stashes the password (`PAM_AUTHTOK`, set by the module that
//!   checked it, e.g. pam_unix, which must come first) with `pam_set_data`
//!   in a zeroizing buffer, when the user has a login protector;
//! * `session` open: unlocks every directory the user's login protector
//!   protects (adds the policy keys to the keyring the config chooses) with the
//!   stashed password, then drops it; close: at the user's last session,
//!   with the `lock_policies` option, removes those keys;
//! * `password`: re-wraps the login protector from `PAM_OLDAUTHTOK` to
//!   `PAM_AUTHTOK` so the directories stay reachable after a password
//!   change;
//! * `setcred`: nothing.
//!
//! Options: `lock_policies`, `root_mnt=PATH` (where login protectors live;
//! default `/`), `config=PATH` (the google/fscrypt config, default
//! `/etc/fscrypt.conf`, for `allow_cross_user_metadata` and
//! `use_fs_keyring_for_v1_policies`), `debug`.
//!
//! The flow itself is `fscrypt_actions::login`'s, the same library the
//! CLI uses: the same protectors are trusted and v1 keys go to the same
//! keyring (the user's user keyring unless the config says
//! `use_fs_keyring_for_v1_policies`).
//!
//! Only metadata owned by root or the user is used (unless the config's
//! `allow_cross_user_metadata`), only mounts that can hold fscrypt metadata
//! are looked at (never FUSE or network filesystems), each within a time
//! bound, and a login logs at most one line per cause. Nothing here aborts a login: internal errors are
//! logged to syslog (never a secret) and the module returns `PAM_IGNORE`
//! (or `PAM_SUCCESS`); panics are caught at the FFI boundary.
//!
//! The few libpam functions used are declared here rather than through a
//! binding crate; they are resolved from the host's libpam when the module
//! is loaded.

#![allow(unsafe_code)]

mod logic;

use std::ffi::{CStr, CString, c_char, c_int, c_void};
use std::panic::{AssertUnwindSafe, catch_unwind};

use zeroize::Zeroizing;

/// An opaque `pam_handle_t`.
#[repr(C)]
pub struct PamHandle {
    _private: [u8; 0],
}

const PAM_SUCCESS: c_int = 0;
const PAM_IGNORE: c_int = 25;
const PAM_AUTHTOK: c_int = 6;
const PAM_OLDAUTHTOK: c_int = 7;
const PAM_PRELIM_CHECK: c_int = 0x4000;
const LOG_ERR: c_int = 3;
const LOG_NOTICE: c_int = 5;
const LOG_DEBUG: c_int = 7;

/// The `pam_set_data` key of the stashed password.
const AUTHTOK_DATA: &CStr = c"pam_fscrypt_rs_authtok";

type Cleanup = unsafe extern "C" fn(*mut PamHandle, *mut c_void, c_int);

unsafe extern "C" {
    fn pam_get_user(pamh: *mut PamHandle, user: *mut *const c_char, prompt: *const c_char)
    -> c_int;
    fn pam_get_item(pamh: *const PamHandle, item_type: c_int, item: *mut *const c_void) -> c_int;
    fn pam_set_data(
        pamh: *mut PamHandle,
        name: *const c_char,
        data: *mut c_void,
        cleanup: Option<Cleanup>,
    ) -> c_int;
    fn pam_get_data(pamh: *const PamHandle, name: *const c_char, data: *mut *const c_void)
    -> c_int;
    fn pam_syslog(pamh: *const PamHandle, priority: c_int, fmt: *const c_char, ...);
}

/// The stashed password: a boxed zeroizing buffer owned by libpam.
type Stash = Zeroizing<Vec<u8>>;

/// Frees a stashed password (wiping it); libpam calls it when the data is
/// replaced or removed, or at `pam_end`.
unsafe extern "C" fn free_stash(_pamh: *mut PamHandle, data: *mut c_void, _status: c_int) {
    if !data.is_null() {
        // SAFETY: `data` is the pointer `Box::into_raw` gave `stash`, and
        // libpam calls the cleanup exactly once per stored pointer.
        drop(unsafe { Box::from_raw(data.cast::<Stash>()) });
    }
}

struct Ctx {
    pamh: *mut PamHandle,
    opts: logic::Options,
}

impl Ctx {
    /// Builds the context from the module arguments.
    ///
    /// # Safety
    /// `argv` holds `argc` NUL-terminated strings (libpam's contract).
    unsafe fn new(pamh: *mut PamHandle, argc: c_int, argv: *const *const c_char) -> Ctx {
        let mut args = Vec::new();
        for i in 0..usize::try_from(argc).unwrap_or(0) {
            // SAFETY: i < argc, per the caller's contract.
            let p = unsafe { *argv.add(i) };
            if !p.is_null() {
                // SAFETY: a NUL-terminated string from libpam.
                args.push(unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned());
            }
        }
        let (opts, unknown) = logic::Options::parse(args.iter().map(String::as_str));
        let ctx = Ctx { pamh, opts };
        for u in unknown {
            ctx.log(LOG_NOTICE, &format!("unknown option {u:?} ignored"));
        }
        ctx
    }

    fn log(&self, prio: c_int, msg: &str) {
        if prio == LOG_DEBUG && !self.opts.debug {
            return;
        }
        let msg = CString::new(msg.replace('\0', " ")).unwrap_or_default();
        // SAFETY: a valid handle; "%s" with one NUL-terminated string.
        unsafe { pam_syslog(self.pamh, prio, c"%s".as_ptr(), msg.as_ptr()) };
    }

    fn user(&self) -> Option<(String, u32)> {
        let mut p: *const c_char = std::ptr::null();
        // SAFETY: valid handle and out pointer; a NULL prompt is allowed.
        let r = unsafe { pam_get_user(self.pamh, &mut p, std::ptr::null()) };
        if r != PAM_SUCCESS || p.is_null() {
            self.log(LOG_ERR, "cannot get the user name");
            return None;
        }
        // SAFETY: libpam returns a NUL-terminated string it owns.
        let name = unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned();
        match logic::uid_of(&name) {
            Ok(uid) => Some((name, uid)),
            Err(e) => {
                self.log(LOG_ERR, &format!("user {name}: {e}"));
                None
            }
        }
    }

    fn item(&self, kind: c_int) -> Option<Zeroizing<Vec<u8>>> {
        let mut p: *const c_void = std::ptr::null();
        // SAFETY: valid handle and out pointer.
        let r = unsafe { pam_get_item(self.pamh, kind, &mut p) };
        if r != PAM_SUCCESS || p.is_null() {
            return None;
        }
        // SAFETY: PAM_AUTHTOK/PAM_OLDAUTHTOK are NUL-terminated strings.
        let s = unsafe { CStr::from_ptr(p.cast::<c_char>()) };
        Some(Zeroizing::new(s.to_bytes().to_vec()))
    }

    fn stash(&self, secret: Zeroizing<Vec<u8>>) -> bool {
        let raw = Box::into_raw(Box::new(secret)).cast::<c_void>();
        // SAFETY: valid handle, static name; libpam owns `raw` from here and
        // frees it with `free_stash`.
        let r = unsafe { pam_set_data(self.pamh, AUTHTOK_DATA.as_ptr(), raw, Some(free_stash)) };
        if r != PAM_SUCCESS {
            // SAFETY: not stored: still ours.
            unsafe { free_stash(self.pamh, raw, 0) };
        }
        r == PAM_SUCCESS
    }

    fn stashed(&self) -> Option<Zeroizing<Vec<u8>>> {
        let mut p: *const c_void = std::ptr::null();
        // SAFETY: valid handle, static name, out pointer.
        let r = unsafe { pam_get_data(self.pamh, AUTHTOK_DATA.as_ptr(), &mut p) };
        if r != PAM_SUCCESS || p.is_null() {
            return None;
        }
        // SAFETY: the pointer `stash` stored, alive until the data is removed.
        let s: &Stash = unsafe { &*p.cast::<Stash>() };
        Some(Zeroizing::new(s.to_vec()))
    }

    fn drop_stash(&self) {
        // SAFETY: replacing with NULL makes libpam run `free_stash` on the
        // old pointer.
        unsafe { pam_set_data(self.pamh, AUTHTOK_DATA.as_ptr(), std::ptr::null_mut(), None) };
    }
}

/// Runs `f` with panics caught; a panic logs and gives `PAM_IGNORE`.
fn guarded(
    pamh: *mut PamHandle,
    argc: c_int,
    argv: *const *const c_char,
    f: fn(&Ctx) -> c_int,
) -> c_int {
    let r = catch_unwind(AssertUnwindSafe(|| {
        // SAFETY: libpam's argc/argv contract.
        let ctx = unsafe { Ctx::new(pamh, argc, argv) };
        f(&ctx)
    }));
    r.unwrap_or_else(|_| {
        let _ = catch_unwind(AssertUnwindSafe(|| {
            // SAFETY: valid handle; static format.
            unsafe {
                pam_syslog(
                    pamh,
                    LOG_ERR,
                    c"%s".as_ptr(),
                    c"internal error (panic); login continues".as_ptr(),
                )
            };
        }));
        PAM_IGNORE
    })
}

fn authenticate(ctx: &Ctx) -> c_int {
    let Some((name, uid)) = ctx.user() else {
        return PAM_IGNORE;
    };
    match logic::has_login_protector(&ctx.opts, uid) {
        Ok(true) => {}
        Ok(false) => {
            ctx.log(LOG_DEBUG, &format!("{name} has no login protector"));
            return PAM_IGNORE;
        }
        Err(e) => {
            ctx.log(LOG_ERR, &format!("reading {name}'s login protector: {e}"));
            return PAM_IGNORE;
        }
    }
    match ctx.item(PAM_AUTHTOK) {
        Some(tok) => {
            if !ctx.stash(tok) {
                ctx.log(LOG_ERR, "cannot keep the password for the session");
            }
        }
        None => ctx.log(LOG_NOTICE, "no password (PAM_AUTHTOK) to keep: put pam_fscrypt_rs after the module that asks for it"),
    }
    PAM_IGNORE
}

fn open_session(ctx: &Ctx) -> c_int {
    let Some((name, uid)) = ctx.user() else {
        return PAM_SUCCESS;
    };
    if let Err(e) = logic::adjust_count(uid, 1) {
        ctx.log(LOG_ERR, &format!("session count: {e}"));
    }
    let tok = ctx.stashed();
    ctx.drop_stash();
    let Some(tok) = tok else {
        ctx.log(
            LOG_DEBUG,
            &format!("no password kept for {name}; nothing unlocked"),
        );
        return PAM_SUCCESS;
    };
    match logic::unlock(&ctx.opts, uid, &tok) {
        Ok(out) => {
            for line in out.summary() {
                ctx.log(LOG_ERR, &format!("unlocking for {name}: {line}"));
            }
            ctx.log(LOG_DEBUG, &logic::unlocked_line(out.done, &name));
        }
        Err(e) => ctx.log(
            LOG_ERR,
            &format!("cannot open {name}'s login protector: {e}"),
        ),
    }
    PAM_SUCCESS
}

fn close_session(ctx: &Ctx) -> c_int {
    let Some((name, uid)) = ctx.user() else {
        return PAM_SUCCESS;
    };
    let count = match logic::adjust_count(uid, -1) {
        Ok(n) => n,
        Err(e) => {
            ctx.log(LOG_ERR, &format!("session count: {e}; not locking"));
            return PAM_SUCCESS;
        }
    };
    if count != 0 || !ctx.opts.lock_policies {
        return PAM_SUCCESS;
    }
    match logic::lock(&ctx.opts, uid) {
        Ok(out) => {
            for line in out.summary() {
                ctx.log(LOG_ERR, &format!("locking for {name}: {line}"));
            }
            ctx.log(LOG_DEBUG, &logic::locked_line(out.done, &name));
        }
        Err(e) => ctx.log(LOG_ERR, &format!("locking for {name}: {e}")),
    }
    PAM_SUCCESS
}

fn chauthtok(ctx: &Ctx) -> c_int {
    let Some((name, uid)) = ctx.user() else {
        return PAM_IGNORE;
    };
    let (Some(old), Some(new)) = (ctx.item(PAM_OLDAUTHTOK), ctx.item(PAM_AUTHTOK)) else {
        // Name the protector to pass; no advice for a user without one.
        match logic::login_protector_ref(&ctx.opts, uid) {
            Ok(Some(protector)) => ctx.log(LOG_NOTICE, &logic::rewrap_advice(&name, &protector)),
            Ok(None) => {}
            Err(e) => ctx.log(
                LOG_NOTICE,
                &format!("cannot re-wrap {name}'s login protector without the old password: {e}"),
            ),
        }
        return PAM_IGNORE;
    };
    match logic::rewrap(&ctx.opts, uid, &old, &new) {
        Ok(true) => {
            ctx.log(LOG_DEBUG, &format!("{name}'s login protector re-wrapped"));
            PAM_SUCCESS
        }
        Ok(false) => PAM_IGNORE,
        Err(e) => {
            ctx.log(
                LOG_ERR,
                &format!("re-wrapping {name}'s login protector: {e}"),
            );
            PAM_IGNORE
        }
    }
}

/// PAM `auth`: keeps the password for the session.
///
/// # Safety
/// Called by libpam with a valid handle and `argc` arguments in `argv`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pam_sm_authenticate(
    pamh: *mut PamHandle,
    _flags: c_int,
    argc: c_int,
    argv: *const *const c_char,
) -> c_int {
    guarded(pamh, argc, argv, authenticate)
}

/// PAM `auth` credentials: nothing to do.
///
/// # Safety
/// As [`pam_sm_authenticate`].
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pam_sm_setcred(
    _pamh: *mut PamHandle,
    _flags: c_int,
    _argc: c_int,
    _argv: *const *const c_char,
) -> c_int {
    PAM_SUCCESS
}

/// PAM `session` open: unlocks the user's login-protected directories.
///
/// # Safety
/// As [`pam_sm_authenticate`].
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pam_sm_open_session(
    pamh: *mut PamHandle,
    _flags: c_int,
    argc: c_int,
    argv: *const *const c_char,
) -> c_int {
    guarded(pamh, argc, argv, open_session)
}

/// PAM `session` close: at the last session, with `lock_policies`, locks
/// them.
///
/// # Safety
/// As [`pam_sm_authenticate`].
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pam_sm_close_session(
    pamh: *mut PamHandle,
    _flags: c_int,
    argc: c_int,
    argv: *const *const c_char,
) -> c_int {
    guarded(pamh, argc, argv, close_session)
}

/// PAM `password`: re-wraps the login protector with the new password
/// (in the update phase; the preliminary check does nothing).
///
/// # Safety
/// As [`pam_sm_authenticate`].
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pam_sm_chauthtok(
    pamh: *mut PamHandle,
    flags: c_int,
    argc: c_int,
    argv: *const *const c_char,
) -> c_int {
    if flags & PAM_PRELIM_CHECK != 0 {
        return PAM_SUCCESS;
    }
    guarded(pamh, argc, argv, chauthtok)
}
