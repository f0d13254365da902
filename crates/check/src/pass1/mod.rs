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
//!
//! This file is the pass's contract (`run`, `run_with`) and the state its modules share
//! (`Scan`, `GroupOut`, `InodeCheck`). The work: `schedule` (batches, pipelining, merging),
//! `itable` (reading inode tables), `inode` (one inode's checks), `special` (devices and
//! symlinks), `blockmap` and `extents` (the mapping, walked by `ext4::blocks`), `sizes`,
//! `dirblocks` (htree roots, holes), `xattr` and `encryption`. The facts it produces are
//! defined in `crate::facts`.

use crate::bitmap::{AtomicBitmap, Bitmap};
use crate::facts::{
    dir_block_order, ClaimSummary, Counts, DirBlock, DirBlockSpill, DirFacts, DirList, Pass1Facts,
    Stage,
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
mod optimize;
mod prefetch;
mod schedule;
mod sizes;
mod special;
mod xattr;

use ffsck_format::inode::RawInode;
use schedule::{Acc, GroupBits};
pub(crate) use special::{device_inode_ok, symlink_ok};

/// Mark the fixed metadata of every group, and the MMP block.
pub fn metadata_map(fs: &Fs, groups: &[GroupState]) -> Bitmap {
    let geo = &fs.geo;
    let mut m = Bitmap::new(geo.blocks_count);
    // Block 0 holds the boot sector (and the superblock for block sizes > 1 KiB).
    if geo.first_data_block == 0 {
        m.set(0);
    }
    if let Some(b) = crate::mmp::block(fs) {
        m.set(b);
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
    progress: &std::sync::Arc<crate::progress::Progress>,
) -> Pass1Facts {
    let io = ffsck_io::device_kind::IoMode::Parallel;
    run_with(p0, policy, out, progress, None, &Default::default(), io)
}

/// Pass 1, handing the directory blocks of each finished batch of groups to `stage` while the
/// next batch is scanned (the pipelined check), or scanning all groups at once (`None`).
pub fn run_with(
    p0: &Pass0Facts,
    policy: Policy,
    out: &mut Findings,
    progress: &std::sync::Arc<crate::progress::Progress>,
    stage: Option<&mut dyn Stage>,
    limits: &crate::spill::Limits,
    io: ffsck_io::device_kind::IoMode,
) -> Pass1Facts {
    let scan = Scan::new(p0, policy, out);
    let (acc, spill) = schedule::scan_groups(&scan, p0, out, progress, stage, limits, io);
    finish(scan, acc, spill, out, limits)
}

impl<'a> Scan<'a> {
    /// The scan's shared state: metadata pre-claimed, empty bitmaps, the file system's
    /// settings. (Reports the inodes in bad blocks.)
    fn new(p0: &'a Pass0Facts, policy: Policy, out: &mut Findings) -> Self {
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
        Scan {
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
        }
    }
}

/// The facts pass 1 hands on, from the merged group outputs: xattr reference counts
/// checked, duplicate blocks listed once, directory blocks in pass 2's order (the rest of
/// a spill written), bitmaps frozen.
fn finish(
    scan: Scan,
    acc: Acc,
    spill: Option<DirBlockSpill>,
    out: &mut Findings,
    limits: &crate::spill::Limits,
) -> Pass1Facts {
    let (policy, geo) = (scan.policy, &scan.fs.geo);
    let first_blocks_first = geo.compat.has(Compat::DIR_INDEX);
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
    let rebuilds_extents = optimize::agreed(out);
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
        rebuilds_extents,
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
    /// The findings of block-mapped inodes' blocks, held as e2fsck holds such inodes (see
    /// [`Deferred`]).
    deferred: Vec<Deferred>,
}

/// e2fsck checks the blocks of a block-mapped inode with indirect blocks or an xattr block
/// later than the rest of it: at the end of its group (or once 256 wait), in order of its
/// indirect block, then its xattr block, then its number. What that check finds is held here
/// until then, so the findings come in e2fsck's order.
struct Deferred {
    ind: u32,
    acl: u64,
    ino: u32,
    findings: Vec<crate::report::Finding>,
}

/// How many inodes e2fsck holds before it checks their blocks (`process_inode_size`).
const DEFERRED_MAX: usize = 256;

impl GroupOut {
    /// Add the held findings, in e2fsck's order.
    fn flush_deferred(&mut self) {
        let mut held = std::mem::take(&mut self.deferred);
        held.sort_by_key(|d| (d.ind, d.acl, d.ino));
        for d in held {
            self.findings.0.extend(d.findings);
        }
    }
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
    /// Where this inode's findings start in its group's list.
    first_finding: usize,
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
