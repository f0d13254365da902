//! Repair: check the file system through a copy-on-write overlay, apply the fix of every
//! finding the policy answers yes, and check again until nothing is left to fix. The overlay's
//! changes are then one repair generation, which the caller commits through the redo log.
//!
//! A problem is only answered yes when a fix for it exists here (`can_fix`); everything else is
//! reported as not fixed and leaves the exit code's "errors left" bit set, so a partial repair
//! never claims more than it did.

mod alloc;
mod blockmap;
mod clear;
mod clone;
mod connect;
mod dirent;
mod dirhole;
mod extent_tree;
mod features;
mod inode;
mod itable;
mod journal;
mod lpf;
pub mod mark;
mod newjournal;
mod orphans;
mod quota;
mod resize;
mod root;
mod salvage;
mod superblock;
mod truncate;
mod unused;
mod xattr;

use crate::engine::{self, CheckOptions, Outcome};
use crate::pass0::{self, Pass0Facts};
use crate::problem::Problem as P;
use crate::report::{exit, Finding, Findings, Policy, ProblemCtx, Reporter};
use ffsck_io::overlay::{Extent, Overlay};
use ffsck_io::Device;
use std::collections::{HashMap, HashSet};
use std::sync::Arc;

/// Rounds of check-and-fix before giving up on reaching a clean state.
const MAX_ROUNDS: usize = 8;

/// Whether this module can fix `p` (the policy answers no to anything else).
pub fn can_fix(p: P) -> bool {
    inode::handles(p)
        || alloc::handles(p)
        || dirent::handles(p)
        || connect::handles(p)
        || clear::handles(p)
        || lpf::handles(p)
        || root::handles(p)
        || clone::handles(p)
        || blockmap::handles(p)
        || salvage::handles(p)
        || dirhole::handles(p)
        || features::handles(p)
        || itable::handles(p)
        || extent_tree::handles(p)
        || resize::handles(p)
        || journal::handles(p)
        || xattr::handles(p)
        || unused::handles(p)
        || quota::handles(p)
        || superblock::handles(p)
        || orphans::handles(p)
        // Made after the last round (`recreate_journal`).
        || p == P::P6_RECREATE_JOURNAL
        // Reset by the journal check itself when answered yes (`journal::reset_super`).
        || p == P::P0_JOURNAL_BAD_SUPER
        // Written back by the journal check itself when answered yes (`journal::load`).
        || p == P::P0_CLEAR_V2_JOURNAL
        // Replayed by the check itself when answered yes (`engine::recover_first`).
        || p == P::P0_JOURNAL_RUN
        || p == P::P0_JOURNAL_RUN_DEFAULT
}

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

/// Fixes that depend on the references pass 2 counted: held back while an entry is cleared or
/// an inode is cleared in the same round, and made on the next round's counts.
fn needs_counts(p: P) -> bool {
    connect::handles(p)
        || matches!(
            p,
            P::P3_BAD_DOT_DOT | P::P4_BAD_REF_COUNT | P::P4_ZERO_LEN_INODE
        )
}

/// Hold back the fixes that must wait for the next round, then place the reconnections
/// (answered no when `/lost+found` is missing or full).
fn hold_back(findings: &mut [Finding]) {
    let structural = findings.iter().any(|f| {
        f.fixed
            && !needs_counts(f.problem)
            && (dirent::clears(f.problem)
                || clear::handles(f.problem)
                || salvage::handles(f.problem)
                || dirhole::handles(f.problem))
    });
    // Cloning or dropping blocks changes the mappings later passes and the allocation
    // rebuild were computed from: their fixes wait for the next round.
    let remap = findings.iter().any(|f| {
        f.fixed
            && (clone::handles(f.problem)
                || blockmap::handles(f.problem)
                || f.problem == P::P1_EXTENT_FEATURE)
    });
    // Quota usage is final only once every other fix is made (bitmaps and counts aside).
    let settled = !findings
        .iter()
        .any(|f| f.fixed && !alloc::handles(f.problem) && !quota::handles(f.problem));
    for f in findings.iter_mut().filter(|f| f.fixed) {
        if quota::handles(f.problem) && !settled {
            f.fixed = false;
        }
        if structural && needs_counts(f.problem) {
            f.fixed = false;
        }
        if remap && (f.problem.pass() >= 2 || alloc::handles(f.problem)) {
            f.fixed = false;
        }
        // The checker found no parent to point `..` at.
        if f.problem == P::P3_BAD_DOT_DOT && f.ctx.ino2 == 0 {
            f.fixed = false;
        }
    }
}

/// An inode whose mapping block lies in critical metadata (`P1_CRITICAL_METADATA_COLLISION`)
/// has its map repaired only once pass 1D has copied that block out: until then a fix would be
/// written into the metadata. Its other map and inode fixes wait for the round after the clone
/// (clearing the whole inode writes nothing there and is made at once).
fn clone_first(findings: &mut [Finding]) {
    let cloned: HashSet<u32> = findings
        .iter()
        .filter(|f| f.fixed && clone::handles(f.problem))
        .map(|f| f.ctx.ino)
        .collect();
    let waiting: HashSet<u32> = findings
        .iter()
        .filter(|f| f.problem == P::P1_CRITICAL_METADATA_COLLISION && cloned.contains(&f.ctx.ino))
        .map(|f| f.ctx.ino)
        .collect();
    for f in findings.iter_mut() {
        let map_fix = blockmap::handles(f.problem)
            || extent_tree::handles(f.problem)
            || inode::handles(f.problem);
        if f.fixed
            && map_fix
            && f.problem != P::P1_TOO_MANY_BAD_BLOCKS
            && waiting.contains(&f.ctx.ino)
        {
            f.fixed = false;
        }
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
    /// Problems the repaired state has that the original did not: the staged changes must
    /// not be committed (ffsck never leaves a file system worse than it found it).
    pub new_problems: Vec<P>,
    pub exit_code: i32,
}

/// What a check reported, in order, held back until the repair has decided which fixes it
/// will really make.
#[derive(Default)]
struct Held(Vec<Event>);

enum Event {
    Pass(u8),
    Found,
}

impl Held {
    /// Record `n` findings inserted at index `at` of the check's findings.
    fn insert_found(&mut self, at: usize, n: usize) {
        let mut seen = 0;
        let mut pos = None;
        for (i, ev) in self.0.iter().enumerate() {
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
        let pos = pos.unwrap_or(self.0.len());
        for _ in 0..n {
            self.0.insert(pos, Event::Found);
        }
    }
}

impl Reporter for Held {
    fn pass_start(&mut self, pass: u8) {
        self.0.push(Event::Pass(pass));
    }
    fn finding(&mut self, f: &Finding) {
        let _ = f; // the outcome carries the finding itself
        self.0.push(Event::Found);
    }
}

/// An interactive repair's answers, by finding (problem and context): each question is put
/// once, and a later round that finds the same problem again takes the same answer. Findings
/// shown without a question are kept too (answered no), so nothing is shown twice.
struct Answers {
    given: HashMap<(P, ProblemCtx), bool>,
    /// The engine's policy (yes to every fix it has): what it would fix is asked.
    policy: Policy,
    /// The last pass whose header was shown.
    headers: u8,
}

impl Answers {
    fn new(policy: Policy) -> Self {
        Answers {
            given: HashMap::new(),
            policy,
            headers: 0,
        }
    }

    /// A finding shown outside the rounds, with the answer the policy gave it.
    fn told(&mut self, f: &Finding) {
        self.given.insert((f.problem, f.ctx.clone()), f.fixed);
    }

    fn get(&self, f: &Finding) -> Option<bool> {
        self.given.get(&(f.problem, f.ctx.clone())).copied()
    }

    /// Give the findings asked in an earlier round their answers.
    fn recall(&self, found: &mut [Finding]) {
        for f in found.iter_mut() {
            if let Some(a) = self.get(f) {
                f.fixed &= a;
            }
        }
    }

    /// Show `f` if it is new: a proposed fix is asked, anything else reported. Returns the
    /// answer (no for what was not asked), or None for a fix held back to a later round,
    /// which is shown only when that round comes.
    fn put(
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
    fn round(
        &mut self,
        held: &Held,
        found: &mut [Finding],
        before_pass4: bool,
        rep: &mut dyn Reporter,
        shown: &mut Vec<Finding>,
    ) {
        let mut next = found.iter_mut();
        for ev in &held.0 {
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

/// Decide which of the fixes the policy accepted are made. A fix is held back when it could be
/// wrong because of a problem that stays unfixed: inode fixes when the same inode has an
/// unfixed problem, and the allocation rebuild (bitmaps, counts) when anything stays unfixed,
/// since an unfixed problem may still change which blocks and inodes are in use.
///
/// `refused` says whether a finding left unfixed was answered no (rather than held back for a
/// later round). In an interactive run (`strict`), the fixes a later pass proposed for a
/// refused finding's inode wait too, since that pass assumed the refused fix was made.
fn decide(
    findings: &mut [Finding],
    linked: &HashSet<u32>,
    refused: &dyn Fn(&Finding) -> bool,
    strict: bool,
) {
    for f in findings.iter_mut().filter(|f| f.fixed) {
        if connect::handles(f.problem) && !linked.contains(&f.ctx.ino) {
            f.fixed = false;
        }
    }
    let unfixed: Vec<&Finding> = findings.iter().filter(|f| f.leaves_error()).collect();
    // Inodes with a problem answered no (not one merely held back for a later round), with
    // the earliest pass that found one.
    let mut blocked: HashMap<u32, u8> = HashMap::new();
    for f in unfixed.iter().filter(|f| refused(f) && f.ctx.ino != 0) {
        let pass = blocked.entry(f.ctx.ino).or_insert(u8::MAX);
        *pass = (*pass).min(f.problem.pass());
    }
    // Clearing an inode frees its blocks only in the next round's facts.
    let alloc_ok = unfixed.is_empty()
        && !findings
            .iter()
            .any(|f| f.fixed && clear::handles(f.problem));
    for f in findings.iter_mut().filter(|f| f.fixed) {
        let inode_fix =
            inode::handles(f.problem) || clear::handles(f.problem) || connect::handles(f.problem);
        // (Interactive: a later pass proposed its fix on the view the refused one would give.)
        let waits = match blocked.get(&f.ctx.ino) {
            Some(&pass) => {
                (inode_fix && pass <= f.problem.pass()) || (strict && pass < f.problem.pass())
            }
            None => false,
        };
        if waits {
            f.fixed = false;
        }
        if (alloc::handles(f.problem) || quota::handles(f.problem)) && !alloc_ok {
            f.fixed = false;
        }
    }
}

/// Check and repair the file system on `dev`, staging every change in an overlay. Nothing is
/// written to `dev`.
pub fn repair(dev: Arc<dyn Device>, opts: &CheckOptions, rep: &mut dyn Reporter) -> RepairOutcome {
    let ov = Arc::new(Overlay::new(dev));
    let mut findings: Vec<Finding> = Vec::new();
    let mut first_errors: Vec<P> = Vec::new();
    let mut rounds = 0;
    let mut preen_halt = false;
    let mut optimized = false;
    // No room was found for a new `/lost+found`: lost files go to the root instead.
    let mut lpf_root = false;
    let mut last = None;
    // An interactive run: its answers, and the pass headers shown so far.
    let asks = rep.asks();
    let mut answers = Answers::new(opts.policy);
    // Opened from a backup superblock: the primary superblock and descriptors are rewritten
    // from it first (e2fsck writes them when it finishes), and the rounds check the primary.
    let mut opts = opts.clone();
    let opts = &mut opts;
    if opts.policy != Policy::No {
        for f in restore_primary(&ov, opts) {
            rep.finding(&f);
            answers.told(&f);
            findings.push(f);
        }
    }
    let opts = &*opts;
    // The orphan list is released before the first check, as e2fsck does when it may write.
    if opts.policy != Policy::No {
        if let Some(p0) = open(&ov, opts) {
            let (p0, replayed) = orphans::recover(p0, ov.clone(), opts);
            for f in replayed.into_iter().chain(orphans::release(&p0, &*ov)) {
                rep.finding(&f);
                answers.told(&f);
                findings.push(f);
            }
        }
    }
    while rounds < MAX_ROUNDS {
        let seen = findings.clone();
        let mut held = Held::default();
        let mut out = engine::check(ov.clone(), opts, &mut held);
        let p0 = open(&ov, opts);
        let mut dirs = Dirs::new(out.alloc.as_ref());
        hold_back(&mut out.findings);
        clone_first(&mut out.findings);
        answers.recall(&mut out.findings);
        // A table with no room to move to stays where it is: not fixed.
        for f in out.findings.iter_mut() {
            if f.fixed
                && itable::handles(f.problem)
                && !itable::moved(out.alloc.as_ref(), f.ctx.group)
            {
                f.fixed = false;
            }
        }
        // Moving an inode table restarts the check, as in e2fsck: nothing else this round saw
        // is fixed before the table is in place.
        let restart = itable::moves(out.alloc.as_ref())
            && out
                .findings
                .iter()
                .any(|f| f.fixed && itable::handles(f.problem));
        if restart {
            for f in out.findings.iter_mut() {
                f.fixed &= itable::handles(f.problem);
            }
        }
        // Entries naming inodes their group calls unused: the descriptor is reset and the
        // check starts again (as e2fsck), nothing else this round saw being fixed first.
        let unhide = !restart
            && out
                .findings
                .iter()
                .any(|f| f.fixed && unused::handles(f.problem));
        if unhide {
            for f in out.findings.iter_mut() {
                f.fixed &= unused::handles(f.problem);
            }
        }
        let restart = restart || unhide;
        // Turning on the extents feature changes how every other inode's map is read (e2fsck
        // reads the inodes after it as extent-capable): nothing else is fixed on the old view.
        let extents_first = !restart
            && out
                .findings
                .iter()
                .any(|f| f.fixed && f.problem == P::P1_EXTENT_FEATURE);
        if extents_first {
            for f in out.findings.iter_mut() {
                f.fixed &= f.problem == P::P1_EXTENT_FEATURE;
            }
        }
        // Interactive: passes 0-3 are asked now, before anything below acts on the answers.
        if asks {
            answers.round(&held, &mut out.findings, true, rep, &mut findings);
            // The fix that held everything else back was answered no: check again without it.
            let gate = |f: &Finding| {
                itable::handles(f.problem)
                    || unused::handles(f.problem)
                    || f.problem == P::P1_EXTENT_FEATURE
            };
            let refused_gate =
                (restart || extents_first) && !out.findings.iter().any(|f| f.fixed && gate(f));
            if refused_gate && rounds + 1 < MAX_ROUNDS {
                if rounds == 0 {
                    first_errors = out.findings.iter().map(|f| f.problem).collect();
                }
                rounds += 1;
                last = Some(out);
                continue;
            }
        }
        // A usable `/lost+found` first, so this round's reconnections can use it.
        if let (Some(p0), Some(facts), None, false) = (&p0, out.alloc.as_mut(), &out.fatal, restart)
        {
            root::recreate(p0, &*ov, &mut dirs, facts, &mut out.findings);
            let policy = opts.policy;
            let mut answer = |f: &Finding| {
                if asks {
                    answers.put(f, rep, &mut findings).unwrap_or(false)
                } else {
                    policy.answer(f.problem)
                }
            };
            if let Some((at, n)) = lpf::ensure(
                p0,
                &*ov,
                &mut dirs,
                facts,
                &mut out.findings,
                &mut answer,
                &mut lpf_root,
            ) {
                held.insert_found(at, n);
            }
            if let Some((at, n)) =
                lpf::make_room(p0, &*ov, &mut dirs, facts, &mut out.findings, &mut answer)
            {
                held.insert_found(at, n);
            }
        }
        if asks {
            answers.round(&held, &mut out.findings, false, rep, &mut findings);
        }
        let plan = match &p0 {
            Some(p0) => connect::plan(p0, &*ov, &dirs, &out.findings, lpf_root),
            None => connect::Plan::default(),
        };
        let refused =
            |f: &Finding| !opts.policy.answer(f.problem) || (asks && answers.get(f) == Some(false));
        decide(&mut out.findings, &plan.linked, &refused, asks);
        // Place only the reconnections still answered yes.
        let plan = match &p0 {
            Some(p0)
                if out
                    .findings
                    .iter()
                    .any(|f| f.fixed && connect::handles(f.problem)) =>
            {
                connect::plan(p0, &*ov, &dirs, &out.findings, lpf_root)
            }
            _ => connect::Plan::default(),
        };
        out.exit_code = engine::exit_code(&out.findings) | (out.exit_code & exit::ERROR);
        if rounds == 0 {
            // What was wrong to begin with: fixed or not, these were the file system's own.
            first_errors = out.findings.iter().map(|f| f.problem).collect();
        }
        rounds += 1;
        // Debugging aid: `FFSCK_TRACE_ROUNDS=1` prints each round's decisions on stderr.
        if std::env::var_os("FFSCK_TRACE_ROUNDS").is_some() {
            for f in &out.findings {
                let c = &f.ctx;
                eprintln!(
                    "round {rounds}: {:?} fixed={} ino={} dir={}",
                    f.problem, f.fixed, c.ino, c.dir
                );
            }
        }
        // Preen stops at the first problem it may not fix, keeping the fixes before it.
        let halt_at = (opts.policy == Policy::Preen)
            .then(|| out.findings.iter().position(Finding::leaves_error))
            .flatten();
        let upto = halt_at.unwrap_or(out.findings.len());
        let fixes: Vec<&Finding> = out.findings[..upto].iter().filter(|f| f.fixed).collect();
        let optimize_next = fixes.is_empty()
            && opts.optimize_dirs
            && !optimized
            && out.fatal.is_none()
            && halt_at.is_none()
            && rounds < MAX_ROUNDS;
        let final_round = (fixes.is_empty() && !optimize_next)
            || out.fatal.is_some()
            || halt_at.is_some()
            || rounds == MAX_ROUNDS;
        // Replay what the check reported with the decisions made, skipping what an earlier
        // round already reported (and pass headers after the first round). A fix held back
        // for a later round is not reported yet, unless no later round comes: the round
        // that makes it reports it as fixed.
        // (Interactive runs showed this round's findings when asking: what is left is a fix
        // held back in the last round.)
        // A problem left unfixed on an inode an earlier pass fixes this round was found on
        // the inode as it was: the next round finds it again if it is still there.
        let earliest_fix: HashMap<u32, u8> =
            fixes
                .iter()
                .filter(|f| f.ctx.ino != 0)
                .fold(HashMap::new(), |mut m, f| {
                    let p = m.entry(f.ctx.ino).or_insert(u8::MAX);
                    *p = (*p).min(f.problem.pass());
                    m
                });
        let stale = |f: &Finding| {
            f.leaves_error()
                && earliest_fix
                    .get(&f.ctx.ino)
                    .is_some_and(|&p| p < f.problem.pass())
        };
        let report_now = |f: &Finding| {
            let deferred = (!f.fixed && opts.policy.answer(f.problem)) || stale(f);
            let shown = if asks {
                answers.get(f).is_some()
            } else {
                seen.iter()
                    .any(|s| s.problem == f.problem && s.ctx == f.ctx)
            };
            !shown && (!deferred || final_round)
        };
        let mut decided = out.findings.iter();
        for ev in held.0 {
            match ev {
                Event::Pass(p) if rounds == 1 && !asks => rep.pass_start(p),
                Event::Pass(_) => {}
                Event::Found => {
                    if let Some(f) = decided.next() {
                        if report_now(f) {
                            rep.finding(f);
                        }
                    }
                }
            }
        }
        for f in &out.findings {
            if report_now(f) {
                findings.push(f.clone());
            }
        }
        // `-D`: once nothing is left to fix, rebuild every directory and check once more.
        if optimize_next {
            optimized = true;
            if let Some(p0) = &p0 {
                salvage::optimize_all(p0, &*ov, &dirs);
            }
            last = Some(out);
            continue;
        }
        if fixes.is_empty() || out.fatal.is_some() {
            preen_halt = halt_at.is_some();
            last = Some(out);
            break;
        }
        if let (Some(p0), true) = (&p0, unhide) {
            unused::apply(p0, &*ov, &fixes);
        } else if let (Some(p0), Some(facts), true) = (&p0, &out.alloc, restart) {
            itable::apply(p0, &*ov, facts);
        } else if let Some(p0) = p0 {
            blockmap::apply(&p0, &*ov, &fixes);
            extent_tree::apply(&p0, &*ov, &fixes);
            clone::apply(&p0, &*ov, out.alloc.as_ref(), &out.findings, &fixes);
            inode::apply(&p0, &*ov, &fixes);
            xattr::apply(&p0, &*ov, &fixes);
            clear::apply(&p0, &*ov, &fixes);
            if fixes.iter().any(|f| connect::handles(f.problem)) {
                connect::apply(&p0, &*ov, &plan);
            }
            dirent::apply(&p0, &*ov, &dirs, &fixes);
            salvage::apply(&p0, &*ov, &dirs, &fixes);
            dirhole::apply(&p0, &*ov, out.alloc.as_ref(), &fixes);
            if let Some(facts) = out.alloc.as_mut() {
                resize::apply(&p0, &*ov, facts, &fixes);
            }
            journal::apply(&p0, &*ov, &fixes);
            orphans::apply_file(&p0, &*ov, &fixes);
            // Quota files take and free blocks: the allocation is written out after them.
            let quotas = match out.alloc.as_mut() {
                Some(facts) => {
                    let orphan_file = orphans::recreate_file(&p0, &*ov, facts, &fixes);
                    quota::apply(&p0, &*ov, facts, &fixes) || orphan_file
                }
                None => false,
            };
            if quotas || fixes.iter().any(|f| alloc::handles(f.problem)) {
                if let Some(facts) = &out.alloc {
                    alloc::rebuild(&p0, &*ov, facts);
                }
            }
            // Last: the superblock as the fixes above left it.
            features::apply(&*ov, &fixes);
            superblock::apply(&*ov, &fixes, p0.now.secs());
            resize::apply_super(&*ov, &fixes);
            journal::apply_super(&*ov, &fixes);
        }
        if halt_at.is_some() {
            preen_halt = true;
            last = Some(out);
            break;
        }
        last = Some(out);
    }
    // A journal dropped on the way is made anew once the rest is clean, as e2fsck does.
    let remade = recreate_journal(&ov, opts, last.as_mut(), &findings, preen_halt);
    if let Some(f) = &remade {
        rep.finding(f);
        findings.push(f.clone());
    }
    // The rounds ran out while still fixing (or a journal was made): verify what is left.
    let mut verified = match last {
        Some(out) if (!out.findings.iter().any(|f| f.fixed) || preen_halt) && remade.is_none() => {
            out
        }
        _ => {
            let quiet = CheckOptions {
                policy: Policy::No,
                ..opts.clone()
            };
            let mut sink = crate::report::Collect::default();
            let out = engine::check(ov.clone(), &quiet, &mut sink);
            for f in out.findings.iter().filter(|f| f.leaves_error()) {
                rep.finding(f);
                findings.push(f.clone());
            }
            out
        }
    };
    // The repaired file system must open from its primary superblock and descriptors (a
    // check that has to fall back to a backup is not an error by itself, so say it here).
    let primary_broken = crate::superblock::rejects_primary;
    let mut new_problems: Vec<P> = verified
        .findings
        .iter()
        .filter(|f| {
            (f.leaves_error() && !first_errors.contains(&f.problem))
                || (primary_broken(f.problem) && verified.fatal.is_none())
        })
        .map(|f| f.problem)
        .collect();
    new_problems.dedup();
    // Whether the check changed anything, before the superblock's marks below.
    let changed = ov.extents().is_ok_and(|e| !e.is_empty());
    let mut code = verified.exit_code & !exit::NONDESTRUCT;
    if preen_halt {
        code |= exit::UNCORRECTED;
    }
    if changed {
        code |= exit::NONDESTRUCT;
    }
    // Last, as e2fsck ends a check that may write: mark the superblock (not after an aborted
    // check, nor when the repair is not to be committed).
    if opts.policy != Policy::No && verified.fatal.is_none() && new_problems.is_empty() {
        let end = if preen_halt {
            mark::End::PreenHalt
        } else {
            mark::End::Checked {
                errors_left: code & exit::UNCORRECTED != 0,
            }
        };
        verified.marked_valid = mark::apply(&*ov, end, opts.now);
    }
    let changes = ov.extents().unwrap_or_default();
    RepairOutcome {
        last: verified,
        findings,
        changes,
        rounds,
        preen_halt,
        new_problems,
        exit_code: code,
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
    let clean = out.fatal.is_none() && !out.findings.iter().any(Finding::leaves_error);
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
        // A journal this round drops or resets: read the layout with the journal questions
        // answered yes, whatever that check writes kept in a throwaway overlay.
        Err(pass0::OpenFailure::Journal(_)) => {
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
    use super::can_fix;
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
            P::P0_INODE_COUNT_WRONG,
            "never reported: no check finds it yet",
        ),
        (
            P::P1_ITABLE_CONFLICT,
            "an inode table overlapping another group's metadata is not moved",
        ),
        (
            P::P1_BLOCK_OVERLAPS_METADATA,
            "never reported: no check finds it yet",
        ),
        (
            P::P1_SUPPRESS_MESSAGES,
            "no keeps every illegal block listed; each is still fixed",
        ),
        (P::P1_INODE_TOOBIG, "never reported: no check finds it yet"),
        (P::P1_TOOBIG_REG, "never reported: no check finds it yet"),
        (
            P::P1_TOOBIG_SYMLINK,
            "never reported: no check finds it yet",
        ),
        (
            P::P1_MISALIGNED_CLUSTER,
            "never reported: no check finds it yet",
        ),
        (
            P::P1_EA_INODE_NONREG,
            "never reported: no check finds it yet",
        ),
        (
            P::P1E_CAN_COLLAPSE_EXTENT_TREE,
            "never reported: no check finds it yet",
        ),
        (
            P::P1E_CAN_NARROW_EXTENT_TREE,
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
                    && !can_fix(*p)
            })
            .collect();
        let listed: Vec<P> = NOT_FIXED.iter().map(|(p, _)| *p).collect();
        assert_eq!(unfixed, listed, "update NOT_FIXED (and say why)");
    }
}
