//! Fixes of single directory entries, as e2fsck's pass 2 and 3 make them: clear an entry
//! (inode 0) that names a bad, unused or forbidden inode, set or clear its file type, replace
//! the characters a name may not hold, point
//! `..` at the right parent, and recompute the leaf checksum of every block touched.
//!
//! Each fix finds its entry from the finding (`blk` = physical block, `num2` = offset, `ino` =
//! the inode the entry names) and does nothing unless the entry is still there as found.

use super::inode::edit_raw;
use super::Dirs;
use crate::pass0::Pass0Facts;
use crate::problem::{Fixer, Problem as P};
use crate::report::Finding;
use ffsck_format::dir::{self as fdir, header_at};
use ffsck_io::Device;

/// Entry fixes that remove a reference (clear the entry).
pub fn clears(p: P) -> bool {
    matches!(
        p,
        P::P2_BAD_INO
            | P::P2_BB_INODE
            | P::P2_UNUSED_INODE
            | P::P2_CLEARED_INODE_ENTRY
            | P::P2_LINK_DOT
            | P::P2_LINK_ROOT
            | P::P2_DUP_DOT
            | P::P2_DUP_DOT_DOT
            | P::P2_BAD_ENCRYPTED_NAME
            | P::P2_UNENCRYPTED_FILE
            | P::P2_INCONSISTENT_ENCRYPTION_POLICY
    )
}

/// Apply the entry fixes among `fixes`, in order.
pub fn apply(p0: &Pass0Facts, dev: &dyn Device, dirs: &Dirs, fixes: &[&Finding]) {
    for f in fixes.iter().filter(|f| f.problem.fixed_by(Fixer::Dirent)) {
        let c = &f.ctx;
        match f.problem {
            P::P2_LEAF_NODE_ONLY_CSUM_INVALID => {
                edit_block(p0, dev, c.dir, c.blk, |_| true);
            }
            P::P3_BAD_DOT_DOT => {
                // `..` is the second entry of block 0; the right parent is `ino2`.
                let (dir, was, want) = (c.ino, c.dir, c.ino2);
                let Some(pblk) = dirs.block(dir, 0) else {
                    continue;
                };
                if want == 0 {
                    continue;
                }
                edit_block(p0, dev, dir, pblk, |buf| {
                    let bs = buf.len() as u32;
                    let Some(first) = header_at(buf, 0, bs) else {
                        return false;
                    };
                    let off = first.rec_len as usize;
                    match header_at(buf, off, bs) {
                        Some(h) if h.inode == was && h.name_len == 2 => {
                            put_u32(buf, off, want);
                            true
                        }
                        _ => false,
                    }
                });
            }
            p => {
                // The entry's offset (a wrong file type names the right one in `num2`).
                let off = match p {
                    P::P2_SET_FILETYPE | P::P2_BAD_FILETYPE => c.blk2,
                    _ => c.num2,
                };
                let (off, ino) = (off as usize, c.ino);
                // A filetype finding carries the type the entry should have in `num2`.
                let ft = match p {
                    P::P2_CLEAR_FILETYPE => 0,
                    _ => u8::try_from(c.num2).unwrap_or(0),
                };
                let change = |buf: &mut [u8], first_block: bool| {
                    let Some(h) = header_at(buf, off, buf.len() as u32) else {
                        return false;
                    };
                    if h.inode != ino || off + 8 > buf.len() {
                        return false;
                    }
                    if clears(p) {
                        // '.' keeps its place. A '..' naming a bad inode is emptied (inode
                        // 0) in place, as e2fsck does: pass 3 then reconnects the directory
                        // and points its '..' at the new parent.
                        if first_block && off == 0 {
                            return false;
                        }
                        put_u32(buf, off, 0);
                        return true;
                    }
                    if p == P::P2_BAD_ENCODED_NAME {
                        // From the first byte that is not UTF-8 to the end: dots, as e2fsck.
                        let end = (off + 8 + usize::from(h.name_len)).min(buf.len());
                        let name = &buf[off + 8..end];
                        let Err(e) = std::str::from_utf8(name) else {
                            return false;
                        };
                        let from = off + 8 + e.valid_up_to();
                        for c in &mut buf[from..end] {
                            if *c == 0 {
                                break;
                            }
                            *c = b'.';
                        }
                        return true;
                    }
                    if p == P::P2_BAD_NAME {
                        // `/` and NUL cannot be in a name: they become `.`, as e2fsck has it.
                        let end = (off + 8 + usize::from(h.name_len)).min(buf.len());
                        for c in &mut buf[off + 8..end] {
                            if *c == b'/' || *c == 0 {
                                *c = b'.';
                            }
                        }
                        return true;
                    }
                    buf[off + 7] = ft;
                    true
                };
                if c.blk == 0 {
                    // An inline directory: block 0 is `i_block` after the parent, block 1 the
                    // `system.data` value. A file type finding carries the types in `num`
                    // and `num2`, not the block: its entry is the one naming `ino` at its
                    // offset in either.
                    let blocks: &[u64] = match p {
                        P::P2_SET_FILETYPE | P::P2_BAD_FILETYPE => &[0, 1],
                        _ => std::slice::from_ref(&c.num),
                    };
                    edit_raw(p0, dev, c.dir, |raw| {
                        for &b in blocks {
                            let area = match b {
                                0 => Some(0x28 + 4..0x28 + 60),
                                _ => crate::ext4::inode::inline_data_range(raw),
                            };
                            if area.is_some_and(|r| change(&mut raw[r], false)) {
                                break;
                            }
                        }
                    });
                    continue;
                }
                edit_block(p0, dev, c.dir, c.blk, |buf| change(buf, c.num == 0));
            }
        }
    }
}

fn put_u32(buf: &mut [u8], off: usize, v: u32) {
    if let Some(s) = buf.get_mut(off..off + 4) {
        s.copy_from_slice(&v.to_le_bytes());
    }
}

/// Read directory block `pblk` of `dir`, let `change` edit it (returning whether it did),
/// recompute the leaf checksum tail if the block has one, and write it back.
pub fn edit_block(
    p0: &Pass0Facts,
    dev: &dyn Device,
    dir: u32,
    pblk: u64,
    change: impl FnOnce(&mut Vec<u8>) -> bool,
) -> bool {
    let fs = &p0.fs;
    if pblk == 0 || pblk >= fs.geo.blocks_count {
        return false;
    }
    let bs = fs.block_size();
    let mut buf = vec![0u8; bs];
    if dev.read_at(&mut buf, pblk * bs as u64).is_err() {
        return false;
    }
    if !change(&mut buf) {
        return false;
    }
    set_block_csum(p0, dev, dir, &mut buf);
    dev.write_at(&buf, pblk * bs as u64).is_ok()
}

/// Recompute the checksum of an edited directory block of `dir`: a leaf's tail, or the dx
/// tail of an htree root whose `.` or `..` changed (or of an interior node).
fn set_block_csum(p0: &Pass0Facts, dev: &dyn Device, dir: u32, buf: &mut [u8]) {
    if fdir::has_tail(buf) {
        return set_leaf_csum(p0, dev, dir, buf);
    }
    if !p0.fs.has_metadata_csum() {
        return;
    }
    if let (Some(co), Some(seed)) = (
        ffsck_format::verify::dx_count_offset(buf),
        crate::ext4::inode::seed_from(&p0.fs, dev, dir),
    ) {
        ffsck_format::verify::set_dx_checksum(buf, co, seed);
    }
}

/// Recompute the checksum tail of a leaf block of `dir` (no-op without `metadata_csum` or a tail).
pub fn set_leaf_csum(p0: &Pass0Facts, dev: &dyn Device, dir: u32, buf: &mut [u8]) {
    let fs = &p0.fs;
    if !fs.has_metadata_csum() || !fdir::has_tail(buf) {
        return;
    }
    let Some(seed) = crate::ext4::inode::seed_from(fs, dev, dir) else {
        return;
    };
    let c = fdir::leaf_checksum(buf, seed);
    let n = buf.len();
    buf[n - 4..].copy_from_slice(&c.to_le_bytes());
}
