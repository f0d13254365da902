//! Block-device access for ffsck: one `Device` trait and its backends (file or block device,
//! in-memory image, copy-on-write overlay, simulated power loss), the crash-safe write path
//! (redo log, undo file), and the mount-table check that guards repairs.
//!
//! Everything above this crate reads through `Device`, so tests can swap in memory images and
//! a repair stages its writes in an `Overlay` before `RedoLog` commits them.

#![forbid(unsafe_code)]

pub mod device_kind;
pub mod e2undo;
mod file;
pub mod logfile;
mod mem;
pub mod mounts;
pub mod overlay;
pub mod redo;
pub mod sim;
pub mod stream;
pub mod undo;

pub use file::FileDevice;
pub use mem::MemDevice;

use std::sync::atomic::{AtomicU64, Ordering};
use thiserror::Error;

#[derive(Debug, Error)]
pub enum IoError {
    #[error("{path}: {source}")]
    Open {
        path: String,
        source: std::io::Error,
    },
    #[error("attempt to read block from filesystem resulted in short read (offset {offset}, {len} bytes)")]
    ShortRead { offset: u64, len: usize },
    #[error("I/O error at offset {offset}: {source}")]
    Io { offset: u64, source: std::io::Error },
    #[error("device is opened read-only")]
    ReadOnly,
    #[error("{0}")]
    Refused(String),
}

pub type Result<T> = std::result::Result<T, IoError>;

/// A random-access device. Implementations are shared between threads, so reads take `&self`.
pub trait Device: Send + Sync {
    /// Size of the device in bytes.
    fn size(&self) -> u64;
    /// Fill `buf` from `offset`; reading past the end is a `ShortRead`.
    fn read_at(&self, buf: &mut [u8], offset: u64) -> Result<()>;
    /// Write `buf` at `offset`.
    fn write_at(&self, buf: &[u8], offset: u64) -> Result<()>;
    /// Make previous writes durable.
    fn flush(&self) -> Result<()>;
    /// Bytes read so far (for benchmarks and the read-once accounting).
    fn bytes_read(&self) -> u64;
    /// Hint that the byte ranges `(offset, len)` will be read soon: a backend may start
    /// reading them in the background, so several reads are outstanding while the caller
    /// works on earlier ones, and may skip the lot when a sample of it is in memory already.
    /// Only a hint: it reads nothing into the caller and cannot fail.
    fn will_need(&self, ranges: &[(u64, u64)]) {
        let _ = ranges;
    }
    /// From now on, read only what is asked (or hinted with [`Device::will_need`]): no
    /// read-ahead of the backend's own. For a caller that hints everything it will read in
    /// disk order: the kernel's read-ahead, guessing from reads several threads make
    /// through one file, would read data blocks no one needs between the hinted ones.
    fn no_read_ahead(&self) {}
    /// Whether the byte at `offset` is in memory already (the page cache), so reading it would
    /// not wait for the device; `None` when the backend cannot tell.
    fn is_cached(&self, offset: u64) -> Option<bool> {
        let _ = offset;
        None
    }
}

/// Shared read accounting for backends.
#[derive(Default, Debug)]
pub struct ReadCounter(AtomicU64);
impl ReadCounter {
    pub fn add(&self, n: usize) {
        self.0.fetch_add(n as u64, Ordering::Relaxed);
    }
    pub fn get(&self) -> u64 {
        self.0.load(Ordering::Relaxed)
    }
}

/// Read a range, returning how much of it exists instead of failing on a truncated device: the
/// missing tail is zero-filled and reported, so a checker can treat truncation as a finding.
pub fn read_partial(dev: &dyn Device, buf: &mut [u8], offset: u64) -> Result<usize> {
    let size = dev.size();
    if offset >= size {
        buf.fill(0);
        return Ok(0);
    }
    let avail = ((size - offset).min(buf.len() as u64)) as usize;
    dev.read_at(&mut buf[..avail], offset)?;
    buf[avail..].fill(0);
    Ok(avail)
}
