//! What a device holds when it is not ext2/3/4 (as libblkid tells e2fsck: "DEV contains a xfs
//! file system"), and `UUID=`/`LABEL=` device names resolved to a device, through udev's
//! /dev/disk links or, without udev, by reading the superblocks of the block devices.

use ffsck_io::Device;
use std::path::{Path, PathBuf};

/// A signature: the bytes at an offset, the type name blkid gives it, and where its label is
/// (offset, length), if it has one.
struct Magic {
    offset: u64,
    bytes: &'static [u8],
    kind: &'static str,
    label: Option<(u64, usize)>,
}

const MAGICS: &[Magic] = &[
    Magic {
        offset: 0,
        bytes: b"XFSB",
        kind: "xfs",
        label: Some((108, 12)),
    },
    Magic {
        offset: 0x10040,
        bytes: b"_BHRfS_M",
        kind: "btrfs",
        label: Some((0x1012b, 256)),
    },
    Magic {
        offset: 4086,
        bytes: b"SWAPSPACE2",
        kind: "swap",
        label: Some((1024 + 28, 16)),
    },
    Magic {
        offset: 4086,
        bytes: b"SWAP-SPACE",
        kind: "swap",
        label: None,
    },
    Magic {
        offset: 0,
        bytes: b"LUKS\xba\xbe",
        kind: "crypto_LUKS",
        label: None,
    },
    Magic {
        offset: 0,
        bytes: b"hsqs",
        kind: "squashfs",
        label: None,
    },
    Magic {
        offset: 1024,
        bytes: b"\x10\x20\xf5\xf2",
        kind: "f2fs",
        label: None,
    },
    Magic {
        offset: 536,
        bytes: b"LVM2 001",
        kind: "LVM2_member",
        label: None,
    },
    Magic {
        offset: 3,
        bytes: b"NTFS    ",
        kind: "ntfs",
        label: None,
    },
    Magic {
        offset: 82,
        bytes: b"FAT32   ",
        kind: "vfat",
        label: Some((71, 11)),
    },
    Magic {
        offset: 54,
        bytes: b"FAT16   ",
        kind: "vfat",
        label: Some((43, 11)),
    },
    Magic {
        offset: 54,
        bytes: b"FAT12   ",
        kind: "vfat",
        label: Some((43, 11)),
    },
    Magic {
        offset: 0x8001,
        bytes: b"CD001",
        kind: "iso9660",
        label: Some((0x8028, 32)),
    },
    Magic {
        offset: 32768,
        bytes: b"JFS1",
        kind: "jfs",
        label: Some((32768 + 101, 16)),
    },
    Magic {
        offset: 65536 + 52,
        bytes: b"ReIsEr2Fs",
        kind: "reiserfs",
        label: None,
    },
    Magic {
        offset: 65536 + 52,
        bytes: b"ReIsEr3Fs",
        kind: "reiserfs",
        label: None,
    },
];

/// The file system type (and label) blkid would report for a device that is not ext2/3/4.
pub fn foreign(dev: &dyn Device) -> Option<(&'static str, Option<String>)> {
    for m in MAGICS {
        let mut buf = vec![0u8; m.bytes.len()];
        if dev.read_at(&mut buf, m.offset).is_err() || buf != m.bytes {
            continue;
        }
        let label = m.label.and_then(|(off, len)| {
            let mut l = vec![0u8; len];
            dev.read_at(&mut l, off).ok()?;
            let end = l.iter().position(|&b| b == 0).unwrap_or(len);
            let s = String::from_utf8_lossy(&l[..end]).trim_end().to_string();
            (!s.is_empty()).then_some(s)
        });
        return Some((m.kind, label));
    }
    None
}

/// e2fsck's line for a device holding another file system.
pub fn contains_line(name: &str, dev: &dyn Device) -> Option<String> {
    let (kind, label) = foreign(dev)?;
    Some(match label {
        Some(l) => format!("{name} contains a {kind} file system labelled '{l}'"),
        None => format!("{name} contains a {kind} file system"),
    })
}

/// `UUID=...` or `LABEL=...` as a device path; other names unchanged. `None` when no device
/// has it.
pub fn resolve(spec: &Path) -> Option<PathBuf> {
    let s = spec.to_str()?;
    let (by, want) = if let Some(u) = s.strip_prefix("UUID=") {
        ("by-uuid", u.trim_matches('"').to_ascii_lowercase())
    } else if let Some(l) = s.strip_prefix("LABEL=") {
        ("by-label", l.trim_matches('"').to_string())
    } else {
        return Some(spec.to_path_buf());
    };
    let link = Path::new("/dev/disk").join(by).join(&want);
    if let Ok(p) = std::fs::canonicalize(&link) {
        return Some(p);
    }
    // No udev: read the ext2/3/4 superblock of every block device the kernel lists.
    let parts = std::fs::read_to_string("/proc/partitions").ok()?;
    parts
        .lines()
        .skip(2)
        .filter_map(|l| l.split_whitespace().nth(3))
        .map(|n| PathBuf::from("/dev").join(n))
        .find(|p| {
            ext_ids(p).is_some_and(|(uuid, label)| {
                if by == "by-uuid" {
                    uuid == want
                } else {
                    label == want
                }
            })
        })
}

/// The UUID (lower-case, with dashes) and label of an ext2/3/4 superblock on `path`.
fn ext_ids(path: &Path) -> Option<(String, String)> {
    use std::os::unix::fs::FileExt;
    let f = std::fs::File::open(path).ok()?;
    let mut sb = [0u8; 1024];
    f.read_exact_at(&mut sb, 1024).ok()?;
    if u16::from_le_bytes([sb[0x38], sb[0x39]]) != ffsck_format::EXT2_MAGIC {
        return None;
    }
    let u = &sb[0x68..0x78];
    let hex: String = u.iter().map(|b| format!("{b:02x}")).collect();
    let uuid = format!(
        "{}-{}-{}-{}-{}",
        &hex[0..8],
        &hex[8..12],
        &hex[12..16],
        &hex[16..20],
        &hex[20..32]
    );
    let l = &sb[0x78..0x88];
    let end = l.iter().position(|&b| b == 0).unwrap_or(16);
    Some((uuid, String::from_utf8_lossy(&l[..end]).into_owned()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_names_pass_through() {
        assert_eq!(
            resolve(Path::new("/dev/sda1")),
            Some(PathBuf::from("/dev/sda1"))
        );
        assert_eq!(
            resolve(Path::new("UUID=00000000-dead-beef-0000-000000000000")),
            None
        );
    }
}
