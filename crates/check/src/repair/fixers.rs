//! The fixer table: for each fixer the catalogue names (`problem::Fixer`), how its fixes are
//! applied and when. Which problems a fixer fixes is the catalogue's `fixer` column; the order
//! fixes keep within a round (who waits for whom) is its `after` column (`order.rs`).

use super::{
    alloc, blockmap, clear, clone, connect, dirent, dirhole, extent_tree, features, inode, itable,
    journal, mmp, orphans, quota, resize, salvage, superblock, unused, xattr, Dirs,
};
use crate::engine::AllocFacts;
use crate::pass0::Pass0Facts;
use crate::problem::Fixer;
use crate::report::Finding;
use ffsck_io::Device;

/// When a fixer's fixes are made.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum When {
    /// By the check itself, when the answer is yes (journal superblock, replay).
    ByCheck,
    /// Before the round's decisions, so this round's other fixes can use the result (the root
    /// directory, `/lost+found`).
    First,
    /// In a round of its own: nothing else is applied, and the check restarts.
    Alone,
    /// In table order, after the round's decisions.
    InOrder,
    /// After the last round, once the rest is clean (a new journal).
    AfterLast,
}

/// What an apply step works on: the round's check and the overlay it writes to.
pub(super) struct Round<'a> {
    pub p0: &'a Pass0Facts,
    pub dev: &'a dyn Device,
    /// `dev` without the round's first fixes (a new root, `/lost+found`): what pass 1D copies.
    pub before_first: &'a dyn Device,
    pub dirs: &'a Dirs,
    pub alloc: Option<&'a mut AllocFacts>,
    /// Every finding of the round, and the fixes to make among them.
    pub findings: &'a [Finding],
    pub fixes: &'a [&'a Finding],
    /// Where the reconnected inodes go.
    pub plan: &'a connect::Plan,
    /// A step took or freed blocks (quota files, the orphan file): the allocation is rebuilt.
    pub blocks_changed: bool,
    /// The free share of an indexed directory's leaves a pass-3A rebuild keeps (percent).
    pub dir_slack: u8,
    /// The summaries the allocation rebuild leaves as they are (refused, or not asked yet).
    pub keep: &'a alloc::Keep,
}

impl<'a> Round<'a> {
    fn any(&self, fixer: Fixer) -> bool {
        self.fixes.iter().any(|f| f.problem.fixed_by(fixer))
    }

    /// The fixes of passes 0 and 1 (`early`), or of the passes after them.
    fn by_pass(&self, early: bool) -> Vec<&'a Finding> {
        self.fixes
            .iter()
            .copied()
            .filter(|f| (f.problem.pass() <= 1 && !f.problem.in_pass1bcd()) == early)
            .collect()
    }
}

/// One fixer's apply step.
pub(super) struct Step {
    pub fixer: Fixer,
    pub when: When,
    pub apply: fn(&mut Round),
}

const fn step(fixer: Fixer, when: When, apply: fn(&mut Round)) -> Step {
    Step { fixer, when, apply }
}

fn none(_: &mut Round) {}

/// Every fixer's steps, in the order they are applied: maps before the inodes that use them,
/// inodes before entries, entries before directories, then the allocation the fixes above
/// left, and last the superblock as they left it.
pub(super) const FIXERS: &[Step] = &[
    step(Fixer::Check, When::ByCheck, none),
    step(Fixer::Root, When::First, none),
    step(Fixer::Lpf, When::First, none),
    step(Fixer::ITable, When::Alone, |r| {
        if let Some(facts) = r.alloc.as_deref() {
            itable::apply(r.p0, r.dev, facts);
        }
    }),
    step(Fixer::Unused, When::Alone, |r| {
        unused::apply(r.p0, r.dev, r.fixes)
    }),
    step(Fixer::BlockMap, When::InOrder, |r| {
        blockmap::apply(r.p0, r.dev, r.fixes)
    }),
    step(Fixer::ExtentTree, When::InOrder, |r| {
        r.blocks_changed |= extent_tree::apply(r.p0, r.dev, r.alloc.as_deref_mut(), r.fixes);
    }),
    // Passes 0 and 1 fix inodes before pass 1D copies shared blocks (an inode-table block's
    // copy holds them, as e2fsck's does); the later passes' inode fixes come after it.
    step(Fixer::Inode, When::InOrder, |r| {
        inode::apply(r.p0, r.dev, &r.by_pass(true))
    }),
    step(Fixer::Xattr, When::InOrder, |r| {
        xattr::apply(r.p0, r.dev, &r.by_pass(true))
    }),
    step(Fixer::Clear, When::InOrder, |r| {
        let early = r.by_pass(true);
        clear::apply(r.p0, r.dev, r.alloc.as_deref_mut(), &early)
    }),
    step(Fixer::Clone, When::InOrder, |r| {
        clone::apply(
            r.p0,
            r.dev,
            r.before_first,
            r.alloc.as_deref_mut(),
            r.findings,
            r.fixes,
        )
    }),
    step(Fixer::Inode, When::InOrder, |r| {
        inode::apply(r.p0, r.dev, &r.by_pass(false))
    }),
    step(Fixer::Xattr, When::InOrder, |r| {
        xattr::apply(r.p0, r.dev, &r.by_pass(false))
    }),
    step(Fixer::Clear, When::InOrder, |r| {
        let late = r.by_pass(false);
        clear::apply(r.p0, r.dev, r.alloc.as_deref_mut(), &late)
    }),
    step(Fixer::Connect, When::InOrder, |r| {
        if r.any(Fixer::Connect) {
            connect::apply(r.p0, r.dev, r.plan);
        }
    }),
    step(Fixer::Dirent, When::InOrder, |r| {
        dirent::apply(r.p0, r.dev, r.dirs, r.fixes)
    }),
    step(Fixer::Salvage, When::InOrder, |r| {
        r.blocks_changed |= salvage::apply(
            r.p0,
            r.dev,
            r.dirs,
            r.alloc.as_deref_mut(),
            r.fixes,
            r.dir_slack,
        );
    }),
    step(Fixer::DirHole, When::InOrder, |r| {
        r.blocks_changed |= dirhole::apply(r.p0, r.dev, r.alloc.as_deref_mut(), r.fixes);
    }),
    step(Fixer::Resize, When::InOrder, |r| {
        if let Some(facts) = r.alloc.as_deref_mut() {
            r.blocks_changed |= resize::apply(r.p0, r.dev, facts, r.fixes);
        }
    }),
    step(Fixer::Journal, When::InOrder, |r| {
        journal::apply(r.p0, r.dev, r.fixes)
    }),
    step(Fixer::Orphans, When::InOrder, |r| {
        orphans::apply_file(r.p0, r.dev, r.fixes);
        if let Some(facts) = r.alloc.as_deref_mut() {
            r.blocks_changed |= orphans::recreate_file(r.p0, r.dev, facts, r.fixes);
        }
    }),
    // Quota files take and free blocks: the allocation is written out after them.
    step(Fixer::Quota, When::InOrder, |r| {
        if let Some(facts) = r.alloc.as_deref_mut() {
            r.blocks_changed |= quota::apply(r.p0, r.dev, facts, r.fixes);
        }
    }),
    step(Fixer::Alloc, When::InOrder, |r| {
        if r.blocks_changed || r.any(Fixer::Alloc) {
            if let Some(facts) = r.alloc.as_deref() {
                alloc::rebuild_keeping(r.p0, r.dev, facts, r.keep);
            }
        }
    }),
    // A new MMP block is marked on top of the rebuilt allocation.
    step(Fixer::Mmp, When::InOrder, |r| {
        mmp::apply(r.p0, r.dev, r.alloc.as_deref_mut(), r.fixes)
    }),
    // Last: the superblock as the fixes above left it.
    step(Fixer::Features, When::InOrder, |r| {
        features::apply(r.dev, r.fixes)
    }),
    step(Fixer::Superblock, When::InOrder, |r| {
        superblock::apply(r.dev, r.fixes, r.p0)
    }),
    step(Fixer::Resize, When::InOrder, |r| {
        resize::apply_super(r.dev, r.fixes)
    }),
    step(Fixer::Journal, When::InOrder, |r| {
        journal::apply_super(r.dev, r.fixes)
    }),
    step(Fixer::NewJournal, When::AfterLast, none),
];

/// When `fixer`'s fixes are made.
pub(super) fn when(fixer: Fixer) -> When {
    FIXERS
        .iter()
        .find(|s| s.fixer == fixer)
        .map_or(When::ByCheck, |s| s.when)
}

/// Apply the round's fixes: only the steps of `alone` when a fix is made alone in its round
/// (and its fixer's steps run alone), otherwise every in-order step, in table order.
pub(super) fn apply(r: &mut Round, alone: Option<Fixer>) {
    let alone = alone.filter(|&g| when(g) == When::Alone);
    for s in FIXERS {
        let run = match alone {
            Some(g) => s.fixer == g,
            None => s.when == When::InOrder,
        };
        if run {
            (s.apply)(r);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{When, FIXERS};
    use crate::problem::{after, Problem};

    /// Every fixer the catalogue names has a step, and only in-order fixers are summaries or
    /// remaps (the order rules apply to fixes made in a round).
    #[test]
    fn every_fixer_in_the_catalogue_has_a_step() {
        for p in Problem::ALL {
            let Some(fixer) = p.info().fixer else {
                continue;
            };
            let steps: Vec<When> = FIXERS
                .iter()
                .filter(|s| s.fixer == fixer)
                .map(|s| s.when)
                .collect();
            assert!(!steps.is_empty(), "{p:?}: {fixer:?} has no step");
            if p.after(after::SUMMARY) || p.after(after::REMAPS) {
                assert!(steps.contains(&When::InOrder), "{p:?}: {fixer:?}");
            }
            if p.after(after::ALONE) && steps[0] == When::Alone {
                assert!(steps.iter().all(|&w| w == When::Alone), "{p:?}: {fixer:?}");
            }
        }
    }
}
