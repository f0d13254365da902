//! Read-only guarantees: `-n` never changes a byte of the image (clean or corrupted); a forced
//! repair (`-fy`, `-fp`) of a clean file system changes only what e2fsck marks in the primary
//! superblock (the last-check and write times, and its checksum); `-a` without `-f` skips a
//! clean file system and writes nothing.

use crate::common;

use common::now;
use common::{Image, Tools};
use std::ffi::OsStr;

fn corrupted(t: &Tools) -> Image {
    let img = common::mkfs(t, "ext4", &[], "16M");
    common::debugfs_w(t, &img.path, "sif /a/f1 blocks 999");
    common::debugfs_w(t, &img.path, "clri /a/f6");
    common::debugfs_w(t, &img.path, "unlink /a/emptydir");
    common::debugfs_w(t, &img.path, "set_bg 0 free_blocks_count 7");
    img
}

/// Runs ffsck with `flags` on the image and asserts the image is byte-identical afterwards.
fn run_unchanged(img: &Image, flags: &[&str]) -> common::Run {
    let before = common::read_all(&img.path);
    let mut args: Vec<&OsStr> = flags.iter().map(OsStr::new).collect();
    args.push(img.path.as_os_str());
    let run = common::ffsck(&args);
    common::assert_same_bytes(
        &before,
        &common::read_all(&img.path),
        &format!("image after ffsck {flags:?}"),
    );
    run
}

#[test]
fn no_leaves_clean_image_identical() {
    let Some(t) = common::tools() else { return };
    let img = common::mkfs(&t, "ext4", &[], "16M");
    let run = run_unchanged(&img, &["-fn"]);
    assert_eq!(run.code(), 0, "{}", run.stdout);
    // Without -f a clean file system is skipped; still nothing is written.
    let run = run_unchanged(&img, &["-n"]);
    assert_eq!(run.code(), 0, "{}", run.stdout);
}

#[test]
fn no_leaves_corrupted_image_identical() {
    let Some(t) = common::tools() else { return };
    let img = corrupted(&t);
    for threads in ["1", "2"] {
        let run = run_unchanged(&img, &["-fn", "--threads", threads]);
        assert_eq!(run.code(), 4, "{}", run.stdout);
    }
    // Also when the check has to fall back to the backup superblock.
    common::patch(&img.path, 1024, &[0u8; 1024]);
    let run = run_unchanged(&img, &["-fn"]);
    assert_ne!(run.code(), 101);
}

/// A repair of a clean file system marks it checked, as e2fsck does: the primary superblock's
/// last-check and write times become the run's, and nothing else changes but its checksum.
fn clean_marked(flags: &[&str]) {
    let Some(t) = common::tools() else { return };
    let img = common::mkfs(&t, "ext4", &[], "16M");
    // Pass 3A's indexing of the tree's 3-block directory is a change, as e2fsck makes it.
    common::settle(&t, &img.path);
    // A last check long past, so the new one shows.
    common::debugfs_w(&t, &img.path, "ssv lastcheck @1600000000");
    common::debugfs_w(&t, &img.path, "ssv wtime @1600000000");
    let before = common::read_all(&img.path);
    let mut args: Vec<&OsStr> = flags.iter().map(OsStr::new).collect();
    args.push(img.path.as_os_str());
    let start = now();
    let run = common::ffsck(&args);
    let end = now();
    assert_eq!(
        run.code(),
        0,
        "ffsck {flags:?} on a clean image\nstdout:\n{}\nstderr:\n{}",
        run.stdout,
        run.stderr
    );
    let after = common::read_all(&img.path);
    // s_wtime, s_lastcheck and s_checksum of the primary superblock.
    let marked = |i: usize| {
        (1024 + 0x30..1024 + 0x34).contains(&i)
            || (1024 + 0x40..1024 + 0x44).contains(&i)
            || (1024 + 0x3FC..2048).contains(&i)
    };
    assert_eq!(before.len(), after.len());
    let changed: Vec<usize> = (0..before.len())
        .filter(|&i| before[i] != after[i])
        .collect();
    assert!(
        changed.iter().all(|&i| marked(i)),
        "ffsck {flags:?} changed bytes besides the marks: {:?}",
        &changed[..changed.len().min(16)]
    );
    for (field, off) in [("last check", 0x40), ("write time", 0x30)] {
        let t = i64::from(common::read_u32(&img.path, 1024 + off));
        assert!(
            t >= start - 60 && t <= end + 60,
            "{field} {t} is not the run's time ({start}..{end})"
        );
    }
    // No repair state is kept off the device.
    let left: Vec<_> = std::fs::read_dir(img.dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .filter(|n| n != "fs.img" && n != "tree")
        .collect();
    assert!(left.is_empty(), "files left beside the image: {left:?}");
}

#[test]
fn yes_marks_clean_image_checked() {
    clean_marked(&["-fy"]);
}

#[test]
fn preen_marks_clean_image_checked() {
    clean_marked(&["-fp"]);
}

/// Without -f a clean file system is skipped: not a byte is written.
#[test]
fn preen_alias_a_leaves_clean_image_identical() {
    let Some(t) = common::tools() else { return };
    let img = common::mkfs(&t, "ext4", &[], "16M");
    let run = run_unchanged(&img, &["-a"]);
    assert_eq!(run.code(), 0, "{}", run.stdout);
    assert!(run.stdout.contains(": clean, "), "{}", run.stdout);
    let log = img.path.with_extension("img.ffsck-redo");
    assert!(!log.exists(), "a repair log was left: {}", log.display());
}
