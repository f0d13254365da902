//! Pass 1B-1D: find every owner of the multiply-claimed blocks pass 1 detected.
//!
//! Pass 1 only knows *that* a block was claimed twice. The per-group claim summaries (our
//! compact form of ffsck's cumulative bitmap snapshots) tell which inode groups can hold an
//! owner, so only those groups' inodes are read again.
//! Produces: `DupFacts` (owners per inode), and the 1B/1D findings.
//! Relies on: `Pass1Facts`. Frees: the rescanned inode tables.

use crate::ext4::blocks::{Damage, Index, Indirect, Mapping, NodeError, Span, Step, Visitor, Walk};
use crate::facts::Pass1Facts;
use crate::fs::Fs;
use crate::latch::Latches;
use crate::problem::{Latch, Problem as P};
use crate::report::{Findings, Note, Policy, ProblemCtx};
use ffsck_format::inode::{flags as iflags, FileType, RawInode};
use std::collections::{BTreeMap, BTreeSet};

/// Owners of multiply-claimed blocks.
#[derive(Default, Debug)]
pub struct DupFacts {
    /// inode → its multiply-claimed blocks, ascending.
    pub by_inode: BTreeMap<u32, Vec<u64>>,
}

/// Visit every block an inode's mapping claims (data and mapping metadata), bounded by the
/// file-system size so cyclic maps terminate.
pub fn for_each_claimed_block(fs: &Fs, ino: u32, inode: &RawInode, f: &mut dyn FnMut(u64)) {
    let geo = &fs.geo;
    // The map first, then the extended-attribute block (the order e2fsck lists them in).
    let fl = inode.flags();
    let mapped = fl & iflags::INLINE_DATA == 0
        && !(inode.file_type() == FileType::Symlink && inode.blocks_raw(false) == 0)
        && !matches!(
            inode.file_type(),
            FileType::CharDev | FileType::BlockDev | FileType::Fifo | FileType::Socket
        );
    if mapped {
        walk_map(fs, ino, inode, f);
    }
    let acl = inode.file_acl(fs.geo.sixty_four_bit());
    if acl != 0 && geo.is_valid_block(acl) {
        f(acl);
    }
}

/// The blocks of an inode's block map or extent tree, in file order.
fn walk_map(fs: &Fs, ino: u32, inode: &RawInode, f: &mut dyn FnMut(u64)) {
    let geo = &fs.geo;
    let fl = inode.flags();
    let mut v = Claimed {
        first: geo.first_data_block,
        end: geo.blocks_count,
        budget: geo.blocks_count,
        is_resize: ino == ffsck_format::ino::RESIZE && fl & iflags::EXTENTS == 0,
        f,
    };
    let mut w = Walk::over(fs);
    if fl & iflags::EXTENTS != 0 {
        w.extents(&inode.block_bytes(), &mut v);
    } else {
        w.block_map(&inode.block_bytes(), &mut v);
    }
}

/// The visitor of `for_each_claimed_block`: every block in range, mapping blocks included,
/// at most `budget` of them; damaged entries are passed over.
struct Claimed<'f> {
    first: u64,
    end: u64,
    budget: u64,
    /// The resize inode's block map: only its double-indirect block is its own (the rest are
    /// the reserved descriptor blocks and their backups, claimed as metadata).
    is_resize: bool,
    f: &'f mut dyn FnMut(u64),
}

impl Claimed<'_> {
    /// Claim one mapping block, if the budget allows.
    fn meta(&mut self, pblk: u64) -> Step {
        if self.budget == 0 {
            return Step::Stop;
        }
        self.budget -= 1;
        (self.f)(pblk);
        Step::Go
    }
    /// Claim the blocks of a run that lie in the file system.
    fn data(&mut self, m: Mapping) -> Step {
        if self.is_resize {
            return Step::Go;
        }
        if self.budget == 0 {
            return Step::Stop;
        }
        let n = m.len.min(self.end - m.pblk).min(self.budget);
        self.budget -= n;
        for b in m.pblk..m.pblk + n {
            (self.f)(b);
        }
        Step::Go
    }
}

impl Visitor for Claimed<'_> {
    fn mapping(&mut self, m: Mapping, _: &mut Span) -> Step {
        self.data(m)
    }
    fn indirect(&mut self, ind: Indirect) -> Step {
        if self.is_resize && ind.level != 2 {
            return Step::Skip;
        }
        match self.meta(ind.pblk) {
            Step::Go if self.is_resize => Step::Skip,
            s => s,
        }
    }
    fn index(&mut self, idx: Index, _: &mut Span) -> Step {
        // Nodes deeper than the format allows are not followed.
        if idx.level > u32::from(ffsck_format::extent::MAX_DEPTH) {
            return Step::Skip;
        }
        self.meta(idx.child)
    }
    fn damage(&mut self, d: Damage) -> Step {
        match d {
            // A child at an unexpected depth is still followed (the level cap bounds it).
            Damage::BadNode(_, NodeError::Depth { .. }) => Step::Go,
            Damage::BadNode(..) | Damage::TooDeep(_) | Damage::ReadCap => Step::Skip,
            // An extent starting at block 0 is in range when block 0 is a data block.
            Damage::DataOutOfRange(m) if m.pblk >= self.first && m.pblk < self.end => self.data(m),
            _ => Step::Go,
        }
    }
}

/// How much of an inode table pass 1B reads at once.
const TABLE_CHUNK: usize = 1 << 20;

pub fn run(fs: &Fs, p1: &Pass1Facts, policy: Policy, out: &mut Findings) -> DupFacts {
    let mut facts = DupFacts::default();
    if p1.dup_blocks.is_empty() {
        return facts;
    }
    let geo = &fs.geo;
    // On bigalloc a claim is on a cluster, as e2fsck's map of multiply-claimed blocks is: every
    // block of a cluster claimed twice is listed, whichever of its blocks pass 1 saw twice.
    let ratio = u64::from(geo.cluster_ratio.max(1));
    let dups: BTreeSet<u64> = p1.dup_blocks.iter().map(|&b| b / ratio).collect();
    let isz = geo.inode_size as usize;
    // Each owner's blocks as its map lists them, and its modification time, for the messages.
    let mut in_file_order: BTreeMap<u32, Vec<u64>> = BTreeMap::new();
    let mut mtimes: BTreeMap<u32, u64> = BTreeMap::new();
    for (g, summary) in p1.summaries.iter().enumerate() {
        // (A cluster's blocks are looked up one per bucket, and its last.)
        let step = 1u64 << p1.bucket_shift.min(63);
        let may_hold = |c: u64| {
            let (lo, hi) = (c * ratio, c * ratio + ratio - 1);
            (lo..=hi)
                .step_by(step.try_into().unwrap_or(usize::MAX))
                .chain(std::iter::once(hi))
                .any(|b| summary.may_contain(b, p1.bucket_shift))
        };
        if !dups.iter().any(|&c| may_hold(c)) {
            continue;
        }
        let first = g as u32 * geo.inodes_per_group + 1;
        let n = geo.inodes_per_group as usize;
        // The table is read a chunk at a time: its size is the superblock's (up to 8 times
        // the block size squared), not the device's.
        let bs = geo.block_size as usize;
        let per_block = bs / isz;
        let nblocks = n.div_ceil(per_block);
        let chunk_blocks = (TABLE_CHUNK / bs).max(1);
        let mut table = Vec::new();
        let mut loaded: Option<usize> = None;
        for i in 0..n {
            let ino = first + i as u32;
            if !p1.inode_used.get(u64::from(ino - 1)) {
                continue;
            }
            let chunk = i / per_block / chunk_blocks;
            if loaded != Some(chunk) {
                loaded = Some(chunk);
                let k = chunk_blocks.min(nblocks - chunk * chunk_blocks);
                let at = fs.groups[g].inode_table() + (chunk * chunk_blocks) as u64;
                fs.read_blocks_or_zeros(at, k, &mut table);
            }
            let off = (i - chunk * chunk_blocks * per_block) * isz;
            let Some(raw) = table.get(off..off + isz) else {
                continue;
            };
            let inode = RawInode::parse(raw);
            let mut mine = Vec::new();
            for_each_claimed_block(fs, ino, &inode, &mut |b| {
                if dups.contains(&(b / ratio)) {
                    mine.push(b);
                }
            });
            if !mine.is_empty() {
                in_file_order.insert(ino, mine.clone());
                mtimes.insert(ino, u64::from(inode.i_mtime.get()));
                mine.sort_unstable();
                facts.by_inode.insert(ino, mine);
            }
        }
    }
    let names = Names::of(fs, p1, &facts);
    let dup = Dups {
        ratio,
        facts: &facts,
        in_file_order: &in_file_order,
        mtimes: &mtimes,
        names: &names,
    };
    report(fs, p1, &dup, policy, out);
    facts
}

/// What pass 1B learnt, for the messages of 1B-1D.
struct Dups<'a> {
    /// Blocks per claim unit: 1, or the cluster ratio on bigalloc.
    ratio: u64,
    facts: &'a DupFacts,
    /// Each owner's multiply-claimed blocks in the order its map lists them.
    in_file_order: &'a BTreeMap<u32, Vec<u64>>,
    mtimes: &'a BTreeMap<u32, u64>,
    names: &'a Names,
}

impl Dups<'_> {
    /// How e2fsck names an owner: its path (pass 1C), with its modification time.
    fn ctx(&self, ino: u32) -> ProblemCtx {
        ProblemCtx {
            ino,
            blk: self.mtimes.get(&ino).copied().unwrap_or(0),
            path: Note(Some(self.names.path(ino))),
            ..Default::default()
        }
    }

    /// The other owners of `ino`'s blocks, as e2fsck lists them: its blocks from the last
    /// its map lists, and for each block the owners from the highest inode number down.
    fn sharers(&self, ino: u32) -> Vec<u32> {
        let mine = self.in_file_order.get(&ino).map_or(&[][..], Vec::as_slice);
        let r = self.ratio;
        let mut out: Vec<u32> = Vec::new();
        let mut seen = BTreeSet::new();
        for b in mine.iter().rev() {
            let holds = |blocks: &Vec<u64>| match r {
                1 => blocks.binary_search(b).is_ok(),
                _ => blocks.iter().any(|x| x / r == b / r),
            };
            for (&o, _) in self
                .facts
                .by_inode
                .iter()
                .rev()
                .filter(|(&o, blocks)| o != ino && holds(blocks))
            {
                if seen.insert(o) {
                    out.push(o);
                }
            }
        }
        out
    }
}

/// Pass 1B's list of one inode's blocks: runs of consecutive blocks in file order.
fn report_blocks(
    ino: u32,
    blocks: &[u64],
    policy: Policy,
    out: &mut Findings,
    latches: &mut Latches,
) {
    // The group's header ("Multiply-claimed block(s) in inode N:") is the latch's question,
    // raised by the first block; the end closes the line and re-arms it for the next inode.
    let mut i = 0;
    while i < blocks.len() {
        let mut j = i;
        while j + 1 < blocks.len() && blocks[j + 1] == blocks[j].wrapping_add(1) {
            j += 1;
        }
        let (problem, blk2) = if j > i {
            (P::P1B_DUP_RANGE, blocks[j])
        } else {
            (P::P1B_DUP_BLOCK, 0)
        };
        let ctx = ProblemCtx {
            ino,
            blk: blocks[i],
            blk2,
            ..Default::default()
        };
        latches.report(out, policy, problem, ctx);
        i = j + 1;
    }
    latches.end(out, policy, Latch::DupBlocks, ProblemCtx::ino(ino));
}

fn report(fs: &Fs, p1: &Pass1Facts, dup: &Dups, policy: Policy, out: &mut Findings) {
    use ffsck_format::ino::{BAD, RESIZE, ROOT};
    let facts = dup.facts;
    // Only the bad-blocks inode overlaps something (its own list of bad metadata blocks):
    // nothing to reconcile.
    if facts.by_inode.keys().all(|&i| i == BAD) {
        return;
    }
    // Pass 1B: the blocks of each inode, as single blocks and ranges. The bad-blocks inode is
    // an owner but not listed (as e2fsck).
    let mut latches = Latches::default();
    for (&ino, blocks) in dup.in_file_order.iter().filter(|(&i, _)| i != BAD) {
        report_blocks(ino, blocks, policy, out, &mut latches);
    }
    // Pass 1D: who shares with whom, and the clone/delete question per inode.
    out.report(
        policy,
        P::P1D_NUM_DUP_INODES,
        ProblemCtx {
            num: facts
                .by_inode
                .keys()
                .filter(|&&i| i >= fs.geo.first_ino || i == ROOT)
                .count() as u64,
            ..Default::default()
        },
    );
    // Claims left on each shared unit as the questions are answered: once an inode is cloned
    // or deleted, the others may be left sole owners (as e2fsck tracks it). A unit is a block,
    // or on bigalloc a cluster, claimed once by each inode that maps a block of it.
    let r = dup.ratio;
    let units = |blocks: &[u64]| -> Vec<u64> {
        if r == 1 {
            return blocks.to_vec();
        }
        let mut u: Vec<u64> = blocks.iter().map(|b| b / r).collect();
        u.dedup();
        u
    };
    let meta_unit = |u: u64| (u * r..u * r + r).any(|b| p1.metadata.get(b));
    let mut claims: BTreeMap<u64, u32> = BTreeMap::new();
    for blocks in facts.by_inode.values() {
        for u in units(blocks) {
            *claims.entry(u).or_insert(0) += 1;
        }
    }
    let release = |claims: &mut BTreeMap<u64, u32>, mine: &[u64]| {
        for u in mine {
            if let Some(c) = claims.get_mut(u) {
                *c = c.saturating_sub(1);
            }
        }
    };
    // Blocks free for the copies.
    let mut free = (fs.geo.first_data_block..fs.geo.blocks_count.min(p1.block_used.len()))
        .filter(|&b| !p1.block_used.get(b))
        .count() as u64;
    // The bad-blocks and resize inodes keep their blocks: no question about them.
    for (&ino, blocks) in facts
        .by_inode
        .iter()
        .filter(|(&i, _)| i != BAD && i != RESIZE)
    {
        let mine = units(blocks);
        let sharers = dup.sharers(ino);
        let shares_metadata = mine.iter().any(|&u| meta_unit(u));
        out.report(
            policy,
            P::P1D_DUP_FILE,
            ProblemCtx {
                num: mine.len() as u64,
                num2: sharers.len() as u64 + u64::from(shares_metadata),
                ..dup.ctx(ino)
            },
        );
        if shares_metadata {
            out.report(policy, P::P1D_SHARE_METADATA, ProblemCtx::ino(ino));
        }
        let others = sharers.len() as u64 + u64::from(shares_metadata);
        for o in sharers {
            out.report(policy, P::P1D_DUP_FILE_LIST, dup.ctx(o));
        }
        let still_shared = mine
            .iter()
            .filter(|&&u| meta_unit(u) || claims.get(&u).is_some_and(|&c| c > 1))
            .count() as u64;
        // On bigalloc a file that shares a cluster only with itself (a logical cluster mapped
        // to two physical ones, or a misaligned block) is cloned too, as e2fsck does; its
        // copies take whole clusters.
        let (dealt, need) = if r == 1 {
            (still_shared == 0, still_shared)
        } else {
            (still_shared == 0 && others != 0, mine.len() as u64 * r)
        };
        if dealt {
            out.report(policy, P::P1D_DUP_BLOCKS_DEALT, ProblemCtx::ino(ino));
            continue;
        }
        if out.report(policy, P::P1D_CLONE_QUESTION, ProblemCtx::ino(ino)) {
            if need <= free {
                free -= need;
                release(&mut claims, &mine);
                continue;
            }
            // No room for the copies: deleting the file is what is left, as e2fsck offers.
            out.report(policy, P::P1D_CLONE_ERROR, ProblemCtx::ino(ino));
        }
        if out.report(policy, P::P1D_DELETE_QUESTION, ProblemCtx::ino(ino)) {
            release(&mut claims, &mine);
        }
    }
}

/// Directory blocks pass 1C reads at most looking for the owners' names, and blocks one
/// path lookup reads at most.
const MAX_SCAN_BLOCKS: u64 = 1 << 20;
const MAX_LOOKUP_BLOCKS: u64 = 1 << 16;
/// Path components e2fsck follows up from a file at most.
const MAX_DEPTH: u32 = 32;

/// Pass 1C: the directory holding each owner, found by scanning the directory blocks for
/// entries naming it, and the owners' path names as e2fsck prints them.
struct Names {
    paths: BTreeMap<u32, String>,
}

impl Names {
    fn of(fs: &Fs, p1: &Pass1Facts, facts: &DupFacts) -> Names {
        use ffsck_format::ino::ROOT;
        let first_ino = fs.geo.first_ino;
        let mut dir_of: BTreeMap<u32, u32> = BTreeMap::new();
        let mut left = facts.by_inode.keys().filter(|&&i| i >= first_ino).count();
        for d in p1.dir_block_iter().take(MAX_SCAN_BLOCKS as usize) {
            if left == 0 {
                break;
            }
            if d.pblk == 0 {
                continue;
            }
            let Some(block) = fs.read_block(d.pblk) else {
                continue;
            };
            for e in crate::ext4::dir::leaf_entries(&block).good() {
                let dot = d.lblk == 0 && (e.name == b"." || e.name == b"..");
                if dot || e.inode < first_ino || !facts.by_inode.contains_key(&e.inode) {
                    continue;
                }
                if let std::collections::btree_map::Entry::Vacant(v) = dir_of.entry(e.inode) {
                    v.insert(d.ino);
                    left -= 1;
                }
            }
        }
        let mut paths = BTreeMap::new();
        for &ino in facts.by_inode.keys() {
            let path = match dir_of.get(&ino) {
                _ if ino == ROOT => "/".to_string(),
                Some(&dir) => pathname(fs, dir, ino, MAX_DEPTH),
                None if ino < first_ino => special_name(ino),
                None => "...".to_string(),
            };
            paths.insert(ino, path);
        }
        Names { paths }
    }

    fn path(&self, ino: u32) -> String {
        self.paths
            .get(&ino)
            .cloned()
            .unwrap_or_else(|| "???".into())
    }
}

/// e2fsck's names for the reserved inodes.
fn special_name(ino: u32) -> String {
    match ino {
        0 => "<The NULL inode>".into(),
        1 => "<The bad blocks inode>".into(),
        2 => "/".into(),
        3 => "<The user quota inode>".into(),
        4 => "<The group quota inode>".into(),
        5 => "<The boot loader inode>".into(),
        6 => "<The undelete directory inode>".into(),
        7 => "<The group descriptor inode>".into(),
        8 => "<The journal inode>".into(),
        n => format!("<Reserved inode {n}>"),
    }
}

/// The path of `ino`, an entry of directory `dir` ("/a/b"), found by following each
/// directory's ".." up to the root, as libext2fs names a file: a missing name reads "???",
/// a parent past `depth` "...", a "directory" that is not one "<dir>/<ino>".
fn pathname(fs: &Fs, dir: u32, ino: u32, depth: u32) -> String {
    if dir == ino {
        return if dir == ffsck_format::ino::ROOT {
            "/"
        } else {
            "."
        }
        .into();
    }
    if dir == 0 || depth == 0 {
        return "...".into();
    }
    let Some((parent, name)) = lookup(fs, dir, ino) else {
        return if ino == 0 {
            format!("<{dir}>")
        } else {
            format!("<{dir}>/<{ino}>")
        };
    };
    let above = pathname(fs, parent, dir, depth - 1);
    let above = if above == "/" { "" } else { above.as_str() };
    format!("{above}/{}", name.as_deref().unwrap_or("???"))
}

/// In directory `dir`: its parent (its ".." entry, 0 when none was found before the name)
/// and the name of the entry for `ino`. None when `dir` is not a directory.
fn lookup(fs: &Fs, dir: u32, ino: u32) -> Option<(u32, Option<String>)> {
    let raw = fs.read_inode(dir)?;
    let inode = RawInode::parse(&raw);
    if inode.file_type() != FileType::Directory || inode.flags() & iflags::INLINE_DATA != 0 {
        return None;
    }
    let (mut parent, mut name) = (0, None);
    let mut budget = MAX_LOOKUP_BLOCKS;
    let extents = inode.flags() & iflags::EXTENTS != 0;
    let mut visit = |v: crate::filemap::Visit| -> bool {
        let crate::filemap::Visit::Data { pblk, .. } = v else {
            return true;
        };
        budget = budget.saturating_sub(1);
        if let Some(b) = fs.read_block(pblk) {
            for e in crate::ext4::dir::leaf_entries(&b).good() {
                if e.name == b".." {
                    parent = e.inode;
                }
                if e.inode == ino {
                    name = Some(String::from_utf8_lossy(e.name).into_owned());
                    return false;
                }
            }
        }
        budget > 0
    };
    crate::filemap::walk(fs, &inode.block_bytes(), extents, false, &mut visit);
    Some((parent, name))
}
