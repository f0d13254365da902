//! Runs the passes in order and turns their findings into an outcome with an exit code.

use crate::pass0::{self, OpenFailure, SuperHint};
use crate::report::{exit, Finding, Findings, Mode, Policy, Reporter};
use crate::{pass1, pass1b, pass2, pass3, pass4, pass5};
use ffsck_io::overlay::Overlay;
use ffsck_io::Device;
use std::sync::Arc;

#[derive(Clone)]
pub struct CheckOptions {
    pub policy: Policy,
    pub superblock: SuperHint,
    /// Worker threads (0 = one per core).
    pub threads: usize,
    /// Shared progress counters the caller may poll from another thread.
    pub progress: Arc<Progress>,
    /// `-D`: once the repair is done, rebuild every multi-block directory (indexed where the
    /// file system has `dir_index`), as e2fsck's pass 3A does for all directories.
    pub optimize_dirs: bool,
    /// Scheduling and memory settings (none of them changes the findings).
    pub tuning: Tuning,
    /// The external journal device (`-j`). A repair passes an overlay over it, so the
    /// journal's reset after replay is staged there and written only after the file system's
    /// changes are committed.
    pub journal_dev: Option<Arc<dyn Device>>,
    /// The time the check runs at, in seconds since the epoch (set by the caller's clock; 0
    /// when there is none). A repair stamps it as the last-check and last-write times.
    pub now: i64,
    /// `-l`, `-L`, `-c`: a repair first rewrites the bad-blocks inode from this list.
    pub bad_blocks: Option<crate::repair::bblist::BadBlockList>,
    /// The file system on the device is mounted (the caller knows; the check does not look).
    /// Its journal is the kernel's, which jbd2 writes around the device's page cache: a read
    /// of the device may return log blocks older than those on disk, no log to replay or
    /// judge. A read-only check then leaves a journal that needs recovery alone, as `e2fsck
    /// -n` does (and says so), and checks the file system as the device shows it. A repair
    /// (of a read-only mount) still recovers it first.
    pub mounted: bool,
}

impl Default for CheckOptions {
    /// A read-only check (`-n`) with default superblock, threads and no external journal.
    fn default() -> Self {
        CheckOptions {
            policy: Policy::No,
            superblock: SuperHint::default(),
            threads: 0,
            progress: Arc::default(),
            journal_dev: None,
            optimize_dirs: false,
            tuning: Tuning::default(),
            now: 0,
            bad_blocks: None,
            mounted: false,
        }
    }
}

impl CheckOptions {
    /// `now` as the check stamps and compares it: seconds since the epoch, 0 for no clock
    /// (as is a clock set before the epoch).
    pub fn clock(&self) -> crate::Clock {
        crate::Clock::at(self.now)
    }
}

impl std::fmt::Debug for CheckOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CheckOptions")
            .field("policy", &self.policy)
            .field("superblock", &self.superblock)
            .field("threads", &self.threads)
            .field("journal_dev", &self.journal_dev.as_ref().map(|d| d.size()))
            .field("optimize_dirs", &self.optimize_dirs)
            .field("tuning", &self.tuning)
            .field("now", &self.now)
            .field("mounted", &self.mounted)
            .finish()
    }
}

/// Why a check under `--max-memory` stopped: its scratch file failed it.
const SCRATCH_FAILED: &str =
    "The scratch file of --max-memory could not be written or read back: check aborted.";

/// How the engine schedules the passes and bounds its memory. The findings and their order
/// are the same whatever these say.
#[derive(Clone, Debug)]
pub struct Tuning {
    /// Check directory blocks while pass 1 still scans later groups (pFSCK-style pipeline).
    pub pipeline: bool,
    /// Bytes of early pass-2 outputs a pipelined check holds before deferring the rest.
    pub pipeline_budget: usize,
    /// `--max-memory`: past a share of this, tables that grow with the file system spill to
    /// a scratch file (slower, same findings). Turns the pipeline off.
    pub max_memory: Option<u64>,
    /// Where scratch files go (default `$TMPDIR`).
    pub scratch_dir: Option<std::path::PathBuf>,
    /// How metadata is read (`--io`, resolved by the caller for its device): `Sequential`
    /// reads it through one ordered stream (a hard disk), `Parallel` lets every worker read
    /// its own (SSD, NVMe, page cache).
    pub io: ffsck_io::device_kind::IoMode,
}

impl Default for Tuning {
    fn default() -> Self {
        Tuning {
            pipeline: false,
            pipeline_budget: 32 << 20,
            max_memory: None,
            scratch_dir: None,
            io: ffsck_io::device_kind::IoMode::Parallel,
        }
    }
}

pub use crate::progress::Progress;

/// Summary figures for the final line (`files`, `blocks`, fragmentation).
#[derive(Clone, Debug, Default, serde::Serialize)]
pub struct Summary {
    pub label: String,
    pub inodes_used: u64,
    pub inodes_count: u64,
    pub blocks_used: u64,
    pub blocks_count: u64,
    pub non_contiguous: u64,
    /// Directory entries checked.
    pub entries: u64,
    /// Per-type counts from pass 1.
    pub counts: crate::facts::Counts,
}

/// What passes 1-4 found in use, for a repair to rebuild bitmaps and counts from.
pub struct AllocFacts {
    /// Blocks in use (one bit per block, metadata included).
    pub block_used: crate::bitmap::Bitmap,
    /// Inodes in use (index `ino - 1`).
    pub inode_used: crate::bitmap::Bitmap,
    /// Directories per group.
    pub dirs_per_group: Vec<u32>,
    /// Every directory block (owner, logical and physical block), for repairs that edit
    /// directories. (Empty after a read-only check that spilled it under `--max-memory`.)
    pub dir_blocks: Vec<crate::facts::DirBlock>,
    /// Bitmaps given a new block at the end of pass 1.
    pub relocated: Vec<crate::relocate::Move>,
    /// Usage per quota id, for rewriting the quota files.
    pub quota: crate::quota::Usage,
}

impl AllocFacts {
    /// Whether blocks may be taken from group `g`: its block bitmap is sound, or it is given
    /// a new one this round (what the check found in use is what the new one will hold; the
    /// new block itself is marked in `block_used`).
    pub fn block_bitmap_usable(&self, p0: &crate::pass0::Pass0Facts, g: u32) -> bool {
        p0.groups.get(g as usize).is_some_and(|s| s.block_bitmap_ok)
            || self.relocates(g, crate::relocate::Table::BlockBitmap)
    }

    /// Whether inodes may be taken from group `g`: as [`AllocFacts::block_bitmap_usable`],
    /// for its inode bitmap.
    pub fn inode_bitmap_usable(&self, p0: &crate::pass0::Pass0Facts, g: u32) -> bool {
        p0.groups.get(g as usize).is_some_and(|s| s.inode_bitmap_ok)
            || self.relocates(g, crate::relocate::Table::InodeBitmap)
    }

    /// Whether group `g`'s `table` gets a new place this round.
    fn relocates(&self, g: u32, table: crate::relocate::Table) -> bool {
        self.relocated
            .iter()
            .any(|m| m.group == g && m.which == table)
    }
}

pub struct Outcome {
    pub findings: Vec<Finding>,
    pub exit_code: i32,
    pub summary: Option<Summary>,
    /// A message explaining an aborted check.
    pub fatal: Option<String>,
    /// Allocation facts of a check that ran to the end.
    pub alloc: Option<AllocFacts>,
    /// A repair found the state not valid and marked it valid. e2fsck counts that in the exit
    /// code (1) but does not say the file system was modified.
    pub marked_valid: bool,
}

fn flush(rep: &mut dyn Reporter, f: &mut Findings, all: &mut Vec<Finding>) {
    for x in f.0.drain(..) {
        rep.finding(&x);
        all.push(x);
    }
}

/// Check the file system on `dev`. With a fixing policy, `dev` must be the overlay of a
/// repair (`repair::repair`): fixes and journal replay are staged there, never written here.
pub fn check(dev: Arc<dyn Device>, opts: &CheckOptions, rep: &mut dyn Reporter) -> Outcome {
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(opts.threads)
        .build();
    match pool {
        Ok(p) => p.install(|| check_inner(dev, opts, rep)),
        Err(_) => check_inner(dev, opts, rep),
    }
}

fn check_inner(dev: Arc<dyn Device>, opts: &CheckOptions, rep: &mut dyn Reporter) -> Outcome {
    let policy = opts.policy;
    let mut all = Vec::new();
    let mut f = Findings::default();
    rep.pass_start(0);
    // A journal that needs recovery is replayed first, as e2fsck does, and the check runs on
    // the recovered file system. The replay goes to an overlay: nothing is written here (under
    // -n never; a repair commits the overlay's extents through the redo log).
    let p0 = pass0::run_with(
        dev.clone(),
        opts.superblock,
        policy,
        opts.journal_dev.as_ref(),
        opts.clock(),
        &mut f,
    )
    .and_then(|p| recover_first(&dev, p, opts, &mut f));
    let p0 = match p0 {
        Ok(p) => p,
        Err(e) => {
            let (msg, code) = open_failed(e, policy, &mut f);
            flush(rep, &mut f, &mut all);
            return Outcome {
                findings: all,
                exit_code: code,
                summary: None,
                alloc: None,
                fatal: Some(msg),
                marked_valid: false,
            };
        }
    };
    flush(rep, &mut f, &mut all);

    rep.pass_start(1);
    let prog = &opts.progress;
    // Pass 1 sets its own maximum, which depends on how it reads (`pass1::schedule`).
    let tuning = &opts.tuning;
    let limits = memory_limits(tuning);
    let mut early = (tuning.pipeline && tuning.max_memory.is_none())
        .then(|| pass2::Early::new(&p0.fs, policy, tuning.pipeline_budget));
    let stage = early.as_mut().map(|e| e as &mut dyn crate::facts::Stage);
    let mut p1 = pass1::run_with(&p0, policy, &mut f, prog, stage, &limits, tuning.io);
    let relocated = crate::relocate::plan(&p0, &mut p1.block_used, policy, &mut f);
    let short = pass0::judge_short_device(&p0, &p1.block_used, policy, &mut f);
    flush(rep, &mut f, &mut all);
    if short == pass0::ShortDevice::Abort {
        return aborted(all, policy, &too_small(&p0.fs.geo, p0.device_blocks));
    }
    if !p1.dup_blocks.is_empty() {
        pass1b::run(&p0.fs, &p1, policy, &mut f);
        flush(rep, &mut f, &mut all);
    }
    if p1.rebuilds_extents {
        let header = crate::problem::Problem::P1E_PASS_HEADER;
        f.report(policy, header, crate::ProblemCtx::default());
        flush(rep, &mut f, &mut all);
    }
    rep.pass_start(2);
    prog.start(2, p1.dir_block_count());
    let p2 = pass2::run_with(
        &p0,
        &p1,
        policy,
        &mut f,
        &|n| prog.advance(n),
        early,
        &limits,
    );
    pass2::large_files(&p0.fs, p1.counts.large_files, policy, &mut f);
    crate::pathname::name_dirs(&p0.fs, &mut f.0);
    flush(rep, &mut f, &mut all);
    if p1.dir_spill.as_ref().is_some_and(|s| s.failed())
        || p1.dirs.spill_failed()
        || p2.dirs.spill_failed()
    {
        return aborted(all, policy, SCRATCH_FAILED);
    }
    if p2.aborted {
        return aborted(
            all,
            policy,
            "A corrupted directory block was left unsalvaged: check aborted.",
        );
    }
    rep.pass_start(3);
    // As e2fsck counts: pass 3 by directory, pass 4 by group, pass 5 by group twice (the
    // block bitmaps, then the inode bitmaps).
    prog.start(3, p2.dirs.len() as u64);
    let p3 = pass3::run(&p1, &p2, policy, &mut f, prog);
    crate::pathname::name_dirs(&p0.fs, &mut f.0);
    flush(rep, &mut f, &mut all);
    if p2.dirs.spill_failed() {
        return aborted(all, policy, SCRATCH_FAILED);
    }
    if !p3.root_ok {
        // A repair that recreates the root (`repair::root`) goes on from the next round's
        // check; passes 4 and 5 would count a tree without its root.
        let allocate = all
            .iter()
            .any(|x| x.fixed && x.problem == crate::problem::Problem::P3_NO_ROOT_INODE);
        if !allocate {
            return aborted(all, policy, "Cannot proceed without a root inode.");
        }
        let code = exit_code(&all, policy);
        let alloc = alloc_facts(&p0, &mut p1, policy, relocated);
        return Outcome {
            findings: all,
            exit_code: code,
            summary: None,
            fatal: None,
            alloc: Some(alloc),
            marked_valid: false,
        };
    }
    rep.pass_start(4);
    let groups = u64::from(p0.fs.geo.group_count);
    prog.start(4, groups);
    pass4::run(&p0.fs, &p1, &p2, policy, &mut f, prog);
    flush(rep, &mut f, &mut all);
    rep.pass_start(5);
    prog.start(5, 2 * groups);
    let p5 = pass5::run(&p0, &p1, policy, &mut f, prog);
    flush(rep, &mut f, &mut all);
    // After the passes, as e2fsck does: the orphan file, then the quota files.
    crate::orphan::check(&p0.fs, policy, &mut f);
    crate::quota::check(&p0.fs, &p1.quota, policy, &mut f);
    flush(rep, &mut f, &mut all);

    let geo = &p0.fs.geo;
    let c = p1.counts;
    let summary = Summary {
        label: p0.fs.sb.label(),
        inodes_used: u64::from(geo.inodes_count) - p5.free_inodes,
        inodes_count: u64::from(geo.inodes_count),
        blocks_used: geo.blocks_count - p5.free_blocks * u64::from(geo.cluster_ratio),
        blocks_count: geo.blocks_count,
        non_contiguous: c.fragmented,
        entries: p2.entries,
        counts: c,
    };
    let code = exit_code(&all, policy);
    let alloc = alloc_facts(&p0, &mut p1, policy, relocated);
    Outcome {
        findings: all,
        exit_code: code,
        summary: Some(summary),
        fatal: None,
        alloc: Some(alloc),
        marked_valid: false,
    }
}

/// The message and exit code of a check that could not open the file system (the finding,
/// if there is one, goes to `f`).
fn open_failed(e: OpenFailure, policy: Policy, f: &mut Findings) -> (String, i32) {
    match e {
        OpenFailure::Corrupt(why) => {
            f.report(
                policy,
                crate::Problem::P0_SB_CORRUPT,
                crate::ProblemCtx {
                    str: Some(why.clone()),
                    ..Default::default()
                },
            );
            (format!("The superblock could not be read or does not describe a valid ext2/ext3/ext4 file system ({why}). If the device is valid, try a backup superblock with -b."), exit::ERROR)
        }
        OpenFailure::Journal(why) | OpenFailure::Mmp(why) => (
            format!("Cannot proceed with file system check: {why}."),
            exit::ERROR | exit::UNCORRECTED,
        ),
        OpenFailure::Unsupported(feat) => (
            format!("The file system has unsupported features: {feat}. Upgrade ffsck."),
            exit::ERROR,
        ),
        OpenFailure::TooSmall {
            fs_blocks,
            dev_blocks,
        } => {
            f.report(
                policy,
                crate::Problem::P0_FS_SIZE_WRONG,
                crate::ProblemCtx {
                    blk: fs_blocks,
                    blk2: dev_blocks,
                    ..Default::default()
                },
            );
            (
                too_small_msg(fs_blocks, dev_blocks),
                exit::ERROR | exit::UNCORRECTED,
            )
        }
    }
}

fn too_small(geo: &ffsck_format::Geometry, dev_blocks: Option<u64>) -> String {
    too_small_msg(geo.blocks_count, dev_blocks.unwrap_or_default())
}

fn too_small_msg(fs_blocks: u64, dev_blocks: u64) -> String {
    format!("The file system size (according to the superblock) is {fs_blocks} blocks, but the device holds only {dev_blocks} blocks: the image is truncated or the superblock is corrupt.")
}

/// How `--max-memory` is shared between the tables that may spill.
fn memory_limits(tuning: &Tuning) -> crate::spill::Limits {
    crate::spill::Limits {
        // The directory-block list may take a quarter of the limit.
        dir_blocks_bytes: tuning
            .max_memory
            .map(|m| usize::try_from(m / 4).unwrap_or(usize::MAX)),
        // The directories' parent links (8 bytes each) an eighth, their generations (4
        // bytes each, with metadata checksums) a sixteenth.
        dir_links_bytes: tuning
            .max_memory
            .map(|m| usize::try_from(m / 8).unwrap_or(usize::MAX)),
        dir_generations_bytes: tuning
            .max_memory
            .map(|m| usize::try_from(m / 16).unwrap_or(usize::MAX)),
        scratch_dir: tuning.scratch_dir.clone(),
    }
}

/// The allocation facts a repair works from, taken out of pass 1's.
fn alloc_facts(
    p0: &crate::pass0::Pass0Facts,
    p1: &mut crate::facts::Pass1Facts,
    policy: Policy,
    relocated: Vec<crate::relocate::Move>,
) -> AllocFacts {
    let geo = &p0.fs.geo;
    // A repair edits directories by this list; a read-only check that spilled it does not
    // need it back in memory.
    let dir_blocks = match p1.dir_spill.take() {
        Some(s) if policy.mode != Mode::No => s.iter().collect(),
        _ => std::mem::take(&mut p1.dir_blocks),
    };
    let mut dirs_per_group = vec![0u32; geo.group_count as usize];
    for ino in p1.dirs.inos() {
        if let Some(n) = dirs_per_group.get_mut(geo.group_of_inode(ino) as usize) {
            *n += 1;
        }
    }
    AllocFacts {
        block_used: std::mem::replace(&mut p1.block_used, crate::bitmap::Bitmap::new(0)),
        inode_used: std::mem::replace(&mut p1.inode_used, crate::bitmap::Bitmap::new(0)),
        dirs_per_group,
        dir_blocks,
        relocated,
        quota: std::mem::take(&mut p1.quota),
    }
}

/// The outcome of a check that cannot go on past a pass.
fn aborted(findings: Vec<Finding>, policy: Policy, why: &str) -> Outcome {
    let code = exit_code(&findings, policy) | exit::ERROR;
    Outcome {
        findings,
        exit_code: code,
        summary: None,
        alloc: None,
        fatal: Some(why.into()),
        marked_valid: false,
    }
}

/// e2fsck's exit code from the answers: uncorrected errors → 4, fixes → 1.
///
/// e2fsck marks the file system valid again after its superblock, descriptor, orphan-list and
/// resize-inode checks, so a "no" to a pass-0 question does not by itself leave exit bit 4 set;
/// only later passes (and fatal aborts, handled by the caller) do. Superblock findings are the
/// exception: a superblock left wrong, or a check that had to read a backup superblock (the
/// note names its block), leaves the bit.
pub fn exit_code(findings: &[Finding], policy: Policy) -> i32 {
    let mut code = exit::OK;
    for f in findings {
        if policy.leaves_error(f) && f.problem.pass() != 0 {
            code |= exit::UNCORRECTED;
        }
        let flags = f.problem.info().flags;
        if flags & crate::problem::flag::SB_ERROR != 0
            && !f.fixed
            && (flags & crate::problem::flag::INFO == 0 || f.ctx.blk != 0)
        {
            code |= exit::UNCORRECTED;
        }
        if f.fixed {
            code |= exit::NONDESTRUCT;
        }
    }
    code
}

/// Replay the journal of a file system that needs recovery into an overlay over `dev`, and
/// open the file system again on the overlay (as e2fsck reopens it after recovery). Findings
/// of the first opening are dropped: e2fsck checks the superblock only after recovery.
fn recover_first(
    dev: &Arc<dyn Device>,
    p0: pass0::Pass0Facts,
    opts: &CheckOptions,
    f: &mut Findings,
) -> Result<pass0::Pass0Facts, OpenFailure> {
    let needs = p0.fs.sb.incompat().has(ffsck_format::Incompat::RECOVER) || p0.journal.run_anyway;
    let Some(journal) = p0.journal.journal.as_ref().filter(|_| needs) else {
        return Ok(p0);
    };
    if opts.mounted && opts.policy.mode == Mode::No {
        // The kernel's live log, read through a cache it writes around: not replayed, not
        // read at all.
        let skipped = crate::problem::Problem::P0_JOURNAL_RECOVERY_SKIPPED;
        f.report(opts.policy, skipped, crate::ProblemCtx::default());
        return Ok(p0);
    }
    let plan = crate::journal::recovery::plan(&p0.fs, journal);
    // A read-only check replays into its own overlay and drops it. A repair runs the check on
    // the repair's overlay (`repair::repair`), so the replay lands there and is committed with
    // the rest of the repair generation.
    let overlay: Arc<dyn Device> = if opts.policy.mode == Mode::No {
        Arc::new(Overlay::new(dev.clone()))
    } else {
        dev.clone()
    };
    for r in &plan.records {
        if overlay.write_at(&r.data, r.offset).is_err() {
            // The plan only names blocks inside the file system; an overlay that refuses one
            // means the device is shorter than pass 0 saw. Check the device as it stands.
            return Ok(p0);
        }
    }
    // The external journal's reset goes to its own overlay: a private one for a read-only
    // check, the caller's (`CheckOptions::journal_dev`, an overlay in a repair) otherwise.
    let jdev: Option<Arc<dyn Device>> = match (&opts.journal_dev, &journal.ext) {
        (Some(d), Some(_)) if opts.policy.mode == Mode::No => {
            Some(Arc::new(Overlay::new(d.clone())) as Arc<dyn Device>)
        }
        (d, _) => d.clone(),
    };
    if let Some(d) = jdev.as_ref().filter(|_| journal.ext.is_some()) {
        for r in &plan.journal_records {
            if d.write_at(&r.data, r.offset).is_err() {
                return Ok(p0);
            }
        }
    }
    // (What led to running a journal without `needs_recovery` stays reported.)
    f.0.retain(|x| {
        matches!(
            x.problem,
            crate::problem::Problem::P0_JOURNAL_RECOVERY_CLEAR
                | crate::problem::Problem::P0_JOURNAL_RUN
                | crate::problem::Problem::P0_JOURNAL_RUN_DEFAULT
        )
    });
    plan.report(opts.policy, opts.policy.mode == Mode::No, f);
    drop(p0);
    pass0::run_with(
        overlay,
        opts.superblock,
        opts.policy,
        jdev.as_ref(),
        opts.clock(),
        f,
    )
}
