//! How ffsck opens the device it checks: e2fsck's mount rules applied to the file system found
//! through any alias (`ffsck_io::mounts`), read-only media refused before any question, and one
//! repair at a time (a lock on image files, `O_EXCL` on block devices). A refusal prints
//! e2fsck's words on stderr and gives exit code 8, having created nothing.

use ffsck_check::exit;
use ffsck_io::mounts::{self, Usage};
use ffsck_io::FileDevice;
use std::fs::{File, OpenOptions};
use std::io::Write;
use std::os::unix::fs::{FileTypeExt, OpenOptionsExt};
use std::path::Path;

/// What the run will do to the device.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// `-n` (and `--estimate`): read only.
    Check,
    /// `-y`, `-p` or questions on the terminal.
    Repair,
    /// `--apply-undo`: writes, and only to a file system nobody uses.
    Undo,
}

/// The verdict of [`check_mount`]: the run may go on, and how the device is to be opened.
pub struct Access {
    mode: Mode,
    usage: Usage,
    /// Open the block device `O_EXCL`: a repair of a file system nobody has mounted.
    exclusive: bool,
    /// The file system is the root, mounted read-only: a repair that changes it means the
    /// kernel's view is stale, and the exit code says to reboot (e2fsck's REBOOT bit).
    pub root: bool,
}

impl Access {
    /// Is the file system mounted (anywhere, through any alias)?
    pub fn mounted(&self) -> bool {
        self.usage.mounted
    }
}

/// An open device and what the run holds while it works on it.
pub struct Opened {
    pub dev: FileDevice,
    pub holds: Holds,
}

impl Opened {
    /// Give up the device but keep the locks and exclusive holds (for a caller that opens the
    /// device itself, as `--apply-undo` does).
    pub fn into_holds(self) -> Holds {
        self.holds
    }
}

/// Locks on image files and exclusive opens of other devices that are the same file system;
/// released when dropped (the kernel releases them when the process ends, whatever ends it).
pub struct Holds(#[allow(dead_code)] Vec<File>);

/// The description of an OS error without Rust's " (os error N)" suffix, as strerror gives it.
pub(crate) fn strerror(e: &std::io::Error) -> String {
    let s = e.to_string();
    match s.find(" (os error ") {
        Some(i) => s[..i].to_string(),
        None => s,
    }
}

/// e2fsck's refusal of a file system that is mounted or busy (exit 8).
fn refuse(name: &str, u: &Usage, mounted: bool) -> i32 {
    let _ = std::io::stdout().flush();
    let what = if mounted && !u.through_other {
        "mounted"
    } else {
        "in use"
    };
    let mut msg = format!("{name} is {what}.\n");
    if let Some(mp) = &u.mount_point {
        let rw = if u.writable {
            "read-write"
        } else {
            "read-only"
        };
        match u.mounted_as.as_deref() {
            // Mounted through a device built on it (a partition, a device-mapper device).
            Some(src) if u.through_other => {
                msg += &format!(
                    "ffsck: {name} is in use: {} is mounted {rw} on {}.\n",
                    src.display(),
                    mp.display()
                )
            }
            Some(src) if src != Path::new(name) => {
                msg += &format!(
                    "ffsck: {name} is mounted {rw} on {} as {}.\n",
                    mp.display(),
                    src.display()
                )
            }
            _ => msg += &format!("ffsck: {name} is mounted {rw} on {}.\n", mp.display()),
        }
    }
    eprint!("{msg}ffsck: Cannot continue, aborting.\n\n");
    let lines: Vec<&str> = msg
        .lines()
        .map(|l| l.trim_start_matches("ffsck: "))
        .collect();
    crate::report::error(lines.join(" "));
    exit::ERROR
}

/// Whether a block device is held exclusively by someone (a mount, another fsck, a device
/// built on it): `O_EXCL` is refused with EBUSY. A read-only probe, as e2fsck makes.
fn held_exclusively(path: &Path) -> bool {
    OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_EXCL | libc::O_CLOEXEC)
        .open(path)
        .is_err_and(|e| e.raw_os_error() == Some(libc::EBUSY))
}

/// e2fsck's check_mount: may a run in `mode` go on with the file system at `path`?
///
/// Not mounted: yes. The root, mounted read-only: yes, silently. `-n`, or `-f` on a
/// read-only mount: yes, after "Warning!  DEV is mounted.". Otherwise: "DEV is mounted.",
/// "Cannot continue, aborting.", exit 8 (an interactive run is refused too, not asked).
/// `--apply-undo` is refused on any mounted or busy file system.
pub fn check_mount(path: &Path, name: &str, mode: Mode, force: bool) -> Result<Access, i32> {
    let usage = mounts::usage(path);
    let is_block = std::fs::metadata(path).is_ok_and(|m| m.file_type().is_block_device());
    // Busy without a mount: e2fsck's exclusive-open probe (block devices only).
    let busy = !usage.mounted && is_block && held_exclusively(path);
    let root = usage.mounted && usage.is_root && !usage.writable;
    let access = |exclusive| Access {
        mode,
        usage: usage.clone(),
        exclusive,
        root,
    };
    if !usage.mounted && !busy {
        return Ok(access(mode != Mode::Check));
    }
    if mode == Mode::Undo {
        return Err(refuse(name, &usage, usage.mounted));
    }
    if root {
        return Ok(access(false));
    }
    if mode == Mode::Check || (force && usage.mounted && !usage.writable) {
        let what = if usage.mounted && !usage.through_other {
            "mounted"
        } else {
            "in use"
        };
        println!("Warning!  {name} is {what}.");
        return Ok(access(false));
    }
    Err(refuse(name, &usage, usage.mounted))
}

/// e2fsck's report of a failed open (exit 8): the error, then its hint.
fn open_failed(e: &std::io::Error, name: &str, write: bool) -> i32 {
    if e.raw_os_error() == Some(libc::EBUSY) {
        return refuse(name, &Usage::default(), false);
    }
    let _ = std::io::stdout().flush();
    eprintln!("ffsck: {} while trying to open {name}", strerror(e));
    crate::report::error(format!("{} while trying to open {name}", strerror(e)));
    let access = if write { "r/w" } else { "r/o" };
    let hint = match e.raw_os_error() {
        Some(libc::EPERM | libc::EACCES) => {
            format!("You must have {access} access to the filesystem or be root")
        }
        Some(libc::ENXIO) => "Possibly non-existent or swap device?".into(),
        Some(libc::ENOENT) => "Possibly non-existent device?".into(),
        Some(libc::EROFS) => WRITE_PROTECTED.into(),
        _ => String::new(),
    };
    if !hint.is_empty() {
        eprintln!("{hint}");
    }
    exit::ERROR
}

/// e2fsck's hint for a device that cannot be written.
const WRITE_PROTECTED: &str =
    "Disk write-protected; use the -n option to do a read-only\ncheck of the device.";

/// BLKROGET, `_IO(0x12, 94)`: the block layer's read-only flag of a device (libc has no
/// constant for it, and rustix no wrapper).
const BLKROGET: u64 = 0x125e;

/// Whether the kernel marks the block device behind `f` read-only.
fn block_read_only(f: &File) -> bool {
    use std::os::fd::AsRawFd;
    let mut ro: libc::c_int = 0;
    // SAFETY: BLKROGET stores one int through its argument, which points at a live c_int;
    // the descriptor stays open for the call. A failed ioctl leaves `ro` at 0.
    let r = unsafe { libc::ioctl(f.as_raw_fd(), BLKROGET as _, &mut ro as *mut libc::c_int) };
    r == 0 && ro != 0
}

/// Lock an image file for the run: exclusive for a repair, shared for a check, so two checks
/// run together but nothing reads an image while a repair writes it. `Ok(None)`: another
/// run holds a conflicting lock. A file system without locks (or a file that cannot be opened
/// here) is not locked.
fn lock_image(path: &Path, exclusive: bool) -> Result<Option<File>, ()> {
    use rustix::fs::FlockOperation as Op;
    // Opened for writing where it can be for an exclusive lock: NFS emulates flock with
    // byte-range locks, whose exclusive kind needs a writable descriptor.
    let opened = if exclusive {
        OpenOptions::new()
            .read(true)
            .write(true)
            .open(path)
            .or_else(|_| File::open(path))
    } else {
        File::open(path)
    };
    let Ok(f) = opened else {
        return Ok(None);
    };
    let op = if exclusive {
        Op::NonBlockingLockExclusive
    } else {
        Op::NonBlockingLockShared
    };
    match rustix::fs::flock(&f, op) {
        Ok(()) => Ok(Some(f)),
        Err(rustix::io::Errno::WOULDBLOCK) => Err(()),
        Err(_) => Ok(None),
    }
}

/// Open the device as [`check_mount`] allowed: lock it, open it (read-only for a check,
/// read-write and `O_EXCL` where the rules say), refuse read-only media, and hold the other
/// devices that are the same file system so nobody mounts them during a repair.
pub fn open(path: &Path, name: &str, access: &Access) -> Result<Opened, i32> {
    let write = access.mode != Mode::Check;
    let meta = std::fs::metadata(path).map_err(|e| open_failed(&e, name, write))?;
    let ft = meta.file_type();
    if ft.is_dir() {
        let _ = std::io::stdout().flush();
        eprintln!("ffsck: Is a directory while trying to open {name}");
        crate::report::error(format!("Is a directory while trying to open {name}"));
        return Err(exit::ERROR);
    }
    if !ft.is_file() && !ft.is_block_device() {
        eprintln!("ffsck: {name} is not a block device or an image file.");
        crate::report::error(format!("{name} is not a block device or an image file"));
        return Err(exit::ERROR);
    }
    let mut holds = Vec::new();
    // The lock is on the image, whichever way it is reached: the file itself, or the
    // backing file of a loop device.
    let images: Vec<&Path> = if ft.is_file() {
        vec![path]
    } else {
        access
            .usage
            .backing_files
            .iter()
            .map(|p| p.as_path())
            .collect()
    };
    for image in images {
        match lock_image(image, write) {
            Ok(lock) => holds.extend(lock),
            Err(()) => return Err(refuse(name, &Usage::default(), false)),
        }
    }
    let mut opts = OpenOptions::new();
    opts.read(true).write(write);
    let mut flags = libc::O_CLOEXEC;
    if write && access.exclusive && ft.is_block_device() {
        flags |= libc::O_EXCL;
    }
    opts.custom_flags(flags);
    let file = opts.open(path).map_err(|e| open_failed(&e, name, write))?;
    if write && ft.is_block_device() && block_read_only(&file) {
        // Linux lets a read-only block device be opened for writing and fails the writes;
        // e2fsck asks BLKROGET and reports EPERM, with this hint.
        let e = std::io::Error::from_raw_os_error(libc::EPERM);
        return Err(open_failed(&e, name, write));
    }
    if write && access.exclusive {
        // Other loop devices over the same image: held exclusively, so none is mounted (or
        // repaired through) while this run writes. One already held is in use elsewhere.
        for alias in &access.usage.alias_devices {
            match OpenOptions::new()
                .read(true)
                .custom_flags(libc::O_EXCL | libc::O_CLOEXEC)
                .open(alias)
            {
                Ok(f) => holds.push(f),
                Err(e) if e.raw_os_error() == Some(libc::EBUSY) => {
                    return Err(refuse(name, &Usage::default(), false))
                }
                Err(_) => {}
            }
        }
    }
    let dev = FileDevice::from_file(file, write).map_err(|e| {
        eprintln!("ffsck: {e} while trying to open {name}");
        crate::report::error(format!("{e} while trying to open {name}"));
        exit::ERROR
    })?;
    Ok(Opened {
        dev,
        holds: Holds(holds),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strerror_drops_the_os_error_number() {
        let e = std::io::Error::from_raw_os_error(libc::EROFS);
        assert_eq!(strerror(&e), "Read-only file system");
        let e = std::io::Error::from_raw_os_error(libc::ENOENT);
        assert_eq!(strerror(&e), "No such file or directory");
    }

    #[test]
    fn a_repair_lock_excludes_checks_and_repairs_but_checks_share() {
        let dir = tempfile::tempdir().unwrap();
        let img = dir.path().join("img");
        std::fs::write(&img, [0u8; 4096]).unwrap();
        let check1 = lock_image(&img, false).unwrap();
        assert!(check1.is_some());
        assert!(lock_image(&img, false).unwrap().is_some());
        assert!(lock_image(&img, true).is_err());
        drop(check1);
        let repair = lock_image(&img, true).unwrap();
        assert!(repair.is_some());
        assert!(lock_image(&img, true).is_err());
        assert!(lock_image(&img, false).is_err());
        drop(repair);
        assert!(lock_image(&img, true).unwrap().is_some());
    }
}
