//! `fscrypt-rs image mount` against the kernel (issue 14): the kernel fills
//! an encrypted directory (and an unencrypted one beside it) on a loop
//! ext4; its view is collected read-only with the key and without it; the
//! filesystem is unmounted and the image file mounted through our FUSE
//! reader, walked with real syscalls (readdir, lstat, pread at random
//! offsets, readlink, getxattr) and compared name by name and byte by byte.
//! Writes fail with EROFS, a locked file's open fails like the kernel's,
//! the image's bytes are unchanged, and a corrupt file gives EIO while the
//! rest of the mount keeps working.
//!
//! Needs root, loop devices and /dev/fuse; skipped loudly otherwise.
//! Guards unmount, detach and remove everything even on failure. The
//! kernel and our mount never have the same image mounted at once.

use std::collections::BTreeMap;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{FileExt, MetadataExt};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::Duration;

use fscrypt_ext4::{EXT4_INLINE_DATA_FL, Ext4};
use test_support::loopdev::{MKFS_4K, key64, scratch_ext4, unmount_retrying};
use test_support::mount::{MountGuard, wait_mounted};
use test_support::{TempDir, skip};

const BIN: &str = env!("CARGO_BIN_EXE_fscrypt-rs");

/// One test of this file at a time: the in-process mount of
/// `read_through_engine` is unmounted by this process, and a child another
/// test forks in the meantime holds the mount's open files until its exec
/// (the unmount then fails with EBUSY).
static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn serial() -> std::sync::MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|p| p.into_inner())
}

fn run(args: &[&str]) -> Output {
    test_support::run::output(Command::new(BIN).args(args), &[])
}

fn ok(args: &[&str]) -> Vec<u8> {
    let o = run(args);
    assert!(
        o.status.success(),
        "{args:?}: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    o.stdout
}

fn p(path: &Path) -> &str {
    path.to_str().expect("utf-8 path")
}

/// One object as seen through a mount.
#[derive(Debug, PartialEq, Eq)]
struct Seen {
    mode: u32,
    uid: u32,
    gid: u32,
    size: u64,
    nlink: u64,
    mtime: (i64, i64),
    ctime: (i64, i64),
    rdev: u64,
    blocks: u64,
    /// Hard-link group: the smallest path with this inode.
    ino: u64,
    /// Contents (regular files, when read), or the symlink target, or the
    /// open error's errno.
    data: Result<Vec<u8>, i32>,
    xattrs: Vec<(Vec<u8>, Vec<u8>)>,
}

fn xattrs(path: &Path) -> Vec<(Vec<u8>, Vec<u8>)> {
    let mut names = vec![0u8; 4096];
    let n = rustix::fs::llistxattr(path, &mut names[..]).unwrap_or(0);
    let mut out = Vec::new();
    for name in names[..n].split(|&b| b == 0).filter(|n| !n.is_empty()) {
        let mut v = vec![0u8; 4096];
        let name_s = std::ffi::OsStr::from_bytes(name);
        let k = rustix::fs::lgetxattr(path, name_s, &mut v[..]).expect("getxattr");
        out.push((name.to_vec(), v[..k].to_vec()));
    }
    out.sort();
    out
}

/// Walk `root`: relative path -> what is seen. `read`: read regular files.
fn walk(root: &Path, read: bool) -> BTreeMap<String, Seen> {
    let mut out = BTreeMap::new();
    let mut stack = vec![PathBuf::new()];
    let mut first_of_ino: BTreeMap<u64, u64> = BTreeMap::new();
    let mut n = 0u64;
    while let Some(rel) = stack.pop() {
        let mut entries: Vec<_> = std::fs::read_dir(root.join(&rel))
            .expect("read_dir")
            .map(|e| e.expect("entry").file_name())
            .collect();
        entries.sort();
        for name in entries {
            let r = rel.join(&name);
            let path = root.join(&r);
            let key = r.to_string_lossy().into_owned();
            let m0 = std::fs::symlink_metadata(&path).expect("lstat");
            let ft = m0.file_type();
            let data = if ft.is_dir() {
                stack.push(r.clone());
                Ok(Vec::new())
            } else if ft.is_symlink() {
                Ok(std::fs::read_link(&path)
                    .expect("readlink")
                    .as_os_str()
                    .as_bytes()
                    .to_vec())
            } else if ft.is_file() && read {
                std::fs::read(&path).map_err(|e| e.raw_os_error().unwrap_or(0))
            } else if ft.is_file() {
                std::fs::File::open(&path)
                    .map(|_| Vec::new())
                    .map_err(|e| e.raw_os_error().unwrap_or(0))
            } else {
                Ok(Vec::new())
            };
            // After reading: the kernel's relatime may have moved atime
            // (atime is not compared; everything else is).
            let m = std::fs::symlink_metadata(&path).expect("lstat");
            n += 1;
            let group = *first_of_ino.entry(m.ino()).or_insert(n);
            out.insert(
                key,
                Seen {
                    mode: m.mode(),
                    uid: m.uid(),
                    gid: m.gid(),
                    size: m.size(),
                    nlink: m.nlink(),
                    mtime: (m.mtime(), m.mtime_nsec()),
                    ctime: (m.ctime(), m.ctime_nsec()),
                    rdev: m.rdev(),
                    blocks: m.blocks(),
                    ino: group,
                    data,
                    xattrs: xattrs(&path),
                },
            );
        }
    }
    out
}

fn populate(mnt: &Path, enc: &Path) {
    let names = enc.join("names");
    std::fs::create_dir(&names).expect("mkdir");
    for len in 1..=255usize {
        let name: String = (0..len)
            .map(|i| (b'a' + ((i + len) % 26) as u8) as char)
            .collect();
        std::fs::write(names.join(&name), name.as_bytes()).expect("write");
    }
    for size in [0usize, 1, 4095, 4096, 4097] {
        let data: Vec<u8> = (0..size).map(|i| (i * 7 + size) as u8).collect();
        std::fs::write(enc.join(format!("f{size}")), data).expect("write");
    }
    // Multi-MiB, in several extents (written far apart, then filled).
    let big: Vec<u8> = (0..(5u32 << 20) + 123)
        .map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8)
        .collect();
    let f = std::fs::File::create(enc.join("big")).expect("create");
    f.write_all_at(&big[4 << 20..], 4 << 20).expect("write");
    f.sync_all().expect("sync");
    f.write_all_at(&big[..4 << 20], 0).expect("write");
    drop(f);
    // Sparse: 8 MiB with data in the middle and a trailing hole.
    let s = std::fs::File::create(enc.join("sparse")).expect("create");
    s.write_all_at(b"middle of a sparse file", (4 << 20) + 100)
        .expect("write");
    s.set_len(8 << 20).expect("truncate");
    std::fs::hard_link(enc.join("f4097"), enc.join("hardlink")).expect("link");
    std::os::unix::fs::symlink("f1", enc.join("short-link")).expect("symlink");
    std::os::unix::fs::symlink("l".repeat(3000), enc.join("long-link")).expect("symlink");
    rustix::fs::mknodat(
        rustix::fs::CWD,
        enc.join("fifo"),
        rustix::fs::FileType::Fifo,
        rustix::fs::Mode::from_raw_mode(0o640),
        0,
    )
    .expect("mkfifo");
    let deep = enc.join("a/b/c/d/e/f/g/h");
    std::fs::create_dir_all(&deep).expect("mkdir -p");
    std::fs::write(deep.join("deep file"), b"deep").expect("write");
    rustix::fs::lsetxattr(
        enc.join("f4096"),
        "user.note",
        b"hello xattr",
        rustix::fs::XattrFlags::empty(),
    )
    .expect("setxattr");
    std::fs::set_permissions(
        enc.join("f1"),
        std::os::unix::fs::PermissionsExt::from_mode(0o600),
    )
    .expect("chmod");
    rustix::fs::chown(
        enc.join("f1"),
        Some(rustix::process::Uid::from_raw(1234)),
        Some(rustix::process::Gid::from_raw(5678)),
    )
    .expect("chown");
    std::fs::create_dir(mnt.join("plain")).expect("mkdir");
    std::fs::write(mnt.join("plain/readme"), b"unencrypted").expect("write");
    std::fs::hard_link(mnt.join("plain/readme"), mnt.join("plain/readme2")).expect("link");
    rustix::fs::sync();
}

fn sha256(path: &Path) -> String {
    let o = Command::new("sha256sum")
        .arg(path)
        .output()
        .expect("sha256sum");
    assert!(o.status.success());
    String::from_utf8_lossy(&o.stdout)
        .split_whitespace()
        .next()
        .expect("sum")
        .to_string()
}

/// Mount `image` through `image mount` at `mnt` with `keys`; the guard
/// unmounts.
fn our_mount(image: &Path, mnt: &Path, keys: &[&Path]) -> MountGuard {
    let mut args = vec!["image", "mount", p(image), p(mnt)];
    for k in keys {
        args.extend(["--key-file", p(k)]);
    }
    let guard = MountGuard::new(BIN, mnt);
    ok(&args);
    assert!(wait_mounted(mnt, Duration::from_secs(20)), "not mounted");
    guard
}

fn remount_ro(mnt: &Path) {
    let st = Command::new("mount")
        .args(["-o", "remount,ro", p(mnt)])
        .status()
        .expect("mount");
    assert!(st.success(), "remount ro");
}

fn errno_of<T>(r: std::io::Result<T>) -> Option<i32> {
    r.err().and_then(|e| e.raw_os_error())
}

#[test]
fn image_mount_matches_kernel() {
    let test = "image_mount_matches_kernel";
    let _serial = serial();
    if !skip::fuse_available(test) {
        return;
    }
    let Some(mut fs) = scratch_ext4(test, 64, MKFS_4K) else {
        return;
    };
    let tmp = TempDir::new(test);
    let kf = tmp.path().join("key");
    std::fs::write(&kf, key64(5)).expect("key file");
    let mnt = fs.mount_point().to_path_buf();
    let id = String::from_utf8(ok(&["add-key", p(&mnt), "--key-file", p(&kf)]))
        .expect("utf-8")
        .trim()
        .to_string();
    let enc = mnt.join("enc");
    std::fs::create_dir(&enc).expect("mkdir");
    ok(&["set-policy", &id, p(&enc)]);
    populate(&mnt, &enc);
    // The kernel's view, read-only, with the key.
    remount_ro(&mnt);
    let kernel = walk(&mnt, true);
    fs.unmount().expect("unmount");
    // Without the key (a fresh mount has no key), read-only.
    fs.mount().expect("mount");
    remount_ro(&mnt);
    let kernel_nokey = walk(&mnt, false);
    fs.unmount().expect("unmount");
    assert!(kernel.len() > 270, "the whole tree was walked");
    assert!(kernel.contains_key("enc/f4096") && !kernel_nokey.contains_key("enc/f4096"));
    assert_eq!(kernel.len(), kernel_nokey.len());
    let image = fs.image().to_path_buf();
    let before = sha256(&image);

    let ours_mnt = tmp.sub("ours");
    {
        let g = our_mount(&image, &ours_mnt, &[&kf]);
        let ours = walk(&ours_mnt, true);
        assert_eq!(ours.len(), kernel.len(), "same number of objects");
        for (k, v) in &kernel {
            let Some(o) = ours.get(k) else {
                panic!("{k}: missing in our mount");
            };
            assert_eq!(o, v, "{k}");
        }
        assert!(kernel.contains_key("enc/a/b/c/d/e/f/g/h/deep file"));
        assert_eq!(kernel["enc/f4096"].xattrs.len(), 1, "the xattr is compared");

        // pread at random offsets, byte by byte.
        let Ok(want) = &kernel["enc/big"].data else {
            panic!("big unreadable by the kernel");
        };
        let f = std::fs::File::open(ours_mnt.join("enc/big")).expect("open");
        let mut x = 12345u64;
        for _ in 0..200 {
            x = x.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1);
            let off = (x >> 20) % (want.len() as u64 + 10);
            let len = ((x >> 8) % 70_000) as usize;
            let mut buf = vec![0u8; len];
            let n = f.read_at(&mut buf, off).expect("pread");
            let o = (off as usize).min(want.len());
            let end = (o + len).min(want.len());
            assert_eq!(&buf[..n], &want[o..end], "pread {off} {len}");
        }
        let s = std::fs::File::open(ours_mnt.join("enc/sparse")).expect("open");
        let mut buf = vec![1u8; 200];
        s.read_exact_at(&mut buf, (4 << 20) + 50).expect("pread");
        assert_eq!(&buf[..50], &[0u8; 50][..]);
        assert_eq!(&buf[50..73], b"middle of a sparse file");
        drop((f, s));

        // Writes: EROFS.
        let erofs = Some(libc::EROFS);
        assert_eq!(
            errno_of(
                std::fs::OpenOptions::new()
                    .write(true)
                    .open(ours_mnt.join("enc/f1"))
            ),
            erofs
        );
        assert_eq!(
            errno_of(std::fs::create_dir(ours_mnt.join("enc/new"))),
            erofs
        );
        assert_eq!(
            errno_of(std::fs::remove_file(ours_mnt.join("enc/f0"))),
            erofs
        );
        assert_eq!(
            errno_of(std::fs::write(ours_mnt.join("plain/new"), b"x")),
            erofs
        );
        assert_eq!(
            rustix::fs::lsetxattr(
                ours_mnt.join("enc/f0"),
                "user.x",
                b"y",
                rustix::fs::XattrFlags::empty()
            )
            .err(),
            Some(rustix::io::Errno::ROFS)
        );
        // No system. namespace here (ACLs are not enforced): EOPNOTSUPP,
        // which GNU ls -l remembers per mount instead of asking per entry.
        let mut v = [0u8; 64];
        assert_eq!(
            rustix::fs::lgetxattr(
                ours_mnt.join("enc/f0"),
                "system.posix_acl_access",
                &mut v[..]
            )
            .err(),
            Some(rustix::io::Errno::OPNOTSUPP)
        );
        let mi = std::fs::read_to_string("/proc/self/mountinfo").expect("mountinfo");
        let line = mi
            .lines()
            .find(|l| l.contains(p(&ours_mnt)))
            .expect("our mount in mountinfo");
        for opt in ["ro", "nosuid", "nodev"] {
            assert!(
                line.split(' ')
                    .nth(5)
                    .is_some_and(|o| o.split(',').any(|w| w == opt)),
                "{opt}: {line}"
            );
        }
        g.unmount();
    }

    // Without the key: the kernel's no-key names, targets and open errors.
    {
        let g = our_mount(&image, &ours_mnt, &[]);
        let ours = walk(&ours_mnt, false);
        let kn: Vec<&String> = kernel_nokey.keys().collect();
        let on: Vec<&String> = ours.keys().collect();
        assert_eq!(on, kn, "no-key names");
        for (k, v) in &kernel_nokey {
            assert_eq!(&ours[k], v, "{k} without the key");
        }
        assert!(
            kernel_nokey.values().any(|s| s.data == Err(libc::ENOKEY)),
            "the kernel refused a locked file with ENOKEY"
        );
        g.unmount();
    }
    assert_eq!(sha256(&image), before, "the image is unchanged");

    // A corrupt file: EIO for it, the rest still served.
    let bad = tmp.path().join("bad.img");
    let st = Command::new("cp")
        .args(["--sparse=always", p(&image), p(&bad)])
        .status()
        .expect("cp");
    assert!(st.success());
    let ino = {
        // The inode number of enc/f4097 as our reader names it.
        let g = our_mount(&bad, &ours_mnt, &[&kf]);
        let i = std::fs::metadata(ours_mnt.join("enc/f4097"))
            .expect("stat")
            .ino();
        g.unmount();
        i as u32
    };
    let off = Ext4::open(&bad)
        .expect("open")
        .inode_offset(ino)
        .expect("off")
        + 0x28;
    let w = std::fs::OpenOptions::new()
        .write(true)
        .open(&bad)
        .expect("open");
    w.write_all_at(&[0, 0], off).expect("write");
    drop(w);
    {
        let g = our_mount(&bad, &ours_mnt, &[&kf]);
        let e = std::fs::read(ours_mnt.join("enc/f4097"));
        assert_eq!(errno_of(e), Some(libc::EIO), "corrupt file: EIO");
        assert_eq!(
            std::fs::read(ours_mnt.join("enc/f4096")).expect("still served"),
            kernel["enc/f4096"].data.clone().expect("data")
        );
        assert!(rustix::fs::statfs(&ours_mnt).is_ok(), "daemon alive");
        g.unmount();
    }
}

/// Issue 20 item 7: a directory entry whose name holds `/` (a crafted
/// directory block: the kernel wrote the name with `@` in its place, the
/// test patches the image's bytes) is skipped, and the rest of the
/// directory is listed and served, instead of the whole readdir failing
/// with EIO.
#[test]
fn a_name_with_a_slash_is_skipped() {
    let test = "image_mount_slash_name";
    let _serial = serial();
    if !skip::fuse_available(test) {
        return;
    }
    let Some(mut fs) = scratch_ext4(test, 32, MKFS_4K) else {
        return;
    };
    let tmp = TempDir::new(test);
    let mnt = fs.mount_point().to_path_buf();
    let d = mnt.join("d");
    std::fs::create_dir(&d).expect("mkdir");
    let marker = "crafted@q7ZkR2vX";
    for name in ["before", marker, "zafter"] {
        std::fs::write(d.join(name), name).expect("write");
    }
    fs.unmount().expect("unmount");
    let image = fs.image().to_path_buf();
    let mut bytes = std::fs::read(&image).expect("read image");
    let mut patched = 0;
    let m = marker.as_bytes();
    for i in 0..bytes.len().saturating_sub(m.len()) {
        if &bytes[i..i + m.len()] == m {
            bytes[i + 7] = b'/';
            patched += 1;
        }
    }
    assert!(patched >= 1, "the name is in the image");
    std::fs::write(&image, &bytes).expect("write image");
    drop(bytes);

    let ours = tmp.sub("ours");
    let _g = our_mount(&image, &ours, &[]);
    let mut names: Vec<String> = std::fs::read_dir(ours.join("d"))
        .expect("opendir")
        .map(|e| {
            e.expect("readdir: no EIO for the whole directory")
                .file_name()
                .to_string_lossy()
                .into_owned()
        })
        .collect();
    names.sort();
    assert_eq!(names, ["before", "zafter"]);
    assert_eq!(
        std::fs::read(ours.join("d/zafter")).expect("read"),
        b"zafter"
    );
}

/// An encrypted file of the image, mounted in this process through the
/// FUSE engine (`fscrypt_fuse::image::mount_background`), read back whole;
/// returns the requests the mount served (its stats).
fn read_through_engine(test: &str, io_uring: bool) -> Option<fscrypt_fuse::StatsSnapshot> {
    let mut fs = scratch_ext4(test, 64, MKFS_4K)?;
    let tmp = TempDir::new(test);
    let kf = tmp.path().join("key");
    std::fs::write(&kf, key64(7)).expect("key file");
    let mnt = fs.mount_point().to_path_buf();
    let id = String::from_utf8(ok(&["add-key", p(&mnt), "--key-file", p(&kf)]))
        .expect("utf-8")
        .trim()
        .to_string();
    let enc = mnt.join("enc");
    std::fs::create_dir(&enc).expect("mkdir");
    ok(&["set-policy", &id, p(&enc)]);
    let data: Vec<u8> = (0..300_000u32).map(|i| (i * 7 % 251) as u8).collect();
    std::fs::write(enc.join("data"), &data).expect("write");
    rustix::fs::sync();
    fs.unmount().expect("unmount");
    let mut keys = fscrypt_ext4::image::KeySet::new();
    keys.add_file(&kf).expect("key");
    let img = fscrypt_ext4::image::Image::open(fs.image(), keys).expect("image");
    let ours = tmp.sub("ours");
    let config = fscrypt_fuse::image::ImageMountConfig {
        allow_other: false,
        fs_name: "image-engine-test".into(),
        io_uring,
    };
    let m = fscrypt_fuse::image::mount_background(img, config, &ours).expect("mount");
    if io_uring {
        // Every CPU's queue registers after INIT: look names up until one
        // arrives through the ring.
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        let mut i = 0;
        while m.stats().through_ring() == 0 {
            assert!(
                std::time::Instant::now() < deadline,
                "no request came through io_uring in 10 s"
            );
            let _ = std::fs::symlink_metadata(ours.join(format!("absent-{i}")));
            i += 1;
            std::thread::sleep(Duration::from_millis(5));
        }
    }
    let before = m.stats();
    assert_eq!(std::fs::read(ours.join("enc/data")).expect("read"), data);
    let served = m.stats().since(&before);
    m.unmount().expect("unmount");
    Some(served)
}

/// The image mount is served by the FUSE engine: its requests are counted
/// in the engine's stats (READs of an encrypted file read back whole).
#[test]
fn image_mount_is_served_by_the_engine() {
    let test = "image_mount_is_served_by_the_engine";
    let _serial = serial();
    if !skip::fuse_available(test) {
        return;
    }
    let Some(served) = read_through_engine(test, false) else {
        return;
    };
    assert!(served.get(fscrypt_fuse::Op::Read) > 0, "{served}");
    assert!(served.get(fscrypt_fuse::Op::Open) > 0, "{served}");
    assert_eq!(served.through_ring(), 0, "io_uring not asked for");
}

/// The image mount gets FUSE over io_uring from the engine: an encrypted
/// file is read through the ring. Needs the kernel's FUSE over io_uring
/// switched on by root (`/sys/module/fuse/parameters/enable_uring`, which
/// this test never writes: CI's second pass turns it on); skipped loudly
/// otherwise.
#[test]
fn image_mount_reads_through_io_uring() {
    let test = "image_mount_reads_through_io_uring";
    let _serial = serial();
    if !skip::fuse_available(test) {
        return;
    }
    match std::fs::read_to_string("/sys/module/fuse/parameters/enable_uring") {
        Ok(v) if matches!(v.trim(), "Y" | "1") => {}
        _ => {
            skip::skip(
                test,
                "FUSE over io_uring is off (/sys/module/fuse/parameters/enable_uring)",
            );
            return;
        }
    }
    let Some(served) = read_through_engine(test, true) else {
        return;
    };
    assert!(served.get(fscrypt_fuse::Op::Read) > 0, "{served}");
    assert!(
        served.through_ring() >= served.get(fscrypt_fuse::Op::Read),
        "the READs came through the ring: {served}"
    );
}

/// Issue 21: the mount reads inline-data files (`-O inline_data`: small
/// unencrypted files kept in the inode, in `i_block` and past its 60 bytes
/// in `system.data`) through the reader's one read path, as `image cat`
/// does, instead of refusing them at open (EOPNOTSUPP).
#[test]
fn image_mount_reads_inline_data() {
    let _serial = serial();
    let test = "image_mount_inline_data";
    if !skip::fuse_available(test) {
        return;
    }
    let mkfs = ["-b", "4096", "-O", "encrypt,stable_inodes,inline_data"];
    let Some(mut fs) = scratch_ext4(test, 32, &mkfs) else {
        return;
    };
    let tmp = TempDir::new(test);
    let mnt = fs.mount_point().to_path_buf();
    let d = mnt.join("plain");
    std::fs::create_dir(&d).expect("mkdir");
    let pattern = |n: usize| (0..n).map(|i| (i * 13 + n) as u8).collect::<Vec<u8>>();
    // In i_block only; past it, into system.data; a block-mapped one.
    let files = [
        ("tiny", pattern(40)),
        ("edge", pattern(100)),
        ("big", pattern(10_000)),
    ];
    let mut inos = Vec::new();
    for (name, data) in &files {
        std::fs::write(d.join(name), data).expect("write");
        inos.push(std::fs::metadata(d.join(name)).expect("stat").ino() as u32);
    }
    rustix::fs::sync();
    unmount_retrying(&mut fs);
    let image = fs.image().to_path_buf();
    {
        let disk = Ext4::open(&image).expect("open");
        let inline = |ino| disk.read_inode(ino).expect("inode").flags & EXT4_INLINE_DATA_FL != 0;
        assert!(
            inline(inos[0]) && inline(inos[1]),
            "the kernel stored them inline"
        );
        assert!(!inline(inos[2]), "big is block-mapped");
    }

    let ours = tmp.sub("ours");
    let _g = our_mount(&image, &ours, &[]);
    for (name, want) in &files {
        let path = ours.join("plain").join(name);
        assert_eq!(
            std::fs::metadata(&path).expect("stat").len(),
            want.len() as u64,
            "{name}"
        );
        assert_eq!(&std::fs::read(&path).expect(name), want, "{name}");
        let f = std::fs::File::open(&path).expect("open");
        for (off, len) in [(1usize, 10usize), (55, 20), (99, 100), (200, 5)] {
            let mut buf = vec![0u8; len];
            let n = f.read_at(&mut buf, off as u64).expect("pread");
            let o = off.min(want.len());
            let end = (off + len).min(want.len());
            assert_eq!(&buf[..n], &want[o..end], "{name}: pread {off} {len}");
        }
    }
}

/// `status` on an `image mount` says what the mount is (a read-only view
/// of the image) and how to see the image's encrypted directories, not how
/// to enable encryption with tune2fs (issue 26 item 6).
#[test]
fn status_of_an_image_mount_says_what_it_is() {
    let test = "image_mount_status";
    let _serial = serial();
    if !skip::fuse_available(test) {
        return;
    }
    let Some(mut fs) = scratch_ext4(test, 32, MKFS_4K) else {
        return;
    };
    let tmp = TempDir::new(test);
    std::fs::create_dir(fs.mount_point().join("d")).expect("mkdir");
    unmount_retrying(&mut fs);
    let image = fs.image().to_path_buf();
    let ours = tmp.sub("ours");
    let _g = our_mount(&image, &ours, &[]);
    let out = String::from_utf8(ok(&["status", p(&ours.join("d"))])).expect("utf-8");
    assert!(!out.contains("tune2fs"), "{out}");
    let line = out
        .lines()
        .find(|l| l.starts_with("Encryption supported:"))
        .unwrap_or_else(|| panic!("no support line: {out}"));
    assert!(
        line.contains("image mount")
            && line.contains(&format!(
                "fscrypt-rs image info {}",
                p(&std::fs::canonicalize(&image).expect("canonical"))
            )),
        "{line}"
    );
}
