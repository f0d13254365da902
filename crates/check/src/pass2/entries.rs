//! Per-entry checks: framing, `.` and `..`, the inode an entry names, its file type, name and
//! encryption; and the entries of inline directories.

use super::blocks::Ctx;
use super::merge::display_name;
use super::names::NameSet;
use super::out::{BlockOut, EntryAt, Event};
use crate::ext4::dir::{self as edir, Step};
use crate::ext4::inode as einode;
use crate::facts::{kind, Facts};
use crate::fs::Fs;
use crate::htree;
use crate::problem::Problem as P;
use crate::report::{Mode, ProblemCtx};
use ffsck_format::dir::ft;
use ffsck_format::group::BG_INODE_UNINIT;
use ffsck_format::inode::RawInode;
use ffsck_format::{ino as rino, Incompat};

/// Shortest valid encrypted name: one cipher block.
pub(super) const ENCRYPTED_NAME_MIN: usize = 16;

#[allow(clippy::too_many_arguments)]
/// Walk the entries in `buf` (physical block `pblk`, 0 for inline data; findings name it so a
/// repair can find the entry). `dot_state` starts at 0 for a directory's first block (and for
/// inline directories, where `..` is implicit, at 2).
pub(super) fn check_entries<F: Facts + ?Sized>(
    ctx: &Ctx<F>,
    dir: u32,
    lblk: u32,
    pblk: u64,
    buf: &[u8],
    start_state: u8,
    bo: &mut BlockOut,
    inline: bool,
    dx: Option<&htree::DxDir>,
) {
    let fs = ctx.fs;
    let bs = fs.geo.block_size;
    let mut dot_state: u8 = if lblk == 0 && !inline {
        0
    } else {
        start_state.max(2)
    };
    let mut names = NameSet::new(buf);
    let mut dups_found = false;
    // Bounded: each entry is at least 12 bytes, and the walk ends at the first damaged one.
    for step in edir::entries(buf, bs) {
        let off = match step {
            Step::Entry(e) => e.off,
            Step::Damaged { off, .. } => off,
        };
        let pctx = |name: &[u8], ino: u32| ProblemCtx {
            dir,
            ino,
            blk: pblk,
            num: u64::from(lblk),
            num2: off as u64,
            name: Some(display_name(name)),
            ..Default::default()
        };
        let Step::Entry(e) = step else {
            bo.findings
                .report(ctx.policy, P::P2_DIR_CORRUPTED, pctx(b"", 0));
            return;
        };
        let (rec_len, name_len) = (e.rec_len, e.name.len());
        let (name, ino) = (e.name, e.inode);
        if dot_state == 0 {
            if ino == 0 {
                bo.findings
                    .report(ctx.policy, P::P2_MISSING_DOT, pctx(name, ino));
            } else if name != b"." {
                bo.findings
                    .report(ctx.policy, P::P2_1ST_NOT_DOT, pctx(name, ino));
            } else if buf[off + 9] != 0 {
                bo.findings
                    .report(ctx.policy, P::P2_DOT_NULL_TERM, pctx(name, ino));
            } else if ino != dir {
                bo.findings
                    .report(ctx.policy, P::P2_BAD_INODE_DOT, pctx(name, ino));
            }
            // A '.' record with room for another entry after it.
            if rec_len > 24 && ino != 0 && name == b"." {
                bo.findings
                    .report(ctx.policy, P::P2_SPLIT_DOT, pctx(name, ino));
            }
        } else if dot_state == 1 {
            if ino == 0 {
                bo.findings
                    .report(ctx.policy, P::P2_MISSING_DOT_DOT, pctx(name, ino));
            } else if name != b".." {
                bo.findings
                    .report(ctx.policy, P::P2_2ND_NOT_DOT_DOT, pctx(name, ino));
            } else {
                if buf[off + 10] != 0 {
                    bo.findings
                        .report(ctx.policy, P::P2_DOT_DOT_NULL_TERM, pctx(name, ino));
                }
                bo.events.push(Event::DotDot { dir, target: ino });
            }
        } else if ino == dir
            && ino != 0
            && bo
                .findings
                .report(ctx.policy, P::P2_LINK_DOT, pctx(name, ino))
        {
            // Fixed, the entry is cleared (as e2fsck does): it names nothing, so it neither
            // counts as a link nor gives the directory a parent.
            dot_state = dot_state.saturating_add(1);
            continue;
        }
        if ino != 0 {
            let counted = check_entry(
                ctx,
                dir,
                name,
                e.file_type,
                ino,
                dot_state,
                bo,
                // Built only when a finding is reported (its name is a copy).
                &|| pctx(name, ino),
            );
            if let (true, Some(dx)) = (counted, dx) {
                match htree::name_hash(fs, dx, name) {
                    Some(hv) => {
                        let (lo, hi) = bo.hash_range.unwrap_or((u32::MAX, 0));
                        bo.hash_range = Some((lo.min(hv), hi.max(hv)));
                    }
                    None => bo.hash_unknown = true,
                }
            }
            // Every counted entry takes part, '.' and '..' included (a second '.' is a
            // duplicate too).
            if counted && !dups_found && !names.insert(off + 8, name_len) {
                bo.findings
                    .report(ctx.policy, P::P2_REPORT_DUP_DIRENT, pctx(name, ino));
                dups_found = true;
            }
        }
        dot_state = dot_state.saturating_add(1);
    }
}

#[allow(clippy::too_many_arguments)]
pub(super) fn check_entry<F: Facts + ?Sized>(
    ctx: &Ctx<F>,
    dir: u32,
    name: &[u8],
    file_type: u8,
    ino: u32,
    dot_state: u8,
    bo: &mut BlockOut,
    pctx: &dyn Fn() -> ProblemCtx,
) -> bool {
    let fs = ctx.fs;
    let geo = &fs.geo;
    let sb = &fs.sb;
    let policy = ctx.policy;
    let out = &mut bo.findings;
    let reserved_bad = (ino != rino::ROOT && ino < geo.first_ino)
        || ino > geo.inodes_count
        || ino == sb.s_usr_quota_inum.get()
        || ino == sb.s_grp_quota_inum.get()
        || ino == sb.s_prj_quota_inum.get()
        || ino == sb.s_orphan_file_inum.get();
    let mut problem = None;
    if reserved_bad {
        problem = Some(P::P2_BAD_INO);
    } else if dot_state > 1 && name == b"." {
        problem = Some(P::P2_DUP_DOT);
    } else if dot_state > 1 && name == b".." {
        problem = Some(P::P2_DUP_DOT_DOT);
    } else if dot_state > 1 && ino == rino::ROOT {
        problem = Some(P::P2_LINK_ROOT);
    } else if dot_state > 1 && name.is_empty() {
        problem = Some(P::P2_NULL_NAME);
    }
    if let Some(p) = problem {
        // Fixed, the entry is cleared (as e2fsck zeroes its inode): it names nothing, and
        // counts neither as a link nor as a name.
        if out.report(policy, p, pctx()) || p == P::P2_BAD_INO {
            return false;
        }
    }
    if ctx.p1.in_bad_block(ino - 1) {
        out.report(policy, P::P2_BB_INODE, pctx());
        return false;
    }
    let k = ctx.p1.kind(ino - 1);
    if k & kind::BAD != 0 {
        let name = bo.keep_name(name);
        let c = pctx();
        let as_dir = k & kind::TYPE_MASK == ft::DIR;
        let clears = super::bad_inode::clears_whole(fs, policy, ino, as_dir);
        bo.events.push(Event::BadInode {
            dir,
            ino,
            name,
            at: EntryAt {
                pblk: c.blk,
                lblk: c.num as u32,
                off: c.num2 as u32,
            },
            clears,
            as_dir,
        });
        if clears {
            // e2fsck clears the inode at its first entry and the entry with it; a later
            // entry then names an unused inode (the merge reports both).
            return false;
        }
    }
    let out = &mut bo.findings;
    let g = geo.group_of_inode(ino);
    let gd = &fs.groups[g as usize];
    // The flag and the unused count as e2fsck holds them after pass 0: zeroed by a fix agreed
    // to there (a descriptor checksum, or without group checksums the fields themselves,
    // which are then wrong), else as on disk. Group 0's flag is damage pass 0 drops when
    // agreed to (`P0_GROUP0_INODE_UNINIT`).
    let reset = || desc_reset(fs, policy, g);
    let uninit = gd.flags() & BG_INODE_UNINIT != 0
        && !(g == 0 && fs.has_group_csum() && policy.answer(P::P0_GROUP0_INODE_UNINIT))
        && !reset();
    if uninit {
        out.report(
            policy,
            P::P2_INOREF_BG_INO_UNINIT,
            ProblemCtx { group: g, ..pctx() },
        );
    } else {
        // The first unused inode is computed in 32 bits as e2fsck computes it: an unused
        // count past the group's start wraps it past every inode, and nothing is questioned.
        let unused = gd.itable_unused();
        let ipg = geo.inodes_per_group;
        let first_unused = g
            .wrapping_mul(ipg)
            .wrapping_add(1)
            .wrapping_add(ipg)
            .wrapping_sub(unused);
        let count_fixed = || {
            fs.has_group_csum()
                && (unused > gd.free_inodes_count() || unused > geo.inodes_per_group)
                && policy.answer(P::P0_GDT_ITABLE_UNUSED)
        };
        if ino >= first_unused && !reset() && !count_fixed() {
            out.report(
                policy,
                P::P2_INOREF_IN_UNUSED,
                ProblemCtx { group: g, ..pctx() },
            );
        }
    }
    let unused = !ctx.p1.used(ino - 1);
    if unused {
        if out.report(policy, P::P2_UNUSED_INODE, pctx()) {
            // Cleared: the entry goes, and nothing else of it is checked (as e2fsck).
            return false;
        }
    } else if k == 0 && ino != rino::ROOT && out.report(policy, P::P2_UNUSED_INODE, pctx()) {
        // Pass 1 cleared the inode whole (it left it no kind): e2fsck has unmarked it, so
        // its entry names an unused inode, and goes.
        return false;
    }
    // File type of the entry against the inode's type. Directories and regular files keep
    // their type even when pass 1 found them bad (as e2fsck, which knows them by its maps).
    let t = k & kind::TYPE_MASK;
    // A bad inode is dealt with before its entry's type is checked: answered yes throughout,
    // it is either cleared (and the entry with it) or fixed and no longer bad.
    let stays_bad = k & kind::BAD != 0 && policy.mode != Mode::Yes;
    let should = if unused {
        // An entry kept naming an unused inode: judged by the inode's mode as it is, as
        // e2fsck judges one whose inode no map of its own names.
        einode::read(fs, ino).map_or(ft::UNKNOWN, |raw| {
            ffsck_format::inode::FileType::from_mode(
                ffsck_format::inode::RawInode::parse(&raw).mode(),
            )
            .dirent_type()
        })
    } else if !stays_bad || t == ft::DIR || t == ft::REG {
        t
    } else {
        ft::UNKNOWN
    };
    if !ctx.filetype {
        if file_type != 0 {
            out.report(policy, P::P2_CLEAR_FILETYPE, pctx());
        }
    } else if file_type != should {
        let p = if file_type == 0 {
            P::P2_SET_FILETYPE
        } else {
            P::P2_BAD_FILETYPE
        };
        let c = pctx();
        out.report(
            policy,
            p,
            ProblemCtx {
                num: u64::from(file_type),
                num2: u64::from(should),
                // The entry's offset, which `num2` carries for other entry findings.
                blk2: c.num2,
                ..c
            },
        );
    }
    if let Some(dir_policy) = ctx.p1.policy(dir) {
        // Names are ciphertext: only their length can be checked, and what they name must
        // be encrypted with the directory's policy.
        if dot_state > 1 {
            if name.len() < ENCRYPTED_NAME_MIN
                && out.report(policy, P::P2_BAD_ENCRYPTED_NAME, pctx())
            {
                return true;
            }
            match ctx.p1.policy(ino) {
                Some(p) if p == dir_policy => {}
                Some(_) => {
                    if out.report(policy, P::P2_INCONSISTENT_ENCRYPTION_POLICY, pctx()) {
                        return true;
                    }
                }
                None => {
                    let needs = if file_type != ft::UNKNOWN {
                        matches!(file_type, ft::REG | ft::DIR | ft::SYMLINK)
                    } else {
                        matches!(k & kind::TYPE_MASK, ft::REG | ft::DIR | ft::SYMLINK)
                    };
                    if needs && out.report(policy, P::P2_UNENCRYPTED_FILE, pctx()) {
                        return true;
                    }
                }
            }
        }
    } else if dot_state > 1
        && fs.geo.incompat.has(Incompat::CASEFOLD)
        && std::str::from_utf8(name).is_err()
        && casefold_dir(fs, dir)
        && out.report(policy, P::P2_BAD_ENCODED_NAME, pctx())
    {
        // The repair turns the bytes from the first bad one on into dots.
    } else if dot_state > 1 && name.iter().any(|&c| c == b'/' || c == 0) {
        out.report(policy, P::P2_BAD_NAME, pctx());
    }
    if dot_state > 1 && k & kind::TYPE_MASK == ft::DIR && ctx.p1.used(ino - 1) {
        let name = bo.keep_name(name);
        bo.events.push(Event::Subdir {
            dir,
            child: ino,
            name,
        });
    }
    bo.count_ref(ino);
    true
}

/// An inline directory: `..` in the first 4 bytes of `i_block`, entries after it and in the
/// `system.data` attribute.
/// One part of inline directory `dir`: 0, the parent and the entries in `i_block`; 1, those
/// in the `system.data` attribute. Findings name the part by block number, as e2fsck does,
/// which also checks the two parts as two blocks.
pub(super) fn check_inline_dir<F: Facts + ?Sized>(ctx: &Ctx<F>, dir: u32, part: u32) -> BlockOut {
    let mut bo = BlockOut::default();
    let Some(raw) = einode::read(ctx.fs, dir) else {
        return bo;
    };
    let inode = RawInode::parse(&raw);
    let ib = inode.block_bytes();
    let size = inode.size() as usize;
    if part == 0 {
        let parent = u32::from_le_bytes([ib[0], ib[1], ib[2], ib[3]]);
        // The implicit '.' and '..' count as references like real entries.
        bo.count_ref(dir);
        bo.events.push(Event::DotDot {
            dir,
            target: parent,
        });
        if parent != 0 && parent <= ctx.fs.geo.inodes_count {
            bo.count_ref(parent);
        }
        let first = &ib[4..60.min(size.max(4))];
        check_entries(ctx, dir, 0, 0, first, 2, &mut bo, true, None);
    } else if size > 60 {
        if let Some(extra) = einode::inline_data(&raw) {
            check_entries(ctx, dir, 1, 0, &extra, 2, &mut bo, true, None);
        }
    }
    bo
}

/// Names in `dir` are compared case-insensitively (casefold feature and flag), so they must
/// be valid UTF-8.
fn casefold_dir(fs: &Fs, dir: u32) -> bool {
    fs.geo.incompat.has(Incompat::CASEFOLD)
        && einode::read(fs, dir).is_some_and(|r| {
            RawInode::parse(&r).flags() & ffsck_format::inode::flags::CASEFOLD != 0
        })
}

/// Whether pass 0's agreed fixes zeroed group `g`'s `INODE_UNINIT` flag and unused-inode
/// count, as e2fsck's do: a descriptor checksum fixed (with group checksums), or the fields
/// themselves cleared (without, where any of them is wrong).
fn desc_reset(fs: &Fs, policy: crate::report::Policy, g: u32) -> bool {
    if !fs.has_group_csum() {
        return policy.answer(P::P0_GDT_UNINIT);
    }
    let gd = &fs.groups[g as usize];
    gd.compute_checksum(&fs.sb, g, fs.geo.desc_size as usize)
        .is_some_and(|want| want != gd.bg_checksum.get())
        && policy.answer(P::P0_GDT_CSUM)
}
