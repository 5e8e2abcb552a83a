//! Extract a tree from an image: regular files (sparse holes kept sparse),
//! directories, symlinks, hard links as links, special files, with modes,
//! owners, timestamps and xattrs (`user.*` and POSIX ACLs always,
//! `trusted.*` and `security.*` with [`Options::privileged_xattrs`]). Each
//! file is written under a temporary name and
//! renamed into place. Objects without their key are reported and skipped:
//! nothing is ever written as ciphertext under a plaintext name.
//!
//! The image is untrusted: by default (as tar does for a user other than
//! root) owners are not restored ([`Options::owners`]), and setuid/setgid
//! bits of non-directories, device nodes (block and character),
//! `security.capability` and the other `trusted.*`/`security.*` xattrs
//! (overlayfs's `trusted.overlay.*`, SELinux labels: they steer the kernel
//! when the tree is used) are dropped, each listed in [`Report::dropped`];
//! [`Options::special`] (and, for the xattrs, [`Options::privileged_xattrs`])
//! restores them. FIFOs and sockets are kept.

use std::collections::{HashMap, HashSet};
use std::ffi::OsStr;
use std::fs::{File, OpenOptions};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

use rustix::fs::{AtFlags, CWD, Mode, Timespec, Timestamps};

use super::read::{Contents, Piece};
use super::{Crypt, Image, ImageError, Node, join, safe_name};
use crate::{InodeKind, Reader};

/// What to restore besides contents.
#[derive(Clone, Copy, Debug)]
pub struct Options {
    /// Restore owners (needs root); otherwise new objects are the
    /// caller's.
    pub owners: bool,
    /// Restore setuid/setgid bits of non-directories, device nodes and
    /// `security.capability` (file capabilities); otherwise they are
    /// dropped and listed in [`Report::dropped`].
    pub special: bool,
    /// Also restore `trusted.*` and `security.*` xattrs (needs root; the
    /// CLI sets it for root with `--preserve-special` only); `user.*` and
    /// POSIX ACLs are always restored. Without it they are left out, and
    /// listed in [`Report::dropped`] unless [`Options::special`] is set.
    pub privileged_xattrs: bool,
}

/// Progress so far, for a progress display.
#[derive(Clone, Copy, Debug, Default)]
pub struct Progress {
    /// Objects written.
    pub objects: u64,
    /// File bytes written (holes included).
    pub bytes: u64,
}

/// The outcome of an extraction.
#[derive(Debug, Default)]
pub struct Report {
    /// Regular files written (first links).
    pub files: u64,
    /// Directories created.
    pub dirs: u64,
    /// Symlinks created.
    pub symlinks: u64,
    /// Extra hard links created.
    pub hard_links: u64,
    /// Special files created.
    pub special: u64,
    /// File bytes (holes included).
    pub bytes: u64,
    /// Extended attributes set.
    pub xattrs: u64,
    /// Objects skipped because their key was not given: (shown path, reason).
    pub skipped: Vec<(String, String)>,
    /// Objects that could not be extracted: (shown path, error).
    pub errors: Vec<(String, String)>,
    /// What was left out because [`Options::special`] was not given:
    /// (shown path, what: `setuid/setgid bits`, `device node`,
    /// `security.capability`).
    pub dropped: Vec<(String, &'static str)>,
}

struct Walk<'a, R> {
    img: &'a Image<R>,
    opts: Options,
    report: Report,
    links: HashMap<u32, PathBuf>,
    ancestors: HashSet<u32>,
    progress: &'a mut dyn FnMut(Progress),
}

fn io(path: &Path) -> impl FnOnce(std::io::Error) -> ImageError + '_ {
    move |source| ImageError::Io {
        path: path.to_path_buf(),
        source,
    }
}

fn temp_name(dest: &Path) -> PathBuf {
    let mut name = b".".to_vec();
    name.extend_from_slice(dest.file_name().map(OsStr::as_bytes).unwrap_or(b"x"));
    name.extend_from_slice(format!(".fscrypt-rs-tmp.{}", std::process::id()).as_bytes());
    // A name of at most 255 bytes: shorten long names (uniqueness comes
    // from the directory being ours and the process id).
    if name.len() > 255 {
        name.drain(1..name.len() - 255 + 1);
    }
    dest.with_file_name(OsStr::from_bytes(&name))
}

fn ts((sec, nsec): (i64, u32)) -> Timespec {
    Timespec {
        tv_sec: sec,
        tv_nsec: nsec.into(),
    }
}

impl<R: Reader> Walk<'_, R> {
    fn tick(&mut self) {
        (self.progress)(Progress {
            objects: self.report.files
                + self.report.dirs
                + self.report.symlinks
                + self.report.hard_links
                + self.report.special,
            bytes: self.report.bytes,
        });
    }

    /// Set the xattrs of `node` on `path` (not following a symlink). A
    /// failure is recorded for that object (`shown`) and the others are
    /// still set.
    fn set_xattrs(&mut self, node: &Node, shown: &str, path: &Path) {
        let (list, errors) = match super::xattrs::vfs_xattrs(self.img.ext4(), &node.inode) {
            Ok(x) => x,
            Err(e) => {
                self.report
                    .errors
                    .push((shown.to_string(), format!("xattrs not restored: {e}")));
                return;
            }
        };
        for e in errors {
            self.report.errors.push((shown.to_string(), e));
        }
        let mut dropped_privileged = false;
        for (name, value) in list {
            if !self.opts.special && name == b"security.capability" {
                self.report
                    .dropped
                    .push((shown.to_string(), "security.capability"));
                continue;
            }
            if !self.opts.privileged_xattrs
                && (name.starts_with(b"trusted.") || name.starts_with(b"security."))
            {
                if !self.opts.special && !dropped_privileged {
                    dropped_privileged = true;
                    self.report
                        .dropped
                        .push((shown.to_string(), "trusted.*/security.* xattrs"));
                }
                continue;
            }
            let r = rustix::fs::lsetxattr(
                path,
                OsStr::from_bytes(&name),
                &value,
                rustix::fs::XattrFlags::empty(),
            );
            match r {
                Ok(()) => self.report.xattrs += 1,
                Err(e) => self.report.errors.push((
                    shown.to_string(),
                    format!(
                        "xattr {} not restored: {}",
                        String::from_utf8_lossy(&name),
                        std::io::Error::from(e)
                    ),
                )),
            }
        }
    }

    fn set_meta(&mut self, node: &Node, shown: &str, path: &Path) -> Result<(), ImageError> {
        let i = &node.inode;
        let nofollow = AtFlags::SYMLINK_NOFOLLOW;
        if self.opts.owners {
            rustix::fs::chownat(
                CWD,
                path,
                Some(rustix::fs::Uid::from_raw(i.uid())),
                Some(rustix::fs::Gid::from_raw(i.gid())),
                nofollow,
            )
            .map_err(|e| io(path)(e.into()))?;
        }
        // After chown (which clears `security.capability`), before chmod
        // (an access ACL also sets the mode; chmod then keeps both).
        self.set_xattrs(node, shown, path);
        if node.kind() != InodeKind::Symlink {
            let mut mode = u32::from(i.mode) & 0o7777;
            if !self.opts.special && node.kind() != InodeKind::Directory && mode & 0o6000 != 0 {
                mode &= !0o6000;
                self.report
                    .dropped
                    .push((shown.to_string(), "setuid/setgid bits"));
            }
            rustix::fs::chmodat(CWD, path, Mode::from_raw_mode(mode), AtFlags::empty())
                .map_err(|e| io(path)(e.into()))?;
        }
        let times = Timestamps {
            last_access: ts(i.atime()),
            last_modification: ts(i.mtime()),
        };
        rustix::fs::utimensat(CWD, path, &times, nofollow).map_err(|e| io(path)(e.into()))?;
        Ok(())
    }

    /// Extract `node` (shown as `shown`) to `dest`.
    fn object(&mut self, node: &Node, shown: &str, dest: &Path) -> Result<(), ImageError> {
        if let Crypt::Locked { policy } = &node.crypt
            && node.kind() != InodeKind::Directory
        {
            self.report.skipped.push((
                shown.to_string(),
                format!(
                    "encrypted with key {}, not given",
                    super::keys::policy_key(policy)
                ),
            ));
            return Ok(());
        }
        match node.kind() {
            InodeKind::Directory => self.dir(node, shown, dest),
            InodeKind::Regular => self.file(node, shown, dest),
            InodeKind::Symlink => {
                let target = self.img.read_link(node, shown)?;
                let tmp = temp_name(dest);
                std::os::unix::fs::symlink(OsStr::from_bytes(&target), &tmp).map_err(io(&tmp))?;
                let r = self
                    .set_meta(node, shown, &tmp)
                    .and_then(|()| std::fs::rename(&tmp, dest).map_err(io(dest)));
                if r.is_err() {
                    let _ = std::fs::remove_file(&tmp);
                }
                r?;
                self.report.symlinks += 1;
                Ok(())
            }
            InodeKind::Other => self.special(node, shown, dest),
        }
    }

    fn special(&mut self, node: &Node, shown: &str, dest: &Path) -> Result<(), ImageError> {
        let mode = u32::from(node.inode.mode);
        let ft = rustix::fs::FileType::from_raw_mode(mode);
        if !self.opts.special
            && matches!(
                ft,
                rustix::fs::FileType::CharacterDevice | rustix::fs::FileType::BlockDevice
            )
        {
            self.report.dropped.push((shown.to_string(), "device node"));
            return Ok(());
        }
        let (major, minor) = node.inode.device_number();
        let tmp = temp_name(dest);
        rustix::fs::mknodat(
            CWD,
            &tmp,
            ft,
            Mode::from_raw_mode(mode & 0o777),
            rustix::fs::makedev(major, minor),
        )
        .map_err(|e| io(&tmp)(e.into()))?;
        let r = self
            .set_meta(node, shown, &tmp)
            .and_then(|()| std::fs::rename(&tmp, dest).map_err(io(dest)));
        if r.is_err() {
            let _ = std::fs::remove_file(&tmp);
        }
        r?;
        self.report.special += 1;
        Ok(())
    }

    fn file(&mut self, node: &Node, shown: &str, dest: &Path) -> Result<(), ImageError> {
        let tmp = temp_name(dest);
        if node.inode.links_count() > 1
            && let Some(first) = self.links.get(&node.ino())
        {
            std::fs::hard_link(first, &tmp).map_err(io(&tmp))?;
            if let Err(e) = std::fs::rename(&tmp, dest) {
                let _ = std::fs::remove_file(&tmp);
                return Err(io(dest)(e));
            }
            self.report.hard_links += 1;
            return Ok(());
        }
        let mut contents = Contents::new(self.img, node, shown)?;
        let f = OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .custom_flags(libc::O_NOFOLLOW)
            .open(&tmp)
            .map_err(io(&tmp))?;
        let r = self.write_contents(&mut contents, &f, &tmp);
        let r = r
            .and_then(|()| f.sync_data().map_err(io(&tmp)))
            .and_then(|()| self.set_meta(node, shown, &tmp))
            .and_then(|()| std::fs::rename(&tmp, dest).map_err(io(dest)));
        if r.is_err() {
            let _ = std::fs::remove_file(&tmp);
        }
        r?;
        self.report.files += 1;
        if node.inode.links_count() > 1 {
            self.links.insert(node.ino(), dest.to_path_buf());
        }
        self.tick();
        Ok(())
    }

    fn write_contents(
        &mut self,
        contents: &mut Contents<'_, R>,
        f: &File,
        tmp: &Path,
    ) -> Result<(), ImageError> {
        let mut off = 0u64;
        while let Some(p) = contents.next_piece()? {
            match p {
                Piece::Data(d) => {
                    f.write_all_at(d, off).map_err(io(tmp))?;
                    off += d.len() as u64;
                    self.report.bytes += d.len() as u64;
                }
                Piece::Hole(n) => {
                    off += n;
                    self.report.bytes += n;
                }
            }
            self.tick();
        }
        // Trailing holes: extend without writing (stays sparse).
        f.set_len(contents.size()).map_err(io(tmp))?;
        Ok(())
    }

    fn dir(&mut self, node: &Node, shown: &str, dest: &Path) -> Result<(), ImageError> {
        if let Crypt::Locked { policy } = &node.crypt {
            self.report.skipped.push((
                shown.to_string(),
                format!(
                    "directory encrypted with key {}, not given (its names are not known)",
                    super::keys::policy_key(policy)
                ),
            ));
            return Ok(());
        }
        if !self.ancestors.insert(node.ino()) {
            return Err(ImageError::Corrupt {
                path: shown.to_string(),
                what: "directory loop (an entry leads back to one of its ancestors)".into(),
            });
        }
        let r = self.dir_inner(node, shown, dest);
        self.ancestors.remove(&node.ino());
        r
    }

    fn dir_inner(&mut self, node: &Node, shown: &str, dest: &Path) -> Result<(), ImageError> {
        match std::fs::create_dir(dest) {
            Ok(()) => {}
            // Only the top-level destination may exist already, and it must
            // be a real directory (not a symlink to elsewhere).
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists && shown_is_top(self) => {
                let m = std::fs::symlink_metadata(dest).map_err(io(dest))?;
                if !m.is_dir() {
                    return Err(io(dest)(e));
                }
            }
            Err(e) => return Err(io(dest)(e)),
        }
        self.report.dirs += 1;
        self.tick();
        let listing = self.img.list(node, shown)?;
        for e in listing.errors {
            self.report.errors.push((shown.to_string(), e));
        }
        let mut seen = HashSet::new();
        for entry in listing.entries {
            let child_shown = join(shown, &entry.name);
            if !safe_name(&entry.name) || !seen.insert(entry.name.clone()) {
                self.report.errors.push((
                    child_shown,
                    "unsafe or duplicate name in the directory; skipped".into(),
                ));
                continue;
            }
            let child_dest = dest.join(OsStr::from_bytes(&entry.name));
            let r = self
                .img
                .child(node, &entry, &child_shown)
                .and_then(|child| self.object(&child, &child_shown, &child_dest));
            if let Err(e) = r {
                self.report.errors.push((child_shown, e.to_string()));
            }
        }
        self.set_meta(node, shown, dest)
    }
}

fn shown_is_top<R>(w: &Walk<'_, R>) -> bool {
    w.ancestors.len() == 1
}

/// Extract `node` (shown as `shown`) to `dest`. A directory becomes `dest`
/// (created, or an existing directory); anything else is written at `dest`.
/// `progress` is called as objects and bytes are written.
///
/// # Errors
/// An error for the top object itself; errors below it are collected in
/// [`Report::errors`] and the walk goes on.
pub fn extract<R: Reader>(
    img: &Image<R>,
    node: &Node,
    shown: &str,
    dest: &Path,
    opts: Options,
    progress: &mut dyn FnMut(Progress),
) -> Result<Report, ImageError> {
    let mut w = Walk {
        img,
        opts,
        report: Report::default(),
        links: HashMap::new(),
        ancestors: HashSet::new(),
        progress,
    };
    w.object(node, shown, dest)?;
    Ok(w.report)
}
