//! The machine-readable report of a run (`--json FILE`, or `--json -` for standard output):
//! one document, described by `docs/ffsck-report.schema.json`, filled as the run goes and
//! written once by [`finish`] on every return after the arguments are parsed (a check, a
//! repair, a clean skip, a refusal, a usage error) or by [`cancelled`] from the signal thread.
//!
//! It is process-wide state (the signal thread must reach it to write a cancelled run's
//! document); every function here does nothing when no report was asked for.

use anyhow::{Context, Result};
use ffsck_check::problem::{Latch, Problem, Prompt};
use ffsck_check::{exit, Finding, Mode, Outcome, Policy};
use ffsck_io::Device;
use serde_json::{json, Value};
use std::io::Write;
use std::os::fd::{FromRawFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::{Instant, SystemTime};

/// The `format` and `version` of the document; the version grows when a field changes
/// meaning or is removed (fields may be added within a version).
pub const FORMAT: &str = "ffsck-report";
pub const VERSION: u32 = 2;

/// What the passes are called in the report (pass 0: journal, superblock, descriptors).
const PASS_NAMES: [&str; 6] = [
    "journal, superblock and group descriptors",
    "inodes, blocks, and sizes",
    "directory structure",
    "directory connectivity",
    "reference counts",
    "group summary information",
];

enum Target {
    File(PathBuf),
    /// The real standard output, kept aside while descriptor 1 is made a copy of stderr.
    Stdout(std::fs::File),
}

struct Report {
    target: Target,
    argv: Vec<String>,
    started: SystemTime,
    clock: Instant,
    device: Option<Value>,
    filesystem: Option<Value>,
    options: Value,
    policy: Policy,
    result: Option<&'static str>,
    skip: Option<Value>,
    check_reason: Option<String>,
    error: Option<String>,
    /// Seconds per pass (summed over a repair's rounds), and whether it ran.
    pass_secs: [Option<f64>; 6],
    current: Option<(u8, Instant)>,
    /// The findings as they were reported: the document's list when the run ends before an
    /// outcome (a cancelled run).
    streamed: Vec<(Problem, Value)>,
    findings: Option<Vec<(Problem, Value)>>,
    summary: Value,
    fatal: Option<String>,
}

static REPORT: Mutex<Option<Report>> = Mutex::new(None);

fn with(f: impl FnOnce(&mut Report)) {
    let mut g = REPORT.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(r) = g.as_mut() {
        f(r);
    }
}

/// Whether a report is being made.
pub fn active() -> bool {
    REPORT.lock().map(|g| g.is_some()).unwrap_or(true)
}

/// Start the report to `path` (`-`: standard output, which from here on is a copy of stderr,
/// so the human output goes there and nothing else reaches the document's stream).
/// `options`: the parsed options (`null` when the command line did not parse).
pub fn begin(path: &Path, options: Value, device: Option<&Path>) -> Result<()> {
    let target = if path == Path::new("-") {
        Target::Stdout(redirect_stdout().context("cannot set standard output aside for --json -")?)
    } else {
        Target::File(path.to_path_buf())
    };
    let device = device.map(|d| {
        json!({
            "given": d.display().to_string(),
            "resolved": std::fs::canonicalize(d).ok().map(|p| p.display().to_string()),
        })
    });
    let r = Report {
        target,
        argv: std::env::args_os()
            .map(|a| a.to_string_lossy().into_owned())
            .collect(),
        started: SystemTime::now(),
        clock: Instant::now(),
        device,
        filesystem: None,
        options,
        policy: Policy::No,
        result: None,
        skip: None,
        check_reason: None,
        error: None,
        pass_secs: [None; 6],
        current: None,
        streamed: Vec::new(),
        findings: None,
        summary: Value::Null,
        fatal: None,
    };
    *REPORT.lock().unwrap_or_else(|e| e.into_inner()) = Some(r);
    Ok(())
}

/// Duplicate descriptor 1 aside (close-on-exec) and make descriptor 1 a copy of stderr.
fn redirect_stdout() -> std::io::Result<std::fs::File> {
    let _ = std::io::stdout().flush();
    // SAFETY: fcntl(F_DUPFD_CLOEXEC) and dup2 act on descriptors only; the new descriptor is
    // owned by the returned File, and descriptors 1 and 2 stay open throughout.
    unsafe {
        let saved = libc::fcntl(1, libc::F_DUPFD_CLOEXEC, 3);
        if saved < 0 {
            return Err(std::io::Error::last_os_error());
        }
        let saved = std::fs::File::from(OwnedFd::from_raw_fd(saved));
        if libc::dup2(2, 1) < 0 {
            return Err(std::io::Error::last_os_error());
        }
        Ok(saved)
    }
}

/// The policy the findings were answered under (for their `answer`).
pub fn policy(p: Policy) {
    with(|r| r.policy = p);
}

/// The number of worker threads the run uses.
pub fn threads_used(n: usize) {
    with(|r| {
        if let Some(o) = r.options.as_object_mut() {
            o.insert("threads_used".into(), json!(n));
        }
    });
}

/// The file system's UUID and label, from the primary superblock when it can be read.
pub fn filesystem(dev: &dyn Device) {
    if !active() {
        return;
    }
    let mut buf = [0u8; 1024];
    if dev.read_at(&mut buf, 1024).is_err() {
        return;
    }
    let Some(sb) = ffsck_format::superblock::RawSuperblock::parse(&buf) else {
        return;
    };
    if sb.s_magic.get() != ffsck_format::EXT2_MAGIC {
        return;
    }
    let v = json!({ "uuid": sb.uuid_string(), "label": sb.label() });
    with(|r| r.filesystem = Some(v));
}

/// Why the run failed (the first reason given is kept).
pub fn error(msg: impl Into<String>) {
    let msg = msg.into();
    with(|r| {
        if r.error.is_none() {
            r.error = Some(msg.trim().to_string());
        }
    });
}

/// The check was skipped: the file system is clean (`line`: what was printed).
pub fn skipped(line: &str) {
    with(|r| {
        r.result = Some("skipped");
        r.skip = Some(json!({ "reason": "clean", "message": line }));
    });
}

/// Why a run without `-f` checked (what was printed).
pub fn check_reason(line: &str) {
    with(|r| r.check_reason = Some(line.trim().to_string()));
}

/// What the run did, when it is not a check (`estimated`, `undo-applied`).
pub fn result(what: &'static str) {
    with(|r| r.result = Some(what));
}

fn end_pass(r: &mut Report) {
    if let Some((p, t)) = r.current.take() {
        let s = &mut r.pass_secs[usize::from(p)];
        *s = Some(s.unwrap_or(0.0) + t.elapsed().as_secs_f64());
    }
}

/// A pass begins (the one before it ends).
pub fn pass_start(pass: u8) {
    with(|r| {
        end_pass(r);
        if usize::from(pass) < PASS_NAMES.len() {
            r.current = Some((pass, Instant::now()));
        }
    });
}

/// A finding as it is reported.
pub fn finding(f: &Finding) {
    with(|r| {
        let v = finding_json(f, r.policy);
        r.streamed.push((f.problem, v));
    });
}

/// The outcome of the check or repair.
pub fn outcome(o: &Outcome) {
    with(|r| {
        end_pass(r);
        let policy = r.policy;
        r.findings = Some(
            o.findings
                .iter()
                .flat_map(Finding::each)
                .map(|f| (f.problem, finding_json(&f, policy)))
                .collect(),
        );
        r.summary = serde_json::to_value(&o.summary).unwrap_or(Value::Null);
        r.fatal.clone_from(&o.fatal);
        if r.result.is_none() {
            r.result = Some("checked");
        }
    });
}

fn finding_json(f: &Finding, policy: Policy) -> Value {
    let info = f.problem.info();
    // None for ffsck's own problems: e2fsck has no problem code for them.
    let e2fsck_code = info.e2fsck_code.map(|c| format!("0x{c:06x}"));
    let answer = match (info.prompt, f.fixed) {
        (Prompt::None, _) => "none",
        (_, false) => "no",
        (_, true) if policy.mode == Mode::Preen => "preen",
        (_, true) => "yes",
    };
    json!({
        "code": info.name,
        "e2fsck_code": e2fsck_code,
        "pass": f.problem.pass(),
        "message": f.message(),
        "answer": answer,
        "fixed": f.fixed,
        "ctx": f.ctx,
    })
}

/// The findings' messages as a reader of the document wants them: each trimmed (no line
/// ends, no leading blanks), and the pieces e2fsck prints on one line made whole. A line of
/// bitmap differences (or of an inode's multiply-claimed blocks) is a header, one finding
/// per difference and a closing finding that holds the question: the header and the closing
/// finding carry the whole line ("Block bitmap differences: -(1173--1180) +2000"), and each
/// difference is told with its header ("Block bitmap differences: -(1173--1180)").
fn whole_messages(findings: Vec<(Problem, Value)>) -> Vec<Value> {
    let mut out: Vec<Value> = Vec::with_capacity(findings.len());
    // The line being assembled: its header's text, the line so far, and the header's place.
    let mut line: Option<(String, String, usize)> = None;
    for (p, mut v) in findings {
        let msg = v["message"].as_str().unwrap_or_default().to_string();
        // The latch group of a line e2fsck prints in pieces: its header, members and end.
        let latch = Latch::ALL
            .iter()
            .copied()
            .filter(|l| l.end().is_some())
            .find(|&l| l.question() == p || l.end() == Some(p) || p.latch() == Some(l));
        let whole = match latch {
            Some(l) if p == l.question() => {
                let header = msg.trim().to_string();
                line = Some((header.clone(), header.clone(), out.len()));
                header
            }
            Some(l) if Some(p) == l.end() => match line.take() {
                Some((_, text, _)) => text,
                None => msg.trim().to_string(),
            },
            Some(_) => match line.as_mut() {
                Some((header, text, at)) => {
                    let piece = msg.trim();
                    text.push(' ');
                    text.push_str(piece);
                    out[*at]["message"] = Value::String(text.clone());
                    format!("{header} {piece}")
                }
                None => msg.trim().to_string(),
            },
            None => msg.trim().to_string(),
        };
        v["message"] = Value::String(whole);
        out.push(v);
    }
    out
}

fn rfc3339(t: SystemTime) -> String {
    time::OffsetDateTime::from(t)
        .format(&time::format_description::well_known::Rfc3339)
        .unwrap_or_default()
}

fn document(mut r: Report, code: i32) -> (Target, Vec<u8>) {
    end_pass(&mut r);
    let result = r.result.unwrap_or(if code & exit::USAGE != 0 {
        "usage-error"
    } else {
        "error"
    });
    let error = r.error.or_else(|| r.fatal.clone()).or_else(|| {
        (result == "error" || code & exit::ERROR != 0).then(|| format!("exit code {code}"))
    });
    let passes: Vec<Value> = r
        .pass_secs
        .iter()
        .enumerate()
        .filter_map(|(i, s)| s.map(|s| json!({ "pass": i, "name": PASS_NAMES[i], "seconds": s })))
        .collect();
    let finished = SystemTime::now();
    let v = json!({
        "format": FORMAT,
        "version": VERSION,
        "tool": {
            "name": "ffsck",
            "version": env!("CARGO_PKG_VERSION"),
            "follows_e2fsck": crate::args::FOLLOWS_E2FSCK,
        },
        "argv": r.argv,
        "device": r.device,
        "filesystem": r.filesystem,
        "started": rfc3339(r.started),
        "finished": rfc3339(finished),
        "elapsed_seconds": r.clock.elapsed().as_secs_f64(),
        "options": r.options,
        "result": result,
        "skip": r.skip,
        "check_reason": r.check_reason,
        "error": error,
        "fatal": r.fatal,
        "passes": passes,
        "findings": whole_messages(r.findings.unwrap_or(r.streamed)),
        "summary": r.summary,
        "exit_code": code,
    });
    let mut text = serde_json::to_vec_pretty(&v).unwrap_or_default();
    text.push(b'\n');
    (r.target, text)
}

fn write(target: Target, text: &[u8]) -> Result<()> {
    match target {
        Target::File(path) => {
            std::fs::write(&path, text).with_context(|| format!("cannot write {}", path.display()))
        }
        Target::Stdout(mut f) => f
            .write_all(text)
            .and_then(|()| f.flush())
            .context("cannot write the JSON report to standard output"),
    }
}

/// Write the document with the run's exit code (once; later calls do nothing). The lock is
/// held while writing, so a signal cannot end the process with half a document.
pub fn finish(code: i32) -> Result<()> {
    let mut g = REPORT.lock().unwrap_or_else(|e| e.into_inner());
    let Some(r) = g.take() else {
        return Ok(());
    };
    let (target, text) = document(r, code);
    write(target, &text)
}

/// The run was cancelled by `signal` (it exits 32 next): the document says so, with the
/// findings reported until then.
pub fn cancelled(signal: &str, what: &str) {
    let mut g = REPORT.lock().unwrap_or_else(|e| e.into_inner());
    let Some(mut r) = g.take() else {
        return;
    };
    r.result = Some("cancelled");
    r.error = Some(format!("interrupted by {signal}; {what}"));
    let (target, text) = document(r, exit::CANCELED);
    let _ = write(target, &text);
}
