//! jbd2 on-disk structures (the journal of ext3/ext4): block header and journal superblock.
//!
//! Unlike the rest of ext4, jbd2 stores every multi-byte field big-endian. The raw structs
//! keep the kernel's field names; `JournalSuperblock::verify` is the verifier a checker (and
//! later journal replay) runs before trusting any field, and it says which check failed.

use crate::csum;
use zerocopy::big_endian::{U32, U64};
use zerocopy::{FromBytes, Immutable, IntoBytes, KnownLayout, Unaligned};

/// `h_magic` of every jbd2 metadata block.
pub const JBD2_MAGIC_NUMBER: u32 = 0xC03B_3998;

/// `h_blocktype` values.
pub mod blocktype {
    pub const DESCRIPTOR: u32 = 1;
    pub const COMMIT: u32 = 2;
    pub const SUPERBLOCK_V1: u32 = 3;
    pub const SUPERBLOCK_V2: u32 = 4;
    pub const REVOKE: u32 = 5;
    pub const FAST_COMMIT: u32 = 6;
}

/// Journal feature bits.
pub mod feature {
    pub const COMPAT_CHECKSUM: u32 = 0x1;
    pub const INCOMPAT_REVOKE: u32 = 0x1;
    pub const INCOMPAT_64BIT: u32 = 0x2;
    pub const INCOMPAT_ASYNC_COMMIT: u32 = 0x4;
    pub const INCOMPAT_CSUM_V2: u32 = 0x8;
    pub const INCOMPAT_CSUM_V3: u32 = 0x10;
    pub const INCOMPAT_FAST_COMMIT: u32 = 0x20;
    /// Incompat bits a reader must understand; anything else is unknown.
    pub const KNOWN_INCOMPAT: u32 = INCOMPAT_REVOKE
        | INCOMPAT_64BIT
        | INCOMPAT_ASYNC_COMMIT
        | INCOMPAT_CSUM_V2
        | INCOMPAT_CSUM_V3
        | INCOMPAT_FAST_COMMIT;
    /// No read-only-compat bits are defined.
    pub const KNOWN_RO_COMPAT: u32 = 0;
}

/// `s_checksum_type` for crc32c, the only type v2/v3 checksums allow.
pub const CRC32C_CHKSUM: u8 = 4;
/// Smallest journal (in blocks) the kernel and e2fsck accept.
pub const MIN_JOURNAL_BLOCKS: u32 = 1024;
/// Fast-commit area size when the superblock leaves `s_num_fc_blks` at zero.
pub const DEFAULT_FAST_COMMIT_BLOCKS: u32 = 256;
/// Bytes of the superblock meaningful in a version-1 journal (up to and including `s_errno`).
pub const V1_SUPERBLOCK_BYTES: usize = 0x24;

/// Header at the start of every jbd2 metadata block (`journal_header_t`).
#[derive(FromBytes, IntoBytes, KnownLayout, Immutable, Unaligned, Clone, Debug)]
#[repr(C)]
pub struct JournalHeader {
    pub h_magic: U32,     // 0x0
    pub h_blocktype: U32, // 0x4
    pub h_sequence: U32,  // 0x8
}
const _: () = assert!(core::mem::size_of::<JournalHeader>() == 12);

/// The journal superblock (`journal_superblock_t`), 1024 bytes at the start of block 0.
#[derive(FromBytes, IntoBytes, KnownLayout, Immutable, Unaligned, Clone)]
#[repr(C)]
pub struct JournalSuperblock {
    pub s_header: JournalHeader,  // 0x00
    pub s_blocksize: U32,         // 0x0C
    pub s_maxlen: U32,            // 0x10
    pub s_first: U32,             // 0x14
    pub s_sequence: U32,          // 0x18
    pub s_start: U32,             // 0x1C
    pub s_errno: U32,             // 0x20 (signed on disk)
    pub s_feature_compat: U32,    // 0x24
    pub s_feature_incompat: U32,  // 0x28
    pub s_feature_ro_compat: U32, // 0x2C
    pub s_uuid: [u8; 16],         // 0x30
    pub s_nr_users: U32,          // 0x40
    pub s_dynsuper: U32,          // 0x44
    pub s_max_transaction: U32,   // 0x48
    pub s_max_trans_data: U32,    // 0x4C
    pub s_checksum_type: u8,      // 0x50
    pub s_padding2: [u8; 3],      // 0x51
    pub s_num_fc_blks: U32,       // 0x54
    pub s_padding: [U32; 41],     // 0x58
    pub s_checksum: U32,          // 0xFC
    pub s_users: [u8; 16 * 48],   // 0x100
}
const _: () = assert!(core::mem::size_of::<JournalSuperblock>() == 1024);

/// Why a journal superblock cannot be trusted, in the order the checks run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum JsbError {
    /// `h_magic` is not jbd2's: probably not a journal at all.
    BadMagic,
    /// The block type is that of a log block (descriptor, commit, revoke): badly corrupt.
    LogBlockType(u32),
    /// A block type no version defines: perhaps a newer format.
    UnknownVersion(u32),
    /// A version-2 journal shared by more than one file system.
    MultipleUsers(u32),
    UnknownIncompat(u32),
    UnknownRoCompat(u32),
    /// Contradictory checksum features (v2 with v3, or v2/v3 with v1).
    ChecksumFeatures,
    /// v2/v3 checksums with a checksum type other than crc32c.
    ChecksumType(u8),
    ChecksumMismatch {
        stored: u32,
        computed: u32,
    },
    /// `s_blocksize` differs from the file system's block size.
    BlockSize(u32),
    /// `s_maxlen` is larger than the space the journal has.
    TooLong {
        maxlen: u32,
        available: u64,
    },
    /// The fast-commit area leaves less than the minimum for the log.
    FastCommitTooBig,
}

impl JournalSuperblock {
    /// Parse the first 1024 bytes of `buf`; `None` if it is shorter.
    pub fn parse(buf: &[u8]) -> Option<Self> {
        Self::read_from_prefix(buf).ok().map(|(s, _)| s)
    }
    pub fn magic_ok(&self) -> bool {
        self.s_header.h_magic.get() == JBD2_MAGIC_NUMBER
    }
    pub fn blocktype(&self) -> u32 {
        self.s_header.h_blocktype.get()
    }
    /// Format version (1 or 2), when the block type names one.
    pub fn version(&self) -> Option<u8> {
        match self.blocktype() {
            blocktype::SUPERBLOCK_V1 => Some(1),
            blocktype::SUPERBLOCK_V2 => Some(2),
            _ => None,
        }
    }
    /// Feature words count only from version 2 on.
    fn v2(&self) -> bool {
        self.version() == Some(2)
    }
    pub fn incompat(&self) -> u32 {
        if self.v2() {
            self.s_feature_incompat.get()
        } else {
            0
        }
    }
    pub fn ro_compat(&self) -> u32 {
        if self.v2() {
            self.s_feature_ro_compat.get()
        } else {
            0
        }
    }
    pub fn compat(&self) -> u32 {
        if self.v2() {
            self.s_feature_compat.get()
        } else {
            0
        }
    }
    pub fn has_csum_v2or3(&self) -> bool {
        self.incompat() & (feature::INCOMPAT_CSUM_V2 | feature::INCOMPAT_CSUM_V3) != 0
    }
    pub fn has_64bit(&self) -> bool {
        self.incompat() & feature::INCOMPAT_64BIT != 0
    }
    /// Does a version-1 superblock carry non-zero version-2 fields (features, users)?
    pub fn v1_has_v2_fields(&self) -> bool {
        self.version() == Some(1)
            && (self.s_feature_compat.get() != 0
                || self.s_feature_incompat.get() != 0
                || self.s_feature_ro_compat.get() != 0
                || self.s_nr_users.get() != 0)
    }
    /// crc32c (ext4's un-inverted form, seeded with !0) of the superblock with `s_checksum` as zero.
    pub fn compute_checksum(&self) -> u32 {
        let bytes = self.as_bytes();
        let off = core::mem::offset_of!(JournalSuperblock, s_checksum);
        let c = csum::ext4_crc32c(!0, &bytes[..off]);
        let c = csum::ext4_crc32c(c, &[0u8; 4]);
        csum::ext4_crc32c(c, &bytes[off + 4..])
    }
    /// Blocks at the end of the journal reserved for fast commits (0 without the feature).
    pub fn fast_commit_blocks(&self) -> u32 {
        if self.incompat() & feature::INCOMPAT_FAST_COMMIT == 0 {
            return 0;
        }
        match self.s_num_fc_blks.get() {
            0 => DEFAULT_FAST_COMMIT_BLOCKS,
            n => n,
        }
    }
    /// Seed of the per-block checksums of a v2/v3 journal.
    pub fn csum_seed(&self) -> u32 {
        csum::ext4_crc32c(!0, &self.s_uuid)
    }

    /// Check the superblock as a reader must before trusting it. `fs_block_size` is the file
    /// system's block size and `available_blocks` the length of the journal inode or device.
    /// Returns the usable log length (blocks) on success.
    pub fn verify(&self, fs_block_size: u32, available_blocks: u64) -> Result<u64, JsbError> {
        if !self.magic_ok() {
            return Err(JsbError::BadMagic);
        }
        match self.blocktype() {
            blocktype::SUPERBLOCK_V1 | blocktype::SUPERBLOCK_V2 => {}
            t @ (blocktype::DESCRIPTOR | blocktype::COMMIT | blocktype::REVOKE) => {
                return Err(JsbError::LogBlockType(t))
            }
            t => return Err(JsbError::UnknownVersion(t)),
        }
        if self.v2() && self.s_nr_users.get() > 1 {
            return Err(JsbError::MultipleUsers(self.s_nr_users.get()));
        }
        let unknown = self.incompat() & !feature::KNOWN_INCOMPAT;
        if unknown != 0 {
            return Err(JsbError::UnknownIncompat(unknown));
        }
        let unknown = self.ro_compat() & !feature::KNOWN_RO_COMPAT;
        if unknown != 0 {
            return Err(JsbError::UnknownRoCompat(unknown));
        }
        let inc = self.incompat();
        let v2 = inc & feature::INCOMPAT_CSUM_V2 != 0;
        let v3 = inc & feature::INCOMPAT_CSUM_V3 != 0;
        if (v2 && v3) || ((v2 || v3) && self.compat() & feature::COMPAT_CHECKSUM != 0) {
            return Err(JsbError::ChecksumFeatures);
        }
        if v2 || v3 {
            if self.s_checksum_type != CRC32C_CHKSUM {
                return Err(JsbError::ChecksumType(self.s_checksum_type));
            }
            let computed = self.compute_checksum();
            if computed != self.s_checksum.get() {
                return Err(JsbError::ChecksumMismatch {
                    stored: self.s_checksum.get(),
                    computed,
                });
            }
        }
        if self.s_blocksize.get() != fs_block_size {
            return Err(JsbError::BlockSize(self.s_blocksize.get()));
        }
        let maxlen = self.s_maxlen.get();
        if u64::from(maxlen) > available_blocks {
            return Err(JsbError::TooLong {
                maxlen,
                available: available_blocks,
            });
        }
        let fc = self.fast_commit_blocks();
        if fc != 0 && maxlen.saturating_sub(fc) < MIN_JOURNAL_BLOCKS {
            return Err(JsbError::FastCommitTooBig);
        }
        Ok(u64::from(maxlen))
    }
}

/// Descriptor tag flags (`t_flags`).
pub mod tag_flag {
    /// The logged copy had jbd2's magic in its first word, which was zeroed; put it back.
    pub const ESCAPE: u32 = 1;
    /// No 16-byte UUID follows this tag (it is the previous tag's).
    pub const SAME_UUID: u32 = 2;
    /// Unused by jbd2 (kept for the name).
    pub const DELETED: u32 = 4;
    /// The last tag of the descriptor block.
    pub const LAST_TAG: u32 = 8;
}

/// `h_chksum_type` of a commit block written with `COMPAT_CHECKSUM`.
pub const CRC32_CHKSUM: u8 = 1;
/// `h_chksum_size` that goes with it.
pub const CRC32_CHKSUM_SIZE: u8 = 4;
/// Bytes of the checksum tail (`jbd2_journal_block_tail`) at the end of descriptor and revoke
/// blocks of a v2/v3 journal.
pub const BLOCK_TAIL_BYTES: usize = 4;
/// Bytes of `jbd2_journal_revoke_header_t`: the block header and `r_count`.
pub const REVOKE_HEADER_BYTES: usize = 16;

/// The start of a commit block (`commit_header`).
#[derive(FromBytes, IntoBytes, KnownLayout, Immutable, Unaligned, Clone, Debug)]
#[repr(C)]
pub struct CommitHeader {
    pub h_header: JournalHeader, // 0x00
    pub h_chksum_type: u8,       // 0x0C
    pub h_chksum_size: u8,       // 0x0D
    pub h_padding: [u8; 2],      // 0x0E
    pub h_chksum: [U32; 8],      // 0x10
    pub h_commit_sec: U64,       // 0x30
    pub h_commit_nsec: U32,      // 0x38
}
const _: () = assert!(core::mem::size_of::<CommitHeader>() == 60);

impl CommitHeader {
    pub fn parse(buf: &[u8]) -> Option<Self> {
        Self::read_from_prefix(buf).ok().map(|(s, _)| s)
    }
}

/// Offset of `h_chksum[0]` in a commit block (zeroed while its v2/v3 checksum is computed).
pub const COMMIT_CHKSUM_OFFSET: usize = 0x10;

/// One decoded descriptor tag (`journal_block_tag_t` or `journal_block_tag3_t`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BlockTag {
    /// File system block the logged block belongs to.
    pub blocknr: u64,
    pub flags: u32,
    /// The stored data-block checksum (16 bits wide with csum v2, 32 with v3, absent before).
    pub checksum: u32,
}

/// How descriptor tags are laid out, from the journal's features.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TagLayout {
    pub csum_v2: bool,
    pub csum_v3: bool,
    pub is_64bit: bool,
}

impl TagLayout {
    pub fn of(sb: &JournalSuperblock) -> Self {
        let inc = sb.incompat();
        TagLayout {
            csum_v2: inc & feature::INCOMPAT_CSUM_V2 != 0,
            csum_v3: inc & feature::INCOMPAT_CSUM_V3 != 0,
            is_64bit: inc & feature::INCOMPAT_64BIT != 0,
        }
    }
    /// Bytes of one tag, not counting the UUID that follows a tag without `SAME_UUID`.
    /// v3 tags are always 16 bytes; older ones are 8 (12 with 64-bit block numbers), plus
    /// two bytes with csum v2.
    pub fn tag_bytes(self) -> usize {
        if self.csum_v3 {
            return 16;
        }
        let base = if self.is_64bit { 12 } else { 8 };
        if self.csum_v2 {
            base + 2
        } else {
            base
        }
    }
    /// Decode the tag at the start of `b`; `None` if `b` is shorter than a tag.
    pub fn decode(self, b: &[u8]) -> Option<BlockTag> {
        let be32 = |i: usize| -> Option<u32> {
            Some(u32::from_be_bytes(b.get(i..i + 4)?.try_into().ok()?))
        };
        let be16 = |i: usize| -> Option<u32> {
            Some(u32::from(u16::from_be_bytes(
                b.get(i..i + 2)?.try_into().ok()?,
            )))
        };
        if b.len() < self.tag_bytes() {
            return None;
        }
        let lo = u64::from(be32(0)?);
        if self.csum_v3 {
            // t_blocknr, t_flags (32 bits), t_blocknr_high, t_checksum.
            let hi = if self.is_64bit {
                u64::from(be32(8)?)
            } else {
                0
            };
            return Some(BlockTag {
                blocknr: lo | hi << 32,
                flags: be32(4)?,
                checksum: be32(12)?,
            });
        }
        // t_blocknr, t_checksum (16 bits), t_flags (16 bits), [t_blocknr_high].
        let hi = if self.is_64bit {
            u64::from(be32(8)?)
        } else {
            0
        };
        Some(BlockTag {
            blocknr: lo | hi << 32,
            flags: be16(6)?,
            checksum: if self.csum_v2 { be16(4)? } else { 0 },
        })
    }
}

impl TagLayout {
    /// Encode `tag` at the start of `out` (which must hold `tag_bytes()`), the inverse of
    /// `decode`: v3 tags carry 32-bit flags and a 32-bit checksum, older ones 16-bit flags and
    /// (with csum v2) the low 16 bits of the checksum. Returns false if `out` is too short or
    /// the block number needs 64 bits the layout does not have.
    pub fn encode(self, tag: &BlockTag, out: &mut [u8]) -> bool {
        let n = self.tag_bytes();
        if out.len() < n || (!self.is_64bit && tag.blocknr > u64::from(u32::MAX)) {
            return false;
        }
        out[..n].fill(0);
        let lo = (tag.blocknr & 0xFFFF_FFFF) as u32;
        let hi = (tag.blocknr >> 32) as u32;
        out[0..4].copy_from_slice(&lo.to_be_bytes());
        if self.csum_v3 {
            out[4..8].copy_from_slice(&tag.flags.to_be_bytes());
            out[8..12].copy_from_slice(&hi.to_be_bytes());
            out[12..16].copy_from_slice(&tag.checksum.to_be_bytes());
            return true;
        }
        if self.csum_v2 {
            out[4..6].copy_from_slice(&((tag.checksum & 0xFFFF) as u16).to_be_bytes());
        }
        out[6..8].copy_from_slice(&((tag.flags & 0xFFFF) as u16).to_be_bytes());
        if self.is_64bit {
            out[8..12].copy_from_slice(&hi.to_be_bytes());
        }
        true
    }
}

/// How the blocks of one transaction are checksummed, from the journal's features.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LogFormat {
    pub layout: TagLayout,
    /// csum v2 or v3: descriptor tails, data-block tags and the commit block are checksummed
    /// with crc32c seeded by `seed`.
    pub csum_v23: bool,
    /// `COMPAT_CHECKSUM`: the commit block carries a crc32 of the transaction's blocks.
    pub compat_checksum: bool,
    pub seed: u32,
    pub block_size: usize,
}

impl LogFormat {
    pub fn of(sb: &JournalSuperblock) -> Self {
        LogFormat {
            layout: TagLayout::of(sb),
            csum_v23: sb.has_csum_v2or3(),
            compat_checksum: sb.compat() & feature::COMPAT_CHECKSUM != 0,
            seed: sb.csum_seed(),
            block_size: sb.s_blocksize.get() as usize,
        }
    }

    /// Bytes of a descriptor block available to tags (its checksum tail excluded).
    fn tag_space(&self) -> usize {
        self.block_size - if self.csum_v23 { BLOCK_TAIL_BYTES } else { 0 }
    }

    /// Tags one descriptor block holds: the first is followed by the journal's 16-byte UUID,
    /// the others carry `SAME_UUID`.
    pub fn tags_per_descriptor(&self) -> usize {
        let tb = self.layout.tag_bytes();
        let room = self
            .tag_space()
            .saturating_sub(core::mem::size_of::<JournalHeader>());
        if room < tb + 16 {
            return 0;
        }
        1 + (room - tb - 16) / tb
    }

    /// The checksum a descriptor tag stores for a logged block (as written to the log, i.e.
    /// after escaping) of transaction `seq`; 0 without csum v2/v3.
    pub fn data_checksum(&self, seq: u32, logged: &[u8]) -> u32 {
        if !self.csum_v23 {
            return 0;
        }
        let c = csum::ext4_crc32c(self.seed, &seq.to_be_bytes());
        let c = csum::ext4_crc32c(c, logged);
        if self.layout.csum_v3 {
            c
        } else {
            c & 0xFFFF
        }
    }

    /// crc32c of `buf` from the journal seed with the 4 bytes at `at` taken as zero.
    fn csum_without(&self, buf: &[u8], at: usize) -> u32 {
        let c = csum::ext4_crc32c(self.seed, &buf[..at]);
        let c = csum::ext4_crc32c(c, &[0u8; 4]);
        csum::ext4_crc32c(c, &buf[at + 4..])
    }

    /// A descriptor block of transaction `seq` listing `tags` (at most
    /// `tags_per_descriptor()`; `SAME_UUID` and `LAST_TAG` are set here, `ESCAPE` and the
    /// checksums come with each tag), `uuid` after the first tag, and the checksum tail.
    /// `None` if the tags do not fit or a block number does not fit the layout.
    pub fn descriptor(&self, seq: u32, uuid: &[u8; 16], tags: &[BlockTag]) -> Option<Vec<u8>> {
        if tags.is_empty() || tags.len() > self.tags_per_descriptor() {
            return None;
        }
        let mut b = vec![0u8; self.block_size];
        put_header(&mut b, blocktype::DESCRIPTOR, seq);
        let tb = self.layout.tag_bytes();
        let mut at = core::mem::size_of::<JournalHeader>();
        for (i, t) in tags.iter().enumerate() {
            let mut flags = t.flags & !(tag_flag::SAME_UUID | tag_flag::LAST_TAG);
            if i > 0 {
                flags |= tag_flag::SAME_UUID;
            }
            if i + 1 == tags.len() {
                flags |= tag_flag::LAST_TAG;
            }
            let tag = BlockTag { flags, ..*t };
            if !self.layout.encode(&tag, &mut b[at..at + tb]) {
                return None;
            }
            at += tb;
            if i == 0 {
                b[at..at + 16].copy_from_slice(uuid);
                at += 16;
            }
        }
        if self.csum_v23 {
            let tail = self.block_size - BLOCK_TAIL_BYTES;
            let c = self.csum_without(&b, tail);
            b[tail..].copy_from_slice(&c.to_be_bytes());
        }
        Some(b)
    }

    /// The commit block of transaction `seq`, committed at `sec`.`nsec`. `crc32_sum` is the
    /// running `crc32_be` (seeded with `!0`) of the transaction's descriptor and data blocks
    /// in log order, used only with `COMPAT_CHECKSUM`.
    pub fn commit(&self, seq: u32, sec: u64, nsec: u32, crc32_sum: u32) -> Vec<u8> {
        let mut b = vec![0u8; self.block_size];
        put_header(&mut b, blocktype::COMMIT, seq);
        if self.compat_checksum && !self.csum_v23 {
            b[0x0C] = CRC32_CHKSUM;
            b[0x0D] = CRC32_CHKSUM_SIZE;
            b[COMMIT_CHKSUM_OFFSET..COMMIT_CHKSUM_OFFSET + 4]
                .copy_from_slice(&crc32_sum.to_be_bytes());
        }
        b[0x30..0x38].copy_from_slice(&sec.to_be_bytes());
        b[0x38..0x3C].copy_from_slice(&nsec.to_be_bytes());
        if self.csum_v23 {
            let c = self.csum_without(&b, COMMIT_CHKSUM_OFFSET);
            b[COMMIT_CHKSUM_OFFSET..COMMIT_CHKSUM_OFFSET + 4].copy_from_slice(&c.to_be_bytes());
        }
        b
    }
}

/// Write a jbd2 block header at the start of `b`.
fn put_header(b: &mut [u8], blocktype: u32, seq: u32) {
    b[0..4].copy_from_slice(&JBD2_MAGIC_NUMBER.to_be_bytes());
    b[4..8].copy_from_slice(&blocktype.to_be_bytes());
    b[8..12].copy_from_slice(&seq.to_be_bytes());
}

/// Escape a block for the log: one whose first word is jbd2's magic would read as a log
/// block, so the word is zeroed and the tag gets `ESCAPE` (replay puts the magic back).
/// Returns whether it did.
pub fn escape(block: &mut [u8]) -> bool {
    if block.len() >= 4 && block[..4] == JBD2_MAGIC_NUMBER.to_be_bytes() {
        block[..4].fill(0);
        return true;
    }
    false
}

impl JournalSuperblock {
    /// Store the checksum a v2/v3 journal superblock carries (no-op otherwise).
    pub fn update_checksum(&mut self) {
        if self.has_csum_v2or3() {
            let c = self.compute_checksum();
            self.s_checksum.set(c);
        }
    }
}

/// jbd2's v1 transaction checksum (`COMPAT_CHECKSUM`): the kernel's `crc32_be`, a
/// most-significant-bit-first crc32 with neither pre- nor post-inversion (the caller seeds it
/// with `!0`), which is the CRC-32/MPEG-2 update.
pub fn crc32_be(seed: u32, data: &[u8]) -> u32 {
    static CRC: crc::Crc<u32> = crc::Crc::<u32>::new(&crc::CRC_32_MPEG_2);
    let mut d = CRC.digest_with_initial(seed);
    d.update(data);
    d.finalize()
}

/// Fast-commit tags (`EXT4_FC_TAG_*`), little-endian tag/length records filling the
/// fast-commit area after the last full commit.
pub mod fc_tag {
    pub const ADD_RANGE: u16 = 1;
    pub const DEL_RANGE: u16 = 2;
    pub const CREAT: u16 = 3;
    pub const LINK: u16 = 4;
    pub const UNLINK: u16 = 5;
    pub const INODE: u16 = 6;
    pub const PAD: u16 = 7;
    pub const TAIL: u16 = 8;
    pub const HEAD: u16 = 9;
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> JournalSuperblock {
        let mut s = JournalSuperblock::read_from_bytes(&[0u8; 1024][..]).unwrap();
        s.s_header.h_magic.set(JBD2_MAGIC_NUMBER);
        s.s_header.h_blocktype.set(blocktype::SUPERBLOCK_V2);
        s.s_blocksize.set(4096);
        s.s_maxlen.set(1024);
        s.s_first.set(1);
        s.s_nr_users.set(1);
        s
    }

    #[test]
    fn good_superblock_verifies() {
        assert_eq!(sample().verify(4096, 1024), Ok(1024));
    }

    #[test]
    fn fields_are_big_endian() {
        let s = sample();
        assert_eq!(&s.as_bytes()[..4], &[0xC0, 0x3B, 0x39, 0x98]);
    }

    #[test]
    fn each_check_names_itself() {
        let mut s = sample();
        s.s_header.h_magic.set(0);
        assert_eq!(s.verify(4096, 1024), Err(JsbError::BadMagic));
        let mut s = sample();
        s.s_nr_users.set(2);
        assert_eq!(s.verify(4096, 1024), Err(JsbError::MultipleUsers(2)));
        let s = sample();
        assert_eq!(s.verify(1024, 1024), Err(JsbError::BlockSize(4096)));
        assert!(matches!(s.verify(4096, 10), Err(JsbError::TooLong { .. })));
        let mut s = sample();
        s.s_feature_incompat.set(feature::INCOMPAT_CSUM_V3);
        s.s_checksum_type = CRC32C_CHKSUM;
        assert!(matches!(
            s.verify(4096, 1024),
            Err(JsbError::ChecksumMismatch { .. })
        ));
        let c = s.compute_checksum();
        s.s_checksum.set(c);
        assert_eq!(s.verify(4096, 1024), Ok(1024));
    }

    fn layouts() -> Vec<TagLayout> {
        let mut v = Vec::new();
        for (csum_v2, csum_v3) in [(false, false), (true, false), (false, true)] {
            for is_64bit in [false, true] {
                v.push(TagLayout {
                    csum_v2,
                    csum_v3,
                    is_64bit,
                });
            }
        }
        v
    }

    #[test]
    fn tags_round_trip_in_every_layout() {
        for l in layouts() {
            let t = BlockTag {
                blocknr: if l.is_64bit {
                    0x1_2345_6789
                } else {
                    0x2345_6789
                },
                flags: tag_flag::ESCAPE | tag_flag::LAST_TAG,
                checksum: if l.csum_v3 {
                    0xDEAD_BEEF
                } else if l.csum_v2 {
                    0xBEEF
                } else {
                    0
                },
            };
            let mut b = vec![0u8; l.tag_bytes()];
            assert!(l.encode(&t, &mut b), "{l:?}");
            assert_eq!(l.decode(&b), Some(t), "{l:?}");
            // A 64-bit block number does not fit a 32-bit layout.
            let big = BlockTag {
                blocknr: 1 << 32,
                ..t
            };
            assert_eq!(l.encode(&big, &mut b), l.is_64bit, "{l:?}");
        }
    }

    #[test]
    fn descriptor_and_commit_blocks_carry_their_checksums() {
        for (incompat, compat) in [
            (0, 0),
            (0, feature::COMPAT_CHECKSUM),
            (feature::INCOMPAT_CSUM_V2, 0),
            (feature::INCOMPAT_CSUM_V3 | feature::INCOMPAT_64BIT, 0),
        ] {
            let mut sb = sample();
            sb.s_feature_incompat.set(incompat);
            sb.s_feature_compat.set(compat);
            sb.s_uuid = [7; 16];
            let f = LogFormat::of(&sb);
            let per = f.tags_per_descriptor();
            let tb = f.layout.tag_bytes();
            // Full use of the block, and no more.
            let room = 4096 - 12 - if f.csum_v23 { 4 } else { 0 };
            assert!(16 + per * tb <= room && 16 + (per + 1) * tb > room, "{f:?}");
            let tags: Vec<BlockTag> = (0..per as u64)
                .map(|i| BlockTag {
                    blocknr: 100 + i,
                    flags: 0,
                    checksum: f.data_checksum(5, &[i as u8; 4096]),
                })
                .collect();
            assert!(f.descriptor(5, &[7; 16], &tags).is_some());
            let d = f.descriptor(5, &[7; 16], &tags[..3]).unwrap();
            assert_eq!(&d[..4], &JBD2_MAGIC_NUMBER.to_be_bytes());
            assert_eq!(u32::from_be_bytes(d[4..8].try_into().unwrap()), 1);
            assert_eq!(u32::from_be_bytes(d[8..12].try_into().unwrap()), 5);
            let t0 = f.layout.decode(&d[12..]).unwrap();
            assert_eq!(t0.flags, 0);
            assert_eq!(&d[12 + tb..12 + tb + 16], &[7; 16]);
            let t2 = f.layout.decode(&d[12 + tb + 16 + tb..]).unwrap();
            assert_eq!(t2.blocknr, 102);
            assert_eq!(t2.flags, tag_flag::SAME_UUID | tag_flag::LAST_TAG);
            assert_eq!(t2.checksum, tags[2].checksum);
            if f.csum_v23 {
                let c = f.csum_without(&d, 4092);
                assert_eq!(d[4092..], c.to_be_bytes());
            }
            assert!(f.descriptor(5, &[7; 16], &[]).is_none());

            let c = f.commit(5, 1_700_000_000, 9, 0x1234_5678);
            let h = CommitHeader::parse(&c).unwrap();
            assert_eq!(h.h_header.h_blocktype.get(), blocktype::COMMIT);
            assert_eq!(h.h_commit_sec.get(), 1_700_000_000);
            assert_eq!(h.h_commit_nsec.get(), 9);
            if f.csum_v23 {
                assert_eq!(
                    h.h_chksum[0].get(),
                    f.csum_without(&c, COMMIT_CHKSUM_OFFSET)
                );
            } else if compat != 0 {
                assert_eq!(h.h_chksum_type, CRC32_CHKSUM);
                assert_eq!(h.h_chksum[0].get(), 0x1234_5678);
            } else {
                assert_eq!(h.h_chksum[0].get(), 0);
            }
        }
    }

    #[test]
    fn escape_zeroes_the_magic_only() {
        let mut b = vec![0u8; 16];
        b[..4].copy_from_slice(&JBD2_MAGIC_NUMBER.to_be_bytes());
        b[4] = 1;
        assert!(escape(&mut b));
        assert_eq!(&b[..5], &[0, 0, 0, 0, 1]);
        assert!(!escape(&mut b));
    }
}
