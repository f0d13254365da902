//! `ffsck-lab sweep --sizes` on two tiny sizes: one bench per size in its own folder, a summary
//! report linking cost-vs-size SVGs, the read-once floor, and `--aged` either aging the image or
//! skipping with a clear warning where loop mounts are not allowed.

mod common;

use ffsck_lab::bench::BenchArgs;
use ffsck_lab::sweep::{self, SweepArgs};

#[test]
fn tiny_size_sweep_writes_plots_and_summary() {
    if common::tool("mke2fs").is_none() || common::tool("e2fsck").is_none() {
        common::skip("mke2fs/e2fsck not installed");
        return;
    }
    let ffsck = common::ffsck_binary()
        .or_else(|| common::tool("e2fsck"))
        .unwrap();
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("sweep");
    let args: SweepArgs = ffsck_lab::parse_args(&[
        "--sizes",
        "500,1500",
        "--runs",
        "3",
        "--out",
        out.to_str().unwrap(),
        "--ffsck",
        ffsck.to_str().unwrap(),
        "--timeout",
        "120",
    ])
    .unwrap();
    let r = sweep::run(&args).unwrap();
    assert_eq!(r.rows.len(), 2);
    assert!(r.rows[0].inodes < r.rows[1].inodes);
    for row in &r.rows {
        assert!(row.ffsck_wall_s > 0.0 && row.e2fsck_wall_s > 0.0);
        assert!(out.join(&row.dir).join("results.json").is_file());
        // e2image is part of e2fsprogs, so the floor is there whenever e2fsck is.
        if common::tool("e2image").is_some() {
            assert!(row.read_once_wall_s.is_some());
        }
    }
    let report = std::fs::read_to_string(out.join("report.md")).unwrap();
    for svg in ["sizes-wall.svg", "sizes-rss.svg"] {
        assert!(report.contains(&format!("]({svg})")), "{report}");
        let text = std::fs::read_to_string(out.join(svg)).unwrap();
        assert!(text.starts_with("<svg") && text.trim_end().ends_with("</svg>"));
        assert!(text.contains("ffsck -fn") && text.contains("e2fsck -fn"));
        let png = std::fs::read(out.join(svg.replace(".svg", ".png"))).unwrap();
        assert!(
            png.starts_with(b"\x89PNG\r\n\x1a\n"),
            "{svg}: no PNG beside it"
        );
    }
    assert!(out.join("sweep.json").is_file());
}

#[test]
fn aged_bench_ages_or_skips_clearly() {
    if common::tool("mke2fs").is_none() || common::tool("resize2fs").is_none() {
        common::skip("mke2fs/resize2fs not installed");
        return;
    }
    let ffsck = common::ffsck_binary()
        .or_else(|| common::tool("e2fsck"))
        .unwrap();
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("aged");
    let args: BenchArgs = ffsck_lab::parse_args(&[
        "--inodes",
        "1000",
        "--runs",
        "3",
        "--aged",
        "ffsck",
        "--age-secs",
        "3",
        "--out",
        out.to_str().unwrap(),
        "--ffsck",
        ffsck.to_str().unwrap(),
    ])
    .unwrap();
    let r = ffsck_lab::bench::run(&args).unwrap();
    match &r.aged {
        Some(a) => {
            assert!(a.ops > 0);
            // Aging through the kernel leaves a clean file system.
            assert_eq!(r.summary[1].outcomes, ["0"], "{:?}", r.warnings);
        }
        None => assert!(
            r.warnings.iter().any(|w| w.contains("skipped")),
            "{:?}",
            r.warnings
        ),
    }
}

#[test]
fn bad_size_lists_are_clear_errors() {
    assert!(sweep::validate_sizes(&[]).is_err());
    assert!(sweep::validate_sizes(&[50]).is_err());
    assert!(sweep::validate_sizes(&[1000; 40]).is_err());
    assert!(sweep::validate_sizes(&[100_000, 250_000]).is_ok());
    assert!(ffsck_lab::parse_args::<SweepArgs>(&["--sizes", "1,x"]).is_err());
    assert!(ffsck_lab::parse_args::<SweepArgs>(&["--runs", "3"]).is_err());
}
