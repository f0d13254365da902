//! Tests for the comparison arithmetic: verdict agreement, Jaccard similarity and medians.

use std::collections::BTreeSet;

use ffsck_lab::metrics::{e2fsck_verdict, ffsck_verdict, jaccard, median, verdicts_agree, Verdict};

fn set(codes: &[u32]) -> BTreeSet<u32> {
    codes.iter().copied().collect()
}

#[test]
fn jaccard_of_sets() {
    assert_eq!(jaccard(&set(&[]), &set(&[])), 1.0);
    assert_eq!(jaccard(&set(&[1]), &set(&[])), 0.0);
    assert_eq!(jaccard(&set(&[1, 2]), &set(&[1, 2])), 1.0);
    assert_eq!(jaccard(&set(&[1, 2, 3]), &set(&[2, 3, 4])), 0.5);
    assert_eq!(jaccard(&set(&[1]), &set(&[2])), 0.0);
}

#[test]
fn e2fsck_timeout_and_nonzero_mean_errors() {
    assert_eq!(e2fsck_verdict(Some(0)), Verdict::Clean);
    assert_eq!(e2fsck_verdict(Some(4)), Verdict::Errors);
    assert_eq!(e2fsck_verdict(None), Verdict::Errors);
}

#[test]
fn ffsck_crash_or_hang_is_no_verdict() {
    assert_eq!(ffsck_verdict(Some(0), false, false), Verdict::Clean);
    assert_eq!(ffsck_verdict(Some(1), false, false), Verdict::Errors);
    assert_eq!(ffsck_verdict(Some(101), true, false), Verdict::NoVerdict);
    assert_eq!(ffsck_verdict(None, false, true), Verdict::NoVerdict);
    assert_eq!(ffsck_verdict(None, false, false), Verdict::NoVerdict);
}

#[test]
fn agreement_is_zero_iff_zero() {
    assert!(verdicts_agree(Verdict::Clean, Verdict::Clean));
    assert!(verdicts_agree(Verdict::Errors, Verdict::Errors));
    assert!(!verdicts_agree(Verdict::Clean, Verdict::Errors));
    assert!(!verdicts_agree(Verdict::Errors, Verdict::Clean));
    assert!(!verdicts_agree(Verdict::Errors, Verdict::NoVerdict));
    assert!(!verdicts_agree(Verdict::NoVerdict, Verdict::NoVerdict));
    // Different non-zero codes still agree on the verdict (e.g. 4 vs 1).
    assert!(verdicts_agree(
        e2fsck_verdict(Some(4)),
        ffsck_verdict(Some(1), false, false)
    ));
    // e2fsck looping forever counts as "found errors".
    assert!(verdicts_agree(
        e2fsck_verdict(None),
        ffsck_verdict(Some(4), false, false)
    ));
}

#[test]
fn medians() {
    assert_eq!(median(&[]), None);
    assert_eq!(median(&[3.0]), Some(3.0));
    assert_eq!(median(&[3.0, 1.0, 2.0]), Some(2.0));
    assert_eq!(median(&[4.0, 1.0, 2.0, 3.0]), Some(2.5));
    assert_eq!(median(&[f64::NAN, 1.0]), Some(1.0));
}
