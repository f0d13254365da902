//! External journals (`-j DEVICE`): a file system whose journal lives on a `journal_dev`
//! device, left needing recovery by a kernel mount, is replayed and repaired by `ffsck -fy -j`
//! to the same tree and the same journal device bytes as `e2fsck -fy -j`; a read-only check
//! writes neither; a wrong, truncated or garbled journal device is a clear fatal finding,
//! never a crash. Needs root (loop devices, mount with `journal_path=`); skips otherwise.

use crate::common;

use common::*;
use std::path::{Path, PathBuf};
use std::process::Command;

/// A loop device attached to an image file, detached on drop.
struct Loop(String);

impl Loop {
    fn attach(img: &Path) -> Option<Loop> {
        let out = Command::new("losetup")
            .args(["-f", "--show"])
            .arg(img)
            .output()
            .ok()?;
        if !out.status.success() {
            return None;
        }
        let dev = String::from_utf8_lossy(&out.stdout).trim().to_string();
        (!dev.is_empty()).then_some(Loop(dev))
    }
}

impl Drop for Loop {
    fn drop(&mut self) {
        let _ = Command::new("losetup").args(["-d", &self.0]).status();
    }
}

/// A mount point, unmounted on drop.
struct Mount(PathBuf);

impl Drop for Mount {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg(&self.0).status();
    }
}

fn ok(cmd: &mut Command) -> bool {
    cmd.output().map(|o| o.status.success()).unwrap_or(false)
}

fn mke2fs(t: &Tools, args: &[&str], img: &Path, size: &str) {
    std::fs::File::create(img).unwrap();
    let out = Command::new(&t.mke2fs)
        .args(["-q", "-F"])
        .args(args)
        .arg(img)
        .arg(size)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "test setup: mke2fs {args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Images of a file system and its external journal, taken while mounted after writes, so
/// the journal needs recovery. `None` (with a message) when the machine cannot do it.
struct Pair {
    dir: tempfile::TempDir,
    fs: PathBuf,
    jdev: PathBuf,
}

fn recovering_pair(t: &Tools) -> Option<Pair> {
    let uid = Command::new("id").arg("-u").output().ok();
    if uid.map(|o| String::from_utf8_lossy(&o.stdout).trim() != "0") != Some(false) {
        common::skip("SKIPPED: needs root for loop devices and mount");
        return None;
    }
    let dir = tempfile::tempdir().unwrap();
    let tree = dir.path().join("tree");
    make_tree(&tree);
    let jimg = dir.path().join("jdev.live");
    let fimg = dir.path().join("fs.live");
    // The kernel wants at least 1024 log blocks: 8 MiB of 4 KiB blocks.
    mke2fs(t, &["-O", "journal_dev", "-b", "4096"], &jimg, "8M");
    let Some(jloop) = Loop::attach(&jimg) else {
        common::skip("SKIPPED: losetup failed");
        return None;
    };
    let jarg = format!("device={}", jloop.0);
    let tree_s = tree.to_str().unwrap();
    mke2fs(
        t,
        &["-t", "ext4", "-b", "4096", "-J", &jarg, "-d", tree_s],
        &fimg,
        "32M",
    );
    let mnt = dir.path().join("mnt");
    std::fs::create_dir(&mnt).unwrap();
    let opt = format!("loop,journal_path={}", jloop.0);
    if !ok(Command::new("mount")
        .args(["-t", "ext4", "-o", &opt])
        .arg(&fimg)
        .arg(&mnt))
    {
        common::skip(&format!("SKIPPED: mount -o {opt} failed"));
        return None;
    }
    let m = Mount(mnt.clone());
    for i in 0..30 {
        std::fs::write(
            mnt.join(format!("new{i}")),
            format!("file {i}\n").repeat(i + 1),
        )
        .unwrap();
    }
    std::fs::create_dir(mnt.join("newdir")).unwrap();
    std::fs::write(mnt.join("newdir/big"), vec![7u8; 200_000]).unwrap();
    // syncfs commits the journal without checkpointing it.
    assert!(ok(Command::new("sync").arg("-f").arg(mnt.join("new0"))));
    let fs = dir.path().join("fs.img");
    let jdev = dir.path().join("jdev.img");
    std::fs::copy(&fimg, &fs).unwrap();
    std::fs::copy(&jimg, &jdev).unwrap();
    drop(m);
    drop(jloop);
    let out = Command::new("dumpe2fs")
        .arg("-h")
        .arg(&fs)
        .output()
        .unwrap();
    if !String::from_utf8_lossy(&out.stdout).contains("needs_recovery") {
        common::skip("SKIPPED: the copied file system does not need recovery");
        return None;
    }
    Some(Pair { dir, fs, jdev })
}

fn copy_pair(p: &Pair, tag: &str) -> (PathBuf, PathBuf) {
    let fs = p.dir.path().join(format!("fs.{tag}"));
    let jd = p.dir.path().join(format!("jdev.{tag}"));
    std::fs::copy(&p.fs, &fs).unwrap();
    std::fs::copy(&p.jdev, &jd).unwrap();
    (fs, jd)
}

fn e2fsck(t: &Tools, flags: &str, jdev: &Path, fs: &Path) -> i32 {
    Command::new(&t.e2fsck)
        .arg(flags)
        .arg("-j")
        .arg(jdev)
        .arg(fs)
        .output()
        .unwrap()
        .status
        .code()
        .unwrap_or(-1)
}

/// The tree, dumped with debugfs `rdump`.
fn dump(t: &Tools, fs: &Path, out: &Path) {
    std::fs::create_dir_all(out).unwrap();
    let st = Command::new(&t.debugfs)
        .arg("-R")
        .arg(format!("rdump / {}", out.display()))
        .arg(fs)
        .output()
        .unwrap();
    assert!(st.status.success());
}

fn same_tree(a: &Path, b: &Path) {
    let st = Command::new("diff")
        .args(["-r", "--no-dereference"])
        .arg(a)
        .arg(b)
        .output()
        .unwrap();
    assert!(
        st.status.success(),
        "trees differ:\n{}{}",
        String::from_utf8_lossy(&st.stdout),
        String::from_utf8_lossy(&st.stderr)
    );
}

#[test]
fn replay_external_journal_like_e2fsck() {
    let Some(t) = tools() else { return };
    let Some(p) = recovering_pair(&t) else {
        return;
    };
    let fs_before = read_all(&p.fs);
    let j_before = read_all(&p.jdev);

    // Without -j: a clear fatal message, nothing written.
    let (fs, jd) = copy_pair(&p, "noj");
    let run = ffsck(&["-fn".as_ref(), fs.as_os_str()]);
    assert_eq!(run.code(), 12, "{}{}", run.stdout, run.stderr);
    assert!(run.stdout.contains("-j"), "{}", run.stdout);

    // -n with -j: replayed in memory only; neither device changes.
    let run = ffsck(&[
        "-fn".as_ref(),
        "-j".as_ref(),
        jd.as_os_str(),
        fs.as_os_str(),
    ]);
    assert!(run.code() & !4 == 0, "{}{}", run.stdout, run.stderr);
    assert!(run.stdout.contains("Recovering journal"), "{}", run.stdout);
    assert_same_bytes(&fs_before, &read_all(&fs), "file system under -n");
    assert_same_bytes(&j_before, &read_all(&jd), "journal device under -n");

    // -y: same tree and the same journal device as e2fsck -fy -j.
    let (ffs, fjd) = copy_pair(&p, "ff");
    let (efs, ejd) = copy_pair(&p, "e2");
    let run = ffsck(&[
        "-fy".as_ref(),
        "-j".as_ref(),
        fjd.as_os_str(),
        ffs.as_os_str(),
    ]);
    assert!(run.code() <= 1, "{}{}", run.stdout, run.stderr);
    let e2 = e2fsck(&t, "-fy", &ejd, &efs);
    assert!(e2 <= 1, "e2fsck -fy exited {e2}");
    assert_eq!(
        e2fsck(&t, "-fn", &fjd, &ffs),
        0,
        "e2fsck -fn -j after ffsck"
    );
    let (a, b) = (p.dir.path().join("tree.ff"), p.dir.path().join("tree.e2"));
    dump(&t, &ffs, &a);
    dump(&t, &efs, &b);
    same_tree(&a, &b);
    assert!(a.join("newdir/big").is_file(), "replayed file missing");
    assert_same_bytes(&read_all(&ejd), &read_all(&fjd), "journal device after -y");
    assert_ne!(read_all(&fjd), j_before, "journal device was not reset");
}

#[test]
fn hostile_external_journal() {
    let Some(t) = tools() else { return };
    let Some(p) = recovering_pair(&t) else {
        return;
    };
    let fs_before = read_all(&p.fs);

    // A journal device of another file system: UUID mismatch, fatal, nothing written.
    let other = p.dir.path().join("other.jdev");
    mke2fs(&t, &["-O", "journal_dev", "-b", "4096"], &other, "8M");
    let other_before = read_all(&other);
    for flag in ["-fn", "-fy"] {
        let (fs, _) = copy_pair(&p, "uuid");
        let run = ffsck(&[
            flag.as_ref(),
            "-j".as_ref(),
            other.as_os_str(),
            fs.as_os_str(),
        ]);
        assert!(run.code() & 8 != 0, "{}{}", run.stdout, run.stderr);
        assert!(run.stdout.contains("UUID"), "{}", run.stdout);
        assert_same_bytes(&fs_before, &read_all(&fs), "file system, wrong UUID");
        assert_same_bytes(&other_before, &read_all(&other), "wrong journal device");
    }

    // Truncated journal devices and garbage over the journal superblock or the log.
    let full = read_all(&p.jdev);
    let mut cases: Vec<Vec<u8>> = [0usize, 500, 2048, 6000, 8192, 100_000, full.len() / 2]
        .iter()
        .map(|&n| full[..n.min(full.len())].to_vec())
        .collect();
    let mut rng = Rng::new(7);
    for _ in 0..6 {
        let mut v = full.clone();
        let at = 4096 + rng.below(64 * 4096) as usize;
        let bytes = rng.bytes(512);
        v[at..at + 512].copy_from_slice(&bytes);
        cases.push(v);
    }
    for (i, data) in cases.iter().enumerate() {
        let jd = p.dir.path().join(format!("hostile{i}.jdev"));
        std::fs::write(&jd, data).unwrap();
        let (fs, _) = copy_pair(&p, "hostile");
        let run = ffsck(&[
            "-fn".as_ref(),
            "-j".as_ref(),
            jd.as_os_str(),
            fs.as_os_str(),
        ]);
        assert_same_bytes(&fs_before, &read_all(&fs), "file system under -n");
        if i < 7 {
            assert_eq!(run.code(), 12, "case {i}: {}{}", run.stdout, run.stderr);
        }
        let run = ffsck(&[
            "-fy".as_ref(),
            "-j".as_ref(),
            jd.as_os_str(),
            fs.as_os_str(),
        ]);
        let _ = run.code();
    }
}
