//! Findings, the policy that answers them, and the reporter trait through which they leave
//! the engine (the CLI implements terminal, JSON and problem-log reporters).

use crate::overrides::Overrides;
use crate::problem::{flag, Problem};
use serde::Serialize;

/// e2fsck-compatible exit code bits.
pub mod exit {
    pub const OK: i32 = 0;
    pub const NONDESTRUCT: i32 = 1;
    pub const REBOOT: i32 = 2;
    pub const UNCORRECTED: i32 = 4;
    pub const ERROR: i32 = 8;
    pub const USAGE: i32 = 16;
    pub const CANCELED: i32 = 32;
    pub const LIBRARY: i32 = 128;
}

/// The typed context of a finding; unused fields stay zero/empty.
#[derive(Clone, Debug, Default, Serialize, PartialEq, Eq, Hash)]
pub struct ProblemCtx {
    pub ino: u32,
    pub ino2: u32,
    pub dir: u32,
    pub blk: u64,
    pub blk2: u64,
    pub group: u32,
    pub num: u64,
    pub num2: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub str: Option<String>,
    /// The path of `dir`, for messages (`pathname::name_dirs`).
    #[serde(skip_serializing_if = "Note::is_none")]
    pub path: Note,
    /// The path of `ino`, a directory, for messages that name it (`{inopath}`).
    #[serde(skip)]
    pub ino_path: Note,
    /// A third path, for the one message naming three (`{path2}`: `..`'s target).
    #[serde(skip)]
    pub path2: Note,
    /// How many findings this one stands for (0 or 1: itself alone). A run is a row of the
    /// same finding whose `num` counts up from this one's: a directory's holes, which a
    /// garbage map can number in millions, are kept as runs and shown one by one
    /// ([`Finding::each`]).
    #[serde(skip_serializing_if = "is_zero")]
    pub run: u64,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

/// Text for the message only: a finding is the same finding whatever it says (two rounds
/// of a repair may name a directory differently), so it takes no part in comparisons.
#[derive(Clone, Debug, Default, Serialize)]
#[serde(transparent)]
pub struct Note(pub Option<String>);

impl Note {
    fn is_none(&self) -> bool {
        self.0.is_none()
    }
}

impl PartialEq for Note {
    fn eq(&self, _: &Self) -> bool {
        true
    }
}

impl Eq for Note {}

impl std::hash::Hash for Note {
    fn hash<H: std::hash::Hasher>(&self, _: &mut H) {}
}

impl ProblemCtx {
    pub fn ino(ino: u32) -> Self {
        ProblemCtx {
            ino,
            ..Default::default()
        }
    }
    pub fn group(group: u32) -> Self {
        ProblemCtx {
            group,
            ..Default::default()
        }
    }
}

/// One reported inconsistency and the answer it got.
#[derive(Clone, Debug, Serialize)]
pub struct Finding {
    pub problem: Problem,
    pub ctx: ProblemCtx,
    /// Whether the fix was (or, in a read-only run, would be) applied.
    pub fixed: bool,
}

impl Finding {
    /// How many findings this one stands for (see [`ProblemCtx::run`]).
    pub fn count(&self) -> u64 {
        self.ctx.run.max(1)
    }

    /// The findings a run stands for, one by one (the finding itself when it is not a run).
    pub fn each(&self) -> impl Iterator<Item = std::borrow::Cow<'_, Finding>> {
        let n = if self.ctx.run > 1 { self.ctx.run } else { 0 };
        let alone = (n == 0).then_some(std::borrow::Cow::Borrowed(self));
        alone.into_iter().chain((0..n).map(move |i| {
            let mut one = self.clone();
            one.ctx.num = self.ctx.num.saturating_add(i);
            one.ctx.run = 0;
            std::borrow::Cow::Owned(one)
        }))
    }

    /// Whether `next` continues this finding's run: the same finding with the next `num`.
    fn continued_by(&self, next: &Finding) -> bool {
        self.fixed == next.fixed
            && self.ctx.num.checked_add(self.count()) == Some(next.ctx.num)
            && self.same_but_numbers(next)
    }

    /// Whether `other` is this finding but for its number and run length.
    fn same_but_numbers(&self, other: &Finding) -> bool {
        let bare = |c: &ProblemCtx| ProblemCtx {
            num: 0,
            run: 0,
            ..c.clone()
        };
        self.problem == other.problem && bare(&self.ctx) == bare(&other.ctx)
    }

    /// Whether every finding `other` stands for is one this finding stands for.
    pub fn covers(&self, other: &Finding) -> bool {
        other.ctx.num >= self.ctx.num
            && other.ctx.num.saturating_add(other.count())
                <= self.ctx.num.saturating_add(self.count())
            && self.same_but_numbers(other)
    }

    /// The message with the context substituted.
    pub fn message(&self) -> String {
        let c = &self.ctx;
        let mut s = self.problem.info().message.to_string();
        // A directory as e2fsck names it, "/a/b (13)", or by number alone when its path
        // was not looked up.
        let dirpath = match &c.path.0 {
            Some(p) => format!("{p} ({})", c.dir),
            None => c.dir.to_string(),
        };
        let dirname = c.path.0.clone().unwrap_or_else(|| c.dir.to_string());
        let path = c.path.0.clone().unwrap_or_else(|| "???".into());
        // An inode by the entry it was found at, "/a/b/name" (the bare name when the
        // directory's path was not looked up).
        let name = c.str.clone().unwrap_or_default();
        let strpath = match c.path.0.as_deref() {
            Some("/") => format!("/{name}"),
            Some(d) => format!("{d}/{name}"),
            None => name,
        };
        let inopath = match &c.ino_path.0 {
            Some(p) => format!("{p} ({})", c.ino),
            None => c.ino.to_string(),
        };
        let path2 = c.path2.0.clone().unwrap_or_else(|| c.dir.to_string());
        let subs: [(&str, String); 24] = [
            ("{inopath}", inopath),
            ("{path2}", path2),
            // Right-aligned in six columns, as e2fsck's fragcheck lines print them.
            ("{ino:6}", format!("{:6}", c.ino)),
            ("{blk:6}", format!("{:6}", c.blk)),
            ("{blk2:6}", format!("{:6}", c.blk2)),
            // Signed: a block count of -1 to -3 names an indirect block.
            ("{num:i}", (c.num as i64).to_string()),
            ("{strpath}", strpath),
            ("{path}", path),
            ("{num:x}", format!("0x{:04x}", c.num)),
            ("{num2:x}", format!("0x{:04x}", c.num2)),
            ("{blk:time}", ctime(c.blk)),
            ("{ino}", c.ino.to_string()),
            ("{ino2}", c.ino2.to_string()),
            ("{dirpath}", dirpath),
            ("{dirname}", dirname),
            ("{dir}", c.dir.to_string()),
            ("{blk}", c.blk.to_string()),
            ("{blk2}", c.blk2.to_string()),
            ("{group}", c.group.to_string()),
            ("{num}", c.num.to_string()),
            // A file mode, in octal as `ls` and e2fsck show it.
            ("{num:o}", format!("0{:o}", c.num)),
            ("{num2}", c.num2.to_string()),
            ("{name}", c.name.clone().unwrap_or_default()),
            ("{str}", c.str.clone().unwrap_or_default()),
        ];
        for (k, v) in subs.iter() {
            if s.contains(k) {
                s = s.replace(k, v);
            }
        }
        // A block of a file's map, as e2fsck names it: `num` is its logical number, or -1,
        // -2, -3 for the indirect blocks.
        if s.contains("{block}") || s.contains("{Block}") {
            let what = match c.num as i64 {
                -1 => "indirect block".to_string(),
                -2 => "double indirect block".to_string(),
                -3 => "triple indirect block".to_string(),
                n => format!("block #{n}"),
            };
            let mut capital = what.clone();
            capital[..1].make_ascii_uppercase();
            s = s.replace("{block}", &what).replace("{Block}", &capital);
        }
        s
    }
    /// What e2fsck writes on stderr before asking about a few problems (the quota ids whose
    /// usage is off).
    pub fn warnings(&self) -> Vec<&str> {
        match (self.problem, &self.ctx.str) {
            (Problem::P6_UPDATE_QUOTAS, Some(s)) => s
                .lines()
                .filter(|l| l.starts_with("[QUOTA WARNING]"))
                .collect(),
            _ => Vec::new(),
        }
    }
    /// What e2fsck prints after answering yes to a few problems: the work the fix did.
    pub fn epilogue(&self) -> Option<String> {
        if !self.fixed {
            return None;
        }
        match self.problem {
            Problem::P0_JOURNAL_BAD_INODE if self.ctx.num != 0 => {
                Some("*** journal has been deleted ***\n\n".into())
            }
            Problem::P6_RECREATE_JOURNAL => Some(match &self.ctx.str {
                None => format!(
                    "Creating journal ({} blocks):  Done.\n\n*** journal has been regenerated ***\n",
                    self.ctx.num
                ),
                Some(why) => format!("Creating journal ({} blocks): {why}\n", self.ctx.num),
            }),
            _ => None,
        }
    }
}

/// How questions are answered: the command line's mode.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub enum Mode {
    /// `-n`: never fix, never write.
    No,
    /// `-y`: fix everything.
    Yes,
    /// `-p`: fix only what is safe without a human.
    Preen,
}

/// How questions are answered: the mode, and the run's changes to the catalogue's flags
/// (e2fsck.conf's `[problems]`, `Overrides`). Deterministic, so worker threads can decide
/// without a lock; `Copy`, so the overrides are borrowed for the whole program (the command
/// line leaks its one configuration; a test may leak its own).
#[derive(Clone, Copy, Debug)]
pub struct Policy {
    pub mode: Mode,
    overrides: &'static Overrides,
    /// The fixes a person refused in an interactive repair: a later check answers them no,
    /// so what it finds after them (the bitmaps, an inode's other fields) is what the file
    /// system holds with them left as they are, as e2fsck's passes see it after a "no".
    refused: Option<&'static Refusals>,
}

/// The findings an interactive repair's person answered no, shared by the rounds' checks
/// (one set per repair, read by the worker threads as they report).
#[derive(Debug, Default)]
pub struct Refusals(std::sync::RwLock<std::collections::HashSet<(Problem, ProblemCtx)>>);

impl Refusals {
    /// Remember that `f`'s fix was refused.
    pub fn insert(&self, f: &Finding) {
        if let Ok(mut set) = self.0.write() {
            set.insert((f.problem, f.ctx.clone()));
        }
    }

    fn contains(&self, problem: Problem, ctx: &ProblemCtx) -> bool {
        // (No clone of the context unless something was refused: the set is empty in all
        // but interactive runs, and small there.)
        self.0
            .read()
            .is_ok_and(|set| !set.is_empty() && set.contains(&(problem, ctx.clone())))
    }
}

/// What a policy without overrides borrows.
static NO_OVERRIDES: Overrides = Overrides::NONE;

#[allow(non_upper_case_globals)]
impl Policy {
    /// `-n` with the catalogue as it is.
    pub const No: Policy = Policy::new(Mode::No);
    /// `-y` with the catalogue as it is.
    pub const Yes: Policy = Policy::new(Mode::Yes);
    /// `-p` with the catalogue as it is.
    pub const Preen: Policy = Policy::new(Mode::Preen);

    pub const fn new(mode: Mode) -> Policy {
        Policy {
            mode,
            overrides: &NO_OVERRIDES,
            refused: None,
        }
    }

    /// This policy, answering no to the findings in `refused` (an interactive repair's).
    pub fn with_refusals(self, refused: &'static Refusals) -> Policy {
        Policy {
            refused: Some(refused),
            ..self
        }
    }

    /// The refusals this policy honours, if any.
    pub fn refusals(self) -> Option<&'static Refusals> {
        self.refused
    }

    /// The answer to one finding: the policy's answer to its problem, unless a person
    /// refused this very finding.
    pub fn answer_to(self, p: Problem, ctx: &ProblemCtx) -> bool {
        self.answer(p) && !self.refused.is_some_and(|r| r.contains(p, ctx))
    }

    /// This policy, answering with `overrides`.
    pub fn with_overrides(self, overrides: &'static Overrides) -> Policy {
        Policy { overrides, ..self }
    }

    /// The same overrides in another mode (a read-only check within a repair).
    pub fn with_mode(self, mode: Mode) -> Policy {
        Policy { mode, ..self }
    }

    pub fn overrides(self) -> &'static Overrides {
        self.overrides
    }

    /// The flags of `p` with the run's overrides applied.
    pub fn flags(self, p: Problem) -> u16 {
        self.overrides.flags(p)
    }

    /// Is `p`'s fix refused by the run's `force_no`?
    pub fn forced_no(self, p: Problem) -> bool {
        self.overrides.forced_no(p)
    }

    pub fn answer(self, p: Problem) -> bool {
        let f = self.flags(p);
        if f & flag::INFO != 0 || self.forced_no(p) {
            return false;
        }
        match self.mode {
            Mode::No => false,
            Mode::Yes => p.fixable(),
            Mode::Preen => f & flag::PREEN_OK != 0 && f & flag::PREEN_NO == 0 && p.fixable(),
        }
    }

    /// Does leaving `f` unfixed leave the file system inconsistent?
    pub fn leaves_error(self, f: &Finding) -> bool {
        !f.fixed && self.flags(f.problem) & (flag::NO_OK | flag::INFO | flag::NOT_A_FIX) == 0
    }
}

/// Progress and findings leave the engine through this trait.
pub trait Reporter: Send {
    /// A pass starts (1..=5, with 0 for the superblock checks).
    fn pass_start(&mut self, _pass: u8) {}
    /// Progress within a pass: `done` of `total` units.
    fn progress(&mut self, _pass: u8, _done: u64, _total: u64) {}
    fn finding(&mut self, f: &Finding);
    /// A repair restarts the check from the beginning, as e2fsck does after a fix that
    /// changes what the passes before it saw (an inode table moved, a group's unused inodes
    /// area reset, the bad-blocks inode cleared): what follows is shown under pass headers of
    /// its own, after "Restarting ... from the beginning...".
    fn restart(&mut self) {}
    /// Whether a person answers the questions (an interactive repair): the repair then shows
    /// each new fix through [`Reporter::ask`] before deciding on it, instead of reporting
    /// its findings after the policy decided.
    fn asks(&self) -> bool {
        false
    }
    /// Show `f`, a fix the repair proposes, with its question, and return the answer. Only
    /// called when [`Reporter::asks`].
    fn ask(&mut self, f: &Finding) -> bool {
        self.finding(f);
        f.fixed
    }
}

/// A reporter that keeps findings in memory (tests, JSON output).
#[derive(Default)]
pub struct Collect(pub Vec<Finding>);
impl Reporter for Collect {
    fn finding(&mut self, f: &Finding) {
        self.0.push(f.clone());
    }
}

/// Findings produced by one unit of parallel work, in the order they were found.
#[derive(Default, Debug)]
pub struct Findings(pub Vec<Finding>);

impl Findings {
    /// Record a finding and return the policy's answer, which the caller acts on.
    pub fn report(&mut self, policy: Policy, problem: Problem, ctx: ProblemCtx) -> bool {
        let fixed = policy.answer_to(problem, &ctx);
        self.0.push(Finding {
            problem,
            ctx,
            fixed,
        });
        fixed
    }
    pub fn extend(&mut self, other: Findings) {
        self.0.extend(other.0);
    }
    /// Add `f`, joining it to the last finding's run when its problem is kept as runs
    /// (`flag::RUNS`) and it continues that run.
    pub fn push(&mut self, f: Finding) {
        let runs = f.problem.info().flags & crate::problem::flag::RUNS != 0;
        match self.0.last_mut() {
            Some(last) if runs && last.continued_by(&f) => {
                last.ctx.run = last.count() + f.count();
            }
            _ => self.0.push(f),
        }
    }
}

/// A time stamp as e2fsck prints one (UTC, `asctime` style): `Thu Jan  1 00:00:00 1970`.
pub fn ctime(secs: u64) -> String {
    let fmt = time::macros::format_description!(
        "[weekday repr:short] [month repr:short] [day padding:space] [hour]:[minute]:[second] [year]"
    );
    i64::try_from(secs)
        .ok()
        .and_then(|s| time::OffsetDateTime::from_unix_timestamp(s).ok())
        .and_then(|t| t.format(&fmt).ok())
        .unwrap_or_else(|| secs.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hole(dir: u32, num: u64) -> Finding {
        Finding {
            problem: Problem::P2_DIRECTORY_HOLE,
            ctx: ProblemCtx {
                dir,
                ino: dir,
                num,
                ..Default::default()
            },
            fixed: false,
        }
    }

    #[test]
    fn a_row_of_holes_is_one_run_shown_hole_by_hole() {
        let mut f = Findings::default();
        for n in [1, 2, 3, 4, 7] {
            f.push(hole(12, n));
        }
        f.push(hole(13, 8));
        // 1-4 join; 7 does not follow 4; another directory's hole never joins.
        assert_eq!(f.0.len(), 3);
        assert_eq!(f.0[0].count(), 4);
        let shown: Vec<u64> =
            f.0.iter()
                .flat_map(Finding::each)
                .map(|x| x.ctx.num)
                .collect();
        assert_eq!(shown, [1, 2, 3, 4, 7, 8]);
        assert!(f.0[0].each().all(|x| x.ctx.run == 0 && x.ctx.dir == 12));
        assert_eq!(f.0[0].message(), hole(12, 1).message());
        // What is left of a run in a later round lies within it; a hole past it does not.
        let mut rest = hole(12, 2);
        rest.ctx.run = 3;
        assert!(f.0[0].covers(&rest));
        assert!(f.0[0].covers(&hole(12, 1)));
        assert!(!f.0[0].covers(&hole(12, 5)));
        assert!(!f.0[0].covers(&hole(13, 2)));
    }

    #[test]
    fn an_answered_hole_does_not_join_an_unanswered_run() {
        let mut f = Findings::default();
        f.push(hole(12, 1));
        f.push(Finding {
            fixed: true,
            ..hole(12, 2)
        });
        assert_eq!(f.0.len(), 2);
    }
}
