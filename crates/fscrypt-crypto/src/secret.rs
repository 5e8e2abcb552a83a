//! [`SecretBuf`]: memory for key material that stays out of core dumps,
//! out of forked children and (where the system allows) out of swap; and
//! [`SecretBox`], a value (a prepared cipher's key schedule, an HKDF state)
//! placed in such memory.
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

use std::sync::Mutex;

use rustix::mm::{Advice, MapFlags, ProtFlags};
use zeroize::Zeroize;

use crate::CipherKey;

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

/// Smallest slot of the key-object arena, in bytes (a cache line).
const MIN_SLOT: usize = 64;
/// Size classes of the arena: 64 bytes to 16 KiB, powers of two.
const CLASSES: usize = 9;
/// Bytes per arena chunk: one [`SecretBuf`] of 64 KiB, carved into slots.
const CHUNK: usize = 64 * 1024;

/// The arena behind [`SecretBox`]: chunks of locked, dump-excluded pages
/// (each a [`SecretBuf`], never unmapped), slots handed out by bumping, freed
/// slots kept per size class. A key object costs no `mmap` or `mlock` of its
/// own (those happen once per 64 KiB), so a per-file key stays cheap.
struct Arena {
    chunks: Vec<SecretBuf>,
    /// Next free byte of the last chunk.
    bump: usize,
    free: [Vec<usize>; CLASSES],
}

static ARENA: Mutex<Arena> = Mutex::new(Arena {
    chunks: Vec::new(),
    bump: CHUNK,
    free: [const { Vec::new() }; CLASSES],
});

/// The size class (index, slot bytes) of a layout, `None` when too big for
/// the arena.
fn class_of(size: usize, align: usize) -> Option<(usize, usize)> {
    let slot = size.max(align).max(MIN_SLOT).checked_next_power_of_two()?;
    let i = (slot / MIN_SLOT).trailing_zeros() as usize;
    (i < CLASSES).then_some((i, slot))
}

impl Arena {
    /// A zeroed slot of class `i` (`slot` bytes, aligned to `slot`), and
    /// whether its chunk is locked.
    fn take(&mut self, i: usize, slot: usize) -> (NonNull<u8>, bool) {
        if let Some(addr) = self.free[i].pop() {
            return (self.ptr(addr), self.locked(addr));
        }
        // Chunks are page-aligned and slots are powers of two no larger
        // than a chunk: aligning the offset aligns the address.
        let mut off = self.bump.next_multiple_of(slot);
        if off + slot > CHUNK {
            self.chunks.push(SecretBuf::new(CHUNK));
            off = 0;
        }
        let Some(chunk) = self.chunks.last() else {
            unreachable!("a chunk was just added")
        };
        self.bump = off + slot;
        let addr = chunk.ptr.as_ptr() as usize + off;
        (self.ptr(addr), chunk.locked)
    }

    fn ptr(&self, addr: usize) -> NonNull<u8> {
        let c = self
            .chunks
            .iter()
            .find(|c| (c.ptr.as_ptr() as usize..c.ptr.as_ptr() as usize + CHUNK).contains(&addr));
        let Some(c) = c else {
            unreachable!("arena slots lie in arena chunks")
        };
        let off = addr - c.ptr.as_ptr() as usize;
        // SAFETY: `off < CHUNK`, inside the chunk's mapping; the pointer
        // keeps the chunk's provenance.
        unsafe { NonNull::new_unchecked(c.ptr.as_ptr().add(off)) }
    }

    fn locked(&self, addr: usize) -> bool {
        self.chunks.iter().any(|c| {
            c.locked && (c.ptr.as_ptr() as usize..c.ptr.as_ptr() as usize + CHUNK).contains(&addr)
        })
    }
}

/// Where a [`SecretBox`]'s value lives.
enum Place {
    /// A slot of the arena, of size class `.0`.
    Slot(usize),
    /// Its own mapping (values larger than an arena slot).
    Own(#[allow(dead_code)] SecretBuf),
}

/// A value of type `T` (a prepared cipher's key schedule, an HKDF state)
/// kept in the same memory as [`SecretBuf`]: excluded from core dumps,
/// wiped in forked children, locked in RAM where the system allows. Small
/// values share 64 KiB chunks (slots of 64 bytes to 16 KiB); larger ones get
/// their own mapping. Dropping drops the value, then zeroizes its slot.
///
/// The value is built by the caller and moved in, so a copy may remain in
/// the caller's stack frame; code that builds keys calls [`scrub_stack`]
/// afterwards. Dereferences to `T`; `Debug` is redacted.
pub struct SecretBox<T: ?Sized> {
    ptr: NonNull<T>,
    place: Place,
    locked: bool,
}

// SAFETY: `SecretBox<T>` owns its `T` exclusively, as `Box<T>` does.
unsafe impl<T: ?Sized + Send> Send for SecretBox<T> {}
// SAFETY: as above; `&SecretBox<T>` hands out `&T` only.
unsafe impl<T: ?Sized + Sync> Sync for SecretBox<T> {}

impl<T> SecretBox<T> {
    /// Moves `value` into locked, dump-excluded memory.
    ///
    /// # Panics
    /// When the system cannot map memory for it (as a failed allocation
    /// would abort).
    pub fn new(value: T) -> SecretBox<T> {
        // Chunks and own mappings are page-aligned, and pages are at least
        // 4 KiB: that bounds the alignment a slot can honour.
        const { assert!(core::mem::align_of::<T>() <= 4096) };
        let (size, align) = (core::mem::size_of::<T>(), core::mem::align_of::<T>());
        let (raw, place, locked) = match class_of(size, align) {
            Some((i, slot)) => {
                let mut a = ARENA.lock().unwrap_or_else(|e| e.into_inner());
                let (p, locked) = a.take(i, slot);
                (p, Place::Slot(i), locked)
            }
            None => {
                // Page-aligned: enough for any alignment Rust types use.
                let b = SecretBuf::new(size);
                let (p, locked) = (b.ptr, b.locked);
                (p, Place::Own(b), locked)
            }
        };
        let ptr = raw.cast::<T>();
        // SAFETY: `ptr` is valid for writes of `size` bytes, aligned for `T`
        // (slots are aligned to their size, a power of two >= align), and
        // unused: this box owns it from now on.
        unsafe { ptr.as_ptr().write(value) };
        SecretBox { ptr, place, locked }
    }
}

impl<T: ?Sized> SecretBox<T> {
    /// Whether the memory is locked in RAM (`mlock` succeeded).
    pub fn is_locked(&self) -> bool {
        self.locked
    }
}

impl<T> SecretBox<T> {
    /// The same box as a trait object (or any unsized view of `T`):
    /// `cast` must be an unsizing cast (`|p| p as *mut dyn Trait`), which
    /// keeps the address.
    fn unsize<U: ?Sized>(self, cast: fn(*mut T) -> *mut U) -> SecretBox<U> {
        let me = core::mem::ManuallyDrop::new(self);
        let ptr = cast(me.ptr.as_ptr());
        // SAFETY: `cast` keeps the address (an unsizing cast); ownership of
        // the slot moves from `me` (never dropped) to the new box.
        let place = unsafe { core::ptr::read(&me.place) };
        SecretBox {
            ptr: NonNull::new(ptr).unwrap_or_else(|| unreachable!("non-null stays non-null")),
            place,
            locked: me.locked,
        }
    }
}

impl SecretBox<dyn CipherKey> {
    /// A prepared cipher key in locked memory, as a trait object: what a
    /// [`crate::registry::KeyConstructor`] returns.
    pub fn cipher_key<K: CipherKey + 'static>(key: K) -> SecretBox<dyn CipherKey> {
        SecretBox::new(key).unsize(|p| p as *mut dyn CipherKey)
    }
}

impl SecretBox<dyn crate::mac::MacKey> {
    /// A keyed MAC in locked memory, as a trait object: what a
    /// [`crate::registry::MacKeyConstructor`] returns.
    pub fn mac_key<K: crate::mac::MacKey + 'static>(key: K) -> SecretBox<dyn crate::mac::MacKey> {
        SecretBox::new(key).unsize(|p| p as *mut dyn crate::mac::MacKey)
    }
}

impl<T: ?Sized> core::ops::Deref for SecretBox<T> {
    type Target = T;
    fn deref(&self) -> &T {
        // SAFETY: `ptr` holds an initialised `T` owned by `self` until drop.
        unsafe { self.ptr.as_ref() }
    }
}

impl<T: ?Sized> core::ops::DerefMut for SecretBox<T> {
    fn deref_mut(&mut self) -> &mut T {
        // SAFETY: as in `deref`; the unique borrow of `self` makes this the
        // only reference.
        unsafe { self.ptr.as_mut() }
    }
}

impl<T: ?Sized> core::fmt::Debug for SecretBox<T> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str("SecretBox(<redacted>)")
    }
}

impl<T: ?Sized> Drop for SecretBox<T> {
    fn drop(&mut self) {
        // SAFETY: `ptr` holds an initialised `T` that nothing uses after
        // this; size and address come from it before it is dropped.
        let (size, raw) = unsafe {
            let size = core::mem::size_of_val(self.ptr.as_ref());
            core::ptr::drop_in_place(self.ptr.as_ptr());
            (size, self.ptr.as_ptr().cast::<u8>())
        };
        // SAFETY: the `size` bytes of the dropped value are ours to reuse.
        unsafe { core::slice::from_raw_parts_mut(raw, size) }.zeroize();
        if let Place::Slot(i) = self.place {
            let mut a = ARENA.lock().unwrap_or_else(|e| e.into_inner());
            a.free[i].push(raw as usize);
        }
        // `Place::Own`: the SecretBuf zeroizes and unmaps itself.
    }
}

/// Overwrites `STACK_SCRUB` bytes of the stack below the caller's frame with
/// zeros: where the functions it just called (key schedules, HKDF) left
/// copies of key material that were moved into a [`SecretBox`].
#[inline(never)]
pub fn scrub_stack() {
    let mut area = [0u8; STACK_SCRUB];
    area.zeroize();
    core::hint::black_box(&area);
}

/// Bytes of stack [`scrub_stack`] clears (the deepest key setup, AES-256
/// with VAES key schedules inside XTS or HCTR2, uses a few KiB).
const STACK_SCRUB: usize = 16 * 1024;

#[cfg(test)]
pub(crate) mod tests {
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
        let flags = vm_flags_of(s.as_ptr() as usize).expect("mapping not in /proc/self/smaps");
        assert!(flags.contains(" dd"), "not MADV_DONTDUMP: {flags}");
        assert!(flags.contains(" wf"), "not MADV_WIPEONFORK: {flags}");
        if s.is_locked() {
            assert!(flags.contains(" lo"), "not locked: {flags}");
        }
    }

    /// The `VmFlags:` line of the /proc/self/smaps mapping holding `addr`.
    pub(crate) fn vm_flags_of(addr: usize) -> Option<String> {
        let smaps = std::fs::read_to_string("/proc/self/smaps").ok()?;
        let mut lines = smaps.lines();
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
            return lines
                .by_ref()
                .find_map(|l| l.strip_prefix("VmFlags:"))
                .map(|f| format!("{f} "));
        }
        None
    }
}
