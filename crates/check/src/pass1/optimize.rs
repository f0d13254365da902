//! Pass 1's offer to rebuild a file's extent tree (e2fsck's pass 1E): how full each level of
//! the tree is, the rule that says when a level could be narrower or the tree shorter, and
//! `-E bmap2extent`'s conversion of block maps. The rebuild is the extent-tree fixer's
//! (`repair::extent_tree`).

use super::blockmap::BlockWalk;
use super::{report, GroupOut, InodeCheck, Scan};
use crate::ext4::blocks::NodeInfo;
use crate::problem::Problem as P;
use crate::report::{Findings, ProblemCtx};
use ffsck_format::ino;
use ffsck_format::inode::{flags as iflags, FileType};
use ffsck_format::RoCompat;

/// Levels of a tree whose fill is kept (the root is level 0); deeper levels are not judged.
const LEVELS: usize = 5;

/// Entries in use and entries of room at each level of an extent tree, as the walk met its
/// nodes.
#[derive(Clone, Copy, Debug, Default)]
pub(super) struct TreeShape {
    /// `(entries, room)` per level.
    levels: [(u64, u64); LEVELS],
    /// The root's depth.
    depth: u16,
}

impl TreeShape {
    /// Count one node. A block node that is not full counts one entry of room less: a node
    /// split while a file grows keeps a free slot, and a tree grown that way is not worth
    /// rebuilding.
    pub(super) fn node(&mut self, n: NodeInfo) {
        if n.pblk.is_none() {
            self.depth = n.depth;
        }
        let Some(level) = self.levels.get_mut(n.level as usize) else {
            return;
        };
        let (entries, room) = (n.entries as u64, n.capacity as u64);
        level.0 += entries;
        level.1 += room;
        if n.level > 0 && entries < room {
            level.1 -= 1;
        }
    }

    /// Why the tree is worth rebuilding, and at which level: a level with more than a
    /// block's worth of free room could be narrower; a level whose entries would fit in the
    /// room of a level above it could go, and the tree be shorter.
    pub(super) fn rebuild_reason(&self, per_block: u64) -> Option<(P, u64)> {
        let levels = &self.levels[..(usize::from(self.depth) + 1).min(LEVELS)];
        for (i, &(entries, room)) in levels.iter().enumerate() {
            if room.saturating_sub(entries) > per_block {
                return Some((P::P1E_CAN_NARROW_EXTENT_TREE, i as u64));
            }
            if levels[..i].iter().any(|&(_, above)| entries < above) {
                return Some((P::P1E_CAN_COLLAPSE_EXTENT_TREE, i as u64));
            }
        }
        None
    }
}

/// After an inode's mapping was walked: offer its extent tree for
/// rebuilding when it could be narrower or shorter, or, under `-E bmap2extent`, have any
/// mapping rewritten as an extent tree. Only the root directory and ordinary inodes are
/// offered, as e2fsck offers them.
///
/// e2fsck offers a rebuild at the end of the walk, before it judges the sizes, and a
/// bigalloc file's block map after them: `after_sizes` says which of the two this call is.
pub(super) fn offer(
    scan: &Scan,
    ic: &mut InodeCheck,
    out: &mut GroupOut,
    w: &BlockWalk,
    after_sizes: bool,
) {
    let fs = scan.fs;
    let ino = ic.ino;
    let fl = ic.inode.flags();
    if w.exhausted
        || fl & iflags::INLINE_DATA != 0
        || !(ino == ino::ROOT || ino >= fs.geo.first_ino)
    {
        return;
    }
    let overrides = scan.policy.overrides();
    let ctx = ProblemCtx::ino(ino);
    // A bigalloc file system has no block-mapped files or directories (as e2fsck: those
    // that map data are rewritten as extent trees).
    let ft = ic.inode.file_type();
    let bigalloc_map = fs.geo.ro_compat.has(RoCompat::BIGALLOC)
        && matches!(ft, FileType::Regular | FileType::Directory)
        && fl & iflags::EXTENTS == 0
        && (w.last_block.is_some() || data_blocks_on_disk(scan, ic));
    if after_sizes {
        if bigalloc_map {
            report(scan, out, ic, P::P1_NO_BIGALLOC_BLOCKMAP_FILES, ctx);
        }
        return;
    }
    if bigalloc_map && scan.policy.answer(P::P1_NO_BIGALLOC_BLOCKMAP_FILES) {
        // Rewritten as an extent tree anyway (asked after the sizes).
        return;
    }
    if overrides.convert_block_maps {
        report(scan, out, ic, P::P1E_CONVERT_BMAP, ctx);
        return;
    }
    if !scan.extent_fs || fl & iflags::EXTENTS == 0 || overrides.no_optimize_extents {
        return;
    }
    let per_block = (fs.block_size() as u64 - 12) / 12;
    if let Some((p, level)) = w.shape.rebuild_reason(per_block) {
        report(scan, out, ic, p, ProblemCtx { num: level, ..ctx });
    }
}

/// Whether `i_blocks` counts more than the inode's xattr block: the blocks of a map the walk
/// passed over (in critical metadata) still count as data, as e2fsck counts them.
fn data_blocks_on_disk(scan: &Scan, ic: &InodeCheck) -> bool {
    let geo = &scan.fs.geo;
    let huge = geo.ro_compat.has(RoCompat::HUGE_FILE);
    let acl = if ic.inode.file_acl(scan.fs.geo.sixty_four_bit()) != 0 {
        u64::from(geo.block_size) * u64::from(geo.cluster_ratio.max(1)) / 512
    } else {
        0
    };
    ic.inode.blocks_raw(huge) > acl
}

/// At the end of pass 1: whether a rebuild was agreed to (the engine then says e2fsck's
/// pass 1E header, after passes 1B–1D).
pub(super) fn agreed(out: &Findings) -> bool {
    out.0.iter().any(|f| {
        f.fixed
            && matches!(
                f.problem,
                P::P1E_CAN_NARROW_EXTENT_TREE
                    | P::P1E_CAN_COLLAPSE_EXTENT_TREE
                    | P::P1E_CONVERT_BMAP
                    | P::P1_NO_BIGALLOC_BLOCKMAP_FILES
            )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node(level: u32, entries: usize, capacity: usize) -> NodeInfo {
        NodeInfo {
            pblk: (level > 0).then_some(100 + u64::from(level)),
            depth: 0,
            entries,
            capacity,
            level,
        }
    }

    /// e2fsck's rule on the shapes of its tests: a depth-1 tree whose one leaf holds what the
    /// root could (shorter), two half-empty leaves (narrower), and full trees (neither).
    #[test]
    fn the_rule_follows_e2fsck() {
        let mut root = node(0, 1, 4);
        root.depth = 1;
        let mut t = TreeShape::default();
        t.node(root);
        t.node(node(1, 1, 84));
        assert_eq!(
            t.rebuild_reason(84),
            Some((P::P1E_CAN_COLLAPSE_EXTENT_TREE, 1))
        );
        // Four entries in the leaf are not fewer than the root's four slots: the tree stays.
        let mut t = TreeShape::default();
        t.node(root);
        t.node(node(1, 4, 84));
        assert_eq!(t.rebuild_reason(84), None);
        // Two leaves of a 1 KiB tree, 4 and 3 entries: 166 slots of room for 7.
        let mut root2 = node(0, 2, 4);
        root2.depth = 1;
        let mut t = TreeShape::default();
        t.node(root2);
        t.node(node(1, 4, 84));
        t.node(node(1, 3, 84));
        assert_eq!(
            t.rebuild_reason(84),
            Some((P::P1E_CAN_NARROW_EXTENT_TREE, 1))
        );
        // A full leaf and one with a single free slot (counted as full).
        let mut t = TreeShape::default();
        t.node(root2);
        t.node(node(1, 84, 84));
        t.node(node(1, 83, 84));
        assert_eq!(t.rebuild_reason(84), None);
        // A tree in the inode alone is never rebuilt.
        let mut t = TreeShape::default();
        t.node(node(0, 2, 4));
        assert_eq!(t.rebuild_reason(84), None);
    }
}
