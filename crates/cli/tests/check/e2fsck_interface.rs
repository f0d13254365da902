//! e2fsck's interface (issue 21, items 1 and 2): its flags and `-E` options with e2fsck's
//! meaning, its conflicts refused with its words and exit codes, e2fsck.conf (E2FSCK_CONFIG)
//! changing verdicts, and `-z` undo files that e2fsprogs' own `e2undo` restores.

use crate::common;

use std::path::Path;
use std::process::Command;

/// Run a program on `args` with E2FSCK_CONFIG set to `conf` (a missing file: no config).
fn run(bin: &Path, args: &[&str], img: &Path, conf: &Path) -> common::Run {
    let mut cmd = Command::new(bin);
    cmd.args(args).arg(img).env("E2FSCK_CONFIG", conf);
    common::run_with_timeout(cmd, std::time::Duration::from_secs(120)).expect("timed out")
}

fn ffsck(args: &[&str], img: &Path, conf: &Path) -> common::Run {
    run(&common::ffsck_bin(), args, img, conf)
}

fn no_conf(img: &common::Image) -> std::path::PathBuf {
    img.aux("no-such-e2fsck.conf")
}

#[test]
fn conflicts_are_refused_as_e2fsck_refuses_them() {
    let Some(t) = common::tools() else { return };
    let img = common::mkfs(&t, "ext4", &[], "8M");
    let conf = no_conf(&img);
    let bb = img.aux("bb.txt");
    std::fs::write(&bb, "").unwrap();
    let bb = bb.to_str().unwrap();
    let before = common::read_all(&img.path);
    let cases: [&[&str]; 6] = [
        &["-n", "-D"],
        &["-n", "-c"],
        &["-n", "-l", bb],
        &["-y", "-c", "-l", bb],
        &["-fy", "-D", "-E", "fixes_only"],
        &["-n", "-y"],
    ];
    for args in cases {
        let ours = ffsck(args, &img.path, &conf);
        let theirs = run(&t.e2fsck, args, &img.path, &conf);
        assert_eq!(ours.code(), theirs.code(), "{args:?}: {}", ours.stderr);
        let want = theirs
            .stderr
            .lines()
            .find(|l| l.contains("incompatible") || l.contains("may not") || l.contains("Only"))
            .unwrap_or_else(|| panic!("{args:?}: e2fsck said {}", theirs.stderr));
        // e2fsck names itself by its argv[0]: compare what follows.
        let want = want.rsplit_once(": ").map_or(want, |(_, m)| m);
        assert!(ours.stderr.contains(want), "{args:?}: {}", ours.stderr);
    }
    common::assert_same_bytes(&before, &common::read_all(&img.path), "refused runs");
}

#[test]
fn bad_extended_options_get_e2fsck_messages() {
    let Some(t) = common::tools() else { return };
    let img = common::mkfs(&t, "ext4", &[], "8M");
    let conf = no_conf(&img);
    for opt in ["foo", "ea_ver=3", "readahead_kb=abc"] {
        let ours = ffsck(&["-fn", "-E", opt], &img.path, &conf);
        let theirs = run(&t.e2fsck, &["-fn", "-E", opt], &img.path, &conf);
        // e2fsck exits 1 here, which fsck(8) reads as "errors corrected"; ffsck says usage.
        assert_eq!(ours.code(), 16, "{opt}: {}", ours.stderr);
        let first = theirs.stderr.lines().next().unwrap_or_default().to_string();
        assert!(ours.stderr.starts_with(&first), "{opt}: {}", ours.stderr);
        assert!(ours.stderr.contains("\tcheck_encoding"), "{}", ours.stderr);
    }
}

#[test]
fn accepted_flags_and_options_check_as_e2fsck_does() {
    let Some(t) = common::tools() else { return };
    let img = common::mkfs(&t, "ext4", &[], "8M");
    let conf = no_conf(&img);
    let accepted: [&[&str]; 8] = [
        &["-fn", "-r"],
        &["-fn", "-d"],
        &["-fn", "-k"],
        &["-fn", "-C", "-1"],
        &["-fn", "-F"],
        &[
            "-fn",
            "-E",
            "ea_ver=2,readahead_kb=128,nodiscard,no_optimize_extents",
        ],
        &[
            "-fn",
            "-E",
            "inode_count_fullmap,no_inode_count_fullmap,check_encoding",
        ],
        &["-fn", "-E", "fixes_only", "-E", "unshare_blocks"],
    ];
    for args in accepted {
        let ours = ffsck(args, &img.path, &conf);
        assert_eq!(ours.code(), 0, "{args:?}: {}{}", ours.stdout, ours.stderr);
        assert!(ours.stdout.contains("Pass 5"), "{args:?}: {}", ours.stdout);
    }
    // unshare_blocks implies -f, as in e2fsck: a clean file system is checked, not skipped.
    let ours = ffsck(&["-n", "-E", "unshare_blocks"], &img.path, &conf);
    assert!(ours.stdout.contains("Pass 1"), "{}", ours.stdout);
    // journal_only: nothing is checked.
    let ours = ffsck(&["-fn", "-E", "journal_only"], &img.path, &conf);
    assert_eq!(ours.code(), 0);
    assert!(!ours.stdout.contains("Pass 1"), "{}", ours.stdout);
}

#[test]
fn broken_system_clock_keeps_preen_from_fixing_a_future_mount_time() {
    let Some(t) = common::tools() else { return };
    let img = common::mkfs(&t, "ext4", &[], "8M");
    common::debugfs_w(&t, &img.path, "ssv mtime 20500101");
    let conf = img.aux("e2fsck.conf");
    std::fs::write(&conf, "[options]\n\tbroken_system_clock = 1\n").unwrap();
    let copy = img.aux("copy.img");
    std::fs::copy(&img.path, &copy).unwrap();
    let ours = ffsck(&["-p"], &img.path, &conf);
    let theirs = run(&t.e2fsck, &["-p"], &copy, &conf);
    assert_eq!(ours.code(), theirs.code(), "{}", ours.stdout);
    assert_eq!(ours.code(), 0, "{}", ours.stdout);
    assert!(!ours.stdout.contains("in the future"), "{}", ours.stdout);
    // Without the file, the same image is fixed under -p, as e2fsck fixes it.
    let none = no_conf(&img);
    let ours = ffsck(&["-p"], &img.path, &none);
    assert!(ours.stdout.contains("in the future"), "{}", ours.stdout);
    assert_eq!(ours.code(), 1, "{}", ours.stdout);
}

#[test]
fn accept_time_fudge_off_judges_a_time_minutes_ahead() {
    let Some(t) = common::tools() else { return };
    let img = common::mkfs(&t, "ext4", &[], "8M");
    // An hour ahead: within e2fsck's default day of fudge, not within none. (The last
    // mount time: debugfs stamps the write time itself when it closes the image.)
    let ahead = common::now() + 3600;
    common::debugfs_w(&t, &img.path, &format!("ssv mtime @{ahead}"));
    let none = no_conf(&img);
    let ours = ffsck(&["-fn"], &img.path, &none);
    assert!(!ours.stdout.contains("in the future"), "{}", ours.stdout);
    let conf = img.aux("e2fsck.conf");
    std::fs::write(&conf, "[options]\naccept_time_fudge = false\n").unwrap();
    let ours = ffsck(&["-fn"], &img.path, &conf);
    let theirs = run(&t.e2fsck, &["-fn"], &img.path, &conf);
    assert!(ours.stdout.contains("last mount time"), "{}", ours.stdout);
    assert!(
        theirs.stdout.contains("last mount time"),
        "{}",
        theirs.stdout
    );
}

#[test]
fn problems_overrides_change_the_verdict() {
    let Some(t) = common::tools() else { return };
    let img = common::mkfs(&t, "ext4", &[], "8M");
    common::debugfs_w(&t, &img.path, "ssv mtime 20500101");
    let conf = img.aux("e2fsck.conf");
    // The future mount time (0x000031) is preen-safe and may be left; made neither, preen
    // stops on it.
    std::fs::write(
        &conf,
        "[problems]\n\t0x000031 = {\n\t\tpreen_ok = false\n\t\tno_ok = false\n\t}\n",
    )
    .unwrap();
    let before = common::read_all(&img.path);
    let ours = ffsck(&["-fp"], &img.path, &conf);
    let copy = img.aux("copy.img");
    std::fs::write(&copy, &before).unwrap();
    let theirs = run(&t.e2fsck, &["-fp"], &copy, &conf);
    assert_eq!(
        ours.code(),
        theirs.code(),
        "{}\n{}",
        ours.stdout,
        theirs.stdout
    );
    assert_eq!(ours.code() & 4, 4, "{}", ours.stdout);
    assert!(
        ours.stderr.contains("UNEXPECTED INCONSISTENCY"),
        "{}",
        ours.stderr
    );
    // force_no: the fix is ignored under -y, as e2fsck ignores it.
    std::fs::write(&conf, "[problems]\n0x000031 = {\nforce_no = true\n}\n").unwrap();
    std::fs::write(&img.path, &before).unwrap();
    let ours = ffsck(&["-fy"], &img.path, &conf);
    std::fs::write(&copy, &before).unwrap();
    let theirs = run(&t.e2fsck, &["-fy"], &copy, &conf);
    assert!(ours.stdout.contains("IGNORED."), "{}", ours.stdout);
    assert!(theirs.stdout.contains("IGNORED."), "{}", theirs.stdout);
    assert_eq!(ours.code(), theirs.code(), "{}", ours.stdout);
    let after = common::debugfs_r(&t, &img.path, "stats");
    assert!(after.contains("2050"), "{after}");
}

#[test]
fn max_count_suppresses_repeated_messages() {
    let Some(t) = common::tools() else { return };
    let img = common::mkfs(&t, "ext4", &[], "8M");
    // Three files with a wrong link count: 0x040005 "Inode N ref count is X, should be Y".
    for f in ["/a/f1", "/a/f2", "/a/f3"] {
        let ino = common::inode_of(&t, &img.path, f);
        common::debugfs_w(&t, &img.path, &format!("sif <{ino}> links_count 9"));
    }
    let conf = img.aux("e2fsck.conf");
    std::fs::write(&conf, "[options]\nmax_count_problems = 1\n").unwrap();
    let ours = ffsck(&["-fn"], &img.path, &conf);
    let theirs = run(&t.e2fsck, &["-fn"], &img.path, &conf);
    let count = |s: &str| s.matches("ref count is 9").count();
    assert_eq!(count(&ours.stdout), 1, "{}", ours.stdout);
    assert_eq!(
        count(&ours.stdout),
        count(&theirs.stdout),
        "{}",
        theirs.stdout
    );
    let line = |s: &str| {
        s.lines()
            .find(|l| l.ends_with(" suppressed"))
            .map(str::to_string)
    };
    assert!(line(&ours.stdout).is_some(), "{}", ours.stdout);
    assert_eq!(
        line(&ours.stdout),
        line(&theirs.stdout),
        "{}",
        theirs.stdout
    );
    assert_eq!(ours.code(), theirs.code());
}

#[test]
fn a_malformed_config_file_is_refused_as_e2fsck_refuses_it() {
    let Some(t) = common::tools() else { return };
    let img = common::mkfs(&t, "ext4", &[], "8M");
    let conf = img.aux("e2fsck.conf");
    std::fs::write(&conf, "[options]\nfoo = {\n}\n}\n").unwrap();
    let ours = ffsck(&["-fn"], &img.path, &conf);
    let theirs = run(&t.e2fsck, &["-fn"], &img.path, &conf);
    assert_eq!(ours.code(), 8);
    assert_eq!(ours.code(), theirs.code());
    let want = theirs
        .stderr
        .lines()
        .skip_while(|l| !l.starts_with("Syntax error"))
        .take(2)
        .collect::<Vec<_>>()
        .join("\n");
    assert!(!want.is_empty(), "{}", theirs.stderr);
    assert!(ours.stderr.contains(&want), "{}\nwant\n{want}", ours.stderr);
    // Unknown sections and tags are ignored.
    std::fs::write(&conf, "[nonsense]\nx = 1\n[options]\nnot_an_option = 2\n").unwrap();
    assert_eq!(ffsck(&["-fn"], &img.path, &conf).code(), 0);
}

#[test]
fn an_undo_file_from_z_is_restored_by_e2undo() {
    let Some(t) = common::tools() else { return };
    let Some(e2undo) = common::find_tool("e2undo") else {
        common::skip("SKIPPED: e2undo not found");
        return;
    };
    let img = common::mkfs(&t, "ext4", &[], "16M");
    let ino = common::inode_of(&t, &img.path, "/a/f1");
    common::debugfs_w(&t, &img.path, &format!("sif <{ino}> links_count 9"));
    common::debugfs_w(&t, &img.path, "ssv free_blocks_count 17");
    let before = common::read_all(&img.path);
    let undo = img.aux("fs.e2undo");
    let conf = no_conf(&img);
    let ours = ffsck(&["-fy", "-z", undo.to_str().unwrap()], &img.path, &conf);
    assert_eq!(ours.code(), 1, "{}{}", ours.stdout, ours.stderr);
    assert!(ours.stdout.contains("e2undo "), "{}", ours.stdout);
    assert_ne!(
        before,
        common::read_all(&img.path),
        "the repair changed nothing"
    );
    let out = Command::new(e2undo)
        .arg(&undo)
        .arg(&img.path)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "e2undo: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    common::assert_same_bytes(&before, &common::read_all(&img.path), "e2undo's restore");
    // ffsck --apply-undo reads the same file (after the repair again).
    let undo2 = img.aux("fs2.e2undo");
    ffsck(&["-fy", "-z", undo2.to_str().unwrap()], &img.path, &conf);
    let ours = ffsck(&["--apply-undo", undo2.to_str().unwrap()], &img.path, &conf);
    assert_eq!(ours.code(), 0, "{}{}", ours.stdout, ours.stderr);
    common::assert_same_bytes(&before, &common::read_all(&img.path), "--apply-undo");
}

#[test]
fn discard_punches_the_free_blocks_of_an_image() {
    let Some(t) = common::tools() else { return };
    let img = common::mkfs(&t, "ext4", &[], "32M");
    // Fill the image's free space with data, so discard has something to free.
    let len = std::fs::metadata(&img.path).unwrap().len();
    let mut bytes = common::read_all(&img.path);
    let free_blk = common::debugfs_r(&t, &img.path, "ffb 1 20000");
    let blk: u64 = free_blk
        .split_whitespace()
        .last()
        .and_then(|w| w.parse().ok())
        .unwrap_or_else(|| panic!("test setup: no free block in {free_blk}"));
    let block_size = common::debugfs_number(&t, &img.path, "stats", "Block size:");
    let at = (blk * block_size) as usize;
    let bs = 4096.min(bytes.len() - at);
    bytes[at..at + bs].fill(0xAA);
    std::fs::write(&img.path, &bytes).unwrap();
    let used_before = std::fs::metadata(&img.path).map(|m| {
        use std::os::unix::fs::MetadataExt;
        m.blocks()
    });
    let conf = no_conf(&img);
    let ours = ffsck(&["-fy", "-E", "discard"], &img.path, &conf);
    assert_eq!(ours.code(), 0, "{}{}", ours.stdout, ours.stderr);
    let after = common::read_all(&img.path);
    assert_eq!(after.len() as u64, len);
    assert!(
        after[at..at + bs].iter().all(|&b| b == 0),
        "free block not discarded"
    );
    let used_after = std::fs::metadata(&img.path).map(|m| {
        use std::os::unix::fs::MetadataExt;
        m.blocks()
    });
    assert!(used_after.unwrap() < used_before.unwrap());
    // The file system is intact.
    assert_eq!(common::e2fsck_n(&t, &img.path).0, 0);
    // Under -n nothing is discarded (e2fsck turns discard off there).
    std::fs::write(&img.path, &bytes).unwrap();
    ffsck(&["-fn", "-E", "discard"], &img.path, &conf);
    assert_eq!(common::read_all(&img.path), bytes);
}

/// The output lines of a run, without the version line.
fn lines(run: &common::Run) -> Vec<String> {
    format!("{}{}", run.stdout, run.stderr)
        .lines()
        .filter(|l| !common::is_version_line(l))
        .map(String::from)
        .collect()
}

#[test]
fn fragcheck_lists_each_break_as_e2fsck_does() {
    let Some(t) = common::tools() else { return };
    for (fs_type, extra) in [("ext4", &["-b", "1024"][..]), ("ext3", &["-b", "1024"])] {
        let img = common::mkfs(&t, fs_type, extra, "16M");
        let conf = no_conf(&img);
        // Breaks in physical contiguity: a block punched out of an extent file, a block of a
        // block-mapped file and its indirect block moved away.
        if fs_type == "ext4" {
            common::debugfs_w(&t, &img.path, "punch /a/f1 2 2");
        } else {
            let far = common::bmap(&t, &img.path, "/sparse", 0) + 3000;
            common::debugfs_w(&t, &img.path, &format!("sif /a/sub/s1 block[1] {far}"));
            common::debugfs_w(
                &t,
                &img.path,
                &format!("sif /c/d/e/file03 block[IND] {}", far + 1),
            );
        }
        let ours = ffsck(&["-fn", "-E", "fragcheck"], &img.path, &conf);
        let theirs = run(&t.e2fsck, &["-fn", "-E", "fragcheck"], &img.path, &conf);
        assert_eq!(ours.code(), theirs.code(), "{fs_type}: {}", ours.stdout);
        let breaks = |r: &common::Run| -> Vec<String> {
            lines(r)
                .into_iter()
                .filter(|l| l.contains("): expecting "))
                .collect()
        };
        assert!(breaks(&theirs).len() >= 2, "test setup: {}", theirs.stdout);
        assert_eq!(breaks(&ours), breaks(&theirs), "{fs_type}");
        // Without the option, none.
        let plain = ffsck(&["-fn"], &img.path, &conf);
        assert!(breaks(&plain).is_empty(), "{}", plain.stdout);
    }
}

#[test]
fn ea_ver_1_judges_xattr_blocks_by_the_first_format() {
    let Some(t) = common::tools() else { return };
    let img = common::mkfs(&t, "ext4", &["-I", "256"], "8M");
    let conf = no_conf(&img);
    let value = img.aux("value");
    std::fs::write(&value, "v".repeat(700)).unwrap();
    common::debugfs_w(
        &t,
        &img.path,
        &format!("ea_set -f {} /a/f1 user.big", value.display()),
    );
    let st = common::debugfs_r(&t, &img.path, "stat /a/f1");
    assert!(
        !st.contains("File ACL: 0"),
        "test setup: no xattr block\n{st}"
    );
    for ver in ["ea_ver=1", "ea_ver=2"] {
        let ours = ffsck(&["-fn", "-E", ver], &img.path, &conf);
        let theirs = run(&t.e2fsck, &["-fn", "-E", ver], &img.path, &conf);
        assert_eq!(ours.code(), theirs.code(), "{ver}: {}", ours.stdout);
        assert_eq!(lines(&ours), lines(&theirs), "{ver}");
    }
    let ours = ffsck(&["-fn", "-E", "ea_ver=1"], &img.path, &conf);
    assert!(
        ours.stdout.contains("has a bad extended attribute block"),
        "{}",
        ours.stdout
    );
}
