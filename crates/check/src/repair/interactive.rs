//! An interactive repair's questions: what a check reported, held back until the repair has
//! decided which fixes it makes (`Held`), and the answers given, so that each question is put
//! once however many rounds find the problem again (`Answers`).
//!
//! Every "yes" shown is a fix made in that round. A question is put only when what its check
//! computed still holds after the answers before it: when an earlier answer of the round
//! changes the file system (a fix made, or a fix refused that the check assumed made), the
//! questions it could change wait for the next round, whose check is run on the new state and
//! honours the refusals (`Policy::with_refusals`). A question that waits takes every question
//! of a later pass with it, so the questions keep e2fsck's pass order under their headers.

use crate::problem::{after, Fixer, Latch, Problem as P, Prompt};
use crate::report::{Finding, Policy, ProblemCtx, Reporter};
use std::collections::{HashMap, HashSet};

/// What a check reported, in order, held back until the repair has decided which fixes it
/// will really make.
#[derive(Default)]
pub(super) struct Held {
    pub(super) events: Vec<Event>,
    /// A run of findings counts as the findings it stands for (an interactive repair splits
    /// runs, as each is asked on its own: [`split_runs`]).
    pub(super) singles: bool,
}

pub(super) enum Event {
    Pass(u8),
    Found,
}

impl Held {
    /// Record `n` findings inserted at index `at` of the check's findings.
    pub(super) fn insert_found(&mut self, at: usize, n: usize) {
        let mut seen = 0;
        let mut pos = None;
        for (i, ev) in self.events.iter().enumerate() {
            match ev {
                Event::Found if seen == at => {
                    pos = Some(i);
                    break;
                }
                Event::Found => seen += 1,
                Event::Pass(p) if *p >= 4 && seen == at => {
                    pos = Some(i);
                    break;
                }
                Event::Pass(_) => {}
            }
        }
        let pos = pos.unwrap_or(self.events.len());
        for _ in 0..n {
            self.events.insert(pos, Event::Found);
        }
    }
}

impl Reporter for Held {
    fn pass_start(&mut self, pass: u8) {
        self.events.push(Event::Pass(pass));
    }
    fn finding(&mut self, f: &Finding) {
        // The outcome carries the finding itself.
        let n = if self.singles { f.count() } else { 1 };
        self.events.extend((0..n).map(|_| Event::Found));
    }
}

/// Replace each run among `found` by the findings it stands for.
pub(super) fn split_runs(found: &mut Vec<Finding>) {
    if found.iter().any(|f| f.count() > 1) {
        *found = found
            .iter()
            .flat_map(|f| f.each().map(|c| c.into_owned()))
            .collect();
    }
}

/// An interactive repair's answers, by finding (problem and context): each question is put
/// once, and a later round that finds the same problem again takes the same answer. Findings
/// shown without a question are kept too (answered no), so nothing is shown twice.
pub(super) struct Answers {
    given: HashMap<(P, ProblemCtx), bool>,
    /// The engine's policy (yes to every fix it has): what it would fix is asked.
    policy: Policy,
    /// The last pass whose header was shown.
    headers: u8,
    /// This round's state: what waits for the next round, and why.
    now: RoundState,
    /// Fixes answered yes that a round made.
    made: HashSet<(P, ProblemCtx)>,
    /// Fixes answered yes whose problem was found again, unchanged, after they were made:
    /// not tried again, and told at the end.
    failed: Vec<Finding>,
}

/// What the answers of one round so far mean for the questions after them.
#[derive(Default)]
struct RoundState {
    /// The last round a repair may run: nothing waits.
    last: bool,
    /// The fix made alone this round (`order::alone`): never waits.
    gate: Option<Fixer>,
    /// A question of this pass waits for the next round: so does every later pass.
    after_pass: Option<u8>,
    /// A fix is made this round, or one the check assumed was refused: the summaries (bitmaps
    /// and counts) it computed may not hold.
    changed: bool,
    /// Inodes with a fix refused this round: their other fixes were computed as if it were
    /// made.
    refused: HashSet<u32>,
    /// Questions and findings left for the next round.
    waiting: usize,
    /// A fix was refused this round.
    refused_any: bool,
    /// Questions put (and findings shown) for the first time this round.
    new: usize,
}

impl Answers {
    pub(super) fn new(policy: Policy) -> Self {
        Answers {
            given: HashMap::new(),
            policy,
            headers: 0,
            now: RoundState::default(),
            made: HashSet::new(),
            failed: Vec::new(),
        }
    }

    /// A round begins: `gate` is the fix it makes alone, and `last` says no round follows.
    pub(super) fn begin_round(&mut self, gate: Option<Fixer>, last: bool) {
        self.now = RoundState {
            gate,
            last,
            ..RoundState::default()
        };
    }

    /// Whether questions of `pass` wait for the next round.
    pub(super) fn holds_pass(&self, pass: u8) -> bool {
        self.now.after_pass.is_some_and(|p| pass > p)
    }

    /// Whether the next round has questions to put: something waited for it, or a fix was
    /// refused this round (the next check, answering it no, may find what its answer leaves:
    /// the counts of a bitmap left as it is).
    pub(super) fn waiting(&self) -> bool {
        self.now.waiting > 0 || self.now.refused_any
    }

    /// Whether this round put a question or showed a finding for the first time: a round
    /// that did not, and made no fix, would only be followed by the same round again.
    pub(super) fn put_any(&self) -> bool {
        self.now.new > 0
    }

    /// Whether `f` must wait for the next round: its check assumed answers this round did
    /// not give, or an earlier pass still has a question to come.
    fn waits(&self, f: &Finding) -> bool {
        let now = &self.now;
        let p = f.problem;
        if now.last || (p.after(after::ALONE) && now.gate.is_some_and(|g| p.fixed_by(g))) {
            return false;
        }
        let fix = f.fixed || (self.get(f).is_none() && self.policy.answer(p));
        self.holds_pass(p.pass())
            || (fix && p.after(after::SUMMARY) && now.changed)
            || (fix
                && [f.ctx.ino, f.ctx.dir]
                    .iter()
                    .any(|i| *i != 0 && now.refused.contains(i)))
    }

    /// Note what showing `f` with `answer` (None: held back for a later round) changes for
    /// the questions after it.
    fn follow(&mut self, f: &Finding, asked: bool, answer: Option<bool>) {
        let now = &mut self.now;
        match answer {
            None => {
                now.after_pass = Some(
                    now.after_pass
                        .map_or(f.problem.pass(), |p| p.min(f.problem.pass())),
                );
                now.changed = true;
            }
            Some(true) if !f.problem.after(after::SUMMARY) => {
                now.changed = true;
                // What later passes found was found before this fix clears or remaps (its
                // entries, its blocks): they are asked again on the next round's check, as
                // e2fsck's later passes would see the fix made.
                if f.problem.after(after::RESHAPES | after::REMAPS) {
                    now.after_pass = Some(
                        now.after_pass
                            .map_or(f.problem.pass(), |p| p.min(f.problem.pass())),
                    );
                    now.waiting += 1;
                }
            }
            Some(false) if asked => {
                now.changed = true;
                now.refused_any = true;
                // The check found what follows with this fix made: later passes are asked
                // again on the next round's check, which answers it no.
                let pass = f.problem.pass();
                now.after_pass = Some(now.after_pass.map_or(pass, |p| p.min(pass)));
                now.refused
                    .extend([f.ctx.ino, f.ctx.dir].into_iter().filter(|&i| i != 0));
                if let Some(r) = self.policy.refusals() {
                    r.insert(f);
                }
            }
            Some(_) => {}
        }
    }

    /// The fixes a round made (after its decisions): a later round that finds one of them
    /// again unchanged knows it did not take.
    pub(super) fn note_made(&mut self, found: &[Finding]) {
        for f in found.iter().filter(|f| f.fixed) {
            self.made.insert((f.problem, f.ctx.clone()));
        }
    }

    /// The fixes answered yes that did not take, as findings to tell (once).
    pub(super) fn take_failed(&mut self) -> Vec<Finding> {
        std::mem::take(&mut self.failed)
            .into_iter()
            .map(|f| Finding {
                problem: P::P6_FIX_NOT_MADE,
                ctx: ProblemCtx {
                    str: Some(f.message().trim_end().to_string()),
                    ..ProblemCtx::default()
                },
                fixed: false,
            })
            .collect()
    }

    /// A finding shown outside the rounds, with the answer the policy gave it.
    pub(super) fn told(&mut self, f: &Finding) {
        self.given.insert((f.problem, f.ctx.clone()), f.fixed);
    }

    pub(super) fn get(&self, f: &Finding) -> Option<bool> {
        self.given.get(&(f.problem, f.ctx.clone())).copied()
    }

    /// Give the findings asked in an earlier round their answers.
    pub(super) fn recall(&self, found: &mut [Finding]) {
        for f in found.iter_mut() {
            if let Some(a) = self.get(f) {
                f.fixed &= a;
            }
        }
    }

    /// Show `f` if it is new: a proposed fix is asked, anything else reported. Returns the
    /// answer (no for what was not asked), or None for a fix held back to a later round,
    /// which is shown only when that round comes.
    pub(super) fn put(
        &mut self,
        f: &Finding,
        rep: &mut dyn Reporter,
        shown: &mut Vec<Finding>,
    ) -> Option<bool> {
        if let Some(a) = self.get(f) {
            let key = (f.problem, f.ctx.clone());
            let again =
                a && f.fixed && self.made.contains(&key) && !f.problem.after(after::SUMMARY);
            if again {
                // Made, yet found again as it was: the fix did not take (it may depend on a
                // fix refused since). Not tried again; told when the repair ends.
                self.given.insert(key, false);
                self.failed.push(f.clone());
            }
            let a = a && f.fixed && !again;
            self.follow(f, false, Some(a));
            return Some(a);
        }
        if !f.fixed && self.policy.answer(f.problem) {
            self.follow(f, false, None);
            return None;
        }
        let a = if f.fixed {
            rep.ask(f)
        } else {
            rep.finding(f);
            false
        };
        self.given.insert((f.problem, f.ctx.clone()), a);
        self.now.new += 1;
        shown.push(Finding {
            fixed: a,
            ..f.clone()
        });
        self.follow(f, f.fixed, Some(a));
        Some(a)
    }

    /// Put `f` unless it waits for the next round (then it is neither shown nor fixed now).
    /// Returns the answer, or None when it is not made this round.
    pub(super) fn put_or_wait(
        &mut self,
        f: &Finding,
        rep: &mut dyn Reporter,
        shown: &mut Vec<Finding>,
    ) -> Option<bool> {
        if self.waits(f) {
            // (Nothing of a later pass is put before it.)
            let pass = f.problem.pass();
            self.now.after_pass = Some(self.now.after_pass.map_or(pass, |p| p.min(pass)));
            self.now.waiting += 1;
            return None;
        }
        self.put(f, rep, shown)
    }

    /// Show this round's findings in the check's order, asking about each new fix and
    /// setting each finding's `fixed` to its answer. With `before_pass4` it stops where pass
    /// 4 begins (`/lost+found` is made there, asked in its turn). Calling it again on the same
    /// round shows only what was not shown yet.
    pub(super) fn round(
        &mut self,
        held: &Held,
        found: &mut [Finding],
        before_pass4: bool,
        rep: &mut dyn Reporter,
        shown: &mut Vec<Finding>,
    ) {
        let mut next = 0;
        let mut open = HashMap::new();
        for ev in &held.events {
            match ev {
                Event::Pass(p) if before_pass4 && *p >= 4 => return,
                Event::Pass(p) if *p > self.headers && !self.holds_pass(*p) => {
                    rep.pass_start(*p);
                    self.headers = *p;
                }
                Event::Pass(_) => {}
                Event::Found => {
                    let Some(f) = found.get_mut(next) else { return };
                    if before_pass4 && f.problem.pass() >= 4 {
                        return;
                    }
                    let refused_group = f
                        .problem
                        .latch()
                        .is_some_and(|l| matches!(open.get(&l), Some(&(_, Some(false)))));
                    if refused_group {
                        // A member of a group whose question was answered no: shown as left
                        // (e2fsck's "IGNORED"), neither asked nor waiting.
                        f.fixed = false;
                        if self.get(f).is_none() && !self.holds_pass(f.problem.pass()) {
                            rep.finding(f);
                            self.given.insert((f.problem, f.ctx.clone()), false);
                            self.now.new += 1;
                            shown.push(f.clone());
                        }
                        next += 1;
                        continue;
                    }
                    f.fixed = self.put_or_wait(f, rep, shown).unwrap_or(false);
                    self.follow_latch(found, next, &mut open);
                    next += 1;
                }
            }
        }
    }

    /// A latch group's members take its question's answer, as in e2fsck: a question put
    /// before them (an inode's illegal blocks) answers each as it comes; a group that ends
    /// with its question (bitmap differences) is answered when it ends. `open` holds, per
    /// group raised, where its first finding is and the answer its members take.
    fn follow_latch(
        &mut self,
        found: &mut [Finding],
        at: usize,
        open: &mut HashMap<Latch, (usize, Option<bool>)>,
    ) {
        let p = found[at].problem;
        let settle = |answers: &mut Self, f: &mut Finding, a: bool| {
            f.fixed &= a;
            if let Some(given) = answers.given.get_mut(&(f.problem, f.ctx.clone())) {
                *given &= a;
            }
        };
        if let Some(&l) = Latch::ALL
            .iter()
            .find(|l| l.question() == p && l.collates())
        {
            let asks = p.info().prompt != Prompt::None;
            open.insert(l, (at, asks.then_some(found[at].fixed)));
        } else if let Some(l) = p.latch() {
            if let Some(&(_, Some(a))) = open.get(&l) {
                settle(self, &mut found[at], a);
            }
        } else if let Some(&l) = Latch::ALL.iter().find(|l| l.end() == Some(p)) {
            if let Some((first, None)) = open.remove(&l) {
                let a = found[at].fixed;
                for f in found[first..at]
                    .iter_mut()
                    .filter(|f| f.problem.latch() == Some(l) || f.problem == l.question())
                {
                    settle(self, f, a);
                }
            }
        }
    }
}
