//! A loop mount of an image through the kernel driver (root), undone when dropped: `age`
//! ages through it and `mkfs --populate kernel` copies a tree in through it.

use std::path::Path;
use std::process::{Command, Stdio};

use anyhow::{bail, Context, Result};

/// The image could not be loop-mounted (no root, no loop devices): nothing was changed, so
/// callers such as `bench --aged` can skip aging instead of failing.
#[derive(Debug)]
pub struct MountUnavailable(pub String);

impl std::fmt::Display for MountUnavailable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for MountUnavailable {}

/// A loop mount that is undone when dropped.
pub struct Mount {
    dir: tempfile::TempDir,
}

impl Mount {
    /// `options` for `mount -o` ("loop", or "loop,nodelalloc").
    pub fn new(image: &Path, options: &str) -> Result<Self> {
        let dir = tempfile::Builder::new()
            .prefix("ffsck-lab-mnt-")
            .tempdir()
            .context("creating a mount point")?;
        let out = Command::new("mount")
            .args(["-o", options])
            .arg(image)
            .arg(dir.path())
            .stdin(Stdio::null())
            .output()
            .context("running mount")?;
        if !out.status.success() {
            return Err(MountUnavailable(format!(
                "cannot mount {} with `mount -o loop` (needs root and loop devices): {}",
                image.display(),
                String::from_utf8_lossy(&out.stderr).trim()
            ))
            .into());
        }
        Ok(Mount { dir })
    }

    pub fn path(&self) -> &Path {
        self.dir.path()
    }

    pub fn unmount(&self) -> Result<()> {
        let out = Command::new("umount").arg(self.dir.path()).output()?;
        if !out.status.success() {
            bail!(
                "umount failed: {}",
                String::from_utf8_lossy(&out.stderr).trim()
            );
        }
        Ok(())
    }
}

impl Drop for Mount {
    fn drop(&mut self) {
        // Best effort after an error; the normal path unmounts explicitly and checks.
        let _ = Command::new("umount")
            .arg(self.dir.path())
            .stderr(Stdio::null())
            .status();
    }
}
