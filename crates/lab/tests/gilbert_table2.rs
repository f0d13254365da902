//! The Table II corruptions and `corrupt --random` change exactly what their manifests list and
//! leave damage e2fsck reports, on block-mapped (ext3) and extent (ext4) images; and
//! `gilbert` writes JSON, Markdown, SVG and PNG with one series per checker.

mod common;

use std::path::Path;

use ffsck_lab::corrupt::{self, CorruptArgs, Manifest, Table2};
use ffsck_lab::gilbert::{self, Config};
use ffsck_lab::imagegen::FsType;

fn have_tools() -> bool {
    if common::tool("mke2fs").is_none() || common::tool("e2fsck").is_none() {
        common::skip("mke2fs/e2fsck not installed");
        return false;
    }
    true
}

fn base_image(dir: &Path, fs: FsType) -> std::path::PathBuf {
    let image = dir.join(format!("base-{}.img", fs.name()));
    let c = Config {
        fs_mib: 8,
        block_size: 1024,
        inode_size: 256,
    };
    let mke2fs = common::tool("mke2fs").unwrap();
    gilbert::build_image(&c, fs, 3, dir, &image, &mke2fs).unwrap();
    image
}

fn corrupt(image: &Path, manifest: &Path, extra: &[&str]) -> anyhow::Result<Manifest> {
    let mut argv = vec![
        "--image",
        image.to_str().unwrap(),
        "--manifest",
        manifest.to_str().unwrap(),
    ];
    argv.extend_from_slice(extra);
    let args: CorruptArgs = ffsck_lab::parse_args(&argv)?;
    corrupt::run(&args)
}

#[test]
fn every_table2_corruption_is_on_disk_and_detected() {
    if !have_tools() {
        return;
    }
    let e2fsck = common::tool("e2fsck").unwrap();
    let tmp = tempfile::tempdir().unwrap();
    for fs in [FsType::Ext4, FsType::Ext3] {
        let base = base_image(tmp.path(), fs);
        let clean = std::fs::read(&base).unwrap();
        assert!(
            !common::finds_problem(&e2fsck, &base),
            "base image not clean"
        );
        let image = tmp.path().join("x.img");
        for t in Table2::ALL {
            std::fs::write(&image, &clean).unwrap();
            let name = t.name();
            let m = corrupt(&image, &tmp.path().join("m.json"), &["--table2", &name])
                .unwrap_or_else(|e| panic!("{} {name}: {e:#}", fs.name()));
            assert_eq!(m.mode, "table2");
            assert_eq!(m.target, name);
            assert!(m.changes.iter().any(|c| c.role == "damage"), "{name}");
            common::assert_changes_match(&clean, &image, &m);
            assert!(
                common::finds_problem(&e2fsck, &image),
                "{} {name}: e2fsck -fn found nothing ({})",
                fs.name(),
                m.description
            );
        }
    }
}

#[test]
fn random_corruption_is_reproducible_logged_and_detected() {
    if !have_tools() {
        return;
    }
    let e2fsck = common::tool("e2fsck").unwrap();
    let tmp = tempfile::tempdir().unwrap();
    let base = base_image(tmp.path(), FsType::Ext4);
    let clean = std::fs::read(&base).unwrap();
    let mut seen_modes = std::collections::BTreeSet::new();
    for seed in ["1", "2", "3", "4"] {
        let (a, b) = (tmp.path().join("a.img"), tmp.path().join("b.img"));
        std::fs::write(&a, &clean).unwrap();
        std::fs::write(&b, &clean).unwrap();
        let args = ["--random", "4", "--seed", seed];
        let ma = corrupt(&a, &tmp.path().join("a.json"), &args).unwrap();
        let mb = corrupt(&b, &tmp.path().join("b.json"), &args).unwrap();
        assert_eq!(ma.steps.len(), 4);
        assert_eq!(ma.steps, mb.steps, "same seed, different draws");
        assert!(std::fs::read(&a).unwrap() == std::fs::read(&b).unwrap());
        common::assert_changes_match(&clean, &a, &ma);
        assert!(common::finds_problem(&e2fsck, &a), "{:?}", ma.steps);
        for s in &ma.steps {
            seen_modes.insert(s.split(' ').next().unwrap().to_string());
        }
    }
    // 16 draws over four modes: all of them should have come up.
    assert!(seen_modes.len() >= 3, "draws too narrow: {seen_modes:?}");
    // Wrong arguments are refused clearly.
    let image = tmp.path().join("a.img");
    let err = corrupt(&image, &tmp.path().join("c.json"), &["--random", "0"]).unwrap_err();
    assert!(format!("{err:#}").contains("--random"), "{err:#}");
    let err = corrupt(
        &image,
        &tmp.path().join("c.json"),
        &["--random", "2", "--table2", "sb-magic"],
    )
    .unwrap_err();
    assert!(format!("{err:#}").contains("exactly one"), "{err:#}");
    assert!(corrupt(&image, &tmp.path().join("c.json"), &["--table2", "no-such"]).is_err());
}

#[test]
fn gilbert_bench_writes_json_markdown_svg_and_png() {
    if !have_tools() {
        return;
    }
    let Some(ffsck) = common::ffsck_binary() else {
        common::skip("ffsck not built");
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("g");
    let r = common::run_gilbert(
        &out,
        &[
            "--fs-sizes",
            "8",
            "--block-sizes",
            "1024,4096",
            "--inode-sizes",
            "256",
            "--corruptions",
            "inode-links,ind-ptr-range,component-gd",
            "--timeout",
            "120",
            "--ffsck",
            ffsck.to_str().unwrap(),
        ],
    );
    assert_eq!(r.baselines.len(), 2);
    assert_eq!(r.rows.len(), 6);
    for row in &r.rows {
        assert!(row.error.is_none(), "{}: {:?}", row.corruption, row.error);
        let (ff, e2) = (
            row.series("ffsck -fn").unwrap(),
            row.series("e2fsck -fn").unwrap(),
        );
        assert!(e2.time_growth.is_finite() && ff.rss_growth.is_finite());
        let (ff, e2) = (&ff.measure, &e2.measure);
        assert_eq!((ff.runs, e2.runs), (3, 3));
        assert!(
            ff.rss_own && e2.rss_own,
            "RSS not measured through the shim"
        );
        // e2fsck must have seen the damage.
        assert!(e2.outcomes.iter().all(|o| o != "0"), "{}", row.corruption);
    }
    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("results.json")).unwrap()).unwrap();
    assert_eq!(json["by_type"].as_array().unwrap().len(), 3);
    let report = std::fs::read_to_string(out.join("report.md")).unwrap();
    assert!(report.contains("| inode-links") && report.contains("component-gd"));
    assert_eq!(r.figures.len(), 2, "{:?}", r.warnings);
    for f in &r.figures {
        assert!(report.contains(&format!("]({})", f.file)));
        let svg = std::fs::read_to_string(out.join(&f.file)).unwrap();
        assert!(svg.starts_with("<svg") && svg.trim_end().ends_with("</svg>"));
        for series in ["ffsck -fn", "e2fsck -fn", "inode-links", "ind-ptr-range"] {
            assert!(svg.contains(series), "{}: no `{series}`", f.file);
        }
        let png = std::fs::read(out.join(&f.png)).unwrap();
        assert!(png.starts_with(b"\x89PNG\r\n\x1a\n") && png.len() > 2000);
    }
    // Bad parameters get clear errors.
    common::assert_gilbert_refuses(
        &[
            "--out",
            out.to_str().unwrap(),
            "--ffsck",
            ffsck.to_str().unwrap(),
        ],
        &[
            ("--corruptions", "nonsense", "unknown corruption"),
            ("--block-sizes", "1000", "--block-sizes"),
            ("--inode-sizes", "100", "--inode-sizes"),
        ],
    );
}
