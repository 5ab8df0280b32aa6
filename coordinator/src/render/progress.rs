//! The progress bar of a sweep and of `simulate` on the terminal (stderr): points done of
//! all, and a message saying what runs now (for a long simulation, refreshed from the
//! engine's counts while it runs: [`Progress::watching`]). With the `pictures` feature
//! it is drawn by indicatif; without it, and whenever stderr is not a terminal, nothing
//! is drawn and text printed through [`Progress::suspend`] goes out as is.

use std::ops::ControlFlow;
use std::sync::mpsc::RecvTimeoutError;
use std::time::Duration;

/// How often a watched piece of work's message is refreshed.
const REFRESH: Duration = Duration::from_millis(200);

/// A bar counting `total` points, hidden when stderr is not a terminal.
pub struct Progress {
    #[cfg(feature = "pictures")]
    bar: indicatif::ProgressBar,
}

impl Progress {
    #[cfg(feature = "pictures")]
    pub fn new(total: usize) -> Self {
        use std::io::IsTerminal;
        if !std::io::stderr().is_terminal() {
            return Progress { bar: indicatif::ProgressBar::hidden() };
        }
        let bar = indicatif::ProgressBar::new(total as u64);
        // `wide_msg`: the message is cut to the terminal's width, so the bar keeps one line.
        let template = "{elapsed:>4} [{bar:30.cyan/blue}] {pos}/{len} points  {wide_msg}";
        if let Ok(style) = indicatif::ProgressStyle::with_template(template) {
            bar.set_style(style.progress_chars("=> "));
        }
        bar.enable_steady_tick(std::time::Duration::from_millis(200));
        Progress { bar }
    }

    #[cfg(not(feature = "pictures"))]
    pub fn new(_total: usize) -> Self {
        Progress {}
    }

    /// Says what is being measured now.
    pub fn set_message(&self, message: String) {
        #[cfg(feature = "pictures")]
        self.bar.set_message(message);
        #[cfg(not(feature = "pictures"))]
        let _ = message;
    }

    /// One more point done.
    pub fn inc(&self) {
        #[cfg(feature = "pictures")]
        self.bar.inc(1);
    }

    /// Runs `print` with the bar out of the way, so its text is not drawn over.
    pub fn suspend<R>(&self, print: impl FnOnce() -> R) -> R {
        #[cfg(feature = "pictures")]
        return self.bar.suspend(print);
        #[cfg(not(feature = "pictures"))]
        print()
    }

    /// Runs `work` on this thread while another refreshes the message with `describe`
    /// every [`REFRESH`] (only while the bar is drawn), and gives what `work` gave.
    pub fn watching<R>(&self, describe: impl Fn() -> String + Sync, work: impl FnOnce() -> R) -> R {
        #[cfg(feature = "pictures")]
        if !self.bar.is_hidden() {
            let refresh = || {
                self.set_message(describe());
                ControlFlow::Continue(())
            };
            return ticking_while(REFRESH, refresh, work);
        }
        let _ = (&describe, REFRESH);
        work()
    }

    /// Takes the bar off the terminal.
    pub fn finish(&self) {
        #[cfg(feature = "pictures")]
        self.bar.finish_and_clear();
    }
}

/// Runs `work` on this thread while another calls `tick` every `every`, until `work`
/// returns or `tick` breaks; gives what `work` gave.
pub fn ticking_while<R>(
    every: Duration,
    mut tick: impl FnMut() -> ControlFlow<()> + Send,
    work: impl FnOnce() -> R,
) -> R {
    std::thread::scope(|scope| {
        let (done, finished) = std::sync::mpsc::channel::<()>();
        scope.spawn(move || {
            while let Err(RecvTimeoutError::Timeout) = finished.recv_timeout(every) {
                if tick().is_break() {
                    return;
                }
            }
        });
        let result = work();
        drop(done);
        result
    })
}
