//! Questions a repair asks once, or not at all, as e2fsck: a count a round fixes is not
//! changed back by a later one, and the checksum of a bitmap the repair rewrites anyway is
//! not asked about (a bitmap whose checksum alone is wrong still is).

use crate::common;

use common::Tools;

/// Every "Inode N ref count is A, should be B" line of `out`, in order.
fn count_lines(out: &str) -> Vec<&str> {
    out.lines()
        .filter(|l| l.starts_with("Inode ") && l.contains(" ref count is "))
        .collect()
}

/// `mke2fs -t ext4 -O metadata_csum` with 1 KiB blocks and 1024 blocks a group (the tree in
/// group 0, group 1's block bitmap in use), settled by e2fsck (whose pass 3A would otherwise
/// rewrite the bitmaps of any repair).
fn small_groups(t: &Tools) -> common::Image {
    let img = common::mkfs(
        t,
        "ext4",
        &["-O", "metadata_csum", "-b", "1024", "-g", "1024"],
        "16M",
    );
    common::settle(t, &img.path);
    img
}

/// Group 1's block bitmap checksum made wrong (its descriptor's own checksum kept right).
fn bad_bitmap_checksum(t: &Tools, img: &common::Image) {
    common::debugfs_script(
        t,
        img,
        &[
            "set_bg 1 block_bitmap_csum 0x1234",
            "set_bg 1 checksum calc",
        ],
    );
}

#[test]
fn the_roots_count_is_asked_once_when_lost_and_found_is_made() {
    let Some(t) = common::tools() else { return };
    let img = small_groups(&t);
    // The root's count goes wrong (a subdirectory's inode cleared under its entry) and
    // `/lost+found` is gone: pass 3 makes a new one, which links the root once more.
    common::debugfs_w(&t, &img.path, "clri /lost+found");
    common::debugfs_w(&t, &img.path, "clri /many");
    let e2 = common::e2fsck_fy_copy(&t, &img.path);
    let out = common::assert_one_run_repairs(&t, &img, "lost+found and the root", &[1]).stdout;
    let root: Vec<&str> = count_lines(&out)
        .into_iter()
        .filter(|l| l.starts_with("Inode 2 "))
        .collect();
    let want: Vec<&str> = count_lines(&e2)
        .into_iter()
        .filter(|l| l.starts_with("Inode 2 "))
        .collect();
    assert_eq!(want.len(), 1, "test setup: e2fsck asks once\n{e2}");
    assert_eq!(root, want, "{out}");
}

#[test]
fn a_bitmap_the_repair_rewrites_is_not_asked_about_its_checksum() {
    let Some(t) = common::tools() else { return };
    let img = small_groups(&t);
    // A file's inode cleared: its blocks (in group 0) and inode are freed by the repair, so
    // both bitmaps are rewritten; group 1's block bitmap checksum is wrong too.
    common::debugfs_w(&t, &img.path, "clri /a/f1");
    bad_bitmap_checksum(&t, &img);
    let e2 = common::e2fsck_fy_copy(&t, &img.path);
    assert!(
        e2.contains("Block bitmap differences") && !e2.contains("does not match checksum"),
        "test setup: e2fsck fixes differences and asks nothing of checksums\n{e2}"
    );
    let out = common::assert_one_run_repairs(&t, &img, "bitmaps rewritten", &[1]).stdout;
    assert!(!out.contains("does not match checksum"), "{out}");
}

#[test]
fn a_bitmap_whose_checksum_alone_is_wrong_is_still_fixed() {
    let Some(t) = common::tools() else { return };
    let img = small_groups(&t);
    bad_bitmap_checksum(&t, &img);
    let e2 = common::e2fsck_fy_copy(&t, &img.path);
    let line = "Group 1 block bitmap does not match checksum";
    assert!(e2.contains(line), "test setup\n{e2}");
    let out = common::assert_one_run_repairs(&t, &img, "checksum only", &[1]).stdout;
    assert!(out.contains(line), "{out}");
}

#[test]
fn a_bitmap_whose_padding_is_set_is_not_asked_about_its_checksum() {
    let Some(t) = common::tools() else { return };
    // 16000 KiB: the last group (15) holds 639 blocks, its bitmap's bits 639.. are padding.
    let img = common::mkfs(
        &t,
        "ext4",
        &["-O", "metadata_csum", "-b", "1024", "-g", "1024"],
        "16000K",
    );
    common::settle(&t, &img.path);
    let stats = common::debugfs_r(&t, &img.path, "stats");
    let bitmap: u64 = stats
        .split("Group 15: block bitmap at ")
        .nth(1)
        .and_then(|s| s.split(',').next())
        .and_then(|s| s.trim().parse().ok())
        .expect("test setup: group 15's block bitmap");
    // Padding bytes cleared (the bitmap's checksum no longer matches either).
    common::patch(&img.path, bitmap * 1024 + 100, &[0u8; 28]);
    let e2 = common::e2fsck_fy_copy(&t, &img.path);
    assert!(
        e2.contains("Padding at end of block bitmap") && !e2.contains("does not match checksum"),
        "test setup\n{e2}"
    );
    let out = common::assert_one_run_repairs(&t, &img, "padding", &[1]).stdout;
    assert!(out.contains("Padding at end of block bitmap"), "{out}");
    assert!(!out.contains("does not match checksum"), "{out}");
}
