//! Repair of damaged internal journals: one `ffsck -fy` leaves a file system e2fsck finds
//! clean, as `e2fsck -fy` would.

use crate::common;

use std::ffi::OsStr;

/// A version-2 journal superblock naming several users while the file system has no journal
/// UUID (a local journal cannot be shared): e2fsck clears the fields beyond the version-1
/// superblock, and so must one ffsck repair, on disk.
#[test]
fn local_journal_with_many_users_is_cleared() {
    let Some(t) = common::tools() else { return };
    for fs_type in ["ext3", "ext4"] {
        let img = common::mkfs(&t, fs_type, &["-b", "1024", "-J", "size=1"], "8M");
        let blk = common::bmap(&t, &img.path, "<8>", 0);
        // s_nr_users (big-endian) at offset 0x40 of the journal superblock.
        common::patch(&img.path, blk * 1024 + 0x40, &0x1234_5678u32.to_be_bytes());
        // e2fsck -n states the problem without a question, and stops.
        let (before, out) = common::e2fsck_n(&t, &img.path);
        assert_ne!(
            before, 0,
            "{fs_type}: test setup: e2fsck must see the damage\n{out}"
        );
        let run = common::ffsck(&[OsStr::new("-fy"), img.path.as_os_str()]);
        assert_eq!(
            run.code(),
            1,
            "{fs_type}: ffsck -fy\n{}{}",
            run.stdout,
            run.stderr
        );
        let (after, out) = common::e2fsck_n(&t, &img.path);
        assert_eq!(after, 0, "{fs_type}: e2fsck -fn after the repair\n{out}");
        let again = common::ffsck(&[OsStr::new("-fn"), img.path.as_os_str()]);
        assert_eq!(
            again.code(),
            0,
            "{fs_type}: second ffsck -fn\n{}",
            again.stdout
        );
        assert_eq!(
            common::read_u32(&img.path, blk * 1024 + 0x40),
            0,
            "{fs_type}: s_nr_users must be cleared on disk"
        );
    }
}

/// An unusable journal inode is dropped, and once the rest is clean a new journal is made, as
/// e2fsck does: the same size and, on these fresh file systems, the same blocks as e2fsck's.
#[test]
fn an_invalid_journal_inode_is_dropped_and_recreated() {
    let Some(t) = common::tools() else { return };
    // (type, mkfs options, size): block-mapped with indirect blocks; extents on 4 KiB blocks
    // with flex_bg, where the middle groups start out uninitialised.
    let cases: [(&str, &[&str], &str); 4] = [
        ("ext3", &["-b", "1024"], "16M"),
        ("ext4", &["-b", "1024"], "16M"),
        ("ext4", &["-b", "4096"], "600M"),
        // Bigalloc: the journal takes whole clusters, where e2fsck puts it.
        (
            "ext4",
            &["-b", "4096", "-O", "bigalloc", "-C", "65536"],
            "64M",
        ),
    ];
    for (fstype, opts, size) in cases {
        let img = common::mkfs(&t, fstype, opts, size);
        // The journal inode loses its mapping, and the superblock its backup of it.
        common::debugfs_script(
            &t,
            &img,
            &[
                "sif <8> block[0] 0",
                "sif <8> block[1] 0",
                "ssv jnl_backup_type 0",
            ],
        );
        let copy = img.path.with_extension("e2fsck");
        std::fs::copy(&img.path, &copy).unwrap();
        let run = common::ffsck(&[OsStr::new("-fn"), img.path.as_os_str()]);
        let want = "Superblock has an invalid journal (inode 8)";
        assert!(
            run.stdout.contains(want),
            "{fstype}: {want}\n{}",
            run.stdout
        );
        let fixed = common::ffsck(&[OsStr::new("-fy"), img.path.as_os_str()]);
        for want in [
            "*** journal has been deleted ***",
            "Recreate journal? yes",
            "*** journal has been regenerated ***",
        ] {
            assert!(
                fixed.stdout.contains(want),
                "{fstype} {size}: {want}\n{}",
                fixed.stdout
            );
        }
        assert_eq!(fixed.code(), 1, "{fstype} {size}: {}", fixed.stdout);
        let (after, out) = common::e2fsck_n(&t, &img.path);
        assert_eq!(
            after, 0,
            "{fstype} {size}: e2fsck -fn after the repair\n{out}"
        );
        let again = common::ffsck(&[OsStr::new("-fn"), img.path.as_os_str()]);
        assert_eq!(
            again.code(),
            0,
            "{fstype} {size}: second ffsck -fn\n{}",
            again.stdout
        );
        // e2fsck's repair of the same damage, for comparison.
        let e2 = std::process::Command::new(&t.e2fsck)
            .args(["-fy"])
            .arg(&copy)
            .output()
            .unwrap();
        assert_eq!(e2.status.code(), Some(1), "{fstype} {size}: e2fsck -fy");
        let header = |p: &std::path::Path| {
            let o = std::process::Command::new(t.e2fsck.with_file_name("dumpe2fs"))
                .arg("-h")
                .arg(p)
                .output()
                .unwrap();
            String::from_utf8_lossy(&o.stdout).into_owned()
        };
        // (Free block counts may differ: e2fsck also re-indexes big directories when it writes.)
        let (ours, theirs) = (header(&img.path), header(&copy));
        let field = |s: &str, key: &str| {
            s.lines()
                .find(|l| l.starts_with(key))
                .map(str::to_owned)
                .unwrap_or_default()
        };
        let blocks = |p: &std::path::Path| {
            // The map only ("BLOCKS:" or "EXTENTS:"): the time stamps are the runs' own.
            let s = common::debugfs_r(&t, p, "stat <8>");
            let at = s.find("BLOCKS:").or_else(|| s.find("EXTENTS:"));
            assert!(at.is_some(), "{fstype} {size}: no map in\n{s}");
            s[at.unwrap_or(0)..].to_owned()
        };
        assert_eq!(
            blocks(&img.path),
            blocks(&copy),
            "{fstype} {size}: journal blocks"
        );
        for key in [
            "Filesystem features:",
            "Total journal blocks:",
            "Journal features:",
            "Journal backup:",
        ] {
            let (a, b) = (field(&ours, key), field(&theirs, key));
            assert!(!a.is_empty(), "{fstype} {size}: no {key}\n{ours}");
            assert_eq!(a, b, "{fstype} {size}: ffsck vs e2fsck");
        }
        let _ = std::fs::remove_file(&copy);
    }
}

/// A journal holding a committed transaction while `needs_recovery` is clear: e2fsck asks
/// "Run journal anyway?", and `-y` replays it. So must ffsck: the block lands where the
/// transaction put it, the log is emptied, and the file system is clean.
#[test]
fn a_journal_with_data_but_no_recovery_flag_is_run_anyway() {
    let Some(t) = common::tools() else { return };
    let img = common::mkfs(&t, "ext4", &["-b", "1024"], "16M");
    let data: Vec<u8> = (0..1024u32).map(|i| (i * 7 + 3) as u8).collect();
    let src = img.aux("block.bin");
    std::fs::write(&src, &data).unwrap();
    // debugfs writes a real transaction for block 1000 (a free block) and sets
    // needs_recovery; the flag is then cleared.
    common::debugfs_script(
        &t,
        &img,
        &["jo", &format!("jw -b 1000 {}", src.display()), "jc"],
    );
    common::debugfs_script(&t, &img, &["feature -needs_recovery"]);
    let before = common::read_all(&img.path);
    assert_ne!(
        &before[1000 * 1024..1001 * 1024],
        &data[..],
        "test setup: the block is only in the journal"
    );
    let n = common::ffsck(&[OsStr::new("-fn"), img.path.as_os_str()]);
    assert!(
        n.stdout.contains(
            "Superblock needs_recovery flag is clear, but journal has data.\nRun journal anyway? no"
        ),
        "{}",
        n.stdout
    );
    common::assert_same_bytes(&before, &common::read_all(&img.path), "ffsck -fn");
    let run = common::ffsck(&[OsStr::new("-fy"), img.path.as_os_str()]);
    assert_eq!(run.code(), 1, "{}\n{}", run.stdout, run.stderr);
    assert!(
        run.stdout.contains("Run journal anyway? yes"),
        "{}",
        run.stdout
    );
    let after = common::read_all(&img.path);
    assert_eq!(&after[1000 * 1024..1001 * 1024], &data[..], "not replayed");
    let (code, out) = common::e2fsck_n(&t, &img.path);
    assert_eq!(code, 0, "{out}");
    let again = common::ffsck(&[OsStr::new("-fn"), img.path.as_os_str()]);
    assert_eq!(again.code(), 0, "{}", again.stdout);
}

/// A clean file system whose journal needs recovery, under each mode, against e2fsck 1.47 on
/// a copy of the same image (run as `fs.img` from two directories, so the names agree): a
/// repair recovers the journal first ("fs.img: recovering journal"), then decides skip or
/// check on the recovered file system, and the replay alone is no change for the exit code
/// (0); `-n` decides on the file system as it is, with e2fsck's warning, and writes nothing.
#[test]
fn a_journal_needing_recovery_is_recovered_first_as_e2fsck_does() {
    let Some(t) = common::tools() else { return };
    // A small tree of its own (e2fsck -fy would index the shared tree's large directories).
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("fs.img");
    let img = common::Image { dir, path };
    let tree = img.aux("tree");
    std::fs::create_dir_all(tree.join("d")).unwrap();
    std::fs::write(tree.join("a"), "hi\n").unwrap();
    std::fs::write(tree.join("d/b"), common::Rng::new(2).bytes(50_000)).unwrap();
    let made = std::process::Command::new(&t.mke2fs)
        .args(["-q", "-F", "-t", "ext4", "-b", "1024", "-d"])
        .arg(&tree)
        .arg(&img.path)
        .arg("16M")
        .env("MKE2FS_SYNC", "0")
        .status()
        .unwrap();
    assert!(made.success(), "test setup: mke2fs");
    let data = common::Rng::new(20).bytes(1024);
    let src = img.aux("block.bin");
    std::fs::write(&src, &data).unwrap();
    common::debugfs_script(
        &t,
        &img,
        &["jo", &format!("jw -b 1000 {}", src.display()), "jc"],
    );
    let original = common::read_all(&img.path);
    assert_ne!(
        &original[1000 * 1024..1001 * 1024],
        &data[..],
        "test setup: the block is only in the journal"
    );
    let run_in = |dir: &std::path::Path, prog: &std::path::Path, mode: &str| {
        let out = std::process::Command::new(prog)
            .arg(mode)
            .arg("fs.img")
            .current_dir(dir)
            .env("E2FSCK_CONFIG", "/dev/null")
            .output()
            .unwrap();
        (
            out.status.code().unwrap_or(-1),
            String::from_utf8_lossy(&out.stdout).into_owned(),
        )
    };
    let root = img.dir.path();
    for mode in ["-p", "-y", "-fy", "-fp", "-n", "-fn"] {
        let (e_dir, f_dir) = (root.join("e2fsck"), root.join("ffsck"));
        for d in [&e_dir, &f_dir] {
            std::fs::create_dir_all(d).unwrap();
            std::fs::write(d.join("fs.img"), &original).unwrap();
        }
        let (e_code, e_out) = run_in(&e_dir, &t.e2fsck, mode);
        let (f_code, f_out) = run_in(&f_dir, &common::ffsck_bin(), mode);
        let both = format!("e2fsck {mode}:\n{e_out}\nffsck {mode}:\n{f_out}");
        assert_eq!(e_code, 0, "test setup: e2fsck's exit code\n{both}");
        assert_eq!(f_code, e_code, "exit codes differ\n{both}");
        let after = common::read_all(&f_dir.join("fs.img"));
        if mode.contains('n') {
            common::assert_same_bytes(&original, &after, &format!("ffsck {mode}"));
            if mode == "-n" {
                assert_eq!(f_out, e_out, "outputs differ\n{both}");
            } else {
                // (-fn checks the journal replayed in memory, where e2fsck skips it.)
                assert_eq!(f_out.lines().last(), e_out.lines().last(), "{both}");
            }
            continue;
        }
        assert_eq!(f_out, e_out, "outputs differ\n{both}");
        assert!(f_out.starts_with("fs.img: recovering journal\n"), "{both}");
        assert_eq!(
            &after[1000 * 1024..1001 * 1024],
            &data[..],
            "not replayed\n{both}"
        );
        let dump = common::debugfs_r(&t, &f_dir.join("fs.img"), "stats");
        assert!(
            !dump.contains("needs_recovery"),
            "{mode}: still flagged\n{dump}"
        );
        let (code, out) = common::e2fsck_n(&t, &f_dir.join("fs.img"));
        assert_eq!(code, 0, "e2fsck -fn after ffsck {mode}\n{out}");
    }
}

/// A zeroed journal inode whose map the superblock still backs up (`s_jnl_blocks`): `-n`
/// says the journal is not a regular file, as e2fsck does; `-y` writes the backup into the
/// inode (as e2fsck does when it loads the journal), so pass 1 counts the journal's blocks
/// rather than freeing them, and the result keeps its journal.
#[test]
fn a_zeroed_journal_inode_is_restored_from_the_superblock_backup() {
    let Some(t) = common::tools() else { return };
    let img = common::mkfs(&t, "ext3", &["-b", "4096"], "16M");
    let free_blocks =
        |img: &common::Image| common::debugfs_number(&t, &img.path, "stats", "Free blocks:");
    let free_before = free_blocks(&img);
    common::debugfs_w(&t, &img.path, "clri <8>");
    let check = common::ffsck(&[OsStr::new("-fn"), img.path.as_os_str()]);
    assert!(
        check
            .stdout
            .contains("Journal is not regular file.  Fix? no"),
        "{}",
        check.stdout
    );
    let run = common::assert_one_run_repairs(&t, &img, "zeroed journal inode", &[1]);
    assert_eq!(free_blocks(&img), free_before, "{}", run.stdout);
    let stat = common::debugfs_r(&t, &img.path, "stat <8>");
    assert!(stat.contains("Type: regular"), "{stat}");
}
