//! The "read once" floor for the bench: how long it takes just to read the metadata a checker
//! must look at (superblocks, group descriptors, bitmaps, the used parts of the inode tables,
//! directory blocks, extent-tree and indirect blocks) once, in disk order, with large reads.
//!
//! The reads are timed two ways, each run alternating: plainly in order (the kernel's own
//! sequential read-ahead, best for a few long runs), and with the ranges ahead of the read
//! hinted (`POSIX_FADV_WILLNEED`, best for thousands of small scattered ones, where one
//! synchronous read at a time would measure the disk's latency instead of its bandwidth).
//! The floor is the faster of the two medians.
//!
//! A checker cannot be faster than reading its input, so `checker wall / read-once wall` says
//! how far each is from that floor, and the floor itself says whether a run was I/O bound
//! (cold cache) or CPU bound (warm cache, where the floor is a memory copy).
//!
//! The map of metadata blocks comes from `e2image -r` (e2fsprogs, installed beside e2fsck): it
//! copies exactly those blocks into a sparse raw image and leaves all-zero blocks as holes, so
//! the data regions of its output (found with `SEEK_DATA`/`SEEK_HOLE`) are the byte ranges to
//! read, zeroed never-used inode-table blocks excluded. Building the map is not timed; only the
//! reads of the original image are.

use std::fs::File;
use std::os::fd::AsRawFd;
use std::os::unix::fs::FileExt;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Instant;

use anyhow::{bail, Context, Result};
use serde::Serialize;

use crate::metrics::median;

/// Gaps between metadata ranges at most this long are read through rather than skipped: one
/// longer read is cheaper than a seek plus a new request on every kind of disk.
pub const MERGE_GAP_BYTES: u64 = 64 << 10;
/// Largest single read.
const READ_CHUNK_BYTES: usize = 4 << 20;
/// Most SEEK_DATA/SEEK_HOLE steps when mapping: one per metadata run, so a bound far above any
/// real image that still ends the loop if the file system under the map misbehaves.
const MAX_MAP_STEPS: usize = 50_000_000;

/// A byte range of the image: `(offset, length)`.
pub type Range = (u64, u64);

/// What the read-once measurement found and how long it took.
#[derive(Debug, Clone, Serialize)]
pub struct ReadOnce {
    /// Bytes of metadata blocks (the data regions of `e2image -r`).
    pub metadata_bytes: u64,
    /// Separate metadata regions before merging.
    pub regions: usize,
    /// Bytes actually read after merging small gaps.
    pub bytes_read: u64,
    /// Sequential read requests after merging (each split into reads of at most 4 MiB).
    pub extents_read: usize,
    pub map_s: f64,
    /// Timed runs (after one warm-up when the cache is warm), plain and hinted.
    pub wall_s: Vec<f64>,
    pub hinted_wall_s: Vec<f64>,
    /// The floor: the faster of the plain and hinted medians.
    pub median_wall_s: f64,
    pub median_plain_s: f64,
    pub median_hinted_s: f64,
    /// With --cold: whether the page cache was dropped before every timed run.
    pub cold: bool,
}

/// Data regions of `path` (a sparse file), in order.
pub fn data_regions(path: &Path) -> Result<Vec<Range>> {
    let file = File::open(path).with_context(|| format!("opening {}", path.display()))?;
    let len = file.metadata()?.len();
    let fd = file.as_raw_fd();
    let mut regions = Vec::new();
    let mut pos: u64 = 0;
    for _ in 0..MAX_MAP_STEPS {
        if pos >= len {
            return Ok(regions);
        }
        // SAFETY: lseek on a descriptor we own; no memory is passed.
        let start = unsafe { libc::lseek(fd, pos as libc::off_t, libc::SEEK_DATA) };
        if start < 0 {
            let e = std::io::Error::last_os_error();
            // ENXIO: no data after `pos`.
            if e.raw_os_error() == Some(libc::ENXIO) {
                return Ok(regions);
            }
            return Err(e).context("SEEK_DATA");
        }
        // SAFETY: as above.
        let end = unsafe { libc::lseek(fd, start, libc::SEEK_HOLE) };
        if end < 0 {
            return Err(std::io::Error::last_os_error()).context("SEEK_HOLE");
        }
        let (start, end) = (start as u64, (end as u64).min(len));
        if end <= start || start < pos {
            bail!("SEEK_DATA/SEEK_HOLE went backwards at offset {pos}");
        }
        regions.push((start, end - start));
        pos = end;
    }
    bail!("more than {MAX_MAP_STEPS} metadata regions; giving up")
}

/// Merges regions whose gap is at most `max_gap`; input must be sorted and disjoint.
pub fn coalesce(regions: &[Range], max_gap: u64) -> Vec<Range> {
    let mut out: Vec<Range> = Vec::new();
    for &(off, len) in regions {
        if let Some(last) = out.last_mut() {
            let last_end = last.0.saturating_add(last.1);
            if off >= last_end && off - last_end <= max_gap {
                last.1 = off.saturating_add(len) - last.0;
                continue;
            }
        }
        out.push((off, len));
    }
    out
}

/// The metadata byte ranges of `image`, from a throw-away `e2image -r` copy in `scratch`.
pub fn metadata_map(image: &Path, e2image: &Path, scratch: &Path) -> Result<Vec<Range>> {
    let tmp = tempfile::Builder::new()
        .prefix("ffsck-lab-e2image-")
        .tempdir_in(scratch)
        .with_context(|| format!("creating a scratch dir in {}", scratch.display()))?;
    let raw = tmp.path().join("meta.raw");
    let out = Command::new(e2image)
        .arg("-r")
        .arg(image)
        .arg(&raw)
        .stdin(Stdio::null())
        .output()
        .with_context(|| format!("running {}", e2image.display()))?;
    if !out.status.success() {
        bail!(
            "e2image -r failed ({}): {}",
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    data_regions(&raw)
}

/// How far ahead of the read the ranges are hinted.
const HINT_AHEAD_BYTES: u64 = 32 << 20;

/// Reads every range of `image` once, in order, in chunks of at most 4 MiB; returns seconds.
/// With `hint`, the ranges up to `HINT_AHEAD_BYTES` ahead of the one being read are hinted to
/// the kernel (`POSIX_FADV_WILLNEED`), so the device has many reads in flight.
pub fn read_ranges(image: &Path, ranges: &[Range], hint: bool) -> Result<f64> {
    let file = File::open(image).with_context(|| format!("opening {}", image.display()))?;
    let advise = |off: u64, len: u64, advice: libc::c_int| {
        let (Ok(off), Ok(len)) = (libc::off_t::try_from(off), libc::off_t::try_from(len)) else {
            return;
        };
        // SAFETY: advisory call on a descriptor we own; it reads nothing into our memory.
        unsafe { libc::posix_fadvise(file.as_raw_fd(), off, len, advice) };
    };
    advise(0, 0, libc::POSIX_FADV_SEQUENTIAL);
    // Every range in pieces of at most one read; hints go piece by piece too, so a long
    // range is not hinted (and its pages allocated) all at once.
    let chunk = READ_CHUNK_BYTES as u64;
    let pieces: Vec<Range> = ranges
        .iter()
        .flat_map(|&(off, len)| {
            (0..len.div_ceil(chunk)).map(move |k| (off + k * chunk, (len - k * chunk).min(chunk)))
        })
        .collect();
    let mut buf = vec![0u8; READ_CHUNK_BYTES];
    let started = Instant::now();
    let mut hinted = 0usize;
    for (i, &(off, len)) in pieces.iter().enumerate() {
        while hint
            && hinted < pieces.len()
            && (hinted <= i || pieces[hinted].0.saturating_sub(off) < HINT_AHEAD_BYTES)
        {
            let (h_off, h_len) = pieces[hinted];
            advise(h_off, h_len, libc::POSIX_FADV_WILLNEED);
            hinted += 1;
        }
        let mut done = 0u64;
        while done < len {
            let got = file
                .read_at(&mut buf[..(len - done) as usize], off + done)
                .with_context(|| format!("reading {} at {}", image.display(), off + done))?;
            if got == 0 {
                // The map came from this image, so a short file means it changed under us.
                bail!("{} ends before offset {}", image.display(), off + done);
            }
            done += got as u64;
        }
    }
    Ok(started.elapsed().as_secs_f64())
}

/// Maps the metadata of `image` and times `runs` reads of it. `before_run` runs before every
/// read (it drops the page cache for cold benches and says whether that worked); with a warm
/// cache one untimed warm-up read comes first, as for the checkers.
pub fn measure(
    image: &Path,
    e2image: &Path,
    scratch: &Path,
    runs: usize,
    cold: bool,
    before_run: &mut dyn FnMut() -> bool,
) -> Result<ReadOnce> {
    let started = Instant::now();
    let regions = metadata_map(image, e2image, scratch)?;
    let map_s = started.elapsed().as_secs_f64();
    let merged = coalesce(&regions, MERGE_GAP_BYTES);
    if !cold {
        read_ranges(image, &merged, false)?;
    }
    let mut all_cold = cold;
    let mut wall_s = Vec::with_capacity(runs);
    let mut hinted_wall_s = Vec::with_capacity(runs);
    for _ in 0..runs {
        for (hint, walls) in [(false, &mut wall_s), (true, &mut hinted_wall_s)] {
            if cold {
                all_cold &= before_run();
            }
            walls.push(read_ranges(image, &merged, hint)?);
        }
    }
    let median_plain_s = median(&wall_s).unwrap_or(f64::NAN);
    let median_hinted_s = median(&hinted_wall_s).unwrap_or(f64::NAN);
    Ok(ReadOnce {
        metadata_bytes: regions.iter().map(|r| r.1).sum(),
        regions: regions.len(),
        bytes_read: merged.iter().map(|r| r.1).sum(),
        extents_read: merged.len(),
        map_s,
        median_wall_s: median_plain_s.min(median_hinted_s),
        median_plain_s,
        median_hinted_s,
        wall_s,
        hinted_wall_s,
        cold: all_cold,
    })
}

/// The report section: the floor next to both checkers, with ratios.
pub fn render_markdown(r: &ReadOnce, ffsck_wall_s: f64, e2fsck_wall_s: f64) -> String {
    let mib = |b: u64| b as f64 / (1 << 20) as f64;
    let mut out = String::from("\n### Read-once floor\n\n");
    out.push_str(&format!(
        "Reading the metadata once ({:.1} MiB in {} regions per `e2image -r`; {:.1} MiB in {} \
         sequential reads after merging gaps ≤ {} KiB), {}: {:.3} s in order, {:.3} s with \
         read-ahead hints; the floor is the faster.\n\n",
        mib(r.metadata_bytes),
        r.regions,
        mib(r.bytes_read),
        r.extents_read,
        MERGE_GAP_BYTES >> 10,
        if r.cold {
            "page cache dropped before each read"
        } else {
            "warm page cache"
        },
        r.median_plain_s,
        r.median_hinted_s,
    ));
    let row = |name: &str, wall: f64| {
        vec![
            name.to_string(),
            format!("{wall:.3}"),
            format!("{:.2}×", wall / r.median_wall_s),
        ]
    };
    out.push_str(&crate::markdown::table(
        &["what", "median wall (s)", "× read-once"],
        &[false, true, true],
        &[
            row("read once", r.median_wall_s),
            row("ffsck -fn", ffsck_wall_s),
            row("e2fsck -fn", e2fsck_wall_s),
        ],
    ));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn coalesce_merges_small_gaps_only() {
        let r = [(0, 4096), (4096, 4096), (10_000, 100), (1 << 30, 1)];
        assert_eq!(coalesce(&r, 2000), [(0, 10_100), (1 << 30, 1)]);
        assert_eq!(coalesce(&r, 0), [(0, 8192), (10_000, 100), (1 << 30, 1)]);
        assert!(coalesce(&[], 10).is_empty());
        // Overlapping (hostile) input is kept apart rather than underflowing.
        assert_eq!(coalesce(&[(0, 10), (5, 10)], 100), [(0, 10), (5, 10)]);
    }

    #[test]
    fn data_regions_of_a_sparse_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("sparse");
        let f = File::create(&path).unwrap();
        f.set_len(16 << 20).unwrap();
        f.write_at(&[1u8; 4096], 4 << 20).unwrap();
        f.sync_all().unwrap();
        let regions = data_regions(&path).unwrap();
        // Some file systems report whole files as data; then one region covers everything.
        let total: u64 = regions.iter().map(|r| r.1).sum();
        assert!(regions
            .iter()
            .any(|&(o, l)| o <= 4 << 20 && o + l >= (4 << 20) + 4096));
        assert!((4096..=16 << 20).contains(&total));
        for hint in [false, true] {
            let secs = read_ranges(&path, &regions, hint).unwrap();
            assert!(secs >= 0.0);
            assert!(read_ranges(&path, &[(32 << 20, 10)], hint).is_err());
        }
    }
}
