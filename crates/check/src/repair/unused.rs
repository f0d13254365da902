//! Directory entries that name inodes a group descriptor calls unused (past
//! `bg_itable_unused`, or in a group marked `INODE_UNINIT`): as e2fsck, the descriptor stops
//! hiding them (unused count 0, flag cleared) and the check starts again, so pass 1 now scans
//! those inodes and the entries keep their files.

use super::alloc::write_desc;
use crate::pass0::Pass0Facts;
use crate::problem::Fixer;
use crate::report::Finding;
use ffsck_format::group::BG_INODE_UNINIT;
use ffsck_io::Device;

/// Reset the descriptors of the groups the fixes among `fixes` name.
pub fn apply(p0: &Pass0Facts, dev: &dyn Device, fixes: &[&Finding]) {
    let geo = &p0.fs.geo;
    let mut groups: Vec<u32> = fixes
        .iter()
        .filter(|f| f.problem.fixed_by(Fixer::Unused))
        .map(|f| f.ctx.group)
        .filter(|&g| g < geo.group_count)
        .collect();
    groups.sort_unstable();
    groups.dedup();
    for g in groups {
        let mut gd = p0.fs.groups[g as usize].clone();
        gd.bg_flags.set(gd.flags() & !BG_INODE_UNINIT);
        gd.set_itable_unused(0);
        gd.update_checksum(&p0.fs.sb, g, geo.desc_size as usize);
        write_desc(p0, dev, g, &gd);
    }
}
