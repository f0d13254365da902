//! The resize inode (7), which holds the reserved descriptor blocks for online growth:
//! disabled with `meta_bg` (the two cannot go together), cleared when the feature is off, and
//! rebuilt when it does not describe the reserved blocks, as e2fsck does. The rebuilt inode maps,
//! through one new double-indirect block, each reserved block after the primary descriptors,
//! and each of those lists its copies in the groups that carry a superblock backup.

use super::inode::edit;
use crate::engine::AllocFacts;
use crate::pass0::Pass0Facts;
use crate::problem::Problem as P;
use crate::report::Finding;
use ffsck_format::inode::mode;
use ffsck_format::{ino, Compat};
use ffsck_io::Device;
use zerocopy::IntoBytes;

/// `i_block` slot of the double-indirect block.
const DIND: usize = 13;
/// Bytes of the original (128-byte) inode, which e2fsck zeroes to clear it.
const BASE_INODE: usize = 128;

/// Turn the feature off in the superblock (made after the allocation rebuild, which writes a
/// superblock of its own).
pub fn apply_super(dev: &dyn Device, fixes: &[&Finding]) {
    if !fixes
        .iter()
        .any(|f| f.problem == P::P0_DISABLE_RESIZE_INODE)
    {
        return;
    }
    super::features::edit_super(dev, |sb| {
        sb.s_feature_compat
            .set(sb.s_feature_compat.get() & !Compat::RESIZE_INODE);
        sb.s_reserved_gdt_blocks.set(0);
    });
}

/// Pass 1's findings in the resize inode's map (illegal blocks, illegal indirect blocks): its
/// map is rebuilt whole, which leaves it as valid as a recreated one, where zeroing single
/// pointers would leave a map that no longer lists every backup.
fn map_damaged(fixes: &[&Finding]) -> bool {
    fixes.iter().any(|f| {
        f.ctx.ino == ino::RESIZE
            && matches!(
                f.problem,
                P::P1_ILLEGAL_BLOCK_NUM | P::P1_INODE_BLOCK_LATCH | P::P1_TOO_MANY_BAD_BLOCKS
            )
    })
}

/// Clear the resize inode, and rebuild it when it was invalid or its map damaged. Returns
/// whether blocks were taken or freed (the allocation is then rewritten).
pub fn apply(
    p0: &Pass0Facts,
    dev: &dyn Device,
    facts: &mut AllocFacts,
    fixes: &[&Finding],
) -> bool {
    if map_damaged(fixes) && p0.fs.sb.compat().has(Compat::RESIZE_INODE) {
        return rebuild_damaged(p0, dev, facts);
    }
    let clear = fixes.iter().any(|f| {
        matches!(
            f.problem,
            P::P0_CLEAR_RESIZE_INODE | P::P0_RESIZE_INODE_INVALID
        )
    });
    if !clear {
        return false;
    }
    edit(p0, dev, ino::RESIZE, |i| {
        i.as_mut_bytes()[..BASE_INODE].fill(0)
    });
    if fixes
        .iter()
        .any(|f| f.problem == P::P0_RESIZE_INODE_INVALID)
    {
        return rebuild(p0, dev, facts, None);
    }
    false
}

/// Rebuild a resize inode whose map pass 1 found damaged. Its double-indirect block is kept
/// when it lies in the file system outside the fixed metadata (pass 1 claimed it); otherwise a
/// new one is taken.
fn rebuild_damaged(p0: &Pass0Facts, dev: &dyn Device, facts: &mut AllocFacts) -> bool {
    let geo = &p0.fs.geo;
    let old = p0.fs.read_inode(ino::RESIZE).map_or(0, |b| {
        u64::from(ffsck_format::RawInode::parse(&b).i_block[DIND].get())
    });
    let keep = (old >= geo.first_data_block
        && old < geo.blocks_count
        && old < facts.block_used.len()
        && facts.block_used.get(old))
    .then(|| crate::pass1::metadata_map(&p0.fs, &p0.groups))
    .is_some_and(|meta| !meta.get(old));
    edit(p0, dev, ino::RESIZE, |i| {
        i.as_mut_bytes()[..BASE_INODE].fill(0)
    });
    rebuild(p0, dev, facts, keep.then_some(old))
}

/// Recreate the resize inode, with its double-indirect block at `dind` or, if none, in the
/// first free block after group 0's tables. Returns whether a block was taken.
fn rebuild(p0: &Pass0Facts, dev: &dyn Device, facts: &mut AllocFacts, dind: Option<u64>) -> bool {
    let fs = &p0.fs;
    let geo = &fs.geo;
    let bs = u64::from(geo.block_size);
    let apb = bs / 4;
    // A 1 KiB-block bigalloc file system starts at block 0 but keeps its superblock in 1.
    let sb_blk = if geo.block_size == 1024 && geo.first_data_block == 0 {
        1
    } else {
        geo.first_data_block
    };
    // The double-indirect block: the first free block after group 0's tables, as e2fsck's
    // goal puts it.
    let goal = sb_blk
        + u64::from(geo.gdt_blocks)
        + u64::from(geo.reserved_gdt_blocks)
        + 2
        + u64::from(geo.inode_blocks_per_group);
    let limit = geo.blocks_count.min(facts.block_used.len());
    // With bigalloc, a cluster of its own.
    let ratio = u64::from(geo.cluster_ratio.max(1));
    let free = |lo: u64, hi: u64| {
        crate::relocate::first_free(&facts.block_used, lo, hi.checked_sub(1)?, 1, ratio)
    };
    let taken = dind.is_none();
    let Some(dind) = dind
        .or_else(|| free(goal.min(limit), limit))
        .or_else(|| free(geo.first_data_block, limit))
    else {
        return false;
    };
    facts.block_used.set(dind);
    let backups: Vec<u64> = (1..geo.group_count)
        .filter(|&g| geo.group_has_super(g))
        .map(|g| u64::from(g) * u64::from(geo.blocks_per_group))
        .take(apb as usize)
        .collect();
    let mut dind_buf = vec![0u8; bs as usize];
    let mut blocks = 1u64;
    for rsv in 0..u64::from(geo.reserved_gdt_blocks) {
        let gdt_blk = sb_blk + 1 + u64::from(geo.gdt_blocks) + rsv;
        if gdt_blk >= geo.blocks_count {
            break;
        }
        let slot = ((u64::from(geo.gdt_blocks) + rsv) % apb) as usize;
        dind_buf[4 * slot..4 * slot + 4].copy_from_slice(&(gdt_blk as u32).to_le_bytes());
        let mut list = vec![0u8; bs as usize];
        for (k, off) in backups.iter().enumerate() {
            let copy = gdt_blk + off;
            if copy >= geo.blocks_count {
                break;
            }
            list[4 * k..4 * k + 4].copy_from_slice(&(copy as u32).to_le_bytes());
            blocks += 1;
        }
        let _ = dev.write_at(&list, gdt_blk * bs);
        blocks += 1;
    }
    let _ = dev.write_at(&dind_buf, dind * bs);
    let size = (apb * apb + apb + 12) * bs;
    let now = p0.now.stamp();
    edit(p0, dev, ino::RESIZE, |i| {
        i.i_mode.set(mode::S_IFREG | 0o600);
        i.i_links_count.set(1);
        i.i_block[DIND].set(dind as u32);
        i.i_size_lo.set(size as u32);
        i.i_size_high.set((size >> 32) as u32);
        // Each block counts a whole cluster (bigalloc), as pass 1 counts them.
        let sectors = blocks * ratio * (bs / 512);
        i.i_blocks_lo.set(sectors as u32);
        i.l_i_blocks_high.set((sectors >> 32) as u16);
        i.i_ctime.set(now);
        i.i_mtime.set(now);
    });
    taken
}
