//! The comparison arithmetic shared by the harnesses: e2fsck-style verdicts, problem-code Jaccard
//! similarity and medians. Kept free of I/O so the definitions can be unit-tested exactly.

use std::collections::BTreeSet;

/// What a checker run says about a file system.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// Exit code 0.
    Clean,
    /// Any non-zero outcome that counts as "found something".
    Errors,
    /// The run produced no usable answer (our checker crashed or hung).
    NoVerdict,
}

/// e2fsck's verdict. A timeout counts as errors: the two corpus images on which e2fsck 1.47.0
/// `-fn` loops are badly damaged, and it had already found problems before looping.
/// A signal death also counts as errors, for the same reason it is never "clean".
pub fn e2fsck_verdict(exit_code: Option<i32>) -> Verdict {
    match exit_code {
        Some(0) => Verdict::Clean,
        _ => Verdict::Errors,
    }
}

/// ffsck's verdict. A crash or hang is never an answer, so it can never agree with e2fsck.
pub fn ffsck_verdict(exit_code: Option<i32>, crashed: bool, timed_out: bool) -> Verdict {
    if crashed || timed_out {
        return Verdict::NoVerdict;
    }
    match exit_code {
        Some(0) => Verdict::Clean,
        Some(_) => Verdict::Errors,
        None => Verdict::NoVerdict,
    }
}

/// Agreement as defined by the corpus README: non-zero exactly when the other is non-zero.
pub fn verdicts_agree(e2fsck: Verdict, ffsck: Verdict) -> bool {
    e2fsck != Verdict::NoVerdict && e2fsck == ffsck
}

/// |A∩B| / |A∪B| over sets of problem codes; two empty sets agree perfectly (1.0).
pub fn jaccard(a: &BTreeSet<u32>, b: &BTreeSet<u32>) -> f64 {
    let union = a.union(b).count();
    if union == 0 {
        return 1.0;
    }
    a.intersection(b).count() as f64 / union as f64
}

/// Median of the values (mean of the middle two for an even count); `None` when empty.
pub fn median(values: &[f64]) -> Option<f64> {
    let mut sorted: Vec<f64> = values.iter().copied().filter(|v| !v.is_nan()).collect();
    if sorted.is_empty() {
        return None;
    }
    sorted.sort_by(f64::total_cmp);
    let mid = sorted.len() / 2;
    Some(if mid * 2 == sorted.len() {
        (sorted[mid - 1] + sorted[mid]) / 2.0
    } else {
        sorted[mid]
    })
}
