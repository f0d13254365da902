//! `--io sequential`: the metadata pass 1 and pass 2 will read, read ahead of them in as few
//! ascending sweeps as the dependencies force, by ONE ordered stream (issue 24).
//!
//! - **Sweep 1**: every group's used inode table and its block and inode bitmaps. The
//!   workers take the tables in disk order and note, per live inode, the blocks its map
//!   points at: extent index and leaf blocks, indirect blocks, the xattr block, and for a
//!   directory (or a slow symlink) the data blocks the root maps directly.
//! - **Sweeps 2..**: those blocks, sorted; reading a level finds the next (extent trees to
//!   their leaves, indirect trees level by level: at most [`MAX_LEVELS`] sweeps), and the
//!   directory blocks the leaves map.
//! - **Last sweep**: the directory blocks (pass 2's reads, and pass 1's first blocks).
//!
//! The sweeps only read: the bytes stay in the kernel's page cache, where the checks that
//! follow (unchanged) find them, so they see the same bytes as without the sweeps and the
//! findings cannot differ. The process holds no more than the stream's byte budget at a
//! time; the cache is the kernel's to evict, and a block it evicted is simply read again
//! (by the check, on its own). Each sweep is capped ([`MAX_SWEEP_BYTES`]): past the cap the
//! lowest-addressed blocks are read and the rest left to the checks.
//!
//! What is noted is a guess from the raw inode (no check has judged it yet): a corrupt map
//! costs at most a wasted read, never a finding.

use super::itable::table_range;
use crate::fs::Fs;
use crate::pass0::Pass0Facts;
use ffsck_format::extent::Node;
use ffsck_format::inode::{flags as iflags, FileType, RawInode};
use ffsck_io::stream::{self, ReadPlan, StreamConfig};
use rayon::prelude::*;
use std::sync::Mutex;

/// Sweeps after the first: an extent tree's depth (at most 5 in practice) or an indirect
/// tree's 3 levels, plus the directory blocks.
pub(super) const MAX_LEVELS: usize = 6;

/// The most bytes one sweep reads ahead (the page cache holds them; past this the checks
/// read the rest themselves).
pub(super) const MAX_SWEEP_BYTES: u64 = 2 << 30;

/// A block to read in a later sweep, and what it is.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Debug)]
struct Ref {
    blk: u64,
    kind: Kind,
}

#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Debug)]
enum Kind {
    /// An extent tree node (index or leaf); `data`: note the blocks its leaves map.
    Extent { data: bool },
    /// An indirect block `level` levels above the data (1: points at data blocks).
    Indirect { level: u8, data: bool },
    /// Read only (xattr block, directory or symlink data).
    Leaf,
}

/// What a sweep found for the next ones.
#[derive(Default)]
struct Found {
    next: Vec<Ref>,
    data: Vec<u64>,
}

impl Found {
    fn append(&mut self, mut o: Found) {
        self.next.append(&mut o.next);
        self.data.append(&mut o.data);
    }
}

/// Run the sweeps (see the module's documentation) over the whole file system.
pub(super) fn prefetch(fs: &Fs, p0: &Pass0Facts) {
    let bs = u64::from(fs.geo.block_size);
    let mut plan = ReadPlan::new();
    // Ids below `tables` are groups' inode tables, the rest bitmaps.
    for (g, st) in p0.groups.iter().enumerate() {
        if let Some((off, len)) = table_range(fs, g as u32, *st) {
            plan.add(off, len);
        }
    }
    let tables = plan.len();
    for gd in &fs.groups {
        for blk in [gd.block_bitmap(), gd.inode_bitmap()] {
            if in_fs(fs, blk) {
                plan.add(blk * bs, bs);
            }
        }
    }
    let found = Mutex::new(Found::default());
    let workers = rayon::current_num_threads().max(1);
    stream::run(&*fs.dev, &plan, &StreamConfig::default(), |s| {
        (0..workers).into_par_iter().for_each(|_| {
            let mut mine = Found::default();
            while let Some(piece) = s.recv() {
                if piece.id < tables && piece.is_full() {
                    note_table(fs, &piece, &mut mine);
                }
            }
            lock(&found).append(mine);
        });
    });
    let mut found = found.into_inner().unwrap_or_else(|e| e.into_inner());
    for _ in 0..MAX_LEVELS {
        if found.next.is_empty() {
            break;
        }
        let level = std::mem::take(&mut found.next);
        found.append(sweep_refs(fs, level));
    }
    let mut data = std::mem::take(&mut found.data);
    data.sort_unstable();
    data.dedup();
    let refs = data.into_iter().map(|blk| Ref {
        blk,
        kind: Kind::Leaf,
    });
    sweep_refs(fs, refs.collect());
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

fn in_fs(fs: &Fs, blk: u64) -> bool {
    blk >= fs.geo.first_data_block && blk < fs.geo.blocks_count
}

/// Read `refs` (sorted here, duplicates dropped, capped) in one ordered sweep and return
/// what the blocks point at.
fn sweep_refs(fs: &Fs, mut refs: Vec<Ref>) -> Found {
    refs.sort_unstable();
    refs.dedup_by_key(|r| r.blk);
    let bs = u64::from(fs.geo.block_size);
    refs.truncate((MAX_SWEEP_BYTES / bs) as usize);
    let mut plan = ReadPlan::new();
    for r in &refs {
        plan.add(r.blk * bs, bs);
    }
    let found = Mutex::new(Found::default());
    let workers = rayon::current_num_threads().max(1);
    stream::run(&*fs.dev, &plan, &StreamConfig::default(), |s| {
        (0..workers).into_par_iter().for_each(|_| {
            let mut mine = Found::default();
            while let Some(piece) = s.recv() {
                let Some(r) = refs.get(piece.id) else {
                    continue;
                };
                if piece.is_full() {
                    note_block(fs, r.kind, &piece, &mut mine);
                }
            }
            lock(&found).append(mine);
        });
    });
    found.into_inner().unwrap_or_else(|e| e.into_inner())
}

/// Note what the live inodes of a group's table (the bytes of [`table_range`]) point at.
fn note_table(fs: &Fs, table: &[u8], out: &mut Found) {
    let isz = fs.geo.inode_size as usize;
    if isz < 128 {
        return;
    }
    for raw in table.chunks_exact(isz) {
        let inode = RawInode::parse(raw);
        if inode.mode() == 0 || inode.links_count() == 0 || inode.dtime() != 0 {
            continue;
        }
        let acl = inode.file_acl();
        if acl != 0 && in_fs(fs, acl) {
            out.next.push(Ref {
                blk: acl,
                kind: Kind::Leaf,
            });
        }
        let fl = inode.flags();
        if fl & iflags::INLINE_DATA != 0 {
            continue;
        }
        let data = match inode.file_type() {
            FileType::Directory => true,
            FileType::Symlink if inode.size() >= 60 => true,
            FileType::Regular | FileType::Symlink => false,
            _ => continue,
        };
        let root = inode.block_bytes();
        if fl & iflags::EXTENTS != 0 {
            note_extents(fs, &root, data, out);
        } else {
            note_map(fs, &root, data, out);
        }
    }
}

/// Note the children of an extent node (the in-inode root or a tree block).
fn note_extents(fs: &Fs, node: &[u8], data: bool, out: &mut Found) {
    let Ok(node) = Node::parse(node) else {
        return;
    };
    for i in 0..node.len() {
        if node.is_leaf() {
            if !data {
                return;
            }
            let e = node.extent(i);
            let (len, _) = e.len();
            // A directory's extents are short; a long one is corrupt (left to the checks).
            for b in e.start()..e.start().saturating_add(u64::from(len.min(1024))) {
                if in_fs(fs, b) {
                    out.data.push(b);
                }
            }
        } else {
            let child = node.index(i).leaf();
            if in_fs(fs, child) {
                out.next.push(Ref {
                    blk: child,
                    kind: Kind::Extent { data },
                });
            }
        }
    }
}

/// Note the blocks a block map's root (`i_block`) points at.
fn note_map(fs: &Fs, root: &[u8; 60], data: bool, out: &mut Found) {
    let ptr = |i: usize| {
        u64::from(u32::from_le_bytes([
            root[i * 4],
            root[i * 4 + 1],
            root[i * 4 + 2],
            root[i * 4 + 3],
        ]))
    };
    if data {
        out.data
            .extend((0..12).map(ptr).filter(|&b| b != 0 && in_fs(fs, b)));
    }
    for (i, level) in [(12, 1u8), (13, 2), (14, 3)] {
        let b = ptr(i);
        if b != 0 && in_fs(fs, b) {
            out.next.push(Ref {
                blk: b,
                kind: Kind::Indirect { level, data },
            });
        }
    }
}

/// Note what a tree block read in a sweep points at.
fn note_block(fs: &Fs, kind: Kind, block: &[u8], out: &mut Found) {
    match kind {
        Kind::Leaf => {}
        Kind::Extent { data } => note_extents(fs, block, data, out),
        Kind::Indirect { level, data } => {
            let ptrs = block
                .chunks_exact(4)
                .map(|w| u64::from(u32::from_le_bytes([w[0], w[1], w[2], w[3]])))
                .filter(|&b| b != 0 && in_fs(fs, b));
            if level <= 1 {
                if data {
                    out.data.extend(ptrs);
                }
            } else {
                out.next.extend(ptrs.map(|blk| Ref {
                    blk,
                    kind: Kind::Indirect {
                        level: level - 1,
                        data,
                    },
                }));
            }
        }
    }
}
