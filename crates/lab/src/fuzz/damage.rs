//! Damage plans of `ffsck-lab fuzz`: byte and bit flips aimed at one metadata class each,
//! `corrupt --field`/`--semantic`/`--table2` edits (through the lab's corrupt module), and
//! debugfs's semantic edits (clri, freei, freeb, unlink, link, set fields, shared blocks,
//! directory loops, orphan chains).
//!
//! Every step is recorded resolved (an offset and an xor mask, the corrupt arguments with
//! their seed, the literal debugfs commands), so a recipe replays without the drawing code.
//! The targets come from a [`Layout`] read once from the undamaged image with dumpe2fs and
//! debugfs `stat`.

use std::collections::BTreeMap;
use std::os::unix::fs::FileExt;
use std::path::Path;
use std::process::Command;

use anyhow::{bail, Context, Result};
use clap::ValueEnum;
use ffsck_format::fields;
use rand::Rng;
use rand_chacha::ChaCha8Rng;
use serde::{Deserialize, Serialize};

use super::profile::{run_logged, Catalog};

/// One damage step, as replayed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Step {
    /// XOR one byte of the image (a bit flip when `xor` has one bit set).
    Flip { class: String, offset: u64, xor: u8 },
    /// `ffsck-lab corrupt ARGS` (without `--image`/`--manifest`).
    Corrupt { args: Vec<String> },
    /// `debugfs -w` running these commands.
    Debugfs { cmds: Vec<String> },
}

impl Step {
    /// The damage class, for the per-class breakdown: `flip:dir-block`, `field:sb`,
    /// `semantic:dir-loop`, `debugfs:clri`.
    pub fn class(&self) -> String {
        match self {
            Step::Flip { class, xor, .. } => {
                let what = if xor.count_ones() == 1 { "bit" } else { "byte" };
                format!("{what}:{class}")
            }
            Step::Corrupt { args } => {
                let mode = args.first().map_or("", |a| a.trim_start_matches("--"));
                let target = args.get(1).map_or("", String::as_str);
                let target = if mode == "field" {
                    target.split(['[', '.']).next().unwrap_or("")
                } else {
                    target
                };
                format!("{mode}:{target}")
            }
            Step::Debugfs { cmds } => {
                let verb = |c: &String| c.split_whitespace().next().unwrap_or("").to_string();
                match cmds.as_slice() {
                    [one] => format!("debugfs:{}", verb(one)),
                    _ if cmds.iter().any(|c| c.contains("last_orphan")) => {
                        "debugfs:orphan-chain".into()
                    }
                    _ => format!(
                        "debugfs:{}",
                        cmds.iter().map(verb).collect::<Vec<_>>().join("+")
                    ),
                }
            }
        }
    }
}

/// Where things are on the undamaged image.
#[derive(Debug, Clone, Default)]
pub struct Layout {
    pub bs: u64,
    pub inode_size: u64,
    pub inodes_per_group: u64,
    pub inodes_count: u64,
    pub blocks_count: u64,
    /// Per group: superblock copy, descriptor blocks, bitmaps, inode table start.
    pub groups: Vec<Group>,
    /// By path (or `<N>` for special inodes).
    pub inodes: BTreeMap<String, InodeInfo>,
    pub metadata_csum: bool,
    /// The MMP block (`mmp` feature).
    pub mmp: Option<u64>,
}

#[derive(Debug, Clone, Default)]
pub struct Group {
    pub sb: Option<u64>,
    pub gdt: Option<(u64, u64)>,
    pub block_bitmap: Option<u64>,
    pub inode_bitmap: Option<u64>,
    pub inode_table: Option<u64>,
}

#[derive(Debug, Clone, Default)]
pub struct InodeInfo {
    pub ino: u64,
    pub dir: bool,
    pub acl: u64,
    /// Data blocks (at most [`MAX_BLOCKS`] of them).
    pub data: Vec<u64>,
    /// Mapping blocks, tagged: `ETB0`, `IND`, `DIND`…
    pub meta: Vec<(String, u64)>,
}

const MAX_BLOCKS: usize = 256;

fn num(s: &str) -> Option<u64> {
    let s = s.trim().trim_end_matches(',');
    s.parse().ok()
}

/// `a-b` or `a`.
fn range(s: &str) -> Option<(u64, u64)> {
    match s.split_once('-') {
        Some((a, b)) => Some((num(a)?, num(b)?)),
        None => num(s).map(|a| (a, a)),
    }
}

fn after<'a>(line: &'a str, key: &str) -> Option<&'a str> {
    line.find(key).map(|i| line[i + key.len()..].trim())
}

fn parse_dumpe2fs(text: &str, l: &mut Layout) {
    for line in text.lines() {
        let t = line.trim();
        let field = |k: &str| t.strip_prefix(k).and_then(|v| num(v.trim()));
        if let Some(v) = field("Block size:") {
            l.bs = v;
        } else if let Some(v) = field("Inode size:") {
            l.inode_size = v;
        } else if let Some(v) = field("Inodes per group:") {
            l.inodes_per_group = v;
        } else if let Some(v) = field("Inode count:") {
            l.inodes_count = v;
        } else if let Some(v) = field("Block count:") {
            l.blocks_count = v;
        } else if let Some(v) = field("MMP block number:") {
            l.mmp = Some(v);
        } else if t.starts_with("Filesystem features:") {
            l.metadata_csum = t.contains("metadata_csum");
        } else if t.starts_with("Group ") && t.contains("(Blocks") {
            l.groups.push(Group::default());
        }
        let Some(g) = l.groups.last_mut() else {
            continue;
        };
        for part in t.split(", ") {
            let word = |k: &str| after(part, k).and_then(|v| v.split_whitespace().next());
            if let Some(v) = word("superblock at") {
                g.sb = num(v);
            }
            if let Some(v) = word("Group descriptors at") {
                g.gdt = range(v);
            }
            if let Some(v) = word("Block bitmap at") {
                g.block_bitmap = num(v);
            }
            if let Some(v) = word("Inode bitmap at") {
                g.inode_bitmap = num(v);
            }
            if let Some(v) = word("Inode table at") {
                g.inode_table = range(v).map(|r| r.0);
            }
        }
    }
}

/// Parses one `stat` output.
fn parse_stat(text: &str) -> Option<InodeInfo> {
    let mut info = InodeInfo::default();
    let mut in_blocks = false;
    for line in text.lines() {
        if let Some(v) = line.strip_prefix("Inode:") {
            info.ino = num(v.split_whitespace().next()?)?;
            info.dir = line.contains("Type: directory");
        } else if let Some(v) = after(line, "File ACL:") {
            info.acl = num(v.split_whitespace().next().unwrap_or("0")).unwrap_or(0);
        } else if line.starts_with("BLOCKS:") || line.starts_with("EXTENTS:") {
            in_blocks = true;
        } else if in_blocks && !line.starts_with("TOTAL") {
            for tok in line.split(", ") {
                let Some((tag, phys)) = tok.trim().split_once("):") else {
                    continue;
                };
                let tag = tag.trim_start_matches('(');
                let Some((a, b)) = range(phys) else { continue };
                if tag.starts_with(|c: char| c.is_ascii_digit()) {
                    for blk in a..=b.min(a + MAX_BLOCKS as u64) {
                        if info.data.len() < MAX_BLOCKS {
                            info.data.push(blk);
                        }
                    }
                } else if info.meta.len() < MAX_BLOCKS {
                    info.meta.push((tag.to_string(), a));
                }
            }
        }
    }
    (info.ino != 0).then_some(info)
}

/// Reads the layout of `image` with dumpe2fs and one debugfs run over the catalog.
pub fn layout(tools: &super::case::Tools, image: &Path, cat: &Catalog) -> Result<Layout> {
    let out = Command::new(&tools.dumpe2fs)
        .arg(image)
        .env("E2FSCK_CONFIG", "/dev/null")
        .output()
        .context("running dumpe2fs")?;
    let mut l = Layout::default();
    let text = String::from_utf8_lossy(&out.stdout);
    parse_dumpe2fs(&text, &mut l);
    if l.bs == 0 || l.groups.is_empty() {
        bail!("dumpe2fs gave no layout");
    }
    let mut specials: Vec<String> = ["<7>", "<8>", "<3>", "<4>"].map(String::from).into();
    for key in ["Project quota inode:", "Orphan file inode:"] {
        if let Some(v) = text.lines().find_map(|x| x.strip_prefix(key)) {
            specials.push(format!("<{}>", v.trim()));
        }
    }
    let names: Vec<&String> = cat
        .dirs
        .iter()
        .chain(&cat.files)
        .chain(&cat.symlinks)
        .chain(&cat.specials)
        .chain(&specials)
        .collect();
    let script: String = names.iter().map(|p| format!("stat {p}\n")).collect();
    let out = Command::new(&tools.debugfs)
        .arg("-f")
        .arg("-")
        .arg(image)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .and_then(|mut c| {
            use std::io::Write;
            c.stdin.take().unwrap().write_all(script.as_bytes())?;
            c.wait_with_output()
        })
        .context("running debugfs stat")?;
    let text = String::from_utf8_lossy(&out.stdout);
    for chunk in text.split("debugfs: stat ").skip(1) {
        let (name, body) = chunk.split_once('\n').unwrap_or((chunk, ""));
        if let Some(info) = parse_stat(body) {
            l.inodes.insert(name.trim().to_string(), info);
        }
    }
    Ok(l)
}

fn pick<'a, T>(rng: &mut ChaCha8Rng, v: &'a [T]) -> Option<&'a T> {
    (!v.is_empty()).then(|| &v[rng.random_range(0..v.len())])
}

/// The metadata classes a flip can aim at, with the blocks (or byte ranges) of each.
fn flip_targets(l: &Layout) -> Vec<(&'static str, Vec<(u64, u64)>)> {
    let bs = l.bs;
    let blocks = |v: Vec<u64>| v.into_iter().map(|b| (b * bs, bs)).collect::<Vec<_>>();
    let mut t: Vec<(&'static str, Vec<(u64, u64)>)> = vec![("superblock", vec![(1024, 1024)])];
    let backups: Vec<u64> = l.groups.iter().skip(1).filter_map(|g| g.sb).collect();
    t.push((
        "sb-backup",
        backups.iter().map(|&b| (b * bs, 1024)).collect(),
    ));
    let g0 = &l.groups[0];
    if let Some((a, _)) = g0.gdt {
        let len = (l.groups.len() as u64 * 64).min(bs);
        t.push(("group-desc", vec![(a * bs, len)]));
    }
    t.push((
        "block-bitmap",
        blocks(l.groups.iter().filter_map(|g| g.block_bitmap).collect()),
    ));
    t.push((
        "inode-bitmap",
        blocks(l.groups.iter().filter_map(|g| g.inode_bitmap).collect()),
    ));
    let mut itab = Vec::new();
    for info in l.inodes.values() {
        let (ipg, isz) = (l.inodes_per_group.max(1), l.inode_size);
        let g = ((info.ino - 1) / ipg) as usize;
        if let Some(start) = l.groups.get(g).and_then(|g| g.inode_table) {
            itab.push((start * bs + ((info.ino - 1) % ipg) * isz, isz.min(160)));
        }
    }
    t.push(("inode-table", itab));
    let of = |f: &dyn Fn(&String, &InodeInfo) -> bool, meta: bool| -> Vec<u64> {
        l.inodes
            .iter()
            .filter(|(p, i)| f(p, i))
            .flat_map(|(_, i)| {
                if meta {
                    i.meta.iter().map(|m| m.1).collect::<Vec<_>>()
                } else {
                    i.data.clone()
                }
            })
            .collect()
    };
    let big = |p: &String, _: &InodeInfo| p == "/big";
    t.push(("dir-block", blocks(of(&|p, i| i.dir && p != "/big", false))));
    t.push((
        "htree-node",
        blocks(of(&big, false).into_iter().take(2).collect()),
    ));
    if l.metadata_csum {
        let tails = of(&|_, i| i.dir, false);
        t.push((
            "dir-tail",
            tails.iter().map(|&b| (b * bs + bs - 12, 12)).collect(),
        ));
    }
    let with_tag = |pfx: &str| -> Vec<u64> {
        l.inodes
            .iter()
            .filter(|(p, _)| !p.starts_with('<'))
            .flat_map(|(_, i)| i.meta.iter().filter(|m| m.0.starts_with(pfx)).map(|m| m.1))
            .collect()
    };
    t.push(("extent-block", blocks(with_tag("ETB"))));
    let mut ind = with_tag("IND");
    ind.extend(with_tag("DIND"));
    t.push(("indirect-block", blocks(ind)));
    let acls: Vec<u64> = l
        .inodes
        .values()
        .map(|i| i.acl)
        .filter(|&a| a != 0)
        .collect();
    t.push(("xattr-block", blocks(acls)));
    let special = |k: &str| l.inodes.get(k).map(|i| i.data.clone()).unwrap_or_default();
    let journal = special("<8>");
    if let Some(&first) = journal.first() {
        t.push(("journal-sb", vec![(first * bs, 1024)]));
        t.push((
            "journal-block",
            blocks(journal.into_iter().skip(1).take(8).collect()),
        ));
    }
    let resize = l
        .inodes
        .get("<7>")
        .map(|i| i.meta.iter().map(|m| m.1).collect());
    t.push(("resize-inode", blocks(resize.unwrap_or_default())));
    let mut quota = special("<3>");
    quota.extend(special("<4>"));
    let extra: Vec<&InodeInfo> = l
        .inodes
        .iter()
        .filter(|(k, _)| k.starts_with('<') && !["<3>", "<4>", "<7>", "<8>"].contains(&k.as_str()))
        .map(|x| x.1)
        .collect();
    // Project quota and orphan file: told apart by dumpe2fs's order (project first).
    for i in extra {
        quota.extend(i.data.iter().take(4));
    }
    t.push(("quota-or-orphan-file", blocks(quota)));
    // The MMP block: its defined first 1024 bytes.
    t.push((
        "mmp-block",
        l.mmp.map(|b| vec![(b * bs, 1024)]).unwrap_or_default(),
    ));
    t.retain(|(_, v)| !v.is_empty());
    t
}

/// A flip aimed at a random metadata class.
fn draw_flip(l: &Layout, rng: &mut ChaCha8Rng) -> Option<Step> {
    let targets = flip_targets(l);
    let (class, regions) = pick(rng, &targets)?;
    let &(start, len) = pick(rng, regions)?;
    // Superblocks: mostly the fields in use.
    let len = if class.contains("sb") || *class == "superblock" {
        if rng.random_bool(0.8) {
            0x180
        } else {
            len
        }
    } else {
        len
    };
    let offset = start + rng.random_range(0..len.max(1));
    let xor = if rng.random_bool(0.5) {
        1u8 << rng.random_range(0..8)
    } else {
        rng.random_range(1..=255)
    };
    Some(Step::Flip {
        class: class.to_string(),
        offset,
        xor,
    })
}

const VERBS: [&str; 8] = [
    "zero",
    "ones",
    "firstbit",
    "middlebit",
    "lastbit",
    "add",
    "sub",
    "random",
];

fn ino_of(l: &Layout, paths: &[String], rng: &mut ChaCha8Rng) -> Option<u64> {
    let p = pick(rng, paths)?;
    l.inodes.get(p).map(|i| i.ino)
}

/// A `corrupt` step: a field edit, a semantic edit or a Table II corruption.
fn draw_corrupt(l: &Layout, cat: &Catalog, rng: &mut ChaCha8Rng) -> Option<Step> {
    let seed: u64 = rng.random_range(0..1_000_000);
    let name = |t: &[fields::Field], rng: &mut ChaCha8Rng| pick(rng, t).map(|f| f.0.to_string());
    let mut args: Vec<String> = match rng.random_range(0..10) {
        0..=5 => {
            let spec = match rng.random_range(0..8) {
                0 => format!("sb.{}", name(fields::SUPERBLOCK, rng)?),
                1 => format!(
                    "gd[{}].{}",
                    rng.random_range(0..l.groups.len()),
                    name(fields::GROUP_DESC, rng)?
                ),
                2 => format!(
                    "extent[{}].{}",
                    ino_of(l, &cat.files, rng)?,
                    name(fields::EXTENT_HEADER, rng)?
                ),
                3 => format!(
                    "dirent[{}][{}].{}",
                    ino_of(l, &cat.dirs, rng)?,
                    rng.random_range(0..4),
                    name(fields::DIRENT, rng)?
                ),
                4 => format!(
                    "dx[{}].{}",
                    l.inodes.get(&cat.big_dir)?.ino,
                    name(fields::DX_ROOT, rng)?
                ),
                5 => format!(
                    "xattr[{}].{}",
                    ino_of(l, &cat.xattr_files, rng)?,
                    name(fields::XATTR_HEADER, rng)?
                ),
                6 => format!("jsb.{}", name(fields::JOURNAL_SB, rng)?),
                _ => {
                    let all: Vec<String> = cat.files.iter().chain(&cat.dirs).cloned().collect();
                    format!(
                        "inode[{}].{}",
                        ino_of(l, &all, rng)?,
                        name(fields::INODE, rng)?
                    )
                }
            };
            let op = pick(rng, &VERBS)?.to_string();
            vec!["--field".into(), spec, "--op".into(), op]
        }
        6..=8 => {
            let s = pick(rng, crate::corrupt::Semantic::value_variants())?;
            let v = s.to_possible_value()?.get_name().to_string();
            vec!["--semantic".into(), v]
        }
        _ => {
            let t = pick(rng, &crate::corrupt::Table2::ALL)?;
            vec!["--table2".into(), t.name()]
        }
    };
    let csum = if rng.random_bool(0.5) { "stale" } else { "fix" };
    args.extend([
        "--seed".into(),
        seed.to_string(),
        "--csum".into(),
        csum.into(),
    ]);
    Some(Step::Corrupt { args })
}

/// A debugfs semantic edit.
fn draw_debugfs(l: &Layout, cat: &Catalog, rng: &mut ChaCha8Rng) -> Option<Step> {
    let file = pick(rng, &cat.files)?.clone();
    let dirs: Vec<String> = cat
        .dirs
        .iter()
        .filter(|d| *d != "/" && *d != "/lost+found")
        .cloned()
        .collect();
    let dir = pick(rng, &dirs)?.clone();
    let any = if rng.random_bool(0.5) {
        file.clone()
    } else {
        dir.clone()
    };
    let data_block = |rng: &mut ChaCha8Rng| -> Option<u64> {
        let owners: Vec<&InodeInfo> = l
            .inodes
            .values()
            .filter(|i| !i.data.is_empty() && i.ino > 10)
            .collect();
        let i = pick(rng, &owners)?;
        pick(rng, &i.data).copied()
    };
    let g = rng.random_range(0..l.groups.len());
    let small: u64 = rng.random_range(0..5);
    let cmd = match rng.random_range(0..22) {
        0 | 1 => format!("clri {any}"),
        2 => format!("freei {any}"),
        3 => format!("freeb {}", data_block(rng)?),
        4 => format!(
            "setb {}",
            l.blocks_count.saturating_sub(1 + rng.random_range(0..64))
        ),
        5 => format!(
            "seti <{}>",
            l.inodes_count.saturating_sub(rng.random_range(0..16))
        ),
        6 => format!("unlink {any}"),
        7 => format!("link {file} {dir}/extra_link"),
        8 => format!("link {dir} {}/loop", pick(rng, &dirs)?),
        9 => format!("sif {any} links_count {small}"),
        10 => format!(
            "sif {any} mode 0{:o}",
            pick(rng, &[0u32, 0o100644, 0o40755, 0o120777, 0o20644])?
        ),
        11 => format!("sif {any} size {}", rng.random_range(0..1u64 << 34)),
        12 => format!("sif {any} dtime 1577836800"),
        13 => format!(
            "sif {any} flags 0x{:x}",
            pick(rng, &[0u32, 0x80000, 0x1000, 0x10000000, 0x4000_0000])?
        ),
        14 => format!(
            "sif {file} block[{}] {}",
            rng.random_range(0..3),
            data_block(rng)?
        ),
        15 => format!("sif {file} file_acl {}", data_block(rng)?),
        16 => format!(
            "sif <7> block[DIND] {}",
            pick(rng, &[0u64, 1, l.blocks_count + 5])?
        ),
        17 => format!(
            "ssv {} {}",
            pick(
                rng,
                &[
                    "free_blocks_count",
                    "free_inodes_count",
                    "state",
                    "mnt_count",
                    "first_ino",
                    "last_orphan",
                    "rev_level",
                    "inodes_count"
                ]
            )?,
            pick(rng, &[0u64, 1, 11, 4096, 1 << 31])?
        ),
        18 => format!(
            "set_bg {g} {} {}",
            pick(
                rng,
                &[
                    "free_blocks_count",
                    "free_inodes_count",
                    "used_dirs_count",
                    "flags",
                    "itable_unused",
                    "checksum"
                ]
            )?,
            pick(rng, &[0u64, 1, 7, 100])?
        ),
        19 => format!("sif {} flags 0", cat.big_dir),
        20 => return orphan_chain(l, cat, rng),
        _ => format!("rm {file}"),
    };
    Some(Step::Debugfs { cmds: vec![cmd] })
}

/// Two in-use files turned into an orphan chain (links 0, dtime as next pointer), or one
/// in-use file put on the orphan list.
fn orphan_chain(l: &Layout, cat: &Catalog, rng: &mut ChaCha8Rng) -> Option<Step> {
    let a = pick(rng, &cat.files)?;
    let b = pick(rng, &cat.files)?;
    let ia = l.inodes.get(a)?.ino;
    let ib = l.inodes.get(b)?.ino;
    let mut cmds = vec![format!("sif {a} links_count 0")];
    if ia != ib && rng.random_bool(0.5) {
        cmds.push(format!("sif {a} dtime {ib}"));
        cmds.push(format!("sif {b} links_count 0"));
    } else if rng.random_bool(0.5) {
        // An in-use inode on the list.
        cmds[0] = format!("sif {a} dtime 0");
    }
    cmds.push(format!("ssv last_orphan {ia}"));
    Some(Step::Debugfs { cmds })
}

/// Draws one step.
pub fn draw(l: &Layout, cat: &Catalog, rng: &mut ChaCha8Rng) -> Option<Step> {
    match rng.random_range(0..10) {
        0..=3 => draw_flip(l, rng),
        4..=6 => draw_corrupt(l, cat, rng),
        _ => draw_debugfs(l, cat, rng),
    }
}

fn file_hash(path: &Path) -> u64 {
    std::fs::read(path).map_or(0, |b| {
        b.chunks(8).fold(0xcbf2_9ce4_8422_2325u64, |h, c| {
            let mut w = [0u8; 8];
            w[..c.len()].copy_from_slice(c);
            (h ^ u64::from_le_bytes(w)).wrapping_mul(0x0000_0100_0000_01b3)
        })
    })
}

/// Applies one step to `image`; `Ok(false)` when it changed nothing (a debugfs command that
/// failed, a corrupt draw that does not apply here).
pub fn apply(step: &Step, image: &Path, tools: &super::case::Tools, tmp: &Path) -> Result<bool> {
    match step {
        Step::Flip { offset, xor, .. } => {
            let f = std::fs::OpenOptions::new()
                .read(true)
                .write(true)
                .open(image)?;
            let mut b = [0u8; 1];
            if f.read_exact_at(&mut b, *offset).is_err() {
                return Ok(false);
            }
            b[0] ^= xor;
            f.write_all_at(&b, *offset)?;
            Ok(true)
        }
        Step::Corrupt { args } => {
            let manifest = tmp.join("corrupt.json");
            let mut argv: Vec<&str> = args.iter().map(String::as_str).collect();
            let img = image.to_string_lossy();
            let man = manifest.to_string_lossy();
            argv.extend(["--image", &img, "--manifest", &man]);
            let parsed: crate::corrupt::CorruptArgs = crate::parse_args(&argv)?;
            Ok(crate::corrupt::run(&parsed).is_ok_and(|m| !m.changes.is_empty()))
        }
        Step::Debugfs { cmds } => {
            let before = file_hash(image);
            let script = tmp.join("damage.debugfs");
            std::fs::write(&script, cmds.join("\n") + "\n")?;
            let mut cmd = Command::new(&tools.debugfs);
            cmd.arg("-w").arg("-f").arg(&script).arg(image);
            run_logged(&mut cmd, &tmp.join("damage.log"), "debugfs")?;
            Ok(file_hash(image) != before)
        }
    }
}

/// Draws and applies up to `n` steps (each redrawn until it applies, a bounded number of
/// times); returns the applied steps.
pub fn draw_and_apply(
    n: usize,
    l: &Layout,
    cat: &Catalog,
    image: &Path,
    tools: &super::case::Tools,
    tmp: &Path,
    rng: &mut ChaCha8Rng,
) -> Result<Vec<Step>> {
    let mut steps = Vec::new();
    for _ in 0..n {
        for _ in 0..16 {
            let Some(step) = draw(l, cat, rng) else {
                continue;
            };
            if apply(&step, image, tools, tmp)? {
                steps.push(step);
                break;
            }
        }
    }
    Ok(steps)
}
