//! Pass 1 xattr checks: the in-inode attribute area, attribute blocks, and the inodes that
//! hold large values (`ea_inode`), with what each charges to its owner's `i_blocks`.
//!
//! e2fsck 1.47.0 is the reference: an attribute area is laid out as a set of non-overlapping
//! regions (header, entries, values, end marker); values may live in another inode, whose size
//! (rounded up to clusters) is then charged to the owner. Every inode named by an entry gets a
//! reference, which pass 4 compares with the count the ea_inode stores.

use super::blockmap::BlockWalk;
use super::{report, EaBlock, GroupOut, InodeCheck, Scan};
use crate::problem::Problem as P;
use crate::report::ProblemCtx;
use ffsck_format::inode::{flags as iflags, RawInode, GOOD_OLD_INODE_SIZE};
use ffsck_format::xattr::{self as fx, XattrBlockHeader, XATTR_MAGIC};
use ffsck_format::Compat;
use zerocopy::FromBytes;

/// Blocks an inode's xattrs charge to it beyond its own mapping (e2fsck's `ea_quota`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(super) struct EaQuota {
    /// File-system blocks (always whole clusters).
    pub blocks: u64,
    /// Value inodes referenced.
    pub inodes: u64,
}

/// Byte ranges already taken in an attribute area; an overlap or a range outside the area is
/// a collision. Bounded by the number of entries the area can hold.
struct Regions {
    size: usize,
    taken: Vec<(usize, usize)>,
}

impl Regions {
    fn new(size: usize) -> Self {
        Regions {
            size,
            taken: Vec::new(),
        }
    }
    /// Take `len` bytes at `start`; false on a collision.
    fn take(&mut self, start: usize, len: usize) -> bool {
        let Some(end) = start.checked_add(len) else {
            return false;
        };
        if end > self.size {
            return false;
        }
        if self.taken.iter().any(|&(s, e)| start < e && s < end) {
            return false;
        }
        self.taken.push((start, end));
        true
    }
}

/// Space an entry header plus its name occupies, 4-byte aligned.
fn entry_len(name_len: u8) -> usize {
    (fx::ENTRY_SIZE + usize::from(name_len) + 3) & !3
}

fn pad4(n: usize) -> usize {
    (n + 3) & !3
}

fn u32_at(b: &[u8], off: usize) -> u32 {
    match b.get(off..off + 4) {
        Some(s) => u32::from_le_bytes([s[0], s[1], s[2], s[3]]),
        None => 0,
    }
}

/// The name part of the entry hash, with name bytes taken as unsigned or (as some kernels
/// did) sign-extended chars.
fn name_hash(name: &[u8], signed: bool) -> u32 {
    let mut h: u32 = 0;
    for &c in name {
        let v = if signed {
            c as i8 as i32 as u32
        } else {
            u32::from(c)
        };
        h = (h << 5) ^ (h >> 27) ^ v;
    }
    h
}

fn mix_word(h: u32, w: u32) -> u32 {
    (h << 16) ^ (h >> 16) ^ w
}

/// The hash of an in-area value: every 32-bit word of the value, padding included.
fn value_hash(mut h: u32, value: &[u8]) -> u32 {
    for w in value.chunks(4) {
        let mut b = [0u8; 4];
        b[..w.len()].copy_from_slice(w);
        h = mix_word(h, u32::from_le_bytes(b));
    }
    h
}

/// Whether `want` matches the entry hash under either name signedness.
fn hash_matches(name: &[u8], value: &[u8], want: u32) -> bool {
    value_hash(name_hash(name, false), value) == want
        || value_hash(name_hash(name, true), value) == want
}

/// The value bytes an entry hashes: `size` bytes at `off` rounded up to whole words, cut at
/// the end of the area (e2fsck reads the padding that follows a value).
fn value_slice(area: &[u8], off: usize, size: usize) -> &[u8] {
    let end = off.saturating_add(pad4(size)).min(area.len());
    area.get(off.min(end)..end).unwrap_or(&[])
}

/// What checking one value-inode reference found.
struct EaInodeRef {
    problem: Option<(P, u64)>,
    /// Set only when the reference was judged valid enough to charge.
    quota_blocks: u64,
    /// The value inode lacks `EA_INODE_FL`; e2fsck offers to set it first.
    missing_flag: bool,
}

/// Validate an entry whose value lives in inode `inum` (e2fsck's large-EA check).
fn check_ea_inode_ref(scan: &Scan, ic: &InodeCheck, e: &fx::XattrEntry, name: &[u8]) -> EaInodeRef {
    let geo = &scan.fs.geo;
    let inum = e.e_value_inum.get();
    let bad_ino = EaInodeRef {
        problem: Some((P::P1_ATTR_VALUE_EA_INODE, u64::from(inum))),
        quota_blocks: 0,
        missing_flag: false,
    };
    if inum < geo.first_ino || inum > geo.inodes_count {
        return bad_ino;
    }
    let Some(raw) = crate::ext4::inode::read(scan.fs, inum) else {
        return bad_ino;
    };
    let target = RawInode::parse(&raw);
    // (1.47.0 does not compare e_value_size with the value inode's size.)
    let vsize = u64::from(e.e_value_size.get());
    // The value inode keeps the hash of its value in i_atime.
    let vh = target.i_atime.get();
    let want = e.e_hash.get();
    let ok =
        mix_word(name_hash(name, false), vh) == want || mix_word(name_hash(name, true), vh) == want;
    let quota_blocks = if ok {
        let cluster = u64::from(geo.block_size) * u64::from(geo.cluster_ratio);
        vsize.div_ceil(cluster) * u64::from(geo.cluster_ratio)
    } else if target.i_mtime.get() == ic.ino
        && target.i_generation.get() == ic.inode.i_generation.get()
    {
        // An old Lustre-style reference: back-pointer instead of hash, nothing charged.
        0
    } else if target.flags() & iflags::EA_INODE == 0 {
        return bad_ino;
    } else {
        return EaInodeRef {
            problem: Some((P::P1_ATTR_HASH, u64::from(want))),
            quota_blocks: 0,
            missing_flag: false,
        };
    };
    let missing_flag = target.flags() & iflags::EA_INODE == 0;
    EaInodeRef {
        problem: missing_flag.then_some((P::P1_ATTR_NO_EA_INODE_FL, u64::from(inum))),
        quota_blocks,
        missing_flag,
    }
}

/// Offer to set the missing `EA_INODE` flag of the value inode `r` names; once it is set, the
/// reference's only problem is gone.
fn offer_flag(
    scan: &Scan,
    out: &mut GroupOut,
    ic: &mut InodeCheck,
    e: &fx::XattrEntry,
    r: &mut EaInodeRef,
) {
    if !r.missing_flag {
        return;
    }
    let ctx = ProblemCtx {
        ino: ic.ino,
        num: u64::from(e.e_value_inum.get()),
        ..Default::default()
    };
    if !report(scan, out, ic, P::P1_ATTR_SET_EA_INODE_FL, ctx) {
        return;
    }
    scan.ea_inode_flag_set
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .insert(e.e_value_inum.get());
    if r.problem
        .is_some_and(|(p, _)| p == P::P1_ATTR_NO_EA_INODE_FL)
    {
        r.problem = None;
    }
}

/// Count one reference per value-inode entry of an area, walking entries as e2fsck does
/// (stopping at the end marker or at an entry that would run past the area).
fn add_ea_inode_refs(scan: &Scan, area: &[u8], first: usize) {
    let mut off = first;
    let mut found = Vec::new();
    for _ in 0..area.len() / fx::ENTRY_SIZE + 1 {
        if off >= area.len() || u32_at(area, off) == 0 {
            break;
        }
        let next = off + entry_len(area[off]);
        if next >= area.len() {
            break;
        }
        let inum = u32_at(area, off + 4);
        if inum != 0 {
            found.push(inum);
        }
        off = next;
    }
    if found.is_empty() {
        return;
    }
    let mut refs = scan.ea_inode_refs.lock().unwrap_or_else(|e| e.into_inner());
    for inum in found {
        let r = refs.entry(inum).or_insert(0);
        *r = r.saturating_add(1);
    }
}

/// Check the attribute area in the inode body (after `i_extra_isize`), if it has one.
pub(super) fn check_ibody(scan: &Scan, ic: &mut InodeCheck, out: &mut GroupOut) -> EaQuota {
    let mut quota = EaQuota::default();
    let isz = scan.fs.geo.inode_size as usize;
    let extra = usize::from(ic.inode.extra_isize());
    let max = isz - GOOD_OLD_INODE_SIZE;
    if extra + 4 >= max {
        return quota;
    }
    let raw = ic.raw;
    let area = &raw[GOOD_OLD_INODE_SIZE + extra..isz];
    if u32_at(area, 0) != fx::IBODY_MAGIC {
        return quota;
    }
    let storage = area.len();
    let mut regions = Regions::new(storage);
    regions.take(0, 4);
    // Values are offsets from just after the magic.
    let values = &area[4..];
    let mut remain = storage - 4;
    let mut off = 4usize;
    let mut problem: Option<(P, u64)> = None;
    // Each pass consumes at least 16 bytes of `remain`, so this bound is never reached early.
    for _ in 0..storage / fx::ENTRY_SIZE + 1 {
        if remain < fx::ENTRY_SIZE || u32_at(area, off) == 0 {
            break;
        }
        let Ok(e) = fx::XattrEntry::read_from_bytes(&area[off..off + fx::ENTRY_SIZE]) else {
            break;
        };
        if !regions.take(off, entry_len(e.e_name_len)) {
            problem = Some((P::P1_INODE_EA_ALLOC_COLLISION, 0));
            break;
        }
        remain -= fx::ENTRY_SIZE;
        let name_sz = pad4(usize::from(e.e_name_len));
        if name_sz > remain {
            problem = Some((P::P1_ATTR_NAME_LEN, u64::from(e.e_name_len)));
            break;
        }
        remain -= name_sz;
        let name_start = off + fx::ENTRY_SIZE;
        let name = &area[name_start..(name_start + usize::from(e.e_name_len)).min(storage)];
        let vsize = e.e_value_size.get() as usize;
        if e.e_value_inum.get() == 0 {
            if vsize > remain {
                problem = Some((P::P1_ATTR_VALUE_SIZE, vsize as u64));
                break;
            }
            let voff = usize::from(e.e_value_offs.get());
            if vsize != 0 && !regions.take(4 + voff, pad4(vsize)) {
                problem = Some((P::P1_INODE_EA_ALLOC_COLLISION, 0));
                break;
            }
            let want = e.e_hash.get();
            if want != 0 && !hash_matches(name, value_slice(values, voff, vsize), want) {
                problem = Some((P::P1_ATTR_HASH, u64::from(want)));
                break;
            }
            remain -= vsize;
        } else {
            let mut r = check_ea_inode_ref(scan, ic, &e, name);
            offer_flag(scan, out, ic, &e, &mut r);
            if let Some(p) = r.problem {
                problem = Some(p);
                break;
            }
            quota.blocks += r.quota_blocks;
            quota.inodes += 1;
        }
        off += entry_len(e.e_name_len);
    }
    if problem.is_none() && !regions.take(off, 4) {
        problem = Some((P::P1_INODE_EA_ALLOC_COLLISION, 0));
    }
    let fixed = if let Some((p, num)) = problem {
        report_num(scan, out, ic, p, num)
    } else {
        false
    };
    if fixed {
        // The repair drops every attribute of the area.
        return EaQuota::default();
    }
    add_ea_inode_refs(scan, area, 4);
    quota
}

/// Check the xattr block of an inode, count the reference, and charge it (and the value
/// inodes its entries name) to the inode.
pub(super) fn check_block(
    scan: &Scan,
    ic: &mut InodeCheck,
    out: &mut GroupOut,
    blk: u64,
    w: &mut BlockWalk,
) {
    let fs = scan.fs;
    let geo = &fs.geo;
    let ratio = u64::from(geo.cluster_ratio);
    if !geo.compat.has(Compat::EXT_ATTR) || blk < geo.first_data_block || blk >= geo.blocks_count {
        // Reported by pass 2 when it reaches an entry for this inode, as e2fsck does.
        return;
    }
    // Held through the first sight of a block so two workers never both validate it.
    let mut refs = scan.ea_refs.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(e) = refs.get_mut(&blk) {
        // Seen before: count the reference and charge what the first sight found.
        e.seen += 1;
        w.num_blocks += e.quota_blocks / ratio;
        return;
    }
    let ino = ic.ino;
    let ctx = ProblemCtx {
        ino,
        blk,
        ..Default::default()
    };
    let Some(buf) = fs.read_block(blk) else {
        report(scan, out, ic, P::P1_READ_EA_BLOCK, ctx);
        return;
    };
    let bs = buf.len();
    let hdr = XattrBlockHeader::read_from_prefix(&buf)
        .map(|(h, _)| h)
        .unwrap_or_default();
    let magic_ok = hdr.h_magic.get() == scan.policy.overrides().xattr_magic();
    if !magic_ok && report(scan, out, ic, P::P1_BAD_EA_BLOCK, ctx.clone()) {
        return;
    }
    if hdr.h_blocks.get() != 1 && report(scan, out, ic, P::P1_EA_MULTI_BLOCK, ctx.clone()) {
        return;
    }
    // The library only verifies the checksum of a block whose header it accepts.
    let header_ok =
        matches!(hdr.h_magic.get(), XATTR_MAGIC | fx::XATTR_MAGIC_V1) && hdr.h_blocks.get() == 1;
    let csum_failed = header_ok
        && fs.has_metadata_csum()
        && fx::block_checksum(&buf, fs.csum_seed, blk) != hdr.h_checksum.get();

    let mut regions = Regions::new(bs);
    regions.take(0, 32);
    let mut quota_blocks = ratio;
    let mut off = 32usize;
    for _ in 0..bs / fx::ENTRY_SIZE + 1 {
        if off >= bs || u32_at(&buf, off) == 0 {
            break;
        }
        let name_len = buf[off];
        if !regions.take(off, entry_len(name_len)) {
            if report(scan, out, ic, P::P1_EA_ALLOC_COLLISION, ctx.clone()) {
                return;
            }
            break;
        }
        // The region check above keeps the whole entry and its name inside the block.
        let Ok(e) = fx::XattrEntry::read_from_bytes(&buf[off..off + fx::ENTRY_SIZE]) else {
            break;
        };
        // Version 1 names carry no index (and may not be empty); version 2 names must.
        let bad_name = match scan.policy.overrides().ea_ver {
            Some(1) => e.e_name_len == 0 || e.e_name_index != 0,
            _ => e.e_name_index == 0,
        };
        if bad_name {
            if report(scan, out, ic, P::P1_EA_BAD_NAME, ctx.clone()) {
                return;
            }
            break;
        }
        let name = &buf[off + fx::ENTRY_SIZE..off + fx::ENTRY_SIZE + usize::from(name_len)];
        if e.e_value_inum.get() == 0 {
            let voff = usize::from(e.e_value_offs.get());
            let vsize = e.e_value_size.get() as usize;
            if voff + vsize > bs {
                if report(scan, out, ic, P::P1_EA_BAD_VALUE, ctx.clone()) {
                    return;
                }
                break;
            }
            if vsize != 0
                && !regions.take(voff, pad4(vsize))
                && report(scan, out, ic, P::P1_EA_ALLOC_COLLISION, ctx.clone())
            {
                return;
            }
            let want = e.e_hash.get();
            if !hash_matches(name, value_slice(&buf, voff, vsize), want)
                && report(
                    scan,
                    out,
                    ic,
                    P::P1_ATTR_HASH,
                    ProblemCtx {
                        num: u64::from(want),
                        ..ctx.clone()
                    },
                )
            {
                return;
            }
        } else {
            let mut r = check_ea_inode_ref(scan, ic, &e, name);
            offer_flag(scan, out, ic, &e, &mut r);
            if let Some((p, num)) = r.problem {
                if report(scan, out, ic, p, ProblemCtx { num, ..ctx.clone() }) {
                    return;
                }
            }
            quota_blocks += r.quota_blocks;
        }
        off += entry_len(name_len);
    }
    if !regions.take(off, 4) && report(scan, out, ic, P::P1_EA_ALLOC_COLLISION, ctx.clone()) {
        return;
    }
    if csum_failed {
        report(scan, out, ic, P::P1_EA_BLOCK_ONLY_CSUM_INVALID, ctx);
    }
    add_ea_inode_refs(scan, &buf, 32);
    refs.insert(
        blk,
        EaBlock {
            disk_refcount: hdr.h_refcount.get(),
            seen: 1,
            quota_blocks,
        },
    );
    drop(refs);
    w.num_blocks += quota_blocks / ratio;
    scan.claim(out, blk, 1);
}

/// Walk one attribute area as the library's xattr reader does for inline data, looking for
/// `system.data`. `entries` is where the entry table starts in `area`; values are offsets
/// from `value_base`. `Err(())` when the reader would reject the area.
fn scan_for_inline_data(
    area: &[u8],
    entries: usize,
    value_base: usize,
    ea_inode_fs: bool,
) -> Result<bool, ()> {
    let storage = area.len() - entries;
    // First the entry table alone: every name must fit in what is left.
    let mut remain = storage;
    let mut off = entries;
    for _ in 0..storage / fx::ENTRY_SIZE + 1 {
        if remain < fx::ENTRY_SIZE || u32_at(area, off) == 0 {
            break;
        }
        remain -= fx::ENTRY_SIZE;
        let name_sz = pad4(usize::from(area[off]));
        if name_sz > remain {
            return Err(());
        }
        remain -= name_sz;
        off += entry_len(area[off]);
    }
    let table_end = off;
    let mut found = false;
    let mut remain = storage;
    let mut off = entries;
    for _ in 0..storage / fx::ENTRY_SIZE + 1 {
        if remain < fx::ENTRY_SIZE || u32_at(area, off) == 0 {
            break;
        }
        let Ok(e) = fx::XattrEntry::read_from_bytes(&area[off..off + fx::ENTRY_SIZE]) else {
            return Err(());
        };
        remain -= fx::ENTRY_SIZE + pad4(usize::from(e.e_name_len));
        let name_start = off + fx::ENTRY_SIZE;
        let name = &area[name_start..(name_start + usize::from(e.e_name_len)).min(area.len())];
        let vsize = e.e_value_size.get() as usize;
        if e.e_value_inum.get() != 0 {
            if !ea_inode_fs {
                return Err(());
            }
        } else {
            if vsize > remain {
                return Err(());
            }
            let voff = value_base + usize::from(e.e_value_offs.get());
            if voff + vsize > area.len() || (vsize > 0 && voff < table_end + 4) {
                return Err(());
            }
            let want = e.e_hash.get();
            if want != 0 && !hash_matches(name, value_slice(area, voff, vsize), want) {
                return Err(());
            }
            remain -= vsize;
        }
        // system.data: name index 7 ("system."), name "data".
        if e.e_name_index == 7 && name == b"data" {
            found = true;
        }
        off += entry_len(e.e_name_len);
    }
    Ok(found)
}

/// Whether the xattrs of an inline-data inode can be read and hold `system.data` (what
/// e2fsck asks of every inode with `INLINE_DATA_FL`).
pub(super) fn inline_data_attr_ok(scan: &Scan, ic: &InodeCheck) -> bool {
    let fs = scan.fs;
    let geo = &fs.geo;
    if !geo.compat.has(Compat::EXT_ATTR) {
        return false;
    }
    let ea_inode_fs = geo.incompat.has(ffsck_format::Incompat::EA_INODE);
    let isz = geo.inode_size as usize;
    let extra = usize::from(ic.inode.extra_isize());
    let mut found = false;
    if isz > GOOD_OLD_INODE_SIZE && extra >= 2 && isz > GOOD_OLD_INODE_SIZE + extra + 4 {
        if extra & 3 != 0 {
            return false;
        }
        let area = &ic.raw[GOOD_OLD_INODE_SIZE + extra..isz];
        if u32_at(area, 0) == fx::IBODY_MAGIC {
            match scan_for_inline_data(&area[4..], 0, 0, ea_inode_fs) {
                Ok(f) => found |= f,
                Err(()) => return false,
            }
        }
    }
    let blk = ic.inode.file_acl(geo.sixty_four_bit());
    if blk != 0 {
        if blk < geo.first_data_block || blk >= geo.blocks_count {
            return false;
        }
        let Some(buf) = fs.read_block(blk) else {
            return false;
        };
        let hdr = XattrBlockHeader::read_from_prefix(&buf)
            .map(|(h, _)| h)
            .unwrap_or_default();
        if hdr.h_magic.get() != XATTR_MAGIC || hdr.h_blocks.get() != 1 {
            return false;
        }
        if fs.has_metadata_csum()
            && fx::block_checksum(&buf, fs.csum_seed, blk) != hdr.h_checksum.get()
        {
            return false;
        }
        match scan_for_inline_data(&buf, 32, 0, ea_inode_fs) {
            Ok(f) => found |= f,
            Err(()) => return false,
        }
    }
    found
}

/// Report `p` for the inode being checked, with `num` as its number.
fn report_num(scan: &Scan, out: &mut GroupOut, ic: &mut InodeCheck, p: P, num: u64) -> bool {
    let ino = ic.ino;
    report(
        scan,
        out,
        ic,
        p,
        ProblemCtx {
            ino,
            num,
            ..Default::default()
        },
    )
}
