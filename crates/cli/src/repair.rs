//! The crash-safe repair path of the command line: finish an interrupted repair left in an
//! explicit `--repair-log`, run the engine's repair against an overlay, then commit the staged
//! generation. The commit goes through the file system's own jbd2 journal when it can carry
//! it (`ffsck_check::journal::commit`), so the repair state lives on the device; otherwise
//! (no journal, the repair changes it, too large) a one-line note says why, and the generation
//! goes through `--repair-log PATH` if given, or is written in place as e2fsck does. The undo
//! file, when asked for, saves the old contents of every byte any of these paths writes.

use anyhow::{anyhow, Context, Result};
use ffsck_check::journal::commit as journal_commit;
use ffsck_check::RepairOutcome;
use ffsck_check::{exit, CheckOptions, Outcome, Reporter};
use ffsck_format::{EXT2_MAGIC, SUPERBLOCK_OFFSET, SUPERBLOCK_SIZE};
use ffsck_io::e2undo::{self, E2Undo};
use ffsck_io::logfile::Record;
use ffsck_io::overlay::Overlay;
use ffsck_io::redo::{self, DeviceId, Recovery, RedoLog};
use ffsck_io::undo;
use ffsck_io::{Device, FileDevice, IoError};
use std::fs::{File, OpenOptions};
use std::path::Path;
use std::sync::Arc;

/// A log or undo file is tied to the device by its size and the file system's UUID (zero
/// when the device holds no ext2/3/4 superblock).
fn device_id(dev: &dyn Device) -> DeviceId {
    let mut tag = [0u8; 16];
    let mut sb = [0u8; 0x78];
    if dev.read_at(&mut sb, SUPERBLOCK_OFFSET).is_ok()
        && u16::from_le_bytes([sb[0x38], sb[0x39]]) == EXT2_MAGIC
    {
        tag.copy_from_slice(&sb[0x68..0x78]);
    }
    DeviceId {
        size: dev.size(),
        tag,
    }
}

/// Where a repair's generation goes.
pub struct Commit<'a> {
    /// Printed name of the device.
    pub device: &'a str,
    /// `--repair-log`: the log for a generation the journal cannot carry.
    pub log: Option<&'a Path>,
    /// `--undo-file`.
    pub undo: Option<&'a Path>,
}

/// The message for a log that does not belong to this device and state.
fn refused(e: IoError, log: &Path, device: &str) -> anyhow::Error {
    match &e {
        IoError::Refused(why) if why == redo::OTHER_DEVICE => anyhow!(
            "the repair log {} was made for another file system; nothing was written; \
             move it away to proceed",
            log.display()
        ),
        IoError::Refused(why) if why == redo::OTHER_STATE => anyhow!(
            "the repair log {} was made for another state of {device}; nothing was written; \
             move it away to proceed",
            log.display()
        ),
        _ => anyhow::Error::new(e).context(format!("repair log {}", log.display())),
    }
}

/// Finish the generation an interrupted run left in `log` (if it holds one), then retire it.
fn finish_log(dev: &dyn Device, log: &Path, device: &str) -> Result<()> {
    let nonempty = std::fs::metadata(log).is_ok_and(|m| m.len() > 0);
    if !nonempty {
        return Ok(());
    }
    let file = OpenOptions::new()
        .read(true)
        .write(true)
        .open(log)
        .with_context(|| format!("cannot open the repair log {}", log.display()))?;
    // Finishing an interrupted repair writes the device: a signal waits for it.
    crate::interrupt::begin_commit();
    let opened = RedoLog::open(file, dev, device_id(dev));
    let cancelled = crate::interrupt::end_commit(false);
    let (redo, recovery) = opened.map_err(|e| refused(e, log, device))?;
    drop(redo);
    std::fs::remove_file(log)
        .with_context(|| format!("cannot remove the retired log {}", log.display()))?;
    if cancelled {
        crate::screen::outln(format_args!(
            "ffsck: interrupted after finishing the last repair's log; nothing else was done."
        ));
        std::process::exit(exit::CANCELED);
    }
    if let Recovery::Replayed { records, bytes, .. } = recovery {
        crate::screen::outln(format_args!(
            "ffsck: finished an interrupted repair from {} ({records} records, {bytes} bytes).",
            log.display()
        ));
    } else {
        crate::screen::outln(format_args!(
            "ffsck: {}: the last repair had completed; nothing to replay.",
            log.display()
        ));
    }
    Ok(())
}

/// Before a repair decides anything: finish what an interrupted run left in `--repair-log`,
/// then recover a journal that needs it, on the device, as e2fsck does before it starts over
/// (its "DEV: recovering journal"; the replay alone does not count as a change for the exit
/// code). A journal this cannot recover by itself (external, corrupt, a file system with
/// problems to report first) is left to the check, which replays it with the repair.
/// Returns whether the journal was recovered.
pub fn prepare(dev: &Arc<dyn Device>, how: &Commit) -> Result<bool> {
    if let Some(log) = how.log {
        finish_log(&**dev, log, how.device)?;
    }
    // The undo file saves what the replay writes only when the replay is part of the commit.
    if how.undo.is_some() {
        return Ok(false);
    }
    // Its pass 0 judges the superblock's times against the clock, as the check does.
    let now = u64::try_from(crate::skip::clock()).unwrap_or(0);
    let Ok(Some(replay)) = journal_commit::recover_now(dev.clone(), now) else {
        return Ok(false);
    };
    crate::interrupt::begin_commit();
    let applied = replay.apply(&**dev);
    let cancelled = crate::interrupt::end_commit(false);
    applied.with_context(|| format!("recovering the journal of {}", how.device))?;
    let mut label = [0u8; 16];
    let _ = dev.read_at(&mut label, SUPERBLOCK_OFFSET + 0x78);
    let end = label.iter().position(|&b| b == 0).unwrap_or(label.len());
    let label = String::from_utf8_lossy(&label[..end]);
    let name = crate::skip::display_name(&label, how.device);
    crate::screen::outln(format_args!("{name}: recovering journal"));
    if cancelled {
        crate::screen::outln(format_args!(
            "ffsck: interrupted after recovering the journal; nothing else was done."
        ));
        std::process::exit(exit::CANCELED);
    }
    Ok(true)
}

/// Repair `dev`: check and fix through an overlay, commit.
pub fn run(
    dev: Arc<dyn Device>,
    opts: &CheckOptions,
    journal: Option<&Overlay>,
    rep: &mut dyn Reporter,
    how: &Commit,
) -> Result<Outcome> {
    // No log file exists before the commit (the journal needs none, and a `--repair-log` is
    // created inside the commit): a signal until then has nothing to remove.
    crate::interrupt::set_log(None);

    let RepairOutcome {
        mut last,
        findings,
        changes,
        mut exit_code,
        new_problems,
        ..
    } = ffsck_check::repair(dev.clone(), opts, rep);
    // Everything is reported: the text held by pass goes out before the commit says anything.
    crate::held::release();
    crate::interrupt::begin_commit();

    let interactive = rep.asks();
    if !new_problems.is_empty() {
        let names: Vec<&str> = new_problems.iter().map(|p| p.info().name).collect();
        crate::screen::outln(format_args!(
            "\nffsck: the repair would leave the file system neither clean nor better than \
             it was ({} left); nothing was written.",
            names.join(", ")
        ));
        if interactive {
            crate::screen::outln(format_args!(
                "ffsck: a fix answered no can leave others half made; run again and answer \
                 yes to more of them (or use -y)."
            ));
        }
        exit_code = (exit_code & !exit::NONDESTRUCT) | exit::UNCORRECTED | exit::ERROR;
    } else if !changes.is_empty() {
        let records: Vec<Record> = changes
            .into_iter()
            .map(|e| Record {
                offset: e.offset,
                data: e.data,
            })
            .collect();
        let bytes: usize = records.iter().map(|r| r.data.len()).sum();
        BYTES_WRITTEN.fetch_add(bytes as u64, std::sync::atomic::Ordering::Relaxed);
        commit(&dev, &records, how).context("committing the repair")?;
    }
    if new_problems.is_empty() {
        if let Some(j) = journal {
            // The external journal's reset (after replay), only once the file system holds
            // the replayed blocks: a crash before this point leaves the journal to replay again.
            commit_journal(j).context("resetting the external journal")?;
        }
    }
    let cancelled = crate::interrupt::end_commit(true);
    if cancelled {
        crate::screen::outln("\nffsck: interrupted; the repair was finished first, as the signal came during its commit.");
        exit_code |= exit::CANCELED;
    }
    last.findings = findings;
    last.exit_code = exit_code;
    Ok(last)
}

/// The bytes of file-system blocks the repair wrote (for `-t`).
static BYTES_WRITTEN: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

pub fn bytes_written() -> u64 {
    BYTES_WRITTEN.load(std::sync::atomic::Ordering::Relaxed)
}

/// Does the generation only rewrite the primary superblock (one 1024-byte write)?
fn superblock_only(records: &[Record]) -> bool {
    let end = SUPERBLOCK_OFFSET + SUPERBLOCK_SIZE as u64;
    records
        .iter()
        .all(|r| r.offset >= SUPERBLOCK_OFFSET && r.offset + r.data.len() as u64 <= end)
}

/// Commit one generation (final contents of byte ranges): a pending journal replay on the
/// device first, then the generation through the journal, the repair log, or in place.
fn commit(dev: &Arc<dyn Device>, records: &[Record], how: &Commit) -> Result<()> {
    let mut undo = match how.undo {
        Some(p) => {
            let f = File::create(p)
                .with_context(|| format!("cannot create the undo file {}", p.display()))?;
            Some(E2Undo::create(f, undo_block_size(&**dev), &**dev)?)
        }
        None => None,
    };
    commit_saving(dev, records, how, &mut undo)?;
    // Complete once every write is on the device: e2undo checks the superblock against it.
    if let Some(u) = undo {
        u.finish(&**dev).context("finishing the undo file")?;
    }
    Ok(())
}

/// The undo file's block size: the file system's block size (4096 without a superblock).
fn undo_block_size(dev: &dyn Device) -> u32 {
    let mut sb = [0u8; 0x3a];
    if dev.read_at(&mut sb, SUPERBLOCK_OFFSET).is_ok()
        && u16::from_le_bytes([sb[0x38], sb[0x39]]) == EXT2_MAGIC
    {
        let log = u32::from_le_bytes([sb[0x18], sb[0x19], sb[0x1a], sb[0x1b]]);
        if log <= 6 {
            return 1024 << log;
        }
    }
    4096
}

/// [`commit`]'s writes, each saved in `undo` first.
fn commit_saving(
    dev: &Arc<dyn Device>,
    records: &[Record],
    how: &Commit,
    undo: &mut Option<E2Undo<File>>,
) -> Result<()> {
    let id = device_id(&**dev);
    let mut save = |recs: &[Record]| -> ffsck_io::Result<()> {
        match undo.as_mut() {
            Some(u) => u.save_before(&**dev, recs),
            None => Ok(()),
        }
    };

    // A journal that needed recovery is replayed on the device first, as the kernel does.
    let mut why_not = None;
    match journal_commit::plan_replay(dev.clone(), records) {
        Ok(Some(replay)) => {
            save(&replay.touched())?;
            replay.apply(&**dev)?;
        }
        Ok(None) => {}
        Err(why) => why_not = Some(why),
    }
    if why_not.is_none() && superblock_only(records) {
        // The marks of a check (and any other change of the primary superblock alone) are
        // one 1024-byte write, which lands whole as the kernel and e2fsprogs assume: written
        // in place, as e2fsck writes it, without cycling the journal on every boot.
        save(records)?;
        for r in records {
            dev.write_at(&r.data, r.offset)?;
        }
        dev.flush()?;
        return Ok(());
    }
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    let prepared = match why_not {
        Some(why) => Err(why),
        None => journal_commit::prepare(dev.clone(), records, (now.as_secs(), now.subsec_nanos())),
    };
    let why = match prepared {
        Ok(tx) => {
            save(&tx.touched())?;
            tx.commit(&**dev)?;
            return Ok(());
        }
        Err(why) => why,
    };
    let quiet = superblock_only(records);
    match how.log {
        Some(log) => {
            if !quiet {
                crate::screen::outln(format_args!(
                    "ffsck: not committing the repair through the journal: {why}; using the \
                     repair log {}.",
                    log.display()
                ));
            }
            let file = OpenOptions::new()
                .read(true)
                .write(true)
                .create(true)
                .truncate(true)
                .open(log)
                .with_context(|| format!("cannot open the repair log {}", log.display()))?;
            let (mut redo, _) = RedoLog::open(file, &**dev, id)
                .with_context(|| format!("repair log {}", log.display()))?;
            redo.commit_and_apply(&**dev, records, &mut save)?;
            drop(redo);
            std::fs::remove_file(log)
                .with_context(|| format!("cannot remove the retired log {}", log.display()))?;
        }
        None => {
            if !quiet {
                crate::screen::outln(format_args!(
                    "ffsck: not committing the repair through the journal: {why}; writing it \
                     in place (give --repair-log PATH for a crash-safe commit)."
                ));
            }
            save(records)?;
            for r in records {
                dev.write_at(&r.data, r.offset)?;
            }
            dev.flush()?;
        }
    }
    Ok(())
}

/// Write what the repair staged on the external journal's overlay to the journal device.
fn commit_journal(j: &Overlay) -> Result<()> {
    let extents = j.extents()?;
    if extents.is_empty() {
        return Ok(());
    }
    for e in &extents {
        j.base().write_at(&e.data, e.offset)?;
    }
    j.base().flush()?;
    Ok(())
}

/// `--apply-undo`: restore the blocks an undo file saved.
pub fn apply_undo(undo_path: &Path, device: &Path) -> Result<i32> {
    let file = File::open(undo_path)
        .with_context(|| format!("cannot open the undo file {}", undo_path.display()))?;
    let dev = FileDevice::open_read_write(device)
        .with_context(|| format!("cannot open {} for writing", device.display()))?;
    if e2undo::is_e2undo(&file) {
        let restored = e2undo::restore(&file, &dev)?;
        crate::screen::outln(format_args!(
            "{}: restored {} ranges ({} bytes) from {}.",
            device.display(),
            restored.keys,
            restored.bytes,
            undo_path.display()
        ));
        if restored.incomplete {
            crate::screen::errln("Incomplete undo record; run e2fsck.");
            return Ok(exit::UNCORRECTED);
        }
        return Ok(exit::OK);
    }
    let restored = undo::restore(&file, &dev, device_id(&dev))?;
    crate::screen::outln(format_args!(
        "{}: restored {} ranges ({} bytes) from {}.",
        device.display(),
        restored.records,
        restored.bytes,
        undo_path.display()
    ));
    Ok(exit::OK)
}
