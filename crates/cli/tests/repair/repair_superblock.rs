//! Repair of superblock fields and feature combinations (pass 0), a reserved inode's mode, the
//! casefold flag without the feature, and the orphan file (cleaned, removed or recreated):
//! each case breaks one thing with `debugfs -w` on an image built at run time, and one
//! `ffsck -fy` must leave a file system e2fsck and ffsck both find clean, with the field set
//! as e2fsck sets it.

use crate::common;

use common::Tools;

struct Case {
    what: &'static str,
    mkfs: &'static [&'static str],
    break_it: &'static [&'static str],
    /// ffsck's report (`-fn`) must name the problem with this.
    says: &'static str,
    /// `debugfs stats` (or `stat`) afterwards, and what it must then show.
    after: Option<(&'static str, &'static str)>,
}

const CASES: &[Case] = &[
    Case {
        what: "last mount and write times in the future",
        mkfs: &[],
        break_it: &["ssv mtime 20990101", "ssv wtime 20990101"],
        says: "Superblock last mount time (Thu Jan  1 00:00:00 2099,",
        after: None,
    },
    Case {
        what: "reserved descriptor blocks without resize_inode",
        mkfs: &["-O", "^resize_inode"],
        break_it: &["ssv reserved_gdt_blocks 5"],
        says: "but s_reserved_gdt_blocks\nis 5; should be zero.",
        after: None,
    },
    Case {
        what: "bad s_min_extra_isize",
        mkfs: &[],
        break_it: &["ssv min_extra_isize 3"],
        says: "Bad required extra isize in superblock (3).",
        after: Some(("stats", "Required extra isize:     32")),
    },
    Case {
        what: "bad s_want_extra_isize",
        mkfs: &[],
        break_it: &["ssv want_extra_isize 1000"],
        says: "Bad desired extra isize in superblock (1000).",
        after: Some(("stats", "Desired extra isize:      32")),
    },
    Case {
        what: "uninit_bg beside metadata_csum",
        mkfs: &[],
        break_it: &["feature uninit_bg"],
        says: "metadata_csum supersedes uninit_bg",
        after: None,
    },
    Case {
        what: "64bit without extents",
        mkfs: &[],
        break_it: &["feature -extent"],
        says: "64bit filesystem needs extents",
        after: None,
    },
    Case {
        what: "metadata_csum_seed without metadata_csum",
        mkfs: &["-O", "^metadata_csum"],
        break_it: &["feature metadata_csum_seed"],
        says: "metadata_csum_seed is not necessary without metadata_csum.",
        after: None,
    },
    Case {
        what: "orphan_present without orphan_file",
        mkfs: &[],
        break_it: &["feature orphan_present"],
        says: "Feature orphan_present is set but feature orphan_file is not.",
        after: None,
    },
    Case {
        what: "a journal the superblock no longer has",
        mkfs: &[],
        break_it: &["feature -has_journal"],
        says: "Superblock has_journal flag is clear, but a journal is present.",
        after: None,
    },
    Case {
        what: "needs_recovery without a journal",
        mkfs: &["-O", "^has_journal"],
        break_it: &["feature needs_recovery"],
        says: "Superblock needs_recovery flag is set, but no journal is present.",
        after: None,
    },
    Case {
        what: "a dirty orphan-file block",
        mkfs: &["-O", "orphan_file"],
        break_it: &["zap_block -f <12> -p 0x55 0"],
        says: "Orphan file (inode 12) block 0 is not clean.",
        after: None,
    },
    Case {
        what: "an orphan file without a journal",
        mkfs: &["-O", "orphan_file"],
        break_it: &["feature -has_journal"],
        says: "Superblock has orphan file without journal.",
        after: None,
    },
    Case {
        what: "a hole in a block-mapped orphan file",
        mkfs: &["-O", "orphan_file,^extent,^64bit"],
        break_it: &["punch <12> 1 1"],
        says: "Orphan file (inode 12) contains hole at block 1.\nFailed to initialize orphan file.",
        after: Some(("stat <12>", "(0-11):")),
    },
    Case {
        what: "casefold flag without the casefold feature",
        mkfs: &[],
        break_it: &["sif /a/emptydir flags 0x40000000"],
        says: "casefold feature is not enabled.",
        after: None,
    },
    Case {
        what: "a reserved inode with a mode",
        mkfs: &[],
        break_it: &["sif <9> mode 0100644"],
        says: "Reserved inode 9 has invalid mode.",
        after: Some(("stat <9>", "Mode:  0000")),
    },
];

fn run_case(t: &Tools, c: &Case) {
    let img = common::mkfs(t, "ext4", c.mkfs, "16M");
    for cmd in c.break_it {
        common::debugfs_script(t, &img, &[cmd]);
    }
    let run = common::ffsck(&[std::ffi::OsStr::new("-fn"), img.path.as_os_str()]);
    assert!(
        run.stdout.contains(c.says),
        "{}: ffsck -fn does not report it\n{}",
        c.what,
        run.stdout
    );
    common::assert_repaired(t, &img, c.what);
    if let Some((cmd, shows)) = c.after {
        let out = common::debugfs_r(t, &img.path, cmd);
        assert!(out.contains(shows), "{}: after the repair\n{out}", c.what);
    }
}

#[test]
fn superblock_fields_and_reserved_inodes_are_repaired() {
    let Some(t) = common::tools() else { return };
    for c in CASES {
        run_case(&t, c);
    }
}

/// A primary descriptor whose inode table starts on its group's inode bitmap: the
/// descriptors are refused as e2fsck refuses them, the backup copy is used, and the repair
/// writes it back over the primary.
#[test]
fn overlapping_descriptors_are_replaced_from_the_backup() {
    let Some(t) = common::tools() else { return };
    let img = common::mkfs(&t, "ext2", &[], "16M");
    let stats = common::debugfs_r(&t, &img.path, "stats");
    let line = stats
        .lines()
        .find(|l| l.trim_start().starts_with("Group  1:"))
        .expect("test setup: a second group")
        .to_owned();
    let ib: u64 = line
        .split("inode bitmap at ")
        .nth(1)
        .and_then(|r| r.split(',').next())
        .and_then(|n| n.trim().parse().ok())
        .expect("test setup: group 1's inode bitmap");
    common::debugfs_script(&t, &img, &[&format!("set_bg 1 inode_table {ib}")]);
    let n = common::ffsck(&[std::ffi::OsStr::new("-fn"), img.path.as_os_str()]);
    assert!(
        n.stdout
            .contains("ext2fs_check_desc: Corrupt group descriptor: bad block for inode table\nffsck: Group descriptors look bad... trying backup blocks..."),
        "{}",
        n.stdout
    );
    assert!(!n.stdout.contains("garbage"), "{}", n.stdout);
    let run = common::ffsck(&[std::ffi::OsStr::new("-fy"), img.path.as_os_str()]);
    assert_eq!(run.code(), 1, "{}\n{}", run.stdout, run.stderr);
    let (code, out) = common::e2fsck_n(&t, &img.path);
    assert_eq!(code, 0, "{out}");
    assert!(!out.contains("look bad"), "primary not rewritten\n{out}");
    let after = common::debugfs_r(&t, &img.path, "stats");
    assert!(after.contains(&line), "group 1 not restored:\n{after}");
}

/// A primary superblock with a bad magic number: the backup is used, and its descriptors are
/// read without their (stale) uninit flags, as libext2fs reads them. `-n` then reports what
/// e2fsck -n reports, with the same exit code, and `-y` leaves a clean file system.
#[test]
fn a_backup_superblock_is_read_as_e2fsck_reads_it() {
    let Some(t) = common::tools() else { return };
    let img = common::mkfs(&t, "ext4", &["-b", "1024"], "32M");
    // s_magic, at byte 56 of the superblock.
    common::patch(&img.path, 1024 + 56, &[0, 0]);
    let (e2, e2_out) = common::e2fsck_n(&t, &img.path);
    assert_eq!(e2, 4, "test setup: e2fsck -n\n{e2_out}");
    let n = common::ffsck(&[std::ffi::OsStr::new("-fn"), img.path.as_os_str()]);
    assert_eq!(n.code(), e2, "ffsck -n\n{}\ne2fsck -n\n{e2_out}", n.stdout);
    for line in e2_out
        .lines()
        .filter(|l| l.starts_with("Block bitmap differences:  +"))
    {
        assert!(n.stdout.contains(line), "{line}\n{}", n.stdout);
    }
    let run = common::ffsck(&[std::ffi::OsStr::new("-fy"), img.path.as_os_str()]);
    assert_eq!(run.code(), 1, "{}\n{}", run.stdout, run.stderr);
    let (code, out) = common::e2fsck_n(&t, &img.path);
    assert_eq!(code, 0, "{out}");
}

/// `ffsck -fn` reports `says` and exits 4; one `ffsck -fy` exits 1 and leaves a file system
/// e2fsck and ffsck both find clean.
fn assert_found_and_repaired(t: &Tools, img: &common::Image, what: &str, says: &str) {
    let n = common::ffsck(&[std::ffi::OsStr::new("-fn"), img.path.as_os_str()]);
    assert!(n.stdout.contains(says), "{what}: ffsck -fn\n{}", n.stdout);
    assert_eq!(n.code(), 4, "{what}: ffsck -fn\n{}", n.stdout);
    let run = common::ffsck(&[std::ffi::OsStr::new("-fy"), img.path.as_os_str()]);
    assert_eq!(
        run.code(),
        1,
        "{what}: ffsck -fy\n{}{}",
        run.stdout,
        run.stderr
    );
    let (code, out) = common::e2fsck_n(t, &img.path);
    assert_eq!(
        code, 0,
        "{what}: e2fsck -fn after the repair\n{out}\n{}",
        run.stdout
    );
    let again = common::ffsck(&[std::ffi::OsStr::new("-fn"), img.path.as_os_str()]);
    assert_eq!(
        again.code(),
        0,
        "{what}: second ffsck -fn\n{}",
        again.stdout
    );
}

/// The resize inode's double-indirect block, from `debugfs stat <7>`.
fn resize_dind(t: &Tools, img: &common::Image) -> u64 {
    let stat = common::debugfs_r(t, &img.path, "stat <7>");
    stat.split("(DIND):")
        .nth(1)
        .and_then(|r| r.split(|c: char| !c.is_ascii_digit()).next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("test setup: no DIND block in\n{stat}"))
}

/// Illegal block numbers in the resize inode's map, where e2fsck's superblock check does not
/// look (so pass 1 finds them): one `-fy` rebuilds the map, as e2fsck's one run clears them.
#[test]
fn a_damaged_resize_inode_map_is_rebuilt_in_one_run() {
    let Some(t) = common::tools() else { return };
    // The double-indirect pointer on a descriptor block (one group: no backup to compare).
    let img = common::mkfs(&t, "ext4", &["-b", "4096", "-O", "^metadata_csum"], "16M");
    common::debugfs_script(&t, &img, &["sif <7> block[DIND] 1"]);
    assert_found_and_repaired(
        &t,
        &img,
        "DIND on the descriptors",
        "Inode 7 has illegal block(s)",
    );
    // An out-of-range indirect block in a double-indirect slot past the quarter of the
    // reserved descriptor blocks e2fsck checks.
    let img = common::mkfs(&t, "ext2", &["-b", "1024"], "16M");
    let dind = resize_dind(&t, &img);
    let stats = common::debugfs_r(&t, &img.path, "stats");
    let reserved: u64 = stats
        .lines()
        .find_map(|l| l.strip_prefix("Reserved GDT blocks:"))
        .and_then(|v| v.trim().parse().ok())
        .expect("test setup: reserved GDT blocks");
    // Slots from the descriptor count on name reserved blocks; the last one is unchecked.
    let slot = 1 + reserved - 1;
    common::patch(
        &img.path,
        dind * 1024 + 4 * slot,
        &0x0100_0000u32.to_le_bytes(),
    );
    let (e2, out) = common::e2fsck_n(&t, &img.path);
    assert_ne!(e2, 0, "test setup: e2fsck must see the damage\n{out}");
    assert_found_and_repaired(
        &t,
        &img,
        "an illegal indirect block",
        "Illegal indirect block",
    );
}

/// Without the resize_inode feature the resize inode's blocks still count as in use until the
/// inode is cleared, as e2fsck counts them: answered no, no bitmap difference follows.
#[test]
fn a_resize_inode_left_without_its_feature_keeps_its_blocks() {
    let Some(t) = common::tools() else { return };
    let img = common::mkfs(&t, "ext4", &["-O", "^metadata_csum"], "16M");
    common::debugfs_script(&t, &img, &["feature -resize_inode"]);
    let (e2, out) = common::e2fsck_n(&t, &img.path);
    let n = common::ffsck(&[std::ffi::OsStr::new("-fn"), img.path.as_os_str()]);
    assert!(
        n.stdout.contains("the resize inode is non-zero"),
        "{}",
        n.stdout
    );
    assert!(
        !n.stdout.contains("Block bitmap differences"),
        "{}",
        n.stdout
    );
    assert_eq!(n.code(), e2, "ffsck -fn\n{}\ne2fsck -fn\n{out}", n.stdout);
}

/// One-group file systems have no backup superblock: a field the rest of the superblock gives
/// a value to is set from it (e2fsck sets only the inode count, and stops at the others). With
/// metadata_csum the stale checksum names the damaged field. Each one `-fy` leaves a superblock
/// e2fsck opens and finds clean, with the field as it was.
#[test]
fn a_superblock_without_backups_is_rebuilt_from_its_other_fields() {
    let Some(t) = common::tools() else { return };
    // (byte offset in the superblock, xor, `stats` line that must come back, report)
    let cases: &[(u64, u8, &str, &str)] = &[
        (41, 0x10, "Inodes per group:", "s_inodes_per_group is"),
        (1, 0x10, "Inode count:", "Inode count in the superblock is"),
        (33, 0x10, "Blocks per group:", "s_blocks_per_group is"),
        (86, 0x10, "First inode:", "s_first_ino is"),
        (76, 0x04, "Filesystem revision #:", "s_rev_level is"),
        (24, 0x02, "Block size:", "s_log_block_size is"),
    ];
    for &(off, xor, line, says) in cases {
        for mkfs in [
            &["-b", "4096"][..],
            &["-b", "4096", "-O", "^metadata_csum"][..],
        ] {
            let img = common::mkfs(&t, "ext4", mkfs, "16M");
            let want = common::debugfs_r(&t, &img.path, "stats")
                .lines()
                .find(|l| l.starts_with(line))
                .expect("test setup: stats line")
                .to_owned();
            let mut b = [0u8; 1];
            let f = std::fs::read(&img.path).unwrap();
            b[0] = f[1024 + off as usize] ^ xor;
            common::patch(&img.path, 1024 + off, &b);
            // (With metadata_csum the checksum is left stale: it names the field.)
            let (e2, out) = common::e2fsck_n(&t, &img.path);
            assert_ne!(e2, 0, "test setup: e2fsck must see the damage\n{out}");
            let what = format!("{line} {mkfs:?}");
            assert_found_and_repaired(&t, &img, &what, says);
            let stats = common::debugfs_r(&t, &img.path, "stats");
            assert!(
                stats.contains(&want),
                "{what}: {want} not restored\n{stats}"
            );
        }
    }
}

/// A revision level too high in a primary whose backups agree on theirs: e2fsck stops there;
/// ffsck takes the backups' level, which under -n leaves the uncorrected exit bit, and -y
/// writes it.
#[test]
fn a_revision_too_high_is_corruption() {
    let Some(t) = common::tools() else { return };
    let img = common::mkfs(&t, "ext4", &["-b", "1024", "-O", "^metadata_csum"], "16M");
    common::patch(&img.path, 1024 + 76, &9u32.to_le_bytes());
    assert_found_and_repaired(
        &t,
        &img,
        "rev_level 9",
        "revision level (9) differs from that of every backup superblock (1)",
    );
}

/// Group 0's descriptor marked `INODE_UNINIT` (with a good checksum; unseen seed 3003, case
/// 287): e2fsck believes it, finds no root directory and makes an empty file system. Group 0
/// always holds the root and the reserved inodes, so ffsck reads its inodes anyway and only
/// the flag goes: one run, every file kept, and a new /lost+found made in group 0.
#[test]
fn group_zero_marked_inode_uninit_keeps_its_files() {
    let Some(t) = common::tools() else { return };
    let img = common::mkfs(&t, "ext4", &["-b", "1024"], "8M");
    common::settle(&t, &img.path);
    // And /lost+found's entry gone: the new one's inode and block come from group 0 (its
    // flag cannot keep them from being taken).
    common::debugfs_w(&t, &img.path, "unlink /lost+found");
    common::debugfs_w(&t, &img.path, "set_bg 0 flags 1");
    common::debugfs_w(&t, &img.path, "set_bg 0 checksum calc");
    let run = common::assert_one_run_repairs(&t, &img, "group 0 INODE_UNINIT", &[1]);
    assert!(
        run.stdout.contains("/lost+found not found.  Create? yes")
            && !run.stdout.contains("Cannot allocate"),
        "{}",
        run.stdout
    );
    common::inode_of(&t, &img.path, "/lost+found");
    assert!(
        run.stdout
            .contains("Group descriptor 0 marks its inodes uninitialized"),
        "{}",
        run.stdout
    );
    for rel in ["a/f1", "a/sub/s1", "b/x"] {
        assert_eq!(
            common::dump(&t, &img, &format!("/{rel}")),
            common::tree_file(&img, rel),
            "{rel}"
        );
    }
}
