//! Pass 3: directory connectivity.
//!
//! Checks: the root exists and is a directory; every directory reaches the root through its
//! parent links without a loop; each directory's `..` names its parent.
//! Produces: findings only. Relies on: `Pass1Facts` (in-use inodes), `Pass2Facts` (links).
//! Frees: nothing.

use crate::bitmap::Bitmap;
use crate::facts::Pass1Facts;
use crate::pass2::Pass2Facts;
use crate::problem::Problem as P;
use crate::report::{Findings, Policy, ProblemCtx};
use ffsck_format::ino::ROOT;

/// Result of pass 3: whether the check can go on.
pub struct Pass3Facts {
    pub root_ok: bool,
}

/// `progress` advances by one per directory (the root first), as e2fsck's does.
pub fn run(
    p1: &Pass1Facts,
    p2: &Pass2Facts,
    policy: Policy,
    out: &mut Findings,
    progress: &crate::progress::Progress,
) -> Pass3Facts {
    let root_is_dir = p2.dirs.contains_key(&ROOT);
    if !p1.inode_used.get(u64::from(ROOT - 1)) || !root_is_dir {
        if !p1.inode_used.get(u64::from(ROOT - 1)) {
            out.report(policy, P::P3_NO_ROOT_INODE, ProblemCtx::ino(ROOT));
        }
        return Pass3Facts { root_ok: false };
    }
    let n = p1.inode_used.len();
    let mut done = Bitmap::new(n + 1);
    done.set(u64::from(ROOT));
    // The directories of the current walk, in a list and a bitmap (a loop is a directory met
    // twice), both emptied after each walk: nothing is allocated per directory.
    let mut chain: Vec<u32> = Vec::new();
    let mut on_chain = Bitmap::new(n + 1);
    for (dir, links) in p2.dirs.iter() {
        progress.advance(1);
        if dir == ROOT {
            continue;
        }
        // Walk up the parent chain; `on_chain` detects loops, `done` stops at connected dirs.
        // A directory's links are looked up only once the walk reaches it unfinished (most
        // walks end at their first parent, which is done: no lookup at all).
        let mut cur = dir;
        // Reconnected to /lost+found: its `..` is fixed once it has its new parent.
        let mut connected = false;
        // A chain can never be longer than the number of directories.
        for _ in 0..=p2.dirs.len() {
            if done.get(u64::from(cur)) {
                break;
            }
            // (Back at `dir` after a loop, its own links again.)
            let cur_links = if cur == dir {
                links
            } else {
                p2.dirs.get(&cur).unwrap_or_default()
            };
            if on_chain.get(u64::from(cur)) {
                // Reconnected to /lost+found, as an unconnected directory is; the repair
                // also drops the entry that closed the loop (in its parent's directory), so
                // the next pass 2 cannot choose it over the new one.
                let yes = out.report(
                    policy,
                    P::P3_LOOPED_DIR,
                    ProblemCtx {
                        ino: cur,
                        dir: cur_links.parent,
                        ..Default::default()
                    },
                );
                connected |= yes && cur == dir;
                break;
            }
            on_chain.set(u64::from(cur));
            chain.push(cur);
            let parent = cur_links.parent;
            if parent == 0 {
                let yes = out.report(
                    policy,
                    P::P3_UNCONNECTED_DIR,
                    ProblemCtx {
                        ino: cur,
                        dir: cur_links.dotdot,
                        ..Default::default()
                    },
                );
                connected |= yes && cur == dir;
                break;
            }
            if parent == ROOT {
                break;
            }
            cur = parent;
        }
        for s in chain.drain(..) {
            done.set(u64::from(s));
            on_chain.clear(u64::from(s));
        }
        if links.dotdot != links.parent && !connected {
            out.report(
                policy,
                P::P3_BAD_DOT_DOT,
                ProblemCtx {
                    ino: dir,
                    dir: links.dotdot,
                    ino2: links.parent,
                    ..Default::default()
                },
            );
        }
    }
    if let Some(r) = p2.dirs.get(&ROOT) {
        if r.dotdot != ROOT {
            out.report(
                policy,
                P::P3_BAD_DOT_DOT,
                ProblemCtx {
                    ino: ROOT,
                    dir: r.dotdot,
                    ino2: ROOT,
                    ..Default::default()
                },
            );
        }
    }
    Pass3Facts { root_ok: true }
}
