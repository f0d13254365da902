//! `ffsck-lab bench --gilbert`: the corruption experiment of "Understanding File System Checker
//! Performance Analytics in Response to Simulated Aging and Metadata Corruption". For every
//! file-system size × block size × inode size it builds one image, times `ffsck -fn` and
//! `e2fsck -fn` on it clean, then applies each corruption type in turn (the Table II set and
//! the corruptFS components), times both checkers again, and undoes the corruption from its
//! manifest before the next one. The result is the runtime and peak-memory growth each
//! corruption type causes, per checker.
//!
//! Runs alternate between the checkers and are summarised by medians; peak RSS comes through
//! the `__measure` shim so it is the checker's own. Output: results.json, report.md and two
//! bar figures (runtime and memory growth per corruption type), each as SVG and PNG.

use std::ffi::OsString;
use std::fs::File;
use std::io::{Seek, SeekFrom, Write};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use anyhow::{bail, Context, Result};
use clap::ValueEnum;
use rand::{Rng, RngCore, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde::Serialize;

use crate::bench::BenchArgs;
use crate::child;
use crate::corrupt::{self, Component, CorruptArgs, Table2};
use crate::imagegen::{self, FsType};
use crate::markdown;
use crate::metrics::median;
use crate::plots::{self, BarPlot};
use crate::sweep::Figure;
use crate::tools;

/// Bounds on the sweep, so a typo cannot start a week-long run.
const MAX_SIZES: usize = 16;
const MAX_CONFIGS: usize = 256;
/// Largest file system built, in MiB.
const MAX_FS_MIB: u64 = 1 << 20;
/// Small files per MiB of file system (about 10 % full with files of 0–8 KiB).
const FILES_PER_MIB: u64 = 24;
const FILES_PER_DIR: u64 = 95;
const MAX_SMALL_FILE: usize = 8 * 1024;
/// Data blocks of the contiguous file (> 12: it needs an indirect block on ext3) and of the
/// sparse file (one extent each, > 4: it needs an extent-tree leaf below the root on ext4).
const BIG_FILE_BLOCKS: u64 = 64;
const SPARSE_FILE_EXTENTS: u64 = 16;

/// Every corruption type of the experiment, by name: the Table II set, then the components.
pub fn all_corruptions() -> Vec<String> {
    let mut out: Vec<String> = Table2::ALL.iter().map(|t| t.name()).collect();
    for c in Component::value_variants() {
        if let Some(v) = c.to_possible_value() {
            out.push(format!("component-{}", v.get_name()));
        }
    }
    out
}

/// The `ffsck-lab corrupt` arguments of one corruption type.
fn corrupt_argv(name: &str) -> Result<Vec<String>> {
    if let Some(c) = name.strip_prefix("component-") {
        Component::from_str(c, false).map_err(|e| anyhow::anyhow!("{e}"))?;
        return Ok(vec![
            "--component".into(),
            c.into(),
            "--group".into(),
            "0".into(),
        ]);
    }
    Table2::from_str(name, false).map_err(|_| {
        anyhow::anyhow!(
            "unknown corruption `{name}` (known: {})",
            all_corruptions().join(", ")
        )
    })?;
    Ok(vec!["--table2".into(), name.into()])
}

/// One image shape of the sweep.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct Config {
    pub fs_mib: u64,
    pub block_size: u32,
    pub inode_size: u32,
}

impl Config {
    fn label(&self) -> String {
        format!(
            "{} MiB, {} B blocks, {} B inodes",
            self.fs_mib, self.block_size, self.inode_size
        )
    }
}

/// Medians of one checker on one image state.
#[derive(Debug, Clone, Serialize)]
pub struct Measure {
    pub runs: usize,
    pub median_wall_s: f64,
    pub median_max_rss_kib: f64,
    /// Distinct exit outcomes ("0", "4", "8", "timeout", "signal 11").
    pub outcomes: Vec<String>,
    /// Every run's peak RSS came through the measuring shim.
    pub rss_own: bool,
}

/// One corruption type on one image shape.
#[derive(Debug, Clone, Serialize)]
pub struct Row {
    pub config: Config,
    pub corruption: String,
    /// Why the corruption could not be applied to this image (then nothing was measured).
    pub error: Option<String>,
    /// Bytes changed, checksum fix-ups included.
    pub changes: usize,
    pub description: String,
    pub ffsck: Option<Measure>,
    pub e2fsck: Option<Measure>,
    /// After / before, per checker (NaN when not measured).
    pub ffsck_time_growth: f64,
    pub e2fsck_time_growth: f64,
    pub ffsck_rss_growth: f64,
    pub e2fsck_rss_growth: f64,
}

/// The clean image of one shape.
#[derive(Debug, Clone, Serialize)]
pub struct Baseline {
    pub config: Config,
    pub image_bytes: u64,
    pub files: u64,
    pub ffsck: Measure,
    pub e2fsck: Measure,
}

/// Median growth of one corruption type over all shapes.
#[derive(Debug, Clone, Serialize)]
pub struct TypeSummary {
    pub corruption: String,
    pub configs: usize,
    pub ffsck_time_growth: f64,
    pub e2fsck_time_growth: f64,
    pub ffsck_rss_growth: f64,
    pub e2fsck_rss_growth: f64,
}

#[derive(Debug, Clone, Serialize)]
pub struct GilbertResults {
    pub fs_type: FsType,
    pub fs_sizes_mib: Vec<u64>,
    pub block_sizes: Vec<u32>,
    pub inode_sizes: Vec<u32>,
    pub corruptions: Vec<String>,
    pub runs: usize,
    pub seed: u64,
    pub ffsck_path: PathBuf,
    pub ffsck_threads: Option<usize>,
    pub e2fsck_path: PathBuf,
    pub e2fsck_version: String,
    pub baselines: Vec<Baseline>,
    pub rows: Vec<Row>,
    pub by_type: Vec<TypeSummary>,
    pub figures: Vec<Figure>,
    pub warnings: Vec<String>,
}

fn validate(args: &BenchArgs) -> Result<(Vec<Config>, Vec<String>)> {
    if args.runs < 3 {
        bail!("--runs must be at least 3 (got {})", args.runs);
    }
    if !(args.timeout.is_finite() && args.timeout > 0.0) {
        bail!("--timeout must be a positive number of seconds");
    }
    if args.fs_sizes.is_empty() || args.fs_sizes.len() > MAX_SIZES {
        bail!("--fs-sizes takes 1 to {MAX_SIZES} sizes");
    }
    for &m in &args.fs_sizes {
        if !(4..=MAX_FS_MIB).contains(&m) {
            bail!("--fs-sizes: {m} MiB is outside 4..={MAX_FS_MIB}");
        }
    }
    for &b in &args.block_sizes {
        if ![1024, 2048, 4096, 8192, 16384, 32768, 65536].contains(&b) {
            bail!("--block-sizes: {b} is not a power of two in 1024..=65536");
        }
    }
    for &i in &args.inode_sizes {
        if !i.is_power_of_two() || !(128..=4096).contains(&i) {
            bail!("--inode-sizes: {i} is not a power of two in 128..=4096");
        }
    }
    let mut configs = Vec::new();
    for &fs_mib in &args.fs_sizes {
        for &block_size in &args.block_sizes {
            for &inode_size in &args.inode_sizes {
                configs.push(Config {
                    fs_mib,
                    block_size,
                    inode_size,
                });
            }
        }
    }
    if configs.is_empty() || configs.len() > MAX_CONFIGS {
        bail!(
            "{} image shapes requested; give 1 to {MAX_CONFIGS}",
            configs.len()
        );
    }
    let corruptions = match &args.corruptions {
        Some(list) if !list.is_empty() => list.clone(),
        _ => all_corruptions(),
    };
    for c in &corruptions {
        corrupt_argv(c)?;
    }
    Ok((configs, corruptions))
}

/// Writes the seeded tree: small files in directories of 95, one contiguous file of
/// [`BIG_FILE_BLOCKS`] blocks and one sparse file of [`SPARSE_FILE_EXTENTS`] separate blocks.
fn write_tree(root: &Path, c: &Config, seed: u64) -> Result<u64> {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let n = c.fs_mib * FILES_PER_MIB;
    let mut buf = vec![0u8; MAX_SMALL_FILE.max(c.block_size as usize)];
    for f in 0..n {
        let dir = root.join(format!("d{:04}", f / FILES_PER_DIR));
        if f % FILES_PER_DIR == 0 {
            std::fs::create_dir(&dir).with_context(|| format!("creating {}", dir.display()))?;
        }
        let size = rng.random_range(0..=MAX_SMALL_FILE);
        rng.fill_bytes(&mut buf[..size]);
        std::fs::write(dir.join(format!("f{f:05}")), &buf[..size])?;
    }
    let bs = u64::from(c.block_size);
    let block = &mut buf[..bs as usize];
    let mut big = File::create(root.join("big.dat"))?;
    for _ in 0..BIG_FILE_BLOCKS {
        rng.fill_bytes(block);
        big.write_all(block)?;
    }
    let mut sparse = File::create(root.join("sparse.dat"))?;
    for i in 0..SPARSE_FILE_EXTENTS {
        rng.fill_bytes(block);
        sparse.seek(SeekFrom::Start(2 * i * bs))?;
        sparse.write_all(block)?;
    }
    Ok(n + 2)
}

/// Builds the image of one shape with `mke2fs -d`, reproducibly from the seed.
pub fn build_image(
    c: &Config,
    fs_type: FsType,
    seed: u64,
    tree_parent: &Path,
    image: &Path,
    mke2fs: &Path,
) -> Result<u64> {
    let tree = tempfile::Builder::new()
        .prefix("ffsck-lab-gilbert-")
        .tempdir_in(tree_parent)
        .with_context(|| format!("creating a tree dir in {}", tree_parent.display()))?;
    let files = write_tree(tree.path(), c, seed)?;
    let _ = std::fs::remove_file(image);
    let log_path = image.with_extension("mke2fs.log");
    let log = File::create(&log_path)?;
    let mut cmd = Command::new(mke2fs);
    cmd.args(["-q", "-F", "-t", fs_type.name()])
        .args(["-b", &c.block_size.to_string()])
        .args(["-I", &c.inode_size.to_string()])
        .args(["-U", &imagegen::seeded_uuid(seed, 1)])
        .args([
            "-E",
            &format!("hash_seed={}", imagegen::seeded_uuid(seed, 2)),
        ])
        .arg("-d")
        .arg(tree.path())
        .arg(image)
        .arg(format!("{}M", c.fs_mib))
        .env("E2FSPROGS_FAKE_TIME", imagegen::FIXED_MTIME.to_string())
        .env("SOURCE_DATE_EPOCH", imagegen::FIXED_MTIME.to_string())
        .stdin(Stdio::null())
        .stdout(Stdio::from(log.try_clone()?))
        .stderr(Stdio::from(log));
    let outcome = child::run(&mut cmd, None).context("running mke2fs")?;
    if outcome.code() != Some(0) {
        let text = std::fs::read_to_string(&log_path).unwrap_or_default();
        bail!(
            "mke2fs for {} failed ({}): {}",
            c.label(),
            outcome.describe(),
            text.lines().rev().take(5).collect::<Vec<_>>().join(" / ")
        );
    }
    let _ = std::fs::remove_file(&log_path);
    corrupt::normalize_times(image, imagegen::FIXED_MTIME as u32)?;
    tree.close().context("deleting the generated tree")?;
    Ok(files)
}

struct Checkers<'a> {
    ffsck: &'a Path,
    e2fsck: &'a Path,
    threads: Option<usize>,
    runs: usize,
    timeout: Duration,
    log_dir: &'a Path,
}

#[derive(Default)]
struct Samples {
    walls: Vec<f64>,
    rss: Vec<f64>,
    outcomes: Vec<String>,
    own: bool,
}

impl Samples {
    fn summary(mut self) -> Measure {
        self.outcomes.sort();
        self.outcomes.dedup();
        Measure {
            runs: self.walls.len(),
            median_wall_s: median(&self.walls).unwrap_or(f64::NAN),
            median_max_rss_kib: median(&self.rss).unwrap_or(f64::NAN),
            outcomes: self.outcomes,
            rss_own: self.own,
        }
    }
}

impl Checkers<'_> {
    fn once(&self, which: &str, image: &Path, s: Option<&mut Samples>) -> Result<()> {
        let (prog, mut argv): (&Path, Vec<OsString>) = if which == "ffsck" {
            let mut a: Vec<OsString> = vec!["-fn".into()];
            if let Some(t) = self.threads {
                a.extend(["--threads".into(), t.to_string().into()]);
            }
            (self.ffsck, a)
        } else {
            (self.e2fsck, vec!["-fn".into()])
        };
        argv.push(image.into());
        let log_path = self.log_dir.join(format!("{which}.log"));
        let log = File::create(&log_path)?;
        let (o, own) = child::run_measured(prog, &argv, Some(&log), Some(self.timeout))
            .with_context(|| format!("running {which}"))?;
        if let Some(s) = s {
            if s.walls.is_empty() {
                s.own = true;
            }
            s.walls.push(o.wall_s);
            s.rss.push(o.max_rss_kib as f64);
            s.outcomes.push(o.describe());
            s.own &= own;
        }
        Ok(())
    }

    /// `runs` alternating runs of each checker, optionally after one warm-up each.
    fn measure(&self, image: &Path, warmup: bool) -> Result<(Measure, Measure)> {
        if warmup {
            self.once("ffsck", image, None)?;
            self.once("e2fsck", image, None)?;
        }
        let (mut ff, mut e2) = (Samples::default(), Samples::default());
        for _ in 0..self.runs {
            self.once("ffsck", image, Some(&mut ff))?;
            self.once("e2fsck", image, Some(&mut e2))?;
        }
        Ok((ff.summary(), e2.summary()))
    }
}

/// Writes the manifest's old bytes back, last change first.
fn undo(image: &Path, m: &corrupt::Manifest) -> Result<()> {
    let f = std::fs::OpenOptions::new().write(true).open(image)?;
    for c in m.changes.iter().rev() {
        let old = corrupt::unhex(&c.old)
            .with_context(|| format!("bad hex in the manifest for {}", c.field))?;
        f.write_all_at(&old, c.offset)?;
    }
    f.sync_all()?;
    Ok(())
}

fn ratio(after: Option<&Measure>, before: &Measure, f: fn(&Measure) -> f64) -> f64 {
    after.map_or(f64::NAN, |a| f(a) / f(before))
}

/// Runs the whole experiment and writes results.json, report.md and the figures into --out.
pub fn run(args: &BenchArgs) -> Result<GilbertResults> {
    let (configs, corruptions) = validate(args)?;
    let ffsck = tools::resolve_ffsck(args.ffsck.as_deref())?;
    let e2fsck = tools::resolve_tool(args.e2fsck.as_deref(), "e2fsck")?;
    let mke2fs = tools::resolve_tool(args.mke2fs.as_deref(), "mke2fs")?;
    std::fs::create_dir_all(&args.out)
        .with_context(|| format!("creating {}", args.out.display()))?;
    let fs_type = args.fs_type.unwrap_or(FsType::Ext4);
    let checkers = Checkers {
        ffsck: &ffsck,
        e2fsck: &e2fsck,
        threads: args.threads,
        runs: args.runs,
        timeout: Duration::from_secs_f64(args.timeout),
        log_dir: &args.out,
    };
    let mut warnings = Vec::new();
    let mut baselines = Vec::new();
    let mut rows = Vec::new();
    let image = args.out.join("gilbert.img");
    let manifest = args.out.join("gilbert.manifest.json");
    for (k, c) in configs.iter().enumerate() {
        eprintln!("[{}/{}] {}", k + 1, configs.len(), c.label());
        let tree_parent = args.tree_dir.as_deref().unwrap_or(&args.out);
        let files = build_image(c, fs_type, args.seed, tree_parent, &image, &mke2fs)?;
        let image_bytes = std::fs::metadata(&image)?.len();
        let pristine = std::fs::read(&image)
            .ok()
            .filter(|_| image_bytes <= 64 << 20);
        let (ff0, e20) = checkers.measure(&image, true)?;
        for (who, m) in [("ffsck", &ff0), ("e2fsck", &e20)] {
            if m.outcomes.iter().any(|o| o != "0") {
                warnings.push(format!(
                    "{}: {who} did not find the clean image clean ({})",
                    c.label(),
                    m.outcomes.join(", ")
                ));
            }
        }
        for name in &corruptions {
            let mut argv: Vec<String> = vec![
                "--image".into(),
                image.to_string_lossy().into_owned(),
                "--seed".into(),
                args.seed.to_string(),
                "--manifest".into(),
                manifest.to_string_lossy().into_owned(),
            ];
            argv.extend(corrupt_argv(name)?);
            let argv: Vec<&str> = argv.iter().map(String::as_str).collect();
            let cargs: CorruptArgs = crate::parse_args(&argv)?;
            let applied = corrupt::run(&cargs);
            let mut row = Row {
                config: *c,
                corruption: name.clone(),
                error: None,
                changes: 0,
                description: String::new(),
                ffsck: None,
                e2fsck: None,
                ffsck_time_growth: f64::NAN,
                e2fsck_time_growth: f64::NAN,
                ffsck_rss_growth: f64::NAN,
                e2fsck_rss_growth: f64::NAN,
            };
            match applied {
                Err(e) => row.error = Some(format!("{e:#}")),
                Ok(m) => {
                    let measured = checkers.measure(&image, false);
                    undo(&image, &m)?;
                    if let Some(p) = &pristine {
                        if std::fs::read(&image)? != *p {
                            bail!("undoing `{name}` did not restore the image");
                        }
                    }
                    let (ff, e2) = measured?;
                    eprintln!(
                        "  {name}: ffsck {:.3} s → {:.3} s, e2fsck {:.3} s → {:.3} s",
                        ff0.median_wall_s, ff.median_wall_s, e20.median_wall_s, e2.median_wall_s
                    );
                    row.changes = m.changes.len();
                    row.description = m.description;
                    row.ffsck_time_growth = ratio(Some(&ff), &ff0, |m| m.median_wall_s);
                    row.e2fsck_time_growth = ratio(Some(&e2), &e20, |m| m.median_wall_s);
                    row.ffsck_rss_growth = ratio(Some(&ff), &ff0, |m| m.median_max_rss_kib);
                    row.e2fsck_rss_growth = ratio(Some(&e2), &e20, |m| m.median_max_rss_kib);
                    row.ffsck = Some(ff);
                    row.e2fsck = Some(e2);
                }
            }
            rows.push(row);
        }
        baselines.push(Baseline {
            config: *c,
            image_bytes,
            files,
            ffsck: ff0,
            e2fsck: e20,
        });
    }
    if !args.keep {
        let _ = std::fs::remove_file(&image);
    }
    let _ = std::fs::remove_file(&manifest);

    let by_type: Vec<TypeSummary> = corruptions
        .iter()
        .map(|name| {
            let mine: Vec<&Row> = rows
                .iter()
                .filter(|r| &r.corruption == name && r.error.is_none())
                .collect();
            let med = |f: fn(&Row) -> f64| {
                let v: Vec<f64> = mine
                    .iter()
                    .map(|r| f(r))
                    .filter(|x| x.is_finite())
                    .collect();
                median(&v).unwrap_or(f64::NAN)
            };
            TypeSummary {
                corruption: name.clone(),
                configs: mine.len(),
                ffsck_time_growth: med(|r| r.ffsck_time_growth),
                e2fsck_time_growth: med(|r| r.e2fsck_time_growth),
                ffsck_rss_growth: med(|r| r.ffsck_rss_growth),
                e2fsck_rss_growth: med(|r| r.e2fsck_rss_growth),
            }
        })
        .collect();
    let skipped = rows.iter().filter(|r| r.error.is_some()).count();
    if skipped > 0 {
        warnings.push(format!(
            "{skipped} corruption(s) could not be applied to their image; see the table"
        ));
    }
    if rows
        .iter()
        .filter_map(|r| r.ffsck.as_ref())
        .chain(baselines.iter().map(|b| &b.ffsck))
        .any(|m| !m.rss_own)
    {
        warnings.push(
            "some peak RSS figures were taken without the measuring shim and include \
             ffsck-lab's own pre-exec high-water mark"
                .into(),
        );
    }
    let mut results = GilbertResults {
        fs_type,
        fs_sizes_mib: args.fs_sizes.clone(),
        block_sizes: args.block_sizes.clone(),
        inode_sizes: args.inode_sizes.clone(),
        corruptions,
        runs: args.runs,
        seed: args.seed,
        ffsck_path: ffsck.clone(),
        ffsck_threads: args.threads,
        e2fsck_version: tools::version_line(&e2fsck),
        e2fsck_path: e2fsck,
        baselines,
        rows,
        by_type,
        figures: Vec::new(),
        warnings,
    };
    match figures(&results, &args.out) {
        Ok(f) => results.figures = f,
        Err(e) => results.warnings.push(format!("plots: {e:#}")),
    }
    let json = serde_json::to_string_pretty(&results)? + "\n";
    std::fs::write(args.out.join("results.json"), json).context("writing results.json")?;
    std::fs::write(args.out.join("report.md"), render_markdown(&results))
        .context("writing report.md")?;
    Ok(results)
}

/// Runtime and memory growth per corruption type (median over shapes), one bar per checker.
pub fn figures(r: &GilbertResults, out: &Path) -> Result<Vec<Figure>> {
    let cats: Vec<String> = r.by_type.iter().map(|t| t.corruption.clone()).collect();
    let col = |f: fn(&TypeSummary) -> f64| r.by_type.iter().map(f).collect::<Vec<f64>>();
    let shapes = r.baselines.len();
    let specs = [
        (
            "gilbert-time",
            format!("Runtime growth after corruption ({shapes} image shapes)"),
            "median wall after / before",
            col(|t| t.ffsck_time_growth),
            col(|t| t.e2fsck_time_growth),
        ),
        (
            "gilbert-memory",
            format!("Peak memory growth after corruption ({shapes} image shapes)"),
            "median peak RSS after / before",
            col(|t| t.ffsck_rss_growth),
            col(|t| t.e2fsck_rss_growth),
        ),
    ];
    let mut figures = Vec::new();
    for (stem, title, x_label, ff, e2) in specs {
        let plot = BarPlot {
            title,
            x_label: x_label.into(),
            categories: cats.clone(),
            series: vec![("ffsck -fn".into(), ff), ("e2fsck -fn".into(), e2)],
            reference: Some(1.0),
        };
        figures.push(Figure::write(plots::Plot::Bar(&plot), out, stem)?);
    }
    Ok(figures)
}

fn growth(x: f64) -> String {
    if x.is_finite() {
        format!("{x:.2}×")
    } else {
        "–".into()
    }
}

fn secs(m: &Measure) -> String {
    format!("{:.3}", m.median_wall_s)
}

fn mib(m: &Measure) -> String {
    format!("{:.1}", m.median_max_rss_kib / 1024.0)
}

/// The report: set-up, per-type summary, clean baselines, every row, figures, warnings.
pub fn render_markdown(r: &GilbertResults) -> String {
    let mut out = String::from("## Gilbert experiment: checker cost after metadata corruption\n\n");
    out.push_str(&format!(
        "- {} images ({}; sizes {:?} MiB × block sizes {:?} × inode sizes {:?}), seed {}\n\
         - {} corruption types, each applied alone to the clean image and undone after\n\
         - ffsck: `{}` (threads: {}); e2fsck: `{}` ({})\n\
         - {} alternating runs per checker and state; medians; peak RSS via the `__measure` shim\n\n",
        r.baselines.len(),
        r.fs_type.name(),
        r.fs_sizes_mib,
        r.block_sizes,
        r.inode_sizes,
        r.seed,
        r.corruptions.len(),
        r.ffsck_path.display(),
        r.ffsck_threads
            .map_or("ffsck default".to_string(), |t| t.to_string()),
        r.e2fsck_path.display(),
        r.e2fsck_version,
        r.runs
    ));
    out.push_str("### Growth per corruption type (median over image shapes)\n\n");
    let rows: Vec<Vec<String>> = r
        .by_type
        .iter()
        .map(|t| {
            vec![
                t.corruption.clone(),
                t.configs.to_string(),
                growth(t.e2fsck_time_growth),
                growth(t.ffsck_time_growth),
                growth(t.e2fsck_rss_growth),
                growth(t.ffsck_rss_growth),
            ]
        })
        .collect();
    out.push_str(&markdown::table(
        &[
            "corruption",
            "images",
            "e2fsck time",
            "ffsck time",
            "e2fsck RSS",
            "ffsck RSS",
        ],
        &[false, true, true, true, true, true],
        &rows,
    ));
    out.push_str("\n### Clean images\n\n");
    let rows: Vec<Vec<String>> = r
        .baselines
        .iter()
        .map(|b| {
            vec![
                b.config.fs_mib.to_string(),
                b.config.block_size.to_string(),
                b.config.inode_size.to_string(),
                b.files.to_string(),
                secs(&b.e2fsck),
                secs(&b.ffsck),
                mib(&b.e2fsck),
                mib(&b.ffsck),
            ]
        })
        .collect();
    out.push_str(&markdown::table(
        &[
            "MiB",
            "block",
            "inode",
            "files",
            "e2fsck (s)",
            "ffsck (s)",
            "e2fsck RSS (MiB)",
            "ffsck RSS (MiB)",
        ],
        &[true; 8],
        &rows,
    ));
    out.push_str("\n### Every image and corruption\n\n");
    let rows: Vec<Vec<String>> = r
        .rows
        .iter()
        .map(|row| {
            let c = &row.config;
            let shape = format!("{}M/{}/{}", c.fs_mib, c.block_size, c.inode_size);
            match (&row.ffsck, &row.e2fsck, &row.error) {
                (Some(ff), Some(e2), _) => vec![
                    shape,
                    row.corruption.clone(),
                    secs(e2),
                    growth(row.e2fsck_time_growth),
                    secs(ff),
                    growth(row.ffsck_time_growth),
                    mib(e2),
                    mib(ff),
                    format!("{} / {}", e2.outcomes.join(","), ff.outcomes.join(",")),
                ],
                (_, _, err) => {
                    let mut v = vec![shape, row.corruption.clone()];
                    v.extend(std::iter::repeat_n("–".to_string(), 6));
                    v.push(format!("not applied: {}", err.as_deref().unwrap_or("?")));
                    v
                }
            }
        })
        .collect();
    out.push_str(&markdown::table(
        &[
            "image",
            "corruption",
            "e2fsck (s)",
            "× clean",
            "ffsck (s)",
            "× clean",
            "e2fsck RSS (MiB)",
            "ffsck RSS (MiB)",
            "exit e2fsck / ffsck",
        ],
        &[false, false, true, true, true, true, true, true, false],
        &rows,
    ));
    out.push_str(&crate::sweep::render_figures(&r.figures));
    if !r.warnings.is_empty() {
        out.push_str("\n### Warnings\n\n");
        for w in &r.warnings {
            out.push_str(&format!("- {w}\n"));
        }
    }
    out
}

/// CLI entry for `bench --gilbert`.
pub fn main(args: &BenchArgs) -> Result<()> {
    let r = run(args)?;
    print!("{}", render_markdown(&r));
    eprintln!(
        "wrote {} and {}",
        args.out.join("results.json").display(),
        args.out.join("report.md").display()
    );
    Ok(())
}
