//! The ext4 object layer below the passes, as libext2fs is for e2fsck: walking a file's blocks
//! (block maps and extent trees), reading and writing inodes with their checksums, walking
//! directory entries, and the run's clock. The passes and the repairs go through it; it names
//! nothing above it.

pub(crate) mod blocks;
pub(crate) mod clock;
pub(crate) mod dir;
pub(crate) mod inode;
