//! The ffsck checking engine: opens a file system, runs passes 0-5 and reports findings.
//!
//! The engine never prints. Each pass is a function from typed facts to typed facts (see the
//! `//!` header of each pass file), and every inconsistency is a `Finding` from the one
//! catalogue in `problem.rs`. Whether a finding is fixed is decided by `Policy`, the single
//! place that knows about `-n`, `-p` and `-y`.
#![forbid(unsafe_code)]

pub(crate) mod bitmap;
pub(crate) mod engine;
pub(crate) mod estimate;
pub(crate) mod ext4;
pub(crate) mod facts;
pub(crate) mod filemap;
pub(crate) mod fs;
pub(crate) mod htree;
pub(crate) mod icount;
pub mod journal;
pub(crate) mod latch;
pub(crate) mod mmp;
pub(crate) mod ordered;
pub(crate) mod orphan;
pub(crate) mod overrides;
pub mod pass0;
pub(crate) mod pass1;
pub(crate) mod pass1b;
pub(crate) mod pass2;
pub(crate) mod pass3;
pub(crate) mod pass4;
pub(crate) mod pass5;
pub(crate) mod pathname;
pub mod problem;
pub(crate) mod progress;
pub(crate) mod quota;
pub(crate) mod relocate;
pub(crate) mod repair;
pub(crate) mod report;
pub(crate) mod spill;
pub(crate) mod superblock;
#[cfg(feature = "testing")]
pub mod testing;

pub use engine::{check, CheckOptions, Outcome, Progress, Summary, Tuning};
pub use estimate::{estimate, Estimate};
pub use ext4::clock::Clock;
pub use mmp::wait_for_holder as wait_for_mmp_holder;
pub use overrides::{Overrides, ProblemOverride, DEFAULT_TIME_FUDGE};
pub use pass0::SuperHint;
pub use problem::Problem;
pub use repair::{bblist::BadBlockList, mark::backup_differs, repair, RepairOutcome};
pub use report::{exit, Collect, Finding, Findings, Mode, Policy, ProblemCtx, Reporter};

/// A thread pool of `threads` workers, for tests that run parallel code at several counts.
#[cfg(test)]
fn test_pool(threads: usize) -> rayon::ThreadPool {
    rayon::ThreadPoolBuilder::new()
        .num_threads(threads)
        .build()
        .expect("test thread pool")
}
