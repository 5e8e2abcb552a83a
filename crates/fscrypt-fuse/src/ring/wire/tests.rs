use std::sync::Arc;

use fscrypt::{KeyIdentifier, MasterKey, PolicyV2};
use proptest::prelude::*;
use test_support::TempDir;

use super::*;
use crate::fs::{EncryptedFs, FsOptions};
use crate::stats::RequestStats;

const ROOT: u64 = 1;

// The tests spell the kernel's bytes out by offset, independently of the
// structs of `abi.rs`.
const IN_OUT: usize = FUSE_URING_IN_OUT_HEADER_SZ;
const OP_IN: usize = FUSE_URING_OP_IN_OUT_SZ;
/// `sizeof(struct fuse_attr)`.
const ATTR: usize = 88;
/// `sizeof(struct fuse_entry_out)`.
const ENTRY_OUT: usize = 40 + ATTR;
const LOOKUP: u32 = FUSE_LOOKUP;
const GETATTR: u32 = FUSE_GETATTR;
const SETATTR: u32 = FUSE_SETATTR;
const MKDIR: u32 = FUSE_MKDIR;
const UNLINK: u32 = FUSE_UNLINK;
const OPENDIR: u32 = FUSE_OPENDIR;
const READDIR: u32 = FUSE_READDIR;
const READDIRPLUS: u32 = FUSE_READDIRPLUS;
const RELEASEDIR: u32 = FUSE_RELEASEDIR;
const CREATE: u32 = FUSE_CREATE;
const WRITE: u32 = FUSE_WRITE;
const READ: u32 = FUSE_READ;
const SETXATTR: u32 = FUSE_SETXATTR;
const GETXATTR: u32 = FUSE_GETXATTR;
const LISTXATTR: u32 = FUSE_LISTXATTR;
const RELEASE: u32 = FUSE_RELEASE;
const STATFS: u32 = FUSE_STATFS;

fn u32_at(b: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_ne_bytes(b.get(at..at + 4)?.try_into().ok()?))
}

fn u64_at(b: &[u8], at: usize) -> Option<u64> {
    Some(u64::from_ne_bytes(b.get(at..at + 8)?.try_into().ok()?))
}

fn put(b: &mut [u8], at: usize, v: &[u8]) {
    b[at..at + v.len()].copy_from_slice(v);
}

fn ops(dir: &TempDir) -> Ops<EncryptedFs> {
    let master = MasterKey::new(&[9u8; 64]).unwrap();
    let id: KeyIdentifier = master.identifier();
    let policy = PolicyV2::new_default(id);
    crate::create_root(dir.path(), &policy).unwrap();
    let fs = EncryptedFs::new(dir.path(), policy, Some(master), FsOptions::default()).unwrap();
    Ops::new(fs, Arc::new(RequestStats::new()))
}

/// A ring request: `fuse_in_header` (as root), the per-opcode header
/// `op`, the further arguments `args`.
struct Req {
    header: Header,
    payload: Vec<u8>,
}

fn req(opcode: u32, nodeid: u64, op: &[u8], args: &[u8]) -> Req {
    let mut header = *Header::boxed();
    let h = header.as_mut_bytes();
    put(h, 0, &((40 + op.len() + args.len()) as u32).to_ne_bytes());
    put(h, 4, &opcode.to_ne_bytes());
    put(h, 8, &77u64.to_ne_bytes());
    put(h, 16, &nodeid.to_ne_bytes());
    put(h, IN_OUT, op);
    put(h, IN_OUT + OP_IN + 8, &5u64.to_ne_bytes());
    header.set_payload_size(args.len());
    let mut payload = vec![0xAAu8; 64 * 1024];
    payload[..args.len()].copy_from_slice(args);
    Req { header, payload }
}

/// Serves `r`: the errno (0 for success) and the reply's payload.
fn send(ops: &Ops<EncryptedFs>, mut r: Req) -> (i32, Vec<u8>) {
    serve(ops, &mut r.header, &mut r.payload, None);
    let h = r.header.as_bytes();
    let len = r.header.payload_size();
    assert_eq!(
        u64_at(h, 8),
        Some(77),
        "the reply carries the request's unique"
    );
    assert_eq!(u32_at(h, 0), Some(16 + len as u32), "out header length");
    let error = i32::from_ne_bytes(h[4..8].try_into().unwrap());
    (-error, r.payload[..len].to_vec())
}

fn cat(parts: &[&[u8]]) -> Vec<u8> {
    parts.concat()
}

fn mode_of_entry(e: &[u8]) -> u32 {
    u32_at(e, 40 + 60).unwrap()
}

#[test]
fn a_directory_made_listed_and_looked_up_through_ring_bytes() {
    let dir = TempDir::new("ring-wire");
    let ops = ops(&dir);
    // MKDIR "sub" (fuse_mkdir_in: mode, umask).
    let (err, e) = send(
        &ops,
        req(
            MKDIR,
            ROOT,
            &cat(&[&0o750u32.to_ne_bytes(), &0u32.to_ne_bytes()]),
            b"sub\0",
        ),
    );
    assert_eq!(err, 0);
    assert_eq!(e.len(), ENTRY_OUT);
    let node = u64_at(&e, 0).unwrap();
    assert!(node > ROOT);
    assert_eq!(
        u64_at(&e, 16),
        Some(EncryptedFs::TTL.as_secs()),
        "entry validity"
    );
    assert_eq!(mode_of_entry(&e), libc::S_IFDIR | 0o750);
    // LOOKUP finds it, with the same node id; an absent name is a
    // negative entry (node id 0), not an error.
    let (err, e) = send(&ops, req(LOOKUP, ROOT, &[], b"sub\0"));
    assert_eq!((err, u64_at(&e, 0)), (0, Some(node)));
    let (err, e) = send(&ops, req(LOOKUP, ROOT, &[], b"nothing\0"));
    assert_eq!((err, u64_at(&e, 0), e.len()), (0, Some(0), ENTRY_OUT));
    // GETATTR: fuse_attr_out (validity, nsec, dummy, attr).
    let (err, a) = send(&ops, req(GETATTR, node, &[0; 16], &[]));
    assert_eq!((err, a.len()), (0, 16 + ATTR));
    assert_eq!(u64_at(&a, 16), Some(node), "attr.ino");
    assert_eq!(u32_at(&a, 16 + 60), Some(libc::S_IFDIR | 0o750));
    // OPENDIR, then READDIRPLUS of the root: ".", "..", "sub".
    let (err, o) = send(&ops, req(OPENDIR, ROOT, &[0; 8], &[]));
    assert_eq!((err, o.len()), (0, 16));
    let fh = u64_at(&o, 0).unwrap();
    let read_in = |size: u32| {
        cat(&[
            &fh.to_ne_bytes(),
            &0u64.to_ne_bytes(),
            &size.to_ne_bytes(),
            &[0; 20],
        ])
    };
    let (err, list) = send(&ops, req(READDIRPLUS, ROOT, &read_in(4096), &[]));
    assert_eq!(err, 0);
    let mut names = Vec::new();
    let mut at = 0;
    while at < list.len() {
        let d = &list[at + ENTRY_OUT..];
        let namelen = u32_at(d, 16).unwrap() as usize;
        names.push(String::from_utf8(d[24..24 + namelen].to_vec()).unwrap());
        if names.last().map(String::as_str) == Some("sub") {
            assert_eq!(u64_at(&list, at), Some(node), "entry node id");
            assert_eq!(u32_at(d, 20), Some(libc::S_IFDIR >> 12), "d_type");
        }
        at += ENTRY_OUT + (24 + namelen).next_multiple_of(8);
    }
    assert_eq!(at, list.len());
    assert_eq!(names, [".", "..", "sub"]);
    // A reply never exceeds the size the kernel asked for: room for
    // one entry only.
    let one = ENTRY_OUT + 32;
    let (err, list) = send(&ops, req(READDIRPLUS, ROOT, &read_in(one as u32), &[]));
    assert_eq!((err, list.len()), (0, one));
    // Plain READDIR of the same handle: fuse_dirent only.
    let (err, list) = send(&ops, req(READDIR, ROOT, &read_in(4096), &[]));
    assert_eq!((err, list.len()), (0, 3 * 32));
    let (err, _) = send(
        &ops,
        req(RELEASEDIR, ROOT, &cat(&[&fh.to_ne_bytes(), &[0; 16]]), &[]),
    );
    assert_eq!(err, 0);
}

#[test]
fn a_file_created_written_and_read_through_ring_bytes() {
    let dir = TempDir::new("ring-wire-file");
    let ops = ops(&dir);
    // CREATE "f" O_RDWR 0640 (fuse_create_in: flags, mode, umask,
    // open_flags): entry_out then open_out.
    let create_in = cat(&[
        &(libc::O_RDWR as u32).to_ne_bytes(),
        &(libc::S_IFREG | 0o640).to_ne_bytes(),
        &[0; 8],
    ]);
    let (err, c) = send(&ops, req(CREATE, ROOT, &create_in, b"f\0"));
    assert_eq!((err, c.len()), (0, ENTRY_OUT + 16));
    let node = u64_at(&c, 0).unwrap();
    let fh = u64_at(&c, ENTRY_OUT).unwrap();
    assert_eq!(mode_of_entry(&c), libc::S_IFREG | 0o640);
    // WRITE 10,000 bytes at offset 3 (fuse_write_in: fh, offset, size,
    // write_flags, lock_owner, flags, padding).
    let data: Vec<u8> = (0..10_000u32).map(|i| (i % 251) as u8).collect();
    let write_in = cat(&[
        &fh.to_ne_bytes(),
        &3u64.to_ne_bytes(),
        &(data.len() as u32).to_ne_bytes(),
        &[0; 20],
    ]);
    let (err, w) = send(&ops, req(WRITE, node, &write_in, &data));
    assert_eq!((err, u32_at(&w, 0)), (0, Some(10_000)));
    // A WRITE whose size runs past its payload is refused.
    let mut short = write_in.clone();
    short[16..20].copy_from_slice(&20_000u32.to_ne_bytes());
    let (err, _) = send(&ops, req(WRITE, node, &short, &data));
    assert_eq!(err, libc::EINVAL);
    // READ it back (fuse_read_in).
    let read_in = cat(&[
        &fh.to_ne_bytes(),
        &0u64.to_ne_bytes(),
        &65_536u32.to_ne_bytes(),
        &[0; 20],
    ]);
    let (err, r) = send(&ops, req(READ, node, &read_in, &[]));
    assert_eq!((err, r.len()), (0, 10_003));
    assert_eq!(&r[..3], &[0, 0, 0]);
    assert_eq!(&r[3..], &data[..]);
    // SETATTR size 5 (FATTR_SIZE): the new size in the reply.
    let mut setattr_in = [0u8; 88];
    setattr_in[..4].copy_from_slice(&FATTR_SIZE.to_ne_bytes());
    setattr_in[16..24].copy_from_slice(&5u64.to_ne_bytes());
    let (err, a) = send(&ops, req(SETATTR, node, &setattr_in, &[]));
    assert_eq!((err, u64_at(&a, 16 + 8)), (0, Some(5)));
    // xattrs: SETXATTR (size, flags; name, value), GETXATTR of the
    // size, then of the value, LISTXATTR.
    let value = b"v4lue";
    let (err, _) = send(
        &ops,
        req(
            SETXATTR,
            node,
            &cat(&[&5u32.to_ne_bytes(), &[0; 4]]),
            &cat(&[b"user.k\0", value]),
        ),
    );
    assert_eq!(err, 0);
    let (err, s) = send(&ops, req(GETXATTR, node, &[0; 8], b"user.k\0"));
    assert_eq!((err, u32_at(&s, 0)), (0, Some(5)));
    let (err, v) = send(
        &ops,
        req(
            GETXATTR,
            node,
            &cat(&[&64u32.to_ne_bytes(), &[0; 4]]),
            b"user.k\0",
        ),
    );
    assert_eq!((err, v.as_slice()), (0, &value[..]));
    let (err, v) = send(
        &ops,
        req(
            GETXATTR,
            node,
            &cat(&[&2u32.to_ne_bytes(), &[0; 4]]),
            b"user.k\0",
        ),
    );
    assert_eq!((err, v.len()), (libc::ERANGE, 0));
    let (err, l) = send(
        &ops,
        req(LISTXATTR, node, &cat(&[&64u32.to_ne_bytes(), &[0; 4]]), &[]),
    );
    assert_eq!((err, l.as_slice()), (0, &b"user.k\0"[..]));
    // RELEASE, STATFS, then UNLINK; a LOOKUP then finds nothing.
    let (err, _) = send(
        &ops,
        req(RELEASE, node, &cat(&[&fh.to_ne_bytes(), &[0; 16]]), &[]),
    );
    assert_eq!(err, 0);
    let (err, s) = send(&ops, req(STATFS, ROOT, &[], &[]));
    assert_eq!((err, s.len()), (0, 80));
    assert_eq!(send(&ops, req(UNLINK, ROOT, &[], b"f\0")).0, 0);
    assert_eq!(
        u64_at(&send(&ops, req(LOOKUP, ROOT, &[], b"f\0")).1, 0),
        Some(0)
    );
}

#[test]
fn malformed_requests_get_an_errno() {
    let dir = TempDir::new("ring-wire-bad");
    let ops = ops(&dir);
    // A name without its NUL.
    assert_eq!(send(&ops, req(LOOKUP, ROOT, &[], b"abc")).0, libc::EINVAL);
    // An opcode we do not serve (LSEEK), and one that does not exist.
    assert_eq!(send(&ops, req(46, ROOT, &[0; 24], &[])).0, libc::ENOSYS);
    assert_eq!(send(&ops, req(9999, ROOT, &[], &[])).0, libc::ENOSYS);
    // A payload length beyond the buffer is cut to the buffer (the
    // name still ends at its NUL: "x" is not there).
    let mut r = req(LOOKUP, ROOT, &[], b"x\0");
    r.header.set_payload_size(u32::MAX as usize);
    let (err, e) = send(&ops, r);
    assert_eq!((err, u64_at(&e, 0)), (0, Some(0)));
    // A name that fills the whole buffer without a NUL.
    let mut r = req(LOOKUP, ROOT, &[], &[]);
    r.header.set_payload_size(r.payload.len());
    assert_eq!(send(&ops, r).0, libc::EINVAL);
    // Extensions (total_extlen, 8-byte units) are not part of the name.
    let mut r = req(LOOKUP, ROOT, &[], &cat(&[b"x\0", &[0; 8]]));
    put(r.header.as_mut_bytes(), 36, &1u16.to_ne_bytes());
    let (err, e) = send(&ops, r);
    assert_eq!((err, u64_at(&e, 0)), (0, Some(0)));
}

#[test]
fn without_allow_other_only_the_owner_is_served() {
    let dir = TempDir::new("ring-wire-owner");
    let ops = ops(&dir);
    let as_user = |uid: u32, mut r: Req| {
        put(r.header.as_mut_bytes(), 24, &uid.to_ne_bytes());
        serve(&ops, &mut r.header, &mut r.payload, Some(1000));
        i32::from_ne_bytes(r.header.as_bytes()[4..8].try_into().unwrap())
    };
    let mkdir_in = cat(&[&0o755u32.to_ne_bytes(), &0u32.to_ne_bytes()]);
    assert_eq!(
        as_user(1001, req(MKDIR, ROOT, &mkdir_in, b"x\0")),
        -libc::EACCES
    );
    assert_eq!(as_user(0, req(LOOKUP, ROOT, &[], b"x\0")), -libc::EACCES);
    assert_eq!(as_user(1000, req(MKDIR, ROOT, &mkdir_in, b"x\0")), 0);
    // I/O on an open file is served whoever the kernel sends it for
    // (here: a bad handle, so EBADF, not EACCES).
    let read_in = cat(&[&99u64.to_ne_bytes(), &[0; 32]]);
    assert_eq!(as_user(1001, req(READ, ROOT, &read_in, &[])), -libc::EBADF);
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    /// Whatever the header and payload hold, serving them answers
    /// with an errno or a reply and never panics.
    #[test]
    fn any_bytes_get_an_answer(
        opcode in 0u32..60,
        nodeid in prop_oneof![Just(1u64), any::<u64>()],
        op in proptest::collection::vec(any::<u8>(), 0..128),
        args in proptest::collection::vec(any::<u8>(), 0..600),
        claimed in prop_oneof![Just(None), any::<u32>().prop_map(Some)],
    ) {
        let dir = TempDir::new("ring-wire-prop");
        let ops = ops(&dir);
        let mut r = req(opcode, nodeid, &op, &args);
        if let Some(n) = claimed {
            r.header.set_payload_size(n as usize);
        }
        let _ = send(&ops, r);
    }
}
