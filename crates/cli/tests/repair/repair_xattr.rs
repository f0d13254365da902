//! Extended-attribute repairs: a corrupt attribute block or in-inode area is dropped (the
//! file itself stays), a block whose only fault is its checksum or its reference count is
//! rewritten and keeps its attributes. After one `ffsck -fy`, e2fsck finds nothing.

use crate::common;

use common::{Image, Tools};
use std::ffi::OsStr;

/// An ext4 image (1 KiB blocks, 256-byte inodes, metadata_csum) with `/x`: content "hello",
/// `user.small` in the inode and `user.big` (600 bytes) in an attribute block. Returns the
/// image, the inode's byte offset and the attribute block.
fn image_with_xattrs(t: &Tools) -> (Image, u64, u64) {
    let img = common::mkfs(
        t,
        "ext4",
        &["-I", "256", "-b", "1024", "-O", "metadata_csum"],
        "8M",
    );
    let (body, big) = (img.aux("body"), img.aux("big"));
    std::fs::write(&body, b"hello").unwrap();
    std::fs::write(&big, &"0123456789abcdef".repeat(40).as_bytes()[..600]).unwrap();
    common::debugfs_script(
        t,
        &img,
        &[
            &format!("write {} /x", body.display()),
            "ea_set /x user.small tiny",
            &format!("ea_set -f {} /x user.big", big.display()),
        ],
    );
    let acl = common::debugfs_number(t, &img.path, "stat /x", "File ACL:");
    let imap = common::debugfs_r(t, &img.path, "imap /x");
    let block = imap
        .split("located at block ")
        .nth(1)
        .and_then(|s| s.split(',').next())
        .and_then(|s| s.trim().parse::<u64>().ok())
        .expect("imap block");
    let offset = imap
        .split("offset 0x")
        .nth(1)
        .and_then(|s| u64::from_str_radix(s.trim(), 16).ok())
        .expect("imap offset");
    assert_ne!(acl, 0, "test setup: user.big must live in a block");
    let attrs = common::debugfs_r(t, &img.path, "ea_list /x");
    assert!(
        attrs.contains("user.small") && attrs.contains("user.big"),
        "{attrs}"
    );
    (img, block * 1024 + offset, acl)
}

/// One `ffsck -fy` reports `want`, exits 1, leaves e2fsck and a second ffsck nothing to say,
/// and `/x` keeps its content. Returns the attribute listing of `/x` afterwards.
fn repair(t: &Tools, img: &Image, want: &str) -> String {
    let (before, out) = common::e2fsck_n(t, &img.path);
    assert_ne!(before, 0, "test setup: e2fsck must see the damage\n{out}");
    let run = common::ffsck(&[OsStr::new("-fy"), img.path.as_os_str()]);
    assert!(run.stdout.contains(want), "{want}\n{}", run.stdout);
    assert_eq!(run.code(), 1, "ffsck -fy\n{}{}", run.stdout, run.stderr);
    let (after, out) = common::e2fsck_n(t, &img.path);
    assert_eq!(
        after, 0,
        "e2fsck -fn after the repair\n{out}\n{}",
        run.stdout
    );
    let again = common::ffsck(&[OsStr::new("-fn"), img.path.as_os_str()]);
    assert_eq!(again.code(), 0, "second ffsck -fn\n{}", again.stdout);
    assert_eq!(
        common::debugfs_r(t, &img.path, "cat /x").trim_end(),
        "hello",
        "/x lost its content"
    );
    common::debugfs_r(t, &img.path, "ea_list /x")
}

#[test]
fn a_bad_hash_in_the_inode_drops_the_in_inode_attributes() {
    let Some(t) = common::tools() else { return };
    let (img, inode, _) = image_with_xattrs(&t);
    // Past the classic inode: i_extra_isize (32), the area's magic, then the first entry,
    // whose e_hash is at +12.
    let extra = u64::from(common::read_u32(&img.path, inode + 0x80) & 0xFFFF);
    common::patch(
        &img.path,
        inode + 128 + extra + 4 + 12,
        &0xDEAD_BEEFu32.to_le_bytes(),
    );
    let attrs = repair(&t, &img, "has a hash (3735928559) which is invalid");
    assert!(!attrs.contains("user.small"), "{attrs}");
    assert!(
        attrs.contains("user.big"),
        "the block's attributes stay: {attrs}"
    );
}

#[test]
fn a_block_with_a_bad_magic_is_detached() {
    let Some(t) = common::tools() else { return };
    let (img, _, acl) = image_with_xattrs(&t);
    common::patch(&img.path, acl * 1024, &0x1234_5678u32.to_le_bytes());
    let attrs = repair(
        &t,
        &img,
        &format!("has a bad extended attribute block {acl}"),
    );
    assert_eq!(
        common::debugfs_number(&t, &img.path, "stat /x", "File ACL:"),
        0
    );
    assert!(!attrs.contains("user.big"), "{attrs}");
    assert!(
        attrs.contains("user.small"),
        "the inode's attributes stay: {attrs}"
    );
}

#[test]
fn a_block_whose_only_fault_is_its_checksum_is_rewritten() {
    let Some(t) = common::tools() else { return };
    let (img, _, acl) = image_with_xattrs(&t);
    let stored = common::read_u32(&img.path, acl * 1024 + 0x10);
    common::patch(&img.path, acl * 1024 + 0x10, &(!stored).to_le_bytes());
    let attrs = repair(&t, &img, "passes checks, but checksum does not match block");
    assert_eq!(common::read_u32(&img.path, acl * 1024 + 0x10), stored);
    assert!(
        attrs.contains("user.big") && attrs.contains("user.small"),
        "{attrs}"
    );
}

#[test]
fn a_wrong_block_reference_count_is_rewritten() {
    let Some(t) = common::tools() else { return };
    let (img, _, acl) = image_with_xattrs(&t);
    common::patch(&img.path, acl * 1024 + 4, &7u32.to_le_bytes());
    // (The checksum covers the count, so it is reported stale too, and rewritten.)
    let attrs = repair(
        &t,
        &img,
        &format!("block {acl} has reference count 7, should be 1"),
    );
    assert_eq!(common::read_u32(&img.path, acl * 1024 + 4), 1);
    assert!(attrs.contains("user.big"), "{attrs}");
}
