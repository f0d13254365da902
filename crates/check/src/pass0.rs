//! Pass 0: find a superblock we can trust and check it and the group descriptors.
//!
//! Checks: superblock geometry (falling back to backup superblocks automatically, as e2fsck
//! does only with `-b`), descriptor locations (bitmaps and inode table inside the group, or
//! inside the file system with `flex_bg`), descriptor checksums, uninit flags and unused-inode
//! counts, and superblock feature consistency.
//! Produces: `Pass0Facts` with the opened `Fs` and per-group flags saying which descriptor
//! fields are usable. Relies on: nothing but the device. Frees: nothing.

use crate::ext4::clock::Clock;
use crate::fs::Fs;
use crate::journal::JournalFacts;
use crate::latch::Latches;
use crate::problem::Problem as P;
use crate::report::{Findings, Mode, Policy, ProblemCtx};
use crate::superblock::{read_super_at, Reject};
use ffsck_format::group::{BG_BLOCK_UNINIT, BG_INODE_UNINIT};
use ffsck_format::{
    Compat, Geometry, GeometryError, Incompat, RawGroupDesc, RawSuperblock, RoCompat,
    SUPERBLOCK_OFFSET,
};
use ffsck_io::Device;
use std::sync::Arc;

/// Per-group facts pass 0 establishes.
#[derive(Clone, Copy, Debug, Default)]
pub struct GroupState {
    pub block_bitmap_ok: bool,
    pub inode_bitmap_ok: bool,
    pub inode_table_ok: bool,
    /// The descriptor can vouch for its flags and counts: its checksum verified (or the file
    /// system has none), group 0 is not marked `INODE_UNINIT`, its unused-inode count is sane.
    pub csum_ok: bool,
    /// The descriptor's checksum alone verified (or the file system has none): what libext2fs
    /// asks before it takes a `BLOCK_UNINIT` flag as the bitmap's contents.
    pub desc_csum_ok: bool,
    /// Pass 1's scan takes the descriptor's `INODE_UNINIT` flag and unused-inode count as
    /// they are, as e2fsck's scan does whatever its checksum: false once a fix that zeroes
    /// them was agreed to (a checksum or unused count fixed), or for group 0's flag.
    pub scan_by_desc: bool,
    /// The bitmap gets a new block at the end of pass 1 (its pointer is 0, or the move out
    /// of the wrong group was agreed to).
    pub relocate_block_bitmap: bool,
    pub relocate_inode_bitmap: bool,
    /// The inode table moves into its group at the end of pass 1 (agreed to).
    pub relocate_inode_table: bool,
}

pub struct Pass0Facts {
    pub fs: Fs,
    pub groups: Vec<GroupState>,
    /// What the journal check found (the journal, and which inode pass 1 treats as it).
    pub journal: JournalFacts,
    /// The resize inode is cleared (or recreated) by the repair: pass 1 sees it empty.
    pub resize_cleared: bool,
    /// The run's clock (`CheckOptions::now`), which a repair stamps on what it writes (dtime,
    /// ctime, mtime of the inodes it makes).
    pub now: Clock,
    /// The blocks the device holds, when fewer than the superblock's count but the check
    /// could go on (`short_device`); pass 1 then tells whether anything lies past the end
    /// (`judge_short_device`).
    pub device_blocks: Option<u64>,
}

/// Why the file system could not be opened at all (exit 8).
#[derive(Debug)]
pub enum OpenFailure {
    /// No superblock copy describes a usable file system.
    Corrupt(String),
    /// Incompat features we do not support.
    Unsupported(String),
    /// The device is smaller than the superblock says (a truncated image).
    TooSmall { fs_blocks: u64, dev_blocks: u64 },
    /// The journal cannot be used and its repair was refused (e2fsck exits 12).
    Journal(String),
    /// The MMP block is bad and its repair was refused, or it says another node or checker
    /// holds the file system (e2fsck exits 12).
    Mmp(String),
}

/// Where to look for a superblock.
#[derive(Clone, Copy, Debug, Default)]
pub struct SuperHint {
    /// `-b`: block number of a backup superblock.
    pub block: Option<u64>,
    /// `-B`: block size in bytes for `block`.
    pub block_size: Option<u32>,
}

pub(crate) fn read_descs(
    dev: &dyn Device,
    geo: &Geometry,
    sb_block: u64,
) -> Option<Vec<RawGroupDesc>> {
    let bs = u64::from(geo.block_size);
    let ds = geo.desc_size as usize;
    // The superblock's group count may be up to 2^24: the descriptors read are bounded by the
    // device, which must hold every descriptor block.
    let on_device = dev.size() / geo.desc_size.max(1) as u64;
    let mut out = Vec::with_capacity(u64::from(geo.group_count).min(on_device) as usize);
    let mut buf = vec![0u8; geo.block_size as usize];
    for i in 0..geo.gdt_blocks {
        // A backup superblock's descriptor copies follow it directly (for the old-style part).
        let blk =
            if sb_block == 0 || (geo.incompat.has(Incompat::META_BG) && i >= geo.first_meta_bg) {
                geo.desc_block(i)
            } else {
                sb_block + 1 + u64::from(i)
            };
        let at = blk.checked_mul(bs)?;
        if at.checked_add(bs)? > dev.size() {
            return None;
        }
        dev.read_at(&mut buf, at).ok()?;
        for j in 0..geo.descs_per_block as usize {
            if out.len() == geo.group_count as usize {
                break;
            }
            out.push(RawGroupDesc::parse(&buf[j * ds..], ds));
        }
    }
    Some(out)
}

/// The range a group's own metadata may live in.
fn allowed_range(geo: &Geometry, g: u32) -> (u64, u64) {
    if geo.incompat.has(Incompat::FLEX_BG) {
        (geo.first_data_block, geo.blocks_count - 1)
    } else {
        (geo.group_first_block(g), geo.group_last_block(g))
    }
}

/// e2fsck's descriptor sanity check (libext2fs's `ext2fs_check_desc`): every bitmap and inode
/// table inside its allowed range, and none on another's blocks. Returns the first fault, in
/// libext2fs's words ("Corrupt group descriptor: bad block for inode bitmap").
///
/// The overlap check keeps a bit per block, so it is made only when the device really holds
/// the blocks the superblock claims (a bigger file system is refused later anyway).
fn desc_fault(geo: &Geometry, gds: &[RawGroupDesc], dev_blocks: u64) -> Option<&'static str> {
    const BLOCK_MAP: &str = "Corrupt group descriptor: bad block for block bitmap";
    const INODE_MAP: &str = "Corrupt group descriptor: bad block for inode bitmap";
    const INODE_TABLE: &str = "Corrupt group descriptor: bad block for inode table";
    let ipg = u64::from(geo.inode_blocks_per_group);
    for (g, gd) in gds.iter().enumerate() {
        let (lo, hi) = allowed_range(geo, g as u32);
        let in_range = |b: u64| b >= lo && b <= hi;
        let it = gd.inode_table();
        if !in_range(gd.block_bitmap()) {
            return Some(BLOCK_MAP);
        }
        if !in_range(gd.inode_bitmap()) {
            return Some(INODE_MAP);
        }
        if !(in_range(it) && it.checked_add(ipg - 1).is_some_and(|e| e <= hi)) {
            return Some(INODE_TABLE);
        }
    }
    if geo.blocks_count > dev_blocks {
        return None;
    }
    let mut used = crate::bitmap::Bitmap::new(geo.blocks_count);
    // Blocks reserved for descriptor growth count only with resize_inode (a stray
    // s_reserved_gdt_blocks without it is a superblock field to fix, not a layout).
    let mut geo = geo.clone();
    if !geo.compat.has(Compat::RESIZE_INODE) {
        geo.reserved_gdt_blocks = 0;
    }
    for g in 0..geo.group_count {
        for (start, n) in geo.fixed_metadata_runs(g) {
            for b in start..start.saturating_add(n).min(geo.blocks_count) {
                used.set(b);
            }
        }
    }
    // Only called once every location is in range.
    let mut claim = |b: u64| {
        let fresh = !used.get(b);
        used.set(b);
        fresh
    };
    for gd in gds {
        if !claim(gd.block_bitmap()) {
            return Some(BLOCK_MAP);
        }
        if !claim(gd.inode_bitmap()) {
            return Some(INODE_MAP);
        }
        let it = gd.inode_table();
        if !(it..it + ipg).all(&mut claim) {
            return Some(INODE_TABLE);
        }
    }
    None
}

struct Candidate {
    sb: RawSuperblock,
    geo: Geometry,
    sb_block: u64,
    gds: Vec<RawGroupDesc>,
    descs_ok: bool,
    /// Why the descriptors failed the sanity check, when they did.
    desc_fault: Option<&'static str>,
}

fn try_candidate(dev: &dyn Device, offset: u64, sb_block: u64) -> Result<Candidate, Reject> {
    let sb = read_super_at(dev, offset).ok_or_else(|| Reject::from(GeometryError::BadMagic))?;
    candidate(dev, sb, sb_block, true)
}

/// `sb`, read from `sb_block`, if it passes every superblock rule (but its checksum's, unless
/// `csum`), with its descriptors.
fn candidate(
    dev: &dyn Device,
    sb: RawSuperblock,
    sb_block: u64,
    csum: bool,
) -> Result<Candidate, Reject> {
    let geo = Geometry::new(&sb)?;
    let reject = if csum {
        crate::superblock::strict_reject(&sb, &geo)
    } else {
        crate::superblock::field_reject(&sb, &geo)
    };
    if let Some(r) = reject {
        return Err(r);
    }
    let gds = read_descs(dev, &geo, sb_block)
        .ok_or_else(|| Reject::from(GeometryError::BadBlocksCount(geo.blocks_count)))?;
    let dev_blocks = dev.size() / u64::from(geo.block_size);
    let desc_fault = desc_fault(&geo, &gds, dev_blocks);
    Ok(Candidate {
        sb,
        geo,
        sb_block,
        gds,
        descs_ok: desc_fault.is_none(),
        desc_fault,
    })
}

/// Backup superblock locations to try when the primary is unusable: group 1 for every block
/// size (as `e2fsck -b` users are told to do by hand), or the one the user named.
fn backup_offsets(hint: SuperHint, known: Option<&Geometry>) -> Vec<(u64, u64)> {
    if let Some(b) = hint.block {
        let sizes: Vec<u32> = match hint.block_size {
            Some(s) => vec![s],
            None => (0..=6).map(|l| 1024u32 << l).collect(),
        };
        return sizes
            .into_iter()
            .filter_map(|s| b.checked_mul(u64::from(s)).map(|o| (o, b)))
            .collect();
    }
    let mut out = Vec::new();
    if let Some(g) = known {
        let b = g.group_first_block(1);
        if g.group_count > 1 {
            out.push((b * u64::from(g.block_size), b));
        }
    }
    for l in 0..=6u32 {
        let bs = 1024u64 << l;
        let bpg = 8 * bs;
        let b = bpg + u64::from(bs == 1024);
        out.push((b * bs, b));
    }
    out
}

/// Pass 0 without an external journal and without a clock (a superblock's times in the
/// future are not judged): for callers that only need the layout.
pub fn run(
    dev: Arc<dyn Device>,
    hint: SuperHint,
    policy: Policy,
    out: &mut Findings,
) -> Result<Pass0Facts, OpenFailure> {
    run_with(dev, hint, policy, None, 0, out)
}

/// `run`, with the external journal device given by `-j` (if any).
pub fn run_with(
    dev: Arc<dyn Device>,
    hint: SuperHint,
    policy: Policy,
    journal_dev: Option<&Arc<dyn Device>>,
    now: impl Into<Clock>,
    out: &mut Findings,
) -> Result<Pass0Facts, OpenFailure> {
    let now: Clock = now.into();
    let primary_sb = read_primary(&*dev, hint, policy, out)?;
    let chosen = choose(&*dev, hint, policy, primary_sb, out)?;
    let chosen = fit_device(&*dev, chosen, policy, out);
    let Candidate {
        sb,
        geo,
        sb_block,
        gds,
        ..
    } = chosen;

    refuse(&sb)?;
    let device_blocks = short_device(&*dev, &sb, &geo, &gds)?;
    if device_blocks.is_some() && policy.mode == Mode::No {
        // As e2fsck -n: the question is answered no and the check goes on.
        out.report(policy, P::P0_FS_SIZE_WRONG, size_ctx(&geo, device_blocks));
    }

    // Descriptors read from a backup are as old as the backup: their uninit flags and unused
    // inode counts may no longer hold, so they are dropped (as libext2fs does) and every
    // bitmap and inode table is read as it is on disk.
    let mut gds = gds;
    if sb_block != 0 && sb.has_group_csum() {
        for (g, gd) in gds.iter_mut().enumerate() {
            gd.bg_flags
                .set(gd.flags() & !(BG_BLOCK_UNINIT | BG_INODE_UNINIT));
            gd.set_itable_unused(0);
            if let Some(c) = gd.compute_checksum(&sb, g as u32, geo.desc_size as usize) {
                gd.bg_checksum.set(c);
            }
        }
    }
    let csum_seed = sb.csum_seed();
    let mut fs = Fs {
        dev,
        sb,
        sb_block,
        geo,
        groups: gds,
        csum_seed,
    };
    // As e2fsck, multiple-mount protection is judged before anything else is read.
    crate::mmp::check(&fs, policy, out).map_err(OpenFailure::Mmp)?;
    if journal_dev.is_none() {
        internal_journal_named_external(&mut fs, policy, out);
    }
    // The journal comes first: e2fsck checks it before the superblock fields.
    let journal = crate::journal::check(&fs, policy, sb_block != 0, journal_dev, out)
        .map_err(|a| OpenFailure::Journal(a.0))?;
    let failed_write = recorded_error(&fs, policy, &journal, out);
    let states = check_groups(&fs, policy, out);
    check_uuid(&fs, policy, out);
    check_super_fields(&fs, policy, now.secs(), out);
    check_hints(&fs, policy, journal.journal.is_some(), out);
    let resize_cleared = check_resize_inode(&fs, policy, failed_write, out);
    Ok(Pass0Facts {
        fs,
        groups: states,
        journal,
        resize_cleared,
        now,
        device_blocks,
    })
}

/// The primary superblock, unless `-b` names another. Its feature and journal fields are
/// compared with the backups first: a bit the backups agree the primary should not have is a
/// finding, not a refusal. An external journal device (an ext2 superblock but no file system)
/// is refused before its geometry is judged, which would otherwise send us to the backups.
/// Features this checker does not support that no backup holds are a question
/// (`superblock::drop_unconfirmed_features`); kept, they are refused as e2fsck refuses them.
fn read_primary(
    dev: &dyn Device,
    hint: SuperHint,
    policy: Policy,
    out: &mut Findings,
) -> Result<Option<RawSuperblock>, OpenFailure> {
    let mut primary_sb = None;
    if hint.block.is_none() {
        if let Some(mut sb) = read_super_at(dev, SUPERBLOCK_OFFSET) {
            if sb.s_magic.get() == ffsck_format::EXT2_MAGIC {
                crate::superblock::compare_with_backups(dev, &mut sb, policy, out);
                if sb.incompat().has(Incompat::JOURNAL_DEV)
                    && !journal_dev_flipped(dev, &mut sb, policy, out)
                {
                    return Err(OpenFailure::Corrupt(
                        "it is an external journal device (journal_dev), not a file system".into(),
                    ));
                }
                crate::superblock::drop_unconfirmed_features(dev, &mut sb, policy, out);
                // A primary whose checksum fails is damaged: its unknown bits are judged
                // with the copy finally used (a backup, or this one with the bits cleared).
                let unsupported = sb.incompat().unsupported();
                if unsupported != 0 && crate::superblock::csum_reject(&sb).is_none() {
                    return Err(OpenFailure::Unsupported(
                        ffsck_format::Incompat(unsupported).names().join(" "),
                    ));
                }
            }
            primary_sb = Some(sb);
        }
    }
    Ok(primary_sb)
}

/// A journal_dev bit on what is a file system, not an external journal: no journal
/// superblock where a journal device keeps one (the block after the superblock's), and with
/// the bit cleared the descriptors check and the root directory is where they put it. The
/// bit is then the damage, cleared in `sb` (a finding; answered no, the check goes on without
/// it, as with the other fields set from the rest of the superblock).
fn journal_dev_flipped(
    dev: &dyn Device,
    sb: &mut RawSuperblock,
    policy: Policy,
    out: &mut Findings,
) -> bool {
    let was = sb.s_feature_incompat.get();
    let now = was & !Incompat::JOURNAL_DEV;
    let mut t = sb.clone();
    t.s_feature_incompat.set(now);
    if sb.checksum_ok() {
        t.update_checksum();
    }
    let Ok(c) = candidate(dev, t, 0, false) else {
        return false;
    };
    let bs = u64::from(c.geo.block_size);
    let mut magic = [0u8; 4];
    let journal_sb = (c.geo.first_data_block + 1).saturating_mul(bs);
    let is_journal = dev.read_at(&mut magic, journal_sb).is_err()
        || magic == ffsck_format::journal::JBD2_MAGIC_NUMBER.to_be_bytes();
    if is_journal || !c.descs_ok || !root_is_a_directory(dev, &c) {
        return false;
    }
    let ctx = ProblemCtx {
        str: Some("s_feature_incompat".into()),
        num: u64::from(was),
        num2: u64::from(now),
        ..Default::default()
    };
    out.report(policy, P::P0_SB_FIELD_REBUILT, ctx);
    *sb = c.sb;
    true
}

/// The superblock and descriptors to trust: the primary when it passes the opening rules and
/// its descriptors check, else the first backup that does (the finding that sent us there
/// names the block used), else a primary wrong only in its checksum.
fn choose(
    dev: &dyn Device,
    hint: SuperHint,
    policy: Policy,
    primary_sb: Option<RawSuperblock>,
    out: &mut Findings,
) -> Result<Candidate, OpenFailure> {
    let primary = match primary_sb.clone() {
        _ if hint.block.is_some() => Err(Reject::from(GeometryError::BadMagic)),
        Some(sb) => candidate(dev, sb, 0, true),
        None => Err(Reject::from(GeometryError::BadMagic)),
    };
    // Index of the "primary failed" finding, to name the backup finally used.
    let mut open_failed = None;
    let chosen = match primary {
        Ok(c) if c.descs_ok => c,
        first => {
            match &first {
                Ok(c) => {
                    open_failed = Some(out.0.len());
                    let ctx = ProblemCtx {
                        str: c.desc_fault.map(str::to_string),
                        num: u64::from(c.geo.group_count),
                        ..Default::default()
                    };
                    out.report(policy, P::P0_CHECK_DESC_FAILED, ctx);
                }
                Err(e) if hint.block.is_none() => {
                    open_failed = Some(out.0.len());
                    out.report(policy, e.problem, e.ctx(0));
                }
                Err(_) => {}
            }
            let known = first.as_ref().ok().map(|c| c.geo.clone());
            let backup = backup_offsets(hint, known.as_ref())
                .into_iter()
                .filter_map(|(off, blk)| try_candidate(dev, off, blk).ok())
                .find(|c| {
                    c.descs_ok
                        && (hint.block.is_some()
                            || c.sb.s_block_group_nr.get() == 1
                            || c.sb_block > 0)
                });
            match (backup, first) {
                (Some(b), _) => b,
                (None, Ok(c)) => c,
                (None, Err(e)) => {
                    without_backup(dev, primary_sb, &e, &mut open_failed, policy, out)?
                }
            }
        }
    };
    if let Some(f) = open_failed.and_then(|i| out.0.get_mut(i)) {
        f.ctx.blk = chosen.sb_block;
    }
    Ok(chosen)
}

/// The primary was rejected and no backup can be taken: the primary is used if the damage is
/// proved, in this order, else the open fails with the primary's fault.
/// - its checksum names the one byte damaged: that byte is put back;
/// - only its checksum is wrong: it is used as it stands, the checksum a finding of its own;
/// - its checksum or the device proves the values of the fields that fail (answered no, the
///   check goes on with those values, exit 4).
///
/// `open_failed` indexes the "primary failed" finding; it is dropped when the checksum was the
/// only fault.
fn without_backup(
    dev: &dyn Device,
    primary_sb: Option<RawSuperblock>,
    e: &Reject,
    open_failed: &mut Option<usize>,
    policy: Policy,
    out: &mut Findings,
) -> Result<Candidate, OpenFailure> {
    let csum_only = e.why == crate::superblock::CSUM_MISMATCH;
    let mut drop_open_failed = |out: &mut Findings| {
        if let Some(i) = open_failed.take() {
            out.0.truncate(i);
        }
    };
    if let Some((c, r)) = corrected(dev, primary_sb.as_ref()) {
        if csum_only {
            drop_open_failed(out);
        }
        report_rebuilt(out, policy, &r);
        return Ok(c);
    }
    if csum_only {
        if let Some(mut c) = primary_sb
            .clone()
            .and_then(|sb| candidate(dev, sb, 0, false).ok())
        {
            drop_open_failed(out);
            clear_unknown_features(&mut c.sb, policy, out);
            return Ok(c);
        }
    }
    if let Some((c, fields)) = despite_errors(dev, primary_sb.as_ref()) {
        for r in &fields {
            report_rebuilt(out, policy, r);
        }
        return Ok(c);
    }
    let why = match e.problem {
        P::P0_OPEN_FAILED | P::P0_SB_CSUM_BACKUP => e.why.clone(),
        _ => format!("{} = {}", e.why, e.num),
    };
    Err(OpenFailure::Corrupt(why))
}

/// A primary that claims more blocks than the device holds, and whose checksum fails as it
/// stands but holds with the device's size as the block count: the checksum names the damaged
/// field and its value, so the count is set (a finding; answered no, the check goes on with
/// it, exit 4). Without that proof a device shorter than the file system cannot be told from
/// a damaged count (a truncated partition looks the same), and it stays e2fsck's question.
fn fit_device(dev: &dyn Device, c: Candidate, policy: Policy, out: &mut Findings) -> Candidate {
    let dev_blocks = dev.size() / u64::from(c.geo.block_size);
    let proven = c.sb_block == 0
        && dev_blocks < c.geo.blocks_count
        && c.sb.has_metadata_csum()
        && !c.sb.checksum_ok();
    if !proven {
        return c;
    }
    let mut t = c.sb.clone();
    crate::superblock::set_field(&mut t, "s_blocks_count", dev_blocks);
    if !t.checksum_ok() {
        return c;
    }
    match candidate(dev, t, 0, true) {
        Ok(fixed) if fixed.descs_ok => {
            let ctx = ProblemCtx {
                str: Some("s_blocks_count".into()),
                num: c.geo.blocks_count,
                num2: dev_blocks,
                ..Default::default()
            };
            out.report(policy, P::P0_SB_FIELD_REBUILT, ctx);
            fixed
        }
        _ => c,
    }
}

/// The primary with the one byte its failing checksum names put back
/// (`superblock::csum_correction`), if the result passes every rule, its descriptors check
/// and the root directory is where they put it.
fn corrected(
    dev: &dyn Device,
    sb: Option<&RawSuperblock>,
) -> Option<(Candidate, crate::superblock::Rebuilt)> {
    let (fixed, r) = crate::superblock::csum_correction(sb?)?;
    let c = candidate(dev, fixed, 0, true).ok()?;
    (c.descs_ok && root_is_a_directory(dev, &c)).then_some((c, r))
}

/// Feature bits this checker does not support, in a primary used although its checksum fails
/// (no backup could be): the checksum says the copy was damaged, so such a bit is taken for
/// the damage (a bit flip), not for a newer kernel's feature, and cleared; answered no, the
/// check goes on without them (exit 4), as with the other fields set when no copy could be
/// used. A copy whose checksum holds is judged by `superblock::drop_unconfirmed_features`.
fn clear_unknown_features(sb: &mut RawSuperblock, policy: Policy, out: &mut Findings) {
    for (field, was, unknown) in crate::superblock::unsupported_features(sb) {
        if unknown == 0 {
            continue;
        }
        let now = was & !unknown;
        let ctx = ProblemCtx {
            str: Some(field.into()),
            num: u64::from(was),
            num2: u64::from(now),
            ..Default::default()
        };
        out.report(policy, P::P0_SB_FIELD_REBUILT, ctx);
        crate::superblock::set_field(sb, field, u64::from(now));
    }
}

/// The primary as e2fsck takes it when no copy opens (libext2fs told to ignore superblock
/// errors, then its superblock check sets the inode count from the groups), and beyond it
/// with every field the rest of the superblock gives a value (`rebuild_fields`). Taken when
/// the result passes every rule (its checksum too, unless the primary's was already wrong:
/// that is then a finding of its own) and its descriptors check (unless only the inode count
/// changed, which e2fsck takes as it stands). The copy and the fields set.
fn despite_errors(
    dev: &dyn Device,
    sb: Option<&RawSuperblock>,
) -> Option<(Candidate, Vec<crate::superblock::Rebuilt>)> {
    let sb = sb?;
    // The block size as it stands first, then the ones that may have been damaged.
    let seeds = std::iter::once(None).chain(
        crate::superblock::block_size_seeds(sb)
            .into_iter()
            .map(Some),
    );
    ipg_from_count(dev, sb)
        .or_else(|| seeds.into_iter().find_map(|seed| rebuild(dev, sb, seed)))
        .or_else(|| {
            // A block size nothing in the superblock names needs the root's "." and "..".
            crate::superblock::other_block_sizes(sb, dev.size())
                .into_iter()
                .filter_map(|seed| rebuild(dev, sb, Some(seed)))
                .find(|(c, _)| root_has_dots(dev, c))
        })
        .or_else(|| inode_size_fix(dev, sb))
        .or_else(|| desc_size_fix(dev, sb))
        .or_else(|| reserved_gdt_fix(dev, sb))
}

/// A count of reserved descriptor blocks the rules refuse (more than a block of pointers),
/// proven by the resize inode: its double-indirect block points at each reserved block in
/// turn, from the slot after the descriptors', and at nothing else. The count is the number
/// of those pointers (mke2fs and resize2fs keep it so); without `resize_inode` it is 0.
fn reserved_gdt_fix(
    dev: &dyn Device,
    sb: &RawSuperblock,
) -> Option<(Candidate, Vec<crate::superblock::Rebuilt>)> {
    let log = sb.s_log_block_size.get();
    let bs = 1024u32.checked_shl(log).filter(|_| log <= 6)?;
    let was = sb.s_reserved_gdt_blocks.get();
    if u32::from(was) <= bs / 4 {
        return None;
    }
    let seed = |now: u16| {
        Some(crate::superblock::Rebuilt {
            field: "s_reserved_gdt_blocks".into(),
            was: u64::from(was),
            now: u64::from(now),
        })
    };
    let (c, fields) = rebuild(dev, sb, seed(0))?;
    if !sb.compat().has(Compat::RESIZE_INODE) {
        return Some((c, fields));
    }
    let n = reserved_by_resize_inode(dev, &c)?;
    if n == 0 {
        return Some((c, fields));
    }
    rebuild(dev, sb, seed(n))
}

/// How many reserved descriptor blocks the resize inode of `c`'s layout maps, when its
/// double-indirect block holds exactly a run of them from the first slot after the
/// descriptors' (and nothing elsewhere).
fn reserved_by_resize_inode(dev: &dyn Device, c: &Candidate) -> Option<u16> {
    let geo = &c.geo;
    let bs = u64::from(geo.block_size);
    let raw = group0_inode(dev, c, ffsck_format::ino::RESIZE)?;
    let inode = ffsck_format::RawInode::parse(&raw);
    let dind = u64::from(inode.i_block[13].get());
    if dind < geo.first_data_block || dind >= geo.blocks_count {
        return None;
    }
    let mut buf = vec![0u8; bs as usize];
    dev.read_at(&mut buf, dind.checked_mul(bs)?).ok()?;
    let per = buf.len() / 4;
    let word =
        |i: usize| u32::from_le_bytes([buf[4 * i], buf[4 * i + 1], buf[4 * i + 2], buf[4 * i + 3]]);
    let start = geo.gdt_blocks as usize % per;
    let mut first = geo.first_data_block + 1 + u64::from(geo.gdt_blocks);
    if geo.block_size == 1024 && geo.first_data_block == 0 {
        first += 1;
    }
    let run = (0..per)
        .take_while(|&k| u64::from(word((start + k) % per)) == first + k as u64)
        .count();
    let rest_empty = (run..per).all(|k| word((start + k) % per) == 0);
    if !rest_empty {
        return None;
    }
    u16::try_from(run).ok()
}

/// A 64bit descriptor size the rules refuse (not 0: e2fsck's f_desc_size_zero wants that
/// fatal). With descriptor checksums (metadata_csum or uninit_bg), each size from 64 bytes to
/// the block size is tried, and taken only when it is the one size under which every
/// descriptor's checksum holds (a checksum covers the whole descriptor, so a wrong size reads
/// the wrong bytes, or covers too few or too many of them). Without descriptor checksums the
/// smallest size that `rebuild` proves (descriptors and root directory) is taken.
fn desc_size_fix(
    dev: &dyn Device,
    sb: &RawSuperblock,
) -> Option<(Candidate, Vec<crate::superblock::Rebuilt>)> {
    let ds = sb.s_desc_size.get();
    let log = sb.s_log_block_size.get();
    let bs = 1024u32.checked_shl(log).filter(|_| log <= 6)?;
    if !sb.is_64bit() || ds == 0 {
        return None;
    }
    let mut found = None;
    let sizes = (6..=10u32).map(|l| 1u32 << l).filter(|&s| s <= bs);
    for size in sizes.filter(|&s| s != u32::from(ds)) {
        let seed = crate::superblock::Rebuilt {
            field: "s_desc_size".into(),
            was: u64::from(ds),
            now: u64::from(size),
        };
        let Some((c, fields)) = rebuild(dev, sb, Some(seed)) else {
            continue;
        };
        // Without descriptor checksums, the smallest size whose descriptors check and put the
        // root directory in place (mke2fs's 64 bytes, unless the file system says otherwise;
        // with one group every size reads the same descriptor).
        if !sb.has_group_csum() {
            return Some((c, fields));
        }
        if !(0..c.geo.group_count).all(|g| desc_csum_holds(dev, &c, g) == Some(true)) {
            continue;
        }
        if found.is_some() {
            return None;
        }
        found = Some((c, fields));
    }
    found
}

/// Inodes per group as the inode count gives them, taken over e2fsck's choice (the inode
/// count the groups give, which trusts a grown inodes per group) on proof from the block
/// bitmaps: the inode table the superblock's inodes per group would make runs over blocks a
/// group's bitmap marks free, while the one the inode count makes is marked in use throughout.
/// (A flipped high bit of `s_inodes_per_group` otherwise makes the check read file data as
/// inodes, and clear them.)
fn ipg_from_count(
    dev: &dyn Device,
    sb: &RawSuperblock,
) -> Option<(Candidate, Vec<crate::superblock::Rebuilt>)> {
    let bpg = u64::from(sb.s_blocks_per_group.get());
    let fdb = u64::from(sb.s_first_data_block.get());
    let groups = sb
        .blocks_count()
        .checked_sub(fdb)
        .filter(|_| bpg > 0)?
        .div_ceil(bpg);
    let inodes = u64::from(sb.s_inodes_count.get());
    let ipg = u64::from(sb.s_inodes_per_group.get());
    if groups == 0 || !inodes.is_multiple_of(groups) || inodes / groups >= ipg {
        return None;
    }
    let seed = crate::superblock::Rebuilt {
        field: "s_inodes_per_group".into(),
        was: ipg,
        now: inodes / groups,
    };
    let (c, fields) = rebuild(dev, sb, Some(seed))?;
    let geo = &c.geo;
    if geo.cluster_ratio != 1 || !c.descs_ok {
        return None;
    }
    let bs = u64::from(geo.block_size);
    let isz = u64::from(geo.inode_size);
    let small = u64::from(geo.inode_blocks_per_group);
    let big = (ipg * isz).div_ceil(bs);
    let mut bitmap = vec![0u8; geo.block_size as usize];
    let mut overruns = false;
    for (g, gd) in c.gds.iter().enumerate() {
        if gd.flags() & ffsck_format::group::BG_BLOCK_UNINIT != 0 {
            continue;
        }
        let first = geo.group_first_block(g as u32);
        let off = gd.block_bitmap().checked_mul(bs)?;
        dev.read_at(&mut bitmap, off).ok()?;
        let used = |b: u64| {
            b.checked_sub(first)
                .filter(|&i| i < 8 * bs)
                .map(|i| bitmap[(i / 8) as usize] & (1 << (i % 8)) != 0)
        };
        let it = gd.inode_table();
        if (it..it + small).any(|b| used(b) != Some(true)) {
            return None;
        }
        overruns |= (it + small..it + big).any(|b| used(b) == Some(false));
    }
    overruns.then_some((c, fields))
}

/// `sb` with `seed` set and the fields that then follow (`rebuild_fields`), if the result
/// opens and holds up: descriptors that check and a root directory where they put it, and
/// for a restored magic number proof that it is an ext2/3/4 superblock (`proves_ext`).
fn rebuild(
    dev: &dyn Device,
    sb: &RawSuperblock,
    seed: Option<crate::superblock::Rebuilt>,
) -> Option<(Candidate, Vec<crate::superblock::Rebuilt>)> {
    let csum_was_ok = crate::superblock::csum_reject(sb).is_none();
    let log = seed
        .as_ref()
        .filter(|r| r.field == "s_log_block_size")
        .map_or(sb.s_log_block_size.get(), |r| r.now as u32);
    let dev_blocks = dev.size() >> (10 + log.min(16));
    let (mut fixed, fields) = crate::superblock::rebuild_fields(sb, dev_blocks, seed)?;
    if csum_was_ok {
        fixed.update_checksum();
    }
    let strict = csum_was_ok || fixed.checksum_ok();
    let c = candidate(dev, fixed, 0, strict).ok()?;
    // Fields no block or inode is located by: the descriptors and the root prove nothing
    // about them (and descriptors damaged beside them are pass 0's findings of their own).
    // The magic number locates nothing either; a restored one needs `proves_ext` instead.
    let layout_free = fields.iter().all(|r| match r.field.as_ref() {
        "s_inodes_count" | "s_first_ino" | "s_magic" => true,
        "s_desc_size" => !c.sb.is_64bit(),
        _ => false,
    });
    let magic = fields.iter().any(|r| r.field == "s_magic");
    let usable = layout_free || (c.descs_ok && root_is_a_directory(dev, &c));
    (usable && (!magic || proves_ext(dev, sb, &c))).then_some((c, fields))
}

/// An inode size no file system can have (not a power of two from 128 bytes to the block
/// size): each size it could have had is tried, and taken only when it is the one size that
/// puts a root directory (mode, links, "." and ".." in its first block, and with
/// metadata_csum a good inode checksum) where the descriptors put the inode table. A wrong
/// size reads the root from the middle of inode 1 or from another inode.
fn inode_size_fix(
    dev: &dyn Device,
    sb: &RawSuperblock,
) -> Option<(Candidate, Vec<crate::superblock::Rebuilt>)> {
    let log = sb.s_log_block_size.get();
    let isz = u32::from(sb.s_inode_size.get());
    let bs = 1024u32.checked_shl(log).filter(|_| log <= 6)?;
    let valid = (128..=bs).contains(&isz) && isz.is_power_of_two();
    if sb.s_rev_level.get() == 0 || valid {
        return None;
    }
    let mut found = None;
    let sizes = (7..=16u32).map(|l| 1u32 << l).filter(|&s| s <= bs);
    for size in sizes {
        let seed = crate::superblock::Rebuilt {
            field: "s_inode_size".into(),
            was: u64::from(isz),
            now: u64::from(size),
        };
        let Some((c, fields)) = rebuild(dev, sb, Some(seed)) else {
            continue;
        };
        if !(root_has_dots(dev, &c) && root_csum_ok(dev, &c)) {
            continue;
        }
        if found.is_some() {
            return None;
        }
        found = Some((c, fields));
    }
    found
}

/// Offset of a descriptor's checksum.
const DESC_CSUM_OFFSET: usize = 0x1E;

/// Whether group `g`'s descriptor, read from the device at `c`'s descriptor size, holds its
/// checksum, computed (as the kernel computes it) over the whole descriptor: the parsed
/// descriptors keep only their first 64 bytes, which cannot tell the larger sizes apart.
/// `None` when it cannot be read or the file system has no descriptor checksums.
fn desc_csum_holds(dev: &dyn Device, c: &Candidate, g: u32) -> Option<bool> {
    use ffsck_format::csum::{crc16, ext4_crc32c};
    let geo = &c.geo;
    let size = geo.desc_size as usize;
    let per_block = geo.descs_per_block.max(1);
    let bs = u64::from(geo.block_size);
    let at = geo
        .desc_block(g / per_block)
        .checked_mul(bs)?
        .checked_add(u64::from(g % per_block) * size as u64)?;
    let mut d = vec![0u8; size];
    dev.read_at(&mut d, at).ok()?;
    if size < DESC_CSUM_OFFSET + 2 {
        return None;
    }
    let stored = u16::from_le_bytes([d[DESC_CSUM_OFFSET], d[DESC_CSUM_OFFSET + 1]]);
    let want = if c.sb.has_metadata_csum() {
        d[DESC_CSUM_OFFSET..DESC_CSUM_OFFSET + 2].fill(0);
        let crc = ext4_crc32c(c.sb.csum_seed(), &g.to_le_bytes());
        (ext4_crc32c(crc, &d) & 0xFFFF) as u16
    } else if c.sb.has_group_csum() {
        let crc = crc16(!0, &c.sb.s_uuid);
        let crc = crc16(crc, &g.to_le_bytes());
        let crc = crc16(crc, &d[..DESC_CSUM_OFFSET]);
        crc16(crc, &d[DESC_CSUM_OFFSET + 2..])
    } else {
        return None;
    };
    Some(want == stored)
}

/// The root inode's bytes, read where `c`'s layout puts it.
fn root_inode(dev: &dyn Device, c: &Candidate) -> Option<Vec<u8>> {
    group0_inode(dev, c, ffsck_format::ino::ROOT)
}

/// Inode `ino` of group 0, read where `c`'s layout puts it.
fn group0_inode(dev: &dyn Device, c: &Candidate, ino: u32) -> Option<Vec<u8>> {
    let gd = c.gds.first()?;
    let bs = u64::from(c.geo.block_size);
    let isz = u64::from(c.geo.inode_size);
    let off = gd
        .inode_table()
        .checked_mul(bs)?
        .checked_add(isz * u64::from(ino.checked_sub(1)?))?;
    let mut raw = vec![0u8; (isz as usize).max(ffsck_format::inode::GOOD_OLD_INODE_SIZE)];
    dev.read_at(&mut raw, off).ok()?;
    Some(raw)
}

/// The root inode, read where `c`'s layout puts it, is a directory with links: the check a
/// superblock whose fields were set from the others must pass before it is used (a wrong
/// block size or group size puts the inode table elsewhere).
fn root_is_a_directory(dev: &dyn Device, c: &Candidate) -> bool {
    root_inode(dev, c).is_some_and(|raw| {
        let inode = ffsck_format::RawInode::parse(&raw);
        inode.mode() & ffsck_format::inode::mode::S_IFMT == ffsck_format::inode::mode::S_IFDIR
            && inode.links_count() >= 2
    })
}

/// With metadata_csum, the root inode's checksum holds under `c` (which seeds it and sizes
/// the inode); without it there is nothing to hold.
fn root_csum_ok(dev: &dyn Device, c: &Candidate) -> bool {
    if !c.sb.has_metadata_csum() {
        return true;
    }
    root_inode(dev, c).is_some_and(|raw| {
        let (want, stored, _) =
            ffsck_format::inode::inode_checksum(&raw, c.sb.csum_seed(), ffsck_format::ino::ROOT);
        want == stored
    })
}

/// Proof that a superblock whose magic number was damaged (`orig`, as read) is an ext2/3/4
/// superblock all the same, once `c` (it with the magic restored, and any field that then
/// follows) has passed the opening rules and its descriptors check: its own checksum holds
/// (as it stands, or with the magic restored), or every group descriptor's checksum holds
/// under it, or the root directory it locates begins with "." and ".." naming inode 2. A
/// device that holds something else (or nothing) gives none of these by chance.
fn proves_ext(dev: &dyn Device, orig: &RawSuperblock, c: &Candidate) -> bool {
    let csum = orig.has_metadata_csum() && {
        let mut t = orig.clone();
        t.s_magic.set(ffsck_format::EXT2_MAGIC);
        orig.checksum_ok() || t.checksum_ok()
    };
    let ds = c.geo.desc_size as usize;
    let sealed = c.sb.has_group_csum()
        && c.gds
            .iter()
            .enumerate()
            .all(|(g, gd)| gd.compute_checksum(&c.sb, g as u32, ds) == Some(gd.bg_checksum.get()));
    csum || sealed || root_has_dots(dev, c)
}

/// The root directory's first block (or its inline data) names inode 2 as "." and "..".
fn root_has_dots(dev: &dyn Device, c: &Candidate) -> bool {
    use ffsck_format::inode::flags;
    const ROOT: u32 = ffsck_format::ino::ROOT;
    let Some(raw) = root_inode(dev, c) else {
        return false;
    };
    let inode = ffsck_format::RawInode::parse(&raw);
    let words: Vec<u32> = inode.i_block.iter().map(|w| w.get()).collect();
    if inode.flags() & flags::INLINE_DATA != 0 {
        // An inline directory starts with its parent's number; the root is its own parent.
        return words[0] == ROOT;
    }
    let blk = if inode.flags() & flags::EXTENTS != 0 {
        let bytes: Vec<u8> = words.iter().flat_map(|w| w.to_le_bytes()).collect();
        match ffsck_format::extent::Node::parse(&bytes) {
            Ok(n) if n.is_leaf() && !n.is_empty() => n.extent(0).start(),
            _ => return false,
        }
    } else {
        u64::from(words[0])
    };
    if blk < c.geo.first_data_block || blk >= c.geo.blocks_count {
        return false;
    }
    let bs = u64::from(c.geo.block_size);
    let mut buf = vec![0u8; bs as usize];
    if blk
        .checked_mul(bs)
        .is_none_or(|o| dev.read_at(&mut buf, o).is_err())
    {
        return false;
    }
    let entry = |at: usize, name: &[u8]| -> Option<usize> {
        let head = buf.get(at..at + 8)?;
        let ino = u32::from_le_bytes([head[0], head[1], head[2], head[3]]);
        let rec_len = usize::from(u16::from_le_bytes([head[4], head[5]]));
        let name_len = usize::from(head[6]);
        let ok = ino == ROOT
            && name_len == name.len()
            && rec_len >= 12
            && buf.get(at + 8..at + 8 + name_len) == Some(name);
        ok.then_some(rec_len)
    };
    entry(0, b".").is_some_and(|len| entry(len, b"..").is_some())
}

/// Refuse what ffsck does not check: unknown incompatible or read-only-compatible features,
/// an external journal device.
fn refuse(sb: &RawSuperblock) -> Result<(), OpenFailure> {
    let unsupported = sb.incompat().unsupported();
    if unsupported != 0 {
        return Err(OpenFailure::Unsupported(
            ffsck_format::Incompat(unsupported).names().join(" "),
        ));
    }
    // e2fsck refuses an unknown or unsupported compatible feature as well (it may name
    // metadata a check would have to know).
    let unknown_compat = sb.compat().unsupported();
    if unknown_compat != 0 {
        return Err(OpenFailure::Unsupported(
            ffsck_format::Compat(unknown_compat).names().join(" "),
        ));
    }
    // A read-only-compatible feature this checker does not know may change what a consistent
    // file system is: e2fsck refuses it (check and repair alike), and so does ffsck, rather
    // than judge, mark or repair by rules that may not hold.
    let unknown_ro = sb.ro_compat().unsupported();
    if unknown_ro != 0 {
        return Err(OpenFailure::Unsupported(
            ffsck_format::RoCompat(unknown_ro).names().join(" "),
        ));
    }
    if sb.incompat().has(Incompat::JOURNAL_DEV) {
        return Err(OpenFailure::Unsupported(
            "journal_dev (this is an external journal device, not a file system)".into(),
        ));
    }
    // Names of a casefolded directory are hashed and compared by the encoding: one this
    // checker does not know (only UTF-8 12.1 exists) cannot be judged, and e2fsck refuses it.
    let encoding = sb.s_encoding.get();
    if sb.incompat().has(Incompat::CASEFOLD) && encoding != UTF8_12_1 {
        return Err(OpenFailure::Unsupported(format!(
            "casefold with the unknown file name encoding {encoding}"
        )));
    }
    Ok(())
}

/// `s_encoding` of casefold's one encoding, UTF-8 12.1.
const UTF8_12_1: u16 = 1;

/// A device smaller than the file system: `None` when it is not; the device's block count when
/// the check can go on, as e2fsck's does when its "Abort?" is answered no: the file system cut
/// to the device keeps all its groups, and every group's bitmaps and inode table lie on the
/// device (its descriptors check against the cut layout). Otherwise (and on bigalloc when the
/// device ends inside a cluster, which a cut would split) the device is refused as too small.
fn short_device(
    dev: &dyn Device,
    sb: &RawSuperblock,
    geo: &Geometry,
    gds: &[RawGroupDesc],
) -> Result<Option<u64>, OpenFailure> {
    let dev_blocks = dev.size() / u64::from(geo.block_size);
    if dev_blocks >= geo.blocks_count {
        return Ok(None);
    }
    let mut cut = sb.clone();
    crate::superblock::set_field(&mut cut, "s_blocks_count", dev_blocks);
    let whole_clusters = dev_blocks.is_multiple_of(u64::from(geo.cluster_ratio.max(1)));
    let fits = whole_clusters
        && Geometry::new(&cut).is_ok_and(|g| {
            g.group_count == geo.group_count && desc_fault(&g, gds, dev_blocks).is_none()
        });
    if fits {
        Ok(Some(dev_blocks))
    } else {
        Err(OpenFailure::TooSmall {
            fs_blocks: geo.blocks_count,
            dev_blocks,
        })
    }
}

fn size_ctx(geo: &Geometry, device_blocks: Option<u64>) -> ProblemCtx {
    ProblemCtx {
        blk: geo.blocks_count,
        blk2: device_blocks.unwrap_or_default(),
        ..Default::default()
    }
}

/// What the check does about a device shorter than the file system, once pass 1 has claimed
/// every block in use.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ShortDevice {
    /// Nothing to decide (or the question was answered no): the check goes on.
    GoOn,
    /// Something lies past the device's end: the check stops, as e2fsck's "Abort? yes"
    /// (a wrong partition table would lose those blocks if the size were cut).
    Abort,
    /// Nothing lies past the end: the size is set to the device's, alone in its round.
    Fitted,
}

/// A device shorter than the file system (`Pass0Facts::device_blocks`), judged with pass 1's
/// claimed blocks `used`: when no block past the device's end is in use (no file, no
/// metadata), the file system cut to the device loses nothing, and its size is set to the
/// device's (`P0_FS_SIZE_FITS`); otherwise e2fsck's "Abort?", and the check stops (as
/// e2fsck's `-y` and `-p` do). Under `-n` the question was asked in pass 0 and answered no.
pub fn judge_short_device(
    p0: &Pass0Facts,
    used: &crate::bitmap::Bitmap,
    policy: Policy,
    out: &mut Findings,
) -> ShortDevice {
    let Some(dev_blocks) = p0.device_blocks else {
        return ShortDevice::GoOn;
    };
    if policy.mode == Mode::No {
        return ShortDevice::GoOn;
    }
    let geo = &p0.fs.geo;
    // The cut keeps the group count, so the range is shorter than a group.
    let in_use = (dev_blocks..geo.blocks_count.min(used.len())).any(|b| used.get(b));
    let ctx = size_ctx(geo, p0.device_blocks);
    if in_use {
        // e2fsck's question has no fix: the check stops whatever the answer's wording.
        out.report(policy, P::P0_FS_SIZE_WRONG, ctx);
        return ShortDevice::Abort;
    }
    if out.report(policy, P::P0_FS_SIZE_FITS, ctx) {
        ShortDevice::Fitted
    } else {
        ShortDevice::GoOn
    }
}

fn check_groups(fs: &Fs, policy: Policy, out: &mut Findings) -> Vec<GroupState> {
    let geo = &fs.geo;
    let mut states = Vec::with_capacity(fs.groups.len());
    // The relocation warning and the checksum question come once, before the first of theirs.
    let mut latches = Latches::default();
    if fs.sb_block != 0 {
        // Already on a backup superblock: the hint to try one is not given.
        latches.hold(crate::problem::Latch::Reloc);
    }
    for (g, gd) in fs.groups.iter().enumerate() {
        let g32 = g as u32;
        // The first backup superblock, which the relocation hint suggests (`-b`).
        let backup_sb = u64::from(geo.blocks_per_group) + geo.first_data_block;
        let (lo, hi) = allowed_range(geo, g32);
        let inr = |b: u64| b >= lo && b <= hi;
        let mut st = GroupState {
            block_bitmap_ok: true,
            inode_bitmap_ok: true,
            inode_table_ok: true,
            csum_ok: true,
            desc_csum_ok: true,
            scan_by_desc: true,
            relocate_block_bitmap: gd.block_bitmap() == 0,
            relocate_inode_bitmap: gd.inode_bitmap() == 0,
            relocate_inode_table: false,
        };
        st.block_bitmap_ok = gd.block_bitmap() != 0;
        st.inode_bitmap_ok = gd.inode_bitmap() != 0;
        if !inr(gd.block_bitmap()) {
            st.relocate_block_bitmap |= latches.report(
                out,
                policy,
                P::P0_BB_NOT_GROUP,
                ProblemCtx {
                    group: g32,
                    blk: gd.block_bitmap(),
                    num2: backup_sb,
                    ..Default::default()
                },
            );
            st.block_bitmap_ok = false;
        }
        if !inr(gd.inode_bitmap()) {
            st.relocate_inode_bitmap |= latches.report(
                out,
                policy,
                P::P0_IB_NOT_GROUP,
                ProblemCtx {
                    group: g32,
                    blk: gd.inode_bitmap(),
                    num2: backup_sb,
                    ..Default::default()
                },
            );
            st.inode_bitmap_ok = false;
        }
        let it = gd.inode_table();
        if !inr(it)
            || it
                .checked_add(u64::from(geo.inode_blocks_per_group) - 1)
                .is_none_or(|e| e > hi)
        {
            st.relocate_inode_table = latches.report(
                out,
                policy,
                P::P0_ITABLE_NOT_GROUP,
                ProblemCtx {
                    group: g32,
                    blk: it,
                    num2: backup_sb,
                    ..Default::default()
                },
            );
            st.inode_table_ok = false;
        }
        // A descriptor whose checksum is fixed loses its uninit flags and unused-inode count
        // (e2fsck resets them with the fix): neither is questioned after that.
        let mut csum_fixed = false;
        if let Some(want) = gd.compute_checksum(&fs.sb, g32, geo.desc_size as usize) {
            if want != gd.bg_checksum.get() {
                csum_fixed = latches.report(
                    out,
                    policy,
                    P::P0_GDT_CSUM,
                    ProblemCtx {
                        group: g32,
                        num: u64::from(gd.bg_checksum.get()),
                        num2: u64::from(want),
                        ..Default::default()
                    },
                );
                st.csum_ok = false;
                st.desc_csum_ok = false;
                st.scan_by_desc = !csum_fixed;
            }
        }
        if !fs.has_group_csum()
            && (gd.flags() & (BG_BLOCK_UNINIT | BG_INODE_UNINIT) != 0 || gd.itable_unused() != 0)
        {
            out.report(policy, P::P0_GDT_UNINIT, ProblemCtx::group(g32));
        }
        if fs.has_group_csum() && g == 0 && gd.flags() & BG_INODE_UNINIT != 0 {
            // The descriptor cannot vouch for its flags: the scan reads every inode, and the
            // repair's descriptors keep the flag only for a group that is really empty.
            out.report(policy, P::P0_GROUP0_INODE_UNINIT, ProblemCtx::group(g32));
            st.csum_ok = false;
            st.scan_by_desc = false;
        }
        if g32 + 1 == geo.group_count && gd.flags() & BG_BLOCK_UNINIT != 0 && !csum_fixed {
            out.report(policy, P::P0_BB_UNINIT_LAST, ProblemCtx::group(g32));
        }
        if fs.has_group_csum()
            && !csum_fixed
            && (gd.itable_unused() > gd.free_inodes_count()
                || gd.itable_unused() > geo.inodes_per_group)
        {
            let fixed = out.report(
                policy,
                P::P0_GDT_ITABLE_UNUSED,
                ProblemCtx {
                    group: g32,
                    num: u64::from(gd.itable_unused()),
                    ..Default::default()
                },
            );
            st.csum_ok = false;
            st.scan_by_desc &= !fixed;
        }
        states.push(st);
    }
    states
}

/// A superblock that names an external journal (`s_journal_uuid`) as well as a journal inode
/// that holds a valid internal journal: no tool writes both (mke2fs and tune2fs set the one
/// and clear the other), and a journal inode whose blocks hold a jbd2 superblock that checks
/// proves the internal journal, so the external journal's UUID and device number are the
/// damage (a flipped byte). A finding; the check goes on with the internal journal (answered
/// no too, as with the other fields proven wrong: exit 4). Not when `-j` names an external
/// journal.
///
/// Likewise a UUID on a file system without `has_journal`, a journal inode or a journal to
/// recover: tune2fs clears the UUID when it removes a journal, so only damage leaves one.
fn internal_journal_named_external(fs: &mut Fs, policy: Policy, out: &mut Findings) {
    let sb = &fs.sb;
    let named = sb.s_journal_uuid.iter().any(|&b| b != 0);
    if !named {
        return;
    }
    let problem = if !sb.compat().has(Compat::HAS_JOURNAL)
        && sb.s_journal_inum.get() == 0
        && !sb.incompat().has(Incompat::RECOVER)
    {
        P::P0_SB_JOURNAL_UUID_NO_JOURNAL
    } else if sb.s_journal_inum.get() != 0
        && sb.compat().has(Compat::HAS_JOURNAL)
        && crate::journal::inode_holds_journal(fs)
    {
        P::P0_SB_JOURNAL_UUID_INTERNAL
    } else {
        return;
    };
    let ctx = ProblemCtx {
        ino: sb.s_journal_inum.get(),
        str: Some(crate::superblock::uuid_text(&sb.s_journal_uuid)),
        num: u64::from(sb.s_journal_dev.get()),
        ..Default::default()
    };
    out.report(policy, problem, ctx);
    let csum_ok = fs.sb.checksum_ok();
    fs.sb.s_journal_uuid = [0; 16];
    fs.sb.s_journal_dev.set(0);
    if csum_ok {
        fs.sb.update_checksum();
    }
}

/// A file system without a UUID gets one in a run that may write, as e2fsck gives it (e2fsck
/// does not look under `-n`), unless metadata_csum seeds every checksum from it.
fn check_uuid(fs: &Fs, policy: Policy, out: &mut Findings) {
    if policy.mode != Mode::No
        && fs.sb.s_uuid == [0; 16]
        && !fs.sb.ro_compat().has(RoCompat::METADATA_CSUM)
    {
        out.report(policy, P::P0_ADD_UUID, ProblemCtx::default());
    }
}

/// The superblock's copy of the journal inode's block map and its dirhash hint, which a run
/// that may write adds when they are missing, as e2fsck does (it does not look under `-n`).
/// The journal's map is copied only from a journal that loaded.
fn check_hints(fs: &Fs, policy: Policy, journal_ok: bool, out: &mut Findings) {
    if policy.mode == Mode::No {
        return;
    }
    let sb = &fs.sb;
    if journal_ok && sb.compat().has(Compat::HAS_JOURNAL) && sb.s_journal_inum.get() != 0 {
        if let Some(want) = journal_backup(fs) {
            let stale = match sb.s_jnl_backup_type {
                0 => true,
                JNL_BACKUP_BLOCKS => sb.s_jnl_blocks[..15]
                    .iter()
                    .zip(&want[..15])
                    .any(|(a, b)| a.get() != *b),
                _ => false,
            };
            if stale {
                out.report(policy, P::P0_BACKUP_JNL, ProblemCtx::default());
            }
        }
    }
    if sb.compat().has(Compat::DIR_INDEX)
        && sb.s_flags.get()
            & (ffsck_format::superblock::FLAGS_SIGNED_HASH
                | ffsck_format::superblock::FLAGS_UNSIGNED_HASH)
            == 0
    {
        out.report(policy, P::P0_DIRHASH_HINT, ProblemCtx::default());
    }
}

/// Report a superblock field put back from the file system's own evidence: in e2fsck's
/// words for the inode count, as ffsck's own finding for the rest.
fn report_rebuilt(out: &mut Findings, policy: Policy, r: &crate::superblock::Rebuilt) {
    let p = if r.field == "s_inodes_count" {
        P::P0_INODE_COUNT_WRONG
    } else {
        P::P0_SB_FIELD_REBUILT
    };
    let ctx = ProblemCtx {
        str: Some(r.field.to_string()),
        num: r.was,
        num2: r.now,
        ..Default::default()
    };
    out.report(policy, p, ctx);
}

/// `s_jnl_backup_type` of a superblock whose `s_jnl_blocks` copy the journal inode's map.
pub(crate) const JNL_BACKUP_BLOCKS: u8 = 1;

/// What the superblock keeps of the journal inode (`s_jnl_blocks`): its 15 `i_block` words,
/// then the high and low words of its size.
pub(crate) fn journal_backup(fs: &Fs) -> Option<[u32; 17]> {
    let raw = crate::ext4::inode::read(fs, fs.sb.s_journal_inum.get())?;
    let inode = ffsck_format::RawInode::parse(&raw);
    let mut w = [0u32; 17];
    for (d, s) in w.iter_mut().zip(inode.i_block.iter()) {
        *d = s.get();
    }
    w[15] = inode.i_size_high.get();
    w[16] = inode.i_size_lo.get();
    Some(w)
}

fn check_super_fields(fs: &Fs, policy: Policy, now: u64, out: &mut Findings) {
    let sb = &fs.sb;
    let ro = sb.ro_compat();
    let inc = sb.incompat();
    if ro.has(RoCompat::METADATA_CSUM) && ro.has(RoCompat::GDT_CSUM) {
        out.report(policy, P::P0_META_AND_GDT_CSUM_SET, ProblemCtx::default());
    }
    if inc.has(Incompat::CSUM_SEED) && !ro.has(RoCompat::METADATA_CSUM) {
        out.report(
            policy,
            P::P0_CSUM_SEED_WITHOUT_META_CSUM,
            ProblemCtx::default(),
        );
    }
    if inc.has(Incompat::SIXTY_FOUR_BIT) && !inc.has(Incompat::EXTENTS) {
        out.report(policy, P::P0_64BIT_WITHOUT_EXTENTS, ProblemCtx::default());
    }
    if !sb.checksum_ok() {
        out.report(policy, P::P0_SB_CSUM_INVALID, ProblemCtx::default());
    }
    // A last mount or write more than a day ahead of the run's clock (e2fsck's default
    // fudge; a smaller skew is the clock's, not the file system's). No clock, no judgement.
    let stamps = [
        (sb.s_mtime.get(), sb.s_mtime_hi, P::P0_FUTURE_SB_LAST_MOUNT),
        (sb.s_wtime.get(), sb.s_wtime_hi, P::P0_FUTURE_SB_LAST_WRITE),
    ];
    for (lo, hi, p) in stamps {
        let t = u64::from(lo) | u64::from(hi) << 32;
        if now != 0
            && policy.overrides().clock_trusted()
            && t > now + policy.overrides().time_fudge()
        {
            let ctx = ProblemCtx {
                num: t,
                str: Some(crate::report::ctime(t)),
                name: Some(crate::report::ctime(now)),
                ..Default::default()
            };
            out.report(policy, p, ctx);
        }
    }
    let fmb = sb.s_first_meta_bg.get();
    if inc.has(Incompat::META_BG) && fmb > fs.geo.gdt_blocks {
        // libext2fs refuses to open such a superblock unless told to ignore its errors, so
        // e2fsck first reports the failed open, then the field.
        out.report(
            policy,
            P::P0_OPEN_FAILED,
            ProblemCtx {
                str: Some("s_first_meta_bg is past the descriptor blocks".into()),
                ..Default::default()
            },
        );
        out.report(
            policy,
            P::P0_FIRST_META_BG_TOO_BIG,
            ProblemCtx {
                num: u64::from(fmb),
                num2: u64::from(fs.geo.gdt_blocks),
                ..Default::default()
            },
        );
    }
    let isz = fs.geo.inode_size;
    if isz > 128 {
        let max_extra = u64::from(isz - 128);
        let min = u64::from(sb.s_min_extra_isize.get());
        let want = u64::from(sb.s_want_extra_isize.get());
        if min > max_extra || min % 4 != 0 {
            out.report(
                policy,
                P::P0_BAD_MIN_EXTRA_ISIZE,
                ProblemCtx {
                    num: min,
                    ..Default::default()
                },
            );
        }
        if want > max_extra || want % 4 != 0 {
            out.report(
                policy,
                P::P0_BAD_WANT_EXTRA_ISIZE,
                ProblemCtx {
                    num: want,
                    ..Default::default()
                },
            );
        }
    }
    for (qtype, q) in crate::quota::inodes(fs).into_iter().enumerate() {
        if q != 0 && (q > fs.geo.inodes_count || (q < fs.geo.first_ino && q != 3 && q != 4)) {
            let ctx = ProblemCtx {
                ino: q,
                num: qtype as u64,
                str: Some(crate::quota::type_name(qtype).into()),
                ..Default::default()
            };
            out.report(policy, P::P0_INVALID_QUOTA_INO, ctx);
        }
    }
}

/// Does the resize inode (7) describe exactly the reserved descriptor blocks? It may use only
/// its double-indirect block, whose entries from `gdt_blocks` on must name the reserved blocks
/// after the primary descriptors, and each of those lists its backup copies in the groups that
/// carry a superblock.
fn resize_inode_valid(fs: &Fs, raw: &ffsck_format::RawInode) -> bool {
    resize_inode_walk(fs, raw).0
}

/// e2fsck's resize-inode check: whether the inode is valid, and how many blocks it read (the
/// double-indirect block, then each reserved GDT block up to the first mismatch).
fn resize_inode_walk(fs: &Fs, raw: &ffsck_format::RawInode) -> (bool, u32) {
    const DIND: usize = 13;
    let geo = &fs.geo;
    let blk = u64::from(raw.i_block[DIND].get());
    let only_dind = raw
        .i_block
        .iter()
        .enumerate()
        .all(|(i, b)| i == DIND || b.get() == 0);
    if !only_dind
        || blk == 0
        || raw.links_count() == 0
        || raw.mode() & ffsck_format::inode::mode::S_IFREG == 0
        || blk < geo.first_data_block
        || blk >= geo.blocks_count
    {
        return (false, 0);
    }
    let mut reads = 1;
    let Some(dind) = fs.read_block(blk) else {
        return (false, reads);
    };
    let per_block = (geo.block_size / 4) as usize;
    let word = |buf: &[u8], i: usize| -> u64 {
        let o = i * 4;
        u64::from(u32::from_le_bytes([
            buf[o],
            buf[o + 1],
            buf[o + 2],
            buf[o + 3],
        ]))
    };
    let mut gdt_off = geo.gdt_blocks as usize;
    let mut pblk = geo.first_data_block + 1 + u64::from(geo.gdt_blocks);
    if geo.block_size == 1024 && geo.first_data_block == 0 {
        pblk += 1;
    }
    // e2fsck 1.47 walks a quarter of s_reserved_gdt_blocks here; match it.
    for _ in 0..geo.reserved_gdt_blocks / 4 {
        gdt_off %= per_block;
        if word(&dind, gdt_off) != pblk {
            return (false, reads);
        }
        reads += 1;
        let Some(ind) = fs.read_block(pblk) else {
            return (false, reads);
        };
        let mut ind_off = 0usize;
        for g in 1..geo.group_count {
            if !geo.group_has_super(g) {
                continue;
            }
            let expect = pblk + u64::from(g) * u64::from(geo.blocks_per_group);
            if ind_off >= per_block || word(&ind, ind_off) != expect {
                return (false, reads);
            }
            ind_off += 1;
        }
        gdt_off += 1;
        pblk += 1;
    }
    // Stricter than e2fsck: the double-indirect block maps the reserved descriptor blocks and
    // nothing else (mke2fs fills those slots, an online resize empties the ones it uses). A
    // word anywhere else points into blocks other files own — a journal block, say, that the
    // next journal commit would overwrite under the resize inode — so the inode is rebuilt.
    let span = (geo.reserved_gdt_blocks as usize).min(per_block);
    let start = geo.gdt_blocks as usize % per_block;
    let in_span = |i: usize| (i + per_block - start) % per_block < span;
    let stray = (0..per_block).any(|i| !in_span(i) && word(&dind, i) != 0);
    (!stray, reads)
}

/// A journal that recorded an error (`s_errno`) and is not replayed: e2fsck clears the error in
/// the journal superblock (marking the file system as having errors), silently. A repair does
/// the same. Under -n e2fsck's write of the journal superblock fails when its block cache
/// evicts it: during the resize-inode check, which then calls the inode invalid and the run
/// goes on (exit 0), or at pass 1's first large read, which aborts the run (exit 9). The first
/// returns true (the resize inode is to be reported unreadable); the second is reported as the
/// recorded error, which leaves the uncorrected exit bit. External journals are left alone.
fn recorded_error(fs: &Fs, policy: Policy, journal: &JournalFacts, out: &mut Findings) -> bool {
    let Some(j) = journal.journal.as_ref() else {
        return false;
    };
    let errno = j.sb.s_errno.get();
    if errno == 0 || j.ext.is_some() || fs.sb.incompat().has(Incompat::RECOVER) {
        return false;
    }
    if journal.run_anyway {
        return false;
    }
    let ctx = ProblemCtx {
        str: Some((errno as i32).to_string()),
        ..Default::default()
    };
    if policy.mode == Mode::No {
        if jsb_write_fails_at_resize(fs, journal.journal_inum) {
            return true;
        }
        out.report(policy, P::P0_JOURNAL_ERRNO, ctx);
    } else if out.report(policy, P::P0_JOURNAL_ERRNO, ctx) {
        crate::journal::clear_errno(fs, j);
    }
    false
}

/// Whether e2fsck's 8-block cache evicts the dirty journal superblock during its resize-inode
/// check: it is evicted by the 8th block read after it was written, or written out (and
/// failing) at the first read of more than 4 blocks, pass 1's inode scan. The resize check
/// reads the resize inode's inode-table block (unless the journal inode's block holds it), its
/// double-indirect block and a quarter of the reserved GDT blocks.
fn jsb_write_fails_at_resize(fs: &Fs, journal_inum: u32) -> bool {
    const RESIZE: u32 = ffsck_format::ino::RESIZE;
    const CACHE_BLOCKS: u32 = 8;
    let bs = u64::from(fs.geo.block_size);
    let block_of = |ino: u32| fs.inode_offset(ino).map(|o| o / bs);
    let mut reads = u32::from(block_of(RESIZE) != block_of(journal_inum));
    if fs.sb.compat().has(Compat::RESIZE_INODE) && !fs.sb.incompat().has(Incompat::META_BG) {
        if let Some(buf) = fs.read_inode(RESIZE) {
            reads += resize_inode_walk(fs, &ffsck_format::RawInode::parse(&buf)).1;
        }
    }
    reads >= CACHE_BLOCKS
}

/// The resize inode against the `resize_inode` feature (e2fsck's check after the superblock).
/// Returns whether the inode is to be cleared (or recreated), as agreed to.
fn check_resize_inode(fs: &Fs, policy: Policy, unreadable: bool, out: &mut Findings) -> bool {
    let sb = &fs.sb;
    let mut has_resize = sb.compat().has(Compat::RESIZE_INODE);
    // Disabled (agreed to): the reserved descriptor blocks go with it.
    let mut reserved = sb.s_reserved_gdt_blocks.get();
    if has_resize
        && sb.incompat().has(Incompat::META_BG)
        && out.report(policy, P::P0_DISABLE_RESIZE_INODE, ProblemCtx::default())
    {
        has_resize = false;
        reserved = 0;
    }
    if !has_resize && reserved != 0 {
        out.report(
            policy,
            P::P0_NONZERO_RESERVED_GDT_BLOCKS,
            ProblemCtx {
                num: u64::from(sb.s_reserved_gdt_blocks.get()),
                ..Default::default()
            },
        );
    }
    let Some(buf) = fs.read_inode(ffsck_format::ino::RESIZE) else {
        return false;
    };
    let raw = ffsck_format::RawInode::parse(&buf);
    let ctx = ProblemCtx::ino(ffsck_format::ino::RESIZE);
    if !has_resize {
        return raw.i_block.iter().any(|b| b.get() != 0)
            && out.report(policy, P::P0_CLEAR_RESIZE_INODE, ctx);
    }
    (unreadable || !resize_inode_valid(fs, &raw))
        && out.report(policy, P::P0_RESIZE_INODE_INVALID, ctx)
}
