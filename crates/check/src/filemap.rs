//! Walks the block map or extent tree of one special file (journal, quota files, orphan file)
//! outside pass 1, in logical order, so the checks that run before or after the inode scan
//! can locate and read those files' blocks.
//!
//! The walk is `ext4::blocks`'s, which never trusts the tree (depth, range and read bounds);
//! this adapter hands the callers single blocks, and they can stop the walk at any point
//! (callers stop once they have seen as many blocks as they need).

use crate::ext4::blocks::{Damage, Index, Indirect, Mapping, NodeError, Span, Step, Visitor, Walk};
use crate::fs::Fs;

/// One step of the walk.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Visit {
    /// Logical block `lblk` lives at `pblk` (0 for a hole, reported only when asked for).
    Data { lblk: u64, pblk: u64 },
    /// A mapping block (indirect block or extent node) at `pblk` (0: an absent indirect
    /// block, reported only when holes are asked for).
    Meta { pblk: u64 },
}

/// Walk the file whose `i_block` is `iblock`. With `holes`, zero pointers of a block-mapped
/// file are visited too (and not descended into), as libext2fs does when asked to report
/// holes. The visitor returns `false` to stop. Returns `false` if the walk stopped because
/// a mapping block was out of range, could not be read or parsed, `true` otherwise.
///
/// A thin adapter over `ext4::blocks`: data pointers and extents are passed on as they are
/// (even out of range: the callers range-check what they read), extents block by block.
pub fn walk(
    fs: &Fs,
    iblock: &[u8; 60],
    extents: bool,
    holes: bool,
    f: &mut dyn FnMut(Visit) -> bool,
) -> bool {
    let mut w = Walk::over(fs);
    w.holes = holes;
    let mut v = Adapter { f, ok: true };
    if extents {
        w.extents(iblock, &mut v);
    } else {
        w.block_map(iblock, &mut v);
    }
    v.ok
}

struct Adapter<'f> {
    f: &'f mut dyn FnMut(Visit) -> bool,
    /// Cleared when the walk ends on damage.
    ok: bool,
}

impl Adapter<'_> {
    /// Pass `v` on; `Stop` if the caller asked to stop.
    fn visit(&mut self, v: Visit) -> Step {
        if (self.f)(v) {
            Step::Go
        } else {
            Step::Stop
        }
    }
    /// Every block of a run, in order.
    fn run(&mut self, m: Mapping) -> Step {
        for k in 0..m.len {
            let v = Visit::Data {
                lblk: m.lblk + k,
                pblk: m.pblk.saturating_add(k),
            };
            if self.visit(v) == Step::Stop {
                return Step::Stop;
            }
        }
        Step::Go
    }
    /// The walk cannot go on.
    fn fail(&mut self) -> Step {
        self.ok = false;
        Step::Stop
    }
}

impl Visitor for Adapter<'_> {
    fn mapping(&mut self, m: Mapping, _: &mut Span) -> Step {
        self.run(m)
    }
    fn indirect(&mut self, ind: Indirect) -> Step {
        self.visit(Visit::Meta { pblk: ind.pblk })
    }
    fn index(&mut self, idx: Index, _: &mut Span) -> Step {
        self.visit(Visit::Meta { pblk: idx.child })
    }
    fn damage(&mut self, d: Damage) -> Step {
        match d {
            Damage::DataOutOfRange(m) => self.run(m),
            Damage::IndirectOutOfRange(ind) => match self.visit(Visit::Meta { pblk: ind.pblk }) {
                Step::Stop => Step::Stop,
                _ => self.fail(),
            },
            Damage::IndexOutOfRange(idx) => match self.visit(Visit::Meta { pblk: idx.child }) {
                Step::Stop => Step::Stop,
                _ => self.fail(),
            },
            // A node at an unexpected depth is still walked (the level cap bounds it).
            Damage::BadNode(_, NodeError::Depth { .. }) => Step::Go,
            Damage::DeeperThanUseful { .. }
            | Damage::BadChecksum(_)
            | Damage::IndexStart { .. } => Step::Go,
            Damage::IndirectUnreadable(_)
            | Damage::BadRoot(_)
            | Damage::BadNode(..)
            | Damage::TooDeep(_)
            | Damage::ReadCap => self.fail(),
        }
    }
}

/// A file's mapping as sorted runs `(lblk, pblk, len)`, for block lookups after the walk.
#[derive(Clone, Debug, Default)]
pub struct Runs(Vec<(u64, u64, u64)>);

impl Runs {
    /// Record that `lblk` maps to `pblk` (calls must come in increasing `lblk` order).
    pub fn push(&mut self, lblk: u64, pblk: u64) {
        if let Some(last) = self.0.last_mut() {
            if last.0 + last.2 == lblk && last.1 + last.2 == pblk {
                last.2 += 1;
                return;
            }
        }
        self.0.push((lblk, pblk, 1));
    }
    /// Physical block of `lblk`, if mapped.
    pub fn lookup(&self, lblk: u64) -> Option<u64> {
        let i = self.0.partition_point(|r| r.0 + r.2 <= lblk);
        let r = self.0.get(i)?;
        (r.0 <= lblk).then(|| r.1 + (lblk - r.0))
    }
    /// Number of mapped blocks.
    pub fn mapped(&self) -> u64 {
        self.0.iter().map(|r| r.2).sum()
    }
}
