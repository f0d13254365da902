//! Device housekeeping around a check: `-F` (flush the buffer cache first), `-E discard`
//! (after a clean repair run, tell the device which blocks are free) and the superblock
//! feature test `-E unshare_blocks` needs.
//!
//! Discard follows e2fsck's: only when the run found the file system consistent (or made it
//! so), not under -n, not on a mounted file system; free blocks by the block bitmaps on disk
//! (which the run has just verified), through BLKDISCARD on a block device or
//! `fallocate(PUNCH_HOLE)` on an image file. Groups whose block bitmap is uninitialised and
//! bigalloc file systems are left alone, as are unused inode tables (e2fsck also discards
//! those).

use ffsck_format::group::BG_BLOCK_UNINIT;
use ffsck_format::{Geometry, RawGroupDesc, RawSuperblock, RoCompat, SUPERBLOCK_OFFSET};
use ffsck_io::Device;
use std::fs::{File, OpenOptions};
use std::os::fd::AsRawFd;
use std::os::unix::fs::FileTypeExt;
use std::path::Path;

/// BLKFLSBUF, `_IO(0x12, 97)`, and BLKDISCARD, `_IO(0x12, 119)`.
const BLKFLSBUF: u64 = 0x1261;
const BLKDISCARD: u64 = 0x1277;

/// `-F`: write back and drop the kernel's cached blocks of `path` before the check. A block
/// device gets BLKFLSBUF, as from e2fsck; an image file is synced and its cached pages
/// dropped (e2fsck fails there: BLKFLSBUF is a block-device ioctl).
pub fn flush_buffers(path: &Path) -> std::io::Result<()> {
    let f = File::open(path)?;
    let block = f.metadata()?.file_type().is_block_device();
    f.sync_all()?;
    if block {
        // SAFETY: BLKFLSBUF takes no argument; the descriptor is open for the call.
        let r = unsafe { libc::ioctl(f.as_raw_fd(), BLKFLSBUF as _, 0) };
        if r != 0 {
            return Err(std::io::Error::last_os_error());
        }
    } else {
        // SAFETY: an advisory call on an open descriptor; it reads no memory of ours.
        unsafe {
            libc::posix_fadvise(f.as_raw_fd(), 0, 0, libc::POSIX_FADV_DONTNEED);
        }
    }
    Ok(())
}

/// The file system's superblock, if `dev` has one.
fn superblock(dev: &dyn Device) -> Option<RawSuperblock> {
    let mut buf = vec![0u8; 1024];
    dev.read_at(&mut buf, SUPERBLOCK_OFFSET).ok()?;
    RawSuperblock::parse(&buf)
}

/// Does the file system have the `shared_blocks` feature?
pub fn has_shared_blocks(dev: &dyn Device) -> bool {
    superblock(dev).is_some_and(|sb| sb.ro_compat().has(RoCompat::SHARED_BLOCKS))
}

/// Discard one range of bytes; `Ok(false)`: the device does not support it.
fn discard_range(f: &File, block_dev: bool, start: u64, len: u64) -> std::io::Result<bool> {
    let r = if block_dev {
        let range: [u64; 2] = [start, len];
        // SAFETY: BLKDISCARD reads two u64 (start, length) through its argument, which
        // points at a live array; the descriptor is open for the call.
        unsafe { libc::ioctl(f.as_raw_fd(), BLKDISCARD as _, range.as_ptr()) }
    } else {
        let (Ok(s), Ok(l)) = (i64::try_from(start), i64::try_from(len)) else {
            return Ok(false);
        };
        // SAFETY: fallocate on an open descriptor; no memory is passed.
        unsafe {
            libc::fallocate(
                f.as_raw_fd(),
                libc::FALLOC_FL_PUNCH_HOLE | libc::FALLOC_FL_KEEP_SIZE,
                s,
                l,
            )
        }
    };
    if r == 0 {
        return Ok(true);
    }
    let e = std::io::Error::last_os_error();
    match e.raw_os_error() {
        Some(libc::EOPNOTSUPP | libc::ENOTTY | libc::EINVAL) => Ok(false),
        _ => Err(e),
    }
}

/// `-E discard`: discard every free block of the file system on `path` (read through `dev`).
/// Returns the bytes discarded.
pub fn discard_free(path: &Path, dev: &dyn Device) -> std::io::Result<u64> {
    let Some(sb) = superblock(dev) else {
        return Ok(0);
    };
    let Ok(geo) = Geometry::new(&sb) else {
        return Ok(0);
    };
    if geo.cluster_ratio != 1 {
        return Ok(0);
    }
    let f = OpenOptions::new().write(true).open(path)?;
    let block_dev = f.metadata()?.file_type().is_block_device();
    let bs = u64::from(geo.block_size);
    let desc = geo.desc_size as usize;
    let mut block = vec![0u8; bs as usize];
    let mut bitmap = vec![0u8; bs as usize];
    let mut total = 0;
    let mut desc_blk = u64::MAX;
    for g in 0..geo.group_count {
        let i = g / geo.descs_per_block;
        let at = geo.desc_block(i);
        if at != desc_blk {
            if dev.read_at(&mut block, at * bs).is_err() {
                return Ok(total);
            }
            desc_blk = at;
        }
        let off = (g % geo.descs_per_block) as usize * desc;
        let Some(raw) = block.get(off..off + desc) else {
            return Ok(total);
        };
        let gd = RawGroupDesc::parse(raw, desc);
        if gd.flags() & BG_BLOCK_UNINIT != 0 || !geo.is_valid_block(gd.block_bitmap()) {
            continue;
        }
        if dev.read_at(&mut bitmap, gd.block_bitmap() * bs).is_err() {
            continue;
        }
        let first = geo.group_first_block(g);
        let count = (geo.group_last_block(g) - first + 1).min(bs * 8);
        let mut run: Option<u64> = None;
        for bit in 0..=count {
            let free = bit < count && bitmap[(bit / 8) as usize] & (1 << (bit % 8)) == 0;
            match (free, run) {
                (true, None) => run = Some(bit),
                (false, Some(s)) => {
                    let len = (bit - s) * bs;
                    if !discard_range(&f, block_dev, (first + s) * bs, len)? {
                        return Ok(total);
                    }
                    total += len;
                    run = None;
                }
                _ => {}
            }
        }
    }
    Ok(total)
}
