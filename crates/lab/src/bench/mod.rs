//! `ffsck-lab bench`: times `ffsck -fn` against `e2fsck -fn` on one image and reports median
//! wall time, CPU time and peak RSS for each, plus the speedup.
//!
//! Runs alternate (ffsck, e2fsck, ffsck, …) after one warm-up each, so slow drifts of the
//! machine (other load, thermal state, page-cache pressure) hit both checkers alike instead of
//! biasing whichever ran second. Peak RSS comes from the kernel's `rusage` via `wait4`.

use std::ffi::OsString;
use std::fs::File;
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{bail, Context, Result};
use serde::Serialize;

mod aged;
mod figures;
mod report;

pub use report::render_markdown;

use crate::child;
use crate::imagegen::{self, BuiltImage, FsInfo, Profile};
use crate::metrics::median;
use crate::tools;

/// Fewer runs than this make the median no better than a single sample.
const MIN_RUNS: usize = 3;

#[derive(clap::Args, Debug, Clone)]
pub struct BenchArgs {
    /// Approximate number of inodes to populate in the generated image.
    #[arg(long, default_value_t = 250_000)]
    pub inodes: u64,
    /// Shape of the generated tree and file system type.
    #[arg(long, value_enum, default_value_t = Profile::Files)]
    pub profile: Profile,
    /// Timed runs per checker (at least 3), after one warm-up each.
    #[arg(long, default_value_t = 3)]
    pub runs: usize,
    /// Pass `--threads T` to ffsck [default: ffsck's own default].
    #[arg(long)]
    pub threads: Option<usize>,
    /// Output directory for results.json, report.md, logs and the built image.
    #[arg(long, default_value = "out/bench")]
    pub out: PathBuf,
    /// Benchmark this existing image instead of building one (it is never deleted).
    #[arg(long)]
    pub image: Option<PathBuf>,
    /// ffsck binary [default: `ffsck` next to ffsck-lab, then PATH].
    #[arg(long)]
    pub ffsck: Option<PathBuf>,
    /// e2fsck binary [default: from PATH or /sbin].
    #[arg(long)]
    pub e2fsck: Option<PathBuf>,
    /// mke2fs binary [default: from PATH or /sbin].
    #[arg(long)]
    pub mke2fs: Option<PathBuf>,
    /// Keep the built image after the benchmark.
    #[arg(long)]
    pub keep: bool,
    /// Drop the page cache (`syncfs` of the image's file system, then
    /// `echo 3 > /proc/sys/vm/drop_caches`) before every run; needs root. The report says
    /// whether it worked.
    #[arg(long)]
    pub cold: bool,
    /// Also run ffsck with 1..=nproc threads and report the scaling.
    #[arg(long)]
    pub scaling: bool,
    /// Also profile one ffsck run with `perf record` and put its hottest symbols in the
    /// report (skipped with a warning when perf is missing or not allowed).
    #[arg(long)]
    pub perf: bool,
    /// Seed for the generated tree (same seed, same image content).
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Per-run wall-clock limit in seconds.
    #[arg(long, default_value_t = 3600.0)]
    pub timeout: f64,
    /// Parent directory for the temporary file tree fed to mke2fs -d [default: --out].
    /// A tmpfs such as /dev/shm makes generation faster.
    #[arg(long)]
    pub tree_dir: Option<PathBuf>,
    /// Age the built image with `ffsck-lab age --method M` (loop mount; needs root) after
    /// doubling its size, then bench the aged image. Skipped with a warning when it cannot
    /// be mounted.
    #[arg(long, value_enum)]
    pub aged: Option<crate::age::Method>,
    /// With --aged: stop aging after this many seconds.
    #[arg(long, default_value_t = 300.0)]
    pub age_secs: f64,
    /// Skip the read-once floor (reading the metadata once with large reads; needs e2image).
    #[arg(long)]
    pub no_read_once: bool,
}

/// One measured run.
#[derive(Debug, Clone, Serialize)]
pub struct RunRecord {
    pub checker: String,
    /// `--threads` given to ffsck, if any.
    pub threads: Option<usize>,
    pub warmup: bool,
    /// Which part of the bench the run belongs to: "compare" or "scaling".
    pub phase: String,
    /// With --cold: whether dropping the page cache before this run worked.
    pub caches_dropped: Option<bool>,
    pub exit_code: Option<i32>,
    pub signal: Option<i32>,
    pub timed_out: bool,
    pub wall_s: f64,
    pub user_s: f64,
    pub sys_s: f64,
    pub max_rss_kib: u64,
    /// Measured through the `__measure` shim: the peak RSS is the checker's own, free of the
    /// lab's pre-exec high-water mark.
    pub rss_shim: bool,
}

/// Medians over the timed (non-warm-up) runs of one checker.
#[derive(Debug, Clone, Serialize)]
pub struct CheckerSummary {
    pub checker: String,
    pub runs: usize,
    pub median_wall_s: f64,
    pub min_wall_s: f64,
    pub max_wall_s: f64,
    pub median_user_s: f64,
    pub median_sys_s: f64,
    pub median_max_rss_kib: f64,
    /// Distinct outcomes seen ("0", "4", "timeout", "signal 11").
    pub outcomes: Vec<String>,
}

#[derive(Debug, Clone, Serialize)]
pub struct ScalingRow {
    pub threads: usize,
    pub median_wall_s: f64,
    pub min_wall_s: f64,
    /// Median user + system CPU time: what the threads did in all. It grows with the thread
    /// count only by the cost of working in parallel (contention, shared memory bandwidth).
    pub median_cpu_s: f64,
    /// Median wall at 1 thread divided by median wall at this count.
    pub speedup_vs_1_thread: f64,
    /// The same with the fastest runs (less of the machine's noise).
    pub speedup_vs_1_thread_min: f64,
    /// e2fsck's median wall divided by ffsck's at this count.
    pub speedup_vs_e2fsck: f64,
}

/// `ffsck --estimate` against the runs it predicted: one estimate just before each timed
/// `ffsck -fn` of the comparison, in the same cache state (dropped first with --cold).
#[derive(Debug, Clone, Serialize)]
pub struct EstimateCheck {
    /// Each prediction (seconds) and the wall time of the run that followed it.
    pub pairs: Vec<(f64, f64)>,
    pub median_predicted_s: f64,
    /// Median prediction over ffsck's median wall.
    pub ratio: f64,
    /// The lowest and highest prediction-over-run ratio of a single pair.
    pub worst_low: f64,
    pub worst_high: f64,
}

impl EstimateCheck {
    fn new(pairs: Vec<(f64, f64)>, measured_median_s: f64) -> Option<Self> {
        let predicted: Vec<f64> = pairs.iter().map(|p| p.0).collect();
        let median_predicted_s = median(&predicted)?;
        let ratios = pairs.iter().map(|(e, w)| e / w);
        Some(EstimateCheck {
            median_predicted_s,
            ratio: median_predicted_s / measured_median_s,
            worst_low: ratios.clone().fold(f64::INFINITY, f64::min),
            worst_high: ratios.fold(f64::NEG_INFINITY, f64::max),
            pairs,
        })
    }
}

/// The predicted seconds in `ffsck --estimate`'s report: its first line ends in
/// "estimated time of ffsck -fn: SECONDS s; ...".
fn parse_estimate(report: &str) -> Option<f64> {
    let (_, rest) = report
        .lines()
        .next()?
        .split_once("estimated time of ffsck -fn: ")?;
    let secs: f64 = rest.split_once(" s")?.0.trim().parse().ok()?;
    secs.is_finite().then_some(secs)
}

#[derive(Debug, Clone, Serialize)]
pub struct ColdCache {
    pub requested: bool,
    pub drops_ok: usize,
    pub drops_failed: usize,
    pub last_error: Option<String>,
}

#[derive(Debug, Clone, Serialize)]
pub struct Machine {
    pub cpus: usize,
    pub cpu_model: Option<String>,
}

#[derive(Debug, Clone, Serialize)]
pub struct BenchResults {
    pub image: PathBuf,
    /// Present when the bench built the image itself.
    pub built: Option<BuiltImage>,
    pub fs: Option<FsInfo>,
    pub ffsck_path: PathBuf,
    pub ffsck_threads: Option<usize>,
    pub e2fsck_path: PathBuf,
    pub e2fsck_version: String,
    pub machine: Machine,
    pub cold_cache: ColdCache,
    /// ffsck first, then e2fsck.
    pub summary: Vec<CheckerSummary>,
    /// e2fsck median wall / ffsck median wall.
    pub speedup: f64,
    /// ffsck median peak RSS / e2fsck median peak RSS.
    pub rss_ratio_ffsck_over_e2fsck: f64,
    pub scaling: Vec<ScalingRow>,
    /// With --scaling on a warm cache: the same thread counts on two reference loops.
    pub ceiling: Option<crate::ceiling::Ceiling>,
    /// With --aged: what aging did (absent when it was skipped).
    pub aged: Option<crate::age::AgeReport>,
    /// Time to read the same metadata once (absent with --no-read-once or without e2image).
    pub read_once: Option<crate::readonce::ReadOnce>,
    /// `ffsck --estimate` against the timed runs (absent if it failed every time).
    pub estimate: Option<EstimateCheck>,
    /// SVG figures written beside report.md.
    pub figures: Vec<crate::plots::Figure>,
    /// With --perf: the profile of one more ffsck run.
    pub profile: Option<crate::perf::Profile>,
    pub warnings: Vec<String>,
    pub runs: Vec<RunRecord>,
}

/// CLI entry: run the bench, write results.json and report.md, print the report.
pub fn main(args: &BenchArgs) -> Result<()> {
    let results = run(args)?;
    let report = render_markdown(&results);
    print!("{report}");
    eprintln!(
        "wrote {} and {}",
        args.out.join("results.json").display(),
        args.out.join("report.md").display()
    );
    Ok(())
}

/// Runs the benchmark and writes `results.json` and `report.md` into `--out`.
pub fn run(args: &BenchArgs) -> Result<BenchResults> {
    if args.runs < MIN_RUNS {
        bail!("--runs must be at least {MIN_RUNS} (got {})", args.runs);
    }
    if args.threads == Some(0) {
        bail!("--threads must be at least 1");
    }
    if !(args.timeout.is_finite() && args.timeout > 0.0) {
        bail!("--timeout must be a positive number of seconds");
    }
    let ffsck = tools::resolve_ffsck(args.ffsck.as_deref())?;
    let e2fsck = tools::resolve_tool(args.e2fsck.as_deref(), "e2fsck")?;
    std::fs::create_dir_all(&args.out)
        .with_context(|| format!("creating {}", args.out.display()))?;

    let mut warnings = Vec::new();
    let (image, built) = match &args.image {
        Some(image) => {
            if !image.is_file() {
                bail!("--image {} is not a file", image.display());
            }
            if crate::xfs::is_xfs(image) {
                bail!(
                    "{} is an XFS image: ffsck and e2fsck check ext2/3/4 only; time xfs_repair \
                     with `ffsck-lab gilbert --fs-type xfs`",
                    image.display()
                );
            }
            (image.clone(), None)
        }
        None => {
            let mke2fs = tools::resolve_tool(args.mke2fs.as_deref(), "mke2fs")?;
            let image = args.out.join(format!(
                "{}-{}{}.img",
                args.profile.name(),
                args.inodes,
                args.aged
                    .map_or(String::new(), |m| format!("-aged-{m:?}").to_lowercase())
            ));
            eprintln!(
                "building {} ({} profile, ~{} inodes)…",
                image.display(),
                args.profile.name(),
                args.inodes
            );
            let tree_parent = args.tree_dir.as_deref().unwrap_or(&args.out);
            let built = imagegen::build(
                args.profile,
                args.inodes,
                args.seed,
                tree_parent,
                &image,
                &mke2fs,
            )?;
            eprintln!(
                "built: {} files, {} dirs, {:.0} MiB image (generate {:.1} s, mke2fs {:.1} s)",
                built.files,
                built.dirs,
                built.image_bytes as f64 / (1 << 20) as f64,
                built.generate_s,
                built.mkfs_s
            );
            (image, Some(built))
        }
    };

    let aged = match (args.aged, &built) {
        (Some(method), Some(_)) => aged::age_image(args, method, &image, &mut warnings),
        (Some(_), None) => {
            warnings.push("--aged applies to built images only; --image was benched as is".into());
            Ok(None)
        }
        _ => Ok(None),
    };
    let result = aged.and_then(|aged| {
        measure_all(args, &ffsck, &e2fsck, &image, built).map(|mut r| {
            r.aged = aged;
            r.warnings.splice(0..0, warnings);
            r
        })
    });
    // A built image can be gigabytes: remove it even when measuring failed, unless asked not to.
    if args.image.is_none() && !args.keep {
        let _ = std::fs::remove_file(&image);
    }
    let mut results = result?;
    results
        .warnings
        .extend(figures::rss_floor_warning(&results));
    results.figures = figures::bench_figures(&results, &args.out).unwrap_or_else(|e| {
        results.warnings.push(format!("plots: {e:#}"));
        Vec::new()
    });

    let json_path = args.out.join("results.json");
    let json = serde_json::to_string_pretty(&results)?;
    std::fs::write(&json_path, json + "\n")
        .with_context(|| format!("writing {}", json_path.display()))?;
    let report_path = args.out.join("report.md");
    std::fs::write(&report_path, render_markdown(&results))
        .with_context(|| format!("writing {}", report_path.display()))?;
    Ok(results)
}

/// Runs checkers and records each run; owns the cold-cache bookkeeping.
struct Runner<'a> {
    out: &'a Path,
    /// The image benched: its file system is the one flushed before each cold run.
    image: &'a Path,
    timeout: Duration,
    cold: ColdCache,
    records: Vec<RunRecord>,
}

impl Runner<'_> {
    /// Runs `ffsck --estimate` in the cache state the next run will see; `None` if it fails.
    fn estimate(&mut self, ffsck: &Path, threads: Option<usize>, image: &Path) -> Option<f64> {
        // Not counted with the runs' drops (the report says how many runs were cold); if it
        // fails, the run's own drop fails too and is counted there.
        if self.cold.requested {
            let _ = self.drop_page_cache();
        }
        let log_path = self.out.join("estimate.log");
        let log = File::create(&log_path).ok()?;
        let mut cmd = std::process::Command::new(ffsck);
        cmd.args(ffsck_args_for("--estimate", threads, image))
            .stdin(std::process::Stdio::null())
            .stdout(log.try_clone().ok()?)
            .stderr(log);
        let outcome = child::run(&mut cmd, Some(self.timeout)).ok()?;
        if outcome.code() != Some(0) {
            return None;
        }
        let secs = parse_estimate(&std::fs::read_to_string(&log_path).ok()?)?;
        eprintln!("ffsck --estimate: {secs:.3} s");
        Some(secs)
    }

    fn measure(
        &mut self,
        checker: &str,
        program: &Path,
        args: &[OsString],
        threads: Option<usize>,
        warmup: bool,
        phase: &str,
    ) -> Result<()> {
        let caches_dropped = self.cold.requested.then(|| self.drop_caches());
        // Output goes to a file (the last run's is kept for inspection), never a pipe.
        let log_path = self.out.join(format!("{checker}.log"));
        let log =
            File::create(&log_path).with_context(|| format!("creating {}", log_path.display()))?;
        let (outcome, rss_shim) =
            child::run_measured(program, args, Some(&log), Some(self.timeout))
                .with_context(|| format!("running {checker}"))?;
        eprintln!(
            "{checker}{}{}: {:.3} s wall, {:.0} MiB peak RSS, exit {}",
            threads
                .map(|t| format!(" ({t} threads)"))
                .unwrap_or_default(),
            if warmup { " warm-up" } else { "" },
            outcome.wall_s,
            outcome.max_rss_kib as f64 / 1024.0,
            outcome.describe()
        );
        self.records.push(RunRecord {
            checker: checker.to_string(),
            threads,
            warmup,
            phase: phase.to_string(),
            caches_dropped,
            exit_code: outcome.code(),
            signal: outcome.signal(),
            timed_out: outcome.timed_out,
            wall_s: outcome.wall_s,
            user_s: outcome.user_s,
            sys_s: outcome.sys_s,
            max_rss_kib: outcome.max_rss_kib,
            rss_shim,
        });
        Ok(())
    }

    /// [`Self::drop_page_cache`]; failures are counted, not fatal, because the warm numbers
    /// are still worth having.
    /// `syncfs` on the image's file system and the output directory's (the logs), then
    /// `echo 3 > /proc/sys/vm/drop_caches` (crate::cache: no global sync).
    fn drop_page_cache(&self) -> std::io::Result<()> {
        crate::cache::drop_page_cache(&[self.image, self.out])
    }

    fn drop_caches(&mut self) -> bool {
        match self.drop_page_cache() {
            Ok(()) => {
                self.cold.drops_ok += 1;
                true
            }
            Err(e) => {
                self.cold.drops_failed += 1;
                self.cold.last_error = Some(e.to_string());
                false
            }
        }
    }
}

fn ffsck_args(threads: Option<usize>, image: &Path) -> Vec<OsString> {
    ffsck_args_for("-fn", threads, image)
}

/// `ffsck MODE [--threads N] IMAGE`.
fn ffsck_args_for(mode: &str, threads: Option<usize>, image: &Path) -> Vec<OsString> {
    let mut args: Vec<OsString> = vec![mode.into()];
    if let Some(t) = threads {
        args.push("--threads".into());
        args.push(t.to_string().into());
    }
    args.push(image.into());
    args
}

fn measure_all(
    args: &BenchArgs,
    ffsck: &Path,
    e2fsck: &Path,
    image: &Path,
    built: Option<BuiltImage>,
) -> Result<BenchResults> {
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    let mut runner = Runner {
        out: &args.out,
        image,
        timeout: Duration::from_secs_f64(args.timeout),
        cold: ColdCache {
            requested: args.cold,
            drops_ok: 0,
            drops_failed: 0,
            last_error: None,
        },
        records: Vec::new(),
    };
    let ff_args = ffsck_args(args.threads, image);
    let e2_args: Vec<OsString> = vec!["-fn".into(), image.into()];

    // Run 0 is the warm-up of each checker. Each timed ffsck run is predicted just before.
    let mut estimates = Vec::new();
    for warmup in (0..=args.runs).map(|i| i == 0) {
        let predicted = if warmup {
            None
        } else {
            runner.estimate(ffsck, args.threads, image)
        };
        runner.measure("ffsck", ffsck, &ff_args, args.threads, warmup, "compare")?;
        if let (Some(p), Some(run)) = (predicted, runner.records.last()) {
            estimates.push((p, run.wall_s));
        }
        runner.measure("e2fsck", e2fsck, &e2_args, None, warmup, "compare")?;
    }

    let ff_summary = summarize(
        "ffsck",
        &timed(&runner.records, "ffsck", args.threads, "compare"),
    );
    let e2_summary = summarize("e2fsck", &timed(&runner.records, "e2fsck", None, "compare"));
    let estimate = EstimateCheck::new(estimates, ff_summary.median_wall_s);

    let mut read_once = None;
    let mut ro_warning = None;
    if !args.no_read_once {
        let mut drop = || runner.drop_caches();
        match tools::resolve_tool(None, "e2image").and_then(|e2image| {
            crate::readonce::measure(image, &e2image, &args.out, args.runs, args.cold, &mut drop)
        }) {
            Ok(r) => {
                eprintln!(
                    "read once: {:.3} s median for {:.0} MiB of metadata",
                    r.median_wall_s,
                    r.metadata_bytes as f64 / (1 << 20) as f64
                );
                read_once = Some(r);
            }
            Err(e) => ro_warning = Some(format!("read-once floor skipped: {e:#}")),
        }
    }

    let (scaling, ceiling) = if args.scaling {
        measure_scaling(&mut runner, args, ffsck, image, e2_summary.median_wall_s)?
    } else {
        (Vec::new(), None)
    };

    let mut warnings: Vec<String> = ro_warning.into_iter().collect();
    let mut profile = None;
    if args.perf {
        match tools::resolve_tool(None, "perf").and_then(|perf| {
            crate::perf::record(
                &perf,
                ffsck,
                &ffsck_args(args.threads, image),
                &args.out,
                25,
            )
        }) {
            Ok(p) => profile = Some(p),
            Err(e) => warnings.push(format!("--perf: profile skipped: {e:#}")),
        }
    }
    if tools::is_debug_build(ffsck) {
        warnings.push(format!(
            "ffsck at {} looks like a debug build; build with `cargo build --release -p ffsck` \
             for meaningful timings",
            ffsck.display()
        ));
    }
    for s in [&ff_summary, &e2_summary] {
        if s.outcomes.iter().any(|o| o != "0") {
            warnings.push(format!(
                "{} did not always exit 0 on this image (outcomes: {}); see {}/{}.log",
                s.checker,
                s.outcomes.join(", "),
                args.out.display(),
                s.checker
            ));
        }
    }
    if args.cold && runner.cold.drops_failed > 0 {
        warnings.push(format!(
            "--cold: dropping the page cache failed {} of {} times ({}); those runs were warm",
            runner.cold.drops_failed,
            runner.cold.drops_failed + runner.cold.drops_ok,
            runner.cold.last_error.as_deref().unwrap_or("unknown error")
        ));
    }

    Ok(BenchResults {
        image: image.to_path_buf(),
        built,
        fs: imagegen::fs_info(image),
        ffsck_path: ffsck.to_path_buf(),
        ffsck_threads: args.threads,
        e2fsck_path: e2fsck.to_path_buf(),
        e2fsck_version: tools::version_line(e2fsck),
        machine: Machine {
            cpus,
            cpu_model: cpu_model(),
        },
        cold_cache: runner.cold,
        speedup: e2_summary.median_wall_s / ff_summary.median_wall_s,
        rss_ratio_ffsck_over_e2fsck: ff_summary.median_max_rss_kib / e2_summary.median_max_rss_kib,
        summary: vec![ff_summary, e2_summary],
        scaling,
        ceiling,
        aged: None,
        read_once,
        estimate,
        figures: Vec::new(),
        profile,
        warnings,
        runs: runner.records,
    })
}

/// The timed runs of one checker (and thread count) in one phase.
fn timed(
    records: &[RunRecord],
    checker: &str,
    threads: Option<usize>,
    phase: &str,
) -> Vec<RunRecord> {
    records
        .iter()
        .filter(|r| !r.warmup && r.checker == checker && r.phase == phase)
        .filter(|r| threads.is_none() || r.threads == threads)
        .cloned()
        .collect()
}

/// `--scaling`: ffsck at 1..=nproc threads, taking turns, and the machine's own ceiling.
fn measure_scaling(
    runner: &mut Runner<'_>,
    args: &BenchArgs,
    ffsck: &Path,
    image: &Path,
    e2_wall: f64,
) -> Result<(Vec<ScalingRow>, Option<crate::ceiling::Ceiling>)> {
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    let mut scaling = Vec::new();
    let mut ceiling = None;
    // Thread counts take turns, starting from a different one each run, so a slow spell
    // of the machine falls on all of them alike.
    for run in 0..args.runs {
        for k in 0..cpus {
            let threads = (k + run) % cpus + 1;
            runner.measure(
                "ffsck",
                ffsck,
                &ffsck_args(Some(threads), image),
                Some(threads),
                false,
                "scaling",
            )?;
        }
    }
    let at = |t: usize| {
        summarize(
            "ffsck",
            &timed(&runner.records, "ffsck", Some(t), "scaling"),
        )
    };
    let one = at(1);
    for threads in 1..=cpus {
        let s = at(threads);
        scaling.push(ScalingRow {
            threads,
            median_wall_s: s.median_wall_s,
            min_wall_s: s.min_wall_s,
            median_cpu_s: s.median_user_s + s.median_sys_s,
            speedup_vs_1_thread: one.median_wall_s / s.median_wall_s,
            speedup_vs_1_thread_min: one.min_wall_s / s.min_wall_s,
            speedup_vs_e2fsck: e2_wall / s.median_wall_s,
        });
    }
    // The machine's own ceiling means nothing on a cold cache (the copy loop would time
    // the disk).
    if !args.cold {
        match crate::ceiling::measure(image, cpus, args.runs) {
            Ok(c) => ceiling = Some(c),
            Err(e) => eprintln!("machine ceiling skipped: {e:#}"),
        }
    }
    Ok((scaling, ceiling))
}

fn summarize(checker: &str, runs: &[RunRecord]) -> CheckerSummary {
    let pick = |f: fn(&RunRecord) -> f64| -> Vec<f64> { runs.iter().map(f).collect() };
    let walls = pick(|r| r.wall_s);
    let mut outcomes: Vec<String> = runs
        .iter()
        .map(|r| match (r.timed_out, r.exit_code, r.signal) {
            (true, _, _) => "timeout".to_string(),
            (_, Some(c), _) => c.to_string(),
            (_, None, Some(s)) => format!("signal {s}"),
            _ => "?".to_string(),
        })
        .collect();
    outcomes.sort();
    outcomes.dedup();
    CheckerSummary {
        checker: checker.to_string(),
        runs: runs.len(),
        median_wall_s: median(&walls).unwrap_or(f64::NAN),
        min_wall_s: walls.iter().copied().fold(f64::INFINITY, f64::min),
        max_wall_s: walls.iter().copied().fold(f64::NEG_INFINITY, f64::max),
        median_user_s: median(&pick(|r| r.user_s)).unwrap_or(f64::NAN),
        median_sys_s: median(&pick(|r| r.sys_s)).unwrap_or(f64::NAN),
        median_max_rss_kib: median(&pick(|r| r.max_rss_kib as f64)).unwrap_or(f64::NAN),
        outcomes,
    }
}

fn cpu_model() -> Option<String> {
    let text = std::fs::read_to_string("/proc/cpuinfo").ok()?;
    text.lines()
        .find(|l| l.starts_with("model name"))
        .and_then(|l| l.split_once(':'))
        .map(|(_, v)| v.trim().to_string())
}

pub(super) fn mib(kib: f64) -> String {
    format!("{:.1}", kib / 1024.0)
}

#[cfg(test)]
mod tests {
    use super::{parse_estimate, EstimateCheck};

    #[test]
    fn reads_the_estimate_line() {
        let report = "/img: estimated time of ffsck -fn: 0.245 s; metadata to read: 2.18 GiB \
                      (2342966272 bytes)\n  pass 0 (open): 0.000 s\n";
        assert_eq!(parse_estimate(report), Some(0.245));
        assert_eq!(parse_estimate("ffsck: cannot estimate /img: bad\n"), None);
        assert_eq!(parse_estimate(""), None);
    }

    #[test]
    fn estimate_ratios_pair_each_prediction_with_its_run() {
        let e = EstimateCheck::new(vec![(0.3, 0.2), (0.2, 0.2), (0.25, 0.25)], 0.2).unwrap();
        assert_eq!(e.median_predicted_s, 0.25);
        assert!((e.ratio - 1.25).abs() < 1e-9);
        assert!((e.worst_low - 1.0).abs() < 1e-9);
        assert!((e.worst_high - 1.5).abs() < 1e-9);
        assert!(EstimateCheck::new(Vec::new(), 0.2).is_none());
    }
}
