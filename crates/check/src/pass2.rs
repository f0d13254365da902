//! Pass 2: check every directory block, read in ascending block order.
//!
//! Checks: entry framing (`rec_len`, `name_len`), `.` and `..`, entry inode numbers against
//! pass-1 facts (unused, out of range, in never-initialised inode areas), file types, names,
//! duplicate names within a block, leaf and htree checksums, inline directories, and the
//! "bad inode" fields pass 1 flagged (reported when the first entry names the inode).
//! Produces: `Pass2Facts` — counted references per inode and each directory's `..` and
//! first parent, for passes 3 and 4.
//! Relies on: `Pass1Facts`. Frees: the directory-block list.
//!
//! Blocks are checked in parallel chunks; everything that depends on order (which link to a
//! directory is its parent) is decided in a sequential merge in block order.

use crate::facts::{kind, DirBlock, Facts, Pass1Facts};
use crate::fs::Fs;
use crate::htree;
use crate::icount::{InodeCounts, SharedCounter};
use crate::pass0::Pass0Facts;
use crate::problem::Problem as P;
use crate::report::{Findings, Policy, ProblemCtx};
use ffsck_format::dir::{self as fdir, ft, header_at, DxRootInfo, DX_ROOT_INFO_OFFSET};
use ffsck_format::group::BG_INODE_UNINIT;
use ffsck_format::inode::{FileType, RawInode};
use ffsck_format::{ino as rino, Incompat};
use rayon::prelude::*;
use std::borrow::Cow;
use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet, VecDeque};
use std::sync::Arc;
use zerocopy::FromBytes;

/// Shortest valid encrypted name: one cipher block.
const ENCRYPTED_NAME_MIN: usize = 16;

/// Parent links of one directory.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, zerocopy::FromZeros)]
pub struct DirLinks {
    /// The inode its `..` entry names (0 if missing).
    pub dotdot: u32,
    /// The first directory found to contain an entry for it (0 if none).
    pub parent: u32,
}

impl crate::spill::Record for DirLinks {
    /// `dotdot`, `parent`, little-endian.
    const BYTES: usize = 8;
    fn load(b: &[u8]) -> Self {
        DirLinks {
            dotdot: u32::load(&b[0..4]),
            parent: u32::load(&b[4..8]),
        }
    }
    fn store(&self, b: &mut [u8]) {
        self.dotdot.store(&mut b[0..4]);
        self.parent.store(&mut b[4..8]);
    }
}

/// `DirLinks` of every directory, by inode number: one array in the order of pass 1's
/// directory index, which finds a directory's position in constant time (denser and faster
/// than a tree map when there are millions of directories). Under `--max-memory` the links go
/// to a scratch file once they outgrow their share.
#[derive(Default)]
pub struct DirTable {
    /// Pass 1's index of the directories, shared: links are kept by position in it.
    index: Arc<crate::facts::DirIndex>,
    links: crate::spill::Table<DirLinks>,
}

impl DirTable {
    /// All links zero; they spill when they would take more than `limits.dir_links_bytes`.
    fn new(dirs: &crate::facts::DirList, limits: &crate::spill::Limits) -> Self {
        DirTable {
            index: dirs.index().clone(),
            links: crate::spill::Table::zeroed(
                dirs.len(),
                limits.dir_links_bytes,
                limits.scratch_dir.as_deref(),
            ),
        }
    }
    fn link(&self, i: usize) -> DirLinks {
        self.links.get(i).unwrap_or_default()
    }
    pub fn get(&self, ino: &u32) -> Option<DirLinks> {
        self.index.position(*ino).map(|i| self.link(i))
    }
    /// Change the links of directory `ino`, if it is one; `f`'s result.
    pub fn update<R>(&mut self, ino: &u32, f: impl FnOnce(&mut DirLinks) -> R) -> Option<R> {
        self.links.update(self.index.position(*ino)?, f)
    }
    pub fn contains_key(&self, ino: &u32) -> bool {
        self.index.position(*ino).is_some()
    }
    pub fn len(&self) -> usize {
        self.index.len()
    }
    pub fn is_empty(&self) -> bool {
        self.index.is_empty()
    }
    /// Directories in ascending inode order.
    pub fn iter(&self) -> impl Iterator<Item = (u32, DirLinks)> + '_ {
        self.index
            .iter()
            .enumerate()
            .map(|(i, ino)| (ino, self.link(i)))
    }
    /// The links went to a scratch file that could not be written or read back.
    pub fn spill_failed(&self) -> bool {
        self.links.failed()
    }
}

pub struct Pass2Facts {
    /// References counted from directory entries, per inode (index `ino - 1`), saturating.
    pub refs: InodeCounts,
    pub dirs: DirTable,
    pub entries: u64,
    /// A directory block was found corrupted and not salvaged: like e2fsck, the check
    /// cannot go on past pass 2.
    pub aborted: bool,
}

/// An order-dependent fact the merge must account for. (Plain references are counted
/// directly in a shared atomic table: their order does not matter.)
#[derive(Clone, Copy)]
enum Event {
    /// `..` of directory `dir` names `target`.
    DotDot { dir: u32, target: u32 },
    /// Directory `dir` has an entry for the directory `child`.
    Subdir { dir: u32, child: u32, name: NameRef },
    /// An entry names an inode pass 1 flagged: check its fields (once).
    BadInode { dir: u32, ino: u32, name: NameRef },
}

/// An entry name kept in its block output's name buffer, so an event costs no allocation of
/// its own (the dirs profile has one subdirectory event per directory).
#[derive(Clone, Copy)]
struct NameRef {
    start: u32,
    len: u8,
}

impl NameRef {
    fn get(self, names: &[u8]) -> &[u8] {
        let start = self.start as usize;
        names
            .get(start..start + usize::from(self.len))
            .unwrap_or_default()
    }
}

#[derive(Default)]
struct BlockOut {
    /// The directory the block belongs to (0 for none).
    dir: u32,
    findings: Findings,
    events: Vec<Event>,
    /// The names events refer to, back to back.
    names: Vec<u8>,
    /// Facts about a block of an indexed directory, checked per directory in the merge.
    /// (Boxed: most blocks are not in an indexed directory, and a window holds many blocks.)
    dx: Option<Box<htree::DxBlock>>,
    /// Lowest and highest name hash of the entries (indexed directories only).
    hash_range: Option<(u32, u32)>,
    /// A name could not be hashed as the kernel would (casefolded non-ASCII, SipHash).
    hash_unknown: bool,
    /// Entry references (`ino - 1`) not yet added to the shared counter: added in batches
    /// (`Ctx::add_refs`), as one lock per entry was a twentieth of pass 2.
    refs: Vec<u32>,
}

impl Event {
    /// The event with its name moved `base` bytes further into a name buffer.
    fn rebased(self, base: u32) -> Event {
        let at = |n: NameRef| NameRef {
            start: n.start.saturating_add(base),
            len: n.len,
        };
        match self {
            Event::DotDot { .. } => self,
            Event::Subdir { dir, child, name } => Event::Subdir {
                dir,
                child,
                name: at(name),
            },
            Event::BadInode { dir, ino, name } => Event::BadInode {
                dir,
                ino,
                name: at(name),
            },
        }
    }
}

/// The outputs of consecutive blocks stored back to back: one set of vectors per chunk of a
/// window, so that checking a block allocates nothing of its own (and the merge, on another
/// thread, frees a few vectors per chunk instead of several per block).
#[derive(Default)]
struct Outs {
    heads: Vec<Head>,
    findings: Vec<crate::report::Finding>,
    events: Vec<Event>,
    names: Vec<u8>,
}

/// One block's share of an [`Outs`]: how many of the findings and events that follow the
/// previous block's are its own, and its index facts.
struct Head {
    dir: u32,
    findings: u32,
    events: u32,
    dx: Option<Box<htree::DxBlock>>,
}

impl Outs {
    /// Move one block's output in, leaving `bo` empty (its vectors keep their capacity) for
    /// the next block.
    fn push(&mut self, bo: &mut BlockOut) {
        let base = u32::try_from(self.names.len()).unwrap_or(u32::MAX);
        self.names.extend_from_slice(&bo.names);
        bo.names.clear();
        let events = bo.events.len() as u32;
        self.events
            .extend(bo.events.drain(..).map(|ev| ev.rebased(base)));
        let findings = bo.findings.0.len() as u32;
        self.findings.append(&mut bo.findings.0);
        self.heads.push(Head {
            dir: bo.dir,
            findings,
            events,
            dx: bo.dx.take(),
        });
        bo.dir = 0;
        bo.hash_range = None;
        bo.hash_unknown = false;
    }
}

impl BlockOut {
    /// Copy an entry name into the name buffer for an event.
    fn keep_name(&mut self, name: &[u8]) -> NameRef {
        // Names are at most 255 bytes (`name_len` is one byte); clamp anyway.
        let name = &name[..name.len().min(usize::from(u8::MAX))];
        let start = u32::try_from(self.names.len()).unwrap_or(u32::MAX);
        self.names.extend_from_slice(name);
        NameRef {
            start,
            len: name.len() as u8,
        }
    }
}

struct Ctx<'a, F: Facts + ?Sized> {
    /// References per inode (index `ino - 1`), counted by all workers at once.
    refs: &'a SharedCounter,
    /// Indexed directories: what their root says, read before the block phase.
    dx_dirs: &'a HashMap<u32, htree::DxDir>,
    fs: &'a Fs,
    p1: &'a F,
    policy: Policy,
    filetype: bool,
}

pub fn run(
    p0: &Pass0Facts,
    p1: &Pass1Facts,
    policy: Policy,
    out: &mut Findings,
    progress: &crate::engine::Progress,
) -> Pass2Facts {
    run_with(p0, p1, policy, out, progress, None, &Default::default())
}

/// Pass 2, taking the blocks a pipelined check already checked during pass 1 from `early`
/// (their outputs are merged in the same order as if checked now).
pub fn run_with(
    p0: &Pass0Facts,
    p1: &Pass1Facts,
    policy: Policy,
    out: &mut Findings,
    progress: &crate::engine::Progress,
    early: Option<Early>,
    limits: &crate::spill::Limits,
) -> Pass2Facts {
    let fs = &p0.fs;
    let n = fs.geo.inodes_count as usize;
    let (refs, dx_dirs, early_outs) = match early {
        Some(e) => {
            let mut outs = e.outs;
            let first = fs.geo.compat.has(ffsck_format::Compat::DIR_INDEX);
            outs.sort_unstable_by_key(|(d, _)| crate::facts::dir_block_order(first, d));
            (e.refs, e.dx_dirs, outs)
        }
        None => (
            SharedCounter::new(n as u64),
            htree::read_roots(fs, p1),
            Vec::new(),
        ),
    };
    let mut early_outs = early_outs.into_iter().peekable();
    let ctx = Ctx {
        refs: &refs,
        dx_dirs: &dx_dirs,
        fs,
        p1,
        policy,
        filetype: fs.geo.incompat.has(Incompat::FILETYPE),
    };

    // Inline directories have no blocks; they are checked as pseudo-blocks after the blocks,
    // in inode order. (Their kind has the inline bit, so it is not a plain directory's: they
    // are among the other kinds.)
    let inline: Vec<u32> = p1
        .kinds
        .others()
        .iter()
        .filter(|&&(_, k)| k & kind::INLINE != 0)
        .map(|&(idx, _)| idx + 1)
        .filter(|&ino| p1.dirs.index().position(ino).is_some())
        .collect();

    let mut m = Merge {
        dirs: DirTable::new(&p1.dirs, limits),
        bad_done: HashSet::new(),
        rehash: BTreeSet::new(),
        dx_facts: BTreeMap::new(),
        aborted: false,
    };
    // The root is its own parent.
    m.dirs.update(&rino::ROOT, |r| r.parent = rino::ROOT);

    // Blocks are checked in chunks by all the workers at once, in any order, while one at a
    // time merges the checked chunks in block order (`ordered::run`). The block list is
    // taken window by window (from memory, or from the scratch file it spilled to), and at
    // most two windows of outputs wait for the merge, however many blocks there are.
    let threads = rayon::current_num_threads().max(1);
    // Under a memory limit that made pass 1 spill, windows stay small: their outputs are
    // held in memory.
    let window = if p1.dir_spill.is_some() {
        SPILLED_WINDOW_BLOCKS
    } else {
        WINDOW_BLOCKS
    };
    let chunk = (window / (threads * 16)).max(RUN_BLOCKS);
    // Each window comes with the outputs of its blocks checked early (in block order, so a
    // cursor over the early outputs pairs them with their blocks); without a pipelined pass
    // 1 there are none, and nothing is allocated for them.
    let mut with_early = |w: &[DirBlock]| -> Vec<Option<BlockOut>> {
        if early_outs.peek().is_none() {
            return Vec::new();
        }
        w.iter()
            .map(|db| early_outs.next_if(|(e, _)| e == db).map(|(_, bo)| bo))
            .collect()
    };
    // The windows after the one being checked are hinted to the device, so their reads are
    // under way while the workers check the windows before them. Hinting costs a page-cache
    // lookup per block, so it is a worker's job too: the first chunk of each window carries
    // the window after it.
    let mut windows = p1.dir_block_windows(window);
    let first = windows.next();
    let mut ahead: VecDeque<_> = windows.by_ref().take(HINT_WINDOWS).collect();
    // Nothing else runs yet: the first windows are hinted by all the workers, in slices (a
    // file system whose directories have one block each needs a hint per block).
    first.iter().chain(&ahead).for_each(|w| {
        w.par_chunks(HINT_SLICE_BLOCKS)
            .for_each(|c| will_need(fs, c))
    });
    let mut cur = first.map(|w| {
        let pre = with_early(&w);
        (w, pre, 0usize)
    });
    let mut hint = None;
    let feed = || loop {
        let (w, pre, pos) = cur.as_mut()?;
        if *pos < w.len() {
            let span = *pos..(*pos + chunk).min(w.len());
            *pos = span.end;
            let blocks = match w {
                Cow::Borrowed(all) => Cow::Borrowed(&all[span.clone()]),
                Cow::Owned(all) => Cow::Owned(all[span.clone()].to_vec()),
            };
            let pre = match pre.get_mut(span) {
                Some(p) => p.iter_mut().map(Option::take).collect(),
                None => Vec::new(),
            };
            return Some(Chunk {
                blocks,
                pre,
                hint: hint.take(),
            });
        }
        let next = windows.next();
        hint.clone_from(&next);
        ahead.extend(next);
        cur = ahead.pop_front().map(|w| {
            let pre = with_early(&w);
            (w, pre, 0)
        });
    };
    let check = |c: Chunk| {
        if let Some(h) = &c.hint {
            will_need(fs, h);
        }
        let mut pre = c.pre;
        let outs = check_chunk(&ctx, &c.blocks, &mut pre);
        progress.advance(c.blocks.len() as u64);
        outs
    };
    let merge = |outs: Outs| {
        m.merge_outs(fs, policy, outs, out);
        !m.aborted
    };
    crate::ordered::run(feed, check, merge, 2 * window / chunk);
    if !m.aborted {
        // Inline directories have no blocks: their pseudo-blocks come last.
        let inline_outs: Vec<BlockOut> = inline
            .par_iter()
            .map(|&i| {
                let mut bo = check_inline_dir(&ctx, i);
                ctx.add_refs(&mut bo);
                bo
            })
            .collect();
        let mut outs = Outs::default();
        for mut bo in inline_outs {
            outs.push(&mut bo);
        }
        m.merge(fs, policy, vec![outs], out);
    }
    let refs = refs.finish();
    let entries = refs.total();
    let Merge {
        dirs,
        rehash,
        dx_facts,
        aborted,
        ..
    } = m;
    let facts = Pass2Facts {
        refs,
        dirs,
        entries,
        aborted,
    };
    if aborted {
        return facts;
    }
    for (dir, blocks) in &dx_facts {
        if rehash.contains(dir) {
            continue;
        }
        if let Some(dx) = dx_dirs.get(dir) {
            htree::verify_dir(policy, *dir, dx, blocks, out);
        }
    }
    if !rehash.is_empty() {
        // e2fsck rebuilds these in pass 3A; even under -n it first reads every name and
        // reports duplicates across the whole directory. Reported here, at the end of pass 2.
        let mut blocks: BTreeMap<u32, Vec<u64>> = BTreeMap::new();
        for db in p1.dir_block_iter() {
            if db.pblk != 0 && rehash.contains(&db.ino) {
                blocks.entry(db.ino).or_default().push(db.pblk);
            }
        }
        for (dir, list) in blocks {
            let encrypted = p1.kinds[(dir - 1) as usize] & kind::ENCRYPT != 0;
            report_duplicate_names(fs, policy, dir, &list, encrypted, out);
        }
    }
    facts
}

/// Pass 2 run as a stage of pass 1 (the pipelined check): the directory blocks of each batch
/// of groups pass 1 finishes are checked while it scans the next batch.
///
/// A block is checked early only when every inode its entries name lies in a group already
/// scanned, so every pass-1 fact it reads is final; any other block is deferred (left for
/// `run_with`, which checks it with the final facts). Only the per-block half of pass 2 runs
/// early: its outputs wait, and everything order-dependent (parents, `..`, first references
/// to flagged inodes, the findings' order) is still decided by the merge in block order.
pub struct Early<'a> {
    fs: &'a Fs,
    policy: Policy,
    refs: SharedCounter,
    dx_dirs: HashMap<u32, htree::DxDir>,
    outs: Vec<(DirBlock, BlockOut)>,
    /// Approximate heap bytes held by `outs`; past `budget` the rest is deferred.
    bytes: usize,
    budget: usize,
    /// Blocks checked early / deferred (for tests and tuning).
    pub checked: u64,
    pub deferred: u64,
}

impl<'a> Early<'a> {
    /// `budget`: bytes of early outputs to hold at most before deferring the rest.
    pub fn new(fs: &'a Fs, policy: Policy, budget: usize) -> Self {
        Early {
            fs,
            policy,
            refs: SharedCounter::new(u64::from(fs.geo.inodes_count)),
            dx_dirs: HashMap::new(),
            outs: Vec::new(),
            bytes: 0,
            budget,
            checked: 0,
            deferred: 0,
        }
    }
}

/// Approximate bytes one kept block output costs.
fn out_bytes(bo: &BlockOut) -> usize {
    std::mem::size_of::<(DirBlock, BlockOut)>()
        + bo.events.capacity() * std::mem::size_of::<Event>()
        + bo.names.capacity()
        + bo.findings.0.capacity() * std::mem::size_of::<crate::report::Finding>()
        + bo.dx
            .as_ref()
            .map_or(0, |_| std::mem::size_of::<htree::DxBlock>())
}

impl crate::facts::Stage for Early<'_> {
    fn batch(&mut self, facts: &crate::facts::Partial<'_>, mut blocks: Vec<DirBlock>) {
        if self.bytes >= self.budget {
            self.deferred += blocks.len() as u64;
            return;
        }
        // Ascending disk order within the batch.
        blocks.sort_unstable();
        let fs = self.fs;
        let new_roots = htree::read_roots_of(fs, blocks.iter().copied(), facts);
        self.dx_dirs.extend(new_roots);
        let ctx = Ctx {
            refs: &self.refs,
            dx_dirs: &self.dx_dirs,
            fs,
            p1: facts,
            policy: self.policy,
            filetype: fs.geo.incompat.has(Incompat::FILETYPE),
        };
        let frontier = facts.frontier;
        let threads = rayon::current_num_threads().max(1);
        let chunk = (blocks.len() / (threads * 4)).max(16);
        let outs: Vec<(DirBlock, BlockOut)> = blocks
            .par_chunks(chunk)
            .flat_map_iter(|c| {
                let mut buf = Vec::new();
                let mut r = Vec::with_capacity(c.len());
                for db in c {
                    if db.pblk != 0 {
                        buf.resize(fs.block_size(), 0);
                        if fs.read_blocks_into(db.pblk, &mut buf).is_err()
                            || names_beyond(&buf, fs.geo.block_size, frontier)
                        {
                            continue;
                        }
                    }
                    let mut bo = BlockOut::default();
                    check_block_into(&ctx, db, &buf, &mut bo);
                    ctx.add_refs(&mut bo);
                    bo.refs = Vec::new();
                    bo.events.shrink_to_fit();
                    bo.names.shrink_to_fit();
                    bo.findings.0.shrink_to_fit();
                    r.push((*db, bo));
                }
                r
            })
            .collect();
        self.checked += outs.len() as u64;
        self.deferred += (blocks.len() - outs.len()) as u64;
        self.bytes += outs.iter().map(|(_, bo)| out_bytes(bo)).sum::<usize>();
        self.outs.extend(outs);
    }
}

/// Whether an entry of directory block `buf` may name an inode beyond `frontier` (not yet
/// scanned). Walks the entries as `check_entries` does, never stopping earlier than it, so
/// every inode it would look up is seen.
fn names_beyond(buf: &[u8], bs: u32, frontier: u32) -> bool {
    let mut off = 0usize;
    for _ in 0..=buf.len() / 12 {
        if off >= buf.len() {
            return false;
        }
        let Some(h) = header_at(buf, off, bs) else {
            return false;
        };
        let rec_len = h.rec_len as usize;
        if h.inode > frontier {
            return true;
        }
        if off + rec_len > buf.len()
            || rec_len < 12
            || !rec_len.is_multiple_of(4)
            || fdir::rec_len_for(usize::from(h.name_len)) as usize > rec_len
        {
            return false;
        }
        off += rec_len;
    }
    false
}

/// The names seen so far in one block, kept as positions in the block: compared one by one
/// while there are few (most blocks of most directories hold a handful of entries), then
/// through an open-addressing table that starts small and doubles as names come, so a block
/// clears and probes only as many slots as its names need. Each thread reuses its two tables
/// from block to block, so no block allocates.
struct NameSet<'a> {
    block: &'a [u8],
    few: [u64; NameSet::FEW],
    /// Names held (in `few`, then in `table`).
    n: usize,
    /// Slots of `hash << 32 | (start + 1) << 8 | len` (0 is empty), where `hash` is the
    /// name's 32-bit hash: most probes are decided by it without comparing names, and growing
    /// the table needs no name. Empty until more than `FEW` names.
    table: Vec<u64>,
    /// The other table, the one `grow` moves the names into.
    spare: Vec<u64>,
}

thread_local! {
    static NAME_TABLES: std::cell::Cell<(Vec<u64>, Vec<u64>)> =
        const { std::cell::Cell::new((Vec::new(), Vec::new())) };
}

impl<'a> NameSet<'a> {
    const FEW: usize = 8;
    /// Slots of a new table: at most half full with `FEW + 1` names.
    const FIRST_SLOTS: usize = 32;

    fn new(block: &'a [u8]) -> Self {
        NameSet {
            block,
            few: [0; Self::FEW],
            n: 0,
            table: Vec::new(),
            spare: Vec::new(),
        }
    }

    /// The name a slot or key stands for.
    fn name(block: &[u8], key: u64) -> &[u8] {
        let start = ((key >> 8) & 0xFF_FFFF).saturating_sub(1) as usize;
        block
            .get(start..start + (key & 0xFF) as usize)
            .unwrap_or_default()
    }

    /// Add the name at `block[start..start + len]` (at most 255 bytes); false if it was
    /// already there.
    fn insert(&mut self, start: usize, len: usize) -> bool {
        // Blocks are at most 64 KiB, so `start + 1` fits the key's 24 bits.
        let pos = ((start as u64 + 1).min(0xFF_FFFF) << 8) | len.min(0xFF) as u64;
        let block = self.block;
        let name = Self::name(block, pos);
        if self.table.is_empty() {
            if self.few[..self.n]
                .iter()
                .any(|&k| Self::name(block, k) == name)
            {
                return false;
            }
            if self.n < Self::FEW {
                self.few[self.n] = pos;
                self.n += 1;
                return true;
            }
            // Sized for as many names as the block holds if the rest of its entries are
            // as long as the first ones, so most blocks never grow their table.
            let expect = (Self::FEW + 1) * block.len() / (start + len).max(1);
            let slots = (2 * expect)
                .clamp(Self::FIRST_SLOTS, 2 * (block.len() / 12 + 1))
                .next_power_of_two();
            let (mut table, spare) = NAME_TABLES.take();
            table.clear();
            table.resize(slots, 0);
            self.table = table;
            self.spare = spare;
            for k in self.few {
                let key = Self::keyed(block, k);
                Self::put(&mut self.table, key);
            }
        } else if 2 * (self.n + 1) > self.table.len() {
            self.grow();
        }
        let key = Self::keyed(block, pos);
        let same = |k: u64| k >> 32 == key >> 32 && Self::name(block, k) == name;
        match Self::probe(&self.table, key, same) {
            Some(i) if self.table[i] == 0 => {
                self.table[i] = key;
                self.n += 1;
                true
            }
            Some(_) => false,
            // Full (cannot happen: the table is kept at most half full): counted as new.
            None => true,
        }
    }

    /// The slot for `key` in `table`: the first, from its own, that is empty or holds a key
    /// `same` accepts (`None`: the table is full).
    fn probe(table: &[u64], key: u64, same: impl Fn(u64) -> bool) -> Option<usize> {
        let mask = table.len() - 1;
        let mut i = Self::slot_of(key, table.len());
        for _ in 0..table.len() {
            if table[i] == 0 || same(table[i]) {
                return Some(i);
            }
            i = (i + 1) & mask;
        }
        None
    }

    /// `pos` (a name's place in the block) with the name's hash in its high half.
    fn keyed(block: &[u8], pos: u64) -> u64 {
        u64::from(Self::hash(Self::name(block, pos))) << 32 | pos
    }

    /// Twice the slots, every name moved over by its hash alone.
    fn grow(&mut self) {
        let slots = 2 * self.table.len();
        self.spare.clear();
        self.spare.resize(slots, 0);
        for &key in self.table.iter().filter(|&&k| k != 0) {
            Self::put(&mut self.spare, key);
        }
        std::mem::swap(&mut self.table, &mut self.spare);
    }

    /// Put `key`, whose name is not in `table`, in the first free slot from its own.
    fn put(table: &mut [u64], key: u64) {
        if let Some(i) = Self::probe(table, key, |_| false) {
            table[i] = key;
        }
    }

    /// A name's 32-bit hash: the high half of [`NameHash`], into which the multiply carries
    /// every byte of the name (the low bits see only its first bytes, so names that differ
    /// late, `d00001`, `d00002`, ..., would share them and each insert would probe past all
    /// the others).
    fn hash(name: &[u8]) -> u32 {
        let mut h = NameHash(0);
        std::hash::Hasher::write(&mut h, name);
        (std::hash::Hasher::finish(&h) >> 32) as u32
    }

    /// The first slot tried for a key in a table of `slots` (a power of two): the hash's
    /// top bits.
    fn slot_of(key: u64, slots: usize) -> usize {
        let bits = slots.trailing_zeros();
        ((key >> 32) as u32).checked_shr(32 - bits).unwrap_or(0) as usize & (slots - 1)
    }

    /// The first slot tried for `name` in a table of `slots`.
    #[cfg(test)]
    fn slot(name: &[u8], slots: usize) -> usize {
        Self::slot_of(u64::from(Self::hash(name)) << 32, slots)
    }
}

impl Drop for NameSet<'_> {
    fn drop(&mut self) {
        if !self.table.is_empty() {
            NAME_TABLES.set((
                std::mem::take(&mut self.table),
                std::mem::take(&mut self.spare),
            ));
        }
    }
}

/// A cheap hash for the names of one block (the duplicate-name check): FxHash-style,
/// word-at-a-time multiply-rotate. A defence against chosen collisions is not worth its cost
/// here: a block holds at most `block_size / 12` names, which bounds the damage a hostile
/// block can do.
struct NameHash(u64);

impl std::hash::Hasher for NameHash {
    fn write(&mut self, bytes: &[u8]) {
        const K: u64 = 0x517c_c1b7_2722_0a95;
        let word =
            |b: &[u8], at: usize| u64::from_le_bytes(b[at..at + 8].try_into().unwrap_or_default());
        let half = |b: &[u8], at: usize| {
            u64::from(u32::from_le_bytes(
                b[at..at + 4].try_into().unwrap_or_default(),
            ))
        };
        let mut chunks = bytes.chunks_exact(8);
        for c in &mut chunks {
            self.0 = (self.0.rotate_left(5) ^ word(c, 0)).wrapping_mul(K);
        }
        // The last bytes are loaded whole, overlapping bytes already taken where the name
        // allows it, rather than copied into a zeroed word byte by byte (whose reload would
        // wait on the copy's stores).
        let n = bytes.len();
        let rest = chunks.remainder().len();
        let tail = match rest {
            0 => 0,
            _ if n >= 8 => word(bytes, n - 8),
            4.. => half(bytes, 0) | half(bytes, n - 4) << 32,
            _ => {
                u64::from(bytes[0])
                    | u64::from(bytes[rest / 2]) << 8
                    | u64::from(bytes[rest - 1]) << 16
            }
        };
        self.0 = (self.0.rotate_left(5) ^ tail ^ n as u64).wrapping_mul(K);
    }
    fn finish(&self) -> u64 {
        self.0
    }
}

/// A run of directory blocks for one worker to check (`ordered::run`).
struct Chunk<'a> {
    blocks: Cow<'a, [DirBlock]>,
    /// Outputs of these blocks checked early, by position (empty when there are none).
    pre: Vec<Option<BlockOut>>,
    /// A later window to hint to the device first.
    hint: Option<Cow<'a, [DirBlock]>>,
}

/// Directory blocks taken from the block list (and hinted to the device) at a time. At most
/// two windows of outputs wait for the merge, about 100 bytes per block; each window is cut
/// into 16 chunks per worker.
const WINDOW_BLOCKS: usize = 16384;
/// The same when the directory-block list was spilled (`--max-memory`).
const SPILLED_WINDOW_BLOCKS: usize = 1024;

/// Windows whose blocks are hinted to the device ahead of the one being checked (measured on
/// a cold cache with 4096-block windows: 16384 blocks ahead saved about a sixth of pass 2's
/// time against no hint; more saved nothing).
const HINT_WINDOWS: usize = 1;

/// The sequential, order-dependent half of pass 2, fed window by window in block order.
struct Merge {
    dirs: DirTable,
    /// Flagged inodes whose fields were already checked (at their first entry).
    bad_done: HashSet<u32>,
    /// Directories marked for rebuilding (duplicate names), in e2fsck's sense: later blocks
    /// do not report duplicates again, their checksum problems are left to the rebuild, and
    /// their index is not validated.
    rehash: BTreeSet<u32>,
    dx_facts: BTreeMap<u32, Vec<htree::DxBlock>>,
    /// An unsalvaged corrupted block ended pass 2; nothing after it is merged.
    aborted: bool,
}

impl Merge {
    fn merge(&mut self, fs: &Fs, policy: Policy, outs: Vec<Outs>, out: &mut Findings) {
        for o in outs {
            self.merge_outs(fs, policy, o, out);
        }
    }

    fn merge_outs(&mut self, fs: &Fs, policy: Policy, outs: Outs, out: &mut Findings) {
        let Outs {
            heads,
            findings,
            events,
            names,
        } = outs;
        let mut findings = findings.into_iter();
        let mut events = events.into_iter();
        for h in heads {
            if self.aborted {
                return;
            }
            // Empty for almost every block: collecting nothing allocates nothing.
            let mut found: Vec<crate::report::Finding> =
                findings.by_ref().take(h.findings as usize).collect();
            let block_events = events.by_ref().take(h.events as usize);
            let mut dx = h.dx;
            // An unsalvaged corrupted block ends pass 2 (and the check) right there.
            if let Some(i) = found
                .iter()
                .position(|f| f.problem == P::P2_DIR_CORRUPTED && !f.fixed)
            {
                found.truncate(i + 1);
                dx = None;
                self.aborted = true;
            }
            if self.rehash.contains(&h.dir) {
                out.0.extend(found.into_iter().filter(|f| {
                    !matches!(
                        f.problem,
                        P::P2_REPORT_DUP_DIRENT
                            | P::P2_LEAF_NODE_MISSING_CSUM
                            | P::P2_HTREE_ROOT_CSUM_INVALID
                            | P::P2_HTREE_NODE_CSUM_INVALID
                    )
                }));
            } else {
                if found.iter().any(|f| f.problem == P::P2_REPORT_DUP_DIRENT) {
                    self.rehash.insert(h.dir);
                }
                out.0.extend(found);
                if let Some(d) = dx {
                    self.dx_facts.entry(h.dir).or_default().push(*d);
                }
            }
            for ev in block_events {
                match ev {
                    Event::DotDot { dir, target } => {
                        self.dirs.update(&dir, |d| d.dotdot = target);
                    }
                    Event::Subdir { dir, child, name } => {
                        // The first directory naming it becomes its parent.
                        let first = self.dirs.update(&child, |d| {
                            let first = d.parent;
                            if first == 0 {
                                d.parent = dir;
                            }
                            first
                        });
                        if let Some(first) = first {
                            if first != 0 {
                                out.report(
                                    policy,
                                    P::P2_LINK_DIR,
                                    ProblemCtx {
                                        dir,
                                        ino: child,
                                        ino2: first,
                                        name: Some(display_name(name.get(&names))),
                                        ..Default::default()
                                    },
                                );
                                // Unfixed, the entry still counts as a reference.
                            }
                        }
                    }
                    Event::BadInode { dir, ino, name } => {
                        if self.bad_done.insert(ino) {
                            let name = display_name(name.get(&names));
                            let _ = process_bad_inode(fs, policy, dir, ino, &name, out);
                        }
                    }
                }
            }
        }
    }
}

/// Read every name of directory `dir` (its blocks `list`) and report names that occur more
/// than once, as e2fsck's directory rebuild does before rewriting the directory.
fn report_duplicate_names(
    fs: &Fs,
    policy: Policy,
    dir: u32,
    list: &[u64],
    encrypted: bool,
    out: &mut Findings,
) {
    let bs = fs.block_size();
    let mut names: Vec<(Vec<u8>, u32)> = Vec::new();
    for &pblk in list {
        let Some(buf) = fs.read_block(pblk) else {
            continue;
        };
        let mut off = 0usize;
        // Entries are at least 12 bytes: this bounds the walk.
        for _ in 0..=bs / 12 {
            let Some(h) = header_at(&buf, off, bs as u32) else {
                break;
            };
            let rec_len = h.rec_len as usize;
            let name_len = usize::from(h.name_len);
            if rec_len < 12
                || !rec_len.is_multiple_of(4)
                || off + rec_len > bs
                || 8 + name_len > rec_len
            {
                break;
            }
            let name = &buf[off + 8..off + 8 + name_len];
            if h.inode != 0 && !name.is_empty() && name != b"." && name != b".." {
                names.push((name.to_vec(), h.inode));
            }
            off += rec_len;
        }
    }
    names.sort();
    for w in names.windows(2) {
        let (prev, cur) = (&w[0], &w[1]);
        if prev.0 != cur.0 {
            continue;
        }
        let pctx = ProblemCtx {
            dir,
            ino: dir,
            name: Some(display_name(&cur.0)),
            ..Default::default()
        };
        if cur.1 == prev.1 && out.report(policy, P::P2_DUPLICATE_DIRENT, pctx.clone()) {
            continue;
        }
        if encrypted && out.report(policy, P::P2_NON_UNIQUE_FILE_NO_RENAME, pctx.clone()) {
            continue;
        }
        out.report(policy, P::P2_NON_UNIQUE_FILE, pctx);
    }
}

fn display_name(raw: &[u8]) -> String {
    String::from_utf8_lossy(raw).into_owned()
}

/// Hint the device that the blocks of window `w` will be read, in one batch of runs of nearby
/// blocks. Runs are joined across gaps of up to `HINT_GAP_BYTES`, so a cold device gets a few
/// large reads rather than many small ones (the gaps, mostly file data, are read too).
fn will_need(fs: &Fs, w: &[DirBlock]) {
    let bs = u64::from(fs.geo.block_size);
    let (gap, most) = ((HINT_GAP_BYTES / bs).max(1), (HINT_MAX_BYTES / bs).max(1));
    let mut runs = Vec::new();
    let mut run: Option<(u64, u64)> = None;
    for db in w.iter().filter(|db| db.pblk != 0) {
        run = match run {
            // Ascending within a window (except at the first-blocks boundary with dir_index).
            Some((start, end))
                if db.pblk >= start
                    && db.pblk <= end.saturating_add(gap)
                    && db.pblk - start < most =>
            {
                Some((start, end.max(db.pblk + 1)))
            }
            other => {
                runs.extend(other.map(|(start, end)| (start, end - start)));
                Some((db.pblk, db.pblk.saturating_add(1)))
            }
        };
    }
    runs.extend(run.map(|(start, end)| (start, end - start)));
    fs.will_need_blocks(&runs);
}

/// Largest gap between directory blocks that one read-ahead hint spans, and the most one
/// hint covers.
const HINT_GAP_BYTES: u64 = 64 * 1024;
const HINT_MAX_BYTES: u64 = 8 << 20;
/// Blocks per slice when the first windows are hinted in parallel.
const HINT_SLICE_BLOCKS: usize = 1024;

/// Blocks read with one system call when a window's blocks lie next to each other on disk.
const RUN_BLOCKS: usize = 32;

/// Check a chunk of a window's blocks in order, taking the outputs checked early from `pre`
/// (empty when there are none) and reading each run of physically adjacent blocks with one
/// read.
fn check_chunk<F: Facts + ?Sized>(
    ctx: &Ctx<F>,
    blocks: &[DirBlock],
    pre: &mut [Option<BlockOut>],
) -> Outs {
    thread_local! {
        // Kept across chunks: a fresh run buffer per chunk would be mapped, faulted in and
        // unmapped every time (it is above malloc's mmap threshold).
        static BUF: std::cell::RefCell<Vec<u8>> = const { std::cell::RefCell::new(Vec::new()) };
    }
    BUF.with_borrow_mut(|buf| check_chunk_with(ctx, blocks, pre, buf))
}

fn check_chunk_with<F: Facts + ?Sized>(
    ctx: &Ctx<F>,
    blocks: &[DirBlock],
    pre: &mut [Option<BlockOut>],
    buf: &mut Vec<u8>,
) -> Outs {
    let bs = ctx.fs.block_size();
    let mut out = Outs {
        heads: Vec::with_capacity(blocks.len()),
        ..Default::default()
    };
    let mut bo = BlockOut::default();
    let mut i = 0;
    while i < blocks.len() {
        if let Some(mut early) = pre.get_mut(i).and_then(Option::take) {
            out.push(&mut early);
            i += 1;
            continue;
        }
        let start = blocks[i].pblk;
        let mut n = 1;
        while start != 0
            && n < RUN_BLOCKS
            && i + n < blocks.len()
            && pre.get(i + n).is_none_or(Option::is_none)
            && blocks[i + n].pblk == start + n as u64
        {
            n += 1;
        }
        buf.resize(n * bs, 0);
        if n > 1 && ctx.fs.read_blocks_into(start, buf).is_ok() {
            for (db, bytes) in blocks[i..i + n].iter().zip(buf.chunks_exact(bs)) {
                check_block_into(ctx, db, bytes, &mut bo);
                out.push(&mut bo);
            }
        } else {
            // One block, or a run whose read failed: each block on its own, so an unreadable
            // block costs only itself.
            for db in &blocks[i..i + n] {
                check_block(ctx, db, buf, &mut bo);
                out.push(&mut bo);
            }
        }
        if bo.refs.len() >= REF_BATCH {
            ctx.add_refs(&mut bo);
        }
        i += n;
    }
    ctx.add_refs(&mut bo);
    out
}

/// References a chunk collects before adding them to the shared counter (16 KiB).
const REF_BATCH: usize = 4096;

/// Check one directory block into the empty `bo`, reading it first (a hole needs no read).
fn check_block<F: Facts + ?Sized>(
    ctx: &Ctx<F>,
    db: &DirBlock,
    buf: &mut Vec<u8>,
    bo: &mut BlockOut,
) {
    if db.pblk != 0 {
        buf.resize(ctx.fs.block_size(), 0);
        if ctx.fs.read_blocks_into(db.pblk, buf).is_err() {
            bo.dir = db.ino;
            return;
        }
    }
    check_block_into(ctx, db, buf, bo)
}

/// Check one directory block whose bytes are `buf` (not looked at for a hole) into the empty
/// `bo`.
fn check_block_into<F: Facts + ?Sized>(ctx: &Ctx<F>, db: &DirBlock, buf: &[u8], bo: &mut BlockOut) {
    bo.dir = db.ino;
    let fs = ctx.fs;
    if db.pblk == 0 {
        // A hole pass 1 listed. With large_dir (and no inline data) holes are allowed.
        if !fs.geo.incompat.has(Incompat::LARGEDIR) || fs.geo.incompat.has(Incompat::INLINE_DATA) {
            bo.findings.report(
                ctx.policy,
                P::P2_DIRECTORY_HOLE,
                ProblemCtx {
                    dir: db.ino,
                    ino: db.ino,
                    num: u64::from(db.lblk),
                    ..Default::default()
                },
            );
        }
        return;
    }
    let bs = fs.block_size();
    let csum = fs.has_metadata_csum();
    let dx = if ctx.p1.kind(db.ino - 1) & kind::HTREE != 0 {
        ctx.dx_dirs.get(&db.ino).filter(|d| db.lblk < d.numblocks)
    } else {
        None
    };
    let interior = dx.is_some() && (db.lblk == 0 || htree::is_node(buf, bs, csum));

    if let (Some(dx), true) = (dx, interior) {
        if db.lblk == 0 {
            // The root's fixed header, as pass 2 re-checks it.
            if let Ok((info, _)) = DxRootInfo::read_from_prefix(&buf[DX_ROOT_INFO_OFFSET..]) {
                if (info.reserved_zero.get() != 0
                    || info.info_length < 8
                    || info.indirect_levels >= htree::max_levels(fs))
                    && bo.findings.report(
                        ctx.policy,
                        P::P2_HTREE_BAD_ROOT,
                        ProblemCtx {
                            dir: db.ino,
                            ino: db.ino,
                            ..Default::default()
                        },
                    )
                {
                    // Cleared: the block is checked as a plain one below.
                    bo.dx = Some(Box::new(htree::DxBlock {
                        cleared: true,
                        ..Default::default()
                    }));
                }
            }
        }
        let failed_csum = csum
            && ctx
                .inode_seed(db.ino)
                .is_some_and(|seed| !htree::interior_csum_ok(buf, bs, seed));
        // An interior node holds one empty entry: nothing to check but the index. The root
        // block's entries ('.' and '..') are checked first.
        if db.lblk == 0 {
            check_entries(ctx, db.ino, db.lblk, db.pblk, buf, 0, bo, false, Some(dx));
        }
        if bo.dx.is_none() {
            bo.dx = Some(Box::new(htree::parse_interior(
                fs,
                ctx.policy,
                db.ino,
                db.lblk,
                buf,
                dx,
                failed_csum,
                &mut bo.findings,
            )));
        }
        return;
    }

    let mut failed_csum = false;
    let mut max = bs;
    // An htree root keeps a dx tail, not a leaf tail: its `..` entry spans the whole block.
    let htree_root = ctx.p1.kind(db.ino - 1) & kind::HTREE != 0 && db.lblk == 0;
    if csum && !htree_root {
        if fdir::has_tail(buf) {
            let seed = ctx.inode_seed(db.ino);
            if let Some(seed) = seed {
                if fdir::leaf_checksum(buf, seed) != fdir::stored_leaf_checksum(buf) {
                    failed_csum = true;
                }
            }
            max = bs - fdir::TAIL_SIZE;
        } else {
            bo.findings.report(
                ctx.policy,
                P::P2_LEAF_NODE_MISSING_CSUM,
                ProblemCtx {
                    dir: db.ino,
                    num: u64::from(db.lblk),
                    ..Default::default()
                },
            );
        }
    }
    let before = bo.findings.0.len();
    check_entries(ctx, db.ino, db.lblk, db.pblk, &buf[..max], 0, bo, false, dx);
    if failed_csum && bo.findings.0.len() == before {
        bo.findings.report(
            ctx.policy,
            P::P2_LEAF_NODE_ONLY_CSUM_INVALID,
            ProblemCtx {
                dir: db.ino,
                blk: db.pblk,
                num: u64::from(db.lblk),
                ..Default::default()
            },
        );
    }
    if dx.is_some() {
        let (lo, hi) = bo.hash_range.unwrap_or((u32::MAX, 0));
        bo.dx = Some(Box::new(htree::DxBlock {
            lblk: db.lblk,
            kind: htree::DxKind::Leaf,
            min_hash: lo,
            max_hash: hi,
            hash_unknown: bo.hash_unknown,
            ..Default::default()
        }));
    }
}

fn inode_seed(fs: &Fs, ino: u32) -> Option<u32> {
    let raw = read_inode(fs, ino)?;
    Some(ffsck_format::csum::inode_seed(
        fs.csum_seed,
        ino,
        RawInode::parse(&raw).i_generation.get(),
    ))
}

/// Read the on-disk bytes of one inode.
pub fn read_inode(fs: &Fs, ino: u32) -> Option<Vec<u8>> {
    fs.read_inode(ino)
}

#[allow(clippy::too_many_arguments)]
/// Walk the entries in `buf` (physical block `pblk`, 0 for inline data; findings name it so a
/// repair can find the entry). `dot_state` starts at 0 for a directory's first block (and for
/// inline directories, where `..` is implicit, at 2).
fn check_entries<F: Facts + ?Sized>(
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
    let mut off = 0usize;
    let mut names = NameSet::new(buf);
    let mut dups_found = false;
    // Each entry is at least 12 bytes, so this bounds the walk even on garbage.
    for _ in 0..=buf.len() / 12 {
        if off >= buf.len() {
            break;
        }
        let pctx = |name: &[u8], ino: u32| ProblemCtx {
            dir,
            ino,
            blk: pblk,
            num: u64::from(lblk),
            num2: off as u64,
            name: Some(display_name(name)),
            ..Default::default()
        };
        let Some(h) = header_at(buf, off, bs) else {
            bo.findings
                .report(ctx.policy, P::P2_DIR_CORRUPTED, pctx(b"", 0));
            return;
        };
        let rec_len = h.rec_len as usize;
        let name_len = usize::from(h.name_len);
        if off + rec_len > buf.len()
            || rec_len < 12
            || !rec_len.is_multiple_of(4)
            || fdir::rec_len_for(name_len) as usize > rec_len
        {
            bo.findings
                .report(ctx.policy, P::P2_DIR_CORRUPTED, pctx(b"", 0));
            return;
        }
        let name = &buf[off + 8..off + 8 + name_len];
        let ino = h.inode;
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
        } else if ino == dir && ino != 0 {
            bo.findings
                .report(ctx.policy, P::P2_LINK_DOT, pctx(name, ino));
        }
        if ino != 0 {
            let counted = check_entry(
                ctx,
                dir,
                name,
                h.file_type,
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
        off += rec_len;
    }
}

#[allow(clippy::too_many_arguments)]
fn check_entry<F: Facts + ?Sized>(
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
        out.report(policy, p, pctx());
        if p == P::P2_BAD_INO {
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
        bo.events.push(Event::BadInode { dir, ino, name });
    }
    let out = &mut bo.findings;
    let g = geo.group_of_inode(ino);
    let gd = &fs.groups[g as usize];
    if fs.has_group_csum() {
        let first_unused =
            g * geo.inodes_per_group + 1 + geo.inodes_per_group.saturating_sub(gd.itable_unused());
        if gd.flags() & BG_INODE_UNINIT != 0 {
            out.report(
                policy,
                P::P2_INOREF_BG_INO_UNINIT,
                ProblemCtx { group: g, ..pctx() },
            );
        } else if ino >= first_unused {
            out.report(
                policy,
                P::P2_INOREF_IN_UNUSED,
                ProblemCtx { group: g, ..pctx() },
            );
        }
    }
    if !ctx.p1.used(ino - 1) {
        out.report(policy, P::P2_UNUSED_INODE, pctx());
    }
    // File type of the entry against the inode's type. Directories and regular files keep
    // their type even when pass 1 found them bad (as e2fsck, which knows them by its maps).
    let t = k & kind::TYPE_MASK;
    // A bad inode is dealt with before its entry's type is checked: answered yes throughout,
    // it is either cleared (and the entry with it) or fixed and no longer bad.
    let stays_bad = k & kind::BAD != 0 && policy != Policy::Yes;
    let should = if ctx.p1.used(ino - 1) && (!stays_bad || t == ft::DIR || t == ft::REG) {
        t
    } else {
        ft::UNKNOWN
    };
    if !ctx.filetype {
        if file_type != 0 {
            out.report(policy, P::P2_CLEAR_FILETYPE, pctx());
        }
    } else if file_type != should && (should != ft::UNKNOWN || ctx.p1.used(ino - 1)) {
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

impl<F: Facts + ?Sized> Ctx<'_, F> {
    /// The checksum seed of directory `ino`'s blocks, from the generation pass 1 kept (or,
    /// for an inode pass 1 did not list as a directory, from the inode on disk).
    fn inode_seed(&self, ino: u32) -> Option<u32> {
        match self.p1.dir_generation(ino) {
            Some(generation) => Some(ffsck_format::csum::inode_seed(
                self.fs.csum_seed,
                ino,
                generation,
            )),
            None => inode_seed(self.fs, ino),
        }
    }

    /// Add the references `bo` collected to the shared counter.
    fn add_refs(&self, bo: &mut BlockOut) {
        self.refs.increment_all(&bo.refs);
        bo.refs.clear();
    }
}

impl BlockOut {
    /// Count one directory-entry reference to `ino` (saturating, like e2fsck's icount), in
    /// the next `Ctx::add_refs`.
    fn count_ref(&mut self, ino: u32) {
        if ino != 0 {
            self.refs.push(ino - 1);
        }
    }
}

/// An inline directory: `..` in the first 4 bytes of `i_block`, entries after it and in the
/// `system.data` attribute.
fn check_inline_dir<F: Facts + ?Sized>(ctx: &Ctx<F>, dir: u32) -> BlockOut {
    let mut bo = BlockOut::default();
    let Some(raw) = read_inode(ctx.fs, dir) else {
        return bo;
    };
    let inode = RawInode::parse(&raw);
    let ib = inode.block_bytes();
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
    let size = inode.size() as usize;
    // Findings name the part of an inline directory by block number: 0 for the entries in
    // `i_block` (after the parent), 1 for those in the `system.data` attribute.
    let first = &ib[4..60.min(size.max(4))];
    check_entries(ctx, dir, 0, 0, first, 2, &mut bo, true, None);
    if size > 60 {
        if let Some(extra) = inline_xattr_data(ctx.fs, &raw) {
            check_entries(ctx, dir, 1, 0, &extra, 2, &mut bo, true, None);
        }
    }
    bo
}

/// The value of `system.data` in the inode body, if present.
pub(crate) fn inline_xattr_data(fs: &Fs, raw: &[u8]) -> Option<Vec<u8>> {
    let _ = fs;
    inline_xattr_range(raw).map(|r| raw[r].to_vec())
}

/// Where the value of `system.data` lies in the inode's bytes, if it is there.
pub(crate) fn inline_xattr_range(raw: &[u8]) -> Option<std::ops::Range<usize>> {
    let inode = RawInode::parse(raw);
    let start = 128 + usize::from(inode.extra_isize());
    if start + 4 > raw.len()
        || u32::from_le_bytes([raw[start], raw[start + 1], raw[start + 2], raw[start + 3]])
            != ffsck_format::xattr::IBODY_MAGIC
    {
        return None;
    }
    let area = &raw[start..];
    let entries = ffsck_format::xattr::parse_entries(area, 4, 4).ok()?;
    let e = entries
        .into_iter()
        .find(|e| e.raw.e_name_index == 7 && e.name == b"data")?;
    let off = start + 4 + usize::from(e.raw.e_value_offs.get());
    let len = e.raw.e_value_size.get() as usize;
    (off + len <= raw.len()).then_some(off..off + len)
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
    out: &mut Findings,
) -> bool {
    let Some(raw) = read_inode(fs, ino) else {
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
    let mut acl = inode.file_acl();
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
    let dev_ok = crate::pass1::device_inode_ok(&inode);
    match ft {
        FileType::Bad => {
            return out.report(
                policy,
                P::P2_BAD_MODE,
                ProblemCtx {
                    num: u64::from(inode.mode()),
                    ..ctx.clone()
                },
            );
        }
        FileType::CharDev if !dev_ok => {
            return out.report(policy, P::P2_BAD_CHAR_DEV, ctx.clone());
        }
        FileType::BlockDev if !dev_ok => {
            return out.report(policy, P::P2_BAD_BLOCK_DEV, ctx.clone());
        }
        FileType::Fifo if !dev_ok => {
            return out.report(policy, P::P2_BAD_FIFO, ctx.clone());
        }
        FileType::Socket if !dev_ok => {
            return out.report(policy, P::P2_BAD_SOCKET, ctx.clone());
        }
        // (Judged with the xattr block cleared above, if it was.)
        FileType::Symlink if !crate::pass1::symlink_ok(fs, &inode, &raw) => {
            return out.report(policy, P::P2_INVALID_SYMLINK, ctx.clone());
        }
        _ => {}
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

/// After the directories: files of 2 GiB or more need the `large_file` feature, and a
/// revision-0 file system cannot carry feature flags at all.
pub fn large_files(fs: &Fs, large_files: u64, policy: Policy, out: &mut Findings) {
    if large_files == 0 {
        return;
    }
    let sb = &fs.sb;
    if sb.s_feature_ro_compat.get() & ffsck_format::RoCompat::LARGE_FILE == 0 {
        out.report(policy, P::P2_FEATURE_LARGE_FILES, ProblemCtx::default());
    }
    if sb.s_rev_level.get() == 0 {
        out.report(policy, P::P1_FS_REV_LEVEL, ProblemCtx::default());
    }
}

/// Names in `dir` are compared case-insensitively (casefold feature and flag), so they must
/// be valid UTF-8.
fn casefold_dir(fs: &Fs, dir: u32) -> bool {
    fs.geo.incompat.has(Incompat::CASEFOLD)
        && read_inode(fs, dir).is_some_and(|r| {
            RawInode::parse(&r).flags() & ffsck_format::inode::flags::CASEFOLD != 0
        })
}

#[cfg(test)]
mod tests {
    use super::NameSet;

    #[test]
    fn name_set_finds_duplicates_before_and_after_it_starts_hashing() {
        // A block of names back to back, each at a known position; the last two repeat
        // earlier names.
        let mut block = Vec::new();
        let mut at = Vec::new();
        for name in (0..40)
            .map(|i| format!("name-{i}"))
            .chain(["name-3".into(), "name-40".into()])
        {
            at.push((block.len(), name.len()));
            block.extend_from_slice(name.as_bytes());
        }
        block.resize(4096, 0);
        let mut set = NameSet::new(&block);
        for i in 0..40 {
            assert!(set.insert(at[i].0, at[i].1), "{i} is new");
            // Every name seen so far, whether kept in the small array or the table.
            let (s, l) = at[i / 2];
            assert!(!set.insert(s, l), "{} seen", i / 2);
        }
        assert!(!set.insert(at[40].0, at[40].1));
        assert!(set.insert(at[41].0, at[41].1));
    }

    #[test]
    fn name_set_grows_past_its_estimate_and_tells_names_of_every_length_apart() {
        // Long names first, so the table is sized for few names and must grow; then names
        // of every length from 1 to 255 that differ from each other only in their last
        // byte, each followed by a repeat of the name before it.
        let mut block = Vec::new();
        let mut names: Vec<Vec<u8>> = (0..9).map(|i| vec![b'L' - i as u8; 200]).collect();
        for len in 1..=255usize {
            for last in [b'a', b'b'] {
                let mut name = vec![b'x'; len];
                name[len - 1] = last;
                names.push(name);
            }
        }
        let mut at = Vec::new();
        for name in &names {
            at.push((block.len(), name.len()));
            block.extend_from_slice(name);
        }
        block.resize(block.len().next_power_of_two(), 0);
        let mut set = NameSet::new(&block);
        for (i, &(s, l)) in at.iter().enumerate() {
            assert!(set.insert(s, l), "name {i} is new");
            if i > 0 {
                let (s, l) = at[i - 1];
                assert!(!set.insert(s, l), "name {} seen", i - 1);
            }
        }
        assert!(
            set.table.len() >= 2 * at.len(),
            "grew to {}",
            set.table.len()
        );
    }

    #[test]
    fn names_that_differ_only_late_spread_over_the_table() {
        // A 4 KiB block's worth of same-length names, numbered at their end, as a big
        // directory holds them: most must start at a slot of their own, or inserting them
        // all costs quadratic probing.
        let slots = 1024;
        let mut firsts: Vec<usize> = (0..340)
            .map(|i| NameSet::slot(format!("d{i:05}").as_bytes(), slots))
            .collect();
        assert!(firsts.iter().all(|&s| s < slots));
        firsts.sort_unstable();
        firsts.dedup();
        assert!(firsts.len() > 250, "{} distinct first slots", firsts.len());
        // Longer names, past one 8-byte word, too.
        let mut long: Vec<usize> = (0..340)
            .map(|i| NameSet::slot(format!("some-long-prefix-{i:05}").as_bytes(), slots))
            .collect();
        long.sort_unstable();
        long.dedup();
        assert!(long.len() > 250, "{} distinct first slots", long.len());
        // The smallest table still gets a slot inside it.
        assert!(NameSet::slot(b"x", 2) < 2);
    }
}
