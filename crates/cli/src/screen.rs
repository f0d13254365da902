//! The terminal, shared by the progress bar (`-C 0`) and everything ffsck prints: one lock
//! that the bar's thread and every writer to standard output or standard error take. A writer
//! taking it clears the bar first, so nothing is printed after or over the bar; the bar is
//! drawn again only while no line is left open on either stream (a question, a line of bitmap
//! differences being written) and no question waits for its answer. This is how e2fsck's
//! `-C 0` behaves: it erases its bar line before a message and draws it again later.

use std::fmt::Display;
use std::io::Write;
use std::sync::{Mutex, MutexGuard};

/// Which stream a writer wrote.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Stream {
    Out,
    Err,
}

pub struct Screen {
    /// The bar on the terminal (None: none drawn since the last clear).
    bar: Option<indicatif::ProgressBar>,
    /// Per stream (stdout, stderr): the last text written did not end its line.
    open: [bool; 2],
    /// A question waits for its answer.
    asking: bool,
}

static SCREEN: Mutex<Screen> = Mutex::new(Screen {
    bar: None,
    open: [false, false],
    asking: false,
});

fn lock() -> MutexGuard<'static, Screen> {
    SCREEN.lock().unwrap_or_else(|e| e.into_inner())
}

/// The terminal, taken for writing: the bar is cleared, and is not drawn again until this is
/// dropped.
pub struct Taken(MutexGuard<'static, Screen>);

/// Take the terminal to write to it (clearing the bar).
pub fn take() -> Taken {
    let mut s = lock();
    s.clear_bar();
    Taken(s)
}

impl Taken {
    /// `text` was written to `stream`: whether it left a line open.
    pub fn wrote(&mut self, stream: Stream, text: &[u8]) {
        if let Some(&last) = text.last() {
            self.0.open[stream as usize] = last != b'\n';
        }
    }

    /// Write `text` to `stream` and flush it.
    pub fn write(&mut self, stream: Stream, text: &[u8]) {
        let _ = match stream {
            Stream::Out => {
                let mut out = std::io::stdout().lock();
                out.write_all(text).and_then(|()| out.flush())
            }
            Stream::Err => {
                let mut err = std::io::stderr().lock();
                err.write_all(text).and_then(|()| err.flush())
            }
        };
        self.wrote(stream, text);
    }
}

impl Screen {
    fn clear_bar(&mut self) {
        if let Some(bar) = self.bar.take() {
            bar.finish_and_clear();
        }
    }
}

/// Print a line on standard output (as `println!`), the bar cleared first.
pub fn outln(line: impl Display) {
    take().write(Stream::Out, format!("{line}\n").as_bytes());
}

/// Print a line on standard error (as `eprintln!`), the bar cleared first.
pub fn errln(line: impl Display) {
    take().write(Stream::Err, format!("{line}\n").as_bytes());
}

/// A question is on the terminal and waits for its answer (`true`), or was answered: the bar
/// stays away meanwhile.
pub fn asking(waiting: bool) {
    let mut s = lock();
    s.clear_bar();
    s.asking = waiting;
}

/// Clear the bar (progress turned off, or the check is over).
pub fn clear_bar() {
    lock().clear_bar();
}

/// Draw the bar with `update` (given the bar, made by `new` if none is drawn), unless a
/// question waits or a line is open.
pub fn draw_bar(
    new: impl FnOnce() -> indicatif::ProgressBar,
    update: impl FnOnce(&indicatif::ProgressBar),
) {
    let mut s = lock();
    if s.asking || s.open.iter().any(|&o| o) {
        return;
    }
    update(s.bar.get_or_insert_with(new));
}
