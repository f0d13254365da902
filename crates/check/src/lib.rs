//! The ffsck checking engine: opens a file system, runs passes 0-5 and reports findings.
//!
//! The engine never prints. Each pass is a function from typed facts to typed facts (see the
//! `//!` header of each pass file), and every inconsistency is a `Finding` from the one
//! catalogue in `problem.rs`. Whether a finding is fixed is decided by `Policy`, the single
//! place that knows about `-n`, `-p` and `-y`.
#![forbid(unsafe_code)]

pub mod bitmap;
pub mod engine;
pub mod estimate;
pub(crate) mod ext4;
pub mod facts;
pub mod filemap;
pub mod fs;
pub mod htree;
pub mod icount;
pub mod journal;
pub mod ordered;
pub mod orphan;
pub mod overrides;
pub mod pass0;
pub(crate) mod pass1;
pub mod pass1b;
pub mod pass2;
pub mod pass3;
pub mod pass4;
pub mod pass5;
pub mod pathname;
pub mod problem;
pub mod progress;
pub mod quota;
pub mod relocate;
pub mod repair;
pub mod report;
pub mod spill;
pub mod superblock;

pub use engine::{check, CheckOptions, Outcome, Progress, Summary};
pub use ext4::clock::Clock;
pub use pass0::SuperHint;
pub use problem::Problem;
pub use report::{exit, Finding, Policy, ProblemCtx, Reporter};

/// A thread pool of `threads` workers, for tests that run parallel code at several counts.
#[cfg(test)]
fn test_pool(threads: usize) -> rayon::ThreadPool {
    rayon::ThreadPoolBuilder::new()
        .num_threads(threads)
        .build()
        .expect("test thread pool")
}
