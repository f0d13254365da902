//! The passes on crafted images: each test builds a small image in memory (`ffsck-testfs`),
//! damages one thing, runs `ffsck_check::check` read-only on it and asserts the problem codes
//! the damage must raise. A clean built image is clean for e2fsck and for ffsck alike.

mod common;

use std::process::Command;
use std::sync::Arc;

use ffsck_check::{check, CheckOptions, Finding, Reporter};
use ffsck_io::MemDevice;
use ffsck_testfs::{ino, Image, Options};

/// Keeps the findings of a check.
#[derive(Default)]
struct Keep(Vec<Finding>);

impl Reporter for Keep {
    fn finding(&mut self, f: &Finding) {
        self.0.push(f.clone());
    }
}

/// The problem codes (catalogue names) a read-only check of `bytes` reports, and its exit code.
fn run(bytes: Vec<u8>) -> (Vec<String>, i32) {
    let dev = Arc::new(MemDevice::new(bytes));
    let opts = CheckOptions {
        threads: 1,
        ..CheckOptions::default()
    };
    let mut rep = Keep::default();
    let out = check(dev, &opts, &mut rep);
    let codes: Vec<String> = out
        .findings
        .iter()
        .map(|f| format!("{:?}", f.problem))
        .collect();
    for f in &out.findings {
        eprintln!("{:?}: {}", f.problem, f.message().trim_end());
    }
    (codes, out.exit_code)
}

/// Both flavours: ext2 with block maps, ext4 with extents and metadata_csum.
fn flavours() -> [Options; 2] {
    [Options::ext2(), Options::ext4()]
}

/// Asserts that every code of `want` is among those the check of `img` reports.
fn expect(img: Image, want: &[&str]) {
    let (codes, exit) = run(img.finish());
    for w in want {
        assert!(codes.iter().any(|c| c == w), "{w} not in {codes:?}");
    }
    assert_eq!(exit, 4, "{codes:?}");
}

fn e2fsck() -> Option<std::path::PathBuf> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .chain(["/sbin".into(), "/usr/sbin".into()])
        .map(|d| d.join("e2fsck"))
        .find(|p| p.is_file())
}

#[test]
fn built_images_are_clean_for_e2fsck_and_ffsck() {
    for o in flavours() {
        let bytes = Image::build(o).finish();
        let (codes, exit) = run(bytes.clone());
        assert!(codes.is_empty() && exit == 0, "{o:?}: {codes:?} exit {exit}");
        let Some(e2fsck) = e2fsck() else {
            common::skip("SKIPPED: e2fsck not installed");
            return;
        };
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("img");
        std::fs::write(&path, &bytes).unwrap();
        let out = Command::new(e2fsck).arg("-fn").arg(&path).output().unwrap();
        assert_eq!(
            out.status.code(),
            Some(0),
            "{o:?}: e2fsck -fn:\n{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }
}
