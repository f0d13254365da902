//! Directory path names for messages, as e2fsck prints them (`Entry 'x' in /a/b (13)`): each
//! directory's name is looked up in the parent pass 2 found for it, up to the root. A parent
//! that is unknown, or a name that cannot be found, reads `???`.

use crate::ext4::dir as edir;
use crate::filemap::{self, Visit};
use crate::fs::Fs;
use crate::pass2::DirTable;
use crate::report::Finding;
use ffsck_format::ino;
use ffsck_format::inode::{flags, RawInode};
use std::collections::HashMap;

/// Findings named per check at most: a hostile image can have a finding per entry.
const MAX_NAMED: usize = 10_000;
/// Path components looked up at most (deeper paths start with `...`).
const MAX_DEPTH: usize = 64;
/// Blocks of one parent searched for a child's name at most.
const MAX_BLOCKS: u64 = 4096;
/// Directory blocks read for all the names of one check at most.
const MAX_READS: u64 = 1 << 18;

/// Fill in the path of the directory (`ctx.dir`) of every finding whose message names it.
pub fn name_dirs(fs: &Fs, dirs: &DirTable, findings: &mut [Finding]) {
    let mut namer = Namer {
        fs,
        dirs,
        paths: HashMap::new(),
        budget: MAX_READS,
    };
    // Whether a finding's message names its directory, and its inode as a directory.
    let wants = |f: &Finding| {
        let m = f.problem.info().message;
        let dir = f.ctx.dir != 0
            && (m.contains("{dirpath}") || m.contains("{dirname}") || m.contains("{strpath}"));
        (dir, f.ctx.ino != 0 && m.contains("{inopath}"))
    };
    let wanted = findings
        .iter_mut()
        .filter(|f| wants(f) != (false, false))
        .take(MAX_NAMED);
    for f in wanted {
        let (dir, ino) = wants(f);
        if dir {
            f.ctx.path.0 = Some(namer.path(f.ctx.dir));
        }
        if ino {
            f.ctx.ino_path.0 = Some(namer.path(f.ctx.ino));
        }
    }
}

struct Namer<'a> {
    fs: &'a Fs,
    dirs: &'a DirTable,
    /// Paths found so far, by directory (every ancestor named on the way is kept).
    paths: HashMap<u32, String>,
    /// Directory blocks all lookups together may still read.
    budget: u64,
}

impl Namer<'_> {
    /// The path of directory `dir`.
    fn path(&mut self, dir: u32) -> String {
        // Up the parents to the root, or to a directory already named.
        let mut chain = Vec::new();
        let mut cur = dir;
        let mut top = loop {
            if cur == ino::ROOT {
                break "/".to_string();
            }
            if let Some(p) = self.paths.get(&cur) {
                break p.clone();
            }
            if chain.len() == MAX_DEPTH {
                break "...".to_string();
            }
            let parent = self.dirs.get(&cur).map_or(0, |l| l.parent);
            match (parent, self.name_in(parent, cur)) {
                (0, _) | (_, None) => {
                    chain.push((cur, "???".to_string()));
                    break "/".to_string();
                }
                (p, Some(name)) => {
                    chain.push((cur, name));
                    cur = p;
                }
            }
        };
        // Down again, naming each directory of the chain.
        for (d, name) in chain.into_iter().rev() {
            top = match top.as_str() {
                "/" => format!("/{name}"),
                _ => format!("{top}/{name}"),
            };
            self.paths.insert(d, top.clone());
        }
        top
    }

    /// The name of the entry for `child` in directory `parent`, searched in its blocks.
    fn name_in(&mut self, parent: u32, child: u32) -> Option<String> {
        let fs = self.fs;
        let raw = fs.read_inode(parent)?;
        let inode = RawInode::parse(&raw);
        if inode.flags() & flags::INLINE_DATA != 0 {
            return None;
        }
        let extents = inode.flags() & flags::EXTENTS != 0;
        let mut found = None;
        let allowed = MAX_BLOCKS.min(self.budget);
        if allowed == 0 {
            return None;
        }
        let mut budget = allowed;
        let mut visit = |v: Visit| -> bool {
            let Visit::Data { pblk, .. } = v else {
                return true;
            };
            budget = budget.saturating_sub(1);
            if let Some(b) = fs.read_block(pblk) {
                found = edir::leaf_entries(&b)
                    .good()
                    .find(|e| e.inode == child && e.name != b"." && e.name != b"..")
                    .map(|e| String::from_utf8_lossy(e.name).into_owned());
            }
            found.is_none() && budget > 0
        };
        filemap::walk(fs, &inode.block_bytes(), extents, false, &mut visit);
        self.budget -= allowed - budget;
        found
    }
}
