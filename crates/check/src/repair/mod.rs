//! Repair: check the file system through a copy-on-write overlay, apply the fix of every
//! finding the policy answers yes, and check again until nothing is left to fix. The overlay's
//! changes are then one repair generation, which the caller commits through the redo log.
//!
//! A problem is only answered yes when a fix for it exists here (`can_fix`); everything else is
//! reported as not fixed and leaves the exit code's "errors left" bit set, so a partial repair
//! never claims more than it did.

mod alloc;
mod inode;

use crate::engine::{self, CheckOptions, Outcome};
use crate::pass0::{self, Pass0Facts};
use crate::problem::Problem as P;
use crate::report::{exit, Finding, Findings, Policy, Reporter};
use ffsck_io::overlay::{Extent, Overlay};
use ffsck_io::Device;
use std::sync::Arc;

/// Rounds of check-and-fix before giving up on reaching a clean state.
const MAX_ROUNDS: usize = 4;

/// Whether this module can fix `p` (the policy answers no to anything else).
pub fn can_fix(p: P) -> bool {
    inode::handles(p) || alloc::handles(p)
}

pub struct RepairOutcome {
    /// The last check (on the repaired state), with its summary line.
    pub last: Outcome,
    /// Every finding reported, across rounds.
    pub findings: Vec<Finding>,
    /// The staged changes, ascending and coalesced.
    pub changes: Vec<Extent>,
    pub rounds: usize,
    /// Preen met a problem it may not fix: stop and ask for a manual run.
    pub preen_halt: bool,
    pub exit_code: i32,
}

/// Forwards findings not already reported in an earlier round, and pass headers only in the
/// first round.
struct RoundReporter<'a> {
    inner: &'a mut dyn Reporter,
    round: usize,
    seen: &'a [Finding],
}

impl Reporter for RoundReporter<'_> {
    fn pass_start(&mut self, pass: u8) {
        if self.round == 0 {
            self.inner.pass_start(pass);
        }
    }
    fn progress(&mut self, pass: u8, done: u64, total: u64) {
        if self.round == 0 {
            self.inner.progress(pass, done, total);
        }
    }
    fn finding(&mut self, f: &Finding) {
        let again = self
            .seen
            .iter()
            .any(|s| s.problem == f.problem && s.ctx == f.ctx);
        if !again {
            self.inner.finding(f);
        }
    }
}

/// Check and repair the file system on `dev`, staging every change in an overlay. Nothing is
/// written to `dev`.
pub fn repair(dev: Arc<dyn Device>, opts: &CheckOptions, rep: &mut dyn Reporter) -> RepairOutcome {
    let ov = Arc::new(Overlay::new(dev));
    let mut findings: Vec<Finding> = Vec::new();
    let mut rounds = 0;
    let mut preen_halt = false;
    let mut last = None;
    while rounds < MAX_ROUNDS {
        let seen = findings.clone();
        let mut rr = RoundReporter {
            inner: rep,
            round: rounds,
            seen: &seen,
        };
        let out = engine::check(ov.clone(), opts, &mut rr);
        rounds += 1;
        for f in &out.findings {
            if !seen
                .iter()
                .any(|s| s.problem == f.problem && s.ctx == f.ctx)
            {
                findings.push(f.clone());
            }
        }
        // Preen stops at the first problem it may not fix, keeping the fixes before it.
        let halt_at = (opts.policy == Policy::Preen)
            .then(|| out.findings.iter().position(Finding::leaves_error))
            .flatten();
        let upto = halt_at.unwrap_or(out.findings.len());
        let fixes: Vec<&Finding> = out.findings[..upto].iter().filter(|f| f.fixed).collect();
        if fixes.is_empty() || out.fatal.is_some() {
            preen_halt = halt_at.is_some();
            last = Some(out);
            break;
        }
        if let Some(p0) = open(&ov, opts) {
            inode::apply(&p0, &*ov, &fixes);
            if fixes.iter().any(|f| alloc::handles(f.problem)) {
                if let Some(facts) = &out.alloc {
                    alloc::rebuild(&p0, &*ov, facts);
                }
            }
        }
        if halt_at.is_some() {
            preen_halt = true;
            last = Some(out);
            break;
        }
        last = Some(out);
    }
    // The rounds ran out while still fixing: verify what the last fixes left.
    let verified = match last {
        Some(out) if !out.findings.iter().any(|f| f.fixed) || preen_halt => out,
        _ => {
            let quiet = CheckOptions {
                policy: Policy::No,
                ..opts.clone()
            };
            let mut sink = crate::report::Collect::default();
            let out = engine::check(ov.clone(), &quiet, &mut sink);
            for f in out.findings.iter().filter(|f| f.leaves_error()) {
                rep.finding(f);
                findings.push(f.clone());
            }
            out
        }
    };
    let changes = ov.extents().unwrap_or_default();
    let mut code = verified.exit_code & !exit::NONDESTRUCT;
    if preen_halt {
        code |= exit::UNCORRECTED;
    }
    if !changes.is_empty() {
        code |= exit::NONDESTRUCT;
    }
    RepairOutcome {
        last: verified,
        findings,
        changes,
        rounds,
        preen_halt,
        exit_code: code,
    }
}

/// The superblock and descriptors as the overlay has them now.
fn open(ov: &Arc<Overlay>, opts: &CheckOptions) -> Option<Pass0Facts> {
    let mut scratch = Findings::default();
    pass0::run(ov.clone(), opts.superblock, Policy::No, &mut scratch).ok()
}
