//! Checks before a conversion writes anything ([`preflight`]): the tree
//! is on one filesystem with no mount point, no file in it is open, it
//! fits, no file has a hard link outside it, and a caller other than root
//! could recreate every object with its owner.

use std::collections::{HashMap, HashSet};
use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};

use rustix::fs::{AtFlags, FileType, Stat};

use super::{ConvertError, Result, io, names, open_dir, open_dir_at, split};

/// What was found in the tree by [`preflight`].
#[derive(Debug, Clone, Default)]
pub struct Scan {
    /// Objects (files, directories, links, ...) below and including `DIR`.
    pub objects: u64,
    /// Bytes of regular-file contents (apparent sizes, each inode once).
    pub bytes: u64,
    /// Bytes allocated (each inode once).
    pub allocated: u64,
    /// Device of `DIR`.
    pub dev: u64,
    /// Inode numbers below and including `DIR`.
    pub inodes: HashSet<u64>,
}

/// Walks the tree and checks that it can be converted: no mount point at
/// or below `dir`, no open file below it, enough free space and inodes,
/// no hard link to outside the tree, and (when the caller is not root)
/// only the caller's objects, in the caller's groups, and no device node.
///
/// # Errors
/// [`ConvertError::MountPoint`], [`ConvertError::OpenFiles`],
/// [`ConvertError::NoSpace`], [`ConvertError::NoInodes`],
/// [`ConvertError::OutsideLink`], [`ConvertError::NotOwner`], I/O errors.
pub fn preflight(dir: &Path) -> Result<Scan> {
    preflight_with(dir, true)
}

/// [`preflight`]; `space: false` skips the free-space check (the copy
/// already exists).
pub(crate) fn preflight_with(dir: &Path, space: bool) -> Result<Scan> {
    let (parent, _, canon) = split(dir)?;
    let st = rustix::fs::lstat(&canon).map_err(|e| io("stat", &canon, e))?;
    let pst = rustix::fs::stat(&parent).map_err(|e| io("stat", &parent, e))?;
    let mounted = fscrypt_linux::mountinfo::mounts_at(&canon).map_err(|e| {
        io(
            "read mounts for",
            &canon,
            std::io::Error::other(e.to_string()),
        )
    })?;
    if st.st_dev != pst.st_dev || mounted > 0 {
        return Err(ConvertError::MountPoint(canon));
    }
    let mut scan = Scan {
        dev: st.st_dev,
        ..Scan::default()
    };
    let fd = open_dir(&canon)?;
    scan.objects = 1;
    scan.allocated = st.st_blocks as u64 * 512;
    scan.inodes.insert(st.st_ino);
    let mut who = Who::caller()?;
    who.check(&st, &canon)?;
    scan_into(&fd, &canon, &mut scan, &mut who)?;
    who.outside_links()?;
    refuse_open_files(&canon, &scan)?;
    if space {
        check_space(&fd, &canon, &scan)?;
    }
    Ok(scan)
}

/// [`ConvertError::OpenFiles`] when [`open_files`] finds any.
pub(crate) fn refuse_open_files(dir: &Path, scan: &Scan) -> Result<()> {
    let open = open_files(dir, scan.dev, &scan.inodes);
    if open.is_empty() {
        return Ok(());
    }
    let mut list: Vec<String> = open.iter().take(5).cloned().collect();
    if open.len() > 5 {
        list.push(format!("and {} more", open.len() - 5));
    }
    Err(ConvertError::OpenFiles {
        dir: dir.to_path_buf(),
        list: list.join(", "),
    })
}

/// Who runs the conversion, and the hard links seen so far.
struct Who {
    /// `None` for root; else the effective uid and every group.
    user: Option<(u32, Vec<u32>)>,
    /// Inode -> (link count, names seen in the tree, first path).
    links: HashMap<u64, (u64, u64, PathBuf)>,
}

impl Who {
    fn caller() -> Result<Who> {
        let uid = rustix::process::geteuid().as_raw();
        let user = if uid == 0 {
            None
        } else {
            let mut groups: Vec<u32> = rustix::process::getgroups()
                .map_err(|e| io("read the groups of", "this process", e))?
                .into_iter()
                .map(|g| g.as_raw())
                .collect();
            groups.push(rustix::process::getegid().as_raw());
            Some((uid, groups))
        };
        Ok(Who {
            user,
            links: HashMap::new(),
        })
    }

    /// [`ConvertError::NotOwner`] when a caller other than root could not
    /// give the copy of `st` its owner, group or type.
    // `st_nlink` is not u64 on every architecture.
    #[allow(clippy::unnecessary_cast)]
    fn check(&mut self, st: &Stat, path: &Path) -> Result<()> {
        let ft = FileType::from_raw_mode(st.st_mode);
        if let Some((uid, groups)) = &self.user {
            let why = if st.st_uid != *uid {
                Some("belongs to another user")
            } else if !groups.contains(&st.st_gid) {
                Some("has a group you are not in")
            } else if matches!(ft, FileType::CharacterDevice | FileType::BlockDevice) {
                Some("is a device node")
            } else {
                None
            };
            if let Some(why) = why {
                return Err(ConvertError::NotOwner {
                    path: path.to_path_buf(),
                    why,
                });
            }
        }
        if ft != FileType::Directory && st.st_nlink > 1 {
            let e = self
                .links
                .entry(st.st_ino)
                .or_insert_with(|| (st.st_nlink as u64, 0, path.to_path_buf()));
            e.1 += 1;
        }
        Ok(())
    }

    /// [`ConvertError::OutsideLink`] for a file with fewer names in the
    /// tree than links.
    fn outside_links(&self) -> Result<()> {
        let mut out: Vec<&PathBuf> = self
            .links
            .values()
            .filter(|(nlink, seen, _)| seen < nlink)
            .map(|(_, _, p)| p)
            .collect();
        out.sort();
        match out.first() {
            Some(p) => Err(ConvertError::OutsideLink((*p).clone())),
            None => Ok(()),
        }
    }
}

fn scan_into(fd: &OwnedFd, shown: &Path, scan: &mut Scan, who: &mut Who) -> Result<()> {
    for name in names(fd, shown)? {
        let path = shown.join(&name);
        let st = rustix::fs::statat(fd, &name, AtFlags::SYMLINK_NOFOLLOW)
            .map_err(|e| io("stat", &path, e))?;
        if st.st_dev != scan.dev {
            return Err(ConvertError::MountPoint(path));
        }
        who.check(&st, &path)?;
        scan.objects += 1;
        if scan.inodes.insert(st.st_ino) {
            scan.allocated += st.st_blocks as u64 * 512;
            if FileType::from_raw_mode(st.st_mode) == FileType::RegularFile {
                scan.bytes += st.st_size as u64;
            }
        }
        if FileType::from_raw_mode(st.st_mode) == FileType::Directory {
            let sub = open_dir_at(fd, &name, &path)?;
            scan_into(&sub, &path, scan, who)?;
        }
    }
    Ok(())
}

/// Free space (for unprivileged users: `f_bavail`) against the tree's
/// allocated size plus a margin: 2% and 16 MiB, and 4 KiB per object for
/// directories and encryption contexts.
fn check_space(fd: &OwnedFd, dir: &Path, scan: &Scan) -> Result<()> {
    let vfs = rustix::fs::fstatvfs(fd).map_err(|e| io("statvfs", dir, e))?;
    let have = vfs.f_bavail.saturating_mul(vfs.f_frsize);
    let need = scan.allocated + scan.allocated / 50 + (16 << 20) + scan.objects * 4096;
    if have < need {
        return Err(ConvertError::NoSpace {
            dir: dir.to_path_buf(),
            need: need.div_ceil(1 << 20),
            have: have >> 20,
        });
    }
    if vfs.f_files > 0 && vfs.f_favail < scan.objects + 16 {
        return Err(ConvertError::NoInodes {
            dir: dir.to_path_buf(),
            need: scan.objects + 16,
            have: vfs.f_favail,
        });
    }
    Ok(())
}

/// `pid N: PATH` for every open file descriptor, working directory or root
/// directory of another process that is an inode of the tree (device
/// `dev`, inode in `inodes`). Processes that cannot be inspected are
/// skipped.
pub fn open_files(dir: &Path, dev: u64, inodes: &HashSet<u64>) -> Vec<String> {
    let mut out: Vec<String> = fscrypt_linux::holders::holding_inodes(dev, inodes)
        .into_iter()
        .map(|(pid, target)| {
            let target = target.as_deref().unwrap_or(dir);
            format!("pid {pid}: {}", target.display())
        })
        .collect();
    // Sorted as text (as before the shared scan), then without repeats.
    out.sort();
    out.dedup();
    out
}
