//! Offline reading of the modes this kernel cannot instantiate (issue 14):
//! Adiantum (with and without DIRECT_KEY), AES-128-CBC-ESSIV/AES-128-CTS,
//! AES-256-XTS with AES-256-HCTR2 names, SM4-XTS/SM4-CTS.
//!
//! How the test images are made (no kernel can write them here): the
//! kernel fills an encrypted directory on a loop ext4 with a v2
//! AES-256-XTS/AES-256-CTS policy, the filesystem is unmounted, and the
//! kernel's plaintext view (names, contents, link targets) is recorded.
//! Then, on the image, every encrypted inode below the directory is
//! rewritten with the `fscrypt` crate for the other mode: its context gets
//! the new modes and flags (same nonce, same key identifier), each stored
//! name is decrypted with the old directory key and encrypted with the new
//! one (same length: the padded length does not depend on the mode), each
//! mapped data block is decrypted and re-encrypted at its data unit index,
//! each symlink blob is re-encrypted. Block mappings, sizes and inode
//! numbers are untouched. The htree index and the metadata checksums go
//! stale (they hash the ciphertext): the image is for the offline reader
//! only, and only listings with the key are compared (no-key names in an
//! htree directory carry the stale hash). The encryptor used for the
//! rewrite is checked first against the shared vectors
//! (`testdata/vectors/fscrypt_format_vectors.json`, filenames and contents
//! of the same mode and flags), so the rewritten bytes are those the kernel
//! would write. Then `image ls -R`, `image cat` and `image extract` must
//! show exactly the kernel's plaintext.
//!
//! Needs root and loop devices; skipped loudly otherwise.

use std::collections::{BTreeMap, HashSet};
use std::os::unix::fs::{FileExt, MetadataExt};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use fscrypt::{
    Context, EncryptionMode, FileType, InodeCrypt, InodeParams, MasterKey, Policy, PolicyFlags,
    PolicyV2,
};
use fscrypt_ext4::{EXT4_EXTENTS_FL, Ext4, InodeKind};
use test_support::TempDir;
use test_support::loopdev::{MKFS_4K, key64, scratch_ext4, unmount_retrying};

const BIN: &str = env!("CARGO_BIN_EXE_fscrypt-rs");

fn run(args: &[&str]) -> Output {
    test_support::run::output(Command::new(BIN).args(args), &[])
}

fn ok(args: &[&str]) -> Vec<u8> {
    let o = run(args);
    assert!(
        o.status.success(),
        "{args:?}: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    o.stdout
}

fn p(path: &Path) -> &str {
    path.to_str().expect("utf-8 path")
}

/// Relative path → file contents, link target (prefixed `->`), or `/` for
/// a directory.
fn walk(root: &Path) -> BTreeMap<String, Vec<u8>> {
    use std::os::unix::ffi::OsStrExt;
    let mut out = BTreeMap::new();
    let mut stack = vec![PathBuf::new()];
    while let Some(rel) = stack.pop() {
        for e in std::fs::read_dir(root.join(&rel)).expect("read_dir") {
            let e = e.expect("entry");
            let r = rel.join(e.file_name());
            let m = std::fs::symlink_metadata(e.path()).expect("stat");
            let v = if m.is_dir() {
                stack.push(r.clone());
                b"/".to_vec()
            } else if m.file_type().is_symlink() {
                let mut v = b"->".to_vec();
                v.extend_from_slice(
                    std::fs::read_link(e.path())
                        .expect("link")
                        .as_os_str()
                        .as_bytes(),
                );
                v
            } else {
                std::fs::read(e.path()).expect("read")
            };
            out.insert(r.to_string_lossy().into_owned(), v);
        }
    }
    out
}

fn populate(enc: &Path) {
    let names = enc.join("names");
    std::fs::create_dir(&names).expect("mkdir");
    for len in [1usize, 15, 16, 17, 31, 32, 33, 100, 200, 255] {
        let name: String = (0..len).map(|i| (b'a' + (i % 26) as u8) as char).collect();
        std::fs::write(names.join(&name), name.as_bytes()).expect("write");
    }
    for size in [0usize, 1, 4095, 4096, 4097, 3 * 4096 + 17] {
        let data: Vec<u8> = (0..size).map(|i| (i * 7 + size) as u8).collect();
        std::fs::write(enc.join(format!("f{size}")), data).expect("write");
    }
    let s = std::fs::File::create(enc.join("sparse")).expect("create");
    s.write_all_at(b"middle", 1 << 20).expect("write");
    s.set_len(3 << 20).expect("truncate");
    std::os::unix::fs::symlink("f1", enc.join("short-link")).expect("symlink");
    std::os::unix::fs::symlink("l".repeat(300), enc.join("long-link")).expect("symlink");
    std::fs::create_dir_all(enc.join("a/b")).expect("mkdir");
    std::fs::write(enc.join("a/b/deep"), b"deep").expect("write");
    rustix::fs::sync();
}

/// The other mode (and flags) to rewrite the image with.
struct Target {
    name: &'static str,
    contents: EncryptionMode,
    filenames: EncryptionMode,
    direct_key: bool,
    /// What `image info` shows of the rewritten policy.
    policy_shown: &'static str,
}

fn vectors() -> serde_json::Value {
    test_support::vectors::load("fscrypt_format_vectors.json")
}

fn hexs(v: &serde_json::Value) -> Vec<u8> {
    hex::decode(v.as_str().expect("hex string")).expect("hex")
}

fn h16(v: &serde_json::Value) -> [u8; 16] {
    hexs(v).try_into().expect("16 bytes")
}

fn vector_master(all: &serde_json::Value, e: &serde_json::Value) -> MasterKey {
    let name = e["master_key"].as_str().expect("master_key");
    let bytes = match all["inputs"][name].as_str() {
        Some(h) => hex::decode(h).expect("hex"),
        None => hex::decode(name).expect("hex"),
    };
    MasterKey::new(&bytes).expect("master")
}

fn flags_of(e: &serde_json::Value) -> u8 {
    let f = e["flags"].as_str().expect("flags");
    u8::from_str_radix(f.trim_start_matches("0x"), 16).expect("flags hex")
}

/// The `fscrypt` encryptor of `t` reproduces the shared vectors of its
/// modes (a filenames and a contents vector each, v2, same DIRECT_KEY).
fn check_vectors(t: &Target) {
    let all = vectors();
    let dk = |e: &serde_json::Value| (flags_of(e) & 0x04 != 0) == t.direct_key;
    let f = all["filenames"]
        .as_array()
        .expect("filenames")
        .iter()
        .find(|e| {
            e["policy_version"] == 2
                && e["filenames_mode"] == u64::from(t.filenames.0)
                && flags_of(e) & 0x18 == 0
                && dk(e)
        })
        .unwrap_or_else(|| panic!("{}: no filenames vector", t.name));
    let mk = vector_master(&all, f);
    let policy = Policy::V2(PolicyV2 {
        contents_mode: t.contents,
        filenames_mode: t.filenames,
        flags: PolicyFlags(flags_of(f)),
        log2_data_unit_size: 0,
        master_key_identifier: mk.identifier(),
    });
    let params = InodeParams {
        file_type: FileType::Directory,
        ino: f["dir_inode_number"].as_u64().expect("ino"),
        fs_uuid: h16(&f["fs_uuid"]),
        fs_block_size: 4096,
    };
    let d = InodeCrypt::new(&mk, &Context::new(&policy, h16(&f["dir_nonce"])), &params)
        .expect("dir crypt");
    let ct = d
        .encrypt_filename(f["name"].as_str().expect("name").as_bytes())
        .expect("encrypt");
    assert_eq!(
        hex::encode(&ct[..]),
        f["ctext"].as_str().expect("ctext"),
        "{}: name vector",
        t.name
    );

    let Some(c) = all["contents"]
        .as_array()
        .expect("contents")
        .iter()
        .find(|e| {
            e["policy_version"] == 2
                && e["contents_mode"] == u64::from(t.contents.0)
                && e["data_unit_size"] == 4096
                && flags_of(e) & 0x18 == 0
                && dk(e)
        })
    else {
        eprintln!("note: {}: no contents vector for these flags", t.name);
        return;
    };
    let mk = vector_master(&all, c);
    let policy = Policy::V2(PolicyV2 {
        contents_mode: t.contents,
        filenames_mode: t.filenames,
        flags: PolicyFlags(flags_of(c)),
        log2_data_unit_size: 0,
        master_key_identifier: mk.identifier(),
    });
    let params = InodeParams {
        file_type: FileType::Regular,
        ino: c["inode_number"].as_u64().expect("ino"),
        fs_uuid: h16(&c["fs_uuid"]),
        fs_block_size: 4096,
    };
    let r = InodeCrypt::new(&mk, &Context::new(&policy, h16(&c["nonce"])), &params)
        .expect("file crypt");
    let mut data = hexs(&c["ptext"]);
    r.encrypt_data_units(
        c["first_data_unit_index"].as_u64().expect("index"),
        &mut data,
    )
    .expect("encrypt");
    assert_eq!(
        hex::encode(&data),
        c["ctext"].as_str().expect("ctext"),
        "{}: contents vector",
        t.name
    );
}

/// Rewrite every encrypted inode reachable from `top` for `t` (see the
/// module doc). Returns the number of inodes rewritten.
fn rewrite(image: &Path, top: u32, master: &MasterKey, t: &Target) -> usize {
    let disk = Ext4::open(image).expect("open");
    let out = std::fs::OpenOptions::new()
        .write(true)
        .open(image)
        .expect("open for writing");
    let sb = disk.superblock().clone();
    let bs = u64::from(sb.block_size);
    let mut done = HashSet::new();
    let mut stack = vec![top];
    while let Some(ino) = stack.pop() {
        if !done.insert(ino) {
            continue;
        }
        let inode = disk.read_inode(ino).expect("inode");
        let ctx_bytes = disk
            .encryption_context(&inode)
            .expect("xattr")
            .expect("context");
        let ctx = Context::parse(&ctx_bytes).expect("context");
        let Policy::V2(old_p) = ctx.policy() else {
            panic!("the kernel image has a v2 policy")
        };
        let mut flags = old_p.flags.0 & 0x03;
        if t.direct_key {
            flags |= 0x04;
        }
        let new_p = Policy::V2(PolicyV2 {
            contents_mode: t.contents,
            filenames_mode: t.filenames,
            flags: PolicyFlags(flags),
            ..old_p
        });
        let new_ctx = Context::new(&new_p, *ctx.nonce());
        let file_type = match inode.kind() {
            InodeKind::Regular => FileType::Regular,
            InodeKind::Directory => FileType::Directory,
            InodeKind::Symlink => FileType::Symlink,
            InodeKind::Other => panic!("no special files in the tree"),
        };
        let params = InodeParams {
            file_type,
            ino: u64::from(ino),
            fs_uuid: sb.uuid,
            fs_block_size: sb.block_size,
        };
        let old = InodeCrypt::new(master, &ctx, &params).expect("old crypt");
        let new = InodeCrypt::new(master, &new_ctx, &params).expect("new crypt");
        let ioff = disk.inode_offset(ino).expect("inode offset");
        let at = inode
            .raw
            .windows(ctx_bytes.len())
            .position(|w| w == ctx_bytes.as_slice())
            .expect("context in the inode") as u64;
        let new_bytes = new_ctx.to_bytes();
        assert_eq!(new_bytes.len(), ctx_bytes.len());
        out.write_all_at(&new_bytes, ioff + at)
            .expect("write context");
        match inode.kind() {
            InodeKind::Directory => {
                for e in disk.extents(&inode).expect("extents") {
                    for i in 0..u64::from(e.len) {
                        let blk = e.physical + i;
                        let mut b = vec![0u8; bs as usize];
                        disk.read_blocks(blk, &mut b).expect("dir block");
                        let mut off = 0usize;
                        while off + 8 <= b.len() {
                            let d_ino = u32::from_le_bytes(b[off..off + 4].try_into().expect("4"));
                            let rec = usize::from(u16::from_le_bytes([b[off + 4], b[off + 5]]));
                            let nl = usize::from(b[off + 6]);
                            assert!(rec >= 8, "a sane kernel-made directory");
                            let name = b[off + 8..off + 8 + nl].to_vec();
                            if d_ino != 0 && name != b"." && name != b".." && nl > 0 {
                                let plain = old.decrypt_filename(&name).expect("decrypt name");
                                let ct = new.encrypt_filename(&plain).expect("encrypt name");
                                assert_eq!(ct.len(), nl, "same stored name length");
                                out.write_all_at(&ct, blk * bs + off as u64 + 8)
                                    .expect("write name");
                                stack.push(d_ino);
                            }
                            off += rec;
                        }
                    }
                }
            }
            InodeKind::Regular => {
                let units = bs / old.data_unit_size() as u64;
                for e in disk.extents(&inode).expect("extents") {
                    if e.unwritten {
                        continue;
                    }
                    let mut b = vec![0u8; (u64::from(e.len) * bs) as usize];
                    disk.read_blocks(e.physical, &mut b).expect("data");
                    old.decrypt_data_units(e.logical * units, &mut b)
                        .expect("decrypt");
                    new.encrypt_data_units(e.logical * units, &mut b)
                        .expect("encrypt");
                    out.write_all_at(&b, e.physical * bs).expect("write data");
                }
            }
            InodeKind::Symlink => {
                let xattr_sectors = if inode.file_acl != 0 { bs / 512 } else { 0 };
                let fast = inode.flags & EXT4_EXTENTS_FL == 0 && inode.blocks <= xattr_sectors;
                let where_ = if fast {
                    ioff + 0x28
                } else {
                    disk.extents(&inode).expect("extents")[0].physical * bs
                };
                let area = disk.symlink_area(&inode).expect("area");
                let blob = &area[..inode.size as usize];
                let target = fscrypt::hooks::get_symlink(Some(&old), blob).expect("target");
                let nb = new
                    .encrypt_symlink(&target, bs as usize)
                    .expect("encrypt link");
                // Kernel-stored length = the blob with or without its NUL.
                let len = blob.len().min(nb.len());
                assert!(nb.len() - len <= 1, "same blob length");
                out.write_all_at(&nb[..len], where_).expect("write link");
            }
            InodeKind::Other => {}
        }
    }
    out.sync_all().expect("sync");
    done.len()
}

fn mode_case(test: &str, t: &Target) {
    check_vectors(t);
    let Some(mut fs) = scratch_ext4(test, 32, MKFS_4K) else {
        return;
    };
    let tmp = TempDir::new(test);
    let kf = tmp.path().join("key");
    std::fs::write(&kf, key64(3)).expect("key file");
    let mnt = fs.mount_point().to_path_buf();
    let id = String::from_utf8(ok(&["add-key", p(&mnt), "--key-file", p(&kf)]))
        .expect("utf-8")
        .trim()
        .to_string();
    let enc = mnt.join("enc");
    std::fs::create_dir(&enc).expect("mkdir");
    ok(&["set-policy", &id, p(&enc)]);
    populate(&enc);
    let kernel = walk(&enc);
    let enc_ino = std::fs::metadata(&enc).expect("stat").ino() as u32;
    unmount_retrying(&mut fs);
    let image = tmp.path().join("rewritten.img");
    assert!(
        Command::new("cp")
            .args(["--sparse=always", p(fs.image()), p(&image)])
            .status()
            .expect("cp")
            .success()
    );
    let master = MasterKey::new(&key64(3)).expect("master");
    let n = rewrite(&image, enc_ino, &master, t);
    assert!(n >= kernel.len(), "every object rewritten ({n})");
    let img = p(&image);

    // The stored bytes changed; the plaintext did not.
    let before = ok(&[
        "image",
        "cat",
        p(fs.image()),
        "/enc/f4096",
        "--key-file",
        p(&kf),
    ]);
    assert_eq!(
        ok(&["image", "cat", img, "/enc/f4096", "--key-file", p(&kf)]),
        before
    );
    let info: serde_json::Value =
        serde_json::from_slice(&ok(&["image", "info", img, "--key-file", p(&kf), "--json"]))
            .expect("json");
    let shown = info["encrypted_directories"][0].to_string();
    assert!(shown.contains(&id), "{shown}");
    assert!(shown.contains(t.policy_shown), "{}: {shown}", t.name);
    assert_eq!(
        info["encrypted_directories"][0]["unlocked"], true,
        "{shown}"
    );

    let mut listed: Vec<String> = String::from_utf8(ok(&[
        "image",
        "ls",
        img,
        "/enc",
        "-R",
        "--key-file",
        p(&kf),
    ]))
    .expect("utf-8")
    .lines()
    .map(str::to_string)
    .collect();
    listed.sort();
    assert_eq!(
        listed,
        kernel.keys().cloned().collect::<Vec<_>>(),
        "{}",
        t.name
    );
    let dest = tmp.path().join("out");
    ok(&[
        "image",
        "extract",
        img,
        "/enc",
        p(&dest),
        "--key-file",
        p(&kf),
        "-q",
    ]);
    assert_eq!(walk(&dest), kernel, "{}: extracted tree", t.name);
}

#[test]
fn offline_adiantum() {
    mode_case(
        "offline_adiantum",
        &Target {
            name: "Adiantum",
            policy_shown: "Adiantum/Adiantum",
            contents: EncryptionMode::ADIANTUM,
            filenames: EncryptionMode::ADIANTUM,
            direct_key: false,
        },
    );
}

#[test]
fn offline_adiantum_direct_key() {
    mode_case(
        "offline_adiantum_direct_key",
        &Target {
            name: "Adiantum DIRECT_KEY",
            policy_shown: "DIRECT_KEY",
            contents: EncryptionMode::ADIANTUM,
            filenames: EncryptionMode::ADIANTUM,
            direct_key: true,
        },
    );
}

#[test]
fn offline_aes_128_cbc_essiv() {
    mode_case(
        "offline_aes_128_cbc_essiv",
        &Target {
            name: "AES-128-CBC-ESSIV/AES-128-CTS",
            policy_shown: "AES-128-CBC-ESSIV",
            contents: EncryptionMode::AES_128_CBC,
            filenames: EncryptionMode::AES_128_CTS,
            direct_key: false,
        },
    );
}

#[test]
fn offline_hctr2_names() {
    mode_case(
        "offline_hctr2_names",
        &Target {
            name: "AES-256-XTS/AES-256-HCTR2",
            policy_shown: "HCTR2",
            contents: EncryptionMode::AES_256_XTS,
            filenames: EncryptionMode::AES_256_HCTR2,
            direct_key: false,
        },
    );
}

#[test]
fn offline_sm4() {
    mode_case(
        "offline_sm4",
        &Target {
            name: "SM4-XTS/SM4-CTS",
            policy_shown: "SM4-XTS",
            contents: EncryptionMode::SM4_XTS,
            filenames: EncryptionMode::SM4_CTS,
            direct_key: false,
        },
    );
}
