//! Conflict copies made by sync tools: recognizing the marker a tool adds
//! to a backing name, and putting the same marker into the plaintext name
//! (issue 23: conflict copies are shown decrypted, as Cryptomator does).
//!
//! Every supported tool inserts its marker before the name's extension
//! (the part from the last `.`, when that dot is not the first byte) or,
//! without an extension, at the end:
//!
//! | tool | marker |
//! |------|--------|
//! | Syncthing | `.sync-conflict-YYYYMMDD-HHMMSS-DEVICE` (DEVICE: 7 base32 characters, upper case and digits) |
//! | Nextcloud, ownCloud | ` (conflicted copy YYYY-MM-DD HHMMSS)` |
//! | Dropbox | ` (… conflicted copy YYYY-MM-DD)`, e.g. ` (Alice's conflicted copy 2026-12-04)` |
//!
//! A backing name of an encrypted entry has no `.` (base64url), so its
//! marker is at the end; `fscrypt.long.<hash>` names have one, so theirs
//! sits before `.<hash>`. [`split`] finds the marker wherever the rule puts
//! it and returns the original name; [`insert`] applies the rule to another
//! name.

#![forbid(unsafe_code)]

/// A marker found in a name, and where it was.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Conflict {
    /// The name without the marker (what the tool copied).
    pub original: Vec<u8>,
    /// The marker exactly as the tool wrote it.
    pub marker: Vec<u8>,
}

/// Where a tool puts a marker in `name`: before the extension, or at the
/// end when there is none.
fn insertion_point(name: &[u8]) -> usize {
    match name.iter().rposition(|&b| b == b'.') {
        Some(i) if i > 0 => i,
        _ => name.len(),
    }
}

/// `name` with `marker` inserted where the sync tools put it.
pub fn insert(name: &[u8], marker: &[u8]) -> Vec<u8> {
    let at = insertion_point(name);
    let mut out = Vec::with_capacity(name.len() + marker.len());
    out.extend_from_slice(&name[..at]);
    out.extend_from_slice(marker);
    out.extend_from_slice(&name[at..]);
    out
}

/// The conflict marker of `name`, if it has one of the supported forms at
/// the place the tools put it (checked by rebuilding the name with
/// [`insert`]), and the original name.
pub fn split(name: &[u8]) -> Option<Conflict> {
    // Every marker holds "conflict": one cheap pass keeps the search below
    // off the lookup path of ordinary names.
    if !name.windows(8).any(|w| w == b"conflict") {
        return None;
    }
    // Candidates: every position where a marker could start; the marker
    // ends at the last `.` of the name or at its end.
    for start in 0..name.len() {
        for end in [name.len()]
            .into_iter()
            .chain(name.iter().rposition(|&b| b == b'.'))
        {
            if end <= start {
                continue;
            }
            let marker = &name[start..end];
            if !is_marker(marker) {
                continue;
            }
            let mut original = name[..start].to_vec();
            original.extend_from_slice(&name[end..]);
            if !original.is_empty() && insert(&original, marker) == name {
                return Some(Conflict {
                    original,
                    marker: marker.to_vec(),
                });
            }
        }
    }
    None
}

fn digits(b: &[u8]) -> bool {
    !b.is_empty() && b.iter().all(u8::is_ascii_digit)
}

/// `YYYY-MM-DD`.
fn date_dashed(b: &[u8]) -> bool {
    b.len() == 10
        && digits(&b[..4])
        && b[4] == b'-'
        && digits(&b[5..7])
        && b[7] == b'-'
        && digits(&b[8..])
}

fn is_marker(m: &[u8]) -> bool {
    syncthing(m) || nextcloud(m) || dropbox(m)
}

/// `.sync-conflict-YYYYMMDD-HHMMSS-DEVICE`.
fn syncthing(m: &[u8]) -> bool {
    let Some(rest) = m.strip_prefix(b".sync-conflict-") else {
        return false;
    };
    rest.len() == 8 + 1 + 6 + 1 + 7
        && digits(&rest[..8])
        && rest[8] == b'-'
        && digits(&rest[9..15])
        && rest[15] == b'-'
        && rest[16..]
            .iter()
            .all(|c| c.is_ascii_uppercase() || c.is_ascii_digit())
}

/// ` (conflicted copy YYYY-MM-DD HHMMSS)`.
fn nextcloud(m: &[u8]) -> bool {
    let Some(rest) = m
        .strip_prefix(b" (conflicted copy ")
        .and_then(|r| r.strip_suffix(b")"))
    else {
        return false;
    };
    rest.len() == 17 && date_dashed(&rest[..10]) && rest[10] == b' ' && digits(&rest[11..])
}

/// ` (… conflicted copy YYYY-MM-DD)`, with a non-empty owner part.
fn dropbox(m: &[u8]) -> bool {
    let Some(rest) = m.strip_prefix(b" (").and_then(|r| r.strip_suffix(b")")) else {
        return false;
    };
    const MID: &[u8] = b" conflicted copy ";
    let Some(at) = rest.windows(MID.len()).position(|w| w == MID) else {
        return false;
    };
    at > 0
        && !rest[..at].contains(&b')')
        && !rest[..at].contains(&b'/')
        && date_dashed(&rest[at + MID.len()..])
}

#[cfg(test)]
mod tests {
    use super::*;

    const ST: &[u8] = b".sync-conflict-20261204-123456-ABCD7EF";
    const NC: &[u8] = b" (conflicted copy 2026-12-04 123456)";
    const DB: &[u8] = b" (Alice's conflicted copy 2026-12-04)";

    #[test]
    fn encrypted_names_get_the_marker_at_the_end() {
        for m in [ST, NC, DB] {
            let name = b"AbCdEfGhIjKlMnOpQrStUv".to_vec();
            let copy = insert(&name, m);
            assert_eq!(&copy[..name.len()], &name[..]);
            assert_eq!(
                split(&copy),
                Some(Conflict {
                    original: name.clone(),
                    marker: m.to_vec()
                })
            );
        }
    }

    #[test]
    fn long_names_and_side_files_get_it_before_the_extension() {
        let long = b"fscrypt.long.HASHhashHASH".to_vec();
        let copy = insert(&long, ST);
        assert_eq!(
            copy,
            b"fscrypt.long.sync-conflict-20261204-123456-ABCD7EF.HASHhashHASH".to_vec()
        );
        assert_eq!(split(&copy).unwrap().original, long);
        let side = b"fscrypt.long.HASH.name".to_vec();
        let copy = insert(&side, NC);
        assert_eq!(
            copy,
            b"fscrypt.long.HASH (conflicted copy 2026-12-04 123456).name".to_vec()
        );
        assert_eq!(split(&copy).unwrap().original, side);
        assert_eq!(
            insert(b"fscrypt.dir", DB),
            b"fscrypt (Alice's conflicted copy 2026-12-04).dir"
        );
    }

    #[test]
    fn plaintext_names_follow_the_same_rule() {
        assert_eq!(
            insert(b"report.pdf", ST),
            b"report.sync-conflict-20261204-123456-ABCD7EF.pdf".to_vec()
        );
        assert_eq!(
            insert(b".bashrc", NC),
            b".bashrc (conflicted copy 2026-12-04 123456)"
        );
        assert_eq!(
            split(&insert(b"a.tar.gz", DB)).unwrap().original,
            b"a.tar.gz"
        );
    }

    #[test]
    fn near_misses_are_not_conflicts() {
        for name in [
            &b"AbCd"[..],
            b"AbCd.sync-conflict-2026120-123456-ABCD7EF",
            b"AbCd.sync-conflict-20261204-123456-abcd7ef",
            b"AbCd (conflicted copy 2026-12-4 123456)",
            b"AbCd ( conflicted copy 2026-12-04)",
            b"AbCd (conflicted copy 2026-12-04)x",
            b".sync-conflict-20261204-123456-ABCD7EF",
            // Not where the rule puts it: before an inner dot.
            b"report.sync-conflict-20261204-123456-ABCD7EF.tar.gz",
        ] {
            assert_eq!(split(name), None, "{}", String::from_utf8_lossy(name));
        }
    }
}
