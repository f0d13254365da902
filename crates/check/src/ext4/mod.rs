//! The ext4 object layer below the passes, as libext2fs is for e2fsck: walking a file's
//! blocks, reading and writing inodes, iterating directory entries.

pub(crate) mod blocks;
