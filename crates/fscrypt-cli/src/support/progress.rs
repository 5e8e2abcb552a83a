//! A progress bar (bytes, rate, ETA) on stderr for long operations; hidden
//! when stderr is not a terminal, or with `--quiet`/`--json`.

use fscrypt_actions::convert::{Progress, Step};
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

/// One bar, restyled per step of a conversion.
pub struct Bar {
    bar: ProgressBar,
    step: Option<Step>,
}

impl Bar {
    /// A bar; `visible: false` draws nothing.
    pub fn new(visible: bool) -> Bar {
        let bar = ProgressBar::with_draw_target(
            Some(0),
            if visible {
                ProgressDrawTarget::stderr()
            } else {
                ProgressDrawTarget::hidden()
            },
        );
        Bar { bar, step: None }
    }

    /// Shows a conversion progress report.
    pub fn update(&mut self, p: &Progress) {
        if self.step != Some(p.step) {
            self.step = Some(p.step);
            let what = match p.step {
                Step::Copying => "copying  ",
                Step::Verifying => "verifying",
                Step::Removing => "removing ",
            };
            self.bar.reset();
            self.bar.set_style(
                ProgressStyle::with_template(
                    "{msg} [{bar:30}] {bytes}/{total_bytes} {binary_bytes_per_sec} ETA {eta}",
                )
                .unwrap_or_else(|_| ProgressStyle::default_bar())
                .progress_chars("=> "),
            );
            self.bar.set_message(what);
        }
        self.bar.set_length(p.total_bytes.max(p.bytes));
        self.bar.set_position(p.bytes);
    }

    /// Removes the bar from the terminal.
    pub fn finish(&self) {
        self.bar.finish_and_clear();
    }
}
