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

/// When this round's `P1_ROOT_NO_DIR` was answered yes, clear the root inode as e2fsck's pass
/// 1 does (no links, a deletion time): before pass 1D copies any block, and whether or not
/// pass 3 recreates it in this round (a later round does, after a clone held pass 3 back).
pub fn clear(p0: &Pass0Facts, dev: &dyn Device, findings: &[Finding]) {
    if findings
        .iter()
        .any(|f| f.fixed && f.problem == P::P1_ROOT_NO_DIR)
    {
        let now = p0.now.stamp().max(1);
        super::inode::edit(p0, dev, ROOT, |i| {
            i.i_links_count.set(0);
            i.i_dtime.set(now);
        });
    }
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
    if !make(p0, dev, dirs, facts, findings) {
        // Nothing written (the clearing of pass 1 stands, as in e2fsck).
        for f in findings
            .iter_mut()
            .filter(|f| f.problem == P::P3_NO_ROOT_INODE)
        {
            f.fixed = false;
        }
    }
}

/// Write the new root when asked to; false when asked to but it could not be made.
fn make(
    p0: &Pass0Facts,
    dev: &dyn Device,
    dirs: &mut Dirs,
    facts: &mut AllocFacts,
    findings: &mut [Finding],
) -> bool {
    let Some(_) = findings
        .iter_mut()
        .find(|f| f.fixed && f.problem == P::P3_NO_ROOT_INODE)
    else {
        return true;
    };
    // The inode is still in use (only not a directory) or a directory block is already
    // recorded for it: not this fix's case.
    if facts.inode_used.get(u64::from(ROOT - 1)) || dirs.0.contains_key(&ROOT) {
        return false;
    }
    let Some(blk) = pick_block(p0, facts) else {
        return false;
    };
    let filetype = p0.fs.geo.incompat.has(Incompat::FILETYPE);
    create_dir(p0, dev, ROOT, blk, filetype, 0o040755);
    // A wiped root often keeps its bitmap bit (and counts): marking it again would take a
    // free inode the group does not have. Pass 5 settles the counts.
    if !bit_set(p0, dev) {
        mark_inode(p0, dev, ROOT, true);
    }
    mark_block(p0, dev, blk);
    facts.inode_used.set(u64::from(ROOT - 1));
    facts.block_used.set(blk);
    let g = p0.fs.geo.group_of_inode(ROOT) as usize;
    if let Some(d) = facts.dirs_per_group.get_mut(g) {
        *d += 1;
    }
    dirs.0.insert(ROOT, vec![(0, blk)]);
    true
}

/// Whether the root's bit is set in the inode bitmap of group 0.
fn bit_set(p0: &Pass0Facts, dev: &dyn Device) -> bool {
    let Some(gd) = p0.fs.groups.first() else {
        return false;
    };
    let mut b = [0u8; 1];
    let off = gd.inode_bitmap() * p0.fs.block_size() as u64;
    dev.read_at(&mut b, off).is_ok() && b[0] & (1 << (ROOT - 1)) != 0
}
