//! Real-mount tests of POSIX behaviour (issue 5 §4 and §8). They mount with
//! FUSE in a background thread of the test process and use std::fs / raw
//! system calls. Skipped loudly without root, /dev/fuse or fusermount3.

use std::fs::{self, File, OpenOptions};
use std::io::{Read, Seek, SeekFrom, Write};
use std::os::unix::fs::{FileExt, MetadataExt, PermissionsExt};

use test_support::fuse::Vault;
use test_support::need_fuse;

#[test]
fn create_write_read_list_stat() {
    need_fuse!();
    let v = Vault::new("basic");
    fs::write(v.p("hello.txt"), b"hello world").unwrap();
    assert_eq!(fs::read(v.p("hello.txt")).unwrap(), b"hello world");
    assert_eq!(fs::metadata(v.p("hello.txt")).unwrap().len(), 11);
    fs::create_dir(v.p("dir")).unwrap();
    fs::write(v.p("dir/inner"), vec![7u8; 100_000]).unwrap();
    let mut names: Vec<String> = fs::read_dir(v.mnt.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    names.sort();
    assert_eq!(names, ["dir", "hello.txt"]);
    assert_eq!(fs::read(v.p("dir/inner")).unwrap(), vec![7u8; 100_000]);
    // Every offset and length.
    let data: Vec<u8> = (0..20_000u32).map(|i| (i * 31 % 251) as u8).collect();
    let f = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(true)
        .open(v.p("rw"))
        .unwrap();
    for (off, len) in [
        (0usize, 1usize),
        (5, 4090),
        (4095, 2),
        (4096, 4096),
        (10_000, 3),
        (8191, 5000),
        (1, 19_999),
    ] {
        f.write_all_at(&data[off..off + len], off as u64).unwrap();
    }
    let mut expect = vec![0u8; 20_000];
    for (off, len) in [
        (0usize, 1usize),
        (5, 4090),
        (4095, 2),
        (4096, 4096),
        (10_000, 3),
        (8191, 5000),
        (1, 19_999),
    ] {
        expect[off..off + len].copy_from_slice(&data[off..off + len]);
    }
    for (off, len) in [
        (0u64, 20_000usize),
        (3, 10),
        (4090, 20),
        (8192, 100),
        (19_990, 10),
    ] {
        let mut buf = vec![0u8; len];
        f.read_exact_at(&mut buf, off).unwrap();
        assert_eq!(
            buf,
            &expect[off as usize..off as usize + len],
            "read at {off}"
        );
    }
    drop(f);
    drop(v);
}

#[test]
fn write_truncate_sequence_gives_aaaaa() {
    need_fuse!();
    let v = Vault::new("aaaaa");
    let p = v.p("f");
    let mut f = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(true)
        .open(&p)
        .unwrap();
    f.write_all(&[b'A'; 4096]).unwrap();
    OpenOptions::new()
        .write(true)
        .open(&p)
        .unwrap()
        .set_len(8)
        .unwrap();
    f.write_all(&[b'B'; 10]).unwrap(); // at offset 4096
    OpenOptions::new()
        .write(true)
        .open(&p)
        .unwrap()
        .set_len(5)
        .unwrap();
    assert_eq!(fs::read(&p).unwrap(), b"AAAAA");
    let mut s = Vec::new();
    f.seek(SeekFrom::Start(0)).unwrap();
    f.read_to_end(&mut s).unwrap();
    assert_eq!(s, b"AAAAA");
}

#[test]
fn truncate_sizes_read_as_zeros_also_after_remount() {
    need_fuse!();
    let mut v = Vault::new("trunc");
    let p = v.p("t");
    File::create(&p).unwrap();
    let sizes = [7000u64, 6999, 465, 4096, 0, 10 << 20, (10 << 20) + 100];
    for &s in &sizes {
        OpenOptions::new()
            .write(true)
            .open(&p)
            .unwrap()
            .set_len(s)
            .unwrap();
        assert_eq!(fs::metadata(&p).unwrap().len(), s);
        let c = fs::read(&p).unwrap();
        assert_eq!(c.len() as u64, s);
        assert!(c.iter().all(|&b| b == 0), "non-zero after truncate to {s}");
    }
    v.remount(true);
    let c = fs::read(v.p("t")).unwrap();
    assert_eq!(c.len() as u64, (10 << 20) + 100);
    assert!(c.iter().all(|&b| b == 0));
    // Truncating with data in the file: shrink, then grow, tail reads as zeros.
    fs::write(v.p("d"), vec![0xabu8; 9000]).unwrap();
    for &s in &sizes {
        OpenOptions::new()
            .write(true)
            .open(v.p("d"))
            .unwrap()
            .set_len(s)
            .unwrap();
        let c = fs::read(v.p("d")).unwrap();
        assert_eq!(c.len() as u64, s);
    }
    let c = fs::read(v.p("d")).unwrap();
    assert!(c.iter().all(|&b| b == 0));
}

#[test]
fn sparse_writes_and_holes_stay_holes() {
    need_fuse!();
    let v = Vault::new("sparse");
    let f = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(true)
        .open(v.p("foo"))
        .unwrap();
    f.write_all_at(b"foo", 0).unwrap();
    f.write_all_at(b"foo", 4096).unwrap();
    drop(f);
    let c = fs::read(v.p("foo")).unwrap();
    assert_eq!(c.len(), 4099);
    assert_eq!(&c[..3], b"foo");
    assert!(c[3..4096].iter().all(|&b| b == 0));
    assert_eq!(&c[4096..], b"foo");

    let f = File::create(v.p("hole")).unwrap();
    f.set_len(4096).unwrap();
    drop(f);
    assert_eq!(fs::metadata(v.p("hole")).unwrap().len(), 4096);
    assert_eq!(
        fs::metadata(v.p("hole")).unwrap().blocks(),
        0,
        "st_blocks of a hole"
    );
    assert!(
        fs::metadata(v.p("foo")).unwrap().blocks() >= 16,
        "two data units"
    );
    // The backing file stores only its header (and, in format 3, its
    // records and an empty tag block): no data unit is allocated.
    let hole_len = match fscrypt_fuse::layout::Format::LATEST {
        fscrypt_fuse::layout::Format::V3 => {
            fscrypt_vault::integrity::units::len_for_size(4096, 4096).unwrap()
        }
        _ => fscrypt_fuse::layout::len_for_size_v2(4096, 4096).unwrap(),
    };
    let files = test_support::tree::walk(v.backing.path());
    let mut checked = 0;
    for b in files {
        let m = fs::symlink_metadata(&b).unwrap();
        if !m.is_file() || b.file_name().unwrap().to_string_lossy().contains('.') {
            continue;
        }
        if m.len() == hole_len {
            checked += 1;
            let f = File::open(&b).unwrap();
            let r = rustix::fs::seek(
                &f,
                rustix::fs::SeekFrom::Data(fscrypt_fuse::layout::HEADER_SIZE),
            );
            assert_eq!(
                r,
                Err(rustix::io::Errno::NXIO),
                "data past the header of {}",
                b.display()
            );
        }
    }
    assert_eq!(checked, 1, "exactly the hole file has no data units");
}

#[test]
fn concurrent_writers_never_lose_updates() {
    need_fuse!();
    let v = Vault::new("race");
    let p = v.p("race");
    File::create(&p).unwrap();
    let a = OpenOptions::new().read(true).write(true).open(&p).unwrap();
    let b = OpenOptions::new().read(true).write(true).open(&p).unwrap();
    let mut expect_s = vec![b'n'; 4080];
    expect_s.extend_from_slice(&[b's'; 16]);
    for round in 0..1000 {
        let t1 = std::thread::scope(|s| {
            let h1 = s.spawn(|| a.write_all_at(&[b'n'; 4096], 0));
            let h2 = s.spawn(|| b.write_all_at(&[b's'; 16], 4080));
            (h1.join().unwrap(), h2.join().unwrap())
        });
        t1.0.unwrap();
        t1.1.unwrap();
        let mut got = vec![0u8; 4096];
        a.read_exact_at(&mut got, 0).unwrap();
        assert!(
            got == [b'n'; 4096] || got == expect_s,
            "round {round}: lost update"
        );
    }
}

#[test]
fn long_names_and_deep_paths_survive_remount() {
    need_fuse!();
    let mut v = Vault::new("names");
    let long: String = "x".repeat(255);
    fs::write(v.p(&long), b"long").unwrap();
    let mut deep = v.mnt.path().to_path_buf();
    for i in 0..20 {
        deep.push(format!("{i:02}{}", "d".repeat(98)));
    }
    fs::create_dir_all(&deep).unwrap();
    fs::write(deep.join("leaf"), b"leaf").unwrap();
    let names: Vec<_> = fs::read_dir(v.mnt.path())
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert!(names.iter().any(|n| n.to_str() == Some(long.as_str())));
    let long2: String = "y".repeat(255);
    fs::rename(v.p(&long), v.p(&long2)).unwrap();
    let deep_parent = deep.parent().unwrap().to_path_buf();
    let renamed = deep_parent.join("z".repeat(100));
    fs::rename(&deep, &renamed).unwrap();
    assert!(fs::read(v.p(&"z".repeat(256))).is_err());
    v.remount(true);
    assert_eq!(fs::read(v.p(&long2)).unwrap(), b"long");
    assert!(fs::metadata(v.p(&long)).is_err());
    let rel = renamed.strip_prefix(v.mnt.path()).unwrap().to_path_buf();
    assert_eq!(
        fs::read(v.mnt.path().join(&rel).join("leaf")).unwrap(),
        b"leaf"
    );
    let err = fs::write(v.p(&"q".repeat(256)), b"x").unwrap_err();
    assert_eq!(err.raw_os_error(), Some(libc::ENAMETOOLONG));
}

#[test]
fn no_plaintext_in_backing_store() {
    need_fuse!();
    let v = Vault::new("grep");
    let content_marker = b"CONTENT-MARKER-5b1f0d1e";
    let name_marker = "NAMEMARKER7c2e";
    fs::create_dir(v.p(&format!("dir-{name_marker}"))).unwrap();
    let mut data = Vec::new();
    for _ in 0..1000 {
        data.extend_from_slice(content_marker);
    }
    fs::write(v.p(&format!("dir-{name_marker}/file-{name_marker}")), &data).unwrap();
    std::os::unix::fs::symlink(
        format!("target-{name_marker}"),
        v.p(&format!("ln-{name_marker}")),
    )
    .unwrap();
    let files = test_support::tree::walk(v.backing.path());
    assert!(files.len() >= 3);
    for f in files {
        let name = f.file_name().unwrap().to_string_lossy().into_owned();
        assert!(
            !name.contains(name_marker),
            "plaintext name in {}",
            f.display()
        );
        let m = fs::symlink_metadata(&f).unwrap();
        let bytes = if m.file_type().is_symlink() {
            fs::read_link(&f)
                .unwrap()
                .into_os_string()
                .into_encoded_bytes()
        } else if m.is_file() {
            fs::read(&f).unwrap()
        } else {
            continue;
        };
        for marker in [&content_marker[..], name_marker.as_bytes(), b"target-"] {
            assert!(
                !bytes.windows(marker.len()).any(|w| w == marker),
                "plaintext marker in {}",
                f.display()
            );
        }
    }
}

#[test]
fn append_links_symlinks_dirs_and_metadata() {
    need_fuse!();
    let v = Vault::new("ops");
    // O_APPEND
    fs::write(v.p("a"), b"12345").unwrap();
    let mut f = OpenOptions::new().append(true).open(v.p("a")).unwrap();
    f.write_all(b"678").unwrap();
    f.write_all(&[b'9'; 5000]).unwrap();
    drop(f);
    let c = fs::read(v.p("a")).unwrap();
    assert_eq!(&c[..8], b"12345678");
    assert_eq!(c.len(), 5008);
    // hard links
    fs::create_dir(v.p("d1")).unwrap();
    fs::hard_link(v.p("a"), v.p("d1/b")).unwrap();
    assert_eq!(fs::metadata(v.p("a")).unwrap().nlink(), 2);
    assert_eq!(
        fs::metadata(v.p("a")).unwrap().ino(),
        fs::metadata(v.p("d1/b")).unwrap().ino()
    );
    fs::remove_file(v.p("a")).unwrap();
    assert_eq!(fs::read(v.p("d1/b")).unwrap(), c);
    assert_eq!(fs::metadata(v.p("d1/b")).unwrap().nlink(), 1);
    // symlinks
    std::os::unix::fs::symlink("d1/b", v.p("ln")).unwrap();
    assert_eq!(fs::read_link(v.p("ln")).unwrap().to_str(), Some("d1/b"));
    assert_eq!(fs::symlink_metadata(v.p("ln")).unwrap().len(), 4);
    assert_eq!(fs::read(v.p("ln")).unwrap(), c);
    let t = "t".repeat(3000);
    std::os::unix::fs::symlink(&t, v.p("ln2")).unwrap();
    assert_eq!(
        fs::read_link(v.p("ln2")).unwrap().to_str(),
        Some(t.as_str())
    );
    // mkdir / rmdir
    fs::create_dir(v.p("d2")).unwrap();
    fs::write(v.p("d2/x"), b"x").unwrap();
    assert_eq!(
        fs::remove_dir(v.p("d2")).unwrap_err().raw_os_error(),
        Some(libc::ENOTEMPTY)
    );
    fs::remove_file(v.p("d2/x")).unwrap();
    fs::remove_dir(v.p("d2")).unwrap();
    assert!(fs::metadata(v.p("d2")).is_err());
    // chmod / chown / utimens
    fs::set_permissions(v.p("d1/b"), fs::Permissions::from_mode(0o640)).unwrap();
    assert_eq!(fs::metadata(v.p("d1/b")).unwrap().mode() & 0o7777, 0o640);
    std::os::unix::fs::chown(v.p("d1/b"), Some(1234), Some(5678)).unwrap();
    let m = fs::metadata(v.p("d1/b")).unwrap();
    assert_eq!((m.uid(), m.gid()), (1234, 5678));
    let t0 = std::time::UNIX_EPOCH + std::time::Duration::new(1_000_000_000, 123_456_789);
    File::options()
        .write(true)
        .open(v.p("d1/b"))
        .unwrap()
        .set_modified(t0)
        .unwrap();
    assert_eq!(fs::metadata(v.p("d1/b")).unwrap().modified().unwrap(), t0);
    // statfs, fsync
    let s = rustix::fs::statvfs(v.mnt.path()).unwrap();
    assert_eq!(s.f_namemax, 255);
    assert!(s.f_blocks > 0);
    let f = OpenOptions::new().write(true).open(v.p("d1/b")).unwrap();
    f.sync_all().unwrap();
    f.sync_data().unwrap();
    // user xattrs
    rustix::fs::setxattr(
        v.p("d1/b").as_path(),
        "user.k",
        b"value",
        rustix::fs::XattrFlags::empty(),
    )
    .unwrap();
    let mut buf = [0u8; 16];
    let n = rustix::fs::getxattr(v.p("d1/b").as_path(), "user.k", &mut buf[..]).unwrap();
    assert_eq!(&buf[..n], b"value");
    let mut list = [0u8; 64];
    let n = rustix::fs::listxattr(v.p("d1/b").as_path(), &mut list[..]).unwrap();
    assert_eq!(&list[..n], b"user.k\0");
    rustix::fs::removexattr(v.p("d1/b").as_path(), "user.k").unwrap();
    // special files keep working
    rustix::fs::mknodat(
        rustix::fs::CWD,
        v.p("fifo").as_path(),
        rustix::fs::FileType::Fifo,
        rustix::fs::Mode::from_raw_mode(0o644),
        0,
    )
    .unwrap();
    assert!(std::os::unix::fs::FileTypeExt::is_fifo(
        &fs::symlink_metadata(v.p("fifo")).unwrap().file_type()
    ));
}

#[test]
fn renames_within_and_across_directories() {
    need_fuse!();
    let v = Vault::new("rename");
    fs::create_dir(v.p("a")).unwrap();
    fs::create_dir(v.p("b")).unwrap();
    fs::write(v.p("a/f"), b"one").unwrap();
    fs::write(v.p("b/g"), b"two").unwrap();
    fs::rename(v.p("a/f"), v.p("a/f2")).unwrap();
    fs::rename(v.p("a/f2"), v.p("b/f3")).unwrap();
    assert_eq!(fs::read(v.p("b/f3")).unwrap(), b"one");
    // replace an existing file
    fs::rename(v.p("b/f3"), v.p("b/g")).unwrap();
    assert_eq!(fs::read(v.p("b/g")).unwrap(), b"one");
    // directory over empty directory, and a non-empty directory moved
    fs::create_dir(v.p("a/sub")).unwrap();
    fs::write(v.p("a/sub/x"), b"x").unwrap();
    fs::create_dir(v.p("b/empty")).unwrap();
    fs::rename(v.p("a/sub"), v.p("b/empty")).unwrap();
    assert_eq!(fs::read(v.p("b/empty/x")).unwrap(), b"x");
    fs::create_dir(v.p("a/full")).unwrap();
    fs::write(v.p("a/full/y"), b"y").unwrap();
    let e = fs::rename(v.p("b/empty"), v.p("a/full")).unwrap_err();
    assert_eq!(e.raw_os_error(), Some(libc::ENOTEMPTY));
    assert_eq!(fs::read(v.p("a/full/y")).unwrap(), b"y");
    // RENAME_NOREPLACE and RENAME_EXCHANGE
    fs::write(v.p("p"), b"P").unwrap();
    fs::write(v.p("q"), b"Q").unwrap();
    let r = rustix::fs::renameat_with(
        rustix::fs::CWD,
        v.p("p").as_path(),
        rustix::fs::CWD,
        v.p("q").as_path(),
        rustix::fs::RenameFlags::NOREPLACE,
    );
    assert_eq!(r, Err(rustix::io::Errno::EXIST));
    rustix::fs::renameat_with(
        rustix::fs::CWD,
        v.p("p").as_path(),
        rustix::fs::CWD,
        v.p("b/empty").as_path(),
        rustix::fs::RenameFlags::EXCHANGE,
    )
    .unwrap();
    assert_eq!(fs::read(v.p("b/empty")).unwrap(), b"P");
    assert_eq!(fs::read(v.p("p/x")).unwrap(), b"x");
    // long names move with their side files
    let l1 = "L".repeat(200);
    let l2 = "M".repeat(250);
    fs::write(v.p(&l1), b"long").unwrap();
    fs::rename(v.p(&l1), v.p(&format!("a/{l2}"))).unwrap();
    assert_eq!(fs::read(v.p(&format!("a/{l2}"))).unwrap(), b"long");
    let names: Vec<_> = fs::read_dir(v.p("a"))
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    assert!(names.contains(&l2));
}

#[test]
fn truncate_by_path_while_another_fd_writes() {
    need_fuse!();
    let v = Vault::new("trpath");
    let p = v.p("f");
    let f = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(true)
        .open(&p)
        .unwrap();
    std::thread::scope(|s| {
        s.spawn(|| {
            for i in 0..200u64 {
                f.write_all_at(&[b'w'; 3000], (i % 7) * 1000).unwrap();
            }
        });
        s.spawn(|| {
            for i in 0..200u64 {
                OpenOptions::new()
                    .write(true)
                    .open(&p)
                    .unwrap()
                    .set_len((i * 37) % 9000)
                    .unwrap();
            }
        });
    });
    // Whatever interleaving happened, the content is 'w' or zero bytes only.
    let c = fs::read(&p).unwrap();
    assert!(c.iter().all(|&b| b == b'w' || b == 0));
}

#[test]
fn mmap_reads_and_writes() {
    need_fuse!();
    let v = Vault::new("mmap");
    let p = v.p("m");
    fs::write(&p, vec![b'a'; 8192]).unwrap();
    let f = OpenOptions::new().read(true).write(true).open(&p).unwrap();
    mmap_write(&f, 8192, 4100, b"MMAP");
    drop(f);
    let c = fs::read(&p).unwrap();
    assert_eq!(&c[4100..4104], b"MMAP");
    assert_eq!(c[4099], b'a');
}

#[allow(unsafe_code)]
fn mmap_write(f: &File, len: usize, off: usize, data: &[u8]) {
    use std::os::fd::AsRawFd;
    // SAFETY: maps `len` bytes of an open file shared; the mapping is only
    // accessed within bounds below and unmapped before returning.
    unsafe {
        let ptr = libc::mmap(
            std::ptr::null_mut(),
            len,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_SHARED,
            f.as_raw_fd(),
            0,
        );
        assert_ne!(ptr, libc::MAP_FAILED, "mmap failed");
        let s = std::slice::from_raw_parts_mut(ptr as *mut u8, len);
        assert_eq!(s[0], b'a', "mmap read");
        s[off..off + data.len()].copy_from_slice(data);
        assert_eq!(libc::msync(ptr, len, libc::MS_SYNC), 0);
        libc::munmap(ptr, len);
    }
}

#[test]
fn readdir_of_100000_entries() {
    need_fuse!();
    let v = Vault::new("big");
    fs::create_dir(v.p("big")).unwrap();
    // Hard links (no data, no header per entry), split over two files to stay
    // below ext4's 65,000-link limit.
    fs::write(v.p("big/f"), b"x").unwrap();
    fs::write(v.p("big/g"), b"y").unwrap();
    for i in 0..99_998 {
        let src = if i % 2 == 0 { "big/f" } else { "big/g" };
        fs::hard_link(v.p(src), v.p(&format!("big/n{i}"))).unwrap();
    }
    let mut n = 0;
    let mut seen_last = false;
    for e in fs::read_dir(v.p("big")).unwrap() {
        let name = e.unwrap().file_name();
        if name == "n99997" {
            seen_last = true;
        }
        n += 1;
    }
    assert_eq!(n, 100_000);
    assert!(seen_last);
}

#[test]
fn unprivileged_write_and_truncate_clear_setuid() {
    need_fuse!();
    if !test_support::skip::setpriv_available("unprivileged_write_and_truncate_clear_setuid") {
        return;
    }
    let v = Vault::new("suid");
    fs::set_permissions(v.mnt.path(), fs::Permissions::from_mode(0o777)).unwrap();
    for (name, cmd) in [("w", "printf x >> \"$1\""), ("t", "truncate -s 10 \"$1\"")] {
        let p = v.p(name);
        fs::write(&p, b"data").unwrap();
        fs::set_permissions(&p, fs::Permissions::from_mode(0o6777)).unwrap();
        assert_eq!(fs::metadata(&p).unwrap().mode() & 0o7777, 0o6777);
        let st = test_support::users::nobody_sh(cmd)
            .arg(&p)
            .status()
            .unwrap();
        assert!(st.success(), "{name}: {st}");
        assert_eq!(
            fs::metadata(&p).unwrap().mode() & 0o7777,
            0o0777,
            "{name}: setuid/setgid not cleared"
        );
    }
}
