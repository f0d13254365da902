//! The facts passes hand to each other: what pass 1 found of every inode and block
//! (`Pass1Facts`: kinds, links, bitmaps, directories, directory blocks, claim summaries),
//! read by pass 1B, pass 2 (also while pass 1 still runs: `Partial`, `Stage`), passes 3 to 5
//! and the repairs. Passes depend on these types, not on each other.

mod dirblocks;

use crate::bitmap::{AtomicBitmap, Bitmap};
use crate::icount::{InodeCounts, InodeKinds};
pub use dirblocks::{dir_block_order, DirBlock, DirBlockSpill};
use ffsck_format::dir::ft;
use std::collections::BTreeMap;
use std::sync::Arc;

/// Bits of the per-inode kind byte (low three bits: the dirent file type).
pub mod kind {
    pub const TYPE_MASK: u8 = 0x07;
    /// Fields pass 2 must look at when it meets an entry for this inode (e2fsck's bad map).
    pub const BAD: u8 = 0x08;
    /// A directory with a usable htree index.
    pub const HTREE: u8 = 0x10;
    /// Inline data.
    pub const INLINE: u8 = 0x20;
    /// The inode stores an xattr value (`EA_INODE_FL`).
    pub const EA_INODE: u8 = 0x40;
    /// Encrypted inode.
    pub const ENCRYPT: u8 = 0x80;
}

/// A coarse fingerprint of the blocks one group's inodes claim: ffsck's per-group bitmap
/// snapshot, reduced to the span and a 64-bucket occupancy mask, so pass 1B rescans only the
/// groups that can own a multiply-claimed block.
#[derive(Clone, Copy, Debug, Default)]
pub struct ClaimSummary {
    pub lo: u64,
    pub hi: u64,
    pub buckets: u64,
}

impl ClaimSummary {
    pub(crate) fn add(&mut self, start: u64, len: u64, bucket_shift: u32) {
        if len == 0 {
            return;
        }
        let end = start + len - 1;
        if self.buckets == 0 {
            self.lo = start;
            self.hi = end;
        } else {
            self.lo = self.lo.min(start);
            self.hi = self.hi.max(end);
        }
        let (b0, b1) = (start >> bucket_shift, end >> bucket_shift);
        if b1 - b0 >= 63 {
            self.buckets = !0;
        } else {
            for b in b0..=b1 {
                self.buckets |= 1 << (b % 64);
            }
        }
    }
    pub fn may_contain(&self, blk: u64, bucket_shift: u32) -> bool {
        self.buckets != 0
            && blk >= self.lo
            && blk <= self.hi
            && self.buckets & (1 << ((blk >> bucket_shift) % 64)) != 0
    }
}

/// A directory one group's scan found.
#[derive(Clone, Copy, Debug)]
pub struct DirFacts {
    pub ino: u32,
    /// `i_generation`, which seeds the checksums of the directory's blocks.
    pub generation: u32,
}

/// The directories pass 1 found, ascending by inode number, as an index (shared with pass
/// 2's table of parents rather than copied) that tells each one's position in that order; the
/// generations (which seed the checksums of directory blocks) are kept, by position, only on
/// a file system with metadata checksums.
#[derive(Debug, Default)]
pub struct DirList {
    index: Arc<DirIndex>,
    /// By position; under `--max-memory`, past their share, in a scratch file.
    generations: crate::spill::Table<u32>,
}

impl DirList {
    /// `inos` ascending, each once, and their generations (or none).
    pub(crate) fn new(
        inos: &[u32],
        generations: Vec<u32>,
        inodes_count: u32,
        limits: &crate::spill::Limits,
    ) -> Self {
        DirList {
            index: Arc::new(DirIndex::new(inos, inodes_count)),
            generations: crate::spill::Table::new(
                generations,
                limits.dir_generations_bytes,
                limits.scratch_dir.as_deref(),
            ),
        }
    }
    /// The generations went to a scratch file that could not be read back.
    pub fn spill_failed(&self) -> bool {
        self.generations.failed()
    }
    /// The directories' inode numbers, ascending.
    pub fn inos(&self) -> impl Iterator<Item = u32> + '_ {
        self.index.iter()
    }
    /// How many directories there are.
    pub fn len(&self) -> usize {
        self.index.len()
    }
    /// Where each directory is among them, by inode number.
    pub fn index(&self) -> &Arc<DirIndex> {
        &self.index
    }
    /// The generation of directory `ino` (`None`: not listed, or no checksums to seed).
    pub fn generation(&self, ino: u32) -> Option<u32> {
        self.generations.get(self.index.position(ino)?)
    }
}

/// The position of each directory in the ascending list of directories, found from its inode
/// number in constant time (pass 2 looks one up per directory block and per entry naming a
/// directory; halving a list of a million took a fifth of its merge): a bitmap of the
/// directories' inodes, with the number of directories before each 64-bit word. 1.5 bits
/// per inode, which also lists the directories in order (instead of 4 bytes each).
#[derive(Debug, Default)]
pub struct DirIndex {
    words: Vec<u64>,
    before: Vec<u32>,
    len: usize,
}

impl DirIndex {
    /// `inos` ascending, each once; numbers outside `1..=inodes_count` are left out.
    pub fn new(inos: &[u32], inodes_count: u32) -> Self {
        let n = (u64::from(inodes_count) + 1).div_ceil(64) as usize;
        let mut words = vec![0u64; n];
        for &ino in inos.iter().filter(|&&i| i != 0 && i <= inodes_count) {
            words[(ino / 64) as usize] |= 1 << (ino % 64);
        }
        let mut seen = 0u32;
        let before = words
            .iter()
            .map(|w| {
                let b = seen;
                seen += w.count_ones();
                b
            })
            .collect();
        DirIndex {
            words,
            before,
            len: seen as usize,
        }
    }
    /// How many directories it holds.
    pub fn len(&self) -> usize {
        self.len
    }
    /// The directories' inode numbers, ascending (the `i`th is at position `i`).
    pub fn iter(&self) -> impl Iterator<Item = u32> + '_ {
        self.words.iter().enumerate().flat_map(|(w, &word)| {
            let mut rest = word;
            std::iter::from_fn(move || {
                (rest != 0).then(|| {
                    let bit = rest.trailing_zeros();
                    rest &= rest - 1;
                    w as u32 * 64 + bit
                })
            })
        })
    }
    /// Where directory `ino` is in the list (`None`: not a listed directory).
    pub fn position(&self, ino: u32) -> Option<usize> {
        let w = (ino / 64) as usize;
        let word = *self.words.get(w)?;
        let bit = 1u64 << (ino % 64);
        (word & bit != 0)
            .then(|| self.before[w] as usize + (word & (bit - 1)).count_ones() as usize)
    }
}

fn generation_of(inos: &[u32], generations: &[u32], ino: u32) -> Option<u32> {
    let at = inos.binary_search(&ino).ok()?;
    generations.get(at).copied()
}

#[derive(Default, Debug, Clone, Copy, serde::Serialize)]
pub struct Counts {
    pub files: u64,
    pub dirs: u64,
    pub regular: u64,
    pub fragmented: u64,
    pub symlinks: u64,
    pub fast_symlinks: u64,
    pub chardev: u64,
    pub blockdev: u64,
    pub fifo: u64,
    pub socket: u64,
    pub large_files: u64,
    pub extent_depth_hist: [u64; 6],
    /// Directories among `fragmented` (e2fsck's "non-contiguous directories").
    pub fragmented_dirs: u64,
    /// Block-mapped inodes with an indirect, double and triple indirect block (`-v`).
    pub ind_dind_tind: [u64; 3],
    /// Blocks of the bad-blocks inode (its indirect blocks included).
    pub bad_blocks: u64,
}

impl Counts {
    pub(crate) fn add(&mut self, o: &Counts) {
        self.files += o.files;
        self.dirs += o.dirs;
        self.regular += o.regular;
        self.fragmented += o.fragmented;
        self.symlinks += o.symlinks;
        self.fast_symlinks += o.fast_symlinks;
        self.chardev += o.chardev;
        self.blockdev += o.blockdev;
        self.fifo += o.fifo;
        self.socket += o.socket;
        self.large_files += o.large_files;
        for i in 0..6 {
            self.extent_depth_hist[i] += o.extent_depth_hist[i];
        }
        self.fragmented_dirs += o.fragmented_dirs;
        for i in 0..3 {
            self.ind_dind_tind[i] += o.ind_dind_tind[i];
        }
        self.bad_blocks += o.bad_blocks;
    }
}

pub struct Pass1Facts {
    /// `i_links_count` of every in-use inode (index `ino - 1`), 0 otherwise.
    pub links: InodeCounts,
    pub kinds: InodeKinds,
    pub inode_used: Bitmap,
    pub block_used: Bitmap,
    /// Blocks claimed more than once, ascending.
    pub dup_blocks: Vec<u64>,
    /// Blocks of file-system metadata (superblocks, descriptors, bitmaps, inode tables).
    pub metadata: Bitmap,
    /// The directory blocks in pass-2 order (empty when spilled: see `dir_block_iter`).
    pub dir_blocks: Vec<DirBlock>,
    /// The directory-block list, when a memory limit sent it to a scratch file.
    pub dir_spill: Option<DirBlockSpill>,
    pub dirs: DirList,
    pub summaries: Vec<ClaimSummary>,
    pub bucket_shift: u32,
    pub counts: Counts,
    /// References to each value inode from xattr entries (absent: none).
    pub ea_inode_refs: BTreeMap<u32, u32>,
    /// Space and inodes per user, group and project id (with the `quota` feature).
    pub quota: crate::quota::Usage,
    /// `(ino, encryption policy id)` of every encrypted inode with a context, ascending.
    pub policies: Vec<(u32, u32)>,
    /// Value inodes whose missing `EA_INODE` flag this check agreed to set.
    pub ea_inode_flag_set: std::collections::BTreeSet<u32>,
    /// Inodes whose inode-table block is on the bad-blocks list, ascending: counted in
    /// use but never read, and no directory entry may name them.
    pub bb_inodes: Vec<u32>,
    /// An extent tree's rebuild was agreed to (pass 1E's header follows passes 1B–1D).
    pub rebuilds_extents: bool,
}

impl Pass1Facts {
    /// How many directory blocks pass 2 checks.
    pub fn dir_block_count(&self) -> u64 {
        self.dir_blocks.len() as u64 + self.dir_spill.as_ref().map_or(0, |s| s.len())
    }

    /// Every directory block in pass-2 order, from memory or the scratch file.
    pub fn dir_block_iter(&self) -> Box<dyn Iterator<Item = DirBlock> + '_> {
        match &self.dir_spill {
            Some(s) => Box::new(s.iter()),
            None => Box::new(self.dir_blocks.iter().copied()),
        }
    }

    /// The directory blocks in pass-2 order, `n` at a time.
    pub fn dir_block_windows(
        &self,
        n: usize,
    ) -> Box<dyn Iterator<Item = std::borrow::Cow<'_, [DirBlock]>> + Send + '_> {
        match &self.dir_spill {
            Some(s) => {
                let mut it = s.iter();
                Box::new(std::iter::from_fn(move || {
                    let w: Vec<DirBlock> = it.by_ref().take(n).collect();
                    (!w.is_empty()).then_some(std::borrow::Cow::Owned(w))
                }))
            }
            None => Box::new(
                self.dir_blocks
                    .chunks(n.max(1))
                    .map(std::borrow::Cow::Borrowed),
            ),
        }
    }
}

/// Receives the directory blocks of each finished batch of groups during a pipelined pass 1.
pub trait Stage: Send {
    /// `blocks` were found by the groups of the batch just finished; `facts` are final for
    /// every inode up to `facts.frontier` and unknown beyond it.
    fn batch(&mut self, facts: &Partial<'_>, blocks: Vec<DirBlock>);
}

/// Pass-1 facts while the scan runs: final for inodes `1..=frontier`.
pub struct Partial<'a> {
    pub(crate) kind_dir: &'a AtomicBitmap,
    pub(crate) kind_reg: &'a AtomicBitmap,
    pub(crate) inode_used: &'a AtomicBitmap,
    pub(crate) other: &'a [(u32, u8)],
    pub(crate) dir_inos: &'a [u32],
    pub(crate) dir_generations: &'a [u32],
    pub(crate) bb_inodes: &'a [u32],
    pub(crate) policies: &'a [(u32, u32)],
    /// Highest inode number whose group has been scanned.
    pub frontier: u32,
}

/// Read access to the per-inode facts pass 2 uses, final (`Pass1Facts`) or partial.
pub trait Facts: Sync {
    /// The kind byte of inode `idx + 1`.
    fn kind(&self, idx: u32) -> u8;
    /// Whether inode `idx + 1` is in use.
    fn used(&self, idx: u32) -> bool;
    /// The generation of directory `ino`, if found so far (and kept: only with checksums).
    fn dir_generation(&self, ino: u32) -> Option<u32>;
    /// Whether inode `idx + 1` lies in an inode-table block on the bad-blocks list.
    fn in_bad_block(&self, idx: u32) -> bool;
    /// The encryption policy id of inode `ino` (`None`: not encrypted, or no context).
    fn policy(&self, ino: u32) -> Option<u32>;
}

fn policy_of(policies: &[(u32, u32)], ino: u32) -> Option<u32> {
    policies
        .binary_search_by_key(&ino, |&(i, _)| i)
        .ok()
        .map(|at| policies[at].1)
}

impl Facts for Pass1Facts {
    fn kind(&self, idx: u32) -> u8 {
        self.kinds.get(u64::from(idx))
    }
    fn used(&self, idx: u32) -> bool {
        self.inode_used.get(u64::from(idx))
    }
    fn dir_generation(&self, ino: u32) -> Option<u32> {
        self.dirs.generation(ino)
    }
    fn in_bad_block(&self, idx: u32) -> bool {
        self.bb_inodes.binary_search(&(idx + 1)).is_ok()
    }
    fn policy(&self, ino: u32) -> Option<u32> {
        policy_of(&self.policies, ino)
    }
}

impl Facts for Partial<'_> {
    fn kind(&self, idx: u32) -> u8 {
        let i = u64::from(idx);
        if self.kind_reg.get(i) {
            return ft::REG;
        }
        if self.kind_dir.get(i) {
            return ft::DIR;
        }
        match self.other.binary_search_by_key(&idx, |&(i, _)| i) {
            Ok(at) => self.other[at].1,
            Err(_) => 0,
        }
    }
    fn used(&self, idx: u32) -> bool {
        self.inode_used.get(u64::from(idx))
    }
    fn dir_generation(&self, ino: u32) -> Option<u32> {
        generation_of(self.dir_inos, self.dir_generations, ino)
    }
    fn in_bad_block(&self, idx: u32) -> bool {
        self.bb_inodes.binary_search(&(idx + 1)).is_ok()
    }
    fn policy(&self, ino: u32) -> Option<u32> {
        policy_of(self.policies, ino)
    }
}

#[cfg(test)]
mod tests {
    use super::DirIndex;

    #[test]
    fn dir_index_finds_what_halving_the_list_finds() {
        let inodes_count = 5000u32;
        let mut x = 0x9E37_79B9u32;
        let mut inos: Vec<u32> = (0..700)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 17;
                x ^= x << 5;
                x % (inodes_count + 40)
            })
            .chain([1, 2, 63, 64, 65, 127, 128, inodes_count])
            .collect();
        inos.sort_unstable();
        inos.dedup();
        // Numbers past the inode count (or 0) cannot be directories: never found.
        let listed: Vec<u32> = inos
            .iter()
            .copied()
            .filter(|&i| i != 0 && i <= inodes_count)
            .collect();
        let index = DirIndex::new(&inos, inodes_count);
        for ino in 0..=inodes_count + 100 {
            assert_eq!(
                index.position(ino),
                listed.binary_search(&ino).ok(),
                "inode {ino}"
            );
        }
        assert_eq!(index.position(u32::MAX), None);
        assert_eq!(DirIndex::default().position(2), None);
        // It lists them too, in order.
        assert_eq!(index.iter().collect::<Vec<_>>(), listed);
        assert_eq!(index.len(), listed.len());
    }
}
