//! Determinism: a check of an image with many corruptions gives identical findings (same
//! order, same messages), summary and exit code at --threads 1, 2 and 4.

mod common;

use common::{Image, Tools};

fn compare_thread_counts(img: &Image) {
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
    for n in [2, 4] {
        let c = common::check_n(&img.path, n);
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
