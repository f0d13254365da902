//! `ffsck-lab corrupt`: reproducible, logged damage to an image, addressed by field name
//! (`inode[12].i_links_count`), by component and group (corruptFS-style one-byte flips), or by
//! meaning (a multiply-claimed block, an orphan, a directory loop, …). On XFS images,
//! `--xfs-blocktrash TYPE` has `xfs_db blocktrash` damage one kind of metadata block instead.
//!
//! Every byte written is listed in the manifest with its offset, old and new bytes and the
//! field it belongs to, checksum fix-ups included, so a test can verify that the image changed
//! exactly as logged. Structures are located by reading the image through `ffsck-format`;
//! nothing is trusted: every on-disk number is range-checked before it becomes an offset.

use std::path::PathBuf;

use anyhow::{anyhow, bail, Context, Result};
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use serde::{Deserialize, Serialize};

mod component;
mod field;
mod fixup;
mod image;
mod random;
mod semantic;
pub mod table2;
mod times;

pub use crate::change::{unhex, Change};
pub use image::Image;
pub use table2::Table2;
pub use times::normalize_times;

use component::corrupt_component;
use field::corrupt_field;
use image::Dirty;
use semantic::corrupt_semantic;

/// What to do to a field (the verbs of xfs_db's `fuzz`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Op {
    Zero,
    Ones,
    /// Flip the least significant bit.
    Firstbit,
    /// Flip the middle bit (bit `8 × size / 2`).
    Middlebit,
    /// Flip the most significant bit.
    Lastbit,
    /// Add one, wrapping.
    Add,
    /// Subtract one, wrapping.
    Sub,
    /// Random bytes different from the old ones.
    Random,
    /// Set to a value (decimal or 0x-hex).
    Set(u64),
}

impl std::str::FromStr for Op {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        Ok(match s {
            "zero" | "zeroes" => Op::Zero,
            "ones" => Op::Ones,
            "firstbit" => Op::Firstbit,
            "middlebit" => Op::Middlebit,
            "lastbit" => Op::Lastbit,
            "add" => Op::Add,
            "sub" => Op::Sub,
            "random" => Op::Random,
            _ => match s.strip_prefix("set=") {
                Some(v) => Op::Set(parse_number(v).ok_or_else(|| format!("bad value in `{s}`"))?),
                None => {
                    return Err(format!(
                        "unknown op `{s}` (zero, ones, firstbit, middlebit, lastbit, add, sub, \
                         random, set=V)"
                    ))
                }
            },
        })
    }
}

fn parse_number(s: &str) -> Option<u64> {
    match s.strip_prefix("0x").or_else(|| s.strip_prefix("0X")) {
        Some(hex) => u64::from_str_radix(hex, 16).ok(),
        None => s.parse().ok(),
    }
}

/// Whether to recompute the checksums covering what was changed.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CsumMode {
    /// Leave checksums as they were: the damage shows up as checksum errors first.
    Stale,
    /// Recompute them, so only the deeper consistency checks can find the damage.
    Fix,
}

/// corruptFS's components: one byte of one of these, in a chosen group.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Component {
    /// The superblock (group 0) or its backup in the group.
    Sb,
    /// The group's descriptor in the primary table.
    Gd,
    /// The reserved GDT blocks after the group's superblock copy.
    ReservedGdt,
    BlockBitmap,
    InodeBitmap,
    /// A byte of an in-use inode of the group.
    InodeTable,
}

/// Damage with a meaning, the kind fsck must reason about rather than spot by checksum.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Semantic {
    /// A second file's first extent (or block pointer) points at the first file's block.
    MultiplyClaimed,
    /// A regular file's directory entry is merged away: the inode stays in use, unreferenced.
    Orphan,
    /// Directory Y (child of X) gets an entry pointing back at X, and X's own entry is
    /// removed from its parent: X and Y form a cycle unreachable from the root.
    DirLoop,
    /// A directory entry is pointed at a free inode.
    DanglingEntry,
    /// A directory's `..` entry gets inode 0.
    UnlinkDotdot,
}

#[derive(clap::Args, Debug, Clone)]
pub struct CorruptArgs {
    /// Image to damage in place.
    #[arg(long)]
    pub image: PathBuf,
    /// Seed for every random choice.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Field to change: sb.F, gd[G].F, inode[I].F, extent[I].F (root header in the inode),
    /// extent[I][K].F (root entry K), dirent[I][K].F (entry K of directory I's block 0),
    /// dx[I].F (htree root), xattr[I].F (attribute block header), jsb.F (journal superblock).
    #[arg(long, requires = "op", conflicts_with_all = ["component", "semantic"])]
    pub field: Option<String>,
    /// zero, ones, firstbit, middlebit, lastbit, add, sub, random or set=V.
    #[arg(long)]
    pub op: Option<Op>,
    /// Flip one byte of this structure of `--group` (corruptFS style).
    #[arg(long, requires = "group", conflicts_with = "semantic")]
    pub component: Option<Component>,
    #[arg(long)]
    pub group: Option<u32>,
    /// Make one semantic inconsistency.
    #[arg(long)]
    pub semantic: Option<Semantic>,
    /// Apply one corruption of Table II of the ffsck paper.
    #[arg(long, value_enum)]
    pub table2: Option<Table2>,
    /// Apply N corruptions drawn (with --seed) from every mode above.
    #[arg(long, value_name = "N")]
    pub random: Option<u32>,
    /// Leave checksums stale or fix them [default: stale for --field and --component, fix for
    /// --semantic].
    #[arg(long, value_enum)]
    pub csum: Option<CsumMode>,
    /// XFS images: trash blocks of this metadata type with `xfs_db blocktrash -t TYPE`
    /// (seeded by --seed, which must fit in 32 bits).
    #[arg(long, value_enum, conflicts_with_all = ["field", "component", "semantic", "table2", "random"])]
    pub xfs_blocktrash: Option<crate::xfs::BlockType>,
    /// With --xfs-blocktrash: how many blocks to trash (blocktrash -n).
    #[arg(long, default_value_t = 1, requires = "xfs_blocktrash")]
    pub xfs_count: u32,
    /// With --xfs-blocktrash: what happens to the chosen bits (blocktrash -0/-1/-2/-3).
    #[arg(long, value_enum, default_value_t = crate::xfs::TrashMode::Randomize, requires = "xfs_blocktrash")]
    pub xfs_mode: crate::xfs::TrashMode,
    /// Where to write the manifest (JSON).
    #[arg(long)]
    pub manifest: PathBuf,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Manifest {
    pub image: PathBuf,
    pub seed: u64,
    /// `field`, `component` or `semantic`.
    pub mode: String,
    /// The field, component or semantic name.
    pub target: String,
    pub op: Option<Op>,
    pub group: Option<u32>,
    pub csum: CsumMode,
    pub description: String,
    /// With --random: what each draw was (`field sb.s_magic zero`, `table2 inode-links`, …).
    #[serde(default)]
    pub steps: Vec<String>,
    pub changes: Vec<Change>,
}

/// Runs `xfs_db blocktrash` on an XFS image and logs the bytes it changed.
fn run_xfs(args: &CorruptArgs, kind: crate::xfs::BlockType) -> Result<Manifest> {
    let t = crate::xfs::blocktrash(&args.image, kind, args.seed, args.xfs_count, args.xfs_mode)?;
    Ok(Manifest {
        image: args.image.clone(),
        seed: args.seed,
        mode: "xfs-blocktrash".into(),
        target: kind.name(),
        op: None,
        group: None,
        csum: CsumMode::Stale,
        description: t.description,
        steps: Vec::new(),
        changes: t.changes,
    })
}

/// Runs one corruption and writes the manifest.
pub fn run(args: &CorruptArgs) -> Result<Manifest> {
    let manifest = match args.xfs_blocktrash {
        Some(kind) => run_xfs(args, kind)?,
        None => run_ext(args)?,
    };
    std::fs::write(
        &args.manifest,
        serde_json::to_string_pretty(&manifest)? + "\n",
    )
    .with_context(|| format!("writing {}", args.manifest.display()))?;
    Ok(manifest)
}

/// Runs one corruption of an ext2/3/4 image.
fn run_ext(args: &CorruptArgs) -> Result<Manifest> {
    if crate::xfs::is_xfs(&args.image) {
        bail!(
            "{} is an XFS image: use --xfs-blocktrash TYPE",
            args.image.display()
        );
    }
    let mut rng = ChaCha8Rng::seed_from_u64(args.seed);
    let mut img = Image::open(&args.image)?;
    let given = [
        args.field.is_some(),
        args.component.is_some(),
        args.semantic.is_some(),
        args.table2.is_some(),
        args.random.is_some(),
    ];
    if given.iter().filter(|&&g| g).count() != 1 {
        bail!(
            "give exactly one of --field (with --op), --component (with --group), --semantic, \
             --table2 or --random"
        );
    }
    let name = |v: serde_json::Value| v.as_str().unwrap_or("?").to_string();
    let mut steps = Vec::new();
    let (mode, target, csum, description) = if let Some(f) = &args.field {
        let op = args
            .op
            .as_ref()
            .ok_or_else(|| anyhow!("--field needs --op"))?;
        let d = corrupt_field(&mut img, f, op, &mut rng)?;
        ("field", f.clone(), args.csum.unwrap_or(CsumMode::Stale), d)
    } else if let Some(c) = args.component {
        let g = args
            .group
            .ok_or_else(|| anyhow!("--component needs --group"))?;
        let d = corrupt_component(&mut img, c, g, &mut rng)?;
        let target = name(serde_json::to_value(c)?);
        ("component", target, args.csum.unwrap_or(CsumMode::Stale), d)
    } else if let Some(s) = args.semantic {
        let d = corrupt_semantic(&mut img, s, &mut rng)?;
        let target = name(serde_json::to_value(s)?);
        ("semantic", target, args.csum.unwrap_or(CsumMode::Fix), d)
    } else if let Some(t) = args.table2 {
        let d = table2::corrupt_table2(&mut img, t, &mut rng)?;
        ("table2", t.name(), args.csum.unwrap_or(CsumMode::Fix), d)
    } else {
        let n = args.random.unwrap_or(0);
        let done = random::corrupt_random(&mut img, n, args.csum, &mut rng)?;
        let d = done
            .iter()
            .map(|s| s.description.as_str())
            .collect::<Vec<_>>()
            .join("; ");
        steps = done.into_iter().map(|s| s.name).collect();
        // Per-step checksum handling already happened; report the override, if any.
        (
            "random",
            format!("{n} draws"),
            args.csum.unwrap_or(CsumMode::Stale),
            d,
        )
    };
    if csum == CsumMode::Fix {
        img.fix_checksums()?;
    }
    img.file.sync_all().context("syncing the image")?;
    Ok(Manifest {
        image: args.image.clone(),
        seed: args.seed,
        mode: mode.into(),
        target,
        op: args.op.clone(),
        group: args.group,
        csum,
        description,
        steps,
        changes: img.changes,
    })
}

/// CLI entry.
pub fn main(args: &CorruptArgs) -> Result<()> {
    let m = run(args)?;
    println!("{}", m.description);
    for c in &m.changes {
        println!(
            "  {:#012x} {:<40} {} → {} ({})",
            c.offset, c.field, c.old, c.new, c.role
        );
    }
    Ok(())
}
