//! Clear an inode as e2fsck does when it answers "Clear" for the whole inode: no links, no
//! flags, deletion time now. Its bitmap bit and blocks are freed by the next round's
//! allocation rebuild, which then sees the inode unused; but an inode cleared by pass 2's
//! look at a flagged inode is deallocated at once, as e2fsck's pass 2 does (bitmaps and
//! counts, its xattr block's reference), so the next round finds nothing left of it.

use super::inode::{edit, read_inode};
use crate::engine::AllocFacts;
use crate::filemap::{self, Visit};
use crate::pass0::Pass0Facts;
use crate::problem::{Fixer, Problem as P};
use crate::report::Finding;
use ffsck_format::ino;
use ffsck_format::inode::{flags as iflags, FileType, GOOD_OLD_INODE_SIZE};
use ffsck_io::Device;
use zerocopy::IntoBytes;

/// Clear the inodes named by the fixes among `fixes`.
pub fn apply(
    p0: &Pass0Facts,
    dev: &dyn Device,
    mut alloc: Option<&mut AllocFacts>,
    fixes: &[&Finding],
) {
    let now = p0.now.stamp();
    for f in fixes.iter().filter(|f| f.problem.fixed_by(Fixer::Clear)) {
        let ino = f.ctx.ino;
        let reserved = ino < p0.fs.geo.first_ino && ino != ino::ROOT;
        // Reserved inodes are left to their own fixers, but for the findings pass 1 raises
        // on every inode before it tells reserved ones apart (a table block of garbage, an
        // extent flag without the feature). The root is cleared as any directory (pass 3
        // then makes a new one and reconnects what was in it).
        if reserved && !matches!(f.problem, P::P1_INODE_IS_GARBAGE | P::P1_EXTENTS_SET) {
            continue;
        }
        if deallocates(f.problem) && !reserved {
            deallocate(p0, dev, alloc.as_deref_mut(), ino);
        } else if f.problem == P::P4_ZERO_LEN_INODE && !reserved {
            // e2fsck frees the inode's bitmap bit and counts as it clears it (it has no
            // blocks counted; any pointers it has are left as they are).
            free_inode(p0, dev, alloc.as_deref_mut(), ino, &[]);
        }
        edit(p0, dev, ino, |i| {
            i.i_links_count.set(0);
            i.i_flags.set(0);
            i.i_dtime.set(now.max(1));
            if reserved {
                // Nothing checks a reserved inode's links, so its map goes too, or the next
                // check would walk it again (as e2fsck); the bad-blocks inode is emptied.
                i.set_block_bytes(&[0; 60]);
                if ino == ino::BAD {
                    i.as_mut_bytes()[..GOOD_OLD_INODE_SIZE].fill(0);
                }
            }
        });
    }
}

/// The problems for which e2fsck's pass 2 (or pass 4, for an unattached inode) clears a
/// flagged inode whole, deallocating it at once.
fn deallocates(p: P) -> bool {
    matches!(
        p,
        P::P2_BAD_MODE
            | P::P2_BAD_CHAR_DEV
            | P::P2_BAD_BLOCK_DEV
            | P::P2_BAD_FIFO
            | P::P2_BAD_SOCKET
            | P::P2_INVALID_SYMLINK
    )
}

/// Deallocate inode `ino` as e2fsck's pass 2 does before clearing it: its xattr block loses
/// a reference (freed with the last), the blocks its map names (data and mapping blocks,
/// when the inode can have any) are freed, and so is the inode, on disk and in the round's
/// allocation facts (so a rebuild this round agrees).
fn deallocate(p0: &Pass0Facts, dev: &dyn Device, alloc: Option<&mut AllocFacts>, ino: u32) {
    let fs = &p0.fs;
    let geo = &fs.geo;
    let Some(inode) = read_inode(p0, dev, ino) else {
        return;
    };
    let ft = inode.file_type();
    let mut blocks = Vec::new();
    let mut acl = inode.file_acl(p0.fs.geo.sixty_four_bit());
    if acl != 0 && geo.compat.has(ffsck_format::Compat::EXT_ATTR) {
        if let Some(buf) = fs.read_block(acl).filter(|_| geo.is_valid_block(acl)) {
            let word = |o: usize| u32::from_le_bytes([buf[o], buf[o + 1], buf[o + 2], buf[o + 3]]);
            if buf.len() >= 8 && word(0) == ffsck_format::xattr::XATTR_MAGIC {
                if word(4) <= 1 {
                    blocks.push(acl);
                } else {
                    super::truncate::drop_xattr_ref(fs, dev, acl);
                }
            }
        }
        acl = 0;
    }
    // libext2fs's "has valid blocks": a symlink without an xattr block and with no blocks
    // counted, or one whose target fits in i_block, has none; nor has inline data.
    let valid = match ft {
        FileType::Regular | FileType::Directory => true,
        FileType::Symlink => {
            if acl == 0 {
                inode.blocks_raw(false) != 0
            } else {
                let b = inode.block_bytes();
                inode.size() >= 60 || (inode.size() > 4 && b[4..8] == [0; 4])
            }
        }
        _ => false,
    } && inode.flags() & iflags::INLINE_DATA == 0;
    if valid {
        let ratio = u64::from(geo.cluster_ratio.max(1));
        let limit = geo.blocks_count;
        let mut seen = 0u64;
        let extents = inode.flags() & iflags::EXTENTS != 0;
        filemap::walk(fs, &inode.block_bytes(), extents, false, &mut |v| {
            let b = match v {
                Visit::Data { pblk, .. } | Visit::Meta { pblk } => pblk,
            };
            if b != 0 && geo.is_valid_block(b) {
                blocks.push(b);
            }
            seen += 1;
            seen < limit
        });
        // One block per cluster.
        blocks.sort_unstable_by_key(|&b| b / ratio);
        blocks.dedup_by_key(|b| *b / ratio);
    }
    free_inode(p0, dev, alloc, ino, &blocks);
}

/// Free inode `ino` and `blocks` on disk and in the round's allocation facts.
fn free_inode(
    p0: &Pass0Facts,
    dev: &dyn Device,
    alloc: Option<&mut AllocFacts>,
    ino: u32,
    blocks: &[u64],
) {
    let geo = &p0.fs.geo;
    let dir = read_inode(p0, dev, ino).is_some_and(|i| i.file_type() == FileType::Directory);
    super::lpf::release(p0, dev, ino, dir, blocks);
    if let Some(facts) = alloc {
        facts.inode_used.clear(u64::from(ino - 1));
        if dir {
            let g = geo.group_of_inode(ino) as usize;
            if let Some(n) = facts.dirs_per_group.get_mut(g) {
                *n = n.saturating_sub(1);
            }
        }
        for &b in blocks {
            if b < facts.block_used.len() {
                facts.block_used.clear(b);
            }
        }
    }
}
