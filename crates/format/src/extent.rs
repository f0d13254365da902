//! Extent tree nodes: the 12-byte header, index entries and leaf entries, plus the tail checksum.

use zerocopy::little_endian::{U16, U32};
use zerocopy::{FromBytes, Immutable, IntoBytes, KnownLayout, Unaligned};

pub const EXTENT_MAGIC: u16 = 0xF30A;
/// Leaves longer than this are unwritten (preallocated) extents of `len - 32768` blocks.
pub const INIT_MAX_LEN: u16 = 32768;
/// Deepest tree ffsck reads, as e2fsck (which then offers to make a tree deeper than its
/// block size needs more shallow: see `max_useful_depth`).
pub const MAX_DEPTH: u16 = 8;

/// How deep a tree needs to be to map every 32-bit logical block with `block_size` blocks:
/// four entries in the inode, then each level multiplies by the entries a block holds.
pub fn max_useful_depth(block_size: u32) -> u16 {
    let per_block = (block_size.saturating_sub(12) / 12).max(2);
    let levels = (31 - 2) / per_block.ilog2();
    (1 + levels) as u16
}

#[derive(FromBytes, IntoBytes, KnownLayout, Immutable, Unaligned, Clone, Copy, Default, Debug)]
#[repr(C)]
pub struct ExtentHeader {
    pub eh_magic: U16,      // 0x0
    pub eh_entries: U16,    // 0x2
    pub eh_max: U16,        // 0x4
    pub eh_depth: U16,      // 0x6
    pub eh_generation: U32, // 0x8
}

/// Interior entry: points at the next level down.
#[derive(FromBytes, IntoBytes, KnownLayout, Immutable, Unaligned, Clone, Copy, Default, Debug)]
#[repr(C)]
pub struct ExtentIndex {
    pub ei_block: U32,   // 0x0 first logical block covered
    pub ei_leaf_lo: U32, // 0x4
    pub ei_leaf_hi: U16, // 0x8
    pub ei_unused: U16,  // 0xA
}

/// Leaf entry: a run of logical blocks mapped to physical ones.
#[derive(FromBytes, IntoBytes, KnownLayout, Immutable, Unaligned, Clone, Copy, Default, Debug)]
#[repr(C)]
pub struct Extent {
    pub ee_block: U32,    // 0x0
    pub ee_len: U16,      // 0x4
    pub ee_start_hi: U16, // 0x6
    pub ee_start_lo: U32, // 0x8
}
const _: () = assert!(core::mem::size_of::<ExtentHeader>() == 12);
/// What an entry reads as if its 12 bytes could not be viewed as one (they always can: the
/// types are unaligned and exactly 12 bytes long).
static NO_EXTENT: Extent = Extent {
    ee_block: U32::ZERO,
    ee_len: U16::ZERO,
    ee_start_hi: U16::ZERO,
    ee_start_lo: U32::ZERO,
};
static NO_INDEX: ExtentIndex = ExtentIndex {
    ei_block: U32::ZERO,
    ei_leaf_lo: U32::ZERO,
    ei_leaf_hi: U16::ZERO,
    ei_unused: U16::ZERO,
};
const _: () = assert!(core::mem::size_of::<Extent>() == 12);

impl ExtentIndex {
    pub fn leaf(&self) -> u64 {
        u64::from(self.ei_leaf_lo.get()) | (u64::from(self.ei_leaf_hi.get()) << 32)
    }
}

impl Extent {
    pub fn start(&self) -> u64 {
        u64::from(self.ee_start_lo.get()) | (u64::from(self.ee_start_hi.get()) << 32)
    }
    /// Length in blocks and whether the extent is unwritten.
    pub fn len(&self) -> (u32, bool) {
        let l = self.ee_len.get();
        if l > INIT_MAX_LEN {
            (u32::from(l - INIT_MAX_LEN), true)
        } else {
            (u32::from(l), false)
        }
    }
}

/// A parsed node: its header and raw entry bytes (12 bytes each).
pub struct Node<'a> {
    pub header: ExtentHeader,
    entries: &'a [u8],
}

/// Why a node's header is unacceptable (each maps to a distinct finding).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum HeaderError {
    BadMagic,
    /// `eh_entries > eh_max`, or `eh_max` larger than the space holds.
    BadCounts,
    BadDepth,
}

impl<'a> Node<'a> {
    /// Parse a node from `buf` (60 bytes for the in-inode root, a block otherwise).
    pub fn parse(buf: &'a [u8]) -> Result<Self, HeaderError> {
        let node = Self::parse_any_depth(buf)?;
        if node.depth() > MAX_DEPTH {
            return Err(HeaderError::BadDepth);
        }
        Ok(node)
    }

    /// `parse` without the depth limit: libext2fs opens an in-inode root of any depth (the
    /// walk below it is bounded by its own level count), and e2fsck then offers to make the
    /// tree shallower.
    pub fn parse_any_depth(buf: &'a [u8]) -> Result<Self, HeaderError> {
        let (header, _) =
            ExtentHeader::read_from_prefix(buf).map_err(|_| HeaderError::BadCounts)?;
        if header.eh_magic.get() != EXTENT_MAGIC {
            return Err(HeaderError::BadMagic);
        }
        let capacity = (buf.len() - 12) / 12;
        let max = usize::from(header.eh_max.get());
        let n = usize::from(header.eh_entries.get());
        if max > capacity || n > max {
            return Err(HeaderError::BadCounts);
        }
        Ok(Node {
            header,
            entries: &buf[12..12 + n * 12],
        })
    }
    pub fn depth(&self) -> u16 {
        self.header.eh_depth.get()
    }
    pub fn is_leaf(&self) -> bool {
        self.depth() == 0
    }
    /// The entries the node says it has room for (`eh_max`, at most what its buffer holds).
    pub fn capacity(&self) -> usize {
        usize::from(self.header.eh_max.get())
    }
    pub fn len(&self) -> usize {
        self.entries.len() / 12
    }
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }
    /// Leaf entry `i`, in place (entries are read where they lie, not copied out).
    pub fn extent(&self, i: usize) -> &'a Extent {
        let entries: &'a [u8] = self.entries;
        Extent::ref_from_bytes(&entries[i * 12..i * 12 + 12]).unwrap_or(&NO_EXTENT)
    }
    /// Index entry `i`, in place.
    // Not `Index::index`, which cannot hand out the block's `'a` borrow; it pairs with `extent`.
    #[allow(clippy::should_implement_trait)]
    pub fn index(&self, i: usize) -> &'a ExtentIndex {
        let entries: &'a [u8] = self.entries;
        ExtentIndex::ref_from_bytes(&entries[i * 12..i * 12 + 12]).unwrap_or(&NO_INDEX)
    }
}

/// Byte offset of the checksum tail in an extent block with `eh_max` entries.
pub fn tail_offset(eh_max: u16) -> usize {
    12 + 12 * usize::from(eh_max)
}
