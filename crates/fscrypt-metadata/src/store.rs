//! A filesystem's google/fscrypt metadata directory:
//! `MOUNT/.fscrypt/{policies,protectors}/<descriptor>`.
//!
//! `.fscrypt` itself may be a symlink (google/fscrypt allows it, for a
//! read-only root), but `policies/` and `protectors/` must be real
//! directories, not world-writable unless sticky. Setup modes: both
//! directories 0755 (single user, root writes) or 01777 (world-writable,
//! sticky); `.fscrypt` is 0755. Files are 0600 when created and keep their
//! mode when replaced; every write goes to a temporary file in the same
//! directory, is fsynced, renamed into place, and the directory fsynced.
//!
//! Every store has a [`Trust`]: the mount's root, `.fscrypt` and its two
//! subdirectories must be owned by root or the trusted user
//! ([`Error::UnsafeDirectory`]); listings skip files owned by anyone else
//! and reading one by name is refused ([`Error::Untrusted`]). Files are
//! opened without following symlinks, must be regular and at most
//! [`MAX_FILE_LEN`] bytes.

use std::fs::File;
use std::io::{Read, Write};
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};

use prost::Message;
use rustix::fs::OFlags;

use crate::Error;
use crate::proto::{self, DESCRIPTOR_LEN_V1, DESCRIPTOR_LEN_V2, PolicyData, ProtectorData};
use crate::trust::Trust;

/// Name of the metadata directory at a mount's root.
pub const BASE_DIR: &str = ".fscrypt";
/// Policies subdirectory.
pub const POLICY_DIR: &str = "policies";
/// Protectors subdirectory.
pub const PROTECTOR_DIR: &str = "protectors";
/// Prefix of temporary files and directories (skipped when listing).
pub const TEMP_PREFIX: &str = ".tmp";
/// Suffix of link files (protectors on another filesystem).
pub const LINK_SUFFIX: &str = ".link";
/// Mode of `.fscrypt`.
pub const BASE_MODE: u32 = 0o755;
/// Mode of a new metadata file.
pub const FILE_MODE: u32 = 0o600;
/// Largest metadata file read (google/fscrypt's files are a few hundred
/// bytes; a policy with many protectors stays far below this).
pub const MAX_FILE_LEN: u64 = 1 << 20;

/// Who may write the metadata directories.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SetupMode {
    /// 0755: only the owner (root) creates protectors and policies.
    SingleUserWritable,
    /// 01777: any user may, as in /tmp.
    WorldWritable,
}

impl SetupMode {
    /// The mode of `policies/` and `protectors/`.
    pub fn dir_mode(self) -> u32 {
        match self {
            SetupMode::SingleUserWritable => 0o755,
            SetupMode::WorldWritable => 0o1777,
        }
    }
}

/// Why a metadata directory (`policies/`, `protectors/`, or one beside
/// them) must not be used, from its `lstat`: a symlink, not a directory,
/// or world-writable without the sticky bit (anyone could swap its
/// files); `None` when it is fine.
pub fn unsafe_dir_reason(md: &std::fs::Metadata) -> Option<&'static str> {
    if md.file_type().is_symlink() {
        Some("it is a symlink")
    } else if !md.is_dir() {
        Some("it is not a directory")
    } else if md.mode() & 0o1002 == 0o002 {
        Some("it is world-writable without the sticky bit")
    } else {
        None
    }
}

/// Reads a regular file of at most `max` bytes without following a symlink.
///
/// # Errors
/// [`Error::Io`]; [`Error::Insecure`] for a symlink or non-regular file;
/// [`Error::Corrupt`] when larger than `max`.
pub fn read_limited(path: &Path, max: u64) -> Result<Vec<u8>, Error> {
    read_trusted(path, max, Trust::everyone())
}

/// [`read_limited`], refusing a file whose owner `trust` does not trust
/// (checked on the opened file, so a rename in between changes nothing).
///
/// # Errors
/// As [`read_limited`]; [`Error::Untrusted`].
pub fn read_trusted(path: &Path, max: u64, trust: Trust) -> Result<Vec<u8>, Error> {
    let f = open_nofollow(path, OFlags::RDONLY | OFlags::NONBLOCK, 0).map_err(|e| {
        if e.raw_os_error() == Some(rustix::io::Errno::LOOP.raw_os_error()) {
            Error::Insecure {
                path: path.to_path_buf(),
                reason: "it is a symlink".into(),
            }
        } else {
            Error::io(path, e)
        }
    })?;
    let md = f.metadata().map_err(|e| Error::io(path, e))?;
    if !md.is_file() {
        return Err(Error::Insecure {
            path: path.to_path_buf(),
            reason: "it is not a regular file".into(),
        });
    }
    trust.check_file(path, md.uid())?;
    if md.len() > max {
        return Err(Error::Corrupt {
            path: path.to_path_buf(),
            reason: format!("{} bytes, more than {max}", md.len()),
        });
    }
    let mut buf = Vec::with_capacity(md.len() as usize);
    f.take(max + 1)
        .read_to_end(&mut buf)
        .map_err(|e| Error::io(path, e))?;
    Ok(buf)
}

/// Opens `path` with `flags` (and `mode` for a new file) without following
/// a symlink in its final component: [`safe_open::open_path_nofollow`]
/// (`ELOOP` for a symlink, as `O_NOFOLLOW`).
pub(crate) fn open_nofollow(path: &Path, flags: OFlags, mode: u32) -> std::io::Result<File> {
    safe_open::open_path_nofollow(path, flags, rustix::fs::Mode::from_raw_mode(mode))
        .map(File::from)
        .map_err(std::io::Error::from)
}

fn temp_name() -> Result<String, Error> {
    let mut r = [0u8; 8];
    fscrypt_crypto::random_bytes(&mut r)?;
    Ok(format!("{TEMP_PREFIX}{}", hex::encode(r)))
}

fn sync_dir(dir: &Path) -> Result<(), Error> {
    File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(|e| Error::io(dir, e))
}

/// Writes `data` to `path` atomically: a new temporary file beside it
/// (O_EXCL, O_NOFOLLOW) with `mode`, fsync, rename over `path`, fsync of
/// the directory. On failure the temporary file is removed and `path` is
/// untouched.
///
/// # Errors
/// [`Error::Io`].
pub fn write_atomic(path: &Path, data: &[u8], mode: u32) -> Result<(), Error> {
    write_atomic_owned(path, data, mode, None)
}

/// [`write_atomic`], the new file owned by `owner` (uid, gid) when given
/// (root writing metadata on a user's behalf), set before it is renamed
/// into place.
///
/// # Errors
/// [`Error::Io`].
pub fn write_atomic_owned(
    path: &Path,
    data: &[u8],
    mode: u32,
    owner: Option<(u32, u32)>,
) -> Result<(), Error> {
    let dir = path
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    let tmp = dir.join(temp_name()?);
    let result = (|| {
        let mut f = open_nofollow(&tmp, OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL, mode)
            .map_err(|e| Error::io(&tmp, e))?;
        if let Some((uid, gid)) = owner {
            std::os::unix::fs::fchown(&f, Some(uid), Some(gid)).map_err(|e| Error::io(&tmp, e))?;
        }
        f.set_permissions(std::fs::Permissions::from_mode(mode))
            .map_err(|e| Error::io(&tmp, e))?;
        f.write_all(data).map_err(|e| Error::io(&tmp, e))?;
        f.sync_all().map_err(|e| Error::io(&tmp, e))?;
        std::fs::rename(&tmp, path).map_err(|e| Error::io(path, e))
    })();
    if result.is_err() {
        let _ = std::fs::remove_file(&tmp);
        return result;
    }
    sync_dir(dir)
}

/// The metadata of one mounted filesystem.
#[derive(Clone, Debug)]
pub struct Store {
    mount: PathBuf,
    /// Owner (uid, gid) of the files this store creates, when root
    /// writes on a user's behalf ([`Store::owned_by`]).
    owner: Option<(u32, u32)>,
    /// Whose directories and files are used.
    trust: Trust,
}

fn check_descriptor(d: &str, lens: &[usize]) -> Result<(), Error> {
    let hex = d
        .bytes()
        .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b));
    if hex && lens.contains(&d.len()) {
        Ok(())
    } else {
        Err(Error::Invalid(format!(
            "{d:?} is not a descriptor (16 or 32 lowercase hex digits)"
        )))
    }
}

impl Store {
    /// The metadata of the filesystem mounted at `mount`, read with
    /// `trust` (who may own its directories and the files used).
    pub fn new(mount: impl Into<PathBuf>, trust: Trust) -> Store {
        Store {
            mount: mount.into(),
            owner: None,
            trust,
        }
    }

    /// Whose directories and files this store uses.
    pub fn trust(&self) -> Trust {
        self.trust
    }

    /// This store, read with another trust (e.g. [`Trust::login_of`] for
    /// the search of a user's login protector).
    pub fn with_trust(mut self, trust: Trust) -> Store {
        self.trust = trust;
        self
    }

    /// This store, with new metadata files owned by `owner` (uid, gid):
    /// google/fscrypt's rule when root sets up a login protector's
    /// directory for a user, so the user can read (and later edit) its
    /// policy, links and protectors. Replaced files keep their owner.
    pub fn owned_by(mut self, owner: Option<(u32, u32)>) -> Store {
        self.owner = owner;
        self
    }

    /// The mount point.
    pub fn mount(&self) -> &Path {
        &self.mount
    }

    /// `MOUNT/.fscrypt`.
    pub fn base_dir(&self) -> PathBuf {
        self.mount.join(BASE_DIR)
    }

    /// `MOUNT/.fscrypt/policies`.
    pub fn policy_dir(&self) -> PathBuf {
        self.base_dir().join(POLICY_DIR)
    }

    /// `MOUNT/.fscrypt/protectors`.
    pub fn protector_dir(&self) -> PathBuf {
        self.base_dir().join(PROTECTOR_DIR)
    }

    /// Whether `.fscrypt` exists at all (in any form).
    pub fn exists(&self) -> bool {
        std::fs::symlink_metadata(self.base_dir()).is_ok()
    }

    /// Checks that the metadata directory is set up and safe to use: the
    /// mount's root, `.fscrypt` (which may be a symlink) and its two
    /// subdirectories owned by root or the trusted user (google/fscrypt's
    /// `CheckSetup`).
    ///
    /// # Errors
    /// [`Error::NotSetup`] when absent; [`Error::Insecure`] for a symlinked,
    /// non-directory or world-writable-without-sticky subdirectory;
    /// [`Error::UnsafeDirectory`] for one owned by another user.
    pub fn check_setup(&self) -> Result<(), Error> {
        let md = std::fs::metadata(self.base_dir()).map_err(|_| Error::NotSetup {
            mount: self.mount.clone(),
        })?;
        if !md.is_dir() {
            return Err(Error::Insecure {
                path: self.base_dir(),
                reason: "it is not a directory".into(),
            });
        }
        if let Ok(root) = std::fs::metadata(&self.mount) {
            self.trust.check_dir(&self.mount, root.uid())?;
        }
        self.trust.check_dir(&self.base_dir(), md.uid())?;
        for dir in [self.policy_dir(), self.protector_dir()] {
            let md = std::fs::symlink_metadata(&dir).map_err(|_| Error::NotSetup {
                mount: self.mount.clone(),
            })?;
            if let Some(reason) = unsafe_dir_reason(&md) {
                return Err(Error::Insecure {
                    path: dir,
                    reason: reason.into(),
                });
            }
            self.trust.check_dir(&dir, md.uid())?;
        }
        Ok(())
    }

    /// The setup mode, if both directories have one of the two standard modes.
    pub fn setup_mode(&self) -> Option<SetupMode> {
        let m1 = std::fs::metadata(self.policy_dir()).ok()?.mode() & 0o1777;
        let m2 = std::fs::metadata(self.protector_dir()).ok()?.mode() & 0o1777;
        match (m1, m2) {
            (0o755, 0o755) => Some(SetupMode::SingleUserWritable),
            (0o1777, 0o1777) => Some(SetupMode::WorldWritable),
            _ => None,
        }
    }

    /// Creates `.fscrypt/{policies,protectors}` with `mode`, atomically: built
    /// in a temporary directory at the mount's root, then renamed.
    ///
    /// # Errors
    /// [`Error::AlreadySetup`]; [`Error::Insecure`] when `.fscrypt` exists
    /// but is broken; [`Error::Io`].
    pub fn setup(&self, mode: SetupMode) -> Result<(), Error> {
        match self.check_setup() {
            Ok(()) => {
                return Err(Error::AlreadySetup {
                    mount: self.mount.clone(),
                });
            }
            Err(Error::NotSetup { .. }) if !self.exists() => {}
            Err(Error::NotSetup { .. }) => {
                return Err(Error::Insecure {
                    path: self.base_dir(),
                    reason: "it exists but is incomplete".into(),
                });
            }
            Err(e) => return Err(e),
        }
        let tmp = self.mount.join(temp_name()?);
        let result = (|| {
            let mk = |p: &Path, m: u32| -> Result<(), Error> {
                std::fs::create_dir(p).map_err(|e| Error::io(p, e))?;
                std::fs::set_permissions(p, std::fs::Permissions::from_mode(m))
                    .map_err(|e| Error::io(p, e))
            };
            mk(&tmp, BASE_MODE)?;
            mk(&tmp.join(POLICY_DIR), mode.dir_mode())?;
            mk(&tmp.join(PROTECTOR_DIR), mode.dir_mode())?;
            sync_dir(&tmp)?;
            std::fs::rename(&tmp, self.base_dir()).map_err(|e| Error::io(self.base_dir(), e))?;
            sync_dir(&self.mount)
        })();
        if result.is_err() {
            let _ = std::fs::remove_dir_all(&tmp);
        }
        result
    }

    fn protector_path(&self, d: &str) -> Result<PathBuf, Error> {
        check_descriptor(d, &[DESCRIPTOR_LEN_V1])?;
        Ok(self.protector_dir().join(d))
    }

    fn policy_path(&self, d: &str) -> Result<PathBuf, Error> {
        check_descriptor(d, &[DESCRIPTOR_LEN_V1, DESCRIPTOR_LEN_V2])?;
        Ok(self.policy_dir().join(d))
    }

    fn read_file(&self, kind: &'static str, path: &Path, d: &str) -> Result<Vec<u8>, Error> {
        self.check_setup()?;
        read_trusted(path, MAX_FILE_LEN, self.trust).map_err(|e| match e {
            Error::Io { source, .. } if source.kind() == std::io::ErrorKind::NotFound => {
                Error::NotFound {
                    kind,
                    descriptor: d.to_string(),
                    mount: self.mount.clone(),
                }
            }
            other => other,
        })
    }

    /// Reads and checks a protector (its Argon2id costs within the bounds
    /// of [`proto::HashingCosts::check`], so it is refused before any
    /// hashing otherwise).
    ///
    /// # Errors
    /// [`Error::NotFound`], [`Error::Corrupt`] (also when the descriptor in
    /// the file differs from its name), [`Error::Insecure`],
    /// [`Error::Untrusted`], [`Error::Io`].
    pub fn protector(&self, d: &str) -> Result<ProtectorData, Error> {
        let path = self.protector_path(d)?;
        let bytes = self.read_file("protector", &path, d)?;
        let corrupt = |reason: String| Error::Corrupt {
            path: path.clone(),
            reason,
        };
        let p = proto::decode_protector(&bytes).map_err(|e| corrupt(e.to_string()))?;
        if p.protector_descriptor != d {
            return Err(corrupt("its descriptor differs from its name".into()));
        }
        Ok(p)
    }

    /// Reads and checks a policy.
    ///
    /// # Errors
    /// As [`Store::protector`].
    pub fn policy(&self, d: &str) -> Result<PolicyData, Error> {
        let path = self.policy_path(d)?;
        let bytes = self.read_file("policy", &path, d)?;
        let corrupt = |reason: String| Error::Corrupt {
            path: path.clone(),
            reason,
        };
        let p = proto::decode_policy(&bytes).map_err(|e| corrupt(e.to_string()))?;
        if p.key_descriptor != d {
            return Err(corrupt("its descriptor differs from its name".into()));
        }
        Ok(p)
    }

    fn write(&self, path: &Path, data: &[u8]) -> Result<(), Error> {
        self.check_setup()?;
        // A replaced file keeps its mode and, when we may, its owner.
        let mut owner = self.owner;
        let mode = match std::fs::symlink_metadata(path) {
            Ok(md) if md.is_file() => {
                if rustix::process::geteuid().is_root() {
                    owner = Some((md.uid(), md.gid()));
                }
                md.mode() & 0o777
            }
            Ok(_) => {
                return Err(Error::Insecure {
                    path: path.to_path_buf(),
                    reason: "it is not a regular file".into(),
                });
            }
            Err(_) => FILE_MODE,
        };
        write_atomic_owned(path, data, mode, owner)
    }

    /// Writes a protector (checked first) atomically.
    ///
    /// # Errors
    /// [`Error::Invalid`], [`Error::Insecure`], [`Error::Io`].
    pub fn put_protector(&self, p: &ProtectorData) -> Result<(), Error> {
        p.check()?;
        let path = self.protector_path(&p.protector_descriptor)?;
        self.write(&path, &p.encode_to_vec())
    }

    /// Writes a policy (checked first) atomically.
    ///
    /// # Errors
    /// As [`Store::put_protector`].
    pub fn put_policy(&self, p: &PolicyData) -> Result<(), Error> {
        p.check()?;
        let path = self.policy_path(&p.key_descriptor)?;
        self.write(&path, &p.encode_to_vec())
    }

    /// Whether a directory entry is a regular file (not followed) whose
    /// owner is trusted: listings skip the others without opening them.
    fn usable(&self, entry: &std::fs::DirEntry) -> bool {
        entry
            .metadata()
            .is_ok_and(|m| m.is_file() && self.trust.trusts(m.uid()))
    }

    fn list(&self, dir: &Path, lens: &[usize]) -> Result<Vec<String>, Error> {
        self.check_setup()?;
        let mut out = Vec::new();
        for entry in std::fs::read_dir(dir).map_err(|e| Error::io(dir, e))? {
            let entry = entry.map_err(|e| Error::io(dir, e))?;
            let Some(name) = entry.file_name().to_str().map(str::to_string) else {
                continue;
            };
            if name.starts_with(TEMP_PREFIX) || check_descriptor(&name, lens).is_err() {
                continue;
            }
            if self.usable(&entry) {
                out.push(name);
            }
        }
        out.sort();
        Ok(out)
    }

    /// The link file of protector `d` kept on another filesystem
    /// (`protectors/<d>.link`), if there is one: its text.
    ///
    /// # Errors
    /// [`Error::Invalid`] for a bad descriptor; [`Error::Insecure`] for a
    /// symlinked link file; [`Error::Untrusted`] for one owned by another
    /// user; [`Error::Corrupt`] for one that is not UTF-8 or too large;
    /// [`Error::Io`].
    pub fn link(&self, d: &str) -> Result<Option<String>, Error> {
        let path = self.link_path(d)?;
        self.check_setup()?;
        match read_trusted(&path, crate::links::MAX_LINK_LEN, self.trust) {
            Ok(bytes) => String::from_utf8(bytes)
                .map(Some)
                .map_err(|_| Error::Corrupt {
                    path,
                    reason: "a link file must be text".into(),
                }),
            Err(Error::Io { source, .. }) if source.kind() == std::io::ErrorKind::NotFound => {
                Ok(None)
            }
            Err(e) => Err(e),
        }
    }

    /// `protectors/<d>.link`.
    ///
    /// # Errors
    /// [`Error::Invalid`] for a bad descriptor.
    pub fn link_path(&self, d: &str) -> Result<PathBuf, Error> {
        check_descriptor(d, &[DESCRIPTOR_LEN_V1])?;
        Ok(self.protector_dir().join(format!("{d}{LINK_SUFFIX}")))
    }

    /// Writes the link file of protector `d` (text from
    /// [`crate::links::Link::to_text`]) atomically.
    ///
    /// # Errors
    /// As [`Store::put_protector`].
    pub fn put_link(&self, d: &str, text: &str) -> Result<(), Error> {
        let path = self.link_path(d)?;
        self.write(&path, text.as_bytes())
    }

    /// Whether a regular protector file `d`, owned by a trusted user, is
    /// stored here.
    pub fn has_protector(&self, d: &str) -> bool {
        self.protector_path(d)
            .ok()
            .and_then(|p| std::fs::symlink_metadata(p).ok())
            .is_some_and(|m| m.is_file() && self.trust.trusts(m.uid()))
    }

    fn remove(&self, kind: &'static str, path: &Path, d: &str) -> Result<(), Error> {
        self.check_setup()?;
        match std::fs::remove_file(path) {
            Ok(()) => sync_dir(path.parent().unwrap_or(Path::new("."))),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Err(Error::NotFound {
                kind,
                descriptor: d.to_string(),
                mount: self.mount.clone(),
            }),
            Err(e) => Err(Error::io(path, e)),
        }
    }

    /// Removes protector `d`: its link file when there is one, else the
    /// protector file.
    ///
    /// # Errors
    /// [`Error::NotFound`], [`Error::Io`].
    pub fn remove_protector(&self, d: &str) -> Result<(), Error> {
        let link = self.link_path(d)?;
        if std::fs::symlink_metadata(&link).is_ok() {
            return self.remove("protector", &link, d);
        }
        let path = self.protector_path(d)?;
        self.remove("protector", &path, d)
    }

    /// Removes policy `d`.
    ///
    /// # Errors
    /// [`Error::NotFound`], [`Error::Io`].
    pub fn remove_policy(&self, d: &str) -> Result<(), Error> {
        let path = self.policy_path(d)?;
        self.remove("policy", &path, d)
    }

    /// The descriptors of the protectors linked from here (`<d>.link`).
    ///
    /// # Errors
    /// As [`Store::protectors`].
    pub fn linked_protectors(&self) -> Result<Vec<String>, Error> {
        self.check_setup()?;
        let dir = self.protector_dir();
        let mut out = Vec::new();
        for entry in std::fs::read_dir(&dir).map_err(|e| Error::io(&dir, e))? {
            let entry = entry.map_err(|e| Error::io(&dir, e))?;
            let Some(name) = entry.file_name().to_str().map(str::to_string) else {
                continue;
            };
            if let Some(d) = name.strip_suffix(LINK_SUFFIX)
                && check_descriptor(d, &[DESCRIPTOR_LEN_V1]).is_ok()
                && self.usable(&entry)
            {
                out.push(d.to_string());
            }
        }
        out.sort();
        Ok(out)
    }

    /// The descriptors of the protectors stored here (link files excluded),
    /// only regular files of trusted owners.
    ///
    /// # Errors
    /// [`Error::NotSetup`], [`Error::Insecure`], [`Error::Io`].
    pub fn protectors(&self) -> Result<Vec<String>, Error> {
        self.list(&self.protector_dir(), &[DESCRIPTOR_LEN_V1])
    }

    /// The descriptors of the policies stored here (as
    /// [`Store::protectors`]).
    ///
    /// # Errors
    /// As [`Store::protectors`].
    pub fn policies(&self) -> Result<Vec<String>, Error> {
        self.list(&self.policy_dir(), &[DESCRIPTOR_LEN_V1, DESCRIPTOR_LEN_V2])
    }
}
