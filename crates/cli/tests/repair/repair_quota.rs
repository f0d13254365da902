//! Quota usage: with the `quota` feature, the usage a quota file records for every id must be
//! what the files use. A stale file is reported, and one `ffsck -fy` rewrites it with the
//! counted usage, keeping each id's limits, as e2fsck does; a quota file whose tree is broken
//! is rewritten too, and never makes the check loop or panic.

use crate::common;

use common::{Image, Tools};
use std::ffi::OsStr;
use std::path::Path;
use std::process::Command;

/// The user quota file's contents.
fn quota_file(t: &Tools, img: &Image) -> Vec<u8> {
    let out = img.aux("quota.bin");
    common::debugfs_r(t, &img.path, &format!("dump <3> {}", out.display()));
    std::fs::read(&out).unwrap()
}

/// Byte offset in the image of `file_off` in the user quota file (1 KiB blocks).
fn disk_offset(t: &Tools, img: &Image, file_off: u64) -> u64 {
    common::bmap(t, &img.path, "<3>", file_off / 1024) * 1024 + file_off % 1024
}

/// Offset in the quota file of id `id`'s 72-byte record (a data block's entries start at 16).
fn record_of(file: &[u8], id: u32) -> Option<u64> {
    (2..file.len() / 1024).find_map(|blk| {
        (0..14).find_map(|k| {
            let at = blk * 1024 + 16 + 72 * k;
            let e = &file[at..at + 72];
            let curspace = u64::from_le_bytes(e[48..56].try_into().unwrap());
            (u32::from_le_bytes(e[0..4].try_into().unwrap()) == id && curspace > 0)
                .then_some(at as u64)
        })
    })
}

fn e2fsck_fy(t: &Tools, path: &Path) {
    let out = Command::new(&t.e2fsck)
        .arg("-fy")
        .arg(path)
        .output()
        .unwrap();
    assert!(
        matches!(out.status.code(), Some(0 | 1)),
        "test setup: e2fsck -fy\n{}",
        String::from_utf8_lossy(&out.stdout)
    );
}

/// An ext4 image with quotas, whose `/a/f2` belongs to user 1000 with limits set (consistent
/// usage: e2fsck has been over it).
fn quota_image(t: &Tools) -> Image {
    let img = common::mkfs(t, "ext4", &["-b", "1024", "-O", "quota"], "8M");
    common::debugfs_w(t, &img.path, "sif /a/f2 uid 1000");
    e2fsck_fy(t, &img.path);
    let file = quota_file(t, &img);
    let rec = record_of(&file, 1000).expect("test setup: no quota record for uid 1000");
    // Block hard limit (1 KiB units) and inode soft limit of uid 1000.
    common::patch(
        &img.path,
        disk_offset(t, &img, rec + 32),
        &500u64.to_le_bytes(),
    );
    common::patch(
        &img.path,
        disk_offset(t, &img, rec + 16),
        &7u64.to_le_bytes(),
    );
    let (code, out) = common::e2fsck_n(t, &img.path);
    assert_eq!(code, 0, "test setup: a consistent quota image\n{out}");
    img
}

fn lq(t: &Tools, path: &Path) -> String {
    common::debugfs_r(t, path, "lq user")
}

#[test]
fn stale_quota_usage_is_rewritten_with_the_limits_kept() {
    let Some(t) = common::tools() else { return };
    let img = quota_image(&t);
    // A file changes hands without the quota file hearing of it.
    common::debugfs_w(&t, &img.path, "sif /a/f3 uid 1000");
    let copy = img.aux("copy.img");
    std::fs::copy(&img.path, &copy).unwrap();
    let run = common::ffsck(&[OsStr::new("-fn"), img.path.as_os_str()]);
    assert_eq!(run.code(), 4, "{}", run.stdout);
    assert!(
        run.stdout
            .contains("Update quota info for quota type 0? no"),
        "{}",
        run.stdout
    );
    // e2fsck's per-id warnings, on stderr.
    assert!(
        run.stderr
            .contains("[QUOTA WARNING] Usage inconsistent for ID 1000:actual ("),
        "{}",
        run.stderr
    );
    let fixed = common::ffsck(&[OsStr::new("-fy"), img.path.as_os_str()]);
    assert_eq!(fixed.code(), 1, "{}", fixed.stdout);
    assert!(fixed
        .stdout
        .contains("Update quota info for quota type 0? yes"));
    let (after, out) = common::e2fsck_n(&t, &img.path);
    assert_eq!(after, 0, "e2fsck -fn after the repair\n{out}");
    let again = common::ffsck(&[OsStr::new("-fn"), img.path.as_os_str()]);
    assert_eq!(again.code(), 0, "{}", again.stdout);
    // The same records as e2fsck's own repair: usage recounted, limits of uid 1000 kept.
    e2fsck_fy(&t, &copy);
    let (ours, theirs) = (lq(&t, &img.path), lq(&t, &copy));
    assert_eq!(ours, theirs);
    let line = ours
        .lines()
        .find(|l| l.split_whitespace().next() == Some("1000"))
        .unwrap_or_else(|| panic!("no uid 1000\n{ours}"));
    let cols: Vec<&str> = line.split_whitespace().collect();
    assert_eq!((cols[3], cols[5]), ("500", "7"), "limits kept: {line}");
}

#[test]
fn a_looping_quota_tree_is_rewritten() {
    let Some(t) = common::tools() else { return };
    let img = quota_image(&t);
    // The root block's first slot (ids 0..2^24) points back at the root itself.
    common::patch(&img.path, disk_offset(&t, &img, 1024), &1u32.to_le_bytes());
    let run = common::ffsck_timeout(
        &[OsStr::new("-fn"), img.path.as_os_str()],
        std::time::Duration::from_secs(60),
    );
    common::assert_no_panic(&run);
    assert_eq!(run.code(), 4, "{}", run.stdout);
    assert!(run.stdout.contains("Update quota info for quota type 0"));
    let fixed = common::ffsck(&[OsStr::new("-fy"), img.path.as_os_str()]);
    assert_eq!(fixed.code(), 1, "{}", fixed.stdout);
    let (after, out) = common::e2fsck_n(&t, &img.path);
    assert_eq!(after, 0, "e2fsck -fn after the repair\n{out}");
    // Usage is back; the limits went with the broken tree (as with e2fsck).
    assert!(lq(&t, &img.path)
        .lines()
        .any(|l| l.trim_start().starts_with("1000 ")));
}

/// Inodes 3 and 4 are reserved for the user and group quota files. Without the `quota`
/// feature they must be empty: one holding data is reported in e2fsck's words and zeroed by
/// one `ffsck -fy` (its block freed), where it was only stripped of its mode before.
#[test]
fn a_quota_inode_not_in_use_but_holding_data_is_cleared() {
    let Some(t) = common::tools() else { return };
    let img = common::mkfs(&t, "ext4", &["-b", "1024"], "8M");
    common::debugfs_w(&t, &img.path, "sif <4> links_count 1");
    common::debugfs_w(&t, &img.path, "sif <4> mode 0100644");
    common::debugfs_w(&t, &img.path, "sif <4> blocks 2");
    let msg = "Quota inode is not in use, but contains data.";
    let (_, theirs) = common::e2fsck_n(&t, &img.path);
    assert!(theirs.contains(msg), "test setup: {theirs}");
    let check = common::ffsck(&[OsStr::new("-fn"), img.path.as_os_str()]);
    assert!(check.stdout.contains(msg), "{}", check.stdout);
    assert!(
        !check.stdout.contains("Reserved inode 4"),
        "{}",
        check.stdout
    );
    common::assert_one_run_repairs(&t, &img, "quota inode not clear", &[1]);
    let stat = common::debugfs_r(&t, &img.path, "stat <4>");
    assert!(stat.contains("Links: 0   Blockcount: 0"), "{stat}");
}

/// With the `quota` feature, the superblock's user quota file is a regular file whatever its
/// mode says: a lost mode is set back to a regular file, keeping the quota file.
#[test]
fn the_quota_file_gets_its_regular_mode_back() {
    let Some(t) = common::tools() else { return };
    let img = quota_image(&t);
    common::debugfs_w(&t, &img.path, "sif <3> mode 0");
    let msg = "Quota inode is not a regular file.";
    let (_, theirs) = common::e2fsck_n(&t, &img.path);
    assert!(theirs.contains(msg), "test setup: {theirs}");
    let copy = img.aux("e2fsck.img");
    std::fs::copy(&img.path, &copy).unwrap();
    let run = common::assert_one_run_repairs(&t, &img, "quota inode mode", &[1]);
    assert!(run.stdout.contains(msg), "{}", run.stdout);
    // The quota file as e2fsck's repair leaves it: a regular file with the same records.
    e2fsck_fy(&t, &copy);
    let stat = common::debugfs_r(&t, &img.path, "stat <3>");
    assert!(stat.contains("Type: regular"), "{stat}");
    assert_eq!(lq(&t, &img.path), lq(&t, &copy));
}

/// Reserved inodes 3 and 4 on a file system without quotas hold nothing; one with a link
/// count, blocks or a first block pointer is reported ("Quota inode is not in use, but
/// contains data") and zeroed, as e2fsck does. It was called clean.
#[test]
fn an_unused_quota_inode_with_data_is_cleared() {
    let Some(t) = common::tools() else { return };
    for (ino, field) in [(3, "links_count 44544"), (4, "block[0] 20")] {
        let img = common::mkfs(&t, "ext2", &["-b", "1024"], "4M");
        common::debugfs_w(&t, &img.path, &format!("sif <{ino}> {field}"));
        let check = common::check_n(&img.path, 1);
        assert!(
            check.code() & 4 != 0 && check.has("P1_QUOTA_INODE_NOT_CLEAR"),
            "inode {ino} ({field}): {}",
            check.describe()
        );
        common::assert_one_run_repairs(&t, &img, &format!("inode {ino} {field}"), &[1]);
        let stat = common::debugfs_r(&t, &img.path, &format!("stat <{ino}>"));
        assert!(stat.contains("Links: 0"), "inode {ino} not zeroed:\n{stat}");
    }
}

/// One `ffsck -fy` of `img` fixes something (exit 1), leaves a file system e2fsck finds clean
/// and the usage e2fsck's repair left in `copy`.
fn repaired_as_e2fsck(t: &Tools, img: &Image, copy: &Path) {
    let run = common::ffsck(&[OsStr::new("-fy"), img.path.as_os_str()]);
    assert_eq!(run.code(), 1, "{}\n{}", run.stdout, run.stderr);
    let (code, out) = common::e2fsck_n(t, &img.path);
    assert_eq!(code, 0, "e2fsck -fn after ffsck -fy:\n{out}");
    assert_eq!(lq(t, &img.path), lq(t, copy), "usage differs from e2fsck's");
}

/// An ext4 image with quota on bigalloc: 4 KiB blocks, 16 to a cluster.
fn bigalloc_quota_image(t: &Tools, size: &str) -> Image {
    let args = ["-b", "4096", "-O", "quota,bigalloc", "-C", "65536"];
    common::mkfs(t, "ext4", &args, size)
}

/// On bigalloc, where new blocks come in clusters, a quota file whose new contents fit its
/// blocks is written in place: `mke2fs -d` leaves quota files that count only the root and
/// lost+found, and one `ffsck -fy` makes them right as one `e2fsck -fy` does. (The rewrite
/// used to need new blocks, which it cannot take on bigalloc, and answered yes to nothing.)
#[test]
fn a_stale_quota_file_on_bigalloc_is_rewritten_in_place() {
    let Some(t) = common::tools() else { return };
    let img = bigalloc_quota_image(&t, "16M");
    let (code, out) = common::e2fsck_n(&t, &img.path);
    assert_ne!(
        code, 0,
        "test setup: mke2fs -d left the quota files right\n{out}"
    );
    let copy = img.aux("e2fsck.img");
    std::fs::copy(&img.path, &copy).unwrap();
    e2fsck_fy(&t, &copy);
    repaired_as_e2fsck(&t, &img, &copy);
}

/// On bigalloc a quota file that must grow past its cluster takes whole new clusters, its data
/// at the same offsets in them as its logical blocks: forty files given owners whose ids share
/// no tree blocks make e2fsck's rewrite of the user quota file 26 blocks long, two clusters of
/// 16. One `ffsck -fy` leaves the usage e2fsck leaves, the file charged whole clusters, and a
/// file system e2fsck finds clean.
#[test]
fn a_quota_file_on_bigalloc_grows_by_whole_clusters() {
    let Some(t) = common::tools() else { return };
    let img = bigalloc_quota_image(&t, "32M");
    common::settle(&t, &img.path);
    let blocks_of = |path: &Path| {
        let stat = common::debugfs_r(&t, path, "stat <3>");
        let at = stat.find("Blockcount: ").expect("no block count") + 12;
        stat[at..]
            .split_whitespace()
            .next()
            .unwrap()
            .parse::<u64>()
            .unwrap()
    };
    let before = blocks_of(&img.path);
    let files: Vec<String> = (1..=12)
        .map(|i| format!("/a/f{i}"))
        .chain((0..28).map(|i| {
            let dir = ["b", "c", "c/d", "c/d/e"][i % 4];
            format!("/{dir}/file{i:02}")
        }))
        .collect();
    for (i, f) in files.iter().enumerate() {
        let i = i as u64 + 1;
        let uid = i * (1 << 24) / 3 + i * 65536 + i;
        common::debugfs_w(&t, &img.path, &format!("sif {f} uid {uid}"));
    }
    let copy = img.aux("e2fsck.img");
    std::fs::copy(&img.path, &copy).unwrap();
    e2fsck_fy(&t, &copy);
    // 4 KiB blocks, 16 to a cluster: e2fsck's file spans more than one cluster.
    assert!(
        blocks_of(&copy) > before && blocks_of(&copy) > 16 * 8,
        "test setup: the quota file did not grow past a cluster ({before} -> {} sectors)",
        blocks_of(&copy)
    );
    repaired_as_e2fsck(&t, &img, &copy);
    assert_eq!(blocks_of(&img.path), blocks_of(&copy), "block count");
}
