//! Pass 5: compare the bitmaps and summary counts on disk with what passes 1-4 found.
//!
//! Checks: block and inode bitmap differences (reported as single bits and ranges), bitmap
//! padding, bitmap checksums, per-group free block/inode/directory counts and the
//! superblock totals.
//! Produces: the computed free counts (for the summary line). Relies on: `Pass0Facts`,
//! `Pass1Facts`. Frees: the bitmaps.

use crate::bitmap::Bitmap;
use crate::facts::{kind, Pass1Facts};
use crate::fs::Fs;
use crate::latch::Latches;
use crate::pass0::Pass0Facts;
use crate::problem::{Latch, Problem as P};
use crate::report::{Findings, Policy, ProblemCtx};
use ffsck_format::dir::ft;
use ffsck_format::group::{BG_BLOCK_UNINIT, BG_INODE_UNINIT};
use ffsck_format::verify;
use rayon::prelude::*;
use std::collections::BTreeSet;

pub struct Pass5Facts {
    pub free_blocks: u64,
    pub free_inodes: u64,
}

/// Whether group `g`'s block bitmap is taken as uninitialised: flagged `BLOCK_UNINIT` by a
/// descriptor that can vouch for its flags (its checksum holds), as libext2fs reads bitmaps.
/// A flag under a bad checksum is not believed: the bitmap on disk is read and compared.
fn block_uninit(p0: &Pass0Facts, g: u32) -> bool {
    let fs = &p0.fs;
    fs.has_group_csum()
        && fs.groups[g as usize].flags() & BG_BLOCK_UNINIT != 0
        && p0.groups[g as usize].desc_csum_ok
}

/// The on-disk block bitmap of group `g`, as libext2fs presents it (uninit groups synthesised).
fn disk_block_bitmap(fs: &Fs, p0: &Pass0Facts, g: u32) -> Option<Vec<u8>> {
    let gd = &fs.groups[g as usize];
    let bs = fs.block_size();
    if block_uninit(p0, g) {
        return Some(vec![0u8; bs]); // filled by `mark_uninit` below
    }
    if !p0.groups[g as usize].block_bitmap_ok {
        return None;
    }
    fs.read_block(gd.block_bitmap())
}

/// The 64 bits of an on-disk bitmap from bit `start`, bit `start` lowest; bits past its end
/// read as 0.
fn disk_bits64(bits: &[u8], start: u64) -> u64 {
    let (byte, shift) = ((start / 8) as usize, start % 8);
    let mut w = [0u8; 16];
    if let Some(src) = bits.get(byte..) {
        let n = src.len().min(16);
        w[..n].copy_from_slice(&src[..n]);
    }
    (u128::from_le_bytes(w) >> shift) as u64
}

/// Are the bytes of a bitmap block past its `nbits` bits (whole bytes, to the block's end) all
/// set? libext2fs checks this when it loads a bitmap and e2fsck asks to fix the padding.
fn tail_ok(bits: &[u8], nbits: u32) -> bool {
    bits.get((nbits / 8) as usize..)
        .is_none_or(|t| t.iter().all(|&b| b == 0xff))
}

fn test(bits: &[u8], i: u64) -> bool {
    bits.get((i / 8) as usize)
        .is_some_and(|b| b & (1 << (i % 8)) != 0)
}

/// Emit e2fsck's difference lines: runs of equal sign become ranges. The first raises the
/// latch's header; the caller ends the latch.
///
/// `uninit_group(b)` names the BLOCK_UNINIT group of a block found in use but not marked:
/// e2fsck asks to clear the flag at each such block until the answer is yes, before it prints
/// the run of differences that ends there.
fn report_diffs(
    diffs: &[(u64, bool)],
    step: u64,
    policy: Policy,
    out: &mut Findings,
    blocks: bool,
    latches: &mut Latches,
    uninit_group: &dyn Fn(u64) -> Option<u32>,
) {
    let (single_free, single_used, range_free, range_used) = if blocks {
        (
            P::P5_BLOCK_UNUSED,
            P::P5_BLOCK_USED,
            P::P5_BLOCK_RANGE_UNUSED,
            P::P5_BLOCK_RANGE_USED,
        )
    } else {
        (
            P::P5_INODE_UNUSED,
            P::P5_INODE_USED,
            P::P5_INODE_RANGE_UNUSED,
            P::P5_INODE_RANGE_USED,
        )
    };
    let mut cleared = BTreeSet::new();
    let mut ask_uninit = |out: &mut Findings, (b, used): (u64, bool)| {
        let Some(g) = uninit_group(b).filter(|g| used && !cleared.contains(g)) else {
            return;
        };
        let ctx = ProblemCtx {
            blk: b,
            group: g,
            ..Default::default()
        };
        if out.report(policy, P::P5_BLOCK_UNINIT, ctx) {
            cleared.insert(g);
        }
    };
    let mut pending: Option<(P, ProblemCtx)> = None;
    let mut i = 0;
    while i < diffs.len() {
        let (start, used) = diffs[i];
        ask_uninit(out, diffs[i]);
        if let Some((p, ctx)) = pending.take() {
            latches.report(out, policy, p, ctx);
        }
        let mut j = i;
        while j + 1 < diffs.len() && diffs[j + 1].0 == diffs[j].0 + step && diffs[j + 1].1 == used {
            j += 1;
            ask_uninit(out, diffs[j]);
        }
        let end = diffs[j].0;
        let p = match (j > i, used) {
            (false, false) => single_free,
            (false, true) => single_used,
            (true, false) => range_free,
            (true, true) => range_used,
        };
        let ctx = if blocks {
            ProblemCtx {
                blk: start,
                blk2: end,
                ..Default::default()
            }
        } else {
            ProblemCtx {
                ino: start as u32,
                ino2: end as u32,
                ..Default::default()
            }
        };
        pending = Some((p, ctx));
        i = j + 1;
    }
    if let Some((p, ctx)) = pending {
        latches.report(out, policy, p, ctx);
    }
}

/// `progress` advances by one per group compared, blocks then inodes (twice the group count
/// in all), as e2fsck's does.
pub fn run(
    p0: &Pass0Facts,
    p1: &Pass1Facts,
    policy: Policy,
    out: &mut Findings,
    progress: &crate::progress::Progress,
) -> Pass5Facts {
    let mut blocks = check_blocks(p0, p1, policy, out, progress);
    let mut inodes = check_inodes(p0, p1, policy, out, progress);
    // e2fsck checks the inode bitmap's padding first, then the block bitmap's. Padding set
    // rewrites the bitmap too: its checksums are not asked about then.
    if inodes.padding_bad && out.report(policy, P::P5_INODE_BMAP_PADDING, ProblemCtx::default()) {
        inodes.csum_bad.clear();
    }
    if blocks.padding_bad && out.report(policy, P::P5_BLOCK_BMAP_PADDING, ProblemCtx::default()) {
        blocks.csum_bad.clear();
    }
    for g in inodes.csum_bad {
        out.report(
            policy,
            P::P5_INODE_BITMAP_CSUM_INVALID,
            ProblemCtx::group(g),
        );
    }
    for g in blocks.csum_bad {
        out.report(
            policy,
            P::P5_BLOCK_BITMAP_CSUM_INVALID,
            ProblemCtx::group(g),
        );
    }
    Pass5Facts {
        free_blocks: blocks.free,
        free_inodes: inodes.free,
    }
}

/// What one half of pass 5 (blocks or inodes) leaves to report after the counts.
struct Half {
    /// Free clusters or inodes as the superblock holds them once pass 5 is done: as counted,
    /// or its own count when the fix was answered no (e2fsck's closing line shows the
    /// superblock's).
    free: u64,
    /// Some bitmap's padding is not all set.
    padding_bad: bool,
    /// Groups whose bitmap matches but whose checksum does not.
    csum_bad: Vec<u32>,
}

/// Synthesised bits for BLOCK_UNINIT groups: their own fixed metadata and tables.
fn uninit_block_marks(p0: &Pass0Facts) -> Bitmap {
    let fs = &p0.fs;
    let geo = &fs.geo;
    let mut uninit_marks = Bitmap::new(geo.blocks_count);
    if fs.has_group_csum() {
        for g in 0..geo.group_count {
            let gd = &fs.groups[g as usize];
            if !block_uninit(p0, g) {
                continue;
            }
            for (s, n) in geo.fixed_metadata_runs(g) {
                for b in s..(s + n).min(geo.blocks_count) {
                    uninit_marks.set(b);
                }
            }
            uninit_marks.set(gd.block_bitmap());
            uninit_marks.set(gd.inode_bitmap());
            for b in gd.inode_table()
                ..(gd.inode_table() + u64::from(geo.inode_blocks_per_group)).min(geo.blocks_count)
            {
                uninit_marks.set(b);
            }
        }
    }
    uninit_marks
}

/// Block bitmap differences and free block counts.
fn check_blocks(
    p0: &Pass0Facts,
    p1: &Pass1Facts,
    policy: Policy,
    out: &mut Findings,
    progress: &crate::progress::Progress,
) -> Half {
    let fs = &p0.fs;
    let geo = &fs.geo;
    let used = &p1.block_used;
    let uninit_marks = uninit_block_marks(p0);

    // Blocks. Groups are compared in parallel and taken in group order. Free counts come from
    // what was found and from the bitmap as it is on disk: e2fsck compares the descriptors
    // with the latter unless the bitmap differences get fixed.
    let block_groups: Vec<BlockGroup> = (0..geo.group_count)
        .into_par_iter()
        .map(|g| {
            let c = compare_blocks(p0, used, &uninit_marks, g);
            progress.advance(1);
            c
        })
        .collect();
    let mut diffs = Vec::new();
    let mut group_free = Vec::with_capacity(block_groups.len());
    let mut group_free_disk = Vec::with_capacity(block_groups.len());
    let mut padding_bad = false;
    let mut tail_bad = false;
    let mut csum_bad = Vec::new();
    for (g, c) in block_groups.into_iter().enumerate() {
        diffs.extend(c.diffs);
        group_free.push(c.free);
        group_free_disk.push(c.free_disk);
        padding_bad |= c.padding_bad;
        tail_bad |= c.tail_bad;
        if c.csum_bad {
            csum_bad.push(g as u32);
        }
    }
    let mut latches = Latches::default();
    let step = u64::from(geo.cluster_ratio);
    let uninit = |b: u64| {
        let g = geo.group_of_block(b);
        (g < geo.group_count && block_uninit(p0, g)).then_some(g)
    };
    report_diffs(&diffs, step, policy, out, true, &mut latches, &uninit);
    let blocks_fixed = latches
        .end(out, policy, Latch::BlockBitmap, ProblemCtx::default())
        .unwrap_or(true);
    let counts = if blocks_fixed {
        &group_free
    } else {
        &group_free_disk
    };
    let mut free_blocks = 0u64;
    for g in 0..geo.group_count {
        let counted = counts[g as usize];
        free_blocks += counted;
        let disk = u64::from(fs.groups[g as usize].free_blocks_count());
        if disk != counted {
            out.report(
                policy,
                P::P5_FREE_BLOCK_COUNT_GROUP,
                ProblemCtx {
                    group: g,
                    num: disk,
                    num2: counted,
                    ..Default::default()
                },
            );
        }
    }
    let sb_free = fs.sb.free_blocks_count();
    // The superblock counts blocks, the descriptors clusters.
    let free_blocks_sb = free_blocks * u64::from(geo.cluster_ratio);
    let kept = sb_free != free_blocks_sb
        && !out.report(
            policy,
            P::P5_FREE_BLOCK_COUNT,
            ProblemCtx {
                num: sb_free,
                num2: free_blocks_sb,
                ..Default::default()
            },
        );

    // The last group's bits past the end are checked first; a bad tail in any group's bitmap
    // block is asked about only when those were right.
    Half {
        free: if kept {
            sb_free / u64::from(geo.cluster_ratio.max(1))
        } else {
            free_blocks
        },
        padding_bad: padding_bad || tail_bad,
        // Differences fixed rewrite every group's bitmap with a fresh checksum: no group's
        // checksum is asked about then, as e2fsck skips a bitmap it changed.
        csum_bad: if blocks_fixed && !diffs.is_empty() {
            Vec::new()
        } else {
            csum_bad
        },
    }
}

/// Inode bitmap differences, free inode and directory counts.
fn check_inodes(
    p0: &Pass0Facts,
    p1: &Pass1Facts,
    policy: Policy,
    out: &mut Findings,
    progress: &crate::progress::Progress,
) -> Half {
    let fs = &p0.fs;
    let geo = &fs.geo;
    // Inodes, the same way.
    let inode_groups: Vec<InodeGroup> = (0..geo.group_count)
        .into_par_iter()
        .map(|g| {
            let c = compare_inodes(p0, p1, g);
            progress.advance(1);
            c
        })
        .collect();
    let mut idiffs = Vec::new();
    let mut free_inodes = 0u64;
    let mut icsum_bad = Vec::new();
    let mut group_counts = Vec::with_capacity(inode_groups.len());
    let mut padding_bad = false;
    for (g, c) in inode_groups.into_iter().enumerate() {
        idiffs.extend(c.diffs);
        padding_bad |= c.tail_bad;
        if c.csum_bad {
            icsum_bad.push(g as u32);
        }
        group_counts.push((c.free, c.dirs, c.free_disk, c.dirs_disk));
    }
    let mut latches = Latches::default();
    report_diffs(&idiffs, 1, policy, out, false, &mut latches, &|_| None);
    let inodes_fixed = latches
        .end(out, policy, Latch::InodeBitmap, ProblemCtx::default())
        .unwrap_or(true);
    for (g, &(free_a, dirs_a, free_d, dirs_d)) in group_counts.iter().enumerate() {
        let (free, dirs) = if inodes_fixed {
            (&free_a, &dirs_a)
        } else {
            (&free_d, &dirs_d)
        };
        free_inodes += free;
        let gd = &fs.groups[g];
        if u64::from(gd.free_inodes_count()) != *free {
            out.report(
                policy,
                P::P5_FREE_INODE_COUNT_GROUP,
                ProblemCtx {
                    group: g as u32,
                    num: u64::from(gd.free_inodes_count()),
                    num2: *free,
                    ..Default::default()
                },
            );
        }
        if u64::from(gd.used_dirs_count()) != *dirs {
            out.report(
                policy,
                P::P5_FREE_DIR_COUNT_GROUP,
                ProblemCtx {
                    group: g as u32,
                    num: u64::from(gd.used_dirs_count()),
                    num2: *dirs,
                    ..Default::default()
                },
            );
        }
    }
    let sb_ifree = u64::from(fs.sb.s_free_inodes_count.get());
    let kept = sb_ifree != free_inodes
        && !out.report(
            policy,
            P::P5_FREE_INODE_COUNT,
            ProblemCtx {
                num: sb_ifree,
                num2: free_inodes,
                ..Default::default()
            },
        );
    Half {
        free: if kept { sb_ifree } else { free_inodes },
        padding_bad,
        // (As for blocks: fixed differences rewrite every inode bitmap.)
        csum_bad: if inodes_fixed && !idiffs.is_empty() {
            Vec::new()
        } else {
            icsum_bad
        },
    }
}

/// One group's block bitmap compared with what pass 1 found.
struct BlockGroup {
    /// Free clusters found, and free per the bitmap on disk.
    free: u64,
    free_disk: u64,
    /// `(first block of the cluster, in use)` where the two differ.
    diffs: Vec<(u64, bool)>,
    /// The last group's bits past the end of the file system are not all set.
    padding_bad: bool,
    /// The bitmap block's bytes past `clusters_per_group` bits are not all set.
    tail_bad: bool,
    /// The bitmap matches but its checksum does not.
    csum_bad: bool,
}

fn compare_blocks(p0: &Pass0Facts, used: &Bitmap, uninit_marks: &Bitmap, g: u32) -> BlockGroup {
    let fs = &p0.fs;
    let geo = &fs.geo;
    let first = geo.group_first_block(g);
    let last = geo.group_last_block(g);
    let disk = disk_block_bitmap(fs, p0, g);
    let uninit = block_uninit(p0, g);
    let mut c = BlockGroup {
        free: 0,
        free_disk: 0,
        diffs: Vec::new(),
        padding_bad: false,
        tail_bad: false,
        csum_bad: false,
    };
    // Bitmaps have one bit per cluster; a cluster is in use if any of its blocks is.
    let ratio = u64::from(geo.cluster_ratio);
    let mut b = first;
    if let (Some(bits), false, 1) = (&disk, uninit, ratio) {
        // One bit per block: 64 blocks at a time.
        while b <= last {
            let n = (last - b + 1).min(64);
            let mask = if n == 64 { u64::MAX } else { (1u64 << n) - 1 };
            let actual = used.bits64(b) & mask;
            let on_disk = disk_bits64(bits, b - first) & mask;
            c.free += n - u64::from(actual.count_ones());
            c.free_disk += n - u64::from(on_disk.count_ones());
            let mut diff = actual ^ on_disk;
            while diff != 0 {
                let i = u64::from(diff.trailing_zeros());
                c.diffs.push((b + i, actual & (1 << i) != 0));
                diff &= diff - 1;
            }
            b += n;
        }
    }
    while b <= last {
        let cend = (b + ratio - 1).min(last);
        let actual = (b..=cend).any(|x| used.get(x));
        let bit = (b - first) / ratio;
        let on_disk = match &disk {
            Some(bits) if !uninit => test(bits, bit),
            Some(_) => (b..=cend).any(|x| uninit_marks.get(x)),
            None => false,
        };
        c.free += u64::from(!actual);
        c.free_disk += u64::from(!on_disk);
        if actual != on_disk {
            c.diffs.push((b, actual));
        }
        b += ratio;
    }
    if let (Some(bits), false) = (&disk, uninit) {
        c.tail_bad = !tail_ok(bits, geo.clusters_per_group);
        // Bits past the end of the file system in the last group must be set.
        if g == geo.group_count - 1 {
            let n = last - first + 1;
            c.padding_bad =
                (n.div_ceil(ratio)..u64::from(geo.clusters_per_group)).any(|i| !test(bits, i));
        }
        if fs.has_metadata_csum() && c.diffs.is_empty() {
            let stored = fs.groups[g as usize].block_bitmap_csum();
            c.csum_bad = verify::bitmap(
                bits,
                geo.clusters_per_group,
                fs.csum_seed,
                stored,
                geo.desc_size,
            )
            .is_err();
        }
    }
    c
}

/// One group's inode bitmap compared with what pass 1 found.
struct InodeGroup {
    /// Free inodes and directories found, and per the bitmap on disk.
    free: u64,
    dirs: u64,
    free_disk: u64,
    dirs_disk: u64,
    /// `(inode, in use)` where the two differ.
    diffs: Vec<(u64, bool)>,
    /// The bitmap block's bytes past `inodes_per_group` bits are not all set.
    tail_bad: bool,
    /// The bitmap matches but its checksum does not.
    csum_bad: bool,
}

fn compare_inodes(p0: &Pass0Facts, p1: &Pass1Facts, g: u32) -> InodeGroup {
    let fs = &p0.fs;
    let geo = &fs.geo;
    let ipg = u64::from(geo.inodes_per_group);
    let gd = &fs.groups[g as usize];
    let uninit =
        fs.has_group_csum() && gd.flags() & BG_INODE_UNINIT != 0 && p0.groups[g as usize].csum_ok;
    let disk = if uninit || !p0.groups[g as usize].inode_bitmap_ok {
        None
    } else {
        fs.read_block(gd.inode_bitmap())
    };
    let mut c = InodeGroup {
        free: 0,
        dirs: 0,
        free_disk: 0,
        dirs_disk: 0,
        diffs: Vec::new(),
        tail_bad: false,
        csum_bad: false,
    };
    // 64 inodes at a time; kinds are looked up only for inodes in use by either count.
    let base = u64::from(g) * ipg;
    let mut i = 0;
    while i < ipg {
        let n = (ipg - i).min(64);
        let mask = if n == 64 { u64::MAX } else { (1u64 << n) - 1 };
        let actual = p1.inode_used.bits64(base + i) & mask;
        let on_disk = disk.as_ref().map_or(0, |bits| disk_bits64(bits, i)) & mask;
        c.free += n - u64::from(actual.count_ones());
        c.free_disk += n - u64::from(on_disk.count_ones());
        let mut any = actual | on_disk;
        while any != 0 {
            let k = u64::from(any.trailing_zeros());
            any &= any - 1;
            let idx = base + i + k;
            let (a, d) = (actual & (1 << k) != 0, on_disk & (1 << k) != 0);
            if p1.kinds[idx as usize] & kind::TYPE_MASK == ft::DIR {
                c.dirs += u64::from(a);
                c.dirs_disk += u64::from(d);
            }
            if a != d {
                c.diffs.push((idx + 1, a));
            }
        }
        i += n;
    }
    let st = &p0.groups[g as usize];
    if !uninit && !st.inode_bitmap_ok && st.relocate_inode_bitmap {
        // A bitmap moved to a new block with no old one to copy (its pointer was 0 or outside
        // the group, e2fsck's "Relocating ... to"): e2fsck starts it zeroed, padding too.
        c.tail_bad = u64::from(geo.inodes_per_group) < 8 * u64::from(geo.block_size);
    }
    if let Some(bits) = &disk {
        c.tail_bad = !tail_ok(bits, geo.inodes_per_group);
        if fs.has_metadata_csum() && c.diffs.is_empty() {
            let stored = gd.inode_bitmap_csum();
            c.csum_bad =
                verify::bitmap(bits, ipg as u32, fs.csum_seed, stored, geo.desc_size).is_err();
        }
    }
    c
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn disk_bitmap_words_match_bit_tests() {
        let bits: Vec<u8> = (0..37u32).map(|i| (i * 0x9d + 7) as u8).collect();
        for start in [0u64, 1, 7, 8, 63, 64, 100, 230, 290, 296, 400] {
            let w = disk_bits64(&bits, start);
            for k in 0..64 {
                assert_eq!(w & (1 << k) != 0, test(&bits, start + k), "bit {start}+{k}");
            }
        }
    }

    #[test]
    fn bitmap_words_match_bit_gets() {
        let mut b = Bitmap::new(300);
        for i in (0..300).filter(|i| i % 3 == 0 || i % 7 == 1) {
            b.set(i);
        }
        for start in [0u64, 5, 63, 64, 130, 250, 299, 300] {
            let w = b.bits64(start);
            for k in 0..64 {
                assert_eq!(w & (1 << k) != 0, b.get(start + k), "bit {start}+{k}");
            }
        }
    }
}
