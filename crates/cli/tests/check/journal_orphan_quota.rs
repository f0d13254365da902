//! Journal, orphan and quota checks, and the pass-0 exit-code rule: each test damages a fresh
//! image with debugfs (or by patching bytes), runs `e2fsck -fn` to confirm the setup, and
//! asserts ffsck's exit code and problem codes agree with it.

use crate::common;

use common::{Image, Tools};

/// ext4 with a journal (1 KiB blocks, metadata_csum, so a v3-checksummed journal).
fn ext4(t: &Tools, extra: &[&str]) -> Image {
    common::mkfs(t, "ext4", extra, "16M")
}

/// Runs both checkers; asserts both exit with `code` and ffsck reports every code in `want`
/// and none in `unwanted`.
fn expect(t: &Tools, img: &Image, code: i32, want: &[&str], unwanted: &[&str]) -> common::Check {
    common::expect_codes(t, img, code, want, unwanted)
}

/// Byte offset of the journal superblock (logical block 0 of inode 8).
fn journal_sb_offset(t: &Tools, img: &Image) -> u64 {
    let blk = common::bmap(t, &img.path, "<8>", 0);
    blk * 1024
}

#[test]
fn journal_superblock_bad_magic_aborts_with_12() {
    let Some(t) = common::tools() else { return };
    let img = ext4(&t, &[]);
    let off = journal_sb_offset(&t, &img);
    common::patch(&img.path, off, &[0, 0, 0, 0]);
    expect(
        &t,
        &img,
        12,
        &["P0_JOURNAL_BAD_INODE", "P0_JOURNAL_BAD_SUPER"],
        &["P1_ILLEGAL_BLOCK_NUM"],
    );
}

#[test]
fn journal_superblock_wrong_block_size_aborts_with_12() {
    let Some(t) = common::tools() else { return };
    let img = ext4(&t, &[]);
    let off = journal_sb_offset(&t, &img);
    // A journal block size (s_blocksize, big-endian) that is not the file system's.
    common::patch(&img.path, off + 0x0C, &[0, 0, 0x08, 0]);
    expect(
        &t,
        &img,
        12,
        &["P0_JOURNAL_BAD_SUPER"],
        &["P0_JOURNAL_BAD_INODE"],
    );
}

#[test]
fn journal_inode_with_bad_block_is_judged_by_the_journal_check() {
    let Some(t) = common::tools() else { return };
    let img = ext4(&t, &["-O", "^extent,^64bit", "-E", "nodiscard"]);
    // Point the journal's first indirect block far outside the file system, and drop the
    // superblock's backup of the journal's block map (which would otherwise stand in).
    common::debugfs_w(&t, &img.path, "sif <8> block[IND] 4000000");
    common::debugfs_w(&t, &img.path, "ssv jnl_backup_type 0");
    let c = expect(&t, &img, 12, &["P0_JOURNAL_BAD_INODE"], &[]);
    assert!(
        c.findings().iter().all(|f| f["pass"] == 0),
        "the journal's blocks were judged by a later pass:\n{}",
        c.describe()
    );
}

#[test]
fn clean_journal_is_quiet() {
    let Some(t) = common::tools() else { return };
    let img = ext4(&t, &[]);
    let c = expect(&t, &img, 0, &[], &[]);
    assert!(c.findings().is_empty(), "{}", c.describe());
}

#[test]
fn orphan_list_refugees_latch_once() {
    let Some(t) = common::tools() else { return };
    let img = ext4(&t, &[]);
    // dtimes below the inode count look like orphan-list links left behind.
    common::debugfs_w(&t, &img.path, "sif /a/f1 dtime 13");
    common::debugfs_w(&t, &img.path, "sif /a/f2 dtime 14");
    let c = expect(
        &t,
        &img,
        4,
        &["P1_ORPHAN_LIST_REFUGEES", "P1_LOW_DTIME"],
        &[],
    );
    let codes = c.codes();
    assert_eq!(
        codes
            .iter()
            .filter(|c| *c == "P1_ORPHAN_LIST_REFUGEES")
            .count(),
        1,
        "latch asked more than once: {codes:?}"
    );
    let latch = codes.iter().position(|c| c == "P1_ORPHAN_LIST_REFUGEES");
    let first = codes.iter().position(|c| c == "P1_LOW_DTIME");
    assert!(
        latch < first,
        "latch must precede the first refugee: {codes:?}"
    );
}

#[test]
fn pass0_answers_alone_leave_exit_0() {
    let Some(t) = common::tools() else { return };
    let img = common::mkfs(&t, "ext2", &[], "16M");
    // An unused-inodes count without uninit_bg: e2fsck asks, and still exits 0 under -n.
    common::debugfs_w(&t, &img.path, "set_bg 1 itable_unused 5");
    expect(&t, &img, 0, &["P0_GDT_UNINIT"], &[]);
}

#[test]
fn invalid_quota_inode_needs_quota_update() {
    let Some(t) = common::tools() else { return };
    let img = ext4(&t, &["-O", "quota"]);
    common::debugfs_w(&t, &img.path, "ssv usr_quota_inum 999999");
    expect(
        &t,
        &img,
        4,
        &["P0_INVALID_QUOTA_INO", "P6_UPDATE_QUOTAS"],
        &[],
    );
}

#[test]
fn orphan_present_with_clean_orphan_file() {
    let Some(t) = common::tools() else { return };
    let img = ext4(&t, &["-O", "orphan_file"]);
    common::debugfs_w(&t, &img.path, "feature orphan_present");
    expect(&t, &img, 4, &["P6_ORPHAN_PRESENT_CLEAN_FILE"], &[]);
}

/// An orphan file whose inode number was zeroed in the superblock (fuzz seed 3022 case 4161):
/// e2fsck cannot read "inode 0" (exit 12) and its -y leaves a file system it still cannot
/// check. ffsck -fn reports the orphan file (exit 4); -fy makes a new one in a free inode,
/// names it in the superblock, and puts the old one, now unattached, in /lost+found: the
/// result is clean for both checkers.
#[test]
fn orphan_file_with_a_zeroed_inode_number_is_recreated() {
    let Some(t) = common::tools() else { return };
    const S_ORPHAN_FILE_INUM: u64 = 1024 + 0x280;
    let img = ext4(&t, &["-O", "orphan_file"]);
    let old = common::read_u32(&img.path, S_ORPHAN_FILE_INUM);
    assert!(old != 0, "test setup: no orphan file");
    common::debugfs_w(&t, &img.path, "ssv orphan_file_inum 0");
    let n = common::check_n(&img.path, 1);
    assert_eq!(n.code(), 4, "{}", n.describe());
    assert!(n.has("P6_ORPHAN_FILE_CORRUPTED"), "{}", n.describe());
    let run = common::ffsck(&["-fy".as_ref(), img.path.as_os_str()]);
    let all = format!("{}{}", run.stdout, run.stderr);
    assert_eq!(run.code(), 1, "ffsck -fy:\n{all}");
    let now = common::read_u32(&img.path, S_ORPHAN_FILE_INUM);
    assert!(now != 0 && now != old, "orphan file inode after -fy: {now}");
    let (code, out) = common::e2fsck_n(&t, &img.path);
    assert_eq!(code, 0, "e2fsck -fn after ffsck -fy:\n{out}");
    let n = common::check_n(&img.path, 1);
    assert_eq!(n.code(), 0, "ffsck -fn after -fy:\n{}", n.describe());
    let ls = std::process::Command::new(&t.debugfs)
        .args(["-R", "ls -l /lost+found"])
        .arg(&img.path)
        .output()
        .unwrap();
    let ls = String::from_utf8_lossy(&ls.stdout);
    assert!(
        ls.contains(&format!("#{old}")),
        "the old orphan file is not in /lost+found:\n{ls}"
    );
}
