//! The backing store holds exactly the kernel's ciphertext (issue 5 §3): data
//! unit i after the header equals what `fscrypt::InodeCrypt` (the kernel's
//! construction, as ext4 stores it) produces for the file's stored context;
//! names are the base64url of the kernel's filename ciphertext; symlinks hold
//! the kernel's `fscrypt_symlink_data`.

use std::fs;
use std::os::unix::fs::MetadataExt;

use fscrypt::{Context, FileType, InodeCrypt, InodeParams, nokey};
use fscrypt_fuse::layout::{self, Format, HEADER_SIZE, Header, HeaderKind};
use fscrypt_vault::integrity::units;
use test_support::fuse::{Vault, master, policy};
use test_support::fuse_available;

fn crypt_of(ctx: &[u8], kind: FileType, ino: u64) -> InodeCrypt {
    let c = Context::parse(ctx).expect("stored context parses");
    InodeCrypt::new(
        &master(),
        &c,
        &InodeParams {
            file_type: kind,
            ino,
            fs_uuid: [0u8; 16],
            fs_block_size: 4096,
        },
    )
    .expect("inode crypt")
}

#[test]
fn backing_bytes_are_the_kernel_ciphertext() {
    if !fuse_available("backing_bytes_are_the_kernel_ciphertext") {
        return;
    }
    check_policy(policy(), 4096, Format::V1);
    check_policy(policy(), 4096, Format::V2);
}

#[test]
fn other_modes_paddings_and_data_unit_sizes() {
    if !fuse_available("other_modes_paddings_and_data_unit_sizes") {
        return;
    }
    use fscrypt::{EncryptionMode, PolicyFlags};
    let base = policy();
    // Adiantum with DIRECT_KEY, PAD_16, 512-byte data units.
    let mut adiantum = base;
    adiantum.contents_mode = EncryptionMode::ADIANTUM;
    adiantum.filenames_mode = EncryptionMode::ADIANTUM;
    adiantum.flags = PolicyFlags(PolicyFlags::DIRECT_KEY.0 | PolicyFlags::PAD_16.0);
    adiantum.log2_data_unit_size = 9;
    check_policy(adiantum, 512, Format::V1);
    check_policy(adiantum, 512, Format::V2);
    // AES-256-XTS + AES-256-HCTR2 names, PAD_4, 1024-byte data units.
    let mut hctr2 = base;
    hctr2.filenames_mode = EncryptionMode::AES_256_HCTR2;
    hctr2.flags = PolicyFlags::PAD_4;
    hctr2.log2_data_unit_size = 10;
    check_policy(hctr2, 1024, Format::V1);
    check_policy(hctr2, 1024, Format::V2);
}

fn check_policy(policy: fscrypt::PolicyV2, du: usize, format: Format) {
    let v = Vault::with_format("format", policy, format);
    let plain: Vec<u8> = (0..3 * 4096 + 1000).map(|i| (i % 253) as u8).collect();
    fs::write(v.p("data.bin"), &plain).unwrap();
    std::os::unix::fs::symlink("some/target/path", v.p("sym")).unwrap();

    let root_meta = fs::read(v.backing.path().join(layout::DIR_META_NAME)).unwrap();
    let root_hdr = Header::parse(&root_meta, HeaderKind::Directory).unwrap();
    assert_eq!(root_hdr.format, format);
    let root_ino = fs::metadata(v.backing.path()).unwrap().ino();
    let dir_crypt = crypt_of(
        &layout::context_bytes(&root_hdr.context),
        FileType::Directory,
        root_ino,
    );

    // Names: base64url(kernel filename ciphertext).
    let ct = dir_crypt.encrypt_filename(b"data.bin").unwrap();
    let bname = layout::BackingName::from_ciphertext(&ct);
    assert!(!bname.long);
    let backing_file = v.backing.path().join(&bname.name);
    let raw = fs::read(&backing_file).expect("backing file under the encrypted name");

    // Header: context of the vault policy, plaintext size (format 1; zero
    // in format 2, where the length holds it).
    let hdr = Header::parse(&raw, HeaderKind::File).unwrap();
    assert_eq!(hdr.format, format);
    match format {
        Format::V1 => assert_eq!(hdr.size, plain.len() as u64),
        Format::V2 | Format::V3 => assert_eq!(hdr.size, 0),
    }
    match Context::parse(&layout::context_bytes(&hdr.context)).unwrap() {
        Context::V2(c) => assert_eq!(c.policy, v.policy),
        other => panic!("unexpected context {other:?}"),
    }
    let file_crypt = crypt_of(
        &layout::context_bytes(&hdr.context),
        FileType::Regular,
        fs::metadata(&backing_file).unwrap().ino(),
    );

    // Contents: unit i after the header is the kernel's ciphertext of unit i
    // (last unit zero-padded, as ext4 stores it).
    let units = plain.len().div_ceil(du);
    match format {
        Format::V1 => assert_eq!(raw.len() as u64, HEADER_SIZE + (units * du) as u64),
        Format::V2 => {
            // 4096 + size + one unit (not unit-aligned); a zero trailer.
            assert_eq!(raw.len() as u64, HEADER_SIZE + (plain.len() + du) as u64);
            assert_eq!(
                layout::size_from_len_v2(raw.len() as u64, du as u64),
                Ok(plain.len() as u64)
            );
            assert!(
                raw[HEADER_SIZE as usize + units * du..]
                    .iter()
                    .all(|&b| b == 0)
            );
        }
        // Format 3: a tag block before each group of 128 units; the length
        // is the hint of the size.
        Format::V3 => assert_eq!(
            Some(raw.len() as u64),
            units::len_for_size(plain.len() as u64, du as u64)
        ),
    }
    assert_eq!(fs::read(v.p("data.bin")).unwrap(), plain);
    for i in 0..units {
        let mut unit = vec![0u8; du];
        let end = ((i + 1) * du).min(plain.len());
        unit[..end - i * du].copy_from_slice(&plain[i * du..end]);
        file_crypt.encrypt_data_units(i as u64, &mut unit).unwrap();
        let at = match format {
            Format::V3 => units::unit_offset(i as u64, du as u64).unwrap() as usize,
            _ => HEADER_SIZE as usize + i * du,
        };
        let stored = &raw[at..at + du];
        assert_eq!(stored, &unit[..], "data unit {i}");
    }

    // Symlink: base64url(context ‖ fscrypt_symlink_data).
    let sct = dir_crypt.encrypt_filename(b"sym").unwrap();
    let sname = layout::BackingName::from_ciphertext(&sct);
    let target = fs::read_link(v.backing.path().join(&sname.name)).unwrap();
    let (sctx, blob) = layout::decode_symlink(target.as_os_str().as_encoded_bytes()).unwrap();
    let sym_crypt = crypt_of(&layout::context_bytes(&sctx), FileType::Symlink, 0);
    assert_eq!(
        sym_crypt.decrypt_symlink(&blob).unwrap(),
        b"some/target/path"
    );

    // The no-key name a locked mount shows is the kernel's for this ciphertext.
    let nk = nokey::encode(&ct, 0, 0).to_string();
    assert!(
        nokey::NoKeyName::decode(nk.as_bytes())
            .unwrap()
            .matches(&ct)
    );
}

/// A size that grows inside the unit holding its old trailer: the record
/// written at the close makes the backing length the new size's hint,
/// shorter than before (the old code left the old, longer length beside a
/// record of the new size: the next open was EIO, "backing length does not
/// match the authenticated size"). Both formats; across a remount too.
#[test]
fn growing_within_the_last_unit_keeps_the_file_readable() {
    if !fuse_available(module_path!()) {
        return;
    }
    for format in [Format::V3, Format::V2] {
        let mut v = Vault::with_format("grow-trailer", policy(), format);
        let first: Vec<u8> = (0..5353u32).map(|i| (i % 251) as u8 + 1).collect();
        fs::write(v.p("f"), &first).unwrap();
        let more = vec![7u8; 8192 - 5353];
        {
            use std::io::Write;
            let mut f = fs::OpenOptions::new().append(true).open(v.p("f")).unwrap();
            f.write_all(&more).unwrap();
        }
        let mut want = first.clone();
        want.extend_from_slice(&more);
        let got = fs::read(v.p("f")).unwrap_or_else(|e| panic!("{format:?}: {e}"));
        assert!(got == want, "{format:?}: contents changed");
        v.remount(true);
        let got = fs::read(v.p("f")).unwrap_or_else(|e| panic!("{format:?} after remount: {e}"));
        assert!(got == want, "{format:?}: contents changed after remount");
    }
}
