//! Pass 2: check every directory block, read in ascending block order.
//!
//! Checks: entry framing (`rec_len`, `name_len`), `.` and `..`, entry inode numbers against
//! pass-1 facts (unused, out of range, in never-initialised inode areas), file types, names,
//! duplicate names within a block, leaf and htree checksums, inline directories, and the
//! "bad inode" fields pass 1 flagged (reported when the first entry names the inode).
//! Produces: `Pass2Facts` — counted references per inode and each directory's `..` and
//! first parent, for passes 3 and 4.
//! Relies on: `Pass1Facts`. Frees: the directory-block list.
//!
//! Blocks are checked in parallel chunks; everything that depends on order (which link to a
//! directory is its parent) is decided in a sequential merge in block order.

mod bad_inode;
mod blocks;
mod early;
mod entries;
mod links;
mod merge;
mod names;
mod out;

pub use bad_inode::process_bad_inode;
pub use early::Early;
pub use links::DirTable;

use crate::facts::{kind, Pass1Facts};
use crate::fs::Fs;
use crate::htree;
use crate::icount::{InodeCounts, SharedCounter};
use crate::pass0::Pass0Facts;
use crate::problem::Problem as P;
use crate::report::{Findings, Policy, ProblemCtx};
use blocks::Ctx;
use ffsck_format::ino as rino;
use merge::Merge;
use out::{BlockOut, Outs};
use rayon::prelude::*;
use std::collections::{BTreeMap, BTreeSet, HashMap};

pub struct Pass2Facts {
    /// References counted from directory entries, per inode (index `ino - 1`), saturating.
    pub refs: InodeCounts,
    pub dirs: DirTable,
    pub entries: u64,
    /// A directory block was found corrupted and not salvaged: like e2fsck, the check
    /// cannot go on past pass 2.
    pub aborted: bool,
    /// Flagged inodes cleared at their first entry, as e2fsck deallocates them in pass 2:
    /// pass 4 passes them by.
    pub cleared: std::collections::BTreeSet<u32>,
}

/// Pass 2, taking the blocks a pipelined check already checked during pass 1 from `early`
/// (their outputs are merged in the same order as if checked now). `progress` is told how
/// many blocks each chunk checked.
pub fn run_with(
    p0: &Pass0Facts,
    p1: &Pass1Facts,
    policy: Policy,
    out: &mut Findings,
    progress: &(dyn Fn(u64) + Sync),
    early: Option<Early>,
    limits: &crate::spill::Limits,
) -> Pass2Facts {
    let fs = &p0.fs;
    let n = fs.geo.inodes_count as usize;
    let (refs, dx_dirs, early_outs) = match early {
        Some(e) => e.into_parts(fs),
        None => (
            SharedCounter::new(n as u64),
            htree::read_roots(fs, p1),
            Vec::new(),
        ),
    };
    let ctx = Ctx::new(&refs, &dx_dirs, fs, p1, policy);
    let mut m = Merge::new(DirTable::new(&p1.dirs, limits));
    // The root is its own parent.
    m.dirs.update(&rino::ROOT, |r| r.parent = rino::ROOT);
    // Inline directories have no blocks: e2fsck lists the two parts of each as blocks 0 and
    // 1 at block number 0, so the first parts come before every block (which entry of a
    // directory linked twice is its parent depends on it) and the second parts after the
    // directories' first blocks (here: after all blocks).
    let inline = inline_dirs(p1);
    let inline_part = |part: u32| {
        let parts: Vec<BlockOut> = inline
            .par_iter()
            .map(|&i| {
                let mut bo = entries::check_inline_dir(&ctx, i, part);
                ctx.add_refs(&mut bo);
                bo
            })
            .collect();
        let mut outs = Outs::default();
        for mut bo in parts {
            outs.push(&mut bo);
        }
        outs
    };
    m.merge(fs, policy, vec![inline_part(0)], out);
    if !m.aborted {
        blocks::check_windows(&ctx, p1, &mut m, early_outs, progress, out);
    }
    if !m.aborted {
        m.merge(fs, policy, vec![inline_part(1)], out);
    }
    let refs = refs.finish();
    let entries = refs.total();
    let Merge {
        dirs,
        rehash,
        dx_facts,
        aborted,
        cleared,
        ..
    } = m;
    if !aborted {
        finish(fs, p1, policy, &dx_dirs, &dx_facts, &rehash, out);
    }
    Pass2Facts {
        refs,
        dirs,
        entries,
        aborted,
        cleared,
    }
}

/// Inline directories, in inode order: they have no blocks, and are checked as two
/// pseudo-blocks each, one before the blocks and one after. (Their kind has the inline bit, so it is not a plain directory's: they
/// are among the other kinds.)
fn inline_dirs(p1: &Pass1Facts) -> Vec<u32> {
    p1.kinds
        .others()
        .iter()
        .filter(|&&(_, k)| k & kind::INLINE != 0)
        .map(|&(idx, _)| idx + 1)
        .filter(|&ino| p1.dirs.index().position(ino).is_some())
        .collect()
}

/// After every block is merged: the index of each indexed directory not marked for
/// rebuilding is verified, and the directories marked for rebuilding have their duplicate
/// names reported.
fn finish(
    fs: &Fs,
    p1: &Pass1Facts,
    policy: Policy,
    dx_dirs: &HashMap<u32, htree::DxDir>,
    dx_facts: &BTreeMap<u32, Vec<htree::DxBlock>>,
    rehash: &BTreeSet<u32>,
    out: &mut Findings,
) {
    for (dir, blocks) in dx_facts {
        if rehash.contains(dir) {
            continue;
        }
        if let Some(dx) = dx_dirs.get(dir) {
            htree::verify_dir(policy, *dir, dx, blocks, out);
        }
    }
    if !rehash.is_empty() {
        // e2fsck rebuilds these in pass 3A; even under -n it first reads every name and
        // reports duplicates across the whole directory. Reported here, at the end of pass 2.
        let mut blocks: BTreeMap<u32, Vec<u64>> = BTreeMap::new();
        for db in p1.dir_block_iter() {
            if db.pblk != 0 && rehash.contains(&db.ino) {
                blocks.entry(db.ino).or_default().push(db.pblk);
            }
        }
        for (dir, list) in blocks {
            let encrypted = p1.kinds[(dir - 1) as usize] & kind::ENCRYPT != 0;
            merge::report_duplicate_names(fs, policy, dir, &list, encrypted, out);
        }
    }
}

/// After the directories: files of 2 GiB or more need the `large_file` feature, and a
/// revision-0 file system cannot carry feature flags at all.
pub fn large_files(fs: &Fs, large_files: u64, policy: Policy, out: &mut Findings) {
    if large_files == 0 {
        return;
    }
    let sb = &fs.sb;
    if sb.s_feature_ro_compat.get() & ffsck_format::RoCompat::LARGE_FILE == 0 {
        out.report(policy, P::P2_FEATURE_LARGE_FILES, ProblemCtx::default());
    }
    if sb.s_rev_level.get() == 0 {
        out.report(policy, P::P1_FS_REV_LEVEL, ProblemCtx::default());
    }
}
