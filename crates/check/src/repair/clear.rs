//! Clear an inode as e2fsck does when it answers "Clear" for the whole inode: no links, no
//! flags, deletion time now. Its bitmap bit and blocks are freed by the next round's
//! allocation rebuild, which then sees the inode unused.

use super::inode::edit;
use crate::pass0::Pass0Facts;
use crate::problem::Problem as P;
use crate::report::Finding;
use ffsck_io::Device;

pub fn handles(p: P) -> bool {
    matches!(
        p,
        P::P4_ZERO_LEN_INODE
            | P::P1_ZERO_LENGTH_DIR
            | P::P1_INODE_IS_GARBAGE
            | P::P1_CLEAR_EXTENT_INLINE_DATA_INODE
            | P::P1_INLINE_DATA_SET
            | P::P1_CORRUPT_ENCRYPTION_XATTR
            // e2fsck clears these inodes; the next round clears their entries.
            | P::P1_EXTENTS_SET
            | P::P1_MISSING_EXTENT_HEADER
            | P::P2_BAD_MODE
            | P::P2_BAD_CHAR_DEV
            | P::P2_BAD_BLOCK_DEV
            | P::P2_BAD_FIFO
            | P::P2_BAD_SOCKET
            | P::P2_INVALID_SYMLINK
            // A file whose shared blocks could not be cloned is deleted.
            | P::P1D_DELETE_QUESTION
    )
}

/// Clear the inodes named by the fixes among `fixes`.
pub fn apply(p0: &Pass0Facts, dev: &dyn Device, fixes: &[&Finding]) {
    let now = p0.now.stamp();
    for f in fixes.iter().filter(|f| handles(f.problem)) {
        let ino = f.ctx.ino;
        if ino < p0.fs.geo.first_ino {
            continue;
        }
        edit(p0, dev, ino, |i| {
            i.i_links_count.set(0);
            i.i_flags.set(0);
            i.i_dtime.set(now.max(1));
        });
    }
}
