//! Golden runs of the built `fscrypt-rs crypt` binary against
//! `testdata/vectors/fscrypt_format_vectors.json`, invoked with the same options
//! xfstests' `_verify_ciphertext_for_encryption_policy` passes to
//! `fscrypt-crypt-util` (spec §11.2), plus usage errors (exit status 2).

use std::process::{Command, Output};

use serde_json::Value;

const BIN: &str = env!("CARGO_BIN_EXE_fscrypt-rs");

fn load() -> Value {
    test_support::vectors::load("fscrypt_format_vectors.json")
}

fn s<'a>(v: &'a Value, k: &str) -> &'a str {
    v[k].as_str().unwrap_or_else(|| panic!("missing {k}"))
}

fn num(v: &Value, k: &str) -> u64 {
    match &v[k] {
        Value::Number(n) => n.as_u64().unwrap(),
        Value::String(x) => u64::from_str_radix(x.trim_start_matches("0x"), 16).unwrap(),
        o => panic!("{k}: {o}"),
    }
}

fn master_hex(all: &Value, v: &Value, k: &str) -> String {
    let name = s(v, k);
    all["inputs"][name].as_str().unwrap_or(name).to_string()
}

fn run(args: &[String], stdin: &[u8]) -> Output {
    test_support::run::output(Command::new(BIN).arg("crypt").args(args), stdin)
}

fn ok(args: &[String], stdin: &[u8]) -> Vec<u8> {
    let out = run(args, stdin);
    assert!(
        out.status.success(),
        "fscrypt-rs crypt {args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    out.stdout
}

/// The tool options xfstests uses for a policy (spec §11.2 step 5).
fn kdf_args(version: u64, flags: u8) -> Vec<String> {
    let mut a = Vec::new();
    if version == 1 {
        if flags & 0x04 != 0 {
            a.push("--kdf=none".into());
        } else {
            a.push("--kdf=AES-128-ECB".into());
        }
    } else {
        a.push("--kdf=HKDF-SHA512".into());
    }
    if flags & 0x04 != 0 {
        a.push("--direct-key".into());
    }
    if flags & 0x08 != 0 {
        a.push("--iv-ino-lblk-64".into());
    }
    if flags & 0x10 != 0 {
        a.push("--iv-ino-lblk-32".into());
    }
    a
}

fn cipher_name(mode: u8) -> &'static str {
    match mode {
        1 => "AES-256-XTS",
        4 => "AES-256-CTS-CBC",
        5 => "AES-128-CBC-ESSIV",
        6 => "AES-128-CTS-CBC",
        7 => "SM4-XTS",
        8 => "SM4-CTS-CBC",
        9 => "Adiantum",
        10 => "AES-256-HCTR2",
        m => panic!("mode {m}"),
    }
}

#[test]
fn contents_vectors() {
    let all = load();
    let mut ran = 0;
    for (i, e) in all["contents"].as_array().unwrap().iter().enumerate() {
        let mode = num(e, "contents_mode") as u8;
        let flags = num(e, "flags") as u8;
        let mk = master_hex(&all, e, "master_key");
        let mut args = vec![
            cipher_name(mode).to_string(),
            mk.clone(),
            format!("--file-nonce={}", s(e, "nonce")),
            format!("--inode-number={}", num(e, "inode_number")),
            format!("--mode-num={mode}"),
            format!("--data-unit-size={}", num(e, "data_unit_size")),
            format!("--data-unit-index={}", num(e, "first_data_unit_index")),
            format!("--fs-uuid={}", s(e, "fs_uuid")),
        ];
        args.extend(kdf_args(num(e, "policy_version"), flags));
        let ptext = hex::decode(s(e, "ptext")).unwrap();
        let ctext = hex::decode(s(e, "ctext")).unwrap();
        if e["crosscheck"].is_null() && mode == 1 && mk.len() < 128 {
            // A 32-byte master key for AES-256-XTS: the reference tool
            // refuses it ("Master key is too short"), so must we (exit 1).
            let out = run(&args, &ptext);
            assert_eq!(out.status.code(), Some(1), "contents[{i}]");
            continue;
        }
        assert!(
            ok(&args, &ptext) == ctext,
            "contents[{i}] {}: ciphertext differs",
            s(e, "description")
        );
        let mut dec = args.clone();
        dec.push("--decrypt".into());
        assert!(
            ok(&dec, &ctext) == ptext,
            "contents[{i}]: decryption differs"
        );
        ran += 1;
    }
    assert_eq!(ran, 12);
}

#[test]
fn filename_vectors() {
    let all = load();
    let entries = all["filenames"].as_array().unwrap();
    for (i, e) in entries.iter().enumerate() {
        let mode = num(e, "filenames_mode") as u8;
        let flags = num(e, "flags") as u8;
        let mut args = vec![
            cipher_name(mode).to_string(),
            master_hex(&all, e, "master_key"),
            format!("--file-nonce={}", s(e, "dir_nonce")),
            format!("--inode-number={}", num(e, "dir_inode_number")),
            format!("--mode-num={mode}"),
            format!("--fs-uuid={}", s(e, "fs_uuid")),
            format!("--padding={}", num(e, "padding")),
            "--data-unit-size=255".to_string(),
        ];
        args.extend(kdf_args(num(e, "policy_version"), flags));
        let out = ok(&args, s(e, "name").as_bytes());
        assert_eq!(
            hex::encode(&out),
            s(e, "ctext"),
            "filenames[{i}] {}",
            s(e, "description")
        );
    }
    assert_eq!(entries.len(), 123);
}

#[test]
fn key_identifiers_and_hw_kdf() {
    let all = load();
    for (i, e) in all["key_identifiers"]
        .as_array()
        .unwrap()
        .iter()
        .enumerate()
    {
        let args = vec![
            "--dump-key-identifier".to_string(),
            "--kdf=HKDF-SHA512".to_string(),
            master_hex(&all, e, "master_key"),
        ];
        assert_eq!(
            ok(&args, b""),
            s(e, "key_identifier").as_bytes(),
            "key_identifiers[{i}]"
        );
    }
    let hw = &all["hw_wrapped_key_xfstests_model"];
    let raw = s(hw, "unwrapped_raw_key").to_string();
    let id = ok(
        &[
            "--dump-key-identifier".into(),
            "--kdf=HKDF-SHA512".into(),
            "--enable-hw-kdf".into(),
            raw.clone(),
        ],
        b"",
    );
    assert_eq!(id, s(hw, "key_identifier_ctx8").as_bytes());
    let ex = &hw["contents_example"];
    let args = vec![
        "AES-256-XTS".to_string(),
        raw,
        "--kdf=HKDF-SHA512".into(),
        "--iv-ino-lblk-64".into(),
        "--enable-hw-kdf".into(),
        "--use-inlinecrypt-key".into(),
        "--mode-num=1".into(),
        format!("--inode-number={}", num(ex, "inode_number")),
        format!("--fs-uuid={}", s(&all["inputs"], "fs_uuid")),
        format!("--data-unit-index={}", num(ex, "data_unit_index")),
    ];
    let out = ok(&args, &hex::decode(s(ex, "ptext")).unwrap());
    assert_eq!(hex::encode(out), s(ex, "ctext"));
}

/// A stream larger than one read batch with a partial final unit: equals the
/// library's encryption of the zero-padded input, unit by unit.
#[test]
fn streams_partial_last_unit() {
    use fscrypt::{Context, FileType, InodeCrypt, InodeParams, MasterKey, Policy, PolicyV2};
    let mk_bytes: Vec<u8> = (0u8..64).collect();
    let nonce = [0x5a; 16];
    let len: usize = 3 * (1 << 20) + 1000;
    let input: Vec<u8> = (0..len).map(|i| (i * 7 + i / 4096) as u8).collect();
    let args = vec![
        "AES-256-XTS".to_string(),
        hex::encode(&mk_bytes),
        "--kdf=HKDF-SHA512".into(),
        format!("--file-nonce={}", hex::encode(nonce)),
    ];
    let out = ok(&args, &input);
    assert_eq!(out.len(), len.div_ceil(4096) * 4096);

    let mk = MasterKey::new(&mk_bytes).unwrap();
    let p = Policy::V2(PolicyV2::new_default(mk.identifier()));
    let f = InodeCrypt::new(
        &mk,
        &Context::new(&p, nonce),
        &InodeParams {
            file_type: FileType::Regular,
            ino: 1,
            fs_uuid: [0; 16],
            fs_block_size: 4096,
        },
    )
    .unwrap();
    let mut want = input.clone();
    want.resize(out.len(), 0);
    f.encrypt_data_units(0, &mut want).unwrap();
    assert!(
        out == want,
        "streamed ciphertext differs from the library's"
    );

    // --padding=16 shortens only the final unit: 1000 bytes -> 1008.
    let mut padded = args.clone();
    padded.push("--padding=16".into());
    let out16 = ok(&padded, &input);
    assert_eq!(out16.len(), 3 * (1 << 20) + 1008);
    assert!(out16[..3 << 20] == want[..3 << 20]);
}

/// The reference's exit statuses: 2 only for a malformed command line
/// (getopt's errors, operand count), 1 for every refused value or
/// combination, whichever fault comes first (exhaustively in
/// `crypt_util_table.rs`; these name the rules).
#[test]
fn usage_errors_exit_2_and_refusals_exit_1() {
    let key = "00".repeat(64);
    let k = |v: &[&str]| -> Vec<String> { v.iter().map(|s| s.to_string()).collect() };
    let cases_2: Vec<Vec<String>> = vec![
        vec![],
        k(&["AES-256-XTS"]),
        k(&["--no-such-option", "AES-256-XTS", &key]),
        k(&["--d", "AES-256-XTS", &key]),
        k(&["--decrypt=yes", "AES-256-XTS", &key]),
        k(&["AES-256-XTS", &key, "--padding"]),
        k(&["-x", "AES-256-XTS", &key]),
        k(&["AES-256-XTS", &key, "extra"]),
        k(&["--", "--", "AES-256-XTS", &key]),
        k(&["--", "--help"]),
        k(&["--dump-key-identifier", "AES-256-XTS", &key]),
        k(&["--bogus", "--padding=3", "AES-256-XTS", &key]),
    ];
    for args in &cases_2 {
        let out = run(args, b"x");
        assert_eq!(
            out.status.code(),
            Some(2),
            "{args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(out.stdout.is_empty());
    }
    let cases_1: Vec<Vec<String>> = vec![
        k(&["--padding=3", "AES-256-XTS", &key]),
        k(&["--padding=0", "AES-256-XTS", &key]),
        k(&["--padding=3", "--bogus", "AES-256-XTS", &key]),
        k(&["--data-unit-size=0", "AES-256-XTS", &key]),
        k(&["--kdf=SHA1", "AES-256-XTS", &key]),
        k(&["--mode-num=256", "AES-256-XTS", &key]),
        k(&["--file-nonce=abcd", "AES-256-XTS", &key]),
        k(&["NO-SUCH-CIPHER", &key]),
        k(&["AES-256-XTS", &"00".repeat(32)]),
        k(&["AES-256-XTS", "0g"]),
        k(&["--kdf=AES-128-ECB", "AES-256-XTS", &key]),
        k(&[
            "--kdf=AES-128-ECB",
            "--direct-key",
            "--file-nonce=00000000000000000000000000000000",
            "AES-256-XTS",
            &key,
        ]),
        k(&["--direct-key", "--iv-ino-lblk-64", "AES-256-XTS", &key]),
        k(&["--iv-ino-lblk-32", "--inode-number=1", "AES-256-XTS", &key]),
        k(&["--iv-ino-lblk-64", "AES-256-XTS", &key]),
        k(&["--dump-key-identifier", &key]),
        k(&["--dump-key-identifier", "--kdf=HKDF-SHA512", ""]),
        k(&["--data-unit-size=8", "AES-256-CTS-CBC", &key]),
        k(&["--data-unit-size=100", "AES-256-XTS", &key]),
    ];
    for args in &cases_1 {
        let out = run(args, b"x");
        assert_eq!(
            out.status.code(),
            Some(1),
            "{args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(
            err.trim().lines().count(),
            1,
            "{args:?}: one-line reason: {err}"
        );
    }
    for help in [k(&["--help"]), k(&["--he", "--padding=3"])] {
        let out = run(&help, b"");
        assert_eq!(out.status.code(), Some(0));
        assert!(String::from_utf8_lossy(&out.stdout).contains("--data-unit-size"));
    }
}

/// What the reference accepts that we used to refuse: IV_INO_LBLK_64 and
/// DIRECT_KEY without HKDF (the master key is the key), a weak (equal
/// halves) XTS key, abbreviated options, and `strtoul`'s leniency.
#[test]
fn reference_leniencies_are_accepted() {
    let mk: Vec<u8> = (0u8..64).collect();
    let key = hex::encode(&mk);
    let input = [0x42u8; 40];
    // IV_INO_LBLK_64 with --kdf=none: IV = index (32 bits) || inode number.
    let out = ok(
        &[
            "--iv-ino-lblk-64".into(),
            "--inode-number=7".into(),
            "--data-unit-size=16".into(),
            "AES-256-XTS".into(),
            key.clone(),
        ],
        &input[..32],
    );
    let k = fscrypt_crypto::PreparedKey::new(fscrypt_crypto::Algorithm::Aes256Xts, &mk).unwrap();
    let mut want = input[..32].to_vec();
    for (i, unit) in want.chunks_mut(16).enumerate() {
        let mut iv = [0u8; 16];
        iv[..4].copy_from_slice(&(i as u32).to_le_bytes());
        iv[4..8].copy_from_slice(&7u32.to_le_bytes());
        k.encrypt(&iv, unit).unwrap();
    }
    assert_eq!(out, want);
    // Abbreviations, `--opt VALUE`, operands first, an empty index (0).
    let a = ok(
        &[
            "AES-256-XTS".into(),
            key.clone(),
            "--data-unit-s".into(),
            "16".into(),
            "--data-unit-index=".into(),
            "--iv-ino-lblk-6".into(),
            "--inode".into(),
            " +7".into(),
        ],
        &input[..32],
    );
    assert_eq!(a, want);
    // A weak XTS key: the reference encrypts with it.
    let weak = ok(&["AES-256-XTS".into(), "00".repeat(64)], &input);
    assert_eq!(weak.len(), 4096);
}

/// A unit the cipher refuses stops the run with status 1 after the units
/// before it were written, as the reference's assertion does.
#[test]
fn refused_unit_keeps_earlier_output() {
    let key = hex::encode((0u8..64).collect::<Vec<u8>>());
    let args = [
        "--data-unit-size=32",
        "--padding=4",
        "AES-256-XTS",
        key.as_str(),
    ]
    .map(String::from);
    let out = run(&args, &[7u8; 40]);
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(out.stdout.len(), 32);
    let whole = ok(&args, &[7u8; 32]);
    assert_eq!(out.stdout, whole);
}

/// Issue 22 ("a data unit's ciphertext is what the kernel would write"):
/// data units read from a format 3 vault's backing file at
/// `units::unit_offset(i, du)` (past the tag blocks) decrypt with
/// `fscrypt-rs crypt --decrypt`, the master key and the file's nonce (from
/// the context in its header) to the plaintext: the first units, a unit of
/// the second tag group (index 129) and the zero-padded last partial unit.
#[test]
fn format_3_units_decrypt_with_crypt() {
    use fscrypt::{Context, MasterKey, PolicyV2};
    use fscrypt_fuse::layout::{self, Format, Header, HeaderKind};
    use fscrypt_fuse::vault::integrity::units;
    use fscrypt_fuse::{Caller, EncryptedFs, FsOptions, ROOT};

    const DU: usize = 4096;
    let mk_bytes: Vec<u8> = (0u8..64).map(|i| i.wrapping_mul(13) ^ 0x5c).collect();
    let mk = MasterKey::new(&mk_bytes).unwrap();
    let policy = PolicyV2::new_default(mk.identifier());
    let dir = test_support::TempDir::new("crypt-v3-units");
    fscrypt_fuse::create_root_with(dir.path(), &policy, Format::V3).unwrap();
    let fs = EncryptedFs::new(dir.path(), policy, Some(mk), FsOptions::default()).unwrap();
    assert_eq!(fs.format(), Format::V3);
    let plain: Vec<u8> = (0..130 * DU + 777)
        .map(|i| (i * 31 + i / DU) as u8)
        .collect();
    let (_, fh) = fs
        .create(
            ROOT,
            std::ffi::OsStr::new("f"),
            0o600,
            libc::O_WRONLY,
            Caller { uid: 0, gid: 0 },
        )
        .unwrap();
    fs.write(fh, 0, &plain).unwrap();
    fs.release(fh).unwrap();
    drop(fs);

    let backing = test_support::tree::only_user_entry(dir.path());
    let raw = std::fs::read(&backing).unwrap();
    let hdr = Header::parse(&raw, HeaderKind::File).unwrap();
    assert_eq!(hdr.format, Format::V3);
    let nonce = match Context::parse(&layout::context_bytes(&hdr.context)).unwrap() {
        Context::V2(c) => c.nonce,
        other => panic!("unexpected context {other:?}"),
    };
    let decrypt = |first: u64, count: u64| -> Vec<u8> {
        let mut ct = Vec::new();
        for i in first..first + count {
            let o = units::unit_offset(i, DU as u64).unwrap() as usize;
            ct.extend_from_slice(&raw[o..o + DU]);
        }
        let args = vec![
            "AES-256-XTS".to_string(),
            hex::encode(&mk_bytes),
            "--kdf=HKDF-SHA512".into(),
            format!("--file-nonce={}", hex::encode(nonce)),
            format!("--data-unit-size={DU}"),
            format!("--data-unit-index={first}"),
            "--decrypt".into(),
        ];
        ok(&args, &ct)
    };
    let mut padded = plain.clone();
    padded.resize(131 * DU, 0);
    let unit = |i: usize, n: usize| &padded[i * DU..(i + n) * DU];
    assert!(decrypt(0, 3) == unit(0, 3), "units 0..3 differ");
    assert!(decrypt(129, 1) == unit(129, 1), "unit 129 differs");
    assert!(decrypt(130, 1) == unit(130, 1), "last partial unit differs");
    // A unit under another index does not decrypt to it (the index is the
    // XTS tweak: the check above is not vacuous).
    let o = units::unit_offset(129, DU as u64).unwrap() as usize;
    let args = vec![
        "AES-256-XTS".to_string(),
        hex::encode(&mk_bytes),
        "--kdf=HKDF-SHA512".into(),
        format!("--file-nonce={}", hex::encode(nonce)),
        "--data-unit-index=128".into(),
        "--decrypt".into(),
    ];
    assert!(ok(&args, &raw[o..o + DU]) != unit(129, 1));
}
