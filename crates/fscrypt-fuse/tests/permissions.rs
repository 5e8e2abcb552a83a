//! The permission model of a mount as the README's fstab line makes it
//! (root daemon, `allow_other`, no `suid`/`dev` asked for): another user
//! (uid 65534, through `setpriv`) can do nothing to root's files that the
//! mode bits forbid, a setuid-root program on the mount does not run as
//! root, and device nodes on it do not open.

use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::Path;
use std::process::Output;

use test_support::fuse::{mount_config, mount_live, policy};
use test_support::{TempDir, fuse_available};

/// Runs `sh -c script` as uid/gid 65534 with no supplementary groups; `$1`
/// is `arg`.
fn as_nobody(script: &str, arg: &Path) -> Output {
    test_support::users::nobody_sh(script)
        .arg(arg)
        .output()
        .expect("run setpriv")
}

/// Records a failure unless the attack was refused by the kernel (EACCES
/// or EPERM on stderr).
fn refused(failures: &mut Vec<String>, what: &str, out: &Output) {
    let err = String::from_utf8_lossy(&out.stderr);
    if out.status.success() {
        failures.push(format!(
            "{what}: uid 65534 succeeded (stdout {:?})",
            String::from_utf8_lossy(&out.stdout)
        ));
    } else if !(err.contains("Permission denied") || err.contains("Operation not permitted")) {
        failures.push(format!("{what}: failed for another reason: {err}"));
    } else {
        eprintln!("{what}: refused: {}", err.trim());
    }
}

/// Records `msg` as a failure unless `ok`.
fn check(failures: &mut Vec<String>, ok: bool, msg: String) {
    if !ok {
        failures.push(msg);
    }
}

#[test]
fn other_users_cannot_get_past_the_mode_bits() {
    if !fuse_available("other_users_cannot_get_past_the_mode_bits") {
        return;
    }
    if !test_support::skip::setpriv_available("other_users_cannot_get_past_the_mode_bits") {
        return;
    }
    let backing = TempDir::new("perm-backing");
    let mnt = TempDir::new("perm-mnt");
    // Every parent of the mount point must be traversable by uid 65534.
    std::fs::set_permissions(mnt.path(), PermissionsExt::from_mode(0o755)).unwrap();
    let policy = policy();
    fscrypt_fuse::create_root(backing.path(), &policy).expect("create_root");
    // The README's fstab line: allow_other, nothing else.
    let mut config = mount_config(backing.path(), policy, true);
    config.suid = false;
    config.dev = false;
    let mount = mount_live(config, mnt.path());
    let m = mnt.path();
    let mut f = Vec::new();
    std::fs::set_permissions(m, PermissionsExt::from_mode(0o755)).unwrap();

    // Root's private file.
    let secret = m.join("secret");
    std::fs::write(&secret, b"root only\n").unwrap();
    std::fs::set_permissions(&secret, PermissionsExt::from_mode(0o600)).unwrap();
    refused(&mut f, "read", &as_nobody("cat \"$1\"", &secret));
    refused(&mut f, "append", &as_nobody("echo evil >> \"$1\"", &secret));
    refused(&mut f, "chmod", &as_nobody("chmod 666 \"$1\"", &secret));
    refused(
        &mut f,
        "chown",
        &as_nobody("chown 65534:65534 \"$1\"", &secret),
    );
    if Path::new("/usr/bin/python3").exists() {
        refused(
            &mut f,
            "setxattr",
            &as_nobody(
                "/usr/bin/python3 -c 'import os,sys; os.setxattr(sys.argv[1], \"user.evil\", b\"1\")' \"$1\"",
                &secret,
            ),
        );
        check(
            &mut f,
            xattr_absent(&secret, "user.evil"),
            "xattr set".into(),
        );
    } else {
        eprintln!("setxattr attack not run: /usr/bin/python3 is missing");
    }
    let meta = std::fs::metadata(&secret).unwrap();
    let data = std::fs::read(&secret).unwrap();
    check(
        &mut f,
        data == b"root only\n",
        format!("contents now {data:?}"),
    );
    let mode = meta.mode() & 0o7777;
    check(&mut f, mode == 0o600, format!("mode now {mode:o}"));
    let owner = (meta.uid(), meta.gid());
    check(&mut f, owner == (0, 0), format!("owner now {owner:?}"));

    // A sticky, world-writable directory: others may not delete root's file.
    let tmp = m.join("tmp");
    std::fs::create_dir(&tmp).unwrap();
    std::fs::set_permissions(&tmp, PermissionsExt::from_mode(0o1777)).unwrap();
    let roots = tmp.join("roots");
    std::fs::write(&roots, b"x").unwrap();
    std::fs::set_permissions(&roots, PermissionsExt::from_mode(0o666)).unwrap();
    refused(
        &mut f,
        "unlink in a sticky dir",
        &as_nobody("rm -f \"$1\"", &roots),
    );
    refused(
        &mut f,
        "rename in a sticky dir",
        &as_nobody("mv -f \"$1\" \"$1.moved\"", &roots),
    );
    check(
        &mut f,
        roots.exists(),
        "root's file was deleted from the sticky dir".into(),
    );
    // ... but their own files there are theirs (the checks are not "deny all").
    let out = as_nobody("echo mine > \"$1/mine\" && rm \"$1/mine\"", &tmp);
    assert!(out.status.success(), "{out:?}");

    // A setuid-root copy of id(1) runs as the caller (nosuid).
    let id = m.join("id");
    std::fs::copy("/usr/bin/id", &id).unwrap();
    std::fs::set_permissions(&id, PermissionsExt::from_mode(0o4755)).unwrap();
    assert_eq!(std::fs::metadata(&id).unwrap().mode() & 0o7777, 0o4755);
    let out = as_nobody("\"$1\"", &id);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{out:?}");
    eprintln!("setuid-root id run by 65534: {}", text.trim());
    check(&mut f, text.contains("uid=65534"), format!("id: {text}"));
    check(
        &mut f,
        !text.contains("euid=0"),
        format!("setuid root honoured: {text}"),
    );

    // A device node does not open (nodev), not even for root.
    let null = m.join("null");
    rustix::fs::mknodat(
        rustix::fs::CWD,
        &null,
        rustix::fs::FileType::CharacterDevice,
        rustix::fs::Mode::from_raw_mode(0o666),
        rustix::fs::makedev(1, 3),
    )
    .expect("mknod");
    let opened = std::fs::File::open(&null).map(drop);
    check(
        &mut f,
        matches!(&opened, Err(e) if e.raw_os_error() == Some(libc::EACCES)),
        format!("a device node opened on a nodev mount: {opened:?}"),
    );

    mount.unmount().expect("unmount");
    assert!(
        f.is_empty(),
        "{} attacks got through:\n{}",
        f.len(),
        f.join("\n")
    );
}

/// True when `path` has no extended attribute `name`.
fn xattr_absent(path: &Path, name: &str) -> bool {
    let mut buf = [0u8; 16];
    rustix::fs::getxattr(path, name, &mut buf).is_err()
}
