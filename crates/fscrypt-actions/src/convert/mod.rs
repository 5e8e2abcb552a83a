//! Converting a directory that already holds files to kernel fscrypt, in
//! place and resumably (`fscrypt-rs encrypt DIR --convert`).
//!
//! The plan, on the filesystem of `DIR` (so nothing crosses devices):
//!
//! 1. *preparing*: a work directory `.NAME.fscrypt-convert/` beside `DIR`
//!    (mode 0700) holding an empty `encrypted/`; the caller sets the
//!    encryption policy on it (and writes its metadata), then calls
//!    [`Conversion::mark_prepared`].
//! 2. *prepared*: the tree is copied into `encrypted/` with every kind of
//!    metadata ([`copy`]), the filesystem is synced, and every object is
//!    compared with the original ([`verify`]).
//! 3. *copied*: `DIR` and `encrypted/` are swapped atomically with
//!    `renameat2(RENAME_EXCHANGE)`.
//! 4. *exchanged*: `DIR` is the encrypted tree; what changed in the
//!    plaintext (now in the work directory) since it was verified is copied
//!    in ([`guard`]).
//! 5. *settled*: the recorded plaintext is removed, then the work
//!    directory (a rerun from here only removes: the removal itself changes
//!    the plaintext's directory times and link counts).
//!
//! The phase is kept in `state` inside the work directory, written
//! atomically (temporary file, fsync, rename, fsync of the directory). A
//! crash at any point leaves either the original `DIR` untouched (before
//! the exchange) or `DIR` encrypted and complete (after it); rerunning
//! continues from the recorded phase. An interrupted copy is restarted
//! from scratch (the partial copy is removed first); after a crash in
//! phase *copied* the copy is verified again before the exchange, and
//! whether the exchange already happened is read from `DIR` itself (it has
//! an encryption policy only after it).
//!
//! Between the verification and the exchange `DIR` can still be written
//! to: [`guard`] records what was verified, copies into the encrypted
//! `DIR` whatever changed in that window, and removes only what it
//! recorded (the rest is kept and named). Before anything is written,
//! [`preflight`] refuses a tree with a hard link to outside it (the
//! plaintext would stay there) and, for callers other than root, a tree
//! with objects the copy could not give their owner (another user's,
//! a group the caller is not in, device nodes).
//!
//! Everything below `DIR` is opened relative to directory descriptors with
//! `O_NOFOLLOW`; symlinks in the tree are copied, never followed.

pub mod copy;
pub mod guard;
mod preflight;
pub mod verify;

pub use preflight::{Scan, open_files, preflight};
use preflight::{preflight_with, refuse_open_files};

use std::ffi::{OsStr, OsString};
use std::io::Write;
use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};

use rustix::fs::{AtFlags, FileType, Mode, OFlags, RenameFlags};
use rustix::io::Errno;

/// Name of the state file inside the work directory.
pub const STATE_FILE: &str = "state";
/// Name of the directory, inside the work directory, that receives the
/// encrypted copy (and, after the exchange, holds the plaintext original).
pub const ENCRYPTED: &str = "encrypted";
/// First line of the state file.
const STATE_MAGIC: &str = "fscrypt-rs convert v1";

/// Why a conversion stopped or was refused.
#[derive(Debug, thiserror::Error)]
pub enum ConvertError {
    /// A system call failed.
    #[error("{what} {path}: {source}")]
    Io {
        /// What was being done.
        what: &'static str,
        /// The path it was done to.
        path: PathBuf,
        /// The error.
        source: std::io::Error,
    },
    /// `DIR` (or something below it) is a mount point.
    #[error(
        "{0} is a mount point; unmount it (or convert the directories beside it one by one) and retry"
    )]
    MountPoint(PathBuf),
    /// Files below `DIR` are open.
    #[error("files under {dir} are open ({list}); close them (stop those processes) and retry")]
    OpenFiles {
        /// The directory.
        dir: PathBuf,
        /// `pid N: path`, comma-separated (the first few).
        list: String,
    },
    /// Too little free space for the copy.
    #[error(
        "not enough free space on the filesystem of {dir}: the copy needs about {need} MiB and {have} MiB are free; free some space and retry"
    )]
    NoSpace {
        /// The directory.
        dir: PathBuf,
        /// MiB needed (tree plus margin).
        need: u64,
        /// MiB available.
        have: u64,
    },
    /// Too few free inodes for the copy.
    #[error(
        "not enough free inodes on the filesystem of {dir}: the copy needs {need} and {have} are free"
    )]
    NoInodes {
        /// The directory.
        dir: PathBuf,
        /// Inodes needed.
        need: u64,
        /// Inodes available.
        have: u64,
    },
    /// The key of the encrypted directory is not present.
    #[error(
        "the encrypted copy {0} is locked (its key is not in the keyring); unlock it with `fscrypt-rs unlock {0}` and rerun"
    )]
    Locked(PathBuf),
    /// The copy differs from the original.
    #[error(
        "the copy of {path} differs from the original ({what}); the original is untouched: rerun to copy again"
    )]
    Mismatch {
        /// The object, relative to `DIR`.
        path: PathBuf,
        /// What differs.
        what: String,
    },
    /// Interrupted (Ctrl-C); the state is resumable.
    #[error(
        "interrupted; the original is untouched or the result complete: rerun the same command to continue"
    )]
    Interrupted,
    /// A file in the tree has a hard link outside it.
    #[error(
        "{0} has another hard link outside the directory, where its plaintext would stay readable; remove that link (or move it into the directory) and retry"
    )]
    OutsideLink(PathBuf),
    /// The caller (not root) could not recreate an object as it is.
    #[error("{path} {why}; only root can convert this tree: run as root, or move it out and retry")]
    NotOwner {
        /// The object.
        path: PathBuf,
        /// Why (whose it is, or what it is).
        why: &'static str,
    },
    /// Objects changed during the exchange could not all be copied in.
    #[error(
        "{dir} is now encrypted, but {list} changed while it was being swapped in and could not be copied into it; kept in {kept}: move what you need into {dir}, then rerun to finish"
    )]
    Kept {
        /// The directory (now encrypted).
        dir: PathBuf,
        /// Where the kept objects are (the plaintext tree).
        kept: PathBuf,
        /// Paths relative to `dir` (the first few), comma-separated.
        list: String,
    },
    /// The work directory or its state file is not what this tool wrote.
    #[error("{path}: {why}; remove it if no conversion is running, then retry")]
    BadState {
        /// The work directory or state file.
        path: PathBuf,
        /// Why it was not accepted.
        why: String,
    },
}

/// Result of this module.
pub type Result<T> = std::result::Result<T, ConvertError>;

pub(crate) fn io(
    what: &'static str,
    path: impl Into<PathBuf>,
    e: impl Into<std::io::Error>,
) -> ConvertError {
    ConvertError::Io {
        what,
        path: path.into(),
        source: e.into(),
    }
}

/// A phase of the conversion (what is done; the next step follows).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    /// The work directory exists; the policy may not be set yet.
    Preparing,
    /// `encrypted/` has its policy and metadata; the copy is next.
    Prepared,
    /// The copy is complete and verified; the exchange is next.
    Copied,
    /// `DIR` is the encrypted tree; what changed in the plaintext during
    /// the last window is copied in next.
    Exchanged,
    /// What changed is copied in and the record rewritten; the plaintext
    /// is being removed. Removing changes the plaintext directories' times
    /// and the remaining links' change times, so a rerun from here must not
    /// compare again (it would copy its own removals in).
    Settled,
}

impl Phase {
    fn name(self) -> &'static str {
        match self {
            Phase::Preparing => "preparing",
            Phase::Prepared => "prepared",
            Phase::Copied => "copied",
            Phase::Exchanged => "exchanged",
            Phase::Settled => "settled",
        }
    }

    fn parse(s: &str) -> Option<Phase> {
        [
            Phase::Preparing,
            Phase::Prepared,
            Phase::Copied,
            Phase::Exchanged,
            Phase::Settled,
        ]
        .into_iter()
        .find(|p| p.name() == s)
    }
}

/// The step a [`Progress`] report is about.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Step {
    /// Copying file contents and metadata.
    Copying,
    /// Comparing the copy with the original.
    Verifying,
    /// Removing the plaintext original.
    Removing,
}

/// A progress report.
#[derive(Debug, Clone, Copy)]
pub struct Progress {
    /// The step.
    pub step: Step,
    /// Bytes done in this step.
    pub bytes: u64,
    /// Bytes to do in this step.
    pub total_bytes: u64,
    /// Objects done in this step.
    pub objects: u64,
    /// Objects to do.
    pub total_objects: u64,
}

/// The directory fd of `path` (`O_NOFOLLOW`: a symlink is refused).
pub(crate) fn open_dir(path: &Path) -> Result<OwnedFd> {
    rustix::fs::open(
        path,
        OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
        Mode::empty(),
    )
    .map_err(|e| io("open", path, e))
}

/// The directory fd of `name` in `dirfd` (one component, no symlink or
/// magic link followed: [`safe_open::open_entry`]).
pub(crate) fn open_dir_at(dirfd: impl AsFd, name: &OsStr, shown: &Path) -> Result<OwnedFd> {
    safe_open::open_entry(
        dirfd.as_fd(),
        name.as_bytes(),
        OFlags::RDONLY | OFlags::DIRECTORY,
        Mode::empty(),
        safe_open::Mounts::Cross,
    )
    .map_err(|e| io("open", shown, e))
}

/// The names in a directory (without `.` and `..`), sorted.
pub(crate) fn names(dirfd: &OwnedFd, shown: &Path) -> Result<Vec<OsString>> {
    let mut dir = rustix::fs::Dir::read_from(dirfd).map_err(|e| io("read", shown, e))?;
    let mut out = Vec::new();
    while let Some(e) = dir.read() {
        let e = e.map_err(|e| io("read", shown, e))?;
        let n = e.file_name().to_bytes();
        if n != b"." && n != b".." {
            out.push(OsStr::from_bytes(n).to_os_string());
        }
    }
    out.sort();
    Ok(out)
}

/// Parent and final component of `dir` (canonicalised).
pub(crate) fn split(dir: &Path) -> Result<(PathBuf, OsString, PathBuf)> {
    let canon = std::fs::canonicalize(dir).map_err(|e| io("resolve", dir, e))?;
    let (Some(parent), Some(name)) = (canon.parent(), canon.file_name()) else {
        return Err(ConvertError::MountPoint(canon));
    };
    Ok((parent.to_path_buf(), name.to_os_string(), canon))
}

/// The work directory of a conversion of `dir`: `.NAME.fscrypt-convert`
/// beside it.
///
/// # Errors
/// `dir` cannot be resolved.
pub fn work_dir_of(dir: &Path) -> Result<PathBuf> {
    let (parent, name, _) = split(dir)?;
    let mut w = OsString::from(".");
    w.push(&name);
    w.push(".fscrypt-convert");
    Ok(parent.join(w))
}

/// A conversion in progress (its work directory exists).
#[derive(Debug)]
pub struct Conversion {
    dir: PathBuf,
    parent: OwnedFd,
    name: OsString,
    work: PathBuf,
    work_fd: OwnedFd,
    phase: Phase,
}

impl Conversion {
    /// The pending conversion of `dir`, if its work directory exists.
    ///
    /// # Errors
    /// [`ConvertError::BadState`] when the work directory is not one this
    /// tool wrote (a symlink, not ours, bad state file), I/O errors.
    pub fn pending(dir: &Path) -> Result<Option<Conversion>> {
        let (parent_path, name, canon) = split(dir)?;
        let work = work_dir_of(&canon)?;
        let parent = open_dir(&parent_path)?;
        let wname = work.file_name().unwrap_or_default().to_os_string();
        let st = match rustix::fs::statat(&parent, &wname, AtFlags::SYMLINK_NOFOLLOW) {
            Ok(st) => st,
            Err(Errno::NOENT) => return Ok(None),
            Err(e) => return Err(io("stat", &work, e)),
        };
        let bad = |why: &str| ConvertError::BadState {
            path: work.clone(),
            why: why.to_string(),
        };
        if FileType::from_raw_mode(st.st_mode) != FileType::Directory {
            return Err(bad("not a directory"));
        }
        if st.st_uid != rustix::process::geteuid().as_raw() || st.st_mode & 0o077 != 0 {
            return Err(bad("not a private (0700) directory of yours"));
        }
        let work_fd = open_dir_at(&parent, &wname, &work)?;
        let phase = match read_state(&work_fd) {
            Ok(Some(p)) => p,
            // Created, state not yet written: nothing else was done.
            Ok(None) => Phase::Preparing,
            Err(why) => return Err(bad(&why)),
        };
        Ok(Some(Conversion {
            dir: canon,
            parent,
            name,
            work,
            work_fd,
            phase,
        }))
    }

    /// Starts a conversion of `dir`: creates the work directory and an
    /// empty `encrypted/` in it (phase [`Phase::Preparing`]). The caller
    /// sets the policy on [`Conversion::encrypted_dir`], then calls
    /// [`Conversion::mark_prepared`].
    ///
    /// # Errors
    /// The work directory already exists, I/O errors.
    pub fn begin(dir: &Path) -> Result<Conversion> {
        let (parent_path, name, canon) = split(dir)?;
        let work = work_dir_of(&canon)?;
        let parent = open_dir(&parent_path)?;
        let wname = work.file_name().unwrap_or_default().to_os_string();
        rustix::fs::mkdirat(&parent, &wname, Mode::from_raw_mode(0o700))
            .map_err(|e| io("create", &work, e))?;
        let work_fd = open_dir_at(&parent, &wname, &work)?;
        let c = Conversion {
            dir: canon,
            parent,
            name,
            work,
            work_fd,
            phase: Phase::Preparing,
        };
        c.write_state(Phase::Preparing)?;
        c.fresh_encrypted()?;
        Ok(c)
    }

    /// Phase [`Phase::Preparing`] after a crash: removes `encrypted/`
    /// (empty, perhaps with a policy already) and makes a new empty one.
    /// Metadata written before the crash stays unused on the filesystem.
    ///
    /// # Errors
    /// I/O errors.
    pub fn restart_preparing(&mut self) -> Result<()> {
        if let Err(e) = rustix::fs::unlinkat(&self.work_fd, ENCRYPTED, AtFlags::REMOVEDIR)
            && e != Errno::NOENT
        {
            return Err(io("remove", self.encrypted_dir(), e));
        }
        self.write_state(Phase::Preparing)?;
        self.fresh_encrypted()
    }

    fn fresh_encrypted(&self) -> Result<()> {
        rustix::fs::mkdirat(&self.work_fd, ENCRYPTED, Mode::from_raw_mode(0o700))
            .map_err(|e| io("create", self.encrypted_dir(), e))?;
        rustix::fs::fsync(&self.work_fd).map_err(|e| io("sync", &self.work, e))
    }

    /// The directory the encrypted copy goes to.
    pub fn encrypted_dir(&self) -> PathBuf {
        self.work.join(ENCRYPTED)
    }

    /// The work directory.
    pub fn work_dir(&self) -> &Path {
        &self.work
    }

    /// The directory being converted (canonical).
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The recorded phase.
    pub fn phase(&self) -> Phase {
        self.phase
    }

    /// One line: what a rerun does from the recorded phase.
    pub fn describe_next(&self) -> String {
        let d = self.dir.display();
        match self.phase {
            Phase::Preparing => format!(
                "a conversion of {d} was interrupted while being set up; it starts again (the original is untouched)"
            ),
            Phase::Prepared => format!(
                "a conversion of {d} was interrupted before the copy was complete; the copy starts again (the original is untouched)"
            ),
            Phase::Copied => format!(
                "a conversion of {d} was interrupted after the copy; it is verified again, then swapped in"
            ),
            Phase::Exchanged | Phase::Settled => format!(
                "{d} is already encrypted; the conversion finishes by removing the plaintext copy in {}",
                self.work.display()
            ),
        }
    }

    /// Records that `encrypted/` has its policy (and its metadata is on
    /// disk).
    ///
    /// # Errors
    /// I/O errors.
    pub fn mark_prepared(&mut self) -> Result<()> {
        self.write_state(Phase::Prepared)?;
        self.phase = Phase::Prepared;
        Ok(())
    }

    fn write_state(&self, phase: Phase) -> Result<()> {
        let text = format!("{STATE_MAGIC}\nphase={}\n", phase.name());
        write_atomic(&self.work_fd, &self.work, STATE_FILE, text.as_bytes())
    }

    /// Whether `DIR` already is the encrypted side (the exchange happened).
    fn exchanged(&self) -> bool {
        fscrypt_linux::policy::get_policy(&self.dir).is_ok()
    }

    /// Runs the conversion from the recorded phase to the end.
    /// `progress` is called often; `cancel` is polled and stops the run
    /// with [`ConvertError::Interrupted`] (the state stays resumable).
    ///
    /// # Errors
    /// Refusals of [`preflight`], [`ConvertError::Mismatch`],
    /// [`ConvertError::Locked`], [`ConvertError::Interrupted`], I/O errors.
    pub fn run(
        &mut self,
        cancel: &AtomicBool,
        progress: &mut dyn FnMut(&Progress),
    ) -> Result<Summary> {
        let mut summary = Summary::default();
        let mut scanned: Option<Scan> = None;
        let mut record: Option<guard::Record> = None;
        if self.phase == Phase::Preparing {
            return Err(ConvertError::BadState {
                path: self.work.clone(),
                why: "the encrypted directory is not set up yet".into(),
            });
        }
        if self.phase == Phase::Copied && !self.exchanged() {
            // After a crash: make sure the copy still matches.
            let scan = preflight_with(&self.dir, false)?;
            summary.objects = scan.objects;
            summary.bytes = scan.bytes;
            let checked = self.verify(&scan, cancel, progress);
            scanned = Some(scan);
            match checked {
                Ok(r) => record = Some(r),
                Err(ConvertError::Mismatch { .. }) => {
                    self.write_state(Phase::Prepared)?;
                    self.phase = Phase::Prepared;
                }
                Err(e) => return Err(e),
            }
        }
        if self.phase == Phase::Prepared {
            let enc = self.encrypted_dir();
            let efd = open_dir_at(&self.work_fd, OsStr::new(ENCRYPTED), &enc)?;
            if fscrypt_linux::policy::get_policy(&enc).is_err() {
                return Err(ConvertError::BadState {
                    path: enc,
                    why: "has no encryption policy".into(),
                });
            }
            // A partial copy from an interrupted run: start again.
            for n in names(&efd, &enc)? {
                remove_tree(&efd, &n, &enc.join(&n), cancel, &mut |_| {})
                    .map_err(|e| locked_or(e, &enc))?;
            }
            let scan = preflight(&self.dir)?;
            summary.objects = scan.objects;
            summary.bytes = scan.bytes;
            let src = open_dir(&self.dir)?;
            let mut c = copy::Copier::new(&self.dir, &scan, cancel, progress);
            c.copy_tree(&src, &efd).map_err(|e| locked_or(e, &enc))?;
            rustix::fs::syncfs(&efd).map_err(|e| io("sync", &enc, e))?;
            record = Some(self.verify(&scan, cancel, progress)?);
            self.write_state(Phase::Copied)?;
            self.phase = Phase::Copied;
            scanned = Some(scan);
        }
        if self.phase == Phase::Copied {
            if !self.exchanged() {
                if cancel.load(Ordering::SeqCst) {
                    return Err(ConvertError::Interrupted);
                }
                // Files opened during the copy would keep the plaintext.
                if let Some(scan) = &scanned {
                    refuse_open_files(&self.dir, scan)?;
                }
                let Some(record) = &record else {
                    return Err(ConvertError::BadState {
                        path: self.work.clone(),
                        why: "the copy was not verified".into(),
                    });
                };
                write_atomic(
                    &self.work_fd,
                    &self.work,
                    guard::RECORD_FILE,
                    &record.to_text(),
                )?;
                test_pause("FSCRYPT_RS_TEST_PAUSE_BEFORE_SWAP");
                rustix::fs::renameat_with(
                    &self.parent,
                    &self.name,
                    &self.work_fd,
                    ENCRYPTED,
                    RenameFlags::EXCHANGE,
                )
                .map_err(|e| io("exchange", &self.dir, e))?;
                rustix::fs::fsync(&self.parent).map_err(|e| io("sync", &self.dir, e))?;
                rustix::fs::fsync(&self.work_fd).map_err(|e| io("sync", &self.work, e))?;
                test_pause("FSCRYPT_RS_TEST_PAUSE_AFTER_SWAP");
            }
            self.write_state(Phase::Exchanged)?;
            self.phase = Phase::Exchanged;
        }
        // Phase::Exchanged: copy in what changed in the last window,
        // remove the recorded plaintext, then the work directory.
        match rustix::fs::statat(&self.work_fd, ENCRYPTED, AtFlags::SYMLINK_NOFOLLOW) {
            Ok(_) => self.settle_and_remove(summary.bytes, cancel, progress)?,
            Err(Errno::NOENT) => {}
            Err(e) => return Err(io("stat", self.encrypted_dir(), e)),
        }
        rustix::fs::unlinkat(&self.work_fd, STATE_FILE, AtFlags::empty())
            .map_err(|e| io("remove", self.work.join(STATE_FILE), e))?;
        let wname = self.work.file_name().unwrap_or_default().to_os_string();
        for n in names(&self.work_fd, &self.work)? {
            let _ = rustix::fs::unlinkat(&self.work_fd, &n, AtFlags::empty());
        }
        rustix::fs::unlinkat(&self.parent, &wname, AtFlags::REMOVEDIR)
            .map_err(|e| io("remove", &self.work, e))?;
        rustix::fs::fsync(&self.parent).map_err(|e| io("sync", &self.dir, e))?;
        Ok(summary)
    }

    fn verify(
        &self,
        scan: &Scan,
        cancel: &AtomicBool,
        progress: &mut dyn FnMut(&Progress),
    ) -> Result<guard::Record> {
        let enc = self.encrypted_dir();
        let src = open_dir(&self.dir)?;
        let dst = open_dir_at(&self.work_fd, OsStr::new(ENCRYPTED), &enc)?;
        let mut v = verify::Verifier::new(scan, cancel, progress);
        v.verify_tree(&src, &dst).map_err(|e| locked_or(e, &enc))?;
        Ok(std::mem::take(&mut v.record))
    }

    /// The record written before the exchange ([`guard`]).
    fn read_record(&self) -> Result<guard::Record> {
        let shown = self.work.join(guard::RECORD_FILE);
        let bad = |why: &str| ConvertError::BadState {
            path: shown.clone(),
            why: why.to_string(),
        };
        let fd = match rustix::fs::openat(
            &self.work_fd,
            guard::RECORD_FILE,
            OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
            Mode::empty(),
        ) {
            Ok(fd) => fd,
            Err(Errno::NOENT) => {
                return Err(bad(
                    "missing (no record of what was verified, so nothing in the plaintext copy is removed)",
                ));
            }
            Err(e) => return Err(io("open", &shown, e)),
        };
        let mut text = Vec::new();
        use std::io::Read;
        std::fs::File::from(fd)
            .read_to_end(&mut text)
            .map_err(|e| io("read", &shown, e))?;
        guard::Record::parse(&text).ok_or_else(|| bad("not a record this tool wrote"))
    }

    /// Phases [`Phase::Exchanged`] and [`Phase::Settled`]: copies in what
    /// changed in the last window (once: not again in `Settled`), then
    /// removes the recorded plaintext ([`guard`]).
    fn settle_and_remove(
        &mut self,
        total: u64,
        cancel: &AtomicBool,
        progress: &mut dyn FnMut(&Progress),
    ) -> Result<()> {
        let plain = self.encrypted_dir();
        let mut record = self.read_record()?;
        let mut stuck = Vec::new();
        if self.phase != Phase::Settled {
            let pfd = open_dir_at(&self.work_fd, OsStr::new(ENCRYPTED), &plain)?;
            let dfd = open_dir(&self.dir)?;
            let copied = record.src.len();
            stuck = guard::settle(&pfd, &dfd, &self.dir, &mut record, cancel)
                .map_err(|e| locked_or(e, &self.dir))?;
            if record.src.len() != copied || !stuck.is_empty() {
                write_atomic(
                    &self.work_fd,
                    &self.work,
                    guard::RECORD_FILE,
                    &record.to_text(),
                )?;
            }
            self.write_state(Phase::Settled)?;
            self.phase = Phase::Settled;
        }
        let mut done = 0u64;
        let mut removed = |b: u64| {
            done += b;
            progress(&Progress {
                step: Step::Removing,
                bytes: done,
                total_bytes: total.max(done),
                objects: 0,
                total_objects: 0,
            });
        };
        let mut r = guard::Remover {
            rec: &record,
            cancel,
            kept: Vec::new(),
            removed: &mut removed,
        };
        r.remove(&self.work_fd, OsStr::new(ENCRYPTED), Path::new(""), &plain)?;
        let kept = r.kept;
        let mut list: Vec<PathBuf> = stuck;
        list.extend(kept);
        list.sort();
        list.dedup();
        if list.is_empty() {
            return Ok(());
        }
        let mut shown: Vec<String> = list
            .iter()
            .take(5)
            .map(|p| p.display().to_string())
            .collect();
        if list.len() > 5 {
            shown.push(format!("and {} more", list.len() - 5));
        }
        Err(ConvertError::Kept {
            dir: self.dir.clone(),
            kept: plain,
            list: shown.join(", "),
        })
    }
}

/// Test seam: with the environment variable `var`
/// (`FSCRYPT_RS_TEST_PAUSE_BEFORE_SWAP` or `..._AFTER_SWAP`) naming a
/// FIFO, the conversion opens it and reads it to the end just before (or
/// just after) the exchange, so a test can change the tree in that window
/// and then let it go on (`..._BEFORE_REPLACE`: in [`guard`], after a
/// changed object was copied and before it replaces the copy in `DIR`).
/// Only the caller's own process waits; nothing else reads these
/// variables. Anything but a FIFO (a symlink, a device, a file) is
/// ignored, so the variable cannot make a root conversion read anything
/// else.
pub(crate) fn test_pause(var: &str) {
    use std::io::Read;
    use std::os::unix::fs::{FileTypeExt, OpenOptionsExt};
    let Some(p) = std::env::var_os(var) else {
        return;
    };
    let is_fifo = |t: std::fs::FileType| t.is_fifo();
    if !std::fs::symlink_metadata(&p).is_ok_and(|m| is_fifo(m.file_type())) {
        return;
    }
    let f = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW)
        .open(&p);
    if let Ok(mut f) = f
        && f.metadata().is_ok_and(|m| is_fifo(m.file_type()))
    {
        let _ = f.read_to_end(&mut Vec::new());
    }
}

/// ENOKEY from the encrypted side means it is locked.
fn locked_or(e: ConvertError, enc: &Path) -> ConvertError {
    match &e {
        ConvertError::Io { source, .. } if source.raw_os_error() == Some(libc::ENOKEY) => {
            ConvertError::Locked(enc.to_path_buf())
        }
        _ => e,
    }
}

/// What a finished conversion did.
#[derive(Debug, Clone, Copy, Default)]
pub struct Summary {
    /// Objects copied (0 when resumed after the copy).
    pub objects: u64,
    /// Bytes of file contents copied.
    pub bytes: u64,
}

/// Removes `name` in `dirfd` and everything below it, never following a
/// symlink; `removed(bytes)` after each regular file.
pub(crate) fn remove_tree(
    dirfd: &OwnedFd,
    name: &OsStr,
    shown: &Path,
    cancel: &AtomicBool,
    removed: &mut dyn FnMut(u64),
) -> Result<()> {
    if cancel.load(Ordering::SeqCst) {
        return Err(ConvertError::Interrupted);
    }
    let st = match rustix::fs::statat(dirfd, name, AtFlags::SYMLINK_NOFOLLOW) {
        Ok(st) => st,
        Err(Errno::NOENT) => return Ok(()),
        Err(e) => return Err(io("stat", shown, e)),
    };
    if FileType::from_raw_mode(st.st_mode) == FileType::Directory {
        let sub = open_dir_at(dirfd, name, shown)?;
        for n in names(&sub, shown)? {
            remove_tree(&sub, &n, &shown.join(&n), cancel, removed)?;
        }
        rustix::fs::unlinkat(dirfd, name, AtFlags::REMOVEDIR).map_err(|e| io("remove", shown, e))
    } else {
        rustix::fs::unlinkat(dirfd, name, AtFlags::empty()).map_err(|e| io("remove", shown, e))?;
        if FileType::from_raw_mode(st.st_mode) == FileType::RegularFile && st.st_nlink <= 1 {
            removed(st.st_size as u64);
        }
        Ok(())
    }
}

/// Writes `data` to `name` in the directory `dir_fd` (shown as `dir`)
/// atomically: a temporary file, fsync, rename, fsync of the directory.
pub(crate) fn write_atomic(dir_fd: &OwnedFd, dir: &Path, name: &str, data: &[u8]) -> Result<()> {
    let tmp = format!("{name}.tmp");
    let shown = dir.join(name);
    let _ = rustix::fs::unlinkat(dir_fd, tmp.as_str(), AtFlags::empty());
    let fd = rustix::fs::openat(
        dir_fd,
        tmp.as_str(),
        OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL | OFlags::NOFOLLOW | OFlags::CLOEXEC,
        Mode::from_raw_mode(0o600),
    )
    .map_err(|e| io("create", &shown, e))?;
    let mut f = std::io::BufWriter::new(std::fs::File::from(fd));
    f.write_all(data).map_err(|e| io("write", &shown, e))?;
    let f = f
        .into_inner()
        .map_err(|e| io("write", &shown, e.into_error()))?;
    f.sync_all().map_err(|e| io("sync", &shown, e))?;
    rustix::fs::renameat(dir_fd, tmp.as_str(), dir_fd, name)
        .map_err(|e| io("rename", &shown, e))?;
    rustix::fs::fsync(dir_fd).map_err(|e| io("sync", dir, e))
}

/// Reads the state file: `Ok(None)` when absent.
fn read_state(work_fd: &OwnedFd) -> std::result::Result<Option<Phase>, String> {
    let fd = match rustix::fs::openat(
        work_fd,
        STATE_FILE,
        OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
        Mode::empty(),
    ) {
        Ok(fd) => fd,
        Err(Errno::NOENT) => return Ok(None),
        Err(e) => return Err(format!("cannot open the state file: {e}")),
    };
    let mut text = String::new();
    use std::io::Read;
    std::fs::File::from(fd)
        .take(4096)
        .read_to_string(&mut text)
        .map_err(|e| format!("cannot read the state file: {e}"))?;
    let mut lines = text.lines();
    if lines.next() != Some(STATE_MAGIC) {
        return Err("the state file is not fscrypt-rs's".into());
    }
    lines
        .find_map(|l| l.strip_prefix("phase="))
        .and_then(Phase::parse)
        .map(Some)
        .ok_or_else(|| "the state file names no known phase".into())
}

/// `/proc/self/fd/N` of `fd`: a path through which path-based calls
/// (xattrs) reach exactly the inode of `fd`, also for `O_PATH` fds of
/// symlinks and special files.
pub(crate) fn proc_path(fd: &OwnedFd) -> String {
    format!("/proc/self/fd/{}", fd.as_raw_fd())
}
