//! Repairs whose first fixes cause more findings (issue 22, "repairs that converge"): the
//! `..` of a cleared directory's children, their reconnection and the counts are fixed in the
//! same run, and the repair is committed because the result checks clean.

use crate::common;

use std::ffi::OsStr;

/// `ffsck -fy` repairs in one run (no "nothing was written" refusal) and leaves e2fsck clean.
fn assert_converges(t: &common::Tools, img: &common::Image, what: &str) {
    common::assert_repaired(t, img, what);
    let again = common::ffsck(&[OsStr::new("-fn"), img.path.as_os_str()]);
    assert!(
        !again.stdout.contains("nothing was written"),
        "{what}: {}",
        again.stdout
    );
}

#[test]
fn a_zeroed_directory_with_subdirectories_is_repaired_in_one_run() {
    let Some(t) = common::tools() else { return };
    let img = common::mkfs(&t, "ext4", &[], "8M");
    // `/c` holds `/c/d` (which holds `/c/d/e`): the child's `..` names the zeroed inode.
    let c = common::inode_of(&t, &img.path, "/c");
    common::debugfs_w(&t, &img.path, &format!("clri <{c}>"));
    assert_converges(&t, &img, "clri of /c");
    // The subdirectory lives on in /lost+found, with its own subdirectory.
    let root = common::debugfs_r(&t, &img.path, "ls -p /");
    // (`ls -p` lists cleared entries too, with inode 0.)
    let live_c = root
        .lines()
        .any(|l| l.contains("/c/") && !l.starts_with("/0/"));
    assert!(!live_c, "/c is gone: {root}");
    let lpf = common::debugfs_r(&t, &img.path, "ls -p /lost+found");
    assert!(
        lpf.contains("/#"),
        "the child of /c is in /lost+found: {lpf}"
    );
}

#[test]
fn an_entry_naming_a_freed_directory_is_repaired_in_one_run() {
    let Some(t) = common::tools() else { return };
    let img = common::mkfs(&t, "ext4", &[], "8M");
    // The inode is marked free in its bitmap with a zero dtime: the entry names a deleted
    // inode, and the subdirectories' `..` too.
    common::debugfs_w(&t, &img.path, "sif /c links_count 0");
    assert_converges(&t, &img, "links_count 0 on /c");
}

/// A 64 KiB-block file system (record lengths of a whole block do not fit in 16 bits).
fn mkfs_64k(t: &common::Tools) -> common::Image {
    common::mkfs(t, "ext4", &["-b", "65536"], "48M")
}

#[test]
fn a_second_link_to_a_directory_is_dropped_with_64k_blocks() {
    let Some(t) = common::tools() else { return };
    let img = mkfs_64k(&t);
    // `/a/loop` names `/c/d` too: one of the two entries is dropped and `..` follows.
    common::debugfs_w(&t, &img.path, "link /c/d /a/loop");
    assert_converges(&t, &img, "second link to /c/d (64 KiB blocks)");
    // Whichever entry stays, the directory keeps its subdirectory and files.
    let kept =
        ["/c/d/e", "/a/loop/e"].map(|p| common::debugfs_r(&t, &img.path, &format!("ls -p {p}")));
    assert!(
        kept.iter().any(|l| l.contains("/file")),
        "the directory keeps its files: {kept:?}"
    );
}

#[test]
fn an_unlinked_directory_is_reconnected_with_64k_blocks() {
    let Some(t) = common::tools() else { return };
    let img = mkfs_64k(&t);
    let c = common::inode_of(&t, &img.path, "/c");
    common::debugfs_w(&t, &img.path, "unlink /c");
    assert_converges(&t, &img, "unlink /c (64 KiB blocks)");
    let lpf = common::debugfs_r(&t, &img.path, "ls -p /lost+found");
    assert!(
        lpf.contains(&format!("/#{c}/")),
        "/c is in /lost+found: {lpf}"
    );
}

#[test]
fn a_name_longer_than_its_record_drops_only_that_entry() {
    let Some(t) = common::tools() else { return };
    let img = common::mkfs(&t, "ext2", &["-b", "1024"], "8M");
    let before = common::debugfs_r(&t, &img.path, "ls /c/d/e");
    // The first entry after `.` and `..` (offset 24) claims a 255-byte name in its 12-16
    // byte record: the name length is the damage, the entries after it are sound.
    let blk = common::bmap(&t, &img.path, "/c/d/e", 0);
    common::patch(&img.path, blk * 1024 + 24 + 6, &[255]);
    assert_converges(&t, &img, "name_len 255 in /c/d/e");
    let after = common::debugfs_r(&t, &img.path, "ls /c/d/e");
    let names = |s: &str| -> Vec<String> {
        s.split_whitespace()
            .filter(|w| w.starts_with("file"))
            .map(String::from)
            .collect()
    };
    let (was, now) = (names(&before), names(&after));
    assert_eq!(
        now.len() + 1,
        was.len(),
        "one entry dropped: {was:?} -> {now:?}"
    );
    assert!(now.iter().all(|n| was.contains(n)), "{was:?} -> {now:?}");
}

#[test]
fn a_reconnected_directory_gets_its_dotdot_in_the_same_round() {
    let Some(t) = common::tools() else { return };
    let img = common::mkfs(&t, "ext4", &[], "8M");
    let c = common::inode_of(&t, &img.path, "/c");
    common::debugfs_w(&t, &img.path, "unlink /c");
    let run = common::ffsck(&[OsStr::new("-fy"), img.path.as_os_str()]);
    assert_eq!(run.code(), 1, "{}{}", run.stdout, run.stderr);
    // As e2fsck: the reconnection points `..` at /lost+found and moves the parents' counts,
    // with no question of its own.
    assert!(
        run.stdout.contains("Unconnected directory"),
        "{}",
        run.stdout
    );
    assert!(
        !run.stdout.contains("'..' in") && !run.stdout.contains("ref count"),
        "{}",
        run.stdout
    );
    let (code, out) = common::e2fsck_n(&t, &img.path);
    assert_eq!(code, 0, "{out}");
    let st = common::debugfs_r(&t, &img.path, &format!("ls -p /lost+found/#{c}"));
    assert!(st.contains("/..") || st.contains("/d/"), "{st}");
}

#[test]
fn a_directory_hole_behind_the_indirect_block_is_filled() {
    let Some(t) = common::tools() else { return };
    let img = common::mkfs(&t, "ext2", &["-b", "1024"], "8M");
    // 15 blocks: block 13 is mapped through the single indirect block; punch it out.
    let mut cmds = vec!["expand_dir /a/emptydir"; 14];
    cmds.push("punch /a/emptydir 13 13");
    common::debugfs_script(&t, &img, &cmds);
    let st = common::debugfs_r(&t, &img.path, "stat /a/emptydir");
    assert!(
        st.contains("(IND)") && st.contains("(14)"),
        "test setup\n{st}"
    );
    assert_converges(&t, &img, "hole at block 13 of /a/emptydir");
}

/// A rebuilt resize inode and a cloned block in the same round take different blocks: the
/// clone's copy is marked in use before the resize inode looks for its double-indirect block.
/// (They took the same one: the copy was overwritten by the resize inode's map, and the next
/// round cloned that map into the file.)
#[test]
fn a_rebuilt_resize_inode_does_not_take_a_cloned_block() {
    let Some(t) = common::tools() else { return };
    let img = common::mkfs(&t, "ext3", &["-b", "4096"], "16M");
    let f2 = common::bmap(&t, &img.path, "/a/f2", 0);
    let f1 = common::inode_of(&t, &img.path, "/a/f1");
    common::debugfs_script(
        &t,
        &img,
        &[
            "sif <7> block[DIND] 99999",
            &format!("sif <{f1}> block[0] {f2}"),
        ],
    );
    let run = common::assert_one_run_repairs(&t, &img, "resize inode and a shared block", &[1]);
    assert!(
        run.stdout
            .contains("Resize inode not valid.  Recreate? yes"),
        "{}",
        run.stdout
    );
    // /a/f1 holds its own copy of the block it shared with /a/f2.
    let (a, b) = (
        common::dump(&t, &img, "/a/f1"),
        common::dump(&t, &img, "/a/f2"),
    );
    assert_eq!(a[..4096], b[..4096], "{}", run.stdout);
    assert_ne!(common::bmap(&t, &img.path, "/a/f1", 0), f2);
}

#[test]
fn a_block_mapped_directory_with_holes_past_its_single_indirect_block_is_filled() {
    let Some(t) = common::tools() else { return };
    // 1 KiB blocks: the data runs of `/sparse`, 64 KiB apart, reach past the 268 blocks the
    // direct and single indirect slots map, into the double indirect block. Every hole is
    // filled (before, those past the single indirect block were asked about round after
    // round and the repair refused); pass 3A then shrinks the empty directory, as e2fsck's.
    let img = common::mkfs(&t, "ext3", &["-b", "1024"], "8M");
    common::debugfs_w(&t, &img.path, "sif /sparse mode 040755");
    assert_converges(
        &t,
        &img,
        "a sparse file made a directory (ext3, 1 KiB blocks)",
    );
}
