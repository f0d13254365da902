//! Is a file system in use by the kernel, and how? Found by identity, not by name: a block
//! device by its device number against /proc/self/mountinfo, an image file through every loop
//! device whose backing file is the same inode (sysfs names it; device and inode numbers decide,
//! so renames and other paths to the file do not hide it), other loop devices over the same
//! image, and the devices built on it (partitions, device-mapper and md holders, loop devices at
//! an offset), whose mounts make it busy too. Repairs use it to refuse a file system the kernel
//! is using read-write, as e2fsck's check_mount does.

use std::collections::VecDeque;
use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{FileTypeExt, MetadataExt};
use std::path::{Path, PathBuf};

/// How the kernel uses the file system at a path.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Usage {
    /// Some mount (or swap area) uses it: its own device, another device that is the same file
    /// system, or a device built on it.
    pub mounted: bool,
    /// A mount may write it: the superblock of one of its mounts is read-write, or a device
    /// built on it (a partition, a device-mapper or md device, a loop device at an offset, a
    /// swap area) is in use, about which nothing read-only can be assumed.
    pub writable: bool,
    /// Every use found is of a device built on it (a partition, a device-mapper or md
    /// device, a loop device at an offset), not of the file system itself: e2fsck's "in
    /// use" rather than "mounted".
    pub through_other: bool,
    /// One of its mounts is at "/", or "/" is on it.
    pub is_root: bool,
    /// Where it is mounted (the first mount found), for messages.
    pub mount_point: Option<PathBuf>,
    /// The device the mount table names for that mount ("/dev/loop1"), for messages.
    pub mounted_as: Option<PathBuf>,
    /// Other block devices that are this very file system (loop devices over the same image at
    /// offset 0), as device nodes: a repair holds them exclusively so nobody mounts them.
    pub alias_devices: Vec<PathBuf>,
    /// Image files that hold this file system (the backing file of a loop device given as the
    /// target), verified by device and inode number: a repair locks them as it locks an image.
    pub backing_files: Vec<PathBuf>,
}

/// One line of /proc/self/mountinfo.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MountEntry {
    pub major: u32,
    pub minor: u32,
    /// The mount point, octal escapes (`\040` for a space) decoded.
    pub mount_point: PathBuf,
    /// The mount's own options ("rw,relatime").
    pub mount_options: String,
    pub fs_type: String,
    /// The mount source ("/dev/loop0"), decoded.
    pub source: PathBuf,
    /// The superblock's options: "rw" there means the file system itself is writable.
    pub super_options: String,
}

impl MountEntry {
    /// The file system (not just this view of it) is mounted read-write.
    pub fn super_rw(&self) -> bool {
        self.super_options.split(',').any(|o| o == "rw")
    }
}

/// Decode the kernel's octal escapes (`\040` space, `\011` tab, `\012` newline, `\134`
/// backslash) in a mountinfo or /proc/swaps field; anything else is kept as it is.
fn unescape(field: &str) -> PathBuf {
    let b = field.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'\\' && b.len() - i >= 4 {
            let digits = &b[i + 1..i + 4];
            if digits.iter().all(|d| (b'0'..=b'7').contains(d)) {
                let v = digits
                    .iter()
                    .fold(0u32, |acc, d| acc * 8 + u32::from(d - b'0'));
                if let Ok(byte) = u8::try_from(v) {
                    out.push(byte);
                    i += 4;
                    continue;
                }
            }
        }
        out.push(b[i]);
        i += 1;
    }
    PathBuf::from(OsStr::from_bytes(&out))
}

/// Parse /proc/self/mountinfo text; malformed lines are skipped.
///
/// A line: `id parent major:minor root mount-point mount-options [optional fields...] -
/// fs-type source super-options`.
pub fn parse_mountinfo(text: &str) -> Vec<MountEntry> {
    text.lines()
        .filter_map(|line| {
            let f: Vec<&str> = line.split(' ').filter(|s| !s.is_empty()).collect();
            let sep = f.iter().skip(6).position(|x| *x == "-")? + 6;
            let (major, minor) = f.get(2)?.split_once(':')?;
            Some(MountEntry {
                major: major.parse().ok()?,
                minor: minor.parse().ok()?,
                mount_point: unescape(f.get(4)?),
                mount_options: f.get(5)?.to_string(),
                fs_type: f.get(sep + 1)?.to_string(),
                source: unescape(f.get(sep + 2)?),
                super_options: f.get(sep + 3).unwrap_or(&"").to_string(),
            })
        })
        .collect()
}

/// The file names (the first column) of /proc/swaps text, decoded.
pub fn parse_swaps(text: &str) -> Vec<PathBuf> {
    text.lines()
        .skip(1)
        .filter_map(|l| l.split_whitespace().next().map(unescape))
        .collect()
}

/// What a device or file is, by identity.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum Ident {
    /// A block device, by device number.
    Block(u64),
    /// A file, by the device it is on and its inode number.
    File(u64, u64),
}

fn ident_of(meta: &std::fs::Metadata) -> Option<Ident> {
    let ft = meta.file_type();
    if ft.is_block_device() {
        Some(Ident::Block(meta.rdev()))
    } else if ft.is_file() {
        Some(Ident::File(meta.dev(), meta.ino()))
    } else {
        None
    }
}

/// A bound loop device: its device number and node, what backs it, and whether it shows the
/// whole backing file (offset 0, no size limit) or a part of it.
struct Loop {
    dev: u64,
    node: PathBuf,
    backing: Ident,
    backing_path: PathBuf,
    whole: bool,
}

/// At most this many block devices are looked at (the whole of /sys/block on any real machine).
const MAX_DEVICES: usize = 1 << 16;

fn read_trim(p: &Path) -> Option<String> {
    std::fs::read_to_string(p)
        .ok()
        .map(|s| s.trim().to_string())
}

/// "MAJ:MIN" from a sysfs `dev` file.
fn read_devno(dir: &Path) -> Option<u64> {
    let s = read_trim(&dir.join("dev"))?;
    let (ma, mi) = s.split_once(':')?;
    Some(rustix::fs::makedev(ma.parse().ok()?, mi.parse().ok()?))
}

/// The device node of a sysfs block device directory (DEVNAME in its uevent, else its name).
fn node_of(dir: &Path) -> Option<PathBuf> {
    let uevent = std::fs::read_to_string(dir.join("uevent")).unwrap_or_default();
    let name = uevent
        .lines()
        .find_map(|l| l.strip_prefix("DEVNAME="))
        .map(str::to_string)
        .or_else(|| dir.file_name().map(|n| n.to_string_lossy().into_owned()))?;
    Some(Path::new("/dev").join(name))
}

/// Every bound loop device (one whose sysfs directory names a backing file that exists).
fn loops() -> Vec<Loop> {
    let Ok(rd) = std::fs::read_dir("/sys/block") else {
        return Vec::new();
    };
    rd.flatten()
        .take(MAX_DEVICES)
        .filter_map(|e| {
            let dir = e.path();
            let raw = std::fs::read(dir.join("loop/backing_file")).ok()?;
            let raw = raw.strip_suffix(b"\n").unwrap_or(&raw);
            let path = PathBuf::from(OsStr::from_bytes(raw));
            // A deleted backing file is shown with a suffix; it is nobody's image any more
            // by path, but stat the name as given first in case it really ends so.
            let meta = std::fs::metadata(&path).ok().or_else(|| {
                let p = raw.strip_suffix(b" (deleted)")?;
                std::fs::metadata(OsStr::from_bytes(p)).ok()
            })?;
            let offset = read_trim(&dir.join("loop/offset")).unwrap_or_default();
            let limit = read_trim(&dir.join("loop/sizelimit")).unwrap_or_default();
            Some(Loop {
                dev: read_devno(&dir)?,
                node: node_of(&dir)?,
                backing: ident_of(&meta)?,
                backing_path: path,
                whole: offset == "0" && limit == "0",
            })
        })
        .collect()
}

/// Devices built on block device `dev`: its partitions and its holders (device-mapper, md,
/// bcache...), as device numbers.
fn built_on(dev: u64) -> Vec<u64> {
    let dir = PathBuf::from(format!(
        "/sys/dev/block/{}:{}",
        rustix::fs::major(dev),
        rustix::fs::minor(dev)
    ));
    let mut out = Vec::new();
    if let Ok(rd) = std::fs::read_dir(&dir) {
        for e in rd.flatten().take(MAX_DEVICES) {
            let p = e.path();
            if p.join("partition").exists() {
                out.extend(read_devno(&p));
            }
        }
    }
    if let Ok(rd) = std::fs::read_dir(dir.join("holders")) {
        for e in rd.flatten().take(MAX_DEVICES) {
            out.extend(read_devno(&e.path()));
        }
    }
    out
}

/// How the kernel uses the file system at `path` (nothing, when it cannot be looked at).
pub fn usage(path: &Path) -> Usage {
    let Ok(meta) = std::fs::metadata(path) else {
        return Usage::default();
    };
    let Some(target) = ident_of(&meta) else {
        return Usage::default();
    };
    let loops = loops();
    // Walk from the target: an alias is the same file system (a loop device over the same
    // image at offset 0, or the image behind a loop device given as the target); anything
    // reached through a partition, a holder or a partial loop device is only related.
    let mut seen: Vec<(Ident, bool)> = vec![(target, true)];
    let mut queue: VecDeque<(Ident, bool)> = VecDeque::from([(target, true)]);
    while let Some((node, alias)) = queue.pop_front() {
        if seen.len() >= MAX_DEVICES {
            break;
        }
        let mut next: Vec<(Ident, bool)> = Vec::new();
        for l in &loops {
            // A loop device over this node, and the node behind a loop device.
            if l.backing == node {
                next.push((Ident::Block(l.dev), alias && l.whole));
            }
            if node == Ident::Block(l.dev) {
                next.push((l.backing, alias && l.whole));
            }
        }
        if let Ident::Block(dev) = node {
            next.extend(built_on(dev).into_iter().map(|d| (Ident::Block(d), false)));
        }
        for (id, a) in next {
            match seen.iter_mut().find(|(s, _)| *s == id) {
                // Found again as an alias after being reached as related: upgrade it.
                Some(entry) if a && !entry.1 => {
                    entry.1 = true;
                    queue.push_back((id, true));
                }
                Some(_) => {}
                None => {
                    seen.push((id, a));
                    queue.push_back((id, a));
                }
            }
        }
    }

    let mut u = Usage::default();
    let mut own_use = false;
    let is_alias = |id: Ident| seen.iter().any(|&(s, a)| s == id && a);
    let is_related = |id: Ident| seen.iter().any(|&(s, a)| s == id && !a);
    for l in &loops {
        if Ident::Block(l.dev) != target && is_alias(Ident::Block(l.dev)) {
            u.alias_devices.push(l.node.clone());
        }
        if Ident::Block(l.dev) == target
            && matches!(l.backing, Ident::File(..))
            && is_alias(l.backing)
        {
            u.backing_files.push(l.backing_path.clone());
        }
    }

    let mountinfo = std::fs::read_to_string("/proc/self/mountinfo").unwrap_or_default();
    for m in parse_mountinfo(&mountinfo) {
        let id = Ident::Block(rustix::fs::makedev(m.major, m.minor));
        let alias = is_alias(id);
        if !alias && !is_related(id) {
            continue;
        }
        u.mounted = true;
        own_use |= alias;
        u.writable |= !alias || m.super_rw();
        u.is_root |= alias && m.mount_point == Path::new("/");
        if u.mount_point.is_none() {
            u.mount_point = Some(m.mount_point.clone());
            u.mounted_as = Some(m.source.clone());
        }
    }
    // The root may be listed under a name that says nothing ("/dev/root"); its device
    // number says it (e2fsck looks at "/" the same way).
    if let Ok(root) = std::fs::metadata("/") {
        if is_alias(Ident::Block(root.dev())) && !u.is_root {
            u.is_root = true;
            own_use = true;
            if !u.mounted {
                u.mounted = true;
                u.writable = rustix::fs::statvfs("/").map_or(true, |s| {
                    !s.f_flag.contains(rustix::fs::StatVfsMountFlags::RDONLY)
                });
                u.mount_point = Some(PathBuf::from("/"));
            }
        }
    }
    // A swap area is in use read-write.
    let swaps = std::fs::read_to_string("/proc/swaps").unwrap_or_default();
    for s in parse_swaps(&swaps) {
        let Some(id) = std::fs::metadata(&s).ok().as_ref().and_then(ident_of) else {
            continue;
        };
        if is_alias(id) || is_related(id) {
            u.mounted = true;
            own_use |= is_alias(id);
            u.writable = true;
            if u.mount_point.is_none() {
                u.mount_point = Some(PathBuf::from("<swap>"));
                u.mounted_as = Some(s);
            }
        }
    }
    u.through_other = u.mounted && !own_use;
    u
}

#[cfg(test)]
mod tests {
    use super::*;

    const SAMPLE: &str = "\
22 27 0:21 / /proc rw,relatime - proc proc rw
27 1 254:0 / / rw,relatime shared:1 - ext4 /dev/vda rw,discard
61 27 7:3 / /mnt/with\\040space\\011tab ro,relatime shared:40 master:2 - ext4 /dev/loop3 ro
62 27 7:3 /sub /srv/bind\\134x rw,relatime - ext4 /dev/loop3 ro
63 27 7:4 / /mnt/img rw - ext4 /tmp/my\\040image.img rw,errors=remount-ro
garbage line
64 27 x:y / /bad rw - ext4 /dev/bad rw
65 27 8:1 / /nosep rw ext4 /dev/sda1 rw
";

    #[test]
    fn mountinfo_fields_and_octal_escapes() {
        let m = parse_mountinfo(SAMPLE);
        assert_eq!(m.len(), 5, "{m:#?}");
        assert_eq!((m[1].major, m[1].minor), (254, 0));
        assert_eq!(m[1].mount_point, Path::new("/"));
        assert!(m[1].super_rw());
        assert_eq!(m[2].mount_point, Path::new("/mnt/with space\ttab"));
        assert_eq!(m[2].mount_options, "ro,relatime");
        assert_eq!(m[2].fs_type, "ext4");
        assert_eq!(m[2].source, Path::new("/dev/loop3"));
        assert!(!m[2].super_rw());
        // A bind mount of the same device: another line, same numbers.
        assert_eq!((m[3].major, m[3].minor), (7, 3));
        assert_eq!(m[3].mount_point, Path::new("/srv/bind\\x"));
        assert_eq!(m[4].source, Path::new("/tmp/my image.img"));
        assert_eq!(m[4].super_options, "rw,errors=remount-ro");
        assert!(m[4].super_rw());
    }

    #[test]
    fn unescape_keeps_what_is_not_an_escape() {
        assert_eq!(unescape("a\\040b"), Path::new("a b"));
        assert_eq!(unescape("a\\04"), Path::new("a\\04"));
        assert_eq!(unescape("a\\0"), Path::new("a\\0"));
        assert_eq!(unescape("\\"), Path::new("\\"));
        assert_eq!(unescape("a\\999"), Path::new("a\\999"));
        // 0o777 does not fit a byte: kept as text.
        assert_eq!(unescape("\\777"), Path::new("\\777"));
        // Non-UTF-8 bytes survive.
        assert_eq!(unescape("\\377").as_os_str().as_bytes(), &[0xff]);
        assert_eq!(unescape("\\134\\040"), Path::new("\\ "));
    }

    #[test]
    fn swaps_file_names() {
        let s = "Filename\tType\tSize\tUsed\tPriority\n/dev/zram0 partition 8 0 100\n/swap\\040file file 8 0 -2\n";
        assert_eq!(
            parse_swaps(s),
            vec![PathBuf::from("/dev/zram0"), PathBuf::from("/swap file")]
        );
    }

    #[test]
    fn a_plain_file_is_not_mounted() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("img");
        std::fs::write(&p, b"x").unwrap();
        let u = usage(&p);
        assert!(!u.mounted && !u.writable && !u.is_root, "{u:?}");
        assert!(u.alias_devices.is_empty() && u.backing_files.is_empty());
        assert_eq!(usage(&dir.path().join("missing")), Usage::default());
    }
}
