//! The JSON report (`--json FILE`, `--json -`): written in every outcome (check, repair, clean
//! skip, open failure, refusal, usage error, cancellation) and valid against
//! docs/ffsck-report.schema.json, with the run's facts (device, UUID, label, options,
//! findings with e2fsck codes and answers, exit code).

use crate::common;

use common::{Image, Tools, Value};
use std::ffi::OsStr;
use std::io::BufRead;
use std::path::Path;
use std::process::{Command, Stdio};

const UUID: &str = "6f1c2a3e-1d2b-4c5d-8e9f-0a1b2c3d4e5f";
const LABEL: &str = "jsonlabel";

fn validator() -> jsonschema::Validator {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../docs/ffsck-report.schema.json"
    );
    let schema: Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    jsonschema::options()
        .should_validate_formats(true)
        .build(&schema)
        .expect("the schema compiles")
}

/// The schema's complaints about `doc` (empty: valid).
fn complaints(doc: &Value) -> Vec<String> {
    validator()
        .iter_errors(doc)
        .map(|e| format!("{e} (at {})", e.instance_path()))
        .collect()
}

fn assert_valid(doc: &Value) {
    let errs = complaints(doc);
    assert!(
        errs.is_empty(),
        "the report does not match the schema:\n{}\n{doc:#}",
        errs.join("\n")
    );
}

/// `ffsck ARGS --json FILE DEVICE`: the run and its report (which must exist and be valid).
fn run(args: &[&str], json: &Path, device: &OsStr) -> (common::Run, Value) {
    let _ = std::fs::remove_file(json);
    let mut a: Vec<&OsStr> = args.iter().map(OsStr::new).collect();
    a.extend([OsStr::new("--json"), json.as_os_str(), device]);
    let run = common::ffsck(&a);
    let text = std::fs::read_to_string(json).unwrap_or_else(|e| {
        panic!(
            "no JSON report ({e})\nstdout:\n{}\nstderr:\n{}",
            run.stdout, run.stderr
        )
    });
    let doc: Value = serde_json::from_str(&text).expect("the report parses");
    assert_valid(&doc);
    assert_eq!(
        doc["exit_code"].as_i64(),
        run.code.map(i64::from),
        "{doc:#}"
    );
    (run, doc)
}

fn labelled(t: &Tools) -> Image {
    common::mkfs(t, "ext4", &["-U", UUID, "-L", LABEL], "16M")
}

fn damaged(t: &Tools) -> Image {
    let img = labelled(t);
    common::debugfs_w(t, &img.path, "sif /a/f1 blocks 999");
    common::debugfs_w(t, &img.path, "set_bg 0 free_blocks_count 7");
    img
}

#[test]
fn schema_rejects_a_wrong_document() {
    // The validation the other tests rely on can fail.
    let Some(t) = common::tools() else { return };
    let img = labelled(&t);
    let (_, doc) = run(&["-fn"], &img.aux("r.json"), img.path.as_os_str());
    for (field, bad) in [
        ("exit_code", Value::from("0")),
        ("version", Value::from(1)),
        ("result", Value::from("fine")),
        ("started", Value::from("yesterday")),
    ] {
        let mut d = doc.clone();
        d[field] = bad;
        assert!(!complaints(&d).is_empty(), "{field} accepted");
    }
    let mut d = doc.clone();
    d.as_object_mut().unwrap().remove("findings");
    assert!(!complaints(&d).is_empty(), "no findings accepted");
}

#[test]
fn clean_check_reports_device_file_system_options_and_passes() {
    let Some(t) = common::tools() else { return };
    let img = labelled(&t);
    let (r, doc) = run(&["-fn"], &img.aux("r.json"), img.path.as_os_str());
    assert_eq!(r.code(), 0, "{}{}", r.stdout, r.stderr);
    assert_eq!(doc["format"], "ffsck-report");
    assert_eq!(doc["version"], 2);
    assert_eq!(doc["tool"]["name"], "ffsck");
    assert_eq!(doc["tool"]["version"], env!("CARGO_PKG_VERSION"));
    assert_eq!(doc["result"], "checked");
    assert_eq!(doc["device"]["given"], img.path.display().to_string());
    let resolved = std::fs::canonicalize(&img.path).unwrap();
    assert_eq!(doc["device"]["resolved"], resolved.display().to_string());
    assert_eq!(doc["filesystem"]["uuid"], UUID);
    assert_eq!(doc["filesystem"]["label"], LABEL);
    assert_eq!(doc["options"]["mode"], "n");
    assert_eq!(doc["options"]["force"], true);
    assert!(
        doc["options"]["threads_used"].as_u64() >= Some(1),
        "{doc:#}"
    );
    let passes: Vec<u64> = doc["passes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["pass"].as_u64().unwrap())
        .collect();
    assert_eq!(passes, [0, 1, 2, 3, 4, 5], "{doc:#}");
    assert_eq!(doc["findings"], Value::Array(vec![]));
    assert!(doc["summary"]["inodes_used"].as_u64() > Some(10), "{doc:#}");
    assert!(doc["error"].is_null() && doc["skip"].is_null(), "{doc:#}");
    assert!(doc["started"].as_str() <= doc["finished"].as_str());
    assert!(doc["started"].as_str().unwrap().ends_with('Z'), "{doc:#}");
}

#[test]
fn repair_reports_fixed_findings_with_e2fsck_codes() {
    let Some(t) = common::tools() else { return };
    let img = damaged(&t);
    let (r, doc) = run(&["-fy"], &img.aux("r.json"), img.path.as_os_str());
    assert_eq!(r.code(), 1, "{}{}", r.stdout, r.stderr);
    assert_eq!(doc["result"], "checked");
    assert_eq!(doc["options"]["mode"], "y");
    let findings = doc["findings"].as_array().unwrap();
    let f = findings
        .iter()
        .find(|f| f["code"] == "P1_BAD_I_BLOCKS")
        .unwrap_or_else(|| panic!("no P1_BAD_I_BLOCKS: {doc:#}"));
    assert_eq!(f["e2fsck_code"], "0x01000d");
    assert_eq!(f["pass"], 1);
    assert_eq!(f["fixed"], true);
    assert_eq!(f["answer"], "yes");
    assert!(f["ctx"]["ino"].as_u64() > Some(0), "{f}");
    assert!(
        findings
            .iter()
            .any(|f| f["pass"] == 5 && f["fixed"] == true),
        "the group counts were fixed: {doc:#}"
    );
    // The same under -n: nothing fixed, answered no.
    let img = damaged(&t);
    let (r, doc) = run(&["-fn"], &img.aux("n.json"), img.path.as_os_str());
    assert_eq!(r.code(), 4);
    for f in doc["findings"].as_array().unwrap() {
        assert_eq!(f["fixed"], false, "{f}");
        assert!(f["answer"] == "no" || f["answer"] == "none", "{f}");
    }
}

#[test]
fn clean_skip_under_p_says_so() {
    let Some(t) = common::tools() else { return };
    let img = labelled(&t);
    let (r, doc) = run(&["-p"], &img.aux("r.json"), img.path.as_os_str());
    assert_eq!(r.code(), 0, "{}{}", r.stdout, r.stderr);
    assert_eq!(doc["result"], "skipped", "{doc:#}");
    assert_eq!(doc["skip"]["reason"], "clean");
    assert!(doc["skip"]["message"].as_str().unwrap().contains("clean"));
    assert_eq!(doc["options"]["mode"], "p");
    assert_eq!(doc["filesystem"]["uuid"], UUID);
    assert_eq!(doc["passes"], Value::Array(vec![]));
    assert!(doc["summary"].is_null());
}

#[test]
fn missing_device_is_an_error_with_exit_8() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("no-such-device");
    let (r, doc) = run(&["-fn"], &dir.path().join("r.json"), missing.as_os_str());
    assert_eq!(r.code(), 8);
    assert_eq!(doc["result"], "error");
    assert!(
        doc["error"].as_str().unwrap().contains("No such file"),
        "{doc:#}"
    );
    assert!(doc["device"]["resolved"].is_null() && doc["filesystem"].is_null());
}

#[test]
fn image_in_use_is_refused_with_exit_8() {
    let Some(t) = common::tools() else { return };
    let img = labelled(&t);
    // Another program holds the image as a repair would (an exclusive lock).
    let held = std::fs::File::open(&img.path).unwrap();
    held.lock().unwrap();
    let (r, doc) = run(&["-fy"], &img.aux("r.json"), img.path.as_os_str());
    drop(held);
    assert_eq!(r.code(), 8, "{}{}", r.stdout, r.stderr);
    assert_eq!(doc["result"], "error");
    assert!(doc["error"].as_str().unwrap().contains("in use"), "{doc:#}");
}

#[test]
fn repair_on_read_only_media_is_an_error_with_exit_8() {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        common::skip("SKIPPED: needs root (a read-only bind mount)");
        return;
    }
    let Some(t) = common::tools() else { return };
    let img = labelled(&t);
    let ro = img.aux("ro");
    std::fs::create_dir(&ro).unwrap();
    let ok = |args: &[&OsStr]| {
        Command::new("mount")
            .args(args)
            .status()
            .is_ok_and(|s| s.success())
    };
    if !ok(&[
        "--bind".as_ref(),
        img.dir.path().as_os_str(),
        ro.as_os_str(),
    ]) {
        common::skip("SKIPPED: cannot bind-mount here");
        return;
    }
    let remounted = ok(&["-o".as_ref(), "remount,bind,ro".as_ref(), ro.as_os_str()]);
    let result =
        remounted.then(|| run(&["-fy"], &img.aux("r.json"), ro.join("fs.img").as_os_str()));
    let _ = Command::new("umount").arg(&ro).status();
    let Some((r, doc)) = result else {
        panic!("test setup: remount read-only failed");
    };
    assert_eq!(r.code(), 8, "{}{}", r.stdout, r.stderr);
    assert_eq!(doc["result"], "error");
    assert!(
        doc["error"]
            .as_str()
            .unwrap()
            .contains("Read-only file system"),
        "{doc:#}"
    );
}

#[test]
fn usage_errors_are_reported() {
    let Some(t) = common::tools() else { return };
    let img = labelled(&t);
    // Two modes: e2fsck's fatal refusal (exit 8), reported with no mode.
    let (r, doc) = run(&["-n", "-y"], &img.aux("r.json"), img.path.as_os_str());
    assert_eq!(r.code(), 8);
    assert!(doc["options"]["mode"].is_null(), "{doc:#}");
    assert!(
        doc["error"].as_str().unwrap().contains("Only one of"),
        "{doc:#}"
    );
    // A bad extended option: a usage error.
    let (r, doc) = run(&["-E", "bogus"], &img.aux("e.json"), img.path.as_os_str());
    assert_eq!(r.code(), 16);
    assert_eq!(doc["result"], "usage-error");
    assert!(
        doc["error"]
            .as_str()
            .unwrap()
            .contains("Unknown extended option: bogus"),
        "{doc:#}"
    );
    // One the parser refuses: no options, but still the report.
    let (r, doc) = run(
        &["--no-such-flag"],
        &img.aux("p.json"),
        img.path.as_os_str(),
    );
    assert_eq!(r.code(), 16);
    assert_eq!(doc["result"], "usage-error");
    assert!(doc["options"].is_null(), "{doc:#}");
    assert!(
        doc["error"].as_str().unwrap().contains("no-such-flag"),
        "{doc:#}"
    );
}

#[test]
fn json_to_stdout_moves_the_human_output_to_stderr() {
    let Some(t) = common::tools() else { return };
    let img = damaged(&t);
    let r = common::ffsck(&[
        "-fn".as_ref(),
        "--json".as_ref(),
        "-".as_ref(),
        img.path.as_os_str(),
    ]);
    assert_eq!(r.code(), 4, "{}", r.stderr);
    assert!(!Path::new("-").exists(), "a file named - was created");
    let doc: Value = serde_json::from_str(&r.stdout)
        .unwrap_or_else(|e| panic!("stdout is not one JSON document ({e}):\n{}", r.stdout));
    assert_valid(&doc);
    assert_eq!(doc["exit_code"], 4);
    assert!(!doc["findings"].as_array().unwrap().is_empty());
    assert!(
        r.stderr
            .contains("Pass 1: Checking inodes, blocks, and sizes"),
        "{}",
        r.stderr
    );
    assert!(r.stderr.contains("WARNING: Filesystem still has errors"));
    // A refusal too: its messages on stderr, the document alone on stdout.
    let r = common::ffsck(&[
        "-fn".as_ref(),
        "--json".as_ref(),
        "-".as_ref(),
        img.aux("missing").as_os_str(),
    ]);
    assert_eq!(r.code(), 8);
    let doc: Value = serde_json::from_str(&r.stdout).unwrap();
    assert_valid(&doc);
    assert_eq!(doc["result"], "error");
}

#[test]
fn cancelled_run_writes_its_report() {
    let Some(t) = common::tools() else { return };
    // Big enough that pass 1 is still running when the signal arrives, as a rule.
    let img = common::mkfs(&t, "ext4", &["-N", "250000"], "1G");
    let json = img.aux("r.json");
    let mut child = Command::new(common::ffsck_bin())
        .args(["-fn", "--threads", "1", "--json"])
        .arg(&json)
        .arg(&img.path)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    // The pass lines are flushed as they are printed: once pass 1 began, the report exists.
    let mut lines = std::io::BufReader::new(child.stdout.take().unwrap()).lines();
    let began = lines.any(|l| l.is_ok_and(|l| l.starts_with("Pass 1:")));
    assert!(began, "no Pass 1 line");
    // SAFETY: kill(2) on the pid of a child not yet reaped.
    unsafe {
        libc::kill(child.id() as i32, libc::SIGTERM);
    }
    for _ in lines.by_ref() {}
    let code = child.wait().unwrap().code();
    let doc: Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    assert_valid(&doc);
    assert_eq!(doc["exit_code"].as_i64(), code.map(i64::from));
    if code == Some(0) {
        println!("SKIPPED: the check ended before the signal");
        return;
    }
    assert_eq!(code, Some(32));
    assert_eq!(doc["result"], "cancelled");
    assert!(
        doc["error"].as_str().unwrap().contains("SIGTERM"),
        "{doc:#}"
    );
}

/// Every finding's message is trimmed, and a line of bitmap differences comes whole: the
/// header and the finding that asks the question hold the whole line, each difference is
/// told with its header.
#[test]
fn bitmap_differences_come_as_whole_messages() {
    let Some(t) = common::tools() else { return };
    let img = labelled(&t);
    // Free blocks at the end of the file system marked in use: two differences.
    let n = common::debugfs_number(&t, &img.path, "stats", "Block count:");
    let (run_start, single) = (n - 20, n - 10);
    common::debugfs_w(&t, &img.path, &format!("setb {run_start} 4"));
    common::debugfs_w(&t, &img.path, &format!("setb {single}"));
    let (r, doc) = run(&["-fn"], &img.aux("b.json"), img.path.as_os_str());
    assert_eq!(r.code(), 4, "{}", r.stdout);
    let findings = doc["findings"].as_array().unwrap();
    for f in findings {
        let m = f["message"].as_str().unwrap();
        assert_eq!(m, m.trim(), "not trimmed: {f}");
    }
    let message = |code: &str| -> Vec<&str> {
        findings
            .iter()
            .filter(|f| f["code"] == code)
            .map(|f| f["message"].as_str().unwrap())
            .collect()
    };
    let range = format!("-({run_start}--{})", run_start + 3);
    let whole = format!("Block bitmap differences: {range} -{single}");
    // The line as printed, its spacing aside.
    let printed = r.stdout.lines().find(|l| l.starts_with("Block bitmap"));
    assert_eq!(
        printed.map(|l| l.split_whitespace().collect::<Vec<_>>().join(" ")),
        Some(whole.clone()),
        "{}",
        r.stdout
    );
    assert_eq!(message("P5_BLOCK_BITMAP_HEADER"), [whole.as_str()]);
    assert_eq!(message("P5_BLOCK_BITMAP_END"), [whole.as_str()]);
    let end = findings
        .iter()
        .find(|f| f["code"] == "P5_BLOCK_BITMAP_END")
        .unwrap();
    assert_eq!(end["answer"], "no", "{end}");
    assert_eq!(
        message("P5_BLOCK_RANGE_UNUSED"),
        [format!("Block bitmap differences: {range}")]
    );
    assert_eq!(
        message("P5_BLOCK_UNUSED"),
        [format!("Block bitmap differences: -{single}")]
    );
}
