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
use crate::pass0::Pass0Facts;
use crate::problem::Problem as P;
use crate::report::{Finding, ProblemCtx};
use ffsck_format::inode::{flags, FileType, RawInode};
use ffsck_io::Device;
use std::collections::HashSet;
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

/// Release the orphan list of the file system in `dev`; returns what was reported.
pub fn release(p0: &Pass0Facts, dev: &dyn Device) -> Vec<Finding> {
    let fs = &p0.fs;
    let geo = &fs.geo;
    let mut out = Vec::new();
    let head = fs.sb.s_last_orphan.get();
    if head == 0 || fs.sb_block != 0 {
        return out;
    }
    // Whatever happens next, the list head is not used again.
    let mut sb = fs.sb.clone();
    sb.s_last_orphan.set(0);
    sb.update_checksum();
    let _ = dev.write_at(sb.as_bytes(), 1024);
    // A file system with errors gets a full check; its orphan list cannot be trusted.
    if fs.sb.s_state.get() & ERROR_FS != 0 {
        return out;
    }
    let legal = |i: u32| i >= geo.first_ino && i <= geo.inodes_count;
    if !legal(head) {
        out.push(found(
            P::P0_ORPHAN_ILLEGAL_HEAD_INODE,
            ProblemCtx::ino(head),
        ));
        return out;
    }
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(1, |d| d.as_secs() as u32);
    let mut seen = HashSet::new();
    let mut ino = head;
    for _ in 0..geo.inodes_count {
        if ino == 0 || !seen.insert(ino) {
            break;
        }
        let Some(raw) = fs.read_inode(ino) else {
            break;
        };
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
            break;
        }
        // An empty file loses all its blocks here; a file with a size is truncated to it.
        let bs = fs.block_size() as u64;
        let fast_symlink =
            inode.file_type() == FileType::Symlink && inode.size() < 60 && inode.file_acl() == 0;
        let truncate = links > 0
            && inode.flags() & flags::INLINE_DATA == 0
            && !fast_symlink
            && matches!(inode.file_type(), FileType::Regular | FileType::Directory);
        let ea_sectors = if inode.file_acl() != 0 { bs / 512 } else { 0 };
        let to_size = truncate && inode.size() > 0;
        let truncate = truncate && inode.size() == 0;
        if links == 0 && inode.file_acl() != 0 {
            super::truncate::drop_xattr_ref(fs, dev, inode.file_acl());
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
        ino = next;
    }
    out
}
