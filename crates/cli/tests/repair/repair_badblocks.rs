//! The bad-blocks inode: inodes in an inode-table block on its list are unreadable (entries
//! naming them are cleared, as e2fsck does), a list naming the list's own inode block is
//! cleared, and an inode 1 with more than a block map is reset.

use crate::common;

use std::ffi::OsStr;

/// The inode-table block holding `path`'s inode, from `debugfs imap`.
fn itable_block(t: &common::Tools, img: &std::path::Path, path: &str) -> u64 {
    let out = common::debugfs_r(t, img, &format!("imap {path}"));
    out.split("located at block ")
        .nth(1)
        .and_then(|s| s.split(|c: char| !c.is_ascii_digit()).next())
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("test setup: no inode location for {path} in\n{out}"))
}

/// Put `blk` on the bad-blocks list (inode 1's only block).
fn mark_bad(t: &common::Tools, img: &common::Image, blk: u64) {
    common::debugfs_script(
        t,
        img,
        &[
            &format!("sif <1> block[0] {blk}"),
            "sif <1> blocks 2",
            "sif <1> size 1024",
        ],
    );
}

#[test]
fn entries_naming_inodes_in_a_bad_inode_table_block_are_cleared() {
    let Some(t) = common::tools() else { return };
    let img = common::mkfs(&t, "ext2", &["-b", "1024"], "8M");
    let victim = "/many/entry-with-a-rather-long-name-059";
    let bad = itable_block(&t, &img.path, victim);
    assert_ne!(
        bad,
        itable_block(&t, &img.path, "/a/f1"),
        "test setup: /a/f1 shares the bad block"
    );
    mark_bad(&t, &img, bad);
    let run = common::ffsck(&[OsStr::new("-fn"), img.path.as_os_str()]);
    assert!(
        run.stdout.contains("located in a bad block"),
        "{}",
        run.stdout
    );
    assert_eq!(run.code(), 4, "{}", run.stdout);
    common::assert_repaired(&t, &img, "inode in a bad inode-table block");
    // The entry is cleared (inode 0, or gone), the block stays on the list.
    let ls = common::debugfs_r(&t, &img.path, "ls -l /many");
    let entry = ls.lines().find(|l| l.contains("name-059"));
    assert!(
        entry.is_none_or(|l| l.trim_start().starts_with("0 ")),
        "{ls}"
    );
    let bb = common::debugfs_r(&t, &img.path, "stat <1>");
    assert!(bb.contains(&bad.to_string()), "{bb}");
}

#[test]
fn a_list_naming_its_own_inode_block_is_cleared() {
    let Some(t) = common::tools() else { return };
    let img = common::mkfs(&t, "ext2", &["-b", "1024"], "8M");
    // Inode 1 lives in the first block of group 0's inode table, with the root.
    let stats = common::debugfs_r(&t, &img.path, "stats");
    let it: u64 = stats
        .split("inode table at ")
        .nth(1)
        .and_then(|s| s.split(|c: char| !c.is_ascii_digit()).next())
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("test setup: no inode table in\n{stats}"));
    mark_bad(&t, &img, it);
    let run = common::ffsck(&[OsStr::new("-fn"), img.path.as_os_str()]);
    assert!(
        run.stdout
            .contains("Bad block list says the bad block list inode is bad"),
        "{}",
        run.stdout
    );
    common::assert_repaired(&t, &img, "bad-blocks list names its own block");
    let bb = common::debugfs_r(&t, &img.path, "stat <1>");
    assert!(!bb.contains(&format!("(0):{it}")), "{bb}");
}

#[test]
fn an_invalid_bad_blocks_inode_is_reset() {
    let Some(t) = common::tools() else { return };
    let img = common::mkfs(&t, "ext2", &["-b", "1024"], "8M");
    common::debugfs_script(&t, &img, &["sif <1> mode 0100644", "sif <1> uid 7"]);
    let run = common::ffsck(&[OsStr::new("-fn"), img.path.as_os_str()]);
    assert!(
        run.stdout.contains("The bad block inode looks invalid"),
        "{}",
        run.stdout
    );
    common::assert_repaired(&t, &img, "invalid bad-blocks inode");
}

#[test]
fn the_primary_superblock_and_descriptors_are_taken_off_the_list() {
    let Some(t) = common::tools() else { return };
    let img = common::mkfs(&t, "ext2", &["-b", "1024"], "8M");
    // Blocks 1 (superblock) and 2 (descriptors), and a free block that stays listed.
    common::debugfs_script(
        &t,
        &img,
        &[
            "sif <1> block[0] 1",
            "sif <1> block[1] 2",
            "sif <1> block[2] 8000",
            "sif <1> blocks 6",
            "sif <1> size 3072",
            "setb 8000",
        ],
    );
    let run = common::ffsck(&[OsStr::new("-fn"), img.path.as_os_str()]);
    for want in [
        "The primary superblock (1) is on the bad block list.",
        "Block 2 in the primary group descriptors is on the bad block list",
    ] {
        assert!(run.stdout.contains(want), "{want}\n{}", run.stdout);
    }
    assert_eq!(run.code(), 4, "{}", run.stdout);
    let run = common::ffsck(&[OsStr::new("-fy"), img.path.as_os_str()]);
    assert_eq!(run.code(), 1, "{}", run.stdout);
    let (e2, out) = common::e2fsck_n(&t, &img.path);
    assert_eq!(e2, 0, "{out}\n{}", run.stdout);
    let again = common::ffsck(&[OsStr::new("-fn"), img.path.as_os_str()]);
    assert_eq!(again.code(), 0, "{}", again.stdout);
    let bb = common::debugfs_r(&t, &img.path, "stat <1>");
    assert!(bb.contains("(2):8000") && bb.contains("TOTAL: 1"), "{bb}");
}
