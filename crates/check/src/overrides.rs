//! A run's changes of the problem table and of the superblock time checks, as e2fsck.conf's
//! `[problems]` and `[options]` make them. They ride in the check's `Policy`
//! (`Policy::with_overrides`), which `Policy::answer`, `Policy::flags`, `Policy::leaves_error`
//! and pass 0 read: two checks in one process may run with different overrides. Without any,
//! every problem keeps its catalogue flags, the time checks e2fsck's defaults, and pass 1
//! offers to optimize extent trees as e2fsck does.

use crate::problem::Problem;
use std::collections::BTreeMap;

/// e2fsck's default `accept_time_fudge`: a superblock time up to a day ahead of the clock is
/// the clock's skew, not the file system's.
pub const DEFAULT_TIME_FUDGE: u64 = 86_400;

/// How one e2fsck problem code (`[problems] 0xNNNNNN = { ... }`) is changed.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ProblemOverride {
    /// Catalogue flags (`problem::flag`) turned on (`preen_ok = true`, ...).
    pub set: u16,
    /// Catalogue flags turned off (`preen_ok = false`, ...).
    pub clear: u16,
    /// `force_no`: the fix is never made, whatever the mode.
    pub force_no: bool,
}

/// Everything a run may change.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Overrides {
    /// By e2fsck problem code (`ProblemInfo::e2fsck_code`).
    pub problems: BTreeMap<u32, ProblemOverride>,
    /// `broken_system_clock`: no superblock time is judged against the clock.
    pub broken_clock: bool,
    /// Seconds a superblock time may be ahead of the clock (`accept_time_fudge`,
    /// `buggy_init_scripts`); `None`: e2fsck's default, a day.
    pub time_fudge: Option<u64>,
    /// `no_optimize_extents` (and `-E fixes_only`): pass 1 does not offer to make extent
    /// trees narrower or shallower.
    pub no_optimize_extents: bool,
    /// `-E bmap2extent`: every block-mapped file and directory is rewritten as an extent
    /// tree, and so is every extent tree (pass 1E), as e2fsck converts them.
    pub convert_block_maps: bool,
    /// `-E fragcheck`: pass 1 lists every break in a file's physical contiguity.
    pub fragcheck: bool,
    /// `-E ea_ver=1`: xattr blocks carry the version-1 magic; `None` (or 2): version 2.
    pub ea_ver: Option<u8>,
    /// `indexed_dir_slack_percentage`: the free share (percent) of each leaf of a directory
    /// pass 3A indexes; `None`: e2fsck's default, 20.
    pub dir_slack: Option<u8>,
}

impl Overrides {
    /// No change: the catalogue as it is and e2fsck's default time checks.
    pub const NONE: Overrides = Overrides {
        problems: BTreeMap::new(),
        broken_clock: false,
        time_fudge: None,
        no_optimize_extents: false,
        convert_block_maps: false,
        fragcheck: false,
        ea_ver: None,
        dir_slack: None,
    };

    fn problem(&self, p: Problem) -> Option<&ProblemOverride> {
        self.problems.get(&p.info().e2fsck_code?)
    }

    /// The flags of `p` with these overrides applied.
    pub fn flags(&self, p: Problem) -> u16 {
        let flags = p.info().flags;
        match self.problem(p) {
            Some(o) => (flags | o.set) & !o.clear,
            None => flags,
        }
    }

    /// Is `p`'s fix refused by `force_no`?
    pub fn forced_no(&self, p: Problem) -> bool {
        self.problem(p).is_some_and(|o| o.force_no)
    }

    /// May pass 0 judge superblock times against the clock (not `broken_system_clock`)?
    pub fn clock_trusted(&self) -> bool {
        !self.broken_clock
    }

    /// The magic an xattr block must carry (`-E ea_ver`).
    pub fn xattr_magic(&self) -> u32 {
        match self.ea_ver {
            Some(1) => ffsck_format::xattr::XATTR_MAGIC_V1,
            _ => ffsck_format::xattr::XATTR_MAGIC,
        }
    }

    /// How far ahead of the clock a superblock time may be before it is "in the future".
    pub fn time_fudge(&self) -> u64 {
        self.time_fudge.unwrap_or(DEFAULT_TIME_FUDGE)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::problem::{flag, Problem as P};
    use crate::report::{Finding, Mode, Policy, ProblemCtx};

    fn changing(p: P, o: ProblemOverride) -> &'static Overrides {
        let code = p.info().e2fsck_code.expect("an e2fsck code");
        Box::leak(Box::new(Overrides {
            problems: [(code, o)].into(),
            ..Overrides::default()
        }))
    }

    #[test]
    fn two_policies_answer_with_their_own_overrides() {
        let refusing = Policy::Yes.with_overrides(changing(
            P::P1_BAD_I_SIZE,
            ProblemOverride {
                force_no: true,
                ..Default::default()
            },
        ));
        assert!(Policy::Yes.answer(P::P1_BAD_I_SIZE));
        assert!(!refusing.answer(P::P1_BAD_I_SIZE));
        assert!(refusing.forced_no(P::P1_BAD_I_SIZE) && !Policy::Yes.forced_no(P::P1_BAD_I_SIZE));
        assert!(
            refusing.answer(P::P1_BAD_I_BLOCKS),
            "another problem keeps its answer"
        );
        // Another mode of the same run keeps the run's overrides.
        assert!(refusing.with_mode(Mode::Preen).forced_no(P::P1_BAD_I_SIZE));
        assert!(Policy::Preen.answer(P::P1_BAD_I_SIZE));
    }

    #[test]
    fn changed_flags_decide_preen_and_errors() {
        let p = P::P1_BAD_I_SIZE;
        let o = changing(
            p,
            ProblemOverride {
                set: flag::NO_OK,
                clear: flag::PREEN_OK,
                force_no: false,
            },
        );
        let preen = Policy::Preen.with_overrides(o);
        assert_eq!(preen.flags(p) & (flag::NO_OK | flag::PREEN_OK), flag::NO_OK);
        assert!(!preen.answer(p), "preen_ok cleared: preen does not fix it");
        let refused = Finding {
            problem: p,
            ctx: ProblemCtx::ino(12),
            fixed: false,
        };
        assert!(
            !preen.leaves_error(&refused),
            "no_ok set: refusing leaves no error"
        );
        assert!(Policy::Preen.leaves_error(&refused));
    }

    #[test]
    fn time_checks_default_to_e2fsck_and_follow_the_options() {
        assert!(Overrides::NONE.clock_trusted());
        assert_eq!(Policy::No.overrides().time_fudge(), DEFAULT_TIME_FUDGE);
        let o = Overrides {
            broken_clock: true,
            time_fudge: Some(0),
            ..Overrides::default()
        };
        assert!(!o.clock_trusted());
        assert_eq!(o.time_fudge(), 0);
    }
}
