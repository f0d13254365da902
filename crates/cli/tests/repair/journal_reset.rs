//! A corrupt journal superblock (bad checksum, or a bad field such as the block size): under
//! `-n` ffsck reports it and writes nothing; under `-y` it resets the journal superblock as
//! e2fsck does, after which `e2fsck -fn` passes and `dumpe2fs -h` matches e2fsck's own repair
//! (its journal fields, features and state; not the random journal sequence).

use crate::common;

use std::path::Path;
use std::process::Command;

fn dumpe2fs_h(img: &Path) -> String {
    let o = Command::new("dumpe2fs")
        .arg("-h")
        .arg(img)
        .output()
        .unwrap();
    String::from_utf8_lossy(&o.stdout)
        .lines()
        .filter(|l| {
            let journal = ["Journal", "Total journal", "Max transaction", "Fast commit"]
                .iter()
                .any(|p| l.starts_with(p));
            let fs = l.starts_with("Filesystem features") || l.starts_with("Filesystem state");
            (journal || fs) && !l.starts_with("Journal sequence") && !l.contains("checksum:")
        })
        .collect::<Vec<_>>()
        .join("\n")
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

/// Corrupt the journal superblock at byte `field` (its offset in the journal superblock).
fn corrupted(field: u64, bytes: &[u8]) -> Option<common::Image> {
    let t = common::tools()?;
    let img = common::mkfs(&t, "ext4", &["-b", "1024", "-O", "metadata_csum"], "8M");
    let jblk = common::bmap(&t, &img.path, "<8>", 0);
    common::patch(&img.path, jblk * 1024 + field, bytes);
    Some(img)
}

fn reset_like_e2fsck(field: u64, bytes: &[u8]) {
    let Some(img) = corrupted(field, bytes) else {
        return;
    };
    let before = common::read_all(&img.path);
    let run = common::ffsck(&["-fn".as_ref(), img.path.as_os_str()]);
    assert_ne!(
        run.code(),
        0,
        "-n must report the corrupt journal:\n{}",
        run.stdout
    );
    assert!(
        run.stdout.contains("journal superblock is corrupt"),
        "{}",
        run.stdout
    );
    common::assert_same_bytes(&before, &common::read_all(&img.path), "-n");

    let theirs = img.aux("theirs.img");
    std::fs::copy(&img.path, &theirs).unwrap();
    assert_eq!(e2fsck(&["-fy"], &theirs), 1);
    let run = common::ffsck(&["-fy".as_ref(), img.path.as_os_str()]);
    assert_eq!(run.code(), 1, "{}", run.stdout);
    assert!(
        run.stdout
            .contains("journal superblock is corrupt.\nFix? yes"),
        "{}",
        run.stdout
    );
    assert_eq!(e2fsck(&["-fn"], &img.path), 0, "e2fsck -fn after ffsck -fy");
    assert_eq!(dumpe2fs_h(&img.path), dumpe2fs_h(&theirs));
    // The reset journal is usable: a second run has nothing to do.
    let run = common::ffsck(&["-fy".as_ref(), img.path.as_os_str()]);
    assert_eq!(run.code(), 0, "{}", run.stdout);
}

#[test]
fn journal_longer_than_its_inode_is_reset() {
    // s_maxlen (0x10): far more blocks than the journal inode has.
    reset_like_e2fsck(0x10, &0x00FF_FFFFu32.to_be_bytes());
}

#[test]
fn bad_journal_block_size_is_reset() {
    // s_blocksize (0x0C): 512 is never a valid journal block size.
    reset_like_e2fsck(0x0C, &512u32.to_be_bytes());
}
