//! What this machine's cores give in parallel, as the ceiling for ffsck's thread scaling: a
//! compute-bound loop and a page-cache copy of the image, each at 1..N threads.
//!
//! On a virtual machine neither is N×: vCPUs share host cores and memory bandwidth with other
//! guests. A checker that scales like these two loops has no serial part of its own left.

use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::Path;
use std::time::Instant;

use anyhow::{Context, Result};
use serde::Serialize;

use crate::metrics::median;

/// Median wall of the two reference loops at one thread count.
#[derive(Debug, Clone, Serialize)]
pub struct CeilingRow {
    pub threads: usize,
    /// A fixed amount of integer arithmetic, split evenly between the threads.
    pub compute_s: f64,
    /// The first `copy_bytes` of the image read from the page cache with `pread`, split into
    /// one contiguous share per thread (the copy the checkers pay for every metadata byte).
    pub copy_s: f64,
}

#[derive(Debug, Clone, Serialize)]
pub struct Ceiling {
    pub copy_bytes: u64,
    pub rows: Vec<CeilingRow>,
}

impl Ceiling {
    /// Speedups of the two loops from 1 thread to `threads`: (compute, copy).
    pub fn speedup(&self, threads: usize) -> Option<(f64, f64)> {
        let one = self.rows.first()?;
        let row = self.rows.iter().find(|r| r.threads == threads)?;
        Some((one.compute_s / row.compute_s, one.copy_s / row.copy_s))
    }
}

/// Steps of the compute loop, in total (about 0.3 s on one core of this machine).
const COMPUTE_STEPS: u64 = 2_400_000_000;
/// Bytes of the image the copy loop reads, at most.
const COPY_BYTES: u64 = 256 << 20;
/// Bytes per `pread` of the copy loop (the size of ffsck's inode-table reads).
const COPY_CHUNK: usize = 128 << 10;

/// Measures both loops at 1..=`cpus` threads, `runs` times each, thread counts interleaved
/// (rotated per run) so drift in the machine's speed falls on all of them alike.
pub fn measure(image: &Path, cpus: usize, runs: usize) -> Result<Ceiling> {
    let file = File::open(image).with_context(|| format!("opening {}", image.display()))?;
    let len = file.metadata()?.len().min(COPY_BYTES);
    let len = len - len % COPY_CHUNK as u64;
    // Once through, so the copy loop reads from the page cache.
    copy(&file, len, 1)?;
    let cpus = cpus.max(1);
    let mut compute = vec![Vec::new(); cpus];
    let mut copied = vec![Vec::new(); cpus];
    for run in 0..runs.max(1) {
        for k in 0..cpus {
            let t = (k + run) % cpus;
            compute[t].push(spin(t + 1));
            copied[t].push(copy(&file, len, t + 1)?);
        }
    }
    let rows = (0..cpus)
        .map(|t| CeilingRow {
            threads: t + 1,
            compute_s: median(&compute[t]).unwrap_or(f64::NAN),
            copy_s: median(&copied[t]).unwrap_or(f64::NAN),
        })
        .collect();
    Ok(Ceiling {
        copy_bytes: len,
        rows,
    })
}

/// Wall seconds of `COMPUTE_STEPS` steps of a linear congruential generator, split between
/// `threads` threads.
fn spin(threads: usize) -> f64 {
    let steps = COMPUTE_STEPS / threads as u64;
    let start = Instant::now();
    std::thread::scope(|s| {
        for t in 0..threads {
            s.spawn(move || {
                let mut x = t as u64;
                for _ in 0..steps {
                    x = x
                        .wrapping_mul(6_364_136_223_846_793_005)
                        .wrapping_add(1_442_695_040_888_963_407);
                }
                std::hint::black_box(x)
            });
        }
    });
    start.elapsed().as_secs_f64()
}

/// Wall seconds of reading the first `len` bytes of `file` with `threads` threads, each its
/// own contiguous share in `COPY_CHUNK` reads into its own buffer.
fn copy(file: &File, len: u64, threads: usize) -> Result<f64> {
    let chunks = len / COPY_CHUNK as u64;
    let per = chunks.div_ceil(threads as u64);
    let start = Instant::now();
    std::thread::scope(|s| -> Result<()> {
        let workers: Vec<_> = (0..threads as u64)
            .map(|t| {
                s.spawn(move || -> std::io::Result<()> {
                    let mut buf = vec![0u8; COPY_CHUNK];
                    for c in (t * per)..((t + 1) * per).min(chunks) {
                        file.read_exact_at(&mut buf, c * COPY_CHUNK as u64)?;
                    }
                    Ok(())
                })
            })
            .collect();
        for w in workers {
            w.join()
                .map_err(|_| anyhow::anyhow!("copy thread panicked"))?
                .context("reading the image")?;
        }
        Ok(())
    })?;
    Ok(start.elapsed().as_secs_f64())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn copy_reads_at_any_thread_count_and_fails_past_the_end() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("img");
        std::fs::write(&path, vec![7u8; 5 * COPY_CHUNK]).unwrap();
        let file = File::open(&path).unwrap();
        for t in 1..=3 {
            assert!(copy(&file, 5 * COPY_CHUNK as u64, t).unwrap() >= 0.0);
        }
        // A length past the end of the file is a read error, not a silent short count.
        assert!(copy(&file, 6 * COPY_CHUNK as u64, 2).is_err());
    }

    #[test]
    fn speedup_compares_each_count_with_one_thread() {
        let c = Ceiling {
            copy_bytes: 0,
            rows: vec![
                CeilingRow {
                    threads: 1,
                    compute_s: 1.0,
                    copy_s: 0.5,
                },
                CeilingRow {
                    threads: 2,
                    compute_s: 0.5,
                    copy_s: 0.4,
                },
            ],
        };
        assert_eq!(c.speedup(2), Some((2.0, 1.25)));
        assert_eq!(c.speedup(3), None);
    }
}
