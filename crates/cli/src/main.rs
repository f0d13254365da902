//! `ffsck`: the command line. Parses e2fsck-compatible flags, opens the device safely, runs the
//! engine and renders its findings (terminal, preen, JSON, e2fsck problem log, `-C` progress).
// The command line owns the clock: it reads it and hands it to the check (CheckOptions::now).
#![allow(clippy::disallowed_methods)]

mod args;
mod badblocks;
mod config;
mod device;
mod discard;
mod extended;
mod held;
mod interrupt;
mod output;
mod probe;
mod progress;
mod repair;
mod report;
mod resources;
mod screen;
mod skip;
mod tty;

use anyhow::Result;
use args::Args;
use clap::Parser;
use ffsck_check::{exit, CheckOptions, Mode, Policy, Progress, SuperHint};
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

/// The I/O mode `--io PLAN` gives for `device`: `auto` asks the kernel whether the device
/// (or the disk holding an image file) is rotational.
fn io_mode(plan: args::IoPlan, device: Option<&std::path::Path>) -> ffsck_io::device_kind::IoMode {
    use ffsck_io::device_kind::{rotation, Rotation};
    let kind = match (plan, device) {
        (args::IoPlan::Auto, Some(dev)) => rotation(dev),
        _ => Rotation::Unknown,
    };
    plan.resolve(kind)
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
            if !e.use_stderr() {
                let _ = e.print();
                return Ok(exit::OK);
            }
            let msg = args::usage_error(&e);
            eprint!("{msg}");
            // A usage error: still reported where --json asked, if it can be found.
            if let Some(path) = args::json_path(std::env::args_os()) {
                report::begin(&path, serde_json::Value::Null, None)?;
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

/// A stage of the run either goes on with its result or ends the run with an exit code (its
/// message already printed and put in the JSON report).
type Stage<T> = std::result::Result<T, i32>;

/// Print a fatal error as ffsck does and put it in the JSON report; the run's exit code.
fn fatal(msg: impl std::fmt::Display, code: i32) -> i32 {
    eprintln!("ffsck: {msg}");
    report::error(msg.to_string());
    code
}

/// The run after the arguments parsed; its exit code. Each stage returns early with the
/// exit code e2fsck gives for what stopped it.
fn run(args: &Args) -> Result<i32> {
    let s = match setup(args) {
        Ok(s) => s,
        Err(code) => return Ok(code),
    };
    let o = match open(args, &s)? {
        Ok(o) => o,
        Err(code) => return Ok(code),
    };
    let plan = match schedule(args, &s, &o) {
        Ok(p) => p,
        Err(code) => return Ok(code),
    };
    let start = output::Usage::now(None);
    // The clock a repair stamps into the superblock, and the skip decision is made by.
    let now = skip::clock();
    let how = repair::Commit {
        device: &s.dev_name,
        log: args.repair_log.as_deref(),
        undo: args.undo_file.as_deref(),
    };
    if let Err(code) = before_check(args, &s, &o, &how, now) {
        return Ok(code);
    }
    let (outcome, code) = match check(args, s.progress_out.take(), &s, &o, &plan, &how, now) {
        Ok(r) => r,
        Err(code) => return Ok(code),
    };
    after_check(&s, &o, &outcome, code, start)
}

/// What the command line, `-E` and e2fsck.conf decide before the device is touched.
struct Setup {
    device: std::path::PathBuf,
    dev_name: String,
    ext: extended::Extended,
    cfg: config::Config,
    settings: Settings,
    progress_out: std::cell::Cell<Option<progress::Output>>,
    interactive: bool,
    policy: Policy,
}

/// Resolve the device's name, refuse e2fsck's refused flag combinations, read e2fsck.conf,
/// and choose the policy.
fn setup(args: &Args) -> Stage<Setup> {
    let Some(device) = args.device.clone() else {
        return Err(fatal("no device given", exit::USAGE));
    };
    // UUID= and LABEL= name the device by its file system, as e2fsck accepts them.
    let Some(device) = probe::resolve(&device) else {
        return Err(fatal(
            format!("Unable to resolve '{}'", device.display()),
            exit::ERROR,
        ));
    };
    let modes = [args.no, args.yes, args.preen]
        .iter()
        .filter(|&&m| m)
        .count();
    // e2fsck's refusals of its flags' combinations, then e2fsck.conf.
    let ext = extended::check(args).map_err(|r| {
        eprintln!("{}", r.message);
        report::error(r.message.lines().next().unwrap_or_default());
        r.code
    })?;
    let cfg = config::Config::load().map_err(|config::LoadError(msg)| {
        eprintln!("{msg}");
        report::error(msg.lines().next().unwrap_or_default());
        exit::ERROR
    })?;
    let settings = Settings::new(args, &ext, &cfg);
    let dev_name = match &args.device_name {
        Some(name) => {
            let _ = skip::NAME_OVERRIDE.set(name.clone());
            name.clone()
        }
        None => device.display().to_string(),
    };
    let progress_out = progress::configure(args.progress_fd)?;
    // Without -n, -p or -y the questions go to the person at the terminal (and the engine
    // proposes every fix it has, as under -y). Undo and estimates ask nothing.
    let interactive = modes == 0 && !args.estimate && args.apply_undo.is_none();
    let mode = if args.yes || interactive {
        Mode::Yes
    } else if args.preen {
        Mode::Preen
    } else {
        Mode::No
    };
    // e2fsck.conf's changes to the problem table hold for the whole run.
    let mut overrides = cfg.overrides(ext.fixes_only);
    // Pass 1E: e2fsck.conf's no_optimize_extents, unless -E says otherwise; never with
    // fixes_only. -E bmap2extent rewrites every mapping.
    overrides.no_optimize_extents = ext
        .optimize_extents
        .map_or(cfg.no_optimize_extents, |on| !on)
        || ext.fixes_only;
    overrides.convert_block_maps = ext.bmap2extent;
    overrides.fragcheck = ext.fragcheck;
    overrides.ea_ver = ext.ea_ver;
    let overrides = Box::leak(Box::new(overrides));
    let policy = Policy::new(mode).with_overrides(overrides);
    report::policy(policy);
    // e2fsck's version line, once the command line is accepted: on stderr, except when
    // preening (a check; not an estimate or an undo).
    if mode != Mode::Preen && !args.estimate && args.apply_undo.is_none() {
        eprintln!("{}", args::banner());
    }
    Ok(Setup {
        device,
        dev_name,
        ext,
        cfg,
        settings,
        progress_out: std::cell::Cell::new(Some(progress_out)),
        interactive,
        policy,
    })
}

/// The device as the check uses it.
struct Open {
    access: device::Access,
    dev: Arc<dyn Device>,
    /// Locks and descriptors held for the whole run.
    _holds: device::Holds,
    journal_overlay: Option<Arc<ffsck_io::overlay::Overlay>>,
}

/// e2fsck's mount rules, then the device locked and opened as they say (and refused at once
/// if it cannot be written), the external journal opened; `--apply-undo` ends here.
fn open(args: &Args, s: &Setup) -> Result<Stage<Open>> {
    let (policy, dev_name) = (s.policy, s.dev_name.as_str());
    // The file system found through any alias (loop devices, bind mounts, devices built on
    // it), before anything is asked or opened.
    let mode = if args.apply_undo.is_some() {
        device::Mode::Undo
    } else if policy.mode == Mode::No {
        device::Mode::Check
    } else {
        device::Mode::Repair
    };
    let access = match device::check_mount(&s.device, dev_name, mode, s.settings.force) {
        Ok(a) => a,
        Err(code) => return Ok(Err(code)),
    };
    if s.interactive && !tty::is_terminal() {
        return Ok(Err(fatal(
            "need terminal for interactive repairs",
            exit::ERROR,
        )));
    }
    if args.flush {
        if let Err(e) = discard::flush_buffers(&s.device) {
            return Ok(Err(fatal(
                format!("{e} while trying to flush {dev_name}"),
                exit::ERROR,
            )));
        }
    }
    if args.undo_file.is_some() && policy.mode != Mode::No {
        println!(
            "Overwriting existing filesystem; this can be undone using the command:\n    \
             e2undo {} {dev_name}\n",
            args.undo_file
                .as_deref()
                .unwrap_or(std::path::Path::new(""))
                .display()
        );
    }
    let opened = match device::open(&s.device, dev_name, &access) {
        Ok(o) => o,
        Err(code) => return Ok(Err(code)),
    };
    report::filesystem(&opened.dev);
    if let Some(undo) = &args.apply_undo {
        let _holds = opened.into_holds();
        let code = repair::apply_undo(undo, &s.device)?;
        report::result("undo-applied");
        return Ok(Err(code));
    }
    let device::Opened { dev, holds } = opened;
    let dev: Arc<dyn Device> = Arc::new(dev);
    if dev.size() == 0 {
        return Ok(Err(fatal(
            format!("{dev_name} is empty (0 bytes): no file system to check."),
            exit::ERROR,
        )));
    }
    // The external journal: read-only under -n; in a repair, an overlay stages its reset,
    // written only after the file system's changes are committed.
    let journal_overlay = match &args.journal {
        None => None,
        Some(path) => {
            let opened = if policy.mode == Mode::No {
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
                    return Ok(Err(exit::ERROR));
                }
            }
        }
    };
    if s.ext.unshare_blocks && policy.mode != Mode::No && discard::has_shared_blocks(&*dev) {
        return Ok(Err(fatal(
            "ffsck does not support -E unshare_blocks on a file system with the \
             shared_blocks feature yet.",
            exit::USAGE,
        )));
    }
    Ok(Ok(Open {
        access,
        dev,
        _holds: holds,
        journal_overlay,
    }))
}

/// Threads and scheduling (`--threads`, `--nice`); `--estimate` ends here.
fn schedule(args: &Args, s: &Setup, o: &Open) -> Stage<resources::Plan> {
    let mut plan = resources::plan(s.settings.threads, s.settings.nice);
    if plan.nice {
        plan.sched_idle = resources::enter_idle();
    }
    // 0: one per core (the pool's default).
    report::threads_used(match plan.threads {
        0 => resources::cpus(),
        n => n,
    });
    let dev_name = &s.dev_name;
    if args.estimate {
        // Under the same scheduling as the check, so the calibration sees what it would get.
        return Err(match ffsck_check::estimate(&*o.dev, plan.threads) {
            Ok(e) => {
                print!("{}", resources::render_estimate(dev_name, &e));
                report::result("estimated");
                exit::OK
            }
            Err(why) => fatal(format!("cannot estimate {dev_name}: {why}"), exit::ERROR),
        });
    }
    if plan.nice && s.settings.verbose {
        eprintln!("{}", resources::describe(&plan));
    }
    Ok(plan)
}

/// What comes before the check: a node holding the file system waited out (multiple-mount
/// protection), an interrupted repair finished and the journal recovered (in a repair),
/// `-E journal_only`, and e2fsck's decision to skip a clean file system.
fn before_check(args: &Args, s: &Setup, o: &Open, how: &repair::Commit, now: i64) -> Stage<()> {
    let (policy, dev_name) = (s.policy, s.dev_name.as_str());
    if policy.mode != Mode::No && !o.access.mounted() {
        // Another node may hold the file system (multiple-mount protection): nothing is
        // written, a journal recovery included, until it is known not to.
        let waiting = |secs| {
            println!(
                "{dev_name}: the MMP block holds a node's sequence: waiting {secs} seconds to \
                 see whether that node still updates it..."
            )
        };
        if let Err(why) = ffsck_check::wait_for_mmp_holder(&*o.dev, waiting) {
            return Err(fatal(
                format!("{dev_name}: {why}"),
                exit::ERROR | exit::UNCORRECTED,
            ));
        }
    }
    // As e2fsck does before deciding anything (not on a mounted file system, whose kernel
    // holds the journal, nor with an external journal: the check replays those with the
    // repair).
    if policy.mode != Mode::No && !o.access.mounted() && args.journal.is_none() {
        if let Err(e) = repair::prepare(&o.dev, how) {
            return Err(fatal(format!("{dev_name}: {e:#}"), exit::ERROR));
        }
    }
    if s.ext.journal_only {
        // e2fsck's journal_only: the journal is recovered (above, in a repair), nothing checked.
        report::result("journal-only");
        return Err(exit::OK);
    }
    if !s.settings.force {
        let journal = o
            .journal_overlay
            .as_ref()
            .map(|j| j.clone() as Arc<dyn Device>);
        match skip::decide(o.dev.clone(), dev_name, policy, journal.as_ref(), now) {
            skip::Decision::Skip(line) => {
                println!("{line}");
                report::skipped(&line);
                return Err(exit::OK);
            }
            skip::Decision::Check(Some(why)) => {
                println!("{why}");
                report::check_reason(&why);
            }
            skip::Decision::Check(None) => {}
        }
    }
    Ok(())
}

/// The check (`-n`) or the repair, with its progress and its terminal; the outcome and the
/// exit code the terminal gives it.
fn check(
    args: &Args,
    progress_out: Option<progress::Output>,
    s: &Setup,
    o: &Open,
    plan: &resources::Plan,
    how: &repair::Commit,
    now: i64,
) -> Stage<(ffsck_check::Outcome, i32)> {
    let (policy, dev_name, dev) = (s.policy, &s.dev_name, &o.dev);
    let prog = Arc::new(Progress::default());
    let bad_blocks = badblocks::list(
        args,
        &s.device,
        &**dev,
        policy.mode == Mode::Preen,
        dev_name,
    )
    .map_err(|(msg, code)| fatal(msg, code))?;
    let opts = CheckOptions {
        policy,
        superblock: SuperHint {
            block: args.superblock,
            block_size: args.blocksize,
        },
        threads: plan.threads,
        progress: prog.clone(),
        optimize_dirs: args.optimize,
        tuning: ffsck_check::Tuning {
            pipeline: args.pipeline,
            max_memory: s.settings.max_memory,
            scratch_dir: s.settings.scratch_dir.clone(),
            io: io_mode(args.io, args.device.as_deref()),
            ..Default::default()
        },
        journal_dev: o
            .journal_overlay
            .as_ref()
            .map(|j| j.clone() as Arc<dyn Device>),
        now,
        bad_blocks,
        // Mounted, through any alias: its journal is the kernel's (not replayed under -n).
        mounted: o.access.mounted(),
    };
    // The bar's ETA follows the run-time model (its sample costs a few reads); a bar turned
    // on later by SIGUSR1 does without.
    let model = (args.progress_fd == Some(0))
        .then(|| ffsck_check::estimate(&**dev, plan.threads).ok())
        .flatten()
        .map(|e| e.pass_secs);
    let ticker =
        progress_out.map(|out| progress::Ticker::start(out, prog.clone(), dev_name.clone(), model));
    let mut term = output::Terminal::new(policy, dev_name);
    term.configure(&s.cfg);
    term.name_from(&**dev);
    if o.access.root {
        term.root_file_system();
    }
    if s.interactive {
        term.ask_on_terminal();
    }
    if s.settings.timing > 1 {
        term.time_passes();
    }
    term.count_io(dev.clone());
    let outcome = if policy.mode == Mode::No {
        Ok(ffsck_check::check(dev.clone(), &opts, &mut term))
    } else {
        repair::run(
            dev.clone(),
            &opts,
            o.journal_overlay.as_deref(),
            &mut term,
            how,
        )
    };
    if let Some(t) = ticker {
        t.stop();
    }
    let outcome = match outcome {
        Ok(o) => o,
        Err(e) => return Err(fatal(format!("{dev_name}: {e:#}"), exit::ERROR)),
    };
    let mut code = term.finish(&outcome, s.settings.verbose);
    // A state marked valid again counts as a change, though nothing else was (as in e2fsck).
    if outcome.marked_valid && code & (exit::UNCORRECTED | exit::ERROR | exit::CANCELED) == 0 {
        code |= exit::NONDESTRUCT;
    }
    Ok((outcome, code))
}

/// After the check: `-E discard`, the problem log, the JSON outcome, the memory note of
/// `--max-memory` and `-t`'s line.
fn after_check(
    s: &Setup,
    o: &Open,
    outcome: &ffsck_check::Outcome,
    code: i32,
    start: output::Usage,
) -> Result<i32> {
    let dev_name = &s.dev_name;
    if s.ext.discard
        && s.policy.mode != Mode::No
        && !o.access.mounted()
        && code & (exit::UNCORRECTED | exit::ERROR | exit::CANCELED) == 0
    {
        match discard::discard_free(&s.device, &*o.dev) {
            Ok(bytes) if s.settings.verbose => {
                println!("{dev_name}: discarded {} KiB of free blocks", bytes / 1024)
            }
            Ok(_) => {}
            Err(e) => eprintln!("ffsck: {dev_name}: discard: {e}"),
        }
    }
    if let Some(path) = &s.settings.problem_log {
        output::write_problem_log(path, outcome, dev_name, std::env::args().collect())?;
    }
    report::outcome(outcome);
    if let Some(limit) = s.settings.max_memory {
        let peak = output::peak_rss_kib() * 1024;
        if peak > limit {
            let dirs = outcome.summary.as_ref().map(|s| s.counts.dirs);
            eprintln!("ffsck: {}", output::over_limit_note(peak, limit, dirs));
        }
    }
    if s.settings.timing > 0 {
        print!(
            "{}",
            start.report("", Some(&*o.dev), repair::bytes_written())
        );
    }
    Ok(code)
}

/// The run's settings where a flag, an `-E` option and e2fsck.conf meet: the command line
/// wins, then `-E`, then the file.
struct Settings {
    force: bool,
    verbose: bool,
    timing: u8,
    threads: Option<usize>,
    nice: bool,
    max_memory: Option<u64>,
    scratch_dir: Option<std::path::PathBuf>,
    problem_log: Option<std::path::PathBuf>,
}

impl Settings {
    fn new(args: &Args, ext: &extended::Extended, cfg: &config::Config) -> Settings {
        // [scratch_files] directory: e2fsck keeps its large tables in files there; ffsck's
        // spill files go there and its tables spill (as under --max-memory 0).
        let scratch_dir = args
            .scratch_dir
            .clone()
            .or_else(|| cfg.scratch_dir.clone())
            .or_else(|| cfg.scratch_directory.clone());
        let max_memory = args
            .max_memory
            .or(cfg.max_memory)
            .or_else(|| cfg.scratch_directory.is_some().then_some(0));
        Settings {
            // unshare_blocks and a bad-block list (-c, -l, -L) imply -f, as in e2fsck.
            force: args.force
                || ext.unshare_blocks
                || args.badblocks_scan > 0
                || args.add_badblocks.is_some()
                || args.set_badblocks.is_some(),
            verbose: args.verbose || cfg.report_verbose,
            timing: if cfg.report_time {
                args.timing.max(2)
            } else {
                args.timing
            },
            threads: args.threads.or(cfg.threads),
            nice: args.nice || cfg.nice,
            max_memory,
            scratch_dir,
            problem_log: args.problem_log.clone().or_else(|| ext.problem_log.clone()),
        }
    }
}
