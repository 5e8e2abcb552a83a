//! The ext4 reader on images made by `mkfs.ext4 -d` (no root needed): it
//! reads what e2fsprogs wrote, and corrupted metadata gives typed errors,
//! never a panic or a hang.

use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::process::Command;

use fscrypt_ext4::{Ext4, InodeKind};
use test_support::TempDir;
use test_support::bytes::XorShift;
use test_support::skip::tool_available;

fn make_image(block: u32, extents: bool) -> Option<(TempDir, PathBuf)> {
    if !tool_available("ext4 reader test", "mkfs.ext4", &["-V"], "e2fsprogs") {
        return None;
    }
    let dir = TempDir::new(&format!("ext4-{block}-{extents}"));
    let src = dir.join("src");
    std::fs::create_dir_all(src.join("big_dir")).expect("mkdir");
    for i in 0..300 {
        // Long names force an htree directory.
        std::fs::write(
            src.join("big_dir")
                .join(format!("{i:04}-{}", "n".repeat(100))),
            b"",
        )
        .expect("write");
    }
    std::fs::write(
        src.join("data"),
        (0..50_000u32).map(|i| i as u8).collect::<Vec<_>>(),
    )
    .expect("write");
    std::os::unix::fs::symlink("short", src.join("fast")).expect("symlink");
    std::os::unix::fs::symlink("l".repeat(300), src.join("slow")).expect("symlink");
    let image = dir.join("image");
    std::fs::File::create(&image)
        .expect("create")
        .set_len(8 << 20)
        .expect("size");
    let bs = block.to_string();
    let mut args = vec!["-q", "-F", "-b", &bs, "-d", src.to_str().expect("utf-8")];
    if !extents {
        args.extend(["-O", "^extent,^64bit"]);
    }
    args.push(image.to_str().expect("utf-8"));
    test_support::run::succeed(Command::new("mkfs.ext4").args(&args));
    Some((dir, image))
}

/// Touch every inode the way verify does; returns (dirs, symlinks, files) read.
fn walk_all(fs: &Ext4) -> (usize, usize, usize) {
    let mut n = (0, 0, 0);
    for ino in 1..=fs.superblock().inodes_count.min(400) {
        let Ok(inode) = fs.read_inode(ino) else {
            continue;
        };
        let _ = fs.encryption_context(&inode);
        match inode.kind() {
            InodeKind::Directory => {
                if fs.dir_entries(&inode).is_ok() {
                    n.0 += 1;
                }
            }
            InodeKind::Symlink => {
                if fs.symlink_area(&inode).is_ok() {
                    n.1 += 1;
                }
            }
            InodeKind::Regular => {
                if let Ok(ext) = fs.extents(&inode) {
                    let _ = fs.read_logical_block(&ext, 0);
                    n.2 += 1;
                }
            }
            InodeKind::Other => {}
        }
    }
    n
}

fn check_clean(image: &Path, block: u32) {
    let fs = Ext4::open(image).expect("open");
    assert_eq!(fs.superblock().block_size, block);
    let root = fs.read_inode(2).expect("root");
    let entries = fs.dir_entries(&root).expect("root entries");
    let names: Vec<String> = entries
        .iter()
        .map(|e| String::from_utf8_lossy(&e.name).into_owned())
        .collect();
    for want in ["big_dir", "data", "fast", "slow", "lost+found"] {
        assert!(names.iter().any(|n| n == want), "{want} in {names:?}");
    }
    let get = |name: &str| {
        let e = entries
            .iter()
            .find(|e| e.name == name.as_bytes())
            .expect("entry");
        fs.read_inode(e.ino).expect("inode")
    };
    let big = get("big_dir");
    assert_eq!(fs.dir_entries(&big).expect("big dir").len(), 300);
    let data = get("data");
    let ext = fs.extents(&data).expect("extents");
    let mut all = Vec::new();
    for l in 0..50_000u64.div_ceil(u64::from(block)) {
        all.extend(
            fs.read_logical_block(&ext, l)
                .expect("read")
                .expect("mapped"),
        );
    }
    assert!(all[..50_000].iter().enumerate().all(|(i, &b)| b == i as u8));
    assert_eq!(&fs.symlink_area(&get("fast")).expect("fast")[..5], b"short");
    let slow = fs.symlink_area(&get("slow")).expect("slow");
    assert!(slow[..300].iter().all(|&b| b == b'l'));
}

fn fuzz(image: &Path, seed: u64) {
    let f = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(image)
        .expect("open");
    let len = 512 * 1024u64; // metadata lives near the start of a small image
    let mut x = XorShift(seed | 1);
    let mut rnd = || x.next_u64();
    for _ in 0..200 {
        let mut saved = Vec::new();
        for _ in 0..8 {
            let off = rnd() % len;
            let mut b = [0u8; 1];
            f.read_exact_at(&mut b, off).expect("read");
            saved.push((off, b[0]));
            f.write_all_at(&[rnd() as u8], off).expect("write");
        }
        if let Ok(fs) = Ext4::open(image) {
            let _ = walk_all(&fs);
        }
        for (off, b) in saved.into_iter().rev() {
            f.write_all_at(&[b], off).expect("restore");
        }
    }
}

#[test]
fn reads_mkfs_images_and_survives_corruption() {
    for (block, extents) in [(4096, true), (1024, true), (1024, false)] {
        let Some((_dir, image)) = make_image(block, extents) else {
            return;
        };
        check_clean(&image, block);
        let fs = Ext4::open(&image).expect("open");
        let (d, s, f) = walk_all(&fs);
        assert!(d >= 3 && s >= 2 && f >= 301, "{d} {s} {f}");
        drop(fs);
        fuzz(&image, u64::from(block) * 7 + u64::from(extents));
        check_clean(&image, block); // restored exactly
    }
}
