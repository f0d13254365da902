//! Journal checks: is the journal the superblock names usable, and do the superblock's
//! journal fields agree with it? Runs first in pass 0, before the superblock checks, as
//! e2fsck's journal consistency check does.
//!
//! Checks: the journal inode (number, mode, size, every mapping block inside the file system;
//! the superblock's backup copy of its block map is tried when the inode is unusable), the
//! jbd2 superblock (`JournalSuperblock::verify`), and the `has_journal` / `needs_recovery`
//! flags against what was found. Produces `JournalFacts`: the located journal (superblock and
//! block runs, reusable by journal replay) and whether its inode was judged bad, so pass 1
//! does not judge its blocks a second time. A journal e2fsck could not open, when the repair
//! is refused, aborts the check (`JournalAbort`), which e2fsck reports as exit 12.

pub mod commit;
pub mod fast_commit;
pub mod recovery;

use crate::filemap::{self, Runs, Visit};
use crate::fs::Fs;
use crate::problem::Problem as P;
use crate::report::{Findings, Mode, Policy, ProblemCtx};
use ffsck_format::inode::{flags, mode, RawInode};
use ffsck_format::journal::{blocktype, JournalSuperblock, JsbError, MIN_JOURNAL_BLOCKS};
use ffsck_format::{Compat, Incompat};
use ffsck_io::Device;
use std::sync::Arc;

/// A journal located and verified well enough to read its log.
#[derive(Clone)]
pub struct Journal {
    pub sb: JournalSuperblock,
    /// Logical → physical block runs of the journal inode.
    pub runs: Runs,
    /// Blocks of the journal the superblock describes (`s_maxlen`, at most the inode's size).
    pub total_len: u64,
    /// An external journal device (`-j`): journal block N is block N of this device, and
    /// `runs` is unused.
    pub ext: Option<Arc<dyn Device>>,
}

impl Journal {
    /// Read journal block `b` (journal-relative): through the inode's runs, or straight from
    /// the external journal device. `None` when unmapped, outside the file system or unreadable.
    pub(crate) fn read_block(&self, fs: &Fs, b: u64) -> Option<Vec<u8>> {
        if b >= self.total_len {
            return None;
        }
        match &self.ext {
            Some(dev) => {
                let bs = fs.block_size();
                let mut buf = vec![0u8; bs];
                dev.read_at(&mut buf, b.checked_mul(bs as u64)?).ok()?;
                Some(buf)
            }
            None => {
                let pblk = self.runs.lookup(b).filter(|&p| fs.geo.is_valid_block(p))?;
                fs.read_block(pblk)
            }
        }
    }

    /// Byte offset of the journal superblock: on the file system device for an internal
    /// journal, on `ext` for an external one.
    pub fn sb_offset(&self, fs: &Fs) -> Option<u64> {
        let bs = u64::from(fs.geo.block_size);
        match &self.ext {
            Some(_) => Some(ext_jsb_block(fs.geo.block_size) * bs),
            None => self.runs.lookup(0).map(|p| p * bs),
        }
    }
}

/// Block of an external journal device that holds the jbd2 superblock: the first block after
/// the ext4 superblock at byte 1024.
fn ext_jsb_block(block_size: u32) -> u64 {
    ffsck_format::SUPERBLOCK_OFFSET / u64::from(block_size.max(1)) + 1
}

/// What the journal check established.
#[derive(Clone, Default)]
pub struct JournalFacts {
    pub journal: Option<Journal>,
    /// The journal inode number pass 1 should treat as the journal (0 after the journal was
    /// judged bad and its removal accepted).
    pub journal_inum: u32,
    /// The journal holds data without `needs_recovery`, and running it anyway was agreed to:
    /// it is replayed as if the flag were set.
    pub run_anyway: bool,
}

/// The check cannot continue (e2fsck: "Cannot proceed with file system check").
#[derive(Debug)]
pub struct JournalAbort(pub String);

/// e2fsck's error classes for a journal it cannot use; each leads to a different question.
enum Fail {
    /// Journal inode unusable: wrong number, mode, size or block map.
    BadInode,
    CorruptSuper,
    UnsuppIncompat,
    UnsuppRoCompat,
    UnsuppVersion,
    Abort(String),
}

struct Ctx<'a> {
    fs: &'a Fs,
    policy: Policy,
    out: &'a mut Findings,
    facts: JournalFacts,
    /// `has_journal`, as the answers so far leave it.
    has_journal: bool,
    /// Resetting the corrupt journal superblock was accepted.
    reset_super: bool,
}

impl Ctx<'_> {
    fn ask(&mut self, p: P, ctx: ProblemCtx) -> bool {
        self.out.report(self.policy, p, ctx)
    }
    fn has_journal(&self) -> bool {
        self.has_journal
    }
    fn recover(&self) -> bool {
        self.fs.sb.incompat().has(Incompat::RECOVER)
    }

    /// The journal inode is unusable: offer to drop the journal. `Ok` when the answer lets the
    /// check go on; otherwise the error class the caller escalates.
    fn fix_bad_inode(&mut self) -> Result<(), Fail> {
        let inum = self.fs.sb.s_journal_inum.get();
        if self.has_journal() || inum != 0 {
            // `num` says whether a live journal goes (e2fsck then prints that it was deleted).
            let ctx = ProblemCtx {
                num: u64::from(self.has_journal() && inum != 0),
                ..ProblemCtx::ino(inum)
            };
            if self.ask(P::P0_JOURNAL_BAD_INODE, ctx) {
                self.facts.journal_inum = 0;
                self.has_journal = false;
                return Ok(());
            }
            return Err(Fail::CorruptSuper);
        }
        if self.recover() {
            if self.ask(P::P0_JOURNAL_RECOVER_SET, ProblemCtx::default()) {
                return Ok(());
            }
            return Err(Fail::UnsuppIncompat);
        }
        Ok(())
    }

    /// The journal superblock is unusable: offer to reset it (or, without `has_journal`, to
    /// drop the journal).
    fn fix_corrupt_super(&mut self) -> Result<(), Fail> {
        if self.has_journal() {
            if self.ask(P::P0_JOURNAL_BAD_SUPER, ProblemCtx::default()) {
                self.reset_super = true;
                return Ok(());
            }
            return Err(Fail::CorruptSuper);
        }
        self.fix_bad_inode().map_err(|_| Fail::CorruptSuper)
    }
}

/// Check the journal; see the module header.
pub(crate) fn check(
    fs: &Fs,
    policy: Policy,
    backup_sb: bool,
    ext: Option<&Arc<dyn Device>>,
    out: &mut Findings,
) -> Result<JournalFacts, JournalAbort> {
    let sb = &fs.sb;
    let mut c = Ctx {
        fs,
        policy,
        out,
        facts: JournalFacts {
            journal: None,
            journal_inum: sb.s_journal_inum.get(),
            run_anyway: false,
        },
        has_journal: sb.compat().has(Compat::HAS_JOURNAL),
        reset_super: false,
    };
    let has_journal = c.has_journal();
    let uuid_null = sb.s_journal_uuid.iter().all(|&b| b == 0);
    if !has_journal
        && !c.recover()
        && sb.s_journal_inum.get() == 0
        && sb.s_journal_dev.get() == 0
        && uuid_null
    {
        return Ok(c.facts);
    }

    if !uuid_null {
        return external(&mut c, ext, backup_sb);
    }
    let result = match locate(fs) {
        Err(Fail::BadInode) => c.fix_bad_inode(),
        Err(e) => Err(e),
        Ok((runs, total_len)) => {
            restore_from_backup(fs, policy);
            match load(&mut c, &runs, total_len) {
                Ok((jsb, usable)) => {
                    check_flags(&mut c, &jsb, backup_sb);
                    if usable && c.facts.journal_inum != 0 {
                        c.facts.journal = Some(Journal {
                            total_len: u64::from(jsb.s_maxlen.get()).min(total_len),
                            sb: jsb,
                            runs,
                            ext: None,
                        });
                    }
                    Ok(())
                }
                Err(e) => {
                    let escalate = match e {
                        Fail::CorruptSuper => true,
                        Fail::UnsuppIncompat => {
                            !c.ask(P::P0_JOURNAL_UNSUPP_INCOMPAT, ProblemCtx::default())
                        }
                        Fail::UnsuppRoCompat => {
                            !c.ask(P::P0_JOURNAL_UNSUPP_ROCOMPAT, ProblemCtx::default())
                        }
                        Fail::UnsuppVersion => {
                            !c.ask(P::P0_JOURNAL_UNSUPP_VERSION, ProblemCtx::default())
                        }
                        Fail::Abort(_) => false,
                        // The map has no block 0 (a hole where the journal superblock
                        // goes): e2fsck offers to drop the journal, as for any bad inode.
                        Fail::BadInode => return finish(c.fix_bad_inode(), c.facts),
                    };
                    if escalate {
                        let r = c.fix_corrupt_super();
                        if r.is_ok() && c.reset_super && policy.mode != Mode::No {
                            reset_super(fs, &runs, total_len);
                        }
                        r
                    } else {
                        Err(e)
                    }
                }
            }
        }
    };
    finish(result, c.facts)
}

/// The journal facts, or why the check cannot go on.
fn finish(result: Result<(), Fail>, facts: JournalFacts) -> Result<JournalFacts, JournalAbort> {
    match result {
        Ok(()) => Ok(facts),
        Err(e) => Err(JournalAbort(match e {
            Fail::Abort(m) => m,
            Fail::BadInode => "the journal inode is invalid".into(),
            Fail::CorruptSuper => "the journal superblock is corrupt".into(),
            Fail::UnsuppIncompat => "the journal has unsupported features".into(),
            Fail::UnsuppRoCompat => "the journal has unsupported read-only features".into(),
            Fail::UnsuppVersion => "the journal version is not supported".into(),
        })),
    }
}

/// Whether the journal inode holds a journal as it stands: its blocks found (`locate`) and
/// the first a jbd2 superblock that verifies. Reads only.
pub(crate) fn inode_holds_journal(fs: &Fs) -> bool {
    let Ok((runs, total_len)) = locate(fs) else {
        return false;
    };
    let Some(buf) = runs.lookup(0).and_then(|b| fs.read_block(b)) else {
        return false;
    };
    JournalSuperblock::parse(&buf)
        .is_some_and(|jsb| jsb.verify(fs.geo.block_size, total_len).is_ok())
}

/// Find the journal's blocks: the inode's own map, or the superblock's backup of it.
/// Returns the block runs and the journal length in blocks (from the inode size).
fn locate(fs: &Fs) -> Result<(Runs, u64), Fail> {
    let sb = &fs.sb;
    let inum = sb.s_journal_inum.get();
    let geo = &fs.geo;
    if inum == 0 || u64::from(inum) > u64::from(geo.group_count) * u64::from(geo.inodes_per_group) {
        return Err(Fail::BadInode);
    }
    if let Some(raw) = fs.read_inode(inum) {
        let inode = RawInode::parse(&raw);
        if let Some(found) = inode_map(fs, &inode) {
            return Ok(found);
        }
    }
    // The superblock keeps a copy of the journal inode's i_block and size.
    const BACKUP_BLOCKS: u8 = 1;
    if sb.s_jnl_backup_type != BACKUP_BLOCKS {
        return Err(Fail::BadInode);
    }
    // The backup carries no flags, so (as in e2fsck) it is read as a block map.
    inode_map(fs, &backup_inode(sb)).ok_or(Fail::BadInode)
}

/// The journal inode as the superblock's backup of it describes it.
fn backup_inode(sb: &ffsck_format::RawSuperblock) -> RawInode {
    let mut inode = RawInode::default();
    for i in 0..15 {
        inode.i_block[i] = sb.s_jnl_blocks[i];
    }
    inode.i_size_high = sb.s_jnl_blocks[15];
    inode.i_size_lo = sb.s_jnl_blocks[16];
    inode.i_links_count.set(1);
    inode.i_mode.set(mode::S_IFREG | 0o600);
    inode
}

/// A journal found through the superblock's backup is written back to its inode when the
/// check may write (as e2fsck does when it loads it): the inode's first 128 bytes become the
/// backup's, so pass 1 walks the journal's blocks rather than freeing them.
fn restore_from_backup(fs: &Fs, policy: Policy) {
    let inum = fs.sb.s_journal_inum.get();
    let own_map = fs
        .read_inode(inum)
        .is_some_and(|raw| inode_map(fs, &RawInode::parse(&raw)).is_some());
    if policy.mode == Mode::No || own_map {
        return;
    }
    let backup = backup_inode(&fs.sb);
    crate::ext4::inode::edit_raw(fs, &*fs.dev, inum, |raw| {
        use zerocopy::IntoBytes;
        let n = raw.len().min(128);
        raw[..n].copy_from_slice(&backup.as_bytes()[..n]);
    });
}

/// The journal's block runs if `inode` can hold a journal: a live regular unencrypted file of
/// at least the minimum journal size whose every block, up to its size, is mapped inside the
/// file system.
fn inode_map(fs: &Fs, inode: &RawInode) -> Option<(Runs, u64)> {
    let bs = u64::from(fs.geo.block_size);
    if inode.links_count() == 0
        || inode.mode() & mode::S_IFMT != mode::S_IFREG
        || inode.flags() & flags::ENCRYPT != 0
    {
        return None;
    }
    let size_blocks = inode.size() / bs;
    if size_blocks < u64::from(MIN_JOURNAL_BLOCKS) {
        return None;
    }
    let geo = &fs.geo;
    let mut runs = Runs::default();
    let mut last: Option<u64> = None;
    let mut visit = |v: Visit| -> bool {
        match v {
            Visit::Meta { pblk } => geo.is_valid_block(pblk),
            Visit::Data { lblk, pblk } => {
                if !geo.is_valid_block(pblk) {
                    return false;
                }
                if lblk < size_blocks {
                    runs.push(lblk, pblk);
                }
                last = Some(lblk);
                // Once every block up to the size is mapped, later blocks cannot change the
                // verdict; stopping here bounds the walk on hostile maps.
                lblk + 1 < size_blocks
            }
        }
    };
    let extents = inode.flags() & flags::EXTENTS != 0;
    filemap::walk(fs, &inode.block_bytes(), extents, true, &mut visit);
    let covered = last.map_or(0, |l| l + 1);
    if covered.saturating_mul(bs) < inode.size() {
        return None;
    }
    Some((runs, size_blocks))
}

/// Read and verify the journal superblock (block 0 of the journal). The flag says whether
/// the journal is usable (false when it was found not to be a journal and dropped).
fn load(c: &mut Ctx, runs: &Runs, total_len: u64) -> Result<(JournalSuperblock, bool), Fail> {
    let fs = c.fs;
    let blk = runs.lookup(0).ok_or(Fail::BadInode)?;
    let buf = fs
        .read_block(blk)
        .ok_or_else(|| Fail::Abort(format!("cannot read the journal superblock (block {blk})")))?;
    let mut jsb = JournalSuperblock::parse(&buf)
        .ok_or_else(|| Fail::Abort("the journal superblock is short".into()))?;
    if !jsb.magic_ok() {
        // Not a journal at all: most likely the inode is wrong. If dropping the journal is
        // accepted the check goes on (to the flag checks) without a usable journal.
        return match c.fix_bad_inode() {
            Ok(()) => Ok((jsb, false)),
            Err(_) => Err(Fail::CorruptSuper),
        };
    }
    // Version-2 fields in a version-1 superblock, or a shared journal named by an inode rather
    // than a UUID: e2fsck clears everything past the version-1 fields when allowed.
    let shared_local = jsb.blocktype() == blocktype::SUPERBLOCK_V2
        && jsb.s_nr_users.get() > 1
        && fs.sb.s_journal_uuid.iter().all(|&b| b == 0);
    if (jsb.v1_has_v2_fields() || shared_local)
        && c.ask(P::P0_CLEAR_V2_JOURNAL, ProblemCtx::default())
    {
        clear_v2_fields(&mut jsb);
        // A repair writes the cleared superblock back (`fs.dev` is then its overlay).
        if c.policy.mode != Mode::No {
            use zerocopy::IntoBytes;
            let mut out = buf.clone();
            let n = jsb.as_bytes().len().min(out.len());
            out[..n].copy_from_slice(&jsb.as_bytes()[..n]);
            let _ = fs.dev.write_at(&out, blk * fs.block_size() as u64);
        }
    }
    match jsb.verify(fs.geo.block_size, total_len) {
        Ok(_) => Ok((jsb, true)),
        Err(e) => Err(match e {
            JsbError::BadMagic => Fail::CorruptSuper,
            JsbError::MultipleUsers(_) => {
                Fail::Abort("the journal has multiple file system users (unsupported)".into())
            }
            JsbError::UnknownVersion(_) => Fail::UnsuppVersion,
            JsbError::UnknownIncompat(_) => Fail::UnsuppIncompat,
            JsbError::UnknownRoCompat(_) => Fail::UnsuppRoCompat,
            JsbError::LogBlockType(_)
            | JsbError::ChecksumFeatures
            | JsbError::ChecksumType(_)
            | JsbError::ChecksumMismatch { .. }
            | JsbError::BlockSize(_)
            | JsbError::TooLong { .. }
            | JsbError::FastCommitTooBig => Fail::CorruptSuper,
        }),
    }
}

/// Write a fresh, empty journal superblock over a corrupt one and clear `needs_recovery`, as
/// e2fsck's "Fix" does: a valid version-1 signature is kept, anything else becomes version 2;
/// every other field is zeroed except the block size, the length and the first log block, and
/// the sequence starts at a number derived from the file system UUID (so old transactions left
/// in the log do not look valid). Only a repair gets here, and `fs.dev` is then the repair's
/// overlay (as for journal replay); the next round checks the result.
fn reset_super(fs: &Fs, runs: &Runs, total_len: u64) {
    use zerocopy::{FromBytes, IntoBytes};
    let Some(blk) = runs.lookup(0) else { return };
    let bs = fs.block_size();
    let Some(old) = fs.read_block(blk) else {
        return;
    };
    let Some(old_sb) = JournalSuperblock::parse(&old) else {
        return;
    };
    let mut buf = vec![0u8; bs];
    let Ok(mut jsb) =
        JournalSuperblock::read_from_bytes(&buf[..core::mem::size_of::<JournalSuperblock>()])
    else {
        return;
    };
    jsb.s_header
        .h_magic
        .set(ffsck_format::journal::JBD2_MAGIC_NUMBER);
    let v1 = old_sb.magic_ok() && old_sb.blocktype() == blocktype::SUPERBLOCK_V1;
    jsb.s_header.h_blocktype.set(if v1 {
        blocktype::SUPERBLOCK_V1
    } else {
        blocktype::SUPERBLOCK_V2
    });
    jsb.s_blocksize.set(fs.geo.block_size);
    jsb.s_maxlen.set(total_len.min(u64::from(u32::MAX)) as u32);
    jsb.s_first.set(1);
    let seq = fs.sb.s_uuid.chunks(4).fold(0u32, |a, w| {
        a ^ u32::from_le_bytes([w[0], w[1], w[2], w[3]])
    });
    jsb.s_sequence.set(seq);
    let n = jsb.as_bytes().len();
    buf[..n].copy_from_slice(jsb.as_bytes());
    let _ = fs.dev.write_at(&buf, blk * bs as u64);
    if fs.sb.incompat().has(Incompat::RECOVER) {
        let mut sb = fs.sb.clone();
        let inc = sb.s_feature_incompat.get() & !Incompat::RECOVER;
        sb.s_feature_incompat.set(inc);
        sb.update_checksum();
        let _ = fs
            .dev
            .write_at(sb.as_bytes(), ffsck_format::SUPERBLOCK_OFFSET);
    }
}

/// Clear the error an internal journal's superblock records (`s_errno`), with its checksum, as
/// e2fsck does when it does not replay the journal. Only a repair gets here (`fs.dev` is its
/// overlay); the next round checks the result.
pub(crate) fn clear_errno(fs: &Fs, journal: &Journal) {
    use zerocopy::IntoBytes;
    if journal.ext.is_some() {
        return;
    }
    let Some(blk) = journal.runs.lookup(0) else {
        return;
    };
    let Some(mut buf) = fs.read_block(blk) else {
        return;
    };
    let Some(mut jsb) = JournalSuperblock::parse(&buf) else {
        return;
    };
    jsb.s_errno.set(0);
    if jsb.has_csum_v2or3() {
        let c = jsb.compute_checksum();
        jsb.s_checksum.set(c);
    }
    let n = jsb.as_bytes().len().min(buf.len());
    buf[..n].copy_from_slice(&jsb.as_bytes()[..n]);
    let _ = fs.dev.write_at(&buf, blk * fs.block_size() as u64);
}

/// Zero everything after the version-1 fields (in memory only).
fn clear_v2_fields(jsb: &mut JournalSuperblock) {
    use zerocopy::IntoBytes;
    let bytes = jsb.as_mut_bytes();
    bytes[ffsck_format::journal::V1_SUPERBLOCK_BYTES..].fill(0);
}

/// The superblock's journal flags against a usable journal.
fn check_flags(c: &mut Ctx, jsb: &JournalSuperblock, backup_sb: bool) {
    if !c.has_journal() {
        if c.ask(P::P0_JOURNAL_HAS_JOURNAL, ProblemCtx::default()) {
            c.facts.journal_inum = 0;
            return;
        }
        // Refusing keeps the journal, but a read-only check cannot set the flag again, so the
        // "journal has data" questions below do not apply (as in e2fsck -n).
        if c.policy.mode == Mode::No {
            return;
        }
        c.has_journal = true;
    }
    if !c.recover() && jsb.s_start.get() != 0 {
        c.ask(P::P0_JOURNAL_RECOVERY_CLEAR, ProblemCtx::default());
        let run = if backup_sb {
            P::P0_JOURNAL_RUN_DEFAULT
        } else {
            P::P0_JOURNAL_RUN
        };
        if c.ask(run, ProblemCtx::default()) {
            c.facts.run_anyway = true;
        } else {
            c.ask(P::P0_JOURNAL_RESET_JOURNAL, ProblemCtx::default());
        }
    }
}

/// The file system names an external journal (`s_journal_uuid`): check the device given with
/// `-j` as e2fsck does. Its ext4 superblock (at byte 1024) must carry `journal_dev`, the file
/// system's journal UUID and the file system's block size; the jbd2 superblock follows in the
/// next block. Any of these wrong is fatal (e2fsck cannot go on either).
fn external(
    c: &mut Ctx,
    ext: Option<&Arc<dyn Device>>,
    backup_sb: bool,
) -> Result<JournalFacts, JournalAbort> {
    let fs = c.fs;
    let Some(dev) = ext else {
        // e2fsck looks the device up by UUID, then by the device number `s_journal_dev`;
        // it reports "can't find" only when neither names a device, and otherwise fails
        // opening it without a problem code. We look nothing up: with no device number
        // there is nothing e2fsck could find either.
        if fs.sb.s_journal_dev.get() == 0 {
            c.ask(P::P0_CANT_FIND_JOURNAL, ProblemCtx::default());
        }
        let why = if c.recover() {
            "the journal is on an external device and needs recovery; give the journal device \
             with -j"
        } else {
            "the journal is on an external device; give the journal device with -j"
        };
        return Err(JournalAbort(why.into()));
    };
    let bad_super = |c: &mut Ctx, why: String| {
        c.ask(
            P::P0_EXT_JOURNAL_BAD_SUPER,
            ProblemCtx {
                str: Some(why.clone()),
                ..Default::default()
            },
        );
        Err(JournalAbort(format!(
            "the external journal has a bad superblock ({why})"
        )))
    };
    let mut raw = vec![0u8; ffsck_format::SUPERBLOCK_SIZE];
    if dev
        .read_at(&mut raw, ffsck_format::SUPERBLOCK_OFFSET)
        .is_err()
    {
        return bad_super(c, "the device is too short to hold a superblock".into());
    }
    let Ok(esb) = <ffsck_format::RawSuperblock as zerocopy::FromBytes>::read_from_bytes(&raw[..])
    else {
        return bad_super(c, "unreadable superblock".into());
    };
    if esb.s_magic.get() != ffsck_format::EXT2_MAGIC || !esb.incompat().has(Incompat::JOURNAL_DEV) {
        return bad_super(c, "not an external journal device (journal_dev)".into());
    }
    if esb.s_uuid != fs.sb.s_journal_uuid {
        c.ask(P::P0_JOURNAL_BAD_UUID, ProblemCtx::default());
        return Err(JournalAbort(
            "the external journal's UUID is not the file system's journal UUID".into(),
        ));
    }
    let log = esb.s_log_block_size.get();
    let bs = fs.geo.block_size;
    if log > 6 || 1024u32 << log != bs {
        return bad_super(
            c,
            format!("its block size (log {log}) is not the file system's ({bs})"),
        );
    }
    let bs64 = u64::from(bs);
    let jsb_blk = ext_jsb_block(bs);
    let mut buf = vec![0u8; fs.block_size()];
    if dev.read_at(&mut buf, jsb_blk * bs64).is_err() {
        return bad_super(c, "the journal superblock cannot be read".into());
    }
    let Some(jsb) = JournalSuperblock::parse(&buf) else {
        return bad_super(c, "the journal superblock is short".into());
    };
    let dev_blocks = dev.size() / bs64;
    let total_len = match jsb.verify(bs, dev_blocks) {
        Ok(n) => n,
        Err(e) => return bad_super(c, format!("{e:?}")),
    };
    if u64::from(jsb.s_first.get()) <= jsb_blk {
        return bad_super(
            c,
            format!(
                "the first log block ({}) overlaps the superblocks",
                jsb.s_first.get()
            ),
        );
    }
    check_flags(c, &jsb, backup_sb);
    if c.facts.journal_inum == 0 && !c.has_journal() {
        return Ok(c.facts.clone());
    }
    c.facts.journal = Some(Journal {
        sb: jsb,
        runs: Runs::default(),
        total_len,
        ext: Some(dev.clone()),
    });
    Ok(c.facts.clone())
}
