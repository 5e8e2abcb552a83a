//! What this machine remembers of an authenticated vault, so a file put
//! back to an earlier version of itself is caught (`docs/vault-format.md`
//! §4b.9): the highest record generation seen per
//! file and name, under a 16-byte [`slot`].
//!
//! Kept outside the backing store, in a directory of the user's (0700)
//! holding one append-only log, `generations` (0600): 24-byte entries
//! `slot (16) ‖ le64(generation)`, the last entry of a slot winning and
//! generation 0 meaning "forgotten" (an accepted restore). A torn last
//! entry (a crash mid-append) is cut off when the store is opened. [`GenerationStore::compact`]
//! rewrites the log with one entry per file (temp file, `fsync`, rename),
//! at unmount. Appends are not `fsync`ed: after a power loss the newest
//! entries may be missing, which only weakens detection for those files.

#![forbid(unsafe_code)]

use std::collections::HashMap;
use std::fs::{File, OpenOptions};
use std::io::{self, Read, Write};
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use fscrypt::{KeyIdentifier, NONCE_SIZE};

/// The slot under which the generations of a file of nonce `nonce` are
/// remembered for its name of binding `binding` (`docs/vault-format.md`
/// §4b.5): `nonce XOR binding`; a record that keeps no bindings
/// ([`super::record::FLAG_MANY_LINKS`]) uses `binding = 0`, i.e. the nonce.
///
/// Per file *and name*: a sync tool's conflict copy shares its original's
/// nonce, and once kept under a name of its own it changes apart from it;
/// a counter per nonce would make the one look rolled back after the
/// other was written.
pub fn slot(nonce: &[u8; NONCE_SIZE], binding: &[u8; NONCE_SIZE]) -> [u8; NONCE_SIZE] {
    std::array::from_fn(|i| nonce[i] ^ binding[i])
}

/// The log's file name inside the store directory.
pub const LOG_NAME: &str = "generations";

/// The environment variable that moves every vault's store (see
/// [`GenerationStore::default_dir`]).
pub const STATE_DIR_ENV: &str = "FSCRYPT_RS_STATE_DIR";

const ENTRY: usize = NONCE_SIZE + 8;

/// What a file's record generation says against what this machine saw.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Seen {
    /// Never seen, or not older than the highest generation seen.
    Fine,
    /// Older than a generation seen before: the file was rolled back.
    RolledBack {
        /// The highest generation seen.
        seen: u64,
    },
}

/// The per-machine generation memory of one vault. `Send + Sync`.
#[derive(Debug)]
pub struct GenerationStore {
    dir: PathBuf,
    state: Mutex<State>,
}

#[derive(Debug)]
struct State {
    seen: HashMap<[u8; NONCE_SIZE], u64>,
    log: File,
}

fn open_log(dir: &Path) -> io::Result<File> {
    OpenOptions::new()
        .read(true)
        .append(true)
        .create(true)
        .mode(0o600)
        .custom_flags(nofollow_cloexec())
        .open(dir.join(LOG_NAME))
}

/// `O_NOFOLLOW | O_CLOEXEC`: the log is never reached through a symlink.
fn nofollow_cloexec() -> i32 {
    (rustix::fs::OFlags::NOFOLLOW | rustix::fs::OFlags::CLOEXEC).bits() as i32
}

impl GenerationStore {
    /// The default store directory of the vault with master key identifier
    /// `id`: `$FSCRYPT_RS_STATE_DIR/vaults/<id>` when that variable is set
    /// (tests, and users who keep state elsewhere), else
    /// `$XDG_STATE_HOME/fscrypt-rs/vaults/<id>` (else
    /// `$HOME/.local/state/...`), or `/var/lib/fscrypt-rs/vaults/<id>` for
    /// root. `None` when none of these is set for a non-root user.
    pub fn default_dir(id: &KeyIdentifier) -> Option<PathBuf> {
        if let Some(s) = std::env::var_os(STATE_DIR_ENV).filter(|s| !s.is_empty()) {
            return Some(PathBuf::from(s).join("vaults").join(id.to_string()));
        }
        let base = if rustix::process::geteuid().is_root() {
            PathBuf::from("/var/lib")
        } else if let Some(s) = std::env::var_os("XDG_STATE_HOME").filter(|s| !s.is_empty()) {
            PathBuf::from(s)
        } else {
            PathBuf::from(std::env::var_os("HOME")?).join(".local/state")
        };
        Some(base.join("fscrypt-rs/vaults").join(id.to_string()))
    }

    /// Opens (creating, 0700 and 0600) the store in `dir` and replays its
    /// log.
    ///
    /// # Errors
    /// I/O errors creating or reading the directory or log (a symlink in
    /// place of the log gives `ELOOP`).
    pub fn open(dir: &Path) -> io::Result<GenerationStore> {
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(dir)?;
        let mut log = open_log(dir)?;
        let mut bytes = Vec::new();
        log.read_to_end(&mut bytes)?;
        let whole = bytes.len() - bytes.len() % ENTRY;
        if whole != bytes.len() {
            // A torn last entry: cut it off so later appends stay aligned.
            log.set_len(whole as u64)?;
        }
        let mut seen = HashMap::new();
        for e in bytes.chunks_exact(ENTRY) {
            let (nonce, generation) = split(e);
            if generation == 0 {
                seen.remove(&nonce);
            } else {
                seen.insert(nonce, generation);
            }
        }
        Ok(GenerationStore {
            dir: dir.to_path_buf(),
            state: Mutex::new(State { seen, log }),
        })
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Compares a file's record generation with what was seen in `slot`
    /// ([`slot`]).
    pub fn check(&self, slot: &[u8; NONCE_SIZE], generation: u64) -> Seen {
        match self.lock().seen.get(slot) {
            Some(&seen) if generation < seen => Seen::RolledBack { seen },
            _ => Seen::Fine,
        }
    }

    /// Remembers `generation` in `slot` when it is higher than what was
    /// seen (appending one log entry).
    ///
    /// # Errors
    /// I/O errors appending to the log; the memory is updated anyway.
    pub fn saw(&self, slot: &[u8; NONCE_SIZE], generation: u64) -> io::Result<()> {
        let mut st = self.lock();
        if st.seen.get(slot).is_some_and(|&s| s >= generation) || generation == 0 {
            return Ok(());
        }
        st.seen.insert(*slot, generation);
        st.log.write_all(&entry(slot, generation))
    }

    /// Forgets the slots (an intentional restore is accepted: the file's
    /// current generation becomes the one remembered when next seen).
    ///
    /// # Errors
    /// I/O errors appending to the log.
    pub fn forget(&self, slots: &[[u8; NONCE_SIZE]]) -> io::Result<()> {
        let mut st = self.lock();
        let mut out = Vec::with_capacity(slots.len() * ENTRY);
        for n in slots {
            if st.seen.remove(n).is_some() {
                out.extend_from_slice(&entry(n, 0));
            }
        }
        st.log.write_all(&out)
    }

    /// Rewrites the log with one entry per remembered file: a temp file in
    /// the store directory, `fsync`, rename over the log, `fsync` of the
    /// directory. Later appends go to the new log.
    ///
    /// # Errors
    /// I/O errors; the old log stays in place on any of them.
    pub fn compact(&self) -> io::Result<()> {
        let mut st = self.lock();
        let tmp = self
            .dir
            .join(format!("{LOG_NAME}.tmp.{}", std::process::id()));
        let mut bytes = Vec::with_capacity(st.seen.len() * ENTRY);
        for (n, g) in &st.seen {
            bytes.extend_from_slice(&entry(n, *g));
        }
        let written = (|| {
            let mut f = OpenOptions::new()
                .write(true)
                .create_new(true)
                .mode(0o600)
                .custom_flags(nofollow_cloexec())
                .open(&tmp)?;
            f.write_all(&bytes)?;
            f.sync_all()?;
            std::fs::rename(&tmp, self.dir.join(LOG_NAME))?;
            File::open(&self.dir)?.sync_all()
        })();
        if written.is_err() {
            let _ = std::fs::remove_file(&tmp);
            return written;
        }
        st.log = open_log(&self.dir)?;
        Ok(())
    }
}

fn entry(nonce: &[u8; NONCE_SIZE], generation: u64) -> [u8; ENTRY] {
    let mut e = [0u8; ENTRY];
    e[..NONCE_SIZE].copy_from_slice(nonce);
    e[NONCE_SIZE..].copy_from_slice(&generation.to_le_bytes());
    e
}

fn split(e: &[u8]) -> ([u8; NONCE_SIZE], u64) {
    let mut n = [0u8; NONCE_SIZE];
    n.copy_from_slice(&e[..NONCE_SIZE]);
    let mut g = [0u8; 8];
    g.copy_from_slice(&e[NONCE_SIZE..ENTRY]);
    (n, u64::from_le_bytes(g))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    fn tempdir() -> PathBuf {
        let d = std::env::temp_dir().join(format!(
            "fscrypt-gen-{}-{:?}",
            std::process::id(),
            std::thread::current().id()
        ));
        let _ = std::fs::remove_dir_all(&d);
        d
    }

    #[test]
    fn remembers_across_reopen_and_forgets_on_request() {
        let d = tempdir();
        let (a, b) = ([1u8; 16], [2u8; 16]);
        {
            let s = GenerationStore::open(&d).unwrap();
            assert_eq!(s.check(&a, 1), Seen::Fine);
            s.saw(&a, 5).unwrap();
            s.saw(&a, 3).unwrap(); // lower: ignored
            s.saw(&b, 2).unwrap();
            assert_eq!(s.check(&a, 4), Seen::RolledBack { seen: 5 });
            assert_eq!(s.check(&a, 5), Seen::Fine);
        }
        let s = GenerationStore::open(&d).unwrap();
        assert_eq!(s.check(&a, 4), Seen::RolledBack { seen: 5 });
        assert_eq!(s.check(&b, 1), Seen::RolledBack { seen: 2 });
        s.forget(&[a]).unwrap();
        assert_eq!(s.check(&a, 1), Seen::Fine);
        drop(s);
        let s = GenerationStore::open(&d).unwrap();
        assert_eq!(s.check(&a, 1), Seen::Fine);
        assert_eq!(s.check(&b, 1), Seen::RolledBack { seen: 2 });
        let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode(&d), 0o700);
        assert_eq!(mode(&d.join(LOG_NAME)), 0o600);
        std::fs::remove_dir_all(&d).unwrap();
    }

    #[test]
    fn compaction_keeps_one_entry_per_file_and_a_torn_tail_is_ignored() {
        let d = tempdir();
        let a = [7u8; 16];
        let s = GenerationStore::open(&d).unwrap();
        for g in 1..=10 {
            s.saw(&a, g).unwrap();
        }
        let log = d.join(LOG_NAME);
        assert_eq!(std::fs::metadata(&log).unwrap().len(), 10 * ENTRY as u64);
        s.compact().unwrap();
        assert_eq!(std::fs::metadata(&log).unwrap().len(), ENTRY as u64);
        s.saw(&a, 11).unwrap();
        drop(s);
        // A crash mid-append leaves part of an entry.
        let mut f = OpenOptions::new().append(true).open(&log).unwrap();
        f.write_all(&[9u8; 10]).unwrap();
        let s = GenerationStore::open(&d).unwrap();
        assert_eq!(s.check(&a, 10), Seen::RolledBack { seen: 11 });
        // Appends after the cut stay aligned.
        s.saw(&a, 12).unwrap();
        drop(s);
        let s = GenerationStore::open(&d).unwrap();
        assert_eq!(s.check(&a, 11), Seen::RolledBack { seen: 12 });
        std::fs::remove_dir_all(&d).unwrap();
    }

    #[test]
    fn a_symlinked_log_is_refused() {
        let d = tempdir();
        std::fs::create_dir_all(&d).unwrap();
        std::os::unix::fs::symlink("/etc/passwd", d.join(LOG_NAME)).unwrap();
        let err = GenerationStore::open(&d).unwrap_err();
        assert_eq!(
            err.raw_os_error(),
            Some(rustix::io::Errno::LOOP.raw_os_error())
        );
        std::fs::remove_dir_all(&d).unwrap();
    }
}
