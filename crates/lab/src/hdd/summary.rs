//! `ffsck-lab hdd --summary KIND=DIR ...`: one table and one figure over several `hdd` result
//! folders (e.g. aged and fresh images of several sizes): modeled seconds of e2fsck and of
//! ffsck at each traced thread count and queue depth, beside the sweep bound, against the
//! image size.
//!
//! Each folder is read from its `results.json`; `KIND=` (e.g. `aged=`, `fresh=`) groups the
//! images into one line per kind and checker in the figure. The image is named after the
//! folder (a leading `hdd-` dropped) and sized by the traced device.

use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use serde_json::Value;

use crate::markdown;
use crate::plots::{write_figure, LinePlot, Plot, Series};

/// ffsck's default thread count: the column the ratios and the figure use.
pub const DEFAULT_THREADS: usize = 2;

/// Thread counts and queue depths in the table.
const THREADS: [usize; 3] = [1, 2, 4];
const QDS: [usize; 2] = [1, 32];

/// Most folders summarised: a bound on what the command line can make us read and draw.
const MAX_INPUTS: usize = 1000;

/// One image's modeled seconds.
#[derive(Debug, Clone, PartialEq)]
pub struct Entry {
    pub image: String,
    pub kind: String,
    pub gib: f64,
    /// e2fsck at queue depths 1 and 32 (NaN when not traced).
    pub e2fsck: [f64; 2],
    /// ffsck at 1, 2, 4 threads × queue depths 1 and 32.
    pub ffsck: [[f64; 2]; 3],
    /// The one-sorted-sweep bound: the lowest over the checkers traced.
    pub bound: f64,
}

/// `KIND=DIR` or `DIR` (kind `image`).
fn parse_input(arg: &Path) -> (String, PathBuf) {
    let s = arg.to_string_lossy();
    match s.split_once('=') {
        Some((kind, dir)) if !kind.is_empty() && !kind.contains('/') => {
            (kind.to_string(), PathBuf::from(dir))
        }
        _ => ("image".to_string(), arg.to_path_buf()),
    }
}

fn disk_s(row: &Value, qd: usize) -> f64 {
    row.get("modeled")
        .and_then(Value::as_array)
        .and_then(|m| {
            m.iter().find_map(|pair| {
                let pair = pair.as_array()?;
                (pair.first()?.as_u64()? == qd as u64)
                    .then(|| pair.get(1)?.get("disk_s")?.as_f64())
                    .flatten()
            })
        })
        .unwrap_or(f64::NAN)
}

/// Reads one `hdd` folder's `results.json`.
pub fn load(kind: &str, dir: &Path) -> Result<Entry> {
    let path = dir.join("results.json");
    let text = std::fs::read_to_string(&path).with_context(|| path.display().to_string())?;
    let v: Value = serde_json::from_str(&text).with_context(|| path.display().to_string())?;
    let rows = v
        .get("rows")
        .and_then(Value::as_array)
        .with_context(|| format!("{}: no rows", path.display()))?;
    let bytes = v.get("device_bytes").and_then(Value::as_u64).unwrap_or(0);
    let row = |label: &str| rows.iter().find(|r| r["label"].as_str() == Some(label));
    let both =
        |label: &str| row(label).map_or([f64::NAN; 2], |r| [disk_s(r, QDS[0]), disk_s(r, QDS[1])]);
    let bound = rows
        .iter()
        .filter_map(|r| r.get("sweep")?.get("disk_s")?.as_f64())
        .filter(|s| s.is_finite())
        .fold(f64::NAN, f64::min);
    let name = dir
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| dir.display().to_string());
    Ok(Entry {
        image: name.strip_prefix("hdd-").unwrap_or(&name).to_string(),
        kind: kind.to_string(),
        gib: bytes as f64 / (1u64 << 30) as f64,
        e2fsck: both("e2fsck"),
        ffsck: THREADS.map(|t| both(&format!("ffsck-t{t}"))),
        bound,
    })
}

fn num(x: f64) -> String {
    if x.is_finite() {
        format!("{x:.2}")
    } else {
        "-".into()
    }
}

fn ratio(a: f64, b: f64) -> String {
    if a.is_finite() && b.is_finite() && b > 0.0 {
        format!("{:.2}×", a / b)
    } else {
        "-".into()
    }
}

/// The summary table, rows sorted by kind then size.
pub fn render(entries: &[Entry]) -> String {
    let mut header: Vec<String> = ["image", "GiB", "kind"].map(String::from).to_vec();
    for qd in QDS {
        header.push(format!("e2fsck qd{qd}"));
        for t in THREADS {
            header.push(format!("ffsck t{t} qd{qd}"));
        }
    }
    header.push("sweep bound".into());
    header.push(format!("t{DEFAULT_THREADS} / e2fsck (qd1)"));
    header.push(format!("t{DEFAULT_THREADS} / e2fsck (qd32)"));
    header.push(format!("t{DEFAULT_THREADS} / bound (qd1)"));
    let d = THREADS
        .iter()
        .position(|&t| t == DEFAULT_THREADS)
        .unwrap_or(0);
    let rows: Vec<Vec<String>> = entries
        .iter()
        .map(|e| {
            let mut row = vec![e.image.clone(), format!("{:.0}", e.gib), e.kind.clone()];
            for q in 0..QDS.len() {
                row.push(num(e.e2fsck[q]));
                for f in &e.ffsck {
                    row.push(num(f[q]));
                }
            }
            row.push(num(e.bound));
            row.push(ratio(e.ffsck[d][0], e.e2fsck[0]));
            row.push(ratio(e.ffsck[d][1], e.e2fsck[1]));
            row.push(ratio(e.ffsck[d][0], e.bound));
            row
        })
        .collect();
    let h: Vec<&str> = header.iter().map(String::as_str).collect();
    let right: Vec<bool> = (0..h.len()).map(|i| i == 1 || i > 2).collect();
    format!(
        "# Modeled hard-disk time by image size\n\nModeled 7200 rpm disk seconds (see each folder's \
         report.md for the disk); the sweep bound is the lowest over the checkers traced; the \
         ratios use ffsck's default {DEFAULT_THREADS} threads.\n\n{}",
        markdown::table(&h, &right, &rows)
    )
}

/// Modeled seconds (queue depth 1) against image size: e2fsck, ffsck at its default thread
/// count and the bound (dashed), one line each per kind.
pub fn plot(entries: &[Entry]) -> LinePlot {
    let mut kinds: Vec<&str> = entries.iter().map(|e| e.kind.as_str()).collect();
    kinds.sort_unstable();
    kinds.dedup();
    let d = THREADS
        .iter()
        .position(|&t| t == DEFAULT_THREADS)
        .unwrap_or(0);
    let mut series = Vec::new();
    for kind in kinds {
        let of = |f: &dyn Fn(&Entry) -> f64| -> Vec<(f64, f64)> {
            entries
                .iter()
                .filter(|e| e.kind == kind)
                .map(|e| (e.gib, f(e)))
                .collect()
        };
        series.push(Series {
            label: format!("e2fsck -fn, {kind}"),
            points: of(&|e| e.e2fsck[0]),
            reference: false,
        });
        series.push(Series {
            label: format!("ffsck -fn t{DEFAULT_THREADS}, {kind}"),
            points: of(&|e| e.ffsck[d][0]),
            reference: false,
        });
        series.push(Series {
            label: format!("sweep bound, {kind}"),
            points: of(&|e| e.bound),
            reference: true,
        });
    }
    LinePlot {
        title: "Modeled 7200 rpm disk time by image size (qd 1)".into(),
        x_label: "image size, GiB".into(),
        y_label: "disk seconds".into(),
        series,
        x_integer: false,
    }
}

/// Reads every folder, writes `summary.md` and `hdd-summary.svg` / `.png` into `out`, and
/// returns the table.
pub fn run(inputs: &[PathBuf], out: &Path) -> Result<String> {
    if inputs.len() > MAX_INPUTS {
        bail!("more than {MAX_INPUTS} folders to summarise");
    }
    let mut entries = inputs
        .iter()
        .map(|arg| {
            let (kind, dir) = parse_input(arg);
            load(&kind, &dir)
        })
        .collect::<Result<Vec<_>>>()?;
    entries.sort_by(|a, b| a.kind.cmp(&b.kind).then(a.gib.total_cmp(&b.gib)));
    std::fs::create_dir_all(out).with_context(|| out.display().to_string())?;
    let table = render(&entries);
    std::fs::write(out.join("summary.md"), &table)?;
    write_figure(Plot::Line(&plot(&entries)), out, "hdd-summary")?;
    Ok(table)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A results.json as `hdd` writes it, with modeled seconds `e2` for e2fsck and `ff[t]`
    /// for ffsck at 1, 2, 4 threads (qd 32 one tenth more), sweeps `sweeps`.
    fn fake(dir: &Path, gib: u64, e2: f64, ff: [f64; 3], sweeps: [f64; 4]) {
        let cost = |s: f64| serde_json::json!({"disk_s": s, "requests": 1, "bytes": 4096});
        let row = |label: &str, s: f64, sweep: f64| {
            serde_json::json!({
                "label": label, "command": "x", "exit_code": 0, "wall_s": 1.0,
                "modeled": [[1, cost(s)], [32, cost(s * 1.1)]],
                "sweep": cost(sweep), "trace_file": null
            })
        };
        let v = serde_json::json!({
            "disk": {}, "read_ahead_kb": 128, "device_bytes": gib << 30,
            "rows": [row("e2fsck", e2, sweeps[0]), row("ffsck-t1", ff[0], sweeps[1]),
                     row("ffsck-t2", ff[1], sweeps[2]), row("ffsck-t4", ff[2], sweeps[3])]
        });
        std::fs::create_dir_all(dir).unwrap();
        std::fs::write(dir.join("results.json"), v.to_string()).unwrap();
    }

    #[test]
    fn summary_over_folders_tabulates_and_draws_by_size_and_kind() {
        let tmp = tempfile::tempdir().unwrap();
        let a8 = tmp.path().join("hdd-aged8");
        let a4 = tmp.path().join("hdd-aged4");
        let f4 = tmp.path().join("fresh4");
        fake(&a8, 8, 16.0, [8.0, 7.5, 7.9], [7.3, 7.2, 7.25, 7.4]);
        fake(&a4, 4, 9.0, [4.6, 4.5, 4.7], [4.4, 4.4, 4.5, 4.4]);
        fake(&f4, 4, 2.8, [2.9, 2.8, 2.7], [2.7, 2.75, 2.75, 2.75]);
        let out = tmp.path().join("sum");
        let inputs = [
            PathBuf::from(format!("aged={}", a8.display())),
            PathBuf::from(format!("fresh={}", f4.display())),
            PathBuf::from(format!("aged={}", a4.display())),
        ];
        let table = run(&inputs, &out).unwrap();
        let lines: Vec<&str> = table
            .lines()
            .filter(|l| l.starts_with("| ") && !l.starts_with("| -"))
            .collect();
        // Header, then aged 4, aged 8, fresh 4 (sorted by kind, then size).
        assert_eq!(lines.len(), 4, "{table}");
        assert!(lines[0].contains("ffsck t4 qd32"), "{table}");
        let cells = |l: &str| -> Vec<String> {
            l.trim_matches('|')
                .split('|')
                .map(|c| c.trim().to_string())
                .collect()
        };
        let r = cells(lines[1]);
        assert_eq!(r[..3], ["aged4", "4", "aged"]);
        assert_eq!(r[3..7], ["9.00", "4.60", "4.50", "4.70"]);
        assert_eq!(r[7..11], ["9.90", "5.06", "4.95", "5.17"]);
        assert_eq!(r[11], "4.40"); // the lowest sweep over the checkers
        assert_eq!(r[12], "0.50×"); // 4.5 / 9
        assert_eq!(r[14], "1.02×"); // 4.5 / 4.4
        assert_eq!(cells(lines[2])[..4], ["aged8", "8", "aged", "16.00"]);
        assert_eq!(cells(lines[2])[11], "7.20");
        assert_eq!(cells(lines[3])[..3], ["fresh4", "4", "fresh"]);
        assert!(std::fs::read_to_string(out.join("summary.md")).unwrap() == table);
        let svg = std::fs::read_to_string(out.join("hdd-summary.svg")).unwrap();
        for label in [
            "e2fsck -fn, aged",
            "ffsck -fn t2, fresh",
            "sweep bound, aged",
        ] {
            assert!(svg.contains(label), "{label} missing from the figure");
        }
        assert!(out.join("hdd-summary.png").exists());
        let p = plot(&load("aged", &a8).into_iter().collect::<Vec<_>>());
        assert_eq!(p.series[0].points, vec![(8.0, 16.0)]);
    }

    #[test]
    fn summary_refuses_a_folder_without_results() {
        let tmp = tempfile::tempdir().unwrap();
        let err = run(&[tmp.path().to_path_buf()], &tmp.path().join("o")).unwrap_err();
        assert!(format!("{err:#}").contains("results.json"), "{err:#}");
    }
}
