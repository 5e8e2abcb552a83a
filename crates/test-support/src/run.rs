//! Running a program from a test: stdin from bytes (a pipe, never a
//! terminal), stdout and stderr collected, killed after a timeout.

use std::io::Write;
use std::process::{Command, Output, Stdio};
use std::sync::mpsc;
use std::time::Duration;

/// How long [`output`] lets a program run.
pub const TIMEOUT: Duration = Duration::from_secs(60);

/// Runs `cmd` with `stdin` as its standard input and returns its output;
/// kills it (and panics with what it printed) after [`TIMEOUT`].
pub fn output(cmd: &mut Command, stdin: &[u8]) -> Output {
    output_within(cmd, stdin, TIMEOUT)
}

/// [`output`] with its own timeout.
///
/// # Panics
/// If the program cannot be started or does not finish within `timeout`.
pub fn output_within(cmd: &mut Command, stdin: &[u8], timeout: Duration) -> Output {
    let mut child = cmd
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("spawn {cmd:?}: {e}"));
    let mut pipe = child.stdin.take().expect("stdin pipe");
    let data = stdin.to_vec();
    // The program may exit without reading: a broken pipe is not an error.
    let writer = std::thread::spawn(move || {
        let _ = pipe.write_all(&data);
    });
    let pid = rustix::process::Pid::from_child(&child);
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(child.wait_with_output());
    });
    let out = match rx.recv_timeout(timeout) {
        Ok(r) => r.expect("wait for the program"),
        Err(_) => {
            let _ = rustix::process::kill_process(pid, rustix::process::Signal::KILL);
            let out = rx.recv().ok().and_then(Result::ok);
            panic!(
                "{cmd:?} did not finish within {} s: {out:?}",
                timeout.as_secs()
            );
        }
    };
    let _ = writer.join();
    out
}

/// Lossy UTF-8 of program output.
pub fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// `&[&OsStr]` from anything that is `AsRef<OsStr>` (strings and paths
/// mixed): `os_args!["mount", cipher, mnt]`.
#[macro_export]
macro_rules! os_args {
    ($($a:expr),* $(,)?) => { &[$(::std::ffi::OsStr::new(&$a)),*] };
}

/// [`output`] with no stdin, asserting that the program succeeds (the
/// failure names the command and shows its stderr).
pub fn succeed(cmd: &mut Command) -> Output {
    let out = output(cmd, b"");
    assert!(
        out.status.success(),
        "{cmd:?} failed ({}): {}",
        out.status,
        text(&out.stderr)
    );
    out
}

/// A program's exit status, stdout and stderr as one text, for assertion
/// messages.
pub fn describe(o: &Output) -> String {
    format!(
        "status {:?}\nstdout: {}\nstderr: {}",
        o.status.code(),
        text(&o.stdout),
        text(&o.stderr)
    )
}

/// Asserts that `o` is a success; the failure names `what` and shows
/// [`describe`].
pub fn assert_ok(o: &Output, what: &str) {
    assert!(o.status.success(), "{what} failed: {}", describe(o));
}
