//! Pass 1's size checks: `i_size` against the last mapped block, and `i_blocks` against
//! the blocks counted by the walk.

use super::blockmap::BlockWalk;
use super::{report, GroupOut, InodeCheck, Scan};
use crate::problem::Problem as P;
use crate::report::ProblemCtx;
use ffsck_format::inode::{flags as iflags, FileType, RawInode};
use ffsck_format::{ino, RoCompat};

pub(super) fn check_sizes(
    scan: &Scan,
    ic: &mut InodeCheck,
    out: &mut GroupOut,
    w: &BlockWalk,
    ft: FileType,
    inline: bool,
) {
    let fs = scan.fs;
    let geo = &fs.geo;
    let inode = ic.inode;
    let ino = ic.ino;
    let bs = u64::from(geo.block_size);
    let size = inode.size();
    let mut final_size = size;
    let is_dir = ft == FileType::Directory;
    if ino == ino::BAD {
        // The bad-blocks list is not a file: e2fsck checks neither its size nor its i_blocks.
        return;
    }

    // An inline directory's size is that of its data: i_block and the value of `system.data`.
    if is_dir && inode.flags() & iflags::INLINE_DATA != 0 {
        if let Some(want) = inline_data_size(ic.raw).filter(|&w| w != size) {
            let ctx = ProblemCtx {
                ino,
                num: size,
                num2: want,
                ..Default::default()
            };
            report(scan, out, ic, P::P1_BAD_I_SIZE, ctx);
        }
    }
    if is_dir && w.num_blocks == 0 && !inline && w.last_block.is_none() {
        report(scan, out, ic, P::P1_ZERO_LENGTH_DIR, ProblemCtx::ino(ino));
        return;
    }
    // A symlink's i_size is judged with its target, not here; an inline directory's above.
    // An inline file maps no block: e2fsck judges its size as a file's, which leaves only
    // the largest size its map could address (none of its blocks is past i_size).
    if !(inline && is_dir) && ft != FileType::Symlink {
        let bad = if is_dir {
            let nblock = size / bs;
            let want = w.last_block.map_or(0, |l| l + 1);
            size & (bs - 1) != 0
                || nblock > want
                || (nblock < want && want - nblock > u64::from(fs.sb.s_prealloc_dir_blocks))
        } else {
            let extents = inode.flags() & iflags::EXTENTS != 0 && scan.extent_fs;
            // Verity files keep their Merkle tree in blocks past i_size.
            let too_small = inode.flags() & iflags::VERITY == 0
                && w.last_init_block
                    .or(if extents { None } else { w.last_block })
                    .is_some_and(|l| size < l * bs);
            let max = if extents {
                (1u64 << (32 + 10 + geo.log_block_size)) - 1
            } else {
                // What direct, indirect, double and triple indirect blocks can address.
                let per = bs / 4;
                (12 + per + per * per + per * per * per).saturating_mul(bs)
            };
            too_small || size > max
        };
        if bad {
            let want = w.last_block.map_or(0, |l| (l + 1) * bs);
            let fixed = report(
                scan,
                out,
                ic,
                P::P1_BAD_I_SIZE,
                ProblemCtx {
                    ino,
                    num: size,
                    num2: want,
                    ..Default::default()
                },
            );
            if fixed {
                final_size = want;
            }
        }
    }
    // e2fsck counts regular files of 2 GiB or more, at their size after the fix above.
    if ft == FileType::Regular && final_size >= 0x8000_0000 {
        out.counts.large_files += 1;
    }
    let huge = geo.ro_compat.has(RoCompat::HUGE_FILE);
    let mut want = w.num_blocks * u64::from(geo.cluster_ratio);
    // (num_blocks is in clusters; i_blocks counts the blocks of those clusters)
    if !(huge && inode.flags() & iflags::HUGE_FILE != 0) {
        want *= bs / 512;
    }
    let have = inode.blocks_raw(huge);
    if have != want {
        report(
            scan,
            out,
            ic,
            P::P1_BAD_I_BLOCKS,
            ProblemCtx {
                ino,
                num: have,
                num2: want,
                ..Default::default()
            },
        );
    }
}

/// The size of an inode's inline data: the 60 bytes of `i_block` and the value of
/// `system.data` in the inode body (none there: nothing more). None when the body's
/// attributes cannot be read.
pub(super) fn inline_data_size(raw: &[u8]) -> Option<u64> {
    const IN_IBLOCK: u64 = 60;
    let inode = RawInode::parse(raw);
    let start = 128 + usize::from(inode.extra_isize());
    let magic = raw
        .get(start..start + 4)
        .map(|m| u32::from_le_bytes([m[0], m[1], m[2], m[3]]));
    if magic != Some(ffsck_format::xattr::IBODY_MAGIC) {
        return Some(IN_IBLOCK);
    }
    ffsck_format::xattr::parse_entries(&raw[start..], 4, 4).ok()?;
    let extra = crate::ext4::inode::inline_data_range(raw).map_or(0, |r| r.len() as u64);
    Some(IN_IBLOCK + extra)
}
