//! Repair of damaged internal journals: one `ffsck -fy` leaves a file system e2fsck finds
//! clean, as `e2fsck -fy` would.

mod common;

use std::ffi::OsStr;

/// A version-2 journal superblock naming several users while the file system has no journal
/// UUID (a local journal cannot be shared): e2fsck clears the fields beyond the version-1
/// superblock, and so must one ffsck repair, on disk.
#[test]
fn local_journal_with_many_users_is_cleared() {
    let Some(t) = common::tools() else { return };
    for fs_type in ["ext3", "ext4"] {
        let img = common::mkfs(&t, fs_type, &["-b", "1024", "-J", "size=1"], "8M");
        let blk = common::bmap(&t, &img.path, "<8>", 0);
        // s_nr_users (big-endian) at offset 0x40 of the journal superblock.
        common::patch(&img.path, blk * 1024 + 0x40, &0x1234_5678u32.to_be_bytes());
        // e2fsck -n states the problem without a question, and stops.
        let (before, out) = common::e2fsck_n(&t, &img.path);
        assert_ne!(
            before, 0,
            "{fs_type}: test setup: e2fsck must see the damage\n{out}"
        );
        let run = common::ffsck(&[OsStr::new("-fy"), img.path.as_os_str()]);
        assert_eq!(
            run.code(),
            1,
            "{fs_type}: ffsck -fy\n{}{}",
            run.stdout,
            run.stderr
        );
        let (after, out) = common::e2fsck_n(&t, &img.path);
        assert_eq!(after, 0, "{fs_type}: e2fsck -fn after the repair\n{out}");
        let again = common::ffsck(&[OsStr::new("-fn"), img.path.as_os_str()]);
        assert_eq!(
            again.code(),
            0,
            "{fs_type}: second ffsck -fn\n{}",
            again.stdout
        );
        assert_eq!(
            common::read_u32(&img.path, blk * 1024 + 0x40),
            0,
            "{fs_type}: s_nr_users must be cleared on disk"
        );
    }
}

#[test]
fn an_invalid_journal_inode_is_dropped() {
    let Some(t) = common::tools() else { return };
    for fstype in ["ext3", "ext4"] {
        let img = common::mkfs(&t, fstype, &["-b", "1024"], "16M");
        // The journal inode loses its mapping, and the superblock its backup of it.
        common::debugfs_script(
            &t,
            &img,
            &[
                "sif <8> block[0] 0",
                "sif <8> block[1] 0",
                "ssv jnl_backup_type 0",
            ],
        );
        let run = common::ffsck(&[OsStr::new("-fn"), img.path.as_os_str()]);
        let want = "Superblock has an invalid journal (inode 8)";
        assert!(
            run.stdout.contains(want),
            "{fstype}: {want}\n{}",
            run.stdout
        );
        common::assert_repaired(&t, &img, fstype);
        let stats = common::debugfs_r(&t, &img.path, "stats");
        let features = stats
            .lines()
            .find(|l| l.starts_with("Filesystem features:"));
        assert!(
            features.is_some_and(|l| !l.contains("has_journal")),
            "{fstype}: {stats}"
        );
    }
}
