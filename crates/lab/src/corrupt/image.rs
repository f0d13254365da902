//! The image being damaged: an ext2/3/4 file opened for reading and writing, its geometry, the
//! lookups every mode needs (group descriptors, inodes, block maps, directory blocks), and the
//! one logged `write` through which every byte changes.

use std::fs::{File, OpenOptions};
use std::os::unix::fs::FileExt;
use std::path::Path;

use anyhow::{anyhow, bail, Context, Result};
use ffsck_format::{
    dir, inode, inode::RawInode, Geometry, RawGroupDesc, RawSuperblock, SUPERBLOCK_OFFSET,
    SUPERBLOCK_SIZE,
};

use crate::change::{hex, Change};

/// Checksummed structures touched so far, fixed up at the end with `--csum fix`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Dirty {
    Sb,
    Gd(u32),
    Inode(u32),
    /// A directory leaf block (physical block, owning directory).
    DirLeaf(u64, u32),
    /// An htree root or node block (physical block, owning directory, count offset).
    DxNode(u64, u32, usize),
    Xattr(u64),
    Jsb(u64),
    /// An extent-tree block below the root (physical block, owning inode).
    ExtentBlock(u64, u32),
}

/// The image, opened for reading and writing, with its geometry.
pub struct Image {
    pub(super) file: File,
    pub(super) sb: RawSuperblock,
    pub(super) geo: Geometry,
    pub(super) bs: u64,
    pub(super) size: u64,
    pub(super) changes: Vec<Change>,
    pub(super) dirty: Vec<Dirty>,
}

impl Image {
    pub fn open(path: &Path) -> Result<Self> {
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .open(path)
            .with_context(|| format!("opening {}", path.display()))?;
        let size = file.metadata()?.len();
        let mut buf = vec![0u8; SUPERBLOCK_SIZE];
        file.read_exact_at(&mut buf, SUPERBLOCK_OFFSET)
            .context("reading the superblock")?;
        let sb = RawSuperblock::parse(&buf).ok_or_else(|| anyhow!("short superblock"))?;
        let geo = Geometry::new(&sb).map_err(|e| anyhow!("unusable superblock: {e:?}"))?;
        let bs = u64::from(geo.block_size);
        Ok(Image {
            file,
            sb,
            geo,
            bs,
            size,
            changes: Vec::new(),
            dirty: Vec::new(),
        })
    }

    /// Number of block groups.
    pub fn group_count(&self) -> u32 {
        self.geo.group_count
    }

    pub(super) fn read(&self, off: u64, len: usize) -> Result<Vec<u8>> {
        if off
            .checked_add(len as u64)
            .is_none_or(|end| end > self.size)
        {
            bail!("offset {off:#x}+{len} lies beyond the image");
        }
        let mut buf = vec![0u8; len];
        self.file.read_exact_at(&mut buf, off)?;
        Ok(buf)
    }

    pub(super) fn block(&self, b: u64) -> Result<Vec<u8>> {
        if b >= self.geo.blocks_count {
            bail!("block {b} is beyond the file system");
        }
        self.read(b * self.bs, self.bs as usize)
    }

    /// Writes `new` at `off`, logging it; refuses a write that changes nothing.
    pub(super) fn write(&mut self, off: u64, new: &[u8], field: String, role: &str) -> Result<()> {
        let old = self.read(off, new.len())?;
        if old == new {
            if role == "checksum" {
                return Ok(());
            }
            bail!(
                "{field} already holds {}; the change would do nothing",
                hex(&old)
            );
        }
        self.file.write_all_at(new, off)?;
        self.changes.push(Change {
            offset: off,
            field,
            old: hex(&old),
            new: hex(new),
            role: role.into(),
        });
        Ok(())
    }

    pub(super) fn mark(&mut self, d: Dirty) {
        if !self.dirty.contains(&d) {
            self.dirty.push(d);
        }
    }

    pub(super) fn gd_offset(&self, g: u32) -> Result<u64> {
        if g >= self.geo.group_count {
            bail!("group {g} does not exist ({} groups)", self.geo.group_count);
        }
        let dpb = self.geo.descs_per_block;
        Ok(self.geo.desc_block(g / dpb) * self.bs
            + u64::from(g % dpb) * u64::from(self.geo.desc_size))
    }

    pub(super) fn gd(&self, g: u32) -> Result<RawGroupDesc> {
        let ds = self.geo.desc_size as usize;
        Ok(RawGroupDesc::parse(&self.read(self.gd_offset(g)?, ds)?, ds))
    }

    pub(super) fn inode_offset(&self, ino: u32) -> Result<u64> {
        if ino == 0 || ino > self.geo.inodes_count {
            bail!("inode {ino} does not exist");
        }
        let ipg = self.geo.inodes_per_group;
        let g = (ino - 1) / ipg;
        let table = self.gd(g)?.inode_table();
        Ok(table * self.bs + u64::from((ino - 1) % ipg) * u64::from(self.geo.inode_size))
    }

    pub(super) fn inode(&self, ino: u32) -> Result<(Vec<u8>, RawInode)> {
        let raw = self.read(self.inode_offset(ino)?, self.geo.inode_size as usize)?;
        let parsed = RawInode::parse(&raw);
        Ok((raw, parsed))
    }

    pub(super) fn inode_in_use(&self, ino: u32) -> Result<bool> {
        let (_, i) = self.inode(ino)?;
        Ok(i.mode() != 0 && i.links_count() > 0 && i.dtime() == 0)
    }

    /// Physical block of logical block `lblk` of `ino` (extents of any depth, or the direct
    /// and single-indirect block map); `None` for a hole.
    pub(super) fn map_block(&self, ino: u32, lblk: u32) -> Result<Option<u64>> {
        let (_, i) = self.inode(ino)?;
        let root = i.block_bytes();
        if i.flags() & inode::flags::EXTENTS != 0 {
            let mut node = root.to_vec();
            for _ in 0..=ffsck_format::extent::MAX_DEPTH {
                let n = ffsck_format::extent::Node::parse(&node)
                    .map_err(|e| anyhow!("bad extent node of inode {ino}: {e:?}"))?;
                if n.is_leaf() {
                    for k in 0..n.len() {
                        let e = n.extent(k);
                        let (len, _) = e.len();
                        let first = e.ee_block.get();
                        if lblk >= first && lblk - first < len {
                            return Ok(Some(e.start() + u64::from(lblk - first)));
                        }
                    }
                    return Ok(None);
                }
                let next = (0..n.len())
                    .rev()
                    .map(|k| n.index(k))
                    .find(|ix| ix.ei_block.get() <= lblk)
                    .ok_or_else(|| anyhow!("no index covers block {lblk} of inode {ino}"))?;
                node = self.block(next.leaf())?;
            }
            bail!("extent tree of inode {ino} is too deep");
        }
        let ptr = |buf: &[u8], k: usize| -> u64 {
            u64::from(u32::from_le_bytes(
                buf[k * 4..k * 4 + 4].try_into().unwrap(),
            ))
        };
        if lblk < 12 {
            let b = ptr(&root, lblk as usize);
            return Ok((b != 0).then_some(b));
        }
        let per = self.bs / 4;
        if u64::from(lblk - 12) < per {
            let ind = ptr(&root, 12);
            if ind == 0 {
                return Ok(None);
            }
            let b = ptr(&self.block(ind)?, (lblk - 12) as usize);
            return Ok((b != 0).then_some(b));
        }
        bail!("block {lblk} of block-mapped inode {ino} is past the single-indirect range")
    }

    /// Physical block number of block 0 of directory `ino`.
    pub(super) fn dir_block0(&self, ino: u32) -> Result<u64> {
        let (_, i) = self.inode(ino)?;
        if i.file_type() != inode::FileType::Directory {
            bail!("inode {ino} is not a directory");
        }
        self.map_block(ino, 0)?
            .ok_or_else(|| anyhow!("directory {ino} has no block 0"))
    }

    /// (offset in block, header) of every entry of a directory block.
    pub(super) fn entries(&self, block: &[u8]) -> Vec<(usize, dir::DirentHeader)> {
        let mut out = Vec::new();
        let mut off = 0usize;
        while let Some(h) = dir::header_at(block, off, self.geo.block_size) {
            if h.rec_len < 8 || off + h.rec_len as usize > block.len() {
                break;
            }
            out.push((off, h));
            off += h.rec_len as usize;
        }
        out
    }

    pub(super) fn journal_sb_offset(&self) -> Result<u64> {
        let jino = self.sb.s_journal_inum.get();
        if jino == 0 {
            bail!("the file system has no internal journal");
        }
        let b = self
            .map_block(jino, 0)?
            .ok_or_else(|| anyhow!("journal inode has no block 0"))?;
        Ok(b * self.bs)
    }
}

/// How a directory block's checksum is kept: a leaf tail, or a dx tail for an htree root.
pub(super) fn dir_dirty(img: &Image, ino: u32, b: u64) -> Result<Dirty> {
    let (_, i) = img.inode(ino)?;
    let block = img.block(b)?;
    Ok(
        if i.flags() & inode::flags::INDEX != 0 && !dir::has_tail(&block) {
            Dirty::DxNode(b, ino, dir::DX_ROOT_ENTRIES_OFFSET)
        } else {
            Dirty::DirLeaf(b, ino)
        },
    )
}
