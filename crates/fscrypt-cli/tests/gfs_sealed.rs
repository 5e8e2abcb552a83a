//! Sealed protectors on kernel directories (issue 25 item 6), against a
//! private swtpm and the real google/fscrypt (Debian's `fscrypt` 0.3.3):
//! `fscrypt-rs encrypt DIR --source tpm2` makes a custom_passphrase
//! protector whose passphrase the TPM releases; `fscrypt-rs unlock DIR`
//! needs no passphrase; after a PCR change the TPM refuses (naming the
//! PCR) and the recovery passphrase unlocks DIR with google/fscrypt and
//! with fscrypt-rs.
//!
//! Each test makes its own loop ext4 (as root), its own swtpm (loopback
//! ports, temp state) and keeps `FSCRYPT_CONF`/`FSCRYPT_ROOT_MNT` inside
//! its temp dir; all of it is torn down by drop guards, also on failure.
//! Skipped loudly without root, loop devices, `fscrypt`, swtpm or
//! tpm2-tools.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::Instant;

use test_support::loopdev::{MKFS_4K, scratch_ext4};
use test_support::loopfs::LoopExt4;
use test_support::run::assert_ok as ok;
use test_support::run::describe as text;
use test_support::skip::tool_available;
use test_support::swtpm::SwTpm;
use test_support::tempdir::TempDir;

const BIN: &str = env!("CARGO_BIN_EXE_fscrypt-rs");

/// A scratch ext4 set up by `fscrypt-rs setup`, and a private swtpm.
struct Env {
    // Dropped in this order: the filesystem (unmounted, detached), the
    // config's directory, then the TPM.
    fs: LoopExt4,
    tmp: TempDir,
    tpm: SwTpm,
}

impl Env {
    /// `None` (after a loud reason) when this machine cannot run the test.
    fn new(test: &str) -> Option<Env> {
        if !tool_available(
            test,
            "fscrypt",
            &["--version"],
            "fscrypt (scripts/setup.sh)",
        ) {
            return None;
        }
        let fs = scratch_ext4(test, 32, MKFS_4K)?;
        let tpm = SwTpm::start(test)?;
        let env = Env {
            fs,
            tmp: TempDir::new(test),
            tpm,
        };
        ok(&env.rs(&["setup", "--time", "0.001"], b""), "setup");
        assert!(env.mnt().join(".fscrypt/protectors").is_dir());
        Some(env)
    }

    fn mnt(&self) -> &Path {
        self.fs.mount_point()
    }

    fn cmd(&self, program: &str, args: &[&str], stdin: &[u8]) -> Output {
        let mut c = Command::new(program);
        c.args(args)
            .env("FSCRYPT_CONF", self.tmp.join("fscrypt.conf"))
            .env("FSCRYPT_ROOT_MNT", self.mnt())
            // The TPM is named by --tcti only (the record's TCTI is a
            // hint, never used to connect).
            .env_remove("TPM2TOOLS_TCTI")
            .env_remove("TCTI");
        test_support::run::output(&mut c, stdin)
    }

    /// Runs the real `fscrypt`.
    fn gfs(&self, args: &[&str], stdin: &[u8]) -> Output {
        self.cmd("fscrypt", args, stdin)
    }

    /// Runs `fscrypt-rs`.
    fn rs(&self, args: &[&str], stdin: &[u8]) -> Output {
        self.cmd(BIN, args, stdin)
    }

    /// `fscrypt-rs unlock DIR --tcti <this swtpm> EXTRA...`.
    fn unlock(&self, dir: &Path, extra: &[&str], stdin: &[u8]) -> Output {
        let tcti = self.tpm.tcti();
        let mut args = vec!["unlock", p(dir), "--tcti", &tcti];
        args.extend_from_slice(extra);
        self.rs(&args, stdin)
    }

    /// A new directory encrypted by `fscrypt-rs encrypt --source tpm2`
    /// (sealed to PCR 7), one file written in it; the `--json` answer.
    fn encrypted_tpm2(&self, name: &str, file: (&str, &str)) -> (PathBuf, serde_json::Value) {
        let d = self.mnt().join(name);
        std::fs::create_dir(&d).unwrap();
        let tcti = self.tpm.tcti();
        let o = self.rs(
            &[
                "encrypt",
                p(&d),
                "--source",
                "tpm2",
                "--tcti",
                &tcti,
                "--json",
            ],
            b"",
        );
        ok(&o, "fscrypt-rs encrypt --source tpm2");
        let j: serde_json::Value =
            serde_json::from_slice(&o.stdout).unwrap_or_else(|e| panic!("{e}: {}", text(&o)));
        std::fs::write(d.join(file.0), file.1).unwrap();
        (d, j)
    }
}

fn p(path: &Path) -> &str {
    path.to_str().unwrap()
}

fn code(o: &Output) -> i32 {
    o.status.code().unwrap_or(-1)
}

/// Whether `file` reads back as `want` (its directory is unlocked).
fn readable(file: &Path, want: &str) -> bool {
    std::fs::read_to_string(file).is_ok_and(|s| s == want)
}

/// The whole item: encrypt with tpm2, unlock without a passphrase,
/// google/fscrypt sees a custom_passphrase protector; after PCR 7
/// changes fscrypt-rs refuses the TPM route naming PCR 7 and fails
/// cleanly without a passphrase, and the recovery passphrase unlocks the
/// directory with google/fscrypt (and with fscrypt-rs).
#[test]
fn tpm2_directory_unlocks_without_prompt_and_with_recovery_after_pcr_change() {
    let test = "tpm2_kernel_directory";
    let Some(env) = Env::new(test) else {
        return;
    };
    let (dir, j) = env.encrypted_tpm2("secret", ("a.txt", "sealed hello"));
    let file = dir.join("a.txt");

    // What encrypt made: a custom_passphrase protector named after the
    // kind, its record in the sidecar, the recovery passphrase once.
    assert_eq!(j["protector"]["source"], "custom_passphrase", "{j}");
    assert_eq!(j["protector"]["name"], "tpm2", "{j}");
    assert_eq!(j["sealed"]["kind"], "tpm2", "{j}");
    assert_eq!(j["sealed"]["pcrs"], "sha256:7", "{j}");
    let desc = j["protector"]["descriptor"].as_str().unwrap().to_owned();
    let recovery = j["recovery_passphrase"].as_str().unwrap().to_owned();
    assert_eq!(recovery.len(), 64, "{recovery}");
    let sidecar = env
        .mnt()
        .join(format!(".fscrypt/fscrypt-rs/sealed/{desc}.json"));
    let md = std::fs::symlink_metadata(&sidecar).unwrap();
    assert!(md.is_file());
    assert_eq!(md.permissions().mode() & 0o777, 0o600);
    let rec: serde_json::Value = serde_json::from_slice(&std::fs::read(&sidecar).unwrap()).unwrap();
    assert_eq!(rec["version"], 1);
    assert_eq!(rec["protector"], desc.as_str());
    assert_eq!(rec["sealed"]["kind"], "tpm2");
    let sidecar_text = String::from_utf8(std::fs::read(&sidecar).unwrap()).unwrap();
    assert!(!sidecar_text.contains(&recovery));
    assert!(readable(&file, "sealed hello"));

    // Locked, then unlocked by the TPM with nothing on stdin.
    ok(&env.rs(&["lock", p(&dir)], b""), "fscrypt-rs lock");
    assert!(!readable(&file, "sealed hello"));
    let t = Instant::now();
    let o = env.unlock(&dir, &[], b"");
    let took = t.elapsed();
    ok(&o, "fscrypt-rs unlock (tpm2)");
    eprintln!("{test}: fscrypt-rs unlock via tpm2 (swtpm) took {took:?}");
    assert!(
        String::from_utf8_lossy(&o.stdout).contains("by its tpm2 protector"),
        "{}",
        text(&o)
    );
    assert!(readable(&file, "sealed hello"));

    // google/fscrypt reads the metadata (the extra directory in .fscrypt
    // does not bother it) and sees a custom_passphrase protector.
    let st = env.gfs(&["status", p(env.mnt())], b"");
    ok(&st, "fscrypt status MOUNT");
    let out = String::from_utf8_lossy(&st.stdout);
    assert!(out.contains(&desc), "{out}");
    assert!(out.contains("custom protector \"tpm2\""), "{out}");
    let st = env.gfs(&["status", p(&dir)], b"");
    ok(&st, "fscrypt status DIR");
    assert!(
        String::from_utf8_lossy(&st.stdout).contains("custom protector \"tpm2\""),
        "{}",
        text(&st)
    );
    ok(
        &env.gfs(
            &[
                "metadata",
                "dump",
                &format!("--protector={}:{desc}", p(env.mnt())),
            ],
            b"",
        ),
        "fscrypt metadata dump",
    );
    // fscrypt-rs status shows the sealed record.
    let st = env.rs(&["status", p(&dir), "--json"], b"");
    ok(&st, "fscrypt-rs status --json");
    let sj: serde_json::Value = serde_json::from_slice(&st.stdout).unwrap();
    let prot = &sj["fscrypt_metadata"]["protectors"][0];
    assert_eq!(prot["sealed"]["kind"], "tpm2", "{sj}");
    assert_eq!(prot["sealed"]["pcrs"], "sha256:7", "{sj}");
    assert_eq!(prot["sealed"]["device"], env.tpm.tcti(), "{sj}");

    // The boot state changes: PCR 7 is extended.
    ok(&env.rs(&["lock", p(&dir)], b""), "fscrypt-rs lock");
    env.tpm.pcr_extend(7, &"11".repeat(32));
    let o = env.unlock(&dir, &[], b"");
    assert_ne!(code(&o), 0, "{}", text(&o));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("PCR 7"), "{err}");
    assert!(err.contains(&desc), "{err}");
    assert!(!err.contains(&recovery));
    assert!(
        !err.lines().any(|l| l.contains("panicked")),
        "not a clean failure: {err}"
    );
    assert!(!readable(&file, "sealed hello"));

    // google/fscrypt unlocks it with the recovery passphrase.
    ok(
        &env.gfs(&["unlock", p(&dir), "--quiet"], recovery.as_bytes()),
        "fscrypt unlock with the recovery passphrase",
    );
    assert!(readable(&file, "sealed hello"));

    // So does fscrypt-rs: the TPM refuses, the prompt takes it.
    ok(&env.gfs(&["lock", p(&dir), "--quiet"], b""), "fscrypt lock");
    assert!(!readable(&file, "sealed hello"));
    let o = env.unlock(&dir, &[], recovery.as_bytes());
    ok(&o, "fscrypt-rs unlock with the recovery passphrase");
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("PCR 7"),
        "{}",
        text(&o)
    );
    assert!(readable(&file, "sealed hello"));

    // A wrong passphrase after the refusal is a wrong passphrase (12).
    ok(&env.rs(&["lock", p(&dir)], b""), "fscrypt-rs lock");
    let o = env.unlock(&dir, &[], b"not-the-recovery-passphrase");
    assert_eq!(code(&o), 12, "{}", text(&o));
    assert!(!readable(&file, "sealed hello"));
    // metadata reseal: the same secret sealed to PCR 7's new value. The
    // TPM refuses, so the recovery passphrase is asked (read leniently:
    // upper case, no dashes); one of the right form that does not open
    // the protector is a wrong passphrase (12) and changes nothing.
    let prot = format!("{}:{desc}", p(env.mnt()));
    let tcti = env.tpm.tcti();
    let reseal = |stdin: &[u8]| {
        env.rs(
            &["metadata", "reseal", "--protector", &prot, "--tcti", &tcti],
            stdin,
        )
    };
    let before = std::fs::read(&sidecar).unwrap();
    let o = reseal("0000-".repeat(13).trim_end_matches('-').as_bytes());
    assert_eq!(code(&o), 12, "{}", text(&o));
    assert_eq!(std::fs::read(&sidecar).unwrap(), before);
    let typed = recovery.to_uppercase().replace('-', "");
    ok(&reseal(typed.as_bytes()), "metadata reseal");
    assert_ne!(std::fs::read(&sidecar).unwrap(), before);
    let o = env.unlock(&dir, &[], b"");
    ok(&o, "fscrypt-rs unlock (tpm2) after the reseal");
    assert!(readable(&file, "sealed hello"));
    // The protector did not change: google/fscrypt takes the same
    // recovery passphrase.
    ok(&env.gfs(&["lock", p(&dir), "--quiet"], b""), "fscrypt lock");
    ok(
        &env.gfs(&["unlock", p(&dir), "--quiet"], recovery.as_bytes()),
        "fscrypt unlock with the recovery passphrase after the reseal",
    );
    assert!(readable(&file, "sealed hello"));
}

/// `--no-sealed` skips the TPM (the prompt gets the passphrase); a
/// protector destroyed takes its sidecar with it; a sidecar that is not
/// a regular file (a symlink planted in its place) is refused with a
/// reason and the prompt still works.
#[test]
fn no_sealed_flag_hostile_sidecar_and_destroy() {
    let test = "tpm2_kernel_sidecar";
    let Some(env) = Env::new(test) else {
        return;
    };
    let (dir, j) = env.encrypted_tpm2("d", ("f", "x"));
    let file = dir.join("f");
    let desc = j["protector"]["descriptor"].as_str().unwrap().to_owned();
    let recovery = j["recovery_passphrase"].as_str().unwrap().to_owned();
    let sidecar = env
        .mnt()
        .join(format!(".fscrypt/fscrypt-rs/sealed/{desc}.json"));

    // --no-sealed: straight to the passphrase (none on stdin: refused).
    ok(&env.rs(&["lock", p(&dir)], b""), "lock");
    let o = env.unlock(&dir, &["--no-sealed"], b"");
    assert_ne!(code(&o), 0, "{}", text(&o));
    assert!(!readable(&file, "x"));
    ok(
        &env.unlock(&dir, &["--no-sealed"], recovery.as_bytes()),
        "unlock --no-sealed with the recovery passphrase",
    );
    assert!(readable(&file, "x"));

    // A symlink in place of the sidecar: refused (named), the prompt
    // follows.
    ok(&env.rs(&["lock", p(&dir)], b""), "lock");
    let saved = std::fs::read(&sidecar).unwrap();
    std::fs::remove_file(&sidecar).unwrap();
    std::os::unix::fs::symlink("/etc/hostname", &sidecar).unwrap();
    let o = env.unlock(&dir, &[], recovery.as_bytes());
    ok(&o, "unlock with a symlinked sidecar (recovery passphrase)");
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("symlink"),
        "{}",
        text(&o)
    );
    std::fs::remove_file(&sidecar).unwrap();
    std::fs::write(&sidecar, &saved).unwrap();
    std::fs::set_permissions(&sidecar, PermissionsExt::from_mode(0o600)).unwrap();

    // Destroying the protector (forced: its policy still uses it) takes
    // the sidecar away.
    let prot = format!("{}:{desc}", p(env.mnt()));
    ok(
        &env.rs(
            &["metadata", "destroy", "--protector", &prot, "--force"],
            b"",
        ),
        "metadata destroy --protector --force",
    );
    assert!(std::fs::symlink_metadata(&sidecar).is_err());
}

/// A TPM2 protector with a PIN: the PIN comes from --pin-file (never
/// stdin, which stays for the passphrase); a wrong PIN is refused as
/// such and the recovery passphrase still unlocks; flags of another kind
/// or a passphrase source are refused before anything is written.
#[test]
fn tpm2_pin_and_refused_options() {
    let test = "tpm2_kernel_pin";
    let Some(env) = Env::new(test) else {
        return;
    };
    let tcti = env.tpm.tcti();
    let pin = env.tmp.join("pin");
    std::fs::write(&pin, "2468\n").unwrap();
    let bad_pin = env.tmp.join("bad-pin");
    std::fs::write(&bad_pin, "1357\n").unwrap();
    let d = env.mnt().join("pinned");
    std::fs::create_dir(&d).unwrap();

    // Refusals: a pkcs11 flag, a passphrase file.
    let before = std::fs::read_dir(env.mnt().join(".fscrypt/protectors"))
        .unwrap()
        .count();
    let o = env.rs(
        &[
            "encrypt",
            p(&d),
            "--source",
            "tpm2",
            "--tcti",
            &tcti,
            "--token",
            "t",
        ],
        b"",
    );
    assert_eq!(code(&o), 1, "{}", text(&o));
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("--token"),
        "{}",
        text(&o)
    );
    let o = env.rs(
        &[
            "encrypt",
            p(&d),
            "--source",
            "tpm2",
            "--tcti",
            &tcti,
            "--passfile",
            p(&pin),
        ],
        b"",
    );
    assert_eq!(code(&o), 1, "{}", text(&o));
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("--passfile"),
        "{}",
        text(&o)
    );
    assert_eq!(
        std::fs::read_dir(env.mnt().join(".fscrypt/protectors"))
            .unwrap()
            .count(),
        before
    );

    let o = env.rs(
        &[
            "encrypt",
            p(&d),
            "--source",
            "tpm2",
            "--tcti",
            &tcti,
            "--pin",
            "--pin-file",
            p(&pin),
            "--name",
            "tpm with pin",
            "--json",
        ],
        b"",
    );
    ok(&o, "encrypt --source tpm2 --pin");
    let j: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(j["sealed"]["pin"], "yes", "{j}");
    assert_eq!(j["protector"]["name"], "tpm with pin", "{j}");
    let recovery = j["recovery_passphrase"].as_str().unwrap().to_owned();
    let file = d.join("f");
    std::fs::write(&file, "pinned").unwrap();

    ok(&env.rs(&["lock", p(&d)], b""), "lock");
    ok(
        &env.unlock(&d, &["--pin-file", p(&pin)], b""),
        "unlock with the right PIN",
    );
    assert!(readable(&file, "pinned"));

    ok(&env.rs(&["lock", p(&d)], b""), "lock");
    let o = env.unlock(&d, &["--pin-file", p(&bad_pin)], recovery.as_bytes());
    ok(&o, "unlock: wrong PIN, then the recovery passphrase");
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("wrong TPM PIN"),
        "{}",
        text(&o)
    );
    assert!(readable(&file, "pinned"));
}
