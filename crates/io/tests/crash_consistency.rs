//! Crash-point replay of the repair write path: cut the power after every possible number of
//! writes and syncs, let each unsynced write be lost, kept or torn, reboot, recover, and require
//! the original image or the fully repaired one, never a mix; the undo file must then give the
//! original back byte for byte. A log is bound to its device and state: a log for another file
//! system, or whose records' targets hold neither their old nor their new contents, is refused
//! before anything is written. (The journal commit path is crash-tested in
//! `crates/check/tests/journal_commit.rs`, as it needs the checker to build transactions.)

use ffsck_io::logfile::{LogStore, Record};
use ffsck_io::overlay::{Overlay, CHUNK};
use ffsck_io::redo::{DeviceId, Recovery, RedoLog};
use ffsck_io::sim::{Fate, Power, SimDisk};
use ffsck_io::undo::{self, UndoLog};
use ffsck_io::{Device, MemDevice};
use proptest::prelude::*;

const SIZE: usize = 32 * 1024;

fn id() -> DeviceId {
    DeviceId {
        size: SIZE as u64,
        tag: *b"0123456789abcdef",
    }
}

/// Stage `writes` in an overlay over `original` and return the records a commit would log.
fn records_for(original: &[u8], writes: &[(u64, Vec<u8>)]) -> (Vec<Record>, Vec<u8>) {
    let ov = Overlay::new(std::sync::Arc::new(MemDevice::new(original.to_vec())));
    for (off, data) in writes {
        ov.write_at(data, *off).unwrap();
    }
    let mut repaired = vec![0u8; SIZE];
    ov.read_at(&mut repaired, 0).unwrap();
    let recs = ov
        .extents()
        .unwrap()
        .into_iter()
        .map(|e| Record {
            offset: e.offset,
            data: e.data,
        })
        .collect();
    (recs, repaired)
}

/// One repair run under `power`; returns whether it finished.
fn run(dev: &SimDisk, log: &SimDisk, undo_store: &SimDisk, records: &[Record]) -> bool {
    let go = || -> ffsck_io::Result<()> {
        let (mut redo, rec) = RedoLog::open(log, dev, id())?;
        assert_eq!(rec, Recovery::Clean { generation: 0 });
        let mut undo = UndoLog::create(undo_store, id())?;
        redo.commit_and_apply(dev, records, &mut |r| undo.save_before(dev, r))
    };
    go().is_ok()
}

fn fate_from(seed: u64) -> impl FnMut(usize, usize) -> Fate {
    let mut s = seed | 1;
    move |_, len| {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        match s % 3 {
            0 => Fate::Lost,
            1 => Fate::Kept,
            // A write tears between sectors: each 512-byte sector lands whole (the
            // assumption jbd2 and e2fsprogs make too, and the redo log's old-contents
            // checksums are per sector).
            _ => Fate::Torn(512 * ((s >> 8) as usize % len.div_ceil(512).max(1))),
        }
    }
}

fn check_crash_at(original: &[u8], writes: &[(u64, Vec<u8>)], budget: i64, seed: u64) -> bool {
    let (records, repaired) = records_for(original, writes);
    let power = Power::new(budget);
    let dev = SimDisk::new(original.to_vec(), power.clone());
    let log = SimDisk::new(Vec::new(), power.clone());
    let undo_store = SimDisk::new(Vec::new(), power.clone());
    let finished = run(&dev, &log, &undo_store, &records);

    // The crash: every unsynced write may or may not have reached its disk.
    let mut fate = fate_from(seed);
    let dev_after = dev.after_crash(&mut fate);
    let log_after = log.after_crash(&mut fate);
    let undo_after = undo_store.after_crash(&mut fate);

    // Reboot and recover.
    let dev2 = SimDisk::new(dev_after, Power::new(-1));
    let log2 = SimDisk::new(log_after, Power::new(-1));
    let (_, recovery) = RedoLog::open(&log2, &dev2, id()).expect("recovery");
    let now = dev2.contents();
    assert!(
        now == original || now == repaired,
        "budget {budget}: mixed image after recovery ({recovery:?}, finished {finished})"
    );
    if finished {
        assert!(now == repaired, "a finished repair must survive the crash");
    }

    // The undo file puts the original back whenever the device changed.
    let undo2 = SimDisk::new(undo_after, Power::new(-1));
    match undo::restore(&&undo2, &dev2, id()) {
        Ok(_) => assert!(
            dev2.contents() == original,
            "budget {budget}: undo incomplete ({recovery:?})"
        ),
        Err(e) => assert!(now == original, "budget {budget}: no usable undo file: {e}"),
    }
    finished
}

fn sample_writes() -> Vec<(u64, Vec<u8>)> {
    vec![
        (1024, vec![0xAB; 1024]),
        (5000, vec![0x11; 3000]),
        (SIZE as u64 - 10, vec![0x22; 10]),
        (1500, vec![0x33; 8]),
    ]
}

#[test]
fn every_crash_point_leaves_original_or_repaired() {
    let original: Vec<u8> = (0..SIZE).map(|i| (i * 7 % 251) as u8).collect();
    let writes = sample_writes();
    let mut budget = 0;
    // Count up until a run finishes with power to spare; every earlier budget is a crash.
    loop {
        for seed in 1..8 {
            check_crash_at(&original, &writes, budget, seed);
        }
        if check_crash_at(&original, &writes, budget, 99) {
            break;
        }
        budget += 1;
        assert!(budget < 1000, "the repair never finished");
    }
    assert!(budget >= 5, "too few crash points exercised: {budget}");
}

#[test]
fn torn_header_of_a_later_generation_keeps_the_earlier_state() {
    let original = vec![0u8; SIZE];
    let dev = MemDevice::new(original.clone());
    let mut log = ffsck_io::logfile::MemLog::default();
    {
        let (mut redo, _) = RedoLog::open(&mut log, &dev, id()).unwrap();
        let r = [Record {
            offset: 0,
            data: vec![1; CHUNK as usize],
        }];
        redo.commit_and_apply(&dev, &r, &mut |_| Ok(())).unwrap();
        assert_eq!(redo.generation(), 2);
    }
    // Tearing the newest header (generation 2, "applied", slot 0) falls back to generation 1
    // ("committed"), which is replayed: same bytes, same result. Tearing the older slot changes
    // nothing.
    for (slot, replayed) in [(0u64, true), (4096, false)] {
        let mut torn = log.clone();
        torn.write_at(&[0xFF; 16], slot + 16).unwrap();
        let (_, rec) = RedoLog::open(torn, &dev, id()).unwrap();
        assert_eq!(
            matches!(rec, Recovery::Replayed { .. }),
            replayed,
            "slot {slot}: {rec:?}"
        );
        assert!(dev.snapshot()[..CHUNK as usize].iter().all(|&b| b == 1));
    }
    // A log for another device is refused.
    let other = DeviceId {
        tag: [9; 16],
        ..id()
    };
    assert!(RedoLog::open(log, &dev, other).is_err());
}

/// A committed generation whose device is no longer in either state it knows is refused, and
/// nothing is written; a generation partly applied (some targets new, the rest old) is
/// finished.
#[test]
fn a_log_is_replayed_only_onto_the_state_it_was_made_from() {
    let original: Vec<u8> = (0..SIZE).map(|i| (i % 17) as u8).collect();
    let (records, repaired) = records_for(&original, &sample_writes());
    // A log committed but not applied: the device refuses writes after the log's.
    let committed = {
        let dev = SimDisk::new(original.clone(), Power::new(-1));
        let mut log = ffsck_io::logfile::MemLog::default();
        let (mut redo, _) = RedoLog::open(&mut log, &dev, id()).unwrap();
        let ro = ReadOnly(&dev);
        assert!(redo
            .commit_and_apply(&ro, &records, &mut |_| Ok(()))
            .is_err());
        log
    };
    // The same state: replayed.
    let dev = MemDevice::new(original.clone());
    let (_, rec) = RedoLog::open(committed.clone(), &dev, id()).unwrap();
    assert!(matches!(rec, Recovery::Replayed { .. }));
    assert_eq!(dev.snapshot(), repaired);
    // Half applied: the first record landed, the others not.
    let mut half = original.clone();
    let r0 = &records[0];
    half[r0.offset as usize..r0.offset as usize + r0.data.len()].copy_from_slice(&r0.data);
    let dev = MemDevice::new(half);
    RedoLog::open(committed.clone(), &dev, id()).unwrap();
    assert_eq!(dev.snapshot(), repaired);
    // Another state of the device (one byte a record overwrites differs): refused.
    let mut other = original.clone();
    other[r0.offset as usize] ^= 0xFF;
    let dev = MemDevice::new(other.clone());
    let err = RedoLog::open(committed.clone(), &dev, id()).err().unwrap();
    assert!(
        err.to_string().contains(ffsck_io::redo::OTHER_STATE),
        "{err}"
    );
    assert_eq!(dev.snapshot(), other, "nothing may be written");
    // Another file system (another UUID): refused, whatever the log's state.
    let foreign = DeviceId {
        tag: [7; 16],
        ..id()
    };
    let dev = MemDevice::new(original.clone());
    let err = RedoLog::open(committed, &dev, foreign).err().unwrap();
    assert!(
        err.to_string().contains(ffsck_io::redo::OTHER_DEVICE),
        "{err}"
    );
    assert_eq!(dev.snapshot(), original);
    // Even a log that never got past its first header names its device.
    let mut fresh = ffsck_io::logfile::MemLog::default();
    let _ = RedoLog::open(&mut fresh, &dev, id()).unwrap();
    assert!(RedoLog::open(fresh, &dev, foreign).is_err());
}

/// A device whose writes fail (reads go through).
struct ReadOnly<'a>(&'a SimDisk);

impl Device for ReadOnly<'_> {
    fn size(&self) -> u64 {
        self.0.size()
    }
    fn read_at(&self, buf: &mut [u8], offset: u64) -> ffsck_io::Result<()> {
        self.0.read_at(buf, offset)
    }
    fn write_at(&self, _: &[u8], _: u64) -> ffsck_io::Result<()> {
        Err(ffsck_io::IoError::ReadOnly)
    }
    fn flush(&self) -> ffsck_io::Result<()> {
        Ok(())
    }
    fn bytes_read(&self) -> u64 {
        0
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]
    #[test]
    fn random_repairs_random_crashes(
        writes in prop::collection::vec((0u64..SIZE as u64 - 64, prop::collection::vec(any::<u8>(), 1..64)), 1..6),
        budget in 0i64..40,
        seed in any::<u64>(),
    ) {
        let original: Vec<u8> = (0..SIZE).map(|i| (i % 13) as u8).collect();
        check_crash_at(&original, &writes, budget, seed);
    }
}
