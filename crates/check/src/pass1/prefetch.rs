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
//!   The first block of an indexed directory (its htree root, which pass 1 reads) joins
//!   the second sweep.
//! - **Last sweep**: the directory blocks (pass 2's reads), in a thread of its own while
//!   pass 1 checks: the checks read from the cache what the earlier sweeps read, so the
//!   disk sees this sweep alone, and the check's CPU time overlaps its reads.
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
use crate::progress::{Progress, Share, SWEEP_UNITS};
use ffsck_format::extent::Node;
use ffsck_format::inode::{flags as iflags, FileType, RawInode};
use ffsck_io::stream::{self, ReadPlan, StreamConfig};
use rayon::prelude::*;
use std::sync::{Arc, Mutex};

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
    /// What `limit` allows of `o` joins `self`.
    fn append(&mut self, o: Found, limit: usize) {
        o.next.into_iter().for_each(|r| self.push_next(r, limit));
        o.data.into_iter().for_each(|b| self.push_data(b, limit));
    }
    /// Note a block for the next sweep, unless `limit` are noted already (a block left out
    /// is read by the check that needs it).
    fn push_next(&mut self, r: Ref, limit: usize) {
        if self.next.len() < limit {
            self.next.push(r);
        }
    }
    fn push_data(&mut self, blk: u64, limit: usize) {
        if self.data.len() < limit {
            self.data.push(blk);
        }
    }
}

/// The most blocks one sweep reads (and one list of found blocks holds: the lists are sized
/// by on-disk pointers, so they are bounded whatever the image says).
fn sweep_blocks(fs: &Fs) -> usize {
    (MAX_SWEEP_BYTES / u64::from(fs.geo.block_size).max(1)) as usize
}

/// The last sweep, the directory blocks, reading in a thread of its own while pass 1 checks
/// (the checks need none of them: they find the blocks of the earlier sweeps in the cache).
/// Dropping it waits for the sweep to end, so pass 2 starts with its blocks read.
pub(super) struct DirSweep(Option<std::thread::JoinHandle<()>>);

impl Drop for DirSweep {
    fn drop(&mut self) {
        if let Some(h) = self.0.take() {
            let _ = h.join();
        }
    }
}

/// Run the sweeps (see the module's documentation): the first ones here, the directory
/// blocks' in the background (see [`DirSweep`]). Each of the three kinds of sweep (tables,
/// tree blocks, directory blocks) advances pass 1's `progress` by [`SWEEP_UNITS`] per group
/// as it reads.
pub(super) fn prefetch(fs: &Fs, p0: &Pass0Facts, progress: &Arc<Progress>) -> DirSweep {
    let stage_units = SWEEP_UNITS * u64::from(fs.geo.group_count);
    let bs = u64::from(fs.geo.block_size);
    // Every read from here on is hinted in disk order: the kernel's own read-ahead would
    // only add reads between them (of data blocks, guessing from several threads' reads).
    fs.dev.no_read_ahead();
    let mut plan = ReadPlan::new();
    // Ids below `tables` are pieces of groups' inode tables, the rest bitmaps. A table is
    // planned in pieces of at most one request (see `tables_sweep`): a range is never split
    // into requests, and a hinted request longer than the device reads for one hint is read
    // in part, the rest only when the reader gets there, after the hints for further on
    // (`ffsck-lab hdd`: each table's tail read in a second pass over the disk).
    // (On a file system of more than `MAX_TABLE_PIECES` such pieces the pieces grow: the
    // stream keeps a slot for each.)
    let ranges: Vec<(u64, u64)> = (0..p0.groups.len())
        .filter_map(|g| table_range(fs, g as u32, p0.groups[g]))
        .collect();
    let total: u64 = ranges.iter().map(|r| r.1).sum();
    let chunk = tables_sweep()
        .max_request
        .max(total.div_ceil(MAX_TABLE_PIECES).next_multiple_of(bs.max(1)));
    for (off, len) in ranges {
        for at in (0..len).step_by(chunk as usize) {
            plan.add(off + at, chunk.min(len - at));
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
    let limit = sweep_blocks(fs);
    let workers = rayon::current_num_threads().max(1);
    let share = Share::new(progress, stage_units, plan.len() as u64);
    stream::run(&*fs.dev, &plan, &tables_sweep(), |s| {
        (0..workers).into_par_iter().for_each(|_| {
            let mut mine = Found::default();
            while let Some(piece) = s.recv() {
                if piece.id < tables && piece.is_full() {
                    note_table(fs, &piece, &mut mine);
                }
                share.step(1);
            }
            lock(&found).append(mine, limit);
        });
    });
    share.finish();
    let mut found = found.into_inner().unwrap_or_else(|e| e.into_inner());
    // How many levels the trees have is known only by reading them: each level's sweep
    // counts for half the units the tree stage has left.
    let mut left = stage_units;
    for _ in 0..MAX_LEVELS {
        if found.next.is_empty() {
            break;
        }
        let level = std::mem::take(&mut found.next);
        let units = left / 2;
        left -= units;
        let share = Share::new(progress, units, level.len() as u64);
        found.append(sweep_refs(fs, level, &share), limit);
        share.finish();
    }
    progress.advance(left);
    let mut data = std::mem::take(&mut found.data);
    data.sort_unstable();
    data.dedup();
    data.truncate(limit);
    let dev = fs.dev.clone();
    let shared = progress.clone();
    let spawned = std::thread::Builder::new()
        // `warm` reads in this thread: named as the stream's reader, so profiles and tests
        // tell the sweeps' reads from the checks'.
        .name(stream::READER_THREAD.into())
        .spawn(move || {
            let mut plan = ReadPlan::new();
            for blk in data {
                plan.add(blk * bs, bs);
            }
            let share = Share::new(&shared, stage_units, plan.len() as u64);
            stream::warm(&*dev, &plan, &scattered(), |n| share.step(n as u64));
            share.finish();
        });
    match spawned {
        Ok(h) => DirSweep(Some(h)),
        Err(_) => {
            // No thread: the checks read the directory blocks themselves.
            progress.advance(stage_units);
            DirSweep(None)
        }
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

fn in_fs(fs: &Fs, blk: u64) -> bool {
    blk >= fs.geo.first_data_block && blk < fs.geo.blocks_count
}

/// How the first sweep (inode tables and bitmaps) is read: as the default stream (gaps up to
/// 512 KiB read through), in requests no longer than a device's usual read-ahead window
/// (128 KiB), so that one hint reads a whole request, hinted [`TABLE_AHEAD`] ahead: the
/// device has a few MiB of ascending reads under way rather than one 1 MiB read at a time. A
/// hard disk sees the same sequential run; this virtual disk read the tables of a
/// 1,000,000-inode file system in about two thirds of the time (docs/RESULTS.md).
fn tables_sweep() -> StreamConfig {
    StreamConfig {
        max_request: 128 << 10,
        ahead: TABLE_AHEAD,
        ..StreamConfig::default()
    }
}

/// Requests of the tables' sweep hinted ahead of the one being read (4 MiB).
const TABLE_AHEAD: usize = 32;

/// The most pieces the tables' sweep cuts the tables into (see `prefetch`): 32 GiB of
/// tables in use in pieces of 128 KiB.
const MAX_TABLE_PIECES: u64 = 1 << 18;

/// How the sweeps of scattered blocks are read: requests no larger than a device's usual
/// read-ahead window (128 KiB), so a hint reads a whole request, and the next requests hinted
/// ahead in disk order. The device then has several reads under way, still in ascending
/// order: a virtual or flash disk serves them in parallel, a hard disk in one sweep. Gaps up
/// to 64 KiB are read through (a hard disk passes a short forward gap at the media rate
/// anyway; a larger one read through would only cost other devices bandwidth).
fn scattered() -> StreamConfig {
    StreamConfig {
        max_request: 128 << 10,
        max_gap: 64 << 10,
        ahead: 64,
        ..StreamConfig::default()
    }
}

/// Read `refs` (sorted here, duplicates dropped, capped) in one ordered sweep and return
/// what the blocks point at.
fn sweep_refs(fs: &Fs, mut refs: Vec<Ref>, share: &Share<'_>) -> Found {
    refs.sort_unstable();
    refs.dedup_by_key(|r| r.blk);
    let bs = u64::from(fs.geo.block_size);
    refs.truncate(sweep_blocks(fs));
    let mut plan = ReadPlan::new();
    for r in &refs {
        plan.add(r.blk * bs, bs);
    }
    let found = Mutex::new(Found::default());
    let limit = sweep_blocks(fs);
    let workers = rayon::current_num_threads().max(1);
    stream::run(&*fs.dev, &plan, &scattered(), |s| {
        (0..workers).into_par_iter().for_each(|_| {
            let mut mine = Found::default();
            while let Some(piece) = s.recv() {
                share.step(1);
                let Some(r) = refs.get(piece.id) else {
                    continue;
                };
                if piece.is_full() {
                    note_block(fs, r.kind, &piece, &mut mine);
                }
            }
            lock(&found).append(mine, limit);
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
        let acl = inode.file_acl(fs.geo.sixty_four_bit());
        if acl != 0 && in_fs(fs, acl) {
            out.push_next(
                Ref {
                    blk: acl,
                    kind: Kind::Leaf,
                },
                sweep_blocks(fs),
            );
        }
        let fl = inode.flags();
        if fl & iflags::INLINE_DATA != 0 {
            continue;
        }
        let root = inode.block_bytes();
        let extents = fl & iflags::EXTENTS != 0;
        let limit = sweep_blocks(fs);
        let data = match inode.file_type() {
            FileType::Directory => true,
            FileType::Regular => false,
            FileType::Symlink if inode.size() >= 60 => {
                // Pass 1 reads a slow symlink's target block: it joins the second sweep.
                if let Some(b) = first_block(&root, extents).filter(|&b| in_fs(fs, b)) {
                    out.push_next(
                        Ref {
                            blk: b,
                            kind: Kind::Leaf,
                        },
                        limit,
                    );
                }
                false
            }
            FileType::Symlink => continue,
            _ => continue,
        };
        if data && fl & iflags::INDEX != 0 {
            // Pass 1 reads an indexed directory's first block (its htree root).
            if let Some(b0) = first_block(&root, extents).filter(|&b| in_fs(fs, b)) {
                out.push_next(
                    Ref {
                        blk: b0,
                        kind: Kind::Leaf,
                    },
                    limit,
                );
            }
        }
        if fl & iflags::EXTENTS != 0 {
            note_extents(fs, &root, data, out);
        } else {
            note_map(fs, &root, data, out);
        }
    }
}

/// The block an inode's root maps its logical block 0 to, when the root itself says.
fn first_block(root: &[u8; 60], extents: bool) -> Option<u64> {
    if !extents {
        return Some(u64::from(u32::from_le_bytes([
            root[0], root[1], root[2], root[3],
        ])));
    }
    let node = Node::parse(root).ok()?;
    (node.is_leaf() && !node.is_empty() && node.extent(0).ee_block.get() == 0)
        .then(|| node.extent(0).start())
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
                    out.push_data(b, sweep_blocks(fs));
                }
            }
        } else {
            let child = node.index(i).leaf();
            if in_fs(fs, child) {
                out.push_next(
                    Ref {
                        blk: child,
                        kind: Kind::Extent { data },
                    },
                    sweep_blocks(fs),
                );
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
        for b in (0..12).map(ptr).filter(|&b| b != 0 && in_fs(fs, b)) {
            out.push_data(b, sweep_blocks(fs));
        }
    }
    for (i, level) in [(12, 1u8), (13, 2), (14, 3)] {
        let b = ptr(i);
        if b != 0 && in_fs(fs, b) {
            out.push_next(
                Ref {
                    blk: b,
                    kind: Kind::Indirect { level, data },
                },
                sweep_blocks(fs),
            );
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
                    ptrs.for_each(|b| out.push_data(b, sweep_blocks(fs)));
                }
            } else {
                let kind = Kind::Indirect {
                    level: level - 1,
                    data,
                };
                ptrs.for_each(|blk| out.push_next(Ref { blk, kind }, sweep_blocks(fs)));
            }
        }
    }
}
