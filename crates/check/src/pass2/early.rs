//! Pass 2 run early, as a stage of a pipelined pass 1: blocks whose entries name only inodes
//! pass 1 has finished are checked while it scans on; their outputs wait for the merge.

use super::blocks::{check_block_into, Ctx};
use super::out::{BlockOut, Event};
use crate::ext4::dir::{self as edir, Step};
use crate::facts::DirBlock;
use crate::fs::Fs;
use crate::htree;
use crate::icount::SharedCounter;
use crate::report::Policy;
use rayon::prelude::*;
use std::collections::HashMap;

/// Pass 2 run as a stage of pass 1 (the pipelined check): the directory blocks of each batch
/// of groups pass 1 finishes are checked while it scans the next batch.
///
/// A block is checked early only when every inode its entries name lies in a group already
/// scanned, so every pass-1 fact it reads is final; any other block is deferred (left for
/// `run_with`, which checks it with the final facts). Only the per-block half of pass 2 runs
/// early: its outputs wait, and everything order-dependent (parents, `..`, first references
/// to flagged inodes, the findings' order) is still decided by the merge in block order.
pub struct Early<'a> {
    fs: &'a Fs,
    policy: Policy,
    refs: SharedCounter,
    dx_dirs: HashMap<u32, htree::DxDir>,
    outs: Vec<(DirBlock, BlockOut)>,
    /// Approximate heap bytes held by `outs`; past `budget` the rest is deferred.
    bytes: usize,
    budget: usize,
    /// Blocks checked early / deferred (for tests and tuning).
    pub checked: u64,
    pub deferred: u64,
}

impl<'a> Early<'a> {
    /// `budget`: bytes of early outputs to hold at most before deferring the rest.
    pub fn new(fs: &'a Fs, policy: Policy, budget: usize) -> Self {
        Early {
            fs,
            policy,
            refs: SharedCounter::new(u64::from(fs.geo.inodes_count)),
            dx_dirs: HashMap::new(),
            outs: Vec::new(),
            bytes: 0,
            budget,
            checked: 0,
            deferred: 0,
        }
    }

    /// The shared reference counts, the indexed directories' roots and the block outputs
    /// (in the order the merge takes blocks), for `run_with`.
    #[allow(clippy::type_complexity)]
    pub(super) fn into_parts(
        self,
        fs: &Fs,
    ) -> (
        SharedCounter,
        HashMap<u32, htree::DxDir>,
        Vec<(DirBlock, BlockOut)>,
    ) {
        let mut outs = self.outs;
        let first = fs.geo.compat.has(ffsck_format::Compat::DIR_INDEX);
        outs.sort_unstable_by_key(|(d, _)| crate::facts::dir_block_order(first, d));
        (self.refs, self.dx_dirs, outs)
    }
}

/// Approximate bytes one kept block output costs.
pub(super) fn out_bytes(bo: &BlockOut) -> usize {
    std::mem::size_of::<(DirBlock, BlockOut)>()
        + bo.events.capacity() * std::mem::size_of::<Event>()
        + bo.names.capacity()
        + bo.findings.0.capacity() * std::mem::size_of::<crate::report::Finding>()
        + bo.dx
            .as_ref()
            .map_or(0, |_| std::mem::size_of::<htree::DxBlock>())
}

impl crate::facts::Stage for Early<'_> {
    fn batch(&mut self, facts: &crate::facts::Partial<'_>, mut blocks: Vec<DirBlock>) {
        if self.bytes >= self.budget {
            self.deferred += blocks.len() as u64;
            return;
        }
        let fs = self.fs;
        // The roots count every listed block, holes too (an htree's size is its listed blocks).
        let new_roots = htree::read_roots_of(fs, blocks.iter().copied(), facts);
        self.dx_dirs.extend(new_roots);
        // Holes are then left for pass 2 proper, which keeps a row of them as one finding: a
        // garbage map can list millions, each a sort entry and an output here.
        let listed = blocks.len();
        blocks.retain(|db| db.pblk != 0);
        self.deferred += (listed - blocks.len()) as u64;
        // Ascending disk order within the batch.
        blocks.sort_unstable();
        let ctx = Ctx::new(&self.refs, &self.dx_dirs, fs, facts, self.policy);
        let frontier = facts.frontier;
        let threads = rayon::current_num_threads().max(1);
        let chunk = (blocks.len() / (threads * 4)).max(16);
        let outs: Vec<(DirBlock, BlockOut)> = blocks
            .par_chunks(chunk)
            .flat_map_iter(|c| {
                let mut buf = Vec::new();
                let mut r = Vec::with_capacity(c.len());
                for db in c {
                    buf.resize(fs.block_size(), 0);
                    if fs.read_blocks_into(db.pblk, &mut buf).is_err()
                        || names_beyond(&buf, fs.geo.block_size, frontier)
                    {
                        continue;
                    }
                    let mut bo = BlockOut::default();
                    check_block_into(&ctx, db, &buf, &mut bo);
                    ctx.add_refs(&mut bo);
                    bo.refs = Vec::new();
                    bo.events.shrink_to_fit();
                    bo.names.shrink_to_fit();
                    bo.findings.0.shrink_to_fit();
                    r.push((*db, bo));
                }
                r
            })
            .collect();
        self.checked += outs.len() as u64;
        self.deferred += (blocks.len() - outs.len()) as u64;
        self.bytes += outs.iter().map(|(_, bo)| out_bytes(bo)).sum::<usize>();
        self.outs.extend(outs);
    }
}

/// Whether an entry of directory block `buf` may name an inode beyond `frontier` (not yet
/// scanned). Walks the entries as `check_entries` does, never stopping earlier than it, so
/// every inode it would look up is seen (a damaged entry's header included).
pub(super) fn names_beyond(buf: &[u8], bs: u32, frontier: u32) -> bool {
    edir::entries(buf, bs).any(|s| match s {
        Step::Entry(e) => e.inode > frontier,
        Step::Damaged { header, .. } => header.is_some_and(|h| h.inode > frontier),
    })
}
