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
use crate::fs::Fs;
use crate::pass0::Pass0Facts;
use crate::problem::Problem as P;
use crate::report::Finding;
use ffsck_format::extent::{Node, INIT_MAX_LEN};
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
            | P::P1_TOOBIG_DIR
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
            | P::P1_EXTENT_HEADER_INVALID
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
        let changed = if inode.flags() & iflags::EXTENTS != 0 {
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
                reads: fs.geo.blocks_count,
                collapse: collapse.contains(&ino),
                last_block: None,
            };
            let Ok(root) = Node::parse(&iblock) else {
                continue;
            };
            let depth = root.depth();
            let changed = t.node(&mut iblock, depth, 0, u64::from(u32::MAX) + 1, 0);
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
            zero_illegal(fs, dev, &mut iblock, is_dir, unlisted)
        };
        if changed {
            edit(p0, dev, ino, |n| {
                for (k, w) in n.i_block.iter_mut().enumerate() {
                    w.set(u32::from_le_bytes([
                        iblock[4 * k],
                        iblock[4 * k + 1],
                        iblock[4 * k + 2],
                        iblock[4 * k + 3],
                    ]));
                }
            });
        }
    }
}

pub(super) fn word(buf: &[u8], i: usize) -> u64 {
    u64::from(u32::from_le_bytes([
        buf[4 * i],
        buf[4 * i + 1],
        buf[4 * i + 2],
        buf[4 * i + 3],
    ]))
}

/// Largest logical block a directory may map without `large_dir`.
fn dir_limit(fs: &Fs) -> u64 {
    1u64 << (21 - fs.geo.log_block_size)
}

/// Zero the out-of-range pointers of a block map (and directory blocks past the limit, and
/// data pointers to the blocks of `unlisted`).
fn zero_illegal(
    fs: &Fs,
    dev: &dyn Device,
    iblock: &mut [u8; 60],
    is_dir: bool,
    unlisted: &HashSet<u64>,
) -> bool {
    let geo = &fs.geo;
    let toobig =
        |lblk: u64| is_dir && !geo.incompat.has(Incompat::LARGEDIR) && lblk > dir_limit(fs);
    let mut changed = false;
    let mut reads = geo.blocks_count;
    for i in 0..12 {
        let b = word(iblock, i);
        if b != 0 && (!geo.is_valid_block(b) || toobig(i as u64) || unlisted.contains(&b)) {
            iblock[4 * i..4 * i + 4].fill(0);
            changed = true;
        }
    }
    let per = u64::from(geo.block_size / 4);
    let mut base = 12u64;
    for level in 1..=3u32 {
        let i = 11 + level as usize;
        let b = word(iblock, i);
        if b != 0 {
            if !geo.is_valid_block(b) {
                iblock[4 * i..4 * i + 4].fill(0);
                changed = true;
            } else {
                let bad = |lblk: u64, p: u64, level: u32| {
                    !geo.is_valid_block(p)
                        || (level == 1 && (toobig(lblk) || unlisted.contains(&p)))
                };
                prune_indirect(fs, dev, b, level, base, &bad, &mut reads);
            }
        }
        base = base.saturating_add(per.saturating_pow(level));
    }
    changed
}

/// Zero the pointers inside indirect block `blk` at `level` (1: single) that `drop` names
/// (given the first logical block the pointer maps, the pointer and the level of the block
/// holding it), and walk into the valid ones kept. Shared by the pointer fixes and the
/// orphan truncation.
pub(super) fn prune_indirect(
    fs: &Fs,
    dev: &dyn Device,
    blk: u64,
    level: u32,
    base: u64,
    drop: &dyn Fn(u64, u64, u32) -> bool,
    reads: &mut u64,
) {
    let geo = &fs.geo;
    // A hostile map may point many entries at the same block: read no more blocks than the
    // file system has.
    if *reads == 0 {
        return;
    }
    *reads -= 1;
    let Some(mut buf) = fs.read_block(blk) else {
        return;
    };
    let per = buf.len() / 4;
    let span = (per as u64).saturating_pow(level - 1);
    let mut dirty = false;
    for i in 0..per {
        let p = word(&buf, i);
        if p == 0 {
            continue;
        }
        let lblk = base.saturating_add(i as u64 * span);
        if drop(lblk, p, level) {
            buf[4 * i..4 * i + 4].fill(0);
            dirty = true;
        } else if level > 1 && geo.is_valid_block(p) {
            prune_indirect(fs, dev, p, level - 1, lblk, drop, reads);
        }
    }
    if dirty {
        let _ = dev.write_at(&buf, blk * u64::from(geo.block_size));
    }
}

/// Replace the entries of the extent node in `buf` with `kept` (taken from the node itself,
/// so they fit), zero the unused slots up to its capacity and set `eh_entries`.
pub(super) fn set_entries(buf: &mut [u8], kept: &[[u8; 12]]) {
    let max = usize::from(u16::from_le_bytes([buf[4], buf[5]]));
    let end = (12 + 12 * max).min(buf.len());
    let slots = (buf.len().saturating_sub(12) / 12).min(kept.len());
    for (i, e) in kept[..slots].iter().enumerate() {
        buf[12 + 12 * i..24 + 12 * i].copy_from_slice(e);
    }
    buf[(12 + 12 * slots).min(end)..end].fill(0);
    buf[2..4].copy_from_slice(&(slots as u16).to_le_bytes());
}

struct Tree<'a> {
    fs: &'a Fs,
    dev: &'a dyn Device,
    is_dir: bool,
    seed: u32,
    resum: &'a HashSet<u64>,
    /// Node blocks the walk may still read (bounds hostile trees that share nodes).
    reads: u64,
    /// Move each directory extent down to close the gap before it (`P1_COLLAPSE_DBLOCK`).
    collapse: bool,
    /// Last logical block mapped so far, in tree order.
    last_block: Option<u64>,
}

impl Tree<'_> {
    /// Rewrite the node in `buf` (expected at `depth`, covering logical `lo..hi`), keeping only
    /// the entries the check accepts. Returns whether `buf` changed.
    fn node(&mut self, buf: &mut [u8], depth: u16, lo: u64, hi: u64, level: u32) -> bool {
        let geo = &self.fs.geo;
        let (leaf, n) = match Node::parse(buf) {
            Ok(node) => (node.is_leaf(), node.len()),
            Err(_) => return false,
        };
        let entries: Vec<[u8; 12]> = (0..n)
            .map(|i| {
                let mut e = [0u8; 12];
                e.copy_from_slice(&buf[12 + 12 * i..24 + 12 * i]);
                e
            })
            .collect();
        let mut kept: Vec<[u8; 12]> = Vec::with_capacity(n);
        let mut changed = false;
        let mut next_start = lo;
        for (i, e) in entries.iter().enumerate() {
            let lblk = u64::from(u32::from_le_bytes([e[0], e[1], e[2], e[3]]));
            if leaf {
                let raw_len = u16::from_le_bytes([e[4], e[5]]);
                let len = u64::from(if raw_len > INIT_MAX_LEN {
                    raw_len - INIT_MAX_LEN
                } else {
                    raw_len
                });
                let pblk = u64::from(u32::from_le_bytes([e[8], e[9], e[10], e[11]]))
                    | (u64::from(u16::from_le_bytes([e[6], e[7]])) << 32);
                let bad = pblk == 0
                    || !geo.is_valid_block(pblk)
                    || lblk < next_start
                    || (lblk + len > hi && level > 0)
                    || len == 0
                    || pblk + len > geo.blocks_count
                    || (self.is_dir
                        && !geo.incompat.has(Incompat::LARGEDIR)
                        && lblk + len > dir_limit(self.fs));
                if bad {
                    changed = true;
                    continue;
                }
                let mut e = *e;
                let mut lblk = lblk;
                let next = self.last_block.map_or(0, |l| l + 1);
                // As the check computes it: the next free logical block, kept in step with the
                // physical block inside a cluster.
                let ratio = u64::from(geo.cluster_ratio.max(1));
                let new = if ratio > 1 {
                    (next.div_ceil(ratio) * ratio) | (pblk % ratio)
                } else {
                    next
                };
                if self.collapse && self.is_dir && next < lblk && new != lblk {
                    lblk = new;
                    e[0..4].copy_from_slice(&(lblk as u32).to_le_bytes());
                    changed = true;
                }
                next_start = lblk + len;
                self.last_block = Some(
                    self.last_block
                        .map_or(lblk + len - 1, |l| l.max(lblk + len - 1)),
                );
                if self.is_dir && raw_len > INIT_MAX_LEN {
                    // A directory's blocks are always written: drop the unwritten mark.
                    e[4..6].copy_from_slice(&(len as u16).to_le_bytes());
                    changed = true;
                }
                kept.push(e);
            } else {
                let child = u64::from(u32::from_le_bytes([e[4], e[5], e[6], e[7]]))
                    | (u64::from(u16::from_le_bytes([e[8], e[9]])) << 32);
                let end = entries.get(i + 1).map_or(hi, |x| {
                    u64::from(u32::from_le_bytes([x[0], x[1], x[2], x[3]]))
                });
                if self.reads == 0 {
                    kept.push(*e);
                    continue;
                }
                self.reads -= 1;
                let Some(mut cbuf) = self
                    .fs
                    .geo
                    .is_valid_block(child)
                    .then(|| self.fs.read_block(child))
                    .flatten()
                else {
                    changed = true;
                    continue;
                };
                let first = match Node::parse(&cbuf) {
                    Ok(c) if depth > 0 && c.depth() == depth - 1 => {
                        (!c.is_empty()).then(|| first_lblk(&cbuf))
                    }
                    _ => {
                        changed = true;
                        continue;
                    }
                };
                // The index start follows the child's first entry, as e2fsck fixes it.
                let mut start = first.unwrap_or(lblk);
                if start < next_start {
                    changed = true;
                    continue;
                }
                let child_changed = self.node(&mut cbuf, depth - 1, start, end, level + 1);
                if u16::from_le_bytes([cbuf[2], cbuf[3]]) == 0 {
                    // Nothing left below this entry.
                    changed = true;
                    continue;
                }
                start = first_lblk(&cbuf);
                if child_changed || self.resum.contains(&child) {
                    write_node(self.fs, self.dev, self.seed, child, &mut cbuf);
                }
                let mut e = *e;
                if start != lblk {
                    e[0..4].copy_from_slice(&(start as u32).to_le_bytes());
                    changed = true;
                }
                next_start = start.max(next_start);
                kept.push(e);
            }
        }
        if changed {
            set_entries(buf, &kept);
        }
        changed
    }
}

/// Logical start of the first entry of a node with at least one entry.
fn first_lblk(buf: &[u8]) -> u64 {
    u64::from(u32::from_le_bytes([buf[12], buf[13], buf[14], buf[15]]))
}
