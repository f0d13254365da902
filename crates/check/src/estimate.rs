//! Predicts how long `ffsck -fn` will take before running it, from the superblock, the group
//! descriptors and a small timed sample of inode tables and directory blocks.
//!
//! The model: every pass costs the time to read its metadata (bytes over the sampled
//! sequential rate, plus a per-read latency for scattered blocks) and a CPU cost per inode,
//! directory block, directory entry or group. When the sampled metadata is in the page cache
//! the two add up (reading is copying, on the same cores); when it is on the device, the
//! sample is read the way the check reads, with read-ahead hints for the whole batch first,
//! and a pass takes the longer of its I/O and its CPU, which overlap. The per-unit CPU costs
//! are in "reference cores" (one that runs the calibration loop at `REF_CALIBRATION_RATE`),
//! fitted to the per-pass times (`-tt`) of the `ffsck-lab bench` profiles (files, dirs, ext3,
//! 1 000 000 inodes, warm cache; the directory costs refitted on a second, faster machine); a
//! short calibration loop on the threads the check will use scales them to the CPU this
//! machine offers right now (other load, steal, `SCHED_IDLE`, clock speed: a core faster than
//! the reference counts for more than one), which the load average reports too late and too
//! coarsely. The same per-pass predictions weight the `-C 0` progress bar, so its ETA follows
//! the model rather than fixed shares.
//!
//! Nothing here trusts the descriptors: counts are clamped to the geometry, so a hostile image
//! gives a wrong estimate, never a panic or a huge read.

use crate::pass0::read_descs;
use crate::superblock::read_super_at;
use ffsck_format::extent::Node;
use ffsck_format::inode::{flags as iflags, FileType, RawInode};
use ffsck_format::{group::BG_INODE_UNINIT, Geometry, Incompat, RoCompat};
use ffsck_io::Device;
use std::time::Instant;

/// Pass 1 CPU per scanned in-use inode (checks, extent root, bitmaps), seconds, and the extra
/// for verifying its checksum (`metadata_csum`).
const CPU_INODE_P1: f64 = 0.085e-6;
const CPU_INODE_CSUM: f64 = 0.065e-6;
/// Pass 1 CPU per directory inode on top of that (its facts and block list for pass 2).
const CPU_DIR_P1: f64 = 0.18e-6;
/// Pass 1 CPU per scanned but unused inode slot (a zero test).
const CPU_SLOT_P1: f64 = 0.01e-6;
/// Pass 1 CPU per extent-tree, indirect or xattr block it reads.
const CPU_TREE_BLOCK: f64 = 1.0e-6;
/// Pass 2 CPU per directory block (framing, checksum, lookups), without the read.
const CPU_DIR_BLOCK: f64 = 0.45e-6;
/// Pass 2 CPU per directory entry.
const CPU_ENTRY: f64 = 0.06e-6;
/// Pass 3 CPU per directory (parent walk, on one thread) and pass 4 per directory plus per
/// inode slot (in parallel).
const CPU_DIR_P3: f64 = 0.015e-6;
const CPU_DIR_P4: f64 = 0.02e-6;
const CPU_SLOT_P4: f64 = 0.005e-6;
/// Pass 5 CPU per block and per inode slot compared against the on-disk bitmaps (64 at a
/// time, groups in parallel).
const CPU_BLOCK_P5: f64 = 0.001e-6;
const CPU_SLOT_P5: f64 = 0.001e-6;
/// Bytes of one pass-1 inode-table read.
const ITABLE_CHUNK: u64 = 128 * 1024;
/// Bytes of each group's inode table sampled off the device: large enough that the batch
/// streams as pass 1's hinted reads do.
const DEVICE_ITABLE_SAMPLE: u64 = 512 * 1024;
/// Groups whose inode tables are sampled.
const SAMPLE_GROUPS: u32 = 16;
/// Directory blocks read one at a time (one per sampled directory) to time scattered reads
/// from the page cache.
const SAMPLE_DIR_READS: usize = 32;
/// Off the device, the first blocks of all sampled directories up to this many bytes are
/// hinted and read as one batch: the device's speed depends on how many reads are
/// outstanding and how close together they lie, as in pass 2's windows.
const SAMPLE_DIR_BYTES: u64 = 16 << 20;
/// Inodes per second the calibration loop handles on one idle core of the machine the CPU
/// costs were measured on (the best of repeated runs).
const REF_CALIBRATION_RATE: f64 = 20e6;
/// How long one calibration round runs, and how many rounds. Their mean counts: a check
/// lasts longer than a round, and gets the CPU the machine offers on average over its run,
/// bursts of other work included. (Short rounds on fresh threads read low on a busy machine:
/// the scheduler makes new threads wait their turn.)
const CALIBRATION: std::time::Duration = std::time::Duration::from_millis(80);
const CALIBRATION_ROUNDS: usize = 1;
/// Bounds on the measured I/O figures, so a sample of a few reads cannot predict nonsense.
const MIN_RATE: f64 = 20e6;
const MAX_RATE: f64 = 20e9;
const MIN_LATENCY: f64 = 0.1e-6;
const MAX_LATENCY: f64 = 20e-3;
/// A sampled sequential rate at least this high means the reads come from the page cache (or
/// from a device that serves parallel requests as fast): then the worker threads' reads of
/// the inode tables overlap, each thread copying its own groups, instead of waiting on one
/// device in turn. Copies on N threads at once go about N^`PARALLEL_READ_EXP` times as fast as
/// one (the bench's page-cache copy ceiling: 1.73-1.90x on two cores).
const PARALLEL_READ_RATE: f64 = 2e9;
const PARALLEL_READ_EXP: f64 = 0.85;

/// What the model predicts for one run.
#[derive(Clone, Debug, Default)]
pub struct Estimate {
    /// Predicted wall-clock seconds of passes 1 to 5 (index 0 is pass 0, the open).
    pub pass_secs: [f64; 6],
    /// Bytes of metadata the check will read.
    pub metadata_bytes: u64,
    pub inodes_used: u64,
    pub dirs: u64,
    pub dir_blocks: u64,
    pub tree_blocks: u64,
    /// Sequential read rate (bytes per second) and scattered-read latency (seconds) measured.
    pub read_rate: f64,
    pub read_latency: f64,
    /// The sample came from the device, not the page cache (and was timed with hints).
    pub from_device: bool,
    /// Threads the check will use.
    pub threads: usize,
    /// Reference-core equivalents those threads get now (from the calibration loop).
    pub parallelism: f64,
    /// Inodes per second the calibration loop reached on those threads.
    pub calibration_rate: f64,
    /// Inode slots and directories sampled.
    pub sampled_inodes: u64,
    pub sampled_dirs: u64,
}

impl Estimate {
    pub fn total_secs(&self) -> f64 {
        self.pass_secs.iter().sum()
    }
}

/// What the sample of inode tables found, per in-use inode.
#[derive(Default)]
struct Sample {
    slots: u64,
    used: u64,
    dirs: u64,
    dir_blocks: u64,
    /// Extent index/leaf blocks, indirect blocks and xattr blocks.
    tree_blocks: u64,
    /// Bytes per second of each timed inode-table read.
    rates: Vec<f64>,
    /// The sampled inode tables were mostly not in the page cache: then they were hinted as
    /// one batch and `rates` holds the batch's rate alone.
    from_device: bool,
    /// First block of some sampled directories, read later to time scattered reads.
    dir_probe: Vec<u64>,
    /// One sampled inode-table chunk, the calibration loop's input.
    itable: Vec<u8>,
}

/// Estimate the run time of `ffsck -fn` on `dev` with `threads` worker threads (0 = one per
/// core), as the check would run now.
pub fn estimate(dev: &dyn Device, threads: usize) -> Result<Estimate, String> {
    let sb = read_super_at(dev, 1024).ok_or("cannot read the superblock")?;
    let geo = Geometry::new(&sb).map_err(|e| e.to_string())?;
    let gds = read_descs(dev, &geo, 0).ok_or("cannot read the group descriptors")?;
    let bs = u64::from(geo.block_size);
    let isz = u64::from(geo.inode_size);
    let ipg = geo.inodes_per_group;
    let group_csum = sb.has_group_csum();

    // Inode slots pass 1 will scan, group by group (the same rule as `Fs::scannable_inodes`,
    // trusting the descriptors as a clean file system allows).
    let scannable: Vec<u32> = gds
        .iter()
        .map(|gd| {
            if !group_csum {
                ipg
            } else if gd.flags() & BG_INODE_UNINIT != 0 {
                0
            } else {
                ipg.saturating_sub(gd.itable_unused())
            }
        })
        .collect();
    let slots: u64 = scannable.iter().map(|&s| u64::from(s)).sum();
    let itable_bytes: u64 = scannable
        .iter()
        .map(|&s| (u64::from(s) * isz).div_ceil(bs) * bs)
        .sum();
    let itable_reads: u64 = scannable
        .iter()
        .map(|&s| (u64::from(s) * isz).div_ceil(ITABLE_CHUNK))
        .sum();
    let inodes_count = u64::from(geo.inodes_count);
    let inodes_used = inodes_count
        .saturating_sub(u64::from(sb.s_free_inodes_count.get()))
        .min(slots.max(1));
    let dirs: u64 = gds
        .iter()
        .map(|gd| u64::from(gd.used_dirs_count().min(ipg)))
        .sum::<u64>()
        .clamp(1, inodes_used.max(1));

    let mut s = sample(dev, &geo, &gds, &scannable);
    // Scale the sample to the whole file system; with nothing sampled, assume one block per
    // directory and no tree blocks.
    let dir_blocks = if s.dirs > 0 {
        ((s.dir_blocks as f64 / s.dirs as f64) * dirs as f64).round() as u64
    } else {
        dirs
    }
    .max(dirs);
    let tree_blocks = if s.used > 0 {
        ((s.tree_blocks as f64 / s.used as f64) * inodes_used as f64).round() as u64
    } else {
        0
    };
    // Upper quartile of the rates and lower quartile of the latencies: a read that waited for a
    // CPU rather than the device must not count as slow I/O (the calibration covers the CPU).
    let read_rate = quantile(&mut s.rates, 0.75)
        .unwrap_or(MAX_RATE)
        .clamp(MIN_RATE, MAX_RATE);
    let read_latency =
        probe_latency(dev, bs, &s.dir_probe, s.from_device).clamp(MIN_LATENCY, MAX_LATENCY);

    let threads = if threads == 0 {
        std::thread::available_parallelism().map_or(1, |n| n.get())
    } else {
        threads
    };
    let rate = calibrate(&s.itable, geo.inode_size as usize, threads);
    // Reference cores' worth of CPU the worker threads get together, and one thread alone
    // (a core faster than the reference counts for more than one).
    let par = (rate / REF_CALIBRATION_RATE).clamp(0.01, 4.0 * threads as f64);
    let serial = par / threads as f64;
    let groups = u64::from(geo.group_count);
    let bitmap_bytes = 2 * groups * bs;
    let entries = inodes_used + 2 * dirs;
    let f = |x: u64| x as f64;
    let cpu_inode = if sb.has_metadata_csum() {
        CPU_INODE_P1 + CPU_INODE_CSUM
    } else {
        CPU_INODE_P1
    };

    let mut pass_secs = [0.0; 6];
    let cpu_p1 = (f(inodes_used) * cpu_inode
        + f(dirs) * CPU_DIR_P1
        + f(slots.saturating_sub(inodes_used)) * CPU_SLOT_P1
        + f(tree_blocks) * CPU_TREE_BLOCK)
        / par;
    let cpu_p2 = (f(dir_blocks) * CPU_DIR_BLOCK + f(entries) * CPU_ENTRY) / par;
    if s.from_device {
        // The check hints its reads ahead and works on earlier blocks meanwhile: each pass
        // waits for the device or for the CPU, whichever is slower. The latency was measured
        // the same way, over a hinted batch of scattered directory blocks.
        pass_secs[1] = (f(itable_bytes) / read_rate + f(tree_blocks) * read_latency).max(cpu_p1);
        // Directory blocks close together stream at the device's rate, scattered ones cost a
        // (hinted) read each: whichever bound is higher.
        pass_secs[2] = (f(dir_blocks) * read_latency)
            .max(f(dir_blocks * bs) / read_rate)
            .max(cpu_p2);
    } else {
        // Pass 1: inode tables in large reads, tree blocks one by one, inodes checked in
        // parallel.
        let read_par = if read_rate >= PARALLEL_READ_RATE {
            (threads as f64).powf(PARALLEL_READ_EXP)
        } else {
            1.0
        };
        pass_secs[1] = f(itable_bytes) / (read_rate * read_par)
            + (f(itable_reads) + f(tree_blocks)) * read_latency / par
            + cpu_p1;
        // Pass 2: one read per directory block, each costing the probed single-block latency.
        pass_secs[2] = f(dir_blocks) * read_latency / par + cpu_p2;
    }
    pass_secs[3] = f(dirs) * CPU_DIR_P3 / serial;
    pass_secs[4] = (f(dirs) * CPU_DIR_P4 + f(inodes_count) * CPU_SLOT_P4) / par;
    pass_secs[5] = f(bitmap_bytes) / read_rate
        + f(2 * groups) * read_latency
        + (f(geo.blocks_count) * CPU_BLOCK_P5 + f(inodes_count) * CPU_SLOT_P5) / par;
    let gdt_bytes = u64::from(geo.gdt_blocks) * bs;
    pass_secs[0] = f(gdt_bytes) / read_rate + read_latency;

    Ok(Estimate {
        pass_secs,
        metadata_bytes: 1024
            + gdt_bytes
            + itable_bytes
            + tree_blocks * bs
            + dir_blocks * bs
            + bitmap_bytes,
        inodes_used,
        dirs,
        dir_blocks,
        tree_blocks,
        read_rate,
        read_latency,
        from_device: s.from_device,
        threads,
        parallelism: par,
        calibration_rate: rate,
        sampled_inodes: s.slots,
        sampled_dirs: s.dirs,
    })
}

/// Read the start of the inode tables of up to `SAMPLE_GROUPS` groups spread over the file
/// system, timing the reads and counting what the in-use inodes hold.
fn sample(
    dev: &dyn Device,
    geo: &Geometry,
    gds: &[ffsck_format::RawGroupDesc],
    scannable: &[u32],
) -> Sample {
    let mut s = Sample::default();
    let bs = u64::from(geo.block_size);
    let isz = geo.inode_size as usize;
    let live: Vec<usize> = (0..scannable.len()).filter(|&g| scannable[g] > 0).collect();
    if live.is_empty() || isz == 0 {
        return s;
    }
    let n = (SAMPLE_GROUPS as usize).min(live.len());
    let extents = geo.incompat.has(Incompat::EXTENTS);
    let huge = geo.ro_compat.has(RoCompat::HUGE_FILE);
    let ptrs_per_block = bs / 4;
    let regions_of = |chunk: u64| -> Vec<(u64, usize)> {
        (0..n)
            .filter_map(|i| {
                let g = live[i * live.len() / n];
                let bytes = (u64::from(scannable[g]) * isz as u64).min(chunk) as usize;
                Some((gds[g].inode_table().checked_mul(bs)?, bytes))
            })
            .collect()
    };
    let mut regions = regions_of(ITABLE_CHUNK);
    // Off the device, the check's reads are hinted ahead and outstanding together: time the
    // sample that way too, as one larger batch.
    let cached = regions
        .iter()
        .filter(|&&(off, _)| dev.is_cached(off) != Some(false))
        .count();
    s.from_device = cached * 2 < regions.len();
    if s.from_device {
        regions = regions_of(DEVICE_ITABLE_SAMPLE);
    }
    // Everything is read before any of it is parsed, into buffers written beforehand (so no
    // page fault is timed), and the batch's time, hints included, is the device's.
    let mut tables: Vec<Vec<u8>> = regions.iter().map(|&(_, bytes)| vec![1u8; bytes]).collect();
    let batch_start = Instant::now();
    if s.from_device {
        let ranges: Vec<(u64, u64)> = regions.iter().map(|&(o, b)| (o, b as u64)).collect();
        dev.will_need(&ranges);
    }
    for (&(off, bytes), buf) in regions.iter().zip(&mut tables) {
        let t = Instant::now();
        if dev.read_at(buf, off).is_err() {
            // Left out below.
            buf.clear();
            continue;
        }
        let secs = t.elapsed().as_secs_f64();
        if secs > 0.0 && !s.from_device {
            s.rates.push(bytes as f64 / secs);
        }
    }
    let batch_secs = batch_start.elapsed().as_secs_f64();
    tables.retain(|t| !t.is_empty());
    let batch_bytes: usize = tables.iter().map(Vec::len).sum();
    if s.from_device && batch_secs > 0.0 && batch_bytes > 0 {
        s.rates.push(batch_bytes as f64 / batch_secs);
    }
    for buf in &tables {
        for raw in buf.chunks_exact(isz) {
            s.slots += 1;
            let inode = RawInode::parse(raw);
            if inode.links_count() == 0 || inode.dtime() != 0 || inode.mode() == 0 {
                continue;
            }
            s.used += 1;
            if inode.file_acl(geo.sixty_four_bit()) != 0 {
                s.tree_blocks += 1;
            }
            let fl = inode.flags();
            if fl & iflags::INLINE_DATA != 0 {
                continue;
            }
            let ft = inode.file_type();
            let mut blocks = inode.blocks_raw(huge) * 512 / bs;
            if ft == FileType::Directory {
                s.dirs += 1;
                s.dir_blocks += inode.size().div_ceil(bs).min(blocks.max(1));
                if (s.dir_probe.len() as u64) < SAMPLE_DIR_BYTES / bs {
                    if let Some(b) = first_block(&inode, bs) {
                        s.dir_probe.push(b);
                    }
                }
            }
            if !matches!(
                ft,
                FileType::Directory | FileType::Regular | FileType::Symlink
            ) {
                continue;
            }
            if extents && fl & iflags::EXTENTS != 0 {
                // Blocks below the in-inode root: its entries at depth 1, more deeper down.
                if let Ok(root) = Node::parse(&inode.block_bytes()) {
                    if root.depth() > 0 {
                        s.tree_blocks += root.len() as u64 * u64::from(root.depth());
                    }
                }
            } else if blocks > 12 {
                // Indirect blocks: one single, then one double with its children, and so on.
                blocks -= 12;
                let single = 1;
                let double = if blocks > ptrs_per_block {
                    1 + (blocks - ptrs_per_block).div_ceil(ptrs_per_block)
                } else {
                    0
                };
                s.tree_blocks += single + double;
            }
        }
    }
    s.itable = tables.into_iter().next().unwrap_or_default();
    s
}

/// Inodes per second that `threads` threads together parse and checksum in a short loop over
/// `itable`: a stand-in for pass 1's per-inode work, run on the CPU as it is now.
fn calibrate(itable: &[u8], inode_size: usize, threads: usize) -> f64 {
    let rates: Vec<f64> = (0..CALIBRATION_ROUNDS)
        .map(|_| calibration_round(itable, inode_size, threads))
        .collect();
    rates.iter().sum::<f64>() / rates.len().max(1) as f64
}

fn calibration_round(itable: &[u8], inode_size: usize, threads: usize) -> f64 {
    let fallback;
    let (data, isz) = if itable.len() >= inode_size && inode_size >= 128 {
        (itable, inode_size)
    } else {
        fallback = vec![0u8; 64 * 256];
        (&fallback[..], 256)
    };
    let start = Instant::now();
    let done: u64 = std::thread::scope(|sc| {
        let workers: Vec<_> = (0..threads.max(1))
            .map(|_| {
                sc.spawn(|| {
                    let mut n = 0u64;
                    let mut acc = 0u64;
                    while start.elapsed() < CALIBRATION {
                        for raw in data.chunks_exact(isz) {
                            let inode = RawInode::parse(raw);
                            let sum = ffsck_format::csum::ext4_crc32c(acc as u32, raw);
                            acc = acc
                                .wrapping_add(u64::from(sum))
                                .wrapping_add(inode.size())
                                .wrapping_add(u64::from(inode.links_count()));
                            n += 1;
                        }
                    }
                    std::hint::black_box(acc);
                    n
                })
            })
            .collect();
        workers.into_iter().map(|w| w.join().unwrap_or(0)).sum()
    });
    let secs = start.elapsed().as_secs_f64();
    if secs > 0.0 {
        done as f64 / secs
    } else {
        REF_CALIBRATION_RATE
    }
}

/// The first data block of a directory (extent or block-mapped), if cheap to find.
fn first_block(inode: &RawInode, bs: u64) -> Option<u64> {
    let ib = inode.block_bytes();
    let b = if inode.flags() & iflags::EXTENTS != 0 {
        let root = Node::parse(&ib).ok()?;
        if !root.is_leaf() || root.is_empty() {
            return None;
        }
        root.extent(0).start()
    } else {
        u64::from(u32::from_le_bytes([ib[0], ib[1], ib[2], ib[3]]))
    };
    (b != 0 && b.checked_mul(bs).is_some()).then_some(b)
}

/// Time per single-block read at `blocks` (directory blocks pass 2 will read): the lower
/// quartile of reads one at a time, or with `batch` (off the device), the mean over the whole
/// set hinted at once and read in block order, as pass 2 reads.
fn probe_latency(dev: &dyn Device, bs: u64, blocks: &[u64], batch: bool) -> f64 {
    let mut buf = vec![0u8; bs as usize];
    let mut offsets: Vec<u64> = blocks.iter().filter_map(|&b| b.checked_mul(bs)).collect();
    if !batch {
        offsets.truncate(SAMPLE_DIR_READS);
    } else {
        offsets.sort_unstable();
        let ranges: Vec<(u64, u64)> = offsets.iter().map(|&o| (o, bs)).collect();
        dev.will_need(&ranges);
        let t = Instant::now();
        let read = offsets
            .iter()
            .filter(|&&o| dev.read_at(&mut buf, o).is_ok())
            .count();
        return if read > 0 {
            t.elapsed().as_secs_f64() / read as f64
        } else {
            MIN_LATENCY
        };
    }
    let mut times: Vec<f64> = offsets
        .iter()
        .filter_map(|&o| {
            let t = Instant::now();
            dev.read_at(&mut buf, o).ok()?;
            Some(t.elapsed().as_secs_f64())
        })
        .collect();
    quantile(&mut times, 0.25).unwrap_or(MIN_LATENCY)
}

fn quantile(v: &mut [f64], q: f64) -> Option<f64> {
    v.sort_by(f64::total_cmp);
    let i = ((v.len().saturating_sub(1)) as f64 * q).round() as usize;
    v.get(i).copied()
}
