//! Truncate one inode to its `i_size`, as the kernel and e2fsck do for an orphan that still
//! has links: block pointers (block maps) and extents (extent trees) mapping logical blocks at
//! or past `ceil(i_size / block size)` are dropped, an extent straddling the end is shortened,
//! mapping blocks left with nothing below them are dropped, and `i_blocks` is recomputed from
//! what is still mapped. Freed blocks are returned to the bitmaps by the allocation rebuild of
//! the rounds that follow. Also: dropping one reference to an extended-attribute block.
//!
//! Every walk is bounded: the mapping blocks read are capped by the file-system size, and
//! depths by the format (3 indirect levels, 5 extent levels).

use super::blockmap::{prune_indirect, set_entries, word};
use super::clone::write_node;
use super::inode::edit;
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
    let mut reads = fs.geo.blocks_count;
    if extents {
        let seed = if fs.has_metadata_csum() {
            ffsck_format::csum::inode_seed(fs.csum_seed, ino, inode.i_generation.get())
        } else {
            0
        };
        let Ok(root) = Node::parse(&iblock) else {
            return;
        };
        let depth = root.depth();
        if depth > MAX_DEPTH {
            return;
        }
        let mut t = Ext {
            fs,
            dev,
            seed,
            keep,
            reads: &mut reads,
        };
        t.node(&mut iblock, depth);
        if iblock[2] == 0 && iblock[3] == 0 {
            iblock[6] = 0;
            iblock[7] = 0;
        }
    } else {
        let per = bs / 4;
        for i in 0..12 {
            if i as u64 >= keep {
                iblock[4 * i..4 * i + 4].fill(0);
            }
        }
        let mut base = 12u64;
        for level in 1..=3u32 {
            let i = 11 + level as usize;
            let b = word(&iblock, i);
            if base >= keep {
                iblock[4 * i..4 * i + 4].fill(0);
            } else if b != 0 && fs.geo.is_valid_block(b) {
                prune_indirect(
                    fs,
                    dev,
                    b,
                    level,
                    base,
                    &|lblk, _, _| lblk >= keep,
                    &mut reads,
                );
            }
            base = base.saturating_add(per.saturating_pow(level));
        }
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
    if inode.file_acl() != 0 {
        count += 1;
    }
    let huge = inode.flags() & iflags::HUGE_FILE != 0;
    let units = if huge { count } else { count * (bs / 512) };
    edit(p0, dev, ino, |n| {
        for (k, w) in n.i_block.iter_mut().enumerate() {
            w.set(word(&iblock, k) as u32);
        }
        n.i_blocks_lo.set(units as u32);
        n.l_i_blocks_high.set((units >> 32) as u16);
    });
}

struct Ext<'a> {
    fs: &'a Fs,
    dev: &'a dyn Device,
    seed: u32,
    keep: u64,
    reads: &'a mut u64,
}

impl Ext<'_> {
    /// Drop or shorten the entries of the node in `buf` (at `depth`) past `keep`. Returns
    /// whether `buf` changed.
    fn node(&mut self, buf: &mut [u8], depth: u16) -> bool {
        let (leaf, n) = match Node::parse(buf) {
            Ok(node) => (node.is_leaf(), node.len()),
            Err(_) => return false,
        };
        let mut kept: Vec<[u8; 12]> = Vec::with_capacity(n);
        let mut changed = false;
        for i in 0..n {
            let mut e = [0u8; 12];
            e.copy_from_slice(&buf[12 + 12 * i..24 + 12 * i]);
            let lblk = u64::from(u32::from_le_bytes([e[0], e[1], e[2], e[3]]));
            if lblk >= self.keep {
                changed = true;
                continue;
            }
            if leaf {
                let raw_len = u16::from_le_bytes([e[4], e[5]]);
                let (len, uninit) = if raw_len > INIT_MAX_LEN {
                    (raw_len - INIT_MAX_LEN, INIT_MAX_LEN)
                } else {
                    (raw_len, 0)
                };
                if lblk + u64::from(len) > self.keep {
                    let new = (self.keep - lblk) as u16 + uninit;
                    e[4..6].copy_from_slice(&new.to_le_bytes());
                    changed = true;
                }
                kept.push(e);
            } else {
                let child = u64::from(u32::from_le_bytes([e[4], e[5], e[6], e[7]]))
                    | (u64::from(u16::from_le_bytes([e[8], e[9]])) << 32);
                if depth == 0 || *self.reads == 0 || !self.fs.geo.is_valid_block(child) {
                    kept.push(e);
                    continue;
                }
                *self.reads -= 1;
                let Some(mut cbuf) = self.fs.read_block(child) else {
                    kept.push(e);
                    continue;
                };
                match Node::parse(&cbuf) {
                    Ok(c) if c.depth() == depth - 1 => {}
                    _ => {
                        kept.push(e);
                        continue;
                    }
                }
                if self.node(&mut cbuf, depth - 1) {
                    if u16::from_le_bytes([cbuf[2], cbuf[3]]) == 0 {
                        changed = true;
                        continue;
                    }
                    write_node(self.fs, self.dev, self.seed, child, &mut cbuf);
                }
                kept.push(e);
            }
        }
        if changed {
            set_entries(buf, &kept);
        }
        changed
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
