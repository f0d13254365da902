//! Pass 1B-1D: find every owner of the multiply-claimed blocks pass 1 detected.
//!
//! Pass 1 only knows *that* a block was claimed twice. The per-group claim summaries (our
//! compact form of ffsck's cumulative bitmap snapshots) tell which inode groups can hold an
//! owner, so only those groups' inodes are read again.
//! Produces: `DupFacts` (owners per inode), and the 1B/1D findings.
//! Relies on: `Pass1Facts`. Frees: the rescanned inode tables.

use crate::fs::Fs;
use crate::pass1::Pass1Facts;
use crate::problem::Problem as P;
use crate::report::{Findings, Policy, ProblemCtx};
use ffsck_format::extent::Node;
use ffsck_format::inode::{flags as iflags, FileType, RawInode};
use std::collections::{BTreeMap, BTreeSet};

/// Owners of multiply-claimed blocks.
#[derive(Default, Debug)]
pub struct DupFacts {
    /// inode → its multiply-claimed blocks, ascending.
    pub by_inode: BTreeMap<u32, Vec<u64>>,
}

/// Visit every block an inode's mapping claims (data and mapping metadata), bounded by the
/// file-system size so cyclic maps terminate.
pub fn for_each_claimed_block(fs: &Fs, ino: u32, inode: &RawInode, f: &mut dyn FnMut(u64)) {
    let geo = &fs.geo;
    let mut budget = geo.blocks_count;
    let valid = |b: u64| b >= geo.first_data_block && b < geo.blocks_count;
    let acl = inode.file_acl();
    if acl != 0 && valid(acl) {
        f(acl);
    }
    let fl = inode.flags();
    if fl & iflags::INLINE_DATA != 0 {
        return;
    }
    if inode.file_type() == FileType::Symlink && inode.blocks_raw(false) == 0 {
        return;
    }
    if matches!(
        inode.file_type(),
        FileType::CharDev | FileType::BlockDev | FileType::Fifo | FileType::Socket
    ) {
        return;
    }
    if fl & iflags::EXTENTS != 0 {
        fn walk(fs: &Fs, buf: &[u8], depth_left: u16, budget: &mut u64, f: &mut dyn FnMut(u64)) {
            let Ok(node) = Node::parse(buf) else { return };
            let geo = &fs.geo;
            for i in 0..node.len() {
                if *budget == 0 {
                    return;
                }
                if node.is_leaf() {
                    let e = node.extent(i);
                    let (len, _) = e.len();
                    let start = e.start();
                    if start < geo.first_data_block || start >= geo.blocks_count {
                        continue;
                    }
                    let n = u64::from(len).min(geo.blocks_count - start).min(*budget);
                    *budget -= n;
                    for b in start..start + n {
                        f(b);
                    }
                } else if depth_left > 0 {
                    let c = node.index(i).leaf();
                    if c < geo.first_data_block || c >= geo.blocks_count {
                        continue;
                    }
                    *budget = budget.saturating_sub(1);
                    f(c);
                    if let Some(b) = fs.read_block(c) {
                        walk(fs, &b, depth_left - 1, budget, f);
                    }
                }
            }
        }
        walk(
            fs,
            &inode.block_bytes(),
            ffsck_format::extent::MAX_DEPTH,
            &mut budget,
            f,
        );
        return;
    }
    fn ind(
        fs: &Fs,
        blk: u64,
        level: u32,
        budget: &mut u64,
        is_resize: bool,
        f: &mut dyn FnMut(u64),
    ) {
        let geo = &fs.geo;
        if blk < geo.first_data_block || blk >= geo.blocks_count || *budget == 0 {
            return;
        }
        *budget -= 1;
        f(blk);
        if level == 0 || is_resize {
            return;
        }
        let Some(buf) = fs.read_block(blk) else {
            return;
        };
        for w in buf.chunks_exact(4) {
            let p = u64::from(u32::from_le_bytes([w[0], w[1], w[2], w[3]]));
            if p != 0 {
                ind(fs, p, level - 1, budget, false, f);
            }
        }
    }
    let is_resize = ino == ffsck_format::ino::RESIZE;
    for (i, b) in inode.i_block.iter().enumerate() {
        let b = u64::from(b.get());
        if b == 0 {
            continue;
        }
        let level = if i < 12 { 0 } else { (i - 11) as u32 };
        if is_resize && level != 2 {
            continue;
        }
        ind(fs, b, level, &mut budget, is_resize, f);
    }
}

pub fn run(fs: &Fs, p1: &Pass1Facts, policy: Policy, out: &mut Findings) -> DupFacts {
    let mut facts = DupFacts::default();
    if p1.dup_blocks.is_empty() {
        return facts;
    }
    let dups: BTreeSet<u64> = p1.dup_blocks.iter().copied().collect();
    let geo = &fs.geo;
    let isz = geo.inode_size as usize;
    for (g, summary) in p1.summaries.iter().enumerate() {
        if !dups
            .iter()
            .any(|&b| summary.may_contain(b, p1.bucket_shift))
        {
            continue;
        }
        let first = g as u32 * geo.inodes_per_group + 1;
        let n = geo.inodes_per_group as usize;
        let nblocks = (n * isz).div_ceil(geo.block_size as usize);
        let mut table = vec![0u8; nblocks * geo.block_size as usize];
        if fs
            .read_blocks_into(fs.groups[g].inode_table(), &mut table)
            .is_err()
        {
            continue;
        }
        for i in 0..n {
            let ino = first + i as u32;
            if !p1.inode_used.get(u64::from(ino - 1)) {
                continue;
            }
            let inode = RawInode::parse(&table[i * isz..(i + 1) * isz]);
            let mut mine = Vec::new();
            for_each_claimed_block(fs, ino, &inode, &mut |b| {
                if dups.contains(&b) {
                    mine.push(b);
                }
            });
            if !mine.is_empty() {
                mine.sort_unstable();
                facts.by_inode.insert(ino, mine);
            }
        }
    }
    report(fs, p1, &facts, policy, out);
    facts
}

fn report(fs: &Fs, p1: &Pass1Facts, facts: &DupFacts, policy: Policy, out: &mut Findings) {
    use ffsck_format::ino::{BAD, RESIZE, ROOT};
    // Only the bad-blocks inode overlaps something (its own list of bad metadata blocks):
    // nothing to reconcile.
    if facts.by_inode.keys().all(|&i| i == BAD) {
        return;
    }
    // Pass 1B: the blocks of each inode, as single blocks and ranges. The bad-blocks inode is
    // an owner but not listed (as e2fsck).
    for (&ino, blocks) in facts.by_inode.iter().filter(|(&i, _)| i != BAD) {
        out.report(policy, P::P1B_DUP_BLOCK_HEADER, ProblemCtx::ino(ino));
        let mut i = 0;
        while i < blocks.len() {
            let mut j = i;
            while j + 1 < blocks.len() && blocks[j + 1] == blocks[j] + 1 {
                j += 1;
            }
            if j > i {
                out.report(
                    policy,
                    P::P1B_DUP_RANGE,
                    ProblemCtx {
                        ino,
                        blk: blocks[i],
                        blk2: blocks[j],
                        ..Default::default()
                    },
                );
            } else {
                out.report(
                    policy,
                    P::P1B_DUP_BLOCK,
                    ProblemCtx {
                        ino,
                        blk: blocks[i],
                        ..Default::default()
                    },
                );
            }
            i = j + 1;
        }
        out.report(policy, P::P1B_DUP_BLOCK_END, ProblemCtx::ino(ino));
    }
    // Pass 1D: who shares with whom, and the clone/delete question per inode.
    out.report(
        policy,
        P::P1D_NUM_DUP_INODES,
        ProblemCtx {
            num: facts
                .by_inode
                .keys()
                .filter(|&&i| i >= fs.geo.first_ino || i == ROOT)
                .count() as u64,
            ..Default::default()
        },
    );
    // Claims left on each shared block as the questions are answered: once an inode is
    // cloned or deleted, the others may be left sole owners (as e2fsck tracks it).
    let mut claims: BTreeMap<u64, u32> = BTreeMap::new();
    for blocks in facts.by_inode.values() {
        for &b in blocks {
            *claims.entry(b).or_insert(0) += 1;
        }
    }
    let release = |claims: &mut BTreeMap<u64, u32>, blocks: &[u64]| {
        for b in blocks {
            if let Some(c) = claims.get_mut(b) {
                *c = c.saturating_sub(1);
            }
        }
    };
    // Blocks free for the copies.
    let mut free = (fs.geo.first_data_block..fs.geo.blocks_count.min(p1.block_used.len()))
        .filter(|&b| !p1.block_used.get(b))
        .count() as u64;
    // The bad-blocks and resize inodes keep their blocks: no question about them.
    for (&ino, blocks) in facts
        .by_inode
        .iter()
        .filter(|(&i, _)| i != BAD && i != RESIZE)
    {
        let set: BTreeSet<u64> = blocks.iter().copied().collect();
        let sharers: Vec<u32> = facts
            .by_inode
            .iter()
            .filter(|(&o, b)| o != ino && b.iter().any(|x| set.contains(x)))
            .map(|(&o, _)| o)
            .collect();
        let shares_metadata = blocks.iter().any(|&b| p1.metadata.get(b));
        out.report(
            policy,
            P::P1D_DUP_FILE,
            ProblemCtx {
                ino,
                num: blocks.len() as u64,
                num2: sharers.len() as u64 + u64::from(shares_metadata),
                ..Default::default()
            },
        );
        if shares_metadata {
            out.report(policy, P::P1D_SHARE_METADATA, ProblemCtx::ino(ino));
        }
        for o in sharers {
            out.report(
                policy,
                P::P1D_DUP_FILE_LIST,
                ProblemCtx {
                    ino: o,
                    ..Default::default()
                },
            );
        }
        let still_shared = blocks
            .iter()
            .filter(|&&b| p1.metadata.get(b) || claims.get(&b).is_some_and(|&c| c > 1))
            .count() as u64;
        if still_shared == 0 {
            out.report(policy, P::P1D_DUP_BLOCKS_DEALT, ProblemCtx::ino(ino));
            continue;
        }
        if out.report(policy, P::P1D_CLONE_QUESTION, ProblemCtx::ino(ino)) {
            if still_shared <= free {
                free -= still_shared;
                release(&mut claims, blocks);
                continue;
            }
            // No room for the copies: deleting the file is what is left, as e2fsck offers.
            out.report(policy, P::P1D_CLONE_ERROR, ProblemCtx::ino(ino));
        }
        if out.report(policy, P::P1D_DELETE_QUESTION, ProblemCtx::ino(ino)) {
            release(&mut claims, blocks);
        }
    }
}
