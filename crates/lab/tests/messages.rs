//! `conformance --messages` on a few corpus images: the harness runs, filters both sides and
//! counts; a test's own expect.1 compared with itself is identical. Skips without ../shared.

mod common;

use ffsck_lab::conformance::ConformanceArgs;
use ffsck_lab::messages;

#[test]
fn messages_harness_compares_filtered_output() {
    let Some(corpus) = common::corpus_dir() else {
        eprintln!("skipping: ../shared/corpus/e2fsprogs not found");
        return;
    };
    let Some(ffsck) = common::ffsck_binary() else {
        eprintln!("skipping: ffsck binary not built (run `cargo build -p ffsck` or `--release`)");
        return;
    };
    let args: ConformanceArgs = ffsck_lab::parse_args(&[
        "--messages",
        "--corpus",
        corpus.to_str().unwrap(),
        "--ffsck",
        ffsck.to_str().unwrap(),
        "--only",
        "f_zero_super",
        "--jobs",
        "1",
        "--quiet",
    ])
    .unwrap();
    assert!(args.messages);
    let report = messages::run(&args).unwrap();
    eprintln!("{}", messages::render(&report));
    assert!(report.errors.is_empty(), "{:?}", report.errors);
    assert_eq!(report.summary.images, report.rows.len());
    assert!(report.summary.images >= 1);
    for r in &report.rows {
        assert!((0.0..=1.0).contains(&r.jaccard), "{r:?}");
        if r.identical {
            assert!(
                r.jaccard == 1.0 && r.missing.is_empty() && r.extra.is_empty(),
                "{r:?}"
            );
        }
    }
    // The filter makes an expect file equal to itself whatever its program name or paths.
    let expect = std::fs::read_to_string(corpus.join("f_zero_super/expect.1")).unwrap();
    let a = messages::filter_text(&expect);
    let b = messages::filter_text(&expect.replace("../e2fsck/e2fsck:", "ffsck:"));
    assert_eq!(a, b);
    assert!(a.iter().all(|l| !l.contains("e2fsck/e2fsck")));
}
