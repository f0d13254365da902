//! Pass 1: scan every inode table in disk order, self-check each inode and its block map or
//! extent tree, and keep only the compact facts later passes need.
//!
//! Checks: dtime/link-count consistency, reserved inodes, modes and flags, extra-isize and
//! in-inode xattrs, extent headers and entries, block pointers, xattr blocks, `i_size` and
//! `i_blocks`, inode checksums.
//! Produces: `Pass1Facts` — link counts and a one-byte kind per inode, the in-use inode and
//! block bitmaps, the directory-block list (sorted by block for pass 2), multiply-claimed
//! blocks, per-group claim summaries for pass 1B, and xattr-block reference counts.
//! Relies on: `Pass0Facts`. Frees: every inode and block buffer as soon as it is checked.
//!
//! Groups are scanned in parallel; each worker fills its own slice of the per-inode arrays and
//! returns its findings, which are merged in group order so output never depends on threads.

use crate::bitmap::{AtomicBitmap, Bitmap};
use crate::facts::{
    dir_block_order, ClaimSummary, Counts, DirBlock, DirBlockSpill, DirFacts, DirList, Partial,
    Pass1Facts, Stage,
};
use crate::fs::Fs;
use crate::icount::{InodeCounts, InodeKinds};
use crate::pass0::{GroupState, Pass0Facts};
use crate::problem::Problem as P;
use crate::report::{Findings, Policy, ProblemCtx};
use ffsck_format::{ino, Compat, Incompat, RoCompat};
use rayon::prelude::*;
use std::collections::BTreeMap;
use std::sync::Mutex;

mod blockmap;
mod dirblocks;
mod encryption;
mod extents;
mod inode;
mod itable;
mod schedule;
mod sizes;
mod special;
mod xattr;

use ffsck_format::inode::RawInode;
use itable::scan_group;
use schedule::{pipeline_batch, Acc, GroupBits};
pub(crate) use special::{device_inode_ok, symlink_ok};

/// Mark the fixed metadata of every group.
pub fn metadata_map(fs: &Fs, groups: &[GroupState]) -> Bitmap {
    let geo = &fs.geo;
    let mut m = Bitmap::new(geo.blocks_count);
    // Block 0 holds the boot sector (and the superblock for block sizes > 1 KiB).
    if geo.first_data_block == 0 {
        m.set(0);
    }
    for g in 0..geo.group_count {
        for (start, n) in geo.fixed_metadata_runs(g) {
            for b in start..start.saturating_add(n).min(geo.blocks_count) {
                m.set(b);
            }
        }
        let gd = &fs.groups[g as usize];
        let st = groups[g as usize];
        if st.block_bitmap_ok {
            m.set(gd.block_bitmap());
        }
        if st.inode_bitmap_ok {
            m.set(gd.inode_bitmap());
        }
        if st.inode_table_ok {
            let it = gd.inode_table();
            for b in it..(it + u64::from(geo.inode_blocks_per_group)).min(geo.blocks_count) {
                m.set(b);
            }
        }
    }
    m
}

pub fn run(
    p0: &Pass0Facts,
    policy: Policy,
    out: &mut Findings,
    progress: &crate::progress::Progress,
) -> Pass1Facts {
    run_with(p0, policy, out, progress, None, &Default::default())
}

/// Pass 1, handing the directory blocks of each finished batch of groups to `stage` while the
/// next batch is scanned (the pipelined check), or scanning all groups at once (`None`).
pub fn run_with(
    p0: &Pass0Facts,
    policy: Policy,
    out: &mut Findings,
    progress: &crate::progress::Progress,
    stage: Option<&mut dyn Stage>,
    limits: &crate::spill::Limits,
) -> Pass1Facts {
    let fs = &p0.fs;
    let geo = &fs.geo;
    let n_inodes = geo.inodes_count as usize;
    let metadata = metadata_map(fs, &p0.groups);
    // Pre-claim metadata so files that overlap it are found as multiply-claimed.
    let claimed = AtomicBitmap::new(geo.blocks_count);
    for b in metadata.iter_ones() {
        claimed.test_and_set(b);
    }
    let mkfs = fs.sb.s_mkfs_time.get();
    let scan = Scan {
        fs,
        policy,
        claimed,
        inode_used: AtomicBitmap::new(n_inodes as u64),
        links_one: AtomicBitmap::new(n_inodes as u64),
        links_two: AtomicBitmap::new(n_inodes as u64),
        kind_dir: AtomicBitmap::new(n_inodes as u64),
        kind_reg: AtomicBitmap::new(n_inodes as u64),
        ea_refs: Mutex::new(BTreeMap::new()),
        buffers: Mutex::new(Vec::new()),
        ea_inode_refs: Mutex::new(BTreeMap::new()),
        ea_inode_flag_set: Mutex::default(),
        quota: fs.sb.ro_compat().has(RoCompat::QUOTA),
        policies: Mutex::default(),
        bucket_shift: (64 - geo.blocks_count.leading_zeros()).saturating_sub(6),
        extent_fs: geo.incompat.has(Incompat::EXTENTS),
        low_dtime_check: !(mkfs != 0 && mkfs < geo.inodes_count),
        shared_blocks: geo.ro_compat.has(RoCompat::SHARED_BLOCKS),
        journal_inum: p0.journal.journal_inum,
        bb_inodes: inodes_in_bad_blocks(p0, policy, out),
        resize_cleared: p0.resize_cleared,
        metadata,
    };
    let group_count = geo.group_count as usize;
    // The used part of a group's inode table is hinted a few groups ahead of its scan, so
    // the device works on the next tables while the workers check this one.
    let ahead = 2 * rayon::current_num_threads().max(1);
    let hint_table = |g: usize| {
        if let (Some(st), Some(gd)) = (p0.groups.get(g), fs.groups.get(g)) {
            if st.inode_table_ok {
                let n = u64::from(fs.scannable_inodes(g as u32, st.csum_ok));
                let bytes = n * u64::from(geo.inode_size);
                fs.will_need_blocks(&[(
                    gd.inode_table(),
                    bytes.div_ceil(u64::from(geo.block_size)),
                )]);
            }
        }
    };
    (0..ahead.min(group_count)).for_each(hint_table);
    // Without a stage or a limit, each group's directory blocks go straight into one list as
    // the group ends (pass 2 sorts it anyway): the groups' lists are never all alive beside
    // a joined copy of them, which on a file system of small directories was a third of
    // the peak memory.
    let sink: Option<Mutex<Vec<DirBlock>>> =
        (stage.is_none() && limits.dir_blocks_bytes.is_none()).then(Mutex::default);
    let scan_groups = |r: std::ops::Range<usize>| -> Vec<GroupOut> {
        r.into_par_iter()
            .map(|g| {
                hint_table(g + ahead);
                let mut o = scan_group(&scan, g as u32, p0.groups[g]);
                if let Some(sink) = &sink {
                    let mut all = sink.lock().unwrap_or_else(|e| e.into_inner());
                    all.append(&mut o.dir_blocks);
                    o.dir_blocks = Vec::new();
                }
                progress.advance(1);
                o
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
    let Acc {
        mut dir_blocks,
        dir_inos,
        dir_generations,
        mut dup_blocks,
        summaries,
        counts,
        links_many,
        kinds_other,
        quota,
        policies,
        ..
    } = acc;
    // Xattr block reference counts, in block order.
    let refs = scan.ea_refs.into_inner().unwrap_or_default();
    let ea_inode_refs = scan.ea_inode_refs.into_inner().unwrap_or_default();
    let ea_inode_flag_set = scan.ea_inode_flag_set.into_inner().unwrap_or_default();
    for (blk, e) in refs {
        if e.disk_refcount != e.seen {
            out.report(
                policy,
                P::P1_EXTATTR_REFCOUNT,
                ProblemCtx {
                    blk,
                    num: u64::from(e.disk_refcount),
                    num2: u64::from(e.seen),
                    ..Default::default()
                },
            );
        }
    }
    dup_blocks.sort_unstable();
    dup_blocks.dedup();
    // Pass 2 reads blocks in this order. With dir_index, e2fsck checks every directory's
    // first block before any other, so parents and htree roots are known early; holes
    // (block 0) then come first among the rest.
    let dir_spill = match spill {
        Some(mut s) => match s.push_run(&mut dir_blocks) {
            Ok(()) => Some(s),
            Err(_) => {
                // Could not spill the rest: take the runs back into memory.
                dir_blocks.extend(s.iter());
                None
            }
        },
        None => None,
    };
    dir_blocks.par_sort_unstable_by_key(|d| dir_block_order(first_blocks_first, d));
    let block_used = scan.claimed.into_bitmap();
    let inode_used = scan.inode_used.into_bitmap();
    let links = InodeCounts::from_parts(
        scan.links_one.into_bitmap(),
        scan.links_two.into_bitmap(),
        links_many,
    );
    let kinds = InodeKinds::from_parts(
        scan.kind_dir.into_bitmap(),
        scan.kind_reg.into_bitmap(),
        kinds_other,
    );
    Pass1Facts {
        links,
        kinds,
        inode_used,
        block_used,
        dup_blocks,
        metadata: scan.metadata,
        dir_blocks,
        dir_spill,
        dirs: DirList::new(&dir_inos, dir_generations, geo.inodes_count, limits),
        summaries,
        bucket_shift: scan.bucket_shift,
        counts,
        ea_inode_refs,
        ea_inode_flag_set,
        quota,
        policies,
        bb_inodes: scan.bb_inodes,
    }
}

/// The inodes whose inode-table block is on the bad-blocks list (inode 1), ascending. When
/// the list names the block of inode 1 itself, the list is cleared (agreed to) and so empty.
fn inodes_in_bad_blocks(p0: &Pass0Facts, policy: Policy, findings: &mut Findings) -> Vec<u32> {
    let fs = &p0.fs;
    let geo = &fs.geo;
    let bad = crate::relocate::bad_blocks(fs);
    if bad.is_empty() {
        return Vec::new();
    }
    let per_block = (geo.block_size / geo.inode_size.max(1)).max(1);
    let mut out = Vec::new();
    for (g, st) in p0.groups.iter().enumerate() {
        if !st.inode_table_ok {
            continue;
        }
        let it = fs.groups[g].inode_table();
        for &b in &bad {
            let Some(i) = b
                .checked_sub(it)
                .filter(|&i| i < u64::from(geo.inode_blocks_per_group))
            else {
                continue;
            };
            let first = i as u32 * per_block;
            let last = (first + per_block).min(geo.inodes_per_group);
            let base = g as u32 * geo.inodes_per_group;
            out.extend((first..last).map(|k| base + k + 1));
        }
    }
    out.sort_unstable();
    out.dedup();
    if out.first() == Some(&ino::BAD)
        && findings.report(
            policy,
            P::P1_BADBLOCKS_IN_BADBLOCKS,
            ProblemCtx::ino(ino::BAD),
        )
    {
        return Vec::new();
    }
    out
}

/// What the scan of one group hands back to the merge.
#[derive(Default)]
struct GroupOut {
    findings: Findings,
    dir_blocks: Vec<DirBlock>,
    dirs: Vec<DirFacts>,
    dup_blocks: Vec<u64>,
    summary: ClaimSummary,
    counts: Counts,
    /// `(ino - 1, i_links_count)` of this group's inodes with more than two links.
    links_many: Vec<(u32, u16)>,
    /// `(ino - 1, kind)` of this group's inodes other than plain files and directories.
    kinds_other: Vec<(u32, u8)>,
    /// Space and inodes charged per quota id (with the `quota` feature).
    quota: crate::quota::Usage,
    /// `(ino, policy id)` of this group's encrypted inodes with a context.
    policies: Vec<(u32, u32)>,
    /// The group's bits of the shared inode bitmaps, or-ed into them when the group ends.
    bits: GroupBits,
}

/// Shared, read-only state of the scan.
struct Scan<'a> {
    fs: &'a Fs,
    policy: Policy,
    claimed: AtomicBitmap,
    /// Inodes with exactly one link, and with exactly two (the rest are in each group's
    /// `links_many`).
    links_one: AtomicBitmap,
    links_two: AtomicBitmap,
    /// Inodes whose kind byte is exactly a plain directory / regular file.
    kind_dir: AtomicBitmap,
    kind_reg: AtomicBitmap,
    /// Inodes in use, set as the scan finds them.
    inode_used: AtomicBitmap,
    ea_refs: Mutex<BTreeMap<u64, EaBlock>>,
    /// Inode-table read buffers, one per worker at most, freed with the scan.
    buffers: Mutex<Vec<Vec<u8>>>,
    /// References to value inodes from xattr entries, by inode number.
    ea_inode_refs: Mutex<BTreeMap<u32, u32>>,
    ea_inode_flag_set: Mutex<std::collections::BTreeSet<u32>>,
    /// Usage is counted for the quota files (the `quota` feature).
    quota: bool,
    /// Encryption policy ids, shared by the workers.
    policies: Mutex<encryption::Policies>,
    bucket_shift: u32,
    extent_fs: bool,
    low_dtime_check: bool,
    /// `shared_blocks`: blocks may be claimed more than once by design (never duplicates).
    shared_blocks: bool,
    /// The journal inode as the journal check left it (0 once the journal was dropped).
    journal_inum: u32,
    /// Inodes in inode-table blocks on the bad-blocks list, ascending.
    bb_inodes: Vec<u32>,
    /// The resize inode is cleared by the repair (pass 0's question): seen as empty.
    resize_cleared: bool,
    /// Superblocks, descriptors, bitmaps and inode tables: a mapping block found among them
    /// is never repaired in place (see `critical_collision`).
    metadata: Bitmap,
}

/// An xattr block seen during the scan and how many inodes point at it.
#[derive(Clone, Copy, Debug)]
struct EaBlock {
    /// h_refcount on disk.
    disk_refcount: u32,
    seen: u32,
    /// Blocks charged to each inode that uses it: the block's cluster plus its value inodes.
    quota_blocks: u64,
}

/// Per-inode checking context.
struct InodeCheck<'a> {
    ino: u32,
    inode: &'a RawInode,
    raw: &'a [u8],
    /// Something other than the checksum was reported for this inode.
    other_problem: bool,
    /// What the in-inode xattrs charge to `i_blocks`.
    ea_ibody: xattr::EaQuota,
}

fn report(scan: &Scan, out: &mut GroupOut, ic: &mut InodeCheck, p: P, ctx: ProblemCtx) -> bool {
    ic.other_problem = true;
    out.findings.report(scan.policy, p, ctx)
}

/// `report`, unless the walk is inside a subtree in critical metadata (`quiet`): its problems
/// are found, and fixed, in the copy pass 1D makes. Returns whether the fix was agreed to.
fn flag(
    scan: &Scan,
    out: &mut GroupOut,
    ic: &mut InodeCheck,
    quiet: bool,
    p: P,
    ctx: ProblemCtx,
) -> bool {
    !quiet && report(scan, out, ic, p, ctx)
}
