//! The content store and the clean marker: the store's objects against
//! the markers that reference them, and the marker recovery writes.

use super::*;

impl Walker<'_> {
    pub(super) fn open_store(&mut self, root: BorrowedFd<'_>) {
        match open_at(
            root,
            SYMLINK_STORE_DIR.as_bytes(),
            OFlags::RDONLY | OFlags::DIRECTORY,
            Mode::empty(),
        ) {
            Ok(fd) => self.store = Some(fd),
            Err(Errno::NOENT) => {}
            Err(e) => {
                self.incomplete = true;
                self.push(
                    Kind::BadSymlinkStore,
                    SYMLINK_STORE_DIR.to_owned(),
                    None,
                    format!(
                        "the symlink store cannot be opened as a directory: {}",
                        errno(e)
                    ),
                    Action::NotRepaired(
                        "long symlinks read as I/O errors; restore fscrypt.symlinks from a backup",
                    ),
                );
            }
        }
    }

    /// The bytes of store object `id` (bounded), `None` when it is absent.
    pub(super) fn read_store_object(&self, id: &[u8]) -> io::Result<Option<Vec<u8>>> {
        let Some(store) = &self.store else {
            return Ok(None);
        };
        match open_regular(store.as_fd(), id, false) {
            Ok(Some((f, _))) => {
                read_bounded(&f, 12 + CONTEXT_SIZE + SYMLINK_MAX_BLOB_STORED + 16 + 1).map(Some)
            }
            Ok(None) => Ok(Some(Vec::new())),
            Err(Errno::NOENT) => Ok(None),
            Err(e) => Err(errno(e)),
        }
    }

    /// The store's own entries: temporaries, unreferenced objects, foreign
    /// names (referenced objects were checked with their symlinks).
    pub(super) fn check_store(&mut self) {
        let Some(store) = self.store.take() else {
            return;
        };
        let entries = match leftovers::dir_entries(store.as_fd()) {
            Ok(mut e) => {
                e.sort_unstable_by(|a, b| a.0.cmp(&b.0));
                e
            }
            Err(e) => {
                self.unreadable(
                    SYMLINK_STORE_DIR.to_owned(),
                    None,
                    "list the symlink store",
                    e,
                );
                return;
            }
        };
        for (name, t) in entries {
            let backing = join(SYMLINK_STORE_DIR, &show_bytes(&name));
            if leftovers::is_temporary(&name) {
                let fd = store.as_fd();
                self.fixable(
                    Kind::Temporary,
                    backing,
                    None,
                    "a store object whose creation was interrupted".into(),
                    if t == FileType::Directory {
                        Fix::RemoveTree
                    } else {
                        Fix::Remove
                    },
                    || leftovers::remove_entry(fd, &name, t),
                );
            } else if layout::is_store_id(&name) {
                self.report.stats.store_objects += 1;
                if self.referenced.contains(&name) {
                    continue;
                }
                let detail = "a long symlink target no symlink names (its symlink was removed or never created)".to_owned();
                if self.incomplete {
                    self.push(
                        Kind::UnreferencedStoreObject,
                        backing,
                        None,
                        detail,
                        Action::NotRepaired("part of the tree could not be checked, and a symlink there may name it"),
                    );
                    self.recovery_left = true;
                } else {
                    let fd = store.as_fd();
                    self.fixable(
                        Kind::UnreferencedStoreObject,
                        backing,
                        None,
                        detail,
                        Fix::Remove,
                        || leftovers::remove_entry(fd, &name, t),
                    );
                }
            } else {
                self.push(
                    Kind::UnknownInternalName,
                    backing,
                    None,
                    "a name in the symlink store that is not an object id".into(),
                    Action::NotRepaired(
                        "written by a newer version or by hand: leave it or remove it by hand",
                    ),
                );
            }
        }
    }

    /// Whether the walk found nothing but the root (no entry, no store).
    fn is_empty_vault(&self) -> bool {
        let s = &self.report.stats;
        s.directories == 1
            && s.files == 0
            && s.symlinks == 0
            && s.special == 0
            && s.store_objects == 0
            && self.report.problems.is_empty()
    }

    /// The clean-unmount marker: a regular file in the root. Missing, it is
    /// written by a repair once every leftover a recovery pass would remove
    /// is gone (so the next mount can skip that pass).
    pub(super) fn check_clean_marker(&mut self, root: BorrowedFd<'_>) {
        match rustix::fs::statat(root, CLEAN_MARKER, AtFlags::SYMLINK_NOFOLLOW) {
            Ok(st) if FileType::from_raw_mode(st.st_mode) == FileType::RegularFile => {}
            Ok(_) => self.push(
                Kind::WrongType,
                CLEAN_MARKER.to_owned(),
                None,
                "the clean-unmount marker is not a regular file".into(),
                Action::NotRepaired(
                    "remove it by hand; the next mount then runs its recovery pass",
                ),
            ),
            // An empty vault (as `init` leaves it) has nothing to recover.
            Err(Errno::NOENT) if self.opts.check_clean_marker && !self.is_empty_vault() => {
                let detail = "no clean-unmount marker: the last mount did not end cleanly (or the vault predates it); the next mount runs its recovery pass".to_owned();
                if self.recovery_left {
                    self.push(
                        Kind::MissingCleanMarker,
                        CLEAN_MARKER.to_owned(),
                        None,
                        detail,
                        Action::NotRepaired(
                            "leftovers remain that the next mount's recovery pass should see",
                        ),
                    );
                } else {
                    self.fixable(
                        Kind::MissingCleanMarker,
                        CLEAN_MARKER.to_owned(),
                        None,
                        detail,
                        Fix::WriteCleanMarker,
                        || {
                            let f = open_at(
                                root,
                                CLEAN_MARKER.as_bytes(),
                                OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL,
                                Mode::from_raw_mode(0o600),
                            )
                            .map_err(errno)?;
                            drop(f);
                            rustix::fs::fsync(root).map_err(errno)
                        },
                    );
                }
            }
            Err(Errno::NOENT) => {}
            Err(e) => self.unreadable(
                CLEAN_MARKER.to_owned(),
                None,
                "stat the clean marker",
                errno(e),
            ),
        }
    }
}
