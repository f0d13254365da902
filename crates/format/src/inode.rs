//! Raw inodes (`struct ext4_inode`): the 128-byte base and the extra fields after it.

use crate::csum;
use zerocopy::little_endian::{U16, U32};
use zerocopy::{FromBytes, Immutable, IntoBytes, KnownLayout, Unaligned};

/// The base inode plus the extra fields up to `i_projid` (160 bytes). Inodes are larger on disk
/// (`s_inode_size`); the bytes beyond `128 + i_extra_isize` hold in-inode extended attributes.
#[derive(FromBytes, IntoBytes, KnownLayout, Immutable, Unaligned, Clone, Default)]
#[repr(C)]
pub struct RawInode {
    pub i_mode: U16,            // 0x00
    pub i_uid: U16,             // 0x02
    pub i_size_lo: U32,         // 0x04
    pub i_atime: U32,           // 0x08
    pub i_ctime: U32,           // 0x0C
    pub i_mtime: U32,           // 0x10
    pub i_dtime: U32,           // 0x14
    pub i_gid: U16,             // 0x18
    pub i_links_count: U16,     // 0x1A
    pub i_blocks_lo: U32,       // 0x1C
    pub i_flags: U32,           // 0x20
    pub l_i_version: U32,       // 0x24
    pub i_block: [U32; 15],     // 0x28
    pub i_generation: U32,      // 0x64
    pub i_file_acl_lo: U32,     // 0x68
    pub i_size_high: U32,       // 0x6C
    pub i_obso_faddr: U32,      // 0x70
    pub l_i_blocks_high: U16,   // 0x74
    pub l_i_file_acl_high: U16, // 0x76
    pub l_i_uid_high: U16,      // 0x78
    pub l_i_gid_high: U16,      // 0x7A
    pub l_i_checksum_lo: U16,   // 0x7C
    pub l_i_reserved: U16,      // 0x7E
    pub i_extra_isize: U16,     // 0x80
    pub i_checksum_hi: U16,     // 0x82
    pub i_ctime_extra: U32,     // 0x84
    pub i_mtime_extra: U32,     // 0x88
    pub i_atime_extra: U32,     // 0x8C
    pub i_crtime: U32,          // 0x90
    pub i_crtime_extra: U32,    // 0x94
    pub i_version_hi: U32,      // 0x98
    pub i_projid: U32,          // 0x9C
}
const _: () = assert!(core::mem::size_of::<RawInode>() == 160);

pub const GOOD_OLD_INODE_SIZE: usize = 128;

/// File type bits of `i_mode`.
pub mod mode {
    pub const S_IFMT: u16 = 0o170000;
    pub const S_IFSOCK: u16 = 0o140000;
    pub const S_IFLNK: u16 = 0o120000;
    pub const S_IFREG: u16 = 0o100000;
    pub const S_IFBLK: u16 = 0o060000;
    pub const S_IFDIR: u16 = 0o040000;
    pub const S_IFCHR: u16 = 0o020000;
    pub const S_IFIFO: u16 = 0o010000;
}

/// `i_flags` bits.
pub mod flags {
    pub const SECRM: u32 = 0x1;
    pub const IMMUTABLE: u32 = 0x10;
    pub const APPEND: u32 = 0x20;
    pub const INDEX: u32 = 0x1000;
    pub const IMAGIC: u32 = 0x2000;
    pub const JOURNAL_DATA: u32 = 0x4000;
    pub const HUGE_FILE: u32 = 0x40000;
    pub const EXTENTS: u32 = 0x80000;
    pub const VERITY: u32 = 0x100000;
    pub const EA_INODE: u32 = 0x200000;
    pub const INLINE_DATA: u32 = 0x10000000;
    pub const PROJINHERIT: u32 = 0x20000000;
    pub const CASEFOLD: u32 = 0x40000000;
    pub const ENCRYPT: u32 = 0x800;
}

/// The type of an inode, from `i_mode`.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum FileType {
    Regular,
    Directory,
    CharDev,
    BlockDev,
    Fifo,
    Socket,
    Symlink,
    /// A value of `S_IFMT` that names no type.
    Bad,
}

impl FileType {
    pub fn from_mode(m: u16) -> Self {
        match m & mode::S_IFMT {
            mode::S_IFREG => Self::Regular,
            mode::S_IFDIR => Self::Directory,
            mode::S_IFCHR => Self::CharDev,
            mode::S_IFBLK => Self::BlockDev,
            mode::S_IFIFO => Self::Fifo,
            mode::S_IFSOCK => Self::Socket,
            mode::S_IFLNK => Self::Symlink,
            _ => Self::Bad,
        }
    }
    /// The `file_type` value a directory entry should carry for this type (EXT2_FT_*).
    pub fn dirent_type(self) -> u8 {
        match self {
            Self::Regular => 1,
            Self::Directory => 2,
            Self::CharDev => 3,
            Self::BlockDev => 4,
            Self::Fifo => 5,
            Self::Socket => 6,
            Self::Symlink => 7,
            Self::Bad => 0,
        }
    }
}

impl RawInode {
    /// Parse an on-disk inode of any size; bytes beyond the structure are the caller's.
    pub fn parse(buf: &[u8]) -> Self {
        const SIZE: usize = std::mem::size_of::<RawInode>();
        let mut ino = match Self::read_from_prefix(buf) {
            // The common case: one copy, straight from the inode table.
            Ok((ino, _)) => ino,
            Err(_) => {
                let mut full = [0u8; SIZE];
                let n = buf.len().min(SIZE);
                full[..n].copy_from_slice(&buf[..n]);
                Self::read_from_bytes(&full).unwrap_or_default()
            }
        };
        // With a 128-byte inode the extra fields do not exist; make sure they read as zero.
        if buf.len() <= GOOD_OLD_INODE_SIZE {
            ino.i_extra_isize.set(0);
        }
        ino
    }
    pub fn mode(&self) -> u16 {
        self.i_mode.get()
    }
    pub fn file_type(&self) -> FileType {
        FileType::from_mode(self.mode())
    }
    pub fn flags(&self) -> u32 {
        self.i_flags.get()
    }
    pub fn links_count(&self) -> u16 {
        self.i_links_count.get()
    }
    pub fn dtime(&self) -> u32 {
        self.i_dtime.get()
    }
    pub fn size(&self) -> u64 {
        u64::from(self.i_size_lo.get()) | (u64::from(self.i_size_high.get()) << 32)
    }
    /// The extended-attribute block, as libext2fs reads it: the high 16 bits count only on a
    /// file system with `64bit` (elsewhere they are a field to clear, not part of the block
    /// number).
    pub fn file_acl(&self, sixty_four_bit: bool) -> u64 {
        let hi = if sixty_four_bit {
            u64::from(self.l_i_file_acl_high.get()) << 32
        } else {
            0
        };
        u64::from(self.i_file_acl_lo.get()) | hi
    }
    /// `i_blocks` as stored (48 bits with `huge_file`), before unit conversion.
    pub fn blocks_raw(&self, huge_file: bool) -> u64 {
        let lo = u64::from(self.i_blocks_lo.get());
        if huge_file {
            lo | (u64::from(self.l_i_blocks_high.get()) << 32)
        } else {
            lo
        }
    }
    /// The 60 bytes of `i_block`, which hold block pointers, an extent tree root, a short
    /// symlink target or inline data depending on the inode.
    pub fn block_bytes(&self) -> [u8; 60] {
        let mut out = [0u8; 60];
        out.copy_from_slice(self.i_block.as_bytes());
        out
    }
    /// Put `bytes` into `i_block` as they lie on disk (the inverse of `block_bytes`): a
    /// block map's pointers, an extent root, a fast symlink's target.
    pub fn set_block_bytes(&mut self, bytes: &[u8; 60]) {
        self.i_block.as_mut_bytes().copy_from_slice(bytes);
    }
    pub fn extra_isize(&self) -> u16 {
        self.i_extra_isize.get()
    }
}

/// Offsets of the checksum fields, which the checksum itself skips.
const CSUM_LO_OFFSET: usize = 0x7C;
const CSUM_HI_OFFSET: usize = 0x82;
/// `i_checksum_hi` exists only when the extra fields reach past it.
const CSUM_HI_EXTRA_END: u16 = 4;
/// Offsets of `i_generation` and `i_extra_isize`.
const GENERATION_OFFSET: usize = 0x64;
const EXTRA_ISIZE_OFFSET: usize = 0x80;

/// The little-endian 16-bit field of `raw` at `at` (0 where `raw` ends first). The checksum
/// reads its few fields straight from the bytes: parsing would copy the whole inode, and the
/// scan parses each one once already.
fn le16(raw: &[u8], at: usize) -> u16 {
    raw.get(at..at + 2)
        .map_or(0, |b| u16::from_le_bytes([b[0], b[1]]))
}

/// The inode's checksum has its high half (`i_checksum_hi`).
fn has_csum_hi(raw: &[u8]) -> bool {
    raw.len() > GOOD_OLD_INODE_SIZE && le16(raw, EXTRA_ISIZE_OFFSET) >= CSUM_HI_EXTRA_END
}

/// `inode_checksum` of three inodes at once (the scan checks a table's inodes in threes): the
/// three CRCs are computed side by side.
pub fn inode_checksums_x3(raws: [&[u8]; 3], fs_seed: u32, inos: [u32; 3]) -> [(u32, u32, bool); 3] {
    let mut bufs = [[0u8; 8 + FAST_INODE]; 3];
    let [b0, b1, b2] = &mut bufs;
    let lens = [
        one_pass_input(raws[0], inos[0], b0),
        one_pass_input(raws[1], inos[1], b1),
        one_pass_input(raws[2], inos[2], b2),
    ];
    match lens {
        [Some(len), Some(l1), Some(l2)] if l1 == len && l2 == len => {
            let crcs = csum::ext4_crc32c_x3(fs_seed, [&b0[..len], &b1[..len], &b2[..len]]);
            [0, 1, 2].map(|i| checksum_result(raws[i], crcs[i]))
        }
        _ => [0, 1, 2].map(|i| inode_checksum(raws[i], fs_seed, inos[i])),
    }
}

/// Inodes up to this size are checksummed in one pass over a copy.
const FAST_INODE: usize = 512;

/// The usual inode sizes are checksummed in one pass over inode number, generation and the
/// inode with its checksum fields zeroed (the same CRC as chaining the pieces): that input,
/// written into `buf`, and its length; `None` for other sizes.
fn one_pass_input(raw: &[u8], ino: u32, buf: &mut [u8; 8 + FAST_INODE]) -> Option<usize> {
    if !(GOOD_OLD_INODE_SIZE..=FAST_INODE).contains(&raw.len()) {
        return None;
    }
    buf[..4].copy_from_slice(&ino.to_le_bytes());
    buf[4..8].copy_from_slice(&raw[GENERATION_OFFSET..GENERATION_OFFSET + 4]);
    let body = &mut buf[8..8 + raw.len()];
    body.copy_from_slice(raw);
    body[CSUM_LO_OFFSET..CSUM_LO_OFFSET + 2].fill(0);
    if has_csum_hi(raw) {
        body[CSUM_HI_OFFSET..CSUM_HI_OFFSET + 2].fill(0);
    }
    Some(8 + raw.len())
}

/// (computed, stored, both halves present) for the full CRC `c` of inode `raw`.
fn checksum_result(raw: &[u8], c: u32) -> (u32, u32, bool) {
    let stored_lo = u32::from(le16(raw, CSUM_LO_OFFSET));
    if has_csum_hi(raw) {
        let stored_hi = u32::from(le16(raw, CSUM_HI_OFFSET));
        (c, stored_lo | stored_hi << 16, true)
    } else {
        (c & 0xFFFF, stored_lo, false)
    }
}

/// Store the checksum `inode_checksum` computes into `raw`.
pub fn set_inode_checksum(raw: &mut [u8], fs_seed: u32, ino: u32) {
    let (want, _, has_hi) = inode_checksum(raw, fs_seed, ino);
    raw[CSUM_LO_OFFSET..CSUM_LO_OFFSET + 2].copy_from_slice(&(want as u16).to_le_bytes());
    if has_hi {
        raw[CSUM_HI_OFFSET..CSUM_HI_OFFSET + 2]
            .copy_from_slice(&((want >> 16) as u16).to_le_bytes());
    }
}

/// Compute an inode's crc32c over its full on-disk bytes `raw` (length `s_inode_size`).
/// Returns (computed, stored, whether both halves are present).
pub fn inode_checksum(raw: &[u8], fs_seed: u32, ino: u32) -> (u32, u32, bool) {
    let mut buf = [0u8; 8 + FAST_INODE];
    if let Some(len) = one_pass_input(raw, ino, &mut buf) {
        return checksum_result(raw, csum::ext4_crc32c(fs_seed, &buf[..len]));
    }
    let base = RawInode::parse(raw);
    let has_hi = has_csum_hi(raw);
    let seed = csum::inode_seed(fs_seed, ino, base.i_generation.get());
    let zero = [0u8; 2];
    let mut c = csum::ext4_crc32c(seed, &raw[..CSUM_LO_OFFSET]);
    c = csum::ext4_crc32c(c, &zero);
    c = csum::ext4_crc32c(
        c,
        &raw[CSUM_LO_OFFSET + 2..GOOD_OLD_INODE_SIZE.min(raw.len())],
    );
    if raw.len() > GOOD_OLD_INODE_SIZE {
        c = csum::ext4_crc32c(c, &raw[GOOD_OLD_INODE_SIZE..CSUM_HI_OFFSET]);
        if has_hi {
            c = csum::ext4_crc32c(c, &zero);
            c = csum::ext4_crc32c(c, &raw[CSUM_HI_OFFSET + 2..]);
        } else {
            c = csum::ext4_crc32c(c, &raw[CSUM_HI_OFFSET..]);
        }
    }
    checksum_result(raw, c)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The checksum as the format defines it: the pieces chained, checksum fields as zeroes.
    fn chained(raw: &[u8], fs_seed: u32, ino: u32) -> u32 {
        let base = RawInode::parse(raw);
        let has_hi = raw.len() > GOOD_OLD_INODE_SIZE && base.extra_isize() >= CSUM_HI_EXTRA_END;
        let mut c = csum::inode_seed(fs_seed, ino, base.i_generation.get());
        let mut copy = raw.to_vec();
        copy[CSUM_LO_OFFSET..CSUM_LO_OFFSET + 2].fill(0);
        if has_hi {
            copy[CSUM_HI_OFFSET..CSUM_HI_OFFSET + 2].fill(0);
        }
        for piece in copy.chunks(7) {
            c = csum::ext4_crc32c(c, piece);
        }
        if has_hi {
            c
        } else {
            c & 0xFFFF
        }
    }

    #[test]
    fn three_inodes_at_once_give_what_each_gives_alone() {
        let mut x = 0x2545_F491u32;
        let mut random = |n: usize| -> Vec<u8> {
            (0..n)
                .map(|_| {
                    x ^= x << 13;
                    x ^= x >> 17;
                    x ^= x << 5;
                    x as u8
                })
                .collect()
        };
        for sizes in [
            [128, 128, 128],
            [256, 256, 256],
            [512, 512, 512],
            [1024; 3],
            [256, 128, 256],
        ] {
            let mut raws: Vec<Vec<u8>> = sizes.iter().map(|&n| random(n)).collect();
            // One with the high half, one without.
            for (raw, extra) in raws.iter_mut().zip([32u16, 0, 4]) {
                if raw.len() > GOOD_OLD_INODE_SIZE {
                    raw[128..130].copy_from_slice(&extra.to_le_bytes());
                }
            }
            let inos = [12, 13, 9000];
            let got = inode_checksums_x3([&raws[0], &raws[1], &raws[2]], 0xC0FF_EE00, inos);
            for i in 0..3 {
                assert_eq!(
                    got[i],
                    inode_checksum(&raws[i], 0xC0FF_EE00, inos[i]),
                    "{sizes:?} #{i}"
                );
            }
        }
    }

    #[test]
    fn one_pass_checksum_equals_the_chained_one() {
        let mut x = 0x9E37_79B9u32;
        for size in [128usize, 256, 512, 1024] {
            for extra in [0u16, 4, 32] {
                let mut raw: Vec<u8> = (0..size)
                    .map(|_| {
                        x ^= x << 13;
                        x ^= x >> 17;
                        x ^= x << 5;
                        x as u8
                    })
                    .collect();
                if size > GOOD_OLD_INODE_SIZE {
                    raw[128..130].copy_from_slice(&extra.to_le_bytes());
                }
                let (got, _, _) = inode_checksum(&raw, 0x1234_5678, 77);
                assert_eq!(
                    got,
                    chained(&raw, 0x1234_5678, 77),
                    "size {size} extra {extra}"
                );
            }
        }
    }
}
