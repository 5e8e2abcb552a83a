//! The format 3 checks of a regular file (`docs/vault-format.md`
//! §4b.3–§4b.5, §4b.10, §12): its A/B record,
//! the backing length against the record's size, every data unit inside
//! the size against its two tag slots, and the record's bindings against
//! the names the walk finds the file under. Needs the key (the MAC keys
//! come from the master key; no per-file key is derived: tags are over
//! ciphertext).
//!
//! Repairs (`--repair`) are those of crash leftovers: a backing file longer
//! than the hint while the record's *writing* flag is set is cut back to
//! the hint (and the slots of the cut units cleared), a unit that fails its
//! tag (torn by a power loss, or tampered: fsck cannot tell) becomes a hole
//! (punched, its slot pair cleared), and bindings no name matches are
//! dropped from the record. A bad record, a bad length and an unbound name
//! are never repaired.

use std::collections::HashMap;

use super::*;
use crate::integrity::record::{FileRecord, RECORD_A, RECORD_B, RECORD_SPACE};
use crate::integrity::units::{self, GROUP_UNITS, SLOT_PAIR_SIZE, SlotPair, TAG_BLOCK_SIZE};
use crate::integrity::{IntegrityKeys, MacKind};

/// Units of one file reported one by one; the rest are counted in one
/// more problem (a file damaged all over would otherwise flood the report).
const MAX_UNIT_REPORTS: usize = 16;

const TORN: &str = "fsck cannot tell a unit torn by a power loss from a tampered one; --repair makes it a hole (it then reads as zeros): restore the file from a backup if its contents matter";
const MOVED: &str = "the backing file was moved, renamed or swapped outside the vault (it reads as an I/O error): move it back under its own name, or restore it from a backup";

/// The format 3 state of a walk: the vault's MAC keys and the files with
/// several links, whose bindings are judged once every link was seen.
pub(super) struct Integrity {
    keys: IntegrityKeys,
    linked: HashMap<(u64, u64), Linked>,
}

/// A file with several links, between its sightings.
struct Linked {
    backing: String,
    path: Option<String>,
    nonce: [u8; 16],
    record: FileRecord,
    next: u64,
    nlink: u64,
    seen: u64,
    matched: Vec<bool>,
    /// A name was not bound, or its parent's nonce was unknown: stale
    /// bindings are not judged.
    undecided: bool,
}

/// How the backing length compares with the record's size.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Length {
    /// The hint of the size.
    Hint,
    /// Longer than the hint while the record's writing flag is set: what a
    /// crash in a write session leaves.
    Leftover { hint: u64 },
    /// Anything else (or a size that has no hint).
    Bad { hint: Option<u64> },
}

/// Why a unit fails.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum BadUnit {
    /// Neither slot verifies the unit's bytes.
    Torn,
    /// Non-zero bytes under an empty slot pair.
    DataUnderEmpty,
}

/// What [`check_contents`] found in one file.
#[derive(Debug)]
struct Contents {
    record: FileRecord,
    /// Offset of the record slot the next record write goes to.
    next: u64,
    length: Length,
    /// The first [`MAX_UNIT_REPORTS`] bad units.
    bad: Vec<(u64, BadUnit)>,
    /// How many units are bad in all.
    bad_total: u64,
}

/// Whether unit `index` (its stored bytes `unit`) verifies under its slot
/// pair `pair`: a hole never written (empty pair, zero bytes), or a slot,
/// newer first, whose tag is the unit's MAC (an empty payload for a hole
/// slot).
fn unit_ok(
    keys: &IntegrityKeys,
    nonce: &[u8; 16],
    index: u64,
    pair: &SlotPair,
    unit: &[u8],
) -> Result<(), BadUnit> {
    if pair.is_empty() {
        return if unit.iter().all(|&b| b == 0) {
            Ok(())
        } else {
            Err(BadUnit::DataUnderEmpty)
        };
    }
    let ok = pair.by_age().any(|(_, s)| {
        let payload: &[u8] = if s.is_hole() { &[] } else { unit };
        keys.verify(MacKind::DataUnit, s.state, index, nonce, payload, &s.tag)
    });
    if ok { Ok(()) } else { Err(BadUnit::Torn) }
}

/// Checks one format 3 file: `Ok(None)` when neither record verifies.
fn check_contents(
    keys: &IntegrityKeys,
    f: &File,
    len: u64,
    du: u64,
    nonce: &[u8; 16],
) -> io::Result<Option<Contents>> {
    let mut a = vec![0u8; RECORD_SPACE];
    let mut b = vec![0u8; RECORD_SPACE];
    layout::read_zero_filled(f, RECORD_A, &mut a)?;
    layout::read_zero_filled(f, RECORD_B, &mut b)?;
    let Ok((record, next)) = FileRecord::current(&a, &b, keys, nonce) else {
        return Ok(None);
    };
    let hint = units::len_for_size(record.size, du);
    let length = match hint {
        Some(h) if h == len => Length::Hint,
        Some(h) if len > h && record.session_open() => Length::Leftover { hint: h },
        h => Length::Bad { hint: h },
    };
    let mut c = Contents {
        record,
        next,
        length,
        bad: Vec::new(),
        bad_total: 0,
    };
    // Units inside the size, as far as the backing file holds any of them
    // (a shorter file is reported by its length).
    let n = c.record.size.div_ceil(du);
    let mut group_buf = vec![0u8; units::group_size(du) as usize];
    let mut g = 0u64;
    while g * GROUP_UNITS < n {
        let Some(start) = units::tag_block_offset(g, du) else {
            break;
        };
        if start >= len {
            break;
        }
        layout::read_zero_filled(f, start, &mut group_buf)?;
        let (tags, data) = group_buf.split_at(TAG_BLOCK_SIZE as usize);
        for j in 0..GROUP_UNITS.min(n - g * GROUP_UNITS) {
            let i = g * GROUP_UNITS + j;
            let mut pb = [0u8; SLOT_PAIR_SIZE];
            let at = j as usize * SLOT_PAIR_SIZE;
            pb.copy_from_slice(&tags[at..at + SLOT_PAIR_SIZE]);
            let unit = &data[(j * du) as usize..((j + 1) * du) as usize];
            if let Err(why) = unit_ok(keys, nonce, i, &SlotPair::parse(&pb), unit) {
                c.bad_total += 1;
                if c.bad.len() < MAX_UNIT_REPORTS {
                    c.bad.push((i, why));
                }
            }
        }
        g += 1;
    }
    Ok(Some(c))
}

/// Opens `name` in `dir` for writing, when it is still the file `st`.
fn reopen_rw(dir: BorrowedFd<'_>, name: &[u8], st: &Stat) -> io::Result<File> {
    match open_regular(dir, name, true).map_err(errno)? {
        Some((w, st2)) if st2.st_ino == st.st_ino && st2.st_dev == st.st_dev => Ok(w),
        _ => Err(io::Error::other("the file changed during the check")),
    }
}

/// Cuts a crash leftover back to `hint` (the record's size `size`): the
/// length, then zeros over the slots of the cut units in the last group
/// kept and over the trailer, as the engine leaves a truncated file.
fn cut_to_hint(w: &File, size: u64, hint: u64, du: u64) -> io::Result<()> {
    w.set_len(hint)?;
    let n = size.div_ceil(du);
    if n > 0 {
        if !n.is_multiple_of(GROUP_UNITS) {
            let from = units::slot_pair_offset(n, du).ok_or(io::ErrorKind::InvalidInput)?;
            let end = units::tag_block_offset(n / GROUP_UNITS, du)
                .ok_or(io::ErrorKind::InvalidInput)?
                + TAG_BLOCK_SIZE;
            w.write_all_at(&vec![0u8; (end - from) as usize], from)?;
        }
        let last_end = units::unit_offset(n - 1, du).ok_or(io::ErrorKind::InvalidInput)? + du;
        if hint > last_end {
            w.write_all_at(&vec![0u8; (hint - last_end) as usize], last_end)?;
        }
    }
    w.sync_all()
}

/// Makes unit `index` a hole: punches it (zeros written where punching is
/// not supported), then clears its slot pair, so that it reads as a unit
/// never written (zeros).
fn clear_unit(w: &File, index: u64, du: u64) -> io::Result<()> {
    use rustix::fs::FallocateFlags;
    let off = units::unit_offset(index, du).ok_or(io::ErrorKind::InvalidInput)?;
    let slots = units::slot_pair_offset(index, du).ok_or(io::ErrorKind::InvalidInput)?;
    let len = w.metadata()?.len();
    if off < len {
        let punched = rustix::fs::fallocate(
            w,
            FallocateFlags::PUNCH_HOLE | FallocateFlags::KEEP_SIZE,
            off,
            du,
        );
        if punched.is_err() {
            let n = du.min(len - off);
            w.write_all_at(&vec![0u8; n as usize], off)?;
        }
    }
    w.write_all_at(&[0u8; SLOT_PAIR_SIZE], slots)?;
    w.sync_all()
}

/// Writes `record` (its `seq` already advanced) into the record slot at
/// `at`, padded with zeros to the slot's size.
fn write_record(
    w: &File,
    keys: &IntegrityKeys,
    nonce: &[u8; 16],
    record: &FileRecord,
    at: u64,
) -> io::Result<()> {
    let mut b = record
        .encode(keys, nonce)
        .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))?;
    b.resize(RECORD_SPACE, 0);
    w.write_all_at(&b, at)?;
    w.sync_all()
}

/// The record `r` without the bindings `matched` says no name has, with
/// the next sequence number.
fn without_stale(r: &FileRecord, matched: &[bool]) -> FileRecord {
    FileRecord {
        seq: r.seq.wrapping_add(1),
        bindings: r
            .bindings
            .iter()
            .zip(matched)
            .filter(|(_, m)| **m)
            .map(|(b, _)| *b)
            .collect(),
        ..r.clone()
    }
}

impl Walker<'_> {
    /// Format 3 with the key: the MAC keys that check tags of units,
    /// records, names and symlink targets.
    /// The binding of a file to its entry `name` in `d` (a conflict copy
    /// is bound under the name the vault wrote), when the MAC keys and the
    /// directory's nonce are known.
    pub(super) fn entry_binding(&self, d: &Dir<'_>, name: &[u8]) -> Option<[u8; 16]> {
        let keys = self.mac_keys()?;
        let written = match layout::classify_entry(name).1 {
            Some(c) => c.original,
            None => name.to_vec(),
        };
        Some(keys.binding(&d.nonce?, &written))
    }

    pub(super) fn mac_keys(&self) -> Option<&IntegrityKeys> {
        self.integrity.as_ref().map(|i| &i.keys)
    }

    /// Derives the MAC keys of a format 3 vault when the key is given.
    pub(super) fn start_integrity(&mut self) {
        if self.format != Format::V3 {
            return;
        }
        let Some(master) = self.master else { return };
        match IntegrityKeys::derive(master) {
            Ok(keys) => {
                self.integrity = Some(Integrity {
                    keys,
                    linked: HashMap::new(),
                })
            }
            Err(e) => self.push(
                Kind::Unreadable,
                String::new(),
                Some("/".into()),
                format!("the vault's MAC keys cannot be derived ({e}): no file's tags are checked"),
                Action::NotRepaired("check the crypto providers with fscrypt-rs providers"),
            ),
        }
    }

    fn push_unit(
        &mut self,
        kind: Kind,
        backing: &str,
        path: &Option<String>,
        unit: u64,
        detail: String,
        action: Action,
    ) {
        self.report.problems.push(Problem {
            kind,
            backing: backing.to_owned(),
            path: path.clone(),
            detail,
            action,
            unit: Some(unit),
        });
    }

    /// The format 3 checks of the regular file `name` of `d` (opened as
    /// `file`, its header's nonce `nonce`).
    pub(super) fn check_file_v3(
        &mut self,
        d: &Dir<'_>,
        name: &[u8],
        file: (&File, &Stat),
        nonce: &[u8; 16],
        backing: String,
        path: Option<String>,
    ) {
        let (f, st) = file;
        let Some(integ) = &self.integrity else {
            return;
        };
        let len = st.st_size as u64;
        let du = self.du;
        let c = match check_contents(&integ.keys, f, len, du, nonce) {
            Ok(Some(c)) => c,
            Ok(None) => {
                self.push(
                    Kind::BadRecord,
                    backing,
                    path,
                    "neither file record (A at 1024, B at 2048) verifies: its size and bindings are unknown (tampered, or not written by fscrypt-rs)".into(),
                    Action::NotRepaired(USER_DATA),
                );
                return;
            }
            Err(e) => {
                self.unreadable(backing, path, "read it", e);
                return;
            }
        };
        let size = c.record.size;
        match c.length {
            Length::Hint => {}
            Length::Leftover { hint } => {
                let fd = d.fd;
                self.fixable(
                    Kind::ExcessDataUnits,
                    backing.clone(),
                    path.clone(),
                    format!(
                        "backing length {len} is past the hint {hint} of the authenticated size {size}, with the record's writing flag set (a write session interrupted by a crash; the bytes past the size are never shown)"
                    ),
                    Fix::Truncate,
                    || cut_to_hint(&reopen_rw(fd, name, st)?, size, hint, du),
                );
            }
            Length::Bad { hint } => {
                let want = hint.map_or_else(|| "none".to_owned(), |h| h.to_string());
                self.push(
                    Kind::BadLength,
                    backing.clone(),
                    path.clone(),
                    format!(
                        "backing length {len} is not the hint ({want}) of the authenticated size {size}{} (truncated or extended outside the vault)",
                        if len > hint.unwrap_or(u64::MAX) { " and the record's writing flag is clear" } else { "" }
                    ),
                    Action::NotRepaired(USER_DATA),
                );
            }
        }
        for &(i, why) in &c.bad {
            let detail = match why {
                BadUnit::Torn => {
                    format!("unit {i} fails its tag (torn by a power loss, or tampered)")
                }
                BadUnit::DataUnderEmpty => format!(
                    "unit {i} has non-zero bytes but no tag (tampered, or torn by a power loss)"
                ),
            };
            let action = if self.opts.repair {
                match reopen_rw(d.fd, name, st).and_then(|w| clear_unit(&w, i, du)) {
                    Ok(()) => Action::Repaired(Fix::ClearTornUnit),
                    Err(e) => Action::RepairFailed(Fix::ClearTornUnit, e.to_string()),
                }
            } else {
                Action::Repairable(Fix::ClearTornUnit)
            };
            self.push_unit(Kind::BadUnitTag, &backing, &path, i, detail, action);
        }
        let more = c.bad_total - c.bad.len() as u64;
        if more > 0 {
            self.push(
                Kind::BadUnitTag,
                backing.clone(),
                path.clone(),
                format!("{more} more unit(s) fail their tag (not listed one by one, not repaired by this run)"),
                Action::NotRepaired(TORN),
            );
        }
        self.bindings(d, name, st, nonce, c.record, c.next, backing, path);
    }

    /// Checks the name `name` of `d` against the file's record; judges
    /// stale bindings once every link of the file was seen.
    #[allow(clippy::too_many_arguments)]
    fn bindings(
        &mut self,
        d: &Dir<'_>,
        name: &[u8],
        st: &Stat,
        nonce: &[u8; 16],
        record: FileRecord,
        next: u64,
        backing: String,
        path: Option<String>,
    ) {
        let binding = self.entry_binding(d, name);
        let Some(integ) = &mut self.integrity else {
            return;
        };
        let nlink = st.st_nlink;
        let key = (st.st_dev, st.st_ino);
        let mut l = integ.linked.remove(&key).unwrap_or_else(|| Linked {
            backing: backing.clone(),
            path: path.clone(),
            nonce: *nonce,
            matched: vec![false; record.bindings.len()],
            record,
            next,
            nlink,
            seen: 0,
            undecided: false,
        });
        l.seen += 1;
        match binding {
            None => l.undecided = true,
            Some(b) => match l
                .record
                .bindings
                .iter()
                .position(|x| subtle::ConstantTimeEq::ct_eq(&x[..], &b[..]).into())
            {
                Some(k) => l.matched[k] = true,
                None => {
                    l.undecided = true;
                    self.push(
                        Kind::UnboundName,
                        backing,
                        path,
                        "the file's record is not bound to this name in this directory".into(),
                        Action::NotRepaired(MOVED),
                    );
                }
            },
        }
        if l.seen < l.nlink {
            if let Some(integ) = &mut self.integrity {
                integ.linked.insert(key, l);
            }
            return;
        }
        self.judge_stale(l, d.fd, name, st);
    }

    /// Reports the bindings of `l` that no name matched (when every name
    /// was bound), repairing through the name `name` of `dir` (its last
    /// link seen).
    fn judge_stale(&mut self, l: Linked, dir: BorrowedFd<'_>, name: &[u8], st: &Stat) {
        if l.undecided || l.matched.iter().all(|&m| m) {
            return;
        }
        let stale = l.matched.iter().filter(|&&m| !m).count();
        let Some(integ) = &self.integrity else {
            return;
        };
        let keys = &integ.keys;
        let newer = without_stale(&l.record, &l.matched);
        let at = l.next;
        let action = if self.opts.repair {
            match reopen_rw(dir, name, st)
                .and_then(|w| write_record(&w, keys, &l.nonce, &newer, at))
            {
                Ok(()) => Action::Repaired(Fix::DropStaleBindings),
                Err(e) => Action::RepairFailed(Fix::DropStaleBindings, e.to_string()),
            }
        } else {
            Action::Repairable(Fix::DropStaleBindings)
        };
        self.push(
            Kind::StaleBinding,
            l.backing.clone(),
            l.path.clone(),
            format!(
                "{stale} of the record's {} binding(s) match no name of the file (a rename, link or unlink interrupted by a crash; harmless)",
                l.record.bindings.len()
            ),
            action,
        );
    }

    /// After the walk: forgets the files with links the walk did not
    /// find (outside the vault, or in a part not walked): their stale
    /// bindings cannot be told.
    pub(super) fn finish_integrity(&mut self) {
        if let Some(integ) = &mut self.integrity {
            integ.linked.clear();
        }
    }
}

#[cfg(test)]
mod tests;
