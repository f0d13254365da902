//! `-l`, `-L` and `-c`: before the passes, the bad-blocks inode (inode 1) is rewritten from a
//! list, as e2fsck does. The list's blocks outside the file system are dropped with e2fsck's
//! warning; the rest are added to the blocks the inode lists (or replace them, `-L`), sorted,
//! and mapped by a block map whose indirect blocks are taken where the on-disk bitmaps say a
//! block is free. The passes then treat the listed blocks as any bad block: a file sharing
//! one is cloned in pass 1D, and pass 5 marks them in use.

use super::inode::{edit, read_inode};
use super::newjournal::map_given;
use crate::bitmap::Bitmap;
use crate::ext4::blocks::{Indirect, Mapping, Span, Step, Visitor, Walk};
use crate::pass0::Pass0Facts;
use crate::problem::Problem as P;
use crate::report::{Finding, ProblemCtx};
use ffsck_format::{ino, inode::flags};
use ffsck_io::Device;

/// A list of bad blocks to put into the bad-blocks inode.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct BadBlockList {
    /// Block numbers, as read (not checked yet).
    pub blocks: Vec<u64>,
    /// `-L` (and `-c` without `-k`): the list replaces the inode's; otherwise it is added.
    pub replace: bool,
    /// The device's name, for "Updating bad block inode."
    pub device: String,
}

/// The data blocks a block map lists, and its indirect blocks.
#[derive(Default)]
struct Listed {
    data: Vec<u64>,
    tables: Vec<u64>,
}

impl Visitor for Listed {
    fn mapping(&mut self, m: Mapping, _span: &mut Span) -> Step {
        if m.pblk != 0 {
            self.data.push(m.pblk);
        }
        Step::Go
    }
    fn indirect(&mut self, ind: Indirect) -> Step {
        if ind.pblk != 0 {
            self.tables.push(ind.pblk);
        }
        Step::Go
    }
}

/// Blocks a new indirect block may not take: metadata, what the on-disk bitmaps mark in use,
/// and every block of a group whose bitmap is uninitialised or unreadable.
fn in_use(p0: &Pass0Facts) -> Bitmap {
    let fs = &p0.fs;
    let geo = &fs.geo;
    let mut used = crate::pass1::metadata_map(fs, &p0.groups);
    let per = u64::from(geo.blocks_per_group);
    for g in 0..geo.group_count {
        let start = geo.first_data_block + u64::from(g) * per;
        let end = (start + per).min(geo.blocks_count);
        let gd = &fs.groups[g as usize];
        let uninit = fs.has_group_csum() && gd.flags() & ffsck_format::group::BG_BLOCK_UNINIT != 0;
        let bits = (!uninit && p0.groups[g as usize].block_bitmap_ok)
            .then(|| fs.read_block(gd.block_bitmap()))
            .flatten();
        for b in start..end {
            let i = ((b - start) / u64::from(geo.cluster_ratio.max(1))) as usize;
            let set = bits
                .as_ref()
                .is_none_or(|bits| bits.get(i / 8).is_none_or(|byte| byte >> (i % 8) & 1 != 0));
            if set {
                used.set(b);
            }
        }
    }
    used
}

/// Rewrite the bad-blocks inode from `list` (see the module header). Returns what to report:
/// the blocks dropped, then the update itself.
pub(super) fn update(
    p0: &Pass0Facts,
    dev: &dyn Device,
    list: &BadBlockList,
    now: i64,
) -> Vec<Finding> {
    let fs = &p0.fs;
    let geo = &fs.geo;
    let mut said = Vec::new();
    let note = |problem: P, ctx: ProblemCtx| Finding {
        problem,
        ctx,
        fixed: false,
    };
    let valid = |b: u64| b >= geo.first_data_block && b < geo.blocks_count;
    for &b in list.blocks.iter().filter(|&&b| !valid(b)) {
        said.push(note(
            P::P0_BB_LIST_ILLEGAL,
            ProblemCtx {
                blk: b,
                ..Default::default()
            },
        ));
    }
    let Some(inode) = read_inode(p0, dev, ino::BAD) else {
        return said;
    };
    let mut old = Listed::default();
    if inode.flags() & flags::EXTENTS == 0 {
        Walk::over(fs).block_map(&inode.block_bytes(), &mut old);
    }
    old.data.retain(|&b| valid(b));
    let mut blocks = if list.replace {
        Vec::new()
    } else {
        old.data.clone()
    };
    blocks.extend(list.blocks.iter().copied().filter(|&b| valid(b)));
    blocks.retain(|&b| valid(b));
    blocks.sort_unstable();
    blocks.dedup();
    let mut used = in_use(p0);
    for &b in blocks.iter().chain(&old.tables) {
        used.set(b);
    }
    let bs = fs.block_size();
    let first = geo.first_data_block.max(1);
    let Some((root, tables)) = map_given(&mut used, first, geo.blocks_count, &blocks, bs) else {
        return said;
    };
    for (b, t) in &tables {
        let _ = dev.write_at(t, b * bs as u64);
    }
    // As libext2fs: the old list and its indirect blocks are freed, the new ones taken.
    let taken: Vec<u64> = blocks
        .iter()
        .copied()
        .chain(tables.iter().map(|t| t.0))
        .collect();
    let freed: Vec<u64> = old
        .data
        .iter()
        .chain(&old.tables)
        .copied()
        .filter(|b| blocks.binary_search(b).is_err() && !tables.iter().any(|t| t.0 == *b))
        .collect();
    super::alloc::mark_blocks(p0, dev, &taken, &freed, true);
    let sectors = (blocks.len() + tables.len()) as u64 * (bs as u64 / 512);
    let size = blocks.len() as u64 * bs as u64;
    let now = now.clamp(0, i64::from(u32::MAX)) as u32;
    edit(p0, dev, ino::BAD, |n| {
        n.set_block_bytes(&root);
        n.i_flags.set(n.i_flags.get() & !flags::EXTENTS);
        n.i_blocks_lo.set(sectors as u32);
        n.l_i_blocks_high.set((sectors >> 32) as u16);
        n.i_size_lo.set(size as u32);
        n.i_size_high.set((size >> 32) as u32);
        n.i_atime.set(now);
        n.i_mtime.set(now);
        if n.i_ctime.get() == 0 {
            n.i_ctime.set(now);
        }
    });
    // A change, but not a fix: e2fsck says the file system was modified and exits 0 for it.
    said.push(Finding {
        fixed: true,
        ..note(
            P::P0_BB_LIST_UPDATE,
            ProblemCtx {
                name: Some(list.device.clone()),
                ..Default::default()
            },
        )
    });
    said
}
