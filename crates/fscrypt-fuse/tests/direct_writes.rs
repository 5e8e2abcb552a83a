//! Write-only handles use the kernel's direct-write path (`FOPEN_DIRECT_IO`,
//! fuse.rs `open_flags`): what a writer does through one must look exactly
//! as a cached write did to everyone else. Readers that hold the file's
//! pages in the page cache (read(2) and a shared mapping) see the new
//! bytes and the new size; a write by a caller without CAP_FSETID clears
//! setuid, and setgid where the group may execute, as the kernel's own
//! cached path does; root's writes keep them.

use std::fs::{self, File, OpenOptions};
use std::io::{Read, Seek, SeekFrom, Write};
use std::os::unix::fs::{FileExt, MetadataExt, PermissionsExt};

use test_support::fuse::Vault;
use test_support::fuse_available;

fn pattern(seed: u8, len: usize) -> Vec<u8> {
    (0..len)
        .map(|i| (i as u8).wrapping_mul(31) ^ seed)
        .collect()
}

#[test]
fn cached_readers_see_write_only_writes() {
    if !fuse_available(module_path!()) {
        return;
    }
    let v = Vault::new("direct-coherence");
    let path = v.p("f");
    let old = pattern(1, 3 * 4096);
    fs::write(&path, &old).unwrap();

    // A reader with every page cached, by read(2) and by a shared mapping.
    let mut reader = File::open(&path).unwrap();
    let mut seen = Vec::new();
    reader.read_to_end(&mut seen).unwrap();
    assert_eq!(seen, old);
    let map = Mapping::new(&reader, old.len());
    assert_eq!(map.bytes(), &old[..]);

    // A write-only writer: a middle page, a partial page, and an append
    // past the old end.
    let mut w = OpenOptions::new().write(true).open(&path).unwrap();
    let mid = pattern(2, 4096);
    w.write_all_at(&mid, 4096).unwrap();
    w.write_all_at(b"partial", 100).unwrap();
    w.seek(SeekFrom::Start(old.len() as u64)).unwrap();
    let tail = pattern(3, 5000);
    w.write_all(&tail).unwrap();

    let mut want = old.clone();
    want[4096..8192].copy_from_slice(&mid);
    want[100..107].copy_from_slice(b"partial");
    want.extend_from_slice(&tail);
    assert_eq!(reader.metadata().unwrap().len(), want.len() as u64);
    let mut now = vec![0u8; want.len()];
    reader.read_exact_at(&mut now, 0).unwrap();
    assert_eq!(now, want, "read(2) of a cached reader");
    assert_eq!(map.bytes(), &want[..old.len()], "shared mapping");
    drop(map);
    drop(w);
    drop(reader);
    assert_eq!(fs::read(&path).unwrap(), want, "a fresh open");
}

#[test]
fn writes_by_another_user_clear_setuid_as_the_kernel_does() {
    if !fuse_available(module_path!()) {
        return;
    }
    if !test_support::skip::setpriv_available(module_path!()) {
        return;
    }
    let v = Vault::new("direct-killpriv");
    fs::set_permissions(v.mnt.path(), PermissionsExt::from_mode(0o755)).unwrap();
    // (mode before, mode after a write by uid 65534): setuid always goes;
    // setgid only with group execute (otherwise it marks mandatory
    // locking, which a write keeps).
    let cases = [
        (0o4777, 0o0777),
        (0o2777, 0o0777),
        (0o6777, 0o0777),
        (0o2767, 0o2767),
        (0o0666, 0o0666),
    ];
    for (i, (before, after)) in cases.into_iter().enumerate() {
        let path = v.p(&format!("f{i}"));
        fs::write(&path, b"root's\n").unwrap();
        fs::set_permissions(&path, PermissionsExt::from_mode(before)).unwrap();
        let out = test_support::users::nobody_sh("printf 'theirs\\n' >> \"$1\"")
            .arg(&path)
            .output()
            .expect("run setpriv");
        assert!(out.status.success(), "mode {before:o}: {out:?}");
        let mode = fs::metadata(&path).unwrap().mode() & 0o7777;
        assert_eq!(mode, after, "mode {before:o} after a write by 65534");
        assert_eq!(fs::read(&path).unwrap(), b"root's\ntheirs\n");

        // Root (CAP_FSETID) writes and keeps the bits.
        fs::set_permissions(&path, PermissionsExt::from_mode(before)).unwrap();
        OpenOptions::new()
            .append(true)
            .open(&path)
            .unwrap()
            .write_all(b"root again\n")
            .unwrap();
        let mode = fs::metadata(&path).unwrap().mode() & 0o7777;
        assert_eq!(mode, before, "mode {before:o} after a write by root");
    }
}

/// A read-only shared mapping of a whole file, unmapped on drop.
struct Mapping {
    ptr: *mut libc::c_void,
    len: usize,
}

impl Mapping {
    fn new(f: &File, len: usize) -> Mapping {
        use std::os::fd::AsRawFd;
        // SAFETY: a fresh read-only mapping of an open file; `len` is its
        // size, and the mapping lives until drop.
        #[allow(unsafe_code)]
        let ptr = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ,
                libc::MAP_SHARED,
                f.as_raw_fd(),
                0,
            )
        };
        assert_ne!(ptr, libc::MAP_FAILED, "mmap");
        Mapping { ptr, len }
    }

    fn bytes(&self) -> &[u8] {
        // SAFETY: the mapping is `len` readable bytes until drop.
        #[allow(unsafe_code)]
        unsafe {
            std::slice::from_raw_parts(self.ptr.cast::<u8>(), self.len)
        }
    }
}

impl Drop for Mapping {
    fn drop(&mut self) {
        // SAFETY: unmaps exactly what `new` mapped.
        #[allow(unsafe_code)]
        unsafe {
            libc::munmap(self.ptr, self.len);
        }
    }
}
