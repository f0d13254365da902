//! Extent trees deeper than their block size needs (`P1_EXTENT_BAD_MAX_DEPTH`) are rebuilt as
//! shallow as their extents allow: up to four extents go into the inode itself; up to four
//! leaf blocks' worth go into leaves under the inode, reusing the old node blocks. The node
//! blocks no longer used, `i_blocks` and the bitmaps are left to the next round's fixes. A
//! tree that would need new blocks is left as it is.

use super::clone::write_node;
use super::inode::{edit, read_inode};
use crate::fs::Fs;
use crate::pass0::Pass0Facts;
use crate::problem::Fixer;
use crate::report::Finding;
use ffsck_format::extent::{HeaderError, Node, EXTENT_MAGIC, MAX_DEPTH};
use ffsck_io::Device;

/// Entries an extent root in the inode holds.
const ROOT_ENTRIES: usize = 4;

pub fn apply(p0: &Pass0Facts, dev: &dyn Device, fixes: &[&Finding]) {
    let fs = &p0.fs;
    for f in fixes
        .iter()
        .filter(|f| f.problem.fixed_by(Fixer::ExtentTree))
    {
        let ino = f.ctx.ino;
        let Some(inode) = read_inode(p0, dev, ino) else {
            continue;
        };
        let root = inode.block_bytes();
        if matches!(Node::parse(&root), Err(HeaderError::BadDepth)) {
            // A root deeper than any tree can be: none of its entries can be followed
            // (e2fsck clears each as an invalid extent). It becomes an empty leaf; the next
            // round counts `i_blocks` and frees the blocks.
            edit(p0, dev, ino, |n| {
                n.i_block.iter_mut().for_each(|w| w.set(0));
                // Magic, no entries; room for four, depth 0.
                n.i_block[0].set(u32::from(EXTENT_MAGIC));
                n.i_block[1].set(ROOT_ENTRIES as u32);
            });
            continue;
        }
        let mut leaves = Vec::new();
        let mut nodes = Vec::new();
        let mut reads = fs.geo.blocks_count;
        if !collect(fs, &root, MAX_DEPTH, &mut leaves, &mut nodes, &mut reads) {
            continue;
        }
        nodes.sort_unstable();
        nodes.dedup();
        let seed = if fs.has_metadata_csum() {
            ffsck_format::csum::inode_seed(fs.csum_seed, ino, inode.i_generation.get())
        } else {
            0
        };
        let Some(new_root) = rebuild(fs, dev, seed, &leaves, &nodes) else {
            continue;
        };
        edit(p0, dev, ino, |n| {
            for (k, w) in n.i_block.iter_mut().enumerate() {
                let b = &new_root[4 * k..4 * k + 4];
                w.set(u32::from_le_bytes([b[0], b[1], b[2], b[3]]));
            }
        });
    }
}

/// Gather the leaf entries (in tree order) and node blocks under `buf`, a node expected no
/// deeper than `budget`. False when the tree is not sound enough to rebuild.
fn collect(
    fs: &Fs,
    buf: &[u8],
    budget: u16,
    leaves: &mut Vec<[u8; 12]>,
    nodes: &mut Vec<u64>,
    reads: &mut u64,
) -> bool {
    // A node left without entries (its bad ones removed) holds nothing, whatever its depth.
    let Ok(node) = Node::parse_any_depth(buf) else {
        return false;
    };
    if node.is_empty() {
        return true;
    }
    if node.depth() > budget {
        return false;
    }
    let entry = |i: usize| {
        let mut e = [0u8; 12];
        e.copy_from_slice(&buf[12 + 12 * i..24 + 12 * i]);
        e
    };
    if node.is_leaf() {
        leaves.extend((0..node.len()).map(entry));
        return true;
    }
    for i in 0..node.len() {
        let child = node.index(i).leaf();
        if *reads == 0 || !fs.geo.is_valid_block(child) {
            return false;
        }
        *reads -= 1;
        let Some(cbuf) = fs.read_block(child) else {
            return false;
        };
        if Node::parse(&cbuf).map_or(true, |c| c.depth() + 1 != node.depth()) {
            return false;
        }
        nodes.push(child);
        if !collect(fs, &cbuf, node.depth() - 1, leaves, nodes, reads) {
            return false;
        }
    }
    true
}

/// A node header: magic, entries, capacity, depth (generation 0).
fn header(buf: &mut [u8], entries: usize, max: usize, depth: u16) {
    buf[0..2].copy_from_slice(&EXTENT_MAGIC.to_le_bytes());
    buf[2..4].copy_from_slice(&(entries as u16).to_le_bytes());
    buf[4..6].copy_from_slice(&(max as u16).to_le_bytes());
    buf[6..8].copy_from_slice(&depth.to_le_bytes());
    buf[8..12].fill(0);
}

/// Write the shallowest tree for `leaves`, reusing `nodes` for leaf blocks; returns the new
/// in-inode root, or `None` when more blocks would be needed.
pub(super) fn rebuild(
    fs: &Fs,
    dev: &dyn Device,
    seed: u32,
    leaves: &[[u8; 12]],
    nodes: &[u64],
) -> Option<[u8; 60]> {
    let mut root = [0u8; 60];
    if leaves.len() <= ROOT_ENTRIES {
        header(&mut root, leaves.len(), ROOT_ENTRIES, 0);
        for (i, e) in leaves.iter().enumerate() {
            root[12 + 12 * i..24 + 12 * i].copy_from_slice(e);
        }
        return Some(root);
    }
    let bs = fs.block_size();
    let per_leaf = (bs - 12) / 12;
    // Room for a checksum tail after the entries.
    let per_leaf = if fs.has_metadata_csum() {
        per_leaf.min((bs - 12 - 4) / 12)
    } else {
        per_leaf
    };
    let chunks: Vec<&[[u8; 12]]> = leaves.chunks(per_leaf).collect();
    if chunks.len() > ROOT_ENTRIES || chunks.len() > nodes.len() {
        return None;
    }
    header(&mut root, chunks.len(), ROOT_ENTRIES, 1);
    for (i, (chunk, &blk)) in chunks.iter().zip(nodes).enumerate() {
        let mut buf = vec![0u8; bs];
        header(&mut buf, chunk.len(), (bs - 12) / 12, 0);
        for (j, e) in chunk.iter().enumerate() {
            buf[12 + 12 * j..24 + 12 * j].copy_from_slice(e);
        }
        write_node(fs, dev, seed, blk, &mut buf);
        // Index entry: first logical block, then the leaf's block number (low 32, high 16).
        let idx = &mut root[12 + 12 * i..24 + 12 * i];
        idx[0..4].copy_from_slice(&chunk[0][0..4]);
        idx[4..8].copy_from_slice(&(blk as u32).to_le_bytes());
        idx[8..10].copy_from_slice(&((blk >> 32) as u16).to_le_bytes());
        idx[10..12].fill(0);
    }
    Some(root)
}
