//! The file / block-device backend: positioned reads with `pread`, no shared cursor, so any
//! number of threads can read at once.

use crate::{Device, IoError, ReadCounter, Result};
use std::fs::{File, OpenOptions};
use std::os::unix::fs::{FileExt, FileTypeExt, OpenOptionsExt};
use std::path::Path;

pub struct FileDevice {
    file: File,
    size: u64,
    writable: bool,
    counter: ReadCounter,
}

impl FileDevice {
    /// Open read-only: the only mode a `-n` check uses, so it can never write.
    pub fn open_read_only(path: &Path) -> Result<Self> {
        Self::open(path, false)
    }
    /// Open for repair; block devices are opened `O_EXCL` so a mount or another fsck is refused.
    pub fn open_read_write(path: &Path) -> Result<Self> {
        Self::open(path, true)
    }
    fn open(path: &Path, write: bool) -> Result<Self> {
        let err = |source| IoError::Open {
            path: path.display().to_string(),
            source,
        };
        let meta = std::fs::metadata(path).map_err(err)?;
        let ft = meta.file_type();
        if ft.is_dir() {
            return Err(IoError::Open {
                path: path.display().to_string(),
                source: std::io::Error::other("is a directory"),
            });
        }
        let mut opts = OpenOptions::new();
        opts.read(true).write(write);
        if write && ft.is_block_device() {
            opts.custom_flags(libc::O_EXCL);
        }
        let file = opts.open(path).map_err(err)?;
        Self::from_file(file, write)
    }

    /// Wrap a file or block device the caller opened (with the flags its policy chose:
    /// `O_EXCL` or not, locks held elsewhere). `writable`: the file was opened for writing
    /// and repairs may write through it.
    pub fn from_file(file: File, writable: bool) -> Result<Self> {
        let meta = file
            .metadata()
            .map_err(|source| IoError::Io { offset: 0, source })?;
        let size = if meta.file_type().is_block_device() {
            use std::io::{Seek, SeekFrom};
            let mut f = &file;
            f.seek(SeekFrom::End(0))
                .map_err(|source| IoError::Io { offset: 0, source })?
        } else {
            meta.len()
        };
        Ok(FileDevice {
            file,
            size,
            writable,
            counter: ReadCounter::default(),
        })
    }
}

impl Device for FileDevice {
    fn size(&self) -> u64 {
        self.size
    }
    fn read_at(&self, buf: &mut [u8], offset: u64) -> Result<()> {
        if offset
            .checked_add(buf.len() as u64)
            .is_none_or(|end| end > self.size)
        {
            return Err(IoError::ShortRead {
                offset,
                len: buf.len(),
            });
        }
        self.file
            .read_exact_at(buf, offset)
            .map_err(|source| IoError::Io { offset, source })?;
        self.counter.add(buf.len());
        Ok(())
    }
    fn write_at(&self, buf: &[u8], offset: u64) -> Result<()> {
        if !self.writable {
            return Err(IoError::ReadOnly);
        }
        self.file
            .write_all_at(buf, offset)
            .map_err(|source| IoError::Io { offset, source })
    }
    fn flush(&self) -> Result<()> {
        if self.writable {
            self.file
                .sync_all()
                .map_err(|source| IoError::Io { offset: 0, source })?;
        }
        Ok(())
    }
    fn bytes_read(&self) -> u64 {
        self.counter.get()
    }
    fn is_cached(&self, offset: u64) -> Option<bool> {
        Some(self.in_page_cache(offset))
    }

    fn no_read_ahead(&self) {
        // POSIX_FADV_RANDOM: the kernel reads each read as asked; WILLNEED hints still read
        // their whole ranges. Refused, it changes nothing.
        let _ = rustix::fs::fadvise(&self.file, 0, None, rustix::fs::Advice::Random);
    }

    fn will_need(&self, ranges: &[(u64, u64)]) {
        let clamp = |&(offset, len): &(u64, u64)| {
            std::num::NonZeroU64::new(len.min(self.size.saturating_sub(offset)))
                .map(|len| (offset, len))
        };
        // When the first, middle and last bytes of the first `HINT_PROBES` ranges are in the
        // page cache already, the batch is not hinted: on a warm cache the hints would only
        // cost the kernel a lookup per page (about 5% of pass 2 on a file system of one-block
        // directories). The probes go in the batch's order and stop at the first byte not
        // cached, and the hints start at its range: a probe of a page not cached starts
        // reading it (RWF_NOWAIT still submits the read, it only does not wait), so a probe
        // further on would put that read ahead of the ranges before it, and on a hard disk
        // cost a seek there and back (`ffsck-lab hdd` traced it at the head of each sweep).
        let cold = ranges
            .iter()
            .filter_map(clamp)
            .take(HINT_PROBES)
            .position(|(offset, len)| {
                let last = offset + (len.get() - 1);
                ![offset, offset + len.get() / 2, last]
                    .iter()
                    .all(|&o| self.in_page_cache(o))
            });
        let Some(from) = cold else {
            return;
        };
        for (offset, len) in ranges.iter().filter_map(clamp).skip(from) {
            // The kernel starts the reads in the background; a hint it refuses changes
            // nothing.
            let _ =
                rustix::fs::fadvise(&self.file, offset, Some(len), rustix::fs::Advice::WillNeed);
        }
    }
}

impl FileDevice {
    /// Whether the byte at `offset` is in the page cache, so reading it would not wait for
    /// the device.
    fn in_page_cache(&self, offset: u64) -> bool {
        // One byte read with RWF_NOWAIT, which fails rather than wait for the device (and
        // on kernels without it, fails outright: then nothing counts as cached).
        let mut byte = [0u8; 1];
        offset < self.size
            && matches!(
                rustix::io::preadv2(
                    &self.file,
                    &mut [std::io::IoSliceMut::new(&mut byte)],
                    offset,
                    rustix::io::ReadWriteFlags::NOWAIT,
                ),
                Ok(1)
            )
    }
}

/// Ranges at the head of a `will_need` batch probed for being in the page cache already.
const HINT_PROBES: usize = 8;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn in_page_cache_is_false_past_the_end_and_true_for_bytes_just_written() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("img");
        std::fs::write(&path, vec![1u8; 8192]).unwrap();
        let dev = FileDevice::open_read_only(&path).unwrap();
        assert!(!dev.in_page_cache(8192));
        assert!(!dev.in_page_cache(u64::MAX));
        // Written through the page cache a moment ago, so resident.
        assert!(dev.in_page_cache(0));
        assert!(dev.in_page_cache(8191));
        // The probe reads nothing into the caller's accounting.
        assert_eq!(dev.bytes_read(), 0);
        // Hints past the end, empty or overflowing are dropped, not a panic.
        dev.will_need(&[
            (0, 8192),
            (8000, 1 << 20),
            (8192, 10),
            (u64::MAX, u64::MAX),
            (4096, 0),
        ]);
        dev.will_need(&[]);
    }
}
