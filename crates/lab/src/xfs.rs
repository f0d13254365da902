//! XFS images for the lab, driven through xfsprogs: `mkfs.xfs -p PROTOFILE` packs a generated
//! tree without mounting, `xfs_db blocktrash -t TYPE` damages one kind of metadata block (the
//! xfsAttack method of the seed's e2fsck vs xfs_repair comparison) and the bytes it changed
//! are logged as a manifest, and `xfs_db -r` answers geometry and fragmentation questions.

use std::fs::File;
use std::io::{Read, Write};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use anyhow::{anyhow, bail, Context, Result};
use serde::Serialize;

use crate::change::{hex, Change};

/// mkfs.xfs refuses smaller data sections (outside fstests).
pub const MIN_BYTES: u64 = 300 << 20;
/// Largest sector size mkfs.xfs accepts.
const MAX_SECTOR: u32 = 32768;
/// Bound on the trashings of one `corrupt` call.
pub const MAX_TRASHINGS: u32 = 1024;
/// Bound on the entries written into a proto file (the generator makes far fewer).
const MAX_PROTO_ENTRIES: usize = 50_000_000;

/// Finds an xfsprogs program, with an install hint when it is missing.
pub fn tool(name: &str) -> Result<PathBuf> {
    crate::tools::find_in_path(name).ok_or_else(|| {
        anyhow!(
            "`{name}` not found on PATH or in /usr/sbin, /sbin; install xfsprogs \
             (scripts/ensure-tools.sh does on Debian)"
        )
    })
}

/// True when all of mkfs.xfs, xfs_repair and xfs_db are installed.
pub fn available() -> bool {
    ["mkfs.xfs", "xfs_repair", "xfs_db"]
        .iter()
        .all(|t| crate::tools::find_in_path(t).is_some())
}

/// True when the image starts with an XFS superblock.
pub fn is_xfs(image: &Path) -> bool {
    let mut magic = [0u8; 4];
    File::open(image)
        .and_then(|mut f| f.read_exact(&mut magic))
        .is_ok_and(|()| &magic == b"XFSB")
}

/// Metadata block types that `xfs_db blocktrash -t` selects (its own names).
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
#[value(rename_all = "lowercase")]
pub enum BlockType {
    /// Superblocks (AG 0's primary and the secondaries).
    Sb,
    /// AG free-space headers.
    Agf,
    /// AG free lists.
    Agfl,
    /// AG inode headers.
    Agi,
    /// Inode chunks.
    Inode,
    /// Directory blocks.
    Dir,
    /// Free-space B+tree by block number.
    Btbno,
    /// Free-space B+tree by size.
    Btcnt,
    /// Inode B+tree.
    Btino,
    /// Free-inode B+tree.
    Btfino,
    /// Data-fork block-map B+tree (bmbt).
    Btbmapd,
    /// Attribute-fork block-map B+tree.
    Btbmapa,
    /// Reference-count B+tree (reflink).
    Btrefcnt,
    /// Reverse-mapping B+tree.
    Btrmap,
    /// Extended-attribute blocks.
    Attr,
    /// Remote symlink blocks.
    Symlink,
    /// The internal log.
    Log,
}

impl BlockType {
    /// The name xfs_db (and `corrupt --xfs-blocktrash`) uses.
    pub fn name(self) -> String {
        use clap::ValueEnum;
        self.to_possible_value()
            .map_or_else(|| "?".into(), |v| v.get_name().to_string())
    }
}

/// Geometry read with `xfs_db -r`.
#[derive(Debug, Clone, Copy)]
pub struct Geometry {
    pub block_size: u64,
    pub ag_blocks: u64,
    pub ag_count: u64,
}

fn run_db(image: &Path, expert: bool, commands: &[&str]) -> Result<String> {
    let db = tool("xfs_db")?;
    let mut cmd = Command::new(&db);
    cmd.arg(if expert { "-x" } else { "-r" });
    for c in commands {
        cmd.args(["-c", c]);
    }
    let out = cmd
        .arg(image)
        .stdin(Stdio::null())
        .output()
        .context("running xfs_db")?;
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    if !out.status.success() {
        bail!(
            "xfs_db {commands:?} on {} failed: {}",
            image.display(),
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    Ok(text)
}

/// Block size and AG layout from the primary superblock.
pub fn geometry(image: &Path) -> Result<Geometry> {
    let text = run_db(image, false, &["sb 0", "p blocksize agblocks agcount"])?;
    let field = |name: &str| -> Result<u64> {
        text.lines()
            .find_map(|l| {
                l.strip_prefix(name)?
                    .trim()
                    .strip_prefix('=')?
                    .trim()
                    .parse()
                    .ok()
            })
            .ok_or_else(|| anyhow!("xfs_db printed no {name} for {}", image.display()))
    };
    let g = Geometry {
        block_size: field("blocksize")?,
        ag_blocks: field("agblocks")?,
        ag_count: field("agcount")?,
    };
    if !(512..=65536).contains(&g.block_size) || g.ag_blocks == 0 || g.ag_count == 0 {
        bail!("implausible XFS geometry {g:?} in {}", image.display());
    }
    Ok(g)
}

/// `xfs_db -r -c frag`'s summary line ("actual N, ideal M, fragmentation factor F%").
pub fn frag_report(image: &Path) -> Result<String> {
    let text = run_db(image, false, &["frag"])?;
    text.lines()
        .find(|l| l.starts_with("actual"))
        .map(str::to_string)
        .ok_or_else(|| anyhow!("xfs_db frag printed no summary: {text}"))
}

/// Shape of an XFS image to build.
#[derive(Debug, Clone)]
pub struct MkfsSpec {
    pub bytes: u64,
    pub block_size: u32,
    pub inode_size: u32,
    /// The file system's UUID (seeded by the caller, so the same seed gives the same image).
    pub uuid: String,
}

/// Writes the proto file describing `root` (sorted, so the same tree gives the same file).
pub fn write_proto(root: &Path, proto: &Path) -> Result<()> {
    let mut out = std::io::BufWriter::new(
        File::create(proto).with_context(|| format!("creating {}", proto.display()))?,
    );
    writeln!(out, "ffsck-lab\n0 0\nd--755 0 0")?;
    let mut entries = 0usize;
    proto_dir(root, &mut out, &mut entries)?;
    writeln!(out, "$")?;
    out.flush()?;
    Ok(())
}

/// Proto tokens are separated by white space and `:` starts a comment: refuse such names.
fn proto_token(s: &str) -> Result<&str> {
    if s.is_empty() || s.contains(|c: char| c.is_whitespace() || c == ':' || c == '$') {
        bail!("`{s}` cannot be written into an XFS proto file");
    }
    Ok(s)
}

fn proto_dir(dir: &Path, out: &mut impl Write, entries: &mut usize) -> Result<()> {
    let mut children: Vec<_> = std::fs::read_dir(dir)
        .with_context(|| format!("reading {}", dir.display()))?
        .collect::<std::io::Result<_>>()?;
    children.sort_by_key(|e| e.file_name());
    for e in children {
        *entries += 1;
        if *entries > MAX_PROTO_ENTRIES {
            bail!("tree too large for a proto file");
        }
        let name = e.file_name().to_string_lossy().into_owned();
        let path = e.path();
        if e.file_type()?.is_dir() {
            writeln!(out, "{} d--755 0 0", proto_token(&name)?)?;
            proto_dir(&path, out, entries)?;
            writeln!(out, "$")?;
        } else {
            let source = path.to_string_lossy();
            writeln!(
                out,
                "{} ---644 0 0 {}",
                proto_token(&name)?,
                proto_token(&source)?
            )?;
        }
    }
    Ok(())
}

/// Packs the tree at `tree` into a fresh image with `mkfs.xfs -p`. The sector size equals the
/// block size (up to 32 KiB), so the AG headers (sb, agf, agi, agfl) each own a block and
/// `blocktrash -t agf` can find them. Returns the arguments, with the proto file and image
/// written as `PROTO` and `IMAGE`.
pub fn mkfs(spec: &MkfsSpec, tree: &Path, image: &Path, mkfs_xfs: &Path) -> Result<Vec<String>> {
    if spec.bytes < MIN_BYTES {
        bail!(
            "XFS images need at least {} MiB (asked for {} MiB)",
            MIN_BYTES >> 20,
            spec.bytes >> 20
        );
    }
    let proto = image.with_extension("proto");
    write_proto(tree, &proto)?;
    match std::fs::remove_file(image) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(e).with_context(|| format!("removing old {}", image.display())),
    }
    File::create(image)
        .and_then(|f| f.set_len(spec.bytes))
        .with_context(|| format!("creating {}", image.display()))?;
    let args: Vec<String> = vec![
        "-q".into(),
        "-f".into(),
        "-b".into(),
        format!("size={}", spec.block_size),
        "-s".into(),
        format!("size={}", spec.block_size.min(MAX_SECTOR)),
        "-i".into(),
        format!("size={}", spec.inode_size),
        "-m".into(),
        format!("uuid={}", spec.uuid),
        "-p".into(),
        "PROTO".into(),
        "IMAGE".into(),
    ];
    let mut cmd = Command::new(mkfs_xfs);
    for a in &args {
        match a.as_str() {
            "PROTO" => cmd.arg(&proto),
            "IMAGE" => cmd.arg(image),
            _ => cmd.arg(a),
        };
    }
    let out = cmd
        .stdin(Stdio::null())
        .output()
        .context("running mkfs.xfs")?;
    let _ = std::fs::remove_file(&proto);
    if !out.status.success() {
        bail!(
            "mkfs.xfs failed ({}): {}",
            out.status,
            String::from_utf8_lossy(&[out.stderr, out.stdout].concat())
                .lines()
                .take(10)
                .collect::<Vec<_>>()
                .join(" / ")
        );
    }
    Ok(args)
}

/// How blocktrash changes the chosen bits (its `-0`…`-3`).
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum TrashMode {
    Clear,
    Set,
    Invert,
    Randomize,
}

impl TrashMode {
    fn flag(self) -> &'static str {
        match self {
            TrashMode::Clear => "-0",
            TrashMode::Set => "-1",
            TrashMode::Invert => "-2",
            TrashMode::Randomize => "-3",
        }
    }
}

/// One trashing as xfs_db reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Trashed {
    ag: u64,
    ag_block: u64,
    line: String,
}

/// Reads `blocktrash: AG/AGBNO TYPE block LEN bits starting BYTE:BIT MODE` lines.
fn parse_trashed(text: &str) -> Vec<Trashed> {
    text.lines()
        .filter_map(|l| {
            let rest = l.strip_prefix("blocktrash: ")?;
            let (ag, rest) = rest.split_once('/')?;
            let ag_block = rest.split_whitespace().next()?;
            Some(Trashed {
                ag: ag.parse().ok()?,
                ag_block: ag_block.parse().ok()?,
                line: rest.to_string(),
            })
        })
        .collect()
}

/// Copies `src` to `dst`, only its data regions: the holes stay holes.
pub fn sparse_copy(src: &Path, dst: &Path) -> Result<()> {
    let from = File::open(src).with_context(|| format!("opening {}", src.display()))?;
    let to = File::create(dst).with_context(|| format!("creating {}", dst.display()))?;
    let mut buf = vec![0u8; 1 << 20];
    for (start, length) in crate::readonce::data_regions(src)? {
        let end = start + length;
        let mut at = start;
        while at < end {
            let n = (end - at).min(buf.len() as u64) as usize;
            from.read_exact_at(&mut buf[..n], at)?;
            to.write_all_at(&buf[..n], at)?;
            at += n as u64;
        }
    }
    to.set_len(from.metadata()?.len())?;
    Ok(())
}

/// What a blocktrash run did: xfs_db's own report and the bytes it changed.
pub struct Blocktrash {
    pub description: String,
    pub changes: Vec<Change>,
}

/// Runs `xfs_db -x -c blockget -c 'blocktrash -s SEED -n COUNT MODE -t TYPE'` on the image
/// and logs every changed byte of the blocks it names (compared with a copy taken before).
pub fn blocktrash(
    image: &Path,
    kind: BlockType,
    seed: u64,
    count: u32,
    mode: TrashMode,
) -> Result<Blocktrash> {
    if !(1..=MAX_TRASHINGS).contains(&count) {
        bail!("--xfs-count must be in 1..={MAX_TRASHINGS}");
    }
    let seed = u32::try_from(seed).map_err(|_| anyhow!("xfs_db takes a 32-bit --seed"))?;
    if !is_xfs(image) {
        bail!("{} is not an XFS image", image.display());
    }
    let geo = geometry(image)?;
    let mut before = image.as_os_str().to_owned();
    before.push(".before-blocktrash");
    let before = PathBuf::from(before);
    sparse_copy(image, &before)?;
    let trash = format!(
        "blocktrash -s {seed} -n {count} {} -t {}",
        mode.flag(),
        kind.name()
    );
    let result = run_db(image, true, &["blockget", &trash]).and_then(|text| {
        let trashed = parse_trashed(&text);
        if trashed.is_empty() {
            bail!(
                "blocktrash changed nothing: {} (no `{}` blocks in this image?)",
                text.trim(),
                kind.name()
            );
        }
        let changes = diff_blocks(&before, image, &geo, &trashed, kind)?;
        let description = format!(
            "xfs_db {trash}: {}",
            trashed
                .iter()
                .map(|t| format!("{}/{}", t.ag, t.line))
                .collect::<Vec<_>>()
                .join("; ")
        );
        Ok(Blocktrash {
            description,
            changes,
        })
    });
    let _ = std::fs::remove_file(&before);
    result
}

/// Byte runs that differ between `before` and `after` in each trashed block (once per block).
fn diff_blocks(
    before: &Path,
    after: &Path,
    geo: &Geometry,
    trashed: &[Trashed],
    kind: BlockType,
) -> Result<Vec<Change>> {
    let (old_f, new_f) = (File::open(before)?, File::open(after)?);
    let len = new_f.metadata()?.len();
    let bs = geo.block_size;
    let mut blocks: Vec<(u64, u64)> = trashed.iter().map(|t| (t.ag, t.ag_block)).collect();
    blocks.sort_unstable();
    blocks.dedup();
    let (mut old, mut new) = (vec![0u8; bs as usize], vec![0u8; bs as usize]);
    let mut changes = Vec::new();
    for (ag, agbno) in blocks {
        if ag >= geo.ag_count || agbno >= geo.ag_blocks {
            bail!("xfs_db named block {ag}/{agbno} outside the file system");
        }
        let start = (ag.checked_mul(geo.ag_blocks))
            .and_then(|b| b.checked_add(agbno))
            .and_then(|b| b.checked_mul(bs))
            .filter(|&start| start.saturating_add(bs) <= len)
            .ok_or_else(|| anyhow!("block {ag}/{agbno} lies beyond the end of the image"))?;
        old_f.read_exact_at(&mut old, start)?;
        new_f.read_exact_at(&mut new, start)?;
        let mut i = 0;
        while i < old.len() {
            if old[i] == new[i] {
                i += 1;
                continue;
            }
            let run_start = i;
            while i < old.len() && old[i] != new[i] {
                i += 1;
            }
            changes.push(Change {
                offset: start + run_start as u64,
                field: format!("{} {ag}/{agbno}+{run_start:#x}", kind.name()),
                old: hex(&old[run_start..i]),
                new: hex(&new[run_start..i]),
                role: "damage".into(),
            });
        }
    }
    Ok(changes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn blocktrash_lines_parse() {
        let text = "blocktrash: 1/3 agfl block 168 bits starting 1898:1 randomized\n\
                    something else\nblocktrash: 0/17 inode block 1 bit starting 2:3 set\n";
        let t = parse_trashed(text);
        assert_eq!(t.len(), 2);
        assert_eq!((t[0].ag, t[0].ag_block), (1, 3));
        assert_eq!((t[1].ag, t[1].ag_block), (0, 17));
        assert!(parse_trashed("blocktrash: no matching blocks").is_empty());
    }

    #[test]
    fn proto_refuses_names_it_cannot_express() {
        assert!(proto_token("file001.dat").is_ok());
        for bad in ["a b", "a:b", "", "x$"] {
            assert!(proto_token(bad).is_err(), "{bad}");
        }
    }
}
