//! The raw ioctl calls: the only module of fscrypt-rs's Linux side that
//! contains `unsafe`.
//!
//! Each function issues exactly one ioctl through [`rustix::ioctl::ioctl`]
//! with the argument type the kernel expects for that number (see
//! [`crate::uapi`]), and returns the kernel's errno untouched. The
//! translation of errno values into explanations lives in
//! [`crate::error`]; the typed, safe API in [`crate::keyring`],
//! [`crate::policy`] and [`crate::blkcrypto`].
//!
//! Kernel: fs/crypto/policy.c, fs/crypto/keyring.c, block/blk-crypto.c.

#![allow(unsafe_code)]

use std::ffi::CStr;

use rustix::fd::AsFd;
use rustix::io::Errno;
use rustix::ioctl::{Getter, Updater, ioctl};

use crate::uapi::*;

/// `FS_IOC_SET_ENCRYPTION_POLICY` with a v1 policy (12 bytes).
///
/// # Errors
/// The kernel's errno (spec §10.1).
pub fn set_encryption_policy_v1(fd: impl AsFd, policy: &fscrypt_policy_v1) -> Result<(), Errno> {
    let mut arg = *policy;
    // SAFETY: FS_IOC_SET_ENCRYPTION_POLICY reads a policy whose first byte
    // (0 here) selects the 12-byte v1 layout; `arg` is a live, initialised
    // `fscrypt_policy_v1` for the whole call.
    unsafe {
        ioctl(
            fd,
            Updater::<FS_IOC_SET_ENCRYPTION_POLICY, fscrypt_policy_v1>::new(&mut arg),
        )
    }
}

/// `FS_IOC_SET_ENCRYPTION_POLICY` with a v2 policy (24 bytes, same number).
///
/// # Errors
/// The kernel's errno (spec §10.1).
pub fn set_encryption_policy_v2(fd: impl AsFd, policy: &fscrypt_policy_v2) -> Result<(), Errno> {
    let mut arg = *policy;
    // SAFETY: the ioctl number encodes the v1 size (uapi quirk), but the
    // kernel reads the version byte (2) first and then copies 24 bytes;
    // `arg` is a live 24-byte `fscrypt_policy_v2` for the whole call.
    unsafe {
        ioctl(
            fd,
            Updater::<FS_IOC_SET_ENCRYPTION_POLICY, fscrypt_policy_v2>::new(&mut arg),
        )
    }
}

/// `FS_IOC_GET_ENCRYPTION_POLICY` (v1 policies only).
///
/// # Errors
/// The kernel's errno (spec §10.2): `ENODATA`, `EINVAL` for v2.
pub fn get_encryption_policy(fd: impl AsFd) -> Result<fscrypt_policy_v1, Errno> {
    // SAFETY: the kernel writes exactly one `fscrypt_policy_v1` (12 bytes)
    // into the Getter's buffer, which has that type.
    unsafe {
        ioctl(
            fd,
            Getter::<FS_IOC_GET_ENCRYPTION_POLICY, fscrypt_policy_v1>::new(),
        )
    }
}

/// `FS_IOC_GET_ENCRYPTION_POLICY_EX`.
///
/// # Errors
/// The kernel's errno (spec §10.3): `ENODATA`, `EINVAL`, `EOVERFLOW`, `ENOTTY`.
pub fn get_encryption_policy_ex(fd: impl AsFd) -> Result<fscrypt_get_policy_ex_arg, Errno> {
    let mut arg = fscrypt_get_policy_ex_arg::new();
    // SAFETY: the kernel reads `policy_size` (24) and writes at most
    // 8 + 24 bytes into `arg`, a live 32-byte `fscrypt_get_policy_ex_arg`.
    unsafe {
        ioctl(
            &fd,
            Updater::<FS_IOC_GET_ENCRYPTION_POLICY_EX, fscrypt_get_policy_ex_arg>::new(&mut arg),
        )?;
    }
    Ok(arg)
}

/// `FS_IOC_GET_ENCRYPTION_NONCE`: the 16-byte nonce of the inode's context.
///
/// # Errors
/// The kernel's errno (spec §10.4): `ENODATA`, `EINVAL`, `ENOTTY`.
pub fn get_encryption_nonce(fd: impl AsFd) -> Result<[u8; FSCRYPT_FILE_NONCE_SIZE], Errno> {
    // SAFETY: the kernel writes exactly 16 bytes into the `[u8; 16]` buffer.
    unsafe {
        ioctl(
            fd,
            Getter::<FS_IOC_GET_ENCRYPTION_NONCE, [u8; FSCRYPT_FILE_NONCE_SIZE]>::new(),
        )
    }
}

/// `FS_IOC_ADD_ENCRYPTION_KEY`; on success the kernel has written the key
/// identifier into `arg.arg.key_spec` for identifier specifiers.
///
/// # Errors
/// The kernel's errno (spec §10.6).
pub fn add_encryption_key(
    fd: impl AsFd,
    arg: &mut fscrypt_add_key_arg_with_raw,
) -> Result<(), Errno> {
    // SAFETY: the kernel reads the 80-byte header and then `raw_size`
    // (≤ 128, checked by the callers and again by the kernel) bytes that
    // follow it; `arg` holds 80 + 128 initialised bytes and lives for the
    // whole call. It writes back only into `key_spec`.
    unsafe {
        ioctl(
            fd,
            Updater::<FS_IOC_ADD_ENCRYPTION_KEY, fscrypt_add_key_arg_with_raw>::new(arg),
        )
    }
}

/// `FS_IOC_REMOVE_ENCRYPTION_KEY` or, with `all_users`,
/// `FS_IOC_REMOVE_ENCRYPTION_KEY_ALL_USERS`.
///
/// # Errors
/// The kernel's errno (spec §10.7).
pub fn remove_encryption_key(
    fd: impl AsFd,
    arg: &mut fscrypt_remove_key_arg,
    all_users: bool,
) -> Result<(), Errno> {
    if all_users {
        // SAFETY: the kernel reads and writes one 64-byte
        // `fscrypt_remove_key_arg`, which `arg` is.
        unsafe {
            ioctl(
                fd,
                Updater::<FS_IOC_REMOVE_ENCRYPTION_KEY_ALL_USERS, fscrypt_remove_key_arg>::new(arg),
            )
        }
    } else {
        // SAFETY: as above, for the single-user variant.
        unsafe {
            ioctl(
                fd,
                Updater::<FS_IOC_REMOVE_ENCRYPTION_KEY, fscrypt_remove_key_arg>::new(arg),
            )
        }
    }
}

/// `FS_IOC_GET_ENCRYPTION_KEY_STATUS`.
///
/// # Errors
/// The kernel's errno (spec §10.8).
pub fn get_encryption_key_status(
    fd: impl AsFd,
    arg: &mut fscrypt_get_key_status_arg,
) -> Result<(), Errno> {
    // SAFETY: the kernel reads and writes one 128-byte
    // `fscrypt_get_key_status_arg`, which `arg` is.
    unsafe {
        ioctl(
            fd,
            Updater::<FS_IOC_GET_ENCRYPTION_KEY_STATUS, fscrypt_get_key_status_arg>::new(arg),
        )
    }
}

/// `BLKCRYPTOIMPORTKEY`: wrap `raw_key` into `lt_key`; returns the number of
/// bytes written to `lt_key`.
///
/// # Errors
/// The kernel's errno (`EOPNOTSUPP` without hardware-wrapped key support,
/// `EOVERFLOW` if `lt_key` is too small, `EINVAL`, `EBADMSG`).
pub fn blk_crypto_import_key(
    fd: impl AsFd,
    raw_key: &[u8],
    lt_key: &mut [u8],
) -> Result<usize, Errno> {
    let mut arg = blk_crypto_import_key_arg {
        raw_key_ptr: raw_key.as_ptr() as u64,
        raw_key_size: raw_key.len() as u64,
        lt_key_ptr: lt_key.as_mut_ptr() as u64,
        lt_key_size: lt_key.len() as u64,
        reserved: [0; 4],
    };
    // SAFETY: the kernel reads `raw_key_size` bytes at `raw_key_ptr` (a live
    // slice of that length) and writes at most `lt_key_size` bytes at
    // `lt_key_ptr` (a live, exclusively borrowed slice of that length); both
    // borrows outlast the call. `arg` is one 64-byte import argument.
    unsafe {
        ioctl(
            fd,
            Updater::<BLKCRYPTOIMPORTKEY, blk_crypto_import_key_arg>::new(&mut arg),
        )?;
    }
    Ok(clamp_len(arg.lt_key_size, lt_key.len()))
}

/// `BLKCRYPTOGENERATEKEY`: let the hardware create a key, written in
/// long-term wrapped form to `lt_key`; returns its length.
///
/// # Errors
/// As [`blk_crypto_import_key`].
pub fn blk_crypto_generate_key(fd: impl AsFd, lt_key: &mut [u8]) -> Result<usize, Errno> {
    let mut arg = blk_crypto_generate_key_arg {
        lt_key_ptr: lt_key.as_mut_ptr() as u64,
        lt_key_size: lt_key.len() as u64,
        reserved: [0; 4],
    };
    // SAFETY: the kernel writes at most `lt_key_size` bytes at `lt_key_ptr`,
    // a live, exclusively borrowed slice of that length; `arg` is one 48-byte
    // generate argument.
    unsafe {
        ioctl(
            fd,
            Updater::<BLKCRYPTOGENERATEKEY, blk_crypto_generate_key_arg>::new(&mut arg),
        )?;
    }
    Ok(clamp_len(arg.lt_key_size, lt_key.len()))
}

/// `BLKCRYPTOPREPAREKEY`: convert a long-term wrapped key into the
/// ephemerally-wrapped form written to `eph_key`; returns its length.
///
/// # Errors
/// As [`blk_crypto_import_key`].
pub fn blk_crypto_prepare_key(
    fd: impl AsFd,
    lt_key: &[u8],
    eph_key: &mut [u8],
) -> Result<usize, Errno> {
    let mut arg = blk_crypto_prepare_key_arg {
        lt_key_ptr: lt_key.as_ptr() as u64,
        lt_key_size: lt_key.len() as u64,
        eph_key_ptr: eph_key.as_mut_ptr() as u64,
        eph_key_size: eph_key.len() as u64,
        reserved: [0; 4],
    };
    // SAFETY: the kernel reads `lt_key_size` bytes at `lt_key_ptr` and
    // writes at most `eph_key_size` bytes at `eph_key_ptr`; both are live
    // slices of exactly those lengths that outlast the call. `arg` is one
    // 64-byte prepare argument.
    unsafe {
        ioctl(
            fd,
            Updater::<BLKCRYPTOPREPAREKEY, blk_crypto_prepare_key_arg>::new(&mut arg),
        )?;
    }
    Ok(clamp_len(arg.eph_key_size, eph_key.len()))
}

fn clamp_len(reported: u64, cap: usize) -> usize {
    usize::try_from(reported).unwrap_or(cap).min(cap)
}

/// The 32 bytes of a key specifier's union.
pub(crate) fn key_spec_u_bytes(spec: &fscrypt_key_specifier) -> [u8; 32] {
    // SAFETY: every view of `fscrypt_key_specifier_u` is a plain byte array
    // and the union is 32 bytes; our constructors and the kernel always
    // initialise all 32 bytes, so reading the widest view is defined.
    unsafe { spec.u.__reserved }
}

/// The 24 policy bytes of a `fscrypt_get_policy_ex_arg`.
pub(crate) fn policy_ex_bytes(arg: &fscrypt_get_policy_ex_arg) -> [u8; 24] {
    // SAFETY: `fscrypt_get_policy_ex_arg::new` initialises the union through
    // its widest (24-byte, all-`u8`) view and the kernel only overwrites
    // bytes of it, so every byte of the v2 view is initialised.
    let v2 = unsafe { arg.policy.v2 };
    let mut out = [0u8; 24];
    out[0] = v2.version;
    out[1] = v2.contents_encryption_mode;
    out[2] = v2.filenames_encryption_mode;
    out[3] = v2.flags;
    out[4..8].copy_from_slice(&v2.__reserved);
    out[8..].copy_from_slice(&v2.master_key_identifier);
    out
}

/// `add_key(2)`: a key of `key_type` with `description` and `payload` in
/// `keyring` (a serial or a `KEY_SPEC_*` value); returns its serial.
///
/// # Errors
/// The kernel's errno.
pub fn add_key(
    key_type: &CStr,
    description: &CStr,
    payload: &[u8],
    keyring: i32,
) -> Result<i32, Errno> {
    // SAFETY: NUL-terminated strings and a payload pointer/length pair
    // valid for the call; the kernel copies them.
    let r = unsafe {
        libc::syscall(
            libc::SYS_add_key,
            key_type.as_ptr(),
            description.as_ptr(),
            payload.as_ptr(),
            payload.len(),
            keyring,
        )
    };
    if r < 0 {
        Err(Errno::from_raw_os_error(errno()))
    } else {
        Ok(r as i32)
    }
}

/// `keyctl(KEYCTL_SEARCH, keyring, type, description, 0)`: the serial of
/// a matching key reachable from `keyring`.
///
/// # Errors
/// `ENOKEY` when there is none; the kernel's errno.
pub fn keyctl_search(keyring: i32, key_type: &CStr, description: &CStr) -> Result<i32, Errno> {
    // SAFETY: plain integers and NUL-terminated strings valid for the call.
    let r = unsafe {
        libc::syscall(
            libc::SYS_keyctl,
            KEYCTL_SEARCH,
            keyring,
            key_type.as_ptr(),
            description.as_ptr(),
            0,
        )
    };
    if r < 0 {
        Err(Errno::from_raw_os_error(errno()))
    } else {
        Ok(r as i32)
    }
}

/// `keyctl(KEYCTL_UNLINK, key, keyring)`.
///
/// # Errors
/// The kernel's errno.
pub fn keyctl_unlink(key: i32, keyring: i32) -> Result<(), Errno> {
    // SAFETY: plain integers.
    let r = unsafe { libc::syscall(libc::SYS_keyctl, KEYCTL_UNLINK, key, keyring) };
    if r < 0 {
        Err(Errno::from_raw_os_error(errno()))
    } else {
        Ok(())
    }
}

/// `keyctl(KEYCTL_LINK, key, keyring)`.
///
/// # Errors
/// The kernel's errno.
pub fn keyctl_link(key: i32, keyring: i32) -> Result<(), Errno> {
    // SAFETY: plain integers.
    let r = unsafe { libc::syscall(libc::SYS_keyctl, KEYCTL_LINK, key, keyring) };
    if r < 0 {
        Err(Errno::from_raw_os_error(errno()))
    } else {
        Ok(())
    }
}

/// `keyctl(KEYCTL_GET_KEYRING_ID, id, create)`: the serial of a special
/// keyring (`KEY_SPEC_*`).
///
/// # Errors
/// The kernel's errno.
pub fn keyctl_get_keyring_id(id: i32, create: bool) -> Result<i32, Errno> {
    // SAFETY: plain integers.
    let r = unsafe {
        libc::syscall(
            libc::SYS_keyctl,
            KEYCTL_GET_KEYRING_ID,
            id,
            i32::from(create),
        )
    };
    if r < 0 {
        Err(Errno::from_raw_os_error(errno()))
    } else {
        Ok(r as i32)
    }
}

fn errno() -> i32 {
    std::io::Error::last_os_error()
        .raw_os_error()
        .unwrap_or(libc::EIO)
}

/// `keyctl` operations (`include/uapi/linux/keyctl.h`).
const KEYCTL_GET_KEYRING_ID: libc::c_int = 0;
const KEYCTL_LINK: libc::c_int = 8;
const KEYCTL_UNLINK: libc::c_int = 9;
const KEYCTL_SEARCH: libc::c_int = 10;
