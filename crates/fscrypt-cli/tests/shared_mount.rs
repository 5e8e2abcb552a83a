//! `fscrypt-rs mount -o sharedstorage` through the real binary (issue 23
//! §3): two daemons serve one cipher directory, a change through one is
//! read through the other at once, and a plain mount beside them is refused
//! with one line that names the option. The engine's side (caching, lock,
//! recovery, clean marker) is tested in
//! `crates/fscrypt-fuse/tests/shared_storage.rs`.

use std::ffi::OsStr;
use std::path::Path;
use std::process::Output;

use test_support::{MountGuard, TempDir, text};

const BIN: &str = env!("CARGO_BIN_EXE_fscrypt-rs");

fn run(args: &[&OsStr]) -> Output {
    test_support::cli::run(Path::new(BIN), args, b"")
}

fn ok(what: &str, out: &Output) {
    assert!(
        out.status.success(),
        "{what}: exit {:?}: {}{}",
        out.status.code(),
        text(&out.stdout),
        text(&out.stderr)
    );
}

#[test]
fn two_shared_mounts_of_one_vault_and_a_plain_one_refused() {
    test_support::need_fuse!();
    let t = TempDir::new("shared-cli");
    let (cipher, key) = (t.sub("cipher"), t.path().join("vault.key"));
    let (a, b, c) = (t.sub("a"), t.sub("b"), t.sub("c"));
    ok(
        "init",
        &run(&[
            "init".as_ref(),
            cipher.as_os_str(),
            "--new-key-file".as_ref(),
            key.as_os_str(),
            "--no-recovery-key".as_ref(),
        ]),
    );
    let mount = |mnt: &Path, opts: &str| {
        run(&[
            "mount".as_ref(),
            cipher.as_os_str(),
            mnt.as_os_str(),
            "--key-file".as_ref(),
            key.as_os_str(),
            "-o".as_ref(),
            opts.as_ref(),
        ])
    };
    ok("mount a", &mount(&a, "sharedstorage"));
    let ga = MountGuard::new(BIN, &a);
    ok("mount b", &mount(&b, "sharedstorage"));
    let gb = MountGuard::new(BIN, &b);
    std::fs::write(a.join("note"), b"written through a").unwrap();
    assert_eq!(std::fs::read(b.join("note")).unwrap(), b"written through a");
    std::fs::rename(b.join("note"), b.join("moved")).unwrap();
    assert!(!a.join("note").exists());
    assert_eq!(
        std::fs::read(a.join("moved")).unwrap(),
        b"written through a"
    );
    let out = mount(&c, "rw");
    assert!(!out.status.success(), "a plain mount beside shared ones");
    let err = text(&out.stderr);
    assert!(err.contains("sharedstorage"), "{err}");
    assert!(!test_support::is_mounted(&c));
    drop(gb);
    drop(ga);
}
