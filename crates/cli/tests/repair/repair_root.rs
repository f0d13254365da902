//! Repair of the root directory: one `ffsck -fy` recreates a root inode that was wiped or is
//! not a directory, and the directories that hung below it are reconnected to a new
//! `/lost+found` with their files' contents intact.

use crate::common;

use common::{Image, Tools};

/// The root is a directory again, and `/a/f6` is kept as `/lost+found/#A/f6`.
fn assert_tree_kept(t: &Tools, img: &Image, a: u64) {
    let st = common::debugfs_r(t, &img.path, "stat <2>");
    assert!(st.contains("Type: directory"), "{st}");
    let got = common::dump(t, img, &format!("/lost+found/#{a}/f6"));
    let exp = common::tree_file(img, "a/f6");
    assert!(got == exp, "/a/f6 not kept under /lost+found/#{a}");
}

#[test]
fn a_wiped_root_is_recreated() {
    let Some(t) = common::tools() else { return };
    for fs_type in ["ext4", "ext2"] {
        let img = common::mkfs(&t, fs_type, &[], "16M");
        let a = common::inode_of(&t, &img.path, "/a");
        common::debugfs_w(&t, &img.path, "clri <2>");
        let out = common::assert_one_run_repairs(&t, &img, fs_type, &[1, 3]).stdout;
        assert!(out.contains("Root inode not allocated"), "{out}");
        assert_tree_kept(&t, &img, a);
    }
}

#[test]
fn a_root_that_is_not_a_directory_is_recreated() {
    let Some(t) = common::tools() else { return };
    for fs_type in ["ext4", "ext2"] {
        let img = common::mkfs(&t, fs_type, &[], "16M");
        let a = common::inode_of(&t, &img.path, "/a");
        common::debugfs_w(&t, &img.path, "sif <2> mode 0100644");
        let out = common::assert_one_run_repairs(&t, &img, fs_type, &[1, 3]).stdout;
        assert!(out.contains("Root inode is not a directory"), "{out}");
        assert_tree_kept(&t, &img, a);
    }
}

/// A root whose extent header is corrupt is cleared, as e2fsck clears it (the clearing fix
/// skipped reserved inodes, so the same questions came back every round and nothing was
/// fixed). The entries `..` of its children are cleared, which in an htree root must
/// recompute the root's checksum (else the next round finds the index broken), and pass 3
/// makes a new root.
#[test]
fn a_root_with_a_corrupt_extent_header_is_cleared_and_made_again() {
    let Some(t) = common::tools() else { return };
    let img = common::mkfs(&t, "ext4", &["-b", "1024", "-O", "metadata_csum"], "16M");
    // `/many` gets an htree index, so its `..` is in an htree root.
    common::index_many(&t, &img.path);
    let a = common::inode_of(&t, &img.path, "/a");
    common::debugfs_w(&t, &img.path, "sif <2> block[0] 0x1234");
    let out = common::assert_one_run_repairs(&t, &img, "corrupt root extent header", &[1]).stdout;
    assert!(
        out.contains("Root inode not allocated.  Allocate? yes"),
        "{out}"
    );
    assert!(!out.contains("HTREE"), "{out}");
    assert_tree_kept(&t, &img, a);
}
