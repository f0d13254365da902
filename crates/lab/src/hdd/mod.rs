//! `ffsck-lab hdd`: how long would a checker's reads take on a 7200 rpm hard disk? Traces
//! each checker's block requests on an image (root; [`trace`]) and replays them through the
//! lab's own disk model ([`model`]) at each queue depth, beside the "one ascending sweep"
//! lower bound of what it read. Writes `report.md`, `results.json`, the traces and `hdd.svg`
//! / `hdd.png` into `--out`.
//!
//! Example: `ffsck-lab hdd --image aged.img --out out/hdd` traces `e2fsck -fn` and
//! `ffsck -fn --io sequential --threads T` for T in 1, 2, 4 (`--ffsck-io` for another
//! plan) and models them at queue depths 1 and 32;
//! `--trace out/hdd/*.trace.json` replays saved traces with other disk parameters;
//! `--summary aged=out/hdd-aged4 fresh=out/hdd-fresh4 ... --out out/hdd-sum` tabulates and
//! plots several such folders against image size ([`summary`]).

pub mod model;
pub mod summary;
pub mod trace;

use std::path::PathBuf;

use anyhow::{bail, Context, Result};
use serde::Serialize;

use crate::markdown;
use crate::plots::{write_figure, BarPlot, Plot};
use model::{Cost, Disk};
use trace::Trace;

#[derive(clap::Args, Debug, Clone)]
pub struct HddArgs {
    /// Image to trace the checkers on (root: a direct-I/O loop device and tracefs).
    #[arg(long, required_unless_present_any = ["traces", "summary"])]
    pub image: Option<PathBuf>,
    /// Replay traces saved by an earlier run instead of tracing.
    #[arg(long = "trace", num_args = 1..)]
    pub traces: Vec<PathBuf>,
    /// Summarise earlier `hdd` result folders instead of tracing, each as KIND=DIR (e.g.
    /// `aged=out/hdd-aged4 fresh=out/hdd-fresh4`): one table (`summary.md`) and one figure
    /// (`hdd-summary.svg`) of modeled seconds against image size, per kind.
    #[arg(long, num_args = 1.., conflicts_with_all = ["image", "traces"])]
    pub summary: Vec<PathBuf>,
    /// Directory for the report, the results, the traces and the figure.
    #[arg(long)]
    pub out: PathBuf,
    /// ffsck binary [default: beside ffsck-lab, else PATH].
    #[arg(long)]
    pub ffsck: Option<PathBuf>,
    /// e2fsck binary [default: from PATH].
    #[arg(long)]
    pub e2fsck: Option<PathBuf>,
    /// ffsck thread counts to trace.
    #[arg(long, value_delimiter = ',', default_value = "1,2,4")]
    pub threads: Vec<usize>,
    /// ffsck's `--io` plan while traced. `sequential` by default: what `auto` picks on a
    /// hard disk. The traced loop device reads a file with direct I/O, which answers as fast
    /// as the disk under it; on a flash or virtual disk `auto` would time it as no hard disk
    /// and read in parallel.
    #[arg(long, default_value = "sequential")]
    pub ffsck_io: String,
    /// Queue depths to model.
    #[arg(long, value_delimiter = ',', default_value = "1,32")]
    pub qd: Vec<usize>,
    /// The loop device's read_ahead_kb while tracing (a SATA disk's default).
    #[arg(long, default_value_t = 128)]
    pub read_ahead_kb: u64,
    /// More commands to trace, as LABEL=COMMAND with `{dev}` for the device.
    #[arg(long = "command")]
    pub commands: Vec<String>,
    /// Trace only the `--command`s, not e2fsck and ffsck.
    #[arg(long)]
    pub only_commands: bool,
    #[command(flatten)]
    pub disk: Disk,
}

/// One traced command, modeled.
#[derive(Debug, Clone, Serialize)]
pub struct Row {
    pub label: String,
    pub command: String,
    pub exit_code: Option<i32>,
    pub wall_s: f64,
    /// (queue depth, cost).
    pub modeled: Vec<(usize, Cost)>,
    pub sweep: Cost,
    pub trace_file: Option<String>,
}

#[derive(Debug, Clone, Serialize)]
pub struct HddReport {
    pub disk: Disk,
    pub read_ahead_kb: Option<u64>,
    pub device_bytes: u64,
    pub rows: Vec<Row>,
}

impl HddReport {
    /// Modeled disk seconds of `label` at queue depth `qd`.
    pub fn disk_s(&self, label: &str, qd: usize) -> Option<f64> {
        let row = self.rows.iter().find(|r| r.label == label)?;
        row.modeled
            .iter()
            .find(|(q, _)| *q == qd)
            .map(|(_, c)| c.disk_s)
    }
}

pub fn main(args: &HddArgs) -> Result<()> {
    if !args.summary.is_empty() {
        print!("{}", summary::run(&args.summary, &args.out)?);
        eprintln!("wrote {}", args.out.join("summary.md").display());
        return Ok(());
    }
    let report = run(args)?;
    print!("{}", render(&report));
    eprintln!("wrote {}", args.out.join("report.md").display());
    Ok(())
}

/// The commands to trace: (label, command with `{dev}`).
fn commands(args: &HddArgs) -> Result<Vec<(String, String)>> {
    let mut cmds = Vec::new();
    if !args.only_commands {
        let e2fsck = crate::tools::resolve_tool(args.e2fsck.as_deref(), "e2fsck")?;
        cmds.push((
            "e2fsck".to_string(),
            format!("{} -fn {{dev}}", e2fsck.display()),
        ));
        let ffsck = crate::tools::resolve_ffsck(args.ffsck.as_deref())?;
        for t in &args.threads {
            cmds.push((
                format!("ffsck-t{t}"),
                format!(
                    "{} -fn --io {} --threads {t} {{dev}}",
                    ffsck.display(),
                    args.ffsck_io
                ),
            ));
        }
    }
    for c in &args.commands {
        let Some((label, cmd)) = c.split_once('=') else {
            bail!("--command wants LABEL=COMMAND, got `{c}`");
        };
        if !cmd.contains("{dev}") {
            bail!("--command `{c}` has no {{dev}}");
        }
        cmds.push((label.to_string(), cmd.to_string()));
    }
    Ok(cmds)
}

/// Trace (or load) and model every command; writes the outputs into `--out`.
pub fn run(args: &HddArgs) -> Result<HddReport> {
    std::fs::create_dir_all(&args.out).with_context(|| args.out.display().to_string())?;
    let mut traces: Vec<(Trace, Option<String>)> = Vec::new();
    if args.traces.is_empty() {
        let image = args.image.as_deref().context("--image or --trace")?;
        for (i, (label, cmd)) in commands(args)?.iter().enumerate() {
            eprintln!("tracing {label}: {cmd}");
            let t = trace::trace(image, label, cmd, args.read_ahead_kb)?;
            if t.foreign_requests > 0 {
                eprintln!(
                    "  left out {} read requests other processes made on the device",
                    t.foreign_requests
                );
            }
            let name = format!("{i:02}-{label}.trace.json");
            t.save(&args.out.join(&name))?;
            traces.push((t, Some(name)));
        }
    } else {
        for p in &args.traces {
            traces.push((Trace::load(p)?, Some(p.display().to_string())));
        }
    }
    let report = model_all(&args.disk, &args.qd, &traces);
    std::fs::write(
        args.out.join("results.json"),
        serde_json::to_vec_pretty(&report)?,
    )?;
    std::fs::write(args.out.join("report.md"), render(&report))?;
    if let Err(e) = write_figure(Plot::Bar(&bar_plot(&report)), &args.out, "hdd") {
        eprintln!("no figure: {e:#}");
    }
    Ok(report)
}

/// Model every trace at each queue depth, with its sweep bound.
pub fn model_all(disk: &Disk, qds: &[usize], traces: &[(Trace, Option<String>)]) -> HddReport {
    let rows = traces
        .iter()
        .map(|(t, file)| Row {
            label: t.label.clone(),
            command: t.command.clone(),
            exit_code: t.exit_code,
            wall_s: t.wall_s,
            modeled: qds
                .iter()
                .map(|&q| (q, disk.replay(&t.reqs, q, t.device_bytes)))
                .collect(),
            sweep: disk.sweep(&t.reqs, t.device_bytes),
            trace_file: file.clone(),
        })
        .collect();
    HddReport {
        disk: disk.clone(),
        read_ahead_kb: traces.first().map(|(t, _)| t.read_ahead_kb),
        device_bytes: traces.first().map_or(0, |(t, _)| t.device_bytes),
        rows,
    }
}

fn render(report: &HddReport) -> String {
    let qds: Vec<usize> = report
        .rows
        .first()
        .map(|r| r.modeled.iter().map(|(q, _)| *q).collect())
        .unwrap_or_default();
    let mut header: Vec<String> = vec!["checker".into()];
    header.extend(qds.iter().map(|q| format!("disk s, qd {q}")));
    header.extend(
        [
            "sweep bound s",
            "× bound (qd 1)",
            "requests",
            "MiB read",
            "seeks (qd 1)",
            "positioning (qd 1)",
            "exit",
        ]
        .map(String::from),
    );
    let rows: Vec<Vec<String>> = report
        .rows
        .iter()
        .map(|r| {
            let mut row = vec![r.label.clone()];
            row.extend(r.modeled.iter().map(|(_, c)| format!("{:.2}", c.disk_s)));
            let first = r
                .modeled
                .first()
                .map(|(_, c)| c.clone())
                .unwrap_or_default();
            row.push(format!("{:.2}", r.sweep.disk_s));
            row.push(format!("{:.1}", first.disk_s / r.sweep.disk_s.max(1e-9)));
            row.push(first.requests.to_string());
            row.push(format!("{:.0}", first.bytes as f64 / 1048576.0));
            row.push(first.seeks.to_string());
            row.push(format!(
                "{:.0} %",
                100.0 * first.positioning_s / first.disk_s.max(1e-9)
            ));
            row.push(r.exit_code.map_or("-".into(), |c| c.to_string()));
            row
        })
        .collect();
    let h: Vec<&str> = header.iter().map(String::as_str).collect();
    let right: Vec<bool> = (0..h.len()).map(|i| i > 0).collect();
    let d = &report.disk;
    format!(
        "# Modeled hard-disk time\n\n{} MiB device, read-ahead {} KiB. Disk: {} rpm, seek {}–{} ms \
         (square root of the distance), half a rotation per seek, {} MB/s, forward skips up to \
         {} KiB without a seek; the sweep reads through gaps up to {} KiB.\n\n{}",
        report.device_bytes >> 20,
        report
            .read_ahead_kb
            .map_or("?".to_string(), |k| k.to_string()),
        d.rpm,
        d.seek_min_ms,
        d.seek_full_ms,
        d.mbps,
        d.skip_kb,
        d.sweep_gap_kb,
        markdown::table(&h, &right, &rows)
    )
}

fn bar_plot(report: &HddReport) -> BarPlot {
    let qds: Vec<usize> = report
        .rows
        .first()
        .map(|r| r.modeled.iter().map(|(q, _)| *q).collect())
        .unwrap_or_default();
    let mut series: Vec<(String, Vec<f64>)> = qds
        .iter()
        .enumerate()
        .map(|(i, q)| {
            (
                format!("queue depth {q}"),
                report.rows.iter().map(|r| r.modeled[i].1.disk_s).collect(),
            )
        })
        .collect();
    series.push((
        "one sorted sweep (bound)".into(),
        report.rows.iter().map(|r| r.sweep.disk_s).collect(),
    ));
    BarPlot {
        title: "Modeled 7200 rpm disk time".into(),
        x_label: "disk seconds".into(),
        categories: report.rows.iter().map(|r| r.label.clone()).collect(),
        series,
        reference: None,
    }
}
