//! `ffsck-lab mkfs` must be reproducible, and every `ffsck-lab corrupt` mode must change exactly
//! the bytes its manifest lists, name the field it meant to hit, and leave damage that both
//! e2fsck -fn and ffsck -fn report.

mod common;

use std::path::Path;
use std::process::Command;

use ffsck_lab::corrupt::{self, CorruptArgs, Manifest};
use ffsck_lab::mkfs::{self, MkfsArgs};

fn have_tools() -> bool {
    if common::tool("mke2fs").is_none() || common::tool("e2fsck").is_none() {
        common::skip("mke2fs/e2fsck not installed");
        return false;
    }
    true
}

fn build(dir: &Path, name: &str, profile: &str, inodes: &str, seed: &str) -> mkfs::Recipe {
    let out = dir.join(name);
    let args: MkfsArgs = ffsck_lab::parse_args(&[
        "--profile",
        profile,
        "--inodes",
        inodes,
        "--seed",
        seed,
        "--out",
        out.to_str().unwrap(),
        "--tree-dir",
        dir.to_str().unwrap(),
    ])
    .unwrap();
    mkfs::run(&args).unwrap()
}

/// `--populate kernel` copies the same tree into an empty file system through a loop mount:
/// e2fsck calls it clean, it holds as many inodes as the `mke2fs -d` image of the seed, and
/// the kernel placed it (ext4 with flex_bg: directory blocks in the flex group's first group,
/// regular files from the second on, where `mke2fs -d` hands out blocks in the tree's order).
#[test]
fn populate_kernel_copies_the_tree_in_through_the_kernel() {
    let (true, Some(e2fsck), Some(debugfs)) = (
        have_tools(),
        common::tool("e2fsck"),
        common::tool("debugfs"),
    ) else {
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    let kernel = tmp.path().join("kernel.img");
    let args: MkfsArgs = ffsck_lab::parse_args(&[
        "--inodes",
        "2000",
        "--size",
        "256M",
        "--seed",
        "5",
        "--populate",
        "kernel",
        "--out",
        kernel.to_str().unwrap(),
        "--tree-dir",
        tmp.path().to_str().unwrap(),
    ])
    .unwrap();
    let recipe = match mkfs::run(&args) {
        Ok(r) => r,
        Err(e) if format!("{e:#}").contains("cannot mount") => {
            common::skip(&format!("needs root and loop devices: {e:#}"));
            return;
        }
        Err(e) => panic!("{e:#}"),
    };
    assert_eq!(recipe.built.populate, ffsck_lab::imagegen::Populate::Kernel);
    assert!(!recipe.built.mke2fs_args.iter().any(|a| a == "-d"));
    let packed = build(tmp.path(), "packed.img", "files", "2000", "5");
    assert_eq!(packed.built.populate, ffsck_lab::imagegen::Populate::Mkfs);
    assert_eq!(packed.built.tree_digest, recipe.built.tree_digest);
    // "N/M files (..." of e2fsck's closing line: the same N in use.
    let in_use = |img: &Path| {
        let out = Command::new(&e2fsck).arg("-fn").arg(img).output().unwrap();
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        assert_eq!(out.status.code(), Some(0), "{}: {text}", img.display());
        let last = text.lines().last().unwrap_or_default().to_owned();
        last.split(": ")
            .nth(1)
            .unwrap()
            .split('/')
            .next()
            .unwrap()
            .to_owned()
    };
    assert_eq!(in_use(&kernel), in_use(&tmp.path().join("packed.img")));
    let first_block = |img: &Path, path: &str| -> u64 {
        let out = Command::new(&debugfs)
            .args(["-R", &format!("blocks {path}")])
            .arg(img)
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        text.split_whitespace()
            .next()
            .and_then(|b| b.parse().ok())
            .unwrap_or_else(|| panic!("{path}: {text}"))
    };
    let group = |b: u64| b / 32768;
    for dir in ["/g00000", "/g00000/d000", "/g00000/d001"] {
        assert_eq!(group(first_block(&kernel, dir)), 0, "{dir}");
    }
    let file = "/g00000/d001/file000.dat";
    assert!(group(first_block(&kernel, file)) >= 1, "{file}");
}

#[test]
fn same_seed_same_image_and_recipe() {
    if !have_tools() {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let a = build(tmp.path(), "a.img", "files", "1000", "5");
    let b = build(tmp.path(), "b.img", "files", "1000", "5");
    let c = build(tmp.path(), "c.img", "files", "1000", "6");
    assert_eq!(a.built.tree_digest, b.built.tree_digest);
    assert_ne!(a.built.tree_digest, c.built.tree_digest);
    assert_eq!(a.built.mke2fs_args, b.built.mke2fs_args);
    assert_eq!((a.built.files, a.built.dirs), (b.built.files, b.built.dirs));
    let img = |n: &str| std::fs::read(tmp.path().join(n)).unwrap();
    assert!(
        img("a.img") == img("b.img"),
        "same seed gave different images"
    );
    assert!(img("a.img") != img("c.img"));
    // The recipe on disk is the one returned.
    let text = std::fs::read_to_string(tmp.path().join("a.img.recipe.json")).unwrap();
    let disk: mkfs::Recipe = serde_json::from_str(&text).unwrap();
    assert_eq!(disk.built.tree_digest, a.built.tree_digest);
    assert_eq!(disk.built.seed, 5);
    assert!(
        disk.mke2fs_version.contains("mke2fs"),
        "{}",
        disk.mke2fs_version
    );
    let status = Command::new(common::tool("e2fsck").unwrap())
        .args(["-fn"])
        .arg(tmp.path().join("a.img"))
        .output()
        .unwrap()
        .status;
    assert_eq!(status.code(), Some(0));
}

#[test]
fn large_profile_has_deep_extent_trees() {
    if !have_tools() || common::tool("debugfs").is_none() {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    build(tmp.path(), "l.img", "large", "128", "1");
    let out = Command::new(common::tool("debugfs").unwrap())
        .args(["-R", "ex /g00000/d000/file000.dat"])
        .arg(tmp.path().join("l.img"))
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains(" 2/ 2"), "no depth-2 extent tree:\n{text}");
}

#[test]
fn every_corrupt_mode_is_logged_exactly_and_detected() {
    if !have_tools() {
        return;
    }
    let e2fsck = common::tool("e2fsck").unwrap();
    let ffsck = common::ffsck_binary();
    if ffsck.is_none() {
        eprintln!("ffsck binary not built: checking with e2fsck only");
    }
    let tmp = tempfile::tempdir().unwrap();
    build(tmp.path(), "base.img", "files", "1000", "3");
    let base = std::fs::read(tmp.path().join("base.img")).unwrap();

    // (arguments, field the first damage entry must name; a prefix for component flips).
    let cases: &[(&[&str], &str)] = &[
        (
            &["--field", "sb.s_inodes_count", "--op", "add"],
            "sb.s_inodes_count",
        ),
        (
            &["--field", "sb.s_first_ino", "--op", "sub", "--csum", "fix"],
            "sb.s_first_ino",
        ),
        (
            &[
                "--field",
                "gd[0].bg_free_blocks_count_lo",
                "--op",
                "sub",
                "--csum",
                "fix",
            ],
            "gd[0].bg_free_blocks_count_lo",
        ),
        (
            &[
                "--field",
                "inode[12].i_links_count",
                "--op",
                "add",
                "--csum",
                "fix",
            ],
            "inode[12].i_links_count",
        ),
        (
            &["--field", "inode[12].i_mode", "--op", "lastbit"],
            "inode[12].i_mode",
        ),
        (
            &[
                "--field",
                "extent[13].eh_magic",
                "--op",
                "zero",
                "--csum",
                "fix",
            ],
            "extent[13].eh_magic",
        ),
        (
            &[
                "--field",
                "extent[13][0].ee_len",
                "--op",
                "add",
                "--csum",
                "fix",
            ],
            "extent[13][0].ee_len",
        ),
        (
            &[
                "--field",
                "dirent[2][1].rec_len",
                "--op",
                "set=3",
                "--csum",
                "fix",
            ],
            "dirent[2][1].rec_len",
        ),
        (
            &["--field", "jsb.s_maxlen", "--op", "random", "--csum", "fix"],
            "jsb.s_maxlen",
        ),
        (&["--component", "sb", "--group", "0"], "sb@group0"),
        (&["--component", "gd", "--group", "0"], "gd[0]"),
        (
            &["--component", "reserved-gdt", "--group", "0"],
            "reserved_gdt@group0",
        ),
        (
            &["--component", "block-bitmap", "--group", "0"],
            "block_bitmap[0]",
        ),
        (
            &["--component", "inode-bitmap", "--group", "0"],
            "inode_bitmap[0]",
        ),
        (&["--component", "inode-table", "--group", "0"], "inode["),
        (&["--semantic", "multiply-claimed"], "extent["),
        (&["--semantic", "orphan"], "dirent["),
        (&["--semantic", "dir-loop"], "dirent["),
        (&["--semantic", "dangling-entry"], "dirent["),
        (&["--semantic", "unlink-dotdot"], "dirent["),
    ];
    let mut missed = Vec::new();
    for (i, (extra, field)) in cases.iter().enumerate() {
        let image = tmp.path().join(format!("c{i}.img"));
        std::fs::write(&image, &base).unwrap();
        let manifest = tmp.path().join(format!("c{i}.json"));
        let mut argv = vec![
            "--image",
            image.to_str().unwrap(),
            "--seed",
            "11",
            "--manifest",
            manifest.to_str().unwrap(),
        ];
        argv.extend_from_slice(extra);
        let args: CorruptArgs = ffsck_lab::parse_args(&argv).unwrap();
        let m = corrupt::run(&args).unwrap_or_else(|e| panic!("{extra:?}: {e:#}"));
        let on_disk: Manifest =
            serde_json::from_str(&std::fs::read_to_string(&manifest).unwrap()).unwrap();
        assert_eq!(on_disk.changes, m.changes);
        let first = m.changes.iter().find(|c| c.role == "damage").unwrap();
        assert!(
            first.field.starts_with(field),
            "{extra:?}: manifest names {} not {field}",
            first.field
        );
        common::assert_changes_match(&base, &image, &m);
        // A rerun with the same seed on a fresh copy makes the same change.
        let again = tmp.path().join("again.img");
        std::fs::write(&again, &base).unwrap();
        let mut argv2 = argv.clone();
        argv2[1] = again.to_str().unwrap();
        let m2 = corrupt::run(&ffsck_lab::parse_args(&argv2).unwrap()).unwrap();
        assert_eq!(m2.changes, m.changes, "{extra:?} is not reproducible");

        assert!(
            common::finds_problem(&e2fsck, &image),
            "{extra:?}: e2fsck -fn found nothing ({})",
            first.field
        );
        if let Some(ff) = &ffsck {
            if !common::finds_problem(ff, &image) {
                missed.push(format!("{extra:?}"));
            }
        }
    }
    assert!(missed.is_empty(), "ffsck -fn found nothing for: {missed:?}");
}

#[test]
fn bad_field_names_are_clear_errors() {
    if !have_tools() {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    build(tmp.path(), "e.img", "dirs", "200", "1");
    let image = tmp.path().join("e.img");
    let manifest = tmp.path().join("e.json");
    for (field, want) in [
        ("sb.s_nonsense", "no field `s_nonsense`"),
        ("gd[99999].bg_flags", "does not exist"),
        ("inode[0].i_mode", "does not exist"),
        ("extent[2][7].ee_len", "4 entries"),
        ("bogus.x", "unknown structure"),
    ] {
        let args: CorruptArgs = ffsck_lab::parse_args(&[
            "--image",
            image.to_str().unwrap(),
            "--field",
            field,
            "--op",
            "add",
            "--manifest",
            manifest.to_str().unwrap(),
        ])
        .unwrap();
        let err = format!("{:#}", corrupt::run(&args).unwrap_err());
        assert!(err.contains(want), "{field}: {err}");
    }
}
