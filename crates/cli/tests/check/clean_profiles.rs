//! No false positives: freshly made file systems in many feature profiles must check clean
//! with `ffsck -fn` (exit 0, no findings), and with `e2fsck -fn` too (else the profile itself
//! is a test-setup error).

use crate::common;

fn clean(fs_type: &str, args: &[&str], size: &str) {
    let Some(t) = common::tools() else { return };
    let img = common::mkfs(&t, fs_type, args, size);
    let (e2_code, e2_out) = common::e2fsck_n(&t, &img.path);
    assert_eq!(
        e2_code, 0,
        "test setup: e2fsck rejects profile -t {fs_type} {args:?} {size}:\n{e2_out}"
    );
    let c = common::check_n(&img.path, 1);
    assert_eq!(
        c.code(),
        0,
        "ffsck false positive on -t {fs_type} {args:?} {size}:\n{}\nstdout:\n{}",
        c.describe(),
        c.run.stdout
    );
    assert!(
        c.findings().is_empty(),
        "ffsck reported findings on a clean -t {fs_type} {args:?}:\n{}",
        c.describe()
    );
    assert!(
        c.json["fatal"].is_null(),
        "fatal on a clean image: {}",
        c.json["fatal"]
    );
    // The tree's 9 directories + root + lost+found; 2 symlinks (the summary layout may nest
    // the per-type counts under "counts").
    let s = &c.json["summary"];
    let count = |k: &str| {
        s.get(k)
            .or_else(|| s.get("counts").and_then(|x| x.get(k)))
            .and_then(|v| v.as_u64())
    };
    assert_eq!(count("dirs"), Some(11), "directory count in summary: {s}");
    assert_eq!(count("symlinks"), Some(2), "symlink count in summary: {s}");
}

#[test]
fn ext2_1k() {
    clean("ext2", &["-b", "1024"], "16M");
}

#[test]
fn ext3() {
    clean("ext3", &[], "16M");
}

#[test]
fn ext4_4k() {
    clean("ext4", &["-b", "4096"], "16M");
}

#[test]
fn ext4_1k() {
    clean("ext4", &["-b", "1024"], "16M");
}

#[test]
fn ext4_inode_128() {
    clean("ext4", &["-I", "128"], "16M");
}

#[test]
fn ext4_inode_1024() {
    clean("ext4", &["-I", "1024"], "16M");
}

#[test]
fn ext4_no_metadata_csum() {
    clean("ext4", &["-O", "^metadata_csum"], "16M");
}

#[test]
fn ext4_uninit_bg() {
    clean("ext4", &["-O", "^metadata_csum,uninit_bg"], "16M");
}

#[test]
fn ext4_inline_data() {
    clean("ext4", &["-O", "inline_data"], "16M");
}

#[test]
fn ext4_no_flex_bg() {
    clean("ext4", &["-O", "^flex_bg"], "16M");
}

#[test]
fn ext4_bigalloc() {
    clean(
        "ext4",
        &["-b", "4096", "-O", "bigalloc", "-C", "65536"],
        "64M",
    );
}

#[test]
fn ext4_64bit_csum_seed() {
    clean("ext4", &["-O", "64bit,metadata_csum_seed"], "16M");
}

#[test]
fn ext4_meta_bg() {
    clean("ext4", &["-O", "meta_bg,^resize_inode"], "16M");
}

#[test]
fn ext4_no_journal() {
    clean("ext4", &["-O", "^has_journal"], "16M");
}

#[test]
fn ext4_casefold() {
    clean("ext4", &["-O", "casefold"], "16M");
}

#[test]
fn ext2_4k_no_dir_index() {
    clean("ext2", &["-b", "4096", "-O", "^dir_index"], "16M");
}

/// 128-byte descriptors: their checksums cover all 128 bytes (the tail past the 64 ffsck
/// holds is zero), with metadata_csum and with uninit_bg.
#[test]
fn ext4_desc_size_128() {
    clean("ext4", &["-E", "desc_size=128"], "32M");
    clean(
        "ext4",
        &["-O", "^metadata_csum,uninit_bg", "-E", "desc_size=128"],
        "32M",
    );
}
