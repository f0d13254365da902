//! Builds reproducible benchmark images: a seeded directory tree of small random files is
//! generated on the host, then packed with `mke2fs -d`, which lays files out the way a freshly
//! populated file system would be, without needing root, loop devices or mounts. XFS images
//! get the same tree through `mkfs.xfs -p` (see [`crate::xfs`]).

use std::fs::File;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Instant;

use anyhow::{bail, Context, Result};
use ffsck_format::csum;
use rand::{Rng, RngCore, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde::{Deserialize, Serialize};

use crate::child;

/// Block size used for every bench image; 4 KiB is what mke2fs picks for any real-sized disk.
const BLOCK_BYTES: u64 = 4096;
/// Largest generated small file; sizes are uniform in 0..=this.
const MAX_FILE_BYTES: u64 = 8 * 1024;
/// Leaf directories per intermediate directory, so no directory becomes huge by accident.
const LEAVES_PER_GROUP: u64 = 100;
/// mkfs.xfs's default inode size (v5).
const XFS_INODE_BYTES: u32 = 512;
/// ext4's default inode size.
const INODE_BYTES: u64 = 256;
/// Data blocks of each `large` file; every other block is a hole, so each data block is its
/// own extent (depth-2 extent trees beyond 4 × 340 extents) or, on ext3, a long block map
/// with double-indirect blocks.
const LARGE_DATA_BLOCKS: u64 = 2048;
/// Inodes "spent" per `large` file when turning `--inodes` into a file count.
const INODES_PER_LARGE_FILE: u64 = 64;
/// Fixed timestamp (2020-01-01) given to every generated file so trees are reproducible.
pub(crate) const FIXED_MTIME: u64 = 1_577_836_800;

/// What the generated tree looks like.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Profile {
    /// ext4, ~95 small files per directory: inode- and extent-heavy (pass 1 dominated).
    Files,
    /// ext4, ~1 file per directory: directory-heavy (passes 2 and 3 dominated).
    Dirs,
    /// ext4, few large sparse files with deep extent trees (block maps with ext3).
    Large,
    /// ext3 (block maps, no extents) with the `files` tree.
    Ext3,
}

/// File system type: `mke2fs -t`, or XFS through mkfs.xfs.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FsType {
    Ext4,
    Ext3,
    /// XFS (v5) built with `mkfs.xfs -p PROTOFILE`; at least 300 MiB.
    Xfs,
}

impl FsType {
    pub fn name(self) -> &'static str {
        match self {
            FsType::Ext4 => "ext4",
            FsType::Ext3 => "ext3",
            FsType::Xfs => "xfs",
        }
    }
}

/// How the tree gets into an ext2/3/4 image.
#[derive(clap::ValueEnum, Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Populate {
    /// `mke2fs -d`: blocks handed out in the tree's order, so directory blocks lie among the
    /// files' data, and the same seed gives the same image bit for bit.
    #[default]
    Mkfs,
    /// An empty `mke2fs`, then the tree copied in (`cp -a`) through a loop mount (root): the
    /// kernel's allocator places the blocks as on a file system filled in use (ext4 with
    /// flex_bg keeps directory blocks in the first group of each flex group, beside the inode
    /// tables). Reproducible for one kernel, not across kernels.
    Kernel,
}

impl Profile {
    fn files_per_dir(self) -> u64 {
        match self {
            Profile::Files | Profile::Ext3 => 95,
            Profile::Dirs | Profile::Large => 1,
        }
    }

    pub fn default_fs_type(self) -> FsType {
        match self {
            Profile::Files | Profile::Dirs | Profile::Large => FsType::Ext4,
            Profile::Ext3 => FsType::Ext3,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Profile::Files => "files",
            Profile::Dirs => "dirs",
            Profile::Large => "large",
            Profile::Ext3 => "ext3",
        }
    }
}

/// Everything that determines an image, apart from the tools.
#[derive(Debug, Clone)]
pub struct BuildSpec {
    pub profile: Profile,
    pub inodes: u64,
    pub seed: u64,
    /// Overrides the profile's file system type.
    pub fs_type: Option<FsType>,
    /// Image size in bytes; computed from the tree when `None`.
    pub image_bytes: Option<u64>,
    /// At least this many inodes (`mke2fs -N`): room for an aging workload's new files.
    pub min_mkfs_inodes: Option<u64>,
    /// How the tree gets into the image.
    pub populate: Populate,
}

/// What was built, for the bench report and the recipe.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct BuiltImage {
    pub profile: Profile,
    pub fs_type: FsType,
    pub requested_inodes: u64,
    pub seed: u64,
    pub files: u64,
    pub dirs: u64,
    pub file_bytes: u64,
    /// crc32c over every generated path, size and content, in generation order: equal
    /// digests mean equal trees.
    pub tree_digest: String,
    /// Inode count passed to `mke2fs -N`.
    pub mkfs_inodes: u64,
    pub image_bytes: u64,
    /// The mke2fs (or mkfs.xfs) arguments, with the tree (or proto file) and image paths
    /// replaced by `TREE` (`PROTO`) and `IMAGE`.
    pub mke2fs_args: Vec<String>,
    /// How the tree got into the image (recipes older than the option: `mkfs`).
    #[serde(default)]
    pub populate: Populate,
    pub generate_s: f64,
    pub mkfs_s: f64,
}

/// Seeded generator of the tree: ChaCha8 so the same seed gives the same tree everywhere.
fn rng_for(seed: u64) -> ChaCha8Rng {
    ChaCha8Rng::seed_from_u64(seed)
}

struct TreeStats {
    files: u64,
    dirs: u64,
    file_bytes: u64,
    file_blocks: u64,
    digest: u32,
}

impl TreeStats {
    fn note(&mut self, path: &Path, root: &Path, content: &[u8]) {
        let rel = path.strip_prefix(root).unwrap_or(path);
        self.digest = csum::ext4_crc32c(self.digest, rel.as_os_str().as_encoded_bytes());
        self.digest = csum::ext4_crc32c(self.digest, &(content.len() as u64).to_le_bytes());
        self.digest = csum::ext4_crc32c(self.digest, content);
    }
}

fn fix_mtime(file: &File) -> Result<()> {
    let t = std::time::UNIX_EPOCH + std::time::Duration::from_secs(FIXED_MTIME);
    file.set_times(std::fs::FileTimes::new().set_accessed(t).set_modified(t))?;
    Ok(())
}

fn make_dir(path: &Path, root: &Path, stats: &mut TreeStats) -> Result<()> {
    std::fs::create_dir(path).with_context(|| format!("creating {}", path.display()))?;
    stats.dirs += 1;
    stats.note(path, root, &[]);
    Ok(())
}

/// Writes `leaves` leaf directories of `files_per_dir` files under `root`, grouped
/// `LEAVES_PER_GROUP` to an intermediate directory. Files are written one at a time, so
/// memory stays flat however many millions of inodes are asked for.
fn generate_tree(
    root: &Path,
    leaves: u64,
    files_per_dir: u64,
    profile: Profile,
    seed: u64,
) -> Result<TreeStats> {
    use std::io::{Seek, SeekFrom, Write};
    let mut rng = rng_for(seed);
    let mut buf = vec![0u8; MAX_FILE_BYTES.max(BLOCK_BYTES) as usize];
    let mut stats = TreeStats {
        files: 0,
        dirs: 0,
        file_bytes: 0,
        file_blocks: 0,
        digest: !0,
    };
    for leaf in 0..leaves {
        let group = root.join(format!("g{:05}", leaf / LEAVES_PER_GROUP));
        if leaf % LEAVES_PER_GROUP == 0 {
            make_dir(&group, root, &mut stats)?;
        }
        let dir = group.join(format!("d{:03}", leaf % LEAVES_PER_GROUP));
        make_dir(&dir, root, &mut stats)?;
        for f in 0..files_per_dir {
            let path = dir.join(format!("file{f:03}.dat"));
            let mut file =
                File::create(&path).with_context(|| format!("creating {}", path.display()))?;
            if profile == Profile::Large {
                // One data block, one hole, …: every data block becomes its own extent.
                let block = &mut buf[..BLOCK_BYTES as usize];
                for i in 0..LARGE_DATA_BLOCKS {
                    rng.fill_bytes(block);
                    file.seek(SeekFrom::Start(2 * i * BLOCK_BYTES))?;
                    file.write_all(block)
                        .with_context(|| format!("writing {}", path.display()))?;
                    stats.note(&path, root, block);
                }
                stats.file_bytes += LARGE_DATA_BLOCKS * BLOCK_BYTES;
                // Data blocks plus room for extent-tree or indirect blocks.
                stats.file_blocks += LARGE_DATA_BLOCKS + LARGE_DATA_BLOCKS / 64 + 4;
            } else {
                let size = rng.random_range(0..=MAX_FILE_BYTES);
                let content = &mut buf[..size as usize];
                rng.fill_bytes(content);
                file.write_all(content)
                    .with_context(|| format!("writing {}", path.display()))?;
                stats.note(&path, root, content);
                stats.file_bytes += size;
                stats.file_blocks += size.div_ceil(BLOCK_BYTES);
            }
            fix_mtime(&file)?;
            stats.files += 1;
        }
    }
    Ok(stats)
}

/// mke2fs's default journal size in blocks for a file system of `fs_blocks` 4 KiB blocks
/// (`ext2fs_default_journal_size` in e2fsprogs 1.47).
fn default_journal_blocks(fs_blocks: u64) -> u64 {
    match fs_blocks {
        0..=2047 => 0,
        2048..=32767 => 1024,
        32768..=262_143 => 4096,
        262_144..=524_287 => 8192,
        524_288..=4_194_303 => 16384,
        4_194_304..=8_388_607 => 32768,
        8_388_608..=16_777_215 => 65536,
        16_777_216..=33_554_431 => 131_072,
        _ => 262_144,
    }
}

/// Image size in bytes that holds the tree with room to spare: 25 % slack plus 16 MiB for
/// group descriptors, bitmaps and reserved GDT blocks, rounded up to whole MiB.
fn image_bytes_for(stats: &TreeStats, mkfs_inodes: u64) -> u64 {
    // Directories here hold at most ~100 short entries: two blocks each is generous.
    let content_blocks = stats.file_blocks + 2 * (stats.dirs + 1);
    let itable_blocks = (mkfs_inodes * INODE_BYTES).div_ceil(BLOCK_BYTES);
    let base_blocks = content_blocks + itable_blocks;
    let journal_blocks = default_journal_blocks(base_blocks + base_blocks / 4);
    let bytes = (base_blocks + journal_blocks) * BLOCK_BYTES;
    let bytes = bytes + bytes / 4 + (16 << 20);
    bytes.div_ceil(1 << 20) << 20
}

/// A UUID-shaped string derived from the seed, so the UUID (and with it every metadata
/// checksum) and the htree hash seed are the same for the same seed.
pub(crate) fn seeded_uuid(seed: u64, salt: u64) -> String {
    let mut rng = rng_for(seed ^ salt.rotate_left(32));
    let mut b = [0u8; 16];
    rng.fill_bytes(&mut b);
    b[6] = (b[6] & 0x0F) | 0x40;
    b[8] = (b[8] & 0x3F) | 0x80;
    let h: String = b.iter().map(|x| format!("{x:02x}")).collect();
    format!(
        "{}-{}-{}-{}-{}",
        &h[0..8],
        &h[8..12],
        &h[12..16],
        &h[16..20],
        &h[20..32]
    )
}

/// Generates the tree under `tree_parent`, runs mke2fs (mkfs.xfs for XFS), and deletes the
/// tree again.
pub fn build(
    profile: Profile,
    inodes: u64,
    seed: u64,
    tree_parent: &Path,
    image: &Path,
    mke2fs: &Path,
) -> Result<BuiltImage> {
    let spec = BuildSpec {
        profile,
        inodes,
        seed,
        fs_type: None,
        image_bytes: None,
        min_mkfs_inodes: None,
        populate: Populate::Mkfs,
    };
    build_spec(&spec, tree_parent, image, mke2fs)
}

/// [`build`] with every knob of `ffsck-lab mkfs`.
pub fn build_spec(
    spec: &BuildSpec,
    tree_parent: &Path,
    image: &Path,
    mke2fs: &Path,
) -> Result<BuiltImage> {
    let BuildSpec {
        profile,
        inodes,
        seed,
        ..
    } = *spec;
    if inodes < 100 {
        bail!("--inodes must be at least 100");
    }
    let fs_type = spec.fs_type.unwrap_or(profile.default_fs_type());
    if fs_type == FsType::Xfs && spec.populate == Populate::Kernel {
        bail!("--populate kernel is for ext2/3/4 (XFS images are packed with mkfs.xfs -p)");
    }
    let files_per_dir = profile.files_per_dir();
    let leaves = if profile == Profile::Large {
        (inodes / INODES_PER_LARGE_FILE).max(1)
    } else {
        // Each leaf directory costs itself plus its files; intermediates are ~1 % on top.
        (inodes / (files_per_dir + 1)).max(1)
    };

    std::fs::create_dir_all(tree_parent)
        .with_context(|| format!("creating {}", tree_parent.display()))?;
    let tree = tempfile::Builder::new()
        .prefix("ffsck-lab-tree-")
        .tempdir_in(tree_parent)
        .with_context(|| format!("creating a tree dir in {}", tree_parent.display()))?;
    let started = Instant::now();
    let stats = generate_tree(tree.path(), leaves, files_per_dir, profile, seed)?;
    let generate_s = started.elapsed().as_secs_f64();

    // Slack so the tree always fits; also the reserved inodes (1..=10) and lost+found.
    let mut mkfs_inodes = stats.files + stats.dirs + (stats.files + stats.dirs) / 50 + 1024;
    if profile == Profile::Large {
        mkfs_inodes = mkfs_inodes.max(inodes);
    }
    mkfs_inodes = mkfs_inodes.max(spec.min_mkfs_inodes.unwrap_or(0));
    let mut image_bytes = spec
        .image_bytes
        .unwrap_or_else(|| image_bytes_for(&stats, mkfs_inodes));
    let started = Instant::now();
    let args = if fs_type == FsType::Xfs {
        // mkfs.xfs -p writes the holes of `large` files as data: twice the blocks.
        if profile == Profile::Large && spec.image_bytes.is_none() {
            image_bytes = image_bytes.saturating_mul(2);
        }
        image_bytes = image_bytes.max(crate::xfs::MIN_BYTES);
        let xspec = crate::xfs::MkfsSpec {
            bytes: image_bytes,
            block_size: BLOCK_BYTES as u32,
            inode_size: XFS_INODE_BYTES,
            uuid: seeded_uuid(seed, 1),
        };
        crate::xfs::mkfs(&xspec, tree.path(), image, mke2fs)?
    } else {
        run_mke2fs(
            fs_type,
            mkfs_inodes,
            image_bytes,
            seed,
            (tree.path(), spec.populate),
            image,
            mke2fs,
        )?
    };
    let mkfs_s = started.elapsed().as_secs_f64();
    // Deleting the tree here rather than at drop makes a failure visible.
    tree.close().context("deleting the generated tree")?;

    Ok(BuiltImage {
        profile,
        fs_type,
        requested_inodes: inodes,
        seed,
        files: stats.files,
        dirs: stats.dirs,
        file_bytes: stats.file_bytes,
        tree_digest: format!("{:08x}", stats.digest),
        mkfs_inodes,
        image_bytes,
        mke2fs_args: args,
        populate: spec.populate,
        generate_s,
        mkfs_s,
    })
}

/// The `mke2fs -d` run of [`build_spec`], with the inode times pinned afterwards; returns the
/// arguments.
fn run_mke2fs(
    fs_type: FsType,
    mkfs_inodes: u64,
    image_bytes: u64,
    seed: u64,
    (tree, populate): (&Path, Populate),
    image: &Path,
    mke2fs: &Path,
) -> Result<Vec<String>> {
    // A stale image from an earlier run would make mke2fs keep its size; start clean.
    match std::fs::remove_file(image) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(e).with_context(|| format!("removing old {}", image.display())),
    }
    let mut args: Vec<String> = vec![
        "-q".into(),
        "-F".into(),
        "-t".into(),
        fs_type.name().into(),
        "-b".into(),
        BLOCK_BYTES.to_string(),
        "-N".into(),
        mkfs_inodes.to_string(),
        "-U".into(),
        seeded_uuid(seed, 1),
        "-E".into(),
        format!("hash_seed={}", seeded_uuid(seed, 2)),
        "-d".into(),
        "TREE".into(),
        "IMAGE".into(),
        format!("{}k", image_bytes / 1024),
    ];
    if populate == Populate::Kernel {
        // An empty file system; the tree goes in through the kernel below.
        args.retain(|a| a != "-d" && a != "TREE");
    }
    let log_path = image.with_extension("mke2fs.log");
    let log =
        File::create(&log_path).with_context(|| format!("creating {}", log_path.display()))?;
    let mut cmd = Command::new(mke2fs);
    for a in &args {
        match a.as_str() {
            "TREE" => cmd.arg(tree),
            "IMAGE" => cmd.arg(image),
            _ => cmd.arg(a),
        };
    }
    // e2fsprogs reads both to pin the time it stamps into the superblock and inodes.
    cmd.env("E2FSPROGS_FAKE_TIME", FIXED_MTIME.to_string())
        .env("SOURCE_DATE_EPOCH", FIXED_MTIME.to_string())
        .stdin(Stdio::null())
        .stdout(Stdio::from(log.try_clone()?))
        .stderr(Stdio::from(log));
    let outcome = child::run(&mut cmd, None).context("running mke2fs")?;
    if outcome.code() != Some(0) {
        let text = std::fs::read_to_string(&log_path).unwrap_or_default();
        bail!(
            "mke2fs failed ({}): {}",
            outcome.describe(),
            text.lines().rev().take(10).collect::<Vec<_>>().join(" / ")
        );
    }
    let _ = std::fs::remove_file(&log_path);
    if populate == Populate::Kernel {
        copy_in(tree, image)?;
    }
    crate::corrupt::normalize_times(image, FIXED_MTIME as u32)
        .context("normalizing inode times")?;
    Ok(args)
}

/// Copies `tree` into the (empty) file system in `image` through a loop mount: `cp -a` walks
/// the tree in its directory order, and the kernel allocates as it would for any writer.
fn copy_in(tree: &Path, image: &Path) -> Result<()> {
    let mount = crate::loopmount::Mount::new(image, "loop")?;
    let out = Command::new("cp")
        .arg("-a")
        .arg(tree.join("."))
        .arg(mount.path())
        .stdin(Stdio::null())
        .output()
        .context("running cp")?;
    if !out.status.success() {
        bail!(
            "copying the tree into {} failed: {}",
            image.display(),
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    mount.unmount()
}

/// Key facts from `dumpe2fs -h`, so the report shows what was really checked.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct FsInfo {
    pub inode_count: Option<u64>,
    pub free_inodes: Option<u64>,
    pub block_count: Option<u64>,
    pub free_blocks: Option<u64>,
    pub block_size: Option<u64>,
    pub features: Option<String>,
}

impl FsInfo {
    pub fn used_inodes(&self) -> Option<u64> {
        Some(self.inode_count?.saturating_sub(self.free_inodes?))
    }

    pub fn used_blocks(&self) -> Option<u64> {
        Some(self.block_count?.saturating_sub(self.free_blocks?))
    }
}

/// Runs `dumpe2fs -h` on the image; `None` if it is unavailable or fails.
pub fn fs_info(image: &Path) -> Option<FsInfo> {
    let dumpe2fs: PathBuf = crate::tools::find_in_path("dumpe2fs")?;
    let out = Command::new(dumpe2fs)
        .arg("-h")
        .arg(image)
        .stdin(Stdio::null())
        .stderr(Stdio::null())
        .output()
        .ok()?;
    if !out.status.success() {
        return None;
    }
    Some(parse_dumpe2fs(&String::from_utf8_lossy(&out.stdout)))
}

fn parse_dumpe2fs(text: &str) -> FsInfo {
    let mut info = FsInfo::default();
    for line in text.lines() {
        let Some((key, value)) = line.split_once(':') else {
            continue;
        };
        let value = value.trim();
        let number = value.parse().ok();
        match key.trim() {
            "Inode count" => info.inode_count = number,
            "Free inodes" => info.free_inodes = number,
            "Block count" => info.block_count = number,
            "Free blocks" => info.free_blocks = number,
            "Block size" => info.block_size = number,
            "Filesystem features" => info.features = Some(value.to_string()),
            _ => {}
        }
    }
    info
}
