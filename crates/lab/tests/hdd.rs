//! `ffsck-lab hdd` end to end (root): trace `e2fsck -fn` on a small image through a
//! direct-I/O loop device, model it, and replay the saved trace to the same numbers.

mod common;

use ffsck_lab::hdd::{self, HddArgs};
use std::os::unix::fs::MetadataExt;

#[test]
fn tracing_e2fsck_on_a_small_image_models_its_reads_and_replays_them_the_same() {
    if std::fs::metadata("/proc/self").map_or(true, |m| m.uid() != 0) {
        return common::skip("tracing needs root (loop devices, tracefs, drop_caches)");
    }
    let (Some(mke2fs), Some(e2fsck), Some(_)) = (
        common::tool("mke2fs"),
        common::tool("e2fsck"),
        common::tool("losetup"),
    ) else {
        return common::skip("needs mke2fs, e2fsck and losetup");
    };
    // Direct I/O needs a file system that supports it: the target directory, not tmpfs.
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let img = dir.path().join("small.img");
    let ok = std::process::Command::new(&mke2fs)
        .args(["-q", "-F", "-t", "ext4"])
        .arg(&img)
        .arg("32M")
        .status()
        .unwrap()
        .success();
    assert!(ok, "mke2fs");
    let out = dir.path().join("out");
    let cmd = format!("e2fsck={} -fn {{dev}}", e2fsck.display());
    let args: HddArgs = ffsck_lab::parse_args(&[
        "--image",
        img.to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
        "--only-commands",
        "--command",
        &cmd,
    ])
    .unwrap();
    let report = match hdd::run(&args) {
        Ok(r) => r,
        Err(e) => return common::skip(&format!("tracing failed here: {e:#}")),
    };
    assert_eq!(report.rows.len(), 1);
    let row = &report.rows[0];
    assert_eq!(row.exit_code, Some(0), "{row:?}");
    let (q1, q32) = (&row.modeled[0], &row.modeled[1]);
    assert_eq!((q1.0, q32.0), (1, 32));
    // e2fsck read the superblock, descriptors, bitmaps and inode tables: some requests and
    // bytes, all of them reads, none past the device, and the sweep bound below the replay.
    assert!(q1.1.requests >= 3, "{row:?}");
    assert!(q1.1.bytes >= 64 << 10 && q1.1.bytes <= 32 << 20, "{row:?}");
    assert!(
        q1.1.disk_s > 0.0 && row.sweep.disk_s <= q1.1.disk_s,
        "{row:?}"
    );
    assert!(out.join("report.md").is_file() && out.join("results.json").is_file());
    let trace_file = out.join(row.trace_file.as_deref().unwrap());
    let t = hdd::trace::Trace::load(&trace_file).unwrap();
    assert_eq!(t.other_requests, 0, "a -n check wrote");
    assert_eq!(t.device_bytes, 32 << 20);

    // The saved trace replays to the same numbers.
    let again: HddArgs = ffsck_lab::parse_args(&[
        "--trace",
        trace_file.to_str().unwrap(),
        "--out",
        dir.path().join("again").to_str().unwrap(),
    ])
    .unwrap();
    let replayed = hdd::run(&again).unwrap();
    assert_eq!(replayed.rows[0].modeled, row.modeled);
}
