//! `--field NAME --op VERB`: damage addressed by field name (`inode[12].i_links_count`,
//! `gd[0].bg_checksum`, `sb.s_magic`…), located through `ffsck_format`'s field tables.

use anyhow::{anyhow, bail, Result};
use ffsck_format::{dir, fields, inode, SUPERBLOCK_OFFSET};
use rand::Rng;
use rand_chacha::ChaCha8Rng;

use super::image::{dir_dirty, Dirty, Image};
use super::{parse_number, Op};
use crate::change::hex;

/// A parsed `--field`: where it is, how big, its byte order, and what checksum covers it.
pub(super) struct Located {
    offset: u64,
    size: usize,
    big_endian: bool,
    dirty: Dirty,
}

/// `name[1][2]` → ("name", [1, 2]).
pub(super) fn split_indices(s: &str) -> Result<(&str, Vec<u64>)> {
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

pub(super) fn lookup(table: &[fields::Field], name: &str, what: &str) -> Result<(usize, usize)> {
    let (_, off, size) = fields::find(table, name).ok_or_else(|| {
        let names: Vec<&str> = table.iter().map(|f| f.0).collect();
        anyhow!("no field `{name}` in {what} (known: {})", names.join(", "))
    })?;
    Ok((off, size))
}

pub(super) fn index_u32(idx: &[u64], n: usize, spec: &str) -> Result<u32> {
    let v = *idx
        .get(n)
        .ok_or_else(|| anyhow!("`{spec}` needs {} index(es)", n + 1))?;
    u32::try_from(v).map_err(|_| anyhow!("index {v} too large in `{spec}`"))
}

pub(super) fn locate(img: &Image, spec: &str) -> Result<Located> {
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
            let b = i.file_acl(img.geo.sixty_four_bit());
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

/// Applies `op` to the bytes of a field.
pub(super) fn apply_op(
    old: &[u8],
    op: &Op,
    big_endian: bool,
    rng: &mut ChaCha8Rng,
) -> Result<Vec<u8>> {
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

pub(super) fn corrupt_field(
    img: &mut Image,
    spec: &str,
    op: &Op,
    rng: &mut ChaCha8Rng,
) -> Result<String> {
    let loc = locate(img, spec)?;
    let old = img.read(loc.offset, loc.size)?;
    let new = apply_op(&old, op, loc.big_endian, rng)?;
    img.write(loc.offset, &new, spec.to_string(), "damage")?;
    img.mark(loc.dirty);
    Ok(format!("{spec}: {} → {}", hex(&old), hex(&new)))
}

/// Name of the field of `table` holding byte `off`, for the manifest.
pub(super) fn field_at(table: &[fields::Field], off: usize) -> Option<&'static str> {
    table
        .iter()
        .find(|(_, o, s)| (*o..o + s).contains(&off))
        .map(|f| f.0)
}
