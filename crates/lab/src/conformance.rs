//! `ffsck-lab conformance`: runs ffsck and the installed e2fsck (live, not from a recorded
//! oracle) with `-fn` on every corpus image and measures how far ffsck's findings are from
//! e2fsck's: verdict agreement, exact exit codes, and Jaccard similarity of problem-code sets.
//!
//! It also guards the properties that must hold whatever the checker's maturity: no crash, no
//! hang, and `-n` never changes a byte of the image.

use std::collections::{BTreeSet, HashMap};
use std::fs::File;
use std::hash::Hasher;
use std::io::{BufWriter, Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::Duration;

use anyhow::{bail, Context, Result};
use serde::Serialize;

use crate::child;
use crate::markdown;
use crate::metrics::{self, e2fsck_verdict, ffsck_verdict, verdicts_agree};
use crate::problem_log::{self, format_code};
use crate::tools;

/// Rust's exit status for a panic that unwound out of `main`.
const RUST_PANIC_EXIT: i32 = 101;
/// e2fsck catches SIGSEGV/SIGBUS itself, prints this with a backtrace, and exits 8.
const E2FSCK_SIGNAL_MARKER: &str = "Signal (";
/// How much of a checker's stderr to keep: enough for a panic message and backtrace head,
/// bounded because a looping checker can write megabytes per second.
const STDERR_TAIL_BYTES: u64 = 64 * 1024;

#[derive(clap::Args, Debug, Clone)]
pub struct ConformanceArgs {
    /// Corpus directory: one folder per test with image.gz, name, expect.1/2, plus ORACLE.tsv.
    #[arg(long)]
    pub corpus: PathBuf,
    /// ffsck binary [default: `ffsck` next to ffsck-lab, then PATH].
    #[arg(long)]
    pub ffsck: Option<PathBuf>,
    /// e2fsck binary [default: from PATH or /sbin].
    #[arg(long)]
    pub e2fsck: Option<PathBuf>,
    /// Per-run wall-clock limit in seconds (e2fsck -fn loops forever on two corpus images).
    #[arg(long, default_value_t = 10.0)]
    pub timeout: f64,
    /// Images checked in parallel [default: number of CPUs].
    #[arg(long)]
    pub jobs: Option<usize>,
    /// Write every per-image row and the summary as JSON to this file.
    #[arg(long)]
    pub json: Option<PathBuf>,
    /// Only run tests whose folder name contains this substring.
    #[arg(long)]
    pub only: Option<String>,
    /// Only run the first N tests (in name order, after --only).
    #[arg(long)]
    pub limit: Option<usize>,
    /// Where to unpack images [default: the system temp dir].
    #[arg(long)]
    pub workdir: Option<PathBuf>,
    /// No per-image progress lines on stderr.
    #[arg(long)]
    pub quiet: bool,
    /// Compare output text instead: ffsck -fy's against each test's expect.1 (see messages.rs).
    #[arg(long)]
    pub messages: bool,
}

/// One checker's run on one image.
#[derive(Debug, Clone, Serialize)]
pub struct CheckerRun {
    /// Exit code; `None` when killed (by a signal or our timeout).
    pub exit_code: Option<i32>,
    pub signal: Option<i32>,
    pub timed_out: bool,
    pub wall_s: f64,
    pub max_rss_kib: u64,
    /// Whether the checker wrote a problem log at all.
    pub log_found: bool,
    /// Number of `<problem>` elements, with repeats.
    pub problems: usize,
    pub malformed_log_entries: usize,
    /// Distinct problem codes, sorted.
    pub codes: Vec<String>,
    /// Whether the image's bytes differ after the run (must never happen with -n).
    pub modified_image: bool,
    /// Killed by a signal other than our timeout, or the checker's own crash report: Rust's
    /// panic exit code or "panicked" for ffsck, the "Signal (N)" backtrace for e2fsck.
    pub crashed: bool,
    /// e2fsck only: the logged run crashed, so `codes` stop at the crash and `exit_code` comes
    /// from a rerun without the problem log. (e2fsck 1.47.0 segfaults while logging problem
    /// 0x050018 on f_uninit_blk_used_not_set and f_uninit_set_inode_not_set.)
    pub log_incomplete: bool,
    /// End of stderr, kept only for runs that crashed.
    pub stderr_tail: Option<String>,
}

/// The comparison for one corpus image.
#[derive(Debug, Clone, Serialize)]
pub struct ImageRow {
    pub name: String,
    /// The test's one-line description (`name` file).
    pub description: String,
    pub bytes: u64,
    /// e2fsck 1.47.0's recorded `-fn` exit code from ORACLE.tsv (124 = timeout).
    pub oracle_fn: Option<i32>,
    pub e2fsck: CheckerRun,
    pub ffsck: CheckerRun,
    pub verdict_agree: bool,
    pub exact_exit_equal: bool,
    pub jaccard: f64,
    pub only_e2fsck: Vec<String>,
    pub only_ffsck: Vec<String>,
}

impl ImageRow {
    /// The worst problem on this image, or `None` when ffsck matched e2fsck exactly.
    /// Ordered so sorting by it lists the most serious disagreements first.
    pub fn issue(&self) -> Option<Issue> {
        if self.ffsck.crashed {
            Some(Issue::Crash)
        } else if self.ffsck.timed_out {
            Some(Issue::Timeout)
        } else if self.ffsck.modified_image {
            Some(Issue::Modified)
        } else if !self.verdict_agree {
            Some(Issue::Verdict)
        } else if !self.exact_exit_equal {
            Some(Issue::ExitCode)
        } else if self.jaccard < 1.0 {
            Some(Issue::Codes)
        } else {
            None
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Issue {
    Crash,
    Timeout,
    Modified,
    Verdict,
    ExitCode,
    Codes,
}

impl Issue {
    fn label(self) -> &'static str {
        match self {
            Issue::Crash => "CRASH",
            Issue::Timeout => "ffsck timeout",
            Issue::Modified => "MODIFIED IMAGE",
            Issue::Verdict => "verdict",
            Issue::ExitCode => "exit code",
            Issue::Codes => "codes",
        }
    }
}

/// A test that could not be run because of a harness-side problem (unreadable image…).
#[derive(Debug, Clone, Serialize)]
pub struct HarnessError {
    pub name: String,
    pub error: String,
}

#[derive(Debug, Clone, Default, Serialize)]
pub struct Summary {
    pub images_run: usize,
    /// Test folders without image.gz.
    pub images_skipped: usize,
    pub harness_errors: usize,
    pub verdict_agree: usize,
    pub verdict_agree_pct: f64,
    pub mean_jaccard: f64,
    pub exact_exit_equal: usize,
    pub exact_exit_equal_pct: f64,
    pub ffsck_crashes: usize,
    pub ffsck_timeouts: usize,
    pub e2fsck_timeouts: usize,
    pub ffsck_modified: usize,
    /// Sanity check on the reference itself.
    pub e2fsck_modified: usize,
    /// e2fsck runs that crashed while writing the problem log (codes truncated).
    pub e2fsck_log_crashes: usize,
    /// Live e2fsck exit code differs from ORACLE.tsv (environment drift).
    pub e2fsck_oracle_mismatches: usize,
}

#[derive(Debug, Clone, Serialize)]
pub struct Report {
    pub summary: Summary,
    pub ffsck: PathBuf,
    pub e2fsck: PathBuf,
    pub e2fsck_version: String,
    pub timeout_s: f64,
    pub images: Vec<ImageRow>,
    pub skipped: Vec<String>,
    pub errors: Vec<HarnessError>,
}

/// Everything the per-image workers share.
struct Shared {
    ffsck: PathBuf,
    e2fsck: PathBuf,
    timeout: Duration,
    workdir: PathBuf,
    oracle: HashMap<String, i32>,
}

/// CLI entry: run, print the Markdown report, optionally write JSON.
pub fn main(args: &ConformanceArgs) -> Result<()> {
    if args.messages {
        return crate::messages::main(args);
    }
    let report = run(args)?;
    print!("{}", render_markdown(&report));
    if let Some(path) = &args.json {
        write_json(&report, path)?;
        eprintln!("wrote {}", path.display());
    }
    Ok(())
}

pub fn write_json(report: &Report, path: &Path) -> Result<()> {
    let file = File::create(path).with_context(|| format!("creating {}", path.display()))?;
    let mut out = BufWriter::new(file);
    serde_json::to_writer_pretty(&mut out, report)?;
    out.write_all(b"\n")?;
    out.flush()?;
    Ok(())
}

/// Runs the whole comparison and returns the report; prints only progress (to stderr).
pub fn run(args: &ConformanceArgs) -> Result<Report> {
    if !(args.timeout.is_finite() && args.timeout > 0.0) {
        bail!("--timeout must be a positive number of seconds");
    }
    let ffsck = tools::resolve_ffsck(args.ffsck.as_deref())?;
    let e2fsck = tools::resolve_tool(args.e2fsck.as_deref(), "e2fsck")?;
    let tests = list_tests(&args.corpus, args.only.as_deref(), args.limit)?;
    let workdir = args.workdir.clone().unwrap_or_else(std::env::temp_dir);
    let ctx = Shared {
        ffsck: ffsck.clone(),
        e2fsck: e2fsck.clone(),
        timeout: Duration::from_secs_f64(args.timeout),
        workdir,
        oracle: read_oracle(&args.corpus.join("ORACLE.tsv"))?,
    };

    let (runnable, skipped): (Vec<PathBuf>, Vec<PathBuf>) = tests
        .into_iter()
        .partition(|dir| dir.join("image.gz").is_file());
    let skipped: Vec<String> = skipped.iter().map(|d| test_name(d)).collect();

    let jobs = args
        .jobs
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()))
        .clamp(1, runnable.len().max(1));
    let next = AtomicUsize::new(0);
    let finished = AtomicUsize::new(0);
    let results: Mutex<Vec<(usize, Result<ImageRow>)>> = Mutex::new(Vec::new());

    // Simple work queue: each worker takes the next index until the list is exhausted.
    std::thread::scope(|scope| {
        for _ in 0..jobs {
            scope.spawn(|| loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                let Some(dir) = runnable.get(i) else { break };
                let result = check_image(&ctx, dir);
                let done = finished.fetch_add(1, Ordering::Relaxed) + 1;
                if !args.quiet {
                    eprintln!(
                        "[{done}/{}] {}",
                        runnable.len(),
                        progress_line(dir, &result)
                    );
                }
                results
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .push((i, result));
            });
        }
    });

    let mut results = results.into_inner().unwrap_or_else(|e| e.into_inner());
    // Deterministic output whatever the completion order.
    results.sort_by_key(|(i, _)| *i);
    let mut images = Vec::new();
    let mut errors = Vec::new();
    for (i, result) in results {
        match result {
            Ok(row) => images.push(row),
            Err(e) => errors.push(HarnessError {
                name: test_name(&runnable[i]),
                error: format!("{e:#}"),
            }),
        }
    }

    Ok(Report {
        summary: summarize(&images, skipped.len(), errors.len()),
        e2fsck_version: tools::version_line(&e2fsck),
        ffsck,
        e2fsck,
        timeout_s: args.timeout,
        images,
        skipped,
        errors,
    })
}

pub(crate) fn test_name(dir: &Path) -> String {
    dir.file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| dir.display().to_string())
}

fn progress_line(dir: &Path, result: &Result<ImageRow>) -> String {
    match result {
        Ok(row) => format!(
            "{}: e2fsck {} ffsck {} J={:.2}{}",
            row.name,
            rc_text(&row.e2fsck),
            rc_text(&row.ffsck),
            row.jaccard,
            row.issue()
                .map(|i| format!(" [{}]", i.label()))
                .unwrap_or_default()
        ),
        Err(e) => format!("{}: harness error: {e:#}", test_name(dir)),
    }
}

/// The corpus's test folders, sorted by name, filtered by `only` and cut at `limit`.
pub(crate) fn list_tests(
    corpus: &Path,
    only: Option<&str>,
    limit: Option<usize>,
) -> Result<Vec<PathBuf>> {
    let entries = std::fs::read_dir(corpus)
        .with_context(|| format!("reading corpus directory {}", corpus.display()))?;
    let mut dirs = Vec::new();
    for entry in entries {
        let path = entry?.path();
        if !path.is_dir() {
            continue;
        }
        if only.is_some_and(|s| !test_name(&path).contains(s)) {
            continue;
        }
        dirs.push(path);
    }
    dirs.sort();
    if let Some(limit) = limit {
        dirs.truncate(limit);
    }
    if dirs.is_empty() {
        bail!(
            "no test folders in {}{}",
            corpus.display(),
            only.map(|s| format!(" matching {s:?}")).unwrap_or_default()
        );
    }
    Ok(dirs)
}

/// Reads the `test` → `fn` column of ORACLE.tsv; a missing file just means no oracle check.
fn read_oracle(path: &Path) -> Result<HashMap<String, i32>> {
    let text = match std::fs::read_to_string(path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(HashMap::new()),
        Err(e) => return Err(e).with_context(|| format!("reading {}", path.display())),
    };
    let mut lines = text.lines();
    let header: Vec<&str> = lines.next().unwrap_or("").split('\t').collect();
    let col = |name: &str| header.iter().position(|h| *h == name);
    let (Some(test_col), Some(fn_col)) = (col("test"), col("fn")) else {
        bail!("{} lacks the `test` and `fn` columns", path.display());
    };
    Ok(lines
        .filter_map(|line| {
            let fields: Vec<&str> = line.split('\t').collect();
            let code = fields.get(fn_col)?.trim().parse().ok()?;
            Some((fields.get(test_col)?.to_string(), code))
        })
        .collect())
}

/// Unpacks, runs both checkers on separate copies, and compares.
fn check_image(ctx: &Shared, dir: &Path) -> Result<ImageRow> {
    let name = test_name(dir);
    let description = std::fs::read_to_string(dir.join("name"))
        .map(|s| s.trim().to_string())
        .unwrap_or_default();
    let tmp = tempfile::Builder::new()
        .prefix(&format!("ffsck-lab-{name}-"))
        .tempdir_in(&ctx.workdir)
        .with_context(|| format!("creating a temp dir in {}", ctx.workdir.display()))?;

    let e2_image = tmp.path().join("e2fsck.img");
    let ff_image = tmp.path().join("ffsck.img");
    let pristine = gunzip_to(&dir.join("image.gz"), &e2_image)?;
    std::fs::copy(&e2_image, &ff_image).context("copying the unpacked image")?;

    // e2fsck writes its XML problem log only when configured to through e2fsck.conf.
    let e2_log = tmp.path().join("e2fsck.log.xml");
    let conf = tmp.path().join("e2fsck.conf");
    std::fs::write(
        &conf,
        format!("[options]\n problem_log_filename = {}\n", e2_log.display()),
    )?;
    let mut e2_cmd = Command::new(&ctx.e2fsck);
    e2_cmd.arg("-fn").arg(&e2_image).env("E2FSCK_CONFIG", &conf);
    let (mut e2fsck, e2_set) = run_checker(
        ctx,
        Checker::E2fsck,
        e2_cmd,
        tmp.path(),
        &e2_image,
        &e2_log,
        pristine,
    )?;
    if e2fsck.crashed {
        // The verdict must not depend on e2fsck's logging bug: take the exit code of a plain
        // run and keep the codes logged before the crash.
        let mut plain = Command::new(&ctx.e2fsck);
        plain
            .arg("-fn")
            .arg(&e2_image)
            .env("E2FSCK_CONFIG", "/dev/null")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        let outcome = child::run(&mut plain, Some(ctx.timeout)).context("rerunning e2fsck")?;
        e2fsck.exit_code = outcome.code();
        e2fsck.signal = outcome.signal();
        e2fsck.timed_out = outcome.timed_out;
        e2fsck.log_incomplete = true;
    }

    let ff_log = tmp.path().join("ffsck.log.xml");
    let mut ff_cmd = Command::new(&ctx.ffsck);
    ff_cmd
        .arg("-fn")
        .arg("--problem-log")
        .arg(&ff_log)
        .arg(&ff_image);
    let (ffsck, ff_set) = run_checker(
        ctx,
        Checker::Ffsck,
        ff_cmd,
        tmp.path(),
        &ff_image,
        &ff_log,
        pristine,
    )?;

    let verdict_agree = verdicts_agree(
        e2fsck_verdict(e2fsck.exit_code),
        ffsck_verdict(ffsck.exit_code, ffsck.crashed, ffsck.timed_out),
    );
    Ok(ImageRow {
        oracle_fn: ctx.oracle.get(&name).copied(),
        description,
        bytes: pristine.len,
        exact_exit_equal: !ffsck.crashed
            && e2fsck.exit_code.is_some()
            && e2fsck.exit_code == ffsck.exit_code,
        verdict_agree,
        jaccard: metrics::jaccard(&e2_set, &ff_set),
        only_e2fsck: e2_set
            .difference(&ff_set)
            .map(|&c| format_code(c))
            .collect(),
        only_ffsck: ff_set
            .difference(&e2_set)
            .map(|&c| format_code(c))
            .collect(),
        e2fsck,
        ffsck,
        name,
    })
}

#[derive(Debug, Clone, Copy)]
enum Checker {
    E2fsck,
    Ffsck,
}

/// Runs one checker and gathers its outcome, problem codes (also returned as a set for the
/// comparison), image integrity and, if it crashed, the end of its stderr.
fn run_checker(
    ctx: &Shared,
    checker: Checker,
    mut cmd: Command,
    tmp: &Path,
    image: &Path,
    log: &Path,
    pristine: Digest,
) -> Result<(CheckerRun, BTreeSet<u32>)> {
    let label = match checker {
        Checker::E2fsck => "e2fsck",
        Checker::Ffsck => "ffsck",
    };
    let stdout = File::create(tmp.join(format!("{label}.stdout")))?;
    let stderr_path = tmp.join(format!("{label}.stderr"));
    let stderr = File::create(&stderr_path)?;
    cmd.stdin(Stdio::null())
        .stdout(Stdio::from(stdout))
        .stderr(Stdio::from(stderr));
    let outcome =
        child::run(&mut cmd, Some(ctx.timeout)).with_context(|| format!("running {label}"))?;

    let parsed = problem_log::read(log)?;
    let modified = digest_file(image)? != pristine;
    let stderr_tail = read_tail(&stderr_path, STDERR_TAIL_BYTES)?;
    let crashed = outcome.signal().is_some()
        || match checker {
            Checker::Ffsck => {
                outcome.code() == Some(RUST_PANIC_EXIT) || stderr_tail.contains("panicked")
            }
            Checker::E2fsck => stderr_tail.contains(E2FSCK_SIGNAL_MARKER),
        };
    let codes = parsed.as_ref().map(|p| p.code_set()).unwrap_or_default();
    let run = CheckerRun {
        exit_code: outcome.code(),
        signal: outcome.signal(),
        timed_out: outcome.timed_out,
        wall_s: outcome.wall_s,
        max_rss_kib: outcome.max_rss_kib,
        log_found: parsed.is_some(),
        problems: parsed.as_ref().map_or(0, |p| p.codes.len()),
        malformed_log_entries: parsed.as_ref().map_or(0, |p| p.malformed),
        codes: codes.iter().copied().map(format_code).collect(),
        modified_image: modified,
        crashed,
        log_incomplete: false,
        stderr_tail: crashed.then_some(stderr_tail),
    };
    Ok((run, codes))
}

/// Length plus a 64-bit hash of the content: enough to notice any write a checker makes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Digest {
    len: u64,
    hash: u64,
}

/// Feeds `reader` into a hasher (and optionally a writer), returning the digest.
fn digest_stream(
    mut reader: impl Read,
    mut sink: Option<&mut dyn Write>,
) -> std::io::Result<Digest> {
    // SipHash with fixed keys: deterministic within and across runs, no extra crate.
    #[allow(deprecated)]
    let mut hasher = std::hash::SipHasher::new();
    let mut buf = vec![0u8; 1 << 20];
    let mut len = 0u64;
    loop {
        let n = match reader.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        hasher.write(&buf[..n]);
        if let Some(sink) = sink.as_mut() {
            sink.write_all(&buf[..n])?;
        }
        len += n as u64;
    }
    Ok(Digest {
        len,
        hash: hasher.finish(),
    })
}

/// Decompresses `gz` into `dest`, returning the digest of the unpacked bytes.
pub(crate) fn gunzip_to(gz: &Path, dest: &Path) -> Result<Digest> {
    let input = File::open(gz).with_context(|| format!("opening {}", gz.display()))?;
    let decoder = flate2::read::MultiGzDecoder::new(std::io::BufReader::new(input));
    let mut out = BufWriter::new(File::create(dest)?);
    let digest = digest_stream(decoder, Some(&mut out))
        .with_context(|| format!("decompressing {}", gz.display()))?;
    out.flush()?;
    Ok(digest)
}

fn digest_file(path: &Path) -> Result<Digest> {
    let file = File::open(path).with_context(|| format!("re-reading {}", path.display()))?;
    Ok(digest_stream(file, None)?)
}

/// The last `max` bytes of a file, lossily decoded.
fn read_tail(path: &Path, max: u64) -> Result<String> {
    let mut file = File::open(path)?;
    let len = file.metadata()?.len();
    file.seek(SeekFrom::Start(len.saturating_sub(max)))?;
    let mut bytes = Vec::new();
    file.read_to_end(&mut bytes)?;
    Ok(String::from_utf8_lossy(&bytes).into_owned())
}

/// Aggregates the per-image rows.
pub fn summarize(images: &[ImageRow], skipped: usize, harness_errors: usize) -> Summary {
    let n = images.len();
    let count = |f: &dyn Fn(&ImageRow) -> bool| images.iter().filter(|r| f(r)).count();
    let pct = |k: usize| {
        if n == 0 {
            0.0
        } else {
            100.0 * k as f64 / n as f64
        }
    };
    let verdict_agree = count(&|r| r.verdict_agree);
    let exact_exit_equal = count(&|r| r.exact_exit_equal);
    Summary {
        images_run: n,
        images_skipped: skipped,
        harness_errors,
        verdict_agree,
        verdict_agree_pct: pct(verdict_agree),
        mean_jaccard: if n == 0 {
            0.0
        } else {
            images.iter().map(|r| r.jaccard).sum::<f64>() / n as f64
        },
        exact_exit_equal,
        exact_exit_equal_pct: pct(exact_exit_equal),
        ffsck_crashes: count(&|r| r.ffsck.crashed),
        ffsck_timeouts: count(&|r| r.ffsck.timed_out),
        e2fsck_timeouts: count(&|r| r.e2fsck.timed_out),
        ffsck_modified: count(&|r| r.ffsck.modified_image),
        e2fsck_modified: count(&|r| r.e2fsck.modified_image),
        e2fsck_log_crashes: count(&|r| r.e2fsck.log_incomplete),
        e2fsck_oracle_mismatches: count(&|r| {
            // The oracle records a timeout as 124.
            let live = if r.e2fsck.timed_out {
                Some(124)
            } else {
                r.e2fsck.exit_code
            };
            r.oracle_fn.is_some_and(|o| Some(o) != live)
        }),
    }
}

fn rc_text(run: &CheckerRun) -> String {
    if run.timed_out {
        "timeout".to_string()
    } else if let Some(sig) = run.signal {
        format!("signal {sig}")
    } else {
        run.exit_code.map_or("?".to_string(), |c| c.to_string())
    }
}

/// At most `max` codes, so one pathological image cannot swamp the table (JSON has them all).
fn code_list(codes: &[String], max: usize) -> String {
    if codes.is_empty() {
        return "-".to_string();
    }
    let mut text = codes
        .iter()
        .take(max)
        .cloned()
        .collect::<Vec<_>>()
        .join(" ");
    if codes.len() > max {
        text.push_str(&format!(" …(+{})", codes.len() - max));
    }
    text
}

/// The summary table, then the disagreements worst first.
pub fn render_markdown(report: &Report) -> String {
    let s = &report.summary;
    let mut out = String::new();
    out.push_str("## Conformance: ffsck -fn vs e2fsck -fn\n\n");
    out.push_str(&format!(
        "ffsck: `{}`  \ne2fsck: `{}` ({})  \ntimeout: {} s per run\n\n",
        report.ffsck.display(),
        report.e2fsck.display(),
        report.e2fsck_version,
        report.timeout_s
    ));
    let of_run = |k: usize, pct: f64| format!("{k} / {} ({pct:.1}%)", s.images_run);
    let rows: Vec<Vec<String>> = [
        ("images run", s.images_run.to_string()),
        ("images skipped (no image.gz)", s.images_skipped.to_string()),
        ("harness errors", s.harness_errors.to_string()),
        (
            "verdict agreement (rc==0 iff e2fsck rc==0)",
            of_run(s.verdict_agree, s.verdict_agree_pct),
        ),
        (
            "mean problem-code Jaccard",
            format!("{:.3}", s.mean_jaccard),
        ),
        (
            "exact exit-code equality",
            of_run(s.exact_exit_equal, s.exact_exit_equal_pct),
        ),
        ("ffsck crashes", s.ffsck_crashes.to_string()),
        ("ffsck timeouts", s.ffsck_timeouts.to_string()),
        ("e2fsck timeouts", s.e2fsck_timeouts.to_string()),
        ("images modified by ffsck -n", s.ffsck_modified.to_string()),
        (
            "images modified by e2fsck -n",
            s.e2fsck_modified.to_string(),
        ),
        (
            "e2fsck crashed writing its problem log (rc from a rerun)",
            s.e2fsck_log_crashes.to_string(),
        ),
        (
            "live e2fsck rc differs from ORACLE.tsv",
            s.e2fsck_oracle_mismatches.to_string(),
        ),
    ]
    .into_iter()
    .map(|(k, v)| vec![k.to_string(), v])
    .collect();
    out.push_str(&markdown::table(
        &["metric", "value"],
        &[false, true],
        &rows,
    ));

    let mut worst: Vec<(Issue, &ImageRow)> = report
        .images
        .iter()
        .filter_map(|r| r.issue().map(|i| (i, r)))
        .collect();
    worst.sort_by(|(ia, a), (ib, b)| {
        ia.cmp(ib)
            .then(a.jaccard.total_cmp(&b.jaccard))
            .then(a.name.cmp(&b.name))
    });
    out.push_str(&format!("\n### Disagreements ({})\n\n", worst.len()));
    if worst.is_empty() {
        out.push_str("none\n");
    } else {
        let rows: Vec<Vec<String>> = worst
            .iter()
            .map(|(issue, r)| {
                vec![
                    r.name.clone(),
                    issue.label().to_string(),
                    rc_text(&r.e2fsck),
                    rc_text(&r.ffsck),
                    format!("{:.2}", r.jaccard),
                    code_list(&r.only_e2fsck, 8),
                    code_list(&r.only_ffsck, 8),
                ]
            })
            .collect();
        out.push_str(&markdown::table(
            &[
                "image",
                "issue",
                "e2fsck rc",
                "ffsck rc",
                "jaccard",
                "only in e2fsck",
                "only in ffsck",
            ],
            &[false, false, true, true, true, false, false],
            &rows,
        ));
    }
    if !report.errors.is_empty() {
        out.push_str("\n### Harness errors\n\n");
        for e in &report.errors {
            out.push_str(&format!("- {}: {}\n", e.name, e.error));
        }
    }
    if !report.skipped.is_empty() {
        out.push_str(&format!(
            "\nSkipped (no image.gz): {}\n",
            report.skipped.join(", ")
        ));
    }
    out
}
