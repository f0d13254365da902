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
use ffsck_io::{Device, MemDevice};

/// A device that logs every read `(offset, len)`, in order.
struct Logged {
    inner: MemDevice,
    reads: Mutex<Vec<(u64, u64)>>,
}

impl Device for Logged {
    fn size(&self) -> u64 {
        self.inner.size()
    }
    fn read_at(&self, buf: &mut [u8], offset: u64) -> ffsck_io::Result<()> {
        self.reads.lock().unwrap().push((offset, buf.len() as u64));
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
    // Group 0's inode table: read whole twice, once by the first sweep, once by pass 1's
    // scan, which starts the checks.
    let bs = 1024u64 << u32_at(&bytes, 1024 + 24);
    let gd = ((u32_at(&bytes, 1024 + 20) + 1) * bs) as usize;
    let itable0 = u32_at(&bytes, gd + 8) * bs;
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
    // Pass 0 reads single inodes (the journal's, the root's) from that table: not whole
    // blocks.
    let covers = |&(off, len): &(u64, u64)| len >= bs && off <= itable0 && itable0 < off + len;
    let mut hits = reads.iter().enumerate().filter(|(_, r)| covers(r));
    let first = hits
        .next()
        .map(|(i, _)| i)
        .expect("the inode table is read");
    let scan = hits
        .next()
        .map(|(i, _)| i)
        .expect("the scan reads it again");
    let blocks = |r: &[(u64, u64)]| -> std::collections::BTreeSet<u64> {
        r.iter()
            .flat_map(|&(off, len)| off / bs..(off + len).div_ceil(bs))
            .collect()
    };
    let swept = blocks(&reads[first..scan]);
    let before = blocks(&reads[..scan]);
    let missed: Vec<u64> = blocks(&reads[scan..])
        .into_iter()
        .filter(|b| !before.contains(b))
        .collect();
    assert!(
        missed.is_empty(),
        "{fs_type}: the checks read blocks no sweep read first: {missed:?}"
    );
    // The sweeps read the tree blocks: more than the inode tables and bitmaps.
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
