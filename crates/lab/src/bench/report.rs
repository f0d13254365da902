//! `ffsck-lab bench`'s report.md: the image and machine, the comparison table, thread scaling,
//! the read-once floor, the estimate check, figures, profile and warnings.

use super::{aged, mib, BenchResults};
use crate::markdown;

/// The Markdown report (also printed to stdout).
pub fn render_markdown(r: &BenchResults) -> String {
    let mut out = render_header(r);
    out.push_str(&render_summary(r));
    out.push_str(&render_scaling(r));
    if let (Some(ro), [ff, e2, ..]) = (&r.read_once, r.summary.as_slice()) {
        out.push_str(&crate::readonce::render_markdown(
            ro,
            ff.median_wall_s,
            e2.median_wall_s,
        ));
    }
    if let (Some(e), Some(ff)) = (&r.estimate, r.summary.first()) {
        out.push_str(&format!(
            "\n### Predicted time (`ffsck --estimate`)\n\n\
             Made just before each timed `ffsck -fn` run, in the same cache state: median \
             {:.3} s against {:.3} s measured, **{:.2}×** (single predictions over the run \
             that followed: {:.2}× to {:.2}×, {} pairs).\n",
            e.median_predicted_s,
            ff.median_wall_s,
            e.ratio,
            e.worst_low,
            e.worst_high,
            e.pairs.len()
        ));
    }
    out.push_str(&crate::plots::render_figures(&r.figures));
    if let Some(p) = &r.profile {
        out.push_str(&crate::perf::render_markdown(p));
    }
    if !r.warnings.is_empty() {
        out.push_str("\n### Warnings\n\n");
        for w in &r.warnings {
            out.push_str(&format!("- {w}\n"));
        }
    }
    out
}

/// The Markdown report (also printed to stdout).
/// The report's opening lines: the image, the checkers, the machine and the runs.
fn render_header(r: &BenchResults) -> String {
    let mut out = String::from("## Benchmark: ffsck -fn vs e2fsck -fn\n\n");
    out.push_str(&format!("- image: `{}`", r.image.display()));
    if let Some(b) = &r.built {
        out.push_str(&format!(
            " (built: profile `{}`, ~{} inodes requested, seed {}, {} files, {} dirs, {:.0} MiB)",
            b.profile.name(),
            b.requested_inodes,
            b.seed,
            b.files,
            b.dirs,
            b.image_bytes as f64 / (1 << 20) as f64
        ));
    }
    out.push('\n');
    if let Some(a) = &r.aged {
        out.push_str(&aged::render_aged(a));
    }
    if let Some(fs) = &r.fs {
        if let (Some(used), Some(total)) = (fs.used_inodes(), fs.inode_count) {
            out.push_str(&format!("- inodes in use: {used} of {total}\n"));
        }
        if let (Some(used), Some(total), Some(bs)) =
            (fs.used_blocks(), fs.block_count, fs.block_size)
        {
            out.push_str(&format!(
                "- blocks in use: {used} of {total} ({bs} bytes each)\n"
            ));
        }
        if let Some(features) = &fs.features {
            out.push_str(&format!("- features: {features}\n"));
        }
    }
    out.push_str(&format!(
        "- ffsck: `{}` (threads: {})\n- e2fsck: `{}` ({})\n",
        r.ffsck_path.display(),
        r.ffsck_threads
            .map_or("ffsck default".to_string(), |t| t.to_string()),
        r.e2fsck_path.display(),
        r.e2fsck_version
    ));
    out.push_str(&format!(
        "- machine: {} CPUs{}\n",
        r.machine.cpus,
        r.machine
            .cpu_model
            .as_deref()
            .map(|m| format!(", {m}"))
            .unwrap_or_default()
    ));
    let cache = if !r.cold_cache.requested {
        "warm (one warm-up run each first)".to_string()
    } else if r.cold_cache.drops_failed == 0 {
        format!(
            "cold (page cache dropped before each of {} runs)",
            r.cold_cache.drops_ok
        )
    } else {
        format!(
            "cold requested, but dropping the page cache failed {} of {} times: {}",
            r.cold_cache.drops_failed,
            r.cold_cache.drops_failed + r.cold_cache.drops_ok,
            r.cold_cache
                .last_error
                .as_deref()
                .unwrap_or("unknown error")
        )
    };
    out.push_str(&format!(
        "- runs: {} per checker, alternating; cache: {cache}\n\n",
        r.summary.first().map_or(0, |s| s.runs)
    ));
    out
}

/// The comparison table and the two ratios.
fn render_summary(r: &BenchResults) -> String {
    let mut out = String::new();
    let rows: Vec<Vec<String>> = r
        .summary
        .iter()
        .map(|s| {
            vec![
                s.checker.clone(),
                s.runs.to_string(),
                format!("{:.3}", s.median_wall_s),
                format!("{:.3}", s.min_wall_s),
                format!("{:.3}", s.max_wall_s),
                format!("{:.3}", s.median_user_s),
                format!("{:.3}", s.median_sys_s),
                mib(s.median_max_rss_kib),
                s.outcomes.join(", "),
            ]
        })
        .collect();
    out.push_str(&markdown::table(
        &[
            "checker",
            "runs",
            "median wall (s)",
            "min wall (s)",
            "max wall (s)",
            "median user (s)",
            "median sys (s)",
            "median peak RSS (MiB)",
            "exit",
        ],
        &[false, true, true, true, true, true, true, true, false],
        &rows,
    ));
    out.push_str(&format!(
        "\n**Speedup** (e2fsck / ffsck median wall): **{:.2}×**  \n\
         **Peak RSS ratio** (ffsck / e2fsck median): **{:.2}×**\n",
        r.speedup, r.rss_ratio_ffsck_over_e2fsck
    ));
    out
}

/// The thread-scaling table, when the bench ran one.
fn render_scaling(r: &BenchResults) -> String {
    let mut out = String::new();
    if r.scaling.is_empty() {
        return out;
    }
    out.push_str("\n### ffsck thread scaling\n\n");
    let rows: Vec<Vec<String>> = r
        .scaling
        .iter()
        .map(|s| {
            let ceiling = r.ceiling.as_ref().and_then(|c| c.speedup(s.threads));
            vec![
                s.threads.to_string(),
                format!("{:.3}", s.median_wall_s),
                format!("{:.3}", s.min_wall_s),
                format!("{:.3}", s.median_cpu_s),
                format!("{:.2}×", s.speedup_vs_1_thread),
                format!("{:.2}×", s.speedup_vs_1_thread_min),
                ceiling.map_or("–".into(), |(c, _)| format!("{c:.2}×")),
                ceiling.map_or("–".into(), |(_, c)| format!("{c:.2}×")),
                format!("{:.2}×", s.speedup_vs_e2fsck),
            ]
        })
        .collect();
    out.push_str(&markdown::table(
        &[
            "threads",
            "median wall (s)",
            "min wall (s)",
            "median CPU (s)",
            "vs 1 thread",
            "vs 1 thread (min)",
            "machine: compute",
            "machine: copy",
            "vs e2fsck",
        ],
        &[true; 9],
        &rows,
    ));
    if let Some(c) = &r.ceiling {
        out.push_str(&format!(
            "\nThread counts take turns run by run. *Machine* is the ceiling: the speedup \
             over 1 thread of a compute-bound loop and of a page-cache `pread` of the \
             image's first {:.0} MiB, at the same thread count on this machine.\n",
            c.copy_bytes as f64 / f64::from(1 << 20)
        ));
    }
    out
}
