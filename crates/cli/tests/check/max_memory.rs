//! `--max-memory`: on a directory-heavy image (one file per directory, the dirs profile's
//! shape), a limit small enough to spill the directory-block list and the directories' parent
//! links and generations to scratch files gives the same findings, summary and exit code as
//! an unlimited run,
//! at any thread count, and a lower peak RSS (a sanity check of the spill, not a timing or
//! size target).

use crate::common;

use common::{Image, Tools};
use std::process::Command;

/// A tree of `n` directories with one small file each, in a few parents.
fn dirs_image(t: &Tools, n: usize) -> Image {
    let dir = tempfile::tempdir().unwrap();
    let tree = dir.path().join("tree");
    for i in 0..n {
        let d = tree.join(format!("p{}/d{i:05}", i % 8));
        std::fs::create_dir_all(&d).unwrap();
        std::fs::write(d.join("f"), format!("{i}\n")).unwrap();
    }
    let path = dir.path().join("fs.img");
    std::fs::File::create(&path).unwrap();
    let out = Command::new(&t.mke2fs)
        .args([
            "-q",
            "-F",
            "-t",
            "ext4",
            "-b",
            "1024",
            "-N",
            &(2 * n + 64).to_string(),
        ])
        .arg("-d")
        .arg(&tree)
        .arg(&path)
        .arg(format!("{}K", n * 3 + 16384))
        .env("MKE2FS_SYNC", "0")
        .output()
        .unwrap();
    assert!(out.status.success(), "mke2fs: {out:?}");
    Image { dir, path }
}

/// Peak RSS in KiB of `ffsck -fn ARGS IMAGE`, from /usr/bin/time (None without it).
fn peak_rss(img: &Image, args: &[&str]) -> Option<u64> {
    let time = std::path::Path::new("/usr/bin/time");
    if !time.exists() {
        return None;
    }
    let report = img.aux("rss.txt");
    let out = Command::new(time)
        .arg("-f")
        .arg("%M")
        .arg("-o")
        .arg(&report)
        .arg(common::ffsck_bin())
        .arg("-fn")
        .args(args)
        .arg(&img.path)
        .output()
        .unwrap();
    assert!(out.status.code().is_some(), "ffsck was killed: {out:?}");
    std::fs::read_to_string(&report)
        .ok()?
        .trim()
        .lines()
        .last()?
        .parse()
        .ok()
}

#[test]
fn spilled_dir_blocks_give_the_same_findings() {
    let Some(t) = common::tools() else { return };
    let img = dirs_image(&t, 24_000);
    for cmd in [
        "link /p0/d00000 /p7/d23999/dirlink",
        "freei /p0/d12000/f",
        "unlink /p5/d05005",
        "sif /p3/d20003 links_count 9",
    ] {
        common::debugfs_w(&t, &img.path, cmd);
    }
    let base = common::check_n(&img.path, 2);
    assert_eq!(base.code(), 4, "{}", base.describe());
    assert!(base.findings().len() >= 4, "{}", base.describe());
    // 1 MiB: the list's share (a quarter) holds 16384 blocks, the image has over 24000; the
    // links' share (an eighth) holds 16384 directories, the image has 24010, so their pages
    // go out to the scratch file and back while pass 2 sets them (a second parent, a
    // directory unlinked) and pass 3 follows them; the generations' share (a sixteenth)
    // holds 16384, so pass 2 reads the checksum seeds of the directory blocks from one.
    let scratch = tempfile::tempdir().unwrap();
    let scratch_s = scratch.path().to_str().unwrap().to_string();
    for n in [1, 2, 4] {
        let c = common::check_n_with(
            &img.path,
            n,
            &["--max-memory", "1M", "--scratch-dir", &scratch_s],
        );
        assert_eq!(c.code(), base.code(), "exit code at --threads {n}");
        if c.json["findings"] != base.json["findings"] {
            panic!(
                "findings differ with --max-memory 1M --threads {n}:\n--- unlimited:\n{}--- limited:\n{}",
                base.describe(),
                c.describe()
            );
        }
        assert_eq!(c.json["summary"], base.json["summary"], "summary at {n}");
    }
    // The scratch file is unlinked as soon as it is created.
    assert_eq!(std::fs::read_dir(scratch.path()).unwrap().count(), 0);

    // 1 MiB is below what never spills (the program alone takes more): a note says so, on
    // stderr, and the exit code stays the check's. A limit far above the peak says nothing.
    let run = |limit: &str| {
        Command::new(common::ffsck_bin())
            .args(["-fn", "--max-memory", limit])
            .arg(&img.path)
            .output()
            .unwrap()
    };
    let tight = run("1M");
    let note = String::from_utf8_lossy(&tight.stderr);
    assert_eq!(tight.status.code(), Some(4), "{note}");
    assert!(note.contains("was above --max-memory 1.0 MiB"), "{note}");
    // 24000 made, their 8 parents, the root and lost+found.
    assert!(note.contains("; 24010 directories here)"), "{note}");
    let roomy = run("4G");
    assert_eq!(roomy.status.code(), Some(4));
    assert!(!String::from_utf8_lossy(&roomy.stderr).contains("--max-memory"));

    let unlimited = peak_rss(&img, &["--threads", "1"]);
    let limited = peak_rss(&img, &["--threads", "1", "--max-memory", "1M"]);
    if let (Some(u), Some(l)) = (unlimited, limited) {
        println!("peak RSS: unlimited {u} KiB, --max-memory 1M {l} KiB");
        assert!(
            l < u,
            "spilling did not lower the peak RSS ({l} KiB vs {u} KiB)"
        );
    }
}

#[test]
fn bad_sizes_are_refused() {
    let Some(t) = common::tools() else { return };
    let img = common::mkfs(&t, "ext4", &[], "8M");
    for bad in ["lots", "12Q", "99999999999999T"] {
        let run = common::ffsck(&[
            "-fn".as_ref(),
            "--max-memory".as_ref(),
            bad.as_ref(),
            img.path.as_os_str(),
        ]);
        assert_eq!(run.code, Some(16), "--max-memory {bad}: {}", run.stderr);
    }
}

/// A block-mapped directory whose triple indirect block maps a block at logical block
/// 1,048,844: e2fsck lists every block below it as a hole (more than a million questions),
/// and so must ffsck, but its findings keep the holes as one run, so the check's memory does
/// not grow by a finding per hole (before: ~190 bytes each, 650 MiB for the two million holes
/// the in-process fuzzer found).
#[test]
fn a_million_directory_holes_are_listed_in_bounded_memory() {
    let Some(t) = common::tools() else { return };
    if !std::path::Path::new("/usr/bin/time").exists() {
        common::skip("/usr/bin/time is needed to measure the peak RSS");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let tree = dir.path().join("tree");
    std::fs::create_dir_all(tree.join("many")).unwrap();
    for i in 0..60 {
        std::fs::write(tree.join(format!("many/a_long_file_name_{i:03}")), "x\n").unwrap();
    }
    let img = Image {
        path: dir.path().join("fs.img"),
        dir,
    };
    // 1 KiB blocks: 256 pointers per indirect block.
    common::mkfs_from(&t, &tree, &img.path, "ext2", &["-b", "1024"], "16M");
    let second = common::bmap(&t, &img.path, "/many", 1);
    let free = common::debugfs_r(&t, &img.path, "ffb 3 8000");
    let free: Vec<u64> = free
        .split("found:")
        .nth(1)
        .unwrap_or_else(|| panic!("test setup: no free blocks: {free}"))
        .split_whitespace()
        .filter_map(|w| w.parse().ok())
        .collect();
    let [tind, dind, ind] = free[..] else {
        panic!("test setup: three free blocks wanted: {free:?}");
    };
    // Slot 15 of the triple indirect block: logical 12 + 256 + 65536 + 15 * 65536.
    common::patch(
        &img.path,
        tind * 1024 + 15 * 4,
        &(dind as u32).to_le_bytes(),
    );
    common::patch(&img.path, dind * 1024, &(ind as u32).to_le_bytes());
    common::patch(&img.path, ind * 1024, &(second as u32).to_le_bytes());
    common::debugfs_w(&t, &img.path, &format!("setb {tind} 3"));
    common::debugfs_w(&t, &img.path, &format!("sif /many block[TIND] {tind}"));
    common::debugfs_w(&t, &img.path, "sif /many block[1] 0");

    let holes = |out: &str| {
        out.lines()
            .filter(|l| l.contains("has an unallocated block #"))
            .count()
    };
    let (e2_code, e2_out) = common::e2fsck_n(&t, &img.path);
    let want = holes(&e2_out);
    assert!(want > 1_000_000, "test setup: e2fsck listed {want} holes");
    // As one pass, and pipelined (pass 2 checking blocks while pass 1 scans on).
    for extra in [None, Some("--pipeline")] {
        let report = img.aux("rss.txt");
        let mut c = Command::new("/usr/bin/time");
        c.arg("-f")
            .arg("%M")
            .arg("-o")
            .arg(&report)
            .arg(common::ffsck_bin())
            .arg("-fn")
            .args(extra)
            .arg(&img.path);
        let run = common::run_with_timeout(c, std::time::Duration::from_secs(300))
            .expect("ffsck -fn timed out");
        assert_eq!(
            run.code,
            Some(e2_code),
            "{extra:?}: exit codes differ\n{}",
            run.stderr
        );
        assert_eq!(
            holes(&run.stdout),
            want,
            "{extra:?}: ffsck lists every hole e2fsck lists"
        );
        // The free counts' fixes were answered no: the closing line shows the superblock's
        // counts, as e2fsck's does (the bitmap blocks taken above are not in them).
        let closing = |out: &str| {
            out.lines()
                .rfind(|l| l.contains(" files ("))
                .and_then(|l| l.split_once(": "))
                .map(|(_, rest)| rest.to_string())
        };
        assert_eq!(
            closing(&run.stdout),
            closing(&e2_out),
            "{extra:?}: closing line"
        );
        let rss: u64 = std::fs::read_to_string(&report)
            .unwrap()
            .trim()
            .lines()
            .last()
            .and_then(|l| l.parse().ok())
            .expect("peak RSS from /usr/bin/time");
        // A finding per hole would be ~190 MiB here; runs keep it near the block list's
        // 16 MiB.
        assert!(
            rss < 120 * 1024,
            "{extra:?}: peak RSS {rss} KiB for {want} holes: findings are kept per hole"
        );
    }
}
