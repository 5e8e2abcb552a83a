//! `fscrypt-rs image extract` of an untrusted image as root (issue 20 item
//! 6): the kernel writes a setuid-root file, a setgid file, a character
//! device (0666), a FIFO, another user's file, a file with a
//! `security.capability` xattr, a file with a `trusted.overlay.*` xattr
//! and a setgid directory into a loop ext4;
//! extracted as root without flags, nothing of that privilege survives
//! (no setuid/setgid bit on files, no device node, no file capability,
//! everything owned by the caller) and each dropped item is named on
//! stderr; with `--same-owner --preserve-special` all of it is restored.
//!
//! Needs root and loop devices; skipped loudly otherwise.

use std::os::unix::fs::{FileTypeExt, MetadataExt, PermissionsExt};
use std::path::Path;
use std::process::{Command, Output};

use test_support::TempDir;
use test_support::loopdev::{MKFS_4K, scratch_ext4, unmount_retrying};

const BIN: &str = env!("CARGO_BIN_EXE_fscrypt-rs");

fn run(args: &[&str]) -> Output {
    test_support::run::output(Command::new(BIN).args(args), &[])
}

fn p(path: &Path) -> &str {
    path.to_str().expect("utf-8 path")
}

/// A `security.capability` value (revision 2, effective, CAP_NET_RAW
/// permitted), as `setcap cap_net_raw+ep` writes it.
fn cap_value() -> Vec<u8> {
    let mut v = Vec::new();
    v.extend_from_slice(&(0x0200_0000u32 | 1).to_le_bytes());
    v.extend_from_slice(&(1u32 << 13).to_le_bytes());
    v.extend_from_slice(&[0u8; 12]);
    v
}

fn has_xattr(path: &Path, name: &str) -> bool {
    let mut buf = [0u8; 64];
    rustix::fs::lgetxattr(path, name, &mut buf).is_ok()
}

fn has_cap(path: &Path) -> bool {
    has_xattr(path, "security.capability")
}

#[test]
fn extract_as_root_drops_privileges_unless_asked() {
    let test = "extract_untrusted";
    let Some(mut fs) = scratch_ext4(test, 32, MKFS_4K) else {
        return;
    };
    let m = fs.mount_point().to_path_buf();
    let set = |name: &str, mode: u32, uid: u32, gid: u32| {
        let path = m.join(name);
        std::os::unix::fs::lchown(&path, Some(uid), Some(gid)).expect("chown");
        std::fs::set_permissions(&path, PermissionsExt::from_mode(mode)).expect("chmod");
    };
    std::fs::write(m.join("suid"), b"#!/bin/sh\n").expect("write");
    set("suid", 0o4755, 0, 0);
    std::fs::write(m.join("sgid"), b"x").expect("write");
    set("sgid", 0o2755, 1234, 1234);
    rustix::fs::mknodat(
        rustix::fs::CWD,
        m.join("null"),
        rustix::fs::FileType::CharacterDevice,
        rustix::fs::Mode::from_raw_mode(0o666),
        rustix::fs::makedev(1, 3),
    )
    .expect("mknod");
    set("null", 0o666, 0, 0);
    rustix::fs::mknodat(
        rustix::fs::CWD,
        m.join("fifo"),
        rustix::fs::FileType::Fifo,
        rustix::fs::Mode::from_raw_mode(0o644),
        0,
    )
    .expect("mkfifo");
    std::fs::write(m.join("owned"), b"someone's").expect("write");
    set("owned", 0o640, 1234, 5678);
    std::fs::write(m.join("cap"), b"capable").expect("write");
    rustix::fs::lsetxattr(
        m.join("cap"),
        "security.capability",
        &cap_value(),
        rustix::fs::XattrFlags::empty(),
    )
    .expect("set security.capability");
    std::fs::write(m.join("layer"), b"an overlay layer's file").expect("write");
    rustix::fs::lsetxattr(
        m.join("layer"),
        "trusted.overlay.opaque",
        b"y",
        rustix::fs::XattrFlags::empty(),
    )
    .expect("set trusted.overlay.opaque");
    std::fs::create_dir(m.join("shared")).expect("mkdir");
    set("shared", 0o2775, 1234, 1234);
    unmount_retrying(&mut fs);
    let image = fs.image().to_path_buf();
    let img = p(&image);
    let tmp = TempDir::new(test);

    // Defaults, as root.
    let dest = tmp.join("plain");
    let o = run(&["image", "extract", img, p(&dest), "-q"]);
    let err = String::from_utf8_lossy(&o.stderr).to_string();
    assert!(o.status.success(), "extract: {err}");
    let mode = |path: &Path| std::fs::symlink_metadata(path).expect("stat").mode() & 0o7777;
    assert_eq!(mode(&dest.join("suid")), 0o755, "setuid bit dropped");
    assert_eq!(mode(&dest.join("sgid")), 0o755, "setgid bit dropped");
    assert!(
        std::fs::symlink_metadata(dest.join("null")).is_err(),
        "no device node"
    );
    assert!(
        std::fs::symlink_metadata(dest.join("fifo"))
            .expect("fifo kept")
            .file_type()
            .is_fifo()
    );
    assert!(!has_cap(&dest.join("cap")), "no file capability");
    assert!(
        !has_xattr(&dest.join("layer"), "trusted.overlay.opaque"),
        "no trusted.* xattr"
    );
    assert_eq!(
        mode(&dest.join("shared")),
        0o2775,
        "a setgid directory stays"
    );
    let me = rustix::process::geteuid().as_raw();
    for name in ["suid", "sgid", "owned", "cap", "fifo", "shared"] {
        let md = std::fs::symlink_metadata(dest.join(name)).expect("stat");
        assert_eq!(md.uid(), me, "{name}: owned by the caller");
    }
    for (name, what) in [
        ("/suid", "setuid/setgid bits"),
        ("/sgid", "setuid/setgid bits"),
        ("/null", "device node"),
        ("/cap", "security.capability"),
        ("/layer", "trusted.*/security.* xattrs"),
    ] {
        assert!(
            err.lines()
                .any(|l| l.contains(&format!("{name}: {what} left out"))),
            "{name} reported: {err}"
        );
    }
    assert_eq!(err.lines().count(), 5, "one line per dropped item: {err}");

    // --same-owner --preserve-special: today's full restore.
    let dest = tmp.join("full");
    let o = run(&[
        "image",
        "extract",
        img,
        p(&dest),
        "-q",
        "--same-owner",
        "--preserve-special",
    ]);
    assert!(
        o.status.success(),
        "extract: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    assert_eq!(mode(&dest.join("suid")), 0o4755);
    assert_eq!(mode(&dest.join("sgid")), 0o2755);
    let null = std::fs::symlink_metadata(dest.join("null")).expect("device node");
    assert!(null.file_type().is_char_device());
    assert_eq!(null.rdev(), rustix::fs::makedev(1, 3));
    assert!(has_cap(&dest.join("cap")), "file capability restored");
    assert!(
        has_xattr(&dest.join("layer"), "trusted.overlay.opaque"),
        "trusted.* xattr restored"
    );
    let owned = std::fs::symlink_metadata(dest.join("owned")).expect("stat");
    assert_eq!((owned.uid(), owned.gid()), (1234, 5678));
}
