//! Scratch loop-device ext4 for the kernel tests (feature `loopdev`), over
//! [`crate::loopfs::LoopExt4`], and raw edits of the device.

use std::os::unix::fs::{FileExt, MetadataExt};
use std::path::Path;

use crate::loopfs::LoopExt4;
use fscrypt_ext4::Ext4;

/// `mkfs.ext4` options of an fscrypt-capable ext4 with 4 KiB blocks.
pub const MKFS_4K: &[&str] = &["-b", "4096", "-O", "encrypt,stable_inodes"];

/// A mounted scratch ext4 of `size_mib` MiB made with `mkfs` options, or
/// `None` after a loud reason when this machine cannot make one (not root,
/// no loop devices, tools missing).
///
/// # Panics
/// If the machine can but creating it fails.
pub fn scratch_ext4(test: &str, size_mib: u64, mkfs: &[&str]) -> Option<LoopExt4> {
    if let Some(why) = LoopExt4::unavailable_reason() {
        eprintln!("\n*** SKIPPING kernel test {test}: {why} ***\n");
        return None;
    }
    match LoopExt4::create(size_mib, mkfs, "") {
        Ok(fs) => Some(fs),
        Err(e) => panic!("{test}: cannot create a scratch ext4: {e}"),
    }
}

/// Unmounts `fs`, retrying for up to 10 s while something (a scanner, a
/// close lagging under load) briefly keeps it busy.
///
/// # Panics
/// If it is still busy after that.
pub fn unmount_retrying(fs: &mut LoopExt4) {
    let mut last = None;
    for _ in 0..50 {
        match fs.unmount() {
            Ok(()) => return,
            Err(e) => last = Some(e),
        }
        std::thread::sleep(std::time::Duration::from_millis(200));
    }
    panic!("unmount: {last:?}");
}

/// A 64-byte master key made from `seed` (the same bytes for the same
/// seed: tests that make several images use several seeds).
pub fn key64(seed: u8) -> Vec<u8> {
    (0..64u8)
        .map(|i| i.wrapping_mul(29).wrapping_add(seed))
        .collect()
}

/// The physical block (read from the device with the ext4 reader) holding
/// logical block `lblk` of the file at `path`.
pub fn physical_block(dev: &Path, path: &Path, lblk: u64) -> u64 {
    let ino = std::fs::metadata(path).expect("stat").ino();
    let disk = Ext4::open(dev).expect("open");
    let inode = disk.read_inode(ino as u32).expect("inode");
    let ext = disk.extents(&inode).expect("extents");
    let e = ext
        .iter()
        .find(|e| e.logical <= lblk && lblk < e.logical + u64::from(e.len))
        .expect("mapped");
    e.physical + (lblk - e.logical)
}

/// XORs the byte at `off` of the device (or image) `dev` with `mask`, and
/// syncs.
pub fn flip_byte(dev: &Path, off: u64, mask: u8) {
    let f = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(dev)
        .expect("open dev");
    let mut b = [0u8; 1];
    f.read_exact_at(&mut b, off).expect("read");
    b[0] ^= mask;
    f.write_all_at(&b, off).expect("corrupt");
    f.sync_all().expect("sync");
}
