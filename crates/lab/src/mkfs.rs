//! `ffsck-lab mkfs`: builds one reproducible image with [`imagegen`] and writes
//! `IMG.recipe.json` beside it (profile, seed, sizes, mke2fs arguments, tool versions), so any
//! image in a report can be rebuilt bit for bit from its recipe. `--fs-type xfs` packs the same
//! tree with `mkfs.xfs -p` instead (same layout per seed; XFS inode times are mkfs's clock);
//! `--populate kernel` copies it into an empty ext2/3/4 through the kernel (same tree, the
//! kernel's layout).

use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use serde::{Deserialize, Serialize};

use crate::imagegen::{self, BuildSpec, BuiltImage, FsType, Populate, Profile};
use crate::tools;

#[derive(clap::Args, Debug, Clone)]
pub struct MkfsArgs {
    /// Shape of the generated tree.
    #[arg(long, value_enum, default_value_t = Profile::Files)]
    pub profile: Profile,
    /// Approximate number of inodes to populate (`large`: 64 per large file).
    #[arg(long, default_value_t = 10_000)]
    pub inodes: u64,
    /// Image size, e.g. 512M or 4G [default: what the tree needs plus 25 %].
    #[arg(long, value_parser = parse_size)]
    pub size: Option<u64>,
    /// File system type [default: the profile's; `large` with ext3 gives indirect blocks].
    #[arg(long, value_enum)]
    pub fs_type: Option<FsType>,
    /// Seed of the tree, UUID and hash seed: same seed, same image.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Give mke2fs at least this many inodes (`-N`), e.g. room for `ffsck-lab age` to create
    /// files [default: what the tree needs, plus 2 %].
    #[arg(long)]
    pub mkfs_inodes: Option<u64>,
    /// Output image; the recipe goes to `IMG.recipe.json`.
    #[arg(long)]
    pub out: PathBuf,
    /// Where to generate the temporary tree [default: /dev/shm when it has room, else beside
    /// the image].
    #[arg(long)]
    pub tree_dir: Option<PathBuf>,
    /// mke2fs binary, or mkfs.xfs with `--fs-type xfs` [default: from PATH or /sbin].
    #[arg(long)]
    pub mke2fs: Option<PathBuf>,
    /// How the tree gets into an ext2/3/4 image: `mkfs` packs it with `mke2fs -d`; `kernel`
    /// copies it into an empty file system through a loop mount (root), so the kernel's
    /// allocator places the blocks as on a file system filled in use.
    #[arg(long, value_enum, default_value_t = Populate::Mkfs)]
    pub populate: Populate,
}

/// The recipe file written beside each image.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Recipe {
    pub tool: String,
    pub image: PathBuf,
    pub built: BuiltImage,
    /// Version of the mkfs program (mke2fs, or mkfs.xfs for XFS).
    pub mke2fs_version: String,
    pub ffsck_lab_version: String,
}

/// `512M`, `4G`, `100k` or plain bytes.
pub fn parse_size(s: &str) -> Result<u64, String> {
    let s = s.trim();
    let (digits, unit) = match s.find(|c: char| !c.is_ascii_digit()) {
        Some(i) => s.split_at(i),
        None => (s, ""),
    };
    let n: u64 = digits.parse().map_err(|_| format!("bad size `{s}`"))?;
    let shift = match unit.to_ascii_lowercase().as_str() {
        "" => 0,
        "k" | "kib" => 10,
        "m" | "mib" => 20,
        "g" | "gib" => 30,
        "t" | "tib" => 40,
        _ => return Err(format!("bad size unit in `{s}` (use k, M, G or T)")),
    };
    n.checked_mul(1 << shift)
        .ok_or_else(|| format!("size `{s}` too large"))
}

/// Path of the recipe of `image`.
pub fn recipe_path(image: &Path) -> PathBuf {
    let mut name = image.as_os_str().to_owned();
    name.push(".recipe.json");
    PathBuf::from(name)
}

/// Free bytes of the file system holding `dir`, if it can be asked.
pub fn free_bytes(dir: &Path) -> Option<u64> {
    use std::os::unix::ffi::OsStrExt;
    let c = std::ffi::CString::new(dir.as_os_str().as_bytes()).ok()?;
    let mut st: libc::statvfs = unsafe { std::mem::zeroed() };
    // SAFETY: `c` is a valid NUL-terminated path and `st` a properly sized out-parameter.
    if unsafe { libc::statvfs(c.as_ptr(), &mut st) } != 0 {
        return None;
    }
    Some(st.f_bavail as u64 * st.f_frsize as u64)
}

/// /dev/shm when it can hold twice the expected tree, else beside the image.
fn pick_tree_dir(args: &MkfsArgs) -> PathBuf {
    if let Some(dir) = &args.tree_dir {
        return dir.clone();
    }
    // Small files take a block each plus the inode in tmpfs; `large` ones 8 MiB of data.
    let per_inode: u64 = match args.profile {
        imagegen::Profile::Large => 8 << 20,
        _ => 8 << 10,
    };
    let need = args.inodes.saturating_mul(per_inode).saturating_mul(2);
    let shm = Path::new("/dev/shm");
    if shm.is_dir() && free_bytes(shm).is_some_and(|free| free > need) {
        return shm.to_path_buf();
    }
    args.out
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."))
        .to_path_buf()
}

/// Builds the image and writes its recipe; returns the recipe.
pub fn run(args: &MkfsArgs) -> Result<Recipe> {
    let mke2fs = match (args.fs_type, &args.mke2fs) {
        (Some(FsType::Xfs), None) => crate::xfs::tool("mkfs.xfs")?,
        _ => tools::resolve_tool(args.mke2fs.as_deref(), "mke2fs")?,
    };
    if let Some(parent) = args.out.parent().filter(|p| !p.as_os_str().is_empty()) {
        std::fs::create_dir_all(parent)
            .with_context(|| format!("creating {}", parent.display()))?;
    }
    if args.size == Some(0) {
        bail!("--size must be positive");
    }
    let spec = BuildSpec {
        profile: args.profile,
        inodes: args.inodes,
        seed: args.seed,
        fs_type: args.fs_type,
        image_bytes: args.size,
        min_mkfs_inodes: args.mkfs_inodes,
        populate: args.populate,
    };
    let tree_dir = pick_tree_dir(args);
    let built = imagegen::build_spec(&spec, &tree_dir, &args.out, &mke2fs)?;
    let recipe = Recipe {
        tool: "ffsck-lab mkfs".into(),
        image: args.out.clone(),
        built,
        mke2fs_version: tools::version_line(&mke2fs),
        ffsck_lab_version: env!("CARGO_PKG_VERSION").into(),
    };
    let path = recipe_path(&args.out);
    std::fs::write(&path, serde_json::to_string_pretty(&recipe)? + "\n")
        .with_context(|| format!("writing {}", path.display()))?;
    Ok(recipe)
}

/// CLI entry.
pub fn main(args: &MkfsArgs) -> Result<()> {
    let r = run(args)?;
    println!(
        "built {} ({} profile, {}, seed {}): {} files, {} dirs, {:.0} MiB; tree digest {}; \
         recipe {}",
        args.out.display(),
        r.built.profile.name(),
        r.built.fs_type.name(),
        r.built.seed,
        r.built.files,
        r.built.dirs,
        r.built.image_bytes as f64 / (1 << 20) as f64,
        r.built.tree_digest,
        recipe_path(&args.out).display()
    );
    Ok(())
}
