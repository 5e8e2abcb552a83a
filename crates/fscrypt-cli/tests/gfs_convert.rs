//! `fscrypt-rs encrypt DIR --convert` on a real loop ext4 (`-O encrypt`)
//! made by each test as root: a mixed tree converted and compared object
//! by object with a snapshot taken before, then locked (no-key names) and
//! unlocked; SIGKILL at random points (the directory is always either the
//! original or the finished result, and a rerun completes); the refusals
//! (non-empty without --convert, mount point, open file, too little space).
//!
//! Skipped loudly without root or loop devices.

use std::collections::BTreeMap;
use std::hash::{Hash, Hasher};
use std::io::{Read, Seek, SeekFrom};
use std::os::unix::fs::{MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};
use test_support::run::assert_ok as ok;
use test_support::run::describe as text;

use test_support::loopdev::{MKFS_4K, scratch_ext4};

mod convert_common;
use convert_common::*;

/// One object of a snapshot.
#[derive(Debug, PartialEq, Eq)]
struct Obj {
    kind: &'static str,
    mode: u32,
    uid: u32,
    gid: u32,
    size: u64,
    mtime: (i64, i64),
    rdev: u64,
    content: u64,
    target: Option<PathBuf>,
    xattrs: Vec<(Vec<u8>, Vec<u8>)>,
    /// First path (in walk order) of this object's hard-link group.
    group: Option<PathBuf>,
    /// Data ranges (SEEK_DATA/SEEK_HOLE).
    data: Vec<(u64, u64)>,
}

fn xattrs(path: &Path) -> Vec<(Vec<u8>, Vec<u8>)> {
    let mut buf = vec![0u8; 65536];
    let Ok(n) = rustix::fs::llistxattr(path, &mut buf[..]) else {
        return Vec::new();
    };
    let names: Vec<Vec<u8>> = buf[..n]
        .split(|b| *b == 0)
        .filter(|s| !s.is_empty() && !s.starts_with(b"security."))
        .map(<[u8]>::to_vec)
        .collect();
    let mut out = Vec::new();
    for name in names {
        let mut v = vec![0u8; 65536];
        let n = rustix::fs::lgetxattr(path, name.as_slice(), &mut v[..]).unwrap();
        v.truncate(n);
        out.push((name, v));
    }
    out.sort();
    out
}

fn data_ranges(f: &std::fs::File, size: u64) -> Vec<(u64, u64)> {
    use std::os::fd::AsFd;
    let mut out = Vec::new();
    let mut off = 0;
    while off < size {
        let Ok(d) = rustix::fs::seek(f.as_fd(), rustix::fs::SeekFrom::Data(off)) else {
            break;
        };
        let h = rustix::fs::seek(f.as_fd(), rustix::fs::SeekFrom::Hole(d)).unwrap();
        out.push((d, h));
        off = h;
    }
    out
}

/// Every object below and including `dir`, by relative path.
fn snapshot(dir: &Path) -> BTreeMap<PathBuf, Obj> {
    let mut out = BTreeMap::new();
    let mut paths = vec![dir.to_path_buf()];
    paths.extend(test_support::tree::walk(dir));
    // Each hard-link group is named by its smallest path (walk order
    // differs between trees).
    let mut groups: BTreeMap<u64, PathBuf> = BTreeMap::new();
    for path in &paths {
        let md = std::fs::symlink_metadata(path).unwrap();
        if !md.is_dir() && md.nlink() > 1 {
            let rel = path.strip_prefix(dir).unwrap().to_path_buf();
            let e = groups.entry(md.ino()).or_insert_with(|| rel.clone());
            if rel < *e {
                *e = rel;
            }
        }
    }
    for path in paths {
        let rel = path.strip_prefix(dir).unwrap().to_path_buf();
        let md = std::fs::symlink_metadata(&path).unwrap();
        let ft = md.file_type();
        use std::os::unix::fs::FileTypeExt;
        let kind = if ft.is_dir() {
            "dir"
        } else if ft.is_file() {
            "file"
        } else if ft.is_symlink() {
            "symlink"
        } else if ft.is_fifo() {
            "fifo"
        } else if ft.is_char_device() {
            "chr"
        } else if ft.is_socket() {
            "sock"
        } else {
            "other"
        };
        let (mut content, mut data) = (0, Vec::new());
        if ft.is_file() {
            let mut f = std::fs::OpenOptions::new()
                .read(true)
                .custom_flags(libc::O_NOFOLLOW)
                .open(&path)
                .unwrap();
            data = data_ranges(&f, md.size());
            f.seek(SeekFrom::Start(0)).unwrap();
            let mut bytes = Vec::new();
            f.read_to_end(&mut bytes).unwrap();
            let mut h = std::hash::DefaultHasher::new();
            bytes.hash(&mut h);
            content = h.finish();
        }
        let group = groups.get(&md.ino()).filter(|_| !ft.is_dir()).cloned();
        out.insert(
            rel,
            Obj {
                kind,
                mode: md.mode(),
                uid: md.uid(),
                gid: md.gid(),
                size: if ft.is_dir() { 0 } else { md.size() },
                mtime: (md.mtime(), md.mtime_nsec()),
                rdev: md.rdev(),
                content,
                target: ft.is_symlink().then(|| std::fs::read_link(&path).unwrap()),
                xattrs: xattrs(&path),
                group,
                data,
            },
        );
    }
    out
}

fn assert_same(a: &BTreeMap<PathBuf, Obj>, b: &BTreeMap<PathBuf, Obj>, what: &str) {
    assert_eq!(
        a.keys().collect::<Vec<_>>(),
        b.keys().collect::<Vec<_>>(),
        "{what}: names"
    );
    for (k, v) in a {
        assert_eq!(Some(v), b.get(k), "{what}: {}", k.display());
    }
}

fn set_mtime(path: &Path, sec: i64) {
    let t = rustix::fs::Timestamps {
        last_access: rustix::fs::Timespec {
            tv_sec: sec - 5,
            tv_nsec: 0,
        },
        last_modification: rustix::fs::Timespec {
            tv_sec: sec,
            tv_nsec: 123_456_789,
        },
    };
    rustix::fs::utimensat(
        rustix::fs::CWD,
        path,
        &t,
        rustix::fs::AtFlags::SYMLINK_NOFOLLOW,
    )
    .unwrap();
}

/// The mixed tree of the main test.
fn mixed_tree(d: &Path) {
    std::fs::create_dir(d).unwrap();
    for (name, size) in [
        ("empty", 0usize),
        ("one", 1),
        ("b4095", 4095),
        ("b4096", 4096),
        ("b4097", 4097),
        ("mib", 1 << 20),
    ] {
        let bytes: Vec<u8> = (0..size).map(|i| (i * 7 + size) as u8).collect();
        std::fs::write(d.join(name), bytes).unwrap();
    }
    // Sparse: data, hole, data, hole at the end.
    {
        use std::os::unix::fs::FileExt;
        let f = std::fs::File::create(d.join("sparse")).unwrap();
        f.write_all_at(&[1u8; 8192], 0).unwrap();
        f.write_all_at(&[2u8; 4096], 1 << 20).unwrap();
        f.set_len(3 << 20).unwrap();
    }
    std::fs::hard_link(d.join("b4097"), d.join("hardlink")).unwrap();
    let sub = d.join("sub");
    std::fs::create_dir(&sub).unwrap();
    std::fs::hard_link(d.join("b4097"), sub.join("hardlink2")).unwrap();
    std::fs::write(sub.join("x"), "x").unwrap();
    std::fs::hard_link(sub.join("x"), sub.join("x2")).unwrap();
    std::os::unix::fs::symlink("../one", sub.join("rel")).unwrap();
    std::os::unix::fs::symlink("/etc/hostname", d.join("abs")).unwrap();
    std::os::unix::fs::symlink("nowhere/at/all", d.join("dangling")).unwrap();
    rustix::fs::mknodat(
        rustix::fs::CWD,
        d.join("fifo"),
        rustix::fs::FileType::Fifo,
        rustix::fs::Mode::from_raw_mode(0o640),
        0,
    )
    .unwrap();
    rustix::fs::mknodat(
        rustix::fs::CWD,
        d.join("null"),
        rustix::fs::FileType::CharacterDevice,
        rustix::fs::Mode::from_raw_mode(0o666),
        rustix::fs::makedev(1, 3),
    )
    .unwrap();
    drop(std::os::unix::net::UnixListener::bind(d.join("sock")).unwrap());
    for (name, mode) in [("d700", 0o700), ("d755", 0o755), ("d1777", 0o1777)] {
        let x = d.join(name);
        std::fs::create_dir(&x).unwrap();
        std::fs::write(x.join("f"), name).unwrap();
        std::fs::set_permissions(&x, PermissionsExt::from_mode(mode)).unwrap();
    }
    chown(&d.join("d700"), 1234, 5678);
    chown(&d.join("d700/f"), 1234, 5678);
    chown(&d.join("one"), 4321, 100);
    chown(&d.join("dangling"), 1234, 1234);
    std::fs::write(d.join("setuid"), "#!/bin/sh\n").unwrap();
    chown(&d.join("setuid"), 1234, 1234);
    std::fs::set_permissions(d.join("setuid"), PermissionsExt::from_mode(0o4755)).unwrap();
    rustix::fs::setxattr(
        d.join("b4096"),
        "user.comment",
        b"hello xattr",
        rustix::fs::XattrFlags::empty(),
    )
    .unwrap();
    rustix::fs::setxattr(&sub, "user.empty", b"", rustix::fs::XattrFlags::empty()).unwrap();
    if Command::new("setfacl").arg("--version").output().is_ok() {
        let st = Command::new("setfacl")
            .args(["-m", "u:1234:rw,g:5678:r"])
            .arg(d.join("mib"))
            .status()
            .unwrap();
        assert!(st.success());
        let st = Command::new("setfacl")
            .args(["-d", "-m", "u:1234:rwx"])
            .arg(d.join("d755"))
            .status()
            .unwrap();
        assert!(st.success());
    } else {
        eprintln!("note: setfacl missing (scripts/setup.sh installs acl): ACLs not tested");
    }
    // Timestamps last, directories after their contents.
    let mut all = test_support::tree::walk(d);
    all.reverse();
    for (i, path) in all.iter().enumerate() {
        set_mtime(path, 1_500_000_000 + i as i64 * 1000);
    }
    set_mtime(d, 1_400_000_000);
}

#[test]
fn convert_mixed_tree_then_lock_and_unlock() {
    let Some(env) = Env::new("convert_mixed", 64) else {
        return;
    };
    let d = env.mnt().join("data");
    mixed_tree(&d);
    let before = snapshot(&d);
    let o = env.convert_new(&d, "rk");
    ok(&o, "encrypt --convert");
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(out.contains("may remain readable"), "{}", text(&o));
    assert!(encrypted(&d), "{} has no policy", d.display());
    assert!(!env.mnt().join(".data.fscrypt-convert").exists());
    assert_same(&before, &snapshot(&d), "after --convert");

    // Locked: the names are no-key names, contents unreadable.
    ok(&env.rs(&["lock", p(&d), "-q"]), "lock");
    let names: Vec<_> = std::fs::read_dir(&d)
        .unwrap()
        .flatten()
        .map(|e| e.file_name())
        .collect();
    assert_eq!(
        names.len(),
        before
            .keys()
            .filter(|k| k.components().count() == 1)
            .count()
    );
    for n in &names {
        assert!(
            !before.contains_key(Path::new(n)),
            "plaintext name {n:?} visible while locked"
        );
    }
    ok(
        &env.rs(&["unlock", p(&d), "--key", p(&env.key())]),
        "unlock",
    );
    assert_same(&before, &snapshot(&d), "after lock and unlock");
}

/// A tree of `n` mixed small objects.
fn many_tree(d: &Path, n: usize, seed: u64) {
    std::fs::create_dir(d).unwrap();
    let mut dirs = vec![d.to_path_buf()];
    let mut r = seed;
    for i in 0..n {
        r = r
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        let parent = dirs[(r >> 33) as usize % dirs.len()].clone();
        let path = parent.join(format!("n{i}"));
        match (r >> 20) % 16 {
            0 => {
                std::fs::create_dir(&path).unwrap();
                dirs.push(path);
            }
            1 => std::os::unix::fs::symlink(format!("../t{i}"), &path).unwrap(),
            2 if i > 0 => {
                let prev = d.join("n0");
                if prev.is_file() {
                    std::fs::hard_link(&prev, &path).unwrap();
                } else {
                    std::fs::write(&path, "n0").unwrap();
                }
            }
            3 => std::fs::write(&path, vec![(i % 251) as u8; 40_000 + i % 30_000]).unwrap(),
            _ => std::fs::write(&path, vec![(i % 253) as u8; (r >> 40) as usize % 9000]).unwrap(),
        }
    }
}

#[test]
fn kill_at_random_points_then_resume() {
    let long = std::env::var_os("FSCRYPT_RS_LONG_TESTS").is_some();
    let (files, rounds, size) = if long {
        (10_000, 20, 1024)
    } else {
        (300, 5, 128)
    };
    let Some(env) = Env::new("convert_kill", size) else {
        return;
    };
    let t0 = Instant::now();
    let seed = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos() as u64;
    eprintln!("kill test: {files} objects, {rounds} rounds, seed {seed}");
    // Round 0: uninterrupted, for the duration (and the protector).
    let d0 = env.mnt().join("r0");
    many_tree(&d0, files, seed);
    let before = snapshot(&d0);
    let start = Instant::now();
    ok(&env.convert_new(&d0, "rk"), "round 0");
    let full = start.elapsed();
    assert_same(&before, &snapshot(&d0), "round 0");
    let prot = env.protector();
    let key = env.key();
    let mut r = seed;
    let (mut original, mut finished) = (0, 0);
    for round in 1..=rounds {
        let d = env.mnt().join(format!("r{round}"));
        many_tree(&d, files, seed ^ round as u64);
        let before = snapshot(&d);
        r = r
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        let delay = full.mul_f64(((r >> 11) as f64 / (1u64 << 53) as f64) * 1.1);
        let args = [
            "encrypt",
            p(&d),
            "--convert",
            "--protector",
            &prot,
            "--key",
            p(&key),
        ];
        let mut child = env
            .cmd(&args)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        std::thread::sleep(delay);
        let _ = child.kill();
        let status = child.wait().unwrap();
        let snap = snapshot(&d);
        assert_same(
            &before,
            &snap,
            &format!("round {round} after SIGKILL at {delay:?} ({status})"),
        );
        if encrypted(&d) {
            finished += 1;
        } else {
            original += 1;
        }
        let work = env.mnt().join(format!(".r{round}.fscrypt-convert"));
        if work.exists() || !encrypted(&d) {
            let o = env.rs(&args);
            ok(&o, &format!("round {round}: rerun"));
        }
        // Else it had finished (perhaps killed before it could exit): a
        // rerun would rightly say "already encrypted".
        assert!(encrypted(&d), "round {round}: not encrypted after rerun");
        assert!(!work.exists(), "round {round}: work dir left");
        assert_same(
            &before,
            &snapshot(&d),
            &format!("round {round} after rerun"),
        );
        if round % 3 == 0 {
            // Lock and unlock once in a while: really encrypted.
            ok(&env.rs(&["lock", p(&d), "-q"]), "lock");
            assert!(
                !d.join("n0").exists(),
                "round {round}: plaintext name while locked"
            );
            ok(&env.rs(&["unlock", p(&d), "--key", p(&key)]), "unlock");
            assert_same(
                &before,
                &snapshot(&d),
                &format!("round {round} unlocked again"),
            );
        }
        std::fs::remove_dir_all(&d).unwrap();
    }
    eprintln!(
        "kill test: {rounds} rounds in {:?} (one conversion {full:?}); killed before the exchange {original}, after {finished}",
        t0.elapsed()
    );
}

#[test]
fn refusals() {
    let Some(env) = Env::new("convert_refusals", 64) else {
        return;
    };
    let meta = |env: &Env| -> Vec<PathBuf> {
        let mut v = test_support::tree::walk(&env.mnt().join(".fscrypt"));
        v.sort();
        v
    };
    let d = env.mnt().join("full");
    std::fs::create_dir(&d).unwrap();
    std::fs::write(d.join("held.txt"), "x").unwrap();
    let m0 = meta(&env);

    // Without --convert: exit 23, one line, nothing written.
    let key = env.key();
    let o = env.rs(&[
        "encrypt",
        p(&d),
        "--source",
        "raw_key",
        "--name",
        "a",
        "--key",
        p(&key),
    ]);
    assert_eq!(o.status.code(), Some(23), "{}", text(&o));
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(err.trim_end().lines().count(), 1, "{}", text(&o));
    assert!(err.contains("--convert"), "{}", text(&o));
    assert_eq!(meta(&env), m0);

    // An open file: exit 27, the message names it and the process.
    {
        let _held = std::fs::File::open(d.join("held.txt")).unwrap();
        let o = env.convert_new(&d, "a");
        assert_eq!(o.status.code(), Some(27), "{}", text(&o));
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(err.contains("held.txt"), "{}", text(&o));
        assert!(
            err.contains(&format!("pid {}", std::process::id())),
            "{}",
            text(&o)
        );
        assert_eq!(meta(&env), m0);
        assert!(!encrypted(&d));
    }

    // A mount point (DIR bind-mounted onto itself): exit 27.
    let st = Command::new("mount")
        .arg("--bind")
        .arg(&d)
        .arg(&d)
        .status()
        .unwrap();
    assert!(st.success());
    let o = env.convert_new(&d, "a");
    let _ = Command::new("umount").arg(&d).status();
    assert_eq!(o.status.code(), Some(27), "{}", text(&o));
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("mount point"),
        "{}",
        text(&o)
    );
    assert_eq!(meta(&env), m0);

    // Too little space: a 40 MiB file on a 64 MiB filesystem.
    std::fs::write(d.join("big"), vec![7u8; 40 << 20]).unwrap();
    let o = env.convert_new(&d, "a");
    assert_eq!(o.status.code(), Some(27), "{}", text(&o));
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("not enough free space"),
        "{}",
        text(&o)
    );
    assert_eq!(meta(&env), m0);
    assert!(!encrypted(&d));
    assert!(!env.mnt().join(".full.fscrypt-convert").exists());
}

/// A login protector on another filesystem: the conversion adds a recovery
/// passphrase (as plain `encrypt` does) and keeps its instructions,
/// encrypted, beside DIR until the end; killed once the copy has begun and
/// rerun, the finished DIR still has them, and the passphrase unlocks it.
#[test]
fn recovery_passphrase_survives_an_interrupted_conversion() {
    let test = "convert_recovery";
    let Some(env) = Env::new(test, 64) else {
        return;
    };
    let Some(other) = scratch_ext4(test, 64, MKFS_4K) else {
        return;
    };
    let Some(u) = test_support::users::TestUser::new(test, "v", "conv-pw-1") else {
        return;
    };
    let m2 = other.mount_point();
    ok(&env.rs(&["setup", p(m2)]), "setup MNT2");
    let d = m2.join("home");
    many_tree(&d, 300, 7);
    std::os::unix::fs::chown(&d, Some(u.uid), Some(u.uid)).unwrap();
    let before = snapshot(&d);
    let args = [
        "encrypt",
        p(&d),
        "--convert",
        "--source",
        "pam_passphrase",
        "--user",
        &u.name,
    ];
    let mut child = env
        .cmd(&args)
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    {
        use std::io::Write;
        child
            .stdin
            .take()
            .unwrap()
            .write_all(b"conv-pw-1\n")
            .unwrap();
    }
    // Kill it once the copy has begun (the state says "prepared").
    let state = m2.join(".home.fscrypt-convert/state");
    let t0 = Instant::now();
    while !std::fs::read_to_string(&state).is_ok_and(|s| s.contains("prepared")) {
        assert!(
            child.try_wait().unwrap().is_none(),
            "finished before it could be killed"
        );
        assert!(t0.elapsed() < Duration::from_secs(120), "never prepared");
        std::thread::sleep(Duration::from_millis(2));
    }
    let _ = child.kill();
    let _ = child.wait();
    assert!(
        m2.join(".home.fscrypt-recovery").exists(),
        "no recovery stash"
    );
    ok(&env.rs(&["encrypt", p(&d), "--convert"]), "rerun");
    assert!(
        !m2.join(".home.fscrypt-recovery").exists(),
        "stash left behind"
    );
    let readme = d.join("fscrypt_recovery_readme.txt");
    let text = std::fs::read_to_string(&readme).expect("recovery instructions in DIR");
    let mut after = snapshot(&d);
    after.retain(|k, _| k != Path::new("fscrypt_recovery_readme.txt"));
    assert_same(&before, &after, "after the rerun");
    let pass = text
        .lines()
        .map(str::trim)
        .find(|l| l.len() == 20 && l.bytes().all(|c| c.is_ascii_lowercase()))
        .expect("the passphrase")
        .to_string();
    // The readme's command names the directory itself.
    let unlock = format!("fscrypt-rs unlock {} --unlock-with ", p(&d));
    let rec = text
        .lines()
        .find_map(|l| l.trim().strip_prefix(unlock.as_str()))
        .unwrap_or_else(|| panic!("no `{unlock}ID` line in the readme:\n{text}"))
        .to_string();
    ok(&env.rs(&["lock", p(&d), "--all-users", "-q"]), "lock");
    let o = test_support::run::output(
        &mut env.cmd(&["unlock", p(&d), "--unlock-with", &rec]),
        format!("{pass}\n").as_bytes(),
    );
    ok(&o, "unlock with the recovery passphrase");
    assert!(readme.exists());
}

/// Issue 20 item 2: files written into DIR between the verification and
/// the exchange are not lost. The conversion waits on a FIFO just before
/// the exchange (the `FSCRYPT_RS_TEST_PAUSE_BEFORE_SWAP` test seam); the
/// test then adds a file and a directory, appends to a file and rewrites
/// one with a hard link, and lets it go on: all of it is in the encrypted
/// result, and nothing is left behind.
#[test]
fn writes_in_the_last_window_are_kept() {
    let Some(env) = Env::new("convert_window", 64) else {
        return;
    };
    let d = env.mnt().join("win");
    std::fs::create_dir_all(d.join("sub")).unwrap();
    std::fs::write(d.join("log"), "line 1\n").unwrap();
    std::fs::write(d.join("sub/linked"), "v1").unwrap();
    std::fs::hard_link(d.join("sub/linked"), d.join("other-name")).unwrap();
    std::fs::write(d.join("same"), "unchanged").unwrap();
    let fifo = fifo(&env, "pause");
    let key = env.key();
    let mut child = env
        .cmd(&[
            "encrypt",
            p(&d),
            "--convert",
            "--source",
            "raw_key",
            "--name",
            "w",
            "--key",
            p(&key),
        ])
        .env("FSCRYPT_RS_TEST_PAUSE_BEFORE_SWAP", &fifo)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let writer = paused(&mut child, &fifo);
    assert!(!encrypted(&d), "paused after the exchange");
    std::fs::write(d.join("new-file"), "written in the window").unwrap();
    std::fs::create_dir(d.join("new-dir")).unwrap();
    std::fs::write(d.join("new-dir/inner"), "inner").unwrap();
    {
        use std::io::Write;
        let mut f = std::fs::OpenOptions::new()
            .append(true)
            .open(d.join("log"))
            .unwrap();
        f.write_all(b"line 2\n").unwrap();
    }
    std::fs::write(d.join("sub/linked"), "v2, longer").unwrap();
    let before = snapshot(&d);
    drop(writer);
    let o = child.wait_with_output().unwrap();
    ok(&o, "convert");
    assert!(encrypted(&d));
    assert_eq!(
        std::fs::read(d.join("new-file")).unwrap(),
        b"written in the window"
    );
    assert_eq!(std::fs::read(d.join("new-dir/inner")).unwrap(), b"inner");
    assert_eq!(std::fs::read(d.join("log")).unwrap(), b"line 1\nline 2\n");
    assert_eq!(std::fs::read(d.join("sub/linked")).unwrap(), b"v2, longer");
    assert_eq!(std::fs::read(d.join("other-name")).unwrap(), b"v2, longer");
    assert_eq!(std::fs::read(d.join("same")).unwrap(), b"unchanged");
    assert_same(&before, &snapshot(&d), "after the window");
    assert!(!env.mnt().join(".win.fscrypt-convert").exists());
}

/// Issue 20 item 2: a file changed in the last window whose copy in DIR
/// was changed too after the exchange cannot be copied in: the conversion
/// keeps the changed plaintext in the work directory, names it and exits
/// 1 (DIR stays encrypted with the later change); once the user moved it
/// away, a rerun finishes.
#[test]
fn a_conflict_after_the_window_is_kept_and_named() {
    let Some(env) = Env::new("convert_window_conflict", 64) else {
        return;
    };
    let d = env.mnt().join("conf");
    std::fs::create_dir(&d).unwrap();
    std::fs::write(d.join("x"), "v1").unwrap();
    std::fs::write(d.join("y"), "untouched").unwrap();
    let (before, after) = (fifo(&env, "before"), fifo(&env, "after"));
    let key = env.key();
    let mut cmd = env.cmd(&[
        "encrypt",
        p(&d),
        "--convert",
        "--source",
        "raw_key",
        "--name",
        "c",
        "--key",
        p(&key),
    ]);
    cmd.env("FSCRYPT_RS_TEST_PAUSE_BEFORE_SWAP", &before)
        .env("FSCRYPT_RS_TEST_PAUSE_AFTER_SWAP", &after)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = cmd.spawn().unwrap();
    let w = paused(&mut child, &before);
    std::fs::write(d.join("x"), "v2 in the window").unwrap();
    drop(w);
    let w = paused(&mut child, &after);
    assert!(encrypted(&d));
    std::fs::write(d.join("x"), "v3 after the swap").unwrap();
    drop(w);
    let o = child.wait_with_output().unwrap();
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("x changed while"), "{}", text(&o));
    assert!(encrypted(&d));
    assert_eq!(std::fs::read(d.join("x")).unwrap(), b"v3 after the swap");
    assert_eq!(std::fs::read(d.join("y")).unwrap(), b"untouched");
    let work = env.mnt().join(".conf.fscrypt-convert");
    let kept = work.join("encrypted/x");
    assert_eq!(std::fs::read(&kept).unwrap(), b"v2 in the window");
    assert!(
        !work.join("encrypted/y").exists(),
        "the recorded rest removed"
    );
    // A rerun without moving it: still kept, still named.
    let args = [
        "encrypt",
        p(&d),
        "--convert",
        "--protector",
        &env.protector(),
        "--key",
        p(&key),
    ];
    let o = env.rs(&args);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    assert!(kept.exists());
    std::fs::rename(&kept, env.mnt().join("x.saved")).unwrap();
    ok(&env.rs(&args), "rerun after moving it away");
    assert!(!work.exists());
    assert_eq!(
        std::fs::read(env.mnt().join("x.saved")).unwrap(),
        b"v2 in the window"
    );
}

/// Issue 20 item 2: a file with a hard link outside DIR is refused up
/// front (its plaintext would stay readable there), naming it; nothing
/// is written.
#[test]
fn hard_link_outside_is_refused() {
    let Some(env) = Env::new("convert_outside_link", 64) else {
        return;
    };
    let d = env.mnt().join("linked");
    std::fs::create_dir(&d).unwrap();
    std::fs::write(d.join("secret"), "plaintext").unwrap();
    std::fs::write(d.join("fine"), "x").unwrap();
    std::fs::hard_link(d.join("secret"), env.mnt().join("outside")).unwrap();
    let m0 = test_support::tree::walk(&env.mnt().join(".fscrypt"));
    let o = env.convert_new(&d, "a");
    assert_eq!(o.status.code(), Some(27), "{}", text(&o));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("secret") && err.contains("hard link"),
        "{}",
        text(&o)
    );
    assert!(!encrypted(&d));
    assert!(!env.mnt().join(".linked.fscrypt-convert").exists());
    assert_eq!(test_support::tree::walk(&env.mnt().join(".fscrypt")), m0);
}

/// Issue 20 item 2: run by a user other than root, a tree holding another
/// user's file is refused up front (the copy could not give it its
/// owner), instead of leaving a conversion that can never finish.
#[test]
fn other_users_file_refused_when_not_root() {
    let test = "convert_not_owner";
    if !test_support::skip::setpriv_available(test) {
        return;
    }
    let Some(env) = Env::new(test, 64) else {
        return;
    };
    use test_support::users::NOBODY;
    let (d, key) = env.nobody_home();
    let base = d.parent().unwrap().to_path_buf();
    std::fs::write(d.join("roots"), "y").unwrap();
    let mut c = test_support::users::as_user(NOBODY, NOBODY, BIN);
    c.args([
        "encrypt",
        p(&d),
        "--convert",
        "--source",
        "raw_key",
        "--name",
        "n",
        "--key",
        p(&key),
    ])
    .env("FSCRYPT_CONF", env.tmp.join("fscrypt.conf"))
    .env("FSCRYPT_ROOT_MNT", env.mnt());
    let o = test_support::run::output_within(&mut c, b"", Duration::from_secs(120));
    assert_eq!(o.status.code(), Some(27), "{}", text(&o));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("roots") && err.contains("another user"),
        "{}",
        text(&o)
    );
    assert!(!encrypted(&d));
    assert!(!base.join(".home.fscrypt-convert").exists());
}
