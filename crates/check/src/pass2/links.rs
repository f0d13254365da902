//! The links pass 2 finds for each directory (its `..` and the first directory naming it),
//! kept per directory for passes 3 and 4.

use std::sync::Arc;

/// Parent links of one directory.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, zerocopy::FromZeros)]
pub struct DirLinks {
    /// The inode its `..` entry names (0 if missing).
    pub dotdot: u32,
    /// The first directory found to contain an entry for it (0 if none).
    pub parent: u32,
}

impl crate::spill::Record for DirLinks {
    /// `dotdot`, `parent`, little-endian.
    const BYTES: usize = 8;
    fn load(b: &[u8]) -> Self {
        DirLinks {
            dotdot: u32::load(&b[0..4]),
            parent: u32::load(&b[4..8]),
        }
    }
    fn store(&self, b: &mut [u8]) {
        self.dotdot.store(&mut b[0..4]);
        self.parent.store(&mut b[4..8]);
    }
}

/// `DirLinks` of every directory, by inode number: one array in the order of pass 1's
/// directory index, which finds a directory's position in constant time (denser and faster
/// than a tree map when there are millions of directories). Under `--max-memory` the links go
/// to a scratch file once they outgrow their share.
#[derive(Default)]
pub struct DirTable {
    /// Pass 1's index of the directories, shared: links are kept by position in it.
    pub(super) index: Arc<crate::facts::DirIndex>,
    pub(super) links: crate::spill::Table<DirLinks>,
}

impl DirTable {
    /// All links zero; they spill when they would take more than `limits.dir_links_bytes`.
    pub(super) fn new(dirs: &crate::facts::DirList, limits: &crate::spill::Limits) -> Self {
        DirTable {
            index: dirs.index().clone(),
            links: crate::spill::Table::zeroed(
                dirs.len(),
                limits.dir_links_bytes,
                limits.scratch_dir.as_deref(),
            ),
        }
    }
    pub(super) fn link(&self, i: usize) -> DirLinks {
        self.links.get(i).unwrap_or_default()
    }
    pub fn get(&self, ino: &u32) -> Option<DirLinks> {
        self.index.position(*ino).map(|i| self.link(i))
    }
    /// Change the links of directory `ino`, if it is one; `f`'s result.
    pub fn update<R>(&mut self, ino: &u32, f: impl FnOnce(&mut DirLinks) -> R) -> Option<R> {
        self.links.update(self.index.position(*ino)?, f)
    }
    pub fn contains_key(&self, ino: &u32) -> bool {
        self.index.position(*ino).is_some()
    }
    pub fn len(&self) -> usize {
        self.index.len()
    }
    /// Directories in ascending inode order.
    pub fn iter(&self) -> impl Iterator<Item = (u32, DirLinks)> + '_ {
        self.index
            .iter()
            .enumerate()
            .map(|(i, ino)| (ino, self.link(i)))
    }
    /// The links went to a scratch file that could not be written or read back.
    pub fn spill_failed(&self) -> bool {
        self.links.failed()
    }
}
