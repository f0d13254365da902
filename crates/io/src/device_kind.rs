//! Know the device: whether the storage under an image or block device is rotational (a hard
//! disk, where the order of reads is what costs), and the I/O plan `--io sequential|parallel|
//! auto` that follows from it.
//!
//! The answer comes from sysfs. `/sys/dev/block/MAJ:MIN` names the block device; from there:
//! - a partition (it has a `partition` file) answers for its parent disk;
//! - a loop device answers for the device holding its backing file (`loop/backing_file`);
//! - a stacked device (device-mapper, md: entries in `slaves/`) is rotational when any of its
//!   slaves is, non-rotational when all of them are;
//! - otherwise the disk's `queue/rotational` (1 or 0).
//!
//! An image file answers for the device holding it (its `st_dev`). File systems with no block
//! device of their own (tmpfs, overlay, NFS, btrfs's anonymous device numbers) give `Unknown`.

use std::path::{Path, PathBuf};

/// What the storage is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Rotation {
    Rotational,
    NonRotational,
    Unknown,
}

/// How far a chain of partitions, loops and stacked devices is followed.
const MAX_DEPTH: usize = 16;

/// Where sysfs is; tests point it at a tree of their own.
#[derive(Clone, Debug)]
pub struct Sysfs {
    root: PathBuf,
}

impl Default for Sysfs {
    fn default() -> Self {
        Sysfs {
            root: PathBuf::from("/sys"),
        }
    }
}

impl Sysfs {
    pub fn at(root: impl Into<PathBuf>) -> Self {
        Sysfs { root: root.into() }
    }

    /// The storage under `path`: a block device's own, or for any other file the device
    /// holding it.
    pub fn rotation_of_path(&self, path: &Path) -> Rotation {
        use std::os::unix::fs::{FileTypeExt, MetadataExt};
        let Ok(meta) = std::fs::metadata(path) else {
            return Rotation::Unknown;
        };
        if meta.file_type().is_block_device() {
            self.rotation_of_dev(meta.rdev(), 0)
        } else if meta.file_type().is_char_device() {
            Rotation::Unknown
        } else {
            self.rotation_of_dev(meta.dev(), 0)
        }
    }

    fn rotation_of_dev(&self, dev: u64, depth: usize) -> Rotation {
        let (major, minor) = (rustix::fs::major(dev), rustix::fs::minor(dev));
        if major == 0 {
            // Anonymous: tmpfs, overlay, network and other devices without a queue.
            return Rotation::Unknown;
        }
        let link = self.root.join(format!("dev/block/{major}:{minor}"));
        self.rotation_of_dir(&link, depth)
    }

    /// `dir`: a device's directory in sysfs (or a link to it).
    fn rotation_of_dir(&self, dir: &Path, depth: usize) -> Rotation {
        if depth > MAX_DEPTH {
            return Rotation::Unknown;
        }
        let Ok(dir) = dir.canonicalize() else {
            return Rotation::Unknown;
        };
        if dir.join("partition").is_file() {
            return match dir.parent() {
                Some(parent) => self.rotation_of_dir(parent, depth + 1),
                None => Rotation::Unknown,
            };
        }
        if let Ok(backing) = std::fs::read_to_string(dir.join("loop/backing_file")) {
            let backing = backing.trim_end_matches('\n');
            let backing = backing.strip_suffix(" (deleted)").unwrap_or(backing);
            return match std::fs::metadata(backing) {
                Ok(m) => {
                    use std::os::unix::fs::MetadataExt;
                    self.rotation_of_dev(m.dev(), depth + 1)
                }
                Err(_) => Rotation::Unknown,
            };
        }
        let slaves: Vec<PathBuf> = std::fs::read_dir(dir.join("slaves"))
            .map(|rd| rd.flatten().map(|e| e.path()).collect())
            .unwrap_or_default();
        if !slaves.is_empty() {
            let kinds: Vec<Rotation> = slaves
                .iter()
                .map(|s| self.rotation_of_dir(s, depth + 1))
                .collect();
            return if kinds.contains(&Rotation::Rotational) {
                Rotation::Rotational
            } else if kinds.iter().all(|&k| k == Rotation::NonRotational) {
                Rotation::NonRotational
            } else {
                Rotation::Unknown
            };
        }
        match std::fs::read_to_string(dir.join("queue/rotational")).as_deref() {
            Ok("1\n") | Ok("1") => Rotation::Rotational,
            Ok("0\n") | Ok("0") => Rotation::NonRotational,
            _ => Rotation::Unknown,
        }
    }
}

/// The storage under `path`, from the system's sysfs.
pub fn rotation(path: &Path) -> Rotation {
    Sysfs::default().rotation_of_path(path)
}

/// The I/O plan a user chooses (`--io`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[cfg_attr(feature = "clap", derive(clap::ValueEnum))]
pub enum IoPlan {
    /// One ordered read stream: ascending, coalesced reads (hard disks).
    Sequential,
    /// Workers read on their own, in parallel (SSD, NVMe, page cache).
    Parallel,
    /// Sequential on rotational storage whose metadata is not in the page cache already,
    /// parallel otherwise.
    #[default]
    Auto,
}

/// What an `IoPlan` resolved to for one device.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum IoMode {
    Sequential,
    Parallel,
    /// Rotational storage under `auto`: sequential, unless a sample of what a pass is about to
    /// read is in the page cache already, where the order of reads costs nothing and the
    /// parallel reads are faster (the pass decides, with `Device::is_cached`), or unless the
    /// device answers scattered reads faster than a spinning disk can ([`seeks_slowly`]): a
    /// virtual disk may call itself rotational.
    SequentialWhenCold,
}

/// A scattered read slower than this took a seek or a rotational wait: a 7200 rpm disk waits
/// 4.2 ms for half a rotation on average, a flash or virtual disk (served from a host's cache)
/// answers in well under a millisecond.
pub const SLOW_READ: std::time::Duration = std::time::Duration::from_millis(2);

/// Whether `dev` answers scattered reads as a spinning disk does: one 4 KiB read at each of
/// `offsets` (spread over the device, not in the page cache; the bytes are what the caller
/// will read anyway), timed; at least half slower than [`SLOW_READ`]. `None` without at least
/// two reads that succeeded.
pub fn seeks_slowly(dev: &dyn crate::Device, offsets: &[u64]) -> Option<bool> {
    let mut buf = [0u8; 4096];
    let mut slow = 0usize;
    let mut timed = 0usize;
    for &off in offsets {
        let t = std::time::Instant::now();
        if dev.read_at(&mut buf, off).is_ok() {
            timed += 1;
            slow += usize::from(t.elapsed() > SLOW_READ);
        }
    }
    (timed >= 2).then_some(2 * slow >= timed)
}

impl IoPlan {
    /// The mode for storage of kind `rotation`. Unknown storage (tmpfs, overlay, the page
    /// cache) is read in parallel: the order of reads costs nothing there.
    pub fn resolve(self, rotation: Rotation) -> IoMode {
        match (self, rotation) {
            (IoPlan::Sequential, _) => IoMode::Sequential,
            (IoPlan::Auto, Rotation::Rotational) => IoMode::SequentialWhenCold,
            _ => IoMode::Parallel,
        }
    }
    pub fn as_str(self) -> &'static str {
        match self {
            IoPlan::Sequential => "sequential",
            IoPlan::Parallel => "parallel",
            IoPlan::Auto => "auto",
        }
    }
}

impl std::fmt::Display for IoPlan {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl std::str::FromStr for IoPlan {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "sequential" => Ok(IoPlan::Sequential),
            "parallel" => Ok(IoPlan::Parallel),
            "auto" => Ok(IoPlan::Auto),
            _ => Err(format!(
                "invalid I/O plan '{s}' (expected sequential, parallel or auto)"
            )),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::{symlink, MetadataExt};

    /// A device whose reads wait `delay` (a disk that seeks), or fail with `delay` zero.
    struct Waits {
        inner: crate::MemDevice,
        delay: std::time::Duration,
    }

    impl crate::Device for Waits {
        fn size(&self) -> u64 {
            self.inner.size()
        }
        fn read_at(&self, buf: &mut [u8], offset: u64) -> crate::Result<()> {
            if self.delay.is_zero() {
                return Err(crate::IoError::Refused("unreadable".into()));
            }
            std::thread::sleep(self.delay);
            self.inner.read_at(buf, offset)
        }
        fn write_at(&self, buf: &[u8], offset: u64) -> crate::Result<()> {
            self.inner.write_at(buf, offset)
        }
        fn flush(&self) -> crate::Result<()> {
            Ok(())
        }
        fn bytes_read(&self) -> u64 {
            0
        }
    }

    fn waits(ms: u64) -> Waits {
        Waits {
            inner: crate::MemDevice::new(vec![0; 1 << 20]),
            delay: std::time::Duration::from_millis(ms),
        }
    }

    #[test]
    fn reads_slower_than_a_rotation_seek_slowly() {
        // Every read takes at least 3 ms, whatever the machine's load.
        let dev = waits(3);
        assert_eq!(seeks_slowly(&dev, &[0, 1 << 19, 4096, 8192]), Some(true));
    }

    #[test]
    fn too_few_reads_cannot_tell() {
        assert_eq!(seeks_slowly(&waits(3), &[0]), None);
        assert_eq!(seeks_slowly(&waits(3), &[]), None);
        // Reads that fail are not timed.
        assert_eq!(seeks_slowly(&waits(0), &[0, 4096, 8192]), None);
    }

    /// A sysfs tree: `devices/NAME` directories and `dev/block/MAJ:MIN` links to them.
    struct Fake {
        dir: tempfile::TempDir,
    }

    impl Fake {
        fn new() -> Self {
            let dir = tempfile::tempdir().unwrap();
            std::fs::create_dir_all(dir.path().join("dev/block")).unwrap();
            std::fs::create_dir_all(dir.path().join("devices")).unwrap();
            Fake { dir }
        }
        fn root(&self) -> &Path {
            self.dir.path()
        }
        /// A device directory at `devices/REL` for `dev`, with `files` in it.
        fn device(&self, rel: &str, dev: (u32, u32), files: &[(&str, &str)]) -> PathBuf {
            let d = self.root().join("devices").join(rel);
            std::fs::create_dir_all(&d).unwrap();
            for (name, text) in files {
                let p = d.join(name);
                std::fs::create_dir_all(p.parent().unwrap()).unwrap();
                std::fs::write(p, text).unwrap();
            }
            symlink(
                &d,
                self.root().join(format!("dev/block/{}:{}", dev.0, dev.1)),
            )
            .unwrap();
            d
        }
        fn rotation(&self, dev: (u32, u32)) -> Rotation {
            Sysfs::at(self.root()).rotation_of_dev(rustix::fs::makedev(dev.0, dev.1), 0)
        }
    }

    #[test]
    fn disks_partitions_stacks_and_loops_answer_for_the_storage_beneath() {
        let f = Fake::new();
        f.device("sda", (8, 0), &[("queue/rotational", "1\n")]);
        f.device("sda/sda1", (8, 1), &[("partition", "1\n")]);
        f.device("nvme0n1", (259, 0), &[("queue/rotational", "0\n")]);
        f.device("nvme0n1/nvme0n1p2", (259, 2), &[("partition", "2\n")]);
        f.device("nvme1n1", (259, 5), &[("queue/rotational", "0\n")]);
        f.device("odd", (9, 9), &[("queue/rotational", "x\n")]);
        assert_eq!(f.rotation((8, 0)), Rotation::Rotational);
        assert_eq!(f.rotation((8, 1)), Rotation::Rotational);
        assert_eq!(f.rotation((259, 2)), Rotation::NonRotational);
        assert_eq!(f.rotation((9, 9)), Rotation::Unknown);
        assert_eq!(f.rotation((8, 7)), Rotation::Unknown, "no such device");
        assert_eq!(f.rotation((0, 40)), Rotation::Unknown, "anonymous device");

        // device-mapper over a partition: its own queue flag is not asked.
        let dm = f.device("dm-0", (253, 0), &[("queue/rotational", "0\n")]);
        std::fs::create_dir_all(dm.join("slaves")).unwrap();
        symlink(f.root().join("devices/sda/sda1"), dm.join("slaves/sda1")).unwrap();
        assert_eq!(f.rotation((253, 0)), Rotation::Rotational);
        // md over two SSDs; then over an SSD and a disk.
        let md = f.device("md0", (9, 0), &[("queue/rotational", "1\n")]);
        std::fs::create_dir_all(md.join("slaves")).unwrap();
        symlink(
            f.root().join("devices/nvme0n1/nvme0n1p2"),
            md.join("slaves/a"),
        )
        .unwrap();
        symlink(f.root().join("devices/nvme1n1"), md.join("slaves/b")).unwrap();
        assert_eq!(f.rotation((9, 0)), Rotation::NonRotational);
        symlink(f.root().join("devices/dm-0"), md.join("slaves/c")).unwrap();
        assert_eq!(f.rotation((9, 0)), Rotation::Rotational);

        // A loop device over a file answers for the device holding the file; here that is
        // the test's own temporary directory, faked as an SSD.
        let backing = f.root().join("backing.img");
        std::fs::write(&backing, b"x").unwrap();
        let st_dev = std::fs::metadata(&backing).unwrap().dev();
        let (ma, mi) = (rustix::fs::major(st_dev), rustix::fs::minor(st_dev));
        let lo = f.device(
            "loop3",
            (7, 3),
            &[
                ("queue/rotational", "1\n"),
                ("loop/backing_file", &format!("{}\n", backing.display())),
            ],
        );
        f.device("loop3/loop3p1", (259, 9), &[("partition", "1\n")]);
        if ma == 0 {
            // The temporary directory is on tmpfs or overlay: nothing is known beneath.
            assert_eq!(f.rotation((7, 3)), Rotation::Unknown);
        } else {
            f.device("holder", (ma, mi), &[("queue/rotational", "0\n")]);
            assert_eq!(f.rotation((7, 3)), Rotation::NonRotational);
            assert_eq!(f.rotation((259, 9)), Rotation::NonRotational);
        }
        // A deleted backing file is followed by its name as long as it resolves, and
        // otherwise is unknown.
        std::fs::write(lo.join("loop/backing_file"), "/nonexistent/x (deleted)\n").unwrap();
        assert_eq!(f.rotation((7, 3)), Rotation::Unknown);

        // A loop of links is cut short, not followed forever.
        let a = f.device("cyc", (11, 0), &[]);
        std::fs::create_dir_all(a.join("slaves")).unwrap();
        symlink(&a, a.join("slaves/self")).unwrap();
        assert_eq!(f.rotation((11, 0)), Rotation::Unknown);
    }

    #[test]
    fn the_io_plan_parses_prints_and_resolves() {
        for p in [IoPlan::Sequential, IoPlan::Parallel, IoPlan::Auto] {
            assert_eq!(p.to_string().parse::<IoPlan>(), Ok(p));
        }
        assert!("fast".parse::<IoPlan>().is_err());
        assert_eq!(IoPlan::default(), IoPlan::Auto);
        use Rotation::*;
        assert_eq!(IoPlan::Auto.resolve(Rotational), IoMode::SequentialWhenCold);
        assert_eq!(IoPlan::Auto.resolve(NonRotational), IoMode::Parallel);
        assert_eq!(IoPlan::Auto.resolve(Unknown), IoMode::Parallel);
        assert_eq!(
            IoPlan::Sequential.resolve(NonRotational),
            IoMode::Sequential
        );
        assert_eq!(IoPlan::Parallel.resolve(Rotational), IoMode::Parallel);
    }

    #[cfg(feature = "clap")]
    #[test]
    fn clap_knows_the_same_names() {
        use clap::ValueEnum;
        for p in IoPlan::value_variants() {
            let name = p.to_possible_value().unwrap().get_name().to_string();
            assert_eq!(name, p.to_string());
            assert_eq!(IoPlan::from_str(&name, false), Ok(*p));
        }
    }
}
