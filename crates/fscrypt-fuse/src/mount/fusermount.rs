//! Mounting without root: the setuid `fusermount3` helper, as libfuse and
//! fuser do it.
//!
//! The protocol (libfuse `util/fusermount.c`): we make a Unix socket pair,
//! start `fusermount3 -o OPTIONS -- MOUNTPOINT` with the number of one end
//! in the environment variable `_FUSE_COMMFD`; fusermount3 (setuid root)
//! checks that the caller may mount there, opens `/dev/fuse` itself, mounts
//! it and sends the open device back over the socket (`SCM_RIGHTS`), then
//! exits. The daemon serves that device with this process's own rights, so
//! `/dev/fuse` need not be accessible to the user (it is 0600 on some
//! systems). Unmounting is `fusermount3 -u` ([`crate::unmount`]).
//!
//! fuser 0.18 has the same code but only falls back to it when mount(2)
//! says EPERM; when `/dev/fuse` itself cannot be opened (EACCES) it gives
//! up, which is the "Permission denied" an ordinary user saw.

use std::io::IoSliceMut;
use std::mem::MaybeUninit;
use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use rustix::net::{
    AddressFamily, RecvAncillaryBuffer, RecvAncillaryMessage, RecvFlags, SocketFlags, SocketType,
};

use crate::error::{Error, Result};

/// The helper's names, newest first (fuse 3, then fuse 2: same protocol).
const NAMES: &[&str] = &["fusermount3", "fusermount"];

/// Where fuse.conf lives (it says whether users may ask for `allow_other`).
const FUSE_CONF: &str = "/etc/fuse.conf";

/// Finds `fusermount3` (or `fusermount`) in `PATH` and checks that it is
/// setuid root, the only way it can mount for an ordinary user.
///
/// # Errors
/// [`Error::Mount`] naming what is missing.
pub(crate) fn find() -> Result<PathBuf> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    let found = NAMES.iter().find_map(|name| {
        std::env::split_paths(&path)
            .map(|dir| dir.join(name))
            .find(|p| p.is_file())
    });
    let Some(bin) = found else {
        return Err(Error::Mount(
            "mounting without root needs fusermount3, which is not in PATH \
             (install the fuse3 package, or mount as root)"
                .into(),
        ));
    };
    let meta =
        std::fs::metadata(&bin).map_err(|e| Error::Mount(format!("{}: {e}", bin.display())))?;
    if meta.uid() != 0 || meta.mode() & 0o4000 == 0 {
        return Err(Error::Mount(format!(
            "{} is not setuid root, so it cannot mount for an ordinary user \
             (as root: chown root {0} && chmod u+s {0})",
            bin.display()
        )));
    }
    Ok(bin)
}

/// Checks that this user may open `device` (fusermount3 opens `/dev/fuse`
/// with the caller's rights, not root's).
///
/// # Errors
/// [`Error::Mount`] naming the device, its mode and the fix.
pub(crate) fn check_device(device: &Path) -> Result<()> {
    let meta = match std::fs::metadata(device) {
        Ok(m) => m,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Err(Error::Mount(format!(
                "{} is missing (load the fuse module: modprobe fuse; install fuse3)",
                device.display()
            )));
        }
        Err(e) => return Err(Error::Mount(format!("{}: {e}", device.display()))),
    };
    let access = rustix::fs::Access::READ_OK | rustix::fs::Access::WRITE_OK;
    if rustix::fs::access(device, access).is_err() {
        return Err(Error::Mount(format!(
            "{} (mode {:04o}, owner uid {}) is not readable and writable by uid {}, so only root \
             can mount FUSE here (as root: chmod 0666 {0}, as Debian's udev rule sets it; \
             scripts/setup.sh does that)",
            device.display(),
            meta.mode() & 0o7777,
            meta.uid(),
            rustix::process::getuid().as_raw(),
        )));
    }
    Ok(())
}

/// True when /etc/fuse.conf has a `user_allow_other` line.
fn user_allow_other() -> bool {
    std::fs::read_to_string(FUSE_CONF).is_ok_and(|text| {
        text.lines()
            .map(str::trim)
            .any(|line| line == "user_allow_other")
    })
}

/// Escapes a value for fusermount3's `-o` list (libfuse's
/// `fuse_opt_add_opt_escaped`: a backslash before `,` and `\`).
fn escape(value: &str) -> String {
    let mut out = String::with_capacity(value.len());
    for c in value.chars() {
        if c == ',' || c == '\\' {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

/// The `-o` list for fusermount3 from fuser's mount options.
fn option_string(fc: &fuser::Config) -> String {
    let mut words = Vec::new();
    for option in &fc.mount_options {
        match option {
            fuser::MountOption::FSName(name) => words.push(format!("fsname={}", escape(name))),
            fuser::MountOption::Subtype(sub) => words.push(format!("subtype={}", escape(sub))),
            fuser::MountOption::RO => words.push("ro".into()),
            fuser::MountOption::DefaultPermissions => words.push("default_permissions".into()),
            fuser::MountOption::NoDev => words.push("nodev".into()),
            fuser::MountOption::NoSuid => words.push("nosuid".into()),
            fuser::MountOption::NoExec => words.push("noexec".into()),
            // suid/dev are refused for non-root callers before we get here.
            _ => {}
        }
    }
    if fc.acl == fuser::SessionACL::All {
        words.push("allow_other".into());
    }
    words.join(",")
}

/// Mounts `/dev/fuse` at `mountpoint` through fusermount3 and returns the
/// open device.
///
/// # Errors
/// [`Error::Mount`] with fusermount3's own reason (or ours: helper missing
/// or not setuid, `allow_other` without `user_allow_other`).
pub(crate) fn mount(mountpoint: &Path, fc: &fuser::Config) -> Result<OwnedFd> {
    if fc.acl == fuser::SessionACL::All && !user_allow_other() {
        return Err(Error::Mount(format!(
            "allow_other without root needs a line `user_allow_other` in {FUSE_CONF} \
             (as root: echo user_allow_other >> {FUSE_CONF}), or mount without allow_other"
        )));
    }
    check_device(Path::new("/dev/fuse"))?;
    let bin = find()?;
    let io = |what: &str, e: std::io::Error| Error::Mount(format!("{what}: {e}"));
    // Our end is close-on-exec; the helper's end must survive its exec.
    let (ours, theirs) = rustix::net::socketpair(
        AddressFamily::UNIX,
        SocketType::STREAM,
        SocketFlags::CLOEXEC,
        None,
    )
    .map_err(|e| io("socketpair for fusermount3", e.into()))?;
    // A copy of `theirs` without close-on-exec (dup never copies the flag).
    // Another thread starting a program right now may inherit it too; that
    // is harmless, since we wait for the helper's exit, not for the end of
    // the socket.
    let theirs_inherited = rustix::io::dup(&theirs).map_err(|e| io("dup", e.into()))?;
    drop(theirs);
    let output = Command::new(&bin)
        .arg("-o")
        .arg(option_string(fc))
        .arg("--")
        .arg(mountpoint)
        .env("_FUSE_COMMFD", theirs_inherited.as_raw_fd().to_string())
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .output()
        .map_err(|e| io(&format!("running {}", bin.display()), e))?;
    drop(theirs_inherited);
    // fusermount3 sent the device (if it mounted) before exiting; the
    // message waits in the socket.
    let mut byte = [0u8; 1];
    let mut space = [MaybeUninit::uninit(); rustix::cmsg_space!(ScmRights(1))];
    let mut control = RecvAncillaryBuffer::new(&mut space);
    let received = loop {
        match rustix::net::recvmsg(
            &ours,
            &mut [IoSliceMut::new(&mut byte)],
            &mut control,
            RecvFlags::DONTWAIT | RecvFlags::CMSG_CLOEXEC,
        ) {
            Err(rustix::io::Errno::INTR) => {}
            other => break other,
        }
    };
    let mut device = None;
    if received.is_ok() {
        for message in control.drain() {
            if let RecvAncillaryMessage::ScmRights(fds) = message {
                for fd in fds {
                    device.get_or_insert(fd);
                }
            }
        }
    }
    if let Some(device) = device {
        return Ok(device);
    }
    let stderr = String::from_utf8_lossy(&output.stderr);
    let reason = stderr.trim();
    if reason.contains("user_allow_other") {
        return Err(Error::Mount(format!(
            "allow_other without root needs a line `user_allow_other` in {FUSE_CONF} \
             (fusermount3: {reason})"
        )));
    }
    Err(Error::Mount(if reason.is_empty() {
        format!(
            "{} did not mount {} ({})",
            bin.display(),
            mountpoint.display(),
            output.status
        )
    } else {
        // fusermount3 prefixes its own name already.
        reason.lines().next().unwrap_or(reason).to_owned()
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn options_are_escaped() {
        assert_eq!(escape(r"/a,b\c"), r"/a\,b\\c");
        let mut fc = fuser::Config::default();
        fc.mount_options = vec![
            fuser::MountOption::FSName("/v,1".into()),
            fuser::MountOption::Subtype("fscrypt-rs".into()),
            fuser::MountOption::RO,
            fuser::MountOption::DefaultPermissions,
            fuser::MountOption::NoDev,
            fuser::MountOption::NoSuid,
            fuser::MountOption::NoExec,
        ];
        fc.acl = fuser::SessionACL::All;
        assert_eq!(
            option_string(&fc),
            r"fsname=/v\,1,subtype=fscrypt-rs,ro,default_permissions,nodev,nosuid,noexec,allow_other"
        );
    }
}
