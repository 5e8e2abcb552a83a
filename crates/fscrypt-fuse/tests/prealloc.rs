//! Real-mount tests of fallocate(2) on a vault, the behaviour xfstests
//! checks in generic/213 (preallocating beyond the free space fails with
//! `ENOSPC` and leaves the file as it was) and generic/568 (writing inside a
//! preallocated range takes no new blocks). Skipped loudly without root,
//! /dev/fuse or fusermount3 (and, for the `ENOSPC` test, without `mount`).

use std::fs::{self, File, OpenOptions};
use std::os::unix::fs::{FileExt, MetadataExt};
use std::path::Path;
use std::process::Command;

use fscrypt_fuse::layout::Format;
use test_support::fuse::{Vault, mount_config, mount_live, policy};
use test_support::need_fuse;
use test_support::tempdir::TempDir;

/// fallocate(2) on `f`; the errno on failure.
fn fallocate(f: &File, mode: i32, offset: u64, len: u64) -> Result<(), i32> {
    let flags = rustix::fs::FallocateFlags::from_bits_retain(mode as _);
    rustix::fs::fallocate(f, flags, offset, len).map_err(|e| e.raw_os_error())
}

fn open_rw(p: &Path) -> File {
    OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(true)
        .open(p)
        .unwrap()
}

/// The bytes allocated to the file behind `f` (`st_blocks` × 512, as
/// generic/568 measures with `stat -c '%b * %B'`).
fn allocated(f: &File) -> u64 {
    f.metadata().unwrap().blocks() * 512
}

/// generic/568: a plain fallocate of 2 bytes across a block boundary, then a
/// 2-byte write there: the file must not take more blocks than the
/// fallocate gave it, and its size is the fallocated end.
#[test]
fn write_inside_fallocated_range_takes_no_new_blocks() {
    need_fuse!();
    for format in [Format::LATEST, Format::V1] {
        write_inside_fallocated_range(format);
    }
}

fn write_inside_fallocated_range(format: Format) {
    let v = Vault::with_format("prealloc-568", policy(), format);
    let f = open_rw(&v.p("falloctest"));
    fallocate(&f, 0, 4095, 2).unwrap();
    assert_eq!(f.metadata().unwrap().len(), 4097);
    let before = allocated(&f);
    f.write_all_at(b"xy", 4095).unwrap();
    f.sync_all().unwrap();
    let after = allocated(&f);
    assert!(
        after <= before,
        "{format:?}: the file grew from {before} B to {after} B when writing to the fallocated range"
    );
    let mut back = [0u8; 2];
    f.read_exact_at(&mut back, 4095).unwrap();
    assert_eq!(&back, b"xy");
    assert_eq!(f.metadata().unwrap().len(), 4097);
}

/// `fallocate -k` (KEEP_SIZE): the size stays; a write inside the range
/// then makes the size what the write covers, and takes no new blocks.
#[test]
fn keep_size_reserves_blocks_without_growing_the_file() {
    need_fuse!();
    for format in [Format::LATEST, Format::V1] {
        keep_size_reserves_blocks(format);
    }
}

fn keep_size_reserves_blocks(format: Format) {
    let v = Vault::with_format("prealloc-keep", policy(), format);
    let f = open_rw(&v.p("kept"));
    fallocate(&f, libc::FALLOC_FL_KEEP_SIZE, 0, 256 * 1024).unwrap();
    assert_eq!(f.metadata().unwrap().len(), 0, "KEEP_SIZE changed the size");
    let before = allocated(&f);
    assert!(
        before >= 256 * 1024,
        "{format:?}: KEEP_SIZE reserved {before} B for a 256 KiB range"
    );
    let data: Vec<u8> = (0..100_000u32).map(|i| (i % 253) as u8).collect();
    f.write_all_at(&data, 0).unwrap();
    f.sync_all().unwrap();
    assert_eq!(f.metadata().unwrap().len(), 100_000);
    let after = allocated(&f);
    assert!(
        after <= before,
        "{format:?}: the file grew from {before} B to {after} B when writing to the preallocated range"
    );
    drop(f);
    assert_eq!(fs::read(v.p("kept")).unwrap(), data);
}

/// A tmpfs of `mib` MiB mounted on a temporary directory, unmounted on drop.
struct SmallFs {
    dir: TempDir,
}

impl SmallFs {
    fn mount(mib: u64) -> Option<SmallFs> {
        let dir = TempDir::new("prealloc-tmpfs");
        let out = Command::new("mount")
            .args(["-t", "tmpfs", "-o"])
            .arg(format!("size={mib}m,mode=0700"))
            .arg("tmpfs")
            .arg(dir.path())
            .output()
            .ok()?;
        if !out.status.success() {
            eprintln!(
                "\n*** SKIPPING prealloc ENOSPC test: cannot mount a tmpfs: {} ***\n",
                String::from_utf8_lossy(&out.stderr).trim()
            );
            return None;
        }
        Some(SmallFs { dir })
    }
}

impl Drop for SmallFs {
    fn drop(&mut self) {
        test_support::clear_mount(self.dir.path());
    }
}

/// generic/213: preallocating twice the free space fails with `ENOSPC`, and
/// the file keeps its size (no grown, sparse file left behind); the vault
/// still works afterwards.
#[test]
fn fallocate_beyond_free_space_is_enospc_and_changes_nothing() {
    need_fuse!();
    let Some(small) = SmallFs::mount(16) else {
        return;
    };
    let backing = small.dir.path().join("vault");
    fs::create_dir(&backing).unwrap();
    fscrypt_fuse::create_root_with(&backing, &policy(), Format::LATEST).unwrap();
    let mnt = TempDir::new("prealloc-enospc-mnt");
    let mount = mount_live(mount_config(&backing, policy(), true), mnt.path());
    {
        let f = open_rw(&mnt.path().join("ouch"));
        f.write_all_at(b"kept", 0).unwrap();
        for mode in [0, libc::FALLOC_FL_KEEP_SIZE] {
            assert_eq!(
                fallocate(&f, mode, 0, 64 << 20),
                Err(libc::ENOSPC),
                "fallocate mode {mode} of 64 MiB on a 16 MiB backing filesystem"
            );
            assert_eq!(
                f.metadata().unwrap().len(),
                4,
                "the size changed (mode {mode})"
            );
        }
        let mut back = [0u8; 4];
        f.read_exact_at(&mut back, 0).unwrap();
        assert_eq!(&back, b"kept");
        // Within the free space it still works, and grows the size.
        fallocate(&f, 0, 0, 1 << 20).unwrap();
        assert_eq!(f.metadata().unwrap().len(), 1 << 20);
    }
    fs::write(mnt.path().join("after"), b"still writable").unwrap();
    assert_eq!(
        fs::read(mnt.path().join("after")).unwrap(),
        b"still writable"
    );
    mount.unmount().expect("unmount");
    drop(small);
}
