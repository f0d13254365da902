//! Fast-commit recovery against the kernel: an ext4 made with `-O fast_commit` is loop-mounted,
//! files are created, appended (interleaved, so one file needs an extent tree of depth 1),
//! linked, unlinked and fsynced (fsync writes fast commits), and the backing file is copied
//! while still mounted. `ffsck -fy` on one copy and `e2fsck -fy` on another must leave the same
//! file tree (paths, types, sizes, link counts, contents), and `e2fsck -fn` must then pass ours.
//!
//! Needs root, loop devices and a kernel with fast commits; skips with a message otherwise.

use crate::common;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

/// Build the image in `dir`; `None` (after saying why) when it cannot be made here.
fn fast_commit_image(dir: &Path) -> Option<PathBuf> {
    let out = dir.join("fc.img");
    let script = r#"
set -e
out=$1
d=$(mktemp -d); img=$d/img; mnt=$d/mnt; mkdir $mnt
trap 'umount $mnt 2>/dev/null; rm -rf $d' EXIT
truncate -s 32M $img
mke2fs -q -F -t ext4 -O fast_commit $img 2>/dev/null || exit 78
mount -o loop,commit=60 $img $mnt 2>/dev/null || exit 77
mkdir -p $mnt/a $mnt/b
for i in $(seq 1 10); do head -c $((i*3000)) /dev/urandom > $mnt/a/old$i; done
sync -f $mnt
python3 - $mnt <<'PY'
import os, sys
m = sys.argv[1]
def w(path, data, mode='wb'):
    with open(path, mode) as f:
        f.write(data); f.flush(); os.fsync(f.fileno())
def fsync_dir(path):
    fd = os.open(path, os.O_RDONLY); os.fsync(fd); os.close(fd)
for i in range(4):
    w(f"{m}/a/new{i}", os.urandom(1000 + i * 5000))
for i in range(8):
    w(f"{m}/b/frag", os.urandom(4096), 'ab')
    w(f"{m}/b/other", os.urandom(4096), 'ab')
w(f"{m}/a/old3", os.urandom(7000), 'ab')
os.unlink(f"{m}/a/old5"); fsync_dir(f"{m}/a")
os.link(f"{m}/a/new1", f"{m}/b/hard"); fsync_dir(f"{m}/b")
w(f"{m}/b/last", b"the end\n")
PY
cp --sparse=always $img $out
"#;
    let st = Command::new("bash")
        .arg("-c")
        .arg(script)
        .arg("mk")
        .arg(&out)
        .status()
        .ok()?;
    match st.code() {
        Some(0) => Some(out),
        Some(77) => {
            eprintln!("SKIP: cannot loop-mount a fast_commit file system here");
            None
        }
        Some(78) => {
            eprintln!("SKIP: mke2fs does not know fast_commit");
            None
        }
        _ => panic!("building the fast-commit image failed ({st})"),
    }
}

fn is_root() -> bool {
    Command::new("id")
        .arg("-u")
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim() == "0")
        .unwrap_or(false)
}

type Tree = BTreeMap<String, (String, u64, u64, Vec<u8>)>;

/// Every path under `root`: type, size, link count, contents (or link target).
fn tree(root: &Path) -> Tree {
    use std::os::unix::fs::MetadataExt;
    let mut out = BTreeMap::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            let rel = p.strip_prefix(root).unwrap().display().to_string();
            let m = std::fs::symlink_metadata(&p).unwrap();
            let ft = m.file_type();
            let entry = if ft.is_dir() {
                stack.push(p.clone());
                ("dir".to_string(), 0, m.nlink(), Vec::new())
            } else if ft.is_symlink() {
                let t = std::fs::read_link(&p).unwrap();
                (
                    "link".into(),
                    m.len(),
                    m.nlink(),
                    t.display().to_string().into_bytes(),
                )
            } else {
                (
                    "file".into(),
                    m.len(),
                    m.nlink(),
                    std::fs::read(&p).unwrap(),
                )
            };
            out.insert(rel, entry);
        }
    }
    out
}

/// Mount `img` read-only without journal replay and read its tree.
fn mounted_tree(img: &Path) -> Tree {
    let mnt = tempfile::tempdir().unwrap();
    let st = Command::new("mount")
        .args(["-o", "ro,loop,noload"])
        .arg(img)
        .arg(mnt.path())
        .status()
        .unwrap();
    assert!(st.success(), "mounting {} failed", img.display());
    let t = tree(mnt.path());
    let _ = Command::new("umount").arg(mnt.path()).status();
    t
}

fn logdump(img: &Path) -> String {
    let o = Command::new("debugfs")
        .args(["-R", "logdump"])
        .arg(img)
        .output()
        .unwrap();
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn e2fsck(args: &[&str], img: &Path) -> i32 {
    Command::new("e2fsck")
        .args(args)
        .arg(img)
        .output()
        .unwrap()
        .status
        .code()
        .unwrap_or(-1)
}

#[test]
fn kernel_fast_commits_replay_like_e2fsck() {
    if common::tools().is_none() {
        return;
    }
    if !is_root() {
        eprintln!("SKIP: not root, cannot loop-mount");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let Some(img) = fast_commit_image(dir.path()) else {
        return;
    };
    let dump = logdump(&img);
    let fc_area = dump.split("Fast Commit Area").nth(1).unwrap_or("");
    if !fc_area.contains("tag HEAD") {
        eprintln!("SKIP: the kernel wrote no fast commits (fell back to full commits)");
        return;
    }

    let theirs = dir.path().join("theirs.img");
    let ours = dir.path().join("ours.img");
    std::fs::copy(&img, &theirs).unwrap();
    std::fs::copy(&img, &ours).unwrap();
    let rc = e2fsck(&["-fy"], &theirs);
    assert!(rc <= 1, "e2fsck -fy exited {rc}");

    let run = common::ffsck(&["-fy".as_ref(), ours.as_os_str()]);
    assert!(
        run.code() <= 1,
        "ffsck -fy exited {}:\n{}",
        run.code(),
        run.stdout
    );
    // A repair recovers the journal on the device before it decides anything, and says so
    // as e2fsck does; that the fast commits were replayed shows in the tree compared below.
    assert!(
        run.stdout.contains("recovering journal"),
        "no journal recovery:\n{}\nlog:\n{fc_area}",
        run.stdout
    );
    // Our replay leaves nothing for the check to fix beyond the replay itself.
    assert!(
        !run.stdout.contains("Fix? yes") && !run.stdout.contains("Clear? yes"),
        "the check after our replay fixed things:\n{}",
        run.stdout
    );
    assert_eq!(e2fsck(&["-fn"], &ours), 0, "e2fsck -fn after ffsck -fy");
    assert!(
        mounted_tree(&ours) == mounted_tree(&theirs),
        "the tree after ffsck -fy differs from e2fsck's\nlog:\n{fc_area}"
    );

    // A second run on the repaired image finds nothing to do and writes nothing but the
    // marks of its check (the primary superblock's write and last-check times, checksum).
    let first = common::without_marks(std::fs::read(&ours).unwrap());
    let run = common::ffsck(&["-fy".as_ref(), ours.as_os_str()]);
    assert_eq!(run.code(), 0, "a second run found work:\n{}", run.stdout);
    assert!(
        common::without_marks(std::fs::read(&ours).unwrap()) == first,
        "a second run changed the image"
    );
}
