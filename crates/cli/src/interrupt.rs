//! SIGINT/SIGTERM: stop cleanly. Before a repair's commit nothing has been written, so ffsck
//! removes its uncommitted log and exits 32 (e2fsck's "canceled"); during the commit the signal
//! waits until the generation is applied, so the image is never left half repaired.
//! SIGUSR1 and SIGUSR2 turn the progress output on and off (e2fsck's signals, which util-linux
//! `fsck -C` sends), instead of ending the process as their default action would.

use ffsck_check::exit;
use signal_hook::consts::{SIGINT, SIGTERM, SIGUSR1, SIGUSR2};
use signal_hook::iterator::Signals;
use std::path::PathBuf;
use std::sync::Mutex;

#[derive(Default)]
struct State {
    /// Inside a commit: a signal is recorded, not acted on.
    committing: bool,
    /// A signal arrived while committing.
    pending: bool,
    /// A repair has been committed: a later signal cannot say "nothing was written".
    committed: bool,
    /// The repair log to remove when cancelled before its commit.
    log: Option<PathBuf>,
}

/// Held by the signal thread while it cancels, and by the main thread to enter or leave a
/// commit, so a cancel and a commit never overlap.
static STATE: Mutex<State> = Mutex::new(State {
    committing: false,
    pending: false,
    committed: false,
    log: None,
});

fn state() -> std::sync::MutexGuard<'static, State> {
    STATE.lock().unwrap_or_else(|e| e.into_inner())
}

/// Start the thread that turns SIGINT and SIGTERM into a clean stop and SIGUSR1 and SIGUSR2
/// into progress on and off; the handlers are in place when this returns (call it first
/// thing). Without it (the handlers could not be installed) the signals keep their default
/// action, which is still safe: the redo log finishes or discards an interrupted repair on
/// the next run.
pub fn install() {
    let Ok(mut signals) = Signals::new([SIGINT, SIGTERM, SIGUSR1, SIGUSR2]) else {
        return;
    };
    let spawned = std::thread::Builder::new()
        .name("ffsck-signals".into())
        .spawn(move || {
            for sig in signals.forever() {
                if sig == SIGUSR1 || sig == SIGUSR2 {
                    crate::progress::set_on(sig == SIGUSR1);
                    continue;
                }
                let mut st = state();
                if st.committing {
                    st.pending = true;
                    continue;
                }
                if let Some(log) = st.log.take() {
                    let _ = std::fs::remove_file(log);
                }
                let name = if sig == SIGINT { "SIGINT" } else { "SIGTERM" };
                let what = if st.committed {
                    "the repair had already been committed"
                } else {
                    "nothing was written"
                };
                crate::tty::restore();
                crate::held::release();
                crate::screen::errln(format_args!("\nffsck: interrupted by {name}; {what}."));
                crate::report::cancelled(name, what);
                // Exit while holding the lock: the main thread cannot start a commit now.
                std::process::exit(exit::CANCELED);
            }
        });
    drop(spawned);
}

/// The uncommitted repair log at `path` is to be removed if the run is cancelled.
pub fn set_log(path: Option<PathBuf>) {
    state().log = path;
}

/// Enter a commit: from here until [`end_commit`] a signal only marks the run as cancelled.
pub fn begin_commit() {
    state().committing = true;
}

/// Leave a commit (`wrote`: this run's repair is now on the device). True if a signal
/// arrived during it.
pub fn end_commit(wrote: bool) -> bool {
    let mut st = state();
    st.committing = false;
    st.committed |= wrote;
    if wrote {
        st.log = None;
    }
    std::mem::take(&mut st.pending)
}
