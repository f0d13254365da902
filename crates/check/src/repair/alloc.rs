//! Rebuild the allocation metadata from what the check found in use: block and inode bitmaps
//! (with their padding and checksums), group descriptor counts, flags and checksums (which also
//! fixes descriptors that failed their checksum), and the superblock's free counts. Groups whose metadata is already right are left byte-identical,
//! so only real changes reach the redo log.

use crate::bitmap::Bitmap;
use crate::engine::AllocFacts;
use crate::pass0::Pass0Facts;
use crate::problem::Problem as P;
use crate::relocate::Table;
use crate::report::{Finding, Policy};
use ffsck_format::group::{RawGroupDesc, BG_BLOCK_UNINIT, BG_INODE_UNINIT};
use ffsck_io::Device;
use std::collections::HashSet;
use zerocopy::IntoBytes;

fn set(bits: &mut [u8], i: usize) {
    if let Some(b) = bits.get_mut(i / 8) {
        *b |= 1 << (i % 8);
    }
}

/// Does `bits` equal what an uninitialised block bitmap of group `g` stands for: the group's
/// own superblock copy, descriptors and reserved blocks, bitmaps and inode table, where they lie
/// inside the group?
fn uninit_matches(p0: &Pass0Facts, g: u32, bits: &[u8]) -> bool {
    let fs = &p0.fs;
    let geo = &fs.geo;
    let ratio = u64::from(geo.cluster_ratio.max(1));
    let first = geo.group_first_block(g);
    let last = geo.group_last_block(g);
    let mut want = vec![0u8; bits.len()];
    let mut mark = |b: u64| {
        if (first..=last).contains(&b) {
            set(&mut want, ((b - first) / ratio) as usize);
        }
    };
    for (s, n) in geo.fixed_metadata_runs(g) {
        for b in s..s.saturating_add(n) {
            mark(b);
        }
    }
    let gd = &fs.groups[g as usize];
    mark(gd.block_bitmap());
    mark(gd.inode_bitmap());
    let it = gd.inode_table();
    for b in it..it.saturating_add(u64::from(geo.inode_blocks_per_group)) {
        mark(b);
    }
    let clusters = ((last - first) / ratio + 1) as usize;
    (0..clusters).all(|c| (want[c / 8] >> (c % 8)) & 1 == (bits[c / 8] >> (c % 8)) & 1)
}

/// The primary superblock as the device has it now (a step earlier in the round may have set
/// a field, such as a recreated orphan file's inode number), else pass 0's: this step owns
/// only the counts. A copy that is not this file system's (a bad magic number, another
/// UUID) is not built on.
fn current_super(p0: &Pass0Facts, dev: &dyn Device) -> ffsck_format::RawSuperblock {
    let mut raw = [0u8; ffsck_format::SUPERBLOCK_SIZE];
    dev.read_at(&mut raw, 1024)
        .ok()
        .and_then(|_| ffsck_format::RawSuperblock::parse(&raw))
        .filter(|sb| sb.s_magic.get() == ffsck_format::EXT2_MAGIC && sb.s_uuid == p0.fs.sb.s_uuid)
        .unwrap_or_else(|| p0.fs.sb.clone())
}

/// What a rebuild leaves as the device has it: the summaries whose fix was refused (by a
/// person, or by e2fsck.conf's `force_no`), or, in an interactive round, not answered yes,
/// as e2fsck writes only what was answered yes. The counts of a bitmap left as it is are
/// counted on that bitmap, as the check that asked about them counted them. What the round's
/// other fixes took or freed (`before` against the facts) is applied on top, so a block a fix
/// allocates is marked in a kept bitmap and counted in a kept count.
#[derive(Default)]
pub(super) struct Keep {
    /// Blocks and inodes in use as the round's check found them, before its fixes.
    before: Option<(crate::bitmap::Bitmap, crate::bitmap::Bitmap)>,
    block_bitmaps: bool,
    inode_bitmaps: bool,
    group_free_blocks: HashSet<u32>,
    group_free_inodes: HashSet<u32>,
    group_dirs: HashSet<u32>,
    free_blocks: bool,
    free_inodes: bool,
}

impl Keep {
    /// The summaries `findings` leave as they are: those refused (not merely held back for a
    /// later round), or with `asked`, every one not answered yes. `facts` are the round's, as
    /// its check found them.
    pub(super) fn of(
        findings: &[Finding],
        policy: Policy,
        asked: bool,
        facts: Option<&AllocFacts>,
    ) -> Keep {
        let mut keep = Keep::default();
        let refused = findings.iter().filter(|f| {
            !f.fixed && policy.answer(f.problem) && (asked || !policy.answer_to(f.problem, &f.ctx))
        });
        for f in refused {
            let g = f.ctx.group;
            match f.problem {
                P::P5_BLOCK_BITMAP_END => keep.block_bitmaps = true,
                P::P5_INODE_BITMAP_END => keep.inode_bitmaps = true,
                P::P5_FREE_BLOCK_COUNT_GROUP => _ = keep.group_free_blocks.insert(g),
                P::P5_FREE_INODE_COUNT_GROUP => _ = keep.group_free_inodes.insert(g),
                P::P5_FREE_DIR_COUNT_GROUP => _ = keep.group_dirs.insert(g),
                P::P5_FREE_BLOCK_COUNT => keep.free_blocks = true,
                P::P5_FREE_INODE_COUNT => keep.free_inodes = true,
                _ => {}
            }
        }
        let any = keep.block_bitmaps
            || keep.inode_bitmaps
            || keep.free_blocks
            || keep.free_inodes
            || !keep.group_free_blocks.is_empty()
            || !keep.group_free_inodes.is_empty();
        if any {
            keep.before = facts.map(|f| (f.block_used.clone(), f.inode_used.clone()));
        }
        keep
    }
}

/// The bitmap block at `blk` as the device has it.
fn read_bitmap(dev: &dyn Device, blk: u64, bs: usize, blocks: u64) -> Option<Vec<u8>> {
    let mut buf = vec![0u8; bs];
    (blk > 0 && blk < blocks && dev.read_at(&mut buf, blk * bs as u64).is_ok()).then_some(buf)
}

/// Clear bits among the first `n` of `bits`.
fn zeros(bits: &[u8], n: usize) -> u32 {
    (0..n).filter(|&i| bits[i / 8] >> (i % 8) & 1 == 0).count() as u32
}

/// Write every group's bitmaps and descriptor, and the superblock counts, as `facts` say.
pub fn rebuild(p0: &Pass0Facts, dev: &dyn Device, facts: &AllocFacts) {
    rebuild_keeping(p0, dev, facts, &Keep::default());
}

/// [`rebuild`], leaving what `keep` names as the device has it.
pub(super) fn rebuild_keeping(p0: &Pass0Facts, dev: &dyn Device, facts: &AllocFacts, keep: &Keep) {
    let fs = &p0.fs;
    let geo = &fs.geo;
    let bs = fs.block_size();
    let ratio = u64::from(geo.cluster_ratio.max(1));
    let ipg = geo.inodes_per_group as usize;
    let group_csum = fs.has_group_csum();
    let mut sb = current_super(p0, dev);
    let (mut free_clusters, mut free_inodes) = (0u64, 0u64);
    let mut descs = fs.groups.clone();
    // What the round's fixes freed (positive) or took, in clusters and inodes.
    let mut sb_delta = (0i64, 0i64);
    let moved = |g: u32, which: Table| {
        facts
            .relocated
            .iter()
            .find(|m| m.group == g && m.which == which)
            .map(|m| m.blk)
    };
    for g in 0..geo.group_count {
        let gd = &mut descs[g as usize];
        let (new_bb, new_ib) = (moved(g, Table::BlockBitmap), moved(g, Table::InodeBitmap));
        if let Some(b) = moved(g, Table::InodeTable) {
            gd.set_inode_table(b);
        }
        if let Some(b) = new_bb {
            gd.set_block_bitmap(b);
        }
        if let Some(b) = new_ib {
            gd.set_inode_bitmap(b);
        }
        // Block bitmap: one bit per cluster, padding set past the group's last cluster.
        let first = geo.group_first_block(g);
        let last = geo.group_last_block(g);
        let clusters = ((last - first) / ratio + 1) as usize;
        let mut bbits = vec![0u8; bs];
        let mut free_b = 0u32;
        for c in 0..clusters {
            let b0 = first + c as u64 * ratio;
            if (b0..(b0 + ratio).min(last + 1)).any(|b| facts.block_used.get(b)) {
                set(&mut bbits, c);
            } else {
                free_b += 1;
            }
        }
        for c in clusters..bs * 8 {
            set(&mut bbits, c);
        }
        // Inode bitmap: one bit per inode, padding set past inodes_per_group.
        let mut ibits = vec![0u8; bs];
        let base = u64::from(g) * ipg as u64;
        let mut used_i = 0u32;
        let mut last_used = 0usize;
        for i in 0..ipg {
            if facts.inode_used.get(base + i as u64) {
                set(&mut ibits, i);
                used_i += 1;
                last_used = i + 1;
            }
        }
        for i in ipg..bs * 8 {
            set(&mut ibits, i);
        }
        // A kept bitmap stays as the device has it but for what this round's fixes changed,
        // and its group's counts are counted on it (an uninitialised one keeps its
        // descriptor's, moved by those changes too).
        let orig = &fs.groups[g as usize];
        let (before_b, before_i) = (
            keep.before.as_ref().map(|b| &b.0),
            keep.before.as_ref().map(|b| &b.1),
        );
        let changed = |now: &Bitmap, before: Option<&Bitmap>, i: u64| {
            before.is_some_and(|b| b.get(i) != now.get(i))
        };
        // Clusters and inodes this round's fixes freed (positive) or took (negative).
        let mut delta_b = 0i64;
        let mut delta_i = 0i64;
        if let (Some(bb), Some(bi)) = (before_b, before_i) {
            for c in 0..clusters {
                let b0 = first + c as u64 * ratio;
                let span = b0..(b0 + ratio).min(last + 1);
                let was = span.clone().any(|b| bb.get(b));
                let now = span.clone().any(|b| facts.block_used.get(b));
                delta_b += i64::from(was) - i64::from(now);
            }
            for i in 0..ipg as u64 {
                let (was, now) = (bi.get(base + i), facts.inode_used.get(base + i));
                delta_i += i64::from(was) - i64::from(now);
            }
        }
        let moved_by = |count: u32, delta: i64| (i64::from(count) + delta).max(0) as u32;
        let kept_bb = keep.block_bitmaps && new_bb.is_none();
        // A kept bitmap this round's fixes changed is written (with just those changes).
        let (mut kept_bb_dirty, mut kept_ib_dirty) = (false, false);
        if kept_bb {
            match read_bitmap(dev, gd.block_bitmap(), bs, geo.blocks_count) {
                Some(mut disk) if orig.flags() & BG_BLOCK_UNINIT == 0 => {
                    let was = disk.clone();
                    for c in 0..clusters {
                        let b0 = first + c as u64 * ratio;
                        let span = b0..(b0 + ratio).min(last + 1);
                        if span
                            .into_iter()
                            .any(|b| changed(&facts.block_used, before_b, b))
                        {
                            let mask = 1u8 << (c % 8);
                            disk[c / 8] = (disk[c / 8] & !mask) | (bbits[c / 8] & mask);
                        }
                    }
                    free_b = zeros(&disk, clusters);
                    kept_bb_dirty = disk != was;
                    bbits = disk;
                }
                _ => free_b = moved_by(orig.free_blocks_count(), delta_b),
            }
        }
        let kept_ib = keep.inode_bitmaps && new_ib.is_none();
        if kept_ib {
            match read_bitmap(dev, gd.inode_bitmap(), bs, geo.blocks_count) {
                Some(mut disk) if orig.flags() & BG_INODE_UNINIT == 0 => {
                    let was = disk.clone();
                    for i in 0..ipg {
                        if changed(&facts.inode_used, before_i, base + i as u64) {
                            let mask = 1u8 << (i % 8);
                            disk[i / 8] = (disk[i / 8] & !mask) | (ibits[i / 8] & mask);
                        }
                    }
                    used_i = ipg as u32 - zeros(&disk, ipg);
                    kept_ib_dirty = disk != was;
                    last_used = (0..ipg)
                        .rev()
                        .find(|&i| disk[i / 8] >> (i % 8) & 1 != 0)
                        .map_or(0, |i| i + 1);
                    ibits = disk;
                }
                _ => {
                    let free = moved_by(orig.free_inodes_count(), delta_i);
                    used_i = (ipg as u32).saturating_sub(free);
                }
            }
        }
        free_clusters += u64::from(free_b);
        free_inodes += (ipg as u64).saturating_sub(u64::from(used_i));
        if keep.group_free_blocks.contains(&g) {
            free_b = moved_by(orig.free_blocks_count(), delta_b);
        }
        let free_i = if keep.group_free_inodes.contains(&g) {
            moved_by(orig.free_inodes_count(), delta_i)
        } else {
            (ipg as u32).saturating_sub(used_i)
        };
        sb_delta.0 += delta_b;
        sb_delta.1 += delta_i;

        let mut flags = gd.flags();
        if !group_csum {
            // Without uninit_bg or metadata_csum a group cannot be marked uninitialised.
            flags &= !(BG_BLOCK_UNINIT | BG_INODE_UNINIT);
            gd.set_itable_unused(0);
        }
        if g + 1 == geo.group_count {
            // The last group may be shorter: its bitmap is always written out.
            flags &= !BG_BLOCK_UNINIT;
        }
        // A descriptor that failed its checksum (or claims more unused inodes than it has
        // free) cannot vouch for its flags, as e2fsck.
        if group_csum && !p0.groups[g as usize].csum_ok {
            flags &= !(BG_BLOCK_UNINIT | BG_INODE_UNINIT);
            gd.set_itable_unused(0);
        }
        if group_csum {
            // An uninitialised group stays so only if it really is empty.
            if flags & BG_INODE_UNINIT != 0 && used_i > 0 {
                flags &= !BG_INODE_UNINIT;
            }
            if flags & BG_BLOCK_UNINIT != 0 && !uninit_matches(p0, g, &bbits) {
                flags &= !BG_BLOCK_UNINIT;
            }
            if flags & BG_INODE_UNINIT == 0 {
                let tail = (ipg - last_used) as u32;
                if gd.itable_unused() > tail {
                    gd.set_itable_unused(tail);
                }
            }
        }
        gd.bg_flags.set(flags);
        gd.set_free_blocks_count(free_b);
        gd.set_free_inodes_count(free_i);
        if !keep.group_dirs.contains(&g) {
            gd.set_used_dirs_count(facts.dirs_per_group.get(g as usize).copied().unwrap_or(0));
        }
        if fs.has_metadata_csum() {
            let seed = fs.csum_seed;
            let bc = ffsck_format::verify::bitmap_checksum(&bbits, geo.clusters_per_group, seed);
            let ic = ffsck_format::verify::bitmap_checksum(&ibits, ipg as u32, seed);
            let wide = geo.desc_size >= 64;
            gd.set_block_bitmap_csum(if wide { bc } else { bc & 0xFFFF });
            gd.set_inode_bitmap_csum(if wide { ic } else { ic & 0xFFFF });
        }
        gd.update_checksum(&fs.sb, g, geo.desc_size as usize);
        let write_block = |blk: u64, data: &[u8]| {
            if blk > 0 && blk < geo.blocks_count {
                let _ = dev.write_at(data, blk * bs as u64);
            }
        };
        let st = &p0.groups[g as usize];
        if (st.block_bitmap_ok || new_bb.is_some())
            && flags & BG_BLOCK_UNINIT == 0
            && (!kept_bb || kept_bb_dirty)
        {
            write_block(gd.block_bitmap(), &bbits);
        }
        if (st.inode_bitmap_ok || new_ib.is_some())
            && flags & BG_INODE_UNINIT == 0
            && (!kept_ib || kept_ib_dirty)
        {
            write_block(gd.inode_bitmap(), &ibits);
        }
    }
    for (g, gd) in descs.iter().enumerate() {
        write_desc(p0, dev, g as u32, gd);
    }
    if keep.free_blocks {
        let free = (sb.free_blocks_count() as i64 + sb_delta.0 * ratio as i64).max(0);
        sb.set_free_blocks_count(free as u64);
    } else {
        sb.set_free_blocks_count(free_clusters * ratio);
    }
    if keep.free_inodes {
        let free = (i64::from(sb.s_free_inodes_count.get()) + sb_delta.1).max(0);
        sb.s_free_inodes_count.set(free as u32);
    } else {
        sb.s_free_inodes_count.set(free_inodes as u32);
    }
    sb.update_checksum();
    let _ = dev.write_at(sb.as_bytes(), 1024);
}

/// Write group `g`'s descriptor at its primary location.
pub(super) fn write_desc(p0: &Pass0Facts, dev: &dyn Device, g: u32, gd: &RawGroupDesc) {
    let geo = &p0.fs.geo;
    let ds = geo.desc_size as usize;
    let blk = geo.desc_block(g / geo.descs_per_block);
    let off = blk * u64::from(geo.block_size) + u64::from(g % geo.descs_per_block) * ds as u64;
    let _ = dev.write_at(&gd.as_bytes()[..ds.min(64)], off);
}

/// Mark `taken` in use and `freed` free in the on-disk block bitmaps. With `counts`, the
/// groups' and the superblock's free counts come along, as libext2fs's allocator keeps them
/// (a change made before the check has facts to rebuild from: the bad-block list). Without,
/// only the bits and their checksums change, as e2fsck's repairs that take a block in the
/// middle of a check leave them (pass 1D's clones, a directory's hole filled): pass 5 then
/// finds the counts wrong, not the bitmap. Bitmaps are read through `dev`, so the marks of
/// several steps of a round add up (the superblock's count too: `current_super`). Groups whose bitmap is uninitialised or unreadable are
/// left to pass 5.
pub(super) fn mark_blocks(
    p0: &Pass0Facts,
    dev: &dyn Device,
    taken: &[u64],
    freed: &[u64],
    counts: bool,
) {
    let fs = &p0.fs;
    let geo = &fs.geo;
    let bs = fs.block_size();
    let ratio = u64::from(geo.cluster_ratio.max(1));
    let mut by_group: std::collections::BTreeMap<u32, Vec<(u64, bool)>> = Default::default();
    for (&b, used) in taken
        .iter()
        .map(|b| (b, true))
        .chain(freed.iter().map(|b| (b, false)))
    {
        if b >= geo.first_data_block && b < geo.blocks_count {
            by_group
                .entry(geo.group_of_block(b))
                .or_default()
                .push((b, used));
        }
    }
    let mut sb = current_super(p0, dev);
    let mut free = sb.free_blocks_count() as i64;
    for (g, changes) in by_group {
        let mut gd = fs.groups[g as usize].clone();
        let uninit = fs.has_group_csum() && gd.flags() & BG_BLOCK_UNINIT != 0;
        if uninit || !p0.groups[g as usize].block_bitmap_ok {
            continue;
        }
        let mut bits = vec![0u8; bs];
        if dev
            .read_at(&mut bits, gd.block_bitmap() * bs as u64)
            .is_err()
        {
            continue;
        }
        let first = geo.group_first_block(g);
        let mut delta = 0i64;
        for (b, used) in changes {
            let c = ((b - first) / ratio) as usize;
            let Some(byte) = bits.get_mut(c / 8) else {
                continue;
            };
            let was = *byte >> (c % 8) & 1 != 0;
            if was != used {
                *byte ^= 1 << (c % 8);
                delta += if used { -1 } else { 1 };
            }
        }
        if delta == 0 {
            continue;
        }
        let _ = dev.write_at(&bits, gd.block_bitmap() * bs as u64);
        if counts {
            gd.set_free_blocks_count((i64::from(gd.free_blocks_count()) + delta).max(0) as u32);
        }
        if fs.has_metadata_csum() {
            let bc =
                ffsck_format::verify::bitmap_checksum(&bits, geo.clusters_per_group, fs.csum_seed);
            gd.set_block_bitmap_csum(if geo.desc_size >= 64 { bc } else { bc & 0xFFFF });
        }
        gd.update_checksum(&fs.sb, g, geo.desc_size as usize);
        write_desc(p0, dev, g, &gd);
        free += delta * ratio as i64;
    }
    if !counts {
        return;
    }
    sb.set_free_blocks_count(free.max(0) as u64);
    sb.update_checksum();
    let _ = dev.write_at(sb.as_bytes(), 1024);
}
