//! Inodes: read one by number, judge its checksum, edit it and write it back with its checksum
//! recomputed. The one place the passes and the repairs go through for an inode's bytes (as
//! libext2fs' `ext2fs_read_inode_full` / `ext2fs_write_inode_full` serve e2fsck).
//!
//! An inode is found from its group's descriptor (`Fs::inode_offset`): a number outside the
//! file system, or a group whose inode table lies beyond the device, gives `None`, never a
//! panic. A checksum mismatch is not an error: it is a [`Csum`] value the caller judges.

use crate::fs::Fs;
use ffsck_format::inode::{inode_checksum, set_inode_checksum, RawInode};
use ffsck_io::Device;
use zerocopy::IntoBytes;

/// The verdict on an inode's checksum.
///
/// (Pass 1's scan judges the inodes it reads three at a time with
/// `format::inode::inode_checksums_x3`; this is the one-inode form for any other reader.)
#[allow(dead_code)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Csum {
    /// The file system has no `metadata_csum`: nothing to check.
    Unchecked,
    Good,
    /// The stored value differs from the computed one (both as wide as the inode stores it).
    Bad {
        stored: u32,
        computed: u32,
    },
}

/// The on-disk bytes of one inode (all `s_inode_size` of them) and where they lie.
#[derive(Clone, Debug)]
pub(crate) struct Inode {
    pub ino: u32,
    /// Byte offset on the device.
    pub off: u64,
    pub raw: Vec<u8>,
}

impl Inode {
    /// The fixed fields, decoded.
    pub fn parse(&self) -> RawInode {
        RawInode::parse(&self.raw)
    }

    /// The checksum verdict under `fs`'s features.
    #[allow(dead_code)]
    pub fn csum(&self, fs: &Fs) -> Csum {
        verdict(fs, self.ino, &self.raw)
    }

    /// Store `inode`'s fixed fields back into the bytes (the extra space after them is kept).
    pub fn set(&mut self, inode: &RawInode) {
        let n = self.raw.len().min(inode.as_bytes().len());
        self.raw[..n].copy_from_slice(&inode.as_bytes()[..n]);
    }
}

/// The checksum verdict of inode `ino` whose bytes are `raw`.
#[allow(dead_code)]
pub(crate) fn verdict(fs: &Fs, ino: u32, raw: &[u8]) -> Csum {
    if !fs.has_metadata_csum() {
        return Csum::Unchecked;
    }
    let (computed, stored, _) = inode_checksum(raw, fs.csum_seed, ino);
    if computed == stored {
        Csum::Good
    } else {
        Csum::Bad { stored, computed }
    }
}

/// Read the on-disk bytes of inode `ino` from the file system's device; `None` for a number
/// outside the file system or a failed read.
pub(crate) fn read(fs: &Fs, ino: u32) -> Option<Vec<u8>> {
    fs.read_inode(ino)
}

/// Read inode `ino` as `dev` (the device, or an overlay a repair writes to) has it now.
pub(crate) fn read_from(fs: &Fs, dev: &dyn Device, ino: u32) -> Option<Inode> {
    let off = fs.inode_offset(ino)?;
    let mut raw = vec![0u8; fs.geo.inode_size as usize];
    dev.read_at(&mut raw, off).ok()?;
    Some(Inode { ino, off, raw })
}

/// Write `inode` back to `dev`, its checksum recomputed first when the file system has
/// `metadata_csum`. False if the write failed.
pub(crate) fn write(fs: &Fs, dev: &dyn Device, inode: &mut Inode) -> bool {
    if fs.has_metadata_csum() {
        set_inode_checksum(&mut inode.raw, fs.csum_seed, inode.ino);
    }
    dev.write_at(&inode.raw, inode.off).is_ok()
}

/// Read inode `ino` from `dev`, let `change` edit its bytes, and write it back with its
/// checksum recomputed. False if it could not be read or written.
pub(crate) fn edit_raw(
    fs: &Fs,
    dev: &dyn Device,
    ino: u32,
    change: impl FnOnce(&mut [u8]),
) -> bool {
    let Some(mut inode) = read_from(fs, dev, ino) else {
        return false;
    };
    change(&mut inode.raw);
    write(fs, dev, &mut inode)
}

/// Read inode `ino` from `dev`, let `change` edit its fixed fields, and write it back with its
/// checksum recomputed.
pub(crate) fn edit(
    fs: &Fs,
    dev: &dyn Device,
    ino: u32,
    change: impl FnOnce(&mut RawInode),
) -> bool {
    edit_raw(fs, dev, ino, |raw| {
        let mut inode = RawInode::parse(raw);
        change(&mut inode);
        let n = raw.len().min(inode.as_bytes().len());
        raw[..n].copy_from_slice(&inode.as_bytes()[..n]);
    })
}

/// The checksum seed of inode `ino`'s metadata blocks (directory, extent, xattr-in-inode
/// checksums), from its generation on disk.
pub(crate) fn seed(fs: &Fs, ino: u32) -> Option<u32> {
    let raw = read(fs, ino)?;
    Some(seed_of(fs, ino, &raw))
}

/// The same from the inode's bytes `raw` already read.
pub(crate) fn seed_of(fs: &Fs, ino: u32, raw: &[u8]) -> u32 {
    ffsck_format::csum::inode_seed(fs.csum_seed, ino, RawInode::parse(raw).i_generation.get())
}

/// The same for inode `ino` as `dev` has it now (a repair's overlay).
pub(crate) fn seed_from(fs: &Fs, dev: &dyn Device, ino: u32) -> Option<u32> {
    read_from(fs, dev, ino).map(|i| seed_of(fs, ino, &i.raw))
}

/// The value of the `system.data` attribute in the inode body (an inline file's bytes past
/// `i_block`), if present.
pub(crate) fn inline_data(raw: &[u8]) -> Option<Vec<u8>> {
    inline_data_range(raw).map(|r| raw[r].to_vec())
}

/// Where the value of `system.data` lies in the inode's bytes, if it is there (bounded by the
/// inode's size: a value past it is not there).
pub(crate) fn inline_data_range(raw: &[u8]) -> Option<std::ops::Range<usize>> {
    let inode = RawInode::parse(raw);
    let start = 128 + usize::from(inode.extra_isize());
    let magic = raw.get(start..start.checked_add(4)?)?;
    if u32::from_le_bytes([magic[0], magic[1], magic[2], magic[3]])
        != ffsck_format::xattr::IBODY_MAGIC
    {
        return None;
    }
    let area = &raw[start..];
    let entries = ffsck_format::xattr::parse_entries(area, 4, 4).ok()?;
    let e = entries
        .into_iter()
        .find(|e| e.raw.e_name_index == 7 && e.name == b"data")?;
    let off = start + 4 + usize::from(e.raw.e_value_offs.get());
    let len = e.raw.e_value_size.get() as usize;
    (off + len <= raw.len()).then_some(off..off + len)
}

#[cfg(test)]
mod tests {
    use super::*;
    use ffsck_format::{Geometry, RawGroupDesc, RawSuperblock, RoCompat};
    use ffsck_io::MemDevice;
    use std::sync::Arc;

    /// A 1 KiB-block file system of one group whose inode table starts at block 5, on a
    /// device of `blocks` blocks, with `metadata_csum` if `csum`.
    fn image(csum: bool, blocks: usize) -> (Fs, Arc<MemDevice>) {
        let mut sb = RawSuperblock::parse(&[0u8; 1024]).expect("superblock");
        sb.s_magic.set(ffsck_format::EXT2_MAGIC);
        sb.s_rev_level.set(1);
        sb.s_inode_size.set(256);
        sb.s_inodes_count.set(16);
        sb.s_inodes_per_group.set(16);
        sb.s_blocks_count_lo.set(64);
        sb.s_blocks_per_group.set(8192);
        sb.s_first_data_block.set(1);
        sb.s_first_ino.set(11);
        if csum {
            sb.s_feature_ro_compat.set(RoCompat::METADATA_CSUM);
        }
        let geo = Geometry::new(&sb).expect("geometry");
        let mut gd = RawGroupDesc::parse(&[0u8; 64], 32);
        gd.set_inode_table(5);
        let dev = Arc::new(MemDevice::new(vec![0u8; blocks * 1024]));
        let fs = Fs {
            dev: dev.clone(),
            csum_seed: sb.csum_seed(),
            sb,
            sb_block: 0,
            geo,
            groups: vec![gd],
        };
        (fs, dev)
    }

    #[test]
    fn inodes_are_found_by_group_and_bounded_by_it() {
        let (fs, dev) = image(false, 64);
        let i = read_from(&fs, &*dev, 3).expect("inode 3");
        assert_eq!((i.off, i.raw.len()), (5 * 1024 + 2 * 256, 256));
        assert_eq!(i.csum(&fs), Csum::Unchecked);
        // Outside the file system, and inode 0.
        assert!(read_from(&fs, &*dev, 17).is_none());
        assert!(read_from(&fs, &*dev, 0).is_none());
        assert!(read(&fs, 17).is_none());
        // An inode table past the end of the device: no inode, no panic.
        let (fs, dev) = image(false, 6);
        assert!(read_from(&fs, &*dev, 16).is_none());
    }

    #[test]
    fn a_write_seals_the_checksum_and_a_changed_byte_breaks_it() {
        let (fs, dev) = image(true, 64);
        assert!(edit(&fs, &*dev, 12, |i| {
            i.i_mode.set(0o100644);
            i.i_links_count.set(1);
            i.i_generation.set(42);
        }));
        let i = read_from(&fs, &*dev, 12).expect("inode 12");
        assert_eq!(i.parse().links_count(), 1);
        assert_eq!(i.csum(&fs), Csum::Good);
        assert_eq!(
            seed_from(&fs, &*dev, 12),
            Some(ffsck_format::csum::inode_seed(fs.csum_seed, 12, 42))
        );
        // A byte changed behind the layer's back: the verdict says so, with both values.
        let mut raw = i.raw.clone();
        raw[0x20] ^= 1;
        assert!(
            matches!(verdict(&fs, 12, &raw), Csum::Bad { stored, computed } if stored != computed)
        );
        // The same bytes under another inode number do not verify either.
        assert!(matches!(verdict(&fs, 13, &i.raw), Csum::Bad { .. }));
        // Written back through the layer, they verify again.
        assert!(edit_raw(&fs, &*dev, 12, |r| r[0x20] ^= 1));
        assert_eq!(
            read_from(&fs, &*dev, 12).expect("inode").csum(&fs),
            Csum::Good
        );
    }

    #[test]
    fn inline_data_is_found_only_inside_the_inode() {
        let mut raw = vec![0u8; 256];
        raw[128..130].copy_from_slice(&32u16.to_le_bytes());
        assert_eq!(inline_data_range(&raw), None);
        // The in-inode attribute magic, then one entry `system.data` of 4 bytes.
        let start = 128 + 32;
        raw[start..start + 4].copy_from_slice(&ffsck_format::xattr::IBODY_MAGIC.to_le_bytes());
        let e = start + 4;
        raw[e] = 4; // name length
        raw[e + 1] = 7; // system.
        raw[e + 2..e + 4].copy_from_slice(&40u16.to_le_bytes());
        raw[e + 8..e + 12].copy_from_slice(&4u32.to_le_bytes());
        raw[e + 16..e + 20].copy_from_slice(b"data");
        raw[start + 4 + 40..start + 4 + 44].copy_from_slice(b"abcd");
        assert_eq!(inline_data(&raw).as_deref(), Some(&b"abcd"[..]));
        // A value said to run past the inode is not there.
        raw[e + 8..e + 12].copy_from_slice(&400u32.to_le_bytes());
        assert_eq!(inline_data_range(&raw), None);
    }
}
