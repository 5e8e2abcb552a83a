//! Which mounted filesystem (and block device) holds a path, from
//! `/proc/self/mountinfo` (proc(5)).

use std::path::{Path, PathBuf};

use rustix::fs::{major, minor};

/// One mounted filesystem.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MountInfo {
    /// Where it is mounted (escapes decoded).
    pub mount_point: PathBuf,
    /// Filesystem type, e.g. `"ext4"`.
    pub fs_type: String,
    /// Mount source, e.g. `"/dev/loop3"`.
    pub source: String,
    /// Device major number (`st_dev`).
    pub major: u32,
    /// Device minor number (`st_dev`).
    pub minor: u32,
    /// Root of the mount within the filesystem (`/` unless a bind mount).
    pub root: PathBuf,
    /// Per-mount options, e.g. `"rw,relatime"`.
    pub mount_options: String,
    /// Superblock options, e.g. `"rw,inlinecrypt"`.
    pub super_options: String,
}

impl MountInfo {
    /// The block device node: `source` if it is a device node of the right
    /// numbers, else `/dev/block/MAJ:MIN`.
    pub fn device_path(&self) -> PathBuf {
        let src = Path::new(&self.source);
        if let Ok(st) = rustix::fs::stat(src)
            && rustix::fs::FileType::from_raw_mode(st.st_mode) == rustix::fs::FileType::BlockDevice
            && major(st.st_rdev) == self.major
            && minor(st.st_rdev) == self.minor
        {
            return src.to_path_buf();
        }
        PathBuf::from(format!("/dev/block/{}:{}", self.major, self.minor))
    }

    /// Whether `-o inlinecrypt` is in effect.
    pub fn inlinecrypt(&self) -> bool {
        self.super_options.split(',').any(|o| o == "inlinecrypt")
            || self.mount_options.split(',').any(|o| o == "inlinecrypt")
    }
}

/// Errors of [`find_mount`].
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum MountInfoError {
    /// The path could not be examined.
    #[error("{path}: {source}")]
    Stat {
        /// The path.
        path: PathBuf,
        /// The OS error.
        source: std::io::Error,
    },
    /// /proc/self/mountinfo could not be read.
    #[error("cannot read /proc/self/mountinfo (is /proc mounted?): {0}")]
    Read(std::io::Error),
    /// No mount matched.
    #[error("{0}: no mounted filesystem found for this path in /proc/self/mountinfo")]
    NotFound(PathBuf),
}

/// Decodes the octal escapes (`\040` for space, `\011`, `\012`, `\134`) of
/// a mountinfo field into its raw bytes.
fn unescape_bytes(s: &str) -> Vec<u8> {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'\\'
            && i + 3 < b.len()
            && b[i + 1..i + 4].iter().all(|c| (b'0'..=b'7').contains(c))
        {
            let v = (b[i + 1] - b'0') as u32 * 64
                + (b[i + 2] - b'0') as u32 * 8
                + (b[i + 3] - b'0') as u32;
            out.push(v as u8);
            i += 4;
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    out
}

/// A mountinfo path field as a path (any bytes, not only UTF-8).
fn unescape_path(s: &str) -> PathBuf {
    use std::os::unix::ffi::OsStringExt;
    PathBuf::from(std::ffi::OsString::from_vec(unescape_bytes(s)))
}

/// A mountinfo text field (the source), lossily as UTF-8.
fn unescape(s: &str) -> String {
    String::from_utf8_lossy(&unescape_bytes(s)).into_owned()
}

/// Reads and parses `/proc/self/mountinfo`.
///
/// # Errors
/// [`MountInfoError::Read`] when it cannot be read.
pub fn read_mountinfo() -> Result<Vec<MountInfo>, MountInfoError> {
    std::fs::read_to_string("/proc/self/mountinfo")
        .map(|t| parse_mountinfo(&t))
        .map_err(MountInfoError::Read)
}

/// How many mounts are stacked exactly at `path` (compared byte for byte
/// with the mount points, so `path` should be absolute and canonical).
///
/// # Errors
/// [`MountInfoError::Read`] when `/proc/self/mountinfo` cannot be read.
pub fn mounts_at(path: &Path) -> Result<usize, MountInfoError> {
    Ok(read_mountinfo()?
        .iter()
        .filter(|m| m.mount_point == path)
        .count())
}

/// Parse the text of a mountinfo file. Malformed lines are skipped.
pub fn parse_mountinfo(text: &str) -> Vec<MountInfo> {
    let mut out = Vec::new();
    for line in text.lines() {
        let fields: Vec<&str> = line.split(' ').collect();
        let Some(sep) = fields.iter().position(|f| *f == "-") else {
            continue;
        };
        if sep < 6 || fields.len() < sep + 4 {
            continue;
        }
        let Some((maj, min)) = fields[2].split_once(':') else {
            continue;
        };
        let (Ok(major), Ok(minor)) = (maj.parse(), min.parse()) else {
            continue;
        };
        out.push(MountInfo {
            root: unescape_path(fields[3]),
            mount_point: unescape_path(fields[4]),
            mount_options: fields[5].to_string(),
            fs_type: fields[sep + 1].to_string(),
            source: unescape(fields[sep + 2]),
            super_options: fields[sep + 3].to_string(),
            major,
            minor,
        });
    }
    out
}

/// The mount holding `path`: same device numbers as `stat(path)`, longest
/// mount point that is a prefix of the canonical path (the last one listed
/// wins ties, as it is the one on top).
///
/// # Errors
/// [`MountInfoError`] if the path cannot be examined, /proc is unreadable or
/// nothing matches.
pub fn find_mount(path: &Path) -> Result<MountInfo, MountInfoError> {
    find_mount_in(&read_mountinfo()?, path)
}

/// [`find_mount`] in a mount table already read (`table`, from
/// [`read_mountinfo`]), so a caller that needs several answers reads
/// `/proc/self/mountinfo` once.
///
/// # Errors
/// [`MountInfoError`] if the path cannot be examined or nothing matches.
pub fn find_mount_in(table: &[MountInfo], path: &Path) -> Result<MountInfo, MountInfoError> {
    let canon = std::fs::canonicalize(path).map_err(|source| MountInfoError::Stat {
        path: path.to_path_buf(),
        source,
    })?;
    let st = rustix::fs::stat(&canon).map_err(|e| MountInfoError::Stat {
        path: path.to_path_buf(),
        source: e.into(),
    })?;
    let (maj, min) = (major(st.st_dev), minor(st.st_dev));
    let mut best: Option<&MountInfo> = None;
    for m in table {
        if m.major != maj || m.minor != min || !canon.starts_with(&m.mount_point) {
            continue;
        }
        let better = match &best {
            None => true,
            Some(b) => m.mount_point.as_os_str().len() >= b.mount_point.as_os_str().len(),
        };
        if better {
            best = Some(m);
        }
    }
    best.cloned()
        .ok_or(MountInfoError::NotFound(path.to_path_buf()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_lines() {
        let text = "36 35 98:0 /mnt1 /mnt/a\\040b rw,noatime master:1 - ext4 /dev/loop3 rw,inlinecrypt\n\
                    garbage\n\
                    25 1 0:22 / /proc rw - proc proc rw\n";
        let v = parse_mountinfo(text);
        assert_eq!(v.len(), 2);
        assert_eq!(v[0].mount_point, Path::new("/mnt/a b"));
        assert_eq!(v[0].fs_type, "ext4");
        assert_eq!(v[0].source, "/dev/loop3");
        assert_eq!((v[0].major, v[0].minor), (98, 0));
        assert!(v[0].inlinecrypt());
        assert!(!v[1].inlinecrypt());
    }

    #[test]
    fn escapes_decode_to_raw_bytes() {
        use std::os::unix::ffi::OsStrExt;
        assert_eq!(unescape_bytes("/mnt/a\\040b"), b"/mnt/a b");
        assert_eq!(unescape_bytes("/x\\134y"), b"/x\\y");
        assert_eq!(unescape_bytes("/plain"), b"/plain");
        assert_eq!(unescape_bytes("/trail\\04"), b"/trail\\04");
        let v = parse_mountinfo("1 1 0:1 / /m\\377\\012x rw - fuse.fscrypt-rs v rw\n");
        assert_eq!(v[0].mount_point.as_os_str().as_bytes(), b"/m\xff\nx");
    }

    #[test]
    fn finds_root() {
        let m = find_mount(Path::new("/")).expect("root is mounted");
        assert_eq!(m.mount_point, Path::new("/"));
    }
}
