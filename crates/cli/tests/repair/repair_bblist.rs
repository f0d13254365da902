//! `-l`, `-L` and `-c`: the bad-block list put into the bad-blocks inode before the passes,
//! compared with e2fsck's run on a copy of the same image: the same list (`dumpe2fs -b`),
//! messages and exit code, a file sharing a listed block keeps its contents (pass 1D clones
//! it), and the result checks clean.

use crate::common;

use common::{Image, Tools};
use std::path::Path;
use std::process::Command;

/// `ARGS IMG` run by `bin` without any e2fsck.conf.
fn run(bin: &Path, args: &[&str], img: &Path) -> common::Run {
    let mut cmd = Command::new(bin);
    cmd.args(args)
        .arg(img)
        .env("E2FSCK_CONFIG", "/nonexistent/e2fsck.conf");
    common::run_with_timeout(cmd, std::time::Duration::from_secs(300)).expect("timed out")
}

/// The bad-block list `dumpe2fs -b` prints.
fn listed(img: &Path) -> Vec<u64> {
    let dumpe2fs = common::find_tool("dumpe2fs").expect("dumpe2fs comes with e2fsprogs");
    let out = Command::new(dumpe2fs).arg("-b").arg(img).output().unwrap();
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| l.trim().parse().ok())
        .collect()
}

/// Output lines without e2fsck's banner, the image's name made the same.
fn lines(r: &common::Run, img: &Path) -> Vec<String> {
    let name = img.display().to_string();
    r.stdout
        .lines()
        .filter(|l| !l.starts_with("e2fsck 1."))
        .map(|l| l.replace(&name, "IMG"))
        .collect()
}

/// Run ffsck and e2fsck with `args` on two copies of `img`; both exit alike, list the same
/// bad blocks and leave a file system e2fsck finds clean. Returns both runs' lines.
fn both(t: &Tools, img: &Image, args: &[&str]) -> (Vec<String>, Vec<String>) {
    let copy = img.aux("e2fsck.img");
    std::fs::copy(&img.path, &copy).unwrap();
    let ours = run(&common::ffsck_bin(), args, &img.path);
    common::assert_no_panic(&ours);
    let theirs = run(&t.e2fsck, args, &copy);
    assert_eq!(
        ours.code(),
        theirs.code(),
        "{args:?}\n{}{}",
        ours.stdout,
        ours.stderr
    );
    assert_eq!(listed(&img.path), listed(&copy), "{args:?}");
    let (code, out) = common::e2fsck_n(t, &img.path);
    assert_eq!(code, 0, "{args:?}: e2fsck -fn after ffsck\n{out}");
    (lines(&ours, &img.path), lines(&theirs, &copy))
}

/// What a run says before its passes (the list's warnings and the update). The rest may
/// differ: e2fsck -fy also indexes the tree's multi-block directory (pass 3A).
fn before_passes(lines: &[String]) -> Vec<String> {
    lines
        .iter()
        .take_while(|l| !l.starts_with("Pass 1:"))
        .cloned()
        .collect()
}

/// A block free at the end of the file system.
fn free_near_end(t: &Tools, img: &Path, back: u64) -> u64 {
    let stats = common::debugfs_r(t, img, "stats");
    let count: u64 = stats
        .lines()
        .find_map(|l| l.strip_prefix("Block count:"))
        .and_then(|v| v.trim().parse().ok())
        .expect("block count");
    let b = count - back;
    let test = common::debugfs_r(t, img, &format!("testb {b}"));
    assert!(
        test.contains("not in use"),
        "test setup: block {b} is in use: {test}"
    );
    b
}

#[test]
fn a_list_added_with_l_goes_into_the_bad_blocks_inode_as_e2fsck_puts_it() {
    let Some(t) = common::tools() else { return };
    let img = common::mkfs(&t, "ext2", &[], "16M");
    let shared = common::bmap(&t, &img.path, "/a/f1", 0);
    let (a, b) = (
        free_near_end(&t, &img.path, 10),
        free_near_end(&t, &img.path, 11),
    );
    let list = img.aux("list");
    std::fs::write(
        &list,
        format!("{a}\n{b}\n{shared}\n99999999\nnot a block\n"),
    )
    .unwrap();
    let before = common::dump(&t, &img, "/a/f1");
    let list = list.to_str().unwrap();
    let (ours, theirs) = both(&t, &img, &["-fy", "-l", list]);
    assert_eq!(
        before_passes(&theirs),
        [
            "Bad block 99999999 out of range; ignored.",
            "IMG: Updating bad block inode."
        ],
        "test setup"
    );
    assert_eq!(before_passes(&ours), before_passes(&theirs));
    let mut want = vec![a, b, shared];
    want.sort_unstable();
    assert_eq!(listed(&img.path), want);
    // /a/f1 shared a block with the list: it got a copy, with the same contents.
    assert!(common::dump(&t, &img, "/a/f1") == before, "/a/f1 changed");
}

#[test]
fn a_list_given_with_capital_l_replaces_it_through_indirect_blocks() {
    let Some(t) = common::tools() else { return };
    let img = common::mkfs(&t, "ext2", &[], "16M");
    let first = free_near_end(&t, &img.path, 40);
    let list = img.aux("list");
    std::fs::write(&list, format!("{first}\n")).unwrap();
    both(&t, &img, &["-fy", "-l", list.to_str().unwrap()]);
    // Thirty blocks: more than the inode's twelve direct pointers.
    let many: String = (0..30).map(|i| format!("{}\n", first + 1 + i)).collect();
    std::fs::write(&list, many).unwrap();
    let (ours, theirs) = both(&t, &img, &["-fy", "-L", list.to_str().unwrap()]);
    assert_eq!(before_passes(&ours), before_passes(&theirs));
    assert_eq!(
        listed(&img.path),
        (first + 1..first + 31).collect::<Vec<u64>>()
    );
}

#[test]
fn c_runs_badblocks_as_e2fsck_does() {
    let Some(t) = common::tools() else { return };
    if common::find_tool("badblocks").is_none() {
        return common::skip("SKIPPED: badblocks (e2fsprogs) not installed");
    }
    let img = common::mkfs(&t, "ext4", &[], "8M");
    let (ours, theirs) = both(&t, &img, &["-fy", "-c"]);
    assert_eq!(before_passes(&ours), before_passes(&theirs));
    assert_eq!(before_passes(&ours), ["IMG: Updating bad block inode."]);
    assert!(listed(&img.path).is_empty());
}
