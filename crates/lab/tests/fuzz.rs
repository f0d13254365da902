//! `ffsck-lab fuzz`: a small seeded run is reproducible (same seed, same profiles and damage),
//! resumable and counted consistently; every recipe of the regression folder replays with
//! exactly its known failures.

mod common;

use std::path::{Path, PathBuf};

use ffsck_lab::fuzz::{self, regress, verdict::Check, CaseRecord, FuzzArgs};

/// The tools a fuzz case needs, or `None` after saying why the test is skipped.
fn ffsck_and_tools() -> Option<PathBuf> {
    for t in ["mke2fs", "e2fsck", "debugfs", "dumpe2fs"] {
        if common::tool(t).is_none() {
            common::skip(&format!("{t} not installed"));
            return None;
        }
    }
    let ffsck = common::ffsck_binary();
    if ffsck.is_none() {
        common::skip("ffsck binary not built (cargo build --release -p ffsck)");
    }
    ffsck
}

fn args(ffsck: &Path, out: &Path, extra: &[&str]) -> FuzzArgs {
    let mut argv = vec![
        "--ffsck",
        ffsck.to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
        "--workdir",
        out.to_str().unwrap(),
        "--quiet",
    ];
    argv.extend_from_slice(extra);
    ffsck_lab::parse_args(&argv).unwrap()
}

fn records(out: &Path, n: usize) -> Vec<CaseRecord> {
    (0..n)
        .map(|i| {
            let p = out.join("cases").join(format!("case-{i:05}.json"));
            serde_json::from_str(&std::fs::read_to_string(p).unwrap()).unwrap()
        })
        .collect()
}

#[test]
fn small_run_is_reproducible_resumable_and_consistent() {
    let Some(ffsck) = ffsck_and_tools() else {
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    let (a, b) = (tmp.path().join("a"), tmp.path().join("b"));
    let run = [
        "--seed",
        "3",
        "--cases",
        "6",
        "--jobs",
        "2",
        "--no-minimize",
    ];
    let sa = fuzz::run(&args(&ffsck, &a, &run)).unwrap();
    let sb = fuzz::run(&args(&ffsck, &b, &run)).unwrap();
    let (ra, rb) = (records(&a, 6), records(&b, 6));
    for (x, y) in ra.iter().zip(&rb) {
        assert_eq!(
            (&x.image, &x.damage, x.case_seed),
            (&y.image, &y.damage, y.case_seed),
            "case {}",
            x.index
        );
    }
    // Profiles differ between cases, and damage was applied.
    assert!(ra.windows(2).any(|w| w[0].image != w[1].image));
    let built: Vec<&CaseRecord> = ra.iter().filter(|r| r.runs.is_some()).collect();
    assert!(
        built.len() >= 4,
        "too few images built: {:?}",
        sa.build_errors
    );
    assert!(built.iter().all(|r| !r.damage.is_empty()));
    for s in [&sa, &sb] {
        s.counts.consistent().unwrap();
        assert_eq!(s.cases, 6);
        assert_eq!(s.counts.cases + s.build_errors.len(), 6);
        assert_eq!(s.ran_now, 6);
        let per_class: usize = s.per_profile.values().map(|c| c.cases).sum();
        assert_eq!(per_class, s.counts.cases);
    }
    // The checks of each record are what its runs say.
    for r in &built {
        assert_eq!(r.checks, fuzz::verdict::classify(r.runs.as_ref().unwrap()));
    }
    // A rerun skips every case and gives the same summary.
    let again = fuzz::run(&args(&ffsck, &a, &run)).unwrap();
    assert_eq!(again.ran_now, 0);
    assert_eq!(again.counts, sa.counts);
    assert!(a.join("summary.md").is_file() && a.join("summary.json").is_file());
    // `--only` runs just the cases named, each with the profile and damage of the full run.
    let c = tmp.path().join("c");
    let only = ["--seed", "3", "--only", "4,1,4", "--no-minimize"];
    let sc = fuzz::run(&args(&ffsck, &c, &only)).unwrap();
    assert_eq!((sc.cases, sc.ran_now), (2, 2));
    let mut done: Vec<String> = std::fs::read_dir(c.join("cases"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    done.sort();
    assert_eq!(done, ["case-00001.json", "case-00004.json"]);
    for i in [1, 4] {
        let p = c.join("cases").join(format!("case-{i:05}.json"));
        let r: CaseRecord = serde_json::from_str(&std::fs::read_to_string(p).unwrap()).unwrap();
        let full = &ra[i];
        assert_eq!(
            (&r.image, &r.damage, r.case_seed, r.index),
            (&full.image, &full.damage, full.case_seed, i)
        );
    }
}

#[test]
fn only_selects_sorted_distinct_indices() {
    let a: FuzzArgs = ffsck_lab::parse_args(&["--out", "/x", "--cases", "7"]).unwrap();
    assert_eq!(a.indices(), (0..7).collect::<Vec<_>>());
    let b: FuzzArgs =
        ffsck_lab::parse_args(&["--out", "/x", "--only", "509,313,509", "--cases", "7"]).unwrap();
    assert_eq!(b.indices(), [313, 509]);
}

#[test]
fn judge_wants_exactly_the_known_failures() {
    let reg = |known: &[Check]| regress::Regression {
        name: "t".into(),
        found: "t".into(),
        image: serde_json::from_str(
            r#"{"fs":"ext2","block_size":1024,"inode_size":128,"features":[],
                "journal":"none","htree":false,"size_kib":8192,"seed":1}"#,
        )
        .unwrap(),
        damage: vec![],
        known_failing: known
            .iter()
            .map(|&check| regress::KnownFailing {
                check,
                reason: "r".into(),
            })
            .collect(),
        outputs: Default::default(),
        expect: vec![],
    };
    assert!(regress::judge(&reg(&[]), &[]).is_ok());
    assert!(regress::judge(&reg(&[]), &[Check::FfsckOnlyRepairs]).is_ok());
    assert!(regress::judge(&reg(&[Check::Missed]), &[Check::Missed]).is_ok());
    let e = regress::judge(&reg(&[]), &[Check::Missed]).unwrap_err();
    assert!(e.contains("fails missed"), "{e}");
    let e = regress::judge(&reg(&[Check::Missed]), &[]).unwrap_err();
    assert!(e.contains("now passes missed"), "{e}");
    let mut want = reg(&[]);
    want.expect = vec![Check::FfsckOnlyRepairs];
    assert!(regress::judge(&want, &[Check::FfsckOnlyRepairs]).is_ok());
    let e = regress::judge(&want, &[]).unwrap_err();
    assert!(e.contains("no longer shows ffsck-only-repairs"), "{e}");
}

#[test]
fn regression_recipes_replay_as_recorded() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("fuzz-regressions");
    let recipes = regress::load_dir(&dir).unwrap();
    assert!(!recipes.is_empty(), "no recipes in {}", dir.display());
    let Some(ffsck) = ffsck_and_tools() else {
        return;
    };
    let root = unsafe { libc::geteuid() } == 0;
    let tmp = tempfile::tempdir().unwrap();
    let tools = fuzz::tools(&args(&ffsck, tmp.path(), &[])).unwrap();
    let mut bad = Vec::new();
    for (path, reg) in &recipes {
        let name = path.file_name().unwrap().to_string_lossy();
        if reg.image.journal == fuzz::profile::Journal::External && !root {
            common::skip(&format!("{name}: an external journal needs root (losetup)"));
            continue;
        }
        let work = tempfile::tempdir_in(tmp.path()).unwrap();
        let (checks, _) = regress::replay(&tools, reg, work.path()).unwrap();
        if let Err(e) = regress::judge(reg, &checks) {
            bad.push(format!("{name}: {e}"));
        }
    }
    assert!(bad.is_empty(), "recipes that changed:\n{}", bad.join("\n"));
}
