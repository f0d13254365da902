//! Quota files, checked after pass 5 as e2fsck does. With the `quota` feature, pass 1 charges
//! every inode's space and the inode itself to its user, group and project ids; each quota
//! file the superblock names must open (a valid inode holding the v2 header of its type), and
//! the usage it records for every id must equal the usage counted. Otherwise the file needs
//! rewriting (`P6_UPDATE_QUOTAS`): the repair writes it anew, keeping every id's limits.
//!
//! The file is the kernel's "vfsv1" quota tree: 1 KiB blocks; block 0 holds the header and
//! the grace times, block 1 the root of a four-level radix tree on the id (one byte per
//! level), whose last level points at data blocks of 72-byte entries.

use crate::filemap::{self, Visit};
use crate::fs::Fs;
use crate::problem::Problem as P;
use crate::report::{Findings, Policy, ProblemCtx};
use ffsck_format::inode::RawInode;
use ffsck_format::RoCompat;
use std::collections::{BTreeMap, HashSet};

/// Quota types: user, group, project.
pub const QTYPES: usize = 3;
/// `dqh_magic` of the v2 quota file header, per quota type.
const QUOTA_MAGIC: [u32; QTYPES] = [0xD9C0_1F11, 0xD9C0_1927, 0xD9C0_3F14];
/// Quota format version e2fsprogs writes and reads (the v2 "vfsv1" tree).
const QUOTA_VERSION: u32 = 1;
/// The quota tree's block size.
const QBLK: usize = 1024;
/// Levels of the radix tree (one byte of the id each).
const TREE_DEPTH: usize = 4;
/// The tree's root block.
const ROOT: usize = 1;
/// A data block: a 16-byte header, then entries.
const DATA_HEADER: usize = 16;
const ENTRY: usize = 72;
const ENTRIES_PER_BLOCK: usize = (QBLK - DATA_HEADER) / ENTRY;
/// Where the info (grace times, block counts) starts in block 0.
const INFO_OFF: usize = 8;
/// Default grace period, in seconds (a week), for new files.
const GRACE: u64 = 7 * 24 * 3600;
/// Largest quota file read: a hostile inode cannot make us read more.
const MAX_FILE_BYTES: u64 = 64 << 20;

/// The quota type's name, as quota tools call it.
pub fn type_name(qtype: usize) -> &'static str {
    ["user", "group", "project"][qtype.min(QTYPES - 1)]
}

/// Space (bytes) and inodes charged to each id, per quota type.
#[derive(Default, Debug, Clone)]
pub struct Usage(pub [BTreeMap<u32, (u64, u64)>; QTYPES]);

impl Usage {
    /// Charge `space` bytes and `inodes` inodes to the owners of the inode `raw`.
    pub fn charge(&mut self, raw: &[u8], space: u64, inodes: u64) {
        for (qtype, id) in owner_ids(raw).into_iter().enumerate() {
            let e = self.0[qtype].entry(id).or_default();
            e.0 += space;
            e.1 += inodes;
        }
    }
    /// Take `space` bytes back from the owners of the inode `raw` (blocks a repair freed).
    pub fn uncharge(&mut self, raw: &[u8], space: u64) {
        for (qtype, id) in owner_ids(raw).into_iter().enumerate() {
            if let Some(e) = self.0[qtype].get_mut(&id) {
                e.0 = e.0.saturating_sub(space);
            }
        }
    }
    pub fn merge(&mut self, other: Usage) {
        for (mine, theirs) in self.0.iter_mut().zip(other.0) {
            for (id, (s, i)) in theirs {
                let e = mine.entry(id).or_default();
                e.0 += s;
                e.1 += i;
            }
        }
    }
}

/// Whether pass 1 charges inode `ino` to its owners' quota: the root and ordinary inodes,
/// but not the project quota file, the orphan file or an xattr value inode.
pub fn charged(fs: &Fs, ino: u32, inode: &RawInode) -> bool {
    fs.sb.ro_compat().has(RoCompat::QUOTA)
        && (ino == ffsck_format::ino::ROOT || ino >= fs.geo.first_ino)
        && ino != fs.sb.s_prj_quota_inum.get()
        && ino != fs.sb.s_orphan_file_inum.get()
        && inode.flags() & ffsck_format::inode::flags::EA_INODE == 0
}

/// User, group and project id of an inode (the project id only where the inode has room).
fn owner_ids(raw: &[u8]) -> [u32; QTYPES] {
    let inode = RawInode::parse(raw);
    let uid = u32::from(inode.i_uid.get()) | u32::from(inode.l_i_uid_high.get()) << 16;
    let gid = u32::from(inode.i_gid.get()) | u32::from(inode.l_i_gid_high.get()) << 16;
    // i_projid ends 32 bytes past the classic inode.
    let projid = if raw.len() >= 0xA0 && inode.extra_isize() >= 0x20 {
        inode.i_projid.get()
    } else {
        0
    };
    [uid, gid, projid]
}

/// One id's record in a quota file.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Dquot {
    pub id: u32,
    pub ihardlimit: u64,
    pub isoftlimit: u64,
    pub curinodes: u64,
    pub bhardlimit: u64,
    pub bsoftlimit: u64,
    pub curspace: u64,
    pub btime: u64,
    pub itime: u64,
}

fn u32_at(b: &[u8], o: usize) -> u32 {
    u32::from_le_bytes([b[o], b[o + 1], b[o + 2], b[o + 3]])
}

fn u64_at(b: &[u8], o: usize) -> u64 {
    u64::from(u32_at(b, o)) | u64::from(u32_at(b, o + 4)) << 32
}

impl Dquot {
    fn parse(e: &[u8]) -> Dquot {
        Dquot {
            id: u32_at(e, 0),
            ihardlimit: u64_at(e, 8),
            isoftlimit: u64_at(e, 16),
            curinodes: u64_at(e, 24),
            bhardlimit: u64_at(e, 32),
            bsoftlimit: u64_at(e, 40),
            curspace: u64_at(e, 48),
            btime: u64_at(e, 56),
            itime: u64_at(e, 64),
        }
    }
    fn encode(&self, e: &mut [u8]) {
        let fields = [
            self.ihardlimit,
            self.isoftlimit,
            self.curinodes,
            self.bhardlimit,
            self.bsoftlimit,
            self.curspace,
            self.btime,
            self.itime,
        ];
        e[0..4].copy_from_slice(&self.id.to_le_bytes());
        e[4..8].fill(0);
        for (k, v) in fields.iter().enumerate() {
            e[8 + 8 * k..16 + 8 * k].copy_from_slice(&v.to_le_bytes());
        }
        // An all-zero entry reads as a free slot: the format marks a real one with itime 1.
        if e.iter().all(|&b| b == 0) {
            e[64..72].copy_from_slice(&1u64.to_le_bytes());
        }
    }
}

/// The bytes of quota file inode `ino` (up to its size), or why they cannot be read.
pub(crate) fn read_file(fs: &Fs, ino: u32) -> Result<Vec<u8>, String> {
    if ino == 0 || ino > fs.geo.inodes_count {
        return Err(format!("illegal inode number {ino}"));
    }
    let raw = fs
        .read_inode(ino)
        .ok_or_else(|| format!("inode {ino} cannot be read"))?;
    let inode = RawInode::parse(&raw);
    if inode.links_count() == 0 {
        return Err(format!("inode {ino} is not in use"));
    }
    let size = inode.size();
    if size > MAX_FILE_BYTES {
        return Err(format!("quota file inode {ino} is too big ({size} bytes)"));
    }
    let bs = u64::from(fs.geo.block_size);
    let nblocks = size.div_ceil(bs);
    let mut map: Vec<u64> = vec![0; nblocks as usize];
    let extents = inode.flags() & ffsck_format::inode::flags::EXTENTS != 0;
    let mut visit = |v: Visit| -> bool {
        if let Visit::Data { lblk, pblk } = v {
            if let Some(slot) = map.get_mut(lblk as usize) {
                *slot = pblk;
            }
            return lblk + 1 < nblocks;
        }
        true
    };
    filemap::walk(fs, &inode.block_bytes(), extents, false, &mut visit);
    let mut bytes = Vec::with_capacity(size as usize);
    for &pblk in &map {
        match (pblk != 0 && fs.geo.is_valid_block(pblk)).then(|| fs.read_block(pblk)) {
            Some(Some(b)) => bytes.extend_from_slice(&b),
            _ => bytes.extend(std::iter::repeat_n(0u8, bs as usize)),
        }
    }
    bytes.truncate(size as usize);
    Ok(bytes)
}

/// Every record in a quota file of type `qtype`, walking its tree; an error when the header
/// or the tree is not sound.
pub(crate) fn parse(qtype: usize, file: &[u8]) -> Result<Vec<Dquot>, String> {
    if file.len() < 2 * QBLK {
        return Err("the quota file is too short".into());
    }
    if u32_at(file, 0) != QUOTA_MAGIC[qtype] || u32_at(file, 4) != QUOTA_VERSION {
        return Err("the quota file has a bad header".into());
    }
    let nblocks = file.len() / QBLK;
    let mut out = Vec::new();
    let mut seen_data = HashSet::new();
    // (block, depth); every block is visited at most once per depth, so this ends.
    let mut stack = vec![(ROOT, 0usize)];
    let mut seen_tree = HashSet::new();
    while let Some((blk, depth)) = stack.pop() {
        if !seen_tree.insert((blk, depth)) {
            return Err(format!("quota tree block {blk} is referenced twice"));
        }
        let b = &file[blk * QBLK..(blk + 1) * QBLK];
        for i in (0..QBLK / 4).rev() {
            let r = u32_at(b, 4 * i) as usize;
            if r == 0 {
                continue;
            }
            if r <= ROOT || r >= nblocks {
                return Err(format!("quota tree block {blk} points past the file ({r})"));
            }
            if depth + 1 < TREE_DEPTH {
                stack.push((r, depth + 1));
            } else if seen_data.insert(r) {
                let d = &file[r * QBLK..(r + 1) * QBLK];
                for k in 0..ENTRIES_PER_BLOCK {
                    let e = &d[DATA_HEADER + k * ENTRY..DATA_HEADER + (k + 1) * ENTRY];
                    if e.iter().any(|&x| x != 0) {
                        out.push(Dquot::parse(e));
                    }
                }
            }
        }
    }
    out.sort_by_key(|d| d.id);
    Ok(out)
}

/// The records a rewritten file holds: every id the old file had (its limits kept) and every
/// id with usage, with the usage counted, and grace times started or stopped to match.
pub(crate) fn merge(
    old: &[Dquot],
    usage: &BTreeMap<u32, (u64, u64)>,
    now: u64,
) -> BTreeMap<u32, Dquot> {
    let mut all: BTreeMap<u32, Dquot> = old.iter().map(|d| (d.id, *d)).collect();
    for (&id, _) in usage.iter() {
        all.entry(id).or_insert(Dquot {
            id,
            ..Default::default()
        });
    }
    for d in all.values_mut() {
        let (space, inodes) = usage.get(&d.id).copied().unwrap_or((0, 0));
        d.curspace = space;
        d.curinodes = inodes;
        // Limits are in 1 KiB blocks; a grace period runs only while a soft limit is exceeded.
        if d.bsoftlimit != 0 && space.div_ceil(1024) > d.bsoftlimit {
            if d.btime == 0 {
                d.btime = now + GRACE;
            }
        } else {
            d.btime = 0;
        }
        if d.isoftlimit != 0 && inodes > d.isoftlimit {
            if d.itime == 0 {
                d.itime = now + GRACE;
            }
        } else {
            d.itime = 0;
        }
    }
    all
}

/// A new quota file of type `qtype` holding `dquots`, laid out as quota tools write it: the
/// tree blocks of each id's path, then its data block, ids in ascending order.
pub(crate) fn build(qtype: usize, dquots: &BTreeMap<u32, Dquot>) -> Vec<u8> {
    let mut blocks: Vec<Vec<u8>> = vec![vec![0u8; QBLK], vec![0u8; QBLK]];
    // The data block being filled, and its entry count.
    let mut open: Option<(usize, usize)> = None;
    for d in dquots.values() {
        let mut node = ROOT;
        for depth in 0..TREE_DEPTH - 1 {
            let slot = 4 * ((d.id >> (24 - 8 * depth)) & 0xFF) as usize;
            let next = u32_at(&blocks[node], slot) as usize;
            node = if next != 0 {
                next
            } else {
                blocks.push(vec![0u8; QBLK]);
                let b = blocks.len() - 1;
                blocks[node][slot..slot + 4].copy_from_slice(&(b as u32).to_le_bytes());
                b
            };
        }
        let slot = 4 * (d.id & 0xFF) as usize;
        if u32_at(&blocks[node], slot) != 0 {
            continue; // the same id twice: keep the first
        }
        let (data, used) = match open {
            Some(o) => o,
            None => {
                blocks.push(vec![0u8; QBLK]);
                (blocks.len() - 1, 0)
            }
        };
        let at = DATA_HEADER + used * ENTRY;
        d.encode(&mut blocks[data][at..at + ENTRY]);
        blocks[data][8..10].copy_from_slice(&((used + 1) as u16).to_le_bytes());
        blocks[node][slot..slot + 4].copy_from_slice(&(data as u32).to_le_bytes());
        open = (used + 1 < ENTRIES_PER_BLOCK).then_some((data, used + 1));
    }
    let n = blocks.len() as u32;
    let head = &mut blocks[0];
    head[0..4].copy_from_slice(&QUOTA_MAGIC[qtype].to_le_bytes());
    head[4..8].copy_from_slice(&QUOTA_VERSION.to_le_bytes());
    // Grace times, flags, blocks in the file, first free block, first block with free entries.
    let info = [
        GRACE as u32,
        GRACE as u32,
        0,
        n,
        0,
        open.map_or(0, |o| o.0 as u32),
    ];
    for (k, v) in info.iter().enumerate() {
        head[INFO_OFF + 4 * k..INFO_OFF + 4 * k + 4].copy_from_slice(&v.to_le_bytes());
    }
    blocks.concat()
}

/// The quota inode numbers the superblock names, per type (0: none).
pub fn inodes(fs: &Fs) -> [u32; QTYPES] {
    let sb = &fs.sb;
    [
        sb.s_usr_quota_inum.get(),
        sb.s_grp_quota_inum.get(),
        sb.s_prj_quota_inum.get(),
    ]
}

/// Why quota file `ino` of type `qtype` must be rewritten for `usage`, or `None` if it records
/// exactly that usage. A file that reads gives one line per id, in e2fsck's words
/// ("actual" is the usage counted, "expected" what the file records).
fn stale(fs: &Fs, qtype: usize, ino: u32, usage: &BTreeMap<u32, (u64, u64)>) -> Option<String> {
    let file = match read_file(fs, ino) {
        Ok(f) => f,
        Err(e) => return Some(e),
    };
    let dquots = match parse(qtype, &file) {
        Ok(d) => d,
        Err(e) => return Some(format!("quota file inode {ino}: {e}")),
    };
    let mut lines = Vec::new();
    let mut seen = HashSet::new();
    for d in &dquots {
        seen.insert(d.id);
        let (space, inodes) = usage.get(&d.id).copied().unwrap_or((0, 0));
        if (d.curspace, d.curinodes) != (space, inodes) {
            lines.push(format!(
                "[QUOTA WARNING] Usage inconsistent for ID {}:actual ({space}, {inodes}) != expected ({}, {})",
                d.id, d.curspace, d.curinodes
            ));
        }
    }
    for id in usage.keys().filter(|id| !seen.contains(id)) {
        lines.push(format!("[QUOTA WARNING] Missing quota entry ID {id}"));
    }
    (!lines.is_empty()).then(|| lines.join("\n"))
}

/// Check the quota files the superblock names against the usage pass 1 counted.
pub fn check(fs: &Fs, usage: &Usage, policy: Policy, out: &mut Findings) {
    if !fs.sb.ro_compat().has(RoCompat::QUOTA) {
        return;
    }
    for (qtype, &ino) in inodes(fs).iter().enumerate() {
        if ino == 0 {
            continue;
        }
        if let Some(why) = stale(fs, qtype, ino, &usage.0[qtype]) {
            out.report(
                policy,
                P::P6_UPDATE_QUOTAS,
                ProblemCtx {
                    ino,
                    num: qtype as u64,
                    str: Some(why),
                    ..Default::default()
                },
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dq(id: u32, space: u64, inodes: u64) -> Dquot {
        Dquot {
            id,
            curspace: space,
            curinodes: inodes,
            bhardlimit: u64::from(id) * 10,
            ..Default::default()
        }
    }

    #[test]
    fn a_built_file_parses_back_to_its_records() {
        // Enough ids to fill more than one data block and to branch at every tree level.
        let ids = [0u32, 1, 2, 1000, 70_000, 16_777_300, 4_000_000_000]
            .into_iter()
            .chain(100..130);
        let all: BTreeMap<u32, Dquot> = ids.map(|i| (i, dq(i, u64::from(i) * 4096, 1))).collect();
        for qtype in 0..QTYPES {
            let file = build(qtype, &all);
            assert_eq!(file.len() % QBLK, 0);
            let back = parse(qtype, &file).unwrap();
            assert_eq!(back, all.values().copied().collect::<Vec<_>>());
        }
        // An all-zero record stays readable (marked with itime 1).
        let zero: BTreeMap<u32, Dquot> = [(0, Dquot::default())].into_iter().collect();
        let back = parse(0, &build(0, &zero)).unwrap();
        assert_eq!(back.len(), 1);
        assert_eq!(back[0].itime, 1);
    }

    #[test]
    fn a_looping_or_short_tree_is_an_error() {
        let all: BTreeMap<u32, Dquot> = [(5, dq(5, 1, 1))].into_iter().collect();
        let mut file = build(0, &all);
        // The root's slot for id 5's first byte points back at the root.
        file[QBLK..QBLK + 4].copy_from_slice(&1u32.to_le_bytes());
        assert!(parse(0, &file).is_err());
        let mut file = build(0, &all);
        file[QBLK..QBLK + 4].copy_from_slice(&1000u32.to_le_bytes());
        assert!(parse(0, &file).is_err());
        assert!(parse(0, &file[..QBLK]).is_err());
        assert!(parse(1, &build(0, &all)).is_err(), "wrong type's magic");
    }

    #[test]
    fn merging_keeps_limits_and_takes_the_counted_usage() {
        let old = [dq(7, 999, 9)];
        let usage: BTreeMap<u32, (u64, u64)> =
            [(7, (4096, 2)), (8, (1024, 1))].into_iter().collect();
        let m = merge(&old, &usage, 1000);
        assert_eq!(m[&7].bhardlimit, 70);
        assert_eq!((m[&7].curspace, m[&7].curinodes), (4096, 2));
        assert_eq!((m[&8].curspace, m[&8].curinodes), (1024, 1));
    }
}
