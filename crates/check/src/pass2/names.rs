//! The duplicate-name check of one block: a set of the names seen so far, cheap for the few
//! names most blocks hold and bounded for the many a big one holds.

/// The names seen so far in one block, kept as positions in the block: compared one by one
/// while there are few (most blocks of most directories hold a handful of entries), then
/// through an open-addressing table that starts small and doubles as names come, so a block
/// clears and probes only as many slots as its names need. Each thread reuses its two tables
/// from block to block, so no block allocates.
pub(super) struct NameSet<'a> {
    pub(super) block: &'a [u8],
    pub(super) few: [u64; NameSet::FEW],
    /// Names held (in `few`, then in `table`).
    pub(super) n: usize,
    /// Slots of `hash << 32 | (start + 1) << 8 | len` (0 is empty), where `hash` is the
    /// name's 32-bit hash: most probes are decided by it without comparing names, and growing
    /// the table needs no name. Empty until more than `FEW` names.
    pub(super) table: Vec<u64>,
    /// The other table, the one `grow` moves the names into.
    pub(super) spare: Vec<u64>,
}

thread_local! {
    static NAME_TABLES: std::cell::Cell<(Vec<u64>, Vec<u64>)> =
        const { std::cell::Cell::new((Vec::new(), Vec::new())) };
}

impl<'a> NameSet<'a> {
    const FEW: usize = 8;
    /// Slots of a new table: at most half full with `FEW + 1` names.
    const FIRST_SLOTS: usize = 32;

    pub(super) fn new(block: &'a [u8]) -> Self {
        NameSet {
            block,
            few: [0; Self::FEW],
            n: 0,
            table: Vec::new(),
            spare: Vec::new(),
        }
    }

    /// The name a slot or key stands for.
    pub(super) fn name(block: &[u8], key: u64) -> &[u8] {
        let start = ((key >> 8) & 0xFF_FFFF).saturating_sub(1) as usize;
        block
            .get(start..start + (key & 0xFF) as usize)
            .unwrap_or_default()
    }

    /// Add the name at `block[start..start + len]` (at most 255 bytes); false if it was
    /// already there.
    pub(super) fn insert(&mut self, start: usize, len: usize) -> bool {
        // Blocks are at most 64 KiB, so `start + 1` fits the key's 24 bits.
        let pos = ((start as u64 + 1).min(0xFF_FFFF) << 8) | len.min(0xFF) as u64;
        let block = self.block;
        let name = Self::name(block, pos);
        if self.table.is_empty() {
            if self.few[..self.n]
                .iter()
                .any(|&k| Self::name(block, k) == name)
            {
                return false;
            }
            if self.n < Self::FEW {
                self.few[self.n] = pos;
                self.n += 1;
                return true;
            }
            // Sized for as many names as the block holds if the rest of its entries are
            // as long as the first ones, so most blocks never grow their table.
            let expect = (Self::FEW + 1) * block.len() / (start + len).max(1);
            let slots = (2 * expect)
                .clamp(Self::FIRST_SLOTS, 2 * (block.len() / 12 + 1))
                .next_power_of_two();
            let (mut table, spare) = NAME_TABLES.take();
            table.clear();
            table.resize(slots, 0);
            self.table = table;
            self.spare = spare;
            for k in self.few {
                let key = Self::keyed(block, k);
                Self::put(&mut self.table, key);
            }
        } else if 2 * (self.n + 1) > self.table.len() {
            self.grow();
        }
        let key = Self::keyed(block, pos);
        let same = |k: u64| k >> 32 == key >> 32 && Self::name(block, k) == name;
        match Self::probe(&self.table, key, same) {
            Some(i) if self.table[i] == 0 => {
                self.table[i] = key;
                self.n += 1;
                true
            }
            Some(_) => false,
            // Full (cannot happen: the table is kept at most half full): counted as new.
            None => true,
        }
    }

    /// The slot for `key` in `table`: the first, from its own, that is empty or holds a key
    /// `same` accepts (`None`: the table is full).
    pub(super) fn probe(table: &[u64], key: u64, same: impl Fn(u64) -> bool) -> Option<usize> {
        let mask = table.len() - 1;
        let mut i = Self::slot_of(key, table.len());
        for _ in 0..table.len() {
            if table[i] == 0 || same(table[i]) {
                return Some(i);
            }
            i = (i + 1) & mask;
        }
        None
    }

    /// `pos` (a name's place in the block) with the name's hash in its high half.
    pub(super) fn keyed(block: &[u8], pos: u64) -> u64 {
        u64::from(Self::hash(Self::name(block, pos))) << 32 | pos
    }

    /// Twice the slots, every name moved over by its hash alone.
    pub(super) fn grow(&mut self) {
        let slots = 2 * self.table.len();
        self.spare.clear();
        self.spare.resize(slots, 0);
        for &key in self.table.iter().filter(|&&k| k != 0) {
            Self::put(&mut self.spare, key);
        }
        std::mem::swap(&mut self.table, &mut self.spare);
    }

    /// Put `key`, whose name is not in `table`, in the first free slot from its own.
    pub(super) fn put(table: &mut [u64], key: u64) {
        if let Some(i) = Self::probe(table, key, |_| false) {
            table[i] = key;
        }
    }

    /// A name's 32-bit hash: the high half of [`NameHash`], into which the multiply carries
    /// every byte of the name (the low bits see only its first bytes, so names that differ
    /// late, `d00001`, `d00002`, ..., would share them and each insert would probe past all
    /// the others).
    pub(super) fn hash(name: &[u8]) -> u32 {
        let mut h = NameHash(0);
        std::hash::Hasher::write(&mut h, name);
        (std::hash::Hasher::finish(&h) >> 32) as u32
    }

    /// The first slot tried for a key in a table of `slots` (a power of two): the hash's
    /// top bits.
    pub(super) fn slot_of(key: u64, slots: usize) -> usize {
        let bits = slots.trailing_zeros();
        ((key >> 32) as u32).checked_shr(32 - bits).unwrap_or(0) as usize & (slots - 1)
    }

    /// The first slot tried for `name` in a table of `slots`.
    #[cfg(test)]
    pub(super) fn slot(name: &[u8], slots: usize) -> usize {
        Self::slot_of(u64::from(Self::hash(name)) << 32, slots)
    }
}

impl Drop for NameSet<'_> {
    fn drop(&mut self) {
        if !self.table.is_empty() {
            NAME_TABLES.set((
                std::mem::take(&mut self.table),
                std::mem::take(&mut self.spare),
            ));
        }
    }
}

/// A cheap hash for the names of one block (the duplicate-name check): FxHash-style,
/// word-at-a-time multiply-rotate. A defence against chosen collisions is not worth its cost
/// here: a block holds at most `block_size / 12` names, which bounds the damage a hostile
/// block can do.
pub(super) struct NameHash(u64);

impl std::hash::Hasher for NameHash {
    fn write(&mut self, bytes: &[u8]) {
        const K: u64 = 0x517c_c1b7_2722_0a95;
        let word =
            |b: &[u8], at: usize| u64::from_le_bytes(b[at..at + 8].try_into().unwrap_or_default());
        let half = |b: &[u8], at: usize| {
            u64::from(u32::from_le_bytes(
                b[at..at + 4].try_into().unwrap_or_default(),
            ))
        };
        let mut chunks = bytes.chunks_exact(8);
        for c in &mut chunks {
            self.0 = (self.0.rotate_left(5) ^ word(c, 0)).wrapping_mul(K);
        }
        // The last bytes are loaded whole, overlapping bytes already taken where the name
        // allows it, rather than copied into a zeroed word byte by byte (whose reload would
        // wait on the copy's stores).
        let n = bytes.len();
        let rest = chunks.remainder().len();
        let tail = match rest {
            0 => 0,
            _ if n >= 8 => word(bytes, n - 8),
            4.. => half(bytes, 0) | half(bytes, n - 4) << 32,
            _ => {
                u64::from(bytes[0])
                    | u64::from(bytes[rest / 2]) << 8
                    | u64::from(bytes[rest - 1]) << 16
            }
        };
        self.0 = (self.0.rotate_left(5) ^ tail ^ n as u64).wrapping_mul(K);
    }
    fn finish(&self) -> u64 {
        self.0
    }
}

#[cfg(test)]
mod tests {
    use super::NameSet;

    #[test]
    pub(super) fn name_set_finds_duplicates_before_and_after_it_starts_hashing() {
        // A block of names back to back, each at a known position; the last two repeat
        // earlier names.
        let mut block = Vec::new();
        let mut at = Vec::new();
        for name in (0..40)
            .map(|i| format!("name-{i}"))
            .chain(["name-3".into(), "name-40".into()])
        {
            at.push((block.len(), name.len()));
            block.extend_from_slice(name.as_bytes());
        }
        block.resize(4096, 0);
        let mut set = NameSet::new(&block);
        for i in 0..40 {
            assert!(set.insert(at[i].0, at[i].1), "{i} is new");
            // Every name seen so far, whether kept in the small array or the table.
            let (s, l) = at[i / 2];
            assert!(!set.insert(s, l), "{} seen", i / 2);
        }
        assert!(!set.insert(at[40].0, at[40].1));
        assert!(set.insert(at[41].0, at[41].1));
    }

    #[test]
    pub(super) fn name_set_grows_past_its_estimate_and_tells_names_of_every_length_apart() {
        // Long names first, so the table is sized for few names and must grow; then names
        // of every length from 1 to 255 that differ from each other only in their last
        // byte, each followed by a repeat of the name before it.
        let mut block = Vec::new();
        let mut names: Vec<Vec<u8>> = (0..9).map(|i| vec![b'L' - i as u8; 200]).collect();
        for len in 1..=255usize {
            for last in [b'a', b'b'] {
                let mut name = vec![b'x'; len];
                name[len - 1] = last;
                names.push(name);
            }
        }
        let mut at = Vec::new();
        for name in &names {
            at.push((block.len(), name.len()));
            block.extend_from_slice(name);
        }
        block.resize(block.len().next_power_of_two(), 0);
        let mut set = NameSet::new(&block);
        for (i, &(s, l)) in at.iter().enumerate() {
            assert!(set.insert(s, l), "name {i} is new");
            if i > 0 {
                let (s, l) = at[i - 1];
                assert!(!set.insert(s, l), "name {} seen", i - 1);
            }
        }
        assert!(
            set.table.len() >= 2 * at.len(),
            "grew to {}",
            set.table.len()
        );
    }

    #[test]
    pub(super) fn names_that_differ_only_late_spread_over_the_table() {
        // A 4 KiB block's worth of same-length names, numbered at their end, as a big
        // directory holds them: most must start at a slot of their own, or inserting them
        // all costs quadratic probing.
        let slots = 1024;
        let mut firsts: Vec<usize> = (0..340)
            .map(|i| NameSet::slot(format!("d{i:05}").as_bytes(), slots))
            .collect();
        assert!(firsts.iter().all(|&s| s < slots));
        firsts.sort_unstable();
        firsts.dedup();
        assert!(firsts.len() > 250, "{} distinct first slots", firsts.len());
        // Longer names, past one 8-byte word, too.
        let mut long: Vec<usize> = (0..340)
            .map(|i| NameSet::slot(format!("some-long-prefix-{i:05}").as_bytes(), slots))
            .collect();
        long.sort_unstable();
        long.dedup();
        assert!(long.len() > 250, "{} distinct first slots", long.len());
        // The smallest table still gets a slot inside it.
        assert!(NameSet::slot(b"x", 2) < 2);
    }
}
