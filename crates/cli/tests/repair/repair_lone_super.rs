//! One-group file systems (no backup superblock or descriptors to fall back on): an unknown
//! feature bit in a superblock whose checksum fails, an unknown compat feature in a sound one
//! (refused by -n, a question for -y),
//! and an inode table lost with the project quota file in it (fuzzer seed 1300 case 162, seed
//! 1000 case 318).

use crate::common;

use common::{Image, Tools};
use std::ffi::OsStr;

/// s_feature_compat's offset in the image (the superblock at 1024, the field at 0x5C).
const COMPAT_OFFSET: u64 = 1024 + 0x5C;

/// ext4 with 4 KiB blocks in 16 MiB: a single group, so no backup superblock.
fn one_group(t: &Tools, extra: &[&str]) -> Image {
    let mut args = vec!["-b", "4096"];
    args.extend_from_slice(extra);
    common::mkfs(t, "ext4", &args, "16M")
}

#[test]
fn an_unknown_compat_bit_in_a_superblock_whose_checksum_fails_is_cleared() {
    let Some(t) = common::tools() else {
        return common::skip("mke2fs, debugfs or e2fsck missing");
    };
    let img = one_group(&t, &[]);
    // Bit 31 of the compat features, the checksum left as it was.
    let compat = common::read_u32(&img.path, COMPAT_OFFSET);
    common::patch(&img.path, COMPAT_OFFSET, &(compat | 1 << 31).to_le_bytes());
    let (before, out) = common::e2fsck_n(&t, &img.path);
    assert_ne!(before, 0, "test setup: e2fsck must refuse the image\n{out}");

    let run = common::ffsck(&[OsStr::new("-fy"), img.path.as_os_str()]);
    common::assert_no_panic(&run);
    assert_eq!(run.code(), 1, "ffsck -fy\n{}\n{}", run.stdout, run.stderr);
    assert!(
        run.stdout.contains("s_feature_compat"),
        "the cleared bits are named\n{}",
        run.stdout
    );
    assert_eq!(
        common::read_u32(&img.path, COMPAT_OFFSET),
        compat,
        "the compat features as mke2fs made them"
    );
    let (after, out) = common::e2fsck_n(&t, &img.path);
    assert_eq!(after, 0, "e2fsck -fn after the repair\n{out}");
    let again = common::check_n(&img.path, 1);
    assert_eq!(again.code(), 0, "second ffsck -fn: {}", again.describe());
}

/// An unknown compat feature in a sound superblock with no backup to confirm it: -fn refuses
/// it as e2fsck does, writing nothing; -fy asks (it may be a newer kernel's) and, answered
/// yes, clears it, leaving a file system both checkers find clean.
#[test]
fn an_unknown_compat_feature_with_a_good_checksum_is_refused_by_n_and_cleared_by_y() {
    let Some(t) = common::tools() else {
        return common::skip("mke2fs, debugfs or e2fsck missing");
    };
    let img = one_group(&t, &[]);
    let compat = common::read_u32(&img.path, COMPAT_OFFSET);
    common::debugfs_script(&t, &img, &["feature FEATURE_C31"]);
    let (e2, out) = common::e2fsck_n(&t, &img.path);
    assert_ne!(e2 & 8, 0, "test setup: e2fsck refuses it\n{out}");
    let before = common::read_all(&img.path);
    let run = common::ffsck(&[OsStr::new("-fn"), img.path.as_os_str()]);
    common::assert_no_panic(&run);
    assert_eq!(run.code(), 8, "ffsck -fn\n{}\n{}", run.stdout, run.stderr);
    assert!(
        run.stdout.contains("FEATURE_C31") || run.stderr.contains("FEATURE_C31"),
        "the feature is named\n{}\n{}",
        run.stdout,
        run.stderr
    );
    common::assert_same_bytes(&before, &common::read_all(&img.path), "ffsck -fn");
    let run = common::ffsck(&[OsStr::new("-fy"), img.path.as_os_str()]);
    common::assert_no_panic(&run);
    assert_eq!(run.code(), 1, "ffsck -fy\n{}\n{}", run.stdout, run.stderr);
    assert!(
        run.stdout.contains("FEATURE_C31") && run.stdout.contains("Clear? yes"),
        "the feature is asked about\n{}",
        run.stdout
    );
    assert_eq!(common::read_u32(&img.path, COMPAT_OFFSET), compat);
    let (after, out) = common::e2fsck_n(&t, &img.path);
    assert_eq!(after, 0, "e2fsck -fn after the repair\n{out}");
}

#[test]
fn a_lost_inode_table_with_the_project_quota_file_converges_in_one_run() {
    let Some(t) = common::tools() else {
        return common::skip("mke2fs, debugfs or e2fsck missing");
    };
    let img = one_group(&t, &["-O", "quota,project"]);
    let prj = common::debugfs_number(&t, &img.path, "stats", "Project quota inode:");
    assert!(
        prj > 11,
        "test setup: the project quota file in an ordinary inode ({prj})"
    );
    // The only group's inode table pointer beyond the end: every inode is lost, the project
    // quota file's with them.
    common::debugfs_script(&t, &img, &["set_bg 0 inode_table 11013"]);
    let run = common::assert_one_run_repairs(&t, &img, "lost inode table", &[1]);
    assert!(
        run.stdout
            .contains("Update quota info for quota type 2? yes"),
        "the project quota file is rewritten\n{}",
        run.stdout
    );
}
