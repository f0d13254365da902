//! `ffsck-lab age` on a small image: every method must run through a loop mount, leave a
//! file system e2fsck -fn calls clean, and report fragmentation. Skips (with a message)
//! where loop mounts are not allowed.

mod common;

use std::process::Command;

use ffsck_lab::mkfs::{self, MkfsArgs};

#[test]
fn every_method_ages_a_small_image() {
    let (Some(_), Some(e2fsck)) = (common::tool("mke2fs"), common::tool("e2fsck")) else {
        common::skip("mke2fs/e2fsck not installed");
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    let base = tmp.path().join("base.img");
    let args: MkfsArgs = ffsck_lab::parse_args(&[
        "--inodes",
        "1000",
        "--size",
        "64M",
        "--out",
        base.to_str().unwrap(),
        "--tree-dir",
        tmp.path().to_str().unwrap(),
    ])
    .unwrap();
    mkfs::run(&args).unwrap();
    for method in ["roundhouse", "holepunch", "ffsck", "git-replay"] {
        let image = tmp.path().join(format!("{method}.img"));
        std::fs::copy(&base, &image).unwrap();
        let Some(report) = common::age_or_skip(method, &image) else {
            return;
        };
        assert!(report.ops > 0, "{method}: no operations");
        assert!(
            report.util_after > report.util_before,
            "{method}: {report:?}"
        );
        assert!(report.fragmentation.files > 0);
        assert!(report.fragmentation.mean_fragments_per_file >= 1.0);
        assert!(image.with_extension("img.age.json").is_file());
        let out = Command::new(&e2fsck)
            .arg("-fn")
            .arg(&image)
            .output()
            .unwrap();
        assert_eq!(
            out.status.code(),
            Some(0),
            "{method}: aged image is not clean:\n{}",
            String::from_utf8_lossy(&out.stdout)
        );
    }
}

/// The ffsck method on ext3 (no `fallocate` for block-mapped files: it writes) and on ext4,
/// where files grown beside others end up in many extents (so extent blocks exist).
#[test]
fn ffsck_method_fragments_ext4_and_ages_ext3() {
    let (Some(_), Some(e2fsck)) = (common::tool("mke2fs"), common::tool("e2fsck")) else {
        common::skip("mke2fs/e2fsck not installed");
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    for fs_type in ["ext4", "ext3"] {
        let image = tmp.path().join(format!("{fs_type}.img"));
        let args: MkfsArgs = ffsck_lab::parse_args(&[
            "--inodes",
            "1000",
            "--mkfs-inodes",
            "16384",
            "--fs-type",
            fs_type,
            "--size",
            "128M",
            "--out",
            image.to_str().unwrap(),
            "--tree-dir",
            tmp.path().to_str().unwrap(),
        ])
        .unwrap();
        mkfs::run(&args).unwrap();
        let Some(report) = common::age_or_skip("ffsck", &image) else {
            return;
        };
        // (Blocks the kernel preallocated for files still growing count as used until they
        // close, so the level the report ends at is below the one aged to.)
        assert!(
            report.util_after > report.util_before + 30.0,
            "{fs_type}: {report:?}"
        );
        if fs_type == "ext4" {
            assert!(
                report.fragmentation.max_fragments > 4,
                "{fs_type}: no file in more than 4 extents: {report:?}"
            );
        }
        let out = Command::new(&e2fsck)
            .arg("-fn")
            .arg(&image)
            .output()
            .unwrap();
        assert_eq!(
            out.status.code(),
            Some(0),
            "{fs_type}: aged image is not clean:\n{}",
            String::from_utf8_lossy(&out.stdout)
        );
    }
}
