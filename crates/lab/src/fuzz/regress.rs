//! The regression folder: one small JSON recipe per minimized failing case (the image recipe
//! and the damage list, never the image), and its replay. A recipe lists the checks that
//! still fail under `known_failing`, each with the reason; a replay passes when exactly those
//! fail, so a fixed case that regresses and a known failure that starts passing without
//! being moved both show. A recipe may also name checks it `expect`s to see (such as
//! `ffsck-only-repairs` for damage only ffsck's one run repairs, which no failing check would
//! show regressing).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use serde::{Deserialize, Serialize};

use super::case::{Runs, Tools};
use super::damage::Step;
use super::minimize::replay_steps;
use super::profile::{self, BuildTools, ImageRecipe};
use super::verdict::Check;

/// A check a recipe still fails, and why.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct KnownFailing {
    pub check: Check,
    pub reason: String,
}

/// One regression recipe.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Regression {
    /// What it shows, in a few words.
    pub name: String,
    /// Where it came from: `ffsck-lab fuzz --seed S`, case I.
    pub found: String,
    pub image: ImageRecipe,
    pub damage: Vec<Step>,
    /// Checks that still fail with the current ffsck (empty once fixed).
    #[serde(default)]
    pub known_failing: Vec<KnownFailing>,
    /// Checks the replay must show although they are no failure (`ffsck-only-repairs`: one
    /// `ffsck -fy` repairs what one `e2fsck -fy` does not).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub expect: Vec<Check>,
    /// When found: each run's exit code and first lines.
    #[serde(default)]
    pub outputs: BTreeMap<String, String>,
}

/// The runs worth quoting, as `exit: first lines`.
pub fn outputs(r: &Runs) -> BTreeMap<String, String> {
    let q = |run: &super::case::Run| format!("{}: {}", run.code(), run.line);
    BTreeMap::from([
        ("1 e2fsck -fn".to_string(), q(&r.e2fsck_n)),
        ("2 ffsck -fn".to_string(), q(&r.ffsck_n1)),
        ("3 e2fsck -fy".to_string(), q(&r.e2fsck_y1)),
        (
            "4 e2fsck -fn after e2fsck -fy".to_string(),
            q(&r.e2fsck_y1_check),
        ),
        ("5 ffsck -fy".to_string(), q(&r.ffsck_y)),
        (
            "6 e2fsck -fn after ffsck -fy".to_string(),
            q(&r.ffsck_y_check_e2fsck),
        ),
        (
            "7 ffsck -fn after ffsck -fy".to_string(),
            q(&r.ffsck_y_check_ffsck),
        ),
    ])
}

/// Every `*.json` recipe in `dir`, sorted by file name.
pub fn load_dir(dir: &Path) -> Result<Vec<(PathBuf, Regression)>> {
    let mut out = Vec::new();
    let Ok(rd) = std::fs::read_dir(dir) else {
        return Ok(out);
    };
    for e in rd {
        let p = e?.path();
        if p.extension().is_some_and(|x| x == "json") {
            let text = std::fs::read_to_string(&p)?;
            let r: Regression =
                serde_json::from_str(&text).with_context(|| format!("parsing {}", p.display()))?;
            out.push((p, r));
        }
    }
    out.sort_by(|a, b| a.0.cmp(&b.0));
    Ok(out)
}

/// Builds the recipe's image in `dir`, applies its damage and runs the case.
pub fn replay(t: &Tools, reg: &Regression, dir: &Path) -> Result<(Vec<Check>, Runs)> {
    let bt = BuildTools {
        mke2fs: t.mke2fs.clone(),
        e2fsck: t.e2fsck.clone(),
        debugfs: t.debugfs.clone(),
    };
    let built = profile::build(&reg.image, &bt, dir)?;
    replay_steps(t, &built.image, built.journal.as_deref(), &reg.damage, dir)
}

/// Whether a replay shows exactly the known failures: `Err` lists what regressed and what
/// now passes.
pub fn judge(reg: &Regression, checks: &[Check]) -> std::result::Result<(), String> {
    let mut problems = Vec::new();
    for c in checks.iter().filter(|c| c.is_failure()) {
        if !reg.known_failing.iter().any(|k| k.check == *c) {
            problems.push(format!("fails {} (not listed in known_failing)", c.name()));
        }
    }
    for e in reg.expect.iter().filter(|e| !checks.contains(e)) {
        problems.push(format!("no longer shows {} (listed in expect)", e.name()));
    }
    for k in &reg.known_failing {
        if !checks.contains(&k.check) {
            problems.push(format!(
                "now passes {} (remove it from known_failing)",
                k.check.name()
            ));
        }
    }
    if problems.is_empty() {
        Ok(())
    } else {
        Err(problems.join("; "))
    }
}
