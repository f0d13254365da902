//! How a repair reaches the device: through the file system's journal (ext3/ext4), through an
//! explicit `--repair-log` or in place (ext2), never through a file off the device unless asked.
//!
//! * a `-fy` killed at every write (`strace` fault injection: SIGKILL at the Nth `pwrite64`,
//!   then at the Nth `fsync`, the only calls ffsck writes and syncs the device with) has its
//!   repair finished by the next `ffsck -fy`, after which `e2fsck -fn` is clean;
//! * the same with `--repair-log` on ext2, and a log left by a killed run is refused (exit 8,
//!   not a byte written) when another file system of the same size is in the image's place;
//! * as root: `-fy` on a loop device with /var, $TMPDIR and the image's folder read-only
//!   completes the repair.

use crate::common;

use common::{Image, Tools};
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::Command;

fn damaged(t: &Tools, fs_type: &str) -> Image {
    let img = common::mkfs(t, fs_type, &[], "16M");
    common::debugfs_w(t, &img.path, "sif /a/f1 blocks 12345");
    common::debugfs_w(t, &img.path, "sif /a/f2 links_count 7");
    common::debugfs_w(t, &img.path, "sif /a/f3 dtime 12345");
    common::debugfs_w(t, &img.path, "set_bg 1 free_blocks_count 3");
    img
}

fn strace() -> Option<PathBuf> {
    let found = ["/usr/bin/strace", "/bin/strace", "/usr/local/bin/strace"]
        .iter()
        .map(PathBuf::from)
        .find(|p| p.is_file());
    if found.is_none() {
        common::skip("SKIPPED: needs strace for fault injection");
    }
    found
}

fn is_root() -> bool {
    Command::new("id")
        .arg("-u")
        .output()
        .is_ok_and(|o| String::from_utf8_lossy(&o.stdout).trim() == "0")
}

/// `ffsck ARGS IMG` under strace, SIGKILLed at the `n`th call of `syscall`. Returns true if
/// it was killed, false if it finished first (then it must have repaired: exit 1).
fn killed_at(strace: &Path, syscall: &str, n: u32, args: &[&str], img: &Path) -> bool {
    let out = Command::new(strace)
        .args(["-f", "-o", "/dev/null", "-e"])
        .arg("trace=pwrite64,fsync,fdatasync")
        .arg("-e")
        .arg(format!("inject={syscall}:signal=SIGKILL:when={n}"))
        .arg(common::ffsck_bin())
        .args(args)
        .arg(img)
        .output()
        .unwrap();
    if out.status.signal() == Some(libc::SIGKILL) || out.status.code() == Some(128 + 9) {
        return true;
    }
    assert_eq!(
        out.status.code(),
        Some(1),
        "{syscall} #{n}: the uninterrupted run\n{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    false
}

fn ffsck(args: &[&str], img: &Path) -> common::Run {
    let mut a: Vec<&std::ffi::OsStr> = args.iter().map(std::ffi::OsStr::new).collect();
    a.push(img.as_os_str());
    common::ffsck(&a)
}

/// Kill `ffsck -fy EXTRA` at every write and every sync; after each, `check` gets the killed
/// image. Returns the number of kill points per syscall.
fn every_kill_point(
    strace: &Path,
    original: &Path,
    work: &Path,
    extra: &[&str],
    check: &mut dyn FnMut(&str, u32),
) -> Vec<(String, u32)> {
    let mut args = vec!["-fy"];
    args.extend_from_slice(extra);
    let mut counts = Vec::new();
    for syscall in ["pwrite64", "fsync"] {
        let mut n = 1;
        loop {
            std::fs::copy(original, work).unwrap();
            if !killed_at(strace, syscall, n, &args, work) {
                break;
            }
            check(syscall, n);
            n += 1;
            assert!(n < 500, "{syscall}: the repair never completed");
        }
        counts.push((syscall.to_string(), n - 1));
    }
    counts
}

#[test]
fn a_journal_commit_killed_at_every_write_is_finished_by_the_next_run() {
    let Some(t) = common::tools() else { return };
    let Some(strace) = strace() else { return };
    let img = damaged(&t, "ext4");
    let work = img.aux("work.img");
    let mut finished_by_replay = 0;
    let counts = every_kill_point(&strace, &img.path, &work, &[], &mut |sc, n| {
        let run = ffsck(&["-fy"], &work);
        assert!(
            matches!(run.code(), 0 | 1),
            "{sc} #{n}: the next run\n{}\n{}",
            run.stdout,
            run.stderr
        );
        // Whatever the kill left (even a log without the flag, run anyway), the rest of the
        // repair goes through the journal again.
        assert!(
            !run.stdout.contains("not committing"),
            "{sc} #{n}: {}",
            run.stdout
        );
        if run.stdout.contains("Recovering journal") || run.stdout.contains("recovering journal") {
            finished_by_replay += 1;
        }
        let (code, out) = common::e2fsck_n(&t, &work);
        assert_eq!(code, 0, "{sc} #{n}: e2fsck -fn after the next run\n{out}");
    });
    eprintln!("kill points: {counts:?}; {finished_by_replay} finished by a journal replay");
    assert!(
        counts.iter().all(|c| c.1 >= 4),
        "too few kill points: {counts:?}"
    );
    assert!(
        finished_by_replay > 0,
        "no kill point left a journal to replay"
    );
}

#[test]
fn a_repair_log_is_finished_on_its_file_system_and_refused_on_another() {
    let Some(t) = common::tools() else { return };
    let Some(strace) = strace() else { return };
    let img = damaged(&t, "ext2");
    let work = img.aux("work.img");
    let log = img.aux("repair.log");
    let log_s = log.to_str().unwrap().to_string();
    // Another file system of the same size, which also needs a repair.
    let other = damaged(&t, "ext2");
    let other_bytes = common::read_all(&other.path);
    let mut refused = 0;
    let mut no_log = 0;
    let counts = every_kill_point(
        &strace,
        &img.path,
        &work,
        &["--repair-log", &log_s],
        &mut |sc, n| {
            let has_log = std::fs::metadata(&log).is_ok_and(|m| m.len() > 0);
            if has_log {
                // (ii) another file system in the image's place: refused, untouched.
                let saved = img.aux("saved.log");
                std::fs::copy(&log, &saved).unwrap();
                let swapped = img.aux("swapped.img");
                std::fs::write(&swapped, &other_bytes).unwrap();
                let run = ffsck(&["-fy", "--repair-log", saved.to_str().unwrap()], &swapped);
                assert_eq!(run.code(), 8, "{sc} #{n}: {}\n{}", run.stdout, run.stderr);
                assert!(
                    run.stderr.contains("was made for another file system")
                        && run.stderr.contains("nothing was written"),
                    "{sc} #{n}: {}",
                    run.stderr
                );
                common::assert_same_bytes(&other_bytes, &common::read_all(&swapped), "swapped");
                refused += 1;
            } else {
                no_log += 1;
            }
            // (i) the same image, the same log: the repair is finished.
            let run = ffsck(&["-fy", "--repair-log", &log_s], &work);
            assert!(
                matches!(run.code(), 0 | 1),
                "{sc} #{n}: the next run\n{}\n{}",
                run.stdout,
                run.stderr
            );
            let (code, out) = common::e2fsck_n(&t, &work);
            assert_eq!(code, 0, "{sc} #{n}: e2fsck -fn after the next run\n{out}");
            assert!(!log.exists(), "{sc} #{n}: the log must be retired");
        },
    );
    eprintln!("kill points: {counts:?}; refused on another fs {refused}, no log yet {no_log}");
    assert!(refused >= 4, "too few kills left a log: {refused}");
}

#[test]
fn ext2_repair_says_why_the_journal_is_not_used_and_writes_in_place() {
    let Some(t) = common::tools() else { return };
    let img = damaged(&t, "ext2");
    let run = ffsck(&["-fy"], &img.path);
    assert_eq!(run.code(), 1, "{}\n{}", run.stdout, run.stderr);
    let notes: Vec<&str> = run
        .stdout
        .lines()
        .filter(|l| l.contains("not committing the repair through the journal"))
        .collect();
    assert_eq!(notes.len(), 1, "{}", run.stdout);
    assert!(notes[0].contains("no journal") && notes[0].contains("in place"));
    assert_eq!(common::e2fsck_n(&t, &img.path).0, 0);
}

#[test]
fn a_repair_needs_no_writable_path_besides_the_device() {
    let Some(t) = common::tools() else { return };
    if !is_root() {
        common::skip("SKIPPED: needs root (loop device, read-only bind mounts in a namespace)");
        return;
    }
    let img = damaged(&t, "ext4");
    assert_eq!(common::e2fsck_n(&t, &img.path).0, 4, "test setup");
    let tmpdir = std::env::var("TMPDIR").unwrap_or_else(|_| "/tmp".into());
    let dir = img.dir.path().to_str().unwrap().to_string();
    let script = r#"
set -e
img=$1; dir=$2; tmp=$3; ffsck=$4
L=$(losetup -f --show "$img")
trap 'losetup -d $L' EXIT
set +e
unshare -m sh -c '
  set -e
  mount --make-rprivate /
  for d in /var "$2" "$3"; do mount --bind -o ro "$d" "$d"; done
  touch "$2/probe" 2>/dev/null && { echo "folder still writable"; exit 90; }
  touch /var/probe 2>/dev/null && { echo "/var still writable"; exit 90; }
  exec "$4" -fy "$1"
' sh "$L" "$dir" "$tmp" "$ffsck"
echo "rc=$?"
"#;
    let out = Command::new("bash")
        .arg("-c")
        .arg(script)
        .arg("sh")
        .arg(&img.path)
        .arg(&dir)
        .arg(&tmpdir)
        .arg(common::ffsck_bin())
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stdout.contains("rc=1"),
        "ffsck -fy with read-only /var, TMPDIR and image folder:\n{stdout}\n{stderr}"
    );
    assert!(!stdout.contains("not committing"), "{stdout}");
    let (code, e2) = common::e2fsck_n(&t, &img.path);
    assert_eq!(code, 0, "e2fsck -fn after the repair\n{e2}");
}
