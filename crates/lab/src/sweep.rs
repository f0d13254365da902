//! The parts of `ffsck-lab bench` that go beyond one comparison on one image: the size sweep
//! (`--sizes`), aging the built image first (`--aged`), and the SVG figures with their links in
//! report.md. Kept out of `bench.rs` so that file stays a small timing loop.

use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use serde::Serialize;

use crate::age::{self, AgeArgs, AgeReport, Method, MountUnavailable};
use crate::bench::{self, BenchArgs, BenchResults};
use crate::markdown;
use crate::plots::{self, SizePoint};
use crate::tools;

/// More sizes than this is a typo (or a hostile list), not a sweep.
const MAX_SIZES: usize = 32;

/// A figure written beside report.md as SVG (`file`) and PNG (`png`), relative to the report.
#[derive(Debug, Clone, Serialize)]
pub struct Figure {
    pub title: String,
    pub file: String,
    pub png: String,
}

impl Figure {
    /// Writes `out/STEM.svg` and `out/STEM.png`.
    pub fn write(plot: plots::Plot<'_>, out: &Path, stem: &str) -> Result<Figure> {
        let title = plot.title().to_string();
        let (file, png) = plots::write_figure(plot, out, stem)?;
        Ok(Figure { title, file, png })
    }
}

/// Writes the figures one bench has data for (today: thread scaling) into `out`.
pub fn bench_figures(r: &BenchResults, out: &Path) -> Result<Vec<Figure>> {
    let mut figures = Vec::new();
    if !r.scaling.is_empty() {
        let e2 = r.summary.get(1).map_or(f64::NAN, |s| s.median_wall_s);
        let points: Vec<(usize, f64)> = r
            .scaling
            .iter()
            .map(|s| (s.threads, s.median_wall_s))
            .collect();
        let what = match &r.built {
            Some(b) => format!(
                "{} profile, ~{} inodes",
                b.profile.name(),
                b.requested_inodes
            ),
            None => r
                .image
                .file_name()
                .map_or("image".into(), |n| n.to_string_lossy().into_owned()),
        };
        let plot = plots::scaling_plot(&points, e2, &what);
        figures.push(Figure::write(plots::Plot::Line(&plot), out, "scaling")?);
    }
    Ok(figures)
}

/// Markdown links (and inline images) for the figures.
pub fn render_figures(figures: &[Figure]) -> String {
    if figures.is_empty() {
        return String::new();
    }
    let mut out = String::from("\n### Figures\n\n");
    for f in figures {
        out.push_str(&format!(
            "- [{t}]({file}) ([PNG]({png}))\n\n  ![{t}]({file})\n",
            t = f.title.replace(['[', ']'], ""),
            file = f.file,
            png = f.png
        ));
    }
    out
}

/// One report line about the aging that preceded the bench.
pub fn render_aged(a: &AgeReport) -> String {
    let f = &a.fragmentation;
    format!(
        "- aged: `{:?}` for {} ops in {:.0} s ({}), {:.1}% → {:.1}% of blocks in use; \
         {:.2} fragments/file ({:.1}% non-contiguous), {:.2} fragments/dir\n",
        a.method,
        a.ops,
        a.seconds,
        a.stop_reason,
        a.util_before,
        a.util_after,
        f.mean_fragments_per_file,
        100.0 * f.noncontiguous_share,
        f.mean_fragments_per_dir
    )
}

/// Doubles the image (truncate + resize2fs, so aging has room beyond the tree that filled it)
/// and ages it in place. Returns `None`, with a warning, when loop mounts are not possible.
pub fn age_image(
    args: &BenchArgs,
    method: Method,
    image: &Path,
    warnings: &mut Vec<String>,
) -> Result<Option<AgeReport>> {
    if !(args.age_secs.is_finite() && args.age_secs > 0.0) {
        bail!("--age-secs must be a positive number of seconds");
    }
    let resize2fs = tools::resolve_tool(None, "resize2fs")?;
    let len = std::fs::metadata(image)?.len();
    std::fs::OpenOptions::new()
        .write(true)
        .open(image)?
        .set_len(len.saturating_mul(2))
        .with_context(|| format!("growing {}", image.display()))?;
    let out = std::process::Command::new(&resize2fs)
        .arg(image)
        .stdin(std::process::Stdio::null())
        .output()
        .context("running resize2fs")?;
    if !out.status.success() {
        bail!(
            "resize2fs {} failed: {}",
            image.display(),
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    eprintln!(
        "aging {} with {method:?} (at most {:.0} s)…",
        image.display(),
        args.age_secs
    );
    let age_args = AgeArgs {
        method,
        image: image.to_path_buf(),
        seed: args.seed,
        until_util: None,
        ops: None,
        secs: Some(args.age_secs),
        report: Some(args.out.join("age.json")),
    };
    match age::run(&age_args) {
        Ok(report) => Ok(Some(report)),
        Err(e) if e.downcast_ref::<MountUnavailable>().is_some() => {
            let msg = format!("--aged {method:?} skipped, image benched unaged: {e:#}");
            eprintln!("{msg}");
            warnings.push(msg);
            Ok(None)
        }
        Err(e) => Err(e.context("aging the built image")),
    }
}

/// The lab's own peak RSS in KiB (`VmHWM`), if /proc says.
fn own_peak_rss_kib() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

/// A warning when a checker's peak RSS is no more than the lab's own: Linux carries the
/// high-water mark of the forked copy of the lab across `exec` into the child's `ru_maxrss`,
/// so such a figure is a floor set by the lab, not the checker's real peak.
pub fn rss_floor_warning(r: &BenchResults) -> Option<String> {
    if r.runs.iter().all(|run| run.rss_shim) {
        return None;
    }
    let own = own_peak_rss_kib()? as f64;
    let low: Vec<&str> = r
        .summary
        .iter()
        .filter(|s| s.median_max_rss_kib <= own * 1.05)
        .map(|s| s.checker.as_str())
        .collect();
    (!low.is_empty()).then(|| {
        format!(
            "peak RSS of {} is within 5% of ffsck-lab's own ({:.1} MiB): ru_maxrss counts the \
             forked copy of the lab before exec, so the real peak may be lower",
            low.join(" and "),
            own / 1024.0
        )
    })
}

/// One size of the sweep.
#[derive(Debug, Clone, Serialize)]
pub struct SizeRow {
    pub requested_inodes: u64,
    /// Inodes in use per dumpe2fs (the requested count when that is unknown).
    pub inodes: u64,
    pub ffsck_wall_s: f64,
    pub e2fsck_wall_s: f64,
    pub ffsck_max_rss_kib: f64,
    pub e2fsck_max_rss_kib: f64,
    pub read_once_wall_s: Option<f64>,
    pub speedup: f64,
    pub rss_ratio_ffsck_over_e2fsck: f64,
    /// Directory with this size's results.json and report.md, relative to --out.
    pub dir: String,
}

#[derive(Debug, Clone, Serialize)]
pub struct SweepResults {
    pub profile: String,
    pub aged: Option<Method>,
    pub cold: bool,
    pub rows: Vec<SizeRow>,
    pub figures: Vec<Figure>,
    pub warnings: Vec<String>,
}

/// Checks the size list before anything is built.
pub fn validate_sizes(sizes: &[u64]) -> Result<()> {
    if sizes.is_empty() {
        bail!("--sizes needs at least one inode count");
    }
    if sizes.len() > MAX_SIZES {
        bail!("--sizes takes at most {MAX_SIZES} inode counts");
    }
    if let Some(s) = sizes.iter().find(|&&s| s < 100) {
        bail!("--sizes: {s} is below the 100 inodes an image needs");
    }
    Ok(())
}

/// Runs one bench per size and writes the summary, its figures and sweep.json into --out.
pub fn run(args: &BenchArgs) -> Result<SweepResults> {
    let sizes = args.sizes.clone().unwrap_or_default();
    validate_sizes(&sizes)?;
    if args.image.is_some() {
        bail!("--sizes builds its own images; it cannot be combined with --image");
    }
    std::fs::create_dir_all(&args.out)
        .with_context(|| format!("creating {}", args.out.display()))?;
    let mut rows = Vec::new();
    let mut warnings = Vec::new();
    for &size in &sizes {
        let dir = format!("inodes-{size}");
        let sub = BenchArgs {
            inodes: size,
            sizes: None,
            out: args.out.join(&dir),
            ..args.clone()
        };
        eprintln!("== sweep: {size} inodes ==");
        let r = bench::run(&sub).with_context(|| format!("bench at {size} inodes"))?;
        let (Some(ff), Some(e2)) = (r.summary.first(), r.summary.get(1)) else {
            bail!("bench at {size} inodes produced no summary");
        };
        warnings.extend(r.warnings.iter().map(|w| format!("{size} inodes: {w}")));
        rows.push(SizeRow {
            requested_inodes: size,
            inodes: r.fs.as_ref().and_then(|f| f.used_inodes()).unwrap_or(size),
            ffsck_wall_s: ff.median_wall_s,
            e2fsck_wall_s: e2.median_wall_s,
            ffsck_max_rss_kib: ff.median_max_rss_kib,
            e2fsck_max_rss_kib: e2.median_max_rss_kib,
            read_once_wall_s: r.read_once.as_ref().map(|ro| ro.median_wall_s),
            speedup: r.speedup,
            rss_ratio_ffsck_over_e2fsck: r.rss_ratio_ffsck_over_e2fsck,
            dir,
        });
    }
    let figures = size_figures(&rows, args.profile.name(), &args.out)?;
    let results = SweepResults {
        profile: args.profile.name().into(),
        aged: args.aged,
        cold: args.cold,
        rows,
        figures,
        warnings,
    };
    let json_path = args.out.join("sweep.json");
    std::fs::write(&json_path, serde_json::to_string_pretty(&results)? + "\n")
        .with_context(|| format!("writing {}", json_path.display()))?;
    let report_path = args.out.join("report.md");
    std::fs::write(&report_path, render_sweep(&results))
        .with_context(|| format!("writing {}", report_path.display()))?;
    Ok(results)
}

/// Wall time and peak RSS against inodes, one figure (SVG and PNG) each.
fn size_figures(rows: &[SizeRow], profile: &str, out: &Path) -> Result<Vec<Figure>> {
    let pts = |ff: fn(&SizeRow) -> f64, e2: fn(&SizeRow) -> f64| -> Vec<SizePoint> {
        rows.iter()
            .map(|r| SizePoint {
                inodes: r.inodes as f64,
                ffsck: ff(r),
                e2fsck: e2(r),
            })
            .collect()
    };
    let specs = [
        (
            "sizes-wall",
            plots::size_plot(
                &pts(|r| r.ffsck_wall_s, |r| r.e2fsck_wall_s),
                &format!("Wall time by size ({profile} profile)"),
                "median wall time (s)",
            ),
        ),
        (
            "sizes-rss",
            plots::size_plot(
                &pts(
                    |r| r.ffsck_max_rss_kib / 1024.0,
                    |r| r.e2fsck_max_rss_kib / 1024.0,
                ),
                &format!("Peak RSS by size ({profile} profile)"),
                "median peak RSS (MiB)",
            ),
        ),
    ];
    let mut figures = Vec::new();
    for (stem, plot) in specs {
        figures.push(Figure::write(plots::Plot::Line(&plot), out, stem)?);
    }
    Ok(figures)
}

/// The sweep's report.md.
pub fn render_sweep(r: &SweepResults) -> String {
    let mut out = format!(
        "## Size sweep: ffsck -fn vs e2fsck -fn ({} profile{}, {} cache)\n\n",
        r.profile,
        r.aged
            .map_or(String::new(), |m| format!(", aged with {m:?}")),
        if r.cold { "cold" } else { "warm" }
    );
    let rows: Vec<Vec<String>> = r
        .rows
        .iter()
        .map(|s| {
            vec![
                format!("[{}]({}/report.md)", s.inodes, s.dir),
                format!("{:.3}", s.ffsck_wall_s),
                format!("{:.3}", s.e2fsck_wall_s),
                format!("{:.2}×", s.speedup),
                format!("{:.1}", s.ffsck_max_rss_kib / 1024.0),
                format!("{:.1}", s.e2fsck_max_rss_kib / 1024.0),
                format!("{:.2}×", s.rss_ratio_ffsck_over_e2fsck),
                s.read_once_wall_s.map_or("–".into(), |w| format!("{w:.3}")),
            ]
        })
        .collect();
    out.push_str(&markdown::table(
        &[
            "inodes in use",
            "ffsck wall (s)",
            "e2fsck wall (s)",
            "speedup",
            "ffsck RSS (MiB)",
            "e2fsck RSS (MiB)",
            "RSS ratio",
            "read once (s)",
        ],
        &[true; 8],
        &rows,
    ));
    out.push_str(&render_figures(&r.figures));
    if !r.warnings.is_empty() {
        out.push_str("\n### Warnings\n\n");
        for w in &r.warnings {
            out.push_str(&format!("- {w}\n"));
        }
    }
    out
}

/// CLI entry for `bench --sizes`.
pub fn main(args: &BenchArgs) -> Result<()> {
    let r = run(args)?;
    print!("{}", render_sweep(&r));
    let report: PathBuf = args.out.join("report.md");
    eprintln!("wrote {} and sweep.json", report.display());
    Ok(())
}
