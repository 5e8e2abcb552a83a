//! Typed errors end to end (issue 10 §4): the format layer's refusals keep
//! their cause (`Error::Format`) and map to the kernel's errnos, the
//! filesystem's own refusals are named variants, and every failed FUSE
//! operation leaves exactly one debug log line without plaintext names.

use std::ffi::OsStr;
use std::fs;

use fscrypt::{HookError, NameError};
use fscrypt_fuse::{Caller, Error, FileHandle, InodeNo, ROOT};
use test_support::fuse::{Vault, open_fs, policy};
use test_support::{TempDir, fuse_available};

const ME: Caller = Caller { uid: 0, gid: 0 };

#[test]
fn format_errors_keep_their_cause_and_errno() {
    let dir = TempDir::new("typed-errors");
    fscrypt_fuse::create_root(dir.path(), &policy()).unwrap();
    let d;
    {
        let fs = open_fs(&dir, true);
        // Too long for the format: ENAMETOOLONG with the cause kept.
        let e = fs
            .symlink(ROOT, OsStr::new("l"), &[b'a'; 4096], ME)
            .unwrap_err();
        assert!(
            matches!(
                e,
                Error::Format(fscrypt::Error::Name(NameError::TooLong { .. }))
            ),
            "{e:?}"
        );
        assert_eq!(e.errno(), libc::ENAMETOOLONG);
        let e = fs
            .create(ROOT, OsStr::new(&"n".repeat(256)), 0o600, 0, ME)
            .unwrap_err();
        assert_eq!(e.errno(), libc::ENAMETOOLONG, "{e:?}");
        // The filesystem's own refusals are named.
        d = fs.mkdir(ROOT, OsStr::new("d"), 0o755, ME).unwrap().ino.0;
        let (_, fh) = fs
            .create(InodeNo(d), OsStr::new("f"), 0o600, libc::O_WRONLY, ME)
            .unwrap();
        fs.release(fh).unwrap();
        let e = fs.rmdir(ROOT, OsStr::new("d")).unwrap_err();
        assert!(matches!(e, Error::NotEmpty), "{e:?}");
        assert_eq!(e.errno(), libc::ENOTEMPTY);
        let e = fs.link(InodeNo(d), ROOT, OsStr::new("d2")).unwrap_err();
        assert!(matches!(e, Error::NotPermitted), "{e:?}");
        let e = fs
            .read(FileHandle(9999), 0, 10, &mut Vec::new())
            .unwrap_err();
        assert!(matches!(e, Error::BadHandle), "{e:?}");
        assert_eq!(e.errno(), libc::EBADF);
        let e = fs
            .getxattr(InodeNo(d), OsStr::new("trusted.x"), 0)
            .unwrap_err();
        assert!(matches!(e, Error::NotSupported), "{e:?}");
    }
    // Locked: the hooks' refusals.
    let fs = open_fs(&dir, false);
    let e = fs
        .lookup(ROOT, OsStr::new("!!not-a-no-key-name"))
        .unwrap_err();
    assert!(
        matches!(e, Error::Format(fscrypt::Error::Hook(HookError::NotFound))),
        "{e:?}"
    );
    assert_eq!(e.errno(), libc::ENOENT);
    let mut listed = Vec::new();
    let fh = fs.opendir(ROOT).unwrap();
    fs.readdir(fh, 0, |ino, _, _, name| {
        listed.push((ino, name.to_owned()));
        false
    })
    .unwrap();
    fs.releasedir(fh).unwrap();
    let (ino, nokey) = listed
        .into_iter()
        .find(|(_, n)| n != "." && n != "..")
        .unwrap();
    let a = fs.lookup(ROOT, &nokey).unwrap();
    assert_eq!(a.ino.0, ino);
    let e = fs
        .rename(
            ROOT,
            &nokey,
            ROOT,
            OsStr::new("AAAAAAAAAAAAAAAAAAAAAAAA"),
            0,
        )
        .unwrap_err();
    assert!(
        matches!(
            e,
            Error::Format(fscrypt::Error::Hook(HookError::KeyRequired))
        ),
        "{e:?}"
    );
    assert_eq!(e.errno(), libc::ENOKEY);
    let e = fs.link(InodeNo(d), ROOT, OsStr::new("AAAAAAAAAAAAAAAAAAAAAAAA"));
    assert_eq!(e.unwrap_err().errno(), libc::EPERM, "directories first");
}

/// A no-key name whose ciphertext is shorter than any real entry's names
/// no entry: a foreign backing file of that name stays invisible, as in the
/// listing.
#[test]
fn short_no_key_names_find_no_foreign_files() {
    let dir = TempDir::new("typed-errors-foreign");
    fscrypt_fuse::create_root(dir.path(), &policy()).unwrap();
    fs::write(dir.path().join("AAAA"), b"foreign").unwrap();
    let fs = open_fs(&dir, false);
    let nk = fscrypt::nokey::encode(&[0, 0, 0], 0, 0);
    let e = fs
        .lookup(
            ROOT,
            OsStr::new(std::str::from_utf8(nk.as_bytes()).unwrap()),
        )
        .unwrap_err();
    assert_eq!(e.errno(), libc::ENOENT, "{e:?}");
}

/// Log records of this process (the mount runs in a thread of it).
struct Collect(std::sync::Mutex<Vec<(log::Level, String, String)>>);
impl log::Log for Collect {
    fn enabled(&self, _: &log::Metadata<'_>) -> bool {
        true
    }
    fn log(&self, r: &log::Record<'_>) {
        if let Ok(mut v) = self.0.lock() {
            v.push((r.level(), r.target().to_string(), r.args().to_string()));
        }
    }
    fn flush(&self) {}
}
static LOGS: Collect = Collect(std::sync::Mutex::new(Vec::new()));

/// Our crate's log lines since the last call (fuser's own are not ours:
/// the daemon's logger drops them below warn).
fn take_ours() -> Vec<(log::Level, String)> {
    let mut v = LOGS.0.lock().unwrap();
    let out = v
        .iter()
        .filter(|(_, t, _)| t.starts_with("fscrypt_fuse"))
        .map(|(l, _, m)| (*l, m.clone()))
        .collect();
    v.clear();
    out
}

#[test]
fn a_failed_operation_leaves_one_debug_line_without_plaintext() {
    if !fuse_available(module_path!()) {
        return;
    }
    let _ = log::set_logger(&LOGS);
    log::set_max_level(log::LevelFilter::Trace);
    let v = Vault::new("errlog");
    fs::create_dir(v.p("plaintext-secret-dir")).unwrap();
    fs::write(v.p("plaintext-secret-dir/plaintext-secret-file"), b"x").unwrap();
    take_ours();

    // Fails in the daemon (the kernel's lookup of the name succeeds).
    let e = fs::remove_dir(v.p("plaintext-secret-dir")).unwrap_err();
    assert_eq!(e.raw_os_error(), Some(libc::ENOTEMPTY));
    let lines = take_ours();
    let failed: Vec<_> = lines.iter().filter(|(_, m)| m.contains("failed")).collect();
    assert_eq!(failed.len(), 1, "one line per failed operation: {lines:#?}");
    let (level, msg) = failed[0];
    assert_eq!(*level, log::Level::Debug);
    assert!(msg.contains("rmdir") && msg.contains("ino 1"), "{msg}");
    assert!(msg.contains(&format!("errno {}", libc::ENOTEMPTY)), "{msg}");
    assert!(
        msg.contains(&v.backing.path().display().to_string()),
        "{msg}"
    );

    // A negative lookup: the name is plaintext, the line names the parent.
    let e = fs::symlink_metadata(v.p("plaintext-secret-missing")).unwrap_err();
    assert_eq!(e.raw_os_error(), Some(libc::ENOENT));
    let more = take_ours();
    let failed: Vec<_> = more.iter().filter(|(_, m)| m.contains("failed")).collect();
    assert_eq!(failed.len(), 1, "{more:#?}");
    assert!(failed[0].1.contains("lookup"), "{more:#?}");

    for (_, m) in lines.iter().chain(&more) {
        assert!(
            !m.contains("plaintext-secret"),
            "plaintext in a log line: {m}"
        );
    }
}
