//! What a check leaves in the superblock and says about skipping, against e2fsck 1.47: for
//! each starting state (clean, not cleanly unmounted, error flag with the kernel's error
//! record, mount count at its maximum, last check long ago or in the future, a problem that is
//! repaired, one preen must leave), ffsck and e2fsck run with the same flags on two copies of
//! one image; the exit codes, the output and `dumpe2fs -h` must agree (the write and check
//! times, which are the run's clock, are compared with the clock instead), and `-n` changes
//! nothing.

use crate::common;

use common::now;
use common::Tools;
use std::path::{Path, PathBuf};
use std::process::Command;

/// Fields of `dumpe2fs -h` that hold the run's clock or the write statistics e2fsck keeps by
/// its own I/O (and the checksum over them).
/// "Journal sequence" too: ffsck commits a repair as a transaction in the journal, which
/// moves the journal's sequence on; e2fsck writes in place.
const VOLATILE: [&str; 6] = [
    "Last write time:",
    "Last checked:",
    "Next check after:",
    "Lifetime writes:",
    "Checksum:",
    "Journal sequence:",
];

/// The blocks of the journal inode: ffsck's repair leaves its (retired) transaction there.
fn journal_blocks(t: &Tools, img: &Path) -> std::collections::HashSet<usize> {
    common::debugfs_r(t, img, "blocks <8>")
        .split_whitespace()
        .filter_map(|b| b.parse().ok())
        .collect()
}

/// A last-check time long past, set on every image so that a new one is told from it.
const OLD_CHECK: i64 = 1_600_000_000;

fn dumpe2fs_h(img: &Path) -> String {
    let o = Command::new("dumpe2fs")
        .arg("-h")
        .arg(img)
        .output()
        .expect("dumpe2fs");
    assert!(o.status.success(), "dumpe2fs -h {}", img.display());
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// `dumpe2fs -h` without its volatile lines.
fn stable(dump: &str) -> String {
    dump.lines()
        .filter(|l| !VOLATILE.iter().any(|v| l.starts_with(v)))
        .collect::<Vec<_>>()
        .join("\n")
}

/// A little-endian field of the primary superblock.
fn sb_u32(img: &Path, off: u64) -> i64 {
    i64::from(common::read_u32(img, 1024 + off))
}
const S_WTIME: u64 = 0x30;
const S_LASTCHECK: u64 = 0x40;

/// A 16 MiB ext4 image of a few files and directories, each directory one block (a larger
/// one, not indexed, e2fsck would rebuild in every forced repair).
fn small_fs(t: &Tools) -> common::Image {
    let dir = tempfile::tempdir().unwrap();
    let tree = dir.path().join("tree");
    std::fs::create_dir_all(tree.join("a/sub")).unwrap();
    let mut rng = common::Rng::new(7);
    for i in 1..=4 {
        std::fs::write(tree.join(format!("a/f{i}")), rng.bytes(3000 * i)).unwrap();
    }
    std::fs::write(tree.join("a/sub/s1"), rng.bytes(5000)).unwrap();
    let path = dir.path().join("fs.img");
    std::fs::File::create(&path).unwrap();
    let out = Command::new(&t.mke2fs)
        .args(["-q", "-F", "-t", "ext4", "-d"])
        .arg(&tree)
        .arg(&path)
        .arg("16M")
        .env("MKE2FS_SYNC", "0")
        .output()
        .unwrap();
    assert!(out.status.success(), "test setup: mke2fs failed: {out:?}");
    common::Image { dir, path }
}

/// Two copies of one image, `fs.img` in two folders (so both tools print the same name).
struct Pair {
    _base: common::Image,
    ours: tempfile::TempDir,
    theirs: tempfile::TempDir,
}

impl Pair {
    fn new(t: &Tools, setup: &[String]) -> Pair {
        let base = small_fs(t);
        common::debugfs_w(t, &base.path, &format!("ssv lastcheck @{OLD_CHECK}"));
        for cmd in setup {
            common::debugfs_w(t, &base.path, cmd);
        }
        let ours = tempfile::tempdir().unwrap();
        let theirs = tempfile::tempdir().unwrap();
        std::fs::copy(&base.path, ours.path().join("fs.img")).unwrap();
        std::fs::copy(&base.path, theirs.path().join("fs.img")).unwrap();
        Pair {
            _base: base,
            ours,
            theirs,
        }
    }
    fn ours(&self) -> PathBuf {
        self.ours.path().join("fs.img")
    }
    fn theirs(&self) -> PathBuf {
        self.theirs.path().join("fs.img")
    }
}

struct Ran {
    code: i32,
    stdout: String,
}

fn run_in(dir: &Path, prog: &Path, flags: &str) -> Ran {
    let mut cmd = Command::new(prog);
    cmd.current_dir(dir)
        .arg(flags)
        .arg("fs.img")
        .env("E2FSCK_CONFIG", "/dev/null");
    let run = common::run_with_timeout(cmd, common::DEFAULT_TIMEOUT)
        .unwrap_or_else(|| panic!("{} {flags} timed out", prog.display()));
    Ran {
        code: run.code(),
        stdout: run.stdout,
    }
}

/// Run ffsck and e2fsck with `flags` on the two copies and compare what they did. With
/// `same_output`, their standard output must match line for line (the findings of a repair
/// are worded alike but not always in the same number of lines, so a repaired image is
/// compared by its result). Returns ffsck's output.
fn compare(t: &Tools, name: &str, setup: &[String], flags: &str, same_output: bool) -> String {
    let pair = Pair::new(t, setup);
    let before = common::read_all(&pair.ours());
    let start = now();
    let ours = run_in(pair.ours.path(), &common::ffsck_bin(), flags);
    let theirs = run_in(pair.theirs.path(), &t.e2fsck, flags);
    let end = now();
    let what = format!(
        "{name}, {flags}\nffsck (exit {}):\n{}\ne2fsck (exit {}):\n{}",
        ours.code, ours.stdout, theirs.code, theirs.stdout
    );
    assert_eq!(ours.code, theirs.code, "exit codes differ: {what}");
    if same_output {
        assert_eq!(
            ours.stdout.lines().collect::<Vec<_>>(),
            theirs.stdout.lines().collect::<Vec<_>>(),
            "output differs: {what}"
        );
    }
    let (a, b) = (dumpe2fs_h(&pair.ours()), dumpe2fs_h(&pair.theirs()));
    assert_eq!(stable(&a), stable(&b), "dumpe2fs -h differs after {what}");
    // The check time: stamped by both (with the clock of the run), or by neither.
    let (lc_ours, lc_theirs) = (
        sb_u32(&pair.ours(), S_LASTCHECK),
        sb_u32(&pair.theirs(), S_LASTCHECK),
    );
    let stamped = |lc: i64| lc >= start - 60 && lc <= end + 60;
    let old = i64::from(common::read_u32(&pair._base.path, 1024 + S_LASTCHECK));
    assert_eq!(
        stamped(lc_ours),
        stamped(lc_theirs),
        "last check {lc_ours} (ffsck) vs {lc_theirs} (e2fsck), run at {start}..{end}: {what}"
    );
    if !stamped(lc_theirs) {
        assert_eq!(lc_ours, old, "last check changed: {what}");
        assert_eq!(lc_theirs, old, "last check changed by e2fsck: {what}");
    }
    if flags.contains('n') {
        common::assert_same_bytes(
            &before,
            &common::read_all(&pair.ours()),
            &format!("image after ffsck {flags} ({name})"),
        );
    } else if stamped(lc_ours) {
        let wtime = sb_u32(&pair.ours(), S_WTIME);
        assert!(stamped(wtime), "write time {wtime} not the run's: {what}");
    }
    assert!(
        !pair.ours().with_extension("img.ffsck-redo").exists(),
        "a repair log was left behind: {what}"
    );
    ours.stdout
}

fn ssv(cmds: &[&str]) -> Vec<String> {
    cmds.iter().map(|c| c.to_string()).collect()
}

const FLAGS: [&str; 4] = ["-fy", "-fp", "-p", "-n"];

/// Every flag on one starting state; returns ffsck's `-p` and `-n` output.
fn all_flags(name: &str, setup: &[String]) -> Option<(String, String)> {
    let t = common::tools()?;
    let mut p = String::new();
    let mut n = String::new();
    for flags in FLAGS {
        let out = compare(&t, name, setup, flags, true);
        match flags {
            "-p" => p = out,
            "-n" => n = out,
            _ => {}
        }
    }
    Some((p, n))
}

#[test]
fn clean() {
    let Some((p, n)) = all_flags("clean", &[]) else {
        return;
    };
    assert!(p.starts_with("fs.img: clean, "), "{p}");
    assert_eq!(p, n);
}

#[test]
fn not_cleanly_unmounted() {
    let Some((p, _)) = all_flags("not clean", &ssv(&["ssv state 0"])) else {
        return;
    };
    assert!(
        p.starts_with("fs.img was not cleanly unmounted, check forced.\n"),
        "{p}"
    );
}

/// The error flag and the record the kernel keeps of its errors.
fn error_record() -> Vec<String> {
    ssv(&[
        "ssv state 3",
        "ssv error_count 3",
        "ssv first_error_time @1600000000",
        "ssv first_error_ino 12",
        "ssv first_error_block 100",
        "ssv first_error_func ext4_lookup",
        "ssv first_error_line 42",
        "ssv last_error_time @1600000100",
        "ssv last_error_ino 13",
        "ssv last_error_block 200",
        "ssv last_error_func ext4_readdir",
        "ssv last_error_line 7",
    ])
}

#[test]
fn error_flag_and_record() {
    let Some((p, _)) = all_flags("error flag", &error_record()) else {
        return;
    };
    assert!(
        p.starts_with("fs.img contains a file system with errors, check forced.\n"),
        "{p}"
    );
}

#[test]
fn error_flag_on_an_invalid_state() {
    let Some((p, _)) = all_flags("error flag, not clean", &ssv(&["ssv state 2"])) else {
        return;
    };
    assert!(
        p.starts_with("fs.img contains a file system with errors, check forced.\n"),
        "{p}"
    );
}

#[test]
fn mounted_too_often() {
    let setup = ssv(&["ssv max_mnt_count 20", "ssv mnt_count 30"]);
    let Some((p, _)) = all_flags("mount count", &setup) else {
        return;
    };
    assert!(
        p.starts_with("fs.img has been mounted 30 times without being checked, check forced.\n"),
        "{p}"
    );
}

#[test]
fn mounts_left_before_a_check() {
    let Some(t) = common::tools() else { return };
    for (count, tail) in [
        (14, ""),
        (16, " (check in 4 mounts)"),
        (19, " (check after next mount)"),
    ] {
        let setup = ssv(&["ssv max_mnt_count 20", &format!("ssv mnt_count {count}")]);
        for flags in ["-p", "-n"] {
            let out = compare(&t, "mounts left", &setup, flags, true);
            assert!(
                out.starts_with("fs.img: clean, ")
                    && out.trim_end().ends_with(&format!("blocks{tail}")),
                "{count} mounts, {flags}: {out}"
            );
        }
    }
}

#[test]
fn not_checked_for_days() {
    let ago = now() - 10 * 86_400 - 600;
    let setup = ssv(&["ssv checkinterval 86400", &format!("ssv lastcheck @{ago}")]);
    let Some((p, _)) = all_flags("interval", &setup) else {
        return;
    };
    assert!(
        p.starts_with("fs.img has gone 10 days without being checked, check forced.\n"),
        "{p}"
    );
}

#[test]
fn last_check_in_the_future() {
    let Some(t) = common::tools() else { return };
    // Beyond the day of slack e2fsck allows a wrong clock: forced.
    let later = now() + 3 * 86_400;
    let setup = ssv(&[
        "ssv checkinterval 86400",
        &format!("ssv lastcheck @{later}"),
    ]);
    let p = compare(&t, "future", &setup, "-p", true);
    assert!(
        p.starts_with("fs.img has filesystem last checked time in the future, check forced.\n"),
        "{p}"
    );
    compare(&t, "future", &setup, "-n", true);
    compare(&t, "future", &setup, "-fy", true);
    // Within it: clean.
    let soon = now() + 3600;
    let setup = ssv(&["ssv checkinterval 86400", &format!("ssv lastcheck @{soon}")]);
    let p = compare(&t, "near future", &setup, "-p", true);
    assert!(p.starts_with("fs.img: clean, "), "{p}");
}

#[test]
fn backup_superblock_differs() {
    let Some(t) = common::tools() else { return };
    // Group 1's backup (block 8193 of this 1 KiB-block file system) loses a compat feature.
    let pair_setup: Vec<String> = Vec::new();
    let pair = Pair::new(&t, &pair_setup);
    for img in [pair.ours(), pair.theirs()] {
        let off = 8193 * 1024 + 0x5C;
        let compat = common::read_u32(&img, off);
        common::patch(&img, off, &(compat ^ 0x200).to_le_bytes());
    }
    let ours = run_in(pair.ours.path(), &common::ffsck_bin(), "-p");
    let theirs = run_in(pair.theirs.path(), &t.e2fsck, "-p");
    assert_eq!(ours.code, theirs.code);
    assert_eq!(ours.stdout, theirs.stdout);
    assert!(
        ours.stdout.starts_with(
            "fs.img primary superblock features different from backup, check forced.\n"
        ),
        "{}",
        ours.stdout
    );
    // Both rewrote the backup: the images differ only in the times and statistics of the two
    // superblocks (and their checksums).
    let (a, b) = (
        common::read_all(&pair.ours()),
        common::read_all(&pair.theirs()),
    );
    let journal = journal_blocks(&t, &pair.ours());
    assert!(!journal.is_empty(), "no journal blocks found");
    let volatile = |i: usize| {
        let o = i % 1024;
        journal.contains(&(i / 1024))
            || (i / 1024 == 1 || i / 1024 == 8193)
                && ((0x30..0x34).contains(&o)
                    || (0x40..0x44).contains(&o)
                    || (0x178..0x180).contains(&o)
                    || o >= 0x3FC)
    };
    let diff: Vec<usize> = (0..a.len())
        .filter(|&i| a[i] != b[i] && !volatile(i))
        .collect();
    assert!(
        diff.is_empty(),
        "images differ at {:?}",
        &diff[..diff.len().min(8)]
    );
    // And the next run finds them alike.
    let again = run_in(pair.ours.path(), &common::ffsck_bin(), "-p");
    assert!(
        again.stdout.starts_with("fs.img: clean, "),
        "{}",
        again.stdout
    );
}

/// A state-only change (flag, counts, times) leaves every block but the superblock as e2fsck
/// leaves it.
#[test]
fn only_the_superblock_is_marked() {
    let Some(t) = common::tools() else { return };
    for setup in [error_record(), ssv(&["ssv state 0", "ssv mnt_count 7"])] {
        for flags in ["-fy", "-p"] {
            let pair = Pair::new(&t, &setup);
            let ours = run_in(pair.ours.path(), &common::ffsck_bin(), flags);
            let theirs = run_in(pair.theirs.path(), &t.e2fsck, flags);
            assert_eq!(ours.code, theirs.code, "{setup:?} {flags}");
            let (a, b) = (
                common::read_all(&pair.ours()),
                common::read_all(&pair.theirs()),
            );
            let volatile = |i: usize| {
                (1024 + 0x30..1024 + 0x34).contains(&i)
                    || (1024 + 0x40..1024 + 0x44).contains(&i)
                    || (1024 + 0x178..1024 + 0x180).contains(&i)
                    || (1024 + 0x3FC..2048).contains(&i)
            };
            let diff: Vec<usize> = (0..a.len())
                .filter(|&i| a[i] != b[i] && !volatile(i))
                .collect();
            assert!(
                diff.is_empty(),
                "{setup:?} {flags}: images differ at {diff:?}"
            );
        }
    }
}

#[test]
fn a_repaired_problem() {
    let Some(t) = common::tools() else { return };
    // Counts a crash left wrong, on a file system not cleanly unmounted.
    let setup = ssv(&[
        "ssv free_blocks_count 12",
        "sif /a/f1 links_count 5",
        "ssv state 0",
        "ssv mnt_count 3",
        // (Last: debugfs opens this file system no more.)
        "set_bg 1 free_blocks_count 7",
    ]);
    for flags in FLAGS {
        let out = compare(&t, "repaired", &setup, flags, false);
        if flags == "-fy" {
            assert!(
                out.contains("***** FILE SYSTEM WAS MODIFIED *****"),
                "{out}"
            );
        }
    }
}

#[test]
fn a_problem_preen_leaves() {
    let Some(t) = common::tools() else { return };
    // An inode no directory names: preen stops ("UNEXPECTED INCONSISTENCY") and e2fsck sets
    // the error flag; -y reconnects it.
    let setup = ssv(&["unlink /a/sub/s1", "ssv state 0"]);
    for flags in FLAGS {
        compare(&t, "preen stops", &setup, flags, false);
    }
    let pair = Pair::new(&t, &setup);
    run_in(pair.ours.path(), &common::ffsck_bin(), "-p");
    let dump = dumpe2fs_h(&pair.ours());
    assert!(
        dump.contains("Filesystem state:         not clean with errors"),
        "{dump}"
    );
}

/// What the kernel reads at mount: a file system ffsck repaired is clean, with no errors
/// recorded and a fresh mount count.
#[test]
fn kernel_sees_a_checked_file_system() {
    let Some(t) = common::tools() else { return };
    let mut setup = error_record();
    setup.push("ssv mnt_count 9".into());
    let pair = Pair::new(&t, &setup);
    let run = run_in(pair.ours.path(), &common::ffsck_bin(), "-fy");
    assert_eq!(run.code, 0, "{}", run.stdout);
    let dump = dumpe2fs_h(&pair.ours());
    for want in [
        "Filesystem state:         clean\n",
        "Mount count:              0\n",
    ] {
        assert!(dump.contains(want), "no {want:?} in\n{dump}");
    }
    assert!(!dump.contains("FS Error count"), "{dump}");
    assert!(!dump.contains("First error"), "{dump}");
    assert!(!dump.contains("Last error"), "{dump}");
}

/// With a label, e2fsck names the file system by it (spaces and colons made underscores; debugfs takes no space in one).
#[test]
fn a_labelled_file_system_is_named_by_its_label() {
    let Some(t) = common::tools() else { return };
    let setup = ssv(&["ssv volume_name my:vol", "ssv state 0"]);
    let p = compare(&t, "label", &setup, "-p", true);
    assert!(
        p.starts_with("my_vol was not cleanly unmounted, check forced.\nmy_vol: "),
        "{p}"
    );
    let p = compare(&t, "label", &ssv(&["ssv volume_name my:vol"]), "-p", true);
    assert!(p.starts_with("my_vol: clean, "), "{p}");
}
