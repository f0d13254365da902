//! Pass 1's checks of one inode: dtime and links, reserved inodes, modes and flags, inline
//! data and extent flags, extra isize and in-inode xattrs, then its blocks (`blockmap`) and
//! sizes (`sizes`), and its checksum.

use super::blockmap::check_blocks;
use super::dirblocks::{dir_holes, htree_root_ok};
use super::itable::extent_header_valid;
use super::schedule::GroupBits;
use super::special::{device_inode_ok, is_fast_symlink, symlink_ok, symlink_uses_i_block};
use super::{encryption, report, xattr, GroupOut, InodeCheck, Scan};
use crate::facts::{kind, DirFacts};
use crate::fs::Fs;
use crate::problem::Problem as P;
use crate::report::ProblemCtx;
use ffsck_format::extent::Node;
use ffsck_format::inode::GOOD_OLD_INODE_SIZE;
use ffsck_format::inode::{flags as iflags, FileType, RawInode};
use ffsck_format::{ino, Compat, Incompat, RoCompat};

/// What the scan already judged of an inode from its table block.
#[derive(Clone, Copy)]
pub(super) struct Judged {
    /// Its table block is mostly garbage.
    pub(super) garbage: bool,
    /// Its checksum fails.
    pub(super) csum_failed: bool,
}

pub(super) fn check_inode(
    scan: &Scan,
    ino: u32,
    raw: &[u8],
    judged: Judged,
    link_slot: &mut u16,
    kind_slot: &mut u8,
    out: &mut GroupOut,
) {
    let fs = scan.fs;
    let geo = &fs.geo;
    let mut inode = RawInode::parse(raw);
    let first_finding = out.findings.0.len();
    // An inode in a table block that is mostly garbage is cleared whole, before any other
    // check (as e2fsck). Answered no, it is checked like any other.
    if judged.garbage
        && inode.links_count() > 0
        && out
            .findings
            .report(scan.policy, P::P1_INODE_IS_GARBAGE, ProblemCtx::ino(ino))
    {
        return;
    }
    // A device, FIFO or socket whose first block is a directory's: with the fix agreed to,
    // the rest of the scan sees the directory it really is (as e2fsck, whatever its dtime:
    // an inode with links keeps its file and loses the dtime).
    let mut really_dir_reported = false;
    if inode.links_count() != 0 && ino >= geo.first_ino {
        if let Some(what) = really_dir(fs, ino, &inode, raw) {
            really_dir_reported = true;
            let ctx = ProblemCtx {
                ino,
                str: Some(what),
                ..Default::default()
            };
            if out
                .findings
                .report(scan.policy, P::P1_TREAT_AS_DIRECTORY, ctx)
            {
                inode
                    .i_mode
                    .set((inode.mode() & 0o7777) | ffsck_format::inode::mode::S_IFDIR);
            }
        }
    }
    let mut ic = InodeCheck {
        ino,
        inode: &inode,
        raw,
        other_problem: false,
        first_finding,
        ea_ibody: xattr::EaQuota::default(),
    };
    ic.other_problem |= really_dir_reported;
    let links = inode.links_count();
    let mode = inode.mode();
    let dtime = inode.dtime();

    let csum_failed = judged.csum_failed;

    if dtime != 0 && scan.low_dtime_check && dtime < geo.inodes_count {
        report(scan, out, &mut ic, P::P1_LOW_DTIME, ProblemCtx::ino(ino));
    }
    let reserved = ino < geo.first_ino;
    // The superblock's orphan file (unless it names the bad-blocks, root, journal or a quota
    // inode, which e2fsck judges as those first).
    let special = matches!(
        ino,
        ino::BAD | ino::ROOT | ino::JOURNAL | ino::USR_QUOTA | ino::GRP_QUOTA
    ) || crate::quota::inodes(fs).contains(&ino);
    // An orphan file without links (past the reserved inodes) is an unused inode to e2fsck,
    // which tells unused inodes apart before it looks for the orphan file.
    if ino == fs.sb.s_orphan_file_inum.get()
        && !special
        && (links != 0 || reserved)
        && check_orphan_file(scan, &mut ic, out, link_slot)
    {
        finish_csum(scan, out, &ic, csum_failed);
        return;
    }
    if links == 0 && !reserved {
        if dtime == 0 && mode != 0 {
            report(scan, out, &mut ic, P::P1_ZERO_DTIME, ProblemCtx::ino(ino));
        }
        finish_csum(scan, out, &ic, csum_failed);
        return;
    }

    // The casefold flag, on every inode in use or reserved (before anything else of it): only
    // a directory on a casefold file system may have it. A non-directory whose flag stays
    // (answered no) is asked about the feature too, as e2fsck does.
    if inode.flags() & iflags::CASEFOLD != 0 {
        let ctx = ProblemCtx::ino(ino);
        let nondir = inode.file_type() != FileType::Directory;
        let fixed = nondir && report(scan, out, &mut ic, P::P1_CASEFOLD_NONDIR, ctx.clone());
        if !fixed && !geo.incompat.has(Incompat::CASEFOLD) {
            report(scan, out, &mut ic, P::P1_CASEFOLD_FEATURE, ctx);
        }
    }

    // Both the inline-data and the extent flag on a reserved inode (a live inode's are judged
    // with the rest of it): e2fsck asks before it tells reserved inodes apart, and what
    // follows sees the flags the fix leaves.
    let both = iflags::INLINE_DATA | iflags::EXTENTS;
    let flags_fixed;
    if reserved && inode.flags() & both == both {
        match check_inline_and_extents(scan, &mut ic, out, inode.file_type()) {
            FlagFix::None => {}
            // Cleared: reserved inodes stay in use.
            FlagFix::Cleared => {
                out.bits.set(GroupBits::USED, ino - 1);
                return;
            }
            FlagFix::Flags(new) => {
                let mut copy = inode.clone();
                copy.i_flags.set(new);
                flags_fixed = copy;
                ic.inode = &flags_fixed;
            }
        }
    }
    let inode = ic.inode;

    // A reserved inode with the extent flag on a file system without extents (the root's is
    // judged with its mapping): e2fsck asks before it tells reserved inodes apart, for those
    // in use and for the bad-blocks and journal inodes whatever their links.
    if ino < geo.first_ino
        && ino != ino::ROOT
        && inode.flags() & iflags::EXTENTS != 0
        && !scan.extent_fs
        && (links != 0 || ino == ino::BAD || ino == ino::JOURNAL)
    {
        let ctx = ProblemCtx::ino(ino);
        let feature_on = Node::parse(&inode.block_bytes()).is_ok()
            && report(scan, out, &mut ic, P::P1_EXTENT_FEATURE, ctx.clone());
        // Either fix leaves a reserved inode in use; turned on, the next round checks its
        // tree as an extent tree, and cleared, it maps nothing.
        if feature_on || report(scan, out, &mut ic, P::P1_EXTENTS_SET, ctx) {
            out.bits.set(GroupBits::USED, ino - 1);
            return;
        }
    }

    // e2fsck's test of the bad-blocks inode: only its block map may be set.
    let bad_list_invalid = ino == ino::BAD
        && (csum_failed
            || mode != 0
            || inode.i_uid.get() != 0
            || inode.i_gid.get() != 0
            || links != 0
            || inode.flags() & iflags::INLINE_DATA != 0
            || inode.file_acl(scan.fs.geo.sixty_four_bit()) != 0);
    if bad_list_invalid
        && report(
            scan,
            out,
            &mut ic,
            P::P1_INVALID_BAD_INODE,
            ProblemCtx::ino(ino),
        )
    {
        // Cleared: an empty list, always in use.
        out.bits.set(GroupBits::USED, ino - 1);
        return;
    }
    if reserved {
        check_reserved(scan, &mut ic, out, link_slot, kind_slot);
        finish_csum(scan, out, &ic, csum_failed);
        return;
    }

    if dtime != 0 {
        report(scan, out, &mut ic, P::P1_SET_DTIME, ProblemCtx::ino(ino));
    }
    *link_slot = links;
    out.bits.set(GroupBits::USED, ino - 1);
    check_live_inode(scan, &mut ic, out, kind_slot);
    finish_csum(scan, out, &ic, csum_failed);
}

/// The inode the superblock names as its orphan file. With the feature it is in use and a
/// regular file whatever its mode says (its blocks are the file's, never a directory's);
/// without it, it should be empty and is zeroed when answered yes. False when it is to be
/// checked as any other inode (no feature, nothing in it or the question answered no).
fn check_orphan_file(
    scan: &Scan,
    ic: &mut InodeCheck,
    out: &mut GroupOut,
    link_slot: &mut u16,
) -> bool {
    let ino = ic.ino;
    let inode = ic.inode;
    let ctx = ProblemCtx::ino(ino);
    if scan.fs.geo.compat.has(ffsck_format::Compat::ORPHAN_FILE) {
        out.bits.set(GroupBits::USED, ino - 1);
        *link_slot = inode.links_count();
        let regular = inode.file_type() == FileType::Regular
            || report(scan, out, ic, P::P1_ORPHAN_FILE_BAD_MODE, ctx);
        let mut cb = check_blocks(scan, ic, out, FileType::Regular);
        cb.dir_blocks.clear();
        // e2fsck's block check judges an index flag against the mode the inode is left with:
        // a file made regular keeps none.
        if regular && inode.flags() & iflags::INDEX != 0 {
            index_flag(scan, ic, out, false);
        }
        return true;
    }
    let busy =
        inode.links_count() != 0 || inode.blocks_raw(false) != 0 || inode.i_block[0].get() != 0;
    if busy && report(scan, out, ic, P::P1_ORPHAN_FILE_NOT_CLEAR, ctx) {
        // Zeroed by the repair; still in use, as e2fsck leaves it.
        out.bits.set(GroupBits::USED, ino - 1);
        return true;
    }
    false
}

/// e2fsck's test for a special file (or one of no known type) that is really a directory:
/// every mapped block in range (a device maps none past the fourth slot) and the first one
/// starting with `.` (pointing at the inode itself) and `..`. Returns the name of the type the
/// mode claims.
pub(super) fn really_dir(fs: &Fs, ino: u32, inode: &RawInode, raw: &[u8]) -> Option<String> {
    let geo = &fs.geo;
    let ft = inode.file_type();
    let what = match ft {
        FileType::CharDev => "character device".to_string(),
        FileType::BlockDev => "block device".to_string(),
        FileType::Fifo => "named pipe".to_string(),
        FileType::Socket => "socket".to_string(),
        FileType::Bad => format!("unknown file type with mode 0{:o}", inode.mode()),
        _ => return None,
    };
    let b = inode.block_bytes();
    let word = |i: usize| {
        u64::from(u32::from_le_bytes([
            b[4 * i],
            b[4 * i + 1],
            b[4 * i + 2],
            b[4 * i + 3],
        ]))
    };
    let fl = inode.flags();
    if word(0) == 0 {
        return None;
    }
    if fl & iflags::INLINE_DATA != 0 {
        // Inline data: `..` as an inode number, then a first entry that fits the inode.
        if !geo.incompat.has(Incompat::INLINE_DATA) {
            return None;
        }
        let extra = crate::ext4::inode::inline_data(raw)?;
        if (60 + extra.len()) % 4 != 0 {
            return None;
        }
        let dotdot = word(0);
        let first = word(1);
        let rec_len = u16::from_le_bytes([b[8], b[9]]);
        let ino_ok = |i: u64, zero_ok: bool| {
            i < u64::from(geo.inodes_count)
                && (i >= u64::from(geo.first_ino)
                    || i == u64::from(ffsck_format::ino::ROOT)
                    || (zero_ok && i == 0))
        };
        return (ino_ok(dotdot, false) && ino_ok(first, true) && rec_len <= 56).then_some(what);
    }
    let mut not_device = false;
    let blk = if fl & iflags::EXTENTS != 0 && geo.incompat.has(Incompat::EXTENTS) {
        // Devices are never extent-mapped.
        not_device = true;
        let node = Node::parse(&b).ok().filter(|n| n.depth() == 0)?;
        (0..node.len())
            .map(|i| node.extent(i))
            .find(|e| e.ee_block.get() == 0)?
            .start()
    } else {
        for i in 0..15 {
            let w = word(i);
            if w == 0 {
                continue;
            }
            not_device |= i >= 4;
            if w < geo.first_data_block || w >= geo.blocks_count {
                return None;
            }
        }
        word(0)
    };
    if matches!(ft, FileType::CharDev | FileType::BlockDev)
        && inode.links_count() == 1
        && !not_device
    {
        return None;
    }
    if blk < geo.first_data_block || blk >= geo.blocks_count {
        return None;
    }
    let buf = fs.read_block(blk)?;
    let bs = buf.len();
    let entry = |off: usize| -> Option<(u32, usize, &[u8])> {
        let h = buf.get(off..off + 8)?;
        let rec_len = usize::from(u16::from_le_bytes([h[4], h[5]]));
        let name = buf.get(off + 8..off + 8 + usize::from(h[6]))?;
        Some((u32::from_le_bytes([h[0], h[1], h[2], h[3]]), rec_len, name))
    };
    let (dot_ino, len, name) = entry(0)?;
    if name != b"." || dot_ino != ino || len < 12 || len % 4 != 0 || len >= bs - 12 {
        return None;
    }
    let (_, len2, name2) = entry(len)?;
    (name2 == b".." && len2 >= 12 && len2 % 4 == 0).then_some(what)
}

/// e2fsck reads the inode again after its checks: a fix that was made rewrote it (and its
/// checksum); otherwise the checksum still fails and is asked about, whatever else was
/// reported and answered no.
pub(super) fn finish_csum(scan: &Scan, out: &mut GroupOut, ic: &InodeCheck, failed: bool) {
    let rewritten = ic.other_problem
        && out.findings.0[ic.first_finding.min(out.findings.0.len())..]
            .iter()
            .any(|f| f.fixed && f.ctx.ino == ic.ino);
    if failed && !rewritten {
        out.findings.report(
            scan.policy,
            P::P1_INODE_ONLY_CSUM_INVALID,
            ProblemCtx::ino(ic.ino),
        );
    }
}

pub(super) fn check_reserved(
    scan: &Scan,
    ic: &mut InodeCheck,
    out: &mut GroupOut,
    link_slot: &mut u16,
    kind_slot: &mut u8,
) {
    let ino = ic.ino;
    let inode = ic.inode;
    let mode = inode.mode();
    let ft = inode.file_type();
    match ino {
        ino::ROOT => {
            // The root is an ordinary directory apart from these two checks.
            if inode.links_count() == 0 && mode == 0 {
                // A wiped root is still not a directory (e2fsck asks before pass 3 reports
                // the missing root); there is nothing else in it to check.
                report(scan, out, ic, P::P1_ROOT_NO_DIR, ProblemCtx::ino(ino));
                return;
            }
            // Cleared when answered yes: not in use, and pass 3 recreates it.
            if ft != FileType::Directory
                && report(scan, out, ic, P::P1_ROOT_NO_DIR, ProblemCtx::ino(ino))
            {
                return;
            }
            if inode.dtime() != 0 && inode.links_count() != 0 {
                report(scan, out, ic, P::P1_ROOT_DTIME, ProblemCtx::ino(ino));
            }
            // Without links the root is not in use, as for any inode (pass 3 recreates it).
            if inode.links_count() == 0 && ft == FileType::Directory {
                return;
            }
            *link_slot = inode.links_count();
            out.bits.set(GroupBits::USED, ino - 1);
            check_live_inode(scan, ic, out, kind_slot);
            return;
        }
        ino::JOURNAL if scan.journal_inum == ino::JOURNAL => {
            out.bits.set(GroupBits::USED, ino - 1);
            *link_slot = inode.links_count();
            // A zeroed inode too (the journal was found through the superblock's backup).
            if ft != FileType::Regular {
                report(scan, out, ic, P::P1_JOURNAL_BAD_MODE, ProblemCtx::ino(ino));
            }
            let mut cb = check_blocks(scan, ic, out, FileType::Regular);
            cb.dir_blocks.clear();
            return;
        }
        ino::JOURNAL => {
            // Not (or no longer) the journal: it should be empty. Once the journal check
            // dropped the journal, its blocks were judged there and are not walked again.
            let busy = inode.links_count() != 0
                || inode.blocks_raw(false) != 0
                || inode.i_block[0].get() != 0;
            if busy
                && report(
                    scan,
                    out,
                    ic,
                    P::P1_JOURNAL_INODE_NOT_CLEAR,
                    ProblemCtx::ino(ino),
                )
            {
                // Zeroed by the repair; still in use, as every reserved inode.
                out.bits.set(GroupBits::USED, ino - 1);
                return;
            }
            // Without links nothing else of it is checked (its size, its other fields), as
            // e2fsck checks no inode without links further.
            if inode.links_count() == 0 {
                out.bits.set(GroupBits::USED, ino - 1);
                return;
            }
        }
        ino::USR_QUOTA | ino::GRP_QUOTA
            if scan.quota && crate::quota::inodes(scan.fs).contains(&ino) =>
        {
            // The superblock's quota file: a regular file whatever its mode says.
            out.bits.set(GroupBits::USED, ino - 1);
            *link_slot = inode.links_count();
            if ft != FileType::Regular {
                report(scan, out, ic, P::P1_QUOTA_BAD_MODE, ProblemCtx::ino(ino));
            }
            let _ = check_blocks(scan, ic, out, FileType::Regular);
            return;
        }
        ino::USR_QUOTA | ino::GRP_QUOTA => {
            // Not a quota file: it should be empty. Zeroed when answered yes, so its blocks
            // are not claimed (pass 5 frees them); in use, as every reserved inode.
            let busy = inode.links_count() != 0
                || inode.blocks_raw(false) != 0
                || inode.i_block[0].get() != 0;
            if busy
                && report(
                    scan,
                    out,
                    ic,
                    P::P1_QUOTA_INODE_NOT_CLEAR,
                    ProblemCtx::ino(ino),
                )
            {
                out.bits.set(GroupBits::USED, ino - 1);
                return;
            }
            // As for a journal inode that is not the journal: no links, nothing more.
            if inode.links_count() == 0 {
                out.bits.set(GroupBits::USED, ino - 1);
                return;
            }
        }
        _ => {}
    }
    out.bits.set(GroupBits::USED, ino - 1);
    *link_slot = inode.links_count();
    let bad = match ino {
        ino::BOOT_LOADER => ft == FileType::Directory,
        ino::RESIZE => mode != 0 && ft != FileType::Regular,
        ino::BAD => false,
        // (Left as they are when the question above was answered no, as e2fsck does.)
        ino::USR_QUOTA | ino::GRP_QUOTA => false,
        ino::JOURNAL => false,
        _ => mode != 0,
    };
    let cleared = bad && report(scan, out, ic, P::P1_RESERVED_BAD_MODE, ProblemCtx::ino(ino));
    // The resize inode's map is checked with or without its feature, as e2fsck does (unless
    // pass 0 clears it): its double-indirect block is in use until then; so is the bad-blocks
    // list (a map without a mode). Any other reserved inode's map is walked only when its
    // type can have blocks (a directory, a regular file, a symlink), as libext2fs judges it:
    // the words of one without a mode (or whose mode the fix clears) are not block numbers,
    // so a block count it keeps is wrong and its blocks are free. Its xattr block and block
    // count are checked either way.
    let has_blocks = !cleared
        && matches!(
            ft,
            FileType::Regular | FileType::Directory | FileType::Symlink
        );
    let walk_as = if matches!(ino, ino::RESIZE | ino::BAD) || has_blocks {
        FileType::Regular
    } else if cleared {
        FileType::Bad
    } else {
        ft
    };
    let _ = check_blocks(scan, ic, out, walk_as);
    // An index flag is judged as on any inode, after the map, against the mode the inode is
    // left with: a reserved inode whose mode was cleared is no directory, so the flag goes.
    // (e2fsck walks the bad-blocks list apart, without this rule.)
    if ino != ino::BAD && inode.flags() & iflags::INDEX != 0 {
        index_flag(scan, ic, out, !cleared && ft == FileType::Directory);
    }
}

/// An inode's index flag, against the mode it is left with: without `dir_index` it is
/// `P1_HTREE_SET`, on anything but a directory `P1_HTREE_NODIR`. Whether the flag stands.
fn index_flag(scan: &Scan, ic: &mut InodeCheck, out: &mut GroupOut, is_dir: bool) -> bool {
    let ctx = ProblemCtx::ino(ic.ino);
    if !scan.fs.geo.compat.has(Compat::DIR_INDEX) {
        report(scan, out, ic, P::P1_HTREE_SET, ctx);
    } else if !is_dir {
        report(scan, out, ic, P::P1_HTREE_NODIR, ctx);
    } else {
        return true;
    }
    false
}

pub(super) fn check_live_inode(
    scan: &Scan,
    ic: &mut InodeCheck,
    out: &mut GroupOut,
    kind_slot: &mut u8,
) {
    let fs = scan.fs;
    let geo = &fs.geo;
    let ino = ic.ino;
    let inode = ic.inode;
    let fl = inode.flags();
    let ft = inode.file_type();
    let mut k = ft.dirent_type();

    // Fields pass 2 will look at when it reaches an entry for this inode.
    let mut bad = bad_fields(geo, inode, ft);
    if fl & iflags::IMAGIC != 0 && !geo.compat.has(Compat::IMAGIC_INODES) {
        report(scan, out, ic, P::P1_SET_IMAGIC, ProblemCtx::ino(ino));
    }
    let inline_fs = geo.incompat.has(Incompat::INLINE_DATA);
    if fl & iflags::INLINE_DATA != 0 && fl & iflags::EXTENTS != 0 {
        match check_inline_and_extents(scan, ic, out, ft) {
            FlagFix::None => {}
            // Cleared whole: nothing else of it to check.
            FlagFix::Cleared => return,
            // The rest of the check sees the flags the fix leaves (as e2fsck, which writes
            // the inode at once).
            FlagFix::Flags(new) => {
                let mut copy = inode.clone();
                copy.i_flags.set(new);
                let mut fixed = InodeCheck {
                    ino,
                    inode: &copy,
                    raw: ic.raw,
                    other_problem: ic.other_problem,
                    first_finding: ic.first_finding,
                    ea_ibody: xattr::EaQuota::default(),
                };
                check_live_inode(scan, &mut fixed, out, kind_slot);
                ic.other_problem |= fixed.other_problem;
                return;
            }
        }
    }
    // With the feature turned on (agreed to), inline data is checked as such.
    let mut inline_on = inline_fs;
    if fl & iflags::INLINE_DATA != 0 && ino >= geo.first_ino {
        // e2fsck reads the inode's xattrs and wants a readable `system.data`.
        let attr_ok = xattr::inline_data_attr_ok(scan, ic);
        if !inline_fs {
            inline_on = attr_ok
                && report(
                    scan,
                    out,
                    ic,
                    P::P1_INLINE_DATA_FEATURE,
                    ProblemCtx::ino(ino),
                );
            // Otherwise the flag has no business here: the inode is cleared (agreed to).
            if !inline_on && report(scan, out, ic, P::P1_INLINE_DATA_SET, ProblemCtx::ino(ino)) {
                return;
            }
        } else if !attr_ok {
            report(
                scan,
                out,
                ic,
                P::P1_INLINE_DATA_NO_ATTR,
                ProblemCtx::ino(ino),
            );
        }
    }
    check_extra_isize(scan, ic, out);
    // The symlink as the fixes agreed to so far leave it (e2fsck writes each at once).
    let mut fixed_link: Option<RawInode> = None;
    if scan.extent_fs
        && fl & iflags::EXTENTS != 0
        && ft == FileType::Symlink
        && !symlink_uses_i_block(inode)
        && report(
            scan,
            out,
            ic,
            P::P1_FAST_SYMLINK_EXTENT_FL,
            ProblemCtx::ino(ino),
        )
    {
        let mut copy = inode.clone();
        copy.i_flags.set(fl & !iflags::EXTENTS);
        fixed_link = Some(copy);
    }

    if fl & iflags::EA_INODE != 0 {
        // (e2fsck 1.47.0 accepts the flag on any file type; pass 4 uses it.)
        k |= kind::EA_INODE;
    }
    if fl & iflags::ENCRYPT != 0 && !check_encryption(scan, ic, out, &mut k) {
        return;
    }
    if fl & iflags::INLINE_DATA != 0 && inline_on {
        k |= kind::INLINE;
    }

    bad |= !check_file_type(scan, ic, out, fixed_link.as_ref());
    if bad {
        k |= kind::BAD;
    }
    out.counts.files += 1;

    check_mapping(scan, ic, out, bad, &mut k);
    *kind_slot = k;
}

/// Fields pass 2 will look at when it reaches an entry for this inode (e2fsck's bad map).
fn bad_fields(geo: &ffsck_format::Geometry, inode: &RawInode, ft: FileType) -> bool {
    inode.i_obso_faddr.get() != 0
        || (!geo.incompat.has(Incompat::LARGEDIR)
            && ft == FileType::Directory
            && inode.i_size_high.get() != 0)
        || (!geo.incompat.has(Incompat::SIXTY_FOUR_BIT) && inode.l_i_file_acl_high.get() != 0)
        || (!geo.ro_compat.has(RoCompat::HUGE_FILE) && inode.l_i_blocks_high.get() != 0)
        || (inode.file_acl(geo.sixty_four_bit()) != 0
            && (!geo.compat.has(Compat::EXT_ATTR)
                || inode.file_acl(geo.sixty_four_bit()) < geo.first_data_block
                || inode.file_acl(geo.sixty_four_bit()) >= geo.blocks_count))
}

/// The encryption policy of an inode with the flag, for pass 2 to compare with its
/// directory's. Without a context the flag goes (agreed to); a corrupt context takes the
/// inode with it: returns `false` when the inode is cleared.
fn check_encryption(scan: &Scan, ic: &mut InodeCheck, out: &mut GroupOut, k: &mut u8) -> bool {
    let (fs, ino) = (scan.fs, ic.ino);
    let id = match encryption::context(fs, ic.raw) {
        encryption::Context::Missing => {
            if report(
                scan,
                out,
                ic,
                P::P1_MISSING_ENCRYPTION_XATTR,
                ProblemCtx::ino(ino),
            ) {
                None
            } else {
                *k |= kind::ENCRYPT;
                None
            }
        }
        encryption::Context::Corrupt => {
            if report(
                scan,
                out,
                ic,
                P::P1_CORRUPT_ENCRYPTION_XATTR,
                ProblemCtx::ino(ino),
            ) {
                return false;
            }
            *k |= kind::ENCRYPT;
            None
        }
        encryption::Context::Unrecognized => Some(encryption::UNRECOGNIZED),
        encryption::Context::Policy(p) => Some(
            scan.policies
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .id(p),
        ),
    };
    if let Some(id) = id {
        *k |= kind::ENCRYPT;
        out.policies.push((ino, id));
    }
    true
}

/// Count the inode by type and check what its type allows (device numbers, symlink target,
/// flags and size of special files). Returns `false` if pass 2 must look at it (bad).
/// `fixed_link` is the symlink as the fixes agreed to so far leave it.
fn check_file_type(
    scan: &Scan,
    ic: &mut InodeCheck,
    out: &mut GroupOut,
    fixed_link: Option<&RawInode>,
) -> bool {
    let (fs, ino, inode) = (scan.fs, ic.ino, ic.inode);
    let (fl, ft) = (inode.flags(), inode.file_type());
    let mut ok = true;
    match ft {
        FileType::Directory => {
            out.counts.dirs += 1;
            out.dirs.push(DirFacts {
                ino,
                generation: inode.i_generation.get(),
            });
        }
        FileType::Regular => out.counts.regular += 1,
        FileType::CharDev | FileType::BlockDev | FileType::Fifo | FileType::Socket => {
            if device_inode_ok(inode) {
                if fl & (iflags::EXTENTS | iflags::INLINE_DATA) != 0 {
                    report(
                        scan,
                        out,
                        ic,
                        P::P1_SPECIAL_EXTENTS_IDATA,
                        ProblemCtx::ino(ino),
                    );
                }
                if fl & (iflags::IMMUTABLE | iflags::APPEND) != 0 {
                    report(scan, out, ic, P::P1_SET_IMMUTABLE, ProblemCtx::ino(ino));
                }
                if inode.size() != 0 {
                    report(
                        scan,
                        out,
                        ic,
                        P::P1_SET_NONZSIZE,
                        ProblemCtx {
                            ino,
                            num: inode.size(),
                            ..Default::default()
                        },
                    );
                }
                match ft {
                    FileType::CharDev => out.counts.chardev += 1,
                    FileType::BlockDev => out.counts.blockdev += 1,
                    FileType::Fifo => out.counts.fifo += 1,
                    _ => out.counts.socket += 1,
                }
            } else {
                ok = false;
            }
        }
        FileType::Symlink => {
            if !symlink_ok(fs, fixed_link.unwrap_or(inode), ic.raw) {
                ok = false;
            } else {
                if fl & (iflags::IMMUTABLE | iflags::APPEND) != 0 {
                    report(scan, out, ic, P::P1_SET_IMMUTABLE, ProblemCtx::ino(ino));
                }
                out.counts.symlinks += 1;
                if is_fast_symlink(inode) {
                    out.counts.fast_symlinks += 1;
                }
            }
        }
        FileType::Bad => ok = false,
    }
    ok
}

/// The mapping of a live inode: flag and feature consistency, the htree flag, then its
/// blocks (`check_blocks`), the htree root and holes of a directory, or only what
/// `i_blocks` claims of a file that maps nothing. Sets `kind::HTREE` in `k`.
fn check_mapping(scan: &Scan, ic: &mut InodeCheck, out: &mut GroupOut, bad: bool, k: &mut u8) {
    let (ino, inode) = (ic.ino, ic.inode);
    let (fl, ft) = (inode.flags(), inode.file_type());
    // Flag/feature consistency of the mapping.
    if fl & iflags::EXTENTS != 0 && !scan.extent_fs {
        // e2fsck first offers to turn the feature on when the tree looks valid, then to clear
        // the flag; declined, it leaves the mapping unchecked.
        // Turned on, the next round checks the tree as an extent tree.
        let feature_on = Node::parse(&inode.block_bytes()).is_ok()
            && report(scan, out, ic, P::P1_EXTENT_FEATURE, ProblemCtx::ino(ino));
        if !feature_on {
            report(scan, out, ic, P::P1_EXTENTS_SET, ProblemCtx::ino(ino));
        }
        return;
    }
    // A valid inline-data symlink is done: e2fsck looks at none of its blocks, not even its
    // xattr block (whose references it then does not count), nor charges it to a quota.
    if ft == FileType::Symlink && !bad && fl & iflags::INLINE_DATA != 0 {
        return;
    }
    let word = |i: usize| {
        let b = inode.block_bytes();
        u32::from_le_bytes([b[4 * i], b[4 * i + 1], b[4 * i + 2], b[4 * i + 3]])
    };
    // (A valid fast symlink's blocks are checked at once.)
    let fast_symlink = ft == FileType::Symlink
        && inode.size() > 0
        && inode.size() < 60
        && super::symlink_ok(scan.fs, inode, ic.raw);
    let deferred = fl & (iflags::EXTENTS | iflags::INLINE_DATA) == 0
        && !fast_symlink
        && (word(12) != 0
            || word(13) != 0
            || word(14) != 0
            || inode.file_acl(scan.fs.geo.sixty_four_bit()) != 0);
    let mark = out.findings.0.len();
    check_blocks_of(scan, ic, out, k, ft, fl);
    if deferred && out.findings.0.len() > mark {
        let findings = out.findings.0.split_off(mark);
        out.deferred.push(super::Deferred {
            ind: word(12),
            acl: inode.file_acl(scan.fs.geo.sixty_four_bit()),
            ino,
            findings,
        });
    }
}

/// The part of [`check_mapping`] e2fsck's `check_blocks` does.
fn check_blocks_of(
    scan: &Scan,
    ic: &mut InodeCheck,
    out: &mut GroupOut,
    k: &mut u8,
    ft: FileType,
    fl: u32,
) {
    let geo = &scan.fs.geo;
    let (ino, inode) = (ic.ino, ic.inode);
    if fl & iflags::INDEX != 0 && index_flag(scan, ic, out, ft == FileType::Directory) {
        *k |= kind::HTREE;
    }
    let is_special = matches!(
        ft,
        FileType::CharDev | FileType::BlockDev | FileType::Fifo | FileType::Socket
    );
    if !is_special && (ft != FileType::Symlink || symlink_uses_i_block(inode)) {
        let cb = check_blocks(scan, ic, out, ft);
        if ft == FileType::Directory {
            // The flag still decides how pass 2 reads block 0, even when the root is bad.
            if *k & kind::HTREE != 0 {
                htree_root_ok(scan, ic, out, &cb);
            }
            if *k & kind::INLINE == 0 {
                let block_mapped = !(fl & iflags::EXTENTS != 0 && scan.extent_fs);
                out.dir_blocks
                    .extend(dir_holes(&cb.dir_blocks, ino, block_mapped, geo));
            }
            out.dir_blocks.extend(cb.dir_blocks);
        }
    } else if inode.file_acl(scan.fs.geo.sixty_four_bit()) != 0
        || ic.ea_ibody.blocks != 0
        || inode.i_blocks_lo.get() != 0
        || inode.l_i_blocks_high.get() != 0
    {
        // Nothing mapped, but what i_blocks claims is still checked.
        let _ = check_blocks(scan, ic, out, ft);
    } else {
        // No blocks at all: the inode is still charged to its owners.
        charge_quota(scan, ic, out, 0);
    }
}

/// Charge an inode and `blocks` clusters to its owners' quotas, as e2fsck charges them: the
/// root and ordinary inodes, not value inodes nor the project quota file.
pub(super) fn charge_quota(scan: &Scan, ic: &InodeCheck, out: &mut GroupOut, blocks: u64) {
    let fs = scan.fs;
    let geo = &fs.geo;
    if scan.quota && crate::quota::charged(fs, ic.ino, ic.inode) {
        let cluster = u64::from(geo.block_size) * u64::from(geo.cluster_ratio);
        out.quota
            .charge(ic.raw, blocks * cluster, 1 + ic.ea_ibody.inodes);
    }
}

/// What a fix of an inode's flags agreed to leaves.
pub(super) enum FlagFix {
    None,
    /// The inode keeps these flags.
    Flags(u32),
    /// The inode is cleared.
    Cleared,
}

/// An inode with both `INLINE_DATA_FL` and `EXTENTS_FL`: e2fsck offers, in turn, to keep the
/// extent tree, to keep the inline data, to treat `i_block` as a block map, or to clear it;
/// the first answered yes settles it.
pub(super) fn check_inline_and_extents(
    scan: &Scan,
    ic: &mut InodeCheck,
    out: &mut GroupOut,
    ft: FileType,
) -> FlagFix {
    let geo = &scan.fs.geo;
    let ino = ic.ino;
    if !scan.extent_fs && !geo.incompat.has(Incompat::INLINE_DATA) {
        return FlagFix::None;
    }
    let inode = ic.inode;
    let fl = inode.flags();
    if matches!(
        ft,
        FileType::CharDev | FileType::BlockDev | FileType::Fifo | FileType::Socket
    ) {
        let both = iflags::EXTENTS | iflags::INLINE_DATA;
        let ctx = ProblemCtx::ino(ino);
        return match report(scan, out, ic, P::P1_SPECIAL_EXTENTS_IDATA, ctx) {
            true => FlagFix::Flags(fl & !both),
            false => FlagFix::None,
        };
    }
    let ask = |ic: &mut InodeCheck, out: &mut GroupOut, p: P| {
        report(scan, out, ic, p, ProblemCtx::ino(ino))
    };
    if extent_header_valid(&inode.block_bytes()) && ask(ic, out, P::P1_CLEAR_INLINE_DATA_FOR_EXTENT)
    {
        return FlagFix::Flags(fl & !iflags::INLINE_DATA);
    }
    let isz = geo.inode_size as u64;
    // Room for inline data in the inode's xattr area. e2fsck computes it unsigned: an
    // `i_extra_isize` reaching past the inode wraps it round to nearly 2^64, so any size
    // looks short enough (as it does to e2fsck).
    let ea_room = if isz > GOOD_OLD_INODE_SIZE as u64 {
        isz.wrapping_sub(GOOD_OLD_INODE_SIZE as u64 + u64::from(inode.extra_isize()))
    } else {
        0
    };
    if inode.size() < ea_room.wrapping_add(60) && ask(ic, out, P::P1_CLEAR_EXTENT_FOR_INLINE_DATA) {
        return FlagFix::Flags(fl & !iflags::EXTENTS);
    }
    let block_map = inode
        .i_block
        .iter()
        .all(|b| u64::from(b.get()) < geo.blocks_count);
    if block_map && ask(ic, out, P::P1_CLEAR_EXTENT_INLINE_DATA_FLAGS) {
        return FlagFix::Flags(fl & !(iflags::EXTENTS | iflags::INLINE_DATA));
    }
    if ask(ic, out, P::P1_CLEAR_EXTENT_INLINE_DATA_INODE) {
        return FlagFix::Cleared;
    }
    FlagFix::None
}

pub(super) fn check_extra_isize(scan: &Scan, ic: &mut InodeCheck, out: &mut GroupOut) {
    let isz = scan.fs.geo.inode_size as usize;
    if isz <= GOOD_OLD_INODE_SIZE {
        return;
    }
    let extra = usize::from(ic.inode.extra_isize());
    let max = isz - GOOD_OLD_INODE_SIZE;
    if extra != 0 && (extra < 4 || extra > max || extra & 3 != 0) {
        report(
            scan,
            out,
            ic,
            P::P1_EXTRA_ISIZE,
            ProblemCtx {
                ino: ic.ino,
                num: extra as u64,
                ..Default::default()
            },
        );
        return;
    }
    ic.ea_ibody = xattr::check_ibody(scan, ic, out);
}
