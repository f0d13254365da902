//! Pass 1's view of a file's blocks: one `ext4::blocks` walk of its block map or extent tree,
//! whose values (`Mapper`) become counts toward `i_blocks`, claims, directory blocks and
//! findings. The extent-leaf rules are in `extents`.

use super::inode::charge_quota;
use super::itable::extent_header_valid;
use super::sizes::check_sizes;
use super::special::symlink_uses_i_block;
use super::{flag, report, xattr, GroupOut, InodeCheck, Scan};
use crate::ext4::blocks::{
    Damage, Index, Indirect, Mapping, NodeError, NodeInfo, Span, Step, Visitor, Walk,
};
use crate::facts::DirBlock;
use crate::latch::Latches;
use crate::problem::Problem as P;
use crate::report::ProblemCtx;
use ffsck_format::inode::{flags as iflags, FileType};
use ffsck_format::{ino, Incompat};

/// What the mapping walk of one inode found.
#[derive(Default)]
pub(super) struct BlockWalk {
    /// Blocks counted toward `i_blocks` (data, mapping metadata, xattr block).
    pub(super) num_blocks: u64,
    /// Highest logical block mapped, if any.
    pub(super) last_block: Option<u64>,
    /// Highest logical block mapped by an initialised extent.
    pub(super) last_init_block: Option<u64>,
    pub(super) dir_blocks: Vec<DirBlock>,
    pub(super) illegal: u32,
    /// The illegal-blocks latch, one per inode as e2fsck's.
    pub(super) latches: Latches,
    pub(super) fragmented: bool,
    pub(super) prev_pblk: Option<u64>,
    /// Stop walking: more blocks than the file system has, i.e. a cyclic or garbage map.
    pub(super) exhausted: bool,
    /// Inside an extent subtree, or the pointers of an indirect block, that lie in critical
    /// metadata: bad mappings are passed over without a report.
    pub(super) quiet: bool,
    pub(super) last_cluster: Option<u64>,
    /// How full each level of the extent tree is (for pass 1E's offer).
    pub(super) shape: super::optimize::TreeShape,
    /// The last extent met (first logical block, physical block, length): e2fsck names it
    /// when it reports an extent block whose checksum alone is wrong.
    pub(super) last_extent: (u64, u64, u64),
    /// Extent blocks with a wrong checksum being walked: the finding's index, the block, and
    /// whether it is a leaf. Once the block's subtree is walked, the finding names the last
    /// extent in it.
    pub(super) csum_pending: Vec<(usize, u64, bool)>,
    /// One past the highest logical block an extent accepted so far maps, across leaves: an
    /// extent starting below it maps a block twice (e2fsck's duplicate extent mapping).
    pub(super) next_lblock: u64,
}

impl BlockWalk {
    /// Count `n` blocks from `pblk` toward `i_blocks`, which is kept in clusters: a cluster is
    /// charged once however many of its blocks are mapped consecutively.
    pub(super) fn count(&mut self, pblk: u64, n: u64, ratio: u64) {
        if ratio == 1 {
            self.num_blocks += n;
            return;
        }
        for b in pblk..pblk + n {
            let c = b / ratio;
            if self.last_cluster != Some(c) {
                self.num_blocks += 1;
                self.last_cluster = Some(c);
            }
        }
    }
    /// Count one block of a block-mapped inode. e2fsck charges every block of the resize
    /// inode a cluster of its own (on bigalloc its blocks are backups spread over groups).
    pub(super) fn count_mapped(&mut self, pblk: u64, ino: u32, ratio: u64) {
        if ino == ffsck_format::ino::RESIZE {
            self.num_blocks += 1;
        } else {
            self.count(pblk, 1, ratio);
        }
    }
    /// e2fsck tests a block map's contiguity before it checks the block: a pointer it then
    /// rejects (out of range, past the largest size) still breaks the run, without ending it.
    pub(super) fn break_run(&mut self, pblk: u64, ino: u32) {
        let file = ino != ffsck_format::ino::RESIZE && ino != ffsck_format::ino::BAD;
        if file && self.prev_pblk.is_some_and(|p| p + 1 != pblk) {
            self.fragmented = true;
        }
    }
    pub(super) fn note_data(&mut self, lblk: u64, pblk: u64, is_dir: bool, ino: u32) {
        // e2fsck leaves the resize inode out (its blocks are backups spread over groups), and
        // the bad-blocks list (it is no file).
        if ino != ffsck_format::ino::RESIZE && ino != ffsck_format::ino::BAD {
            if self.prev_pblk.is_some_and(|p| p + 1 != pblk) {
                self.fragmented = true;
            }
            self.prev_pblk = Some(pblk);
        }
        self.last_block = Some(self.last_block.map_or(lblk, |l| l.max(lblk)));
        if is_dir {
            self.dir_blocks.push(DirBlock {
                pblk,
                ino,
                lblk: lblk.min(u64::from(u32::MAX)) as u32,
            });
        }
    }
}

impl Scan<'_> {
    /// Claim a run of blocks for an inode; double claims go to the dup list.
    pub(super) fn claim(&self, out: &mut GroupOut, start: u64, len: u64) {
        out.summary.add(start, len, self.bucket_shift);
        self.claimed.set_range(start, len, |b| {
            if !self.shared_blocks {
                out.dup_blocks.push(b);
            }
        });
    }
}

/// Walk the block map or extent tree, check it, claim its blocks, then check size and
/// `i_blocks`. Returns the walk so directory callers can take the block list.
pub(super) fn check_blocks(
    scan: &Scan,
    ic: &mut InodeCheck,
    out: &mut GroupOut,
    ft: FileType,
) -> BlockWalk {
    let fs = scan.fs;
    let geo = &fs.geo;
    let inode = ic.inode;
    let ino = ic.ino;
    let fl = inode.flags();
    let is_dir = ft == FileType::Directory;
    let mut w = BlockWalk::default();

    // Extended attribute block.
    let acl = inode.file_acl(scan.fs.geo.sixty_four_bit());
    w.num_blocks += ic.ea_ibody.blocks / u64::from(geo.cluster_ratio);
    if acl != 0 {
        xattr::check_block(scan, ic, out, acl, &mut w);
    }

    let inline = fl & iflags::INLINE_DATA != 0 && geo.incompat.has(Incompat::INLINE_DATA);
    // As libext2fs: only directories, regular files and slow symlinks (told from i_blocks,
    // not from the size) without inline data map blocks, whatever the feature says; the
    // bad-blocks list always does.
    let maps = match ft {
        FileType::Directory | FileType::Regular => fl & iflags::INLINE_DATA == 0,
        FileType::Symlink => symlink_uses_i_block(inode) && fl & iflags::INLINE_DATA == 0,
        _ => false,
    };
    let no_map = !maps && ino != ino::BAD;
    // An extent tree in a regular file or directory without the flag: with the flag set
    // (agreed to), the rest of the check reads the tree.
    let flag_set = !(inline || no_map)
        && scan.extent_fs
        && fl & iflags::EXTENTS == 0
        && matches!(ft, FileType::Regular | FileType::Directory)
        && extent_header_valid(&inode.block_bytes())
        && report(scan, out, ic, P::P1_UNSET_EXTENT_FL, ProblemCtx::ino(ino));
    // An extent flag the file system cannot have (its question declined, on a reserved
    // inode): libext2fs cannot iterate such a map, and e2fsck walks none of it.
    let unreadable = fl & iflags::EXTENTS != 0 && !scan.extent_fs;
    if inline || no_map || unreadable {
        // Inline data, fast symlink targets and device numbers live in the inode: nothing to
        // map (only the xattr block above counts).
    } else {
        let extents = (fl & iflags::EXTENTS != 0 || flag_set) && scan.extent_fs;
        // The resize inode is walked with or without its feature (as e2fsck does, unless it is
        // cleared): its double-indirect block is in use until then.
        {
            let mut walk = Walk::over_file(fs, inode.size());
            if extents && fs.has_metadata_csum() {
                let gen = inode.i_generation.get();
                walk.csum_seed = Some(ffsck_format::csum::inode_seed(fs.csum_seed, ino, gen));
            }
            let mut m = Mapper {
                scan,
                ic,
                out,
                w: &mut w,
                ft,
                is_dir,
                extents,
                outer_quiet: [false; 16],
            };
            let iblock = inode.block_bytes();
            if extents {
                walk.extents(&iblock, &mut m);
            } else {
                walk.block_map(&iblock, &mut m);
            }
        }
    }
    // e2fsck counts a file non-contiguous only when it is smaller than a group (a larger one
    // cannot be contiguous).
    if w.fragmented && w.num_blocks < u64::from(geo.blocks_per_group) {
        out.counts.fragmented += 1;
        out.counts.fragmented_dirs += u64::from(is_dir);
    }
    // `-v`'s indirect-block counts: block-mapped inodes of the root and of files.
    if fl & (iflags::EXTENTS | iflags::INLINE_DATA) == 0
        && (ino == ino::ROOT || ino >= geo.first_ino)
    {
        let b = inode.block_bytes();
        for (i, n) in out.counts.ind_dind_tind.iter_mut().enumerate() {
            *n += u64::from(b[48 + 4 * i..52 + 4 * i] != [0; 4]);
        }
    }
    if ino == ino::BAD {
        out.counts.bad_blocks += w.num_blocks;
    }
    if w.exhausted {
        return w;
    }
    // A file that maps nothing keeps the size its kind allows (checked with the kind), but
    // a reserved inode's is judged as e2fsck judges any map's: no larger than one can address.
    let no_size = inline || (no_map && ino >= geo.first_ino);
    let offered = !(inline || no_map) && ino != ino::BAD;
    if offered {
        super::optimize::offer(scan, ic, out, &w, false);
    }
    check_sizes(scan, ic, out, &w, ft, no_size);
    charge_quota(scan, ic, out, w.num_blocks);
    if offered {
        super::optimize::offer(scan, ic, out, &w, true);
    }
    w
}

/// Report an illegal block in a block map, with e2fsck's latch and every-12th suppression.
pub(super) fn illegal_block(
    scan: &Scan,
    ic: &mut InodeCheck,
    out: &mut GroupOut,
    w: &mut BlockWalk,
    blk: u64,
    lblk: i64,
) {
    if w.quiet {
        return;
    }
    w.illegal += 1;
    if w.illegal.is_multiple_of(12) {
        // Agreed to, the inode is cleared: its map is not walked any further (as e2fsck).
        if report(
            scan,
            out,
            ic,
            P::P1_TOO_MANY_BAD_BLOCKS,
            ProblemCtx::ino(ic.ino),
        ) {
            w.exhausted = true;
            return;
        }
        report(
            scan,
            out,
            ic,
            P::P1_SUPPRESS_MESSAGES,
            ProblemCtx::ino(ic.ino),
        );
    }
    // The inode's first raises the latch question (the walk's latch is the inode's).
    ic.other_problem = true;
    w.latches.report(
        &mut out.findings,
        scan.policy,
        P::P1_ILLEGAL_BLOCK_NUM,
        ProblemCtx {
            ino: ic.ino,
            blk,
            num: lblk as u64,
            ..Default::default()
        },
    );
}

/// Pass 1's visitor of one inode's mapping: each value of the walk (`ext4::blocks`) becomes a
/// count toward `i_blocks`, a claim, a directory block or a finding, in the walk's order.
pub(super) struct Mapper<'s, 'a, 'c> {
    pub(super) scan: &'s Scan<'a>,
    pub(super) ic: &'s mut InodeCheck<'c>,
    pub(super) out: &'s mut GroupOut,
    pub(super) w: &'s mut BlockWalk,
    pub(super) ft: FileType,
    pub(super) is_dir: bool,
    /// Walking an extent tree (else a block map).
    pub(super) extents: bool,
    /// `w.quiet` as it was outside each mapping block being walked, by level.
    pub(super) outer_quiet: [bool; 16],
}

impl Mapper<'_, '_, '_> {
    pub(super) fn go(&self) -> Step {
        if self.w.exhausted {
            Step::Stop
        } else {
            Step::Go
        }
    }

    /// `flag` with this walk's quiet state; a latched problem raises its question first (the
    /// walk's latches are the inode's, as e2fsck's too-big and illegal-block latches).
    pub(super) fn flag(&mut self, p: P, ctx: ProblemCtx) -> bool {
        if p.latch().is_none() || self.w.quiet {
            return flag(self.scan, self.out, self.ic, self.w.quiet, p, ctx);
        }
        self.ic.other_problem = true;
        self.w
            .latches
            .report(&mut self.out.findings, self.scan.policy, p, ctx)
    }

    /// `-E fragcheck`: the file's next block is `pblk`, not the one after `prev`. `at` is the
    /// logical block (or -1 to -3 for an indirect block); `run` the extent's length.
    pub(super) fn fragcheck(&mut self, prev: u64, pblk: u64, at: i64, run: Option<u64>) {
        if !self.scan.policy.overrides().fragcheck {
            return;
        }
        let kind = match self.ft {
            FileType::Directory => "d",
            FileType::Regular => "f",
            _ => "?",
        };
        let (problem, num2) = match run {
            Some(len) => (P::P1_FRAGCHECK_EXTENT, len),
            None => (P::P1_FRAGCHECK_BLOCK, 0),
        };
        let ctx = ProblemCtx {
            ino: self.ic.ino,
            blk: prev + 1,
            blk2: pblk,
            num: at as u64,
            num2,
            str: Some(kind.into()),
            ..Default::default()
        };
        self.out.findings.report(self.scan.policy, problem, ctx);
    }

    pub(super) fn illegal(&mut self, blk: u64, lblk: i64) -> Step {
        self.w.break_run(blk, self.ic.ino);
        illegal_block(self.scan, self.ic, self.out, self.w, blk, lblk);
        self.go()
    }

    /// Remember the quiet state outside the block at `level` (restored by `leave`).
    pub(super) fn push_quiet(&mut self, level: u32, quiet: bool) {
        self.outer_quiet[(level as usize).min(15)] = std::mem::replace(&mut self.w.quiet, quiet);
    }

    /// One data pointer of a block map (in range).
    pub(super) fn map_data_block(&mut self, b: u64, lblk: u64) -> Step {
        let geo = &self.scan.fs.geo;
        if self.is_dir && !geo.incompat.has(Incompat::LARGEDIR) && lblk > dir_block_limit(geo) {
            self.w.break_run(b, self.ic.ino);
            if self.w.quiet {
                return Step::Go;
            }
            let ctx = ProblemCtx {
                ino: self.ic.ino,
                blk: b,
                num: lblk,
                ..Default::default()
            };
            self.flag(P::P1_TOOBIG_DIR, ctx);
            return Step::Go;
        }
        // A symlink maps one block at most (e2fsck: the pointers past it make it too big).
        if self.ft == FileType::Symlink && lblk > 0 {
            self.w.break_run(b, self.ic.ino);
            if self.w.quiet {
                return Step::Go;
            }
            let ctx = ProblemCtx {
                ino: self.ic.ino,
                blk: b,
                num: lblk,
                ..Default::default()
            };
            self.flag(P::P1_TOOBIG_SYMLINK, ctx);
            return Step::Go;
        }
        let (scan, ic, out, w) = (self.scan, &mut *self.ic, &mut *self.out, &mut *self.w);
        let geo = &scan.fs.geo;
        if ic.ino == ino::BAD {
            // The primary superblock or descriptors on the bad-blocks list: the file system
            // cannot work without them, so the entry is taken off the list (agreed to).
            let sb = geo.first_data_block;
            let problem = if b == sb {
                Some(P::P1_BAD_PRIMARY_SUPERBLOCK)
            } else if b > sb && b <= sb + u64::from(geo.old_desc_blocks()) {
                Some(P::P1_BAD_PRIMARY_GROUP_DESCRIPTOR)
            } else {
                None
            };
            if let Some(p) = problem {
                let ctx = ProblemCtx {
                    ino: ic.ino,
                    blk: b,
                    ..Default::default()
                };
                if report(scan, out, ic, p, ctx) {
                    return Step::Go;
                }
            }
        }
        w.count_mapped(b, ic.ino, u64::from(geo.cluster_ratio));
        if w.num_blocks > geo.blocks_count {
            w.exhausted = true;
            return Step::Stop;
        }
        if ic.ino != ino::RESIZE {
            scan.claim(out, b, 1);
        }
        let broke = w
            .prev_pblk
            .filter(|&p| p + 1 != b && ic.ino != ino::RESIZE && ic.ino != ino::BAD);
        w.note_data(lblk, b, self.is_dir, ic.ino);
        if let Some(prev) = broke {
            self.fragcheck(prev, b, lblk as i64, None);
        }
        Step::Go
    }
}

impl Visitor for Mapper<'_, '_, '_> {
    fn mapping(&mut self, m: Mapping, span: &mut Span) -> Step {
        if self.w.exhausted {
            return Step::Stop;
        }
        if self.extents {
            self.w.last_extent = (m.lblk, m.pblk, m.len);
            self.map_extent(m, span)
        } else {
            self.map_data_block(m.pblk, m.lblk)
        }
    }

    fn indirect(&mut self, ind: Indirect) -> Step {
        if self.w.exhausted {
            return Step::Stop;
        }
        let (scan, ic, out) = (self.scan, &mut *self.ic, &mut *self.out);
        let blk = ind.pblk;
        // In critical metadata, the pointers it holds are followed but a bad one is passed
        // over without a word: a fix would be written into the metadata. The next round
        // checks the copy pass 1D makes.
        let in_metadata = critical_collision(scan, out, ic, blk);
        let w = &mut *self.w;
        w.count_mapped(blk, ic.ino, u64::from(scan.fs.geo.cluster_ratio));
        // The resize inode's map points at reserved GDT blocks and their backups, which are
        // already claimed as metadata: only its double-indirect block itself is claimed
        // here, but every block still counts toward its i_blocks.
        if ic.ino != ino::RESIZE || ind.level == 2 {
            scan.claim(out, blk, 1);
        }
        // An indirect block comes before the blocks it maps: a file laid out as data,
        // indirect block, data… is contiguous.
        let mut broke = None;
        if ic.ino != ino::RESIZE && ic.ino != ino::BAD {
            if let Some(prev) = w.prev_pblk.filter(|&p| p + 1 != blk) {
                w.fragmented = true;
                broke = Some(prev);
            }
            w.prev_pblk = Some(blk);
        }
        if let Some(prev) = broke {
            self.fragcheck(prev, blk, -i64::from(ind.level), None);
        }
        self.push_quiet(ind.level, in_metadata);
        Step::Go
    }

    fn index(&mut self, idx: Index, span: &mut Span) -> Step {
        if self.w.exhausted {
            return Step::Stop;
        }
        if idx.start < span.next_start {
            let ctx = ProblemCtx {
                ino: self.ic.ino,
                blk: idx.child,
                num: idx.start,
                num2: 1,
                ..Default::default()
            };
            self.flag(P::P1_OUT_OF_ORDER_EXTENTS, ctx);
        }
        span.next_start = idx.start.max(span.next_start);
        // A child in critical metadata is walked without repairs (see `critical_collision`);
        // a child that is not even a node is only claimed, so pass 1D moves it and the next
        // round finds its header bad in the copy.
        let collides = critical_collision(self.scan, self.out, self.ic, idx.child);
        let quiet = self.w.quiet || collides;
        self.push_quiet(idx.level, quiet);
        Step::Go
    }

    fn node(&mut self, n: NodeInfo) -> Step {
        self.w.shape.node(n);
        if let Some(top) = self.w.csum_pending.last_mut() {
            if Some(top.1) == n.pblk {
                top.2 = n.depth == 0;
            }
        }
        match n.pblk {
            None => self.out.counts.extent_depth_hist[usize::from(n.depth.min(5))] += 1,
            Some(blk) => {
                // Each tree block counts a whole cluster of its own, as in e2fsck: it does not
                // share the data's cluster run (bigalloc).
                self.w.num_blocks += 1;
                self.scan.claim(self.out, blk, 1);
            }
        }
        Step::Go
    }

    fn leave(&mut self, pblk: u64, level: u32) {
        self.w.quiet = self.outer_quiet[(level as usize).min(15)];
        if let Some(&(at, blk, leaf)) = self.w.csum_pending.last() {
            if blk == pblk {
                self.w.csum_pending.pop();
                let (lblk, last, len) = self.w.last_extent;
                let found = &mut self.out.findings.0;
                if let Some(f) = found.get_mut(at) {
                    if f.problem == P::P1_EXTENT_ONLY_CSUM_INVALID {
                        f.ctx.num = lblk;
                        f.ctx.blk2 = last;
                        f.ctx.num2 = len;
                        // e2fsck asks about a leaf's checksum after the leaf's extents, and
                        // not at all once one of them was fixed (the fix rewrites the leaf).
                        if leaf && at + 1 < found.len() {
                            let f = found.remove(at);
                            if !found[at..].iter().any(|g| g.fixed) {
                                found.push(f);
                            }
                        }
                    }
                }
            }
        }
    }

    fn damage(&mut self, d: Damage) -> Step {
        let ino = self.ic.ino;
        match d {
            Damage::DataOutOfRange(m) if !self.extents => self.illegal(m.pblk, m.lblk as i64),
            Damage::DataOutOfRange(m) => {
                self.w.last_extent = (m.lblk, m.pblk, m.len);
                let ctx = ProblemCtx {
                    ino,
                    blk: m.pblk,
                    num: m.lblk,
                    num2: m.len,
                    ..Default::default()
                };
                self.flag(P::P1_EXTENT_BAD_START_BLK, ctx);
                Step::Go
            }
            Damage::IndirectOutOfRange(ind) => self.illegal(ind.pblk, -(ind.level as i64)),
            Damage::IndexOutOfRange(idx) => {
                let ctx = ProblemCtx {
                    ino,
                    blk: idx.child,
                    num: idx.start,
                    num2: 1,
                    ..Default::default()
                };
                self.flag(P::P1_EXTENT_BAD_START_BLK, ctx);
                Step::Go
            }
            Damage::BadRoot(_) => {
                if matches!(
                    self.ft,
                    FileType::Directory | FileType::Regular | FileType::Symlink
                ) {
                    let ctx = ProblemCtx::ino(ino);
                    report(
                        self.scan,
                        self.out,
                        self.ic,
                        P::P1_MISSING_EXTENT_HEADER,
                        ctx,
                    );
                }
                Step::Go
            }
            Damage::DeeperThanUseful { depth, useful } => {
                let ctx = ProblemCtx {
                    ino,
                    num: u64::from(depth),
                    num2: u64::from(useful),
                    ..Default::default()
                };
                let policy = self.scan.policy;
                self.out
                    .findings
                    .report(policy, P::P1_EXTENT_BAD_MAX_DEPTH, ctx);
                Step::Go
            }
            Damage::BadNode(idx, NodeError::Depth { want, got }) => {
                // Walked at the depth its place implies, as libext2fs walks it.
                let ctx = ProblemCtx {
                    ino,
                    blk: idx.child,
                    blk2: u64::from(want),
                    num: idx.start,
                    num2: u64::from(got),
                    ..Default::default()
                };
                self.flag(P::P1_EXTENT_NODE_DEPTH, ctx);
                Step::Go
            }
            Damage::BadNode(idx, _) => {
                if self.w.quiet {
                    self.scan.claim(self.out, idx.child, 1);
                } else {
                    let ctx = ProblemCtx {
                        ino,
                        blk: idx.child,
                        num: idx.start,
                        ..Default::default()
                    };
                    report(
                        self.scan,
                        self.out,
                        self.ic,
                        P::P1_EXTENT_HEADER_INVALID,
                        ctx,
                    );
                }
                Step::Skip
            }
            Damage::BadChecksum(idx) => {
                let ctx = ProblemCtx {
                    ino,
                    blk: idx.child,
                    ..Default::default()
                };
                let at = self.out.findings.0.len();
                self.w.last_extent = (idx.start, 0, 0);
                if self.flag(P::P1_EXTENT_ONLY_CSUM_INVALID, ctx) || self.out.findings.0.len() > at
                {
                    // Bounded by the walk's depth: one entry per open node.
                    if self.w.csum_pending.len() < 16 {
                        self.w.csum_pending.push((at, idx.child, false));
                    }
                }
                Step::Go
            }
            Damage::IndexStart { index, first, .. } => {
                // e2fsck names the level of the node holding the index entry (the root 0).
                let ctx = ProblemCtx {
                    ino,
                    blk: index.start,
                    blk2: first,
                    num: u64::from(index.level.saturating_sub(1)),
                    ..Default::default()
                };
                self.flag(P::P1_EXTENT_INDEX_START_INVALID, ctx);
                Step::Go
            }
            // An unreadable indirect block maps nothing; a tree deeper than the format cannot
            // be reached with the depth check above.
            Damage::IndirectUnreadable(_) | Damage::TooDeep(_) => Step::Skip,
            // More mapping blocks than the file system has: a cyclic or garbage map.
            Damage::ReadCap => {
                self.w.exhausted = true;
                Step::Stop
            }
        }
    }
}

/// A mapping block (extent node or indirect block) of `ic`'s inode at `blk` lies in the
/// superblocks, descriptors, bitmaps or inode tables. Reported; the caller then makes no repair
/// that would write to it: pass 1D copies it out of the way first (it is multiply-claimed with
/// the metadata), and the next round checks the copy. (The resize inode's map points into the
/// reserved descriptor blocks by design.)
pub(super) fn critical_collision(
    scan: &Scan,
    out: &mut GroupOut,
    ic: &mut InodeCheck,
    blk: u64,
) -> bool {
    if ic.ino == ino::RESIZE || !scan.metadata.get(blk) {
        return false;
    }
    let ctx = ProblemCtx {
        ino: ic.ino,
        blk,
        ..Default::default()
    };
    report(scan, out, ic, P::P1_CRITICAL_METADATA_COLLISION, ctx);
    true
}

/// Largest logical block a directory may map without `large_dir` (2 GiB of directory).
pub(super) fn dir_block_limit(geo: &ffsck_format::Geometry) -> u64 {
    1u64 << (21 - geo.log_block_size)
}
