//! Repair: check the file system through a copy-on-write overlay, apply the fix of every
//! finding the policy answers yes, and check again until nothing is left to fix. The overlay's
//! changes are then one repair generation, which the caller commits through the redo log.
//!
//! A problem is only answered yes when the catalogue names a fixer for it (`Problem::fixable`);
//! everything else is reported as not fixed and leaves the exit code's "errors left" bit set,
//! so a partial repair never claims more than it did. Each round: check, hold back the fixes
//! that must wait (`order`, from the catalogue's `after` column), ask (`interactive`), make the
//! root and `/lost+found`, decide, report, and apply the fixer table (`fixers`).

mod alloc;
pub mod bblist;
mod blockmap;
mod clear;
mod clone;
mod connect;
mod dirent;
mod dirhole;
mod extent_tree;
mod features;
mod fixers;
mod inode;
mod interactive;
mod itable;
mod journal;
mod lpf;
pub mod mark;
mod mmp;
mod newjournal;
mod order;
mod orphans;
mod quota;
mod rehash;
mod resize;
mod root;
mod salvage;
mod superblock;
mod truncate;
mod unused;
mod xattr;

use crate::engine::{self, CheckOptions, Outcome};
use crate::pass0::{self, Pass0Facts};
use crate::problem::{after, Fixer, Problem as P};
use crate::report::{exit, Finding, Findings, Mode, Policy, ProblemCtx, Reporter};
use ffsck_io::overlay::{Extent, Overlay, Recording};
use ffsck_io::Device;
use fixers::{Round, When};
use interactive::{Answers, Event, Held};
use std::collections::HashMap;
use std::sync::Arc;

/// Rounds of check-and-fix before giving up on reaching a clean state.
const MAX_ROUNDS: usize = 8;
/// The same for an interactive repair.
const MAX_ROUNDS_ASKED: usize = 16;

/// The blocks of every directory, by owner, in logical order.
#[derive(Default)]
pub struct Dirs(std::collections::BTreeMap<u32, Vec<(u32, u64)>>);

impl Dirs {
    fn new(facts: Option<&engine::AllocFacts>) -> Self {
        let mut d = Dirs::default();
        for b in facts.map_or(&[][..], |f| &f.dir_blocks[..]) {
            if b.pblk != 0 {
                d.0.entry(b.ino).or_default().push((b.lblk, b.pblk));
            }
        }
        for v in d.0.values_mut() {
            v.sort_unstable();
        }
        d
    }
    /// Physical block of logical block `lblk` of `dir`.
    pub fn block(&self, dir: u32, lblk: u32) -> Option<u64> {
        let v = self.0.get(&dir)?;
        v.iter().find(|b| b.0 == lblk).map(|b| b.1)
    }
    /// Physical blocks of `dir`, in logical order.
    pub fn blocks(&self, dir: u32) -> Vec<u64> {
        self.0
            .get(&dir)
            .map_or(Vec::new(), |v| v.iter().map(|b| b.1).collect())
    }
}

pub struct RepairOutcome {
    /// The last check (on the repaired state), with its summary line.
    pub last: Outcome,
    /// Every finding reported, across rounds.
    pub findings: Vec<Finding>,
    /// The staged changes, ascending and coalesced.
    pub changes: Vec<Extent>,
    pub rounds: usize,
    /// Preen met a problem it may not fix: stop and ask for a manual run.
    pub preen_halt: bool,
    /// The problems a repaired state that is neither clean nor strictly better than the
    /// original would leave: the staged changes must not be committed (ffsck never leaves a
    /// file system worse than it found it).
    pub new_problems: Vec<P>,
    pub exit_code: i32,
}

/// A repair in progress: the overlay, what was reported so far, and what the rounds share.
struct Repair<'r> {
    ov: Arc<Overlay>,
    opts: CheckOptions,
    rep: &'r mut dyn Reporter,
    /// Every finding reported, across rounds.
    findings: Vec<Finding>,
    /// How many errors the first round found (fixed or not: the file system's own).
    first_errors: u64,
    /// The files of each kind the first round found in use.
    first_files: Option<crate::facts::Counts>,
    rounds: usize,
    preen_halt: bool,
    /// Pass 3A's rebuilds (of every directory under `-D`) were offered.
    optimized: bool,
    /// No room was found for a new `/lost+found`: lost files go to the root instead.
    lpf_root: bool,
    last: Option<Outcome>,
    /// An interactive run, and its answers.
    asks: bool,
    answers: Answers,
    /// The next round shows its pass headers: the first round, and the round after a
    /// restart (e2fsck's second run from the beginning).
    fresh: bool,
    /// The block and inode bitmaps the repair's fixes changed (or one of this round is about
    /// to change): written whole with fresh checksums, so their checksums are not asked
    /// about, as e2fsck skips a bitmap it changed.
    bitmaps: Bitmaps,
}

/// Check and repair the file system on `dev`, staging every change in an overlay. Nothing is
/// written to `dev`.
pub fn repair(dev: Arc<dyn Device>, opts: &CheckOptions, rep: &mut dyn Reporter) -> RepairOutcome {
    let asks = rep.asks();
    let mut opts = opts.clone();
    if asks {
        // A person's refusals are answered no by the rounds' checks too (one small set per
        // repair, which lives as long as the policies that borrow it).
        let refused: &'static crate::report::Refusals = Box::leak(Box::default());
        opts.policy = opts.policy.with_refusals(refused);
    }
    let mut r = Repair {
        ov: Arc::new(Overlay::new(dev)),
        opts: opts.clone(),
        rep,
        findings: Vec::new(),
        first_errors: 0,
        first_files: None,
        rounds: 0,
        preen_halt: false,
        optimized: false,
        lpf_root: false,
        last: None,
        asks,
        answers: Answers::new(opts.policy),
        fresh: true,
        bitmaps: Bitmaps::default(),
    };
    r.prepare();
    while r.rounds < r.max_rounds() && r.round() {}
    r.finish()
}

impl Repair<'_> {
    /// Rounds of check-and-fix before giving up: more for a person, whose answers may each
    /// send the questions after them to another round.
    fn max_rounds(&self) -> usize {
        if self.asks {
            MAX_ROUNDS_ASKED
        } else {
            MAX_ROUNDS
        }
    }

    /// Report a finding made outside the rounds.
    fn tell(&mut self, f: Finding) {
        self.rep.finding(&f);
        self.answers.told(&f);
        self.findings.push(f);
    }

    /// Before the first round: opened from a backup superblock, the primary superblock and
    /// descriptors are rewritten from it (e2fsck writes them when it finishes) and the rounds
    /// check the primary; then the orphan list is released, as e2fsck does when it may write.
    fn prepare(&mut self) {
        if self.opts.policy.mode == Mode::No {
            return;
        }
        for f in restore_primary(&self.ov, &mut self.opts) {
            self.tell(f);
        }
        if let Some(p0) = open(&self.ov, &self.opts) {
            let (p0, replayed) = orphans::recover(p0, self.ov.clone(), &self.opts);
            for f in replayed.into_iter().chain(orphans::release(&p0, &*self.ov)) {
                self.tell(f);
            }
        }
        // -l, -L, -c: the bad-blocks inode from the list, before the passes see it.
        if let Some(list) = self.opts.bad_blocks.clone() {
            if let Some(p0) = open(&self.ov, &self.opts) {
                for f in bblist::update(&p0, &*self.ov, &list, self.opts.now) {
                    self.tell(f);
                }
            }
        }
        // (Orphans released free their blocks and inodes.)
        if let Some(p0) = open(&self.ov, &self.opts) {
            self.bitmaps.note(&p0, &self.ov, false);
        }
    }

    /// Count a round that ran (the first one's problems are the file system's own).
    fn count(&mut self, out: &Outcome) {
        if self.rounds == 0 {
            self.first_errors = out
                .findings
                .iter()
                .filter(|f| is_error(self.opts.policy, f))
                .map(Finding::count)
                .sum();
            self.first_files = out.summary.as_ref().map(|s| s.counts);
        } else if self.fresh && !self.asks {
            // The round after e2fsck's restart: its counters start again, so the
            // non-contiguous files are counted as this round's pass 1 finds them.
            if let (Some(first), Some(s)) = (self.first_files.as_mut(), out.summary.as_ref()) {
                first.fragmented = s.counts.fragmented;
            }
        }
        self.rounds += 1;
    }

    /// One round of check and fix. Returns whether another round follows.
    fn round(&mut self) -> bool {
        let seen = self.findings.clone();
        let mut held = Held {
            events: Vec::new(),
            singles: self.asks,
        };
        let mut out = engine::check(self.ov.clone(), &self.opts, &mut held);
        if self.asks {
            interactive::split_runs(&mut out.findings);
        }
        let p0 = open(&self.ov, &self.opts);
        // What the check itself wrote (a journal replayed) is the file system as found.
        if let Some(p0) = &p0 {
            self.bitmaps.note(p0, &self.ov, true);
        }
        let mut dirs = Dirs::new(out.alloc.as_ref());
        order::hold_back(&mut out.findings);
        order::clone_first(&mut out.findings);
        self.answers.recall(&mut out.findings);
        let alone = order::alone(&mut out.findings, out.alloc.as_ref());
        // Moving an inode table or resetting a group restarts the check, as in e2fsck.
        let restart = alone.is_some_and(|g| fixers::when(g) == When::Alone);
        // Interactive: passes 0-3 are asked now, before anything below acts on the answers.
        if self.asks {
            let last = self.rounds + 1 >= self.max_rounds();
            self.answers.begin_round(alone, last);
            self.answers
                .round(&held, &mut out.findings, true, self.rep, &mut self.findings);
            // The fix that held everything else back was answered no: check again without it.
            let refused = alone.is_some()
                && !out
                    .findings
                    .iter()
                    .any(|f| f.fixed && f.problem.after(after::ALONE));
            if refused && self.rounds + 1 < self.max_rounds() {
                self.count(&out);
                self.last = Some(out);
                return true;
            }
        }
        // (Interactive: not while pass 3's questions wait for the next round.)
        let first_writes = match (&p0, restart || (self.asks && self.answers.holds_pass(3))) {
            (Some(p0), false) => self.first_fixes(p0, &mut dirs, &mut out, &mut held),
            _ => Recording::default(),
        };
        if let Some(p0) = &p0 {
            self.bitmaps.note(p0, &self.ov, false);
        }
        if self.asks {
            self.answers.round(
                &held,
                &mut out.findings,
                false,
                self.rep,
                &mut self.findings,
            );
        }
        let plan = self.decide(p0.as_ref(), &dirs, &mut out);
        if self.asks {
            self.answers.note_made(&out.findings);
        }
        out.exit_code =
            engine::exit_code(&out.findings, self.opts.policy) | (out.exit_code & exit::ERROR);
        self.count(&out);
        trace(self.rounds, &out);
        // Preen stops at the first problem it may not fix, keeping the fixes before it.
        let halt_at = (self.opts.policy.mode == Mode::Preen)
            .then(|| {
                out.findings
                    .iter()
                    .position(|f| self.opts.policy.leaves_error(f))
            })
            .flatten();
        let mut upto = halt_at.unwrap_or(out.findings.len());
        let mut no_fixes = !out.findings[..upto].iter().any(|f| f.fixed);
        // Interactive: questions that waited for this round's answers are put in the next.
        let waiting = self.asks && self.answers.waiting() && (self.answers.put_any() || !no_fixes);
        // Pass 3A: once nothing else is left to fix, the directories e2fsck rebuilds unasked
        // (every one under -D) are offered, and the check runs once more.
        if no_fixes
            && !waiting
            && !self.optimized
            && out.fatal.is_none()
            && halt_at.is_none()
            && self.rounds < self.max_rounds()
        {
            self.optimized = true;
            if let Some(p0) = &p0 {
                let (at, n) = self.offer_pass_3a(p0, &dirs, &mut out.findings);
                if n > 0 {
                    held.insert_found(at, n);
                    upto = out.findings.len();
                    no_fixes = false;
                }
            }
        }
        let final_round = (no_fixes && !waiting)
            || out.fatal.is_some()
            || halt_at.is_some()
            || self.rounds == self.max_rounds();
        let restart_at = (!self.asks)
            .then(|| order::restart_point(&out.findings[..upto], restart && !final_round))
            .flatten();
        self.report(&seen, held, &out, upto, final_round, restart_at);
        if no_fixes || out.fatal.is_some() {
            self.preen_halt = halt_at.is_some();
            self.last = Some(out);
            return !final_round;
        }
        if let Some(p0) = &p0 {
            let keep = alloc::Keep::of(
                &out.findings[..upto],
                self.opts.policy,
                self.asks,
                out.alloc.as_ref(),
            );
            let fixes: Vec<&Finding> = out.findings[..upto].iter().filter(|f| f.fixed).collect();
            let mut round = Round {
                p0,
                dev: &*self.ov,
                before_first: &self.ov.without(&first_writes),
                dirs: &dirs,
                alloc: out.alloc.as_mut(),
                findings: &out.findings,
                fixes: &fixes,
                plan: &plan,
                blocks_changed: false,
                dir_slack: self
                    .opts
                    .policy
                    .overrides()
                    .dir_slack
                    .unwrap_or(rehash::DEFAULT_SLACK),
                keep: &keep,
            };
            fixers::apply(&mut round, alone);
            self.bitmaps.note(p0, &self.ov, false);
        }
        self.preen_halt = halt_at.is_some();
        self.last = Some(out);
        !self.preen_halt
    }

    /// A usable root and `/lost+found` first (`When::First`), so this round's reconnections
    /// can use them. The findings `/lost+found` adds are placed in the held report. Returns
    /// what they wrote: pass 1D's copies hold the blocks as they were before them (e2fsck
    /// makes both in pass 3), though after the root's clearing in pass 1.
    fn first_fixes(
        &mut self,
        p0: &Pass0Facts,
        dirs: &mut Dirs,
        out: &mut Outcome,
        held: &mut Held,
    ) -> Recording {
        let (Some(facts), None) = (out.alloc.as_mut(), &out.fatal) else {
            return Recording::default();
        };
        root::clear(p0, &*self.ov, &out.findings);
        self.ov.record();
        root::recreate(p0, &*self.ov, dirs, facts, &mut out.findings);
        let (asks, policy) = (self.asks, self.opts.policy);
        let (answers, rep, findings) = (&mut self.answers, &mut *self.rep, &mut self.findings);
        let mut answer = |f: &Finding| {
            if asks {
                answers.put(f, rep, findings).unwrap_or(false)
            } else {
                policy.answer(f.problem)
            }
        };
        if let Some((at, n)) = lpf::ensure(
            p0,
            &*self.ov,
            dirs,
            facts,
            &mut out.findings,
            &mut answer,
            &mut self.lpf_root,
        ) {
            held.insert_found(at, n);
        }
        if let Some((at, n)) =
            lpf::make_room(p0, &*self.ov, dirs, facts, &mut out.findings, &mut answer)
        {
            held.insert_found(at, n);
        }
        self.ov.stop_recording()
    }

    /// Pass 3A's offers, as e2fsck's pass 3A picks its directories: under -D every directory;
    /// otherwise, on a `dir_index` file system, each unindexed one of three blocks or more but
    /// `/lost+found`. Directories whose index keeps the hash in the entries (encrypted and
    /// casefolded) and inline ones are left alone. The offers go before the first finding of
    /// pass 4; returns where, and how many.
    fn offer_pass_3a(
        &self,
        p0: &Pass0Facts,
        dirs: &Dirs,
        findings: &mut Vec<Finding>,
    ) -> (usize, usize) {
        let fs = &p0.fs;
        let bs = fs.block_size() as u64;
        let all = self.opts.optimize_dirs;
        let policy = self.opts.policy;
        if policy.mode == Mode::No
            || !policy.answer(P::P3A_OPTIMIZE_DIR)
            || (!all && !fs.geo.compat.has(ffsck_format::Compat::DIR_INDEX))
        {
            return (0, 0);
        }
        let lpf = lpf::inode_of(p0, &*self.ov, dirs);
        let hashable = rehash::default_hash_supported(fs);
        let mut offers = Vec::new();
        // A directory of fewer than three blocks is not read again unless all are rebuilt
        // (a size of more blocks than the directory maps is a problem pass 1 reports).
        for (&dir, _) in dirs.0.iter().filter(|(_, b)| all || b.len() >= 3) {
            let Some(inode) = inode::read_inode(p0, &*self.ov, dir) else {
                continue;
            };
            let fl = inode.flags();
            use ffsck_format::inode::flags as iflags;
            if fl & iflags::INLINE_DATA != 0
                || fl & (iflags::ENCRYPT | iflags::CASEFOLD) == iflags::ENCRYPT | iflags::CASEFOLD
            {
                continue;
            }
            let wanted =
                all || (fl & iflags::INDEX == 0 && inode.size() / bs >= 3 && lpf != Some(dir));
            if wanted && !hashable {
                // As e2fsck's rehash: no index can be built with a hash nobody defines.
                offers.push(Finding {
                    problem: P::P3A_OPTIMIZE_DIR_ERR,
                    ctx: ProblemCtx {
                        dir,
                        str: Some("Directory hash unsupported".into()),
                        ..ProblemCtx::default()
                    },
                    fixed: false,
                });
            } else if wanted {
                offers.push(Finding {
                    problem: P::P3A_OPTIMIZE_DIR,
                    ctx: ProblemCtx {
                        dir,
                        ..ProblemCtx::default()
                    },
                    fixed: true,
                });
            }
        }
        crate::pathname::name_dirs(fs, &mut offers);
        let at = lpf::position(findings);
        let n = offers.len();
        findings.splice(at..at, offers);
        (at, n)
    }

    /// Decide which fixes this round makes (`order::decide`), and place the reconnections
    /// still answered yes.
    fn decide(&self, p0: Option<&Pass0Facts>, dirs: &Dirs, out: &mut Outcome) -> connect::Plan {
        let plan = |findings: &[Finding]| match p0 {
            Some(p0) => connect::plan(p0, &*self.ov, dirs, findings, self.lpf_root),
            None => connect::Plan::default(),
        };
        let linked = plan(&out.findings).linked;
        let refused = |f: &Finding| {
            !self.opts.policy.answer(f.problem) || (self.asks && self.answers.get(f) == Some(false))
        };
        order::decide(
            &mut out.findings,
            &linked,
            &refused,
            self.asks,
            self.opts.policy,
        );
        if out
            .findings
            .iter()
            .any(|f| f.fixed && f.problem.fixed_by(Fixer::Connect))
        {
            let plan = plan(&out.findings);
            connect::hold_counts(&plan, &mut out.findings);
            plan
        } else {
            connect::follow_reconnections(&mut out.findings);
            connect::Plan::default()
        }
    }

    /// Replay what the check reported with the decisions made, skipping what an earlier round
    /// already reported (and pass headers after the first round). A fix held back for a later
    /// round is not reported yet, unless no later round comes: the round that makes it reports
    /// it as fixed. (Interactive runs showed this round's findings when asking: what is left
    /// is a fix held back in the last round.)
    ///
    /// `restart_at`: e2fsck restarts from the beginning at the end of that pass. A round that
    /// makes only that fix (`stop`) shows nothing of the passes after it, and the next round
    /// is shown as the restarted run; otherwise the rest of this round is.
    fn report(
        &mut self,
        seen: &[Finding],
        held: Held,
        out: &Outcome,
        upto: usize,
        final_round: bool,
        restart_at: Option<(u8, bool)>,
    ) {
        // A problem left unfixed on an inode an earlier pass fixes this round was found on
        // the inode as it was: the next round finds it again if it is still there.
        let mut earliest_fix: HashMap<u32, u8> = HashMap::new();
        for f in out.findings[..upto]
            .iter()
            .filter(|f| f.fixed && f.ctx.ino != 0)
        {
            let p = earliest_fix.entry(f.ctx.ino).or_insert(u8::MAX);
            *p = (*p).min(f.problem.pass());
        }
        let policy = self.opts.policy;
        let stale = |f: &Finding| {
            policy.leaves_error(f)
                && earliest_fix
                    .get(&f.ctx.ino)
                    .is_some_and(|&p| p < f.problem.pass())
        };
        let (asks, policy, answers) = (self.asks, self.opts.policy, &self.answers);
        // What earlier rounds showed, by problem and context (a set: a round may hold tens of
        // thousands of findings, a directory's holes say).
        let shown_before: std::collections::HashSet<(P, &ProblemCtx)> = if asks {
            Default::default()
        } else {
            seen.iter().map(|s| (s.problem, &s.ctx)).collect()
        };
        // Runs shown before, by problem and inode: a later round's run (what is left of a
        // directory's holes) was shown if it lies within one of them.
        let mut runs_before: HashMap<(P, u32, u32), Vec<&Finding>> = HashMap::new();
        for s in seen.iter().filter(|s| s.count() > 1 && !asks) {
            runs_before
                .entry((s.problem, s.ctx.ino, s.ctx.dir))
                .or_default()
                .push(s);
        }
        let in_run_before = |f: &Finding| {
            runs_before
                .get(&(f.problem, f.ctx.ino, f.ctx.dir))
                .is_some_and(|runs| runs.iter().any(|r| r.covers(f)))
        };
        let report_now = |f: &Finding| {
            let deferred = (!f.fixed && policy.answer(f.problem)) || stale(f);
            let shown = if asks {
                answers.get(f).is_some()
            } else {
                shown_before.contains(&(f.problem, &f.ctx)) || in_run_before(f)
            };
            !shown && (!deferred || final_round)
        };
        // Once a group's unused inodes area is reset, its other inodes are no longer in it:
        // e2fsck reports the first entry of each group only.
        let mut groups_reset = std::collections::HashSet::new();
        let show: Vec<bool> = out
            .findings
            .iter()
            .map(|f| {
                let after_stop =
                    restart_at.is_some_and(|(at, stop)| stop && order::after_stop(f.problem, at));
                let again = restart_at.is_some()
                    && f.fixed
                    && f.problem == P::P2_INOREF_IN_UNUSED
                    && !groups_reset.insert(f.ctx.group);
                report_now(f) && !after_stop && !again && !self.bitmaps.rewritten(f.problem)
            })
            .collect();
        let mut decided = out.findings.iter().zip(&show);
        let mut restarted = false;
        for ev in held.events {
            match ev {
                Event::Pass(p) if self.fresh && !asks => {
                    if let Some((at, stop)) = restart_at.filter(|&(at, _)| p > at) {
                        if stop {
                            continue;
                        }
                        if !std::mem::replace(&mut restarted, true) {
                            self.rep.restart();
                            for q in 0..=at {
                                self.rep.pass_start(q);
                            }
                        }
                    }
                    self.rep.pass_start(p)
                }
                Event::Pass(_) => {}
                Event::Found => {
                    if let Some((f, true)) = decided.next() {
                        self.rep.finding(f);
                    }
                }
            }
        }
        for (f, _) in out.findings.iter().zip(&show).filter(|(_, &s)| s) {
            self.findings.push(f.clone());
        }
        let stopped = restart_at.is_some_and(|(_, stop)| stop);
        if stopped {
            self.rep.restart();
        }
        self.fresh = stopped;
    }

    /// Why the repaired state must not be committed: the problems it leaves, or nothing when
    /// it may be. A repair is committed when the repaired file system checks clean, or is
    /// strictly better than the original: fewer errors left than the original had, and no
    /// file of any kind fewer than the original held. Never when the repaired state would not
    /// open from its primary superblock and descriptors (a check that has to fall back to a
    /// backup is not an error by itself, so it is said here).
    fn refusal(&self, verified: &Outcome) -> Vec<P> {
        // What a person refused stays by their choice (the check honours the refusals).
        let policy = self.opts.policy;
        let refused =
            |f: &Finding| policy.answer(f.problem) && !policy.answer_to(f.problem, &f.ctx);
        // (A latch group refused at its question or its end is refused whole.)
        let groups: std::collections::HashSet<crate::problem::Latch> = verified
            .findings
            .iter()
            .filter(|f| refused(f))
            .filter_map(|f| {
                crate::problem::Latch::ALL
                    .iter()
                    .copied()
                    .find(|l| l.question() == f.problem || l.end() == Some(f.problem))
            })
            .collect();
        let chosen = |f: &Finding| {
            refused(f)
                || groups.iter().any(|l| {
                    f.problem.latch() == Some(*l)
                        || l.question() == f.problem
                        || l.end() == Some(f.problem)
                })
        };
        let left: Vec<&Finding> = verified
            .findings
            .iter()
            .filter(|f| policy.leaves_error(f) && !(self.asks && chosen(f)))
            .collect();
        let primary_broken: Vec<P> = verified
            .findings
            .iter()
            .filter(|f| crate::superblock::rejects_primary(f.problem) && verified.fatal.is_none())
            .map(|f| f.problem)
            .collect();
        if !primary_broken.is_empty() {
            return primary_broken;
        }
        let clean = verified.fatal.is_none() && left.is_empty();
        let lost = match (&self.first_files, &verified.summary) {
            (Some(was), Some(now)) => files_lost(was, &now.counts),
            _ => false,
        };
        let left_count: u64 = left.iter().map(|f| f.count()).sum();
        let better = verified.fatal.is_none() && left_count < self.first_errors && !lost;
        // Nothing staged (beyond the marks to come) is nothing to refuse.
        let staged = self.ov.extents().is_ok_and(|e| !e.is_empty());
        if clean || better || !staged {
            return Vec::new();
        }
        let mut kinds: Vec<P> = left.iter().map(|f| f.problem).collect();
        kinds.dedup();
        kinds
    }

    /// After the rounds: a new journal if one was dropped, a last check when the rounds ran
    /// out while still fixing, the problems the repair would add, the exit code and the
    /// superblock's marks.
    fn finish(mut self) -> RepairOutcome {
        // A fix answered yes that did not take is said, not left to look made.
        for f in self.answers.take_failed() {
            self.tell(f);
        }
        let (ov, opts) = (&self.ov, &self.opts);
        // A journal dropped on the way is made anew once the rest is clean, as e2fsck does.
        let remade = recreate_journal(
            ov,
            opts,
            self.last.as_mut(),
            &self.findings,
            self.preen_halt,
        );
        if let Some(f) = &remade {
            self.rep.finding(f);
            self.findings.push(f.clone());
        }
        // The rounds ran out while still fixing (or a journal was made): verify what is left.
        let mut verified = match self.last.take() {
            Some(out)
                if (!out.findings.iter().any(|f| f.fixed) || self.preen_halt)
                    && remade.is_none() =>
            {
                out
            }
            _ => {
                let quiet = CheckOptions {
                    policy: opts.policy.with_mode(Mode::No),
                    ..opts.clone()
                };
                let mut sink = crate::report::Collect::default();
                let out = engine::check(ov.clone(), &quiet, &mut sink);
                for f in out.findings.iter().filter(|f| opts.policy.leaves_error(f)) {
                    self.rep.finding(f);
                    self.findings.push(f.clone());
                }
                out
            }
        };
        // e2fsck counts the non-contiguous files as its pass 1 found them, before the repair.
        if let (Some(first), Some(s)) = (&self.first_files, verified.summary.as_mut()) {
            s.non_contiguous = first.fragmented;
        }
        let new_problems = self.refusal(&verified);
        // Whether the check changed anything, before the superblock's marks below.
        let changed = ov.extents().is_ok_and(|e| !e.is_empty());
        let mut code = verified.exit_code & !exit::NONDESTRUCT;
        if self.preen_halt {
            code |= exit::UNCORRECTED;
        }
        if changed {
            code |= exit::NONDESTRUCT;
        }
        // Last, as e2fsck ends a check that may write: mark the superblock (not after an
        // aborted check, nor when the repair is not to be committed).
        if opts.policy.mode != Mode::No && verified.fatal.is_none() && new_problems.is_empty() {
            let end = if self.preen_halt {
                mark::End::PreenHalt
            } else {
                mark::End::Checked {
                    errors_left: code & exit::UNCORRECTED != 0,
                }
            };
            verified.marked_valid = mark::apply(&**ov, end, opts.now);
        }
        RepairOutcome {
            last: verified,
            changes: ov.extents().unwrap_or_default(),
            findings: self.findings,
            rounds: self.rounds,
            preen_halt: self.preen_halt,
            new_problems,
            exit_code: code,
        }
    }
}

/// Which bitmaps (block, inode) the repair's own writes changed: e2fsck writes a bitmap it
/// changed whole, with fresh checksums, and does not ask about its checksums (the rebuild
/// that fixes them here is made unasked).
#[derive(Default)]
struct Bitmaps {
    /// Bitmap blocks staged so far, of each kind.
    staged: [usize; 2],
    changed: [bool; 2],
}

impl Bitmaps {
    /// Count the bitmap blocks staged now; new ones since the last count changed their kind,
    /// unless `found` (written by the check itself, as the file system was found).
    fn note(&mut self, p0: &Pass0Facts, ov: &Overlay, found: bool) {
        let bs = p0.fs.block_size() as u64;
        let mut now = [0usize; 2];
        for gd in &p0.fs.groups {
            for (k, blk) in [gd.block_bitmap(), gd.inode_bitmap()]
                .into_iter()
                .enumerate()
            {
                now[k] += usize::from(blk != 0 && ov.staged_in(blk * bs, bs));
            }
        }
        for (changed, (now, was)) in self.changed.iter_mut().zip(now.iter().zip(self.staged)) {
            *changed |= !found && *now > was;
        }
        self.staged = now;
    }

    /// Whether `p` asks about the checksum of a bitmap the repair changed.
    fn rewritten(&self, p: P) -> bool {
        (p == P::P5_BLOCK_BITMAP_CSUM_INVALID && self.changed[0])
            || (p == P::P5_INODE_BITMAP_CSUM_INVALID && self.changed[1])
    }
}

/// Is `f` an error of the file system (whether or not it was fixed)?
fn is_error(policy: Policy, f: &Finding) -> bool {
    policy.leaves_error(&Finding {
        fixed: false,
        ..f.clone()
    })
}

/// Does `now` hold fewer files of some kind than `was`?
fn files_lost(was: &crate::facts::Counts, now: &crate::facts::Counts) -> bool {
    let kinds = |c: &crate::facts::Counts| {
        [
            c.dirs, c.regular, c.symlinks, c.chardev, c.blockdev, c.fifo, c.socket,
        ]
    };
    kinds(now).iter().zip(kinds(was)).any(|(n, w)| *n < w)
}

/// Debugging aid: `FFSCK_TRACE_ROUNDS=1` prints each round's decisions on stderr.
fn trace(round: usize, out: &Outcome) {
    if std::env::var_os("FFSCK_TRACE_ROUNDS").is_some() {
        for f in &out.findings {
            let c = &f.ctx;
            eprintln!(
                "round {round}: {:?} fixed={} ino={} dir={}",
                f.problem, f.fixed, c.ino, c.dir
            );
        }
    }
}

/// After a clean final round, make a new journal if one was dropped (`P6_RECREATE_JOURNAL`):
/// its blocks are taken in the last round's allocation facts, then bitmaps and counts are
/// rebuilt from them.
fn recreate_journal(
    ov: &Arc<Overlay>,
    opts: &CheckOptions,
    last: Option<&mut Outcome>,
    findings: &[Finding],
    preen_halt: bool,
) -> Option<Finding> {
    let dropped = findings
        .iter()
        .any(|f| f.fixed && f.problem == P::P0_JOURNAL_BAD_INODE);
    let out = last?;
    let clean = out.fatal.is_none() && !out.findings.iter().any(|f| opts.policy.leaves_error(f));
    if !dropped || !clean || preen_halt || !opts.policy.answer(P::P6_RECREATE_JOURNAL) {
        return None;
    }
    let facts = out.alloc.as_mut()?;
    let p0 = open(ov, opts)?;
    let (blocks, made) = newjournal::create(&p0, &**ov, facts);
    if made.is_ok() {
        // The superblock now names the journal: rebuild from the layout that says so.
        if let Some(p0) = open(ov, opts) {
            alloc::rebuild(&p0, &**ov, facts);
        }
    }
    Some(Finding {
        problem: P::P6_RECREATE_JOURNAL,
        ctx: ProblemCtx {
            num: blocks,
            str: made.err().map(String::from),
            ..ProblemCtx::default()
        },
        fixed: true,
    })
}

/// When the file system only opens from a backup superblock, copy that superblock (as the
/// primary: group number 0) and its descriptors to the primary location, and check the primary
/// from then on. Returns the findings that told the backup was used.
fn restore_primary(ov: &Arc<Overlay>, opts: &mut CheckOptions) -> Vec<Finding> {
    let Some(p0) = open(ov, opts) else {
        return Vec::new();
    };
    if p0.fs.sb_block == 0 {
        return Vec::new();
    }
    let mut notes = Findings::default();
    let _ = pass0::run_with(
        ov.clone(),
        opts.superblock,
        Policy::No,
        opts.journal_dev.as_ref(),
        opts.clock(),
        &mut notes,
    );
    let mut sb = p0.fs.sb.clone();
    sb.s_block_group_nr.set(0);
    sb.update_checksum();
    let _ = ov.write_at(zerocopy::IntoBytes::as_bytes(&sb), 1024);
    for (g, gd) in p0.fs.groups.iter().enumerate() {
        alloc::write_desc(&p0, &**ov, g as u32, gd);
    }
    opts.superblock = pass0::SuperHint::default();
    notes
        .0
        .into_iter()
        .filter(|f| crate::superblock::rejects_primary(f.problem))
        .collect()
}

/// The superblock and descriptors as the overlay has them now.
fn open(ov: &Arc<Overlay>, opts: &CheckOptions) -> Option<Pass0Facts> {
    let mut scratch = Findings::default();
    match pass0::run_with(
        ov.clone(),
        opts.superblock,
        Policy::No,
        opts.journal_dev.as_ref(),
        opts.clock(),
        &mut scratch,
    ) {
        Ok(p0) => Some(p0),
        // A journal this round drops or resets, an MMP block it rewrites, or feature bits it
        // clears: read the layout with those questions answered yes, whatever that check
        // writes kept in a throwaway overlay.
        Err(
            pass0::OpenFailure::Journal(_)
            | pass0::OpenFailure::Mmp(_)
            | pass0::OpenFailure::Unsupported(_),
        ) => {
            let throwaway: Arc<dyn Device> = Arc::new(Overlay::new(ov.clone()));
            pass0::run_with(
                throwaway,
                opts.superblock,
                Policy::Yes,
                opts.journal_dev.as_ref(),
                opts.clock(),
                &mut scratch,
            )
            .ok()
        }
        Err(_) => None,
    }
}

#[cfg(test)]
mod tests {
    use crate::problem::{flag, Problem as P, Prompt};

    /// Questions a repair answers no to even with `-y`, each with its reason. A problem added
    /// to the catalogue with a question gets a fix, or a line here.
    const NOT_FIXED: &[(P, &str)] = &[
        (
            P::P0_JOURNAL_UNSUPP_SUPER,
            "never reported: no check finds it yet",
        ),
        (
            P::P0_JOURNAL_RESET_JOURNAL,
            "reset only when running the journal is refused, which -y never does",
        ),
        (
            P::P0_JOURNAL_UNSUPP_ROCOMPAT,
            "Abort?: no keeps the check going, the journal then treated as corrupt",
        ),
        (P::P0_JOURNAL_UNSUPP_INCOMPAT, "Abort?: as above"),
        (P::P0_JOURNAL_UNSUPP_VERSION, "Abort?: as above"),
        (
            P::P1_BLOCK_OVERLAPS_METADATA,
            "never reported: no check finds it yet",
        ),
        (
            P::P1_SUPPRESS_MESSAGES,
            "no keeps every illegal block listed; each is still fixed",
        ),
        (P::P1_TOOBIG_REG, "never reported: no check finds it yet"),
        (
            P::P1_EA_INODE_NONREG,
            "never reported: no check finds it yet",
        ),
        (
            P::P2_BAD_INLINE_DIR_SIZE,
            "never reported: no check finds it yet",
        ),
    ];

    #[test]
    fn every_question_has_a_fix_or_a_stated_reason() {
        let unfixed: Vec<P> = P::ALL
            .iter()
            .copied()
            .filter(|p| {
                let i = p.info();
                i.flags & (flag::INFO | flag::FATAL) == 0
                    && i.prompt != Prompt::None
                    && !p.fixable()
            })
            .collect();
        let listed: Vec<P> = NOT_FIXED.iter().map(|(p, _)| *p).collect();
        assert_eq!(unfixed, listed, "update NOT_FIXED (and say why)");
    }
}
