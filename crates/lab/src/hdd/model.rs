//! The lab's hard-disk model: replays a traced stream of block requests on a modeled 7200 rpm
//! disk and gives the disk's busy time, and the "one ascending sweep" lower bound of a trace.
//!
//! # The model
//! The head is a position in sectors (it starts at 0); each request is served as
//! *positioning + transfer*:
//! - **Sequential** (the request starts where the last one ended): no positioning.
//! - **Short forward skip** (starts at most `skip_bytes` past the head): the platter turns the
//!   skipped sectors under the head, so the cost is `settle_ms` plus the skipped bytes at the
//!   media rate; no seek, no rotational wait.
//! - **Any other jump** (backward, or forward further): a seek of
//!   `seek_min_ms + (seek_full_ms - seek_min_ms) * sqrt(|distance| / span)`, where `span` is
//!   the device's size (a full stroke), plus half a rotation (`30000 / rpm` ms) on average.
//! - **Transfer**: bytes at `mbps` (10^6 bytes a second), one media rate for the whole disk.
//!
//! **Queue depth 1**: requests are served in the order they were issued.
//! **Queue depth N**: the disk sees the requests the host had outstanding. A request is
//! *available* once every request whose completion the trace shows before its issue has been
//! served (the host may have waited for those). Of the first N available requests (in issue
//! order) the disk serves the one with the shortest positioning time (NCQ, shortest
//! positioning first). The result is the disk's busy time; the host's think time is not in it.
//!
//! **The sweep bound**: every sector the trace read, sorted and merged, reading through gaps
//! up to `sweep_gap_bytes`, served in one ascending pass (queue depth 1): what a checker would
//! pay that read the same sectors in disk order.
//!
//! Limits: no drive cache or zones, the mean rotational delay always (so NCQ only saves
//! seek distance), and a host that would issue the same requests in the same dependency
//! order on a slower disk.

use serde::Serialize;
use std::collections::BTreeSet;

/// One block request of a trace (sectors of 512 bytes).
#[derive(Clone, Copy, Debug, PartialEq, Serialize, serde::Deserialize)]
pub struct Req {
    pub sector: u64,
    pub sectors: u64,
    /// Position of the issue event in the trace.
    pub issue: u64,
    /// Position of the completion event in the trace (after `issue`).
    pub complete: u64,
}

/// The disk's parameters.
#[derive(Clone, Debug, Serialize, clap::Args)]
pub struct Disk {
    /// Spindle speed (rotations a minute).
    #[arg(long, default_value_t = 7200.0)]
    pub rpm: f64,
    /// Track-to-track seek, ms.
    #[arg(long, default_value_t = 0.8)]
    pub seek_min_ms: f64,
    /// Full-stroke seek, ms.
    #[arg(long, default_value_t = 15.0)]
    pub seek_full_ms: f64,
    /// Media rate, MB/s (10^6 bytes).
    #[arg(long, default_value_t = 180.0)]
    pub mbps: f64,
    /// Forward skips up to this many KiB are served without a seek.
    #[arg(long, default_value_t = 1024)]
    pub skip_kb: u64,
    /// Fixed cost of a short forward skip, ms.
    #[arg(long, default_value_t = 0.1)]
    pub settle_ms: f64,
    /// Full-stroke span in bytes [default: the traced device's size].
    #[arg(long)]
    pub span_bytes: Option<u64>,
    /// The sweep bound reads through gaps up to this many KiB.
    #[arg(long, default_value_t = 512)]
    pub sweep_gap_kb: u64,
}

impl Default for Disk {
    fn default() -> Self {
        Disk {
            rpm: 7200.0,
            seek_min_ms: 0.8,
            seek_full_ms: 15.0,
            mbps: 180.0,
            skip_kb: 1024,
            settle_ms: 0.1,
            span_bytes: None,
            sweep_gap_kb: 512,
        }
    }
}

/// What a replay cost.
#[derive(Clone, Debug, Default, Serialize, PartialEq)]
pub struct Cost {
    /// The disk's busy time, seconds.
    pub disk_s: f64,
    /// Of which positioning (seeks, rotation, skips).
    pub positioning_s: f64,
    pub requests: u64,
    /// Jumps that needed a seek.
    pub seeks: u64,
    pub bytes: u64,
}

impl Disk {
    fn span_sectors(&self, device_bytes: u64) -> f64 {
        (self.span_bytes.unwrap_or(device_bytes).max(512) / 512) as f64
    }

    /// Positioning time (ms) from head `head` to `sector`, and whether it is a seek.
    pub fn positioning_ms(&self, head: u64, sector: u64, span: f64) -> (f64, bool) {
        if sector == head {
            return (0.0, false);
        }
        if sector > head && (sector - head) * 512 <= self.skip_kb * 1024 {
            let skipped = ((sector - head) * 512) as f64;
            return (self.settle_ms + skipped / (self.mbps * 1e3), false);
        }
        let d = sector.abs_diff(head) as f64;
        let seek = self.seek_min_ms + (self.seek_full_ms - self.seek_min_ms) * (d / span).sqrt();
        (seek + 30_000.0 / self.rpm, true)
    }

    fn transfer_ms(&self, sectors: u64) -> f64 {
        (sectors * 512) as f64 / (self.mbps * 1e3)
    }

    /// Replay `reqs` (in issue order) at queue depth `qd` on a device of `device_bytes`.
    pub fn replay(&self, reqs: &[Req], qd: usize, device_bytes: u64) -> Cost {
        let span = self.span_sectors(device_bytes);
        let mut cost = Cost::default();
        let mut head = 0u64;
        let serve = |r: &Req, head: &mut u64, cost: &mut Cost| {
            let (pos, seek) = self.positioning_ms(*head, r.sector, span);
            cost.positioning_s += pos / 1e3;
            cost.disk_s += (pos + self.transfer_ms(r.sectors)) / 1e3;
            cost.requests += 1;
            cost.seeks += u64::from(seek);
            cost.bytes += r.sectors * 512;
            *head = r.sector + r.sectors;
        };
        if qd <= 1 {
            for r in reqs {
                serve(r, &mut head, &mut cost);
            }
            return cost;
        }
        let deps = dependencies(reqs);
        // Completion order: requests by completion event.
        let mut by_completion: Vec<usize> = (0..reqs.len()).collect();
        by_completion.sort_by_key(|&i| reqs[i].complete);
        let mut served = vec![false; reqs.len()];
        let mut served_prefix = 0; // the first `served_prefix` completions are all served
        let mut next_issue = 0; // requests below this are available (or served)
        let mut pool: BTreeSet<usize> = BTreeSet::new();
        for _ in 0..reqs.len() {
            while next_issue < reqs.len() && deps[next_issue] <= served_prefix {
                pool.insert(next_issue);
                next_issue += 1;
            }
            // The pool is never empty: the earliest unserved request only waits for requests
            // that completed before it was issued, so were issued earlier, so are served.
            let Some(&pick) = pool.iter().take(qd).min_by(|&&a, &&b| {
                let pa = self.positioning_ms(head, reqs[a].sector, span).0;
                let pb = self.positioning_ms(head, reqs[b].sector, span).0;
                pa.total_cmp(&pb)
            }) else {
                break;
            };
            pool.remove(&pick);
            serve(&reqs[pick], &mut head, &mut cost);
            served[pick] = true;
            while served_prefix < reqs.len() && served[by_completion[served_prefix]] {
                served_prefix += 1;
            }
        }
        cost
    }

    /// The lower bound: every sector of `reqs` read in one ascending sweep.
    pub fn sweep(&self, reqs: &[Req], device_bytes: u64) -> Cost {
        self.replay(&sweep_runs(reqs, self.sweep_gap_kb * 1024), 1, device_bytes)
    }
}

/// For each request (in issue order), how many requests completed before it was issued.
fn dependencies(reqs: &[Req]) -> Vec<usize> {
    let mut completes: Vec<u64> = reqs.iter().map(|r| r.complete).collect();
    completes.sort_unstable();
    reqs.iter()
        .map(|r| completes.partition_point(|&c| c < r.issue))
        .collect()
}

/// The sectors of `reqs` as ascending runs, merged through gaps up to `gap` bytes.
pub fn sweep_runs(reqs: &[Req], gap: u64) -> Vec<Req> {
    let mut spans: Vec<(u64, u64)> = reqs
        .iter()
        .map(|r| (r.sector, r.sector + r.sectors))
        .collect();
    spans.sort_unstable();
    let mut runs: Vec<Req> = Vec::new();
    for (s, e) in spans {
        match runs.last_mut() {
            Some(r) if s <= r.sector + r.sectors + gap / 512 => {
                r.sectors = r.sectors.max(e - r.sector);
            }
            _ => runs.push(Req {
                sector: s,
                sectors: e - s,
                issue: 0,
                complete: 0,
            }),
        }
    }
    for (i, r) in runs.iter_mut().enumerate() {
        r.issue = 2 * i as u64;
        r.complete = 2 * i as u64 + 1;
    }
    runs
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Requests issued all at once (none waits for another), `sectors` each.
    fn all_outstanding(starts: &[u64], sectors: u64) -> Vec<Req> {
        let n = starts.len() as u64;
        starts
            .iter()
            .enumerate()
            .map(|(i, &s)| Req {
                sector: s,
                sectors,
                issue: i as u64,
                complete: n + i as u64,
            })
            .collect()
    }

    /// Requests issued one after another, each after the previous completed.
    fn one_by_one(starts: &[u64], sectors: u64) -> Vec<Req> {
        starts
            .iter()
            .enumerate()
            .map(|(i, &s)| Req {
                sector: s,
                sectors,
                issue: 2 * i as u64,
                complete: 2 * i as u64 + 1,
            })
            .collect()
    }

    const DEV: u64 = 1 << 40; // 1 TiB
    const MIB: u64 = 2048; // sectors

    #[test]
    fn alternating_far_apart_requests_cost_far_more_than_sequential_ones() {
        let disk = Disk::default();
        let seq: Vec<u64> = (0..200).map(|i| i * MIB).collect();
        let alt: Vec<u64> = (0..200)
            .map(|i| (i / 2) * MIB + (i % 2) * (DEV / 512 / 2))
            .collect();
        let s = disk.replay(&one_by_one(&seq, MIB), 1, DEV);
        let a = disk.replay(&one_by_one(&alt, MIB), 1, DEV);
        assert_eq!(s.seeks, 0);
        assert_eq!(s.bytes, a.bytes);
        // 200 MiB at 180 MB/s is about 1.17 s; the alternation adds ~200 seeks of ~11 ms.
        assert!((s.disk_s - 200.0 * 1048576.0 / 180e6).abs() < 1e-6, "{s:?}");
        assert!(a.seeks >= 199, "{a:?}");
        assert!(a.disk_s > s.disk_s + 199.0 * 0.010, "{a:?} vs {s:?}");
        // The sweep bound of the alternating trace is one pass over the two halves.
        let b = disk.sweep(&one_by_one(&alt, MIB), DEV);
        assert_eq!(b.requests, 2);
        assert!(b.disk_s < a.disk_s / 2.0);
    }

    #[test]
    fn a_deeper_queue_is_never_slower_and_sorts_outstanding_requests() {
        let disk = Disk::default();
        // Two threads' requests interleaved, all outstanding: NCQ can sort them.
        let alt: Vec<u64> = (0..64)
            .map(|i| (i / 2) * 8 + (i % 2) * (DEV / 512 / 2))
            .collect();
        let trace = all_outstanding(&alt, 8);
        let q1 = disk.replay(&trace, 1, DEV);
        let q32 = disk.replay(&trace, 32, DEV);
        assert!(q32.disk_s <= q1.disk_s, "{q32:?} vs {q1:?}");
        assert!(q32.seeks * 4 < q1.seeks, "{q32:?} vs {q1:?}");
        assert_eq!(q32.requests, q1.requests);
        // A dependent chain (each waits for the last) gains nothing from the queue.
        let chain = one_by_one(&alt, 8);
        assert_eq!(disk.replay(&chain, 32, DEV), disk.replay(&chain, 1, DEV));
    }

    #[test]
    fn short_forward_skips_cost_the_skipped_bytes_not_a_seek() {
        let disk = Disk::default();
        let (pos, seek) = disk.positioning_ms(0, 256, 1e9); // 128 KiB ahead
        assert!(!seek);
        assert!((pos - (0.1 + 131072.0 / 180e3)).abs() < 1e-9);
        let (back, seek) = disk.positioning_ms(256, 0, 1e9);
        assert!(seek && back > 30_000.0 / 7200.0 + 0.8);
        // Gaps up to 512 KiB (1024 sectors) are read through, longer ones are not.
        let runs = sweep_runs(&one_by_one(&[5000, 0, 8, 1000, 6033], 8), 512 * 1024);
        assert_eq!(
            runs.iter()
                .map(|r| (r.sector, r.sectors))
                .collect::<Vec<_>>(),
            vec![(0, 1008), (5000, 8), (6033, 8)]
        );
    }
}
