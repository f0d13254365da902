//! The redo log that makes a repair crash-safe: a repair generation is written to the log and
//! committed before any byte of the device changes, then applied in place and retired.
//!
//! Layout: two 4 KiB header slots (at 0 and 4096), then the records of the current generation
//! from 8192. A header names its generation, its state (committed or applied), the device it
//! belongs to (size and file system UUID) and the length and checksum of the records. Headers
//! alternate between the slots (generation `g` goes to slot `g % 2`), so a torn header write
//! leaves the previous header intact, and the valid header with the highest generation is the
//! truth:
//!
//! * no valid header, or the newest is `Applied`: the device is consistent; nothing to do.
//! * the newest is `Committed` and its records check out: replay them (idempotent), then
//!   retire the generation.
//!
//! A crash at any point therefore leaves the original device or the fully repaired one.
//!
//! A log is bound to the state it was made from. A new log gets an `Applied` header naming
//! the device before anything else is written, so a log left by a run killed at any point
//! names its device; a log naming another device is refused whatever its state. Each record
//! is preceded by the crc32c of the bytes it overwrites, one per 512-byte sector (`n u32`,
//! then `n` checksums): before a committed generation is replayed, every sector of every
//! target must hold its old contents or its new ones (a generation partly applied, or a write
//! torn between sectors, which land whole as jbd2 and e2fsprogs assume too); any other
//! contents mean the device is not in the state the log was made from, and nothing is
//! written.

use crate::logfile::{LogStore, Record, MAX_RECORD};
use crate::{Device, IoError, Result};

const MAGIC: &[u8; 8] = b"FFSCKRDO";
const VERSION: u32 = 2;
const SLOT: u64 = 4096;
const PAYLOAD: u64 = 2 * SLOT;
const HEADER_LEN: usize = 72;

/// Granularity of the old-contents checksums: a device sector.
const SECTOR: usize = 512;

/// Why a log is refused (`IoError::Refused`): its header names another device.
pub const OTHER_DEVICE: &str = "made for another file system";
/// A committed record's target holds neither its old nor its new contents.
pub const OTHER_STATE: &str = "made for another state of the device";

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum State {
    Committed = 1,
    Applied = 2,
}

/// Which device a log belongs to: its size and a caller-chosen tag (the file system UUID).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct DeviceId {
    pub size: u64,
    pub tag: [u8; 16],
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Header {
    generation: u64,
    state: State,
    device: DeviceId,
    records: u64,
    payload_len: u64,
    payload_crc: u32,
}

impl Header {
    fn encode(&self) -> [u8; HEADER_LEN] {
        let mut b = [0u8; HEADER_LEN];
        b[0..8].copy_from_slice(MAGIC);
        b[8..12].copy_from_slice(&VERSION.to_le_bytes());
        b[12..16].copy_from_slice(&(self.state as u32).to_le_bytes());
        b[16..24].copy_from_slice(&self.generation.to_le_bytes());
        b[24..32].copy_from_slice(&self.device.size.to_le_bytes());
        b[32..48].copy_from_slice(&self.device.tag);
        b[48..56].copy_from_slice(&self.records.to_le_bytes());
        b[56..64].copy_from_slice(&self.payload_len.to_le_bytes());
        b[64..68].copy_from_slice(&self.payload_crc.to_le_bytes());
        let crc = crc32c::crc32c(&b[..68]);
        b[68..72].copy_from_slice(&crc.to_le_bytes());
        b
    }

    /// Decode a slot; `None` if it is empty, torn or foreign.
    fn decode(b: &[u8; HEADER_LEN]) -> Option<Header> {
        if &b[0..8] != MAGIC {
            return None;
        }
        let u32_at = |i: usize| u32::from_le_bytes(b[i..i + 4].try_into().unwrap_or_default());
        let u64_at = |i: usize| u64::from_le_bytes(b[i..i + 8].try_into().unwrap_or_default());
        if u32_at(8) != VERSION || crc32c::crc32c(&b[..68]) != u32_at(68) {
            return None;
        }
        let state = match u32_at(12) {
            1 => State::Committed,
            2 => State::Applied,
            _ => return None,
        };
        let mut tag = [0u8; 16];
        tag.copy_from_slice(&b[32..48]);
        let h = Header {
            generation: u64_at(16),
            state,
            device: DeviceId {
                size: u64_at(24),
                tag,
            },
            records: u64_at(48),
            payload_len: u64_at(56),
            payload_crc: u32_at(64),
        };
        Some(h)
    }
}

/// What `recover` found and did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Recovery {
    /// No log, or its last generation was fully applied.
    Clean { generation: u64 },
    /// A committed generation was replayed onto the device.
    Replayed {
        generation: u64,
        records: u64,
        bytes: u64,
    },
}

/// A redo log for one device.
pub struct RedoLog<S: LogStore> {
    store: S,
    device: DeviceId,
    /// The newest generation written to the log (0 for a new log).
    generation: u64,
}

impl<S: LogStore> RedoLog<S> {
    /// Open a log for `device`, replaying a committed generation left by a crashed run first.
    /// A log that belongs to another device is refused.
    pub fn open(store: S, dev: &dyn Device, device: DeviceId) -> Result<(Self, Recovery)> {
        let newest = newest_header(&store)?;
        let mut log = RedoLog {
            store,
            device,
            generation: 0,
        };
        let Some(h) = newest else {
            // A new log: bind it to the device before anything else.
            let h = Header {
                generation: 0,
                state: State::Applied,
                device,
                records: 0,
                payload_len: 0,
                payload_crc: 0,
            };
            log.write_header(&h)?;
            return Ok((log, Recovery::Clean { generation: 0 }));
        };
        if h.device != device {
            return Err(IoError::Refused(OTHER_DEVICE.into()));
        }
        log.generation = h.generation;
        if h.state == State::Applied {
            return Ok((
                log,
                Recovery::Clean {
                    generation: h.generation,
                },
            ));
        }
        let records = match read_payload(&log.store, &h) {
            Some(r) => r,
            // A committed header whose records do not check out cannot have been written
            // (records are synced before the header): treat the generation as never committed.
            None => {
                return Ok((
                    log,
                    Recovery::Clean {
                        generation: h.generation,
                    },
                ))
            }
        };
        // Every target must hold its old or its new contents before anything is written.
        for (old, r) in &records {
            let mut cur = vec![0u8; r.data.len()];
            let end = r.offset.checked_add(r.data.len() as u64);
            if end.is_none_or(|e| e > dev.size()) {
                return Err(IoError::Refused(OTHER_STATE.into()));
            }
            dev.read_at(&mut cur, r.offset)?;
            let sectors = cur.chunks(SECTOR).zip(r.data.chunks(SECTOR)).zip(old);
            for ((c, new), crc) in sectors {
                if c != new && crc32c::crc32c(c) != *crc {
                    return Err(IoError::Refused(OTHER_STATE.into()));
                }
            }
        }
        let records: Vec<Record> = records.into_iter().map(|(_, r)| r).collect();
        let bytes = records.iter().map(|r| r.data.len() as u64).sum();
        apply_records(dev, &records)?;
        log.retire(&h)?;
        Ok((
            log,
            Recovery::Replayed {
                generation: h.generation,
                records: records.len() as u64,
                bytes,
            },
        ))
    }

    pub fn generation(&self) -> u64 {
        self.generation
    }

    /// Commit one generation and apply it: `before_commit` runs first (the undo file saves
    /// and syncs the old contents there, so a committed generation always has a complete
    /// undo), then the records are logged and synced, the commit header written and synced,
    /// the device written and flushed, and the generation marked applied.
    pub fn commit_and_apply(
        &mut self,
        dev: &dyn Device,
        records: &[Record],
        before_commit: &mut dyn FnMut(&[Record]) -> Result<()>,
    ) -> Result<()> {
        before_commit(records)?;
        let header = self.commit(dev, records)?;
        apply_records(dev, records)?;
        self.retire(&header)
    }

    fn commit(&mut self, dev: &dyn Device, records: &[Record]) -> Result<Header> {
        let mut payload = Vec::new();
        let mut old = Vec::new();
        for r in records {
            old.resize(r.data.len(), 0);
            dev.read_at(&mut old, r.offset)?;
            let n = old.len().div_ceil(SECTOR) as u32;
            payload.extend_from_slice(&n.to_le_bytes());
            for sector in old.chunks(SECTOR) {
                payload.extend_from_slice(&crc32c::crc32c(sector).to_le_bytes());
            }
            r.encode(&mut payload);
        }
        self.store.write_at(&payload, PAYLOAD)?;
        self.store.sync()?;
        let h = Header {
            generation: self.generation + 1,
            state: State::Committed,
            device: self.device,
            records: records.len() as u64,
            payload_len: payload.len() as u64,
            payload_crc: crc32c::crc32c(&payload),
        };
        self.write_header(&h)?;
        Ok(h)
    }

    fn retire(&mut self, committed: &Header) -> Result<()> {
        let h = Header {
            generation: committed.generation + 1,
            state: State::Applied,
            ..*committed
        };
        self.write_header(&h)
    }

    fn write_header(&mut self, h: &Header) -> Result<()> {
        let mut slot = vec![0u8; SLOT as usize];
        slot[..HEADER_LEN].copy_from_slice(&h.encode());
        self.store.write_at(&slot, (h.generation % 2) * SLOT)?;
        self.store.sync()?;
        self.generation = h.generation;
        Ok(())
    }

    pub fn into_store(self) -> S {
        self.store
    }
}

fn newest_header(store: &dyn LogStore) -> Result<Option<Header>> {
    let len = store.len()?;
    let mut best: Option<Header> = None;
    for slot in 0..2u64 {
        if len < slot * SLOT + HEADER_LEN as u64 {
            continue;
        }
        let mut b = [0u8; HEADER_LEN];
        store.read_at(&mut b, slot * SLOT)?;
        let Some(h) = Header::decode(&b) else {
            continue;
        };
        if h.generation % 2 != slot {
            continue;
        }
        if best.is_none_or(|b| h.generation > b.generation) {
            best = Some(h);
        }
    }
    Ok(best)
}

/// Read and verify the records a committed header describes, each with the checksum of the
/// contents it overwrites.
fn read_payload(store: &dyn LogStore, h: &Header) -> Option<Vec<(Vec<u32>, Record)>> {
    let end = PAYLOAD.checked_add(h.payload_len)?;
    if end > store.len().ok()? {
        return None;
    }
    let mut crc = 0u32;
    let mut records = Vec::new();
    let mut at = PAYLOAD;
    let mut raw = Vec::new();
    // Each record takes at least its header, so the count is bounded by the payload length.
    for _ in 0..h.records {
        if at.checked_add(4)? > end {
            return None;
        }
        let mut w = [0u8; 4];
        store.read_at(&mut w, at).ok()?;
        let n = u32::from_le_bytes(w) as usize;
        // Bounded by the longest record before anything is allocated.
        if n > (MAX_RECORD as usize).div_ceil(SECTOR) {
            return None;
        }
        let crcs_end = at.checked_add(4 + 4 * n as u64)?;
        if crcs_end > end {
            return None;
        }
        let mut raw_crcs = vec![0u8; 4 * n];
        store.read_at(&mut raw_crcs, at + 4).ok()?;
        let (r, next) = Record::decode(store, crcs_end, end)?;
        if r.data.len().div_ceil(SECTOR) != n {
            return None;
        }
        raw.clear();
        raw.extend_from_slice(&w);
        raw.extend_from_slice(&raw_crcs);
        r.encode(&mut raw);
        crc = crc32c::crc32c_append(crc, &raw);
        let old = raw_crcs
            .chunks_exact(4)
            .map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]]))
            .collect();
        records.push((old, r));
        at = next;
    }
    (at == end && crc == h.payload_crc).then_some(records)
}

fn apply_records(dev: &dyn Device, records: &[Record]) -> Result<()> {
    for r in records {
        let end = r.offset.checked_add(r.data.len() as u64);
        if end.is_none_or(|e| e > dev.size()) {
            return Err(IoError::Refused(format!(
                "repair log record at offset {} lies outside the device",
                r.offset
            )));
        }
        dev.write_at(&r.data, r.offset)?;
    }
    dev.flush()
}
