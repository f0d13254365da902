//! Bigalloc clusters claimed twice: a file whose logical cluster maps to two physical
//! clusters (a block at the wrong offset of another cluster) is listed in pass 1B with every
//! block of that cluster and cloned, as e2fsck does: the stray block moves to the offset its
//! logical cluster's other blocks imply, and one `ffsck -fy` leaves what e2fsck leaves.

use crate::common;

use std::ffi::OsStr;

/// The extents debugfs prints for `ino` (without the header line).
fn extents(t: &common::Tools, img: &std::path::Path, ino: u32) -> String {
    let out = common::debugfs_r(t, img, &format!("ex <{ino}>"));
    out.lines().skip(1).collect::<Vec<_>>().join("\n")
}

#[test]
fn a_block_misplaced_in_another_cluster_moves_where_e2fsck_puts_it() {
    let Some(t) = common::tools() else { return };
    let img = common::mkfs(
        &t,
        "ext4",
        &["-b", "1024", "-O", "bigalloc,^has_journal", "-C", "16384"],
        "16M",
    );
    common::settle(&t, &img.path);
    // /b/x: 17 bytes, one block, at the start of its cluster.
    let ino: u32 = common::debugfs_r(&t, &img.path, "stat /b/x")
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .expect("inode of /b/x");
    let ex = extents(&t, &img.path, ino);
    let start: u64 = ex
        .split_whitespace()
        .nth(7)
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("test setup: no extent in\n{ex}"));
    assert_eq!(start % 16, 0, "test setup: {ex}");
    // A second extent, logical block 2, at offset 7 of a free cluster near the end: logical
    // cluster 0 now maps to two physical clusters, the second one misaligned.
    let stray = 16384 - 64 + 7;
    for cmd in [
        format!("sif <{ino}> block[0] {}", 0xF30A | (2 << 16)),
        format!("sif <{ino}> block[6] 2"),
        format!("sif <{ino}> block[7] 1"),
        format!("sif <{ino}> block[8] {stray}"),
        format!("sif <{ino}> size 3072"),
        format!("setb {}", stray - 7),
    ] {
        common::debugfs_w(&t, &img.path, &cmd);
    }
    let (code, out) = common::e2fsck_n(&t, &img.path);
    assert!(
        code == 4 && out.contains("violates cluster allocation rules"),
        "test setup: e2fsck -fn {code}\n{out}"
    );
    let copy = img.aux("e2fsck.img");
    std::fs::copy(&img.path, &copy).unwrap();
    let e2 = common::e2fsck_fy_copy(&t, &img.path);
    let mut cmd = std::process::Command::new(&t.e2fsck);
    cmd.arg("-fy").arg(&copy).env("E2FSCK_CONFIG", "/dev/null");
    let _ = cmd.output().unwrap();
    assert!(e2.contains("Clone multiply-claimed blocks? yes"), "{e2}");

    let run = common::ffsck(&[OsStr::new("-fy"), img.path.as_os_str()]);
    assert_eq!(run.code(), 1, "{}\n{}", run.stdout, run.stderr);
    for want in [
        "Multiply-claimed block(s) in inode",
        "has 1 multiply-claimed block(s), shared with 0 file(s):",
        "Clone multiply-claimed blocks? yes",
    ] {
        assert!(run.stdout.contains(want), "{want}\n{}", run.stdout);
    }
    let (code, out) = common::e2fsck_n(&t, &img.path);
    assert_eq!(code, 0, "e2fsck -fn after one ffsck -fy:\n{out}");
    // The stray block sits where e2fsck puts it: offset 2 of the file's own cluster.
    assert_eq!(extents(&t, &img.path, ino), extents(&t, &copy, ino));
    assert!(extents(&t, &img.path, ino).contains(&format!("{}", start + 2)));
    let data = |p: &std::path::Path| common::debugfs_r(&t, p, "cat /b/x");
    assert_eq!(data(&img.path), data(&copy), "contents");
}
