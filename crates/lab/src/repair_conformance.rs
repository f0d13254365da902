//! `ffsck-lab conformance --repair`: for every corpus image, repair one copy with `ffsck -fy`
//! and another with `e2fsck -fy`, then check both with `e2fsck -fn`. It reports how many images
//! each tool leaves clean and whether ffsck's end state matches e2fsck's: the same `e2fsck -fn`
//! result and, where debugfs is installed, the same `ls -l` listing of the root directory.
//!
//! This replaces the shell script that counted ffsck's repair rate: same measure (clean after
//! one `-fy` run, judged by e2fsck), plus the e2fsck reference and the end-state comparison.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::Duration;

use anyhow::{bail, Context, Result};
use serde::Serialize;

use crate::child;
use crate::conformance::{self, ConformanceArgs};
use crate::markdown;
use crate::tools;

/// Most bytes of a `debugfs ls -l` listing compared: a hostile image can make it huge.
const MAX_LISTING_BYTES: usize = 1 << 20;

/// One tool's repair of one image and the e2fsck -fn check after it.
#[derive(Debug, Clone, Serialize)]
pub struct RepairRun {
    /// `-fy` exit code (`None` when killed).
    pub fy_exit: Option<i32>,
    pub fy_timed_out: bool,
    /// Killed by a signal other than our timeout, or a Rust panic.
    pub fy_crashed: bool,
    pub fy_wall_s: f64,
    /// `e2fsck -fn` exit code on the repaired copy.
    pub after_exit: Option<i32>,
    /// `e2fsck -fn` exited 0.
    pub clean: bool,
}

#[derive(Debug, Clone, Serialize)]
pub struct RepairRow {
    pub name: String,
    pub ffsck: RepairRun,
    pub e2fsck: RepairRun,
    /// Both copies give the same `e2fsck -fn` exit code.
    pub same_check_result: bool,
    /// Both root listings (`debugfs -R 'ls -l /'`) are equal; `None` without debugfs or when
    /// either listing failed.
    pub same_root_listing: Option<bool>,
}

impl RepairRow {
    /// ffsck's end state matches e2fsck's: both clean, with equal root listings when known.
    pub fn end_state_matches(&self) -> bool {
        self.ffsck.clean && self.e2fsck.clean && self.same_root_listing != Some(false)
    }
}

#[derive(Debug, Clone, Serialize)]
pub struct RepairSummary {
    pub images: usize,
    pub ffsck_clean: usize,
    pub e2fsck_clean: usize,
    pub both_clean: usize,
    /// e2fsck leaves the image clean but ffsck does not: ffsck's repair to-do list.
    pub only_e2fsck_clean: usize,
    pub only_ffsck_clean: usize,
    pub same_check_result: usize,
    /// Both clean and (where compared) the same root listing.
    pub end_state_matches: usize,
    pub root_listings_compared: usize,
    pub root_listings_equal: usize,
    pub ffsck_crashes: usize,
    pub ffsck_timeouts: usize,
}

#[derive(Debug, Clone, Serialize)]
pub struct RepairReport {
    pub summary: RepairSummary,
    pub ffsck: PathBuf,
    pub e2fsck: PathBuf,
    pub e2fsck_version: String,
    pub debugfs: Option<PathBuf>,
    pub timeout_s: f64,
    pub images: Vec<RepairRow>,
    pub skipped: Vec<String>,
    pub errors: Vec<conformance::HarnessError>,
}

struct Ctx {
    ffsck: PathBuf,
    e2fsck: PathBuf,
    debugfs: Option<PathBuf>,
    timeout: Duration,
    workdir: PathBuf,
}

/// CLI entry: run, print the Markdown report, optionally write JSON.
pub fn main(args: &ConformanceArgs) -> Result<()> {
    let report = run(args)?;
    print!("{}", render_markdown(&report));
    if let Some(path) = &args.json {
        let json = serde_json::to_string_pretty(&report)? + "\n";
        std::fs::write(path, json).with_context(|| format!("writing {}", path.display()))?;
        eprintln!("wrote {}", path.display());
    }
    Ok(())
}

/// Runs the repair comparison over the corpus.
pub fn run(args: &ConformanceArgs) -> Result<RepairReport> {
    if !(args.timeout.is_finite() && args.timeout > 0.0) {
        bail!("--timeout must be a positive number of seconds");
    }
    let ctx = Ctx {
        ffsck: tools::resolve_ffsck(args.ffsck.as_deref())?,
        e2fsck: tools::resolve_tool(args.e2fsck.as_deref(), "e2fsck")?,
        debugfs: tools::find_in_path("debugfs"),
        timeout: Duration::from_secs_f64(args.timeout),
        workdir: args.workdir.clone().unwrap_or_else(std::env::temp_dir),
    };
    let tests = conformance::list_tests(&args.corpus, args.only.as_deref(), args.limit)?;
    let (runnable, skipped): (Vec<PathBuf>, Vec<PathBuf>) = tests
        .into_iter()
        .partition(|dir| dir.join("image.gz").is_file());
    let jobs = args
        .jobs
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()))
        .clamp(1, runnable.len().max(1));
    let next = AtomicUsize::new(0);
    let finished = AtomicUsize::new(0);
    let results: Mutex<Vec<(usize, Result<RepairRow>)>> = Mutex::new(Vec::new());
    std::thread::scope(|scope| {
        for _ in 0..jobs {
            scope.spawn(|| loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                let Some(dir) = runnable.get(i) else { break };
                let result = repair_image(&ctx, dir);
                let done = finished.fetch_add(1, Ordering::Relaxed) + 1;
                if !args.quiet {
                    let line = match &result {
                        Ok(r) => format!(
                            "{}: ffsck -fy {} → e2fsck -fn {}; e2fsck -fy {} → {}",
                            r.name,
                            code(r.ffsck.fy_exit, r.ffsck.fy_timed_out),
                            code(r.ffsck.after_exit, false),
                            code(r.e2fsck.fy_exit, r.e2fsck.fy_timed_out),
                            code(r.e2fsck.after_exit, false)
                        ),
                        Err(e) => format!("{}: harness error: {e:#}", conformance::test_name(dir)),
                    };
                    eprintln!("[{done}/{}] {line}", runnable.len());
                }
                results
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .push((i, result));
            });
        }
    });
    let mut results = results.into_inner().unwrap_or_else(|e| e.into_inner());
    results.sort_by_key(|(i, _)| *i);
    let mut images = Vec::new();
    let mut errors = Vec::new();
    for (i, r) in results {
        match r {
            Ok(row) => images.push(row),
            Err(e) => errors.push(conformance::HarnessError {
                name: conformance::test_name(&runnable[i]),
                error: format!("{e:#}"),
            }),
        }
    }
    Ok(RepairReport {
        summary: summarize(&images),
        e2fsck_version: tools::version_line(&ctx.e2fsck),
        ffsck: ctx.ffsck,
        e2fsck: ctx.e2fsck,
        debugfs: ctx.debugfs,
        timeout_s: args.timeout,
        images,
        skipped: skipped.iter().map(|d| conformance::test_name(d)).collect(),
        errors,
    })
}

fn code(c: Option<i32>, timed_out: bool) -> String {
    match (c, timed_out) {
        (_, true) => "timeout".into(),
        (Some(c), _) => c.to_string(),
        (None, _) => "killed".into(),
    }
}

/// Runs `prog args… image` with output to `log`.
fn run_tool(
    ctx: &Ctx,
    prog: &Path,
    args: &[&str],
    image: &Path,
    log: &Path,
) -> Result<child::Outcome> {
    let out = std::fs::File::create(log)?;
    let mut cmd = Command::new(prog);
    cmd.args(args)
        .arg(image)
        .stdin(Stdio::null())
        .stdout(Stdio::from(out.try_clone()?))
        .stderr(Stdio::from(out))
        // No problem log or other site configuration may change what e2fsck does.
        .env("E2FSCK_CONFIG", "/dev/null");
    child::run(&mut cmd, Some(ctx.timeout)).with_context(|| format!("running {}", prog.display()))
}

fn repair_with(ctx: &Ctx, prog: &Path, image: &Path, tmp: &Path, label: &str) -> Result<RepairRun> {
    let fy = run_tool(
        ctx,
        prog,
        &["-fy"],
        image,
        &tmp.join(format!("{label}-fy.log")),
    )?;
    let text = std::fs::read_to_string(tmp.join(format!("{label}-fy.log"))).unwrap_or_default();
    let after = run_tool(
        ctx,
        &ctx.e2fsck,
        &["-fn"],
        image,
        &tmp.join(format!("{label}-after.log")),
    )?;
    Ok(RepairRun {
        fy_exit: fy.code(),
        fy_timed_out: fy.timed_out,
        fy_crashed: fy.signal().is_some()
            || (label == "ffsck" && (fy.code() == Some(101) || text.contains("panicked"))),
        fy_wall_s: fy.wall_s,
        after_exit: after.code(),
        clean: after.code() == Some(0) && !after.timed_out,
    })
}

/// `debugfs -R 'ls -l /'` of the image, or `None` if it fails.
fn root_listing(ctx: &Ctx, image: &Path) -> Option<String> {
    let debugfs = ctx.debugfs.as_ref()?;
    let out = Command::new(debugfs)
        .args(["-R", "ls -l /"])
        .arg(image)
        .stdin(Stdio::null())
        .stderr(Stdio::null())
        .output()
        .ok()?;
    if !out.status.success() || out.stdout.len() > MAX_LISTING_BYTES {
        return None;
    }
    Some(String::from_utf8_lossy(&out.stdout).into_owned())
}

fn repair_image(ctx: &Ctx, dir: &Path) -> Result<RepairRow> {
    let name = conformance::test_name(dir);
    let tmp = tempfile::Builder::new()
        .prefix(&format!("ffsck-lab-repair-{name}-"))
        .tempdir_in(&ctx.workdir)
        .with_context(|| format!("creating a temp dir in {}", ctx.workdir.display()))?;
    let e2_image = tmp.path().join("e2fsck.img");
    let ff_image = tmp.path().join("ffsck.img");
    conformance::gunzip_to(&dir.join("image.gz"), &e2_image)?;
    std::fs::copy(&e2_image, &ff_image).context("copying the unpacked image")?;
    let ffsck = repair_with(ctx, &ctx.ffsck, &ff_image, tmp.path(), "ffsck")?;
    let e2fsck = repair_with(ctx, &ctx.e2fsck, &e2_image, tmp.path(), "e2fsck")?;
    let same_root_listing = match (root_listing(ctx, &ff_image), root_listing(ctx, &e2_image)) {
        (Some(a), Some(b)) => Some(a == b),
        _ => None,
    };
    Ok(RepairRow {
        name,
        same_check_result: ffsck.after_exit.is_some() && ffsck.after_exit == e2fsck.after_exit,
        ffsck,
        e2fsck,
        same_root_listing,
    })
}

pub fn summarize(rows: &[RepairRow]) -> RepairSummary {
    let count = |f: &dyn Fn(&RepairRow) -> bool| rows.iter().filter(|r| f(r)).count();
    RepairSummary {
        images: rows.len(),
        ffsck_clean: count(&|r| r.ffsck.clean),
        e2fsck_clean: count(&|r| r.e2fsck.clean),
        both_clean: count(&|r| r.ffsck.clean && r.e2fsck.clean),
        only_e2fsck_clean: count(&|r| r.e2fsck.clean && !r.ffsck.clean),
        only_ffsck_clean: count(&|r| r.ffsck.clean && !r.e2fsck.clean),
        same_check_result: count(&|r| r.same_check_result),
        end_state_matches: count(&|r| r.end_state_matches()),
        root_listings_compared: count(&|r| r.same_root_listing.is_some()),
        root_listings_equal: count(&|r| r.same_root_listing == Some(true)),
        ffsck_crashes: count(&|r| r.ffsck.fy_crashed),
        ffsck_timeouts: count(&|r| r.ffsck.fy_timed_out),
    }
}

/// The Markdown report: summary, then every image ffsck leaves worse than e2fsck does.
pub fn render_markdown(r: &RepairReport) -> String {
    let s = &r.summary;
    let mut out =
        String::from("## Repair conformance: ffsck -fy vs e2fsck -fy, judged by e2fsck -fn\n\n");
    out.push_str(&format!(
        "- ffsck: `{}`; e2fsck: `{}` ({}); timeout {} s per run\n\n",
        r.ffsck.display(),
        r.e2fsck.display(),
        r.e2fsck_version,
        r.timeout_s
    ));
    let rows = vec![
        vec!["images".into(), s.images.to_string()],
        vec![
            "clean after ffsck -fy".into(),
            format!("**{}**/{}", s.ffsck_clean, s.images),
        ],
        vec![
            "clean after e2fsck -fy".into(),
            format!("{}/{}", s.e2fsck_clean, s.images),
        ],
        vec!["both clean".into(), s.both_clean.to_string()],
        vec![
            "only e2fsck leaves it clean".into(),
            s.only_e2fsck_clean.to_string(),
        ],
        vec![
            "only ffsck leaves it clean".into(),
            s.only_ffsck_clean.to_string(),
        ],
        vec![
            "same e2fsck -fn exit after both".into(),
            s.same_check_result.to_string(),
        ],
        vec![
            "root listings equal (debugfs ls -l /)".into(),
            format!("{}/{}", s.root_listings_equal, s.root_listings_compared),
        ],
        vec![
            "end state matches (both clean, same root)".into(),
            s.end_state_matches.to_string(),
        ],
        vec!["ffsck -fy crashes".into(), s.ffsck_crashes.to_string()],
        vec!["ffsck -fy timeouts".into(), s.ffsck_timeouts.to_string()],
    ];
    out.push_str(&markdown::table(
        &["measure", "value"],
        &[false, true],
        &rows,
    ));
    let worse: Vec<Vec<String>> = r
        .images
        .iter()
        .filter(|row| !row.end_state_matches() && row.e2fsck.clean || row.ffsck.fy_crashed)
        .map(|row| {
            vec![
                row.name.clone(),
                code(row.ffsck.fy_exit, row.ffsck.fy_timed_out),
                code(row.ffsck.after_exit, false),
                code(row.e2fsck.fy_exit, row.e2fsck.fy_timed_out),
                code(row.e2fsck.after_exit, false),
                match row.same_root_listing {
                    Some(true) => "same".into(),
                    Some(false) => "differs".into(),
                    None => "–".into(),
                },
            ]
        })
        .collect();
    if !worse.is_empty() {
        out.push_str(&format!(
            "\n### Images e2fsck repairs but ffsck does not (or not the same way): {}\n\n",
            worse.len()
        ));
        out.push_str(&markdown::table(
            &[
                "image",
                "ffsck -fy",
                "then e2fsck -fn",
                "e2fsck -fy",
                "then e2fsck -fn",
                "root listing",
            ],
            &[false, true, true, true, true, false],
            &worse,
        ));
    }
    if !r.errors.is_empty() {
        out.push_str("\n### Harness errors\n\n");
        for e in &r.errors {
            out.push_str(&format!("- {}: {}\n", e.name, e.error));
        }
    }
    out
}
