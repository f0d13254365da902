//! Checks that the conformance harness itself detects what it claims to: agreement, crashes
//! (signals and panics), hangs, writes under `-n`, and disagreement. Stand-in "checkers" are
//! tiny shell scripts generated here, run against a small synthetic corpus built with mke2fs.

mod common;

use std::io::Write;
use std::path::Path;
use std::process::{Command, Stdio};

use ffsck_lab::conformance::{self, ConformanceArgs, Report};

/// Builds a corpus with one clean ext4 image and one test folder lacking image.gz.
fn make_corpus(dir: &Path, mke2fs: &Path) {
    let test = dir.join("t_clean");
    std::fs::create_dir_all(&test).unwrap();
    std::fs::write(test.join("name"), "clean file system\n").unwrap();
    let raw = dir.join("raw.img");
    let status = Command::new(mke2fs)
        .args(["-q", "-F", "-t", "ext4"])
        .arg(&raw)
        .arg("4M")
        .stdout(Stdio::null())
        .status()
        .unwrap();
    assert!(status.success(), "mke2fs failed");
    let bytes = std::fs::read(&raw).unwrap();
    std::fs::remove_file(&raw).unwrap();
    let gz = std::fs::File::create(test.join("image.gz")).unwrap();
    let mut enc = flate2::write::GzEncoder::new(gz, flate2::Compression::fast());
    enc.write_all(&bytes).unwrap();
    enc.finish().unwrap();

    std::fs::create_dir_all(dir.join("t_missing")).unwrap();
}

fn run(corpus: &Path, ffsck: &Path, timeout: &str) -> Report {
    let args: ConformanceArgs = ffsck_lab::parse_args(&[
        "--corpus",
        corpus.to_str().unwrap(),
        "--ffsck",
        ffsck.to_str().unwrap(),
        "--timeout",
        timeout,
        "--quiet",
    ])
    .unwrap();
    conformance::run(&args).unwrap()
}

// One test function on purpose: scripts are written before anything is spawned, which avoids
// ETXTBSY from another test thread forking while a script is still open for writing.
#[test]
fn harness_detects_each_kind_of_failure() {
    let (Some(mke2fs), Some(e2fsck)) = (common::tool("mke2fs"), common::tool("e2fsck")) else {
        common::skip("mke2fs/e2fsck not installed");
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    let corpus = tmp.path().join("corpus");
    make_corpus(&corpus, &mke2fs);

    // Every stand-in receives `-fn --problem-log LOG IMAGE`.
    let args = r#"log="$3"; img="$4""#;
    let scripts = [
        (
            "agree",
            format!(
                "{args}\nprintf '[options]\\n problem_log_filename = %s\\n' \"$log\" > \"$log.conf\"\n\
                 E2FSCK_CONFIG=\"$log.conf\" exec {} -fn \"$img\"",
                e2fsck.display()
            ),
        ),
        ("segv", "kill -SEGV $$".to_string()),
        (
            "panic",
            "echo \"thread 'main' panicked at src/main.rs:1:1\" >&2; exit 101".to_string(),
        ),
        ("hang", "exec sleep 30".to_string()),
        (
            "writer",
            format!("{args}\nprintf x | dd of=\"$img\" bs=1 seek=5000 conv=notrunc 2>/dev/null"),
        ),
        (
            "disagree",
            format!(
                "{args}\necho '<problem_log><problem code=\"0x010001\" answer=\"0\"/></problem_log>' > \"$log\"\nexit 4"
            ),
        ),
    ];
    for (name, body) in &scripts {
        common::write_script(&tmp.path().join(name), body);
    }
    let script = |name: &str| tmp.path().join(name);

    let r = run(&corpus, &script("agree"), "20");
    let s = &r.summary;
    assert_eq!((s.images_run, s.images_skipped), (1, 1));
    assert_eq!(r.skipped, vec!["t_missing".to_string()]);
    assert_eq!(r.images[0].e2fsck.exit_code, Some(0));
    assert_eq!((s.verdict_agree, s.exact_exit_equal), (1, 1));
    assert_eq!(s.mean_jaccard, 1.0);
    assert_eq!(s.ffsck_crashes + s.ffsck_timeouts + s.ffsck_modified, 0);
    assert!(r.images[0].ffsck.log_found);

    for crasher in ["segv", "panic"] {
        let r = run(&corpus, &script(crasher), "20");
        assert_eq!(r.summary.ffsck_crashes, 1, "{crasher} not seen as a crash");
        assert_eq!(r.summary.verdict_agree, 0, "a crash must never agree");
        assert!(r.images[0].ffsck.stderr_tail.is_some());
    }

    let r = run(&corpus, &script("hang"), "1");
    assert_eq!(r.summary.ffsck_timeouts, 1);
    assert_eq!(r.summary.ffsck_crashes, 0, "our own kill is not a crash");
    assert!(r.images[0].ffsck.wall_s < 10.0, "timeout not enforced");

    let r = run(&corpus, &script("writer"), "20");
    assert_eq!(r.summary.ffsck_modified, 1);
    assert_eq!(r.summary.e2fsck_modified, 0);

    let r = run(&corpus, &script("disagree"), "20");
    let row = &r.images[0];
    assert!(!row.verdict_agree);
    assert_eq!(row.jaccard, 0.0);
    assert_eq!(row.only_ffsck, vec!["0x010001".to_string()]);
    assert!(conformance::render_markdown(&r).contains("| t_clean"));
}
