//! Reading and writing the config file: the size- and type-checked read,
//! the [`ConfigLock`], and the atomic, never-overwriting replace.

use std::ffi::OsStr;
use std::fs::{File, OpenOptions};
use std::io::{Read, Write};
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::Path;

use super::{ConfigError, MAX_CONFIG_SIZE};

/// Reads a config file, refusing anything over [`MAX_CONFIG_SIZE`] and
/// anything but a regular file (opened with `O_NOFOLLOW | O_NONBLOCK`, so
/// a FIFO or a symbolic link in its place never blocks or redirects).
///
/// # Errors
/// [`ConfigError::Io`] (e.g. `NotFound`), [`ConfigError::TooLarge`],
/// [`ConfigError::NotRegular`].
pub fn read_limited(path: &Path) -> Result<Vec<u8>, ConfigError> {
    let file = open_regular(path)?;
    read_limited_from(&file)
}

/// Opens `path` read-only if it is a regular file.
fn open_regular(path: &Path) -> Result<File, ConfigError> {
    let file = match OpenOptions::new()
        .read(true)
        .custom_flags(libc_flags::NOFOLLOW | libc_flags::NONBLOCK)
        .open(path)
    {
        Ok(f) => f,
        // O_NOFOLLOW on a symbolic link.
        Err(e) if e.raw_os_error() == Some(rustix::io::Errno::LOOP.raw_os_error()) => {
            return Err(ConfigError::NotRegular("a symbolic link"));
        }
        Err(e) => return Err(e.into()),
    };
    let file_type = file.metadata()?.file_type();
    if !file_type.is_file() {
        use std::os::unix::fs::FileTypeExt;
        return Err(ConfigError::NotRegular(if file_type.is_fifo() {
            "a FIFO"
        } else if file_type.is_dir() {
            "a directory"
        } else if file_type.is_socket() {
            "a socket"
        } else {
            "a device"
        }));
    }
    Ok(file)
}

/// `O_NOFOLLOW` and `O_NONBLOCK` as `custom_flags` values.
mod libc_flags {
    pub const NOFOLLOW: i32 = rustix::fs::OFlags::NOFOLLOW.bits() as i32;
    pub const NONBLOCK: i32 = rustix::fs::OFlags::NONBLOCK.bits() as i32;
}

fn read_limited_from(mut file: &File) -> Result<Vec<u8>, ConfigError> {
    let mut bytes = Vec::new();
    (&mut file)
        .take(MAX_CONFIG_SIZE + 1)
        .read_to_end(&mut bytes)?;
    if bytes.len() as u64 > MAX_CONFIG_SIZE {
        return Err(ConfigError::TooLarge);
    }
    Ok(bytes)
}

/// An exclusive `flock` on a vault's config file, held while it is
/// replaced, so that two `passwd`/`protector` commands never interleave.
///
/// The lock is on the config file itself, not on the cipher directory:
/// a mount daemon holds a `flock` on the cipher directory for as long as
/// it serves the vault, and changing a protector of a mounted vault is
/// normal. Because the file is replaced by a rename, a waiter that gets
/// the lock checks that the path still names the inode it locked, and
/// starts over otherwise.
#[derive(Debug)]
pub struct ConfigLock {
    file: File,
}

impl ConfigLock {
    /// Waits for the lock on `dir/name` and returns it with the file's
    /// current contents.
    ///
    /// # Errors
    /// As [`read_limited`].
    pub fn acquire(dir: &Path, name: &OsStr) -> Result<(ConfigLock, Vec<u8>), ConfigError> {
        use std::os::unix::fs::MetadataExt;
        let path = dir.join(name);
        loop {
            let file = open_regular(&path)?;
            loop {
                match rustix::fs::flock(&file, rustix::fs::FlockOperation::LockExclusive) {
                    Ok(()) => break,
                    Err(rustix::io::Errno::INTR) => continue,
                    Err(e) => return Err(std::io::Error::from(e).into()),
                }
            }
            let held = file.metadata()?;
            match std::fs::symlink_metadata(&path) {
                Ok(now) if now.dev() == held.dev() && now.ino() == held.ino() => {
                    let bytes = read_limited_from(&file)?;
                    return Ok((ConfigLock { file }, bytes));
                }
                // Replaced while we waited: lock the new one.
                Ok(_) => continue,
                Err(e) => return Err(e.into()),
            }
        }
    }
}

impl Drop for ConfigLock {
    fn drop(&mut self) {
        let _ = rustix::fs::flock(&self.file, rustix::fs::FlockOperation::Unlock);
    }
}

/// The directory and file name of a config file's path, as the atomic
/// writes and the [`ConfigLock`] take them (a bare file name is in `.`).
///
/// # Errors
/// [`ConfigError::Io`] (`InvalidInput`) for a path without a file name
/// (`/`, `..`).
pub fn dir_and_name(path: &Path) -> Result<(&Path, &OsStr), ConfigError> {
    let name = path.file_name().ok_or_else(|| {
        std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            "the config path names no file",
        )
    })?;
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    Ok((dir, name))
}

/// `NAME.tmp-<hex of rnd>`: the temporary file next to the config `NAME`
/// (fsck recognises the pattern in a cipher directory).
fn tmp_name(name: &OsStr, rnd: &[u8]) -> std::ffi::OsString {
    let mut tmp = name.to_os_string();
    tmp.push(format!(".tmp-{}", hex::encode(rnd)));
    tmp
}

/// The steps of [`replace_atomic`], for the crash tests.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Step {
    /// The temporary file exists, empty.
    Created,
    /// Half of the new contents are written.
    HalfWritten,
    /// All of it is written and `fsync`ed.
    Synced,
    /// Renamed over the config.
    Renamed,
    /// The directory is `fsync`ed.
    DirSynced,
}

/// What a test hook makes [`replace_atomic_hooked`] do after a step.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(not(test), allow(dead_code))]
pub(crate) enum HookAction {
    /// Go on.
    Continue,
    /// Fail with an I/O error (normal error path: the temporary file is removed).
    Fail,
    /// Stop dead, as if the process were killed: nothing is cleaned up.
    Crash,
}

/// Replaces `dir/name` with `contents` atomically, mode 0600:
///
/// 1. create `dir/name.tmp-<random>` with `O_CREAT|O_EXCL`, mode 0600;
/// 2. write, `fsync`;
/// 3. `rename` it over `name`;
/// 4. `fsync` the directory.
///
/// A crash at any point leaves the old config or the new one, whole (at
/// worst with a stray temporary file, which nothing reads); on an error
/// the temporary file is removed. The caller holds the [`ConfigLock`].
///
/// # Errors
/// [`ConfigError::Io`].
pub fn replace_atomic(
    dir: &Path,
    name: &OsStr,
    contents: &[u8],
    _lock: &ConfigLock,
) -> Result<(), ConfigError> {
    replace_atomic_hooked(dir, name, contents, &mut |_| HookAction::Continue)
}

/// [`replace_atomic`] with a hook called after each [`Step`].
pub(crate) fn replace_atomic_hooked(
    dir: &Path,
    name: &OsStr,
    contents: &[u8],
    hook: &mut dyn FnMut(Step) -> HookAction,
) -> Result<(), ConfigError> {
    let final_path = dir.join(name);
    let mut rnd = [0u8; 8];
    fscrypt_crypto::random_bytes(&mut rnd).map_err(std::io::Error::other)?;
    let tmp_path = dir.join(tmp_name(name, &rnd));
    let mut crashed = false;
    let mut step = |s: Step, crashed: &mut bool| -> Result<(), ConfigError> {
        match hook(s) {
            HookAction::Continue => Ok(()),
            HookAction::Fail => {
                Err(std::io::Error::other(format!("injected failure after {s:?}")).into())
            }
            HookAction::Crash => {
                *crashed = true;
                Err(std::io::Error::other(format!("injected crash after {s:?}")).into())
            }
        }
    };
    let result = (|| {
        let mut file = OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&tmp_path)?;
        file.set_permissions(std::fs::Permissions::from_mode(0o600))?;
        step(Step::Created, &mut crashed)?;
        let half = contents.len() / 2;
        file.write_all(&contents[..half])?;
        step(Step::HalfWritten, &mut crashed)?;
        file.write_all(&contents[half..])?;
        file.sync_all()?;
        drop(file);
        step(Step::Synced, &mut crashed)?;
        std::fs::rename(&tmp_path, &final_path)?;
        step(Step::Renamed, &mut crashed)?;
        File::open(dir)?.sync_all()?;
        step(Step::DirSynced, &mut crashed)?;
        Ok(())
    })();
    if result.is_err() && !crashed {
        let _ = std::fs::remove_file(&tmp_path);
    }
    result
}

/// Writes `contents` as `dir/name`, atomically and never over an existing
/// file, mode 0600:
///
/// 1. create `dir/name.tmp-<random>` with `O_CREAT|O_EXCL`, mode 0600;
/// 2. write, `fsync`;
/// 3. `renameat2(RENAME_NOREPLACE)` onto `name` (on filesystems without it:
///    `link` then `unlink`, which also fails if `name` exists);
/// 4. `fsync` the directory.
///
/// A crash leaves either no config or the complete one; the temporary file
/// is removed on every error path.
///
/// # Errors
/// [`ConfigError::AlreadyExists`] if `dir/name` exists, [`ConfigError::Io`].
pub fn write_new_atomic(dir: &Path, name: &OsStr, contents: &[u8]) -> Result<(), ConfigError> {
    let final_path = dir.join(name);
    if final_path.symlink_metadata().is_ok() {
        return Err(ConfigError::AlreadyExists);
    }
    let mut rnd = [0u8; 8];
    fscrypt_crypto::random_bytes(&mut rnd).map_err(std::io::Error::other)?;
    let tmp_path = dir.join(tmp_name(name, &rnd));
    let result = (|| {
        let mut file = OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&tmp_path)?;
        // The umask can only clear bits; make sure the owner can read it.
        file.set_permissions(std::fs::Permissions::from_mode(0o600))?;
        file.write_all(contents)?;
        file.sync_all()?;
        drop(file);
        match rustix::fs::renameat_with(
            rustix::fs::CWD,
            &tmp_path,
            rustix::fs::CWD,
            &final_path,
            rustix::fs::RenameFlags::NOREPLACE,
        ) {
            Ok(()) => {}
            Err(rustix::io::Errno::EXIST) => return Err(ConfigError::AlreadyExists),
            Err(rustix::io::Errno::INVAL | rustix::io::Errno::NOSYS) => {
                // No RENAME_NOREPLACE here: link(2) fails with EEXIST too.
                match std::fs::hard_link(&tmp_path, &final_path) {
                    Ok(()) => {}
                    Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
                        return Err(ConfigError::AlreadyExists);
                    }
                    Err(e) => return Err(e.into()),
                }
                std::fs::remove_file(&tmp_path)?;
            }
            Err(e) => return Err(std::io::Error::from(e).into()),
        }
        File::open(dir)?.sync_all()?;
        Ok(())
    })();
    if result.is_err() {
        let _ = std::fs::remove_file(&tmp_path);
    }
    result
}
