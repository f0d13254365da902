//! Command-line behaviour: usage errors exit 16, --problem-log writes e2fsck's XML problem
//! log, --json agrees with the exit code, and a clean file system is skipped without -f.

use crate::common;

use std::ffi::OsStr;

fn os<'a>(args: &'a [&'a str]) -> Vec<&'a OsStr> {
    args.iter().map(OsStr::new).collect()
}

#[test]
fn no_device_is_a_usage_error() {
    let run = common::ffsck(&[]);
    assert_eq!(run.code(), 16, "stderr: {}", run.stderr);
    let run = common::ffsck(&os(&["-fn"]));
    assert_eq!(run.code(), 16, "stderr: {}", run.stderr);
}

#[test]
fn unknown_option_is_a_usage_error() {
    let run = common::ffsck(&os(&["--no-such-option", "/dev/null"]));
    assert_eq!(run.code(), 16, "stderr: {}", run.stderr);
}

#[test]
fn conflicting_modes_are_refused_as_e2fsck_refuses_them() {
    // The mode check comes before the device is opened, so the path need not exist. e2fsck
    // refuses them as a fatal error (exit 8), not a usage error.
    for modes in [["-n", "-y"], ["-n", "-p"], ["-y", "-p"]] {
        let run = common::ffsck(&os(&[modes[0], modes[1], "img"]));
        assert_eq!(run.code(), 8, "{modes:?}: stderr: {}", run.stderr);
        assert!(
            run.stderr
                .contains("Only one of the options -p/-a, -n or -y may be specified."),
            "{modes:?}: stderr: {}",
            run.stderr
        );
    }
}

#[test]
fn help_and_version_exit_0() {
    for flag in ["--help", "--version"] {
        let run = common::ffsck(&os(&[flag]));
        assert_eq!(run.code(), 0, "{flag}: {}", run.stderr);
        assert!(run.stdout.contains("ffsck"), "{flag}: {}", run.stdout);
    }
}

#[test]
fn problem_log_lists_each_finding() {
    let Some(t) = common::tools() else { return };
    let img = common::mkfs(&t, "ext4", &[], "16M");
    common::debugfs_w(&t, &img.path, "sif /a/f1 blocks 999");
    common::debugfs_w(&t, &img.path, "sif /a/f8 links_count 5");
    let log = img.aux("problems.xml");
    let json = img.aux("report.json");
    let run = common::ffsck(&[
        OsStr::new("-fn"),
        OsStr::new("--problem-log"),
        log.as_os_str(),
        OsStr::new("--json"),
        json.as_os_str(),
        img.path.as_os_str(),
    ]);
    assert_eq!(run.code(), 4, "{}", run.stdout);
    let xml = std::fs::read_to_string(&log).expect("problem log written");
    assert!(xml.starts_with("<?xml"), "{xml}");
    assert!(xml.trim_end().ends_with("</problem_log>"), "{xml}");
    assert!(xml.contains("<problem code=\"0x"), "{xml}");
    assert!(
        xml.contains("code=\"0x01000d\""),
        "P1_BAD_I_BLOCKS (0x01000d) missing: {xml}"
    );
    let report: common::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    let problems: Vec<&str> = xml.lines().filter(|l| l.starts_with("<problem ")).collect();
    let findings = report["findings"].as_array().unwrap();
    assert_eq!(
        problems.len(),
        findings.len(),
        "one <problem> per finding:\n{xml}"
    );
    for (line, f) in problems.iter().zip(findings) {
        let code = f["e2fsck_code"].as_str().unwrap();
        assert!(line.contains(&format!("code=\"{code}\"")), "{line} vs {f}");
        assert!(line.contains("answer=\"0\""), "-n answers no: {line}");
    }
}

#[test]
fn problem_log_of_clean_image_has_no_problems() {
    let Some(t) = common::tools() else { return };
    let img = common::mkfs(&t, "ext4", &[], "16M");
    let log = img.aux("problems.xml");
    let run = common::ffsck(&[
        OsStr::new("-fn"),
        OsStr::new("--problem-log"),
        log.as_os_str(),
        img.path.as_os_str(),
    ]);
    assert_eq!(run.code(), 0, "{}", run.stdout);
    let xml = std::fs::read_to_string(&log).expect("problem log written");
    assert!(!xml.contains("<problem "), "{xml}");
}

#[test]
fn clean_image_skipped_without_force() {
    let Some(t) = common::tools() else { return };
    let img = common::mkfs(&t, "ext4", &[], "16M");
    let run = common::ffsck(&[OsStr::new("-n"), img.path.as_os_str()]);
    assert_eq!(run.code(), 0);
    assert!(run.stdout.contains("clean"), "{}", run.stdout);
    assert!(!run.stdout.contains("Pass 1"), "{}", run.stdout);
}

#[test]
fn json_report_matches_terminal_outcome() {
    let Some(t) = common::tools() else { return };
    let img = common::mkfs(&t, "ext4", &[], "16M");
    common::debugfs_w(&t, &img.path, "unlink /a/f9");
    let c = common::check_n(&img.path, 2);
    assert_eq!(c.code(), 4);
    assert!(
        c.run
            .stdout
            .contains("WARNING: Filesystem still has errors"),
        "{}",
        c.run.stdout
    );
    let f = c
        .findings()
        .iter()
        .find(|f| f["code"] == "P4_UNATTACHED_INODE")
        .expect("P4_UNATTACHED_INODE");
    assert_eq!(f["pass"], 4);
    assert_eq!(f["fixed"], false);
    let msg = f["message"].as_str().unwrap();
    assert!(
        !msg.is_empty() && !msg.contains('{'),
        "message template not filled: {msg}"
    );
    assert!(
        c.run.stdout.contains(msg.trim()),
        "message not printed on the terminal: {msg}"
    );
}

/// `--help` and `-h` fit in 100 columns and name no file of ffsck's source tree.
#[test]
fn help_fits_the_terminal_and_names_no_source_path() {
    for flag in ["--help", "-h"] {
        let run = common::ffsck(&os(&[flag]));
        assert_eq!(run.code(), 0, "{flag}: {}", run.stderr);
        assert!(
            run.stdout.contains("Usage: ffsck"),
            "{flag}: {}",
            run.stdout
        );
        for line in run.stdout.lines() {
            assert!(
                line.chars().count() <= 100,
                "{flag}: a line too long: {line}"
            );
            for path in ["crates/", "docs/", "src/", ".rs", "scripts/"] {
                assert!(!line.contains(path), "{flag}: names {path}: {line}");
            }
        }
    }
}

/// An unknown option is refused as e2fsck refuses it: getopt's words and the usage, exit
/// 16, and no advice to pass it as a value.
#[test]
fn an_unknown_option_gets_e2fsck_s_usage_error() {
    for (args, first) in [
        (&["-Q", "img"][..], "ffsck: invalid option -- 'Q'"),
        (&["-fQ", "img"], "ffsck: invalid option -- 'Q'"),
        (&["--bogus", "img"], "ffsck: unrecognized option '--bogus'"),
    ] {
        let run = common::ffsck(&os(args));
        assert_eq!(run.code(), 16, "{args:?}: {}", run.stderr);
        assert_eq!(
            run.stderr.lines().next(),
            Some(first),
            "{args:?}: {}",
            run.stderr
        );
        assert!(
            run.stderr.contains("\nUsage: ffsck "),
            "{args:?}: {}",
            run.stderr
        );
        assert!(
            !run.stderr.contains("tip:") && !run.stderr.contains("as a value"),
            "{args:?}: {}",
            run.stderr
        );
        assert!(run.stdout.is_empty(), "{args:?}: {}", run.stdout);
    }
}

/// The version line starts a check on stderr where e2fsck's does: with -n, -y and
/// interactively, not when preening (with or without -v).
#[test]
fn the_version_line_is_printed_where_e2fsck_prints_its_own() {
    let Some(t) = common::tools() else { return };
    let img = common::mkfs(&t, "ext4", &[], "8M");
    let ours = format!("ffsck {} (", env!("CARGO_PKG_VERSION"));
    let mut printed = Vec::new();
    for mode in ["-fn", "-fy", "-fp", "-fpv"] {
        let run = common::ffsck(&os(&[mode, img.path.to_str().unwrap()]));
        assert_eq!(run.code(), 0, "{mode}: {}{}", run.stdout, run.stderr);
        let first = run.stderr.lines().next().unwrap_or_default();
        let has = first.starts_with(&ours) && first.ends_with(')');
        assert!(has || run.stderr.is_empty(), "{mode}: {}", run.stderr);
        assert!(
            !run.stdout.contains(&ours),
            "{mode}: on stdout: {}",
            run.stdout
        );
        let e2 = std::process::Command::new(&t.e2fsck)
            .args([mode, img.path.to_str().unwrap()])
            .env("E2FSCK_CONFIG", "/dev/null")
            .output()
            .unwrap();
        let theirs = String::from_utf8_lossy(&e2.stderr)
            .lines()
            .next()
            .is_some_and(|l| l.starts_with("e2fsck 1."));
        assert_eq!(has, theirs, "{mode}: ffsck {has}, e2fsck {theirs}");
        printed.push(has);
    }
    assert_eq!(printed, [true, true, false, false]);
}
