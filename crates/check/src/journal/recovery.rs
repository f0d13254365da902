//! Journal recovery: replays the committed transactions of the internal jbd2 journal, as the
//! kernel does at mount and e2fsck does before checking, and says which bytes that writes.
//!
//! Recovery is computed, never applied here: the result is a list of byte-range writes
//! (`Record`s) that a caller applies to an `Overlay` (a read-only check runs on the replayed
//! file system without writing anything) or commits through the redo log (a repair).
//!
//! Three passes over the log, as jbd2 defines them:
//! * scan: from `s_start`/`s_sequence`, follow descriptor, revoke and commit blocks while the
//!   sequence numbers match, and find the end of the valid log: the first transaction without
//!   a valid commit block (a bad commit checksum ends the log there);
//! * revoke: collect the revoke records of the committed transactions (latest wins);
//! * replay: write each logged block that no later-or-equal revoke cancels, unescaping blocks
//!   whose first word was jbd2's magic, verifying v2/v3 data-block checksums.
//!
//! Then, as recovery does, the journal is marked empty (`s_start = 0`, next sequence) and the
//! file system's `needs_recovery` flag is cleared.
//!
//! The log is hostile input: every walk is bounded by the log length (a log can wrap, and a
//! forged one can cycle), descriptor tags naming blocks outside the file system are refused,
//! counts are checked against the block size, and every corruption is a finding, never a panic.
//! Fast commits after the last full commit are then replayed by `fast_commit`.

use crate::fs::Fs;
use crate::journal::Journal;
use crate::problem::Problem as P;
use crate::report::{Findings, Policy, ProblemCtx};
use ffsck_format::csum::ext4_crc32c;
use ffsck_format::journal::{
    blocktype, crc32_be, fc_tag, feature, tag_flag, CommitHeader, JournalHeader, TagLayout,
    BLOCK_TAIL_BYTES, COMMIT_CHKSUM_OFFSET, CRC32_CHKSUM, CRC32_CHKSUM_SIZE, JBD2_MAGIC_NUMBER,
    REVOKE_HEADER_BYTES,
};
use ffsck_format::superblock::{STATE_ERROR, STATE_VALID};
use ffsck_format::{Incompat, RawSuperblock, SUPERBLOCK_OFFSET, SUPERBLOCK_SIZE};
use ffsck_io::logfile::Record;
use ffsck_io::Device;
use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use zerocopy::{FromBytes, IntoBytes};

/// What recovery found and the writes it amounts to.
#[derive(Clone, Debug, Default)]
pub struct Replay {
    /// The writes, in the order they must be applied: replayed blocks (ascending), then the
    /// journal superblock and the file system superblock.
    pub records: Vec<Record>,
    /// First transaction of the log (`s_sequence`) and the first one not replayed.
    pub first_transaction: u32,
    pub end_transaction: u32,
    /// Committed transactions replayed.
    pub transactions: u32,
    /// Distinct file system blocks written by the replay.
    pub blocks: u64,
    /// Logged blocks skipped because a revoke record cancels them.
    pub revoked: u64,
    /// Replayed blocks that were escaped in the log (their first word was jbd2's magic).
    pub escaped: u64,
    /// The replayed log wrapped from the end of the log area back to its start.
    pub wrapped: bool,
    /// A transaction whose commit block failed its checksum (e2fsck: replay was aborted).
    pub failed_commit: Option<u32>,
    /// The fast-commit area holds commits after the last full one, which were not replayed
    /// (the full replay failed).
    pub fast_commit_skipped: bool,
    /// Fast-commit records replayed, and records after the last valid tail discarded.
    pub fast_commit_tags: u32,
    pub fast_commit_discarded: u32,
    /// Writes to the external journal device (its reset superblock), empty for an internal
    /// journal. A repair applies them only after the file system's writes are committed.
    pub journal_records: Vec<Record>,
    /// Findings about the log itself (corruption, checksum errors), for the caller to report.
    pub issues: Vec<(P, ProblemCtx)>,
}

impl Replay {
    /// Report the recovery and its issues as findings. `in_memory` is true when the writes
    /// go to an overlay only (a read-only check).
    pub(crate) fn report(&self, policy: Policy, in_memory: bool, out: &mut Findings) {
        let where_ = if in_memory {
            "journal replayed in memory; nothing written"
        } else {
            "replayed"
        };
        let fc = if self.fast_commit_tags > 0 {
            format!("; {} fast-commit records", self.fast_commit_tags)
        } else {
            String::new()
        };
        let msg = if self.transactions == 0 {
            format!("no committed transactions{fc}; {where_}")
        } else {
            format!(
                "transactions {}-{}, {} blocks, {} revoked{fc}; {where_}",
                self.first_transaction,
                self.end_transaction.wrapping_sub(1),
                self.blocks,
                self.revoked
            )
        };
        out.report(
            policy,
            P::P0_JOURNAL_RECOVERING,
            ProblemCtx {
                num: u64::from(self.transactions),
                num2: self.blocks,
                str: Some(msg),
                ..Default::default()
            },
        );
        for (p, ctx) in &self.issues {
            out.report(policy, *p, ctx.clone());
        }
    }
}

/// Why recovery could not even be planned (operational failures, not corruption).
#[derive(Debug, thiserror::Error)]
pub enum ReplayError {
    #[error("cannot open the file system: {0}")]
    Open(String),
    #[error("the file system has no usable internal journal")]
    NoJournal,
}

/// Library entry point: open the file system on `dev`, locate its journal, and plan the
/// recovery. Returns `Ok(None)` when the file system does not need recovery. The records can
/// be applied to an `Overlay` or committed with `RedoLog::commit_and_apply`.
pub fn replay(dev: Arc<dyn Device>) -> Result<Option<Replay>, ReplayError> {
    let mut scratch = Findings::default();
    let p0 = crate::pass0::run(dev, Default::default(), Policy::No, &mut scratch)
        .map_err(|e| ReplayError::Open(format!("{e:?}")))?;
    if !p0.fs.sb.incompat().has(Incompat::RECOVER) {
        return Ok(None);
    }
    let j = p0.journal.journal.as_ref().ok_or(ReplayError::NoJournal)?;
    Ok(Some(plan(&p0.fs, j)))
}

/// Plan the recovery of `journal` on `fs` (whose superblock has `needs_recovery`).
pub fn plan(fs: &Fs, journal: &Journal) -> Replay {
    let log = Log::new(fs, journal);
    let mut r = Replay {
        first_transaction: journal.sb.s_sequence.get(),
        end_transaction: journal.sb.s_sequence.get(),
        ..Default::default()
    };
    let mut writes = BTreeMap::new();
    let mut scan_ok = true;
    match &log {
        Err(why) => {
            r.issues.push(corrupted(why.clone()));
            scan_ok = false;
        }
        Ok(log) if journal.sb.s_start.get() == 0 => {
            // An empty log: nothing to replay, but recovery still moves the sequence on.
            let _ = log;
        }
        Ok(log) => match log.scan(&mut r) {
            Ok(txs) => match revoke_pass(&txs) {
                Ok(revokes) => {
                    log.replay_pass(&txs, &revokes, &mut writes, &mut r);
                    r.transactions = txs.len() as u32;
                }
                Err(why) => {
                    // A failed revoke pass replays nothing, as jbd2.
                    r.issues.push(corrupted(why));
                    scan_ok = false;
                }
            },
            Err(issue) => {
                // A scan failure replays nothing (as jbd2), but the journal is still reset.
                r.issues.push(*issue);
                scan_ok = false;
            }
        },
    }
    if let Ok(log) = &log {
        if scan_ok {
            // Fast commits follow the last full commit: replay them on top of it.
            let fc = super::fast_commit::replay(
                fs,
                journal,
                log.fc_first(),
                r.end_transaction,
                &mut writes,
                &mut r.issues,
            );
            r.fast_commit_tags = fc.tags;
            r.fast_commit_discarded = fc.discarded;
        } else {
            r.fast_commit_skipped = log.fast_commits_pending(r.end_transaction);
            if r.fast_commit_skipped {
                r.issues.push((
                    P::P0_JOURNAL_FC_NOT_REPLAYED,
                    ProblemCtx {
                        num: u64::from(r.end_transaction),
                        ..Default::default()
                    },
                ));
            }
        }
    }
    if let Some(t) = r.failed_commit {
        r.issues.push((
            P::P0_JNL_TXN_CORRUPT,
            ProblemCtx {
                ino: t,
                num: u64::from(t),
                ..Default::default()
            },
        ));
    }
    r.blocks = writes.len() as u64;
    let bs = u64::from(fs.geo.block_size);
    r.records = writes
        .into_iter()
        .map(|(blk, data)| Record {
            offset: blk * bs,
            data,
        })
        .collect();
    finish_superblocks(fs, journal, &mut r, !scan_ok);
    r
}

fn corrupted(why: String) -> (P, ProblemCtx) {
    (
        P::P0_JOURNAL_CORRUPTED,
        ProblemCtx {
            str: Some(why),
            ..Default::default()
        },
    )
}

/// The journal superblock marked empty and the file system superblock without
/// `needs_recovery`, as the last two records. Where a replayed block covers a superblock, the
/// replayed contents are the base (the kernel journals the superblock's block).
///
/// As e2fsck after recovery: a failed scan leaves the file system not clean (`scan_failed`);
/// a corrupt commit, or an error the kernel recorded in the journal (`s_errno`), marks it as
/// having errors and clears the journal's copy, so the check that follows sees it as e2fsck's
/// second journal check leaves it.
fn finish_superblocks(fs: &Fs, journal: &Journal, r: &mut Replay, scan_failed: bool) {
    let mut jsb = journal.sb.clone();
    let errored = r.failed_commit.is_some() || jsb.s_errno.get() != 0;
    jsb.s_errno.set(0);
    // The next transaction after the last one recovered (or seen, on a failed scan).
    jsb.s_sequence.set(r.end_transaction.wrapping_add(1));
    jsb.s_start.set(0);
    if jsb.has_csum_v2or3() {
        let c = jsb.compute_checksum();
        jsb.s_checksum.set(c);
    }
    if journal.ext.is_some() {
        // The external journal's superblock goes to its own device, not the file system's.
        if let Some(off) = journal.sb_offset(fs) {
            r.journal_records.push(Record {
                offset: off,
                data: jsb.as_bytes().to_vec(),
            });
        }
    } else if let Some(pblk) = journal.runs.lookup(0) {
        let off = pblk * u64::from(fs.geo.block_size);
        put_bytes(fs, &mut r.records, off, jsb.as_bytes());
    }

    let mut raw = vec![0u8; SUPERBLOCK_SIZE];
    let off = SUPERBLOCK_OFFSET;
    if fs.dev.read_at(&mut raw, off).is_err() {
        return;
    }
    overlay_records(&r.records, off, &mut raw);
    let Ok(mut sb) = RawSuperblock::read_from_bytes(&raw[..]) else {
        return;
    };
    let inc = sb.s_feature_incompat.get() & !Incompat::RECOVER;
    sb.s_feature_incompat.set(inc);
    if scan_failed {
        sb.s_state.set(sb.s_state.get() & !STATE_VALID);
    }
    if errored {
        sb.s_state.set(sb.s_state.get() | STATE_ERROR);
    }
    if sb.has_metadata_csum() {
        let c = sb.compute_checksum();
        sb.s_checksum.set(c);
    }
    put_bytes(fs, &mut r.records, off, sb.as_bytes());
}

/// Copy into `buf` (device bytes from `off`) whatever the records write there.
fn overlay_records(records: &[Record], off: u64, buf: &mut [u8]) {
    let end = off + buf.len() as u64;
    for rec in records {
        let (rs, re) = (rec.offset, rec.offset + rec.data.len() as u64);
        let (from, to) = (rs.max(off), re.min(end));
        if from < to {
            buf[(from - off) as usize..(to - off) as usize]
                .copy_from_slice(&rec.data[(from - rs) as usize..(to - rs) as usize]);
        }
    }
}

/// Write `bytes` at `off`: patched into a replayed block that covers them, else appended.
fn put_bytes(fs: &Fs, records: &mut Vec<Record>, off: u64, bytes: &[u8]) {
    let end = off + bytes.len() as u64;
    if let Some(rec) = records
        .iter_mut()
        .find(|r| r.offset <= off && r.offset + r.data.len() as u64 >= end)
    {
        let at = (off - rec.offset) as usize;
        rec.data[at..at + bytes.len()].copy_from_slice(bytes);
        return;
    }
    let _ = fs;
    records.push(Record {
        offset: off,
        data: bytes.to_vec(),
    });
}

/// One logged block of a transaction: where its copy is in the log and where it goes.
#[derive(Clone, Copy, Debug)]
struct Tagged {
    log_blk: u64,
    blocknr: u64,
    flags: u32,
    checksum: u32,
}

/// A committed transaction as the scan found it.
#[derive(Debug, Default)]
struct Tx {
    seq: u32,
    tags: Vec<Tagged>,
    revokes: Vec<u64>,
    /// Why a revoke block of this transaction cannot be read.
    bad_revoke: Option<String>,
}

/// jbd2 sequence numbers wrap: `a` is at or after `b`.
fn tid_geq(a: u32, b: u32) -> bool {
    (a.wrapping_sub(b) as i32) >= 0
}

/// The log's geometry and reading helpers.
struct Log<'a> {
    fs: &'a Fs,
    j: &'a Journal,
    bs: usize,
    /// First log block and the end of the log area (exclusive; the fast-commit area follows).
    first: u64,
    last: u64,
    layout: TagLayout,
    csum_v23: bool,
    compat_checksum: bool,
    async_commit: bool,
    seed: u32,
}

impl<'a> Log<'a> {
    fn new(fs: &'a Fs, j: &'a Journal) -> Result<Self, String> {
        let sb = &j.sb;
        let first = u64::from(sb.s_first.get());
        let fc = u64::from(sb.fast_commit_blocks());
        let last = j.total_len.saturating_sub(fc);
        if first == 0 || first >= last {
            return Err(format!(
                "the journal superblock's first log block ({first}) is outside the log (1..{last})"
            ));
        }
        let start = u64::from(sb.s_start.get());
        if start != 0 && (start < first || start >= last) {
            return Err(format!(
                "the journal superblock's log start ({start}) is outside the log ({first}..{last})"
            ));
        }
        Ok(Log {
            fs,
            j,
            bs: fs.block_size(),
            first,
            last,
            layout: TagLayout::of(sb),
            csum_v23: sb.has_csum_v2or3(),
            compat_checksum: sb.compat() & feature::COMPAT_CHECKSUM != 0,
            async_commit: sb.incompat() & feature::INCOMPAT_ASYNC_COMMIT != 0,
            seed: sb.csum_seed(),
        })
    }

    fn len(&self) -> u64 {
        self.last - self.first
    }

    /// The log block after `b`, wrapping at the end of the log area.
    fn next(&self, b: u64) -> u64 {
        if b + 1 >= self.last {
            self.first
        } else {
            b + 1
        }
    }

    /// `next`, noting a wrap in `r`.
    fn advance(&self, b: u64, r: &mut Replay) -> u64 {
        let n = self.next(b);
        if n <= b {
            r.wrapped = true;
        }
        n
    }

    /// Read log block `b` (a journal-relative block number).
    fn read(&self, b: u64) -> Result<Vec<u8>, String> {
        if b >= self.j.total_len {
            return Err(format!("log block {b} is past the end of the journal"));
        }
        if self.j.ext.is_some() {
            return self
                .j
                .read_block(self.fs, b)
                .ok_or_else(|| format!("cannot read log block {b} of the external journal"));
        }
        let pblk = self
            .j
            .runs
            .lookup(b)
            .ok_or_else(|| format!("log block {b} is not mapped"))?;
        if !self.fs.geo.is_valid_block(pblk) {
            return Err(format!(
                "log block {b} maps to block {pblk}, outside the file system"
            ));
        }
        self.fs
            .read_block(pblk)
            .ok_or_else(|| format!("cannot read log block {b} (block {pblk})"))
    }

    /// crc32c of the block with the 4 bytes at `at` taken as zero, from the journal seed.
    fn csum_without(&self, buf: &[u8], at: usize) -> u32 {
        let c = ext4_crc32c(self.seed, &buf[..at]);
        let c = ext4_crc32c(c, &[0u8; 4]);
        ext4_crc32c(c, &buf[at + 4..])
    }

    /// The checksum tail of a descriptor or revoke block (always good without v2/v3).
    fn tail_ok(&self, buf: &[u8]) -> bool {
        if !self.csum_v23 {
            return true;
        }
        let at = self.bs - BLOCK_TAIL_BYTES;
        let stored = u32::from_be_bytes([buf[at], buf[at + 1], buf[at + 2], buf[at + 3]]);
        self.csum_without(buf, at) == stored
    }

    /// The tags of a descriptor block, bounded by the block (less the checksum tail).
    fn tags(&self, buf: &[u8]) -> Vec<(u64, u32, u32)> {
        let tb = self.layout.tag_bytes();
        let limit = self.bs - if self.csum_v23 { BLOCK_TAIL_BYTES } else { 0 };
        let mut at = core::mem::size_of::<JournalHeader>();
        let mut out = Vec::new();
        while at + tb <= limit {
            let Some(t) = self.layout.decode(&buf[at..]) else {
                break;
            };
            out.push((t.blocknr, t.flags, t.checksum));
            at += tb;
            if t.flags & tag_flag::SAME_UUID == 0 {
                at += 16;
            }
            if t.flags & tag_flag::LAST_TAG != 0 {
                break;
            }
        }
        out
    }

    /// The revoked block numbers of a revoke block; `Err` if its byte count is impossible.
    fn revokes(&self, buf: &[u8]) -> Result<Vec<u64>, String> {
        let count = u32::from_be_bytes([buf[12], buf[13], buf[14], buf[15]]) as usize;
        let limit = self.bs - if self.csum_v23 { BLOCK_TAIL_BYTES } else { 0 };
        if count > limit {
            return Err(format!(
                "a revoke block claims {count} bytes of records, more than its block holds"
            ));
        }
        let rec = if self.layout.is_64bit { 8 } else { 4 };
        let mut at = REVOKE_HEADER_BYTES;
        let mut out = Vec::new();
        while at + rec <= count {
            let b = &buf[at..at + rec];
            out.push(if rec == 8 {
                u64::from_be_bytes([b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7]])
            } else {
                u64::from(u32::from_be_bytes([b[0], b[1], b[2], b[3]]))
            });
            at += rec;
        }
        Ok(out)
    }

    /// Pass 1: walk the log and return its committed transactions; sets the end transaction
    /// and a failed commit in `r`. `Err` is a scan failure, after which nothing is replayed.
    fn scan(&self, r: &mut Replay) -> Result<Vec<Tx>, Box<(P, ProblemCtx)>> {
        let sb = &self.j.sb;
        let mut seq = sb.s_sequence.get();
        let mut pos = u64::from(sb.s_start.get());
        let mut txs = Vec::new();
        let mut cur = Tx {
            seq,
            ..Default::default()
        };
        let mut end: Option<u32> = None;
        // A descriptor or revoke block failed its checksum: the next commit decides whether
        // this is stale data past the real end (older commit time) or corruption.
        let mut need_check_commit_time = false;
        let mut last_commit_time = 0u64;
        let mut crc_sum = !0u32;
        // Blocks consumed so far: more than the log holds means the log cycles.
        let mut consumed = 0u64;
        let budget = self.len();
        loop {
            if consumed >= budget {
                // A whole log ends exactly here; a transaction still open has cycled.
                if !cur.tags.is_empty() || !cur.revokes.is_empty() {
                    r.issues.push(corrupted(format!(
                        "transaction {seq} does not end within the {budget} blocks of the log"
                    )));
                }
                break;
            }
            let buf = match self.read(pos) {
                Ok(b) => b,
                Err(why) => return Err(corrupted(why).into()),
            };
            pos = self.advance(pos, r);
            consumed += 1;
            let Ok((h, _)) = JournalHeader::read_from_prefix(&buf[..]) else {
                break;
            };
            if h.h_magic.get() != JBD2_MAGIC_NUMBER || h.h_sequence.get() != seq {
                break;
            }
            match h.h_blocktype.get() {
                blocktype::DESCRIPTOR => {
                    if !self.tail_ok(&buf) {
                        need_check_commit_time = true;
                    }
                    let sum = self.compat_checksum && !need_check_commit_time && end.is_none();
                    if sum {
                        crc_sum = crc32_be(crc_sum, &buf);
                    }
                    for (blocknr, flags, checksum) in self.tags(&buf) {
                        if consumed >= budget {
                            break;
                        }
                        if sum {
                            match self.read(pos) {
                                Ok(d) => crc_sum = crc32_be(crc_sum, &d),
                                Err(why) => return Err(corrupted(why).into()),
                            }
                        }
                        cur.tags.push(Tagged {
                            log_blk: pos,
                            blocknr,
                            flags,
                            checksum,
                        });
                        pos = self.advance(pos, r);
                        consumed += 1;
                    }
                }
                blocktype::REVOKE => {
                    if !self.tail_ok(&buf) {
                        need_check_commit_time = true;
                    }
                    // A bad record count matters only if the transaction commits: jbd2 reads
                    // revoke records in its revoke pass, which stops at the end of the log.
                    match self.revokes(&buf) {
                        Ok(v) => cur.revokes.extend(v),
                        Err(why) => cur.bad_revoke = cur.bad_revoke.take().or(Some(why)),
                    }
                }
                blocktype::COMMIT => {
                    let Some(ch) = CommitHeader::parse(&buf) else {
                        break;
                    };
                    let commit_time = ch.h_commit_sec.get();
                    if need_check_commit_time {
                        if commit_time >= last_commit_time {
                            return Err(Box::new((
                                P::P0_JOURNAL_CHECKSUM_ERROR,
                                ProblemCtx {
                                    num: u64::from(seq),
                                    str: Some(format!(
                                        "a descriptor or revoke block of transaction {seq} \
                                         fails its checksum"
                                    )),
                                    ..Default::default()
                                },
                            )));
                        }
                        // Older than its predecessor: stale blocks past the real end.
                        break;
                    }
                    let mut bad = false;
                    if self.compat_checksum {
                        if let Some(e) = end {
                            r.failed_commit = Some(e);
                            break;
                        }
                        let found = ch.h_chksum[0].get();
                        let ok = (crc_sum == found
                            && ch.h_chksum_type == CRC32_CHKSUM
                            && ch.h_chksum_size == CRC32_CHKSUM_SIZE)
                            || (ch.h_chksum_type == 0 && ch.h_chksum_size == 0 && found == 0);
                        bad = !ok;
                        crc_sum = !0;
                    }
                    if !bad && self.csum_v23 {
                        let stored = ch.h_chksum[0].get();
                        bad = self.csum_without(&buf, COMMIT_CHKSUM_OFFSET) != stored;
                    }
                    if bad {
                        if commit_time < last_commit_time {
                            break;
                        }
                        if end.is_none() {
                            end = Some(seq);
                        }
                        if !self.async_commit {
                            r.failed_commit = Some(seq);
                            break;
                        }
                    }
                    last_commit_time = commit_time;
                    let done = std::mem::take(&mut cur);
                    if end.is_none() {
                        txs.push(done);
                    }
                    seq = seq.wrapping_add(1);
                    cur.seq = seq;
                }
                _ => break,
            }
        }
        r.end_transaction = end.unwrap_or(seq);
        Ok(txs)
    }

    /// Pass 3: the blocks to write, latest transaction last; skipped blocks become findings.
    fn replay_pass(
        &self,
        txs: &[Tx],
        revokes: &HashMap<u64, u32>,
        writes: &mut BTreeMap<u64, Vec<u8>>,
        r: &mut Replay,
    ) {
        let blocks = self.fs.geo.blocks_count;
        for tx in txs {
            for t in &tx.tags {
                if revokes.get(&t.blocknr).is_some_and(|&s| tid_geq(s, tx.seq)) {
                    r.revoked += 1;
                    continue;
                }
                if t.blocknr >= blocks {
                    r.issues.push(corrupted(format!(
                        "transaction {} logs block {}, outside the file system ({} blocks); \
                         not replayed",
                        tx.seq, t.blocknr, blocks
                    )));
                    continue;
                }
                let mut data = match self.read(t.log_blk) {
                    Ok(d) => d,
                    Err(why) => {
                        r.issues.push(corrupted(why));
                        continue;
                    }
                };
                if self.csum_v23 && !self.data_csum_ok(t, tx.seq, &data) {
                    r.issues.push((
                        P::P0_JOURNAL_CHECKSUM_ERROR,
                        ProblemCtx {
                            blk: t.blocknr,
                            num: u64::from(tx.seq),
                            str: Some(format!(
                                "the logged copy of block {} in transaction {} fails its \
                                 checksum; not replayed",
                                t.blocknr, tx.seq
                            )),
                            ..Default::default()
                        },
                    ));
                    continue;
                }
                if t.flags & tag_flag::ESCAPE != 0 {
                    r.escaped += 1;
                    data[..4].copy_from_slice(&JBD2_MAGIC_NUMBER.to_be_bytes());
                }
                writes.insert(t.blocknr, data);
            }
        }
    }

    /// A v2/v3 data-block checksum: crc32c over the big-endian sequence, then the block.
    fn data_csum_ok(&self, t: &Tagged, seq: u32, data: &[u8]) -> bool {
        let c = ext4_crc32c(self.seed, &seq.to_be_bytes());
        let c = ext4_crc32c(c, data);
        if self.layout.csum_v3 {
            c == t.checksum
        } else {
            (c & 0xFFFF) == t.checksum
        }
    }

    /// The first block of the fast-commit area: jbd2 leaves one block after the log.
    fn fc_first(&self) -> u64 {
        self.last + 1
    }

    /// Does the fast-commit area start with a head for the transaction after the last full
    /// commit? (Asked when they cannot be replayed.)
    fn fast_commits_pending(&self, end_transaction: u32) -> bool {
        let fc_first = self.fc_first();
        if self.j.sb.fast_commit_blocks() == 0 || fc_first >= self.j.total_len {
            return false;
        }
        let Ok(buf) = self.read(fc_first) else {
            return false;
        };
        // A tag/length record: le16 tag, le16 length, then `fc_features`, `fc_tid`.
        let tag = u16::from_le_bytes([buf[0], buf[1]]);
        let tid = u32::from_le_bytes([buf[8], buf[9], buf[10], buf[11]]);
        tag == fc_tag::HEAD && tid == end_transaction
    }
}

/// Pass 2: each revoked block and the latest transaction that revokes it.
fn revoke_pass(txs: &[Tx]) -> Result<HashMap<u64, u32>, String> {
    let mut table: HashMap<u64, u32> = HashMap::new();
    for tx in txs {
        if let Some(why) = &tx.bad_revoke {
            return Err(format!("transaction {}: {why}", tx.seq));
        }
        for &b in &tx.revokes {
            let e = table.entry(b).or_insert(tx.seq);
            if tid_geq(tx.seq, *e) {
                *e = tx.seq;
            }
        }
    }
    Ok(table)
}
