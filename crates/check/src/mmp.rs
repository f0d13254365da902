//! Multiple-mount protection: the MMP block a file system with the `mmp` feature names is
//! checked before anything else is read (as e2fsck does right after opening), counted as
//! metadata by pass 1, and waited on before a repair writes while another node may hold it.

use crate::fs::Fs;
use crate::problem::Problem as P;
use crate::report::{Findings, Policy, ProblemCtx};
use ffsck_format::mmp::{
    RawMmp, MAX_UPDATE_INTERVAL, MIN_CHECK_INTERVAL, MMP_MAGIC, SEQ_CLEAN, SEQ_FSCK, SEQ_MAX,
};
use ffsck_format::{Geometry, Incompat, RawSuperblock, RoCompat};
use ffsck_io::Device;

/// What the MMP block says.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum State {
    /// No `mmp` feature: nothing to check.
    Off,
    /// No node holds the file system.
    Clean,
    /// A node holds it, or held it when it stopped (a crash leaves the sequence behind).
    Held { seq: u32, interval: u32 },
    /// `s_mmp_block` lies outside the file system (or on a group's own metadata).
    BadBlock,
    /// The block cannot be read.
    Unreadable,
    /// The block has no MMP magic.
    BadMagic,
    /// The block's checksum fails (with `metadata_csum`).
    BadChecksum,
    /// A checker holds the file system.
    FsckOn,
    /// A sequence number past those defined.
    UnknownSeq(u32),
}

/// The MMP block's number when the feature is on and the number lies inside the file system
/// (after the first data block, before the end), as e2fsck's pass 1 claims it, and not on a
/// group's superblock copy, descriptors, bitmaps or inode table (where e2fsck would write a
/// clean MMP block over them; ffsck takes such a number as a bad one and finds a new block).
pub(crate) fn block(fs: &Fs) -> Option<u64> {
    block_of(&fs.sb, &fs.geo).filter(|&b| !in_group_metadata(fs, b))
}

fn in_group_metadata(fs: &Fs, blk: u64) -> bool {
    let geo = &fs.geo;
    let fixed = geo
        .fixed_metadata_runs(geo.group_of_block(blk))
        .into_iter()
        .any(|(s, n)| (s..s.saturating_add(n)).contains(&blk));
    let itb = u64::from(geo.inode_blocks_per_group);
    fixed
        || fs.groups.iter().any(|gd| {
            let it = gd.inode_table();
            gd.block_bitmap() == blk
                || gd.inode_bitmap() == blk
                || (it..it.saturating_add(itb)).contains(&blk)
        })
}

fn block_of(sb: &RawSuperblock, geo: &Geometry) -> Option<u64> {
    let blk = sb.s_mmp_block.get();
    (sb.incompat().has(Incompat::MMP) && blk > geo.first_data_block && blk < geo.blocks_count)
        .then_some(blk)
}

/// Read and judge the MMP block. One block read; nothing written.
pub(crate) fn state(fs: &Fs) -> State {
    state_at(&*fs.dev, &fs.sb, &fs.geo, block(fs))
}

fn state_of(dev: &dyn Device, sb: &RawSuperblock, geo: &Geometry) -> State {
    state_at(dev, sb, geo, block_of(sb, geo))
}

/// Judge the MMP block at `blk` (None: the superblock's number is not usable).
fn state_at(dev: &dyn Device, sb: &RawSuperblock, geo: &Geometry, blk: Option<u64>) -> State {
    if !sb.incompat().has(Incompat::MMP) {
        return State::Off;
    }
    let Some(blk) = blk else {
        return State::BadBlock;
    };
    let mut buf = vec![0u8; geo.block_size as usize];
    let read = blk
        .checked_mul(u64::from(geo.block_size))
        .is_some_and(|at| dev.read_at(&mut buf, at).is_ok());
    let Some(raw) = read.then(|| RawMmp::parse(&buf)).flatten() else {
        return State::Unreadable;
    };
    // The magic first: a block of garbage is a bad magic, not a bad checksum.
    if raw.mmp_magic.get() != MMP_MAGIC {
        return State::BadMagic;
    }
    if sb.ro_compat().has(RoCompat::METADATA_CSUM)
        && raw.mmp_checksum.get() != raw.compute_checksum(sb.csum_seed())
    {
        return State::BadChecksum;
    }
    match raw.mmp_seq.get() {
        SEQ_CLEAN => State::Clean,
        SEQ_FSCK => State::FsckOn,
        s if s > SEQ_MAX => State::UnknownSeq(s),
        seq => {
            // No node updates less often than the kernel allows (a larger number is damage,
            // and would hold a repair up for most of a day).
            let interval = sb
                .s_mmp_update_interval
                .get()
                .max(MIN_CHECK_INTERVAL)
                .max(raw.mmp_check_interval.get())
                .min(MAX_UPDATE_INTERVAL);
            State::Held {
                seq,
                interval: u32::from(interval),
            }
        }
    }
}

/// Check the MMP block as e2fsck does before the journal: a bad block number, magic or
/// checksum is a finding whose fix (a fresh block) the repair makes; answered no, or a
/// sequence that says a checker or an unknown operation holds the file system, the check
/// cannot go on (`Err` with the reason).
pub(crate) fn check(fs: &Fs, policy: Policy, out: &mut Findings) -> Result<(), String> {
    let ctx = ProblemCtx {
        blk: fs.sb.s_mmp_block.get(),
        ..Default::default()
    };
    let held = |what: String, out: &mut Findings| {
        let ctx = ProblemCtx {
            str: Some(what),
            ..ctx.clone()
        };
        out.report(policy, P::P0_MMP_HELD, ctx);
        Err("the file system may be in use on another node".to_string())
    };
    let problem = match state(fs) {
        State::Off | State::Clean | State::Held { .. } => return Ok(()),
        State::BadBlock => P::P0_MMP_INVALID_BLK,
        State::BadMagic => P::P0_MMP_INVALID_MAGIC,
        State::BadChecksum => P::P0_MMP_CSUM_INVALID,
        State::Unreadable => return Err("the MMP block cannot be read".into()),
        State::FsckOn => return held("a checker is running on it".into(), out),
        State::UnknownSeq(s) => {
            return held(
                format!("an unknown operation holds it (sequence {s:#x})"),
                out,
            )
        }
    };
    if out.report(policy, problem, ctx) {
        Ok(())
    } else {
        Err("the MMP block is not valid".into())
    }
}

/// Before a repair writes anything (a journal recovery included): when a node's sequence is
/// in the MMP block the primary superblock names, wait as long as that node would take to
/// update it twice (e2fsck's wait, with the interval capped at the kernel's largest) and read
/// it again. A changed block means the
/// node is alive and the repair must not start (`Err` with the reason). Anything else about
/// the block (or a superblock that does not open) is the check's to judge. `waiting` is told
/// the seconds the wait takes (at most six minutes) before it starts.
pub fn wait_for_holder(dev: &dyn Device, waiting: impl FnOnce(u32)) -> Result<(), String> {
    let Some(sb) = crate::superblock::read_super_at(dev, ffsck_format::SUPERBLOCK_OFFSET) else {
        return Ok(());
    };
    let Ok(geo) = Geometry::new(&sb) else {
        return Ok(());
    };
    let State::Held { seq, interval } = state_of(dev, &sb, &geo) else {
        return Ok(());
    };
    let wait = (2 * interval + 1).min(interval + 60);
    waiting(wait);
    std::thread::sleep(std::time::Duration::from_secs(u64::from(wait)));
    match state_of(dev, &sb, &geo) {
        State::Held { seq: now, .. } if now == seq => Ok(()),
        _ => Err(format!(
            "MMP: the file system is in use on another node (its MMP block changed within \
             {wait} seconds); it must be unmounted there first"
        )),
    }
}

/// A clean MMP block for `fs`, stamped `now` by this host, checksummed when the file system
/// has metadata checksums: what a repair writes over a bad one.
pub(crate) fn clean_block(fs: &Fs, now: u64) -> Vec<u8> {
    let node = std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap_or_default();
    let mut m = RawMmp::clean(node.trim(), now, fs.sb.s_mmp_update_interval.get());
    if fs.has_metadata_csum() {
        m.set_checksum(fs.csum_seed);
    }
    let mut out = vec![0u8; fs.block_size()];
    let bytes = zerocopy::IntoBytes::as_bytes(&m);
    let n = bytes.len().min(out.len());
    out[..n].copy_from_slice(&bytes[..n]);
    out
}
