//! Truncate one inode to its `i_size`, as the kernel and e2fsck do for an orphan that still
//! has links: block pointers (block maps) and extents (extent trees) mapping logical blocks at
//! or past `ceil(i_size / block size)` are dropped, an extent straddling the end is shortened,
//! mapping blocks left with nothing below them are dropped, and `i_blocks` is recomputed from
//! what is still mapped. Freed blocks are returned to the bitmaps by the allocation rebuild of
//! the rounds that follow. Also: dropping one reference to an extended-attribute block.
//!
//! Every walk is bounded: the mapping blocks read are capped by the file-system size, and
//! depths by the format (3 indirect levels, 5 extent levels).

use super::clone::write_node;
use super::inode::edit;
use crate::ext4::blocks::{Damage, Edit, Edits, Index, Indirect, Mapping, Span, Step};
use crate::ext4::blocks::{Visitor, Walk};
use crate::filemap::{self, Visit};
use crate::fs::Fs;
use crate::pass0::Pass0Facts;
use ffsck_format::extent::{Node, INIT_MAX_LEN, MAX_DEPTH};
use ffsck_format::inode::{flags as iflags, RawInode};
use ffsck_format::xattr::{block_checksum, XATTR_MAGIC};
use ffsck_io::Device;

/// Truncate inode `ino` to its `i_size` (which must be non-zero) and fix its `i_blocks`.
pub fn to_size(p0: &Pass0Facts, dev: &dyn Device, ino: u32) {
    let fs = &p0.fs;
    let Some(raw) = fs.read_inode(ino) else {
        return;
    };
    let inode = RawInode::parse(&raw);
    let bs = fs.block_size() as u64;
    let keep = inode.size().div_ceil(bs);
    let extents = inode.flags() & iflags::EXTENTS != 0;
    let mut iblock = inode.block_bytes();
    let mut cut = Cut {
        fs,
        dev,
        seed: 0,
        keep,
        extents,
        edits: Edits::default(),
    };
    if extents {
        if fs.has_metadata_csum() {
            cut.seed = ffsck_format::csum::inode_seed(fs.csum_seed, ino, inode.i_generation.get());
        }
        let Ok(root) = Node::parse(&iblock) else {
            return;
        };
        if root.depth() > MAX_DEPTH {
            return;
        }
        Walk::over(fs).edit_extents(&mut iblock, &mut cut);
        if iblock[2] == 0 && iblock[3] == 0 {
            iblock[6] = 0;
            iblock[7] = 0;
        }
    } else {
        Walk::over(fs).edit_block_map(&mut iblock, &mut cut);
    }
    // What is still mapped, mapping blocks included.
    let mut count = 0u64;
    let cap = fs.geo.blocks_count;
    filemap::walk(fs, &iblock, extents, false, &mut |v| {
        match v {
            Visit::Data { pblk, .. } | Visit::Meta { pblk } if pblk != 0 => count += 1,
            _ => {}
        }
        count <= cap
    });
    if inode.file_acl(p0.fs.geo.sixty_four_bit()) != 0 {
        count += 1;
    }
    let huge = inode.flags() & iflags::HUGE_FILE != 0;
    let units = if huge { count } else { count * (bs / 512) };
    edit(p0, dev, ino, |n| {
        n.set_block_bytes(&iblock);
        n.i_blocks_lo.set(units as u32);
        n.l_i_blocks_high.set((units >> 32) as u16);
    });
}

/// The truncation as an edit of the mapping: entries and pointers mapping logical blocks at
/// or past `keep` are dropped (with what is below them), an extent straddling `keep` is
/// shortened, and an index entry whose child is left empty by the cut is dropped.
struct Cut<'a> {
    fs: &'a Fs,
    dev: &'a dyn Device,
    seed: u32,
    keep: u64,
    /// An extent tree (else a block map).
    extents: bool,
    edits: Edits,
}

impl Cut<'_> {
    /// A data run (an extent, or one pointer of a block map): dropped, shortened or kept.
    fn run(&mut self, m: Mapping) -> Step {
        let e = if m.lblk >= self.keep {
            Edit::Drop
        } else if m.lblk + m.len > self.keep {
            let uninit = if m.uninit { INIT_MAX_LEN } else { 0 };
            Edit::Set {
                lblk: None,
                len: Some((self.keep - m.lblk) as u16 + uninit),
            }
        } else {
            Edit::Keep
        };
        self.edits.push(e);
        Step::Go
    }
    /// A mapping block starting at logical block `lblk`: dropped (and not walked) past the
    /// cut.
    fn below(&mut self, lblk: u64) -> Step {
        if lblk >= self.keep {
            self.edits.push(Edit::Drop);
            Step::Skip
        } else {
            self.edits.push(Edit::Keep);
            Step::Go
        }
    }
}

impl Visitor for Cut<'_> {
    fn mapping(&mut self, m: Mapping, _: &mut Span) -> Step {
        self.run(m)
    }
    fn indirect(&mut self, ind: Indirect) -> Step {
        self.below(ind.lblk)
    }
    fn index(&mut self, idx: Index, _: &mut Span) -> Step {
        self.below(idx.start)
    }
    fn damage(&mut self, d: Damage) -> Step {
        match d {
            Damage::DataOutOfRange(m) => self.run(m),
            Damage::IndirectOutOfRange(Indirect { lblk, .. })
            | Damage::IndexOutOfRange(Index { start: lblk, .. }) => {
                self.below(lblk);
                Step::Skip
            }
            // A mapping block that cannot be walked is kept as it is.
            Damage::IndexStart { .. } | Damage::DeeperThanUseful { .. } => Step::Go,
            _ => Step::Skip,
        }
    }
    fn enter(&mut self, _: Option<u64>) {
        self.edits.enter();
    }
    fn rewrite(&mut self, pblk: Option<u64>, buf: &mut [u8]) {
        if !self.extents {
            if self.edits.apply_pointers(buf) {
                if let Some(b) = pblk {
                    let _ = self
                        .dev
                        .write_at(buf, b * u64::from(self.fs.geo.block_size));
                }
            }
            return;
        }
        if !self.edits.apply_node(buf) {
            return;
        }
        let Some(child) = pblk else {
            return;
        };
        if u16::from_le_bytes([buf[2], buf[3]]) == 0 {
            if let Some(e) = self.edits.last() {
                *e = Edit::Drop;
            }
        } else {
            write_node(self.fs, self.dev, self.seed, child, buf);
        }
    }
}

/// Drop one reference to the extended-attribute block `blk` (a released inode held it). At
/// zero references the block is no longer used and the allocation rebuild frees it.
pub fn drop_xattr_ref(fs: &Fs, dev: &dyn Device, blk: u64) {
    if !fs.geo.is_valid_block(blk) {
        return;
    }
    let Some(mut buf) = fs.read_block(blk) else {
        return;
    };
    if buf.len() < 0x20 || u32::from_le_bytes([buf[0], buf[1], buf[2], buf[3]]) != XATTR_MAGIC {
        return;
    }
    let refs = u32::from_le_bytes([buf[4], buf[5], buf[6], buf[7]]);
    if refs <= 1 {
        return;
    }
    buf[4..8].copy_from_slice(&(refs - 1).to_le_bytes());
    if fs.has_metadata_csum() {
        let c = block_checksum(&buf, fs.csum_seed, blk);
        buf[0x10..0x14].copy_from_slice(&c.to_le_bytes());
    }
    let _ = dev.write_at(&buf, blk * u64::from(fs.geo.block_size));
}
