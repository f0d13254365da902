//! Raw block group descriptors (`struct ext4_group_desc`), 32 or 64 bytes on disk.
//!
//! We always hold the 64-byte form; a 32-byte descriptor is read into the first half and the
//! high halves stay zero, which is exactly what the kernel's accessors return.

use crate::csum;
use crate::superblock::RawSuperblock;
use zerocopy::little_endian::{U16, U32};
use zerocopy::{FromBytes, Immutable, IntoBytes, KnownLayout, Unaligned};

#[derive(FromBytes, IntoBytes, KnownLayout, Immutable, Unaligned, Clone, Default)]
#[repr(C)]
pub struct RawGroupDesc {
    pub bg_block_bitmap_lo: U32,      // 0x00
    pub bg_inode_bitmap_lo: U32,      // 0x04
    pub bg_inode_table_lo: U32,       // 0x08
    pub bg_free_blocks_count_lo: U16, // 0x0C
    pub bg_free_inodes_count_lo: U16, // 0x0E
    pub bg_used_dirs_count_lo: U16,   // 0x10
    pub bg_flags: U16,                // 0x12
    pub bg_exclude_bitmap_lo: U32,    // 0x14
    pub bg_block_bitmap_csum_lo: U16, // 0x18
    pub bg_inode_bitmap_csum_lo: U16, // 0x1A
    pub bg_itable_unused_lo: U16,     // 0x1C
    pub bg_checksum: U16,             // 0x1E
    pub bg_block_bitmap_hi: U32,      // 0x20
    pub bg_inode_bitmap_hi: U32,      // 0x24
    pub bg_inode_table_hi: U32,       // 0x28
    pub bg_free_blocks_count_hi: U16, // 0x2C
    pub bg_free_inodes_count_hi: U16, // 0x2E
    pub bg_used_dirs_count_hi: U16,   // 0x30
    pub bg_itable_unused_hi: U16,     // 0x32
    pub bg_exclude_bitmap_hi: U32,    // 0x34
    pub bg_block_bitmap_csum_hi: U16, // 0x38
    pub bg_inode_bitmap_csum_hi: U16, // 0x3A
    pub bg_reserved: U32,             // 0x3C
}
const _: () = assert!(core::mem::size_of::<RawGroupDesc>() == 64);

/// `bg_flags` bits.
pub const BG_INODE_UNINIT: u16 = 0x0001;
pub const BG_BLOCK_UNINIT: u16 = 0x0002;
pub const BG_INODE_ZEROED: u16 = 0x0004;

/// Largest descriptor size.
const MAX_DESC_SIZE: usize = 1024;

/// Offset of `bg_checksum`, which the crc16 skips over.
const CHECKSUM_OFFSET: usize = 0x1E;

fn join(lo: u32, hi: u32) -> u64 {
    u64::from(lo) | (u64::from(hi) << 32)
}

impl RawGroupDesc {
    /// Read a descriptor of `desc_size` bytes (32 or more); the tail beyond 64 is ignored.
    pub fn parse(buf: &[u8], desc_size: usize) -> Self {
        let mut full = [0u8; 64];
        let n = desc_size.min(64).min(buf.len());
        full[..n].copy_from_slice(&buf[..n]);
        Self::read_from_bytes(&full).unwrap_or_default()
    }
    pub fn block_bitmap(&self) -> u64 {
        join(self.bg_block_bitmap_lo.get(), self.bg_block_bitmap_hi.get())
    }
    pub fn inode_bitmap(&self) -> u64 {
        join(self.bg_inode_bitmap_lo.get(), self.bg_inode_bitmap_hi.get())
    }
    pub fn inode_table(&self) -> u64 {
        join(self.bg_inode_table_lo.get(), self.bg_inode_table_hi.get())
    }
    pub fn free_blocks_count(&self) -> u32 {
        u32::from(self.bg_free_blocks_count_lo.get())
            | (u32::from(self.bg_free_blocks_count_hi.get()) << 16)
    }
    pub fn free_inodes_count(&self) -> u32 {
        u32::from(self.bg_free_inodes_count_lo.get())
            | (u32::from(self.bg_free_inodes_count_hi.get()) << 16)
    }
    pub fn used_dirs_count(&self) -> u32 {
        u32::from(self.bg_used_dirs_count_lo.get())
            | (u32::from(self.bg_used_dirs_count_hi.get()) << 16)
    }
    pub fn itable_unused(&self) -> u32 {
        u32::from(self.bg_itable_unused_lo.get())
            | (u32::from(self.bg_itable_unused_hi.get()) << 16)
    }
    pub fn flags(&self) -> u16 {
        self.bg_flags.get()
    }
    pub fn block_bitmap_csum(&self) -> u32 {
        u32::from(self.bg_block_bitmap_csum_lo.get())
            | (u32::from(self.bg_block_bitmap_csum_hi.get()) << 16)
    }
    pub fn inode_bitmap_csum(&self) -> u32 {
        u32::from(self.bg_inode_bitmap_csum_lo.get())
            | (u32::from(self.bg_inode_bitmap_csum_hi.get()) << 16)
    }

    /// The checksum this descriptor should carry, or `None` if the file system has none.
    pub fn set_free_blocks_count(&mut self, v: u32) {
        self.bg_free_blocks_count_lo.set(v as u16);
        self.bg_free_blocks_count_hi.set((v >> 16) as u16);
    }
    pub fn set_free_inodes_count(&mut self, v: u32) {
        self.bg_free_inodes_count_lo.set(v as u16);
        self.bg_free_inodes_count_hi.set((v >> 16) as u16);
    }
    pub fn set_used_dirs_count(&mut self, v: u32) {
        self.bg_used_dirs_count_lo.set(v as u16);
        self.bg_used_dirs_count_hi.set((v >> 16) as u16);
    }
    pub fn set_block_bitmap(&mut self, b: u64) {
        self.bg_block_bitmap_lo.set(b as u32);
        self.bg_block_bitmap_hi.set((b >> 32) as u32);
    }
    pub fn set_inode_bitmap(&mut self, b: u64) {
        self.bg_inode_bitmap_lo.set(b as u32);
        self.bg_inode_bitmap_hi.set((b >> 32) as u32);
    }
    pub fn set_inode_table(&mut self, b: u64) {
        self.bg_inode_table_lo.set(b as u32);
        self.bg_inode_table_hi.set((b >> 32) as u32);
    }
    pub fn set_itable_unused(&mut self, v: u32) {
        self.bg_itable_unused_lo.set(v as u16);
        self.bg_itable_unused_hi.set((v >> 16) as u16);
    }
    pub fn set_block_bitmap_csum(&mut self, v: u32) {
        self.bg_block_bitmap_csum_lo.set(v as u16);
        self.bg_block_bitmap_csum_hi.set((v >> 16) as u16);
    }
    pub fn set_inode_bitmap_csum(&mut self, v: u32) {
        self.bg_inode_bitmap_csum_lo.set(v as u16);
        self.bg_inode_bitmap_csum_hi.set((v >> 16) as u16);
    }
    /// Recompute and store the descriptor checksum (no-op without a checksum feature).
    pub fn update_checksum(&mut self, sb: &RawSuperblock, group: u32, desc_size: usize) {
        if let Some(c) = self.compute_checksum(sb, group, desc_size) {
            self.bg_checksum.set(c);
        }
    }

    pub fn compute_checksum(
        &self,
        sb: &RawSuperblock,
        group: u32,
        desc_size: usize,
    ) -> Option<u16> {
        let bytes = self.as_bytes();
        let size = desc_size.min(64);
        // The checksum covers the whole descriptor; the bytes past the 64 held here are
        // taken as the zeros mke2fs writes there (no kernel field lives in them).
        let tail = [0u8; MAX_DESC_SIZE - 64];
        let tail = &tail[..desc_size.clamp(64, MAX_DESC_SIZE) - 64];
        if sb.has_metadata_csum() {
            let mut copy = [0u8; 64];
            copy.copy_from_slice(bytes);
            copy[CHECKSUM_OFFSET..CHECKSUM_OFFSET + 2].fill(0);
            let c = csum::ext4_crc32c(sb.csum_seed(), &group.to_le_bytes());
            let c = csum::ext4_crc32c(c, &copy[..size]);
            let c = csum::ext4_crc32c(c, tail);
            Some((c & 0xFFFF) as u16)
        } else if sb.has_group_csum() {
            let c = csum::crc16(!0, &sb.s_uuid);
            let c = csum::crc16(c, &group.to_le_bytes());
            let c = csum::crc16(c, &bytes[..CHECKSUM_OFFSET]);
            let c = if size > CHECKSUM_OFFSET + 2 {
                csum::crc16(c, &bytes[CHECKSUM_OFFSET + 2..size])
            } else {
                c
            };
            Some(csum::crc16(c, tail))
        } else {
            None
        }
    }
}
