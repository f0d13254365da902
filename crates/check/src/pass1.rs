//! Pass 1: scan every inode table in disk order, self-check each inode and its block map or
//! extent tree, and keep only the compact facts later passes need.
//!
//! Checks: dtime/link-count consistency, reserved inodes, modes and flags, extra-isize and
//! in-inode xattrs, extent headers and entries, block pointers, xattr blocks, `i_size` and
//! `i_blocks`, inode checksums.
//! Produces: `Pass1Facts` — link counts and a one-byte kind per inode, the in-use inode and
//! block bitmaps, the directory-block list (sorted by block for pass 2), multiply-claimed
//! blocks, per-group claim summaries for pass 1B, and xattr-block reference counts.
//! Relies on: `Pass0Facts`. Frees: every inode and block buffer as soon as it is checked.
//!
//! Groups are scanned in parallel; each worker fills its own slice of the per-inode arrays and
//! returns its findings, which are merged in group order so output never depends on threads.

use crate::bitmap::{AtomicBitmap, Bitmap};
use crate::fs::Fs;
use crate::icount::{InodeCounts, InodeKinds};
use crate::pass0::{GroupState, Pass0Facts};
use crate::problem::Problem as P;
use crate::report::{Findings, Policy, ProblemCtx};
use ffsck_format::dir::{ft, DxRootInfo, DX_ROOT_INFO_OFFSET};
use ffsck_format::extent::{self, Node};
use ffsck_format::inode::{
    flags as iflags, inode_checksum, inode_checksums_x3, FileType, RawInode, GOOD_OLD_INODE_SIZE,
};
use ffsck_format::{ino, Compat, Incompat, RoCompat};
use rayon::prelude::*;
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use zerocopy::FromBytes;

mod encryption;
mod xattr;

/// Bits of the per-inode kind byte (low three bits: the dirent file type).
pub mod kind {
    pub const TYPE_MASK: u8 = 0x07;
    /// Fields pass 2 must look at when it meets an entry for this inode (e2fsck's bad map).
    pub const BAD: u8 = 0x08;
    /// A directory with a usable htree index.
    pub const HTREE: u8 = 0x10;
    /// Inline data.
    pub const INLINE: u8 = 0x20;
    /// The inode stores an xattr value (`EA_INODE_FL`).
    pub const EA_INODE: u8 = 0x40;
    /// Encrypted inode.
    pub const ENCRYPT: u8 = 0x80;
}

/// One directory block to check in pass 2 (`pblk == 0` marks a hole).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct DirBlock {
    pub pblk: u64,
    pub ino: u32,
    pub lblk: u32,
}

/// A coarse fingerprint of the blocks one group's inodes claim: ffsck's per-group bitmap
/// snapshot, reduced to the span and a 64-bucket occupancy mask, so pass 1B rescans only the
/// groups that can own a multiply-claimed block.
#[derive(Clone, Copy, Debug, Default)]
pub struct ClaimSummary {
    pub lo: u64,
    pub hi: u64,
    pub buckets: u64,
}

impl ClaimSummary {
    fn add(&mut self, start: u64, len: u64, bucket_shift: u32) {
        if len == 0 {
            return;
        }
        let end = start + len - 1;
        if self.buckets == 0 {
            self.lo = start;
            self.hi = end;
        } else {
            self.lo = self.lo.min(start);
            self.hi = self.hi.max(end);
        }
        let (b0, b1) = (start >> bucket_shift, end >> bucket_shift);
        if b1 - b0 >= 63 {
            self.buckets = !0;
        } else {
            for b in b0..=b1 {
                self.buckets |= 1 << (b % 64);
            }
        }
    }
    pub fn may_contain(&self, blk: u64, bucket_shift: u32) -> bool {
        self.buckets != 0
            && blk >= self.lo
            && blk <= self.hi
            && self.buckets & (1 << ((blk >> bucket_shift) % 64)) != 0
    }
}

/// A directory one group's scan found.
#[derive(Clone, Copy, Debug)]
pub struct DirFacts {
    pub ino: u32,
    /// `i_generation`, which seeds the checksums of the directory's blocks.
    pub generation: u32,
}

/// The directories pass 1 found, ascending by inode number, as an index (shared with pass
/// 2's table of parents rather than copied) that tells each one's position in that order; the
/// generations (which seed the checksums of directory blocks) are kept, by position, only on
/// a file system with metadata checksums.
#[derive(Debug, Default)]
pub struct DirList {
    index: Arc<DirIndex>,
    /// By position; under `--max-memory`, past their share, in a scratch file.
    generations: crate::spill::Table<u32>,
}

impl DirList {
    /// `inos` ascending, each once, and their generations (or none).
    fn new(
        inos: &[u32],
        generations: Vec<u32>,
        inodes_count: u32,
        limits: &crate::spill::Limits,
    ) -> Self {
        DirList {
            index: Arc::new(DirIndex::new(inos, inodes_count)),
            generations: crate::spill::Table::new(
                generations,
                limits.dir_generations_bytes,
                limits.scratch_dir.as_deref(),
            ),
        }
    }
    /// The generations went to a scratch file that could not be read back.
    pub fn spill_failed(&self) -> bool {
        self.generations.failed()
    }
    /// The directories' inode numbers, ascending.
    pub fn inos(&self) -> impl Iterator<Item = u32> + '_ {
        self.index.iter()
    }
    /// How many directories there are.
    pub fn len(&self) -> usize {
        self.index.len()
    }
    pub fn is_empty(&self) -> bool {
        self.index.len() == 0
    }
    /// Where each directory is among them, by inode number.
    pub fn index(&self) -> &Arc<DirIndex> {
        &self.index
    }
    /// The generation of directory `ino` (`None`: not listed, or no checksums to seed).
    pub fn generation(&self, ino: u32) -> Option<u32> {
        self.generations.get(self.index.position(ino)?)
    }
}

/// The position of each directory in the ascending list of directories, found from its inode
/// number in constant time (pass 2 looks one up per directory block and per entry naming a
/// directory; halving a list of a million took a fifth of its merge): a bitmap of the
/// directories' inodes, with the number of directories before each 64-bit word. 1.5 bits
/// per inode, which also lists the directories in order (instead of 4 bytes each).
#[derive(Debug, Default)]
pub struct DirIndex {
    words: Vec<u64>,
    before: Vec<u32>,
    len: usize,
}

impl DirIndex {
    /// `inos` ascending, each once; numbers outside `1..=inodes_count` are left out.
    pub fn new(inos: &[u32], inodes_count: u32) -> Self {
        let n = (u64::from(inodes_count) + 1).div_ceil(64) as usize;
        let mut words = vec![0u64; n];
        for &ino in inos.iter().filter(|&&i| i != 0 && i <= inodes_count) {
            words[(ino / 64) as usize] |= 1 << (ino % 64);
        }
        let mut seen = 0u32;
        let before = words
            .iter()
            .map(|w| {
                let b = seen;
                seen += w.count_ones();
                b
            })
            .collect();
        DirIndex {
            words,
            before,
            len: seen as usize,
        }
    }
    /// How many directories it holds.
    pub fn len(&self) -> usize {
        self.len
    }
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
    /// The directories' inode numbers, ascending (the `i`th is at position `i`).
    pub fn iter(&self) -> impl Iterator<Item = u32> + '_ {
        self.words.iter().enumerate().flat_map(|(w, &word)| {
            let mut rest = word;
            std::iter::from_fn(move || {
                (rest != 0).then(|| {
                    let bit = rest.trailing_zeros();
                    rest &= rest - 1;
                    w as u32 * 64 + bit
                })
            })
        })
    }
    /// Where directory `ino` is in the list (`None`: not a listed directory).
    pub fn position(&self, ino: u32) -> Option<usize> {
        let w = (ino / 64) as usize;
        let word = *self.words.get(w)?;
        let bit = 1u64 << (ino % 64);
        (word & bit != 0)
            .then(|| self.before[w] as usize + (word & (bit - 1)).count_ones() as usize)
    }
}

fn generation_of(inos: &[u32], generations: &[u32], ino: u32) -> Option<u32> {
    let at = inos.binary_search(&ino).ok()?;
    generations.get(at).copied()
}

#[derive(Default, Debug, Clone, Copy, serde::Serialize)]
pub struct Counts {
    pub files: u64,
    pub dirs: u64,
    pub regular: u64,
    pub fragmented: u64,
    pub symlinks: u64,
    pub fast_symlinks: u64,
    pub chardev: u64,
    pub blockdev: u64,
    pub fifo: u64,
    pub socket: u64,
    pub large_files: u64,
    pub extent_depth_hist: [u64; 6],
    /// For `-v`: directories among `fragmented`, block-mapped inodes with an indirect,
    /// double and triple indirect block, blocks of the bad-block inode (its walk's count).
    pub fragmented_dirs: u64,
    pub ind_dind_tind: [u64; 3],
    pub bad_blocks: u64,
}

impl Counts {
    fn add(&mut self, o: &Counts) {
        self.files += o.files;
        self.dirs += o.dirs;
        self.regular += o.regular;
        self.fragmented += o.fragmented;
        self.symlinks += o.symlinks;
        self.fast_symlinks += o.fast_symlinks;
        self.chardev += o.chardev;
        self.blockdev += o.blockdev;
        self.fifo += o.fifo;
        self.socket += o.socket;
        self.large_files += o.large_files;
        for i in 0..6 {
            self.extent_depth_hist[i] += o.extent_depth_hist[i];
        }
        self.fragmented_dirs += o.fragmented_dirs;
        for i in 0..3 {
            self.ind_dind_tind[i] += o.ind_dind_tind[i];
        }
        self.bad_blocks += o.bad_blocks;
    }
}

pub struct Pass1Facts {
    /// `i_links_count` of every in-use inode (index `ino - 1`), 0 otherwise.
    pub links: InodeCounts,
    pub kinds: InodeKinds,
    pub inode_used: Bitmap,
    pub block_used: Bitmap,
    /// Blocks claimed more than once, ascending.
    pub dup_blocks: Vec<u64>,
    /// Blocks of file-system metadata (superblocks, descriptors, bitmaps, inode tables).
    pub metadata: Bitmap,
    /// The directory blocks in pass-2 order (empty when spilled: see `dir_block_iter`).
    pub dir_blocks: Vec<DirBlock>,
    /// The directory-block list, when a memory limit sent it to a scratch file.
    pub dir_spill: Option<crate::spill::DirBlockSpill>,
    pub dirs: DirList,
    pub summaries: Vec<ClaimSummary>,
    pub bucket_shift: u32,
    pub counts: Counts,
    /// References to each value inode from xattr entries (absent: none).
    pub ea_inode_refs: BTreeMap<u32, u32>,
    /// Space and inodes per user, group and project id (with the `quota` feature).
    pub quota: crate::quota::Usage,
    /// `(ino, encryption policy id)` of every encrypted inode with a context, ascending.
    pub policies: Vec<(u32, u32)>,
    /// Value inodes whose missing `EA_INODE` flag this check agreed to set.
    pub ea_inode_flag_set: std::collections::BTreeSet<u32>,
    /// Inodes whose inode-table block is on the bad-blocks list, ascending: counted in
    /// use but never read, and no directory entry may name them.
    pub bb_inodes: Vec<u32>,
}

impl Pass1Facts {
    /// How many directory blocks pass 2 checks.
    pub fn dir_block_count(&self) -> u64 {
        self.dir_blocks.len() as u64 + self.dir_spill.as_ref().map_or(0, |s| s.len())
    }

    /// Every directory block in pass-2 order, from memory or the scratch file.
    pub fn dir_block_iter(&self) -> Box<dyn Iterator<Item = DirBlock> + '_> {
        match &self.dir_spill {
            Some(s) => Box::new(s.iter()),
            None => Box::new(self.dir_blocks.iter().copied()),
        }
    }

    /// The directory blocks in pass-2 order, `n` at a time.
    pub fn dir_block_windows(
        &self,
        n: usize,
    ) -> Box<dyn Iterator<Item = std::borrow::Cow<'_, [DirBlock]>> + Send + '_> {
        match &self.dir_spill {
            Some(s) => {
                let mut it = s.iter();
                Box::new(std::iter::from_fn(move || {
                    let w: Vec<DirBlock> = it.by_ref().take(n).collect();
                    (!w.is_empty()).then_some(std::borrow::Cow::Owned(w))
                }))
            }
            None => Box::new(
                self.dir_blocks
                    .chunks(n.max(1))
                    .map(std::borrow::Cow::Borrowed),
            ),
        }
    }
}

/// What the scan of one group hands back to the merge.
#[derive(Default)]
struct GroupOut {
    findings: Findings,
    dir_blocks: Vec<DirBlock>,
    dirs: Vec<DirFacts>,
    dup_blocks: Vec<u64>,
    summary: ClaimSummary,
    counts: Counts,
    /// `(ino - 1, i_links_count)` of this group's inodes with more than two links.
    links_many: Vec<(u32, u16)>,
    /// `(ino - 1, kind)` of this group's inodes other than plain files and directories.
    kinds_other: Vec<(u32, u8)>,
    /// Space and inodes charged per quota id (with the `quota` feature).
    quota: crate::quota::Usage,
    /// `(ino, policy id)` of this group's encrypted inodes with a context.
    policies: Vec<(u32, u32)>,
    /// The group's bits of the shared inode bitmaps, or-ed into them when the group ends.
    bits: GroupBits,
}

/// One group's share of the scan's inode bitmaps (in use, plain directory, plain file, one
/// link, two links), set without atomic operations while the group is scanned and or-ed into
/// the shared bitmaps a word at a time when it ends: a group's inodes are one range, so
/// only the words at its two ends can be shared with a neighbour, and or-ing shares them
/// correctly. (Per inode, an atomic or was about a tenth of the scan.)
#[derive(Default)]
struct GroupBits {
    /// Word (of the shared bitmaps) that `words[_][0]` stands for.
    first_word: u64,
    words: [Vec<u64>; 5],
}

impl GroupBits {
    const USED: usize = 0;
    const DIR: usize = 1;
    const REG: usize = 2;
    const ONE_LINK: usize = 3;
    const TWO_LINKS: usize = 4;

    /// Room for inode indexes `first..first + count`.
    fn new(first: u64, count: u64) -> Self {
        let first_word = first / 64;
        let n = ((first + count).div_ceil(64) - first_word) as usize;
        GroupBits {
            first_word,
            words: std::array::from_fn(|_| vec![0; n]),
        }
    }
    /// Set inode index `idx` in bitmap `which`; an index outside the group is ignored.
    fn set(&mut self, which: usize, idx: u32) {
        let Some(w) = u64::from(idx).checked_sub(self.first_word * 64) else {
            return;
        };
        if let Some(word) = self.words[which].get_mut((w / 64) as usize) {
            *word |= 1 << (w % 64);
        }
    }
    /// Or the bits into the shared bitmaps (and free them).
    fn flush(self, scan: &Scan) {
        let shared = [
            &scan.inode_used,
            &scan.kind_dir,
            &scan.kind_reg,
            &scan.links_one,
            &scan.links_two,
        ];
        for (words, shared) in self.words.into_iter().zip(shared) {
            for (i, bits) in words.into_iter().enumerate() {
                if bits != 0 {
                    shared.or_word(self.first_word + i as u64, bits);
                }
            }
        }
    }
}

/// Shared, read-only state of the scan.
struct Scan<'a> {
    fs: &'a Fs,
    policy: Policy,
    claimed: AtomicBitmap,
    /// Inodes with exactly one link, and with exactly two (the rest are in each group's
    /// `links_many`).
    links_one: AtomicBitmap,
    links_two: AtomicBitmap,
    /// Inodes whose kind byte is exactly a plain directory / regular file.
    kind_dir: AtomicBitmap,
    kind_reg: AtomicBitmap,
    /// Inodes in use, set as the scan finds them.
    inode_used: AtomicBitmap,
    ea_refs: Mutex<BTreeMap<u64, EaBlock>>,
    /// Inode-table read buffers, one per worker at most, freed with the scan.
    buffers: Mutex<Vec<Vec<u8>>>,
    /// References to value inodes from xattr entries, by inode number.
    ea_inode_refs: Mutex<BTreeMap<u32, u32>>,
    ea_inode_flag_set: Mutex<std::collections::BTreeSet<u32>>,
    /// Usage is counted for the quota files (the `quota` feature).
    quota: bool,
    /// Encryption policy ids, shared by the workers.
    policies: Mutex<encryption::Policies>,
    bucket_shift: u32,
    extent_fs: bool,
    low_dtime_check: bool,
    /// `shared_blocks`: blocks may be claimed more than once by design (never duplicates).
    shared_blocks: bool,
    /// The journal inode as the journal check left it (0 once the journal was dropped).
    journal_inum: u32,
    /// Inodes in inode-table blocks on the bad-blocks list, ascending.
    bb_inodes: Vec<u32>,
    /// The resize inode is cleared by the repair (pass 0's question): seen as empty.
    resize_cleared: bool,
    /// Superblocks, descriptors, bitmaps and inode tables: a mapping block found among them
    /// is never repaired in place (see `critical_collision`).
    metadata: Bitmap,
}

/// An xattr block seen during the scan and how many inodes point at it.
#[derive(Clone, Copy, Debug)]
struct EaBlock {
    /// h_refcount on disk.
    disk_refcount: u32,
    seen: u32,
    /// Blocks charged to each inode that uses it: the block's cluster plus its value inodes.
    quota_blocks: u64,
}

/// Mark the fixed metadata of every group.
pub fn metadata_map(fs: &Fs, groups: &[GroupState]) -> Bitmap {
    let geo = &fs.geo;
    let mut m = Bitmap::new(geo.blocks_count);
    // Block 0 holds the boot sector (and the superblock for block sizes > 1 KiB).
    if geo.first_data_block == 0 {
        m.set(0);
    }
    for g in 0..geo.group_count {
        for (start, n) in geo.fixed_metadata_runs(g) {
            for b in start..start.saturating_add(n).min(geo.blocks_count) {
                m.set(b);
            }
        }
        let gd = &fs.groups[g as usize];
        let st = groups[g as usize];
        if st.block_bitmap_ok {
            m.set(gd.block_bitmap());
        }
        if st.inode_bitmap_ok {
            m.set(gd.inode_bitmap());
        }
        if st.inode_table_ok {
            let it = gd.inode_table();
            for b in it..(it + u64::from(geo.inode_blocks_per_group)).min(geo.blocks_count) {
                m.set(b);
            }
        }
    }
    m
}

pub fn run(
    p0: &Pass0Facts,
    policy: Policy,
    out: &mut Findings,
    progress: &crate::engine::Progress,
) -> Pass1Facts {
    run_with(p0, policy, out, progress, None, &Default::default())
}

/// Pass 1, handing the directory blocks of each finished batch of groups to `stage` while the
/// next batch is scanned (the pipelined check), or scanning all groups at once (`None`).
pub fn run_with(
    p0: &Pass0Facts,
    policy: Policy,
    out: &mut Findings,
    progress: &crate::engine::Progress,
    stage: Option<&mut dyn Stage>,
    limits: &crate::spill::Limits,
) -> Pass1Facts {
    let fs = &p0.fs;
    let geo = &fs.geo;
    let n_inodes = geo.inodes_count as usize;
    let metadata = metadata_map(fs, &p0.groups);
    // Pre-claim metadata so files that overlap it are found as multiply-claimed.
    let claimed = AtomicBitmap::new(geo.blocks_count);
    for b in metadata.iter_ones() {
        claimed.test_and_set(b);
    }
    let mkfs = fs.sb.s_mkfs_time.get();
    let scan = Scan {
        fs,
        policy,
        claimed,
        inode_used: AtomicBitmap::new(n_inodes as u64),
        links_one: AtomicBitmap::new(n_inodes as u64),
        links_two: AtomicBitmap::new(n_inodes as u64),
        kind_dir: AtomicBitmap::new(n_inodes as u64),
        kind_reg: AtomicBitmap::new(n_inodes as u64),
        ea_refs: Mutex::new(BTreeMap::new()),
        buffers: Mutex::new(Vec::new()),
        ea_inode_refs: Mutex::new(BTreeMap::new()),
        ea_inode_flag_set: Mutex::default(),
        quota: fs.sb.ro_compat().has(RoCompat::QUOTA),
        policies: Mutex::default(),
        bucket_shift: (64 - geo.blocks_count.leading_zeros()).saturating_sub(6),
        extent_fs: geo.incompat.has(Incompat::EXTENTS),
        low_dtime_check: !(mkfs != 0 && mkfs < geo.inodes_count),
        shared_blocks: geo.ro_compat.has(RoCompat::SHARED_BLOCKS),
        journal_inum: p0.journal.journal_inum,
        bb_inodes: inodes_in_bad_blocks(p0, policy, out),
        resize_cleared: p0.resize_cleared,
        metadata,
    };
    let group_count = geo.group_count as usize;
    // The used part of a group's inode table is hinted a few groups ahead of its scan, so
    // the device works on the next tables while the workers check this one.
    let ahead = 2 * rayon::current_num_threads().max(1);
    let hint_table = |g: usize| {
        if let (Some(st), Some(gd)) = (p0.groups.get(g), fs.groups.get(g)) {
            if st.inode_table_ok {
                let n = u64::from(fs.scannable_inodes(g as u32, st.csum_ok));
                let bytes = n * u64::from(geo.inode_size);
                fs.will_need_blocks(&[(
                    gd.inode_table(),
                    bytes.div_ceil(u64::from(geo.block_size)),
                )]);
            }
        }
    };
    (0..ahead.min(group_count)).for_each(hint_table);
    // Without a stage or a limit, each group's directory blocks go straight into one list as
    // the group ends (pass 2 sorts it anyway): the groups' lists are never all alive beside
    // a joined copy of them, which on a file system of small directories was a third of
    // the peak memory.
    let sink: Option<Mutex<Vec<DirBlock>>> =
        (stage.is_none() && limits.dir_blocks_bytes.is_none()).then(Mutex::default);
    let scan_groups = |r: std::ops::Range<usize>| -> Vec<GroupOut> {
        r.into_par_iter()
            .map(|g| {
                hint_table(g + ahead);
                let mut o = scan_group(&scan, g as u32, p0.groups[g]);
                if let Some(sink) = &sink {
                    let mut all = sink.lock().unwrap_or_else(|e| e.into_inner());
                    all.append(&mut o.dir_blocks);
                    o.dir_blocks = Vec::new();
                }
                progress.advance(1);
                o
            })
            .collect()
    };
    let mut acc = Acc {
        keep_generations: fs.has_metadata_csum(),
        ..Acc::default()
    };
    let first_blocks_first = geo.compat.has(Compat::DIR_INDEX);
    // Under a memory limit the directory-block list goes to a scratch file in sorted runs
    // whenever it outgrows its share (and groups are scanned in batches, so the group
    // outputs waiting to be merged stay small too).
    let mut spill: Option<crate::spill::DirBlockSpill> = None;
    let mut maybe_spill = |acc: &mut Acc| {
        let Some(limit) = limits.dir_blocks_bytes else {
            return;
        };
        if acc.dir_blocks.len() * std::mem::size_of::<DirBlock>() < limit {
            return;
        }
        if spill.is_none() {
            spill = crate::spill::DirBlockSpill::create(
                limits.scratch_dir.as_deref(),
                first_blocks_first,
            )
            .ok();
        }
        if let Some(s) = spill.as_mut() {
            // On a write error the blocks simply stay in memory.
            let _ = s.push_run(&mut acc.dir_blocks);
        }
    };
    match stage {
        None if limits.dir_blocks_bytes.is_none() => {
            let outs = scan_groups(0..group_count);
            acc.reserve(&outs);
            for o in outs {
                acc.absorb(o, policy, out);
            }
            if let Some(sink) = sink {
                acc.dir_blocks = sink.into_inner().unwrap_or_else(|e| e.into_inner());
            }
        }
        None => {
            let batch = pipeline_batch(group_count, rayon::current_num_threads());
            for start in (0..group_count).step_by(batch) {
                for o in scan_groups(start..(start + batch).min(group_count)) {
                    acc.absorb(o, policy, out);
                    maybe_spill(&mut acc);
                }
            }
        }
        Some(stage) => {
            // Pipelined: while the workers scan batch k+1, others check the directory blocks
            // batch k found (rayon's join lets idle threads take whichever side has work).
            let batch = pipeline_batch(group_count, rayon::current_num_threads());
            let mut start = 0usize;
            let mut pending = Some(scan_groups(0..batch.min(group_count)));
            while let Some(outs) = pending.take() {
                let end = (start + batch).min(group_count);
                let first_new = acc.dir_blocks.len();
                for o in outs {
                    acc.absorb(o, policy, out);
                }
                let blocks = acc.dir_blocks[first_new..].to_vec();
                let partial = Partial {
                    kind_dir: &scan.kind_dir,
                    kind_reg: &scan.kind_reg,
                    inode_used: &scan.inode_used,
                    other: &acc.kinds_other,
                    dir_inos: &acc.dir_inos,
                    dir_generations: &acc.dir_generations,
                    bb_inodes: &scan.bb_inodes,
                    policies: &acc.policies,
                    frontier: (end as u64 * u64::from(geo.inodes_per_group))
                        .min(u64::from(geo.inodes_count)) as u32,
                };
                let next = (end < group_count).then(|| end..(end + batch).min(group_count));
                let (scanned, ()) =
                    rayon::join(|| next.map(&scan_groups), || stage.batch(&partial, blocks));
                pending = scanned;
                start = end;
            }
        }
    }
    let Acc {
        mut dir_blocks,
        dir_inos,
        dir_generations,
        mut dup_blocks,
        summaries,
        counts,
        links_many,
        kinds_other,
        quota,
        policies,
        ..
    } = acc;
    // Xattr block reference counts, in block order.
    let refs = scan.ea_refs.into_inner().unwrap_or_default();
    let ea_inode_refs = scan.ea_inode_refs.into_inner().unwrap_or_default();
    let ea_inode_flag_set = scan.ea_inode_flag_set.into_inner().unwrap_or_default();
    for (blk, e) in refs {
        if e.disk_refcount != e.seen {
            out.report(
                policy,
                P::P1_EXTATTR_REFCOUNT,
                ProblemCtx {
                    blk,
                    num: u64::from(e.disk_refcount),
                    num2: u64::from(e.seen),
                    ..Default::default()
                },
            );
        }
    }
    dup_blocks.sort_unstable();
    dup_blocks.dedup();
    // Pass 2 reads blocks in this order. With dir_index, e2fsck checks every directory's
    // first block before any other, so parents and htree roots are known early; holes
    // (block 0) then come first among the rest.
    let dir_spill = match spill {
        Some(mut s) => match s.push_run(&mut dir_blocks) {
            Ok(()) => Some(s),
            Err(_) => {
                // Could not spill the rest: take the runs back into memory.
                dir_blocks.extend(s.iter());
                None
            }
        },
        None => None,
    };
    dir_blocks.par_sort_unstable_by_key(|d| dir_block_order(first_blocks_first, d));
    let block_used = scan.claimed.into_bitmap();
    let inode_used = scan.inode_used.into_bitmap();
    let links = InodeCounts::from_parts(
        scan.links_one.into_bitmap(),
        scan.links_two.into_bitmap(),
        links_many,
    );
    let kinds = InodeKinds::from_parts(
        scan.kind_dir.into_bitmap(),
        scan.kind_reg.into_bitmap(),
        kinds_other,
    );
    Pass1Facts {
        links,
        kinds,
        inode_used,
        block_used,
        dup_blocks,
        metadata: scan.metadata,
        dir_blocks,
        dir_spill,
        dirs: DirList::new(&dir_inos, dir_generations, geo.inodes_count, limits),
        summaries,
        bucket_shift: scan.bucket_shift,
        counts,
        ea_inode_refs,
        ea_inode_flag_set,
        quota,
        policies,
        bb_inodes: scan.bb_inodes,
    }
}

/// The inodes whose inode-table block is on the bad-blocks list (inode 1), ascending. When
/// the list names the block of inode 1 itself, the list is cleared (agreed to) and so empty.
fn inodes_in_bad_blocks(p0: &Pass0Facts, policy: Policy, findings: &mut Findings) -> Vec<u32> {
    let fs = &p0.fs;
    let geo = &fs.geo;
    let bad = crate::relocate::bad_blocks(fs);
    if bad.is_empty() {
        return Vec::new();
    }
    let per_block = (geo.block_size / geo.inode_size.max(1)).max(1);
    let mut out = Vec::new();
    for (g, st) in p0.groups.iter().enumerate() {
        if !st.inode_table_ok {
            continue;
        }
        let it = fs.groups[g].inode_table();
        for &b in &bad {
            let Some(i) = b
                .checked_sub(it)
                .filter(|&i| i < u64::from(geo.inode_blocks_per_group))
            else {
                continue;
            };
            let first = i as u32 * per_block;
            let last = (first + per_block).min(geo.inodes_per_group);
            let base = g as u32 * geo.inodes_per_group;
            out.extend((first..last).map(|k| base + k + 1));
        }
    }
    out.sort_unstable();
    out.dedup();
    if out.first() == Some(&ino::BAD)
        && findings.report(
            policy,
            P::P1_BADBLOCKS_IN_BADBLOCKS,
            ProblemCtx::ino(ino::BAD),
        )
    {
        return Vec::new();
    }
    out
}

/// The order pass 2 reads directory blocks in. With dir_index, e2fsck checks every
/// directory's first block before any other, so parents and htree roots are known early;
/// holes (block 0) then come first among the rest. Then by block, inode and logical block,
/// packed into one number so the sort compares two words, not four fields. (A directory
/// block number has at most 48 bits: extents hold 48, block maps 32.)
pub fn dir_block_order(first_blocks_first: bool, d: &DirBlock) -> u128 {
    let later = u128::from(first_blocks_first && d.lblk != 0);
    let pblk = u128::from(d.pblk & ((1 << 63) - 1));
    later << 127 | pblk << 64 | u128::from(d.ino) << 32 | u128::from(d.lblk)
}

/// Groups per pipelined batch: a few per worker, so a batch keeps every thread busy, and
/// enough batches that directory checking starts early.
fn pipeline_batch(groups: usize, threads: usize) -> usize {
    (groups / 16).max(threads.max(1) * 2).max(1)
}

/// Receives the directory blocks of each finished batch of groups during a pipelined pass 1.
pub trait Stage: Send {
    /// `blocks` were found by the groups of the batch just finished; `facts` are final for
    /// every inode up to `facts.frontier` and unknown beyond it.
    fn batch(&mut self, facts: &Partial<'_>, blocks: Vec<DirBlock>);
}

/// Pass-1 facts while the scan runs: final for inodes `1..=frontier`.
pub struct Partial<'a> {
    kind_dir: &'a AtomicBitmap,
    kind_reg: &'a AtomicBitmap,
    inode_used: &'a AtomicBitmap,
    other: &'a [(u32, u8)],
    dir_inos: &'a [u32],
    dir_generations: &'a [u32],
    bb_inodes: &'a [u32],
    policies: &'a [(u32, u32)],
    /// Highest inode number whose group has been scanned.
    pub frontier: u32,
}

/// Read access to the per-inode facts pass 2 uses, final (`Pass1Facts`) or partial.
pub trait Facts: Sync {
    /// The kind byte of inode `idx + 1`.
    fn kind(&self, idx: u32) -> u8;
    /// Whether inode `idx + 1` is in use.
    fn used(&self, idx: u32) -> bool;
    /// The generation of directory `ino`, if found so far (and kept: only with checksums).
    fn dir_generation(&self, ino: u32) -> Option<u32>;
    /// Whether inode `idx + 1` lies in an inode-table block on the bad-blocks list.
    fn in_bad_block(&self, idx: u32) -> bool;
    /// The encryption policy id of inode `ino` (`None`: not encrypted, or no context).
    fn policy(&self, ino: u32) -> Option<u32>;
}

fn policy_of(policies: &[(u32, u32)], ino: u32) -> Option<u32> {
    policies
        .binary_search_by_key(&ino, |&(i, _)| i)
        .ok()
        .map(|at| policies[at].1)
}

impl Facts for Pass1Facts {
    fn kind(&self, idx: u32) -> u8 {
        self.kinds.get(u64::from(idx))
    }
    fn used(&self, idx: u32) -> bool {
        self.inode_used.get(u64::from(idx))
    }
    fn dir_generation(&self, ino: u32) -> Option<u32> {
        self.dirs.generation(ino)
    }
    fn in_bad_block(&self, idx: u32) -> bool {
        self.bb_inodes.binary_search(&(idx + 1)).is_ok()
    }
    fn policy(&self, ino: u32) -> Option<u32> {
        policy_of(&self.policies, ino)
    }
}

impl Facts for Partial<'_> {
    fn kind(&self, idx: u32) -> u8 {
        let i = u64::from(idx);
        if self.kind_reg.get(i) {
            return ft::REG;
        }
        if self.kind_dir.get(i) {
            return ft::DIR;
        }
        match self.other.binary_search_by_key(&idx, |&(i, _)| i) {
            Ok(at) => self.other[at].1,
            Err(_) => 0,
        }
    }
    fn used(&self, idx: u32) -> bool {
        self.inode_used.get(u64::from(idx))
    }
    fn dir_generation(&self, ino: u32) -> Option<u32> {
        generation_of(self.dir_inos, self.dir_generations, ino)
    }
    fn in_bad_block(&self, idx: u32) -> bool {
        self.bb_inodes.binary_search(&(idx + 1)).is_ok()
    }
    fn policy(&self, ino: u32) -> Option<u32> {
        policy_of(self.policies, ino)
    }
}

/// The group outputs merged so far, in group order.
#[derive(Default)]
struct Acc {
    dir_blocks: Vec<DirBlock>,
    dir_inos: Vec<u32>,
    /// Empty on a file system without metadata checksums.
    dir_generations: Vec<u32>,
    /// Whether to keep `dir_generations`.
    keep_generations: bool,
    dup_blocks: Vec<u64>,
    summaries: Vec<ClaimSummary>,
    counts: Counts,
    links_many: Vec<(u32, u16)>,
    kinds_other: Vec<(u32, u8)>,
    quota: crate::quota::Usage,
    policies: Vec<(u32, u32)>,
    /// The first orphan-list refugee raises the latch question once, ahead of it, as
    /// e2fsck's latch does; with the findings merged in inode order this is deterministic.
    refugee_latched: bool,
}

impl Acc {
    /// Room for the lists of `outs` at once, so absorbing them never copies a list to grow it.
    fn reserve(&mut self, outs: &[GroupOut]) {
        let total = |f: fn(&GroupOut) -> usize| outs.iter().map(f).sum::<usize>();
        self.dir_blocks.reserve(total(|o| o.dir_blocks.len()));
        self.dir_inos.reserve(total(|o| o.dirs.len()));
        if self.keep_generations {
            self.dir_generations.reserve(total(|o| o.dirs.len()));
        }
        self.links_many.reserve(total(|o| o.links_many.len()));
        self.kinds_other.reserve(total(|o| o.kinds_other.len()));
        self.summaries.reserve(outs.len());
    }

    fn absorb(&mut self, o: GroupOut, policy: Policy, out: &mut Findings) {
        for f in o.findings.0 {
            if f.problem == P::P1_LOW_DTIME && !self.refugee_latched {
                self.refugee_latched = true;
                out.report(policy, P::P1_ORPHAN_LIST_REFUGEES, ProblemCtx::default());
            }
            out.0.push(f);
        }
        self.dir_blocks.extend(o.dir_blocks);
        self.dir_inos.extend(o.dirs.iter().map(|d| d.ino));
        if self.keep_generations {
            self.dir_generations
                .extend(o.dirs.iter().map(|d| d.generation));
        }
        self.dup_blocks.extend(o.dup_blocks);
        self.summaries.push(o.summary);
        self.counts.add(&o.counts);
        self.links_many.extend(o.links_many);
        self.kinds_other.extend(o.kinds_other);
        self.quota.merge(o.quota);
        self.policies.extend(o.policies);
    }
}

fn scan_group(scan: &Scan, g: u32, st: GroupState) -> GroupOut {
    let fs = scan.fs;
    let geo = &fs.geo;
    let mut out = GroupOut::default();
    if !st.inode_table_ok {
        return out;
    }
    let n = fs.scannable_inodes(g, st.csum_ok) as usize;
    if n == 0 {
        return out;
    }
    let isz = geo.inode_size as usize;
    let bs = geo.block_size as usize;
    // Large sequential reads of the used part of the table, through one reused buffer per
    // worker thread, so memory stays bounded whatever the size of the inode tables.
    let per_chunk = (ITABLE_CHUNK_BYTES / isz).max(1);
    let start = fs.groups[g as usize].inode_table();
    let first_ino = g * geo.inodes_per_group + 1;
    out.bits = GroupBits::new(u64::from(first_ino - 1), n as u64);
    let mut table = scan
        .buffers
        .lock()
        .ok()
        .and_then(|mut b| b.pop())
        .unwrap_or_default();
    {
        let mut done = 0usize;
        while done < n {
            let count = per_chunk.min(n - done);
            let first_blk = (done * isz) / bs;
            let last_blk = ((done + count) * isz).div_ceil(bs);
            // Every byte is read over (or zeroed below), so the buffer is not cleared first.
            table.resize((last_blk - first_blk) * bs, 0);
            let at = start + first_blk as u64;
            if fs.read_blocks_into(at, &mut table).is_err() {
                // Block by block, so one bad block does not hide the whole chunk.
                for (i, chunk) in table.chunks_mut(bs).enumerate() {
                    if fs.read_blocks_into(at + i as u64, chunk).is_err() {
                        chunk.fill(0);
                    }
                }
            }
            let skew = done * isz - first_blk * bs;
            let (insane, csum_bad) =
                insane_blocks(fs, &table, skew, first_ino + done as u32, count);
            for i in done..done + count {
                let off = skew + (i - done) * isz;
                let raw = &table[off..off + isz];
                let garbage = insane.get(off / bs).copied().unwrap_or(false);
                let ino = first_ino + i as u32;
                if scan.bb_inodes.binary_search(&ino).is_ok()
                    || (ino == ino::RESIZE && scan.resize_cleared)
                {
                    // Unreadable, or about to be cleared: in use (as every reserved inode
                    // is), so nothing reuses it, but never checked.
                    out.bits.set(GroupBits::USED, ino - 1);
                    continue;
                }
                let (mut links, mut k) = (0u16, 0u8);
                let judged = Judged {
                    garbage,
                    csum_failed: csum_bad[i - done],
                };
                check_inode(scan, ino, raw, judged, &mut links, &mut k, &mut out);
                let idx = ino - 1;
                match k {
                    0 => {}
                    ft::DIR => out.bits.set(GroupBits::DIR, idx),
                    ft::REG => out.bits.set(GroupBits::REG, idx),
                    k => out.kinds_other.push((idx, k)),
                }
                match links {
                    0 => {}
                    1 => out.bits.set(GroupBits::ONE_LINK, idx),
                    2 => out.bits.set(GroupBits::TWO_LINKS, idx),
                    n => out.links_many.push((idx, n)),
                }
            }
            done += count;
        }
    }
    if let Ok(mut b) = scan.buffers.lock() {
        b.push(table);
    }
    std::mem::take(&mut out.bits).flush(scan);
    out
}

/// Bytes of inode table read at once (a multiple of every inode size).
const ITABLE_CHUNK_BYTES: usize = 128 * 1024;

/// The inode-table blocks of a chunk whose inodes are garbage, as the library's inode scan
/// judges them: more than half of a block's inodes fail their checksum or have an insane
/// extent header or block map. `table[skew..]` holds `count` inodes from `first_ino`.
/// Also returns, per inode, whether its checksum fails (computed once, here, for the scan).
fn insane_blocks(
    fs: &Fs,
    table: &[u8],
    skew: usize,
    first_ino: u32,
    count: usize,
) -> (Vec<bool>, Vec<bool>) {
    let geo = &fs.geo;
    let (isz, bs) = (geo.inode_size as usize, geo.block_size as usize);
    let per_block = bs / isz;
    let mut insane = vec![false; table.len().div_ceil(bs)];
    let mut csum_bad = vec![false; count];
    let mut badness = vec![0usize; insane.len()];
    let slot = |i: usize| &table[skew + i * isz..skew + (i + 1) * isz];
    // An all-zero slot is simply free: never used, never checksummed, never insane.
    let free: Vec<bool> = (0..count)
        .map(|i| slot(i).iter().all(|&b| b == 0))
        .collect();
    if fs.has_metadata_csum() {
        // Checksummed three at a time, side by side (see `inode_checksums_x3`).
        let mut live = (0..count).filter(|&i| !free[i]);
        loop {
            let three = [live.next(), live.next(), live.next()];
            match three {
                [Some(a), Some(b), Some(c)] => {
                    let sums = inode_checksums_x3(
                        [slot(a), slot(b), slot(c)],
                        fs.csum_seed,
                        [a, b, c].map(|i| first_ino + i as u32),
                    );
                    for (i, (want, have, _)) in [a, b, c].into_iter().zip(sums) {
                        csum_bad[i] = want != have;
                    }
                }
                rest => {
                    for i in rest.into_iter().flatten() {
                        let (want, have, _) =
                            inode_checksum(slot(i), fs.csum_seed, first_ino + i as u32);
                        csum_bad[i] = want != have;
                    }
                    break;
                }
            }
        }
    }
    if per_block >= 2 {
        for (i, &bad) in csum_bad.iter().enumerate() {
            if free[i] {
                continue;
            }
            let inode = RawInode::parse(slot(i));
            if bad || extent_head_insane(&inode) || block_map_insane(fs, &inode) {
                badness[(skew + i * isz) / bs] += 1;
            }
        }
    }
    if per_block >= 2 {
        for (b, n) in badness.iter().enumerate() {
            insane[b] = *n > per_block / 2;
        }
    }
    (insane, csum_bad)
}

/// The inode claims extents, but its root is not a header the library accepts.
fn extent_head_insane(inode: &RawInode) -> bool {
    inode.flags() & iflags::EXTENTS != 0 && !extent_header_valid(&inode.block_bytes())
}

/// `i_block` starts with an extent header the library accepts for an in-inode root.
fn extent_header_valid(b: &[u8]) -> bool {
    let word = |o: usize| u16::from_le_bytes([b[o], b[o + 1]]);
    let (magic, entries, max) = (word(0), word(2), word(4));
    magic == ffsck_format::extent::EXTENT_MAGIC && entries <= max && (2..=4).contains(&max)
}

/// A linked block-mapped file, directory or long symlink with more than half its block
/// pointers out of range.
fn block_map_insane(fs: &Fs, inode: &RawInode) -> bool {
    let geo = &fs.geo;
    let fl = inode.flags();
    if fl & (iflags::INLINE_DATA | iflags::EXTENTS) != 0 || inode.links_count() == 0 {
        return false;
    }
    match inode.file_type() {
        FileType::Regular | FileType::Directory => {}
        FileType::Symlink if inode.size() > 60 => {}
        _ => return false,
    }
    let bad = inode
        .i_block
        .iter()
        .map(|w| u64::from(w.get()))
        .filter(|&b| b != 0 && (b < geo.first_data_block || b >= geo.blocks_count))
        .count();
    bad > 15 / 2
}

/// Per-inode checking context.
struct InodeCheck<'a> {
    ino: u32,
    inode: &'a RawInode,
    raw: &'a [u8],
    /// Something other than the checksum was reported for this inode.
    other_problem: bool,
    /// What the in-inode xattrs charge to `i_blocks`.
    ea_ibody: xattr::EaQuota,
}

fn report(scan: &Scan, out: &mut GroupOut, ic: &mut InodeCheck, p: P, ctx: ProblemCtx) -> bool {
    ic.other_problem = true;
    out.findings.report(scan.policy, p, ctx)
}

/// What the scan already judged of an inode from its table block.
#[derive(Clone, Copy)]
struct Judged {
    /// Its table block is mostly garbage.
    garbage: bool,
    /// Its checksum fails.
    csum_failed: bool,
}

fn check_inode(
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
    // An inode in a table block that is mostly garbage is cleared whole, before any other
    // check (as e2fsck). Answered no, it is checked like any other.
    if judged.garbage
        && inode.links_count() > 0
        && ino >= geo.first_ino
        && out
            .findings
            .report(scan.policy, P::P1_INODE_IS_GARBAGE, ProblemCtx::ino(ino))
    {
        return;
    }
    // A device, FIFO or socket whose first block is a directory's: with the fix agreed to,
    // the rest of the scan sees the directory it really is (as e2fsck).
    let mut really_dir_reported = false;
    if inode.links_count() != 0 && ino >= geo.first_ino && inode.dtime() == 0 {
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

    // e2fsck's test of the bad-blocks inode: only its block map may be set.
    let bad_list_invalid = ino == ino::BAD
        && (csum_failed
            || mode != 0
            || inode.i_uid.get() != 0
            || inode.i_gid.get() != 0
            || links != 0
            || inode.flags() & iflags::INLINE_DATA != 0
            || inode.file_acl() != 0);
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

/// e2fsck's test for a special file (or one of no known type) that is really a directory:
/// every mapped block in range (a device maps none past the fourth slot) and the first one
/// starting with `.` (pointing at the inode itself) and `..`. Returns the name of the type the
/// mode claims.
fn really_dir(fs: &Fs, ino: u32, inode: &RawInode, raw: &[u8]) -> Option<String> {
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
        let extra = crate::pass2::inline_xattr_data(fs, raw)?;
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

fn finish_csum(scan: &Scan, out: &mut GroupOut, ic: &InodeCheck, failed: bool) {
    if failed && !ic.other_problem {
        out.findings.report(
            scan.policy,
            P::P1_INODE_ONLY_CSUM_INVALID,
            ProblemCtx::ino(ic.ino),
        );
    }
}

fn check_reserved(
    scan: &Scan,
    ic: &mut InodeCheck,
    out: &mut GroupOut,
    link_slot: &mut u16,
    kind_slot: &mut u8,
) {
    let fs = scan.fs;
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
            if mode != 0 && ft != FileType::Regular {
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
        }
        _ => {}
    }
    out.bits.set(GroupBits::USED, ino - 1);
    *link_slot = inode.links_count();
    let bad = match ino {
        ino::BOOT_LOADER => ft == FileType::Directory,
        ino::RESIZE => mode != 0 && ft != FileType::Regular,
        ino::BAD => false,
        ino::USR_QUOTA | ino::GRP_QUOTA => mode != 0 && ft != FileType::Regular,
        ino::JOURNAL => false,
        _ => mode != 0,
    };
    if bad {
        report(scan, out, ic, P::P1_RESERVED_BAD_MODE, ProblemCtx::ino(ino));
    }
    if ino == ino::RESIZE && !fs.sb.compat().has(Compat::RESIZE_INODE) {
        return;
    }
    let _ = check_blocks(scan, ic, out, FileType::Regular);
}

fn check_live_inode(scan: &Scan, ic: &mut InodeCheck, out: &mut GroupOut, kind_slot: &mut u8) {
    let fs = scan.fs;
    let geo = &fs.geo;
    let ino = ic.ino;
    let inode = ic.inode;
    let fl = inode.flags();
    let ft = inode.file_type();
    let mut k = ft.dirent_type();

    // Fields pass 2 will look at when it reaches an entry for this inode.
    let mut bad = inode.i_obso_faddr.get() != 0
        || (!geo.incompat.has(Incompat::LARGEDIR)
            && ft == FileType::Directory
            && inode.i_size_high.get() != 0)
        || (!geo.incompat.has(Incompat::SIXTY_FOUR_BIT) && inode.l_i_file_acl_high.get() != 0)
        || (!geo.ro_compat.has(RoCompat::HUGE_FILE) && inode.l_i_blocks_high.get() != 0)
        || (inode.file_acl() != 0
            && (!geo.compat.has(Compat::EXT_ATTR)
                || inode.file_acl() < geo.first_data_block
                || inode.file_acl() >= geo.blocks_count));
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
    if fl & iflags::ENCRYPT != 0 {
        // The policy, for pass 2 to compare with the directory's. Without a context the
        // flag goes (agreed to); a corrupt context takes the inode with it.
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
                    k |= kind::ENCRYPT;
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
                    return;
                }
                k |= kind::ENCRYPT;
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
            k |= kind::ENCRYPT;
            out.policies.push((ino, id));
        }
    }
    if fl & iflags::INLINE_DATA != 0 && inline_on {
        k |= kind::INLINE;
    }

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
                bad = true;
            }
        }
        FileType::Symlink => {
            if !symlink_ok(fs, fixed_link.as_ref().unwrap_or(inode), ic.raw) {
                bad = true;
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
        FileType::Bad => bad = true,
    }
    if bad {
        k |= kind::BAD;
    }
    out.counts.files += 1;

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
        *kind_slot = k;
        return;
    }
    // A valid inline-data symlink is done: e2fsck looks at none of its blocks, not even its
    // xattr block (whose references it then does not count), nor charges it to a quota.
    if ft == FileType::Symlink && !bad && fl & iflags::INLINE_DATA != 0 {
        *kind_slot = k;
        return;
    }
    if fl & iflags::INDEX != 0 {
        if !geo.compat.has(Compat::DIR_INDEX) {
            report(scan, out, ic, P::P1_HTREE_SET, ProblemCtx::ino(ino));
        } else if ft != FileType::Directory {
            report(scan, out, ic, P::P1_HTREE_NODIR, ProblemCtx::ino(ino));
        } else {
            k |= kind::HTREE;
        }
    }
    let is_special = matches!(
        ft,
        FileType::CharDev | FileType::BlockDev | FileType::Fifo | FileType::Socket
    );
    if !is_special && (ft != FileType::Symlink || symlink_uses_i_block(inode)) {
        let cb = check_blocks(scan, ic, out, ft);
        if ft == FileType::Directory {
            // The flag still decides how pass 2 reads block 0, even when the root is bad.
            if k & kind::HTREE != 0 {
                htree_root_ok(scan, ic, out, &cb);
            }
            if k & kind::INLINE == 0 {
                let block_mapped = !(fl & iflags::EXTENTS != 0 && scan.extent_fs);
                out.dir_blocks
                    .extend(dir_holes(&cb.dir_blocks, ino, block_mapped, geo));
            }
            out.dir_blocks.extend(cb.dir_blocks);
        }
    } else if inode.file_acl() != 0
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
    *kind_slot = k;
}

/// Charge an inode and `blocks` clusters to its owners' quotas, as e2fsck charges them: the
/// root and ordinary inodes, not value inodes nor the project quota file.
fn charge_quota(scan: &Scan, ic: &InodeCheck, out: &mut GroupOut, blocks: u64) {
    let fs = scan.fs;
    let geo = &fs.geo;
    let ino = ic.ino;
    if scan.quota
        && (ino == ino::ROOT || ino >= geo.first_ino)
        && ino != fs.sb.s_prj_quota_inum.get()
        && ic.inode.flags() & iflags::EA_INODE == 0
    {
        let cluster = u64::from(geo.block_size) * u64::from(geo.cluster_ratio);
        out.quota
            .charge(ic.raw, blocks * cluster, 1 + ic.ea_ibody.inodes);
    }
}

/// What a fix of an inode's flags agreed to leaves.
enum FlagFix {
    None,
    /// The inode keeps these flags.
    Flags(u32),
    /// The inode is cleared.
    Cleared,
}

/// An inode with both `INLINE_DATA_FL` and `EXTENTS_FL`: e2fsck offers, in turn, to keep the
/// extent tree, to keep the inline data, to treat `i_block` as a block map, or to clear it;
/// the first answered yes settles it.
fn check_inline_and_extents(
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
    let isz = geo.inode_size as usize;
    let ea_room = if isz > GOOD_OLD_INODE_SIZE {
        (isz - GOOD_OLD_INODE_SIZE).saturating_sub(usize::from(inode.extra_isize()))
    } else {
        0
    };
    if inode.size() < (60 + ea_room) as u64 && ask(ic, out, P::P1_CLEAR_EXTENT_FOR_INLINE_DATA) {
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

/// e2fsck's test for device, fifo and socket inodes: no mapping flags and no stray pointers.
pub(crate) fn device_inode_ok(inode: &RawInode) -> bool {
    let fl = inode.flags();
    if fl & (iflags::INDEX | iflags::EXTENTS) != 0 {
        return false;
    }
    // Only an immutable or append-only device must have the unused block slots zero (the
    // kernel does not always clear them, so e2fsck tolerates them otherwise).
    fl & (iflags::IMMUTABLE | iflags::APPEND) == 0
        || inode.i_block[4..].iter().all(|b| b.get() == 0)
}

/// Whether a symlink's `i_block` maps blocks (libext2fs's guess: with no xattr block, any
/// `i_blocks` means a slow symlink; with one, only the size and `i_block[1]` can tell).
fn symlink_uses_i_block(inode: &RawInode) -> bool {
    if inode.file_acl() == 0 {
        if inode.i_blocks_lo.get() == 0 {
            return false;
        }
    } else {
        let size = inode.size();
        return size >= 60 || (size > 4 && inode.i_block[1].get() == 0);
    }
    inode.flags() & iflags::INLINE_DATA == 0
}

/// e2fsck 1.47's definition: a symlink whose target (under 60 bytes) lives in `i_block`.
fn is_fast_symlink(inode: &RawInode) -> bool {
    inode.file_type() == FileType::Symlink
        && inode.flags() & iflags::INLINE_DATA == 0
        && inode.size() > 0
        && inode.size() < 60
}

pub(crate) fn symlink_ok(fs: &Fs, inode: &RawInode, raw: &[u8]) -> bool {
    let size = inode.size();
    let fl = inode.flags();
    if fl & iflags::INDEX != 0 {
        return false;
    }
    if fl & iflags::INLINE_DATA != 0 {
        // The target fills i_block, then the `system.data` attribute: i_size is all of it.
        if fl & iflags::EXTENTS != 0 {
            return false;
        }
        let Some(extra) = crate::pass2::inline_xattr_data(fs, raw) else {
            return false;
        };
        return size > 0 && size == (inode.block_bytes().len() + extra.len()) as u64;
    }
    if is_fast_symlink(inode) {
        if fl & iflags::EXTENTS != 0 {
            return false;
        }
        let b = inode.block_bytes();
        let len = target_len(&b, fl);
        return size > 0 && len < b.len() as u64 && len == size;
    }
    let bs = u64::from(fs.geo.block_size);
    if size == 0 || size >= bs {
        return false;
    }
    // A slow symlink is one block holding the target and a terminating zero.
    let iblock = inode.block_bytes();
    let blk = if fl & iflags::EXTENTS != 0 {
        match Node::parse(&iblock) {
            Ok(n) if n.depth() == 0 && n.len() == 1 => {
                let e = n.extent(0);
                if e.ee_block.get() != 0 || e.len().0 != 1 {
                    return false;
                }
                e.start()
            }
            // Deeper trees are walked by the block check; only the target's length is left.
            Ok(n) if n.depth() > 0 => return true,
            _ => return false,
        }
    } else {
        if iblock[4..].iter().any(|&b| b != 0) {
            return false;
        }
        u64::from(u32::from_le_bytes([
            iblock[0], iblock[1], iblock[2], iblock[3],
        ]))
    };
    if blk < fs.geo.first_data_block || blk >= fs.geo.blocks_count {
        return false;
    }
    let Some(buf) = fs.read_block(blk) else {
        return false;
    };
    let len = target_len(&buf, fl);
    len < bs && len == size
}

/// Length of a symlink target stored in `buf`: up to its terminating zero, or, encrypted, the
/// ciphertext's little-endian length prefix plus the prefix itself.
fn target_len(buf: &[u8], flags: u32) -> u64 {
    if flags & iflags::ENCRYPT != 0 {
        return match buf {
            [a, b, ..] => u64::from(u16::from_le_bytes([*a, *b])) + 2,
            _ => u64::MAX,
        };
    }
    buf.iter().position(|&c| c == 0).unwrap_or(buf.len()) as u64
}

fn check_extra_isize(scan: &Scan, ic: &mut InodeCheck, out: &mut GroupOut) {
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

/// What the mapping walk of one inode found.
#[derive(Default)]
struct BlockWalk {
    /// Blocks counted toward `i_blocks` (data, mapping metadata, xattr block).
    num_blocks: u64,
    /// Highest logical block mapped, if any.
    last_block: Option<u64>,
    /// Highest logical block mapped by an initialised extent.
    last_init_block: Option<u64>,
    dir_blocks: Vec<DirBlock>,
    illegal: u32,
    fragmented: bool,
    prev_pblk: Option<u64>,
    /// Stop walking: more blocks than the file system has, i.e. a cyclic or garbage map.
    exhausted: bool,
    /// Inside an extent subtree, or the pointers of an indirect block, that lie in critical
    /// metadata: bad mappings are passed over without a report.
    quiet: bool,
    last_cluster: Option<u64>,
}

impl BlockWalk {
    /// Count `n` blocks from `pblk` toward `i_blocks`, which is kept in clusters: a cluster is
    /// charged once however many of its blocks are mapped consecutively.
    fn count(&mut self, pblk: u64, n: u64, ratio: u64) {
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
    fn note_data(&mut self, lblk: u64, pblk: u64, is_dir: bool, ino: u32) {
        // e2fsck leaves the resize inode out: its blocks are backups spread over groups.
        if ino != ffsck_format::ino::RESIZE {
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
    fn claim(&self, out: &mut GroupOut, start: u64, len: u64) {
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
fn check_blocks(scan: &Scan, ic: &mut InodeCheck, out: &mut GroupOut, ft: FileType) -> BlockWalk {
    let fs = scan.fs;
    let geo = &fs.geo;
    let inode = ic.inode;
    let ino = ic.ino;
    let fl = inode.flags();
    let is_dir = ft == FileType::Directory;
    let mut w = BlockWalk::default();

    // Extended attribute block.
    let acl = inode.file_acl();
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
    if inline || no_map {
        // Inline data, fast symlink targets and device numbers live in the inode: nothing to
        // map (only the xattr block above counts).
    } else if (fl & iflags::EXTENTS != 0 || flag_set) && scan.extent_fs {
        let root = inode.block_bytes();
        match Node::parse(&root) {
            Ok(node) => {
                let depth = node.depth();
                out.counts.extent_depth_hist[usize::from(depth.min(5))] += 1;
                let useful = ffsck_format::extent::max_useful_depth(geo.block_size);
                if depth > useful {
                    let ctx = ProblemCtx {
                        ino,
                        num: u64::from(depth),
                        num2: u64::from(useful),
                        ..Default::default()
                    };
                    out.findings
                        .report(scan.policy, P::P1_EXTENT_BAD_MAX_DEPTH, ctx);
                }
                walk_extent_node(
                    scan,
                    ic,
                    out,
                    &mut w,
                    &node,
                    depth,
                    0,
                    u64::from(u32::MAX) + 1,
                    is_dir,
                    0,
                );
            }
            Err(_) => {
                if is_dir || ft == FileType::Regular || ft == FileType::Symlink {
                    report(
                        scan,
                        out,
                        ic,
                        P::P1_MISSING_EXTENT_HEADER,
                        ProblemCtx::ino(ino),
                    );
                }
            }
        }
    } else if ino != ffsck_format::ino::RESIZE || fs.sb.compat().has(Compat::RESIZE_INODE) {
        walk_block_map(scan, ic, out, &mut w, is_dir);
    }
    if w.fragmented {
        out.counts.fragmented += 1;
        out.counts.fragmented_dirs += u64::from(is_dir);
    }
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
    check_sizes(scan, ic, out, &w, ft, inline || no_map);
    charge_quota(scan, ic, out, w.num_blocks);
    w
}

/// Report an illegal block in a block map, with e2fsck's latch and every-12th suppression.
fn illegal_block(
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
    if w.illegal == 0 {
        report(
            scan,
            out,
            ic,
            P::P1_INODE_BLOCK_LATCH,
            ProblemCtx::ino(ic.ino),
        );
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
    report(
        scan,
        out,
        ic,
        P::P1_ILLEGAL_BLOCK_NUM,
        ProblemCtx {
            ino: ic.ino,
            blk,
            num: lblk as u64,
            ..Default::default()
        },
    );
}

fn walk_block_map(
    scan: &Scan,
    ic: &mut InodeCheck,
    out: &mut GroupOut,
    w: &mut BlockWalk,
    is_dir: bool,
) {
    let geo = &scan.fs.geo;
    let ptrs: [u64; 15] = std::array::from_fn(|i| u64::from(ic.inode.i_block[i].get()));
    let per = u64::from(geo.block_size / 4);
    for (i, &b) in ptrs[..12].iter().enumerate() {
        if b != 0 {
            map_data_block(scan, ic, out, w, b, i as u64, is_dir);
        }
    }
    let mut base = 12u64;
    for (level, &b) in ptrs[12..15].iter().enumerate() {
        let span = per.pow(level as u32 + 1);
        if b != 0 {
            walk_indirect(scan, ic, out, w, b, level as u32 + 1, base, is_dir);
        }
        base += span;
    }
}

fn map_data_block(
    scan: &Scan,
    ic: &mut InodeCheck,
    out: &mut GroupOut,
    w: &mut BlockWalk,
    b: u64,
    lblk: u64,
    is_dir: bool,
) {
    let geo = &scan.fs.geo;
    if w.exhausted {
        return;
    }
    if b < geo.first_data_block || b >= geo.blocks_count {
        illegal_block(scan, ic, out, w, b, lblk as i64);
        return;
    }
    if is_dir && !geo.incompat.has(Incompat::LARGEDIR) && lblk > dir_block_limit(geo) {
        if w.quiet {
            return;
        }
        report(
            scan,
            out,
            ic,
            P::P1_TOOBIG_DIR,
            ProblemCtx {
                ino: ic.ino,
                blk: b,
                num: lblk,
                ..Default::default()
            },
        );
        return;
    }
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
                return;
            }
        }
    }
    w.count(b, 1, u64::from(geo.cluster_ratio));
    if w.num_blocks > geo.blocks_count {
        w.exhausted = true;
        return;
    }
    if ic.ino != ffsck_format::ino::RESIZE {
        scan.claim(out, b, 1);
    }
    w.note_data(lblk, b, is_dir, ic.ino);
}

#[allow(clippy::too_many_arguments)]
fn walk_indirect(
    scan: &Scan,
    ic: &mut InodeCheck,
    out: &mut GroupOut,
    w: &mut BlockWalk,
    blk: u64,
    level: u32,
    base: u64,
    is_dir: bool,
) {
    let fs = scan.fs;
    let geo = &fs.geo;
    if w.exhausted {
        return;
    }
    if blk < geo.first_data_block || blk >= geo.blocks_count {
        illegal_block(scan, ic, out, w, blk, -(level as i64));
        return;
    }
    // In critical metadata, the pointers it holds are followed but a bad one is passed over
    // without a word: a fix would be written into the metadata. The next round checks the
    // copy pass 1D makes.
    let in_metadata = critical_collision(scan, out, ic, blk);
    w.count(blk, 1, u64::from(geo.cluster_ratio));
    // The resize inode's map points at reserved GDT blocks and their backups, which are
    // already claimed as metadata: only its double-indirect block itself is claimed here, but
    // every block still counts toward its i_blocks.
    if ic.ino != ffsck_format::ino::RESIZE || level == 2 {
        scan.claim(out, blk, 1);
    }
    // An indirect block comes before the blocks it maps: a file laid out as data, indirect
    // block, data… is contiguous.
    if ic.ino != ffsck_format::ino::RESIZE {
        if w.prev_pblk.is_some_and(|p| p + 1 != blk) {
            w.fragmented = true;
        }
        w.prev_pblk = Some(blk);
    }
    let Some(buf) = fs.read_block(blk) else {
        return;
    };
    let per = u64::from(geo.block_size / 4);
    let span = per.pow(level - 1);
    let outer_quiet = std::mem::replace(&mut w.quiet, in_metadata);
    for i in 0..per {
        let p = u64::from(u32::from_le_bytes([
            buf[(i * 4) as usize],
            buf[(i * 4 + 1) as usize],
            buf[(i * 4 + 2) as usize],
            buf[(i * 4 + 3) as usize],
        ]));
        if p == 0 {
            continue;
        }
        let lblk = base + i * span;
        if level == 1 {
            map_data_block(scan, ic, out, w, p, lblk, is_dir);
        } else {
            walk_indirect(scan, ic, out, w, p, level - 1, lblk, is_dir);
        }
        if w.exhausted {
            break;
        }
    }
    w.quiet = outer_quiet;
}

/// A mapping block (extent node or indirect block) of `ic`'s inode at `blk` lies in the
/// superblocks, descriptors, bitmaps or inode tables. Reported; the caller then makes no repair
/// that would write to it: pass 1D copies it out of the way first (it is multiply-claimed with
/// the metadata), and the next round checks the copy. (The resize inode's map points into the
/// reserved descriptor blocks by design.)
fn critical_collision(scan: &Scan, out: &mut GroupOut, ic: &mut InodeCheck, blk: u64) -> bool {
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

/// `report`, unless the walk is inside a subtree in critical metadata (`quiet`): its problems
/// are found, and fixed, in the copy pass 1D makes. Returns whether the fix was agreed to.
fn flag(
    scan: &Scan,
    out: &mut GroupOut,
    ic: &mut InodeCheck,
    quiet: bool,
    p: P,
    ctx: ProblemCtx,
) -> bool {
    !quiet && report(scan, out, ic, p, ctx)
}

/// An extent index entry points at a block that is not a valid extent node.
fn bad_extent_node(scan: &Scan, out: &mut GroupOut, ic: &mut InodeCheck, child: u64, start: u64) {
    let ctx = ProblemCtx {
        ino: ic.ino,
        blk: child,
        num: start,
        ..Default::default()
    };
    report(scan, out, ic, P::P1_EXTENT_HEADER_INVALID, ctx);
}

/// Walk one extent node. `lo..hi` is the logical range the parent index allows.
#[allow(clippy::too_many_arguments)]
fn walk_extent_node(
    scan: &Scan,
    ic: &mut InodeCheck,
    out: &mut GroupOut,
    w: &mut BlockWalk,
    node: &Node,
    depth: u16,
    lo: u64,
    hi: u64,
    is_dir: bool,
    level: u32,
) {
    let fs = scan.fs;
    let geo = &fs.geo;
    let ino = ic.ino;
    let mut next_start = lo;
    for i in 0..node.len() {
        if w.exhausted {
            return;
        }
        if node.is_leaf() {
            let e = node.extent(i);
            let mut lblk = u64::from(e.ee_block.get());
            let (len, unwritten) = e.len();
            let len = u64::from(len);
            let pblk = e.start();
            let ctx = ProblemCtx {
                ino,
                blk: pblk,
                num: lblk,
                num2: len,
                ..Default::default()
            };
            let problem = if pblk == 0 || pblk < geo.first_data_block || pblk >= geo.blocks_count {
                Some(P::P1_EXTENT_BAD_START_BLK)
            } else if lblk < next_start {
                Some(P::P1_OUT_OF_ORDER_EXTENTS)
            } else if lblk + len > hi && level > 0 {
                Some(P::P1_EXTENT_END_OUT_OF_BOUNDS)
            } else if len == 0 {
                Some(P::P1_EXTENT_LENGTH_ZERO)
            } else if pblk + len > geo.blocks_count {
                Some(P::P1_EXTENT_ENDS_BEYOND)
            } else if is_dir
                && !geo.incompat.has(Incompat::LARGEDIR)
                && lblk + len > dir_block_limit(geo)
            {
                Some(P::P1_TOOBIG_DIR)
            } else {
                None
            };
            if problem.is_none() && is_dir && unwritten {
                // A directory block is never unwritten: its contents would read as zeroes.
                flag(scan, out, ic, w.quiet, P::P1_UNINIT_DBLOCK, ctx.clone());
            }
            if let Some(p) = problem {
                // Fixed, the extent is gone: none of its blocks belong to the inode. Unfixed,
                // e2fsck still accounts the part of the extent that is in range.
                let dropped = flag(scan, out, ic, w.quiet, p, ctx);
                if dropped || p == P::P1_EXTENT_BAD_START_BLK || p == P::P1_EXTENT_LENGTH_ZERO {
                    continue;
                }
            }
            // A gap before this extent: e2fsck offers to move the extent down to close it.
            let next_lblk = w.last_block.map_or(0, |l| l + 1);
            let ratio = u64::from(geo.cluster_ratio);
            let new_lblk = if ratio > 1 {
                (next_lblk.div_ceil(ratio) * ratio) | (pblk % ratio)
            } else {
                next_lblk
            };
            // (With bigalloc the extent may already be as low as its cluster allows.)
            if is_dir && next_lblk < lblk && new_lblk != lblk {
                let moved = flag(
                    scan,
                    out,
                    ic,
                    w.quiet,
                    P::P1_COLLAPSE_DBLOCK,
                    ProblemCtx {
                        ino,
                        blk: lblk,
                        blk2: new_lblk,
                        ..Default::default()
                    },
                );
                // Agreed to: the rest of the check sees the extent where the repair puts it.
                if moved {
                    lblk = new_lblk;
                }
            }
            let usable = len.min(geo.blocks_count.saturating_sub(pblk));
            w.count(pblk, usable, u64::from(geo.cluster_ratio));
            if w.num_blocks > geo.blocks_count {
                w.exhausted = true;
                return;
            }
            scan.claim(out, pblk, usable);
            if w.prev_pblk.is_some_and(|p| p + 1 != pblk) {
                w.fragmented = true;
            }
            if usable > 0 {
                w.prev_pblk = Some(pblk + usable - 1);
                let last = lblk + usable - 1;
                w.last_block = Some(w.last_block.map_or(last, |l| l.max(last)));
                if !unwritten {
                    w.last_init_block = Some(w.last_init_block.map_or(last, |l| l.max(last)));
                }
                if is_dir {
                    for j in 0..usable {
                        w.dir_blocks.push(DirBlock {
                            pblk: pblk + j,
                            ino,
                            lblk: (lblk + j).min(u64::from(u32::MAX)) as u32,
                        });
                    }
                }
            }
            next_start = lblk + len;
        } else {
            let idx = node.index(i);
            let child = idx.leaf();
            let start = u64::from(idx.ei_block.get());
            let end = if i + 1 < node.len() {
                u64::from(node.index(i + 1).ei_block.get())
            } else {
                hi
            };
            if child < geo.first_data_block || child >= geo.blocks_count {
                flag(
                    scan,
                    out,
                    ic,
                    w.quiet,
                    P::P1_EXTENT_BAD_START_BLK,
                    ProblemCtx {
                        ino,
                        blk: child,
                        num: start,
                        num2: 1,
                        ..Default::default()
                    },
                );
                continue;
            }
            if start < next_start {
                flag(
                    scan,
                    out,
                    ic,
                    w.quiet,
                    P::P1_OUT_OF_ORDER_EXTENTS,
                    ProblemCtx {
                        ino,
                        blk: child,
                        num: start,
                        num2: 1,
                        ..Default::default()
                    },
                );
            }
            // A child in critical metadata is walked without repairs (see
            // `critical_collision`); a child that is not even a node is only claimed, so pass
            // 1D moves it and the next round finds its header bad in the copy.
            let outer_quiet = w.quiet;
            w.quiet |= critical_collision(scan, out, ic, child);
            // (An unreadable block parses as no node.)
            let buf = fs.read_block(child).unwrap_or_default();
            match Node::parse(&buf) {
                Ok(c) if depth > 0 && c.depth() == depth - 1 => {
                    if fs.has_metadata_csum() {
                        let off = extent::tail_offset(c.header.eh_max.get());
                        if off + 4 <= buf.len() {
                            let seed = ffsck_format::csum::inode_seed(
                                fs.csum_seed,
                                ino,
                                ic.inode.i_generation.get(),
                            );
                            let want = ffsck_format::csum::ext4_crc32c(seed, &buf[..off]);
                            let have = u32::from_le_bytes([
                                buf[off],
                                buf[off + 1],
                                buf[off + 2],
                                buf[off + 3],
                            ]);
                            if want != have {
                                flag(
                                    scan,
                                    out,
                                    ic,
                                    w.quiet,
                                    P::P1_EXTENT_ONLY_CSUM_INVALID,
                                    ProblemCtx {
                                        ino,
                                        blk: child,
                                        ..Default::default()
                                    },
                                );
                            }
                        }
                    }
                    if !c.is_empty() {
                        let first = if c.is_leaf() {
                            u64::from(c.extent(0).ee_block.get())
                        } else {
                            u64::from(c.index(0).ei_block.get())
                        };
                        if first != start {
                            flag(
                                scan,
                                out,
                                ic,
                                w.quiet,
                                P::P1_EXTENT_INDEX_START_INVALID,
                                ProblemCtx {
                                    ino,
                                    blk: start,
                                    blk2: first,
                                    num: u64::from(depth),
                                    ..Default::default()
                                },
                            );
                        }
                    }
                    w.count(child, 1, u64::from(geo.cluster_ratio));
                    scan.claim(out, child, 1);
                    walk_extent_node(
                        scan,
                        ic,
                        out,
                        w,
                        &c,
                        depth - 1,
                        start,
                        end,
                        is_dir,
                        level + 1,
                    );
                }
                _ if w.quiet => scan.claim(out, child, 1),
                _ => bad_extent_node(scan, out, ic, child, start),
            }
            w.quiet = outer_quiet;
            next_start = start.max(next_start);
        }
    }
}

fn check_sizes(
    scan: &Scan,
    ic: &mut InodeCheck,
    out: &mut GroupOut,
    w: &BlockWalk,
    ft: FileType,
    inline: bool,
) {
    let fs = scan.fs;
    let geo = &fs.geo;
    let inode = ic.inode;
    let ino = ic.ino;
    let bs = u64::from(geo.block_size);
    let size = inode.size();
    let is_dir = ft == FileType::Directory;
    if ino == ino::BAD {
        // The bad-blocks list is not a file: e2fsck checks neither its size nor its i_blocks.
        return;
    }

    // An inline directory's size is that of its data: i_block and the value of `system.data`.
    if is_dir && inode.flags() & iflags::INLINE_DATA != 0 {
        if let Some(want) = inline_data_size(ic.raw).filter(|&w| w != size) {
            let ctx = ProblemCtx {
                ino,
                num: size,
                num2: want,
                ..Default::default()
            };
            report(scan, out, ic, P::P1_BAD_I_SIZE, ctx);
        }
    }
    if is_dir && w.num_blocks == 0 && !inline && w.last_block.is_none() {
        report(scan, out, ic, P::P1_ZERO_LENGTH_DIR, ProblemCtx::ino(ino));
        return;
    }
    // A symlink's i_size is judged with its target, not here.
    if !inline && ft != FileType::Symlink {
        let bad = if is_dir {
            let nblock = size / bs;
            let want = w.last_block.map_or(0, |l| l + 1);
            size & (bs - 1) != 0
                || nblock > want
                || (nblock < want && want - nblock > u64::from(fs.sb.s_prealloc_dir_blocks))
        } else {
            let extents = inode.flags() & iflags::EXTENTS != 0 && scan.extent_fs;
            // Verity files keep their Merkle tree in blocks past i_size.
            let too_small = inode.flags() & iflags::VERITY == 0
                && w.last_init_block
                    .or(if extents { None } else { w.last_block })
                    .is_some_and(|l| size < l * bs);
            let max = if extents {
                (1u64 << (32 + 10 + geo.log_block_size)) - 1
            } else {
                // What direct, indirect, double and triple indirect blocks can address.
                let per = bs / 4;
                (12 + per + per * per + per * per * per).saturating_mul(bs)
            };
            too_small || size > max
        };
        if bad {
            let want = w.last_block.map_or(0, |l| (l + 1) * bs);
            report(
                scan,
                out,
                ic,
                P::P1_BAD_I_SIZE,
                ProblemCtx {
                    ino,
                    num: size,
                    num2: want,
                    ..Default::default()
                },
            );
        }
    }
    if !is_dir && size >= 0x8000_0000 {
        out.counts.large_files += 1;
    }
    let huge = geo.ro_compat.has(RoCompat::HUGE_FILE);
    let mut want = w.num_blocks * u64::from(geo.cluster_ratio);
    // (num_blocks is in clusters; i_blocks counts the blocks of those clusters)
    if !(huge && inode.flags() & iflags::HUGE_FILE != 0) {
        want *= bs / 512;
    }
    let have = inode.blocks_raw(huge);
    if have != want {
        report(
            scan,
            out,
            ic,
            P::P1_BAD_I_BLOCKS,
            ProblemCtx {
                ino,
                num: have,
                num2: want,
                ..Default::default()
            },
        );
    }
}

/// The size of an inode's inline data: the 60 bytes of `i_block` and the value of
/// `system.data` in the inode body (none there: nothing more). None when the body's
/// attributes cannot be read.
fn inline_data_size(raw: &[u8]) -> Option<u64> {
    const IN_IBLOCK: u64 = 60;
    let inode = RawInode::parse(raw);
    let start = 128 + usize::from(inode.extra_isize());
    let magic = raw
        .get(start..start + 4)
        .map(|m| u32::from_le_bytes([m[0], m[1], m[2], m[3]]));
    if magic != Some(ffsck_format::xattr::IBODY_MAGIC) {
        return Some(IN_IBLOCK);
    }
    ffsck_format::xattr::parse_entries(&raw[start..], 4, 4).ok()?;
    let extra = crate::pass2::inline_xattr_range(raw).map_or(0, |r| r.len() as u64);
    Some(IN_IBLOCK + extra)
}

/// Validate the htree root of a directory (block 0) as pass 1 does in e2fsck.
fn htree_root_ok(scan: &Scan, ic: &mut InodeCheck, out: &mut GroupOut, w: &BlockWalk) -> bool {
    let fs = scan.fs;
    let ino = ic.ino;
    let Some(b0) = w.dir_blocks.iter().find(|d| d.lblk == 0) else {
        report(scan, out, ic, P::P1_HTREE_BADROOT, ProblemCtx::ino(ino));
        return false;
    };
    let Some(buf) = fs.read_block(b0.pblk) else {
        report(scan, out, ic, P::P1_HTREE_BADROOT, ProblemCtx::ino(ino));
        return false;
    };
    let Ok((info, _)) = DxRootInfo::read_from_prefix(&buf[DX_ROOT_INFO_OFFSET..]) else {
        return false;
    };
    let ctx = ProblemCtx::ino(ino);
    if info.reserved_zero.get() != 0 || info.info_length != 8 {
        report(scan, out, ic, P::P1_HTREE_BADROOT, ctx);
        return false;
    }
    if info.hash_version > ffsck_format::dir::hash::SIPHASH {
        report(
            scan,
            out,
            ic,
            P::P1_HTREE_HASHV,
            ProblemCtx {
                ino,
                num: u64::from(info.hash_version),
                ..Default::default()
            },
        );
        return false;
    }
    if info.unused_flags & 1 != 0 {
        report(scan, out, ic, P::P1_HTREE_INCOMPAT, ctx);
        return false;
    }
    let max_levels = if fs.geo.incompat.has(Incompat::LARGEDIR) {
        3
    } else {
        2
    };
    if info.indirect_levels >= max_levels {
        report(
            scan,
            out,
            ic,
            P::P1_HTREE_DEPTH,
            ProblemCtx {
                ino,
                num: u64::from(info.indirect_levels),
                ..Default::default()
            },
        );
        return false;
    }
    true
}

/// The unmapped logical blocks of a directory below its highest mapped one, as `pblk == 0`
/// entries for pass 2 to report. A block-mapped directory always has a block 0 (e2fsck
/// visits it even when unmapped); an extent-mapped one only fills gaps between extents.
fn dir_holes(
    blocks: &[DirBlock],
    ino: u32,
    block_mapped: bool,
    geo: &ffsck_format::Geometry,
) -> Vec<DirBlock> {
    let mut lblks: Vec<u32> = blocks.iter().map(|d| d.lblk).collect();
    lblks.sort_unstable();
    lblks.dedup();
    // Bound the list by the largest directory the file system allows.
    let limit = if geo.incompat.has(Incompat::LARGEDIR) {
        geo.blocks_count
    } else {
        dir_block_limit(geo) + 1
    };
    let limit = u32::try_from(limit).unwrap_or(u32::MAX);
    if lblks.last().is_some_and(|&l| l >= limit) {
        // A block past the limit was reported as too big in pass 1; e2fsck lists no holes
        // for such a directory (and filling them would be unbounded work).
        return Vec::new();
    }
    let mut holes = Vec::new();
    let mut next = 0u32;
    for &l in &lblks {
        for h in next..l.min(limit) {
            holes.push(DirBlock {
                pblk: 0,
                ino,
                lblk: h,
            });
        }
        next = next.max(l.saturating_add(1));
    }
    if lblks.is_empty() && block_mapped {
        holes.push(DirBlock {
            pblk: 0,
            ino,
            lblk: 0,
        });
    }
    holes
}

/// Largest logical block a directory may map without `large_dir` (2 GiB of directory).
fn dir_block_limit(geo: &ffsck_format::Geometry) -> u64 {
    1u64 << (21 - geo.log_block_size)
}

#[cfg(test)]
mod tests {
    use super::DirIndex;

    #[test]
    fn dir_index_finds_what_halving_the_list_finds() {
        let inodes_count = 5000u32;
        let mut x = 0x9E37_79B9u32;
        let mut inos: Vec<u32> = (0..700)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 17;
                x ^= x << 5;
                x % (inodes_count + 40)
            })
            .chain([1, 2, 63, 64, 65, 127, 128, inodes_count])
            .collect();
        inos.sort_unstable();
        inos.dedup();
        // Numbers past the inode count (or 0) cannot be directories: never found.
        let listed: Vec<u32> = inos
            .iter()
            .copied()
            .filter(|&i| i != 0 && i <= inodes_count)
            .collect();
        let index = DirIndex::new(&inos, inodes_count);
        for ino in 0..=inodes_count + 100 {
            assert_eq!(
                index.position(ino),
                listed.binary_search(&ino).ok(),
                "inode {ino}"
            );
        }
        assert_eq!(index.position(u32::MAX), None);
        assert_eq!(DirIndex::default().position(2), None);
        // It lists them too, in order.
        assert_eq!(index.iter().collect::<Vec<_>>(), listed);
        assert_eq!(index.len(), listed.len());
    }
}
