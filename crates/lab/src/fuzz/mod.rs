//! `ffsck-lab fuzz`: a differential fuzzer against e2fsck (issue 22, item 1). Each case draws
//! an image profile and a damage plan from `--seed` and the case number, builds the image,
//! damages it, and runs both checkers on it ([`case`]); [`verdict`] says which counters the
//! case hits. Failing cases are minimized to the fewest damage steps and written as recipes
//! into the regression folder ([`regress`]). Per-case results are kept in `--out`, so a rerun
//! skips the cases already done; the summary is written as Markdown and JSON.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::Duration;

use anyhow::{bail, Context, Result};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde::{Deserialize, Serialize};

pub mod case;
pub mod damage;
pub mod minimize;
pub mod profile;
pub mod regress;
mod report;
pub mod verdict;

use case::{Runs, Tools};
use damage::Step;
use profile::{BuildTools, ImageRecipe};
use verdict::{Check, Counts};

#[derive(clap::Args, Debug, Clone)]
pub struct FuzzArgs {
    /// Seed of the whole run: case I's profile and damage come from (seed, I).
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Number of cases.
    #[arg(long, default_value_t = 100)]
    pub cases: usize,
    /// Run only these case indices of the seed (comma-separated, e.g. `509,313`), each with
    /// the profile and damage it has in a full run; `--cases` is then ignored.
    #[arg(long, value_delimiter = ',')]
    pub only: Vec<usize>,
    /// Cases run in parallel [default: 2].
    #[arg(long, default_value_t = 2)]
    pub jobs: usize,
    /// Output folder: cases/case-NNNNN.json per case (a rerun skips those), summary.md,
    /// summary.json, regressions/.
    #[arg(long)]
    pub out: PathBuf,
    /// ffsck binary [default: `ffsck` next to ffsck-lab, then PATH].
    #[arg(long)]
    pub ffsck: Option<PathBuf>,
    /// e2fsck binary [default: from PATH or /sbin].
    #[arg(long)]
    pub e2fsck: Option<PathBuf>,
    /// ffsck's thread count for the N-thread `-fn` run.
    #[arg(long, default_value_t = 4)]
    pub threads: usize,
    /// Per-run time limit in seconds.
    #[arg(long, default_value_t = 30.0)]
    pub timeout: f64,
    /// Most damage steps per case (each case draws 1..=this).
    #[arg(long, default_value_t = 3)]
    pub max_steps: usize,
    /// Do not minimize failing cases (and write no recipes).
    #[arg(long)]
    pub no_minimize: bool,
    /// Where minimized recipes go [default: OUT/regressions]; one per failing check and
    /// damage-class signature.
    #[arg(long)]
    pub regressions: Option<PathBuf>,
    /// Where images are built and checked [default: /dev/shm when present, else OUT/tmp].
    #[arg(long)]
    pub workdir: Option<PathBuf>,
    /// Replay every recipe of this folder instead of fuzzing; exit non-zero when one fails
    /// a check it does not list as known-failing, or passes one it lists.
    #[arg(long, conflicts_with = "no_minimize")]
    pub replay: Option<PathBuf>,
    /// Keep every case's work folder (images, logs) under the work dir.
    #[arg(long)]
    pub keep: bool,
    /// No per-case progress lines.
    #[arg(long)]
    pub quiet: bool,
}

impl FuzzArgs {
    /// The case indices this run covers: `--only` (sorted, without repeats) when given, else
    /// `0..--cases`.
    pub fn indices(&self) -> Vec<usize> {
        if self.only.is_empty() {
            return (0..self.cases).collect();
        }
        let set: BTreeSet<usize> = self.only.iter().copied().collect();
        set.into_iter().collect()
    }
}

/// Everything kept about one case (`OUT/cases/case-NNNNN.json`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CaseRecord {
    pub index: usize,
    pub case_seed: u64,
    pub image: ImageRecipe,
    pub damage: Vec<Step>,
    /// The image could not be built or read (counted apart, not as a case).
    #[serde(default)]
    pub error: Option<String>,
    #[serde(default)]
    pub runs: Option<Runs>,
    #[serde(default)]
    pub checks: Vec<Check>,
    /// The minimized damage of a failing case.
    #[serde(default)]
    pub minimized: Option<Vec<Step>>,
    /// The recipe written for it (file name in the regression folder).
    #[serde(default)]
    pub regression: Option<String>,
}

/// The seed of case `i`: splitmix64 of the run seed and the index, so cases are independent
/// of `--cases` and of the order they run in.
pub fn case_seed(seed: u64, i: usize) -> u64 {
    let mut z = seed ^ (i as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// Resolves the programs.
pub fn tools(args: &FuzzArgs) -> Result<Tools> {
    use crate::tools::{resolve_ffsck, resolve_tool};
    Ok(Tools {
        ffsck: resolve_ffsck(args.ffsck.as_deref())?,
        e2fsck: resolve_tool(args.e2fsck.as_deref(), "e2fsck")?,
        debugfs: resolve_tool(None, "debugfs")?,
        dumpe2fs: resolve_tool(None, "dumpe2fs")?,
        mke2fs: resolve_tool(None, "mke2fs")?,
        threads: args.threads.max(2),
        timeout: Duration::from_secs_f64(args.timeout),
        now: 0,
    })
}

struct Ctx<'a> {
    args: &'a FuzzArgs,
    tools: Tools,
    workdir: PathBuf,
    regressions: PathBuf,
    /// (check, damage classes) already written as recipes.
    written: Mutex<BTreeSet<String>>,
}

fn build_tools(t: &Tools) -> BuildTools {
    BuildTools {
        mke2fs: t.mke2fs.clone(),
        e2fsck: t.e2fsck.clone(),
        debugfs: t.debugfs.clone(),
    }
}

/// The key under which a failure's recipe is deduplicated.
fn dedup_key(check: Check, steps: &[Step]) -> String {
    let mut classes: Vec<String> = steps.iter().map(Step::class).collect();
    classes.sort();
    format!("{} {}", check.name(), classes.join(","))
}

/// A work folder deleted on drop unless `--keep`.
struct Kept(Option<tempfile::TempDir>, bool);

impl Kept {
    fn path(&self) -> &Path {
        self.0
            .as_ref()
            .map_or(Path::new("/nonexistent"), |d| d.path())
    }
}

impl Drop for Kept {
    fn drop(&mut self) {
        if let (Some(d), true) = (self.0.take(), self.1) {
            eprintln!("kept {}", d.keep().display());
        }
    }
}

/// Draws, builds, damages and runs case `i`.
fn run_one(ctx: &Ctx, i: usize) -> Result<CaseRecord> {
    let case_seed = case_seed(ctx.args.seed, i);
    let mut rng = ChaCha8Rng::seed_from_u64(case_seed);
    let image = ImageRecipe::draw(&mut rng);
    let mut rec = CaseRecord {
        index: i,
        case_seed,
        image: image.clone(),
        damage: Vec::new(),
        error: None,
        runs: None,
        checks: Vec::new(),
        minimized: None,
        regression: None,
    };
    let dir = tempfile::Builder::new()
        .prefix(&format!("fuzz-{i:05}-"))
        .tempdir_in(&ctx.workdir)?;
    let dir = Kept(Some(dir), ctx.args.keep);
    let built = match profile::build(&image, &build_tools(&ctx.tools), dir.path()) {
        Ok(b) => b,
        Err(e) => {
            rec.error = Some(format!("build: {e:#}"));
            return Ok(rec);
        }
    };
    let layout = match damage::layout(&ctx.tools, &built.image, &built.catalog) {
        Ok(l) => l,
        Err(e) => {
            rec.error = Some(format!("layout: {e:#}"));
            return Ok(rec);
        }
    };
    let dmg = dir.path().join("damaged.img");
    std::fs::copy(&built.image, &dmg)?;
    let n = rng.random_range(1..=ctx.args.max_steps.max(1));
    let jcopy = match &built.journal {
        Some(j) => {
            let p = dir.path().join("damaged.journal");
            std::fs::copy(j, &p)?;
            Some(p)
        }
        None => None,
    };
    rec.damage = damage::draw_and_apply(
        n,
        &layout,
        &built.catalog,
        &dmg,
        &ctx.tools,
        dir.path(),
        &mut rng,
    )?;
    let runs = case::run_case(
        &ctx.tools,
        &dmg,
        jcopy.as_deref(),
        Some(&built.image),
        dir.path(),
    )?;
    rec.checks = verdict::classify(&runs);
    rec.runs = Some(runs);
    if let Some(&target) = rec.checks.iter().find(|c| c.is_failure()) {
        if !ctx.args.no_minimize && !rec.damage.is_empty() {
            let base = built.image.as_path();
            let j = built.journal.as_deref();
            if let Some((steps, runs)) =
                minimize::minimize(&ctx.tools, base, j, &rec.damage, target, dir.path())?
            {
                rec.regression = write_regression(ctx, &rec, target, &steps, &runs)?;
                rec.minimized = Some(steps);
            }
        }
    }
    Ok(rec)
}

/// Writes the recipe of a minimized failure unless one with the same key exists.
fn write_regression(
    ctx: &Ctx,
    rec: &CaseRecord,
    target: Check,
    steps: &[Step],
    runs: &Runs,
) -> Result<Option<String>> {
    let key = dedup_key(target, steps);
    if !ctx.written.lock().unwrap().insert(key.clone()) {
        return Ok(None);
    }
    let checks = verdict::classify(runs);
    let outputs = regress::outputs(runs);
    let why = format!(
        "e2fsck -fn {}, ffsck -fn {}; after one -fy: e2fsck's {}, ffsck's {}",
        runs.e2fsck_n.code(),
        runs.ffsck_n1.code(),
        runs.e2fsck_y1_check.code(),
        runs.ffsck_y_check_e2fsck.code()
    );
    let reg = regress::Regression {
        name: key,
        found: format!(
            "ffsck-lab fuzz --seed {}, case {}",
            ctx.args.seed, rec.index
        ),
        image: rec.image.clone(),
        damage: steps.to_vec(),
        expect: Vec::new(),
        known_failing: checks
            .iter()
            .filter(|c| c.is_failure())
            .map(|&check| regress::KnownFailing {
                check,
                reason: format!("open: {why}"),
            })
            .collect(),
        outputs,
    };
    let name = format!(
        "s{}-c{:05}-{}.json",
        ctx.args.seed,
        rec.index,
        target.name()
    );
    std::fs::create_dir_all(&ctx.regressions)?;
    let path = ctx.regressions.join(&name);
    std::fs::write(&path, serde_json::to_string_pretty(&reg)? + "\n")
        .with_context(|| format!("writing {}", path.display()))?;
    Ok(Some(name))
}

fn case_path(out: &Path, i: usize) -> PathBuf {
    out.join("cases").join(format!("case-{i:05}.json"))
}

fn load_case(out: &Path, i: usize) -> Option<CaseRecord> {
    let text = std::fs::read_to_string(case_path(out, i)).ok()?;
    serde_json::from_str(&text).ok()
}

/// The summary of a run: overall counts, per damage class, per file system type, and the
/// failing cases.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Summary {
    pub seed: u64,
    pub cases: usize,
    /// Cases whose image could not be built (with why), not counted below.
    pub build_errors: Vec<String>,
    pub counts: Counts,
    /// Per damage class (a case counts once in each class of its steps).
    pub per_class: BTreeMap<String, Counts>,
    /// Per file system type and block size (`ext4-1k`).
    pub per_profile: BTreeMap<String, Counts>,
    /// Cases run now (the rest were loaded from an earlier run).
    pub ran_now: usize,
    pub failures: Vec<report::FailureRow>,
}

/// Runs the fuzzer; returns the summary (also written to OUT/summary.{md,json}).
pub fn run(args: &FuzzArgs) -> Result<Summary> {
    let tools = tools(args)?;
    std::fs::create_dir_all(args.out.join("cases"))?;
    let workdir = match &args.workdir {
        Some(w) => w.clone(),
        None if Path::new("/dev/shm").is_dir() => PathBuf::from("/dev/shm"),
        None => args.out.join("tmp"),
    };
    std::fs::create_dir_all(&workdir)?;
    let regressions = args
        .regressions
        .clone()
        .unwrap_or_else(|| args.out.join("regressions"));
    let written: BTreeSet<String> = regress::load_dir(&regressions)?
        .into_iter()
        .map(|(_, r)| r.name)
        .collect();
    let ctx = Ctx {
        args,
        tools,
        workdir,
        regressions,
        written: Mutex::new(written),
    };
    let indices = args.indices();
    let next = AtomicUsize::new(0);
    let ran = AtomicUsize::new(0);
    let errors: Mutex<Vec<String>> = Mutex::new(Vec::new());
    std::thread::scope(|s| {
        for _ in 0..args.jobs.max(1) {
            s.spawn(|| {
                while let Some(&i) = indices.get(next.fetch_add(1, Ordering::SeqCst)) {
                    if load_case(&args.out, i).is_some() {
                        continue;
                    }
                    match run_one(&ctx, i) {
                        Ok(rec) => {
                            ran.fetch_add(1, Ordering::SeqCst);
                            if !args.quiet {
                                eprintln!("{}", report::progress_line(&rec));
                            }
                            let text =
                                serde_json::to_string_pretty(&rec).unwrap_or_default() + "\n";
                            if let Err(e) = std::fs::write(case_path(&args.out, i), text) {
                                errors.lock().unwrap().push(format!("case {i}: {e}"));
                            }
                        }
                        Err(e) => errors.lock().unwrap().push(format!("case {i}: {e:#}")),
                    }
                }
            });
        }
    });
    let errors = errors.into_inner().unwrap();
    if !errors.is_empty() {
        bail!("harness errors:\n{}", errors.join("\n"));
    }
    let records: Vec<CaseRecord> = indices
        .iter()
        .filter_map(|&i| load_case(&args.out, i))
        .collect();
    let mut summary = report::summarize(args.seed, &records);
    summary.ran_now = ran.into_inner();
    std::fs::write(
        args.out.join("summary.json"),
        serde_json::to_string_pretty(&summary)? + "\n",
    )?;
    std::fs::write(args.out.join("summary.md"), report::markdown(&summary))?;
    Ok(summary)
}

/// One replayed recipe: file name, the checks it hit, and [`regress::judge`]'s verdict.
pub type Replayed = (String, Vec<Check>, Result<(), String>);

/// Replays every recipe of `dir`.
pub fn replay_dir(args: &FuzzArgs, dir: &Path) -> Result<Vec<Replayed>> {
    let tools = tools(args)?;
    let mut out = Vec::new();
    for (path, reg) in regress::load_dir(dir)? {
        let tmp = tempfile::tempdir()?;
        let name = path
            .file_name()
            .unwrap_or_default()
            .to_string_lossy()
            .into_owned();
        let (checks, _) = regress::replay(&tools, &reg, tmp.path())
            .with_context(|| format!("replaying {name}"))?;
        let verdict = regress::judge(&reg, &checks);
        if args.keep {
            eprintln!("kept {} (built image of {name})", tmp.keep().display());
        }
        out.push((name, checks, verdict));
    }
    Ok(out)
}

/// CLI entry.
pub fn main(args: &FuzzArgs) -> Result<()> {
    if let Some(dir) = &args.replay {
        let results = replay_dir(args, dir)?;
        let mut bad = 0;
        for (name, checks, verdict) in &results {
            let names: Vec<String> = checks.iter().map(|c| c.name()).collect();
            match verdict {
                Ok(()) => println!("ok   {name}: [{}]", names.join(", ")),
                Err(e) => {
                    bad += 1;
                    println!("FAIL {name}: {e}");
                }
            }
        }
        if bad > 0 {
            bail!(
                "{bad} of {} recipes did not replay as recorded",
                results.len()
            );
        }
        return Ok(());
    }
    let s = run(args)?;
    print!("{}", report::markdown(&s));
    Ok(())
}
