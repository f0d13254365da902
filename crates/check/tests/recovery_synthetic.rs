//! Journal recovery on hand-built journals: descriptor + data + commit, revoke, escaped
//! blocks, wrap-around, every tag size, checksums good and bad, and hostile logs (tags outside
//! the file system, cycles, impossible revoke counts, a start outside the log). The file system
//! comes from mke2fs; the journal blocks are written in memory.

use ffsck_check::journal::recovery::{self, Replay};
use ffsck_check::journal::Journal;
use ffsck_check::{Policy, Problem};
use ffsck_format::csum::ext4_crc32c;
use ffsck_format::journal::{blocktype, feature, tag_flag, TagLayout, JBD2_MAGIC_NUMBER};
use ffsck_io::overlay::Overlay;
use ffsck_io::{Device, MemDevice};
use std::process::Command;
use std::sync::Arc;
use zerocopy::IntoBytes;

const BS: usize = 1024;

/// An 8 MiB ext4 with 1 KiB blocks and a 1024-block journal, in memory.
fn base_image() -> Option<Vec<u8>> {
    let dir = tempfile::tempdir().unwrap();
    let img = dir.path().join("fs.img");
    let ok = Command::new("mke2fs")
        .args([
            "-q",
            "-F",
            "-t",
            "ext4",
            "-O",
            "^metadata_csum",
            "-b",
            "1024",
            "-J",
            "size=1",
        ])
        .arg(&img)
        .arg("8M")
        .status()
        .map(|s| s.success())
        .unwrap_or(false);
    if !ok {
        eprintln!("SKIP: mke2fs is not available");
        return None;
    }
    Some(std::fs::read(&img).unwrap())
}

/// A journal being written by hand into an image.
struct Jb {
    img: Vec<u8>,
    journal: Journal,
    layout: TagLayout,
    v23: bool,
    v3: bool,
    seed: u32,
}

impl Jb {
    fn new(incompat: u32, compat: u32) -> Option<Jb> {
        let img = base_image()?;
        let dev: Arc<dyn Device> = Arc::new(MemDevice::new(img.clone()));
        let mut f = Default::default();
        let p0 = ffsck_check::pass0::run(dev, Default::default(), Policy::No, &mut f).unwrap();
        let mut journal = p0.journal.journal.clone().expect("mke2fs made a journal");
        let sb = &mut journal.sb;
        sb.s_header.h_blocktype.set(blocktype::SUPERBLOCK_V2);
        sb.s_feature_incompat.set(incompat);
        sb.s_feature_compat.set(compat);
        if incompat & (feature::INCOMPAT_CSUM_V2 | feature::INCOMPAT_CSUM_V3) != 0 {
            sb.s_checksum_type = 4;
        }
        let layout = TagLayout::of(sb);
        let seed = sb.csum_seed();
        let v23 = sb.has_csum_v2or3();
        Some(Jb {
            img,
            journal,
            layout,
            v23,
            v3: layout.csum_v3,
            seed,
        })
    }
    fn last(&self) -> u64 {
        u64::from(self.journal.sb.s_maxlen.get())
    }
    fn first(&self) -> u64 {
        u64::from(self.journal.sb.s_first.get())
    }
    fn next(&self, b: u64) -> u64 {
        if b + 1 >= self.last() {
            self.first()
        } else {
            b + 1
        }
    }
    fn put(&mut self, log_blk: u64, data: &[u8]) {
        let p = self.journal.runs.lookup(log_blk).unwrap() as usize * BS;
        self.img[p..p + BS].copy_from_slice(data);
    }
    fn header(t: u32, seq: u32) -> Vec<u8> {
        let mut b = vec![0u8; BS];
        b[0..4].copy_from_slice(&JBD2_MAGIC_NUMBER.to_be_bytes());
        b[4..8].copy_from_slice(&t.to_be_bytes());
        b[8..12].copy_from_slice(&seq.to_be_bytes());
        b
    }
    fn tail(&self, b: &mut [u8]) {
        if self.v23 {
            let n = b.len();
            b[n - 4..].fill(0);
            let c = ext4_crc32c(self.seed, b);
            b[n - 4..].copy_from_slice(&c.to_be_bytes());
        }
    }
    /// Descriptor at `at` and its data blocks after it; returns the next free log block.
    fn descriptor(&mut self, at: u64, seq: u32, tags: &[(u64, u32, Vec<u8>)]) -> u64 {
        let mut d = Self::header(blocktype::DESCRIPTOR, seq);
        let mut off = 12;
        let mut pos = self.next(at);
        for (i, (blk, extra, data)) in tags.iter().enumerate() {
            let mut flags = *extra;
            if i > 0 {
                flags |= tag_flag::SAME_UUID;
            }
            if i + 1 == tags.len() {
                flags |= tag_flag::LAST_TAG;
            }
            // The checksum covers the block as logged (escaped), as the kernel writes it.
            let mut logged = data.clone();
            if flags & tag_flag::ESCAPE != 0 {
                logged[..4].fill(0);
            }
            let c = ext4_crc32c(ext4_crc32c(self.seed, &seq.to_be_bytes()), &logged);
            let lo = (*blk as u32).to_be_bytes();
            let hi = ((*blk >> 32) as u32).to_be_bytes();
            if self.v3 {
                d[off..off + 4].copy_from_slice(&lo);
                d[off + 4..off + 8].copy_from_slice(&flags.to_be_bytes());
                d[off + 8..off + 12].copy_from_slice(&hi);
                d[off + 12..off + 16].copy_from_slice(&c.to_be_bytes());
            } else {
                d[off..off + 4].copy_from_slice(&lo);
                if self.v23 {
                    d[off + 4..off + 6].copy_from_slice(&(c as u16).to_be_bytes());
                }
                d[off + 6..off + 8].copy_from_slice(&(flags as u16).to_be_bytes());
                if self.layout.is_64bit {
                    d[off + 8..off + 12].copy_from_slice(&hi);
                }
            }
            off += self.layout.tag_bytes();
            if i == 0 {
                off += 16;
            }
            self.put(pos, &logged);
            pos = self.next(pos);
        }
        self.tail(&mut d);
        self.put(at, &d);
        pos
    }
    fn revoke(&mut self, at: u64, seq: u32, blocks: &[u64]) -> u64 {
        let mut d = Self::header(blocktype::REVOKE, seq);
        let rec = if self.layout.is_64bit { 8 } else { 4 };
        let mut off = 16;
        for &b in blocks {
            if rec == 8 {
                d[off..off + 8].copy_from_slice(&b.to_be_bytes());
            } else {
                d[off..off + 4].copy_from_slice(&(b as u32).to_be_bytes());
            }
            off += rec;
        }
        d[12..16].copy_from_slice(&(off as u32).to_be_bytes());
        self.tail(&mut d);
        self.put(at, &d);
        self.next(at)
    }
    fn commit(&mut self, at: u64, seq: u32, time: u64) -> u64 {
        let mut d = Self::header(blocktype::COMMIT, seq);
        d[0x30..0x38].copy_from_slice(&time.to_be_bytes());
        if self.v23 {
            let c = ext4_crc32c(self.seed, &d);
            d[0x10..0x14].copy_from_slice(&c.to_be_bytes());
        }
        self.put(at, &d);
        self.next(at)
    }
    fn plan(&mut self, start: u64, seq: u32) -> (Replay, Overlay) {
        self.journal.sb.s_start.set(start as u32);
        self.journal.sb.s_sequence.set(seq);
        let dev: Arc<dyn Device> = Arc::new(MemDevice::new(self.img.clone()));
        let mut f = Default::default();
        let p0 =
            ffsck_check::pass0::run(dev.clone(), Default::default(), Policy::No, &mut f).unwrap();
        let r = recovery::plan(&p0.fs, &self.journal);
        let ov = Overlay::new(dev);
        for rec in &r.records {
            ov.write_at(&rec.data, rec.offset).unwrap();
        }
        (r, ov)
    }
}

fn block(ov: &Overlay, blk: u64) -> Vec<u8> {
    let mut b = vec![0u8; BS];
    ov.read_at(&mut b, blk * BS as u64).unwrap();
    b
}

fn pattern(tag: u8) -> Vec<u8> {
    (0..BS).map(|i| (i as u8).wrapping_mul(7) ^ tag).collect()
}

fn magic_block(tag: u8) -> Vec<u8> {
    let mut b = pattern(tag);
    b[..4].copy_from_slice(&JBD2_MAGIC_NUMBER.to_be_bytes());
    b
}

/// Blocks in the free area of the 8 MiB image that the replay writes.
const A: u64 = 5000;
const B: u64 = 5001;
const C: u64 = 5002;

/// descriptor+data+commit, an escaped block, a revoke in a later transaction, and an
/// uncommitted transaction at the end; from `start`, so a start near the end wraps.
fn scenario(incompat: u32, compat: u32, start_from_end: Option<u64>) {
    let Some(mut j) = Jb::new(incompat, compat) else {
        return;
    };
    let start = match start_from_end {
        Some(k) => j.last() - k,
        None => j.first(),
    };
    let before_b = {
        let p = B as usize * BS;
        j.img[p..p + BS].to_vec()
    };
    let mut pos = j.descriptor(
        start,
        7,
        &[(A, tag_flag::ESCAPE, magic_block(1)), (B, 0, pattern(2))],
    );
    pos = j.commit(pos, 7, 100);
    pos = j.revoke(pos, 8, &[B]);
    pos = j.descriptor(pos, 8, &[(C, 0, pattern(3))]);
    pos = j.commit(pos, 8, 101);
    // Transaction 9 never committed: not replayed.
    j.descriptor(pos, 9, &[(B, 0, pattern(9)), (C, 0, pattern(9))]);
    let (r, ov) = j.plan(start, 7);
    assert!(r.issues.is_empty(), "{:?}", r.issues);
    assert_eq!((r.transactions, r.end_transaction), (2, 9));
    assert_eq!((r.blocks, r.revoked, r.escaped), (2, 1, 1));
    assert_eq!(r.wrapped, start_from_end.is_some());
    assert_eq!(block(&ov, A), magic_block(1), "escaped block restored");
    assert_eq!(block(&ov, B), before_b, "revoked block left alone");
    assert_eq!(block(&ov, C), pattern(3));
    // The journal is marked empty and the next sequence recorded.
    let jsb_at = j.journal.runs.lookup(0).unwrap() * BS as u64;
    let mut jsb = vec![0u8; 1024];
    ov.read_at(&mut jsb, jsb_at).unwrap();
    assert_eq!(&jsb[0x1C..0x20], &[0, 0, 0, 0], "s_start reset");
    assert_eq!(u32::from_be_bytes(jsb[0x18..0x1C].try_into().unwrap()), 10);
}

#[test]
fn plain_32bit_tags() {
    scenario(feature::INCOMPAT_REVOKE, 0, None);
}

#[test]
fn tags_64bit_wrapping() {
    scenario(
        feature::INCOMPAT_REVOKE | feature::INCOMPAT_64BIT,
        0,
        Some(2),
    );
}

#[test]
fn csum_v2_tags_wrapping() {
    scenario(
        feature::INCOMPAT_REVOKE | feature::INCOMPAT_CSUM_V2,
        0,
        Some(1),
    );
}

#[test]
fn csum_v2_64bit_tags() {
    scenario(
        feature::INCOMPAT_REVOKE | feature::INCOMPAT_CSUM_V2 | feature::INCOMPAT_64BIT,
        0,
        None,
    );
}

#[test]
fn csum_v3_tags_wrapping() {
    scenario(
        feature::INCOMPAT_REVOKE | feature::INCOMPAT_CSUM_V3 | feature::INCOMPAT_64BIT,
        0,
        Some(3),
    );
}

#[test]
fn empty_log_only_moves_the_sequence() {
    let Some(mut j) = Jb::new(feature::INCOMPAT_REVOKE, 0) else {
        return;
    };
    let (r, _) = j.plan(0, 42);
    assert_eq!((r.transactions, r.blocks), (0, 0));
    // Only the two superblocks are written.
    assert_eq!(r.records.len(), 2);
}

#[test]
fn bad_commit_checksum_ends_the_log_and_is_reported() {
    let Some(mut j) = Jb::new(feature::INCOMPAT_REVOKE | feature::INCOMPAT_CSUM_V3, 0) else {
        return;
    };
    let s = j.first();
    let mut pos = j.descriptor(s, 3, &[(A, 0, pattern(1))]);
    pos = j.commit(pos, 3, 10);
    let c = j.descriptor(pos, 4, &[(C, 0, pattern(2))]);
    j.commit(c, 4, 11);
    // Corrupt transaction 4's commit block.
    let p = j.journal.runs.lookup(c).unwrap() as usize * BS + 100;
    j.img[p] ^= 1;
    let (r, ov) = j.plan(s, 3);
    assert_eq!(r.transactions, 1);
    assert_eq!(r.failed_commit, Some(4));
    assert!(r
        .issues
        .iter()
        .any(|(p, _)| *p == Problem::P0_JNL_TXN_CORRUPT));
    assert_eq!(block(&ov, A), pattern(1));
    assert_ne!(block(&ov, C), pattern(2));
}

#[test]
fn bad_data_checksum_skips_that_block() {
    let Some(mut j) = Jb::new(feature::INCOMPAT_REVOKE | feature::INCOMPAT_CSUM_V3, 0) else {
        return;
    };
    let s = j.first();
    let pos = j.descriptor(s, 3, &[(A, 0, pattern(1)), (C, 0, pattern(2))]);
    j.commit(pos, 3, 10);
    // Corrupt the logged copy of C (the second data block).
    let p = j.journal.runs.lookup(s + 2).unwrap() as usize * BS + 7;
    j.img[p] ^= 0xFF;
    let (r, ov) = j.plan(s, 3);
    assert_eq!(r.blocks, 1);
    assert!(r
        .issues
        .iter()
        .any(|(p, c)| *p == Problem::P0_JOURNAL_CHECKSUM_ERROR && c.blk == C));
    assert_eq!(block(&ov, A), pattern(1));
}

#[test]
fn compat_checksum_v1_transactions() {
    // COMPAT_CHECKSUM: a crc32_be over the descriptor and data blocks in the commit block.
    let Some(mut j) = Jb::new(feature::INCOMPAT_REVOKE, feature::COMPAT_CHECKSUM) else {
        return;
    };
    let s = j.first();
    let pos = j.descriptor(s, 3, &[(A, 0, pattern(1))]);
    let mut sum = !0u32;
    for b in [s, s + 1] {
        let p = j.journal.runs.lookup(b).unwrap() as usize * BS;
        sum = ffsck_format::journal::crc32_be(sum, &j.img[p..p + BS]);
    }
    let mut d = Jb::header(blocktype::COMMIT, 3);
    d[12] = 1;
    d[13] = 4;
    d[0x10..0x14].copy_from_slice(&sum.to_be_bytes());
    j.put(pos, &d);
    let (r, ov) = j.plan(s, 3);
    assert!(r.issues.is_empty(), "{:?}", r.issues);
    assert_eq!(r.transactions, 1);
    assert_eq!(block(&ov, A), pattern(1));
    // A wrong sum fails the commit.
    d[0x10] ^= 1;
    j.put(pos, &d);
    let (r, _) = j.plan(s, 3);
    assert_eq!((r.transactions, r.failed_commit), (0, Some(3)));
}

#[test]
fn hostile_tag_outside_the_file_system() {
    let Some(mut j) = Jb::new(feature::INCOMPAT_REVOKE | feature::INCOMPAT_64BIT, 0) else {
        return;
    };
    let s = j.first();
    let pos = j.descriptor(s, 1, &[(1 << 40, 0, pattern(1)), (A, 0, pattern(2))]);
    j.commit(pos, 1, 1);
    let (r, ov) = j.plan(s, 1);
    assert_eq!(r.blocks, 1);
    assert!(r
        .issues
        .iter()
        .any(|(p, _)| *p == Problem::P0_JOURNAL_CORRUPTED));
    assert_eq!(block(&ov, A), pattern(2));
}

#[test]
fn hostile_cycle_is_bounded() {
    // One transaction whose descriptors chain around the whole log and never commit.
    let Some(mut j) = Jb::new(feature::INCOMPAT_REVOKE, 0) else {
        return;
    };
    let first = j.first();
    let len = j.last() - first;
    let per = 60; // tags per descriptor (8 bytes each in a 1 KiB block)
    let mut at = first;
    for _ in 0..len / (per + 1) + 2 {
        let tags: Vec<_> = (0..per).map(|i| (A + i, 0, pattern(i as u8))).collect();
        at = j.descriptor(at, 5, &tags);
    }
    let (r, _) = j.plan(first + 3, 5);
    assert_eq!((r.transactions, r.blocks), (0, 0));
}

#[test]
fn hostile_revoke_count_and_bad_start() {
    let Some(mut j) = Jb::new(feature::INCOMPAT_REVOKE, 0) else {
        return;
    };
    let s = j.first();
    let pos = j.descriptor(s, 2, &[(A, 0, pattern(1))]);
    let pos = j.commit(pos, 2, 1);
    let mut d = Jb::header(blocktype::REVOKE, 3);
    d[12..16].copy_from_slice(&u32::MAX.to_be_bytes());
    j.put(pos, &d);
    // In an uncommitted transaction the bad count is never read (as jbd2): 2 is replayed.
    let (r, _) = j.plan(s, 2);
    assert!(r.issues.is_empty(), "{:?}", r.issues);
    assert_eq!(r.blocks, 1);
    // Committed, it fails the revoke pass, and nothing is replayed.
    j.commit(pos + 1, 3, 2);
    let (r, _) = j.plan(s, 2);
    assert_eq!(r.blocks, 0);
    assert!(r
        .issues
        .iter()
        .any(|(p, _)| *p == Problem::P0_JOURNAL_CORRUPTED));
    let last = j.last();
    let (r, _) = j.plan(last + 5, 2);
    assert!(r
        .issues
        .iter()
        .any(|(p, _)| *p == Problem::P0_JOURNAL_CORRUPTED));
}

#[test]
fn library_entry_point_reads_the_device() {
    // Write the journal superblock and needs_recovery to the image, then use `replay(dev)`.
    let Some(mut j) = Jb::new(feature::INCOMPAT_REVOKE, 0) else {
        return;
    };
    let s = j.first();
    let pos = j.descriptor(s, 3, &[(A, 0, pattern(4))]);
    j.commit(pos, 3, 10);
    j.journal.sb.s_start.set(s as u32);
    j.journal.sb.s_sequence.set(3);
    let p = j.journal.runs.lookup(0).unwrap() as usize * BS;
    j.img[p..p + 1024].copy_from_slice(j.journal.sb.as_bytes());
    let dev: Arc<dyn Device> = Arc::new(MemDevice::new(j.img.clone()));
    assert!(
        recovery::replay(dev.clone()).unwrap().is_none(),
        "no needs_recovery yet"
    );
    j.img[1024 + 0x60] |= 0x4; // s_feature_incompat |= needs_recovery
    let dev: Arc<dyn Device> = Arc::new(MemDevice::new(j.img.clone()));
    let r = recovery::replay(dev).unwrap().unwrap();
    assert_eq!((r.transactions, r.blocks), (1, 1));
}
