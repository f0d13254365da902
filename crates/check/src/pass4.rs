//! Pass 4: reference counts.
//!
//! Checks: every in-use inode is referenced by some directory entry (else it is unattached,
//! or an unattached zero-length file), and `i_links_count` equals the references counted.
//! A value inode (`EA_INODE_FL`) named by xattrs counts as one link, and the reference count
//! it stores must equal the number of xattr entries naming it.
//! Produces: findings only. Relies on: `Pass1Facts` (link counts, xattr references),
//! `Pass2Facts` (references).
//! Frees: both link tables.

use crate::ext4::inode::read as read_inode;
use crate::facts::{kind, Pass1Facts};
use crate::fs::Fs;
use crate::pass2::Pass2Facts;
use crate::problem::Problem as P;
use crate::report::{Findings, Mode, Policy, ProblemCtx};
use ffsck_format::dir::ft;
use ffsck_format::inode::{FileType, RawInode};
use ffsck_format::RoCompat;
use rayon::prelude::*;

/// Most links a directory may have before `dir_nlink` stores 1 instead.
const LINK_MAX: u16 = 65000;

/// Bitmap words (64 inodes each) one worker looks through at a time.
const WORDS_PER_TASK: usize = 1024;

/// `progress` advances to the group count as the in-use inodes are looked through.
pub fn run(
    fs: &Fs,
    p1: &Pass1Facts,
    p2: &Pass2Facts,
    policy: Policy,
    out: &mut Findings,
    progress: &crate::progress::Progress,
) {
    let geo = &fs.geo;
    let sb = &fs.sb;
    let quota = [
        sb.s_usr_quota_inum.get(),
        sb.s_grp_quota_inum.get(),
        sb.s_prj_quota_inum.get(),
    ];
    let skipped = |ino: u32| {
        ino == ffsck_format::ino::BAD
            || (ino > ffsck_format::ino::ROOT && ino < geo.first_ino)
            || quota.contains(&ino)
            || ino == sb.s_orphan_file_inum.get()
            || p1.bb_inodes.binary_search(&ino).is_ok()
    };
    // Workers look through slices of the in-use inodes for the few whose count needs a
    // closer look (none referenced, a count that differs, a directory past the link limit);
    // those are then judged one by one in inode order, so the findings come in e2fsck's order.
    let words = p1.inode_used.word_count();
    let tasks = words.div_ceil(WORDS_PER_TASK);
    let share = crate::progress::Share::new(progress, u64::from(geo.group_count), tasks as u64);
    let suspects: Vec<u64> = (0..tasks)
        .into_par_iter()
        .flat_map_iter(|t| {
            share.step(1);
            let first = (t * WORDS_PER_TASK * 64) as u64;
            let (mut at_refs, mut at_links) = (p2.refs.position(first), p1.links.position(first));
            p1.inode_used
                .iter_ones_in(t * WORDS_PER_TASK..(t + 1) * WORDS_PER_TASK)
                .filter(move |&idx| {
                    let counted = p2.refs.get_ascending(idx, &mut at_refs);
                    let links = p1.links.get_ascending(idx, &mut at_links);
                    !skipped(idx as u32 + 1)
                        && (counted == 0
                            || counted != links
                            || (counted > LINK_MAX
                                && p1.kinds[idx as usize] & kind::TYPE_MASK == ft::DIR))
                })
        })
        .collect();
    let mut dir_nlink_set = false;
    for idx in suspects {
        let ino = idx as u32 + 1;
        if p2.cleared.contains(&ino)
            || (p1.kinds[idx as usize] == 0 && ino != ffsck_format::ino::ROOT)
        {
            // Cleared by pass 2 with its entry, or whole by pass 1 (no kind left): no
            // longer in use, as e2fsck has it.
            continue;
        }
        let link_count = p1.links.get(idx);
        let mut counted = p2.refs.get(idx);
        let k = p1.kinds[idx as usize];
        let ea_inode = k & kind::EA_INODE != 0 || p1.ea_inode_flag_set.contains(&ino);
        if counted == 0 && ea_inode {
            // A value inode is linked by the xattrs that name it, not by directory entries.
            let refs = p1.ea_inode_refs.get(&ino).copied().unwrap_or(0);
            if refs != 0 {
                counted = 1;
                if let Some(raw) = read_inode(fs, ino) {
                    let inode = RawInode::parse(&raw);
                    // The count lives in i_ctime (high) and l_i_version (low); old Lustre
                    // value inodes store none and keep i_ctime equal to i_atime instead.
                    let stored =
                        (u64::from(inode.i_ctime.get()) << 32) | u64::from(inode.l_i_version.get());
                    if stored != u64::from(refs) && inode.i_ctime.get() != inode.i_atime.get() {
                        out.report(
                            policy,
                            P::P4_EA_INODE_REF_COUNT,
                            ProblemCtx {
                                ino,
                                num: stored,
                                num2: u64::from(refs),
                                ..Default::default()
                            },
                        );
                    }
                }
            }
        }
        let is_dir = k & kind::TYPE_MASK == ft::DIR;
        if counted == 0 {
            // No entry led pass 2 to it: its fields get pass 2's checks here (e2fsck names
            // such an inode "..."); a cleared inode is not reconnected.
            if k & kind::BAD != 0
                && crate::pass2::process_bad_inode(fs, policy, 0, ino, "...", is_dir, out)
            {
                continue;
            }
            let Some(raw) = read_inode(fs, ino) else {
                continue;
            };
            let inode = RawInode::parse(&raw);
            let ftype = inode.file_type();
            // In-inode attributes (inline data among them) may hold what the file has: such
            // an inode is reconnected, not cleared, as e2fsck has it.
            if inode.blocks_raw(false) == 0
                && !has_inode_xattrs(&raw)
                && matches!(ftype, FileType::Regular | FileType::Directory)
                && out.report(policy, P::P4_ZERO_LEN_INODE, ProblemCtx::ino(ino))
            {
                // Cleared: nothing left to reconnect.
                continue;
            }
            if out.report(policy, P::P4_UNATTACHED_INODE, ProblemCtx::ino(ino)) {
                // e2fsck's reconnection adds a link to the inode (but to one at the most a
                // count holds) and counts the new entry; its count is then judged against
                // that one entry. (The fix is made with the reconnection: `connect`.)
                let links = if link_count == u16::MAX {
                    link_count
                } else {
                    link_count + 1
                };
                if links != 1 {
                    out.report(
                        policy,
                        P::P4_BAD_REF_COUNT,
                        ProblemCtx {
                            ino,
                            num: u64::from(links),
                            num2: 1,
                            ..Default::default()
                        },
                    );
                }
            }
            // Not reconnected: the count cannot be judged.
            continue;
        }
        if is_dir && counted > LINK_MAX {
            if !geo.ro_compat.has(RoCompat::DIR_NLINK) && !dir_nlink_set {
                // Once turned on, the feature covers the directories that follow.
                dir_nlink_set = out.report(policy, P::P4_DIR_NLINK_FEATURE, ProblemCtx::ino(ino));
            }
            counted = 1;
        }
        if is_dir && counted > 1 && link_count == 1 && indexed(fs, ino) {
            // A count stored as "overflowed" that no longer needs to be: set, not an error,
            // and never asked about under -n.
            if policy.mode != Mode::No {
                out.report(
                    policy,
                    P::P4_DIR_OVERFLOW_REF_COUNT,
                    ProblemCtx {
                        ino,
                        num: u64::from(link_count),
                        num2: u64::from(counted),
                        ..Default::default()
                    },
                );
            }
        } else if counted != link_count {
            out.report(
                policy,
                P::P4_BAD_REF_COUNT,
                ProblemCtx {
                    ino,
                    num: u64::from(link_count),
                    num2: u64::from(counted),
                    ..Default::default()
                },
            );
        }
    }
    share.finish();
}

/// Whether inode `ino` has the htree index flag (as the table holds it).
fn indexed(fs: &Fs, ino: u32) -> bool {
    read_inode(fs, ino)
        .is_some_and(|raw| RawInode::parse(&raw).flags() & ffsck_format::inode::flags::INDEX != 0)
}

/// Does the inode's extra space begin with the in-inode attribute magic? (Only when the inode
/// is larger than the old 128 bytes; `raw` is the whole on-disk inode.)
fn has_inode_xattrs(raw: &[u8]) -> bool {
    if raw.len() <= 128 {
        return false;
    }
    let extra = usize::from(u16::from_le_bytes([raw[128], raw[129]]));
    raw.get(128 + extra..132 + extra).is_some_and(|m| {
        u32::from_le_bytes([m[0], m[1], m[2], m[3]]) == ffsck_format::xattr::XATTR_MAGIC
    })
}
