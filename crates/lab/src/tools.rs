//! Finds the external programs the harnesses drive (ffsck, e2fsck, mke2fs, dumpe2fs) and reads
//! their versions, so every report says exactly which binaries produced its numbers.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use anyhow::{bail, Result};

/// e2fsprogs tools live in sbin, which is often missing from a non-root user's PATH.
const EXTRA_DIRS: &[&str] = &["/usr/local/sbin", "/usr/sbin", "/sbin"];

fn is_executable(path: &Path) -> bool {
    path.metadata()
        .map(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
        .unwrap_or(false)
}

/// Looks `name` up in `$PATH`, then in the sbin directories.
pub fn find_in_path(name: &str) -> Option<PathBuf> {
    let path_var = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path_var)
        .chain(EXTRA_DIRS.iter().map(PathBuf::from))
        .map(|dir| dir.join(name))
        .find(|candidate| is_executable(candidate))
}

/// Resolves an explicitly given program: a bare name is searched like a shell would,
/// anything with a slash must exist as given.
fn resolve_explicit(path: &Path) -> Result<PathBuf> {
    let is_bare_name = path.components().count() == 1 && !path.to_string_lossy().contains('/');
    if is_bare_name {
        if let Some(found) = find_in_path(&path.to_string_lossy()) {
            return Ok(found);
        }
    } else if is_executable(path) {
        return Ok(path.to_path_buf());
    }
    bail!("{} is not an executable file", path.display())
}

/// Resolves a system tool such as e2fsck: the explicit path if given, else a PATH search.
pub fn resolve_tool(explicit: Option<&Path>, name: &str) -> Result<PathBuf> {
    match explicit {
        Some(path) => resolve_explicit(path),
        None => find_in_path(name).ok_or_else(|| {
            anyhow::anyhow!(
                "`{name}` not found on PATH or in {}; install e2fsprogs or pass its path",
                EXTRA_DIRS.join(", ")
            )
        }),
    }
}

/// Resolves the ffsck binary: `--ffsck` if given, else the `ffsck` built next to this
/// executable (cargo puts both in `target/<profile>/`), else PATH.
pub fn resolve_ffsck(explicit: Option<&Path>) -> Result<PathBuf> {
    if let Some(path) = explicit {
        return resolve_explicit(path);
    }
    let sibling = std::env::current_exe()
        .ok()
        .and_then(|exe| exe.parent().map(|dir| dir.join("ffsck")));
    if let Some(sibling) = sibling.as_deref().filter(|p| is_executable(p)) {
        return Ok(sibling.to_path_buf());
    }
    find_in_path("ffsck").ok_or_else(|| {
        anyhow::anyhow!(
            "ffsck binary not found {}or on PATH; build it with `cargo build --release -p ffsck` \
             (and run ffsck-lab from the same target directory) or pass --ffsck PATH",
            sibling
                .map(|s| format!("at {} ", s.display()))
                .unwrap_or_default()
        )
    })
}

/// First line of `prog -V` (e2fsprogs print it on stderr), for reports; never fails.
pub fn version_line(prog: &Path) -> String {
    let output = Command::new(prog).arg("-V").stdin(Stdio::null()).output();
    match output {
        Ok(out) => {
            let text = [out.stderr, out.stdout].concat();
            String::from_utf8_lossy(&text)
                .lines()
                .map(str::trim)
                .find(|l| !l.is_empty())
                .unwrap_or("unknown version")
                .to_string()
        }
        Err(e) => format!("unknown version ({e})"),
    }
}

/// True when the path looks like a cargo debug build, whose timings mean little.
pub fn is_debug_build(path: &Path) -> bool {
    path.components().any(|c| c.as_os_str() == "debug")
}
