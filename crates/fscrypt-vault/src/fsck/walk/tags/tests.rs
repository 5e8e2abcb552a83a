//! Format 3 files built with the pure functions of [`crate::integrity`]
//! (header, record, slots, units of arbitrary bytes: fsck checks tags, not
//! plaintext), then damaged as an attacker or a crash would, and checked.

use std::path::PathBuf;

use fscrypt::{ContextV2, InodeCrypt, InodeParams};
use test_support::TempDir;

use super::*;
use crate::fsck::{Options, Report, check};
use crate::integrity::record::FLAG_WRITING;
use crate::integrity::units::Slot;

const DU: u64 = 4096;

struct V3 {
    dir: TempDir,
    master: MasterKey,
    policy: PolicyV2,
    keys: IntegrityKeys,
    root_nonce: [u8; 16],
    root: InodeCrypt,
}

fn vault() -> V3 {
    let dir = TempDir::new("fsck-v3");
    let master = MasterKey::new(&[0x5a; 64]).unwrap();
    let policy = crate::InitOptions::default()
        .policy(master.identifier())
        .unwrap();
    crate::create_root_with(dir.path(), &policy, Format::V3).unwrap();
    let h = Header::parse(
        &std::fs::read(dir.join(DIR_META_NAME)).unwrap(),
        HeaderKind::Directory,
    )
    .unwrap();
    let params = InodeParams {
        file_type: CryptType::Directory,
        ino: 0,
        fs_uuid: [0; 16],
        fs_block_size: FS_BLOCK_SIZE,
    };
    let root = InodeCrypt::new(&master, &Context::V2(h.context), &params).unwrap();
    let keys = IntegrityKeys::derive(&master).unwrap();
    V3 {
        dir,
        master,
        policy,
        keys,
        root_nonce: h.context.nonce,
        root,
    }
}

/// What a unit holds when the test writes it.
#[derive(Clone, Copy)]
enum U {
    /// Arbitrary non-zero bytes (seeded), tagged in slot 0.
    Data(u8),
    /// Never written: empty slot pair, zero bytes.
    Never,
    /// A hole slot (stale non-zero bytes under it).
    HoleSlot,
}

impl V3 {
    /// The backing name of the plaintext name `plain` in the root, as the
    /// vault writes it (the one place to change with the name format).
    fn name(&self, plain: &str) -> String {
        let ct = self.root.encrypt_filename(plain.as_bytes()).unwrap();
        crate::integrity::names::backing_name(&self.keys, &self.root_nonce, &ct).name
    }

    fn binding(&self, plain: &str) -> [u8; 16] {
        self.keys
            .binding(&self.root_nonce, self.name(plain).as_bytes())
    }

    fn path(&self, plain: &str) -> PathBuf {
        self.dir.join(self.name(plain))
    }

    /// Writes a format 3 file `plain` of `size` bytes with `units` (one
    /// per unit of the size), bound to `bound`, record flags `flags`.
    fn file(&self, plain: &str, size: u64, units: &[U], bound: &[&str], flags: u8) -> [u8; 16] {
        assert_eq!(units.len() as u64, size.div_ceil(DU));
        let mut nonce = [0u8; 16];
        fscrypt_crypto::random_bytes(&mut nonce).unwrap();
        let h = Header {
            format: Format::V3,
            kind: HeaderKind::File,
            context: ContextV2 {
                policy: self.policy,
                nonce,
            },
            size: 0,
        };
        let f = std::fs::File::create(self.path(plain)).unwrap();
        f.write_all_at(&h.to_bytes(), 0).unwrap();
        let rec = FileRecord {
            seq: 1,
            size,
            generation: 1,
            flags,
            bindings: bound.iter().map(|n| self.binding(n)).collect(),
        };
        f.write_all_at(&rec.encode(&self.keys, &nonce).unwrap(), RECORD_A)
            .unwrap();
        for (i, u) in units.iter().enumerate() {
            let i = i as u64;
            let (slot, bytes) = match *u {
                U::Data(seed) => {
                    let bytes: Vec<u8> = (0..DU)
                        .map(|k| (k as u8).wrapping_mul(31) ^ seed | 1)
                        .collect();
                    let state = Slot::state_for(1, false);
                    let mac = self.keys.tag(MacKind::DataUnit, state, i, &nonce, &bytes);
                    (Some(Slot::new(1, false, &mac)), bytes)
                }
                U::Never => (None, vec![0; DU as usize]),
                U::HoleSlot => {
                    let state = Slot::state_for(1, true);
                    let mac = self.keys.tag(MacKind::DataUnit, state, i, &nonce, &[]);
                    (Some(Slot::new(1, true, &mac)), vec![0xee; DU as usize])
                }
            };
            if let Some(s) = slot {
                f.write_all_at(&s.to_bytes(), units::slot_pair_offset(i, DU).unwrap())
                    .unwrap();
            }
            f.write_all_at(&bytes, units::unit_offset(i, DU).unwrap())
                .unwrap();
        }
        f.set_len(units::len_for_size(size, DU).unwrap()).unwrap();
        nonce
    }

    fn fsck(&self, repair: bool) -> Report {
        check(
            self.dir.path(),
            &self.policy,
            &Options {
                master: Some(&self.master),
                repair,
                ..Options::default()
            },
        )
        .unwrap()
    }
}

/// The problems of this module's kinds: (kind, unit, shown path, repaired).
fn mine(r: &Report) -> Vec<(Kind, Option<u64>, Option<String>, bool)> {
    r.problems
        .iter()
        .filter(|p| {
            matches!(
                p.kind,
                Kind::BadRecord
                    | Kind::BadUnitTag
                    | Kind::UnboundName
                    | Kind::StaleBinding
                    | Kind::ExcessDataUnits
                    | Kind::BadLength
            )
        })
        .map(|p| {
            (
                p.kind,
                p.unit,
                p.path.clone(),
                matches!(p.action, Action::Repaired(_)),
            )
        })
        .collect::<Vec<_>>()
        .tap_sort()
}

trait TapSort {
    fn tap_sort(self) -> Self;
}

impl TapSort for Vec<(Kind, Option<u64>, Option<String>, bool)> {
    /// Walk order is backing-name order (ciphertext): sorted by shown
    /// path, then unit (a file's own problems before its units').
    fn tap_sort(mut self) -> Self {
        self.sort_by(|a, b| (&a.2, a.1).cmp(&(&b.2, b.1)));
        self
    }
}

fn open_rw(p: &std::path::Path) -> std::fs::File {
    std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(p)
        .unwrap()
}

fn flip(p: &std::path::Path, off: u64) {
    let f = open_rw(p);
    let mut b = [0u8; 1];
    f.read_exact_at(&mut b, off).unwrap();
    b[0] ^= 0x04;
    f.write_all_at(&b, off).unwrap();
}

fn unit_bytes(p: &std::path::Path, i: u64) -> Vec<u8> {
    let mut b = vec![0u8; DU as usize];
    std::fs::File::open(p)
        .unwrap()
        .read_exact_at(&mut b, units::unit_offset(i, DU).unwrap())
        .unwrap();
    b
}

fn put_unit(p: &std::path::Path, i: u64, b: &[u8]) {
    open_rw(p)
        .write_all_at(b, units::unit_offset(i, DU).unwrap())
        .unwrap();
}

const SIZE: u64 = 3 * DU + 100;
const FOUR: [U; 4] = [U::Data(1), U::Never, U::HoleSlot, U::Data(4)];

#[test]
fn a_clean_file_with_holes_has_no_problems() {
    let v = vault();
    v.file("a", SIZE, &FOUR, &["a"], 0);
    v.file("empty", 0, &[], &["empty"], 0);
    // More than one group: unit 128 lies after group 1's tag block.
    let many: Vec<U> = (0..130).map(|i| U::Data(i as u8)).collect();
    v.file("big", 130 * DU, &many, &["big"], 0);
    let r = v.fsck(false);
    assert_eq!(mine(&r), vec![], "{:?}", r.problems);
    assert_eq!(r.stats.files, 3);
}

#[test]
fn a_flipped_unit_byte_is_named_with_its_unit_and_path() {
    let v = vault();
    v.file("a", SIZE, &FOUR, &["a"], 0);
    flip(&v.path("a"), units::unit_offset(3, DU).unwrap() + 17);
    let r = v.fsck(false);
    assert_eq!(
        mine(&r),
        vec![(Kind::BadUnitTag, Some(3), Some("/a".into()), false)]
    );
    let p = &r.problems[0];
    assert_eq!(p.backing, v.name("a"));
    assert!(
        p.detail
            .contains("unit 3 fails its tag (torn by a power loss, or tampered)")
    );
    assert_eq!(p.action, Action::Repairable(Fix::ClearTornUnit));
}

/// Copies unit `si` of `src` with its slot pair over unit `di` of `dst`
/// (what an attacker with the backing store can do).
fn move_unit(src: &std::path::Path, si: u64, dst: &std::path::Path, di: u64) {
    let mut pair = [0u8; SLOT_PAIR_SIZE];
    std::fs::File::open(src)
        .unwrap()
        .read_exact_at(&mut pair, units::slot_pair_offset(si, DU).unwrap())
        .unwrap();
    let unit = unit_bytes(src, si);
    let f = open_rw(dst);
    f.write_all_at(&pair, units::slot_pair_offset(di, DU).unwrap())
        .unwrap();
    f.write_all_at(&unit, units::unit_offset(di, DU).unwrap())
        .unwrap();
}

#[test]
fn swapped_units_and_a_unit_from_another_file_fail() {
    let v = vault();
    let units = [U::Data(1), U::Data(2), U::Data(3)];
    v.file("a", 3 * DU, &units, &["a"], 0);
    let a = v.path("a");
    let copy = v.dir.join("copy");
    std::fs::copy(&a, &copy).unwrap();
    // Units 0 and 2 swapped, each with its tags.
    move_unit(&copy, 0, &a, 2);
    move_unit(&copy, 2, &a, 0);
    std::fs::remove_file(&copy).unwrap();
    assert_eq!(
        mine(&v.fsck(false)),
        vec![
            (Kind::BadUnitTag, Some(0), Some("/a".into()), false),
            (Kind::BadUnitTag, Some(2), Some("/a".into()), false),
        ]
    );
    // Unit 0 of another file, with its tags, at the same index.
    let w = vault();
    w.file("a", DU, &[U::Data(1)], &["a"], 0);
    w.file("b", DU, &[U::Data(2)], &["b"], 0);
    move_unit(&w.path("a"), 0, &w.path("b"), 0);
    assert_eq!(
        mine(&w.fsck(false)),
        vec![(Kind::BadUnitTag, Some(0), Some("/b".into()), false)]
    );
}

#[test]
fn truncated_and_extended_files_have_a_bad_length() {
    let v = vault();
    v.file("a", SIZE, &FOUR, &["a"], 0);
    v.file("b", SIZE, &FOUR, &["b"], 0);
    let hint = units::len_for_size(SIZE, DU).unwrap();
    open_rw(&v.path("a")).set_len(hint - DU - 100).unwrap();
    open_rw(&v.path("b")).set_len(hint + DU).unwrap();
    let r = v.fsck(true);
    let got = mine(&r);
    // a: its length, and its last unit (now partly gone) fails; b: its
    // length only (the writing flag is clear: not a crash leftover).
    assert_eq!(
        got,
        vec![
            (Kind::BadLength, None, Some("/a".into()), false),
            (Kind::BadUnitTag, Some(3), Some("/a".into()), true),
            (Kind::BadLength, None, Some("/b".into()), false),
        ],
        "{:?}",
        r.problems
    );
    // The bad lengths are never repaired.
    assert_eq!(
        std::fs::metadata(v.path("b")).unwrap().len(),
        hint + DU,
        "an extension without the writing flag is left alone"
    );
}

#[test]
fn a_crash_leftover_length_is_cut_back_to_the_hint() {
    let v = vault();
    v.file(
        "a",
        2 * DU + 5,
        &[U::Data(1), U::Data(2), U::Data(3)],
        &["a"],
        FLAG_WRITING,
    );
    let p = v.path("a");
    let hint = units::len_for_size(2 * DU + 5, DU).unwrap();
    // An extending write whose record update was lost: units 3 and 4 with
    // their slots written past the size.
    let f = open_rw(&p);
    f.write_all_at(&[0x33; 2 * DU as usize], units::unit_offset(3, DU).unwrap())
        .unwrap();
    f.write_all_at(&[0x44; 64], units::slot_pair_offset(3, DU).unwrap())
        .unwrap();
    drop(f);
    let r = v.fsck(false);
    assert_eq!(
        mine(&r),
        vec![(Kind::ExcessDataUnits, None, Some("/a".into()), false)]
    );
    assert_eq!(r.problems[0].action, Action::Repairable(Fix::Truncate));
    let r = v.fsck(true);
    assert_eq!(
        mine(&r),
        vec![(Kind::ExcessDataUnits, None, Some("/a".into()), true)]
    );
    assert_eq!(std::fs::metadata(&p).unwrap().len(), hint);
    let mut slots = [0xffu8; 64];
    std::fs::File::open(&p)
        .unwrap()
        .read_exact_at(&mut slots, units::slot_pair_offset(3, DU).unwrap())
        .unwrap();
    assert_eq!(slots, [0u8; 64], "the cut units' slots are cleared");
    assert_eq!(mine(&v.fsck(false)), vec![]);
}

#[test]
fn a_new_files_first_units_without_a_record_are_a_leftover() {
    // A file's first write session writes no record before its first
    // units (its creation record counts as open): a crash after them
    // leaves units past size 0 under the creation record, cut by repair.
    let v = vault();
    v.file("n", 0, &[], &["n"], 0);
    let p = v.path("n");
    let f = open_rw(&p);
    f.write_all_at(&[0x55; DU as usize], units::unit_offset(0, DU).unwrap())
        .unwrap();
    f.write_all_at(&[0x66; 32], units::slot_pair_offset(0, DU).unwrap())
        .unwrap();
    drop(f);
    let r = v.fsck(false);
    assert_eq!(
        mine(&r),
        vec![(Kind::ExcessDataUnits, None, Some("/n".into()), false)]
    );
    let r = v.fsck(true);
    assert_eq!(
        mine(&r),
        vec![(Kind::ExcessDataUnits, None, Some("/n".into()), true)]
    );
    assert_eq!(
        std::fs::metadata(&p).unwrap().len(),
        units::len_for_size(0, DU).unwrap()
    );
    assert_eq!(mine(&v.fsck(false)), vec![]);
}

#[test]
fn a_changed_record_fails_and_the_older_copy_is_used() {
    let v = vault();
    let n = v.file("a", SIZE, &FOUR, &["a"], 0);
    flip(&v.path("a"), RECORD_A + 8);
    assert_eq!(
        mine(&v.fsck(true)),
        vec![(Kind::BadRecord, None, Some("/a".into()), false)]
    );
    // A newer record torn in B: the older one in A holds.
    let w = vault();
    let n2 = w.file("a", SIZE, &FOUR, &["a"], 0);
    let newer = FileRecord {
        seq: 2,
        size: 1,
        generation: 2,
        flags: 0,
        bindings: vec![w.binding("a")],
    };
    let f = open_rw(&w.path("a"));
    f.write_all_at(&newer.encode(&w.keys, &n2).unwrap(), RECORD_B)
        .unwrap();
    drop(f);
    // B (size 1) is current now: the length (hint of SIZE) is wrong.
    assert_eq!(
        mine(&w.fsck(false)),
        vec![(Kind::BadLength, None, Some("/a".into()), false)]
    );
    flip(&w.path("a"), RECORD_B + 3);
    assert_eq!(mine(&w.fsck(false)), vec![]);
    let _ = n;
}

#[test]
fn a_file_under_another_name_is_unbound() {
    let v = vault();
    v.file("a", DU, &[U::Data(1)], &["a"], 0);
    v.file("b", DU, &[U::Data(2)], &["b"], 0);
    // Swap the two backing files.
    let (a, b, t) = (v.path("a"), v.path("b"), v.dir.join("t"));
    std::fs::rename(&a, &t).unwrap();
    std::fs::rename(&b, &a).unwrap();
    std::fs::rename(&t, &b).unwrap();
    let r = v.fsck(true);
    assert_eq!(
        mine(&r),
        vec![
            (Kind::UnboundName, None, Some("/a".into()), false),
            (Kind::UnboundName, None, Some("/b".into()), false),
        ],
        "no stale binding is reported for a moved file"
    );
    assert_eq!(r.remaining(), 2);
}

#[test]
fn stale_bindings_are_reported_and_dropped() {
    let v = vault();
    let nonce = v.file("a", DU, &[U::Data(1)], &["a", "gone"], 0);
    let r = v.fsck(false);
    assert_eq!(
        mine(&r),
        vec![(Kind::StaleBinding, None, Some("/a".into()), false)]
    );
    let r = v.fsck(true);
    assert_eq!(
        mine(&r),
        vec![(Kind::StaleBinding, None, Some("/a".into()), true)]
    );
    let b = std::fs::read(v.path("a")).unwrap();
    let (rec, _) = FileRecord::current(
        &b[RECORD_A as usize..RECORD_B as usize],
        &b[RECORD_B as usize..RECORD_B as usize + RECORD_SPACE],
        &v.keys,
        &nonce,
    )
    .unwrap();
    assert_eq!(rec.seq, 2);
    assert_eq!(rec.bindings, vec![v.binding("a")]);
    assert_eq!(mine(&v.fsck(false)), vec![]);
}

#[test]
fn hard_links_and_conflict_copies_are_bound_by_their_names() {
    let v = vault();
    v.file("a", DU, &[U::Data(1)], &["a", "b"], 0);
    std::fs::hard_link(v.path("a"), v.path("b")).unwrap();
    v.file("c", DU, &[U::Data(3)], &["c"], 0);
    std::fs::hard_link(v.path("c"), v.path("d")).unwrap();
    // A sync tool's copy of "e": bound under the name without the marker.
    v.file("e", DU, &[U::Data(5)], &["e"], 0);
    let ct = v.root.encrypt_filename(b"e").unwrap();
    let copy = crate::integrity::names::conflict_copy(
        &v.keys,
        &v.root_nonce,
        &ct,
        ".sync-conflict-20261204-123456-ABCD7EF",
    );
    std::fs::copy(v.path("e"), v.dir.join(&copy.name)).unwrap();
    let r = v.fsck(false);
    assert_eq!(
        mine(&r),
        vec![(Kind::UnboundName, None, Some("/d".into()), false)],
        "{:?}",
        r.problems
    );
}

#[test]
fn torn_units_and_data_without_a_tag_become_holes_with_repair() {
    let v = vault();
    v.file("a", SIZE, &FOUR, &["a"], 0);
    let p = v.path("a");
    flip(&p, units::unit_offset(0, DU).unwrap());
    // Unit 1 was never written: bytes appear under its empty slot pair.
    put_unit(&p, 1, &[7u8; DU as usize]);
    let r = v.fsck(false);
    assert_eq!(
        mine(&r),
        vec![
            (Kind::BadUnitTag, Some(0), Some("/a".into()), false),
            (Kind::BadUnitTag, Some(1), Some("/a".into()), false),
        ]
    );
    assert!(r.problems[1].detail.contains("non-zero bytes but no tag"));
    let r = v.fsck(true);
    assert_eq!(r.repaired(), 2, "{:?}", r.problems);
    assert_eq!(unit_bytes(&p, 0), vec![0u8; DU as usize]);
    assert_eq!(unit_bytes(&p, 1), vec![0u8; DU as usize]);
    assert_eq!(
        std::fs::metadata(&p).unwrap().len(),
        units::len_for_size(SIZE, DU).unwrap()
    );
    assert_eq!(mine(&v.fsck(false)), vec![]);
}

#[test]
fn without_the_key_format_3_files_are_not_judged_by_tags() {
    let v = vault();
    v.file("a", DU, &[U::Data(1)], &["zzz"], 0);
    flip(&v.path("a"), units::unit_offset(0, DU).unwrap());
    let r = check(v.dir.path(), &v.policy, &Options::default()).unwrap();
    assert_eq!(mine(&r), vec![]);
}

#[test]
fn file_nonces_and_accept_rollback_forget_the_files_under_a_path() {
    use crate::fsck::{accept_rollback, file_nonces};
    use crate::integrity::generations::{GenerationStore, Seen, slot};
    let v = vault();
    let na = v.file("a", DU, &[U::Data(1)], &["a"], 0);
    let nab = v.file("ab", DU, &[U::Data(2)], &["ab"], 0);
    // Each file's slot under its name, then its nonce alone.
    let (a, ab) = (slot(&na, &v.binding("a")), slot(&nab, &v.binding("ab")));
    let mut all = file_nonces(v.dir.path(), &v.policy, Some(&v.master), "/").unwrap();
    all.sort();
    let mut want = vec![
        ("/a".to_owned(), a),
        ("/a".to_owned(), na),
        ("/ab".to_owned(), ab),
        ("/ab".to_owned(), nab),
    ];
    want.sort();
    assert_eq!(all, want);
    assert_eq!(
        file_nonces(v.dir.path(), &v.policy, Some(&v.master), "a/").unwrap(),
        vec![("/a".to_owned(), a), ("/a".to_owned(), na)]
    );
    let state = TempDir::new("fsck-v3-state");
    let store = GenerationStore::open(state.path()).unwrap();
    store.saw(&a, 40).unwrap();
    store.saw(&na, 3).unwrap();
    store.saw(&ab, 7).unwrap();
    let got = accept_rollback(
        v.dir.path(),
        &v.policy,
        Some(&v.master),
        "/a",
        &store,
        state.path(),
    )
    .unwrap();
    assert_eq!(got, vec![("/a".to_owned(), 40)]);
    assert_eq!(store.check(&a, 1), Seen::Fine);
    assert_eq!(store.check(&na, 1), Seen::Fine);
    assert_eq!(store.check(&ab, 1), Seen::RolledBack { seen: 7 });
    // The log on disk says so too.
    let again = GenerationStore::open(state.path()).unwrap();
    assert_eq!(again.check(&a, 1), Seen::Fine);
    assert_eq!(again.check(&ab, 1), Seen::RolledBack { seen: 7 });
    // Nothing left to accept under /a.
    assert_eq!(
        accept_rollback(
            v.dir.path(),
            &v.policy,
            Some(&v.master),
            "/a",
            &again,
            state.path()
        )
        .unwrap(),
        vec![]
    );
}
