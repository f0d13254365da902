//! On-disk ext2/3/4 structures, checksums and geometry: everything about the format, nothing about I/O.
//!
//! Two layers, as in the style guide: `raw` structs are lossless little-endian images of the
//! kernel's structures (kernel field names, byte offsets in comments), and the validated layer
//! (`Geometry`, `InodeNo`, ...) is built from them with checked arithmetic, so code above this
//! crate never does arithmetic on unchecked on-disk values.
// One exception, in `csum`: calling the three-way CRC loop compiled for SSE4.2 once the CPU
// is known to have it.
#![deny(unsafe_code)]

pub mod csum;
pub mod dir;
pub mod dirhash;
pub mod extent;
pub mod features;
pub mod fields;
pub mod geometry;
pub mod group;
pub mod inode;
pub mod journal;
pub mod mmp;
pub mod superblock;
pub mod verify;
pub mod xattr;

pub use features::{Compat, Incompat, RoCompat};
pub use geometry::{Geometry, GeometryError};
pub use group::RawGroupDesc;
pub use inode::RawInode;
pub use superblock::RawSuperblock;

/// Offset of the primary superblock from the start of the device, whatever the block size.
pub const SUPERBLOCK_OFFSET: u64 = 1024;
/// Size of the superblock structure on disk.
pub const SUPERBLOCK_SIZE: usize = 1024;
/// `s_magic` of every ext2/3/4 file system.
pub const EXT2_MAGIC: u16 = 0xEF53;

/// Reserved inode numbers (the kernel's EXT2_*_INO).
pub mod ino {
    pub const BAD: u32 = 1;
    pub const ROOT: u32 = 2;
    pub const USR_QUOTA: u32 = 3;
    pub const GRP_QUOTA: u32 = 4;
    pub const BOOT_LOADER: u32 = 5;
    pub const UNDEL_DIR: u32 = 6;
    pub const RESIZE: u32 = 7;
    pub const JOURNAL: u32 = 8;
    pub const EXCLUDE: u32 = 9;
    pub const REPLICA: u32 = 10;
    /// First non-reserved inode for revision 0 file systems.
    pub const GOOD_OLD_FIRST: u32 = 11;
}
