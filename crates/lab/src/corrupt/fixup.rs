//! `--csum fix`: recomputes every checksum that covers a byte the corruption changed, through
//! `ffsck_format`'s checksum functions, each fix-up logged like the damage itself.

use anyhow::{anyhow, Result};
use ffsck_format::{
    csum, dir, extent, inode, journal::JournalSuperblock, xattr, RawSuperblock, SUPERBLOCK_OFFSET,
    SUPERBLOCK_SIZE,
};

use super::image::{Dirty, Image};

/// Where an inode keeps the two halves of its checksum (`l_i_checksum_lo`, `i_checksum_hi`).
const INODE_CSUM_LO: u64 = 0x7C;
const INODE_CSUM_HI: u64 = 0x82;

/// The checksum of an htree node whose entry table starts at `count_off`, and where it is
/// stored; `None` when `limit`/`count` leave no room for the tail (nothing to fix then).
/// `ffsck_format::verify::dx_checksum` computes the same sum but also accepts `count > limit`
/// when both fit the block; this keeps the lab's narrower rule, which recorded recipes rely on.
fn dx_checksum(block: &[u8], count_off: usize, seed: u32) -> Option<(usize, u32)> {
    let cl = block.get(count_off..count_off + 4)?;
    let limit = usize::from(u16::from_le_bytes([cl[0], cl[1]]));
    let count = usize::from(u16::from_le_bytes([cl[2], cl[3]]));
    let tail = count_off + limit * 8;
    if count > limit || tail + dir::DX_TAIL_SIZE > block.len() {
        return None;
    }
    let c = csum::ext4_crc32c(seed, &block[..count_off + count * 8]);
    let c = csum::ext4_crc32c(c, &block[tail..tail + 4]);
    Some((tail + 4, csum::ext4_crc32c(c, &[0u8; 4])))
}

impl Image {
    /// Recomputes every checksum touched by the changes so far.
    pub(super) fn fix_checksums(&mut self) -> Result<()> {
        let dirty = std::mem::take(&mut self.dirty);
        let meta = self.sb.has_metadata_csum();
        // Inodes and blocks first, the superblock last (its own fields may have changed).
        for d in &dirty {
            match *d {
                Dirty::Jsb(off) => self.fix_jsb(off)?,
                Dirty::Sb | Dirty::Gd(_) => {}
                _ if meta => self.fix_metadata(d)?,
                _ => {}
            }
        }
        for d in &dirty {
            if let Dirty::Gd(g) = *d {
                self.fix_gd(g)?;
            }
        }
        if dirty.contains(&Dirty::Sb) && meta {
            let sb = RawSuperblock::parse(&self.read(SUPERBLOCK_OFFSET, SUPERBLOCK_SIZE)?)
                .ok_or_else(|| anyhow!("short superblock"))?;
            self.write(
                SUPERBLOCK_OFFSET + 0x3FC,
                &sb.compute_checksum().to_le_bytes(),
                "sb.s_checksum".into(),
                "checksum",
            )?;
        }
        Ok(())
    }

    /// The per-inode seed of the checksums of `ino`'s metadata.
    fn inode_seed(&self, ino: u32) -> Result<u32> {
        let (_, i) = self.inode(ino)?;
        Ok(csum::inode_seed(
            self.sb.csum_seed(),
            ino,
            i.i_generation.get(),
        ))
    }

    /// An inode's or a metadata block's checksum (metadata_csum only).
    fn fix_metadata(&mut self, d: &Dirty) -> Result<()> {
        match *d {
            Dirty::Inode(ino) => {
                let off = self.inode_offset(ino)?;
                let raw = self.read(off, self.geo.inode_size as usize)?;
                let (c, _, has_hi) = inode::inode_checksum(&raw, self.sb.csum_seed(), ino);
                let at = INODE_CSUM_LO;
                let lo = (c as u16).to_le_bytes();
                self.write(
                    off + at,
                    &lo,
                    format!("inode[{ino}].l_i_checksum_lo"),
                    "checksum",
                )?;
                if has_hi {
                    let at = INODE_CSUM_HI;
                    let hi = ((c >> 16) as u16).to_le_bytes();
                    self.write(
                        off + at,
                        &hi,
                        format!("inode[{ino}].i_checksum_hi"),
                        "checksum",
                    )?;
                }
            }
            Dirty::DirLeaf(b, ino) => {
                let block = self.block(b)?;
                if dir::has_tail(&block) {
                    let c = dir::leaf_checksum(&block, self.inode_seed(ino)?);
                    let at = (b + 1) * self.bs - 4;
                    self.write(
                        at,
                        &c.to_le_bytes(),
                        format!("dirblock[{b}].det_checksum"),
                        "checksum",
                    )?;
                }
            }
            Dirty::DxNode(b, ino, count_off) => {
                let block = self.block(b)?;
                if let Some((at, c)) = dx_checksum(&block, count_off, self.inode_seed(ino)?) {
                    let at = b * self.bs + at as u64;
                    self.write(
                        at,
                        &c.to_le_bytes(),
                        format!("dx[{ino}].dt_checksum"),
                        "checksum",
                    )?;
                }
            }
            Dirty::ExtentBlock(b, ino) => {
                let block = self.block(b)?;
                let tail = extent::tail_offset(u16::from_le_bytes([block[4], block[5]]));
                if tail + 4 <= block.len() {
                    let c = csum::ext4_crc32c(self.inode_seed(ino)?, &block[..tail]);
                    let at = b * self.bs + tail as u64;
                    self.write(
                        at,
                        &c.to_le_bytes(),
                        format!("extentblock[{b}].et_checksum"),
                        "checksum",
                    )?;
                }
            }
            Dirty::Xattr(b) => {
                let block = self.block(b)?;
                let c = xattr::block_checksum(&block, self.sb.csum_seed(), b);
                let at = b * self.bs + 0x10;
                self.write(
                    at,
                    &c.to_le_bytes(),
                    format!("xattrblock[{b}].h_checksum"),
                    "checksum",
                )?;
            }
            Dirty::Sb | Dirty::Gd(_) | Dirty::Jsb(_) => {}
        }
        Ok(())
    }

    /// The journal superblock's checksum (journal csum v2/v3), whatever the file system's.
    fn fix_jsb(&mut self, off: u64) -> Result<()> {
        let jsb = JournalSuperblock::parse(&self.read(off, 1024)?)
            .ok_or_else(|| anyhow!("short journal superblock"))?;
        if jsb.has_csum_v2or3() {
            self.write(
                off + 0xFC,
                &jsb.compute_checksum().to_be_bytes(),
                "jsb.s_checksum".into(),
                "checksum",
            )?;
        }
        Ok(())
    }

    /// A group descriptor's checksum (crc16 or crc32c, as the features say).
    fn fix_gd(&mut self, g: u32) -> Result<()> {
        let off = self.gd_offset(g)?;
        let gd = self.gd(g)?;
        if let Some(c) = gd.compute_checksum(&self.sb, g, self.geo.desc_size as usize) {
            self.write(
                off + 0x1E,
                &c.to_le_bytes(),
                format!("gd[{g}].bg_checksum"),
                "checksum",
            )?;
        }
        Ok(())
    }
}
