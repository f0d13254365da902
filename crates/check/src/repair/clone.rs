//! Pass 1D repair, "Clone multiply-claimed blocks": every inode answered yes gets its own copy
//! of each block it still shares, as e2fsck does. Inodes are taken in ascending order and a
//! block stops counting as shared once only one claimant is left, so the last owner keeps the
//! original; blocks shared with file-system metadata stay shared for every file (each gets a
//! copy) and the bad-blocks and resize inodes are never cloned (they keep their blocks).
//!
//! Block-mapped files get new data and indirect blocks one by one; an extent whose blocks are
//! partly shared moves as a whole to a new contiguous run (so the tree keeps its shape), and
//! shared extent nodes are copied before they are descended into. The new blocks are taken
//! from what this round's check found free; the next round's allocation rebuild then fixes the
//! bitmaps and counts.

use super::inode::edit;
use crate::bitmap::Bitmap;
use crate::engine::AllocFacts;
use crate::ext4::blocks::Mapping;
use crate::fs::Fs;
use crate::pass0::Pass0Facts;
use crate::problem::{Fixer, Problem as P};
use crate::report::Finding;
use ffsck_format::extent::{Node, MAX_DEPTH};
use ffsck_format::inode::{flags as iflags, FileType, RawInode};
use ffsck_format::{ino, Incompat};
use ffsck_io::Device;
use std::collections::BTreeMap;

/// Blocks copied at once when an extent moves.
const COPY_CHUNK: u64 = 256;

/// Free blocks for the copies: what the check found unused, less what this round took. With
/// bigalloc, runs are made of whole free clusters.
pub struct Alloc<'a> {
    used: &'a Bitmap,
    taken: Bitmap,
    /// Every block below this one is in use or taken.
    low: u64,
    end: u64,
    ratio: u64,
}

impl<'a> Alloc<'a> {
    pub fn new(fs: &Fs, used: &'a Bitmap) -> Self {
        let end = fs.geo.blocks_count.min(used.len());
        Alloc {
            used,
            taken: Bitmap::new(end),
            low: fs.geo.first_data_block.max(1),
            end,
            ratio: u64::from(fs.geo.cluster_ratio.max(1)),
        }
    }
    fn free(&self, b: u64) -> bool {
        !self.used.get(b) && !self.taken.get(b)
    }
    fn cluster_free(&self, c: u64, end: u64) -> bool {
        let r = self.ratio;
        (c * r..c * r + r).all(|b| b < end && self.free(b))
    }
    /// The lowest run of `n` free blocks starting `offset` blocks into a cluster, with the
    /// clusters it touches marked taken; `None` when there is none below `limit`.
    pub fn run(&mut self, n: u64, offset: u64, limit: u64) -> Option<u64> {
        if n == 0 {
            return None;
        }
        while self.low < self.end && !self.free(self.low) {
            self.low += 1;
        }
        let r = self.ratio;
        let end = self.end.min(limit);
        let need = (offset + n).div_ceil(r);
        let (mut start, mut len) = (0u64, 0u64);
        let mut c = self.low.div_ceil(r);
        while (c + 1) * r <= end {
            if self.cluster_free(c, end) {
                if len == 0 {
                    start = c;
                }
                len += 1;
                if len == need {
                    for x in start * r..(start + need) * r {
                        self.taken.set(x);
                    }
                    return Some(start * r + offset);
                }
            } else {
                len = 0;
            }
            c += 1;
        }
        None
    }
}

/// How many claims on each shared block are left, and which blocks are metadata.
///
/// On bigalloc a claim is on a cluster, once per inode that maps a block of it, and a
/// cluster stays shared (every block of it is copied) until a clone or deletion leaves one
/// claim, as e2fsck's map of multiply-claimed clusters: a file whose logical cluster maps to
/// two physical ones shares a cluster with itself alone and is still cloned.
struct Dups {
    claims: BTreeMap<u64, u32>,
    metadata: Bitmap,
    /// Inodes that list each block (for repointing a cloned xattr block).
    owners: BTreeMap<u64, Vec<u32>>,
    /// Blocks per cluster (1 without bigalloc).
    ratio: u64,
    /// Bigalloc: the clusters still shared.
    marked: std::collections::BTreeSet<u64>,
}

impl Dups {
    fn from_findings(p0: &Pass0Facts, findings: &[Finding]) -> Self {
        let geo = &p0.fs.geo;
        let mut claims = BTreeMap::new();
        let mut owners: BTreeMap<u64, Vec<u32>> = BTreeMap::new();
        for f in findings {
            let (lo, hi) = match f.problem {
                P::P1B_DUP_BLOCK => (f.ctx.blk, f.ctx.blk),
                P::P1B_DUP_RANGE => (f.ctx.blk, f.ctx.blk2),
                _ => continue,
            };
            // Pass 1B names only blocks inside the file system.
            for b in lo..=hi.min(geo.blocks_count.saturating_sub(1)) {
                *claims.entry(b).or_insert(0u32) += 1;
                owners.entry(b).or_default().push(f.ctx.ino);
            }
        }
        // The bad-blocks inode is an owner that pass 1B does not list: count its claims here.
        if let Some(raw) = p0.fs.read_inode(ino::BAD) {
            let bad = RawInode::parse(&raw);
            crate::pass1b::for_each_claimed_block(&p0.fs, ino::BAD, &bad, &mut |b| {
                if let Some(c) = claims.get_mut(&b) {
                    *c += 1;
                }
            });
        }
        let ratio = u64::from(geo.cluster_ratio.max(1));
        let mut marked = std::collections::BTreeSet::new();
        if ratio > 1 {
            // One claim per inode and cluster.
            let mut per_cluster: BTreeMap<u64, std::collections::BTreeSet<u32>> = BTreeMap::new();
            for (&b, inos) in &owners {
                per_cluster.entry(b / ratio).or_default().extend(inos);
            }
            claims = per_cluster
                .into_iter()
                .map(|(c, inos)| (c, inos.len() as u32))
                .collect();
            marked = claims.keys().copied().collect();
        }
        Dups {
            claims,
            metadata: crate::pass1::metadata_map(&p0.fs, &p0.groups),
            owners,
            ratio,
            marked,
        }
    }
    fn meta_cluster(&self, c: u64) -> bool {
        (c * self.ratio..(c + 1) * self.ratio).any(|b| self.metadata.get(b))
    }
    fn shared(&self, b: u64) -> bool {
        if self.ratio > 1 {
            return self.marked.contains(&(b / self.ratio));
        }
        match self.claims.get(&b) {
            None => false,
            Some(&c) => c > 1 || (c > 0 && self.metadata.get(b)),
        }
    }
    fn release(&mut self, b: u64) {
        if self.ratio > 1 {
            let c = b / self.ratio;
            let left = self.claims.get_mut(&c).map(|n| {
                *n = n.saturating_sub(1);
                *n
            });
            if left.is_some_and(|n| n <= 1) && !self.meta_cluster(c) {
                self.marked.remove(&c);
            }
            return;
        }
        if let Some(c) = self.claims.get_mut(&b) {
            *c = c.saturating_sub(1);
        }
    }
}

/// Clone the shared blocks of every inode whose clone question was answered yes. `findings`
/// is the whole round (for the pass 1B block lists), `fixes` what is being fixed.
/// The blocks the copies take are marked in `facts`, so the round's later fixers (the resize
/// inode's rebuild) do not take them again. The copies' contents are read from `source`: the
/// blocks as the check saw them, before fixes e2fsck makes after pass 1D.
pub fn apply(
    p0: &Pass0Facts,
    dev: &dyn Device,
    source: &dyn Device,
    facts: Option<&mut AllocFacts>,
    findings: &[Finding],
    fixes: &[&Finding],
) {
    let mut inos: Vec<u32> = fixes
        .iter()
        .filter(|f| f.problem.fixed_by(Fixer::Clone))
        .map(|f| f.ctx.ino)
        .filter(|&i| i != ino::BAD && i != ino::RESIZE)
        .collect();
    if inos.is_empty() {
        return;
    }
    inos.sort_unstable();
    inos.dedup();
    let fs = &p0.fs;
    let mut dups = Dups::from_findings(p0, findings);
    // A check that stopped early (a directory left unsalvaged) has no allocation facts: find
    // the blocks in use with a quiet pass 1 of its own.
    let rescan;
    let used = match facts.as_deref() {
        Some(f) => &f.block_used,
        None => {
            let mut scratch = crate::report::Findings::default();
            rescan = crate::pass1::run(
                p0,
                crate::report::Policy::No,
                &mut scratch,
                &std::sync::Arc::default(),
            );
            &rescan.block_used
        }
    };
    let mut alloc = Alloc::new(fs, used);
    for ino in inos {
        let mut c = Cloner {
            p0,
            fs,
            dev,
            source,
            dups: &mut dups,
            alloc: &mut alloc,
            ino,
            seed: 0,
            reads: fs.geo.blocks_count,
        };
        c.clone_inode();
    }
    let taken = std::mem::replace(&mut alloc.taken, Bitmap::new(0));
    if let Some(f) = facts {
        taken.iter_ones().for_each(|b| f.block_used.set(b));
    }
    // As e2fsck's clone: the copies' blocks are marked in the bitmap, the counts left to pass 5.
    let taken: Vec<u64> = taken.iter_ones().collect();
    super::alloc::mark_blocks(p0, dev, &taken, &[], false);
}

struct Cloner<'a, 'b> {
    p0: &'a Pass0Facts,
    fs: &'a Fs,
    dev: &'a dyn Device,
    /// Where the copied blocks' contents are read.
    source: &'a dyn Device,
    dups: &'a mut Dups,
    alloc: &'a mut Alloc<'b>,
    ino: u32,
    /// Checksum seed of this inode's extent blocks (0 without `metadata_csum`).
    seed: u32,
    /// Mapping blocks this inode's walk may still read: a hostile map that points many
    /// entries at the same block cannot make the walk longer than the file system.
    reads: u64,
}

impl Cloner<'_, '_> {
    fn clone_inode(&mut self) {
        let fs = self.fs;
        let Some(raw) = fs.read_inode(self.ino) else {
            return;
        };
        let inode = RawInode::parse(&raw);
        if fs.has_metadata_csum() {
            self.seed =
                ffsck_format::csum::inode_seed(fs.csum_seed, self.ino, inode.i_generation.get());
        }
        let mut iblock = inode.block_bytes();
        let mut changed = false;
        // On bigalloc an extent tree is cloned cluster by cluster, and written here.
        let by_cluster = fs.geo.cluster_ratio > 1 && inode.flags() & iflags::EXTENTS != 0;
        if has_mapping(fs, &inode) && by_cluster && self.clone_clusters(&inode) {
        } else if has_mapping(fs, &inode) {
            if inode.flags() & iflags::EXTENTS != 0 {
                changed = self.extent_node(&mut iblock, MAX_DEPTH + 1);
            } else {
                for i in 0..15 {
                    let level = if i < 12 { 0 } else { (i - 11) as u32 };
                    let mut p = u32::from_le_bytes([
                        iblock[4 * i],
                        iblock[4 * i + 1],
                        iblock[4 * i + 2],
                        iblock[4 * i + 3],
                    ]);
                    if self.map_ptr(&mut p, level) {
                        iblock[4 * i..4 * i + 4].copy_from_slice(&p.to_le_bytes());
                        changed = true;
                    }
                }
            }
        }
        let acl = inode.file_acl(fs.geo.sixty_four_bit());
        let mut new_acl = None;
        if acl != 0 && self.dups.shared(acl) {
            new_acl = self.copy(acl, 1, u64::MAX);
            if new_acl.is_some() {
                self.dups.release(acl);
            }
        }
        if !changed && new_acl.is_none() {
            return;
        }
        let set_acl = |i: &mut RawInode, b: u64| {
            i.i_file_acl_lo.set(b as u32);
            i.l_i_file_acl_high.set((b >> 32) as u16);
        };
        edit(self.p0, self.dev, self.ino, |i| {
            if changed {
                i.set_block_bytes(&iblock);
            }
            if let Some(b) = new_acl {
                set_acl(i, b);
            }
        });
        // The other inodes that shared the old xattr block share the copy instead, as e2fsck
        // does: the copy is referenced as often as the original was.
        if let Some(new) = new_acl {
            let others: Vec<u32> = self.dups.owners.get(&acl).map_or(Vec::new(), |v| v.clone());
            for o in others.into_iter().filter(|&o| o != self.ino) {
                let Some(raw) = fs.read_inode(o) else {
                    continue;
                };
                if RawInode::parse(&raw).file_acl(fs.geo.sixty_four_bit()) == acl {
                    edit(self.p0, self.dev, o, |i| set_acl(i, new));
                    self.dups.release(acl);
                }
            }
        }
    }

    /// Bigalloc: clone the shared clusters of an extent-mapped inode as e2fsck does, block by
    /// block in logical order. A block in a shared cluster moves to the physical cluster its
    /// logical cluster's other blocks imply, when that is another one (one logical cluster
    /// mapped to two physical ones is mended without a copy); else to a new cluster, at its
    /// logical offset there, where the rest of its logical cluster follows it. The tree is
    /// rebuilt from the new runs and `i_blocks` counts the clusters mapped. False when the
    /// tree cannot be rebuilt (the extent-by-extent clone is used instead).
    fn clone_clusters(&mut self, inode: &RawInode) -> bool {
        let fs = self.fs;
        let geo = &fs.geo;
        let r = u64::from(geo.cluster_ratio.max(1));
        let Some(tree) = super::extent_tree::tree_of(self.p0, self.dev, self.ino) else {
            return false;
        };
        let old = tree.runs;
        // The physical block `l` maps to: in `done` (this clone's result) below `at`, in the
        // old runs from it on.
        let lookup = |runs: &[Mapping], l: u64| {
            runs.iter()
                .find(|m| m.lblk <= l && l < m.lblk + m.len)
                .map(|m| m.pblk + (l - m.lblk))
        };
        let implied = |done: &[Mapping], at: u64, l: u64| {
            let base = l - l % r;
            (base..base + r).filter(|&x| x != l).find_map(|x| {
                let p = if x < at {
                    lookup(done, x)
                } else {
                    lookup(&old, x)
                }?;
                Some(p.checked_sub(x % r)? + l % r)
            })
        };
        let mut done: Vec<Mapping> = Vec::with_capacity(old.len());
        let push = |done: &mut Vec<Mapping>, l: u64, p: u64, uninit: bool| match done.last_mut() {
            Some(m) if m.lblk + m.len == l && m.pblk + m.len == p && m.uninit == uninit => {
                m.len += 1;
            }
            _ => done.push(Mapping {
                lblk: l,
                pblk: p,
                len: 1,
                uninit,
            }),
        };
        // The logical cluster last given a new home, and that home's first block.
        let mut moving: Option<(u64, u64)> = None;
        let mut released = std::collections::BTreeSet::new();
        let mut changed = false;
        let mut budget = geo.blocks_count;
        for m in &old {
            // A run with no shared cluster and outside the moving logical cluster stays.
            let touches = (m.pblk / r..=(m.pblk + m.len - 1) / r).any(|c| self.dups.shared(c * r))
                || moving
                    .is_some_and(|(lc, _)| (m.lblk / r..=(m.lblk + m.len - 1) / r).contains(&lc));
            if !touches {
                done.push(*m);
                continue;
            }
            for k in 0..m.len {
                if budget == 0 {
                    return false;
                }
                budget -= 1;
                let (l, p) = (m.lblk + k, m.pblk + k);
                let lc = l / r;
                let to = match moving {
                    Some((c, home)) if c == lc => Some(home + l % r),
                    _ if self.dups.shared(p) => {
                        let home = match implied(&done, l, l) {
                            Some(q) if q / r != p / r && geo.is_valid_block(q) => q - l % r,
                            _ => match self.alloc.run(1, l % r, u64::MAX) {
                                Some(q) => q - l % r,
                                None => return changed && self.finish(inode, done),
                            },
                        };
                        moving = Some((lc, home));
                        if released.insert(p / r) {
                            self.dups.release(p);
                        }
                        Some(home + l % r)
                    }
                    _ => None,
                };
                match to {
                    Some(q) => {
                        let bs = u64::from(geo.block_size);
                        let mut buf = vec![0u8; bs as usize];
                        if self.fs.read_blocks_into(p, &mut buf).is_err() {
                            buf.fill(0);
                        }
                        let _ = self.dev.write_at(&buf, q * bs);
                        push(&mut done, l, q, m.uninit);
                        changed = true;
                    }
                    None => push(&mut done, l, p, m.uninit),
                }
            }
        }
        changed && self.finish(inode, done)
    }

    /// Write the inode's tree anew for `runs` (bigalloc clone): its old node blocks reused,
    /// more taken when it needs more, `i_blocks` set to the clusters the data and nodes take.
    fn finish(&mut self, inode: &RawInode, runs: Vec<Mapping>) -> bool {
        let fs = self.fs;
        let geo = &fs.geo;
        let r = u64::from(geo.cluster_ratio.max(1));
        let Some(tree) = super::extent_tree::tree_of(self.p0, self.dev, self.ino) else {
            return false;
        };
        let runs = super::extent_tree::joined(runs);
        let Some(leaves) = super::extent_tree::leaf_entries(&runs) else {
            return false;
        };
        let mut nodes = tree.blocks;
        nodes.sort_unstable();
        nodes.dedup();
        let need = super::extent_tree::nodes_needed(leaves.len(), super::extent_tree::per_node(fs));
        nodes.truncate(need);
        while nodes.len() < need {
            match self.alloc.run(1, 0, u64::MAX) {
                Some(b) => nodes.push(b),
                None => return false,
            }
        }
        let Some(root) = super::extent_tree::rebuild(fs, self.dev, self.seed, &leaves, &nodes)
        else {
            return false;
        };
        let mut clusters: Vec<u64> = runs
            .iter()
            .flat_map(|m| m.pblk / r..=(m.pblk + m.len - 1) / r)
            .collect();
        clusters.sort_unstable();
        clusters.dedup();
        let huge = geo.ro_compat.has(ffsck_format::RoCompat::HUGE_FILE)
            && inode.flags() & iflags::HUGE_FILE != 0;
        let unit = if huge {
            1
        } else {
            u64::from(geo.block_size) / 512
        };
        let count = (clusters.len() as u64 + nodes.len() as u64) * r * unit;
        edit(self.p0, self.dev, self.ino, |i| {
            i.set_block_bytes(&root);
            i.i_blocks_lo.set(count as u32);
            if geo.ro_compat.has(ffsck_format::RoCompat::HUGE_FILE) {
                i.l_i_blocks_high.set((count >> 32) as u16);
            }
        });
        true
    }

    /// Copy `n` blocks from `from` to a new run at the same offset in its cluster; the new
    /// run's first block.
    fn copy(&mut self, from: u64, n: u64, limit: u64) -> Option<u64> {
        let offset = from % u64::from(self.fs.geo.cluster_ratio.max(1));
        self.copy_at(from, n, offset, limit)
    }

    /// Copy `n` blocks from `from` to a new run starting `offset` blocks into a cluster; the
    /// new run's first block.
    fn copy_at(&mut self, from: u64, n: u64, offset: u64, limit: u64) -> Option<u64> {
        let to = self.alloc.run(n, offset, limit)?;
        let bs = self.fs.geo.block_size as u64;
        let mut done = 0;
        while done < n {
            let k = COPY_CHUNK.min(n - done);
            let mut buf = vec![0u8; (k * bs) as usize];
            if self.source.read_at(&mut buf, (from + done) * bs).is_err() {
                buf.fill(0);
            }
            let _ = self.dev.write_at(&buf, (to + done) * bs);
            done += k;
        }
        Some(to)
    }

    /// One pointer of a block map at `level` (0: data). Returns whether `p` changed.
    fn map_ptr(&mut self, p: &mut u32, level: u32) -> bool {
        let geo = &self.fs.geo;
        let b = u64::from(*p);
        // (0 is a hole, not block 0: with 4 KiB blocks that is the superblock's.)
        if b == 0 || !geo.is_valid_block(b) {
            return false;
        }
        let mut cur = b;
        let mut changed = false;
        if self.dups.shared(b) {
            if let Some(n) = self.copy(b, 1, u64::from(u32::MAX) + 1) {
                self.dups.release(b);
                *p = n as u32;
                cur = n;
                changed = true;
            }
        }
        if level > 0 && self.reads > 0 {
            self.reads -= 1;
            let Some(mut buf) = self.fs.read_block(cur) else {
                return changed;
            };
            let mut dirty = false;
            for i in 0..buf.len() / 4 {
                let mut q = u32::from_le_bytes([
                    buf[4 * i],
                    buf[4 * i + 1],
                    buf[4 * i + 2],
                    buf[4 * i + 3],
                ]);
                if q != 0 && self.map_ptr(&mut q, level - 1) {
                    buf[4 * i..4 * i + 4].copy_from_slice(&q.to_le_bytes());
                    dirty = true;
                }
            }
            if dirty {
                let _ = self
                    .dev
                    .write_at(&buf, cur * u64::from(self.fs.geo.block_size));
            }
        }
        changed
    }

    /// Clone within one extent node held in `buf`; returns whether `buf` changed.
    fn extent_node(&mut self, buf: &mut [u8], budget: u16) -> bool {
        let geo = &self.fs.geo;
        let (leaf, n, depth) = match Node::parse(buf) {
            Ok(node) if budget > 0 => (node.is_leaf(), node.len(), node.depth()),
            _ => return false,
        };
        let mut changed = false;
        for i in 0..n {
            let off = 12 + 12 * i;
            let e = &mut buf[off..off + 12];
            if leaf {
                let raw_len = u16::from_le_bytes([e[4], e[5]]);
                let len = u64::from(if raw_len > ffsck_format::extent::INIT_MAX_LEN {
                    raw_len - ffsck_format::extent::INIT_MAX_LEN
                } else {
                    raw_len
                });
                let start = u64::from(u32::from_le_bytes([e[8], e[9], e[10], e[11]]))
                    | (u64::from(u16::from_le_bytes([e[6], e[7]])) << 32);
                if len == 0
                    || !geo.is_valid_block(start)
                    || start.saturating_add(len) > geo.blocks_count
                {
                    continue;
                }
                let shared: Vec<u64> = (start..start + len)
                    .filter(|&b| self.dups.shared(b))
                    .collect();
                if shared.is_empty() {
                    continue;
                }
                // With bigalloc the copy sits where the extent's logical offset in its
                // cluster says, as e2fsck places a clone: a misaligned extent is aligned.
                let lblk = u64::from(u32::from_le_bytes([e[0], e[1], e[2], e[3]]));
                let offset = lblk % u64::from(geo.cluster_ratio.max(1));
                if let Some(to) = self.copy_at(start, len, offset, u64::MAX) {
                    for b in shared {
                        self.dups.release(b);
                    }
                    e[6..8].copy_from_slice(&((to >> 32) as u16).to_le_bytes());
                    e[8..12].copy_from_slice(&(to as u32).to_le_bytes());
                    changed = true;
                }
            } else {
                let child = u64::from(u32::from_le_bytes([e[4], e[5], e[6], e[7]]))
                    | (u64::from(u16::from_le_bytes([e[8], e[9]])) << 32);
                if !geo.is_valid_block(child) {
                    continue;
                }
                let mut cur = child;
                let mut moved = false;
                if self.dups.shared(child) {
                    if let Some(to) = self.copy(child, 1, u64::MAX) {
                        self.dups.release(child);
                        e[4..8].copy_from_slice(&(to as u32).to_le_bytes());
                        e[8..10].copy_from_slice(&((to >> 32) as u16).to_le_bytes());
                        cur = to;
                        moved = true;
                        changed = true;
                    }
                }
                if self.reads == 0 {
                    continue;
                }
                self.reads -= 1;
                let Some(mut cbuf) = self.fs.read_block(cur) else {
                    continue;
                };
                if Node::parse(&cbuf).map_or(true, |c| depth == 0 || c.depth() != depth - 1) {
                    // Not a node of the next level: the check reports it; nothing to clone.
                    if moved {
                        write_node(self.fs, self.dev, self.seed, cur, &mut cbuf);
                    }
                    continue;
                }
                if self.extent_node(&mut cbuf, budget - 1) || moved {
                    write_node(self.fs, self.dev, self.seed, cur, &mut cbuf);
                }
            }
        }
        changed
    }
}

/// Does the inode map blocks through `i_block` (rather than keep data or a device number
/// there)?
fn has_mapping(fs: &Fs, inode: &RawInode) -> bool {
    let fl = inode.flags();
    if fl & iflags::INLINE_DATA != 0 && fs.geo.incompat.has(Incompat::INLINE_DATA) {
        return false;
    }
    match inode.file_type() {
        FileType::CharDev | FileType::BlockDev | FileType::Fifo | FileType::Socket => false,
        // As libext2fs guesses: with an xattr block only the size tells a slow symlink.
        FileType::Symlink if inode.file_acl(fs.geo.sixty_four_bit()) == 0 => {
            inode.blocks_raw(false) != 0
        }
        FileType::Symlink => {
            inode.size() >= 60 || (inode.size() > 4 && inode.i_block[1].get() == 0)
        }
        _ => true,
    }
}

/// Write an extent node block, with its tail checksum recomputed for the owning inode.
pub(super) fn write_node(fs: &Fs, dev: &dyn Device, seed: u32, blk: u64, buf: &mut [u8]) {
    if fs.has_metadata_csum() {
        ffsck_format::verify::set_extent_checksum(buf, seed);
    }
    let _ = dev.write_at(buf, blk * u64::from(fs.geo.block_size));
}
