//! `ffsck-lab versus` (the gilbert experiment's options): the seed paper's e2fsck-versus-xfs_repair comparison
//! in one report. The gilbert experiment runs once on ext4 (ffsck -fn, e2fsck -fn, and
//! e2fsck -fy on a scratch copy, the counterpart of xfs_repair) and once on XFS (xfs_repair -n
//! and xfs_repair), on images of the same size built from the same seeded tree. The two
//! runs' corruption types are grouped into the metadata classes both file systems have, and
//! one table and one figure show every checker's runtime and memory growth per class, next
//! to the clean-image costs.

use std::path::Path;

use anyhow::{bail, Context, Result};
use serde::Serialize;

use crate::gilbert::{self, GilbertArgs, GilbertResults};
use crate::imagegen::FsType;
use crate::markdown;
use crate::plots::{self, BarPlot, Figure};
use crate::xfs;

/// Metadata classes both file systems have, and the corruption types of each that feed them.
const CLASSES: &[(&str, &[&str], &[&str])] = &[
    (
        "superblock",
        &[
            "sb-magic",
            "sb-inode-size",
            "sb-inode-count",
            "sb-block-count",
            "component-sb",
        ],
        &["xfs-sb"],
    ),
    (
        "group / AG headers",
        &[
            "gd-block-bitmap",
            "gd-inode-bitmap",
            "component-gd",
            "component-reserved-gdt",
        ],
        &["xfs-agf", "xfs-agi", "xfs-agfl"],
    ),
    (
        "free-space and inode maps",
        &["component-block-bitmap", "component-inode-bitmap"],
        &["xfs-btbno", "xfs-btcnt", "xfs-btino", "xfs-btfino"],
    ),
    (
        "inodes",
        &[
            "inode-type",
            "inode-links",
            "inode-size",
            "inode-state",
            "component-inode-table",
        ],
        &["xfs-inode"],
    ),
    (
        "block maps and sharing",
        &[
            "inode-block",
            "inode-ptr-range",
            "ind-ptr-range",
            "ind-block",
            "multiply-allocated",
        ],
        &["xfs-btrefcnt"],
    ),
    ("directories", &[], &["xfs-dir"]),
];

/// One checker's median growth over a class's corruption types.
#[derive(Debug, Clone, Serialize)]
pub struct ClassGrowth {
    pub checker: String,
    pub fs_type: String,
    pub time_growth: f64,
    pub rss_growth: f64,
}

#[derive(Debug, Clone, Serialize)]
pub struct ClassRow {
    pub class: String,
    pub ext4_types: Vec<String>,
    pub xfs_types: Vec<String>,
    pub checkers: Vec<ClassGrowth>,
}

/// One checker's clean-image cost (median over the image shapes).
#[derive(Debug, Clone, Serialize)]
pub struct CleanCost {
    pub checker: String,
    pub fs_type: String,
    pub wall_s: f64,
    pub max_rss_mib: f64,
}

#[derive(Debug, Clone, Serialize)]
pub struct Versus {
    pub classes: Vec<ClassRow>,
    pub clean: Vec<CleanCost>,
    pub figures: Vec<Figure>,
    pub ext4: GilbertResults,
    pub xfs: GilbertResults,
}

/// The median of the finite values (NaN when there are none).
fn median(mut v: Vec<f64>) -> f64 {
    v.retain(|x| x.is_finite());
    crate::metrics::median(&v).unwrap_or(f64::NAN)
}

/// Median growth of each checker of `r` over the corruption types `types`.
fn class_growth(r: &GilbertResults, types: &[&str]) -> Vec<ClassGrowth> {
    r.checkers
        .iter()
        .enumerate()
        .map(|(k, c)| {
            let of = |f: fn(&gilbert::Growth) -> f64| {
                median(
                    r.by_type
                        .iter()
                        .filter(|t| types.contains(&t.corruption.as_str()))
                        .filter_map(|t| t.checkers.get(k).map(f))
                        .collect(),
                )
            };
            ClassGrowth {
                checker: c.name.clone(),
                fs_type: r.fs_type.name().into(),
                time_growth: of(|g| g.time_growth),
                rss_growth: of(|g| g.rss_growth),
            }
        })
        .collect()
}

fn clean_costs(r: &GilbertResults) -> Vec<CleanCost> {
    r.checkers
        .iter()
        .map(|c| {
            let of = |f: fn(&gilbert::Measure) -> f64| {
                median(
                    r.baselines
                        .iter()
                        .flat_map(|b| b.checkers.iter())
                        .filter(|x| x.checker == c.name)
                        .map(|x| f(&x.measure))
                        .collect(),
                )
            };
            CleanCost {
                checker: c.name.clone(),
                fs_type: r.fs_type.name().into(),
                wall_s: of(|m| m.median_wall_s),
                max_rss_mib: of(|m| m.median_max_rss_kib / 1024.0),
            }
        })
        .collect()
}

/// Group two runs' results by class.
pub fn compare(ext4: GilbertResults, xfs: GilbertResults) -> Versus {
    let present = |r: &GilbertResults, types: &[&str]| -> Vec<String> {
        types
            .iter()
            .filter(|t| r.corruptions.iter().any(|c| c == *t))
            .map(|t| t.to_string())
            .collect()
    };
    let classes = CLASSES
        .iter()
        .map(|(class, e, x)| ClassRow {
            class: class.to_string(),
            ext4_types: present(&ext4, e),
            xfs_types: present(&xfs, x),
            checkers: [class_growth(&ext4, e), class_growth(&xfs, x)].concat(),
        })
        .collect();
    let clean = [clean_costs(&ext4), clean_costs(&xfs)].concat();
    Versus {
        classes,
        clean,
        figures: Vec::new(),
        ext4,
        xfs,
    }
}

fn growth(x: f64) -> String {
    if x.is_finite() {
        format!("{x:.2}×")
    } else {
        "–".into()
    }
}

pub fn render_markdown(v: &Versus) -> String {
    let mut out = String::from("## ext4 vs XFS: checker cost after metadata corruption\n\n");
    out.push_str(&format!(
        "- the gilbert experiment on both file systems: {} ext4 and {} XFS image shapes (sizes \
         {:?} MiB), seed {}, {} runs per checker and state, medians\n\
         - growth = median wall time (or peak RSS) on the damaged image / on the clean image, \
         then the median over the corruption types of a class\n\
         - per-file-system reports: `ext4/report.md`, `xfs/report.md`\n\n",
        v.ext4.baselines.len(),
        v.xfs.baselines.len(),
        v.ext4.fs_sizes_mib,
        v.ext4.seed,
        v.ext4.runs,
    ));
    let names: Vec<String> = v
        .classes
        .first()
        .map(|c| c.checkers.iter().map(|g| g.checker.clone()).collect())
        .unwrap_or_default();
    out.push_str("### Runtime and memory growth per metadata class\n\n");
    let mut header: Vec<String> = vec!["class".into(), "ext4 types".into(), "XFS types".into()];
    header.extend(names.iter().map(|n| format!("{n} time")));
    header.extend(names.iter().map(|n| format!("{n} RSS")));
    let rows: Vec<Vec<String>> = v
        .classes
        .iter()
        .map(|c| {
            let mut r = vec![
                c.class.clone(),
                c.ext4_types.join(", "),
                c.xfs_types.join(", "),
            ];
            r.extend(c.checkers.iter().map(|g| growth(g.time_growth)));
            r.extend(c.checkers.iter().map(|g| growth(g.rss_growth)));
            r
        })
        .collect();
    let right = [vec![false; 3], vec![true; 2 * names.len()]].concat();
    let header_refs: Vec<&str> = header.iter().map(String::as_str).collect();
    out.push_str(&markdown::table(&header_refs, &right, &rows));
    out.push_str("\n### Clean images (median over shapes)\n\n");
    let rows: Vec<Vec<String>> = v
        .clean
        .iter()
        .map(|c| {
            vec![
                c.checker.clone(),
                c.fs_type.clone(),
                format!("{:.3}", c.wall_s),
                format!("{:.1}", c.max_rss_mib),
            ]
        })
        .collect();
    out.push_str(&markdown::table(
        &["checker", "file system", "wall s", "peak RSS MiB"],
        &[false, false, true, true],
        &rows,
    ));
    if !v.figures.is_empty() {
        out.push_str("\n### Figures\n\n");
        for f in &v.figures {
            out.push_str(&format!("- {}: `{}` (`{}`)\n", f.title, f.file, f.png));
        }
    }
    out
}

/// One grouped bar per class, one series per checker (both file systems).
pub fn figures(v: &Versus, out: &Path) -> Result<Vec<Figure>> {
    let cats: Vec<String> = v.classes.iter().map(|c| c.class.clone()).collect();
    let n = v.classes.first().map_or(0, |c| c.checkers.len());
    let series = |f: fn(&ClassGrowth) -> f64| -> Vec<(String, Vec<f64>)> {
        (0..n)
            .map(|k| {
                let name = v.classes[0].checkers[k].checker.clone();
                (name, v.classes.iter().map(|c| f(&c.checkers[k])).collect())
            })
            .collect()
    };
    let mut figs = Vec::new();
    for (stem, title, label, s) in [
        (
            "gilbert-ext4-xfs",
            "Runtime growth after corruption, ext4 vs XFS checkers",
            "median wall after / before",
            series(|g| g.time_growth),
        ),
        (
            "gilbert-ext4-xfs-memory",
            "Peak memory growth after corruption, ext4 vs XFS checkers",
            "median peak RSS after / before",
            series(|g| g.rss_growth),
        ),
    ] {
        let plot = BarPlot {
            title: title.into(),
            x_label: label.into(),
            categories: cats.clone(),
            series: s,
            reference: Some(1.0),
        };
        figs.push(Figure::write(plots::Plot::Bar(&plot), out, stem)?);
    }
    Ok(figs)
}

/// Both runs, into `out/ext4` and `out/xfs`, then the comparison into `out`.
pub fn run(args: &GilbertArgs) -> Result<Versus> {
    if args.fs_type.is_some() {
        bail!("versus runs both ext4 and XFS; --fs-type does not apply");
    }
    for tool in ["mkfs.xfs", "xfs_repair", "xfs_db"] {
        xfs::tool(tool).with_context(|| {
            format!("versus needs xfsprogs ({tool} not found; scripts/ensure-tools.sh installs it)")
        })?;
    }
    // The same sizes on both (XFS needs at least 300 MiB), 4 KiB blocks, and each file
    // system's usual inode size, unless asked otherwise.
    let min_mib = xfs::MIN_BYTES >> 20;
    let sizes = args.fs_sizes.clone().unwrap_or(vec![min_mib.max(600)]);
    // A --corruptions list names types of both file systems: each run takes its own.
    let (xfs_types, ext_types): (Vec<String>, Vec<String>) = args
        .corruptions
        .clone()
        .unwrap_or_default()
        .into_iter()
        .partition(|c| c.starts_with("xfs-"));
    let some = |v: Vec<String>| (!v.is_empty()).then_some(v);
    let mut ext = args.clone();
    ext.corruptions = some(ext_types);
    ext.fs_type = Some(FsType::Ext4);
    ext.fs_sizes = Some(sizes.clone());
    ext.block_sizes = Some(args.block_sizes.clone().unwrap_or(vec![4096]));
    ext.inode_sizes = Some(args.inode_sizes.clone().unwrap_or(vec![256]));
    ext.out = args.out.join("ext4");
    ext.repair_too = true;
    let mut x = args.clone();
    x.corruptions = some(xfs_types);
    x.fs_type = Some(FsType::Xfs);
    x.fs_sizes = Some(sizes);
    x.block_sizes = ext.block_sizes.clone();
    x.inode_sizes = Some(args.inode_sizes.clone().unwrap_or(vec![512]));
    x.out = args.out.join("xfs");
    eprintln!("ext4:");
    let e = gilbert::run(&ext)?;
    eprintln!("XFS:");
    let r = gilbert::run(&x)?;
    let mut v = compare(e, r);
    v.figures = figures(&v, &args.out)?;
    let json = serde_json::to_string_pretty(&v)? + "\n";
    std::fs::write(args.out.join("results.json"), json).context("writing results.json")?;
    std::fs::write(args.out.join("report.md"), render_markdown(&v)).context("writing report.md")?;
    Ok(v)
}

/// CLI entry for `versus`.
pub fn main(args: &GilbertArgs) -> Result<()> {
    let v = run(args)?;
    print!("{}", render_markdown(&v));
    eprintln!("wrote {}", args.out.join("report.md").display());
    Ok(())
}
