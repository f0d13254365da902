//! Questions on the terminal for an interactive repair: one keystroke per answer (`y`, `n`,
//! `a` for yes to all), read with the terminal's line editing and echo off as e2fsck does.
//! The terminal's settings are put back after each answer, and before exiting on a signal.

use std::io::Read;
use std::sync::Mutex;

/// The terminal's settings while a question waits for its answer.
static SAVED: Mutex<Option<libc::termios>> = Mutex::new(None);

pub enum Answer {
    Yes,
    No,
    /// Yes to this and every later question.
    All,
}

/// Whether standard input and standard output are both terminals (e2fsck's condition for
/// asking).
pub fn is_terminal() -> bool {
    use std::io::IsTerminal;
    std::io::stdin().is_terminal() && std::io::stdout().is_terminal()
}

/// Wait for one answer on standard input, after [`raw_mode`] (entered before the question is
/// shown, so a quick key is not echoed). Enter, space and Escape take `default`, as does the
/// end of the input; other keys are ignored. The terminal's settings are put back.
pub fn read_answer(default: bool) -> Answer {
    let fallback = if default { Answer::Yes } else { Answer::No };
    let mut stdin = std::io::stdin().lock();
    let answer = loop {
        let mut c = [0u8];
        if stdin.read_exact(&mut c).is_err() {
            break fallback;
        }
        match c[0] {
            b'y' | b'Y' => break Answer::Yes,
            b'n' | b'N' => break Answer::No,
            b'a' | b'A' => break Answer::All,
            b'\n' | b'\r' | b' ' | 27 => break fallback,
            _ => {}
        }
    };
    restore();
    answer
}

/// Keystrokes without Enter and without echo (signals still work: Ctrl-C cancels the run).
pub fn raw_mode() {
    // SAFETY: tcgetattr fills the zeroed struct it is given, and tcsetattr reads it; fd 0 is
    // standard input, which the caller has checked is a terminal.
    unsafe {
        let mut t: libc::termios = std::mem::zeroed();
        if libc::tcgetattr(0, &mut t) != 0 {
            return;
        }
        *SAVED.lock().unwrap_or_else(|e| e.into_inner()) = Some(t);
        let mut raw = t;
        raw.c_lflag &= !(libc::ICANON | libc::ECHO);
        raw.c_cc[libc::VMIN] = 1;
        raw.c_cc[libc::VTIME] = 0;
        libc::tcsetattr(0, libc::TCSANOW, &raw);
    }
}

/// Put the terminal's settings back if a question changed them.
pub fn restore() {
    if let Some(t) = SAVED.lock().unwrap_or_else(|e| e.into_inner()).take() {
        // SAFETY: tcsetattr reads the settings tcgetattr saved for fd 0.
        unsafe {
            libc::tcsetattr(0, libc::TCSANOW, &t);
        }
    }
}
