//! Bitmaps and inode tables that lost their place: a descriptor pointing at block 0, outside
//! its group, at a block other metadata already holds, or at a block on the bad-blocks list,
//! with the move agreed to. At the end of pass 1 each gets new blocks, the first run nothing
//! claims (in its group, or its flex group, first, then anywhere), as e2fsck does; pass 5
//! counts them as used. The repair writes the rebuilt bitmap there, or copies the inode table
//! there (zeroes when the old one cannot be read) and checks again from the start.

use crate::bitmap::Bitmap;
use crate::pass0::Pass0Facts;
use crate::problem::Problem as P;
use crate::report::{Findings, Policy, ProblemCtx};

/// Which table of a group moves.
// The variants are the tables' on-disk names (block bitmap, inode bitmap, inode table).
#[allow(clippy::enum_variant_names)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Table {
    BlockBitmap,
    InodeBitmap,
    InodeTable,
}

/// One table moved to `blk` (its first block), from `from` when the old place was a block.
#[derive(Clone, Copy, Debug)]
pub struct Move {
    pub group: u32,
    pub which: Table,
    pub blk: u64,
    pub from: Option<u64>,
}

/// The first run of `n` blocks in `lo..=hi` that `used` leaves free. With clusters of
/// `ratio` blocks (bigalloc) the run starts a cluster and every block of the clusters it
/// covers is free: a cluster belongs to one owner only.
pub(crate) fn first_free(used: &Bitmap, lo: u64, hi: u64, n: u64, ratio: u64) -> Option<u64> {
    let ratio = ratio.max(1);
    let span = n.div_ceil(ratio).saturating_mul(ratio);
    let align = |b: u64| b.div_ceil(ratio).saturating_mul(ratio);
    let mut start = align(lo);
    let mut b = start;
    while b <= hi {
        if used.get(b) {
            start = align(b + 1);
            b = start;
        } else if b + 1 - start == span {
            return Some(start);
        } else {
            b += 1;
        }
    }
    None
}

/// Per group, whether its block and inode bitmaps move (and from which block, when the old
/// one is in range), and whether its inode table moves: pass 0's verdict, plus the bitmaps on
/// a bad block or on a block an earlier piece of metadata holds (groups in order, each group's
/// superblock copy and descriptors, then inode table, block bitmap, inode bitmap), and an
/// inode table on such a block when its move is agreed to (as e2fsck moves it).
fn clashes(p0: &Pass0Facts, policy: Policy, out: &mut Findings) -> Vec<Wants> {
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
        let mut table_moves = false;
        if st.inode_table_ok {
            let it = gd.inode_table();
            let end = it
                .saturating_add(u64::from(geo.inode_blocks_per_group))
                .min(geo.blocks_count);
            if let Some(b) = (it..end).find(|&b| held.get(b)) {
                table_moves = out.report(policy, P::P1_ITABLE_CONFLICT, ctx(b));
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
        want.push(Wants {
            bitmaps: [(moves[0], from[0]), (moves[1], from[1])],
            table: table_moves,
        });
    }
    want
}

/// What moves in one group: each bitmap (and from where), and the inode table for a clash.
struct Wants {
    bitmaps: [(bool, Option<u64>); 2],
    table: bool,
}

/// The blocks on the bad-blocks list (inode 1's block map), bounded by the file system size.
pub(crate) fn bad_blocks(fs: &crate::fs::Fs) -> std::collections::HashSet<u64> {
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
    // With flex_bg, a group's tables may live anywhere in its flex group.
    let flex = if geo.incompat.has(ffsck_format::features::Incompat::FLEX_BG) {
        1u32 << p0.fs.sb.s_log_groups_per_flex.min(31)
    } else {
        1
    };
    let ratio = u64::from(geo.cluster_ratio.max(1));
    // Smallest run already found not to fit anywhere: no second whole-disk search for it.
    let mut no_room: Option<u64> = None;
    for (g, wants) in clashes(p0, policy, out).into_iter().enumerate() {
        let g = g as u32;
        let itable = p0.groups[g as usize].relocate_inode_table || wants.table;
        let old_itable = Some(p0.fs.groups[g as usize].inode_table()).filter(|&b| b != 0);
        for (which, (wanted, from)) in [
            (Table::BlockBitmap, wants.bitmaps[0]),
            (Table::InodeBitmap, wants.bitmaps[1]),
            (Table::InodeTable, (itable, old_itable)),
        ] {
            if !wanted {
                continue;
            }
            let n = match which {
                Table::InodeTable => u64::from(geo.inode_blocks_per_group.max(1)),
                _ => 1,
            };
            let first_group = g - g % flex;
            let last_group = (first_group.saturating_add(flex - 1)).min(geo.group_count - 1);
            let (lo, hi) = (
                geo.group_first_block(first_group),
                geo.group_last_block(last_group),
            );
            let last = geo.blocks_count.saturating_sub(1);
            let anywhere = || {
                if no_room.is_some_and(|m| n >= m) {
                    return None;
                }
                first_free(used, geo.first_data_block, last, n, ratio)
            };
            let Some(blk) = first_free(used, lo, hi, n, ratio).or_else(anywhere) else {
                no_room = Some(no_room.map_or(n, |m| m.min(n)));
                continue;
            };
            // The whole clusters it starts are taken (bigalloc).
            (blk..blk + n.div_ceil(ratio) * ratio).for_each(|b| used.set(b));
            let what = match which {
                Table::BlockBitmap => "block bitmap",
                Table::InodeBitmap => "inode bitmap",
                Table::InodeTable => "inode table",
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
                from,
            });
        }
    }
    moves
}
