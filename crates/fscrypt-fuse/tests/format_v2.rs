//! Vault format 2 (`docs/vault-format.md` §4a) through a real mount: a
//! regular file's size is its backing length, so `stat` (lookup, getattr)
//! never opens or reads the backing file; size changes around data unit
//! boundaries keep contents, sizes and backing lengths right in both
//! formats (format 1 vaults keep working as they did).

use std::fs::{self, OpenOptions};
use std::io::{Read, Seek, SeekFrom, Write};
use std::os::unix::fs::{FileExt, MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};

use fscrypt_fuse::layout::{self, Format, HEADER_SIZE};
use test_support::fuse::{Vault, policy};
use test_support::need_fuse;

/// The backing file of the plaintext path `p` (same inode number).
fn backing_of(v: &Vault, p: &Path) -> PathBuf {
    let ino = fs::symlink_metadata(p).unwrap().ino();
    test_support::tree::walk(v.backing.path())
        .into_iter()
        .find(|b| fs::symlink_metadata(b).unwrap().ino() == ino)
        .unwrap_or_else(|| panic!("no backing entry for {}", p.display()))
}

fn with_du(log2: u8) -> fscrypt::PolicyV2 {
    let mut p = policy();
    p.log2_data_unit_size = if log2 == 12 { 0 } else { log2 };
    p
}

#[test]
fn v2_stat_reads_no_header() {
    need_fuse!();
    let du = 4096u64;
    let mut v = Vault::new("v2-stat");
    let sizes = [0, 1, du - 1, du, du + 1, 3 * du + 5];
    for (i, s) in sizes.iter().enumerate() {
        let p = v.p(&format!("f{i}"));
        fs::write(&p, vec![0x42; *s as usize]).unwrap();
        fs::set_permissions(&p, fs::Permissions::from_mode(0o640 + i as u32)).unwrap();
    }
    fs::create_dir(v.p("d")).unwrap();
    fs::write(v.p("d/inner"), b"inner").unwrap();
    let backing: Vec<PathBuf> = (0..sizes.len())
        .map(|i| backing_of(&v, &v.p(&format!("f{i}"))))
        .collect();
    let inner = backing_of(&v, &v.p("d/inner"));
    v.mount.take().unwrap().unmount().unwrap();
    // Garbage over every header region: a lookup or stat that read a
    // header would see a corrupt file (format 1 reports size 0).
    for b in backing.iter().chain([&inner]) {
        let f = OpenOptions::new().write(true).open(b).unwrap();
        let len = f.metadata().unwrap().len();
        f.write_all_at(&[0xa5; HEADER_SIZE as usize], 0).unwrap();
        assert_eq!(f.metadata().unwrap().len(), len);
    }
    v.remount(true);
    // `ls -l`: readdir, then lstat of every entry.
    let mut listed: Vec<(String, u64, u32)> = fs::read_dir(v.mnt.path())
        .unwrap()
        .map(|e| {
            let e = e.unwrap();
            let m = e.metadata().unwrap();
            (
                e.file_name().into_string().unwrap(),
                m.len(),
                m.mode() & 0o7777,
            )
        })
        .filter(|(n, _, _)| n.starts_with('f'))
        .collect();
    listed.sort();
    let want: Vec<(String, u64, u32)> = sizes
        .iter()
        .enumerate()
        .map(|(i, s)| (format!("f{i}"), *s, 0o640 + i as u32))
        .collect();
    assert_eq!(listed, want, "sizes and modes from the backing lengths");
    assert_eq!(fs::metadata(v.p("d/inner")).unwrap().len(), 5);
    // A 1-byte file: one 4 KiB block of data (format 3: and its group's
    // tag block), the trailer is a hole.
    let blocks = if Format::LATEST == Format::V3 { 16 } else { 8 };
    assert_eq!(fs::metadata(v.p("f1")).unwrap().blocks(), blocks);
    // Contents need the header: EIO, and the mount stays up.
    let r = fs::read(v.p("f1"));
    assert_eq!(r.unwrap_err().raw_os_error(), Some(libc::EIO));
    fs::remove_file(v.p("f1")).unwrap();
    fs::write(v.p("after"), b"ok").unwrap();
    assert_eq!(fs::read(v.p("after")).unwrap(), b"ok");
}

/// One size or content change, applied to the file and to the model.
#[derive(Debug, Clone, Copy)]
enum Op {
    /// pwrite of `len` bytes at `off`.
    Write(u64, u64),
    /// ftruncate through an open fd.
    SetLen(u64),
    /// truncate(2) by path (SETATTR without an open file).
    TruncatePath(u64),
    /// O_APPEND write of `len` bytes.
    Append(u64),
}

fn ops(du: u64) -> Vec<Op> {
    use Op::*;
    vec![
        Write(0, 1),
        Write(du - 1, 1),
        Write(du, 1),
        SetLen(du - 1),
        SetLen(3 * du + 7),
        Write(du + 3, 10),
        TruncatePath(du + 10),
        // Grows over the stale trailer left by the truncate down.
        TruncatePath(4 * du),
        SetLen(2 * du + 1),
        // Starts inside the trailer's unit (the next one after EOF).
        Write(3 * du + 100, 50),
        SetLen(du / 2),
        // Starts past the trailer's unit: the trailer must read as zeros.
        Write(5 * du + 1, du),
        Append(3),
        SetLen(0),
        Append(du + 1),
        Write(2 * du - 1, 2),
        TruncatePath(2 * du),
        SetLen(2 * du + du / 2),
    ]
}

fn pattern(seed: u64, len: u64) -> Vec<u8> {
    (0..len)
        .map(|i| ((i * 31 + seed * 7) % 251 + 1) as u8)
        .collect()
}

/// truncate(2) on a path: the kernel sends SETATTR without opening the file.
#[allow(unsafe_code)]
fn truncate_path(p: &Path, len: u64) {
    use std::os::unix::ffi::OsStrExt;
    let c = std::ffi::CString::new(p.as_os_str().as_bytes()).unwrap();
    // SAFETY: `c` is a valid NUL-terminated path that outlives the call.
    let r = unsafe { libc::truncate(c.as_ptr(), len as i64) };
    assert_eq!(r, 0, "truncate({}) failed", p.display());
}

fn check(v: &Vault, p: &Path, model: &[u8], format: Format, du: u64, what: &str) {
    let got = fs::read(p).unwrap();
    assert_eq!(got.len(), model.len(), "{what}: size");
    if let Some(i) = (0..got.len()).find(|&i| got[i] != model[i]) {
        panic!("{what}: first difference at byte {i}");
    }
    assert_eq!(fs::metadata(p).unwrap().len(), model.len() as u64, "{what}");
    let blen = fs::metadata(backing_of(v, p)).unwrap().len();
    match format {
        // Format 1: whole units, never past those covering the size (a
        // truncate up stores nothing).
        Format::V1 => assert!(
            blen <= layout::backing_len_for(model.len() as u64, du)
                && (blen - HEADER_SIZE).is_multiple_of(du),
            "{what}: backing length {blen}"
        ),
        Format::V2 => assert_eq!(
            blen,
            layout::len_for_size_v2(model.len() as u64, du).unwrap(),
            "{what}: backing length"
        ),
        Format::V3 => assert_eq!(
            Some(blen),
            fscrypt_vault::integrity::units::len_for_size(model.len() as u64, du),
            "{what}: backing length"
        ),
    }
}

fn run_edges(format: Format, log2: u8) {
    let du = 1u64 << log2;
    let mut v = Vault::with_format("v2-edges", with_du(log2), format);
    let p = v.p("f");
    fs::write(&p, b"").unwrap();
    let mut model: Vec<u8> = Vec::new();
    for (k, op) in ops(du).into_iter().enumerate() {
        let what = format!("format {format} du {du} op {k} {op:?}");
        match op {
            Op::Write(off, len) => {
                let data = pattern(k as u64, len);
                let f = OpenOptions::new().write(true).open(&p).unwrap();
                f.write_all_at(&data, off).unwrap();
                let end = (off + len) as usize;
                if model.len() < end {
                    model.resize(end, 0);
                }
                model[off as usize..end].copy_from_slice(&data);
            }
            Op::SetLen(n) => {
                OpenOptions::new()
                    .write(true)
                    .open(&p)
                    .unwrap()
                    .set_len(n)
                    .unwrap();
                model.resize(n as usize, 0);
            }
            Op::TruncatePath(n) => {
                truncate_path(&p, n);
                model.resize(n as usize, 0);
            }
            Op::Append(len) => {
                let data = pattern(k as u64, len);
                let mut f = OpenOptions::new().append(true).open(&p).unwrap();
                f.write_all(&data).unwrap();
                model.extend_from_slice(&data);
            }
        }
        check(&v, &p, &model, format, du, &what);
    }
    // A partial read at a unit boundary, then everything again after a
    // remount (nothing cached).
    let mut f = fs::File::open(&p).unwrap();
    f.seek(SeekFrom::Start(du - 1)).unwrap();
    let mut two = [0u8; 2];
    f.read_exact(&mut two).unwrap();
    assert_eq!(&two[..], &model[du as usize - 1..du as usize + 1]);
    drop(f);
    v.remount(true);
    check(&v, &p, &model, format, du, "after remount");
}

#[test]
fn size_changes_around_data_unit_boundaries() {
    need_fuse!();
    for format in [Format::V1, Format::V2, Format::V3] {
        for log2 in [12, 9] {
            run_edges(format, log2);
        }
    }
}
