//! `bench --perf`: where ffsck's time goes, from `perf record` of one extra run, kept in the
//! bench report as its hottest symbols and the share spent in the kernel.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use anyhow::{bail, Context, Result};
use serde::Serialize;

use crate::markdown;

/// Samples per second: enough for a sub-second run, cheap enough not to slow it much.
const FREQUENCY: &str = "1999";

/// One symbol's share of the samples.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct HotSpot {
    pub percent: f64,
    /// Sampled in the kernel (`[k]`) rather than in ffsck or its libraries.
    pub kernel: bool,
    pub symbol: String,
}

#[derive(Debug, Clone, Serialize)]
pub struct Profile {
    /// The profiled command line.
    pub command: String,
    /// `perf record`'s samples and `perf report`'s full text, beside report.md.
    pub data: PathBuf,
    pub report: PathBuf,
    /// Percent of all samples taken in the kernel (reading from the page cache, system calls,
    /// page faults).
    pub kernel_percent: f64,
    /// The hottest symbols, hottest first.
    pub top: Vec<HotSpot>,
}

/// Profile one run of `ffsck args` with `perf` into `out`, keeping the `top` hottest symbols.
pub fn record(
    perf: &Path,
    ffsck: &Path,
    args: &[OsString],
    out: &Path,
    top: usize,
) -> Result<Profile> {
    let data = out.join("perf.data");
    let report = out.join("perf-report.txt");
    let status = Command::new(perf)
        .args(["record", "-q", "-F", FREQUENCY, "-o"])
        .arg(&data)
        .arg("--")
        .arg(ffsck)
        .args(args)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .with_context(|| format!("running {}", perf.display()))?;
    // ffsck's own exit code (4 on a damaged image) is not perf's failure; no samples is.
    if !data.is_file() {
        bail!("perf record wrote no samples ({status}); is perf_event_paranoid too strict?");
    }
    let text = Command::new(perf)
        .args([
            "report",
            "--stdio",
            "--no-children",
            "--sort",
            "sym",
            "-g",
            "none",
            "-i",
        ])
        .arg(&data)
        .stderr(Stdio::null())
        .output()
        .with_context(|| format!("running {} report", perf.display()))?;
    let text = String::from_utf8_lossy(&text.stdout).into_owned();
    std::fs::write(&report, &text).with_context(|| format!("writing {}", report.display()))?;
    let all = parse_report(&text);
    if all.is_empty() {
        bail!("perf report listed no symbols");
    }
    let command = std::iter::once(ffsck.as_os_str())
        .chain(args.iter().map(OsString::as_os_str))
        .map(|a| a.to_string_lossy().into_owned())
        .collect::<Vec<_>>()
        .join(" ");
    Ok(Profile {
        command,
        data,
        report,
        kernel_percent: all.iter().filter(|h| h.kernel).map(|h| h.percent).sum(),
        top: all.into_iter().take(top).collect(),
    })
}

/// The symbol rows of `perf report --stdio --sort sym -g none`
/// (`    17.11%  [k] _copy_to_iter`), in the report's order (hottest first).
pub fn parse_report(text: &str) -> Vec<HotSpot> {
    text.lines()
        .filter_map(|line| {
            let line = line.trim_start();
            let (pct, rest) = line.split_once('%')?;
            let percent: f64 = pct.trim().parse().ok()?;
            let rest = rest.trim_start();
            let (kernel, symbol) = if let Some(s) = rest.strip_prefix("[k]") {
                (true, s)
            } else {
                (false, rest.strip_prefix("[.]")?)
            };
            Some(HotSpot {
                percent,
                kernel,
                symbol: symbol.trim().to_string(),
            })
        })
        .collect()
}

pub fn render_markdown(p: &Profile) -> String {
    let mut out = format!(
        "\n### Where ffsck's time goes (perf)\n\n`perf record -F {FREQUENCY}` of one more run \
         (`{}`): {:.1}% of the samples are in the kernel. The full report is `{}`.\n\n",
        p.command,
        p.kernel_percent,
        p.report
            .file_name()
            .map_or_else(String::new, |n| n.to_string_lossy().into_owned()),
    );
    let rows: Vec<Vec<String>> = p
        .top
        .iter()
        .map(|h| {
            vec![
                format!("{:.2}", h.percent),
                if h.kernel { "kernel" } else { "user" }.to_string(),
                format!("`{}`", h.symbol.replace('`', "'")),
            ]
        })
        .collect();
    out.push_str(&markdown::table(
        &["% of samples", "where", "symbol"],
        &[true, false, false],
        &rows,
    ));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn report_rows_are_parsed_and_the_rest_ignored() {
        let text = "# Samples: 2K of event 'cpu-clock:ppp'\n#\n\
                    # Overhead  Symbol\n\
                    # ........  ......\n#\n\
                    \x20   17.11%  [k] _copy_to_iter\n\
                    \x20    6.85%  [.] crc32c::hw_x86_64::crc_u64_parallel3\n\
                    \x20    0.75%  [.] hashbrown::map::HashMap<K,V,S,A>::insert\n\
                    \n# (Tip: use --sort)\n";
        let rows = parse_report(text);
        assert_eq!(
            rows,
            vec![
                HotSpot {
                    percent: 17.11,
                    kernel: true,
                    symbol: "_copy_to_iter".into()
                },
                HotSpot {
                    percent: 6.85,
                    kernel: false,
                    symbol: "crc32c::hw_x86_64::crc_u64_parallel3".into()
                },
                HotSpot {
                    percent: 0.75,
                    kernel: false,
                    symbol: "hashbrown::map::HashMap<K,V,S,A>::insert".into()
                },
            ]
        );
    }
}
