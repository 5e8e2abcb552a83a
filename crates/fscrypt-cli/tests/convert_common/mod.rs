//! Shared by the `encrypt --convert` tests (`gfs_convert.rs`,
//! `gfs_convert_window.rs`): a scratch loop ext4 set up for fscrypt with a
//! raw key, the binary's commands, and the FIFO test seams.

#![allow(dead_code)]

use std::io::Read;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::{Duration, Instant};
use test_support::run::assert_ok as ok;

use test_support::loopdev::{MKFS_4K, scratch_ext4};
use test_support::loopfs::LoopExt4;
use test_support::tempdir::TempDir;

/// The binary under test.
pub const BIN: &str = env!("CARGO_BIN_EXE_fscrypt-rs");

/// A scratch loop ext4 set up for fscrypt, with a raw key in `tmp`.
pub struct Env {
    /// The file system.
    pub fs: LoopExt4,
    /// Configuration and key.
    pub tmp: TempDir,
}

impl Env {
    pub fn new(test: &str, size_mib: u64) -> Option<Env> {
        let fs = scratch_ext4(test, size_mib, MKFS_4K)?;
        let env = Env {
            fs,
            tmp: TempDir::new(test),
        };
        ok(&env.rs(&["setup", "--time", "0.001"]), "setup");
        std::fs::write(env.key(), [0x5au8; 32]).unwrap();
        std::fs::set_permissions(env.key(), PermissionsExt::from_mode(0o600)).unwrap();
        Some(env)
    }

    pub fn mnt(&self) -> &Path {
        self.fs.mount_point()
    }

    pub fn key(&self) -> PathBuf {
        self.tmp.join("raw.key")
    }

    pub fn cmd(&self, args: &[&str]) -> Command {
        let mut c = Command::new(BIN);
        c.args(args)
            .env("FSCRYPT_CONF", self.tmp.join("fscrypt.conf"))
            .env("FSCRYPT_ROOT_MNT", self.mnt());
        c
    }

    pub fn rs(&self, args: &[&str]) -> Output {
        test_support::run::output_within(&mut self.cmd(args), b"", Duration::from_secs(600))
    }

    /// `encrypt DIR --convert` with a new raw-key protector named `name`.
    pub fn convert_new(&self, dir: &Path, name: &str) -> Output {
        let key = self.key();
        self.rs(&[
            "encrypt",
            p(dir),
            "--convert",
            "--source",
            "raw_key",
            "--name",
            name,
            "--key",
            p(&key),
        ])
    }

    /// The only protector's `MOUNT:ID`.
    pub fn protector(&self) -> String {
        let ids: Vec<_> = std::fs::read_dir(self.mnt().join(".fscrypt/protectors"))
            .unwrap()
            .flatten()
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .collect();
        assert_eq!(ids.len(), 1, "{ids:?}");
        format!("{}:{}", p(self.mnt()), ids[0])
    }
}

pub fn p(path: &Path) -> &str {
    path.to_str().unwrap()
}

pub fn encrypted(dir: &Path) -> bool {
    fscrypt_linux::policy::get_policy(dir).is_ok()
}

pub fn chown(path: &Path, uid: u32, gid: u32) {
    std::os::unix::fs::lchown(path, Some(uid), Some(gid)).unwrap();
}

impl Env {
    /// For the tests run as `nobody`: the metadata directories made
    /// writable by anyone (as `setup --all-users` leaves them), and
    /// `nobody/home` holding the file `mine`, with `nobody/raw.key` (a copy
    /// of the raw key), all `nobody`'s: (home, key).
    pub fn nobody_home(&self) -> (PathBuf, PathBuf) {
        use test_support::users::NOBODY;
        for m in ["protectors", "policies"] {
            let m = self.mnt().join(".fscrypt").join(m);
            std::fs::set_permissions(&m, PermissionsExt::from_mode(0o1777)).unwrap();
        }
        let base = self.mnt().join("nobody");
        let d = base.join("home");
        std::fs::create_dir_all(&d).unwrap();
        std::fs::write(d.join("mine"), "x").unwrap();
        for q in [&base, &d, &d.join("mine")] {
            chown(q, NOBODY, NOBODY);
        }
        let key = base.join("raw.key");
        std::fs::copy(self.key(), &key).unwrap();
        chown(&key, NOBODY, NOBODY);
        (d, key)
    }
}

/// A FIFO at `tmp/name` for the `FSCRYPT_RS_TEST_PAUSE_*` test seams.
pub fn fifo(env: &Env, name: &str) -> PathBuf {
    let f = env.tmp.join(name);
    assert!(Command::new("mkfifo").arg(&f).status().unwrap().success());
    f
}

/// Waits until `child` opened `fifo` (it is then paused at the seam) and
/// returns the writing end: dropping it lets the child go on.
pub fn paused(child: &mut std::process::Child, fifo: &Path) -> std::fs::File {
    // Opening for writing returns once the reader opened it.
    let (tx, rx) = std::sync::mpsc::channel();
    let f2 = fifo.to_path_buf();
    std::thread::spawn(move || {
        let _ = tx.send(std::fs::OpenOptions::new().write(true).open(&f2));
    });
    let start = Instant::now();
    loop {
        if let Ok(w) = rx.try_recv() {
            return w.unwrap();
        }
        if let Some(st) = child.try_wait().unwrap() {
            let _ = std::fs::File::open(fifo); // unblock the thread
            let mut err = String::new();
            if let Some(mut e) = child.stderr.take() {
                let _ = e.read_to_string(&mut err);
            }
            panic!("exited ({st}) before pausing at {}: {err}", fifo.display());
        }
        assert!(start.elapsed() < Duration::from_secs(300), "never paused");
        std::thread::sleep(Duration::from_millis(10));
    }
}
