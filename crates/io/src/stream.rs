//! One ordered read stream for any number of threads: the byte ranges a phase will read are
//! sorted, coalesced into large requests, read in ascending disk order by ONE reader thread,
//! and handed to the consumer threads, which never issue scattered reads of their own.
//!
//! On a hard disk the order of reads is what costs: two workers reading far-apart groups at
//! once make the head seek between them on every request. With this stream the order of I/O
//! is fixed by the plan (ascending offsets, small gaps read through, requests up to
//! [`StreamConfig::max_request`]), whatever the number of CPU workers.
//!
//! # Use
//! 1. Collect the ranges a phase needs in a [`ReadPlan`] (`plan.add(offset, len)` returns the
//!    range's id, in insertion order; ranges may be unsorted and may overlap).
//! 2. `stream::run(dev, &plan, &cfg, |s| ...)` starts the reader and runs the closure, which
//!    spawns the workers (`std::thread::scope`) and hands them `s`.
//! 3. Workers either
//!    - call [`OrderedStream::recv`]: each range is handed to exactly one caller, in disk
//!      order (a work queue whose order is the disk's), or
//!    - call [`OrderedStream::take`]`(id)`: block until the reader has passed that range,
//!      then own it (a lookup, for a worker that owns a fixed set of ids).
//! 4. Or, for a sweep whose only point is to have the bytes in the page cache before the checks
//!    read them, [`warm`] reads the plan the same way in the calling thread and keeps none of
//!    it.
//!
//! A [`Piece`] derefs to the range's bytes; its [`ReadStatus`] says whether the device held
//! all of them: a range past the device's end is zero-filled and `Short`, a range the device
//! failed to read is zero-filled and `Failed` (corruption and truncation are values, not
//! panics). Buffers are shared by the pieces of one request and freed when the last is
//! dropped; the reader keeps at most [`StreamConfig::budget`] bytes of buffers alive (plus
//! whatever consumers keep, see [`OrderedStream::recv`]), and may hint the next
//! [`StreamConfig::ahead`] requests to the device ([`Device::will_need`]; off by default, see
//! there).
//!
//! # Use by the passes (issue 24)
//! `check/src/pass1/prefetch.rs` reads in sweeps ahead of the checks: the inode tables and
//! bitmaps in one plan; then one plan per level of the trees the live inodes point at (extent
//! index and leaf blocks, indirect blocks level by level, xattr blocks), each level's blocks
//! found while consuming the one before; then the directory blocks. Pass 1's scan takes the
//! inode tables from a plan of its own (`recv`, one group per piece). A plan is small (16
//! bytes a range) and the stream allocates by request, not by plan.
//!
//! The reader is one thread doing one positioned read at a time; on an SSD or NVMe device,
//! where parallel reads help and order does not, a caller may still prefer workers reading on
//! their own (the `--io parallel` plan, see [`crate::device_kind`]).

use crate::{Device, IoError};
use std::ops::Deref;
use std::sync::{Arc, Condvar, Mutex, MutexGuard};

/// How a plan is cut into requests and how far the reader runs ahead.
#[derive(Clone, Debug)]
pub struct StreamConfig {
    /// Requests grow to this size when ranges are adjacent or close (a single range, or a
    /// chain of overlapping ranges, may be larger).
    pub max_request: u64,
    /// A gap between ranges up to this size is read through rather than skipped: at 180 MB/s
    /// 512 KiB takes 2.9 ms, less than a short seek plus half a rotation (about 5 ms).
    pub max_gap: u64,
    /// Bytes of read buffers the reader keeps alive before it waits for consumers.
    pub budget: u64,
    /// Requests hinted to the device ([`Device::will_need`]) ahead of the one being read
    /// (once the first request not in memory is read, alone: see `Reader::run`).
    /// 0 by default: on Linux a `WILLNEED` hint reads only the first readahead window of a
    /// range, so the rest is read on demand later, after hints for ranges further on: the
    /// disk sees the requests out of order (measured with `ffsck-lab hdd`: an ascending plan
    /// came out as 3080, 3088, 4984, 4194304, 4196000, 5640, ... sectors).
    pub ahead: usize,
}

impl Default for StreamConfig {
    fn default() -> Self {
        StreamConfig {
            max_request: 1 << 20,
            max_gap: 512 << 10,
            budget: 64 << 20,
            ahead: 0,
        }
    }
}

/// A range longer than this is not read (it is `Failed`): ranges come from on-disk fields,
/// and a buffer must never be sized by an unchecked one.
pub const MAX_RANGE: u64 = 64 << 20;

/// The name of the reader thread.
pub const READER_THREAD: &str = "ffsck-stream";

/// One device read of the plan: `len` bytes at `offset`, holding the ranges at positions
/// `first..first + count` of the plan's disk order.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Request {
    pub offset: u64,
    pub len: u64,
    first: usize,
    count: usize,
}

/// The ranges one phase will read, and (once sealed) their sorted, coalesced requests.
#[derive(Clone, Debug, Default)]
pub struct ReadPlan {
    ranges: Vec<(u64, u64)>,
}

impl ReadPlan {
    pub fn new() -> Self {
        Self::default()
    }
    /// Add a range; returns its id (ids count up from 0 in the order of `add`).
    pub fn add(&mut self, offset: u64, len: u64) -> usize {
        self.ranges.push((offset, len));
        self.ranges.len() - 1
    }
    pub fn len(&self) -> usize {
        self.ranges.len()
    }
    pub fn is_empty(&self) -> bool {
        self.ranges.is_empty()
    }
    /// The range of id `id`.
    pub fn range(&self, id: usize) -> Option<(u64, u64)> {
        self.ranges.get(id).copied()
    }

    /// The ids in disk order, and the requests that read them, ascending and disjoint.
    pub fn schedule(&self, cfg: &StreamConfig) -> (Vec<usize>, Vec<Request>) {
        let mut order: Vec<usize> = (0..self.ranges.len())
            .filter(|&id| self.ranges[id].1 <= MAX_RANGE)
            .collect();
        order.sort_by_key(|&id| self.ranges[id]);
        // Oversized ranges go last, outside every request.
        let readable = order.len();
        order.extend((0..self.ranges.len()).filter(|&id| self.ranges[id].1 > MAX_RANGE));
        let mut reqs: Vec<Request> = Vec::new();
        let mut cur: Option<(u64, u64, usize)> = None; // (start, end, first position)
        for (pos, &id) in order[..readable].iter().enumerate() {
            let (off, len) = self.ranges[id];
            let end = off.saturating_add(len);
            cur = Some(match cur {
                None => (off, end, pos),
                // Overlapping: same request, whatever its size (a range is never split).
                // Touching ranges are cut at `max_request` like ranges across a small gap:
                // a run of adjacent blocks (a flex group's directory blocks laid out after
                // its inode tables) would otherwise be one request of many MiB, of which a
                // hint reads only the first read-ahead window; the rest was read when the
                // reader got there, after the hints for further on (`ffsck-lab hdd`: seven
                // seeks across the disk and back on a file system of 1M inodes).
                Some((s, e, f)) if off < e => (s, e.max(end), f),
                Some((s, e, f)) if off - e <= cfg.max_gap => {
                    if end - s <= cfg.max_request {
                        (s, end, f)
                    } else {
                        // Full: the next request starts where this one ends, so the gap is
                        // still read through and the disk sees one sequential run.
                        reqs.push(request(s, e, f, pos));
                        (e, end, pos)
                    }
                }
                Some((s, e, f)) => {
                    reqs.push(request(s, e, f, pos));
                    (off, end, pos)
                }
            });
        }
        if let Some((s, e, f)) = cur {
            reqs.push(request(s, e, f, readable));
        }
        (order, reqs)
    }
}

fn request(start: u64, end: u64, first: usize, next: usize) -> Request {
    Request {
        offset: start,
        len: end - start,
        first,
        count: next - first,
    }
}

/// Whether a piece holds the device's bytes.
#[derive(Debug)]
pub enum ReadStatus {
    /// Every byte came from the device.
    Full,
    /// The device ends inside (or before) the range: only the first `valid` bytes are its,
    /// the rest are zeros.
    Short { valid: usize },
    /// The device failed to read the range (or it was longer than [`MAX_RANGE`]); the bytes
    /// are zeros.
    Failed(IoError),
}

/// A read buffer, counted against the stream's budget until dropped.
struct Buffer {
    data: Vec<u8>,
    shared: Arc<Shared>,
}

impl Drop for Buffer {
    fn drop(&mut self) {
        let mut st = self.shared.lock();
        let len = self.data.len() as u64;
        st.in_flight = st.in_flight.saturating_sub(len);
        // Kept for the reader's next request: a fresh buffer for every request costs a page
        // fault per page (most of a sweep's system time on a fast device). What is kept and
        // what is in flight together stay within the budget.
        if len > 0 && st.in_flight + st.pooled + len <= st.budget {
            st.pooled += len;
            st.pool.push(std::mem::take(&mut self.data));
        }
        let wake = st.reader_waits;
        drop(st);
        if wake {
            self.shared.room.notify_one();
        }
    }
}

/// One requested range's bytes.
pub struct Piece {
    pub id: usize,
    pub offset: u64,
    pub status: ReadStatus,
    buf: Arc<Buffer>,
    at: usize,
    len: usize,
}

impl Piece {
    pub fn is_full(&self) -> bool {
        matches!(self.status, ReadStatus::Full)
    }
}

impl Deref for Piece {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        &self.buf.data[self.at..self.at + self.len]
    }
}

impl std::fmt::Debug for Piece {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Piece")
            .field("id", &self.id)
            .field("offset", &self.offset)
            .field("len", &self.len)
            .field("status", &self.status)
            .finish()
    }
}

enum Slot {
    Pending,
    Ready(Piece),
    Taken,
}

struct State {
    slots: Vec<Slot>,
    /// `recv`'s cursor into the disk order.
    next: usize,
    /// Positions of the disk order below this are read.
    read_upto: usize,
    in_flight: u64,
    /// Buffers whose pieces were all dropped, for the reader to read into again, and their
    /// bytes; bounded with `in_flight` by `budget`.
    pool: Vec<Vec<u8>>,
    pooled: u64,
    budget: u64,
    /// Consumers blocked for data the reader has not read yet: while there is one, the reader
    /// does not wait for the budget (what is alive is held by consumers, so waiting could
    /// only deadlock).
    waiting: usize,
    /// The reader is blocked for room in the budget (or for a consumer to block).
    reader_waits: bool,
    cancelled: bool,
    done: bool,
}

/// The stream's state and its two wake-ups: consumers wait on `data` for the reader, the
/// reader on `room` for consumers. Each side is woken only when the other waits: a hand-over
/// per request that woke every thread cost a context switch per piece (35,000 `futex` calls
/// on a sweep of 10,000 directory blocks).
struct Shared {
    state: Mutex<State>,
    data: Condvar,
    room: Condvar,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }
    /// A consumer waits for the reader (waking it first if it waits for consumers).
    fn wait_data<'a>(&self, mut g: MutexGuard<'a, State>) -> MutexGuard<'a, State> {
        g.waiting += 1;
        if g.reader_waits {
            self.room.notify_one();
        }
        let mut g = self.data.wait(g).unwrap_or_else(|e| e.into_inner());
        g.waiting -= 1;
        g
    }
    /// Wake every thread, whatever it waits for (the stream stops or ends).
    fn wake_all(&self) {
        self.data.notify_all();
        self.room.notify_all();
    }
}

/// The consumers' side of a running stream; shared by reference between worker threads.
pub struct OrderedStream {
    shared: Arc<Shared>,
    order: Vec<usize>,
}

impl OrderedStream {
    /// The next range in disk order that no one has taken, once the reader has read it;
    /// `None` when every range has been handed out (or the stream was stopped).
    ///
    /// Pieces a consumer keeps count against the budget; while a consumer is blocked here
    /// the reader reads on regardless, so a consumer may gather several pieces (a group's
    /// table and bitmaps) before it works.
    pub fn recv(&self) -> Option<Piece> {
        let mut st = self.shared.lock();
        loop {
            while st.next < st.read_upto {
                let id = self.order[st.next];
                st.next += 1;
                if let Slot::Ready(_) = st.slots[id] {
                    if let Slot::Ready(p) = std::mem::replace(&mut st.slots[id], Slot::Taken) {
                        return Some(p);
                    }
                }
            }
            if st.next >= self.order.len() || st.done {
                return None;
            }
            st = self.shared.wait_data(st);
        }
    }

    /// The range `id`, once the reader has passed it; `None` for an unknown id, one already
    /// handed out, or when the stream was stopped before reading it.
    pub fn take(&self, id: usize) -> Option<Piece> {
        let mut st = self.shared.lock();
        loop {
            match st.slots.get(id)? {
                Slot::Taken => return None,
                Slot::Ready(_) => {
                    return match std::mem::replace(&mut st.slots[id], Slot::Taken) {
                        Slot::Ready(p) => Some(p),
                        _ => None,
                    };
                }
                Slot::Pending if st.done => return None,
                Slot::Pending => st = self.shared.wait_data(st),
            }
        }
    }

    /// Stop the reader early; blocked and later calls return `None` once it stops.
    pub fn stop(&self) {
        self.shared.lock().cancelled = true;
        self.shared.wake_all();
    }
}

/// Run `plan` through one reader thread on `dev` while `f` consumes it; returns `f`'s result.
/// The reader stops when `f` returns (or panics), whatever is left unread.
pub fn run<R>(
    dev: &dyn Device,
    plan: &ReadPlan,
    cfg: &StreamConfig,
    f: impl FnOnce(&OrderedStream) -> R,
) -> R {
    let (order, reqs) = plan.schedule(cfg);
    let shared = Arc::new(Shared {
        state: Mutex::new(State {
            slots: (0..plan.len()).map(|_| Slot::Pending).collect(),
            next: 0,
            read_upto: 0,
            in_flight: 0,
            pool: Vec::new(),
            pooled: 0,
            budget: cfg.budget,
            waiting: 0,
            reader_waits: false,
            cancelled: false,
            done: false,
        }),
        data: Condvar::new(),
        room: Condvar::new(),
    });
    let stream = OrderedStream {
        shared: shared.clone(),
        order,
    };
    struct StopOnExit<'a>(&'a OrderedStream);
    impl Drop for StopOnExit<'_> {
        fn drop(&mut self) {
            self.0.stop();
        }
    }
    std::thread::scope(|s| {
        let reader = Reader {
            dev,
            plan,
            cfg,
            order: &stream.order,
            reqs: &reqs,
            shared: &shared,
        };
        // Named, so a test (or a profile) can tell the stream's reads from the consumers'.
        let spawned = std::thread::Builder::new()
            .name(READER_THREAD.into())
            .spawn_scoped(s, move || reader.run());
        if let Err(e) = spawned {
            // No thread for the reader: nothing is read, every range is handed out failed
            // (the consumers read what they need themselves).
            fail_all(&shared, &stream.order, plan, &e.to_string());
        }
        let _stop = StopOnExit(&stream);
        f(&stream)
    })
}

/// Hand out every range as failed, without reading (the reader could not start).
fn fail_all(shared: &Arc<Shared>, order: &[usize], plan: &ReadPlan, why: &str) {
    let buf = Arc::new(Buffer {
        data: Vec::new(),
        shared: shared.clone(),
    });
    let mut st = shared.lock();
    for &id in order {
        let (off, _) = plan.ranges[id];
        st.slots[id] = Slot::Ready(Piece {
            id,
            offset: off,
            status: ReadStatus::Failed(IoError::Refused(why.to_string())),
            buf: buf.clone(),
            at: 0,
            len: 0,
        });
    }
    st.read_upto = order.len();
    st.done = true;
    drop(st);
    shared.wake_all();
}

struct Reader<'a> {
    dev: &'a dyn Device,
    plan: &'a ReadPlan,
    cfg: &'a StreamConfig,
    order: &'a [usize],
    reqs: &'a [Request],
    shared: &'a Arc<Shared>,
}

/// The requests hinted to the device ahead of the one being read ([`StreamConfig::ahead`]).
/// The window is hinted only once the first request the device must read is in: a disk given
/// the whole window at once (command queueing) serves first the request nearest its head,
/// wherever the last sweep left it, and the sweep would run from there, backwards. Requests
/// in memory already (read through by an earlier sweep) go by without one. From then on the
/// window moves one request at a time, `ahead` past the one being read.
struct Window<'a> {
    dev: &'a dyn Device,
    reqs: &'a [Request],
    ahead: usize,
    started: bool,
}

impl<'a> Window<'a> {
    fn new(dev: &'a dyn Device, reqs: &'a [Request], ahead: usize) -> Self {
        Window {
            dev,
            reqs,
            ahead,
            started: false,
        }
    }
    fn hint(&self, r: &[Request]) {
        let v: Vec<(u64, u64)> = r.iter().map(|q| (q.offset, q.len)).collect();
        if !v.is_empty() {
            self.dev.will_need(&v);
        }
    }
    /// Before request `i` is read: move the window; whether `i` starts it (pass to `after`).
    fn before(&self, i: usize) -> bool {
        if self.started {
            if let Some(next) = self.reqs.get(i + self.ahead) {
                self.hint(std::slice::from_ref(next));
            }
            return false;
        }
        self.ahead > 0
            && self
                .reqs
                .get(i)
                .is_some_and(|r| self.dev.is_cached(r.offset) != Some(true))
    }
    /// After request `i` is read: hint the whole window once the first cold request is in.
    fn after(&mut self, i: usize, starts: bool) {
        if starts {
            self.started = true;
            let end = self.reqs.len().min(i + 1 + self.ahead);
            self.hint(self.reqs.get(i + 1..end).unwrap_or_default());
        }
    }
}

/// Read `plan` in the order [`run`] reads it, in the calling thread, and keep none of it: the
/// bytes stay in the device's cache only (the page cache), for checks that read them from
/// there afterwards. No reader thread, no pieces and no hand-over to consumers (for a sweep of
/// single blocks the hand-over was most of the sweep's CPU time). A request already hinted
/// (see [`StreamConfig::ahead`]) is only waited for, by reading its first byte, and read in
/// full only when its last byte did not come with it (a hint the device dropped): copying
/// every byte out only to drop it doubled the copying of a sweep of directory blocks that
/// pass 2 then reads again. `progress` is given the number of ranges each request held, once
/// it is in. A failed or short read is left to whoever reads the range later. A caller that
/// runs it on a thread of its own names that thread [`READER_THREAD`].
pub fn warm(
    dev: &dyn Device,
    plan: &ReadPlan,
    cfg: &StreamConfig,
    mut progress: impl FnMut(usize),
) {
    let (_, reqs) = plan.schedule(cfg);
    let mut window = Window::new(dev, &reqs, cfg.ahead);
    let mut buf = Vec::new();
    for (i, req) in reqs.iter().enumerate() {
        let hinted = window.started;
        let starts = window.before(i);
        let waited = hinted && {
            let mut first = [0u8; 1];
            let last = req.offset + req.len.saturating_sub(1);
            crate::read_partial(dev, &mut first, req.offset).is_ok()
                && dev.is_cached(last) == Some(true)
        };
        if !waited {
            buf.resize(req.len as usize, 0);
            let _ = crate::read_partial(dev, &mut buf, req.offset);
        }
        window.after(i, starts);
        progress(req.count);
    }
}

impl Reader<'_> {
    fn run(&self) {
        let mut window = Window::new(self.dev, self.reqs, self.cfg.ahead);
        for (i, req) in self.reqs.iter().enumerate() {
            {
                let mut st = self.shared.lock();
                while !st.cancelled
                    && st.in_flight > 0
                    && st.in_flight + req.len > self.cfg.budget
                    && st.waiting == 0
                {
                    st.reader_waits = true;
                    st = self.shared.room.wait(st).unwrap_or_else(|e| e.into_inner());
                    st.reader_waits = false;
                }
                if st.cancelled {
                    break;
                }
                st.in_flight += req.len;
            }
            let starts = window.before(i);
            self.read(req);
            window.after(i, starts);
        }
        self.finish_oversized();
        self.shared.lock().done = true;
        self.shared.wake_all();
    }

    fn read(&self, req: &Request) {
        let ids = &self.order[req.first..req.first + req.count];
        let mut data = self.buffer(req.len as usize);
        let mut statuses: Vec<ReadStatus> = Vec::with_capacity(ids.len());
        match crate::read_partial(self.dev, &mut data, req.offset) {
            Ok(valid) => {
                let dev_end = req.offset + valid as u64;
                for &id in ids {
                    let (off, len) = self.plan.ranges[id];
                    statuses.push(if off.saturating_add(len) <= dev_end {
                        ReadStatus::Full
                    } else {
                        ReadStatus::Short {
                            valid: dev_end.saturating_sub(off) as usize,
                        }
                    });
                }
            }
            // The request failed as a whole: read its ranges one by one, so one bad sector
            // fails only the ranges that hold it.
            Err(_) => {
                for &id in ids {
                    let (off, len) = self.plan.ranges[id];
                    let at = (off - req.offset) as usize;
                    let slot = &mut data[at..at + len as usize];
                    statuses.push(match crate::read_partial(self.dev, slot, off) {
                        Ok(v) if v == slot.len() => ReadStatus::Full,
                        Ok(valid) => ReadStatus::Short { valid },
                        Err(e) => {
                            slot.fill(0);
                            ReadStatus::Failed(e)
                        }
                    });
                }
            }
        }
        let buf = Arc::new(Buffer {
            data,
            shared: self.shared.clone(),
        });
        let mut st = self.shared.lock();
        for (&id, status) in ids.iter().zip(statuses) {
            let (off, len) = self.plan.ranges[id];
            st.slots[id] = Slot::Ready(Piece {
                id,
                offset: off,
                status,
                buf: buf.clone(),
                at: (off - req.offset) as usize,
                len: len as usize,
            });
        }
        st.read_upto = req.first + req.count;
        let wake = st.waiting > 0;
        drop(st);
        drop(buf);
        if wake {
            self.shared.data.notify_all();
        }
    }

    /// A buffer of `len` bytes: a pooled one of that size when there is one (the read
    /// overwrites its old bytes, `read_partial` zeroes past a short read, and a failed
    /// request's ranges are read or zeroed one by one), else a new zeroed one.
    fn buffer(&self, len: usize) -> Vec<u8> {
        let mut st = self.shared.lock();
        let reused = st.pool.iter().position(|b| b.len() == len).map(|i| {
            let b = st.pool.swap_remove(i);
            st.pooled -= b.len() as u64;
            b
        });
        // A pool of other sizes gives way to the new buffer.
        if reused.is_none() && st.in_flight + st.pooled > st.budget {
            st.pool.clear();
            st.pooled = 0;
        }
        drop(st);
        reused.unwrap_or_else(|| vec![0u8; len])
    }

    /// Ranges over [`MAX_RANGE`] are handed out as failed, without a buffer of their size.
    fn finish_oversized(&self) {
        let last = self.reqs.last().map_or(0, |r| r.first + r.count);
        if last == self.order.len() || self.shared.lock().cancelled {
            return;
        }
        let buf = Arc::new(Buffer {
            data: Vec::new(),
            shared: self.shared.clone(),
        });
        let mut st = self.shared.lock();
        for &id in &self.order[last..] {
            let (off, len) = self.plan.ranges[id];
            st.slots[id] = Slot::Ready(Piece {
                id,
                offset: off,
                status: ReadStatus::Failed(IoError::Refused(format!(
                    "range of {len} bytes at {off} is longer than {MAX_RANGE}"
                ))),
                buf: buf.clone(),
                at: 0,
                len: 0,
            });
        }
        st.read_upto = self.order.len();
    }
}

#[cfg(test)]
mod tests;
