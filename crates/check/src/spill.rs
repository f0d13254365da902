//! Scratch-file spilling for `--max-memory`: the directory-block list, written by pass 1 as
//! sorted runs to an unlinked scratch file and read back by pass 2 merged in its block order.
//!
//! The list is the one table that grows with the number of directory blocks; spilled, it
//! costs a small read buffer per run instead of 16 bytes per block (twice that while it grows
//! and sorts). Reads are checked: a run that cannot be read back marks the spill failed, and
//! the engine then aborts the check rather than skip blocks.

use crate::pass1::{dir_block_order, DirBlock};
use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};

/// Bytes of one spilled entry: `pblk` (u64), `ino` (u32), `lblk` (u32), little-endian.
const REC: usize = 16;
/// Entries read back at once per run.
const READ_ENTRIES: usize = 4096;

/// Memory limits of a check (`--max-memory`, `--scratch-dir`).
#[derive(Clone, Debug, Default)]
pub struct Limits {
    /// Bytes the directory-block list may hold in memory before it is spilled (`None`: no
    /// limit).
    pub dir_blocks_bytes: Option<usize>,
    /// Where scratch files go (default: `$TMPDIR`).
    pub scratch_dir: Option<std::path::PathBuf>,
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
    /// An empty spill in a fresh scratch file under `dir` (or the temporary directory),
    /// unlinked at once so it disappears with the process.
    pub fn create(dir: Option<&Path>, first_blocks_first: bool) -> std::io::Result<Self> {
        static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        let dir = dir.map_or_else(std::env::temp_dir, Path::to_path_buf);
        let name = format!(
            ".ffsck-scratch-{}-{}",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::Relaxed)
        );
        let path = dir.join(name);
        let file = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create_new(true)
            .open(&path)?;
        std::fs::remove_file(&path)?;
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

    pub fn is_empty(&self) -> bool {
        self.len == 0
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn runs_merge_back_in_pass2_order() {
        let mut spill = DirBlockSpill::create(None, true).unwrap();
        let mut all = Vec::new();
        let mut x = 12345u64;
        for run in 0..5 {
            let mut blocks = Vec::new();
            for i in 0..(3000 + run * 1777) {
                x = x
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                let d = DirBlock {
                    pblk: (x >> 40) % 50_000,
                    ino: (i % 900) as u32 + 1,
                    lblk: ((x >> 20) % 3) as u32,
                };
                blocks.push(d);
                all.push(d);
            }
            spill.push_run(&mut blocks).unwrap();
            assert!(blocks.is_empty());
        }
        all.sort_unstable_by_key(|d| dir_block_order(true, d));
        let back: Vec<DirBlock> = spill.iter().collect();
        assert_eq!(back.len() as u64, spill.len());
        assert_eq!(back, all);
        assert!(!spill.failed());
    }
}
