//! Pass 1's directory-block checks: the htree root of an indexed directory, and the holes
//! in a directory's logical blocks.

use super::blockmap::{dir_block_limit, BlockWalk};
use super::{report, GroupOut, InodeCheck, Scan};
use crate::facts::DirBlock;
use crate::problem::Problem as P;
use crate::report::ProblemCtx;
use ffsck_format::dir::{DxRootInfo, DX_ROOT_INFO_OFFSET};
use ffsck_format::Incompat;
use zerocopy::FromBytes;

/// Validate the htree root of a directory (block 0) as pass 1 does in e2fsck.
pub(super) fn htree_root_ok(
    scan: &Scan,
    ic: &mut InodeCheck,
    out: &mut GroupOut,
    w: &BlockWalk,
) -> bool {
    let fs = scan.fs;
    let ino = ic.ino;
    let Some(b0) = w.dir_blocks.iter().find(|d| d.lblk == 0) else {
        report(scan, out, ic, P::P1_HTREE_BADROOT, ProblemCtx::ino(ino));
        return false;
    };
    let Some(buf) = fs.read_block(b0.pblk) else {
        report(scan, out, ic, P::P1_HTREE_BADROOT, ProblemCtx::ino(ino));
        return false;
    };
    let Ok((info, _)) = DxRootInfo::read_from_prefix(&buf[DX_ROOT_INFO_OFFSET..]) else {
        return false;
    };
    let ctx = ProblemCtx::ino(ino);
    if info.reserved_zero.get() != 0 || info.info_length != 8 {
        report(scan, out, ic, P::P1_HTREE_BADROOT, ctx);
        return false;
    }
    if info.hash_version > ffsck_format::dir::hash::SIPHASH {
        report(
            scan,
            out,
            ic,
            P::P1_HTREE_HASHV,
            ProblemCtx {
                ino,
                num: u64::from(info.hash_version),
                ..Default::default()
            },
        );
        return false;
    }
    if info.unused_flags & 1 != 0 {
        report(scan, out, ic, P::P1_HTREE_INCOMPAT, ctx);
        return false;
    }
    let max_levels = if fs.geo.incompat.has(Incompat::LARGEDIR) {
        3
    } else {
        2
    };
    if info.indirect_levels >= max_levels {
        report(
            scan,
            out,
            ic,
            P::P1_HTREE_DEPTH,
            ProblemCtx {
                ino,
                num: u64::from(info.indirect_levels),
                ..Default::default()
            },
        );
        return false;
    }
    true
}

/// The unmapped logical blocks of a directory below its highest mapped one, as `pblk == 0`
/// entries for pass 2 to report. A block-mapped directory always has a block 0 (e2fsck
/// visits it even when unmapped); an extent-mapped one only fills gaps between extents.
pub(super) fn dir_holes(
    blocks: &[DirBlock],
    ino: u32,
    block_mapped: bool,
    geo: &ffsck_format::Geometry,
) -> Vec<DirBlock> {
    let mut lblks: Vec<u32> = blocks.iter().map(|d| d.lblk).collect();
    lblks.sort_unstable();
    lblks.dedup();
    // Bound the list by the largest directory the file system allows.
    let limit = if geo.incompat.has(Incompat::LARGEDIR) {
        geo.blocks_count
    } else {
        dir_block_limit(geo) + 1
    };
    let limit = u32::try_from(limit).unwrap_or(u32::MAX);
    if lblks.last().is_some_and(|&l| l >= limit) {
        // A block past the limit was reported as too big in pass 1; e2fsck lists no holes
        // for such a directory (and filling them would be unbounded work).
        return Vec::new();
    }
    let mut holes = Vec::new();
    let mut next = 0u32;
    for &l in &lblks {
        for h in next..l.min(limit) {
            holes.push(DirBlock {
                pblk: 0,
                ino,
                lblk: h,
            });
        }
        next = next.max(l.saturating_add(1));
    }
    if lblks.is_empty() && block_mapped {
        holes.push(DirBlock {
            pblk: 0,
            ino,
            lblk: 0,
        });
    }
    holes
}
