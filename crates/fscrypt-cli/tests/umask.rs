//! The mount daemon applies no umask of its own: files, directories and
//! fifos created through the mount under umask 0 get exactly the modes they
//! get on a plain directory (the kernel applies the caller's umask once;
//! pjdfstest C open/02.t, open/03.t). The daemon is the real binary started
//! with umask 022. One test per file: the test sets its process umask.

use std::path::Path;
use std::process::Command;
use std::time::Instant;

use rustix::fs::{FileType, Mode, OFlags};
use test_support::{MountGuard, TempDir, is_mounted};

const BIN: &str = env!("CARGO_BIN_EXE_fscrypt-rs");

/// Creates the test objects in `dir` and returns (name, mode & 07777).
fn create_all(dir: &Path) -> Vec<(String, u32)> {
    let mut out = Vec::new();
    for mode in [0o620, 0o777, 0o640, 0o666, 0o604, 0o2755, 0o4755] {
        let p = dir.join(format!("file-{mode:o}"));
        let fd = rustix::fs::open(
            &p,
            OFlags::CREATE | OFlags::EXCL | OFlags::WRONLY | OFlags::CLOEXEC,
            Mode::from_raw_mode(mode),
        )
        .unwrap_or_else(|e| panic!("create {}: {e}", p.display()));
        drop(fd);
        out.push(p);
    }
    for mode in [0o777, 0o750, 0o1777, 0o702] {
        let p = dir.join(format!("dir-{mode:o}"));
        rustix::fs::mkdir(&p, Mode::from_raw_mode(mode)).unwrap();
        out.push(p);
    }
    for mode in [0o666, 0o620] {
        let p = dir.join(format!("fifo-{mode:o}"));
        rustix::fs::mknodat(
            rustix::fs::CWD,
            &p,
            FileType::Fifo,
            Mode::from_raw_mode(mode),
            0,
        )
        .unwrap();
        out.push(p);
    }
    out.into_iter()
        .map(|p| {
            let st = rustix::fs::lstat(&p).unwrap();
            let name = p.file_name().unwrap().to_string_lossy().into_owned();
            (name, st.st_mode & 0o7777)
        })
        .collect()
}

#[test]
fn created_modes_are_the_kernels() {
    if !test_support::skip::can_mount("created_modes_are_the_kernels") {
        return;
    }
    let started = Instant::now();
    let t = TempDir::new("cli-umask");
    let (cipher, mnt, plain) = (t.sub("cipher"), t.sub("mnt"), t.sub("plain"));
    let key = t.join("vault.key");
    test_support::cli::init_with_key_file(Path::new(BIN), &cipher, &key);
    // The daemon starts with umask 022, as from a login shell.
    let out = test_support::run::output(
        Command::new("/bin/sh")
            .arg("-c")
            .arg("umask 022 && exec \"$0\" \"$@\"")
            .arg(BIN)
            .arg("mount")
            .arg(&cipher)
            .arg(&mnt)
            .arg("--key-file")
            .arg(&key),
        b"",
    );
    assert!(out.status.success(), "mount: {out:?}");
    let guard = MountGuard::new(BIN, &mnt);
    assert!(is_mounted(&mnt));

    rustix::process::umask(Mode::empty());
    let on_mount = create_all(&mnt);
    let on_plain = create_all(&plain);
    rustix::process::umask(Mode::from_raw_mode(0o022));
    drop(guard);
    let diff: Vec<String> = on_mount
        .iter()
        .zip(&on_plain)
        .filter(|(a, b)| a != b)
        .map(|((n, m), (_, p))| format!("{n}: {m:o} on the mount, {p:o} on a plain dir"))
        .collect();
    eprintln!(
        "{} objects compared in {:.1} s",
        on_mount.len(),
        started.elapsed().as_secs_f32()
    );
    assert!(diff.is_empty(), "modes differ:\n{}", diff.join("\n"));
}
