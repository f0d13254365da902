//! `--io sequential` reads the metadata in sorted sweeps before the checks (issue 24): once
//! pass 1 starts checking, every block the check reads (extent tree blocks, indirect blocks
//! at every level, directory blocks, bitmaps) was read by a sweep already, so the checks
//! issue no scattered reads of their own. Images are built with mke2fs -d (skipped without
//! it) and checked in memory through a device that logs every read. Pass 1's progress counts
//! the sweeps, and every pass reaches its maximum.

mod common;

use std::path::Path;
use std::process::Command;
use std::sync::{Arc, Mutex};

use ffsck_check::{check, CheckOptions, Finding, Progress, Reporter};
use ffsck_io::device_kind::IoMode;
use ffsck_io::stream;
use ffsck_io::{Device, MemDevice};

/// A device that logs every read `(offset, len, by the stream's reader)`, in order, and the
/// check's progress `(pass, done, total)` as each read starts.
struct Logged {
    inner: MemDevice,
    reads: Mutex<Vec<(u64, u64, bool)>>,
    progress: Arc<Progress>,
    seen: Mutex<Vec<(u64, u64, u64)>>,
}

impl Logged {
    fn new(bytes: Vec<u8>) -> Self {
        Logged {
            inner: MemDevice::new(bytes),
            reads: Mutex::default(),
            progress: Arc::default(),
            seen: Mutex::default(),
        }
    }
}

impl Device for Logged {
    fn size(&self) -> u64 {
        self.inner.size()
    }
    fn read_at(&self, buf: &mut [u8], offset: u64) -> ffsck_io::Result<()> {
        let swept = std::thread::current().name() == Some(stream::READER_THREAD);
        let mut reads = self.reads.lock().unwrap();
        self.seen.lock().unwrap().push(self.progress.snapshot());
        reads.push((offset, buf.len() as u64, swept));
        drop(reads);
        self.inner.read_at(buf, offset)
    }
    fn write_at(&self, buf: &[u8], offset: u64) -> ffsck_io::Result<()> {
        self.inner.write_at(buf, offset)
    }
    fn flush(&self) -> ffsck_io::Result<()> {
        self.inner.flush()
    }
    fn bytes_read(&self) -> u64 {
        self.inner.bytes_read()
    }
}

struct Quiet;
impl Reporter for Quiet {
    fn finding(&mut self, f: &Finding) {
        eprintln!("{:?}: {}", f.problem, f.message().trim_end());
    }
}

fn mke2fs() -> Option<std::path::PathBuf> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .chain(["/sbin".into(), "/usr/sbin".into()])
        .map(|d| d.join("mke2fs"))
        .find(|p| p.exists())
}

/// A tree with what the sweeps must find: a sparse file (an extent tree with an index level
/// under ext4; indirect and double-indirect blocks under ext3), a directory of several
/// blocks, a slow symlink and small files.
fn tree(root: &Path) {
    let big = std::fs::File::create(root.join("sparse")).unwrap();
    use std::os::unix::fs::FileExt;
    for i in 0..40u64 {
        big.write_all_at(&[b'x'; 1024], i * 16 * 1024).unwrap();
    }
    std::fs::write(root.join("dense"), vec![b'y'; 600 * 1024]).unwrap();
    let d = root.join("wide");
    std::fs::create_dir(&d).unwrap();
    for i in 0..150 {
        std::fs::write(d.join(format!("entry-with-a-long-name-{i:04}")), b"z").unwrap();
    }
    std::os::unix::fs::symlink("t".repeat(200), root.join("slow-link")).unwrap();
}

fn u32_at(b: &[u8], at: usize) -> u64 {
    u64::from(u32::from_le_bytes(b[at..at + 4].try_into().unwrap()))
}

/// An image of `tree` made by mke2fs -d; `None` (skipped) without mke2fs.
fn tree_image(fs_type: &str, extra: &[&str]) -> Option<Vec<u8>> {
    let Some(mke2fs) = mke2fs() else {
        common::skip("SKIPPED: mke2fs not installed");
        return None;
    };
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("tree");
    std::fs::create_dir(&src).unwrap();
    tree(&src);
    let img = dir.path().join("img");
    let st = Command::new(mke2fs)
        .args(["-q", "-F", "-t", fs_type, "-b", "1024"])
        .args(extra)
        .arg("-d")
        .arg(&src)
        .arg(&img)
        .arg("8M")
        .status()
        .unwrap();
    assert!(st.success(), "mke2fs failed");
    Some(std::fs::read(&img).unwrap())
}

/// Check `bytes` with `--io sequential` on `threads` threads; assert that every block the
/// checks read after the first sweep was swept first, and return the reads the stream's
/// readers made, sorted (their interleaving across concurrent sweeps is timing).
fn sweeps_cover_checks(fs_type: &str, bytes: Vec<u8>, threads: usize) -> Vec<(u64, u64)> {
    let bs = 1024u64 << u32_at(&bytes, 1024 + 24);
    let dev = Arc::new(Logged::new(bytes));
    let mut opts = CheckOptions {
        threads,
        ..CheckOptions::default()
    };
    opts.tuning.io = IoMode::Sequential;
    let out = check(dev.clone(), &opts, &mut Quiet);
    assert_eq!(out.exit_code, 0, "the built image is clean");
    let reads = dev.reads.lock().unwrap().clone();
    let blocks = |(off, len, _): (u64, u64, bool)| off / bs..(off + len).div_ceil(bs);
    // Pass 0 reads on its own, before the first sweep; from then on, every block a check
    // reads was read by a sweep (the stream's reader thread) first.
    let first = reads
        .iter()
        .position(|r| r.2)
        .expect("the sweeps read through the stream");
    let mut swept = std::collections::BTreeSet::new();
    let mut missed = std::collections::BTreeSet::new();
    for &r in &reads[first..] {
        if r.2 {
            swept.extend(blocks(r));
        } else {
            missed.extend(blocks(r).filter(|b| !swept.contains(b)));
        }
    }
    assert!(
        missed.is_empty(),
        "{fs_type}: the checks read blocks no sweep read first: {missed:?}"
    );
    // The sweeps read the tree and directory blocks: more than the inode tables and bitmaps.
    assert!(
        swept.len() > 40,
        "{fs_type}: only {} blocks swept",
        swept.len()
    );
    let mut streamed: Vec<(u64, u64)> = reads
        .iter()
        .filter(|r| r.2)
        .map(|&(off, len, _)| (off, len))
        .collect();
    streamed.sort_unstable();
    streamed
}

#[test]
fn ext4_extent_trees_and_directories_are_swept_first() {
    if let Some(img) = tree_image("ext4", &[]) {
        sweeps_cover_checks("ext4", img, 2);
    }
}

#[test]
fn ext3_indirect_blocks_are_swept_first() {
    if let Some(img) = tree_image("ext3", &[]) {
        sweeps_cover_checks("ext3", img, 2);
    }
}

/// The number of threads changes no read the sweeps make (issue 24: more threads must never
/// cost a hard disk more): with 1, 2 and 4 threads the stream's readers read the same
/// requests, each as often, and the checks still read nothing unswept. (Traced on a disk,
/// `ffsck-lab hdd`, the request sequences come out with the same seeks.)
#[test]
fn the_sweeps_read_the_same_requests_on_any_number_of_threads() {
    for fs_type in ["ext4", "ext3"] {
        let Some(img) = tree_image(fs_type, &[]) else {
            return;
        };
        let one = sweeps_cover_checks(fs_type, img.clone(), 1);
        for threads in [2, 4] {
            let more = sweeps_cover_checks(fs_type, img.clone(), threads);
            assert_eq!(one, more, "{fs_type}: 1 thread against {threads}");
        }
    }
}

/// Pass 0 compares the primary superblock with the backups; when the first backup agrees
/// with it, nothing can differ, and the others are not read (on a hard disk each is a seek
/// across the disk: 11 of them on a 16 GiB file system).
#[test]
fn backups_agreeing_with_the_primary_cost_one_read() {
    let Some(mke2fs) = mke2fs() else {
        common::skip("SKIPPED: mke2fs not installed");
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let img = dir.path().join("img");
    let st = Command::new(mke2fs)
        .args(["-q", "-F", "-t", "ext4", "-b", "1024"])
        .arg(&img)
        .arg("64M")
        .status()
        .unwrap();
    assert!(st.success(), "mke2fs failed");
    let bytes = std::fs::read(&img).unwrap();
    let sb = &bytes[1024..2048];
    let bs = 1024u64 << u32_at(sb, 24);
    let (blocks, first, per_group) = (u32_at(sb, 4), u32_at(sb, 20), u32_at(sb, 32));
    let dev = Arc::new(Logged::new(bytes));
    let mut opts = CheckOptions {
        threads: 1,
        ..CheckOptions::default()
    };
    opts.tuning.io = IoMode::Sequential;
    let out = check(dev.clone(), &opts, &mut Quiet);
    assert_eq!(out.exit_code, 0, "the built image is clean");
    let groups = (blocks - first).div_ceil(per_group);
    assert!(groups >= 8, "{groups} groups: too few backups to tell");
    // sparse_super: backups in group 1 and the powers of 3, 5 and 7.
    let has_backup = |g: u64| {
        g == 1
            || [3u64, 5, 7].iter().any(|&b| {
                let mut p = b;
                while p < g {
                    p *= b;
                }
                p == g
            })
    };
    let backup_offsets: Vec<u64> = (1..groups)
        .filter(|&g| has_backup(g))
        .map(|g| (first + g * per_group) * bs)
        .collect();
    let reads = dev.reads.lock().unwrap().clone();
    let backup_reads = reads
        .iter()
        .filter(|(off, len, swept)| !swept && *len <= 4096 && backup_offsets.contains(off))
        .count();
    let which: Vec<_> = reads
        .iter()
        .enumerate()
        .filter(|(_, (off, _, _))| backup_offsets.contains(off))
        .collect();
    assert_eq!(backup_reads, 1, "backup superblocks read: {which:?}");
}

/// The progress of each pass as the next one starts (and of the last, at the end).
#[derive(Default)]
struct Passes {
    progress: Arc<Progress>,
    ends: Vec<(u64, u64, u64)>,
}

impl Reporter for Passes {
    fn pass_start(&mut self, pass: u8) {
        if pass > 1 {
            self.ends.push(self.progress.snapshot());
        }
    }
    fn finding(&mut self, f: &Finding) {
        eprintln!("{:?}: {}", f.problem, f.message().trim_end());
    }
}

/// `-C` and the bar follow the progress counters: with `--io sequential` pass 1 advances while
/// the sweeps read (on a hard disk most of the pass), not only while the groups are checked
/// once the sweeps are over; and every pass ends at its maximum (passes 3 to 5 counting as
/// e2fsck counts: directories, groups, twice the groups).
#[test]
fn progress_moves_during_the_sweeps_and_every_pass_reaches_its_maximum() {
    let Some(mke2fs) = mke2fs() else {
        common::skip("SKIPPED: mke2fs not installed");
        return;
    };
    for io in [IoMode::Sequential, IoMode::Parallel] {
        let dir = tempfile::tempdir().unwrap();
        let src = dir.path().join("tree");
        std::fs::create_dir(&src).unwrap();
        tree(&src);
        let img = dir.path().join("img");
        // Small groups: several inode tables to sweep.
        let st = Command::new(&mke2fs)
            .args([
                "-q", "-F", "-t", "ext4", "-b", "1024", "-g", "2048", "-N", "512",
            ])
            .arg("-d")
            .arg(&src)
            .arg(&img)
            .arg("8M")
            .status()
            .unwrap();
        assert!(st.success(), "mke2fs failed");
        let bytes = std::fs::read(&img).unwrap();
        let groups = (u32_at(&bytes, 1024 + 4) - u32_at(&bytes, 1024 + 20))
            .div_ceil(u32_at(&bytes, 1024 + 32));
        assert!(groups >= 4, "{groups} groups");
        let dev = Arc::new(Logged::new(bytes));
        let mut opts = CheckOptions {
            threads: 2,
            ..CheckOptions::default()
        };
        opts.tuning.io = io;
        opts.progress = dev.progress.clone();
        let mut rep = Passes {
            progress: dev.progress.clone(),
            ..Passes::default()
        };
        let out = check(dev.clone(), &opts, &mut rep);
        assert_eq!(out.exit_code, 0, "the built image is clean");
        rep.ends.push(dev.progress.snapshot());
        let passes: Vec<u64> = rep.ends.iter().map(|e| e.0).collect();
        assert_eq!(passes, [1, 2, 3, 4, 5], "{io:?}: {:?}", rep.ends);
        for &(pass, done, total) in &rep.ends {
            assert!(total > 0, "{io:?}: pass {pass} has no maximum");
            assert_eq!(
                done, total,
                "{io:?}: pass {pass} ended at {done} of {total}"
            );
        }
        let dirs = dev.progress.total_of(3);
        assert!(dirs >= 3, "{io:?}: pass 3 counts {dirs} directories");
        assert_eq!(dev.progress.total_of(4), groups);
        assert_eq!(dev.progress.total_of(5), 2 * groups);
        if io != IoMode::Sequential {
            assert_eq!(dev.progress.total_of(1), groups);
            continue;
        }
        // The scan reads the inode tables a second time (from the cache on a real disk),
        // once the sweeps of the tables and of the tree blocks are over: by then pass 1's
        // count has moved by at least half of its maximum.
        let reads = dev.reads.lock().unwrap().clone();
        let seen = dev.seen.lock().unwrap().clone();
        let bs = 1024u64;
        let table0 = u64::from(u32::from_le_bytes(
            std::fs::read(&img).unwrap()[2048 + 8..2048 + 12]
                .try_into()
                .unwrap(),
        )) * bs;
        let second = reads
            .iter()
            .enumerate()
            .filter(|(_, r)| r.2 && r.0 <= table0 && table0 < r.0 + r.1)
            .map(|(i, _)| i)
            .nth(1)
            .expect("the scan reads the first inode table through the stream");
        let (pass, done, total) = seen[second];
        assert_eq!(pass, 1);
        assert!(
            2 * done >= total && done < total,
            "pass 1 at {done} of {total} when the sweeps end"
        );
    }
}
