//! [`SecretBuf`]: memory for key material that stays out of core dumps,
//! out of forked children and (where the system allows) out of swap.
//!
//! Each buffer is its own anonymous private mapping, advised
//! `MADV_DONTDUMP` (left out of core files) and `MADV_WIPEONFORK` (a
//! forked child sees zeros), and `mlock`ed; when `mlock` fails (e.g.
//! `RLIMIT_MEMLOCK` for an unprivileged user) the buffer still works and
//! one warning is logged per process. Dropping zeroizes, unlocks and
//! unmaps. This is the only module besides `awslc` with `unsafe`; every
//! block has a `// SAFETY:` comment.

#![allow(unsafe_code)]

use core::ffi::c_void;
use core::ptr::NonNull;
use std::sync::atomic::{AtomicBool, Ordering};

use rustix::mm::{Advice, MapFlags, ProtFlags};
use zeroize::Zeroize;

/// Whether the "cannot lock" warning was printed already.
static WARNED: AtomicBool = AtomicBool::new(false);

/// A fixed-size, zero-initialised byte buffer for secrets (keys,
/// passphrases, key-file contents) in pages excluded from core dumps,
/// wiped in forked children and locked in memory where the system allows.
///
/// Not `Clone`; its `Debug` shows the length only. Dereferences to
/// `[u8]`. Zeroized and unmapped on drop.
pub struct SecretBuf {
    ptr: NonNull<u8>,
    len: usize,
    map_len: usize,
    locked: bool,
}

// SAFETY: `SecretBuf` owns its mapping exclusively (like a `Box<[u8]>`):
// moving it to another thread moves that ownership, and shared references
// only hand out `&[u8]`.
unsafe impl Send for SecretBuf {}
// SAFETY: as above; `&SecretBuf` gives read-only access to plain bytes.
unsafe impl Sync for SecretBuf {}

impl SecretBuf {
    /// A buffer of `len` zero bytes.
    ///
    /// # Panics
    /// When the system cannot map one more page of memory (as a failed
    /// allocation would abort).
    pub fn new(len: usize) -> SecretBuf {
        let page = rustix::param::page_size();
        let map_len = len.max(1).div_ceil(page) * page;
        // SAFETY: a new anonymous private mapping at an address the kernel
        // chooses; it aliases nothing, and we are its only user.
        let ptr = unsafe {
            rustix::mm::mmap_anonymous(
                core::ptr::null_mut(),
                map_len,
                ProtFlags::READ | ProtFlags::WRITE,
                MapFlags::PRIVATE,
            )
        }
        .unwrap_or_else(|e| panic!("fscrypt-crypto: cannot map memory for a secret: {e}"));
        let ptr = NonNull::new(ptr.cast::<u8>()).expect("mmap returned a null mapping");
        let raw = ptr.as_ptr().cast::<c_void>();
        // SAFETY: `raw..raw+map_len` is the mapping made above; madvise and
        // mlock change how the kernel treats it, not its contents.
        let (dontdump, wipe, locked) = unsafe {
            (
                rustix::mm::madvise(raw, map_len, Advice::LinuxDontDump),
                rustix::mm::madvise(raw, map_len, Advice::LinuxWipeOnFork),
                rustix::mm::mlock(raw, map_len),
            )
        };
        if let Err(e) = dontdump.and(wipe) {
            warn_once(format_args!(
                "fscrypt-crypto: cannot exclude key memory from core dumps: {e}"
            ));
        }
        if let Err(e) = &locked {
            warn_once(format_args!(
                "fscrypt-crypto: cannot lock key memory ({e}); it may be swapped out (raise RLIMIT_MEMLOCK to avoid this)"
            ));
        }
        SecretBuf {
            ptr,
            len,
            map_len,
            locked: locked.is_ok(),
        }
    }

    /// A buffer holding a copy of `bytes`.
    pub fn from_slice(bytes: &[u8]) -> SecretBuf {
        let mut s = SecretBuf::new(bytes.len());
        s.copy_from_slice(bytes);
        s
    }

    /// Whether the pages are locked in memory (`mlock` succeeded).
    pub fn is_locked(&self) -> bool {
        self.locked
    }

    /// The bytes.
    pub fn as_bytes(&self) -> &[u8] {
        // SAFETY: `ptr` points to `map_len >= len` bytes, mapped readable
        // and writable for the lifetime of `self`, and initialised (zero
        // pages); the borrow of `self` keeps them from being unmapped or
        // mutated meanwhile.
        unsafe { core::slice::from_raw_parts(self.ptr.as_ptr(), self.len) }
    }

    /// The bytes, mutably.
    pub fn as_mut_bytes(&mut self) -> &mut [u8] {
        // SAFETY: as in `as_bytes`; the unique borrow of `self` makes this
        // the only reference to the bytes.
        unsafe { core::slice::from_raw_parts_mut(self.ptr.as_ptr(), self.len) }
    }
}

fn warn_once(msg: core::fmt::Arguments<'_>) {
    if !WARNED.swap(true, Ordering::Relaxed) {
        log::warn!("{msg}");
    }
}

impl core::ops::Deref for SecretBuf {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        self.as_bytes()
    }
}

impl core::ops::DerefMut for SecretBuf {
    fn deref_mut(&mut self) -> &mut [u8] {
        self.as_mut_bytes()
    }
}

impl AsRef<[u8]> for SecretBuf {
    fn as_ref(&self) -> &[u8] {
        self.as_bytes()
    }
}

impl AsMut<[u8]> for SecretBuf {
    fn as_mut(&mut self) -> &mut [u8] {
        self.as_mut_bytes()
    }
}

impl core::fmt::Debug for SecretBuf {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("SecretBuf")
            .field("len", &self.len)
            .finish_non_exhaustive()
    }
}

impl Drop for SecretBuf {
    fn drop(&mut self) {
        // The whole mapping, not only `len`: nothing may outlive the buffer.
        let raw = self.ptr.as_ptr();
        // SAFETY: the mapping is `map_len` writable bytes owned by `self`.
        let all = unsafe { core::slice::from_raw_parts_mut(raw, self.map_len) };
        all.zeroize();
        // SAFETY: unlock and unmap exactly the mapping made in `new`; no
        // reference into it survives `drop`.
        unsafe {
            if self.locked {
                let _ = rustix::mm::munlock(raw.cast(), self.map_len);
            }
            let _ = rustix::mm::munmap(raw.cast(), self.map_len);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::SecretBuf;

    #[test]
    fn holds_bytes_and_hides_them() {
        let mut s = SecretBuf::new(64);
        assert_eq!(s.len(), 64);
        assert!(s.iter().all(|&b| b == 0));
        s[3] = 7;
        let t = SecretBuf::from_slice(&s);
        assert_eq!(t.as_bytes(), s.as_bytes());
        assert_eq!(format!("{t:?}"), "SecretBuf { len: 64, .. }");
        let big = SecretBuf::from_slice(&[0xa5; 10000]);
        assert_eq!(big.len(), 10000);
        assert!(big.iter().all(|&b| b == 0xa5));
        assert!(SecretBuf::new(0).is_empty());
    }

    #[test]
    fn pages_are_dontdump_and_locked() {
        let s = SecretBuf::from_slice(b"0123456789abcdef");
        let addr = s.as_ptr() as usize;
        let smaps = std::fs::read_to_string("/proc/self/smaps").unwrap();
        let mut lines = smaps.lines();
        let mut found = false;
        while let Some(l) = lines.next() {
            let Some((range, _)) = l.split_once(' ') else {
                continue;
            };
            let Some((lo, hi)) = range.split_once('-') else {
                continue;
            };
            let (Ok(lo), Ok(hi)) = (usize::from_str_radix(lo, 16), usize::from_str_radix(hi, 16))
            else {
                continue;
            };
            if !(lo..hi).contains(&addr) {
                continue;
            }
            for l in lines.by_ref() {
                if let Some(flags) = l.strip_prefix("VmFlags:") {
                    assert!(flags.contains(" dd"), "not MADV_DONTDUMP: {flags}");
                    assert!(flags.contains(" wf"), "not MADV_WIPEONFORK: {flags}");
                    if s.is_locked() {
                        assert!(flags.contains(" lo"), "not locked: {flags}");
                    }
                    found = true;
                    break;
                }
            }
            break;
        }
        assert!(found, "mapping not in /proc/self/smaps");
    }
}
