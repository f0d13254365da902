//! Undo files in e2undo(8)'s own on-disk format ("E2UNDO02"), so e2fsprogs' `e2undo FILE
//! DEVICE` puts a device back as it was before ffsck wrote it (`ffsck -z`), and ffsck's
//! `--apply-undo` reads the same files.
//!
//! The format, as documented by e2fsprogs (lib/ext2fs/undo_io.c's layout comment): the file
//! is cut into blocks of the header's `block_size`; block 0 holds a 512-byte header (magic,
//! key count, where the superblock copy and the first key block are, block sizes, the
//! superblock's crc32c, state, feature words, the header's own crc32c); block 1 a copy of the
//! device's superblock as it is after the writes (its magic inverted); then key blocks (magic
//! 0xCADECADE, crc32c, then 16-byte keys: device block, crc32c of the data, byte count), each
//! followed by the data of its keys. All crc32c values are e2fsprogs' raw form: seed !0, no
//! final inversion. A block is saved once, the first time it is about to change.

use crate::logfile::{LogStore, Record};
use crate::{Device, IoError, Result};
use std::collections::BTreeSet;

const MAGIC: &[u8; 8] = b"E2UNDO02";
const KEY_MAGIC: u32 = 0xCADE_CADE;
const STATE_FINISHED: u32 = 1;
const HEADER_BYTES: usize = 512;
const SB_OFFSET: u64 = 1024;
const SB_BYTES: usize = 1024;
/// e2undo's bounds on the undo block size, and on one key's data (in blocks).
const MIN_BLOCK: u32 = 1024;
const MAX_BLOCK: u32 = 1 << 20;
const MAX_EXTENT_BLOCKS: u64 = 512;
/// Where the superblock copy and the first key block go, as e2fsprogs places them.
const SUPER_BLK: u64 = 1;
const FIRST_KEY_BLK: u64 = 2;

/// crc32c as e2fsprogs computes it (seed given, no final inversion).
fn raw_crc(seed: u32, data: &[u8]) -> u32 {
    !crc32c::crc32c_append(!seed, data)
}

fn le32(b: &[u8], at: usize) -> u32 {
    u32::from_le_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]])
}

fn le64(b: &[u8], at: usize) -> u64 {
    let mut a = [0u8; 8];
    a.copy_from_slice(&b[at..at + 8]);
    u64::from_le_bytes(a)
}

/// An e2undo file being written.
pub struct E2Undo<S: LogStore> {
    store: S,
    block: u64,
    /// The key block being filled, its place, and how many keys it holds.
    keys: Vec<u8>,
    key_blk: u64,
    in_block: usize,
    /// Next free block of the file, and keys written in all.
    next: u64,
    num_keys: u64,
    saved: BTreeSet<u64>,
}

impl<S: LogStore> E2Undo<S> {
    /// Start an undo file (the store should be empty) with undo blocks of `block_size`
    /// bytes (the file system's block size; 1 KiB..1 MiB, a power of two).
    pub fn create(store: S, block_size: u32, dev: &dyn Device) -> Result<Self> {
        if !block_size.is_power_of_two() || !(MIN_BLOCK..=MAX_BLOCK).contains(&block_size) {
            return Err(IoError::Refused(format!(
                "undo block size {block_size} is not a power of two from 1024 to 1048576"
            )));
        }
        let mut u = E2Undo {
            store,
            block: u64::from(block_size),
            keys: vec![0; block_size as usize],
            key_blk: FIRST_KEY_BLK,
            in_block: 0,
            next: FIRST_KEY_BLK + 1,
            num_keys: 0,
            saved: BTreeSet::new(),
        };
        u.write_index(dev, false)?;
        Ok(u)
    }

    fn keys_per_block(&self) -> usize {
        self.block as usize / 16 - 1
    }

    /// Save the current contents of every block `records` will overwrite that has not been
    /// saved before, then write the index and sync: the records may be written after this.
    pub fn save_before(&mut self, dev: &dyn Device, records: &[Record]) -> Result<()> {
        let b = self.block;
        for r in records {
            if r.data.is_empty() {
                continue;
            }
            let first = r.offset / b;
            let last = (r.offset + r.data.len() as u64 - 1) / b;
            for blk in first..=last {
                if !self.saved.insert(blk) {
                    continue;
                }
                let start = blk * b;
                let len = (start + b).min(dev.size()).saturating_sub(start);
                if len == 0 {
                    continue;
                }
                let mut data = vec![0u8; len as usize];
                dev.read_at(&mut data, start)?;
                self.add(blk, &data)?;
            }
        }
        self.write_index(dev, false)
    }

    /// One saved block: extend the last key when it ends just before, else a new key.
    fn add(&mut self, blk: u64, data: &[u8]) -> Result<()> {
        let b = self.block;
        let extends = self.in_block > 0 && {
            let k = 16 + (self.in_block - 1) * 16;
            let fsblk = le64(&self.keys, k);
            let size = u64::from(le32(&self.keys, k + 12));
            size % b == 0
                && fsblk + size / b == blk
                && size + data.len() as u64 <= MAX_EXTENT_BLOCKS * b
        };
        if extends {
            let k = 16 + (self.in_block - 1) * 16;
            let crc = raw_crc(le32(&self.keys, k + 8), data);
            let size = le32(&self.keys, k + 12) + data.len() as u32;
            self.keys[k + 8..k + 12].copy_from_slice(&crc.to_le_bytes());
            self.keys[k + 12..k + 16].copy_from_slice(&size.to_le_bytes());
        } else {
            if self.in_block == self.keys_per_block() {
                // The full key block is on disk already; the next one goes here.
                self.keys.fill(0);
                self.in_block = 0;
                self.key_blk = self.next;
                self.next += 1;
            }
            let k = 16 + self.in_block * 16;
            self.keys[k..k + 8].copy_from_slice(&blk.to_le_bytes());
            self.keys[k + 8..k + 12].copy_from_slice(&raw_crc(!0, data).to_le_bytes());
            self.keys[k + 12..k + 16].copy_from_slice(&(data.len() as u32).to_le_bytes());
            self.in_block += 1;
            self.num_keys += 1;
        }
        self.store.write_at(data, self.next * b)?;
        self.next += (data.len() as u64).div_ceil(b);
        Ok(())
    }

    /// The key block, the superblock copy and the header, then sync.
    fn write_index(&mut self, dev: &dyn Device, finished: bool) -> Result<()> {
        let b = self.block;
        if self.in_block > 0 {
            self.keys[0..4].copy_from_slice(&KEY_MAGIC.to_le_bytes());
            self.keys[4..16].fill(0);
            let crc = raw_crc(!0, &self.keys);
            self.keys[4..8].copy_from_slice(&crc.to_le_bytes());
            self.store.write_at(&self.keys, self.key_blk * b)?;
        }
        let mut sb = vec![0u8; SB_BYTES];
        if dev.size() >= SB_OFFSET + SB_BYTES as u64 {
            dev.read_at(&mut sb, SB_OFFSET)?;
        }
        let sb_crc = raw_crc(!0, &sb);
        sb[0x38] = !sb[0x38];
        sb[0x39] = !sb[0x39];
        let mut copy = vec![0u8; b as usize];
        copy[..SB_BYTES].copy_from_slice(&sb);
        self.store.write_at(&copy, SUPER_BLK * b)?;
        let mut h = vec![0u8; b as usize];
        h[0..8].copy_from_slice(MAGIC);
        h[8..16].copy_from_slice(&self.num_keys.to_le_bytes());
        h[16..24].copy_from_slice(&SUPER_BLK.to_le_bytes());
        h[24..32].copy_from_slice(&FIRST_KEY_BLK.to_le_bytes());
        h[32..36].copy_from_slice(&(b as u32).to_le_bytes());
        h[36..40].copy_from_slice(&(b as u32).to_le_bytes());
        h[40..44].copy_from_slice(&sb_crc.to_le_bytes());
        let state = if finished { STATE_FINISHED } else { 0 };
        h[44..48].copy_from_slice(&state.to_le_bytes());
        let crc = raw_crc(!0, &h[..HEADER_BYTES - 4]);
        h[HEADER_BYTES - 4..HEADER_BYTES].copy_from_slice(&crc.to_le_bytes());
        if self.next == FIRST_KEY_BLK + 1 && self.in_block == 0 {
            // No key yet: an empty key block keeps the file as long as e2fsprogs makes it.
            self.store
                .write_at(&vec![0u8; b as usize], FIRST_KEY_BLK * b)?;
        }
        self.store.write_at(&h, 0)?;
        self.store.sync()
    }

    /// Every write is done: record the device's superblock as it is now and mark the file
    /// complete (e2undo checks the device against it before restoring).
    pub fn finish(mut self, dev: &dyn Device) -> Result<S> {
        self.write_index(dev, true)?;
        Ok(self.store)
    }
}

/// Does the store start with e2undo's magic?
pub fn is_e2undo(store: &dyn LogStore) -> bool {
    let mut m = [0u8; 8];
    store.read_at(&mut m, 0).is_ok() && &m == MAGIC
}

/// What [`restore`] did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Restored {
    pub keys: u64,
    pub bytes: u64,
    /// The file was not marked complete (its writer stopped early).
    pub incomplete: bool,
}

/// Put back every block an e2undo file saved, as `e2undo` does: the header, key blocks and
/// data are checked first (crc32c), and the device's superblock must be the one the file
/// recorded, so the file is applied to the device and state it was made for.
pub fn restore(store: &dyn LogStore, dev: &dyn Device) -> Result<Restored> {
    let bad = |why: &str| IoError::Refused(format!("not a usable e2undo file: {why}"));
    let mut h = [0u8; HEADER_BYTES];
    store.read_at(&mut h, 0).map_err(|_| bad("no header"))?;
    if &h[0..8] != MAGIC {
        return Err(bad("bad magic"));
    }
    if raw_crc(!0, &h[..HEADER_BYTES - 4]) != le32(&h, HEADER_BYTES - 4) {
        return Err(bad("header checksum does not match"));
    }
    let b = le32(&h, 32);
    let fs_b = u64::from(le32(&h, 36));
    if !(MIN_BLOCK..=MAX_BLOCK).contains(&b) || fs_b == 0 {
        return Err(bad("block size out of range"));
    }
    if le32(&h, 52) != 0 || le32(&h, 56) != 0 {
        return Err(bad("it needs features this version does not know"));
    }
    let fs_offset = if le32(&h, 48) & 1 != 0 {
        le64(&h, 64)
    } else {
        0
    };
    let b = u64::from(b);
    let len = store.len()?;
    let num_keys = le64(&h, 8);
    if num_keys > len / 16 {
        return Err(bad("more keys than the file can hold"));
    }
    // The device must hold the superblock the file was finished with.
    let mut copy = vec![0u8; SB_BYTES];
    let super_blk = le64(&h, 16);
    store
        .read_at(&mut copy, super_blk.saturating_mul(b))
        .map_err(|_| bad("no superblock copy"))?;
    copy[0x38] = !copy[0x38];
    copy[0x39] = !copy[0x39];
    let mut now = vec![0u8; SB_BYTES];
    dev.read_at(&mut now, fs_offset + SB_OFFSET)?;
    if now != copy || raw_crc(!0, &copy) != le32(&h, 40) {
        return Err(IoError::Refused(
            "the undo file does not match this file system (its superblock differs); \
             nothing was written"
                .into(),
        ));
    }
    // Read and check every key and its data before writing anything.
    let per_block = (b / 16 - 1) as usize;
    let mut keys: Vec<(u64, u64, u32)> = Vec::new(); // (device offset, file offset, size)
    let mut lblk = le64(&h, 24);
    let mut kb = vec![0u8; b as usize];
    while (keys.len() as u64) < num_keys {
        store
            .read_at(&mut kb, lblk.saturating_mul(b))
            .map_err(|_| bad("a key block is missing"))?;
        let crc = le32(&kb, 4);
        kb[4..8].fill(0);
        if le32(&kb, 0) != KEY_MAGIC || raw_crc(!0, &kb) != crc {
            return Err(bad("a key block is corrupt"));
        }
        lblk += 1;
        let here = ((num_keys - keys.len() as u64) as usize).min(per_block);
        for j in 0..here {
            let k = 16 + j * 16;
            let size = le32(&kb, k + 12);
            if u64::from(size) > MAX_EXTENT_BLOCKS * b || size == 0 {
                return Err(bad("a key's size is out of range"));
            }
            let at = le64(&kb, k)
                .checked_mul(fs_b)
                .and_then(|o| o.checked_add(fs_offset))
                .filter(|o| {
                    o.checked_add(u64::from(size))
                        .is_some_and(|e| e <= dev.size())
                })
                .ok_or_else(|| bad("a key lies outside the device"))?;
            keys.push((at, lblk.saturating_mul(b), size));
            let mut data = vec![0u8; size as usize];
            store
                .read_at(&mut data, lblk.saturating_mul(b))
                .map_err(|_| bad("saved data is missing"))?;
            if raw_crc(!0, &data) != le32(&kb, k + 8) {
                return Err(bad("saved data does not match its checksum"));
            }
            lblk += u64::from(size).div_ceil(b);
        }
    }
    let mut bytes = 0;
    for &(at, from, size) in &keys {
        let mut data = vec![0u8; size as usize];
        store.read_at(&mut data, from)?;
        dev.write_at(&data, at)?;
        bytes += u64::from(size);
    }
    dev.flush()?;
    Ok(Restored {
        keys: keys.len() as u64,
        bytes,
        incomplete: le32(&h, 44) & STATE_FINISHED == 0,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::logfile::MemLog;
    use crate::MemDevice;

    #[test]
    fn a_written_file_restores_the_device() {
        let mut img = vec![0u8; 64 * 1024];
        for (i, b) in img.iter_mut().enumerate() {
            *b = (i % 251) as u8;
        }
        img[0x438] = 0x53;
        img[0x439] = 0xEF;
        let dev = MemDevice::new(img.clone());
        let mut store = MemLog::default();
        let mut u = E2Undo::create(&mut store, 1024, &dev).unwrap();
        let recs = [
            Record {
                offset: 1024,
                data: vec![7; 100],
            },
            Record {
                offset: 5000,
                data: vec![9; 3000],
            },
        ];
        u.save_before(&dev, &recs).unwrap();
        for r in &recs {
            dev.write_at(&r.data, r.offset).unwrap();
        }
        u.finish(&dev).unwrap();
        assert!(is_e2undo(&store));
        let r = restore(&store, &dev).unwrap();
        assert!(!r.incomplete);
        assert_eq!(r.bytes, 5 * 1024);
        assert_eq!(dev.snapshot(), img);
        // The superblock now differs from the recorded one: refused.
        assert!(restore(&store, &dev).is_err());
    }
}
