//! The offline ext4 reader over arbitrary image bytes (issue 14): open the
//! bytes as an image straight from memory (the `[u8]` reader, no temporary
//! file), walk the tree (bounded depth and entries), read files through the
//! one read path (`FileData::read_at`, as a stream and at odd offsets),
//! symlinks and xattrs — once without keys (no-key names) and once with
//! the fixed key of the seed image (`scripts/fuzz-ext4-seed.sh`). Any
//! error is fine; a panic, a hang or unbounded memory is a bug.
//!
//! `cargo +nightly fuzz run ext4_image seeds/ext4_image` (from `fuzz/`).
#![no_main]

use std::path::Path;

use fscrypt_ext4::InodeKind;
use fscrypt_ext4::image::file::FileData;
use fscrypt_ext4::image::read::{Contents, Piece};
use fscrypt_ext4::image::{Image, KeySet, Node, join};
use libfuzzer_sys::fuzz_target;

const MAX_DEPTH: usize = 6;
const MAX_ENTRIES: usize = 64;
const MAX_NODES: usize = 256;
const MAX_DATA: u64 = 4 << 20;

/// The master key of the seed image.
fn seed_key() -> Vec<u8> {
    (0..64u8)
        .map(|i| i.wrapping_mul(29).wrapping_add(3))
        .collect()
}

struct Budget {
    nodes: usize,
    data: u64,
}

fn visit(img: &Image<&[u8]>, node: &Node, shown: &str, depth: usize, b: &mut Budget) {
    if b.nodes >= MAX_NODES {
        return;
    }
    b.nodes += 1;
    let _ = fscrypt_ext4::image::xattrs::vfs_xattrs(img.ext4(), &node.inode);
    match node.kind() {
        InodeKind::Directory => {
            if depth >= MAX_DEPTH {
                return;
            }
            let Ok(listing) = img.list(node, shown) else {
                return;
            };
            for e in listing.entries.iter().take(MAX_ENTRIES) {
                let child_shown = join(shown, &e.name);
                let _ = img.lookup(node, shown, &e.name);
                if let Ok(child) = img.child(node, e, &child_shown) {
                    visit(img, &child, &child_shown, depth + 1, b);
                }
            }
        }
        InodeKind::Regular => {
            if let Ok(f) = FileData::open(img.ext4(), node, shown) {
                // Random access across block edges and past the end.
                let mut buf = [0u8; 5000];
                for off in [1u64, 4095, f.size().saturating_sub(3), f.size() + 1] {
                    let _ = f.read_at(img.ext4(), node, off, &mut buf);
                }
            }
            let Ok(mut c) = Contents::new(img, node, shown) else {
                return;
            };
            while b.data < MAX_DATA {
                match c.next_piece() {
                    Ok(Some(Piece::Data(d))) => b.data += d.len() as u64 + 1,
                    Ok(Some(Piece::Hole(_))) => b.data += 1,
                    _ => break,
                }
            }
        }
        InodeKind::Symlink => {
            let _ = img.read_link(node, shown);
        }
        InodeKind::Other => {}
    }
}

fuzz_target!(|data: &[u8]| {
    for with_key in [false, true] {
        let mut keys = KeySet::new();
        if with_key {
            keys.add_raw(&seed_key(), Path::new("<seed key>"))
                .expect("fixed key");
        }
        let Ok(img) = Image::from_reader(data, Path::new("<fuzz input>"), keys) else {
            return;
        };
        let _ = img.resolve(b"/enc/dir/../a");
        if let Ok(root) = img.root() {
            let mut b = Budget { nodes: 0, data: 0 };
            visit(&img, &root, "/", 0, &mut b);
        }
    }
});
