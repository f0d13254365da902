//! The per-block schedule: windows of the directory-block list, hinted to the device, cut
//! into chunks the workers check, each block read (runs of adjacent blocks in one read) and
//! checked by its kind (hole, htree interior, leaf with its checksum).

use super::entries::check_entries;
use super::merge::Merge;
use super::out::{BlockOut, Outs};
use crate::facts::{kind, DirBlock, Facts, Pass1Facts};
use crate::fs::Fs;
use crate::htree;
use crate::icount::SharedCounter;
use crate::problem::Problem as P;
use crate::report::{Findings, Policy, ProblemCtx};
use ffsck_format::dir::{self as fdir, DxRootInfo, DX_ROOT_INFO_OFFSET};
use ffsck_format::Incompat;
use rayon::prelude::*;
use std::borrow::Cow;
use std::collections::{HashMap, VecDeque};
use zerocopy::FromBytes;

/// What checking a block needs besides its bytes.
pub(super) struct Ctx<'a, F: Facts + ?Sized> {
    /// References per inode (index `ino - 1`), counted by all workers at once.
    pub(super) refs: &'a SharedCounter,
    /// Indexed directories: what their root says, read before the block phase.
    pub(super) dx_dirs: &'a HashMap<u32, htree::DxDir>,
    pub(super) fs: &'a Fs,
    pub(super) p1: &'a F,
    pub(super) policy: Policy,
    pub(super) filetype: bool,
}

/// A run of directory blocks for one worker to check (`ordered::run`).
pub(super) struct Chunk<'a> {
    pub(super) blocks: Cow<'a, [DirBlock]>,
    /// Outputs of these blocks checked early, by position (empty when there are none).
    pub(super) pre: Vec<Option<BlockOut>>,
    /// A later window to hint to the device first.
    pub(super) hint: Option<Cow<'a, [DirBlock]>>,
}

/// Directory blocks taken from the block list (and hinted to the device) at a time. At most
/// two windows of outputs wait for the merge, about 100 bytes per block; each window is cut
/// into 16 chunks per worker.
pub(super) const WINDOW_BLOCKS: usize = 16384;
/// The same when the directory-block list was spilled (`--max-memory`).
pub(super) const SPILLED_WINDOW_BLOCKS: usize = 1024;

/// Windows whose blocks are hinted to the device ahead of the one being checked (measured on
/// a cold cache with 4096-block windows: 16384 blocks ahead saved about a sixth of pass 2's
/// time against no hint; more saved nothing).
pub(super) const HINT_WINDOWS: usize = 1;

/// Check every directory block of `p1`'s list into the merge `m`: chunks are checked by all
/// the workers at once, in any order, while one at a time merges the checked chunks in block
/// order (`ordered::run`). The block list is taken window by window (from memory, or from the
/// scratch file it spilled to), and at most two windows of outputs wait for the merge, however
/// many blocks there are. `early_outs` are the outputs of blocks checked during pass 1, in
/// block order.
pub(super) fn check_windows(
    ctx: &Ctx<Pass1Facts>,
    p1: &Pass1Facts,
    m: &mut Merge,
    early_outs: Vec<(DirBlock, BlockOut)>,
    progress: &(dyn Fn(u64) + Sync),
    out: &mut Findings,
) {
    let fs = ctx.fs;
    let mut early_outs = early_outs.into_iter().peekable();
    let threads = rayon::current_num_threads().max(1);
    // Under a memory limit that made pass 1 spill, windows stay small: their outputs are
    // held in memory.
    let window = if p1.dir_spill.is_some() {
        SPILLED_WINDOW_BLOCKS
    } else {
        WINDOW_BLOCKS
    };
    let chunk = (window / (threads * 16)).max(RUN_BLOCKS);
    // Each window comes with the outputs of its blocks checked early (in block order, so a
    // cursor over the early outputs pairs them with their blocks); without a pipelined pass
    // 1 there are none, and nothing is allocated for them.
    let mut with_early = |w: &[DirBlock]| -> Vec<Option<BlockOut>> {
        if early_outs.peek().is_none() {
            return Vec::new();
        }
        w.iter()
            .map(|db| early_outs.next_if(|(e, _)| e == db).map(|(_, bo)| bo))
            .collect()
    };
    // The windows after the one being checked are hinted to the device, so their reads are
    // under way while the workers check the windows before them. Hinting costs a page-cache
    // lookup per block, so it is a worker's job too: the first chunk of each window carries
    // the window after it.
    let mut windows = p1.dir_block_windows(window);
    let first = windows.next();
    let mut ahead: VecDeque<_> = windows.by_ref().take(HINT_WINDOWS).collect();
    // Nothing else runs yet: the first windows are hinted by all the workers, in slices (a
    // file system whose directories have one block each needs a hint per block).
    first.iter().chain(&ahead).for_each(|w| {
        w.par_chunks(HINT_SLICE_BLOCKS)
            .for_each(|c| will_need(fs, c))
    });
    let mut cur = first.map(|w| {
        let pre = with_early(&w);
        (w, pre, 0usize)
    });
    let mut hint = None;
    let feed = || loop {
        let (w, pre, pos) = cur.as_mut()?;
        if *pos < w.len() {
            let span = *pos..(*pos + chunk).min(w.len());
            *pos = span.end;
            let blocks = match w {
                Cow::Borrowed(all) => Cow::Borrowed(&all[span.clone()]),
                Cow::Owned(all) => Cow::Owned(all[span.clone()].to_vec()),
            };
            let pre = match pre.get_mut(span) {
                Some(p) => p.iter_mut().map(Option::take).collect(),
                None => Vec::new(),
            };
            return Some(Chunk {
                blocks,
                pre,
                hint: hint.take(),
            });
        }
        let next = windows.next();
        hint.clone_from(&next);
        ahead.extend(next);
        cur = ahead.pop_front().map(|w| {
            let pre = with_early(&w);
            (w, pre, 0)
        });
    };
    let check = |c: Chunk| {
        if let Some(h) = &c.hint {
            will_need(fs, h);
        }
        let mut pre = c.pre;
        let outs = check_chunk(ctx, &c.blocks, &mut pre);
        progress(c.blocks.len() as u64);
        outs
    };
    let policy = ctx.policy;
    let merge = |outs: Outs| {
        m.merge_outs(fs, policy, outs, out);
        !m.aborted
    };
    crate::ordered::run(feed, check, merge, 2 * window / chunk);
}

/// Hint the device that the blocks of window `w` will be read, in one batch of runs of nearby
/// blocks. Runs are joined across gaps of up to `HINT_GAP_BYTES`, so a cold device gets a few
/// large reads rather than many small ones (the gaps, mostly file data, are read too).
pub(super) fn will_need(fs: &Fs, w: &[DirBlock]) {
    let bs = u64::from(fs.geo.block_size);
    let (gap, most) = ((HINT_GAP_BYTES / bs).max(1), (HINT_MAX_BYTES / bs).max(1));
    let mut runs = Vec::new();
    let mut run: Option<(u64, u64)> = None;
    for db in w.iter().filter(|db| db.pblk != 0) {
        run = match run {
            // Ascending within a window (except at the first-blocks boundary with dir_index).
            Some((start, end))
                if db.pblk >= start
                    && db.pblk <= end.saturating_add(gap)
                    && db.pblk - start < most =>
            {
                Some((start, end.max(db.pblk + 1)))
            }
            other => {
                runs.extend(other.map(|(start, end)| (start, end - start)));
                Some((db.pblk, db.pblk.saturating_add(1)))
            }
        };
    }
    runs.extend(run.map(|(start, end)| (start, end - start)));
    fs.will_need_blocks(&runs);
}

/// Largest gap between directory blocks that one read-ahead hint spans, and the most one
/// hint covers.
pub(super) const HINT_GAP_BYTES: u64 = 64 * 1024;
pub(super) const HINT_MAX_BYTES: u64 = 8 << 20;
/// Blocks per slice when the first windows are hinted in parallel.
pub(super) const HINT_SLICE_BLOCKS: usize = 1024;

/// Blocks read with one system call when a window's blocks lie next to each other on disk.
pub(super) const RUN_BLOCKS: usize = 32;

/// Check a chunk of a window's blocks in order, taking the outputs checked early from `pre`
/// (empty when there are none) and reading each run of physically adjacent blocks with one
/// read.
pub(super) fn check_chunk<F: Facts + ?Sized>(
    ctx: &Ctx<F>,
    blocks: &[DirBlock],
    pre: &mut [Option<BlockOut>],
) -> Outs {
    thread_local! {
        // Kept across chunks: a fresh run buffer per chunk would be mapped, faulted in and
        // unmapped every time (it is above malloc's mmap threshold).
        static BUF: std::cell::RefCell<Vec<u8>> = const { std::cell::RefCell::new(Vec::new()) };
    }
    BUF.with_borrow_mut(|buf| check_chunk_with(ctx, blocks, pre, buf))
}

pub(super) fn check_chunk_with<F: Facts + ?Sized>(
    ctx: &Ctx<F>,
    blocks: &[DirBlock],
    pre: &mut [Option<BlockOut>],
    buf: &mut Vec<u8>,
) -> Outs {
    let bs = ctx.fs.block_size();
    let mut out = Outs {
        heads: Vec::with_capacity(blocks.len()),
        ..Default::default()
    };
    let mut bo = BlockOut::default();
    let mut i = 0;
    while i < blocks.len() {
        if let Some(mut early) = pre.get_mut(i).and_then(Option::take) {
            out.push(&mut early);
            i += 1;
            continue;
        }
        let start = blocks[i].pblk;
        if start == 0 {
            // A row of holes in one directory is one finding (a run), not one per hole.
            let holes = hole_row(&blocks[i..], pre.get(i..).unwrap_or_default());
            check_block_into(ctx, &blocks[i], &[], &mut bo);
            if let Some(f) = bo
                .findings
                .0
                .last_mut()
                .filter(|f| holes > 1 && f.problem == P::P2_DIRECTORY_HOLE)
            {
                f.ctx.run = holes as u64;
            }
            out.push(&mut bo);
            i += holes;
            continue;
        }
        let mut n = 1;
        while start != 0
            && n < RUN_BLOCKS
            && i + n < blocks.len()
            && pre.get(i + n).is_none_or(Option::is_none)
            && blocks[i + n].pblk == start + n as u64
        {
            n += 1;
        }
        buf.resize(n * bs, 0);
        if n > 1 && ctx.fs.read_blocks_into(start, buf).is_ok() {
            for (db, bytes) in blocks[i..i + n].iter().zip(buf.chunks_exact(bs)) {
                check_block_into(ctx, db, bytes, &mut bo);
                out.push(&mut bo);
            }
        } else {
            // One block, or a run whose read failed: each block on its own, so an unreadable
            // block costs only itself.
            for db in &blocks[i..i + n] {
                check_block(ctx, db, buf, &mut bo);
                out.push(&mut bo);
            }
        }
        if bo.refs.len() >= REF_BATCH {
            ctx.add_refs(&mut bo);
        }
        i += n;
    }
    ctx.add_refs(&mut bo);
    out
}

/// How many of `blocks`, from the first (a hole), are holes of the same directory at
/// consecutive logical blocks, none of them checked early (`pre`).
fn hole_row(blocks: &[DirBlock], pre: &[Option<BlockOut>]) -> usize {
    let first = &blocks[0];
    1 + blocks
        .iter()
        .zip(0..)
        .skip(1)
        .take_while(|(db, k)| {
            db.pblk == 0
                && db.ino == first.ino
                && u64::from(db.lblk) == u64::from(first.lblk) + k
                && pre.get(*k as usize).is_none_or(Option::is_none)
        })
        .count()
}

/// References a chunk collects before adding them to the shared counter (16 KiB).
pub(super) const REF_BATCH: usize = 4096;

/// Check one directory block into the empty `bo`, reading it first (a hole needs no read).
pub(super) fn check_block<F: Facts + ?Sized>(
    ctx: &Ctx<F>,
    db: &DirBlock,
    buf: &mut Vec<u8>,
    bo: &mut BlockOut,
) {
    if db.pblk != 0 {
        buf.resize(ctx.fs.block_size(), 0);
        if ctx.fs.read_blocks_into(db.pblk, buf).is_err() {
            bo.dir = db.ino;
            return;
        }
    }
    check_block_into(ctx, db, buf, bo)
}

/// Check one directory block whose bytes are `buf` (not looked at for a hole) into the empty
/// `bo`.
pub(super) fn check_block_into<F: Facts + ?Sized>(
    ctx: &Ctx<F>,
    db: &DirBlock,
    buf: &[u8],
    bo: &mut BlockOut,
) {
    bo.dir = db.ino;
    let fs = ctx.fs;
    if db.pblk == 0 {
        // A hole pass 1 listed. With large_dir (and no inline data) holes are allowed.
        if !fs.geo.incompat.has(Incompat::LARGEDIR) || fs.geo.incompat.has(Incompat::INLINE_DATA) {
            bo.findings.report(
                ctx.policy,
                P::P2_DIRECTORY_HOLE,
                ProblemCtx {
                    dir: db.ino,
                    ino: db.ino,
                    num: u64::from(db.lblk),
                    ..Default::default()
                },
            );
        }
        return;
    }
    let bs = fs.block_size();
    let csum = fs.has_metadata_csum();
    let dx = if ctx.p1.kind(db.ino - 1) & kind::HTREE != 0 {
        ctx.dx_dirs.get(&db.ino).filter(|d| db.lblk < d.numblocks)
    } else {
        None
    };
    let interior = dx.is_some() && (db.lblk == 0 || htree::is_node(buf, bs, csum));

    if let (Some(dx), true) = (dx, interior) {
        if db.lblk == 0 {
            // The root's fixed header, as pass 2 re-checks it.
            if let Ok((info, _)) = DxRootInfo::read_from_prefix(&buf[DX_ROOT_INFO_OFFSET..]) {
                if (info.reserved_zero.get() != 0
                    || info.info_length < 8
                    || info.indirect_levels >= htree::max_levels(fs))
                    && bo.findings.report(
                        ctx.policy,
                        P::P2_HTREE_BAD_ROOT,
                        ProblemCtx {
                            dir: db.ino,
                            ino: db.ino,
                            ..Default::default()
                        },
                    )
                {
                    // Cleared: the block is checked as a plain one below.
                    bo.dx = Some(Box::new(htree::DxBlock {
                        cleared: true,
                        ..Default::default()
                    }));
                }
            }
        }
        let failed_csum = csum
            && ctx
                .inode_seed(db.ino)
                .is_some_and(|seed| !htree::interior_csum_ok(buf, bs, seed));
        // An interior node holds one empty entry: nothing to check but the index. The root
        // block's entries ('.' and '..') are checked first.
        if db.lblk == 0 {
            check_entries(ctx, db.ino, db.lblk, db.pblk, buf, 0, bo, false, Some(dx));
        }
        if bo.dx.is_none() {
            bo.dx = Some(Box::new(htree::parse_interior(
                fs,
                ctx.policy,
                db.ino,
                db.lblk,
                buf,
                dx,
                failed_csum,
                &mut bo.findings,
            )));
        }
        return;
    }

    let mut failed_csum = false;
    let mut max = bs;
    // An htree root keeps a dx tail, not a leaf tail: its `..` entry spans the whole block.
    let htree_root = ctx.p1.kind(db.ino - 1) & kind::HTREE != 0 && db.lblk == 0;
    if csum && !htree_root {
        if fdir::has_tail(buf) {
            if let Some(seed) = ctx.inode_seed(db.ino) {
                failed_csum = ffsck_format::verify::dir_leaf_csum(buf, seed).is_err();
            }
            max = bs - fdir::TAIL_SIZE;
        } else {
            bo.findings.report(
                ctx.policy,
                P::P2_LEAF_NODE_MISSING_CSUM,
                ProblemCtx {
                    dir: db.ino,
                    num: u64::from(db.lblk),
                    ..Default::default()
                },
            );
        }
    }
    let before = bo.findings.0.len();
    check_entries(ctx, db.ino, db.lblk, db.pblk, &buf[..max], 0, bo, false, dx);
    // As e2fsck: the checksum alone is reported when no finding of the block was fixed (a
    // fix rewrites the block with its checksum); under -n an unprinted finding such as
    // P2_SET_FILETYPE must not hide it.
    if failed_csum && !bo.findings.0[before..].iter().any(|f| f.fixed) {
        bo.findings.report(
            ctx.policy,
            P::P2_LEAF_NODE_ONLY_CSUM_INVALID,
            ProblemCtx {
                dir: db.ino,
                blk: db.pblk,
                num: u64::from(db.lblk),
                ..Default::default()
            },
        );
    }
    if dx.is_some() {
        let (lo, hi) = bo.hash_range.unwrap_or((u32::MAX, 0));
        bo.dx = Some(Box::new(htree::DxBlock {
            lblk: db.lblk,
            kind: htree::DxKind::Leaf,
            min_hash: lo,
            max_hash: hi,
            hash_unknown: bo.hash_unknown,
            ..Default::default()
        }));
    }
}

impl<'a, F: Facts + ?Sized> Ctx<'a, F> {
    pub(super) fn new(
        refs: &'a SharedCounter,
        dx_dirs: &'a HashMap<u32, htree::DxDir>,
        fs: &'a Fs,
        p1: &'a F,
        policy: Policy,
    ) -> Self {
        Ctx {
            refs,
            dx_dirs,
            fs,
            p1,
            policy,
            filetype: fs.geo.incompat.has(Incompat::FILETYPE),
        }
    }

    /// The checksum seed of directory `ino`'s blocks, from the generation pass 1 kept (or,
    /// for an inode pass 1 did not list as a directory, from the inode on disk).
    pub(super) fn inode_seed(&self, ino: u32) -> Option<u32> {
        match self.p1.dir_generation(ino) {
            Some(generation) => Some(ffsck_format::csum::inode_seed(
                self.fs.csum_seed,
                ino,
                generation,
            )),
            None => crate::ext4::inode::seed(self.fs, ino),
        }
    }

    /// Add the references `bo` collected to the shared counter.
    pub(super) fn add_refs(&self, bo: &mut BlockOut) {
        self.refs.increment_all(&bo.refs);
        bo.refs.clear();
    }
}
