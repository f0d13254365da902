//! Pass 1's inode-table scan: read one group's table in chunks, judge each inode's table
//! block (garbage or not) and hand every inode to the inode checks.

use super::inode::{check_inode, Judged};
use super::schedule::GroupBits;
use super::{GroupOut, Scan};
use crate::fs::Fs;
use crate::pass0::GroupState;
use ffsck_format::dir::ft;
use ffsck_format::ino;
use ffsck_format::inode::{flags as iflags, FileType, RawInode};
use ffsck_format::inode::{inode_checksum, inode_checksums_x3};

/// The bytes of group `g`'s inode table that its scan reads: `(offset, len)` of the used
/// part (by `bg_itable_unused` when the descriptor is trusted), whole blocks; `None` when
/// the scan reads nothing.
pub(super) fn table_range(fs: &Fs, g: u32, st: GroupState) -> Option<(u64, u64)> {
    if !st.inode_table_ok {
        return None;
    }
    let n = u64::from(fs.scannable_inodes(g, st.scan_by_desc));
    if n == 0 {
        return None;
    }
    let bs = u64::from(fs.geo.block_size);
    let blocks = (n * u64::from(fs.geo.inode_size)).div_ceil(bs);
    let off = fs.groups.get(g as usize)?.inode_table().checked_mul(bs)?;
    Some((off, blocks.checked_mul(bs)?))
}

/// Scan group `g`, its table's used part given as `table` (the bytes of [`table_range`],
/// read by the ordered stream) or, with `None`, read here in chunks.
pub(super) fn scan_group_from(
    scan: &Scan,
    g: u32,
    st: GroupState,
    given: Option<&[u8]>,
) -> GroupOut {
    let fs = scan.fs;
    let geo = &fs.geo;
    let mut out = GroupOut::default();
    if !st.inode_table_ok {
        return out;
    }
    let n = fs.scannable_inodes(g, st.scan_by_desc) as usize;
    if n == 0 {
        return out;
    }
    let isz = geo.inode_size as usize;
    let bs = geo.block_size as usize;
    // Large sequential reads of the used part of the table, through one reused buffer per
    // worker thread, so memory stays bounded whatever the size of the inode tables.
    let per_chunk = (ITABLE_CHUNK_BYTES / isz).max(1);
    let start = fs.groups[g as usize].inode_table();
    let first_ino = g * geo.inodes_per_group + 1;
    out.bits = GroupBits::new(u64::from(first_ino - 1), n as u64);
    let mut buf = scan
        .buffers
        .lock()
        .ok()
        .and_then(|mut b| b.pop())
        .unwrap_or_default();
    {
        let mut done = 0usize;
        while done < n {
            let count = per_chunk.min(n - done);
            let first_blk = (done * isz) / bs;
            let last_blk = ((done + count) * isz).div_ceil(bs);
            let table: &[u8] = match given {
                Some(all) => all.get(first_blk * bs..last_blk * bs).unwrap_or(&[]),
                None => {
                    fs.read_blocks_or_zeros(
                        start + first_blk as u64,
                        last_blk - first_blk,
                        &mut buf,
                    );
                    &buf
                }
            };
            if table.len() < (last_blk - first_blk) * bs {
                break; // a given table shorter than its range: never, by construction
            }
            let skew = done * isz - first_blk * bs;
            let (insane, csum_bad) = insane_blocks(fs, table, skew, first_ino + done as u32, count);
            for i in done..done + count {
                let off = skew + (i - done) * isz;
                let raw = &table[off..off + isz];
                let garbage = insane.get(off / bs).copied().unwrap_or(false);
                let ino = first_ino + i as u32;
                if scan.bb_inodes.binary_search(&ino).is_ok()
                    || (ino == ino::RESIZE && scan.resize_cleared)
                {
                    // Unreadable, or about to be cleared: in use (as every reserved inode
                    // is), so nothing reuses it, but never checked.
                    out.bits.set(GroupBits::USED, ino - 1);
                    continue;
                }
                let (mut links, mut k) = (0u16, 0u8);
                let judged = Judged {
                    garbage,
                    csum_failed: csum_bad[i - done],
                };
                check_inode(scan, ino, raw, judged, &mut links, &mut k, &mut out);
                if out.deferred.len() >= super::DEFERRED_MAX {
                    out.flush_deferred();
                }
                let idx = ino - 1;
                match k {
                    0 => {}
                    ft::DIR => out.bits.set(GroupBits::DIR, idx),
                    ft::REG => out.bits.set(GroupBits::REG, idx),
                    k => out.kinds_other.push((idx, k)),
                }
                match links {
                    0 => {}
                    1 => out.bits.set(GroupBits::ONE_LINK, idx),
                    2 => out.bits.set(GroupBits::TWO_LINKS, idx),
                    n => out.links_many.push((idx, n)),
                }
            }
            done += count;
        }
    }
    if let Ok(mut b) = scan.buffers.lock() {
        b.push(buf);
    }
    out.flush_deferred();
    std::mem::take(&mut out.bits).flush(scan);
    out
}

/// Bytes of inode table read at once (a multiple of every inode size).
pub(super) const ITABLE_CHUNK_BYTES: usize = 128 * 1024;

/// The inode-table blocks of a chunk whose inodes are garbage, as the library's inode scan
/// judges them: more than half of a block's inodes fail their checksum or have an insane
/// extent header or block map. `table[skew..]` holds `count` inodes from `first_ino`.
/// Also returns, per inode, whether its checksum fails (computed once, here, for the scan).
pub(super) fn insane_blocks(
    fs: &Fs,
    table: &[u8],
    skew: usize,
    first_ino: u32,
    count: usize,
) -> (Vec<bool>, Vec<bool>) {
    let geo = &fs.geo;
    let (isz, bs) = (geo.inode_size as usize, geo.block_size as usize);
    let per_block = bs / isz;
    let mut insane = vec![false; table.len().div_ceil(bs)];
    let mut csum_bad = vec![false; count];
    let mut badness = vec![0usize; insane.len()];
    let slot = |i: usize| &table[skew + i * isz..skew + (i + 1) * isz];
    // An all-zero slot is simply free: never used, never checksummed, never insane.
    let free: Vec<bool> = (0..count)
        .map(|i| slot(i).iter().all(|&b| b == 0))
        .collect();
    if fs.has_metadata_csum() {
        // Checksummed three at a time, side by side (see `inode_checksums_x3`).
        let mut live = (0..count).filter(|&i| !free[i]);
        loop {
            let three = [live.next(), live.next(), live.next()];
            match three {
                [Some(a), Some(b), Some(c)] => {
                    let sums = inode_checksums_x3(
                        [slot(a), slot(b), slot(c)],
                        fs.csum_seed,
                        [a, b, c].map(|i| first_ino + i as u32),
                    );
                    for (i, (want, have, _)) in [a, b, c].into_iter().zip(sums) {
                        csum_bad[i] = want != have;
                    }
                }
                rest => {
                    for i in rest.into_iter().flatten() {
                        let (want, have, _) =
                            inode_checksum(slot(i), fs.csum_seed, first_ino + i as u32);
                        csum_bad[i] = want != have;
                    }
                    break;
                }
            }
        }
    }
    if per_block >= 2 {
        for (i, &bad) in csum_bad.iter().enumerate() {
            if free[i] {
                continue;
            }
            let inode = RawInode::parse(slot(i));
            if bad || extent_head_insane(&inode) || block_map_insane(fs, &inode) {
                badness[(skew + i * isz) / bs] += 1;
            }
        }
    }
    if per_block >= 2 {
        for (b, n) in badness.iter().enumerate() {
            insane[b] = *n > per_block / 2;
        }
    }
    (insane, csum_bad)
}

/// The inode claims extents, but its root is not a header the library accepts.
pub(super) fn extent_head_insane(inode: &RawInode) -> bool {
    inode.flags() & iflags::EXTENTS != 0 && !extent_header_valid(&inode.block_bytes())
}

/// `i_block` starts with an extent header the library accepts for an in-inode root.
pub(super) fn extent_header_valid(b: &[u8]) -> bool {
    let word = |o: usize| u16::from_le_bytes([b[o], b[o + 1]]);
    let (magic, entries, max) = (word(0), word(2), word(4));
    magic == ffsck_format::extent::EXTENT_MAGIC && entries <= max && (2..=4).contains(&max)
}

/// A linked block-mapped file, directory or long symlink with more than half its block
/// pointers out of range.
pub(super) fn block_map_insane(fs: &Fs, inode: &RawInode) -> bool {
    let geo = &fs.geo;
    let fl = inode.flags();
    if fl & (iflags::INLINE_DATA | iflags::EXTENTS) != 0 || inode.links_count() == 0 {
        return false;
    }
    match inode.file_type() {
        FileType::Regular | FileType::Directory => {}
        FileType::Symlink if inode.size() > 60 => {}
        _ => return false,
    }
    let bad = inode
        .i_block
        .iter()
        .map(|w| u64::from(w.get()))
        .filter(|&b| b != 0 && (b < geo.first_data_block || b >= geo.blocks_count))
        .count();
    bad > 15 / 2
}
