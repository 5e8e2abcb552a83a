//! Link files: `MOUNT/.fscrypt/protectors/<descriptor>.link` says that the
//! protector lives on another filesystem (login protectors live on the root
//! filesystem, and every other filesystem whose policies they protect holds
//! a link). The text is `TOKEN=value` lines: `UUID=<filesystem uuid>` (as
//! named in `/dev/disk/by-uuid`) and `PATH=<mount point>`; the UUID is
//! tried first, the path is the fallback; unknown tokens and malformed
//! lines are ignored, and at least one of the two must be present. This
//! matches google/fscrypt 0.3.x.

use std::path::{Path, PathBuf};

use crate::Error;

/// Largest link file read.
pub const MAX_LINK_LEN: u64 = 4096;
/// Where filesystem UUIDs are looked up.
pub const UUID_DIR: &str = "/dev/disk/by-uuid";

/// A parsed link file.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Link {
    /// `UUID=`.
    pub uuid: Option<String>,
    /// `PATH=`.
    pub path: Option<PathBuf>,
}

/// A filesystem's main mount: its mount point and device number.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MainMount {
    /// The mount point.
    pub path: PathBuf,
    /// Device major number.
    pub major: u32,
    /// Device minor number.
    pub minor: u32,
}

impl Link {
    /// Parses a link file's text.
    ///
    /// # Errors
    /// [`Error::Invalid`] when it names neither a UUID nor a path.
    pub fn parse(text: &str) -> Result<Link, Error> {
        let mut link = Link::default();
        for line in text.split('\n').map(str::trim).filter(|l| !l.is_empty()) {
            let mut parts = line.split('=');
            let (Some(token), Some(value), None) = (parts.next(), parts.next(), parts.next())
            else {
                continue;
            };
            match token {
                "UUID" => link.uuid = Some(value.to_string()),
                "PATH" => link.path = Some(PathBuf::from(value)),
                _ => {}
            }
        }
        if link.uuid.as_deref().is_none_or(str::is_empty)
            && link.path.as_ref().is_none_or(|p| p.as_os_str().is_empty())
        {
            return Err(Error::Invalid(
                "the link file names neither a filesystem UUID nor a mount point".into(),
            ));
        }
        Ok(link)
    }

    /// The link to `mount`: its UUID when `/dev/disk/by-uuid` knows the
    /// device, and its mount point.
    pub fn to_mount(mount: &MainMount) -> Link {
        Link {
            uuid: uuid_of_device(Path::new(UUID_DIR), mount.major, mount.minor),
            path: Some(mount.path.clone()),
        }
    }

    /// The file's text: `UUID=...\nPATH=...\n` (or `PATH=...\n` alone).
    pub fn to_text(&self) -> String {
        let mut s = String::new();
        if let Some(u) = &self.uuid {
            s.push_str(&format!("UUID={u}\n"));
        }
        if let Some(p) = &self.path {
            s.push_str(&format!("PATH={}\n", p.display()));
        }
        s
    }

    /// The mount the link points to, among `mounts`: by UUID first, then by
    /// mount point.
    ///
    /// # Errors
    /// [`Error::Invalid`] when neither finds a mounted filesystem.
    pub fn resolve(&self, mounts: &[MainMount]) -> Result<MainMount, Error> {
        if let Some(u) = &self.uuid
            && !u.is_empty()
            && !u.contains('/')
            && let Ok(st) = rustix::fs::stat(Path::new(UUID_DIR).join(u))
        {
            let (ma, mi) = (rustix::fs::major(st.st_rdev), rustix::fs::minor(st.st_rdev));
            if let Some(m) = mounts.iter().find(|m| m.major == ma && m.minor == mi) {
                return Ok(m.clone());
            }
        }
        if let Some(p) = &self.path
            && let Some(m) = mounts.iter().find(|m| &m.path == p)
        {
            return Ok(m.clone());
        }
        Err(Error::Invalid(format!(
            "the link file points to no mounted filesystem ({}); mount it, or remove the link",
            self.to_text().trim().replace('\n', ", ")
        )))
    }
}

/// The UUID under `dir` whose device is `major:minor`.
fn uuid_of_device(dir: &Path, major: u32, minor: u32) -> Option<String> {
    for e in std::fs::read_dir(dir).ok()?.flatten() {
        if !e.file_type().is_ok_and(|t| t.is_symlink()) {
            continue;
        }
        if let Ok(st) = rustix::fs::stat(e.path())
            && rustix::fs::major(st.st_rdev) == major
            && rustix::fs::minor(st.st_rdev) == minor
        {
            return e.file_name().to_str().map(str::to_string);
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parse_and_format() {
        let l = Link::parse("UUID=abcd-1234\nPATH=/\n").unwrap();
        assert_eq!(l.uuid.as_deref(), Some("abcd-1234"));
        assert_eq!(l.path.as_deref(), Some(Path::new("/")));
        assert_eq!(l.to_text(), "UUID=abcd-1234\nPATH=/\n");
        let l = Link::parse("  junk\nX=y\nPATH=/mnt/a=b\nPATH=/r\n").unwrap();
        assert_eq!(l.uuid, None);
        assert_eq!(l.path.as_deref(), Some(Path::new("/r")));
        assert!(Link::parse("").is_err());
        assert!(Link::parse("FOO=bar\n").is_err());
    }

    #[test]
    fn resolve_falls_back_to_path() {
        let mounts = vec![MainMount {
            path: "/r".into(),
            major: 7,
            minor: 3,
        }];
        let l = Link {
            uuid: Some("no-such-uuid".into()),
            path: Some("/r".into()),
        };
        assert_eq!(l.resolve(&mounts).unwrap().path, Path::new("/r"));
        let l = Link {
            uuid: None,
            path: Some("/other".into()),
        };
        assert!(l.resolve(&mounts).is_err());
    }
}
