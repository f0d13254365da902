//! Quota files rewritten with the usage the check counted (`P6_UPDATE_QUOTAS`), as e2fsck
//! rewrites them: every id's limits kept, the grace times reset to a week, the file laid out
//! anew. Its old blocks are given back and new ones taken in the allocation facts, which the
//! caller then writes out as bitmaps and counts.

use super::inode::{edit, read_inode};
use super::newjournal::allocate;
use crate::engine::AllocFacts;
use crate::filemap::{self, Visit};
use crate::pass0::Pass0Facts;
use crate::problem::Fixer;
use crate::quota;
use crate::report::Finding;
use ffsck_format::inode::{flags, mode};
use ffsck_format::Incompat;
use ffsck_io::Device;

/// Rewrite the quota files the fixes among `fixes` name. Returns whether any was written.
pub fn apply(
    p0: &Pass0Facts,
    dev: &dyn Device,
    facts: &mut AllocFacts,
    fixes: &[&Finding],
) -> bool {
    let now = p0.now.secs();
    let mut wrote = false;
    for f in fixes.iter().filter(|f| f.problem.fixed_by(Fixer::Quota)) {
        let qtype = f.ctx.num as usize;
        let ino = quota::inodes(&p0.fs).get(qtype).copied().unwrap_or(0);
        if qtype >= quota::QTYPES || ino == 0 || ino != f.ctx.ino {
            continue;
        }
        // Limits come from the old file where it still reads; a broken file keeps none.
        let old = quota::read_file(&p0.fs, ino)
            .ok()
            .and_then(|b| quota::parse(qtype, &b).ok())
            .unwrap_or_default();
        let records = quota::merge(&old, &facts.quota.0[qtype], now);
        let bytes = quota::build(qtype, &records);
        wrote |= rewrite(p0, dev, facts, ino, &bytes);
    }
    wrote
}

/// Replace the contents of file inode `ino` with `bytes`: in place when its blocks hold them
/// exactly, else its old blocks freed, new ones taken near them, the inode's map, size and
/// block count set. Returns whether blocks were taken or freed.
fn rewrite(
    p0: &Pass0Facts,
    dev: &dyn Device,
    facts: &mut AllocFacts,
    ino: u32,
    bytes: &[u8],
) -> bool {
    let fs = &p0.fs;
    let geo = &fs.geo;
    let Some(inode) = read_inode(p0, dev, ino) else {
        return false;
    };
    // A quota file in an ordinary inode that nothing uses (its inode table was lost): the
    // inode is made anew, in use, as e2fsck makes a quota inode, so the next check owns its
    // blocks (whatever its old map names is not its own). One in use by another file is left
    // alone.
    // A reserved quota inode without links (cleared for a bad mode) is made anew as well: its
    // blocks are still its own.
    let idx = u64::from(ino) - 1;
    let reserved = ino < geo.first_ino;
    let fresh = if reserved {
        inode.links_count() == 0
    } else {
        !facts.inode_used.get(idx)
    };
    if !reserved && !fresh && inode.i_mode.get() & mode::S_IFMT != mode::S_IFREG {
        return false;
    }
    let extents =
        geo.incompat.has(Incompat::EXTENTS) && (fresh || inode.flags() & flags::EXTENTS != 0);
    let mut old = Vec::new();
    // The data blocks in logical order, while they run from block 0 without a hole.
    let mut data: Vec<u64> = Vec::new();
    let mut dense = true;
    let mut visit = |v: Visit| -> bool {
        match v {
            Visit::Data { lblk, pblk } if pblk != 0 => {
                dense &= lblk == data.len() as u64 && geo.is_valid_block(pblk);
                data.push(pblk);
                old.push(pblk);
            }
            Visit::Meta { pblk } if pblk != 0 => old.push(pblk),
            _ => {}
        }
        true
    };
    let sound =
        (reserved || !fresh) && filemap::walk(fs, &inode.block_bytes(), extents, false, &mut visit);
    let bs = fs.block_size();
    // A file whose blocks hold the new contents exactly is written in place, its map kept
    // (the common case: the same IDs, counts changed), so no block is taken or freed.
    if sound && !fresh && dense && data.len() as u64 == bytes.len().div_ceil(bs) as u64 {
        for (k, &pblk) in data.iter().enumerate() {
            let mut block = vec![0u8; bs];
            let part = &bytes[k * bs..bytes.len().min((k + 1) * bs)];
            block[..part.len()].copy_from_slice(part);
            let _ = dev.write_at(&block, pblk * bs as u64);
        }
        let size = bytes.len() as u64;
        edit(p0, dev, ino, |i| {
            i.i_size_lo.set(size as u32);
            i.i_size_high.set((size >> 32) as u32);
        });
        return false;
    }
    let start = old.first().copied().unwrap_or(geo.first_data_block);
    for &b in &old {
        if geo.is_valid_block(b) {
            facts.block_used.clear(b);
        }
    }
    let total = bytes.len().div_ceil(bs) as u64;
    let gen = inode.i_generation.get();
    let Some(file) = allocate(p0, dev, facts, ino, gen, total, start, extents) else {
        // No room: the old file stays as it was.
        for &b in &old {
            if geo.is_valid_block(b) {
                facts.block_used.set(b);
            }
        }
        return false;
    };
    for (k, &pblk) in file.data().iter().enumerate() {
        let mut block = vec![0u8; bs];
        let part = &bytes[k * bs..bytes.len().min((k + 1) * bs)];
        block[..part.len()].copy_from_slice(part);
        let _ = dev.write_at(&block, pblk * bs as u64);
    }
    let size = bytes.len() as u64;
    if fresh {
        super::newjournal::fresh_inode(p0, dev, ino, &file, size, extents);
        facts.inode_used.set(idx);
        return true;
    }
    let sectors = file.blocks() * (bs as u64 / 512);
    edit(p0, dev, ino, |i| {
        i.i_size_lo.set(size as u32);
        i.i_size_high.set((size >> 32) as u32);
        i.i_blocks_lo.set(sectors as u32);
        i.l_i_blocks_high.set((sectors >> 32) as u16);
        if extents {
            i.i_flags.set(i.i_flags.get() | flags::EXTENTS);
        }
        i.set_block_bytes(&file.root);
    });
    true
}
