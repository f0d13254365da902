//! Directory blocks: linear entries, the checksum tail, and htree (dx) root and node headers.

use crate::csum;
use zerocopy::little_endian::{U16, U32};
use zerocopy::{FromBytes, Immutable, IntoBytes, KnownLayout, Unaligned};

/// `file_type` values of directory entries (EXT2_FT_*).
pub mod ft {
    pub const UNKNOWN: u8 = 0;
    pub const REG: u8 = 1;
    pub const DIR: u8 = 2;
    pub const CHRDEV: u8 = 3;
    pub const BLKDEV: u8 = 4;
    pub const FIFO: u8 = 5;
    pub const SOCK: u8 = 6;
    pub const SYMLINK: u8 = 7;
    pub const MAX: u8 = 8;
    /// Marks the fake entry that holds a leaf block's checksum.
    pub const CSUM_TAIL: u8 = 0xDE;
}

/// Size of the checksum tail entry at the end of each leaf block with `metadata_csum`.
pub const TAIL_SIZE: usize = 12;
pub const NAME_MAX: usize = 255;

/// The 8-byte header of a directory entry.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DirentHeader {
    pub inode: u32,
    pub rec_len: u32,
    pub name_len: u8,
    pub file_type: u8,
}

/// Decode `rec_len` as the kernel does: 65536-byte blocks store 0 or 65535 for a full block,
/// and the low two bits of larger lengths carry high bits.
pub fn decode_rec_len(raw: u16, block_size: u32) -> u32 {
    let len = u32::from(raw);
    if block_size < 65536 {
        return len;
    }
    if len == 65535 || len == 0 {
        return block_size;
    }
    (len & 65532) | ((len & 3) << 16)
}

/// Encode a record length for a block of `block_size` bytes (the inverse of `decode_rec_len`).
pub fn encode_rec_len(len: u32, block_size: u32) -> u16 {
    if block_size < 65536 || len < 65536 {
        return len as u16;
    }
    if len == block_size {
        return 65535;
    }
    ((len & 65532) | ((len >> 16) & 3)) as u16
}

/// Read the entry header at `off`; `None` if fewer than 8 bytes remain.
pub fn header_at(block: &[u8], off: usize, block_size: u32) -> Option<DirentHeader> {
    let h = block.get(off..off + 8)?;
    Some(DirentHeader {
        inode: u32::from_le_bytes([h[0], h[1], h[2], h[3]]),
        rec_len: decode_rec_len(u16::from_le_bytes([h[4], h[5]]), block_size),
        name_len: h[6],
        file_type: h[7],
    })
}

/// The minimum `rec_len` an entry with a name of `name_len` bytes needs.
pub fn rec_len_for(name_len: usize) -> u32 {
    ((8 + name_len as u32) + 3) & !3
}

/// Does the block end in a well-formed checksum tail?
pub fn has_tail(block: &[u8]) -> bool {
    let n = block.len();
    if n < TAIL_SIZE {
        return false;
    }
    let t = &block[n - TAIL_SIZE..];
    t[0..4] == [0, 0, 0, 0]
        && u16::from_le_bytes([t[4], t[5]]) == TAIL_SIZE as u16
        && t[6] == 0
        && t[7] == ft::CSUM_TAIL
}

/// Leaf block checksum: crc of everything before the tail, seeded per inode.
pub fn leaf_checksum(block: &[u8], inode_seed: u32) -> u32 {
    csum::ext4_crc32c(inode_seed, &block[..block.len() - TAIL_SIZE])
}
pub fn stored_leaf_checksum(block: &[u8]) -> u32 {
    let n = block.len();
    u32::from_le_bytes([block[n - 4], block[n - 3], block[n - 2], block[n - 1]])
}

/// The fixed part of an htree root after the `.` and `..` entries (`struct dx_root_info`).
#[derive(FromBytes, IntoBytes, KnownLayout, Immutable, Unaligned, Clone, Copy, Default, Debug)]
#[repr(C)]
pub struct DxRootInfo {
    pub reserved_zero: U32,
    pub hash_version: u8,
    pub info_length: u8,
    pub indirect_levels: u8,
    pub unused_flags: u8,
}

/// `limit`/`count` header that starts every dx entry table.
#[derive(FromBytes, IntoBytes, KnownLayout, Immutable, Unaligned, Clone, Copy, Default, Debug)]
#[repr(C)]
pub struct DxCountLimit {
    pub limit: U16,
    pub count: U16,
}

/// Offset of the dx root info in block 0 of an indexed directory (after `.` and `..`).
pub const DX_ROOT_INFO_OFFSET: usize = 24;
/// Offset of the entry table in the root.
pub const DX_ROOT_ENTRIES_OFFSET: usize = 32;
/// Offset of the entry table in an interior node (after a fake empty dirent).
pub const DX_NODE_ENTRIES_OFFSET: usize = 8;

/// Hash versions.
pub mod hash {
    pub const LEGACY: u8 = 0;
    pub const HALF_MD4: u8 = 1;
    pub const TEA: u8 = 2;
    pub const LEGACY_UNSIGNED: u8 = 3;
    pub const HALF_MD4_UNSIGNED: u8 = 4;
    pub const TEA_UNSIGNED: u8 = 5;
    pub const SIPHASH: u8 = 6;
}

/// Read (hash, block) entry `i` of a dx table that starts at `off` (entry 0's hash slot holds
/// the count/limit header, so its hash reads as 0).
pub fn dx_entry(block: &[u8], off: usize, i: usize) -> Option<(u32, u32)> {
    let p = off + i * 8;
    let e = block.get(p..p + 8)?;
    let h = if i == 0 {
        0
    } else {
        u32::from_le_bytes([e[0], e[1], e[2], e[3]])
    };
    Some((h, u32::from_le_bytes([e[4], e[5], e[6], e[7]])))
}

/// Size of the `dx_tail` (reserved word + checksum) after an htree node's entry table.
pub const DX_TAIL_SIZE: usize = 8;

// The htree node checksum: `verify::dx_checksum`, `verify::dx_node`.

#[cfg(test)]
mod rec_len_tests {
    use super::*;

    #[test]
    fn rec_len_encoding_round_trips() {
        for bs in [1024u32, 4096, 65536] {
            for len in [12u32, 16, 1020, 1024, 4092, 4096, 65532, 65536] {
                if len > bs {
                    continue;
                }
                assert_eq!(
                    decode_rec_len(encode_rec_len(len, bs), bs),
                    len,
                    "{len} in {bs}"
                );
            }
        }
    }
}
