//! Shared by the fsck tests (`fsck.rs`, `fsck_exit_codes.rs`): a vault
//! made by the real binary and filled through `EncryptedFs` ([`V`]), running
//! `fscrypt-rs fsck` on it, and reading its JSON report.

use std::ffi::OsStr;
use std::path::PathBuf;
use std::process::{Command, Output, Stdio};

use fscrypt_fuse::{Caller, EncryptedFs, FsOptions, InodeNo, ROOT};
use fscrypt_vault::Vault;

pub const BIN: &str = env!("CARGO_BIN_EXE_fscrypt-rs");
pub const CONTENT: &[u8] = b"hello, fsck\n";
pub const LONG_NAME: &str = "a-long-name-that-needs-a-side-file-because-its-ciphertext-is-longer-than-one-hundred-and-ninety-one-bytes-so-it-is-stored-under-a-hash-and-its-ciphertext-lives-in-a-side-file-next-to-the-entry.txt";

/// A temporary directory removed on drop.
pub struct TempDir(pub PathBuf);

impl TempDir {
    pub fn new(tag: &str) -> TempDir {
        let mut rnd = [0u8; 6];
        fscrypt_crypto::random_bytes(&mut rnd).unwrap();
        let hex: String = rnd.iter().map(|b| format!("{b:02x}")).collect();
        let path = std::env::temp_dir().join(format!("fscrypt-fsck-{tag}-{hex}"));
        std::fs::create_dir(&path).unwrap();
        TempDir(path)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// A vault with: /hello.txt, /docs/a.txt, /docs/<LONG_NAME>, /empty/,
/// /link -> hello.txt, /longlink -> a 3500-byte target (in the store),
/// /fifo.
pub struct V {
    pub _tmp: TempDir,
    pub cipher: PathBuf,
    pub key: PathBuf,
}

pub fn me() -> Caller {
    Caller {
        uid: rustix::process::geteuid().as_raw(),
        gid: rustix::process::getegid().as_raw(),
    }
}

pub fn long_target() -> Vec<u8> {
    (0..3500).map(|i| b'a' + (i % 26) as u8).collect()
}

impl V {
    pub fn new(tag: &str) -> V {
        V::with_init(tag, &[])
    }

    /// A vault of format 1 (init makes format 2; the still empty root's
    /// metadata is rewritten with version byte 1, which makes it format 1).
    #[allow(dead_code)] // not every test binary that shares this module uses it
    pub fn new_v1(tag: &str) -> V {
        V::with_init_format(tag, &[], fscrypt_fuse::layout::Format::V1)
    }

    /// A vault as `init` with `extra` makes it.
    pub fn with_init(tag: &str, extra: &[&str]) -> V {
        V::init_as(tag, extra, None)
    }

    /// A vault made by `init` with `extra`, its root then marked `format`.
    pub fn with_init_format(tag: &str, extra: &[&str], format: fscrypt_fuse::layout::Format) -> V {
        V::init_as(tag, extra, Some(format))
    }

    fn init_as(tag: &str, extra: &[&str], format: Option<fscrypt_fuse::layout::Format>) -> V {
        let tmp = TempDir::new(tag);
        let cipher = tmp.0.join("cipher");
        let key = tmp.0.join("key");
        std::fs::create_dir(&cipher).unwrap();
        let mut args: Vec<&OsStr> = vec![
            "init".as_ref(),
            cipher.as_os_str(),
            "--new-key-file".as_ref(),
            key.as_os_str(),
        ];
        args.extend(extra.iter().map(OsStr::new));
        let out = run(&args);
        assert!(out.status.success(), "init: {}", text(&out.stderr));
        let meta = cipher.join(fscrypt_fuse::layout::DIR_META_NAME);
        let mut h = fscrypt_fuse::layout::Header::parse(
            &std::fs::read(&meta).unwrap(),
            fscrypt_fuse::layout::HeaderKind::Directory,
        )
        .unwrap();
        if let Some(format) = format
            && h.format != format
        {
            h.format = format;
            std::fs::write(&meta, h.to_bytes()).unwrap();
        }
        let v = V {
            _tmp: tmp,
            cipher,
            key,
        };
        {
            let fs = v.fs();
            let c = me();
            let (_, fh) = fs
                .create(ROOT, OsStr::new("hello.txt"), 0o644, 2, c)
                .unwrap();
            fs.write(fh, 0, CONTENT).unwrap();
            fs.release(fh).unwrap();
            let docs = InodeNo(fs.mkdir(ROOT, OsStr::new("docs"), 0o755, c).unwrap().ino.0);
            for name in ["a.txt", LONG_NAME] {
                let (_, fh) = fs.create(docs, OsStr::new(name), 0o644, 2, c).unwrap();
                fs.write(fh, 0, name.as_bytes()).unwrap();
                fs.release(fh).unwrap();
            }
            fs.mkdir(ROOT, OsStr::new("empty"), 0o755, c).unwrap();
            fs.symlink(ROOT, OsStr::new("link"), b"hello.txt", c)
                .unwrap();
            fs.symlink(ROOT, OsStr::new("longlink"), &long_target(), c)
                .unwrap();
            fs.mknod(ROOT, OsStr::new("fifo"), 0o010644, 0, c).unwrap();
        } // dropped: the clean marker is written
        v
    }

    pub fn master(&self) -> fscrypt::MasterKey {
        let vault = Vault::open(&self.cipher).unwrap();
        vault
            .unlock_with_key_file(&std::fs::read(&self.key).unwrap())
            .unwrap()
    }

    pub fn fs(&self) -> EncryptedFs {
        let vault = Vault::open(&self.cipher).unwrap();
        EncryptedFs::new(
            &self.cipher,
            *vault.policy(),
            Some(self.master()),
            FsOptions::default(),
        )
        .unwrap()
    }

    /// Runs fsck with the key file (`key`) or `--no-key`, plus `extra`.
    pub fn fsck(&self, key: bool, extra: &[&str]) -> Output {
        let mut args: Vec<&OsStr> = vec!["fsck".as_ref(), self.cipher.as_os_str()];
        if key {
            args.push("--key-file".as_ref());
            args.push(self.key.as_os_str());
        } else {
            args.push("--no-key".as_ref());
        }
        args.extend(extra.iter().map(OsStr::new));
        run(&args)
    }

    /// The JSON report of a check (key or not), with its exit status.
    pub fn report(&self, key: bool, extra: &[&str]) -> (i32, serde_json::Value) {
        let mut e = extra.to_vec();
        e.push("--json");
        let out = self.fsck(key, &e);
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
            panic!(
                "fsck --json: {e}: stdout {} stderr {}",
                text(&out.stdout),
                text(&out.stderr)
            )
        });
        (out.status.code().unwrap(), v)
    }
}

pub fn run(args: &[&OsStr]) -> Output {
    Command::new(BIN)
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .output()
        .unwrap()
}

pub fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// The problems of a JSON report as (kind, backing path relative to the
/// cipher directory, plaintext path, status).
pub fn problems(v: &V, r: &serde_json::Value) -> Vec<(String, String, Option<String>, String)> {
    let base = format!("{}/", v.cipher.display());
    r["problems"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| {
            let b = p["backing_path"].as_str().unwrap();
            (
                p["kind"].as_str().unwrap().to_owned(),
                b.strip_prefix(&base).unwrap_or(b).to_owned(),
                p["path"].as_str().map(str::to_owned),
                p["status"].as_str().unwrap().to_owned(),
            )
        })
        .collect()
}
