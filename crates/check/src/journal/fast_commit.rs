//! Fast-commit replay: after the full jbd2 transactions are replayed, apply the ext4 fast
//! commits that follow the last full commit, as the kernel does at mount and e2fsck before
//! checking.
//!
//! The fast-commit area (the last `s_num_fc_blks` blocks of the journal, one block after the
//! log) holds little-endian tag/length records. A scan first finds how many tags end at a
//! valid tail: the area must start with a head for the expected transaction; every tail must
//! carry that transaction id and the crc32c of the records since the previous tail. Replay then
//! applies only those tags; a bad tail stops replay at the last valid one.
//!
//! Tags applied: `ADD_RANGE`/`DEL_RANGE` edit the inode's extent list, which is written back as
//! a new tree (depth 0, or depth 1 with up to four leaves); `CREAT`/`LINK` add a directory
//! entry (replacing one of the same name), `UNLINK` removes one; `INODE` copies the logged
//! inode except its block map. Block and inode bitmaps, group and superblock counts and their
//! checksums follow. Every operation is idempotent (replaying twice gives the same result).
//!
//! The area is hostile input: records may not run past their block, the walk is bounded by the
//! area, extents are checked against the file system, trees are read to a bounded depth, and
//! an operation that cannot be applied is a finding, never a panic.

use crate::ext4::blocks::{
    BlockReader, Damage, Index, Mapping, NodeError, Span, Step, Visitor, Walk,
};
use crate::fs::Fs;
use crate::journal::Journal;
use crate::problem::Problem as P;
use crate::report::ProblemCtx;
use ffsck_format::csum::{ext4_crc32c, inode_seed};
use ffsck_format::dir::{self, ft};
use ffsck_format::extent::{EXTENT_MAGIC, INIT_MAX_LEN};
use ffsck_format::group::RawGroupDesc;
use ffsck_format::inode::{flags, mode, set_inode_checksum, RawInode};
use ffsck_format::journal::fc_tag;
use ffsck_format::{RawSuperblock, SUPERBLOCK_OFFSET, SUPERBLOCK_SIZE};
use std::collections::{BTreeMap, BTreeSet};
use zerocopy::{FromBytes, IntoBytes};

/// What fast-commit replay did.
#[derive(Clone, Debug, Default)]
pub struct FcStats {
    /// Tags that end at a valid tail (and were replayed).
    pub tags: u32,
    /// Tags after the last valid tail, not replayed.
    pub discarded: u32,
}

/// One mapping of a file: `len` blocks from logical `lblk` at physical `pblk`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Ext {
    lblk: u32,
    len: u32,
    pblk: u64,
    uninit: bool,
}

impl Ext {
    fn end(&self) -> u64 {
        u64::from(self.lblk) + u64::from(self.len)
    }
}

/// A parsed record of the fast-commit area.
struct Tag {
    tag: u16,
    val: Vec<u8>,
}

/// Scan the fast-commit area: the tags up to the last valid tail. `fc_first` is the journal
/// block where the area starts.
fn scan(
    fs: &Fs,
    j: &Journal,
    fc_first: u64,
    tid: u32,
    issues: &mut Vec<(P, ProblemCtx)>,
) -> (Vec<Tag>, u32) {
    let mut tags = Vec::new();
    let mut valid = 0usize;
    let mut crc = 0u32;
    let bs = fs.block_size();
    'blocks: for b in fc_first..j.total_len {
        let Some(buf) = j.read_block(fs, b) else {
            break;
        };
        let mut at = 0usize;
        while at + 4 < bs {
            let tag = u16::from_le_bytes([buf[at], buf[at + 1]]);
            let len = usize::from(u16::from_le_bytes([buf[at + 2], buf[at + 3]]));
            if b == fc_first && at == 0 && tag != fc_tag::HEAD {
                return (Vec::new(), 0);
            }
            if at + 4 + len > bs {
                break 'blocks;
            }
            let rec = &buf[at..at + 4 + len];
            let val = rec[4..].to_vec();
            match tag {
                fc_tag::HEAD => {
                    let ok = len >= 8
                        && u32::from_le_bytes([val[0], val[1], val[2], val[3]]) == 0
                        && u32::from_le_bytes([val[4], val[5], val[6], val[7]]) == tid;
                    if !ok {
                        break 'blocks;
                    }
                    crc = ext4_crc32c(crc, rec);
                }
                fc_tag::TAIL => {
                    if len < 8 {
                        break 'blocks;
                    }
                    crc = ext4_crc32c(crc, &rec[..8]);
                    let t = u32::from_le_bytes([val[0], val[1], val[2], val[3]]);
                    let c = u32::from_le_bytes([val[4], val[5], val[6], val[7]]);
                    if t != tid || c != crc {
                        tags.push(Tag { tag, val });
                        break 'blocks;
                    }
                    crc = 0;
                    tags.push(Tag { tag, val });
                    valid = tags.len();
                    at += 4 + len;
                    continue;
                }
                fc_tag::ADD_RANGE
                | fc_tag::DEL_RANGE
                | fc_tag::CREAT
                | fc_tag::LINK
                | fc_tag::UNLINK
                | fc_tag::INODE
                | fc_tag::PAD => {
                    crc = ext4_crc32c(crc, rec);
                }
                _ => break 'blocks,
            }
            tags.push(Tag { tag, val });
            at += 4 + len;
        }
    }
    let discarded = (tags.len() - valid) as u32;
    if discarded > 0 && valid == 0 {
        issues.push((
            P::P0_JOURNAL_CORRUPTED,
            ProblemCtx {
                num: u64::from(tid),
                str: Some(format!(
                    "the fast commits of transaction {tid} end without a valid tail; \
                     {discarded} records not replayed"
                )),
                ..Default::default()
            },
        ));
    }
    tags.truncate(valid);
    (tags, discarded)
}

/// Replay the fast commits of transaction `tid` found at journal block `fc_first`, on top of
/// the blocks in `writes` (the full-commit replay), adding the blocks it changes to `writes`.
pub fn replay(
    fs: &Fs,
    j: &Journal,
    fc_first: u64,
    tid: u32,
    writes: &mut BTreeMap<u64, Vec<u8>>,
    issues: &mut Vec<(P, ProblemCtx)>,
) -> FcStats {
    let (tags, discarded) = scan(fs, j, fc_first, tid, issues);
    let mut st = FcStats {
        tags: tags.len() as u32,
        discarded,
    };
    if tags.is_empty() {
        return st;
    }
    let mut r = Replayer::new(fs, writes);
    for t in &tags {
        let res = match t.tag {
            fc_tag::ADD_RANGE => r.add_range(&t.val),
            fc_tag::DEL_RANGE => r.del_range(&t.val),
            fc_tag::CREAT | fc_tag::LINK => r.link(&t.val),
            fc_tag::UNLINK => r.unlink(&t.val).map(|_| ()),
            fc_tag::INODE => r.inode(&t.val),
            _ => Ok(()),
        };
        if let Err(why) = res {
            issues.push((
                P::P0_JOURNAL_CORRUPTED,
                ProblemCtx {
                    num: u64::from(tid),
                    str: Some(format!("fast commit of transaction {tid}: {why}")),
                    ..Default::default()
                },
            ));
        }
    }
    r.finish();
    st.tags = tags.len() as u32;
    st
}

/// Reads and writes blocks on top of the replayed log; tracks bitmap changes.
struct Replayer<'a> {
    fs: &'a Fs,
    writes: &'a mut BTreeMap<u64, Vec<u8>>,
    bs: usize,
    /// Block ranges (start, count) whose bitmap bits are to be set (true) or cleared
    /// (false), in order: a later range wins.
    blocks: Vec<(u64, u64, bool)>,
    /// Blocks the ranges may still cover (bounds the work of a hostile area).
    budget: u64,
    inodes: BTreeMap<u32, bool>,
    /// Net change of directories per group.
    dirs: BTreeMap<u32, i64>,
}

type Res = Result<(), String>;

fn le32(v: &[u8], at: usize) -> u32 {
    u32::from_le_bytes([v[at], v[at + 1], v[at + 2], v[at + 3]])
}

impl<'a> Replayer<'a> {
    fn new(fs: &'a Fs, writes: &'a mut BTreeMap<u64, Vec<u8>>) -> Self {
        Replayer {
            fs,
            writes,
            bs: fs.block_size(),
            blocks: Vec::new(),
            budget: fs.geo.blocks_count.saturating_mul(8),
            inodes: BTreeMap::new(),
            dirs: BTreeMap::new(),
        }
    }

    fn block(&self, b: u64) -> Option<Vec<u8>> {
        if let Some(d) = self.writes.get(&b) {
            return Some(d.clone());
        }
        if !self.fs.geo.is_valid_block(b) && b != 0 {
            return None;
        }
        self.fs.read_block(b)
    }

    /// Note that `count` blocks from `start` become used (or free).
    fn mark(&mut self, start: u64, count: u64, used: bool) -> Res {
        if count > self.budget {
            return Err("the fast commits change more blocks than the file system holds".into());
        }
        self.budget -= count;
        self.blocks.push((start, count, used));
        Ok(())
    }

    /// The pending bitmap state of block `b`, if a range covers it.
    fn pending(&self, b: u64) -> Option<bool> {
        self.blocks
            .iter()
            .rev()
            .find(|&&(s, n, _)| b >= s && b - s < n)
            .map(|r| r.2)
    }

    fn put(&mut self, b: u64, data: Vec<u8>) {
        self.writes.insert(b, data);
    }

    /// Inode table block and offset of `ino`.
    fn inode_at(&self, ino: u32) -> Option<(u64, usize)> {
        let off = self.fs.inode_offset(ino)?;
        let bs = self.bs as u64;
        Some((off / bs, (off % bs) as usize))
    }

    fn read_inode(&self, ino: u32) -> Option<Vec<u8>> {
        let (b, at) = self.inode_at(ino)?;
        let isz = self.fs.geo.inode_size as usize;
        self.block(b).map(|d| d[at..at + isz].to_vec())
    }

    fn write_inode(&mut self, ino: u32, raw: &mut [u8]) {
        if self.fs.has_metadata_csum() {
            set_inode_checksum(raw, self.fs.csum_seed, ino);
        }
        let Some((b, at)) = self.inode_at(ino) else {
            return;
        };
        if let Some(mut d) = self.block(b) {
            d[at..at + raw.len()].copy_from_slice(raw);
            self.put(b, d);
        }
    }

    fn check_ino(&self, ino: u32) -> Res {
        if ino == 0 || ino > self.fs.geo.inodes_count {
            return Err(format!("inode {ino} is outside the file system"));
        }
        Ok(())
    }

    /// The extent list and tree blocks of an extent-mapped inode.
    fn extents(&self, raw: &[u8]) -> Result<(Vec<Ext>, Vec<u64>), String> {
        let inode = RawInode::parse(raw);
        if inode.flags() & flags::EXTENTS == 0 {
            return Err("the inode does not use extents".into());
        }
        let mut v = ExtentList {
            out: Vec::new(),
            tree: Vec::new(),
            err: None,
        };
        let geo = &self.fs.geo;
        Walk::new(self, geo.first_data_block, geo.blocks_count)
            .extents(&inode.block_bytes(), &mut v);
        match v.err {
            Some(e) => Err(e),
            None => Ok((v.out, v.tree)),
        }
    }

    /// Write `list` as the inode's extent tree, reusing its old tree blocks; updates i_blocks.
    fn write_tree(&mut self, ino: u32, raw: &mut [u8], list: &[Ext], old_tree: &[u64]) -> Res {
        let bs = self.bs;
        let per_leaf = (bs - 12) / 12;
        let leaves = if list.len() <= 4 {
            0
        } else {
            list.len().div_ceil(per_leaf)
        };
        if leaves > 4 {
            return Err(format!(
                "inode {ino} would need {} extents, more than a depth-1 tree holds",
                list.len()
            ));
        }
        let mut tree: Vec<u64> = old_tree.iter().copied().take(leaves).collect();
        while tree.len() < leaves {
            let goal = list.first().map_or(0, |e| e.pblk);
            let b = self
                .alloc_block(goal)
                .ok_or_else(|| "no free block for an extent leaf".to_string())?;
            self.mark(b, 1, true)?;
            tree.push(b);
        }
        for &b in &old_tree[tree.len().min(old_tree.len())..] {
            self.mark(b, 1, false)?;
        }
        for &b in &tree {
            self.mark(b, 1, true)?;
        }
        let gen = RawInode::parse(raw).i_generation.get();
        let mut iblock = [0u8; 60];
        if leaves == 0 {
            node_header(&mut iblock, list.len(), 4, 0);
            for (i, e) in list.iter().enumerate() {
                put_extent(&mut iblock[12 + i * 12..], e);
            }
        } else {
            node_header(&mut iblock, leaves, 4, 1);
            let max = per_leaf;
            for (k, chunk) in list.chunks(per_leaf).enumerate() {
                let at = 12 + k * 12;
                iblock[at..at + 4].copy_from_slice(&chunk[0].lblk.to_le_bytes());
                iblock[at + 4..at + 8].copy_from_slice(&(tree[k] as u32).to_le_bytes());
                iblock[at + 8..at + 10].copy_from_slice(&((tree[k] >> 32) as u16).to_le_bytes());
                let mut leaf = vec![0u8; bs];
                node_header(&mut leaf, chunk.len(), max, 0);
                for (i, e) in chunk.iter().enumerate() {
                    put_extent(&mut leaf[12 + i * 12..], e);
                }
                if self.fs.has_metadata_csum() {
                    let t = 12 + max * 12;
                    let seed = inode_seed(self.fs.csum_seed, ino, gen);
                    let c = ext4_crc32c(seed, &leaf[..t]);
                    leaf[t..t + 4].copy_from_slice(&c.to_le_bytes());
                }
                self.put(tree[k], leaf);
            }
        }
        raw[40..100].copy_from_slice(&iblock);
        let data: u64 = list.iter().map(|e| u64::from(e.len)).sum();
        self.set_iblocks(raw, data + tree.len() as u64);
        Ok(())
    }

    /// i_blocks from a count of file system blocks (plus an xattr block).
    fn set_iblocks(&self, raw: &mut [u8], mut fs_blocks: u64) {
        let inode = RawInode::parse(raw);
        if inode.file_acl(self.fs.geo.sixty_four_bit()) != 0 {
            fs_blocks += 1;
        }
        let units = if inode.flags() & flags::HUGE_FILE != 0 {
            fs_blocks
        } else {
            fs_blocks * (self.bs as u64 / 512)
        };
        raw[28..32].copy_from_slice(&(units as u32).to_le_bytes());
        raw[116..118].copy_from_slice(&((units >> 32) as u16).to_le_bytes());
    }

    /// A free block (by the bitmaps as replay leaves them), searching from `goal`.
    fn alloc_block(&mut self, goal: u64) -> Option<u64> {
        let geo = &self.fs.geo;
        let n = geo.blocks_count;
        let start = if goal >= geo.first_data_block && goal < n {
            goal
        } else {
            geo.first_data_block
        };
        let span = n - geo.first_data_block;
        for i in 0..span {
            let b = geo.first_data_block + (start - geo.first_data_block + i) % span;
            match self.pending(b) {
                Some(true) => continue,
                Some(false) => return Some(b),
                None if !self.bitmap_bit(b)? => return Some(b),
                None => {}
            }
        }
        None
    }

    /// The block bitmap bit of `b` as the replayed log leaves it; `None` if unreadable.
    fn bitmap_bit(&self, b: u64) -> Option<bool> {
        let geo = &self.fs.geo;
        let g = geo.group_of_block(b);
        let gd = self.desc(g)?;
        if gd.flags() & ffsck_format::group::BG_BLOCK_UNINIT != 0 {
            return Some(true);
        }
        let bit = ((b - geo.group_first_block(g)) / u64::from(geo.cluster_ratio.max(1))) as usize;
        let map = self.block(gd.block_bitmap())?;
        Some(map[bit / 8] & (1 << (bit % 8)) != 0)
    }

    fn desc_at(&self, g: u32) -> (u64, usize) {
        let geo = &self.fs.geo;
        let blk = geo.desc_block(g / geo.descs_per_block);
        (
            blk,
            (g % geo.descs_per_block) as usize * geo.desc_size as usize,
        )
    }

    fn desc(&self, g: u32) -> Option<RawGroupDesc> {
        if g >= self.fs.geo.group_count {
            return None;
        }
        let (blk, at) = self.desc_at(g);
        let d = self.block(blk)?;
        let ds = self.fs.geo.desc_size as usize;
        Some(RawGroupDesc::parse(&d[at..at + ds], ds))
    }

    fn add_range(&mut self, v: &[u8]) -> Res {
        if v.len() < 16 {
            return Err("a short add-range record".into());
        }
        let ino = le32(v, 0);
        self.check_ino(ino)?;
        let raw_len = u16::from_le_bytes([v[8], v[9]]);
        let (len, uninit) = if raw_len > INIT_MAX_LEN {
            (raw_len - INIT_MAX_LEN, true)
        } else {
            (raw_len, false)
        };
        let add = Ext {
            lblk: le32(v, 4),
            len: u32::from(len),
            pblk: u64::from(u16::from_le_bytes([v[10], v[11]])) << 32 | u64::from(le32(v, 12)),
            uninit,
        };
        let geo = &self.fs.geo;
        if add.len == 0
            || add.end() > u64::from(u32::MAX)
            || add.pblk < geo.first_data_block
            || add.pblk + u64::from(add.len) > geo.blocks_count
        {
            return Err(format!(
                "inode {ino}: an added range is outside the file system"
            ));
        }
        self.modify(ino, add, false)
    }

    fn del_range(&mut self, v: &[u8]) -> Res {
        if v.len() < 12 {
            return Err("a short delete-range record".into());
        }
        let ino = le32(v, 0);
        self.check_ino(ino)?;
        let del = Ext {
            lblk: le32(v, 4),
            len: le32(v, 8),
            pblk: 0,
            uninit: false,
        };
        if del.len == 0 {
            return Ok(());
        }
        self.modify(ino, del, true)
    }

    /// Punch `ex`'s logical range out of the inode's mapping and, unless `del`, map it.
    fn modify(&mut self, ino: u32, ex: Ext, del: bool) -> Res {
        let mut raw = self
            .read_inode(ino)
            .ok_or_else(|| format!("cannot read inode {ino}"))?;
        let (list, tree) = self
            .extents(&raw)
            .map_err(|e| format!("inode {ino}: {e}"))?;
        let (lo, hi) = (u64::from(ex.lblk), ex.end());
        let mut out = Vec::with_capacity(list.len() + 2);
        for e in list {
            if e.end() <= lo || u64::from(e.lblk) >= hi {
                out.push(e);
                continue;
            }
            // Free the overlapped part; keep what lies before and after the range.
            let from = lo.max(u64::from(e.lblk));
            let to = hi.min(e.end());
            self.mark(e.pblk + (from - u64::from(e.lblk)), to - from, false)?;
            if u64::from(e.lblk) < lo {
                out.push(Ext {
                    len: (lo - u64::from(e.lblk)) as u32,
                    ..e
                });
            }
            if e.end() > hi {
                let skip = hi - u64::from(e.lblk);
                out.push(Ext {
                    lblk: hi as u32,
                    len: (e.end() - hi) as u32,
                    pblk: e.pblk + skip,
                    uninit: e.uninit,
                });
            }
        }
        if !del {
            out.push(ex);
        }
        out.sort_by_key(|e| e.lblk);
        // Merge neighbours contiguous both logically and physically (and of one kind).
        let mut merged: Vec<Ext> = Vec::with_capacity(out.len());
        for e in out {
            if let Some(p) = merged.last_mut() {
                let max = if e.uninit {
                    u32::from(INIT_MAX_LEN) - 1
                } else {
                    u32::from(INIT_MAX_LEN)
                };
                if p.end() == u64::from(e.lblk)
                    && p.pblk + u64::from(p.len) == e.pblk
                    && p.uninit == e.uninit
                    && p.len + e.len <= max
                {
                    p.len += e.len;
                    continue;
                }
            }
            merged.push(e);
        }
        if !del {
            self.mark(ex.pblk, u64::from(ex.len), true)?;
        }
        self.write_tree(ino, &mut raw, &merged, &tree)?;
        self.write_inode(ino, &mut raw);
        Ok(())
    }

    fn inode(&mut self, v: &[u8]) -> Res {
        if v.len() < 4 + 128 {
            return Err("a short inode record".into());
        }
        let ino = le32(v, 0);
        self.check_ino(ino)?;
        let isz = self.fs.geo.inode_size as usize;
        let fc = &v[4..];
        let mut len = 128;
        if isz > 128 {
            let extra = usize::from(u16::from_le_bytes([fc[128], fc[129]]));
            if extra < 4 || extra > isz - 128 || 128 + extra > fc.len() {
                return Err(format!(
                    "inode {ino}: the logged inode's extra size {extra} is bad"
                ));
            }
            len += extra;
        }
        let mut raw = self
            .read_inode(ino)
            .ok_or_else(|| format!("cannot read inode {ino}"))?;
        let old = RawInode::parse(&raw);
        let was_dir = old.links_count() > 0 && old.mode() & mode::S_IFMT == mode::S_IFDIR;
        let was_used = self.inode_used(ino);
        // Everything but the block map (i_block, 40..100) comes from the log.
        raw[..40].copy_from_slice(&fc[..40]);
        raw[100..len].copy_from_slice(&fc[100..len]);
        let new = RawInode::parse(&raw);
        if new.flags() & flags::INLINE_DATA != 0 {
            raw[40..100].copy_from_slice(&fc[40..100]);
        } else if new.flags() & flags::EXTENTS != 0
            && u16::from_le_bytes([raw[40], raw[41]]) != EXTENT_MAGIC
        {
            let mut iblock = [0u8; 60];
            node_header(&mut iblock, 0, 4, 0);
            raw[40..100].copy_from_slice(&iblock);
        }
        if new.flags() & flags::EXTENTS != 0 {
            if let Ok((list, tree)) = self.extents(&raw) {
                let data: u64 = list.iter().map(|e| u64::from(e.len)).sum();
                self.set_iblocks(&mut raw, data + tree.len() as u64);
            }
        }
        let used = new.links_count() > 0;
        let is_dir = used && new.mode() & mode::S_IFMT == mode::S_IFDIR;
        self.inodes.insert(ino, used);
        let g = self.fs.geo.group_of_inode(ino);
        let d = i64::from(is_dir) - i64::from(was_dir && was_used);
        *self.dirs.entry(g).or_default() += d;
        self.write_inode(ino, &mut raw);
        Ok(())
    }

    fn inode_used(&self, ino: u32) -> bool {
        if let Some(&u) = self.inodes.get(&ino) {
            return u;
        }
        let geo = &self.fs.geo;
        let g = geo.group_of_inode(ino);
        let Some(gd) = self.desc(g) else { return false };
        if gd.flags() & ffsck_format::group::BG_INODE_UNINIT != 0 {
            return false;
        }
        let bit = ((ino - 1) % geo.inodes_per_group) as usize;
        self.block(gd.inode_bitmap())
            .is_some_and(|m| m[bit / 8] & (1 << (bit % 8)) != 0)
    }

    /// (parent, ino, name) of a dentry record.
    fn dentry(&self, v: &[u8]) -> Result<(u32, u32, Vec<u8>), String> {
        if v.len() < 9 || v.len() - 8 > dir::NAME_MAX {
            return Err("a dentry record with a bad name length".into());
        }
        let (parent, ino) = (le32(v, 0), le32(v, 4));
        self.check_ino(parent)?;
        self.check_ino(ino)?;
        Ok((parent, ino, v[8..].to_vec()))
    }

    /// The blocks of directory `parent`, in logical order (from its extent list).
    fn dir_blocks(&self, parent: u32) -> Result<(Vec<u8>, Vec<u64>), String> {
        let raw = self
            .read_inode(parent)
            .ok_or_else(|| format!("cannot read directory {parent}"))?;
        let inode = RawInode::parse(&raw);
        if inode.mode() & mode::S_IFMT != mode::S_IFDIR {
            return Err(format!("inode {parent} is not a directory"));
        }
        let (list, _) = self
            .extents(&raw)
            .map_err(|e| format!("directory {parent}: {e}"))?;
        let nblocks = inode.size() / self.bs as u64;
        let mut out = Vec::new();
        for e in list {
            for k in 0..u64::from(e.len) {
                if u64::from(e.lblk) + k < nblocks && out.len() < 1 << 20 {
                    out.push(e.pblk + k);
                }
            }
        }
        Ok((raw, out))
    }

    fn leaf_csum(&self, parent: u32, gen: u32, buf: &mut [u8]) {
        if self.fs.has_metadata_csum() && dir::has_tail(buf) {
            let seed = inode_seed(self.fs.csum_seed, parent, gen);
            let n = buf.len();
            let c = dir::leaf_checksum(buf, seed);
            buf[n - 4..].copy_from_slice(&c.to_le_bytes());
        }
    }

    /// Remove the entry `name` of `parent` (naming `ino`, or anything when `ino` is 0).
    fn unlink(&mut self, v: &[u8]) -> Result<bool, String> {
        let (parent, ino, name) = self.dentry(v)?;
        self.remove_entry(parent, &name, ino)
    }

    fn remove_entry(&mut self, parent: u32, name: &[u8], ino: u32) -> Result<bool, String> {
        let (raw, blocks) = self.dir_blocks(parent)?;
        let gen = RawInode::parse(&raw).i_generation.get();
        let bsz = self.bs as u32;
        for b in blocks {
            let Some(mut buf) = self.block(b) else {
                continue;
            };
            let mut at = 0usize;
            let mut prev: Option<usize> = None;
            while let Some(h) = dir::header_at(&buf, at, bsz) {
                let rl = h.rec_len as usize;
                if rl < 8 || at + rl > buf.len() {
                    break;
                }
                let n = usize::from(h.name_len);
                if h.inode != 0
                    && (ino == 0 || h.inode == ino)
                    && at + 8 + n <= buf.len()
                    && &buf[at + 8..at + 8 + n] == name
                {
                    match prev {
                        Some(p) => {
                            let pl = dir::header_at(&buf, p, bsz).map_or(0, |h| h.rec_len);
                            let nl = dir::encode_rec_len(pl + rl as u32, bsz);
                            buf[p + 4..p + 6].copy_from_slice(&nl.to_le_bytes());
                        }
                        None => buf[at..at + 4].fill(0),
                    }
                    self.leaf_csum(parent, gen, &mut buf);
                    self.put(b, buf);
                    return Ok(true);
                }
                prev = Some(at);
                at += rl;
            }
        }
        Ok(false)
    }

    fn link(&mut self, v: &[u8]) -> Res {
        let (parent, ino, name) = self.dentry(v)?;
        let raw = self
            .read_inode(ino)
            .ok_or_else(|| format!("cannot read inode {ino}"))?;
        let m = RawInode::parse(&raw).mode() & mode::S_IFMT;
        let ftype = match m {
            mode::S_IFREG => ft::REG,
            mode::S_IFDIR => ft::DIR,
            mode::S_IFCHR => ft::CHRDEV,
            mode::S_IFBLK => ft::BLKDEV,
            mode::S_IFLNK => ft::SYMLINK,
            mode::S_IFIFO => ft::FIFO,
            mode::S_IFSOCK => ft::SOCK,
            _ => return Err(format!("inode {ino} to link has no file type")),
        };
        // An entry of the same name is replaced (replay must be idempotent).
        self.remove_entry(parent, &name, 0)?;
        let (praw, blocks) = self.dir_blocks(parent)?;
        let gen = RawInode::parse(&praw).i_generation.get();
        let bsz = self.bs as u32;
        let need = dir::rec_len_for(name.len()) as usize;
        for b in blocks {
            let Some(mut buf) = self.block(b) else {
                continue;
            };
            let mut at = 0usize;
            while let Some(h) = dir::header_at(&buf, at, bsz) {
                let rl = h.rec_len as usize;
                if rl < 8
                    || at + rl > buf.len()
                    || h.file_type == ft::CSUM_TAIL && h.inode == 0 && rl == dir::TAIL_SIZE
                {
                    break;
                }
                let used = if h.inode == 0 {
                    0
                } else {
                    dir::rec_len_for(usize::from(h.name_len)) as usize
                };
                if rl >= used + need {
                    let new_at = at + used;
                    if used > 0 {
                        let l = dir::encode_rec_len(used as u32, bsz);
                        buf[at + 4..at + 6].copy_from_slice(&l.to_le_bytes());
                    }
                    let l = dir::encode_rec_len((rl - used) as u32, bsz);
                    buf[new_at..new_at + 4].copy_from_slice(&ino.to_le_bytes());
                    buf[new_at + 4..new_at + 6].copy_from_slice(&l.to_le_bytes());
                    buf[new_at + 6] = name.len() as u8;
                    buf[new_at + 7] = if self.fs.sb.s_feature_incompat.get() & 0x2 != 0 {
                        ftype
                    } else {
                        0
                    };
                    buf[new_at + 8..new_at + 8 + name.len()].copy_from_slice(&name);
                    self.leaf_csum(parent, gen, &mut buf);
                    self.put(b, buf);
                    self.clear_index(parent);
                    return Ok(());
                }
                at += rl;
            }
        }
        Err(format!("directory {parent} has no room for a new entry"))
    }

    /// An entry added out of hash order invalidates an htree: the directory is left linear.
    fn clear_index(&mut self, parent: u32) {
        let Some(mut raw) = self.read_inode(parent) else {
            return;
        };
        let f = RawInode::parse(&raw).flags();
        if f & flags::INDEX != 0 {
            raw[32..36].copy_from_slice(&(f & !flags::INDEX).to_le_bytes());
            self.write_inode(parent, &mut raw);
        }
    }

    /// Apply the bitmap changes; recompute the touched groups' counts and checksums and the
    /// superblock's free counts.
    fn finish(&mut self) {
        let geo = self.fs.geo.clone();
        let ratio = u64::from(geo.cluster_ratio.max(1));
        let mut groups: BTreeSet<u32> = BTreeSet::new();
        let ranges = std::mem::take(&mut self.blocks);
        for (start, count, used) in ranges {
            let end = start.saturating_add(count).min(geo.blocks_count);
            let mut b = start.max(geo.first_data_block);
            // One group (one bitmap block) at a time.
            while b < end {
                let g = geo.group_of_block(b);
                let stop = end.min(geo.group_last_block(g) + 1);
                let Some(gd) = self.desc(g) else { break };
                let map_blk = gd.block_bitmap();
                let map = (gd.flags() & ffsck_format::group::BG_BLOCK_UNINIT == 0)
                    .then(|| self.block(map_blk))
                    .flatten();
                if let Some(mut map) = map {
                    let mut changed = false;
                    let first = geo.group_first_block(g);
                    let mut c = b;
                    while c < stop {
                        let bit = ((c - first) / ratio) as usize;
                        let was = map[bit / 8] & (1 << (bit % 8)) != 0;
                        if was != used {
                            map[bit / 8] ^= 1 << (bit % 8);
                            changed = true;
                        }
                        c += ratio;
                    }
                    if changed {
                        self.put(map_blk, map);
                        groups.insert(g);
                    }
                }
                b = stop;
            }
        }
        let inodes = std::mem::take(&mut self.inodes);
        for (ino, used) in inodes {
            let g = geo.group_of_inode(ino);
            let Some(gd) = self.desc(g) else { continue };
            if gd.flags() & ffsck_format::group::BG_INODE_UNINIT != 0 {
                continue;
            }
            let bit = ((ino - 1) % geo.inodes_per_group) as usize;
            let Some(mut map) = self.block(gd.inode_bitmap()) else {
                continue;
            };
            let was = map[bit / 8] & (1 << (bit % 8)) != 0;
            if was != used {
                map[bit / 8] ^= 1 << (bit % 8);
                self.put(gd.inode_bitmap(), map);
                groups.insert(g);
            }
        }
        for (&g, &d) in &self.dirs {
            if d != 0 {
                groups.insert(g);
            }
        }
        // As e2fsck at the end of a fast-commit replay: every group's free counts from its
        // bitmaps, and the superblock's from the groups, whatever the commits touched (the
        // kernel leaves the superblock's counts behind the descriptors').
        groups.extend(0..geo.group_count);
        let ds = geo.desc_size as usize;
        let ipg = geo.inodes_per_group as usize;
        for &g in &groups {
            let Some(mut gd) = self.desc(g) else { continue };
            // Free counts from the bitmaps, as e2fsck recomputes them after replay.
            let clusters =
                ((geo.group_last_block(g) - geo.group_first_block(g)) / ratio + 1) as usize;
            let blocks_uninit = gd.flags() & ffsck_format::group::BG_BLOCK_UNINIT != 0;
            let inodes_uninit = gd.flags() & ffsck_format::group::BG_INODE_UNINIT != 0;
            if !blocks_uninit {
                if let Some(m) = self.block(gd.block_bitmap()) {
                    gd.set_free_blocks_count((clusters - count_bits(&m, clusters)) as u32);
                }
            }
            if !inodes_uninit {
                if let Some(m) = self.block(gd.inode_bitmap()) {
                    gd.set_free_inodes_count((ipg - count_bits(&m, ipg)) as u32);
                    if self.fs.has_group_csum() {
                        let last = (0..ipg.min(m.len() * 8))
                            .rev()
                            .find(|&i| m[i / 8] & (1 << (i % 8)) != 0)
                            .map_or(0, |i| i + 1);
                        gd.set_itable_unused((ipg - last) as u32);
                    }
                }
            }
            let nd = i64::from(gd.used_dirs_count()) + self.dirs.get(&g).copied().unwrap_or(0);
            gd.set_used_dirs_count(nd.max(0) as u32);
            if self.fs.has_metadata_csum() {
                let seed = self.fs.csum_seed;
                let wide = ds >= 64;
                if let Some(m) = self.block(gd.block_bitmap()) {
                    let c = ext4_crc32c(seed, &m[..(geo.clusters_per_group / 8) as usize]);
                    gd.set_block_bitmap_csum(if wide { c } else { c & 0xFFFF });
                }
                if let Some(m) = self.block(gd.inode_bitmap()) {
                    let c = ext4_crc32c(seed, &m[..(geo.inodes_per_group / 8) as usize]);
                    gd.set_inode_bitmap_csum(if wide { c } else { c & 0xFFFF });
                }
            }
            gd.update_checksum(&self.fs.sb, g, ds);
            let (blk, at) = self.desc_at(g);
            if let Some(mut d) = self.block(blk) {
                d[at..at + ds.min(64)].copy_from_slice(&gd.as_bytes()[..ds.min(64)]);
                self.put(blk, d);
            }
        }
        // The superblock's free counts: the sums of the groups' (as e2fsck recomputes them).
        let (mut fb, mut fi) = (0u64, 0u64);
        for g in 0..geo.group_count {
            if let Some(gd) = self.desc(g) {
                fb += u64::from(gd.free_blocks_count()) * ratio;
                fi += u64::from(gd.free_inodes_count());
            }
        }
        let bs = self.bs as u64;
        let sblk = SUPERBLOCK_OFFSET / bs;
        let at = (SUPERBLOCK_OFFSET % bs) as usize;
        let Some(mut d) = self.block(sblk) else {
            return;
        };
        let Ok(mut sb) = RawSuperblock::read_from_bytes(&d[at..at + SUPERBLOCK_SIZE]) else {
            return;
        };
        sb.set_free_blocks_count(fb);
        sb.s_free_inodes_count.set(fi as u32);
        sb.update_checksum();
        d[at..at + SUPERBLOCK_SIZE].copy_from_slice(sb.as_bytes());
        self.put(sblk, d);
    }
}

/// Set bits among the first `n` bits of `map`.
/// The replayer reads mapping blocks through its pending writes.
impl BlockReader for Replayer<'_> {
    fn block_size(&self) -> usize {
        self.bs
    }
    fn read_block_into(&self, blk: u64, buf: &mut [u8]) -> bool {
        match self.block(blk) {
            Some(b) if b.len() == buf.len() => {
                buf.copy_from_slice(&b);
                true
            }
            _ => false,
        }
    }
}

/// Collects an inode's extents and tree blocks; the first damage ends the walk as an error.
struct ExtentList {
    out: Vec<Ext>,
    tree: Vec<u64>,
    err: Option<String>,
}

impl ExtentList {
    fn fail(&mut self, why: String) -> Step {
        self.err = Some(why);
        Step::Stop
    }
}

impl Visitor for ExtentList {
    fn mapping(&mut self, m: Mapping, _: &mut Span) -> Step {
        self.out.push(Ext {
            lblk: m.lblk as u32,
            len: m.len as u32,
            pblk: m.pblk,
            uninit: m.uninit,
        });
        Step::Go
    }
    fn index(&mut self, idx: Index, _: &mut Span) -> Step {
        if self.tree.len() > 4096 {
            return self.fail(format!("an extent index names block {}", idx.child));
        }
        self.tree.push(idx.child);
        Step::Go
    }
    fn damage(&mut self, d: Damage) -> Step {
        match d {
            // Extents are taken as logged; the replay checks the ranges it applies.
            Damage::DataOutOfRange(m) => self.mapping(m, &mut Span::default()),
            Damage::IndexOutOfRange(idx) => {
                self.fail(format!("an extent index names block {}", idx.child))
            }
            Damage::BadNode(idx, NodeError::Unreadable) => {
                self.fail(format!("cannot read extent block {}", idx.child))
            }
            // A child at another depth than expected is still walked (bounded by the cap).
            Damage::BadNode(_, NodeError::Depth { .. }) => Step::Go,
            Damage::BadRoot(_) | Damage::BadNode(..) => {
                self.fail("an extent tree node is corrupt".into())
            }
            Damage::TooDeep(_) | Damage::ReadCap => self.fail("the extent tree is too deep".into()),
            _ => Step::Go,
        }
    }
}

fn count_bits(map: &[u8], n: usize) -> usize {
    let n = n.min(map.len() * 8);
    let whole: usize = map[..n / 8].iter().map(|b| b.count_ones() as usize).sum();
    whole
        + (n / 8 * 8..n)
            .filter(|&i| map[i / 8] & (1 << (i % 8)) != 0)
            .count()
}

fn node_header(buf: &mut [u8], entries: usize, max: usize, depth: u16) {
    buf[0..2].copy_from_slice(&EXTENT_MAGIC.to_le_bytes());
    buf[2..4].copy_from_slice(&(entries as u16).to_le_bytes());
    buf[4..6].copy_from_slice(&(max as u16).to_le_bytes());
    buf[6..8].copy_from_slice(&depth.to_le_bytes());
    buf[8..12].fill(0);
}

fn put_extent(buf: &mut [u8], e: &Ext) {
    buf[0..4].copy_from_slice(&e.lblk.to_le_bytes());
    let len = if e.uninit {
        e.len + u32::from(INIT_MAX_LEN)
    } else {
        e.len
    };
    buf[4..6].copy_from_slice(&(len as u16).to_le_bytes());
    buf[6..8].copy_from_slice(&((e.pblk >> 32) as u16).to_le_bytes());
    buf[8..12].copy_from_slice(&(e.pblk as u32).to_le_bytes());
}
