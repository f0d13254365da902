//! Repair of block mappings (`-y`): multiply-claimed blocks are cloned so every sharer keeps
//! its contents, illegal block pointers are zeroed, invalid extents and extent index entries are
//! removed or fixed. Each case builds its image at run time, corrupts it with `debugfs -w`, runs
//! `ffsck -fy` once and requires `e2fsck -fn` and a second `ffsck -fn` to find it clean.

use crate::common;

use common::{Image, Tools};
use std::ffi::OsStr;

fn ffsck(args: &[&str], img: &Image) -> common::Run {
    let mut a: Vec<&OsStr> = args.iter().map(OsStr::new).collect();
    a.push(img.path.as_os_str());
    common::ffsck(&a)
}

/// Every file of the tree (from its source) except `skip`, compared with the image.
fn assert_tree_kept(t: &Tools, img: &Image, skip: &[&str]) {
    for p in ["a/f1", "a/f2", "a/f3", "a/f4", "a/f5", "b/x", "sparse"] {
        if skip.contains(&p) {
            continue;
        }
        let want = std::fs::read(img.dir.path().join("tree").join(p)).unwrap();
        assert!(
            common::dump(t, img, &format!("/{p}")) == want,
            "/{p}: contents changed"
        );
    }
}

/// The block number after `key` ("block bitmap at ", "inode table at ") on group 0's line of
/// `debugfs stats`.
fn group0(t: &Tools, img: &Image, key: &str) -> u64 {
    let s = common::debugfs_r(t, &img.path, "stats");
    s.lines()
        .filter(|l| l.trim().starts_with("Group  0:"))
        .find_map(|l| {
            let rest = l.split(key).nth(1)?;
            rest.split(|c: char| !c.is_ascii_digit())
                .next()?
                .parse()
                .ok()
        })
        .unwrap_or_else(|| panic!("test setup: no \"{key}\" for group 0 in\n{s}"))
}

#[test]
fn shared_blocks_are_cloned_in_block_mapped_files() {
    let Some(t) = common::tools() else { return };
    let img = common::mkfs(&t, "ext2", &[], "16M");
    let b = common::bmap(&t, &img.path, "/a/f1", 0);
    // /a/f2's second block becomes /a/f1's first: both files claim it.
    common::debugfs_w(&t, &img.path, &format!("sif /a/f2 block[1] {b}"));
    let f1 = common::dump(&t, &img, "/a/f1");
    let f2 = common::dump(&t, &img, "/a/f2");
    // e2fsck on a copy: its clone marks the copies in the bitmap as it takes them, so pass 5
    // finds the free counts wrong but no bitmap difference.
    let e2out = common::e2fsck_fy_copy(&t, &img.path);
    let run = common::assert_one_run_repairs(&t, &img, "ext2 shared data block", &[1]);
    assert!(
        run.stdout.contains("Clone multiply-claimed blocks? yes"),
        "{}",
        run.stdout
    );
    for line in [
        "Block bitmap differences",
        "Free blocks count wrong for group #0",
    ] {
        assert_eq!(
            run.stdout.contains(line),
            e2out.contains(line),
            "{line}: ffsck\n{}\ne2fsck\n{e2out}",
            run.stdout
        );
    }
    assert!(
        common::dump(&t, &img, "/a/f1") == f1,
        "/a/f1 lost its contents"
    );
    assert!(
        common::dump(&t, &img, "/a/f2") == f2,
        "/a/f2 lost its contents"
    );
    let (n1, n2) = (
        common::bmap(&t, &img.path, "/a/f1", 0),
        common::bmap(&t, &img.path, "/a/f2", 1),
    );
    assert_ne!(n1, n2, "the two files still share a block");
    assert_tree_kept(&t, &img, &["a/f2"]);
}

#[test]
fn blocks_shared_with_metadata_are_copied_to_the_file() {
    let Some(t) = common::tools() else { return };
    let img = common::mkfs(&t, "ext2", &[], "16M");
    // The block bitmap of group 0: pointed at by a file, it stays metadata.
    let bitmap = group0(&t, &img, "block bitmap at ");
    common::debugfs_w(&t, &img.path, &format!("sif /a/f3 block[0] {bitmap}"));
    common::assert_one_run_repairs(&t, &img, "ext2 block shared with a bitmap", &[1]);
    assert_ne!(common::bmap(&t, &img.path, "/a/f3", 0), bitmap);
    assert_tree_kept(&t, &img, &["a/f3"]);
}

#[test]
fn shared_extents_and_extent_nodes_are_cloned() {
    let Some(t) = common::tools() else { return };
    let img = common::mkfs(&t, "ext4", &[], "16M");
    // i_block[5] is the physical start of the first extent of a depth-0 tree.
    let b = common::bmap(&t, &img.path, "/a/f1", 0);
    common::debugfs_w(&t, &img.path, &format!("sif /a/f4 block[5] {b}"));
    // /a/f5's first extent also overlaps the extent-tree node of /sparse.
    let stat = common::debugfs_r(&t, &img.path, "stat /sparse");
    let leaf: u64 = stat
        .lines()
        .skip_while(|l| !l.starts_with("EXTENTS:"))
        .nth(1)
        .and_then(|l| l.trim().strip_prefix("(ETB0):"))
        .and_then(|r| r.split(|c: char| !c.is_ascii_digit()).next())
        .and_then(|n| n.parse().ok())
        .expect("test setup: /sparse has an extent tree block");
    common::debugfs_w(&t, &img.path, &format!("sif /a/f5 block[5] {leaf}"));
    let f1 = common::dump(&t, &img, "/a/f1");
    let f4 = common::dump(&t, &img, "/a/f4");
    let f5 = common::dump(&t, &img, "/a/f5");
    let sparse = common::dump(&t, &img, "/sparse");
    let run = common::assert_one_run_repairs(&t, &img, "ext4 shared extents", &[1]);
    assert!(
        run.stdout.contains("Clone multiply-claimed blocks? yes"),
        "{}",
        run.stdout
    );
    assert!(
        common::dump(&t, &img, "/a/f1") == f1,
        "/a/f1 lost its contents"
    );
    assert!(
        common::dump(&t, &img, "/a/f4") == f4,
        "/a/f4 lost its contents"
    );
    assert!(
        common::dump(&t, &img, "/a/f5") == f5,
        "/a/f5 lost its contents"
    );
    assert!(
        common::dump(&t, &img, "/sparse") == sparse,
        "/sparse lost its contents"
    );
}

#[test]
fn illegal_block_pointers_are_cleared() {
    let Some(t) = common::tools() else { return };
    let img = common::mkfs(&t, "ext2", &[], "16M");
    common::debugfs_w(&t, &img.path, "sif /a/f4 block[1] 99999999");
    common::debugfs_w(&t, &img.path, "sif /b/x block[IND] 88888888");
    let run = common::assert_one_run_repairs(&t, &img, "ext2 illegal block pointers", &[1]);
    assert!(run.stdout.contains("Illegal block"), "{}", run.stdout);
    let s = common::debugfs_r(&t, &img.path, "stat /a/f4");
    assert!(
        !s.contains("99999999"),
        "the illegal pointer is still there:\n{s}"
    );
    assert_tree_kept(&t, &img, &["a/f4"]);
}

#[test]
fn invalid_extents_and_index_entries_are_removed_or_fixed() {
    let Some(t) = common::tools() else { return };
    // A leaf extent starting past the end of the file system.
    let img = common::mkfs(&t, "ext4", &[], "16M");
    common::debugfs_w(&t, &img.path, "sif /a/f4 block[5] 99999999");
    let run = common::assert_one_run_repairs(&t, &img, "ext4 extent past the end", &[1]);
    assert!(run.stdout.contains("invalid extent"), "{}", run.stdout);
    assert_tree_kept(&t, &img, &["a/f4"]);

    // An index entry whose logical start does not match its child's first extent.
    let img = common::mkfs(&t, "ext4", &[], "16M");
    common::debugfs_w(&t, &img.path, "sif /sparse block[3] 7");
    common::assert_one_run_repairs(&t, &img, "ext4 index start mismatch", &[1]);
    assert_tree_kept(&t, &img, &[]);

    // An index entry pointing outside the file system: the subtree goes.
    let img = common::mkfs(&t, "ext4", &[], "16M");
    common::debugfs_w(&t, &img.path, "sif /sparse block[4] 99999999");
    common::assert_one_run_repairs(&t, &img, "ext4 index to a bad block", &[1]);
    assert_tree_kept(&t, &img, &["sparse"]);
}

#[test]
fn an_inode_with_too_many_illegal_blocks_is_cleared() {
    let Some(t) = common::tools() else { return };
    let img = common::mkfs(&t, "ext2", &[], "16M");
    for i in 0..12 {
        common::debugfs_w(
            &t,
            &img.path,
            &format!("sif /a/f6 block[{i}] {}", 88_888_800 + i),
        );
    }
    let run = common::assert_one_run_repairs(&t, &img, "ext2 inode with 12 illegal blocks", &[1]);
    assert!(
        run.stdout.contains("Too many illegal blocks"),
        "{}",
        run.stdout
    );
    let ls = common::debugfs_r(&t, &img.path, "ls -l /a");
    assert!(
        !ls.lines()
            .any(|l| l.trim_end().ends_with(" f6") && !l.trim_start().starts_with("0 ")),
        "the cleared inode's entry is still listed:\n{ls}"
    );
    assert_tree_kept(&t, &img, &[]);
}

#[test]
fn an_extent_tree_deeper_than_needed_is_rebuilt() {
    let Some(t) = common::tools() else { return };
    let img = common::mkfs(&t, "ext4", &["-b", "1024", "-O", "^metadata_csum"], "8M");
    // /a/f3's in-inode root (one leaf level), found with imap.
    let imap = common::debugfs_r(&t, &img.path, "imap /a/f3");
    let num = |key: &str, radix: u32| {
        imap.split(key)
            .nth(1)
            .map(|s| s.trim_start_matches("0x"))
            .and_then(|s| s.split(|c: char| !c.is_ascii_hexdigit()).next())
            .and_then(|s| u64::from_str_radix(s, radix).ok())
            .unwrap_or_else(|| panic!("test setup: no {key} in\n{imap}"))
    };
    let at = num("located at block ", 10) * 1024 + num("offset ", 16);
    let iblock = at + 40;
    let mut root =
        std::fs::read(&img.path).unwrap()[iblock as usize..iblock as usize + 60].to_vec();
    assert_eq!(
        &root[0..2],
        &[0x0A, 0xF3],
        "test setup: /a/f3 is not extent-mapped"
    );
    assert_eq!(
        &root[6..8],
        &[0, 0],
        "test setup: /a/f3 already has a deep tree"
    );
    let free = common::debugfs_r(&t, &img.path, "testb 8100 6");
    assert!(!free.contains("marked in use"), "test setup: {free}");
    // Chain six index levels (blocks 8100..8105) above the original leaf entries: depth 6
    // where 1 KiB blocks never need more than 5.
    let header = |entries: u16, max: u16, depth: u16| {
        let mut h = vec![0x0A, 0xF3];
        for v in [entries, max, depth] {
            h.extend(v.to_le_bytes());
        }
        h.extend([0u8; 4]);
        h
    };
    let index = |lblk: u32, blk: u32| {
        let mut e = lblk.to_le_bytes().to_vec();
        e.extend(blk.to_le_bytes());
        e.extend([0u8; 4]);
        e
    };
    let entries = u16::from_le_bytes([root[2], root[3]]);
    let mut leaf = header(entries, 84, 0);
    leaf.extend(&root[12..12 + 12 * usize::from(entries)]);
    common::patch(&img.path, 8105 * 1024, &leaf);
    for (k, blk) in (8100u32..8105).enumerate() {
        let mut node = header(1, 84, 5 - k as u16);
        node.extend(index(0, blk + 1));
        common::patch(&img.path, u64::from(blk) * 1024, &node);
    }
    root = header(1, 4, 6);
    root.extend(index(0, 8100));
    root.resize(60, 0);
    common::patch(&img.path, iblock, &root);
    let i_blocks = common::debugfs_number(&t, &img.path, "stat /a/f3", "Blockcount:");
    // The six node blocks are taken from the free counts too (one 8 MiB group).
    let free = common::debugfs_number(&t, &img.path, "stats", "Free blocks:");
    common::debugfs_script(
        &t,
        &img,
        &[
            "setb 8100 6",
            &format!("sif /a/f3 blocks {}", i_blocks + 12),
            &format!("set_bg 0 free_blocks_count {}", free - 6),
            "set_bg 0 checksum calc",
            &format!("ssv free_blocks_count {}", free - 6),
        ],
    );
    let run = common::ffsck(&[OsStr::new("-fn"), img.path.as_os_str()]);
    let want = "extent tree could be more shallow (6; could be <= 5)";
    assert!(run.stdout.contains(want), "{want}\n{}", run.stdout);
    // As in e2fsck, a deeper tree than needed is not an error.
    assert_eq!(run.code(), 0, "{}", run.stdout);
    let run = ffsck(&["-fy"], &img);
    assert_eq!(run.code(), 1, "{}", run.stdout);
    let (e2, out) = common::e2fsck_n(&t, &img.path);
    assert_eq!(e2, 0, "{out}\n{}", run.stdout);
    let ex = common::debugfs_r(&t, &img.path, "ex /a/f3");
    assert!(
        ex.contains(" 0/ 0 "),
        "the tree is not a single level\n{ex}"
    );
    assert_tree_kept(&t, &img, &[]);
}

/// The physical blocks `(start, end)` of the first extent of `path` (`(l-l):start-end`, or
/// `(l):start` for one block), as `debugfs stat` shows it.
fn first_extent(t: &Tools, img: &Image, path: &str) -> (u64, u64) {
    let stat = common::debugfs_r(t, &img.path, &format!("stat {path}"));
    let run = stat
        .split("EXTENTS:")
        .nth(1)
        .and_then(|s| s.split(':').nth(1))
        .and_then(|s| s.split(|c: char| c != '-' && !c.is_ascii_digit()).next())
        .unwrap_or_else(|| panic!("test setup: no extent for {path} in\n{stat}"));
    let mut ends = run.split('-').map(|x| x.parse::<u64>().unwrap());
    let start = ends.next().unwrap();
    (start, ends.next().unwrap_or(start))
}

#[test]
fn a_file_whose_shared_blocks_cannot_be_cloned_is_deleted() {
    let Some(t) = common::tools() else { return };
    let img = common::mkfs(&t, "ext4", &["-b", "1024", "-O", "^has_journal"], "4M");
    let free = common::debugfs_number(&t, &img.path, "stats", "Free blocks:");
    // One file takes most of the free space...
    let len = free * 2 / 3;
    common::debugfs_script(
        &t,
        &img,
        &[
            "write /dev/null big",
            &format!("fallocate /big 0 {}", len - 1),
            &format!("sif /big size {}", len * 1024),
        ],
    );
    let (start, end) = first_extent(&t, &img, "/big");
    assert_eq!(end + 1 - start, len, "test setup: /big is not one extent");
    // ...and an empty file is given the very same extent: copying it cannot fit.
    let victim = "/many/entry-with-a-rather-long-name-003";
    common::debugfs_script(
        &t,
        &img,
        &[
            &format!("sif {victim} block[0] {}", 0xF30A | (1 << 16)),
            &format!("sif {victim} block[1] 4"),
            &format!("sif {victim} block[3] 0"),
            &format!("sif {victim} block[4] {len}"),
            &format!("sif {victim} block[5] {start}"),
            &format!("sif {victim} size {}", len * 1024),
            &format!("sif {victim} blocks {}", len * 2),
        ],
    );
    let run = ffsck(&["-fn"], &img);
    assert!(
        run.stdout.contains("Clone multiply-claimed blocks? no"),
        "{}",
        run.stdout
    );
    let run = ffsck(&["-fy"], &img);
    for want in [
        "Couldn't clone file",
        "Delete file? yes",
        "already reassigned or cloned",
    ] {
        assert!(run.stdout.contains(want), "{want}\n{}", run.stdout);
    }
    assert_eq!(run.code(), 1, "{}", run.stdout);
    let (e2, out) = common::e2fsck_n(&t, &img.path);
    assert_eq!(e2, 0, "{out}\n{}", run.stdout);
    let again = ffsck(&["-fn"], &img);
    assert_eq!(again.code(), 0, "{}", again.stdout);
    assert_tree_kept(&t, &img, &[]);
    let big = common::debugfs_r(&t, &img.path, "stat /big");
    assert!(big.contains(&format!("{start}-{end}")), "{big}");
}

#[test]
fn cloning_in_a_4k_block_file_system_leaves_block_0_alone() {
    let Some(t) = common::tools() else { return };
    // With 4 KiB blocks block 0 holds the superblock and is a valid block number: a map's
    // empty indirect pointer (0) must not be followed there. Read as pointers, the superblock
    // names block 11 (s_first_ino), here an inode-table block two files claim: followed, the
    // copy of block 11 would be written into the superblock.
    let img = common::mkfs(&t, "ext2", &["-b", "4096"], "16M");
    let s = common::debugfs_r(&t, &img.path, "stats");
    assert!(
        s.contains("Group  0: block bitmap at 2, inode bitmap at 3, inode table at 4\n"),
        "test setup: group 0's inode table should start at block 4\n{s}"
    );
    common::debugfs_w(&t, &img.path, "sif /a/f2 block[0] 11");
    common::debugfs_w(&t, &img.path, "sif /a/f3 block[0] 11");
    common::assert_one_run_repairs(
        &t,
        &img,
        "ext2 (4 KiB blocks) files sharing an inode-table block",
        &[1],
    );
    assert_tree_kept(&t, &img, &["a/f2", "a/f3"]);
}

#[test]
fn an_indirect_block_in_the_inode_table_is_copied_before_any_fix() {
    let Some(t) = common::tools() else { return };
    let img = common::mkfs(&t, "ext2", &[], "16M");
    // /b/x's indirect block becomes the inode-table block holding the root directory's
    // inode: read as pointers, the inodes are mostly illegal blocks. A fix written there would
    // destroy the root and its neighbours; it must wait until pass 1D has made /b/x a copy.
    let itable = group0(&t, &img, "inode table at ");
    common::debugfs_w(&t, &img.path, &format!("sif /b/x block[IND] {itable}"));
    let run =
        common::assert_one_run_repairs(&t, &img, "ext2 indirect block in the inode table", &[1]);
    assert!(
        run.stdout
            .contains(&format!("block {itable} conflicts with critical metadata")),
        "{}",
        run.stdout
    );
    assert_tree_kept(&t, &img, &["b/x"]);
}

/// An extent root whose `eh_depth` is far beyond the format's five levels (a flipped byte):
/// libext2fs still opens it, so e2fsck offers to make the tree shallower and drops the entry
/// that, read as an index, points outside the file system; the file stays, now empty of
/// blocks. ffsck did the same rather than clear the inode as having no extent header (which
/// lost the file).
#[test]
fn an_extent_root_of_huge_depth_keeps_its_file() {
    let Some(t) = common::tools() else { return };
    let img = common::mkfs(&t, "ext4", &["-b", "4096"], "16M");
    // i_block[1] holds eh_max (4) and eh_depth (0xba70).
    common::debugfs_w(&t, &img.path, "sif /a/f1 block[1] 3127902212");
    let check = common::ffsck(&[OsStr::new("-fn"), img.path.as_os_str()]);
    assert!(
        check
            .stdout
            .contains("extent tree could be more shallow (47728; could be <= 4)"),
        "{}",
        check.stdout
    );
    let run = common::assert_one_run_repairs(&t, &img, "huge extent depth", &[1]);
    let stat = common::debugfs_r(&t, &img.path, "stat /a/f1");
    assert!(stat.contains("Type: regular"), "{stat}\n{}", run.stdout);
}

/// An extent root whose depth is past any tree's (a flipped high bit: 16384) but whose magic
/// and counts are sound is judged as e2fsck judges it: "could be more shallow", its entries
/// dropped. The file keeps its names, type and size (before, it was taken for an inode with
/// no extent header and cleared, with every hard link to it).
#[test]
fn an_absurdly_deep_extent_root_keeps_the_file() {
    let Some(t) = common::tools() else { return };
    let img = common::mkfs(&t, "ext4", &["-b", "1024"], "8M");
    let ino = common::inode_of(&t, &img.path, "/b/x");
    // i_block[1]: eh_max 4, eh_depth 16384.
    common::debugfs_w(&t, &img.path, &format!("sif <{ino}> block[1] 0x40000004"));
    let check = common::check_n(&img.path, 1);
    assert!(
        check.has("P1_EXTENT_BAD_MAX_DEPTH") && !check.has("P1_MISSING_EXTENT_HEADER"),
        "{}",
        check.describe()
    );
    common::assert_one_run_repairs(&t, &img, "extent root of depth 16384", &[1]);
    for path in ["/b/x", "/b/hard"] {
        let stat = common::debugfs_r(&t, &img.path, &format!("stat {path}"));
        assert!(
            stat.contains("Type: regular") && stat.contains("Size: 17"),
            "{path} lost:\n{stat}"
        );
    }
}

/// A reserved inode with no mode (inode 9) whose block pointer names a free block: e2fsck
/// walks a reserved inode's map only when its type can have blocks, and calls this clean.
/// ffsck walked it and "fixed" i_size, i_blocks and the bitmap, which e2fsck then undid.
#[test]
fn a_reserved_inode_without_a_mode_maps_no_blocks() {
    let Some(t) = common::tools() else { return };
    let img = common::mkfs(&t, "ext2", &["-b", "1024"], "8M");
    let free = common::debugfs_r(&t, &img.path, "ffb");
    let free: u64 = free
        .trim()
        .rsplit(' ')
        .next()
        .and_then(|w| w.parse().ok())
        .unwrap_or_else(|| panic!("test setup: ffb said {free:?}"));
    common::debugfs_w(&t, &img.path, &format!("sif <9> block[5] {free}"));
    let (code, out) = common::e2fsck_n(&t, &img.path);
    assert_eq!(code, 0, "test setup: e2fsck -fn\n{out}");
    let check = common::check_n(&img.path, 1);
    assert_eq!(check.code(), 0, "{}", check.describe());
    // Its xattr block is checked all the same: a data block is no xattr block.
    let data = common::bmap(&t, &img.path, "/a/f1", 0);
    common::debugfs_w(&t, &img.path, &format!("sif <6> file_acl {data}"));
    let check = common::check_n(&img.path, 1);
    assert!(
        check.code() & 4 != 0 && check.has("P1_BAD_EA_BLOCK"),
        "{}",
        check.describe()
    );
    common::assert_one_run_repairs(&t, &img, "inode 6's xattr block", &[1]);
}

/// A slow symlink mapping a second block (a flipped pointer naming another file's block):
/// e2fsck clears the pointer ("causes symlink to be too big") and keeps the link. ffsck
/// cloned the shared block and then cleared the link as invalid.
#[test]
fn a_symlink_mapping_more_than_one_block_is_truncated() {
    let Some(t) = common::tools() else { return };
    let img = common::mkfs(&t, "ext2", &["-b", "1024"], "8M");
    let before = common::debugfs_r(&t, &img.path, "stat /b/long");
    let other = common::bmap(&t, &img.path, "/a/f1", 0);
    common::debugfs_w(&t, &img.path, &format!("sif /b/long block[3] {other}"));
    let check = common::check_n(&img.path, 1);
    assert!(check.has("P1_TOOBIG_SYMLINK"), "{}", check.describe());
    common::assert_one_run_repairs(&t, &img, "symlink too big", &[1]);
    let after = common::debugfs_r(&t, &img.path, "stat /b/long");
    let target = |s: &str| s.lines().find(|l| l.contains("Size:")).map(str::to_owned);
    assert!(after.contains("Type: symlink"), "{after}");
    assert_eq!(target(&after), target(&before), "{after}");
    let link = img.aux("link");
    common::debugfs_r(&t, &img.path, &format!("dump /b/long {}", link.display()));
    assert_eq!(
        std::fs::read(&link).unwrap(),
        common::LONG_LINK_TARGET.as_bytes()
    );
}

/// A leaf entry of a depth-1 extent tree whose logical start was flipped high (48 becomes
/// 65584): libext2fs bounds the last index entry's range by the file's end, so e2fsck drops
/// that one entry ("end of extent exceeds allowed value") and keeps every extent after it.
/// ffsck bounded the range at 2^32, took the flipped entry as sound and dropped every later
/// extent as out of order: /sparse lost six of its ten data runs (seed 100, case 5).
#[test]
fn a_leaf_extent_flipped_past_the_file_end_is_the_one_dropped() {
    let Some(t) = common::tools() else { return };
    let img = common::mkfs(&t, "ext4", &["-b", "4096", "-O", "^metadata_csum"], "16M");
    let stat = common::debugfs_r(&t, &img.path, "stat /sparse");
    let leaf: u64 = stat
        .split("(ETB0):")
        .nth(1)
        .and_then(|s| s.split(|c: char| !c.is_ascii_digit()).next())
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("test setup: /sparse has no extent leaf block\n{stat}"));
    // Entry 3 of the leaf (12-byte header, 12-byte entries) maps logical block 48.
    let at = leaf * 4096 + 12 + 3 * 12;
    assert_eq!(common::read_u32(&img.path, at), 48, "test setup: {stat}");
    common::patch(&img.path, at, &(48u32 | 0x1_0000).to_le_bytes());
    common::assert_one_run_repairs(&t, &img, "leaf extent flipped past the end", &[1]);
    let mut want = common::tree_file(&img, "sparse");
    want[48 * 4096..49 * 4096].fill(0);
    assert!(
        common::dump(&t, &img, "/sparse") == want,
        "/sparse lost more than the flipped extent"
    );
    assert_tree_kept(&t, &img, &["sparse"]);
}

/// An ext4 image (no metadata_csum) whose file `/prealloc` has six preallocated extents,
/// more than the inode holds: they sit in a leaf under an index node.
fn preallocated_under_an_index(t: &Tools) -> Image {
    let img = common::mkfs(t, "ext4", &["-O", "^metadata_csum"], "16M");
    common::debugfs_w(t, &img.path, "write /dev/null /prealloc");
    for s in [0, 8, 16, 24, 32, 40] {
        common::debugfs_w(t, &img.path, &format!("fallocate /prealloc {s} {}", s + 3));
    }
    img
}

/// An empty file with preallocated (unwritten) extents under an index node: libext2fs gives
/// the last index entry the wrapped length 0, so e2fsck bounds nothing below it and calls the
/// file clean (as the corpus's f_uninit_ext_past_eof). With the file's end bounding the last
/// entries, ffsck reported every extent as ending past the allowed value.
#[test]
fn preallocated_extents_of_an_empty_file_under_an_index_are_sound() {
    let Some(t) = common::tools() else { return };
    let img = preallocated_under_an_index(&t);
    common::debugfs_w(&t, &img.path, "sif /prealloc size 0");
    let stat = common::debugfs_r(&t, &img.path, "stat /prealloc");
    assert!(
        stat.contains("(ETB0)") && stat.contains("(40-43[u])"),
        "test setup: no indexed preallocated extents\n{stat}"
    );
    let (e2, out) = common::e2fsck_n(&t, &img.path);
    assert_eq!(e2, 0, "test setup: e2fsck must call it clean\n{out}");
    let check = common::check_n(&img.path, 1);
    assert_eq!(check.code(), 0, "{}", check.describe());
    let run = ffsck(&["-fy"], &img);
    assert_eq!(run.code(), 0, "{}", run.stdout);
    let after = common::debugfs_r(&t, &img.path, "stat /prealloc");
    assert!(after.contains("(40-43[u])"), "{after}");
}

/// A leaf under an index node whose `eh_depth` reads 189 (unseen seed 3010, case 3131).
/// libext2fs walks a child at the depth its parent implies and never reads the child's own,
/// so e2fsck calls the file system clean; the kernel refuses the node. ffsck cleared the leaf
/// as an invalid node and lost the file's extents; it now walks the leaf as a leaf and sets
/// its depth.
#[test]
fn a_child_extent_node_claiming_the_wrong_depth_gets_its_depth_back() {
    let Some(t) = common::tools() else { return };
    let img = preallocated_under_an_index(&t);
    let stat = common::debugfs_r(&t, &img.path, "stat /prealloc");
    let leaf: u64 = stat
        .split("(ETB0):")
        .nth(1)
        .and_then(|r| r.split(|c: char| !c.is_ascii_digit()).next()?.parse().ok())
        .unwrap_or_else(|| panic!("test setup: no extent tree block\n{stat}"));
    let bs = u64::from(common::debugfs_number(&t, &img.path, "stats", "Block size:") as u32);
    let depth_at = leaf * bs + 6;
    common::patch(&img.path, depth_at, &189u16.to_le_bytes());
    let (e2, out) = common::e2fsck_n(&t, &img.path);
    assert_eq!(e2, 0, "test setup: libext2fs never reads the depth\n{out}");
    let check = common::check_n(&img.path, 1);
    assert_eq!(check.code(), 4, "{}", check.describe());
    let run = ffsck(&["-fy"], &img);
    assert_eq!(run.code(), 1, "{}", run.stdout);
    assert!(
        run.stdout
            .contains("claims depth 189, but its place in the tree is depth 0"),
        "{}",
        run.stdout
    );
    let depth = common::read_all(&img.path)[depth_at as usize..depth_at as usize + 2].to_vec();
    assert_eq!(depth, [0, 0], "the leaf's depth on disk");
    let after = common::debugfs_r(&t, &img.path, "stat /prealloc");
    assert!(after.contains("(40-43[u])"), "{after}");
    let (e2, out) = common::e2fsck_n(&t, &img.path);
    assert_eq!(e2, 0, "{out}");
    let again = common::check_n(&img.path, 1);
    assert_eq!(again.code(), 0, "{}", again.describe());
}

/// An ext4 image (1 KiB blocks, no metadata_csum, settled by e2fsck) made from `dir`'s
/// `tree`, whose file `/f` the caller wrote.
fn extent_image(t: &Tools, dir: tempfile::TempDir) -> Image {
    let tree = dir.path().join("tree");
    let path = dir.path().join("fs.img");
    common::mkfs_from(
        t,
        &tree,
        &path,
        "ext4",
        &["-b", "1024", "-O", "^metadata_csum"],
        "8M",
    );
    common::settle(t, &path);
    Image { dir, path }
}

/// An extent whose length flips to a huge unwritten one (unseen seed 3003, case 403): it runs
/// past its leaf, over the entries after it and over the next leaf's. e2fsck drops the entries
/// it runs over, then, landing back on it, the extent itself, and then every later extent that
/// maps a block already mapped ("duplicate extent mapping"): all of the file past the extent
/// is lost. ffsck once kept the long extent (its result still mapped blocks twice), then dropped
/// what e2fsck drops; it now drops the long extent alone, and the entries after it, in order
/// once it is gone, keep their data (unseen seed 3017, case 2080, where e2fsck's walk kept the
/// node's last entry and ffsck's copy of its rule did not).
#[test]
fn an_extent_running_over_the_next_leaf_is_dropped_alone() {
    let Some(t) = common::tools() else { return };
    let dir = tempfile::tempdir().unwrap();
    let tree = dir.path().join("tree");
    std::fs::create_dir_all(&tree).unwrap();
    // 200 one-block runs with a hole after each: more extents than a 1 KiB leaf holds.
    let mut data = vec![0u8; 400 * 1024];
    for (i, run) in data.chunks_mut(2048).enumerate() {
        run[..1024].fill(i as u8 | 1);
    }
    let f = tree.join("f");
    std::fs::write(&f, &data).unwrap();
    {
        // Punch the holes (mke2fs -d keeps them).
        let file = std::fs::OpenOptions::new().write(true).open(&f).unwrap();
        for i in 0..200u64 {
            let rc = unsafe {
                libc::fallocate(
                    std::os::fd::AsRawFd::as_raw_fd(&file),
                    libc::FALLOC_FL_PUNCH_HOLE | libc::FALLOC_FL_KEEP_SIZE,
                    (i * 2048 + 1024) as libc::off_t,
                    1024,
                )
            };
            if rc != 0 {
                return common::skip("the scratch file system cannot punch holes");
            }
        }
    }
    let img = extent_image(&t, dir);
    let ex = common::debugfs_r(&t, &img.path, "ex /f");
    // The first leaf: the level-1 line of the root's first index entry.
    let leaf: u64 = ex
        .lines()
        .find(|l| l.trim_start().starts_with("0/ 1   1/"))
        .and_then(|l| l.split_whitespace().nth(7))
        .and_then(|x| x.parse().ok())
        .unwrap_or_else(|| panic!("test setup: no two-level tree\n{ex}"));
    // Entry 10 of the first leaf becomes unwritten and 4,865 blocks long.
    common::patch(
        &img.path,
        leaf * 1024 + 12 + 12 * 10 + 4,
        &(0x8000u16 | 4865).to_le_bytes(),
    );
    let run = common::assert_one_run_repairs(&t, &img, "extent over the next leaf", &[1]);
    assert!(
        run.stdout.contains("has out of order extents"),
        "{}",
        run.stdout
    );
    // Only the long extent's own block (logical block 20) is gone: the extents before it and
    // every one it ran over keep their data.
    let kept = common::dump(&t, &img, "/f");
    assert_eq!(kept.len(), data.len());
    assert_eq!(kept[..20 * 1024], data[..20 * 1024]);
    assert!(
        kept[20 * 1024..21 * 1024].iter().all(|&b| b == 0),
        "the long extent kept"
    );
    assert_eq!(
        kept[21 * 1024..],
        data[21 * 1024..],
        "blocks past the long extent lost"
    );
}

/// An extent that runs over the node's last entry only (corpus f_extents2's shape): e2fsck
/// drops that entry and keeps the extent (its walk of the node ends with the entry dropped),
/// so ffsck keeps the same extents.
#[test]
fn an_extent_running_over_only_the_last_entry_is_kept() {
    use std::os::unix::fs::FileExt;
    let Some(t) = common::tools() else { return };
    let dir = tempfile::tempdir().unwrap();
    let tree = dir.path().join("tree");
    std::fs::create_dir_all(&tree).unwrap();
    // Three one-block runs with holes between them: three extents in the inode.
    let file = std::fs::File::create(tree.join("f")).unwrap();
    for b in [0u64, 2, 4] {
        file.write_all_at(&[b as u8 + 1; 1024], b * 1024).unwrap();
    }
    drop(file);
    let img = extent_image(&t, dir);
    let ex = common::debugfs_r(&t, &img.path, "ex /f");
    assert_eq!(ex.lines().count(), 4, "test setup: three extents\n{ex}");
    // The second extent (in the inode's i_block, after the 12-byte header) grows to 4 blocks.
    let ino = common::inode_of(&t, &img.path, "/f");
    common::debugfs_w(&t, &img.path, &format!("sif <{ino}> block[7] 4"));
    let mut e2 = img.path.clone();
    e2.set_extension("e2fsck");
    std::fs::copy(&img.path, &e2).unwrap();
    let out = std::process::Command::new(&t.e2fsck)
        .arg("-fy")
        .arg(&e2)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1), "test setup: e2fsck -fy");
    common::assert_one_run_repairs(&t, &img, "extent over the last entry", &[1]);
    assert_eq!(
        common::debugfs_r(&t, &img.path, "ex /f"),
        common::debugfs_r(&t, &e2, "ex /f")
    );
}

/// A file's indirect block pointed at a directory block of names: most of its "pointers" are
/// illegal, so the inode is cleared for too many illegal blocks. e2fsck restarts right after
/// pass 1, so the blocks the cleared file claimed (the directory's) are never multiply-claimed:
/// nothing is cloned, the directory keeps every entry, and the output says it restarted
/// (seed 3005 case 493 of `ffsck-lab fuzz`, where a clone made in the same round lost files).
#[test]
fn an_inode_cleared_for_too_many_illegal_blocks_restarts_before_pass_1b() {
    let Some(t) = common::tools() else { return };
    let img = common::mkfs(&t, "ext2", &["-b", "1024"], "8M");
    // A file with an indirect block (more than 12 KiB), and the directory of 60 long names.
    let victim = (1..=12)
        .map(|i| format!("a/f{i}"))
        .find(|p| common::tree_file(&img, p).len() > 13 * 1024)
        .expect("test setup: a file of the tree larger than 13 KiB");
    let names = common::bmap(&t, &img.path, "/many", 0);
    common::debugfs_w(&t, &img.path, &format!("sif /{victim} block[IND] {names}"));
    let e2fsck = common::e2fsck_fy_copy(&t, &img.path);
    assert!(
        e2fsck.contains("Too many illegal blocks") && e2fsck.contains("Restarting"),
        "test setup: e2fsck restarts\n{e2fsck}"
    );
    let run = common::assert_one_run_repairs(&t, &img, "too many illegal blocks", &[1]);
    assert!(
        run.stdout.contains("Too many illegal blocks") && run.stdout.contains("Restarting"),
        "{}",
        run.stdout
    );
    assert!(!run.stdout.contains("Multiply-claimed"), "{}", run.stdout);
    let ls = common::debugfs_r(&t, &img.path, "ls /many");
    for i in [0, 31, 59] {
        let name = format!("entry-with-a-rather-long-name-{i:03}");
        assert!(ls.contains(&name), "/many lost {name}\n{ls}");
    }
    assert_tree_kept(&t, &img, &[victim.as_str()]);
}
