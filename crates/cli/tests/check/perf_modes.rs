//! The performance features: pass 2's windowed merge on a tree with more directory blocks than
//! one window (identical findings at 1, 2 and 4 threads), `--estimate`, and `--nice`.

use crate::common;

use std::process::Command;

/// A tree of `n` empty directories (one directory block each) and one file in the last.
fn many_dirs(t: &common::Tools, n: usize) -> common::Image {
    let dir = tempfile::tempdir().unwrap();
    let tree = dir.path().join("tree");
    for i in 0..n {
        let d = tree.join(format!("d{i:05}"));
        std::fs::create_dir_all(&d).unwrap();
        if i + 1 == n {
            std::fs::write(d.join("f"), b"x").unwrap();
        }
    }
    let path = dir.path().join("fs.img");
    std::fs::File::create(&path).unwrap();
    let out = Command::new(&t.mke2fs)
        .args(["-q", "-F", "-t", "ext4", "-b", "1024", "-N", "12288", "-d"])
        .arg(&tree)
        .arg(&path)
        .arg("64M")
        .env("MKE2FS_SYNC", "0")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "test setup: mke2fs failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    common::Image { dir, path }
}

#[test]
fn pass2_windows_keep_findings_identical_across_threads() {
    let Some(t) = common::tools() else { return };
    // 9000 directory blocks: three pass-2 windows.
    let img = many_dirs(&t, 9000);
    // Directories linked from a second parent, early and late in block order: which link
    // is the parent depends on the order the merge sees them.
    for (dir, into) in [
        ("d00010", "d08990"),
        ("d08000", "d00020"),
        ("d04500", "d04501"),
    ] {
        common::debugfs_w(&t, &img.path, &format!("ln /{dir} /{into}/extra"));
    }
    common::debugfs_w(&t, &img.path, "sif /d08999/f links_count 3");
    let base = common::check_n(&img.path, 1);
    assert_eq!(base.code(), 4, "{}", base.describe());
    let link_dir = base
        .findings()
        .iter()
        .filter(|f| f["code"] == "P2_LINK_DIR")
        .count();
    assert_eq!(link_dir, 3, "{}", base.describe());
    for n in [2, 4] {
        let c = common::check_n(&img.path, n);
        assert_eq!(c.code(), base.code(), "exit code at --threads {n}");
        assert_eq!(
            c.json["findings"],
            base.json["findings"],
            "findings differ at --threads {n}:\n{}",
            c.describe()
        );
        assert_eq!(c.json["summary"], base.json["summary"]);
    }
}

#[test]
fn estimate_reports_time_and_bytes() {
    let Some(t) = common::tools() else { return };
    let img = common::mkfs(&t, "ext4", &[], "32M");
    let run = common::ffsck(&["--estimate".as_ref(), img.path.as_os_str()]);
    assert_eq!(run.code(), 0, "{}{}", run.stdout, run.stderr);
    assert!(
        run.stdout.contains("estimated time of ffsck -fn") && run.stdout.contains("bytes"),
        "{}",
        run.stdout
    );
}

/// With the image out of the page cache, the estimate times its sample as the check reads (a
/// hinted batch from the device) and says so.
#[test]
fn estimate_off_the_device_times_a_hinted_batch() {
    use std::os::fd::AsRawFd;
    let Some(t) = common::tools() else { return };
    let img = common::mkfs(&t, "ext4", &[], "64M");
    let f = std::fs::File::open(&img.path).unwrap();
    f.sync_all().unwrap();
    // SAFETY: a plain syscall on a descriptor that stays open across it.
    unsafe { libc::posix_fadvise(f.as_raw_fd(), 0, 0, libc::POSIX_FADV_DONTNEED) };
    let run = common::ffsck(&["--estimate".as_ref(), "-v".as_ref(), img.path.as_os_str()]);
    assert_eq!(run.code(), 0, "{}{}", run.stdout, run.stderr);
    if run.stdout.contains("from the page cache") {
        eprintln!("skipped: the file system under the temporary directory kept the image cached");
        return;
    }
    assert!(run.stdout.contains("from the device"), "{}", run.stdout);
    let secs: f64 = run
        .stdout
        .split_once("estimated time of ffsck -fn: ")
        .and_then(|(_, r)| r.split_once(" s")?.0.parse().ok())
        .unwrap_or_else(|| panic!("no estimate in {}", run.stdout));
    assert!(secs.is_finite() && secs > 0.0, "{}", run.stdout);
}

#[test]
fn estimate_of_garbage_is_an_error_not_a_crash() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("junk.img");
    std::fs::write(&path, vec![0x5a; 1 << 20]).unwrap();
    let run = common::ffsck(&["--estimate".as_ref(), path.as_os_str()]);
    assert_eq!(run.code(), 8, "{}{}", run.stdout, run.stderr);
}

#[test]
fn nice_mode_is_reported_with_v_and_changes_no_finding() {
    let Some(t) = common::tools() else { return };
    let img = common::mkfs(&t, "ext4", &[], "32M");
    let run = common::ffsck(&["-fnv".as_ref(), "--nice".as_ref(), img.path.as_os_str()]);
    assert_eq!(run.code(), 0, "{}{}", run.stdout, run.stderr);
    assert!(run.stderr.contains("Resource-aware mode"), "{}", run.stderr);
}
