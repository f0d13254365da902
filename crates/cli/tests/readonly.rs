//! Read-only guarantees: `-n` never changes a byte of the image (clean or corrupted), and a
//! repair (`-y`, `-p`, `-a`) of a clean file system writes nothing either.

mod common;

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

/// A repair run on a clean file system changes nothing: not a byte of the image.
fn clean_untouched(flags: &[&str]) {
    let Some(t) = common::tools() else { return };
    let img = common::mkfs(&t, "ext4", &[], "16M");
    let run = run_unchanged(&img, flags);
    assert_eq!(
        run.code(),
        0,
        "ffsck {flags:?} on a clean image\nstdout:\n{}\nstderr:\n{}",
        run.stdout,
        run.stderr
    );
    // No repair state is kept off the device.
    let left: Vec<_> = std::fs::read_dir(img.dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .filter(|n| n != "fs.img" && n != "tree")
        .collect();
    assert!(left.is_empty(), "files left beside the image: {left:?}");
}

#[test]
fn yes_leaves_clean_image_identical() {
    clean_untouched(&["-fy"]);
}

#[test]
fn preen_leaves_clean_image_identical() {
    clean_untouched(&["-fp"]);
}

#[test]
fn preen_alias_a_leaves_clean_image_identical() {
    clean_untouched(&["-a"]);
}
