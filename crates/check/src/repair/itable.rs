//! Inode tables moved back into their group: the new blocks chosen at the end of pass 1
//! (`relocate::plan`) get the old table's contents when it can still be read, zeroes when
//! it cannot, and the descriptor points at them. As in e2fsck, every other fix of that round
//! waits: the next round checks the file system again from the start, with the table in place.

use super::alloc::write_desc;
use crate::engine::AllocFacts;
use crate::pass0::Pass0Facts;
use crate::relocate::Table;
use ffsck_io::Device;

/// Whether this round moves an inode table (and so restarts the check).
pub fn moves(facts: Option<&AllocFacts>) -> bool {
    facts.is_some_and(|f| f.relocated.iter().any(|m| m.which == Table::InodeTable))
}

/// Whether group `g`'s inode table got new blocks this round (none when no room was found).
pub fn moved(facts: Option<&AllocFacts>, g: u32) -> bool {
    facts.is_some_and(|f| {
        f.relocated
            .iter()
            .any(|m| m.which == Table::InodeTable && m.group == g)
    })
}

/// Copy (or zero) each moved table into its new blocks and point the descriptor at them.
pub fn apply(p0: &Pass0Facts, dev: &dyn Device, facts: &AllocFacts) {
    let fs = &p0.fs;
    let geo = &fs.geo;
    let bs = u64::from(geo.block_size);
    let n = u64::from(geo.inode_blocks_per_group);
    let mut buf = vec![0u8; bs as usize];
    for m in facts
        .relocated
        .iter()
        .filter(|m| m.which == Table::InodeTable)
    {
        // The old table is copied only when all of it lies inside the file system.
        let from = m
            .from
            .filter(|&b| b.checked_add(n).is_some_and(|e| e <= geo.blocks_count));
        for i in 0..n {
            buf.fill(0);
            if let Some(old) = from {
                if dev.read_at(&mut buf, (old + i) * bs).is_err() {
                    buf.fill(0);
                }
            }
            let _ = dev.write_at(&buf, (m.blk + i) * bs);
        }
        let Some(gd) = fs.groups.get(m.group as usize) else {
            continue;
        };
        let mut gd = gd.clone();
        gd.set_inode_table(m.blk);
        gd.update_checksum(&fs.sb, m.group, geo.desc_size as usize);
        write_desc(p0, dev, m.group, &gd);
    }
}
