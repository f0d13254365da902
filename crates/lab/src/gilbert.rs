//! `ffsck-lab gilbert`: the corruption experiment of "Understanding File System Checker
//! Performance Analytics in Response to Simulated Aging and Metadata Corruption". For every
//! file-system size × block size × inode size it builds one image, times `ffsck -fn` and
//! `e2fsck -fn` on it clean, then applies each corruption type in turn (the Table II set and
//! the corruptFS components), times both checkers again, and undoes the corruption from its
//! manifest before the next one. The result is the runtime and peak-memory growth each
//! corruption type causes, per checker.
//!
//! With `--fs-type xfs` the same trees are packed with `mkfs.xfs -p`, the corruptions are
//! `xfs_db blocktrash -t TYPE` per metadata type (`xfs-agf`, `xfs-inode`, …) and the checkers are
//! `xfs_repair -n` and `xfs_repair` (the repair runs on a scratch copy, so every run starts from
//! the same damage): the seed's e2fsck vs xfs_repair comparison.
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

use crate::child;
use crate::corrupt::{self, Component, CorruptArgs, Table2};
use crate::imagegen::{self, FsType};
use crate::markdown;
use crate::metrics::median;
use crate::plots::{self, BarPlot, Figure};
use crate::tools;
use crate::xfs::{self, BlockType};

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

/// blocktrash types found in every generated XFS image (the others need reflinked, attributed
/// or many-extent files, or damage the log, which a clean unmount leaves unread).
const XFS_TYPES: &[BlockType] = &[
    BlockType::Sb,
    BlockType::Agf,
    BlockType::Agfl,
    BlockType::Agi,
    BlockType::Inode,
    BlockType::Dir,
    BlockType::Btbno,
    BlockType::Btcnt,
    BlockType::Btino,
    BlockType::Btfino,
    BlockType::Btrefcnt,
];

/// `ffsck-lab gilbert`: the image shapes, corruption types and checkers of the experiment.
#[derive(clap::Args, Debug, Clone)]
pub struct GilbertArgs {
    /// Timed runs per checker and state (at least 3), after one warm-up each.
    #[arg(long, default_value_t = 3)]
    pub runs: usize,
    /// Pass `--threads T` to ffsck [default: ffsck's own default].
    #[arg(long)]
    pub threads: Option<usize>,
    /// Output directory for results.json, report.md, the figures and logs.
    #[arg(long, default_value = "out/gilbert")]
    pub out: PathBuf,
    /// ffsck binary [default: `ffsck` next to ffsck-lab, then PATH].
    #[arg(long)]
    pub ffsck: Option<PathBuf>,
    /// e2fsck binary [default: from PATH or /sbin].
    #[arg(long)]
    pub e2fsck: Option<PathBuf>,
    /// mke2fs binary [default: from PATH or /sbin].
    #[arg(long)]
    pub mke2fs: Option<PathBuf>,
    /// Keep the last built image.
    #[arg(long)]
    pub keep: bool,
    /// Seed for the generated trees and the corruptions.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Per-run wall-clock limit in seconds.
    #[arg(long, default_value_t = 3600.0)]
    pub timeout: f64,
    /// Parent directory for the temporary file trees [default: --out].
    #[arg(long)]
    pub tree_dir: Option<PathBuf>,
    /// File-system sizes in MiB [default: 8,32; xfs: 600,1200].
    #[arg(long, value_delimiter = ',')]
    pub fs_sizes: Option<Vec<u64>>,
    /// Block sizes in bytes [default: 1024,4096].
    #[arg(long, value_delimiter = ',')]
    pub block_sizes: Option<Vec<u32>>,
    /// Inode sizes in bytes [default: 128,256,1024; xfs: 512,1024].
    #[arg(long, value_delimiter = ',')]
    pub inode_sizes: Option<Vec<u32>>,
    /// Corruption types [default: all: the `corrupt --table2` names, then component-sb,
    /// component-gd, component-reserved-gdt, component-block-bitmap, component-inode-bitmap,
    /// component-inode-table (group 0); on xfs: xfs-sb, xfs-agf, xfs-agfl, xfs-agi, xfs-inode,
    /// xfs-dir, xfs-btbno, xfs-btcnt, xfs-btino, xfs-btfino, xfs-btrefcnt (`corrupt
    /// --xfs-blocktrash`)].
    #[arg(long, value_delimiter = ',')]
    pub corruptions: Option<Vec<String>>,
    /// File system type [default: ext4]; `xfs` checks with xfs_repair -n and xfs_repair
    /// instead of ffsck and e2fsck. (`ffsck-lab versus` runs both and compares them.)
    #[arg(long, value_enum)]
    pub fs_type: Option<FsType>,
    /// On ext: also time `e2fsck -fy` on a scratch copy (xfs_repair's counterpart).
    #[arg(long)]
    pub repair_too: bool,
}

/// Every corruption type of the experiment, by name: on ext, the Table II set, then the
/// components; on XFS, `xfs-TYPE` per blocktrash type.
pub fn all_corruptions(fs_type: FsType) -> Vec<String> {
    if fs_type == FsType::Xfs {
        return XFS_TYPES
            .iter()
            .map(|t| format!("xfs-{}", t.name()))
            .collect();
    }
    let mut out: Vec<String> = Table2::ALL.iter().map(|t| t.name()).collect();
    for c in Component::value_variants() {
        if let Some(v) = c.to_possible_value() {
            out.push(format!("component-{}", v.get_name()));
        }
    }
    out
}

/// The `ffsck-lab corrupt` arguments of one corruption type on `fs_type`.
fn corrupt_argv(name: &str, fs_type: FsType) -> Result<Vec<String>> {
    let unknown = || {
        anyhow::anyhow!(
            "unknown corruption `{name}` for {} (known: {})",
            fs_type.name(),
            all_corruptions(fs_type).join(", ")
        )
    };
    if fs_type == FsType::Xfs {
        let t = name.strip_prefix("xfs-").ok_or_else(unknown)?;
        BlockType::from_str(t, false).map_err(|_| unknown())?;
        return Ok(vec!["--xfs-blocktrash".into(), t.into()]);
    }
    if let Some(c) = name.strip_prefix("component-") {
        Component::from_str(c, false).map_err(|e| anyhow::anyhow!("{e}"))?;
        return Ok(vec![
            "--component".into(),
            c.into(),
            "--group".into(),
            "0".into(),
        ]);
    }
    Table2::from_str(name, false).map_err(|_| unknown())?;
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

/// One checker's medians on one damaged image and their growth over the clean image.
#[derive(Debug, Clone, Serialize)]
pub struct Series {
    /// The checker's name, e.g. `e2fsck -fn` or `xfs_repair -n`.
    pub checker: String,
    pub measure: Measure,
    /// After / before (NaN when not measured).
    pub time_growth: f64,
    pub rss_growth: f64,
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
    /// One entry per checker, in the order of [`GilbertResults::checkers`].
    pub checkers: Vec<Series>,
}

impl Row {
    /// The series of the checker named `checker`.
    pub fn series(&self, checker: &str) -> Option<&Series> {
        self.checkers.iter().find(|s| s.checker == checker)
    }
}

/// One checker's medians on a clean image.
#[derive(Debug, Clone, Serialize)]
pub struct Clean {
    pub checker: String,
    pub measure: Measure,
}

/// The clean image of one shape.
#[derive(Debug, Clone, Serialize)]
pub struct Baseline {
    pub config: Config,
    pub image_bytes: u64,
    pub files: u64,
    pub checkers: Vec<Clean>,
}

/// Median growth of one checker over all shapes for one corruption type.
#[derive(Debug, Clone, Serialize)]
pub struct Growth {
    pub checker: String,
    pub time_growth: f64,
    pub rss_growth: f64,
}

/// Median growth of one corruption type over all shapes.
#[derive(Debug, Clone, Serialize)]
pub struct TypeSummary {
    pub corruption: String,
    pub configs: usize,
    pub checkers: Vec<Growth>,
}

/// A checker as run: its name, binary, version and arguments before the image.
#[derive(Debug, Clone, Serialize)]
pub struct CheckerInfo {
    pub name: String,
    pub path: PathBuf,
    pub version: String,
    pub args: Vec<String>,
    /// Runs on a scratch copy of the image, because it repairs.
    pub on_copy: bool,
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
    pub checkers: Vec<CheckerInfo>,
    pub ffsck_threads: Option<usize>,
    pub baselines: Vec<Baseline>,
    pub rows: Vec<Row>,
    pub by_type: Vec<TypeSummary>,
    pub figures: Vec<Figure>,
    pub warnings: Vec<String>,
}

/// The image shapes asked for, with the file system's defaults filled in.
struct Shapes {
    fs_sizes: Vec<u64>,
    block_sizes: Vec<u32>,
    inode_sizes: Vec<u32>,
}

impl Shapes {
    fn new(args: &GilbertArgs, fs_type: FsType) -> Self {
        // XFS needs 300 MiB and (v5) inodes of at least 512 bytes; at 300 MiB its 64 MiB log
        // leaves too little room for the tree with 1 KiB inodes.
        let (sizes, inodes): (&[u64], &[u32]) = match fs_type {
            FsType::Xfs => (&[600, 1200], &[512, 1024]),
            _ => (&[8, 32], &[128, 256, 1024]),
        };
        Shapes {
            fs_sizes: args.fs_sizes.clone().unwrap_or_else(|| sizes.to_vec()),
            block_sizes: args.block_sizes.clone().unwrap_or(vec![1024, 4096]),
            inode_sizes: args.inode_sizes.clone().unwrap_or_else(|| inodes.to_vec()),
        }
    }
}

fn validate(
    args: &GilbertArgs,
    fs_type: FsType,
    shapes: &Shapes,
) -> Result<(Vec<Config>, Vec<String>)> {
    if args.runs < 3 {
        bail!("--runs must be at least 3 (got {})", args.runs);
    }
    if !(args.timeout.is_finite() && args.timeout > 0.0) {
        bail!("--timeout must be a positive number of seconds");
    }
    if shapes.fs_sizes.is_empty() || shapes.fs_sizes.len() > MAX_SIZES {
        bail!("--fs-sizes takes 1 to {MAX_SIZES} sizes");
    }
    let (min_mib, min_inode) = match fs_type {
        FsType::Xfs => (xfs::MIN_BYTES >> 20, 512),
        _ => (4, 128),
    };
    for &m in &shapes.fs_sizes {
        if !(min_mib..=MAX_FS_MIB).contains(&m) {
            bail!(
                "--fs-sizes: {m} MiB is outside {min_mib}..={MAX_FS_MIB} for {}",
                fs_type.name()
            );
        }
    }
    for &b in &shapes.block_sizes {
        if ![1024, 2048, 4096, 8192, 16384, 32768, 65536].contains(&b) {
            bail!("--block-sizes: {b} is not a power of two in 1024..=65536");
        }
    }
    for &i in &shapes.inode_sizes {
        if !i.is_power_of_two() || !(min_inode..=4096).contains(&i) {
            bail!(
                "--inode-sizes: {i} is not a power of two in {min_inode}..=4096 for {}",
                fs_type.name()
            );
        }
    }
    let mut configs = Vec::new();
    for &fs_mib in &shapes.fs_sizes {
        for &block_size in &shapes.block_sizes {
            for &inode_size in &shapes.inode_sizes {
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
        _ => all_corruptions(fs_type),
    };
    for c in &corruptions {
        corrupt_argv(c, fs_type)?;
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

/// Builds the image of one shape with `mke2fs -d` (`mkfs.xfs -p` for XFS, then `mke2fs` is
/// mkfs.xfs), reproducibly from the seed.
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
    if fs_type == FsType::Xfs {
        let spec = xfs::MkfsSpec {
            bytes: c.fs_mib << 20,
            block_size: c.block_size,
            inode_size: c.inode_size,
            uuid: imagegen::seeded_uuid(seed, 1),
        };
        xfs::mkfs(&spec, tree.path(), image, mke2fs)
            .with_context(|| format!("mkfs.xfs for {}", c.label()))?;
        tree.close().context("deleting the generated tree")?;
        return Ok(files);
    }
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

/// The checkers of the experiment for `fs_type`: ffsck and e2fsck on ext, xfs_repair -n and
/// xfs_repair on XFS.
fn checker_list(args: &GilbertArgs, fs_type: FsType) -> Result<Vec<CheckerInfo>> {
    let info = |name: &str, path: PathBuf, args: Vec<String>, on_copy: bool| CheckerInfo {
        name: name.into(),
        version: tools::version_line(&path),
        path,
        args,
        on_copy,
    };
    if fs_type == FsType::Xfs {
        let repair = xfs::tool("xfs_repair")?;
        return Ok(vec![
            info("xfs_repair -n", repair.clone(), vec!["-n".into()], false),
            info("xfs_repair", repair, Vec::new(), true),
        ]);
    }
    let ffsck = tools::resolve_ffsck(args.ffsck.as_deref())?;
    let e2fsck = tools::resolve_tool(args.e2fsck.as_deref(), "e2fsck")?;
    let mut ffsck_args = vec!["-fn".to_string()];
    if let Some(t) = args.threads {
        ffsck_args.extend(["--threads".into(), t.to_string()]);
    }
    let mut list = vec![
        info("ffsck -fn", ffsck, ffsck_args, false),
        info("e2fsck -fn", e2fsck.clone(), vec!["-fn".into()], false),
    ];
    if args.repair_too {
        list.push(info("e2fsck -fy", e2fsck, vec!["-fy".into()], true));
    }
    Ok(list)
}

struct Checkers<'a> {
    list: &'a [CheckerInfo],
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
    /// One run of checker `k`; a repairing checker gets a fresh scratch copy of the image.
    fn once(&self, k: usize, image: &Path, s: Option<&mut Samples>) -> Result<()> {
        let c = &self.list[k];
        let scratch = self.log_dir.join("gilbert.scratch.img");
        let target = if c.on_copy {
            xfs::sparse_copy(image, &scratch)?;
            &scratch
        } else {
            image
        };
        let mut argv: Vec<OsString> = c.args.iter().map(OsString::from).collect();
        argv.push(target.into());
        let log_path = self
            .log_dir
            .join(format!("{}.log", c.name.replace(' ', "")));
        let log = File::create(&log_path)?;
        let ran = child::run_measured(&c.path, &argv, Some(&log), Some(self.timeout))
            .with_context(|| format!("running {}", c.name));
        if c.on_copy {
            let _ = std::fs::remove_file(&scratch);
        }
        let (o, own) = ran?;
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

    /// `runs` alternating runs of each checker, optionally after one warm-up each; one
    /// summary per checker.
    fn measure(&self, image: &Path, warmup: bool) -> Result<Vec<Measure>> {
        if warmup {
            for k in 0..self.list.len() {
                self.once(k, image, None)?;
            }
        }
        let mut samples: Vec<Samples> = self.list.iter().map(|_| Samples::default()).collect();
        for _ in 0..self.runs {
            for (k, s) in samples.iter_mut().enumerate() {
                self.once(k, image, Some(s))?;
            }
        }
        Ok(samples.into_iter().map(Samples::summary).collect())
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

/// Each checker's damaged-image medians with their growth over its clean ones.
fn series(after: Vec<Measure>, clean: &[Clean]) -> Vec<Series> {
    after
        .into_iter()
        .zip(clean)
        .map(|(m, c)| Series {
            checker: c.checker.clone(),
            time_growth: m.median_wall_s / c.measure.median_wall_s,
            rss_growth: m.median_max_rss_kib / c.measure.median_max_rss_kib,
            measure: m,
        })
        .collect()
}

/// Median growth per checker of each corruption type over the shapes it was applied to.
fn summarize(corruptions: &[String], rows: &[Row], checkers: &[CheckerInfo]) -> Vec<TypeSummary> {
    corruptions
        .iter()
        .map(|name| {
            let mine: Vec<&Row> = rows
                .iter()
                .filter(|r| &r.corruption == name && r.error.is_none())
                .collect();
            let med = |k: usize, f: fn(&Series) -> f64| {
                let v: Vec<f64> = mine
                    .iter()
                    .filter_map(|r| r.checkers.get(k).map(f))
                    .filter(|x| x.is_finite())
                    .collect();
                median(&v).unwrap_or(f64::NAN)
            };
            TypeSummary {
                corruption: name.clone(),
                configs: mine.len(),
                checkers: checkers
                    .iter()
                    .enumerate()
                    .map(|(k, c)| Growth {
                        checker: c.name.clone(),
                        time_growth: med(k, |s| s.time_growth),
                        rss_growth: med(k, |s| s.rss_growth),
                    })
                    .collect(),
            }
        })
        .collect()
}

/// Runs the whole experiment and writes results.json, report.md and the figures into --out.
pub fn run(args: &GilbertArgs) -> Result<GilbertResults> {
    let fs_type = args.fs_type.unwrap_or(FsType::Ext4);
    let shapes = Shapes::new(args, fs_type);
    let (configs, corruptions) = validate(args, fs_type, &shapes)?;
    let mut warnings = Vec::new();
    // XFS inodes are at most half a block: leave out the shapes mkfs.xfs cannot make.
    let (configs, dropped): (Vec<Config>, Vec<Config>) = configs
        .into_iter()
        .partition(|c| fs_type != FsType::Xfs || 2 * c.inode_size <= c.block_size);
    if !dropped.is_empty() {
        let labels: Vec<String> = dropped.iter().map(Config::label).collect();
        if configs.is_empty() {
            bail!(
                "mkfs.xfs can make none of the shapes: {}",
                labels.join("; ")
            );
        }
        warnings.push(format!(
            "left out (XFS inodes are at most half a block): {}",
            labels.join("; ")
        ));
    }
    let list = checker_list(args, fs_type)?;
    let mkfs = match fs_type {
        FsType::Xfs => xfs::tool("mkfs.xfs")?,
        _ => tools::resolve_tool(args.mke2fs.as_deref(), "mke2fs")?,
    };
    std::fs::create_dir_all(&args.out)
        .with_context(|| format!("creating {}", args.out.display()))?;
    let checkers = Checkers {
        list: &list,
        runs: args.runs,
        timeout: Duration::from_secs_f64(args.timeout),
        log_dir: &args.out,
    };
    let mut baselines = Vec::new();
    let mut rows = Vec::new();
    let image = args.out.join("gilbert.img");
    let manifest = args.out.join("gilbert.manifest.json");
    for (k, c) in configs.iter().enumerate() {
        eprintln!("[{}/{}] {}", k + 1, configs.len(), c.label());
        let tree_parent = args.tree_dir.as_deref().unwrap_or(&args.out);
        let files = build_image(c, fs_type, args.seed, tree_parent, &image, &mkfs)?;
        let image_bytes = std::fs::metadata(&image)?.len();
        let pristine = std::fs::read(&image)
            .ok()
            .filter(|_| image_bytes <= 64 << 20);
        let clean: Vec<Clean> = checkers
            .measure(&image, true)?
            .into_iter()
            .zip(&list)
            .map(|(measure, info)| Clean {
                checker: info.name.clone(),
                measure,
            })
            .collect();
        for b in &clean {
            if b.measure.outcomes.iter().any(|o| o != "0") {
                warnings.push(format!(
                    "{}: {} did not find the clean image clean ({})",
                    c.label(),
                    b.checker,
                    b.measure.outcomes.join(", ")
                ));
            }
        }
        for name in &corruptions {
            let one = OneCorruption {
                config: *c,
                name,
                fs_type,
                image: &image,
                manifest: &manifest,
                seed: args.seed,
                pristine: pristine.as_deref(),
            };
            rows.push(one.run(&checkers, &clean)?);
        }
        baselines.push(Baseline {
            config: *c,
            image_bytes,
            files,
            checkers: clean,
        });
    }
    if !args.keep {
        let _ = std::fs::remove_file(&image);
    }
    let _ = std::fs::remove_file(&manifest);

    let by_type = summarize(&corruptions, &rows, &list);
    let skipped = rows.iter().filter(|r| r.error.is_some()).count();
    if skipped > 0 {
        warnings.push(format!(
            "{skipped} corruption(s) could not be applied to their image; see the table"
        ));
    }
    if rows
        .iter()
        .flat_map(|r| r.checkers.iter().map(|s| &s.measure))
        .chain(
            baselines
                .iter()
                .flat_map(|b| b.checkers.iter().map(|c| &c.measure)),
        )
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
        fs_sizes_mib: shapes.fs_sizes,
        block_sizes: shapes.block_sizes,
        inode_sizes: shapes.inode_sizes,
        corruptions,
        runs: args.runs,
        seed: args.seed,
        checkers: list,
        ffsck_threads: args.threads,
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

/// One corruption type applied to one built image, measured, and undone.
struct OneCorruption<'a> {
    config: Config,
    name: &'a String,
    fs_type: FsType,
    image: &'a Path,
    manifest: &'a Path,
    seed: u64,
    /// The clean image's bytes, when small enough to compare the undo against.
    pristine: Option<&'a [u8]>,
}

impl OneCorruption<'_> {
    /// Applies the corruption with `corrupt`, times every checker on the damage, undoes it
    /// from the manifest and returns the row (with the error when it could not be applied).
    fn run(&self, checkers: &Checkers<'_>, clean: &[Clean]) -> Result<Row> {
        let mut argv: Vec<String> = vec![
            "--image".into(),
            self.image.to_string_lossy().into_owned(),
            "--seed".into(),
            self.seed.to_string(),
            "--manifest".into(),
            self.manifest.to_string_lossy().into_owned(),
        ];
        argv.extend(corrupt_argv(self.name, self.fs_type)?);
        let argv: Vec<&str> = argv.iter().map(String::as_str).collect();
        let cargs: CorruptArgs = crate::parse_args(&argv)?;
        let applied = corrupt::run(&cargs);
        let mut row = Row {
            config: self.config,
            corruption: self.name.clone(),
            error: None,
            changes: 0,
            description: String::new(),
            checkers: Vec::new(),
        };
        match applied {
            Err(e) => row.error = Some(format!("{e:#}")),
            Ok(m) => {
                let measured = checkers.measure(self.image, false);
                undo(self.image, &m)?;
                if let Some(p) = self.pristine {
                    if std::fs::read(self.image)? != *p {
                        bail!("undoing `{}` did not restore the image", self.name);
                    }
                }
                row.checkers = series(measured?, clean);
                let line: Vec<String> = row
                    .checkers
                    .iter()
                    .zip(clean)
                    .map(|(s, b)| {
                        format!(
                            "{} {:.3} s → {:.3} s",
                            s.checker, b.measure.median_wall_s, s.measure.median_wall_s
                        )
                    })
                    .collect();
                eprintln!("  {}: {}", self.name, line.join(", "));
                row.changes = m.changes.len();
                row.description = m.description;
            }
        }
        Ok(row)
    }
}

/// Runtime and memory growth per corruption type (median over shapes), one bar per checker.
pub fn figures(r: &GilbertResults, out: &Path) -> Result<Vec<Figure>> {
    let cats: Vec<String> = r.by_type.iter().map(|t| t.corruption.clone()).collect();
    let per_checker = |f: fn(&Growth) -> f64| -> Vec<(String, Vec<f64>)> {
        let values = |k: usize| -> Vec<f64> {
            r.by_type
                .iter()
                .map(|t| t.checkers.get(k).map_or(f64::NAN, f))
                .collect()
        };
        (r.checkers.iter().enumerate())
            .map(|(k, c)| (c.name.clone(), values(k)))
            .collect()
    };
    let shapes = r.baselines.len();
    let specs = [
        (
            "gilbert-time",
            format!("Runtime growth after corruption ({shapes} image shapes)"),
            "median wall after / before",
            per_checker(|g| g.time_growth),
        ),
        (
            "gilbert-memory",
            format!("Peak memory growth after corruption ({shapes} image shapes)"),
            "median peak RSS after / before",
            per_checker(|g| g.rss_growth),
        ),
    ];
    let mut figures = Vec::new();
    for (stem, title, x_label, series) in specs {
        let plot = BarPlot {
            title,
            x_label: x_label.into(),
            categories: cats.clone(),
            series,
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

/// One column header per checker: `NAME suffix`.
fn headers(r: &GilbertResults, suffix: &str) -> Vec<String> {
    r.checkers
        .iter()
        .map(|c| format!("{} {suffix}", c.name))
        .collect()
}

/// The report: set-up, per-type summary, clean baselines, every row, figures, warnings.
pub fn render_markdown(r: &GilbertResults) -> String {
    let mut out = String::from("## Gilbert experiment: checker cost after metadata corruption\n\n");
    let checkers: Vec<String> = r
        .checkers
        .iter()
        .map(|c| {
            let copy = if c.on_copy { ", on a scratch copy" } else { "" };
            format!("{}: `{}` ({}{copy})", c.name, c.path.display(), c.version)
        })
        .collect();
    out.push_str(&format!(
        "- {} images ({}; sizes {:?} MiB × block sizes {:?} × inode sizes {:?}), seed {}\n\
         - {} corruption types, each applied alone to the clean image and undone after\n\
         - {}{}\n\
         - {} alternating runs per checker and state; medians; peak RSS via the `__measure` shim\n\n",
        r.baselines.len(),
        r.fs_type.name(),
        r.fs_sizes_mib,
        r.block_sizes,
        r.inode_sizes,
        r.seed,
        r.corruptions.len(),
        checkers.join("; "),
        match (r.fs_type, r.ffsck_threads) {
            (FsType::Xfs, _) => String::new(),
            (_, t) => format!(
                "; ffsck threads: {}",
                t.map_or("ffsck default".to_string(), |t| t.to_string())
            ),
        },
        r.runs
    ));
    let n = r.checkers.len();
    let table = |fixed: &[&str], cols: Vec<String>, right: Vec<bool>, rows: &[Vec<String>]| {
        let mut header: Vec<&str> = fixed.to_vec();
        header.extend(cols.iter().map(String::as_str));
        markdown::table(&header, &right, rows)
    };
    out.push_str("### Growth per corruption type (median over image shapes)\n\n");
    let rows: Vec<Vec<String>> = r
        .by_type
        .iter()
        .map(|t| {
            let mut v = vec![t.corruption.clone(), t.configs.to_string()];
            v.extend(t.checkers.iter().map(|g| growth(g.time_growth)));
            v.extend(t.checkers.iter().map(|g| growth(g.rss_growth)));
            v
        })
        .collect();
    let right = [vec![false], vec![true; 1 + 2 * n]].concat();
    let cols = [headers(r, "time"), headers(r, "RSS")].concat();
    out.push_str(&table(&["corruption", "images"], cols, right, &rows));
    out.push_str("\n### Clean images\n\n");
    let rows: Vec<Vec<String>> = r
        .baselines
        .iter()
        .map(|b| {
            let mut v = vec![
                b.config.fs_mib.to_string(),
                b.config.block_size.to_string(),
                b.config.inode_size.to_string(),
                b.files.to_string(),
            ];
            v.extend(b.checkers.iter().map(|c| secs(&c.measure)));
            v.extend(b.checkers.iter().map(|c| mib(&c.measure)));
            v
        })
        .collect();
    let cols = [headers(r, "(s)"), headers(r, "RSS (MiB)")].concat();
    let fixed = ["MiB", "block", "inode", "files"];
    out.push_str(&table(&fixed, cols, vec![true; 4 + 2 * n], &rows));
    out.push_str("\n### Every image and corruption\n\n");
    let rows: Vec<Vec<String>> = r
        .rows
        .iter()
        .map(|row| {
            let c = &row.config;
            let mut v = vec![
                format!("{}M/{}/{}", c.fs_mib, c.block_size, c.inode_size),
                row.corruption.clone(),
            ];
            if row.checkers.len() != n {
                v.extend(std::iter::repeat_n("–".to_string(), 3 * n));
                v.push(format!(
                    "not applied: {}",
                    row.error.as_deref().unwrap_or("?")
                ));
                return v;
            }
            for s in &row.checkers {
                v.extend([secs(&s.measure), growth(s.time_growth)]);
            }
            v.extend(row.checkers.iter().map(|s| mib(&s.measure)));
            let exits: Vec<String> = row
                .checkers
                .iter()
                .map(|s| s.measure.outcomes.join(","))
                .collect();
            v.push(exits.join(" / "));
            v
        })
        .collect();
    let mut cols = Vec::new();
    for h in headers(r, "(s)") {
        cols.extend([h, "× clean".to_string()]);
    }
    cols.extend(headers(r, "RSS (MiB)"));
    let names: Vec<&str> = r.checkers.iter().map(|c| c.name.as_str()).collect();
    cols.push(format!("exit {}", names.join(" / ")));
    let right = [vec![false, false], vec![true; 3 * n], vec![false]].concat();
    out.push_str(&table(&["image", "corruption"], cols, right, &rows));
    out.push_str(&crate::plots::render_figures(&r.figures));
    if !r.warnings.is_empty() {
        out.push_str("\n### Warnings\n\n");
        for w in &r.warnings {
            out.push_str(&format!("- {w}\n"));
        }
    }
    out
}

/// CLI entry for `gilbert`.
pub fn main(args: &GilbertArgs) -> Result<()> {
    let r = run(args)?;
    print!("{}", render_markdown(&r));
    eprintln!(
        "wrote {} and {}",
        args.out.join("results.json").display(),
        args.out.join("report.md").display()
    );
    Ok(())
}
