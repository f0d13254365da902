//! An interactive repair's questions: what a check reported, held back until the repair has
//! decided which fixes it makes (`Held`), and the answers given, so that each question is put
//! once however many rounds find the problem again (`Answers`).

use crate::problem::Problem as P;
use crate::report::{Finding, Policy, ProblemCtx, Reporter};
use std::collections::HashMap;

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
}

impl Answers {
    pub(super) fn new(policy: Policy) -> Self {
        Answers {
            given: HashMap::new(),
            policy,
            headers: 0,
        }
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
            return Some(a && f.fixed);
        }
        if !f.fixed && self.policy.answer(f.problem) {
            return None;
        }
        let a = if f.fixed {
            rep.ask(f)
        } else {
            rep.finding(f);
            false
        };
        self.given.insert((f.problem, f.ctx.clone()), a);
        shown.push(Finding {
            fixed: a,
            ..f.clone()
        });
        Some(a)
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
        let mut next = found.iter_mut();
        for ev in &held.events {
            match ev {
                Event::Pass(p) if before_pass4 && *p >= 4 => return,
                Event::Pass(p) if *p > self.headers => {
                    rep.pass_start(*p);
                    self.headers = *p;
                }
                Event::Pass(_) => {}
                Event::Found => {
                    let Some(f) = next.next() else { return };
                    if before_pass4 && f.problem.pass() >= 4 {
                        return;
                    }
                    if let Some(a) = self.put(f, rep, shown) {
                        f.fixed = a;
                    }
                }
            }
        }
    }
}
