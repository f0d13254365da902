//! What ffsck's own logs (the redo log and the undo file) are stored in, and the checksummed
//! record they are made of.
//!
//! A record is `magic u32, offset u64, len u32, crc32c u32, data[len]`, little-endian, with the
//! checksum over the offset, the length and the data, so a torn or stale record is recognised.

use crate::{IoError, Result};
use std::fs::File;
use std::os::unix::fs::FileExt;

/// A growable file a log lives in.
pub trait LogStore {
    fn len(&self) -> Result<u64>;
    /// The store holds nothing yet.
    fn is_empty(&self) -> Result<bool> {
        Ok(self.len()? == 0)
    }
    /// Fill `buf` from `offset`; a read past the end is an error.
    fn read_at(&self, buf: &mut [u8], offset: u64) -> Result<()>;
    /// Write at `offset`, growing the store if needed.
    fn write_at(&mut self, buf: &[u8], offset: u64) -> Result<()>;
    /// Make previous writes durable.
    fn sync(&mut self) -> Result<()>;
}

impl<T: LogStore + ?Sized> LogStore for &mut T {
    fn len(&self) -> Result<u64> {
        (**self).len()
    }
    fn read_at(&self, buf: &mut [u8], offset: u64) -> Result<()> {
        (**self).read_at(buf, offset)
    }
    fn write_at(&mut self, buf: &[u8], offset: u64) -> Result<()> {
        (**self).write_at(buf, offset)
    }
    fn sync(&mut self) -> Result<()> {
        (**self).sync()
    }
}

impl LogStore for File {
    fn len(&self) -> Result<u64> {
        self.metadata()
            .map(|m| m.len())
            .map_err(|source| IoError::Io { offset: 0, source })
    }
    fn read_at(&self, buf: &mut [u8], offset: u64) -> Result<()> {
        FileExt::read_exact_at(self, buf, offset).map_err(|source| IoError::Io { offset, source })
    }
    fn write_at(&mut self, buf: &[u8], offset: u64) -> Result<()> {
        FileExt::write_all_at(self, buf, offset).map_err(|source| IoError::Io { offset, source })
    }
    fn sync(&mut self) -> Result<()> {
        self.sync_all()
            .map_err(|source| IoError::Io { offset: 0, source })
    }
}

pub const RECORD_MAGIC: u32 = 0x4652_4543; // "FREC"
pub const RECORD_HEADER: usize = 20;
/// Longest record accepted when reading a log back (a log is hostile input too).
pub const MAX_RECORD: u32 = 64 << 20;

/// One logged extent of device bytes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Record {
    pub offset: u64,
    pub data: Vec<u8>,
}

fn record_crc(offset: u64, data: &[u8]) -> u32 {
    let mut c = crc32c::crc32c(&offset.to_le_bytes());
    c = crc32c::crc32c_append(c, &(data.len() as u32).to_le_bytes());
    crc32c::crc32c_append(c, data)
}

impl Record {
    /// Append the encoded record to `out`.
    pub fn encode(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&RECORD_MAGIC.to_le_bytes());
        out.extend_from_slice(&self.offset.to_le_bytes());
        out.extend_from_slice(&(self.data.len() as u32).to_le_bytes());
        out.extend_from_slice(&record_crc(self.offset, &self.data).to_le_bytes());
        out.extend_from_slice(&self.data);
    }

    pub fn encoded_len(&self) -> u64 {
        RECORD_HEADER as u64 + self.data.len() as u64
    }

    /// Decode the record at `at` in `store`, if one is there and intact. Returns it and where
    /// the next one starts.
    pub fn decode(store: &dyn LogStore, at: u64, end: u64) -> Option<(Record, u64)> {
        if at.checked_add(RECORD_HEADER as u64)? > end {
            return None;
        }
        let mut h = [0u8; RECORD_HEADER];
        store.read_at(&mut h, at).ok()?;
        let word = |i: usize| u32::from_le_bytes([h[i], h[i + 1], h[i + 2], h[i + 3]]);
        if word(0) != RECORD_MAGIC {
            return None;
        }
        let offset = u64::from_le_bytes(h[4..12].try_into().ok()?);
        let len = word(12);
        let crc = word(16);
        let next = at + RECORD_HEADER as u64 + u64::from(len);
        if len > MAX_RECORD || next > end {
            return None;
        }
        let mut data = vec![0u8; len as usize];
        store.read_at(&mut data, at + RECORD_HEADER as u64).ok()?;
        (record_crc(offset, &data) == crc).then_some((Record { offset, data }, next))
    }
}

/// An in-memory log store, for tests.
#[derive(Default, Clone, Debug)]
pub struct MemLog(pub Vec<u8>);

impl LogStore for MemLog {
    fn len(&self) -> Result<u64> {
        Ok(self.0.len() as u64)
    }
    fn read_at(&self, buf: &mut [u8], offset: u64) -> Result<()> {
        let start = usize::try_from(offset).map_err(|_| short(offset, buf.len()))?;
        let src = start
            .checked_add(buf.len())
            .and_then(|e| self.0.get(start..e))
            .ok_or_else(|| short(offset, buf.len()))?;
        buf.copy_from_slice(src);
        Ok(())
    }
    fn write_at(&mut self, buf: &[u8], offset: u64) -> Result<()> {
        let start = usize::try_from(offset).map_err(|_| short(offset, buf.len()))?;
        let end = start + buf.len();
        if self.0.len() < end {
            self.0.resize(end, 0);
        }
        self.0[start..end].copy_from_slice(buf);
        Ok(())
    }
    fn sync(&mut self) -> Result<()> {
        Ok(())
    }
}

fn short(offset: u64, len: usize) -> IoError {
    IoError::ShortRead { offset, len }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_round_trip_and_reject_damage() {
        let r = Record {
            offset: 4096,
            data: b"hello".to_vec(),
        };
        let mut buf = Vec::new();
        r.encode(&mut buf);
        let store = MemLog(buf.clone());
        let (back, next) = Record::decode(&store, 0, buf.len() as u64).unwrap();
        assert_eq!(back, r);
        assert_eq!(next, r.encoded_len());
        let mut bad = buf.clone();
        *bad.last_mut().unwrap() ^= 1;
        assert!(Record::decode(&MemLog(bad), 0, buf.len() as u64).is_none());
        assert!(Record::decode(&store, 0, buf.len() as u64 - 1).is_none());
    }
}
