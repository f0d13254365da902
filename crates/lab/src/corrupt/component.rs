//! `--component C --group G`: corruptFS-style flips of one byte inside one metadata component
//! of one group (superblock, descriptors, reserved GDT, bitmaps, inode table).

use anyhow::{bail, Result};
use ffsck_format::{fields, inode, SUPERBLOCK_OFFSET, SUPERBLOCK_SIZE};
use rand::Rng;
use rand_chacha::ChaCha8Rng;

use super::field::field_at;
use super::image::{Dirty, Image};
use super::Component;

/// The region one corruptFS flip may hit: (byte offset, length, name, checksum owner).
pub(super) fn component_region(
    img: &Image,
    c: Component,
    g: u32,
) -> Result<(u64, u64, String, Dirty)> {
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

pub(super) fn corrupt_component(
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
