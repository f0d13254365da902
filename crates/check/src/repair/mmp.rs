//! The MMP block's fixes: a bad magic or checksum gets a clean block written over it; a block
//! number outside the file system gets a free block taken for it (marked in use), so the
//! repaired file system keeps its multiple-mount protection and opens in libext2fs, where
//! e2fsck's zeroed number leaves one it cannot open.

use super::features::edit_super;
use super::lpf;
use crate::engine::AllocFacts;
use crate::pass0::Pass0Facts;
use crate::problem::Problem as P;
use crate::report::Finding;
use ffsck_io::Device;

/// Make the MMP fixes among `fixes`. Runs after the allocation is rebuilt, so a block taken
/// here is marked on top of the final bitmaps.
pub fn apply(
    p0: &Pass0Facts,
    dev: &dyn Device,
    facts: Option<&mut AllocFacts>,
    fixes: &[&Finding],
) {
    let fs = &p0.fs;
    let wanted = |p| fixes.iter().any(|f| f.problem == p);
    let blk = if wanted(P::P0_MMP_INVALID_BLK) {
        let Some(facts) = facts else { return };
        let Some(blk) = lpf::pick_block(p0, facts) else {
            return;
        };
        facts.block_used.set(blk);
        lpf::mark_block(p0, dev, blk);
        edit_super(dev, |sb| sb.s_mmp_block.set(blk));
        blk
    } else if wanted(P::P0_MMP_INVALID_MAGIC) || wanted(P::P0_MMP_CSUM_INVALID) {
        match crate::mmp::block(fs) {
            Some(b) => b,
            None => return,
        }
    } else {
        return;
    };
    let block = crate::mmp::clean_block(fs, p0.now.secs());
    let _ = dev.write_at(&block, blk * fs.block_size() as u64);
}
