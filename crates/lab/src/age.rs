//! `ffsck-lab age`: ages an image through the real kernel driver (a loop mount, so root) with
//! seeded create/fallocate/truncate/unlink/append/punch-hole workloads, then measures the
//! fragmentation it left: extents per file via the FIEMAP ioctl, the share of non-contiguous
//! files, directory-block scatter, and a cold "grep test" that reads every file. XFS images
//! work too (the kernel picks the driver); they also get `xfs_db -r -c frag`'s summary.

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::{bail, Context, Result};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde::Serialize;

use crate::loopmount::Mount;
use crate::mkfs::free_bytes;

#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Method {
    /// Three-level folders; per folder round-robin create(fallocate) / truncate-to-half /
    /// delete / append 256 KiB until full.
    Roundhouse,
    /// Large files to ~81 %, created first, then written side by side in a random order (1
    /// MiB at a time, 64 files in turn, as concurrent downloads do), then punch holes so small islands spread over
    /// every group, files in a random order: each file's extent blocks land somewhere in its
    /// data, in an order that has nothing to do with its inode number.
    Holepunch,
    /// One dir per block group filled to 20 %, then random creates, appends, truncates and
    /// deletes until ≥ 90 % full, then `--rounds` rounds of churn (delete random files down
    /// to 85 %, refill to 90 %: the new files fill the holes, in many extents). Half the files are written whole, half grow a few KiB at a
    /// time beside 63 other growing files (concurrent appenders), so they end up in many
    /// extents, with their extent (or indirect) blocks scattered among the data. On a file
    /// system without extents (ext3) files are written (`pwrite`, mounted `nodelalloc` so
    /// blocks are placed when written), elsewhere allocated (`fallocate`).
    Ffsck,
    /// Repeated rewrites of a source-tree-like set of files (checkout after checkout).
    GitReplay,
}

#[derive(clap::Args, Debug, Clone)]
pub struct AgeArgs {
    #[arg(long, value_enum)]
    pub method: Method,
    /// Image to age in place (mounted with `mount -o loop`, which needs root).
    #[arg(long)]
    pub image: PathBuf,
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Stop at this percentage of blocks in use [default: 95 roundhouse, 81 holepunch
    /// (before punching), 90 ffsck, 90 git-replay].
    #[arg(long)]
    pub until_util: Option<f64>,
    /// Stop after this many operations.
    #[arg(long)]
    pub ops: Option<u64>,
    /// Stop after this many seconds.
    #[arg(long)]
    pub secs: Option<f64>,
    /// Report path [default: IMG.age.json].
    #[arg(long)]
    pub report: Option<PathBuf>,
    /// ffsck method: rounds of churn once full (delete down to 5 points below the fill
    /// level, refill with new files, which land in the holes).
    #[arg(long, default_value_t = 10)]
    pub rounds: u32,
    /// Skip the cold "grep test" (reading every file back; minutes on a full 16 GiB image).
    #[arg(long)]
    pub no_grep_test: bool,
}

#[derive(Debug, Clone, Serialize)]
pub struct Fragmentation {
    pub files: u64,
    pub file_bytes: u64,
    /// Mean physically contiguous runs per non-empty file.
    pub mean_fragments_per_file: f64,
    pub max_fragments: u64,
    /// Share of non-empty files with more than one run.
    pub noncontiguous_share: f64,
    pub dirs: u64,
    /// Directories whose blocks FIEMAP could map (XFS maps none: it refuses directories).
    pub dirs_mapped: u64,
    /// Over the mapped directories, as is the scattered share.
    pub mean_fragments_per_dir: f64,
    /// Share of directories whose blocks are not contiguous.
    pub scattered_dir_share: f64,
    /// Seconds to read every file after dropping the page cache.
    pub grep_test_s: f64,
    /// Whether dropping the page cache worked (if not, the grep test ran warm).
    pub grep_test_cold: bool,
}

#[derive(Debug, Clone, Serialize)]
pub struct AgeReport {
    pub image: PathBuf,
    pub method: Method,
    pub seed: u64,
    pub ops: u64,
    pub seconds: f64,
    pub stop_reason: String,
    pub util_before: f64,
    pub util_after: f64,
    pub fragmentation: Fragmentation,
    /// XFS images: `xfs_db -r -c frag` after unmounting ("actual N, ideal M, fragmentation
    /// factor F%").
    pub xfs_frag: Option<String>,
}

/// Percentage of blocks in use.
fn util(dir: &Path) -> f64 {
    use std::os::unix::ffi::OsStrExt;
    let Ok(c) = std::ffi::CString::new(dir.as_os_str().as_bytes()) else {
        return 0.0;
    };
    let mut st: libc::statvfs = unsafe { std::mem::zeroed() };
    // SAFETY: valid path and out-parameter.
    if unsafe { libc::statvfs(c.as_ptr(), &mut st) } != 0 || st.f_blocks == 0 {
        return 0.0;
    }
    100.0 * (st.f_blocks - st.f_bfree) as f64 / st.f_blocks as f64
}

fn fallocate(file: &File, mode: i32, off: u64, len: u64) -> std::io::Result<()> {
    // SAFETY: plain syscall on an open descriptor.
    let r = unsafe { libc::fallocate(file.as_raw_fd(), mode, off as i64, len as i64) };
    if r != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

fn is_enospc(e: &std::io::Error) -> bool {
    e.raw_os_error() == Some(libc::ENOSPC)
}

/// The stop rules shared by all methods.
struct Budget {
    started: Instant,
    ops: u64,
    max_ops: Option<u64>,
    max_secs: Option<f64>,
}

impl Budget {
    fn exhausted(&self) -> Option<String> {
        if self.max_ops.is_some_and(|m| self.ops >= m) {
            return Some(format!("{} operations done", self.ops));
        }
        if self
            .max_secs
            .is_some_and(|s| self.started.elapsed().as_secs_f64() >= s)
        {
            return Some("time limit reached".into());
        }
        None
    }
}

/// The ongoing state of a workload: the files it made, its randomness and budget.
struct Work {
    root: PathBuf,
    rng: ChaCha8Rng,
    files: Vec<PathBuf>,
    next: u64,
    budget: Budget,
    buf: Vec<u8>,
    /// `fallocate` is not supported here (learned from the first EOPNOTSUPP).
    no_fallocate: bool,
}

impl Work {
    fn create(&mut self, dir: &Path, bytes: u64) -> std::io::Result<()> {
        self.create_open(dir, bytes).map(drop)
    }

    /// Creates a file of `bytes` and returns it open for writing.
    fn create_open(&mut self, dir: &Path, bytes: u64) -> std::io::Result<File> {
        let path = dir.join(format!("f{:08}", self.next));
        self.next += 1;
        let f = File::create(&path)?;
        self.budget.ops += 1;
        self.files.push(path);
        self.allocate(&f, 0, bytes.max(1))?;
        Ok(f)
    }

    /// Gives `f` blocks for `[off, off + len)`: `fallocate`, or written data where the file
    /// system cannot allocate without writing (no extents: ext2/ext3).
    fn allocate(&mut self, f: &File, off: u64, len: u64) -> std::io::Result<()> {
        if !self.no_fallocate {
            match fallocate(f, 0, off, len) {
                Err(e) if e.raw_os_error() == Some(libc::EOPNOTSUPP) => self.no_fallocate = true,
                r => return r,
            }
        }
        use std::os::unix::fs::FileExt;
        let mut done = 0;
        while done < len {
            let n = (len - done).min(self.buf.len() as u64) as usize;
            f.write_all_at(&self.buf[..n], off + done)?;
            done += n as u64;
        }
        Ok(())
    }

    fn append(&mut self, path: &Path, bytes: u64) -> std::io::Result<()> {
        let mut f = OpenOptions::new().append(true).open(path)?;
        self.budget.ops += 1;
        let mut left = bytes;
        while left > 0 {
            let n = left.min(self.buf.len() as u64) as usize;
            f.write_all(&self.buf[..n])?;
            left -= n as u64;
        }
        Ok(())
    }

    fn truncate_half(&mut self, path: &Path) -> std::io::Result<()> {
        let f = OpenOptions::new().write(true).open(path)?;
        self.budget.ops += 1;
        let len = f.metadata()?.len();
        f.set_len(len / 2)
    }

    fn delete(&mut self, k: usize) -> std::io::Result<()> {
        let path = self.files.swap_remove(k);
        self.budget.ops += 1;
        std::fs::remove_file(path)
    }

    fn random_file(&mut self) -> Option<usize> {
        (!self.files.is_empty()).then(|| self.rng.random_range(0..self.files.len()))
    }

    fn util(&self) -> f64 {
        util(&self.root)
    }
}

/// Runs one step; ENOSPC ends the workload (the file system is full), other errors fail.
fn step(r: std::io::Result<()>) -> Result<bool> {
    match r {
        Ok(()) => Ok(true),
        Err(e) if is_enospc(&e) => Ok(false),
        Err(e) => Err(e.into()),
    }
}

fn roundhouse(w: &mut Work, target: f64) -> Result<String> {
    let mut folders = Vec::new();
    for a in 0..4 {
        for b in 0..4 {
            for c in 0..4 {
                let d = w.root.join(format!("a{a}/b{b}/c{c}"));
                std::fs::create_dir_all(&d)?;
                folders.push(d);
            }
        }
    }
    let mut round = 0usize;
    loop {
        for d in &folders {
            if let Some(r) = w.budget.exhausted() {
                return Ok(r);
            }
            if w.util() >= target {
                return Ok(format!("{target}% in use"));
            }
            let ok = match round % 4 {
                0 => {
                    let bytes = w.rng.random_range(16u64..=1024) << 10;
                    step(w.create(d, bytes))?
                }
                1 => match w.random_file() {
                    Some(k) => {
                        let p = w.files[k].clone();
                        step(w.truncate_half(&p))?
                    }
                    None => true,
                },
                2 => match w.random_file() {
                    Some(k) => step(w.delete(k))?,
                    None => true,
                },
                _ => match w.random_file() {
                    Some(k) => {
                        let p = w.files[k].clone();
                        step(w.append(&p, 256 << 10))?
                    }
                    None => true,
                },
            };
            if !ok {
                return Ok("file system full".into());
            }
        }
        round += 1;
    }
}

fn holepunch(w: &mut Work, target: f64) -> Result<String> {
    use rand::seq::SliceRandom;
    let dirs: Vec<PathBuf> = (0..8).map(|d| w.root.join(format!("big{d}"))).collect();
    for d in &dirs {
        std::fs::create_dir_all(d)?;
    }
    // Batches of 64 files of 16 MiB, written 1 MiB at a time: every round gives each file of
    // the batch its next MiB, the files in a random order. The files are all created first
    // (empty, in random directories) and written in a random order, so a file's inode number
    // says nothing about where its data lies (as when a program creates files up front and
    // fills them later).
    const FILE: u64 = 16 << 20;
    const CHUNK: u64 = 1 << 20;
    const BATCH: usize = 64;
    let now = w.util();
    let free = free_bytes(&w.root).unwrap_or(0);
    let want = if now >= 100.0 {
        0
    } else {
        (free as f64 * ((target - now).max(0.0) / (100.0 - now)) / FILE as f64).ceil() as usize
    };
    let mut order: Vec<PathBuf> = Vec::with_capacity(want);
    for _ in 0..want {
        let d = dirs[w.rng.random_range(0..dirs.len())].clone();
        let path = d.join(format!("f{:08}", w.next));
        w.next += 1;
        File::create(&path)?;
        w.files.push(path.clone());
        order.push(path);
        w.budget.ops += 1;
    }
    order.shuffle(&mut w.rng);
    let mut full = false;
    'fill: for paths in order.chunks(BATCH) {
        if let Some(r) = w.budget.exhausted() {
            return Ok(r);
        }
        let mut batch: Vec<(File, u64)> = Vec::with_capacity(BATCH);
        for p in paths {
            batch.push((OpenOptions::new().write(true).open(p)?, 0));
        }
        let mut live: Vec<usize> = (0..batch.len()).collect();
        while !live.is_empty() {
            live.shuffle(&mut w.rng);
            for &k in &live {
                let (f, at) = &mut batch[k];
                match fallocate(f, 0, *at, CHUNK) {
                    Ok(()) => *at += CHUNK,
                    Err(e) if is_enospc(&e) => {
                        full = true;
                        break 'fill;
                    }
                    Err(e) => return Err(e.into()),
                }
                w.budget.ops += 1;
            }
            live.retain(|&k| batch[k].1 < FILE);
            if w.util() >= target {
                break 'fill;
            }
        }
    }
    // Punch [x + 4 KiB, x + 64 KiB) every 64 KiB: 4 KiB islands everywhere, files in a
    // random order.
    const STRIDE: u64 = 64 << 10;
    let mut files = w.files.clone();
    files.shuffle(&mut w.rng);
    for path in &files {
        let f = OpenOptions::new().write(true).open(path)?;
        let len = f.metadata()?.len();
        let mut off = 0;
        while off + STRIDE <= len {
            if let Some(r) = w.budget.exhausted() {
                return Ok(r);
            }
            fallocate(
                &f,
                libc::FALLOC_FL_PUNCH_HOLE | libc::FALLOC_FL_KEEP_SIZE,
                off + 4096,
                STRIDE - 4096,
            )?;
            w.budget.ops += 1;
            off += STRIDE;
        }
    }
    Ok(if full {
        "file system full; every large file punched".into()
    } else {
        "every large file punched".into()
    })
}

/// A file growing beside others: its open handle, its size so far and the size it grows to.
struct Grower {
    file: File,
    at: u64,
    until: u64,
}

/// How many files grow at once in the ffsck method.
const GROWERS: usize = 64;

fn ffsck_method(w: &mut Work, target: f64, groups: u32, rounds: u32) -> Result<String> {
    let dirs: Vec<PathBuf> = (0..groups.max(1))
        .map(|g| w.root.join(format!("grp{g:05}")))
        .collect();
    for d in &dirs {
        std::fs::create_dir_all(d)?;
    }
    // Sizes 4 KiB–2 MiB, log-uniform: mostly small files, as on real systems.
    let size =
        |rng: &mut ChaCha8Rng| (4096u64 << rng.random_range(0..10)) * rng.random_range(1..=2);
    let mut growers: Vec<Grower> = Vec::new();
    let mut k = 0usize;
    // Until 20 %: every group's directory gets files in turn.
    while w.util() < 20.0 {
        if let Some(r) = w.budget.exhausted() {
            return Ok(r);
        }
        let d = dirs[k % dirs.len()].clone();
        k += 1;
        if !step(ffsck_create(w, &d, &mut growers, size))? {
            return Ok("file system full".into());
        }
        if !step(ffsck_grow(w, &mut growers))? {
            return Ok("file system full".into());
        }
    }
    let mut n = 0u64;
    loop {
        // statvfs every 64 operations: the growing files add a few KiB each.
        if n.is_multiple_of(64) && w.util() >= target {
            break;
        }
        n += 1;
        if let Some(r) = w.budget.exhausted() {
            return Ok(r);
        }
        let choice = w.rng.random_range(0..100);
        let ok = if choice < 80 && growers.len() >= GROWERS / 2 {
            step(ffsck_grow(w, &mut growers))?
        } else if choice < 90 || w.files.is_empty() {
            let d = dirs[w.rng.random_range(0..dirs.len())].clone();
            step(ffsck_create(w, &d, &mut growers, size))?
        } else if choice < 94 {
            let k = w.rng.random_range(0..w.files.len());
            let p = w.files[k].clone();
            step(w.truncate_half(&p))?
        } else {
            let k = w.rng.random_range(0..w.files.len());
            step(w.delete(k))?
        };
        if !ok {
            return Ok("file system full".into());
        }
    }
    // Churn at the fill level: delete random files down to 5 points below it, refill with
    // new (growing) files that land in the holes, again and again.
    for round in 0..rounds {
        while w.util() > target - 5.0 && !w.files.is_empty() {
            if let Some(r) = w.budget.exhausted() {
                return Ok(r);
            }
            let k = w.rng.random_range(0..w.files.len());
            step(w.delete(k))?;
        }
        let mut n = 0u64;
        while !n.is_multiple_of(64) || w.util() < target {
            n += 1;
            if let Some(r) = w.budget.exhausted() {
                return Ok(r);
            }
            let ok = if w.rng.random_range(0..100) < 80 && growers.len() >= GROWERS / 2 {
                step(ffsck_grow(w, &mut growers))?
            } else {
                let d = dirs[w.rng.random_range(0..dirs.len())].clone();
                step(ffsck_create(w, &d, &mut growers, size))?
            };
            if !ok {
                return Ok(format!("file system full in churn round {round}"));
            }
        }
    }
    Ok(format!("{target}% in use after {rounds} churn rounds"))
}

/// A new file: half are written whole at once, half join the growing files.
fn ffsck_create(
    w: &mut Work,
    dir: &Path,
    growers: &mut Vec<Grower>,
    size: impl Fn(&mut ChaCha8Rng) -> u64,
) -> std::io::Result<()> {
    let bytes = size(&mut w.rng);
    if growers.len() >= GROWERS || w.rng.random_range(0..2) == 0 {
        return w.create(dir, bytes);
    }
    let first = 4096 * w.rng.random_range(1..=4u64);
    let file = w.create_open(dir, first.min(bytes))?;
    if bytes > first {
        growers.push(Grower {
            file,
            at: first,
            until: bytes,
        });
    }
    Ok(())
}

/// One growing file, picked at random, gets its next 4–16 KiB.
fn ffsck_grow(w: &mut Work, growers: &mut Vec<Grower>) -> std::io::Result<()> {
    if growers.is_empty() {
        return Ok(());
    }
    let k = w.rng.random_range(0..growers.len());
    let len = (4096 * w.rng.random_range(1..=4u64)).min(growers[k].until - growers[k].at);
    let g = &growers[k];
    let file = g.file.try_clone()?;
    let at = g.at;
    w.budget.ops += 1;
    w.allocate(&file, at, len)?;
    growers[k].at += len;
    if growers[k].at >= growers[k].until {
        growers.swap_remove(k);
    }
    Ok(())
}

fn git_replay(w: &mut Work, target: f64) -> Result<String> {
    // A source tree: 30 directories of ~40 files of 1–64 KiB, rewritten like checkouts do
    // (write a new file, rename it over the old one), with some files added and removed.
    let mut tree = Vec::new();
    for d in 0..30 {
        let dir = w.root.join(format!("src/mod{d:02}"));
        std::fs::create_dir_all(&dir)?;
        for f in 0..40 {
            tree.push(dir.join(format!("file{f:03}.rs")));
        }
    }
    let mut commit = 0u64;
    loop {
        for k in 0..tree.len() {
            if let Some(r) = w.budget.exhausted() {
                return Ok(r);
            }
            if w.util() >= target {
                return Ok(format!("{target}% in use after {commit} commits"));
            }
            // Commit 0 writes everything; later ones ~15 % of the files.
            if commit > 0 && w.rng.random_range(0..100) >= 15 {
                continue;
            }
            let path = tree[k].clone();
            let bytes = w.rng.random_range(1usize..=64) << 10;
            let tmp = path.with_extension("tmp");
            w.rng.fill(&mut w.buf[..bytes]);
            let r =
                std::fs::write(&tmp, &w.buf[..bytes]).and_then(|()| std::fs::rename(&tmp, &path));
            w.budget.ops += 1;
            if !step(r)? {
                return Ok("file system full".into());
            }
            // Sometimes a new file appears beside it (the tree grows).
            if commit > 0 && w.rng.random_range(0..10) == 0 {
                tree.push(path.with_extension(format!("{commit}.rs")));
            }
        }
        commit += 1;
    }
}

/// `struct fiemap` followed by room for `EXTENTS` `struct fiemap_extent`s.
#[repr(C)]
struct Fiemap {
    fm_start: u64,
    fm_length: u64,
    fm_flags: u32,
    fm_mapped_extents: u32,
    fm_extent_count: u32,
    fm_reserved: u32,
    extents: [FiemapExtent; EXTENTS],
}

#[repr(C)]
#[derive(Clone, Copy, Default)]
struct FiemapExtent {
    fe_logical: u64,
    fe_physical: u64,
    fe_length: u64,
    fe_reserved64: [u64; 2],
    fe_flags: u32,
    fe_reserved: [u32; 3],
}

const EXTENTS: usize = 256;
const FS_IOC_FIEMAP: libc::c_ulong = 0xC020_660B;
const FIEMAP_EXTENT_LAST: u32 = 0x1;

/// Physically contiguous runs of a file or directory (adjacent extents merged).
fn fragments(path: &Path) -> std::io::Result<u64> {
    let f = File::open(path)?;
    let mut runs = 0u64;
    let mut next_phys = u64::MAX;
    let mut start = 0u64;
    loop {
        let mut fm = Box::new(Fiemap {
            fm_start: start,
            fm_length: u64::MAX - start,
            fm_flags: 0,
            fm_mapped_extents: 0,
            fm_extent_count: EXTENTS as u32,
            fm_reserved: 0,
            extents: [FiemapExtent::default(); EXTENTS],
        });
        // SAFETY: `fm` is a correctly laid out fiemap buffer with `EXTENTS` slots.
        let r = unsafe { libc::ioctl(f.as_raw_fd(), FS_IOC_FIEMAP, &mut *fm as *mut Fiemap) };
        if r != 0 {
            return Err(std::io::Error::last_os_error());
        }
        let n = (fm.fm_mapped_extents as usize).min(EXTENTS);
        if n == 0 {
            return Ok(runs);
        }
        for e in &fm.extents[..n] {
            if e.fe_physical != next_phys {
                runs += 1;
            }
            next_phys = e.fe_physical + e.fe_length;
        }
        let last = fm.extents[n - 1];
        if last.fe_flags & FIEMAP_EXTENT_LAST != 0 {
            return Ok(runs);
        }
        start = last.fe_logical + last.fe_length;
    }
}

fn measure(root: &Path, grep_test: bool) -> Result<Fragmentation> {
    let mut files = Vec::new();
    let mut dirs = vec![root.to_path_buf()];
    let mut k = 0;
    while k < dirs.len() {
        for e in std::fs::read_dir(&dirs[k])? {
            let e = e?;
            let t = e.file_type()?;
            if t.is_dir() {
                dirs.push(e.path());
            } else if t.is_file() {
                files.push(e.path());
            }
        }
        k += 1;
    }
    let (mut nonempty, mut frag_sum, mut noncontig, mut max, mut bytes) = (0u64, 0, 0, 0, 0);
    for f in &files {
        let n = fragments(f)?;
        bytes += f.metadata()?.len();
        if n > 0 {
            nonempty += 1;
            frag_sum += n;
            max = max.max(n);
            noncontig += u64::from(n > 1);
        }
    }
    let (mut dir_sum, mut scattered, mut mapped) = (0u64, 0u64, 0u64);
    for d in &dirs {
        let n = match fragments(d) {
            Err(e) if e.raw_os_error() == Some(libc::EOPNOTSUPP) => continue,
            r => r?,
        };
        mapped += 1;
        dir_sum += n;
        scattered += u64::from(n > 1);
    }
    let (grep_test_s, cold) = if grep_test {
        grep(root, &files)?
    } else {
        (0.0, false)
    };
    let ratio = |a: u64, b: u64| if b == 0 { 0.0 } else { a as f64 / b as f64 };
    Ok(Fragmentation {
        files: files.len() as u64,
        file_bytes: bytes,
        mean_fragments_per_file: ratio(frag_sum, nonempty),
        max_fragments: max,
        noncontiguous_share: ratio(noncontig, nonempty),
        dirs: dirs.len() as u64,
        dirs_mapped: mapped,
        mean_fragments_per_dir: ratio(dir_sum, mapped),
        scattered_dir_share: ratio(scattered, mapped),
        grep_test_s,
        grep_test_cold: cold,
    })
}

/// The cold "grep test": seconds to read every file, and whether the cache could be dropped.
/// Only the aged file system (mounted at `root`) is flushed before the drop: see crate::cache.
fn grep(root: &Path, files: &[PathBuf]) -> Result<(f64, bool)> {
    crate::cache::syncfs(root).with_context(|| format!("syncfs {}", root.display()))?;
    let cold = std::fs::write("/proc/sys/vm/drop_caches", "3\n").is_ok();
    let started = Instant::now();
    let mut buf = vec![0u8; 1 << 20];
    for f in files {
        use std::io::Read;
        let mut h = File::open(f)?;
        while h.read(&mut buf)? > 0 {}
    }
    Ok((started.elapsed().as_secs_f64(), cold))
}

/// Ages the image and reports; fails with a clear message when it cannot be mounted.
pub fn run(args: &AgeArgs) -> Result<AgeReport> {
    if !args.image.is_file() {
        bail!("--image {} is not a file", args.image.display());
    }
    let is_xfs = crate::xfs::is_xfs(&args.image);
    // The ffsck method makes one directory per block group (allocation group on XFS).
    let groups = if is_xfs {
        let ags = crate::xfs::geometry(&args.image)?.ag_count;
        u32::try_from(ags).context("AG count")?
    } else {
        crate::corrupt::Image::open(&args.image)?.group_count()
    };
    // The ffsck method writes where it cannot fallocate (ext3): blocks are placed as written.
    let options = match args.method {
        Method::Ffsck if !is_xfs => "loop,nodelalloc",
        _ => "loop",
    };
    // ext3 (the ext4 driver in ext3 mode) refuses nodelalloc, and never delays allocation.
    let mount = match Mount::new(&args.image, options) {
        Err(_) if options != "loop" => Mount::new(&args.image, "loop")?,
        r => r?,
    };
    let target = args.until_util.unwrap_or(match args.method {
        Method::Roundhouse => 95.0,
        Method::Holepunch => 81.0,
        Method::Ffsck | Method::GitReplay => 90.0,
    });
    let mut rng = ChaCha8Rng::seed_from_u64(args.seed);
    let mut buf = vec![0u8; 2 << 20];
    rng.fill(&mut buf[..]);
    let root = mount.path().join(format!("aged-{}", args.seed));
    std::fs::create_dir_all(&root)?;
    let util_before = util(mount.path());
    let mut w = Work {
        root: root.clone(),
        rng,
        files: Vec::new(),
        next: 0,
        budget: Budget {
            started: Instant::now(),
            ops: 0,
            max_ops: args.ops,
            max_secs: args.secs,
        },
        buf,
        no_fallocate: false,
    };
    let stop_reason = match args.method {
        Method::Roundhouse => roundhouse(&mut w, target)?,
        Method::Holepunch => holepunch(&mut w, target)?,
        Method::Ffsck => ffsck_method(&mut w, target, groups, args.rounds)?,
        Method::GitReplay => git_replay(&mut w, target)?,
    };
    let seconds = w.budget.started.elapsed().as_secs_f64();
    let util_after = util(mount.path());
    let fragmentation = measure(mount.path(), !args.no_grep_test)?;
    mount.unmount()?;
    let xfs_frag = is_xfs
        .then(|| crate::xfs::frag_report(&args.image))
        .transpose()?;
    let report = AgeReport {
        image: args.image.clone(),
        method: args.method,
        seed: args.seed,
        ops: w.budget.ops,
        seconds,
        stop_reason,
        util_before,
        util_after,
        fragmentation,
        xfs_frag,
    };
    let path = args.report.clone().unwrap_or_else(|| {
        let mut p = args.image.as_os_str().to_owned();
        p.push(".age.json");
        PathBuf::from(p)
    });
    std::fs::write(&path, serde_json::to_string_pretty(&report)? + "\n")
        .with_context(|| format!("writing {}", path.display()))?;
    Ok(report)
}

/// CLI entry.
pub fn main(args: &AgeArgs) -> Result<()> {
    let r = run(args)?;
    let f = &r.fragmentation;
    println!(
        "aged {} ({:?}, seed {}): {} ops in {:.1} s ({}); {:.1}% → {:.1}% in use\n\
         files {}: {:.2} fragments/file (max {}), {:.1}% non-contiguous; dirs {} ({} mapped): \
         {:.2} fragments/dir, {:.1}% scattered; grep test {:.3} s ({})",
        r.image.display(),
        r.method,
        r.seed,
        r.ops,
        r.seconds,
        r.stop_reason,
        r.util_before,
        r.util_after,
        f.files,
        f.mean_fragments_per_file,
        f.max_fragments,
        100.0 * f.noncontiguous_share,
        f.dirs,
        f.dirs_mapped,
        f.mean_fragments_per_dir,
        100.0 * f.scattered_dir_share,
        f.grep_test_s,
        if f.grep_test_cold { "cold" } else { "warm" }
    );
    if let Some(frag) = &r.xfs_frag {
        println!("xfs_db frag: {frag}");
    }
    Ok(())
}
