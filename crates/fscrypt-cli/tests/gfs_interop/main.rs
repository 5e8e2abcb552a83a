//! Interop with the real google/fscrypt (Debian's `fscrypt` 0.3.3, installed
//! by scripts/setup.sh): directories encrypted by one tool are unlocked and
//! locked by the other, on a loop ext4 made by each test (as root), with
//! `FSCRYPT_CONF` and `FSCRYPT_ROOT_MNT` inside the test's temp dir so
//! /etc and / are never touched. Bad metadata gets a one-line reason, its
//! own exit status, and nothing is written.
//!
//! Skipped loudly without root, loop devices or `fscrypt`.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use test_support::run::assert_ok as ok;
use test_support::run::describe as text;

use test_support::loopdev::{MKFS_4K, scratch_ext4};
use test_support::loopfs::LoopExt4;
use test_support::skip::tool_available;
use test_support::tempdir::TempDir;

mod habits;
mod login;
mod metadata;

const BIN: &str = env!("CARGO_BIN_EXE_fscrypt-rs");

/// A scratch ext4 with google/fscrypt's config and metadata set up.
struct Env {
    fs: LoopExt4,
    tmp: TempDir,
}

impl Env {
    /// `None` (after a loud reason) when this machine cannot run the test.
    /// `by_rs`: set up with `fscrypt-rs setup` instead of `fscrypt setup`.
    fn new(test: &str, by_rs: bool) -> Option<Env> {
        if !tool_available(
            test,
            "fscrypt",
            &["--version"],
            "fscrypt (scripts/setup.sh)",
        ) {
            return None;
        }
        let fs = scratch_ext4(test, 32, MKFS_4K)?;
        let env = Env {
            fs,
            tmp: TempDir::new(test),
        };
        let o = if by_rs {
            env.rs(&["setup", "--time", "0.001"], b"")
        } else {
            env.gfs(&["setup", "--time=1ms", "--quiet"], b"")
        };
        ok(&o, "setup");
        assert!(env.mnt().join(".fscrypt/protectors").is_dir());
        let key = env.key();
        std::fs::write(&key, [0x5au8; 32]).unwrap();
        std::fs::set_permissions(&key, PermissionsExt::from_mode(0o600)).unwrap();
        Some(env)
    }

    fn mnt(&self) -> &Path {
        self.fs.mount_point()
    }

    fn key(&self) -> PathBuf {
        self.tmp.join("raw.key")
    }

    fn dir(&self, name: &str) -> PathBuf {
        self.mnt().join(name)
    }

    fn cmd(&self, program: &str, args: &[&str], stdin: &[u8]) -> Output {
        let mut c = Command::new(program);
        c.args(args)
            .env("FSCRYPT_CONF", self.tmp.join("fscrypt.conf"))
            .env("FSCRYPT_ROOT_MNT", self.mnt());
        test_support::run::output(&mut c, stdin)
    }

    /// Runs the real `fscrypt`.
    fn gfs(&self, args: &[&str], stdin: &[u8]) -> Output {
        self.cmd("fscrypt", args, stdin)
    }

    /// Directory `dir` encrypted by the real `fscrypt` with a new
    /// custom_passphrase protector `name`, one file written, then locked.
    fn locked_by_fscrypt(&self, dir: &str, name: &str, pass: &[u8], file: (&str, &str)) -> PathBuf {
        let d = self.dir(dir);
        std::fs::create_dir(&d).unwrap();
        let name = format!("--name={name}");
        ok(
            &self.gfs(
                &[
                    "encrypt",
                    p(&d),
                    "--source=custom_passphrase",
                    &name,
                    "--quiet",
                ],
                pass,
            ),
            "fscrypt encrypt",
        );
        std::fs::write(d.join(file.0), file.1).unwrap();
        ok(&self.gfs(&["lock", p(&d), "--quiet"], b""), "fscrypt lock");
        d
    }

    /// Runs `fscrypt-rs`.
    fn rs(&self, args: &[&str], stdin: &[u8]) -> Output {
        self.cmd(BIN, args, stdin)
    }

    /// `fscrypt-rs status DIR --json`, parsed.
    fn status_json(&self, dir: &Path) -> serde_json::Value {
        let st = self.rs(&["status", p(dir), "--json"], b"");
        serde_json::from_slice(&st.stdout).unwrap_or_else(|e| panic!("{e}: {}", text(&st)))
    }
}

fn code(o: &Output) -> i32 {
    o.status.code().unwrap_or(-1)
}

fn p(path: &Path) -> &str {
    path.to_str().unwrap()
}

/// Whether the directory's contents are readable (its key is present).
fn readable(file: &Path, want: &str) -> bool {
    std::fs::read_to_string(file)
        .map(|s| s == want)
        .unwrap_or(false)
}

/// A snapshot of every file under `.fscrypt` (name and bytes).
fn metadata_snapshot(mnt: &Path) -> Vec<(String, Vec<u8>)> {
    let mut out = Vec::new();
    for sub in ["policies", "protectors"] {
        let dir = mnt.join(".fscrypt").join(sub);
        if let Ok(rd) = std::fs::read_dir(&dir) {
            for e in rd.flatten() {
                let bytes = std::fs::read(e.path()).unwrap_or_default();
                out.push((format!("{sub}/{}", e.file_name().to_string_lossy()), bytes));
            }
        }
    }
    out.sort();
    out
}

#[test]
fn encrypted_by_fscrypt_unlocked_and_locked_by_fscrypt_rs() {
    let Some(env) = Env::new("gfs_to_rs", false) else {
        return;
    };
    let (pp, rk) = (env.dir("pp"), env.dir("rk"));
    std::fs::create_dir(&pp).unwrap();
    std::fs::create_dir(&rk).unwrap();
    ok(
        &env.gfs(
            &[
                "encrypt",
                p(&pp),
                "--source=custom_passphrase",
                "--name=pp",
                "--quiet",
            ],
            b"hunter2",
        ),
        "fscrypt encrypt (passphrase)",
    );
    let keyarg = format!("--key={}", p(&env.key()));
    ok(
        &env.gfs(
            &[
                "encrypt",
                p(&rk),
                "--source=raw_key",
                "--name=rk",
                &keyarg,
                "--quiet",
            ],
            b"",
        ),
        "fscrypt encrypt (raw key)",
    );
    std::fs::write(pp.join("a"), "hello").unwrap();
    std::fs::write(rk.join("b"), "world").unwrap();
    ok(
        &env.gfs(&["lock", p(&pp), "--quiet"], b""),
        "fscrypt lock pp",
    );
    ok(
        &env.gfs(&["lock", p(&rk), "--quiet"], b""),
        "fscrypt lock rk",
    );
    assert!(!readable(&pp.join("a"), "hello"));

    // fscrypt-rs status sees fscrypt's policy and protector.
    let st = env.rs(&["status", p(&pp), "--json"], b"");
    ok(&st, "fscrypt-rs status");
    let j: serde_json::Value = serde_json::from_slice(&st.stdout).unwrap();
    assert_eq!(j["fscrypt_metadata"]["state"], "locked", "{j}");
    assert_eq!(j["fscrypt_metadata"]["protectors"][0]["name"], "pp", "{j}");

    // A wrong passphrase: exit 12, still locked, no metadata written.
    let before = metadata_snapshot(env.mnt());
    let o = env.rs(&["unlock", p(&pp)], b"hunter3\n");
    assert_eq!(code(&o), 12, "{}", text(&o));
    assert!(!readable(&pp.join("a"), "hello"));
    assert_eq!(metadata_snapshot(env.mnt()), before);

    ok(
        &env.rs(&["unlock", p(&pp)], b"hunter2\n"),
        "fscrypt-rs unlock pp",
    );
    assert!(readable(&pp.join("a"), "hello"));
    ok(
        &env.rs(&["unlock", p(&rk), "--key", p(&env.key())], b""),
        "fscrypt-rs unlock rk",
    );
    assert!(readable(&rk.join("b"), "world"));
    assert_eq!(
        metadata_snapshot(env.mnt()),
        before,
        "unlock wrote metadata"
    );

    ok(&env.rs(&["lock", p(&pp)], b""), "fscrypt-rs lock pp");
    ok(
        &env.rs(&["lock", p(&rk), "--quiet"], b""),
        "fscrypt-rs lock rk",
    );
    assert!(!readable(&pp.join("a"), "hello"));
    assert!(!readable(&rk.join("b"), "world"));

    // fscrypt still unlocks both.
    ok(
        &env.gfs(&["unlock", p(&pp), "--quiet"], b"hunter2"),
        "fscrypt unlock pp",
    );
    assert!(readable(&pp.join("a"), "hello"));
    ok(
        &env.gfs(&["unlock", p(&rk), &keyarg, "--quiet"], b""),
        "fscrypt unlock rk",
    );
    assert!(readable(&rk.join("b"), "world"));

    // A raw key protector added to pp's policy by fscrypt: fscrypt-rs picks
    // it for --key, the passphrase one without, either with --unlock-with.
    let m = p(env.mnt());
    let pol = j["policy"]["master_key_identifier"]
        .as_str()
        .unwrap()
        .to_string();
    let pass_prot = j["fscrypt_metadata"]["protectors"][0]["descriptor"]
        .as_str()
        .unwrap()
        .to_string();
    let k2 = env.tmp.join("extra.key");
    std::fs::write(&k2, [0x77u8; 32]).unwrap();
    std::fs::set_permissions(&k2, PermissionsExt::from_mode(0o600)).unwrap();
    let k2arg = format!("--key={}", p(&k2));
    ok(
        &env.gfs(
            &[
                "metadata",
                "create",
                "protector",
                m,
                "--source=raw_key",
                "--name=extra",
                &k2arg,
                "--quiet",
            ],
            b"",
        ),
        "fscrypt metadata create protector",
    );
    let st = env.rs(&["metadata", "dump", m, "--json"], b"");
    ok(&st, "fscrypt-rs metadata dump");
    let dump: serde_json::Value = serde_json::from_slice(&st.stdout).unwrap();
    let extra = dump["protectors"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["name"] == "extra")
        .unwrap()["descriptor"]
        .as_str()
        .unwrap()
        .to_string();
    ok(
        &env.gfs(
            &[
                "metadata",
                "add-protector-to-policy",
                &format!("--protector={m}:{extra}"),
                &format!("--policy={m}:{pol}"),
                &format!("--unlock-with={m}:{pass_prot}"),
                &k2arg,
                "--quiet",
            ],
            b"hunter2",
        ),
        "fscrypt metadata add-protector-to-policy",
    );
    ok(&env.rs(&["lock", p(&pp), "-q"], b""), "lock pp");
    ok(
        &env.rs(&["unlock", p(&pp), "--key", p(&k2)], b""),
        "fscrypt-rs unlock with the added protector",
    );
    assert!(readable(&pp.join("a"), "hello"));
    ok(&env.rs(&["lock", p(&pp), "-q"], b""), "lock pp");
    ok(
        &env.rs(&["unlock", p(&pp)], b"hunter2\n"),
        "fscrypt-rs unlock with the passphrase (two protectors)",
    );
    assert!(readable(&pp.join("a"), "hello"));
    ok(&env.rs(&["lock", p(&pp), "-q"], b""), "lock pp");
    let with = format!("{m}:{extra}");
    ok(
        &env.rs(
            &["unlock", p(&pp), "--unlock-with", &with, "--key", p(&k2)],
            b"",
        ),
        "fscrypt-rs unlock --unlock-with",
    );
    assert!(readable(&pp.join("a"), "hello"));

    // Locking with an open file: exit 3 and the file is named.
    let f = std::fs::File::open(pp.join("a")).unwrap();
    let o = env.rs(&["lock", p(&pp)], b"");
    assert_eq!(code(&o), 3, "{}", text(&o));
    assert!(
        String::from_utf8_lossy(&o.stdout).contains("still open"),
        "{}",
        text(&o)
    );
    drop(f);
    ok(
        &env.rs(&["lock", p(&pp)], b""),
        "fscrypt-rs lock pp after close",
    );
}

#[test]
fn encrypted_by_fscrypt_rs_read_by_fscrypt() {
    let Some(env) = Env::new("rs_to_gfs", true) else {
        return;
    };
    // The config fscrypt-rs wrote is one fscrypt accepts (it loads it for status).
    let (r1, r2) = (env.dir("r1"), env.dir("r2"));
    std::fs::create_dir(&r1).unwrap();
    std::fs::create_dir(&r2).unwrap();
    let o = env.rs(
        &[
            "encrypt",
            p(&r1),
            "--source",
            "custom_passphrase",
            "--name",
            "r1",
            "--json",
        ],
        b"pass-one\n",
    );
    ok(&o, "fscrypt-rs encrypt (passphrase)");
    let j: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let prot = j["protector"]["descriptor"].as_str().unwrap().to_string();
    let policy = j["policy"].as_str().unwrap().to_string();
    assert_eq!(policy.len(), 32, "v2 by default: {j}");
    ok(
        &env.rs(
            &[
                "encrypt",
                p(&r2),
                "--source",
                "raw_key",
                "--name",
                "r2",
                "--key",
                p(&env.key()),
                "-q",
            ],
            b"",
        ),
        "fscrypt-rs encrypt (raw key)",
    );
    std::fs::write(r1.join("f"), "one").unwrap();
    std::fs::write(r2.join("g"), "two").unwrap();

    let st = env.gfs(&["status", p(env.mnt())], b"");
    ok(&st, "fscrypt status MOUNT");
    let s = String::from_utf8_lossy(&st.stdout);
    assert!(
        s.contains(&prot) && s.contains(&policy) && s.contains("custom protector \"r1\""),
        "{s}"
    );
    let st = env.gfs(&["status", p(&r1)], b"");
    ok(&st, "fscrypt status DIR");
    assert!(
        String::from_utf8_lossy(&st.stdout).contains("Unlocked: Yes"),
        "{}",
        text(&st)
    );
    let protarg = format!("--protector={}:{prot}", p(env.mnt()));
    let dump = env.gfs(&["metadata", "dump", &protarg], b"");
    ok(&dump, "fscrypt metadata dump --protector");
    assert!(
        String::from_utf8_lossy(&dump.stdout).contains("custom_passphrase"),
        "{}",
        text(&dump)
    );
    let polarg = format!("--policy={}:{policy}", p(env.mnt()));
    ok(
        &env.gfs(&["metadata", "dump", &polarg], b""),
        "fscrypt metadata dump --policy",
    );

    ok(&env.rs(&["lock", p(&r1), "-q"], b""), "fscrypt-rs lock r1");
    ok(&env.rs(&["lock", p(&r2), "-q"], b""), "fscrypt-rs lock r2");
    assert!(!readable(&r1.join("f"), "one"));
    ok(
        &env.gfs(&["unlock", p(&r1), "--quiet"], b"pass-one"),
        "fscrypt unlock r1",
    );
    assert!(readable(&r1.join("f"), "one"));
    let keyarg = format!("--key={}", p(&env.key()));
    ok(
        &env.gfs(&["unlock", p(&r2), &keyarg, "--quiet"], b""),
        "fscrypt unlock r2",
    );
    assert!(readable(&r2.join("g"), "two"));
    ok(
        &env.gfs(&["lock", p(&r1), "--quiet"], b""),
        "fscrypt lock r1",
    );
    assert!(!readable(&r1.join("f"), "one"));

    // A second directory under the same protector (--protector MOUNT:ID).
    let r3 = env.dir("r3");
    std::fs::create_dir(&r3).unwrap();
    let protref = format!("{}:{prot}", p(env.mnt()));
    ok(
        &env.rs(
            &["encrypt", p(&r3), "--protector", &protref, "-q"],
            b"pass-one\n",
        ),
        "encrypt --protector",
    );
    std::fs::write(r3.join("h"), "three").unwrap();
    ok(
        &env.gfs(&["lock", p(&r3), "--quiet"], b""),
        "fscrypt lock r3",
    );
    ok(
        &env.gfs(&["unlock", p(&r3), "--quiet"], b"pass-one"),
        "fscrypt unlock r3",
    );
    assert!(readable(&r3.join("h"), "three"));

    // A non-empty directory is refused with the reason (exit 23).
    let full = env.dir("full");
    std::fs::create_dir(&full).unwrap();
    std::fs::write(full.join("x"), "x").unwrap();
    let before = metadata_snapshot(env.mnt());
    let o = env.rs(&["encrypt", p(&full), "--name", "f"], b"pw\n");
    assert_eq!(code(&o), 23, "{}", text(&o));
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("--convert"),
        "{}",
        text(&o)
    );
    assert_eq!(metadata_snapshot(env.mnt()), before);
}

#[test]
fn bad_metadata_is_refused_with_its_own_exit_status() {
    let Some(env) = Env::new("gfs_bad_metadata", false) else {
        return;
    };
    let d = env.locked_by_fscrypt("d", "d", b"pw", ("a", "x"));
    let pol_dir = env.mnt().join(".fscrypt/policies");
    let pol = std::fs::read_dir(&pol_dir)
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .path();
    let good = std::fs::read(&pol).unwrap();

    // Truncated policy file: exit 20, one line, nothing written.
    std::fs::write(&pol, &good[..good.len() / 2]).unwrap();
    let before = metadata_snapshot(env.mnt());
    let o = env.rs(&["unlock", p(&d)], b"pw\n");
    assert_eq!(code(&o), 20, "{}", text(&o));
    assert_eq!(
        String::from_utf8_lossy(&o.stderr).trim().lines().count(),
        1,
        "{}",
        text(&o)
    );
    assert_eq!(metadata_snapshot(env.mnt()), before);
    // Garbage: exit 20 too.
    std::fs::write(&pol, b"\xff\xff\xff\xff garbage").unwrap();
    let o = env.rs(&["unlock", p(&d)], b"pw\n");
    assert_eq!(code(&o), 20, "{}", text(&o));
    std::fs::write(&pol, &good).unwrap();

    // protectors/ replaced by a symlink: exit 21.
    let prot_dir = env.mnt().join(".fscrypt/protectors");
    let moved = env.mnt().join(".fscrypt/protectors.real");
    std::fs::rename(&prot_dir, &moved).unwrap();
    std::os::unix::fs::symlink(&moved, &prot_dir).unwrap();
    let o = env.rs(&["unlock", p(&d)], b"pw\n");
    assert_eq!(code(&o), 21, "{}", text(&o));
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("symlink"),
        "{}",
        text(&o)
    );
    std::fs::remove_file(&prot_dir).unwrap();
    std::fs::rename(&moved, &prot_dir).unwrap();

    // World-writable protectors/ without the sticky bit: exit 21.
    std::fs::set_permissions(&prot_dir, PermissionsExt::from_mode(0o777)).unwrap();
    let o = env.rs(&["unlock", p(&d)], b"pw\n");
    assert_eq!(code(&o), 21, "{}", text(&o));
    std::fs::set_permissions(&prot_dir, PermissionsExt::from_mode(0o755)).unwrap();

    // A policy slot that does not unwrap although the passphrase is right
    // (the file was damaged or edited): 20 and says so, not "wrong
    // passphrase" (12).
    let store =
        fscrypt_metadata::store::Store::new(env.mnt(), fscrypt_metadata::trust::Trust::everyone());
    let desc = pol.file_name().unwrap().to_str().unwrap().to_string();
    let mut pd = store.policy(&desc).unwrap();
    pd.wrapped_policy_keys[0].wrapped_key.as_mut().unwrap().hmac[0] ^= 1;
    store.put_policy(&pd).unwrap();
    let o = env.rs(&["unlock", p(&d)], b"pw\n");
    assert_eq!(code(&o), 20, "{}", text(&o));
    assert!(text(&o).contains("does not unwrap"), "{}", text(&o));
    std::fs::write(&pol, &good).unwrap();

    // Wrong passphrase: 12; right one works after all that.
    let o = env.rs(&["unlock", p(&d)], b"nope\n");
    assert_eq!(code(&o), 12, "{}", text(&o));
    ok(&env.rs(&["unlock", p(&d)], b"pw\n"), "unlock after repairs");
    assert!(readable(&d.join("a"), "x"));
    ok(&env.rs(&["lock", p(&d), "-q"], b""), "lock");

    // setup again: already set up (25).
    let o = env.rs(&["setup", p(env.mnt())], b"");
    assert_eq!(code(&o), 25, "{}", text(&o));
}

/// A filesystem without the `encrypt` feature: `encrypt` says how to turn
/// it on (exit 26) and writes nothing.
#[test]
fn a_filesystem_without_encryption_is_refused_with_the_fix() {
    let test = "gfs_no_encrypt";
    if !tool_available(
        test,
        "fscrypt",
        &["--version"],
        "fscrypt (scripts/setup.sh)",
    ) {
        return;
    }
    let Some(fs) = scratch_ext4(test, 32, &["-b", "4096"]) else {
        return;
    };
    let tmp = TempDir::new(test);
    let mnt = fs.mount_point();
    let rs = |args: &[&str], stdin: &[u8]| {
        let mut c = Command::new(BIN);
        c.args(args)
            .env("FSCRYPT_CONF", tmp.join("fscrypt.conf"))
            .env("FSCRYPT_ROOT_MNT", mnt);
        test_support::run::output(&mut c, stdin)
    };
    ok(&rs(&["setup", "--time", "0.001"], b""), "setup");
    let d = mnt.join("d");
    std::fs::create_dir(&d).unwrap();
    let before = metadata_snapshot(mnt);
    let o = rs(
        &[
            "encrypt",
            p(&d),
            "--source",
            "custom_passphrase",
            "--name",
            "n",
        ],
        b"pw\n",
    );
    assert_eq!(code(&o), 26, "{}", text(&o));
    assert!(text(&o).contains("tune2fs -O encrypt"), "{}", text(&o));
    // The advice once, in one line (issue 26 item 6).
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(err.matches("tune2fs").count(), 1, "{err}");
    assert_eq!(err.trim().lines().count(), 1, "{err}");
    assert_eq!(metadata_snapshot(mnt), before, "metadata written");
}

/// `encrypt --policy-options` overrides the config's options (here a v1
/// policy with padding 16 although the config says v2/32); google/fscrypt
/// reads them back. A bad option is refused before anything is written.
#[test]
fn policy_options_override_the_config() {
    let Some(env) = Env::new("gfs_policy_options", true) else {
        return;
    };
    let d = env.dir("po");
    std::fs::create_dir(&d).unwrap();
    let before = metadata_snapshot(env.mnt());
    for bad in [
        "padding=7",
        "version=3",
        "contents=ROT13",
        "colour=blue",
        "padding",
    ] {
        let o = env.rs(
            &[
                "encrypt",
                p(&d),
                "--source",
                "raw_key",
                "--name",
                "k",
                "--key",
                p(&env.key()),
                "--policy-options",
                bad,
            ],
            b"",
        );
        assert!(!o.status.success(), "{bad}: {}", text(&o));
        assert!(text(&o).contains("--policy-options"), "{bad}: {}", text(&o));
    }
    assert_eq!(metadata_snapshot(env.mnt()), before, "metadata written");
    let o = env.rs(
        &[
            "encrypt",
            p(&d),
            "--source",
            "raw_key",
            "--name",
            "k",
            "--key",
            p(&env.key()),
            "--policy-options",
            "version=1,padding=16,contents=AES_256_XTS,filenames=AES_256_CTS",
        ],
        b"",
    );
    ok(&o, "encrypt --policy-options");
    // v1 keys go to the user keyring (the config's default): lock at the end.
    struct LockAtEnd<'a>(&'a Env, &'a Path);
    impl Drop for LockAtEnd<'_> {
        fn drop(&mut self) {
            let _ = self.0.rs(&["lock", p(self.1), "-q"], b"");
        }
    }
    let _lock = LockAtEnd(&env, &d);
    let j = env.status_json(&d);
    assert_eq!(j["policy"]["version"], 1, "{j}");
    let st = env.gfs(&["status", p(&d)], b"");
    ok(&st, "fscrypt status");
    let st = String::from_utf8_lossy(&st.stdout).into_owned();
    assert!(
        st.contains("padding:16") && st.contains("policy_version:1"),
        "{st}"
    );
}

/// v1 policies whose keys go to the filesystem keyring (google/fscrypt's
/// `use_fs_keyring_for_v1_policies: true`).
#[test]
fn v1_policies_both_ways_with_the_filesystem_keyring() {
    v1_both_ways("gfs_v1", true);
}

/// v1 policies whose keys go to the caller's user keyring, google/fscrypt's
/// default: each tool sees and removes the other's key there (`lock` drops
/// the caches so open inodes lose their keys).
#[test]
fn v1_policies_both_ways_with_the_user_keyring() {
    v1_both_ways("gfs_v1_user", false);
}

fn v1_both_ways(test: &str, fs_keyring: bool) {
    let Some(env) = Env::new(test, false) else {
        return;
    };
    let conf = env.tmp.join("fscrypt.conf");
    let config = std::fs::read_to_string(&conf)
        .unwrap()
        .replace("\"policy_version\": \"2\"", "\"policy_version\": \"1\"")
        .replace(
            "\"use_fs_keyring_for_v1_policies\": false",
            &format!("\"use_fs_keyring_for_v1_policies\": {fs_keyring}"),
        );
    std::fs::write(&conf, config).unwrap();
    // google/fscrypt wants the user named when root uses a user keyring.
    let gfs = |args: &[&str], stdin: &[u8]| {
        let mut args = args.to_vec();
        if !fs_keyring && args[0] != "status" {
            args.push("--user=root");
        }
        env.gfs(&args, stdin)
    };

    let (g, r) = (env.dir("g1"), env.dir("r1"));
    std::fs::create_dir(&g).unwrap();
    std::fs::create_dir(&r).unwrap();
    // User-keyring keys outlive the filesystem: lock both at the end, even
    // on failure.
    struct LockAtEnd<'a>(&'a Env, [&'a Path; 2]);
    impl Drop for LockAtEnd<'_> {
        fn drop(&mut self) {
            for d in self.1 {
                let _ = self.0.rs(&["lock", p(d), "-q"], b"");
            }
        }
    }
    let _lock = LockAtEnd(&env, [&g, &r]);
    ok(
        &gfs(
            &[
                "encrypt",
                p(&g),
                "--source=custom_passphrase",
                "--name=g1",
                "--quiet",
            ],
            b"v1pass",
        ),
        "fscrypt encrypt v1",
    );
    std::fs::write(g.join("a"), "gv1").unwrap();
    ok(&gfs(&["lock", p(&g), "--quiet"], b""), "fscrypt lock v1");
    let j = env.status_json(&g);
    assert_eq!(j["policy"]["version"], 1, "{j}");
    assert_eq!(j["key_status"], "absent", "{j}");
    ok(
        &env.rs(&["unlock", p(&g)], b"v1pass\n"),
        "fscrypt-rs unlock v1",
    );
    let st = gfs(&["status", p(&g)], b"");
    assert!(
        String::from_utf8_lossy(&st.stdout).contains("Unlocked: Yes"),
        "{}",
        text(&st)
    );
    assert!(readable(&g.join("a"), "gv1"));
    ok(&env.rs(&["lock", p(&g), "-q"], b""), "fscrypt-rs lock v1");
    assert!(!readable(&g.join("a"), "gv1"));
    ok(
        &gfs(&["unlock", p(&g), "--quiet"], b"v1pass"),
        "fscrypt unlock v1 again",
    );
    assert!(readable(&g.join("a"), "gv1"));
    let j = env.status_json(&g);
    assert_eq!(j["key_status"], "present", "fscrypt's key not seen: {j}");
    ok(
        &env.rs(&["lock", p(&g), "-q"], b""),
        "fscrypt-rs lock fscrypt's v1 key",
    );
    assert!(!readable(&g.join("a"), "gv1"));

    let o = env.rs(&["encrypt", p(&r), "--name", "r1", "--json"], b"rsv1\n");
    ok(&o, "fscrypt-rs encrypt v1");
    let j: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(
        j["policy"].as_str().unwrap().len(),
        16,
        "v1 descriptor: {j}"
    );
    std::fs::write(r.join("b"), "rv1").unwrap();
    ok(
        &gfs(&["lock", p(&r), "--quiet"], b""),
        "fscrypt lock fscrypt-rs's v1",
    );
    assert!(!readable(&r.join("b"), "rv1"));
    ok(
        &gfs(&["unlock", p(&r), "--quiet"], b"rsv1"),
        "fscrypt unlock fscrypt-rs's v1",
    );
    assert!(readable(&r.join("b"), "rv1"));
}

#[test]
fn every_google_style_command_has_help() {
    for args in [
        &["setup", "--help"][..],
        &["encrypt", "--help"],
        &["unlock", "--help"],
        &["lock", "--help"],
        &["metadata", "--help"],
        &["metadata", "dump", "--help"],
        &["status", "--help"],
        &["purge", "--help"],
    ] {
        let o = test_support::run::output(Command::new(BIN).args(args), b"");
        ok(&o, &format!("{args:?}"));
        assert!(
            String::from_utf8_lossy(&o.stdout).contains("Usage"),
            "{}",
            text(&o)
        );
    }
    // A passphrase is never an argument.
    let o = test_support::run::output(Command::new(BIN).args(["unlock", "--help"]), b"");
    assert!(!String::from_utf8_lossy(&o.stdout).contains("--passphrase"));
}
