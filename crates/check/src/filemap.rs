//! Walks the block map or extent tree of one special file (journal, quota files, orphan file)
//! outside pass 1, in logical order, so the checks that run before or after the inode scan
//! can locate and read those files' blocks.
//!
//! The walk never trusts the tree: depth is bounded by the format (3 indirect levels, 5 extent
//! levels), every node is range-checked before it is read, and the visitor can stop the walk
//! at any point (callers stop once they have seen as many blocks as they need).

use crate::fs::Fs;
use ffsck_format::extent::{Node, MAX_DEPTH};

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
/// a mapping block could not be read or parsed, `true` otherwise.
pub fn walk(
    fs: &Fs,
    iblock: &[u8; 60],
    extents: bool,
    holes: bool,
    f: &mut dyn FnMut(Visit) -> bool,
) -> bool {
    if extents {
        let mut stop = false;
        extent_node(fs, &iblock[..], MAX_DEPTH + 1, f, &mut stop)
    } else {
        let ptrs: Vec<u64> = (0..15)
            .map(|i| {
                u64::from(u32::from_le_bytes([
                    iblock[4 * i],
                    iblock[4 * i + 1],
                    iblock[4 * i + 2],
                    iblock[4 * i + 3],
                ]))
            })
            .collect();
        let mut w = MapWalk {
            fs,
            holes,
            f,
            lblk: 0,
            stopped: false,
            ok: true,
        };
        for &p in &ptrs[..12] {
            if !w.data(p) {
                return w.ok;
            }
        }
        for (level, &p) in ptrs[12..].iter().enumerate() {
            if !w.indirect(p, level as u32) {
                return w.ok;
            }
        }
        w.ok
    }
}

struct MapWalk<'a, 'f> {
    fs: &'a Fs,
    holes: bool,
    f: &'f mut dyn FnMut(Visit) -> bool,
    lblk: u64,
    stopped: bool,
    ok: bool,
}

impl MapWalk<'_, '_> {
    /// Visit one data pointer; `false` when the walk must end.
    fn data(&mut self, p: u64) -> bool {
        let lblk = self.lblk;
        self.lblk += 1;
        if p == 0 && !self.holes {
            return true;
        }
        if !(self.f)(Visit::Data { lblk, pblk: p }) {
            self.stopped = true;
            return false;
        }
        true
    }

    /// Blocks one pointer at `level` (0 = single indirect) covers.
    fn span(&self, level: u32) -> u64 {
        let per = u64::from(self.fs.geo.block_size / 4);
        per.saturating_pow(level + 1)
    }

    fn indirect(&mut self, p: u64, level: u32) -> bool {
        if p == 0 {
            if self.holes && !(self.f)(Visit::Meta { pblk: 0 }) {
                self.stopped = true;
                return false;
            }
            self.lblk = self.lblk.saturating_add(self.span(level));
            return true;
        }
        if !(self.f)(Visit::Meta { pblk: p }) {
            self.stopped = true;
            return false;
        }
        if !self.fs.geo.is_valid_block(p) {
            self.ok = false;
            return false;
        }
        let Some(buf) = self.fs.read_block(p) else {
            self.ok = false;
            return false;
        };
        for c in buf.chunks_exact(4) {
            let q = u64::from(u32::from_le_bytes([c[0], c[1], c[2], c[3]]));
            let go = if level == 0 {
                self.data(q)
            } else {
                self.indirect(q, level - 1)
            };
            if !go {
                return false;
            }
        }
        true
    }
}

/// Walk one extent node; `budget` bounds the remaining depth.
fn extent_node(
    fs: &Fs,
    buf: &[u8],
    budget: u16,
    f: &mut dyn FnMut(Visit) -> bool,
    stop: &mut bool,
) -> bool {
    let Ok(node) = Node::parse(buf) else {
        return false;
    };
    if budget == 0 {
        return false;
    }
    for i in 0..node.len() {
        if node.is_leaf() {
            let e = node.extent(i);
            let (len, _) = e.len();
            for k in 0..u64::from(len) {
                let v = Visit::Data {
                    lblk: u64::from(e.ee_block.get()) + k,
                    pblk: e.start().saturating_add(k),
                };
                if !f(v) {
                    *stop = true;
                    return true;
                }
            }
        } else {
            let child = node.index(i).leaf();
            if !f(Visit::Meta { pblk: child }) {
                *stop = true;
                return true;
            }
            if !fs.geo.is_valid_block(child) {
                return false;
            }
            let Some(b) = fs.read_block(child) else {
                return false;
            };
            if !extent_node(fs, &b, budget - 1, f, stop) {
                return false;
            }
            if *stop {
                return true;
            }
        }
    }
    true
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
