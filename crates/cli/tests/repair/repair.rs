//! Repair (`-y`, `-p`): one run leaves a file system e2fsck finds clean, keeps the files'
//! contents, can be undone byte for byte, finishes an interrupted repair from its redo log,
//! and preen stops at what it may not fix.

use crate::common;

use common::{Image, Tools};
use std::ffi::OsStr;
use std::path::Path;

/// Damage only this version of ffsck can repair: block count, link count, dtime, a free-count
/// in a descriptor (which also spoils its checksum), an inode bitmap bit.
fn repairable(t: &Tools, fs_type: &str) -> Image {
    let img = common::mkfs(t, fs_type, &[], "16M");
    common::debugfs_w(t, &img.path, "sif /a/f1 blocks 12345");
    common::debugfs_w(t, &img.path, "sif /a/f2 links_count 7");
    common::debugfs_w(t, &img.path, "sif /a/f3 dtime 12345");
    common::debugfs_w(t, &img.path, "set_bg 1 free_blocks_count 3");
    img
}

fn ffsck(args: &[&str], img: &Path) -> common::Run {
    let mut a: Vec<&OsStr> = args.iter().map(OsStr::new).collect();
    a.push(img.as_os_str());
    common::ffsck(&a)
}

/// Every sampled file in the image has the contents of the tree it was built from
/// (`debugfs dump` to a scratch file, compared byte for byte).
fn assert_contents_kept(t: &Tools, img: &Image) {
    for p in ["a/f1", "a/f2", "a/f3", "a/f4", "b/x", "sparse"] {
        let same = common::dump(t, img, &format!("/{p}")) == common::tree_file(img, p);
        assert!(same, "/{p}: contents differ after the repair");
    }
}

#[test]
fn one_yes_run_leaves_e2fsck_nothing_to_do() {
    let Some(t) = common::tools() else { return };
    for fs_type in ["ext4", "ext3", "ext2"] {
        let img = repairable(&t, fs_type);
        let (e2_before, _) = common::e2fsck_n(&t, &img.path);
        assert_eq!(
            e2_before, 4,
            "test setup: the damage must be visible to e2fsck"
        );
        let run = ffsck(&["-fy"], &img.path);
        assert_eq!(
            run.code(),
            1,
            "{fs_type}: ffsck -fy should fix everything (exit 1)\n{}\n{}",
            run.stdout,
            run.stderr
        );
        assert!(
            run.stdout.contains("FILE SYSTEM WAS MODIFIED"),
            "{}",
            run.stdout
        );
        // The repair state lives on the device: nothing is left beside the image.
        let mut left: Vec<String> = std::fs::read_dir(img.dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .filter(|n| n != "fs.img" && n != "tree")
            .collect();
        left.sort();
        assert!(
            left.is_empty(),
            "{fs_type}: files left beside the image: {left:?}"
        );
        // ext2 has no journal to commit through: a note says so; ext3/ext4 need none.
        assert_eq!(
            run.stdout
                .contains("not committing the repair through the journal"),
            fs_type == "ext2",
            "{fs_type}: {}",
            run.stdout
        );
        let (e2_code, e2_out) = common::e2fsck_n(&t, &img.path);
        assert_eq!(
            e2_code, 0,
            "{fs_type}: e2fsck -fn after ffsck -fy:\n{e2_out}"
        );
        assert_eq!(common::check_n(&img.path, 1).code(), 0);
        assert_contents_kept(&t, &img);
    }
}

#[test]
fn undo_file_restores_the_image_byte_for_byte() {
    let Some(t) = common::tools() else { return };
    let img = repairable(&t, "ext4");
    let original = common::read_all(&img.path);
    let undo = img.aux("undo");
    let run = ffsck(&["-fy", "--undo-file", undo.to_str().unwrap()], &img.path);
    assert_eq!(run.code(), 1, "{}\n{}", run.stdout, run.stderr);
    assert_ne!(
        common::read_all(&img.path),
        original,
        "the repair changed nothing"
    );
    let run = ffsck(&["--apply-undo", undo.to_str().unwrap()], &img.path);
    assert_eq!(run.code(), 0, "{}\n{}", run.stdout, run.stderr);
    common::assert_same_bytes(&original, &common::read_all(&img.path), "image after undo");
}

/// A repair that was committed to an explicit `--repair-log` but never applied (the device
/// refused the writes, as a crash would have stopped them) is finished by the next run given
/// the same log.
#[test]
fn an_interrupted_repair_is_finished_from_the_redo_log() {
    use ffsck_io::logfile::Record;
    use ffsck_io::redo::{DeviceId, RedoLog};
    use ffsck_io::{Device, FileDevice};
    let Some(t) = common::tools() else { return };
    let img = repairable(&t, "ext4");
    // The repaired image, from a copy.
    let copy = img.aux("copy.img");
    std::fs::copy(&img.path, &copy).unwrap();
    assert_eq!(ffsck(&["-fy"], &copy).code(), 1);
    let repaired = common::read_all(&copy);
    let original = common::read_all(&img.path);
    // Log the difference as one generation against a read-only device: the commit lands in
    // the log, the first device write fails.
    let bs = 1024;
    let records: Vec<Record> = (0..original.len() / bs)
        .filter(|&i| original[i * bs..(i + 1) * bs] != repaired[i * bs..(i + 1) * bs])
        .map(|i| Record {
            offset: (i * bs) as u64,
            data: repaired[i * bs..(i + 1) * bs].to_vec(),
        })
        .collect();
    assert!(!records.is_empty());
    let ro = FileDevice::open_read_only(&img.path).unwrap();
    let log_path = img.aux("repair.log");
    let log = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .open(&log_path)
        .unwrap();
    // The log names the file system it was made for (its UUID, at byte 0x68 of the
    // superblock).
    let mut tag = [0u8; 16];
    ro.read_at(&mut tag, 1024 + 0x68).unwrap();
    let id = DeviceId {
        size: ro.size(),
        tag,
    };
    let (mut redo, _) = RedoLog::open(log, &ro, id).unwrap();
    assert!(redo
        .commit_and_apply(&ro, &records, &mut |_| Ok(()))
        .is_err());
    drop(redo);
    common::assert_same_bytes(
        &original,
        &common::read_all(&img.path),
        "image before replay",
    );

    // A read-only check does not replay, and does not touch the log.
    let run = ffsck(&["-fn"], &img.path);
    assert_eq!(run.code(), 4, "{}", run.stdout);
    assert!(log_path.exists());
    // The next repair replays the log first, then finds nothing left to fix.
    let run = ffsck(
        &["-fy", "--repair-log", log_path.to_str().unwrap()],
        &img.path,
    );
    assert!(
        run.stdout.contains("finished an interrupted repair"),
        "{}\n{}",
        run.stdout,
        run.stderr
    );
    assert_eq!(run.code(), 0, "{}\n{}", run.stdout, run.stderr);
    // That run marks the file system checked at its own time: the primary superblock's write
    // and last-check times (and so its checksum) may differ from the first repair's.
    common::assert_same_bytes(
        &common::without_marks(repaired),
        &common::without_marks(common::read_all(&img.path)),
        "image after replay",
    );
    assert!(!log_path.exists());
}

#[test]
fn preen_fixes_what_is_safe_and_stops_at_the_rest() {
    let Some(t) = common::tools() else { return };
    let img = repairable(&t, "ext4");
    let run = ffsck(&["-fp"], &img.path);
    assert_eq!(run.code(), 1, "{}\n{}", run.stdout, run.stderr);
    assert_eq!(common::e2fsck_n(&t, &img.path).0, 0);

    // An unattached inode needs a question e2fsck never answers in preen mode.
    let img = common::mkfs(&t, "ext4", &[], "16M");
    common::debugfs_w(&t, &img.path, "sif /a/f5 blocks 999");
    common::debugfs_w(&t, &img.path, "unlink /a/f6");
    let run = ffsck(&["-fp"], &img.path);
    assert_eq!(run.code() & 4, 4, "{}\n{}", run.stdout, run.stderr);
    // On stderr, as e2fsck prints it.
    assert!(
        run.stderr
            .contains("UNEXPECTED INCONSISTENCY; RUN fsck MANUALLY"),
        "{}",
        run.stderr
    );
}

/// Entries naming an inode that was zeroed are cleared (pass 2), then the allocation
/// metadata is rebuilt without it.
#[test]
fn entries_to_unused_inodes_are_cleared() {
    let Some(t) = common::tools() else { return };
    for fs_type in ["ext4", "ext2"] {
        let img = common::mkfs(&t, fs_type, &[], "16M");
        common::debugfs_w(&t, &img.path, "link /a/f6 /c/other");
        common::debugfs_w(&t, &img.path, "clri /a/f6");
        common::assert_one_run_repairs(&t, &img, fs_type, &[1]);
        assert_contents_kept(&t, &img);
        let ls = common::debugfs_r(&t, &img.path, "ls -l /a");
        // A cleared entry keeps its name with inode 0.
        let live = ls
            .lines()
            .any(|l| l.ends_with(" f6") && !l.trim_start().starts_with("0 "));
        assert!(!live, "{fs_type}: the entry must be cleared:\n{ls}");
    }
}

/// An unattached file and an unconnected directory end up in /lost+found with the right
/// link counts and `..`; an unattached empty file is cleared instead.
#[test]
fn unattached_inodes_are_reconnected_to_lost_and_found() {
    let Some(t) = common::tools() else { return };
    for fs_type in ["ext4", "ext2"] {
        let img = common::mkfs(&t, fs_type, &[], "16M");
        common::debugfs_w(&t, &img.path, "unlink /a/f6");
        common::debugfs_w(&t, &img.path, "unlink /c/d");
        common::debugfs_w(&t, &img.path, "write /dev/null /a/empty");
        common::debugfs_w(&t, &img.path, "unlink /a/empty");
        common::assert_one_run_repairs(&t, &img, fs_type, &[1]);
        assert_contents_kept(&t, &img);
        let ls = common::debugfs_r(&t, &img.path, "ls /lost+found");
        assert_eq!(
            ls.matches('#').count(),
            2,
            "{fs_type}: two reconnected:\n{ls}"
        );
    }
}

/// A root directory with a deletion time (old mke2fs did this) gets it cleared.
#[test]
fn the_root_dtime_is_cleared() {
    let Some(t) = common::tools() else { return };
    let img = common::mkfs(&t, "ext4", &[], "16M");
    common::debugfs_w(&t, &img.path, "sif <2> dtime 12345");
    let run = ffsck(&["-fn"], &img.path);
    assert!(
        run.stdout.contains("Root inode has dtime set"),
        "{}",
        run.stdout
    );
    common::assert_repaired(&t, &img, "root dtime");
}

/// An xattr block pointer on a file system without `ext_attr`, and one past the end of the
/// device, are cleared in pass 2.
#[test]
fn stray_xattr_block_pointers_are_cleared() {
    let Some(t) = common::tools() else { return };
    let img = common::mkfs(&t, "ext2", &["-O", "^ext_attr"], "16M");
    common::debugfs_w(&t, &img.path, "sif /a/f1 file_acl 100");
    let run = ffsck(&["-fn"], &img.path);
    assert!(run.stdout.contains("should be zero"), "{}", run.stdout);
    common::assert_repaired(&t, &img, "file_acl without ext_attr");

    let img = common::mkfs(&t, "ext4", &[], "16M");
    common::debugfs_w(&t, &img.path, "sif /a/f1 file_acl 99999999");
    let run = ffsck(&["-fn"], &img.path);
    assert!(
        run.stdout.contains("Extended attribute block for inode"),
        "{}",
        run.stdout
    );
    common::assert_repaired(&t, &img, "file_acl out of range");
}

/// A file of 2 GiB or more turns on `large_file`; on a revision-0 file system the revision is
/// raised too, since revision 0 cannot carry feature flags.
#[test]
fn large_files_get_the_large_file_feature() {
    let Some(t) = common::tools() else { return };
    for args in [&["-O", "^large_file"][..], &["-r", "0"][..]] {
        let img = common::mkfs(&t, "ext2", args, "16M");
        common::debugfs_w(&t, &img.path, "sif /a/f2 size 0xC0000000");
        let run = ffsck(&["-fn"], &img.path);
        assert!(
            run.stdout.contains("lacks LARGE_FILE flag"),
            "{args:?}\n{}",
            run.stdout
        );
        common::assert_repaired(&t, &img, &format!("large file {args:?}"));
        let sb = common::debugfs_r(&t, &img.path, "stats");
        assert!(sb.contains("large_file"), "{args:?}\n{sb}");
    }
}

/// A slow symlink whose i_size disagrees with its target, or that maps more than its one
/// block, is invalid: cleared in pass 2, as e2fsck does.
#[test]
fn invalid_slow_symlinks_are_cleared() {
    let Some(t) = common::tools() else { return };
    let target = "t".repeat(100);
    for damage in ["sif /long size 70", "sif /long block[1] 1234"] {
        let img = common::mkfs(&t, "ext2", &[], "16M");
        common::debugfs_w(&t, &img.path, &format!("symlink /long /{target}"));
        let (clean, out) = common::e2fsck_n(&t, &img.path);
        assert_eq!(clean, 0, "test setup: a valid slow symlink\n{out}");
        assert_eq!(ffsck(&["-fn"], &img.path).code(), 0, "{damage}: before");
        common::debugfs_w(&t, &img.path, damage);
        let run = ffsck(&["-fn"], &img.path);
        assert!(
            run.stdout.contains("is invalid"),
            "{damage}\n{}",
            run.stdout
        );
        common::assert_repaired(&t, &img, damage);
    }
}

/// A directory whose mode says socket is recognised by its `.` and `..` entries and turned
/// back into a directory, keeping its files.
#[test]
fn a_directory_with_a_special_mode_is_recognised() {
    let Some(t) = common::tools() else { return };
    let img = common::mkfs(&t, "ext4", &[], "16M");
    common::debugfs_w(&t, &img.path, "sif /a mode 0140755");
    let run = ffsck(&["-fn"], &img.path);
    assert!(
        run.stdout
            .contains("is a socket but it looks like it is really a directory"),
        "{}",
        run.stdout
    );
    common::assert_repaired(&t, &img, "socket mode on a directory");
}

/// The same with a deletion time as well (an inode with links keeps its file and loses the
/// dtime, as e2fsck does): still recognised as a directory, its files kept. (The test used
/// to be skipped for an inode with a dtime, and the directory and its files were lost.)
#[test]
fn a_directory_with_a_special_mode_and_a_dtime_keeps_its_files() {
    let Some(t) = common::tools() else { return };
    let img = common::mkfs(&t, "ext4", &[], "16M");
    let want = common::dump(&t, &img, "/c/d/file02");
    assert!(!want.is_empty(), "test setup: /c/d/file02 is empty");
    common::debugfs_w(&t, &img.path, "sif /c/d dtime 1577836800");
    common::debugfs_w(&t, &img.path, "sif /c/d mode 020644");
    let run = ffsck(&["-fn"], &img.path);
    assert!(
        run.stdout
            .contains("is a character device but it looks like it is really a directory"),
        "{}",
        run.stdout
    );
    common::assert_repaired(&t, &img, "char-device mode and a dtime on a directory");
    assert_eq!(common::dump(&t, &img, "/c/d/file02"), want, "/c/d/file02");
}

/// An impossible i_extra_isize is reset to what the file system wants (an unaligned one is
/// rounded up), as e2fsck does.
#[test]
fn a_bad_extra_isize_is_reset() {
    let Some(t) = common::tools() else { return };
    for bad in ["3", "6", "400"] {
        let img = common::mkfs(&t, "ext4", &["-I", "256"], "16M");
        common::debugfs_w(&t, &img.path, &format!("sif /a/f2 extra_isize {bad}"));
        let run = ffsck(&["-fn"], &img.path);
        assert!(run.stdout.contains("extra size"), "{bad}\n{}", run.stdout);
        common::assert_repaired(&t, &img, &format!("extra_isize {bad}"));
    }
}

#[test]
fn an_unattached_inode_with_an_impossible_mode_is_cleared_in_pass_4() {
    let Some(t) = common::tools() else { return };
    let img = common::mkfs(&t, "ext4", &["-b", "1024"], "8M");
    common::debugfs_script(&t, &img, &["sif /a/f2 mode 0177777", "unlink /a/f2"]);
    let run = common::ffsck(&[OsStr::new("-fn"), img.path.as_os_str()]);
    let want = "(...) has invalid mode (0177777)";
    assert!(run.stdout.contains(want), "{want}\n{}", run.stdout);
    common::assert_repaired(&t, &img, "unattached inode with a bad mode");
    // Cleared, not reconnected.
    let lpf = common::debugfs_r(&t, &img.path, "ls /lost+found");
    assert!(!lpf.contains('#'), "{lpf}");
}

#[test]
fn a_wrong_entry_file_type_is_rewritten() {
    let Some(t) = common::tools() else { return };
    let img = common::mkfs(&t, "ext4", &["-b", "1024"], "8M");
    let name = "/many/entry-with-a-rather-long-name-007";
    // An empty file turned into a socket: its entry still says "regular file".
    common::debugfs_script(
        &t,
        &img,
        &[
            &format!("sif {name} mode 0140644"),
            &format!("sif {name} flags 0"),
            &format!("sif {name} block[0] 0"),
            &format!("sif {name} block[1] 0"),
            &format!("sif {name} block[2] 0"),
        ],
    );
    let run = common::ffsck(&[OsStr::new("-fn"), img.path.as_os_str()]);
    let want = "has an incorrect filetype (was 1, should be 6)";
    assert!(run.stdout.contains(want), "{want}\n{}", run.stdout);
    common::assert_repaired(&t, &img, "wrong entry file type");
    let ls = common::debugfs_r(&t, &img.path, "ls -l /many");
    let line = ls.lines().find(|l| l.contains("name-007")).unwrap_or("");
    assert!(line.contains("140644"), "{ls}");
}

#[test]
fn an_invalid_resize_inode_is_rebuilt() {
    let Some(t) = common::tools() else { return };
    let img = common::mkfs(&t, "ext4", &["-b", "1024"], "16M");
    let before = common::debugfs_r(&t, &img.path, "stat <7>");
    let count = |s: &str| {
        s.split("Blockcount: ")
            .nth(1)
            .and_then(|x| x.split_whitespace().next())
            .map(str::to_string)
            .unwrap_or_else(|| panic!("no block count in\n{s}"))
    };
    common::debugfs_script(&t, &img, &["sif <7> block[DIND] 0"]);
    let run = common::ffsck(&[OsStr::new("-fn"), img.path.as_os_str()]);
    assert!(
        run.stdout.contains("Resize inode not valid.  Recreate? no"),
        "{}",
        run.stdout
    );
    common::assert_repaired(&t, &img, "invalid resize inode");
    // The same map as mke2fs made: every reserved block and its backups.
    let after = common::debugfs_r(&t, &img.path, "stat <7>");
    assert_eq!(count(&before), count(&after), "{after}");
}

/// The resize inode's double-indirect block given a word outside the reserved descriptor slots,
/// pointing at a journal block (unseen seed 3003, case 565: a bit flip). e2fsck only fixes the
/// block count, and leaves the journal block mapped under the resize inode; the next journal
/// commit then fills it with another block's contents. ffsck rebuilds the inode (the journal
/// block stays the journal's), and the repair, committed through that journal, leaves a file
/// system e2fsck finds clean.
#[test]
fn a_resize_inode_mapping_a_journal_block_is_rebuilt() {
    let Some(t) = common::tools() else { return };
    let img = common::mkfs(&t, "ext3", &["-b", "4096"], "16M");
    common::settle(&t, &img.path);
    let stat = common::debugfs_r(&t, &img.path, "stat <7>");
    let dind: u64 = stat
        .split("(DIND):")
        .nth(1)
        .and_then(|x| x.split(|c: char| !c.is_ascii_digit()).next())
        .and_then(|x| x.parse().ok())
        .unwrap_or_else(|| panic!("test setup: no DIND block in\n{stat}"));
    let jblk = common::bmap(&t, &img.path, "<8>", 1);
    // The last word of the block: never a reserved descriptor slot on a one-group image.
    common::patch(&img.path, dind * 4096 + 4092, &(jblk as u32).to_le_bytes());
    let run = common::assert_one_run_repairs(&t, &img, "resize inode over the journal", &[1]);
    assert!(
        run.stdout
            .contains("Resize inode not valid.  Recreate? yes"),
        "{}",
        run.stdout
    );
    let after = common::debugfs_r(&t, &img.path, "stat <7>");
    assert!(!after.contains(&format!(":{jblk}")), "{after}");
}

/// A directory whose data is inline gets garbage in `l_i_file_acl_high` on a file system
/// without `64bit` (unseen seed 3002, case 417). Those bits are no part of the attribute block
/// number there: e2fsck reads the block number without them, finds the inline data in the
/// inode, and only clears the field. ffsck took them for a block number, found no inline data
/// and cleared the directory with its files.
#[test]
fn file_acl_high_bits_without_64bit_are_cleared_and_the_inline_directory_kept() {
    let Some(t) = common::tools() else { return };
    let img = common::mkfs(
        &t,
        "ext4",
        &[
            "-b",
            "4096",
            "-I",
            "256",
            "-O",
            "inline_data,^64bit,^metadata_csum",
        ],
        "16M",
    );
    common::settle(&t, &img.path);
    let ino = common::inode_of(&t, &img.path, "/a/emptydir");
    let stat = common::debugfs_r(&t, &img.path, &format!("stat <{ino}>"));
    assert!(
        stat.contains("Flags: 0x10000000"),
        "test setup: not inline\n{stat}"
    );
    let imap = common::debugfs_r(&t, &img.path, &format!("imap <{ino}>"));
    let num = |key: &str| -> u64 {
        let w = imap
            .split(key)
            .nth(1)
            .and_then(|x| x.split([',', '\n']).next())
            .unwrap_or("");
        let w = w.trim();
        w.strip_prefix("0x")
            .map_or_else(|| w.parse().ok(), |h| u64::from_str_radix(h, 16).ok())
            .unwrap_or_else(|| panic!("test setup: {imap}"))
    };
    let at = num("at block ") * 4096 + num("offset ") + 0x76;
    common::patch(&img.path, at, &[0xff, 0xff]);
    let run = common::assert_one_run_repairs(&t, &img, "file_acl_high on ^64bit", &[1]);
    assert!(
        run.stdout.contains("i_file_acl_hi for inode"),
        "{}",
        run.stdout
    );
    assert!(!run.stdout.contains("INLINE_DATA_FL"), "{}", run.stdout);
    assert_eq!(common::inode_of(&t, &img.path, "/a/emptydir"), ino);
}

#[test]
fn an_inline_symlink_whose_size_disagrees_with_its_target_is_cleared() {
    let Some(t) = common::tools() else { return };
    let img = common::mkfs(
        &t,
        "ext4",
        &["-b", "1024", "-I", "256", "-O", "inline_data"],
        "8M",
    );
    let stat = common::debugfs_r(&t, &img.path, "stat /b/long");
    assert!(
        stat.contains("Flags: 0x10000000"),
        "test setup: /b/long is not an inline symlink\n{stat}"
    );
    let len = common::LONG_LINK_TARGET.len();
    common::debugfs_script(&t, &img, &[&format!("sif /b/long size {}", len - 1)]);
    let run = common::ffsck(&[OsStr::new("-fn"), img.path.as_os_str()]);
    assert!(run.stdout.contains("(inode #"), "{}", run.stdout);
    assert!(run.stdout.contains("is invalid"), "{}", run.stdout);
    common::assert_repaired(&t, &img, "inline symlink size");
}

/// Both `e2fsck -fn` and `ffsck -fn` print each of `lines` on `img`.
fn both_say(t: &Tools, img: &Image, lines: &[String]) {
    let (_, e2) = common::e2fsck_n(t, &img.path);
    let run = ffsck(&["-fn"], &img.path);
    for line in lines {
        assert!(e2.contains(line), "test setup: e2fsck says\n{e2}");
        assert!(run.stdout.contains(line), "{line}\n{}", run.stdout);
    }
}

/// Pass-2 messages name the directory by its path, as e2fsck prints it: the same line from
/// both checkers, for an entry deep in the tree and one in the root.
#[test]
fn pass2_messages_name_directories_by_path() {
    let Some(t) = common::tools() else { return };
    let img = common::mkfs(&t, "ext4", &[], "16M");
    let inner = common::inode_of(&t, &img.path, "/a/sub/inner");
    // Entries naming an inode no file uses.
    common::debugfs_w(&t, &img.path, "link <1000> /a/sub/inner/ghost");
    common::debugfs_w(&t, &img.path, "link <1001> /ghost2");
    both_say(
        &t,
        &img,
        &[
            format!("Entry 'ghost' in /a/sub/inner ({inner}) has deleted/unused inode 1000."),
            "Entry 'ghost2' in / (2) has deleted/unused inode 1001.".to_owned(),
        ],
    );
}

/// Pass 3 names the directory an unconnected one was in by its path, as e2fsck does.
#[test]
fn pass3_names_the_old_parent_by_path() {
    let Some(t) = common::tools() else { return };
    let img = common::mkfs(&t, "ext4", &[], "16M");
    let inner = common::inode_of(&t, &img.path, "/a/sub/inner");
    common::debugfs_w(&t, &img.path, "unlink /a/sub/inner");
    both_say(
        &t,
        &img,
        &[format!(
            "Unconnected directory inode {inner} (was in /a/sub)"
        )],
    );
}

/// A reserved inode given a file's mode and the index flag (recipe s3002-c1137: a moved inode
/// table made inode 9 garbage): its mode is cleared, and then, being no directory, it loses
/// the flag in the same run, as e2fsck clears both. (The flag used to stay, and e2fsck asked
/// "has INDEX_FL flag set but is not a directory" after ffsck's repair.)
#[test]
fn a_reserved_inode_with_a_mode_and_the_index_flag_loses_both_in_one_run() {
    let Some(t) = common::tools() else { return };
    let img = common::mkfs(&t, "ext4", &["-b", "1024"], "8M");
    for cmd in ["sif <9> mode 0100644", "sif <9> flags 0x1000"] {
        common::debugfs_w(&t, &img.path, cmd);
    }
    let out = common::assert_one_run_repairs(&t, &img, "reserved inode 9", &[1]).stdout;
    for line in [
        "has invalid mode.  Clear? yes",
        "Inode 9 has INDEX_FL flag set but is not a directory.",
    ] {
        assert!(out.contains(line), "{line}\n{out}");
    }
}

/// A reserved inode given a mode and a block: its mode is cleared, and then (as libext2fs
/// judges an inode without a mode) it maps no blocks, so its block count is set to 0 and the
/// block freed, in the same run, as e2fsck does. (The block used to be walked as a file's, so
/// the count and the bitmap kept it and e2fsck found both wrong afterwards.)
#[test]
fn a_reserved_inode_with_a_mode_and_a_block_is_emptied_in_one_run() {
    let Some(t) = common::tools() else { return };
    let img = common::mkfs(&t, "ext2", &["-b", "1024"], "8M");
    for cmd in [
        "sif <9> mode 0100644",
        "sif <9> block[0] 4000",
        "sif <9> blocks 2",
        "setb 4000",
    ] {
        common::debugfs_w(&t, &img.path, cmd);
    }
    let out = common::assert_one_run_repairs(&t, &img, "reserved inode 9", &[1]).stdout;
    for line in [
        "Reserved inode 9 ",
        "has invalid mode.  Clear? yes",
        "Inode 9, i_blocks is 2, should be 0.  Fix? yes",
        "Block bitmap differences:  -4000",
    ] {
        assert!(out.contains(line), "{line}\n{out}");
    }
}
