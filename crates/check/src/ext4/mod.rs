//! The ext4 object layer below the passes, as libext2fs is for e2fsck: reading and writing
//! inodes with their checksums, walking directory entries, the run's clock (and, beside them,
//! the block-map and extent visitor). The passes and the repairs go through it; it names
//! nothing above it.

pub(crate) mod clock;
pub(crate) mod dir;
pub(crate) mod inode;
