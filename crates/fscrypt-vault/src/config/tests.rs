use std::os::unix::fs::PermissionsExt;

use super::*;

fn sample() -> ConfigRecord {
    ConfigRecord::new(
        PolicyRecord {
            contents_mode: 1,
            filenames_mode: 4,
            flags: 3,
            log2_data_unit_size: 0,
            master_key_identifier: [0xab; 16],
        },
        vec![
            Protector::unnamed(ProtectorRecord::Passphrase {
                params: Argon2Params {
                    m_cost_kib: 65536,
                    t_cost: 3,
                    p_cost: 1,
                },
                salt: [1; SALT_SIZE],
                nonce: [2; NONCE_SIZE],
                wrapped_key: [3; WRAPPED_KEY_SIZE],
            }),
            Protector::unnamed(ProtectorRecord::KeyFile {
                salt: [4; SALT_SIZE],
                nonce: [5; NONCE_SIZE],
                wrapped_key: [6; WRAPPED_KEY_SIZE],
            }),
        ],
    )
}

fn recovery(n: u8) -> Protector {
    Protector::unnamed(ProtectorRecord::RecoveryKey {
        salt: [n; SALT_SIZE],
        nonce: [n; NONCE_SIZE],
        wrapped_key: [n; WRAPPED_KEY_SIZE],
    })
}

#[test]
fn version_1_unless_something_new_is_used() {
    let c = sample();
    assert_eq!(c.version(), CONFIG_VERSION);
    assert_eq!(c.protectors[0].name, "passphrase");
    assert_eq!(c.protectors[1].name, "key-file");
    let text = String::from_utf8(c.to_json()).unwrap();
    assert!(
        text.contains("\"version\": 1,") && !text.contains("\"name\""),
        "{text}"
    );

    // Each new thing alone makes version 2, and round-trips.
    let mut named = sample();
    named.protectors[0].name = "laptop".into();
    let mut timed = sample();
    timed.protectors[1].created = Some(1_700_000_000);
    let mut two = sample();
    two.push(two.protectors[1].clone().tap_unnamed());
    assert_eq!(two.protectors[2].name, "key-file-2");
    let mut rec = sample();
    rec.push(recovery(7));
    assert_eq!(rec.protectors[2].name, "recovery-key");
    for c in [named, timed, two, rec] {
        assert_eq!(c.version(), CONFIG_VERSION_2);
        let bytes = c.to_json();
        let text = String::from_utf8(bytes.clone()).unwrap();
        assert!(
            text.contains("\"version\": 2,") && text.contains("\"name\""),
            "{text}"
        );
        assert_eq!(ConfigRecord::parse(&bytes).unwrap(), c);
    }
}

impl Protector {
    fn tap_unnamed(mut self) -> Protector {
        self.name.clear();
        self
    }
}

#[test]
fn version_2_fields_are_refused_in_version_1_and_names_checked() {
    let mut c = sample();
    c.push(recovery(1));
    let v2 = String::from_utf8(c.to_json()).unwrap();
    let cases = [
        // A version-2 config declared as version 1.
        v2.replace("\"version\": 2,", "\"version\": 1,"),
        // A name missing, invalid or duplicated.
        v2.replace("\"name\": \"key-file\",", ""),
        v2.replace("\"name\": \"key-file\"", "\"name\": \"a b\""),
        v2.replace("\"name\": \"key-file\"", "\"name\": \"passphrase\""),
        v2.replace("\"name\": \"key-file\"", "\"name\": \"\""),
        v2.replace("\"version\": 2,", "\"version\": 3,"),
    ];
    for (i, case) in cases.iter().enumerate() {
        assert_ne!(case, &v2, "case {i} did not change the input");
        assert!(
            matches!(
                ConfigRecord::parse(case.as_bytes()),
                Err(ConfigError::Invalid(_))
            ),
            "case {i} parsed"
        );
    }
    assert!(check_name("laptop-2025.main_1").is_ok());
    for bad in ["", "-x", "a/b", "ä", &"x".repeat(65)] {
        assert!(check_name(bad).is_err(), "{bad:?}");
    }
}

#[test]
fn utc_formatting() {
    assert_eq!(format_utc(0), "1970-01-01 00:00:00 UTC");
    assert_eq!(format_utc(951_782_400), "2000-02-29 00:00:00 UTC");
    assert_eq!(format_utc(1_700_000_000), "2023-11-14 22:13:20 UTC");
}

#[test]
fn read_limited_refuses_what_is_not_a_regular_file() {
    let dir = std::env::temp_dir().join(format!("fscrypt-rs-config-reg-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let fifo = dir.join("fifo");
    rustix::fs::mknodat(
        rustix::fs::CWD,
        &fifo,
        rustix::fs::FileType::Fifo,
        rustix::fs::Mode::from_raw_mode(0o600),
        0,
    )
    .unwrap();
    assert!(matches!(
        read_limited(&fifo),
        Err(ConfigError::NotRegular(_))
    ));
    std::fs::write(dir.join("real"), b"x").unwrap();
    std::os::unix::fs::symlink(dir.join("real"), dir.join("link")).unwrap();
    assert!(matches!(
        read_limited(&dir.join("link")),
        Err(ConfigError::NotRegular(_))
    ));
    assert!(matches!(
        read_limited(&dir),
        Err(ConfigError::NotRegular(_))
    ));
    assert_eq!(read_limited(&dir.join("real")).unwrap(), b"x");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn json_round_trip() {
    let c = sample();
    let bytes = c.to_json();
    assert_eq!(ConfigRecord::parse(&bytes).unwrap(), c);
    assert_eq!(
        c.policy.to_uapi_bytes()[..8],
        [2, 1, 4, 3, 0, 0, 0, 0],
        "uapi fscrypt_policy_v2 header"
    );
}

#[test]
fn rejects_bad_configs() {
    let good = String::from_utf8(sample().to_json()).unwrap();
    let cases = [
        good.replace("\"fscrypt-rs vault\"", "\"other\""),
        good.replace("\"version\": 1,", "\"version\": 2,"),
        good.replace("argon2id", "scrypt"),
        good.replace("\"t_cost\": 3", "\"t_cost\": 0"),
        good.replace("\"m_cost_kib\": 65536", "\"m_cost_kib\": 4294967295"),
        // 4 GiB x 1000 passes: hours of work (the bound in time).
        good.replace("\"m_cost_kib\": 65536", "\"m_cost_kib\": 4194304")
            .replace("\"t_cost\": 3", "\"t_cost\": 1000"),
        good.replace("\"t_cost\": 3", "\"t_cost\": 513"),
        good.replace(&"ab".repeat(16), &"ab".repeat(15)),
        good.replace(&"06".repeat(80), &"0g".repeat(80)),
        good.replace("\"flags\": 3,", "\"flags\": 3, \"extra\": 1,"),
        good.replace("key_file", "smartcard"),
        "{}".to_owned(),
        "not json".to_owned(),
    ];
    for (i, case) in cases.iter().enumerate() {
        assert_ne!(case, &good, "case {i} did not change the input");
        assert!(
            matches!(
                ConfigRecord::parse(case.as_bytes()),
                Err(ConfigError::Invalid(_))
            ),
            "case {i} parsed"
        );
    }
    let mut none = sample();
    none.protectors.clear();
    assert!(ConfigRecord::parse(&none.to_json()).is_err());
}

#[test]
fn read_refuses_fifos_symlinks_and_directories_at_once() {
    let dir = std::env::temp_dir().join(format!("fscrypt-rs-config-fifo-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let fifo = dir.join("fifo");
    rustix::fs::mknodat(
        rustix::fs::CWD,
        &fifo,
        rustix::fs::FileType::Fifo,
        rustix::fs::Mode::from_raw_mode(0o600),
        0,
    )
    .unwrap();
    let regular = dir.join("regular");
    std::fs::write(&regular, b"{}").unwrap();
    let link = dir.join("link");
    std::os::unix::fs::symlink(&regular, &link).unwrap();
    // Without O_NONBLOCK the open of a FIFO with no writer blocks
    // forever; bound the test by running it on a thread.
    let (tx, rx) = std::sync::mpsc::channel();
    let paths = (fifo.clone(), link.clone(), dir.clone(), regular.clone());
    std::thread::spawn(move || {
        let results = [
            read_limited(&paths.0),
            read_limited(&paths.1),
            read_limited(&paths.2),
        ];
        let _ = tx.send((results, read_limited(&paths.3).ok()));
    });
    let ([fifo_r, link_r, dir_r], regular_r) = rx
        .recv_timeout(std::time::Duration::from_secs(30))
        .expect("reading a FIFO config hangs");
    assert!(
        matches!(fifo_r, Err(ConfigError::NotRegular("a FIFO"))),
        "{fifo_r:?}"
    );
    assert!(
        matches!(link_r, Err(ConfigError::NotRegular("a symbolic link"))),
        "{link_r:?}"
    );
    assert!(
        matches!(dir_r, Err(ConfigError::NotRegular("a directory"))),
        "{dir_r:?}"
    );
    assert_eq!(regular_r.as_deref(), Some(&b"{}"[..]));
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn atomic_write_is_0600_and_never_overwrites() {
    let t = test_support::TempDir::new("config-test");
    let dir = t.path().to_path_buf();
    let path = dir.join(CONFIG_NAME);
    write_new_atomic(&dir, CONFIG_NAME.as_ref(), b"first").unwrap();
    let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600);
    assert!(matches!(
        write_new_atomic(&dir, CONFIG_NAME.as_ref(), b"second"),
        Err(ConfigError::AlreadyExists)
    ));
    assert_eq!(std::fs::read(&path).unwrap(), b"first");
    // No temporary file left behind.
    let names: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(names, vec![std::ffi::OsString::from(CONFIG_NAME)]);
    std::fs::remove_dir_all(&dir).unwrap();
}
