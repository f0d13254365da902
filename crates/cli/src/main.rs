//! `ffsck`: the command line. Parses e2fsck-compatible flags, opens the device safely, runs the
//! engine and renders its findings (terminal, preen, JSON, e2fsck problem log, `-C` progress).
// The command line owns the clock: it reads it and hands it to the check (CheckOptions::now).
#![allow(clippy::disallowed_methods)]

mod args;
mod device;
mod interrupt;
mod output;
mod progress;
mod repair;
mod report;
mod resources;
mod skip;
mod tty;

use anyhow::Result;
use args::Args;
use clap::Parser;
use ffsck_check::{exit, CheckOptions, Policy, Progress, SuperHint};
use ffsck_io::{Device, FileDevice};
use std::sync::Arc;

fn main() {
    tune_allocator();
    interrupt::install();
    let code = match real_main() {
        Ok(c) => c,
        Err(e) => {
            eprintln!("ffsck: {e:#}");
            exit::ERROR
        }
    };
    std::process::exit(code);
}

/// Large buffers (inode tables, directory blocks in flight) are allocated and freed pass by
/// pass. A fixed mmap threshold returns each one to the system when it is freed, instead of
/// letting glibc raise the threshold and keep them in a per-thread arena, so peak memory is the
/// memory actually in use. It is 1 MiB, not lower: each group's lists of directories and
/// directory blocks (about 100 KiB each on a file system of small directories) would
/// otherwise be mapped, grown with mremap and unmapped group by group, and each of those
/// interrupts the other cores to flush their TLBs (about 1% of the time on 2 cores).
fn tune_allocator() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: mallopt only changes allocator parameters; called before any other thread exists.
    unsafe {
        libc::mallopt(libc::M_MMAP_THRESHOLD, 1024 * 1024);
    }
}

/// Parse the arguments, run, and write the JSON report (`--json`) whatever the outcome: the
/// one place the document is finished, after every return of [`run`].
fn real_main() -> Result<i32> {
    let args = match Args::try_parse() {
        Ok(a) => a,
        Err(e) => {
            let _ = e.print();
            if !e.use_stderr() {
                return Ok(exit::OK);
            }
            // A usage error: still reported where --json asked, if it can be found.
            if let Some(path) = args::json_path(std::env::args_os()) {
                report::begin(&path, serde_json::Value::Null, None)?;
                let msg = e.render().to_string();
                report::error(msg.lines().next().unwrap_or("usage error"));
                report::finish(exit::USAGE)?;
            }
            return Ok(exit::USAGE);
        }
    };
    if let Some(what) = args.generate {
        args::generate(what, &mut std::io::stdout().lock())?;
        return Ok(exit::OK);
    }
    if let Some(path) = &args.json {
        report::begin(path, args.report_options(), args.device.as_deref())?;
    }
    let code = match run(&args) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("ffsck: {e:#}");
            report::error(format!("{e:#}"));
            exit::ERROR
        }
    };
    report::finish(code)?;
    Ok(code)
}

/// The run after the arguments parsed; its exit code.
fn run(args: &Args) -> Result<i32> {
    let Some(device) = args.device.clone() else {
        eprintln!("ffsck: no device given");
        report::error("no device given");
        return Ok(exit::USAGE);
    };
    let modes = [args.no, args.yes, args.preen]
        .iter()
        .filter(|&&m| m)
        .count();
    if modes > 1 {
        let msg = "only one of the options -p/-a, -n or -y may be specified.";
        eprintln!("ffsck: {msg}");
        report::error(msg);
        return Ok(exit::USAGE);
    }
    let dev_name = device.display().to_string();
    let progress_out = match progress::configure(args.progress_fd) {
        Ok(o) => o,
        Err(code) => return Ok(code),
    };
    // Without -n, -p or -y the questions go to the person at the terminal (and the engine
    // proposes every fix it has, as under -y). Undo and estimates ask nothing.
    let interactive = modes == 0 && !args.estimate && args.apply_undo.is_none();
    let policy = if args.yes || interactive {
        Policy::Yes
    } else if args.preen {
        Policy::Preen
    } else {
        Policy::No
    };
    report::policy(policy);
    // e2fsck's mount rules, the file system found through any alias (loop devices, bind
    // mounts, devices built on it), before anything is asked or opened.
    let mode = if args.apply_undo.is_some() {
        device::Mode::Undo
    } else if policy == Policy::No {
        device::Mode::Check
    } else {
        device::Mode::Repair
    };
    let access = match device::check_mount(&device, &dev_name, mode, args.force) {
        Ok(a) => a,
        Err(code) => return Ok(code),
    };
    if interactive && !tty::is_terminal() {
        eprintln!("ffsck: need terminal for interactive repairs");
        report::error("need terminal for interactive repairs");
        return Ok(exit::ERROR);
    }
    // Locked, opened as the rules say, and refused at once if it cannot be written.
    let opened = match device::open(&device, &dev_name, &access) {
        Ok(o) => o,
        Err(code) => return Ok(code),
    };
    report::filesystem(&opened.dev);
    if let Some(undo) = &args.apply_undo {
        let _holds = opened.into_holds();
        let code = repair::apply_undo(undo, &device)?;
        report::result("undo-applied");
        return Ok(code);
    }
    let device::Opened { dev, holds: _holds } = opened;
    let dev: Arc<dyn Device> = Arc::new(dev);
    if dev.size() == 0 {
        eprintln!("ffsck: {dev_name} is empty (0 bytes): no file system to check.");
        report::error(format!(
            "{dev_name} is empty (0 bytes): no file system to check."
        ));
        return Ok(exit::ERROR);
    }
    // The external journal: read-only under -n; in a repair, an overlay stages its reset,
    // written only after the file system's changes are committed.
    let journal_overlay = match &args.journal {
        None => None,
        Some(path) => {
            let opened = if policy == Policy::No {
                FileDevice::open_read_only(path)
            } else {
                FileDevice::open_read_write(path)
            };
            match opened {
                Ok(d) => Some(Arc::new(ffsck_io::overlay::Overlay::new(Arc::new(d)))),
                Err(e) => {
                    eprintln!(
                        "ffsck: {e}\nffsck: cannot open the external journal {}.",
                        path.display()
                    );
                    report::error(format!(
                        "{e}: cannot open the external journal {}",
                        path.display()
                    ));
                    return Ok(exit::ERROR);
                }
            }
        }
    };

    let mut plan = resources::plan(args.threads, args.nice);
    if plan.nice {
        plan.sched_idle = resources::enter_idle();
    }
    // 0: one per core (the pool's default).
    report::threads_used(match plan.threads {
        0 => resources::cpus(),
        n => n,
    });
    if args.estimate {
        // Under the same scheduling as the check, so the calibration sees what it would get.
        return match ffsck_check::estimate::estimate(&*dev, plan.threads) {
            Ok(e) => {
                print!("{}", resources::render_estimate(&dev_name, &e));
                report::result("estimated");
                Ok(exit::OK)
            }
            Err(why) => {
                eprintln!("ffsck: cannot estimate {dev_name}: {why}");
                report::error(format!("cannot estimate {dev_name}: {why}"));
                Ok(exit::ERROR)
            }
        };
    }
    if plan.nice && args.verbose {
        eprintln!("{}", resources::describe(&plan));
    }

    let start = std::time::Instant::now();
    // The clock a repair stamps into the superblock, and the skip decision is made by.
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_secs()).unwrap_or(i64::MAX));
    let how = repair::Commit {
        device: &dev_name,
        log: args.repair_log.as_deref(),
        undo: args.undo_file.as_deref(),
    };
    // A repair first finishes an interrupted one and recovers the journal, as e2fsck does
    // before deciding anything (not on a mounted file system, whose kernel holds the journal,
    // nor with an external journal: the check replays those with the repair).
    if policy != Policy::No && !access.mounted() && args.journal.is_none() {
        if let Err(e) = repair::prepare(&dev, &how) {
            eprintln!("ffsck: {dev_name}: {e:#}");
            report::error(format!("{dev_name}: {e:#}"));
            return Ok(exit::ERROR);
        }
    }
    if !args.force {
        let journal = journal_overlay
            .as_ref()
            .map(|o| o.clone() as Arc<dyn Device>);
        match skip::decide(dev.clone(), &dev_name, policy, journal.as_ref(), now) {
            skip::Decision::Skip(line) => {
                println!("{line}");
                report::skipped(&line);
                return Ok(exit::OK);
            }
            skip::Decision::Check(Some(why)) => {
                println!("{why}");
                report::check_reason(&why);
            }
            skip::Decision::Check(None) => {}
        }
    }
    let prog = Arc::new(Progress::default());
    let opts = CheckOptions {
        policy,
        superblock: SuperHint {
            block: args.superblock,
            block_size: args.blocksize,
        },
        threads: plan.threads,
        progress: prog.clone(),
        optimize_dirs: args.optimize,
        tuning: ffsck_check::engine::Tuning {
            pipeline: args.pipeline,
            max_memory: args.max_memory,
            scratch_dir: args.scratch_dir.clone(),
            ..Default::default()
        },
        journal_dev: journal_overlay
            .as_ref()
            .map(|o| o.clone() as Arc<dyn Device>),
        now,
    };
    // The bar's ETA follows the run-time model (its sample costs a few reads); a bar turned
    // on later by SIGUSR1 does without.
    let model = (args.progress_fd == Some(0))
        .then(|| ffsck_check::estimate::estimate(&*dev, plan.threads).ok())
        .flatten()
        .map(|e| e.pass_secs);
    let ticker = Some(progress::Ticker::start(
        progress_out,
        prog.clone(),
        dev_name.clone(),
        model,
    ));
    let mut term = output::Terminal::new(policy, &dev_name);
    if access.root {
        term.root_file_system();
    }
    if interactive {
        term.ask_on_terminal();
    }
    if args.timing > 1 {
        term.time_passes();
    }
    let outcome = if policy == Policy::No {
        ffsck_check::check(dev.clone(), &opts, &mut term)
    } else {
        match repair::run(
            dev.clone(),
            &opts,
            journal_overlay.as_deref(),
            &mut term,
            &how,
        ) {
            Ok(o) => o,
            Err(e) => {
                if let Some(t) = ticker {
                    t.stop();
                }
                eprintln!("ffsck: {dev_name}: {e:#}");
                report::error(format!("{dev_name}: {e:#}"));
                return Ok(exit::ERROR);
            }
        }
    };
    if let Some(t) = ticker {
        t.stop();
    }
    let mut code = term.finish(&outcome, args.verbose);
    // A state marked valid again counts as a change, though nothing else was (as in e2fsck).
    if outcome.marked_valid && code & (exit::UNCORRECTED | exit::ERROR | exit::CANCELED) == 0 {
        code |= exit::NONDESTRUCT;
    }
    if let Some(path) = &args.problem_log {
        output::write_problem_log(path, &outcome, &dev_name, std::env::args().collect())?;
    }
    report::outcome(&outcome);
    if let Some(limit) = args.max_memory {
        let peak = output::peak_rss_kib() * 1024;
        if peak > limit {
            let dirs = outcome.summary.as_ref().map(|s| s.counts.dirs);
            eprintln!("ffsck: {}", output::over_limit_note(peak, limit, dirs));
        }
    }
    if args.timing > 0 {
        let el = start.elapsed();
        let (user, sys) = output::cpu_times();
        println!(
            "Memory used: {}k, time: {:.2}/{:.2}/{:.2}",
            output::peak_rss_kib(),
            el.as_secs_f64(),
            user,
            sys
        );
        println!("I/O read: {}MB", dev.bytes_read() / (1 << 20));
    }
    Ok(code)
}
