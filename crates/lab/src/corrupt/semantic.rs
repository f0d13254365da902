//! `--semantic S`: damage with a meaning (a multiply-claimed block, an orphan, a dangling entry,
//! a lost `..`, a directory loop), written as a user-level bug would leave it.

use anyhow::{anyhow, bail, Result};
use ffsck_format::{dir, inode};
use rand::Rng;
use rand_chacha::ChaCha8Rng;

use super::image::{dir_dirty, Dirty, Image};
use super::Semantic;

/// Most inodes scanned for a victim.
const SCAN: u32 = 20_000;

/// A uniform pick in `0..n`.
fn pick(rng: &mut ChaCha8Rng, n: usize) -> usize {
    rng.random_range(0..n)
}

/// A directory and its block 0 entries: (dir inode, block, entries at their offsets).
pub(super) type DirBlock0 = (u32, u64, Vec<(usize, dir::DirentHeader)>);

/// Directories and their block 0 entries, for the semantic modes.
pub(super) fn scan_dirs(img: &Image, limit: u32) -> Vec<DirBlock0> {
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
pub(super) fn merge_away(
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

/// Applies one semantic corruption; returns what it did, for the manifest.
pub(super) fn corrupt_semantic(
    img: &mut Image,
    s: Semantic,
    rng: &mut ChaCha8Rng,
) -> Result<String> {
    match s {
        Semantic::MultiplyClaimed => multiply_claimed(img, rng),
        Semantic::Orphan | Semantic::DanglingEntry => unreference(img, s, rng),
        Semantic::UnlinkDotdot => unlink_dotdot(img, rng),
        Semantic::DirLoop => dir_loop(img, rng),
    }
}

/// Points the first block of one regular file at the first block of another.
fn multiply_claimed(img: &mut Image, rng: &mut ChaCha8Rng) -> Result<String> {
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

/// Orphan: merges a file's entry away, so the inode is in use but unreferenced. Dangling
/// entry: points the entry at a free inode instead.
fn unreference(img: &mut Image, s: Semantic, rng: &mut ChaCha8Rng) -> Result<String> {
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

/// Zeroes the inode of a directory's `..` entry.
fn unlink_dotdot(img: &mut Image, rng: &mut ChaCha8Rng) -> Result<String> {
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

/// Links a directory back to its parent and removes the parent's own entry: a loop cut off
/// from the root.
fn dir_loop(img: &mut Image, rng: &mut ChaCha8Rng) -> Result<String> {
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
    if yes[2].1.file_type != dir::ft::DIR && img.sb.incompat().has(ffsck_format::Incompat::FILETYPE)
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
