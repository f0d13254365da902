//! An opened file system: the device, the superblock we trust, its geometry and the group
//! descriptors, plus small read helpers that turn I/O results into checked block buffers.

use ffsck_format::{Geometry, RawGroupDesc, RawSuperblock};
use ffsck_io::{Device, IoError};
use std::sync::Arc;

pub struct Fs {
    pub dev: Arc<dyn Device>,
    pub sb: RawSuperblock,
    /// Block number of the superblock in use (0 for the primary at byte 1024).
    pub sb_block: u64,
    pub geo: Geometry,
    pub groups: Vec<RawGroupDesc>,
    /// crc32c seed for metadata checksums (only meaningful with `metadata_csum`).
    pub csum_seed: u32,
}

impl Fs {
    pub fn block_size(&self) -> usize {
        self.geo.block_size as usize
    }
    /// Read one block; `None` when it lies outside the device or the read fails.
    pub fn read_block(&self, blk: u64) -> Option<Vec<u8>> {
        let mut buf = vec![0u8; self.block_size()];
        self.read_blocks_into(blk, &mut buf).ok()?;
        Some(buf)
    }
    /// Hint that the runs of blocks `(first, count)` will be read soon (see
    /// `Device::will_need`).
    pub fn will_need_blocks(&self, runs: &[(u64, u64)]) {
        let bs = u64::from(self.geo.block_size);
        let bytes: Vec<(u64, u64)> = runs
            .iter()
            .filter_map(|&(blk, count)| Some((blk.checked_mul(bs)?, count.checked_mul(bs)?)))
            .collect();
        self.dev.will_need(&bytes);
    }
    /// Read consecutive blocks into `buf` (whose length sets the count).
    pub fn read_blocks_into(&self, blk: u64, buf: &mut [u8]) -> Result<(), IoError> {
        let off = blk
            .checked_mul(u64::from(self.geo.block_size))
            .ok_or(IoError::ShortRead {
                offset: u64::MAX,
                len: buf.len(),
            })?;
        self.dev.read_at(buf, off)
    }
    /// Read `blocks` blocks from `blk` into `buf` (resized to them); a block that cannot be
    /// read is zeros, so one bad block does not hide the rest (inode tables: a zeroed inode
    /// is an unused one).
    pub fn read_blocks_or_zeros(&self, blk: u64, blocks: usize, buf: &mut Vec<u8>) {
        let bs = self.block_size();
        // Every byte is read over (or zeroed below), so the buffer is not cleared first.
        buf.resize(blocks * bs, 0);
        if self.read_blocks_into(blk, buf).is_err() {
            for (i, chunk) in buf.chunks_mut(bs).enumerate() {
                if self.read_blocks_into(blk + i as u64, chunk).is_err() {
                    chunk.fill(0);
                }
            }
        }
    }
    /// Read the on-disk bytes of one inode (`s_inode_size` long); `None` for an inode number
    /// outside the file system or a failed read.
    /// Byte offset of inode `ino` on the device.
    pub fn inode_offset(&self, ino: u32) -> Option<u64> {
        let geo = &self.geo;
        if ino == 0 || ino > geo.inodes_count {
            return None;
        }
        let g = geo.group_of_inode(ino);
        let idx = u64::from((ino - 1) % geo.inodes_per_group);
        self.groups
            .get(g as usize)?
            .inode_table()
            .checked_mul(u64::from(geo.block_size))?
            .checked_add(idx * u64::from(geo.inode_size))
    }
    pub fn read_inode(&self, ino: u32) -> Option<Vec<u8>> {
        let geo = &self.geo;
        let off = self.inode_offset(ino)?;
        let mut buf = vec![0u8; geo.inode_size as usize];
        self.dev.read_at(&mut buf, off).ok()?;
        Some(buf)
    }
    pub fn has_metadata_csum(&self) -> bool {
        self.sb.has_metadata_csum()
    }
    pub fn has_group_csum(&self) -> bool {
        self.sb.has_group_csum()
    }
    /// Inodes of group `g` that the descriptor proves unused (`INODE_UNINIT` or the
    /// `itable_unused` tail), which the scan may skip. Only trusted when the descriptor
    /// checksum is good, as a bad descriptor could otherwise hide live inodes.
    pub fn scannable_inodes(&self, g: u32, desc_ok: bool) -> u32 {
        let ipg = self.geo.inodes_per_group;
        if !self.has_group_csum() || !desc_ok {
            return ipg;
        }
        let gd = &self.groups[g as usize];
        if gd.flags() & ffsck_format::group::BG_INODE_UNINIT != 0 {
            return 0;
        }
        ipg.saturating_sub(gd.itable_unused())
    }
}
