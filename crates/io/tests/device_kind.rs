//! Rotational detection on this machine's real devices (root: loop devices): a loop device
//! over a file answers what the disk holding the file answers, so does a partition of it, and
//! a file on tmpfs is unknown.

use ffsck_io::device_kind::{rotation, Rotation};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::process::Command;

/// Say why the test is skipped; a failure under `REQUIRE_TOOLS=1` (CI runs as root).
fn skip(msg: &str) {
    if std::env::var_os("REQUIRE_TOOLS").is_some_and(|v| v == "1") {
        panic!("{msg} (REQUIRE_TOOLS=1)");
    }
    eprintln!("{msg}");
}

/// A read-only loop device over `file` (with partitions scanned), detached on drop.
struct Loop(String);

impl Loop {
    fn attach(file: &Path) -> Option<Loop> {
        let out = Command::new("losetup")
            .args(["-f", "--show", "-r", "-P"])
            .arg(file)
            .output()
            .ok()?;
        out.status
            .success()
            .then(|| Loop(String::from_utf8_lossy(&out.stdout).trim().to_string()))
    }
}

impl Drop for Loop {
    fn drop(&mut self) {
        let _ = Command::new("losetup").args(["-d", &self.0]).status();
    }
}

/// What sysfs says of the whole disk holding `dir` (the test's expectation, read directly).
fn disk_flag_of(dir: &Path) -> Option<Rotation> {
    let dev = std::fs::metadata(dir).ok()?.dev();
    let link = PathBuf::from(format!(
        "/sys/dev/block/{}:{}",
        rustix::fs::major(dev),
        rustix::fs::minor(dev)
    ));
    let mut d = link.canonicalize().ok()?;
    if d.join("partition").is_file() {
        d = d.parent()?.to_path_buf();
    }
    match std::fs::read_to_string(d.join("queue/rotational"))
        .ok()?
        .trim()
    {
        "1" => Some(Rotation::Rotational),
        "0" => Some(Rotation::NonRotational),
        _ => None,
    }
}

#[test]
fn a_loop_device_and_its_partition_answer_for_the_disk_holding_the_file() {
    // /proc/self belongs to the effective user.
    if std::fs::metadata("/proc/self").map_or(true, |m| m.uid() != 0) {
        return skip("SKIPPED: needs root for loop devices");
    }
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let Some(expected) = disk_flag_of(dir.path()) else {
        return skip("SKIPPED: the target directory is on no plain disk (tmpfs, overlay, dm)");
    };
    let img = dir.path().join("disk.img");
    std::fs::write(&img, vec![0u8; 8 << 20]).unwrap();
    // One partition from 1 MiB to the end.
    let mut sfdisk = Command::new("sfdisk")
        .arg("-q")
        .arg(&img)
        .stdin(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    use std::io::Write;
    sfdisk
        .stdin
        .take()
        .unwrap()
        .write_all(b"2048,,L\n")
        .unwrap();
    assert!(sfdisk.wait().unwrap().success());

    assert_eq!(rotation(&img), expected, "the image file");
    let Some(lo) = Loop::attach(&img) else {
        return skip("SKIPPED: losetup failed (no loop devices?)");
    };
    assert_eq!(rotation(Path::new(&lo.0)), expected, "{}", lo.0);
    // No udev here perhaps: make the partition's node from what sysfs says of it.
    let name = Path::new(&lo.0)
        .file_name()
        .unwrap()
        .to_string_lossy()
        .into_owned();
    // A read-only loop device's partition scan may come back empty: add them with partx.
    let sys = format!("/sys/class/block/{name}p1/dev");
    if !Path::new(&sys).exists() {
        let _ = Command::new("partx").args(["-a", &lo.0]).status();
    }
    let Ok(majmin) = std::fs::read_to_string(&sys) else {
        panic!("no partition {name}p1 in sysfs after losetup -P");
    };
    let (ma, mi) = majmin.trim().split_once(':').unwrap();
    let part = dir.path().join("part1");
    assert!(Command::new("mknod")
        .arg(&part)
        .args(["b", ma, mi])
        .status()
        .unwrap()
        .success());
    assert_eq!(rotation(&part), expected, "{name}p1");
}

#[test]
fn a_file_on_tmpfs_is_unknown() {
    let shm = Path::new("/dev/shm");
    let is_tmpfs = rustix::fs::statfs(shm).is_ok_and(|s| s.f_type == 0x0102_1994);
    if !is_tmpfs {
        return skip("SKIPPED: /dev/shm is not tmpfs here");
    }
    let f = tempfile::NamedTempFile::new_in(shm).unwrap();
    assert_eq!(rotation(f.path()), Rotation::Unknown);
    assert_eq!(rotation(Path::new("/nonexistent/image")), Rotation::Unknown);
}
