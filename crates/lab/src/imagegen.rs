//! Builds reproducible benchmark images: a seeded directory tree of small random files is
//! generated on the host, then packed with `mke2fs -d`, which lays files out the way a freshly
//! populated file system would be, without needing root, loop devices or mounts.

use std::fs::File;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Instant;

use anyhow::{bail, Context, Result};
use serde::Serialize;

use crate::child;

/// Block size used for every bench image; 4 KiB is what mke2fs picks for any real-sized disk.
const BLOCK_BYTES: u64 = 4096;
/// Largest generated file; sizes are uniform in 0..=this.
const MAX_FILE_BYTES: u64 = 8 * 1024;
/// Leaf directories per intermediate directory, so no directory becomes huge by accident.
const LEAVES_PER_GROUP: u64 = 100;
/// ext4's default inode size.
const INODE_BYTES: u64 = 256;

/// What the generated tree looks like.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Profile {
    /// ext4, ~95 small files per directory: inode- and extent-heavy (pass 1 dominated).
    Files,
    /// ext4, ~1 file per directory: directory-heavy (passes 2 and 3 dominated).
    Dirs,
    /// ext3 (block maps, no extents) with the `files` tree.
    Ext3,
}

impl Profile {
    fn files_per_dir(self) -> u64 {
        match self {
            Profile::Files | Profile::Ext3 => 95,
            Profile::Dirs => 1,
        }
    }

    fn fs_type(self) -> &'static str {
        match self {
            Profile::Files | Profile::Dirs => "ext4",
            Profile::Ext3 => "ext3",
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Profile::Files => "files",
            Profile::Dirs => "dirs",
            Profile::Ext3 => "ext3",
        }
    }
}

/// What was built, for the bench report.
#[derive(Debug, Clone, Serialize)]
pub struct BuiltImage {
    pub profile: Profile,
    pub requested_inodes: u64,
    pub seed: u64,
    pub files: u64,
    pub dirs: u64,
    pub file_bytes: u64,
    /// Inode count passed to `mke2fs -N`.
    pub mkfs_inodes: u64,
    pub image_bytes: u64,
    pub generate_s: f64,
    pub mkfs_s: f64,
}

/// xorshift64*: tiny, fast, and good enough for file sizes and incompressible content.
struct XorShift(u64);

impl XorShift {
    fn new(seed: u64) -> Self {
        // splitmix64 step: spreads small seeds and never yields the all-zero state.
        let mut z = seed.wrapping_add(0x9E37_79B9_7F4A_7C15);
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        XorShift((z ^ (z >> 31)) | 1)
    }

    fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    fn fill(&mut self, buf: &mut [u8]) {
        for chunk in buf.chunks_mut(8) {
            let word = self.next().to_le_bytes();
            chunk.copy_from_slice(&word[..chunk.len()]);
        }
    }
}

struct TreeStats {
    files: u64,
    dirs: u64,
    file_bytes: u64,
    file_blocks: u64,
}

/// Writes `leaves` leaf directories of `files_per_dir` random files under `root`, grouped
/// `LEAVES_PER_GROUP` to an intermediate directory.
fn generate_tree(root: &Path, leaves: u64, files_per_dir: u64, seed: u64) -> Result<TreeStats> {
    let mut rng = XorShift::new(seed);
    let mut buf = vec![0u8; MAX_FILE_BYTES as usize];
    let mut stats = TreeStats {
        files: 0,
        dirs: 0,
        file_bytes: 0,
        file_blocks: 0,
    };
    for leaf in 0..leaves {
        let group = root.join(format!("g{:05}", leaf / LEAVES_PER_GROUP));
        if leaf % LEAVES_PER_GROUP == 0 {
            std::fs::create_dir(&group).with_context(|| format!("creating {}", group.display()))?;
            stats.dirs += 1;
        }
        let dir = group.join(format!("d{:03}", leaf % LEAVES_PER_GROUP));
        std::fs::create_dir(&dir).with_context(|| format!("creating {}", dir.display()))?;
        stats.dirs += 1;
        for f in 0..files_per_dir {
            let size = rng.next() % (MAX_FILE_BYTES + 1);
            let content = &mut buf[..size as usize];
            rng.fill(content);
            let path = dir.join(format!("file{f:03}.dat"));
            std::fs::write(&path, content)
                .with_context(|| format!("writing {}", path.display()))?;
            stats.files += 1;
            stats.file_bytes += size;
            stats.file_blocks += size.div_ceil(BLOCK_BYTES);
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

/// Generates the tree under `tree_parent`, runs mke2fs, and deletes the tree again.
pub fn build(
    profile: Profile,
    inodes: u64,
    seed: u64,
    tree_parent: &Path,
    image: &Path,
    mke2fs: &Path,
) -> Result<BuiltImage> {
    if inodes < 100 {
        bail!("--inodes must be at least 100");
    }
    let files_per_dir = profile.files_per_dir();
    // Each leaf directory costs itself plus its files; intermediates are ~1 % on top.
    let leaves = (inodes / (files_per_dir + 1)).max(1);

    std::fs::create_dir_all(tree_parent)
        .with_context(|| format!("creating {}", tree_parent.display()))?;
    let tree = tempfile::Builder::new()
        .prefix("ffsck-lab-tree-")
        .tempdir_in(tree_parent)
        .with_context(|| format!("creating a tree dir in {}", tree_parent.display()))?;
    let started = Instant::now();
    let stats = generate_tree(tree.path(), leaves, files_per_dir, seed)?;
    let generate_s = started.elapsed().as_secs_f64();

    // Slack so the tree always fits; also the reserved inodes (1..=10) and lost+found.
    let mkfs_inodes = stats.files + stats.dirs + (stats.files + stats.dirs) / 50 + 1024;
    let image_bytes = image_bytes_for(&stats, mkfs_inodes);

    // A stale image from an earlier run would make mke2fs keep its size; start clean.
    match std::fs::remove_file(image) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(e).with_context(|| format!("removing old {}", image.display())),
    }
    let log_path = image.with_extension("mke2fs.log");
    let log =
        File::create(&log_path).with_context(|| format!("creating {}", log_path.display()))?;
    let mut cmd = Command::new(mke2fs);
    cmd.args(["-q", "-F", "-t", profile.fs_type(), "-b", "4096", "-N"])
        .arg(mkfs_inodes.to_string())
        .arg("-d")
        .arg(tree.path())
        .arg(image)
        .arg(format!("{}k", image_bytes / 1024))
        .stdin(Stdio::null())
        .stdout(Stdio::from(log.try_clone()?))
        .stderr(Stdio::from(log));
    let started = Instant::now();
    let outcome = child::run(&mut cmd, None).context("running mke2fs")?;
    let mkfs_s = started.elapsed().as_secs_f64();
    if outcome.code() != Some(0) {
        let text = std::fs::read_to_string(&log_path).unwrap_or_default();
        bail!(
            "mke2fs failed ({}): {}",
            outcome.describe(),
            text.lines().rev().take(10).collect::<Vec<_>>().join(" / ")
        );
    }
    let _ = std::fs::remove_file(&log_path);
    // Deleting the tree here rather than at drop makes a failure visible.
    tree.close().context("deleting the generated tree")?;

    Ok(BuiltImage {
        profile,
        requested_inodes: inodes,
        seed,
        files: stats.files,
        dirs: stats.dirs,
        file_bytes: stats.file_bytes,
        mkfs_inodes,
        image_bytes,
        generate_s,
        mkfs_s,
    })
}

/// Key facts from `dumpe2fs -h`, so the report shows what was really checked.
#[derive(Debug, Clone, Default, Serialize)]
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
