//! A device shorter than the file system: fitted to the device when nothing lies past its end, refused (as e2fsck refuses it) when something does.

use crate::common::{self, Image, Tools};
use std::ffi::OsStr;

/// An ext2 image on 1 KiB blocks in one group (no backup superblock to correct the count from).
fn one_group(t: &Tools) -> Image {
    let img = common::mkfs(t, "ext2", &["-b", "1024"], "8M");
    common::settle(t, &img.path);
    img
}

/// The image file cut to `blocks` blocks of `bs` bytes (a device shorter than the file system).
fn cut_to(img: &Image, blocks: u64, bs: u64) {
    let f = std::fs::OpenOptions::new()
        .write(true)
        .open(&img.path)
        .unwrap();
    f.set_len(blocks * bs).unwrap();
}

fn ffsck(img: &Image, flag: &str) -> common::Run {
    let run = common::ffsck(&[OsStr::new(flag), img.path.as_os_str()]);
    common::assert_no_panic(&run);
    run
}

/// The files the image was made from are all still there, unchanged.
fn assert_files_kept(t: &Tools, img: &Image) {
    for rel in ["a/f1", "a/f12", "a/sub/s1", "b/x", "c/d/e/file27"] {
        assert_eq!(
            common::dump(t, img, &format!("/{rel}")),
            common::tree_file(img, rel),
            "{rel} changed"
        );
    }
}

/// A block count one past the device (a damaged `s_blocks_count` with no backup; recipe
/// s3002-c122): e2fsck's `-y` answers "Abort? yes" and repairs nothing; nothing is in use past
/// the device's end, so ffsck sets the size to the device's and repairs the rest in one run.
/// `-n` goes on after the question, as e2fsck's does, and writes nothing.
#[test]
fn a_block_count_past_the_device_with_nothing_there_is_fitted_to_the_device() {
    let Some(t) = common::tools() else { return };
    let img = one_group(&t);
    common::debugfs_w(&t, &img.path, "ssv blocks_count 8193");
    let before = common::read_all(&img.path);
    let (e2, e2out) = common::e2fsck_n(&t, &img.path);
    let check = ffsck(&img, "-fn");
    assert_eq!(
        check.code(),
        e2,
        "-n exit differs from e2fsck's\n{e2out}\n{}",
        check.stdout
    );
    assert!(check.stdout.contains("Abort? no"), "{}", check.stdout);
    assert!(
        check.stdout.contains("Pass 5"),
        "-n goes on\n{}",
        check.stdout
    );
    common::assert_same_bytes(&before, &common::read_all(&img.path), "ffsck -n");

    let run = common::assert_one_run_repairs(&t, &img, "block count past the device", &[1]);
    assert!(
        run.stdout
            .contains("no block past the device's end is in use"),
        "{}",
        run.stdout
    );
    let count = common::debugfs_number(&t, &img.path, "stats", "Block count:");
    assert_eq!(count, 8192);
    assert_files_kept(&t, &img);
}

/// A file whose block lies past the end of a device one block short: cutting the size would
/// lose it (the partition table may be what is wrong), so `-y` stops as e2fsck's does (exit
/// 8) and writes nothing.
#[test]
fn a_device_too_short_for_a_block_in_use_is_refused_and_left_alone() {
    let Some(t) = common::tools() else { return };
    let img = common::short_device_with_its_last_block_in_use(&t);
    let before = common::read_all(&img.path);
    let run = ffsck(&img, "-fy");
    assert_eq!(run.code(), 8, "{}\n{}", run.stdout, run.stderr);
    // The check stops: e2fsck's answer under -y.
    assert!(run.stdout.contains("Abort? yes"), "{}", run.stdout);
    common::assert_same_bytes(&before, &common::read_all(&img.path), "ffsck -fy");
    let preen = ffsck(&img, "-fp");
    assert_eq!(preen.code(), 4, "{}\n{}", preen.stdout, preen.stderr);
    common::assert_same_bytes(&before, &common::read_all(&img.path), "ffsck -fp");
}

/// An image cut short by a block that held nothing: fitted in one run, every file kept.
#[test]
fn an_image_one_free_block_short_is_fitted() {
    let Some(t) = common::tools() else { return };
    let img = one_group(&t);
    cut_to(&img, 8191, 1024);
    let run = ffsck(&img, "-fy");
    assert_eq!(run.code(), 1, "{}\n{}", run.stdout, run.stderr);
    let (after, out) = common::e2fsck_n(&t, &img.path);
    assert_eq!(after, 0, "{out}\n{}", run.stdout);
    let count = common::debugfs_number(&t, &img.path, "stats", "Block count:");
    assert_eq!(count, 8191);
    assert_files_kept(&t, &img);
}

/// The same on bigalloc (16-block clusters; recipes s3015-c00619 and c01148): a device that
/// ends on a cluster boundary cuts no cluster, so a block count past it with nothing there is
/// fitted in one run as on other file systems; a device that ends inside a cluster, which a
/// cut would split, is refused and left alone.
#[test]
fn a_bigalloc_block_count_past_the_device_is_fitted_on_a_cluster_boundary() {
    let Some(t) = common::tools() else { return };
    let img = common::mkfs(
        &t,
        "ext4",
        &["-b", "4096", "-O", "bigalloc", "-C", "65536"],
        "16M",
    );
    common::settle(&t, &img.path);
    common::debugfs_w(&t, &img.path, "ssv blocks_count 4097");
    common::assert_one_run_repairs(&t, &img, "bigalloc block count past the device", &[1]);
    let count = common::debugfs_number(&t, &img.path, "stats", "Block count:");
    assert_eq!(count, 4096);
    assert_files_kept(&t, &img);

    // The device cut inside the last cluster: the file system's last cluster would be split.
    cut_to(&img, 4090, 4096);
    let before = common::read_all(&img.path);
    let run = ffsck(&img, "-fy");
    assert_eq!(run.code(), 8, "{}\n{}", run.stdout, run.stderr);
    common::assert_same_bytes(&before, &common::read_all(&img.path), "ffsck -fy");
}
