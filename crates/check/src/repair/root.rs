//! Recreate a missing root directory, as e2fsck's pass 3 does when the root inode is not in
//! use: a new directory in inode 2 (mode 0755, one block holding `.` and `..`, both naming the
//! root). The directories that named the old root stay disconnected and are reconnected to a
//! new `/lost+found` by the next rounds (`P3_UNCONNECTED_DIR`).
//!
//! The block is taken from what the check found free and marked used at once in the on-disk
//! bitmaps, counts and the round's allocation facts, as for `/lost+found` (`lpf.rs`).

use super::lpf::{create_dir, mark_block, mark_inode, pick_block};
use super::Dirs;
use crate::engine::AllocFacts;
use crate::pass0::Pass0Facts;
use crate::problem::Problem as P;
use crate::report::Finding;
use ffsck_format::{ino::ROOT, Incompat};
use ffsck_io::Device;

pub fn handles(p: P) -> bool {
    p == P::P3_NO_ROOT_INODE
}

/// When this round's `P3_NO_ROOT_INODE` was answered yes, write the new root directory in
/// `dev` and record it in `dirs` and `facts`; without a free block the finding is answered no.
pub fn recreate(
    p0: &Pass0Facts,
    dev: &dyn Device,
    dirs: &mut Dirs,
    facts: &mut AllocFacts,
    findings: &mut [Finding],
) {
    let Some(f) = findings
        .iter_mut()
        .find(|f| f.fixed && f.problem == P::P3_NO_ROOT_INODE)
    else {
        return;
    };
    // The inode is still in use (only not a directory) or a directory block is already
    // recorded for it: not this fix's case.
    if facts.inode_used.get(u64::from(ROOT - 1)) || dirs.0.contains_key(&ROOT) {
        f.fixed = false;
        return;
    }
    let Some(blk) = pick_block(p0, facts) else {
        f.fixed = false;
        return;
    };
    let filetype = p0.fs.geo.incompat.has(Incompat::FILETYPE);
    create_dir(p0, dev, ROOT, blk, filetype, 0o040755);
    mark_inode(p0, dev, ROOT, true);
    mark_block(p0, dev, blk);
    facts.inode_used.set(u64::from(ROOT - 1));
    facts.block_used.set(blk);
    let g = p0.fs.geo.group_of_inode(ROOT) as usize;
    if let Some(d) = facts.dirs_per_group.get_mut(g) {
        *d += 1;
    }
    dirs.0.insert(ROOT, vec![(0, blk)]);
}
