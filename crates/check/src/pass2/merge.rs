//! The sequential half of pass 2: block outputs merged in block order, which decides what
//! depends on order (parents, `..`, the first entry naming a flagged inode, an abort), and the
//! duplicate names of directories marked for rebuilding.

use super::bad_inode::process_bad_inode;
use super::links::DirTable;
use super::out::{Event, Outs};
use crate::ext4::dir as edir;
use crate::fs::Fs;
use crate::htree;
use crate::problem::Problem as P;
use crate::report::{Findings, Policy, ProblemCtx};
use std::collections::{BTreeMap, BTreeSet, HashSet};

/// The sequential, order-dependent half of pass 2, fed window by window in block order.
pub(super) struct Merge {
    pub(super) dirs: DirTable,
    /// Flagged inodes whose fields were already checked (at their first entry).
    pub(super) bad_done: HashSet<u32>,
    /// Flagged inodes cleared at their first entry (with the entry): pass 4 passes them by.
    pub(super) cleared: BTreeSet<u32>,
    /// Directories marked for rebuilding (duplicate names), in e2fsck's sense: later blocks
    /// do not report duplicates again, their checksum problems are left to the rebuild, and
    /// their index is not validated.
    pub(super) rehash: BTreeSet<u32>,
    pub(super) dx_facts: BTreeMap<u32, Vec<htree::DxBlock>>,
    /// An unsalvaged corrupted block ended pass 2; nothing after it is merged.
    pub(super) aborted: bool,
}

impl Merge {
    /// Nothing merged yet; the links go to `dirs`.
    pub(super) fn new(dirs: DirTable) -> Self {
        Merge {
            dirs,
            bad_done: HashSet::new(),
            cleared: BTreeSet::new(),
            rehash: BTreeSet::new(),
            dx_facts: BTreeMap::new(),
            aborted: false,
        }
    }

    pub(super) fn merge(&mut self, fs: &Fs, policy: Policy, outs: Vec<Outs>, out: &mut Findings) {
        for o in outs {
            self.merge_outs(fs, policy, o, out);
        }
    }

    pub(super) fn merge_outs(&mut self, fs: &Fs, policy: Policy, outs: Outs, out: &mut Findings) {
        let Outs {
            heads,
            findings,
            events,
            names,
        } = outs;
        let mut findings = findings.into_iter();
        let mut events = events.into_iter();
        for h in heads {
            if self.aborted {
                return;
            }
            // Empty for almost every block: collecting nothing allocates nothing.
            let mut found: Vec<crate::report::Finding> =
                findings.by_ref().take(h.findings as usize).collect();
            let block_events = events.by_ref().take(h.events as usize);
            let mut dx = h.dx;
            // An unsalvaged corrupted block ends pass 2 (and the check) right there.
            if let Some(i) = found
                .iter()
                .position(|f| f.problem == P::P2_DIR_CORRUPTED && !f.fixed)
            {
                found.truncate(i + 1);
                dx = None;
                self.aborted = true;
            }
            if self.rehash.contains(&h.dir) {
                found
                    .into_iter()
                    .filter(|f| {
                        !matches!(
                            f.problem,
                            P::P2_REPORT_DUP_DIRENT
                                | P::P2_LEAF_NODE_MISSING_CSUM
                                | P::P2_HTREE_ROOT_CSUM_INVALID
                                | P::P2_HTREE_NODE_CSUM_INVALID
                        )
                    })
                    .for_each(|f| out.push(f));
            } else {
                if found.iter().any(|f| f.problem == P::P2_REPORT_DUP_DIRENT) {
                    self.rehash.insert(h.dir);
                }
                // A directory's holes stay one run across blocks and chunks (`push`).
                found.into_iter().for_each(|f| out.push(f));
                if let Some(d) = dx {
                    self.dx_facts.entry(h.dir).or_default().push(*d);
                }
            }
            for ev in block_events {
                match ev {
                    Event::DotDot { dir, target } => {
                        self.dirs.update(&dir, |d| d.dotdot = target);
                    }
                    Event::Subdir { dir, child, name } => {
                        // The first directory naming it becomes its parent.
                        let first = self.dirs.update(&child, |d| {
                            let first = d.parent;
                            if first == 0 {
                                d.parent = dir;
                            }
                            first
                        });
                        if let Some(first) = first {
                            if first != 0 {
                                out.report(
                                    policy,
                                    P::P2_LINK_DIR,
                                    ProblemCtx {
                                        dir,
                                        ino: child,
                                        ino2: first,
                                        name: Some(display_name(name.get(&names))),
                                        ..Default::default()
                                    },
                                );
                                // Unfixed, the entry still counts as a reference.
                            }
                        }
                    }
                    Event::BadInode {
                        dir,
                        ino,
                        name,
                        at,
                        clears,
                        as_dir,
                    } => {
                        let name = display_name(name.get(&names));
                        let entry = ProblemCtx {
                            dir,
                            ino,
                            blk: at.pblk,
                            num: u64::from(at.lblk),
                            num2: u64::from(at.off),
                            name: Some(name.clone()),
                            ..Default::default()
                        };
                        if self.bad_done.insert(ino) {
                            if process_bad_inode(fs, policy, dir, ino, &name, as_dir, out) {
                                self.cleared.insert(ino);
                                if clears {
                                    out.report(policy, P::P2_CLEARED_INODE_ENTRY, entry);
                                }
                            }
                        } else if clears && self.cleared.contains(&ino) {
                            // A later entry of an inode cleared at its first one.
                            out.report(policy, P::P2_UNUSED_INODE, entry);
                        }
                    }
                }
            }
        }
    }
}

/// Read every name of directory `dir` (its blocks `list`) and report names that occur more
/// than once, as e2fsck's directory rebuild does before rewriting the directory.
pub(super) fn report_duplicate_names(
    fs: &Fs,
    policy: Policy,
    dir: u32,
    list: &[u64],
    encrypted: bool,
    out: &mut Findings,
) {
    let bs = fs.block_size();
    let mut names: Vec<(Vec<u8>, u32)> = Vec::new();
    for &pblk in list {
        let Some(buf) = fs.read_block(pblk) else {
            continue;
        };
        // Up to the first damaged entry (the checksum tail is an entry of inode 0).
        for e in edir::entries(&buf, bs as u32).good() {
            if e.inode != 0 && !e.name.is_empty() && e.name != b"." && e.name != b".." {
                names.push((e.name.to_vec(), e.inode));
            }
        }
    }
    names.sort();
    // The names taken so far: a renamed entry's new name is none of them (as the rebuild
    // renames it).
    let mut taken: std::collections::HashSet<Vec<u8>> =
        names.iter().map(|(n, _)| n.clone()).collect();
    for w in names.windows(2) {
        let (prev, cur) = (&w[0], &w[1]);
        if prev.0 != cur.0 {
            continue;
        }
        let mut pctx = ProblemCtx {
            dir,
            ino: dir,
            name: Some(display_name(&cur.0)),
            ..Default::default()
        };
        if cur.1 == prev.1 && out.report(policy, P::P2_DUPLICATE_DIRENT, pctx.clone()) {
            continue;
        }
        if encrypted && out.report(policy, P::P2_NON_UNIQUE_FILE_NO_RENAME, pctx.clone()) {
            continue;
        }
        let new = crate::ext4::dir::renamed(&cur.0, &taken);
        pctx.str = Some(display_name(&new));
        taken.insert(new);
        out.report(policy, P::P2_NON_UNIQUE_FILE, pctx);
    }
}

pub(super) fn display_name(raw: &[u8]) -> String {
    crate::ext4::dir::display_name(raw)
}
