//! Fill a hole in a directory (`P2_DIRECTORY_HOLE`), as e2fsck's "Allocate" does: take a free
//! block, write an empty directory block into it (block 0 gets `.` and `..`), map it at the
//! hole and account for it in the inode's size and block count. The block is marked in the
//! round's allocation facts and in the on-disk bitmap, as e2fsck's allocator marks it; the
//! free counts are left for pass 5 to find wrong, as e2fsck leaves them.
//!
//! Mapped here: any block of a block-mapped inode (direct, or through its single, double or
//! triple indirect block, each indirect block on the way taken and zeroed when missing, as
//! e2fsck's block map allocates them), and any sound extent tree, rebuilt with the new block
//! as pass 1E rebuilds trees (`extent_tree::remap`), deeper when the root overflows. On
//! bigalloc the block goes at its logical offset in a cluster: the cluster the directory holds
//! for that logical cluster already, or a wholly free one. Anything else is left alone.

use super::{extent_tree, inode};
use crate::engine::AllocFacts;
use crate::ext4::blocks::Mapping;
use crate::pass0::Pass0Facts;
use crate::problem::Fixer;
use crate::report::Finding;
use ffsck_format::dir as fdir;
use ffsck_format::ino as rino;
use ffsck_format::inode::flags as iflags;
use ffsck_io::Device;
use std::collections::HashSet;

/// Direct block pointers of a block-mapped inode.
const DIRECT: u32 = 12;

/// Fill the holes the fixes among `fixes` name.
pub fn apply(
    p0: &Pass0Facts,
    dev: &dyn Device,
    facts: Option<&mut AllocFacts>,
    fixes: &[&Finding],
) -> bool {
    let Some(facts) = facts else {
        return false;
    };
    let mut taken: HashSet<u64> = HashSet::new();
    let mut nodes_changed = false;
    let mut cursor = p0.fs.geo.first_data_block.max(1);
    // A run of holes is filled hole by hole.
    let holes = fixes
        .iter()
        .filter(|f| f.problem.fixed_by(Fixer::DirHole))
        .flat_map(|f| f.each());
    let ratio = u64::from(p0.fs.geo.cluster_ratio.max(1));
    for f in holes {
        // No free block is left (a hole of a bigalloc directory may still have a block in a
        // cluster the directory holds): the rest of a run of millions stays as it is.
        if ratio == 1 && cursor >= p0.fs.geo.blocks_count.min(facts.block_used.len()) {
            break;
        }
        let (dir, lblk) = (f.ctx.dir, f.ctx.num);
        let Ok(lblk) = u32::try_from(lblk) else {
            continue;
        };
        nodes_changed |= fill(p0, dev, facts, &mut taken, &mut cursor, dir, lblk);
    }
    let mut taken: Vec<u64> = taken.into_iter().collect();
    taken.sort_unstable();
    taken.iter().for_each(|&b| facts.block_used.set(b));
    super::alloc::mark_blocks(p0, dev, &taken, &[], false);
    nodes_changed
}

/// The next block neither in use nor taken by an earlier fill, from `cursor` on. On bigalloc
/// the whole cluster must be free, and the block taken is the one at `lblk`'s offset in it
/// (a file's logical and physical blocks share their offset in a cluster).
fn free_block(
    p0: &Pass0Facts,
    facts: &AllocFacts,
    taken: &HashSet<u64>,
    cursor: &mut u64,
    lblk: u32,
) -> Option<u64> {
    let geo = &p0.fs.geo;
    let ratio = u64::from(geo.cluster_ratio.max(1));
    let end = geo.blocks_count.min(facts.block_used.len());
    // Clusters start at multiples of the ratio from the first data block.
    let base = geo.first_data_block;
    *cursor = base + (cursor.saturating_sub(base)).div_ceil(ratio) * ratio;
    while *cursor + ratio <= end {
        let c0 = *cursor;
        *cursor += ratio;
        if (c0..c0 + ratio).all(|b| !facts.block_used.get(b) && !taken.contains(&b)) {
            return Some(c0 + u64::from(lblk) % ratio);
        }
    }
    None
}

/// On bigalloc, where `lblk` must go when another block of its logical cluster is mapped
/// already: the same physical cluster, at `lblk`'s offset.
fn in_mapped_cluster(ratio: u64, runs: &[Mapping], lblk: u32) -> Option<u64> {
    if ratio <= 1 {
        return None;
    }
    let (lblk, cluster) = (u64::from(lblk), u64::from(lblk) / ratio);
    runs.iter().find_map(|r| {
        // The run's first logical block in `lblk`'s cluster, if it has one.
        let l = r.lblk.max(cluster * ratio);
        (l < r.lblk + r.len && l / ratio == cluster)
            .then(|| (r.pblk + (l - r.lblk)) - l % ratio + lblk % ratio)
    })
}

/// Fill logical block `lblk` of directory `dir` with a new empty block. Returns whether the
/// extent tree took or freed mapping blocks in `facts` (the allocation is then rebuilt).
fn fill(
    p0: &Pass0Facts,
    dev: &dyn Device,
    facts: &mut AllocFacts,
    taken: &mut HashSet<u64>,
    cursor: &mut u64,
    dir: u32,
    lblk: u32,
) -> bool {
    let fs = &p0.fs;
    let bs = fs.block_size();
    let Some(ino) = super::inode::read_inode(p0, dev, dir) else {
        return false;
    };
    let flags = ino.flags();
    if flags & iflags::INLINE_DATA != 0 {
        return false;
    }
    let mut iblock: Vec<u32> = ino.i_block.iter().map(|w| w.get()).collect();
    // Where the new block is mapped: a tree rebuilt with it, or a block map's chain from its
    // slot in `i_block` down through the indirect blocks (read, or new when missing).
    let mut runs = None;
    let mut chain: Option<Chain> = None;
    // Check the slot is free before taking a block.
    if flags & iflags::EXTENTS != 0 {
        let Some(r) = extent_tree::runs_of(p0, dev, dir) else {
            return false;
        };
        if r.iter()
            .any(|m| (m.lblk..m.lblk + m.len).contains(&u64::from(lblk)))
        {
            return false;
        }
        runs = Some(r);
    } else {
        let Some(c) = Chain::walk(p0, dev, &iblock, lblk) else {
            return false;
        };
        chain = Some(c);
    }
    let ratio = u64::from(fs.geo.cluster_ratio.max(1));
    // A block in a cluster the directory holds already costs no new cluster.
    let shared = runs
        .as_deref()
        .and_then(|r| in_mapped_cluster(ratio, r, lblk))
        .filter(|&b| b < fs.geo.blocks_count && !taken.contains(&b) && !facts.block_used.get(b));
    let Some(pblk) = shared.or_else(|| free_block(p0, facts, taken, cursor, lblk)) else {
        return false;
    };
    // A block map's missing indirect blocks, after the data block (as e2fsck takes them).
    let mut new_nodes = Vec::new();
    if let Some(c) = &chain {
        taken.insert(pblk);
        for _ in 0..c.missing() {
            match free_block(p0, facts, taken, cursor, 0) {
                Some(b) => {
                    taken.insert(b);
                    new_nodes.push(b);
                }
                None => {
                    release(taken, pblk, &new_nodes);
                    return false;
                }
            }
        }
    }
    // The new block's contents first: it is free until mapped, so a mapping that fails
    // below leaves nothing behind.
    if dev
        .write_at(&empty_block(p0, dev, dir, lblk), pblk * bs as u64)
        .is_err()
    {
        return false;
    }
    let mut nodes_changed = false;
    if runs.is_some() {
        facts.block_used.set(pblk);
        let add = Mapping {
            lblk: u64::from(lblk),
            pblk,
            len: 1,
            uninit: false,
        };
        match extent_tree::remap(p0, dev, facts, dir, Some(add)) {
            Some(changed) => nodes_changed = changed,
            None => {
                facts.block_used.clear(pblk);
                return false;
            }
        }
    } else if let Some(c) = chain {
        if !c.link(dev, bs, &mut iblock, pblk, &new_nodes) {
            release(taken, pblk, &new_nodes);
            return false;
        }
    }
    taken.insert(pblk);
    // i_blocks counts whole clusters (a block map's new indirect blocks too).
    let sectors = if shared.is_some() {
        0
    } else {
        (1 + new_nodes.len() as u64) * ratio * (bs / 512) as u64
    };
    let want_size = (u64::from(lblk) + 1) * bs as u64;
    let block_mapped = runs.is_none();
    inode::edit(p0, dev, dir, |i| {
        if block_mapped {
            for (w, v) in i.i_block.iter_mut().zip(&iblock) {
                w.set(*v);
            }
        }
        let blocks = u64::from(i.i_blocks_lo.get()) + sectors;
        i.i_blocks_lo.set(blocks as u32);
        if i.size() < want_size {
            i.i_size_lo.set(want_size as u32);
            i.i_size_high.set((want_size >> 32) as u32);
        }
    });
    nodes_changed
}

/// Give back the blocks a fill took (`pblk` and its new indirect blocks) when it cannot map
/// them.
fn release(taken: &mut HashSet<u64>, pblk: u64, nodes: &[u64]) {
    taken.remove(&pblk);
    for b in nodes {
        taken.remove(b);
    }
}

/// Where a logical block goes in a block map: its slot in `i_block`, then one index per
/// level of indirect blocks below it (none for a direct block); `None` past the triple
/// indirect block's reach.
fn map_path(lblk: u32, per: u64) -> Option<(usize, Vec<usize>)> {
    let mut l = u64::from(lblk);
    if l < u64::from(DIRECT) {
        return Some((l as usize, Vec::new()));
    }
    l -= u64::from(DIRECT);
    let mut span = per;
    for (slot, depth) in [(12usize, 1u32), (13, 2), (14, 3)] {
        if l < span {
            let idx = (0..depth)
                .rev()
                .map(|d| ((l / per.pow(d)) % per) as usize)
                .collect();
            return Some((slot, idx));
        }
        l -= span;
        span = span.saturating_mul(per);
    }
    None
}

/// A block map's way to a hole: the slot in `i_block`, and each level's indirect block below
/// it (its number when it exists, its contents, the index taken in it).
struct Chain {
    slot: usize,
    levels: Vec<(Option<u64>, Vec<u8>, usize)>,
}

impl Chain {
    /// Walk to logical block `lblk` of the block map `iblock`; `None` unless it is a hole
    /// reached through sound pointers (a pointer out of the file system is left alone).
    fn walk(p0: &Pass0Facts, dev: &dyn Device, iblock: &[u32], lblk: u32) -> Option<Chain> {
        let fs = &p0.fs;
        let bs = fs.block_size();
        let (slot, idx) = map_path(lblk, (bs / 4) as u64)?;
        let mut ptr = u64::from(*iblock.get(slot)?);
        let mut levels = Vec::with_capacity(idx.len());
        for i in idx {
            let mut table = vec![0u8; bs];
            let at = if ptr == 0 {
                None
            } else if ptr < fs.geo.first_data_block || ptr >= fs.geo.blocks_count {
                return None;
            } else {
                dev.read_at(&mut table, ptr * bs as u64).ok()?;
                Some(ptr)
            };
            let next = table.get(i * 4..i * 4 + 4)?;
            ptr = u64::from(u32::from_le_bytes([next[0], next[1], next[2], next[3]]));
            levels.push((at, table, i));
        }
        (ptr == 0).then_some(Chain { slot, levels })
    }
    /// Indirect blocks the way lacks.
    fn missing(&self) -> usize {
        self.levels.iter().filter(|(at, _, _)| at.is_none()).count()
    }
    /// Point the way at `pblk`, the missing indirect blocks being `new` (in order, from the
    /// top): their contents and the changed ones are written, the top slot set in `iblock`.
    fn link(self, dev: &dyn Device, bs: usize, iblock: &mut [u32], pblk: u64, new: &[u64]) -> bool {
        let mut fresh = new.iter();
        let blocks: Option<Vec<u64>> = self
            .levels
            .iter()
            .map(|(at, _, _)| at.or_else(|| fresh.next().copied()))
            .collect();
        let Some(blocks) = blocks else {
            return false;
        };
        // Each level points at the next one's block, the last at the data block.
        let targets = blocks.iter().skip(1).copied().chain([pblk]);
        for (((_, mut table, i), &blk), target) in self.levels.into_iter().zip(&blocks).zip(targets)
        {
            let Ok(t) = u32::try_from(target) else {
                return false;
            };
            table[i * 4..i * 4 + 4].copy_from_slice(&t.to_le_bytes());
            if dev.write_at(&table, blk * bs as u64).is_err() {
                return false;
            }
        }
        let top = blocks.first().copied().unwrap_or(pblk);
        match (u32::try_from(top), iblock.get_mut(self.slot)) {
            (Ok(t), Some(s)) => {
                *s = t;
                true
            }
            _ => false,
        }
    }
}

/// An empty directory block for logical block `lblk` of `dir`: block 0 holds `.` and `..`.
fn empty_block(p0: &Pass0Facts, dev: &dyn Device, dir: u32, lblk: u32) -> Vec<u8> {
    let fs = &p0.fs;
    let bs = fs.block_size();
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
    buf
}

#[cfg(test)]
mod tests {
    use super::map_path;

    #[test]
    fn a_logical_block_finds_its_slot_and_indexes_at_every_depth() {
        // 1 KiB blocks: 256 pointers a block.
        let per = 256;
        assert_eq!(map_path(0, per), Some((0, vec![])));
        assert_eq!(map_path(11, per), Some((11, vec![])));
        assert_eq!(map_path(12, per), Some((12, vec![0])));
        assert_eq!(map_path(267, per), Some((12, vec![255])));
        assert_eq!(map_path(268, per), Some((13, vec![0, 0])));
        assert_eq!(map_path(268 + 256 + 3, per), Some((13, vec![1, 3])));
        let tind = 268 + 256 * 256;
        assert_eq!(map_path(tind - 1, per), Some((13, vec![255, 255])));
        assert_eq!(map_path(tind, per), Some((14, vec![0, 0, 0])));
        assert_eq!(
            map_path(tind + 256 * 256 + 256 + 1, per),
            Some((14, vec![1, 1, 1]))
        );
        // Past the triple indirect block's reach.
        assert_eq!(map_path(u32::MAX, per), None);
        assert_eq!(map_path(1 << 30, 1024).map(|(slot, _)| slot), Some(14));
    }
}
