//! `ffsck-lab sweep --sizes N,M,…`: one `bench` per inode count, each in its own folder, then a
//! summary report with cost-against-size figures. Every `bench` option applies to each size.

use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use serde::Serialize;

use crate::age::Method;
use crate::bench::{self, BenchArgs};
use crate::markdown;
use crate::plots::{self, Figure, SizePoint};

/// More sizes than this is a typo (or a hostile list), not a sweep.
const MAX_SIZES: usize = 32;

/// `ffsck-lab sweep`: the inode counts, and the bench options used at each.
#[derive(clap::Args, Debug, Clone)]
pub struct SweepArgs {
    /// Inode counts to sweep over (comma-separated, e.g. 100000,250000,1000000): one bench per
    /// size in `--out/inodes-N/`, then a summary report and cost-vs-size plots in --out.
    #[arg(long, value_delimiter = ',', required = true)]
    pub sizes: Vec<u64>,
    #[command(flatten)]
    pub bench: BenchArgs,
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
pub fn run(sweep: &SweepArgs) -> Result<SweepResults> {
    let sizes = &sweep.sizes;
    validate_sizes(sizes)?;
    let args = &sweep.bench;
    if args.image.is_some() {
        bail!("--sizes builds its own images; it cannot be combined with --image");
    }
    std::fs::create_dir_all(&args.out)
        .with_context(|| format!("creating {}", args.out.display()))?;
    let mut rows = Vec::new();
    let mut warnings = Vec::new();
    for &size in sizes {
        let dir = format!("inodes-{size}");
        let sub = BenchArgs {
            inodes: size,
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
    out.push_str(&plots::render_figures(&r.figures));
    if !r.warnings.is_empty() {
        out.push_str("\n### Warnings\n\n");
        for w in &r.warnings {
            out.push_str(&format!("- {w}\n"));
        }
    }
    out
}

/// CLI entry for `sweep`.
pub fn main(args: &SweepArgs) -> Result<()> {
    let r = run(args)?;
    print!("{}", render_sweep(&r));
    let report: PathBuf = args.bench.out.join("report.md");
    eprintln!("wrote {} and sweep.json", report.display());
    Ok(())
}
