//! An in-memory device, for tests and for small images built on the fly.

use crate::{Device, IoError, ReadCounter, Result};
use std::sync::RwLock;

pub struct MemDevice {
    data: RwLock<Vec<u8>>,
    counter: ReadCounter,
}

impl MemDevice {
    pub fn new(data: Vec<u8>) -> Self {
        MemDevice {
            data: RwLock::new(data),
            counter: ReadCounter::default(),
        }
    }
    /// A copy of the current contents.
    pub fn snapshot(&self) -> Vec<u8> {
        self.data.read().map(|d| d.clone()).unwrap_or_default()
    }
}

impl Device for MemDevice {
    fn size(&self) -> u64 {
        self.data.read().map(|d| d.len() as u64).unwrap_or(0)
    }
    fn read_at(&self, buf: &mut [u8], offset: u64) -> Result<()> {
        let d = self
            .data
            .read()
            .map_err(|_| IoError::Refused("poisoned".into()))?;
        let start = usize::try_from(offset).map_err(|_| IoError::ShortRead {
            offset,
            len: buf.len(),
        })?;
        let src = start
            .checked_add(buf.len())
            .and_then(|end| d.get(start..end))
            .ok_or(IoError::ShortRead {
                offset,
                len: buf.len(),
            })?;
        buf.copy_from_slice(src);
        self.counter.add(buf.len());
        Ok(())
    }
    fn write_at(&self, buf: &[u8], offset: u64) -> Result<()> {
        let mut d = self
            .data
            .write()
            .map_err(|_| IoError::Refused("poisoned".into()))?;
        let start = usize::try_from(offset).map_err(|_| IoError::ShortRead {
            offset,
            len: buf.len(),
        })?;
        let dst = start
            .checked_add(buf.len())
            .and_then(|end| d.get_mut(start..end))
            .ok_or(IoError::ShortRead {
                offset,
                len: buf.len(),
            })?;
        dst.copy_from_slice(buf);
        Ok(())
    }
    fn flush(&self) -> Result<()> {
        Ok(())
    }
    fn bytes_read(&self) -> u64 {
        self.counter.get()
    }
}
