//! A journal superblock that records an error (`s_errno`, the kernel's note of a failure) in a
//! journal that needs no replay. e2fsck clears it silently under `-y`; under `-n` its own
//! write of the cleared superblock fails, aborting the run (exit 9) unless its resize-inode
//! check swallows the failure first (exit 0). ffsck reports it under `-n` where e2fsck aborts,
//! stays quiet where it does not, and clears it under `-y`, after which `e2fsck -fn` is clean.

use crate::common;

use std::ffi::OsStr;
use std::path::Path;

/// `s_errno`'s offset in the journal superblock (big-endian, as every jbd2 field).
const S_ERRNO: u64 = 0x20;

fn with_errno(fs: &str, args: &[&str], size: &str, block: u64) -> Option<common::Image> {
    let t = common::tools()?;
    let img = common::mkfs(&t, fs, args, size);
    common::settle(&t, &img.path);
    let jblk = common::bmap(&t, &img.path, "<8>", 0);
    common::patch(&img.path, jblk * block + S_ERRNO, &(-5i32).to_be_bytes());
    Some(img)
}

fn code(path: &Path, args: &[&str]) -> i32 {
    let mut a: Vec<&OsStr> = args.iter().map(OsStr::new).collect();
    a.push(path.as_os_str());
    let run = common::ffsck(&a);
    common::assert_no_panic(&run);
    run.code()
}

/// The check's verdict and the repair, against e2fsck's: `e2fsck_n` is e2fsck's `-fn` exit on
/// this geometry, `ffsck_n` the one ffsck must give.
fn repaired_like_e2fsck(img: &common::Image, e2fsck_n: i32, ffsck_n: i32) {
    let t = common::tools().unwrap();
    let (e2, out) = common::e2fsck_n(&t, &img.path);
    assert_eq!(e2, e2fsck_n, "test setup: e2fsck -fn\n{out}");
    let before = common::read_all(&img.path);
    let run = common::ffsck(&[OsStr::new("-fn"), img.path.as_os_str()]);
    assert_eq!(run.code(), ffsck_n, "ffsck -fn\n{}", run.stdout);
    assert_eq!(
        run.stdout.contains("records an error (-5)"),
        ffsck_n != 0,
        "{}",
        run.stdout
    );
    common::assert_same_bytes(&before, &common::read_all(&img.path), "-n");

    let theirs = common::e2fsck_fy_copy(&t, &img.path);
    let run = common::ffsck(&[OsStr::new("-fy"), img.path.as_os_str()]);
    // e2fsck's fix is silent and exits 0 (it only says the file system was modified).
    assert_eq!(run.code(), 0, "{}\ne2fsck: {theirs}", run.stdout);
    assert!(!run.stdout.contains("records an error ("), "{}", run.stdout);
    assert!(
        run.stdout.contains("FILE SYSTEM WAS MODIFIED"),
        "{}",
        run.stdout
    );
    let (after, out) = common::e2fsck_n(&t, &img.path);
    assert_eq!(after, 0, "e2fsck -fn after ffsck -fy\n{out}");
    assert_eq!(code(&img.path, &["-fn"]), 0, "ffsck -fn after ffsck -fy");
}

/// No reserved GDT blocks: e2fsck's cache keeps the dirty journal superblock until pass 1's
/// inode scan, whose failed write-back aborts it (exit 9).
#[test]
fn errno_seen_where_e2fsck_aborts() {
    let Some(img) = with_errno("ext3", &["-b", "4096", "-I", "128"], "16M", 4096) else {
        return;
    };
    repaired_like_e2fsck(&img, 9, 4);
}

/// Reserved GDT blocks enough for e2fsck's resize-inode check to evict the journal superblock
/// from its 8-block cache: the failed write makes it call the resize inode invalid, and the
/// run goes on to exit 0. ffsck's `-n` verdict follows.
#[test]
fn errno_swallowed_by_the_resize_check() {
    let Some(img) = with_errno("ext4", &["-b", "1024"], "8M", 1024) else {
        return;
    };
    repaired_like_e2fsck(&img, 0, 0);
}

/// Under `-n` the file system is left as it was, journal superblock included; `-p` clears the
/// error as `-y` does.
#[test]
fn errno_cleared_by_preen() {
    let Some(img) = with_errno("ext3", &["-b", "4096", "-I", "128"], "16M", 4096) else {
        return;
    };
    let t = common::tools().unwrap();
    assert_eq!(code(&img.path, &["-fp"]), 0);
    let (after, out) = common::e2fsck_n(&t, &img.path);
    assert_eq!(after, 0, "e2fsck -fn after ffsck -fp\n{out}");
}
