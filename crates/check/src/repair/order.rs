//! The order fixes keep within a repair round, read from the catalogue's `after` column: which
//! fixes wait for a later round because another fix of this round changes what they were
//! computed on, and which fix is made alone in its round.

use super::itable;
use crate::engine::AllocFacts;
use crate::problem::{after, Fixer, Problem as P};
use crate::report::{Finding, Policy};
use std::collections::{HashMap, HashSet};

/// The fixers whose `ALONE` fixes are made alone in their round, first first: a moved inode
/// table, then a group's unused-inodes count, then the extents feature (e2fsck restarts the
/// check after each, or reads the inodes after it differently), then a superblock fix that
/// changes the layout (the size fitted to the device: the next round checks the new size).
const ALONE_FIRST: [Fixer; 4] = [
    Fixer::ITable,
    Fixer::Unused,
    Fixer::Features,
    Fixer::Superblock,
];

fn any_fixed(findings: &[Finding], bits: u16) -> bool {
    findings.iter().any(|f| f.fixed && f.problem.after(bits))
}

/// Hold back the fixes that must wait for the next round: those that need reference counts
/// while entries or inodes are cleared (`COUNTS` after `RESHAPES`), the later passes' fixes
/// and the summaries while a map changes (`REMAPS`), quota usage until everything else is
/// made (`LAST`), and a `..` with no parent found.
pub(super) fn hold_back(findings: &mut [Finding]) {
    let reshaped = any_fixed(findings, after::RESHAPES);
    let remapped = any_fixed(findings, after::REMAPS);
    let settled = !findings
        .iter()
        .any(|f| f.fixed && !f.problem.after(after::SUMMARY));
    // A fix after which e2fsck restarts and stops the round (`RESTARTS`): what later passes
    // found was computed on the state before it (an inode cleared for too many illegal
    // blocks still counts the blocks it claimed, so passes 1B-1D would clone them).
    let stop = fixed_restarts(findings)
        .filter(|&(_, stop)| stop)
        .map(|(at, _)| at)
        .min();
    for f in findings.iter_mut().filter(|f| f.fixed) {
        let p = f.problem;
        if (p.after(after::LAST) && !settled)
            || stop.is_some_and(|at| after_stop(p, at))
            || (reshaped && p.after(after::COUNTS))
            || (remapped && (p.pass() >= 2 || p.after(after::SUMMARY)))
            // The checker found no parent to point `..` at.
            || (p == P::P3_BAD_DOT_DOT && f.ctx.ino2 == 0)
        {
            f.fixed = false;
        }
    }
}

/// An inode whose mapping block lies in critical metadata (`P1_CRITICAL_METADATA_COLLISION`)
/// has its map repaired only once pass 1D has copied that block out: until then a fix would be
/// written into the metadata. Its `MAP` fixes wait for the round after the clone (clearing the
/// whole inode writes nothing there and is made at once).
pub(super) fn clone_first(findings: &mut [Finding]) {
    let cloned: HashSet<u32> = findings
        .iter()
        .filter(|f| f.fixed && f.problem.fixed_by(Fixer::Clone))
        .map(|f| f.ctx.ino)
        .collect();
    let waiting: HashSet<u32> = findings
        .iter()
        .filter(|f| f.problem == P::P1_CRITICAL_METADATA_COLLISION && cloned.contains(&f.ctx.ino))
        .map(|f| f.ctx.ino)
        .collect();
    for f in findings.iter_mut() {
        if f.fixed && f.problem.after(after::MAP) && waiting.contains(&f.ctx.ino) {
            f.fixed = false;
        }
    }
}

/// Make the first `ALONE` fix of [`ALONE_FIRST`] alone in its round: nothing else this round
/// saw is fixed before it. An inode table with no room to move to stays where it is (not
/// fixed). Returns the fixer of the fix made alone.
pub(super) fn alone(findings: &mut [Finding], alloc: Option<&AllocFacts>) -> Option<Fixer> {
    for f in findings.iter_mut() {
        if f.fixed && f.problem.fixed_by(Fixer::ITable) && !itable::moved(alloc, f.ctx.group) {
            f.fixed = false;
        }
    }
    let first = |g: Fixer| alone_fix(findings, g) && (g != Fixer::ITable || itable::moves(alloc));
    let gate = ALONE_FIRST.into_iter().find(|&g| first(g))?;
    for f in findings.iter_mut() {
        f.fixed &= f.problem.after(after::ALONE) && f.problem.fixed_by(gate);
    }
    Some(gate)
}

fn alone_fix(findings: &[Finding], g: Fixer) -> bool {
    findings
        .iter()
        .any(|f| f.fixed && f.problem.after(after::ALONE) && f.problem.fixed_by(g))
}

/// Decide which of the fixes the policy accepted are made. A fix is held back when it could be
/// wrong because of a problem that stays unfixed: `INODE` fixes when the same inode has an
/// unfixed problem, and the `SUMMARY` rebuilds (bitmaps, counts) when anything stays unfixed,
/// since an unfixed problem may still change which blocks and inodes are in use. A
/// reconnection waits when `/lost+found` has no place for it (`linked`).
///
/// `refused` says whether a finding left unfixed was answered no (rather than held back for a
/// later round). An interactive run (`asked`) has already held back, as it asked, every fix
/// an earlier answer could change (`interactive::Answers`): a fix it showed as answered yes is
/// made, so only the reconnections are decided here.
pub(super) fn decide(
    findings: &mut [Finding],
    linked: &HashSet<u32>,
    refused: &dyn Fn(&Finding) -> bool,
    asked: bool,
    policy: Policy,
) {
    for f in findings.iter_mut().filter(|f| f.fixed) {
        if f.problem.fixed_by(Fixer::Connect) && !linked.contains(&f.ctx.ino) {
            f.fixed = false;
        }
    }
    if asked {
        return;
    }
    let unfixed: Vec<&Finding> = findings.iter().filter(|f| policy.leaves_error(f)).collect();
    // Inodes with a problem answered no (not one merely held back for a later round), with
    // the earliest pass that found one.
    let mut blocked: HashMap<u32, u8> = HashMap::new();
    for f in unfixed.iter().filter(|f| refused(f) && f.ctx.ino != 0) {
        let pass = blocked.entry(f.ctx.ino).or_insert(u8::MAX);
        *pass = (*pass).min(f.problem.pass());
    }
    // Clearing an inode frees its blocks only in the next round's facts.
    let summary_ok = unfixed.is_empty()
        && !findings
            .iter()
            .any(|f| f.fixed && f.problem.fixed_by(Fixer::Clear));
    for f in findings.iter_mut().filter(|f| f.fixed) {
        let inode_fix = f.problem.after(after::INODE);
        let waits = blocked
            .get(&f.ctx.ino)
            .is_some_and(|&pass| inode_fix && pass <= f.problem.pass());
        if waits || (f.problem.after(after::SUMMARY) && !summary_ok) {
            f.fixed = false;
        }
    }
}

/// Fixes after which e2fsck restarts from the beginning once the pass that found them ends:
/// the bad-blocks inode cleared because it lists itself, a group's unused inodes area reset,
/// and whether the round stops there (an inode cleared for too many illegal blocks: e2fsck
/// restarts before pass 1B, so nothing after pass 1 is shown ([`after_stop`]) or made
/// ([`hold_back`]) in that round).
const RESTARTS: &[(P, bool)] = &[
    (P::P1_BADBLOCKS_IN_BADBLOCKS, false),
    (P::P1_TOO_MANY_BAD_BLOCKS, true),
    (P::P2_INOREF_IN_UNUSED, false),
];

/// Where e2fsck would restart from the beginning in a round that made `fixes`: after the
/// pass given, and whether the round stops there (`alone`: a round whose fix restarts the
/// check, as moving an inode table does, restarts after the last pass that found one).
pub(super) fn restart_point(findings: &[Finding], alone: bool) -> Option<(u8, bool)> {
    if alone {
        let fixed = findings.iter().filter(|f| f.fixed);
        let at = fixed.map(|f| f.problem.pass()).max()?;
        return Some((at.max(1), true));
    }
    fixed_restarts(findings).min_by_key(|&(at, _)| at)
}

/// The restarts the fixes made in `findings` call for: the pass after which each restarts and
/// whether it stops its round.
fn fixed_restarts(findings: &[Finding]) -> impl Iterator<Item = (u8, bool)> + '_ {
    findings
        .iter()
        .filter(|f| f.fixed)
        .filter_map(|f| RESTARTS.iter().find(|&&(p, _)| p == f.problem))
        .map(|&(p, stop)| (p.pass(), stop))
}

/// Whether `p` comes after a restart at the end of pass `at` that stops its round: a later
/// pass, or after pass 1 one of passes 1B-1D (which `Problem::pass` counts as pass 1).
pub(super) fn after_stop(p: P, at: u8) -> bool {
    p.pass() > at || (at == 1 && p.in_pass1bcd())
}
