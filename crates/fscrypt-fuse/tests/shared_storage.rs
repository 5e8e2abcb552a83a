//! `-o sharedstorage` (issue 23 §3): two daemons serve one backing
//! directory at the same time, as two machines on one NAS would. A change
//! made through one mount is seen through the other at once (no name or
//! attribute caching), every read returns what was last written, a plain
//! mount is refused beside shared ones, and after both end `fsck` is clean
//! (the last one out leaves the clean marker).

use std::collections::BTreeMap;
use std::fs::{self, OpenOptions};
use std::io::{ErrorKind, Write};
use std::path::Path;

use fscrypt_fuse::{BackgroundMount, MountConfig};
use fscrypt_vault::fsck;
use test_support::TempDir;
use test_support::fuse::{Vault, master, mount_config, mount_live, policy};
use test_support::need_fuse;

fn shared(backing: &Path) -> MountConfig {
    MountConfig {
        shared_storage: true,
        ..mount_config(backing, policy(), true)
    }
}

/// What a file should read as through any mount; `None`: absent.
fn expect(mnt: &Path, name: &str, want: Option<&Vec<u8>>, step: usize) {
    let p = mnt.join(name);
    match want {
        Some(w) => {
            let got = fs::read(&p).unwrap_or_else(|e| panic!("step {step}: read {name}: {e}"));
            assert_eq!(&got, w, "step {step}: {name} is not what was last written");
            assert_eq!(
                fs::metadata(&p).unwrap().len(),
                w.len() as u64,
                "step {step}: stale size of {name}"
            );
        }
        None => {
            let e = fs::metadata(&p).expect_err(&format!("step {step}: {name} still exists"));
            assert_eq!(e.kind(), ErrorKind::NotFound, "step {step}");
        }
    }
}

fn listing(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    v.sort();
    v
}

#[test]
fn two_mounts_of_one_vault_see_each_others_changes_at_once() {
    need_fuse!();
    let mut v = Vault::new("shared");
    v.mount.take().unwrap().unmount().unwrap();
    let (ma, mb) = (TempDir::new("shared-a"), TempDir::new("shared-b"));
    let a = mount_live(shared(v.backing.path()), ma.path());
    let b = mount_live(shared(v.backing.path()), mb.path());
    let mnts = [ma.path(), mb.path()];
    let names = ["f0", "f1", "f2", "f3"];
    let mut model: BTreeMap<&str, Vec<u8>> = BTreeMap::new();
    // A fixed pseudo-random sequence of operations, each through one mount
    // and checked at once through the other.
    let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
    for step in 0..400 {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        let (this, other) = if step % 2 == 0 { (0, 1) } else { (1, 0) };
        let n = names[(x % 4) as usize];
        let m = names[((x >> 8) % 4) as usize];
        let p = mnts[this].join(n);
        match (x >> 16) % 5 {
            0 | 1 => {
                let len = ((x >> 24) % 9000) as usize;
                let data = vec![(step % 251) as u8; len];
                fs::write(&p, &data).unwrap();
                model.insert(n, data);
            }
            2 if model.contains_key(n) => {
                let mut f = OpenOptions::new().append(true).open(&p).unwrap();
                f.write_all(b"appended").unwrap();
                model.get_mut(n).unwrap().extend_from_slice(b"appended");
            }
            3 if model.contains_key(n) && n != m => {
                fs::rename(&p, mnts[this].join(m)).unwrap();
                let data = model.remove(n).unwrap();
                model.insert(m, data);
                expect(mnts[other], m, model.get(m), step);
            }
            4 if model.contains_key(n) => {
                fs::remove_file(&p).unwrap();
                model.remove(n);
            }
            _ => {}
        }
        for name in names {
            expect(mnts[other], name, model.get(name), step);
        }
    }
    // Directories: made through one, filled through the other, listed
    // through the first.
    fs::create_dir(ma.path().join("d")).unwrap();
    fs::write(mb.path().join("d/inner"), b"from b").unwrap();
    assert_eq!(listing(&ma.path().join("d")), ["inner"]);
    assert_eq!(fs::read(ma.path().join("d/inner")).unwrap(), b"from b");
    fs::rename(ma.path().join("d"), ma.path().join("e")).unwrap();
    assert_eq!(fs::read(mb.path().join("e/inner")).unwrap(), b"from b");
    assert!(!mb.path().join("d").exists());
    a.unmount().unwrap();
    b.unmount().unwrap();
    // The last one out left the clean marker: fsck finds nothing.
    let key = master();
    let r = fsck::check(
        v.backing.path(),
        &policy(),
        &fsck::Options {
            master: Some(&key),
            repair: false,
            check_clean_marker: true,
        },
    )
    .unwrap();
    assert!(r.problems.is_empty(), "fsck: {:?}", r.problems);
}

#[test]
fn a_plain_mount_is_refused_beside_shared_ones_and_the_other_way() {
    need_fuse!();
    let mut v = Vault::new("shared-refuse");
    v.mount.take().unwrap().unmount().unwrap();
    let (ma, mb) = (TempDir::new("shared-r-a"), TempDir::new("shared-r-b"));
    let a: BackgroundMount = mount_live(shared(v.backing.path()), ma.path());
    let e =
        fscrypt_fuse::mount_background(mount_config(v.backing.path(), policy(), true), mb.path())
            .expect_err("a plain mount beside a shared one");
    assert!(e.to_string().contains("sharedstorage"), "{e}");
    a.unmount().unwrap();
    let plain = mount_live(mount_config(v.backing.path(), policy(), true), ma.path());
    let e = fscrypt_fuse::mount_background(shared(v.backing.path()), mb.path())
        .expect_err("a shared mount beside a plain one");
    assert!(e.to_string().contains("without -o sharedstorage"), "{e}");
    plain.unmount().unwrap();
}
