//! Superblock field fixes: the fields and feature combinations pass 0 found wrong are set as
//! e2fsck sets them, and the superblock is written back with a good checksum. Made last in a
//! round with the other superblock edits; the next round checks the result.

use super::features::edit_super;
use crate::problem::{Fixer, Problem as P};
use crate::report::Finding;
use ffsck_format::{Incompat, RoCompat};
use ffsck_io::Device;
use zerocopy::IntoBytes;

/// What e2fsck puts in a bad `s_min_extra_isize` / `s_want_extra_isize`: the size of the inode
/// fields beyond the first 128 bytes that it knows.
const EXTRA_ISIZE: u16 = 32;

/// Apply the superblock fixes among `fixes` to the primary superblock in `dev`; a time in the
/// future is set back to the run's clock.
pub fn apply(dev: &dyn Device, fixes: &[&Finding], p0: &crate::pass0::Pass0Facts) {
    let now = p0.now.secs();
    let mine: Vec<&Finding> = fixes
        .iter()
        .copied()
        .filter(|f| f.problem.fixed_by(Fixer::Superblock))
        .collect();
    let from_backups: Vec<&Finding> = fixes
        .iter()
        .copied()
        .filter(|f| crate::superblock::from_backups(f.problem))
        .collect();
    if mine.is_empty() {
        return;
    }
    let new_uuid = mine.iter().any(|f| f.problem == P::P0_ADD_UUID);
    // The journal inode's map, as the check found it, for its backup in the superblock.
    let jnl = mine
        .iter()
        .any(|f| f.problem == P::P0_BACKUP_JNL)
        .then(|| crate::pass0::journal_backup(&p0.fs))
        .flatten();
    edit_super(dev, |sb| {
        for f in &from_backups {
            crate::superblock::apply_fix(sb, f.problem, &f.ctx);
        }
        for f in &mine {
            match f.problem {
                // (The checksum is recomputed on every write.)
                P::P0_SB_CSUM_INVALID => {}
                P::P0_NONZERO_RESERVED_GDT_BLOCKS => sb.s_reserved_gdt_blocks.set(0),
                // Groups × inodes per group, as pass 0 computed it.
                P::P0_INODE_COUNT_WRONG => sb.s_inodes_count.set(f.ctx.num2 as u32),
                P::P0_SB_FIELD_REBUILT | P::P0_SB_FEATURES_UNCONFIRMED => {
                    crate::superblock::set_field(
                        sb,
                        f.ctx.str.as_deref().unwrap_or_default(),
                        f.ctx.num2,
                    )
                }
                // Pass 1 found nothing in use past the device's end.
                P::P0_FS_SIZE_FITS => {
                    crate::superblock::set_field(sb, "s_blocks_count", f.ctx.blk2)
                }
                P::P0_SB_JOURNAL_UUID_INTERNAL | P::P0_SB_JOURNAL_UUID_NO_JOURNAL => {
                    sb.s_journal_uuid = [0; 16];
                    sb.s_journal_dev.set(0);
                }
                P::P0_64BIT_WITHOUT_EXTENTS => sb
                    .s_feature_incompat
                    .set(sb.s_feature_incompat.get() | Incompat::EXTENTS),
                P::P0_CSUM_SEED_WITHOUT_META_CSUM => {
                    sb.s_feature_incompat
                        .set(sb.s_feature_incompat.get() & !Incompat::CSUM_SEED);
                    sb.s_checksum_seed.set(0);
                }
                // With metadata_csum the descriptors' checksums are crc32c either way.
                P::P0_META_AND_GDT_CSUM_SET => sb
                    .s_feature_ro_compat
                    .set(sb.s_feature_ro_compat.get() & !RoCompat::GDT_CSUM),
                P::P0_BAD_MIN_EXTRA_ISIZE => sb.s_min_extra_isize.set(EXTRA_ISIZE),
                P::P0_BAD_WANT_EXTRA_ISIZE => sb.s_want_extra_isize.set(EXTRA_ISIZE),
                P::P0_ADD_UUID => sb.s_uuid = random_uuid(),
                P::P0_BACKUP_JNL => {
                    if let Some(w) = jnl {
                        for (d, s) in sb.s_jnl_blocks.iter_mut().zip(w) {
                            d.set(s);
                        }
                        sb.s_jnl_backup_type = crate::pass0::JNL_BACKUP_BLOCKS;
                    }
                }
                // The hash of a directory name reads chars as signed, as on x86 (where e2fsck
                // sets the same hint).
                P::P0_DIRHASH_HINT => sb
                    .s_flags
                    .set(sb.s_flags.get() | ffsck_format::superblock::FLAGS_SIGNED_HASH),
                P::P0_FUTURE_SB_LAST_MOUNT => {
                    sb.s_mtime.set(now as u32);
                    sb.s_mtime_hi = (now >> 32) as u8;
                }
                P::P0_FUTURE_SB_LAST_WRITE => {
                    sb.s_wtime.set(now as u32);
                    sb.s_wtime_hi = (now >> 32) as u8;
                }
                // Nothing is on the orphan file (or there is none): the flag goes.
                P::P6_ORPHAN_PRESENT_CLEAN_FILE | P::P6_ORPHAN_PRESENT_NO_FILE => sb
                    .s_feature_ro_compat
                    .set(sb.s_feature_ro_compat.get() & !RoCompat::ORPHAN_PRESENT),
                _ => {}
            }
        }
    });
    if new_uuid {
        reseal_descs(dev);
    }
}

/// A random (version 4, RFC 4122 variant) UUID, as e2fsck's `uuid_generate` makes one. Without
/// a random source it is left null, and the next check asks again.
fn random_uuid() -> [u8; 16] {
    let mut u = [0u8; 16];
    if getrandom::fill(&mut u).is_err() {
        return [0; 16];
    }
    u[6] = (u[6] & 0x0f) | 0x40;
    u[8] = (u[8] & 0x3f) | 0x80;
    u
}

/// With uninit_bg the descriptors' checksums are seeded from the UUID: after a new one, every
/// primary descriptor gets its checksum again (as e2fsck's flush recomputes them).
fn reseal_descs(dev: &dyn Device) {
    let mut raw = [0u8; 1024];
    if dev.read_at(&mut raw, 1024).is_err() {
        return;
    }
    let Some(sb) = ffsck_format::superblock::RawSuperblock::parse(&raw) else {
        return;
    };
    if !sb.ro_compat().has(RoCompat::GDT_CSUM) {
        return;
    }
    let Ok(geo) = ffsck_format::Geometry::new(&sb) else {
        return;
    };
    let Some(descs) = crate::pass0::read_descs(dev, &geo, 0) else {
        return;
    };
    let ds = geo.desc_size as usize;
    for (g, mut gd) in descs.into_iter().enumerate() {
        let g = g as u32;
        if let Some(c) = gd.compute_checksum(&sb, g, ds) {
            gd.bg_checksum.set(c);
        }
        let blk = geo.desc_block(g / geo.descs_per_block);
        let off = blk * u64::from(geo.block_size) + u64::from(g % geo.descs_per_block) * ds as u64;
        let _ = dev.write_at(&gd.as_bytes()[..ds.min(64)], off);
    }
}
