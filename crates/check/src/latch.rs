//! e2fsck's latches, applied from the catalogue's `latch` column: the first problem of a latch
//! group raises the group's question ahead of it, once until the latch is ended, and ending a
//! latched group reports its end message. A pass keeps one `Latches` for as long as a latch
//! lasts (a check, a pass, an inode's walk) and reports the group's problems through it.

use crate::problem::{Latch, Problem};
use crate::report::{Findings, Note, Policy, ProblemCtx};

/// Which latch groups have raised their question since they were last ended, and which of
/// those a person refused (an interactive repair's later check honours the answer: the
/// group's members are answered no with it).
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Latches(u16, u16);

fn bit(l: Latch) -> u16 {
    1 << l as u16
}

impl Latches {
    /// Whether `l` raised its question and was not ended since.
    pub(crate) fn latched(&self, l: Latch) -> bool {
        self.0 & bit(l) != 0
    }

    /// Before `p` is reported with `ctx`: when `p` is the first problem of its latch group,
    /// report the group's question, with `ctx` as far as the question's message uses it.
    pub(crate) fn raise(
        &mut self,
        out: &mut Findings,
        policy: Policy,
        p: Problem,
        ctx: &ProblemCtx,
    ) {
        let Some(l) = p.latch() else { return };
        if self.latched(l) {
            return;
        }
        self.0 |= bit(l);
        self.1 &= !bit(l);
        let q = l.question();
        let ctx = for_message(ctx, q.info().message);
        if policy.answer(q) && !policy.answer_to(q, &ctx) {
            self.1 |= bit(l);
        }
        out.report(policy, q, ctx);
    }

    /// Count `l`'s question as raised without reporting it: e2fsck does so for the relocation
    /// hint when it runs from a backup superblock (the hint suggests one).
    pub(crate) fn hold(&mut self, l: Latch) {
        self.0 |= bit(l);
    }

    /// Report `p`, raising its latch's question first when it is the group's first; returns
    /// the policy's answer to `p`.
    pub(crate) fn report(
        &mut self,
        out: &mut Findings,
        policy: Policy,
        p: Problem,
        ctx: ProblemCtx,
    ) -> bool {
        self.raise(out, policy, p, &ctx);
        let yes = out.report(policy, p, ctx);
        if yes && p.latch().is_some_and(|l| self.1 & bit(l) != 0) {
            if let Some(f) = out.0.last_mut() {
                f.fixed = false;
            }
            return false;
        }
        yes
    }

    /// End latch `l`: when it raised its question, report its end message (if it has one, with
    /// `ctx`) and return that answer, the group's. The next problem of the group raises the
    /// question again.
    pub(crate) fn end(
        &mut self,
        out: &mut Findings,
        policy: Policy,
        l: Latch,
        ctx: ProblemCtx,
    ) -> Option<bool> {
        if !self.latched(l) {
            return None;
        }
        self.0 &= !bit(l);
        let e = l.end()?;
        let refused = policy.answer(e) && !policy.answer_to(e, &ctx);
        let yes = out.report(policy, e, ctx);
        if refused {
            // The group's answer is its end's: its members, back to its question, are not
            // fixed either.
            for f in out.0.iter_mut().rev().skip(1) {
                if f.problem.latch() != Some(l) && f.problem != l.question() {
                    break;
                }
                f.fixed = false;
                if f.problem == l.question() {
                    break;
                }
            }
        }
        Some(yes)
    }
}

/// `ctx` with only the fields `message` shows: a question names what its message names of the
/// problem that raised it, nothing more.
fn for_message(ctx: &ProblemCtx, message: &str) -> ProblemCtx {
    let shows = |keys: &[&str]| keys.iter().any(|k| message.contains(k));
    let dir = shows(&["{dir}", "{dirpath}", "{dirname}", "{strpath}"]);
    ProblemCtx {
        ino: if shows(&["{ino}", "{inopath}"]) {
            ctx.ino
        } else {
            0
        },
        ino2: if shows(&["{ino2}"]) { ctx.ino2 } else { 0 },
        dir: if dir { ctx.dir } else { 0 },
        blk: if shows(&["{blk}"]) { ctx.blk } else { 0 },
        blk2: if shows(&["{blk2}"]) { ctx.blk2 } else { 0 },
        group: if shows(&["{group}"]) { ctx.group } else { 0 },
        num: if shows(&["{num}", "{num:o}", "{block}", "{Block}"]) {
            ctx.num
        } else {
            0
        },
        num2: if shows(&["{num2}"]) { ctx.num2 } else { 0 },
        name: ctx.name.clone().filter(|_| shows(&["{name}"])),
        str: ctx.str.clone().filter(|_| shows(&["{str}", "{strpath}"])),
        path: Note(ctx.path.0.clone().filter(|_| dir)),
        ino_path: Note(ctx.ino_path.0.clone().filter(|_| shows(&["{inopath}"]))),
        path2: Note(ctx.path2.0.clone().filter(|_| shows(&["{path2}"]))),
        run: 0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::problem::Problem as P;

    fn codes(out: &Findings) -> Vec<P> {
        out.0.iter().map(|f| f.problem).collect()
    }

    #[test]
    fn a_held_latch_raises_no_question() {
        let mut l = Latches::default();
        let mut out = Findings::default();
        l.hold(Latch::Reloc);
        l.report(
            &mut out,
            Policy::Yes,
            P::P0_BB_NOT_GROUP,
            ProblemCtx::group(0),
        );
        assert_eq!(codes(&out), [P::P0_BB_NOT_GROUP]);
    }

    #[test]
    fn the_first_member_raises_the_question_once() {
        let mut l = Latches::default();
        let mut out = Findings::default();
        for g in 0..3 {
            l.report(&mut out, Policy::Yes, P::P0_GDT_CSUM, ProblemCtx::group(g));
        }
        assert_eq!(
            codes(&out),
            [
                P::P0_GDT_CSUM_LATCH,
                P::P0_GDT_CSUM,
                P::P0_GDT_CSUM,
                P::P0_GDT_CSUM
            ]
        );
        // The question shows nothing of its member's context (its message names none of it).
        assert_eq!(out.0[0].ctx, ProblemCtx::default());
        assert!(out.0[0].fixed, "-y answers the question yes");
        assert!(l.latched(Latch::BgChecksum));
        assert!(!l.latched(Latch::Reloc));
    }

    #[test]
    fn problems_outside_a_group_raise_nothing() {
        let mut l = Latches::default();
        let mut out = Findings::default();
        l.report(&mut out, Policy::No, P::P1_BAD_I_SIZE, ProblemCtx::ino(12));
        assert_eq!(codes(&out), [P::P1_BAD_I_SIZE]);
        assert_eq!(
            l.end(&mut out, Policy::No, Latch::Block, ProblemCtx::default()),
            None
        );
        assert_eq!(codes(&out), [P::P1_BAD_I_SIZE]);
    }

    #[test]
    fn the_question_keeps_what_its_message_names() {
        let mut l = Latches::default();
        let mut out = Findings::default();
        let ctx = ProblemCtx {
            ino: 12,
            blk: 99_999,
            num: 3,
            ..Default::default()
        };
        l.report(&mut out, Policy::No, P::P1_ILLEGAL_BLOCK_NUM, ctx.clone());
        assert_eq!(
            codes(&out),
            [P::P1_INODE_BLOCK_LATCH, P::P1_ILLEGAL_BLOCK_NUM]
        );
        assert_eq!(out.0[0].ctx, ProblemCtx::ino(12));
        assert_eq!(out.0[0].message(), "Inode 12 has illegal block(s).");
        assert_eq!(out.0[1].ctx, ctx);
    }

    #[test]
    fn ending_reports_the_end_once_and_rearms_the_latch() {
        let mut l = Latches::default();
        let mut out = Findings::default();
        let blk = |b| ProblemCtx {
            blk: b,
            ..Default::default()
        };
        l.report(&mut out, Policy::Yes, P::P5_BLOCK_USED, blk(7));
        l.report(&mut out, Policy::Yes, P::P5_BLOCK_UNUSED, blk(9));
        // Another group's latch is independent.
        l.report(&mut out, Policy::Yes, P::P5_INODE_USED, ProblemCtx::ino(13));
        let end = l.end(
            &mut out,
            Policy::Yes,
            Latch::BlockBitmap,
            ProblemCtx::default(),
        );
        assert_eq!(end, Some(true));
        assert_eq!(
            l.end(
                &mut out,
                Policy::Yes,
                Latch::BlockBitmap,
                ProblemCtx::default()
            ),
            None,
            "a second end without a member reports nothing"
        );
        l.report(&mut out, Policy::Yes, P::P5_BLOCK_USED, blk(20));
        assert_eq!(
            codes(&out),
            [
                P::P5_BLOCK_BITMAP_HEADER,
                P::P5_BLOCK_USED,
                P::P5_BLOCK_UNUSED,
                P::P5_INODE_BITMAP_HEADER,
                P::P5_INODE_USED,
                P::P5_BLOCK_BITMAP_END,
                P::P5_BLOCK_BITMAP_HEADER,
                P::P5_BLOCK_USED,
            ]
        );
        assert!(l.latched(Latch::InodeBitmap) && l.latched(Latch::BlockBitmap));
    }

    #[test]
    fn a_latch_without_an_end_message_ends_silently() {
        let mut l = Latches::default();
        let mut out = Findings::default();
        l.report(&mut out, Policy::No, P::P1_LOW_DTIME, ProblemCtx::ino(30));
        assert_eq!(
            l.end(&mut out, Policy::No, Latch::LowDtime, ProblemCtx::default()),
            None
        );
        assert!(!l.latched(Latch::LowDtime));
        l.report(&mut out, Policy::No, P::P1_LOW_DTIME, ProblemCtx::ino(31));
        assert_eq!(
            codes(&out),
            [
                P::P1_ORPHAN_LIST_REFUGEES,
                P::P1_LOW_DTIME,
                P::P1_ORPHAN_LIST_REFUGEES,
                P::P1_LOW_DTIME
            ]
        );
    }

    /// `raise` alone puts the question before a finding made elsewhere (pass 1 merges the
    /// workers' findings and raises the latch as it takes them in order).
    #[test]
    fn raise_puts_the_question_before_a_finding_made_elsewhere() {
        let mut l = Latches::default();
        let mut out = Findings::default();
        let mut worker = Findings::default();
        worker.report(Policy::Preen, P::P1_LOW_DTIME, ProblemCtx::ino(40));
        worker.report(Policy::Preen, P::P1_LOW_DTIME, ProblemCtx::ino(41));
        for f in worker.0 {
            l.raise(&mut out, Policy::Preen, f.problem, &f.ctx);
            out.0.push(f);
        }
        assert_eq!(
            codes(&out),
            [P::P1_ORPHAN_LIST_REFUGEES, P::P1_LOW_DTIME, P::P1_LOW_DTIME]
        );
        assert!(out.0[0].fixed, "-p fixes orphan-list refugees");
    }
}
