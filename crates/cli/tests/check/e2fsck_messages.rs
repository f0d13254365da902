//! e2fsck's messages (issue 21, items 3 and 4): preen as e2fsck preens (marks, silence, the
//! stop at the first problem preen may not fix), wrong input worded as e2fsck words it, and
//! `UUID=`/`LABEL=` device names; each compared with e2fsck on the same image.

use crate::common;

use std::path::Path;
use std::process::Command;

fn run(bin: &Path, args: &[&str], img: &Path) -> common::Run {
    let mut cmd = Command::new(bin);
    cmd.args(args).arg(img).env("E2FSCK_CONFIG", "/dev/null");
    common::run_with_timeout(cmd, std::time::Duration::from_secs(120)).expect("timed out")
}

/// The lines of a run without e2fsck's or ffsck's version line, its name made neutral.
fn neutral(text: &str) -> Vec<String> {
    text.lines()
        .filter(|l| !common::is_version_line(l))
        .map(|l| {
            let l = l.replace("e2fsck", "PROG").replace("ffsck", "PROG");
            // e2fsck names itself by its argv[0], a path here.
            match l.find("PROG: ") {
                Some(at) if l.starts_with('/') => l[at..].to_string(),
                _ => l,
            }
        })
        .collect()
}

/// An ext4 image with a preen-safe problem (a wrong link count) before one preen may not fix
/// (an unattached inode), and another preen-safe one after it.
fn preen_image(t: &common::Tools, label: &str) -> common::Image {
    let dir = tempfile::tempdir().unwrap();
    let tree = dir.path().join("tree");
    std::fs::create_dir_all(tree.join("d")).unwrap();
    for f in ["a", "b", "d/c"] {
        std::fs::write(tree.join(f), f).unwrap();
    }
    let path = dir.path().join("fs.img");
    let ok = Command::new(&t.mke2fs)
        .args(["-q", "-F", "-t", "ext4", "-L", label, "-d"])
        .arg(&tree)
        .arg(&path)
        .arg("8M")
        .output()
        .unwrap()
        .status
        .success();
    assert!(ok, "test setup: mke2fs");
    common::debugfs_w(t, &path, "set_inode_field /a links_count 3");
    common::debugfs_w(t, &path, "unlink /b");
    common::debugfs_w(t, &path, "set_inode_field /d/c links_count 2");
    common::Image { dir, path }
}

#[test]
fn preen_marks_fixes_and_stops_where_e2fsck_stops() {
    let Some(t) = common::tools() else { return };
    for label in ["", "preenlabel"] {
        let ours_img = preen_image(&t, label);
        let theirs_img = ours_img.aux("e2fsck.img");
        std::fs::copy(&ours_img.path, &theirs_img).unwrap();
        let theirs = run(&t.e2fsck, &["-fp"], &theirs_img);
        let ours = run(&common::ffsck_bin(), &["-fp"], &ours_img.path);
        assert_eq!(theirs.code(), 4, "test setup: {}", theirs.stdout);
        assert_eq!(
            ours.code(),
            theirs.code(),
            "{}\n{}",
            ours.stdout,
            ours.stderr
        );
        // Same lines, named alike (the label when there is one: e2fsck's device name).
        let name = |img: &Path| {
            if label.is_empty() {
                img.display().to_string()
            } else {
                label.to_string()
            }
        };
        let theirs_out = theirs.stdout.replace(&name(&theirs_img), "DEV");
        let ours_out = ours.stdout.replace(&name(&ours_img.path), "DEV");
        assert_eq!(
            neutral(&ours_out),
            neutral(&theirs_out),
            "stdout, label {label:?}"
        );
        assert!(ours_out.contains("FIXED."), "{ours_out}");
        let theirs_err = theirs.stderr.replace(&name(&theirs_img), "DEV");
        let ours_err = ours.stderr.replace(&name(&ours_img.path), "DEV");
        assert_eq!(neutral(&ours_err), neutral(&theirs_err), "stderr");
        assert!(ours_err.contains("UNEXPECTED INCONSISTENCY"), "{ours_err}");
        // The fixes before the stop are kept, as e2fsck keeps them: both images now say the
        // same to e2fsck -fn.
        let (a, a_out) = common::e2fsck_n(&t, &ours_img.path);
        let (b, b_out) = common::e2fsck_n(&t, &theirs_img);
        assert_eq!(a, b);
        let strip = |s: &str, p: &Path| s.replace(&p.display().to_string(), "DEV");
        assert_eq!(
            strip(&a_out, &ours_img.path).replace(label, "DEV"),
            strip(&b_out, &theirs_img).replace(label, "DEV")
        );
    }
}

/// A foreign file system or random bytes: e2fsck's error, advice and "contains a" line.
#[test]
fn wrong_input_is_worded_as_e2fsck_words_it() {
    let Some(t) = common::tools() else { return };
    let dir = tempfile::tempdir().unwrap();
    let mut cases = Vec::new();
    let rnd = dir.path().join("random.img");
    std::fs::write(&rnd, common::Rng::new(21).bytes(4 << 20)).unwrap();
    cases.push(rnd);
    // mkswap is util-linux's, as common as blkid: skip the swap case without it.
    if let Some(mkswap) = common::find_tool("mkswap") {
        let swap = dir.path().join("swap.img");
        std::fs::write(&swap, vec![0u8; 8 << 20]).unwrap();
        let ok = Command::new(mkswap)
            .arg("-L")
            .arg("swaplabel")
            .arg(&swap)
            .output()
            .unwrap()
            .status
            .success();
        assert!(ok, "test setup: mkswap");
        cases.push(swap);
    } else {
        common::skip("SKIPPED (swap case): mkswap not found");
    }
    if let Some(mkfs_xfs) = common::find_tool("mkfs.xfs") {
        let xfs = dir.path().join("xfs.img");
        std::fs::write(&xfs, vec![0u8; 300 << 20]).unwrap();
        let ok = Command::new(mkfs_xfs)
            .args(["-q", "-f"])
            .arg(&xfs)
            .output()
            .unwrap()
            .status
            .success();
        assert!(ok, "test setup: mkfs.xfs");
        cases.push(xfs);
    } else {
        common::skip("SKIPPED (xfs case): mkfs.xfs not found");
    }
    for img in &cases {
        let theirs = run(&t.e2fsck, &["-fn"], img);
        let ours = run(&common::ffsck_bin(), &["-fn"], img);
        assert_eq!(ours.code(), theirs.code(), "{}", img.display());
        assert_eq!(
            neutral(&ours.stdout),
            neutral(&theirs.stdout),
            "{}",
            img.display()
        );
        assert_eq!(
            neutral(&ours.stderr),
            neutral(&theirs.stderr),
            "{}",
            img.display()
        );
    }
    assert!(
        cases.len() < 2
            || run(&common::ffsck_bin(), &["-fn"], &cases[1])
                .stdout
                .contains("contains a swap file system labelled 'swaplabel'")
    );
}

#[test]
fn not_found_is_worded_as_e2fsck_words_it() {
    let Some(t) = common::tools() else { return };
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("no-such.img");
    let theirs = run(&t.e2fsck, &["-fn"], &missing);
    let ours = run(&common::ffsck_bin(), &["-fn"], &missing);
    assert_eq!(ours.code(), theirs.code());
    assert_eq!(ours.code(), 8);
    // e2fsck prints its hint on stdout; ffsck keeps every fatal error on stderr.
    let all = |r: &common::Run| {
        let mut v = neutral(&r.stderr);
        v.extend(neutral(&r.stdout));
        v.sort();
        v
    };
    assert_eq!(all(&ours), all(&theirs));
    assert!(ours.stdout.is_empty(), "{}", ours.stdout);
}

#[test]
fn uuid_and_label_names_resolve_or_are_refused_as_e2fsck_refuses_them() {
    let Some(t) = common::tools() else { return };
    // An unknown UUID: e2fsck's "Unable to resolve" and exit 8.
    let spec = "UUID=0badc0de-0000-4000-8000-000000000000";
    let theirs = run(&t.e2fsck, &["-fn"], Path::new(spec));
    let ours = run(&common::ffsck_bin(), &["-fn"], Path::new(spec));
    assert_eq!(ours.code(), theirs.code());
    assert!(
        ours.stderr.contains(&format!("Unable to resolve '{spec}'")),
        "{}",
        ours.stderr
    );
    // A known one resolves to the block device holding that file system: an image of our own
    // with a UUID and label of its own, on a loop device (so it is in /proc/partitions).
    if !common::is_root() {
        common::skip("SKIPPED (resolve case): needs root for a loop device");
        return;
    }
    let uuid = format!(
        "5eed{:04x}-0000-4000-8000-{:012x}",
        std::process::id() & 0xffff,
        0xC0FFEE
    );
    let label = format!("rs{}", std::process::id() % 100_000);
    let img = common::mkfs(&t, "ext4", &["-U", &uuid, "-L", &label], "8M");
    let out = Command::new("losetup")
        .args(["--find", "--show", "--read-only"])
        .arg(&img.path)
        .output()
        .expect("losetup");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let loopdev = String::from_utf8_lossy(&out.stdout).trim().to_string();
    let by_uuid = run(
        &common::ffsck_bin(),
        &["-fn"],
        Path::new(&format!("UUID={uuid}")),
    );
    let by_label = run(
        &common::ffsck_bin(),
        &["-fn"],
        Path::new(&format!("LABEL={label}")),
    );
    let e2 = run(&t.e2fsck, &["-fn"], Path::new(&loopdev));
    let _ = Command::new("losetup").args(["-d", &loopdev]).status();
    for (name, r) in [("UUID", &by_uuid), ("LABEL", &by_label)] {
        assert!(
            !r.stderr.contains("Unable to resolve"),
            "{name}: {}",
            r.stderr
        );
        assert_eq!(r.code(), e2.code(), "{name}: {}{}", r.stdout, r.stderr);
        assert_eq!(r.code(), 0, "{name}: {}{}", r.stdout, r.stderr);
    }
}

/// `-v`: e2fsck's statistics block, line for line, on ext2 (indirect blocks) and ext4
/// (extent trees), with hard links, fast and slow symbolic links and a fifo.
#[test]
fn verbose_statistics_match_e2fsck() {
    let Some(t) = common::tools() else { return };
    let dir = tempfile::tempdir().unwrap();
    let tree = dir.path().join("tree");
    std::fs::create_dir_all(tree.join("sub")).unwrap();
    let mut rng = common::Rng::new(4);
    for i in 1..=20u64 {
        std::fs::write(tree.join(format!("f{i}")), rng.bytes((i * 7000) as usize)).unwrap();
    }
    std::fs::hard_link(tree.join("f1"), tree.join("hard1")).unwrap();
    std::fs::hard_link(tree.join("f2"), tree.join("sub/hard2")).unwrap();
    std::os::unix::fs::symlink("f1", tree.join("fast")).unwrap();
    std::os::unix::fs::symlink("x".repeat(100), tree.join("slow")).unwrap();
    let fifo = std::ffi::CString::new(tree.join("fifo").to_str().unwrap()).unwrap();
    // SAFETY: mkfifo reads the NUL-terminated path it is given.
    assert_eq!(unsafe { libc::mkfifo(fifo.as_ptr(), 0o644) }, 0);
    for fs_type in ["ext2", "ext4"] {
        let img = dir.path().join(format!("{fs_type}.img"));
        let ok = Command::new(&t.mke2fs)
            .args(["-q", "-F", "-t", fs_type, "-d"])
            .arg(&tree)
            .arg(&img)
            .arg("16M")
            .output()
            .unwrap()
            .status
            .success();
        assert!(ok, "test setup: mke2fs");
        let block = |out: &str| -> Vec<String> {
            let lines: Vec<String> = out.lines().map(str::to_string).collect();
            let at = lines
                .iter()
                .position(|l| l.contains("inodes used"))
                .unwrap_or_else(|| panic!("no statistics in {out}"));
            lines[at..].to_vec()
        };
        let theirs = run(&t.e2fsck, &["-fnv"], &img);
        let ours = run(&common::ffsck_bin(), &["-fnv"], &img);
        assert_eq!(ours.code(), theirs.code());
        assert_eq!(block(&ours.stdout), block(&theirs.stdout), "{fs_type}");
        assert!(
            ours.stdout.contains("           2 links"),
            "{}",
            ours.stdout
        );
    }
}

/// The lines of `text` from the first that starts with `from` up to (not including) the
/// first after it that starts with `to`.
fn between<'a>(text: &'a str, from: &str, to: &str) -> Vec<&'a str> {
    let mut lines = text.lines().skip_while(|l| !l.starts_with(from));
    let mut out: Vec<&str> = lines.next().into_iter().collect();
    out.extend(lines.take_while(|l| !l.starts_with(to)));
    out
}

/// Two files share blocks (and one shares with the bad-blocks list's neighbour, a third):
/// passes 1B-1D print e2fsck's headers, each inode's blocks on one line in file order, and
/// each file by path with its modification time and the files it shares with, line for line
/// as e2fsck -fy prints them on the same image.
#[test]
fn passes_1b_to_1d_print_as_e2fsck_prints_them() {
    let Some(t) = common::tools() else { return };
    let img = common::mkfs(&t, "ext2", &[], "16M");
    let b5 = common::bmap(&t, &img.path, "/a/f5", 0);
    let b3 = common::bmap(&t, &img.path, "/a/f3", 1);
    common::debugfs_w(&t, &img.path, &format!("sif /a/f4 block[0] {b5}"));
    common::debugfs_w(&t, &img.path, &format!("sif /a/f4 block[1] {b3}"));
    common::debugfs_w(&t, &img.path, &format!("sif /b/x block[0] {b5}"));
    let (ours, theirs) = both_fy(&t, &img);
    same_section(
        &ours,
        &theirs,
        ("Running additional passes", "Pass 2:"),
        |l| l.starts_with("File /a/f4 (inode #"),
        "test setup: e2fsck found no shared blocks",
    );
    assert_eq!(ours.code(), theirs.code());
}

/// e2fsck -fy and ffsck -fy on copies of one image, both named `test`: their outputs.
/// The lines of e2fsck's output from `from` to `to` are ffsck's too; `setup` (what the test
/// is about) must be among e2fsck's, or the image did not show the case.
/// ffsck's and e2fsck's outputs agree on what `pick` takes from each.
fn assert_same<T: PartialEq + std::fmt::Debug>(
    ours: &common::Run,
    theirs: &common::Run,
    pick: impl Fn(&str) -> T,
) {
    assert_eq!(
        pick(&ours.stdout),
        pick(&theirs.stdout),
        "\nffsck:\n{}\ne2fsck:\n{}",
        ours.stdout,
        theirs.stdout
    );
}

fn same_section(
    ours: &common::Run,
    theirs: &common::Run,
    (from, to): (&str, &str),
    setup: impl Fn(&str) -> bool,
    what: &str,
) {
    let want = between(&theirs.stdout, from, to);
    assert!(want.iter().any(|l| setup(l)), "{what}:\n{}", theirs.stdout);
    assert_same(ours, theirs, |s| {
        between(s, from, to)
            .into_iter()
            .map(str::to_string)
            .collect::<Vec<_>>()
    });
}

fn both_fy(t: &common::Tools, img: &common::Image) -> (common::Run, common::Run) {
    let theirs_img = img.aux("e2fsck.img");
    std::fs::copy(&img.path, &theirs_img).unwrap();
    let mut cmd = Command::new(&t.e2fsck);
    cmd.args(["-fy", "-N", "test"])
        .arg(&theirs_img)
        .env("E2FSCK_CONFIG", "/dev/null")
        .env("TZ", "GMT0");
    let theirs = common::run_with_timeout(cmd, std::time::Duration::from_secs(120)).unwrap();
    let ours = run(&common::ffsck_bin(), &["-fy", "-N", "test"], &img.path);
    (ours, theirs)
}

/// An inode with illegal blocks: the latch's question once, then each block with the short
/// word of its answer ("CLEARED."), line for line as e2fsck prints pass 1.
#[test]
fn latched_problems_print_their_answer_word() {
    let Some(t) = common::tools() else { return };
    let img = common::mkfs(&t, "ext2", &[], "16M");
    common::debugfs_w(&t, &img.path, "sif /a/f5 block[1] 99999999");
    common::debugfs_w(&t, &img.path, "sif /a/f5 block[2] 99999998");
    let (ours, theirs) = both_fy(&t, &img);
    same_section(
        &ours,
        &theirs,
        ("Pass 1:", "Pass 2:"),
        |l| l.ends_with("  CLEARED."),
        "test setup: e2fsck latched nothing",
    );
}

/// `line` with every run of digits as `N`: the shape of a resource or progress line.
fn shape(line: &str) -> String {
    let mut out = String::new();
    let mut digits = false;
    for c in line.chars() {
        if c.is_ascii_digit() {
            if !digits {
                out.push('N');
            }
            digits = true;
        } else {
            digits = false;
            out.push(c);
        }
    }
    out
}

/// `-tt` prints e2fsck's resource lines after each pass and at the end ("Pass 1: Memory
/// used: …k/…k (…k/…k), time: …", "I/O read: …MB, write: …MB, rate: …MB/s"), shaped as
/// e2fsck's on the same image (e2fsck's extra "Peak memory" line in pass 3 aside).
#[test]
fn timing_lines_are_shaped_as_e2fsck_prints_them() {
    let Some(t) = common::tools() else { return };
    let img = common::mkfs(&t, "ext4", &[], "16M");
    let ours = run(&common::ffsck_bin(), &["-fntt"], &img.path);
    let theirs = run(&t.e2fsck, &["-fntt"], &img.path);
    let resources = |text: &str| -> Vec<String> {
        text.lines()
            .filter(|l| l.contains("Memory used:") || l.contains("I/O read:"))
            .filter(|l| !l.starts_with("Peak memory"))
            .map(shape)
            .collect()
    };
    let want = resources(&theirs.stdout);
    assert_eq!(want.len(), 12, "test setup:\n{}", theirs.stdout);
    assert_eq!(resources(&ours.stdout), want, "\n{}", ours.stdout);
}

/// `-C fd`: one line per step, "pass done total device", every pass from 1 to 5 shown and
/// each reaching its total, as e2fsck's lines do on the same image.
#[test]
fn progress_lines_cover_every_pass_to_its_maximum() {
    let Some(t) = common::tools() else { return };
    let img = common::mkfs(&t, "ext4", &[], "16M");
    let lines = |bin: &Path| -> Vec<(u64, u64, u64)> {
        let out = img.aux("progress");
        let mut cmd = Command::new("sh");
        cmd.arg("-c")
            .arg(r#""$0" -fn -C 3 "$1" 3>"$2" >/dev/null 2>&1"#)
            .arg(bin)
            .arg(&img.path)
            .arg(&out)
            .env("E2FSCK_CONFIG", "/dev/null");
        let r = common::run_with_timeout(cmd, std::time::Duration::from_secs(120)).unwrap();
        assert_eq!(r.code(), 0, "{}", r.stderr);
        let text = std::fs::read_to_string(&out).unwrap();
        text.lines()
            .map(|l| {
                let f: Vec<&str> = l.split(' ').collect();
                assert!(f.len() == 4 && f[3] == img.path.to_str().unwrap(), "{l}");
                (
                    f[0].parse().unwrap(),
                    f[1].parse().unwrap(),
                    f[2].parse().unwrap(),
                )
            })
            .collect()
    };
    // Each pass's last line: its pass, and whether it reached its total.
    let ends = |v: &[(u64, u64, u64)]| -> Vec<(u64, bool)> {
        let mut out: Vec<(u64, bool)> = Vec::new();
        for &(p, d, n) in v {
            match out.last_mut() {
                Some(last) if last.0 == p => last.1 = d == n,
                _ => out.push((p, d == n)),
            }
        }
        out
    };
    let theirs = ends(&lines(&t.e2fsck));
    assert_eq!(
        theirs,
        (1..=5).map(|p| (p, true)).collect::<Vec<_>>(),
        "test setup"
    );
    assert_eq!(ends(&lines(&common::ffsck_bin())), theirs);
}

/// Pass 2 names an inode by the path it was found at ("Inode 14 (/a/f5)") and a linked-to
/// directory by its path ("link to directory /a (12)"), as e2fsck's `%Q` and `%P` do.
#[test]
fn pass_2_names_inodes_by_their_paths() {
    let Some(t) = common::tools() else { return };
    let img = common::mkfs(&t, "ext2", &["-O", "^dir_index"], "16M");
    common::debugfs_w(&t, &img.path, "sif /a/f5 mode 0170644");
    common::debugfs_w(&t, &img.path, "mkdir /zz");
    common::debugfs_w(&t, &img.path, "ln /a /zz/alink");
    let (ours, theirs) = both_fy(&t, &img);
    let lines = |s: &str| -> Vec<String> {
        s.lines()
            .filter(|l| l.contains("(/a/f5)") || l.contains("is a link to directory"))
            .map(str::to_string)
            .collect()
    };
    let want = lines(&theirs.stdout);
    assert_eq!(want.len(), 2, "test setup: e2fsck said\n{}", theirs.stdout);
    assert_same(&ours, &theirs, lines);
}

/// Entries naming inodes in group 0's unused inodes area: e2fsck reports the group's first,
/// resets the area, and restarts from the beginning once pass 2 ends ("Restarting e2fsck from
/// the beginning...", then every pass header again, and what the second run finds under
/// them). ffsck's output is the same, line for line, but for its name.
#[test]
fn a_fix_that_restarts_e2fsck_shows_the_restarted_run() {
    let Some(t) = common::tools() else { return };
    let dir = tempfile::tempdir().unwrap();
    let tree = dir.path().join("tree");
    std::fs::create_dir_all(tree.join("a")).unwrap();
    for f in ["a/f1", "a/f2", "a/f3"] {
        std::fs::write(tree.join(f), f).unwrap();
    }
    let path = dir.path().join("fs.img");
    let ok = Command::new(&t.mke2fs)
        .args(["-q", "-F", "-t", "ext4", "-d"])
        .arg(&tree)
        .arg(&path)
        .arg("16M")
        .output()
        .unwrap()
        .status
        .success();
    assert!(ok, "test setup: mke2fs");
    let img = common::Image { dir, path };
    let stats = common::debugfs_r(&t, &img.path, "stats");
    let per_group: u32 = stats
        .lines()
        .find_map(|l| l.strip_prefix("Inodes per group:"))
        .and_then(|v| v.trim().parse().ok())
        .expect("test setup: inodes per group");
    // Inodes from 13 on (/a/f1, /a/f2, /a/f3) are in the unused area, and as many are
    // counted free (else pass 0 finds the unused count itself impossible).
    let unused = per_group - 12;
    common::debugfs_script(
        &t,
        &img,
        &[
            &format!("set_bg 0 free_inodes_count {unused}"),
            &format!("set_bg 0 itable_unused {unused}"),
            "set_bg 0 checksum calc",
        ],
    );
    let (ours, theirs) = both_fy(&t, &img);
    let lines = |s: &str| -> Vec<String> {
        neutral(s)
            .into_iter()
            .filter(|l| !l.starts_with("PROG: not committing"))
            .collect()
    };
    let want = lines(&theirs.stdout);
    assert!(
        want.iter()
            .any(|l| l == "Restarting PROG from the beginning..."),
        "test setup: e2fsck did not restart:\n{}",
        theirs.stdout
    );
    assert_same(&ours, &theirs, lines);
    assert_eq!(ours.code(), theirs.code());
}

/// An extent leaf whose checksum alone is wrong: e2fsck names the last extent in it
/// ("(logical block N, physical block N, len N)" on a line of its own); ffsck prints the same
/// lines. (ffsck named the leaf block: "(blk N)".)
#[test]
fn an_extent_block_with_a_bad_checksum_names_its_last_extent() {
    let Some(t) = common::tools() else { return };
    let img = sparse_image(&t);
    let ex = common::debugfs_r(&t, &img.path, "ex /sparse");
    let leaf: u64 = ex
        .lines()
        .find(|l| l.trim_start().starts_with("0/ 1"))
        .and_then(|l| l.split_whitespace().nth(7))
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("test setup: no leaf block in\n{ex}"));
    // A byte of an unused slot (covered by the checksum, not by any check).
    common::patch(&img.path, leaf * 1024 + 1000, &[0x5a]);
    let (ours, theirs) = both_fy(&t, &img);
    same_section(
        &ours,
        &theirs,
        ("Pass 1:", "Pass 2:"),
        |l| l.starts_with("\t(logical block "),
        "test setup: e2fsck found no bad checksum",
    );
}

/// An ext4 image (1 KiB blocks) holding `/sparse`: ten one-block runs with holes between
/// them, more than the inode's four slots, so its extents live in a leaf block.
fn sparse_image(t: &common::Tools) -> common::Image {
    use std::io::{Seek, SeekFrom, Write};
    let dir = tempfile::tempdir().unwrap();
    let tree = dir.path().join("tree");
    std::fs::create_dir_all(&tree).unwrap();
    let mut f = std::fs::File::create(tree.join("sparse")).unwrap();
    for i in 0..10u64 {
        f.seek(SeekFrom::Start(i * 8192)).unwrap();
        f.write_all(&[b'x'; 1024]).unwrap();
    }
    drop(f);
    let path = dir.path().join("fs.img");
    let ok = Command::new(&t.mke2fs)
        .args(["-q", "-F", "-t", "ext4", "-b", "1024", "-d"])
        .arg(&tree)
        .arg(&path)
        .arg("16M")
        .output()
        .unwrap()
        .status
        .success();
    assert!(ok, "test setup: mke2fs");
    common::Image { dir, path }
}

/// An index entry whose start differs from its child's first extent: e2fsck names the level
/// of the node holding the entry (the root is 0) and words it on two lines; ffsck prints the
/// same two lines. (ffsck said "level 1 ... does not match the next level's 0" on one line.)
#[test]
fn an_index_start_mismatch_is_worded_as_e2fsck_words_it() {
    let Some(t) = common::tools() else { return };
    let img = sparse_image(&t);
    // i_block[3]: the first index entry's logical start (the child's first extent is at 0).
    common::debugfs_w(&t, &img.path, "sif /sparse block[3] 1");
    let (ours, theirs) = both_fy(&t, &img);
    // The two lines of the message and its question. (What follows differs: ffsck also
    // finds the child's first extent out of order, a check difference of its own.)
    let message = |text: &str| -> Vec<String> {
        let lines: Vec<&str> = text.lines().collect();
        let at = lines
            .iter()
            .position(|l| l.starts_with("Interior extent node level "))
            .unwrap_or(lines.len());
        lines[at..].iter().take(2).map(|l| l.to_string()).collect()
    };
    let want = message(&theirs.stdout);
    assert_eq!(
        want.len(),
        2,
        "test setup: e2fsck found no index start mismatch:\n{}",
        theirs.stdout
    );
    assert_same(&ours, &theirs, message);
}

/// Inodes pass 2 clears whole (an impossible mode, a device with a block pointer, a fast and a
/// slow symlink whose sizes are wrong): e2fsck clears each entry with its inode and frees the
/// inode and its blocks in the same pass, so `-fy` says the clears and nothing more (no
/// "deleted/unused inode" for the entries, no bitmap differences or counts for what was
/// freed). ffsck's output is e2fsck's, line for line.
#[test]
fn pass_2_clears_a_bad_inode_with_its_entry_as_e2fsck_does() {
    let Some(t) = common::tools() else { return };
    // (Without dir_index: ffsck's pass 3A comes after pass 5, so its blocks would show there.)
    let img = common::mkfs(&t, "ext4", &["-O", "^dir_index"], "16M");
    let long = "t".repeat(100);
    for cmd in [
        "sif /a/f5 mode 0170644".to_string(),
        "mknod cdev c 1 2".to_string(),
        "sif /cdev flags 0x80000".to_string(),
        "symlink /fast short-target".to_string(),
        "sif /fast size 40".to_string(),
        format!("symlink /slow /{long}"),
        "sif /slow size 7".to_string(),
    ] {
        common::debugfs_w(&t, &img.path, &cmd);
    }
    let (ours, theirs) = both_fy(&t, &img);
    assert!(
        theirs.stdout.contains("is an illegal character device")
            && theirs.stdout.contains("Symlink /slow")
            && theirs.stdout.contains("Symlink /fast")
            && theirs.stdout.contains("has invalid mode"),
        "test setup: e2fsck said\n{}",
        theirs.stdout
    );
    assert_eq!(ours.code(), theirs.code(), "{}", ours.stdout);
    assert_same(&ours, &theirs, neutral);
}

/// Paths as e2fsck finds them at message time: a directory whose `..` names a regular file
/// is `<file>/<dir>` ("Entry '..' in <14>/<12> (12)"), and pass 3's `..` message names the
/// directory, the `..` target and the parent it should have as e2fsck does.
#[test]
fn paths_are_found_as_e2fsck_finds_them() {
    let Some(t) = common::tools() else { return };
    let img = common::mkfs(&t, "ext2", &["-O", "^dir_index"], "16M");
    common::debugfs_w(&t, &img.path, "mkdir /pd");
    let dir = common::inode_of(&t, &img.path, "/pd");
    let file = common::inode_of(&t, &img.path, "/a/f5");
    let blk = common::bmap(&t, &img.path, "/pd", 0);
    let bs = 1024u64 << common::read_u32(&img.path, 1024 + 24);
    // The second entry of the directory's first block is `..`.
    common::patch(&img.path, blk * bs + 12, &(file as u32).to_le_bytes());
    let (ours, theirs) = both_fy(&t, &img);
    let lines = |s: &str| -> Vec<String> {
        s.lines()
            .filter(|l| l.starts_with("Entry '..' in <") || l.starts_with("'..' in "))
            .map(str::to_string)
            .collect()
    };
    let want = lines(&theirs.stdout);
    assert!(
        want.iter()
            .any(|l| l.contains(&format!("in <{file}>/<{dir}> ({dir})")))
            && want.iter().any(|l| l.starts_with("'..' in /pd ")),
        "test setup: e2fsck said\n{}",
        theirs.stdout
    );
    assert_same(&ours, &theirs, lines);
}

/// Unattached inodes: one with data is reconnected and its count then judged as e2fsck
/// judges it (the reconnection added a link: "ref count is 2, should be 1"); an empty one is
/// cleared and freed at once, so pass 5 says nothing of it. Passes 4 and 5 as e2fsck prints
/// them.
#[test]
fn unattached_inodes_print_as_e2fsck_prints_them() {
    let Some(t) = common::tools() else { return };
    let img = common::mkfs(&t, "ext4", &["-O", "^dir_index"], "16M");
    std::fs::write(img.aux("empty"), b"").unwrap();
    common::debugfs_w(
        &t,
        &img.path,
        &format!("write {} /empty", img.aux("empty").display()),
    );
    common::debugfs_w(&t, &img.path, "unlink /a/f5");
    common::debugfs_w(&t, &img.path, "unlink /empty");
    let (ours, theirs) = both_fy(&t, &img);
    same_section(
        &ours,
        &theirs,
        ("Pass 4:", "test: *****"),
        |l| l.ends_with("should be 1.  Fix? yes") || l.starts_with("Unattached zero-length"),
        "test setup: e2fsck reconnected and cleared nothing",
    );
    assert!(
        theirs.stdout.contains("Unattached zero-length")
            && theirs.stdout.contains("ref count is 2, should be 1."),
        "test setup: {}",
        theirs.stdout
    );
}

/// e2fsck checks the blocks of a block-mapped file with an indirect block at the end of its
/// group, after the files that follow it: a wrong `i_blocks` of such a file (the lower
/// inode) is reported after that of a small file (the higher one), as e2fsck orders them.
#[test]
fn files_with_indirect_blocks_are_reported_in_e2fsck_order() {
    let Some(t) = common::tools() else { return };
    let img = common::mkfs(&t, "ext2", &[], "16M");
    std::fs::write(img.aux("big"), vec![7u8; 40 << 10]).unwrap();
    std::fs::write(img.aux("small"), b"small").unwrap();
    for (src, dst) in [("big", "/big"), ("small", "/small")] {
        let cmd = format!("write {} {dst}", img.aux(src).display());
        common::debugfs_w(&t, &img.path, &cmd);
    }
    common::debugfs_w(&t, &img.path, "sif /big blocks 4");
    common::debugfs_w(&t, &img.path, "sif /small blocks 40");
    let big = common::inode_of(&t, &img.path, "/big");
    let (ours, theirs) = both_fy(&t, &img);
    let first = format!("Inode {}, i_blocks is 40", big + 1);
    same_section(
        &ours,
        &theirs,
        ("Pass 1:", "Pass 2:"),
        |l| l.starts_with(&first),
        "test setup: e2fsck did not report the small file",
    );
    let at = |s: &str, what: &str| s.find(what).unwrap_or(usize::MAX);
    assert!(
        at(&theirs.stdout, &first) < at(&theirs.stdout, &format!("Inode {big}, i_blocks")),
        "test setup: e2fsck's order\n{}",
        theirs.stdout
    );
}

/// An inode pass 1 clears whole (the inline-data flag without the feature): e2fsck no longer
/// counts it in use, so pass 2 finds its entry naming an unused inode, and says nothing else
/// of the entry (no file type); pass 4 says nothing of the inode.
#[test]
fn an_entry_of_an_inode_pass_1_cleared_names_an_unused_inode() {
    let Some(t) = common::tools() else { return };
    let img = common::mkfs(&t, "ext4", &["-O", "^dir_index"], "16M");
    common::debugfs_w(&t, &img.path, "sif /a/f5 flags 0x10000000");
    let (ours, theirs) = both_fy(&t, &img);
    same_section(
        &ours,
        &theirs,
        ("Pass 2:", "Pass 5:"),
        |l| l.starts_with("Entry 'f5' in /a ") && l.contains("deleted/unused"),
        "test setup: e2fsck did not find the entry unused",
    );
}

/// A symlink with a second block and an extent-mapped directory whose extent starts past the
/// largest directory: e2fsck asks "Inode N is too big.  Truncate?" once per inode, then prints
/// each block with the short word of the answer, naming an extent by the block past its end.
#[test]
fn too_big_inodes_raise_e2fsck_s_latch_question() {
    let Some(t) = common::tools() else { return };
    let img = common::mkfs(&t, "ext2", &[], "16M");
    let blk = common::bmap(&t, &img.path, "/a/f1", 0);
    common::debugfs_w(&t, &img.path, &format!("sif /b/long block[1] {blk}"));
    common::debugfs_w(&t, &img.path, &format!("sif /b/long block[2] {}", blk + 1));
    let (ours, theirs) = both_fy(&t, &img);
    same_section(
        &ours,
        &theirs,
        ("Pass 1:", "Pass 2:"),
        |l| l.starts_with("Block #2 (") && l.ends_with("to be too big.  CLEARED."),
        "test setup: e2fsck latched no too-big symlink",
    );
    let img = common::mkfs(&t, "ext4", &[], "16M");
    // The inode's first extent (i_block[3] is its first logical block).
    common::debugfs_w(&t, &img.path, "sif /a/emptydir block[3] 4294967280");
    let (ours, theirs) = both_fy(&t, &img);
    same_section(
        &ours,
        &theirs,
        ("Pass 1:", "Pass 2:"),
        |l| l.starts_with("Block #4294967281 (") && l.ends_with("CLEARED."),
        "test setup: e2fsck latched no too-big directory",
    );
}

/// A group marked BLOCK_UNINIT whose blocks a file uses: pass 5 asks to clear the flag before
/// it lists the bitmap differences, as e2fsck does.
#[test]
fn a_block_uninit_group_in_use_is_reported_as_e2fsck_reports_it() {
    let Some(t) = common::tools() else { return };
    let dir = tempfile::tempdir().unwrap();
    let tree = dir.path().join("tree");
    std::fs::create_dir_all(&tree).unwrap();
    // 10 MiB of 1 KiB blocks: the file runs from group 0 into group 1 (of three).
    std::fs::write(tree.join("big"), common::Rng::new(5).bytes(10 << 20)).unwrap();
    let path = dir.path().join("fs.img");
    common::mkfs_from(&t, &tree, &path, "ext4", &["-b", "1024"], "24M");
    let img = common::Image { dir, path };
    common::debugfs_script(&t, &img, &["set_bg 1 flags 3", "set_bg 1 checksum calc"]);
    let (ours, theirs) = both_fy(&t, &img);
    same_section(
        &ours,
        &theirs,
        ("Pass 5:", "test: *****"),
        |l| l.ends_with("marked BLOCK_UNINIT"),
        "test setup: e2fsck found no BLOCK_UNINIT group in use",
    );
}

/// The summary's share of non-contiguous files counts as e2fsck counts: a file larger than a
/// group never (it cannot be contiguous), and a file whose map has a pointer pass 1 clears
/// (out of range, or past the largest symlink) is broken there.
#[test]
fn non_contiguous_files_are_counted_as_e2fsck_counts_them() {
    let Some(t) = common::tools() else { return };
    let summary = |s: &str| {
        s.lines()
            .filter(|l| l.contains("non-contiguous"))
            .map(str::to_string)
            .collect::<Vec<_>>()
    };
    let dir = tempfile::tempdir().unwrap();
    let tree = dir.path().join("tree");
    std::fs::create_dir_all(&tree).unwrap();
    // 10 MiB of 1 KiB blocks: past group 1's backup superblock, in more than a group.
    std::fs::write(tree.join("big"), common::Rng::new(6).bytes(10 << 20)).unwrap();
    let path = dir.path().join("fs.img");
    common::mkfs_from(&t, &tree, &path, "ext2", &["-b", "1024"], "24M");
    let img = common::Image { dir, path };
    let (ours, theirs) = both_fy(&t, &img);
    assert!(
        summary(&theirs.stdout)
            .iter()
            .any(|l| l.contains("(0.0% non")),
        "test setup: {}",
        theirs.stdout
    );
    assert_same(&ours, &theirs, summary);
    let img = common::mkfs(&t, "ext2", &[], "16M");
    let blk = common::bmap(&t, &img.path, "/a/f1", 0);
    common::debugfs_w(&t, &img.path, "sif /a/f5 block[1] 99999999");
    common::debugfs_w(&t, &img.path, &format!("sif /b/long block[1] {blk}"));
    let (ours, theirs) = both_fy(&t, &img);
    assert!(
        summary(&theirs.stdout)
            .iter()
            .all(|l| !l.contains("(0.0% non")),
        "test setup: {}",
        theirs.stdout
    );
    assert_same(&ours, &theirs, summary);
}

/// A symlink of 2 GiB is no large file: e2fsck counts regular files only, so pass 2 asks for
/// no LARGE_FILE feature (nor for the dynamic revision of a revision-0 file system).
#[test]
fn only_regular_files_count_as_large_files() {
    let Some(t) = common::tools() else { return };
    let img = common::mkfs(&t, "ext2", &["-r", "0"], "16M");
    common::debugfs_w(&t, &img.path, "sif /b/long size 0x80000000");
    let (ours, theirs) = both_fy(&t, &img);
    assert!(
        theirs.stdout.contains("/b/long"),
        "test setup: e2fsck found nothing wrong with the symlink\n{}",
        theirs.stdout
    );
    assert_same(&ours, &theirs, |s| {
        between(s, "Pass 2:", "Pass 3:")
            .into_iter()
            .map(str::to_string)
            .collect::<Vec<_>>()
    });
}

/// Descriptors with bad checksums, one with an unused-inode count past its free inodes, the
/// last marked BLOCK_UNINIT: fixing the checksum resets both, so e2fsck asks about neither.
#[test]
fn a_descriptor_whose_checksum_is_fixed_is_not_questioned_further() {
    let Some(t) = common::tools() else { return };
    let dir = tempfile::tempdir().unwrap();
    let tree = dir.path().join("tree");
    std::fs::create_dir_all(&tree).unwrap();
    std::fs::write(tree.join("f"), b"f").unwrap();
    let path = dir.path().join("fs.img");
    common::mkfs_from(&t, &tree, &path, "ext4", &["-b", "1024"], "24M");
    let img = common::Image { dir, path };
    common::debugfs_script(
        &t,
        &img,
        &[
            "set_bg 1 free_inodes_count 0",
            "set_bg 1 itable_unused 2048",
            "set_bg 2 flags 7",
        ],
    );
    let (ours, theirs) = both_fy(&t, &img);
    assert!(
        theirs.stdout.contains("Group descriptor 2 checksum is"),
        "test setup: {}",
        theirs.stdout
    );
    assert_same(&ours, &theirs, |s| {
        between(s, "", "Pass 1:")
            .into_iter()
            .map(str::to_string)
            .collect::<Vec<_>>()
    });
}

/// An extent leaf with a bad checksum and an invalid extent: fixing the extent rewrites the
/// leaf, so e2fsck does not ask about its checksum (it would ask after the leaf's extents).
#[test]
fn a_leaf_fixed_for_an_extent_is_not_asked_about_its_checksum() {
    let Some(t) = common::tools() else { return };
    let img = common::mkfs(&t, "ext4", &["-b", "4096"], "16M");
    // The leaf of /sparse's depth-1 tree: "0/ 1 1/ 1 FIRST - LAST LEAF LEN".
    let ex = common::debugfs_r(&t, &img.path, "ex /sparse");
    let leaf: u64 = ex
        .lines()
        .find(|l| l.trim_start().starts_with("0/"))
        .and_then(|l| l.split_whitespace().nth(7)?.parse().ok())
        .expect("test setup: /sparse has an extent leaf");
    // The third extent's physical start (after the 12-byte header, 8 bytes into the entry).
    common::patch(&img.path, leaf * 4096 + 12 + 2 * 12 + 8, &[0xff; 4]);
    let (ours, theirs) = both_fy(&t, &img);
    same_section(
        &ours,
        &theirs,
        ("Pass 1:", "Pass 2:"),
        |l| l.starts_with("Inode ") && l.ends_with("has an invalid extent"),
        "test setup: e2fsck found no invalid extent",
    );
}
