//! Pass 2, indexed (htree) directories: per-block facts gathered in the parallel block phase
//! and the per-directory validation of the index done in the ordered merge.
//!
//! The block phase classifies each block of an indexed directory as root, interior node or
//! leaf, checks the node's own format (checksum, `limit`, `count`, child numbers, hash order)
//! and records the hash range of its names or index entries. The merge then links children to
//! parents and checks, per directory, that each block is referenced exactly once, sits at the
//! depth the root promises and holds only hashes inside the range its parent assigns it,
//! offering to clear the index when anything is wrong — the checks e2fsck's pass 2 makes.

use crate::facts::{kind, Pass1Facts};
use crate::fs::Fs;
use crate::problem::Problem as P;
use crate::report::{Findings, Policy, ProblemCtx};
use ffsck_format::dir::{self as fdir, hash, header_at, DxRootInfo, DX_ROOT_INFO_OFFSET};
use ffsck_format::inode::{flags as iflags, RawInode};
use ffsck_format::Incompat;
use rayon::prelude::*;
use std::collections::HashMap;
use zerocopy::FromBytes;

/// Child block numbers keep their top four bits for future use.
const DX_BLOCK_MASK: u32 = 0x0fff_ffff;
/// The last child of a node covers hashes up to this value.
const LAST_MAX_HASH: u32 = 0xffff_fffe;

/// One indexed directory as its root describes it.
#[derive(Clone, Copy, Debug, Default)]
pub struct DxDir {
    /// Logical blocks the directory maps (highest mapped block + 1).
    pub numblocks: u32,
    /// Hash version used for names, already switched to the unsigned form when `s_flags`
    /// says so; 0 when the root could not be read.
    pub hash_version: u8,
    /// Names are casefolded before hashing.
    pub casefold: bool,
}

/// What a block is within the index.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum DxKind {
    /// Not seen (a hole, or a block that could not be read).
    #[default]
    None,
    Root,
    Node,
    Leaf,
}

/// One index entry of an interior block that names a valid child.
#[derive(Clone, Copy, Debug)]
pub struct DxRef {
    /// Position in the node's table (0 has no hash of its own).
    pub index: u16,
    pub hash: u32,
    pub child: u32,
    /// Child named by the previous entry (0 for the first).
    pub previous: u32,
    /// Hash of the next entry, `None` for the last one.
    pub next_hash: Option<u32>,
}

/// Facts about one block of an indexed directory.
#[derive(Clone, Debug, Default)]
pub struct DxBlock {
    pub lblk: u32,
    pub kind: DxKind,
    /// Hash range of the names (leaves) or index entries (interior blocks).
    pub min_hash: u32,
    pub max_hash: u32,
    /// Root only: `indirect_levels + 1`.
    pub depth: u32,
    pub refs: Vec<DxRef>,
    /// A repair cleared the index while checking this block: skip the directory's checks.
    pub cleared: bool,
    /// Some name's hash is unknown to us: skip the hash-range checks of this directory.
    pub hash_unknown: bool,
}

/// Read the root of every indexed directory (in parallel) before the block phase, so leaf
/// blocks can be hashed without waiting for their root.
pub fn read_roots(fs: &Fs, p1: &Pass1Facts) -> HashMap<u32, DxDir> {
    // An indexed directory's kind is not a plain directory's, so it is among the other
    // kinds: without one there, no directory block need be looked at.
    let indexed = |&(_, k): &(u32, u8)| k & kind::HTREE != 0 && k & kind::INLINE == 0;
    if !p1.kinds.others().iter().any(indexed) {
        return HashMap::new();
    }
    read_roots_of(fs, p1.dir_block_iter(), p1)
}

/// `read_roots` for the directories owning `blocks` (every block of each of them), with the
/// kinds of `facts`: a pipelined pass 2 reads the roots of each batch pass 1 finishes.
pub fn read_roots_of<F: crate::facts::Facts + ?Sized>(
    fs: &Fs,
    blocks: impl IntoIterator<Item = crate::facts::DirBlock>,
    facts: &F,
) -> HashMap<u32, DxDir> {
    // (highest mapped block + 1, listed blocks including holes, root block)
    let mut dirs: HashMap<u32, (u32, u32, u64)> = HashMap::new();
    for db in blocks {
        let k = facts.kind(db.ino - 1);
        if k & kind::HTREE == 0 || k & kind::INLINE != 0 {
            continue;
        }
        let e = dirs.entry(db.ino).or_insert((0, 0, 0));
        e.1 = e.1.saturating_add(1);
        if db.pblk != 0 {
            e.0 = e.0.max(db.lblk.saturating_add(1));
            if db.lblk == 0 {
                e.2 = db.pblk;
            }
        }
    }
    let unsigned = fs.sb.unsigned_dir_hash();
    let list: Vec<(u32, (u32, u32, u64))> = dirs.into_iter().collect();
    list.into_par_iter()
        .map(|(ino, (numblocks, listed, root))| {
            let mut d = DxDir {
                // Pass 1 lists every block below the highest (holes too); the cap only
                // matters if it could not, and keeps the per-directory table bounded.
                numblocks: numblocks.min(listed),
                ..Default::default()
            };
            if let Some(raw) = crate::ext4::inode::read(fs, ino) {
                d.casefold = RawInode::parse(&raw).flags() & iflags::CASEFOLD != 0;
            }
            if root != 0 {
                if let Some(buf) = fs.read_block(root) {
                    if let Ok((info, _)) = DxRootInfo::read_from_prefix(&buf[DX_ROOT_INFO_OFFSET..])
                    {
                        d.hash_version = info.hash_version;
                        if unsigned && d.hash_version <= hash::TEA {
                            d.hash_version += 3;
                        }
                    }
                }
            }
            (ino, d)
        })
        .collect()
}

/// The hash of one name as the index stores it, `None` when we cannot compute it.
pub fn name_hash(fs: &Fs, dx: &DxDir, name: &[u8]) -> Option<u32> {
    name_hashes(fs, dx, name).map(|(major, _)| major)
}

/// The major and minor hashes of one name (see [`name_hash`]).
pub fn name_hashes(fs: &Fs, dx: &DxDir, name: &[u8]) -> Option<(u32, u32)> {
    let seed = fs.sb.s_hash_seed.map(|w| w.get());
    if dx.hash_version == hash::SIPHASH {
        return None;
    }
    if dx.casefold && !name.is_empty() {
        // Casefolding proper needs the Unicode tables; ASCII folds to lower case.
        if !name.is_ascii() {
            return None;
        }
        let folded = name.to_ascii_lowercase();
        return Some(
            ffsck_format::dirhash::name_hashes(dx.hash_version, &folded, &seed).unwrap_or((0, 0)),
        );
    }
    // An unknown version hashes every name to 0, as e2fsck's library does.
    Some(ffsck_format::dirhash::name_hashes(dx.hash_version, name, &seed).unwrap_or((0, 0)))
}

/// Is block `lblk > 0` of an indexed directory an interior node (one empty entry spanning the
/// block, followed by a table whose limit fits the block)?
pub fn is_node(buf: &[u8], bs: usize, csum: bool) -> bool {
    let Some(h) = header_at(buf, 0, bs as u32) else {
        return false;
    };
    let limit = usize::from(u16::from_le_bytes([buf[8], buf[9]]));
    let tail = if csum { fdir::DX_TAIL_SIZE } else { 0 };
    h.inode == 0 && h.rec_len as usize == bs && h.name_len == 0 && limit == (bs - 8 - tail) / 8
}

/// The library's checksum test for a root or interior block: a block that ends in a leaf tail
/// is checked as a leaf, one that parses as an index node as a node; anything else fails.
pub fn interior_csum_ok(buf: &[u8], bs: usize, seed: u32) -> bool {
    buf.get(..bs)
        .is_some_and(|b| ffsck_format::verify::dir_block_csum_ok(b, seed))
}

/// Check the format of a root (`lblk == 0`) or interior node and collect its index entries.
#[allow(clippy::too_many_arguments)]
pub fn parse_interior(
    fs: &Fs,
    policy: Policy,
    dir: u32,
    lblk: u32,
    buf: &[u8],
    dx: &DxDir,
    failed_csum: bool,
    out: &mut Findings,
) -> DxBlock {
    let bs = buf.len();
    let mut b = DxBlock {
        lblk,
        kind: if lblk == 0 {
            DxKind::Root
        } else {
            DxKind::Node
        },
        ..Default::default()
    };
    let ctx = |num2: u64| ProblemCtx {
        dir,
        ino: dir,
        num: u64::from(lblk),
        num2,
        ..Default::default()
    };
    let table = if lblk == 0 {
        let info_length = buf[DX_ROOT_INFO_OFFSET + 5];
        let levels = buf[DX_ROOT_INFO_OFFSET + 6];
        b.depth = u32::from(levels) + 1;
        // 24 + a u8 is always inside a block of at least 1 KiB.
        DX_ROOT_INFO_OFFSET + usize::from(info_length)
    } else {
        fdir::DX_NODE_ENTRIES_OFFSET
    };
    if failed_csum {
        let p = if lblk == 0 {
            P::P2_HTREE_ROOT_CSUM_INVALID
        } else {
            P::P2_HTREE_NODE_CSUM_INVALID
        };
        if out.report(policy, p, ctx(0)) {
            b.cleared = true;
            return b;
        }
    }
    let limit = u16::from_le_bytes([buf[table], buf[table + 1]]);
    let mut count = usize::from(u16::from_le_bytes([buf[table + 2], buf[table + 3]]));
    let tail = if fs.has_metadata_csum() {
        fdir::DX_TAIL_SIZE
    } else {
        0
    };
    let expect_limit = (bs - tail - table) / 8;
    if usize::from(limit) != expect_limit
        && out.report(policy, P::P2_HTREE_BAD_LIMIT, ctx(u64::from(limit)))
    {
        b.cleared = true;
        return b;
    }
    if count > expect_limit {
        if out.report(policy, P::P2_HTREE_BAD_COUNT, ctx(count as u64)) {
            b.cleared = true;
            return b;
        }
        count = expect_limit;
    }
    let entry = |i: usize| -> (u32, u32) {
        let p = table + i * 8;
        let h = u32::from_le_bytes([buf[p], buf[p + 1], buf[p + 2], buf[p + 3]]);
        let c = u32::from_le_bytes([buf[p + 4], buf[p + 5], buf[p + 6], buf[p + 7]]);
        (if i == 0 { 0 } else { h & !1 }, c & DX_BLOCK_MASK)
    };
    let (mut min_hash, mut max_hash) = (u32::MAX, 0u32);
    let mut hash = 0u32;
    for i in 0..count {
        let prev_hash = hash;
        let (h, child) = entry(i);
        hash = h;
        if child >= dx.numblocks {
            let c = ProblemCtx {
                blk: u64::from(child),
                ..ctx(0)
            };
            if out.report(policy, P::P2_HTREE_BADBLK, c) {
                b.cleared = true;
                return b;
            }
            continue;
        }
        if hash < prev_hash && out.report(policy, P::P2_HTREE_HASH_ORDER, ctx(0)) {
            b.cleared = true;
            return b;
        }
        min_hash = min_hash.min(hash);
        max_hash = max_hash.max(hash);
        b.refs.push(DxRef {
            index: i as u16,
            hash,
            child,
            previous: if i > 0 { entry(i - 1).1 } else { 0 },
            next_hash: (i + 1 < count).then(|| entry(i + 1).0),
        });
    }
    b.min_hash = min_hash;
    b.max_hash = max_hash;
    b
}

/// Per-block state of the directory-wide check.
#[derive(Clone, Copy, Default)]
struct Slot {
    kind: DxKind,
    first: bool,
    last: bool,
    referenced: bool,
    dup_ref: bool,
    parent: u32,
    previous: u32,
    min_hash: u32,
    max_hash: u32,
    node_min_hash: u32,
    node_max_hash: u32,
}

/// Validate one directory's index from its blocks' facts (in merge order) and report.
pub fn verify_dir(policy: Policy, dir: u32, dx: &DxDir, blocks: &[DxBlock], out: &mut Findings) {
    if blocks.iter().any(|b| b.cleared) || dx.numblocks == 0 {
        return;
    }
    // `numblocks` is capped by the directory's block list (see `read_roots`).
    let mut slots = vec![Slot::default(); dx.numblocks as usize];
    let n = slots.len();
    let mut depth = 0u32;
    let hash_known = !blocks.iter().any(|b| b.hash_unknown);
    for b in blocks {
        let Some(s) = slots.get_mut(b.lblk as usize) else {
            continue;
        };
        s.kind = b.kind;
        s.min_hash = b.min_hash;
        s.max_hash = b.max_hash;
        if b.kind == DxKind::Root {
            s.first = true;
            s.last = true;
            depth = b.depth;
        }
    }
    // Link children to parents: the root first, then interior nodes in block order.
    let order = blocks
        .iter()
        .filter(|b| b.kind == DxKind::Root)
        .chain(blocks.iter().filter(|b| b.kind == DxKind::Node));
    for b in order {
        for r in &b.refs {
            let Some(c) = slots.get_mut(r.child as usize) else {
                continue;
            };
            if c.referenced {
                c.dup_ref = true;
            } else {
                c.referenced = true;
                c.parent = b.lblk;
            }
            c.previous = r.previous;
            c.node_min_hash = r.hash;
            match r.next_hash {
                Some(h) => c.node_max_hash = h,
                None => {
                    c.node_max_hash = LAST_MAX_HASH;
                    c.last = true;
                }
            }
            if r.index == 0 {
                c.first = true;
            }
        }
    }
    if slots[0].referenced {
        slots[0].dup_ref = true;
    } else {
        slots[0].referenced = true;
    }
    // Leaves pass their range up to their parents, then (three-level trees) nodes do.
    for level in [DxKind::Leaf, DxKind::Node] {
        for i in 0..n {
            let s = slots[i];
            if s.kind != level {
                continue;
            }
            let p = (s.parent as usize).min(n - 1);
            if s.first {
                slots[p].min_hash = s.min_hash;
                let prev = slots[p].previous as usize;
                if prev != 0 && prev < n {
                    slots[prev].node_max_hash = slots[p].min_hash;
                }
            }
            if s.last {
                slots[p].max_hash = s.max_hash;
            }
        }
    }
    let mut bad = false;
    for (b, s) in slots.iter().enumerate() {
        let ctx = |num2: u64, blk: u64, blk2: u64| ProblemCtx {
            dir,
            num: b as u64,
            num2,
            blk,
            blk2,
            group: s.parent,
            ..Default::default()
        };
        if hash_known && !s.first && s.min_hash < s.node_min_hash {
            out.report(
                policy,
                P::P2_HTREE_MIN_HASH,
                ctx(0, u64::from(s.min_hash), u64::from(s.node_min_hash)),
            );
            bad = true;
        }
        if s.kind == DxKind::Leaf {
            // Walk up to the root; a bound stops parent cycles.
            let mut d = 0u32;
            let mut cur = b;
            while slots[cur].kind != DxKind::Root && (d as usize) <= n {
                cur = (slots[cur].parent as usize).min(n - 1);
                d += 1;
            }
            if d != depth {
                out.report(policy, P::P2_HTREE_BAD_DEPTH, ctx(u64::from(depth), 0, 0));
                bad = true;
            }
        }
        if hash_known && b != 0 && s.max_hash > s.node_max_hash {
            out.report(
                policy,
                P::P2_HTREE_MAX_HASH,
                ctx(0, u64::from(s.max_hash), u64::from(s.node_max_hash)),
            );
            bad = true;
        }
        if !s.referenced {
            out.report(policy, P::P2_HTREE_NOTREF, ctx(0, 0, 0));
            bad = true;
        } else if s.dup_ref {
            out.report(policy, P::P2_HTREE_DUPREF, ctx(0, 0, 0));
            bad = true;
        }
    }
    if bad {
        out.report(
            policy,
            P::P2_HTREE_CLEAR,
            ProblemCtx {
                dir,
                ino: dir,
                ..Default::default()
            },
        );
    }
}

/// The largest `indirect_levels` + 1 a root may declare.
pub fn max_levels(fs: &Fs) -> u8 {
    if fs.geo.incompat.has(Incompat::LARGEDIR) {
        3
    } else {
        2
    }
}
