//! Bitmaps that lost their place: a descriptor pointing at block 0, outside its group, or at
//! a block other metadata already holds, with the move agreed to. At the end of pass 1 each
//! gets a new block, the first one nothing
//! claims (in its group first, then anywhere), as e2fsck does; pass 5 counts the block as used
//! and the repair writes the rebuilt bitmap there.

use crate::bitmap::Bitmap;
use crate::pass0::Pass0Facts;
use crate::problem::Problem as P;
use crate::report::{Findings, Policy, ProblemCtx};

/// Which bitmap of a group moves.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Bitmaps {
    Block,
    Inode,
}

/// One bitmap moved to `blk`.
#[derive(Clone, Copy, Debug)]
pub struct Move {
    pub group: u32,
    pub which: Bitmaps,
    pub blk: u64,
}

/// The first block of `lo..=hi` that `used` leaves free.
fn first_free(used: &Bitmap, lo: u64, hi: u64) -> Option<u64> {
    (lo..=hi).find(|&b| !used.get(b))
}

/// Per group, whether its block and inode bitmaps move: pass 0's verdict, plus the bitmaps
/// that land on a block an earlier piece of metadata holds (groups in order, each group's
/// superblock copy and descriptors, then inode table, block bitmap, inode bitmap). A clash in
/// an inode table is reported; tables are not moved.
fn clashes(p0: &Pass0Facts, policy: Policy, out: &mut Findings) -> Vec<[bool; 2]> {
    let fs = &p0.fs;
    let geo = &fs.geo;
    let mut held = Bitmap::new(geo.blocks_count);
    if geo.first_data_block == 0 {
        held.set(0);
    }
    let mut want = Vec::with_capacity(p0.groups.len());
    for (g, st) in p0.groups.iter().enumerate() {
        let gd = &fs.groups[g];
        let g = g as u32;
        for (start, n) in geo.fixed_metadata_runs(g) {
            for b in start..start.saturating_add(n).min(geo.blocks_count) {
                held.set(b);
            }
        }
        let ctx = |blk| ProblemCtx {
            group: g,
            blk,
            ..Default::default()
        };
        if st.inode_table_ok {
            let it = gd.inode_table();
            let end = it
                .saturating_add(u64::from(geo.inode_blocks_per_group))
                .min(geo.blocks_count);
            if let Some(b) = (it..end).find(|&b| held.get(b)) {
                out.report(policy, P::P1_ITABLE_CONFLICT, ctx(b));
            }
            (it..end).for_each(|b| held.set(b));
        }
        let mut moves = [st.relocate_block_bitmap, st.relocate_inode_bitmap];
        for (k, ok, blk, problem) in [
            (0, st.block_bitmap_ok, gd.block_bitmap(), P::P1_BB_CONFLICT),
            (1, st.inode_bitmap_ok, gd.inode_bitmap(), P::P1_IB_CONFLICT),
        ] {
            if !ok || blk >= geo.blocks_count {
                continue;
            }
            if held.get(blk) {
                moves[k] |= out.report(policy, problem, ctx(blk));
            } else {
                held.set(blk);
            }
        }
        want.push(moves);
    }
    want
}

/// Choose the new blocks, mark them in `used`, and report each move.
pub fn plan(p0: &Pass0Facts, used: &mut Bitmap, policy: Policy, out: &mut Findings) -> Vec<Move> {
    let geo = &p0.fs.geo;
    let mut moves = Vec::new();
    for (g, wants) in clashes(p0, policy, out).into_iter().enumerate() {
        let g = g as u32;
        for (which, wanted) in [(Bitmaps::Block, wants[0]), (Bitmaps::Inode, wants[1])] {
            if !wanted {
                continue;
            }
            let (lo, hi) = (geo.group_first_block(g), geo.group_last_block(g));
            let last = geo.blocks_count.saturating_sub(1);
            let Some(blk) =
                first_free(used, lo, hi).or_else(|| first_free(used, geo.first_data_block, last))
            else {
                continue;
            };
            used.set(blk);
            let what = match which {
                Bitmaps::Block => "block bitmap",
                Bitmaps::Inode => "inode bitmap",
            };
            out.report(
                policy,
                P::P1_RELOC_TO,
                ProblemCtx {
                    group: g,
                    blk,
                    str: Some(what.into()),
                    ..Default::default()
                },
            );
            moves.push(Move {
                group: g,
                which,
                blk,
            });
        }
    }
    moves
}
