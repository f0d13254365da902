//! Release the orphan inode list before the first check of a repair, as e2fsck does when it
//! may write: `s_last_orphan` is cleared, and each inode on the chain (linked through `i_dtime`)
//! is cleared when it has no links left (deletion time now) or, when it still has links and a
//! size of zero, truncated to nothing, or otherwise truncated to its `i_size` (`truncate.rs`);
//! dtime is zeroed either way. A cleared inode's extended-attribute block loses one reference.
//! Blocks and bitmap bits the released inodes held are freed by the allocation rebuild of the
//! rounds that follow.
//!
//! The walk is bounded by the inode count and stops at a repeated inode or at an inode number
//! outside the file system (reported, as e2fsck does; what is left of the chain is then found
//! by pass 1 as orphan-list refugees).

use super::inode::edit;
use crate::filemap::{self, Visit};
use crate::pass0::Pass0Facts;
use crate::problem::Problem as P;
use crate::report::{Finding, Findings, Policy, ProblemCtx};
use crate::CheckOptions;
use ffsck_format::inode::{flags, FileType, RawInode};
use ffsck_format::{Compat, Incompat, RoCompat};
use ffsck_io::Device;
use std::collections::HashSet;
use std::sync::Arc;
use zerocopy::IntoBytes;

/// `s_state` bit: the file system was marked as having errors.
const ERROR_FS: u16 = 2;

fn found(problem: P, ctx: ProblemCtx) -> Finding {
    Finding {
        problem,
        ctx,
        fixed: true,
    }
}

/// A journal that needs recovery is replayed (into `ov`) before the orphans are released, as
/// e2fsck does; returns the file system opened again and the replay's findings. The first
/// check then finds nothing left to replay.
pub fn recover(
    p0: Pass0Facts,
    ov: Arc<dyn Device>,
    opts: &CheckOptions,
) -> (Pass0Facts, Vec<Finding>) {
    let needs = p0.fs.sb.incompat().has(Incompat::RECOVER);
    let Some(journal) = p0.journal.journal.as_ref().filter(|_| needs) else {
        return (p0, Vec::new());
    };
    let plan = crate::journal::recovery::plan(&p0.fs, journal);
    for r in &plan.records {
        if ov.write_at(&r.data, r.offset).is_err() {
            return (p0, Vec::new());
        }
    }
    // An external journal's reset is staged on the repair's overlay of that device, as the
    // check's own replay does; it is written only after the file system is committed.
    if let (Some(d), Some(_)) = (&opts.journal_dev, &journal.ext) {
        for r in &plan.journal_records {
            if d.write_at(&r.data, r.offset).is_err() {
                return (p0, Vec::new());
            }
        }
    }
    let mut f = Findings::default();
    plan.report(opts.policy, false, &mut f);
    let mut scratch = Findings::default();
    match crate::pass0::run_with(ov, opts.superblock, Policy::No, None, p0.now, &mut scratch) {
        Ok(p) => (p, f.0),
        // Opening again failed: the first check reports why.
        Err(_) => (p0, f.0),
    }
}

/// Release the orphan list (and the orphan file) of the file system in `dev`; returns what
/// was reported.
pub fn release(p0: &Pass0Facts, dev: &dyn Device) -> Vec<Finding> {
    let fs = &p0.fs;
    let geo = &fs.geo;
    let mut out = Vec::new();
    let head = fs.sb.s_last_orphan.get();
    let has_file = fs.sb.compat().has(Compat::ORPHAN_FILE);
    if (head == 0 && !has_file) || fs.sb_block != 0 {
        return out;
    }
    // A deletion time of 0 would read as "not deleted": without a clock, 1.
    let now = match p0.now.secs() {
        0 => 1,
        t => t as u32,
    };
    let mut seen = HashSet::new();
    let present = fs.sb.ro_compat().has(RoCompat::ORPHAN_PRESENT);
    if head != 0 || present {
        // Whatever happens next, the list head is not used again, and the orphan file is
        // emptied below.
        let mut sb = fs.sb.clone();
        sb.s_last_orphan.set(0);
        sb.s_feature_ro_compat
            .set(sb.s_feature_ro_compat.get() & !RoCompat::ORPHAN_PRESENT);
        sb.update_checksum();
        let _ = dev.write_at(sb.as_bytes(), 1024);
    }
    // A file system with errors gets a full check; its orphans cannot be trusted.
    if fs.sb.s_state.get() & ERROR_FS != 0 {
        return out;
    }
    let legal = |i: u32| i >= geo.first_ino && i <= geo.inodes_count;
    if head != 0 && !legal(head) {
        out.push(found(
            P::P0_ORPHAN_ILLEGAL_HEAD_INODE,
            ProblemCtx::ino(head),
        ));
    } else {
        let mut ino = head;
        for _ in 0..geo.inodes_count {
            if ino == 0 || !seen.insert(ino) {
                break;
            }
            let Some(next) = release_one(p0, dev, ino, now, &mut out, &legal) else {
                break;
            };
            ino = next;
        }
    }
    if has_file {
        release_file(p0, dev, now, &mut seen, &mut out, &legal);
    }
    out
}

/// Release the inodes listed in the orphan file's blocks and zero their slots (keeping each
/// block's tail checksum right). Blocks that are not clean orphan blocks (bad magic or
/// checksum) are left to the orphan-file check after pass 5.
fn release_file(
    p0: &Pass0Facts,
    dev: &dyn Device,
    now: u32,
    seen: &mut HashSet<u32>,
    out: &mut Vec<Finding>,
    legal: &dyn Fn(u32) -> bool,
) {
    let fs = &p0.fs;
    let oino = fs.sb.s_orphan_file_inum.get();
    if oino == 0 || oino > fs.geo.inodes_count {
        return;
    }
    let Some(raw) = fs.read_inode(oino) else {
        return;
    };
    let inode = RawInode::parse(&raw);
    let bs = fs.block_size() as u64;
    let blocks = inode.size() / bs;
    let generation = inode.i_generation.get();
    let extents = inode.flags() & flags::EXTENTS != 0;
    let mut pblks = Vec::new();
    filemap::walk(fs, &inode.block_bytes(), extents, false, &mut |v| {
        if let Visit::Data { lblk, pblk } = v {
            if lblk >= blocks || lblk > fs.geo.blocks_count {
                return false;
            }
            if pblk != 0 {
                pblks.push(pblk);
            }
        }
        true
    });
    for pblk in pblks {
        let Some(mut buf) = fs.read_block(pblk) else {
            continue;
        };
        let n = buf.len();
        let magic = u32::from_le_bytes([buf[n - 8], buf[n - 7], buf[n - 6], buf[n - 5]]);
        if magic != crate::orphan::ORPHAN_BLOCK_MAGIC
            || (fs.has_metadata_csum()
                && crate::orphan::block_csum(fs, oino, generation, pblk, &buf)
                    != u32::from_le_bytes([buf[n - 4], buf[n - 3], buf[n - 2], buf[n - 1]]))
        {
            continue;
        }
        let mut dirty = false;
        for slot in 0..(n - 8) / 4 {
            let ino = u32::from_le_bytes([
                buf[4 * slot],
                buf[4 * slot + 1],
                buf[4 * slot + 2],
                buf[4 * slot + 3],
            ]);
            if ino == 0 {
                continue;
            }
            buf[4 * slot..4 * slot + 4].fill(0);
            dirty = true;
            if !legal(ino) || !seen.insert(ino) {
                continue;
            }
            // The orphan file's inodes are not chained: dtime is no link here.
            release_one(p0, dev, ino, now, out, &|_| true);
        }
        if dirty {
            if fs.has_metadata_csum() {
                let c = crate::orphan::block_csum(fs, oino, generation, pblk, &buf);
                buf[n - 4..].copy_from_slice(&c.to_le_bytes());
            }
            let _ = dev.write_at(&buf, pblk * bs);
        }
    }
}

/// Release one orphan inode: report it, then clear it (no links) or truncate it. Returns the
/// next inode of the chain (its dtime), or `None` when the chain must stop here.
fn release_one(
    p0: &Pass0Facts,
    dev: &dyn Device,
    ino: u32,
    now: u32,
    out: &mut Vec<Finding>,
    legal: &dyn Fn(u32) -> bool,
) -> Option<u32> {
    let fs = &p0.fs;
    {
        let raw = fs.read_inode(ino)?;
        let inode = RawInode::parse(&raw);
        let links = inode.links_count();
        out.push(found(
            P::P0_ORPHAN_CLEAR_INODE,
            ProblemCtx {
                ino,
                str: Some(if links > 0 { "Truncating" } else { "Clearing" }.into()),
                name: Some(format!(
                    "uid={}, gid={}, mode=0{:o}, size={}",
                    u32::from(inode.i_uid.get()) | u32::from(inode.l_i_uid_high.get()) << 16,
                    u32::from(inode.i_gid.get()) | u32::from(inode.l_i_gid_high.get()) << 16,
                    inode.mode(),
                    inode.size()
                )),
                ..Default::default()
            },
        ));
        let next = inode.dtime();
        if next != 0 && !legal(next) {
            out.push(found(P::P0_ORPHAN_ILLEGAL_INODE, ProblemCtx::ino(next)));
            return None;
        }
        // An empty file loses all its blocks here; a file with a size is truncated to it.
        let bs = fs.block_size() as u64;
        let fast_symlink = inode.file_type() == FileType::Symlink
            && inode.size() < 60
            && inode.file_acl(fs.geo.sixty_four_bit()) == 0;
        let truncate = links > 0
            && inode.flags() & flags::INLINE_DATA == 0
            && !fast_symlink
            && matches!(inode.file_type(), FileType::Regular | FileType::Directory);
        let ea_sectors = if inode.file_acl(fs.geo.sixty_four_bit()) != 0 {
            bs / 512
        } else {
            0
        };
        let to_size = truncate && inode.size() > 0;
        let truncate = truncate && inode.size() == 0;
        if links == 0 && inode.file_acl(fs.geo.sixty_four_bit()) != 0 {
            super::truncate::drop_xattr_ref(fs, dev, inode.file_acl(fs.geo.sixty_four_bit()));
        }
        edit(p0, dev, ino, |i| {
            if links == 0 {
                i.i_dtime.set(now.max(1));
                return;
            }
            i.i_dtime.set(0);
            if truncate {
                for w in i.i_block.iter_mut() {
                    w.set(0);
                }
                if i.i_flags.get() & flags::EXTENTS != 0 {
                    // An empty extent tree root: magic, no entries, room for four.
                    i.i_block[0].set(0xF30A);
                    i.i_block[1].set(4);
                }
                i.i_blocks_lo.set(ea_sectors as u32);
                i.l_i_blocks_high.set(0);
            }
        });
        if to_size {
            super::truncate::to_size(p0, dev, ino);
        }
        Some(next)
    }
}

/// A dirty orphan-file block agreed to be cleared: every block of the orphan file is written
/// as a clean, empty orphan block (e2fsck reinitialises the whole file).
///
/// An orphan file without a journal has no use (the kernel only fills it in journalled
/// transactions): its inode is zeroed and the `orphan_file` and `orphan_present` features
/// cleared, as e2fsck does; the next round's allocation rebuild frees its blocks.
pub fn apply_file(p0: &Pass0Facts, dev: &dyn Device, fixes: &[&Finding]) {
    let has = |p: P| fixes.iter().any(|f| f.problem == p);
    if has(P::P6_ORPHAN_FILE_WITHOUT_JOURNAL) {
        let ino = p0.fs.sb.s_orphan_file_inum.get();
        if ino != 0 {
            edit(p0, dev, ino, |i| i.as_mut_bytes().fill(0));
        }
        super::features::edit_super(dev, |sb| {
            sb.s_feature_compat
                .set(sb.s_feature_compat.get() & !Compat::ORPHAN_FILE);
            sb.s_feature_ro_compat
                .set(sb.s_feature_ro_compat.get() & !RoCompat::ORPHAN_PRESENT);
        });
        return;
    }
    if !has(P::P6_ORPHAN_BLOCK_DIRTY) {
        return;
    }
    let fs = &p0.fs;
    let ino = fs.sb.s_orphan_file_inum.get();
    let Some(raw) = fs.read_inode(ino) else {
        return;
    };
    let inode = RawInode::parse(&raw);
    let bs = fs.geo.block_size as u64;
    let blocks = inode.size() / bs;
    let generation = inode.i_generation.get();
    let extents = inode.flags() & flags::EXTENTS != 0;
    let mut visit = |v: Visit| -> bool {
        let Visit::Data { lblk, pblk } = v else {
            return true;
        };
        if lblk >= blocks {
            return false;
        }
        if pblk != 0 {
            let clean = crate::orphan::clean_block(fs, ino, generation, pblk);
            let _ = dev.write_at(&clean, pblk * bs);
        }
        true
    };
    filemap::walk(fs, &inode.block_bytes(), extents, false, &mut visit);
}

/// Blocks of a new orphan file: the size mke2fs and e2fsck give one, in whole clusters.
fn orphan_file_blocks(fs_blocks: u64, cluster_ratio: u32) -> u64 {
    let n = match fs_blocks {
        b if b < 128 << 10 => 32,
        b if b < 2 << 20 => b / 4096,
        _ => 512,
    };
    let r = u64::from(cluster_ratio.max(1));
    n.div_ceil(r) * r
}

/// A corrupt orphan file agreed to be recreated (e2fsck's "Recreate"): its blocks are given
/// back in `facts`, new ones taken there and written as clean orphan blocks, and its inode
/// made anew (same number). Returns whether the allocation changed (the caller rebuilds the
/// bitmaps and counts); with no room the old file is left as it was.
pub fn recreate_file(
    p0: &Pass0Facts,
    dev: &dyn Device,
    facts: &mut crate::engine::AllocFacts,
    fixes: &[&Finding],
) -> bool {
    if !fixes
        .iter()
        .any(|f| f.problem == P::P6_ORPHAN_FILE_CORRUPTED)
    {
        return false;
    }
    let fs = &p0.fs;
    let geo = &fs.geo;
    let named = fs.sb.s_orphan_file_inum.get();
    // A number that names no inode (zeroed, or past the count): the file is made in a free
    // inode and the superblock names it; the inode the old number named, if any, is left to
    // the check (unattached, it goes to /lost+found).
    let (ino, renamed) = if (geo.first_ino..=geo.inodes_count).contains(&named) {
        (named, false)
    } else {
        match super::lpf::pick_inode(p0, facts, fixes.iter().copied()) {
            Some(i) => (i, true),
            None => return false,
        }
    };
    let mut old = Vec::new();
    if !renamed {
        let Some(inode) = super::inode::read_inode(p0, dev, ino) else {
            return false;
        };
        let mut visit = |v: Visit| -> bool {
            match v {
                Visit::Data { pblk, .. } | Visit::Meta { pblk } if geo.is_valid_block(pblk) => {
                    old.push(pblk)
                }
                _ => {}
            }
            true
        };
        let extents = inode.flags() & flags::EXTENTS != 0;
        filemap::walk(fs, &inode.block_bytes(), extents, false, &mut visit);
    }
    for &b in &old {
        facts.block_used.clear(b);
    }
    let total = orphan_file_blocks(geo.blocks_count, geo.cluster_ratio);
    let extent_mapped = geo.incompat.has(Incompat::EXTENTS);
    let start = old.first().copied().unwrap_or(geo.first_data_block);
    let made = super::newjournal::allocate(p0, dev, facts, ino, 0, total, start, extent_mapped);
    let Some(file) = made else {
        old.iter().for_each(|&b| facts.block_used.set(b));
        return false;
    };
    let bs = fs.block_size() as u64;
    for &pblk in file.data() {
        let clean = crate::orphan::clean_block(fs, ino, 0, pblk);
        let _ = dev.write_at(&clean, pblk * bs);
    }
    super::newjournal::fresh_inode(p0, dev, ino, &file, total * bs, extent_mapped);
    facts.inode_used.set(u64::from(ino.saturating_sub(1)));
    if renamed {
        super::features::edit_super(dev, |sb| sb.s_orphan_file_inum.set(ino));
    }
    true
}
