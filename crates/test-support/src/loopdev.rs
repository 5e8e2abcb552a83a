//! Scratch loop-device ext4 for the kernel tests (feature `loopdev`), over
//! `fscrypt_linux::loopfs::LoopExt4`, and raw edits of the device.

use std::os::unix::fs::{FileExt, MetadataExt};
use std::path::Path;

use fscrypt_linux::ext4::Ext4;
use fscrypt_linux::loopfs::LoopExt4;

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
