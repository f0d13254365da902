//! Reproducible timestamps for built images: every in-use inode's times set to one value.

use std::os::unix::fs::FileExt;
use std::path::Path;

use anyhow::Result;
use ffsck_format::inode;

use super::image::Image;

/// Sets the access, change and modification times of every in-use inode to `t` (and their
/// nanosecond parts to zero), with checksums recomputed. `mke2fs -d` copies each file's
/// ctime from the host, which no user can set, so reproducible images need this pass.
/// Returns the number of inodes rewritten.
pub fn normalize_times(path: &Path, t: u32) -> Result<u64> {
    let img = Image::open(path)?;
    let geo = &img.geo;
    let isz = geo.inode_size as usize;
    let fs_seed = img.sb.csum_seed();
    let meta = img.sb.has_metadata_csum();
    let mut n = 0u64;
    for g in 0..geo.group_count {
        let gd = img.gd(g)?;
        if gd.flags() & ffsck_format::group::BG_INODE_UNINIT != 0 {
            continue;
        }
        let used = geo.inodes_per_group.saturating_sub(gd.itable_unused()) as usize;
        let off = gd.inode_table() * img.bs;
        let mut table = img.read(off, used * isz)?;
        for (k, raw) in table.chunks_mut(isz).enumerate() {
            if raw[0] == 0 && raw[1] == 0 {
                continue;
            }
            for at in [0x08, 0x0C, 0x10] {
                raw[at..at + 4].copy_from_slice(&t.to_le_bytes());
            }
            let extra = if isz > inode::GOOD_OLD_INODE_SIZE {
                usize::from(u16::from_le_bytes([raw[0x80], raw[0x81]]))
            } else {
                0
            };
            for at in [0x84usize, 0x88, 0x8C] {
                if 0x80 + extra >= at + 4 && at + 4 <= isz {
                    raw[at..at + 4].fill(0);
                }
            }
            if meta {
                let ino = g * geo.inodes_per_group + k as u32 + 1;
                inode::set_inode_checksum(raw, fs_seed, ino);
            }
            n += 1;
        }
        img.file.write_all_at(&table, off)?;
    }
    img.file.sync_all()?;
    Ok(n)
}
