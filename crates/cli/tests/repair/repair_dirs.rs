//! Directory repairs (`-y`): corrupt htree indexes, garbage and badly framed directory blocks,
//! missing `.`/`..`, duplicate names, missing checksum tails and directory holes are repaired in
//! one run; e2fsck then finds the file system clean, a second ffsck agrees, and every file
//! that survived keeps its contents (at its path, or in /lost+found when its entry was lost).

use crate::common;

use common::Tools;
use std::collections::HashSet;
use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::process::Command;

/// Files in `/big`: enough for a multi-block directory that `e2fsck -D` indexes.
const BIG: usize = 400;

struct Img {
    dir: tempfile::TempDir,
    path: PathBuf,
}

fn big_name(i: usize) -> String {
    format!("file-with-a-longish-name-{i:04}")
}

fn big_content(i: usize) -> Vec<u8> {
    format!("content of big file {i}\n").into_bytes()
}

/// `/big` (BIG small files, indexed), `/small` (two files and a subdirectory).
fn build(t: &Tools, args: &[&str]) -> Img {
    let img = build_linear(t, args);
    // Index the big directory.
    let st = Command::new(&t.e2fsck)
        .args(["-fyD"])
        .arg(&img.path)
        .env("E2FSCK_CONFIG", "/dev/null")
        .output()
        .unwrap();
    assert!(st.status.code().unwrap_or(8) <= 1, "test setup: e2fsck -D");
    img
}

/// The same tree as `build`, with `/big` left linear as `mke2fs -d` writes it.
fn build_linear(t: &Tools, args: &[&str]) -> Img {
    let dir = tempfile::tempdir().unwrap();
    let tree = dir.path().join("tree");
    std::fs::create_dir_all(tree.join("big")).unwrap();
    std::fs::create_dir_all(tree.join("small/sub")).unwrap();
    for i in 0..BIG {
        std::fs::write(tree.join("big").join(big_name(i)), big_content(i)).unwrap();
    }
    std::fs::write(tree.join("small/a"), b"small file a\n").unwrap();
    std::fs::write(tree.join("small/b"), b"small file b\n").unwrap();
    std::fs::write(tree.join("small/sub/c"), b"small file c\n").unwrap();
    let path = dir.path().join("fs.img");
    std::fs::File::create(&path).unwrap();
    let out = Command::new(&t.mke2fs)
        .args(["-q", "-F", "-b", "1024"])
        .args(args)
        .arg("-d")
        .arg(&tree)
        .arg(&path)
        .arg("16M")
        .env("MKE2FS_SYNC", "0")
        .output()
        .unwrap();
    assert!(out.status.success(), "test setup: mke2fs {args:?} failed");
    Img { dir, path }
}

fn ffsck(args: &[&str], img: &Path) -> common::Run {
    let mut a: Vec<&OsStr> = args.iter().map(OsStr::new).collect();
    a.push(img.as_os_str());
    common::ffsck(&a)
}

/// The damage is visible to e2fsck; one `ffsck -fy` leaves nothing for e2fsck or a second
/// ffsck to find.
fn repair_once(t: &Tools, img: &Img, what: &str) -> common::Run {
    let (before, out) = common::e2fsck_n(t, &img.path);
    assert_ne!(
        before, 0,
        "test setup ({what}): e2fsck must see the damage\n{out}"
    );
    let run = ffsck(&["-fy"], &img.path);
    assert!(
        run.code() & !1 == 0,
        "{what}: ffsck -fy should fix everything\n{}\n{}",
        run.stdout,
        run.stderr
    );
    let (code, out) = common::e2fsck_n(t, &img.path);
    assert_eq!(code, 0, "{what}: e2fsck -fn after ffsck -fy:\n{out}");
    let again = ffsck(&["-fn"], &img.path);
    assert_eq!(
        again.code(),
        0,
        "{what}: second ffsck -fn:\n{}",
        again.stdout
    );
    run
}

/// Names listed in directory `path` (debugfs `ls -p`: /inode/mode/uid/gid/name/size/).
fn names(t: &Tools, img: &Path, path: &str) -> Vec<String> {
    common::debugfs_r(t, img, &format!("ls -p {path}"))
        .lines()
        .filter_map(|l| l.split('/').nth(5).map(str::to_string))
        .filter(|n| !n.is_empty() && n != "." && n != "..")
        .collect()
}

/// The contents of every regular file under `/big`, `/small` and `/lost+found`.
fn all_contents(t: &Tools, img: &Img) -> HashSet<Vec<u8>> {
    let out = img.dir.path().join("dump");
    let _ = std::fs::remove_dir_all(&out);
    std::fs::create_dir_all(&out).unwrap();
    for d in ["/big", "/small", "/lost+found"] {
        common::debugfs_r(t, &img.path, &format!("rdump {d} {}", out.display()));
    }
    let mut set = HashSet::new();
    let mut stack = vec![out];
    while let Some(p) = stack.pop() {
        for e in std::fs::read_dir(&p).into_iter().flatten().flatten() {
            let ft = e.file_type().unwrap();
            if ft.is_dir() {
                stack.push(e.path());
            } else if ft.is_file() {
                set.insert(std::fs::read(e.path()).unwrap());
            }
        }
    }
    set
}

/// Every file's contents are still somewhere in the tree; with `in_place`, every `/big` name
/// is still in `/big`.
fn assert_files_kept(t: &Tools, img: &Img, in_place: bool, what: &str) {
    let have = all_contents(t, img);
    for i in 0..BIG {
        assert!(have.contains(&big_content(i)), "{what}: big file {i} lost");
    }
    for c in [&b"small file a\n"[..], b"small file b\n", b"small file c\n"] {
        assert!(have.contains(c), "{what}: a /small file was lost");
    }
    if in_place {
        let got: HashSet<String> = names(t, &img.path, "/big").into_iter().collect();
        for i in 0..BIG {
            assert!(
                got.contains(&big_name(i)),
                "{what}: /big/{} missing",
                big_name(i)
            );
        }
    }
}

fn is_indexed(t: &Tools, img: &Path, dir: &str) -> bool {
    common::debugfs_r(t, img, &format!("stat {dir}"))
        .lines()
        .find(|l| l.contains("Flags:"))
        .and_then(|l| l.split("Flags:").nth(1))
        .and_then(|f| u32::from_str_radix(f.trim().trim_start_matches("0x"), 16).ok())
        .is_some_and(|f| f & 0x1000 != 0)
}

const LAYOUTS: [(&str, &[&str]); 2] = [
    ("ext4+csum", &["-t", "ext4", "-O", "metadata_csum"]),
    ("ext3", &["-t", "ext3"]),
];

/// A root whose entry table is garbage: the index is rebuilt, every name stays in place.
#[test]
fn bad_htree_root_is_rebuilt() {
    let Some(t) = common::tools() else { return };
    for (what, args) in LAYOUTS {
        let img = build(&t, args);
        assert!(
            is_indexed(&t, &img.path, "/big"),
            "{what}: setup must index /big"
        );
        common::debugfs_w(&t, &img.path, "zap_block -f /big -o 32 -l 4 -p 0xff 0");
        repair_once(&t, &img, what);
        assert_files_kept(&t, &img, true, what);
        assert!(
            is_indexed(&t, &img.path, "/big"),
            "{what}: /big should be indexed again"
        );
    }
}

/// A leaf whose entries are out of order for the index (moved to another leaf's place).
#[test]
fn htree_leaf_swapped_with_another_is_reindexed() {
    let Some(t) = common::tools() else { return };
    let img = build(&t, LAYOUTS[1].1);
    let b1 = common::bmap(&t, &img.path, "/big", 1);
    let b5 = common::bmap(&t, &img.path, "/big", 5);
    // Swap the contents of two leaves: their hash ranges no longer match the index.
    let bs = 1024u64;
    let mut f = std::fs::read(&img.path).unwrap();
    let (x, y) = ((b1 * bs) as usize, (b5 * bs) as usize);
    for i in 0..bs as usize {
        f.swap(x + i, y + i);
    }
    std::fs::write(&img.path, f).unwrap();
    repair_once(&t, &img, "swapped leaves");
    assert_files_kept(&t, &img, true, "swapped leaves");
}

/// A leaf block full of garbage: its entries are lost, their files go to /lost+found.
#[test]
fn garbage_directory_block_is_salvaged() {
    let Some(t) = common::tools() else { return };
    for (what, args) in LAYOUTS {
        let img = build(&t, args);
        common::debugfs_w(&t, &img.path, "zap_block -f /big -p 0x41 3");
        repair_once(&t, &img, what);
        assert_files_kept(&t, &img, false, what);
    }
}

/// A record length that is not a multiple of 4, and a name length running past the block:
/// the directory is salvaged around them.
#[test]
fn bad_rec_len_and_name_len_are_salvaged() {
    let Some(t) = common::tools() else { return };
    for (what, args) in LAYOUTS {
        let img = build(&t, args);
        // Block 2 of /big: the first entry's rec_len; block 4: the first entry's name_len.
        common::debugfs_w(&t, &img.path, "zap_block -f /big -o 4 -l 1 -p 0x03 2");
        common::debugfs_w(&t, &img.path, "zap_block -f /big -o 6 -l 1 -p 0xff 4");
        repair_once(&t, &img, what);
        assert_files_kept(&t, &img, false, what);
    }
}

/// `.` and `..` zeroed: both are written again, the other entries stay.
#[test]
fn missing_dot_and_dot_dot_are_created() {
    let Some(t) = common::tools() else { return };
    for (what, args) in LAYOUTS {
        let img = build(&t, args);
        common::debugfs_w(&t, &img.path, "zap_block -f /small/sub -o 0 -l 24 -p 0 0");
        repair_once(&t, &img, what);
        assert_files_kept(&t, &img, true, what);
        assert_eq!(names(&t, &img.path, "/small/sub"), vec!["c".to_string()]);
        let ls = common::debugfs_r(&t, &img.path, "ls -p /small/sub");
        let dotdot = ls.lines().any(|l| {
            let f: Vec<&str> = l.split('/').collect();
            f.get(5) == Some(&"..") && f.get(1).is_some_and(|i| *i != "0")
        });
        assert!(dotdot, "{what}: no '..':\n{ls}");
    }
}

/// Two entries with one name: the second is renamed (different inode) as e2fsck does.
#[test]
fn duplicate_names_are_made_unique() {
    let Some(t) = common::tools() else { return };
    for (what, args) in LAYOUTS {
        let img = build(&t, args);
        // Rename b's entry to "a" in place (same length): two entries named "a".
        let blk = common::bmap(&t, &img.path, "/small", 0);
        let data = std::fs::read(&img.path).unwrap();
        let block = &data[(blk * 1024) as usize..(blk * 1024 + 1024) as usize];
        let at = block
            .windows(3)
            .position(|w| w == [1, 1, b'b'])
            .expect("test setup: entry 'b' in /small");
        common::patch(&img.path, blk * 1024 + at as u64 + 2, b"a");
        // e2fsck on a copy names the new name in its question; ffsck asks the same.
        let e2out = common::e2fsck_fy_copy(&t, &img.path);
        let rename = |out: &str| -> Vec<String> {
            out.lines()
                .filter(|l| l.contains("non-unique") || l.starts_with("Rename to"))
                .map(str::to_string)
                .collect()
        };
        let want = rename(&e2out);
        assert!(!want.is_empty(), "{what}: e2fsck renamed nothing");
        let run = repair_once(&t, &img, what);
        assert_eq!(rename(&run.stdout), want, "{what}:\n{}", run.stdout);
        let got = names(&t, &img.path, "/small");
        assert!(got.contains(&"a".to_string()), "{what}: {got:?}");
        assert_eq!(got.len(), 3, "{what}: a, a~0 and sub expected: {got:?}");
        assert_files_kept(&t, &img, false, what);
    }
}

/// A leaf whose checksum tail was overwritten: the tail is put back.
#[test]
fn missing_checksum_tail_is_rebuilt() {
    let Some(t) = common::tools() else { return };
    let img = build(&t, LAYOUTS[0].1);
    // Zero the tail of /small's only block: the last entry now seems to end 12 bytes early.
    common::debugfs_w(&t, &img.path, "zap_block -f /small -o 1012 -l 12 -p 0 0");
    repair_once(&t, &img, "missing tail");
    assert_files_kept(&t, &img, true, "missing tail");
}

/// A block punched out of the middle of an indexed, block-mapped directory: a new empty block
/// is allocated in its place, and the files it named are reconnected. (With extents e2fsck
/// moves the later blocks down instead, a pass-1 fix.)
#[test]
fn directory_hole_is_filled() {
    let Some(t) = common::tools() else { return };
    {
        let (what, args) = LAYOUTS[1];
        let img = build(&t, args);
        common::debugfs_w(&t, &img.path, "punch /big 3 3");
        repair_once(&t, &img, what);
        assert_files_kept(&t, &img, false, what);
    }
}

/// `-D` on a clean file system: the linear multi-block directory is rebuilt as an htree that
/// e2fsck accepts, with every name still in place. (The rebuild stays within the directory's
/// blocks, and an index needs one block more than a packed linear directory: some files are
/// removed first to make room.)
#[test]
fn optimize_indexes_every_directory() {
    let Some(t) = common::tools() else { return };
    const REMOVED: usize = 60;
    for (what, args) in LAYOUTS {
        let img = build_linear(&t, args);
        for i in 0..REMOVED {
            common::debugfs_w(&t, &img.path, &format!("rm /big/{}", big_name(i)));
        }
        assert!(
            !is_indexed(&t, &img.path, "/big"),
            "{what}: setup leaves /big linear"
        );
        let run = ffsck(&["-fyD"], &img.path);
        assert!(run.code() & !1 == 0, "{what}: ffsck -fyD\n{}", run.stdout);
        assert!(
            is_indexed(&t, &img.path, "/big"),
            "{what}: /big should be indexed"
        );
        let (code, out) = common::e2fsck_n(&t, &img.path);
        assert_eq!(code, 0, "{what}: e2fsck -fn after ffsck -fyD:\n{out}");
        assert_eq!(ffsck(&["-fn"], &img.path).code(), 0, "{what}: second ffsck");
        let got: HashSet<String> = names(&t, &img.path, "/big").into_iter().collect();
        assert_eq!(
            got.len(),
            BIG - REMOVED,
            "{what}: /big lost or gained names"
        );
        for i in REMOVED..BIG {
            assert!(
                got.contains(&big_name(i)),
                "{what}: /big/{} missing",
                big_name(i)
            );
            let out = img.dir.path().join("dumped");
            let _ = std::fs::remove_file(&out);
            common::debugfs_r(
                &t,
                &img.path,
                &format!("dump /big/{} {}", big_name(i), out.display()),
            );
            assert_eq!(
                std::fs::read(&out).unwrap(),
                big_content(i),
                "{what}: file {i}"
            );
        }
    }
}

#[test]
fn a_gap_in_an_extent_mapped_directory_is_closed() {
    let Some(t) = common::tools() else { return };
    let img = common::mkfs(&t, "ext4", &["-b", "1024", "-O", "^dir_index"], "8M");
    let before = common::debugfs_r(&t, &img.path, "stat /many");
    assert!(
        before.contains("(0-2):"),
        "test setup: /many is not 3 blocks\n{before}"
    );
    common::debugfs_w(&t, &img.path, "punch /many 1 1");
    let run = common::ffsck(&[OsStr::new("-fn"), img.path.as_os_str()]);
    let want = "block 2 should be at block 1";
    assert!(run.stdout.contains(want), "{want}\n{}", run.stdout);
    common::assert_repaired(&t, &img, "gap in an extent-mapped directory");
    let after = common::debugfs_r(&t, &img.path, "stat /many");
    assert!(
        after.contains("(0):") && after.contains(", (1):") && !after.contains("(2)"),
        "{after}"
    );
}

/// A `.` whose record length swallows the entries after `..` (a flipped bit): e2fsck splits
/// it and keeps `..` and every entry behind it. ffsck's salvage followed the long record and
/// sent the swallowed files to /lost+found.
#[test]
fn a_big_dot_record_keeps_the_entries_it_swallowed() {
    let Some(t) = common::tools() else { return };
    let img = common::mkfs(&t, "ext2", &["-b", "1024"], "8M");
    let before = names(&t, &img.path, "/b");
    assert!(before.len() > 6, "test setup: {before:?}");
    let at = common::bmap(&t, &img.path, "/b", 0) * 1024;
    let block = &common::read_all(&img.path)[at as usize..at as usize + 1024];
    // The offset of the fifth entry: '.' is made to reach it.
    let mut off = 0usize;
    for _ in 0..4 {
        off += usize::from(u16::from_le_bytes([block[off + 4], block[off + 5]]));
    }
    assert!(off > 24 && off < 1024, "test setup: offset {off}");
    common::patch(&img.path, at + 4, &(off as u16).to_le_bytes());
    let run = common::assert_one_run_repairs(&t, &img, "big '.'", &[1]);
    assert!(run.stdout.contains("is big"), "{}", run.stdout);
    assert_eq!(names(&t, &img.path, "/b"), before, "{}", run.stdout);
}
