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
