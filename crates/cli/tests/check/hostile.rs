//! Hostile inputs: garbage, truncated and self-referencing images, directories and missing
//! paths. ffsck must finish within 10 s, never panic, and report failure (exit bit 8 or 4)
//! the way e2fsck does.

use crate::common;

use common::{Image, Tools};
use std::ffi::OsStr;
use std::path::Path;
use std::time::Duration;

const LIMIT: Duration = Duration::from_secs(10);

/// `ffsck -fn --threads 2 PATH` under the 10 s limit, checked for panics.
fn hostile(path: &Path) -> common::Run {
    let run = common::ffsck_timeout(
        &[
            OsStr::new("-fn"),
            OsStr::new("--threads"),
            OsStr::new("2"),
            path.as_os_str(),
        ],
        LIMIT,
    );
    println!(
        "exit {:?} in {:?}\nstdout:\n{}\nstderr:\n{}",
        run.code, run.elapsed, run.stdout, run.stderr
    );
    run
}

fn assert_failed(run: &common::Run) {
    let code = run.code();
    assert!(code & 12 != 0, "expected exit bit 4 or 8, got {code}");
}

fn file_with(bytes: &[u8]) -> (tempfile::TempDir, std::path::PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("hostile.img");
    std::fs::write(&p, bytes).unwrap();
    (dir, p)
}

#[test]
fn zero_length_file() {
    let (_d, p) = file_with(&[]);
    assert_eq!(hostile(&p).code(), 8);
}

#[test]
fn four_kib_of_zeros() {
    let (_d, p) = file_with(&[0u8; 4096]);
    assert_eq!(hostile(&p).code(), 8);
}

#[test]
fn one_mib_of_random_bytes() {
    let (_d, p) = file_with(&common::Rng::new(0xBAD_5EED).bytes(1 << 20));
    assert_failed(&hostile(&p));
}

#[test]
fn random_bytes_behind_a_valid_superblock() {
    // A real superblock and descriptors followed by garbage everywhere else.
    let Some(t) = common::tools() else { return };
    let img = common::mkfs(&t, "ext4", &["-O", "^metadata_csum"], "16M");
    let mut data = common::read_all(&img.path);
    let mut rng = common::Rng::new(7);
    let garbage = rng.bytes(data.len());
    // Keep the boot block, superblock and the group descriptor block (1 KiB blocks: 0..3).
    data[3072..].copy_from_slice(&garbage[3072..]);
    std::fs::write(&img.path, &data).unwrap();
    assert_failed(&hostile(&img.path));
}

#[test]
fn truncated_image() {
    let Some(t) = common::tools() else { return };
    let img = common::mkfs(&t, "ext4", &[], "16M");
    let head = common::read_all(&img.path)[..64 * 1024].to_vec();
    std::fs::write(&img.path, head).unwrap();
    let run = hostile(&img.path);
    assert_ne!(
        run.code() & 8,
        0,
        "a truncated image is an operational error"
    );
    let (e2, _) = common::e2fsck_n(&t, &img.path);
    assert_eq!(run.code(), e2, "exit code differs from e2fsck's");
}

#[test]
fn directory_as_device() {
    let d = tempfile::tempdir().unwrap();
    assert_eq!(hostile(d.path()).code(), 8);
}

#[test]
fn missing_path() {
    let d = tempfile::tempdir().unwrap();
    assert_eq!(hostile(&d.path().join("does-not-exist.img")).code(), 8);
}

/// Patches superblock fields (offsets from the superblock start) of a fresh image without
/// metadata_csum (no superblock checksum to refresh).
fn patched_super(t: &Tools, mkfs_args: &[&str], fields: &[(u64, u32)]) -> Image {
    let img = common::mkfs(t, "ext4", mkfs_args, "16M");
    for &(off, v) in fields {
        common::patch(&img.path, 1024 + off, &v.to_le_bytes());
    }
    img
}

const S_INODES_COUNT: u64 = 0;
const S_BLOCKS_COUNT_LO: u64 = 4;

/// One group (4 KiB blocks, 16 MiB): there is no backup superblock to fall back on.
const ONE_GROUP: &[&str] = &["-b", "4096", "-O", "^metadata_csum"];
/// Two groups (1 KiB blocks): both checkers recover from the backup at block 8193.
const TWO_GROUPS: &[&str] = &["-b", "1024", "-O", "^metadata_csum"];

#[test]
fn huge_inodes_count() {
    let Some(t) = common::tools() else { return };
    let img = patched_super(&t, ONE_GROUP, &[(S_INODES_COUNT, u32::MAX)]);
    // No backup: the count is set from the other fields (uncorrected under -n, exit 4).
    assert_eq!(hostile(&img.path).code(), 4);
}

#[test]
fn huge_blocks_count() {
    let Some(t) = common::tools() else { return };
    let img = patched_super(&t, ONE_GROUP, &[(S_BLOCKS_COUNT_LO, u32::MAX)]);
    // No backup: the count is set from the other fields (uncorrected under -n, exit 4).
    assert_eq!(hostile(&img.path).code(), 4);
}

#[test]
fn huge_inodes_and_blocks_count() {
    let Some(t) = common::tools() else { return };
    let img = patched_super(
        &t,
        ONE_GROUP,
        &[(S_INODES_COUNT, u32::MAX), (S_BLOCKS_COUNT_LO, u32::MAX)],
    );
    assert_ne!(hostile(&img.path).code() & 8, 0);
}

/// With a backup superblock available, e2fsck -fn checks from the backup and exits 0 (the
/// damaged primary is not counted under -n); ffsck must match it and not hang or panic.
#[test]
fn huge_counts_with_backup_superblock() {
    let Some(t) = common::tools() else { return };
    for fields in [
        vec![(S_INODES_COUNT, u32::MAX)],
        vec![(S_BLOCKS_COUNT_LO, u32::MAX)],
        vec![(S_INODES_COUNT, u32::MAX), (S_BLOCKS_COUNT_LO, u32::MAX)],
    ] {
        let img = patched_super(&t, TWO_GROUPS, &fields);
        let run = hostile(&img.path);
        let (e2, e2_out) = common::e2fsck_n(&t, &img.path);
        assert_eq!(
            run.code(),
            e2,
            "patch {fields:?}: exit code differs from e2fsck's:\n{e2_out}"
        );
    }
}

/// The leaf block of /sparse's depth-1 extent tree (the "(ETB0):N" entry of `debugfs stat`).
fn sparse_leaf_block(t: &Tools, img: &Path) -> u64 {
    let s = common::debugfs_r(t, img, "stat /sparse");
    let i = s
        .find("(ETB0):")
        .unwrap_or_else(|| panic!("test setup: /sparse has no extent tree block:\n{s}"));
    s[i + 7..]
        .split(|c: char| !c.is_ascii_digit())
        .next()
        .unwrap()
        .parse()
        .unwrap()
}

/// Rewrites extent block `blk` (1 KiB blocks) as an index node of depth `depth` whose only
/// entry points back at `blk` itself.
fn self_referencing_index(img: &Path, blk: u64, depth: u16) {
    let mut node = Vec::new();
    for v in [0xF30Au16, 1, ((1024 - 12) / 12) as u16, depth] {
        node.extend_from_slice(&v.to_le_bytes());
    }
    node.extend_from_slice(&0u32.to_le_bytes()); // eh_generation
    node.extend_from_slice(&0u32.to_le_bytes()); // ei_block
    node.extend_from_slice(&(blk as u32).to_le_bytes()); // ei_leaf_lo
    node.extend_from_slice(&0u32.to_le_bytes()); // ei_leaf_hi, ei_unused
    common::patch(img, blk * 1024, &node);
}

#[test]
fn extent_index_pointing_to_itself() {
    let Some(t) = common::tools() else { return };
    let img = common::mkfs(&t, "ext4", &["-b", "1024", "-O", "^metadata_csum"], "16M");
    let leaf = sparse_leaf_block(&t, &img.path);
    self_referencing_index(&img.path, leaf, 1);
    let run = hostile(&img.path);
    assert_eq!(run.code(), 4);
}

#[test]
fn extent_tree_cycle_with_consistent_depths() {
    let Some(t) = common::tools() else { return };
    let img = common::mkfs(&t, "ext4", &["-b", "1024", "-O", "^metadata_csum"], "16M");
    let leaf = sparse_leaf_block(&t, &img.path);
    self_referencing_index(&img.path, leaf, 1);
    // Root depth 2 → node (depth 1) → itself: e2fsck reports a cyclic extent tree.
    common::debugfs_w(&t, &img.path, "sif /sparse block[1] 0x20004");
    let run = hostile(&img.path);
    assert_failed(&run);
}

#[test]
fn directory_hard_link_loop() {
    let Some(t) = common::tools() else { return };
    let img = common::mkfs(&t, "ext4", &[], "16M");
    // /a/emptydir/loop -> /a: a second name for a directory, making a cycle in the tree.
    common::debugfs_w(&t, &img.path, "link /a /a/emptydir/loop");
    let run = hostile(&img.path);
    assert_eq!(run.code(), 4);
    let c = common::check_n(&img.path, 2);
    assert!(c.has("P2_LINK_DIR"), "{}", c.describe());
}

#[test]
fn disconnected_directory_loop() {
    let Some(t) = common::tools() else { return };
    let img = common::mkfs(&t, "ext4", &[], "16M");
    // Detach /a/sub and hang it below its own child: sub -> inner -> sub, unreachable from /.
    let sub = common::inode_of(&t, &img.path, "/a/sub");
    let inner = common::inode_of(&t, &img.path, "/a/sub/inner");
    common::debugfs_w(&t, &img.path, "unlink /a/sub");
    common::debugfs_w(&t, &img.path, &format!("link <{sub}> <{inner}>/back"));
    let run = hostile(&img.path);
    assert_eq!(run.code(), 4);
}

#[test]
fn directory_is_its_own_parent() {
    let Some(t) = common::tools() else { return };
    let img = common::mkfs(&t, "ext4", &[], "16M");
    // /a/sub/inner's only name moves into itself.
    let inner = common::inode_of(&t, &img.path, "/a/sub/inner");
    common::debugfs_w(&t, &img.path, "unlink /a/sub/inner");
    common::debugfs_w(&t, &img.path, &format!("link <{inner}> <{inner}>/self"));
    let run = hostile(&img.path);
    assert_eq!(run.code(), 4);
}
