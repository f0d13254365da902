//! Pass 1B-1D: find every owner of the multiply-claimed blocks pass 1 detected.
//!
//! Pass 1 only knows *that* a block was claimed twice. The per-group claim summaries (our
//! compact form of ffsck's cumulative bitmap snapshots) tell which inode groups can hold an
//! owner, so only those groups' inodes are read again.
//! Produces: `DupFacts` (owners per inode), and the 1B/1D findings.
//! Relies on: `Pass1Facts`. Frees: the rescanned inode tables.

use crate::ext4::blocks::{Damage, Index, Indirect, Mapping, NodeError, Span, Step, Visitor, Walk};
use crate::facts::Pass1Facts;
use crate::fs::Fs;
use crate::latch::Latches;
use crate::problem::{Latch, Problem as P};
use crate::report::{Findings, Policy, ProblemCtx};
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
    let acl = inode.file_acl();
    if acl != 0 && geo.is_valid_block(acl) {
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
    let mut v = Claimed {
        first: geo.first_data_block,
        end: geo.blocks_count,
        budget: geo.blocks_count,
        is_resize: ino == ffsck_format::ino::RESIZE && fl & iflags::EXTENTS == 0,
        f,
    };
    let mut w = Walk::over(fs);
    if fl & iflags::EXTENTS != 0 {
        w.extents(&inode.block_bytes(), &mut v);
    } else {
        w.block_map(&inode.block_bytes(), &mut v);
    }
}

/// The visitor of `for_each_claimed_block`: every block in range, mapping blocks included,
/// at most `budget` of them; damaged entries are passed over.
struct Claimed<'f> {
    first: u64,
    end: u64,
    budget: u64,
    /// The resize inode's block map: only its double-indirect block is its own (the rest are
    /// the reserved descriptor blocks and their backups, claimed as metadata).
    is_resize: bool,
    f: &'f mut dyn FnMut(u64),
}

impl Claimed<'_> {
    /// Claim one mapping block, if the budget allows.
    fn meta(&mut self, pblk: u64) -> Step {
        if self.budget == 0 {
            return Step::Stop;
        }
        self.budget -= 1;
        (self.f)(pblk);
        Step::Go
    }
    /// Claim the blocks of a run that lie in the file system.
    fn data(&mut self, m: Mapping) -> Step {
        if self.is_resize {
            return Step::Go;
        }
        if self.budget == 0 {
            return Step::Stop;
        }
        let n = m.len.min(self.end - m.pblk).min(self.budget);
        self.budget -= n;
        for b in m.pblk..m.pblk + n {
            (self.f)(b);
        }
        Step::Go
    }
}

impl Visitor for Claimed<'_> {
    fn mapping(&mut self, m: Mapping, _: &mut Span) -> Step {
        self.data(m)
    }
    fn indirect(&mut self, ind: Indirect) -> Step {
        if self.is_resize && ind.level != 2 {
            return Step::Skip;
        }
        match self.meta(ind.pblk) {
            Step::Go if self.is_resize => Step::Skip,
            s => s,
        }
    }
    fn index(&mut self, idx: Index, _: &mut Span) -> Step {
        // Nodes deeper than the format allows are not followed.
        if idx.level > u32::from(ffsck_format::extent::MAX_DEPTH) {
            return Step::Skip;
        }
        self.meta(idx.child)
    }
    fn damage(&mut self, d: Damage) -> Step {
        match d {
            // A child at an unexpected depth is still followed (the level cap bounds it).
            Damage::BadNode(_, NodeError::Depth { .. }) => Step::Go,
            Damage::BadNode(..) | Damage::TooDeep(_) | Damage::ReadCap => Step::Skip,
            // An extent starting at block 0 is in range when block 0 is a data block.
            Damage::DataOutOfRange(m) if m.pblk >= self.first && m.pblk < self.end => self.data(m),
            _ => Step::Go,
        }
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
    let mut latches = Latches::default();
    for (&ino, blocks) in facts.by_inode.iter().filter(|(&i, _)| i != BAD) {
        let mut i = 0;
        while i < blocks.len() {
            let mut j = i;
            while j + 1 < blocks.len() && blocks[j + 1] == blocks[j] + 1 {
                j += 1;
            }
            if j > i {
                latches.report(
                    out,
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
                latches.report(
                    out,
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
        latches.end(out, policy, Latch::DupBlocks, ProblemCtx::ino(ino));
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
