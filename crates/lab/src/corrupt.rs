//! `ffsck-lab corrupt`: reproducible, logged damage to an image, addressed by field name
//! (`inode[12].i_links_count`), by component and group (corruptFS-style one-byte flips), or by
//! meaning (a multiply-claimed block, an orphan, a directory loop, …). On XFS images,
//! `--xfs-blocktrash TYPE` has `xfs_db blocktrash` damage one kind of metadata block instead.
//!
//! Every byte written is listed in the manifest with its offset, old and new bytes and the
//! field it belongs to, checksum fix-ups included, so a test can verify that the image changed
//! exactly as logged. Structures are located by reading the image through `ffsck-format`;
//! nothing is trusted: every on-disk number is range-checked before it becomes an offset.

use std::fs::{File, OpenOptions};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

use anyhow::{anyhow, bail, Context, Result};
use ffsck_format::{
    csum, dir, fields, inode, inode::RawInode, journal::JournalSuperblock, xattr, Geometry,
    RawGroupDesc, RawSuperblock, SUPERBLOCK_OFFSET, SUPERBLOCK_SIZE,
};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde::{Deserialize, Serialize};

mod random;
pub mod table2;

use crate::change::hex;
pub use crate::change::{unhex, Change};
pub use table2::Table2;

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

/// Checksummed structures touched so far, fixed up at the end with `--csum fix`.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Dirty {
    Sb,
    Gd(u32),
    Inode(u32),
    /// A directory leaf block (physical block, owning directory).
    DirLeaf(u64, u32),
    /// An htree root or node block (physical block, owning directory, count offset).
    DxNode(u64, u32, usize),
    Xattr(u64),
    Jsb(u64),
    /// An extent-tree block below the root (physical block, owning inode).
    ExtentBlock(u64, u32),
}

/// The image, opened for reading and writing, with its geometry.
pub struct Image {
    file: File,
    sb: RawSuperblock,
    geo: Geometry,
    bs: u64,
    size: u64,
    changes: Vec<Change>,
    dirty: Vec<Dirty>,
}

impl Image {
    pub fn open(path: &Path) -> Result<Self> {
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .open(path)
            .with_context(|| format!("opening {}", path.display()))?;
        let size = file.metadata()?.len();
        let mut buf = vec![0u8; SUPERBLOCK_SIZE];
        file.read_exact_at(&mut buf, SUPERBLOCK_OFFSET)
            .context("reading the superblock")?;
        let sb = RawSuperblock::parse(&buf).ok_or_else(|| anyhow!("short superblock"))?;
        let geo = Geometry::new(&sb).map_err(|e| anyhow!("unusable superblock: {e:?}"))?;
        let bs = u64::from(geo.block_size);
        Ok(Image {
            file,
            sb,
            geo,
            bs,
            size,
            changes: Vec::new(),
            dirty: Vec::new(),
        })
    }

    /// Number of block groups.
    pub fn group_count(&self) -> u32 {
        self.geo.group_count
    }

    fn read(&self, off: u64, len: usize) -> Result<Vec<u8>> {
        if off
            .checked_add(len as u64)
            .is_none_or(|end| end > self.size)
        {
            bail!("offset {off:#x}+{len} lies beyond the image");
        }
        let mut buf = vec![0u8; len];
        self.file.read_exact_at(&mut buf, off)?;
        Ok(buf)
    }

    fn block(&self, b: u64) -> Result<Vec<u8>> {
        if b >= self.geo.blocks_count {
            bail!("block {b} is beyond the file system");
        }
        self.read(b * self.bs, self.bs as usize)
    }

    /// Writes `new` at `off`, logging it; refuses a write that changes nothing.
    fn write(&mut self, off: u64, new: &[u8], field: String, role: &str) -> Result<()> {
        let old = self.read(off, new.len())?;
        if old == new {
            if role == "checksum" {
                return Ok(());
            }
            bail!(
                "{field} already holds {}; the change would do nothing",
                hex(&old)
            );
        }
        self.file.write_all_at(new, off)?;
        self.changes.push(Change {
            offset: off,
            field,
            old: hex(&old),
            new: hex(new),
            role: role.into(),
        });
        Ok(())
    }

    fn mark(&mut self, d: Dirty) {
        if !self.dirty.contains(&d) {
            self.dirty.push(d);
        }
    }

    fn gd_offset(&self, g: u32) -> Result<u64> {
        if g >= self.geo.group_count {
            bail!("group {g} does not exist ({} groups)", self.geo.group_count);
        }
        let dpb = self.geo.descs_per_block;
        Ok(self.geo.desc_block(g / dpb) * self.bs
            + u64::from(g % dpb) * u64::from(self.geo.desc_size))
    }

    fn gd(&self, g: u32) -> Result<RawGroupDesc> {
        let ds = self.geo.desc_size as usize;
        Ok(RawGroupDesc::parse(&self.read(self.gd_offset(g)?, ds)?, ds))
    }

    fn inode_offset(&self, ino: u32) -> Result<u64> {
        if ino == 0 || ino > self.geo.inodes_count {
            bail!("inode {ino} does not exist");
        }
        let ipg = self.geo.inodes_per_group;
        let g = (ino - 1) / ipg;
        let table = self.gd(g)?.inode_table();
        Ok(table * self.bs + u64::from((ino - 1) % ipg) * u64::from(self.geo.inode_size))
    }

    fn inode(&self, ino: u32) -> Result<(Vec<u8>, RawInode)> {
        let raw = self.read(self.inode_offset(ino)?, self.geo.inode_size as usize)?;
        let parsed = RawInode::parse(&raw);
        Ok((raw, parsed))
    }

    fn inode_in_use(&self, ino: u32) -> Result<bool> {
        let (_, i) = self.inode(ino)?;
        Ok(i.mode() != 0 && i.links_count() > 0 && i.dtime() == 0)
    }

    /// Physical block of logical block `lblk` of `ino` (extents of any depth, or the direct
    /// and single-indirect block map); `None` for a hole.
    fn map_block(&self, ino: u32, lblk: u32) -> Result<Option<u64>> {
        let (_, i) = self.inode(ino)?;
        let root = i.block_bytes();
        if i.flags() & inode::flags::EXTENTS != 0 {
            let mut node = root.to_vec();
            for _ in 0..=ffsck_format::extent::MAX_DEPTH {
                let n = ffsck_format::extent::Node::parse(&node)
                    .map_err(|e| anyhow!("bad extent node of inode {ino}: {e:?}"))?;
                if n.is_leaf() {
                    for k in 0..n.len() {
                        let e = n.extent(k);
                        let (len, _) = e.len();
                        let first = e.ee_block.get();
                        if lblk >= first && lblk - first < len {
                            return Ok(Some(e.start() + u64::from(lblk - first)));
                        }
                    }
                    return Ok(None);
                }
                let next = (0..n.len())
                    .rev()
                    .map(|k| n.index(k))
                    .find(|ix| ix.ei_block.get() <= lblk)
                    .ok_or_else(|| anyhow!("no index covers block {lblk} of inode {ino}"))?;
                node = self.block(next.leaf())?;
            }
            bail!("extent tree of inode {ino} is too deep");
        }
        let ptr = |buf: &[u8], k: usize| -> u64 {
            u64::from(u32::from_le_bytes(
                buf[k * 4..k * 4 + 4].try_into().unwrap(),
            ))
        };
        if lblk < 12 {
            let b = ptr(&root, lblk as usize);
            return Ok((b != 0).then_some(b));
        }
        let per = self.bs / 4;
        if u64::from(lblk - 12) < per {
            let ind = ptr(&root, 12);
            if ind == 0 {
                return Ok(None);
            }
            let b = ptr(&self.block(ind)?, (lblk - 12) as usize);
            return Ok((b != 0).then_some(b));
        }
        bail!("block {lblk} of block-mapped inode {ino} is past the single-indirect range")
    }

    /// Physical block number of block 0 of directory `ino`.
    fn dir_block0(&self, ino: u32) -> Result<u64> {
        let (_, i) = self.inode(ino)?;
        if i.file_type() != inode::FileType::Directory {
            bail!("inode {ino} is not a directory");
        }
        self.map_block(ino, 0)?
            .ok_or_else(|| anyhow!("directory {ino} has no block 0"))
    }

    /// (offset in block, header) of every entry of a directory block.
    fn entries(&self, block: &[u8]) -> Vec<(usize, dir::DirentHeader)> {
        let mut out = Vec::new();
        let mut off = 0usize;
        while let Some(h) = dir::header_at(block, off, self.geo.block_size) {
            if h.rec_len < 8 || off + h.rec_len as usize > block.len() {
                break;
            }
            out.push((off, h));
            off += h.rec_len as usize;
        }
        out
    }

    fn journal_sb_offset(&self) -> Result<u64> {
        let jino = self.sb.s_journal_inum.get();
        if jino == 0 {
            bail!("the file system has no internal journal");
        }
        let b = self
            .map_block(jino, 0)?
            .ok_or_else(|| anyhow!("journal inode has no block 0"))?;
        Ok(b * self.bs)
    }

    /// Recomputes every checksum touched by the changes so far.
    fn fix_checksums(&mut self) -> Result<()> {
        let dirty = std::mem::take(&mut self.dirty);
        let fs_seed = self.sb.csum_seed();
        let meta = self.sb.has_metadata_csum();
        // Inodes and blocks first, the superblock last (its own fields may have changed).
        for d in &dirty {
            match *d {
                Dirty::Inode(ino) if meta => {
                    let off = self.inode_offset(ino)?;
                    let raw = self.read(off, self.geo.inode_size as usize)?;
                    let (c, _, has_hi) = inode::inode_checksum(&raw, fs_seed, ino);
                    self.write(
                        off + 0x7C,
                        &(c as u16).to_le_bytes(),
                        format!("inode[{ino}].l_i_checksum_lo"),
                        "checksum",
                    )?;
                    if has_hi {
                        self.write(
                            off + 0x82,
                            &((c >> 16) as u16).to_le_bytes(),
                            format!("inode[{ino}].i_checksum_hi"),
                            "checksum",
                        )?;
                    }
                }
                Dirty::DirLeaf(b, ino) if meta => {
                    let block = self.block(b)?;
                    if dir::has_tail(&block) {
                        let (_, i) = self.inode(ino)?;
                        let seed = csum::inode_seed(fs_seed, ino, i.i_generation.get());
                        let c = dir::leaf_checksum(&block, seed);
                        self.write(
                            (b + 1) * self.bs - 4,
                            &c.to_le_bytes(),
                            format!("dirblock[{b}].det_checksum"),
                            "checksum",
                        )?;
                    }
                }
                Dirty::DxNode(b, ino, count_off) if meta => {
                    let block = self.block(b)?;
                    let limit =
                        usize::from(u16::from_le_bytes([block[count_off], block[count_off + 1]]));
                    let count = usize::from(u16::from_le_bytes([
                        block[count_off + 2],
                        block[count_off + 3],
                    ]));
                    let tail = count_off + limit * 8;
                    if count <= limit && tail + dir::DX_TAIL_SIZE <= block.len() {
                        let (_, i) = self.inode(ino)?;
                        let seed = csum::inode_seed(fs_seed, ino, i.i_generation.get());
                        let c = csum::ext4_crc32c(seed, &block[..count_off + count * 8]);
                        let c = csum::ext4_crc32c(c, &block[tail..tail + 4]);
                        let c = csum::ext4_crc32c(c, &[0u8; 4]);
                        self.write(
                            b * self.bs + tail as u64 + 4,
                            &c.to_le_bytes(),
                            format!("dx[{ino}].dt_checksum"),
                            "checksum",
                        )?;
                    }
                }
                Dirty::ExtentBlock(b, ino) if meta => {
                    let block = self.block(b)?;
                    let max = usize::from(u16::from_le_bytes([block[4], block[5]]));
                    let tail = 12 + 12 * max;
                    if tail + 4 <= block.len() {
                        let (_, i) = self.inode(ino)?;
                        let seed = csum::inode_seed(fs_seed, ino, i.i_generation.get());
                        let c = csum::ext4_crc32c(seed, &block[..tail]);
                        self.write(
                            b * self.bs + tail as u64,
                            &c.to_le_bytes(),
                            format!("extentblock[{b}].et_checksum"),
                            "checksum",
                        )?;
                    }
                }
                Dirty::Xattr(b) if meta => {
                    let block = self.block(b)?;
                    let c = xattr::block_checksum(&block, fs_seed, b);
                    self.write(
                        b * self.bs + 0x10,
                        &c.to_le_bytes(),
                        format!("xattrblock[{b}].h_checksum"),
                        "checksum",
                    )?;
                }
                Dirty::Jsb(off) => {
                    let jsb = JournalSuperblock::parse(&self.read(off, 1024)?)
                        .ok_or_else(|| anyhow!("short journal superblock"))?;
                    if jsb.has_csum_v2or3() {
                        self.write(
                            off + 0xFC,
                            &jsb.compute_checksum().to_be_bytes(),
                            "jsb.s_checksum".into(),
                            "checksum",
                        )?;
                    }
                }
                _ => {}
            }
        }
        for d in &dirty {
            if let Dirty::Gd(g) = *d {
                let off = self.gd_offset(g)?;
                let gd = self.gd(g)?;
                if let Some(c) = gd.compute_checksum(&self.sb, g, self.geo.desc_size as usize) {
                    self.write(
                        off + 0x1E,
                        &c.to_le_bytes(),
                        format!("gd[{g}].bg_checksum"),
                        "checksum",
                    )?;
                }
            }
        }
        if dirty.contains(&Dirty::Sb) && meta {
            let sb = RawSuperblock::parse(&self.read(SUPERBLOCK_OFFSET, SUPERBLOCK_SIZE)?)
                .ok_or_else(|| anyhow!("short superblock"))?;
            self.write(
                SUPERBLOCK_OFFSET + 0x3FC,
                &sb.compute_checksum().to_le_bytes(),
                "sb.s_checksum".into(),
                "checksum",
            )?;
        }
        Ok(())
    }
}

/// Sets the access, change and modification times of every in-use inode to `t` (and their
/// nanosecond parts to zero), with checksums recomputed. `mke2fs -d` copies each file's
/// ctime from the host, which no user can set, so reproducible images need this pass.
/// Returns the number of inodes rewritten.
pub fn normalize_times(path: &Path, t: u32) -> Result<u64> {
    let img = Image::open(path)?;
    let geo = &img.geo;
    let isz = geo.inode_size as usize;
    let fs_seed = img.sb.csum_seed();
    let meta = img.sb.has_metadata_csum();
    let mut n = 0u64;
    for g in 0..geo.group_count {
        let gd = img.gd(g)?;
        if gd.flags() & ffsck_format::group::BG_INODE_UNINIT != 0 {
            continue;
        }
        let used = geo.inodes_per_group.saturating_sub(gd.itable_unused()) as usize;
        let off = gd.inode_table() * img.bs;
        let mut table = img.read(off, used * isz)?;
        for (k, raw) in table.chunks_mut(isz).enumerate() {
            if raw[0] == 0 && raw[1] == 0 {
                continue;
            }
            for at in [0x08, 0x0C, 0x10] {
                raw[at..at + 4].copy_from_slice(&t.to_le_bytes());
            }
            let extra = if isz > inode::GOOD_OLD_INODE_SIZE {
                usize::from(u16::from_le_bytes([raw[0x80], raw[0x81]]))
            } else {
                0
            };
            for at in [0x84usize, 0x88, 0x8C] {
                if 0x80 + extra >= at + 4 && at + 4 <= isz {
                    raw[at..at + 4].fill(0);
                }
            }
            if meta {
                let ino = g * geo.inodes_per_group + k as u32 + 1;
                let (c, _, has_hi) = inode::inode_checksum(raw, fs_seed, ino);
                raw[0x7C..0x7E].copy_from_slice(&(c as u16).to_le_bytes());
                if has_hi {
                    raw[0x82..0x84].copy_from_slice(&((c >> 16) as u16).to_le_bytes());
                }
            }
            n += 1;
        }
        img.file.write_all_at(&table, off)?;
    }
    img.file.sync_all()?;
    Ok(n)
}

/// A parsed `--field`: where it is, how big, its byte order, and what checksum covers it.
struct Located {
    offset: u64,
    size: usize,
    big_endian: bool,
    dirty: Dirty,
}

/// `name[1][2]` → ("name", [1, 2]).
fn split_indices(s: &str) -> Result<(&str, Vec<u64>)> {
    let (name, mut rest) = s.split_at(s.find('[').unwrap_or(s.len()));
    let mut idx = Vec::new();
    while let Some(r) = rest.strip_prefix('[') {
        let end = r
            .find(']')
            .ok_or_else(|| anyhow!("unclosed `[` in `{s}`"))?;
        idx.push(parse_number(&r[..end]).ok_or_else(|| anyhow!("bad index in `{s}`"))?);
        rest = &r[end + 1..];
    }
    if !rest.is_empty() {
        bail!("unexpected `{rest}` in `{s}`");
    }
    Ok((name, idx))
}

fn lookup(table: &[fields::Field], name: &str, what: &str) -> Result<(usize, usize)> {
    let (_, off, size) = fields::find(table, name).ok_or_else(|| {
        let names: Vec<&str> = table.iter().map(|f| f.0).collect();
        anyhow!("no field `{name}` in {what} (known: {})", names.join(", "))
    })?;
    Ok((off, size))
}

fn index_u32(idx: &[u64], n: usize, spec: &str) -> Result<u32> {
    let v = *idx
        .get(n)
        .ok_or_else(|| anyhow!("`{spec}` needs {} index(es)", n + 1))?;
    u32::try_from(v).map_err(|_| anyhow!("index {v} too large in `{spec}`"))
}

fn locate(img: &Image, spec: &str) -> Result<Located> {
    let (head, name) = spec
        .split_once('.')
        .ok_or_else(|| anyhow!("field `{spec}` needs the form STRUCT.NAME"))?;
    let (kind, idx) = split_indices(head)?;
    let le = |offset: u64, size: usize, dirty: Dirty| Located {
        offset,
        size,
        big_endian: false,
        dirty,
    };
    Ok(match kind {
        "sb" => {
            let (o, s) = lookup(fields::SUPERBLOCK, name, "the superblock")?;
            le(SUPERBLOCK_OFFSET + o as u64, s, Dirty::Sb)
        }
        "gd" => {
            let g = index_u32(&idx, 0, spec)?;
            let (o, s) = lookup(fields::GROUP_DESC, name, "a group descriptor")?;
            if o + s > img.geo.desc_size as usize {
                bail!(
                    "{name} lies past the {}-byte descriptors",
                    img.geo.desc_size
                );
            }
            le(img.gd_offset(g)? + o as u64, s, Dirty::Gd(g))
        }
        "inode" => {
            let ino = index_u32(&idx, 0, spec)?;
            let (o, s) = lookup(fields::INODE, name, "an inode")?;
            if o + s > img.geo.inode_size as usize {
                bail!("{name} lies past the {}-byte inodes", img.geo.inode_size);
            }
            le(img.inode_offset(ino)? + o as u64, s, Dirty::Inode(ino))
        }
        "extent" => {
            let ino = index_u32(&idx, 0, spec)?;
            let (_, i) = img.inode(ino)?;
            if i.flags() & inode::flags::EXTENTS == 0 {
                bail!("inode {ino} does not use extents");
            }
            let root = img.inode_offset(ino)? + 0x28;
            match idx.get(1) {
                None => {
                    let (o, s) = lookup(fields::EXTENT_HEADER, name, "an extent header")?;
                    le(root + o as u64, s, Dirty::Inode(ino))
                }
                Some(&k) => {
                    let root_bytes = i.block_bytes();
                    let n = ffsck_format::extent::Node::parse(&root_bytes)
                        .map_err(|e| anyhow!("bad extent root of inode {ino}: {e:?}"))?;
                    if k >= 4 {
                        bail!("the in-inode extent root holds 4 entries, not {}", k + 1);
                    }
                    let table = if n.is_leaf() {
                        fields::EXTENT
                    } else {
                        fields::EXTENT_INDEX
                    };
                    let (o, s) = lookup(table, name, "an extent entry")?;
                    le(root + 12 + 12 * k + o as u64, s, Dirty::Inode(ino))
                }
            }
        }
        "dirent" => {
            let ino = index_u32(&idx, 0, spec)?;
            let k = index_u32(&idx, 1, spec)? as usize;
            let b0 = img.dir_block0(ino)?;
            let block = img.block(b0)?;
            let entries = img.entries(&block);
            let (eoff, _) = *entries.get(k).ok_or_else(|| {
                anyhow!(
                    "directory {ino} has {} entries in block 0, not {}",
                    entries.len(),
                    k + 1
                )
            })?;
            let (o, s) = lookup(fields::DIRENT, name, "a directory entry")?;
            let dirty = dir_dirty(img, ino, b0)?;
            le(b0 * img.bs + (eoff + o) as u64, s, dirty)
        }
        "dx" => {
            let ino = index_u32(&idx, 0, spec)?;
            let (_, i) = img.inode(ino)?;
            if i.flags() & inode::flags::INDEX == 0 {
                bail!("directory {ino} is not indexed (no htree)");
            }
            let b0 = img.dir_block0(ino)?;
            let (o, s) = lookup(fields::DX_ROOT, name, "an htree root")?;
            le(
                b0 * img.bs + o as u64,
                s,
                Dirty::DxNode(b0, ino, dir::DX_ROOT_ENTRIES_OFFSET),
            )
        }
        "xattr" => {
            let ino = index_u32(&idx, 0, spec)?;
            let (_, i) = img.inode(ino)?;
            let b = i.file_acl();
            if b == 0 || b >= img.geo.blocks_count {
                bail!("inode {ino} has no attribute block");
            }
            let (o, s) = lookup(fields::XATTR_HEADER, name, "an attribute block header")?;
            le(b * img.bs + o as u64, s, Dirty::Xattr(b))
        }
        "jsb" => {
            let off = img.journal_sb_offset()?;
            let (o, s) = lookup(fields::JOURNAL_SB, name, "the journal superblock")?;
            Located {
                offset: off + o as u64,
                size: s,
                big_endian: true,
                dirty: Dirty::Jsb(off),
            }
        }
        _ => bail!(
            "unknown structure `{kind}` (sb, gd[G], inode[I], extent[I], extent[I][K], \
             dirent[I][K], dx[I], xattr[I], jsb)"
        ),
    })
}

/// How a directory block's checksum is kept: a leaf tail, or a dx tail for an htree root.
fn dir_dirty(img: &Image, ino: u32, b: u64) -> Result<Dirty> {
    let (_, i) = img.inode(ino)?;
    let block = img.block(b)?;
    Ok(
        if i.flags() & inode::flags::INDEX != 0 && !dir::has_tail(&block) {
            Dirty::DxNode(b, ino, dir::DX_ROOT_ENTRIES_OFFSET)
        } else {
            Dirty::DirLeaf(b, ino)
        },
    )
}

/// Applies `op` to the bytes of a field.
fn apply_op(old: &[u8], op: &Op, big_endian: bool, rng: &mut ChaCha8Rng) -> Result<Vec<u8>> {
    let n = old.len();
    let mut v = old.to_vec();
    // Work on little-endian bytes; convert back at the end.
    if big_endian {
        v.reverse();
    }
    let flip = |v: &mut Vec<u8>, bit: usize| v[bit / 8] ^= 1 << (bit % 8);
    let as_int = |v: &[u8]| -> Result<u64> {
        if v.len() > 8 {
            bail!(
                "add/sub/set need a field of at most 8 bytes, not {}",
                v.len()
            );
        }
        let mut b = [0u8; 8];
        b[..v.len()].copy_from_slice(v);
        Ok(u64::from_le_bytes(b))
    };
    let mask = if n >= 8 {
        u64::MAX
    } else {
        (1u64 << (8 * n)) - 1
    };
    let from_int = |x: u64| (x & mask).to_le_bytes()[..n.min(8)].to_vec();
    match op {
        Op::Zero => v.fill(0),
        Op::Ones => v.fill(0xFF),
        Op::Firstbit => flip(&mut v, 0),
        Op::Middlebit => flip(&mut v, 8 * n / 2),
        Op::Lastbit => flip(&mut v, 8 * n - 1),
        Op::Add => v = from_int(as_int(&v)?.wrapping_add(1)),
        Op::Sub => v = from_int(as_int(&v)?.wrapping_sub(1)),
        Op::Set(x) => {
            as_int(&v)?;
            if x & !mask != 0 {
                bail!("value {x} does not fit in {n} bytes");
            }
            v = from_int(*x);
        }
        Op::Random => loop {
            rng.fill(&mut v[..]);
            if v != old {
                break;
            }
        },
    }
    if big_endian {
        v.reverse();
    }
    Ok(v)
}

fn corrupt_field(img: &mut Image, spec: &str, op: &Op, rng: &mut ChaCha8Rng) -> Result<String> {
    let loc = locate(img, spec)?;
    let old = img.read(loc.offset, loc.size)?;
    let new = apply_op(&old, op, loc.big_endian, rng)?;
    img.write(loc.offset, &new, spec.to_string(), "damage")?;
    img.mark(loc.dirty);
    Ok(format!("{spec}: {} → {}", hex(&old), hex(&new)))
}

/// Name of the field of `table` holding byte `off`, for the manifest.
fn field_at(table: &[fields::Field], off: usize) -> Option<&'static str> {
    table
        .iter()
        .find(|(_, o, s)| (*o..o + s).contains(&off))
        .map(|f| f.0)
}

/// The region one corruptFS flip may hit: (byte offset, length, name, checksum owner).
fn component_region(img: &Image, c: Component, g: u32) -> Result<(u64, u64, String, Dirty)> {
    let geo = &img.geo;
    if g >= geo.group_count {
        bail!("group {g} does not exist ({} groups)", geo.group_count);
    }
    let gd = img.gd(g)?;
    let uninit = |flag: u16, what: &str| -> Result<()> {
        if gd.flags() & flag != 0 {
            bail!("group {g} has {what} set: that structure is not in use on disk");
        }
        Ok(())
    };
    Ok(match c {
        Component::Sb => {
            if !geo.group_has_super(g) {
                bail!("group {g} holds no superblock copy");
            }
            let off = if g == 0 {
                SUPERBLOCK_OFFSET
            } else {
                geo.super_block_of_group(g) * img.bs
            };
            (
                off,
                SUPERBLOCK_SIZE as u64,
                format!("sb@group{g}"),
                Dirty::Sb,
            )
        }
        Component::Gd => (
            img.gd_offset(g)?,
            u64::from(geo.desc_size),
            format!("gd[{g}]"),
            Dirty::Gd(g),
        ),
        Component::ReservedGdt => {
            if !geo.group_has_super(g) || geo.reserved_gdt_blocks == 0 {
                bail!("group {g} has no reserved GDT blocks");
            }
            let first = geo.super_block_of_group(g) + 1 + u64::from(geo.gdt_blocks);
            // In group 0 these blocks are the resize inode's indirect blocks; only their
            // first entries (one per backup group) are looked at, so aim there.
            let len = if g == 0 {
                let backups = (1..geo.group_count)
                    .filter(|&x| geo.group_has_super(x))
                    .count() as u64;
                4 * backups.max(1)
            } else {
                u64::from(geo.reserved_gdt_blocks) * img.bs
            };
            (
                first * img.bs,
                len,
                format!("reserved_gdt@group{g}"),
                Dirty::Gd(g),
            )
        }
        Component::BlockBitmap => {
            uninit(ffsck_format::group::BG_BLOCK_UNINIT, "BLOCK_UNINIT")?;
            let blocks = geo.group_last_block(g) - geo.group_first_block(g) + 1;
            (
                gd.block_bitmap() * img.bs,
                blocks / 8,
                format!("block_bitmap[{g}]"),
                Dirty::Gd(g),
            )
        }
        Component::InodeBitmap => {
            uninit(ffsck_format::group::BG_INODE_UNINIT, "INODE_UNINIT")?;
            (
                gd.inode_bitmap() * img.bs,
                u64::from(geo.inodes_per_group / 8),
                format!("inode_bitmap[{g}]"),
                Dirty::Gd(g),
            )
        }
        Component::InodeTable => unreachable!("handled by the caller"),
    })
}

fn corrupt_component(
    img: &mut Image,
    c: Component,
    g: u32,
    rng: &mut ChaCha8Rng,
) -> Result<String> {
    let (off, name, dirty) = if c == Component::InodeTable {
        // A byte of an in-use inode: flips in never-used slots go unnoticed by design.
        let ipg = img.geo.inodes_per_group;
        let first = g * ipg + 1;
        let used: Vec<u32> = (first..first + ipg)
            .filter(|&ino| img.inode_in_use(ino).unwrap_or(false))
            .collect();
        if used.is_empty() {
            bail!("group {g} has no inode in use");
        }
        let ino = used[rng.random_range(0..used.len())];
        let within = rng.random_range(0..inode::GOOD_OLD_INODE_SIZE);
        let field = field_at(fields::INODE, within).unwrap_or("?");
        (
            img.inode_offset(ino)? + within as u64,
            format!("inode[{ino}]+{within:#x} ({field})"),
            Dirty::Inode(ino),
        )
    } else {
        let (start, len, name, dirty) = component_region(img, c, g)?;
        if len == 0 {
            bail!("{name} is empty");
        }
        let within = rng.random_range(0..len);
        let table = match c {
            Component::Sb => Some(fields::SUPERBLOCK),
            Component::Gd => Some(fields::GROUP_DESC),
            _ => None,
        };
        let field = table
            .and_then(|t| field_at(t, within as usize))
            .map(|f| format!(" ({f})"))
            .unwrap_or_default();
        (start + within, format!("{name}+{within:#x}{field}"), dirty)
    };
    let old = img.read(off, 1)?;
    let x: u8 = rng.random_range(1..=255);
    let new = [old[0] ^ x];
    img.write(off, &new, name.clone(), "damage")?;
    img.mark(dirty);
    Ok(format!("flipped byte {off:#x} ({name}) with xor {x:#04x}"))
}

/// A directory and its block 0 entries: (dir inode, block, entries at their offsets).
type DirBlock0 = (u32, u64, Vec<(usize, dir::DirentHeader)>);

/// Directories and their block 0 entries, for the semantic modes.
fn scan_dirs(img: &Image, limit: u32) -> Vec<DirBlock0> {
    let first = img.geo.first_ino.max(ffsck_format::ino::ROOT);
    let last = img.geo.inodes_count.min(first.saturating_add(limit));
    let mut out = Vec::new();
    for ino in std::iter::once(ffsck_format::ino::ROOT).chain(first..=last) {
        let Ok((_, i)) = img.inode(ino) else { continue };
        if i.file_type() != inode::FileType::Directory || i.links_count() == 0 {
            continue;
        }
        let Ok(Some(b)) = img.map_block(ino, 0) else {
            continue;
        };
        let Ok(block) = img.block(b) else { continue };
        out.push((ino, b, img.entries(&block)));
    }
    out
}

/// Makes the previous entry swallow entry `k` of a block (as the kernel unlinks).
fn merge_away(
    img: &mut Image,
    dir_ino: u32,
    b: u64,
    entries: &[(usize, dir::DirentHeader)],
    k: usize,
) -> Result<()> {
    let (prev_off, prev) = entries[k - 1];
    let rec = prev.rec_len + entries[k].1.rec_len;
    let rec = u16::try_from(rec).map_err(|_| anyhow!("rec_len {rec} does not fit"))?;
    img.write(
        b * img.bs + prev_off as u64 + 4,
        &rec.to_le_bytes(),
        format!("dirent[{dir_ino}][{}].rec_len", k - 1),
        "damage",
    )?;
    let dirty = dir_dirty(img, dir_ino, b)?;
    img.mark(dirty);
    Ok(())
}

fn corrupt_semantic(img: &mut Image, s: Semantic, rng: &mut ChaCha8Rng) -> Result<String> {
    const SCAN: u32 = 20_000;
    let pick = |rng: &mut ChaCha8Rng, n: usize| rng.random_range(0..n);
    match s {
        Semantic::MultiplyClaimed => {
            // Regular files whose first block sits in an in-inode leaf or in i_block[0].
            let mut files = Vec::new();
            let first = img.geo.first_ino;
            for ino in first..=img.geo.inodes_count.min(first + SCAN) {
                let Ok((_, i)) = img.inode(ino) else { continue };
                if i.file_type() != inode::FileType::Regular || i.links_count() == 0 {
                    continue;
                }
                let off = img.inode_offset(ino)? + 0x28;
                if i.flags() & inode::flags::EXTENTS != 0 {
                    let root = i.block_bytes();
                    match ffsck_format::extent::Node::parse(&root) {
                        Ok(n) if n.is_leaf() && !n.is_empty() => {
                            files.push((ino, n.extent(0).start(), off + 12, true))
                        }
                        _ => {}
                    }
                } else {
                    let b = u32::from_le_bytes(i.block_bytes()[..4].try_into().unwrap());
                    if b != 0 {
                        files.push((ino, u64::from(b), off, false));
                    }
                }
                if files.len() >= 64 {
                    break;
                }
            }
            if files.len() < 2 {
                bail!("need two regular files with data blocks");
            }
            let a = pick(rng, files.len());
            let mut b = pick(rng, files.len() - 1);
            if b >= a {
                b += 1;
            }
            let (ino_a, blk_a, _, _) = files[a];
            let (ino_b, _, entry_b, extents) = files[b];
            if extents {
                img.write(
                    entry_b + 6,
                    &((blk_a >> 32) as u16).to_le_bytes(),
                    format!("extent[{ino_b}][0].ee_start_hi"),
                    "damage",
                )
                .or_else(|e| {
                    if e.to_string().contains("would do nothing") {
                        Ok(())
                    } else {
                        Err(e)
                    }
                })?;
                img.write(
                    entry_b + 8,
                    &(blk_a as u32).to_le_bytes(),
                    format!("extent[{ino_b}][0].ee_start_lo"),
                    "damage",
                )?;
            } else {
                img.write(
                    entry_b,
                    &(blk_a as u32).to_le_bytes(),
                    format!("inode[{ino_b}].i_block[0]"),
                    "damage",
                )?;
            }
            img.mark(Dirty::Inode(ino_b));
            Ok(format!(
                "inode {ino_b}'s first block now points at block {blk_a} of inode {ino_a}"
            ))
        }
        Semantic::Orphan | Semantic::DanglingEntry => {
            let dirs = scan_dirs(img, SCAN);
            let cands: Vec<(u32, u64, usize)> = dirs
                .iter()
                .filter(|(ino, _, _)| *ino != ffsck_format::ino::ROOT)
                .flat_map(|(ino, b, es)| {
                    es.iter()
                        .enumerate()
                        .skip(2)
                        .filter(|(_, (_, h))| h.inode != 0 && h.file_type == dir::ft::REG)
                        .map(move |(k, _)| (*ino, *b, k))
                })
                .collect();
            if cands.is_empty() {
                bail!("no directory entry of a regular file found");
            }
            let (dino, b, k) = cands[pick(rng, cands.len())];
            let entries = dirs.iter().find(|d| d.0 == dino).unwrap().2.clone();
            let target = entries[k].1.inode;
            if s == Semantic::Orphan {
                merge_away(img, dino, b, &entries, k)?;
                return Ok(format!(
                    "entry {k} of directory {dino} (inode {target}) merged into the previous \
                     one: inode {target} is in use but unreferenced"
                ));
            }
            // The highest free inode: past every inode mke2fs or the kernel handed out.
            let free = (img.geo.first_ino..=img.geo.inodes_count)
                .rev()
                .take(100_000)
                .find(|&i| !img.inode_in_use(i).unwrap_or(true))
                .ok_or_else(|| anyhow!("no free inode found"))?;
            img.write(
                b * img.bs + entries[k].0 as u64,
                &free.to_le_bytes(),
                format!("dirent[{dino}][{k}].inode"),
                "damage",
            )?;
            let dirty = dir_dirty(img, dino, b)?;
            img.mark(dirty);
            Ok(format!(
                "entry {k} of directory {dino} now names free inode {free} (was {target})"
            ))
        }
        Semantic::UnlinkDotdot => {
            let dirs = scan_dirs(img, SCAN);
            let cands: Vec<_> = dirs
                .iter()
                .filter(|(ino, _, es)| *ino != ffsck_format::ino::ROOT && es.len() >= 2)
                .collect();
            if cands.is_empty() {
                bail!("no directory besides the root found");
            }
            let (dino, b, es) = cands[pick(rng, cands.len())].clone();
            img.write(
                b * img.bs + es[1].0 as u64,
                &0u32.to_le_bytes(),
                format!("dirent[{dino}][1].inode"),
                "damage",
            )?;
            let dirty = dir_dirty(img, dino, b)?;
            img.mark(dirty);
            Ok(format!("directory {dino}'s '..' entry now has inode 0"))
        }
        Semantic::DirLoop => {
            let dirs = scan_dirs(img, SCAN);
            let parent_of = |d: u32| {
                dirs.iter()
                    .find(|x| x.0 == d)
                    .and_then(|x| x.2.get(1).map(|e| e.1.inode))
            };
            // Y with an entry k ≥ 2, whose parent X is not the root and is listed at k ≥ 2
            // in block 0 of its own parent P.
            let mut cands = Vec::new();
            for (y, yb, yes) in &dirs {
                if yes.len() < 3 {
                    continue;
                }
                let Some(x) = parent_of(*y) else { continue };
                if x == ffsck_format::ino::ROOT || x == *y {
                    continue;
                }
                let Some(p) = parent_of(x) else { continue };
                let Some((_, pb, pes)) = dirs.iter().find(|d| d.0 == p) else {
                    continue;
                };
                if let Some(kx) = pes.iter().skip(2).position(|e| e.1.inode == x) {
                    cands.push((*y, *yb, x, p, *pb, kx + 2));
                }
                if cands.len() >= 64 {
                    break;
                }
            }
            if cands.is_empty() {
                bail!("no directory two levels below another with entries found");
            }
            let (y, yb, x, p, pb, kx) = cands[pick(rng, cands.len())];
            let yes = dirs.iter().find(|d| d.0 == y).unwrap().2.clone();
            let pes = dirs.iter().find(|d| d.0 == p).unwrap().2.clone();
            let entry = yb * img.bs + yes[2].0 as u64;
            img.write(
                entry,
                &x.to_le_bytes(),
                format!("dirent[{y}][2].inode"),
                "damage",
            )?;
            if yes[2].1.file_type != dir::ft::DIR
                && img.sb.incompat().has(ffsck_format::Incompat::FILETYPE)
            {
                img.write(
                    entry + 7,
                    &[dir::ft::DIR],
                    format!("dirent[{y}][2].file_type"),
                    "damage",
                )?;
            }
            let dirty = dir_dirty(img, y, yb)?;
            img.mark(dirty);
            merge_away(img, p, pb, &pes, kx)?;
            Ok(format!(
                "directory {y} now links back to its parent {x}, and {x}'s entry in {p} is \
                 gone: {x} and {y} form a loop cut off from the root"
            ))
        }
    }
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
