//! A copy-on-write overlay over a device: a repair generation in the making. Writes are staged
//! in memory, reads see them (read-your-writes), and nothing reaches the device until the
//! generation is committed through the redo log.

use crate::{Device, IoError, Result};
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, RwLock};

/// Staging granularity: the smallest ext2/3/4 block, and the superblock's size.
pub const CHUNK: u64 = 1024;

pub struct Overlay {
    base: Arc<dyn Device>,
    /// Staged chunks by chunk number.
    staged: RwLock<BTreeMap<u64, Box<[u8]>>>,
    /// While a [`Recording`] is made: each written chunk's contents before its first write.
    recording: Mutex<Option<BTreeMap<u64, Box<[u8]>>>>,
}

/// The writes made between [`Overlay::record`] and [`Overlay::stop_recording`]: each chunk
/// they touched, as it was before them and as they left it. [`Overlay::without`] reads the
/// overlay as if they had not been made, keeping whatever was written over them since.
#[derive(Default)]
pub struct Recording {
    chunks: BTreeMap<u64, BeforeAfter>,
}

/// A chunk's contents before and after the recorded writes.
type BeforeAfter = (Box<[u8]>, Box<[u8]>);

/// A read-only view of an overlay that undoes one [`Recording`]'s writes byte by byte: a byte
/// still holding what the recorded writes left reads as it was before them.
pub struct Without<'a> {
    ov: &'a Overlay,
    rec: &'a Recording,
}

/// One contiguous run of staged bytes, ready for the redo log.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Extent {
    pub offset: u64,
    pub data: Vec<u8>,
}

impl Overlay {
    pub fn new(base: Arc<dyn Device>) -> Self {
        Overlay {
            base,
            staged: RwLock::new(BTreeMap::new()),
            recording: Mutex::new(None),
        }
    }

    /// Start recording the chunks written from now on (a recording under way starts again).
    pub fn record(&self) {
        if let Ok(mut r) = self.recording.lock() {
            *r = Some(BTreeMap::new());
        }
    }

    /// Stop recording: the chunks written since [`Overlay::record`], before and after.
    pub fn stop_recording(&self) -> Recording {
        let pre = self.recording.lock().ok().and_then(|mut r| r.take());
        let mut chunks = BTreeMap::new();
        if let (Some(pre), Ok(staged)) = (pre, self.staged.read()) {
            for (chunk, before) in pre {
                if let Some(after) = staged.get(&chunk) {
                    chunks.insert(chunk, (before, after.clone()));
                }
            }
        }
        Recording { chunks }
    }

    /// This overlay as if `rec`'s writes had not been made.
    pub fn without<'a>(&'a self, rec: &'a Recording) -> Without<'a> {
        Without { ov: self, rec }
    }

    pub fn base(&self) -> &Arc<dyn Device> {
        &self.base
    }

    /// Bytes staged so far.
    pub fn staged_bytes(&self) -> u64 {
        self.staged.read().map_or(0, |s| s.len() as u64 * CHUNK)
    }

    /// Whether some byte of `offset..offset + len` has been written (staged) since the
    /// overlay was made, whatever it now holds.
    pub fn staged_in(&self, offset: u64, len: u64) -> bool {
        let (first, end) = (offset / CHUNK, (offset + len).div_ceil(CHUNK));
        self.staged
            .read()
            .is_ok_and(|s| s.range(first..end).next().is_some())
    }

    /// The staged chunks as extents, ascending and coalesced, omitting chunks whose staged
    /// contents equal the device's (a repair that put a byte back is no change).
    pub fn extents(&self) -> Result<Vec<Extent>> {
        let staged = self.staged.read().map_err(|_| poisoned())?;
        let mut out: Vec<Extent> = Vec::new();
        let mut old = vec![0u8; CHUNK as usize];
        for (&chunk, data) in staged.iter() {
            let offset = chunk * CHUNK;
            let len = data.len();
            crate::read_partial(&*self.base, &mut old[..len], offset)?;
            if old[..len] == data[..] {
                continue;
            }
            match out.last_mut() {
                Some(last) if last.offset + last.data.len() as u64 == offset => {
                    last.data.extend_from_slice(data)
                }
                _ => out.push(Extent {
                    offset,
                    data: data.to_vec(),
                }),
            }
        }
        Ok(out)
    }

    /// Forget everything staged (after a commit, or to abandon a generation).
    pub fn clear(&self) {
        if let Ok(mut s) = self.staged.write() {
            s.clear();
        }
    }

    /// End of the range `offset..offset + len`, which must lie on the device.
    fn end_of(&self, offset: u64, len: usize) -> Result<u64> {
        offset
            .checked_add(len as u64)
            .filter(|&e| e <= self.base.size())
            .ok_or(IoError::ShortRead { offset, len })
    }

    fn chunk_len(&self, chunk: u64) -> usize {
        let size = self.base.size();
        (size.saturating_sub(chunk * CHUNK)).min(CHUNK) as usize
    }
}

fn poisoned() -> IoError {
    IoError::Refused("overlay lock poisoned".into())
}

impl Device for Overlay {
    fn size(&self) -> u64 {
        self.base.size()
    }

    fn will_need(&self, ranges: &[(u64, u64)]) {
        self.base.will_need(ranges);
    }

    fn no_read_ahead(&self) {
        self.base.no_read_ahead();
    }

    fn read_at(&self, buf: &mut [u8], offset: u64) -> Result<()> {
        let end = self.end_of(offset, buf.len())?;
        let staged = self.staged.read().map_err(|_| poisoned())?;
        let (first, last) = (offset / CHUNK, (end.max(1) - 1) / CHUNK);
        let mut hits = staged.range(first..=last).peekable();
        if hits.peek().is_none() || buf.is_empty() {
            drop(hits);
            drop(staged);
            return self.base.read_at(buf, offset);
        }
        self.base.read_at(buf, offset)?;
        for (&chunk, data) in hits {
            let c_start = chunk * CHUNK;
            let from = offset.max(c_start);
            let to = end.min(c_start + data.len() as u64);
            if from < to {
                let dst = &mut buf[(from - offset) as usize..(to - offset) as usize];
                dst.copy_from_slice(&data[(from - c_start) as usize..(to - c_start) as usize]);
            }
        }
        Ok(())
    }

    fn write_at(&self, buf: &[u8], offset: u64) -> Result<()> {
        let end = self.end_of(offset, buf.len())?;
        if buf.is_empty() {
            return Ok(());
        }
        let mut staged = self.staged.write().map_err(|_| poisoned())?;
        for chunk in offset / CHUNK..=(end - 1) / CHUNK {
            let c_start = chunk * CHUNK;
            let len = self.chunk_len(chunk);
            let data = match staged.entry(chunk) {
                std::collections::btree_map::Entry::Occupied(e) => e.into_mut(),
                std::collections::btree_map::Entry::Vacant(e) => {
                    let mut fresh = vec![0u8; len].into_boxed_slice();
                    self.base.read_at(&mut fresh, c_start)?;
                    e.insert(fresh)
                }
            };
            if let Ok(mut rec) = self.recording.lock() {
                if let Some(pre) = rec.as_mut() {
                    pre.entry(chunk).or_insert_with(|| data.clone());
                }
            }
            let from = offset.max(c_start);
            let to = end.min(c_start + len as u64);
            data[(from - c_start) as usize..(to - c_start) as usize]
                .copy_from_slice(&buf[(from - offset) as usize..(to - offset) as usize]);
        }
        Ok(())
    }

    /// Staged writes become durable only through a commit; there is nothing to flush here.
    fn flush(&self) -> Result<()> {
        Ok(())
    }

    fn bytes_read(&self) -> u64 {
        self.base.bytes_read()
    }
}

impl Device for Without<'_> {
    fn size(&self) -> u64 {
        self.ov.size()
    }

    fn read_at(&self, buf: &mut [u8], offset: u64) -> Result<()> {
        self.ov.read_at(buf, offset)?;
        let end = offset + buf.len() as u64;
        let (first, last) = (offset / CHUNK, (end.max(1) - 1) / CHUNK);
        for (&chunk, (before, after)) in self.rec.chunks.range(first..=last) {
            let c_start = chunk * CHUNK;
            let from = offset.max(c_start);
            let to = end.min(c_start + after.len() as u64);
            for at in from..to {
                let (i, k) = ((at - offset) as usize, (at - c_start) as usize);
                if buf[i] == after[k] {
                    buf[i] = before[k];
                }
            }
        }
        Ok(())
    }

    fn write_at(&self, _: &[u8], _: u64) -> Result<()> {
        Err(IoError::Refused(
            "a view without recorded writes is read-only".into(),
        ))
    }

    fn flush(&self) -> Result<()> {
        Ok(())
    }

    fn bytes_read(&self) -> u64 {
        self.ov.bytes_read()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::MemDevice;

    #[test]
    fn reads_see_staged_writes_and_base_is_untouched() {
        let base = Arc::new(MemDevice::new((0..4096u32).map(|i| i as u8).collect()));
        let ov = Overlay::new(base.clone());
        ov.write_at(&[0xAA; 10], 1020).unwrap();
        let mut buf = vec![0u8; 30];
        ov.read_at(&mut buf, 1010).unwrap();
        let want: Vec<u8> = (1010..1040u32)
            .map(|i| {
                if (1020..1030).contains(&i) {
                    0xAA
                } else {
                    i as u8
                }
            })
            .collect();
        assert_eq!(buf, want);
        assert_eq!(base.snapshot()[1020], (1020u32 as u8));
        let ext = ov.extents().unwrap();
        assert_eq!(ext.len(), 1);
        assert_eq!(ext[0].offset, 0);
        assert_eq!(ext[0].data.len(), 2048);
    }

    #[test]
    fn without_undoes_recorded_writes_but_keeps_later_ones() {
        let base = Arc::new(MemDevice::new(vec![0u8; 4096]));
        let ov = Overlay::new(base);
        ov.write_at(&[1; 4], 0).unwrap();
        ov.record();
        ov.write_at(&[2; 4], 2).unwrap();
        ov.write_at(&[3; 2], 2000).unwrap();
        let rec = ov.stop_recording();
        ov.write_at(&[4], 3).unwrap();
        ov.write_at(&[5], 2001).unwrap();
        let mut buf = vec![9u8; 8];
        ov.without(&rec).read_at(&mut buf, 0).unwrap();
        assert_eq!(buf, [1, 1, 1, 4, 0, 0, 0, 0]);
        ov.without(&rec).read_at(&mut buf[..3], 1999).unwrap();
        assert_eq!(buf[..3], [0, 0, 5]);
        assert!(ov.without(&rec).write_at(&[0], 0).is_err());
    }

    #[test]
    fn unchanged_chunks_are_not_extents() {
        let base = Arc::new(MemDevice::new(vec![7u8; 4096]));
        let ov = Overlay::new(base);
        ov.write_at(&[7u8; 5], 3000).unwrap();
        assert!(ov.extents().unwrap().is_empty());
        assert!(ov.write_at(&[1], 4096).is_err());
    }
}
