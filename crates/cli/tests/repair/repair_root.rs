//! Repair of the root directory: one `ffsck -fy` recreates a root inode that was wiped or is
//! not a directory, and the directories that hung below it are reconnected to a new
//! `/lost+found` with their files' contents intact.

use crate::common;

use common::{Image, Tools};
use std::ffi::OsStr;

/// `ffsck -fy` exits 1; then `e2fsck -fn` and a second `ffsck -fn` find nothing.
fn assert_one_run_repairs(t: &Tools, img: &Image, what: &str) -> String {
    let (before, _) = common::e2fsck_n(t, &img.path);
    assert_ne!(before, 0, "test setup ({what}): e2fsck must see the damage");
    let run = common::ffsck(&[OsStr::new("-fy"), img.path.as_os_str()]);
    assert!(
        run.code() == 1 || run.code() == 3,
        "{what}: ffsck -fy should fix everything (exit 1)\n{}\n{}",
        run.stdout,
        run.stderr
    );
    let (code, out) = common::e2fsck_n(t, &img.path);
    assert_eq!(code, 0, "{what}: e2fsck -fn after ffsck -fy:\n{out}");
    let again = common::check_n(&img.path, 1);
    assert_eq!(again.code(), 0, "{what}: {}", again.describe());
    run.stdout
}

/// The root is a directory again, and `/a/f6` is kept as `/lost+found/#A/f6`.
fn assert_tree_kept(t: &Tools, img: &Image, a: u64) {
    let st = common::debugfs_r(t, &img.path, "stat <2>");
    assert!(st.contains("Type: directory"), "{st}");
    let out = img.aux("dumped");
    let _ = std::fs::remove_file(&out);
    common::debugfs_r(
        t,
        &img.path,
        &format!("dump /lost+found/#{a}/f6 {}", out.display()),
    );
    let got = std::fs::read(&out).unwrap_or_default();
    let exp = std::fs::read(img.dir.path().join("tree").join("a/f6")).unwrap();
    assert!(got == exp, "/a/f6 not kept under /lost+found/#{a}");
}

#[test]
fn a_wiped_root_is_recreated() {
    let Some(t) = common::tools() else { return };
    for fs_type in ["ext4", "ext2"] {
        let img = common::mkfs(&t, fs_type, &[], "16M");
        let a = common::inode_of(&t, &img.path, "/a");
        common::debugfs_w(&t, &img.path, "clri <2>");
        let out = assert_one_run_repairs(&t, &img, fs_type);
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
        let out = assert_one_run_repairs(&t, &img, fs_type);
        assert!(out.contains("Root inode is not a directory"), "{out}");
        assert_tree_kept(&t, &img, a);
    }
}
