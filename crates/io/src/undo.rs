//! The undo file: the old contents of every device range a repair overwrites, saved and synced
//! before the overwrite, so the image can be put back byte for byte.
//!
//! Layout: a 4 KiB header (magic, version, the device's size and tag: the UUID of the file
//! system it was made from, checksum), then records
//! (`logfile::Record`) of old contents in the order they were saved. Each range is saved once,
//! the first time it is about to change, so restoring every record gives the original.

use crate::logfile::{LogStore, Record};
use crate::redo::DeviceId;
use crate::{Device, IoError, Result};
use std::collections::BTreeSet;

const MAGIC: &[u8; 8] = b"FFSCKUND";
const VERSION: u32 = 1;
const HEADER: u64 = 4096;
/// Granularity of "already saved" tracking; redo records are aligned to it.
const CHUNK: u64 = crate::overlay::CHUNK;

pub struct UndoLog<S: LogStore> {
    store: S,
    end: u64,
    saved: BTreeSet<u64>,
}

fn encode_header(device: DeviceId) -> Vec<u8> {
    let mut b = vec![0u8; HEADER as usize];
    b[0..8].copy_from_slice(MAGIC);
    b[8..12].copy_from_slice(&VERSION.to_le_bytes());
    b[12..20].copy_from_slice(&device.size.to_le_bytes());
    b[20..36].copy_from_slice(&device.tag);
    let crc = crc32c::crc32c(&b[..36]);
    b[36..40].copy_from_slice(&crc.to_le_bytes());
    b
}

fn decode_header(store: &dyn LogStore) -> Result<DeviceId> {
    let bad = || IoError::Refused("not an ffsck undo file (bad header)".into());
    let mut b = [0u8; 40];
    store.read_at(&mut b, 0).map_err(|_| bad())?;
    let crc = u32::from_le_bytes([b[36], b[37], b[38], b[39]]);
    if &b[0..8] != MAGIC
        || u32::from_le_bytes([b[8], b[9], b[10], b[11]]) != VERSION
        || crc32c::crc32c(&b[..36]) != crc
    {
        return Err(bad());
    }
    let mut tag = [0u8; 16];
    tag.copy_from_slice(&b[20..36]);
    Ok(DeviceId {
        size: u64::from_le_bytes(b[12..20].try_into().map_err(|_| bad())?),
        tag,
    })
}

impl<S: LogStore> UndoLog<S> {
    /// Start a new undo file for `device` (the store should be empty).
    pub fn create(mut store: S, device: DeviceId) -> Result<Self> {
        store.write_at(&encode_header(device), 0)?;
        store.sync()?;
        Ok(UndoLog {
            store,
            end: HEADER,
            saved: BTreeSet::new(),
        })
    }

    /// Save the current contents of every chunk `records` will overwrite that has not been
    /// saved before, then sync: after this returns, the records may be written.
    pub fn save_before(&mut self, dev: &dyn Device, records: &[Record]) -> Result<()> {
        let mut buf = Vec::new();
        for r in records {
            let first = r.offset / CHUNK;
            let last = (r.offset + r.data.len().max(1) as u64 - 1) / CHUNK;
            let mut chunk = first;
            while chunk <= last {
                if self.saved.contains(&chunk) {
                    chunk += 1;
                    continue;
                }
                // A run of unsaved chunks becomes one record.
                let run_start = chunk;
                while chunk <= last && !self.saved.contains(&chunk) {
                    self.saved.insert(chunk);
                    chunk += 1;
                }
                let offset = run_start * CHUNK;
                let len = (chunk * CHUNK).min(dev.size()).saturating_sub(offset);
                let mut old = vec![0u8; len as usize];
                dev.read_at(&mut old, offset)?;
                buf.clear();
                Record { offset, data: old }.encode(&mut buf);
                self.store.write_at(&buf, self.end)?;
                self.end += buf.len() as u64;
            }
        }
        self.store.sync()
    }

    pub fn into_store(self) -> S {
        self.store
    }
}

/// What `restore` did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Restored {
    pub records: u64,
    pub bytes: u64,
}

/// Put back every saved range, newest first, and flush the device. Refuses a device whose size
/// differs from the one the undo file was made for, or whose tag (file system UUID) differs
/// from a non-zero recorded one.
pub fn restore(store: &dyn LogStore, dev: &dyn Device, device: DeviceId) -> Result<Restored> {
    let saved_for = decode_header(store)?;
    if saved_for.size != device.size {
        return Err(IoError::Refused(format!(
            "the undo file was made for another device (size {} bytes, this one {})",
            saved_for.size, device.size
        )));
    }
    // The tag is the file system's UUID (zero when the file had none to record).
    if saved_for.tag != [0; 16] && saved_for.tag != device.tag {
        return Err(IoError::Refused(
            "the undo file was made for another file system (its UUID differs); \
             nothing was written"
                .into(),
        ));
    }
    let end = store.len()?;
    let mut records = Vec::new();
    let mut at = HEADER;
    // Stops at the end or at a torn last record (its overwrite never happened: the record
    // is synced before the device is written).
    while let Some((r, next)) = Record::decode(store, at, end) {
        records.push(r);
        at = next;
    }
    let mut bytes = 0;
    for r in records.iter().rev() {
        if r.offset
            .checked_add(r.data.len() as u64)
            .is_none_or(|e| e > dev.size())
        {
            return Err(IoError::Refused(format!(
                "undo record at offset {} lies outside the device",
                r.offset
            )));
        }
        dev.write_at(&r.data, r.offset)?;
        bytes += r.data.len() as u64;
    }
    dev.flush()?;
    Ok(Restored {
        records: records.len() as u64,
        bytes,
    })
}

/// The device identity an undo file names (to restore onto the right image).
pub fn device_of(store: &dyn LogStore) -> Result<DeviceId> {
    decode_header(store)
}
