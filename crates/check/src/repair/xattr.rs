//! Extended-attribute repairs, as e2fsck makes them: a corrupt attribute block is detached
//! from the inode (`i_file_acl` cleared; the block becomes free and `i_blocks` shrinks in the
//! same round's fixes), a corrupt in-inode area loses all its attributes (its magic is
//! zeroed), a value inode gets its missing `EA_INODE` flag, and block checksums, block
//! reference counts and value-inode reference counts are rewritten.

use super::inode::{edit, edit_raw};
use crate::pass0::Pass0Facts;
use crate::problem::{Fixer, Problem as P};
use crate::report::Finding;
use ffsck_format::inode::{flags, GOOD_OLD_INODE_SIZE};
use ffsck_format::xattr::block_checksum;
use ffsck_io::Device;

/// Problems whose fix drops the attributes they were found in: the block when the finding
/// names one, else the in-inode area.
fn drops_attrs(p: P) -> bool {
    matches!(
        p,
        P::P1_READ_EA_BLOCK
            | P::P1_BAD_EA_BLOCK
            | P::P1_EA_MULTI_BLOCK
            | P::P1_EA_ALLOC_COLLISION
            | P::P1_EA_BAD_NAME
            | P::P1_EA_BAD_VALUE
            | P::P1_ATTR_HASH
            | P::P1_ATTR_NAME_LEN
            | P::P1_ATTR_VALUE_OFFSET
            | P::P1_ATTR_VALUE_BLOCK
            | P::P1_ATTR_VALUE_SIZE
            | P::P1_INODE_EA_ALLOC_COLLISION
            | P::P1_ATTR_VALUE_EA_INODE
            | P::P1_ATTR_NO_EA_INODE_FL
    )
}

pub fn apply(p0: &Pass0Facts, dev: &dyn Device, fixes: &[&Finding]) {
    for f in fixes.iter().filter(|f| f.problem.fixed_by(Fixer::Xattr)) {
        let c = &f.ctx;
        match f.problem {
            p if drops_attrs(p) && c.blk != 0 => edit(p0, dev, c.ino, |i| {
                i.i_file_acl_lo.set(0);
                i.l_i_file_acl_high.set(0);
            }),
            p if drops_attrs(p) => drop_ibody(p0, dev, c.ino),
            P::P1_ATTR_SET_EA_INODE_FL => {
                if let Ok(value_ino) = u32::try_from(c.num) {
                    edit(p0, dev, value_ino, |i| {
                        i.i_flags.set(i.i_flags.get() | flags::EA_INODE);
                    })
                }
            }
            P::P1_EA_BLOCK_ONLY_CSUM_INVALID => rewrite_block(p0, dev, c.blk, None),
            P::P1_EXTATTR_REFCOUNT => {
                rewrite_block(p0, dev, c.blk, u32::try_from(c.num2).ok());
            }
            // The count is kept in i_ctime (high half) and l_i_version (low half).
            P::P4_EA_INODE_REF_COUNT => edit(p0, dev, c.ino, |i| {
                i.i_ctime.set((c.num2 >> 32) as u32);
                i.l_i_version.set(c.num2 as u32);
            }),
            _ => {}
        }
    }
}

/// Zero the magic of inode `ino`'s in-body attribute area: every attribute in it is gone.
fn drop_ibody(p0: &Pass0Facts, dev: &dyn Device, ino: u32) {
    edit_raw(p0, dev, ino, |raw| {
        if raw.len() <= GOOD_OLD_INODE_SIZE + 4 {
            return;
        }
        let extra = usize::from(u16::from_le_bytes([raw[0x80], raw[0x81]]));
        let at = GOOD_OLD_INODE_SIZE + extra;
        if at + 4 <= raw.len() {
            raw[at..at + 4].fill(0);
        }
    });
}

/// Rewrite attribute block `blk` with a new reference count (if given) and its checksum.
fn rewrite_block(p0: &Pass0Facts, dev: &dyn Device, blk: u64, refcount: Option<u32>) {
    let fs = &p0.fs;
    if blk == 0 || !fs.geo.is_valid_block(blk) {
        return;
    }
    let bs = fs.block_size();
    let mut buf = vec![0u8; bs];
    if dev.read_at(&mut buf, blk * bs as u64).is_err() {
        return;
    }
    if let Some(r) = refcount {
        buf[4..8].copy_from_slice(&r.to_le_bytes());
    }
    if fs.has_metadata_csum() {
        let c = block_checksum(&buf, fs.csum_seed, blk);
        buf[0x10..0x14].copy_from_slice(&c.to_le_bytes());
    }
    let _ = dev.write_at(&buf, blk * bs as u64);
}
