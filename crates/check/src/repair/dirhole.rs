//! Fill a hole in a directory (`P2_DIRECTORY_HOLE`), as e2fsck's "Allocate" does: take a free
//! block, write an empty directory block into it (block 0 gets `.` and `..`), map it at the
//! hole and account for it in the inode's size and block count. The bitmaps and free counts
//! follow in the next round's allocation rebuild, which sees the block in use.
//!
//! Mapped here: direct blocks of a block-mapped inode and the slots of its single indirect
//! block (when that block exists), and extent inodes whose whole tree fits in the inode
//! (depth 0) with a free slot. Anything else is left alone.

use super::inode;
use crate::engine::AllocFacts;
use crate::pass0::Pass0Facts;
use crate::problem::Fixer;
use crate::report::Finding;
use ffsck_format::dir as fdir;
use ffsck_format::ino as rino;
use ffsck_format::inode::flags as iflags;
use ffsck_io::Device;
use std::collections::HashSet;

const EXTENT_MAGIC: u16 = 0xF30A;
/// Direct block pointers of a block-mapped inode.
const DIRECT: u32 = 12;

/// Fill the holes the fixes among `fixes` name.
pub fn apply(p0: &Pass0Facts, dev: &dyn Device, facts: Option<&AllocFacts>, fixes: &[&Finding]) {
    let Some(facts) = facts else {
        return;
    };
    let mut taken: HashSet<u64> = HashSet::new();
    let mut cursor = p0.fs.geo.first_data_block.max(1);
    for f in fixes.iter().filter(|f| f.problem.fixed_by(Fixer::DirHole)) {
        let (dir, lblk) = (f.ctx.dir, f.ctx.num);
        let Ok(lblk) = u32::try_from(lblk) else {
            continue;
        };
        fill(p0, dev, facts, &mut taken, &mut cursor, dir, lblk);
    }
}

/// The next block neither in use nor taken by an earlier fill, from `cursor` on.
fn free_block(
    p0: &Pass0Facts,
    facts: &AllocFacts,
    taken: &HashSet<u64>,
    cursor: &mut u64,
) -> Option<u64> {
    let end = p0.fs.geo.blocks_count.min(facts.block_used.len());
    while *cursor < end {
        let b = *cursor;
        *cursor += 1;
        if !facts.block_used.get(b) && !taken.contains(&b) {
            return Some(b);
        }
    }
    None
}

fn fill(
    p0: &Pass0Facts,
    dev: &dyn Device,
    facts: &AllocFacts,
    taken: &mut HashSet<u64>,
    cursor: &mut u64,
    dir: u32,
    lblk: u32,
) {
    let fs = &p0.fs;
    let bs = fs.block_size();
    let Some(ino) = super::inode::read_inode(p0, dev, dir) else {
        return;
    };
    let flags = ino.flags();
    if flags & iflags::INLINE_DATA != 0 {
        return;
    }
    let extents = flags & iflags::EXTENTS != 0;
    let mut iblock: Vec<u32> = ino.i_block.iter().map(|w| w.get()).collect();
    // The single indirect block to map the new block in: (its number, contents, slot offset).
    let mut indirect: Option<(u64, Vec<u8>, usize)> = None;
    // Check the slot is free before taking a block.
    if extents {
        let hdr = iblock[0];
        let (magic, entries, max, depth) = (
            hdr as u16,
            (hdr >> 16) as u16,
            iblock[1] as u16,
            (iblock[1] >> 16) as u16,
        );
        if magic != EXTENT_MAGIC || depth != 0 || entries >= max || max > 4 {
            return;
        }
    } else if lblk >= DIRECT {
        // Through the single indirect block, when it exists and its slot is empty.
        let per = (bs / 4) as u32;
        let ind = u64::from(iblock[DIRECT as usize]);
        if lblk - DIRECT >= per || ind == 0 || ind >= fs.geo.blocks_count {
            return;
        }
        let mut table = vec![0u8; bs];
        if dev.read_at(&mut table, ind * bs as u64).is_err() {
            return;
        }
        let at = (lblk - DIRECT) as usize * 4;
        if table[at..at + 4] != [0; 4] {
            return;
        }
        indirect = Some((ind, table, at));
    } else if iblock[lblk as usize] != 0 {
        return;
    }
    let Some(pblk) = free_block(p0, facts, taken, cursor) else {
        return;
    };
    if extents {
        // Leaf extents start at word 3: (ee_block, ee_len | start_hi << 16, start_lo).
        let entries = (iblock[0] >> 16) as usize;
        let mut list: Vec<[u32; 3]> = (0..entries)
            .map(|i| [iblock[3 + i * 3], iblock[4 + i * 3], iblock[5 + i * 3]])
            .collect();
        if list.iter().any(|e| {
            let len = (e[1] & 0xFFFF) % 32768;
            (e[0]..e[0].saturating_add(len)).contains(&lblk)
        }) {
            return;
        }
        let at = list.iter().position(|e| e[0] > lblk).unwrap_or(list.len());
        list.insert(at, [lblk, 1 | (((pblk >> 32) as u32) << 16), pblk as u32]);
        for (i, e) in list.iter().enumerate() {
            iblock[3 + i * 3..6 + i * 3].copy_from_slice(e);
        }
        iblock[0] = u32::from(EXTENT_MAGIC) | ((list.len() as u32) << 16);
    } else {
        let Ok(p) = u32::try_from(pblk) else {
            return;
        };
        match &mut indirect {
            Some((_, table, at)) => table[*at..*at + 4].copy_from_slice(&p.to_le_bytes()),
            None => iblock[lblk as usize] = p,
        }
    }
    let mut buf = vec![0u8; bs];
    let csum = fs.has_metadata_csum();
    let cap = if csum { bs - fdir::TAIL_SIZE } else { bs };
    let typed = fs.geo.incompat.has(ffsck_format::Incompat::FILETYPE);
    let put = |buf: &mut [u8], off: usize, ino: u32, rec: usize, name: &[u8]| {
        buf[off..off + 4].copy_from_slice(&ino.to_le_bytes());
        buf[off + 4..off + 6]
            .copy_from_slice(&fdir::encode_rec_len(rec as u32, bs as u32).to_le_bytes());
        buf[off + 6] = name.len() as u8;
        buf[off + 7] = if name.is_empty() || !typed {
            0
        } else {
            fdir::ft::DIR
        };
        buf[off + 8..off + 8 + name.len()].copy_from_slice(name);
    };
    if lblk == 0 {
        // The parent is not known here: the root stands in, and pass 3 points `..` right.
        put(&mut buf, 0, dir, 12, b".");
        put(&mut buf, 12, rino::ROOT, cap - 12, b"..");
    } else {
        put(&mut buf, 0, 0, cap, b"");
    }
    if csum {
        let n = buf.len();
        buf[n - fdir::TAIL_SIZE + 4..n - fdir::TAIL_SIZE + 6]
            .copy_from_slice(&(fdir::TAIL_SIZE as u16).to_le_bytes());
        buf[n - fdir::TAIL_SIZE + 7] = fdir::ft::CSUM_TAIL;
        super::dirent::set_leaf_csum(p0, dev, dir, &mut buf);
    }
    if dev.write_at(&buf, pblk * bs as u64).is_err() {
        return;
    }
    if let Some((ind, table, _)) = &indirect {
        if dev.write_at(table, ind * bs as u64).is_err() {
            return;
        }
    }
    taken.insert(pblk);
    let sectors = (bs / 512) as u64;
    let want_size = (u64::from(lblk) + 1) * bs as u64;
    inode::edit(p0, dev, dir, |i| {
        for (w, v) in i.i_block.iter_mut().zip(&iblock) {
            w.set(*v);
        }
        let blocks = u64::from(i.i_blocks_lo.get()) + sectors;
        i.i_blocks_lo.set(blocks as u32);
        if i.size() < want_size {
            i.i_size_lo.set(want_size as u32);
            i.i_size_high.set((want_size >> 32) as u32);
        }
    });
}
