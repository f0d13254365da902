//! The fields of an inode pass 1 flagged, checked at the first entry that names it.

use crate::ext4::inode as einode;
use crate::fs::Fs;
use crate::problem::Problem as P;
use crate::report::{Findings, Policy, ProblemCtx};
use ffsck_format::inode::{FileType, RawInode};
use ffsck_format::Incompat;

/// The problem for which the whole of a flagged inode is cleared (an impossible mode, a
/// device, FIFO or socket with block pointers or flags it may not have, an invalid symlink),
/// if any. (The symlink is judged as it is: an xattr block cleared first changes nothing
/// `symlink_ok` looks at.)
fn whole_clear(fs: &Fs, inode: &RawInode, raw: &[u8]) -> Option<P> {
    let dev_ok = crate::pass1::device_inode_ok(inode);
    match inode.file_type() {
        FileType::Bad => Some(P::P2_BAD_MODE),
        FileType::CharDev if !dev_ok => Some(P::P2_BAD_CHAR_DEV),
        FileType::BlockDev if !dev_ok => Some(P::P2_BAD_BLOCK_DEV),
        FileType::Fifo if !dev_ok => Some(P::P2_BAD_FIFO),
        FileType::Socket if !dev_ok => Some(P::P2_BAD_SOCKET),
        FileType::Symlink if !crate::pass1::symlink_ok(fs, inode, raw) => {
            Some(P::P2_INVALID_SYMLINK)
        }
        _ => None,
    }
}

/// Flagged inode `ino` as pass 1 leaves it: when pass 1 made it a directory (`as_dir`, the
/// really-a-directory fix agreed to), with the directory mode e2fsck writes at once.
fn read_as_left(fs: &Fs, ino: u32, as_dir: bool) -> Option<Vec<u8>> {
    let mut raw = einode::read(fs, ino)?;
    let inode = RawInode::parse(&raw);
    if as_dir && inode.file_type() != FileType::Directory {
        let mode = (inode.mode() & 0o7777) | ffsck_format::inode::mode::S_IFDIR;
        raw[..2].copy_from_slice(&mode.to_le_bytes());
    }
    Some(raw)
}

/// Will the first entry naming flagged inode `ino` find it cleared? Then, as in e2fsck, the
/// entry goes with it and nothing else of the entry is checked or counted.
pub fn clears_whole(fs: &Fs, policy: Policy, ino: u32, as_dir: bool) -> bool {
    read_as_left(fs, ino, as_dir).is_some_and(|raw| {
        whole_clear(fs, &RawInode::parse(&raw), &raw).is_some_and(|p| policy.answer(p))
    })
}

/// The fields e2fsck checks for an inode pass 1 flagged, reported at its first entry.
///
/// Returns whether the inode is cleared (its mode or type-specific fields are impossible and
/// the fix was agreed to).
pub fn process_bad_inode(
    fs: &Fs,
    policy: Policy,
    dir: u32,
    ino: u32,
    name: &str,
    as_dir: bool,
    out: &mut Findings,
) -> bool {
    let Some(raw) = read_as_left(fs, ino, as_dir) else {
        return false;
    };
    let inode = RawInode::parse(&raw);
    let geo = &fs.geo;
    let ctx = ProblemCtx {
        ino,
        dir,
        str: Some(name.to_string()),
        ..Default::default()
    };
    let ft = inode.file_type();
    // An xattr block without the feature goes first; once cleared, the checks below see none.
    let mut acl = inode.file_acl(fs.geo.sixty_four_bit());
    if acl != 0
        && !geo.compat.has(ffsck_format::Compat::EXT_ATTR)
        && out.report(
            policy,
            P::P2_FILE_ACL_ZERO,
            ProblemCtx {
                num: acl,
                ..ctx.clone()
            },
        )
    {
        acl = 0;
    }
    if let Some(p) = whole_clear(fs, &inode, &raw) {
        return out.report(
            policy,
            p,
            ProblemCtx {
                num: if p == P::P2_BAD_MODE {
                    u64::from(inode.mode())
                } else {
                    0
                },
                ..ctx.clone()
            },
        );
    }
    if inode.i_obso_faddr.get() != 0 {
        out.report(
            policy,
            P::P2_FADDR_ZERO,
            ProblemCtx {
                num: u64::from(inode.i_obso_faddr.get()),
                ..ctx.clone()
            },
        );
    }
    if acl != 0 && (acl < geo.first_data_block || acl >= geo.blocks_count) {
        out.report(
            policy,
            P::P2_FILE_ACL_BAD,
            ProblemCtx {
                blk: acl,
                ..ctx.clone()
            },
        );
    }
    if ft == FileType::Directory
        && !geo.incompat.has(Incompat::LARGEDIR)
        && inode.i_size_high.get() != 0
    {
        out.report(
            policy,
            P::P2_DIR_SIZE_HIGH_ZERO,
            ProblemCtx {
                num: u64::from(inode.i_size_high.get()),
                ..ctx.clone()
            },
        );
    }
    if !geo.ro_compat.has(ffsck_format::RoCompat::HUGE_FILE) && inode.l_i_blocks_high.get() != 0 {
        out.report(
            policy,
            P::P2_BLOCKS_HI_ZERO,
            ProblemCtx {
                num: u64::from(inode.l_i_blocks_high.get()),
                ..ctx.clone()
            },
        );
    }
    if !geo.incompat.has(Incompat::SIXTY_FOUR_BIT) && inode.l_i_file_acl_high.get() != 0 {
        out.report(
            policy,
            P::P2_I_FILE_ACL_HI_ZERO,
            ProblemCtx {
                num: u64::from(inode.l_i_file_acl_high.get()),
                ..ctx
            },
        );
    }
    false
}
