//! Pass 1's checks of special files: device numbers, fast and slow symlinks, and their
//! targets. Pass 2 uses the same rules for the inodes its entries name.

use crate::fs::Fs;
use ffsck_format::extent::Node;
use ffsck_format::inode::{flags as iflags, FileType, RawInode};

/// e2fsck's test for device, fifo and socket inodes: no mapping flags and no stray pointers.
pub(crate) fn device_inode_ok(inode: &RawInode) -> bool {
    let fl = inode.flags();
    if fl & (iflags::INDEX | iflags::EXTENTS) != 0 {
        return false;
    }
    // Only an immutable or append-only device must have the unused block slots zero (the
    // kernel does not always clear them, so e2fsck tolerates them otherwise).
    fl & (iflags::IMMUTABLE | iflags::APPEND) == 0
        || inode.i_block[4..].iter().all(|b| b.get() == 0)
}

/// Whether a symlink's `i_block` maps blocks (libext2fs's guess: with no xattr block, any
/// `i_blocks` means a slow symlink; with one, only the size and `i_block[1]` can tell).
pub(super) fn symlink_uses_i_block(inode: &RawInode) -> bool {
    if inode.file_acl(false) == 0 {
        if inode.i_blocks_lo.get() == 0 {
            return false;
        }
    } else {
        let size = inode.size();
        return size >= 60 || (size > 4 && inode.i_block[1].get() == 0);
    }
    inode.flags() & iflags::INLINE_DATA == 0
}

/// e2fsck 1.47's definition: a symlink whose target (under 60 bytes) lives in `i_block`.
pub(super) fn is_fast_symlink(inode: &RawInode) -> bool {
    inode.file_type() == FileType::Symlink
        && inode.flags() & iflags::INLINE_DATA == 0
        && inode.size() > 0
        && inode.size() < 60
}

pub(crate) fn symlink_ok(fs: &Fs, inode: &RawInode, raw: &[u8]) -> bool {
    let size = inode.size();
    let fl = inode.flags();
    if fl & iflags::INDEX != 0 {
        return false;
    }
    if fl & iflags::INLINE_DATA != 0 {
        // The target fills i_block, then the `system.data` attribute: i_size is all of it.
        if fl & iflags::EXTENTS != 0 {
            return false;
        }
        let Some(extra) = crate::ext4::inode::inline_data(raw) else {
            return false;
        };
        return size > 0 && size == (inode.block_bytes().len() + extra.len()) as u64;
    }
    if is_fast_symlink(inode) {
        if fl & iflags::EXTENTS != 0 {
            return false;
        }
        let b = inode.block_bytes();
        let len = target_len(&b, fl);
        return size > 0 && len < b.len() as u64 && len == size;
    }
    let bs = u64::from(fs.geo.block_size);
    if size == 0 || size >= bs {
        return false;
    }
    // A slow symlink is one block holding the target and a terminating zero.
    let iblock = inode.block_bytes();
    let blk = if fl & iflags::EXTENTS != 0 {
        match Node::parse(&iblock) {
            Ok(n) if n.depth() == 0 && n.len() == 1 => {
                let e = n.extent(0);
                if e.ee_block.get() != 0 || e.len().0 != 1 {
                    return false;
                }
                e.start()
            }
            // Deeper trees are walked by the block check; only the target's length is left.
            Ok(n) if n.depth() > 0 => return true,
            _ => return false,
        }
    } else {
        if iblock[4..].iter().any(|&b| b != 0) {
            return false;
        }
        u64::from(u32::from_le_bytes([
            iblock[0], iblock[1], iblock[2], iblock[3],
        ]))
    };
    if blk < fs.geo.first_data_block || blk >= fs.geo.blocks_count {
        return false;
    }
    let Some(buf) = fs.read_block(blk) else {
        return false;
    };
    let len = target_len(&buf, fl);
    len < bs && len == size
}

/// Length of a symlink target stored in `buf`: up to its terminating zero, or, encrypted, the
/// ciphertext's little-endian length prefix plus the prefix itself.
pub(super) fn target_len(buf: &[u8], flags: u32) -> u64 {
    if flags & iflags::ENCRYPT != 0 {
        return match buf {
            [a, b, ..] => u64::from(u16::from_le_bytes([*a, *b])) + 2,
            _ => u64::MAX,
        };
    }
    buf.iter().position(|&c| c == 0).unwrap_or(buf.len()) as u64
}
