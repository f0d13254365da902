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
