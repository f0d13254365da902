//! Check in any order, merge in order: every worker thread takes whichever job is ready,
//! checking the next chunk or merging the oldest checked one, with no barrier between them.
//!
//! Pass 2 is a parallel per-block check followed by a merge that must see the blocks in
//! block order. Checked window by window with a join at each window's end, one core idled
//! for the last chunk of every window and for the last merge: on 2 cores about a fifteenth
//! of pass 2. Here a worker that runs out of chunks to check merges, and one that cannot
//! merge (another thread is merging, or the oldest chunk is still being checked) checks the
//! next chunk, unless `ahead` chunks already wait to be merged: that bounds the memory the
//! outputs hold.

use std::collections::VecDeque;
use std::sync::{Condvar, Mutex, MutexGuard, PoisonError};

/// Run `check` on every chunk `feed` hands out and `merge` on each result in feed order, on
/// all the threads of the current rayon pool (the calling one included). Besides the one
/// being merged, at most `ahead` chunks are being checked or wait to be merged. `merge`
/// returning false stops the run: no chunk is handed out or merged after it.
///
/// `feed` and `merge` run one call at a time; `check` on many threads at once.
pub fn run<C, O>(
    feed: impl FnMut() -> Option<C> + Send,
    check: impl Fn(C) -> O + Sync,
    merge: impl FnMut(O) -> bool + Send,
    ahead: usize,
) where
    C: Send,
    O: Send,
{
    let shared = Shared {
        state: Mutex::new(State {
            feed: Some(Box::new(feed)),
            slots: VecDeque::new(),
            front: 0,
            merging: false,
            stopped: false,
        }),
        merge: Mutex::new(Box::new(merge)),
        changed: Condvar::new(),
        ahead: ahead.max(1),
    };
    let workers = rayon::current_num_threads().max(1);
    rayon::scope(|s| {
        for _ in 1..workers {
            s.spawn(|_| shared.work(&check));
        }
        shared.work(&check);
    });
}

type Feed<'f, C> = Box<dyn FnMut() -> Option<C> + Send + 'f>;
type Merger<'f, O> = Box<dyn FnMut(O) -> bool + Send + 'f>;

struct Shared<'f, C, O> {
    state: Mutex<State<'f, C, O>>,
    merge: Mutex<Merger<'f, O>>,
    /// Signalled whenever a chunk is checked, a merge ends, or the run stops.
    changed: Condvar,
    ahead: usize,
}

struct State<'f, C, O> {
    /// `None` once it ran dry.
    feed: Option<Feed<'f, C>>,
    /// The chunks handed out and not yet merged, oldest first: `None` while being checked.
    slots: VecDeque<Option<O>>,
    /// The feed position of `slots[0]`.
    front: u64,
    /// A worker is merging (with the state unlocked).
    merging: bool,
    stopped: bool,
}

enum Job<C, O> {
    /// Check this chunk, the feed's `.1`-th.
    Check(C, u64),
    Merge(O),
    Wait,
    Done,
}

impl<'f, C, O> Shared<'f, C, O> {
    fn lock(&self) -> MutexGuard<'_, State<'f, C, O>> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn work(&self, check: &(impl Fn(C) -> O + Sync)) {
        let mut st = self.lock();
        loop {
            match self.next_job(&mut st) {
                Job::Merge(out) => {
                    drop(st);
                    let unwinding = StopOnUnwind(self);
                    let go_on = (self.merge.lock().unwrap_or_else(PoisonError::into_inner))(out);
                    std::mem::forget(unwinding);
                    st = self.lock();
                    st.merging = false;
                    if !go_on {
                        st.stopped = true;
                        st.feed = None;
                    }
                    self.changed.notify_all();
                }
                Job::Check(chunk, at) => {
                    drop(st);
                    let unwinding = StopOnUnwind(self);
                    let out = check(chunk);
                    std::mem::forget(unwinding);
                    st = self.lock();
                    // Slots leave from the front only once checked, so this one is still
                    // there.
                    let i = (at - st.front) as usize;
                    st.slots[i] = Some(out);
                    self.changed.notify_all();
                }
                Job::Wait => {
                    st = self
                        .changed
                        .wait(st)
                        .unwrap_or_else(PoisonError::into_inner);
                }
                Job::Done => {
                    self.changed.notify_all();
                    return;
                }
            }
        }
    }

    fn next_job(&self, st: &mut State<'f, C, O>) -> Job<C, O> {
        if st.stopped {
            return Job::Done;
        }
        if !st.merging && st.slots.front().is_some_and(Option::is_some) {
            st.merging = true;
            if let Some(Some(out)) = st.slots.pop_front() {
                st.front += 1;
                return Job::Merge(out);
            }
        }
        if st.slots.len() < self.ahead {
            if let Some(feed) = st.feed.as_mut() {
                match feed() {
                    Some(chunk) => {
                        let at = st.front + st.slots.len() as u64;
                        st.slots.push_back(None);
                        return Job::Check(chunk, at);
                    }
                    None => st.feed = None,
                }
            }
        }
        if st.feed.is_none() && st.slots.is_empty() && !st.merging {
            return Job::Done;
        }
        Job::Wait
    }
}

/// Stops the run if dropped, which only happens while a `check` or `merge` panics: the
/// other workers would otherwise wait forever for its chunk, and the panic would never reach
/// the caller of `run`.
struct StopOnUnwind<'s, 'f, C, O>(&'s Shared<'f, C, O>);

impl<C, O> Drop for StopOnUnwind<'_, '_, C, O> {
    fn drop(&mut self) {
        let mut st = self.0.lock();
        st.stopped = true;
        st.feed = None;
        self.0.changed.notify_all();
    }
}

#[cfg(test)]
mod tests {
    use super::run;
    use std::sync::atomic::{AtomicUsize, Ordering};

    /// Every chunk is merged once, in feed order, and never more than `ahead` chunks wait
    /// besides the one being merged, whatever the thread count (more threads than
    /// chunks included).
    #[test]
    fn merges_in_feed_order_within_the_bound() {
        for threads in [1, 2, 3, 8] {
            for (chunks, ahead) in [(0usize, 4usize), (1, 1), (5, 16), (500, 1), (500, 3)] {
                let fed = AtomicUsize::new(0);
                let merged = AtomicUsize::new(0);
                let mut order = Vec::new();
                let mut most_out = 0;
                crate::test_pool(threads).install(|| {
                    run(
                        || {
                            let i = fed.load(Ordering::SeqCst);
                            let out = i - merged.load(Ordering::SeqCst);
                            most_out = most_out.max(out + 1);
                            (i < chunks).then(|| {
                                fed.store(i + 1, Ordering::SeqCst);
                                i
                            })
                        },
                        |i: usize| {
                            // Uneven work, so later chunks often finish first.
                            for _ in 0..(i * 7919) % 2000 {
                                std::hint::black_box(i);
                            }
                            i
                        },
                        |i| {
                            order.push(i);
                            merged.fetch_add(1, Ordering::SeqCst);
                            true
                        },
                        ahead,
                    )
                });
                assert_eq!(order, (0..chunks).collect::<Vec<_>>(), "{threads} threads");
                // The chunk being merged is out too.
                assert!(most_out <= ahead + 1, "{most_out} out, bound {ahead}");
            }
        }
    }

    /// A check that panics ends the run with its panic on every thread count, rather than
    /// leaving the other workers waiting for its chunk (which this test sees as a timeout).
    #[test]
    fn a_panicking_check_reaches_the_caller() {
        for threads in [1, 2, 4] {
            let (tx, rx) = std::sync::mpsc::channel();
            std::thread::spawn(move || {
                let r = std::panic::catch_unwind(|| {
                    crate::test_pool(threads).install(|| {
                        let mut next = 0usize;
                        run(
                            || {
                                next += 1;
                                (next <= 100).then_some(next)
                            },
                            |i: usize| {
                                assert!(i != 3, "chunk 3");
                                i
                            },
                            |_| true,
                            4,
                        )
                    })
                });
                let _ = tx.send(r.is_err());
            });
            let panicked = rx.recv_timeout(std::time::Duration::from_secs(60));
            assert_eq!(panicked, Ok(true), "{threads} threads");
        }
    }

    /// A merge that says stop ends the run: nothing more is fed or merged.
    #[test]
    fn a_false_merge_stops_the_run() {
        for threads in [1, 2, 4] {
            let mut next = 0usize;
            let mut merged = Vec::new();
            crate::test_pool(threads).install(|| {
                run(
                    || {
                        next += 1;
                        (next <= 1000).then_some(next - 1)
                    },
                    |i: usize| i,
                    |i| {
                        merged.push(i);
                        i < 10
                    },
                    4,
                )
            });
            assert_eq!(merged, (0..=10).collect::<Vec<_>>());
            // At most the bound was fed past the chunk that stopped it.
            assert!(next <= 11 + 4 + 1, "fed {next}");
        }
    }
}
