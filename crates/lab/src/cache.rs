//! Cold-cache runs without a global `sync(2)`: each caller flushes only the file systems (and
//! block devices) its measurement reads, then drops the clean page cache.
//!
//! A global sync waits for every mounted file system; one stuck behind a kernel oops (an
//! `inline_data` workload can cause one) would block the lab forever. `syncfs(2)` on the file
//! system that holds the data, and `fsync(2)` on a block device, wait for nothing else.

use std::fs::File;
use std::io;
use std::os::fd::AsRawFd;
use std::path::Path;

/// `syncfs(2)` on the file system holding `path` (a file or directory).
pub fn syncfs(path: &Path) -> io::Result<()> {
    let f = File::open(path)?;
    // SAFETY: `f` is an open descriptor for the duration of the call.
    if unsafe { libc::syncfs(f.as_raw_fd()) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Writes back the dirty pages of the file systems holding `paths` (`syncfs`) and of the block
/// devices among them (`fsync`), then `echo 3 > /proc/sys/vm/drop_caches`, which drops only
/// clean pages: what `paths` hold is read from the device afterwards.
pub fn drop_page_cache(paths: &[&Path]) -> io::Result<()> {
    for path in paths {
        use std::os::unix::fs::FileTypeExt;
        if std::fs::metadata(path)?.file_type().is_block_device() {
            File::open(path)?.sync_all()?;
        } else {
            syncfs(path)?;
        }
    }
    std::fs::write("/proc/sys/vm/drop_caches", "3\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn syncfs_flushes_a_file_and_its_directory_and_reports_a_missing_path() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("f");
        std::fs::write(&file, b"dirty").unwrap();
        syncfs(&file).unwrap();
        syncfs(dir.path()).unwrap();
        let err = syncfs(&dir.path().join("missing")).unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::NotFound);
        // drop_page_cache stops at the first path it cannot flush, before touching /proc.
        let err = drop_page_cache(&[&file, &dir.path().join("missing")]).unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::NotFound);
    }
}
