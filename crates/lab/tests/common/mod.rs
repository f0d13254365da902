//! Helpers shared by the integration tests: they locate the corpus, the ffsck binary and the
//! e2fsprogs tools, so each test can skip with a clear message when something is missing
//! instead of failing on machines that lack them.

#![allow(dead_code)] // each test binary uses a different subset

use std::path::{Path, PathBuf};

fn manifest_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// `/work/shared/corpus/e2fsprogs` as seen from this crate (`../../../shared/...`).
pub fn corpus_dir() -> Option<PathBuf> {
    let dir = manifest_dir().join("../../../shared/corpus/e2fsprogs");
    dir.is_dir().then_some(dir)
}

/// The workspace's ffsck binary. `CARGO_BIN_EXE_ffsck` only exists inside the ffsck package,
/// so look beside this test's own profile directory (`<profile>/deps/<test>`), then in the
/// target directory, preferring the most recently built profile.
pub fn ffsck_binary() -> Option<PathBuf> {
    let beside = std::env::current_exe()
        .ok()
        .and_then(|t| Some(t.parent()?.parent()?.join("ffsck")))
        .filter(|p| p.is_file());
    if beside.is_some() {
        return beside;
    }
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| manifest_dir().join("../../target"));
    ["release", "debug"]
        .iter()
        .map(|profile| target.join(profile).join("ffsck"))
        .filter(|p| p.is_file())
        .max_by_key(|p| p.metadata().and_then(|m| m.modified()).ok())
}

/// Say why the calling test is skipped (its "SKIPPED: ..." line). Under `REQUIRE_TOOLS=1`,
/// which scripts/test.sh (so CI) sets, that is a failure instead, with the same message.
pub fn skip(msg: &str) {
    if std::env::var_os("REQUIRE_TOOLS").is_some_and(|v| v == "1") {
        panic!("{msg} (REQUIRE_TOOLS=1)");
    }
    eprintln!("SKIPPED: {msg}");
}

pub fn tool(name: &str) -> Option<PathBuf> {
    ffsck_lab::tools::find_in_path(name)
}

/// Writes an executable shell script, used as a stand-in checker.
pub fn write_script(path: &Path, body: &str) {
    use std::os::unix::fs::PermissionsExt;
    std::fs::write(path, format!("#!/bin/sh\n{body}\n")).unwrap();
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755)).unwrap();
}

/// Runs a checker with -fn: did it report a problem? Some problems (a bad descriptor
/// checksum) are printed as "IGNORED" with exit 0, so the answers count as well as the code.
pub fn finds_problem(prog: &Path, image: &Path) -> bool {
    let out = std::process::Command::new(prog)
        .arg("-fn")
        .arg(image)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&[out.stdout, out.stderr].concat()).into_owned();
    out.status.code() != Some(0) || text.contains("? no") || text.contains("IGNORED")
}

/// The image differs from `before` exactly where the manifest says, as it says: replaying
/// the changes in order on `before` (each finding its logged old bytes) gives the image.
pub fn assert_changes_match(before: &[u8], image: &Path, m: &ffsck_lab::corrupt::Manifest) {
    let after = std::fs::read(image).unwrap();
    assert_eq!(before.len(), after.len());
    let mut replay = before.to_vec();
    for c in &m.changes {
        let old = ffsck_lab::corrupt::unhex(&c.old).unwrap();
        let new = ffsck_lab::corrupt::unhex(&c.new).unwrap();
        assert_eq!(old.len(), new.len(), "{}", c.field);
        let at = c.offset as usize;
        assert_eq!(
            &replay[at..at + old.len()],
            &old[..],
            "{}: old bytes",
            c.field
        );
        replay[at..at + new.len()].copy_from_slice(&new);
    }
    if let Some(i) = (0..after.len()).find(|&i| replay[i] != after[i]) {
        panic!(
            "byte {i:#x} is {:#04x} on disk but {:#04x} after replaying the manifest",
            after[i], replay[i]
        );
    }
}

/// `gilbert --runs 3 --out OUT EXTRA…`, measured through this build's shim.
pub fn run_gilbert(out: &Path, extra: &[&str]) -> ffsck_lab::gilbert::GilbertResults {
    std::env::set_var(ffsck_lab::child::SHIM_ENV, env!("CARGO_BIN_EXE_ffsck-lab"));
    let mut argv = vec!["--runs", "3", "--out", out.to_str().unwrap()];
    argv.extend_from_slice(extra);
    let args: ffsck_lab::gilbert::GilbertArgs = ffsck_lab::parse_args(&argv).unwrap();
    ffsck_lab::gilbert::run(&args).unwrap()
}

/// `gilbert FLAG VALUE BASE…` fails with an error mentioning NEEDLE, for each case.
pub fn assert_gilbert_refuses(base: &[&str], cases: &[(&str, &str, &str)]) {
    for &(flag, value, needle) in cases {
        let mut argv = vec![flag, value];
        argv.extend_from_slice(base);
        let args: ffsck_lab::gilbert::GilbertArgs = ffsck_lab::parse_args(&argv).unwrap();
        let err = ffsck_lab::gilbert::run(&args).unwrap_err();
        assert!(
            format!("{err:#}").contains(needle),
            "{flag} {value}: {err:#}"
        );
    }
}

/// `age --method METHOD --image IMAGE --seed 4 --secs 20`; `None`, with a message, where loop
/// mounts are not allowed.
pub fn age_or_skip(method: &str, image: &Path) -> Option<ffsck_lab::age::AgeReport> {
    let args: ffsck_lab::age::AgeArgs = ffsck_lab::parse_args(&[
        "--method",
        method,
        "--image",
        image.to_str().unwrap(),
        "--seed",
        "4",
        "--secs",
        "20",
    ])
    .unwrap();
    match ffsck_lab::age::run(&args) {
        Ok(r) => Some(r),
        Err(e) if format!("{e:#}").contains("cannot mount") => {
            eprintln!("skipping: {e:#}");
            None
        }
        Err(e) => panic!("{method}: {e:#}"),
    }
}
