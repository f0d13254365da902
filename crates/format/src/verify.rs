//! One verifier per metadata block type: is the magic right, is the structure sane, does the
//! checksum match. Each takes the block's bytes and what its checksum is seeded with, and
//! answers with a value ([`Fault`] names what is wrong); none reads anything else, allocates
//! by an on-disk count, or panics on a hostile block. The model is xfsprogs' `xfs_buf_ops`
//! (`verify_read`): one place per block type that knows what a good one looks like.
//!
//! The checksums themselves (`csum::ext4_crc32c` seeded per file system or per inode) live with
//! their types (`dir`, `extent`, `xattr`, `group`, `journal`); the seeds in [`seeds`].

use crate::csum::ext4_crc32c;
use crate::dir::{self as fdir, header_at, DxRootInfo, DX_ROOT_INFO_OFFSET};
use crate::extent::{tail_offset, EXTENT_MAGIC};
use crate::group::RawGroupDesc;
use crate::superblock::RawSuperblock;
use crate::xattr::{self, XATTR_MAGIC};
use zerocopy::FromBytes;

/// What is wrong with a metadata block.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fault {
    /// The magic number is not this type's.
    Magic,
    /// A header field or count is impossible for a block of this size (which one, for a
    /// message).
    Structure(&'static str),
    /// A checksum-bearing block has no room or no tail for its checksum.
    NoChecksum,
    /// The stored checksum differs from the computed one.
    Checksum { stored: u32, computed: u32 },
}

/// A verifier's answer.
pub type Verdict = Result<(), Fault>;

fn le16(b: &[u8], at: usize) -> u16 {
    b.get(at..at + 2)
        .map_or(0, |s| u16::from_le_bytes([s[0], s[1]]))
}

fn le32(b: &[u8], at: usize) -> u32 {
    b.get(at..at + 4)
        .map_or(0, |s| u32::from_le_bytes([s[0], s[1], s[2], s[3]]))
}

fn csum(stored: u32, computed: u32) -> Verdict {
    if stored == computed {
        Ok(())
    } else {
        Err(Fault::Checksum { stored, computed })
    }
}

/// The seeds metadata checksums start from.
pub mod seeds {
    /// Seed of the checksums of one inode's metadata (directory, extent blocks): the file
    /// system's seed, then the inode number and generation.
    pub fn inode(fs_seed: u32, ino: u32, generation: u32) -> u32 {
        crate::csum::inode_seed(fs_seed, ino, generation)
    }
}

/// The checksum tail of a directory leaf block with `metadata_csum`: present and matching
/// `seed` (the directory inode's seed).
pub fn dir_leaf_csum(block: &[u8], seed: u32) -> Verdict {
    if !fdir::has_tail(block) {
        return Err(Fault::NoChecksum);
    }
    csum(
        fdir::stored_leaf_checksum(block),
        fdir::leaf_checksum(block, seed),
    )
}

/// A directory leaf block: the entries before the tail framed as the kernel requires (each
/// record at least 12 bytes, a multiple of 4, inside the block, its name inside it), ending
/// exactly where the tail starts; and, with `seed` (`metadata_csum`), the tail's checksum.
pub fn dir_leaf(block: &[u8], seed: Option<u32>) -> Verdict {
    let bs = block.len();
    let end = match seed {
        Some(_) if !fdir::has_tail(block) => return Err(Fault::NoChecksum),
        Some(_) => bs - fdir::TAIL_SIZE,
        None => bs,
    };
    let mut off = 0usize;
    // Each record is at least 12 bytes: this bounds the walk.
    for _ in 0..=end / 12 {
        if off >= end {
            break;
        }
        let h = header_at(&block[..end], off, bs as u32).ok_or(Fault::Structure("rec_len"))?;
        let rec_len = h.rec_len as usize;
        if rec_len < 12 || !rec_len.is_multiple_of(4) || off + rec_len > end {
            return Err(Fault::Structure("rec_len"));
        }
        if fdir::rec_len_for(usize::from(h.name_len)) as usize > rec_len {
            return Err(Fault::Structure("name_len"));
        }
        off += rec_len;
    }
    match seed {
        Some(seed) => dir_leaf_csum(block, seed),
        None => Ok(()),
    }
}

/// Where an htree node's checksum is computed from: the offset of its count/limit header (32
/// in a root, 8 in an interior node), or `None` when the block is neither (as libext2fs
/// decides it: a root has `.` of 12 bytes, `..` to the end of the block and a sane root info;
/// an interior node one empty entry spanning the block).
pub fn dx_count_offset(block: &[u8]) -> Option<usize> {
    let bs = block.len();
    let first = header_at(block, 0, bs as u32)?;
    if first.rec_len as usize == bs && first.name_len == 0 {
        return Some(fdir::DX_NODE_ENTRIES_OFFSET);
    }
    if first.rec_len != 12 {
        return None;
    }
    let second = header_at(block, 12, bs as u32)?;
    if second.rec_len as usize != bs - 12 {
        return None;
    }
    match DxRootInfo::read_from_prefix(block.get(DX_ROOT_INFO_OFFSET..)?) {
        Ok((info, _)) if info.reserved_zero.get() == 0 && info.info_length == 8 => {
            Some(fdir::DX_ROOT_ENTRIES_OFFSET)
        }
        _ => None,
    }
}

/// An htree root or interior node: recognised as one ([`dx_count_offset`]), `limit` and
/// `count` inside the block with room for the tail, and the tail's checksum.
pub fn dx_node(block: &[u8], seed: u32) -> Verdict {
    let co = dx_count_offset(block).ok_or(Fault::Magic)?;
    let limit = usize::from(le16(block, co));
    let count = usize::from(le16(block, co + 2));
    if count > limit {
        return Err(Fault::Structure("count"));
    }
    let (stored, computed) = dx_checksum(block, co, seed)?;
    csum(stored, computed)
}

/// The stored and computed checksum of an htree node whose table starts at `count_offset`:
/// the tail sits after `limit` entries, while the checksum covers the header, the first
/// `count` entries and the tail's reserved word.
pub fn dx_checksum(block: &[u8], count_offset: usize, seed: u32) -> Result<(u32, u32), Fault> {
    let bs = block.len();
    let limit = usize::from(le16(block, count_offset));
    let count = usize::from(le16(block, count_offset + 2));
    let max_sane = bs.saturating_sub(count_offset) / 8;
    if count_offset + 4 > bs || limit > max_sane || count > max_sane {
        return Err(Fault::Structure("limit"));
    }
    let tail = count_offset + limit * 8;
    if tail + fdir::DX_TAIL_SIZE > bs {
        return Err(Fault::NoChecksum);
    }
    let c = ext4_crc32c(seed, &block[..count_offset + count * 8]);
    let c = ext4_crc32c(c, &block[tail..tail + 4]);
    let c = ext4_crc32c(c, &[0u8; 4]);
    Ok((le32(block, tail + 4), c))
}

/// Recompute and store an htree node's tail checksum (its reserved word zeroed first). False,
/// and nothing written, when the table leaves no room for the tail.
pub fn set_dx_checksum(block: &mut [u8], count_offset: usize, seed: u32) -> bool {
    let limit = usize::from(le16(block, count_offset));
    let tail = count_offset + limit * 8;
    if tail + fdir::DX_TAIL_SIZE > block.len() {
        return false;
    }
    block[tail..tail + 4].fill(0);
    let Ok((_, c)) = dx_checksum(block, count_offset, seed) else {
        return false;
    };
    block[tail + 4..tail + 8].copy_from_slice(&c.to_le_bytes());
    true
}

/// The checksum test libext2fs applies to a block of an indexed directory that may be a
/// root, an interior node or a leaf: a block whose records (of at least 8 bytes, a multiple of
/// 4) end exactly at a leaf tail is checked as a leaf, one that parses as an index node as a
/// node; anything else fails.
pub fn dir_block_csum_ok(block: &[u8], seed: u32) -> bool {
    let bs = block.len();
    if bs < fdir::TAIL_SIZE {
        return false;
    }
    let top = bs - fdir::TAIL_SIZE;
    let mut off = 0usize;
    let mut lands_on_tail = false;
    // Each record is at least 8 bytes: this bounds the walk.
    for _ in 0..=bs / 8 {
        if off >= top {
            lands_on_tail = off == top;
            break;
        }
        let Some(h) = header_at(block, off, bs as u32) else {
            break;
        };
        if h.rec_len < 8 || h.rec_len % 4 != 0 {
            return false;
        }
        off += h.rec_len as usize;
    }
    if lands_on_tail && fdir::has_tail(block) {
        return dir_leaf_csum(block, seed).is_ok();
    }
    let Some(co) = dx_count_offset(block) else {
        return false;
    };
    matches!(dx_checksum(block, co, seed), Ok((s, c)) if s == c)
}

/// An extent tree block (not the root in the inode): magic, `eh_max` within the block,
/// `eh_entries` within `eh_max`, a depth a tree may have, and the tail checksum seeded by the
/// owning inode's seed.
pub fn extent_block(block: &[u8], seed: Option<u32>) -> Verdict {
    if le16(block, 0) != EXTENT_MAGIC {
        return Err(Fault::Magic);
    }
    let (entries, max, depth) = (le16(block, 2), le16(block, 4), le16(block, 6));
    if usize::from(max) > block.len().saturating_sub(12) / 12 {
        return Err(Fault::Structure("eh_max"));
    }
    if entries > max {
        return Err(Fault::Structure("eh_entries"));
    }
    if depth > crate::extent::MAX_DEPTH {
        return Err(Fault::Structure("eh_depth"));
    }
    let Some(seed) = seed else {
        return Ok(());
    };
    let (stored, computed) = extent_checksum(block, seed).ok_or(Fault::NoChecksum)?;
    csum(stored, computed)
}

/// The stored and computed tail checksum of an extent block (`None`: no room for the tail).
pub fn extent_checksum(block: &[u8], seed: u32) -> Option<(u32, u32)> {
    let at = tail_offset(le16(block, 4));
    (at + 4 <= block.len()).then(|| (le32(block, at), ext4_crc32c(seed, &block[..at])))
}

/// Recompute and store an extent block's tail checksum (false: no room for it).
pub fn set_extent_checksum(block: &mut [u8], seed: u32) -> bool {
    let Some((_, c)) = extent_checksum(block, seed) else {
        return false;
    };
    let at = tail_offset(le16(block, 4));
    block[at..at + 4].copy_from_slice(&c.to_le_bytes());
    true
}

/// An extended attribute block at `blocknr`: magic, one block, and (with `fs_seed`,
/// `metadata_csum`) its checksum.
pub fn xattr_block(block: &[u8], blocknr: u64, fs_seed: Option<u32>) -> Verdict {
    if block.len() < 32 {
        return Err(Fault::Structure("size"));
    }
    if le32(block, 0) != XATTR_MAGIC {
        return Err(Fault::Magic);
    }
    if le32(block, 8) != 1 {
        return Err(Fault::Structure("h_blocks"));
    }
    match fs_seed {
        Some(seed) => csum(
            le32(block, 0x10),
            xattr::block_checksum(block, seed, blocknr),
        ),
        None => Ok(()),
    }
}

/// A group descriptor of group `group`: its checksum (crc32c with `metadata_csum`, crc16 with
/// `uninit_bg`; nothing to verify without either).
pub fn group_desc(gd: &RawGroupDesc, sb: &RawSuperblock, group: u32, desc_size: usize) -> Verdict {
    match gd.compute_checksum(sb, group, desc_size) {
        Some(c) => csum(u32::from(gd.bg_checksum.get()), u32::from(c)),
        None => Ok(()),
    }
}

/// The checksum of a block or inode bitmap: crc32c of its first `bits / 8` bytes (the bits of
/// one group), seeded by the file system.
pub fn bitmap_checksum(bitmap: &[u8], bits: u32, fs_seed: u32) -> u32 {
    let len = (bits / 8) as usize;
    ext4_crc32c(fs_seed, &bitmap[..len.min(bitmap.len())])
}

/// A block or inode bitmap holding `bits` bits against the checksum its descriptor stores
/// (`stored`: only the low 16 bits are kept with 32-byte descriptors, `desc_size < 64`).
pub fn bitmap(bitmap: &[u8], bits: u32, fs_seed: u32, stored: u32, desc_size: u32) -> Verdict {
    let sum = bitmap_checksum(bitmap, bits, fs_seed);
    if desc_size >= 64 {
        csum(stored, sum)
    } else {
        csum(stored, sum & 0xFFFF)
    }
}

/// `ob_magic` of an orphan-file block's tail.
pub const ORPHAN_BLOCK_MAGIC: u32 = 0x0B10_CA04;
/// Size of the tail (`ob_magic`, `ob_checksum`) at the end of each orphan-file block.
pub const ORPHAN_TAIL_BYTES: usize = 8;

/// The tail checksum of orphan-file block `block` at physical block `blk` of inode `ino`.
pub fn orphan_block_checksum(
    block: &[u8],
    fs_seed: u32,
    ino: u32,
    generation: u32,
    blk: u64,
) -> u32 {
    let c = ext4_crc32c(fs_seed, &ino.to_le_bytes());
    let c = ext4_crc32c(c, &generation.to_le_bytes());
    let c = ext4_crc32c(c, &blk.to_le_bytes());
    ext4_crc32c(c, &block[..block.len().saturating_sub(ORPHAN_TAIL_BYTES)])
}

/// An orphan-file block: tail magic and, with `fs_seed`, its checksum.
pub fn orphan_block(
    block: &[u8],
    fs_seed: Option<u32>,
    ino: u32,
    generation: u32,
    blk: u64,
) -> Verdict {
    let n = block.len();
    if n < ORPHAN_TAIL_BYTES {
        return Err(Fault::Structure("size"));
    }
    if le32(block, n - ORPHAN_TAIL_BYTES) != ORPHAN_BLOCK_MAGIC {
        return Err(Fault::Magic);
    }
    match fs_seed {
        Some(seed) => csum(
            le32(block, n - 4),
            orphan_block_checksum(block, seed, ino, generation, blk),
        ),
        None => Ok(()),
    }
}

/// A journal superblock: magic and block type, then its checksum when the journal carries
/// checksums v2/v3.
pub fn journal_superblock(block: &[u8]) -> Verdict {
    let jsb = crate::journal::JournalSuperblock::parse(block).ok_or(Fault::Structure("size"))?;
    if !jsb.magic_ok() {
        return Err(Fault::Magic);
    }
    let bt = jsb.blocktype();
    if bt != crate::journal::blocktype::SUPERBLOCK_V1
        && bt != crate::journal::blocktype::SUPERBLOCK_V2
    {
        return Err(Fault::Structure("h_blocktype"));
    }
    if jsb.has_csum_v2or3() {
        return csum(jsb.s_checksum.get(), jsb.compute_checksum());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn put_entry(b: &mut [u8], off: usize, ino: u32, rec_len: u16, name: &[u8]) {
        b[off..off + 4].copy_from_slice(&ino.to_le_bytes());
        b[off + 4..off + 6].copy_from_slice(&rec_len.to_le_bytes());
        b[off + 6] = name.len() as u8;
        b[off + 7] = 1;
        b[off + 8..off + 8 + name.len()].copy_from_slice(name);
    }

    /// A 1 KiB leaf with `.`, `..`, one file and a checksum tail sealed with `seed`.
    fn leaf(seed: u32) -> Vec<u8> {
        let mut b = vec![0u8; 1024];
        put_entry(&mut b, 0, 2, 12, b".");
        put_entry(&mut b, 12, 2, 12, b"..");
        put_entry(&mut b, 24, 12, 1012 - 24, b"file");
        b[1012 + 4..1012 + 6].copy_from_slice(&12u16.to_le_bytes());
        b[1012 + 7] = fdir::ft::CSUM_TAIL;
        let c = fdir::leaf_checksum(&b, seed);
        b[1020..].copy_from_slice(&c.to_le_bytes());
        b
    }

    #[test]
    fn a_directory_leaf_verifies_and_each_damage_is_named() {
        let seed = 0x1234_5678;
        assert_eq!(dir_leaf(&leaf(seed), Some(seed)), Ok(()));
        // Another inode's seed: the checksum does not match.
        assert!(matches!(
            dir_leaf(&leaf(seed), Some(7)),
            Err(Fault::Checksum { .. })
        ));
        // A flipped name byte: the checksum catches it.
        let mut b = leaf(seed);
        b[32] ^= 1;
        assert!(matches!(
            dir_leaf_csum(&b, seed),
            Err(Fault::Checksum { .. })
        ));
        // No tail.
        let mut b = leaf(seed);
        b[1012 + 7] = 0;
        assert_eq!(dir_leaf(&b, Some(seed)), Err(Fault::NoChecksum));
        // A rec_len that is not a multiple of 4, one past the tail, a name past its record.
        for (at, v) in [(24 + 4, 990u16), (24 + 4, 1000), (12 + 6, 5)] {
            let mut b = leaf(seed);
            if at == 12 + 6 {
                b[at] = v as u8;
            } else {
                b[at..at + 2].copy_from_slice(&v.to_le_bytes());
            }
            assert!(
                matches!(dir_leaf(&b, Some(seed)), Err(Fault::Structure(_))),
                "{at} {v}"
            );
        }
    }

    /// A 1 KiB interior htree node with `count` of `limit` entries and a sealed tail.
    fn node(seed: u32, count: u16) -> Vec<u8> {
        let mut b = vec![0u8; 1024];
        b[4..6].copy_from_slice(&1024u16.to_le_bytes());
        let limit = ((1024 - 8 - 8) / 8) as u16;
        b[8..10].copy_from_slice(&limit.to_le_bytes());
        b[10..12].copy_from_slice(&count.to_le_bytes());
        for i in 1..usize::from(count) {
            b[8 + 8 * i..12 + 8 * i].copy_from_slice(&(i as u32 * 1000).to_le_bytes());
            b[12 + 8 * i..16 + 8 * i].copy_from_slice(&(i as u32).to_le_bytes());
        }
        assert!(set_dx_checksum(&mut b, 8, seed));
        b
    }

    #[test]
    fn an_htree_node_verifies_and_fails_on_damage() {
        let seed = 99;
        let b = node(seed, 3);
        assert_eq!(dx_count_offset(&b), Some(8));
        assert_eq!(dx_node(&b, seed), Ok(()));
        assert!(dir_block_csum_ok(&b, seed));
        // A changed hash inside `count`: bad checksum (one past it is not covered).
        let mut bad = b.clone();
        bad[16] ^= 1;
        assert!(matches!(dx_node(&bad, seed), Err(Fault::Checksum { .. })));
        assert!(!dir_block_csum_ok(&bad, seed));
        // A limit that leaves no room for the tail, a count past the limit.
        let mut bad = b.clone();
        bad[8..10].copy_from_slice(&127u16.to_le_bytes());
        assert_eq!(dx_node(&bad, seed), Err(Fault::NoChecksum));
        let mut bad = b.clone();
        bad[10..12].copy_from_slice(&200u16.to_le_bytes());
        assert_eq!(dx_node(&bad, seed), Err(Fault::Structure("count")));
        // Not a node at all (a leaf's first entry).
        assert_eq!(dx_node(&leaf(seed), seed), Err(Fault::Magic));
        // The library's test takes a leaf as a leaf.
        assert!(dir_block_csum_ok(&leaf(seed), seed));
    }

    #[test]
    fn an_extent_block_verifies_and_fails_on_damage() {
        let seed = 5;
        let mut b = vec![0u8; 1024];
        b[0..2].copy_from_slice(&EXTENT_MAGIC.to_le_bytes());
        b[2..4].copy_from_slice(&1u16.to_le_bytes());
        b[4..6].copy_from_slice(&84u16.to_le_bytes());
        assert!(set_extent_checksum(&mut b, seed));
        assert_eq!(extent_block(&b, Some(seed)), Ok(()));
        let mut bad = b.clone();
        bad[20] ^= 1;
        assert!(matches!(
            extent_block(&bad, Some(seed)),
            Err(Fault::Checksum { .. })
        ));
        assert_eq!(extent_block(&bad, None), Ok(()));
        let mut bad = b.clone();
        bad[0] = 0;
        assert_eq!(extent_block(&bad, Some(seed)), Err(Fault::Magic));
        let mut bad = b.clone();
        bad[2..4].copy_from_slice(&85u16.to_le_bytes());
        assert_eq!(
            extent_block(&bad, None),
            Err(Fault::Structure("eh_entries"))
        );
        let mut bad = b.clone();
        bad[4..6].copy_from_slice(&90u16.to_le_bytes());
        assert_eq!(extent_block(&bad, None), Err(Fault::Structure("eh_max")));
    }

    #[test]
    fn an_xattr_block_verifies_and_fails_on_damage() {
        let (seed, blk) = (0xABCD, 77u64);
        let mut b = vec![0u8; 1024];
        b[0..4].copy_from_slice(&XATTR_MAGIC.to_le_bytes());
        b[8..12].copy_from_slice(&1u32.to_le_bytes());
        let c = xattr::block_checksum(&b, seed, blk);
        b[0x10..0x14].copy_from_slice(&c.to_le_bytes());
        assert_eq!(xattr_block(&b, blk, Some(seed)), Ok(()));
        // The checksum covers the block number.
        assert!(matches!(
            xattr_block(&b, blk + 1, Some(seed)),
            Err(Fault::Checksum { .. })
        ));
        let mut bad = b.clone();
        bad[8] = 2;
        assert_eq!(
            xattr_block(&bad, blk, None),
            Err(Fault::Structure("h_blocks"))
        );
        bad[3] = 0;
        assert_eq!(xattr_block(&bad, blk, None), Err(Fault::Magic));
    }

    #[test]
    fn bitmaps_and_orphan_blocks_verify_and_fail_on_damage() {
        let bits = vec![0x5Au8; 1024];
        let sum = bitmap_checksum(&bits, 8192, 3);
        assert_eq!(bitmap(&bits, 8192, 3, sum, 64), Ok(()));
        // A 32-byte descriptor keeps the low half only.
        assert_eq!(bitmap(&bits, 8192, 3, sum & 0xFFFF, 32), Ok(()));
        assert!(bitmap(&bits, 8192, 3, sum & 0xFFFF, 64).is_err());
        let mut flipped = bits.clone();
        flipped[100] ^= 1;
        assert!(bitmap(&flipped, 8192, 3, sum, 64).is_err());
        // Bits past the group's count are not covered.
        flipped = bits.clone();
        flipped[1023] ^= 1;
        assert_eq!(
            bitmap(&flipped, 8000, 3, bitmap_checksum(&bits, 8000, 3), 64),
            Ok(())
        );

        let mut ob = vec![0u8; 1024];
        ob[1016..1020].copy_from_slice(&ORPHAN_BLOCK_MAGIC.to_le_bytes());
        let c = orphan_block_checksum(&ob, 9, 12, 1, 500);
        ob[1020..].copy_from_slice(&c.to_le_bytes());
        assert_eq!(orphan_block(&ob, Some(9), 12, 1, 500), Ok(()));
        assert!(matches!(
            orphan_block(&ob, Some(9), 12, 2, 500),
            Err(Fault::Checksum { .. })
        ));
        ob[1016] ^= 1;
        assert_eq!(orphan_block(&ob, None, 12, 1, 500), Err(Fault::Magic));
    }
}
