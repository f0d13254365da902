//! Pass 1 mapping repairs: drop block pointers and extents that cannot be right, as e2fsck
//! answers "Clear" to them. Out-of-range pointers of a block map (and blocks past the largest
//! directory) are zeroed; an inode with too many of them is cleared instead. In an extent tree,
//! leaf entries with an invalid start, length or logical range, or out of order, are removed;
//! index entries whose child is out of range, unreadable or not a node of the right depth are
//! removed with their whole subtree; index starts are made to match their child's first entry;
//! nodes left empty are removed from their parent; node checksums are recomputed.
//!
//! Each inode named by a finding answered yes is walked again with the same rules the check
//! applies, so the rewritten mapping is exactly what the next round's check accepts. `i_size`,
//! `i_blocks`, bitmaps and counts are left to the next round's fixes.

use super::clone::write_node;
use super::inode::edit;
use crate::ext4::blocks::{past_eof_allowed, Visitor, Walk};
use crate::ext4::blocks::{
    Damage, Edit, Edits, Index, Indirect, Mapping, NodeError, NodeInfo, Span, Step,
};
use crate::fs::Fs;
use crate::pass0::Pass0Facts;
use crate::problem::Problem as P;
use crate::report::Finding;
use ffsck_format::inode::{flags as iflags, FileType, RawInode};
use ffsck_format::{ino, Incompat};
use ffsck_io::Device;
use std::collections::{BTreeSet, HashSet};

/// Problems fixed by zeroing pointers of a block map.
fn block_map(p: P) -> bool {
    matches!(
        p,
        P::P1_ILLEGAL_BLOCK_NUM
            | P::P1_INODE_BLOCK_LATCH
            | P::P1_INODE_TOOBIG
            | P::P1_TOOBIG_DIR
            | P::P1_TOOBIG_SYMLINK
            | P::P1_BAD_PRIMARY_SUPERBLOCK
            | P::P1_BAD_PRIMARY_GROUP_DESCRIPTOR
    )
}

/// Problems fixed by rewriting an extent tree.
fn extent(p: P) -> bool {
    matches!(
        p,
        P::P1_EXTENT_BAD_START_BLK
            | P::P1_EXTENT_ENDS_BEYOND
            | P::P1_OUT_OF_ORDER_EXTENTS
            | P::P1_EXTENT_COLLISION
            | P::P1_EXTENT_HEADER_INVALID
            | P::P1_EXTENT_NODE_DEPTH
            | P::P1_EXTENT_LENGTH_ZERO
            | P::P1_EXTENT_END_OUT_OF_BOUNDS
            | P::P1_EXTENT_INDEX_START_INVALID
            | P::P1_EXTENT_ONLY_CSUM_INVALID
            | P::P1_TOOBIG_DIR
            | P::P1_UNINIT_DBLOCK
            | P::P1_COLLAPSE_DBLOCK
    )
}

/// Apply the mapping fixes among `fixes`.
pub fn apply(p0: &Pass0Facts, dev: &dyn Device, fixes: &[&Finding]) {
    let fs = &p0.fs;
    let cleared: BTreeSet<u32> = fixes
        .iter()
        .filter(|f| f.problem == P::P1_TOO_MANY_BAD_BLOCKS)
        .map(|f| f.ctx.ino)
        .filter(|&i| i >= fs.geo.first_ino || i == ino::ROOT)
        .collect();
    let now = p0.now.stamp();
    for &i in &cleared {
        // e2fsck clears the whole inode rather than list more illegal blocks.
        edit(p0, dev, i, |n| {
            n.i_links_count.set(0);
            n.i_flags.set(0);
            n.i_dtime.set(now.max(1));
        });
    }
    let inos: BTreeSet<u32> = fixes
        .iter()
        .filter(|f| block_map(f.problem) || extent(f.problem))
        .map(|f| f.ctx.ino)
        .filter(|&i| i != 0 && i != ino::RESIZE && !cleared.contains(&i))
        .collect();
    // Data blocks taken off a block map by value (the bad-blocks list's primary blocks).
    let unlisted: HashSet<u64> = fixes
        .iter()
        .filter(|f| {
            matches!(
                f.problem,
                P::P1_BAD_PRIMARY_SUPERBLOCK | P::P1_BAD_PRIMARY_GROUP_DESCRIPTOR
            )
        })
        .map(|f| f.ctx.blk)
        .collect();
    // Extent blocks whose checksum alone is wrong: rewritten even when nothing else changes.
    let resum: HashSet<u64> = fixes
        .iter()
        .filter(|f| f.problem == P::P1_EXTENT_ONLY_CSUM_INVALID)
        .map(|f| f.ctx.blk)
        .collect();
    // Extent nodes whose `eh_depth` disagrees with their place in the tree.
    let redepth: HashSet<u64> = fixes
        .iter()
        .filter(|f| f.problem == P::P1_EXTENT_NODE_DEPTH)
        .map(|f| f.ctx.blk)
        .collect();
    // Inodes whose extent flag the inode fixes (after this step) set again: pass 1 walked
    // their `i_block` as the extent tree it is, and so must the edits here (read as a block
    // map, the tree's header words name blocks such as the superblock).
    let extents_back: HashSet<u32> = fixes
        .iter()
        .filter(|f| f.problem == P::P1_UNSET_EXTENT_FL)
        .map(|f| f.ctx.ino)
        .collect();
    let collapse: HashSet<u32> = fixes
        .iter()
        .filter(|f| f.problem == P::P1_COLLAPSE_DBLOCK)
        .map(|f| f.ctx.ino)
        .collect();
    for ino in inos {
        let Some(raw) = fs.read_inode(ino) else {
            continue;
        };
        let inode = RawInode::parse(&raw);
        let is_dir = inode.file_type() == FileType::Directory;
        let mut iblock = inode.block_bytes();
        let changed = if inode.flags() & iflags::EXTENTS != 0 || extents_back.contains(&ino) {
            let seed = if fs.has_metadata_csum() {
                ffsck_format::csum::inode_seed(fs.csum_seed, ino, inode.i_generation.get())
            } else {
                0
            };
            let mut t = Tree {
                fs,
                dev,
                is_dir,
                seed,
                resum: &resum,
                redepth: &redepth,
                collapse: collapse.contains(&ino),
                last_block: None,
                next_lblock: 0,
                edits: Edits::default(),
                frames: Vec::new(),
                pending: None,
                first: None,
                changed: false,
                eof: inode.size().div_ceil(fs.block_size() as u64),
                verity: inode.flags() & iflags::VERITY != 0,
            };
            Walk::over_file(fs, inode.size()).edit_extents(&mut iblock, &mut t);
            let changed = t.changed;
            // An emptied root becomes an empty leaf.
            if changed && iblock[2] == 0 && iblock[3] == 0 {
                iblock[6] = 0;
                iblock[7] = 0;
            }
            changed
        } else {
            let unlisted = if ino == ino::BAD {
                &unlisted
            } else {
                &HashSet::new()
            };
            {
                // A directory's blocks past the limit (without `large_dir`), a symlink's past
                // its first.
                let limit = if is_dir && !fs.geo.incompat.has(Incompat::LARGEDIR) {
                    Some(dir_limit(fs))
                } else if inode.file_type() == FileType::Symlink {
                    Some(0)
                } else {
                    None
                };
                zero_illegal(fs, dev, &mut iblock, limit, unlisted)
            }
        };
        if changed {
            edit(p0, dev, ino, |n| {
                n.set_block_bytes(&iblock);
            });
        }
    }
}

/// Largest logical block a directory may map without `large_dir`.
fn dir_limit(fs: &Fs) -> u64 {
    1u64 << (21 - fs.geo.log_block_size)
}

/// Zero the out-of-range pointers of a block map (and data blocks past `limit`, and
/// data pointers to the blocks of `unlisted`), writing back the indirect blocks changed.
/// Whether `iblock` changed.
fn zero_illegal(
    fs: &Fs,
    dev: &dyn Device,
    iblock: &mut [u8; 60],
    limit: Option<u64>,
    unlisted: &HashSet<u64>,
) -> bool {
    let mut z = Zero {
        fs,
        dev,
        limit,
        unlisted,
        edits: Edits::default(),
        changed: false,
    };
    Walk::over(fs).edit_block_map(iblock, &mut z);
    z.changed
}

/// The block-map edit of `zero_illegal`: a data pointer out of range, past a directory's
/// limit or to an unlisted block, or an indirect pointer out of range, is zeroed.
struct Zero<'a> {
    fs: &'a Fs,
    dev: &'a dyn Device,
    /// The largest logical block the file may map (a directory without `large_dir`, a
    /// symlink).
    limit: Option<u64>,
    unlisted: &'a HashSet<u64>,
    edits: Edits,
    changed: bool,
}

impl Visitor for Zero<'_> {
    fn mapping(&mut self, m: Mapping, _: &mut Span) -> Step {
        let bad = m.pblk != 0
            && (self.limit.is_some_and(|l| m.lblk > l) || self.unlisted.contains(&m.pblk));
        self.edits.push(if bad { Edit::Drop } else { Edit::Keep });
        Step::Go
    }
    fn indirect(&mut self, _: Indirect) -> Step {
        self.edits.push(Edit::Keep);
        Step::Go
    }
    fn damage(&mut self, d: Damage) -> Step {
        match d {
            Damage::DataOutOfRange(_) | Damage::IndirectOutOfRange(_) => {
                self.edits.push(Edit::Drop);
            }
            _ => {}
        }
        Step::Skip
    }
    fn enter(&mut self, _: Option<u64>) {
        self.edits.enter();
    }
    fn rewrite(&mut self, pblk: Option<u64>, buf: &mut [u8]) {
        let changed = self.edits.apply_pointers(buf);
        match pblk {
            None => self.changed = changed,
            Some(b) if changed => {
                let _ = self
                    .dev
                    .write_at(buf, b * u64::from(self.fs.geo.block_size));
            }
            Some(_) => {}
        }
    }
}

/// The extent-tree edit: leaf entries the check rejects are removed, index entries whose
/// child is not a node of the right depth (or starts before the entries before it) are
/// removed, children left empty are removed, index starts follow their child's first entry,
/// directory extents are collapsed and marked written as asked; changed nodes (and those whose
/// checksum alone is wrong) are written back.
struct Tree<'a> {
    fs: &'a Fs,
    dev: &'a dyn Device,
    is_dir: bool,
    seed: u32,
    resum: &'a HashSet<u64>,
    /// Nodes given the depth their place implies (`P1_EXTENT_NODE_DEPTH`).
    redepth: &'a HashSet<u64>,
    /// Move each directory extent down to close the gap before it (`P1_COLLAPSE_DBLOCK`).
    collapse: bool,
    /// Last logical block mapped so far, in tree order.
    last_block: Option<u64>,
    /// One past the highest logical block a kept extent maps, across leaves (a lower start
    /// is a duplicate mapping, `P1_EXTENT_COLLISION`).
    next_lblock: u64,
    edits: Edits,
    /// The nodes being walked, from the root down.
    frames: Vec<Frame>,
    /// The index entry whose child is about to be entered.
    pending: Option<Index>,
    /// The first logical block of that child, when it differs from the entry's start.
    first: Option<u64>,
    /// Whether the root changed.
    changed: bool,
    /// The file's end in blocks, and whether it is a verity file (`past_eof_allowed`).
    eof: u64,
    verity: bool,
}

/// One node being walked.
struct Frame {
    /// Entries must start at or after this (the previous entry's end).
    next_start: u64,
    /// The end of the logical range its parent gives it.
    hi: u64,
    /// Its distance from the root.
    level: u32,
    /// Its index entry's start (unused for the root).
    start: u64,
    /// The depth its place in the tree implies.
    depth: u16,
}

impl Tree<'_> {
    /// Whether the leaf entry `m` of the node `f` is one the check rejects.
    fn bad(&self, m: &Mapping, f: &Frame) -> bool {
        let geo = &self.fs.geo;
        m.lblk < f.next_start
            || (m.lblk + m.len > f.hi
                && f.level > 0
                && !past_eof_allowed(m.lblk + m.len, self.eof, m.uninit, self.verity))
            || m.len == 0
            || m.pblk + m.len > geo.blocks_count
            || (self.is_dir
                && !geo.incompat.has(Incompat::LARGEDIR)
                && m.lblk + m.len > dir_limit(self.fs))
            || m.lblk < self.next_lblock
    }
}

impl Visitor for Tree<'_> {
    fn mapping(&mut self, m: Mapping, span: &mut Span) -> Step {
        let Some(f) = self.frames.last() else {
            return Step::Go;
        };
        if self.bad(&m, f) {
            self.edits.push(Edit::Drop);
            return Step::Go;
        }
        // As the check: an extent running over the entries after it goes, alone.
        if span.covers_next {
            self.edits.push(Edit::Drop);
            return Step::Go;
        }
        self.next_lblock = self.next_lblock.max(m.lblk + m.len);
        let geo = &self.fs.geo;
        let (mut lblk, len) = (m.lblk, m.len);
        let mut set_lblk = None;
        let next = self.last_block.map_or(0, |l| l + 1);
        // As the check computes it: the next free logical block, kept in step with the
        // physical block inside a cluster.
        let ratio = u64::from(geo.cluster_ratio.max(1));
        let new = if ratio > 1 {
            (next.div_ceil(ratio) * ratio) | (m.pblk % ratio)
        } else {
            next
        };
        if self.collapse && self.is_dir && next < lblk && new != lblk {
            lblk = new;
            set_lblk = Some(lblk as u32);
        }
        if let Some(f) = self.frames.last_mut() {
            f.next_start = lblk + len;
        }
        self.last_block = Some(
            self.last_block
                .map_or(lblk + len - 1, |l| l.max(lblk + len - 1)),
        );
        // A directory's blocks are always written: drop the unwritten mark.
        let set_len = (self.is_dir && m.uninit).then_some(len as u16);
        self.edits.push(if set_lblk.is_none() && set_len.is_none() {
            Edit::Keep
        } else {
            Edit::Set {
                lblk: set_lblk,
                len: set_len,
            }
        });
        Step::Go
    }
    fn index(&mut self, idx: Index, _: &mut Span) -> Step {
        self.edits.push(Edit::Keep);
        self.pending = Some(idx);
        self.first = None;
        Step::Go
    }
    fn node(&mut self, n: NodeInfo) -> Step {
        let (Some(_), Some(idx)) = (n.pblk, self.pending.take()) else {
            self.frames.push(Frame {
                next_start: 0,
                hi: u64::from(u32::MAX) + 1,
                level: 0,
                start: 0,
                depth: n.depth,
            });
            return Step::Go;
        };
        // The index start follows the child's first entry, as e2fsck fixes it.
        let start = self.first.take().unwrap_or(idx.start);
        if self.frames.last().is_some_and(|p| start < p.next_start) {
            self.drop_last();
            return Step::Skip;
        }
        self.frames.push(Frame {
            next_start: start,
            hi: idx.end,
            level: idx.level,
            start: idx.start,
            depth: n.depth,
        });
        Step::Go
    }
    fn damage(&mut self, d: Damage) -> Step {
        match d {
            Damage::DataOutOfRange(_) | Damage::IndexOutOfRange(_) => {
                self.edits.push(Edit::Drop);
                Step::Go
            }
            // Walked, and given its depth in `rewrite`, as the check walks it.
            Damage::BadNode(_, NodeError::Depth { .. }) => Step::Go,
            Damage::BadNode(..) => {
                self.drop_last();
                Step::Skip
            }
            Damage::IndexStart { first, .. } => {
                self.first = Some(first);
                Step::Go
            }
            // Past the read cap or the depth cap the entry is kept as it is.
            Damage::ReadCap | Damage::TooDeep(_) => Step::Skip,
            _ => Step::Go,
        }
    }
    fn enter(&mut self, _: Option<u64>) {
        self.edits.enter();
    }
    fn rewrite(&mut self, pblk: Option<u64>, buf: &mut [u8]) {
        let f = self.frames.pop();
        let changed = self.edits.apply_node(buf);
        let (Some(child), Some(f)) = (pblk, f) else {
            self.changed = changed;
            return;
        };
        if u16::from_le_bytes([buf[2], buf[3]]) == 0 {
            // Nothing left below this entry.
            self.drop_last();
            return;
        }
        let start = first_lblk(buf);
        let redepth =
            self.redepth.contains(&child) && u16::from_le_bytes([buf[6], buf[7]]) != f.depth;
        if redepth {
            buf[6..8].copy_from_slice(&f.depth.to_le_bytes());
        }
        if changed || redepth || self.resum.contains(&child) {
            write_node(self.fs, self.dev, self.seed, child, buf);
        }
        if start != f.start {
            if let Some(e) = self.edits.last() {
                *e = Edit::Set {
                    lblk: Some(start as u32),
                    len: None,
                };
            }
        }
        if let Some(p) = self.frames.last_mut() {
            p.next_start = start.max(p.next_start);
        }
    }
}

impl Tree<'_> {
    /// Remove the index entry whose child is being walked.
    fn drop_last(&mut self) {
        if let Some(e) = self.edits.last() {
            *e = Edit::Drop;
        }
    }
}

/// Logical start of the first entry of a node with at least one entry.
fn first_lblk(buf: &[u8]) -> u64 {
    u64::from(u32::from_le_bytes([buf[12], buf[13], buf[14], buf[15]]))
}
