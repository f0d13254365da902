//! One fuzz case, run on a damaged image: `e2fsck -fn`; `ffsck -fn` at 1 and N threads; one
//! and two `e2fsck -fy` (each judged by `e2fsck -fn`); one `ffsck -fy`, then `e2fsck -fn` and
//! `ffsck -fn` on its result; and the file trees (path, type, size, content, from `debugfs
//! rdump`) of ffsck's result against e2fsck's.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use anyhow::{Context, Result};
use serde::{Deserialize, Serialize};

use crate::child;

/// The programs and limits every case uses.
#[derive(Debug, Clone)]
pub struct Tools {
    pub ffsck: PathBuf,
    pub e2fsck: PathBuf,
    pub debugfs: PathBuf,
    pub dumpe2fs: PathBuf,
    pub mke2fs: PathBuf,
    /// ffsck's thread count for the N-thread `-fn` run.
    pub threads: usize,
    pub timeout: Duration,
    /// The clock every run of a case is given (`E2FSCK_TIME`, which both checkers read; 0:
    /// none): the times a repair stamps (a cleared inode's deletion time, in a block a clone
    /// copies) are then the same in both results. [`run_case`] sets it when the case's runs
    /// begin, after its image was built, so no time the image holds is in its future.
    pub now: u64,
}

/// One program run on one image.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Run {
    /// Exit code; `None` when killed (timeout or signal).
    pub exit: Option<i32>,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub timed_out: bool,
    /// Killed by a signal, or a Rust panic (exit 101, "panicked").
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub crashed: bool,
    /// The image's bytes changed (only checked for `-n` runs).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub modified: bool,
    /// The first lines of output that say something (banner, pass headers and the summary
    /// line left out), joined with ` | `.
    pub line: String,
    /// The problem codes of ffsck's findings (its `--json` report), for the run that asks.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub codes: Vec<String>,
}

impl Run {
    /// Exited 0.
    pub fn clean(&self) -> bool {
        self.exit == Some(0)
    }
    /// Exit code or `timeout`/`signal`, for one-line reports.
    pub fn code(&self) -> String {
        match (self.exit, self.timed_out) {
            (_, true) => "timeout".into(),
            (Some(c), _) => c.to_string(),
            (None, _) => "killed".into(),
        }
    }
}

/// Every run of a case.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Runs {
    pub e2fsck_n: Run,
    pub ffsck_n1: Run,
    pub ffsck_nn: Run,
    pub e2fsck_y1: Run,
    pub e2fsck_y1_check: Run,
    pub e2fsck_y2: Run,
    pub e2fsck_y2_check: Run,
    pub ffsck_y: Run,
    pub ffsck_y_check_e2fsck: Run,
    pub ffsck_y_check_ffsck: Run,
    /// What e2fsck's repair (both runs) keeps and ffsck's does not; `None` when a tree could
    /// not be read or e2fsck aborted.
    pub lost: Option<Vec<String>>,
}

/// The summary line of a checker's output.
fn summary_line(text: &str) -> String {
    let mut picked = Vec::new();
    for l in text.lines().map(str::trim) {
        if l.is_empty()
            || l.starts_with("e2fsck 1.")
            || l.starts_with("ffsck ")
            || l.starts_with("Pass ")
            || l.contains(" files (")
            || l.contains("WARNING: Filesystem still has errors")
            || l.starts_with("*****")
        {
            continue;
        }
        picked.push(l);
        if picked.len() == 3 {
            break;
        }
    }
    let mut s = picked.join(" | ");
    if s.len() > 300 {
        let mut cut = 300;
        while !s.is_char_boundary(cut) {
            cut -= 1;
        }
        s.truncate(cut);
        s.push('…');
    }
    s
}

/// A quick content hash of a (sparse, few MiB) image.
fn hash(path: &Path) -> u64 {
    std::fs::read(path).map_or(0, |b| {
        ffsck_format::csum::ext4_crc32c(0, &b) as u64 | ((b.len() as u64) << 32)
    })
}

impl Tools {
    /// Runs `prog args… [-j journal] image` with output to `log`.
    fn run(
        &self,
        prog: &Path,
        args: &[&str],
        image: &Path,
        journal: Option<&Path>,
        log: &Path,
        read_only: bool,
    ) -> Result<Run> {
        let before = read_only.then(|| hash(image));
        let out = std::fs::File::create(log)?;
        let mut cmd = Command::new(prog);
        cmd.args(args);
        if let Some(j) = journal {
            cmd.arg("-j").arg(j);
        }
        cmd.arg(image)
            .stdin(Stdio::null())
            .stdout(Stdio::from(out.try_clone()?))
            .stderr(Stdio::from(out))
            .env("E2FSCK_CONFIG", "/dev/null")
            .env("FFSCK_CONFIG", "/dev/null");
        if self.now != 0 {
            cmd.env("E2FSCK_TIME", self.now.to_string());
        }
        let o = child::run(&mut cmd, Some(self.timeout))
            .with_context(|| format!("running {}", prog.display()))?;
        let text = String::from_utf8_lossy(&std::fs::read(log).unwrap_or_default()).into_owned();
        let is_ffsck = prog == self.ffsck;
        Ok(Run {
            exit: o.code(),
            timed_out: o.timed_out,
            crashed: o.signal().is_some()
                || (is_ffsck && (o.code() == Some(101) || text.contains("panicked"))),
            modified: before.is_some_and(|h| h != hash(image)),
            line: summary_line(&text),
            codes: Vec::new(),
        })
    }
}

/// The problem codes of the findings in an ffsck `--json` report (none when it is missing or
/// unreadable: a crash, a timeout).
fn finding_codes(report: &Path) -> Vec<String> {
    let Ok(text) = std::fs::read_to_string(report) else {
        return Vec::new();
    };
    let Ok(v) = serde_json::from_str::<serde_json::Value>(&text) else {
        return Vec::new();
    };
    v["findings"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|f| f["code"].as_str().map(str::to_owned))
        .collect()
}

/// Seconds since the epoch, as the checkers would read the clock themselves.
#[allow(clippy::disallowed_methods)] // the wall clock, given to both checkers as one value
fn wall_clock() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// Copies the image (and its external journal) to `name.img` (`name.journal`).
fn copy(
    image: &Path,
    journal: Option<&Path>,
    dir: &Path,
    name: &str,
) -> Result<(PathBuf, Option<PathBuf>)> {
    let img = dir.join(format!("{name}.img"));
    std::fs::copy(image, &img).with_context(|| format!("copying to {}", img.display()))?;
    let j = match journal {
        Some(j) => {
            let p = dir.join(format!("{name}.journal"));
            std::fs::copy(j, &p)?;
            Some(p)
        }
        None => None,
    };
    Ok((img, j))
}

/// Runs every check of a case on the damaged `image` (left unchanged unless a `-n` run
/// writes to it, which is what `modified` records). `base` is the image before the damage:
/// the file comparison reads it when the two results differ (see
/// [`crate::repair_conformance::lost`]). Works in `dir`.
pub fn run_case(
    t: &Tools,
    image: &Path,
    journal: Option<&Path>,
    base: Option<&Path>,
    dir: &Path,
) -> Result<Runs> {
    let t = &Tools {
        now: wall_clock(),
        ..t.clone()
    };
    let log = |n: &str| dir.join(format!("{n}.log"));
    let threads = t.threads.to_string();
    let report = dir.join("ffsck-n1.json");
    let report_arg = report.to_string_lossy().into_owned();
    let mut r = Runs {
        e2fsck_n: t.run(&t.e2fsck, &["-fn"], image, journal, &log("e2fsck-n"), true)?,
        ffsck_n1: t.run(
            &t.ffsck,
            &["-fn", "--threads", "1", "--json", &report_arg],
            image,
            journal,
            &log("ffsck-n1"),
            true,
        )?,
        ffsck_nn: t.run(
            &t.ffsck,
            &["-fn", "--threads", &threads],
            image,
            journal,
            &log("ffsck-nn"),
            true,
        )?,
        ..Runs::default()
    };
    r.ffsck_n1.codes = finding_codes(&report);
    let (e2, e2j) = copy(image, journal, dir, "e2fsck")?;
    let e2j = e2j.as_deref();
    r.e2fsck_y1 = t.run(&t.e2fsck, &["-fy"], &e2, e2j, &log("e2fsck-y1"), false)?;
    r.e2fsck_y1_check = t.run(
        &t.e2fsck,
        &["-fn"],
        &e2,
        e2j,
        &log("e2fsck-y1-check"),
        false,
    )?;
    r.e2fsck_y2 = t.run(&t.e2fsck, &["-fy"], &e2, e2j, &log("e2fsck-y2"), false)?;
    r.e2fsck_y2_check = t.run(
        &t.e2fsck,
        &["-fn"],
        &e2,
        e2j,
        &log("e2fsck-y2-check"),
        false,
    )?;
    let (ff, ffj) = copy(image, journal, dir, "ffsck")?;
    let ffj = ffj.as_deref();
    r.ffsck_y = t.run(&t.ffsck, &["-fy"], &ff, ffj, &log("ffsck-y"), false)?;
    r.ffsck_y_check_e2fsck = t.run(
        &t.e2fsck,
        &["-fn"],
        &ff,
        ffj,
        &log("ffsck-y-check-e2fsck"),
        false,
    )?;
    r.ffsck_y_check_ffsck = t.run(
        &t.ffsck,
        &["-fn"],
        &ff,
        ffj,
        &log("ffsck-y-check-ffsck"),
        false,
    )?;
    // e2fsck's result is the reference only when it finished its repair.
    let e2_finished = r.e2fsck_y2.exit.is_some_and(|c| c & 8 == 0) && r.e2fsck_y2_check.clean();
    if e2_finished {
        let ours = crate::repair_conformance::tree_of(&t.debugfs, t.timeout, &ff, dir, "ffsck");
        let theirs = crate::repair_conformance::tree_of(&t.debugfs, t.timeout, &e2, dir, "e2fsck");
        if let (Some(o), Some(th)) = (ours, theirs) {
            let mut lost = crate::repair_conformance::lost(&o, &th, None);
            // Only a difference needs the tree before the damage, to tell content e2fsck
            // kept from content it changed or made up.
            if !lost.is_empty() {
                let before = base.and_then(|b| {
                    crate::repair_conformance::tree_of(&t.debugfs, t.timeout, b, dir, "original")
                });
                if let Some(before) = before {
                    lost = crate::repair_conformance::lost(&o, &th, Some(&before));
                }
            }
            r.lost = Some(lost);
        }
    }
    for p in [&e2, &ff] {
        let _ = std::fs::remove_file(p);
    }
    Ok(r)
}
