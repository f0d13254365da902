//! Pass 1's scheduling: how groups are batched for the pipelined check, how each group's
//! bits reach the shared bitmaps, and how group outputs are merged in group order.

use super::{GroupOut, Scan};
use crate::facts::{ClaimSummary, Counts, DirBlock};
use crate::problem::Problem as P;
use crate::report::{Findings, Policy, ProblemCtx};

/// One group's share of the scan's inode bitmaps (in use, plain directory, plain file, one
/// link, two links), set without atomic operations while the group is scanned and or-ed into
/// the shared bitmaps a word at a time when it ends: a group's inodes are one range, so
/// only the words at its two ends can be shared with a neighbour, and or-ing shares them
/// correctly. (Per inode, an atomic or was about a tenth of the scan.)
#[derive(Default)]
pub(super) struct GroupBits {
    /// Word (of the shared bitmaps) that `words[_][0]` stands for.
    pub(super) first_word: u64,
    pub(super) words: [Vec<u64>; 5],
}

impl GroupBits {
    pub(super) const USED: usize = 0;
    pub(super) const DIR: usize = 1;
    pub(super) const REG: usize = 2;
    pub(super) const ONE_LINK: usize = 3;
    pub(super) const TWO_LINKS: usize = 4;

    /// Room for inode indexes `first..first + count`.
    pub(super) fn new(first: u64, count: u64) -> Self {
        let first_word = first / 64;
        let n = ((first + count).div_ceil(64) - first_word) as usize;
        GroupBits {
            first_word,
            words: std::array::from_fn(|_| vec![0; n]),
        }
    }
    /// Set inode index `idx` in bitmap `which`; an index outside the group is ignored.
    pub(super) fn set(&mut self, which: usize, idx: u32) {
        let Some(w) = u64::from(idx).checked_sub(self.first_word * 64) else {
            return;
        };
        if let Some(word) = self.words[which].get_mut((w / 64) as usize) {
            *word |= 1 << (w % 64);
        }
    }
    /// Or the bits into the shared bitmaps (and free them).
    pub(super) fn flush(self, scan: &Scan) {
        let shared = [
            &scan.inode_used,
            &scan.kind_dir,
            &scan.kind_reg,
            &scan.links_one,
            &scan.links_two,
        ];
        for (words, shared) in self.words.into_iter().zip(shared) {
            for (i, bits) in words.into_iter().enumerate() {
                if bits != 0 {
                    shared.or_word(self.first_word + i as u64, bits);
                }
            }
        }
    }
}

/// Groups per pipelined batch: a few per worker, so a batch keeps every thread busy, and
/// enough batches that directory checking starts early.
pub(super) fn pipeline_batch(groups: usize, threads: usize) -> usize {
    (groups / 16).max(threads.max(1) * 2).max(1)
}

/// The group outputs merged so far, in group order.
#[derive(Default)]
pub(super) struct Acc {
    pub(super) dir_blocks: Vec<DirBlock>,
    pub(super) dir_inos: Vec<u32>,
    /// Empty on a file system without metadata checksums.
    pub(super) dir_generations: Vec<u32>,
    /// Whether to keep `dir_generations`.
    pub(super) keep_generations: bool,
    pub(super) dup_blocks: Vec<u64>,
    pub(super) summaries: Vec<ClaimSummary>,
    pub(super) counts: Counts,
    pub(super) links_many: Vec<(u32, u16)>,
    pub(super) kinds_other: Vec<(u32, u8)>,
    pub(super) quota: crate::quota::Usage,
    pub(super) policies: Vec<(u32, u32)>,
    /// The first orphan-list refugee raises the latch question once, ahead of it, as
    /// e2fsck's latch does; with the findings merged in inode order this is deterministic.
    pub(super) refugee_latched: bool,
}

impl Acc {
    /// Room for the lists of `outs` at once, so absorbing them never copies a list to grow it.
    pub(super) fn reserve(&mut self, outs: &[GroupOut]) {
        let total = |f: fn(&GroupOut) -> usize| outs.iter().map(f).sum::<usize>();
        self.dir_blocks.reserve(total(|o| o.dir_blocks.len()));
        self.dir_inos.reserve(total(|o| o.dirs.len()));
        if self.keep_generations {
            self.dir_generations.reserve(total(|o| o.dirs.len()));
        }
        self.links_many.reserve(total(|o| o.links_many.len()));
        self.kinds_other.reserve(total(|o| o.kinds_other.len()));
        self.summaries.reserve(outs.len());
    }

    pub(super) fn absorb(&mut self, o: GroupOut, policy: Policy, out: &mut Findings) {
        for f in o.findings.0 {
            if f.problem == P::P1_LOW_DTIME && !self.refugee_latched {
                self.refugee_latched = true;
                out.report(policy, P::P1_ORPHAN_LIST_REFUGEES, ProblemCtx::default());
            }
            out.0.push(f);
        }
        self.dir_blocks.extend(o.dir_blocks);
        self.dir_inos.extend(o.dirs.iter().map(|d| d.ino));
        if self.keep_generations {
            self.dir_generations
                .extend(o.dirs.iter().map(|d| d.generation));
        }
        self.dup_blocks.extend(o.dup_blocks);
        self.summaries.push(o.summary);
        self.counts.add(&o.counts);
        self.links_many.extend(o.links_many);
        self.kinds_other.extend(o.kinds_other);
        self.quota.merge(o.quota);
        self.policies.extend(o.policies);
    }
}
