//! Classification of a fuzz case (which of issue 22's counters it hits) and the counting over
//! a run, overall and per damage class.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::case::Runs;

/// What a case can show. All but [`Check::FfsckOnlyRepairs`] are failures of ffsck.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Check {
    /// An ffsck run was killed by a signal or panicked.
    Crash,
    /// An ffsck run hit the time limit.
    Timeout,
    /// `ffsck -fn` changed the image.
    ModifiedByN,
    /// `ffsck -fn` exits 0 where `e2fsck -fn` sees errors.
    Missed,
    /// `ffsck -fn` reports errors where `e2fsck -fn` exits 0.
    FalseAlarm,
    /// The same, but every finding is one the catalogue reports beyond e2fsck on purpose
    /// (`flag::BEYOND_E2FSCK`: damage libext2fs walks past and the kernel refuses). Not a
    /// failure; counted apart so that it stays visible.
    BeyondE2fsck,
    /// One `e2fsck -fy` leaves the image clean (by `e2fsck -fn`), one `ffsck -fy` does not.
    E2fsckOnlyRepairs,
    /// The reverse (not a failure of ffsck).
    FfsckOnlyRepairs,
    /// `ffsck -fy` claimed success (no uncorrected errors) but `ffsck -fn` after it is dirty.
    SecondRunDirty,
    /// A file e2fsck's result keeps (path, type, size, content) is missing or differs in
    /// ffsck's.
    LostFiles,
    /// `ffsck -fn` at 1 and N threads disagree on the exit code.
    ThreadDifference,
}

impl Check {
    pub const ALL: [Check; 11] = [
        Check::Crash,
        Check::Timeout,
        Check::ModifiedByN,
        Check::Missed,
        Check::FalseAlarm,
        Check::BeyondE2fsck,
        Check::E2fsckOnlyRepairs,
        Check::FfsckOnlyRepairs,
        Check::SecondRunDirty,
        Check::LostFiles,
        Check::ThreadDifference,
    ];

    pub fn is_failure(self) -> bool {
        !matches!(self, Check::FfsckOnlyRepairs | Check::BeyondE2fsck)
    }

    pub fn name(self) -> String {
        serde_json::to_value(self)
            .ok()
            .and_then(|v| v.as_str().map(String::from))
            .unwrap_or_default()
    }
}

/// The checks a case hits, in [`Check`] order.
pub fn classify(r: &Runs) -> Vec<Check> {
    let ff_runs = [&r.ffsck_n1, &r.ffsck_nn, &r.ffsck_y, &r.ffsck_y_check_ffsck];
    let mut out = Vec::new();
    let mut hit = |c: Check, cond: bool| {
        if cond {
            out.push(c);
        }
    };
    hit(Check::Crash, ff_runs.iter().any(|x| x.crashed));
    hit(Check::Timeout, ff_runs.iter().any(|x| x.timed_out));
    hit(
        Check::ModifiedByN,
        r.ffsck_n1.modified || r.ffsck_nn.modified,
    );
    let damaged = !r.e2fsck_n.clean();
    hit(Check::Missed, damaged && r.ffsck_n1.clean());
    let alarm = !damaged && r.ffsck_n1.exit.is_some_and(|c| c != 0);
    let beyond = |code: &String| {
        ffsck_check::Problem::by_name(code)
            .is_some_and(|p| p.info().flags & ffsck_check::problem::flag::BEYOND_E2FSCK != 0)
    };
    let all_beyond = !r.ffsck_n1.codes.is_empty() && r.ffsck_n1.codes.iter().all(beyond);
    hit(Check::FalseAlarm, alarm && !all_beyond);
    hit(Check::BeyondE2fsck, alarm && all_beyond);
    let e2_one = r.e2fsck_y1_check.clean();
    let ff_one = r.ffsck_y_check_e2fsck.clean();
    hit(Check::E2fsckOnlyRepairs, damaged && e2_one && !ff_one);
    hit(Check::FfsckOnlyRepairs, damaged && !e2_one && ff_one);
    let claimed = r.ffsck_y.exit.is_some_and(|c| c & !3 == 0);
    hit(
        Check::SecondRunDirty,
        claimed && !r.ffsck_y_check_ffsck.clean(),
    );
    hit(
        Check::LostFiles,
        r.lost.as_ref().is_some_and(|l| !l.is_empty()),
    );
    hit(
        Check::ThreadDifference,
        r.ffsck_n1.exit != r.ffsck_nn.exit || r.ffsck_n1.crashed != r.ffsck_nn.crashed,
    );
    out
}

/// Counts over a run (or over one damage class).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Counts {
    pub cases: usize,
    /// `e2fsck -fn` sees errors.
    pub damaged: usize,
    /// One `e2fsck -fy` leaves a damaged image clean.
    pub e2fsck_one_run_repairs: usize,
    /// Two `e2fsck -fy` runs do.
    pub e2fsck_two_runs_repair: usize,
    /// One `ffsck -fy` does.
    pub ffsck_one_run_repairs: usize,
    /// Cases with at least one failing check.
    pub failing: usize,
    /// Per check, the cases that hit it.
    pub checks: BTreeMap<String, usize>,
}

impl Counts {
    pub fn add(&mut self, r: &Runs, checks: &[Check]) {
        self.cases += 1;
        if !r.e2fsck_n.clean() {
            self.damaged += 1;
            self.e2fsck_one_run_repairs += usize::from(r.e2fsck_y1_check.clean());
            self.e2fsck_two_runs_repair += usize::from(r.e2fsck_y2_check.clean());
            self.ffsck_one_run_repairs += usize::from(r.ffsck_y_check_e2fsck.clean());
        }
        if checks.iter().any(|c| c.is_failure()) {
            self.failing += 1;
        }
        for c in Check::ALL {
            let n = self.checks.entry(c.name()).or_default();
            *n += usize::from(checks.contains(&c));
        }
    }

    /// The invariants a consistent count keeps (used by the tests).
    pub fn consistent(&self) -> Result<(), String> {
        let get = |c: Check| self.checks.get(&c.name()).copied().unwrap_or(0);
        let fail_max = Check::ALL
            .iter()
            .filter(|c| c.is_failure())
            .map(|&c| get(c))
            .max()
            .unwrap_or(0);
        let fail_sum: usize = Check::ALL
            .iter()
            .filter(|c| c.is_failure())
            .map(|&c| get(c))
            .sum();
        if self.damaged > self.cases
            || self.e2fsck_one_run_repairs > self.damaged
            || self.ffsck_one_run_repairs > self.damaged
            || self.e2fsck_two_runs_repair > self.damaged
            || self.failing > self.cases
            || self.failing < fail_max
            || self.failing > fail_sum
            || get(Check::Missed) > self.damaged
            || get(Check::FalseAlarm) + get(Check::BeyondE2fsck) > self.cases - self.damaged
            || get(Check::E2fsckOnlyRepairs) > self.e2fsck_one_run_repairs
            || get(Check::FfsckOnlyRepairs) > self.ffsck_one_run_repairs
            || self.e2fsck_one_run_repairs + get(Check::FfsckOnlyRepairs)
                != self.ffsck_one_run_repairs + get(Check::E2fsckOnlyRepairs)
        {
            return Err(format!("inconsistent counts: {self:?}"));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fuzz::case::Run;

    fn ran(exit: i32, codes: &[&str]) -> Run {
        Run {
            exit: Some(exit),
            codes: codes.iter().map(|c| c.to_string()).collect(),
            ..Run::default()
        }
    }

    /// A read-only check dirty where e2fsck's is clean is a false alarm, unless every finding
    /// is one the catalogue reports beyond e2fsck on purpose (seed 3016, case 182: a leaf's
    /// `eh_depth` flipped, which libext2fs never reads and the kernel refuses).
    #[test]
    fn findings_beyond_e2fsck_are_told_from_false_alarms() {
        let clean = |ff: Run| Runs {
            e2fsck_n: ran(0, &[]),
            ffsck_nn: Run {
                codes: Vec::new(),
                ..ff.clone()
            },
            ffsck_n1: ff,
            e2fsck_y1_check: ran(0, &[]),
            ffsck_y_check_e2fsck: ran(0, &[]),
            ..Runs::default()
        };
        let depth = "P1_EXTENT_NODE_DEPTH";
        assert_eq!(classify(&clean(ran(4, &[depth]))), [Check::BeyondE2fsck]);
        assert!(!Check::BeyondE2fsck.is_failure());
        for codes in [&[depth, "P2_BAD_FILETYPE"][..], &[], &["NO_SUCH_CODE"]] {
            assert_eq!(
                classify(&clean(ran(4, codes))),
                [Check::FalseAlarm],
                "{codes:?}"
            );
        }
        assert_eq!(classify(&clean(ran(0, &[]))), []);
    }
}
