//! Repair of superblock fields and feature combinations (pass 0), a reserved inode's mode, the
//! casefold flag without the feature, and the orphan file: each case breaks one thing with
//! `debugfs -w` on an image built at run time, and one `ffsck -fy` must leave a file system
//! e2fsck and ffsck both find clean, with the field set as e2fsck sets it.

mod common;

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
