//! A small ext2/ext4 image built in memory, so the check's passes get tests on crafted images
//! without mke2fs: one block group of 1 KiB blocks holding the root, lost+found, a file, a
//! directory and a file inside it, with extents and metadata_csum as options. [`Image::build`]
//! lays out an image `e2fsck -fn` calls clean; the edit methods then damage it on purpose (an
//! inode field, a directory entry, a block claimed twice, a bitmap bit) and [`Image::finish`]
//! recomputes every checksum, so a test sees the damage it made and not a stale checksum.
//!
//! Layout (block numbers): 0 boot, 1 superblock, 2 descriptors, 3 block bitmap, 4 inode
//! bitmap, 5.. inode table (128 inodes of 256 bytes), then data blocks.

use ffsck_format::{csum, dir, inode, RawGroupDesc, RawSuperblock};

pub mod packed;

/// Block size of every built image.
pub const BLOCK: usize = 1024;
/// Inode size of every built image.
pub const INODE_SIZE: usize = 256;
/// Inodes in the (single) group.
pub const INODES: u32 = 128;
/// The timestamps every built inode and the superblock carry (2020-09-13, in the past).
pub const TIME: u32 = 1_600_000_000;

const BLOCK_BITMAP: u32 = 3;
const INODE_BITMAP: u32 = 4;
const INODE_TABLE: u32 = 5;
const SB_OFF: usize = 1024;
const GD_OFF: usize = 2 * BLOCK;
/// Blocks of the group (`s_blocks_per_group`): one bitmap block's worth.
const BLOCKS_PER_GROUP: u32 = 8 * BLOCK as u32;

/// Inode numbers of the standard tree.
pub mod ino {
    pub const ROOT: u32 = 2;
    pub const LOST_FOUND: u32 = 11;
    /// `/file`: a regular file of three blocks.
    pub const FILE: u32 = 12;
    /// `/dir`: a directory.
    pub const DIR: u32 = 13;
    /// `/dir/inner`: a regular file of one block.
    pub const INNER: u32 = 14;
}

/// `i_mode` file types.
pub const S_IFREG: u16 = 0o100_000;
pub const S_IFDIR: u16 = 0o040_000;

/// Which ext4 features the image has.
#[derive(Clone, Copy, Debug, Default)]
pub struct Options {
    /// Files map their blocks with an extent tree in the inode (else direct block pointers).
    pub extents: bool,
    /// Inodes, directory blocks, bitmaps, descriptors and the superblock carry crc32c sums.
    pub metadata_csum: bool,
    /// Total blocks (at least 64, at most 8193) [default 2048].
    pub blocks: Option<u32>,
}

impl Options {
    /// ext2 with block maps and no checksums.
    pub fn ext2() -> Self {
        Options::default()
    }
    /// ext4 as mke2fs makes it today, minus the journal: extents and metadata_csum.
    pub fn ext4() -> Self {
        Options {
            extents: true,
            metadata_csum: true,
            blocks: None,
        }
    }
}

/// A built image and what the edits need to know about it.
pub struct Image {
    bytes: Vec<u8>,
    opts: Options,
    blocks: u32,
    /// Next free data block and inode for the builder.
    next_block: u32,
    next_ino: u32,
    /// Directory blocks and their owners, for the leaf checksums.
    dir_blocks: Vec<(u32, u32)>,
    /// Whether [`Image::finish`] recomputes the checksums.
    fix_sums: bool,
}

fn put16(b: &mut [u8], off: usize, v: u16) {
    b[off..off + 2].copy_from_slice(&v.to_le_bytes());
}
fn put32(b: &mut [u8], off: usize, v: u32) {
    b[off..off + 4].copy_from_slice(&v.to_le_bytes());
}
fn get16(b: &[u8], off: usize) -> u16 {
    u16::from_le_bytes([b[off], b[off + 1]])
}
fn get32(b: &[u8], off: usize) -> u32 {
    u32::from_le_bytes([b[off], b[off + 1], b[off + 2], b[off + 3]])
}

impl Image {
    /// The standard tree: `/lost+found`, `/file` (3 blocks), `/dir`, `/dir/inner` (1 block).
    pub fn build(opts: Options) -> Image {
        let blocks = opts.blocks.unwrap_or(2048).clamp(64, BLOCKS_PER_GROUP + 1);
        let itable_blocks = INODES * INODE_SIZE as u32 / BLOCK as u32;
        let mut img = Image {
            bytes: vec![0; blocks as usize * BLOCK],
            opts,
            blocks,
            next_block: INODE_TABLE + itable_blocks,
            next_ino: ino::LOST_FOUND,
            dir_blocks: Vec::new(),
            fix_sums: true,
        };
        img.write_superblock();
        for b in 1..img.next_block {
            img.set_block_used(b, true);
        }
        for i in 1..ino::LOST_FOUND {
            img.set_inode_used(i, true);
        }
        let root = img.mkdir_at(ino::ROOT, ino::ROOT);
        let lpf = img.mkdir(root, b"lost+found");
        let file = img.mkfile(root, b"file", 3, 2 * BLOCK as u32 + 100);
        let d = img.mkdir(root, b"dir");
        let inner = img.mkfile(d, b"inner", 1, 10);
        debug_assert_eq!(
            (lpf, file, d, inner),
            (ino::LOST_FOUND, ino::FILE, ino::DIR, ino::INNER)
        );
        img
    }

    fn write_superblock(&mut self) {
        let s = &mut self.bytes[SB_OFF..SB_OFF + 1024];
        put32(s, 0x00, INODES);
        put32(s, 0x04, self.blocks);
        put32(s, 0x14, 1); // s_first_data_block
        put32(s, 0x20, BLOCKS_PER_GROUP);
        put32(s, 0x24, BLOCKS_PER_GROUP);
        put32(s, 0x28, INODES);
        put32(s, 0x2C, TIME);
        put32(s, 0x30, TIME);
        put16(s, 0x36, 0xFFFF); // s_max_mnt_count: -1
        put16(s, 0x38, 0xEF53);
        put16(s, 0x3A, 1); // clean
        put16(s, 0x3C, 1); // errors=continue
        put32(s, 0x40, TIME);
        put32(s, 0x4C, 1); // dynamic revision
        put32(s, 0x54, ino::LOST_FOUND);
        put16(s, 0x58, INODE_SIZE as u16);
        let mut incompat = 0x0002; // filetype
        let mut ro_compat = 0x0001 | 0x0002; // sparse_super, large_file
        if self.opts.extents {
            incompat |= 0x0040;
        }
        if self.opts.metadata_csum {
            ro_compat |= 0x0400;
            s[0x175] = 1; // crc32c
        }
        put32(s, 0x60, incompat);
        put32(s, 0x64, ro_compat);
        let uuid: [u8; 16] = *b"ffsck-testfs-img";
        s[0x68..0x78].copy_from_slice(&uuid);
        for (k, w) in [0x1234_5678u32, 0x9abc_def0, 0x0fed_cba9, 0x8765_4321]
            .iter()
            .enumerate()
        {
            put32(s, 0xEC + 4 * k, *w);
        }
        s[0xFC] = 1; // half_md4
        put32(s, 0x108, TIME);
        put16(s, 0x15C, 32);
        put16(s, 0x15E, 32);
        let gd = &mut self.bytes[GD_OFF..GD_OFF + 32];
        put32(gd, 0x00, BLOCK_BITMAP);
        put32(gd, 0x04, INODE_BITMAP);
        put32(gd, 0x08, INODE_TABLE);
        if self.opts.metadata_csum {
            put16(gd, 0x12, 0x0004); // inode table zeroed
        }
    }

    /// The image's bytes, with every checksum recomputed (unless [`Image::keep_sums`]).
    pub fn finish(mut self) -> Vec<u8> {
        self.update_counts();
        if self.fix_sums {
            self.fix_checksums();
        }
        self.bytes
    }

    /// Leave the checksums as the edits left them: [`Image::finish`] only fixes the counts.
    pub fn keep_sums(&mut self) -> &mut Self {
        self.fix_sums = false;
        self
    }

    /// The raw bytes, for edits the helpers do not cover.
    pub fn bytes_mut(&mut self) -> &mut [u8] {
        &mut self.bytes
    }

    /// Total blocks of the image.
    pub fn blocks(&self) -> u32 {
        self.blocks
    }

    /// Whether the features include metadata_csum.
    pub fn has_csum(&self) -> bool {
        self.opts.metadata_csum
    }

    /// The first data block the builder has not used (a free block).
    pub fn free_block(&self) -> u32 {
        self.next_block
    }

    /// Byte offset of inode `ino`.
    pub fn inode_offset(ino: u32) -> usize {
        INODE_TABLE as usize * BLOCK + (ino as usize - 1) * INODE_SIZE
    }

    /// Byte offset of block `b`.
    pub fn block_offset(b: u32) -> usize {
        b as usize * BLOCK
    }

    fn bit(&mut self, block: u32, n: u32, on: bool) {
        let off = block as usize * BLOCK + (n / 8) as usize;
        let mask = 1u8 << (n % 8);
        if on {
            self.bytes[off] |= mask;
        } else {
            self.bytes[off] &= !mask;
        }
    }

    /// Marks block `b` in use (or free) in the block bitmap.
    pub fn set_block_used(&mut self, b: u32, used: bool) -> &mut Self {
        self.bit(BLOCK_BITMAP, b - 1, used);
        self
    }

    /// Marks inode `i` in use (or free) in the inode bitmap.
    pub fn set_inode_used(&mut self, i: u32, used: bool) -> &mut Self {
        self.bit(INODE_BITMAP, i - 1, used);
        self
    }

    /// Whether block `b` is marked in use.
    pub fn block_used(&self, b: u32) -> bool {
        let n = b - 1;
        self.bytes[BLOCK_BITMAP as usize * BLOCK + (n / 8) as usize] & (1 << (n % 8)) != 0
    }

    /// Sets a 16-bit field of inode `ino` at byte `off` (e.g. 0x1A, `i_links_count`).
    pub fn set_inode_u16(&mut self, ino: u32, off: usize, v: u16) -> &mut Self {
        put16(&mut self.bytes, Self::inode_offset(ino) + off, v);
        self
    }

    /// Sets a 32-bit field of inode `ino` at byte `off` (e.g. 0x04, `i_size_lo`).
    pub fn set_inode_u32(&mut self, ino: u32, off: usize, v: u32) -> &mut Self {
        put32(&mut self.bytes, Self::inode_offset(ino) + off, v);
        self
    }

    /// A 16-bit field of inode `ino`.
    pub fn inode_u16(&self, ino: u32, off: usize) -> u16 {
        get16(&self.bytes, Self::inode_offset(ino) + off)
    }

    /// A 32-bit field of inode `ino`.
    pub fn inode_u32(&self, ino: u32, off: usize) -> u32 {
        get32(&self.bytes, Self::inode_offset(ino) + off)
    }

    /// Sets a 32-bit field of the superblock at byte `off` (e.g. 0x10, `s_free_inodes_count`).
    /// [`Image::finish`] recomputes the free counts: set them after it, through the bytes.
    pub fn set_sb_u32(&mut self, off: usize, v: u32) -> &mut Self {
        put32(&mut self.bytes, SB_OFF + off, v);
        self
    }

    /// Sets a 16-bit field of the superblock at byte `off`.
    pub fn set_sb_u16(&mut self, off: usize, v: u16) -> &mut Self {
        put16(&mut self.bytes, SB_OFF + off, v);
        self
    }

    /// The `k`th data block of `ino` (its first extent or its direct pointers).
    pub fn file_block(&self, ino: u32, k: u32) -> u32 {
        let i = Self::inode_offset(ino);
        if self.inode_u32(ino, 0x20) & 0x8_0000 != 0 {
            // One extent in the inode: ee_start_lo at 0x28 + 12 + 8.
            get32(&self.bytes, i + 0x28 + 20) + k
        } else {
            get32(&self.bytes, i + 0x28 + 4 * k as usize)
        }
    }

    /// Points the first data block of `ino` at block `b` (a block claimed twice when `b`
    /// belongs to another file), leaving the bitmaps alone.
    pub fn set_first_block(&mut self, ino: u32, b: u32) -> &mut Self {
        let i = Self::inode_offset(ino);
        let at = if self.inode_u32(ino, 0x20) & 0x8_0000 != 0 {
            i + 0x28 + 20
        } else {
            i + 0x28
        };
        put32(&mut self.bytes, at, b);
        self
    }

    /// Byte offset of the entry named `name` in directory `dir`'s first block.
    pub fn dirent_offset(&self, dir: u32, name: &[u8]) -> Option<usize> {
        let base = Self::block_offset(self.file_block(dir, 0));
        let mut off = 0;
        while off + 8 <= BLOCK {
            let rec = usize::from(get16(&self.bytes, base + off + 4));
            let len = usize::from(self.bytes[base + off + 6]);
            if off + 8 + len <= BLOCK && &self.bytes[base + off + 8..base + off + 8 + len] == name {
                return Some(base + off);
            }
            if rec < 8 {
                return None;
            }
            off += rec;
        }
        None
    }

    /// Sets the inode number of entry `name` of `dir`.
    pub fn set_dirent_inode(&mut self, dir: u32, name: &[u8], ino: u32) -> &mut Self {
        let at = self.dirent_offset(dir, name).expect("no such entry");
        put32(&mut self.bytes, at, ino);
        self
    }

    /// Sets the `rec_len` of entry `name` of `dir` (a broken entry when it is not a multiple
    /// of 4 or runs past the block).
    pub fn set_dirent_rec_len(&mut self, dir: u32, name: &[u8], rec_len: u16) -> &mut Self {
        let at = self.dirent_offset(dir, name).expect("no such entry");
        put16(&mut self.bytes, at + 4, rec_len);
        self
    }

    /// Takes data block `n` for a new inode's contents.
    fn alloc_block(&mut self) -> u32 {
        let b = self.next_block;
        assert!(b < self.blocks, "the image is full");
        self.next_block += 1;
        self.set_block_used(b, true);
        b
    }

    /// Writes inode `ino` with `nblocks` fresh contiguous blocks; returns the first.
    fn write_inode(&mut self, ino: u32, mode: u16, links: u16, size: u32, nblocks: u32) -> u32 {
        let first = self.next_block;
        for _ in 0..nblocks {
            self.alloc_block();
        }
        self.set_inode_used(ino, true);
        let extents = self.opts.extents;
        let i = Self::inode_offset(ino);
        let r = &mut self.bytes[i..i + INODE_SIZE];
        put16(r, 0x00, mode);
        put32(r, 0x04, size);
        for at in [0x08, 0x0C, 0x10] {
            put32(r, at, TIME);
        }
        put16(r, 0x1A, links);
        put32(r, 0x1C, nblocks * (BLOCK as u32 / 512));
        if extents {
            put32(r, 0x20, 0x8_0000);
            let h = 0x28;
            put16(r, h, 0xF30A);
            put16(r, h + 2, 1);
            put16(r, h + 4, 4);
            put32(r, h + 12, 0); // ee_block
            put16(r, h + 16, nblocks as u16);
            put32(r, h + 20, first);
        } else {
            for k in 0..nblocks.min(12) {
                put32(r, 0x28 + 4 * k as usize, first + k);
            }
        }
        put16(r, 0x80, 32); // i_extra_isize
        put32(r, 0x90, TIME); // i_crtime
        first
    }

    /// Adds entry `name` → `ino` to directory `dir`'s first block, in the space of its last
    /// entry.
    fn link(&mut self, dir: u32, name: &[u8], ino: u32, ftype: u8) {
        let base = Self::block_offset(self.file_block(dir, 0));
        let end = if self.opts.metadata_csum {
            BLOCK - 12
        } else {
            BLOCK
        };
        let mut off = 0;
        loop {
            let rec = usize::from(get16(&self.bytes, base + off + 4));
            if off + rec >= end {
                break;
            }
            off += rec;
        }
        let used = dir::rec_len_for(usize::from(self.bytes[base + off + 6])) as usize;
        let new = off + used;
        let b = &mut self.bytes[base..base + BLOCK];
        put16(b, off + 4, used as u16);
        put32(b, new, ino);
        put16(b, new + 4, (end - new) as u16);
        b[new + 6] = name.len() as u8;
        b[new + 7] = ftype;
        b[new + 8..new + 8 + name.len()].copy_from_slice(name);
    }

    /// Makes directory `ino` (one block with `.`, `..` and, under metadata_csum, the tail).
    fn mkdir_at(&mut self, ino: u32, parent: u32) -> u32 {
        let b = self.write_inode(ino, S_IFDIR | 0o755, 2, BLOCK as u32, 1);
        self.dir_blocks.push((b, ino));
        let end = if self.opts.metadata_csum {
            BLOCK - 12
        } else {
            BLOCK
        };
        let blk = &mut self.bytes[Self::block_offset(b)..Self::block_offset(b) + BLOCK];
        put32(blk, 0, ino);
        put16(blk, 4, 12);
        blk[6] = 1;
        blk[7] = dir::ft::DIR;
        blk[8] = b'.';
        put32(blk, 12, parent);
        put16(blk, 16, (end - 12) as u16);
        blk[18] = 2;
        blk[19] = dir::ft::DIR;
        blk[20..22].copy_from_slice(b"..");
        if self.opts.metadata_csum {
            put16(blk, end + 4, 12);
            blk[end + 7] = dir::ft::CSUM_TAIL;
        }
        self.bump_dirs(1);
        ino
    }

    fn bump_dirs(&mut self, by: u16) {
        let n = get16(&self.bytes, GD_OFF + 0x10) + by;
        put16(&mut self.bytes, GD_OFF + 0x10, n);
    }

    /// Adds a subdirectory `name` of `parent`; returns its inode.
    pub fn mkdir(&mut self, parent: u32, name: &[u8]) -> u32 {
        let ino = self.take_ino();
        self.mkdir_at(ino, parent);
        self.link(parent, name, ino, dir::ft::DIR);
        let links = self.inode_u16(parent, 0x1A) + 1;
        self.set_inode_u16(parent, 0x1A, links);
        ino
    }

    /// Adds a regular file `name` in `parent` with `nblocks` blocks and `size` bytes.
    pub fn mkfile(&mut self, parent: u32, name: &[u8], nblocks: u32, size: u32) -> u32 {
        let ino = self.take_ino();
        let first = self.write_inode(ino, S_IFREG | 0o644, 1, size, nblocks);
        for k in 0..nblocks {
            let at = Self::block_offset(first + k);
            self.bytes[at..at + BLOCK].fill(b'a' + (ino % 26) as u8);
        }
        self.link(parent, name, ino, dir::ft::REG);
        ino
    }

    /// An inode marked in use with nothing pointing at it (not linked anywhere).
    pub fn orphan_file(&mut self) -> u32 {
        let ino = self.take_ino();
        self.write_inode(ino, S_IFREG | 0o644, 1, 10, 1);
        ino
    }

    fn take_ino(&mut self) -> u32 {
        let ino = self.next_ino;
        assert!(ino <= INODES, "out of inodes");
        self.next_ino += 1;
        ino
    }

    /// Free block and inode counts of the group and the superblock, from the bitmaps.
    fn update_counts(&mut self) {
        let used_blocks = (1..self.blocks).filter(|&b| self.block_used(b)).count() as u32;
        let free_blocks = self.blocks - 1 - used_blocks;
        let ib = INODE_BITMAP as usize * BLOCK;
        let used_inodes = (0..INODES)
            .filter(|&n| self.bytes[ib + (n / 8) as usize] & (1 << (n % 8)) != 0)
            .count() as u32;
        let free_inodes = INODES - used_inodes;
        put16(&mut self.bytes, GD_OFF + 0x0C, free_blocks as u16);
        put16(&mut self.bytes, GD_OFF + 0x0E, free_inodes as u16);
        put32(&mut self.bytes, SB_OFF + 0x0C, free_blocks);
        put32(&mut self.bytes, SB_OFF + 0x10, free_inodes);
        // The bitmaps' padding past the group's end is set, as mke2fs leaves it.
        for n in (self.blocks - 1)..BLOCKS_PER_GROUP {
            self.bit(BLOCK_BITMAP, n, true);
        }
        for n in INODES..BLOCKS_PER_GROUP {
            self.bit(INODE_BITMAP, n, true);
        }
    }

    /// Every checksum, in dependency order: inodes and directory blocks, bitmaps into the
    /// descriptor, the descriptor, the superblock.
    fn fix_checksums(&mut self) {
        if !self.opts.metadata_csum {
            return;
        }
        let sb = RawSuperblock::parse(&self.bytes[SB_OFF..SB_OFF + 1024]).expect("superblock");
        let seed = sb.csum_seed();
        for ino in 1..=INODES {
            let i = Self::inode_offset(ino);
            if self.bytes[i..i + INODE_SIZE].iter().any(|&b| b != 0) {
                inode::set_inode_checksum(&mut self.bytes[i..i + INODE_SIZE], seed, ino);
            }
        }
        for &(b, owner) in &self.dir_blocks {
            let generation = self.inode_u32(owner, 0x64);
            let at = Self::block_offset(b);
            let blk = &mut self.bytes[at..at + BLOCK];
            if dir::has_tail(blk) {
                let c = dir::leaf_checksum(blk, csum::inode_seed(seed, owner, generation));
                put32(blk, BLOCK - 4, c);
            }
        }
        let bb = Self::block_offset(BLOCK_BITMAP);
        let c = csum::ext4_crc32c(seed, &self.bytes[bb..bb + BLOCKS_PER_GROUP as usize / 8]);
        put16(&mut self.bytes, GD_OFF + 0x18, c as u16);
        let ib = Self::block_offset(INODE_BITMAP);
        let c = csum::ext4_crc32c(seed, &self.bytes[ib..ib + INODES as usize / 8]);
        put16(&mut self.bytes, GD_OFF + 0x1A, c as u16);
        let gd = RawGroupDesc::parse(&self.bytes[GD_OFF..GD_OFF + 32], 32);
        if let Some(c) = gd.compute_checksum(&sb, 0, 32) {
            put16(&mut self.bytes, GD_OFF + 0x1E, c);
        }
        let sb = RawSuperblock::parse(&self.bytes[SB_OFF..SB_OFF + 1024]).expect("superblock");
        put32(&mut self.bytes, SB_OFF + 0x3FC, sb.compute_checksum());
    }
}
