//! Compact per-inode tables: counts (link counts from pass 1, references from pass 2) and
//! kinds (file type and flags), each a bitmap or two for the common values plus a sorted list
//! of the rest.
//!
//! Most inodes of a real file system are regular files with one link or leaf directories with
//! two, with no special flags, so these take a fraction of a byte per inode plus a few bytes
//! per exception, instead of two or three bytes per inode.

use crate::bitmap::Bitmap;
use std::sync::Mutex;

/// Counts indexed by `ino - 1`.
#[derive(Debug, Clone)]
pub struct InodeCounts {
    one: Bitmap,
    two: Bitmap,
    /// `(index, count)` for every count above two, ascending by index.
    many: Vec<(u32, u16)>,
}

impl InodeCounts {
    /// Empty counts for `len` indexes (the unit tests build counts this way; the passes use
    /// `SharedCounter::finish`).
    #[cfg(test)]
    pub fn new(len: u64) -> Self {
        InodeCounts {
            one: Bitmap::new(len),
            two: Bitmap::new(len),
            many: Vec::new(),
        }
    }

    /// From bitmaps of the counts of one and of two (no index in both) and the other counts,
    /// ascending by index.
    pub fn from_parts(one: Bitmap, two: Bitmap, many: Vec<(u32, u16)>) -> Self {
        debug_assert!(many.windows(2).all(|w| w[0].0 < w[1].0));
        InodeCounts { one, two, many }
    }

    /// The count of `idx` if the bitmaps hold it (one or two), else its index in the list.
    fn small(&self, idx: u64) -> Result<u16, Option<u32>> {
        if self.one.get(idx) {
            Ok(1)
        } else if self.two.get(idx) {
            Ok(2)
        } else {
            Err(u32::try_from(idx).ok())
        }
    }

    pub fn get(&self, idx: u64) -> u16 {
        let idx = match self.small(idx) {
            Ok(c) => return c,
            Err(None) => return 0,
            Err(Some(i)) => i,
        };
        match self.many.binary_search_by_key(&idx, |&(i, _)| i) {
            Ok(at) => self.many[at].1,
            Err(_) => 0,
        }
    }

    /// `get` for lookups in ascending index order: `at` (start it at `position(first)`) keeps
    /// the place in the list of counts above two, so a sweep costs no search per index.
    pub fn get_ascending(&self, idx: u64, at: &mut usize) -> u16 {
        let idx = match self.small(idx) {
            Ok(c) => return c,
            Err(None) => return 0,
            Err(Some(i)) => i,
        };
        while self.many.get(*at).is_some_and(|&(i, _)| i < idx) {
            *at += 1;
        }
        match self.many.get(*at) {
            Some(&(i, c)) if i == idx => c,
            _ => 0,
        }
    }

    /// Where a sweep from index `idx` starts in the list of counts above two.
    pub fn position(&self, idx: u64) -> usize {
        self.many.partition_point(|&(i, _)| u64::from(i) < idx)
    }

    /// Sum of all counts.
    pub fn total(&self) -> u64 {
        self.one.count_ones()
            + 2 * self.two.count_ones()
            + self.many.iter().map(|&(_, c)| u64::from(c)).sum::<u64>()
    }

    /// Record the count of `idx`; calls must come in ascending index order (unit tests).
    #[cfg(test)]
    pub fn push(&mut self, idx: u32, count: u16) {
        match count {
            0 => {}
            1 => self.one.set(u64::from(idx)),
            2 => self.two.set(u64::from(idx)),
            _ => {
                debug_assert!(self.many.last().is_none_or(|&(i, _)| i < idx));
                self.many.push((idx, count));
            }
        }
    }

    /// Append the counts of a run starting at `first`, in order (unit tests).
    #[cfg(test)]
    pub fn push_run(&mut self, first: u32, counts: &[u16]) {
        for (i, &c) in counts.iter().enumerate() {
            self.push(first + i as u32, c);
        }
    }
}

/// Counts incremented by many threads at once. Each worker thread counts in a shard of its
/// own (no cache line is shared between workers): the first and second increments of an index
/// in a shard set a bit in one bitmap and then another, later ones are logged. `finish` adds
/// the shards up a word at a time. Counts saturate at `u16::MAX`, as e2fsck's do.
pub struct SharedCounter {
    len: u64,
    shards: Vec<Shard>,
}

/// One worker's counts, alone on its cache lines.
#[repr(align(128))]
struct Shard(Mutex<ShardCounts>);

#[derive(Default)]
struct ShardCounts {
    /// Counted at least once here (allocated on the shard's first increment).
    first: Option<Bitmap>,
    /// Counted at least twice here (allocated on the shard's first second increment).
    second: Option<Bitmap>,
    /// One entry per increment past the second.
    extra: Vec<u32>,
}

/// A zero bitmap for a shard, its pages written at once: a shard reads each bit before
/// setting it, and a page first read and then written costs a copy of the zero page and a
/// flush of the other cores' TLBs (see `bitmap::written_zeroes`, which cannot run here: it
/// would let this worker take queued work while it holds its shard's lock).
fn shard_bitmap(len: u64) -> Bitmap {
    let mut words = vec![0u64; len.div_ceil(64) as usize];
    for w in words.iter_mut().step_by(512) {
        *w = std::hint::black_box(0);
    }
    Bitmap::from_words(words, len)
}

impl SharedCounter {
    pub fn new(len: u64) -> Self {
        let shards = rayon::current_num_threads().max(1) + 1;
        SharedCounter {
            len,
            shards: (0..shards)
                .map(|_| Shard(Mutex::new(ShardCounts::default())))
                .collect(),
        }
    }

    /// Increment one index (the unit tests' shorthand for `increment_all`).
    #[cfg(test)]
    pub fn increment(&self, idx: u64) {
        self.increment_all(&[u32::try_from(idx).unwrap_or(u32::MAX)]);
    }

    /// Increment every index of `idxs` (repeats count again), taking this worker's shard once
    /// for all of them: callers with many increments collect them first, so the lock is not
    /// paid per increment.
    pub fn increment_all(&self, idxs: &[u32]) {
        let shard = rayon::current_thread_index().map_or(0, |t| t + 1) % self.shards.len();
        // Only this worker takes this lock: it is never contended.
        let Ok(mut s) = self.shards[shard].0.lock() else {
            return;
        };
        let s = &mut *s;
        for &idx in idxs {
            let idx = u64::from(idx);
            if idx >= self.len {
                continue;
            }
            let first = s.first.get_or_insert_with(|| shard_bitmap(self.len));
            if !first.get(idx) {
                first.set(idx);
                continue;
            }
            let second = s.second.get_or_insert_with(|| shard_bitmap(self.len));
            if !second.get(idx) {
                second.set(idx);
            } else {
                s.extra.push(idx as u32);
            }
        }
    }

    pub fn finish(self) -> InodeCounts {
        let shards: Vec<ShardCounts> = self
            .shards
            .into_iter()
            .map(|s| s.0.into_inner().unwrap_or_default())
            .collect();
        let maps: Vec<&Bitmap> = shards
            .iter()
            .flat_map(|s| [s.first.as_ref(), s.second.as_ref()])
            .flatten()
            .collect();
        // Every bitmap adds one to the indexes it holds. Summed bit-sliced, a word at a time,
        // into a counter per bit that stops at three: low bit `lo`, high bit `hi`.
        let words = self.len.div_ceil(64) as usize;
        let (mut lo, mut hi) = (vec![0u64; words], vec![0u64; words]);
        for m in &maps {
            for ((l, h), &add) in lo.iter_mut().zip(hi.iter_mut()).zip(m.words()) {
                let carry = *l & add;
                let full = *h & carry;
                *h |= carry;
                *l = (*l ^ add) | full;
            }
        }
        // A logged increment is at least the third of its index.
        let logged = || {
            shards
                .iter()
                .flat_map(|s| s.extra.iter().map(|&i| i as usize))
        };
        for i in logged() {
            let bit = 1u64 << (i % 64);
            if let (Some(l), Some(h)) = (lo.get_mut(i / 64), hi.get_mut(i / 64)) {
                (*l, *h) = (*l | bit, *h | bit);
            }
        }
        // Three or more: the exact count is each shard's bitmaps plus its logged increments,
        // tallied by rank among these indexes (no sort of the logs, which can be long: one
        // entry per child of a large directory).
        let three: Vec<u64> = lo.iter().zip(&hi).map(|(l, h)| l & h).collect();
        let mut rank = Vec::with_capacity(three.len());
        let mut total = 0usize;
        for w in &three {
            rank.push(total);
            total += w.count_ones() as usize;
        }
        let mut tally = vec![0u32; total];
        for i in logged() {
            let below = three[i / 64] & ((1u64 << (i % 64)) - 1);
            let t = &mut tally[rank[i / 64] + below.count_ones() as usize];
            *t = t.saturating_add(1);
        }
        let mut many = Vec::with_capacity(total);
        for (wi, ((l, h), mut t)) in lo.iter_mut().zip(hi.iter_mut()).zip(three).enumerate() {
            (*l, *h) = (*l & !*h, *h & !*l);
            while t != 0 {
                let idx = wi as u64 * 64 + u64::from(t.trailing_zeros());
                t &= t - 1;
                let n = maps.iter().filter(|m| m.get(idx)).count() as u32;
                let n = n.saturating_add(tally[many.len()]);
                many.push((idx as u32, u16::try_from(n).unwrap_or(u16::MAX)));
            }
        }
        InodeCounts {
            one: Bitmap::from_words(lo, self.len),
            two: Bitmap::from_words(hi, self.len),
            many,
        }
    }
}

/// One kind byte per inode (see `pass1::kind`), indexed by `ino - 1`: bitmaps of plain
/// directories and plain regular files (kind byte exactly `DIR` or `REG`), and a sorted list
/// of every other non-zero kind.
#[derive(Debug, Clone)]
pub struct InodeKinds {
    dir: Bitmap,
    reg: Bitmap,
    other: Vec<(u32, u8)>,
}

/// Every byte value, so `Index` can hand out a reference to a computed kind.
static BYTE_VALUES: [u8; 256] = {
    let mut t = [0u8; 256];
    let mut i = 0;
    while i < 256 {
        t[i] = i as u8;
        i += 1;
    }
    t
};

impl InodeKinds {
    /// From the bitmaps and the other kinds, ascending by index.
    pub fn from_parts(dir: Bitmap, reg: Bitmap, other: Vec<(u32, u8)>) -> Self {
        debug_assert!(other.windows(2).all(|w| w[0].0 < w[1].0));
        InodeKinds { dir, reg, other }
    }

    /// The kinds other than plain directory and plain file: `(index, kind)`, ascending.
    pub fn others(&self) -> &[(u32, u8)] {
        &self.other
    }

    pub fn get(&self, idx: u64) -> u8 {
        if self.reg.get(idx) {
            return ffsck_format::dir::ft::REG;
        }
        if self.dir.get(idx) {
            return ffsck_format::dir::ft::DIR;
        }
        let Ok(idx) = u32::try_from(idx) else {
            return 0;
        };
        match self.other.binary_search_by_key(&idx, |&(i, _)| i) {
            Ok(at) => self.other[at].1,
            Err(_) => 0,
        }
    }
}

impl std::ops::Index<usize> for InodeKinds {
    type Output = u8;
    fn index(&self, idx: usize) -> &u8 {
        &BYTE_VALUES[usize::from(self.get(idx as u64))]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ascending_lookups_match_searches() {
        let mut c = InodeCounts::new(100);
        for i in 0..100u32 {
            c.push(i, (i % 4) as u16);
        }
        for first in [0u64, 1, 37, 99] {
            let mut at = c.position(first);
            for i in first..100 {
                assert_eq!(
                    c.get_ascending(i, &mut at),
                    c.get(i),
                    "index {i} from {first}"
                );
            }
        }
    }

    #[test]
    fn shards_from_many_threads_add_up() {
        use rayon::prelude::*;
        // Index i is referenced (i % 5) times, from whichever workers pick the references.
        let refs: Vec<u64> = (0..2000u64)
            .flat_map(|i| (0..i % 5).map(move |_| i))
            .collect();
        let pool = crate::test_pool(3);
        let counts = pool.install(|| {
            let s = SharedCounter::new(2000);
            refs.par_iter()
                .with_max_len(7)
                .for_each(|&i| s.increment(i));
            s.finish()
        });
        for i in 0..2000u64 {
            assert_eq!(counts.get(i), (i % 5) as u16, "index {i}");
        }
        assert_eq!(counts.total(), refs.len() as u64);
    }

    #[test]
    fn counts_saturate_and_classes_do_not_overlap() {
        use rayon::prelude::*;
        let pool = crate::test_pool(2);
        let counts = pool.install(|| {
            let s = SharedCounter::new(200);
            // Index 7 past u16::MAX; 64 and 65 (one word apart) twice and three times.
            (0..70_000u32).into_par_iter().for_each(|_| s.increment(7));
            for i in [64, 64, 65, 65, 65, 199] {
                s.increment(i);
            }
            s.increment(200); // past the end: ignored
            s.finish()
        });
        assert_eq!(counts.get(7), u16::MAX);
        assert_eq!((counts.get(64), counts.get(65), counts.get(199)), (2, 3, 1));
        assert_eq!(counts.get(0) + counts.get(200), 0);
        assert_eq!(counts.total(), u64::from(u16::MAX) + 2 + 3 + 1);
    }

    #[test]
    fn kinds_round_trip() {
        use ffsck_format::dir::ft;
        let mut dir = Bitmap::new(10);
        let mut reg = Bitmap::new(10);
        dir.set(1);
        reg.set(2);
        let k = InodeKinds::from_parts(dir, reg, vec![(3, ft::SYMLINK), (7, ft::DIR | 0x10)]);
        assert_eq!(k[0], 0);
        assert_eq!(k[1], ft::DIR);
        assert_eq!(k[2], ft::REG);
        assert_eq!(k[3], ft::SYMLINK);
        assert_eq!(k[7], ft::DIR | 0x10);
        assert_eq!(k[9], 0);
        assert_eq!(k.get(1 << 40), 0);
    }

    #[test]
    fn counts_round_trip() {
        let mut c = InodeCounts::new(100);
        c.push_run(10, &[0, 1, 2, 0, u16::MAX]);
        c.push(50, 1);
        assert_eq!(c.get(10), 0);
        assert_eq!(c.get(11), 1);
        assert_eq!(c.get(12), 2);
        assert_eq!(c.get(14), 65535);
        assert_eq!(c.get(50), 1);
        assert_eq!(c.get(99), 0);
        assert_eq!(c.get(1000), 0);
        assert_eq!(c.total(), 1 + 2 + 65535 + 1);
    }

    #[test]
    fn shared_counter_tallies_and_saturates() {
        let s = SharedCounter::new(10);
        for _ in 0..3 {
            s.increment(4);
        }
        s.increment(7);
        s.increment(1000); // out of range: ignored
        for _ in 0..70000 {
            s.increment(9);
        }
        let c = s.finish();
        assert_eq!(c.get(4), 3);
        assert_eq!(c.get(7), 1);
        assert_eq!(c.get(9), u16::MAX);
        assert_eq!(c.get(0), 0);
    }
}
