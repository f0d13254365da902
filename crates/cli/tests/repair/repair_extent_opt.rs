//! Pass 1E as e2fsck runs it: extent trees that could be shorter or narrower are offered for
//! rebuilding (answered no under `-n` without an error, rebuilt under `-y` with the header
//! "Pass 1E: Optimizing extent trees"), `no_optimize_extents` and `fixes_only` turn the offer
//! off, and `-E bmap2extent` rewrites block-mapped files as extent trees. Each case builds
//! its image with `mke2fs -d` and `debugfs -w` and compares ffsck's result with e2fsck's on a
//! copy: the same questions, exit code, free blocks and file contents, and a result both
//! checkers find clean.

use crate::common;

use common::Tools;
use std::path::{Path, PathBuf};
use std::process::Command;

/// A run of `bin ARGS IMG` with E2FSCK_CONFIG set to `conf` (a missing file: none).
fn run(bin: &Path, args: &[&str], img: &Path, conf: &Path) -> common::Run {
    let mut cmd = Command::new(bin);
    cmd.args(args).arg(img).env("E2FSCK_CONFIG", conf);
    common::run_with_timeout(cmd, std::time::Duration::from_secs(120)).expect("timed out")
}

/// An image of 1 KiB blocks holding `/f`, a file with one data block at each of `offsets`
/// (in KiB), then `punches` (debugfs `punch /f FROM TO`). With `-t ext3`, block-mapped.
struct Sparse {
    dir: tempfile::TempDir,
    img: PathBuf,
}

impl Sparse {
    fn new(t: &Tools, fs_type: &str, offsets: &[u64], punches: &[(u64, u64)]) -> Sparse {
        let dir = tempfile::tempdir().unwrap();
        let tree = dir.path().join("tree");
        std::fs::create_dir_all(tree.join("d")).unwrap();
        let mut data = vec![0u8; 1024 * (*offsets.iter().max().unwrap() as usize + 1)];
        for &o in offsets {
            data[o as usize * 1024..o as usize * 1024 + 4].copy_from_slice(b"data");
        }
        std::fs::write(tree.join("f"), &data).unwrap();
        // Block-mapped files with indirect blocks too.
        for i in 1..=20usize {
            let body: Vec<u8> = (0..i * 3000).map(|k| (k % 251) as u8).collect();
            std::fs::write(tree.join("d").join(format!("f{i}")), body).unwrap();
        }
        let img = dir.path().join("fs.img");
        let out = Command::new(&t.mke2fs)
            .args(["-q", "-F", "-b", "1024", "-t", fs_type, "-d"])
            .arg(&tree)
            .arg(&img)
            .arg("8M")
            .output()
            .unwrap();
        assert!(out.status.success(), "test setup: mke2fs failed");
        for (from, to) in punches {
            common::debugfs_w(t, &img, &format!("punch /f {from} {to}"));
        }
        Sparse { dir, img }
    }

    /// A copy of the image for e2fsck, and the path of a missing config file.
    fn copy(&self) -> (PathBuf, PathBuf) {
        let copy = self.dir.path().join("e2fsck.img");
        std::fs::copy(&self.img, &copy).unwrap();
        (copy, self.dir.path().join("no-such.conf"))
    }
}

/// "Free blocks:" of the superblock.
fn free_blocks(t: &Tools, img: &Path) -> u64 {
    let s = common::debugfs_r(t, img, "stats");
    s.lines()
        .find_map(|l| l.strip_prefix("Free blocks:"))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or_else(|| panic!("test setup: no free blocks count in\n{s}"))
}

/// The lines of a run's output that are questions or the pass 1E header.
fn pass1e_lines(out: &str) -> Vec<&str> {
    out.lines()
        .filter(|l| l.contains("Optimize?") || l.starts_with("Pass 1E"))
        .collect()
}

/// Check and repair `s` with ffsck and (on a copy) e2fsck with `args` added; both say the
/// same pass-1E lines and exit codes, and leave results that check clean with the same free
/// blocks. Returns ffsck's repair output.
fn same_as_e2fsck(t: &Tools, s: &Sparse, args: &[&str], want: &str) -> String {
    let (copy, conf) = s.copy();
    let ffsck = common::ffsck_bin();
    // -n first (nothing written), then -y on each image.
    let mut ours = None;
    for mode in ["-fn", "-fy"] {
        let a: Vec<&str> = [mode].iter().chain(args).copied().collect();
        let (o, e) = (
            run(&ffsck, &a, &s.img, &conf),
            run(&t.e2fsck, &a, &copy, &conf),
        );
        assert_eq!(o.code(), e.code(), "{mode}: {}", o.stdout);
        assert_eq!(
            pass1e_lines(&o.stdout),
            pass1e_lines(&e.stdout),
            "{mode}:\n{}",
            o.stdout
        );
        ours = Some(o);
    }
    let ours = ours.expect("two runs");
    assert!(ours.stdout.contains(want), "{}", ours.stdout);
    assert!(
        ours.stdout
            .contains("Pass 1E: Optimizing extent trees\nPass 2"),
        "{}",
        ours.stdout
    );
    let (code, out) = common::e2fsck_n(t, &s.img);
    assert_eq!(code, 0, "e2fsck -fn after ffsck's rebuild\n{out}");
    assert!(!out.contains("Optimize"), "{out}");
    let again = run(&ffsck, &["-fn"], &s.img, &conf);
    assert_eq!(again.code(), 0, "{}", again.stdout);
    assert!(!again.stdout.contains("Optimize"), "{}", again.stdout);
    assert_eq!(free_blocks(t, &s.img), free_blocks(t, &copy));
    // The data is where it was.
    for f in ["/f", "/d/f20", "/d/f7"] {
        let ours = common::debugfs_r(t, &s.img, &format!("cat {f}"));
        let theirs = common::debugfs_r(t, &copy, &format!("cat {f}"));
        assert!(ours == theirs, "{f} differs from e2fsck's result");
    }
    ours.stdout
}

/// "LEVEL/DEPTH" of each row of debugfs `ex /f`.
fn rows(t: &Tools, img: &Path) -> Vec<String> {
    let ex = common::debugfs_r(t, img, "ex /f");
    ex.lines()
        .skip(1)
        .map(|l| l.split_whitespace().take(2).collect())
        .collect()
}

/// The depth of `/f`'s extent tree, as "0/DEPTH".
fn depth(t: &Tools, img: &Path) -> String {
    rows(t, img).into_iter().next().unwrap_or_default()
}

/// Index entries in `/f`'s root (the leaves of a depth-1 tree).
fn leaves(t: &Tools, img: &Path) -> usize {
    rows(t, img).iter().filter(|r| *r == "0/1").count()
}

#[test]
fn a_tree_that_could_be_shorter_is_rebuilt_in_the_inode() {
    let Some(t) = common::tools() else { return };
    // Six extents need a leaf; punching three leaves three, which fit in the inode.
    let s = Sparse::new(&t, "ext4", &[0, 2, 4, 6, 8, 10], &[(4, 8)]);
    assert_eq!(depth(&t, &s.img), "0/1", "test setup");
    same_as_e2fsck(
        &t,
        &s,
        &[],
        "extent tree (at level 1) could be shorter.  Optimize? yes",
    );
    assert_eq!(depth(&t, &s.img), "0/0");
}

#[test]
fn a_tree_that_could_be_narrower_is_rebuilt_in_one_leaf() {
    let Some(t) = common::tools() else { return };
    // A hundred extents take two leaves; what punching leaves (twelve) fits in one.
    let offsets: Vec<u64> = (0..100).map(|i| 2 * i).collect();
    let s = Sparse::new(&t, "ext4", &offsets, &[(8, 150), (160, 190)]);
    assert_eq!(leaves(&t, &s.img), 2, "test setup");
    same_as_e2fsck(
        &t,
        &s,
        &[],
        "extent tree (at level 1) could be narrower.  Optimize? yes",
    );
    assert_eq!(leaves(&t, &s.img), 1);
}

#[test]
fn the_offer_is_off_with_no_optimize_extents_and_fixes_only() {
    let Some(t) = common::tools() else { return };
    let s = Sparse::new(&t, "ext4", &[0, 2, 4, 6, 8, 10], &[(4, 8)]);
    let (_, missing) = s.copy();
    let conf = s.dir.path().join("e2fsck.conf");
    std::fs::write(&conf, "[options]\n\tno_optimize_extents = true\n").unwrap();
    let ffsck = common::ffsck_bin();
    for (args, conf) in [
        (&["-fy", "-E", "no_optimize_extents"][..], &missing),
        (&["-fy", "-E", "fixes_only"], &missing),
        (&["-fy"], &conf),
    ] {
        let ours = run(&ffsck, args, &s.img, conf);
        let theirs = run(&t.e2fsck, args, &s.copy().0, conf);
        assert_eq!(ours.code(), theirs.code(), "{args:?}");
        assert!(
            !ours.stdout.contains("Optimize"),
            "{args:?}: {}",
            ours.stdout
        );
        assert!(
            !theirs.stdout.contains("Optimize"),
            "{args:?}: {}",
            theirs.stdout
        );
        assert_eq!(depth(&t, &s.img), "0/1", "{args:?}: the tree was rebuilt");
    }
    // -E optimize_extents wins over the config file.
    let ours = run(&ffsck, &["-fn", "-E", "optimize_extents"], &s.img, &conf);
    assert!(ours.stdout.contains("could be shorter"), "{}", ours.stdout);
}

#[test]
fn bmap2extent_rewrites_block_maps_as_extent_trees() {
    let Some(t) = common::tools() else { return };
    let s = Sparse::new(&t, "ext3", &[0, 2, 4, 300], &[]);
    let before = common::debugfs_r(&t, &s.img, "stat /d/f20");
    assert!(before.contains("(IND)"), "test setup: {before}");
    same_as_e2fsck(&t, &s, &["-E", "bmap2extent"], "Pass 1E");
    let feats = common::debugfs_r(&t, &s.img, "features");
    assert!(feats.contains(" extent"), "{feats}");
    for f in ["/f", "/d/f20", "/d", "/"] {
        let st = common::debugfs_r(&t, &s.img, &format!("stat {f}"));
        assert!(st.contains("EXTENTS:"), "{f}: {st}");
    }
}

/// A bigalloc file system maps files by extents only: a file whose extent root became a block
/// map (its extent flag cleared, its words the data blocks) is reported as e2fsck reports it
/// ("cannot be block mapped", under -n an error), and one `-fy` rewrites it as an extent tree
/// under e2fsck's pass 1E header, its contents kept.
#[test]
fn bigalloc_block_map_is_rewritten_as_an_extent_tree() {
    let Some(t) = common::tools() else { return };
    let args = ["-O", "bigalloc", "-C", "65536", "-b", "4096"];
    let img = common::mkfs(&t, "ext4", &args, "16M");
    let want = common::tree_file(&img, "a/f1");
    let n = want.len().div_ceil(4096) as u64;
    assert!((1..=12).contains(&n), "test setup: /a/f1 has {n} blocks");
    let mut cmds = vec!["sif /a/f1 flags 0".to_string()];
    let names = (0..12)
        .map(|i| i.to_string())
        .chain(["IND", "DIND", "TIND"].map(String::from));
    for (i, name) in names.enumerate() {
        let b = if (i as u64) < n {
            common::bmap(&t, &img.path, "/a/f1", i as u64)
        } else {
            0
        };
        cmds.push(format!("sif /a/f1 block[{name}] {b}"));
    }
    let cmds: Vec<&str> = cmds.iter().map(String::as_str).collect();
    common::debugfs_script(&t, &img, &cmds);
    common::expect_codes(&t, &img, 4, &["P1_NO_BIGALLOC_BLOCKMAP_FILES"], &[]);
    let run = common::assert_one_run_repairs(&t, &img, "bigalloc block map", &[1]);
    assert!(
        run.stdout
            .contains("on bigalloc filesystem cannot be block mapped.  Fix? yes")
            && run.stdout.contains("Pass 1E: Optimizing extent trees"),
        "{}",
        run.stdout
    );
    let st = common::debugfs_r(&t, &img.path, "stat /a/f1");
    assert!(st.contains("EXTENTS:"), "{st}");
    assert_eq!(common::dump(&t, &img, "/a/f1"), want);
}
