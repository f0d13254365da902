//! Shared helpers for the `ffsck` integration tests: locate e2fsprogs, build a deterministic
//! source tree and file system images with `mke2fs -d`, corrupt them with `debugfs -w`, run
//! ffsck / e2fsck with a time limit, and read ffsck's JSON findings.

#![allow(dead_code)] // each test binary uses a different subset

use std::ffi::OsStr;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

pub use serde_json::Value;

/// Default time limit for one checker run on the small test images.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(60);

/// The e2fsprogs tools the tests drive.
#[derive(Clone, Debug)]
pub struct Tools {
    pub mke2fs: PathBuf,
    pub debugfs: PathBuf,
    pub e2fsck: PathBuf,
}

pub fn find_tool(name: &str) -> Option<PathBuf> {
    let mut dirs: Vec<PathBuf> = std::env::var_os("PATH")
        .map(|p| std::env::split_paths(&p).collect())
        .unwrap_or_default();
    dirs.extend(
        ["/usr/sbin", "/sbin", "/usr/local/sbin"]
            .iter()
            .map(PathBuf::from),
    );
    dirs.into_iter().map(|d| d.join(name)).find(|p| p.is_file())
}

/// Whether the tests run as root (loop devices, mounts).
pub fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc::geteuid() == 0 }
}

/// Say why the calling test is skipped (its "SKIPPED: ..." line). Under `REQUIRE_TOOLS=1`,
/// which scripts/test.sh (so CI) sets, that is a failure instead, with the same message: CI
/// has every tool (scripts/ensure-tools.sh) and runs as root.
pub fn skip(msg: &str) {
    if std::env::var_os("REQUIRE_TOOLS").is_some_and(|v| v == "1") {
        panic!("{msg} (REQUIRE_TOOLS=1)");
    }
    eprintln!("{msg}");
}

/// The e2fsprogs tools, or `None` after printing why the calling test is skipped.
pub fn tools() -> Option<Tools> {
    let found = (
        find_tool("mke2fs"),
        find_tool("debugfs"),
        find_tool("e2fsck"),
    );
    match found {
        (Some(mke2fs), Some(debugfs), Some(e2fsck)) => Some(Tools {
            mke2fs,
            debugfs,
            e2fsck,
        }),
        (m, d, e) => {
            let missing: Vec<&str> = [
                ("mke2fs", m.is_none()),
                ("debugfs", d.is_none()),
                ("e2fsck", e.is_none()),
            ]
            .iter()
            .filter(|(_, miss)| *miss)
            .map(|(n, _)| *n)
            .collect();
            skip(&format!(
                "SKIPPED: e2fsprogs tool(s) not found in PATH, /usr/sbin or /sbin: {}",
                missing.join(", ")
            ));
            None
        }
    }
}

/// A one-group ext2 image (1 KiB blocks) whose last block is /b/x's only block, on a device
/// cut one block short: the file system's size cannot be fitted to the device without losing
/// the block, so a repair stops.
pub fn short_device_with_its_last_block_in_use(t: &Tools) -> Image {
    let img = mkfs(t, "ext2", &["-b", "1024"], "8M");
    settle(t, &img.path);
    let old = bmap(t, &img.path, "/b/x", 0);
    for cmd in [
        "sif /b/x block[0] 8191".to_string(),
        "setb 8191".to_string(),
        format!("freeb {old}"),
    ] {
        debugfs_w(t, &img.path, &cmd);
    }
    let f = std::fs::OpenOptions::new()
        .write(true)
        .open(&img.path)
        .unwrap();
    f.set_len(8191 * 1024).unwrap();
    img
}

/// Whether `line` is the version line e2fsck or ffsck starts a check with on stderr
/// ("e2fsck 1.47.0 (5-Feb-2023)", "ffsck 0.1.0 (1-Dec-2026)").
pub fn is_version_line(line: &str) -> bool {
    let ours = format!("ffsck {} (", env!("CARGO_PKG_VERSION"));
    line.starts_with("e2fsck 1.") || line.starts_with(&ours) && line.ends_with(')')
}

pub fn ffsck_bin() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_ffsck"))
}

/// A small deterministic PRNG (SplitMix64) so every run builds the same tree.
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Self {
        Rng(seed)
    }
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    pub fn below(&mut self, n: u64) -> u64 {
        self.next_u64() % n
    }
    pub fn bytes(&mut self, n: usize) -> Vec<u8> {
        let mut v = Vec::with_capacity(n + 8);
        while v.len() < n {
            v.extend_from_slice(&self.next_u64().to_le_bytes());
        }
        v.truncate(n);
        v
    }
}

/// Target of the long symlink: longer than the 60 bytes that fit in i_block.
pub const LONG_LINK_TARGET: &str =
    "../b/this/is/a/deliberately/long/symlink/target/that/does/not/fit/in/the/inode/x";

/// Builds the deterministic source tree under `root`:
/// - `/a/f1`..`/a/f12`: non-empty files (1..20 KiB) the corruption tests aim at;
/// - `/a/emptydir`, `/a/sub/inner/` (nested dirs), `/a/sub/s1`;
/// - `/b`, `/c/d/e`: ~28 more files of 0..20 KiB; `/b/short` (fast symlink), `/b/long`
///   (slow symlink), `/b/hard` (hard link to `/b/x`);
/// - `/many`: 60 empty files with long names (a multi-block directory);
/// - `/sparse`: 10 data runs with holes between them (an extent tree of depth 1 on ext4).
pub fn make_tree(root: &Path) {
    let mut rng = Rng::new(0x5EED_F5C4);
    for d in ["a/emptydir", "a/sub/inner", "b", "c/d/e", "many"] {
        std::fs::create_dir_all(root.join(d)).unwrap();
    }
    for i in 1..=12 {
        let n = 1024 + rng.below(19 * 1024) as usize;
        std::fs::write(root.join(format!("a/f{i}")), rng.bytes(n)).unwrap();
    }
    std::fs::write(root.join("a/sub/s1"), rng.bytes(3000)).unwrap();
    let dirs = ["b", "c", "c/d", "c/d/e"];
    for i in 0..28 {
        let n = rng.below(20 * 1024 + 1) as usize;
        let dir = dirs[i % dirs.len()];
        std::fs::write(root.join(format!("{dir}/file{i:02}")), rng.bytes(n)).unwrap();
    }
    std::fs::write(root.join("b/x"), b"hard-linked file\n").unwrap();
    std::os::unix::fs::symlink("x", root.join("b/short")).unwrap();
    assert!(LONG_LINK_TARGET.len() > 60);
    std::os::unix::fs::symlink(LONG_LINK_TARGET, root.join("b/long")).unwrap();
    std::fs::hard_link(root.join("b/x"), root.join("b/hard")).unwrap();
    for i in 0..60 {
        std::fs::write(
            root.join(format!("many/entry-with-a-rather-long-name-{i:03}")),
            b"",
        )
        .unwrap();
    }
    use std::io::{Seek, SeekFrom, Write};
    let mut f = std::fs::File::create(root.join("sparse")).unwrap();
    for i in 0..10u64 {
        f.seek(SeekFrom::Start(i * 65536)).unwrap();
        f.write_all(&rng.bytes(4096)).unwrap();
    }
}

/// A temporary directory holding a source tree and one image built from it.
pub struct Image {
    pub dir: tempfile::TempDir,
    pub path: PathBuf,
}

impl Image {
    /// A path for an auxiliary file (JSON report, log) in the image's directory.
    pub fn aux(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }
}

/// `mke2fs -q -F -t TYPE ARGS -d TREE IMAGE SIZE` on a fresh deterministic tree.
pub fn mkfs(t: &Tools, fs_type: &str, args: &[&str], size: &str) -> Image {
    let dir = tempfile::tempdir().unwrap();
    let tree = dir.path().join("tree");
    make_tree(&tree);
    let path = dir.path().join("fs.img");
    mkfs_from(t, &tree, &path, fs_type, args, size);
    Image { dir, path }
}

/// `mke2fs -q -F -t TYPE ARGS -d TREE IMAGE SIZE`: the image `path` made from `tree`.
pub fn mkfs_from(t: &Tools, tree: &Path, path: &Path, fs_type: &str, args: &[&str], size: &str) {
    std::fs::File::create(path).unwrap();
    let out = Command::new(&t.mke2fs)
        .args(["-q", "-F", "-t", fs_type])
        .args(args)
        .arg("-d")
        .arg(tree)
        .arg(path)
        .arg(size)
        .env("MKE2FS_SYNC", "0")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "test setup: mke2fs -t {fs_type} {args:?} {size} failed: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Runs `debugfs -w -R CMD IMAGE`; any message besides the version banner fails the test
/// (debugfs exits 0 even when a request fails).
pub fn debugfs_w(t: &Tools, img: &Path, cmd: &str) {
    let out = Command::new(&t.debugfs)
        .arg("-w")
        .arg("-R")
        .arg(cmd)
        .arg(img)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    let complaints: Vec<&str> = err
        .lines()
        .filter(|l| !l.starts_with("debugfs ") && !l.trim().is_empty())
        .collect();
    assert!(
        out.status.success() && complaints.is_empty(),
        "test setup: debugfs -w -R '{cmd}' failed: {err}"
    );
}

/// `e2fsck -fyD` on an image of the test tree: `/many`, its big directory, gets an htree
/// index (`mke2fs -d` leaves directories linear).
pub fn index_many(t: &Tools, img: &Path) {
    let e = Command::new(&t.e2fsck)
        .args(["-fyD"])
        .arg(img)
        .output()
        .unwrap();
    assert!(e.status.code().unwrap_or(8) <= 1, "test setup: e2fsck -fyD");
    assert!(
        debugfs_r(t, img, "htree /many").contains("Root node dump"),
        "test setup: /many has no htree index"
    );
}

/// Runs a read-only `debugfs -R CMD IMAGE` and returns its standard output.
pub fn debugfs_r(t: &Tools, img: &Path, cmd: &str) -> String {
    let out = Command::new(&t.debugfs)
        .arg("-R")
        .arg(cmd)
        .arg(img)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "test setup: debugfs -R '{cmd}' failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The physical block holding logical block `lblk` of `path` (`debugfs bmap`).
pub fn bmap(t: &Tools, img: &Path, path: &str, lblk: u64) -> u64 {
    let s = debugfs_r(t, img, &format!("bmap {path} {lblk}"));
    let b: u64 = s
        .trim()
        .parse()
        .unwrap_or_else(|_| panic!("test setup: bad bmap output for {path}: {s:?}"));
    assert!(b != 0, "test setup: {path} has no block at {lblk}");
    b
}

/// The inode number of `path` (`debugfs stat` / `ls -l` of its parent).
pub fn inode_of(t: &Tools, img: &Path, path: &str) -> u64 {
    let s = debugfs_r(t, img, &format!("stat {path}"));
    let line = s
        .lines()
        .find(|l| l.starts_with("Inode:"))
        .unwrap_or_else(|| panic!("test setup: no inode for {path}: {s}"));
    line.split_whitespace().nth(1).unwrap().parse().unwrap()
}

/// Overwrites `bytes` at byte `offset` of a file.
pub fn patch(path: &Path, offset: u64, bytes: &[u8]) {
    use std::io::{Seek, SeekFrom, Write};
    let mut f = std::fs::OpenOptions::new().write(true).open(path).unwrap();
    f.seek(SeekFrom::Start(offset)).unwrap();
    f.write_all(bytes).unwrap();
}

/// Reads a little-endian u32 at byte `offset` of a file.
pub fn read_u32(path: &Path, offset: u64) -> u32 {
    use std::io::{Seek, SeekFrom};
    let mut f = std::fs::File::open(path).unwrap();
    f.seek(SeekFrom::Start(offset)).unwrap();
    let mut b = [0u8; 4];
    f.read_exact(&mut b).unwrap();
    u32::from_le_bytes(b)
}

/// The result of one process run.
#[derive(Debug)]
pub struct Run {
    /// The exit code; `None` if killed by a signal.
    pub code: Option<i32>,
    pub stdout: String,
    pub stderr: String,
    pub elapsed: Duration,
}

impl Run {
    pub fn code(&self) -> i32 {
        self.code.unwrap_or_else(|| {
            panic!(
                "process was killed by a signal\nstdout:\n{}\nstderr:\n{}",
                self.stdout, self.stderr
            )
        })
    }
}

/// Runs `cmd` with a time limit; on timeout the child is killed and `None` returned.
pub fn run_with_timeout(mut cmd: Command, limit: Duration) -> Option<Run> {
    let start = Instant::now();
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut so = child.stdout.take().unwrap();
    let mut se = child.stderr.take().unwrap();
    let t_out = std::thread::spawn(move || {
        let mut s = Vec::new();
        let _ = so.read_to_end(&mut s);
        s
    });
    let t_err = std::thread::spawn(move || {
        let mut s = Vec::new();
        let _ = se.read_to_end(&mut s);
        s
    });
    let status = loop {
        if let Some(st) = child.try_wait().unwrap() {
            break Some(st);
        }
        if start.elapsed() > limit {
            let _ = child.kill();
            let _ = child.wait();
            break None;
        }
        std::thread::sleep(Duration::from_millis(5));
    };
    let elapsed = start.elapsed();
    let stdout = String::from_utf8_lossy(&t_out.join().unwrap()).into_owned();
    let stderr = String::from_utf8_lossy(&t_err.join().unwrap()).into_owned();
    status.map(|st| Run {
        code: st.code(),
        stdout,
        stderr,
        elapsed,
    })
}

/// Runs ffsck with `args` (the device included) under the default time limit.
pub fn ffsck(args: &[&std::ffi::OsStr]) -> Run {
    ffsck_timeout(args, DEFAULT_TIMEOUT)
}

pub fn ffsck_timeout(args: &[&std::ffi::OsStr], limit: Duration) -> Run {
    let mut cmd = Command::new(ffsck_bin());
    cmd.args(args);
    let run = run_with_timeout(cmd, limit)
        .unwrap_or_else(|| panic!("ffsck {args:?} did not finish within {limit:?}"));
    assert_no_panic(&run);
    run
}

/// ffsck must never crash: no Rust panic (exit 101), no signal.
pub fn assert_no_panic(run: &Run) {
    assert!(
        run.code.is_some() && run.code != Some(101) && !run.stderr.contains("panicked"),
        "ffsck crashed (code {:?})\nstdout:\n{}\nstderr:\n{}",
        run.code,
        run.stdout,
        run.stderr
    );
}

/// A `ffsck -fn --threads N --json FILE IMAGE` run with its parsed report.
#[derive(Debug)]
pub struct Check {
    pub run: Run,
    pub json: Value,
}

impl Check {
    pub fn code(&self) -> i32 {
        self.run.code()
    }
    /// The finding codes (`P1_BAD_I_BLOCKS`, ...) in report order.
    pub fn codes(&self) -> Vec<String> {
        finding_codes(&self.json)
    }
    pub fn has(&self, code: &str) -> bool {
        self.codes().iter().any(|c| c == code)
    }
    pub fn findings(&self) -> &Vec<Value> {
        self.json["findings"]
            .as_array()
            .expect("JSON report has a findings array")
    }
    /// A compact listing of the findings for assertion messages.
    pub fn describe(&self) -> String {
        let mut s = format!("exit {:?}, fatal {}\n", self.run.code, self.json["fatal"]);
        for f in self.findings() {
            s += &format!(
                "  {} {} {}\n",
                f["code"].as_str().unwrap_or("?"),
                f["e2fsck_code"].as_str().unwrap_or("?"),
                f["message"].as_str().unwrap_or("").trim()
            );
        }
        s
    }
}

pub fn finding_codes(json: &Value) -> Vec<String> {
    json["findings"]
        .as_array()
        .map(|a| {
            a.iter()
                .map(|f| f["code"].as_str().unwrap_or("").to_string())
                .collect()
        })
        .unwrap_or_default()
}

/// `ffsck -fn --threads N --json ... IMAGE`, checking that the JSON agrees with the exit code.
pub fn check_n(img: &Path, threads: usize) -> Check {
    check_n_with(img, threads, &[])
}

/// `check_n` with extra options (e.g. `--pipeline`) before the image.
pub fn check_n_with(img: &Path, threads: usize, extra: &[&str]) -> Check {
    let tag: String = extra
        .join("")
        .chars()
        .filter(|c| c.is_ascii_alphanumeric())
        .take(40)
        .collect();
    let json_path = img.with_extension(format!("t{threads}{tag}.json"));
    let _ = std::fs::remove_file(&json_path);
    let threads_s = threads.to_string();
    let mut args: Vec<&std::ffi::OsStr> = vec![
        "-fn".as_ref(),
        "--threads".as_ref(),
        threads_s.as_ref(),
        "--json".as_ref(),
        json_path.as_os_str(),
    ];
    args.extend(extra.iter().map(std::ffi::OsStr::new));
    args.push(img.as_os_str());
    let run = ffsck(&args);
    let text = std::fs::read_to_string(&json_path).unwrap_or_else(|e| {
        panic!(
            "no JSON report ({e})\nstdout:\n{}\nstderr:\n{}",
            run.stdout, run.stderr
        )
    });
    let json: Value = serde_json::from_str(&text).expect("JSON report parses");
    assert_eq!(
        json["exit_code"].as_i64(),
        run.code.map(i64::from),
        "JSON exit_code differs from the process exit code"
    );
    Check { run, json }
}

/// `e2fsck -fn IMAGE`; returns (exit code, combined output).
pub fn e2fsck_n(t: &Tools, img: &Path) -> (i32, String) {
    let mut cmd = Command::new(&t.e2fsck);
    cmd.arg("-fn").arg(img).env("E2FSCK_CONFIG", "/dev/null");
    let run = run_with_timeout(cmd, DEFAULT_TIMEOUT).expect("e2fsck timed out");
    (
        run.code.unwrap_or(-1),
        format!("{}{}", run.stdout, run.stderr),
    )
}

/// `e2fsck -fy` on a copy of `img` (left beside it, then removed): e2fsck's own answer to the
/// damage a test is about to repair. Returns its standard output.
pub fn e2fsck_fy_copy(t: &Tools, img: &Path) -> String {
    let copy = img.with_extension("e2fsck-copy");
    std::fs::copy(img, &copy).unwrap();
    let mut cmd = Command::new(&t.e2fsck);
    cmd.arg("-fy").arg(&copy).env("E2FSCK_CONFIG", "/dev/null");
    let run = run_with_timeout(cmd, DEFAULT_TIMEOUT).expect("e2fsck timed out");
    let _ = std::fs::remove_file(&copy);
    run.stdout
}

/// Runs `e2fsck -fy` on `img` itself and requires exit 0 or 1: the image as e2fsck leaves a
/// fresh one. `mke2fs -d` leaves directories of three or more blocks unindexed, which e2fsck's
/// pass 3A indexes on any run that may write, and with quota on bigalloc stale usage; a test
/// that needs an image nothing will change starts from this.
pub fn settle(t: &Tools, img: &Path) {
    let mut cmd = Command::new(&t.e2fsck);
    cmd.arg("-fy").arg(img).env("E2FSCK_CONFIG", "/dev/null");
    let run = run_with_timeout(cmd, DEFAULT_TIMEOUT).expect("e2fsck timed out");
    assert!(
        matches!(run.code, Some(0 | 1)),
        "test setup: e2fsck -fy on a fresh image: {}{}",
        run.stdout,
        run.stderr
    );
}

/// The whole content of a file.
pub fn read_all(path: &Path) -> Vec<u8> {
    std::fs::read(path).unwrap()
}

/// Asserts two byte strings are identical, naming the first differing offset.
pub fn assert_same_bytes(before: &[u8], after: &[u8], what: &str) {
    if before == after {
        return;
    }
    let first = before
        .iter()
        .zip(after)
        .position(|(a, b)| a != b)
        .unwrap_or(before.len().min(after.len()));
    panic!(
        "{what}: contents changed (lengths {} -> {}, first difference at byte {first})",
        before.len(),
        after.len()
    );
}

/// Asserts two files are byte-for-byte identical.
pub fn assert_files_equal(a: &Path, b: &Path) {
    assert_same_bytes(
        &read_all(a),
        &read_all(b),
        &format!("{} vs {}", a.display(), b.display()),
    );
}

/// Runs `e2fsck -fn` and `ffsck -fn`; asserts both exit `code`, ffsck reports every code in
/// `want` and none in `unwanted`, and nothing is marked fixed under -n. Returns ffsck's report.
pub fn expect_codes(t: &Tools, img: &Image, code: i32, want: &[&str], unwanted: &[&str]) -> Check {
    let (e2_code, e2_out) = e2fsck_n(t, &img.path);
    let c = check_n(&img.path, 1);
    println!("ffsck findings:\n{}", c.describe());
    assert_eq!(e2_code, code, "test setup: e2fsck -fn exit code:\n{e2_out}");
    assert_eq!(
        c.code(),
        code,
        "ffsck exit code (e2fsck: {e2_code}):\n{}\ne2fsck said:\n{e2_out}",
        c.describe()
    );
    for w in want {
        assert!(
            c.has(w),
            "ffsck did not report {w}:\n{}\ne2fsck said:\n{e2_out}",
            c.describe()
        );
    }
    for u in unwanted {
        assert!(!c.has(u), "ffsck reported {u}:\n{}", c.describe());
    }
    for f in c.findings() {
        assert_eq!(f["fixed"], false, "a finding was fixed under -n: {f}");
    }
    c
}

/// Runs several `debugfs -w` requests in one session (`-f`), for damage that leaves the file
/// system unopenable between two requests.
pub fn debugfs_script(t: &Tools, img: &Image, cmds: &[&str]) {
    let script = img.aux("debugfs.cmds");
    std::fs::write(&script, cmds.join("\n") + "\n").unwrap();
    let out = Command::new(&t.debugfs)
        .arg("-w")
        .arg("-f")
        .arg(&script)
        .arg(&img.path)
        .output()
        .unwrap();
    assert!(out.status.success(), "test setup: debugfs {cmds:?} failed");
}

/// `ffsck -fy` exits 1, then e2fsck and a second ffsck find nothing, and /a/f1 is intact.
pub fn assert_repaired(t: &Tools, img: &Image, what: &str) {
    // (e2fsck -n reports some of these and still exits 0: look at what it says.)
    let (_, out) = e2fsck_n(t, &img.path);
    assert!(
        out.contains("? no"),
        "{what}: test setup: e2fsck must see the damage\n{out}"
    );
    repairs_in_one_run(t, img, what, &[1]);
    assert!(
        dump(t, img, "/a/f1") == tree_file(img, "a/f1"),
        "{what}: /a/f1 changed"
    );
}

/// The contents of `path` in the image as debugfs reads them (empty when it cannot).
pub fn dump(t: &Tools, img: &Image, path: &str) -> Vec<u8> {
    let out = img.aux("dumped");
    let _ = std::fs::remove_file(&out);
    debugfs_r(t, &img.path, &format!("dump {path} {}", out.display()));
    std::fs::read(&out).unwrap_or_default()
}

/// The contents `rel` has in the tree the image was made from.
pub fn tree_file(img: &Image, rel: &str) -> Vec<u8> {
    std::fs::read(img.dir.path().join("tree").join(rel)).unwrap()
}

/// `e2fsck -fn` sees the damage (exit bit 4); one `ffsck -fy` repairs it, exiting with one of
/// `exits`; then `e2fsck -fn` and a second `ffsck -fn` find the file system clean. Returns the
/// repair's run.
pub fn assert_one_run_repairs(t: &Tools, img: &Image, what: &str, exits: &[i32]) -> Run {
    let (before, out) = e2fsck_n(t, &img.path);
    assert!(
        before & 4 != 0,
        "test setup ({what}): e2fsck must see the damage\n{out}"
    );
    repairs_in_one_run(t, img, what, exits)
}

/// One `ffsck -fy` exits with one of `exits`; then `e2fsck -fn` and a second `ffsck -fn` find
/// the file system clean.
fn repairs_in_one_run(t: &Tools, img: &Image, what: &str, exits: &[i32]) -> Run {
    let run = ffsck(&[OsStr::new("-fy"), img.path.as_os_str()]);
    assert_no_panic(&run);
    assert!(
        exits.contains(&run.code()),
        "{what}: ffsck -fy should fix everything (exit {exits:?})\n{}\n{}",
        run.stdout,
        run.stderr
    );
    let (after, out) = e2fsck_n(t, &img.path);
    assert_eq!(
        after, 0,
        "{what}: e2fsck -fn after the repair\n{out}\n{}",
        run.stdout
    );
    let again = check_n(&img.path, 1);
    assert_eq!(
        again.code(),
        0,
        "{what}: second ffsck -fn: {}",
        again.describe()
    );
    run
}

/// The number `debugfs -R CMD` prints right after `key` (e.g. "Free blocks:" in `stats`).
pub fn debugfs_number(t: &Tools, img: &Path, cmd: &str, key: &str) -> u64 {
    let out = debugfs_r(t, img, cmd);
    out.split(key)
        .nth(1)
        .and_then(|s| s.split_whitespace().next())
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("test setup: no number after {key:?} in `{cmd}`:\n{out}"))
}

/// The wall clock, to bound the times an ffsck run stamped.
#[allow(clippy::disallowed_methods)] // the test reads the clock the binary under test reads
pub fn now() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64
}

/// An image with the marks a check leaves zeroed (the primary superblock's write and
/// last-check times, and so its checksum), so two runs at different seconds compare equal.
pub fn without_marks(mut img: Vec<u8>) -> Vec<u8> {
    for r in [0x30..0x34, 0x40..0x44, 0x3FC..0x400] {
        img[1024 + r.start..1024 + r.end].fill(0);
    }
    img
}
