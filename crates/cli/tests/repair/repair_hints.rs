//! What a repair adds to a superblock without asking, as e2fsck does: a UUID for a file system
//! without one, the journal inode's backup, the dirhash hint; and the descriptor fixes e2fsck
//! makes without counting the file system changed. None of them is looked for under `-n`, and
//! none makes the exit code 1 by itself: the text and the exit code are e2fsck's.

use crate::common;

use std::ffi::OsStr;
use std::process::Command;

/// `e2fsck -fy IMAGE` on a copy of `img`: (exit code, output).
fn e2fsck_y_copy(t: &common::Tools, img: &common::Image) -> (i32, String) {
    let copy = img.aux("e2fsck-copy.img");
    std::fs::copy(&img.path, &copy).expect("copying the image");
    let mut cmd = Command::new(&t.e2fsck);
    cmd.arg("-fy").arg(&copy).env("E2FSCK_CONFIG", "/dev/null");
    let run = common::run_with_timeout(cmd, std::time::Duration::from_secs(60))
        .expect("e2fsck timed out");
    (run.code(), format!("{}{}", run.stdout, run.stderr))
}

/// `-fn` says nothing and changes nothing; `-fy` prints `lines` (each followed by a blank
/// line), says "FILE SYSTEM WAS MODIFIED" when `modified`, and exits as e2fsck does on a copy.
fn assert_like_e2fsck(t: &common::Tools, img: &common::Image, lines: &[&str], modified: bool) {
    let before = common::read_all(&img.path);
    let n = common::ffsck(&[OsStr::new("-fn"), img.path.as_os_str()]);
    assert_eq!(n.code(), 0, "{}", n.stdout);
    for l in lines {
        assert!(!n.stdout.contains(l), "-n must not look: {l}\n{}", n.stdout);
    }
    common::assert_same_bytes(&before, &common::read_all(&img.path), "-fn");
    let (e2_code, e2_out) = e2fsck_y_copy(t, img);
    let y = common::ffsck(&[OsStr::new("-fy"), img.path.as_os_str()]);
    for l in lines {
        let want = format!("{l}\n\n");
        assert!(y.stdout.contains(&want), "{l}\n{}", y.stdout);
        assert!(e2_out.contains(&want), "e2fsck: {l}\n{e2_out}");
    }
    assert_eq!(y.code(), e2_code, "ffsck:\n{}\ne2fsck:\n{e2_out}", y.stdout);
    assert_eq!(y.code(), 0, "{}", y.stdout);
    let says_modified = |s: &str| s.contains("***** FILE SYSTEM WAS MODIFIED *****");
    assert_eq!(says_modified(&y.stdout), modified, "{}", y.stdout);
    assert_eq!(says_modified(&e2_out), modified, "e2fsck:\n{e2_out}");
    // Made once: the next run has nothing to add, and e2fsck finds the result clean.
    let again = common::ffsck(&[OsStr::new("-fy"), img.path.as_os_str()]);
    assert_eq!(again.code(), 0, "{}", again.stdout);
    for l in lines {
        assert!(!again.stdout.contains(l), "{l} again\n{}", again.stdout);
    }
    let (code, out) = common::e2fsck_n(t, &img.path);
    assert_eq!(code, 0, "{out}");
}

#[test]
fn a_file_system_without_a_uuid_gets_one() {
    let Some(t) = common::tools() else { return };
    // (Without dir_index: e2fsck would index the tree's large directories, a change of its
    // own that ffsck does not make.)
    let img = common::mkfs(&t, "ext2", &["-b", "1024", "-O", "^dir_index"], "8M");
    common::debugfs_w(&t, &img.path, "ssv uuid null");
    let none = |img: &common::Image| {
        common::debugfs_r(&t, &img.path, "stats")
            .lines()
            .any(|l| l.starts_with("Filesystem UUID:") && l.contains("<none>"))
    };
    assert!(none(&img), "test setup: the UUID is not null");
    assert_like_e2fsck(
        &t,
        &img,
        &["Filesystem did not have a UUID; generating one."],
        false,
    );
    assert!(!none(&img), "the repair left the UUID null");
}

#[test]
fn the_journal_backup_and_the_dirhash_hint_are_added() {
    let Some(t) = common::tools() else { return };
    let img = common::mkfs(&t, "ext4", &["-b", "1024"], "8M");
    common::debugfs_w(&t, &img.path, "ssv jnl_backup_type 0");
    common::debugfs_w(&t, &img.path, "ssv flags 0");
    assert_like_e2fsck(
        &t,
        &img,
        &[
            "Backing up journal inode block information.",
            "Adding dirhash hint to filesystem.",
        ],
        true,
    );
    let stats = common::debugfs_r(&t, &img.path, "stats");
    assert!(stats.contains("signed_directory_hash"), "{stats}");
    assert!(
        stats.contains("Journal backup:           inode blocks"),
        "{stats}"
    );
}

#[test]
fn a_descriptor_checksum_alone_is_fixed_without_a_change_counted() {
    let Some(t) = common::tools() else { return };
    let img = common::mkfs(
        &t,
        "ext4",
        &["-b", "1024", "-O", "^metadata_csum,uninit_bg,^dir_index"],
        "8M",
    );
    common::debugfs_w(&t, &img.path, "set_bg 0 checksum 0xffff");
    let n = common::ffsck(&[OsStr::new("-fn"), img.path.as_os_str()]);
    assert!(
        n.stdout
            .contains("Group descriptor 0 checksum is 0xffff, should be"),
        "test setup: {}",
        n.stdout
    );
    let (e2_code, e2_out) = e2fsck_y_copy(&t, &img);
    let y = common::ffsck(&[OsStr::new("-fy"), img.path.as_os_str()]);
    assert!(
        y.stdout
            .contains("One or more block group descriptor checksums are invalid.  Fix? yes"),
        "{}",
        y.stdout
    );
    assert_eq!(y.code(), e2_code, "ffsck:\n{}\ne2fsck:\n{e2_out}", y.stdout);
    assert_eq!(y.code(), 0, "{}", y.stdout);
    assert!(
        !y.stdout.contains("FILE SYSTEM WAS MODIFIED"),
        "{}",
        y.stdout
    );
    assert!(!e2_out.contains("FILE SYSTEM WAS MODIFIED"), "{e2_out}");
    let (code, out) = common::e2fsck_n(&t, &img.path);
    assert_eq!(code, 0, "{out}");
}
