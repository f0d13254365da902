//! Reconnect unattached inodes and unconnected directories to `/lost+found` as `#INO`, as
//! e2fsck's passes 3 and 4 do. A reconnected directory's `..` is pointed at `/lost+found` at
//! once, and the link counts of its old and new parent follow (as e2fsck does when it
//! reconnects), so no later round reports them; this round's count fixes for the inodes a
//! reconnection touches wait for the next round's check (`hold_counts`).
//!
//! Only an existing `/lost+found` with room in its blocks is used: the plan is made in memory
//! first, so a finding is only answered yes when its entry really fits.

use super::Dirs;
use crate::ext4::dir as edir;
use crate::pass0::Pass0Facts;
use crate::problem::{Fixer, Problem as P};
use crate::report::Finding;
use ffsck_format::dir as fdir;
use ffsck_format::inode::{FileType, RawInode};
use ffsck_format::{ino as rino, Incompat};
use ffsck_io::Device;
use std::collections::{HashMap, HashSet};

/// The blocks of `/lost+found` with the new entries in place, and the inodes they link.
#[derive(Default)]
pub struct Plan {
    pub lpf: u32,
    blocks: Vec<(u64, Vec<u8>, bool)>,
    pub linked: HashSet<u32>,
    /// Reconnected directories: (directory, physical block 0, the inode its `..` names now).
    dotdots: Vec<(u32, u64, u32)>,
}

/// Find `/lost+found` and place an entry for every reconnect finding the policy accepted.
/// With `lpf_root`, lost files go to the root directory when there is no `/lost+found`
/// (e2fsck's fallback when it could not make one).
pub fn plan(
    p0: &Pass0Facts,
    dev: &dyn Device,
    dirs: &Dirs,
    findings: &[Finding],
    lpf_root: bool,
) -> Plan {
    let mut plan = Plan::default();
    let wanted: Vec<u32> = findings
        .iter()
        .filter(|f| f.fixed && f.problem.fixed_by(Fixer::Connect))
        .map(|f| f.ctx.ino)
        .collect();
    if wanted.is_empty() {
        return plan;
    }
    let fs = &p0.fs;
    let bs = fs.block_size();
    let read = |pblk: u64| -> Option<Vec<u8>> {
        let mut b = vec![0u8; bs];
        (pblk != 0 && pblk < fs.geo.blocks_count)
            .then_some(())
            .and_then(|_| dev.read_at(&mut b, pblk * bs as u64).ok())
            .map(|_| b)
    };
    // `lost+found` in the root directory.
    let mut lpf = 0;
    for pblk in dirs.blocks(rino::ROOT) {
        if let Some(b) = read(pblk) {
            if lpf == 0 {
                lpf = edir::leaf_entries(&b)
                    .good()
                    .find(|e| e.inode != 0 && e.name == b"lost+found")
                    .map_or(0, |e| e.inode);
            }
        }
    }
    if lpf == 0 && lpf_root {
        lpf = rino::ROOT;
    }
    if lpf == 0 || dirs.blocks(lpf).is_empty() {
        return plan;
    }
    plan.lpf = lpf;
    for pblk in dirs.blocks(lpf) {
        if let Some(b) = read(pblk) {
            plan.blocks.push((pblk, b, false));
        }
    }
    let filetype = fs.geo.incompat.has(Incompat::FILETYPE);
    for ino in wanted {
        if ino == lpf || plan.linked.contains(&ino) {
            continue;
        }
        let Some(kind) = fs
            .read_inode(ino)
            .map(|raw| FileType::from_mode(RawInode::parse(&raw).mode()))
        else {
            continue;
        };
        // An inode of no valid type is cleared by e2fsck, never linked, unless the clearing
        // was refused (then it is linked with no type in its entry, as e2fsck links it).
        let kept = findings
            .iter()
            .any(|f| f.ctx.ino == ino && f.problem == P::P2_BAD_MODE && !f.fixed);
        if kind == FileType::Bad && !kept {
            continue;
        }
        let ft = if filetype { kind.dirent_type() } else { 0 };
        let name = format!("#{ino}");
        for (_, b, dirty) in plan.blocks.iter_mut() {
            if insert(b, ino, ft, name.as_bytes()) {
                *dirty = true;
                plan.linked.insert(ino);
                break;
            }
        }
        if kind == FileType::Directory && plan.linked.contains(&ino) {
            if let Some(at) = dirs
                .block(ino, 0)
                .and_then(|pblk| dotdot_of(&read(pblk)?, pblk))
            {
                plan.dotdots.push((ino, at.0, at.1));
            }
        }
    }
    plan
}

/// The inode the `..` entry of a directory's block 0 names, with the block (`None` when the
/// second entry is not a `..`).
fn dotdot_of(b: &[u8], pblk: u64) -> Option<(u64, u32)> {
    let mut it = edir::leaf_entries(b).good();
    let (_, second) = (it.next()?, it.next()?);
    (second.name == b"..").then_some((pblk, second.inode))
}

/// Hold back this round's reference-count fixes of the inodes the reconnections change (the
/// reconnected inodes, `/lost+found`, the old parents): the next round counts them again.
pub fn hold_counts(plan: &Plan, findings: &mut [Finding]) {
    follow_reconnections(findings);
    if plan.linked.is_empty() {
        return;
    }
    let reconnected: HashSet<u32> = findings
        .iter()
        .filter(|f| f.fixed && f.problem == P::P4_UNATTACHED_INODE)
        .map(|f| f.ctx.ino)
        .collect();
    let mut touched: HashSet<u32> = plan.linked.clone();
    touched.insert(plan.lpf);
    touched.extend(plan.dotdots.iter().map(|d| d.2));
    for f in findings.iter_mut() {
        if f.fixed
            && f.problem == P::P4_BAD_REF_COUNT
            && touched.contains(&f.ctx.ino)
            && !reconnected.contains(&f.ctx.ino)
        {
            f.fixed = false;
        }
    }
}

/// The count pass 4 judges for an unattached inode it reconnects (the one entry in
/// `/lost+found`, as e2fsck judges it) is made exactly when the reconnection is.
pub fn follow_reconnections(findings: &mut [Finding]) {
    let unattached: HashMap<u32, bool> = findings
        .iter()
        .filter(|f| f.problem == P::P4_UNATTACHED_INODE)
        .map(|f| (f.ctx.ino, f.fixed))
        .collect();
    for f in findings
        .iter_mut()
        .filter(|f| f.problem == P::P4_BAD_REF_COUNT)
    {
        if let Some(&made) = unattached.get(&f.ctx.ino) {
            f.fixed &= made;
        }
    }
}

/// Write the changed blocks of `/lost+found`.
pub fn apply(p0: &Pass0Facts, dev: &dyn Device, plan: &Plan) {
    let bs = p0.fs.block_size() as u64;
    for (pblk, b, dirty) in &plan.blocks {
        if *dirty {
            let mut b = b.clone();
            super::dirent::set_leaf_csum(p0, dev, plan.lpf, &mut b);
            let _ = dev.write_at(&b, pblk * bs);
        }
    }
    let lpf = plan.lpf;
    let inodes = p0.fs.geo.inodes_count;
    let typed = p0.fs.geo.incompat.has(Incompat::FILETYPE);
    for &(dir, pblk, was) in &plan.dotdots {
        if was == lpf {
            continue;
        }
        let moved = super::dirent::edit_block(p0, dev, dir, pblk, |buf| {
            let bs = buf.len() as u32;
            let Some(first) = fdir::header_at(buf, 0, bs) else {
                return false;
            };
            let off = first.rec_len as usize;
            match fdir::header_at(buf, off, bs) {
                Some(h) if h.inode == was && h.name_len == 2 && off + 8 <= buf.len() => {
                    buf[off..off + 4].copy_from_slice(&lpf.to_le_bytes());
                    // The entry names a directory now (as e2fsck's parent fix sets it).
                    buf[off + 7] = if typed { fdir::ft::DIR } else { 0 };
                    true
                }
                _ => false,
            }
        });
        if !moved {
            continue;
        }
        // The links the `..` gave: one more for `/lost+found`, one fewer for the old parent.
        super::inode::edit(p0, dev, lpf, |i| {
            let n = i.i_links_count.get();
            i.i_links_count.set(n.saturating_add(1));
        });
        // Only a directory whose count can have held the link loses it: never below its own
        // two (`.` and an entry), so a live inode is never left with no link at all (a
        // recreated root, for one, never counted the old `..` entries).
        let old_dir = super::inode::read_inode(p0, dev, was)
            .is_some_and(|i| i.file_type() == FileType::Directory && i.links_count() > 2);
        if was != 0 && was <= inodes && old_dir {
            super::inode::edit(p0, dev, was, |i| {
                let n = i.i_links_count.get();
                i.i_links_count.set(n.saturating_sub(1));
            });
        }
    }
}

/// Put an entry for `ino` into the first gap of `b` large enough for it.
pub(super) fn insert(b: &mut [u8], ino: u32, ft: u8, name: &[u8]) -> bool {
    let need = fdir::rec_len_for(name.len()) as usize;
    let spot = edir::leaf_entries(b).good().find_map(|e| {
        let (off, rl) = (e.off, e.rec_len);
        if e.inode == 0 {
            (rl >= need).then_some((off, off, rl))
        } else {
            let used = fdir::rec_len_for(e.name.len()) as usize;
            (rl >= used + need).then_some((off, off + used, rl - used))
        }
    });
    let Some((prev, at, len)) = spot else {
        return false;
    };
    // Record lengths of 64 KiB blocks do not fit in 16 bits as they are: encode them.
    let bs = b.len() as u32;
    if prev != at {
        let rl = fdir::encode_rec_len((at - prev) as u32, bs);
        b[prev + 4..prev + 6].copy_from_slice(&rl.to_le_bytes());
    }
    b[at..at + 4].copy_from_slice(&ino.to_le_bytes());
    b[at + 4..at + 6].copy_from_slice(&fdir::encode_rec_len(len as u32, bs).to_le_bytes());
    b[at + 6] = name.len() as u8;
    b[at + 7] = ft;
    b[at + 8..at + 8 + name.len()].copy_from_slice(name);
    true
}
