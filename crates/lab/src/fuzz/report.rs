//! The fuzz summary: counts over the records, per damage class and per profile, the failing
//! cases, and their Markdown rendering.

use std::collections::BTreeMap;
use std::fmt::Write;

use serde::{Deserialize, Serialize};

use super::verdict::{Check, Counts};
use super::{CaseRecord, Summary};

/// One failing case, for the report.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct FailureRow {
    pub index: usize,
    pub profile: String,
    pub checks: Vec<String>,
    pub damage: Vec<String>,
    pub minimized_steps: Option<usize>,
    pub regression: Option<String>,
    pub e2fsck_n: String,
    pub ffsck_n: String,
    pub e2fsck_y_check: String,
    pub ffsck_y: String,
    pub ffsck_y_check: String,
}

fn profile_key(r: &CaseRecord) -> String {
    format!("{}-{}k", r.image.fs, r.image.block_size / 1024)
}

/// Counts every record.
pub fn summarize(seed: u64, records: &[CaseRecord]) -> Summary {
    let mut s = Summary {
        seed,
        cases: records.len(),
        ..Summary::default()
    };
    for r in records {
        let Some(runs) = &r.runs else {
            s.build_errors.push(format!(
                "case {} ({}): {}",
                r.index,
                r.image.name(),
                r.error.as_deref().unwrap_or("no result")
            ));
            continue;
        };
        s.counts.add(runs, &r.checks);
        s.per_profile
            .entry(profile_key(r))
            .or_default()
            .add(runs, &r.checks);
        let mut classes: Vec<String> = r.damage.iter().map(|d| d.class()).collect();
        classes.sort();
        classes.dedup();
        if classes.is_empty() {
            classes.push("none".into());
        }
        for c in classes {
            s.per_class.entry(c).or_default().add(runs, &r.checks);
        }
        if r.checks.iter().any(|c| c.is_failure()) {
            let q = |x: &super::case::Run| format!("{}: {}", x.code(), x.line);
            s.failures.push(FailureRow {
                index: r.index,
                profile: r.image.name(),
                checks: r.checks.iter().map(|c| c.name()).collect(),
                damage: r.damage.iter().map(|d| d.class()).collect(),
                minimized_steps: r.minimized.as_ref().map(Vec::len),
                regression: r.regression.clone(),
                e2fsck_n: q(&runs.e2fsck_n),
                ffsck_n: q(&runs.ffsck_n1),
                e2fsck_y_check: q(&runs.e2fsck_y1_check),
                ffsck_y: q(&runs.ffsck_y),
                ffsck_y_check: q(&runs.ffsck_y_check_e2fsck),
            });
        }
    }
    s
}

/// One progress line per finished case.
pub fn progress_line(r: &CaseRecord) -> String {
    let what = match (&r.error, r.checks.is_empty()) {
        (Some(e), _) => format!("error: {}", e.lines().next().unwrap_or("")),
        (None, true) => "ok".into(),
        (None, false) => r
            .checks
            .iter()
            .map(|c| c.name())
            .collect::<Vec<_>>()
            .join(","),
    };
    let classes: Vec<String> = r.damage.iter().map(|d| d.class()).collect();
    format!(
        "case {:5} {:40} [{}] {}",
        r.index,
        r.image.name(),
        classes.join(" "),
        what
    )
}

fn pct(a: usize, b: usize) -> String {
    if b == 0 {
        "–".into()
    } else {
        format!("{:.1}%", 100.0 * a as f64 / b as f64)
    }
}

fn counts_row(name: &str, c: &Counts) -> String {
    let get = |k: Check| c.checks.get(&k.name()).copied().unwrap_or(0);
    let mut s = format!(
        "| {name} | {} | {} | {} | {} | {} | {} |",
        c.cases,
        c.damaged,
        pct(c.e2fsck_one_run_repairs, c.damaged),
        pct(c.ffsck_one_run_repairs, c.damaged),
        c.failing,
        get(Check::E2fsckOnlyRepairs),
    );
    for k in [
        Check::Missed,
        Check::FalseAlarm,
        Check::SecondRunDirty,
        Check::LostFiles,
    ] {
        let _ = write!(s, " {} |", get(k));
    }
    s
}

const TABLE_HEAD: &str = "| | cases | damaged | e2fsck 1-run | ffsck 1-run | failing | e2fsck-only | missed | false alarm | 2nd-run dirty | lost files |\n|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n";

/// The Markdown report.
pub fn markdown(s: &Summary) -> String {
    let mut m = String::new();
    let c = &s.counts;
    let _ = writeln!(m, "# ffsck-lab fuzz, seed {}\n", s.seed);
    let _ = writeln!(
        m,
        "{} cases ({} run now), {} with a built image, {} damaged (e2fsck -fn dirty).\n",
        s.cases, s.ran_now, c.cases, c.damaged
    );
    let _ = writeln!(m, "| counter | cases |\n|---|---:|");
    for k in Check::ALL {
        let _ = writeln!(
            m,
            "| {} | {} |",
            k.name(),
            c.checks.get(&k.name()).copied().unwrap_or(0)
        );
    }
    let _ = writeln!(m, "| failing (any) | {} |", c.failing);
    let _ = writeln!(
        m,
        "\nOne-run repair of damaged images: e2fsck {} ({}), ffsck {} ({}); e2fsck's two runs {} ({}).\n",
        c.e2fsck_one_run_repairs,
        pct(c.e2fsck_one_run_repairs, c.damaged),
        c.ffsck_one_run_repairs,
        pct(c.ffsck_one_run_repairs, c.damaged),
        c.e2fsck_two_runs_repair,
        pct(c.e2fsck_two_runs_repair, c.damaged),
    );
    for (title, map) in [("damage class", &s.per_class), ("profile", &s.per_profile)] {
        let _ = writeln!(m, "## Per {title}\n");
        m.push_str(TABLE_HEAD);
        for (k, v) in map.iter() {
            m.push_str(&counts_row(k, v));
            m.push('\n');
        }
        m.push('\n');
    }
    let _ = writeln!(m, "## Failing cases\n");
    for f in &s.failures {
        let _ = writeln!(
            m,
            "- case {} `{}` [{}] damage [{}]{}{}\n  - e2fsck -fn {}\n  - ffsck -fn {}\n  - after one -fy, e2fsck -fn on e2fsck's result {}; ffsck -fy {}; e2fsck -fn on ffsck's result {}",
            f.index,
            f.profile,
            f.checks.join(", "),
            f.damage.join(" "),
            f.minimized_steps.map(|n| format!(", minimized to {n} step(s)")).unwrap_or_default(),
            f.regression.as_ref().map(|r| format!(", recipe {r}")).unwrap_or_default(),
            f.e2fsck_n,
            f.ffsck_n,
            f.e2fsck_y_check,
            f.ffsck_y,
            f.ffsck_y_check,
        );
    }
    if !s.build_errors.is_empty() {
        let _ = writeln!(m, "\n## Images that could not be built\n");
        let mut by: BTreeMap<&str, usize> = BTreeMap::new();
        for e in &s.build_errors {
            by.entry(e.as_str()).and_modify(|n| *n += 1).or_insert(1);
        }
        for (e, n) in by {
            let _ = writeln!(
                m,
                "- {e}{}",
                if n > 1 {
                    format!(" (×{n})")
                } else {
                    String::new()
                }
            );
        }
    }
    m
}
