//! `ffsck`: the command line. Parses e2fsck-compatible flags, opens the device safely, runs the
//! engine and renders its findings (terminal, preen, JSON, e2fsck problem log, `-C` progress).

mod device;
mod interrupt;
mod output;
mod progress;
mod repair;
mod resources;
mod skip;
mod tty;

use anyhow::Result;
use clap::Parser;
use ffsck_check::{exit, CheckOptions, Policy, Progress, SuperHint};
use ffsck_io::{Device, FileDevice};
use std::path::PathBuf;
use std::sync::Arc;

/// Fast, parallel ext2/ext3/ext4 file system checker (e2fsck-compatible flags and exit codes).
#[derive(Parser, Debug)]
#[command(name = "ffsck", version, about, disable_help_flag = false)]
struct Args {
    /// Open read-only and answer "no" to every question.
    #[arg(short = 'n')]
    no: bool,
    /// Answer "yes" to every question.
    #[arg(short = 'y')]
    yes: bool,
    /// Preen: fix only what is safe without a human.
    #[arg(short = 'p', short_alias = 'a')]
    preen: bool,
    /// Optimize directories: rebuild (and index) every directory (with -y or -p).
    #[arg(short = 'D')]
    optimize: bool,
    /// Check even if the file system seems clean.
    #[arg(short = 'f')]
    force: bool,
    /// Verbose summary.
    #[arg(short = 'v')]
    verbose: bool,
    /// Print timing statistics.
    #[arg(short = 't', action = clap::ArgAction::Count)]
    timing: u8,
    /// Use the superblock at this block number instead of the primary.
    #[arg(short = 'b')]
    superblock: Option<u64>,
    /// Block size to use with -b.
    #[arg(short = 'B')]
    blocksize: Option<u32>,
    /// The external journal device of the file system (as e2fsck's -j); read-only under -n.
    #[arg(short = 'j', value_name = "EXTERNAL_JOURNAL")]
    journal: Option<PathBuf>,
    /// Write progress lines ("pass current max device") to this file descriptor; 0 draws a bar;
    /// -N writes nothing until SIGUSR1, then lines to descriptor N (SIGUSR2 stops them).
    #[arg(short = 'C', allow_negative_numbers = true)]
    progress_fd: Option<i32>,
    /// Worker threads (default: one per core).
    #[arg(long = "threads", short = 'm')]
    threads: Option<usize>,
    /// Write the findings and summary as JSON to this file.
    #[arg(long)]
    json: Option<PathBuf>,
    /// Write an e2fsck-format problem log (XML) to this file.
    #[arg(long = "problem-log")]
    problem_log: Option<PathBuf>,
    /// Redo log for a repair the file system's journal cannot carry (no journal, the repair
    /// changes the journal, or it is too large): the generation is committed there first, then
    /// written in place. Without it such a repair is written in place, as e2fsck does. An
    /// unfinished log found there is replayed before anything else, if it was made for this
    /// file system in this state.
    #[arg(long = "repair-log")]
    repair_log: Option<PathBuf>,
    /// Save every block a repair overwrites to this file first (see --apply-undo).
    #[arg(long = "undo-file")]
    undo_file: Option<PathBuf>,
    /// Put back the blocks saved in an undo file, restoring DEVICE as it was before the repair.
    #[arg(long = "apply-undo", value_name = "UNDO_FILE")]
    apply_undo: Option<PathBuf>,
    /// Predict the run time of `-fn` from the superblock, descriptors and a small sample, then exit.
    #[arg(long)]
    estimate: bool,
    /// Use only idle cores (by the load average) and run under SCHED_IDLE.
    #[arg(long)]
    nice: bool,
    /// Check directory blocks while pass 1 still scans later groups (pipelined passes 1-2).
    /// The findings are the same either way; off by default, as it measured no faster on
    /// 2 cores and holds the early pass-2 outputs (up to 32 MiB) until pass 1 ends.
    #[arg(long)]
    pipeline: bool,
    /// Bound the memory of the tables that grow with the file system (e.g. 64M, 1G): past
    /// it the directory-block list and the directories' parent links and generations spill
    /// to scratch files. Slower, same findings. The bitmaps, and 4-8 bytes per directory
    /// while pass 1 scans, stay in memory; a note on stderr says when the peak went above
    /// the limit.
    #[arg(long = "max-memory", value_name = "SIZE", value_parser = parse_size)]
    max_memory: Option<u64>,
    /// Directory for --max-memory's scratch files (default: $TMPDIR).
    #[arg(long = "scratch-dir", value_name = "DIR")]
    scratch_dir: Option<PathBuf>,
    /// The device or image to check.
    device: PathBuf,
}

/// A size with an optional K, M, G or T suffix (powers of 1024).
fn parse_size(s: &str) -> Result<u64, String> {
    let t = s.trim();
    let (num, shift) = match t.chars().last().map(|c| c.to_ascii_uppercase()) {
        Some('K') => (&t[..t.len() - 1], 10),
        Some('M') => (&t[..t.len() - 1], 20),
        Some('G') => (&t[..t.len() - 1], 30),
        Some('T') => (&t[..t.len() - 1], 40),
        _ => (t, 0),
    };
    let n: u64 = num
        .parse()
        .map_err(|_| format!("not a size: {s} (e.g. 64M)"))?;
    n.checked_mul(1u64 << shift)
        .ok_or_else(|| format!("size too large: {s}"))
}

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

fn real_main() -> Result<i32> {
    let args = match Args::try_parse() {
        Ok(a) => a,
        Err(e) => {
            let _ = e.print();
            return Ok(if e.use_stderr() {
                exit::USAGE
            } else {
                exit::OK
            });
        }
    };
    let modes = [args.no, args.yes, args.preen]
        .iter()
        .filter(|&&m| m)
        .count();
    if modes > 1 {
        eprintln!("ffsck: only one of the options -p/-a, -n or -y may be specified.");
        return Ok(exit::USAGE);
    }
    let dev_name = args.device.display().to_string();
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
    // e2fsck's mount rules, the file system found through any alias (loop devices, bind
    // mounts, devices built on it), before anything is asked or opened.
    let mode = if args.apply_undo.is_some() {
        device::Mode::Undo
    } else if policy == Policy::No {
        device::Mode::Check
    } else {
        device::Mode::Repair
    };
    let access = match device::check_mount(&args.device, &dev_name, mode, args.force) {
        Ok(a) => a,
        Err(code) => return Ok(code),
    };
    if interactive && !tty::is_terminal() {
        eprintln!("ffsck: need terminal for interactive repairs");
        return Ok(exit::ERROR);
    }
    // Locked, opened as the rules say, and refused at once if it cannot be written.
    let opened = match device::open(&args.device, &dev_name, &access) {
        Ok(o) => o,
        Err(code) => return Ok(code),
    };
    if let Some(undo) = &args.apply_undo {
        let _holds = opened.into_holds();
        return repair::apply_undo(undo, &args.device);
    }
    let device::Opened { dev, holds: _holds } = opened;
    let dev: Arc<dyn Device> = Arc::new(dev);
    if dev.size() == 0 {
        eprintln!("ffsck: {dev_name} is empty (0 bytes): no file system to check.");
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
                    return Ok(exit::ERROR);
                }
            }
        }
    };

    let mut plan = resources::plan(args.threads, args.nice);
    if plan.nice {
        plan.sched_idle = resources::enter_idle();
    }
    if args.estimate {
        // Under the same scheduling as the check, so the calibration sees what it would get.
        return match ffsck_check::estimate::estimate(&*dev, plan.threads) {
            Ok(e) => {
                print!("{}", resources::render_estimate(&dev_name, &e));
                Ok(exit::OK)
            }
            Err(why) => {
                eprintln!("ffsck: cannot estimate {dev_name}: {why}");
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
                return Ok(exit::OK);
            }
            skip::Decision::Check(Some(why)) => println!("{why}"),
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
    if let Some(path) = &args.json {
        output::write_json(path, &outcome, code)?;
    }
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
