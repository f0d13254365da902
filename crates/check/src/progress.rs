//! Progress of a running check, shared with the thread that shows it (`-C`, the ETA bar):
//! below every pass, so passes report progress without depending on the engine that runs
//! them.

/// Progress of the running pass, readable from another thread (for `-C` and the ETA bar).
#[derive(Debug, Default)]
pub struct Progress {
    pub pass: std::sync::atomic::AtomicU64,
    pub done: std::sync::atomic::AtomicU64,
    pub total: std::sync::atomic::AtomicU64,
    /// Each pass's total as its start gave it (so a reader that missed a short pass can
    /// still show it whole).
    pub totals: [std::sync::atomic::AtomicU64; 6],
}

impl Progress {
    pub fn start(&self, pass: u64, total: u64) {
        use std::sync::atomic::Ordering::Relaxed;
        self.done.store(0, Relaxed);
        self.total.store(total, Relaxed);
        if let Some(t) = self.totals.get(pass as usize) {
            t.store(total, Relaxed);
        }
        self.pass.store(pass, Relaxed);
    }
    pub fn advance(&self, n: u64) {
        self.done.fetch_add(n, std::sync::atomic::Ordering::Relaxed);
    }
    /// The total the last start of `pass` gave (0 when it has not started).
    pub fn total_of(&self, pass: u64) -> u64 {
        usize::try_from(pass)
            .ok()
            .and_then(|p| self.totals.get(p))
            .map_or(0, |t| t.load(std::sync::atomic::Ordering::Relaxed))
    }
    pub fn snapshot(&self) -> (u64, u64, u64) {
        use std::sync::atomic::Ordering::Relaxed;
        (
            self.pass.load(Relaxed),
            self.done.load(Relaxed),
            self.total.load(Relaxed),
        )
    }
}

/// Progress units per group for each stage of a pass 1 read by `--io sequential`: the sweep
/// of the inode tables, the sweeps of the tree blocks, the sweep of the directory blocks and
/// the scan each advance `SWEEP_UNITS` per group, so the pass's `-C` count and the bar move
/// while the disk sweeps, not only while groups are checked.
pub const SWEEP_UNITS: u64 = 256;

/// A stage of a pass worth `units` of its progress, made of `items` steps (blocks read,
/// tasks run): each step advances the pass by its share, from any thread, and the stage
/// adds up to exactly `units` once its steps are done (or [`Share::finish`] is called).
#[derive(Debug)]
pub struct Share<'a> {
    progress: &'a Progress,
    units: u64,
    items: u64,
    steps: std::sync::atomic::AtomicU64,
    finished: std::sync::atomic::AtomicBool,
}

impl<'a> Share<'a> {
    pub fn new(progress: &'a Progress, units: u64, items: u64) -> Self {
        Share {
            progress,
            units,
            items,
            steps: Default::default(),
            finished: Default::default(),
        }
    }
    /// Units reached after `s` steps.
    fn at(&self, s: u64) -> u64 {
        if self.items == 0 {
            // Only `finish` counts a stage of no steps.
            return 0;
        }
        if s >= self.items {
            return self.units;
        }
        (u128::from(s) * u128::from(self.units) / u128::from(self.items.max(1))) as u64
    }
    /// `n` more steps done.
    pub fn step(&self, n: u64) {
        use std::sync::atomic::Ordering::Relaxed;
        let before = self.steps.fetch_add(n, Relaxed).min(self.items);
        let after = before.saturating_add(n).min(self.items);
        let d = self.at(after) - self.at(before);
        if d > 0 {
            self.progress.advance(d);
        }
    }
    /// The stage is over (steps left out, or fewer than planned): its units are all counted.
    pub fn finish(&self) {
        use std::sync::atomic::Ordering::Relaxed;
        if self.finished.swap(true, Relaxed) {
            return;
        }
        let before = self.steps.swap(self.items, Relaxed).min(self.items);
        let d = self.units - self.at(before);
        if d > 0 {
            self.progress.advance(d);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_share_adds_up_to_its_units_whatever_the_steps() {
        for (units, items, steps) in [(10u64, 3u64, 3u64), (3, 10, 10), (7, 7, 2), (5, 0, 0)] {
            let p = Progress::default();
            p.start(1, 100);
            let s = Share::new(&p, units, items);
            let mut last = 0;
            for _ in 0..steps {
                s.step(1);
                let (_, done, _) = p.snapshot();
                assert!(done >= last && done <= units);
                last = done;
            }
            s.step(5);
            s.finish();
            s.finish();
            assert_eq!(p.snapshot().1, units, "{units} {items} {steps}");
        }
    }
}
