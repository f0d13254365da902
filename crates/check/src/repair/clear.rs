//! Clear an inode as e2fsck does when it answers "Clear" for the whole inode: no links, no
//! flags, deletion time now. Its bitmap bit and blocks are freed by the next round's
//! allocation rebuild, which then sees the inode unused.

use super::inode::edit;
use crate::pass0::Pass0Facts;
use crate::problem::{Fixer, Problem as P};
use crate::report::Finding;
use ffsck_format::ino;
use ffsck_format::inode::GOOD_OLD_INODE_SIZE;
use ffsck_io::Device;
use zerocopy::IntoBytes;

/// Clear the inodes named by the fixes among `fixes`.
pub fn apply(p0: &Pass0Facts, dev: &dyn Device, fixes: &[&Finding]) {
    let now = p0.now.stamp();
    for f in fixes.iter().filter(|f| f.problem.fixed_by(Fixer::Clear)) {
        let ino = f.ctx.ino;
        let reserved = ino < p0.fs.geo.first_ino && ino != ino::ROOT;
        // Reserved inodes are left to their own fixers, but for the findings pass 1 raises
        // on every inode before it tells reserved ones apart (a table block of garbage, an
        // extent flag without the feature). The root is cleared as any directory (pass 3
        // then makes a new one and reconnects what was in it).
        if reserved && !matches!(f.problem, P::P1_INODE_IS_GARBAGE | P::P1_EXTENTS_SET) {
            continue;
        }
        edit(p0, dev, ino, |i| {
            i.i_links_count.set(0);
            i.i_flags.set(0);
            i.i_dtime.set(now.max(1));
            if reserved {
                // Nothing checks a reserved inode's links, so its map goes too, or the next
                // check would walk it again (as e2fsck); the bad-blocks inode is emptied.
                i.set_block_bytes(&[0; 60]);
                if ino == ino::BAD {
                    i.as_mut_bytes()[..GOOD_OLD_INODE_SIZE].fill(0);
                }
            }
        });
    }
}
