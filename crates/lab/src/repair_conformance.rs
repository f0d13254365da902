//! `ffsck-lab repair-conformance` (the `conformance` options): for every corpus image, repair one copy with one
//! `ffsck -fy` and another with `e2fsck -fy` run twice, each judged by `e2fsck -fn` (after each
//! e2fsck run). It reports:
//! - **one-run repair**: the images one `ffsck -fy` leaves clean, against those e2fsck's two
//!   runs leave clean (the target is 97% of the latter);
//! - **lost files**: every file, directory or symlink (path, type, size, content) that e2fsck's
//!   repair keeps and ffsck's does not, from `debugfs rdump` of both results (not where e2fsck
//!   aborted: its copy is then no repair to compare with). A file ffsck kept with data where
//!   e2fsck's copy has zeroes (a block e2fsck dropped) counts as kept;
//! - crashes and timeouts of `ffsck -fy`.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::Duration;

use anyhow::{bail, Context, Result};
use serde::Serialize;

use crate::child;
use crate::conformance::{self, ConformanceArgs};
use crate::markdown;
use crate::tools;

/// Most files, and most bytes of file content, taken from one repaired image: a hostile
/// image can hold a huge or looping tree.
const MAX_TREE_FILES: usize = 100_000;
const MAX_TREE_BYTES: u64 = 1 << 30;
/// Lost files listed per image in the report (all are counted).
const MAX_LOST_SHOWN: usize = 5;

/// One tool's repair of one image and the e2fsck -fn check after it.
#[derive(Debug, Clone, Serialize)]
pub struct RepairRun {
    /// `-fy` exit code (`None` when killed).
    pub fy_exit: Option<i32>,
    pub fy_timed_out: bool,
    /// Killed by a signal other than our timeout, or a Rust panic.
    pub fy_crashed: bool,
    pub fy_wall_s: f64,
    /// `e2fsck -fn` exit code on the repaired copy.
    pub after_exit: Option<i32>,
    /// `e2fsck -fn` exited 0.
    pub clean: bool,
    /// e2fsck only: `e2fsck -fn` after a second `-fy` run exited 0.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub clean_after_second: Option<bool>,
}

#[derive(Debug, Clone, Serialize)]
pub struct RepairRow {
    pub name: String,
    pub ffsck: RepairRun,
    pub e2fsck: RepairRun,
    /// Both copies give the same `e2fsck -fn` exit code.
    pub same_check_result: bool,
    /// What e2fsck's repair (both runs) keeps and ffsck's does not: `None` without debugfs
    /// or when either tree could not be read.
    pub lost: Option<Vec<String>>,
    /// Both trees hold the same paths, types, sizes and contents.
    pub same_tree: Option<bool>,
}

impl RepairRow {
    /// e2fsck's two runs leave the image clean: the images the one-run target counts.
    pub fn e2fsck_reaches_clean(&self) -> bool {
        self.e2fsck.clean_after_second.unwrap_or(self.e2fsck.clean)
    }
    /// ffsck's end state matches e2fsck's: both clean, with the same tree when known.
    pub fn end_state_matches(&self) -> bool {
        self.ffsck.clean && self.e2fsck_reaches_clean() && self.same_tree != Some(false)
    }
    fn lost_count(&self) -> usize {
        self.lost.as_ref().map_or(0, Vec::len)
    }
}

#[derive(Debug, Clone, Serialize)]
pub struct RepairSummary {
    pub images: usize,
    pub ffsck_clean: usize,
    pub e2fsck_clean: usize,
    pub both_clean: usize,
    /// e2fsck leaves the image clean but ffsck does not: ffsck's repair to-do list.
    pub only_e2fsck_clean: usize,
    pub only_ffsck_clean: usize,
    pub same_check_result: usize,
    /// Images e2fsck's two `-fy` runs leave clean, and how many of them one ffsck run does.
    pub e2fsck_two_runs_clean: usize,
    pub ffsck_clean_of_those: usize,
    /// Both clean and (where compared) the same tree.
    pub end_state_matches: usize,
    pub trees_compared: usize,
    pub trees_equal: usize,
    /// Files e2fsck's repair keeps and ffsck's does not, over all images.
    pub lost_files: usize,
    pub ffsck_crashes: usize,
    pub ffsck_timeouts: usize,
}

#[derive(Debug, Clone, Serialize)]
pub struct RepairReport {
    pub summary: RepairSummary,
    pub ffsck: PathBuf,
    pub e2fsck: PathBuf,
    pub e2fsck_version: String,
    pub debugfs: Option<PathBuf>,
    pub timeout_s: f64,
    pub images: Vec<RepairRow>,
    pub skipped: Vec<String>,
    pub errors: Vec<conformance::HarnessError>,
}

struct Ctx {
    ffsck: PathBuf,
    e2fsck: PathBuf,
    debugfs: Option<PathBuf>,
    timeout: Duration,
    workdir: PathBuf,
}

/// CLI entry: run, print the Markdown report, optionally write JSON.
pub fn main(args: &ConformanceArgs) -> Result<()> {
    let report = run(args)?;
    print!("{}", render_markdown(&report));
    if let Some(path) = &args.json {
        let json = serde_json::to_string_pretty(&report)? + "\n";
        std::fs::write(path, json).with_context(|| format!("writing {}", path.display()))?;
        eprintln!("wrote {}", path.display());
    }
    Ok(())
}

/// Runs the repair comparison over the corpus.
pub fn run(args: &ConformanceArgs) -> Result<RepairReport> {
    if !(args.timeout.is_finite() && args.timeout > 0.0) {
        bail!("--timeout must be a positive number of seconds");
    }
    let ctx = Ctx {
        ffsck: tools::resolve_ffsck(args.ffsck.as_deref())?,
        e2fsck: tools::resolve_tool(args.e2fsck.as_deref(), "e2fsck")?,
        debugfs: tools::find_in_path("debugfs"),
        timeout: Duration::from_secs_f64(args.timeout),
        workdir: args.workdir.clone().unwrap_or_else(std::env::temp_dir),
    };
    let tests = conformance::list_tests(&args.corpus, args.only.as_deref(), args.limit)?;
    let (runnable, skipped): (Vec<PathBuf>, Vec<PathBuf>) = tests
        .into_iter()
        .partition(|dir| dir.join("image.gz").is_file());
    let jobs = args
        .jobs
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()))
        .clamp(1, runnable.len().max(1));
    let next = AtomicUsize::new(0);
    let finished = AtomicUsize::new(0);
    let results: Mutex<Vec<(usize, Result<RepairRow>)>> = Mutex::new(Vec::new());
    std::thread::scope(|scope| {
        for _ in 0..jobs {
            scope.spawn(|| loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                let Some(dir) = runnable.get(i) else { break };
                let result = repair_image(&ctx, dir);
                let done = finished.fetch_add(1, Ordering::Relaxed) + 1;
                if !args.quiet {
                    let line = match &result {
                        Ok(r) => format!(
                            "{}: ffsck -fy {} → e2fsck -fn {}; e2fsck -fy {} → {}",
                            r.name,
                            code(r.ffsck.fy_exit, r.ffsck.fy_timed_out),
                            code(r.ffsck.after_exit, false),
                            code(r.e2fsck.fy_exit, r.e2fsck.fy_timed_out),
                            code(r.e2fsck.after_exit, false)
                        ),
                        Err(e) => format!("{}: harness error: {e:#}", conformance::test_name(dir)),
                    };
                    eprintln!("[{done}/{}] {line}", runnable.len());
                }
                results
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .push((i, result));
            });
        }
    });
    let mut results = results.into_inner().unwrap_or_else(|e| e.into_inner());
    results.sort_by_key(|(i, _)| *i);
    let mut images = Vec::new();
    let mut errors = Vec::new();
    for (i, r) in results {
        match r {
            Ok(row) => images.push(row),
            Err(e) => errors.push(conformance::HarnessError {
                name: conformance::test_name(&runnable[i]),
                error: format!("{e:#}"),
            }),
        }
    }
    Ok(RepairReport {
        summary: summarize(&images),
        e2fsck_version: tools::version_line(&ctx.e2fsck),
        ffsck: ctx.ffsck,
        e2fsck: ctx.e2fsck,
        debugfs: ctx.debugfs,
        timeout_s: args.timeout,
        images,
        skipped: skipped.iter().map(|d| conformance::test_name(d)).collect(),
        errors,
    })
}

fn code(c: Option<i32>, timed_out: bool) -> String {
    match (c, timed_out) {
        (_, true) => "timeout".into(),
        (Some(c), _) => c.to_string(),
        (None, _) => "killed".into(),
    }
}

/// Runs `prog args… image` with output to `log`.
fn run_tool(
    ctx: &Ctx,
    prog: &Path,
    args: &[&str],
    image: &Path,
    log: &Path,
) -> Result<child::Outcome> {
    let out = std::fs::File::create(log)?;
    let mut cmd = Command::new(prog);
    cmd.args(args)
        .arg(image)
        .stdin(Stdio::null())
        .stdout(Stdio::from(out.try_clone()?))
        .stderr(Stdio::from(out))
        // No problem log or other site configuration may change what e2fsck does.
        .env("E2FSCK_CONFIG", "/dev/null");
    child::run(&mut cmd, Some(ctx.timeout)).with_context(|| format!("running {}", prog.display()))
}

/// `runs` times `prog -fy` on `image`, each judged by `e2fsck -fn`: the first run's result,
/// with the last check's verdict in `clean_after_second` when `runs` is 2.
fn repair_with(
    ctx: &Ctx,
    prog: &Path,
    image: &Path,
    tmp: &Path,
    label: &str,
    runs: usize,
) -> Result<RepairRun> {
    let mut first: Option<RepairRun> = None;
    for n in 1..=runs {
        let log = tmp.join(format!("{label}-fy{n}.log"));
        let fy = run_tool(ctx, prog, &["-fy"], image, &log)?;
        let text = std::fs::read_to_string(&log).unwrap_or_default();
        let after = run_tool(
            ctx,
            &ctx.e2fsck,
            &["-fn"],
            image,
            &tmp.join(format!("{label}-after{n}.log")),
        )?;
        let clean = after.code() == Some(0) && !after.timed_out;
        match &mut first {
            None => {
                first = Some(RepairRun {
                    fy_exit: fy.code(),
                    fy_timed_out: fy.timed_out,
                    fy_crashed: fy.signal().is_some()
                        || (label == "ffsck"
                            && (fy.code() == Some(101) || text.contains("panicked"))),
                    fy_wall_s: fy.wall_s,
                    after_exit: after.code(),
                    clean,
                    clean_after_second: None,
                })
            }
            Some(r) => r.clean_after_second = Some(clean),
        }
    }
    first.context("no repair run")
}

/// A repaired file system's tree, by path: `d` for a directory, `l TARGET` for a symlink,
/// `f SIZE HASH` for a regular file.
pub(crate) type Tree = std::collections::BTreeMap<String, String>;

/// The tree of `image` as `debugfs rdump` extracts it (special files are not extracted), or
/// `None` when debugfs is missing, fails, or the tree is beyond the bounds.
fn tree(ctx: &Ctx, image: &Path, tmp: &Path, label: &str) -> Option<Tree> {
    tree_of(ctx.debugfs.as_ref()?, ctx.timeout, image, tmp, label)
}

/// [`tree`] with the debugfs binary and time limit given (also used by `fuzz`).
pub(crate) fn tree_of(
    debugfs: &Path,
    timeout: Duration,
    image: &Path,
    tmp: &Path,
    label: &str,
) -> Option<Tree> {
    tree_within(debugfs, timeout, image, tmp, label, MAX_TREE_BYTES)
}

/// [`tree_of`] with the byte budget given.
fn tree_within(
    debugfs: &Path,
    timeout: Duration,
    image: &Path,
    tmp: &Path,
    label: &str,
    max_bytes: u64,
) -> Option<Tree> {
    let out = tmp.join(format!("{label}-tree"));
    std::fs::create_dir_all(&out).ok()?;
    let mut cmd = Command::new(debugfs);
    cmd.arg("-R")
        .arg(format!("rdump / {}", out.display()))
        .arg(image)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    // A damaged image can map the same blocks into many files: rdump is stopped as soon as
    // what it wrote (allocated bytes, so holes are free) passes the budget, not after.
    let over = || stored_bytes(&out, MAX_TREE_FILES) > max_bytes;
    let dumped =
        child::run_watched(&mut cmd, Some(timeout), &over).is_ok_and(|run| run.code() == Some(0));
    let tree = dumped.then(|| read_tree(&out, max_bytes)).flatten();
    // Removed whatever happened: a tree left behind in a tmpfs work folder is memory.
    let _ = std::fs::remove_dir_all(&out);
    tree
}

/// The tree rdump wrote under `out`, or `None` past `MAX_TREE_FILES` entries or `max_bytes`
/// of file content.
fn read_tree(out: &Path, max_bytes: u64) -> Option<Tree> {
    let mut tree = Tree::new();
    let mut budget = max_bytes;
    let mut stack = vec![out.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).ok()? {
            let path = entry.ok()?.path();
            if tree.len() >= MAX_TREE_FILES {
                return None;
            }
            let rel = path.strip_prefix(out).ok()?.to_string_lossy().into_owned();
            let meta = std::fs::symlink_metadata(&path).ok()?;
            let what = if meta.is_dir() {
                stack.push(path);
                "d".to_owned()
            } else if meta.file_type().is_symlink() {
                format!("l {}", std::fs::read_link(&path).ok()?.to_string_lossy())
            } else {
                budget = budget.checked_sub(meta.len())?;
                let bytes = std::fs::read(&path).ok()?;
                format!("f {} {}", meta.len(), chunk_hashes(&bytes))
            };
            tree.insert(rel, what);
        }
    }
    Some(tree)
}

/// The bytes the files under `dir` take up (allocated blocks), counting at most `max_files`
/// entries; more entries than that count as over any budget.
fn stored_bytes(dir: &Path, max_files: usize) -> u64 {
    use std::os::unix::fs::MetadataExt;
    let (mut total, mut seen) = (0u64, 0usize);
    let mut stack = vec![dir.to_path_buf()];
    while let Some(dir) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for entry in entries.flatten() {
            seen += 1;
            if seen > max_files {
                return u64::MAX;
            }
            let Ok(meta) = entry.path().symlink_metadata() else {
                continue;
            };
            if meta.is_dir() {
                stack.push(entry.path());
            }
            total = total.saturating_add(meta.blocks().saturating_mul(512));
        }
    }
    total
}

/// FNV-1a over the bytes: enough to tell contents apart in a comparison.
fn content_hash(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325u64, |h, &b| {
        (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3)
    })
}

/// Bytes compared at once: a file's content is a list of chunk hashes.
const CHUNK: usize = 4096;

/// The hash of each `CHUNK` of `bytes`, joined by dots, with `0` for a chunk of zeroes (a hole,
/// or a block a repair dropped).
fn chunk_hashes(bytes: &[u8]) -> String {
    let hashes: Vec<String> = bytes
        .chunks(CHUNK)
        .map(|c| match c.iter().all(|&b| b == 0) {
            true => "0".to_owned(),
            false => format!("{:016x}", content_hash(c)),
        })
        .collect();
    hashes.join(".")
}

/// A file entry's length and chunk hashes (`None` for a directory or symlink).
fn file_chunks(what: &str) -> Option<(&str, Vec<&str>)> {
    let (len, chunks) = what.strip_prefix("f ")?.split_once(' ')?;
    Some((len, chunks.split('.').collect()))
}

/// Whether `ours` keeps everything of `theirs`. `original` is the same path in the image
/// before the damage, when known.
///
/// Kept: the same entry; the entry exactly as it was before the damage (a repair cannot have
/// lost what it left as it was); or the same file (same size) where each chunk of content is
/// either the same, or one `theirs` does not hold as the original did: zeroes (a block
/// e2fsck's repair dropped and ffsck's kept), or content e2fsck's repair changed or made up
/// (words it cleared in a block it took for another inode's indirect block, a block it
/// cloned from another owner). A chunk `theirs` holds as before the damage and `ours` does
/// not is lost, and so is a file whose size or type changed.
fn keeps(ours: &str, theirs: &str, original: Option<&str>) -> bool {
    if ours == theirs || original == Some(ours) {
        return true;
    }
    let (Some((o_len, o_chunks)), Some((t_len, t_chunks))) =
        (file_chunks(ours), file_chunks(theirs))
    else {
        return false;
    };
    // The original's chunks count only for a file of the same size.
    let orig = original
        .and_then(file_chunks)
        .filter(|(len, chunks)| *len == t_len && chunks.len() == t_chunks.len())
        .map(|(_, chunks)| chunks);
    o_len == t_len
        && o_chunks.len() == t_chunks.len()
        && o_chunks
            .iter()
            .zip(&t_chunks)
            .enumerate()
            .all(|(i, (o, t))| {
                o == t || *t == "0" || orig.as_ref().is_some_and(|orig| orig[i] != *t)
            })
}

/// The part of `path` below the entries e2fsck reconnected (`lost+found/#N`, and `#M` in it
/// when lost+found itself was reconnected): `Some("")` for such an entry itself, `Some("x/y")`
/// under it, `None` for a path through no reconnected entry.
fn below_reconnected(path: &str) -> Option<&str> {
    let parts: Vec<&str> = path.split('/').collect();
    let j = parts.iter().position(|p| *p == "lost+found")?;
    let n = parts[j + 1..]
        .iter()
        .take_while(|p| p.starts_with('#'))
        .count();
    if n == 0 {
        return None;
    }
    let head: usize = parts[..=j + n].iter().map(|p| p.len() + 1).sum();
    Some(path.get(head..).unwrap_or(""))
}

/// Whether `ours` holds elsewhere an entry e2fsck reconnected, or holds under it: an entry
/// of the same type and size at a path ending as it does below the reconnected entry, or as
/// its part below any directory under it (any path for the reconnected entry itself), that
/// keeps it ([`keeps`], against what that path held before the damage: e2fsck's copy may hold
/// blocks it cloned after overwriting them). A directory under it is also kept where `ours`
/// holds a directory with every name it holds. e2fsck moves whole subtrees into lost+found
/// (and lost+found into a new one) where ffsck left them in place, and where the two broke a
/// directory loop at different members, each reconnected another of the loop's directories.
fn kept_elsewhere(
    ours: &Tree,
    theirs: &Tree,
    original: Option<&Tree>,
    path: &str,
    what: &str,
) -> bool {
    let Some(tail) = below_reconnected(path) else {
        return false;
    };
    // The tail, then the tail without its first name, and so on down to its last name.
    let tails: Vec<&str> = std::iter::once(tail)
        .chain(tail.match_indices('/').map(|(i, _)| &tail[i + 1..]))
        .collect();
    let same_path = |p: &str| {
        tail.is_empty()
            || tails
                .iter()
                .any(|t| p == *t || p.ends_with(&format!("/{t}")))
    };
    let kept = ours.iter().any(|(p, w)| {
        same_path(p)
            && kind_and_size(w) == kind_and_size(what)
            && keeps(w, what, original.and_then(|t| t.get(p)).map(String::as_str))
    });
    kept || what.starts_with('d') && {
        let names = children(theirs, path);
        !names.is_empty()
            && ours
                .iter()
                .any(|(p, w)| w.starts_with('d') && children(ours, p).is_superset(&names))
    }
}

/// The names directly in directory `dir` of `tree`.
fn children(tree: &Tree, dir: &str) -> std::collections::BTreeSet<String> {
    let prefix = format!("{dir}/");
    tree.range(prefix.clone()..)
        .take_while(|(p, _)| p.starts_with(&prefix))
        .filter_map(|(p, _)| p[prefix.len()..].split('/').next().map(str::to_owned))
        .collect()
}

/// An entry's type and size: the first two words of its description.
fn kind_and_size(what: &str) -> Vec<&str> {
    what.split(' ').take(2).collect()
}

/// Whether `path`, an entry of e2fsck's result that `ours` lacks, is a name e2fsck made up
/// (none before the damage: it rewrote a damaged directory block's names, and maybe blocks
/// of the files they name) for an entry `ours` holds in the same directory under a name it
/// had before the damage and e2fsck's result lacks (the name it rewrote), and keeps there as
/// [`keeps`] judges against that name's original.
fn renamed(ours: &Tree, theirs: &Tree, original: Option<&Tree>, path: &str, what: &str) -> bool {
    let Some(before) = original else {
        return false;
    };
    let parent = |p: &str| p.rsplit_once('/').map_or("", |(d, _)| d).to_owned();
    let dir = parent(path);
    !before.contains_key(path)
        && ours.iter().any(|(p, w)| {
            parent(p) == dir
                && !theirs.contains_key(p)
                && before
                    .get(p)
                    .is_some_and(|b| keeps(w, what, Some(b.as_str())))
        })
}

/// Whether `path`, an entry of e2fsck's result that `ours` lacks, sits under a name the damage
/// made (a `debugfs link` that gave a directory a second name, whose first name e2fsck's
/// salvage then dropped) that ffsck took away where it kept the original: some ancestor-or-self
/// `A` of `path`, a name absent before the damage, whose object `ours` holds at a name `B` it
/// had before the damage and e2fsck's result lacks. `B` is told from other candidates by its
/// being the same exactly (type, size and content) or, for a directory, by holding the same
/// names as `A`; the entry below it must then be the same exactly.
fn moved(ours: &Tree, theirs: &Tree, original: Option<&Tree>, path: &str, what: &str) -> bool {
    let Some(before) = original else {
        return false;
    };
    // Each split of `path` into a made-up name `head` and the part `tail` below it.
    let ends = path.match_indices('/').map(|(i, _)| i).chain([path.len()]);
    ends.filter(|&i| !before.contains_key(&path[..i])).any(|i| {
        let (head, tail) = (&path[..i], &path[i..]);
        let Some(head_what) = theirs.get(head) else {
            return false;
        };
        let is_dir = head_what.starts_with('d');
        let names = children(theirs, head);
        ours.iter().any(|(b, b_what)| {
            let same = match is_dir {
                true => b_what.starts_with('d') && !names.is_empty() && children(ours, b) == names,
                false => b_what == head_what,
            };
            same && before.contains_key(b)
                && !theirs.contains_key(b)
                && ours.get(&format!("{b}{tail}")).is_some_and(|w| w == what)
        })
    })
}

/// The entries of `theirs` that `ours` lacks or holds differently, as "path (what)", judged by
/// [`keeps`] against `original` (the tree before the damage, when known). An entry e2fsck
/// reconnected to lost+found that `ours` lacks there counts as kept when `ours` holds it
/// elsewhere (see [`kept_elsewhere`]).
pub(crate) fn lost(ours: &Tree, theirs: &Tree, original: Option<&Tree>) -> Vec<String> {
    theirs
        .iter()
        .filter(|(path, what)| {
            let before = original.and_then(|t| t.get(*path)).map(String::as_str);
            match ours.get(*path) {
                Some(o) => !keeps(o, what, before),
                None => {
                    !kept_elsewhere(ours, theirs, original, path, what)
                        && !renamed(ours, theirs, original, path, what)
                        && !moved(ours, theirs, original, path, what)
                }
            }
        })
        .map(|(path, what)| {
            let kind = match what.as_bytes().first() {
                Some(b'd') => "directory",
                Some(b'l') => "symlink",
                _ => "file",
            };
            let how = if ours.contains_key(path) {
                "differs"
            } else {
                "missing"
            };
            format!("/{path} ({kind}, {how})")
        })
        .collect()
}

fn repair_image(ctx: &Ctx, dir: &Path) -> Result<RepairRow> {
    let name = conformance::test_name(dir);
    let tmp = tempfile::Builder::new()
        .prefix(&format!("ffsck-lab-repair-{name}-"))
        .tempdir_in(&ctx.workdir)
        .with_context(|| format!("creating a temp dir in {}", ctx.workdir.display()))?;
    let e2_image = tmp.path().join("e2fsck.img");
    let ff_image = tmp.path().join("ffsck.img");
    conformance::gunzip_to(&dir.join("image.gz"), &e2_image)?;
    std::fs::copy(&e2_image, &ff_image).context("copying the unpacked image")?;
    let ffsck = repair_with(ctx, &ctx.ffsck, &ff_image, tmp.path(), "ffsck", 1)?;
    let e2fsck = repair_with(ctx, &ctx.e2fsck, &e2_image, tmp.path(), "e2fsck", 2)?;
    let trees = (
        tree(ctx, &ff_image, tmp.path(), "ffsck"),
        tree(ctx, &e2_image, tmp.path(), "e2fsck"),
    );
    // An e2fsck that aborted (exit 8, or killed) left no repair to compare with: what its
    // copy still holds is what it never got to write.
    let e2fsck_finished = e2fsck.fy_exit.is_some_and(|c| c & 8 == 0);
    let (lost, same_tree) = match trees {
        (Some(ours), Some(theirs)) if e2fsck_finished => {
            (Some(lost(&ours, &theirs, None)), Some(ours == theirs))
        }
        _ => (None, None),
    };
    Ok(RepairRow {
        name,
        same_check_result: ffsck.after_exit.is_some() && ffsck.after_exit == e2fsck.after_exit,
        ffsck,
        e2fsck,
        lost,
        same_tree,
    })
}

pub fn summarize(rows: &[RepairRow]) -> RepairSummary {
    let count = |f: &dyn Fn(&RepairRow) -> bool| rows.iter().filter(|r| f(r)).count();
    RepairSummary {
        images: rows.len(),
        ffsck_clean: count(&|r| r.ffsck.clean),
        e2fsck_clean: count(&|r| r.e2fsck.clean),
        both_clean: count(&|r| r.ffsck.clean && r.e2fsck.clean),
        only_e2fsck_clean: count(&|r| r.e2fsck.clean && !r.ffsck.clean),
        only_ffsck_clean: count(&|r| r.ffsck.clean && !r.e2fsck.clean),
        same_check_result: count(&|r| r.same_check_result),
        e2fsck_two_runs_clean: count(&|r| r.e2fsck_reaches_clean()),
        ffsck_clean_of_those: count(&|r| r.e2fsck_reaches_clean() && r.ffsck.clean),
        end_state_matches: count(&|r| r.end_state_matches()),
        trees_compared: count(&|r| r.same_tree.is_some()),
        trees_equal: count(&|r| r.same_tree == Some(true)),
        lost_files: rows.iter().map(RepairRow::lost_count).sum(),
        ffsck_crashes: count(&|r| r.ffsck.fy_crashed),
        ffsck_timeouts: count(&|r| r.ffsck.fy_timed_out),
    }
}

/// The Markdown report: summary, then every image ffsck leaves worse than e2fsck does.
pub fn render_markdown(r: &RepairReport) -> String {
    let s = &r.summary;
    let mut out =
        String::from("## Repair conformance: ffsck -fy vs e2fsck -fy, judged by e2fsck -fn\n\n");
    out.push_str(&format!(
        "- ffsck: `{}`; e2fsck: `{}` ({}); timeout {} s per run\n\n",
        r.ffsck.display(),
        r.e2fsck.display(),
        r.e2fsck_version,
        r.timeout_s
    ));
    let pct = |a: usize, b: usize| 100.0 * a as f64 / b.max(1) as f64;
    let rows = vec![
        vec!["images".into(), s.images.to_string()],
        vec![
            "**one-run repair**: clean after one ffsck -fy, of those e2fsck -fy (twice) leaves clean \
             [target 97%]"
                .into(),
            format!(
                "**{}/{} ({:.1}%)**",
                s.ffsck_clean_of_those,
                s.e2fsck_two_runs_clean,
                pct(s.ffsck_clean_of_those, s.e2fsck_two_runs_clean)
            ),
        ],
        vec![
            "clean after one ffsck -fy".into(),
            format!("{}/{}", s.ffsck_clean, s.images),
        ],
        vec![
            "clean after one e2fsck -fy".into(),
            format!("{}/{}", s.e2fsck_clean, s.images),
        ],
        vec![
            "clean after two e2fsck -fy".into(),
            format!("{}/{}", s.e2fsck_two_runs_clean, s.images),
        ],
        vec![
            "only e2fsck leaves it clean".into(),
            s.only_e2fsck_clean.to_string(),
        ],
        vec![
            "only ffsck leaves it clean".into(),
            s.only_ffsck_clean.to_string(),
        ],
        vec![
            "**lost files**: kept by e2fsck, not by ffsck (path, type, size, content) [target 0]"
                .into(),
            format!("**{}**", s.lost_files),
        ],
        vec![
            "trees equal (debugfs rdump)".into(),
            format!("{}/{}", s.trees_equal, s.trees_compared),
        ],
        vec![
            "end state matches (both clean, same tree)".into(),
            s.end_state_matches.to_string(),
        ],
        vec![
            "**ffsck -fy crashes / timeouts** [target 0]".into(),
            format!("**{} / {}**", s.ffsck_crashes, s.ffsck_timeouts),
        ],
    ];
    out.push_str(&markdown::table(
        &["measure", "value"],
        &[false, true],
        &rows,
    ));
    let worse: Vec<Vec<String>> = r
        .images
        .iter()
        .filter(|row| {
            (row.e2fsck_reaches_clean() && !row.ffsck.clean)
                || row.lost_count() > 0
                || row.ffsck.fy_crashed
                || row.ffsck.fy_timed_out
        })
        .map(|row| {
            let lost = match &row.lost {
                None => "–".to_owned(),
                Some(l) if l.is_empty() => "0".to_owned(),
                Some(l) => {
                    let shown: Vec<&str> =
                        l.iter().take(MAX_LOST_SHOWN).map(String::as_str).collect();
                    let more = l.len().saturating_sub(MAX_LOST_SHOWN);
                    let tail = if more > 0 {
                        format!(" … and {more} more")
                    } else {
                        String::new()
                    };
                    format!("{}: {}{tail}", l.len(), shown.join(", "))
                }
            };
            vec![
                row.name.clone(),
                code(row.ffsck.fy_exit, row.ffsck.fy_timed_out),
                code(row.ffsck.after_exit, false),
                code(row.e2fsck.fy_exit, row.e2fsck.fy_timed_out),
                match row.e2fsck.clean_after_second {
                    Some(true) => "clean".into(),
                    Some(false) => "not clean".into(),
                    None => "–".into(),
                },
                lost,
            ]
        })
        .collect();
    if !worse.is_empty() {
        out.push_str(&format!(
            "\n### Images ffsck leaves unclean where e2fsck does not, or with lost files: {}\n\n",
            worse.len()
        ));
        out.push_str(&markdown::table(
            &[
                "image",
                "ffsck -fy",
                "then e2fsck -fn",
                "e2fsck -fy",
                "after 2 e2fsck runs",
                "lost files",
            ],
            &[false, true, true, true, false, false],
            &worse,
        ));
    }
    if !r.errors.is_empty() {
        out.push_str("\n### Harness errors\n\n");
        for e in &r.errors {
            out.push_str(&format!("- {}: {}\n", e.name, e.error));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(entries: &[(&str, &str)]) -> Tree {
        entries
            .iter()
            .map(|(p, w)| (p.to_string(), w.to_string()))
            .collect()
    }

    /// A tree bigger than the budget is refused and nothing of the dump is left behind, so a
    /// damaged image that maps the same blocks into many files cannot fill a tmpfs work folder.
    #[test]
    fn a_tree_over_the_budget_is_refused_and_removed() {
        let which = |tool: &str| {
            ["/sbin", "/usr/sbin", "/usr/bin", "/bin"]
                .iter()
                .map(|d| Path::new(d).join(tool))
                .find(|p| p.is_file())
        };
        let (Some(mke2fs), Some(debugfs)) = (which("mke2fs"), which("debugfs")) else {
            eprintln!("SKIP: mke2fs/debugfs not installed");
            return;
        };
        let tmp = tempfile::tempdir().unwrap();
        let src = tmp.path().join("src");
        std::fs::create_dir(&src).unwrap();
        // 4 MiB that no block of zeroes hides: every block is stored by rdump.
        let data: Vec<u8> = (0..4u32 << 20).map(|i| (i % 251) as u8 | 1).collect();
        std::fs::write(src.join("big"), &data).unwrap();
        let image = tmp.path().join("img");
        let made = Command::new(mke2fs)
            .args(["-q", "-F", "-t", "ext4", "-d"])
            .arg(&src)
            .arg(&image)
            .arg("16M")
            .status()
            .unwrap();
        assert!(made.success());
        let work = tmp.path().join("work");
        std::fs::create_dir(&work).unwrap();
        let limit = Duration::from_secs(60);
        let tree = tree_within(&debugfs, limit, &image, &work, "t", 1 << 20);
        assert_eq!(tree, None);
        assert_eq!(
            std::fs::read_dir(&work).unwrap().count(),
            0,
            "dump left behind"
        );
        let tree = tree_within(&debugfs, limit, &image, &work, "t", 8 << 20).unwrap();
        assert!(
            tree["big"].starts_with("f 4194304 "),
            "{:?}",
            tree.get("big")
        );
        assert_eq!(
            std::fs::read_dir(&work).unwrap().count(),
            0,
            "dump left behind"
        );
    }

    #[test]
    fn lost_lists_what_e2fsck_keeps_and_ffsck_does_not() {
        let theirs = t(&[("a", "d"), ("a/f", "f 3 01"), ("l", "l x"), ("g", "f 1 02")]);
        let ours = t(&[
            ("a", "d"),
            ("a/f", "f 3 09"),
            ("l", "l x"),
            ("extra", "f 0 00"),
        ]);
        assert_eq!(
            lost(&ours, &theirs, None),
            vec![
                "/a/f (file, differs)".to_owned(),
                "/g (file, missing)".to_owned()
            ]
        );
        // What only ffsck keeps is not lost.
        assert!(lost(&theirs, &theirs, None).is_empty());
        // Nor a block e2fsck dropped (zeroes) that ffsck kept; but a block ffsck dropped is.
        let theirs = t(&[("f", "f 8193 0.0a.0b")]);
        assert!(lost(&t(&[("f", "f 8193 09.0a.0b")]), &theirs, None).is_empty());
        assert_eq!(lost(&t(&[("f", "f 8193 0.0a.0")]), &theirs, None).len(), 1);
        assert_eq!(
            lost(&t(&[("f", "f 8192 09.0a.0b")]), &theirs, None).len(),
            1
        );
        assert_eq!(chunk_hashes(&[0; 5000]), "0.0");
        assert_ne!(chunk_hashes(b"abc"), "0");
        assert_ne!(content_hash(b"abc"), content_hash(b"abd"));
    }

    #[test]
    fn what_e2fsck_reconnected_and_ffsck_kept_in_place_is_not_lost() {
        // e2fsck lost the root's '..', reconnected its directories, and then lost+found itself
        // into a new lost+found (seed 1000, case 234); ffsck kept the tree in place.
        let theirs = t(&[
            ("lost+found", "d"),
            ("lost+found/#42", "d"),
            ("lost+found/#42/#13", "d"),
            ("lost+found/#42/#13/f", "f 3 01"),
            ("lost+found/#42/#34", "f 5 07"),
        ]);
        let ours = t(&[
            ("lost+found", "d"),
            ("d1", "d"),
            ("d1/f", "f 3 01"),
            ("g", "f 5 07"),
        ]);
        assert!(lost(&ours, &theirs, None).is_empty());
        // Not when the content differs, or the name below the reconnected entry does.
        let ours = t(&[("lost+found", "d"), ("d1/f", "f 3 02"), ("d1/h", "f 3 01")]);
        assert_eq!(
            lost(&ours, &theirs, None),
            vec![
                "/lost+found/#42/#13/f (file, missing)".to_owned(),
                "/lost+found/#42/#34 (file, missing)".to_owned()
            ]
        );
        // e2fsck overwrote a file's blocks before it cloned them (a superblock whose reserved
        // descriptor blocks grew over the files, seed 3011, case 1253) and reconnected it;
        // ffsck's copy in place is the original.
        let before = t(&[("big_target", "f 100 01"), ("other", "f 100 05")]);
        let theirs = t(&[("lost+found", "d"), ("lost+found/#13", "f 100 07")]);
        let ours = t(&[("lost+found", "d"), ("big_target", "f 100 01")]);
        assert!(lost(&ours, &theirs, Some(&before)).is_empty());
        // Not without the original to tell, nor for a file of another size.
        assert_eq!(lost(&ours, &theirs, None).len(), 1);
        let ours = t(&[("lost+found", "d"), ("other", "f 99 05")]);
        assert_eq!(lost(&ours, &theirs, Some(&before)).len(), 1);
        // A directory loop d1 -> sub -> f (= d1) cut off from the root (seed 3015, case 778):
        // e2fsck reconnected sub (its salvage of d1 had dropped the entry naming it), ffsck
        // reconnected d1, so the files are under other paths below lost+found.
        let theirs = t(&[
            ("lost+found", "d"),
            ("lost+found/#29", "d"),
            ("lost+found/#29/f", "d"),
            ("lost+found/#29/f/f0", "f 3 01"),
            ("lost+found/#22", "f 4 02"),
        ]);
        let ours = t(&[
            ("lost+found", "d"),
            ("lost+found/#20", "d"),
            ("lost+found/#20/f0", "f 3 01"),
            ("lost+found/#20/f1", "f 4 02"),
            ("lost+found/#20/sub", "d"),
        ]);
        assert!(lost(&ours, &theirs, None).is_empty());
        // Not where the file under the loop differs, nor for a directory whose names ffsck's
        // directories do not all hold.
        let mut other = ours.clone();
        other.insert("lost+found/#20/f0".into(), "f 3 09".into());
        assert_eq!(
            lost(&other, &theirs, None),
            vec!["/lost+found/#29/f/f0 (file, missing)".to_owned()]
        );
        let mut more = theirs.clone();
        more.insert("lost+found/#29/f/g".into(), "l x".into());
        assert_eq!(
            lost(&ours, &more, None),
            vec![
                "/lost+found/#29/f (directory, missing)".to_owned(),
                "/lost+found/#29/f/g (symlink, missing)".to_owned()
            ]
        );
        assert_eq!(below_reconnected("lost+found/#42/#13/f"), Some("f"));
        assert_eq!(below_reconnected("lost+found/#42"), Some(""));
        assert_eq!(below_reconnected("a/#4/f"), None);
    }

    #[test]
    fn a_name_e2fsck_made_up_is_not_lost() {
        // A superblock whose inodes-per-group grew made e2fsck rewrite directory blocks it
        // took for inodes (seed 2001, case 91): its names are garbled, ffsck kept the old.
        let before = t(&[("big", "d"), ("big/0015_n", "f 100 01"), ("g", "f 1 02")]);
        let theirs = t(&[("big", "d"), ("big/0015_\u{17}x", "f 100 01")]);
        // e2fsck changed the content as well: ffsck's is the original.
        let garbled = t(&[("big", "d"), ("big/0015_\u{17}x", "f 100 07")]);
        let kept = t(&[("big", "d"), ("big/0015_n", "f 100 01")]);
        assert!(lost(&kept, &garbled, Some(&before)).is_empty());
        let ours = t(&[("big", "d"), ("big/0015_n", "f 100 01")]);
        assert!(lost(&ours, &theirs, Some(&before)).is_empty());
        // Not without the original, with other content, or in another directory with content
        // e2fsck changed (there only the same file exactly tells the two apart: [`moved`]).
        assert_eq!(lost(&ours, &theirs, None).len(), 1);
        let other = t(&[("big", "d"), ("big/0015_n", "f 100 09")]);
        assert_eq!(lost(&other, &theirs, Some(&before)).len(), 1);
        let before = t(&[("big", "d"), ("d/0015_n", "f 100 01")]);
        let moved = t(&[("big", "d"), ("d/0015_n", "f 100 01")]);
        assert_eq!(lost(&moved, &garbled, Some(&before)).len(), 1);
        assert!(lost(&moved, &theirs, Some(&before)).is_empty());
        // Nor for a name e2fsck still holds: ffsck's file there is not the one renamed.
        let before = t(&[("big", "d"), ("big/0015_n", "f 100 01")]);
        let both = t(&[
            ("big", "d"),
            ("big/0015_n", "f 100 01"),
            ("big/0015_\u{17}x", "f 100 02"),
        ]);
        assert_eq!(lost(&ours, &both, Some(&before)).len(), 1);
    }

    #[test]
    fn a_second_name_the_damage_made_is_not_lost_where_the_first_is_kept() {
        // `debugfs link /d1/sub /big/loop`, then /d1's block damaged (seed 3014, case 2134):
        // e2fsck's salvage dropped /d1/sub and kept /big/loop; ffsck kept /d1/sub and took
        // /big/loop away.
        let before = t(&[
            ("big", "d"),
            ("d1", "d"),
            ("d1/sub", "d"),
            ("d1/sub/f", "f 10 01"),
            ("d1/sub/x", "f 3 02"),
        ]);
        let theirs = t(&[
            ("big", "d"),
            ("big/loop", "d"),
            ("big/loop/f", "f 10 01"),
            ("big/loop/x", "f 3 02"),
            ("d1", "d"),
        ]);
        assert!(lost(&before, &theirs, Some(&before)).is_empty());
        // Not without the original, nor where ffsck's directory holds other names or other
        // content, nor where e2fsck also kept the first name.
        assert_eq!(lost(&before, &theirs, None).len(), 3);
        let mut fewer = before.clone();
        fewer.remove("d1/sub/x");
        assert_eq!(
            lost(&fewer, &theirs, Some(&before)),
            vec![
                "/big/loop (directory, missing)".to_owned(),
                "/big/loop/x (file, missing)".to_owned()
            ]
        );
        let mut changed = before.clone();
        changed.insert("d1/sub/f".into(), "f 10 09".into());
        assert_eq!(
            lost(&changed, &theirs, Some(&before)),
            vec!["/big/loop/f (file, missing)".to_owned()]
        );
        let mut both = theirs.clone();
        both.extend(before.clone());
        assert_eq!(lost(&before, &both, Some(&before)).len(), 3);
    }

    #[test]
    fn lost_is_judged_against_the_file_before_the_damage() {
        let before = t(&[("f", "f 8193 01.02.03"), ("l", "l x"), ("d", "d")]);
        // e2fsck changed a chunk (cleared words of a block it took for an indirect block),
        // ffsck kept the file as it was: not lost, though the two results differ.
        let theirs = t(&[("f", "f 8193 01.0e.03")]);
        assert!(lost(&t(&[("f", "f 8193 01.02.03")]), &theirs, Some(&before)).is_empty());
        // Without the original the same pair reads as lost (repair-conformance's view).
        assert_eq!(
            lost(&t(&[("f", "f 8193 01.02.03")]), &theirs, None).len(),
            1
        );
        // Both tools made up the chunk, differently: neither holds the original there.
        assert!(lost(&t(&[("f", "f 8193 01.0f.03")]), &theirs, Some(&before)).is_empty());
        // But a chunk e2fsck kept as it was and ffsck changed or dropped is lost...
        let theirs = t(&[("f", "f 8193 01.02.03")]);
        for ours in [
            "f 8193 01.0f.03",
            "f 8193 01.0.03",
            "f 8192 01.02.03",
            "l x",
        ] {
            assert_eq!(
                lost(&t(&[("f", ours)]), &theirs, Some(&before)).len(),
                1,
                "{ours}"
            );
        }
        // ... and so is a file ffsck dropped, or one whose size changed from what e2fsck
        // and the original agree on, even where ffsck's other chunks are made up.
        assert_eq!(lost(&t(&[]), &theirs, Some(&before)).len(), 1);
        let theirs = t(&[("f", "f 8193 01.0e.03")]);
        assert_eq!(
            lost(&t(&[("f", "f 9000 01.02.03")]), &theirs, Some(&before)).len(),
            1
        );
        // A chunk where ffsck's differs from the original elsewhere still counts.
        assert_eq!(
            lost(&t(&[("f", "f 8193 09.0f.03")]), &theirs, Some(&before)).len(),
            1
        );
        // The original's chunks count only for a file of the size e2fsck kept.
        let before = t(&[("f", "f 4096 01")]);
        assert_eq!(
            lost(&t(&[("f", "f 8193 01.0f.03")]), &theirs, Some(&before)).len(),
            1
        );
    }
}
