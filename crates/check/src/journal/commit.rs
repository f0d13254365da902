//! Commit a repair generation through the file system's own jbd2 journal, so the repair state
//! lives on the device: an interrupted repair is finished by the next ffsck, by e2fsck or by
//! the kernel's mount, and no file off the device is needed.
//!
//! [`prepare`] decides whether the journal can carry the generation and builds the one
//! transaction that does (descriptor blocks, the logged blocks, a commit block, with the tags
//! and checksums the journal's features call for). [`Transaction::commit`] writes it, each
//! step flushed before the next:
//!
//! 1. the descriptor and data blocks into the log from `s_first` (flush), then the commit
//!    block (flush). The journal is empty (`s_start == 0`), so no reader looks at the log yet;
//! 2. the journal superblock with `s_start = s_first` and `s_sequence` the transaction's
//!    (flush), then the primary superblock with `needs_recovery` (flush);
//! 3. the blocks in place (flush); the block holding the primary superblock, here and in the
//!    log, still carries `needs_recovery`;
//! 4. the journal superblock emptied: `s_start = 0`, the next sequence (flush);
//! 5. the primary superblock as repaired, without `needs_recovery` (flush).
//!
//! Where a crash leaves the device, and who finishes it:
//! * during 1, or in 2 before the journal superblock is written: the journal is empty and the
//!   file system untouched: the original.
//! * after the journal superblock of 2 but before the superblock's flag: a committed log
//!   without `needs_recovery`. The kernel wipes such a log at mount (original); e2fsck asks
//!   to run the journal anyway (yes under -p/-y: repaired; no: original); ffsck replays it as
//!   e2fsck does when told to. Nothing in place has changed, so either outcome is whole.
//! * from the flag of 2 until the journal superblock of 4: `needs_recovery` and a committed
//!   transaction naming every changed block: any recoverer rewrites all of them (the writes
//!   of 3 that landed are rewritten with the same bytes) and clears the flag: repaired.
//!   Since the logged superblock block carries the flag too, a crash during that replay
//!   leaves it set, and the next one replays again.
//! * after 4: every block is in place and the journal empty; the flag, if still set, makes a
//!   recoverer find an empty journal and clear it: repaired.
//!
//! "Repaired" and "original" are byte for byte, except for what a journal leaves behind by
//! its nature: the log area holds this (now stale) transaction and the journal superblock's
//! sequence has moved on; a recoverer other than ffsck also stamps its own superblock fields
//! (write time, mount count, kbytes written).
//!
//! Writes are assumed to land whole per sector, as the kernel and e2fsprogs assume; the
//! 1024-byte superblock is written in one request, as they do.
//!
//! The journal is used only when it is internal, verified, empty after any replay, with only
//! known features, located identically on the device and in the repaired state (same inode
//! bytes, same mapping, same superblock but for `s_start`/`s_sequence`), untouched by the
//! generation, and large enough for the whole transaction without wrapping. Otherwise
//! [`prepare`] says why, and the caller commits another way.
//!
//! A journal that needs recovery is first replayed on the device ([`plan_replay`],
//! [`DeviceReplay::apply`]): the replayed blocks (with the superblock still flagged), then the
//! emptied journal superblock, then the superblock without the flag, each flushed, so a
//! crash leaves the journal valid and replayable until its superblock is reset, as the
//! kernel's own replay does. A log found without the flag, which the repair ran anyway as
//! e2fsck does when told to, gets the flag set (and flushed) first.

use super::recovery::{self, Replay};
use crate::filemap::{self, Visit};
use crate::fs::Fs;
use crate::journal::Journal;
use crate::pass0::{self, SuperHint};
use crate::report::{Findings, Policy};
use ffsck_format::inode::{flags, RawInode};
use ffsck_format::journal::{
    crc32_be, escape, feature, BlockTag, JournalSuperblock, LogFormat, MIN_JOURNAL_BLOCKS,
};
use ffsck_format::{Compat, Incompat, RawSuperblock, SUPERBLOCK_OFFSET, SUPERBLOCK_SIZE};
use ffsck_io::logfile::Record;
use ffsck_io::overlay::Overlay;
use ffsck_io::Device;
use std::sync::Arc;
use zerocopy::{FromBytes, IntoBytes};

/// How far the transaction's sequence number lies past the journal superblock's. The
/// retired transaction stays in the log, so its number must never be one a recovery could
/// expect at that place later. After an unmounted repair the kernel numbers from the
/// emptied superblock on, past it. But a file system mounted read-only (the root at boot)
/// has a kernel that loaded the journal before the repair and numbers its next transaction
/// `s_sequence + 1` from memory, writing it from the start of the log, where this one lies:
/// had this one the same number, a crash in the middle of the kernel's first commit could
/// find this commit block where the kernel's was due and replay a half-written transaction.
/// A gap of 2^20 is more transactions than the kernel writes before its log wraps over the
/// retired one many times, and leaves 4,096 repairs before the numbers come round.
const SEQUENCE_GAP: u32 = 1 << 20;

/// More journal runs than this and the journal is not used (a hostile map could be huge).
const MAX_RUNS: usize = 1 << 20;

/// One transaction, ready to write.
pub struct Transaction {
    /// Descriptor and data blocks in log order: (device offset, contents).
    log: Vec<(u64, Vec<u8>)>,
    commit: (u64, Vec<u8>),
    jsb_offset: u64,
    /// The journal superblock pointing at the transaction, then emptied after it.
    jsb_committed: Vec<u8>,
    jsb_empty: Vec<u8>,
    /// Final contents of every changed block (the superblock's block flagged).
    in_place: Vec<Record>,
    /// The device's primary superblock with `needs_recovery` set, and the repaired one.
    sb_flagged: Vec<u8>,
    sb_final: Vec<u8>,
    /// The transaction's sequence number.
    pub sequence: u32,
}

impl Transaction {
    /// File system blocks the transaction logs.
    pub fn blocks(&self) -> usize {
        self.in_place.len()
    }

    /// Journal blocks it takes (descriptors, data, commit).
    pub fn log_blocks(&self) -> usize {
        self.log.len() + 1
    }

    /// Every byte range the commit writes, for an undo file to save first (the data are the
    /// new contents; only offsets and lengths matter to it).
    pub fn touched(&self) -> Vec<Record> {
        let mut v: Vec<Record> = self
            .log
            .iter()
            .chain(std::iter::once(&self.commit))
            .map(|(o, d)| Record {
                offset: *o,
                data: d.clone(),
            })
            .collect();
        v.push(Record {
            offset: self.jsb_offset,
            data: self.jsb_committed.clone(),
        });
        v.push(Record {
            offset: SUPERBLOCK_OFFSET,
            data: self.sb_final.clone(),
        });
        v.extend(self.in_place.iter().cloned());
        v
    }

    /// Write the transaction, apply it in place and retire it (see the module comment).
    pub fn commit(&self, dev: &dyn Device) -> ffsck_io::Result<()> {
        for (off, b) in &self.log {
            dev.write_at(b, *off)?;
        }
        dev.flush()?;
        dev.write_at(&self.commit.1, self.commit.0)?;
        dev.flush()?;
        dev.write_at(&self.jsb_committed, self.jsb_offset)?;
        dev.flush()?;
        dev.write_at(&self.sb_flagged, SUPERBLOCK_OFFSET)?;
        dev.flush()?;
        for r in &self.in_place {
            dev.write_at(&r.data, r.offset)?;
        }
        dev.flush()?;
        dev.write_at(&self.jsb_empty, self.jsb_offset)?;
        dev.flush()?;
        dev.write_at(&self.sb_final, SUPERBLOCK_OFFSET)?;
        dev.flush()
    }
}

/// The file system opened as pass 0 opens it, findings discarded. A bad MMP block or feature
/// bits no backup holds (which the repair rewrites or clears; it moves nothing) do not keep
/// the layout from being read.
fn open(dev: Arc<dyn Device>) -> Result<pass0::Pass0Facts, String> {
    let mut scratch = Findings::default();
    let hint = SuperHint::default();
    match pass0::run(dev.clone(), hint, Policy::No, &mut scratch) {
        Err(pass0::OpenFailure::Mmp(_) | pass0::OpenFailure::Unsupported(_)) => {
            let throwaway: Arc<dyn Device> = Arc::new(ffsck_io::overlay::Overlay::new(dev));
            pass0::run(throwaway, hint, Policy::Yes, &mut scratch)
        }
        opened => opened,
    }
    .map_err(|e| format!("the file system cannot be opened ({e:?})"))
}

/// The superblock bytes at 1024 with `needs_recovery` set or cleared (checksum updated).
fn with_recover(sb: &[u8], on: bool) -> Option<Vec<u8>> {
    let mut s = RawSuperblock::read_from_bytes(sb.get(..SUPERBLOCK_SIZE)?).ok()?;
    let inc = s.s_feature_incompat.get();
    s.s_feature_incompat.set(if on {
        inc | Incompat::RECOVER
    } else {
        inc & !Incompat::RECOVER
    });
    if s.has_metadata_csum() {
        let c = s.compute_checksum();
        s.s_checksum.set(c);
    }
    Some(s.as_bytes().to_vec())
}

/// Where an internal journal lives: its inode's bytes, its data runs `(lblk, pblk, len)` up
/// to the journal's length, and its mapping blocks.
#[derive(PartialEq, Eq, Debug)]
struct Place {
    inode: Vec<u8>,
    runs: Vec<(u64, u64, u64)>,
    meta: Vec<u64>,
}

fn place(fs: &Fs, j: &Journal) -> Result<Place, String> {
    let inum = fs.sb.s_journal_inum.get();
    let inode = fs
        .read_inode(inum)
        .ok_or("the journal inode cannot be read")?;
    let raw = RawInode::parse(&inode);
    let mut runs: Vec<(u64, u64, u64)> = Vec::new();
    let mut meta = Vec::new();
    let mut too_many = false;
    let total = j.total_len;
    let mut visit = |v: Visit| -> bool {
        match v {
            Visit::Meta { pblk } => {
                meta.push(pblk);
                meta.len() < MAX_RUNS
            }
            Visit::Data { lblk, pblk } => {
                if lblk >= total {
                    return false;
                }
                match runs.last_mut() {
                    Some(r) if r.0 + r.2 == lblk && r.1 + r.2 == pblk => r.2 += 1,
                    _ => runs.push((lblk, pblk, 1)),
                }
                too_many = runs.len() >= MAX_RUNS;
                !too_many && lblk + 1 < total
            }
        }
    };
    let extents = raw.flags() & flags::EXTENTS != 0;
    filemap::walk(fs, &raw.block_bytes(), extents, false, &mut visit);
    if too_many || meta.len() >= MAX_RUNS {
        return Err("the journal is too fragmented".into());
    }
    let mapped: u64 = runs.iter().map(|r| r.2).sum();
    if mapped != total {
        return Err("the journal's blocks are not all mapped".into());
    }
    meta.sort_unstable();
    Ok(Place { inode, runs, meta })
}

impl Place {
    fn lookup(&self, lblk: u64) -> Option<u64> {
        let i = self.runs.partition_point(|r| r.0 + r.2 <= lblk);
        let r = self.runs.get(i)?;
        (r.0 <= lblk).then(|| r.1 + (lblk - r.0))
    }
    /// Does physical block `b` belong to the journal (log or mapping)?
    /// The device offset of journal block `lblk`, as an error if it is not mapped.
    fn offset(&self, lblk: u64, bsu: u64) -> Result<u64, String> {
        self.lookup(lblk)
            .map(|p| p * bsu)
            .ok_or_else(|| format!("journal block {lblk} is not mapped"))
    }

    fn holds(&self, b: u64) -> bool {
        self.meta.binary_search(&b).is_ok() || self.runs.iter().any(|r| b >= r.1 && b < r.1 + r.2)
    }
}

/// The journal superblock with the fields a transaction moves zeroed, to compare two states.
fn jsb_identity(sb: &JournalSuperblock) -> Vec<u8> {
    let mut s = sb.clone();
    s.s_start.set(0);
    s.s_sequence.set(0);
    s.s_checksum.set(0);
    s.as_bytes().to_vec()
}

/// The located, verified internal journal of an opened file system.
fn usable_journal(p0: &pass0::Pass0Facts) -> Result<&Journal, String> {
    let sb = &p0.fs.sb;
    if !sb.compat().has(Compat::HAS_JOURNAL) {
        return Err("the file system has no journal".into());
    }
    if sb.incompat().has(Incompat::JOURNAL_DEV) || sb.s_journal_inum.get() == 0 {
        return Err("the journal is external".into());
    }
    let j = p0
        .journal
        .journal
        .as_ref()
        .ok_or("the journal is not usable")?;
    if j.ext.is_some() {
        return Err("the journal is external".into());
    }
    Ok(j)
}

/// Build the transaction that commits `changes` (final contents of byte ranges of `dev`), or
/// say why the journal cannot carry it. `now` is the commit time (seconds, nanoseconds).
pub fn prepare(
    dev: Arc<dyn Device>,
    changes: &[Record],
    now: (u64, u32),
) -> Result<Transaction, String> {
    let before = open(dev.clone())?;
    let j = usable_journal(&before)?;
    let fs = &before.fs;
    if fs.sb.incompat().has(Incompat::RECOVER) || j.sb.s_start.get() != 0 {
        return Err("the journal holds transactions not yet replayed".into());
    }
    let jsb = &j.sb;
    let bs = fs.block_size();
    jsb.verify(fs.geo.block_size, j.total_len)
        .map_err(|e| format!("the journal superblock is not usable ({e:?})"))?;
    if jsb.compat() & !feature::COMPAT_CHECKSUM != 0 {
        return Err("the journal has unknown compatible features".into());
    }
    if jsb.s_errno.get() != 0 {
        return Err("the journal records an error".into());
    }
    if j.total_len < u64::from(MIN_JOURNAL_BLOCKS) {
        return Err("the journal is too small".into());
    }
    let here = place(fs, j)?;

    // The repaired state: the journal must be the same there.
    let ov = Arc::new(Overlay::new(dev.clone()));
    for r in changes {
        ov.write_at(&r.data, r.offset)
            .map_err(|e| format!("the repair's changes do not fit the device ({e})"))?;
    }
    let after = open(ov.clone())?;
    let ja = usable_journal(&after).map_err(|why| format!("after the repair, {why}"))?;
    if after.fs.sb.s_journal_inum.get() != fs.sb.s_journal_inum.get()
        || ja.total_len != j.total_len
        || jsb_identity(&ja.sb) != jsb_identity(jsb)
        || place(&after.fs, ja).ok().as_ref() != Some(&here)
    {
        return Err("the repair changes the journal".into());
    }
    if after.fs.sb.incompat().has(Incompat::RECOVER) {
        return Err("the repaired file system would need recovery".into());
    }

    // The changed blocks, their final contents.
    let bsu = bs as u64;
    let mut in_place = changed_blocks(fs, &*dev, &*ov, &here, changes)?;

    // The primary superblock: flagged on the device now and in the logged copy.
    let mut sb_now = vec![0u8; SUPERBLOCK_SIZE];
    dev.read_at(&mut sb_now, SUPERBLOCK_OFFSET)
        .map_err(|e| format!("cannot read the superblock ({e})"))?;
    let mut sb_final = vec![0u8; SUPERBLOCK_SIZE];
    ov.read_at(&mut sb_final, SUPERBLOCK_OFFSET)
        .map_err(|e| format!("cannot read the superblock ({e})"))?;
    let sb_flagged = with_recover(&sb_now, true).ok_or("the superblock cannot be parsed")?;
    let sb_final_flagged =
        with_recover(&sb_final, true).ok_or("the superblock cannot be parsed")?;
    for r in in_place.iter_mut() {
        let (s, e) = (r.offset, r.offset + bsu);
        if s <= SUPERBLOCK_OFFSET && SUPERBLOCK_OFFSET + SUPERBLOCK_SIZE as u64 <= e {
            let at = (SUPERBLOCK_OFFSET - s) as usize;
            r.data[at..at + SUPERBLOCK_SIZE].copy_from_slice(&sb_final_flagged);
        }
    }

    // Room in the log: from s_first, without wrapping, before the fast-commit area.
    let fmt = LogFormat::of(jsb);
    let per = fmt.tags_per_descriptor();
    if per == 0 || fmt.block_size != bs {
        return Err("the journal's block size does not allow descriptors".into());
    }
    let n = in_place.len();
    let descriptors = n.div_ceil(per);
    let needed = (descriptors + n + 1) as u64;
    let first = u64::from(jsb.s_first.get());
    let end = j
        .total_len
        .saturating_sub(u64::from(jsb.fast_commit_blocks()));
    if first == 0 || first.saturating_add(needed) > end {
        return Err(format!(
            "the repair ({n} blocks) does not fit in the journal ({} log blocks)",
            end.saturating_sub(first)
        ));
    }

    // The transaction, numbered well past any the kernel may still use (see SEQUENCE_GAP).
    let seq = jsb.s_sequence.get().wrapping_add(SEQUENCE_GAP);
    let (log, pos, crc) = log_blocks(&fmt, &here, &in_place, (seq, &jsb.s_uuid), first, bsu)?;
    let phys = |lblk: u64| here.offset(lblk, bsu);
    let commit = (phys(pos)?, fmt.commit(seq, now.0, now.1, crc));

    let jsb_offset = phys(0)?;
    let mut committed = jsb.clone();
    committed.s_start.set(first as u32);
    committed.s_sequence.set(seq);
    committed.update_checksum();
    let mut empty = jsb.clone();
    empty.s_start.set(0);
    empty.s_sequence.set(seq.wrapping_add(1));
    empty.update_checksum();
    Ok(Transaction {
        log,
        commit,
        jsb_offset,
        jsb_committed: committed.as_bytes().to_vec(),
        jsb_empty: empty.as_bytes().to_vec(),
        in_place,
        sb_flagged,
        sb_final: with_recover(&sb_final, false).ok_or("the superblock cannot be parsed")?,
        sequence: seq,
    })
}

/// The blocks `changes` touch whose contents in `ov` (the repaired state) differ from `dev`,
/// with their final contents, ascending; none may lie in the journal's blocks (`here`).
fn changed_blocks(
    fs: &Fs,
    dev: &dyn Device,
    ov: &dyn Device,
    here: &Place,
    changes: &[Record],
) -> Result<Vec<Record>, String> {
    let bs = fs.block_size();
    let bsu = bs as u64;
    let mut blocks: Vec<u64> = Vec::new();
    for r in changes {
        if r.data.is_empty() {
            continue;
        }
        let first = r.offset / bsu;
        let last = (r.offset + r.data.len() as u64 - 1) / bsu;
        if last >= fs.geo.blocks_count {
            return Err("the repair writes past the end of the file system".into());
        }
        for b in first..=last {
            if blocks.last() != Some(&b) {
                blocks.push(b);
            }
        }
    }
    blocks.sort_unstable();
    blocks.dedup();
    let mut in_place = Vec::new();
    let mut old = vec![0u8; bs];
    for &b in &blocks {
        let mut new = vec![0u8; bs];
        ov.read_at(&mut new, b * bsu)
            .and_then(|_| dev.read_at(&mut old, b * bsu))
            .map_err(|e| format!("cannot read block {b} ({e})"))?;
        if new == old {
            continue;
        }
        if here.holds(b) {
            return Err("the repair writes into the journal's blocks".into());
        }
        in_place.push(Record {
            offset: b * bsu,
            data: new,
        });
    }

    Ok(in_place)
}

/// Log blocks at their device offsets, the log block after them and the log's running CRC32.
type LogBlocks = (Vec<(u64, Vec<u8>)>, u64, u32);

/// The log blocks of transaction `seq` holding `in_place` (descriptor blocks, each followed
/// by the escaped data blocks it tags), from log block `first`, at their device offsets; with
/// the log block after them (the commit's) and the running CRC32 of the log for a
/// `COMPAT_CHECKSUM` commit.
fn log_blocks(
    fmt: &LogFormat,
    here: &Place,
    in_place: &[Record],
    (seq, uuid): (u32, &[u8; 16]),
    first: u64,
    bsu: u64,
) -> Result<LogBlocks, String> {
    let per = fmt.tags_per_descriptor();
    let mut log = Vec::with_capacity(in_place.len().div_ceil(per) + in_place.len());
    let mut pos = first;
    let mut crc = !0u32;
    let phys = |lblk: u64| here.offset(lblk, bsu);
    for group in in_place.chunks(per) {
        let mut tags = Vec::with_capacity(group.len());
        let mut datas = Vec::with_capacity(group.len());
        for r in group {
            let mut logged = r.data.clone();
            let escaped = escape(&mut logged);
            tags.push(BlockTag {
                blocknr: r.offset / bsu,
                flags: if escaped {
                    ffsck_format::journal::tag_flag::ESCAPE
                } else {
                    0
                },
                checksum: fmt.data_checksum(seq, &logged),
            });
            datas.push(logged);
        }
        let desc = fmt
            .descriptor(seq, uuid, &tags)
            .ok_or("a block number does not fit the journal's tags")?;
        if fmt.compat_checksum {
            crc = crc32_be(crc, &desc);
        }
        log.push((phys(pos)?, desc));
        pos += 1;
        for d in datas {
            if fmt.compat_checksum {
                crc = crc32_be(crc, &d);
            }
            log.push((phys(pos)?, d));
            pos += 1;
        }
    }
    Ok((log, pos, crc))
}

/// A journal replay to make on the device before the generation is committed.
pub struct DeviceReplay {
    pub replay: Replay,
    /// (For a log run without the flag: the superblock flagged first.) Then the replayed
    /// blocks, the superblock still flagged and the journal superblock as it is; the emptied
    /// journal superblock; the superblock unflagged.
    phases: Vec<Vec<Record>>,
}

impl DeviceReplay {
    /// Every byte range the replay writes (for an undo file).
    pub fn touched(&self) -> Vec<Record> {
        self.phases.iter().flatten().cloned().collect()
    }

    /// Write the replay: each phase written and flushed before the next.
    pub fn apply(&self, dev: &dyn Device) -> ffsck_io::Result<()> {
        for phase in &self.phases {
            for r in phase {
                dev.write_at(&r.data, r.offset)?;
            }
            dev.flush()?;
        }
        Ok(())
    }
}

/// Plan the replay of the internal journal on `dev` if it needs recovery. `changes` are the
/// repair generation (final contents, relative to `dev` as it is now), which the engine
/// computed on the replayed state: the replay is usable only if every byte it changes lies
/// in the generation (the two replays agree), else `Err` says why and the caller commits
/// replay and repair together another way. `Ok(None)`: nothing to replay.
pub fn plan_replay(
    dev: Arc<dyn Device>,
    changes: &[Record],
) -> Result<Option<DeviceReplay>, String> {
    let p0 = open(dev.clone())?;
    let flagged = p0.fs.sb.incompat().has(Incompat::RECOVER);
    let Some(j) = p0.journal.journal.as_ref().filter(|j| j.ext.is_none()) else {
        return if flagged {
            usable_journal(&p0).map(|_| None)
        } else {
            Ok(None)
        };
    };
    let jsb_off = j
        .sb_offset(&p0.fs)
        .ok_or("the journal superblock is not mapped")?;
    // A log without the flag is replayed only where the repair ran it anyway (e2fsck's "run
    // journal anyway"): its generation then holds the emptied journal superblock.
    let ran_anyway = !flagged && j.sb.s_start.get() != 0 && {
        let staged = changes
            .iter()
            .find(|c| c.offset <= jsb_off && jsb_off + 1024 <= c.offset + c.data.len() as u64);
        staged.is_some_and(|c| {
            let at = (jsb_off - c.offset) as usize;
            JournalSuperblock::parse(&c.data[at..]).is_some_and(|s| s.s_start.get() == 0)
        })
    };
    if !flagged && !ran_anyway {
        return Ok(None);
    }
    let replay = recovery::plan(&p0.fs, j);
    let covered = |off: u64, len: u64| {
        changes
            .iter()
            .any(|c| c.offset <= off && off + len <= c.offset + c.data.len() as u64)
    };
    let chunk = ffsck_io::overlay::CHUNK;
    for r in &replay.records {
        let mut cur = vec![0u8; r.data.len()];
        dev.read_at(&mut cur, r.offset)
            .map_err(|e| format!("cannot read the device ({e})"))?;
        let mut at = 0usize;
        while at < r.data.len() {
            let off = r.offset + at as u64;
            let len = (chunk - off % chunk).min((r.data.len() - at) as u64) as usize;
            if cur[at..at + len] != r.data[at..at + len] && !covered(off, len as u64) {
                return Err("the journal replay differs from the repair's".into());
            }
            at += len;
        }
    }
    device_replay(&*dev, replay, jsb_off, ran_anyway).map(Some)
}

/// Recover the internal journal of the file system on `dev` by itself, before any check, as
/// e2fsck does before it starts over on the recovered file system. `Ok(None)`: nothing to
/// recover. `Err` says why it is left to the check (which replays it with the repair): no
/// `needs_recovery`, an external or unusable journal, a log with corruption or anything
/// else a check has to report, or a file system that does not open cleanly. `now` is the
/// run's clock (seconds since the epoch, 0 for none), as `CheckOptions::now`.
pub fn recover_now(dev: Arc<dyn Device>, now: u64) -> Result<Option<DeviceReplay>, String> {
    let mut found = Findings::default();
    let p0 = pass0::run_with(
        dev.clone(),
        SuperHint::default(),
        Policy::No,
        None,
        now,
        &mut found,
    )
    .map_err(|e| format!("the file system cannot be opened ({e:?})"))?;
    if !p0.fs.sb.incompat().has(Incompat::RECOVER) {
        return Ok(None);
    }
    if p0.fs.sb_block != 0 {
        return Err("the primary superblock is not usable".into());
    }
    if found
        .0
        .iter()
        .any(|f| f.problem.info().flags & crate::problem::flag::INFO == 0)
    {
        return Err("the file system has problems to report first".into());
    }
    let j = usable_journal(&p0)?;
    let jsb_off = j
        .sb_offset(&p0.fs)
        .ok_or("the journal superblock is not mapped")?;
    let replay = recovery::plan(&p0.fs, j);
    if !replay.issues.is_empty()
        || replay.failed_commit.is_some()
        || replay.fast_commit_skipped
        || !replay.journal_records.is_empty()
    {
        return Err("the journal has problems to report".into());
    }
    device_replay(&*dev, replay, jsb_off, false).map(Some)
}

/// The phases that write `replay` on `dev` (see [`DeviceReplay`]).
fn device_replay(
    dev: &dyn Device,
    replay: Replay,
    jsb_off: u64,
    ran_anyway: bool,
) -> Result<DeviceReplay, String> {
    let mut jsb_now = vec![0u8; 1024];
    dev.read_at(&mut jsb_now, jsb_off)
        .map_err(|e| format!("cannot read the journal superblock ({e})"))?;
    let final_at = |off: u64, len: usize| -> Option<Vec<u8>> {
        let r = replay
            .records
            .iter()
            .rev()
            .find(|r| r.offset <= off && off + len as u64 <= r.offset + r.data.len() as u64)?;
        let at = (off - r.offset) as usize;
        Some(r.data[at..at + len].to_vec())
    };
    let sb_final = final_at(SUPERBLOCK_OFFSET, SUPERBLOCK_SIZE).ok_or("no superblock record")?;
    let jsb_final = final_at(jsb_off, 1024).ok_or("no journal superblock record")?;
    let sb_flagged = with_recover(&sb_final, true).ok_or("the superblock cannot be parsed")?;
    let mut first = Vec::new();
    for r in &replay.records {
        let mut data = r.data.clone();
        patch(&mut data, r.offset, SUPERBLOCK_OFFSET, &sb_flagged);
        patch(&mut data, r.offset, jsb_off, &jsb_now);
        first.push(Record {
            offset: r.offset,
            data,
        });
    }
    let mut phases = Vec::new();
    if ran_anyway {
        // The flag first, so a crash during the replay leaves the log to be replayed again.
        let mut sb_now = vec![0u8; SUPERBLOCK_SIZE];
        dev.read_at(&mut sb_now, SUPERBLOCK_OFFSET)
            .map_err(|e| format!("cannot read the superblock ({e})"))?;
        phases.push(vec![Record {
            offset: SUPERBLOCK_OFFSET,
            data: with_recover(&sb_now, true).ok_or("the superblock cannot be parsed")?,
        }]);
    }
    phases.extend([
        first,
        vec![Record {
            offset: jsb_off,
            data: jsb_final,
        }],
        vec![Record {
            offset: SUPERBLOCK_OFFSET,
            data: sb_final,
        }],
    ]);
    Ok(DeviceReplay { replay, phases })
}

/// Overwrite the part of `data` (device bytes from `at`) that `bytes` (from `off`) covers.
fn patch(data: &mut [u8], at: u64, off: u64, bytes: &[u8]) {
    let (s, e) = (at, at + data.len() as u64);
    let (bs, be) = (off, off + bytes.len() as u64);
    let (from, to) = (s.max(bs), e.min(be));
    if from < to {
        data[(from - s) as usize..(to - s) as usize]
            .copy_from_slice(&bytes[(from - bs) as usize..(to - bs) as usize]);
    }
}
