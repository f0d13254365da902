//! `--io sequential` reads the metadata in sorted sweeps before the checks (issue 24): once
//! pass 1 starts checking, every block the check reads (extent tree blocks, indirect blocks
//! at every level, directory blocks, bitmaps) was read by a sweep already, so the checks
//! issue no scattered reads of their own. Images are built with mke2fs -d (skipped without
//! it) and checked in memory through a device that logs every read.

mod common;

use std::path::Path;
use std::process::Command;
use std::sync::{Arc, Mutex};

use ffsck_check::{check, CheckOptions, Finding, Reporter};
use ffsck_io::device_kind::IoMode;
use ffsck_io::stream;
use ffsck_io::{Device, MemDevice};

/// A device that logs every read `(offset, len, by the stream's reader)`, in order.
struct Logged {
    inner: MemDevice,
    reads: Mutex<Vec<(u64, u64, bool)>>,
}

impl Device for Logged {
    fn size(&self) -> u64 {
        self.inner.size()
    }
    fn read_at(&self, buf: &mut [u8], offset: u64) -> ffsck_io::Result<()> {
        let swept = std::thread::current().name() == Some(stream::READER_THREAD);
        self.reads
            .lock()
            .unwrap()
            .push((offset, buf.len() as u64, swept));
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

fn sweeps_cover_checks(fs_type: &str, extra: &[&str]) {
    let Some(mke2fs) = mke2fs() else {
        common::skip("SKIPPED: mke2fs not installed");
        return;
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
    let bytes = std::fs::read(&img).unwrap();
    let bs = 1024u64 << u32_at(&bytes, 1024 + 24);
    let dev = Arc::new(Logged {
        inner: MemDevice::new(bytes),
        reads: Mutex::default(),
    });
    let mut opts = CheckOptions {
        threads: 2,
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
}

#[test]
fn ext4_extent_trees_and_directories_are_swept_first() {
    sweeps_cover_checks("ext4", &[]);
}

#[test]
fn ext3_indirect_blocks_are_swept_first() {
    sweeps_cover_checks("ext3", &[]);
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
    let dev = Arc::new(Logged {
        inner: MemDevice::new(bytes),
        reads: Mutex::default(),
    });
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
