//! `-n` on a mounted file system leaves its live journal alone, as e2fsck -n does: the kernel's
//! jbd2 writes the log around the block device's page cache, so a read of the device returns
//! stale log blocks, which are no log to replay or judge. A fresh ext4 image is loop-mounted,
//! files are written and synced (`syncfs`) round after round, so the log holds transaction
//! after transaction on disk, and after each round `ffsck -fn` on the loop device must say
//! e2fsck's "skipping journal recovery" warning, report nothing about the journal's contents
//! and exit as `e2fsck -fn` does on the same device at that moment. Needs root (loop devices,
//! mount); skips otherwise.

use crate::common;

use common::*;
use std::path::{Path, PathBuf};
use std::process::Command;

/// e2fsck's words for a journal it does not recover under `-n`.
const SKIPPING: &str =
    "Warning: skipping journal recovery because doing a read-only filesystem check.";

/// An image attached to a loop device and mounted; unmounted and detached on drop, whatever
/// the test's outcome.
struct Live {
    loop_dev: Option<String>,
    mount_point: PathBuf,
    mounted: bool,
}

impl Live {
    /// Attach `img` and mount it at `mount_point`; `Err` says why not (the test skips).
    fn mount(img: &Path, mount_point: &Path) -> Result<Live, String> {
        let mut live = Live {
            loop_dev: None,
            mount_point: mount_point.to_path_buf(),
            mounted: false,
        };
        let out = Command::new("losetup")
            .args(["-f", "--show"])
            .arg(img)
            .output()
            .map_err(|e| format!("losetup: {e}"))?;
        let dev = String::from_utf8_lossy(&out.stdout).trim().to_string();
        if !out.status.success() || dev.is_empty() {
            return Err(format!(
                "losetup failed: {}",
                String::from_utf8_lossy(&out.stderr)
            ));
        }
        live.loop_dev = Some(dev.clone());
        let out = Command::new("mount")
            .args(["-t", "ext4", &dev])
            .arg(mount_point)
            .output()
            .map_err(|e| format!("mount: {e}"))?;
        if !out.status.success() {
            return Err(format!(
                "mount failed: {}",
                String::from_utf8_lossy(&out.stderr)
            ));
        }
        live.mounted = true;
        Ok(live)
    }

    fn device(&self) -> &str {
        self.loop_dev.as_deref().unwrap_or_default()
    }

    /// Write the file system's changes to the device: `syncfs` (never a global sync), which
    /// commits the journal without checkpointing it.
    fn syncfs(&self) {
        let st = Command::new("sync")
            .arg("-f")
            .arg(&self.mount_point)
            .status()
            .expect("sync -f");
        assert!(st.success(), "test setup: sync -f failed");
    }
}

impl Drop for Live {
    fn drop(&mut self) {
        if self.mounted {
            let _ = Command::new("umount").arg(&self.mount_point).status();
        }
        if let Some(dev) = &self.loop_dev {
            let _ = Command::new("losetup").args(["-d", dev]).status();
        }
    }
}

/// Round `round`'s writes: files of assorted sizes, a directory, a slow symlink, a rename and
/// a removal, so each sync commits transactions of bitmaps, inode tables and directories.
fn write_round(mnt: &Path, round: usize, rng: &mut Rng) {
    let dir = mnt.join(format!("round{round}"));
    std::fs::create_dir_all(dir.join("sub")).unwrap();
    for i in 0..60 {
        let n = rng.below(24 * 1024) as usize;
        std::fs::write(dir.join(format!("file{i:03}")), rng.bytes(n)).unwrap();
    }
    std::os::unix::fs::symlink(LONG_LINK_TARGET, dir.join("sub/link")).unwrap();
    std::fs::rename(dir.join("file000"), dir.join("sub/moved")).unwrap();
    std::fs::remove_file(dir.join("file001")).unwrap();
}

fn e2fsck_fn(t: &Tools, dev: &str) -> Run {
    let mut cmd = Command::new(&t.e2fsck);
    cmd.args(["-fn", dev]);
    run_with_timeout(cmd, DEFAULT_TIMEOUT).expect("e2fsck -fn did not finish")
}

#[test]
fn a_read_only_check_of_a_mounted_file_system_skips_its_live_journal() {
    let Some(t) = tools() else { return };
    if !is_root() {
        skip("SKIPPED: needs root to loop-mount an ext4 image");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let img = dir.path().join("fs.img");
    std::fs::File::create(&img).unwrap();
    // 1 KiB blocks: several log blocks share a page of the device's cache. No inline_data
    // (a kernel workload on it can oops jbd2 here) and no quota (this kernel cannot mount it).
    let out = Command::new(&t.mke2fs)
        .args(["-q", "-F", "-t", "ext4", "-b", "1024"])
        .args(["-O", "^inline_data,^quota"])
        .arg(&img)
        .arg("64M")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "test setup: mke2fs: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let mnt = dir.path().join("mnt");
    std::fs::create_dir(&mnt).unwrap();
    let live = match Live::mount(&img, &mnt) {
        Ok(l) => l,
        Err(why) => {
            skip(&format!("SKIPPED: {why}"));
            return;
        }
    };
    live.syncfs();
    let dev = live.device().to_string();
    let mut rng = Rng::new(0x11FE_0045);
    let mut skipped_rounds = 0;
    // Round 0 checks the idle file system: its reads fill the device's page cache, which the
    // kernel's later log writes go around.
    for round in 0..5 {
        if round > 0 {
            write_round(&mnt, round, &mut rng);
            live.syncfs();
        }
        let ours = ffsck(&["-fn".as_ref(), dev.as_ref()]);
        let theirs = e2fsck_fn(&t, &dev);
        let both = format!(
            "round {round}\nffsck:\n{}{}\ne2fsck:\n{}{}",
            ours.stdout, ours.stderr, theirs.stdout, theirs.stderr
        );
        for word in [
            "Journal checksum error",
            "Journal corrupted",
            "Recovering journal",
            "Journal transaction",
        ] {
            assert!(!ours.stdout.contains(word), "{word}: {both}");
        }
        assert_eq!(
            ours.stdout.contains(SKIPPING),
            theirs.stdout.contains(SKIPPING),
            "{both}"
        );
        skipped_rounds += usize::from(theirs.stdout.contains(SKIPPING));
        assert_eq!(ours.code(), theirs.code(), "{both}");
    }
    // Each round saw a live journal e2fsck skipped (the kernel sets needs_recovery while the
    // file system is mounted read-write); otherwise the test proved nothing.
    assert_eq!(skipped_rounds, 5, "test setup: no journal needed recovery");
    drop(live);
}
