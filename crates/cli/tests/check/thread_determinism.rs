//! Determinism: a check of an image with many corruptions gives identical findings (same
//! order, same messages), summary and exit code at --threads 1, 2 and 4, pipelined (pass 2
//! checking directory blocks while pass 1 scans, `--pipeline`) or not (the default), and
//! with the inode tables read by one ordered stream (`--io sequential`) or by each worker
//! (`--io parallel`).

use crate::common;

use common::{Image, Tools};

fn compare_thread_counts(img: &Image) {
    // The reference: one thread, pass 2 strictly after pass 1.
    let base = common::check_n(&img.path, 1);
    println!("--threads 1:\n{}", base.describe());
    assert_eq!(
        base.code(),
        4,
        "the corrupted image should leave errors:\n{}",
        base.describe()
    );
    assert!(
        base.findings().len() >= 8,
        "expected many findings:\n{}",
        base.describe()
    );
    let runs: [(usize, &[&str]); 5] = [
        (1, &["--pipeline"]),
        (2, &["--pipeline"]),
        (4, &["--pipeline"]),
        (2, &[]),
        (4, &[]),
    ];
    for (n, extra) in runs {
        let c = common::check_n_with(&img.path, n, extra);
        let n = format!("{n} {}", extra.join(" "));
        assert_eq!(c.code(), base.code(), "exit code at --threads {n}");
        if c.json["findings"] != base.json["findings"] {
            panic!(
                "findings differ between --threads 1 and --threads {n}:\n--- 1:\n{}--- {n}:\n{}",
                base.describe(),
                c.describe()
            );
        }
        assert_eq!(
            c.json["summary"], base.json["summary"],
            "summary at --threads {n}"
        );
        assert_eq!(
            c.json["fatal"], base.json["fatal"],
            "fatal at --threads {n}"
        );
    }
}

/// `--io sequential` (one ordered stream reads the inode tables) and `--io parallel` (each
/// worker reads its own) give the same findings, summary and exit code at 1 and 2 threads.
fn compare_io_plans(img: &Image) {
    let base = common::check_n_with(&img.path, 1, &["--io", "parallel"]);
    assert_eq!(base.code(), 4, "{}", base.describe());
    let runs: [(usize, &[&str]); 4] = [
        (1, &["--io", "sequential"]),
        (2, &["--io", "sequential"]),
        (2, &["--io", "parallel"]),
        (2, &["--io", "sequential", "--pipeline"]),
    ];
    for (n, extra) in runs {
        let c = common::check_n_with(&img.path, n, extra);
        let what = format!("--threads {n} {}", extra.join(" "));
        assert_eq!(c.code(), base.code(), "exit code at {what}");
        if c.json["findings"] != base.json["findings"] {
            panic!(
                "findings differ between --io parallel --threads 1 and {what}:\n--- base:\n{}--- {what}:\n{}",
                base.describe(),
                c.describe()
            );
        }
        assert_eq!(c.json["summary"], base.json["summary"], "summary at {what}");
        assert_eq!(c.json["fatal"], base.json["fatal"], "fatal at {what}");
    }
}

fn corrupt_common(t: &Tools, img: &Image) {
    for cmd in [
        "sif /a/f1 blocks 999",
        "sif /a/f2 dtime 12345678",
        "clri /a/f6",
        "sif /a/f8 links_count 5",
        "unlink /a/f9",
        "freei /a/f11",
        "unlink /a/emptydir",
        "sif /c/d/e links_count 7",
        "set_inode_field /a/f7 mode 0060644",
    ] {
        common::debugfs_w(t, &img.path, cmd);
    }
    let b = common::bmap(t, &img.path, "/a/f10", 0);
    common::debugfs_w(t, &img.path, &format!("freeb {b}"));
}

#[test]
fn ext4_many_corruptions() {
    let Some(t) = common::tools() else { return };
    // 1 KiB blocks, 8 groups: enough groups for the passes to split work.
    let img = common::mkfs(&t, "ext4", &["-b", "1024"], "64M");
    corrupt_common(&t, &img);
    let b = common::bmap(&t, &img.path, "/a/f5", 0);
    common::debugfs_w(&t, &img.path, &format!("sif /a/f4 block[5] {b}")); // multiply-claimed
    common::debugfs_w(&t, &img.path, "sif /a/f3 block[5] 99999999"); // bad extent start
    common::debugfs_w(&t, &img.path, "sif /a size 1");
    common::debugfs_w(&t, &img.path, "set_bg 3 free_blocks_count 7");
    compare_thread_counts(&img);
    compare_io_plans(&img);
}

#[test]
fn ext2_many_corruptions() {
    let Some(t) = common::tools() else { return };
    let img = common::mkfs(&t, "ext2", &["-b", "1024"], "64M");
    corrupt_common(&t, &img);
    let b = common::bmap(&t, &img.path, "/a/f5", 0);
    common::debugfs_w(&t, &img.path, &format!("sif /a/f4 block[0] {b}"));
    common::debugfs_w(&t, &img.path, &format!("sif /a/f12 block[1] {b}"));
    common::debugfs_w(&t, &img.path, "sif /a/f3 block[2] 99999999");
    compare_thread_counts(&img);
}

/// Many small groups and directories whose entries name inodes in other groups (earlier and
/// later ones), so a pipelined check both checks blocks early and defers blocks whose entries
/// point past the groups scanned so far; corruptions make those entries findings, and a
/// directory hard link makes the order of the merge matter.
#[test]
fn ext4_entries_across_groups() {
    let Some(t) = common::tools() else { return };
    let dir = tempfile::tempdir().unwrap();
    let tree = dir.path().join("tree");
    for d in 0..48 {
        let dd = tree.join(format!("d{d:02}"));
        std::fs::create_dir_all(dd.join("sub")).unwrap();
        for f in 0..24 {
            let len = (d * 31 + f * 17) % 3000;
            std::fs::write(dd.join(format!("f{f:02}")), vec![b'x'; len]).unwrap();
        }
    }
    let path = dir.path().join("fs.img");
    std::fs::File::create(&path).unwrap();
    let out = std::process::Command::new(&t.mke2fs)
        .args(["-q", "-F", "-t", "ext4", "-b", "1024", "-N", "2048", "-d"])
        .arg(&tree)
        .arg(&path)
        .arg("64M")
        .env("MKE2FS_SYNC", "0")
        .output()
        .unwrap();
    assert!(out.status.success(), "mke2fs: {out:?}");
    let img = Image { dir, path };
    for cmd in [
        "link /d47/f01 /d00/late",  // an early directory names a late inode
        "link /d01/f01 /d46/early", // a late directory names an early inode
        "link /d40 /d02/dirlink",   // a second link to a directory
        "link /d03 /d45/dirlink2",
        "freei /d41/f03",
        "clri /d44/f10",
        "sif /d12/f01 links_count 3",
        "sif /d43/f05 mode 0010644",
        "unlink /d30/sub",
        "sif /d06/f06 dtime 12345",
    ] {
        common::debugfs_w(&t, &img.path, cmd);
    }
    compare_thread_counts(&img);
    compare_io_plans(&img);
}

/// An htree directory whose block 0 (its root) is unmapped: a pipelined pass 2 must size the
/// index from every block pass 1 listed, the hole included, as pass 2 proper does (it once
/// dropped the holes first, and judged the index's other blocks against a smaller tree: the
/// in-process fuzzer's "findings differ in the pipeline").
#[test]
fn ext4_htree_with_its_root_unmapped() {
    let Some(t) = common::tools() else { return };
    let img = common::mkfs(&t, "ext4", &["-b", "1024"], "16M");
    common::index_many(&t, &img.path);
    common::debugfs_w(&t, &img.path, "punch /many 0 0");
    compare_thread_counts(&img);
}
