//! What `ffsck-lab bench` adds to its report beyond the timings: the thread-scaling figure and
//! the warning when a peak RSS is only the lab's own high-water mark.

use std::path::Path;

use anyhow::Result;

use super::BenchResults;
use crate::plots::{self, Figure};

/// Writes the figures one bench has data for (today: thread scaling) into `out`.
pub(super) fn bench_figures(r: &BenchResults, out: &Path) -> Result<Vec<Figure>> {
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

/// The lab's own peak RSS in KiB (`VmHWM`), if /proc says.
fn own_peak_rss_kib() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

/// A warning when a checker's peak RSS is no more than the lab's own: Linux carries the
/// high-water mark of the forked copy of the lab across `exec` into the child's `ru_maxrss`,
/// so such a figure is a floor set by the lab, not the checker's real peak.
pub(super) fn rss_floor_warning(r: &BenchResults) -> Option<String> {
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
