//! The per-entry checks of the walk: names, regular files, directories
//! (recursing through [`Walker::check_dir`]) and symlinks.

use super::*;
use crate::integrity::generations::slot;

impl Walker<'_> {
    /// Checks a ciphertext name: its length against the padding, and with
    /// the key that it decrypts and re-encrypts to itself. Returns the name
    /// as the mount shows it (plaintext with the key, no-key name without).
    pub(super) fn check_name(
        &mut self,
        ct: &[u8],
        dir: Option<&InodeCrypt>,
        backing: &str,
        d: &Dir<'_>,
    ) -> Option<String> {
        let pad = self.policy.flags.padding();
        if ct.len() < 16
            || ct.len() > NAME_MAX
            || (ct.len() != NAME_MAX && !ct.len().is_multiple_of(pad))
        {
            self.push(
                Kind::BadNameLength,
                backing.to_owned(),
                None,
                format!(
                    "a {}-byte ciphertext name, which the policy's {pad}-byte padding cannot produce",
                    ct.len()
                ),
                Action::NotRepaired("a damaged name: the entry is not listed through a mount; rename it there from a backup copy"),
            );
            return None;
        }
        let Some(dir) = dir else {
            let nk = fscrypt::hooks::present_entry(None, ct, 0, 0).ok()?;
            return Some(show_bytes(&nk));
        };
        let plain = match fscrypt::hooks::present_entry(Some(dir), ct, 0, 0) {
            Ok(p) => p,
            Err(e) => {
                let nk = fscrypt::nokey::encode(ct, 0, 0).to_string();
                self.push(
                    Kind::UndecryptableName,
                    backing.to_owned(),
                    join_plain(&d.plain, &format!("<no-key {nk}>")),
                    format!("the name does not decrypt: {e}"),
                    Action::NotRepaired("a damaged name: the entry is not listed through a mount"),
                );
                return None;
            }
        };
        match dir.encrypt_filename(&plain[..]) {
            Ok(again) if *again == *ct => Some(show_bytes(&plain)),
            _ => {
                self.push(
                    Kind::NonCanonicalName,
                    backing.to_owned(),
                    join_plain(&d.plain, &show_bytes(&plain)),
                    "the name decrypts but does not re-encrypt to itself (not written by fscrypt or the kernel)".into(),
                    Action::NotRepaired("lookups of this name fail through a mount: copy the object out by its listing and back under the same name"),
                );
                None
            }
        }
    }

    /// Checks a user entry (after its name). Returns whether it counts as
    /// a user entry of its directory (headerless files that a repair
    /// removes do not).
    pub(super) fn check_entry(
        &mut self,
        d: &Dir<'_>,
        name: &[u8],
        t: FileType,
        backing: String,
        path: Option<String>,
        long: bool,
    ) -> bool {
        let mut t = t;
        if t == FileType::Unknown {
            match rustix::fs::statat(d.fd, name, AtFlags::SYMLINK_NOFOLLOW) {
                Ok(st) => t = FileType::from_raw_mode(st.st_mode),
                Err(Errno::NOENT) => return false,
                Err(e) => {
                    self.unreadable(backing, path, "stat it", errno(e));
                    return true;
                }
            }
        }
        match t {
            FileType::RegularFile => self.check_file(d, name, backing, path, long),
            FileType::Directory => {
                self.check_subdir(d, name, backing, path);
                true
            }
            FileType::Symlink => {
                self.check_symlink(d, name, backing, path);
                true
            }
            _ => {
                self.report.stats.special += 1;
                true
            }
        }
    }

    fn check_file(
        &mut self,
        d: &Dir<'_>,
        name: &[u8],
        backing: String,
        path: Option<String>,
        long: bool,
    ) -> bool {
        self.report.stats.files += 1;
        let (f, st) = match open_regular(d.fd, name, false) {
            Ok(Some(x)) => x,
            // Changed type since the listing, or gone: nothing to check.
            Ok(None) | Err(Errno::NOENT) => return true,
            Err(e) => {
                self.unreadable(backing, path, "open it", errno(e));
                return true;
            }
        };
        let len = st.st_size as u64;
        if leftovers::is_headerless(len) {
            let fd = d.fd;
            let removed = self.fixable(
                Kind::HeaderlessFile,
                backing,
                path,
                "a 0-byte backing file: it never held a header (an interrupted create) and reads as an I/O error".into(),
                Fix::RemoveHeaderless,
                || {
                    rustix::fs::unlinkat(fd, name, AtFlags::empty()).map_err(errno)?;
                    if long {
                        let mut side = name.to_vec();
                        side.extend_from_slice(LONG_NAME_SUFFIX.as_bytes());
                        let _ = rustix::fs::unlinkat(fd, side.as_slice(), AtFlags::empty());
                    }
                    Ok(())
                },
            );
            // In a check, it would be removed; after a failed removal it stays.
            return self.opts.repair && !removed;
        }
        let b = match read_bounded(&f, HEADER_USED) {
            Ok(b) => b,
            Err(e) => {
                self.unreadable(backing, path, "read its header", e);
                return true;
            }
        };
        let h = match Header::parse_as(&b, HeaderKind::File, self.format) {
            Ok(h) => Some(h),
            // A sound header whose context bytes are no v2 context.
            Err(Corruption::BadContext) => None,
            Err(c) => {
                self.push(
                    corruption_kind(c),
                    backing,
                    path,
                    format!("file header: {c}"),
                    Action::NotRepaired(USER_DATA),
                );
                return true;
            }
        };
        let Some(h) = h.filter(|h| self.context_ok(Some(h.context)).is_some()) else {
            self.push(
                Kind::BadContext,
                backing,
                path,
                "file context invalid or of another policy".into(),
                Action::NotRepaired(USER_DATA),
            );
            return true;
        };
        if self.nonces.is_some() {
            // The file's generation-store slots: under this name, and the
            // nonce alone (a record past its binding limit).
            let n = h.context.nonce;
            let named = self.entry_binding(d, name).map(|b| slot(&n, &b));
            if let (Some(p), Some(nonces)) = (&path, &mut self.nonces) {
                nonces.extend(named.into_iter().chain([n]).map(|s| (p.clone(), s)));
            }
            return true;
        }
        if self.format == Format::V3 {
            // Format 3: the record, the length hint, every unit's tag and
            // the bindings (with the key; without it the header only).
            self.check_file_v3(d, name, (&f, &st), &h.context.nonce, backing, path);
            return true;
        }
        if self.format == Format::V2 {
            // Format 2: the length is the size; nothing can be stored past it.
            if layout::size_from_len_v2(len, self.du).is_err() {
                self.push(
                    Kind::BadLength,
                    backing,
                    path,
                    format!(
                        "backing length {len} encodes no size (format 2: 4096 + the size, plus one {}-byte data unit when the size is not a multiple of it)",
                        self.du
                    ),
                    Action::NotRepaired(USER_DATA),
                );
            }
            return true;
        }
        if len < HEADER_SIZE || !(len - HEADER_SIZE).is_multiple_of(self.du) {
            self.push(
                Kind::BadLength,
                backing,
                path,
                format!(
                    "backing length {len} is not 4096 + a multiple of the {}-byte data unit",
                    self.du
                ),
                Action::NotRepaired(USER_DATA),
            );
            return true;
        }
        let want = layout::backing_len_for(h.size, self.du);
        if len > want {
            let units = (len - want) / self.du;
            self.fixable(
                Kind::ExcessDataUnits,
                backing,
                path,
                format!(
                    "{units} data unit(s) stored past the size {} (an extending write whose size update was lost; never shown)",
                    h.size
                ),
                Fix::Truncate,
                || match open_regular(d.fd, name, true).map_err(errno)? {
                    Some((w, st2)) if st2.st_ino == st.st_ino => w.set_len(want),
                    _ => Err(io::Error::other("the file changed during the check")),
                },
            );
        }
        true
    }

    fn check_subdir(&mut self, d: &Dir<'_>, name: &[u8], backing: String, path: Option<String>) {
        if d.depth + 1 >= MAX_DEPTH {
            self.incomplete = true;
            self.push(
                Kind::TooDeep,
                backing,
                path,
                format!("nested deeper than {MAX_DEPTH} levels: not checked"),
                Action::NotRepaired("move it higher up through a mount"),
            );
            return;
        }
        let fd = match open_at(
            d.fd,
            name,
            OFlags::RDONLY | OFlags::DIRECTORY,
            Mode::empty(),
        ) {
            Ok(fd) => fd,
            Err(Errno::NOENT | Errno::NOTDIR | Errno::LOOP) => return,
            Err(e) => {
                self.incomplete = true;
                self.unreadable(backing, path, "open the directory", errno(e));
                return;
            }
        };
        let st = match rustix::fs::fstat(&fd) {
            Ok(st) => st,
            Err(e) => {
                self.incomplete = true;
                self.unreadable(backing, path, "stat the directory", errno(e));
                return;
            }
        };
        if st.st_dev != self.root_dev {
            self.incomplete = true;
            self.push(
                Kind::MountPoint,
                backing,
                path,
                "another filesystem is mounted here: not checked (a mount of the vault does not cross it either)".into(),
                Action::NotRepaired("unmount what is mounted on the backing directory"),
            );
            return;
        }
        self.check_dir(
            &Dir {
                fd: fd.as_fd(),
                backing,
                plain: path,
                depth: d.depth + 1,
                nonce: None,
            },
            st.st_ino,
        );
    }

    fn check_symlink(&mut self, d: &Dir<'_>, name: &[u8], backing: String, path: Option<String>) {
        self.report.stats.symlinks += 1;
        let target = match rustix::fs::readlinkat(d.fd, name, Vec::new()) {
            Ok(t) => t.into_bytes(),
            Err(Errno::NOENT | Errno::INVAL) => return,
            Err(e) => {
                self.unreadable(backing, path, "read the symlink", errno(e));
                return;
            }
        };
        let why = "the symlink's target is lost (readlink gives an I/O error): recreate the symlink through a mount";
        let decoded = if layout::is_symlink_marker(&target) {
            let Some(id) = layout::symlink_marker_id(&target) else {
                self.push(
                    Kind::BadSymlinkMarker,
                    backing,
                    path,
                    "a malformed fscrypt.symlink.* marker".into(),
                    Action::NotRepaired(why),
                );
                return;
            };
            self.referenced.insert(id.as_bytes().to_vec());
            let decoded = |b: &[u8]| match self.format {
                Format::V3 => symlinks::decode_store_object(self.mac_keys(), b),
                _ => layout::decode_store_object(b),
            };
            match self.read_store_object(id.as_bytes()) {
                Ok(Some(b)) => match decoded(&b) {
                    Ok((ctx, blob)) => (Some(ctx), blob),
                    // A sound object whose context bytes are no v2 context.
                    Err(Corruption::BadContext) => (None, Vec::new()),
                    Err(Corruption::BadSymlinkTag) => {
                        self.push(
                            Kind::BadSymlinkTag,
                            join(SYMLINK_STORE_DIR, id),
                            path,
                            format!("store object of {backing}: the target's tag does not verify (changed bytes)"),
                            Action::NotRepaired(why),
                        );
                        return;
                    }
                    Err(c) => {
                        self.push(
                            Kind::BadStoreObject,
                            join(SYMLINK_STORE_DIR, id),
                            path,
                            format!("store object of {backing}: {c}"),
                            Action::NotRepaired(why),
                        );
                        return;
                    }
                },
                Ok(None) => {
                    self.push(
                        Kind::MissingStoreObject,
                        backing,
                        path,
                        format!("the marker names {SYMLINK_STORE_DIR}/{id}, which does not exist"),
                        Action::NotRepaired(why),
                    );
                    return;
                }
                Err(e) => {
                    self.unreadable(
                        join(SYMLINK_STORE_DIR, id),
                        path,
                        "read the store object",
                        e,
                    );
                    return;
                }
            }
        } else {
            let r = match self.format {
                Format::V3 => symlinks::decode_symlink(self.mac_keys(), &target),
                _ => layout::decode_symlink(&target),
            };
            match r {
                Ok((ctx, blob)) => (Some(ctx), blob),
                // A sound encoding whose context bytes are no v2 context.
                Err(Corruption::BadContext) => (None, Vec::new()),
                Err(Corruption::BadSymlinkTag) => {
                    self.push(
                        Kind::BadSymlinkTag,
                        backing,
                        path,
                        "the symlink target's tag does not verify (changed bytes)".into(),
                        Action::NotRepaired(why),
                    );
                    return;
                }
                Err(c) => {
                    self.push(
                        Kind::BadSymlink,
                        backing,
                        path,
                        format!("symlink target: {c}"),
                        Action::NotRepaired(why),
                    );
                    return;
                }
            }
        };
        let (ctx, blob) = decoded;
        let Some(c) = self.context_ok(ctx) else {
            self.push(
                Kind::BadContext,
                backing,
                path,
                "symlink context invalid or of another policy".into(),
                Action::NotRepaired(why),
            );
            return;
        };
        let ino = rustix::fs::statat(d.fd, name, AtFlags::SYMLINK_NOFOLLOW)
            .map(|s| s.st_ino)
            .unwrap_or(0);
        let crypt = match self.crypt(&c, CryptType::Symlink, ino) {
            Some(Ok(k)) => Some(k),
            Some(Err(e)) => {
                self.push(
                    Kind::BadContext,
                    backing,
                    path,
                    format!("the symlink key cannot be derived: {e}"),
                    Action::NotRepaired(why),
                );
                return;
            }
            None => None,
        };
        // The blob's framing first (the no-key view needs only that), then
        // with the key its decryption.
        if let Err(e) = fscrypt::hooks::get_symlink(None, &blob) {
            self.push(
                Kind::BadSymlink,
                backing,
                path,
                format!("symlink target: {e}"),
                Action::NotRepaired(why),
            );
        } else if let Some(k) = &crypt
            && let Err(e) = fscrypt::hooks::get_symlink(Some(k), &blob)
        {
            self.push(
                Kind::UndecryptableSymlink,
                backing,
                path,
                format!("symlink target does not decrypt: {e}"),
                Action::NotRepaired(why),
            );
        }
    }
}
