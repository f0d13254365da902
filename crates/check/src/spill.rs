//! Scratch-file spilling for `--max-memory`: the scratch files themselves (the spilled
//! directory-block list built on them is `facts::DirBlockSpill`), and the directories' parent
//! links, which pass 2 sets and pass 3 follows, kept in pages of
//! a scratch file with the pages in use cached, as are their generations.
//!
//! The list is the one table that grows with the number of directory blocks; spilled, it
//! costs a small read buffer per run instead of 16 bytes per block (twice that while it grows
//! and sorts). The links and generations are 8 and 4 bytes per directory; spilled, they cost
//! the cache. Reads and writes are checked: one that fails marks the spill failed, and the
//! engine then aborts the check rather than trust what it saw.

use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};

/// Memory limits of a check (`--max-memory`, `--scratch-dir`).
#[derive(Clone, Debug, Default)]
pub struct Limits {
    /// Bytes the directory-block list may hold in memory before it is spilled (`None`: no
    /// limit).
    pub dir_blocks_bytes: Option<usize>,
    /// Bytes the directories' parent links may take in memory: past it they are spilled, and
    /// their cache takes at most this (`None`: no limit).
    pub dir_links_bytes: Option<usize>,
    /// The same for the directories' generations (kept with metadata checksums).
    pub dir_generations_bytes: Option<usize>,
    /// Where scratch files go (default: `$TMPDIR`).
    pub scratch_dir: Option<std::path::PathBuf>,
}

/// A fresh scratch file under `dir` (or the temporary directory), unlinked at once so it
/// disappears with the process.
pub(crate) fn scratch_file(dir: Option<&Path>) -> std::io::Result<File> {
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
    Ok(file)
}

/// A fixed-size record of a [`SpilledTable`], as it is stored in the scratch file.
pub trait Record: Copy + Default + PartialEq + Send + zerocopy::FromZeros {
    /// Bytes of one record on disk (a divisor of a page).
    const BYTES: usize;
    fn load(b: &[u8]) -> Self;
    fn store(&self, b: &mut [u8]);
}

impl Record for u32 {
    const BYTES: usize = 4;
    fn load(b: &[u8]) -> Self {
        u32::from_le_bytes(b[0..4].try_into().unwrap_or_default())
    }
    fn store(&self, b: &mut [u8]) {
        b[0..4].copy_from_slice(&self.to_le_bytes());
    }
}

/// A per-directory table, by position in the sorted directory list: in memory, or, past its
/// share of `--max-memory`, a [`SpilledTable`].
#[derive(Debug)]
pub enum Table<T: Record + std::fmt::Debug> {
    Memory(Vec<T>),
    Spilled(SpilledTable<T>),
}

impl<T: Record + std::fmt::Debug> Default for Table<T> {
    fn default() -> Self {
        Table::Memory(Vec::new())
    }
}

impl<T: Record + std::fmt::Debug> Table<T> {
    /// `values`, spilled under `dir` when they take more than `limit` bytes. Without a
    /// scratch file they simply stay in memory.
    pub fn new(values: Vec<T>, limit: Option<usize>, dir: Option<&Path>) -> Self {
        match limit.filter(|&l| values.len().saturating_mul(T::BYTES) > l) {
            Some(l) => match SpilledTable::from_values(dir, &values, l) {
                Ok(t) => Table::Spilled(t),
                Err(_) => Table::Memory(values),
            },
            None => Table::Memory(values),
        }
    }
    /// `len` zero records, spilled as `new` would spill them.
    pub fn zeroed(len: usize, limit: Option<usize>, dir: Option<&Path>) -> Self {
        match limit.filter(|&l| len.saturating_mul(T::BYTES) > l) {
            Some(l) => match SpilledTable::create(dir, len, l) {
                Ok(t) => Table::Spilled(t),
                Err(_) => Table::Memory(crate::bitmap::written_zeroes(len)),
            },
            None => Table::Memory(crate::bitmap::written_zeroes(len)),
        }
    }
    /// Record `i` (`None` past the end).
    pub fn get(&self, i: usize) -> Option<T> {
        match self {
            Table::Memory(v) => v.get(i).copied(),
            Table::Spilled(s) => s.get(i),
        }
    }
    /// Change record `i`; `f`'s result (`None` past the end).
    pub fn update<R>(&mut self, i: usize, f: impl FnOnce(&mut T) -> R) -> Option<R> {
        match self {
            Table::Memory(v) => v.get_mut(i).map(f),
            Table::Spilled(s) => s.update(i, f),
        }
    }
    /// The records went to a scratch file that could not be written or read back.
    pub fn failed(&self) -> bool {
        matches!(self, Table::Spilled(s) if s.failed())
    }
}

/// Bytes of one page of a [`SpilledTable`]'s scratch file.
const PAGE_BYTES: usize = 4096;

/// A table of `len` records (one per directory, by its position in the sorted directory list:
/// the parent links pass 2 sets and pass 3 follows, the generations that seed checksums) in
/// pages of a scratch file, with at most `cache_bytes` of pages in memory. Pages never
/// written read as zeroes without a read; an evicted page is written back only if it
/// changed. Shared (`&self`) by the passes that read it, so the cache sits behind a lock.
pub struct SpilledTable<T: Record> {
    file: File,
    len: usize,
    cache: std::sync::Mutex<PageCache<T>>,
    failed: AtomicBool,
}

struct PageCache<T> {
    /// Cached pages; `slot_of[page]` is the index of a cached page here.
    pages: Vec<CachedPage<T>>,
    slot_of: Vec<Option<u32>>,
    /// Pages that are in the file (written at least once).
    on_disk: Vec<bool>,
    max_pages: usize,
    /// The clock hand of the eviction sweep.
    hand: usize,
    /// One page's bytes, for reads and write-backs.
    bytes: Vec<u8>,
}

struct CachedPage<T> {
    page: usize,
    dirty: bool,
    /// Used since the hand last passed.
    referenced: bool,
    records: Box<[T]>,
}

impl<T: Record> std::fmt::Debug for SpilledTable<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "SpilledTable({} records)", self.len)
    }
}

impl<T: Record> SpilledTable<T> {
    const PER_PAGE: usize = PAGE_BYTES / T::BYTES;

    /// `len` records, all zero, in a scratch file under `dir`, caching at most `cache_bytes`
    /// of them (never fewer than four pages).
    pub fn create(dir: Option<&Path>, len: usize, cache_bytes: usize) -> std::io::Result<Self> {
        let pages = len.div_ceil(Self::PER_PAGE);
        Ok(SpilledTable {
            file: scratch_file(dir)?,
            len,
            cache: std::sync::Mutex::new(PageCache {
                pages: Vec::new(),
                slot_of: vec![None; pages],
                on_disk: vec![false; pages],
                max_pages: (cache_bytes / PAGE_BYTES).max(4),
                hand: 0,
                bytes: vec![0; PAGE_BYTES],
            }),
            failed: AtomicBool::new(false),
        })
    }

    /// A table holding `values`, written out page by page (none of it cached).
    pub fn from_values(
        dir: Option<&Path>,
        values: &[T],
        cache_bytes: usize,
    ) -> std::io::Result<Self> {
        let t = Self::create(dir, values.len(), cache_bytes)?;
        {
            let mut c = t.cache.lock().unwrap_or_else(|e| e.into_inner());
            let PageCache { on_disk, bytes, .. } = &mut *c;
            for (page, chunk) in values.chunks(Self::PER_PAGE).enumerate() {
                bytes.fill(0);
                for (v, b) in chunk.iter().zip(bytes.chunks_exact_mut(T::BYTES)) {
                    v.store(b);
                }
                t.file.write_all_at(bytes, (page * PAGE_BYTES) as u64)?;
                on_disk[page] = true;
            }
        }
        Ok(t)
    }

    /// Whether a page could not be written or read back (the check must not trust what it
    /// saw).
    pub fn failed(&self) -> bool {
        self.failed.load(Ordering::Relaxed)
    }

    /// Record `i` (`None` past the end).
    pub fn get(&self, i: usize) -> Option<T> {
        self.update(i, |r| *r)
    }

    /// Run `f` on record `i` in the cache, its page brought in first; `f`'s result (`None`
    /// past the end).
    pub fn update<R>(&self, i: usize, f: impl FnOnce(&mut T) -> R) -> Option<R> {
        if i >= self.len {
            return None;
        }
        let mut c = self.cache.lock().unwrap_or_else(|e| e.into_inner());
        let page = i / Self::PER_PAGE;
        let slot = match c.slot_of[page] {
            Some(slot) => slot as usize,
            None => self.bring_in(&mut c, page),
        };
        let p = &mut c.pages[slot];
        p.referenced = true;
        let r = &mut p.records[i % Self::PER_PAGE];
        let before = *r;
        let out = f(r);
        p.dirty |= *r != before;
        Some(out)
    }

    /// Read `page` into the cache, evicting a page not used since the hand last passed if
    /// the cache is full (its records and the I/O buffer are reused); returns its slot.
    fn bring_in(&self, c: &mut PageCache<T>, page: usize) -> usize {
        let slot = if c.pages.len() < c.max_pages {
            c.pages.push(CachedPage {
                page,
                dirty: false,
                referenced: true,
                records: vec![T::default(); Self::PER_PAGE].into_boxed_slice(),
            });
            c.pages.len() - 1
        } else {
            // Every page is referenced at most once before the hand clears it: two sweeps at
            // most find a victim.
            let n = c.pages.len();
            let mut slot = c.hand % n;
            for _ in 0..2 * n {
                if !c.pages[slot].referenced {
                    break;
                }
                c.pages[slot].referenced = false;
                slot = (slot + 1) % n;
            }
            c.hand = (slot + 1) % n;
            self.evict(c, slot);
            slot
        };
        let PageCache {
            pages,
            slot_of,
            on_disk,
            bytes,
            ..
        } = c;
        let p = &mut pages[slot];
        (p.page, p.dirty, p.referenced) = (page, false, true);
        slot_of[page] = Some(slot as u32);
        if !on_disk[page] {
            p.records.fill(T::default());
        } else if self
            .file
            .read_exact_at(bytes, (page * PAGE_BYTES) as u64)
            .is_ok()
        {
            for (r, b) in p.records.iter_mut().zip(bytes.chunks_exact(T::BYTES)) {
                *r = T::load(b);
            }
        } else {
            p.records.fill(T::default());
            self.failed.store(true, Ordering::Relaxed);
        }
        slot
    }

    /// Take the page in `slot` out of the cache, writing it back if it changed.
    fn evict(&self, c: &mut PageCache<T>, slot: usize) {
        let PageCache {
            pages,
            slot_of,
            on_disk,
            bytes,
            ..
        } = c;
        let p = &pages[slot];
        slot_of[p.page] = None;
        if !p.dirty {
            return;
        }
        for (r, b) in p.records.iter().zip(bytes.chunks_exact_mut(T::BYTES)) {
            r.store(b);
        }
        match self.file.write_all_at(bytes, (p.page * PAGE_BYTES) as u64) {
            Ok(()) => on_disk[p.page] = true,
            Err(_) => self.failed.store(true, Ordering::Relaxed),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A two-field record, like pass 2's directory links.
    #[derive(Clone, Copy, Debug, Default, PartialEq, Eq, zerocopy::FromZeros)]
    struct DirLinks {
        dotdot: u32,
        parent: u32,
    }

    impl Record for DirLinks {
        const BYTES: usize = 8;
        fn load(b: &[u8]) -> Self {
            DirLinks {
                dotdot: u32::load(&b[0..4]),
                parent: u32::load(&b[4..8]),
            }
        }
        fn store(&self, b: &mut [u8]) {
            self.dotdot.store(&mut b[0..4]);
            self.parent.store(&mut b[4..8]);
        }
    }

    #[test]
    fn spilled_links_read_back_what_was_set_through_a_small_cache() {
        // 20 pages of links through a cache of 4, in an order that keeps evicting: every
        // value must come back, whether its page stayed cached, was written back or never
        // changed.
        let per_page = SpilledTable::<DirLinks>::PER_PAGE;
        let n = 20 * per_page + 7;
        let links = SpilledTable::<DirLinks>::create(None, n, 1).unwrap();
        let mut model = vec![DirLinks::default(); n];
        let mut x = 0x2545_F491_4F6C_DD1Du64;
        for _ in 0..30_000 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let i = (x % n as u64) as usize;
            if x & (1 << 40) != 0 {
                let v = (x >> 32) as u32;
                links.update(i, |l| l.parent = v);
                model[i].parent = v;
            } else {
                links.update(i, |l| l.dotdot = i as u32);
                model[i].dotdot = i as u32;
            }
            let j = ((x >> 20) % n as u64) as usize;
            assert_eq!(
                links.get(j).map(|l| l.parent),
                Some(model[j].parent),
                "link {j}"
            );
        }
        for (i, m) in model.iter().enumerate() {
            assert_eq!(links.get(i), Some(*m), "link {i}");
        }
        assert_eq!(links.get(n), None, "past the end");
        assert_eq!(links.update(n + 5, |l| l.parent = 9), None);
        assert!(!links.failed());
        assert!(links.cache.lock().unwrap().pages.len() <= 4);
    }

    #[test]
    fn a_table_written_whole_reads_back_in_any_order() {
        let values: Vec<u32> = (0..10_000u32)
            .map(|i| i.wrapping_mul(2_654_435_761))
            .collect();
        let t = SpilledTable::from_values(None, &values, 1).unwrap();
        assert_eq!(t.len, values.len());
        for i in (0..values.len()).rev().step_by(7).chain(0..values.len()) {
            assert_eq!(t.get(i), Some(values[i]), "value {i}");
        }
        assert_eq!(t.get(values.len()), None);
        assert!(!t.failed());
    }
}
