//! The marks a check that may write leaves in the primary superblock when it ends, as e2fsck
//! leaves them: the state (valid, or not), the error flag and the kernel's error record, the
//! mount count and the last-check and last-write times.
//!
//! They are staged on the repair's overlay like every fix, so they are part of the one repair
//! generation the caller commits (and are dropped with it when it is not committed).

use ffsck_format::superblock::{RawSuperblock, STATE_ERROR, STATE_VALID};
use ffsck_format::{Geometry, Incompat, RoCompat};
use ffsck_io::Device;
use zerocopy::IntoBytes;

/// Where the primary superblock is, and its size.
const SB_OFFSET: u64 = 1024;
const SB_SIZE: usize = 1024;

/// The kernel's record of the errors it met: from the error count up to the mount options
/// (the bytes e2fsck clears; the high bytes of the error times and the error codes, kept
/// further on, are left as they are, as e2fsck leaves them).
const ERROR_RECORD: std::ops::Range<usize> = 0x194..0x200;

/// Backup groups tried for a readable superblock copy before giving up (e2fsck tries every
/// group; a file system whose first copies are all unreadable is judged by its primary).
const MAX_BACKUP_TRIES: usize = 64;

/// Feature bits that may differ between the primary superblock and its backups without the
/// backups being stale (the kernel changes them on the primary only).
const INCOMPAT_IGNORED: u32 = Incompat::EXTENTS | Incompat::RECOVER;
const RO_COMPAT_IGNORED: u32 =
    RoCompat::LARGE_FILE | RoCompat::DIR_NLINK | RoCompat::ORPHAN_PRESENT;

/// A clock earlier than this (1 January 2010) is taken to be unset: e2fsck then leaves the
/// last-check time as it is.
const SANE_CLOCK: i64 = 1_262_322_000;

/// How the check ended, for the marks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum End {
    /// The check ran to its end: clean, or with `errors_left`.
    Checked { errors_left: bool },
    /// Preen stopped at a problem it may not fix ("UNEXPECTED INCONSISTENCY").
    PreenHalt,
}

/// Stage the marks of a check that ended as `end` at `now` (seconds since the epoch; 0 when
/// no clock was given, which leaves both times as they are). Returns whether the state was
/// not valid before and is now: e2fsck counts that as a change in the exit code (1).
pub(super) fn apply(dev: &dyn Device, end: End, now: i64) -> bool {
    let mut buf = vec![0u8; SB_SIZE];
    if dev.read_at(&mut buf, SB_OFFSET).is_err() {
        return false;
    }
    let Some(mut sb) = RawSuperblock::parse(&buf) else {
        return false;
    };
    let was_invalid = sb.s_state.get() & STATE_VALID == 0;
    let mut marked_valid = false;
    // Checked before the state changes: a file system with errors keeps its backups.
    let stale_backups = matches!(end, End::Checked { errors_left: false })
        && sb.s_state.get() & STATE_ERROR == 0
        && backup_differs(dev, &sb);
    match end {
        End::Checked { errors_left: false } => {
            // Exactly valid: the error flag and the orphan-recovery bit go too.
            sb.s_state.set(STATE_VALID);
            marked_valid = was_invalid;
        }
        End::Checked { errors_left: true } => {
            sb.s_state.set(sb.s_state.get() & !STATE_VALID);
        }
        End::PreenHalt => {
            sb.s_state.set(sb.s_state.get() | STATE_ERROR);
        }
    }
    if let End::Checked { .. } = end {
        if now >= SANE_CLOCK {
            sb.s_lastcheck.set(now as u32);
            sb.s_lastcheck_hi = (now >> 32) as u8;
        }
        sb.s_mnt_count.set(0);
    }
    // Written superblocks carry the time they were written (libext2fs sets it on every flush).
    if now > 0 {
        sb.s_wtime.set(now as u32);
        sb.s_wtime_hi = (now >> 32) as u8;
    }
    let mut out = sb.as_bytes().to_vec();
    if let End::Checked { .. } = end {
        if let Some(record) = out.get_mut(ERROR_RECORD) {
            record.fill(0);
        }
    }
    let Some(mut sb) = RawSuperblock::parse(&out) else {
        return false;
    };
    sb.update_checksum();
    out = sb.as_bytes().to_vec();
    if out != buf {
        let _ = dev.write_at(&out, SB_OFFSET);
    }
    if stale_backups {
        write_backups(dev, &sb);
    }
    marked_valid
}

/// The groups that hold a superblock backup, in order (the geometry's rule: every one
/// without `sparse_super`, 1 and the powers of 3, 5 and 7 with it, the two named ones with
/// `sparse_super2`).
fn backup_groups(geo: &Geometry) -> impl Iterator<Item = u32> + '_ {
    (1..geo.group_count).filter(|&g| geo.group_has_super(g))
}

/// Whether the first readable superblock backup disagrees with the primary `sb` about the
/// features, the size or the UUID (e2fsck then forces a check, and rewrites the backups when
/// the check ends clean).
pub fn backup_differs(dev: &dyn Device, sb: &RawSuperblock) -> bool {
    let Ok(geo) = Geometry::new(sb) else {
        return false;
    };
    for g in backup_groups(&geo).take(MAX_BACKUP_TRIES) {
        let off = geo.group_first_block(g) * u64::from(geo.block_size);
        let mut buf = vec![0u8; SB_SIZE];
        if dev.read_at(&mut buf, off).is_err() {
            continue;
        }
        let Some(b) = RawSuperblock::parse(&buf) else {
            continue;
        };
        let sane = b.s_magic.get() == ffsck_format::EXT2_MAGIC
            && b.s_rev_level.get() <= 1
            && b.s_log_block_size.get() <= 6
            && (b.s_rev_level.get() == 0 || b.s_inode_size.get() >= 128);
        if !sane {
            continue;
        }
        return sb.s_feature_compat.get() != b.s_feature_compat.get()
            || (sb.s_feature_incompat.get() ^ b.s_feature_incompat.get()) & !INCOMPAT_IGNORED != 0
            || (sb.s_feature_ro_compat.get() ^ b.s_feature_ro_compat.get()) & !RO_COMPAT_IGNORED
                != 0
            || sb.s_blocks_count_lo.get() != b.s_blocks_count_lo.get()
            || sb.s_blocks_count_hi.get() != b.s_blocks_count_hi.get()
            || sb.s_inodes_count.get() != b.s_inodes_count.get()
            || sb.s_uuid != b.s_uuid;
    }
    false
}

/// Copy the primary superblock `sb` and descriptors to every backup, as libext2fs writes
/// them: each copy names its group and does not claim to be valid or to need recovery.
fn write_backups(dev: &dyn Device, sb: &RawSuperblock) {
    let Ok(geo) = Geometry::new(sb) else {
        return;
    };
    let bs = u64::from(geo.block_size);
    let mut copy = sb.clone();
    copy.s_state.set(copy.s_state.get() & !STATE_VALID);
    copy.s_feature_incompat
        .set(copy.s_feature_incompat.get() & !Incompat::RECOVER);
    // The primary descriptor blocks, as they are now.
    let desc_count = geo.group_count.div_ceil(geo.descs_per_block.max(1));
    let mut descs = Vec::new();
    for i in 0..desc_count {
        let mut blk = vec![0u8; bs as usize];
        if dev.read_at(&mut blk, geo.desc_block(i) * bs).is_err() {
            return;
        }
        descs.push(blk);
    }
    let meta_bg = geo.incompat.has(Incompat::META_BG);
    let old = (geo.old_desc_blocks() as usize).min(descs.len());
    for g in backup_groups(&geo) {
        let first = geo.group_first_block(g);
        copy.s_block_group_nr.set(g as u16);
        copy.update_checksum();
        let _ = dev.write_at(copy.as_bytes(), first * bs);
        for (i, d) in descs.iter().take(old).enumerate() {
            let _ = dev.write_at(d, (first + 1 + i as u64) * bs);
        }
    }
    if meta_bg {
        // A meta group's descriptor block is kept again in its second and last groups.
        let per = geo.descs_per_block.max(1);
        for (i, d) in descs.iter().enumerate().skip(old) {
            let g0 = i as u32 * per;
            for g in [g0 + 1, g0 + per - 1] {
                if g < geo.group_count && g != g0 {
                    let at = geo.group_first_block(g) + u64::from(geo.group_has_super(g));
                    let _ = dev.write_at(d, at * bs);
                }
            }
        }
    }
}
