//! SIGINT/SIGTERM during a check or a repair: ffsck stops with exit code 32 and the image is
//! the original byte for byte (no half repair, no stale redo log); the next run repairs it.

use crate::common;

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// True once `pid` catches both SIGINT (2) and SIGTERM (15), read from /proc's `SigCgt` mask.
fn handlers_installed(pid: u32) -> bool {
    let Ok(status) = std::fs::read_to_string(format!("/proc/{pid}/status")) else {
        return false;
    };
    status
        .lines()
        .find_map(|l| l.strip_prefix("SigCgt:"))
        .and_then(|m| u64::from_str_radix(m.trim(), 16).ok())
        .is_some_and(|mask| mask & (1 << 1) != 0 && mask & (1 << 14) != 0)
}

/// Start `ffsck ARGS IMG`, wait until its handlers are in place, send `sig`, and return the
/// exit code and stderr. None if the run finished before the signal could be sent.
fn interrupt(args: &[&str], img: &Path, sig: i32) -> Option<(i32, String)> {
    let mut child: Child = Command::new(common::ffsck_bin())
        .args(args)
        .arg(img)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let start = Instant::now();
    while !handlers_installed(child.id()) {
        if child.try_wait().unwrap().is_some() || start.elapsed() > Duration::from_secs(20) {
            let _ = child.kill();
            let _ = child.wait();
            return None;
        }
        std::thread::sleep(Duration::from_micros(200));
    }
    // SAFETY: kill(2) on the pid of a child we have not reaped yet.
    unsafe {
        libc::kill(child.id() as i32, sig);
    }
    let out = child.wait_with_output().unwrap();
    let code = out.status.code().unwrap_or(-1);
    Some((code, String::from_utf8_lossy(&out.stderr).into_owned()))
}

/// An image whose repair reads many inode tables over several rounds (about 0.1 s here), so
/// a signal sent as soon as the handlers are in place normally lands before the commit.
fn damaged(t: &common::Tools) -> common::Image {
    let img = common::mkfs(
        t,
        "ext4",
        &["-N", "250000", "-O", "^uninit_bg,^metadata_csum"],
        "1G",
    );
    common::debugfs_w(t, &img.path, "sif /a/f1 blocks 12345");
    common::debugfs_w(t, &img.path, "sif /a/f2 links_count 7");
    common::debugfs_w(t, &img.path, "set_bg 1 free_blocks_count 3");
    img
}

/// Where a signal sent to `ffsck -fy` landed, each outcome checked in full.
#[derive(Debug, PartialEq)]
enum Landed {
    /// Before the commit: exit 32, the image byte for byte the original, no log left; the
    /// next run repairs it in one go.
    BeforeCommit,
    /// During the commit (the machine delayed the signal that long): the repair is finished
    /// first, exit 32|1, the image clean and no log left.
    DuringCommit,
}

fn interrupt_repair(t: &common::Tools, sig: i32, name: &str) -> Landed {
    let img = damaged(t);
    let original = common::read_all(&img.path);
    let Some((code, stderr)) = interrupt(&["-fy"], &img.path, sig) else {
        panic!("ffsck -fy finished before {name} could be sent");
    };
    let left: Vec<_> = std::fs::read_dir(img.dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .filter(|n| n != "fs.img" && n != "tree")
        .collect();
    assert!(
        left.is_empty(),
        "{name}: files left beside the image: {left:?}\n{stderr}"
    );
    if code == 32 | 1 {
        assert!(!stderr.contains("nothing was written"), "{name}: {stderr}");
        assert_eq!(
            common::e2fsck_n(t, &img.path).0,
            0,
            "{name}: after the commit"
        );
        return Landed::DuringCommit;
    }
    assert_eq!(code, 32, "{name}: exit code\n{stderr}");
    assert!(stderr.contains("nothing was written"), "{name}: {stderr}");
    common::assert_same_bytes(&original, &common::read_all(&img.path), name);

    // Nothing was lost: the next run repairs the image in one go.
    let mut cmd = Command::new(common::ffsck_bin());
    cmd.arg("-fy").arg(&img.path);
    let run = common::run_with_timeout(cmd, Duration::from_secs(120)).unwrap();
    assert_eq!(run.code(), 1, "{name}: rerun\n{}", run.stdout);
    assert_eq!(common::e2fsck_n(t, &img.path).0, 0, "{name}: after rerun");
    Landed::BeforeCommit
}

#[test]
fn a_signal_before_the_commit_leaves_the_original_image() {
    let Some(t) = common::tools() else { return };
    for (sig, name) in [(libc::SIGINT, "SIGINT"), (libc::SIGTERM, "SIGTERM")] {
        // A loaded machine may hold the signal back past the commit; that outcome is checked
        // too, but the before-commit path must be seen at least once in a few tries.
        let mut tries = Vec::new();
        while tries.len() < 4 && !tries.contains(&Landed::BeforeCommit) {
            tries.push(interrupt_repair(&t, sig, name));
        }
        assert!(
            tries.contains(&Landed::BeforeCommit),
            "{name}: never landed before the commit in {tries:?}"
        );
    }
}

#[test]
fn a_signal_stops_a_read_only_check_with_exit_32() {
    let Some(t) = common::tools() else { return };
    let img = damaged(&t);
    let original = common::read_all(&img.path);
    // As above, a loaded machine may deliver the signal only after the check has finished
    // (exit 4); the image is untouched either way, and exit 32 must be seen in a few tries.
    let mut codes = Vec::new();
    while codes.len() < 4 && !codes.contains(&32) {
        let (code, stderr) =
            interrupt(&["-fn"], &img.path, libc::SIGINT).unwrap_or((4, String::new()));
        assert!(code == 32 || code == 4, "exit {code}\n{stderr}");
        common::assert_same_bytes(&original, &common::read_all(&img.path), "after -fn");
        codes.push(code);
    }
    assert!(
        codes.contains(&32),
        "never stopped by the signal: {codes:?}"
    );
}
