//! The passes on crafted images: each test builds a small image in memory (`ffsck-testfs`),
//! damages one thing, runs `ffsck_check::check` read-only on it and asserts the problem codes
//! the damage must raise. A clean built image is clean for e2fsck and for ffsck alike.

mod common;

use std::process::Command;
use std::sync::Arc;

use ffsck_check::{check, CheckOptions, Finding, Reporter};
use ffsck_io::MemDevice;
use ffsck_testfs::{ino, Image, Options};

/// Keeps the findings of a check.
#[derive(Default)]
struct Keep(Vec<Finding>);

impl Reporter for Keep {
    fn finding(&mut self, f: &Finding) {
        self.0.push(f.clone());
    }
}

/// The problem codes (catalogue names) a read-only check of `bytes` reports, and its exit code.
fn run(bytes: Vec<u8>) -> (Vec<String>, i32) {
    let dev = Arc::new(MemDevice::new(bytes));
    let opts = CheckOptions {
        threads: 1,
        ..CheckOptions::default()
    };
    let mut rep = Keep::default();
    let out = check(dev, &opts, &mut rep);
    let codes: Vec<String> = out
        .findings
        .iter()
        .map(|f| format!("{:?}", f.problem))
        .collect();
    for f in &out.findings {
        eprintln!("{:?}: {}", f.problem, f.message().trim_end());
    }
    (codes, out.exit_code)
}

/// Both flavours: ext2 with block maps, ext4 with extents and metadata_csum.
fn flavours() -> [Options; 2] {
    [Options::ext2(), Options::ext4()]
}

/// Asserts that every code of `want` is among those the check of `img` reports, that the
/// check leaves errors uncorrected (exit bit 4), and that e2fsck -fn exits with the same code.
fn expect(img: Image, want: &[&str]) {
    let bytes = img.finish();
    let (codes, exit) = run(bytes.clone());
    for w in want {
        assert!(codes.iter().any(|c| c == w), "{w} not in {codes:?}");
    }
    assert!(exit & 4 != 0, "exit {exit}: {codes:?}");
    match e2fsck_fn(&bytes) {
        Some((code, text)) => assert_eq!(code, Some(exit), "e2fsck -fn:\n{text}"),
        None => common::skip("SKIPPED (e2fsck part): e2fsck not installed"),
    }
}

/// `e2fsck -fn` on a copy of `bytes` in a temporary file: its exit code and output.
fn e2fsck_fn(bytes: &[u8]) -> Option<(Option<i32>, String)> {
    let e2fsck = e2fsck()?;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("img");
    std::fs::write(&path, bytes).unwrap();
    let out = Command::new(e2fsck).arg("-fn").arg(&path).output().unwrap();
    let text =
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    Some((out.status.code(), text))
}

fn e2fsck() -> Option<std::path::PathBuf> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .chain(["/sbin".into(), "/usr/sbin".into()])
        .map(|d| d.join("e2fsck"))
        .find(|p| p.is_file())
}

#[test]
fn built_images_are_clean_for_e2fsck_and_ffsck() {
    for o in flavours() {
        let bytes = Image::build(o).finish();
        let (codes, exit) = run(bytes.clone());
        assert!(
            codes.is_empty() && exit == 0,
            "{o:?}: {codes:?} exit {exit}"
        );
        let Some((code, text)) = e2fsck_fn(&bytes) else {
            common::skip("SKIPPED: e2fsck not installed");
            return;
        };
        assert_eq!(code, Some(0), "{o:?}: e2fsck -fn:\n{text}");
    }
}

/// Pass 0: the block bitmap's address lies outside the group.
#[test]
fn pass0_block_bitmap_outside_the_group() {
    for o in flavours() {
        let mut img = Image::build(o);
        let far = img.blocks() + 10;
        img.bytes_mut()[2048..2052].copy_from_slice(&far.to_le_bytes());
        expect(img, &["P0_BB_NOT_GROUP"]);
    }
}

/// Pass 1: a file's block pointer past the end of the file system.
#[test]
fn pass1_block_past_the_end() {
    for o in flavours() {
        let mut img = Image::build(o);
        let far = img.blocks() + 100;
        img.set_first_block(ino::INNER, far);
        let illegal = if o.extents {
            "P1_EXTENT_BAD_START_BLK"
        } else {
            "P1_ILLEGAL_BLOCK_NUM"
        };
        expect(img, &[illegal, "P1_BAD_I_BLOCKS"]);
    }
}

/// Pass 1B: two files claim the same block.
#[test]
fn pass1b_block_claimed_twice() {
    for o in flavours() {
        let mut img = Image::build(o);
        let b = img.file_block(ino::FILE, 0);
        let inner = img.file_block(ino::INNER, 0);
        img.set_first_block(ino::INNER, b);
        img.set_block_used(inner, false);
        expect(img, &["P1B_DUP_BLOCK", "P1D_DUP_FILE"]);
    }
}

/// Pass 2: an entry's rec_len is not a multiple of 4.
#[test]
fn pass2_broken_rec_len() {
    for o in flavours() {
        let mut img = Image::build(o);
        img.set_dirent_rec_len(ino::ROOT, b"file", 13);
        expect(img, &["P2_DIR_CORRUPTED"]);
    }
}

/// Pass 2: an entry names an inode number past the inode count.
#[test]
fn pass2_entry_names_a_bad_inode() {
    for o in flavours() {
        let mut img = Image::build(o);
        img.set_dirent_inode(ino::DIR, b"inner", 1000);
        expect(img, &["P2_BAD_INO", "P4_UNATTACHED_INODE"]);
    }
}

/// Pass 3: a directory's `..` names the wrong parent.
#[test]
fn pass3_wrong_dotdot() {
    for o in flavours() {
        let mut img = Image::build(o);
        img.set_dirent_inode(ino::DIR, b"..", ino::LOST_FOUND);
        expect(img, &["P3_BAD_DOT_DOT"]);
    }
}

/// Pass 4: an inode in use that no directory names, and a wrong link count.
#[test]
fn pass4_unattached_inode_and_link_count() {
    for o in flavours() {
        let mut img = Image::build(o);
        img.orphan_file();
        img.set_inode_u16(ino::FILE, 0x1A, 2);
        expect(img, &["P4_BAD_REF_COUNT", "P4_UNATTACHED_INODE"]);
    }
}

/// Pass 5: a free block marked in use, and an inode in use marked free.
#[test]
fn pass5_bitmap_differences() {
    for o in flavours() {
        let mut img = Image::build(o);
        let b = img.free_block() + 5;
        img.set_block_used(b, true);
        img.set_inode_used(ino::INNER, false);
        expect(img, &["P5_BLOCK_UNUSED", "P5_INODE_USED"]);
    }
}

/// e2fsck's latches: an inode's illegal blocks come after one question for that inode, and
/// pass 5's block differences stand between one header and one end.
#[test]
fn latch_questions_come_once_ahead_of_their_group() {
    let mut img = Image::build(Options::ext2());
    let far = img.blocks() + 100;
    for i in [ino::FILE, ino::INNER] {
        img.set_inode_u32(i, 0x28, far); // i_block[0]
        img.set_inode_u32(i, 0x2C, far + 1); // i_block[1]
    }
    let b = img.free_block() + 5;
    img.set_block_used(b, true);
    img.set_block_used(b + 2, true);
    let (codes, _) = run(img.finish());
    let at = |c: &str| -> Vec<usize> { (0..codes.len()).filter(|&i| codes[i] == c).collect() };
    let (latch, illegal) = (at("P1_INODE_BLOCK_LATCH"), at("P1_ILLEGAL_BLOCK_NUM"));
    assert_eq!((latch.len(), illegal.len()), (2, 4), "{codes:?}");
    assert_eq!(latch[0] + 1, illegal[0], "{codes:?}");
    assert_eq!(latch[1] + 1, illegal[2], "{codes:?}");
    assert!(illegal[1] < latch[1], "{codes:?}");
    let (header, end) = (at("P5_BLOCK_BITMAP_HEADER"), at("P5_BLOCK_BITMAP_END"));
    assert_eq!((header.len(), end.len()), (1, 1), "{codes:?}");
    let between = &codes[header[0] + 1..end[0]];
    assert!(between.len() >= 2, "{codes:?}");
    assert!(
        between.iter().all(|c| c.starts_with("P5_BLOCK_")
            && (c.ends_with("_USED") || c.ends_with("_UNUSED"))),
        "{codes:?}"
    );
}

/// Pass 0, one group and so no backup: a zeroed magic number is restored when the rest proves
/// the superblock (ext4: its checksum; ext2: the root directory's "." and ".."), and refused
/// when nothing does (ext2 with the root directory's block zeroed too).
#[test]
fn pass0_magic_restored_only_on_proof() {
    for o in flavours() {
        let mut img = Image::build(o);
        img.set_sb_u16(0x38, 0);
        let (codes, exit) = run(img.finish());
        assert!(
            codes.iter().any(|c| c == "P0_SB_FIELD_REBUILT"),
            "{o:?}: {codes:?}"
        );
        assert_eq!(exit, 4, "{o:?}: {codes:?}");
    }
    let mut img = Image::build(Options::ext2());
    let root = img.file_block(ino::ROOT, 0);
    let at = Image::block_offset(root);
    img.bytes_mut()[at..at + ffsck_testfs::BLOCK].fill(0);
    img.set_sb_u16(0x38, 0);
    let (codes, exit) = run(img.finish());
    assert_eq!(exit, 8, "{codes:?}");
    assert!(
        !codes.iter().any(|c| c == "P0_SB_FIELD_REBUILT"),
        "{codes:?}"
    );
}

/// Pass 0, one group: a zeroed magic number beside a damaged descriptor (the block bitmap
/// outside the group) is still restored on the superblock's own proof (ext4: its checksum;
/// ext2: the root directory's "." and ".."), and the descriptor is a finding of its own.
#[test]
fn pass0_magic_restored_beside_a_damaged_descriptor() {
    for o in flavours() {
        let mut img = Image::build(o);
        let far = img.blocks() + 10;
        img.bytes_mut()[2048..2052].copy_from_slice(&far.to_le_bytes());
        img.set_sb_u16(0x38, 0);
        let (codes, exit) = run(img.finish());
        for want in ["P0_SB_FIELD_REBUILT", "P0_BB_NOT_GROUP"] {
            assert!(
                codes.iter().any(|c| c == want),
                "{o:?}: {want} not in {codes:?}"
            );
        }
        assert_eq!(exit, 4, "{o:?}: {codes:?}");
    }
}

/// Pass 0, one group: the block size and the cluster size damaged alike (so the cluster size
/// cannot give the block size back) are set to the one size whose descriptors check and put
/// the root directory in place.
#[test]
fn pass0_block_size_found_by_the_layout() {
    for o in flavours() {
        let mut img = Image::build(o);
        img.set_sb_u32(0x18, 2).set_sb_u32(0x1C, 2);
        let (codes, exit) = run(img.finish());
        assert!(
            codes.iter().any(|c| c == "P0_SB_FIELD_REBUILT"),
            "{o:?}: {codes:?}"
        );
        assert_eq!(exit, 4, "{o:?}: {codes:?}");
    }
}

/// Pass 0, one group: a revision level of 0 on a file system of 256-byte inodes (revision 0
/// would read them at 128 bytes, every one from the wrong place) is set back to 1; a
/// journal_dev bit on a file system (no journal superblock where a journal device has one,
/// the root in place) is cleared. Each is a rebuilt field, exit 4 under -n.
#[test]
fn pass0_revision_and_journal_dev_bit_rebuilt() {
    for o in flavours() {
        for (what, off, v) in [("revision 0", 0x4C, 0u32), ("journal_dev", 0x60, 0x8)] {
            let mut img = Image::build(o);
            let v = if off == 0x60 {
                let at = 1024 + off;
                let b = img.bytes_mut();
                u32::from_le_bytes(b[at..at + 4].try_into().unwrap()) | v
            } else {
                v
            };
            img.set_sb_u32(off, v);
            let (codes, exit) = run(img.finish());
            assert!(
                codes.iter().any(|c| c == "P0_SB_FIELD_REBUILT"),
                "{o:?} {what}: {codes:?}"
            );
            assert_eq!(exit, 4, "{o:?} {what}: {codes:?}");
        }
    }
}

/// Pass 0, one group: a block size nothing in the superblock names is taken only when the
/// root directory's "." and ".." are where it puts them. Read with 2 KiB blocks, a 1 KiB file
/// system's descriptor places the inode table inside its own, where any directory inode
/// passes for a root "in place" (fuzz seed 3024 case 3048 took 2 KiB that way). Here the
/// clusters-per-group count is damaged, and the inode table's address too, so that the named
/// size finds no root; at 2 KiB the root's slot holds a directory inode with no blocks, and
/// the device is large enough for that size: the superblock is refused, as e2fsck refuses it.
#[test]
fn pass0_an_unnamed_block_size_needs_the_roots_dots() {
    let mut img = Image::build(Options::ext2());
    img.bytes_mut()[2048 + 8..2048 + 12].copy_from_slice(&7u32.to_le_bytes());
    // At 2 KiB, inode 2 of a table at block 7 is inode 38 of the real one.
    img.set_inode_u16(38, 0, ffsck_testfs::S_IFDIR | 0o755);
    img.set_inode_u16(38, 0x1A, 2);
    img.set_sb_u32(0x24, 8193); // s_clusters_per_group
    let mut bytes = img.finish();
    let len = bytes.len();
    bytes.resize(2 * len, 0);
    let (codes, exit) = run(bytes);
    assert_eq!(exit, 8, "{codes:?}");
    assert!(
        !codes.iter().any(|c| c == "P0_SB_FIELD_REBUILT"),
        "{codes:?}"
    );
}
