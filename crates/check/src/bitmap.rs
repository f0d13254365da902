//! Compact bit sets: a plain one for single-threaded use and an atomic one that worker threads
//! mark concurrently (first marker wins, so double claims are detected without a lock).

use rayon::prelude::*;
use std::sync::atomic::{AtomicU64, Ordering};

/// `len` zero values whose pages are already written, by all the workers.
///
/// A large zeroed allocation comes from the system as untouched pages. Reading one first maps
/// the shared zero page, and the first write after that copies it and interrupts the other
/// cores to flush their stale mapping (on 2 cores, pass 2 of a file system of one-block
/// directories lost a tenth of its speed to it). Tables that are read and then written at
/// random are written here first instead. Not to be called with a lock held that a worker
/// may need: the calling thread helps with other queued work while it waits.
pub fn written_zeroes<T: zerocopy::FromZeros + Copy + Send>(len: usize) -> Vec<T> {
    let mut v = T::new_vec_zeroed(len).unwrap_or_else(|_| vec![T::new_zeroed(); len]);
    let per_page = (4096 / std::mem::size_of::<T>().max(1)).max(1);
    v.par_chunks_mut(per_page)
        .for_each(|c| c[0] = std::hint::black_box(T::new_zeroed()));
    if let Some(last) = v.last_mut() {
        *last = std::hint::black_box(T::new_zeroed());
    }
    v
}

#[derive(Clone, Debug, Default)]
pub struct Bitmap {
    words: Vec<u64>,
    len: u64,
}

impl Bitmap {
    pub fn new(len: u64) -> Self {
        Bitmap {
            words: vec![0; len.div_ceil(64) as usize],
            len,
        }
    }
    pub fn len(&self) -> u64 {
        self.len
    }
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
    pub fn get(&self, i: u64) -> bool {
        i < self.len && self.words[(i / 64) as usize] & (1 << (i % 64)) != 0
    }
    pub fn set(&mut self, i: u64) {
        if i < self.len {
            self.words[(i / 64) as usize] |= 1 << (i % 64);
        }
    }
    pub fn clear(&mut self, i: u64) {
        if i < self.len {
            self.words[(i / 64) as usize] &= !(1 << (i % 64));
        }
    }
    pub fn count_ones(&self) -> u64 {
        self.words.iter().map(|w| u64::from(w.count_ones())).sum()
    }
    /// Indexes of set bits, ascending.
    pub fn iter_ones(&self) -> impl Iterator<Item = u64> + '_ {
        self.iter_ones_in(0..self.words.len())
    }
    /// The 64 bits from bit `start` (any alignment), bit `start` lowest; bits past the end
    /// read as 0.
    pub fn bits64(&self, start: u64) -> u64 {
        let word = |i: u64| {
            usize::try_from(i)
                .ok()
                .and_then(|i| self.words.get(i))
                .copied()
                .unwrap_or(0)
        };
        let (wi, shift) = (start / 64, start % 64);
        let lo = word(wi) >> shift;
        if shift == 0 {
            lo
        } else {
            lo | word(wi + 1) << (64 - shift)
        }
    }
    /// Number of 64-bit words (bit `i` is in word `i / 64`).
    pub fn word_count(&self) -> usize {
        self.words.len()
    }
    /// The words (bit `i` is bit `i % 64` of word `i / 64`; bits past the end are 0).
    pub fn words(&self) -> &[u64] {
        &self.words
    }
    /// A bitmap of `len` bits made of `words`; bits past `len` are cleared.
    pub fn from_words(mut words: Vec<u64>, len: u64) -> Self {
        words.resize(len.div_ceil(64) as usize, 0);
        if !len.is_multiple_of(64) {
            if let Some(last) = words.last_mut() {
                *last &= (1u64 << (len % 64)) - 1;
            }
        }
        Bitmap { words, len }
    }
    /// Indexes of the set bits of words `words` (clamped to the bitmap), ascending: a slice
    /// of the bitmap for one worker.
    pub fn iter_ones_in(&self, words: std::ops::Range<usize>) -> impl Iterator<Item = u64> + '_ {
        let end = words.end.min(self.words.len());
        let start = words.start.min(end);
        self.words[start..end]
            .iter()
            .enumerate()
            .flat_map(move |(k, &w)| {
                let wi = start + k;
                let mut w = w;
                std::iter::from_fn(move || {
                    if w == 0 {
                        return None;
                    }
                    let b = w.trailing_zeros() as u64;
                    w &= w - 1;
                    Some(wi as u64 * 64 + b)
                })
            })
    }
}

/// A bitmap shared between threads.
pub struct AtomicBitmap {
    words: Vec<AtomicU64>,
    len: u64,
}

impl AtomicBitmap {
    pub fn new(len: u64) -> Self {
        AtomicBitmap {
            words: (0..len.div_ceil(64)).map(|_| AtomicU64::new(0)).collect(),
            len,
        }
    }
    /// Set bit `i`; returns whether it was already set.
    pub fn test_and_set(&self, i: u64) -> bool {
        if i >= self.len {
            return false;
        }
        let m = 1u64 << (i % 64);
        self.words[(i / 64) as usize].fetch_or(m, Ordering::Relaxed) & m != 0
    }
    pub fn get(&self, i: u64) -> bool {
        i < self.len && self.words[(i / 64) as usize].load(Ordering::Relaxed) & (1 << (i % 64)) != 0
    }
    /// Set bits `start..start + len` (clamped to the bitmap) with one atomic operation per
    /// word they touch, calling `already` with each bit that was set before, ascending.
    pub fn set_range(&self, start: u64, len: u64, mut already: impl FnMut(u64)) {
        let end = start.saturating_add(len).min(self.len);
        let mut i = start;
        while i < end {
            let word = i / 64;
            let upto = ((word + 1) * 64).min(end);
            let bits = upto - i;
            let mask = if bits == 64 {
                !0
            } else {
                ((1u64 << bits) - 1) << (i % 64)
            };
            let mut was = self.words[word as usize].fetch_or(mask, Ordering::Relaxed) & mask;
            while was != 0 {
                already(word * 64 + u64::from(was.trailing_zeros()));
                was &= was - 1;
            }
            i = upto;
        }
    }
    /// Or `bits` into word `word` (bit `i` is bit `i % 64` of word `i / 64`): one atomic
    /// operation for up to 64 bits set elsewhere without one. Bits past the end are dropped.
    pub fn or_word(&self, word: u64, bits: u64) {
        let Some(w) = usize::try_from(word).ok().and_then(|i| self.words.get(i)) else {
            return;
        };
        let first = word * 64;
        let keep = match self.len - first {
            n if n >= 64 => !0,
            n => (1u64 << n) - 1,
        };
        if bits & keep != 0 {
            w.fetch_or(bits & keep, Ordering::Relaxed);
        }
    }
    pub fn into_bitmap(self) -> Bitmap {
        Bitmap {
            words: self.words.into_iter().map(|w| w.into_inner()).collect(),
            len: self.len,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn or_word_sets_whole_words_and_drops_bits_past_the_end() {
        let m = AtomicBitmap::new(100);
        m.or_word(0, 0b101);
        m.or_word(1, !0); // bits 64..128, of which 64..100 exist
        m.or_word(2, !0); // no such word
        m.or_word(u64::MAX, 1);
        let b = m.into_bitmap();
        assert_eq!(b.iter_ones().collect::<Vec<_>>()[..2], [0, 2]);
        assert_eq!(b.count_ones(), 2 + 36);
        assert!(b.get(99) && !b.get(1));
    }

    #[test]
    fn set_range_reports_the_bits_set_before_across_words() {
        let m = AtomicBitmap::new(300);
        for i in [5, 63, 64, 130, 299] {
            m.test_and_set(i);
        }
        let mut seen = Vec::new();
        m.set_range(5, 290, |i| seen.push(i));
        assert_eq!(seen, [5, 63, 64, 130]);
        // Clamped to the end, and nothing past it.
        seen.clear();
        m.set_range(290, u64::MAX, |i| seen.push(i));
        assert_eq!(seen, [290, 291, 292, 293, 294, 299]);
        let b = m.into_bitmap();
        assert_eq!(b.count_ones(), 295);
        assert!(!b.get(4) && b.get(5) && b.get(297));
    }
}
