//! A primary superblock that fails the opening rules on a one-group file system (no backup to
//! fall back on): the damaged field is set from the rest of the file system when the evidence
//! proves its value (a wiped magic number under a checksum, descriptor checksums or a root
//! directory that prove the rest; an inode size only one size fits; a block count past the
//! device that the superblock's checksum names; any one damaged byte a stale checksum names),
//! and refused when nothing proves it (a
//! blank device, random bytes, a count a truncated device would show as well). e2fsck itself
//! gives up on all of them; its `-fn` judges each repair. Fuzzer seed 1400 cases 9, 135, 160,
//! 195, 203, 278 and 279; seed 3002 cases 393, 397, 624, 793 and 1275 (a descriptor size, a
//! first inode, an external journal UUID beside a journal inode that holds the journal).

use crate::common;

use common::{Image, Tools};
use std::ffi::OsStr;
use std::path::Path;

const SB: u64 = 1024;
const MAGIC: u64 = SB + 0x38;
const BLOCKS_COUNT: u64 = SB + 0x04;
const DESC_SIZE: u64 = SB + 0xFE;
const FIRST_INO: u64 = SB + 0x54;
const JOURNAL_UUID: u64 = SB + 0xD0;

/// A single group (16 MiB of 4 KiB blocks, or 8 MiB of 1 KiB blocks): no backup superblock.
fn one_group(t: &Tools, fs: &str, block: &str, extra: &[&str]) -> Image {
    let mut args = vec!["-b", block];
    args.extend_from_slice(extra);
    let size = if block == "1024" { "8M" } else { "16M" };
    common::mkfs(t, fs, &args, size)
}

/// e2fsck refuses the image; `ffsck -fn` names `field`, exits 4 and writes nothing; one
/// `ffsck -fy` names it, exits 1 and leaves a file system e2fsck and ffsck find clean, with
/// /a/f1 as it was.
fn rebuilt_in_one_run(t: &Tools, img: &Image, field: &str, what: &str) {
    repaired_in_one_run(t, img, &format!("The superblock's {field}"), what);
}

/// `rebuilt_in_one_run` for a finding that says `says`.
fn repaired_in_one_run(t: &Tools, img: &Image, says: &str, what: &str) {
    let (e2, out) = common::e2fsck_n(t, &img.path);
    assert_eq!(e2 & 8, 8, "test setup ({what}): e2fsck gives up\n{out}");
    let before = common::read_all(&img.path);
    let n = common::check_n(&img.path, 1);
    assert_eq!(n.code(), 4, "{what}: ffsck -fn: {}", n.describe());
    assert!(
        n.run.stdout.contains(says),
        "{what}: -n says {says}\n{}",
        n.run.stdout
    );
    common::assert_same_bytes(&before, &common::read_all(&img.path), "ffsck -fn");
    let run = common::ffsck(&[OsStr::new("-fy"), img.path.as_os_str()]);
    assert_eq!(
        run.code(),
        1,
        "{what}: ffsck -fy\n{}\n{}",
        run.stdout,
        run.stderr
    );
    assert!(
        run.stdout.contains(says),
        "{what}: the repair says {says}\n{}",
        run.stdout
    );
    let (after, out) = common::e2fsck_n(t, &img.path);
    assert_eq!(after, 0, "{what}: e2fsck -fn after the repair\n{out}");
    let again = common::check_n(&img.path, 1);
    assert_eq!(
        again.code(),
        0,
        "{what}: second ffsck -fn: {}",
        again.describe()
    );
    assert!(
        common::dump(t, img, "/a/f1") == common::tree_file(img, "a/f1"),
        "{what}: /a/f1 changed"
    );
}

/// Both `ffsck -fn` and `ffsck -fy` refuse the device (exit 8, or 12 where e2fsck's question
/// to abort was answered) and leave it as it was.
fn refused(path: &Path, what: &str) {
    let before = common::read_all(path);
    for mode in ["-fn", "-fy"] {
        let run = common::ffsck(&[OsStr::new(mode), path.as_os_str()]);
        assert_eq!(
            run.code() & 8,
            8,
            "{what}: ffsck {mode} must refuse it\n{}\n{}",
            run.stdout,
            run.stderr
        );
        assert!(
            !run.stdout.contains("should be"),
            "{what}: nothing is rebuilt\n{}",
            run.stdout
        );
        common::assert_same_bytes(&before, &common::read_all(path), mode);
    }
}

/// Deterministic bytes (a fixed-seed xorshift), for the hostile images.
fn noise(len: usize, mut x: u64) -> Vec<u8> {
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect()
}

#[test]
fn a_wiped_magic_number_under_a_checksum_that_proves_the_rest_is_restored() {
    let Some(t) = common::tools() else {
        return common::skip("mke2fs, debugfs or e2fsck missing");
    };
    // metadata_csum, the checksum as it was: it holds once the magic is back.
    let img = one_group(&t, "ext4", "4096", &[]);
    common::patch(&img.path, MAGIC, &[0, 0]);
    rebuilt_in_one_run(&t, &img, "s_magic", "ext4, magic zeroed");
    assert_eq!(common::read_u32(&img.path, MAGIC) & 0xFFFF, 0xEF53);
}

#[test]
fn a_wiped_magic_number_on_ext2_is_restored_from_the_root_directory() {
    let Some(t) = common::tools() else {
        return common::skip("mke2fs, debugfs or e2fsck missing");
    };
    // No checksum anywhere: the root directory's "." and ".." where the descriptors put it.
    let img = one_group(&t, "ext2", "1024", &[]);
    common::patch(&img.path, MAGIC, &[0xFF, 0xFF]);
    rebuilt_in_one_run(&t, &img, "s_magic", "ext2, magic all ones");
    // The same with descriptor checksums (uninit_bg) as the proof.
    let img = one_group(&t, "ext4", "1024", &["-O", "^metadata_csum,uninit_bg"]);
    common::patch(&img.path, MAGIC, &[0x53, 0x6F]);
    rebuilt_in_one_run(&t, &img, "s_magic", "uninit_bg, magic bit flip");
}

#[test]
fn a_wiped_magic_number_without_proof_is_refused() {
    let Some(t) = common::tools() else {
        return common::skip("mke2fs, debugfs or e2fsck missing");
    };
    // ext2, magic zeroed, and the root directory's block zeroed: nothing proves the rest.
    let img = one_group(&t, "ext2", "1024", &[]);
    let root = common::bmap(&t, &img.path, "/", 0);
    common::patch(&img.path, root * 1024, &[0u8; 1024]);
    common::patch(&img.path, MAGIC, &[0, 0]);
    refused(&img.path, "ext2, magic and root block zeroed");
}

#[test]
fn a_blank_device_or_random_superblock_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let blank = dir.path().join("blank.img");
    std::fs::write(&blank, vec![0u8; 8 << 20]).unwrap();
    refused(&blank, "zeroed device");
    let random = dir.path().join("random.img");
    std::fs::write(&random, noise(8 << 20, 0x9E37_79B9_7F4A_7C15)).unwrap();
    refused(&random, "random device");
    // Random superblock bytes on a blank device, with and without the magic number.
    let sb = dir.path().join("sb.img");
    let mut img = vec![0u8; 8 << 20];
    img[1024..2048].copy_from_slice(&noise(1024, 0xD1B5_4A32_D192_ED03));
    std::fs::write(&sb, &img).unwrap();
    refused(&sb, "random superblock");
    img[0x438..0x43A].copy_from_slice(&0xEF53u16.to_le_bytes());
    std::fs::write(&sb, &img).unwrap();
    refused(&sb, "random superblock with the magic number");
}

#[test]
fn an_inode_size_only_one_size_fits_is_rebuilt() {
    let Some(t) = common::tools() else {
        return common::skip("mke2fs, debugfs or e2fsck missing");
    };
    // metadata_csum (the root inode's checksum) and ext2 (the root directory alone).
    for (fs, block, extra) in [
        ("ext4", "1024", vec![]),
        ("ext2", "4096", vec!["-I", "128"]),
    ] {
        let img = one_group(&t, fs, block, &extra);
        common::debugfs_w(&t, &img.path, "ssv inode_size 257");
        rebuilt_in_one_run(&t, &img, "s_inode_size", &format!("{fs} {block}"));
    }
}

#[test]
fn an_inode_size_without_a_root_to_prove_it_is_refused() {
    let Some(t) = common::tools() else {
        return common::skip("mke2fs, debugfs or e2fsck missing");
    };
    let img = one_group(&t, "ext2", "4096", &[]);
    common::debugfs_w(&t, &img.path, "clri <2>");
    common::debugfs_w(&t, &img.path, "ssv inode_size 257");
    refused(&img.path, "inode size 257, root inode cleared");
}

#[test]
fn a_block_count_past_the_device_is_set_only_when_the_checksum_names_it() {
    let Some(t) = common::tools() else {
        return common::skip("mke2fs, debugfs or e2fsck missing");
    };
    // One block more than the device, the checksum as it was: it holds with the device's size.
    let img = one_group(&t, "ext4", "1024", &[]);
    let count = common::read_u32(&img.path, BLOCKS_COUNT);
    common::patch(&img.path, BLOCKS_COUNT, &(count + 1).to_le_bytes());
    rebuilt_in_one_run(&t, &img, "s_blocks_count", "metadata_csum, stale checksum");
    assert_eq!(common::read_u32(&img.path, BLOCKS_COUNT), count);
    // Without a checksum (or with one made over the wrong count) nothing names the count, and
    // the check goes on as e2fsck's `-n` does: pass 1 then finds no block in use past the
    // device's end, and the size is set to the device's (`repair_short_device` has the case
    // where something lies there, and the check stops).
    for (args, how) in [
        (&["-O", "^metadata_csum"][..], "no checksum"),
        (&[][..], "checksum over the wrong count"),
    ] {
        let img = one_group(&t, "ext4", "4096", args);
        common::debugfs_w(&t, &img.path, "ssv blocks_count 4097");
        let run = common::assert_one_run_repairs(&t, &img, how, &[1]);
        assert!(
            run.stdout
                .contains("no block past the device's end is in use"),
            "{how}\n{}",
            run.stdout
        );
        assert_eq!(common::read_u32(&img.path, BLOCKS_COUNT), 4096, "{how}");
    }
}

#[test]
fn a_byte_the_stale_checksum_names_is_put_back() {
    let Some(t) = common::tools() else {
        return common::skip("mke2fs, debugfs or e2fsck missing");
    };
    // s_reserved_gdt_blocks (0xCE) with a bit flipped, the checksum as it was: of every
    // single-byte change, only putting that bit back makes the checksum hold (seed 2001 case 19).
    let img = one_group(&t, "ext4", "4096", &[]);
    let at = SB + 0xCE;
    let was = common::read_all(&img.path)[at as usize];
    common::patch(&img.path, at, &[was ^ 0x10]);
    rebuilt_in_one_run(&t, &img, "s_reserved_gdt_blocks", "reserved GDT blocks");
    assert_eq!(common::read_all(&img.path)[at as usize], was);
}

#[test]
fn a_grown_inodes_per_group_is_set_back_from_the_inode_count() {
    let Some(t) = common::tools() else {
        return common::skip("mke2fs, debugfs or e2fsck missing");
    };
    // A flipped bit makes s_inodes_per_group 4272 where the inode count says 176 (fuzzer
    // seed 2001 case 91): e2fsck trusts the former and clears file data it reads as inodes;
    // the block bitmap proves the longer inode table wrong (it runs over free blocks).
    const IPG: u64 = SB + 0x28;
    let img = one_group(&t, "ext2", "4096", &["-N", "176", "-I", "256"]);
    assert_eq!(common::read_u32(&img.path, IPG), 176, "test setup");
    common::patch(&img.path, IPG, &(176u32 | 4096).to_le_bytes());
    rebuilt_in_one_run(
        &t,
        &img,
        "s_inodes_per_group",
        "ext2, inodes per group grown",
    );
    assert_eq!(common::read_u32(&img.path, IPG), 176);

    // An inode count that is the damaged field keeps e2fsck's answer.
    const INODES: u64 = SB;
    let img = one_group(&t, "ext2", "4096", &["-N", "176", "-I", "256"]);
    common::patch(&img.path, INODES, &168u32.to_le_bytes());
    let run = common::ffsck(&[OsStr::new("-fy"), img.path.as_os_str()]);
    assert!(
        run.stdout
            .contains("Inode count in the superblock is 168, should be 176"),
        "{}",
        run.stdout
    );
    let (after, out) = common::e2fsck_n(&t, &img.path);
    assert_eq!(after, 0, "e2fsck -fn after the repair\n{out}");
}

#[test]
fn a_descriptor_size_the_rules_refuse_is_set_where_proven() {
    let Some(t) = common::tools() else {
        return common::skip("mke2fs, debugfs or e2fsck missing");
    };
    let desc_size = |img: &Image| common::read_u32(&img.path, DESC_SIZE) & 0xFFFF;
    // Without 64bit the field is never read: 0, as mke2fs leaves it (seed 3002 case 393).
    let img = one_group(&t, "ext4", "4096", &["-O", "^64bit"]);
    common::debugfs_w(&t, &img.path, "ssv desc_size 65535");
    rebuilt_in_one_run(&t, &img, "s_desc_size", "^64bit, desc_size 65535");
    assert_eq!(desc_size(&img), 0);
    // 64bit, the checksum type changed under a good checksum, then two bytes of the size
    // under the stale one: the checksum names 64 (seed 3002 case 1275).
    let img = one_group(&t, "ext4", "1024", &[]);
    common::debugfs_w(&t, &img.path, "ssv checksum_type 2");
    common::patch(&img.path, DESC_SIZE, &[0x00, 0x3F]);
    rebuilt_in_one_run(&t, &img, "s_desc_size", "64bit, stale checksum");
    assert_eq!(desc_size(&img), 64);
    assert!(
        common::read_all(&img.path)[(SB + 0x175) as usize] == 1,
        "crc32c again"
    );
    // 64bit under a good checksum (or none): the one size every descriptor checksum holds at.
    for extra in [vec![], vec!["-O", "^metadata_csum,uninit_bg"]] {
        let img = one_group(&t, "ext4", "1024", &extra);
        common::debugfs_w(&t, &img.path, "ssv desc_size 48");
        rebuilt_in_one_run(&t, &img, "s_desc_size", &format!("64bit {extra:?}"));
        assert_eq!(desc_size(&img), 64);
    }
}

#[test]
fn a_descriptor_size_without_checksums_is_the_smallest_proved_and_zero_is_refused() {
    let Some(t) = common::tools() else {
        return common::skip("mke2fs, debugfs or e2fsck missing");
    };
    // 64bit without descriptor checksums: a one-group file system reads its one descriptor
    // the same at any size, so the smallest (mke2fs's 64 bytes) is taken once the descriptor
    // checks and the root directory is where it says (fuzz seed 3023 case 2379).
    let img = one_group(&t, "ext4", "1024", &["-O", "^metadata_csum"]);
    common::debugfs_w(&t, &img.path, "ssv desc_size 48");
    rebuilt_in_one_run(&t, &img, "s_desc_size", "64bit, no checksums");
    assert_eq!(common::read_u32(&img.path, DESC_SIZE) & 0xFFFF, 64);
    // 0 with 64bit stays fatal, as e2fsck's f_desc_size_zero wants it.
    let img = one_group(&t, "ext4", "1024", &[]);
    common::debugfs_w(&t, &img.path, "ssv desc_size 0");
    refused(&img.path, "64bit, desc_size 0");
}

#[test]
fn a_first_inode_below_the_reserved_inodes_is_set_beside_a_damaged_descriptor() {
    let Some(t) = common::tools() else {
        return common::skip("mke2fs, debugfs or e2fsck missing");
    };
    // The first inode locates nothing: a descriptor damaged beside it (its block bitmap out
    // of the group) is a finding of its own, not a reason to refuse (seed 3002 case 397).
    let img = one_group(&t, "ext4", "1024", &[]);
    common::debugfs_w(&t, &img.path, "set_bg 0 block_bitmap 99999");
    common::debugfs_w(&t, &img.path, "set_bg 0 checksum calc");
    common::debugfs_w(&t, &img.path, "ssv first_ino 1");
    rebuilt_in_one_run(
        &t,
        &img,
        "s_first_ino",
        "first_ino 1, block bitmap moved out",
    );
    assert_eq!(common::read_u32(&img.path, FIRST_INO), 11);
}

#[test]
fn an_external_journal_uuid_beside_a_journal_inode_that_holds_the_journal_is_cleared() {
    let Some(t) = common::tools() else {
        return common::skip("mke2fs, debugfs or e2fsck missing");
    };
    const SAYS: &str = "The superblock names an external journal";
    // A flipped UUID byte, no checksum (seed 3002 cases 624 and 793).
    for (fs, block, extra) in [
        ("ext3", "4096", vec![]),
        ("ext4", "1024", vec!["-O", "^metadata_csum,uninit_bg"]),
    ] {
        let img = one_group(&t, fs, block, &extra);
        common::patch(&img.path, JOURNAL_UUID + 1, &[0x10]);
        repaired_in_one_run(&t, &img, SAYS, &format!("{fs} {block}"));
        assert_eq!(common::read_all(&img.path)[JOURNAL_UUID as usize + 1], 0);
    }
    // Under a checksum made over it.
    let img = one_group(&t, "ext4", "4096", &[]);
    common::debugfs_w(
        &t,
        &img.path,
        "ssv journal_uuid 00006f00-0000-0000-0000-000000000000",
    );
    repaired_in_one_run(&t, &img, SAYS, "metadata_csum");
}

/// A flipped byte in the journal UUID of an ext2 file system (unseen seed 3003, cases 999 and
/// 1184): no journal at all, yet e2fsck goes looking for the external one the UUID names and
/// stops. tune2fs clears the UUID with the journal, so only damage leaves one here.
#[test]
fn an_external_journal_uuid_on_a_file_system_without_a_journal_is_cleared() {
    let Some(t) = common::tools() else {
        return common::skip("mke2fs, debugfs or e2fsck missing");
    };
    let img = one_group(&t, "ext2", "1024", &[]);
    common::patch(&img.path, JOURNAL_UUID + 3, &[0x40]);
    repaired_in_one_run(&t, &img, "but the file system has no journal", "ext2");
    assert_eq!(common::read_all(&img.path)[JOURNAL_UUID as usize + 3], 0);
}

#[test]
fn an_external_journal_uuid_beside_a_journal_inode_without_a_journal_is_refused() {
    let Some(t) = common::tools() else {
        return common::skip("mke2fs, debugfs or e2fsck missing");
    };
    // The journal inode's first block zeroed: nothing proves the journal internal.
    let img = one_group(&t, "ext3", "4096", &[]);
    let jsb = common::bmap(&t, &img.path, "<8>", 0);
    common::patch(&img.path, jsb * 4096, &[0u8; 4096]);
    common::patch(&img.path, JOURNAL_UUID + 1, &[0x10]);
    refused(&img.path, "journal superblock zeroed");
    let run = common::ffsck(&[OsStr::new("-fn"), img.path.as_os_str()]);
    assert!(
        !run.stdout.contains("names an external journal"),
        "{}",
        run.stdout
    );
}

/// A byte of a field longer than eight bytes, under a stale checksum (unseen seed 3003, case
/// 572: a flipped byte of the external journal's UUID, so the journal given with `-j` no
/// longer matched): the checksum names the byte, and it is put back.
#[test]
fn a_byte_of_a_long_field_the_stale_checksum_names_is_put_back() {
    let Some(t) = common::tools() else {
        return common::skip("mke2fs, debugfs or e2fsck missing");
    };
    let img = one_group(&t, "ext4", "1024", &["-L", "label"]);
    let at = SB + 0x78;
    let was = common::read_all(&img.path)[at as usize];
    common::patch(&img.path, at, &[was ^ 0x20]);
    repaired_in_one_run(&t, &img, "The superblock's s_volume_name[0]", "volume name");
    assert_eq!(common::read_all(&img.path)[at as usize], was);
}

/// More reserved descriptor blocks than a block of pointers holds (unseen seed 3003, case
/// 813): e2fsck refuses the superblock. The resize inode's double-indirect block points at
/// each reserved block in turn, so it gives the count back.
#[test]
fn a_reserved_gdt_count_the_rules_refuse_is_read_back_from_the_resize_inode() {
    let Some(t) = common::tools() else {
        return common::skip("mke2fs, debugfs or e2fsck missing");
    };
    let img = one_group(&t, "ext4", "4096", &["-O", "^metadata_csum"]);
    let at = SB + 0xCE;
    let bytes = common::read_all(&img.path);
    let was = u16::from_le_bytes([bytes[at as usize], bytes[at as usize + 1]]);
    assert!(was > 0, "test setup: no reserved descriptor blocks");
    common::patch(&img.path, at, &11259u16.to_le_bytes());
    rebuilt_in_one_run(&t, &img, "s_reserved_gdt_blocks", "reserved GDT blocks");
    let bytes = common::read_all(&img.path);
    assert_eq!(
        u16::from_le_bytes([bytes[at as usize], bytes[at as usize + 1]]),
        was
    );
}
