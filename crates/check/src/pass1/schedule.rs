//! Pass 1's scheduling: how groups are batched for the pipelined check, how each group's
//! bits reach the shared bitmaps, and how group outputs are merged in group order.

use super::itable::{scan_group_from, table_range};
use super::{GroupOut, Scan};
use crate::facts::{ClaimSummary, Counts, DirBlock};
use crate::facts::{DirBlockSpill, Partial, Stage};
use crate::latch::Latches;
use crate::pass0::Pass0Facts;
use crate::problem::Latch;
use crate::progress::SWEEP_UNITS;
use crate::report::{Findings, Policy};
use ffsck_format::Compat;
use ffsck_io::device_kind::IoMode;
use ffsck_io::stream::{self, ReadPlan, StreamConfig};
use rayon::prelude::*;
use std::sync::Mutex;

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
    /// The latch of the whole pass: the orphan-list refugees' question comes once, ahead of
    /// the first; with the findings merged in inode order this is deterministic.
    pub(super) latches: Latches,
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
            // The refugees' latch spans the pass; an inode's latches are its worker's.
            if f.problem.latch() == Some(Latch::LowDtime) {
                self.latches.raise(out, policy, f.problem, &f.ctx);
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

/// Scan groups `r` with their inode tables read by ONE ordered stream (`--io sequential`):
/// one reader sweeps the tables in ascending disk order and the workers take them in that
/// order, so the disk never seeks between the workers' groups. A table the stream could not
/// read in full is read again by its worker, as without the stream (so a bad block costs
/// the same findings). Outputs come back in group order.
fn scan_streamed(
    scan: &Scan,
    p0: &Pass0Facts,
    r: std::ops::Range<usize>,
    scan_one: &(dyn Fn(usize, Option<&[u8]>) -> GroupOut + Sync),
) -> Vec<GroupOut> {
    let fs = scan.fs;
    let mut plan = ReadPlan::new();
    let mut group_of: Vec<usize> = Vec::new();
    for g in r.clone() {
        if let Some((off, len)) = table_range(fs, g as u32, p0.groups[g]) {
            plan.add(off, len);
            group_of.push(g);
        }
    }
    let slots: Vec<Mutex<Option<GroupOut>>> = r.clone().map(|_| Mutex::default()).collect();
    let put = |g: usize, o: GroupOut| {
        if let Some(slot) = slots.get(g - r.start) {
            *slot.lock().unwrap_or_else(|e| e.into_inner()) = Some(o);
        }
    };
    let workers = rayon::current_num_threads().max(1);
    stream::run(&*fs.dev, &plan, &StreamConfig::default(), |s| {
        (0..workers).into_par_iter().for_each(|_| {
            while let Some(piece) = s.recv() {
                let Some(&g) = group_of.get(piece.id) else {
                    continue;
                };
                let o = if piece.is_full() {
                    scan_one(g, Some(&piece))
                } else {
                    drop(piece);
                    scan_one(g, None)
                };
                put(g, o);
            }
        });
    });
    // Groups with nothing to read (and, should the stream stop early, any it left) are
    // scanned here.
    r.zip(slots)
        .map(|(g, slot)| {
            let o = slot.into_inner().unwrap_or_else(|e| e.into_inner());
            o.unwrap_or_else(|| scan_one(g, None))
        })
        .collect()
}

/// Scan every group, in parallel, merging the outputs in group order: all at once, in
/// batches under a memory limit (spilling the directory-block list when it outgrows its
/// share), or pipelined, handing each batch's directory blocks to `stage` while the next
/// batch is scanned. With `io` sequential the inode tables are read by one ordered stream.
pub(super) fn scan_groups(
    scan: &Scan,
    p0: &Pass0Facts,
    out: &mut Findings,
    progress: &std::sync::Arc<crate::progress::Progress>,
    stage: Option<&mut dyn Stage>,
    limits: &crate::spill::Limits,
    io: IoMode,
) -> (Acc, Option<DirBlockSpill>) {
    let (fs, policy) = (scan.fs, scan.policy);
    let geo = &fs.geo;
    let group_count = geo.group_count as usize;
    // The used part of a group's inode table is hinted a few groups ahead of its scan, so
    // the device works on the next tables while the workers check this one.
    let ahead = 2 * rayon::current_num_threads().max(1);
    let hint_table = |g: usize| {
        if let (Some(st), Some(gd)) = (p0.groups.get(g), fs.groups.get(g)) {
            if st.inode_table_ok {
                let n = u64::from(fs.scannable_inodes(g as u32, st.scan_by_desc));
                let bytes = n * u64::from(geo.inode_size);
                fs.will_need_blocks(&[(
                    gd.inode_table(),
                    bytes.div_ceil(u64::from(geo.block_size)),
                )]);
            }
        }
    };
    let streamed = match io {
        IoMode::Sequential => true,
        IoMode::Parallel => false,
        IoMode::SequentialWhenCold => !tables_cached(fs, p0) && seeks_slowly(fs, p0),
    };
    // The tables, bitmaps, tree blocks and directory blocks, in ascending sweeps before
    // the checks read them (see `prefetch`); the directory blocks' sweep runs until this
    // function returns.
    // Streamed, pass 1's progress counts the sweeps as well as the scan (a stage of
    // `SWEEP_UNITS` per group each): on a hard disk the sweeps are most of its time.
    // Otherwise it counts groups, as e2fsck's does.
    let per_group = if streamed { SWEEP_UNITS } else { 1 };
    let stages = if streamed { 4 } else { 1 };
    progress.start(1, stages * per_group * group_count as u64);
    let _dir_sweep = streamed.then(|| super::prefetch::prefetch(fs, p0, progress));
    // The sweep leaves the tables in the page cache: the workers then copy their own groups'
    // tables out of it, in parallel, as without the sweep (one stream's reader copying every
    // table for them was a serial quarter of a cold pass 1 on block-mapped files). Only
    // tables the cache did not keep are read again through one ordered stream.
    let stream_tables = streamed && !tables_cached(fs, p0);
    if !streamed {
        (0..ahead.min(group_count)).for_each(hint_table);
    }
    // Without a stage or a limit, each group's directory blocks go straight into one list as
    // the group ends (pass 2 sorts it anyway): the groups' lists are never all alive beside
    // a joined copy of them, which on a file system of small directories was a third of
    // the peak memory.
    let sink: Option<Mutex<Vec<DirBlock>>> =
        (stage.is_none() && limits.dir_blocks_bytes.is_none()).then(Mutex::default);
    let scan_one = |g: usize, table: Option<&[u8]>| -> GroupOut {
        let mut o = scan_group_from(scan, g as u32, p0.groups[g], table);
        if let Some(sink) = &sink {
            let mut all = sink.lock().unwrap_or_else(|e| e.into_inner());
            all.append(&mut o.dir_blocks);
            o.dir_blocks = Vec::new();
        }
        progress.advance(per_group);
        o
    };
    let scan_groups = |r: std::ops::Range<usize>| -> Vec<GroupOut> {
        if stream_tables {
            return scan_streamed(scan, p0, r, &scan_one);
        }
        r.into_par_iter()
            .map(|g| {
                hint_table(g + ahead);
                scan_one(g, None)
            })
            .collect()
    };
    let mut acc = Acc {
        keep_generations: fs.has_metadata_csum(),
        ..Acc::default()
    };
    let first_blocks_first = geo.compat.has(Compat::DIR_INDEX);
    // Under a memory limit the directory-block list goes to a scratch file in sorted runs
    // whenever it outgrows its share (and groups are scanned in batches, so the group
    // outputs waiting to be merged stay small too).
    let mut spill: Option<DirBlockSpill> = None;
    let mut maybe_spill = |acc: &mut Acc| {
        let Some(limit) = limits.dir_blocks_bytes else {
            return;
        };
        if acc.dir_blocks.len() * std::mem::size_of::<DirBlock>() < limit {
            return;
        }
        if spill.is_none() {
            spill = DirBlockSpill::create(limits.scratch_dir.as_deref(), first_blocks_first).ok();
        }
        if let Some(s) = spill.as_mut() {
            // On a write error the blocks simply stay in memory.
            let _ = s.push_run(&mut acc.dir_blocks);
        }
    };
    match stage {
        None if limits.dir_blocks_bytes.is_none() => {
            let outs = scan_groups(0..group_count);
            acc.reserve(&outs);
            for o in outs {
                acc.absorb(o, policy, out);
            }
            if let Some(sink) = sink {
                acc.dir_blocks = sink.into_inner().unwrap_or_else(|e| e.into_inner());
            }
        }
        None => {
            let batch = pipeline_batch(group_count, rayon::current_num_threads());
            for start in (0..group_count).step_by(batch) {
                for o in scan_groups(start..(start + batch).min(group_count)) {
                    acc.absorb(o, policy, out);
                    maybe_spill(&mut acc);
                }
            }
        }
        Some(stage) => {
            // Pipelined: while the workers scan batch k+1, others check the directory blocks
            // batch k found (rayon's join lets idle threads take whichever side has work).
            let batch = pipeline_batch(group_count, rayon::current_num_threads());
            let mut start = 0usize;
            let mut pending = Some(scan_groups(0..batch.min(group_count)));
            while let Some(outs) = pending.take() {
                let end = (start + batch).min(group_count);
                let first_new = acc.dir_blocks.len();
                for o in outs {
                    acc.absorb(o, policy, out);
                }
                let blocks = acc.dir_blocks[first_new..].to_vec();
                let partial = Partial {
                    kind_dir: &scan.kind_dir,
                    kind_reg: &scan.kind_reg,
                    inode_used: &scan.inode_used,
                    other: &acc.kinds_other,
                    dir_inos: &acc.dir_inos,
                    dir_generations: &acc.dir_generations,
                    bb_inodes: &scan.bb_inodes,
                    policies: &acc.policies,
                    frontier: (end as u64 * u64::from(geo.inodes_per_group))
                        .min(u64::from(geo.inodes_count)) as u32,
                };
                let next = (end < group_count).then(|| end..(end + batch).min(group_count));
                let (scanned, ()) =
                    rayon::join(|| next.map(&scan_groups), || stage.batch(&partial, blocks));
                pending = scanned;
                start = end;
            }
        }
    }
    (acc, spill)
}

/// Groups whose inode tables' first blocks are timed by [`seeks_slowly`].
const SEEK_PROBES: usize = 4;

/// Whether the device holding the file system seeks as a spinning disk does (see
/// `device_kind::seeks_slowly`), timed on the first block of up to [`SEEK_PROBES`] groups'
/// inode tables that are not in the page cache, spread over the file system, in descending
/// order (so no read continues the one before it). When it cannot tell, it answers yes, as
/// the device said it was rotational.
fn seeks_slowly(fs: &crate::fs::Fs, p0: &Pass0Facts) -> bool {
    let groups = p0.groups.len();
    let step = groups.div_ceil(SEEK_PROBES).max(1);
    let offsets: Vec<u64> = (0..groups)
        .step_by(step)
        .rev()
        .filter_map(|g| table_range(fs, g as u32, p0.groups[g]))
        .map(|(off, _)| off)
        .filter(|&off| fs.dev.is_cached(off) != Some(true))
        .collect();
    ffsck_io::device_kind::seeks_slowly(&*fs.dev, &offsets).unwrap_or(true)
}

/// Groups whose inode tables are probed for being in the page cache, spread over the file
/// system.
const CACHE_PROBES: usize = 8;

/// Whether the inode tables pass 1 is about to read are in the page cache already: the first,
/// middle and last byte of up to [`CACHE_PROBES`] groups' used tables, spread over the file
/// system, all are. A backend that cannot tell counts as not cached.
fn tables_cached(fs: &crate::fs::Fs, p0: &Pass0Facts) -> bool {
    let groups = p0.groups.len();
    let step = groups.div_ceil(CACHE_PROBES).max(1);
    let mut probed = (0..groups)
        .step_by(step)
        .filter_map(|g| table_range(fs, g as u32, p0.groups[g]))
        .peekable();
    probed.peek().is_some()
        && probed.all(|(off, len)| {
            [off, off + len / 2, off + len - 1]
                .iter()
                .all(|&o| fs.dev.is_cached(o) == Some(true))
        })
}
