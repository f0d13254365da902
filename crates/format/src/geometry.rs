//! Validated file-system geometry: block and inode sizes, group counts and where each group's
//! fixed metadata (superblock backups, descriptor blocks) lives. Built once from a superblock
//! with every on-disk value range-checked, so callers can index and allocate with it safely.

use crate::features::{Compat, Incompat, RoCompat};
use crate::superblock::RawSuperblock;
use crate::EXT2_MAGIC;
use thiserror::Error;

/// Why a superblock cannot describe a usable file system (each is a pass-0 finding).
#[derive(Debug, Error, Clone, PartialEq, Eq)]
pub enum GeometryError {
    #[error("bad magic number")]
    BadMagic,
    #[error("s_log_block_size {0} is out of range")]
    BadBlockSize(u32),
    #[error("s_log_cluster_size {0} is out of range")]
    BadClusterSize(u32),
    #[error("s_inode_size {0} is invalid")]
    BadInodeSize(u16),
    #[error("s_blocks_per_group {0} is out of range")]
    BadBlocksPerGroup(u32),
    #[error("s_inodes_per_group {0} is out of range")]
    BadInodesPerGroup(u32),
    #[error("s_first_data_block {0} is invalid")]
    BadFirstDataBlock(u32),
    #[error("block count {0} is invalid")]
    BadBlocksCount(u64),
    #[error("inode count {0} does not match {1} groups of {2}")]
    BadInodesCount(u32, u64, u32),
    #[error("s_desc_size {0} is invalid")]
    BadDescSize(u16),
    #[error("s_first_ino {0} is invalid")]
    BadFirstIno(u32),
    #[error("s_reserved_gdt_blocks {0} is too large")]
    BadReservedGdt(u16),
    #[error("s_first_meta_bg {0} is too large")]
    BadFirstMetaBg(u32),
}

/// Everything about the layout that the passes need, derived and checked.
#[derive(Clone, Debug)]
pub struct Geometry {
    pub block_size: u32,
    pub log_block_size: u32,
    /// Blocks per allocation cluster (1 unless `bigalloc`).
    pub cluster_ratio: u32,
    pub blocks_count: u64,
    pub first_data_block: u64,
    pub blocks_per_group: u32,
    pub clusters_per_group: u32,
    pub inodes_per_group: u32,
    pub inodes_count: u32,
    pub inode_size: u32,
    pub group_count: u32,
    pub desc_size: u32,
    pub descs_per_block: u32,
    /// Blocks holding all group descriptors (without meta_bg).
    pub gdt_blocks: u32,
    pub reserved_gdt_blocks: u32,
    pub first_meta_bg: u32,
    /// `s_first_meta_bg` as stored, possibly past the descriptor blocks: the blocks after each
    /// superblock copy that count as metadata follow the stored value (libext2fs does so).
    pub first_meta_bg_stored: u32,
    pub first_ino: u32,
    pub inode_blocks_per_group: u32,
    pub compat: Compat,
    pub incompat: Incompat,
    pub ro_compat: RoCompat,
    pub backup_bgs: [u32; 2],
}

/// Largest supported block size (64 KiB), as for the kernel.
pub const MAX_BLOCK_LOG: u32 = 6; // 1024 << 6
/// Groups are capped so that per-group tables stay allocatable on hostile images.
pub const MAX_GROUPS: u64 = 1 << 24;

impl Geometry {
    /// Whether block numbers are 64 bits wide (`64bit`): the high halves of descriptor and
    /// inode fields count only then.
    pub fn sixty_four_bit(&self) -> bool {
        self.incompat.has(Incompat::SIXTY_FOUR_BIT)
    }

    pub fn new(sb: &RawSuperblock) -> Result<Self, GeometryError> {
        if sb.s_magic.get() != EXT2_MAGIC {
            return Err(GeometryError::BadMagic);
        }
        let log = sb.s_log_block_size.get();
        if log > MAX_BLOCK_LOG {
            return Err(GeometryError::BadBlockSize(log));
        }
        let block_size = 1024u32 << log;
        let ro_compat = sb.ro_compat();
        let incompat = sb.incompat();
        let compat = sb.compat();
        let cluster_ratio = if ro_compat.has(RoCompat::BIGALLOC) {
            let lc = sb.s_log_cluster_size.get();
            if lc < log || lc - log > 16 || lc > 30 {
                return Err(GeometryError::BadClusterSize(lc));
            }
            1u32 << (lc - log)
        } else {
            1
        };
        let inode_size = if sb.s_rev_level.get() == 0 {
            128
        } else {
            u32::from(sb.s_inode_size.get())
        };
        if inode_size < 128 || inode_size > block_size || !inode_size.is_power_of_two() {
            return Err(GeometryError::BadInodeSize(sb.s_inode_size.get()));
        }
        let bpg = sb.s_blocks_per_group.get();
        let cpg = if cluster_ratio > 1 {
            sb.s_clusters_per_group.get()
        } else {
            bpg
        };
        // A group's block bitmap is one block, so a group covers at most 8 * block_size clusters.
        if cpg == 0
            || cpg > 8 * block_size
            || (cluster_ratio > 1 && u64::from(cpg) * u64::from(cluster_ratio) != u64::from(bpg))
        {
            return Err(GeometryError::BadBlocksPerGroup(bpg));
        }
        if bpg < 8 || !bpg.is_multiple_of(8) {
            return Err(GeometryError::BadBlocksPerGroup(bpg));
        }
        let ipg = sb.s_inodes_per_group.get();
        let inodes_per_block = block_size / inode_size;
        if ipg < inodes_per_block || ipg > 8 * block_size || !ipg.is_multiple_of(8) {
            return Err(GeometryError::BadInodesPerGroup(ipg));
        }
        let fdb = sb.s_first_data_block.get();
        let expected_fdb = if block_size == 1024 && cluster_ratio == 1 {
            1
        } else {
            0
        };
        if fdb != expected_fdb && !(block_size == 1024 && fdb == 0) {
            return Err(GeometryError::BadFirstDataBlock(fdb));
        }
        let blocks_count = sb.blocks_count();
        if blocks_count <= u64::from(fdb) || blocks_count > (1u64 << 48) {
            return Err(GeometryError::BadBlocksCount(blocks_count));
        }
        let group_count = (blocks_count - u64::from(fdb)).div_ceil(u64::from(bpg));
        if group_count > MAX_GROUPS {
            return Err(GeometryError::BadBlocksCount(blocks_count));
        }
        let inodes_count = sb.s_inodes_count.get();
        if u64::from(inodes_count) != group_count * u64::from(ipg) {
            return Err(GeometryError::BadInodesCount(
                inodes_count,
                group_count,
                ipg,
            ));
        }
        let desc_size = if incompat.has(Incompat::SIXTY_FOUR_BIT) {
            u32::from(sb.s_desc_size.get())
        } else {
            32
        };
        if desc_size < 32
            || desc_size > block_size
            || !desc_size.is_power_of_two()
            || (incompat.has(Incompat::SIXTY_FOUR_BIT) && desc_size < 64)
        {
            return Err(GeometryError::BadDescSize(sb.s_desc_size.get()));
        }
        let descs_per_block = block_size / desc_size;
        let gdt_blocks = group_count.div_ceil(u64::from(descs_per_block)) as u32;
        let first_ino = if sb.s_rev_level.get() == 0 {
            crate::ino::GOOD_OLD_FIRST
        } else {
            sb.s_first_ino.get()
        };
        if first_ino < crate::ino::GOOD_OLD_FIRST || first_ino > inodes_count {
            return Err(GeometryError::BadFirstIno(first_ino));
        }
        let reserved_gdt_blocks = u32::from(sb.s_reserved_gdt_blocks.get());
        if reserved_gdt_blocks > block_size / 4 {
            return Err(GeometryError::BadReservedGdt(
                sb.s_reserved_gdt_blocks.get(),
            ));
        }
        // A first_meta_bg past the descriptor blocks is clamped (as libext2fs does when asked to
        // ignore superblock errors): the checker reports it, the layout stays usable.
        let first_meta_bg = sb.s_first_meta_bg.get().min(gdt_blocks);
        Ok(Geometry {
            block_size,
            log_block_size: log,
            cluster_ratio,
            blocks_count,
            first_data_block: u64::from(fdb),
            blocks_per_group: bpg,
            clusters_per_group: cpg,
            inodes_per_group: ipg,
            inodes_count,
            inode_size,
            group_count: group_count as u32,
            desc_size,
            descs_per_block,
            gdt_blocks,
            reserved_gdt_blocks,
            first_meta_bg,
            first_meta_bg_stored: sb.s_first_meta_bg.get(),
            first_ino,
            inode_blocks_per_group: (ipg * inode_size).div_ceil(block_size),
            compat,
            incompat,
            ro_compat,
            backup_bgs: [sb.s_backup_bgs[0].get(), sb.s_backup_bgs[1].get()],
        })
    }

    pub fn group_first_block(&self, g: u32) -> u64 {
        self.first_data_block + u64::from(g) * u64::from(self.blocks_per_group)
    }
    /// Last block of group `g` (the last group may be short).
    pub fn group_last_block(&self, g: u32) -> u64 {
        (self.group_first_block(g) + u64::from(self.blocks_per_group) - 1)
            .min(self.blocks_count - 1)
    }
    pub fn group_of_block(&self, b: u64) -> u32 {
        (b.saturating_sub(self.first_data_block) / u64::from(self.blocks_per_group)) as u32
    }
    pub fn group_of_inode(&self, ino: u32) -> u32 {
        (ino - 1) / self.inodes_per_group
    }
    pub fn is_valid_block(&self, b: u64) -> bool {
        b >= self.first_data_block && b < self.blocks_count
    }

    /// Whether group `g` carries a superblock backup (and old-style descriptor copies).
    pub fn group_has_super(&self, g: u32) -> bool {
        if g == 0 {
            return true;
        }
        if self.compat.has(Compat::SPARSE_SUPER2) {
            return g == self.backup_bgs[0] || g == self.backup_bgs[1];
        }
        if g <= 1 || !self.ro_compat.has(RoCompat::SPARSE_SUPER) {
            return true;
        }
        if g.is_multiple_of(2) {
            return false;
        }
        [3u32, 5, 7].iter().any(|&base| {
            let mut p = base;
            while p < g {
                p = match p.checked_mul(base) {
                    Some(v) => v,
                    None => return false,
                };
            }
            p == g
        })
    }

    /// Block holding group `g`'s superblock copy. The primary always sits at byte 1024, which
    /// is block 1 with 1 KiB blocks even when `s_first_data_block` is 0 (bigalloc).
    pub fn super_block_of_group(&self, g: u32) -> u64 {
        if g == 0 {
            1024 / u64::from(self.block_size)
        } else {
            self.group_first_block(g)
        }
    }

    /// Number of descriptor blocks stored right after a superblock copy (all of them without
    /// meta_bg, the first `s_first_meta_bg` with it).
    pub fn old_desc_blocks(&self) -> u32 {
        if self.incompat.has(Incompat::META_BG) {
            self.first_meta_bg
        } else {
            self.gdt_blocks
        }
    }

    /// Block holding descriptor block `i` of the primary copy (as the kernel locates it).
    pub fn desc_block(&self, i: u32) -> u64 {
        let sb_block = self.super_block_of_group(0);
        if !self.incompat.has(Incompat::META_BG) || i < self.first_meta_bg {
            return sb_block + 1 + u64::from(i);
        }
        // With meta_bg, descriptor block i lives in the first group of its meta group, right
        // after that group's superblock backup if it has one.
        let g = i * self.descs_per_block;
        self.group_first_block(g) + u64::from(self.group_has_super(g))
    }

    /// The blocks of group `g` taken by fixed metadata: superblock copy, descriptor blocks and
    /// reserved GDT blocks. Returned as (first, count) runs.
    pub fn fixed_metadata_runs(&self, g: u32) -> Vec<(u64, u64)> {
        let mut runs = Vec::new();
        let start = self.group_first_block(g);
        let has_super = self.group_has_super(g);
        let sb = self.super_block_of_group(g);
        let mut next = sb;
        if has_super {
            // Everything from the group start to the superblock (the boot block, when a 1 KiB
            // bigalloc group 0 starts at block 0) belongs to it.
            runs.push((start, sb - start + 1));
            next = sb + 1;
            // meta_bg keeps only the first s_first_meta_bg descriptor blocks here; otherwise all
            // of them plus the blocks reserved for online growth follow each superblock copy.
            let old = if self.incompat.has(Incompat::META_BG) {
                u64::from(self.first_meta_bg_stored).min(self.blocks_count.saturating_sub(next))
            } else {
                u64::from(self.gdt_blocks) + u64::from(self.reserved_gdt_blocks)
            };
            if old > 0 {
                runs.push((next, old));
            }
        }
        if self.incompat.has(Incompat::META_BG) {
            let meta = g / self.descs_per_block;
            let idx = g % self.descs_per_block;
            if meta >= self.first_meta_bg
                && (idx == 0 || idx == 1 || idx == self.descs_per_block - 1)
            {
                runs.push((if has_super { next } else { start }, 1));
            }
        }
        runs
    }
}
