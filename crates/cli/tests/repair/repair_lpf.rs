//! Repair of `/lost+found` itself: one `ffsck -fy` creates it when it is missing, replaces a
//! `lost+found` that is not a directory, and expands a full one, and the files that needed it
//! are reconnected in the same run with their contents intact.

use crate::common;

use common::{Image, Tools};

/// The file `/lost+found/#INO` has the contents `tree/want` had.
fn assert_reconnected(t: &Tools, img: &Image, ino: u64, want: &str) {
    let got = common::dump(t, img, &format!("/lost+found/#{ino}"));
    assert!(
        got == common::tree_file(img, want),
        "#{ino}: contents of /{want} not kept"
    );
}

#[test]
fn a_missing_lost_and_found_is_created_and_used() {
    let Some(t) = common::tools() else { return };
    for fs_type in ["ext4", "ext2"] {
        let img = common::mkfs(&t, fs_type, &[], "16M");
        let ino = common::inode_of(&t, &img.path, "/a/f6");
        common::debugfs_w(&t, &img.path, "rmdir /lost+found");
        common::debugfs_w(&t, &img.path, "unlink /a/f6");
        let out = common::assert_one_run_repairs(&t, &img, fs_type, &[1]).stdout;
        assert!(out.contains("/lost+found not found"), "{out}");
        let st = common::debugfs_r(&t, &img.path, "stat /lost+found");
        assert!(
            st.contains("Type: directory") && st.contains("Mode:  0700"),
            "{st}"
        );
        assert_reconnected(&t, &img, ino, "a/f6");
    }
}

#[test]
fn a_lost_and_found_that_is_a_file_is_replaced() {
    let Some(t) = common::tools() else { return };
    for fs_type in ["ext4", "ext2"] {
        let img = common::mkfs(&t, fs_type, &[], "16M");
        let f1 = common::inode_of(&t, &img.path, "/a/f1");
        let f6 = common::inode_of(&t, &img.path, "/a/f6");
        common::debugfs_w(&t, &img.path, "rmdir /lost+found");
        common::debugfs_w(&t, &img.path, "link /a/f1 /lost+found");
        common::debugfs_w(&t, &img.path, "sif /a/f1 links_count 2");
        common::debugfs_w(&t, &img.path, "unlink /a/f6");
        let out = common::assert_one_run_repairs(&t, &img, fs_type, &[1]).stdout;
        assert!(out.contains("is not a directory"), "{out}");
        assert_reconnected(&t, &img, f6, "a/f6");
        // The file that had the name keeps its other link and its contents.
        let st = common::debugfs_r(&t, &img.path, "stat /a/f1");
        assert!(st.contains(&format!("Inode: {f1} ")), "{st}");
        assert!(st.contains("Links: 1"), "{st}");
    }
}

#[test]
fn a_full_lost_and_found_is_expanded() {
    let Some(t) = common::tools() else { return };
    for fs_type in ["ext4", "ext2"] {
        let img = common::mkfs(&t, fs_type, &["-b", "1024"], "16M");
        let ino = common::inode_of(&t, &img.path, "/a/f6");
        // A one-block lost+found filled by four entries with long names, leaving fewer than
        // the 12 bytes an entry `#INO` needs (ext4 blocks end in a 12-byte checksum tail).
        common::debugfs_w(&t, &img.path, "rmdir /lost+found");
        common::debugfs_w(&t, &img.path, "mkdir /lost+found");
        let last = if fs_type == "ext4" { 184 } else { 192 };
        for (i, len) in [255, 255, 255, last].into_iter().enumerate() {
            let name = format!("{i}{}", "n".repeat(len - 1));
            common::debugfs_w(&t, &img.path, &format!("symlink /lost+found/{name} x"));
        }
        common::debugfs_w(&t, &img.path, "unlink /a/f6");
        let out = common::assert_one_run_repairs(&t, &img, fs_type, &[1]).stdout;
        assert!(out.contains("No room in lost+found"), "{out}");
        let st = common::debugfs_r(&t, &img.path, "stat /lost+found");
        assert!(st.contains("Size: 2048"), "{st}");
        assert_reconnected(&t, &img, ino, "a/f6");
    }
}

/// The orphan list is released: a file with no links left is cleared, an empty file with
/// links is truncated to nothing, and `s_last_orphan` is cleared; other files are untouched.
#[test]
fn the_orphan_list_is_released() {
    let Some(t) = common::tools() else { return };
    for fs_type in ["ext4", "ext2"] {
        let img = common::mkfs(&t, fs_type, &[], "16M");
        let f6 = common::inode_of(&t, &img.path, "/a/f6");
        let f7 = common::inode_of(&t, &img.path, "/a/f7");
        let f8 = common::inode_of(&t, &img.path, "/a/f8");
        // Chain: f6 -> f7 -> f8. f6 and f7 were deleted while open; f8 was truncated to 0.
        for f in ["/a/f6", "/a/f7"] {
            common::debugfs_w(&t, &img.path, &format!("unlink {f}"));
        }
        for (ino, next) in [(f6, f7), (f7, f8)] {
            common::debugfs_w(&t, &img.path, &format!("sif <{ino}> links_count 0"));
            common::debugfs_w(&t, &img.path, &format!("sif <{ino}> dtime {next}"));
        }
        common::debugfs_w(&t, &img.path, "sif /a/f8 size 0");
        common::debugfs_w(&t, &img.path, &format!("ssv last_orphan {f6}"));
        let out = common::assert_one_run_repairs(&t, &img, fs_type, &[1]).stdout;
        assert!(
            out.contains(&format!("Clearing orphaned inode {f6}")),
            "{out}"
        );
        assert!(
            out.contains(&format!("Truncating orphaned inode {f8}")),
            "{out}"
        );
        let sb = common::debugfs_r(&t, &img.path, "stats");
        assert!(
            !sb.contains("First orphan inode"),
            "s_last_orphan left set:\n{sb}"
        );
        let st = common::debugfs_r(&t, &img.path, "stat /a/f8");
        assert!(
            st.contains("Size: 0") && st.contains("Blockcount: 0"),
            "{st}"
        );
        for f in ["a/f1", "a/f5", "b/x"] {
            let out = img.aux("dumped");
            let _ = std::fs::remove_file(&out);
            common::debugfs_r(&t, &img.path, &format!("dump /{f} {}", out.display()));
            let want = std::fs::read(img.dir.path().join("tree").join(f)).unwrap();
            assert!(
                std::fs::read(&out).unwrap_or_default() == want,
                "/{f} changed"
            );
        }
    }
}

/// Pass-1 damage fixed by dropping what the inode may not have: a device's size, the
/// immutable flag of a symlink, the imagic flag without the feature.
#[test]
fn flags_and_sizes_a_file_may_not_have_are_dropped() {
    let Some(t) = common::tools() else { return };
    for fs_type in ["ext4", "ext2"] {
        let img = common::mkfs(&t, fs_type, &[], "16M");
        common::debugfs_w(&t, &img.path, "mknod pipe p");
        common::debugfs_w(&t, &img.path, "sif /pipe size 100");
        common::debugfs_w(&t, &img.path, "sif /b/short flags 0x10");
        // imagic, keeping the extents flag of an ext4 file.
        let fl = if fs_type == "ext4" {
            "0x82000"
        } else {
            "0x2000"
        };
        common::debugfs_w(&t, &img.path, &format!("sif /a/f2 flags {fl}"));
        let out = common::assert_one_run_repairs(&t, &img, fs_type, &[1]).stdout;
        assert!(out.contains("has non-zero size"), "{out}");
        assert!(out.contains("imagic"), "{out}");
        let st = common::debugfs_r(&t, &img.path, "stat /pipe");
        assert!(st.contains("Size: 0"), "{st}");
        for f in ["a/f1", "a/f2", "b/x"] {
            let out = img.aux("dumped");
            let _ = std::fs::remove_file(&out);
            common::debugfs_r(&t, &img.path, &format!("dump /{f} {}", out.display()));
            let want = std::fs::read(img.dir.path().join("tree").join(f)).unwrap();
            assert!(
                std::fs::read(&out).unwrap_or_default() == want,
                "/{f} changed"
            );
        }
    }
}

/// An orphan that still has links and a size is truncated to its size: blocks mapped past it
/// go (an extent straddling the end is shortened; indirect blocks past it are dropped),
/// `i_blocks` follows, and the data below the size is kept.
#[test]
fn an_orphan_with_a_size_is_truncated_to_it() {
    let Some(t) = common::tools() else { return };
    for fs_type in ["ext4", "ext2"] {
        let img = common::mkfs(&t, fs_type, &["-b", "1024"], "16M");
        let mut rng = common::Rng::new(7);
        let data = rng.bytes(600 * 1024);
        let src = img.aux("big-src");
        std::fs::write(&src, &data).unwrap();
        common::debugfs_w(&t, &img.path, &format!("write {} big", src.display()));
        let big = common::inode_of(&t, &img.path, "/big");
        let size = 100_000u64;
        common::debugfs_w(&t, &img.path, &format!("sif /big size {size}"));
        common::debugfs_w(&t, &img.path, &format!("ssv last_orphan {big}"));
        let out = common::assert_one_run_repairs(&t, &img, fs_type, &[1]).stdout;
        assert!(
            out.contains(&format!("Truncating orphaned inode {big}")),
            "{out}"
        );
        // 98 data blocks of 1 KiB; a block map also keeps its single indirect block.
        let blocks = if fs_type == "ext4" { 98 } else { 99 };
        let st = common::debugfs_r(&t, &img.path, "stat /big");
        assert!(
            st.contains(&format!("Size: {size}"))
                && st.contains(&format!("Blockcount: {}", blocks * 2)),
            "{st}"
        );
        let dumped = img.aux("dumped");
        let _ = std::fs::remove_file(&dumped);
        common::debugfs_r(&t, &img.path, &format!("dump /big {}", dumped.display()));
        assert!(
            std::fs::read(&dumped).unwrap_or_default() == data[..size as usize],
            "/big: data below the size not kept"
        );
    }
}

/// The orphan file (`orphan_file`): the inodes its blocks list are released as the orphan
/// list's are (a file with no links is cleared, a file with links truncated to its size), the
/// slots are zeroed and `orphan_present` is cleared.
#[test]
fn the_orphan_file_is_processed() {
    let Some(t) = common::tools() else { return };
    let img = common::mkfs(
        &t,
        "ext4",
        &["-b", "1024", "-O", "orphan_file,^metadata_csum"],
        "16M",
    );
    let mut rng = common::Rng::new(11);
    let data = rng.bytes(300 * 1024);
    let src = img.aux("big-src");
    std::fs::write(&src, &data).unwrap();
    common::debugfs_w(&t, &img.path, &format!("write {} big", src.display()));
    let big = common::inode_of(&t, &img.path, "/big");
    let f6 = common::inode_of(&t, &img.path, "/a/f6");
    common::debugfs_w(&t, &img.path, "unlink /a/f6");
    common::debugfs_w(&t, &img.path, &format!("sif <{f6}> links_count 0"));
    common::debugfs_w(&t, &img.path, "sif /big size 5000");
    common::debugfs_w(&t, &img.path, "feature orphan_present");
    let oino = common::read_u32(&img.path, 1024 + 0x280);
    assert!(oino != 0, "test setup: no orphan file");
    let blk = common::bmap(&t, &img.path, &format!("<{oino}>"), 0);
    common::patch(&img.path, blk * 1024, &(f6 as u32).to_le_bytes());
    common::patch(&img.path, blk * 1024 + 4, &(big as u32).to_le_bytes());
    let out = common::assert_one_run_repairs(&t, &img, "orphan_file", &[1]).stdout;
    assert!(
        out.contains(&format!("Clearing orphaned inode {f6}")),
        "{out}"
    );
    assert!(
        out.contains(&format!("Truncating orphaned inode {big}")),
        "{out}"
    );
    assert_eq!(
        common::read_u32(&img.path, blk * 1024),
        0,
        "slot not zeroed"
    );
    let feats = common::debugfs_r(&t, &img.path, "features");
    assert!(!feats.contains("orphan_present"), "{feats}");
    let st = common::debugfs_r(&t, &img.path, "stat /big");
    assert!(
        st.contains("Size: 5000") && st.contains("Blockcount: 10"),
        "{st}"
    );
    let dumped = img.aux("dumped");
    common::debugfs_r(&t, &img.path, &format!("dump /big {}", dumped.display()));
    assert!(
        std::fs::read(&dumped).unwrap_or_default() == data[..5000],
        "/big: data below the size not kept"
    );
    let st = common::debugfs_r(&t, &img.path, &format!("stat <{f6}>"));
    assert!(st.contains("Links: 0"), "{st}");
}

#[test]
fn a_directory_loop_is_broken_through_lost_and_found() {
    let Some(t) = common::tools() else { return };
    let img = common::mkfs(&t, "ext4", &[], "16M");
    // /a/sub is only reachable from its own child: sub → inner → sub.
    let sub = common::inode_of(&t, &img.path, "/a/sub");
    common::debugfs_w(&t, &img.path, "link /a/sub /a/sub/inner/back");
    common::debugfs_w(&t, &img.path, "unlink /a/sub");
    let out = common::assert_one_run_repairs(&t, &img, "directory loop", &[1]).stdout;
    assert!(
        out.contains(&format!("Recursively looped directory inode {sub}")),
        "{out}"
    );
    let dumped = img.aux("s1");
    common::debugfs_r(
        &t,
        &img.path,
        &format!("dump /lost+found/#{sub}/s1 {}", dumped.display()),
    );
    let want = std::fs::read(img.dir.path().join("tree/a/sub/s1")).unwrap();
    assert!(
        std::fs::read(&dumped).unwrap_or_default() == want,
        "/a/sub/s1 not kept"
    );
}

#[test]
fn an_unattached_inline_data_file_is_reconnected_not_cleared() {
    let Some(t) = common::tools() else { return };
    let img = common::mkfs(&t, "ext4", &["-O", "inline_data"], "16M");
    // `/b/x` (17 bytes, kept in the inode) and its hard link `/b/hard`: no entry is left,
    // and the file has no block, only its in-inode attribute holding the data.
    let ino = common::inode_of(&t, &img.path, "/b/x");
    let st = common::debugfs_r(&t, &img.path, "stat /b/x");
    assert!(
        st.contains("Blockcount: 0"),
        "test setup: inline /b/x\n{st}"
    );
    common::debugfs_w(&t, &img.path, "unlink /b/x");
    common::debugfs_w(&t, &img.path, "unlink /b/hard");
    let out = common::assert_one_run_repairs(&t, &img, "unlinked inline file", &[1]).stdout;
    assert!(!out.contains("zero-length"), "{out}");
    let lpf = common::debugfs_r(&t, &img.path, "ls -l /lost+found");
    assert!(lpf.contains(&format!("#{ino}")), "{out}\n{lpf}");
    // (debugfs dumps an inline file as its whole 60-byte area: compare size and start.)
    let st = common::debugfs_r(&t, &img.path, &format!("stat /lost+found/#{ino}"));
    assert!(st.contains("Size: 17"), "{st}");
    let dumped = img.aux("dumped");
    common::debugfs_r(
        &t,
        &img.path,
        &format!("dump /lost+found/#{ino} {}", dumped.display()),
    );
    let got = std::fs::read(&dumped).unwrap_or_default();
    assert!(got.starts_with(b"hard-linked file\n"), "{got:?}");
}

/// A superblock whose orphan file names `/lost+found` (a flipped `s_orphan_file_inum`): as
/// e2fsck, pass 1 makes the inode the regular file the orphan file must be, pass 2 clears the
/// entry naming it, pass 3 makes a new `/lost+found` and the files the old one held are
/// reconnected there, all in one run. (The directory used to be checked as a directory, the
/// entry naming it cleared as a reserved inode's, and the repair refused.)
#[test]
fn an_orphan_file_naming_lost_and_found_is_taken_as_the_orphan_file() {
    let Some(t) = common::tools() else { return };
    let img = common::mkfs(&t, "ext4", &["-O", "orphan_file"], "16M");
    // A file in the old lost+found, to be reconnected.
    let want = common::dump(&t, &img, "/a/f1");
    common::debugfs_w(&t, &img.path, "ln /a/f1 /lost+found/kept");
    common::debugfs_w(&t, &img.path, "unlink /a/f1");
    let kept: u64 = common::debugfs_r(&t, &img.path, "stat /lost+found/kept")
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .expect("inode of /lost+found/kept");
    common::debugfs_w(&t, &img.path, "ssv orphan_file_inum 11");
    let e2 = common::e2fsck_fy_copy(&t, &img.path);
    assert!(
        e2.contains("Orphan file inode 11 is not regular file.  Clear? yes"),
        "{e2}"
    );
    let out = common::assert_one_run_repairs(&t, &img, "orphan file = lost+found", &[1]).stdout;
    for want in [
        "Orphan file inode 11 is not regular file.  Clear? yes",
        "Entry 'lost+found' in / (2) has invalid inode #: 11.",
        "/lost+found not found.  Create? yes",
    ] {
        assert!(out.contains(want), "{want}\n{out}");
    }
    let got = common::dump(&t, &img, &format!("/lost+found/#{kept}"));
    assert!(
        got == want,
        "/lost+found/#{kept}: {} bytes, not {}\n{out}",
        got.len(),
        want.len()
    );
}
