//! `repair-conformance` on a few corpus images: every image gets both repairs and both
//! judgements, the counts add up, e2fsck -fy itself leaves the images clean, and the Markdown
//! and JSON carry the figures. Skips cleanly without the corpus.

mod common;

use ffsck_lab::conformance::ConformanceArgs;
use ffsck_lab::repair_conformance;

#[test]
fn repair_comparison_on_a_corpus_subset() {
    let Some(corpus) = common::corpus_dir() else {
        eprintln!("skipping: ../shared/corpus/e2fsprogs not found");
        return;
    };
    let Some(ffsck) = common::ffsck_binary() else {
        common::skip("ffsck binary not built");
        return;
    };
    if common::tool("e2fsck").is_none() {
        common::skip("e2fsck not installed");
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let json = tmp.path().join("repair.json");
    let args: ConformanceArgs = ffsck_lab::parse_args(&[
        "--corpus",
        corpus.to_str().unwrap(),
        "--ffsck",
        ffsck.to_str().unwrap(),
        "--only",
        "f_dup",
        "--limit",
        "3",
        "--jobs",
        "2",
        "--quiet",
        "--json",
        json.to_str().unwrap(),
    ])
    .unwrap();
    let report = repair_conformance::run(&args).unwrap();
    let s = &report.summary;
    assert_eq!(s.images + report.errors.len(), 3, "{:?}", report.errors);
    assert!(report.errors.is_empty(), "{:?}", report.errors);
    // e2fsck's own repair is the reference: these images are among those it fixes.
    assert_eq!(s.e2fsck_clean, 3);
    assert_eq!(s.both_clean + s.only_e2fsck_clean, s.e2fsck_clean);
    assert_eq!(s.ffsck_clean, s.both_clean + s.only_ffsck_clean);
    assert!(s.end_state_matches <= s.both_clean);
    assert_eq!(s.e2fsck_two_runs_clean, 3);
    assert!(s.ffsck_clean_of_those <= s.ffsck_clean);
    for row in &report.images {
        assert!(row.name.starts_with("f_dup"));
        assert_eq!(row.e2fsck.clean, row.e2fsck.after_exit == Some(0));
        assert!(row.e2fsck.clean_after_second.is_some(), "e2fsck runs twice");
        assert!(row.ffsck.clean_after_second.is_none(), "ffsck runs once");
        assert!(!row.ffsck.fy_crashed, "ffsck -fy crashed on {}", row.name);
        if common::tool("debugfs").is_some() {
            // Both repaired trees are read and compared; what e2fsck keeps, ffsck keeps.
            let lost = row.lost.as_ref().expect("trees compared");
            assert_eq!(
                row.same_tree == Some(true),
                lost.is_empty() && row.same_tree.is_some()
            );
        }
    }
    assert_eq!(
        s.lost_files,
        report
            .images
            .iter()
            .map(|r| r.lost.as_ref().map_or(0, Vec::len))
            .sum::<usize>()
    );
    let md = repair_conformance::render_markdown(&report);
    let one_run = format!("**{}/{} (", s.ffsck_clean_of_those, s.e2fsck_two_runs_clean);
    assert!(md.contains(&one_run), "{md}");
    assert!(md.contains(&format!("**{}**", s.lost_files)), "{md}");
    // main() writes the same report as JSON.
    repair_conformance::main(&args).unwrap();
    let v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    assert_eq!(v["summary"]["images"], 3);
}
