//! Fixes of single inode fields: dtime, size, block count, link count and the checksum,
//! read and written through the overlay so fixes of one inode compose.

use crate::pass0::Pass0Facts;
use crate::problem::{Fixer, Problem as P};
use crate::report::Finding;
use ffsck_format::inode::{flags, mode, RawInode};
use ffsck_format::RoCompat;
use ffsck_io::Device;
use zerocopy::IntoBytes;

/// Apply the inode fixes among `fixes`, in order.
pub fn apply(p0: &Pass0Facts, dev: &dyn Device, fixes: &[&Finding]) {
    let now = p0.now.stamp();
    let huge = p0.fs.geo.ro_compat.has(RoCompat::HUGE_FILE);
    let cloned: std::collections::BTreeSet<u32> = fixes
        .iter()
        .filter(|f| p0.fs.geo.cluster_ratio > 1 && f.problem.fixed_by(Fixer::Clone))
        .map(|f| f.ctx.ino)
        .collect();
    for f in fixes.iter().filter(|f| f.problem.fixed_by(Fixer::Inode)) {
        let (ino, want) = (f.ctx.ino, f.ctx.num2);
        edit(p0, dev, ino, |i| match f.problem {
            P::P1_SET_DTIME | P::P1_ROOT_DTIME => i.i_dtime.set(0),
            P::P1_ZERO_DTIME => i.i_dtime.set(now),
            P::P1_BAD_I_SIZE => {
                i.i_size_lo.set(want as u32);
                i.i_size_high.set((want >> 32) as u32);
            }
            // On bigalloc a file cloned this round has its count set by the clone, which moves
            // misaligned blocks into the clusters the file already has.
            P::P1_BAD_I_BLOCKS if cloned.contains(&ino) => {}
            P::P1_BAD_I_BLOCKS => {
                i.i_blocks_lo.set(want as u32);
                if huge {
                    i.l_i_blocks_high.set((want >> 32) as u16);
                }
            }
            P::P4_BAD_REF_COUNT | P::P4_DIR_OVERFLOW_REF_COUNT => i.i_links_count.set(want as u16),
            // Flags a file of its kind may not have, and a device's size, are dropped.
            P::P1_SET_IMAGIC => clear_flags(i, flags::IMAGIC),
            P::P1_SET_IMMUTABLE => clear_flags(i, flags::IMMUTABLE | flags::APPEND),
            P::P1_SPECIAL_EXTENTS_IDATA => clear_flags(i, flags::EXTENTS | flags::INLINE_DATA),
            P::P1_CASEFOLD_NONDIR | P::P1_CASEFOLD_FEATURE => clear_flags(i, flags::CASEFOLD),
            // A reserved inode has no mode (e2fsck); the journal is a regular file.
            P::P1_RESERVED_BAD_MODE => i.i_mode.set(0),
            P::P1_JOURNAL_BAD_MODE | P::P1_QUOTA_BAD_MODE | P::P1_ORPHAN_FILE_BAD_MODE => {
                i.i_mode.set(mode::S_IFREG)
            }
            // A quota inode the superblock does not name holds nothing.
            P::P1_QUOTA_INODE_NOT_CLEAR | P::P1_ORPHAN_FILE_NOT_CLEAR => i.as_mut_bytes().fill(0),
            P::P1_HTREE_SET | P::P1_HTREE_NODIR => clear_flags(i, flags::INDEX),
            P::P1_FAST_SYMLINK_EXTENT_FL => clear_flags(i, flags::EXTENTS),
            P::P1_UNSET_EXTENT_FL => i.i_flags.set(i.i_flags.get() | flags::EXTENTS),
            P::P1_CLEAR_INLINE_DATA_FOR_EXTENT => clear_flags(i, flags::INLINE_DATA),
            P::P1_MISSING_ENCRYPTION_XATTR => clear_flags(i, flags::ENCRYPT),
            P::P1_CLEAR_EXTENT_FOR_INLINE_DATA => clear_flags(i, flags::EXTENTS),
            P::P1_CLEAR_EXTENT_INLINE_DATA_FLAGS => {
                clear_flags(i, flags::EXTENTS | flags::INLINE_DATA)
            }
            P::P2_FADDR_ZERO => i.i_obso_faddr.set(0),
            P::P1_INLINE_DATA_NO_ATTR => {
                // The inline data is gone with its attribute: an empty file remains.
                i.i_size_lo.set(0);
                i.i_size_high.set(0);
                clear_flags(i, flags::INLINE_DATA);
                i.i_block.iter_mut().for_each(|w| w.set(0));
            }
            P::P1_EXTRA_ISIZE => {
                // Out of range: what the file system wants; merely unaligned: rounded up.
                let max = (p0.fs.geo.inode_size as u16).saturating_sub(128);
                let x = i.i_extra_isize.get();
                let want = match p0.fs.sb.s_want_extra_isize.get() {
                    0 => 32,
                    w => w,
                };
                let fixed = if x < 4 || x > max {
                    want.min(max)
                } else {
                    (x + 3) & !3
                };
                i.i_extra_isize.set(fixed);
            }
            P::P1_TREAT_AS_DIRECTORY => {
                let m = i.i_mode.get();
                i.i_mode.set((m & 0o7777) | mode::S_IFDIR);
            }
            P::P2_FILE_ACL_ZERO | P::P2_FILE_ACL_BAD => {
                i.i_file_acl_lo.set(0);
                i.l_i_file_acl_high.set(0);
            }
            P::P2_I_FILE_ACL_HI_ZERO => i.l_i_file_acl_high.set(0),
            P::P2_BLOCKS_HI_ZERO => i.l_i_blocks_high.set(0),
            P::P2_DIR_SIZE_HIGH_ZERO => i.i_size_high.set(0),
            // The bad-blocks inode: only a block map may be set; with none, the list is empty.
            P::P1_INVALID_BAD_INODE => i.as_mut_bytes()[..128].fill(0),
            P::P1_BADBLOCKS_IN_BADBLOCKS => {
                i.i_links_count.set(0);
                i.i_dtime.set(now);
                clear_flags(i, flags::INLINE_DATA);
                i.i_block.iter_mut().for_each(|w| w.set(0));
            }
            P::P1_SET_NONZSIZE => {
                i.i_size_lo.set(0);
                i.i_size_high.set(0);
            }
            // A dtime that is an orphan-list link: in use again, or deleted now.
            P::P1_LOW_DTIME => i
                .i_dtime
                .set(if i.i_links_count.get() > 0 { 0 } else { now }),
            // The checksum is recomputed below for every edit.
            _ => {}
        });
    }
}

fn clear_flags(i: &mut RawInode, bits: u32) {
    i.i_flags.set(i.i_flags.get() & !bits);
}

// The repairs' inode access, through the ext4 layer (`ext4::inode`), which finds the inode
// from its group and recomputes its checksum on every write.

/// The on-disk bytes of inode `ino` as `dev` has them now, with their offset.
pub(super) fn read_raw(p0: &Pass0Facts, dev: &dyn Device, ino: u32) -> Option<(u64, Vec<u8>)> {
    crate::ext4::inode::read_from(&p0.fs, dev, ino).map(|i| (i.off, i.raw))
}

/// Inode `ino` as `dev` has it now.
pub(super) fn read_inode(p0: &Pass0Facts, dev: &dyn Device, ino: u32) -> Option<RawInode> {
    crate::ext4::inode::read_from(&p0.fs, dev, ino).map(|i| i.parse())
}

/// Read inode `ino`, change it, recompute its checksum and write it back.
pub(super) fn edit(
    p0: &Pass0Facts,
    dev: &dyn Device,
    ino: u32,
    change: impl FnOnce(&mut RawInode),
) {
    crate::ext4::inode::edit(&p0.fs, dev, ino, change);
}

/// Change the on-disk bytes of inode `ino` (all `inode_size` of them), then recompute its
/// checksum.
pub(super) fn edit_raw(
    p0: &Pass0Facts,
    dev: &dyn Device,
    ino: u32,
    change: impl FnOnce(&mut [u8]),
) {
    crate::ext4::inode::edit_raw(&p0.fs, dev, ino, change);
}
