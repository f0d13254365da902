//! Journal recovery against the kernel: images whose journals the kernel really wrote (mounted
//! on a loop device, files written and deleted, the backing file copied while still mounted so
//! the copy has committed but un-checkpointed transactions and `needs_recovery` set).
//!
//! For each image: (1) `ffsck -n` on it (the engine, read-only) checks the replayed file system
//! in memory, leaves the image untouched, and agrees with `e2fsck -fn` on e2fsck's own recovered
//! copy; (2) our replay committed to a copy through the redo log leaves a file system that
//! `e2fsck -fn` passes and whose file tree (paths, types, sizes, contents, link targets) equals
//! the tree of a copy recovered by `e2fsck -fy`.
//!
//! Needs root and loop mounts; skips with a message when they are not available.

use ffsck_check::Collect;
use ffsck_check::{CheckOptions, Policy, Problem};
use ffsck_io::redo::{DeviceId, RedoLog};
use ffsck_io::{Device, FileDevice};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;

/// Build an image in `dir` that needs recovery. `mkfs` and `mount_opts` vary the journal
/// features. Returns `None` (after saying why) when loop mounts are not allowed here.
fn kernel_image(dir: &Path, name: &str, mkfs: &str, mount_opts: &str) -> Option<PathBuf> {
    let out = dir.join(format!("{name}.img"));
    let script = r#"
set -e
out=$1; mkfs=$2; mopts=$3
d=$(mktemp -d); img=$d/img; mnt=$d/mnt; mkdir $mnt
trap 'umount $mnt 2>/dev/null; rm -rf $d' EXIT
truncate -s 32M $img
mke2fs -q -F -t ext4 $mkfs $img
mount -o loop,commit=1${mopts:+,$mopts} $img $mnt || exit 77
mkdir -p $mnt/a/b $mnt/c $mnt/gone/deep
for i in $(seq 1 30); do head -c $((i*1500)) /dev/urandom > $mnt/a/f$i; done
for i in $(seq 1 20); do head -c 3000 /dev/urandom > $mnt/gone/deep/g$i; done
echo hello > $mnt/a/b/h.txt
ln -s a/b/h.txt $mnt/link
sync -f $mnt/a; sleep 2
cp -r $mnt/a $mnt/c/
rm -rf $mnt/gone
rm -f $mnt/a/f1*
sync -f $mnt/a; sleep 2
# Reuse freed blocks for new metadata so revoke records matter.
mkdir -p $mnt/new/d1 $mnt/new/d2
for i in $(seq 1 25); do echo "file $i" > $mnt/new/d1/n$i; done
mv $mnt/c/a/f2 $mnt/new/moved
# Blocks that begin with jbd2's magic must be escaped when they are journalled (data=journal);
# with data=journal this much data also makes the log wrap around.
python3 -c 'import sys; sys.stdout.buffer.write((b"\xc0\x3b\x39\x98" + b"x"*1020) * 2500)' > $mnt/a/magic
sync -f $mnt/a; sleep 2
python3 -c 'import sys; sys.stdout.buffer.write((b"\xc0\x3b\x39\x98" + b"y"*1020) * 400)' > $mnt/a/magic2
sync -f $mnt/a; sleep 2
cp --sparse=always $img $out
"#;
    let st = Command::new("bash")
        .arg("-c")
        .arg(script)
        .arg("mk")
        .arg(&out)
        .arg(mkfs)
        .arg(mount_opts)
        .status()
        .ok()?;
    match st.code() {
        Some(0) => Some(out),
        Some(77) => {
            eprintln!("SKIP: cannot loop-mount here (needs root and loop devices)");
            None
        }
        _ => panic!("building {name} failed ({st})"),
    }
}

fn can_mount() -> bool {
    // SAFETY-free check: only root may loop-mount.
    Command::new("id")
        .arg("-u")
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim() == "0")
        .unwrap_or(false)
}

fn e2fsck(args: &[&str], img: &Path) -> i32 {
    Command::new("e2fsck")
        .args(args)
        .arg(img)
        .output()
        .expect("e2fsck runs")
        .status
        .code()
        .unwrap_or(-1)
}

fn needs_recovery(img: &Path) -> bool {
    let o = Command::new("dumpe2fs")
        .arg("-h")
        .arg(img)
        .output()
        .unwrap();
    String::from_utf8_lossy(&o.stdout).contains("needs_recovery")
}

/// Every path under `root` with its type, size and contents (or link target).
fn tree(root: &Path) -> BTreeMap<String, (String, u64, Vec<u8>)> {
    let mut out = BTreeMap::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let e = e.unwrap();
            let p = e.path();
            let rel = p.strip_prefix(root).unwrap().display().to_string();
            let m = std::fs::symlink_metadata(&p).unwrap();
            let ft = m.file_type();
            let entry = if ft.is_dir() {
                stack.push(p.clone());
                ("dir".to_string(), 0, Vec::new())
            } else if ft.is_symlink() {
                let t = std::fs::read_link(&p).unwrap();
                ("link".into(), m.len(), t.display().to_string().into_bytes())
            } else {
                ("file".into(), m.len(), std::fs::read(&p).unwrap())
            };
            out.insert(rel, entry);
        }
    }
    out
}

/// Mount `img` read-only (no journal replay by the kernel) and read its tree.
fn mounted_tree(img: &Path) -> BTreeMap<String, (String, u64, Vec<u8>)> {
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

fn copy(from: &Path, to: &Path) -> PathBuf {
    std::fs::copy(from, to).unwrap();
    to.to_path_buf()
}

/// Replay with the library and commit the writes through the redo log.
fn replay_with_library(img: &Path, log: &Path) -> ffsck_check::journal::recovery::Replay {
    let dev: Arc<dyn Device> = Arc::new(FileDevice::open_read_write(img).unwrap());
    let plan = ffsck_check::journal::recovery::replay(dev.clone())
        .expect("recovery plans")
        .expect("the image needs recovery");
    let store = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(true)
        .open(log)
        .unwrap();
    let id = DeviceId {
        size: dev.size(),
        tag: [0; 16],
    };
    let (mut redo, _) = RedoLog::open(store, &*dev, id).unwrap();
    redo.commit_and_apply(&*dev, &plan.records, &mut |_| Ok(()))
        .unwrap();
    plan
}

fn check_variant(
    name: &str,
    mkfs: &str,
    mount_opts: &str,
) -> Option<ffsck_check::journal::recovery::Replay> {
    if !can_mount() {
        eprintln!("SKIP {name}: not root, cannot loop-mount");
        return None;
    }
    let dir = tempfile::tempdir().unwrap();
    let img = kernel_image(dir.path(), name, mkfs, mount_opts)?;
    assert!(
        needs_recovery(&img),
        "{name}: the copy does not need recovery"
    );
    let pristine = std::fs::read(&img).unwrap();

    // e2fsck's recovery, on its own copy.
    let theirs = copy(&img, &dir.path().join("theirs.img"));
    let rc = e2fsck(&["-fy"], &theirs);
    assert!(rc <= 1, "{name}: e2fsck -fy exited {rc}");
    let their_fn = e2fsck(&["-fn"], &theirs);

    // (1) The read-only check replays in memory, writes nothing, and agrees with e2fsck.
    let dev: Arc<dyn Device> = Arc::new(FileDevice::open_read_only(&img).unwrap());
    let opts = CheckOptions {
        policy: Policy::No,
        superblock: Default::default(),
        threads: 2,
        progress: Default::default(),
        ..Default::default()
    };
    let mut rep = Collect::default();
    let outcome = ffsck_check::check(dev, &opts, &mut rep);
    let problems: Vec<Problem> = outcome.findings.iter().map(|f| f.problem).collect();
    assert!(
        problems.contains(&Problem::P0_JOURNAL_RECOVERING),
        "{name}: no recovery finding in {problems:?}"
    );
    assert!(
        outcome.fatal.is_none() && outcome.exit_code == their_fn,
        "{name}: ffsck -n exit {} ({problems:?}, {:?}), e2fsck -fn after e2fsck's recovery {their_fn}",
        outcome.exit_code,
        outcome.fatal
    );
    assert!(
        std::fs::read(&img).unwrap() == pristine,
        "{name}: -n changed the image"
    );

    // (2) Our replay, committed through the redo log, against e2fsck's.
    let ours = copy(&img, &dir.path().join("ours.img"));
    let plan = replay_with_library(&ours, &dir.path().join("redo.log"));
    assert!(
        plan.transactions > 0 && plan.blocks > 0,
        "{name}: nothing replayed"
    );
    assert!(plan.issues.is_empty(), "{name}: {:?}", plan.issues);
    assert!(!needs_recovery(&ours), "{name}: needs_recovery still set");
    let rc = e2fsck(&["-fn"], &ours);
    // Only the summary counts of the superblock may differ (the kernel does not journal them),
    // which e2fsck -fn reports without counting them as errors.
    assert_eq!(rc, 0, "{name}: e2fsck -fn after our replay exited {rc}");
    assert!(
        mounted_tree(&ours) == mounted_tree(&theirs),
        "{name}: the file tree after our replay differs from e2fsck's"
    );
    Some(plan)
}

#[test]
fn kernel_journal_no_checksums() {
    if let Some(p) = check_variant("plain", "-O ^metadata_csum", "") {
        assert!(
            p.revoked > 0,
            "the workload should leave revoke records ({} blocks, {} revoked)",
            p.blocks,
            p.revoked
        );
    }
}

#[test]
fn kernel_journal_metadata_csum_v3() {
    check_variant("csum", "-O metadata_csum", "");
}

#[test]
fn kernel_journal_checksum_mount_option_32bit() {
    check_variant("jcsum32", "-O ^metadata_csum,^64bit", "journal_checksum");
}

#[test]
fn kernel_journal_data_journal_1k_escaped_blocks() {
    if let Some(p) = check_variant("dj1k", "-O ^metadata_csum -b 1024", "data=journal") {
        assert!(
            p.escaped > 0,
            "data=journal should log escaped blocks ({} blocks, {} escaped)",
            p.blocks,
            p.escaped
        );
    }
}

#[test]
fn kernel_journal_async_commit() {
    check_variant(
        "async",
        "-O metadata_csum",
        "data=writeback,journal_async_commit",
    );
}
