//! Feature-flag fixes in the superblock: turn on a feature the inodes already use.
//! Made last in a round, on the superblock as the round's other fixes left it; the mappings
//! the new feature makes readable are checked, and the allocation rebuilt, by the next round.

use crate::problem::Problem as P;
use crate::report::Finding;
use ffsck_format::{Incompat, RawSuperblock};
use ffsck_io::Device;
use zerocopy::IntoBytes;

pub fn handles(p: P) -> bool {
    matches!(p, P::P1_EXTENT_FEATURE)
}

/// The incompat bits the fixes among `fixes` turn on.
fn incompat_bits(fixes: &[&Finding]) -> u32 {
    fixes
        .iter()
        .filter(|f| handles(f.problem))
        .map(|f| match f.problem {
            P::P1_EXTENT_FEATURE => Incompat::EXTENTS,
            _ => 0,
        })
        .fold(0, |a, b| a | b)
}

/// Apply the feature fixes among `fixes` to the primary superblock in `dev`.
pub fn apply(dev: &dyn Device, fixes: &[&Finding]) {
    let bits = incompat_bits(fixes);
    if bits == 0 {
        return;
    }
    let mut raw = [0u8; 1024];
    if dev.read_at(&mut raw, 1024).is_err() {
        return;
    }
    let Some(mut sb) = RawSuperblock::parse(&raw) else {
        return;
    };
    sb.s_feature_incompat
        .set(sb.s_feature_incompat.get() | bits);
    sb.update_checksum();
    let _ = dev.write_at(sb.as_bytes(), 1024);
}
