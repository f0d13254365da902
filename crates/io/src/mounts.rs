//! Is a device mounted, and how? Read from /proc/self/mountinfo so that repairs can refuse a
//! file system the kernel is using read-write.

use std::path::Path;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MountState {
    NotMounted,
    ReadOnly,
    ReadWrite,
}

/// Mount state of `dev` (matched by device number for block devices, by path otherwise).
pub fn mount_state(dev: &Path) -> MountState {
    use std::os::unix::fs::{FileTypeExt, MetadataExt};
    let Ok(meta) = std::fs::metadata(dev) else {
        return MountState::NotMounted;
    };
    let canon = std::fs::canonicalize(dev).ok();
    let want_rdev = meta.file_type().is_block_device().then(|| meta.rdev());
    let Ok(text) = std::fs::read_to_string("/proc/self/mountinfo") else {
        return MountState::NotMounted;
    };
    let mut state = MountState::NotMounted;
    for line in text.lines() {
        // Fields: id parent major:minor root mountpoint options ... - fstype source superopts
        let fields: Vec<&str> = line.split_whitespace().collect();
        let Some(sep) = fields.iter().position(|f| *f == "-") else {
            continue;
        };
        let (Some(majmin), Some(opts), Some(source)) =
            (fields.get(2), fields.get(5), fields.get(sep + 2))
        else {
            continue;
        };
        let same_dev = want_rdev.is_some_and(|rdev| {
            let mut it = majmin.split(':').filter_map(|x| x.parse::<u64>().ok());
            match (it.next(), it.next()) {
                (Some(ma), Some(mi)) => libc::makedev(ma as u32, mi as u32) == rdev,
                _ => false,
            }
        });
        let same_path = canon
            .as_ref()
            .is_some_and(|c| std::fs::canonicalize(source).ok().as_ref() == Some(c));
        if same_dev || same_path {
            if opts.split(',').any(|o| o == "rw") {
                return MountState::ReadWrite;
            }
            state = MountState::ReadOnly;
        }
    }
    state
}
