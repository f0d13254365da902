//! Simulated power loss, for crash tests: storage that keeps synced and unsynced writes apart
//! and stops working after a set number of operations, then shows what a disk could hold after
//! the crash (every synced write, plus any subset of the unsynced ones, possibly torn).

use crate::logfile::LogStore;
use crate::{Device, IoError, ReadCounter, Result};
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::{Arc, Mutex};

/// The power supply shared by every simulated disk of one test: each write or sync uses one
/// unit; when none are left, the power is off and every operation fails.
#[derive(Clone, Debug)]
pub struct Power(Arc<AtomicI64>);

impl Power {
    /// Power that fails after `ops` writes and syncs (negative: never).
    pub fn new(ops: i64) -> Self {
        Power(Arc::new(AtomicI64::new(ops)))
    }
    fn spend(&self) -> Result<()> {
        let left = self
            .0
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |v| {
                (v > 0).then(|| v - 1)
            });
        match left {
            Ok(_) => Ok(()),
            Err(v) if v < 0 => Ok(()),
            Err(_) => Err(IoError::Refused("simulated power loss".into())),
        }
    }
    pub fn is_off(&self) -> bool {
        self.0.load(Ordering::SeqCst) == 0
    }
}

/// What happens to one unsynced write at the crash.
#[derive(Clone, Copy, Debug)]
pub enum Fate {
    Lost,
    Kept,
    /// Only the first n bytes reached the disk.
    Torn(usize),
}

#[derive(Debug, Default)]
struct Inner {
    durable: Vec<u8>,
    /// Writes since the last sync, in order.
    pending: Vec<(u64, Vec<u8>)>,
}

impl Inner {
    fn view(&self) -> Vec<u8> {
        let mut v = self.durable.clone();
        for (off, data) in &self.pending {
            put(&mut v, *off, data);
        }
        v
    }
}

fn put(v: &mut Vec<u8>, off: u64, data: &[u8]) {
    let start = off as usize;
    let end = start + data.len();
    if v.len() < end {
        v.resize(end, 0);
    }
    v[start..end].copy_from_slice(data);
}

/// A disk (or a log file: it grows on write) under simulated power.
pub struct SimDisk {
    inner: Mutex<Inner>,
    power: Power,
    /// Fixed size when used as a device.
    size: u64,
    counter: ReadCounter,
}

impl SimDisk {
    pub fn new(contents: Vec<u8>, power: Power) -> Self {
        SimDisk {
            size: contents.len() as u64,
            inner: Mutex::new(Inner {
                durable: contents,
                pending: Vec::new(),
            }),
            power,
            counter: ReadCounter::default(),
        }
    }

    /// Number of writes not yet synced.
    pub fn pending(&self) -> usize {
        self.inner.lock().map_or(0, |i| i.pending.len())
    }

    /// The contents after a crash, deciding the fate of each unsynced write in order.
    pub fn after_crash(&self, fate: &mut dyn FnMut(usize, usize) -> Fate) -> Vec<u8> {
        let Ok(inner) = self.inner.lock() else {
            return Vec::new();
        };
        let mut v = inner.durable.clone();
        for (i, (off, data)) in inner.pending.iter().enumerate() {
            match fate(i, data.len()) {
                Fate::Lost => {}
                Fate::Kept => put(&mut v, *off, data),
                Fate::Torn(n) => put(&mut v, *off, &data[..n.min(data.len())]),
            }
        }
        v
    }

    /// The current contents as a reader sees them.
    pub fn contents(&self) -> Vec<u8> {
        self.inner.lock().map(|i| i.view()).unwrap_or_default()
    }

    fn read(&self, buf: &mut [u8], offset: u64, limit: Option<u64>) -> Result<()> {
        let short = IoError::ShortRead {
            offset,
            len: buf.len(),
        };
        let inner = self
            .inner
            .lock()
            .map_err(|_| IoError::Refused("poisoned".into()))?;
        let end = offset.checked_add(buf.len() as u64).ok_or(short)?;
        let len = limit.unwrap_or_else(|| current_len(&inner));
        if end > len {
            return Err(IoError::ShortRead {
                offset,
                len: buf.len(),
            });
        }
        let start = offset as usize;
        buf.fill(0);
        let d = &inner.durable;
        if start < d.len() {
            let n = (d.len() - start).min(buf.len());
            buf[..n].copy_from_slice(&d[start..start + n]);
        }
        for (off, data) in &inner.pending {
            let (ws, we) = (*off, *off + data.len() as u64);
            let (s, e) = (ws.max(offset), we.min(end));
            if s < e {
                buf[(s - offset) as usize..(e - offset) as usize]
                    .copy_from_slice(&data[(s - ws) as usize..(e - ws) as usize]);
            }
        }
        self.counter.add(buf.len());
        Ok(())
    }

    fn write(&self, buf: &[u8], offset: u64) -> Result<()> {
        self.power.spend()?;
        let mut inner = self
            .inner
            .lock()
            .map_err(|_| IoError::Refused("poisoned".into()))?;
        inner.pending.push((offset, buf.to_vec()));
        Ok(())
    }

    fn sync_now(&self) -> Result<()> {
        self.power.spend()?;
        let mut inner = self
            .inner
            .lock()
            .map_err(|_| IoError::Refused("poisoned".into()))?;
        let pending = std::mem::take(&mut inner.pending);
        for (off, data) in pending {
            put(&mut inner.durable, off, &data);
        }
        Ok(())
    }
}

fn current_len(inner: &Inner) -> u64 {
    inner
        .pending
        .iter()
        .map(|(o, d)| o + d.len() as u64)
        .fold(inner.durable.len() as u64, u64::max)
}

impl Device for SimDisk {
    fn size(&self) -> u64 {
        self.size
    }
    fn read_at(&self, buf: &mut [u8], offset: u64) -> Result<()> {
        self.read(buf, offset, Some(self.size))
    }
    fn write_at(&self, buf: &[u8], offset: u64) -> Result<()> {
        if offset
            .checked_add(buf.len() as u64)
            .is_none_or(|e| e > self.size)
        {
            return Err(IoError::ShortRead {
                offset,
                len: buf.len(),
            });
        }
        self.write(buf, offset)
    }
    fn flush(&self) -> Result<()> {
        self.sync_now()
    }
    fn bytes_read(&self) -> u64 {
        self.counter.get()
    }
}

impl LogStore for &SimDisk {
    fn len(&self) -> Result<u64> {
        self.inner
            .lock()
            .map(|i| current_len(&i))
            .map_err(|_| IoError::Refused("poisoned".into()))
    }
    fn read_at(&self, buf: &mut [u8], offset: u64) -> Result<()> {
        self.read(buf, offset, None)
    }
    fn write_at(&mut self, buf: &[u8], offset: u64) -> Result<()> {
        self.write(buf, offset)
    }
    fn sync(&mut self) -> Result<()> {
        self.sync_now()
    }
}
