//! Runs the conformance harness with the real ffsck on the first images of the e2fsprogs corpus.
//! It asserts only what must hold at any stage of the checker: no crash, no hang, and `-n`
//! leaves the image untouched. Agreement with e2fsck is reported, not asserted, while the
//! checker is under construction.

mod common;

use ffsck_lab::conformance::{self, ConformanceArgs};

#[test]
fn corpus_subset_without_crash_hang_or_write() {
    let Some(corpus) = common::corpus_dir() else {
        eprintln!("skipping: ../shared/corpus/e2fsprogs not found");
        return;
    };
    let Some(ffsck) = common::ffsck_binary() else {
        common::skip("ffsck binary not built (run `cargo build -p ffsck` or `--release`)");
        return;
    };
    if common::tool("e2fsck").is_none() {
        common::skip("e2fsck not installed");
        return;
    }

    let args: ConformanceArgs = ffsck_lab::parse_args(&[
        "--corpus",
        corpus.to_str().unwrap(),
        "--ffsck",
        ffsck.to_str().unwrap(),
        "--only",
        "f_",
        "--limit",
        "15",
        "--jobs",
        "2",
        "--quiet",
    ])
    .unwrap();
    let report = conformance::run(&args).unwrap();
    eprintln!("{}", conformance::render_markdown(&report));

    let s = &report.summary;
    assert_eq!(s.images_run + s.images_skipped + s.harness_errors, 15);
    assert_eq!(s.harness_errors, 0, "harness errors: {:?}", report.errors);
    assert_eq!(s.ffsck_crashes, 0, "ffsck crashed");
    assert_eq!(s.ffsck_timeouts, 0, "ffsck hung");
    assert_eq!(s.ffsck_modified, 0, "ffsck -n modified an image");
}
