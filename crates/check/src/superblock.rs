//! The superblock rules a copy must pass to be used (those of libext2fs's open and e2fsck's
//! superblock check), the comparison of the primary's feature, journal and revision fields with
//! the backup superblocks, and the rebuilding of fields from the others when no copy can be used
//! (pass 0 takes a rebuilt copy only once the file system proves it: `pass0::despite_errors`).
//!
//! A primary that breaks a rule is not used: pass 0 reads a backup instead (and a repair
//! writes that backup over the primary). A primary whose features or journal fields differ,
//! in a way no kernel or tool makes them differ, from backups that all agree with each other
//! is corrected from them, each field a finding. Features this checker does not support that
//! the primary alone holds (no backup has them, or there is none) are asked about: a flipped
//! bit, unless a newer kernel set it at run time.

use crate::problem::Problem as P;
use crate::report::{Findings, Policy, ProblemCtx};
use ffsck_format::superblock::CHECKSUM_TYPE_CRC32C;
use ffsck_format::{Compat, Geometry, GeometryError, Incompat, RawSuperblock, RoCompat};
use ffsck_io::Device;

/// The superblock at byte `offset` of `dev`, if it reads and parses.
pub(crate) fn read_super_at(dev: &dyn Device, offset: u64) -> Option<RawSuperblock> {
    let mut buf = vec![0u8; ffsck_format::SUPERBLOCK_SIZE];
    dev.read_at(&mut buf, offset).ok()?;
    RawSuperblock::parse(&buf)
}

/// Why a superblock copy cannot be used, as the problem that says so.
#[derive(Clone, Debug)]
pub struct Reject {
    pub problem: P,
    pub why: String,
    pub num: u64,
    pub num2: u64,
}

impl Reject {
    fn open(why: impl Into<String>) -> Self {
        Reject {
            problem: P::P0_OPEN_FAILED,
            why: why.into(),
            num: 0,
            num2: 0,
        }
    }
    fn field(name: &str, value: u64) -> Self {
        Reject {
            problem: P::P0_MISC_CORRUPT_SUPER,
            why: name.into(),
            num: value,
            num2: 0,
        }
    }
    /// The finding for the primary superblock, once the backup at `blk` was taken instead.
    pub fn ctx(&self, blk: u64) -> ProblemCtx {
        ProblemCtx {
            str: Some(self.why.clone()),
            num: self.num,
            num2: self.num2,
            blk,
            ..Default::default()
        }
    }
}

impl From<GeometryError> for Reject {
    fn from(e: GeometryError) -> Self {
        match e {
            // e2fsck's superblock check names these fields; libext2fs opens them.
            GeometryError::BadFirstIno(v) => Reject::field("first_ino", u64::from(v)),
            other => Reject::open(other.to_string()),
        }
    }
}

/// Whether `p` says the primary superblock was not used (a backup was, or none was usable).
pub fn rejects_primary(p: P) -> bool {
    matches!(
        p,
        P::P0_OPEN_FAILED
            | P::P0_CHECK_DESC_FAILED
            | P::P0_SB_CSUM_BACKUP
            | P::P0_MISC_CORRUPT_SUPER
            | P::P0_FIRST_DATA_BLOCK
    )
}

/// Largest group sizes libext2fs accepts (a group count kept in 16 bits, less the slack the
/// library keeps).
const MAX_PER_GROUP: u64 = (1 << 16) - 8;
/// Largest group descriptor.
const MAX_DESC_SIZE: u64 = 1024;
/// Largest cluster size, as a log of bytes beyond 1 KiB.
const MAX_LOG_CLUSTER: u32 = 29 - 10;

/// The rules `geo` (already built from `sb`) has not enforced. `None`: the copy is usable.
pub fn strict_reject(sb: &RawSuperblock, geo: &Geometry) -> Option<Reject> {
    csum_reject(sb).or_else(|| field_reject(sb, geo))
}

/// What libext2fs says of a superblock whose checksum does not verify.
pub const CSUM_MISMATCH: &str = "superblock checksum does not match";

/// The checksum rules alone (a copy failing only these is still usable when it is the only
/// one: its checksum is then a finding of its own).
pub fn csum_reject(sb: &RawSuperblock) -> Option<Reject> {
    if !sb.has_metadata_csum() {
        return None;
    }
    if sb.s_checksum_type != CHECKSUM_TYPE_CRC32C {
        return Some(Reject::open(format!(
            "unknown superblock checksum type {}",
            sb.s_checksum_type
        )));
    }
    (!sb.checksum_ok()).then(|| Reject {
        problem: P::P0_SB_CSUM_BACKUP,
        ..Reject::open(CSUM_MISMATCH)
    })
}

/// Every rule but the checksum's.
pub fn field_reject(sb: &RawSuperblock, geo: &Geometry) -> Option<Reject> {
    // e2fsck stops at a revision too high (it tries no backup): a copy that has one is
    // corruption, which leaves the uncorrected bit even when a backup is used.
    if sb.s_rev_level.get() > 1 {
        return Some(Reject::field("rev_level", u64::from(sb.s_rev_level.get())));
    }
    // Revision 0 reads every inode at 128 bytes; an inode size a later revision would use
    // says the revision is the damaged field (a revision 0 file system leaves it 0).
    if sb.s_rev_level.get() == 0 && large_inode_size(sb, geo) {
        return Some(Reject::field("rev_level", 0));
    }
    let lb = sb.s_log_block_size.get();
    let lc = sb.s_log_cluster_size.get();
    let bigalloc = sb.ro_compat().has(RoCompat::BIGALLOC);
    if lc > MAX_LOG_CLUSTER || lb > lc || (!bigalloc && lb != lc) {
        return Some(Reject::open(format!(
            "s_log_cluster_size {lc} does not fit s_log_block_size {lb}"
        )));
    }
    if sb.s_log_groups_per_flex > 31 {
        return Some(Reject::open(format!(
            "s_log_groups_per_flex {} is out of range",
            sb.s_log_groups_per_flex
        )));
    }
    let ratio = u64::from(geo.cluster_ratio);
    let bs = u64::from(geo.block_size);
    let bpg = u64::from(sb.s_blocks_per_group.get());
    let cpg = u64::from(sb.s_clusters_per_group.get());
    if bpg != cpg * ratio {
        return Some(Reject::open(format!(
            "s_clusters_per_group {cpg} does not match s_blocks_per_group {bpg}"
        )));
    }
    if !(8..=(8 * bs).min(MAX_PER_GROUP)).contains(&cpg) {
        return Some(Reject::field("clusters_per_group", cpg));
    }
    if !(8..=(8 * bs * ratio).min(MAX_PER_GROUP * ratio)).contains(&bpg) {
        return Some(Reject::field("blocks_per_group", bpg));
    }
    let ipb = bs / u64::from(geo.inode_size);
    let ipg = u64::from(geo.inodes_per_group);
    let ipg_max = (ipb * bpg.saturating_sub(4)).min((1 << 16) - ipb);
    if ipg < ipb || ipg > ipg_max {
        return Some(Reject::field("inodes_per_group", ipg));
    }
    let blocks = geo.blocks_count;
    let blocks_max = if sb.is_64bit() {
        (1 << 48) - 1
    } else {
        u64::from(u32::MAX)
    };
    if blocks > blocks_max {
        return Some(Reject::field("blocks_count", blocks));
    }
    let r = sb.r_blocks_count();
    if r > blocks / 2 {
        return Some(Reject::field("r_blocks_count", r));
    }
    let ds = u64::from(sb.s_desc_size.get());
    if ds > MAX_DESC_SIZE || !(ds == 0 || ds.is_power_of_two()) {
        return Some(Reject::field("desc_size", ds));
    }
    let want_fdb = u64::from(lb == 0 && ratio == 1);
    if geo.first_data_block != want_fdb {
        return Some(Reject {
            problem: P::P0_FIRST_DATA_BLOCK,
            why: "first_data_block".into(),
            num: geo.first_data_block,
            num2: want_fdb,
        });
    }
    None
}

/// Incompat bits the kernel sets on the primary alone while mounted (e2fsck leaves the
/// backups' copies of the first two alone as well).
const RUNTIME_INCOMPAT: u32 = Incompat::RECOVER | Incompat::EXTENTS | Incompat::ENCRYPT;
/// The incompat bits taken from the backups: the known ones no kernel sets at run time. An
/// unknown bit may be a newer kernel's, set on the primary alone: it is a question of its own
/// (`drop_unconfirmed_features`), never dropped silently.
/// metadata_csum_seed is left to e2fsck's own rule for it (cleared without metadata_csum).
const COMPARED_INCOMPAT: u32 = Incompat::KNOWN & !RUNTIME_INCOMPAT & !Incompat::CSUM_SEED;
/// At most this many backups are read for the comparison.
const MAX_BACKUPS: usize = 32;

/// The backup superblocks' common view of the fields compared, if every readable backup
/// (same file system, good checksum, usable geometry) agrees.
fn consensus(dev: &dyn Device, primary: &RawSuperblock, geo: &Geometry) -> Option<RawSuperblock> {
    let mut found: Option<RawSuperblock> = None;
    for b in usable_backups(dev, primary, geo) {
        match &found {
            // A first backup that agrees with the primary settles it without reading the
            // rest (on a hard disk each read is a seek): whether the others agree with it
            // (their view is the primary's) or not (no common view), nothing differs.
            None if same_fields(primary, &b) => return Some(b),
            None => found = Some(b),
            Some(f) if same_fields(f, &b) => {}
            Some(_) => return None,
        }
    }
    found
}

/// The backup superblocks of `primary`'s file system that could be used (same UUID, good
/// checksum, their own group number, usable geometry), read lazily in group order, at most
/// `MAX_BACKUPS` of them.
fn usable_backups<'a>(
    dev: &'a dyn Device,
    primary: &'a RawSuperblock,
    geo: &'a Geometry,
) -> impl Iterator<Item = RawSuperblock> + 'a {
    let bs = u64::from(geo.block_size);
    let groups = (1..geo.group_count).filter(|&g| geo.group_has_super(g));
    groups.take(MAX_BACKUPS).filter_map(move |g| {
        let off = geo.group_first_block(g).checked_mul(bs)?;
        let b = read_super_at(dev, off)?;
        let usable = b.s_uuid == primary.s_uuid
            && b.checksum_ok()
            && u32::from(b.s_block_group_nr.get()) == g
            && Geometry::new(&b).is_ok_and(|bg| strict_reject(&b, &bg).is_none());
        usable.then_some(b)
    })
}

/// The feature words of `sb` with the bits of each this checker does not support:
/// (field name as `set_field` takes it, value, unsupported bits).
pub fn unsupported_features(sb: &RawSuperblock) -> [(&'static str, u32, u32); 3] {
    [
        (
            "s_feature_compat",
            sb.s_feature_compat.get(),
            sb.compat().unsupported(),
        ),
        (
            "s_feature_incompat",
            sb.s_feature_incompat.get(),
            sb.incompat().unsupported(),
        ),
        (
            "s_feature_ro_compat",
            sb.s_feature_ro_compat.get(),
            sb.ro_compat().unsupported(),
        ),
    ]
}

/// Feature bits this checker does not support that no backup superblock confirms: in a
/// primary that passes its checksum (or has none), whose backups all lack them or that has
/// no backup at all (a one-group file system). A newer mke2fs or tune2fs writes a feature
/// into every copy; a bit the primary alone carries is a flip of the field (or, rarely, a
/// newer kernel's run-time feature: which is why it is a question, not preened, and answered
/// no the check is refused as e2fsck refuses it). Each word with such bits is a finding
/// `P0_SB_FEATURES_UNCONFIRMED`; answered yes, `sb` loses them and the check goes on.
pub fn drop_unconfirmed_features(
    dev: &dyn Device,
    sb: &mut RawSuperblock,
    policy: Policy,
    out: &mut Findings,
) {
    let words = unsupported_features(sb);
    if words.iter().all(|&(_, _, bits)| bits == 0) || !sb.checksum_ok() {
        return;
    }
    let Ok(geo) = Geometry::new(sb) else {
        return;
    };
    let confirmed = usable_backups(dev, sb, &geo).any(|b| {
        unsupported_features(&b)
            .iter()
            .zip(&words)
            .any(|(&(_, _, theirs), &(_, _, ours))| theirs & ours != 0)
    });
    if confirmed {
        return;
    }
    let mut changed = false;
    for (field, was, bits) in words {
        if bits == 0 {
            continue;
        }
        let now = was & !bits;
        let names = match field {
            "s_feature_compat" => Compat(bits).names(),
            "s_feature_incompat" => Incompat(bits).names(),
            _ => RoCompat(bits).names(),
        };
        let ctx = ProblemCtx {
            str: Some(field.into()),
            name: Some(names.join(" ")),
            num: u64::from(was),
            num2: u64::from(now),
            ..Default::default()
        };
        if out.report(policy, P::P0_SB_FEATURES_UNCONFIRMED, ctx) {
            set_field(sb, field, u64::from(now));
            changed = true;
        }
    }
    if changed {
        sb.update_checksum();
    }
}

fn same_fields(a: &RawSuperblock, b: &RawSuperblock) -> bool {
    a.s_feature_incompat.get() & COMPARED_INCOMPAT == b.s_feature_incompat.get() & COMPARED_INCOMPAT
        && a.compat().unknown() == b.compat().unknown()
        && a.s_journal_inum.get() == b.s_journal_inum.get()
        && a.s_journal_uuid == b.s_journal_uuid
        && a.s_rev_level.get() == b.s_rev_level.get()
}

pub(crate) fn uuid_text(u: &[u8; 16]) -> String {
    let hex =
        |r: std::ops::Range<usize>| u[r].iter().map(|b| format!("{b:02x}")).collect::<String>();
    [hex(0..4), hex(4..6), hex(6..8), hex(8..10), hex(10..16)].join("-")
}

/// Compare the primary `sb` with the backups; each field that differs from their common
/// value is a finding, and `sb` takes the backups' value (so the check goes on with it; a
/// repair writes it). Only a primary with a good checksum is compared: one without is not
/// used at all.
pub fn compare_with_backups(
    dev: &dyn Device,
    sb: &mut RawSuperblock,
    policy: Policy,
    out: &mut Findings,
) {
    if !sb.checksum_ok() {
        return;
    }
    let Ok(geo) = Geometry::new(sb) else {
        return;
    };
    let Some(b) = consensus(dev, sb, &geo) else {
        return;
    };
    if same_fields(sb, &b) {
        return;
    }
    let mut changed = false;
    let inc = sb.s_feature_incompat.get();
    let want = (inc & !COMPARED_INCOMPAT) | (b.s_feature_incompat.get() & COMPARED_INCOMPAT);
    if want != inc {
        feature_finding(
            P::P0_SB_INCOMPAT_BACKUP,
            inc,
            want,
            Incompat(inc).names(),
            Incompat(want).names(),
            policy,
            out,
        );
        sb.s_feature_incompat.set(want);
        changed = true;
    }
    let co = sb.s_feature_compat.get();
    // has_journal is left to e2fsck's rules for a journal without it and the reverse.
    let want = (co & Compat::KNOWN) | b.compat().unknown();
    if want != co {
        feature_finding(
            P::P0_SB_COMPAT_BACKUP,
            co,
            want,
            Compat(co).names(),
            Compat(want).names(),
            policy,
            out,
        );
        sb.s_feature_compat.set(want);
        changed = true;
    }
    if sb.s_journal_inum.get() != b.s_journal_inum.get() {
        let ctx = ProblemCtx {
            ino: sb.s_journal_inum.get(),
            ino2: b.s_journal_inum.get(),
            num: u64::from(b.s_journal_inum.get()),
            ..Default::default()
        };
        out.report(policy, P::P0_SB_JOURNAL_INUM_BACKUP, ctx);
        sb.s_journal_inum.set(b.s_journal_inum.get());
        changed = true;
    }
    if sb.s_journal_uuid != b.s_journal_uuid {
        let (hi, lo) = b.s_journal_uuid.split_at(8);
        let ctx = ProblemCtx {
            str: Some(uuid_text(&sb.s_journal_uuid)),
            name: Some(uuid_text(&b.s_journal_uuid)),
            num: u64::from_le_bytes(hi.try_into().unwrap_or_default()),
            num2: u64::from_le_bytes(lo.try_into().unwrap_or_default()),
            ..Default::default()
        };
        out.report(policy, P::P0_SB_JOURNAL_UUID_BACKUP, ctx);
        sb.s_journal_uuid = b.s_journal_uuid;
        changed = true;
    }
    // The revision level decides the inode size and the first inode: a primary whose level
    // differs from every backup's would read every inode at the wrong size.
    if sb.s_rev_level.get() != b.s_rev_level.get() {
        let ctx = ProblemCtx {
            num: u64::from(b.s_rev_level.get()),
            num2: u64::from(sb.s_rev_level.get()),
            ..Default::default()
        };
        out.report(policy, P::P0_SB_REV_LEVEL_BACKUP, ctx);
        sb.s_rev_level.set(b.s_rev_level.get());
        changed = true;
    }
    if changed {
        sb.update_checksum();
    }
}

fn feature_finding(
    p: P,
    was: u32,
    want: u32,
    was_names: Vec<String>,
    want_names: Vec<String>,
    policy: Policy,
    out: &mut Findings,
) {
    let ctx = ProblemCtx {
        num: u64::from(want),
        num2: u64::from(was),
        str: Some(was_names.join(" ")),
        name: Some(want_names.join(" ")),
        ..Default::default()
    };
    out.report(policy, p, ctx);
}

/// Whether `p` is a field `compare_with_backups` takes from the backups.
pub fn from_backups(p: P) -> bool {
    matches!(
        p,
        P::P0_SB_INCOMPAT_BACKUP
            | P::P0_SB_COMPAT_BACKUP
            | P::P0_SB_JOURNAL_INUM_BACKUP
            | P::P0_SB_JOURNAL_UUID_BACKUP
            | P::P0_SB_REV_LEVEL_BACKUP
    )
}

/// The value a fix found by `compare_with_backups` puts in the primary superblock.
pub fn apply_fix(sb: &mut RawSuperblock, p: P, ctx: &ProblemCtx) {
    match p {
        P::P0_SB_INCOMPAT_BACKUP => sb.s_feature_incompat.set(ctx.num as u32),
        P::P0_SB_COMPAT_BACKUP => sb.s_feature_compat.set(ctx.num as u32),
        P::P0_SB_JOURNAL_INUM_BACKUP => sb.s_journal_inum.set(ctx.num as u32),
        P::P0_SB_REV_LEVEL_BACKUP => sb.s_rev_level.set(ctx.num as u32),
        P::P0_SB_JOURNAL_UUID_BACKUP => {
            sb.s_journal_uuid[..8].copy_from_slice(&ctx.num.to_le_bytes());
            sb.s_journal_uuid[8..].copy_from_slice(&ctx.num2.to_le_bytes());
        }
        _ => {}
    }
}

/// One superblock field pass 0 set from the rest of the superblock, when no copy could be
/// used: its name (as `set_field` takes it), the value it had and the value it is given.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Rebuilt {
    /// The field's name (`name[i]` for one byte of a longer field, as `set_field` takes it).
    pub field: std::borrow::Cow<'static, str>,
    pub was: u64,
    pub now: u64,
}

/// Most fields one superblock may have set from the others.
const MAX_REBUILT: usize = 8;

/// The primary superblock with the fields that break the opening rules set from what the
/// rest of it (and the device's size) says, when no backup can be used: e2fsck's open
/// "despite errors" sets the inode count from the groups; beyond it, each value here follows
/// from fields that agree with each other (an inode count that divides into the groups gives
/// the inodes per group, `s_clusters_per_group` gives the blocks per group without bigalloc,
/// the block size gives the first data block...). `None` when a field has no such value.
/// The caller still checks the descriptors against the result.
pub fn rebuild_fields(
    sb: &RawSuperblock,
    dev_blocks: u64,
    seed: Option<Rebuilt>,
) -> Option<(RawSuperblock, Vec<Rebuilt>)> {
    let mut fixed = sb.clone();
    let mut done: Vec<Rebuilt> = Vec::new();
    if let Some(r) = seed {
        set_field(&mut fixed, &r.field, r.now);
        done.push(r);
    }
    for _ in 0..MAX_REBUILT {
        let next = match Geometry::new(&fixed) {
            Ok(geo) => match csum_type_fix(&fixed).or_else(|| rule_fix(&fixed, &geo)) {
                Some(f) => f,
                None => return (!done.is_empty()).then_some((fixed, done)),
            },
            Err(e) => geometry_fix(&fixed, &e, dev_blocks)?,
        };
        // A field set twice is a loop between two rules: give up.
        if done.iter().any(|d| d.field == next.field) {
            return None;
        }
        set_field(&mut fixed, &next.field, next.now);
        done.push(next);
    }
    None
}

fn rebuilt(field: &'static str, was: impl Into<u64>, now: impl Into<u64>) -> Option<Rebuilt> {
    Some(Rebuilt {
        field: field.into(),
        was: was.into(),
        now: now.into(),
    })
}

/// The checksum type: crc32c is the only one there is.
fn csum_type_fix(sb: &RawSuperblock) -> Option<Rebuilt> {
    if sb.has_metadata_csum() && sb.s_checksum_type != CHECKSUM_TYPE_CRC32C {
        rebuilt("s_checksum_type", sb.s_checksum_type, CHECKSUM_TYPE_CRC32C)
    } else {
        None
    }
}

/// The value a field `Geometry::new` refused follows from the others, if it does.
fn geometry_fix(sb: &RawSuperblock, e: &GeometryError, dev_blocks: u64) -> Option<Rebuilt> {
    if let Some(r) = rev_fix(sb) {
        return Some(r);
    }
    let bigalloc = sb.ro_compat().has(RoCompat::BIGALLOC);
    let lb = sb.s_log_block_size.get();
    let bs = 1024u64.checked_shl(lb)?;
    let fdb = u64::from(sb.s_first_data_block.get());
    let bpg = u64::from(sb.s_blocks_per_group.get());
    let ipg = u64::from(sb.s_inodes_per_group.get());
    let inodes = u64::from(sb.s_inodes_count.get());
    let groups_of = |blocks: u64| blocks.checked_sub(fdb).map(|n| n.div_ceil(bpg.max(1)));
    match *e {
        GeometryError::BadBlocksPerGroup(_) if !bigalloc => {
            let cpg = u64::from(sb.s_clusters_per_group.get());
            let ok = (8..=(8 * bs).min(MAX_PER_GROUP)).contains(&cpg) && cpg.is_multiple_of(8);
            (ok && cpg != bpg).then_some(())?;
            rebuilt("s_blocks_per_group", bpg, cpg)
        }
        GeometryError::BadInodesPerGroup(_) => {
            let groups = groups_of(sb.blocks_count()).filter(|&g| g > 0)?;
            (inodes.is_multiple_of(groups)).then_some(())?;
            rebuilt("s_inodes_per_group", ipg, inodes / groups)
        }
        GeometryError::BadFirstDataBlock(v) => {
            let want = u64::from(lb == 0 && !bigalloc);
            rebuilt("s_first_data_block", v, want)
        }
        GeometryError::BadBlocksCount(_) | GeometryError::BadInodesCount(..) => {
            count_fix(sb, dev_blocks)
        }
        GeometryError::BadDescSize(_) => desc_size_fix(sb),
        GeometryError::BadFirstIno(v) => {
            rebuilt("s_first_ino", v, ffsck_format::ino::GOOD_OLD_FIRST)
        }
        // Only a candidate: pass 0 takes a restored magic number on proof that the rest is an
        // ext2/3/4 superblock (`pass0::proves_ext`), never on the fields' word alone.
        GeometryError::BadMagic => rebuilt("s_magic", sb.s_magic.get(), ffsck_format::EXT2_MAGIC),
        _ => None,
    }
}

/// A revision 0 superblock that has features, or an inode size other than revision 0's 128
/// bytes: the revision is the damaged field (revision 0 has neither, and reads every inode at
/// 128 bytes, which is what broke the geometry).
fn large_inode_size(sb: &RawSuperblock, geo: &Geometry) -> bool {
    let isz = u32::from(sb.s_inode_size.get());
    isz > 128 && isz.is_power_of_two() && isz <= geo.block_size
}

fn rev_fix(sb: &RawSuperblock) -> Option<Rebuilt> {
    let isz = sb.s_inode_size.get();
    let features =
        sb.s_feature_compat.get() | sb.s_feature_incompat.get() | sb.s_feature_ro_compat.get();
    let dynamic = features != 0 || (isz != 128 && isz.is_power_of_two() && isz > 128);
    (sb.s_rev_level.get() == 0 && dynamic).then(|| Rebuilt {
        field: "s_rev_level".into(),
        was: 0,
        now: 1,
    })
}

/// The inode count disagrees with the groups (or the block count is out of range): which of
/// the fields it depends on is the damaged one? The alternatives, each making the inode count
/// agree with the groups: the block count the device's size gives, the blocks per group
/// `s_clusters_per_group` gives (without bigalloc), the inodes per group the inode count
/// gives, and (e2fsck's choice) the inode count the groups give. A checksum that one of them
/// makes good names it; otherwise the first that holds, except that inodes per group that
/// do not fill whole inode-table blocks (mke2fs always fills them) are taken as the damaged
/// field before the inode count.
fn count_fix(sb: &RawSuperblock, dev_blocks: u64) -> Option<Rebuilt> {
    let bigalloc = sb.ro_compat().has(RoCompat::BIGALLOC);
    let bs = 1024u64.checked_shl(sb.s_log_block_size.get())?;
    let fdb = u64::from(sb.s_first_data_block.get());
    let bpg = u64::from(sb.s_blocks_per_group.get());
    let cpg = u64::from(sb.s_clusters_per_group.get());
    let ipg = u64::from(sb.s_inodes_per_group.get());
    let inodes = u64::from(sb.s_inodes_count.get());
    let blocks = sb.blocks_count();
    let isz = if sb.s_rev_level.get() == 0 {
        128
    } else {
        u64::from(sb.s_inode_size.get())
    };
    let groups = |blocks: u64, bpg: u64| {
        blocks
            .checked_sub(fdb)
            .filter(|&n| n > 0 && bpg > 0)
            .map(|n| n.div_ceil(bpg))
    };
    let mut alts: Vec<Rebuilt> = Vec::new();
    if dev_blocks != blocks && groups(dev_blocks, bpg).is_some_and(|g| g * ipg == inodes) {
        alts.extend(rebuilt("s_blocks_count", blocks, dev_blocks));
    }
    let cpg_ok = !bigalloc && cpg != bpg && cpg.is_multiple_of(8) && (8..=8 * bs).contains(&cpg);
    if cpg_ok && groups(blocks, cpg).is_some_and(|g| g * ipg == inodes) {
        alts.extend(rebuilt("s_blocks_per_group", bpg, cpg));
    }
    let whole = |ipg: u64| (ipg * isz).is_multiple_of(bs);
    let by_count = groups(blocks, bpg)
        .filter(|&g| inodes.is_multiple_of(g))
        .map(|g| inodes / g)
        .filter(|&v| v != ipg && v > 0 && v.is_multiple_of(8) && whole(v));
    let count = groups(blocks, bpg)
        .and_then(|g| u32::try_from(g.checked_mul(ipg)?).ok())
        .filter(|&c| u64::from(c) != inodes);
    let ipg_first = !whole(ipg) || count.is_none();
    if let Some(v) = by_count.filter(|_| ipg_first) {
        alts.extend(rebuilt("s_inodes_per_group", ipg, v));
    }
    alts.extend(count.and_then(|c| rebuilt("s_inodes_count", inodes, c)));
    if let Some(v) = by_count.filter(|_| !ipg_first) {
        alts.extend(rebuilt("s_inodes_per_group", ipg, v));
    }
    // With metadata_csum, the value that makes the checksum good is the one it had.
    if sb.has_metadata_csum() && !sb.checksum_ok() {
        let good = alts.iter().position(|a| {
            let mut t = sb.clone();
            set_field(&mut t, &a.field, a.now);
            t.checksum_ok()
        });
        if let Some(i) = good {
            return Some(alts.swap_remove(i));
        }
    }
    alts.into_iter().next()
}

/// The value a field `field_reject` refuses follows from the others, if it does.
fn rule_fix(sb: &RawSuperblock, geo: &Geometry) -> Option<Rebuilt> {
    field_reject(sb, geo)?;
    let bigalloc = sb.ro_compat().has(RoCompat::BIGALLOC);
    let lb = sb.s_log_block_size.get();
    let lc = sb.s_log_cluster_size.get();
    if sb.s_rev_level.get() > 1 || (sb.s_rev_level.get() == 0 && large_inode_size(sb, geo)) {
        return rebuilt("s_rev_level", sb.s_rev_level.get(), 1u32);
    }
    if !bigalloc && lc != lb {
        return rebuilt("s_log_cluster_size", lc, lb);
    }
    if sb.s_log_groups_per_flex > 31 {
        // Without flex_bg it means nothing; with it, mke2fs's 16 groups (it only steers
        // allocation).
        let want = if sb.incompat().has(Incompat::FLEX_BG) {
            4u8
        } else {
            0
        };
        return rebuilt("s_log_groups_per_flex", sb.s_log_groups_per_flex, want);
    }
    let bpg = sb.s_blocks_per_group.get();
    let cpg = sb.s_clusters_per_group.get();
    if !bigalloc && cpg != bpg {
        return rebuilt("s_clusters_per_group", cpg, bpg);
    }
    let r = sb.r_blocks_count();
    if r > geo.blocks_count / 2 {
        // What mke2fs reserves by default (5%).
        return rebuilt("s_r_blocks_count", r, geo.blocks_count / 20);
    }
    let ds = u64::from(sb.s_desc_size.get());
    if ds > MAX_DESC_SIZE || !(ds == 0 || ds.is_power_of_two()) {
        return desc_size_fix(sb);
    }
    let want_fdb = u64::from(lb == 0 && geo.cluster_ratio == 1);
    if geo.first_data_block != want_fdb {
        return rebuilt("s_first_data_block", geo.first_data_block, want_fdb);
    }
    None
}

/// A descriptor size the rules refuse, when the superblock proves the size it had: with
/// metadata_csum, the one size that makes a stale checksum good; without 64bit the field is
/// never read (descriptors are 32 bytes), so it takes the 0 mke2fs leaves there. With 64bit
/// and no such checksum, only the descriptors can prove a size (`pass0::desc_size_fix`); a
/// size of 0 with 64bit (e2fsck's f_desc_size_zero) stays fatal unless the checksum names it.
fn desc_size_fix(sb: &RawSuperblock) -> Option<Rebuilt> {
    let ds = sb.s_desc_size.get();
    let is64 = sb.is_64bit();
    if sb.has_metadata_csum() && !sb.checksum_ok() {
        let sizes = std::iter::once(0u16).chain((5..=10).map(|l| 1u16 << l));
        let mut good = sizes
            .filter(|&s| s != ds && (!is64 || s >= 64))
            .filter(|&s| {
                let mut t = sb.clone();
                t.s_desc_size.set(s);
                t.checksum_ok()
            });
        if let (Some(s), None) = (good.next(), good.next()) {
            return rebuilt("s_desc_size", ds, s);
        }
    }
    if is64 {
        return None;
    }
    rebuilt("s_desc_size", ds, 0u16)
}

/// The block sizes (as `s_log_block_size`) to try before the one the superblock names, when
/// it may be the damaged field: without bigalloc the cluster size repeats it; with
/// metadata_csum a size that makes a stale checksum good is the one it had.
pub fn block_size_seeds(sb: &RawSuperblock) -> Vec<Rebuilt> {
    let lb = sb.s_log_block_size.get();
    let lc = sb.s_log_cluster_size.get();
    let mut out = Vec::new();
    if sb.has_metadata_csum() && !sb.checksum_ok() {
        for l in (0..=6u32).filter(|&l| l != lb) {
            let mut t = sb.clone();
            t.s_log_block_size.set(l);
            if t.checksum_ok() {
                out.extend(rebuilt("s_log_block_size", lb, l));
            }
        }
    }
    if !sb.ro_compat().has(RoCompat::BIGALLOC) && lc != lb && lc <= 6 {
        out.extend(rebuilt("s_log_block_size", lb, lc));
    }
    out
}

/// Every other block size under which the file system fits on the device: nothing in the
/// superblock names one of them, so the caller takes one only on the file system's own proof
/// (`pass0::despite_errors`: the root directory's "." and ".." where the size puts them; a
/// root "in place" is not enough, since 2 KiB blocks over a 1 KiB file system land in its
/// own inode table).
pub fn other_block_sizes(sb: &RawSuperblock, dev_bytes: u64) -> Vec<Rebuilt> {
    let lb = sb.s_log_block_size.get();
    let named = block_size_seeds(sb);
    (0..=6u32)
        .filter(|&l| l != lb && !named.iter().any(|r| r.now == u64::from(l)))
        .filter(|&l| fits(sb, l, dev_bytes))
        .filter_map(|l| rebuilt("s_log_block_size", lb, l))
        .collect()
}

/// Whether the file system, read with `2^(10+log)`-byte blocks, fits on a device of
/// `dev_bytes` bytes.
fn fits(sb: &RawSuperblock, log: u32, dev_bytes: u64) -> bool {
    sb.blocks_count()
        .checked_mul(1024u64 << log)
        .is_some_and(|b| b <= dev_bytes)
}

/// Set one of the fields `rebuild_fields` names (others are left alone).
pub fn set_field(sb: &mut RawSuperblock, field: &str, v: u64) {
    match field {
        "s_magic" => sb.s_magic.set(v as u16),
        "s_inode_size" => sb.s_inode_size.set(v as u16),
        "s_inodes_count" => sb.s_inodes_count.set(v as u32),
        "s_blocks_count" => {
            sb.s_blocks_count_lo.set(v as u32);
            if sb.is_64bit() {
                sb.s_blocks_count_hi.set((v >> 32) as u32);
            }
        }
        "s_r_blocks_count" => {
            sb.s_r_blocks_count_lo.set(v as u32);
            if sb.is_64bit() {
                sb.s_r_blocks_count_hi.set((v >> 32) as u32);
            }
        }
        "s_first_data_block" => sb.s_first_data_block.set(v as u32),
        "s_log_cluster_size" => sb.s_log_cluster_size.set(v as u32),
        "s_log_block_size" => sb.s_log_block_size.set(v as u32),
        "s_blocks_per_group" => sb.s_blocks_per_group.set(v as u32),
        "s_clusters_per_group" => sb.s_clusters_per_group.set(v as u32),
        "s_inodes_per_group" => sb.s_inodes_per_group.set(v as u32),
        "s_first_ino" => sb.s_first_ino.set(v as u32),
        "s_rev_level" => sb.s_rev_level.set(v as u32),
        "s_log_groups_per_flex" => sb.s_log_groups_per_flex = v as u8,
        "s_checksum_type" => sb.s_checksum_type = v as u8,
        "s_feature_compat" => sb.s_feature_compat.set(v as u32),
        "s_feature_incompat" => sb.s_feature_incompat.set(v as u32),
        "s_feature_ro_compat" => sb.s_feature_ro_compat.set(v as u32),
        // Any other field of up to eight bytes, or one byte `name[i]` of a longer one, by the
        // field table (a checksum correction).
        other => {
            use zerocopy::IntoBytes;
            let (name, byte) = match other.strip_suffix(']').and_then(|o| o.split_once('[')) {
                Some((n, i)) => (n, i.parse::<usize>().ok()),
                None => (other, None),
            };
            let known = ffsck_format::fields::SUPERBLOCK
                .iter()
                .chain(LONG_FIELDS)
                .find(|f| f.0 == name)
                .map(|f| (f.1, f.2))
                .or((name == ANY_BYTE).then_some((0, CSUM_COVERED)));
            match (known, byte) {
                (Some((off, size)), None) if size <= 8 => {
                    sb.as_mut_bytes()[off..off + size].copy_from_slice(&v.to_le_bytes()[..size]);
                }
                (Some((off, size)), Some(i)) if i < size => sb.as_mut_bytes()[off + i] = v as u8,
                _ => {}
            }
        }
    }
}

/// Bytes the superblock checksum covers (all but the checksum itself).
const CSUM_COVERED: usize = 0x3FC;

/// Longer fields a checksum correction may name a byte of, beside the field table's.
const LONG_FIELDS: &[ffsck_format::fields::Field] = &[
    ("s_last_mounted", 0x88, 64),
    ("s_journal_uuid", 0xD0, 16),
    ("s_hash_seed", 0xEC, 16),
    ("s_jnl_blocks", 0x10C, 68),
    ("s_mount_opts", 0x200, 64),
];

/// The name a corrected byte outside every named field goes by (`s_byte[offset]`).
const ANY_BYTE: &str = "s_byte";

/// The field holding superblock byte `p` (name, offset, size): the field table's, a longer
/// one, or the whole checksummed area.
fn field_at(p: usize) -> (&'static str, usize, usize) {
    ffsck_format::fields::SUPERBLOCK
        .iter()
        .chain(LONG_FIELDS)
        .find(|f| (f.1..f.1 + f.2).contains(&p))
        .copied()
        .unwrap_or((ANY_BYTE, 0, CSUM_COVERED))
}

/// The one damaged byte that explains a superblock checksum that fails, when exactly one
/// does: crc32c is affine, so the checksum of the copy with byte `p` changed by `e` differs
/// from the stored one by a value that depends only on `p` and `e`, and each of the
/// 255 × 1020 single-byte changes (and a change of the stored checksum itself) is tested.
/// The copy with that byte put back, and the field it belongs to (its value before and
/// after), when the byte is in a field of at most eight bytes and is not the checksum.
pub fn csum_correction(sb: &RawSuperblock) -> Option<(RawSuperblock, Rebuilt)> {
    use zerocopy::IntoBytes;
    if !sb.has_metadata_csum() || sb.checksum_ok() {
        return None;
    }
    let crc = |b: &[u8]| ffsck_format::csum::ext4_crc32c(!0, &b[..CSUM_COVERED]);
    let bytes = sb.as_bytes();
    let stored = sb.s_checksum.get();
    // The change a byte's error must make to the checksum.
    let syndrome = crc(bytes) ^ stored;
    let zero = crc(&[0u8; CSUM_COVERED]);
    let mut unit = [0u8; CSUM_COVERED];
    let mut found: Option<(usize, u8)> = None;
    // The stored checksum damaged in one byte: a match of its own.
    let mut matches = usize::from(syndrome.to_le_bytes().iter().filter(|&&b| b != 0).count() == 1);
    for p in 0..CSUM_COVERED {
        let mut bit = [0u32; 8];
        for (k, l) in bit.iter_mut().enumerate() {
            unit[p] = 1 << k;
            *l = crc(&unit) ^ zero;
        }
        unit[p] = 0;
        let mut by_err = [0u32; 256];
        for e in 1..256usize {
            let low = e.trailing_zeros() as usize;
            by_err[e] = by_err[e & (e - 1)] ^ bit[low];
            if by_err[e] == syndrome {
                matches += 1;
                found = Some((p, e as u8));
            }
        }
        if matches > 1 {
            return None;
        }
    }
    let (p, e) = found.filter(|_| matches == 1)?;
    let (name, off, size) = field_at(p);
    let mut fixed = sb.clone();
    fixed.as_mut_bytes()[p] ^= e;
    // A longer field (a UUID, a name) is named by the byte put back.
    let (field, off, size) = if size <= 8 {
        (name.into(), off, size)
    } else {
        (format!("{name}[{}]", p - off).into(), p, 1)
    };
    let value = |b: &[u8]| {
        let mut w = [0u8; 8];
        w[..size].copy_from_slice(&b[off..off + size]);
        u64::from_le_bytes(w)
    };
    let r = Rebuilt {
        field,
        was: value(sb.as_bytes()),
        now: value(fixed.as_bytes()),
    };
    fixed.checksum_ok().then_some((fixed, r))
}

#[cfg(test)]
mod tests {
    use super::*;
    use zerocopy::IntoBytes;

    /// A superblock with metadata_csum and a few fields set, its checksum good.
    fn sealed() -> RawSuperblock {
        let mut sb = RawSuperblock::parse(&[0u8; 1024]).unwrap();
        sb.s_magic.set(ffsck_format::EXT2_MAGIC);
        sb.s_feature_ro_compat.set(RoCompat::METADATA_CSUM);
        sb.s_inodes_count.set(2048);
        sb.s_reserved_gdt_blocks.set(31);
        sb.s_uuid = [7; 16];
        sb.update_checksum();
        sb
    }

    #[test]
    fn one_damaged_byte_is_named_by_the_checksum() {
        let good = sealed();
        for (off, xor, field, was, now) in [
            (0xCEusize, 0x40u8, "s_reserved_gdt_blocks", 95u64, 31u64),
            (0x01, 0x80, "s_inodes_count", 2048 ^ 0x8000, 2048),
            (0x38, 0xFF, "s_magic", 0xEF53 ^ 0xFF, 0xEF53),
        ] {
            let mut bad = good.clone();
            bad.as_mut_bytes()[off] ^= xor;
            let (fixed, r) = csum_correction(&bad).expect(field);
            assert_eq!((r.field.as_ref(), r.was, r.now), (field, was, now));
            assert_eq!(fixed.as_bytes(), good.as_bytes());
        }
    }

    #[test]
    fn no_correction_without_a_single_explanation() {
        let good = sealed();
        // A good checksum, two damaged bytes, the checksum itself damaged.
        assert!(csum_correction(&good).is_none());
        let mut two = good.clone();
        two.as_mut_bytes()[0x20] ^= 1;
        two.as_mut_bytes()[0x300] ^= 1;
        assert!(csum_correction(&two).is_none());
        let mut sum = good.clone();
        sum.as_mut_bytes()[0x3FD] ^= 0x10;
        assert!(csum_correction(&sum).is_none());
    }

    #[test]
    fn a_byte_of_a_long_field_is_named_by_its_index() {
        let good = sealed();
        let mut uuid = good.clone();
        uuid.as_mut_bytes()[0xD6] ^= 0x10;
        let (fixed, r) = csum_correction(&uuid).expect("one explanation");
        assert_eq!(r.field, "s_journal_uuid[6]");
        assert_eq!(fixed.as_bytes(), good.as_bytes());
        let mut again = uuid.clone();
        set_field(&mut again, &r.field, r.now);
        assert_eq!(
            again.as_bytes()[..CSUM_COVERED],
            good.as_bytes()[..CSUM_COVERED]
        );
    }
}
