//! `-C fd` (issue 21): e2fsck's "pass current max device" lines cover passes 1 to 5, each
//! counting up to its maximum, with e2fsck's maxima for passes 2 to 5 (and pass 1 when the
//! groups are read in parallel) on the same image; with `--io sequential` pass 1 counts the
//! sweeps too, on a maximum of its own.

use crate::common;

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;

/// The progress lines of `bin ARGS -C 1 IMG` on stdout: per pass, the counts and maxima in
/// the order written.
fn progress(bin: &Path, args: &[&str], img: &Path) -> BTreeMap<u64, Vec<(u64, u64)>> {
    let mut cmd = Command::new(bin);
    cmd.args(args)
        .args(["-C", "1"])
        .arg(img)
        .env("E2FSCK_CONFIG", "/dev/null");
    let run =
        common::run_with_timeout(cmd, std::time::Duration::from_secs(120)).expect("timed out");
    assert_eq!(run.code(), 0, "{}{}", run.stdout, run.stderr);
    let dev = format!(" {}", img.display());
    let mut passes: BTreeMap<u64, Vec<(u64, u64)>> = BTreeMap::new();
    for line in run.stdout.lines() {
        let Some(nums) = line.strip_suffix(dev.as_str()) else {
            continue;
        };
        let n: Vec<u64> = nums.split(' ').filter_map(|w| w.parse().ok()).collect();
        if let [pass, done, max] = n[..] {
            passes.entry(pass).or_default().push((done, max));
        }
    }
    passes
}

#[test]
fn progress_lines_cover_every_pass_up_to_e2fscks_maxima() {
    let Some(t) = common::tools() else { return };
    // Small groups: several of them to count.
    let img = common::mkfs(&t, "ext4", &["-b", "1024", "-g", "2048"], "16M");
    let theirs = progress(&t.e2fsck, &["-fn"], &img.path);
    let max = |p: &BTreeMap<u64, Vec<(u64, u64)>>, pass: u64| p[&pass].last().map(|l| l.1);
    assert_eq!(theirs.keys().copied().collect::<Vec<_>>(), [1, 2, 3, 4, 5]);
    for io in ["parallel", "sequential"] {
        let ours = progress(&common::ffsck_bin(), &["-fn", "--io", io], &img.path);
        assert_eq!(
            ours.keys().copied().collect::<Vec<_>>(),
            [1, 2, 3, 4, 5],
            "--io {io}: {ours:?}"
        );
        for (pass, lines) in &ours {
            let (_, top) = lines[0];
            assert!(top > 0, "--io {io}: pass {pass} has no maximum: {lines:?}");
            assert!(
                lines.windows(2).all(|w| w[0].0 <= w[1].0 && w[1].1 == top),
                "--io {io}: pass {pass} goes back or changes its maximum: {lines:?}"
            );
            assert_eq!(
                lines.last().map(|l| l.0),
                Some(top),
                "--io {io}: pass {pass} does not reach its maximum: {lines:?}"
            );
            if *pass >= 2 || io == "parallel" {
                assert_eq!(
                    Some(top),
                    max(&theirs, *pass),
                    "--io {io}: pass {pass}'s maximum differs from e2fsck's ({:?})",
                    theirs[pass]
                );
            }
        }
    }
}
