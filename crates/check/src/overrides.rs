//! Per-run changes of the problem table and of the superblock time checks, as e2fsck.conf's
//! `[problems]` and `[options]` make them: set once by the command line before the check
//! (`install`), read by `Policy::answer`, `Finding::leaves_error` and pass 0. Without an
//! `install` every problem keeps its catalogue flags and the time checks e2fsck's defaults.

use crate::problem::Problem;
use std::collections::HashMap;
use std::sync::OnceLock;

/// e2fsck's default `accept_time_fudge`: a superblock time up to a day ahead of the clock is
/// the clock's skew, not the file system's.
pub const DEFAULT_TIME_FUDGE: u64 = 86_400;

/// How one e2fsck problem code (`[problems] 0xNNNNNN = { ... }`) is changed.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ProblemOverride {
    /// Catalogue flags (`problem::flag`) turned on (`preen_ok = true`, ...).
    pub set: u16,
    /// Catalogue flags turned off (`preen_ok = false`, ...).
    pub clear: u16,
    /// `force_no`: the fix is never made, whatever the mode.
    pub force_no: bool,
}

/// Everything `install` may change.
#[derive(Clone, Debug, Default)]
pub struct Overrides {
    /// By e2fsck problem code (`ProblemInfo::e2fsck_code`).
    pub problems: HashMap<u32, ProblemOverride>,
    /// `broken_system_clock`: no superblock time is judged against the clock.
    pub broken_clock: bool,
    /// Seconds a superblock time may be ahead of the clock (`accept_time_fudge`,
    /// `buggy_init_scripts`); `None`: e2fsck's default, a day.
    pub time_fudge: Option<u64>,
}

static OVERRIDES: OnceLock<Overrides> = OnceLock::new();

/// Set the run's overrides (the first call wins; later calls are ignored).
pub fn install(o: Overrides) {
    let _ = OVERRIDES.set(o);
}

fn get() -> Option<&'static Overrides> {
    OVERRIDES.get()
}

/// The flags of `p` with the run's overrides applied.
pub fn flags(p: Problem) -> u16 {
    let info = p.info();
    match get().and_then(|o| o.problems.get(&info.e2fsck_code?)) {
        Some(o) => (info.flags | o.set) & !o.clear,
        None => info.flags,
    }
}

/// Is `p`'s fix refused by `force_no`?
pub fn forced_no(p: Problem) -> bool {
    get()
        .and_then(|o| o.problems.get(&p.info().e2fsck_code?))
        .is_some_and(|o| o.force_no)
}

/// May pass 0 judge superblock times against the clock (not `broken_system_clock`)?
pub fn clock_trusted() -> bool {
    !get().is_some_and(|o| o.broken_clock)
}

/// How far ahead of the clock a superblock time may be before it is "in the future".
pub fn time_fudge() -> u64 {
    get()
        .and_then(|o| o.time_fudge)
        .unwrap_or(DEFAULT_TIME_FUDGE)
}
