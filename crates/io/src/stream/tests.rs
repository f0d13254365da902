//! Tests of the ordered stream: a recording device checks that the reads go out ascending and
//! coalesced, for 1 to 8 consumers, and every consumer gets exactly its range's bytes.

use super::*;
use crate::{MemDevice, Result};
use std::collections::HashSet;

/// A device that records every read it serves and every hint, and fails reads touching
/// `bad`.
struct Recording {
    inner: MemDevice,
    reads: Mutex<Vec<(u64, u64)>>,
    hints: Mutex<Vec<(u64, u64)>>,
    /// Reads (`true`) and hints (`false`) in the order the device saw them.
    events: Mutex<Vec<(bool, u64, u64)>>,
    bad: Option<u64>,
    /// Bytes below this answer `is_cached` with yes (above it, no).
    cached_below: Option<u64>,
    /// Bytes of hinted ranges answer `is_cached` with yes (a device whose hints are served).
    hints_served: bool,
}

impl Recording {
    fn new(data: Vec<u8>) -> Self {
        Recording {
            inner: MemDevice::new(data),
            reads: Mutex::new(Vec::new()),
            hints: Mutex::new(Vec::new()),
            events: Mutex::new(Vec::new()),
            bad: None,
            cached_below: None,
            hints_served: false,
        }
    }
    fn reads(&self) -> Vec<(u64, u64)> {
        self.reads.lock().unwrap().clone()
    }
}

impl Device for Recording {
    fn size(&self) -> u64 {
        self.inner.size()
    }
    fn read_at(&self, buf: &mut [u8], offset: u64) -> Result<()> {
        self.reads.lock().unwrap().push((offset, buf.len() as u64));
        let mut events = self.events.lock().unwrap();
        events.push((true, offset, buf.len() as u64));
        drop(events);
        if let Some(bad) = self.bad {
            if offset <= bad && bad < offset + buf.len() as u64 {
                return Err(IoError::Io {
                    offset,
                    source: std::io::Error::other("bad sector"),
                });
            }
        }
        self.inner.read_at(buf, offset)
    }
    fn write_at(&self, _: &[u8], _: u64) -> Result<()> {
        Err(IoError::ReadOnly)
    }
    fn flush(&self) -> Result<()> {
        Ok(())
    }
    fn bytes_read(&self) -> u64 {
        self.inner.bytes_read()
    }
    fn will_need(&self, ranges: &[(u64, u64)]) {
        self.hints.lock().unwrap().extend_from_slice(ranges);
        let mut events = self.events.lock().unwrap();
        events.extend(ranges.iter().map(|&(o, l)| (false, o, l)));
    }
    fn is_cached(&self, offset: u64) -> Option<bool> {
        if self.hints_served
            && self
                .hints
                .lock()
                .unwrap()
                .iter()
                .any(|&(o, l)| (o..o + l).contains(&offset))
        {
            return Some(true);
        }
        self.cached_below.map(|below| offset < below)
    }
}

fn pattern(size: usize) -> Vec<u8> {
    (0..size).map(|i| (i * 7 + i / 4096) as u8).collect()
}

/// Deterministic pseudo-random ranges: scattered 4 KiB blocks, some runs, some overlaps.
fn scattered(n: usize, size: u64, seed: u64) -> ReadPlan {
    let mut x = seed;
    let mut next = || {
        x = x
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        x >> 33
    };
    let mut plan = ReadPlan::new();
    for _ in 0..n {
        let block = next() % (size / 4096);
        let len = match next() % 8 {
            0 => 3 * 4096,
            1 => 100,
            _ => 4096,
        };
        plan.add((block * 4096).min(size - len), len);
    }
    plan
}

fn assert_ascending_and_coalesced(reads: &[(u64, u64)], cfg: &StreamConfig) {
    for w in reads.windows(2) {
        let ((a, alen), (b, _)) = (w[0], w[1]);
        assert!(a + alen <= b, "reads not ascending and disjoint: {w:?}");
        let gap = b - (a + alen);
        // A gap small enough to read through may only separate requests that are split at
        // the size limit, and then the next one starts right where the last ended.
        assert!(
            gap == 0 || gap > cfg.max_gap,
            "a small gap was skipped: {w:?}"
        );
    }
}

#[test]
fn any_number_of_consumers_get_their_bytes_from_one_ascending_coalesced_read_stream() {
    let size = 64 << 20;
    let data = pattern(size);
    let cfg = StreamConfig {
        budget: 4 << 20,
        ahead: 4,
        ..StreamConfig::default()
    };
    let plan = scattered(3000, size as u64, 24);
    let (_, reqs) = plan.schedule(&cfg);
    for consumers in [1, 2, 4, 8] {
        let dev = Recording::new(data.clone());
        let seen: Mutex<Vec<usize>> = Mutex::new(Vec::new());
        run(&dev, &plan, &cfg, |s| {
            std::thread::scope(|t| {
                for _ in 0..consumers {
                    t.spawn(|| {
                        let mut mine = Vec::new();
                        while let Some(p) = s.recv() {
                            let (off, len) = plan.range(p.id).unwrap();
                            assert_eq!(p.offset, off);
                            assert!(p.is_full(), "{p:?}");
                            assert_eq!(&p[..], &data[off as usize..(off + len) as usize]);
                            mine.push(p.id);
                        }
                        seen.lock().unwrap().extend(mine);
                    });
                }
            })
        });
        let mut seen = seen.into_inner().unwrap();
        seen.sort_unstable();
        assert_eq!(seen, (0..plan.len()).collect::<Vec<_>>(), "{consumers}");
        let reads = dev.reads();
        assert_ascending_and_coalesced(&reads, &cfg);
        assert_eq!(reads.len(), reqs.len());
        // Coalesced: far fewer reads than ranges, each at most a request plus one range.
        assert!(reads.len() * 4 < plan.len(), "{} reads", reads.len());
        assert!(reads.iter().all(|&(_, l)| l <= cfg.max_request + 3 * 4096));
        // The device heard about the requests after the first before they were read.
        assert_eq!(dev.hints.lock().unwrap().len(), reqs.len() - 1);
    }
}

/// What a disk with a command queue is given, in order: the first request of the plan the
/// device must read (not in memory already) read alone, so the head starts the sweep at its
/// low end wherever the last sweep left it; then every later request hinted once,
/// ascending, at most `ahead` past the one being read, and each hinted before it is read.
/// The same for any number of consumers.
/// A sweep of scattered blocks: small requests, 8 hinted ahead.
fn hinted() -> StreamConfig {
    StreamConfig {
        max_request: 128 << 10,
        max_gap: 64 << 10,
        ahead: 8,
        ..StreamConfig::default()
    }
}

#[test]
fn a_sweep_starts_with_its_first_cold_request_alone_then_hints_ascending_ahead_of_the_reads() {
    let size = 16 << 20;
    let data = pattern(size);
    let cfg = hinted();
    let plan = scattered(400, size as u64, 7);
    let (_, reqs) = plan.schedule(&cfg);
    assert!(reqs.len() > 3 * cfg.ahead, "{} requests", reqs.len());
    let want: Vec<(u64, u64)> = reqs.iter().map(|r| (r.offset, r.len)).collect();
    // The device says nothing of its cache, or holds the first five requests already.
    // 0 consumers: `warm`, which reads the same way and keeps nothing.
    for (cached_below, warm) in [(None, 0), (Some(want[5].0), 5)] {
        for consumers in [0, 1, 2, 4] {
            let mut dev = Recording::new(data.clone());
            dev.cached_below = cached_below;
            if consumers == 0 {
                let mut ranges = 0;
                super::warm(&dev, &plan, &cfg, |n| ranges += n);
                assert_eq!(ranges, plan.len(), "warm: every range counted once");
            } else {
                run(&dev, &plan, &cfg, |s| {
                    std::thread::scope(|t| {
                        for _ in 0..consumers {
                            t.spawn(|| while s.recv().is_some() {});
                        }
                    })
                });
            }
            let case = format!("{consumers} consumers, {warm} cached");
            let mut events = dev.events.lock().unwrap().clone();
            if consumers == 0 {
                // `warm` waits for a hinted request by reading its first byte; the device
                // never says the last byte came with it, so the request is then read whole.
                let touches: Vec<u64> = events
                    .iter()
                    .filter(|e| e.0 && e.2 == 1)
                    .map(|e| e.1)
                    .collect();
                let hinted: Vec<u64> = want[warm + 1..].iter().map(|r| r.0).collect();
                assert_eq!(touches, hinted, "{case}: each hinted request waited for");
                events.retain(|e| !(e.0 && e.2 == 1));
            }
            let reads: Vec<(u64, u64)> =
                events.iter().filter(|e| e.0).map(|e| (e.1, e.2)).collect();
            assert_eq!(reads, want, "{case}: read once each, in plan order");
            // Nothing hinted until the first cold request is read.
            let first_hint = events.iter().position(|e| !e.0).unwrap();
            assert_eq!(first_hint, warm + 1, "{case}");
            let hints: Vec<(u64, u64)> =
                events.iter().filter(|e| !e.0).map(|e| (e.1, e.2)).collect();
            assert_eq!(
                hints,
                want[warm + 1..],
                "{case}: hinted once each, ascending"
            );
            let (mut read, mut hinted) = (0usize, warm + 1);
            for &(is_read, _, _) in &events {
                if is_read {
                    assert!(
                        read <= warm || hinted > read,
                        "{case}: read before its hint"
                    );
                    read += 1;
                } else {
                    hinted += 1;
                    assert!(
                        hinted <= read + cfg.ahead + 1,
                        "{case}: hinted too far ahead"
                    );
                }
            }
        }
    }
}

#[test]
fn workers_taking_their_own_ids_out_of_disk_order_do_not_deadlock_on_a_small_budget() {
    let size = 16 << 20;
    let data = pattern(size);
    let cfg = StreamConfig {
        budget: 64 << 10,
        max_request: 64 << 10,
        ..StreamConfig::default()
    };
    let plan = scattered(800, size as u64, 7);
    for consumers in [1usize, 2, 4, 8] {
        let dev = Recording::new(data.clone());
        let got = std::sync::atomic::AtomicUsize::new(0);
        run(&dev, &plan, &cfg, |s| {
            std::thread::scope(|t| {
                for k in 0..consumers {
                    let (plan, data, got) = (&plan, &data, &got);
                    t.spawn(move || {
                        // Ids in insertion order, which is not disk order.
                        for id in (k..plan.len()).step_by(consumers) {
                            let p = s.take(id).expect("every id once");
                            let (off, len) = plan.range(id).unwrap();
                            assert_eq!(&p[..], &data[off as usize..(off + len) as usize]);
                            assert!(s.take(id).is_none(), "handed out twice");
                            got.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                        }
                    });
                }
            })
        });
        assert_eq!(got.into_inner(), plan.len());
        assert_ascending_and_coalesced(&dev.reads(), &cfg);
    }
}

#[test]
fn overlapping_and_touching_ranges_share_one_request_and_far_ones_do_not() {
    let cfg = StreamConfig::default();
    let mut plan = ReadPlan::new();
    let far = 100 << 20;
    let a = plan.add(far, 4096);
    let b = plan.add(8192, 8192);
    let c = plan.add(12288, 4096); // inside b
    let d = plan.add(4096, 4096); // touches b
    let e = plan.add(16384 + (512 << 10), 4096); // a gap of exactly max_gap: read through
    let (order, reqs) = plan.schedule(&cfg);
    assert_eq!(order, vec![d, b, c, e, a]);
    assert_eq!(
        reqs.iter().map(|r| (r.offset, r.len)).collect::<Vec<_>>(),
        vec![(4096, 12288 + (512 << 10) + 4096), (far, 4096)]
    );
}

/// A run of adjacent ranges is cut into requests of at most `max_request` at range
/// boundaries, each starting where the last ended; overlapping ranges are never cut apart.
#[test]
fn touching_ranges_are_cut_at_the_request_size_and_overlapping_ones_are_not() {
    let cfg = StreamConfig {
        max_request: 128 << 10,
        ..StreamConfig::default()
    };
    let mut plan = ReadPlan::new();
    for i in 0..100u64 {
        plan.add(i * 4096, 4096);
    }
    let (_, reqs) = plan.schedule(&cfg);
    let got: Vec<(u64, u64)> = reqs.iter().map(|r| (r.offset, r.len)).collect();
    let mut want: Vec<(u64, u64)> = (0..3).map(|i| (i * (128 << 10), 128 << 10)).collect();
    want.push((3 * (128 << 10), 4 * 4096));
    assert_eq!(got, want);
    // Overlapping: one request, longer than max_request.
    let mut plan = ReadPlan::new();
    for i in 0..100u64 {
        plan.add(i * 4096, 8192);
    }
    let (_, reqs) = plan.schedule(&cfg);
    assert_eq!(
        reqs.iter().map(|r| (r.offset, r.len)).collect::<Vec<_>>(),
        vec![(0, 101 * 4096)]
    );
}

#[test]
fn ranges_at_and_past_the_device_end_come_back_short_and_zero_filled() {
    let dev = Recording::new(pattern(10_000));
    let mut plan = ReadPlan::new();
    let inside = plan.add(0, 4096);
    let across = plan.add(8192, 4096);
    let past = plan.add(20_000, 4096);
    let huge = plan.add(0, MAX_RANGE + 1);
    let pieces: Vec<Piece> = run(&dev, &plan, &StreamConfig::default(), |s| {
        std::iter::from_fn(|| s.recv()).collect()
    });
    assert_eq!(pieces.len(), 4);
    let by_id = |id| pieces.iter().find(|p| p.id == id).unwrap();
    assert!(by_id(inside).is_full());
    let p = by_id(across);
    assert!(
        matches!(p.status, ReadStatus::Short { valid: 1808 }),
        "{p:?}"
    );
    assert_eq!(&p[..1808], &pattern(10_000)[8192..]);
    assert!(p[1808..].iter().all(|&b| b == 0));
    let p = by_id(past);
    assert!(matches!(p.status, ReadStatus::Short { valid: 0 }), "{p:?}");
    assert_eq!(p.len(), 4096);
    assert!(p.iter().all(|&b| b == 0));
    assert!(matches!(by_id(huge).status, ReadStatus::Failed(_)));
    assert!(by_id(huge).is_empty());
}

#[test]
fn a_failed_read_fails_only_the_ranges_on_the_bad_sector() {
    let mut dev = Recording::new(pattern(1 << 20));
    dev.bad = Some(40_000);
    let mut plan = ReadPlan::new();
    let ids: Vec<usize> = (0..20).map(|i| plan.add(i * 4096, 4096)).collect();
    let pieces: Vec<Piece> = run(&dev, &plan, &StreamConfig::default(), |s| {
        std::iter::from_fn(|| s.recv()).collect()
    });
    let failed: HashSet<usize> = pieces
        .iter()
        .filter(|p| !p.is_full())
        .map(|p| p.id)
        .collect();
    assert_eq!(failed, HashSet::from([ids[9]]));
    let bad = pieces.iter().find(|p| p.id == ids[9]).unwrap();
    assert!(matches!(bad.status, ReadStatus::Failed(_)));
    assert!(bad.iter().all(|&b| b == 0));
}

#[test]
fn consumers_that_stop_early_stop_the_reader() {
    let dev = Recording::new(pattern(32 << 20));
    let plan = scattered(2000, 32 << 20, 3);
    let cfg = StreamConfig {
        budget: 1 << 20,
        max_request: 256 << 10,
        ..StreamConfig::default()
    };
    let (_, reqs) = plan.schedule(&cfg);
    // Keep the first pieces (and so the budget) and return: the reader must not hang.
    let kept: Vec<Piece> = run(&dev, &plan, &cfg, |s| {
        (0..3).filter_map(|_| s.recv()).collect()
    });
    assert_eq!(kept.len(), 3);
    assert!(dev.reads().len() < reqs.len());
    // An empty plan needs no reads at all.
    let empty = ReadPlan::new();
    assert!(run(&dev, &empty, &cfg, |s| s.recv()).is_none());
}

#[test]
fn a_reused_buffer_shows_no_earlier_bytes_after_a_short_read() {
    // Requests of one size, far apart: each consumer drops its piece before the next is
    // read, so the reader reads into the same buffer again; the last request crosses the
    // device's end.
    let size = 10 * 4096 + 1000;
    let dev = Recording::new(pattern(size));
    let cfg = StreamConfig {
        max_gap: 0,
        budget: 4096,
        ..StreamConfig::default()
    };
    let mut plan = ReadPlan::new();
    let ids: Vec<usize> = (0..6u64).map(|i| plan.add(i * 2 * 4096, 4096)).collect();
    let got: Vec<(usize, Vec<u8>, bool)> = run(&dev, &plan, &cfg, |s| {
        std::iter::from_fn(|| s.recv())
            .map(|p| (p.id, p.to_vec(), p.is_full()))
            .collect()
    });
    assert_eq!(got.len(), ids.len());
    for (id, bytes, full) in got {
        let (off, len) = plan.range(id).unwrap();
        let valid = (size as u64).saturating_sub(off).min(len) as usize;
        assert_eq!(full, valid == len as usize, "range {id}");
        assert_eq!(
            &bytes[..valid],
            &pattern(size)[off as usize..off as usize + valid]
        );
        assert!(bytes[valid..].iter().all(|&b| b == 0), "range {id}");
    }
}

#[test]
fn warming_copies_out_only_the_requests_whose_hints_were_not_served() {
    let size = 16 << 20;
    let cfg = hinted();
    let plan = scattered(200, size as u64, 11);
    let (_, reqs) = plan.schedule(&cfg);
    let mut dev = Recording::new(pattern(size));
    dev.hints_served = true;
    let mut ranges = 0;
    warm(&dev, &plan, &cfg, |n| ranges += n);
    assert_eq!(ranges, plan.len());
    // The first request is read whole (nothing was hinted before it); every later one was
    // hinted, and only its first byte is read.
    let reads = dev.reads();
    assert_eq!(reads.len(), reqs.len());
    assert_eq!(reads[0], (reqs[0].offset, reqs[0].len));
    for (r, q) in reads.iter().zip(&reqs).skip(1) {
        assert_eq!(*r, (q.offset, 1));
    }
}
