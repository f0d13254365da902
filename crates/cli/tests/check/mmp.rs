//! Multiple-mount protection: a file system made with `-O mmp` checks clean (its MMP block is
//! metadata, not a leaked block); a bad MMP block number, magic or checksum is found as e2fsck
//! finds it (stopping under -n, exit 12) and one `ffsck -fy` leaves a block e2fsck accepts; a
//! block that says a checker or an unknown operation holds the file system stops both modes
//! without a write; and a repair waits out a holder's sequence, refusing when it changes.

use crate::common;

use common::Tools;
use std::path::Path;
use std::time::Duration;

const SB: u64 = 1024;
const S_MMP_BLOCK: u64 = 0x168;
const BLOCK: u64 = 4096;
/// Offsets inside the MMP block.
const MMP_SEQ: u64 = 0x4;
const MMP_NODENAME: u64 = 0x10;

fn image(t: &Tools, csum: bool) -> common::Image {
    let features = if csum { "mmp" } else { "mmp,^metadata_csum" };
    common::mkfs(t, "ext4", &["-b", "4096", "-O", features], "32M")
}

/// The MMP block's byte offset, as the superblock names it.
fn mmp_at(img: &Path) -> u64 {
    u64::from(common::read_u32(img, SB + S_MMP_BLOCK)) * BLOCK
}

fn magic_ok(img: &Path) -> bool {
    common::read_u32(img, mmp_at(img)) == 0x004D_4D50
}

#[test]
fn a_clean_mmp_file_system_checks_clean() {
    let Some(t) = common::tools() else { return };
    let img = image(&t, true);
    let n = common::check_n(&img.path, 2);
    assert_eq!(n.code(), 0, "{}", n.describe());
    let y = common::ffsck(&["-fy".as_ref(), img.path.as_os_str()]);
    assert_eq!(y.code(), 0, "{}{}", y.stdout, y.stderr);
    let (after, out) = common::e2fsck_n(&t, &img.path);
    assert_eq!(after, 0, "{out}");
}

/// Damage the MMP block, then: `ffsck -fn` reports `finding` and stops with e2fsck's exit
/// code (12), and one `ffsck -fy` leaves an MMP block with its magic that e2fsck accepts.
/// `-fy` exits with `fixed` (0 when the fix is a clean block over the old one, which e2fsck
/// does not count as a change).
fn bad_block_case(
    what: &str,
    csum: bool,
    damage: impl Fn(&Tools, &Path),
    finding: &str,
    fixed: i32,
) {
    let Some(t) = common::tools() else { return };
    let img = image(&t, csum);
    damage(&t, &img.path);
    let (e2, out) = common::e2fsck_n(&t, &img.path);
    assert_eq!(e2, 12, "{what}: test setup: e2fsck -fn must stop\n{out}");
    let n = common::check_n(&img.path, 1);
    assert_eq!(n.code(), 12, "{what}: ffsck -fn\n{}", n.describe());
    assert!(n.has(finding), "{what}: ffsck -fn\n{}", n.describe());
    let y = common::ffsck(&["-fy".as_ref(), img.path.as_os_str()]);
    assert_eq!(
        y.code(),
        fixed,
        "{what}: ffsck -fy\n{}{}",
        y.stdout,
        y.stderr
    );
    let (after, out) = common::e2fsck_n(&t, &img.path);
    assert_eq!(after, 0, "{what}: e2fsck -fn after ffsck -fy\n{out}");
    assert!(magic_ok(&img.path), "{what}: the MMP block has no magic");
    let again = common::check_n(&img.path, 1);
    assert_eq!(again.code(), 0, "{what}: {}", again.describe());
}

#[test]
fn mmp_block_number_zero() {
    bad_block_case(
        "s_mmp_block 0 (debugfs ssv)",
        true,
        |t, img| {
            // debugfs writes the field (checksum recomputed), then complains on closing
            // about the MMP block it can no longer find.
            let _ = std::process::Command::new(&t.debugfs)
                .args(["-w", "-R", "ssv mmp_block 0"])
                .arg(img)
                .output()
                .unwrap();
            assert_eq!(common::read_u32(img, SB + S_MMP_BLOCK), 0, "test setup");
        },
        "P0_MMP_INVALID_BLK",
        1,
    );
}

#[test]
fn mmp_block_number_past_the_end() {
    bad_block_case(
        "s_mmp_block past the end",
        false,
        |_, img| common::patch(img, SB + S_MMP_BLOCK, &(1u64 << 40).to_le_bytes()),
        "P0_MMP_INVALID_BLK",
        1,
    );
}

/// A number on the inode table: e2fsck writes a clean MMP block over the inodes there (its
/// "invalid MMP magic"); ffsck takes it as a bad number and gives the MMP a free block, so
/// no inode is lost.
#[test]
fn mmp_block_number_on_the_inode_table() {
    let Some(t) = common::tools() else { return };
    let img = image(&t, false);
    let table = common::debugfs_r(&t, &img.path, "stats")
        .lines()
        .find_map(|l| {
            let (_, at) = l.split_once("inode table at ")?;
            let digits: String = at.chars().take_while(char::is_ascii_digit).collect();
            digits.parse::<u64>().ok()
        })
        .expect("test setup: debugfs stats names group 0's inode table");
    common::patch(&img.path, SB + S_MMP_BLOCK, &table.to_le_bytes());
    let (e2, out) = common::e2fsck_n(&t, &img.path);
    assert_eq!(e2, 12, "test setup: e2fsck -fn must stop\n{out}");
    let n = common::check_n(&img.path, 1);
    assert!(n.has("P0_MMP_INVALID_BLK"), "{}", n.describe());
    let y = common::ffsck(&["-fy".as_ref(), img.path.as_os_str()]);
    assert_eq!(y.code(), 1, "{}{}", y.stdout, y.stderr);
    let (after, out) = common::e2fsck_n(&t, &img.path);
    assert_eq!(after, 0, "e2fsck -fn after ffsck -fy\n{out}");
    assert_ne!(
        mmp_at(&img.path),
        table * BLOCK,
        "the MMP block stayed on the table"
    );
    assert!(magic_ok(&img.path));
    assert_eq!(
        common::dump(&t, &img, "/a/f1"),
        common::tree_file(&img, "a/f1")
    );
}

#[test]
fn mmp_block_zeroed() {
    bad_block_case(
        "MMP block zeroed",
        true,
        |_, img| common::patch(img, mmp_at(img), &[0u8; 4096]),
        "P0_MMP_INVALID_MAGIC",
        0,
    );
}

#[test]
fn mmp_block_checksum() {
    bad_block_case(
        "MMP node name changed under metadata_csum",
        true,
        |_, img| common::patch(img, mmp_at(img) + MMP_NODENAME, b"elsewhere"),
        "P0_MMP_CSUM_INVALID",
        0,
    );
}

/// A sequence that says a checker (or an unknown operation) holds the file system: both modes
/// stop with exit 12, as e2fsck does, and the image is not written.
#[test]
fn held_by_a_checker_or_unknown_operation_stops_both_modes() {
    let Some(t) = common::tools() else { return };
    for (what, seq) in [("fsck", 0xE24D_4D50u32), ("unknown", 0xF000_0000)] {
        let img = image(&t, false);
        common::patch(&img.path, mmp_at(&img.path) + MMP_SEQ, &seq.to_le_bytes());
        let (e2, out) = common::e2fsck_n(&t, &img.path);
        assert_eq!(e2, 12, "{what}: test setup: e2fsck -fn must stop\n{out}");
        let before = common::read_all(&img.path);
        let n = common::check_n(&img.path, 1);
        assert_eq!(n.code(), 12, "{what}: ffsck -fn\n{}", n.describe());
        assert!(n.has("P0_MMP_HELD"), "{what}: {}", n.describe());
        let y = common::ffsck(&["-fy".as_ref(), img.path.as_os_str()]);
        assert_eq!(y.code(), 12, "{what}: ffsck -fy\n{}{}", y.stdout, y.stderr);
        assert!(y.stdout.contains("clear_mmp"), "{what}: {}", y.stdout);
        common::assert_same_bytes(&before, &common::read_all(&img.path), what);
    }
}

/// A node's sequence in the MMP block: a repair waits twice the update interval (11 s here)
/// and goes on when the block stays as it was, but refuses, writing nothing, when the block
/// changes meanwhile (a node still updates it).
#[test]
fn a_repair_waits_out_a_holder_and_refuses_a_live_one() {
    let Some(t) = common::tools() else { return };
    let (stale, live) = (image(&t, false), image(&t, false));
    for img in [&stale, &live] {
        common::patch(
            &img.path,
            mmp_at(&img.path) + MMP_SEQ,
            &0x12345u32.to_le_bytes(),
        );
    }
    let live_path = live.path.clone();
    let node = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_secs(3));
        let at = mmp_at(&live_path) + MMP_SEQ;
        common::patch(&live_path, at, &0x12346u32.to_le_bytes());
    });
    let live_run = std::thread::spawn({
        let p = live.path.clone();
        move || common::ffsck(&["-fy".as_ref(), p.as_os_str()])
    });
    let y = common::ffsck(&["-fy".as_ref(), stale.path.as_os_str()]);
    assert_eq!(y.code(), 0, "stale holder: {}{}", y.stdout, y.stderr);
    assert!(y.stdout.contains("waiting 11 seconds"), "{}", y.stdout);
    node.join().unwrap();
    let before = common::read_all(&live.path);
    let l = live_run.join().unwrap();
    assert_eq!(l.code(), 12, "live holder: {}{}", l.stdout, l.stderr);
    assert!(l.stderr.contains("in use on another node"), "{}", l.stderr);
    common::assert_same_bytes(&before, &common::read_all(&live.path), "live holder");
}
