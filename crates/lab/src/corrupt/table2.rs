//! The corruptions of Table II of the ffsck paper (Ma et al., FAST '13) as named operations:
//! superblock magic, inode size, inode count and block count; group-descriptor bitmap
//! addresses; inode type, link count, block number, file size, pointer range and state;
//! indirect-block pointer range and block number; multiply-allocated blocks.
//!
//! Each picks its victim with the seeded generator (a regular file with data, a group, an
//! indirect block or extent-tree leaf) and writes through the same logged `Image::write` as
//! every other mode. "Pointer range" means a block number past the end of the file system;
//! "block number" means a block inside it that belongs to the group-0 inode table, so the
//! damage is about ownership rather than range.

use anyhow::{anyhow, bail, Result};
use ffsck_format::inode;
use rand::Rng;
use rand_chacha::ChaCha8Rng;
use serde::{Deserialize, Serialize};

use super::{corrupt_field, corrupt_semantic, Dirty, Image, Op, Semantic};

/// Most inodes scanned for a victim.
const SCAN: u32 = 20_000;
/// Most candidates kept for the random pick.
const MAX_CANDIDATES: usize = 64;

/// One row of Table II.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Table2 {
    /// Superblock magic number zeroed.
    SbMagic,
    /// Superblock inode size made one larger (no longer a power of two).
    SbInodeSize,
    /// Superblock inode count one larger than groups × inodes per group.
    SbInodeCount,
    /// Superblock block count one larger than the device.
    SbBlockCount,
    /// A group's block-bitmap address moved past the end of the file system.
    GdBlockBitmap,
    /// A group's inode-bitmap address moved past the end of the file system.
    GdInodeBitmap,
    /// A regular file's mode given an invalid file type.
    InodeType,
    /// A regular file's link count made one larger.
    InodeLinks,
    /// A file's first block pointer aimed at the group-0 inode table.
    InodeBlock,
    /// A file's i_size set to 0 although it has data.
    InodeSize,
    /// A file's first block pointer set past the end of the file system.
    InodePtrRange,
    /// An in-use file given a deletion time.
    InodeState,
    /// The first pointer of an indirect block (or extent-tree leaf) set past the end.
    IndPtrRange,
    /// The first pointer of an indirect block (or extent-tree leaf) aimed at the inode table.
    IndBlock,
    /// Two files claim the same block.
    MultiplyAllocated,
}

impl Table2 {
    pub const ALL: [Table2; 15] = [
        Table2::SbMagic,
        Table2::SbInodeSize,
        Table2::SbInodeCount,
        Table2::SbBlockCount,
        Table2::GdBlockBitmap,
        Table2::GdInodeBitmap,
        Table2::InodeType,
        Table2::InodeLinks,
        Table2::InodeBlock,
        Table2::InodeSize,
        Table2::InodePtrRange,
        Table2::InodeState,
        Table2::IndPtrRange,
        Table2::IndBlock,
        Table2::MultiplyAllocated,
    ];

    /// The kebab-case name used on the command line and in manifests.
    pub fn name(self) -> String {
        serde_json::to_value(self)
            .ok()
            .and_then(|v| v.as_str().map(str::to_string))
            .unwrap_or_default()
    }
}

/// Where a file's first block pointer lives: (byte offset, field name, width in bytes).
fn first_pointer(img: &Image, ino: u32, i: &inode::RawInode) -> Result<(u64, String, usize)> {
    let root = img.inode_offset(ino)? + 0x28;
    if i.flags() & inode::flags::EXTENTS != 0 {
        let bytes = i.block_bytes();
        let n = ffsck_format::extent::Node::parse(&bytes)
            .map_err(|e| anyhow!("bad extent root of inode {ino}: {e:?}"))?;
        if n.is_empty() {
            bail!("inode {ino} has an empty extent root");
        }
        // ee_start_lo of a leaf entry, ei_leaf_lo of an index entry.
        return Ok(if n.is_leaf() {
            (root + 12 + 8, format!("extent[{ino}][0].ee_start_lo"), 4)
        } else {
            (root + 12 + 4, format!("extent[{ino}][0].ei_leaf_lo"), 4)
        });
    }
    Ok((root, format!("inode[{ino}].i_block[0]"), 4))
}

/// In-use regular files with at least one data block and a size below 4 GiB.
fn data_files(img: &Image) -> Vec<(u32, inode::RawInode)> {
    let first = img.geo.first_ino;
    let mut out = Vec::new();
    for ino in first..=img.geo.inodes_count.min(first.saturating_add(SCAN)) {
        let Ok((_, i)) = img.inode(ino) else { continue };
        if i.file_type() != inode::FileType::Regular || i.links_count() == 0 || i.dtime() != 0 {
            continue;
        }
        if i.size() == 0 || i.size() >= 1 << 32 || !matches!(img.map_block(ino, 0), Ok(Some(_))) {
            continue;
        }
        out.push((ino, i));
        if out.len() >= MAX_CANDIDATES {
            break;
        }
    }
    out
}

/// A file's first indirect block (block map) or first extent-tree leaf below the root:
/// (inode, physical block, offset of its first pointer in the block, name, extent block?).
fn indirect_blocks(img: &Image) -> Vec<(u32, u64, usize, String, bool)> {
    let first = img.geo.first_ino;
    let mut out = Vec::new();
    for ino in first..=img.geo.inodes_count.min(first.saturating_add(SCAN)) {
        let Ok((_, i)) = img.inode(ino) else { continue };
        if i.file_type() != inode::FileType::Regular || i.links_count() == 0 {
            continue;
        }
        let root = i.block_bytes();
        let found = if i.flags() & inode::flags::EXTENTS != 0 {
            match ffsck_format::extent::Node::parse(&root) {
                Ok(n) if !n.is_leaf() && !n.is_empty() => {
                    let b = n.index(0).leaf();
                    // Only a leaf directly below the root: its entries are extents.
                    let leaf = img.block(b).ok().and_then(|blk| {
                        ffsck_format::extent::Node::parse(&blk)
                            .ok()
                            .map(|l| (l.is_leaf(), l.is_empty()))
                    });
                    match leaf {
                        Some((true, false)) => {
                            Some((b, 12 + 8, format!("extentblock[{b}][0].ee_start_lo"), true))
                        }
                        _ => None,
                    }
                }
                _ => None,
            }
        } else {
            let ind = u64::from(u32::from_le_bytes(
                root[48..52].try_into().unwrap_or_default(),
            ));
            let in_range = ind != 0 && ind < img.geo.blocks_count;
            let first_ptr = in_range
                .then(|| img.block(ind).ok())
                .flatten()
                .is_some_and(|blk| blk[..4] != [0; 4]);
            first_ptr.then(|| (ind, 0, format!("indblock[{ind}][0]"), false))
        };
        if let Some((b, off, name, ext)) = found {
            out.push((ino, b, off, name, ext));
            if out.len() >= MAX_CANDIDATES {
                break;
            }
        }
    }
    out
}

/// A block inside the file system that no file may own: the first block of group 0's inode
/// table.
fn metadata_block(img: &Image) -> Result<u64> {
    Ok(img.gd(0)?.inode_table())
}

/// A block number past the end of the file system that still fits in 32 bits.
fn beyond_end(img: &Image) -> Result<u32> {
    let b = img.geo.blocks_count + 1000;
    u32::try_from(b)
        .map_err(|_| anyhow!("the file system is too large for a 32-bit pointer past its end"))
}

/// Applies one Table II corruption; returns its description.
pub(super) fn corrupt_table2(img: &mut Image, t: Table2, rng: &mut ChaCha8Rng) -> Result<String> {
    let mut pick_file = |img: &Image| -> Result<(u32, inode::RawInode)> {
        let files = data_files(img);
        if files.is_empty() {
            bail!("no regular file with data blocks found");
        }
        Ok(files[rng.random_range(0..files.len())].clone())
    };
    match t {
        Table2::SbMagic => corrupt_field(img, "sb.s_magic", &Op::Zero, rng),
        Table2::SbInodeSize => corrupt_field(img, "sb.s_inode_size", &Op::Add, rng),
        Table2::SbInodeCount => corrupt_field(img, "sb.s_inodes_count", &Op::Add, rng),
        Table2::SbBlockCount => {
            if img.sb.s_blocks_count_lo.get() == u32::MAX {
                bail!("the block count cannot grow in its low word");
            }
            corrupt_field(img, "sb.s_blocks_count_lo", &Op::Add, rng)
        }
        Table2::GdBlockBitmap | Table2::GdInodeBitmap => {
            let g = rng.random_range(0..img.group_count());
            let field = if t == Table2::GdBlockBitmap {
                "bg_block_bitmap_lo"
            } else {
                "bg_inode_bitmap_lo"
            };
            let v = beyond_end(img)?;
            corrupt_field(img, &format!("gd[{g}].{field}"), &Op::Set(v.into()), rng)
        }
        Table2::InodeType => {
            let (ino, i) = pick_file(img)?;
            // 0xF000 is no file type at all.
            let mode = (i.mode() & 0x0FFF) | 0xF000;
            corrupt_field(
                img,
                &format!("inode[{ino}].i_mode"),
                &Op::Set(mode.into()),
                rng,
            )
        }
        Table2::InodeLinks => {
            let (ino, _) = pick_file(img)?;
            corrupt_field(img, &format!("inode[{ino}].i_links_count"), &Op::Add, rng)
        }
        Table2::InodeSize => {
            let (ino, _) = pick_file(img)?;
            corrupt_field(img, &format!("inode[{ino}].i_size_lo"), &Op::Zero, rng)
        }
        Table2::InodeState => {
            let (ino, _) = pick_file(img)?;
            // 2020-01-01, the time every generated image carries.
            corrupt_field(
                img,
                &format!("inode[{ino}].i_dtime"),
                &Op::Set(1_577_836_800),
                rng,
            )
        }
        Table2::InodeBlock | Table2::InodePtrRange => {
            let (ino, i) = pick_file(img)?;
            let (off, name, _) = first_pointer(img, ino, &i)?;
            let v = if t == Table2::InodeBlock {
                u32::try_from(metadata_block(img)?)
                    .map_err(|_| anyhow!("inode table lies beyond 32-bit block numbers"))?
            } else {
                beyond_end(img)?
            };
            img.write(off, &v.to_le_bytes(), name.clone(), "damage")?;
            img.mark(Dirty::Inode(ino));
            Ok(format!("{name} of inode {ino} now points at block {v}"))
        }
        Table2::IndPtrRange | Table2::IndBlock => {
            let cands = indirect_blocks(img);
            if cands.is_empty() {
                bail!(
                    "no file with an indirect block or an extent-tree leaf found (build the \
                     image with a file larger than 12 blocks, or a fragmented one on ext4)"
                );
            }
            let (ino, b, off, name, ext) = cands[rng.random_range(0..cands.len())].clone();
            let v = if t == Table2::IndBlock {
                u32::try_from(metadata_block(img)?)
                    .map_err(|_| anyhow!("inode table lies beyond 32-bit block numbers"))?
            } else {
                beyond_end(img)?
            };
            img.write(
                b * img.bs + off as u64,
                &v.to_le_bytes(),
                name.clone(),
                "damage",
            )?;
            if ext {
                img.mark(Dirty::ExtentBlock(b, ino));
            }
            Ok(format!("{name} (of inode {ino}) now points at block {v}"))
        }
        Table2::MultiplyAllocated => corrupt_semantic(img, Semantic::MultiplyClaimed, rng),
    }
}
