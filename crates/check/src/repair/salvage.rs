//! Directory salvage and rebuild, as e2fsck's pass 2 salvage and pass 3A ("Optimizing
//! directories") do it: read every live entry a directory still has (tolerating corrupt record
//! lengths, entries running past the block and garbage blocks), make the names unique, and
//! write the directory again.
//!
//! - A directory e2fsck rebuilds in pass 3A (an index it cleared, duplicate names, a leaf
//!   without a checksum tail, pass 3A's own offer, `-D`) is laid out as e2fsck's rehash lays it
//!   out and resized to fit (`rehash.rs`).
//! - Any other, or one that cannot be resized, is written into the blocks it already owns,
//!   with `.` and `..` first and a checksum tail in every leaf: an indexed one gets a fresh
//!   htree (sorted by name hash, one or two index levels) when it fits in its blocks;
//!   otherwise, and for plain directories, the result is linear and the index flag is cleared.
//!   That rebuild never allocates or frees blocks and never changes the mapping, so the
//!   allocation facts stay right.
//!
//! Entries a rebuild keeps are re-checked by the next round (bad inode numbers, file types,
//! link counts and a `..` it had to invent are fixed there).

use super::{dirent, inode, rehash, Dirs};
use crate::engine::AllocFacts;
use crate::htree::{self, DxDir};
use crate::pass0::Pass0Facts;
use crate::problem::{Fixer, Problem as P, Prompt};
use crate::report::Finding;
use ffsck_format::dir::{self as fdir, hash, header_at, DX_ROOT_ENTRIES_OFFSET};
use ffsck_format::inode::{flags as iflags, RawInode};
use ffsck_format::{ino as rino, Compat};
use ffsck_io::Device;
use std::collections::{BTreeMap, BTreeSet, HashSet};

/// The directory a finding asks to rebuild.
fn target(f: &Finding) -> u32 {
    match f.problem {
        P::P1_HTREE_BADROOT | P::P1_HTREE_HASHV | P::P1_HTREE_INCOMPAT | P::P1_HTREE_DEPTH => {
            f.ctx.ino
        }
        _ => f.ctx.dir,
    }
}

/// Problems fixed by rebuilding the directory they name: the salvage fixes, and a name the
/// entry fix edits (`P2_BAD_NAME`), whose directory is rebuilt around the new name.
fn rebuilds(p: P) -> bool {
    p.fixed_by(Fixer::Salvage) || p == P::P2_BAD_NAME
}

/// Problems after whose fix e2fsck rebuilds the directory in its pass 3A (`rehash`): an index
/// cleared, duplicate names, a leaf without room for its checksum, and pass 3A's own offer.
fn rehashes(p: P) -> bool {
    p.fixed_by(Fixer::Salvage)
        && (p.info().prompt == Prompt::ClearHtree
            || matches!(
                p,
                P::P2_DUPLICATE_DIRENT
                    | P::P2_NON_UNIQUE_FILE
                    | P::P2_NON_UNIQUE_FILE_NO_RENAME
                    | P::P2_LEAF_NODE_MISSING_CSUM
                    | P::P3A_OPTIMIZE_DIR
            ))
}

/// Rebuild every directory the fixes among `fixes` name. A second link to a directory
/// (`P2_LINK_DIR`) is dropped by the rebuild of the directory holding it. A directory e2fsck
/// rebuilds in pass 3A is laid out as e2fsck's rehash lays it out (`rehash`), taking and
/// releasing blocks in `facts`, its leaves keeping `slack` percent free when indexed. Returns
/// whether blocks were taken or released.
pub fn apply(
    p0: &Pass0Facts,
    dev: &dyn Device,
    dirs: &Dirs,
    mut facts: Option<&mut AllocFacts>,
    fixes: &[&Finding],
    slack: u8,
) -> bool {
    let mut targets: BTreeMap<u32, Vec<(String, u32)>> = BTreeMap::new();
    let mut rehash: BTreeSet<u32> = BTreeSet::new();
    for f in fixes.iter().filter(|f| rebuilds(f.problem)) {
        let dir = target(f);
        if dir == 0 {
            continue;
        }
        if rehashes(f.problem) {
            rehash.insert(dir);
        }
        let drops = targets.entry(dir).or_default();
        if f.problem == P::P2_LINK_DIR {
            drops.push((f.ctx.name.clone().unwrap_or_default(), f.ctx.ino));
        }
    }
    // A directory pass 3 found in a loop is reconnected to /lost+found (the connect fix);
    // the entry that closed the loop, in the parent pass 2 chose for it, goes too (matched
    // by inode alone), or the next pass 2 could choose that entry again, first in its order,
    // and the loop come back.
    for f in fixes.iter().filter(|f| f.problem == P::P3_LOOPED_DIR) {
        if f.ctx.dir != 0 && f.ctx.ino != 0 {
            targets
                .entry(f.ctx.dir)
                .or_default()
                .push((String::new(), f.ctx.ino));
        }
    }
    // A `..` pass 3 wants to point elsewhere but that has no entry to edit (`dir` 0, or an
    // inline directory's parent word): the rebuild writes it.
    let mut parents: BTreeMap<u32, u32> = BTreeMap::new();
    for f in fixes.iter().filter(|f| f.problem == P::P3_BAD_DOT_DOT) {
        let inline = inode_flags(p0, dev, f.ctx.ino) & iflags::INLINE_DATA != 0;
        if (f.ctx.dir == 0 || inline) && f.ctx.ino != 0 && f.ctx.ino2 != 0 {
            parents.insert(f.ctx.ino, f.ctx.ino2);
            targets.entry(f.ctx.ino).or_default();
        }
    }
    // `/lost+found` keeps the blocks it has (it is grown ahead of need).
    let lpf = if rehash.is_empty() {
        None
    } else {
        super::lpf::inode_of(p0, dev, dirs)
    };
    let mut changed = false;
    for (dir, drops) in targets {
        let how = Rebuild {
            rehash: rehash.contains(&dir).then_some(slack),
            keep_blocks: lpf == Some(dir),
        };
        changed |= rebuild(
            p0,
            dev,
            dirs,
            facts.as_deref_mut(),
            dir,
            how,
            &drops,
            parents.get(&dir).copied(),
        );
    }
    changed
}

/// Whether `e` is the entry a drop names: by name and inode, or, without a name, the first
/// entry naming the inode other than `.` and `..`.
fn names_drop(e: &Entry, name: &str, ino: u32) -> bool {
    e.ino == ino
        && if name.is_empty() {
            e.name != b"." && e.name != b".."
        } else {
            crate::ext4::dir::display_name(&e.name) == name
        }
}

/// How a directory is rebuilt.
#[derive(Clone, Copy)]
struct Rebuild {
    /// As e2fsck's pass 3A, with this slack in indexed leaves (percent); else in place.
    rehash: Option<u8>,
    /// The directory is `/lost+found`: it keeps all its blocks.
    keep_blocks: bool,
}

/// One live entry kept for the rebuilt directory.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct Entry {
    pub ino: u32,
    pub ftype: u8,
    pub name: Vec<u8>,
}

/// What the blocks of a directory still hold.
struct Salvaged {
    /// The inode `..` named, if a `..` entry was found in its place.
    dotdot: Option<u32>,
    entries: Vec<Entry>,
}

/// Walk one block (the first `max` bytes) and keep every entry that can be read. A record whose
/// length is bad but whose name fits is kept at its minimal length. Past anything else the walk
/// looks for the next plausible entry on a 4-byte boundary (a live inode number, a name with
/// no `/` or NUL, a record that fits), where e2fsck gives the rest of the block up. Each entry
/// comes with its place in an unbroken walk from the block's start (`None` after a resync), so
/// `.` and `..` are only looked for where they belong. In a directory's first block
/// (`first`), a `.` whose record spans a sound entry at offset 12 is read as 12 bytes long,
/// as e2fsck splits it keeping the `..` behind it: the entries its record swallowed are kept.
fn salvage_block(
    buf: &[u8],
    max: usize,
    bs: u32,
    inodes: u32,
    first: bool,
    out: &mut Vec<(Option<usize>, Entry)>,
) {
    let mut off = 0usize;
    let mut place = Some(0usize);
    let mut resync = false;
    // Every step advances by at least 4 bytes.
    for _ in 0..=max / 4 {
        if off + 8 > max {
            break;
        }
        let Some(h) = header_at(buf, off, bs) else {
            break;
        };
        let name_len = usize::from(h.name_len);
        let min = fdir::rec_len_for(name_len) as usize;
        let rec_len = h.rec_len as usize;
        let framed =
            rec_len >= 12 && rec_len.is_multiple_of(4) && off + rec_len <= max && min <= rec_len;
        let named = name_len > 0
            && off + 8 + name_len <= max
            && !buf[off + 8..off + 8 + name_len]
                .iter()
                .any(|&c| c == 0 || c == b'/');
        if resync && !(framed && named && h.inode != 0 && h.inode <= inodes) {
            off += 4;
            continue;
        }
        // A name longer than a sound record that the next entry follows: the name length is
        // what is damaged. The entry is dropped, as e2fsck's salvage drops it (keeping the
        // entries after it), rather than read with a name swallowing them.
        if !framed
            && rec_len >= 12
            && rec_len.is_multiple_of(4)
            && off + rec_len <= max
            && plausible_at(buf, off + rec_len, max, bs, inodes)
        {
            out.push((
                place,
                Entry {
                    ino: 0,
                    ftype: 0,
                    name: Vec::new(),
                },
            ));
            place = place.map(|p| p + 1);
            off += rec_len;
            continue;
        }
        let big_dot = first
            && off == 0
            && rec_len > 12
            && name_len == 1
            && buf[8] == b'.'
            && plausible_at(buf, 12, max, bs, inodes);
        let step = if big_dot {
            12
        } else if framed {
            rec_len
        } else if off + min <= max && h.inode <= inodes && name_len > 0 {
            min
        } else {
            resync = true;
            place = None;
            off += 4;
            continue;
        };
        resync = false;
        // Empty and unreadable entries are kept too (inode 0): they still hold a place.
        let name = buf[off + 8..off + 8 + name_len].to_vec();
        out.push((
            place,
            Entry {
                ino: if h.inode <= inodes { h.inode } else { 0 },
                ftype: h.file_type,
                name,
            },
        ));
        place = place.map(|p| p + 1);
        off += step;
    }
}

/// Does a sound entry start at `off` (or the usable space end there)?
fn plausible_at(buf: &[u8], off: usize, max: usize, bs: u32, inodes: u32) -> bool {
    if off == max {
        return true;
    }
    let Some(h) = header_at(buf, off, bs).filter(|_| off + 8 <= max) else {
        return false;
    };
    let name_len = usize::from(h.name_len);
    let rec_len = h.rec_len as usize;
    rec_len >= fdir::rec_len_for(name_len) as usize
        && rec_len.is_multiple_of(4)
        && off + rec_len <= max
        && h.inode <= inodes
        && (h.inode == 0
            || (name_len > 0
                && !buf[off + 8..off + 8 + name_len]
                    .iter()
                    .any(|&c| c == 0 || c == b'/')))
}

fn salvage(buf_blocks: &[(u32, Vec<u8>)], bs: usize, inodes: u32) -> Salvaged {
    let mut s = Salvaged {
        dotdot: None,
        entries: Vec::new(),
    };
    for (lblk, buf) in buf_blocks {
        let max = if fdir::has_tail(buf) {
            bs - fdir::TAIL_SIZE
        } else {
            bs
        };
        let mut found = Vec::new();
        salvage_block(buf, max, bs as u32, inodes, *lblk == 0, &mut found);
        // A sound first record longer than 24 bytes is split by e2fsck: `.` takes 12 bytes and
        // an empty entry the rest, which becomes `..`; the record in the second place then
        // survives.
        let split = *lblk == 0
            && header_at(buf, 0, bs as u32).is_some_and(|h| {
                let r = h.rec_len as usize;
                r > 24 && r.is_multiple_of(4) && r <= max
            });
        for (place, e) in found {
            // The first two places of block 0 are `.` and `..`, whatever they hold now: as
            // e2fsck does, an entry found there is overwritten, not kept (but for the split).
            if *lblk == 0 && place.is_some_and(|p| p < 2) {
                if place == Some(1) && e.name == b".." && e.ino != 0 {
                    s.dotdot = Some(e.ino);
                }
                if !(split && place == Some(1)) {
                    continue;
                }
            }
            if e.ino == 0 || e.name.is_empty() || e.name == b"." || e.name == b".." {
                continue;
            }
            s.entries.push(e);
        }
    }
    s
}

/// Names must not hold `/` or NUL: replace them with `.`, as e2fsck does.
fn clean_name(name: &mut [u8]) {
    for c in name.iter_mut() {
        if *c == b'/' || *c == 0 {
            *c = b'.';
        }
    }
}

/// Make names unique as e2fsck's rebuild does, comparing each entry with the one before it
/// under the same name (highest inode first): the same inode again is dropped, another inode is renamed `NAME~N`
/// (or dropped when `rename` is false, for encrypted directories). Like e2fsck, an entry
/// after a dropped one is compared with the dropped entry (which names no inode any more).
fn dedup(entries: Vec<Entry>, rename: bool) -> Vec<Entry> {
    let mut taken: HashSet<Vec<u8>> = entries.iter().map(|e| e.name.clone()).collect();
    let mut by_name: std::collections::HashMap<Vec<u8>, Vec<usize>> = Default::default();
    for (i, e) in entries.iter().enumerate() {
        by_name.entry(e.name.clone()).or_default().push(i);
    }
    // e2fsck sorts entries of the same name by inode, highest first.
    for idx in by_name.values_mut() {
        idx.sort_by_key(|&i| std::cmp::Reverse(entries[i].ino));
    }
    let mut entries: Vec<Option<Entry>> = entries.into_iter().map(Some).collect();
    for idx in by_name.values().filter(|v| v.len() > 1) {
        let name = entries[idx[0]]
            .as_ref()
            .map(|e| e.name.clone())
            .unwrap_or_default();
        // The inode the previous entry names now (0 once dropped), and whether it still has
        // this name.
        let mut prev_ino = entries[idx[0]].as_ref().map_or(0, |e| e.ino);
        let mut prev_same_name = true;
        for &i in &idx[1..] {
            let Some(e) = entries[i].as_mut() else {
                continue;
            };
            if !prev_same_name {
                prev_ino = e.ino;
                prev_same_name = true;
                continue;
            }
            if e.ino == prev_ino || !rename {
                entries[i] = None;
                prev_ino = 0;
                continue;
            }
            let new = crate::ext4::dir::renamed(&name, &taken);
            taken.insert(new.clone());
            e.name = new;
            prev_ino = e.ino;
            prev_same_name = false;
        }
    }
    entries.into_iter().flatten().collect()
}

/// Put an entry at `off` with record length `rec`.
pub(super) fn put_entry(
    buf: &mut [u8],
    off: usize,
    rec: usize,
    bs: u32,
    ino: u32,
    ftype: u8,
    name: &[u8],
) {
    buf[off..off + 4].copy_from_slice(&ino.to_le_bytes());
    let raw = fdir::encode_rec_len(rec as u32, bs);
    buf[off + 4..off + 6].copy_from_slice(&raw.to_le_bytes());
    buf[off + 6] = name.len() as u8;
    buf[off + 7] = ftype;
    buf[off + 8..off + 8 + name.len()].copy_from_slice(name);
}

/// Put the checksum tail's header (its checksum is set when the block is written).
pub(super) fn put_tail(buf: &mut [u8]) {
    let n = buf.len();
    let t = &mut buf[n - fdir::TAIL_SIZE..];
    t.fill(0);
    t[4..6].copy_from_slice(&(fdir::TAIL_SIZE as u16).to_le_bytes());
    t[7] = fdir::ft::CSUM_TAIL;
}

/// Pack `entries` into leaf blocks of `cap` usable bytes; `first` leading bytes of the first
/// block are taken (by `.` and `..`). Returns each block's entries.
fn pack(entries: &[Entry], cap: usize, first: usize) -> Vec<Vec<&Entry>> {
    let mut blocks: Vec<Vec<&Entry>> = vec![Vec::new()];
    let mut used = first;
    for e in entries {
        let need = fdir::rec_len_for(e.name.len()) as usize;
        if used + need > cap {
            blocks.push(Vec::new());
            used = 0;
        }
        used += need;
        if let Some(b) = blocks.last_mut() {
            b.push(e);
        }
    }
    blocks
}

/// Write the entries of one leaf block (after `start` bytes already used), the last one taking
/// the rest of the usable space; an empty block holds one empty entry.
fn fill_leaf(buf: &mut [u8], start: usize, cap: usize, bs: u32, entries: &[&Entry]) {
    let mut off = start;
    if entries.is_empty() && start == 0 {
        put_entry(buf, 0, cap, bs, 0, 0, b"");
        return;
    }
    for (i, e) in entries.iter().enumerate() {
        let rec = if i + 1 == entries.len() {
            cap - off
        } else {
            fdir::rec_len_for(e.name.len()) as usize
        };
        put_entry(buf, off, rec, bs, e.ino, e.ftype, &e.name);
        off += rec;
    }
}

/// The hash version a new index uses: the old root's when it is valid, else the default.
fn hash_version(p0: &Pass0Facts, old_root: Option<&[u8]>) -> u8 {
    let old = old_root
        .and_then(|b| b.get(fdir::DX_ROOT_INFO_OFFSET..fdir::DX_ROOT_INFO_OFFSET + 8))
        .filter(|i| i[0..4] == [0; 4] && i[5] == 8)
        .map(|i| i[4])
        .filter(|&v| v <= hash::TEA);
    old.unwrap_or(p0.fs.sb.s_def_hash_version).min(hash::TEA)
}

/// Rebuild directory `dir`, without the entries `drops` names (name as displayed, inode),
/// with `..` naming `parent` when given: in place, or as e2fsck's pass 3A (`how.rehash`),
/// resized in `facts`. Returns whether blocks were taken or released.
#[allow(clippy::too_many_arguments)]
fn rebuild(
    p0: &Pass0Facts,
    dev: &dyn Device,
    dirs: &Dirs,
    facts: Option<&mut AllocFacts>,
    dir: u32,
    how: Rebuild,
    drops: &[(String, u32)],
    parent: Option<u32>,
) -> bool {
    let fs = &p0.fs;
    let bs = fs.block_size();
    let Some((off, raw)) = super::inode::read_raw(p0, dev, dir) else {
        return false;
    };
    let ino = RawInode::parse(&raw);
    let flags = ino.flags();
    if flags & iflags::INLINE_DATA != 0 {
        rebuild_inline(p0, dev, dir, off, raw, drops, parent);
        return false;
    }
    let Some(map) = dirs.0.get(&dir) else {
        return false;
    };
    let encrypted = flags & iflags::ENCRYPT != 0;
    let casefold = flags & iflags::CASEFOLD != 0;
    // Only the blocks inside i_size, in logical order (the map holds no holes).
    let size = ino.size();
    let nblocks = size.div_ceil(bs as u64);
    let mut blocks: Vec<(u32, Vec<u8>)> = Vec::new();
    for &(lblk, pblk) in map.iter().filter(|b| u64::from(b.0) < nblocks.max(1)) {
        if pblk == 0 || pblk >= fs.geo.blocks_count {
            return false;
        }
        let mut b = vec![0u8; bs];
        if dev.read_at(&mut b, pblk * bs as u64).is_err() {
            return false;
        }
        blocks.push((lblk, b));
    }
    // A hole in the middle stays a hole: the rebuild needs every block from 0 on.
    if blocks.is_empty() || blocks.iter().enumerate().any(|(i, b)| b.0 as usize != i) {
        return false;
    }
    let old_root = (flags & iflags::INDEX != 0).then(|| blocks[0].1.clone());
    let s = salvage(&blocks, bs, fs.geo.inodes_count);
    let mut entries = s.entries;
    for (name, ino) in drops {
        if let Some(i) = entries.iter().position(|e| names_drop(e, name, *ino)) {
            entries.remove(i);
        }
    }
    // Encrypted names are ciphertext: any byte may appear, and none may change.
    if !encrypted {
        for e in &mut entries {
            clean_name(&mut e.name);
        }
    }
    let entries = dedup(entries, !encrypted);
    let dotdot = parent
        .or(s.dotdot)
        .unwrap_or(if dir == rino::ROOT { dir } else { rino::ROOT });

    let csum = fs.has_metadata_csum();
    let cap = if csum { bs - fdir::TAIL_SIZE } else { bs };
    let n = blocks.len();
    // A directory whose names the index keeps in the entries (encrypted and casefolded) is
    // not laid out again here.
    if let (Some(slack), false) = (how.rehash, encrypted && casefold) {
        let laid = rehash::layout(p0, dir, flags, size, &entries, dotdot, slack);
        let old: Vec<u64> = map.iter().take(n).map(|b| b.1).collect();
        if let Some(done) =
            laid.and_then(|l| rehash::write(p0, dev, facts, dir, &old, l, how.keep_blocks))
        {
            return done;
        }
    }
    // A rehash with a default hash nobody defines fails in e2fsck, which leaves the index it
    // cleared cleared: the entries are packed without one.
    let unhashable = how.rehash.is_some() && !rehash::default_hash_supported(fs);
    let want_index = fs.geo.compat.has(Compat::DIR_INDEX)
        && (flags & iflags::INDEX != 0 || how.rehash.is_some())
        && !unhashable
        && !encrypted
        && !casefold;
    let mut out: Vec<Vec<u8>> = Vec::new();
    let mut indexed = false;
    // Blocks before this one are index blocks (root and interior nodes).
    let mut first_leaf = 0;
    if want_index {
        if let Some((b, f)) = build_htree(p0, &entries, dir, dotdot, old_root.as_deref(), n, cap) {
            out = b;
            first_leaf = f;
            indexed = true;
        }
    }
    if !indexed {
        let packed = pack(&entries, cap, 24);
        if packed.len() > n {
            return false;
        }
        for i in 0..n {
            let mut buf = vec![0u8; bs];
            let list = packed.get(i).map_or(&[][..], |v| &v[..]);
            if i == 0 {
                put_entry(&mut buf, 0, 12, bs as u32, dir, fdir::ft::DIR, b".");
                let rest = if list.is_empty() { cap - 12 } else { 12 };
                put_entry(&mut buf, 12, rest, bs as u32, dotdot, fdir::ft::DIR, b"..");
                if !list.is_empty() {
                    fill_leaf(&mut buf, 24, cap, bs as u32, list);
                }
            } else {
                fill_leaf(&mut buf, 0, cap, bs as u32, list);
            }
            out.push(buf);
        }
    }
    let ftype_ok = fs.geo.incompat.has(ffsck_format::Incompat::FILETYPE);
    for (i, mut buf) in out.into_iter().enumerate() {
        if !ftype_ok {
            clear_types(&mut buf, bs);
        }
        if csum && i >= first_leaf {
            put_tail(&mut buf);
            dirent::set_leaf_csum(p0, dev, dir, &mut buf);
        } else if csum {
            set_dx_csum(p0, dev, dir, &mut buf, i == 0);
        }
        let pblk = map[i].1;
        let _ = dev.write_at(&buf, pblk * bs as u64);
    }
    let was_indexed = flags & iflags::INDEX != 0;
    if was_indexed != indexed {
        inode::edit(p0, dev, dir, |i| {
            let f = i.i_flags.get();
            i.i_flags.set(if indexed {
                f | iflags::INDEX
            } else {
                f & !iflags::INDEX
            });
        });
    }
    false
}

/// Without the `filetype` feature entries carry no type.
pub(super) fn clear_types(buf: &mut [u8], bs: usize) {
    let mut off = 0;
    for _ in 0..=bs / 12 {
        let Some(h) = header_at(buf, off, bs as u32) else {
            break;
        };
        if h.rec_len < 8 || off + h.rec_len as usize > bs {
            break;
        }
        if h.file_type != fdir::ft::CSUM_TAIL {
            buf[off + 7] = 0;
        }
        off += h.rec_len as usize;
    }
}

/// Set the dx tail checksum of a root (`root`) or interior node.
pub(super) fn set_dx_csum(p0: &Pass0Facts, dev: &dyn Device, dir: u32, buf: &mut [u8], root: bool) {
    let Some(seed) = crate::ext4::inode::seed_from(&p0.fs, dev, dir) else {
        return;
    };
    let co = if root {
        DX_ROOT_ENTRIES_OFFSET
    } else {
        fdir::DX_NODE_ENTRIES_OFFSET
    };
    ffsck_format::verify::set_dx_checksum(buf, co, seed);
}

/// Write a dx entry table at `co`: limit, count, then (hash, block) pairs.
pub(super) fn put_table(buf: &mut [u8], co: usize, limit: usize, refs: &[(u32, u32)]) {
    buf[co..co + 2].copy_from_slice(&(limit as u16).to_le_bytes());
    buf[co + 2..co + 4].copy_from_slice(&(refs.len() as u16).to_le_bytes());
    for (i, &(h, b)) in refs.iter().enumerate() {
        let p = co + i * 8;
        if i > 0 {
            buf[p..p + 4].copy_from_slice(&h.to_le_bytes());
        }
        buf[p + 4..p + 8].copy_from_slice(&b.to_le_bytes());
    }
}

/// Build an htree of `entries` in all `n` blocks: root, interior nodes (two levels only when
/// one root cannot hold every leaf), then leaves in hash order, the blocks the entries do not
/// need first as empty leaves under hash 0 (lookups go to the last of equal hashes). Returns
/// the blocks and the first leaf's index; `None` when a name cannot be hashed or the tree does
/// not fit.
fn build_htree(
    p0: &Pass0Facts,
    entries: &[Entry],
    dir: u32,
    dotdot: u32,
    old_root: Option<&[u8]>,
    n: usize,
    cap: usize,
) -> Option<(Vec<Vec<u8>>, usize)> {
    let fs = &p0.fs;
    let bs = fs.block_size();
    let csum = fs.has_metadata_csum();
    let version = hash_version(p0, old_root);
    let unsigned = fs.sb.unsigned_dir_hash();
    let dx = DxDir {
        numblocks: n as u32,
        hash_version: if unsigned { version + 3 } else { version },
        casefold: false,
    };
    let mut hashed: Vec<(u32, &Entry)> = Vec::with_capacity(entries.len());
    for e in entries {
        hashed.push((htree::name_hash(fs, &dx, &e.name)?, e));
    }
    hashed.sort_by(|a, b| a.0.cmp(&b.0).then_with(|| a.1.name.cmp(&b.1.name)));
    // Leaves: a new leaf whose first hash continues the previous leaf's is marked (bit 0).
    let mut leaves: Vec<(u32, Vec<&Entry>)> = vec![(0, Vec::new())];
    let mut used = 0;
    let mut last_hash = None;
    for &(h, e) in &hashed {
        let need = fdir::rec_len_for(e.name.len()) as usize;
        if used + need > cap {
            let start = if last_hash == Some(h) { h | 1 } else { h };
            leaves.push((start, Vec::new()));
            used = 0;
        }
        used += need;
        last_hash = Some(h);
        leaves.last_mut()?.1.push(e);
    }
    if leaves.len() < 2 && old_root.is_none() {
        return None; // one block needs no index
    }
    let dx_tail = if csum { fdir::DX_TAIL_SIZE } else { 0 };
    let root_limit = (bs - DX_ROOT_ENTRIES_OFFSET - dx_tail) / 8;
    let node_limit = (bs - fdir::DX_NODE_ENTRIES_OFFSET - dx_tail) / 8;
    // Spare blocks become empty leaves in front; the first real leaf then starts at hash 0.
    let mut nodes = 0;
    for _ in 0..3 {
        let spare = n.checked_sub(1 + nodes + leaves.len())?;
        let total = leaves.len() + spare;
        let want = if total <= root_limit {
            0
        } else {
            total.div_ceil(node_limit)
        };
        if want == nodes {
            break;
        }
        nodes = want;
    }
    let spare = n.checked_sub(1 + nodes + leaves.len())?;
    if let Some(l) = leaves.first_mut() {
        l.0 = 0;
    }
    let mut padded: Vec<(u32, Vec<&Entry>)> = (0..spare).map(|_| (0, Vec::new())).collect();
    padded.extend(leaves);
    let leaves = padded;
    if nodes > root_limit || 1 + nodes + leaves.len() > n {
        return None;
    }
    let first_leaf = 1 + nodes;
    let mut out = vec![vec![0u8; bs]; n];
    // Root: `.`, `..` spanning the block, then the info and table.
    put_entry(&mut out[0], 0, 12, bs as u32, dir, fdir::ft::DIR, b".");
    put_entry(
        &mut out[0],
        12,
        bs - 12,
        bs as u32,
        dotdot,
        fdir::ft::DIR,
        b"..",
    );
    let info = fdir::DX_ROOT_INFO_OFFSET;
    out[0][info + 4] = version;
    out[0][info + 5] = 8;
    out[0][info + 6] = u8::from(nodes > 0);
    let leaf_refs: Vec<(u32, u32)> = leaves
        .iter()
        .enumerate()
        .map(|(i, l)| (l.0, (first_leaf + i) as u32))
        .collect();
    if nodes == 0 {
        put_table(&mut out[0], DX_ROOT_ENTRIES_OFFSET, root_limit, &leaf_refs);
    } else {
        let mut root_refs = Vec::new();
        for (k, chunk) in leaf_refs.chunks(node_limit).enumerate() {
            let b = &mut out[1 + k];
            put_entry(b, 0, bs, bs as u32, 0, 0, b"");
            put_table(b, fdir::DX_NODE_ENTRIES_OFFSET, node_limit, chunk);
            root_refs.push((chunk[0].0, (1 + k) as u32));
        }
        put_table(&mut out[0], DX_ROOT_ENTRIES_OFFSET, root_limit, &root_refs);
    }
    for (i, (_, list)) in leaves.iter().enumerate() {
        fill_leaf(&mut out[first_leaf + i], 0, cap, bs as u32, list);
    }
    (first_leaf + leaves.len() == n).then_some((out, first_leaf))
}

/// The flags of inode `ino` as the overlay has it (0 when unreadable).
fn inode_flags(p0: &Pass0Facts, dev: &dyn Device, ino: u32) -> u32 {
    super::inode::read_inode(p0, dev, ino).map_or(0, |i| i.flags())
}

/// Offset of `i_block` in the inode.
const I_BLOCK: usize = 0x28;

/// Where the value of `system.data` lies in the raw inode, and its entry (for the hash).
fn inline_value(raw: &[u8]) -> Option<(usize, usize, usize)> {
    let inode = RawInode::parse(raw);
    let start = 128 + usize::from(inode.extra_isize());
    let magic = raw.get(start..start + 4)?;
    if u32::from_le_bytes([magic[0], magic[1], magic[2], magic[3]])
        != ffsck_format::xattr::IBODY_MAGIC
    {
        return None;
    }
    let area = &raw[start..];
    let entries = ffsck_format::xattr::parse_entries(area, 4, 4).ok()?;
    let e = entries
        .into_iter()
        .find(|e| e.raw.e_name_index == 7 && e.name == b"data" && e.raw.e_value_inum.get() == 0)?;
    let at = start + 4 + usize::from(e.raw.e_value_offs.get());
    let len = e.raw.e_value_size.get() as usize;
    (at + len <= raw.len()).then_some((at, len, start + e.offset))
}

/// The hash of an attribute entry: its name, then its value word by word.
fn xattr_hash(name: &[u8], value: &[u8]) -> u32 {
    let mut h: u32 = 0;
    for &c in name {
        h = (h << 5) ^ (h >> 27) ^ u32::from(c);
    }
    for w in value.chunks(4) {
        let mut b = [0u8; 4];
        b[..w.len()].copy_from_slice(w);
        h = (h << 16) ^ (h >> 16) ^ u32::from_le_bytes(b);
    }
    h
}

/// Rebuild an inline directory: entries in `i_block` after the parent word, then in the
/// `system.data` value, both areas kept at their sizes.
fn rebuild_inline(
    p0: &Pass0Facts,
    dev: &dyn Device,
    dir: u32,
    off: u64,
    mut raw: Vec<u8>,
    drops: &[(String, u32)],
    parent: Option<u32>,
) {
    let fs = &p0.fs;
    let bs = fs.geo.block_size;
    let inodes = fs.geo.inodes_count;
    if raw.len() < I_BLOCK + 60 {
        return;
    }
    let size = RawInode::parse(&raw).size() as usize;
    let a = (I_BLOCK + 4, I_BLOCK + 60);
    let b = if size > 60 {
        inline_value(&raw).map(|(at, len, _)| (at, at + len))
    } else {
        None
    };
    let mut found = Vec::new();
    for (s0, e0) in std::iter::once(a).chain(b) {
        let mut f = Vec::new();
        salvage_block(&raw[s0..e0], e0 - s0, bs, inodes, false, &mut f);
        found.extend(f.into_iter().map(|(_, e)| e));
    }
    let mut entries: Vec<Entry> = found
        .into_iter()
        .filter(|e| e.ino != 0 && !e.name.is_empty() && e.name != b"." && e.name != b"..")
        .collect();
    for (name, ino) in drops {
        if let Some(i) = entries.iter().position(|e| names_drop(e, name, *ino)) {
            entries.remove(i);
        }
    }
    for e in &mut entries {
        clean_name(&mut e.name);
    }
    let entries = dedup(entries, true);
    // Fill the first area, then the second; each ends with an entry taking the rest.
    let mut areas: Vec<((usize, usize), Vec<&Entry>)> = vec![(a, Vec::new())];
    if let Some(b) = b {
        areas.push((b, Vec::new()));
    }
    let mut k = 0;
    let mut used = 0;
    for e in &entries {
        let need = fdir::rec_len_for(e.name.len()) as usize;
        while k < areas.len() && used + need > areas[k].0 .1 - areas[k].0 .0 {
            k += 1;
            used = 0;
        }
        if k == areas.len() {
            return; // does not fit: leave it
        }
        areas[k].1.push(e);
        used += need;
    }
    for ((s0, e0), list) in &areas {
        let len = e0 - s0;
        if len < 8 {
            if list.is_empty() {
                continue;
            }
            return;
        }
        let mut buf = vec![0u8; len];
        fill_leaf(&mut buf, 0, len, bs, list);
        raw[*s0..*e0].copy_from_slice(&buf);
    }
    if let Some((at, len, entry)) = b.and_then(|_| inline_value(&raw)) {
        let old = u32::from_le_bytes([
            raw[entry + 12],
            raw[entry + 13],
            raw[entry + 14],
            raw[entry + 15],
        ]);
        if old != 0 {
            let h = xattr_hash(b"data", &raw[at..at + len]);
            raw[entry + 12..entry + 16].copy_from_slice(&h.to_le_bytes());
        }
    }
    if let Some(p) = parent {
        raw[I_BLOCK..I_BLOCK + 4].copy_from_slice(&p.to_le_bytes());
    }
    let mut inode = crate::ext4::inode::Inode { ino: dir, off, raw };
    // An inline directory has no index: a flag its bad htree root was reported for goes, as
    // e2fsck clears it in pass 1 (left set, the next check reports the root again).
    let mut fields = inode.parse();
    fields.i_flags.set(fields.i_flags.get() & !iflags::INDEX);
    inode.set(&fields);
    crate::ext4::inode::write(fs, dev, &mut inode);
}
