//! The directory-block list pass 1 hands to pass 2: one record per directory block, in
//! pass 2's order, kept in memory or spilled to a scratch file as sorted runs and read back
//! merged (`--max-memory`).

use crate::spill::scratch_file;
use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};

/// Bytes of one spilled entry: `pblk` (u64), `ino` (u32), `lblk` (u32), little-endian.
const REC: usize = 16;
/// Entries read back at once per run.
const READ_ENTRIES: usize = 4096;

/// One directory block to check in pass 2 (`pblk == 0` marks a hole).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct DirBlock {
    pub pblk: u64,
    pub ino: u32,
    pub lblk: u32,
}

/// The order pass 2 reads directory blocks in. With dir_index, e2fsck checks every
/// directory's first block before any other, so parents and htree roots are known early;
/// holes (block 0) then come first among the rest. Then by block, inode and logical block,
/// packed into one number so the sort compares two words, not four fields. (A directory
/// block number has at most 48 bits: extents hold 48, block maps 32.)
pub fn dir_block_order(first_blocks_first: bool, d: &DirBlock) -> u128 {
    let later = u128::from(first_blocks_first && d.lblk != 0);
    let pblk = u128::from(d.pblk & ((1 << 63) - 1));
    later << 127 | pblk << 64 | u128::from(d.ino) << 32 | u128::from(d.lblk)
}

/// A directory-block list spilled to a scratch file as sorted runs.
pub struct DirBlockSpill {
    file: File,
    /// `(first entry, entries)` of each run.
    runs: Vec<(u64, u64)>,
    len: u64,
    first_blocks_first: bool,
    failed: AtomicBool,
}

impl DirBlockSpill {
    /// An empty spill in a fresh scratch file under `dir` (or the temporary directory).
    pub fn create(dir: Option<&Path>, first_blocks_first: bool) -> std::io::Result<Self> {
        let file = scratch_file(dir)?;
        Ok(DirBlockSpill {
            file,
            runs: Vec::new(),
            len: 0,
            first_blocks_first,
            failed: AtomicBool::new(false),
        })
    }

    /// Sort `blocks` into pass-2 order and append them as one run; `blocks` is emptied (and
    /// its memory released).
    pub fn push_run(&mut self, blocks: &mut Vec<DirBlock>) -> std::io::Result<()> {
        if blocks.is_empty() {
            return Ok(());
        }
        let first = self.first_blocks_first;
        blocks.sort_unstable_by_key(|d| dir_block_order(first, d));
        let mut bytes = Vec::with_capacity(READ_ENTRIES * REC);
        let mut at = self.len * REC as u64;
        for chunk in blocks.chunks(READ_ENTRIES) {
            bytes.clear();
            for d in chunk {
                bytes.extend_from_slice(&d.pblk.to_le_bytes());
                bytes.extend_from_slice(&d.ino.to_le_bytes());
                bytes.extend_from_slice(&d.lblk.to_le_bytes());
            }
            self.file.write_all_at(&bytes, at)?;
            at += bytes.len() as u64;
        }
        self.runs.push((self.len, blocks.len() as u64));
        self.len += blocks.len() as u64;
        *blocks = Vec::new();
        Ok(())
    }

    pub fn len(&self) -> u64 {
        self.len
    }

    /// Whether a run could not be read back (the check must not trust what it saw).
    pub fn failed(&self) -> bool {
        self.failed.load(Ordering::Relaxed)
    }

    /// Every block, in pass-2 order (a k-way merge of the runs).
    pub fn iter(&self) -> Merged<'_> {
        let mut m = Merged {
            spill: self,
            cursors: self
                .runs
                .iter()
                .map(|&(start, n)| Cursor {
                    next: start,
                    end: start + n,
                    buf: Vec::new(),
                    pos: 0,
                })
                .collect(),
            heads: Vec::new(),
        };
        for i in 0..m.cursors.len() {
            if let Some(d) = m.pull(i) {
                m.heads.push((d, i));
            }
        }
        m
    }
}

struct Cursor {
    /// Next entry of the run to read from the file, and the run's end.
    next: u64,
    end: u64,
    buf: Vec<DirBlock>,
    pos: usize,
}

/// The blocks of a spill in pass-2 order.
pub struct Merged<'a> {
    spill: &'a DirBlockSpill,
    cursors: Vec<Cursor>,
    /// The next block of each run that has one (few runs: a linear scan picks the least).
    heads: Vec<(DirBlock, usize)>,
}

impl Merged<'_> {
    /// The next block of run `i`, refilling its buffer from the file.
    fn pull(&mut self, i: usize) -> Option<DirBlock> {
        let c = &mut self.cursors[i];
        if c.pos == c.buf.len() {
            if c.next >= c.end {
                return None;
            }
            let n = (c.end - c.next).min(READ_ENTRIES as u64) as usize;
            let mut bytes = vec![0u8; n * REC];
            if self
                .spill
                .file
                .read_exact_at(&mut bytes, c.next * REC as u64)
                .is_err()
            {
                self.spill.failed.store(true, Ordering::Relaxed);
                c.next = c.end;
                return None;
            }
            c.next += n as u64;
            c.buf.clear();
            c.buf.extend(bytes.chunks_exact(REC).map(|r| DirBlock {
                pblk: u64::from_le_bytes(r[0..8].try_into().unwrap_or_default()),
                ino: u32::from_le_bytes(r[8..12].try_into().unwrap_or_default()),
                lblk: u32::from_le_bytes(r[12..16].try_into().unwrap_or_default()),
            }));
            c.pos = 0;
        }
        let d = c.buf[c.pos];
        c.pos += 1;
        Some(d)
    }
}

impl Iterator for Merged<'_> {
    type Item = DirBlock;
    fn next(&mut self) -> Option<DirBlock> {
        let first = self.spill.first_blocks_first;
        let at = (0..self.heads.len()).min_by_key(|&k| dir_block_order(first, &self.heads[k].0))?;
        let (d, run) = self.heads[at];
        match self.pull(run) {
            Some(n) => self.heads[at] = (n, run),
            None => {
                self.heads.swap_remove(at);
            }
        }
        Some(d)
    }
}
