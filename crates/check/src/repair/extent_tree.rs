//! Extent trees rebuilt as shallow and narrow as their extents allow: up to four extents go
//! into the inode itself, more into full leaves under it, and index levels above the leaves
//! only as many as four root entries need.
//!
//! - A tree deeper than its block size needs (`P1_EXTENT_BAD_MAX_DEPTH`) is rebuilt reusing
//!   its node blocks; the blocks no longer used, `i_blocks` and the bitmaps are left to the
//!   next round's fixes, and a tree that would need new blocks is left as it is.
//! - Pass 1E (`P1E_CAN_NARROW_EXTENT_TREE`, `P1E_CAN_COLLAPSE_EXTENT_TREE`, and under `-E
//!   bmap2extent` `P1E_CONVERT_BMAP`, which also rewrites block maps, as does
//!   `P1_NO_BIGALLOC_BLOCKMAP_FILES` for a block map on bigalloc) rebuilds a sound
//!   mapping completely in the round: adjacent runs merged, old mapping blocks reused as
//!   leaves (more taken from the free blocks when a block map had too few), the rest freed
//!   in the allocation facts, `i_blocks` and the quota usage brought along, so the round's
//!   allocation rebuild leaves nothing for the next check to find.

use super::clone::{write_node, Alloc};
use super::inode::{edit, read_inode, read_raw};
use crate::engine::AllocFacts;
use crate::ext4::blocks::{Damage, Indirect, Mapping, NodeInfo, Span, Step, Visitor, Walk};
use crate::fs::Fs;
use crate::pass0::Pass0Facts;
use crate::problem::{Fixer, Problem as P};
use crate::report::Finding;
use ffsck_format::extent::{HeaderError, Node, EXTENT_MAGIC, MAX_DEPTH};
use ffsck_format::inode::flags as iflags;
use ffsck_format::RoCompat;
use ffsck_io::Device;

/// Entries an extent root in the inode holds.
const ROOT_ENTRIES: usize = 4;

/// Longest initialised and unwritten extents.
const MAX_INIT_LEN: u64 = 32_768;
const MAX_UNINIT_LEN: u64 = 32_767;

/// Rebuild the trees among `fixes`. Returns whether blocks were taken or freed in `facts`
/// (the allocation is then rebuilt in the same round).
pub fn apply(
    p0: &Pass0Facts,
    dev: &dyn Device,
    mut facts: Option<&mut AllocFacts>,
    fixes: &[&Finding],
) -> bool {
    let mut changed = false;
    for f in fixes
        .iter()
        .filter(|f| f.problem.fixed_by(Fixer::ExtentTree))
    {
        match f.problem {
            P::P1E_CAN_NARROW_EXTENT_TREE
            | P::P1E_CAN_COLLAPSE_EXTENT_TREE
            | P::P1E_CONVERT_BMAP
            | P::P1_NO_BIGALLOC_BLOCKMAP_FILES => {
                // An inode with other fixes this round is rebuilt in the next one, from
                // the mapping and counts those fixes leave (the check offers it again).
                let busy = fixes
                    .iter()
                    .any(|g| g.ctx.ino == f.ctx.ino && !g.problem.fixed_by(Fixer::ExtentTree));
                if let (false, Some(facts)) = (busy, facts.as_deref_mut()) {
                    changed |= optimize(p0, dev, facts, f.ctx.ino);
                }
            }
            _ => shallower(p0, dev, f.ctx.ino),
        }
    }
    changed
}

/// A tree deeper than useful, rebuilt on its own node blocks.
fn shallower(p0: &Pass0Facts, dev: &dyn Device, ino: u32) {
    let fs = &p0.fs;
    let Some(inode) = read_inode(p0, dev, ino) else {
        return;
    };
    let root = inode.block_bytes();
    if matches!(Node::parse(&root), Err(HeaderError::BadDepth)) {
        // A root deeper than any tree can be: none of its entries can be followed (e2fsck
        // clears each as an invalid extent). It becomes an empty leaf; the next round counts
        // `i_blocks` and frees the blocks.
        edit(p0, dev, ino, |n| {
            n.i_block.iter_mut().for_each(|w| w.set(0));
            // Magic, no entries; room for four, depth 0.
            n.i_block[0].set(u32::from(EXTENT_MAGIC));
            n.i_block[1].set(ROOT_ENTRIES as u32);
        });
        return;
    }
    let mut leaves = Vec::new();
    let mut nodes = Vec::new();
    let mut reads = fs.geo.blocks_count;
    if !collect(fs, &root, MAX_DEPTH, &mut leaves, &mut nodes, &mut reads) {
        return;
    }
    nodes.sort_unstable();
    nodes.dedup();
    let seed = seed_of(fs, ino, inode.i_generation.get());
    let Some(new_root) = rebuild(fs, dev, seed, &leaves, &nodes) else {
        return;
    };
    set_root(p0, dev, ino, &new_root, |_| {});
}

/// The checksum seed of inode `ino`'s extent blocks (0 without `metadata_csum`).
pub(super) fn seed_of(fs: &Fs, ino: u32, generation: u32) -> u32 {
    if fs.has_metadata_csum() {
        ffsck_format::csum::inode_seed(fs.csum_seed, ino, generation)
    } else {
        0
    }
}

/// Put `root` into inode `ino`'s `i_block`, with `more` changes of the inode.
fn set_root(
    p0: &Pass0Facts,
    dev: &dyn Device,
    ino: u32,
    root: &[u8; 60],
    more: impl FnOnce(&mut ffsck_format::inode::RawInode),
) {
    edit(p0, dev, ino, |n| {
        n.set_block_bytes(root);
        more(n);
    });
}

/// What a walk of a sound mapping holds: its data runs in logical order (adjacent ones
/// merged) and the blocks holding the mapping (extent nodes or indirect blocks).
#[derive(Default)]
pub(super) struct Gathered {
    pub runs: Vec<Mapping>,
    pub blocks: Vec<u64>,
    pub damaged: bool,
}

impl Visitor for Gathered {
    fn mapping(&mut self, m: Mapping, _span: &mut Span) -> Step {
        if m.pblk == 0 || m.len == 0 {
            return Step::Go;
        }
        match self.runs.last_mut() {
            Some(last)
                if last.lblk + last.len == m.lblk
                    && last.pblk + last.len == m.pblk
                    && last.uninit == m.uninit =>
            {
                last.len += m.len;
            }
            // Out of logical order: not a mapping this rebuild takes on.
            Some(last) if last.lblk + last.len > m.lblk => {
                self.damaged = true;
                return Step::Stop;
            }
            _ => self.runs.push(m),
        }
        Step::Go
    }
    fn indirect(&mut self, ind: Indirect) -> Step {
        if ind.pblk != 0 {
            self.blocks.push(ind.pblk);
        }
        Step::Go
    }
    fn node(&mut self, n: NodeInfo) -> Step {
        self.blocks.extend(n.pblk);
        Step::Go
    }
    fn damage(&mut self, _d: Damage) -> Step {
        self.damaged = true;
        Step::Stop
    }
}

/// Leaf entries for `runs`: each run split into extents no longer than the format allows.
pub(super) fn leaf_entries(runs: &[Mapping]) -> Option<Vec<[u8; 12]>> {
    let mut out = Vec::new();
    for r in runs {
        let max = if r.uninit {
            MAX_UNINIT_LEN
        } else {
            MAX_INIT_LEN
        };
        let mut done = 0;
        while done < r.len {
            let n = (r.len - done).min(max);
            let (l, p) = (u32::try_from(r.lblk + done).ok()?, r.pblk + done);
            let len = if r.uninit { n + MAX_INIT_LEN } else { n };
            let mut e = [0u8; 12];
            e[0..4].copy_from_slice(&l.to_le_bytes());
            e[4..6].copy_from_slice(&(len as u16).to_le_bytes());
            e[6..8].copy_from_slice(&((p >> 32) as u16).to_le_bytes());
            e[8..12].copy_from_slice(&(p as u32).to_le_bytes());
            out.push(e);
            done += n;
        }
    }
    Some(out)
}

/// Pass 1E's rebuild of inode `ino` (see the module header). Returns whether blocks were
/// taken or freed in `facts`.
fn optimize(p0: &Pass0Facts, dev: &dyn Device, facts: &mut AllocFacts, ino: u32) -> bool {
    remap(p0, dev, facts, ino, None).unwrap_or(false)
}

/// Rebuild the sound mapping of inode `ino` as pass 1E does, with `add` (a run of blocks the
/// caller has taken, mapped nowhere yet) put in its logical place: the way a directory's hole
/// is filled in a tree of any depth. `None` when nothing was written (a damaged or
/// overlapping mapping, no room for the nodes); otherwise whether mapping blocks were taken
/// or freed in `facts`.
pub(super) fn remap(
    p0: &Pass0Facts,
    dev: &dyn Device,
    facts: &mut AllocFacts,
    ino: u32,
    add: Option<Mapping>,
) -> Option<bool> {
    let fs = &p0.fs;
    let geo = &fs.geo;
    let (_, raw) = read_raw(p0, dev, ino)?;
    let inode = ffsck_format::inode::RawInode::parse(&raw);
    let fl = inode.flags();
    if fl & iflags::INLINE_DATA != 0 || inode.i_links_count.get() == 0 {
        return None;
    }
    let mut got = Gathered::default();
    let mut walk = Walk::over(fs);
    let iblock = inode.block_bytes();
    if fl & iflags::EXTENTS != 0 {
        walk.csum_seed = fs
            .has_metadata_csum()
            .then(|| seed_of(fs, ino, inode.i_generation.get()));
        walk.extents(&iblock, &mut got);
    } else {
        walk.block_map(&iblock, &mut got);
    }
    if got.damaged {
        return None;
    }
    if let Some(m) = add {
        let overlaps = |r: &Mapping| r.lblk < m.lblk + m.len && m.lblk < r.lblk + r.len;
        if fl & iflags::EXTENTS == 0 || m.len == 0 || got.runs.iter().any(overlaps) {
            return None;
        }
        let at = got.runs.partition_point(|r| r.lblk < m.lblk);
        got.runs.insert(at, m);
        got.runs = joined(std::mem::take(&mut got.runs));
    }
    let leaves = leaf_entries(&got.runs)?;
    let mut old = got.blocks;
    old.sort_unstable();
    old.dedup();
    // The leaf blocks the new tree needs: the old mapping blocks first, then free ones.
    let bs = fs.block_size();
    let need = nodes_needed(leaves.len(), per_node(fs));
    let mut nodes: Vec<u64> = old.iter().copied().take(need).collect();
    let mut taken = Vec::new();
    if nodes.len() < need {
        let mut alloc = Alloc::new(fs, &facts.block_used);
        for _ in nodes.len()..need {
            let b = alloc.run(1, 0, geo.blocks_count)?;
            taken.push(b);
        }
        nodes.extend(&taken);
    }
    let seed = seed_of(fs, ino, inode.i_generation.get());
    let root = rebuild(fs, dev, seed, &leaves, &nodes)?;
    let freed: Vec<u64> = old.iter().copied().skip(need).collect();
    // `i_blocks`: each mapping block is a cluster of its own, counted in 512-byte units, or
    // in blocks for a huge file.
    let huge = geo.ro_compat.has(RoCompat::HUGE_FILE);
    let per_block = if huge && fl & iflags::HUGE_FILE != 0 {
        1
    } else {
        (bs / 512) as u64
    };
    let per_node = per_block * u64::from(geo.cluster_ratio.max(1));
    set_root(p0, dev, ino, &root, |n| {
        let was = u64::from(n.i_blocks_lo.get())
            | if huge {
                u64::from(n.l_i_blocks_high.get()) << 32
            } else {
                0
            };
        let now =
            (was + taken.len() as u64 * per_node).saturating_sub(freed.len() as u64 * per_node);
        n.i_blocks_lo.set(now as u32);
        if huge {
            n.l_i_blocks_high.set((now >> 32) as u16);
        }
        n.i_flags.set(n.i_flags.get() | iflags::EXTENTS);
    });
    for &b in &taken {
        facts.block_used.set(b);
    }
    for &b in &freed {
        facts.block_used.clear(b);
    }
    if crate::quota::charged(fs, ino, &inode) {
        let cluster = u64::from(geo.block_size) * u64::from(geo.cluster_ratio.max(1));
        let (gone, new) = (freed.len() as u64, taken.len() as u64);
        if gone > new {
            facts.quota.uncharge(&raw, (gone - new) * cluster);
        } else {
            facts.quota.charge(&raw, (new - gone) * cluster, 0);
        }
    }
    Some(!(taken.is_empty() && freed.is_empty()))
}

/// The data runs of inode `ino`'s extent tree as `dev` has it, in logical order; `None` when
/// the tree is not sound enough to be rebuilt by `remap`.
pub(super) fn runs_of(p0: &Pass0Facts, dev: &dyn Device, ino: u32) -> Option<Vec<Mapping>> {
    tree_of(p0, dev, ino).map(|t| t.runs)
}

/// Inode `ino`'s extent tree as `dev` has it: its data runs in logical order and its node
/// blocks; `None` when the tree is not sound enough to be rebuilt.
pub(super) fn tree_of(p0: &Pass0Facts, dev: &dyn Device, ino: u32) -> Option<Gathered> {
    let fs = &p0.fs;
    let inode = read_inode(p0, dev, ino)?;
    if inode.flags() & iflags::EXTENTS == 0 {
        return None;
    }
    let mut got = Gathered::default();
    let mut walk = Walk::over(fs);
    walk.csum_seed = fs
        .has_metadata_csum()
        .then(|| seed_of(fs, ino, inode.i_generation.get()));
    walk.extents(&inode.block_bytes(), &mut got);
    (!got.damaged).then_some(got)
}

/// Runs in logical order with each run that continues the one before it on disk (and is
/// written or unwritten alike) joined to it.
pub(super) fn joined(runs: Vec<Mapping>) -> Vec<Mapping> {
    let mut out: Vec<Mapping> = Vec::with_capacity(runs.len());
    for m in runs {
        match out.last_mut() {
            Some(last)
                if last.lblk + last.len == m.lblk
                    && last.pblk + last.len == m.pblk
                    && last.uninit == m.uninit =>
            {
                last.len += m.len;
            }
            _ => out.push(m),
        }
    }
    out
}

/// Gather the leaf entries (in tree order) and node blocks under `buf`, a node expected no
/// deeper than `budget`. False when the tree is not sound enough to rebuild.
fn collect(
    fs: &Fs,
    buf: &[u8],
    budget: u16,
    leaves: &mut Vec<[u8; 12]>,
    nodes: &mut Vec<u64>,
    reads: &mut u64,
) -> bool {
    // A node left without entries (its bad ones removed) holds nothing, whatever its depth.
    let Ok(node) = Node::parse_any_depth(buf) else {
        return false;
    };
    if node.is_empty() {
        return true;
    }
    if node.depth() > budget {
        return false;
    }
    let entry = |i: usize| {
        let mut e = [0u8; 12];
        e.copy_from_slice(&buf[12 + 12 * i..24 + 12 * i]);
        e
    };
    if node.is_leaf() {
        leaves.extend((0..node.len()).map(entry));
        return true;
    }
    for i in 0..node.len() {
        let child = node.index(i).leaf();
        if *reads == 0 || !fs.geo.is_valid_block(child) {
            return false;
        }
        *reads -= 1;
        let Some(cbuf) = fs.read_block(child) else {
            return false;
        };
        if Node::parse(&cbuf).map_or(true, |c| c.depth() + 1 != node.depth()) {
            return false;
        }
        nodes.push(child);
        if !collect(fs, &cbuf, node.depth() - 1, leaves, nodes, reads) {
            return false;
        }
    }
    true
}

/// A node header: magic, entries, capacity, depth (generation 0).
fn header(buf: &mut [u8], entries: usize, max: usize, depth: u16) {
    buf[0..2].copy_from_slice(&EXTENT_MAGIC.to_le_bytes());
    buf[2..4].copy_from_slice(&(entries as u16).to_le_bytes());
    buf[4..6].copy_from_slice(&(max as u16).to_le_bytes());
    buf[6..8].copy_from_slice(&depth.to_le_bytes());
    buf[8..12].fill(0);
}

/// Entries an extent block holds, leaving room for a checksum tail where there is one.
pub(super) fn per_node(fs: &Fs) -> usize {
    let bs = fs.block_size();
    let per = (bs - 12) / 12;
    if fs.has_metadata_csum() {
        per.min((bs - 12 - 4) / 12)
    } else {
        per
    }
}

/// Blocks the shallowest tree of `entries` leaf entries needs below the inode.
pub(super) fn nodes_needed(entries: usize, per: usize) -> usize {
    let (mut level, mut total) = (entries, 0);
    while level > ROOT_ENTRIES {
        level = level.div_ceil(per);
        total += level;
    }
    total
}

/// Write the shallowest tree for `leaves`, taking its blocks from `nodes` in order (leaves
/// first, then each index level); returns the new in-inode root, or `None` when `nodes` are
/// too few or the tree would be deeper than the format allows.
pub(super) fn rebuild(
    fs: &Fs,
    dev: &dyn Device,
    seed: u32,
    leaves: &[[u8; 12]],
    nodes: &[u64],
) -> Option<[u8; 60]> {
    let bs = fs.block_size();
    let per = per_node(fs);
    if nodes_needed(leaves.len(), per) > nodes.len() {
        return None;
    }
    let mut level: Vec<[u8; 12]> = leaves.to_vec();
    let mut depth = 0u16;
    let mut free = nodes.iter();
    while level.len() > ROOT_ENTRIES {
        if depth >= MAX_DEPTH {
            return None;
        }
        let mut above = Vec::with_capacity(level.len().div_ceil(per));
        for chunk in level.chunks(per) {
            let &blk = free.next()?;
            let mut buf = vec![0u8; bs];
            header(&mut buf, chunk.len(), (bs - 12) / 12, depth);
            for (j, e) in chunk.iter().enumerate() {
                buf[12 + 12 * j..24 + 12 * j].copy_from_slice(e);
            }
            write_node(fs, dev, seed, blk, &mut buf);
            // Index entry: first logical block, then the node's block number (low 32, high
            // 16).
            let mut idx = [0u8; 12];
            idx[0..4].copy_from_slice(&chunk[0][0..4]);
            idx[4..8].copy_from_slice(&(blk as u32).to_le_bytes());
            idx[8..10].copy_from_slice(&((blk >> 32) as u16).to_le_bytes());
            above.push(idx);
        }
        level = above;
        depth += 1;
    }
    let mut root = [0u8; 60];
    header(&mut root, level.len(), ROOT_ENTRIES, depth);
    for (i, e) in level.iter().enumerate() {
        root[12 + 12 * i..24 + 12 * i].copy_from_slice(e);
    }
    Some(root)
}
