//! Bitmaps that lost their place (a zero pointer, or one outside the group) get a new block at
//! the end of pass 1 and are rebuilt there, in one `ffsck -fy` run.

use crate::common;

use std::ffi::OsStr;

#[test]
fn misplaced_bitmaps_are_relocated() {
    let Some(t) = common::tools() else { return };
    // One group (8 MiB of 1 KiB blocks), so there are no backup descriptors to fall back on.
    let img = common::mkfs(&t, "ext2", &["-b", "1024"], "8M");
    common::debugfs_script(
        &t,
        &img,
        &["set_bg 0 block_bitmap 0", "set_bg 0 inode_bitmap 20000"],
    );
    let run = common::ffsck(&[OsStr::new("-fn"), img.path.as_os_str()]);
    for want in [
        "Block bitmap for group 0 is not in group.  (block 0)",
        "Inode bitmap for group 0 is not in group.  (block 20000)",
        // e2fsck's hint, once, naming the first backup superblock (1 KiB blocks: 8193).
        "Note: if several inode or block bitmap blocks or part\nof the inode table require \
         relocation, you may wish to try\nrunning ffsck with the '-b 8193' option first.",
    ] {
        assert!(run.stdout.contains(want), "{want}\n{}", run.stdout);
    }
    let run = common::ffsck(&[OsStr::new("-fy"), img.path.as_os_str()]);
    assert_eq!(
        run.stdout.matches("Note: if several").count(),
        1,
        "{}",
        run.stdout
    );
    for want in [
        "Relocating group 0's block bitmap to",
        "Relocating group 0's inode bitmap to",
    ] {
        assert!(run.stdout.contains(want), "{want}\n{}", run.stdout);
    }
    // Both checkers agree the result is clean, and the files survived.
    let (e2, out) = common::e2fsck_n(&t, &img.path);
    assert_eq!(e2, 0, "{out}\n{}", run.stdout);
    let again = common::ffsck(&[OsStr::new("-fn"), img.path.as_os_str()]);
    assert_eq!(again.code(), 0, "{}", again.stdout);
}

#[test]
fn a_bitmap_sharing_a_block_with_other_metadata_is_relocated() {
    let Some(t) = common::tools() else { return };
    let img = common::mkfs(&t, "ext2", &["-b", "1024"], "8M");
    let stats = common::debugfs_r(&t, &img.path, "stats");
    let bb: u64 = stats
        .split("block bitmap at ")
        .nth(1)
        .and_then(|s| s.split(|c: char| !c.is_ascii_digit()).next())
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("test setup: no block bitmap in\n{stats}"));
    common::debugfs_script(&t, &img, &[&format!("set_bg 0 inode_bitmap {bb}")]);
    let run = common::ffsck(&[OsStr::new("-fn"), img.path.as_os_str()]);
    let want = format!("Group 0's inode bitmap at {bb} conflicts with some other fs block");
    assert!(run.stdout.contains(&want), "{want}\n{}", run.stdout);
    common::assert_repaired(&t, &img, "inode bitmap on the block bitmap");
}

/// The first block of group `g`'s inode table, as `debugfs stats` lists it.
fn inode_table_of(t: &common::Tools, img: &std::path::Path, g: u32) -> u64 {
    let stats = common::debugfs_r(t, img, "stats");
    stats
        .split(&format!("Group {g:>2}:"))
        .nth(1)
        .and_then(|s| s.split("inode table at ").nth(1))
        .and_then(|s| s.split(|c: char| !c.is_ascii_digit()).next())
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("no inode table for group {g} in\n{stats}"))
}

#[test]
fn a_missing_inode_table_is_moved_back_into_its_group() {
    let Some(t) = common::tools() else { return };
    // ext2 (tables in their own group) and ext4 (flex_bg: tables anywhere in the flex group).
    for (fstype, per_group) in [("ext2", 8192u64), ("ext4", 8192)] {
        let img = common::mkfs(&t, fstype, &["-b", "1024", "-g", "8192"], "32M");
        let stats = common::debugfs_r(&t, &img.path, "stats");
        let ds = if stats.contains(" 64bit") { 64 } else { 32 };
        common::debugfs_script(&t, &img, &["set_bg 1 inode_table 0"]);
        // The backup descriptors (after the superblock copies of groups 1 and 3) lose it too
        // (debugfs writes them only for some file systems), so no copy knows the old place.
        for backup in [8194u64, 3 * 8192 + 2] {
            common::patch(&img.path, backup * 1024 + ds + 8, &[0; 4]);
        }
        let run = common::ffsck(&[OsStr::new("-fn"), img.path.as_os_str()]);
        let want = "Inode table for group 1 is not in group.  (block 0)\nWARNING: SEVERE DATA LOSS POSSIBLE.";
        assert!(
            run.stdout.contains(want),
            "{fstype}: {want}\n{}",
            run.stdout
        );
        assert_ne!(run.code(), 0, "{fstype}: -fn must report the table");
        let run = common::ffsck(&[OsStr::new("-fy"), img.path.as_os_str()]);
        assert!(
            run.stdout.contains("Relocating group 1's inode table to"),
            "{fstype}\n{}",
            run.stdout
        );
        assert_eq!(run.code() & !1, 0, "{fstype}\n{}", run.stdout);
        let it = inode_table_of(&t, &img.path, 1);
        if fstype == "ext2" {
            assert!((per_group + 1..2 * per_group + 1).contains(&it), "{it}");
        } else {
            assert!(it > 0 && it < 2 * per_group + 1, "{it}");
        }
        let (e2, out) = common::e2fsck_n(&t, &img.path);
        assert_eq!(e2, 0, "{fstype}: {out}\n{}", run.stdout);
        let again = common::ffsck(&[OsStr::new("-fn"), img.path.as_os_str()]);
        assert_eq!(again.code(), 0, "{fstype}: {}", again.stdout);
    }
}

/// The number `debugfs -R "stat <ino>"` prints after `key`.
fn stat_number(t: &common::Tools, img: &std::path::Path, ino: u32, key: &str) -> u64 {
    let out = common::debugfs_r(t, img, &format!("stat <{ino}>"));
    out.split(key)
        .nth(1)
        .and_then(|s| {
            s.split(|c: char| !c.is_ascii_digit())
                .find(|w| !w.is_empty())
        })
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("no {key} for inode {ino} in\n{out}"))
}

/// A one-group bigalloc file system (16 MiB of 4 KiB blocks in 64 KiB clusters) has no backup
/// descriptors: an inode table pointer out of the file system (a flipped high bit) is moved,
/// as e2fsck does. The new table, the new root and the new `/lost+found` each take clusters
/// no other metadata holds, so both checkers find the result clean after one run.
#[test]
fn bigalloc_inode_table_moves_to_a_cluster_of_its_own() {
    let Some(t) = common::tools() else { return };
    let args = ["-O", "bigalloc", "-C", "65536", "-b", "4096"];
    let img = common::mkfs(&t, "ext4", &args, "16M");
    common::debugfs_script(&t, &img, &["set_bg 0 inode_table 2147483682"]);
    let run = common::assert_one_run_repairs(&t, &img, "bigalloc inode table", &[1]);
    assert!(
        run.stdout
            .contains("Inode table for group 0 is not in group.  (block 2147483682)"),
        "{}",
        run.stdout
    );
    assert_eq!(inode_table_of(&t, &img.path, 0) % 16, 0, "{}", run.stdout);
    let root = common::debugfs_r(&t, &img.path, "ls -l /");
    assert!(root.contains("lost+found"), "{root}");
    // A directory of one block still holds one whole cluster (16 blocks of 8 sectors).
    assert_eq!(stat_number(&t, &img.path, 2, "Blockcount:"), 128);
}

/// The resize inode rebuilt on a bigalloc file system takes a cluster of its own for its
/// double-indirect block, and counts it whole in `i_blocks`.
#[test]
fn bigalloc_resize_inode_is_rebuilt_in_a_free_cluster() {
    let Some(t) = common::tools() else { return };
    let args = ["-O", "bigalloc", "-C", "65536", "-b", "4096"];
    let img = common::mkfs(&t, "ext4", &args, "16M");
    common::debugfs_script(&t, &img, &["clri <7>"]);
    let run = common::assert_one_run_repairs(&t, &img, "bigalloc resize inode", &[1]);
    assert!(
        run.stdout
            .contains("Resize inode not valid.  Recreate? yes"),
        "{}",
        run.stdout
    );
    let (_, out) = common::e2fsck_n(&t, &img.path);
    assert!(!out.contains("Multiply-claimed"), "{out}");
    assert_eq!(stat_number(&t, &img.path, 7, "Blockcount:"), 128);
}
