//! The journal commit of a repair generation (`journal_commit`), read back by every recoverer:
//! ffsck's own replay (`recovery::plan`), `e2fsck -E journal_only`, and (as root) the kernel's
//! mount. Images are made at run time with mke2fs and damaged with debugfs; the repair is the
//! engine's own (`repair::repair`).
//!
//! * every journal format (no features, 32/64-bit tags, csum v2, csum v3, the old
//!   `COMPAT_CHECKSUM`, 1 KiB and 4 KiB blocks, an escaped block) is written so each
//!   recoverer replays it to the repaired image;
//! * crash points: the power is cut after every write and flush of the commit of a real
//!   repair generation on the simulated disk (`sim`), each unsynced write lost, kept or torn
//!   at a sector boundary, and the crashed image recovered by ffsck, by e2fsck (every cut) and
//!   by the kernel (a sample of cuts, as root): each must give exactly the original or exactly
//!   the repaired image;
//! * a read-only check told the file system is mounted (`CheckOptions::mounted`) leaves a
//!   journal that needs recovery alone and says so; a repair still recovers it.
//!
//! "Exactly" compares every byte outside the journal (whose log keeps the stale transaction
//! and whose superblock's sequence moves on) and, for ffsck's replay, the primary superblock
//! too. e2fsck stamps the superblock's write time and written-kbytes, and its check time when
//! it runs a journal anyway and checks (masked); the kernel's mount rewrites its mount fields,
//! so for it the primary superblock is left out and `e2fsck -fn` must pass on a repaired
//! result (the rest of the image, all file data and metadata, is still compared byte for
//! byte).

mod common;

use ffsck_check::journal::commit::{self as journal_commit, Transaction};
use ffsck_check::journal::recovery;
use ffsck_check::Collect;
use ffsck_check::{CheckOptions, Policy};
use ffsck_format::journal::{feature, JournalSuperblock, JBD2_MAGIC_NUMBER};
use ffsck_io::logfile::Record;
use ffsck_io::overlay::Overlay;
use ffsck_io::sim::{Fate, Power, SimDisk};
use ffsck_io::{Device, MemDevice};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;
use zerocopy::IntoBytes;

const TIME: (u64, u32) = (1_700_000_000, 5);

fn tool(name: &str) -> Option<PathBuf> {
    ["/usr/sbin", "/sbin", "/usr/bin", "/bin"]
        .iter()
        .map(|d| Path::new(d).join(name))
        .find(|p| p.is_file())
}

fn have_tools() -> bool {
    let ok = ["mke2fs", "debugfs", "e2fsck"]
        .iter()
        .all(|t| tool(t).is_some());
    if !ok {
        common::skip("SKIPPED: needs mke2fs, debugfs and e2fsck");
    }
    ok
}

fn is_root() -> bool {
    Command::new("id")
        .arg("-u")
        .output()
        .is_ok_and(|o| String::from_utf8_lossy(&o.stdout).trim() == "0")
}

fn sh(script: &str, args: &[&str]) {
    let st = Command::new("bash")
        .arg("-c")
        .arg(script)
        .arg("sh")
        .args(args)
        .status()
        .expect("bash");
    assert!(st.success(), "script failed: {script}");
}

/// A small file system with files, damaged in ways the kernel still mounts (link counts).
/// `journal` are debugfs commands run first (e.g. `jo -c` / `jc` for csum v3).
fn image(dir: &Path, name: &str, mkfs: &str, journal: &str) -> PathBuf {
    let img = dir.join(format!("{name}.img"));
    let script = r#"
set -e
img=$1; mkfs=$2; jcmds=$3; src=$(dirname $img)/src-$(basename $img)
mkdir -p $src/d/e
for i in $(seq 1 24); do head -c $((i*700)) /dev/zero | tr '\0' "$(printf '\\%o' $((65+i)))" > $src/f$i; done
echo hello > $src/d/e/h
mke2fs -q -F -t ext4 $mkfs -d $src $img 16M
if [ -n "$jcmds" ]; then printf "$jcmds" | debugfs -w -f - $img >/dev/null 2>&1; fi
debugfs -w -R "sif /f3 links_count 7" $img >/dev/null 2>&1
debugfs -w -R "sif /f9 links_count 4" $img >/dev/null 2>&1
debugfs -w -R "sif /d/e/h links_count 3" $img >/dev/null 2>&1
"#;
    sh(script, &[img.to_str().unwrap(), mkfs, journal]);
    img
}

/// Set journal feature bits in the (empty) journal's superblock of `img`.
fn set_journal_features(img: &[u8], compat: u32, incompat: u32, clear: u32) -> Vec<u8> {
    let mut v = img.to_vec();
    let dev: Arc<dyn Device> = Arc::new(MemDevice::new(v.clone()));
    let off = jsb_offset(dev);
    let mut sb = JournalSuperblock::parse(&v[off as usize..]).unwrap();
    sb.s_feature_compat.set(compat);
    let inc = (sb.s_feature_incompat.get() & !clear) | incompat;
    sb.s_feature_incompat.set(inc);
    if sb.has_csum_v2or3() {
        sb.s_checksum_type = ffsck_format::journal::CRC32C_CHKSUM;
    }
    sb.update_checksum();
    v[off as usize..off as usize + 1024].copy_from_slice(sb.as_bytes());
    v
}

/// Byte ranges of the internal journal (superblock and log), per block.
fn journal_blocks(img: &[u8]) -> Vec<(u64, u64)> {
    let dev: Arc<dyn Device> = Arc::new(MemDevice::new(img.to_vec()));
    let mut f = ffsck_check::Findings::default();
    let p0 = ffsck_check::pass0::run(dev, Default::default(), Policy::No, &mut f).unwrap();
    let j = p0.journal.journal.as_ref().unwrap();
    let bs = u64::from(p0.fs.geo.block_size);
    (0..j.total_len)
        .filter_map(|l| j.runs.lookup(l))
        .map(|p| (p * bs, bs))
        .collect()
}

fn jsb_offset(dev: Arc<dyn Device>) -> u64 {
    let mut f = ffsck_check::Findings::default();
    let p0 = ffsck_check::pass0::run(dev, Default::default(), Policy::No, &mut f).unwrap();
    let j = p0.journal.journal.as_ref().unwrap();
    j.sb_offset(&p0.fs).unwrap()
}

/// The image with the journal and the given superblock bytes zeroed.
fn masked(img: &[u8], journal: &[(u64, u64)], sb_fields: &[(usize, usize)]) -> Vec<u8> {
    let mut v = img.to_vec();
    for &(o, l) in journal {
        v[o as usize..(o + l) as usize].fill(0);
    }
    for &(o, l) in sb_fields {
        v[1024 + o..1024 + o + l].fill(0);
    }
    v
}

/// The engine's repair of `original`: its changes and the repaired image.
fn repair(original: &[u8]) -> (Vec<Record>, Vec<u8>) {
    let dev: Arc<dyn Device> = Arc::new(MemDevice::new(original.to_vec()));
    let opts = CheckOptions {
        policy: Policy::Yes,
        threads: 2,
        ..Default::default()
    };
    let out = ffsck_check::repair(dev.clone(), &opts, &mut Collect::default());
    assert!(out.new_problems.is_empty());
    let changes: Vec<Record> = out
        .changes
        .into_iter()
        .map(|e| Record {
            offset: e.offset,
            data: e.data,
        })
        .collect();
    assert!(!changes.is_empty(), "the damage must need a repair");
    (changes.clone(), apply(original, &changes))
}

fn apply(img: &[u8], records: &[Record]) -> Vec<u8> {
    let ov = Overlay::new(Arc::new(MemDevice::new(img.to_vec())));
    for r in records {
        ov.write_at(&r.data, r.offset).unwrap();
    }
    let mut v = vec![0u8; img.len()];
    ov.read_at(&mut v, 0).unwrap();
    v
}

/// ffsck's own recovery of a crashed image (as the next `ffsck -fy` replays it first).
fn ffsck_recover(img: &[u8]) -> Vec<u8> {
    let dev: Arc<dyn Device> = Arc::new(MemDevice::new(img.to_vec()));
    match recovery::replay(dev).expect("replay plan") {
        Some(r) => {
            assert!(r.issues.is_empty(), "replay issues: {:?}", r.issues);
            apply(img, &r.records)
        }
        None => img.to_vec(),
    }
}

fn e2fsck_recover(dir: &Path, img: &[u8]) -> Vec<u8> {
    let p = dir.join("e2.img");
    std::fs::write(&p, img).unwrap();
    let out = Command::new(tool("e2fsck").unwrap())
        .args(["-y", "-E", "journal_only"])
        .arg(&p)
        .output()
        .unwrap();
    assert!(
        out.status.code().is_some_and(|c| c <= 1),
        "e2fsck -E journal_only: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    std::fs::read(&p).unwrap()
}

fn e2fsck_clean(path: &Path) -> bool {
    Command::new(tool("e2fsck").unwrap())
        .arg("-fn")
        .arg(path)
        .output()
        .unwrap()
        .status
        .success()
}

/// Mount and unmount `img` through a loop device in a private mount namespace.
fn kernel_recover(dir: &Path, img: &[u8]) -> (Vec<u8>, bool) {
    let p = dir.join("k.img");
    std::fs::write(&p, img).unwrap();
    let mnt = dir.join("mnt");
    std::fs::create_dir_all(&mnt).unwrap();
    let st = Command::new("unshare")
        .args([
            "-m",
            "sh",
            "-c",
            // noinit_itable: mke2fs leaves the inode tables to the kernel's lazy zeroing
            // thread, which would write them whenever it wins the race with the umount.
            "mount -o loop,noinit_itable \"$1\" \"$2\" && umount \"$2\"",
        ])
        .arg("sh")
        .arg(&p)
        .arg(&mnt)
        .status()
        .unwrap();
    assert!(st.success(), "kernel mount failed");
    let clean = e2fsck_clean(&p);
    (std::fs::read(&p).unwrap(), clean)
}

/// Superblock fields e2fsck stamps when it writes the superblock after a replay: write time,
/// kbytes written, checksum, and, when it ran the journal anyway and then checked the file
/// system (a cut between the journal superblock and the flag), mount count and last check.
const E2FSCK_SB: &[(usize, usize)] = &[(0x30, 4), (0x34, 2), (0x40, 4), (0x178, 8), (0x3FC, 4)];
/// The whole superblock (the kernel's mount rewrites its mount fields).
const WHOLE_SB: &[(usize, usize)] = &[(0, 1024)];

#[derive(Debug, PartialEq, Clone, Copy)]
enum Is {
    Original,
    Repaired,
}

fn classify(
    got: &[u8],
    original: &[u8],
    repaired: &[u8],
    journal: &[(u64, u64)],
    sb: &[(usize, usize)],
) -> Option<Is> {
    let g = masked(got, journal, sb);
    if g == masked(repaired, journal, sb) {
        Some(Is::Repaired)
    } else if g == masked(original, journal, sb) {
        Some(Is::Original)
    } else {
        None
    }
}

fn prepare(img: &[u8], changes: &[Record]) -> Transaction {
    let dev: Arc<dyn Device> = Arc::new(MemDevice::new(img.to_vec()));
    journal_commit::prepare(dev, changes, TIME).expect("the journal should carry the repair")
}

/// Commit on a simulated disk that loses power after `budget` writes and flushes.
fn commit_with_budget(img: &[u8], tx: &Transaction, budget: i64) -> (SimDisk, bool) {
    let sim = SimDisk::new(img.to_vec(), Power::new(budget));
    let done = tx.commit(&sim).is_ok();
    (sim, done)
}

/// Write steps 1-2 (log, commit, journal superblock, flag) and nothing in place: the state a
/// crash right after the flag leaves.
fn committed_not_applied(img: &[u8], tx: &Transaction) -> Vec<u8> {
    // Log blocks, flush, commit, flush, journal superblock, flush, superblock, flush: the
    // next write (the first in place) fails.
    let budget = (tx.log_blocks() - 1) as i64 + 7;
    let (sim, done) = commit_with_budget(img, tx, budget);
    assert!(!done);
    assert_eq!(sim.pending(), 0);
    sim.contents()
}

#[test]
fn every_journal_format_is_replayed_by_ffsck_and_e2fsck() {
    if !have_tools() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let base4k = std::fs::read(image(dir.path(), "b4", "-b 4096", "")).unwrap();
    let base1k = std::fs::read(image(dir.path(), "b1", "-b 1024", "")).unwrap();
    let v3 = std::fs::read(image(dir.path(), "v3", "-b 4096", "jo -c\\njc\\n")).unwrap();
    let variants: Vec<(&str, Vec<u8>)> = vec![
        ("4k plain", base4k.clone()),
        ("1k plain", base1k.clone()),
        ("4k csum v3 (debugfs)", v3),
        (
            "4k csum v2 64bit",
            set_journal_features(
                &base4k,
                0,
                feature::INCOMPAT_CSUM_V2 | feature::INCOMPAT_64BIT,
                0,
            ),
        ),
        (
            "1k csum v2",
            set_journal_features(&base1k, 0, feature::INCOMPAT_CSUM_V2, 0),
        ),
        (
            "1k csum v3 32bit",
            set_journal_features(&base1k, 0, feature::INCOMPAT_CSUM_V3, 0),
        ),
        (
            "4k compat checksum",
            set_journal_features(&base4k, feature::COMPAT_CHECKSUM, 0, 0),
        ),
        (
            "4k 64bit",
            set_journal_features(&base4k, 0, feature::INCOMPAT_64BIT, 0),
        ),
    ];
    for (name, original) in variants {
        let (mut changes, _) = repair(&original);
        // A block starting with jbd2's magic (escaped in the log): a free block near the end.
        let bs = if name.starts_with("1k") { 1024 } else { 4096 };
        let mut magic = vec![0x5Au8; bs];
        magic[..4].copy_from_slice(&JBD2_MAGIC_NUMBER.to_be_bytes());
        changes.push(Record {
            offset: original.len() as u64 - 3 * bs as u64,
            data: magic,
        });
        let repaired = apply(&original, &changes);
        let journal = journal_blocks(&original);
        let tx = prepare(&original, &changes);
        let crashed = committed_not_applied(&original, &tx);
        assert_ne!(crashed, original);

        let by_ffsck = ffsck_recover(&crashed);
        assert_eq!(
            classify(&by_ffsck, &original, &repaired, &journal, &[]),
            Some(Is::Repaired),
            "{name}: ffsck's replay"
        );
        let by_e2fsck = e2fsck_recover(dir.path(), &crashed);
        assert_eq!(
            classify(&by_e2fsck, &original, &repaired, &journal, E2FSCK_SB),
            Some(Is::Repaired),
            "{name}: e2fsck -E journal_only"
        );
        assert!(
            e2fsck_clean(&dir.path().join("e2.img")),
            "{name}: e2fsck -fn"
        );

        // The full commit gives the repaired image, the journal empty again.
        let (sim, done) = commit_with_budget(&original, &tx, -1);
        assert!(done);
        let full = sim.contents();
        assert_eq!(
            classify(&full, &original, &repaired, &journal, &[]),
            Some(Is::Repaired),
            "{name}: full commit"
        );
        assert!(recovery::replay(Arc::new(MemDevice::new(full)))
            .unwrap()
            .is_none());
    }
}

fn fate(seed: u64) -> impl FnMut(usize, usize) -> Fate {
    let mut s = seed | 1;
    move |_, len| {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        match s % 3 {
            0 => Fate::Lost,
            1 => Fate::Kept,
            // Torn at a sector boundary (a 1 KiB superblock write lands whole).
            _ if len > 1024 => Fate::Torn(512 * ((s >> 8) as usize % (len / 512))),
            _ => Fate::Kept,
        }
    }
}

#[test]
fn every_crash_point_of_a_journal_commit_recovers_to_original_or_repaired() {
    if !have_tools() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let root = is_root();
    if !root {
        common::skip("SKIPPED (kernel part only): needs root for loop mounts");
    }
    let mut counts = std::collections::BTreeMap::new();
    for (name, mkfs, j) in [("4k", "-b 4096", ""), ("1k-v3", "-b 1024", "jo -c\\njc\\n")] {
        let original = std::fs::read(image(dir.path(), name, mkfs, j)).unwrap();
        let (changes, repaired) = repair(&original);
        let journal = journal_blocks(&original);
        let tx = prepare(&original, &changes);
        let mut budget = 0i64;
        loop {
            let (sim, done) = commit_with_budget(&original, &tx, budget);
            for seed in [0u64, 1, 2, 3, 99] {
                let crashed = match seed {
                    0 => sim.after_crash(&mut |_, _| Fate::Lost),
                    99 => sim.after_crash(&mut |_, _| Fate::Kept),
                    s => sim.after_crash(&mut fate(s)),
                };
                let ff = classify(
                    &ffsck_recover(&crashed),
                    &original,
                    &repaired,
                    &journal,
                    &[],
                );
                assert!(ff.is_some(), "{name} cut {budget} seed {seed}: ffsck mixed");
                if done {
                    assert_eq!(ff, Some(Is::Repaired), "{name}: a finished commit");
                }
                *counts
                    .entry(("ffsck", format!("{:?}", ff.unwrap())))
                    .or_insert(0) += 1;
                if seed == 0 || seed == 2 {
                    let e2 = classify(
                        &e2fsck_recover(dir.path(), &crashed),
                        &original,
                        &repaired,
                        &journal,
                        E2FSCK_SB,
                    );
                    assert!(
                        e2.is_some(),
                        "{name} cut {budget} seed {seed}: e2fsck mixed"
                    );
                    *counts
                        .entry(("e2fsck", format!("{:?}", e2.unwrap())))
                        .or_insert(0) += 1;
                }
                if root && seed == 2 && budget % 3 == 0 {
                    let (k, clean) = kernel_recover(dir.path(), &crashed);
                    let kr = classify(&k, &original, &repaired, &journal, WHOLE_SB);
                    assert!(kr.is_some(), "{name} cut {budget}: kernel mixed");
                    if kr == Some(Is::Repaired) {
                        assert!(clean, "{name} cut {budget}: e2fsck -fn after the kernel");
                    }
                    *counts
                        .entry(("kernel", format!("{:?}", kr.unwrap())))
                        .or_insert(0) += 1;
                }
            }
            if done {
                break;
            }
            budget += 1;
            assert!(budget < 10_000, "the commit never finished");
        }
        eprintln!("{name}: {budget} cut points before the commit completed");
        assert!(budget >= 10, "{name}: too few cut points: {budget}");
    }
    eprintln!("outcomes: {counts:?}");
    for who in ["ffsck", "e2fsck"] {
        for is in ["Original", "Repaired"] {
            assert!(
                counts.contains_key(&(who, is.to_string())),
                "{who} never gave {is}: {counts:?}"
            );
        }
    }
}

#[test]
fn the_journal_is_not_used_when_it_cannot_carry_the_generation() {
    if !have_tools() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let original = std::fs::read(image(dir.path(), "n", "-b 4096", "")).unwrap();
    let (changes, _) = repair(&original);
    let dev = || -> Arc<dyn Device> { Arc::new(MemDevice::new(original.clone())) };
    // A change inside the journal's blocks.
    let journal = journal_blocks(&original);
    let mut bad = changes.clone();
    bad.push(Record {
        offset: journal[5].0,
        data: vec![1; 4096],
    });
    let why = journal_commit::prepare(dev(), &bad, TIME).err().unwrap();
    assert!(why.contains("journal"), "{why}");
    // A generation larger than the log.
    let huge: Vec<Record> = (0..3000u64)
        .map(|b| Record {
            offset: original.len() as u64 - (b + 1) * 4096,
            data: vec![(b % 200) as u8 + 1; 4096],
        })
        .filter(|r| !journal.iter().any(|j| j.0 == r.offset))
        .collect();
    let why = journal_commit::prepare(dev(), &huge, TIME).err().unwrap();
    assert!(
        why.contains("does not fit") || why.contains("journal"),
        "{why}"
    );
    // An unknown incompatible journal feature.
    let odd = set_journal_features(&original, 0, 0x8000, 0);
    let why = journal_commit::prepare(Arc::new(MemDevice::new(odd)), &changes, TIME)
        .err()
        .unwrap();
    assert!(why.contains("journal"), "{why}");
    // ext2: no journal at all.
    let img = dir.path().join("e2.img");
    sh("mke2fs -q -F -t ext2 \"$1\" 8M", &[img.to_str().unwrap()]);
    let e2 = std::fs::read(&img).unwrap();
    let why = journal_commit::prepare(Arc::new(MemDevice::new(e2)), &changes[..1], TIME)
        .err()
        .unwrap();
    assert!(why.contains("no journal"), "{why}");
}

#[test]
fn a_journal_needing_recovery_is_replayed_on_the_device_first() {
    if !have_tools() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let original = std::fs::read(image(dir.path(), "r", "-b 4096", "")).unwrap();
    let (changes, repaired) = repair(&original);
    let tx = prepare(&original, &changes);
    // An interrupted journal commit: the next repair replays it in its overlay, finds
    // nothing more to fix, and its generation is the replay itself.
    let crashed = committed_not_applied(&original, &tx);
    let (changes2, _) = {
        let dev: Arc<dyn Device> = Arc::new(MemDevice::new(crashed.clone()));
        let opts = CheckOptions {
            policy: Policy::Yes,
            threads: 2,
            ..Default::default()
        };
        let out = ffsck_check::repair(dev, &opts, &mut Collect::default());
        let ch: Vec<Record> = out
            .changes
            .into_iter()
            .map(|e| Record {
                offset: e.offset,
                data: e.data,
            })
            .collect();
        (ch, ())
    };
    let dev = Arc::new(MemDevice::new(crashed.clone()));
    let replay = journal_commit::plan_replay(dev.clone(), &changes2)
        .unwrap()
        .expect("a replay is due");
    assert_eq!(replay.replay.transactions, 1);
    replay.apply(&*dev).unwrap();
    // What is left of the generation goes through the (now empty) journal again.
    let after_replay = dev.snapshot();
    assert!(
        recovery::replay(Arc::new(MemDevice::new(after_replay.clone())))
            .unwrap()
            .is_none()
    );
    let rest: Vec<Record> = changes2
        .iter()
        .filter(|r| after_replay[r.offset as usize..r.offset as usize + r.data.len()] != r.data[..])
        .cloned()
        .collect();
    if !rest.is_empty() {
        let tx2 = journal_commit::prepare(dev.clone(), &changes2, TIME).unwrap();
        tx2.commit(&*dev).unwrap();
    }
    let journal = journal_blocks(&original);
    assert_eq!(
        classify(&dev.snapshot(), &original, &repaired, &journal, &[]),
        Some(Is::Repaired)
    );
}

#[test]
fn a_read_only_check_of_a_mounted_file_system_leaves_its_journal_alone() {
    if !have_tools() {
        return;
    }
    use ffsck_check::problem::Problem;
    let dir = tempfile::tempdir().unwrap();
    let original = std::fs::read(image(dir.path(), "m", "-b 4096", "")).unwrap();
    let (changes, _) = repair(&original);
    // A journal that needs recovery, holding the repair of the link counts.
    let crashed = committed_not_applied(&original, &prepare(&original, &changes));
    let check = |repair: bool, mounted: bool| -> Vec<Problem> {
        let dev: Arc<dyn Device> = Arc::new(MemDevice::new(crashed.clone()));
        let opts = CheckOptions {
            policy: if repair { Policy::Yes } else { Policy::No },
            threads: 2,
            mounted,
            ..Default::default()
        };
        let out = if repair {
            ffsck_check::repair(dev, &opts, &mut Collect::default()).findings
        } else {
            ffsck_check::check(dev, &opts, &mut Collect::default()).findings
        };
        out.iter().map(|f| f.problem).collect()
    };
    // Not mounted: replayed in memory, and the replay repaired the link counts.
    let unmounted = check(false, false);
    assert!(
        unmounted.contains(&Problem::P0_JOURNAL_RECOVERING),
        "{unmounted:?}"
    );
    assert!(!unmounted.contains(&Problem::P0_JOURNAL_RECOVERY_SKIPPED));
    assert!(
        !unmounted.contains(&Problem::P4_BAD_REF_COUNT),
        "{unmounted:?}"
    );
    // Mounted: the journal is the kernel's; e2fsck's warning, and the file system as the
    // device shows it (the link counts still wrong).
    let mounted = check(false, true);
    assert!(
        mounted.contains(&Problem::P0_JOURNAL_RECOVERY_SKIPPED),
        "{mounted:?}"
    );
    assert!(
        !mounted.contains(&Problem::P0_JOURNAL_RECOVERING),
        "{mounted:?}"
    );
    assert!(mounted.contains(&Problem::P4_BAD_REF_COUNT), "{mounted:?}");
    // A repair (allowed on a read-only mount) still recovers the journal first.
    let repaired = check(true, true);
    assert!(
        repaired.contains(&Problem::P0_JOURNAL_RECOVERING),
        "{repaired:?}"
    );
    assert!(!repaired.contains(&Problem::P0_JOURNAL_RECOVERY_SKIPPED));
}
