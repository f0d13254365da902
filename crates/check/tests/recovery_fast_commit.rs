//! Fast-commit replay on hand-edited copies of the corpus image `j_recover_fast_commit` (a
//! kernel-made fast-commit log of 15 records under one tail): a tail with a bad crc stops replay
//! at the last valid tail, a log split under two tails replays only the part before a bad
//! second tail, replaying twice changes nothing, and hostile records (lengths past the block,
//! ranges outside the file system, unknown tags) give findings, never panics.
//! Skips when the corpus is not present.

use ffsck_check::journal::fast_commit;
use ffsck_check::journal::recovery;
use ffsck_check::journal::Journal;
use ffsck_check::Policy;
use ffsck_format::csum::ext4_crc32c;
use ffsck_format::journal::fc_tag;
use ffsck_io::{Device, MemDevice};
use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;
use std::sync::Arc;

const IMAGE: &str = "/work/shared/corpus/e2fsprogs/j_recover_fast_commit/image.gz";

/// The image, its journal, and the byte offset of the fast-commit area's first block.
struct Fc {
    img: Vec<u8>,
    journal: Journal,
    fc_first: u64,
    area: u64,
    bs: usize,
}

fn load() -> Option<Fc> {
    if !Path::new(IMAGE).exists() {
        eprintln!("SKIP: no corpus image {IMAGE}");
        return None;
    }
    let out = Command::new("gzip").arg("-dc").arg(IMAGE).output().ok()?;
    let img = out.stdout;
    let dev: Arc<dyn Device> = Arc::new(MemDevice::new(img.clone()));
    let mut f = Default::default();
    let p0 = ffsck_check::pass0::run(dev, Default::default(), Policy::No, &mut f).unwrap();
    let journal = p0.journal.journal.clone().expect("a journal");
    let bs = p0.fs.block_size();
    let fc_first = journal.total_len - u64::from(journal.sb.fast_commit_blocks()) + 1;
    let area = journal.runs.lookup(fc_first).unwrap() * bs as u64;
    Some(Fc {
        img,
        journal,
        fc_first,
        area,
        bs,
    })
}

impl Fc {
    /// The records of the first fast-commit block: (tag, value).
    fn records(&self) -> Vec<(u16, Vec<u8>)> {
        let b = &self.img[self.area as usize..self.area as usize + self.bs];
        let mut at = 0;
        let mut out = Vec::new();
        while at + 4 <= self.bs {
            let tag = u16::from_le_bytes([b[at], b[at + 1]]);
            let len = usize::from(u16::from_le_bytes([b[at + 2], b[at + 3]]));
            out.push((tag, b[at + 4..at + 4 + len].to_vec()));
            at += 4 + len;
            if tag == fc_tag::TAIL {
                break;
            }
        }
        out
    }

    /// Write `recs` as the first fast-commit block; each tail gets the crc of the records
    /// since the previous one (plus its own tid), corrupted where `bad_tail` says.
    fn write(&mut self, recs: &[(u16, Vec<u8>)], bad_tail: &[bool]) {
        let mut b = vec![0u8; self.bs];
        let mut at = 0;
        let mut crc = 0u32;
        let mut tails = 0;
        for (tag, val) in recs {
            let mut rec = Vec::new();
            rec.extend_from_slice(&tag.to_le_bytes());
            rec.extend_from_slice(&(val.len() as u16).to_le_bytes());
            rec.extend_from_slice(val);
            if *tag == fc_tag::TAIL {
                crc = ext4_crc32c(crc, &rec[..8]);
                let c = if bad_tail.get(tails).copied().unwrap_or(false) {
                    !crc
                } else {
                    crc
                };
                rec[8..12].copy_from_slice(&c.to_le_bytes());
                crc = 0;
                tails += 1;
            } else {
                crc = ext4_crc32c(crc, &rec);
            }
            b[at..at + rec.len()].copy_from_slice(&rec);
            at += rec.len();
        }
        let off = self.area as usize;
        self.img[off..off + self.bs].copy_from_slice(&b);
    }

    fn plan(&self) -> recovery::Replay {
        let dev: Arc<dyn Device> = Arc::new(MemDevice::new(self.img.clone()));
        recovery::replay(dev).unwrap().expect("needs recovery")
    }
}

fn tail(tid: u32) -> (u16, Vec<u8>) {
    let mut v = tid.to_le_bytes().to_vec();
    v.extend_from_slice(&[0; 4]);
    (fc_tag::TAIL, v)
}

#[test]
fn corpus_log_replays_all_records() {
    let Some(fc) = load() else { return };
    let r = fc.plan();
    assert_eq!((r.fast_commit_tags, r.fast_commit_discarded), (15, 0));
    assert!(r.issues.is_empty(), "{:?}", r.issues);
}

#[test]
fn bad_tail_crc_replays_nothing() {
    let Some(mut fc) = load() else { return };
    let recs = fc.records();
    assert_eq!(recs.len(), 15);
    fc.write(&recs, &[true]);
    let r = fc.plan();
    assert_eq!((r.fast_commit_tags, r.fast_commit_discarded), (0, 15));
    assert!(
        !r.issues.is_empty(),
        "a log without a valid tail is a finding"
    );
}

#[test]
fn bad_second_tail_stops_at_the_first() {
    let Some(mut fc) = load() else { return };
    let recs = fc.records();
    let tid = u32::from_le_bytes(recs[14].1[..4].try_into().unwrap());
    // HEAD, inode 14, its range, create "new", unlink "old" | TAIL | the rest, TAIL.
    let mut split: Vec<_> = recs[..5].to_vec();
    split.push(tail(tid));
    split.extend_from_slice(&recs[5..14]);
    split.push(tail(tid));
    fc.write(&split, &[false, false]);
    let good = fc.plan();
    assert_eq!((good.fast_commit_tags, good.fast_commit_discarded), (16, 0));
    fc.write(&split, &[false, true]);
    let r = fc.plan();
    assert_eq!((r.fast_commit_tags, r.fast_commit_discarded), (6, 10));
    // The first part is there ('new' linked, its block used), the rest is not.
    assert!(r.records.len() < good.records.len());
    assert!(r.blocks >= 1);
}

#[test]
fn replay_is_idempotent() {
    let Some(fc) = load() else { return };
    let dev: Arc<dyn Device> = Arc::new(MemDevice::new(fc.img.clone()));
    let mut f = Default::default();
    let p0 = ffsck_check::pass0::run(dev, Default::default(), Policy::No, &mut f).unwrap();
    let tid = fc.journal.sb.s_sequence.get().wrapping_add(1);
    let mut once = BTreeMap::new();
    let mut issues = Vec::new();
    let st = fast_commit::replay(
        &p0.fs,
        &fc.journal,
        fc.fc_first,
        tid,
        &mut once,
        &mut issues,
    );
    assert_eq!(st.tags, 15);
    assert!(issues.is_empty(), "{issues:?}");
    let mut twice = once.clone();
    fast_commit::replay(
        &p0.fs,
        &fc.journal,
        fc.fc_first,
        tid,
        &mut twice,
        &mut issues,
    );
    assert!(issues.is_empty(), "{issues:?}");
    assert!(once == twice, "a second replay changed blocks");
}

#[test]
fn hostile_records_are_findings() {
    let Some(fc) = load() else { return };
    let recs = fc.records();
    let tid = u32::from_le_bytes(recs[14].1[..4].try_into().unwrap());
    let head = recs[0].clone();
    let mut range_out = Vec::new();
    range_out.extend_from_slice(&14u32.to_le_bytes());
    range_out.extend_from_slice(&0u32.to_le_bytes());
    range_out.extend_from_slice(&8u16.to_le_bytes());
    range_out.extend_from_slice(&0u16.to_le_bytes());
    range_out.extend_from_slice(&0xFFFF_FF00u32.to_le_bytes());
    let mut bad_ino = range_out.clone();
    bad_ino[..4].copy_from_slice(&u32::MAX.to_le_bytes());
    bad_ino[12..16].copy_from_slice(&1200u32.to_le_bytes());
    let mut dentry = Vec::new();
    dentry.extend_from_slice(&13u32.to_le_bytes()); // a regular file as the parent
    dentry.extend_from_slice(&14u32.to_le_bytes());
    dentry.extend_from_slice(b"x");
    let cases: Vec<Vec<(u16, Vec<u8>)>> = vec![
        vec![head.clone(), (fc_tag::ADD_RANGE, range_out), tail(tid)],
        vec![head.clone(), (fc_tag::ADD_RANGE, bad_ino), tail(tid)],
        vec![head.clone(), (fc_tag::LINK, dentry), tail(tid)],
        vec![
            head.clone(),
            (fc_tag::INODE, vec![14, 0, 0, 0, 1]),
            tail(tid),
        ],
        vec![head.clone(), (fc_tag::DEL_RANGE, vec![1; 3]), tail(tid)],
    ];
    for (i, recs) in cases.iter().enumerate() {
        let mut c = load().unwrap();
        c.write(recs, &[false]);
        let r = c.plan();
        assert_eq!(r.fast_commit_tags, 3, "case {i}");
        assert!(!r.issues.is_empty(), "case {i}: no finding");
    }
    // A record whose length runs past its block, and an unknown tag: the scan stops.
    let mut c = load().unwrap();
    c.write(&[head.clone(), tail(tid)], &[false]);
    let at = c.area as usize + 4 + head.1.len();
    c.img[at + 2..at + 4].copy_from_slice(&u16::MAX.to_le_bytes());
    assert_eq!(c.plan().fast_commit_tags, 0);
    let mut c = load().unwrap();
    c.write(&[head, (77, vec![0; 8]), tail(tid)], &[false]);
    assert_eq!(c.plan().fast_commit_tags, 0);
}
