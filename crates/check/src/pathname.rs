//! Directory path names for messages, as e2fsck prints them (`Entry 'x' in /a/b (13)`) and
//! as libext2fs's `ext2fs_get_pathname` finds them at message time: a directory's parent is
//! the last `..` entry read in it, its name the first entry naming it in that parent. A name
//! not found reads `???`, a "parent" that is not a directory `<parent>/<child>`, a directory
//! that cannot be read the whole path `???`, and a chain too deep `...`.

use crate::ext4::dir::{self as edir, Step};
use crate::filemap::{self, Visit};
use crate::fs::Fs;
use crate::report::Finding;
use ffsck_format::ino;
use ffsck_format::inode::{flags, FileType, RawInode};
use std::collections::HashMap;

/// Findings named per check at most: a hostile image can have a finding per entry.
const MAX_NAMED: usize = 10_000;
/// Parents looked up at most, as libext2fs (deeper paths start with `...`).
const MAX_DEPTH: i32 = 32;
/// Blocks of one parent searched for a child's name at most.
const MAX_BLOCKS: u64 = 4096;
/// Directory blocks read for all the names of one check at most.
const MAX_READS: u64 = 1 << 18;

/// Fill in the path of the directory (`ctx.dir`) of every finding whose message names it.
pub fn name_dirs(fs: &Fs, findings: &mut [Finding]) {
    let mut namer = Namer {
        fs,
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
        if f.problem == crate::problem::Problem::P3_BAD_DOT_DOT {
            // e2fsck names the directory by its name in the parent it should have, `..`'s
            // target by itself, and that parent.
            let (ino, dotdot, parent) = (f.ctx.ino, f.ctx.dir, f.ctx.ino2);
            f.ctx.ino_path.0 = Some(namer.print(parent, ino));
            f.ctx.path2.0 = Some(namer.print(dotdot, 0));
            f.ctx.path.0 = Some(namer.print(parent, 0));
            continue;
        }
        let (dir, ino) = wants(f);
        if dir {
            f.ctx.path.0 = Some(namer.path(f.ctx.dir));
        }
        if ino {
            f.ctx.ino_path.0 = Some(namer.path(f.ctx.ino));
        }
    }
}

/// The reserved inodes as e2fsck names them.
const SPECIAL: [&str; 11] = [
    "<The NULL inode>",
    "<The bad blocks inode>",
    "/",
    "<The user quota inode>",
    "<The group quota inode>",
    "<The boot loader inode>",
    "<The undelete directory inode>",
    "<The group descriptor inode>",
    "<The journal inode>",
    "<Reserved inode 9>",
    "<Reserved inode 10>",
];

/// What reading a directory for one inode's name found.
enum Scan {
    /// The "directory" is not one.
    NotDir,
    /// It could not be read through (an unreadable block, a broken entry or map).
    Failed,
    /// The last `..` read (0 for none) and the name of the inode looked for, if found.
    Read { parent: u32, name: Option<String> },
}

struct Namer<'a> {
    fs: &'a Fs,
    /// Paths found so far: by directory and the inode named in it (0 for the directory's own).
    paths: HashMap<(u32, u32), Option<String>>,
    /// Directory blocks all lookups together may still read.
    budget: u64,
}

impl Namer<'_> {
    /// The path of directory `dir`.
    fn path(&mut self, dir: u32) -> String {
        self.print(dir, 0)
    }

    /// `ino` in `dir` (`dir` itself for 0) as e2fsck prints a path: with no directory, a
    /// reserved inode by its role.
    fn print(&mut self, dir: u32, ino: u32) -> String {
        if dir == 0 {
            if let Some(name) = SPECIAL.get(ino as usize) {
                return name.to_string();
            }
        }
        self.get(dir, ino, MAX_DEPTH)
            .unwrap_or_else(|| "???".to_string())
    }

    /// The path of `ino` in directory `dir` (of `dir` itself for 0), or `None` when a
    /// directory on the way could not be read.
    fn get(&mut self, dir: u32, ino: u32, depth: i32) -> Option<String> {
        if dir == ino {
            return Some(if dir == ino::ROOT { "/" } else { "." }.to_string());
        }
        if dir == 0 || depth < 0 {
            return Some("...".to_string());
        }
        if let Some(p) = self.paths.get(&(dir, ino)) {
            return p.clone();
        }
        let found = match self.scan(dir, ino) {
            Scan::NotDir if ino != 0 => Some(format!("<{dir}>/<{ino}>")),
            Scan::NotDir => Some(format!("<{dir}>")),
            Scan::Failed => None,
            Scan::Read { parent, name } => self.get(parent, dir, depth - 1).map(|top| {
                if ino == 0 {
                    return top;
                }
                let name = name.unwrap_or_else(|| "???".to_string());
                match top.as_str() {
                    "/" => format!("/{name}"),
                    _ => format!("{top}/{name}"),
                }
            }),
        };
        self.paths.insert((dir, ino), found.clone());
        found
    }

    /// Read directory `dir` as libext2fs's directory iteration does, up to the entry naming
    /// `search` (to the end for 0): the last `..` before it, and its name.
    fn scan(&mut self, dir: u32, search: u32) -> Scan {
        let fs = self.fs;
        if dir > fs.geo.inodes_count {
            return Scan::Failed;
        }
        let Some(raw) = fs.read_inode(dir) else {
            return Scan::Failed;
        };
        let inode = RawInode::parse(&raw);
        if inode.file_type() != FileType::Directory {
            return Scan::NotDir;
        }
        let bs = fs.block_size() as u32;
        let mut parent = 0;
        let mut name = None;
        // One area's entries; false when the area is damaged.
        let read = |area: &[u8], parent: &mut u32, name: &mut Option<String>| -> bool {
            for step in edir::entries(area, bs) {
                let Step::Entry(e) = step else {
                    return false;
                };
                if e.inode == 0 {
                    continue;
                }
                if e.name == b".." {
                    *parent = e.inode;
                }
                if search != 0 && e.inode == search {
                    *name = Some(edir::display_name(e.name));
                    return true;
                }
            }
            true
        };
        if inode.flags() & flags::INLINE_DATA != 0 {
            // The parent is the first word of i_block; the entries follow it, then go on in
            // the `system.data` attribute.
            let ib = inode.block_bytes();
            parent = u32::from_le_bytes([ib[0], ib[1], ib[2], ib[3]]);
            if !read(&ib[4..], &mut parent, &mut name) {
                return Scan::Failed;
            }
            if name.is_none() {
                if let Some(extra) = crate::ext4::inode::inline_data(&raw) {
                    if !read(&extra, &mut parent, &mut name) {
                        return Scan::Failed;
                    }
                }
            }
            return Scan::Read { parent, name };
        }
        let extents = inode.flags() & flags::EXTENTS != 0;
        let allowed = MAX_BLOCKS.min(self.budget);
        let mut budget = allowed;
        let mut failed = false;
        let mut visit = |v: Visit| -> bool {
            let Visit::Data { pblk, .. } = v else {
                return true;
            };
            if budget == 0 {
                failed = true;
                return false;
            }
            budget -= 1;
            match fs.read_block(pblk).filter(|_| fs.geo.is_valid_block(pblk)) {
                Some(b) => {
                    if !read(&b, &mut parent, &mut name) {
                        failed = true;
                    }
                }
                None => failed = true,
            }
            !failed && name.is_none()
        };
        let whole = filemap::walk(fs, &inode.block_bytes(), extents, false, &mut visit);
        self.budget -= allowed - budget;
        if failed || !whole {
            return Scan::Failed;
        }
        Scan::Read { parent, name }
    }
}
