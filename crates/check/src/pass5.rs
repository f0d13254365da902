//! Pass 5: compare the bitmaps and summary counts on disk with what passes 1-4 found.
//!
//! Checks: block and inode bitmap differences (reported as single bits and ranges), bitmap
//! padding, bitmap checksums, per-group free block/inode/directory counts and the
//! superblock totals.
//! Produces: the computed free counts (for the summary line). Relies on: `Pass0Facts`,
//! `Pass1Facts`. Frees: the bitmaps.

use crate::bitmap::Bitmap;
use crate::fs::Fs;
use crate::pass0::Pass0Facts;
use crate::pass1::{kind, Pass1Facts};
use crate::problem::Problem as P;
use crate::report::{Findings, Policy, ProblemCtx};
use ffsck_format::dir::ft;
use ffsck_format::group::{BG_BLOCK_UNINIT, BG_INODE_UNINIT};

pub struct Pass5Facts {
    pub free_blocks: u64,
    pub free_inodes: u64,
}

/// The on-disk block bitmap of group `g`, as libext2fs presents it (uninit groups synthesised).
fn disk_block_bitmap(fs: &Fs, p0: &Pass0Facts, g: u32) -> Option<Vec<u8>> {
    let gd = &fs.groups[g as usize];
    let bs = fs.block_size();
    if fs.has_group_csum() && gd.flags() & BG_BLOCK_UNINIT != 0 && p0.groups[g as usize].csum_ok {
        return Some(vec![0u8; bs]); // filled by `mark_uninit` below
    }
    if !p0.groups[g as usize].block_bitmap_ok {
        return None;
    }
    fs.read_block(gd.block_bitmap())
}

fn test(bits: &[u8], i: u64) -> bool {
    bits.get((i / 8) as usize)
        .is_some_and(|b| b & (1 << (i % 8)) != 0)
}

/// Emit e2fsck's difference lines: runs of equal sign become ranges.
fn report_diffs(
    diffs: &[(u64, bool)],
    step: u64,
    policy: Policy,
    out: &mut Findings,
    blocks: bool,
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
    let mut i = 0;
    while i < diffs.len() {
        let (start, used) = diffs[i];
        let mut j = i;
        while j + 1 < diffs.len() && diffs[j + 1].0 == diffs[j].0 + step && diffs[j + 1].1 == used {
            j += 1;
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
        out.report(policy, p, ctx);
        i = j + 1;
    }
}

pub fn run(p0: &Pass0Facts, p1: &Pass1Facts, policy: Policy, out: &mut Findings) -> Pass5Facts {
    let fs = &p0.fs;
    let geo = &fs.geo;
    let used = &p1.block_used;

    // Synthesised bits for BLOCK_UNINIT groups: their own fixed metadata and tables.
    let mut uninit_marks = Bitmap::new(geo.blocks_count);
    if fs.has_group_csum() {
        for g in 0..geo.group_count {
            let gd = &fs.groups[g as usize];
            if gd.flags() & BG_BLOCK_UNINIT == 0 {
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

    // Blocks.
    let mut diffs = Vec::new();
    // Free counts from what was found, and from the bitmap as it is on disk: e2fsck compares
    // the descriptors with the latter unless the bitmap differences get fixed.
    let mut group_free = vec![0u64; geo.group_count as usize];
    let mut group_free_disk = vec![0u64; geo.group_count as usize];
    let mut padding_bad = false;
    let mut csum_bad = Vec::new();
    for g in 0..geo.group_count {
        let first = geo.group_first_block(g);
        let last = geo.group_last_block(g);
        let disk = disk_block_bitmap(fs, p0, g);
        let uninit = fs.has_group_csum() && fs.groups[g as usize].flags() & BG_BLOCK_UNINIT != 0;
        let mut group_diff = false;
        // Bitmaps have one bit per cluster; a cluster is in use if any of its blocks is.
        let ratio = u64::from(geo.cluster_ratio);
        let mut b = first;
        while b <= last {
            let cend = (b + ratio - 1).min(last);
            let actual = (b..=cend).any(|x| used.get(x));
            let bit = (b - first) / ratio;
            let on_disk = match &disk {
                Some(bits) if !uninit => test(bits, bit),
                Some(_) => (b..=cend).any(|x| uninit_marks.get(x)),
                None => false,
            };
            if !actual {
                group_free[g as usize] += 1;
            }
            if !on_disk {
                group_free_disk[g as usize] += 1;
            }
            if actual != on_disk {
                diffs.push((b, actual));
                group_diff = true;
            }
            b += ratio;
        }
        if let (Some(bits), false) = (&disk, uninit) {
            // Bits past the end of the file system in the last group must be set.
            if g == geo.group_count - 1 {
                let n = last - first + 1;
                if (n.div_ceil(ratio)..u64::from(geo.clusters_per_group)).any(|i| !test(bits, i)) {
                    padding_bad = true;
                }
            }
            if fs.has_metadata_csum() && !group_diff {
                let len = (geo.clusters_per_group / 8) as usize;
                let c = ffsck_format::csum::ext4_crc32c(fs.csum_seed, &bits[..len.min(bits.len())]);
                let stored = fs.groups[g as usize].block_bitmap_csum();
                let ok = if geo.desc_size >= 64 {
                    c == stored
                } else {
                    c & 0xFFFF == stored
                };
                if !ok {
                    csum_bad.push(g);
                }
            }
        }
    }
    let mut blocks_fixed = true;
    if !diffs.is_empty() {
        out.report(policy, P::P5_BLOCK_BITMAP_HEADER, ProblemCtx::default());
        report_diffs(&diffs, u64::from(geo.cluster_ratio), policy, out, true);
        blocks_fixed = out.report(policy, P::P5_BLOCK_BITMAP_END, ProblemCtx::default());
    }
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
    if sb_free != free_blocks_sb {
        out.report(
            policy,
            P::P5_FREE_BLOCK_COUNT,
            ProblemCtx {
                num: sb_free,
                num2: free_blocks_sb,
                ..Default::default()
            },
        );
    }

    // Inodes.
    let ipg = u64::from(geo.inodes_per_group);
    let mut idiffs = Vec::new();
    let mut free_inodes = 0u64;
    let mut icsum_bad = Vec::new();
    let mut group_counts = Vec::with_capacity(geo.group_count as usize);
    for g in 0..geo.group_count {
        let gd = &fs.groups[g as usize];
        let uninit = fs.has_group_csum()
            && gd.flags() & BG_INODE_UNINIT != 0
            && p0.groups[g as usize].csum_ok;
        let disk = if uninit || !p0.groups[g as usize].inode_bitmap_ok {
            None
        } else {
            fs.read_block(gd.inode_bitmap())
        };
        let (mut free, mut dirs, mut free_disk, mut dirs_disk) = (0u64, 0u64, 0u64, 0u64);
        let mut group_diff = false;
        for i in 0..ipg {
            let idx = u64::from(g) * ipg + i;
            let actual = p1.inode_used.get(idx);
            let on_disk = disk.as_ref().is_some_and(|bits| test(bits, i));
            let is_dir = p1.kinds[idx as usize] & kind::TYPE_MASK == ft::DIR;
            if !actual {
                free += 1;
            } else if is_dir {
                dirs += 1;
            }
            if !on_disk {
                free_disk += 1;
            } else if is_dir {
                dirs_disk += 1;
            }
            if actual != on_disk {
                idiffs.push((idx + 1, actual));
                group_diff = true;
            }
        }
        if let Some(bits) = &disk {
            if fs.has_metadata_csum() && !group_diff {
                let len = (ipg / 8) as usize;
                let c = ffsck_format::csum::ext4_crc32c(fs.csum_seed, &bits[..len.min(bits.len())]);
                let stored = gd.inode_bitmap_csum();
                let ok = if geo.desc_size >= 64 {
                    c == stored
                } else {
                    c & 0xFFFF == stored
                };
                if !ok {
                    icsum_bad.push(g);
                }
            }
        }
        group_counts.push((free, dirs, free_disk, dirs_disk));
    }
    let mut inodes_fixed = true;
    if !idiffs.is_empty() {
        out.report(policy, P::P5_INODE_BITMAP_HEADER, ProblemCtx::default());
        report_diffs(&idiffs, 1, policy, out, false);
        inodes_fixed = out.report(policy, P::P5_INODE_BITMAP_END, ProblemCtx::default());
    }
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
    if sb_ifree != free_inodes {
        out.report(
            policy,
            P::P5_FREE_INODE_COUNT,
            ProblemCtx {
                num: sb_ifree,
                num2: free_inodes,
                ..Default::default()
            },
        );
    }
    if padding_bad {
        out.report(policy, P::P5_BLOCK_BMAP_PADDING, ProblemCtx::default());
    }
    for g in icsum_bad {
        out.report(
            policy,
            P::P5_INODE_BITMAP_CSUM_INVALID,
            ProblemCtx::group(g),
        );
    }
    for g in csum_bad {
        out.report(
            policy,
            P::P5_BLOCK_BITMAP_CSUM_INVALID,
            ProblemCtx::group(g),
        );
    }
    Pass5Facts {
        free_blocks,
        free_inodes,
    }
}
