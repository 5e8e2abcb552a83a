//! Tests against the real kernel on scratch loop-device ext4 filesystems
//! (issue 4 §4 and the kernel comparison test of issue 3).
//!
//! Each test builds its own filesystem with [`LoopExt4`] and tears it down on
//! drop. Without root or loop devices the tests print why and return.

use std::io::Write;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use fscrypt::{
    Context, EncryptionMode, FileType, InodeCrypt, InodeParams, MasterKey, Policy, PolicyFlags,
    PolicyV1, PolicyV2,
};
use fscrypt_ext4::Ext4;
use fscrypt_linux::keyring::{self, KeyPresence, KeySpec, RemovalOutcome};
use fscrypt_linux::verify::{self, Outcome};
use fscrypt_linux::{Error, policy};
use test_support::bytes::XorShift;
use test_support::loopdev::{MKFS_4K, flip_byte, physical_block, scratch_ext4};

/// Deterministic bytes (no RNG dependency).
fn pattern(seed: u64, len: usize) -> Vec<u8> {
    let mut x = XorShift(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1);
    (0..len).map(|_| (x.next_u64() >> 24) as u8).collect()
}

fn name_of_len(len: usize, seed: u64) -> String {
    const ALNUM: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
    pattern(seed * 1000 + len as u64, len)
        .iter()
        .map(|b| ALNUM[*b as usize % ALNUM.len()] as char)
        .collect()
}

fn master_key_bytes(seed: u64) -> Vec<u8> {
    pattern(seed, 64)
}

#[test]
fn kernel_key_identifiers_match() {
    let Some(fs) = scratch_ext4("kernel_key_identifiers_match", 16, MKFS_4K) else {
        return;
    };
    let mnt = fs.mount_point();
    let mut k64 = vec![b'a'; 32];
    k64.extend_from_slice(&[b'1'; 32]);
    let cases: [(&[u8], &str); 3] = [
        (&k64, "912ae510a458723a839a9fad701538ac"),
        (
            b"abcdefghijklmnopqrstuvwxyz0123456",
            "1c2d6754b6cc7daacb599875d7faf9bb",
        ),
        (b"abcdefghijklmnop", "7eb80af3f24ef086726a4cea3a154ce0"),
    ];
    for (key, want) in cases {
        let id = keyring::add_key_v2(mnt, key).expect("add key");
        assert_eq!(
            id.to_string(),
            want,
            "kernel identifier for a {}-byte key",
            key.len()
        );
        let ours = MasterKey::new(key).expect("master key").identifier();
        assert_eq!(ours, id, "fscrypt identifier equals the kernel's");
        let st = keyring::key_status(mnt, KeySpec::Identifier(id)).expect("status");
        assert_eq!(st.presence, KeyPresence::Present);
        assert!(st.added_by_self);
        assert_eq!(st.user_count, 1);
        assert_eq!(
            keyring::remove_key(mnt, KeySpec::Identifier(id), false).expect("remove"),
            RemovalOutcome::Removed
        );
        let st = keyring::key_status(mnt, KeySpec::Identifier(id)).expect("status");
        assert_eq!(st.presence, KeyPresence::Absent);
        let e = keyring::remove_key(mnt, KeySpec::Identifier(id), false).unwrap_err();
        assert!(matches!(e, Error::KeyNotPresent { .. }), "{e}");
    }
    // 15- and 65-byte keys never reach the kernel.
    for len in [15, 65] {
        let e = keyring::add_key_v2(mnt, &vec![7u8; len]).unwrap_err();
        assert!(
            matches!(e, Error::KeyLength { len: l, .. } if l == len),
            "{e}"
        );
    }
    // Hardware-wrapped keys: refused by this kernel/machine with our message.
    let e = keyring::add_hw_wrapped_key(mnt, &[9u8; 100]).unwrap_err();
    assert!(
        matches!(
            e,
            Error::HwWrappedNotSupported { .. } | Error::InvalidArgument { .. }
        ),
        "{e}"
    );
    eprintln!("hw-wrapped add-key refusal: {e}");
    let e = fscrypt_linux::blkcrypto::generate_key(fs.device()).unwrap_err();
    assert!(matches!(e, Error::HwWrappedNotSupported { .. }), "{e}");
    eprintln!("BLKCRYPTOGENERATEKEY refusal: {e}");
}

#[test]
fn kernel_policy_round_trips_and_refusals() {
    let Some(fs) = scratch_ext4("kernel_policy_round_trips_and_refusals", 32, MKFS_4K) else {
        return;
    };
    let mnt = fs.mount_point();
    let key = master_key_bytes(1);
    let id = keyring::add_key_v2(mnt, &key).expect("add v2 key");
    let desc = fscrypt::KeyDescriptor([1, 2, 3, 4, 5, 6, 7, 8]);
    keyring::add_key_v1(mnt, desc, &key).expect("add v1 key");

    let pairs: &[(u8, u8)] = &[
        (1, 4),
        (5, 6),
        (9, 9),
        (1, 10),
        (7, 8),
        (1, 6),
        (5, 4),
        (4, 4),
    ];
    let flag_sets: &[u8] = &[0, 0x04, 0x08, 0x10, 0x0C, 0x18];
    let (mut accepted, mut refused, mut n) = (0, 0, 0);
    let mut accepted_list = Vec::new();
    for &(c, f) in pairs {
        for pad in [4usize, 8, 16, 32] {
            for &extra in flag_sets {
                for du in [0u8, 9, 10, 12] {
                    for v1 in [false, true] {
                        if v1 && du != 0 {
                            continue;
                        }
                        let flags = PolicyFlags(
                            PolicyFlags(0).with_padding(pad).expect("pad").bits() | extra,
                        );
                        let p = if v1 {
                            Policy::V1(PolicyV1 {
                                contents_mode: EncryptionMode(c),
                                filenames_mode: EncryptionMode(f),
                                flags,
                                master_key_descriptor: desc,
                            })
                        } else {
                            Policy::V2(PolicyV2 {
                                contents_mode: EncryptionMode(c),
                                filenames_mode: EncryptionMode(f),
                                flags,
                                log2_data_unit_size: du,
                                master_key_identifier: id,
                            })
                        };
                        n += 1;
                        let dir = mnt.join(format!("p{n}"));
                        std::fs::create_dir(&dir).expect("mkdir");
                        match policy::set_policy(&dir, &p) {
                            Ok(()) => {
                                let got = policy::get_policy(&dir).expect("get policy");
                                assert_eq!(got, p, "round trip of {}", policy::describe(&p));
                                accepted += 1;
                                accepted_list.push(policy::describe(&p));
                            }
                            Err(Error::PolicyRejected {
                                policy: printed, ..
                            }) => {
                                assert_eq!(printed, policy::describe(&p));
                                refused += 1;
                            }
                            Err(e) => panic!("unexpected error for {}: {e}", policy::describe(&p)),
                        }
                    }
                }
            }
        }
    }
    eprintln!(
        "set/get policy: {n} policies tried, {accepted} accepted and round-tripped, {refused} refused (EINVAL)"
    );
    let mut kinds: Vec<String> = accepted_list
        .iter()
        .map(|a| {
            let a = a.split(" key ").next().unwrap_or(a);
            let a = a.split(" descriptor").next().unwrap_or(a);
            let a = a.replace(" data unit block size", "");
            [
                "PAD_4|", "PAD_8|", "PAD_16|", "PAD_32|", "PAD_4", "PAD_8", "PAD_16", "PAD_32",
            ]
            .iter()
            .fold(a, |a, p| a.replacen(p, "", 1))
        })
        .collect();
    kinds.sort();
    kinds.dedup();
    eprintln!("accepted by this kernel (every padding): {kinds:#?}");
    // What this kernel must accept and refuse.
    let must_accept = [
        "v2 AES-256-XTS/AES-256-CTS-CBC PAD_32 data unit block size",
        "v2 AES-128-CBC-ESSIV/AES-128-CTS-CBC PAD_4 data unit block size",
        "v2 AES-256-XTS/AES-256-CTS-CBC PAD_32|IV_INO_LBLK_64 data unit block size",
        "v2 AES-256-XTS/AES-256-CTS-CBC PAD_16|IV_INO_LBLK_32 data unit block size",
        "v2 AES-256-XTS/AES-256-CTS-CBC PAD_32 data unit 512",
        "v1 AES-256-XTS/AES-256-CTS-CBC PAD_32 descriptor",
        "v1 AES-128-CBC-ESSIV/AES-128-CTS-CBC PAD_8 descriptor",
    ];
    for want in must_accept {
        assert!(
            accepted_list.iter().any(|a| a.starts_with(want)),
            "kernel should accept {want}"
        );
    }
    assert!(
        !accepted_list
            .iter()
            .any(|a| a.contains("AES-256-XTS/AES-128-CTS")
                || a.contains("DIRECT_KEY") && !a.contains("Adiantum")
                || a.starts_with("v1") && a.contains("IV_INO")
                || a.contains("IV_INO_LBLK_64|IV_INO_LBLK_32")
                || a.contains("IV_INO_LBLK_32 data unit 512")),
        "the kernel accepted a policy it must refuse: {accepted_list:#?}"
    );

    // EEXIST, ENOTEMPTY, ENOTDIR, ENODATA.
    let d = mnt.join("exists");
    std::fs::create_dir(&d).expect("mkdir");
    let p1 = Policy::V2(PolicyV2::new_default(id));
    policy::set_policy(&d, &p1).expect("set");
    policy::set_policy(&d, &p1).expect("identical policy again is fine");
    let mut p2v = PolicyV2::new_default(id);
    p2v.flags = PolicyFlags::PAD_16;
    let e = policy::set_policy(&d, &Policy::V2(p2v)).unwrap_err();
    assert!(matches!(e, Error::PolicyAlreadySet { .. }), "{e}");
    let ne = mnt.join("nonempty");
    std::fs::create_dir(&ne).expect("mkdir");
    std::fs::write(ne.join("f"), b"x").expect("write");
    let e = policy::set_policy(&ne, &p1).unwrap_err();
    assert!(matches!(e, Error::DirectoryNotEmpty { .. }), "{e}");
    let e = policy::set_policy(&ne.join("f"), &p1).unwrap_err();
    assert!(matches!(e, Error::NotADirectory { .. }), "{e}");
    let e = policy::get_policy(&ne).unwrap_err();
    assert!(matches!(e, Error::NotEncrypted { .. }), "{e}");
    let e = policy::set_policy(mnt, &p1).unwrap_err();
    assert!(
        matches!(
            e,
            Error::PermissionDenied { .. } | Error::DirectoryNotEmpty { .. }
        ),
        "{e}"
    );

    // A filesystem without the encrypt feature.
    drop(fs);
    let Some(plain) = scratch_ext4("kernel_policy (no encrypt feature)", 16, &["-b", "4096"])
    else {
        return;
    };
    let d = plain.mount_point().join("d");
    std::fs::create_dir(&d).expect("mkdir");
    let e = policy::set_policy(&d, &p1).unwrap_err();
    assert!(matches!(e, Error::EncryptionNotSupported { .. }), "{e}");
    assert!(e.to_string().contains("tune2fs -O encrypt"), "{e}");
}

#[test]
fn kernel_remove_key_with_open_file() {
    let Some(fs) = scratch_ext4("kernel_remove_key_with_open_file", 16, MKFS_4K) else {
        return;
    };
    let mnt = fs.mount_point();
    let id = keyring::add_key_v2(mnt, &master_key_bytes(2)).expect("add");
    let d = mnt.join("d");
    std::fs::create_dir(&d).expect("mkdir");
    policy::set_policy(&d, &Policy::V2(PolicyV2::new_default(id))).expect("set");
    std::fs::write(d.join("f"), b"hello").expect("write");
    let open = std::fs::File::open(d.join("f")).expect("open");
    let spec = KeySpec::Identifier(id);
    assert_eq!(
        keyring::remove_key(mnt, spec, false).expect("remove"),
        RemovalOutcome::FilesBusy
    );
    assert_eq!(
        keyring::key_status(mnt, spec).expect("status").presence,
        KeyPresence::IncompletelyRemoved
    );
    drop(open);
    assert_eq!(
        keyring::remove_key(mnt, spec, false).expect("retry"),
        RemovalOutcome::Removed
    );
    assert_eq!(
        keyring::key_status(mnt, spec).expect("status").presence,
        KeyPresence::Absent
    );
    // Without the key the file cannot be opened.
    assert!(std::fs::read(d.join("f")).is_err());
}

/// One policy configuration of the comparison test.
struct Config {
    name: &'static str,
    v1: bool,
    contents: u8,
    filenames: u8,
    extra_flags: u8,
    log2_du: u8,
}

const FILE_SIZES: &[usize] = &[0, 1, 4095, 4096, 4097, 3 * 4096];

/// What [`build_tree`] made.
struct Tree {
    /// Regular files with their contents.
    files: Vec<(PathBuf, Vec<u8>)>,
    /// Seed of the generated names.
    seed: u64,
    /// Whether the kernel could create regular files (false: it lacks the
    /// contents cipher, ENOPKG; names were made as directories instead).
    contents_supported: bool,
}

impl Tree {
    fn objects(&self) -> u64 {
        // top + names dir + 255 names + data dir + files + 2 symlinks
        1 + 1 + 255 + 1 + self.files.len() as u64 + 2
    }
}

/// Build the tree of one configuration for one padding under `top`.
fn build_tree(top: &Path, seed: u64, block: usize) -> Tree {
    let names = top.join("names");
    std::fs::create_dir(&names).expect("mkdir names");
    let mut contents_supported = true;
    for len in 1..=255usize {
        let p = names.join(name_of_len(len, seed));
        if contents_supported {
            match std::fs::write(&p, b"") {
                Ok(()) => continue,
                Err(e) if e.raw_os_error() == Some(libc::ENOPKG) => {
                    eprintln!(
                        "\n*** {}: the kernel lacks this policy's contents cipher (ENOPKG): \
                         names and symlinks are compared, file contents are not ***\n",
                        top.display()
                    );
                    contents_supported = false;
                }
                Err(e) => panic!("create {}: {e}", p.display()),
            }
        }
        std::fs::create_dir(&p).expect("mkdir name");
    }
    let data = top.join("data");
    std::fs::create_dir(&data).expect("mkdir data");
    let mut files = Vec::new();
    if contents_supported {
        for (i, &size) in FILE_SIZES.iter().enumerate() {
            let size = if size == 3 * 4096 { 3 * block } else { size };
            let content = pattern(seed * 100 + i as u64, size);
            let p = data.join(format!("size{size}"));
            std::fs::write(&p, &content).expect("write file");
            files.push((p, content));
        }
        // A file with a hole in the middle: blocks 0 and 2 written.
        let p = data.join("hole");
        let mut f = std::fs::File::create(&p).expect("create hole file");
        let a = pattern(seed * 100 + 50, block);
        let b = pattern(seed * 100 + 51, block);
        f.write_all(&a).expect("write");
        use std::os::unix::fs::FileExt;
        f.write_all_at(&b, 2 * block as u64).expect("write at");
        let mut content = a;
        content.resize(2 * block, 0);
        content.extend_from_slice(&b);
        files.push((p, content));
        // Preallocated (unwritten) blocks after written data: read as zeros.
        let p = data.join("prealloc");
        let f = std::fs::OpenOptions::new()
            .create(true)
            .truncate(true)
            .write(true)
            .open(&p)
            .expect("create prealloc");
        let head = pattern(seed * 100 + 60, block / 2);
        (&f).write_all(&head).expect("write");
        rustix::fs::fallocate(&f, rustix::fs::FallocateFlags::empty(), 0, 3 * block as u64)
            .expect("fallocate");
        let mut content = head;
        content.resize(3 * block, 0);
        files.push((p, content));
        // A hard link: one file, two names in the directory.
        std::fs::hard_link(data.join("hole"), data.join("hole-link")).expect("link");
    }
    // Symlinks: fast (short, blob in i_block) and slow (blob in a block).
    std::os::unix::fs::symlink("short/target", data.join("fastlink")).expect("symlink");
    let long: String = "x/".repeat(block / 2 - 40);
    std::os::unix::fs::symlink(&long, data.join("slowlink")).expect("symlink");
    Tree {
        seed,
        files,
        contents_supported,
    }
}

fn policy_for(
    c: &Config,
    pad: usize,
    id: fscrypt::KeyIdentifier,
    desc: fscrypt::KeyDescriptor,
) -> Policy {
    let flags = PolicyFlags(PolicyFlags(0).with_padding(pad).expect("pad").bits() | c.extra_flags);
    if c.v1 {
        Policy::V1(PolicyV1 {
            contents_mode: EncryptionMode(c.contents),
            filenames_mode: EncryptionMode(c.filenames),
            flags,
            master_key_descriptor: desc,
        })
    } else {
        Policy::V2(PolicyV2 {
            contents_mode: EncryptionMode(c.contents),
            filenames_mode: EncryptionMode(c.filenames),
            flags,
            log2_data_unit_size: c.log2_du,
            master_key_identifier: id,
        })
    }
}

/// Runs every configuration on one image; returns the number of
/// comparisons (objects verified ok).
fn compare_on_image(test: &str, mkfs: &[&str], block: usize, configs: &[Config]) -> u64 {
    let Some(fs) = scratch_ext4(test, 96, mkfs) else {
        return 0;
    };
    let mnt = fs.mount_point();
    let raw = master_key_bytes(3);
    let master = MasterKey::new(&raw).expect("master");
    let id = keyring::add_key_v2(mnt, &raw).expect("add v2 key");
    assert_eq!(id, master.identifier());
    let desc = fscrypt::KeyDescriptor(*b"fscrypt1");
    keyring::add_key_v1(mnt, desc, &raw).expect("add v1 key");

    let mut total = 0u64;
    let mut trees = Vec::new();
    for (ci, c) in configs.iter().enumerate() {
        for pad in [4usize, 8, 16, 32] {
            let p = policy_for(c, pad, id, desc);
            let top = mnt.join(format!("{}-pad{pad}", c.name));
            std::fs::create_dir(&top).expect("mkdir top");
            if let Err(e) = policy::set_policy(&top, &p) {
                eprintln!(
                    "{test}: kernel refused {} ({e}); not compared",
                    policy::describe(&p)
                );
                std::fs::remove_dir(&top).expect("rmdir");
                continue;
            }
            let tree = build_tree(&top, ci as u64 * 10 + pad as u64, block);
            trees.push((top, p, tree));
        }
    }
    // Verify each tree with the verify engine (the comparison).
    for (top, p, tree) in &trees {
        let mut bad = Vec::new();
        let s = verify::verify_tree(top, &master, |r| {
            if r.outcome != Outcome::Ok {
                bad.push(format!("{} {:?}", r.path.display(), r.outcome));
            }
        })
        .expect("verify runs");
        assert!(bad.is_empty(), "{}: {bad:#?}", policy::describe(p));
        assert_eq!(s.mismatched + s.errors, 0);
        let _ = p;
        assert_eq!(s.ok, tree_objects(&trees, top), "{}", top.display());
        eprintln!(
            "{test}: {:<72} {} objects ok ({} file bytes){}",
            policy::describe(p),
            s.ok,
            s.file_bytes,
            if tree.contents_supported {
                ""
            } else {
                " [contents cipher missing in kernel]"
            }
        );
        total += s.ok;
    }

    // Independent end-to-end checks (not through the verify engine).
    rustix::fs::sync();
    let disk = Ext4::open(fs.device()).expect("open device");
    let sb = disk.superblock().clone();
    assert_eq!(sb.block_size as usize, block);
    for (top, p, tree) in &trees {
        let written = &tree.files;
        // 1. Decrypt the raw ciphertext of the 4097-byte (or hole) file
        //    with fscrypt and compare to what was written.
        for (path, content) in written.iter().filter(|(p, _)| {
            let n = p.file_name().and_then(|n| n.to_str()).unwrap_or("");
            n == "size4097" || n == "hole"
        }) {
            let ino = std::fs::metadata(path).expect("stat").ino();
            let inode = disk.read_inode(ino as u32).expect("inode");
            let ctx = Context::parse(
                &disk
                    .encryption_context(&inode)
                    .expect("xattr")
                    .expect("ctx"),
            )
            .expect("context parses");
            assert_eq!(ctx.policy(), *p, "on-disk context carries the policy");
            // 2. The kernel's nonce ioctl equals the on-disk nonce.
            assert_eq!(&policy::get_nonce(path).expect("nonce"), ctx.nonce());
            let crypt = InodeCrypt::new(
                &master,
                &ctx,
                &InodeParams {
                    file_type: FileType::Regular,
                    ino,
                    fs_uuid: sb.uuid,
                    fs_block_size: sb.block_size,
                },
            )
            .expect("inode crypt");
            let extents = disk.extents(&inode).expect("extents");
            let per_block = block / crypt.data_unit_size();
            let mut plain = Vec::new();
            for lblk in 0..content.len().div_ceil(block) as u64 {
                match disk.read_logical_block(&extents, lblk).expect("read") {
                    Some(mut ct) => {
                        crypt
                            .decrypt_data_units(lblk * per_block as u64, &mut ct)
                            .expect("decrypt");
                        plain.extend_from_slice(&ct);
                    }
                    None => plain.extend(std::iter::repeat_n(0u8, block)),
                }
            }
            assert_eq!(&plain[..content.len()], &content[..], "{}", path.display());
            assert!(plain[content.len()..].iter().all(|&b| b == 0), "zero tail");
        }
        // 3. Decrypt every stored name of the names dir and compare with
        //    the names created; the directory nonce matches the ioctl.
        let names_dir = top.join("names");
        let dino = std::fs::metadata(&names_dir).expect("stat").ino();
        let dinode = disk.read_inode(dino as u32).expect("dir inode");
        let dctx = Context::parse(&disk.encryption_context(&dinode).expect("x").expect("ctx"))
            .expect("ctx");
        assert_eq!(&policy::get_nonce(&names_dir).expect("nonce"), dctx.nonce());
        let dcrypt = InodeCrypt::new(
            &master,
            &dctx,
            &InodeParams {
                file_type: FileType::Directory,
                ino: dino,
                fs_uuid: sb.uuid,
                fs_block_size: sb.block_size,
            },
        )
        .expect("dir crypt");
        let mut decrypted: Vec<Vec<u8>> = disk
            .dir_entries(&dinode)
            .expect("entries")
            .iter()
            .map(|e| {
                dcrypt
                    .decrypt_filename(&e.name)
                    .expect("decrypt name")
                    .to_vec()
            })
            .collect();
        decrypted.sort();
        let seed = tree.seed;
        let mut expected: Vec<Vec<u8>> = (1..=255)
            .map(|l| name_of_len(l, seed).into_bytes())
            .collect();
        expected.sort();
        assert!(
            decrypted == expected,
            "{}: decrypted on-disk names differ from the names created",
            names_dir.display()
        );
    }
    eprintln!(
        "{test}: {total} kernel comparisons ({} policies x objects)",
        trees.len()
    );
    total
}

fn tree_objects(trees: &[(PathBuf, Policy, Tree)], top: &Path) -> u64 {
    trees
        .iter()
        .find(|(t, _, _)| t == top)
        .map(|(_, _, tree)| tree.objects())
        .unwrap_or(0)
}

const CONFIGS_4K: &[Config] = &[
    Config {
        name: "v2-xts-cts",
        v1: false,
        contents: 1,
        filenames: 4,
        extra_flags: 0,
        log2_du: 0,
    },
    Config {
        name: "v2-essiv-cts128",
        v1: false,
        contents: 5,
        filenames: 6,
        extra_flags: 0,
        log2_du: 0,
    },
    Config {
        name: "v2-xts-cts-lblk64",
        v1: false,
        contents: 1,
        filenames: 4,
        extra_flags: 0x08,
        log2_du: 0,
    },
    Config {
        name: "v2-xts-cts-lblk32",
        v1: false,
        contents: 1,
        filenames: 4,
        extra_flags: 0x10,
        log2_du: 0,
    },
    Config {
        name: "v2-xts-cts-du512",
        v1: false,
        contents: 1,
        filenames: 4,
        extra_flags: 0,
        log2_du: 9,
    },
    Config {
        name: "v1-xts-cts",
        v1: true,
        contents: 1,
        filenames: 4,
        extra_flags: 0,
        log2_du: 0,
    },
    Config {
        name: "v1-essiv-cts128",
        v1: true,
        contents: 5,
        filenames: 6,
        extra_flags: 0,
        log2_du: 0,
    },
];

const CONFIGS_1K: &[Config] = &[
    Config {
        name: "v2-xts-cts",
        v1: false,
        contents: 1,
        filenames: 4,
        extra_flags: 0,
        log2_du: 0,
    },
    Config {
        name: "v2-xts-cts-lblk64",
        v1: false,
        contents: 1,
        filenames: 4,
        extra_flags: 0x08,
        log2_du: 0,
    },
    Config {
        name: "v1-essiv-cts128",
        v1: true,
        contents: 5,
        filenames: 6,
        extra_flags: 0,
        log2_du: 0,
    },
];

#[test]
fn kernel_comparison_4k_blocks() {
    let n = compare_on_image(
        "kernel_comparison_4k_blocks",
        &["-b", "4096", "-O", "encrypt,stable_inodes", "-N", "16384"],
        4096,
        CONFIGS_4K,
    );
    eprintln!("kernel_comparison_4k_blocks: total kernel comparisons = {n}");
}

#[test]
fn kernel_comparison_1k_blocks() {
    let n = compare_on_image(
        "kernel_comparison_1k_blocks",
        &["-b", "1024", "-O", "encrypt,stable_inodes", "-N", "8192"],
        1024,
        CONFIGS_1K,
    );
    eprintln!("kernel_comparison_1k_blocks: total kernel comparisons = {n}");
}

#[test]
fn kernel_verify_detects_corruption() {
    let Some(mut fs) = scratch_ext4("kernel_verify_detects_corruption", 16, MKFS_4K) else {
        return;
    };
    let raw = master_key_bytes(4);
    let master = MasterKey::new(&raw).expect("master");
    let id = keyring::add_key_v2(fs.mount_point(), &raw).expect("add");
    let top = fs.mount_point().join("t");
    std::fs::create_dir(&top).expect("mkdir");
    policy::set_policy(&top, &Policy::V2(PolicyV2::new_default(id))).expect("set");
    for (i, name) in ["a", "b", "c"].iter().enumerate() {
        std::fs::write(top.join(name), pattern(40 + i as u64, 3 * 4096)).expect("write");
    }
    let victim = top.join("b");
    let s = verify::verify_tree(&top, &master, |_| {}).expect("verify");
    assert!(s.all_ok() && s.ok == 4, "clean tree verifies: {s:?}");

    // 1. What a wrong kernel driver looks like: the kernel holds the right
    //    plaintext (page cache) while the disk holds other ciphertext.
    //    Corrupt block 1 of "b" under the mounted filesystem.
    let _ = std::fs::read(&victim).expect("plaintext cached");
    let block = physical_block(fs.device(), &victim, 1);
    flip_byte(fs.device(), block * 4096 + 100, 0x5a);
    let mut mismatches = Vec::new();
    let s = verify::verify_tree(&top, &master, |r| {
        if let Outcome::Mismatch { offset, .. } = &r.outcome {
            mismatches.push((r.path.clone(), *offset));
        }
    })
    .expect("verify");
    assert_eq!(
        mismatches,
        vec![(victim.clone(), 4096 + 100)],
        "exactly the corrupted file, at the corrupted byte"
    );
    assert_eq!((s.ok, s.mismatched, s.errors), (3, 1, 0));

    // 2. Corruption of an unmounted image, then remount: the kernel now
    //    decrypts the corrupted block itself, so only a record of the
    //    plaintext made while the image was good can tell. Record it,
    //    corrupt "c" offline, remount and check against the record.
    flip_byte(fs.device(), block * 4096 + 100, 0x5a); // undo 1.
    let mut manifest = verify::Manifest::default();
    let s = verify::verify_tree_with(
        &top,
        &master,
        verify::Options {
            record: Some(&mut manifest),
            check: None,
        },
        |_| {},
    )
    .expect("verify + record");
    assert!(s.all_ok(), "{s:?}");
    let victim2 = top.join("c");
    let block2 = physical_block(fs.device(), &victim2, 2);
    fs.unmount().expect("umount");
    flip_byte(fs.device(), block2 * 4096 + 7, 0x5a);
    fs.mount().expect("remount");
    keyring::add_key_v2(fs.mount_point(), &raw).expect("re-add key");
    let mut mismatches = Vec::new();
    let s = verify::verify_tree_with(
        &top,
        &master,
        verify::Options {
            record: None,
            check: Some(&manifest),
        },
        |r| {
            if let Outcome::Mismatch { offset, .. } = &r.outcome {
                mismatches.push((r.path.clone(), *offset));
            }
        },
    )
    .expect("verify against the record");
    assert_eq!(
        mismatches,
        vec![(victim2.clone(), 2 * 4096)],
        "exactly the file corrupted offline, at its data unit"
    );
    assert_eq!((s.ok, s.mismatched, s.errors), (3, 1, 0));
}
