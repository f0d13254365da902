//! Clear an inode as e2fsck does when it answers "Clear" for the whole inode: no links, no
//! flags, deletion time now. Its bitmap bit and blocks are freed by the next round's
//! allocation rebuild, which then sees the inode unused.

use super::inode::edit;
use crate::pass0::Pass0Facts;
use crate::problem::Fixer;
use crate::report::Finding;
use ffsck_format::ino;
use ffsck_io::Device;

/// Clear the inodes named by the fixes among `fixes`.
pub fn apply(p0: &Pass0Facts, dev: &dyn Device, fixes: &[&Finding]) {
    let now = p0.now.stamp();
    for f in fixes.iter().filter(|f| f.problem.fixed_by(Fixer::Clear)) {
        let ino = f.ctx.ino;
        // Reserved inodes are left to their own fixers; the root is cleared as any directory
        // (pass 3 then makes a new one and reconnects what was in it).
        if ino < p0.fs.geo.first_ino && ino != ino::ROOT {
            continue;
        }
        edit(p0, dev, ino, |i| {
            i.i_links_count.set(0);
            i.i_flags.set(0);
            i.i_dtime.set(now.max(1));
        });
    }
}
