//! The one walker of a file's block mapping: block maps (direct, single, double and triple
//! indirect pointers) and extent trees (index and leaf nodes), as libext2fs's
//! `ext2fs_block_iterate3` and extent handle serve e2fsck.
//!
//! The walk never trusts the tree. Every pointer is range-checked before it is read; indirect
//! depth is fixed by the format, extent depth is bounded by `extent::MAX_DEPTH` levels
//! whatever the nodes claim (so a node pointing at itself ends); and the mapping blocks read
//! are capped (`Walk::reads`, by default the file-system size), so a tree whose entries share
//! nodes cannot make the walk quadratic or worse.
//!
//! What the walk meets is handed to a [`Visitor`] as values: each mapping (logical to physical
//! run, unwritten or not), each mapping block (indirect block or extent node, with its level)
//! and each piece of damage ([`Damage`]: a pointer out of range, a node that is not a node or
//! has the wrong depth, a bad checksum, an index start that disagrees with its child, a tree
//! deeper than useful, the read cap). The visitor decides, per value, whether to go on
//! ([`Step`]); the walker itself reports nothing. Pass 1 turns the values into findings, the
//! other walkers (pass 1B, `filemap`, fast-commit replay) into block lists.
//!
//! Edit mode ([`Walk::edit_block_map`], [`Walk::edit_extents`]) is how repairs rewrite a
//! mapping with the same walk: each mapping block read (and the `i_block` in the inode) is
//! announced by `Visitor::enter`, every slot of it then yields exactly one call in slot order
//! (`mapping` or `DataOutOfRange` for a data slot, holes included; `indirect` or
//! `IndirectOutOfRange` for an indirect slot; `index` or `IndexOutOfRange` for an index entry),
//! and after everything below it `Visitor::rewrite` gets its bytes to change and write back.
//! [`Edits`] keeps the visitor's per-slot answers and applies them.
//!
//! The walk is generic over the visitor (no dynamic dispatch on the hot path of pass 1) and
//! reads each mapping block into a buffer it reuses per level: nothing is allocated per data
//! block, and one buffer per tree level per walk.

use crate::fs::Fs;
use ffsck_format::extent::{self, HeaderError, Node, MAX_DEPTH};

/// Where the walker reads mapping blocks from: the file system, or an overlay of it (the
/// fast-commit replay's pending writes), or a test's buffer.
pub(crate) trait BlockReader {
    /// Bytes in one block.
    fn block_size(&self) -> usize;
    /// Read block `blk` into `buf` (one block long); `false` if it cannot be read.
    fn read_block_into(&self, blk: u64, buf: &mut [u8]) -> bool;
}

impl BlockReader for Fs {
    fn block_size(&self) -> usize {
        Fs::block_size(self)
    }
    fn read_block_into(&self, blk: u64, buf: &mut [u8]) -> bool {
        self.read_blocks_into(blk, buf).is_ok()
    }
}

/// What the visitor wants after a value.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Step {
    /// Go on; for a mapping block (or a node with damage that can still be walked), read it
    /// and walk what it maps.
    Go,
    /// Go on with the next entry, without reading the block this value names.
    Skip,
    /// End the whole walk.
    Stop,
}

/// A run of logical blocks mapped to physical ones: one pointer of a block map (`len` 1;
/// `pblk` 0 for a hole, reported only when holes are asked for) or one extent leaf entry.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Mapping {
    pub lblk: u64,
    pub pblk: u64,
    pub len: u64,
    /// An unwritten (preallocated) extent.
    pub uninit: bool,
}

/// An indirect block: `level` 1 (single) to 3 (triple), mapping logical blocks from `lblk`.
/// `pblk` 0 is an absent one (reported only when holes are asked for; never read, and not
/// followed by `leave`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Indirect {
    pub pblk: u64,
    pub level: u32,
    pub lblk: u64,
}

/// An extent index entry: the child node at `child`, which covers logical `start..end`
/// (`end` is the next entry's start, or the end of the parent's range). `level` is the
/// child's distance from the root (the root is level 0).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Index {
    pub child: u64,
    pub start: u64,
    pub end: u64,
    pub level: u32,
}

/// An extent node accepted by the walker, before its entries are visited. `pblk` is `None`
/// for the root in the inode.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct NodeInfo {
    pub pblk: Option<u64>,
    pub depth: u16,
    pub entries: usize,
    /// The entries the node has room for (`eh_max`).
    pub capacity: usize,
    pub level: u32,
}

/// The node being walked: the logical range its parent allows (`lo..hi`), its level (root
/// 0; for block maps the indirect level, 0 for the pointers in the inode), and scratch the
/// visitor may keep for its ordering checks (`next_start`, starting at `lo`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Span {
    pub lo: u64,
    pub hi: u64,
    pub level: u32,
    pub next_start: u64,
    /// The leaf entry being visited runs over the start of the entry after it, and over the
    /// one after that: the repair drops it rather than the entries it runs over.
    pub covers_next: bool,
}

impl Span {
    fn new(lo: u64, hi: u64, level: u32) -> Self {
        Span {
            lo,
            hi,
            level,
            next_start: lo,
            covers_next: false,
        }
    }
}

/// Why a child of an extent index cannot be walked as the node it should be.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum NodeError {
    /// The block could not be read.
    Unreadable,
    /// Its header is not an extent header.
    Header(HeaderError),
    /// A node, but not at the depth its parent implies (`want` is the parent's depth − 1).
    /// The visitor may still walk it (`Step::Go`); depth stays bounded by the level cap.
    Depth { want: u16, got: u16 },
}

/// Damage the walker found, handed over before anything is read from it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Damage {
    /// A block-map data pointer outside the file system, or an extent whose start is 0 or
    /// outside it. (`Go` and `Skip` both go on with the next entry.)
    DataOutOfRange(Mapping),
    /// An indirect-block pointer outside the file system.
    IndirectOutOfRange(Indirect),
    /// An indirect block that could not be read.
    IndirectUnreadable(Indirect),
    /// An extent index entry whose child lies outside the file system.
    IndexOutOfRange(Index),
    /// The root in the inode is not an extent header.
    BadRoot(HeaderError),
    /// The root is deeper than a tree of this block size ever needs (`useful`).
    DeeperThanUseful { depth: u16, useful: u16 },
    /// An index's child is not a walkable node.
    BadNode(Index, NodeError),
    /// An extent block's tail checksum is wrong (checked only with `Walk::csum_seed`).
    BadChecksum(Index),
    /// An index entry's start differs from the first logical block of its child.
    IndexStart {
        index: Index,
        first: u64,
        depth: u16,
    },
    /// The child would lie more than `MAX_DEPTH` levels below the root.
    TooDeep(Index),
    /// The walk has read as many mapping blocks as it may (`Walk::reads`).
    ReadCap,
}

/// Receives what the walk meets; see the module header. Every method has the default of
/// going on, except `mapping`, which every walker needs.
pub(crate) trait Visitor {
    /// A data run. `span` is the node (or indirect block) holding it.
    fn mapping(&mut self, m: Mapping, span: &mut Span) -> Step;
    /// An indirect block about to be read: `Go` reads it and walks its pointers, then
    /// `leave` is called.
    fn indirect(&mut self, _ind: Indirect) -> Step {
        Step::Go
    }
    /// An extent index entry about to be followed (its child is in range): `Go` reads the
    /// child and walks it, then `leave` is called.
    fn index(&mut self, _idx: Index, _span: &mut Span) -> Step {
        Step::Go
    }
    /// An extent node accepted for walking (the root first), before its entries.
    fn node(&mut self, _n: NodeInfo) -> Step {
        Step::Go
    }
    /// The block an `indirect` or `index` answered `Go` for is done with (walked, damaged
    /// or unread).
    fn leave(&mut self, _pblk: u64, _level: u32) {}
    /// Damage; `Stop` ends the walk, anything else goes on as the variant says.
    fn damage(&mut self, _d: Damage) -> Step {
        Step::Go
    }
    /// Edit mode: a mapping block (`pblk`; `None` for the `i_block` in the inode) about to
    /// be walked, read (for an extent node, after `node` answered `Go`).
    fn enter(&mut self, _pblk: Option<u64>) {}
    /// Edit mode: the block `enter` announced, walked with everything below it (unless the
    /// walk was stopped). The visitor may change `buf` (the block, or the inode's `i_block`)
    /// and writes a changed block back itself (it knows the device and the checksum seed).
    fn rewrite(&mut self, _pblk: Option<u64>, _buf: &mut [u8]) {}
}

/// What an edit does with one slot of a mapping block.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Edit {
    Keep,
    /// Remove the extent entry, or zero the block pointer.
    Drop,
    /// Keep the extent entry with a new first logical block and/or raw length (`ee_len`).
    Set {
        lblk: Option<u32>,
        len: Option<u16>,
    },
}

/// An edit-mode visitor's answers: one list of [`Edit`]s per mapping block being walked, from
/// the root down (`enter` opens one, `rewrite` applies and closes it).
#[derive(Default)]
pub(crate) struct Edits {
    stack: Vec<Vec<Edit>>,
}

impl Edits {
    /// Open the list of a block entered.
    pub fn enter(&mut self) {
        self.stack.push(Vec::new());
    }
    /// The answer for the next slot of the innermost block.
    pub fn push(&mut self, e: Edit) {
        if let Some(top) = self.stack.last_mut() {
            top.push(e);
        }
    }
    /// The answer for the slot last visited in the innermost block: while a child block is
    /// walked (before it is entered, or once it is closed), the slot pointing at it.
    pub fn last(&mut self) -> Option<&mut Edit> {
        self.stack.last_mut()?.last_mut()
    }
    /// Close the innermost block, an extent node in `buf`: drop and change its entries as
    /// answered (slots without an answer are kept). Whether `buf` changed.
    pub fn apply_node(&mut self, buf: &mut [u8]) -> bool {
        let edits = self.stack.pop().unwrap_or_default();
        // (A root of any depth is walked, so it is edited too.)
        let Ok(node) = Node::parse_any_depth(buf) else {
            return false;
        };
        let n = node.len();
        let mut kept: Vec<[u8; 12]> = Vec::with_capacity(n);
        let mut changed = false;
        for i in 0..n {
            let mut e = [0u8; 12];
            e.copy_from_slice(&buf[12 + 12 * i..24 + 12 * i]);
            match edits.get(i).copied().unwrap_or(Edit::Keep) {
                Edit::Keep => {}
                Edit::Drop => {
                    changed = true;
                    continue;
                }
                Edit::Set { lblk, len } => {
                    if let Some(l) = lblk {
                        e[0..4].copy_from_slice(&l.to_le_bytes());
                    }
                    if let Some(l) = len {
                        e[4..6].copy_from_slice(&l.to_le_bytes());
                    }
                    changed = true;
                }
            }
            kept.push(e);
        }
        if changed {
            set_entries(buf, &kept);
        }
        changed
    }
    /// Close the innermost block, a block map's pointers in `buf` (`i_block` or an indirect
    /// block): zero the pointers answered `Drop`. Whether `buf` changed.
    pub fn apply_pointers(&mut self, buf: &mut [u8]) -> bool {
        let edits = self.stack.pop().unwrap_or_default();
        let mut changed = false;
        for (i, e) in edits.iter().enumerate() {
            let Some(w) = buf.get_mut(4 * i..4 * i + 4) else {
                break;
            };
            if *e == Edit::Drop && w.iter().any(|&b| b != 0) {
                w.fill(0);
                changed = true;
            }
        }
        changed
    }
}

/// Replace the entries of the extent node in `buf` with `kept` (taken from the node itself,
/// so they fit), zero the unused slots up to its capacity and set `eh_entries`.
fn set_entries(buf: &mut [u8], kept: &[[u8; 12]]) {
    let max = usize::from(u16::from_le_bytes([buf[4], buf[5]]));
    let end = (12 + 12 * max).min(buf.len());
    let slots = (buf.len().saturating_sub(12) / 12).min(kept.len());
    for (i, e) in kept[..slots].iter().enumerate() {
        buf[12 + 12 * i..24 + 12 * i].copy_from_slice(e);
    }
    buf[(12 + 12 * slots).min(end)..end].fill(0);
    buf[2..4].copy_from_slice(&(slots as u16).to_le_bytes());
}

/// Whether the walk ran to the end or a visitor's `Stop` ended it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Walked {
    Done,
    Stopped,
}

/// One walk's settings and buffers. Build one per file (or reuse it: `reads` is not reset).
pub(crate) struct Walk<'r, R: BlockReader + ?Sized> {
    reader: &'r R,
    /// Valid physical blocks: `first..end` (`s_first_data_block..s_blocks_count`).
    first: u64,
    end: u64,
    /// Mapping blocks the walk may still read.
    pub reads: u64,
    /// With a seed (the inode's checksum seed), extent blocks' tail checksums are checked.
    pub csum_seed: Option<u32>,
    /// Report zero pointers of a block map as holes (`pblk` 0), as libext2fs can.
    pub holes: bool,
    /// Edit mode (see the module header): `enter` and `rewrite` around each block.
    edit: bool,
    /// The file's end in blocks (`i_size` rounded up), when the extent tree's last entries
    /// are bounded by it, as libext2fs bounds them: the last index entry of a node covers
    /// from its start to this end, counted modulo 2^32 as libext2fs's 32-bit length wraps.
    /// `None`: the last entries reach 2^32.
    pub eof: Option<u64>,
    /// One buffer per level, reused.
    bufs: Vec<Vec<u8>>,
}

impl<'r, R: BlockReader + ?Sized> Walk<'r, R> {
    /// A walk over `reader` whose valid blocks are `first..end`, reading at most `end`
    /// mapping blocks.
    pub fn new(reader: &'r R, first: u64, end: u64) -> Self {
        Walk {
            reader,
            first,
            end,
            reads: end,
            csum_seed: None,
            holes: false,
            edit: false,
            eof: None,
            bufs: Vec::new(),
        }
    }

    fn valid(&self, b: u64) -> bool {
        b >= self.first && b < self.end
    }

    /// Take the buffer of `level`, one block long, holding block `blk`; `None` (and the
    /// buffer back in place) if it cannot be read.
    fn read(&mut self, level: usize, blk: u64) -> Option<Vec<u8>> {
        if self.bufs.len() <= level {
            self.bufs.resize_with(level + 1, Vec::new);
        }
        let mut buf = std::mem::take(&mut self.bufs[level]);
        buf.resize(self.reader.block_size(), 0);
        if self.reader.read_block_into(blk, &mut buf) {
            Some(buf)
        } else {
            self.bufs[level] = buf;
            None
        }
    }

    fn give_back(&mut self, level: usize, buf: Vec<u8>) {
        self.bufs[level] = buf;
    }

    /// Walk a block map whose `i_block` is `iblock`.
    pub fn block_map<V: Visitor>(&mut self, iblock: &[u8; 60], v: &mut V) -> Walked {
        self.edit = false;
        let mut copy = *iblock;
        self.block_map_in(&mut copy, v)
    }

    /// Walk a block map in edit mode (holes reported): `v` may rewrite `iblock` and every
    /// indirect block.
    pub fn edit_block_map<V: Visitor>(&mut self, iblock: &mut [u8; 60], v: &mut V) -> Walked {
        self.edit = true;
        self.holes = true;
        self.block_map_in(iblock, v)
    }

    fn block_map_in<V: Visitor>(&mut self, iblock: &mut [u8; 60], v: &mut V) -> Walked {
        if self.edit {
            v.enter(None);
        }
        let walked = self.block_map_slots(iblock, v);
        if self.edit && walked == Walked::Done {
            v.rewrite(None, iblock);
        }
        walked
    }

    fn block_map_slots<V: Visitor>(&mut self, iblock: &[u8; 60], v: &mut V) -> Walked {
        let word = |i: usize| u64::from(u32::from_le_bytes(le4(iblock, i)));
        let mut span = Span::new(0, 12, 0);
        for i in 0..12 {
            if self.pointer(word(i), i as u64, &mut span, v) == Step::Stop {
                return Walked::Stopped;
            }
        }
        let per = (self.reader.block_size() / 4) as u64;
        let mut lblk = 12u64;
        for level in 1..=3u32 {
            let ind = Indirect {
                pblk: word(11 + level as usize),
                level,
                lblk,
            };
            if self.indirect(ind, v) == Step::Stop {
                return Walked::Stopped;
            }
            lblk = lblk.saturating_add(per.saturating_pow(level));
        }
        Walked::Done
    }

    /// One data pointer of a block map.
    fn pointer<V: Visitor>(&mut self, p: u64, lblk: u64, span: &mut Span, v: &mut V) -> Step {
        if p == 0 && !self.holes {
            return Step::Go;
        }
        let m = Mapping {
            lblk,
            pblk: p,
            len: 1,
            uninit: false,
        };
        if p != 0 && !self.valid(p) {
            return v.damage(Damage::DataOutOfRange(m));
        }
        v.mapping(m, span)
    }

    /// One indirect block and everything below it.
    fn indirect<V: Visitor>(&mut self, ind: Indirect, v: &mut V) -> Step {
        if ind.pblk == 0 {
            return if self.holes {
                v.indirect(ind)
            } else {
                Step::Go
            };
        }
        if !self.valid(ind.pblk) {
            return v.damage(Damage::IndirectOutOfRange(ind));
        }
        match v.indirect(ind) {
            Step::Go => {}
            s => return s,
        }
        let step = self.indirect_body(ind, v);
        v.leave(ind.pblk, ind.level);
        step
    }

    fn indirect_body<V: Visitor>(&mut self, ind: Indirect, v: &mut V) -> Step {
        if self.reads == 0 {
            return v.damage(Damage::ReadCap);
        }
        self.reads -= 1;
        let slot = ind.level as usize;
        let Some(mut buf) = self.read(slot, ind.pblk) else {
            return v.damage(Damage::IndirectUnreadable(ind));
        };
        if self.edit {
            v.enter(Some(ind.pblk));
        }
        let per = (buf.len() / 4) as u64;
        let span_len = per.saturating_pow(ind.level - 1);
        let hi = ind.lblk.saturating_add(span_len.saturating_mul(per));
        let mut span = Span::new(ind.lblk, hi, ind.level);
        let mut step = Step::Go;
        for i in 0..buf.len() / 4 {
            let p = u64::from(u32::from_le_bytes(le4(&buf, i)));
            let lblk = ind.lblk.saturating_add(i as u64 * span_len);
            step = if ind.level == 1 {
                self.pointer(p, lblk, &mut span, v)
            } else {
                let child = Indirect {
                    pblk: p,
                    level: ind.level - 1,
                    lblk,
                };
                self.indirect(child, v)
            };
            if step == Step::Stop {
                break;
            }
        }
        if self.edit && step != Step::Stop {
            v.rewrite(Some(ind.pblk), &mut buf);
        }
        self.give_back(slot, buf);
        if step == Step::Stop {
            Step::Stop
        } else {
            Step::Go
        }
    }

    /// Walk an extent tree whose root (`i_block`) is `root`.
    pub fn extents<V: Visitor>(&mut self, root: &[u8; 60], v: &mut V) -> Walked {
        self.edit = false;
        let mut copy = *root;
        self.extents_in(&mut copy, v)
    }

    /// Walk an extent tree in edit mode: `v` may rewrite the root and every node.
    pub fn edit_extents<V: Visitor>(&mut self, root: &mut [u8; 60], v: &mut V) -> Walked {
        self.edit = true;
        self.extents_in(root, v)
    }

    fn extents_in<V: Visitor>(&mut self, root: &mut [u8; 60], v: &mut V) -> Walked {
        // A root deeper than the format allows is still walked (as libext2fs does): it is
        // reported deeper than useful, and its children cannot match its depth.
        let node = match Node::parse_any_depth(root) {
            Ok(n) => n,
            Err(e) => {
                v.damage(Damage::BadRoot(e));
                return Walked::Done;
            }
        };
        let info = NodeInfo {
            pblk: None,
            depth: node.depth(),
            entries: node.len(),
            capacity: node.capacity(),
            level: 0,
        };
        let step = match v.node(info) {
            Step::Go => {
                let useful = extent::max_useful_depth(self.reader.block_size() as u32);
                let step = if node.depth() > useful {
                    v.damage(Damage::DeeperThanUseful {
                        depth: node.depth(),
                        useful,
                    })
                } else {
                    Step::Go
                };
                match step {
                    Step::Go => {
                        if self.edit {
                            v.enter(None);
                        }
                        let hi = self.eof.unwrap_or(1 << 32);
                        let step = self.entries(&node, node.depth(), Span::new(0, hi, 0), v);
                        if self.edit && step != Step::Stop {
                            v.rewrite(None, root);
                        }
                        step
                    }
                    s => s,
                }
            }
            s => s,
        };
        if step == Step::Stop {
            Walked::Stopped
        } else {
            Walked::Done
        }
    }

    /// The entries of one extent node at `depth` (the one its place implies; 0 is a leaf).
    fn entries<V: Visitor>(&mut self, node: &Node, depth: u16, mut span: Span, v: &mut V) -> Step {
        for i in 0..node.len() {
            let step = if depth == 0 {
                let e = node.extent(i);
                let (len, uninit) = e.len();
                let m = Mapping {
                    lblk: u64::from(e.ee_block.get()),
                    pblk: e.start(),
                    len: u64::from(len),
                    uninit,
                };
                if m.pblk == 0 || !self.valid(m.pblk) {
                    v.damage(Damage::DataOutOfRange(m))
                } else {
                    span.covers_next = covers_next(node, i, &m);
                    v.mapping(m, &mut span)
                }
            } else {
                let idx = node.index(i);
                let start = u64::from(idx.ei_block.get());
                let end = if i + 1 < node.len() {
                    u64::from(node.index(i + 1).ei_block.get())
                } else if self.eof.is_some() {
                    bounded_end(start, span.hi)
                } else {
                    span.hi
                };
                let index = Index {
                    child: idx.leaf(),
                    start,
                    end,
                    level: span.level + 1,
                };
                self.index(index, depth, &mut span, v)
            };
            if step == Step::Stop {
                return Step::Stop;
            }
        }
        Step::Go
    }

    /// One index entry of a node at `depth`, and the subtree below it.
    fn index<V: Visitor>(&mut self, idx: Index, depth: u16, span: &mut Span, v: &mut V) -> Step {
        if !self.valid(idx.child) {
            return v.damage(Damage::IndexOutOfRange(idx));
        }
        match v.index(idx, span) {
            Step::Go => {}
            s => return s,
        }
        let step = self.child(idx, depth, v);
        v.leave(idx.child, idx.level);
        step
    }

    fn child<V: Visitor>(&mut self, idx: Index, depth: u16, v: &mut V) -> Step {
        if idx.level > u32::from(MAX_DEPTH) {
            return v.damage(Damage::TooDeep(idx));
        }
        if self.reads == 0 {
            return v.damage(Damage::ReadCap);
        }
        self.reads -= 1;
        let slot = idx.level as usize;
        let Some(mut buf) = self.read(slot, idx.child) else {
            return v.damage(Damage::BadNode(idx, NodeError::Unreadable));
        };
        let step = self.child_node(idx, depth, &mut buf, v);
        self.give_back(slot, buf);
        step
    }

    fn child_node<V: Visitor>(
        &mut self,
        idx: Index,
        depth: u16,
        buf: &mut [u8],
        v: &mut V,
    ) -> Step {
        let node = match Node::parse_any_depth(buf) {
            Ok(n) => n,
            Err(e) => return v.damage(Damage::BadNode(idx, NodeError::Header(e))),
        };
        // The child's depth is the one its place in the tree implies, whatever its header
        // claims (libext2fs never reads a child's `eh_depth`; the kernel rejects a node whose
        // claim differs, so the claim is damage the visitor may report and walk past).
        let want = depth.saturating_sub(1);
        if node.depth() != want {
            let err = NodeError::Depth {
                want,
                got: node.depth(),
            };
            match v.damage(Damage::BadNode(idx, err)) {
                Step::Go => {}
                s => return s,
            }
        }
        if let Some(seed) = self.csum_seed {
            if !extent_csum_ok(seed, buf, node.header.eh_max.get())
                && v.damage(Damage::BadChecksum(idx)) == Step::Stop
            {
                return Step::Stop;
            }
        }
        if !node.is_empty() {
            let first = if want == 0 {
                u64::from(node.extent(0).ee_block.get())
            } else {
                u64::from(node.index(0).ei_block.get())
            };
            if first != idx.start {
                let d = Damage::IndexStart {
                    index: idx,
                    first,
                    depth,
                };
                if v.damage(d) == Step::Stop {
                    return Step::Stop;
                }
            }
        }
        let info = NodeInfo {
            pblk: Some(idx.child),
            depth: want,
            entries: node.len(),
            capacity: node.capacity(),
            level: idx.level,
        };
        match v.node(info) {
            Step::Go => {
                if self.edit {
                    v.enter(Some(idx.child));
                }
                let span = Span::new(idx.start, idx.end, idx.level);
                let step = self.entries(&node, want, span, v);
                if self.edit && step != Step::Stop {
                    v.rewrite(Some(idx.child), buf);
                }
                step
            }
            s => s,
        }
    }
}

impl<'r> Walk<'r, Fs> {
    /// A walk over the file system `fs`.
    pub fn over(fs: &'r Fs) -> Self {
        Self::new(fs, fs.geo.first_data_block, fs.geo.blocks_count)
    }

    /// A walk over `fs` of the extent tree of a file of `size` bytes: its last entries are
    /// bounded by the file's end (see [`Walk::eof`]).
    pub fn over_file(fs: &'r Fs, size: u64) -> Self {
        let mut w = Self::over(fs);
        w.eof = Some(size.div_ceil(fs.block_size() as u64));
        w
    }
}

/// The end (exclusive) of the last index entry of a node, starting at `start`, whose parent
/// allows up to `hi`: libext2fs gives it the 32-bit length `hi - start` (wrapping), and e2fsck
/// bounds the extents below it by the entry's last block, `start + length - 1`, unless that
/// is block 0 (or wraps below it): then they are not bounded (2^32 here), as in an empty
/// file whose preallocated extents all lie past its end.
pub(crate) fn bounded_end(start: u64, hi: u64) -> u64 {
    let len = hi.wrapping_sub(start) & 0xFFFF_FFFF;
    match (start + len).checked_sub(1) {
        Some(last) if last > 0 => last + 1,
        _ => 1 << 32,
    }
}

/// Whether a leaf extent ending at `end` (exclusive) beyond its parent's range is allowed
/// anyway, as e2fsck allows it: it lies past the end of the file (`eof` blocks, none for an
/// empty file) and is unwritten (preallocated), or the file is a verity file (whose Merkle
/// tree sits past the end).
pub(crate) fn past_eof_allowed(end: u64, eof: u64, unwritten: bool, verity: bool) -> bool {
    eof > 0 && end > eof && (unwritten || verity)
}

/// Whether the extent block in `buf` (with `eh_max` slots) carries the right tail checksum
/// for an inode whose checksum seed is `seed`. A block too small to hold the tail passes.
pub(crate) fn extent_csum_ok(seed: u32, buf: &[u8], eh_max: u16) -> bool {
    let off = extent::tail_offset(eh_max);
    if off + 4 > buf.len() {
        return true;
    }
    let want = ffsck_format::csum::ext4_crc32c(seed, &buf[..off]);
    want == u32::from_le_bytes(le4(&buf[off..], 0))
}

/// The `i`-th little-endian 32-bit word of `b`.
fn le4(b: &[u8], i: usize) -> [u8; 4] {
    [b[4 * i], b[4 * i + 1], b[4 * i + 2], b[4 * i + 3]]
}

/// [`Span::covers_next`] for leaf entry `i` of `node`, mapped as `m`.
fn covers_next(node: &Node, i: usize, m: &Mapping) -> bool {
    if m.len < 2 || i + 1 >= node.len() {
        return false;
    }
    let last = m.lblk + m.len - 1;
    let at = |j: usize| u64::from(node.extent(j).ee_block.get());
    // (When the entry run over is the node's last, e2fsck's walk of the node ends there.)
    i + 2 < node.len() && at(i + 1) <= last && (m.lblk..=last).contains(&at(i + 2))
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_last_index_entry_is_bounded_as_libext2fs_bounds_it() {
        use super::bounded_end;
        // A file of 100 blocks: the last entry covers up to its end.
        assert_eq!(bounded_end(40, 100), 100);
        // An empty file: the wrapped length runs to 2^32 (or is 0 from block 0): unbounded.
        assert_eq!(bounded_end(8, 0), 1 << 32);
        assert_eq!(bounded_end(0, 0), 1 << 32);
        // A last block of 0 does not bound either (start 0, one block; start 1, none).
        assert_eq!(bounded_end(0, 1), 1 << 32);
        assert_eq!(bounded_end(1, 1), 1 << 32);
        // An entry starting at the file's end bounds everything below it out.
        assert_eq!(bounded_end(5, 5), 5);
        // A start flipped past the end wraps as a 32-bit length.
        assert_eq!(bounded_end(200, 100), 100 + (1 << 32));
    }

    use super::*;

    const BS: usize = 1024;
    /// Blocks in the fake file system; block 0 is the superblock (`first` is 1).
    const BLOCKS: u64 = 64;

    /// A tiny file system: `BLOCKS` blocks of `BS` bytes in memory.
    struct Mem(Vec<u8>);

    impl Mem {
        fn new() -> Self {
            Mem(vec![0; BS * BLOCKS as usize])
        }
        fn block(&mut self, b: u64) -> &mut [u8] {
            &mut self.0[b as usize * BS..(b as usize + 1) * BS]
        }
        fn walk(&self) -> Walk<'_, Mem> {
            Walk::new(self, 1, BLOCKS)
        }
    }

    impl BlockReader for Mem {
        fn block_size(&self) -> usize {
            BS
        }
        fn read_block_into(&self, blk: u64, buf: &mut [u8]) -> bool {
            let at = blk as usize * BS;
            match self.0.get(at..at + BS) {
                Some(b) => {
                    buf.copy_from_slice(b);
                    true
                }
                None => false,
            }
        }
    }

    fn put32(b: &mut [u8], at: usize, v: u32) {
        b[at..at + 4].copy_from_slice(&v.to_le_bytes());
    }
    fn put16(b: &mut [u8], at: usize, v: u16) {
        b[at..at + 2].copy_from_slice(&v.to_le_bytes());
    }
    /// An extent header with `n` entries at `depth`, room for `max`.
    fn header(b: &mut [u8], n: u16, max: u16, depth: u16) {
        put16(b, 0, extent::EXTENT_MAGIC);
        put16(b, 2, n);
        put16(b, 4, max);
        put16(b, 6, depth);
    }
    fn leaf_entry(b: &mut [u8], i: usize, lblk: u32, len: u16, pblk: u32) {
        let at = 12 + 12 * i;
        put32(b, at, lblk);
        put16(b, at + 4, len);
        put16(b, at + 6, 0);
        put32(b, at + 8, pblk);
    }
    fn index_entry(b: &mut [u8], i: usize, lblk: u32, child: u32) {
        let at = 12 + 12 * i;
        put32(b, at, lblk);
        put32(b, at + 4, child);
        put16(b, at + 8, 0);
    }

    /// Entries an extent node of one block holds.
    const CAP: u16 = ((BS - 12) / 12) as u16;

    /// An inode's extent root of `depth` indexing `(lblk, child)` in order.
    fn index_root(depth: u16, children: &[(u32, u32)]) -> [u8; 60] {
        let mut root = [0u8; 60];
        header(&mut root, children.len() as u16, 4, depth);
        for (i, &(lblk, child)) in children.iter().enumerate() {
            index_entry(&mut root, i, lblk, child);
        }
        root
    }

    /// Records everything, answering `Go` (or `on_depth` for a node at the wrong depth).
    #[derive(Default)]
    struct Log {
        seen: Vec<String>,
        on_depth: Option<Step>,
    }

    impl Visitor for Log {
        fn mapping(&mut self, m: Mapping, _: &mut Span) -> Step {
            self.seen
                .push(format!("map {}->{} x{}", m.lblk, m.pblk, m.len));
            Step::Go
        }
        fn indirect(&mut self, i: Indirect) -> Step {
            self.seen
                .push(format!("ind{} {} @{}", i.level, i.pblk, i.lblk));
            Step::Go
        }
        fn node(&mut self, n: NodeInfo) -> Step {
            self.seen
                .push(format!("node {:?} d{} l{}", n.pblk, n.depth, n.level));
            Step::Go
        }
        fn damage(&mut self, d: Damage) -> Step {
            self.seen.push(format!("damage {d:?}"));
            match d {
                Damage::BadNode(_, NodeError::Depth { .. }) => self.on_depth.unwrap_or(Step::Skip),
                _ => Step::Go,
            }
        }
    }

    #[test]
    fn indirect_map_in_logical_order() {
        let mut m = Mem::new();
        let mut iblock = [0u8; 60];
        put32(&mut iblock, 0, 10); // lblk 0
        put32(&mut iblock, 4 * 11, 11); // lblk 11
        put32(&mut iblock, 4 * 12, 20); // single indirect
        put32(&mut iblock, 4 * 13, 21); // double indirect
        put32(m.block(20), 0, 30); // lblk 12
        put32(m.block(20), 4 * 3, 31); // lblk 15
        put32(m.block(21), 4, 22); // second single indirect below: lblk 12 + 256 + 256
        put32(m.block(22), 0, 32);
        let mut log = Log::default();
        assert_eq!(m.walk().block_map(&iblock, &mut log), Walked::Done);
        assert_eq!(
            log.seen,
            [
                "map 0->10 x1",
                "map 11->11 x1",
                "ind1 20 @12",
                "map 12->30 x1",
                "map 15->31 x1",
                "ind2 21 @268",
                "ind1 22 @524",
                "map 524->32 x1",
            ]
        );
    }

    #[test]
    fn two_level_extent_tree() {
        let mut m = Mem::new();
        let root = index_root(1, &[(0, 5), (100, 6)]);
        header(m.block(5), 1, CAP, 0);
        leaf_entry(m.block(5), 0, 0, 3, 40);
        header(m.block(6), 2, CAP, 0);
        leaf_entry(m.block(6), 0, 100, 1, 50);
        leaf_entry(m.block(6), 1, 101, 32768 + 2, 51); // unwritten, 2 blocks
        let mut log = Log::default();
        assert_eq!(m.walk().extents(&root, &mut log), Walked::Done);
        assert_eq!(
            log.seen,
            [
                "node None d1 l0",
                "node Some(5) d0 l1",
                "map 0->40 x3",
                "node Some(6) d0 l1",
                "map 100->50 x1",
                "map 101->51 x2",
            ]
        );
    }

    #[test]
    fn a_node_pointing_at_itself_ends() {
        let mut m = Mem::new();
        let root = index_root(2, &[(0, 7)]);
        header(m.block(7), 1, CAP, 1);
        index_entry(m.block(7), 0, 0, 7);
        // Strict: the loop is a node at the wrong depth, not walked.
        let mut log = Log::default();
        m.walk().extents(&root, &mut log);
        assert_eq!(log.seen.len(), 3, "{:?}", log.seen);
        assert!(
            log.seen[2].contains("Depth { want: 0, got: 1 }"),
            "{:?}",
            log.seen
        );
        // Lenient: the second visit is walked as the leaf its place makes it.
        let mut log = Log {
            on_depth: Some(Step::Go),
            ..Default::default()
        };
        assert_eq!(m.walk().extents(&root, &mut log), Walked::Done);
        assert_eq!(
            log.seen
                .iter()
                .filter(|s| s.starts_with("node Some(7)"))
                .collect::<Vec<_>>(),
            ["node Some(7) d1 l1", "node Some(7) d0 l2"]
        );
        // Under a root deeper than the format allows, the level cap ends it.
        let root = index_root(60, &[(0, 7)]);
        let mut log = Log {
            on_depth: Some(Step::Go),
            ..Default::default()
        };
        assert_eq!(m.walk().extents(&root, &mut log), Walked::Done);
        let nodes = log
            .seen
            .iter()
            .filter(|s| s.starts_with("node Some(7)"))
            .count();
        assert_eq!(nodes, usize::from(MAX_DEPTH), "{:?}", log.seen);
        assert!(
            log.seen.last().unwrap().contains("TooDeep"),
            "{:?}",
            log.seen
        );
    }

    #[test]
    fn a_child_is_walked_at_the_depth_its_parent_implies() {
        // A leaf whose header claims depth 189 (past the format's limit) and an index node
        // claiming to be a leaf: libext2fs never reads a child's depth, nor does the walk.
        let mut m = Mem::new();
        let root = index_root(2, &[(0, 5)]);
        header(m.block(5), 1, CAP, 0);
        index_entry(m.block(5), 0, 0, 6);
        header(m.block(6), 1, CAP, 189);
        leaf_entry(m.block(6), 0, 0, 4, 40);
        let mut log = Log {
            on_depth: Some(Step::Go),
            ..Default::default()
        };
        assert_eq!(m.walk().extents(&root, &mut log), Walked::Done);
        let damage = |want, got| {
            let idx = |child, level| Index {
                child,
                start: 0,
                end: 1 << 32,
                level,
            };
            let (child, level) = if want == 1 { (5, 1) } else { (6, 2) };
            format!(
                "damage {:?}",
                Damage::BadNode(idx(child, level), NodeError::Depth { want, got })
            )
        };
        assert_eq!(
            log.seen,
            [
                "node None d2 l0".to_string(),
                damage(1, 0),
                "node Some(5) d1 l1".to_string(),
                damage(0, 189),
                "node Some(6) d0 l2".to_string(),
                "map 0->40 x4".to_string(),
            ]
        );
    }

    #[test]
    fn shared_nodes_are_capped_by_reads() {
        let mut m = Mem::new();
        let root = index_root(3, &[(0, 8); 4]);
        // Every entry of node 8 (depth 2) and node 9 (depth 1) points at the next node:
        // 4 * 84 * 84 leaves without a cap.
        header(m.block(8), CAP, CAP, 2);
        header(m.block(9), CAP, CAP, 1);
        header(m.block(10), 0, CAP, 0);
        for i in 0..usize::from(CAP) {
            index_entry(m.block(8), i, 0, 9);
            index_entry(m.block(9), i, 0, 10);
        }
        let mut log = Log::default();
        let mut w = m.walk();
        w.reads = 100;
        w.extents(&root, &mut log);
        let reads = log
            .seen
            .iter()
            .filter(|s| s.starts_with("node Some"))
            .count();
        assert_eq!(reads, 100);
        assert_eq!(log.seen.last().unwrap(), "damage ReadCap");
    }

    #[test]
    fn a_tree_deeper_than_useful_is_damage() {
        let root = index_root(6, &[]);
        let m = Mem::new();
        let mut log = Log::default();
        m.walk().extents(&root, &mut log);
        let useful = extent::max_useful_depth(BS as u32);
        assert!(useful < 6);
        assert_eq!(
            log.seen[1],
            format!("damage {:?}", Damage::DeeperThanUseful { depth: 6, useful })
        );
    }

    #[test]
    fn out_of_range_pointers_are_damage_not_reads() {
        let mut m = Mem::new();
        let mut iblock = [0u8; 60];
        put32(&mut iblock, 0, BLOCKS as u32); // data past the end
        put32(&mut iblock, 4 * 12, 0xFFFF_FFF0); // indirect past the end
        let mut log = Log::default();
        m.walk().block_map(&iblock, &mut log);
        assert_eq!(log.seen.len(), 2, "{:?}", log.seen);
        assert!(log.seen[0].contains("DataOutOfRange"), "{:?}", log.seen);
        assert!(log.seen[1].contains("IndirectOutOfRange"), "{:?}", log.seen);

        let root = index_root(1, &[(0, 1000), (10, 12)]);
        header(m.block(12), 2, CAP, 0);
        leaf_entry(m.block(12), 0, 10, 1, 0); // start 0: below s_first_data_block
        leaf_entry(m.block(12), 1, 11, 1, 13);
        let mut log = Log::default();
        m.walk().extents(&root, &mut log);
        assert!(log.seen[1].contains("IndexOutOfRange"), "{:?}", log.seen);
        assert!(log.seen[3].contains("DataOutOfRange"), "{:?}", log.seen);
        assert_eq!(log.seen[4], "map 11->13 x1");
    }

    #[test]
    fn checksum_and_index_start_damage() {
        let mut m = Mem::new();
        let root = index_root(1, &[(5, 14)]);
        header(m.block(14), 1, CAP, 0);
        leaf_entry(m.block(14), 0, 7, 1, 20);
        let mut log = Log::default();
        let mut w = m.walk();
        w.csum_seed = Some(1);
        w.extents(&root, &mut log);
        assert!(log.seen[1].contains("BadChecksum"), "{:?}", log.seen);
        assert!(log.seen[2].contains("first: 7"), "{:?}", log.seen);
        // With the right tail, only the start disagrees.
        let off = extent::tail_offset(CAP);
        let c = ffsck_format::csum::ext4_crc32c(1, &m.block(14)[..off]);
        put32(m.block(14), off, c);
        let mut log = Log::default();
        let mut w = m.walk();
        w.csum_seed = Some(1);
        w.extents(&root, &mut log);
        assert!(
            !log.seen.iter().any(|s| s.contains("BadChecksum")),
            "{:?}",
            log.seen
        );
    }

    #[test]
    fn stop_ends_the_walk() {
        struct First(u32);
        impl Visitor for First {
            fn mapping(&mut self, _: Mapping, _: &mut Span) -> Step {
                self.0 += 1;
                Step::Stop
            }
        }
        let m = Mem::new();
        let mut iblock = [0u8; 60];
        put32(&mut iblock, 0, 10);
        put32(&mut iblock, 4, 11);
        let mut v = First(0);
        assert_eq!(m.walk().block_map(&iblock, &mut v), Walked::Stopped);
        assert_eq!(v.0, 1);
    }

    /// Edit mode: drops the mappings at or past `cut`, records each block rewritten.
    struct Cut {
        cut: u64,
        edits: Edits,
        extents: bool,
        written: Vec<(Option<u64>, Vec<u8>)>,
    }

    impl Visitor for Cut {
        fn mapping(&mut self, m: Mapping, _: &mut Span) -> Step {
            let drop = m.pblk != 0 && m.lblk >= self.cut;
            self.edits.push(if drop { Edit::Drop } else { Edit::Keep });
            Step::Go
        }
        fn indirect(&mut self, _: Indirect) -> Step {
            self.edits.push(Edit::Keep);
            Step::Go
        }
        fn index(&mut self, _: Index, _: &mut Span) -> Step {
            self.edits.push(Edit::Keep);
            Step::Go
        }
        fn enter(&mut self, _: Option<u64>) {
            self.edits.enter();
        }
        fn rewrite(&mut self, pblk: Option<u64>, buf: &mut [u8]) {
            let changed = if self.extents {
                self.edits.apply_node(buf)
            } else {
                self.edits.apply_pointers(buf)
            };
            if changed {
                self.written.push((pblk, buf.to_vec()));
            }
        }
    }

    #[test]
    fn edit_mode_rewrites_a_block_map_bottom_up() {
        let mut m = Mem::new();
        let mut iblock = [0u8; 60];
        put32(&mut iblock, 0, 10); // lblk 0
        put32(&mut iblock, 4 * 11, 11); // lblk 11: cut
        put32(&mut iblock, 4 * 12, 20); // single indirect
        put32(m.block(20), 0, 30); // lblk 12: cut
        put32(m.block(20), 4 * 3, 31); // lblk 15: cut
        let mut v = Cut {
            cut: 11,
            edits: Edits::default(),
            extents: false,
            written: Vec::new(),
        };
        assert_eq!(m.walk().edit_block_map(&mut iblock, &mut v), Walked::Done);
        // The indirect block first (emptied), then the inode's pointers.
        assert_eq!(v.written.len(), 2, "{:?}", v.written.iter().map(|w| w.0));
        assert_eq!(v.written[0].0, Some(20));
        assert!(v.written[0].1.iter().all(|&b| b == 0));
        assert_eq!(v.written[1].0, None);
        assert_eq!(&iblock[0..4], &10u32.to_le_bytes());
        assert_eq!(&iblock[44..48], &[0; 4]);
        assert_eq!(
            &iblock[48..52],
            &20u32.to_le_bytes(),
            "the indirect pointer is kept"
        );
    }

    #[test]
    fn edit_mode_rewrites_extent_nodes() {
        let mut m = Mem::new();
        let mut root = index_root(1, &[(0, 5), (100, 6)]);
        header(m.block(5), 1, CAP, 0);
        leaf_entry(m.block(5), 0, 0, 3, 40);
        header(m.block(6), 2, CAP, 0);
        leaf_entry(m.block(6), 0, 100, 1, 50);
        leaf_entry(m.block(6), 1, 101, 2, 51);
        let mut v = Cut {
            cut: 101,
            edits: Edits::default(),
            extents: true,
            written: Vec::new(),
        };
        assert_eq!(m.walk().edit_extents(&mut root, &mut v), Walked::Done);
        // Only node 6 changes: one entry left, the dropped slot zeroed.
        assert_eq!(v.written.len(), 1);
        let (at, buf) = &v.written[0];
        assert_eq!(*at, Some(6));
        assert_eq!(u16::from_le_bytes([buf[2], buf[3]]), 1);
        assert_eq!(&buf[12..16], &100u32.to_le_bytes());
        assert!(buf[24..36].iter().all(|&b| b == 0));
        assert_eq!(
            u16::from_le_bytes([root[2], root[3]]),
            2,
            "the root is untouched"
        );
    }
}
