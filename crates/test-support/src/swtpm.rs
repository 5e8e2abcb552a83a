//! A private software TPM 2.0 (`swtpm`) for the tests of TPM-sealed
//! protectors, plus the few `tpm2-tools` commands they need against it.
//!
//! [`SwTpm::start`] runs `swtpm socket --tpm2` with its state in a fresh
//! [`TempDir`], its command and control sockets on a free pair of loopback
//! ports (`127.0.0.1:P` and `P+1`), already started (`startup-clear`), so
//! a TSS connects with the TCTI [`SwTpm::tcti`]
//! (`swtpm:host=127.0.0.1,port=P`). The process is killed and its state
//! removed when the value is dropped, also when the test panics.
//!
//! ```ignore
//! let Some(tpm) = SwTpm::start("seal_then_unseal") else { return };
//! // ... seal with tcti = tpm.tcti() ...
//! tpm.pcr_extend(7, &"11".repeat(32));
//! ```

use std::net::{TcpListener, TcpStream};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::procs::ChildGuard;
use crate::skip::{command_exists, skip};
use crate::tempdir::TempDir;

/// How many port pairs [`SwTpm::start`] tries before giving up (another
/// process may take a port between the probe and swtpm's bind).
const PORT_TRIES: usize = 8;

/// How long swtpm gets to open its sockets.
const START_TIMEOUT: Duration = Duration::from_secs(20);

/// A running private swtpm; killed, and its state directory removed, on
/// drop.
#[derive(Debug)]
pub struct SwTpm {
    // Field order matters: the process goes before its state directory.
    child: ChildGuard,
    port: u16,
    _state: TempDir,
}

impl SwTpm {
    /// Why the swtpm tests cannot run here (`swtpm` or `tpm2-tools`
    /// missing), or `None` if they can.
    pub fn unavailable() -> Option<&'static str> {
        if !command_exists("swtpm", &["--version"]) {
            Some("swtpm is not installed (run scripts/setup.sh)")
        } else if !command_exists("tpm2_pcrextend", &["--version"]) {
            Some("tpm2-tools is not installed (run scripts/setup.sh)")
        } else {
            None
        }
    }

    /// Starts a private swtpm for `test` (its name, for the skip line).
    /// Returns `None` after printing a loud skip line when swtpm or
    /// tpm2-tools are not installed.
    ///
    /// # Panics
    /// If swtpm is installed but does not come up on any of a few free
    /// port pairs (a broken install must fail the test, not skip it).
    pub fn start(test: &str) -> Option<SwTpm> {
        if let Some(reason) = SwTpm::unavailable() {
            skip(test, reason);
            return None;
        }
        let state = TempDir::new("swtpm");
        let mut last = String::new();
        for _ in 0..PORT_TRIES {
            let Some(port) = free_port_pair() else {
                last = "no free loopback port pair".into();
                continue;
            };
            match spawn(&state, port) {
                Ok(child) => {
                    return Some(SwTpm {
                        child,
                        port,
                        _state: state,
                    });
                }
                Err(e) => last = e,
            }
        }
        panic!("swtpm did not start: {last}");
    }

    /// The TCTI spec of this TPM: `swtpm:host=127.0.0.1,port=P`.
    pub fn tcti(&self) -> String {
        format!("swtpm:host=127.0.0.1,port={}", self.port)
    }

    /// Extends PCR `pcr` of the SHA-256 bank with `digest_hex` (64 hex
    /// digits) through `tpm2_pcrextend`.
    ///
    /// # Panics
    /// If the command fails.
    pub fn pcr_extend(&self, pcr: u8, digest_hex: &str) {
        self.tool(
            "tpm2_pcrextend",
            &[format!("{pcr}:sha256={digest_hex}").as_str()],
        );
    }

    /// Runs `tpm2_dictionarylockout ARGS` against this TPM (its lockout
    /// auth is empty), e.g. `["--setup-parameters", "--max-tries=2"]` or
    /// `["--clear-lockout"]`.
    ///
    /// # Panics
    /// If the command fails.
    pub fn dictionary_lockout(&self, args: &[&str]) {
        self.tool("tpm2_dictionarylockout", args);
    }

    /// Runs the tpm2-tools command `program` with `-T <tcti>` and `args`.
    ///
    /// # Panics
    /// If it cannot start or exits non-zero (its stderr is in the message).
    pub fn tool(&self, program: &str, args: &[&str]) {
        let out = Command::new(program)
            .arg("-T")
            .arg(self.tcti())
            .args(args)
            .stdin(Stdio::null())
            .output()
            .unwrap_or_else(|e| panic!("run {program}: {e}"));
        assert!(
            out.status.success(),
            "{program} {args:?} failed ({}): {}",
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }

    /// The process id of the swtpm process.
    pub fn pid(&self) -> u32 {
        self.child.0.id()
    }
}

/// A port P such that P and P+1 are both free on 127.0.0.1 right now.
fn free_port_pair() -> Option<u16> {
    for _ in 0..32 {
        let l = TcpListener::bind("127.0.0.1:0").ok()?;
        let port = l.local_addr().ok()?.port();
        if port < u16::MAX && TcpListener::bind(("127.0.0.1", port + 1)).is_ok() {
            return Some(port);
        }
    }
    None
}

/// Starts swtpm on `port`/`port+1` with its state in `state` and waits
/// until both sockets accept connections.
fn spawn(state: &TempDir, port: u16) -> Result<ChildGuard, String> {
    // Its stderr goes to a file (a pipe nobody reads could fill and stall it).
    let log_path = state.join("swtpm.log");
    let log = std::fs::File::create(&log_path)
        .map_err(|e| format!("create {}: {e}", log_path.display()))?;
    let child = Command::new("swtpm")
        .arg("socket")
        .arg("--tpm2")
        .arg("--tpmstate")
        .arg(format!("dir={}", state.path().display()))
        .arg("--server")
        .arg(format!("type=tcp,port={port},bindaddr=127.0.0.1"))
        .arg("--ctrl")
        .arg(format!("type=tcp,port={},bindaddr=127.0.0.1", port + 1))
        .arg("--flags")
        .arg("not-need-init,startup-clear")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(log)
        .spawn()
        .map_err(|e| format!("cannot run swtpm: {e}"))?;
    let mut guard = ChildGuard(child);
    let deadline = Instant::now() + START_TIMEOUT;
    loop {
        if let Ok(Some(status)) = guard.0.try_wait() {
            let err = std::fs::read_to_string(&log_path).unwrap_or_default();
            return Err(format!("swtpm exited ({status}): {}", err.trim()));
        }
        // The control socket is probed (its connection is served apart
        // from the TPM's), then the command socket.
        if TcpStream::connect(("127.0.0.1", port + 1)).is_ok()
            && TcpStream::connect(("127.0.0.1", port)).is_ok()
        {
            return Ok(guard);
        }
        if Instant::now() > deadline {
            return Err(format!("swtpm did not listen on port {port} in time"));
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}
