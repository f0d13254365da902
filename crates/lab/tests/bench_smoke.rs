//! Smoke test for `ffsck-lab bench` at a tiny size: it must build a clean image, time both
//! checkers alternately, and write results.json and report.md with a row for each.

mod common;

use ffsck_lab::bench::{self, BenchArgs};

#[test]
fn tiny_bench_writes_results_and_report() {
    if common::tool("mke2fs").is_none() || common::tool("e2fsck").is_none() {
        common::skip("mke2fs/e2fsck not installed");
        return;
    }
    // The real ffsck if built; otherwise e2fsck stands in (it accepts the same `-fn IMAGE`),
    // which still exercises everything the harness does.
    let ffsck = common::ffsck_binary()
        .or_else(|| common::tool("e2fsck"))
        .unwrap();
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("bench");

    let args: BenchArgs = ffsck_lab::parse_args(&[
        "--inodes",
        "2000",
        "--runs",
        "3",
        "--scaling",
        "--out",
        out.to_str().unwrap(),
        "--ffsck",
        ffsck.to_str().unwrap(),
        "--timeout",
        "120",
    ])
    .unwrap();
    let results = bench::run(&args).unwrap();

    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("results.json")).unwrap()).unwrap();
    let summary = json["summary"].as_array().unwrap();
    let checkers: Vec<&str> = summary
        .iter()
        .map(|s| s["checker"].as_str().unwrap())
        .collect();
    assert_eq!(checkers, ["ffsck", "e2fsck"]);
    for s in summary {
        assert_eq!(s["runs"], 3);
        assert!(s["median_wall_s"].as_f64().unwrap() > 0.0);
        assert!(s["median_max_rss_kib"].as_f64().unwrap() > 0.0);
    }
    // 1 warm-up + 3 timed runs each, then 3 runs per thread count.
    let cpus = std::thread::available_parallelism().unwrap().get();
    assert_eq!(json["runs"].as_array().unwrap().len(), 8 + 3 * cpus);
    assert_eq!(results.scaling.len(), cpus);
    // Thread counts take turns: each run starts one count later than the run before.
    let order: Vec<u64> = json["runs"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| r["phase"] == "scaling")
        .map(|r| r["threads"].as_u64().unwrap())
        .collect();
    let want: Vec<u64> = (0..3)
        .flat_map(|run| (0..cpus).map(move |k| ((k + run) % cpus + 1) as u64))
        .collect();
    assert_eq!(order, want);
    let ceiling = results
        .ceiling
        .as_ref()
        .expect("warm scaling measures the ceiling");
    assert_eq!(ceiling.rows.len(), cpus);
    assert!(ceiling
        .rows
        .iter()
        .all(|r| r.compute_s > 0.0 && r.copy_s > 0.0));

    // A freshly built file system must be clean for the reference checker.
    assert_eq!(results.summary[1].outcomes, ["0"]);
    let built = results.built.as_ref().unwrap();
    assert!((1500..=2500).contains(&(built.files + built.dirs)));
    if let Some(used) = results.fs.as_ref().and_then(|fs| fs.used_inodes()) {
        assert!((1500..=2600).contains(&used), "{used} inodes in use");
    }

    let report = std::fs::read_to_string(out.join("report.md")).unwrap();
    assert!(report.contains("| ffsck "), "{report}");
    assert!(report.contains("| e2fsck "), "{report}");
    assert!(report.contains("Speedup"));
    assert!(report.contains("machine: compute"), "{report}");
    // Each of the 3 timed ffsck runs was predicted by `ffsck --estimate` first.
    let estimate = results.estimate.as_ref().expect("estimate check");
    assert_eq!(estimate.pairs.len(), 3);
    assert!(estimate.pairs.iter().all(|&(e, w)| e > 0.0 && w > 0.0));
    assert!(report.contains("ffsck --estimate"), "{report}");
    // Without --keep the built image is removed; the tree is always removed.
    assert!(!results.image.exists());
    let leftovers: Vec<_> = std::fs::read_dir(&out)
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .filter(|n| n.to_string_lossy().starts_with("ffsck-lab-tree-"))
        .collect();
    assert!(leftovers.is_empty(), "{leftovers:?}");
}

#[test]
fn too_few_runs_is_a_clear_error() {
    let args: BenchArgs = ffsck_lab::parse_args(&["--runs", "2"]).unwrap();
    let err = bench::run(&args).unwrap_err().to_string();
    assert!(err.contains("--runs must be at least 3"), "{err}");
}
