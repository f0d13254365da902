//! `ffsck-lab conformance --messages`: output parity with e2fsck. Per corpus image, runs
//! `ffsck -fy -N test_filesys` (as e2fsprogs' test scripts run e2fsck), appends the
//! "Exit status is N" line, filters volatile parts as e2fsprogs' `tests/filter.sed` does, and
//! compares the text with the test's `expect.1` (and the second run with `expect.2`).
//!
//! The installed e2fsck runs the same way, and ffsck's output is also compared with its output:
//! that is the parity the tool promises (e2fsck 1.47's own output on the same image), while
//! `expect.1` may come from a test script that used other options or a prepared setup (the row
//! then says e2fsck does not reproduce it either). Images where ffsck differs on purpose are listed with the reason instead of being
//! counted as misses.

use std::collections::BTreeSet;
use std::fs::File;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::Duration;

use anyhow::{bail, Context, Result};
use serde::Serialize;

use crate::child;
use crate::conformance::{gunzip_to, list_tests, test_name, ConformanceArgs};
use crate::tools;

/// The device name the runs print, as e2fsprogs' `run_e2fsck` passes with `-N`.
const DEVICE_NAME: &str = "test_filesys";

/// Images where ffsck's output differs from e2fsck's on purpose, and why. A row listed here is
/// reported with its reason and not counted as a miss.
pub const DELIBERATE: &[(&str, &str)] = &[];

/// Lines ffsck prints on purpose where e2fsck prints nothing (by their start, after
/// filtering), and why. They are taken out of ffsck's output before the comparison, and the
/// row lists the reason.
pub const DELIBERATE_LINES: &[(&str, &str)] = &[(
    "PROG: not committing the repair through the journal: ",
    "ffsck commits a repair through the journal when it can, and says where it cannot \
     (e2fsck always writes in place, silently)",
)];

/// One image's comparison.
#[derive(Debug, Clone, Serialize)]
pub struct MessageRow {
    pub name: String,
    /// ffsck's first run equals expect.1 line for line (after filtering).
    pub identical: bool,
    /// Jaccard similarity of the two runs' sets of lines.
    pub jaccard: f64,
    /// The same for the second run against expect.2 (None when the test has no expect.2).
    pub identical_second: Option<bool>,
    /// The installed e2fsck's first run equals expect.1 (None when e2fsck was not run).
    pub e2fsck_identical: Option<bool>,
    /// Why ffsck differs on purpose, for images in [`DELIBERATE`].
    pub deliberate: Option<String>,
    /// Lines ffsck printed on purpose that were left out of the comparison: their reasons.
    pub deliberate_lines: Vec<String>,
    /// Lines of expect.1 that ffsck did not print, and lines ffsck printed that expect.1 lacks
    /// (the first few of each).
    pub missing: Vec<String>,
    pub extra: Vec<String>,
    pub ffsck_exit: Option<i32>,
    /// ffsck's first run against the installed e2fsck's first run (None when it was not run).
    pub vs_e2fsck: Option<Versus>,
}

/// One output compared with another.
#[derive(Debug, Clone, Serialize)]
pub struct Versus {
    pub identical: bool,
    pub jaccard: f64,
    /// The other's lines ffsck did not print, and ffsck's lines the other lacks (a few).
    pub missing: Vec<String>,
    pub extra: Vec<String>,
}

#[derive(Debug, Clone, Default, Serialize)]
pub struct MessageSummary {
    pub images: usize,
    pub identical: usize,
    pub identical_pct: f64,
    pub mean_jaccard: f64,
    pub identical_second: usize,
    /// Images whose expect.1 the installed e2fsck reproduces: the reachable ones.
    pub e2fsck_identical: usize,
    /// Among those, images where ffsck is identical too.
    pub identical_where_e2fsck_is: usize,
    pub deliberate: usize,
    /// Images where deliberate lines of ffsck's own were left out of the comparison.
    pub deliberate_lines: usize,
    /// Differing images not explained by [`DELIBERATE`] nor by e2fsck's own drift.
    pub misses: usize,
    /// Images compared with the installed e2fsck's own output, identical ones, the mean
    /// Jaccard over them.
    pub e2fsck_runs: usize,
    pub identical_to_e2fsck: usize,
    pub mean_jaccard_e2fsck: f64,
}

#[derive(Debug, Clone, Serialize)]
pub struct MessageReport {
    pub summary: MessageSummary,
    pub ffsck: PathBuf,
    pub e2fsck: Option<PathBuf>,
    pub rows: Vec<MessageRow>,
    pub errors: Vec<(String, String)>,
}

/// CLI entry: run, print the Markdown summary, optionally write JSON.
pub fn main(args: &ConformanceArgs) -> Result<()> {
    let report = run(args)?;
    print!("{}", render(&report));
    if let Some(path) = &args.json {
        let mut out = std::io::BufWriter::new(
            File::create(path).with_context(|| format!("creating {}", path.display()))?,
        );
        serde_json::to_writer_pretty(&mut out, &report)?;
        out.write_all(b"\n")?;
        out.flush()?;
        eprintln!("wrote {}", path.display());
    }
    Ok(())
}

/// e2fsprogs' `tests/filter.sed`, re-expressed for checker output: `None` drops the line.
/// The program name that prefixes some lines (`../e2fsck/e2fsck:` in the expect files,
/// `e2fsck:` or `ffsck:` live) becomes `PROG:`, so the tool's own name is not a difference.
pub fn filter_line(line: &str) -> Option<String> {
    let line = line.replace('\r', "");
    let banner = |tool: &str| {
        line.strip_prefix(tool)
            .and_then(|r| r.strip_prefix(' '))
            .is_some_and(|r| r.starts_with(|c: char| c.is_ascii_digit()) && r.contains(" ("))
    };
    let tools = [
        "debugfs",
        "dumpe2fs",
        "e2fsck",
        "mke2fs",
        "resize2fs",
        "tune2fs",
    ];
    if tools.iter().any(|t| banner(t)) || banner("e2image") || banner("ffsck") {
        return None;
    }
    const DROP_ANYWHERE: [&str; 5] = [
        "automatically checked",
        "Discarding device blocks",
        "security.selinux",
        "whichever comes first",
        "JFS DEBUG:",
    ];
    const DROP_PREFIX: [&str; 13] = [
        "Directory Hash Seed:",
        "Filesystem created:",
        "Filesystem flags:",
        "Filesystem UUID:",
        "Last write time:",
        "Last mount time:",
        "Last checked:",
        "Lifetime writes:",
        "Maximum mount count:",
        "Next check after:",
        "Suggestion:",
        "  Checksum ",
        "Checksum",
    ];
    if DROP_ANYWHERE.iter().any(|s| line.contains(s))
        || DROP_PREFIX.iter().any(|p| line.starts_with(p))
    {
        return None;
    }
    let mut line = strip_csums(&line);
    // The checker's name as it was run: a bare name or a path (`/usr/sbin/e2fsck`).
    if let Some((first, rest)) = line.split_once(' ') {
        let name = first
            .strip_suffix(':')
            .map(|n| n.rsplit('/').next().unwrap_or(n));
        if matches!(name, Some("e2fsck" | "ffsck")) {
            line = format!("PROG: {rest}");
        }
    }
    // The advice names the checker to run again with -b (after a bad superblock, and in the
    // relocation hint: "running e2fsck with the '-b 8193' option first").
    if line.contains("<device>")
        || line.contains(" with an alternate superblock")
        || line.contains(" with the '-b ")
    {
        line = line.replace("e2fsck", "PROG").replace("ffsck", "PROG");
    }
    // e2fsck says "Restarting e2fsck from the beginning...", ffsck names itself.
    for tool in ["e2fsck", "ffsck"] {
        if line == format!("Restarting {tool} from the beginning...") {
            line = "Restarting PROG from the beginning...".into();
        }
    }
    line = replace_word_after(&line, "while trying to open ", "test.img");
    line = replace_word_after(&line, "he filesystem on ", "test.img");
    if let Some((first, rest)) = line.split_once(' ') {
        let kind = rest
            .strip_prefix("contains a ")
            .and_then(|r| r.split_once(' '));
        if let Some((kind, tail)) = kind {
            if !first.is_empty()
                && kind.bytes().all(|b| b.is_ascii_lowercase())
                && tail.starts_with("file system ")
            {
                line = format!("test.img contains a {kind} {tail}");
            }
        }
    }
    Some(line)
}

/// Removes ", csum 0xHEX" and " csum 0xHEX" (filter.sed's two checksum rules).
fn strip_csums(line: &str) -> String {
    let mut out = line.to_string();
    for pat in [", csum 0x", " csum 0x"] {
        // Bounded: each round removes one occurrence.
        while let Some(at) = out.find(pat) {
            let hex_start = at + pat.len();
            let hex_len = out[hex_start..]
                .bytes()
                .take_while(u8::is_ascii_hexdigit)
                .count();
            out.replace_range(at..hex_start + hex_len, "");
        }
    }
    out
}

/// Replaces the word (up to the next space) after `marker` with `with`.
fn replace_word_after(line: &str, marker: &str, with: &str) -> String {
    let Some(at) = line.find(marker) else {
        return line.to_string();
    };
    let start = at + marker.len();
    let end = line[start..].find(' ').map_or(line.len(), |i| start + i);
    format!("{}{with}{}", &line[..start], &line[end..])
}

/// A whole output, filtered.
pub fn filter_text(text: &str) -> Vec<String> {
    text.lines().filter_map(filter_line).collect()
}

/// Jaccard similarity of two texts' sets of lines (1 when both are empty).
pub fn line_jaccard(a: &[String], b: &[String]) -> f64 {
    let a: BTreeSet<&String> = a.iter().collect();
    let b: BTreeSet<&String> = b.iter().collect();
    let union = a.union(&b).count();
    if union == 0 {
        return 1.0;
    }
    a.intersection(&b).count() as f64 / union as f64
}

/// Runs `prog -fy -N test_filesys image` with stdout and stderr in one stream, as the test
/// scripts capture it, and returns the text with "Exit status is N" appended.
fn run_fy(
    prog: &Path,
    image: &Path,
    out: &Path,
    timeout: Duration,
) -> Result<(String, Option<i32>)> {
    let file = File::create(out)?;
    let mut cmd = Command::new(prog);
    cmd.arg("-fy")
        .arg("-N")
        .arg(DEVICE_NAME)
        .arg(image)
        .env("E2FSCK_CONFIG", "/dev/null")
        .stdin(Stdio::null())
        .stdout(Stdio::from(file.try_clone()?))
        .stderr(Stdio::from(file));
    let outcome = child::run(&mut cmd, Some(timeout))
        .with_context(|| format!("running {}", prog.display()))?;
    let mut text = String::from_utf8_lossy(&std::fs::read(out)?).into_owned();
    let status = match outcome.code() {
        Some(c) => c.to_string(),
        None if outcome.timed_out => "timeout".into(),
        None => format!("signal {}", outcome.signal().unwrap_or(0)),
    };
    text.push_str(&format!("Exit status is {status}\n"));
    Ok((text, outcome.code()))
}

fn read_expect(dir: &Path, n: u8) -> Option<Vec<String>> {
    let plain = dir.join(format!("expect.{n}"));
    if let Ok(t) = std::fs::read(&plain) {
        return Some(filter_text(&String::from_utf8_lossy(&t)));
    }
    let gz = dir.join(format!("expect.{n}.gz"));
    let f = File::open(gz).ok()?;
    let mut s = Vec::new();
    std::io::Read::read_to_end(&mut flate2::read::MultiGzDecoder::new(f), &mut s).ok()?;
    Some(filter_text(&String::from_utf8_lossy(&s)))
}

/// The first `max` lines of `a` missing from `b`.
fn missing_from(a: &[String], b: &[String], max: usize) -> Vec<String> {
    let b: BTreeSet<&String> = b.iter().collect();
    let mut seen = BTreeSet::new();
    a.iter()
        .filter(|l| !b.contains(l) && seen.insert(*l))
        .take(max)
        .cloned()
        .collect()
}

fn compare_image(
    dir: &Path,
    ffsck: &Path,
    e2fsck: Option<&Path>,
    timeout: Duration,
    workdir: &Path,
) -> Result<MessageRow> {
    let name = test_name(dir);
    let expect1 = read_expect(dir, 1).context("no expect.1")?;
    let expect2 = read_expect(dir, 2);
    let tmp = tempfile::Builder::new()
        .prefix(&format!("ffsck-lab-msg-{name}-"))
        .tempdir_in(workdir)?;
    let image = tmp.path().join("image");
    gunzip_to(&dir.join("image.gz"), &image)?;
    let e2_first = match e2fsck {
        Some(e2) => {
            let e2_image = tmp.path().join("e2image");
            std::fs::copy(&image, &e2_image)?;
            let (text, _) = run_fy(e2, &e2_image, &tmp.path().join("e2.out"), timeout)?;
            Some(filter_text(&text))
        }
        None => None,
    };
    let e2fsck_identical = e2_first.as_ref().map(|t| *t == expect1);
    let (first, ffsck_exit) = run_fy(ffsck, &image, &tmp.path().join("ff1.out"), timeout)?;
    let mut notes = BTreeSet::new();
    let first: Vec<String> = filter_text(&first)
        .into_iter()
        .filter(
            |l| match DELIBERATE_LINES.iter().find(|(p, _)| l.starts_with(p)) {
                Some((_, why)) => {
                    notes.insert(why.to_string());
                    false
                }
                None => true,
            },
        )
        .collect();
    let identical_second = match &expect2 {
        Some(e2) => {
            let (second, _) = run_fy(ffsck, &image, &tmp.path().join("ff2.out"), timeout)?;
            let second: Vec<String> = filter_text(&second)
                .into_iter()
                .filter(|l| !DELIBERATE_LINES.iter().any(|(p, _)| l.starts_with(p)))
                .collect();
            Some(second == *e2)
        }
        None => None,
    };
    let deliberate = DELIBERATE
        .iter()
        .find(|(n, _)| *n == name)
        .map(|(_, why)| why.to_string());
    Ok(MessageRow {
        identical: first == expect1,
        jaccard: line_jaccard(&first, &expect1),
        identical_second,
        e2fsck_identical,
        deliberate,
        deliberate_lines: notes.into_iter().collect(),
        missing: missing_from(&expect1, &first, 8),
        extra: missing_from(&first, &expect1, 8),
        ffsck_exit,
        vs_e2fsck: e2_first.map(|e2| Versus {
            identical: first == e2,
            jaccard: line_jaccard(&first, &e2),
            missing: missing_from(&e2, &first, 8),
            extra: missing_from(&first, &e2, 8),
        }),
        name,
    })
}

/// Runs the comparison on every image of the corpus.
pub fn run(args: &ConformanceArgs) -> Result<MessageReport> {
    if !(args.timeout.is_finite() && args.timeout > 0.0) {
        bail!("--timeout must be a positive number of seconds");
    }
    let ffsck = tools::resolve_ffsck(args.ffsck.as_deref())?;
    let e2fsck = tools::resolve_tool(args.e2fsck.as_deref(), "e2fsck").ok();
    let tests: Vec<PathBuf> = list_tests(&args.corpus, args.only.as_deref(), args.limit)?
        .into_iter()
        .filter(|d| d.join("image.gz").is_file())
        .collect();
    let workdir = args.workdir.clone().unwrap_or_else(std::env::temp_dir);
    let timeout = Duration::from_secs_f64(args.timeout);
    let jobs = args
        .jobs
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()))
        .clamp(1, tests.len().max(1));
    let next = AtomicUsize::new(0);
    let results: Mutex<Vec<(usize, Result<MessageRow>)>> = Mutex::new(Vec::new());
    std::thread::scope(|scope| {
        for _ in 0..jobs {
            scope.spawn(|| loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                let Some(dir) = tests.get(i) else { break };
                let r = compare_image(dir, &ffsck, e2fsck.as_deref(), timeout, &workdir);
                if !args.quiet {
                    match &r {
                        Ok(row) => eprintln!(
                            "{}: {} J={:.2}",
                            row.name,
                            if row.identical {
                                "identical"
                            } else {
                                "differs"
                            },
                            row.jaccard
                        ),
                        Err(e) => eprintln!("{}: harness error: {e:#}", test_name(dir)),
                    }
                }
                results
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .push((i, r));
            });
        }
    });
    let mut results = results.into_inner().unwrap_or_else(|e| e.into_inner());
    results.sort_by_key(|(i, _)| *i);
    let mut rows = Vec::new();
    let mut errors = Vec::new();
    for (i, r) in results {
        match r {
            Ok(row) => rows.push(row),
            Err(e) => errors.push((test_name(&tests[i]), format!("{e:#}"))),
        }
    }
    Ok(MessageReport {
        summary: summarize(&rows),
        ffsck,
        e2fsck,
        rows,
        errors,
    })
}

pub fn summarize(rows: &[MessageRow]) -> MessageSummary {
    let n = rows.len();
    let count = |f: &dyn Fn(&MessageRow) -> bool| rows.iter().filter(|r| f(r)).count();
    let identical = count(&|r| r.identical);
    MessageSummary {
        images: n,
        identical,
        identical_pct: if n == 0 {
            0.0
        } else {
            100.0 * identical as f64 / n as f64
        },
        mean_jaccard: if n == 0 {
            0.0
        } else {
            rows.iter().map(|r| r.jaccard).sum::<f64>() / n as f64
        },
        identical_second: count(&|r| r.identical_second == Some(true)),
        e2fsck_identical: count(&|r| r.e2fsck_identical == Some(true)),
        identical_where_e2fsck_is: count(&|r| r.identical && r.e2fsck_identical == Some(true)),
        deliberate: count(&|r| !r.identical && r.deliberate.is_some()),
        deliberate_lines: count(&|r| !r.deliberate_lines.is_empty()),
        misses: count(&|r| {
            !r.identical && r.deliberate.is_none() && r.e2fsck_identical != Some(false)
        }),
        e2fsck_runs: count(&|r| r.vs_e2fsck.is_some()),
        identical_to_e2fsck: count(&|r| r.vs_e2fsck.as_ref().is_some_and(|v| v.identical)),
        mean_jaccard_e2fsck: {
            let js: Vec<f64> = rows
                .iter()
                .filter_map(|r| r.vs_e2fsck.as_ref().map(|v| v.jaccard))
                .collect();
            if js.is_empty() {
                0.0
            } else {
                js.iter().sum::<f64>() / js.len() as f64
            }
        },
    }
}

/// The Markdown summary and the list of differing images with their reason.
pub fn render(report: &MessageReport) -> String {
    let s = &report.summary;
    let mut out = String::new();
    out.push_str("## Messages: ffsck -fy output vs expect.1 (filtered as tests/filter.sed)\n\n");
    out.push_str(&format!(
        "- images: {}\n- identical: {} ({:.1}%)\n- mean line-set Jaccard: {:.3}\n\
         - second run identical to expect.2: {}\n\
         - e2fsck {} reproduces expect.1 on {} images; ffsck is identical on {} of them\n\
         - deliberate differences: {} images; ffsck's own lines left out on {}\n\
         - misses: {}\n",
        s.images,
        s.identical,
        s.identical_pct,
        s.mean_jaccard,
        s.identical_second,
        "(installed)",
        s.e2fsck_identical,
        s.identical_where_e2fsck_is,
        s.deliberate,
        s.deliberate_lines,
        s.misses
    ));
    for (prefix, why) in DELIBERATE_LINES {
        out.push_str(&format!("- left out: \"{prefix}...\": {why}\n"));
    }
    if s.e2fsck_runs > 0 {
        out.push_str(&format!(
            "\n## Messages: ffsck -fy output vs the installed e2fsck -fy on the same image\n\n\
             - images: {}\n- identical: {} ({:.1}%)\n- mean line-set Jaccard: {:.3}\n",
            s.e2fsck_runs,
            s.identical_to_e2fsck,
            100.0 * s.identical_to_e2fsck as f64 / s.e2fsck_runs as f64,
            s.mean_jaccard_e2fsck
        ));
        out.push_str("\n| image | J vs e2fsck | first difference |\n|---|---|---|\n");
        for r in &report.rows {
            let Some(v) = r.vs_e2fsck.as_ref().filter(|v| !v.identical) else {
                continue;
            };
            let why = format!(
                "-{} +{}",
                v.missing.first().map_or("", |s| s.as_str()),
                v.extra.first().map_or("", |s| s.as_str())
            );
            out.push_str(&format!(
                "| {} | {:.2} | {} |\n",
                r.name,
                v.jaccard,
                why.replace('|', "\\|")
            ));
        }
        out.push_str("\n## Against expect.1\n");
    }
    out.push_str("\n| image | J | why |\n|---|---|---|\n");
    for r in report.rows.iter().filter(|r| !r.identical) {
        let why = match (&r.deliberate, r.e2fsck_identical) {
            (Some(d), _) => format!("deliberate: {d}"),
            (None, Some(false)) => "e2fsck 1.47 -fy does not reproduce expect.1 either".into(),
            _ => format!(
                "miss: -{} +{}",
                r.missing.first().map_or("", |s| s.as_str()),
                r.extra.first().map_or("", |s| s.as_str())
            ),
        };
        out.push_str(&format!(
            "| {} | {:.2} | {} |\n",
            r.name,
            r.jaccard,
            why.replace('|', "\\|")
        ));
    }
    for (name, e) in &report.errors {
        out.push_str(&format!("| {name} | - | harness error: {e} |\n"));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn filter_drops_and_rewrites_volatile_parts() {
        assert_eq!(filter_line("e2fsck 1.47.0 (5-Feb-2023)"), None);
        assert_eq!(filter_line("Last checked: today"), None);
        assert_eq!(
            filter_line("running ffsck with the '-b 8193' option first.  The problem").as_deref(),
            Some("running PROG with the '-b 8193' option first.  The problem")
        );
        assert_eq!(
            filter_line("../e2fsck/e2fsck: Superblock invalid").as_deref(),
            Some("PROG: Superblock invalid")
        );
        assert_eq!(
            filter_line("Restarting e2fsck from the beginning..."),
            filter_line("Restarting ffsck from the beginning...")
        );
        assert_eq!(
            filter_line("ffsck: Superblock invalid").as_deref(),
            Some("PROG: Superblock invalid")
        );
        assert_eq!(
            filter_line("/usr/sbin/e2fsck: Superblock invalid").as_deref(),
            Some("PROG: Superblock invalid")
        );
        assert_eq!(
            filter_line("test_filesys: clean").as_deref(),
            Some("test_filesys: clean")
        );
        assert_eq!(
            filter_line("Inode 12 extent block, csum 0xdeadbeef, bad").as_deref(),
            Some("Inode 12 extent block, bad")
        );
        assert_eq!(
            filter_line("PROG: Bad magic while trying to open /tmp/x.img").as_deref(),
            Some("PROG: Bad magic while trying to open test.img")
        );
        assert_eq!(
            filter_line("/dev/sdb1 contains a xfs file system labelled 'x'").as_deref(),
            Some("test.img contains a xfs file system labelled 'x'")
        );
    }

    #[test]
    fn jaccard_of_line_sets() {
        let a: Vec<String> = ["x", "y"].iter().map(|s| s.to_string()).collect();
        let b: Vec<String> = ["y", "z"].iter().map(|s| s.to_string()).collect();
        assert!((line_jaccard(&a, &b) - 1.0 / 3.0).abs() < 1e-9);
        assert_eq!(line_jaccard(&[], &[]), 1.0);
    }
}
