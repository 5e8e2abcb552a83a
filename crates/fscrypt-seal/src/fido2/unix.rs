//! A test transport: CTAPHID reports over a Unix stream socket, for
//! software authenticators (CI has no `/dev/uhid` and no security key).
//!
//! A device named `unix:/path/to/socket` is reached by connecting to that
//! socket; libfido2 then does all of CTAP2 over it through
//! `fido_dev_set_io_functions`. Framing: libfido2 writes each 64-byte
//! CTAPHID report preceded by its report-ID byte (0), 65 bytes in all, and
//! reads replies as bare 64-byte reports, exactly as over `/dev/hidraw`.
//! Nothing else differs from a USB key, so a test authenticator listening
//! there sees what a real key sees. It is never chosen by discovery: only
//! a device option spelled `unix:` uses it.

#![allow(unsafe_code)]

use std::ffi::{CStr, c_char, c_int, c_void};
use std::io::{Read, Write};
use std::os::unix::net::UnixStream;
use std::time::Duration;

use super::ffi::DevIo;

/// The prefix of a device option that names a socket.
pub const PREFIX: &str = "unix:";

/// The I/O functions libfido2 calls for a `unix:` device.
pub static IO: DevIo = DevIo {
    open: io_open,
    close: io_close,
    read: io_read,
    write: io_write,
};

unsafe extern "C" fn io_open(path: *const c_char) -> *mut c_void {
    if path.is_null() {
        return std::ptr::null_mut();
    }
    // SAFETY: libfido2 passes the NUL-terminated path given to fido_dev_open.
    let path = unsafe { CStr::from_ptr(path) };
    let Ok(path) = path.to_str() else {
        return std::ptr::null_mut();
    };
    match UnixStream::connect(path) {
        Ok(s) => Box::into_raw(Box::new(s)).cast(),
        Err(_) => std::ptr::null_mut(),
    }
}

unsafe extern "C" fn io_close(handle: *mut c_void) {
    if !handle.is_null() {
        // SAFETY: the handle is the Box made by io_open, closed once.
        drop(unsafe { Box::from_raw(handle.cast::<UnixStream>()) });
    }
}

unsafe extern "C" fn io_read(handle: *mut c_void, buf: *mut u8, len: usize, ms: c_int) -> c_int {
    if handle.is_null() || buf.is_null() {
        return -1;
    }
    // SAFETY: a live handle from io_open; libfido2 serializes calls on it.
    let stream = unsafe { &mut *handle.cast::<UnixStream>() };
    let timeout = (ms > 0).then(|| Duration::from_millis(ms as u64));
    if stream.set_read_timeout(timeout).is_err() {
        return -1;
    }
    // SAFETY: libfido2 passes a writable buffer of `len` bytes.
    let buf = unsafe { std::slice::from_raw_parts_mut(buf, len) };
    match stream.read_exact(buf) {
        Ok(()) => c_int::try_from(len).unwrap_or(-1),
        Err(_) => -1,
    }
}

unsafe extern "C" fn io_write(handle: *mut c_void, buf: *const u8, len: usize) -> c_int {
    if handle.is_null() || buf.is_null() {
        return -1;
    }
    // SAFETY: a live handle from io_open; libfido2 serializes calls on it.
    let stream = unsafe { &mut *handle.cast::<UnixStream>() };
    // SAFETY: libfido2 passes a readable buffer of `len` bytes.
    let buf = unsafe { std::slice::from_raw_parts(buf, len) };
    match stream.write_all(buf) {
        Ok(()) => c_int::try_from(len).unwrap_or(-1),
        Err(_) => -1,
    }
}
