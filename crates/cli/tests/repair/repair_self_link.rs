//! A directory entry that names its own directory (besides `.`): cleared, as e2fsck clears it,
//! it gives the directory no parent, so the entry elsewhere that does (read later in pass 2)
//! is kept and the directory stays where e2fsck leaves it, not in /lost+found.

use crate::common;

use std::ffi::OsStr;

/// The entries of directory `path`, by name.
fn names(t: &common::Tools, img: &std::path::Path, path: &str) -> Vec<String> {
    common::debugfs_r(t, img, &format!("ls {path}"))
        .split_whitespace()
        .map(String::from)
        .collect()
}

#[test]
fn self_link_does_not_take_the_parent() {
    let Some(t) = common::tools() else {
        return;
    };
    let img = common::mkfs(&t, "ext4", &[], "8M");
    common::settle(&t, &img.path);
    // /a/emptydir's only entry outside itself is /c/alias, in a directory whose block pass 2
    // reads after emptydir's own (which names it as `me`).
    common::debugfs_script(
        &t,
        &img,
        &[
            "link /a/emptydir /a/emptydir/me",
            "link /a/emptydir /c/alias",
            "unlink /a/emptydir",
        ],
    );
    let theirs = img.aux("theirs.img");
    std::fs::copy(&img.path, &theirs).unwrap();
    let mut e2 = std::process::Command::new(&t.e2fsck);
    e2.arg("-fy").arg(&theirs).env("E2FSCK_CONFIG", "/dev/null");
    let e2 = common::run_with_timeout(e2, std::time::Duration::from_secs(60)).unwrap();
    assert_eq!(e2.code, Some(1), "test setup: e2fsck -fy\n{}", e2.stdout);
    assert!(
        names(&t, &theirs, "/c").contains(&"alias".to_string()),
        "test setup: e2fsck keeps /c/alias\n{}",
        e2.stdout
    );

    let run = common::ffsck(&[OsStr::new("-fy"), img.path.as_os_str()]);
    assert_eq!(run.code(), 1, "{}", run.stdout);
    assert!(
        run.stdout.contains("is a link to '.'  Clear? yes"),
        "{}",
        run.stdout
    );
    assert!(!run.stdout.contains("Unconnected"), "{}", run.stdout);
    assert_eq!(names(&t, &img.path, "/c"), names(&t, &theirs, "/c"));
    assert_eq!(
        names(&t, &img.path, "/c/alias"),
        names(&t, &theirs, "/c/alias")
    );
    let (after, out) = common::e2fsck_n(&t, &img.path);
    assert_eq!(after, 0, "e2fsck -fn after ffsck -fy\n{out}");
}
