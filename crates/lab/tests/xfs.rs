//! The lab on XFS: `mkfs --fs-type xfs` builds an image xfs_repair accepts, every default
//! `corrupt --xfs-blocktrash` type changes exactly what its manifest lists and xfs_repair -n
//! finds it, `gilbert --fs-type xfs` writes the xfs_repair series, and `age` works on
//! XFS where loop mounts are allowed. Skips with a message where xfsprogs is not installed.

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;

use ffsck_lab::corrupt::{self, CorruptArgs, Manifest};
use ffsck_lab::imagegen::FsType;
use ffsck_lab::{gilbert, mkfs, xfs};

fn have_xfs() -> bool {
    if !xfs::available() {
        common::skip(
            "xfsprogs (mkfs.xfs, xfs_repair, xfs_db) not installed; \
             scripts/ensure-tools.sh installs it on Debian",
        );
        return false;
    }
    true
}

/// `ffsck-lab mkfs --fs-type xfs` of a small tree in `dir`.
fn build(dir: &Path, name: &str, seed: &str) -> (PathBuf, mkfs::Recipe) {
    let image = dir.join(name);
    let args: mkfs::MkfsArgs = ffsck_lab::parse_args(&[
        "--fs-type",
        "xfs",
        "--inodes",
        "1000",
        "--seed",
        seed,
        "--out",
        image.to_str().unwrap(),
        "--tree-dir",
        dir.to_str().unwrap(),
    ])
    .unwrap();
    let recipe = mkfs::run(&args).unwrap();
    (image, recipe)
}

/// xfs_repair's exit code (`-n`: 0 clean, 1 damage found).
fn xfs_repair(args: &[&str], image: &Path) -> (Option<i32>, String) {
    let out = Command::new(xfs::tool("xfs_repair").unwrap())
        .args(args)
        .arg(image)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&[out.stdout, out.stderr].concat()).into_owned();
    (out.status.code(), text)
}

fn blocktrash(image: &Path, manifest: &Path, kind: &str, seed: &str) -> anyhow::Result<Manifest> {
    let args: CorruptArgs = ffsck_lab::parse_args(&[
        "--image",
        image.to_str().unwrap(),
        "--manifest",
        manifest.to_str().unwrap(),
        "--xfs-blocktrash",
        kind,
        "--seed",
        seed,
    ])?;
    corrupt::run(&args)
}

#[test]
fn mkfs_builds_an_xfs_image_xfs_repair_accepts() {
    if !have_xfs() {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let (image, a) = build(tmp.path(), "a.img", "5");
    assert_eq!(a.built.fs_type, FsType::Xfs);
    assert!(a.built.files >= 900, "{:?}", a.built);
    assert!(std::fs::metadata(&image).unwrap().len() >= xfs::MIN_BYTES);
    assert!(a.built.mke2fs_args.iter().any(|x| x == "-p"));
    assert!(
        a.mke2fs_version.contains("mkfs.xfs"),
        "{}",
        a.mke2fs_version
    );
    assert!(mkfs::recipe_path(&image).is_file());
    assert!(xfs::is_xfs(&image));
    let (code, text) = xfs_repair(&["-n"], &image);
    assert_eq!(code, Some(0), "{text}");
    // The generated tree is really in it, with the generator's names.
    let ls = Command::new(xfs::tool("xfs_db").unwrap())
        .args(["-r", "-c", "ls /g00000/d000"])
        .arg(&image)
        .output()
        .unwrap();
    let ls = String::from_utf8_lossy(&ls.stdout);
    assert!(
        ls.contains("file000.dat") && ls.contains("file094.dat"),
        "{ls}"
    );
    // Same seed, same tree and arguments.
    let (_, b) = build(tmp.path(), "b.img", "5");
    assert_eq!(a.built.tree_digest, b.built.tree_digest);
    assert_eq!(a.built.mke2fs_args, b.built.mke2fs_args);
}

#[test]
fn every_blocktrash_type_is_logged_on_disk_and_detected() {
    if !have_xfs() {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let (base, _) = build(tmp.path(), "base.img", "2");
    let clean = std::fs::read(&base).unwrap();
    let (image, again) = (tmp.path().join("x.img"), tmp.path().join("y.img"));
    let manifest = tmp.path().join("m.json");
    for name in gilbert::all_corruptions(FsType::Xfs) {
        let kind = name.strip_prefix("xfs-").unwrap();
        xfs::sparse_copy(&base, &image).unwrap();
        let m =
            blocktrash(&image, &manifest, kind, "7").unwrap_or_else(|e| panic!("{kind}: {e:#}"));
        assert_eq!(
            (m.mode.as_str(), m.target.as_str()),
            ("xfs-blocktrash", kind)
        );
        assert!(!m.changes.is_empty(), "{kind}: no bytes changed");
        assert!(
            m.description.contains(&format!(" {kind} ")),
            "{}",
            m.description
        );
        // xfs_db wrote the image itself: every byte it changed is in the manifest.
        common::assert_changes_match(&clean, &image, &m);
        let (code, text) = xfs_repair(&["-n"], &image);
        assert_eq!(code, Some(1), "{kind}: xfs_repair -n found nothing\n{text}");
        // Same seed, same damage.
        xfs::sparse_copy(&base, &again).unwrap();
        let m2 = blocktrash(&again, &manifest, kind, "7").unwrap();
        assert_eq!(m.changes, m2.changes, "{kind}: not reproducible");
    }
    // Clear refusals: a type the image lacks, ext modes on XFS, blocktrash on ext.
    xfs::sparse_copy(&base, &image).unwrap();
    let err = blocktrash(&image, &manifest, "btbmapd", "7").unwrap_err();
    assert!(format!("{err:#}").contains("changed nothing"), "{err:#}");
    let args: CorruptArgs = ffsck_lab::parse_args(&[
        "--image",
        image.to_str().unwrap(),
        "--manifest",
        manifest.to_str().unwrap(),
        "--table2",
        "sb-magic",
    ])
    .unwrap();
    let err = corrupt::run(&args).unwrap_err();
    assert!(format!("{err:#}").contains("--xfs-blocktrash"), "{err:#}");
    std::fs::write(&image, vec![0u8; 1 << 20]).unwrap();
    let err = blocktrash(&image, &manifest, "agf", "7").unwrap_err();
    assert!(format!("{err:#}").contains("not an XFS image"), "{err:#}");
}

#[test]
fn gilbert_bench_on_xfs_writes_the_xfs_repair_series() {
    if !have_xfs() {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("g");
    let r = common::run_gilbert(
        &out,
        &[
            "--fs-type",
            "xfs",
            "--fs-sizes",
            "300",
            "--block-sizes",
            "4096",
            "--inode-sizes",
            "512",
            "--corruptions",
            "xfs-agf,xfs-inode",
            "--keep",
        ],
    );
    let names: Vec<&str> = r.checkers.iter().map(|c| c.name.as_str()).collect();
    assert_eq!(names, ["xfs_repair -n", "xfs_repair"]);
    assert!(r.warnings.is_empty(), "{:?}", r.warnings);
    for c in &r.baselines[0].checkers {
        assert_eq!(
            c.measure.outcomes,
            ["0"],
            "{}: clean image not clean",
            c.checker
        );
    }
    assert_eq!(r.rows.len(), 2);
    for row in &r.rows {
        assert!(row.error.is_none(), "{}: {:?}", row.corruption, row.error);
        let check = row.series("xfs_repair -n").unwrap();
        assert_eq!(check.measure.runs, 3);
        assert_eq!(
            check.measure.outcomes,
            ["1"],
            "{}: not detected",
            row.corruption
        );
        assert!(check.time_growth.is_finite() && check.rss_growth.is_finite());
        assert!(check.measure.rss_own, "RSS not measured through the shim");
        let repair = row.series("xfs_repair").unwrap();
        assert_eq!(repair.measure.outcomes, ["0"], "{}", row.corruption);
    }
    // The damage was undone after each type: the kept image is clean again.
    let (code, text) = xfs_repair(&["-n"], &out.join("gilbert.img"));
    assert_eq!(code, Some(0), "{text}");
    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("results.json")).unwrap()).unwrap();
    assert_eq!(json["fs_type"], "xfs");
    let by_type = json["by_type"].as_array().unwrap();
    assert_eq!(by_type.len(), 2);
    assert_eq!(by_type[0]["checkers"][0]["checker"], "xfs_repair -n");
    let report = std::fs::read_to_string(out.join("report.md")).unwrap();
    assert!(report.contains("| xfs-agf") && report.contains("xfs_repair -n time"));
    assert_eq!(r.figures.len(), 2);
    let svg = std::fs::read_to_string(out.join(&r.figures[0].file)).unwrap();
    assert!(svg.contains("xfs_repair -n") && svg.contains("xfs-inode"));
    // ext corruption names and too-small XFS images are refused clearly.
    common::assert_gilbert_refuses(
        &["--fs-type", "xfs", "--out", out.to_str().unwrap()],
        &[
            ("--corruptions", "inode-links", "unknown corruption"),
            ("--fs-sizes", "32", "--fs-sizes"),
            ("--inode-sizes", "256", "--inode-sizes"),
        ],
    );
}

#[test]
fn age_works_on_xfs_where_mounting_is_allowed() {
    if !have_xfs() {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let (image, _) = build(tmp.path(), "age.img", "3");
    let Some(report) = common::age_or_skip("ffsck", &image) else {
        return;
    };
    assert!(
        report.ops > 0 && report.util_after > report.util_before,
        "{report:?}"
    );
    assert!(report.fragmentation.files > 0);
    assert!(report.fragmentation.mean_fragments_per_file >= 1.0);
    let frag = report.xfs_frag.as_deref().unwrap_or_default();
    assert!(
        frag.starts_with("actual") && frag.contains("fragmentation factor"),
        "{frag}"
    );
    let (code, text) = xfs_repair(&["-n"], &image);
    assert_eq!(code, Some(0), "aged image is not clean:\n{text}");
}

#[test]
fn gilbert_vs_xfs_writes_one_comparison_report() {
    if !have_xfs() {
        return;
    }
    let Some(ffsck) = common::ffsck_binary() else {
        common::skip("ffsck binary not built");
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("v");
    std::env::set_var(ffsck_lab::child::SHIM_ENV, env!("CARGO_BIN_EXE_ffsck-lab"));
    let args: ffsck_lab::gilbert::GilbertArgs = ffsck_lab::parse_args(&[
        "--ffsck",
        ffsck.to_str().unwrap(),
        "--runs",
        "3",
        "--out",
        out.to_str().unwrap(),
        "--fs-sizes",
        "300",
        "--corruptions",
        "sb-magic,inode-links,xfs-sb,xfs-inode",
    ])
    .unwrap();
    let v = ffsck_lab::versus::run(&args).unwrap();
    let class = |name: &str| v.classes.iter().find(|c| c.class == name).unwrap();
    let names: Vec<&str> = class("superblock")
        .checkers
        .iter()
        .map(|g| g.checker.as_str())
        .collect();
    assert_eq!(
        names,
        [
            "ffsck -fn",
            "e2fsck -fn",
            "e2fsck -fy",
            "xfs_repair -n",
            "xfs_repair"
        ]
    );
    for (name, ext, xfs) in [
        ("superblock", "sb-magic", "xfs-sb"),
        ("inodes", "inode-links", "xfs-inode"),
    ] {
        let c = class(name);
        assert_eq!(
            (c.ext4_types.as_slice(), c.xfs_types.as_slice()),
            (&[ext.to_string()][..], &[xfs.to_string()][..])
        );
        for g in &c.checkers {
            assert!(
                g.time_growth.is_finite() && g.rss_growth.is_finite(),
                "{name}: {g:?}"
            );
        }
    }
    // A class no chosen type feeds has no figures.
    assert!(class("directories")
        .checkers
        .iter()
        .all(|g| g.time_growth.is_nan()));
    assert_eq!(v.clean.len(), 5);
    assert!(v.clean.iter().all(|c| c.wall_s > 0.0));
    let report = std::fs::read_to_string(out.join("report.md")).unwrap();
    for want in [
        "| superblock",
        "xfs_repair -n time",
        "e2fsck -fy RSS",
        "| xfs-inode",
    ] {
        assert!(report.contains(want), "{want}\n{report}");
    }
    assert_eq!(v.figures.len(), 2);
    let svg = std::fs::read_to_string(out.join(&v.figures[0].file)).unwrap();
    assert!(svg.contains("xfs_repair -n") && svg.contains("superblock"));
    assert!(out.join(&v.figures[0].png).is_file());
    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("results.json")).unwrap()).unwrap();
    assert_eq!(json["classes"].as_array().unwrap().len(), v.classes.len());
    assert!(out.join("ext4/report.md").is_file() && out.join("xfs/report.md").is_file());
}
