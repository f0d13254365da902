//! e2fsck's pass 3A ("Optimizing directories"): a directory's entries written again as
//! e2fsck's rehash writes them, and the directory resized to the blocks that takes.
//!
//! - A directory of fewer than two blocks, one on a file system without `dir_index`, and one
//!   whose entries would not fill a block are written linear ("compressed"): `.` and `..`
//!   first, then the entries by inode number, each block filled to the last entry that fits.
//! - Otherwise the directory is indexed: the names are hashed with the file system's default
//!   hash (signed or unsigned as `s_flags` says, folded in a casefolded directory), sorted by
//!   hash, minor hash and name, and packed into leaves that keep the free share e2fsck keeps
//!   (`indexed_dir_slack_percentage`, 20 by default) so later insertions do not split them at
//!   once. Block 0 is the root; the leaves follow; interior nodes, when the root cannot point
//!   at every leaf, come after the leaves, one level or two, each filled to its limit.
//! - Every leaf gets its checksum tail, and the root and nodes their dx tail, with
//!   `metadata_csum`.
//! - The directory is then given exactly the blocks that need: blocks past the end are
//!   released (except `/lost+found`'s, which stay as empty blocks, as e2fsck keeps them), and
//!   missing ones are taken free near the directory's last block. The mapping (an extent tree
//!   or a block map) is written again through `extent_tree`'s and `newjournal`'s builders,
//!   `i_size`, `i_blocks`, the allocation facts and the quota usage follow, so the round's
//!   allocation rebuild leaves nothing for the next check to find.

use super::extent_tree::{self, Gathered};
use super::inode::{edit, read_raw};
use super::salvage::{clear_types, put_entry, put_table, put_tail, set_dx_csum, Entry};
use crate::engine::AllocFacts;
use crate::htree::{self, DxDir};
use crate::pass0::Pass0Facts;
use crate::relocate::first_free;
use ffsck_format::dir::{self as fdir, hash, DX_ROOT_ENTRIES_OFFSET, DX_ROOT_INFO_OFFSET};
use ffsck_format::group::BG_BLOCK_UNINIT;
use ffsck_format::inode::{flags as iflags, RawInode};
use ffsck_format::{Compat, Incompat, RoCompat};
use ffsck_io::Device;
use std::cmp::Ordering;

/// e2fsck's default free share of an indexed directory's leaves, in percent.
pub const DEFAULT_SLACK: u8 = 20;

/// The directory as e2fsck's rehash lays it out.
#[derive(Debug)]
pub(super) struct Layout {
    /// Every block, in logical order.
    pub blocks: Vec<Vec<u8>>,
    /// Indexed: block 0 is the root, leaves follow from block 1.
    pub indexed: bool,
    /// Leaf blocks (the others are the root and interior nodes).
    pub leaf: Vec<bool>,
}

/// One entry placed in a leaf: its record length and the entry.
type Placed<'a> = (usize, &'a Entry);

/// Whether the superblock's default directory hash is one a new index can be built with (an
/// unknown one, a damaged field say, makes e2fsck's rehash fail: "Directory hash unsupported").
pub(super) fn default_hash_supported(fs: &crate::fs::Fs) -> bool {
    fs.sb.s_def_hash_version <= hash::TEA_UNSIGNED
}

/// Lay out `entries` (`.` and `..` not among them) of directory `dir`, whose `..` names
/// `dotdot`, as e2fsck's rehash does. `size` is the directory's `i_size`, `flags` its
/// `i_flags`. `None` when a name cannot be hashed (the default hash is unknown, say) or the
/// index would need more levels than e2fsck builds.
pub(super) fn layout(
    p0: &Pass0Facts,
    dir: u32,
    flags: u32,
    size: u64,
    entries: &[Entry],
    dotdot: u32,
    slack_percent: u8,
) -> Option<Layout> {
    let fs = &p0.fs;
    let bs = fs.block_size();
    let csum = fs.has_metadata_csum();
    let cap = if csum { bs - fdir::TAIL_SIZE } else { bs };
    let dir_size: usize = entries
        .iter()
        .map(|e| fdir::rec_len_for(e.name.len()) as usize)
        .sum();
    let compress =
        !fs.geo.compat.has(Compat::DIR_INDEX) || size / (bs as u64) < 2 || dir_size < bs - 24;
    if compress {
        // `.` and `..`, then the entries by inode number (names in order among equal ones).
        let mut sorted: Vec<&Entry> = entries.iter().collect();
        sorted.sort_by(|a, b| name_order(a, b));
        sorted.sort_by_key(|e| e.ino);
        let dot = Entry {
            ino: dir,
            ftype: fdir::ft::DIR,
            name: b".".to_vec(),
        };
        let dotdot = Entry {
            ino: dotdot,
            ftype: fdir::ft::DIR,
            name: b"..".to_vec(),
        };
        let list: Vec<(u32, &Entry)> = [&dot, &dotdot]
            .into_iter()
            .chain(sorted)
            .map(|e| (0, e))
            .collect();
        let (leaves, _) = pack(&list, cap, fdir::rec_len_for(1) as usize);
        let blocks: Vec<Vec<u8>> = leaves.iter().map(|l| leaf_block(bs, l)).collect();
        let leaf = vec![true; blocks.len()];
        return Some(Layout {
            blocks,
            indexed: false,
            leaf,
        });
    }
    if !default_hash_supported(fs) {
        // e2fsck's rehash fails here: no name can be hashed for the new index.
        return None;
    }
    let mut version = fs.sb.s_def_hash_version;
    if version <= hash::TEA && fs.sb.unsigned_dir_hash() {
        version += 3;
    }
    let dx = DxDir {
        numblocks: 0,
        hash_version: version,
        casefold: flags & iflags::CASEFOLD != 0 && fs.geo.incompat.has(Incompat::CASEFOLD),
    };
    let mut hashed: Vec<(u32, u32, &Entry)> = Vec::with_capacity(entries.len());
    for e in entries {
        let (h, minor) = htree::name_hashes(fs, &dx, &e.name)?;
        hashed.push((h, minor, e));
    }
    hashed.sort_by(|a, b| {
        a.0.cmp(&b.0)
            .then(a.1.cmp(&b.1))
            .then_with(|| name_order(a.2, b.2))
    });
    let list: Vec<(u32, &Entry)> = hashed.iter().map(|&(h, _, e)| (h, e)).collect();
    let slack =
        (cap * usize::from(slack_percent.min(100)) / 100).max(fdir::rec_len_for(1) as usize);
    let (leaves, starts) = pack(&list, cap, slack);
    let dx_tail = if csum { fdir::DX_TAIL_SIZE } else { 0 };
    let root_limit = (bs - DX_ROOT_ENTRIES_OFFSET - dx_tail) / 8;
    let node_limit = (bs - fdir::DX_NODE_ENTRIES_OFFSET - dx_tail) / 8;
    let nleaves = leaves.len();
    // Leaf `i` is block `i + 1`; the first leaf's hash is never stored.
    let leaf_refs: Vec<(u32, u32)> = (0..nleaves).map(|i| (starts[i], (i + 1) as u32)).collect();
    let mut blocks: Vec<Vec<u8>> = Vec::with_capacity(nleaves + 2);
    blocks.push(root_block(bs, dir, dotdot, fs.sb.s_def_hash_version));
    for l in &leaves {
        blocks.push(leaf_block(bs, l));
    }
    let mut leaf = vec![false];
    leaf.extend(std::iter::repeat_n(true, nleaves));
    let levels: u8;
    let root_refs: Vec<(u32, u32)>;
    if nleaves <= root_limit {
        levels = 0;
        root_refs = leaf_refs;
    } else if nleaves <= root_limit * node_limit {
        levels = 1;
        root_refs = nodes(&mut blocks, &mut leaf, &leaf_refs, node_limit, bs);
    } else if nleaves <= root_limit * node_limit * node_limit {
        levels = 2;
        // Nodes are taken as the leaves first need them: a top node, then the nodes under
        // it, so a top node comes before the lower nodes it points at.
        let mut refs = Vec::new();
        for top in leaf_refs.chunks(node_limit * node_limit) {
            let at = blocks.len();
            blocks.push(node_block(bs));
            leaf.push(false);
            let lower = nodes(&mut blocks, &mut leaf, top, node_limit, bs);
            put_table(
                &mut blocks[at],
                fdir::DX_NODE_ENTRIES_OFFSET,
                node_limit,
                &lower,
            );
            refs.push((top[0].0, at as u32));
        }
        root_refs = refs;
    } else {
        return None;
    }
    blocks[0][DX_ROOT_INFO_OFFSET + 6] = levels;
    put_table(
        &mut blocks[0],
        DX_ROOT_ENTRIES_OFFSET,
        root_limit,
        &root_refs,
    );
    Some(Layout {
        blocks,
        indexed: true,
        leaf,
    })
}

/// e2fsck's order of equal hashes: the bytes of the names, the shorter first, then the higher
/// inode first.
fn name_order(a: &Entry, b: &Entry) -> Ordering {
    let n = a.name.len().min(b.name.len());
    a.name[..n]
        .cmp(&b.name[..n])
        .then(a.name.len().cmp(&b.name.len()))
        .then(b.ino.cmp(&a.ino))
}

/// Interior nodes over `refs`, each filled to `limit`, appended to `blocks`; returns the
/// references to them (the first hash under each, its block).
fn nodes(
    blocks: &mut Vec<Vec<u8>>,
    leaf: &mut Vec<bool>,
    refs: &[(u32, u32)],
    limit: usize,
    bs: usize,
) -> Vec<(u32, u32)> {
    let mut out = Vec::new();
    for chunk in refs.chunks(limit) {
        let at = blocks.len();
        let mut b = node_block(bs);
        put_table(&mut b, fdir::DX_NODE_ENTRIES_OFFSET, limit, chunk);
        blocks.push(b);
        leaf.push(false);
        out.push((chunk[0].0, at as u32));
    }
    out
}

/// An interior node's frame: one empty entry spanning the block (its table is put later).
fn node_block(bs: usize) -> Vec<u8> {
    let mut b = vec![0u8; bs];
    put_entry(&mut b, 0, bs, bs as u32, 0, 0, b"");
    b
}

/// The root's frame: `.`, `..` over the rest of the block, and the root info.
fn root_block(bs: usize, dir: u32, dotdot: u32, version: u8) -> Vec<u8> {
    let mut b = vec![0u8; bs];
    put_entry(&mut b, 0, 12, bs as u32, dir, fdir::ft::DIR, b".");
    put_entry(&mut b, 12, bs - 12, bs as u32, dotdot, fdir::ft::DIR, b"..");
    b[DX_ROOT_INFO_OFFSET + 4] = version;
    b[DX_ROOT_INFO_OFFSET + 5] = 8;
    b
}

/// A leaf holding `placed` (record lengths already final).
fn leaf_block(bs: usize, placed: &[Placed]) -> Vec<u8> {
    let mut b = vec![0u8; bs];
    let mut off = 0;
    for &(rec, e) in placed {
        put_entry(&mut b, off, rec, bs as u32, e.ino, e.ftype, &e.name);
        off += rec;
    }
    b
}

/// Fill leaves of `cap` usable bytes with `list` (hash, entry) in order: an entry goes to a
/// new leaf when it does not fit, and a leaf is closed once less than `slack` bytes are left,
/// its last entry taking the rest. Returns the leaves and each leaf's starting hash, with the
/// low bit set when it continues the previous leaf's last hash.
fn pack<'a>(
    list: &[(u32, &'a Entry)],
    cap: usize,
    slack: usize,
) -> (Vec<Vec<Placed<'a>>>, Vec<u32>) {
    let mut leaves: Vec<Vec<Placed>> = vec![Vec::new()];
    let mut starts = vec![0u32];
    let mut left = cap;
    let mut prev_hash = None;
    for &(h, e) in list {
        let rec = fdir::rec_len_for(e.name.len()) as usize;
        if rec > left {
            close(&mut leaves, left);
            leaves.push(Vec::new());
            starts.push(if prev_hash == Some(h) { h | 1 } else { h });
            left = cap;
        }
        let cur = leaves.last_mut().expect("one leaf at least");
        cur.push((rec, e));
        left -= rec;
        if left < slack {
            close(&mut leaves, left);
            left = 0;
        }
        prev_hash = Some(h);
    }
    close(&mut leaves, left);
    (leaves, starts)
}

/// The last entry of the last leaf takes `left` more bytes.
fn close(leaves: &mut [Vec<Placed>], left: usize) {
    if let Some(last) = leaves.last_mut().and_then(|l| l.last_mut()) {
        last.0 += left;
    }
}

/// Write `layout` as directory `dir`, whose blocks are `old` (logical 0.. in order): the
/// mapping is resized to the layout's blocks first (`keep_blocks`: never fewer than now, the
/// extra ones written empty). Returns `None`, having written nothing, when the directory
/// cannot be resized (no free block, a mapping this cannot rewrite, bigalloc); otherwise
/// whether blocks were taken or released.
pub(super) fn write(
    p0: &Pass0Facts,
    dev: &dyn Device,
    facts: Option<&mut AllocFacts>,
    dir: u32,
    old: &[u64],
    mut layout: Layout,
    keep_blocks: bool,
) -> Option<bool> {
    let fs = &p0.fs;
    let bs = fs.block_size();
    let csum = fs.has_metadata_csum();
    if keep_blocks && layout.blocks.len() < old.len() && !layout.indexed {
        let cap = if csum { bs - fdir::TAIL_SIZE } else { bs };
        while layout.blocks.len() < old.len() {
            let mut b = vec![0u8; bs];
            put_entry(&mut b, 0, cap, bs as u32, 0, 0, b"");
            layout.blocks.push(b);
            layout.leaf.push(true);
        }
    }
    let m = layout.blocks.len();
    let (data, changed) = if m == old.len() {
        (old.to_vec(), false)
    } else {
        (remap(p0, dev, facts?, dir, old, m)?, true)
    };
    let ftype_ok = fs.geo.incompat.has(Incompat::FILETYPE);
    for (i, mut buf) in layout.blocks.into_iter().enumerate() {
        if !ftype_ok {
            clear_types(&mut buf, bs);
        }
        if csum && layout.leaf[i] {
            put_tail(&mut buf);
            super::dirent::set_leaf_csum(p0, dev, dir, &mut buf);
        } else if csum {
            set_dx_csum(p0, dev, dir, &mut buf, i == 0);
        }
        let _ = dev.write_at(&buf, data[i] * bs as u64);
    }
    let indexed = layout.indexed;
    edit(p0, dev, dir, |n| {
        let f = n.i_flags.get();
        n.i_flags.set(if indexed {
            f | iflags::INDEX
        } else {
            f & !iflags::INDEX
        });
        let size = m as u64 * bs as u64;
        n.i_size_lo.set(size as u32);
        n.i_size_high.set((size >> 32) as u32);
    });
    Some(changed)
}

/// Give directory `dir` (blocks `old`, logical 0.. in order) exactly `m` blocks: the first
/// `min(m, old)` kept, the rest released or taken free near its last block, and its mapping
/// written again. Returns the new blocks in logical order.
fn remap(
    p0: &Pass0Facts,
    dev: &dyn Device,
    facts: &mut AllocFacts,
    dir: u32,
    old: &[u64],
    m: usize,
) -> Option<Vec<u64>> {
    let fs = &p0.fs;
    let geo = &fs.geo;
    let bs = fs.block_size();
    if geo.cluster_ratio > 1 || m == 0 {
        return None;
    }
    let (_, raw) = read_raw(p0, dev, dir)?;
    let inode = RawInode::parse(&raw);
    let fl = inode.flags();
    let extents = fl & iflags::EXTENTS != 0;
    let mut got = Gathered::default();
    let mut walk = crate::ext4::blocks::Walk::over(fs);
    let iblock = inode.block_bytes();
    if extents {
        walk.csum_seed = fs
            .has_metadata_csum()
            .then(|| extent_tree::seed_of(fs, dir, inode.i_generation.get()));
        walk.extents(&iblock, &mut got);
    } else {
        walk.block_map(&iblock, &mut got);
    }
    if got.damaged || got.runs.iter().any(|r| r.uninit) {
        return None;
    }
    // The mapping must be exactly the blocks the rebuild read.
    let mut mapped = Vec::with_capacity(old.len());
    for r in &got.runs {
        if r.lblk != mapped.len() as u64 || mapped.len() as u64 + r.len > old.len() as u64 {
            return None;
        }
        mapped.extend(r.pblk..r.pblk + r.len);
    }
    if mapped != old {
        return None;
    }
    let mut old_meta = got.blocks;
    old_meta.sort_unstable();
    old_meta.dedup();
    let mut data: Vec<u64> = old.iter().copied().take(m).collect();
    let mut taken: Vec<u64> = Vec::new();
    let mut goal = old.last().map_or(geo.first_data_block, |&b| b + 1);
    while data.len() < m {
        let Some(b) = take_near(p0, facts, goal) else {
            undo(facts, &taken);
            return None;
        };
        facts.block_used.set(b);
        taken.push(b);
        data.push(b);
        goal = b + 1;
    }
    let mut new_meta: Vec<u64> = Vec::new();
    let root: [u8; 60] = if extents {
        let runs = runs_of(&data);
        let leaves = extent_tree::leaf_entries(&runs)?;
        let need = extent_tree::nodes_needed(leaves.len(), extent_tree::per_node(fs));
        new_meta.extend(old_meta.iter().copied().take(need));
        while new_meta.len() < need {
            let Some(b) = take_near(p0, facts, goal) else {
                undo(facts, &taken);
                return None;
            };
            facts.block_used.set(b);
            taken.push(b);
            new_meta.push(b);
        }
        let seed = extent_tree::seed_of(fs, dir, inode.i_generation.get());
        let Some(r) = extent_tree::rebuild(fs, dev, seed, &leaves, &new_meta) else {
            undo(facts, &taken);
            return None;
        };
        r
    } else {
        let first = geo.first_data_block;
        let Some((r, tables)) =
            super::newjournal::map_given(&mut facts.block_used, first, geo.blocks_count, &data, bs)
        else {
            undo(facts, &taken);
            return None;
        };
        for (b, t) in &tables {
            let _ = dev.write_at(t, b * bs as u64);
            new_meta.push(*b);
            taken.push(*b);
        }
        r
    };
    // Released: data past `m` and the mapping blocks no longer used.
    let released: Vec<u64> = old
        .iter()
        .skip(m)
        .chain(old_meta.iter().filter(|b| !new_meta.contains(b)))
        .copied()
        .collect();
    for &b in &released {
        facts.block_used.clear(b);
    }
    let huge = geo.ro_compat.has(RoCompat::HUGE_FILE);
    let per_block = if huge && fl & iflags::HUGE_FILE != 0 {
        1
    } else {
        (bs / 512) as u64
    };
    let count = (data.len() + new_meta.len()) as u64
        + u64::from(inode.file_acl(fs.geo.sixty_four_bit()) != 0);
    let was = (old.len() + old_meta.len()) as u64
        + u64::from(inode.file_acl(fs.geo.sixty_four_bit()) != 0);
    edit(p0, dev, dir, |n| {
        n.set_block_bytes(&root);
        let units = count * per_block;
        n.i_blocks_lo.set(units as u32);
        if huge {
            n.l_i_blocks_high.set((units >> 32) as u16);
        }
    });
    if crate::quota::charged(fs, dir, &inode) {
        let bytes = |n: u64| n * u64::from(geo.block_size);
        if was > count {
            facts.quota.uncharge(&raw, bytes(was - count));
        } else {
            facts.quota.charge(&raw, bytes(count - was), 0);
        }
    }
    Some(data)
}

/// Give back the blocks taken for a resize that could not be made.
fn undo(facts: &mut AllocFacts, taken: &[u64]) {
    for &b in taken {
        facts.block_used.clear(b);
    }
}

/// Contiguous runs of `data` (logical block `i` is `data[i]`).
fn runs_of(data: &[u64]) -> Vec<crate::ext4::blocks::Mapping> {
    let mut runs: Vec<crate::ext4::blocks::Mapping> = Vec::new();
    for (i, &b) in data.iter().enumerate() {
        match runs.last_mut() {
            Some(r) if r.pblk + r.len == b => r.len += 1,
            _ => runs.push(crate::ext4::blocks::Mapping {
                lblk: i as u64,
                pblk: b,
                len: 1,
                uninit: false,
            }),
        }
    }
    runs
}

/// A free block at or after `goal` (wrapping once around the file system), outside groups
/// whose block bitmap is uninitialised or could not be read, as libext2fs's allocator looks.
fn take_near(p0: &Pass0Facts, facts: &AllocFacts, goal: u64) -> Option<u64> {
    let fs = &p0.fs;
    let geo = &fs.geo;
    let csum = fs.has_group_csum();
    let goal = goal.clamp(geo.first_data_block, geo.blocks_count.saturating_sub(1));
    let g0 = geo.group_of_block(goal);
    for k in 0..=geo.group_count {
        let g = (g0 + k) % geo.group_count.max(1);
        let Some(desc) = fs.groups.get(g as usize) else {
            continue;
        };
        if (csum && desc.flags() & BG_BLOCK_UNINIT != 0) || !facts.block_bitmap_usable(p0, g) {
            continue;
        }
        let (a, z) = (geo.group_first_block(g), geo.group_last_block(g));
        let lo = if k == 0 { goal.max(a) } else { a };
        if let Some(b) = first_free(&facts.block_used, lo.max(1), z, 1, 1) {
            return Some(b);
        }
        if k == geo.group_count {
            break;
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(ino: u32, name: &str) -> Entry {
        Entry {
            ino,
            ftype: 1,
            name: name.as_bytes().to_vec(),
        }
    }

    /// Leaves close once less than the slack is left (the last entry taking the rest); an
    /// entry that does not fit opens a new leaf, whose hash carries the collision bit when it
    /// continues the previous leaf's last hash.
    #[test]
    fn leaves_keep_the_slack_and_mark_continued_hashes() {
        // Names of 5 to 8 bytes: 16-byte records.
        let es: Vec<Entry> = (0..9).map(|i| entry(20 + i, &format!("name{i}"))).collect();
        let list: Vec<(u32, &Entry)> = es
            .iter()
            .enumerate()
            .map(|(i, e)| (if i < 5 { 0x100 * i as u32 } else { 0x500 }, e))
            .collect();
        let (leaves, starts) = pack(&list, 100, 20);
        // 100 bytes: after five records 20 are left, not less than the slack; the sixth
        // leaves 4 and closes the leaf at 20 bytes.
        let recs: Vec<Vec<usize>> = leaves
            .iter()
            .map(|l| l.iter().map(|p| p.0).collect())
            .collect();
        assert_eq!(recs, vec![vec![16, 16, 16, 16, 16, 20], vec![16, 16, 68]]);
        assert_eq!(starts, vec![0, 0x500 | 1]);
        // Without a hash change at the cut the start is the hash itself.
        let list2: Vec<(u32, &Entry)> = es
            .iter()
            .enumerate()
            .map(|(i, e)| (i as u32 * 2, e))
            .collect();
        let (_, starts2) = pack(&list2, 100, 20);
        assert_eq!(starts2, vec![0, 12]);
    }

    /// Equal hashes sort by name bytes, the shorter name first, then the higher inode.
    #[test]
    fn equal_hashes_sort_as_e2fsck_sorts_them() {
        let (a, ab, ab2, b) = (entry(5, "a"), entry(3, "ab"), entry(9, "ab"), entry(1, "b"));
        let mut v = [&b, &ab, &a, &ab2];
        v.sort_by(|x, y| name_order(x, y));
        let got: Vec<(u32, &[u8])> = v.iter().map(|e| (e.ino, &e.name[..])).collect();
        assert_eq!(got, vec![(5, &b"a"[..]), (9, b"ab"), (3, b"ab"), (1, b"b")]);
    }
}
