//! `ffsck-lab bench --aged METHOD`: grows the built image and ages it through a loop mount
//! before it is benched, and the report line that describes the aging.

use std::path::Path;

use anyhow::{bail, Context, Result};

use super::BenchArgs;
use crate::age::{self, AgeArgs, AgeReport, Method};
use crate::loopmount::MountUnavailable;
use crate::tools;

/// One report line about the aging that preceded the bench.
pub(super) fn render_aged(a: &AgeReport) -> String {
    let f = &a.fragmentation;
    format!(
        "- aged: `{:?}` for {} ops in {:.0} s ({}), {:.1}% → {:.1}% of blocks in use; \
         {:.2} fragments/file ({:.1}% non-contiguous), {:.2} fragments/dir\n",
        a.method,
        a.ops,
        a.seconds,
        a.stop_reason,
        a.util_before,
        a.util_after,
        f.mean_fragments_per_file,
        100.0 * f.noncontiguous_share,
        f.mean_fragments_per_dir
    )
}

/// Doubles the image (truncate + resize2fs, so aging has room beyond the tree that filled it)
/// and ages it in place. Returns `None`, with a warning, when loop mounts are not possible.
pub(super) fn age_image(
    args: &BenchArgs,
    method: Method,
    image: &Path,
    warnings: &mut Vec<String>,
) -> Result<Option<AgeReport>> {
    if !(args.age_secs.is_finite() && args.age_secs > 0.0) {
        bail!("--age-secs must be a positive number of seconds");
    }
    let resize2fs = tools::resolve_tool(None, "resize2fs")?;
    let len = std::fs::metadata(image)?.len();
    std::fs::OpenOptions::new()
        .write(true)
        .open(image)?
        .set_len(len.saturating_mul(2))
        .with_context(|| format!("growing {}", image.display()))?;
    let out = std::process::Command::new(&resize2fs)
        .arg(image)
        .stdin(std::process::Stdio::null())
        .output()
        .context("running resize2fs")?;
    if !out.status.success() {
        bail!(
            "resize2fs {} failed: {}",
            image.display(),
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    eprintln!(
        "aging {} with {method:?} (at most {:.0} s)…",
        image.display(),
        args.age_secs
    );
    let age_args = AgeArgs {
        method,
        image: image.to_path_buf(),
        seed: args.seed,
        until_util: None,
        ops: None,
        secs: Some(args.age_secs),
        report: Some(args.out.join("age.json")),
        rounds: 10,
        no_grep_test: false,
    };
    match age::run(&age_args) {
        Ok(report) => Ok(Some(report)),
        Err(e) if e.downcast_ref::<MountUnavailable>().is_some() => {
            let msg = format!("--aged {method:?} skipped, image benched unaged: {e:#}");
            eprintln!("{msg}");
            warnings.push(msg);
            Ok(None)
        }
        Err(e) => Err(e.context("aging the built image")),
    }
}
