//! Capturing the `log` records of this process (a mount served by a thread
//! of the test process logs here too).

use std::sync::Mutex;

struct Capture(Mutex<Vec<String>>);

impl log::Log for Capture {
    fn enabled(&self, _: &log::Metadata<'_>) -> bool {
        true
    }
    fn log(&self, r: &log::Record<'_>) {
        if let Ok(mut v) = self.0.lock() {
            v.push(format!("{} {}", r.level(), r.args()));
        }
    }
    fn flush(&self) {}
}

static CAPTURE: Capture = Capture(Mutex::new(Vec::new()));

/// Installs the capturing logger (once per process; later calls only set
/// the level) and lets records up to `max` through.
pub fn capture(max: log::LevelFilter) {
    let _ = log::set_logger(&CAPTURE);
    log::set_max_level(max);
}

/// The records captured so far, each as `LEVEL message`.
pub fn captured() -> Vec<String> {
    CAPTURE.0.lock().map(|v| v.clone()).unwrap_or_default()
}
