//! A private SoftHSM v2 (softhsm2) for PKCS#11 tests: a temp dir with its
//! own `softhsm2.conf` and token directory, tokens made with
//! `softhsm2-util --init-token`, everything removed on drop.
//!
//! SoftHSM reads its configuration from `SOFTHSM2_CONF` in the environment
//! of the process that loads `libsofthsm2.so`, once, at `C_Initialize`; a
//! PKCS#11 user such as `fscrypt_seal::pkcs11` initialises a module once
//! per process and never finalises it. So a test must never point its own
//! process at a private conf: parallel test threads would race on the
//! environment and share one initialised module. Two ways are given:
//!
//! * a test that drives the `fscrypt-rs` binary passes
//!   [`SoftHsm::env`] to that child's `Command::env` only;
//! * a test that calls the library in-process uses [`in_child`]: the test
//!   re-runs itself (this test binary, `--exact NAME`) as a child process
//!   with `SOFTHSM2_CONF` set for that child alone, so every test has its
//!   own process, conf and tokens, and the parent removes them afterwards,
//!   even when the child failed.
//!
//! The PINs given to [`SoftHsm::init_token`] go on `softhsm2-util`'s
//! command line: they are test PINs of a throwaway token, not secrets.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::TempDir;
use crate::skip::skip;

/// The environment variable SoftHSM reads its configuration path from.
pub const CONF_VAR: &str = "SOFTHSM2_CONF";

/// Set (to `1`) in the child of [`in_child`]: the test body runs there.
pub const CHILD_VAR: &str = "FSCRYPT_RS_SOFTHSM_CHILD";

/// Where Debian and Ubuntu install the module (the plain path first, then
/// the multiarch ones).
const MODULE_PATHS: &[&str] = &[
    "/usr/lib/softhsm/libsofthsm2.so",
    "/usr/lib/x86_64-linux-gnu/softhsm/libsofthsm2.so",
    "/usr/lib/aarch64-linux-gnu/softhsm/libsofthsm2.so",
    "/usr/lib64/pkcs11/libsofthsm2.so",
    "/usr/lib/pkcs11/libsofthsm2.so",
];

/// The installed `libsofthsm2.so`, if any.
pub fn module_path() -> Option<PathBuf> {
    MODULE_PATHS.iter().map(PathBuf::from).find(|p| p.exists())
}

/// Why softhsm2 cannot be used here (module or `softhsm2-util` missing),
/// or `None` if it can.
pub fn unavailable() -> Option<String> {
    if module_path().is_none() {
        return Some("libsofthsm2.so not found (install softhsm2)".into());
    }
    if !crate::skip::command_exists("softhsm2-util", &["--version"]) {
        return Some("softhsm2-util not found (install softhsm2)".into());
    }
    None
}

/// Whether softhsm2 can be used here; prints a loud skip line for `test`
/// when not.
pub fn available(test: &str) -> bool {
    match unavailable() {
        Some(r) => {
            skip(test, &r);
            false
        }
        None => true,
    }
}

/// A private softhsm2: `<tmp>/softhsm2.conf` pointing at `<tmp>/tokens`.
/// Dropping it removes both (and so every token made in it).
#[derive(Debug)]
pub struct SoftHsm {
    dir: TempDir,
    conf: PathBuf,
    module: PathBuf,
}

impl SoftHsm {
    /// Writes the conf and the empty token directory.
    ///
    /// # Panics
    /// If softhsm2 is not installed (check [`available`] first) or the
    /// files cannot be written.
    pub fn new(tag: &str) -> SoftHsm {
        let module = module_path().expect("softhsm2 is installed (check softhsm::available)");
        let dir = TempDir::new(&format!("softhsm-{tag}"));
        let tokens = dir.sub("tokens");
        let conf = dir.join("softhsm2.conf");
        std::fs::write(
            &conf,
            format!(
                "directories.tokendir = {}\nobjectstore.backend = file\nlog.level = ERROR\nslots.removable = false\n",
                tokens.display()
            ),
        )
        .unwrap_or_else(|e| panic!("write {}: {e}", conf.display()));
        SoftHsm { dir, conf, module }
    }

    /// Creates a token labelled `label` in the first free slot
    /// (`softhsm2-util --init-token --free`), with user PIN `pin` and SO
    /// PIN `so_pin`; returns its serial number.
    ///
    /// # Panics
    /// If `softhsm2-util` fails.
    pub fn init_token(&self, label: &str, pin: &str, so_pin: &str) -> String {
        let out = crate::run::output(
            Command::new("softhsm2-util")
                .args(["--init-token", "--free", "--label", label])
                .args(["--pin", pin, "--so-pin", so_pin])
                .env(CONF_VAR, &self.conf),
            b"",
        );
        assert!(
            out.status.success(),
            "softhsm2-util --init-token --label {label}: {}{}",
            crate::text(&out.stdout),
            crate::text(&out.stderr)
        );
        self.serial(label)
    }

    /// The serial number of the token labelled `label`, from
    /// `softhsm2-util --show-slots`.
    ///
    /// # Panics
    /// If there is no such token.
    pub fn serial(&self, label: &str) -> String {
        let out = crate::run::output(
            Command::new("softhsm2-util")
                .arg("--show-slots")
                .env(CONF_VAR, &self.conf),
            b"",
        );
        let text = crate::text(&out.stdout);
        // Each token's block lists "Label:" then "Serial number:".
        let mut found = false;
        for line in text.lines().map(str::trim) {
            if let Some(l) = line.strip_prefix("Label:") {
                found = l.trim() == label;
            } else if let Some(s) = line.strip_prefix("Serial number:")
                && found
            {
                return s.trim().to_owned();
            }
        }
        panic!("no token '{label}' in softhsm2-util --show-slots: {text}");
    }

    /// The module to load (`libsofthsm2.so`).
    pub fn module(&self) -> &Path {
        &self.module
    }

    /// This softhsm2's `softhsm2.conf`.
    pub fn conf(&self) -> &Path {
        &self.conf
    }

    /// The token directory.
    pub fn tokens(&self) -> PathBuf {
        self.dir.join("tokens")
    }

    /// `(SOFTHSM2_CONF, conf)`: what a child process that loads the module
    /// needs in its environment (`cmd.env(k, v)`).
    pub fn env(&self) -> (&'static str, &Path) {
        (CONF_VAR, &self.conf)
    }
}

/// Runs the calling test's body in a child process that sees a private
/// softhsm2, and tells the caller which side it is on.
///
/// In the child (`FSCRYPT_RS_SOFTHSM_CHILD` set), returns the module path:
/// the test goes on with its body, its `SOFTHSM2_CONF` already set.
///
/// In the parent, returns `None` after: a loud skip if softhsm2 is absent;
/// otherwise a new [`SoftHsm`], `setup` (create the tokens), this test
/// binary run again as `NAME --exact --nocapture --test-threads=1` with
/// `SOFTHSM2_CONF` and the marker set for the child only, its output
/// printed, and an assertion that it ran that one test and passed. The
/// private softhsm2 is removed after, even when the assertion fails.
///
/// `name` is the test's path inside its binary (its function name for a
/// top-level test in `tests/*.rs`).
///
/// # Panics
/// In the parent, when the child test fails or did not run.
pub fn in_child(name: &str, setup: impl FnOnce(&SoftHsm)) -> Option<PathBuf> {
    if std::env::var_os(CHILD_VAR).is_some() {
        return Some(module_path().expect("the parent found softhsm2"));
    }
    if !available(name) {
        return None;
    }
    let hsm = SoftHsm::new(name);
    setup(&hsm);
    let exe = std::env::current_exe().expect("the test binary's path");
    let out = crate::run::output(
        Command::new(exe)
            .args([name, "--exact", "--nocapture", "--test-threads=1"])
            .env(CONF_VAR, hsm.conf())
            .env(CHILD_VAR, "1"),
        b"",
    );
    let stdout = crate::text(&out.stdout);
    let stderr = crate::text(&out.stderr);
    print!("{stdout}");
    eprint!("{stderr}");
    assert!(out.status.success(), "the child run of {name} failed");
    assert!(
        stdout.contains("1 passed"),
        "the child run of {name} ran no test (is the name right?)"
    );
    None
}
