//! A new internal journal, made once the check is clean after an unusable journal was dropped
//! (e2fsck's "Recreate journal"): the size mke2fs would pick for the file system, blocks taken
//! free where libext2fs takes them (extents from about the middle of the disk, block maps from
//! the first group), mapped by extents or by a block map with indirect blocks, an empty jbd2 v2 superblock in the first block, inode 8 and the superblock's
//! journal fields (with the backup of the block map) filled in. The caller rebuilds the
//! bitmaps and counts from the allocation facts this marks.

use super::extent_tree;
use super::features::edit_super;
use super::inode::edit;
use crate::bitmap::Bitmap;
use crate::engine::AllocFacts;
use crate::pass0::Pass0Facts;
use ffsck_format::inode::{flags, mode};
use ffsck_format::journal::{blocktype, JournalSuperblock, JBD2_MAGIC_NUMBER, MIN_JOURNAL_BLOCKS};
use ffsck_format::{ino, Compat, Incompat};
use ffsck_io::Device;
use zerocopy::{FromZeros, IntoBytes};

/// Blocks of an extent (initialised extents stop at 2^15 blocks).
const MAX_EXTENT: u64 = 32768;
/// Entries an extent root in the inode holds.
const ROOT_ENTRIES: usize = 4;
/// A journal up to this size is zeroed, as e2fsck does; a bigger one is left lazily
/// initialised (as `mke2fs -E lazy_journal_init`): the overlay stages writes in memory, and an
/// empty journal (`s_start == 0`) is never replayed whatever its blocks hold.
const ZERO_LIMIT_BYTES: u64 = 64 << 20;
/// The fast-commit area is this fraction of the log (`EXT2_JOURNAL_TO_FC_BLKS_RATIO`).
const FC_RATIO: u32 = 64;
/// `s_jnl_backup_type`: the superblock keeps a copy of the journal inode's block map.
const JNL_BACKUP_BLOCKS: u8 = 1;

/// Log and fast-commit blocks of a new journal for a file system of `blocks` blocks (the
/// sizes mke2fs picks), or `None` when the file system is too small for one.
pub fn size(blocks: u64, fast_commit: bool) -> Option<(u32, u32)> {
    let log = match blocks {
        b if b < 2048 => return None,
        b if b < 32 << 10 => 1024,
        b if b < 256 << 10 => 4096,
        b if b < 512 << 10 => 8192,
        b if b < 4 << 20 => 16384,
        b if b < 8 << 20 => 32768,
        b if b < 16 << 20 => 65536,
        b if b < 32 << 20 => 131072,
        _ => 262144,
    };
    Some((log, if fast_commit { log / FC_RATIO } else { 0 }))
}

/// Why a journal could not be made (e2fsck's words, for the output).
pub const NO_SPACE: &str =
    "Could not allocate block in ext2 filesystem: while trying to create journal";
const TOO_SMALL: &str = "Journal must be at least 1024 blocks: while trying to create journal";
const UNSUPPORTED: &str =
    "Operation not supported for inodes containing extents: while trying to create journal";

/// Indirect blocks to write: each block's number and contents.
pub(super) type Tables = Vec<(u64, Vec<u8>)>;

/// A block map of `blocks` (logical block `i` is `blocks[i]`), its indirect blocks taken
/// free in `used` from `first` on (and marked there): the `i_block` words and the indirect
/// blocks to write. `None` when there is no room.
pub(super) fn map_given(
    used: &mut Bitmap,
    first: u64,
    end: u64,
    blocks: &[u64],
    bs: usize,
) -> Option<([u8; 60], Tables)> {
    let mut cur = Cursor::new(used, first, first, end, 1);
    let mut given = blocks.iter().copied();
    let mapping = block_map_of(&mut cur, blocks.len() as u64, bs, &mut |_| given.next());
    match mapping {
        Some(Mapping {
            shape: Shape::Blocks { root, tables },
            ..
        }) => Some((root, tables)),
        _ => {
            cur.undo();
            None
        }
    }
}

/// Free blocks taken in disk order from a goal, wrapping once around the file system. On
/// bigalloc a block is taken with its whole cluster: a mapping block gets a cluster of its own,
/// as libext2fs allocates one, and data fills each cluster it opens in logical order, so a
/// logical block's offset in its cluster is its physical block's (the rule the kernel and
/// e2fsck hold a bigalloc file to).
struct Cursor<'a> {
    used: &'a mut Bitmap,
    next: u64,
    first: u64,
    end: u64,
    /// Blocks still to look at: one lap of the file system at most.
    budget: u64,
    /// Blocks per cluster (1 without bigalloc).
    ratio: u64,
    /// The data cluster being filled: its next block and its end.
    fill: Option<(u64, u64)>,
    /// Every block taken (on bigalloc, every block of each cluster taken).
    taken: Vec<u64>,
}

impl<'a> Cursor<'a> {
    fn new(used: &'a mut Bitmap, next: u64, first: u64, end: u64, ratio: u64) -> Self {
        Cursor {
            used,
            next,
            first,
            end,
            budget: end.saturating_sub(first),
            ratio: ratio.max(1),
            fill: None,
            taken: Vec::new(),
        }
    }

    /// A free block for a mapping block (on bigalloc, the first of a free cluster).
    fn take(&mut self) -> Option<u64> {
        if self.ratio > 1 {
            return self.take_cluster();
        }
        while self.budget > 0 {
            self.budget -= 1;
            if self.next >= self.end {
                self.next = self.first;
            }
            let b = self.next;
            self.next += 1;
            if !self.used.get(b) {
                self.used.set(b);
                self.taken.push(b);
                return Some(b);
            }
        }
        None
    }

    /// The next data block of a file mapped from logical block 0 in order.
    fn take_data(&mut self) -> Option<u64> {
        if self.ratio == 1 {
            return self.take();
        }
        if let Some((next, end)) = self.fill {
            if next < end {
                self.fill = Some((next + 1, end));
                return Some(next);
            }
        }
        let c = self.take_cluster()?;
        self.fill = Some((c + 1, c + self.ratio));
        Some(c)
    }

    /// A cluster none of whose blocks is in use, all marked taken; its first block.
    fn take_cluster(&mut self) -> Option<u64> {
        let r = self.ratio;
        // Clusters start at multiples of the ratio (bigalloc has no first data block).
        let align = |b: u64| b.div_ceil(r) * r;
        while self.budget >= r {
            self.budget -= r;
            let mut c = align(self.next);
            if c + r > self.end {
                c = align(self.first);
            }
            self.next = c + r;
            if c + r <= self.end && (c..c + r).all(|b| !self.used.get(b)) {
                for b in c..c + r {
                    self.used.set(b);
                    self.taken.push(b);
                }
                return Some(c);
            }
        }
        None
    }

    /// Give back everything taken (the journal could not be made).
    fn undo(&mut self) {
        for &b in &self.taken {
            self.used.clear(b);
        }
    }
}

/// The first block of the group e2fsck starts a new journal in: the emptiest of the middle
/// group and its neighbours (with flex_bg, from the middle flex group's first group with room).
fn goal(p0: &Pass0Facts) -> u64 {
    let fs = &p0.fs;
    let geo = &fs.geo;
    let count = geo.group_count;
    let free = |g: u32| fs.groups[g as usize].free_blocks_count();
    let half = (geo.blocks_count - geo.first_data_block) / 2;
    let mid = half.saturating_sub(geo.first_data_block) / u64::from(geo.blocks_per_group.max(1));
    let mut group = (mid as u32).min(count - 1);
    let log_flex = fs.sb.s_log_groups_per_flex;
    let flex = 1u32.checked_shl(u32::from(log_flex)).unwrap_or(0);
    let start = if log_flex != 0 && flex != 0 && group > flex {
        group &= !(flex - 1);
        while group < count && free(group) == 0 {
            group += 1;
        }
        if group == count {
            group = 0;
        }
        group
    } else {
        group.saturating_sub(1)
    };
    let end = if group + 1 < count { group + 1 } else { group };
    let mut best = start;
    for g in start + 1..=end {
        if free(g) > free(best) {
            best = g;
        }
    }
    geo.group_first_block(best)
}

/// What the new journal inode maps, ready to be written.
struct Mapping {
    /// Data blocks, in logical order.
    data: Vec<u64>,
    shape: Shape,
}

enum Shape {
    /// `i_block` of a block-mapped inode, and the indirect blocks with their contents.
    Blocks {
        root: [u8; 60],
        tables: Vec<(u64, Vec<u8>)>,
    },
    /// The extents (leaf entries) and the blocks taken for leaves when they need some.
    Extents {
        leaves: Vec<[u8; 12]>,
        nodes: Vec<u64>,
    },
}

impl Mapping {
    /// Mapping blocks besides the data.
    fn meta_blocks(&self) -> u64 {
        match &self.shape {
            Shape::Blocks { tables, .. } => tables.len() as u64,
            Shape::Extents { nodes, .. } => nodes.len() as u64,
        }
    }
}

/// Map `total` blocks with a block map: twelve direct blocks, then single, double and triple
/// indirect blocks, each taken just before the first block it maps.
fn block_map(cur: &mut Cursor, total: u64, bs: usize) -> Option<Mapping> {
    block_map_of(cur, total, bs, &mut |c| c.take())
}

/// Map `total` blocks with a block map: each logical block's data block from `next_data` (in
/// logical order), the indirect blocks taken from `cur` as they are needed.
fn block_map_of(
    cur: &mut Cursor,
    total: u64,
    bs: usize,
    next_data: &mut dyn FnMut(&mut Cursor) -> Option<u64>,
) -> Option<Mapping> {
    let p = (bs / 4) as u64;
    let mut i_block = [0u32; 15];
    let mut meta: Vec<(u64, Vec<u8>)> = Vec::new();
    let mut data = Vec::with_capacity(total as usize);
    // Index in `meta` of the open indirect, double and triple indirect block.
    let (mut ind, mut dind, mut tind) = (0usize, 0usize, 0usize);
    let new_table = |cur: &mut Cursor, meta: &mut Vec<(u64, Vec<u8>)>| -> Option<(usize, u32)> {
        let b = cur.take()?;
        meta.push((b, vec![0u8; bs]));
        Some((meta.len() - 1, u32::try_from(b).ok()?))
    };
    let put = |t: &mut Vec<u8>, slot: u64, b: u32| {
        let o = 4 * slot as usize;
        t[o..o + 4].copy_from_slice(&b.to_le_bytes());
    };
    for l in 0..total {
        if l < 12 {
            let b = next_data(cur)?;
            i_block[l as usize] = u32::try_from(b).ok()?;
            data.push(b);
            continue;
        }
        let mut r = l - 12;
        if r < p {
            if r == 0 {
                let (i, b) = new_table(cur, &mut meta)?;
                ind = i;
                i_block[12] = b;
            }
        } else if r - p < p * p {
            r -= p;
            if r == 0 {
                let (i, b) = new_table(cur, &mut meta)?;
                dind = i;
                i_block[13] = b;
            }
            if r % p == 0 {
                let (i, b) = new_table(cur, &mut meta)?;
                ind = i;
                put(&mut meta[dind].1, r / p, b);
            }
        } else {
            r -= p + p * p;
            if r >= p * p * p {
                return None;
            }
            if r == 0 {
                let (i, b) = new_table(cur, &mut meta)?;
                tind = i;
                i_block[14] = b;
            }
            if r % (p * p) == 0 {
                let (i, b) = new_table(cur, &mut meta)?;
                dind = i;
                put(&mut meta[tind].1, r / (p * p), b);
            }
            if r % p == 0 {
                let (i, b) = new_table(cur, &mut meta)?;
                ind = i;
                put(&mut meta[dind].1, (r / p) % p, b);
            }
        }
        let b = next_data(cur)?;
        put(&mut meta[ind].1, r % p, u32::try_from(b).ok()?);
        data.push(b);
    }
    let mut root = [0u8; 60];
    for (k, w) in i_block.iter().enumerate() {
        root[4 * k..4 * k + 4].copy_from_slice(&w.to_le_bytes());
    }
    Some(Mapping {
        data,
        shape: Shape::Blocks { root, tables: meta },
    })
}

/// Map `total` blocks with extents: the data first, then as many leaf blocks as the extents
/// need when they do not fit in the inode.
fn extents(cur: &mut Cursor, total: u64, bs: usize, csum: bool) -> Option<Mapping> {
    let mut data = Vec::with_capacity(total as usize);
    let mut runs: Vec<(u64, u64, u64)> = Vec::new(); // (lblk, pblk, len)
    for l in 0..total {
        let b = cur.take_data()?;
        data.push(b);
        match runs.last_mut() {
            Some((_, p, n)) if *p + *n == b && *n < MAX_EXTENT => *n += 1,
            _ => runs.push((l, b, 1)),
        }
    }
    let leaves: Vec<[u8; 12]> = runs
        .iter()
        .map(|&(l, p, n)| {
            let mut e = [0u8; 12];
            e[0..4].copy_from_slice(&(l as u32).to_le_bytes());
            e[4..6].copy_from_slice(&(n as u16).to_le_bytes());
            e[6..8].copy_from_slice(&((p >> 32) as u16).to_le_bytes());
            e[8..12].copy_from_slice(&(p as u32).to_le_bytes());
            e
        })
        .collect();
    // As `extent_tree::rebuild` fills leaves: room for the checksum tail when there is one.
    let per_leaf = if csum { (bs - 16) / 12 } else { (bs - 12) / 12 };
    let count = if leaves.len() <= ROOT_ENTRIES {
        0
    } else {
        leaves.len().div_ceil(per_leaf)
    };
    if count > ROOT_ENTRIES {
        return None;
    }
    let nodes = (0..count)
        .map(|_| cur.take())
        .collect::<Option<Vec<u64>>>()?;
    Some(Mapping {
        data,
        shape: Shape::Extents { leaves, nodes },
    })
}

/// A file's new blocks, taken and mapped: what its inode's `i_block` must now say.
pub(super) struct NewFile {
    pub root: [u8; 60],
    mapping: Mapping,
    /// Blocks charged to the file: data and mapping blocks, whole clusters on bigalloc.
    charged: u64,
}

impl NewFile {
    /// Data blocks, in logical order.
    pub fn data(&self) -> &[u64] {
        &self.mapping.data
    }
    /// Blocks the file is charged in `i_blocks`: data and mapping blocks, each cluster whole
    /// on bigalloc.
    pub fn blocks(&self) -> u64 {
        self.charged
    }
}

/// Take `total` free blocks for inode `ino` (generation `gen`) from `start` on, in `facts`,
/// map them by extents or a block map, and write the mapping blocks. `None` (with `facts`
/// as it was) when the space is not there.
#[allow(clippy::too_many_arguments)]
pub(super) fn allocate(
    p0: &Pass0Facts,
    dev: &dyn Device,
    facts: &mut AllocFacts,
    ino: u32,
    gen: u32,
    total: u64,
    start: u64,
    extent_mapped: bool,
) -> Option<NewFile> {
    let fs = &p0.fs;
    let geo = &fs.geo;
    let ratio = u64::from(geo.cluster_ratio.max(1));
    // Bigalloc maps files by extents only.
    if (ratio > 1 && !extent_mapped) || geo.block_size > 65536 {
        return None;
    }
    let bs = fs.block_size();
    let end = geo.blocks_count.min(facts.block_used.len());
    let mut cur = Cursor::new(
        &mut facts.block_used,
        start.max(geo.first_data_block),
        geo.first_data_block.max(1),
        end,
        ratio,
    );
    cur.budget = end;
    let mapping = if extent_mapped {
        extents(&mut cur, total, bs, fs.has_metadata_csum())
    } else {
        block_map(&mut cur, total, bs)
    };
    let Some(mapping) = mapping else {
        cur.undo();
        return None;
    };
    let seed = if fs.has_metadata_csum() {
        ffsck_format::csum::inode_seed(fs.csum_seed, ino, gen)
    } else {
        0
    };
    let root = match &mapping.shape {
        Shape::Blocks { root, tables } => {
            for (b, t) in tables {
                let _ = dev.write_at(t, b * bs as u64);
            }
            *root
        }
        Shape::Extents { leaves, nodes } => {
            match extent_tree::rebuild(fs, dev, seed, leaves, nodes) {
                Some(root) => root,
                None => {
                    cur.undo();
                    return None;
                }
            }
        }
    };
    let charged = cur.taken.len() as u64;
    debug_assert!(charged >= mapping.data.len() as u64 + mapping.meta_blocks());
    Some(NewFile {
        root,
        mapping,
        charged,
    })
}

/// Make the journal: take its blocks in `facts`, write them, inode 8 and the superblock.
/// Returns the journal's size in blocks (for the message) and whether it was made; on failure
/// nothing is written and `facts` is as it was.
pub fn create(
    p0: &Pass0Facts,
    dev: &dyn Device,
    facts: &mut AllocFacts,
) -> (u64, Result<(), &'static str>) {
    let fs = &p0.fs;
    let geo = &fs.geo;
    let Some((log, fc)) = size(geo.blocks_count, geo.compat.has(Compat::FAST_COMMIT)) else {
        return (0, Err(TOO_SMALL));
    };
    let total = u64::from(log) + u64::from(fc);
    if log < MIN_JOURNAL_BLOCKS {
        return (total, Err(TOO_SMALL));
    }
    // Bigalloc needs extents (`allocate` takes whole clusters there).
    if (geo.cluster_ratio > 1 && !geo.incompat.has(Incompat::EXTENTS)) || geo.block_size > 65536 {
        return (total, Err(UNSUPPORTED));
    }
    let bs = fs.block_size();
    let extent_mapped = geo.incompat.has(Incompat::EXTENTS);
    // Block maps are filled from the journal inode's group, as libext2fs allocates them;
    // extents from about the middle of the disk.
    let start = if extent_mapped {
        goal(p0)
    } else {
        geo.group_first_block(0)
    };
    let Some(file) = allocate(p0, dev, facts, ino::JOURNAL, 0, total, start, extent_mapped) else {
        return (total, Err(NO_SPACE));
    };
    let root = file.root;
    write_data(dev, file.data(), bs, &journal_super(p0, log, fc));

    let bytes = total * bs as u64;
    fresh_inode(p0, dev, ino::JOURNAL, &file, bytes, extent_mapped);
    edit_super(dev, |sb| {
        sb.s_feature_compat
            .set(sb.s_feature_compat.get() | Compat::HAS_JOURNAL);
        sb.s_journal_inum.set(ino::JOURNAL);
        sb.s_journal_dev.set(0);
        sb.s_journal_uuid = [0; 16];
        for (k, w) in sb.s_jnl_blocks.iter_mut().take(15).enumerate() {
            w.set(u32::from_le_bytes([
                root[4 * k],
                root[4 * k + 1],
                root[4 * k + 2],
                root[4 * k + 3],
            ]));
        }
        sb.s_jnl_blocks[15].set((bytes >> 32) as u32);
        sb.s_jnl_blocks[16].set(bytes as u32);
        sb.s_jnl_backup_type = JNL_BACKUP_BLOCKS;
    });
    (total, Ok(()))
}

/// Write inode `ino` as a new regular file (mode 0600, one link, made now) of `bytes` bytes
/// that maps `file`.
pub(super) fn fresh_inode(
    p0: &Pass0Facts,
    dev: &dyn Device,
    ino: u32,
    file: &NewFile,
    bytes: u64,
    extent_mapped: bool,
) {
    let now = p0.now.stamp();
    let sectors = file.blocks() * (p0.fs.block_size() as u64 / 512);
    let large = p0.fs.geo.inode_size as usize > ffsck_format::inode::GOOD_OLD_INODE_SIZE;
    edit(p0, dev, ino, |i| {
        i.as_mut_bytes().fill(0);
        i.i_mode.set(mode::S_IFREG | 0o600);
        i.i_links_count.set(1);
        i.i_size_lo.set(bytes as u32);
        i.i_size_high.set((bytes >> 32) as u32);
        i.i_blocks_lo.set(sectors as u32);
        i.l_i_blocks_high.set((sectors >> 32) as u16);
        i.i_atime.set(now);
        i.i_ctime.set(now);
        i.i_mtime.set(now);
        if extent_mapped {
            i.i_flags.set(flags::EXTENTS);
        }
        i.set_block_bytes(&file.root);
        if large {
            // The fields up to the creation time (32 bytes past the classic inode).
            i.i_extra_isize.set(32);
            i.i_crtime.set(now);
        }
    });
}

/// An empty jbd2 v2 superblock for a journal of `log` + `fc` blocks of this file system.
fn journal_super(p0: &Pass0Facts, log: u32, fc: u32) -> JournalSuperblock {
    let mut jsb = JournalSuperblock::new_zeroed();
    jsb.s_header.h_magic.set(JBD2_MAGIC_NUMBER);
    jsb.s_header.h_blocktype.set(blocktype::SUPERBLOCK_V2);
    jsb.s_blocksize.set(p0.fs.geo.block_size);
    jsb.s_maxlen.set(log + fc);
    jsb.s_nr_users.set(1);
    jsb.s_first.set(1);
    jsb.s_sequence.set(1);
    jsb.s_num_fc_blks.set(fc);
    jsb.s_uuid = p0.fs.sb.s_uuid;
    jsb
}

/// Write the journal's blocks: its superblock first, the rest zeroed while that stays small.
fn write_data(dev: &dyn Device, data: &[u64], bs: usize, jsb: &JournalSuperblock) {
    let zero = (data.len() as u64).saturating_mul(bs as u64) <= ZERO_LIMIT_BYTES;
    let mut first = vec![0u8; bs];
    first[..1024].copy_from_slice(jsb.as_bytes());
    if let Some(&b0) = data.first() {
        let _ = dev.write_at(&first, b0 * bs as u64);
    }
    if !zero {
        return;
    }
    // Contiguous runs, written in pieces of at most 1 MiB.
    let chunk = (1 << 20) / bs;
    let zeros = vec![0u8; chunk * bs];
    let mut i = 1;
    while i < data.len() {
        let mut n = 1;
        while i + n < data.len() && n < chunk && data[i + n] == data[i] + n as u64 {
            n += 1;
        }
        let _ = dev.write_at(&zeros[..n * bs], data[i] * bs as u64);
        i += n;
    }
}
