//! Feature-flag fixes in the superblock: turn on a feature the inodes already use (or off one
//! that cannot be), drop quota inode numbers no quota file can have, and move a revision-0
//! file system to the dynamic revision that may carry feature flags.
//! Made last in a round, on the superblock as the round's other fixes left it; the mappings
//! the new feature makes readable are checked, and the allocation rebuilt, by the next round.

use crate::problem::Problem as P;
use crate::report::Finding;
use ffsck_format::{Incompat, RawSuperblock, RoCompat};
use ffsck_io::Device;
use zerocopy::IntoBytes;

/// The (incompat, ro_compat) bits the fixes among `fixes` turn on.
fn feature_bits(fixes: &[&Finding]) -> (u32, u32) {
    fixes.iter().fold((0, 0), |(i, r), f| match f.problem {
        P::P1_EXTENT_FEATURE | P::P1E_CONVERT_BMAP | P::P1_NO_BIGALLOC_BLOCKMAP_FILES => {
            (i | Incompat::EXTENTS, r)
        }
        P::P1_INLINE_DATA_FEATURE => (i | Incompat::INLINE_DATA, r),
        P::P2_FEATURE_LARGE_FILES => (i, r | RoCompat::LARGE_FILE),
        P::P4_DIR_NLINK_FEATURE => (i, r | RoCompat::DIR_NLINK),
        _ => (i, r),
    })
}

/// Apply the feature fixes among `fixes` to the primary superblock in `dev`.
pub fn apply(dev: &dyn Device, fixes: &[&Finding]) {
    let (incompat, ro_compat) = feature_bits(fixes);
    let dynamic = fixes.iter().any(|f| f.problem == P::P1_FS_REV_LEVEL);
    // A meta_bg start past the descriptor blocks: the feature goes, as e2fsck clears it.
    let no_meta_bg = fixes
        .iter()
        .any(|f| f.problem == P::P0_FIRST_META_BG_TOO_BIG);
    // Quota inode numbers no quota file can have are dropped (per type, in `num`).
    let bad_quota: Vec<u64> = fixes
        .iter()
        .filter(|f| f.problem == P::P0_INVALID_QUOTA_INO)
        .map(|f| f.ctx.num)
        .collect();
    if incompat == 0 && ro_compat == 0 && !dynamic && !no_meta_bg && bad_quota.is_empty() {
        return;
    }
    edit_super(dev, |sb| {
        set_bits(sb, incompat, ro_compat, dynamic);
        if no_meta_bg {
            sb.s_feature_incompat
                .set(sb.s_feature_incompat.get() & !Incompat::META_BG);
            sb.s_first_meta_bg.set(0);
        }
        for q in &bad_quota {
            match q {
                0 => sb.s_usr_quota_inum.set(0),
                1 => sb.s_grp_quota_inum.set(0),
                _ => sb.s_prj_quota_inum.set(0),
            }
        }
    });
}

/// Read the primary superblock as `dev` has it now, let `change` edit it, and write it back
/// with its checksum.
pub(super) fn edit_super(dev: &dyn Device, change: impl FnOnce(&mut RawSuperblock)) {
    let mut raw = [0u8; 1024];
    if dev.read_at(&mut raw, 1024).is_err() {
        return;
    }
    let Some(mut sb) = RawSuperblock::parse(&raw) else {
        return;
    };
    change(&mut sb);
    sb.update_checksum();
    let _ = dev.write_at(sb.as_bytes(), 1024);
}

fn set_bits(sb: &mut RawSuperblock, incompat: u32, ro_compat: u32, dynamic: bool) {
    sb.s_feature_incompat
        .set(sb.s_feature_incompat.get() | incompat);
    sb.s_feature_ro_compat
        .set(sb.s_feature_ro_compat.get() | ro_compat);
    if dynamic && sb.s_rev_level.get() == 0 {
        // Revision 0 fixed the first inode and the inode size; revision 1 states them.
        sb.s_rev_level.set(1);
        sb.s_first_ino.set(11);
        sb.s_inode_size.set(128);
    }
}
