//! An unusable internal journal is dropped, as e2fsck does when it may: the superblock loses
//! `has_journal`, `needs_recovery`, the journal inode number and its backup of the journal's
//! block map, and inode 8, no longer the journal, is zeroed (a new journal is made once the
//! rest is clean: `newjournal.rs`). A journal the superblock no longer says it has
//! (`has_journal` clear) is let go the same way, and a `needs_recovery` flag with no journal
//! to recover is cleared.

use super::features::edit_super;
use super::inode::edit;
use crate::pass0::Pass0Facts;
use crate::problem::Problem as P;
use crate::report::Finding;
use ffsck_format::{ino, Compat, Incompat};
use ffsck_io::Device;
use zerocopy::IntoBytes;

/// Zero inode 8 when it is no longer the journal.
pub fn apply(p0: &Pass0Facts, dev: &dyn Device, fixes: &[&Finding]) {
    if fixes
        .iter()
        .any(|f| f.problem == P::P1_JOURNAL_INODE_NOT_CLEAR)
    {
        edit(p0, dev, ino::JOURNAL, |i| i.as_mut_bytes().fill(0));
    }
}

/// Drop the journal from the superblock (made last, after the allocation rebuild).
pub fn apply_super(dev: &dyn Device, fixes: &[&Finding]) {
    let has = |p: P| fixes.iter().any(|f| f.problem == p);
    if has(P::P0_JOURNAL_RECOVER_SET) {
        edit_super(dev, |sb| {
            sb.s_feature_incompat
                .set(sb.s_feature_incompat.get() & !Incompat::RECOVER)
        });
    }
    if has(P::P0_JOURNAL_HAS_JOURNAL) {
        // (Pass 1 then finds inode 8 holding data it no longer should: cleared in its turn.)
        edit_super(dev, |sb| {
            sb.s_feature_incompat
                .set(sb.s_feature_incompat.get() & !Incompat::RECOVER);
            sb.s_journal_inum.set(0);
            sb.s_journal_dev.set(0);
            sb.s_journal_uuid = [0; 16];
        });
    }
    if !has(P::P0_JOURNAL_BAD_INODE) {
        return;
    }
    edit_super(dev, |sb| {
        sb.s_feature_compat
            .set(sb.s_feature_compat.get() & !Compat::HAS_JOURNAL);
        sb.s_feature_incompat
            .set(sb.s_feature_incompat.get() & !Incompat::RECOVER);
        sb.s_journal_inum.set(0);
        sb.s_jnl_blocks.iter_mut().for_each(|w| w.set(0));
        sb.s_jnl_backup_type = 0;
    });
}
