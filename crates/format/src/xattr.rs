//! Extended attribute blocks and in-inode attribute areas: headers, entries, checksum.

use crate::csum;
use zerocopy::little_endian::{U16, U32};
use zerocopy::{FromBytes, Immutable, IntoBytes, KnownLayout, Unaligned};

pub const XATTR_MAGIC: u32 = 0xEA02_0000;
/// The magic of the first version of the xattr block format (e2fsck `-E ea_ver=1`).
pub const XATTR_MAGIC_V1: u32 = 0xEA01_0000;

#[derive(FromBytes, IntoBytes, KnownLayout, Immutable, Unaligned, Clone, Copy, Default, Debug)]
#[repr(C)]
pub struct XattrBlockHeader {
    pub h_magic: U32,         // 0x00
    pub h_refcount: U32,      // 0x04
    pub h_blocks: U32,        // 0x08
    pub h_hash: U32,          // 0x0C
    pub h_checksum: U32,      // 0x10
    pub h_reserved: [U32; 3], // 0x14
}
const _: () = assert!(core::mem::size_of::<XattrBlockHeader>() == 32);

/// One attribute entry (followed by its name, padded to 4 bytes).
#[derive(FromBytes, IntoBytes, KnownLayout, Immutable, Unaligned, Clone, Copy, Default, Debug)]
#[repr(C)]
pub struct XattrEntry {
    pub e_name_len: u8,    // 0x0
    pub e_name_index: u8,  // 0x1
    pub e_value_offs: U16, // 0x2
    pub e_value_inum: U32, // 0x4
    pub e_value_size: U32, // 0x8
    pub e_hash: U32,       // 0xC
}
pub const ENTRY_SIZE: usize = 16;

/// A parsed entry with its position and name.
#[derive(Clone, Debug)]
pub struct Entry {
    pub offset: usize,
    pub raw: XattrEntry,
    pub name: Vec<u8>,
}

/// What is wrong with an attribute area.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum AreaError {
    /// An entry runs past the end of the area.
    EntryOverrun,
    /// A value lies outside the area or overlaps the entry table.
    BadValue,
}

/// Walk the entries of an attribute area; `entries` starts at the first entry, and values are
/// offsets from `value_base` within `area`. Bounded by the area size.
pub fn parse_entries(
    area: &[u8],
    first: usize,
    value_base: usize,
) -> Result<Vec<Entry>, AreaError> {
    let mut out = Vec::new();
    let mut off = first;
    loop {
        if off + 4 > area.len() {
            return Err(AreaError::EntryOverrun);
        }
        // A zero u32 ends the table.
        if area[off..off + 4] == [0, 0, 0, 0] {
            break;
        }
        if off + ENTRY_SIZE > area.len() {
            return Err(AreaError::EntryOverrun);
        }
        let raw = XattrEntry::read_from_bytes(&area[off..off + ENTRY_SIZE])
            .map_err(|_| AreaError::EntryOverrun)?;
        let name_end = off + ENTRY_SIZE + usize::from(raw.e_name_len);
        if name_end > area.len() {
            return Err(AreaError::EntryOverrun);
        }
        let name = area[off + ENTRY_SIZE..name_end].to_vec();
        if raw.e_value_inum.get() == 0 && raw.e_value_size.get() != 0 {
            let vo = value_base + usize::from(raw.e_value_offs.get());
            let vs = raw.e_value_size.get() as usize;
            if vo.checked_add(vs).is_none_or(|e| e > area.len()) {
                return Err(AreaError::BadValue);
            }
        }
        out.push(Entry {
            offset: off,
            raw,
            name,
        });
        off = (name_end + 3) & !3;
    }
    Ok(out)
}

/// The checksum of an attribute block at `blocknr`, with `h_checksum` taken as zero.
pub fn block_checksum(block: &[u8], fs_seed: u32, blocknr: u64) -> u32 {
    let c = csum::ext4_crc32c(fs_seed, &blocknr.to_le_bytes());
    let c = csum::ext4_crc32c(c, &block[..0x10]);
    let c = csum::ext4_crc32c(c, &[0u8; 4]);
    csum::ext4_crc32c(c, &block[0x14..])
}

/// Magic that starts the in-inode attribute area (after `i_extra_isize`).
pub const IBODY_MAGIC: u32 = XATTR_MAGIC;
