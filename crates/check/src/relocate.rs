//! Bitmaps that lost their place: a descriptor pointing at block 0, or outside its group and
//! the move agreed to. At the end of pass 1 each gets a new block, the first one nothing
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

/// Choose the new blocks, mark them in `used`, and report each move.
pub fn plan(p0: &Pass0Facts, used: &mut Bitmap, policy: Policy, out: &mut Findings) -> Vec<Move> {
    let geo = &p0.fs.geo;
    let mut moves = Vec::new();
    for (g, st) in p0.groups.iter().enumerate() {
        let g = g as u32;
        for (which, wanted) in [
            (Bitmaps::Block, st.relocate_block_bitmap),
            (Bitmaps::Inode, st.relocate_inode_bitmap),
        ] {
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
