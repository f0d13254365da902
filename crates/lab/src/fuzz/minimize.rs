//! Shrinks a failing fuzz case to the fewest damage steps that still show the same failing
//! check: steps are dropped one at a time (greedily, restarting after each success), each
//! candidate replayed on a fresh copy of the undamaged image.

use std::path::Path;

use anyhow::Result;

use super::case::{run_case, Runs, Tools};
use super::damage::{apply, Step};
use super::verdict::{classify, Check};

/// Applies `steps` to a copy of `base` (and its journal) and runs the case.
pub fn replay_steps(
    t: &Tools,
    base: &Path,
    journal: Option<&Path>,
    steps: &[Step],
    dir: &Path,
) -> Result<(Vec<Check>, Runs)> {
    let img = dir.join("replay.img");
    std::fs::copy(base, &img)?;
    let jcopy = match journal {
        Some(j) => {
            let p = dir.join("replay.journal");
            std::fs::copy(j, &p)?;
            Some(p)
        }
        None => None,
    };
    for s in steps {
        // A step that no longer applies (its target moved with an earlier step gone) is
        // simply skipped: the candidate is judged by what it shows.
        apply(s, &img, t, dir)?;
    }
    let runs = run_case(t, &img, jcopy.as_deref(), Some(base), dir)?;
    let _ = std::fs::remove_file(&img);
    Ok((classify(&runs), runs))
}

/// The smallest sub-list of `steps` (by greedy removal) that still shows `target`, with its
/// runs; `None` when even the full list does not show it again (a nondeterministic failure).
pub fn minimize(
    t: &Tools,
    base: &Path,
    journal: Option<&Path>,
    steps: &[Step],
    target: Check,
    dir: &Path,
) -> Result<Option<(Vec<Step>, Runs)>> {
    let mut best = steps.to_vec();
    let mut best_runs = None;
    if best.len() == 1 {
        let (checks, runs) = replay_steps(t, base, journal, &best, dir)?;
        return Ok(checks.contains(&target).then_some((best, runs)));
    }
    let mut i = 0;
    // At most n(n+1)/2 candidates for n steps.
    while i < best.len() && best.len() > 1 {
        let mut cand = best.clone();
        cand.remove(i);
        let (checks, runs) = replay_steps(t, base, journal, &cand, dir)?;
        if checks.contains(&target) {
            best = cand;
            best_runs = Some(runs);
            i = 0;
        } else {
            i += 1;
        }
    }
    let runs = match best_runs {
        Some(r) => r,
        None => {
            let (checks, runs) = replay_steps(t, base, journal, &best, dir)?;
            if !checks.contains(&target) {
                return Ok(None);
            }
            runs
        }
    };
    Ok(Some((best, runs)))
}
