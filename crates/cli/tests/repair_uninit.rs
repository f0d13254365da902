//! Repair of the "uninitialised" marks: descriptor flags and unused-inode counts that cannot be
//! right (pass 0), and directory extents marked unwritten (pass 1). One `ffsck -fy` leaves
//! e2fsck nothing to do and the files keep their contents.

mod common;

use common::{Image, Tools};
use std::ffi::OsStr;
use std::process::Command;

/// Runs several `debugfs -w` requests in one session (`-f`), for damage that leaves the file
/// system unopenable between two requests.
fn debugfs_script(t: &Tools, img: &Image, cmds: &[&str]) {
    let script = img.aux("debugfs.cmds");
    std::fs::write(&script, cmds.join("\n") + "\n").unwrap();
    let out = Command::new(&t.debugfs)
        .arg("-w")
        .arg("-f")
        .arg(&script)
        .arg(&img.path)
        .output()
        .unwrap();
    assert!(out.status.success(), "test setup: debugfs {cmds:?} failed");
}

/// `ffsck -fy` exits 1, then e2fsck and a second ffsck find nothing, and /a/f1 is intact.
fn assert_repaired(t: &Tools, img: &Image, what: &str) {
    // (e2fsck -n reports some of these and still exits 0: look at what it says.)
    let (_, out) = common::e2fsck_n(t, &img.path);
    assert!(
        out.contains("? no"),
        "{what}: test setup: e2fsck must see the damage\n{out}"
    );
    let run = common::ffsck(&[OsStr::new("-fy"), img.path.as_os_str()]);
    assert_eq!(
        run.code(),
        1,
        "{what}: ffsck -fy\n{}{}",
        run.stdout,
        run.stderr
    );
    let (after, out) = common::e2fsck_n(t, &img.path);
    assert_eq!(
        after, 0,
        "{what}: e2fsck -fn after the repair\n{out}\n{}",
        run.stdout
    );
    let again = common::ffsck(&[OsStr::new("-fn"), img.path.as_os_str()]);
    assert_eq!(
        again.code(),
        0,
        "{what}: second ffsck -fn\n{}",
        again.stdout
    );
    let dumped = img.aux("f1");
    common::debugfs_r(t, &img.path, &format!("dump /a/f1 {}", dumped.display()));
    let want = std::fs::read(img.dir.path().join("tree/a/f1")).unwrap();
    assert!(
        std::fs::read(&dumped).unwrap() == want,
        "{what}: /a/f1 changed"
    );
}

#[test]
fn an_impossible_unused_inode_count_is_reset() {
    let Some(t) = common::tools() else { return };
    let img = common::mkfs(&t, "ext4", &[], "32M");
    debugfs_script(
        &t,
        &img,
        &["set_bg 1 itable_unused 9999", "set_bg 1 checksum calc"],
    );
    assert_repaired(&t, &img, "itable_unused");
}

#[test]
fn uninit_flags_without_the_feature_are_cleared() {
    let Some(t) = common::tools() else { return };
    // Groups 1 (marked block- and inode-uninitialised) and 7 (the last, marked
    // block-uninitialised) on a file system without uninit_bg or metadata_csum.
    let img = common::mkfs(&t, "ext2", &["-b", "1024"], "64M");
    debugfs_script(&t, &img, &["set_bg 1 flags 3", "set_bg 7 flags 2"]);
    let run = common::ffsck(&[OsStr::new("-fn"), img.path.as_os_str()]);
    assert!(
        run.stdout
            .contains("marked uninitialized without the feature")
            && run.stdout.contains("Last group block bitmap uninitialized"),
        "{}",
        run.stdout
    );
    assert_repaired(&t, &img, "uninit flags");
}

#[test]
fn a_directory_extent_marked_unwritten_is_fixed() {
    let Some(t) = common::tools() else { return };
    let img = common::mkfs(&t, "ext4", &["-b", "4096", "-O", "^metadata_csum"], "32M");
    // /a's first extent (right after the 12-byte header in i_block, at inode offset 40):
    // set the unwritten bit of its 16-bit length.
    let imap = common::debugfs_r(&t, &img.path, "imap /a");
    let loc = imap
        .split("located at block ")
        .nth(1)
        .unwrap_or_else(|| panic!("test setup: imap output {imap}"));
    let (block, rest) = loc.split_once(", offset 0x").unwrap();
    let block: u64 = block.trim().parse().unwrap();
    let offset = u64::from_str_radix(rest.trim(), 16).unwrap();
    let len_at = block * 4096 + offset + 40 + 12 + 4;
    let len = common::read_u32(&img.path, len_at) & 0xFFFF;
    assert!(
        len > 0 && len < 0x8000,
        "test setup: /a extent length {len}"
    );
    common::patch(&img.path, len_at, &((len | 0x8000) as u16).to_le_bytes());
    let run = common::ffsck(&[OsStr::new("-fn"), img.path.as_os_str()]);
    assert!(
        run.stdout
            .contains("has extent marked uninitialized at block 0"),
        "{}",
        run.stdout
    );
    assert_repaired(&t, &img, "unwritten directory extent");
}
