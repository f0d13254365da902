//! The crash-safe repair path of the command line: finish an interrupted repair from its redo
//! log, run the engine's repair against an overlay, then commit the staged generation (saving
//! the old blocks to the undo file first when asked) and retire the log.

use anyhow::{Context, Result};
use ffsck_check::repair::RepairOutcome;
use ffsck_check::{exit, CheckOptions, Outcome, Reporter};
use ffsck_io::logfile::Record;
use ffsck_io::overlay::Overlay;
use ffsck_io::redo::{DeviceId, Recovery, RedoLog};
use ffsck_io::undo::{self, UndoLog};
use ffsck_io::{Device, FileDevice};
use std::fs::{File, OpenOptions};
use std::os::unix::fs::FileTypeExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// Where the redo log of `device` lives unless `--repair-log` says otherwise: beside an image
/// file, or under /var/lib/ffsck for a block device (never on the device being repaired).
pub fn default_log_path(device: &Path) -> PathBuf {
    let is_blockdev = std::fs::metadata(device).is_ok_and(|m| m.file_type().is_block_device());
    let name = device
        .file_name()
        .map_or_else(|| "device".into(), |n| n.to_string_lossy().into_owned());
    if is_blockdev {
        PathBuf::from("/var/lib/ffsck").join(format!("{name}.redo"))
    } else {
        let mut p = device.as_os_str().to_owned();
        p.push(".ffsck-redo");
        PathBuf::from(p)
    }
}

/// A log is tied to the device by its size (its location ties it to the device's name).
fn device_id(dev: &dyn Device) -> DeviceId {
    DeviceId {
        size: dev.size(),
        tag: [0; 16],
    }
}

/// Repair `dev`: replay an unfinished log, check and fix through an overlay, commit.
pub fn run(
    dev: Arc<dyn Device>,
    opts: &CheckOptions,
    journal: Option<&Overlay>,
    rep: &mut dyn Reporter,
    log_path: &Path,
    undo_path: Option<&Path>,
) -> Result<Outcome> {
    if let Some(dir) = log_path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir)
            .with_context(|| format!("cannot create {} for the repair log", dir.display()))?;
    }
    let existed = log_path.exists();
    if !existed {
        // A log this run creates is removed again if the run is cancelled before its commit;
        // one left by an earlier run holds that run's repair and stays until it is replayed.
        crate::interrupt::set_log(Some(log_path.to_path_buf()));
    }
    let file = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .open(log_path)
        .with_context(|| format!("cannot open the repair log {}", log_path.display()))?;
    let id = device_id(&*dev);
    // Finishing an interrupted repair writes the device: a signal waits for it.
    crate::interrupt::begin_commit();
    let opened = RedoLog::open(file, &*dev, id);
    let mut cancelled = crate::interrupt::end_commit(false);
    let (mut redo, recovery) =
        opened.with_context(|| format!("repair log {}", log_path.display()))?;
    if cancelled {
        drop(redo);
        let _ = std::fs::remove_file(log_path);
        println!(
            "ffsck: interrupted after finishing the last repair's log; nothing else was done."
        );
        std::process::exit(exit::CANCELED);
    }
    if let Recovery::Replayed { records, bytes, .. } = recovery {
        println!(
            "ffsck: finished an interrupted repair from {} ({records} records, {bytes} bytes).",
            log_path.display()
        );
    } else if existed {
        println!(
            "ffsck: {}: the last repair had completed; nothing to replay.",
            log_path.display()
        );
    }

    let RepairOutcome {
        mut last,
        findings,
        changes,
        mut exit_code,
        new_problems,
        ..
    } = {
        // Until the commit, a signal removes the (now empty) log and stops the run.
        crate::interrupt::set_log(Some(log_path.to_path_buf()));
        ffsck_check::repair::repair(dev.clone(), opts, rep)
    };
    crate::interrupt::begin_commit();

    let interactive = rep.asks();
    if !new_problems.is_empty() {
        let names: Vec<&str> = new_problems.iter().map(|p| p.info().name).collect();
        println!(
            "\nffsck: the repair would leave problems the file system did not have ({}); \
             nothing was written.",
            names.join(", ")
        );
        if interactive {
            println!(
                "ffsck: a fix answered no can leave others half made; run again and answer \
                 yes to more of them (or use -y)."
            );
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
        let mut undo = match undo_path {
            Some(p) => {
                let f = File::create(p)
                    .with_context(|| format!("cannot create the undo file {}", p.display()))?;
                Some(UndoLog::create(f, id)?)
            }
            None => None,
        };
        redo.commit_and_apply(&*dev, &records, &mut |r| match undo.as_mut() {
            Some(u) => u.save_before(&*dev, r),
            None => Ok(()),
        })
        .context("committing the repair")?;
    }
    if new_problems.is_empty() {
        if let Some(j) = journal {
            // The external journal's reset (after replay), only once the file system holds
            // the replayed blocks: a crash before this point leaves the journal to replay again.
            commit_journal(j).context("resetting the external journal")?;
        }
    }
    drop(redo);
    let retired = std::fs::remove_file(log_path)
        .with_context(|| format!("cannot remove the retired log {}", log_path.display()));
    cancelled = crate::interrupt::end_commit(true);
    retired?;
    if cancelled {
        println!("\nffsck: interrupted; the repair was finished first, as the signal came during its commit.");
        exit_code |= exit::CANCELED;
    }
    last.findings = findings;
    last.exit_code = exit_code;
    Ok(last)
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
    let restored = undo::restore(&file, &dev, device_id(&dev))?;
    println!(
        "{}: restored {} ranges ({} bytes) from {}.",
        device.display(),
        restored.records,
        restored.bytes,
        undo_path.display()
    );
    Ok(exit::OK)
}
