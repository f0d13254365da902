//! Bitmaps that lost their place: a descriptor pointing at block 0, outside its group, at a
//! block other metadata already holds, or at a block on the bad-blocks list, with the move
//! agreed to. At the end of pass 1 each
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

/// Per group, whether its block and inode bitmaps move (and from which block, when the old
/// one is in range): pass 0's verdict, plus the bitmaps on a bad block or on a block an
/// earlier piece of metadata holds (groups in order, each group's
/// superblock copy and descriptors, then inode table, block bitmap, inode bitmap). A clash in
/// an inode table is reported; tables are not moved.
fn clashes(p0: &Pass0Facts, policy: Policy, out: &mut Findings) -> Vec<[(bool, Option<u64>); 2]> {
    let fs = &p0.fs;
    let geo = &fs.geo;
    let bad = bad_blocks(fs);
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
        let mut from = [None, None];
        for (k, ok, blk, clash, bad_block) in [
            (
                0,
                st.block_bitmap_ok,
                gd.block_bitmap(),
                P::P1_BB_CONFLICT,
                P::P1_BB_BAD_BLOCK,
            ),
            (
                1,
                st.inode_bitmap_ok,
                gd.inode_bitmap(),
                P::P1_IB_CONFLICT,
                P::P1_IB_BAD_BLOCK,
            ),
        ] {
            if !ok || blk >= geo.blocks_count {
                continue;
            }
            let problem = if bad.contains(&blk) {
                Some(bad_block)
            } else if held.get(blk) {
                Some(clash)
            } else {
                None
            };
            held.set(blk);
            if let Some(p) = problem {
                if out.report(policy, p, ctx(blk)) {
                    moves[k] = true;
                    from[k] = Some(blk);
                }
            }
        }
        want.push([(moves[0], from[0]), (moves[1], from[1])]);
    }
    want
}

/// The blocks on the bad-blocks list (inode 1's block map), bounded by the file system size.
fn bad_blocks(fs: &crate::fs::Fs) -> std::collections::HashSet<u64> {
    let mut bad = std::collections::HashSet::new();
    let Some(raw) = fs.read_inode(ffsck_format::ino::BAD) else {
        return bad;
    };
    let inode = ffsck_format::inode::RawInode::parse(&raw);
    let limit = fs.geo.blocks_count;
    crate::filemap::walk(fs, &inode.block_bytes(), false, false, &mut |v| {
        if let crate::filemap::Visit::Data { pblk, .. } = v {
            bad.insert(pblk);
        }
        (bad.len() as u64) < limit
    });
    bad
}

/// Choose the new blocks, mark them in `used`, and report each move.
pub fn plan(p0: &Pass0Facts, used: &mut Bitmap, policy: Policy, out: &mut Findings) -> Vec<Move> {
    let geo = &p0.fs.geo;
    let mut moves = Vec::new();
    for (g, wants) in clashes(p0, policy, out).into_iter().enumerate() {
        let g = g as u32;
        for (which, (wanted, from)) in [(Bitmaps::Block, wants[0]), (Bitmaps::Inode, wants[1])] {
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
            let ctx = ProblemCtx {
                group: g,
                str: Some(what.into()),
                ..Default::default()
            };
            match from {
                Some(old) => out.report(
                    policy,
                    P::P1_RELOC_FROM_TO,
                    ProblemCtx {
                        blk: old,
                        blk2: blk,
                        ..ctx
                    },
                ),
                None => out.report(policy, P::P1_RELOC_TO, ProblemCtx { blk, ..ctx }),
            };
            moves.push(Move {
                group: g,
                which,
                blk,
            });
        }
    }
    moves
}
