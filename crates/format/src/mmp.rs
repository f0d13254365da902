//! The multiple-mount protection block (`mmp` feature): one block, named by `s_mmp_block`,
//! that a node holding the file system stamps with a sequence number so other nodes keep off.
//!
//! Only its first 1024 bytes are defined; the checksum (with `metadata_csum`) covers the bytes
//! before it, seeded as every other metadata checksum.

use crate::csum;
use zerocopy::little_endian::{U16, U32, U64};
use zerocopy::{FromBytes, FromZeros, Immutable, IntoBytes, KnownLayout, Unaligned};

/// `mmp_magic` of a valid MMP block.
pub const MMP_MAGIC: u32 = 0x004D_4D50;
/// `mmp_seq` when no node holds the file system.
pub const SEQ_CLEAN: u32 = 0xFF4D_4D50;
/// `mmp_seq` while a checker holds it.
pub const SEQ_FSCK: u32 = 0xE24D_4D50;
/// The largest sequence number a mounting node may write; anything above it (but the two
/// marks above) is an operation this version does not know.
pub const SEQ_MAX: u32 = 0xE24D_4D4F;
/// The shortest interval (seconds) between a holder's updates that a checker assumes.
pub const MIN_CHECK_INTERVAL: u16 = 5;
/// The longest update interval (seconds) the kernel accepts.
pub const MAX_UPDATE_INTERVAL: u16 = 300;

/// `struct mmp_struct`, little-endian (1024 bytes).
#[derive(FromBytes, IntoBytes, KnownLayout, Immutable, Unaligned, Clone, Debug)]
#[repr(C)]
pub struct RawMmp {
    pub mmp_magic: U32,          // 0x0
    pub mmp_seq: U32,            // 0x4
    pub mmp_time: U64,           // 0x8
    pub mmp_nodename: [u8; 64],  // 0x10
    pub mmp_bdevname: [u8; 32],  // 0x50
    pub mmp_check_interval: U16, // 0x70
    pub mmp_pad1: U16,           // 0x72
    pub mmp_pad2: [U32; 226],    // 0x74
    pub mmp_checksum: U32,       // 0x3FC
}

/// Bytes of the defined structure.
pub const MMP_SIZE: usize = 1024;
const CSUM_OFFSET: usize = 0x3FC;

impl RawMmp {
    /// The structure at the start of `block` (None when `block` is shorter than it).
    pub fn parse(block: &[u8]) -> Option<Self> {
        Self::read_from_prefix(block).ok().map(|(m, _)| m)
    }

    /// A block no node holds: the clean sequence, stamped `time` by `node`, with the
    /// superblock's update interval (never below the minimum).
    pub fn clean(node: &str, time: u64, update_interval: u16) -> Self {
        let mut m = Self::new_zeroed();
        m.mmp_magic.set(MMP_MAGIC);
        m.mmp_seq.set(SEQ_CLEAN);
        m.mmp_time.set(time);
        let n = node.as_bytes();
        let len = n.len().min(m.mmp_nodename.len());
        m.mmp_nodename[..len].copy_from_slice(&n[..len]);
        m.mmp_check_interval
            .set(update_interval.max(MIN_CHECK_INTERVAL));
        m
    }

    /// The checksum the structure should carry, seeded with the file system's seed.
    pub fn compute_checksum(&self, seed: u32) -> u32 {
        csum::ext4_crc32c(seed, &self.as_bytes()[..CSUM_OFFSET])
    }

    /// Set the checksum for `seed`.
    pub fn set_checksum(&mut self, seed: u32) {
        let c = self.compute_checksum(seed);
        self.mmp_checksum.set(c);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn layout_is_the_kernels() {
        assert_eq!(std::mem::size_of::<RawMmp>(), MMP_SIZE);
        assert_eq!(std::mem::offset_of!(RawMmp, mmp_check_interval), 0x70);
        assert_eq!(std::mem::offset_of!(RawMmp, mmp_checksum), CSUM_OFFSET);
    }

    #[test]
    fn clean_block_round_trips() {
        let mut m = RawMmp::clean("node", 7, 0);
        m.set_checksum(0x1234);
        let mut block = vec![0u8; 4096];
        block[..MMP_SIZE].copy_from_slice(m.as_bytes());
        let back = RawMmp::parse(&block).unwrap();
        assert_eq!(back.mmp_magic.get(), MMP_MAGIC);
        assert_eq!(back.mmp_seq.get(), SEQ_CLEAN);
        assert_eq!(back.mmp_check_interval.get(), MIN_CHECK_INTERVAL);
        assert_eq!(&back.mmp_nodename[..4], b"node");
        assert_eq!(back.mmp_checksum.get(), back.compute_checksum(0x1234));
        assert_ne!(back.compute_checksum(0x1235), back.mmp_checksum.get());
    }
}
