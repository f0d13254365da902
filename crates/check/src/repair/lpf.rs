//! Make `/lost+found` usable before reconnecting, as e2fsck's pass 3 does: when it is missing,
//! create it (a new directory inode, mode 0700, with one block holding `.` and `..`, linked in
//! the root directory); when the name is taken by something that cannot serve (not a
//! directory, encrypted, inline data), unlink that first and create a new one.
//!
//! The new inode and block are taken from what the check found free and marked used at once:
//! in the on-disk bitmaps, group and superblock counts (with their checksums) and in the
//! round's allocation facts, so a rebuild of the allocation metadata in the same round keeps
//! them. The unlinked inode is reconnected by the next round (`P4_UNATTACHED_INODE`).

use super::connect::insert;
use super::inode::edit;
use super::inode::read_inode;
use super::Dirs;
use crate::engine::AllocFacts;
use crate::ext4::dir as edir;
use crate::pass0::Pass0Facts;
use crate::problem::{Fixer, Problem as P};
use crate::report::{Finding, ProblemCtx};
use ffsck_format::dir as fdir;
use ffsck_format::group::{BG_BLOCK_UNINIT, BG_INODE_UNINIT};
use ffsck_format::inode::{flags, FileType, RawInode};
use ffsck_format::{ino::ROOT, Incompat};
use ffsck_io::Device;
use std::collections::HashSet;
use zerocopy::IntoBytes;

const NAME: &[u8] = b"lost+found";

/// Whether the root directory's entry `lost+found` can serve, and what it names.
enum Found {
    Usable,
    Missing,
    /// The entry names an inode that cannot serve: the problem to report and the inode.
    Unusable(P, u32),
}

fn read_block(p0: &Pass0Facts, dev: &dyn Device, pblk: u64) -> Option<Vec<u8>> {
    let fs = &p0.fs;
    let bs = fs.block_size();
    if pblk == 0 || pblk >= fs.geo.blocks_count {
        return None;
    }
    let mut b = vec![0u8; bs];
    dev.read_at(&mut b, pblk * bs as u64).ok().map(|_| b)
}

/// The inode the root directory's entry `lost+found` names, if any.
pub(super) fn inode_of(p0: &Pass0Facts, dev: &dyn Device, dirs: &Dirs) -> Option<u32> {
    dirs.blocks(ROOT).into_iter().find_map(|pblk| {
        let b = read_block(p0, dev, pblk)?;
        let found = edir::leaf_entries(&b)
            .good()
            .find(|e| e.inode != 0 && e.name == NAME)
            .map(|e| e.inode);
        found
    })
}

fn lookup(p0: &Pass0Facts, dev: &dyn Device, dirs: &Dirs) -> Found {
    let Some(ino) = inode_of(p0, dev, dirs) else {
        return Found::Missing;
    };
    let Some(inode) = read_inode(p0, dev, ino) else {
        return Found::Unusable(P::P3_LPF_NOTDIR, ino);
    };
    if inode.flags() & flags::INLINE_DATA != 0 {
        return Found::Unusable(P::P3_LPF_INLINE_DATA, ino);
    }
    if inode.flags() & flags::ENCRYPT != 0 {
        return Found::Unusable(P::P3_LPF_ENCRYPTED, ino);
    }
    if inode.file_type() != FileType::Directory || dirs.blocks(ino).is_empty() {
        return Found::Unusable(P::P3_LPF_NOTDIR, ino);
    }
    Found::Usable
}

/// The fix this step would make for `problem`, to put to the policy or the person asked.
fn proposal(problem: P, ctx: ProblemCtx) -> Finding {
    Finding {
        problem,
        ctx,
        fixed: true,
    }
}

/// Where the findings of this step go: before the first finding of pass 4, so they read as the
/// end of pass 3.
pub(super) fn position(findings: &[Finding]) -> usize {
    findings
        .iter()
        .position(|f| f.problem.pass() >= 4)
        .unwrap_or(findings.len())
}

/// Find `/lost+found`; when it is missing or cannot serve, report it, and when `answer` says
/// yes (the policy, or the person asked), make a new one in `dev` (recording it in `dirs` and `facts`). Returns the
/// findings added and the index in `findings` they were inserted at.
pub fn ensure(
    p0: &Pass0Facts,
    dev: &dyn Device,
    dirs: &mut Dirs,
    facts: &mut AllocFacts,
    findings: &mut Vec<Finding>,
    answer: &mut dyn FnMut(&Finding) -> bool,
    lpf_root: &mut bool,
) -> Option<(usize, usize)> {
    if !dirs.0.contains_key(&ROOT) || *lpf_root {
        return None;
    }
    // Entries are only placed in plain leaf blocks: an indexed or inline root is left to
    // e2fsck.
    if read_inode(p0, dev, ROOT)
        .is_none_or(|r| r.flags() & (flags::INDEX | flags::INLINE_DATA) != 0)
    {
        return None;
    }
    let found = lookup(p0, dev, dirs);
    if matches!(found, Found::Usable) {
        return None;
    }
    // Another fix of this round edits the root directory's entries or its inode's fields:
    // wait for its result.
    if findings.iter().any(|f| {
        f.fixed
            && ((f.problem.pass() <= 2 && (f.ctx.ino == ROOT || f.ctx.dir == ROOT))
                || (f.problem.pass() == 3 && f.ctx.ino == ROOT && f.problem != P::P3_BAD_DOT_DOT))
    }) {
        return None;
    }
    let at = position(findings);
    let mut added = Vec::new();
    let old = if let Found::Unusable(p, ino) = found {
        let yes = answer(&proposal(p, ProblemCtx::ino(ino)));
        added.push(Finding {
            problem: p,
            ctx: ProblemCtx::ino(ino),
            fixed: yes,
        });
        if !yes {
            let n = added.len();
            findings.splice(at..at, added);
            return Some((at, n));
        }
        ino
    } else {
        0
    };
    let mut yes = answer(&proposal(P::P3_NO_LF_DIR, ProblemCtx::default()));
    // Taken now, so a failure answers no rather than claiming a fix it did not make.
    let fresh = if yes {
        pick_inode(p0, facts, findings.iter()).zip(pick_block(p0, facts))
    } else {
        None
    };
    // No room for a new directory: e2fsck then offers the root directory for lost files.
    if yes && fresh.is_none() && old == 0 {
        *lpf_root = answer(&proposal(P::P3_LPF_NO_SPACE, ProblemCtx::default()));
        let at = position(findings);
        let found = [
            (P::P3_NO_LF_DIR, true),
            (P::P3_LPF_NO_SPACE, *lpf_root),
            (P::P3_NO_SPACE_TO_RECOVER, false),
        ]
        .map(|(problem, fixed)| Finding {
            problem,
            ctx: ProblemCtx::default(),
            fixed,
        });
        let n = found.len();
        findings.splice(at..at, found);
        return Some((at, n));
    }
    yes &= fresh.is_some();
    // Without a place for the new entry, nothing is unlinked either.
    let root_blocks = dirs.blocks(ROOT);
    let mut blocks: Vec<(u64, Vec<u8>)> = root_blocks
        .iter()
        .filter_map(|&b| read_block(p0, dev, b).map(|d| (b, d)))
        .collect();
    if yes && old != 0 {
        yes = blocks.iter_mut().any(|(_, b)| unlink(b, old));
    }
    let filetype = p0.fs.geo.incompat.has(Incompat::FILETYPE);
    let ft = if filetype { fdir::ft::DIR } else { 0 };
    if let (true, Some((ino, blk))) = (yes, fresh) {
        yes = blocks.iter_mut().any(|(_, b)| insert(b, ino, ft, NAME));
        if !yes {
            // A full root directory grows by a block first (not the one the new directory
            // takes).
            facts.block_used.set(blk);
            if grow(p0, dev, dirs, facts, ROOT) {
                let last = dirs.blocks(ROOT).last().copied();
                if let Some((nb, mut d)) =
                    last.and_then(|nb| read_block(p0, dev, nb).map(|d| (nb, d)))
                {
                    yes = insert(&mut d, ino, ft, NAME);
                    blocks.push((nb, d));
                }
            }
            facts.block_used.clear(blk);
        }
    }
    if let Some(f) = added.first_mut() {
        f.fixed = yes;
    }
    added.push(Finding {
        problem: P::P3_NO_LF_DIR,
        ctx: ProblemCtx::default(),
        fixed: yes,
    });
    if let (true, Some((ino, blk))) = (yes, fresh) {
        create(p0, dev, ino, blk, filetype);
        for (pblk, b) in &mut blocks {
            super::dirent::set_leaf_csum(p0, dev, ROOT, b);
            let _ = dev.write_at(b, *pblk * p0.fs.block_size() as u64);
        }
        // The new subdirectory links the root, as e2fsck's pass 3 does: the root's count
        // pass 4 judged (before it) now reads one more, and so does what it counted (the new
        // `..`). The root's count is asked once, on the counts after the new directory.
        edit(p0, dev, ROOT, |i| {
            i.i_links_count.set(i.i_links_count.get().saturating_add(1))
        });
        for f in findings
            .iter_mut()
            .filter(|f| f.problem == P::P4_BAD_REF_COUNT && f.ctx.ino == ROOT)
        {
            f.ctx.num = (f.ctx.num + 1).min(u64::from(u16::MAX));
            f.ctx.num2 += 1;
        }
        mark_inode(p0, dev, ino, true);
        mark_block(p0, dev, blk);
        facts.inode_used.set(u64::from(ino - 1));
        facts.block_used.set(blk);
        let g = p0.fs.geo.group_of_inode(ino) as usize;
        if let Some(d) = facts.dirs_per_group.get_mut(g) {
            *d += 1;
        }
        dirs.0.insert(ino, vec![(0, blk)]);
    }
    let n = added.len();
    findings.splice(at..at, added);
    Some((at, n))
}

/// Expand `/lost+found` while this round's accepted reconnections do not all fit in it,
/// reporting each expansion. Returns the findings added and where they were inserted.
pub fn make_room(
    p0: &Pass0Facts,
    dev: &dyn Device,
    dirs: &mut Dirs,
    facts: &mut AllocFacts,
    findings: &mut Vec<Finding>,
    answer: &mut dyn FnMut(&Finding) -> bool,
) -> Option<(usize, usize)> {
    let wanted: Vec<u32> = findings
        .iter()
        .filter(|f| f.fixed && f.problem.fixed_by(Fixer::Connect))
        .map(|f| f.ctx.ino)
        .collect();
    if wanted.is_empty() {
        return None;
    }
    let mut added = Vec::new();
    // Each new block holds many entries: a few expansions place any realistic number.
    for _ in 0..64 {
        let plan = super::connect::plan(p0, dev, dirs, findings, false);
        let lpf = plan.lpf;
        if lpf == 0 {
            break;
        }
        let left = wanted.iter().any(|&i| {
            i != lpf
                && !plan.linked.contains(&i)
                && read_inode(p0, dev, i).is_some_and(|r| r.file_type() != FileType::Bad)
        });
        if !left {
            break;
        }
        let yes = answer(&proposal(P::P3_EXPAND_LF_DIR, ProblemCtx::ino(lpf)))
            && grow(p0, dev, dirs, facts, lpf);
        added.push(Finding {
            problem: P::P3_EXPAND_LF_DIR,
            ctx: ProblemCtx::ino(lpf),
            fixed: yes,
        });
        if !yes {
            break;
        }
    }
    if added.is_empty() {
        return None;
    }
    let at = position(findings);
    let n = added.len();
    findings.splice(at..at, added);
    Some((at, n))
}

/// Remove the entry of `ino` named `lost+found` from a leaf block.
fn unlink(b: &mut [u8], ino: u32) -> bool {
    let mut hit = None;
    let mut prev = None;
    for e in edir::leaf_entries(b).good() {
        if e.inode == ino && e.name == NAME {
            hit = Some((prev, e.off));
            break;
        }
        prev = Some(e.off);
    }
    let Some((prev, off)) = hit else {
        return false;
    };
    let bs = b.len() as u32;
    match prev {
        // Give the space to the entry before it.
        Some(p) => {
            let raw = u16::from_le_bytes([b[p + 4], b[p + 5]]);
            let mine = u16::from_le_bytes([b[off + 4], b[off + 5]]);
            let len = fdir::decode_rec_len(raw, bs) + fdir::decode_rec_len(mine, bs);
            b[p + 4..p + 6].copy_from_slice(&fdir::encode_rec_len(len, bs).to_le_bytes());
        }
        None => b[off..off + 4].copy_from_slice(&0u32.to_le_bytes()),
    }
    true
}

/// A free inode for the new directory, from what the check found in use, outside
/// uninitialised groups and the inodes any finding of this round names.
pub(super) fn pick_inode<'a>(
    p0: &Pass0Facts,
    facts: &AllocFacts,
    findings: impl IntoIterator<Item = &'a Finding>,
) -> Option<u32> {
    let fs = &p0.fs;
    let geo = &fs.geo;
    let csum = fs.has_group_csum();
    let named: HashSet<u32> = findings
        .into_iter()
        .flat_map(|f| [f.ctx.ino, f.ctx.ino2, f.ctx.dir])
        .collect();
    let ipg = geo.inodes_per_group;
    for g in 0..geo.group_count {
        let gd = &fs.groups[g as usize];
        if !facts.inode_bitmap_usable(p0, g) {
            continue;
        }
        // Past `itable_unused` is fine: marking the inode shrinks it. An uninitialised
        // group's bitmap is not on disk, so it is skipped (unless its descriptor cannot vouch
        // for the flag: the repair rebuilds that group's bitmap).
        if csum && gd.flags() & BG_INODE_UNINIT != 0 && p0.groups[g as usize].csum_ok {
            continue;
        }
        let first = g * ipg + 1;
        let ino = (first..first + ipg).find(|&i| {
            i >= geo.first_ino
                && i <= geo.inodes_count
                && !facts.inode_used.get(u64::from(i - 1))
                && !named.contains(&i)
        });
        if ino.is_some() {
            return ino;
        }
    }
    None
}

/// A free block, from what the check found in use, outside uninitialised groups.
pub(super) fn pick_block(p0: &Pass0Facts, facts: &AllocFacts) -> Option<u64> {
    let fs = &p0.fs;
    let geo = &fs.geo;
    let csum = fs.has_group_csum();
    let ratio = u64::from(geo.cluster_ratio.max(1));
    for g in 0..geo.group_count {
        if (csum
            && fs.groups[g as usize].flags() & BG_BLOCK_UNINIT != 0
            && p0.groups[g as usize].csum_ok)
            || !facts.block_bitmap_usable(p0, g)
        {
            continue;
        }
        let (a, z) = (geo.group_first_block(g), geo.group_last_block(g));
        // With bigalloc, the first block of a cluster none of whose blocks is in use.
        let lo = a.max(geo.first_data_block.max(1));
        let blk = crate::relocate::first_free(&facts.block_used, lo, z, 1, ratio);
        if blk.is_some() {
            return blk;
        }
    }
    None
}

/// Give directory `dir` one more (empty) block at its end, as e2fsck expands a full
/// directory: the block is taken free and marked used, mapped in the inode (a direct block or
/// a depth-0 extent), and the size and block count grow by one block.
pub fn grow(
    p0: &Pass0Facts,
    dev: &dyn Device,
    dirs: &mut Dirs,
    facts: &mut AllocFacts,
    dir: u32,
) -> bool {
    let fs = &p0.fs;
    let bs = fs.block_size();
    let Some(inode) = read_inode(p0, dev, dir) else {
        return false;
    };
    // A block of its own per cluster is not how bigalloc grows a file: not done here.
    if fs.geo.cluster_ratio > 1 {
        return false;
    }
    if inode.flags() & (flags::INLINE_DATA | flags::INDEX) != 0 || inode.size() % bs as u64 != 0 {
        return false;
    }
    let n = inode.size() / bs as u64;
    if dirs.blocks(dir).len() as u64 != n || n >= u64::from(u32::MAX) {
        return false;
    }
    let Some(blk) = pick_block(p0, facts) else {
        return false;
    };
    let mut ib = inode.block_bytes();
    // Blocks taken beyond the directory block (a new indirect block) and that block.
    let mut extra = 0u64;
    let mut indirect: Option<(u64, Vec<u8>)> = None;
    let word = |ib: &[u8], o: usize| u16::from_le_bytes([ib[o], ib[o + 1]]);
    if inode.flags() & flags::EXTENTS != 0 {
        let (magic, entries, max, depth) = (word(&ib, 0), word(&ib, 2), word(&ib, 4), word(&ib, 6));
        if magic != 0xF30A || depth != 0 || entries > max || max > 4 {
            return false;
        }
        let e = usize::from(entries);
        let joined = e > 0 && {
            let o = 12 * e;
            let lblk = u64::from(u32::from_le_bytes([ib[o], ib[o + 1], ib[o + 2], ib[o + 3]]));
            let len = word(&ib, o + 4);
            let start = u64::from(word(&ib, o + 6)) << 32
                | u64::from(u32::from_le_bytes([
                    ib[o + 8],
                    ib[o + 9],
                    ib[o + 10],
                    ib[o + 11],
                ]));
            if len < 32768 && lblk + u64::from(len) == n && start + u64::from(len) == blk {
                ib[o + 4..o + 6].copy_from_slice(&(len + 1).to_le_bytes());
                true
            } else {
                false
            }
        };
        if !joined {
            if entries >= max {
                return false;
            }
            let o = 12 * (e + 1);
            ib[o..o + 4].copy_from_slice(&(n as u32).to_le_bytes());
            ib[o + 4..o + 6].copy_from_slice(&1u16.to_le_bytes());
            ib[o + 6..o + 8].copy_from_slice(&((blk >> 32) as u16).to_le_bytes());
            ib[o + 8..o + 12].copy_from_slice(&(blk as u32).to_le_bytes());
            ib[2..4].copy_from_slice(&(entries + 1).to_le_bytes());
        }
    } else if n < 12 {
        let o = 4 * n as usize;
        ib[o..o + 4].copy_from_slice(&(blk as u32).to_le_bytes());
    } else if n < 12 + bs as u64 / 4 {
        // The single indirect block: taken now when it does not exist yet.
        let mut ind = u64::from(u32::from_le_bytes([ib[48], ib[49], ib[50], ib[51]]));
        let mut table = vec![0u8; bs];
        if ind == 0 {
            facts.block_used.set(blk);
            let fresh = pick_block(p0, facts);
            facts.block_used.clear(blk);
            let Some(fresh) = fresh else {
                return false;
            };
            ind = fresh;
            ib[48..52].copy_from_slice(&(ind as u32).to_le_bytes());
            extra += 1;
        } else if read_block(p0, dev, ind).map(|t| table = t).is_none() {
            return false;
        }
        let o = 4 * (n as usize - 12);
        table[o..o + 4].copy_from_slice(&(blk as u32).to_le_bytes());
        indirect = Some((ind, table));
    } else {
        return false;
    }
    if let Some((ind, table)) = &indirect {
        let _ = dev.write_at(table, ind * bs as u64);
    }
    // An empty block: one unused entry over all of it, then the checksum tail.
    let mut b = vec![0u8; bs];
    let tail = if fs.has_metadata_csum() {
        fdir::TAIL_SIZE
    } else {
        0
    };
    let end = bs - tail;
    b[4..6].copy_from_slice(&fdir::encode_rec_len(end as u32, bs as u32).to_le_bytes());
    if tail > 0 {
        b[end + 4..end + 6].copy_from_slice(&(fdir::TAIL_SIZE as u16).to_le_bytes());
        b[end + 7] = fdir::ft::CSUM_TAIL;
        super::dirent::set_leaf_csum(p0, dev, dir, &mut b);
    }
    let _ = dev.write_at(&b, blk * bs as u64);
    let huge = fs.geo.ro_compat.has(ffsck_format::RoCompat::HUGE_FILE);
    edit(p0, dev, dir, |i| {
        i.set_block_bytes(&ib);
        let size = (n + 1) * bs as u64;
        i.i_size_lo.set(size as u32);
        i.i_size_high.set((size >> 32) as u32);
        let blocks = i.blocks_raw(huge) + (1 + extra) * (bs / 512) as u64;
        i.i_blocks_lo.set(blocks as u32);
        if huge {
            i.l_i_blocks_high.set((blocks >> 32) as u16);
        }
    });
    mark_block(p0, dev, blk);
    facts.block_used.set(blk);
    if let (Some((ind, _)), 1) = (&indirect, extra) {
        mark_block(p0, dev, *ind);
        facts.block_used.set(*ind);
    }
    dirs.0.entry(dir).or_default().push((n as u32, blk));
    true
}

/// Write the new directory's inode and its block.
fn create(p0: &Pass0Facts, dev: &dyn Device, ino: u32, blk: u64, filetype: bool) {
    create_dir(p0, dev, ino, blk, filetype, 0o040700);
}

/// Write a new directory inode `ino` of mode `mode` whose one block `blk` holds `.` and `..`
/// (the parent is the root).
pub(super) fn create_dir(
    p0: &Pass0Facts,
    dev: &dyn Device,
    ino: u32,
    blk: u64,
    filetype: bool,
    mode: u16,
) {
    let fs = &p0.fs;
    let bs = fs.block_size();
    let Some(off) = fs.inode_offset(ino) else {
        return;
    };
    let isz = fs.geo.inode_size as usize;
    let mut inode = RawInode::parse(&vec![0u8; isz]);
    let t = p0.now.stamp();
    inode.i_mode.set(mode);
    inode.i_size_lo.set(bs as u32);
    inode.i_atime.set(t);
    inode.i_ctime.set(t);
    inode.i_mtime.set(t);
    inode.i_links_count.set(2);
    // i_blocks counts whole clusters (bigalloc).
    inode
        .i_blocks_lo
        .set((bs / 512) as u32 * fs.geo.cluster_ratio.max(1));
    if fs.geo.incompat.has(Incompat::EXTENTS) {
        inode.i_flags.set(flags::EXTENTS);
        let mut ib = [0u8; 60];
        ib[0..2].copy_from_slice(&0xF30Au16.to_le_bytes());
        ib[2..4].copy_from_slice(&1u16.to_le_bytes());
        ib[4..6].copy_from_slice(&4u16.to_le_bytes());
        // One extent: logical 0, length 1, at `blk`.
        ib[16..18].copy_from_slice(&1u16.to_le_bytes());
        ib[18..20].copy_from_slice(&((blk >> 32) as u16).to_le_bytes());
        ib[20..24].copy_from_slice(&(blk as u32).to_le_bytes());
        inode.set_block_bytes(&ib);
    } else {
        inode.i_block[0].set(blk as u32);
    }
    if isz > 128 {
        inode.i_extra_isize.set(32.min(isz as u16 - 128));
        inode.i_crtime.set(t);
    }
    let mut new = crate::ext4::inode::Inode {
        ino,
        off,
        raw: vec![0u8; isz],
    };
    new.set(&inode);
    crate::ext4::inode::write(fs, dev, &mut new);

    // `.` and `..`, then the checksum tail when the file system has one.
    let ft = if filetype { fdir::ft::DIR } else { 0 };
    let mut b = vec![0u8; bs];
    let tail = if fs.has_metadata_csum() {
        fdir::TAIL_SIZE
    } else {
        0
    };
    let end = bs - tail;
    b[0..4].copy_from_slice(&ino.to_le_bytes());
    b[4..6].copy_from_slice(&12u16.to_le_bytes());
    b[6] = 1;
    b[7] = ft;
    b[8] = b'.';
    b[12..16].copy_from_slice(&ROOT.to_le_bytes());
    b[16..18].copy_from_slice(&fdir::encode_rec_len((end - 12) as u32, bs as u32).to_le_bytes());
    b[18] = 2;
    b[19] = ft;
    b[20..22].copy_from_slice(b"..");
    if tail > 0 {
        b[end + 4..end + 6].copy_from_slice(&(fdir::TAIL_SIZE as u16).to_le_bytes());
        b[end + 7] = fdir::ft::CSUM_TAIL;
        super::dirent::set_leaf_csum(p0, dev, ino, &mut b);
    }
    let _ = dev.write_at(&b, blk * bs as u64);
}

fn set_bit(dev: &dyn Device, blk: u64, bs: usize, bit: u64) -> Option<Vec<u8>> {
    let mut b = vec![0u8; bs];
    dev.read_at(&mut b, blk * bs as u64).ok()?;
    let byte = (bit / 8) as usize;
    *b.get_mut(byte)? |= 1 << (bit % 8);
    dev.write_at(&b, blk * bs as u64).ok()?;
    Some(b)
}

/// Write descriptor `g` of `descs` at its primary location.
fn write_desc(p0: &Pass0Facts, dev: &dyn Device, descs: &mut [ffsck_format::RawGroupDesc], g: u32) {
    let fs = &p0.fs;
    let geo = &fs.geo;
    let ds = geo.desc_size as usize;
    let bs = fs.block_size() as u64;
    let gd = &mut descs[g as usize];
    gd.update_checksum(&fs.sb, g, ds);
    let dblk = geo.desc_block(g / geo.descs_per_block);
    let off = dblk * bs + u64::from(g % geo.descs_per_block) * ds as u64;
    let _ = dev.write_at(&gd.as_bytes()[..ds.min(64)], off);
}

/// The group descriptors and superblock as the overlay has them now (earlier marks included).
fn current(
    p0: &Pass0Facts,
    dev: &dyn Device,
) -> (Vec<ffsck_format::RawGroupDesc>, ffsck_format::RawSuperblock) {
    let fs = &p0.fs;
    let geo = &fs.geo;
    let ds = geo.desc_size as usize;
    let bs = fs.block_size() as u64;
    let mut descs = fs.groups.clone();
    for (g, gd) in descs.iter_mut().enumerate() {
        let g = g as u32;
        let off = geo.desc_block(g / geo.descs_per_block) * bs
            + u64::from(g % geo.descs_per_block) * ds as u64;
        let mut raw = vec![0u8; ds];
        if dev.read_at(&mut raw, off).is_ok() {
            *gd = ffsck_format::RawGroupDesc::parse(&raw, ds);
        }
    }
    let mut sb = fs.sb.clone();
    let mut raw = vec![0u8; 1024];
    if fs.sb_block == 0 && dev.read_at(&mut raw, 1024).is_ok() {
        if let Some(s) = ffsck_format::RawSuperblock::parse(&raw) {
            sb = s;
        }
    }
    (descs, sb)
}

/// Mark inode `ino` in use: bitmap bit and checksum, group counts, superblock count.
pub(super) fn mark_inode(p0: &Pass0Facts, dev: &dyn Device, ino: u32, dir: bool) {
    let fs = &p0.fs;
    let geo = &fs.geo;
    let bs = fs.block_size();
    let (mut descs, mut sb) = current(p0, dev);
    let g = geo.group_of_inode(ino);
    let ipg = geo.inodes_per_group;
    let wide = geo.desc_size >= 64;
    let gd = &mut descs[g as usize];
    let idx = (ino - 1) % ipg;
    if let Some(bits) = set_bit(dev, gd.inode_bitmap(), bs, u64::from(idx)) {
        if fs.has_metadata_csum() {
            let c = ffsck_format::verify::bitmap_checksum(&bits, ipg, fs.csum_seed);
            gd.set_inode_bitmap_csum(if wide { c } else { c & 0xFFFF });
        }
    }
    gd.set_free_inodes_count(gd.free_inodes_count().saturating_sub(1));
    if dir {
        gd.set_used_dirs_count(gd.used_dirs_count() + 1);
    }
    if fs.has_group_csum() {
        let tail = ipg - idx - 1;
        if gd.itable_unused() > tail {
            gd.set_itable_unused(tail);
        }
    }
    write_desc(p0, dev, &mut descs, g);
    sb.s_free_inodes_count
        .set(sb.s_free_inodes_count.get().saturating_sub(1));
    sb.update_checksum();
    let _ = dev.write_at(sb.as_bytes(), 1024);
}

/// Mark block `blk` in use: bitmap bit and checksum, group count, superblock count.
pub(super) fn mark_block(p0: &Pass0Facts, dev: &dyn Device, blk: u64) {
    let fs = &p0.fs;
    let geo = &fs.geo;
    let bs = fs.block_size();
    let (mut descs, mut sb) = current(p0, dev);
    let g = geo.group_of_block(blk);
    let wide = geo.desc_size >= 64;
    let gd = &mut descs[g as usize];
    // One bit per cluster; the descriptor counts clusters, the superblock blocks.
    let ratio = u64::from(geo.cluster_ratio.max(1));
    let bit = (blk - geo.group_first_block(g)) / ratio;
    if let Some(bits) = set_bit(dev, gd.block_bitmap(), bs, bit) {
        if fs.has_metadata_csum() {
            let c =
                ffsck_format::verify::bitmap_checksum(&bits, geo.clusters_per_group, fs.csum_seed);
            gd.set_block_bitmap_csum(if wide { c } else { c & 0xFFFF });
        }
    }
    gd.set_free_blocks_count(gd.free_blocks_count().saturating_sub(1));
    write_desc(p0, dev, &mut descs, g);
    sb.set_free_blocks_count(sb.free_blocks_count().saturating_sub(ratio));
    sb.update_checksum();
    let _ = dev.write_at(sb.as_bytes(), 1024);
}

/// Free inode `ino` (if not 0) and `blocks` as libext2fs's allocation statistics do when
/// e2fsck deallocates an inode in pass 2: bitmap bits and checksums, group counts (used
/// directories too), the groups' uninitialised flags, the unused-inodes mark, the
/// superblock counts. Blocks out of range are passed by; `blocks` holds one block per cluster.
pub(super) fn release(p0: &Pass0Facts, dev: &dyn Device, ino: u32, dir: bool, blocks: &[u64]) {
    let fs = &p0.fs;
    let geo = &fs.geo;
    let bs = fs.block_size();
    let wide = geo.desc_size >= 64;
    let (mut descs, mut sb) = current(p0, dev);
    if ino != 0 && ino <= geo.inodes_count {
        let g = geo.group_of_inode(ino);
        let ipg = geo.inodes_per_group;
        let gd = &mut descs[g as usize];
        let idx = (ino - 1) % ipg;
        if let Some(bits) = change_bit(dev, gd.inode_bitmap(), bs, u64::from(idx), false) {
            if fs.has_metadata_csum() {
                let c = ffsck_format::verify::bitmap_checksum(&bits, ipg, fs.csum_seed);
                gd.set_inode_bitmap_csum(if wide { c } else { c & 0xFFFF });
            }
        }
        gd.set_free_inodes_count(gd.free_inodes_count().saturating_add(1));
        if dir {
            gd.set_used_dirs_count(gd.used_dirs_count().saturating_sub(1));
        }
        gd.bg_flags.set(gd.flags() & !BG_INODE_UNINIT);
        if fs.has_group_csum() && idx >= ipg.saturating_sub(gd.itable_unused()) {
            gd.set_itable_unused(ipg - idx - 1);
        }
        write_desc(p0, dev, &mut descs, g);
        sb.s_free_inodes_count
            .set(sb.s_free_inodes_count.get().saturating_add(1));
    }
    let ratio = u64::from(geo.cluster_ratio.max(1));
    let mut by_group: std::collections::BTreeMap<u32, Vec<u64>> = Default::default();
    for &b in blocks.iter().filter(|&&b| geo.is_valid_block(b)) {
        by_group.entry(geo.group_of_block(b)).or_default().push(b);
    }
    for (g, list) in by_group {
        let Some(gd) = descs.get_mut(g as usize) else {
            continue;
        };
        let mut b = vec![0u8; bs];
        let at = gd.block_bitmap() * bs as u64;
        if !geo.is_valid_block(gd.block_bitmap()) || dev.read_at(&mut b, at).is_err() {
            continue;
        }
        let mut freed = 0u32;
        for blk in list {
            let bit = (blk - geo.group_first_block(g)) / ratio;
            if let Some(byte) = b.get_mut((bit / 8) as usize) {
                *byte &= !(1 << (bit % 8));
                freed += 1;
            }
        }
        if dev.write_at(&b, at).is_err() {
            continue;
        }
        if fs.has_metadata_csum() {
            let c = ffsck_format::verify::bitmap_checksum(&b, geo.clusters_per_group, fs.csum_seed);
            gd.set_block_bitmap_csum(if wide { c } else { c & 0xFFFF });
        }
        gd.set_free_blocks_count(gd.free_blocks_count().saturating_add(freed));
        gd.bg_flags.set(gd.flags() & !BG_BLOCK_UNINIT);
        write_desc(p0, dev, &mut descs, g);
        sb.set_free_blocks_count(
            sb.free_blocks_count()
                .saturating_add(u64::from(freed) * ratio),
        );
    }
    sb.update_checksum();
    let _ = dev.write_at(sb.as_bytes(), 1024);
}

fn change_bit(dev: &dyn Device, blk: u64, bs: usize, bit: u64, on: bool) -> Option<Vec<u8>> {
    let mut b = vec![0u8; bs];
    dev.read_at(&mut b, blk * bs as u64).ok()?;
    let byte = b.get_mut((bit / 8) as usize)?;
    if on {
        *byte |= 1 << (bit % 8);
    } else {
        *byte &= !(1 << (bit % 8));
    }
    dev.write_at(&b, blk * bs as u64).ok()?;
    Some(b)
}
