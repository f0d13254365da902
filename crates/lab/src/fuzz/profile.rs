//! Image profiles of `ffsck-lab fuzz`: one [`ImageRecipe`] per case, drawn from the case's
//! seed (ext2/3/4; 1, 4 and 64 KiB blocks; 128/256/1024-byte inodes; the feature set), and the
//! build of the image it describes: a seeded tree packed with `mke2fs -d`, then debugfs for
//! what `-d` cannot make (device nodes, xattrs, a casefolded directory), `e2fsck -fyD` for
//! htree indexes, and pinned inode times so the same recipe gives the same image.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use anyhow::{bail, Context, Result};
use rand::Rng;
use rand_chacha::ChaCha8Rng;
use serde::{Deserialize, Serialize};

use crate::child;
use crate::imagegen::{seeded_uuid, FIXED_MTIME};

/// Where the journal lives.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Journal {
    None,
    Internal,
    /// A separate journal device (an image file; built through a loop device, so root).
    External,
}

/// Everything that determines a fuzz image, apart from the tools' versions.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ImageRecipe {
    /// `ext2`, `ext3` or `ext4` (`mke2fs -t`).
    pub fs: String,
    pub block_size: u32,
    pub inode_size: u32,
    /// `mke2fs -O` entries, `^name` to turn one off.
    pub features: Vec<String>,
    /// `mke2fs -C` with bigalloc.
    #[serde(default)]
    pub cluster_size: Option<u32>,
    /// `mke2fs -E` entries besides the hash seed (`encoding=utf8`, `quotatype=...`).
    #[serde(default)]
    pub extended: Vec<String>,
    pub journal: Journal,
    /// Run `e2fsck -fyD` after building, which indexes every multi-block directory.
    pub htree: bool,
    pub size_kib: u64,
    /// Seed of the tree, UUID and hash seed.
    pub seed: u64,
}

/// The paths of the generated tree, by kind; what damage plans aim at.
#[derive(Debug, Clone, Default)]
pub struct Catalog {
    pub dirs: Vec<String>,
    pub files: Vec<String>,
    pub symlinks: Vec<String>,
    pub specials: Vec<String>,
    /// Files given extended attributes.
    pub xattr_files: Vec<String>,
    /// The large directory (htree with `htree`).
    pub big_dir: String,
}

/// A built image and where its external journal is.
pub struct Built {
    pub image: PathBuf,
    pub journal: Option<PathBuf>,
    pub catalog: Catalog,
}

fn has(r: &ImageRecipe, f: &str) -> bool {
    r.features.iter().any(|x| x == f)
}

impl ImageRecipe {
    /// A short name: `ext4-1k-i256+metadata_csum+64bit`.
    pub fn name(&self) -> String {
        let mut s = format!(
            "{}-{}k-i{}",
            self.fs,
            self.block_size / 1024,
            self.inode_size
        );
        for f in self.features.iter().filter(|f| !f.starts_with('^')) {
            s.push('+');
            s.push_str(f);
        }
        match self.journal {
            Journal::External => s.push_str("+extjournal"),
            Journal::None if self.fs != "ext2" => s.push_str("+nojournal"),
            _ => {}
        }
        if self.htree {
            s.push_str("+htree");
        }
        s
    }

    /// Draws a profile. Every feature of issue 22's list has a fair chance in every case.
    pub fn draw(rng: &mut ChaCha8Rng) -> ImageRecipe {
        let fs = match rng.random_range(0..20) {
            0..=2 => "ext2",
            3..=6 => "ext3",
            _ => "ext4",
        };
        let block_size = match rng.random_range(0..10) {
            0..=4 => 1024,
            5..=8 => 4096,
            _ => 65536,
        };
        let mut inode_size = *[128, 256, 256, 1024]
            .get(rng.random_range(0..4))
            .unwrap_or(&256);
        let mut features = Vec::new();
        let mut extended = Vec::new();
        let mut cluster_size = None;
        fn on(features: &mut Vec<String>, f: &str, p: f64, rng: &mut ChaCha8Rng) -> bool {
            let yes = rng.random_bool(p);
            if yes {
                features.push(f.to_string());
            }
            yes
        }
        if fs == "ext4" {
            if !on(&mut features, "metadata_csum", 0.6, rng) {
                features.push("^metadata_csum".into());
                on(&mut features, "uninit_bg", 0.5, rng);
            }
            if !on(&mut features, "64bit", 0.5, rng) {
                features.push("^64bit".into());
            }
            if !on(&mut features, "flex_bg", 0.6, rng) {
                features.push("^flex_bg".into());
            }
            if inode_size >= 256 {
                on(&mut features, "inline_data", 0.25, rng);
                if on(&mut features, "quota", 0.2, rng) && rng.random_bool(0.5) {
                    features.push("project".into());
                }
            }
            if block_size < 65536 && on(&mut features, "bigalloc", 0.1, rng) {
                cluster_size = Some(block_size * 16);
            }
            on(&mut features, "orphan_file", 0.2, rng);
            if on(&mut features, "casefold", 0.1, rng) {
                extended.push("encoding=utf8".into());
            }
            on(&mut features, "encrypt", 0.1, rng);
            on(&mut features, "ea_inode", 0.15, rng);
            // Rare: e2fsck -fy waits 11 s on such an image (multiple-mount protection).
            on(&mut features, "mmp", 0.03, rng);
        } else if rng.random_bool(0.2) {
            features.push("^dir_index".into());
        }
        if fs == "ext2" && inode_size == 1024 {
            inode_size = 256;
        }
        let journal = match fs {
            "ext2" => Journal::None,
            _ if block_size == 65536 => Journal::Internal,
            _ => match rng.random_range(0..20) {
                0..=1 => Journal::External,
                2 if fs == "ext4" => Journal::None,
                _ => Journal::Internal,
            },
        };
        if journal == Journal::None && fs == "ext4" {
            features.push("^has_journal".into());
            features.retain(|f| f != "orphan_file");
        }
        let htree = !features.iter().any(|f| f == "^dir_index") && rng.random_bool(0.5);
        let size_kib = match block_size {
            1024 => 8 << 10,
            4096 => 16 << 10,
            _ => 48 << 10,
        };
        ImageRecipe {
            fs: fs.into(),
            block_size,
            inode_size,
            features,
            cluster_size,
            extended,
            journal,
            htree,
            size_kib,
            seed: rng.random(),
        }
    }
}

/// The programs a build needs.
pub struct BuildTools {
    pub mke2fs: PathBuf,
    pub e2fsck: PathBuf,
    pub debugfs: PathBuf,
}

/// Runs `cmd` with a 60 s limit, output to `log`; fails with the log's tail when it fails.
pub(super) fn run_logged(cmd: &mut Command, log: &Path, what: &str) -> Result<i32> {
    let out = std::fs::File::create(log).with_context(|| format!("creating {}", log.display()))?;
    cmd.env("E2FSPROGS_FAKE_TIME", FIXED_MTIME.to_string())
        .env("SOURCE_DATE_EPOCH", FIXED_MTIME.to_string())
        .env("E2FSCK_CONFIG", "/dev/null")
        .stdin(Stdio::null())
        .stdout(Stdio::from(out.try_clone()?))
        .stderr(Stdio::from(out));
    let o = child::run(cmd, Some(std::time::Duration::from_secs(60)))
        .with_context(|| format!("running {what}"))?;
    match o.code() {
        Some(c) => Ok(c),
        None => bail!("{what}: {}", o.describe()),
    }
}

fn tail(log: &Path) -> String {
    let text = std::fs::read_to_string(log).unwrap_or_default();
    let lines: Vec<&str> = text.lines().filter(|l| !l.trim().is_empty()).collect();
    lines[lines.len().saturating_sub(3)..].join(" / ")
}

/// Writes a file of `len` seeded bytes.
fn write_file(path: &Path, len: usize, rng: &mut ChaCha8Rng) -> Result<()> {
    let mut data = vec![0u8; len];
    rng.fill(&mut data[..]);
    std::fs::write(path, data).with_context(|| format!("writing {}", path.display()))
}

/// Generates the tree under `root` and returns its catalog.
fn generate_tree(r: &ImageRecipe, root: &Path, rng: &mut ChaCha8Rng) -> Result<Catalog> {
    use std::os::unix::fs::symlink;
    let bs = r.block_size as usize;
    let mut cat = Catalog::default();
    let dirs = rng.random_range(2..5);
    for d in 0..dirs {
        let dir = format!("/d{d}");
        std::fs::create_dir_all(root.join(&dir[1..]))?;
        cat.dirs.push(dir.clone());
        if d == 1 {
            let sub = format!("{dir}/sub");
            std::fs::create_dir_all(root.join(&sub[1..]))?;
            cat.dirs.push(sub.clone());
            write_file(&root.join(format!("sub_{d}")), 10, rng)?;
            std::fs::rename(
                root.join(format!("sub_{d}")),
                root.join(&sub[1..]).join("f"),
            )?;
            cat.files.push(format!("{sub}/f"));
        }
        for f in 0..rng.random_range(3..9) {
            let path = format!("{dir}/f{f}");
            // Tiny (inline or one block), a few blocks, or up to 13 blocks (past the direct
            // block pointers, so ext2/3 need an indirect block).
            let len = match rng.random_range(0..3) {
                0 => rng.random_range(0..60),
                1 => rng.random_range(1..4 * bs),
                _ => rng.random_range(12 * bs..14 * bs).min(1 << 20),
            };
            write_file(&root.join(&path[1..]), len, rng)?;
            cat.files.push(path);
        }
    }
    // Hard links across directories.
    std::fs::hard_link(root.join("d0/f0"), root.join("d1/link_to_f0"))?;
    cat.files.push("/d1/link_to_f0".into());
    // Fast and slow symlinks.
    symlink("d0/f1", root.join("fast_link"))?;
    symlink("d0/".repeat(30) + "x", root.join("slow_link"))?;
    cat.symlinks = vec!["/fast_link".into(), "/slow_link".into()];
    // A sparse file bigger than the file system, and a deep extent tree (or long block map):
    // every other block a hole.
    let sparse = std::fs::File::create(root.join("sparse"))?;
    use std::os::unix::fs::FileExt;
    sparse.write_all_at(b"start", 0)?;
    sparse.write_all_at(b"middle", 3 << 20)?;
    sparse.set_len(20 << 20)?;
    cat.files.push("/sparse".into());
    let deep = std::fs::File::create(root.join("deep"))?;
    let pieces = (450 * 1024 / bs).clamp(16, 450);
    let chunk = vec![0x5au8; bs];
    for k in 0..pieces {
        deep.write_all_at(&chunk, (2 * k * bs) as u64)?;
    }
    cat.files.push("/deep".into());
    // A fifo and a socket (device nodes come from debugfs: mknod needs no root there).
    let fifo = std::ffi::CString::new(root.join("fifo").as_os_str().as_encoded_bytes())?;
    // SAFETY: a valid NUL-terminated path.
    if unsafe { libc::mkfifo(fifo.as_ptr(), 0o644) } == 0 {
        cat.specials.push("/fifo".into());
    }
    if std::os::unix::net::UnixListener::bind(root.join("sock")).is_ok() {
        cat.specials.push("/sock".into());
    }
    // The large directory: hard links with long names, enough leaves for a two-level htree
    // with 1 KiB blocks.
    std::fs::create_dir_all(root.join("big"))?;
    write_file(&root.join("big_target"), 100, rng)?;
    let names = if bs == 1024 { 420 } else { 200 };
    for k in 0..names {
        let name = format!("{k:04}_{}", "n".repeat(240));
        std::fs::hard_link(root.join("big_target"), root.join("big").join(name))?;
    }
    cat.files.push("/big_target".into());
    cat.dirs.push("/big".into());
    cat.big_dir = "/big".into();
    cat.dirs.push("/".into());
    cat.dirs.push("/lost+found".into());
    Ok(cat)
}

/// The debugfs commands that finish the tree: device nodes, xattrs (in the inode, in a
/// block, in an ea_inode), a casefolded directory.
fn debugfs_finish(r: &ImageRecipe, dir: &Path, cat: &mut Catalog) -> Result<Vec<String>> {
    let mut cmds = vec![
        "mknod char_dev c 1 3".to_string(),
        "mknod block_dev b 7 0".to_string(),
    ];
    cat.specials.push("/char_dev".into());
    cat.specials.push("/block_dev".into());
    {
        let small = "/d0/f1";
        let big = "/d0/f2";
        cmds.push(format!("ea_set {small} user.small tiny"));
        let value = dir.join("xattr_value");
        // Values past a block would go to an ea_inode, but debugfs 1.47.0 writes those
        // with a hash e2fsck rejects: keep to an attribute block.
        let len = (r.block_size as usize / 2).min(3000);
        std::fs::write(&value, "v".repeat(len))?;
        cmds.push(format!("ea_set -f {} {big} user.big", value.display()));
        cat.xattr_files = vec![small.into(), big.into()];
    }
    if has(r, "casefold") {
        cmds.push("mkdir /folded".into());
        // Casefold plus the flag mkdir gave it (inline data, else extents).
        let kept = if has(r, "inline_data") {
            0x1000_0000
        } else {
            0x8_0000
        };
        cmds.push(format!(
            "set_inode_field /folded flags {:#x}",
            0x4000_0000 | kept
        ));
        cat.dirs.push("/folded".into());
    }
    Ok(cmds)
}

/// `mke2fs` arguments for the recipe (tree and image paths appended by the caller).
fn mke2fs_args(r: &ImageRecipe, entries: u64, journal_dev: Option<&Path>) -> Vec<String> {
    let mut a: Vec<String> = vec![
        "-q".into(),
        "-F".into(),
        "-t".into(),
        r.fs.clone(),
        "-b".into(),
        r.block_size.to_string(),
        "-I".into(),
        r.inode_size.to_string(),
        "-N".into(),
        (entries + 128).to_string(),
        "-U".into(),
        seeded_uuid(r.seed, 1),
    ];
    if !r.features.is_empty() {
        a.push("-O".into());
        a.push(r.features.join(","));
    }
    if let Some(c) = r.cluster_size {
        a.push("-C".into());
        a.push(c.to_string());
    }
    let mut ext = vec![format!("hash_seed={}", seeded_uuid(r.seed, 2))];
    ext.extend(r.extended.iter().cloned());
    a.push("-E".into());
    a.push(ext.join(","));
    if let Some(dev) = journal_dev {
        a.push("-J".into());
        a.push(format!("device={}", dev.display()));
    }
    a
}

/// Makes the external journal device and attaches it to a loop device for mke2fs.
fn external_journal(r: &ImageRecipe, t: &BuildTools, dir: &Path) -> Result<(PathBuf, String)> {
    let jimg = dir.join("journal.img");
    let log = dir.join("journal.log");
    let mut cmd = Command::new(&t.mke2fs);
    cmd.args(["-q", "-F", "-O", "journal_dev", "-b"])
        .arg(r.block_size.to_string())
        .args(["-U", &seeded_uuid(r.seed, 3)])
        .arg(&jimg)
        // Size in blocks: the smallest journal mke2fs accepts.
        .arg("1024");
    if run_logged(&mut cmd, &log, "mke2fs -O journal_dev")? != 0 {
        bail!("mke2fs -O journal_dev failed: {}", tail(&log));
    }
    let out = Command::new("losetup")
        .args(["-f", "--show"])
        .arg(&jimg)
        .output()
        .context("running losetup")?;
    if !out.status.success() {
        bail!(
            "losetup failed (an external journal needs root): {}",
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    Ok((
        jimg,
        String::from_utf8_lossy(&out.stdout).trim().to_string(),
    ))
}

/// Builds the image of `r` in `dir` (`dir/base.img`, `dir/journal.img`).
pub fn build(r: &ImageRecipe, t: &BuildTools, dir: &Path) -> Result<Built> {
    use rand::SeedableRng;
    let mut rng = ChaCha8Rng::seed_from_u64(r.seed);
    let tree = dir.join("tree");
    let _ = std::fs::remove_dir_all(&tree);
    std::fs::create_dir_all(&tree)?;
    let mut cat = generate_tree(r, &tree, &mut rng)?;
    let image = dir.join("base.img");
    let _ = std::fs::remove_file(&image);
    let entries = (cat.dirs.len() + cat.files.len() + cat.symlinks.len() + 16) as u64;
    let (journal, loopdev) = match r.journal {
        Journal::External => {
            let (j, l) = external_journal(r, t, dir)?;
            (Some(j), Some(l))
        }
        _ => (None, None),
    };
    let log = dir.join("build.log");
    let mut cmd = Command::new(&t.mke2fs);
    cmd.args(mke2fs_args(r, entries, loopdev.as_deref().map(Path::new)))
        .arg("-d")
        .arg(&tree)
        .arg(&image)
        .arg(format!("{}k", r.size_kib));
    let made = run_logged(&mut cmd, &log, "mke2fs");
    if let Some(l) = &loopdev {
        let _ = Command::new("losetup").args(["-d", l]).status();
    }
    if made? != 0 {
        bail!("mke2fs failed: {}", tail(&log));
    }
    let _ = std::fs::remove_dir_all(&tree);
    let cmds = debugfs_finish(r, dir, &mut cat)?;
    let script = dir.join("finish.debugfs");
    std::fs::write(&script, cmds.join("\n") + "\n")?;
    let mut cmd = Command::new(&t.debugfs);
    cmd.arg("-w").arg("-f").arg(&script).arg(&image);
    run_logged(&mut cmd, &log, "debugfs")?;
    let e2fsck = |flags: &str| {
        let mut cmd = Command::new(&t.e2fsck);
        cmd.arg(flags);
        if let Some(j) = &journal {
            cmd.arg("-j").arg(j);
        }
        cmd.arg(&image);
        run_logged(&mut cmd, &log, &format!("e2fsck {flags}"))
    };
    let repair = |flags: &str| -> Result<()> {
        if e2fsck(flags)? >= 4 {
            bail!("e2fsck {flags} failed: {}", tail(&log));
        }
        Ok(())
    };
    // `-D` indexes every multi-block directory; any run updates the quota files after the
    // debugfs edits. With quota, a second `-fy` follows: the quota e2fsck writes is what it
    // counted before pass 3A re-indexed the directories, so it is a block off when that
    // changed a directory's size.
    let runs: &[&str] = match (r.htree, has(r, "quota")) {
        (true, true) => &["-fyD", "-fy"],
        (true, false) => &["-fyD"],
        (false, true) => &["-fy"],
        (false, false) => &[],
    };
    for flags in runs {
        repair(flags)?;
    }
    let pin = || {
        crate::corrupt::normalize_times(&image, FIXED_MTIME as u32).context("pinning inode times")
    };
    pin()?;
    let mut code = e2fsck("-fn")?;
    // With quota, the runs above can still leave a usage a block off (1 image in 5,000 in
    // seeds 3018 and 3020; the cause is e2fsck's, not traced): one more `-fy` settles it.
    // Only an image that is not clean gets it, so every image clean before is built as before.
    if code != 0 && has(r, "quota") {
        repair("-fy")?;
        pin()?;
        code = e2fsck("-fn")?;
    }
    if code != 0 {
        bail!(
            "the built image is not clean (e2fsck -fn {code}): {}",
            tail(&log)
        );
    }
    Ok(Built {
        image,
        journal,
        catalog: cat,
    })
}
