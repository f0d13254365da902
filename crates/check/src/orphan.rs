//! The orphan file (`orphan_file` feature) and the `orphan_present` flag, checked after
//! pass 5 as e2fsck does: every orphan-file block must be a clean, empty orphan block (all
//! slots zero, tail magic and, with `metadata_csum`, a valid tail checksum), the file must have
//! no holes and a whole number of blocks, and `orphan_present` must agree with what was found.
//!
//! The old orphan *list* (`s_last_orphan` chained through `i_dtime`) is not walked in a
//! read-only check: e2fsck only releases it when it may write. Its leftovers surface in pass 1
//! as inodes with a low dtime (`P1_LOW_DTIME`).

use crate::filemap::{self, Visit};
use crate::fs::Fs;
use crate::problem::Problem as P;
use crate::report::{Findings, Policy, ProblemCtx};
use ffsck_format::inode::RawInode;
use ffsck_format::{Compat, RoCompat};

pub use ffsck_format::verify::ORPHAN_BLOCK_MAGIC;
/// Size of the tail (`ob_magic`, `ob_checksum`) at the end of each orphan-file block.
const TAIL_BYTES: usize = ffsck_format::verify::ORPHAN_TAIL_BYTES;

/// How the orphan file looked (e2fsck's 0 = clean, 1 = corrupt, 2 = had to be cleared).
#[derive(PartialEq, Eq)]
enum State {
    Clean,
    Corrupt,
    Cleared,
}

/// The tail checksum of orphan-file block `buf` at physical block `blk` of inode `ino`.
pub fn block_csum(fs: &Fs, ino: u32, generation: u32, blk: u64, buf: &[u8]) -> u32 {
    ffsck_format::verify::orphan_block_checksum(buf, fs.csum_seed, ino, generation, blk)
}

/// The content a clean orphan-file block at physical block `blk` must have.
pub(crate) fn clean_block(fs: &Fs, ino: u32, generation: u32, blk: u64) -> Vec<u8> {
    let bs = fs.block_size();
    let mut buf = vec![0u8; bs];
    buf[bs - TAIL_BYTES..bs - 4].copy_from_slice(&ORPHAN_BLOCK_MAGIC.to_le_bytes());
    if fs.has_metadata_csum() {
        let c = block_csum(fs, ino, generation, blk, &buf);
        buf[bs - 4..].copy_from_slice(&c.to_le_bytes());
    }
    buf
}

fn check_blocks(fs: &Fs, policy: Policy, out: &mut Findings) -> State {
    let ino = fs.sb.s_orphan_file_inum.get();
    let Some(raw) = fs.read_inode(ino) else {
        return State::Corrupt;
    };
    let inode = RawInode::parse(&raw);
    let bs = fs.geo.block_size as u64;
    if !inode.size().is_multiple_of(bs) {
        out.report(policy, P::P6_ORPHAN_FILE_WRONG_SIZE, ProblemCtx::ino(ino));
        return State::Corrupt;
    }
    let blocks = inode.size() / bs;
    let generation = inode.i_generation.get();
    let extents = inode.flags() & ffsck_format::inode::flags::EXTENTS != 0;
    let mut state = State::Clean;
    // The next block the file must map: an extent tree's holes are gaps between its
    // extents, not zero pointers.
    let mut next = 0u64;
    let hole = |out: &mut Findings, lblk: u64| {
        let ctx = ProblemCtx {
            ino,
            blk: lblk,
            ..Default::default()
        };
        out.report(policy, P::P6_ORPHAN_FILE_HOLE, ctx);
    };
    let mut visit = |v: Visit| -> bool {
        let Visit::Data { lblk, pblk } = v else {
            return true;
        };
        if lblk >= blocks {
            return false;
        }
        if pblk == 0 || lblk > next {
            hole(out, if pblk == 0 { lblk } else { next });
            state = State::Corrupt;
            return false;
        }
        next = next.max(lblk + 1);
        if state == State::Cleared {
            return true;
        }
        let want = clean_block(fs, ino, generation, pblk);
        if fs.read_block(pblk).is_some_and(|b| b == want) {
            return true;
        }
        let fixed = out.report(
            policy,
            P::P6_ORPHAN_BLOCK_DIRTY,
            ProblemCtx {
                ino,
                blk: lblk,
                ..Default::default()
            },
        );
        if fixed {
            state = State::Cleared;
            true
        } else {
            state = State::Corrupt;
            false
        }
    };
    filemap::walk(fs, &inode.block_bytes(), extents, true, &mut visit);
    if state != State::Corrupt && next < blocks {
        hole(out, next);
        return State::Corrupt;
    }
    state
}

/// Check the orphan file and the `orphan_present` flag.
pub fn check(fs: &Fs, policy: Policy, out: &mut Findings) {
    let sb = &fs.sb;
    let present = sb.ro_compat().has(RoCompat::ORPHAN_PRESENT);
    if !sb.compat().has(Compat::ORPHAN_FILE) {
        if present {
            out.report(policy, P::P6_ORPHAN_PRESENT_NO_FILE, ProblemCtx::default());
        }
        return;
    }
    if !sb.compat().has(Compat::HAS_JOURNAL)
        && out.report(
            policy,
            P::P6_ORPHAN_FILE_WITHOUT_JOURNAL,
            ProblemCtx::default(),
        )
    {
        return;
    }
    match check_blocks(fs, policy, out) {
        State::Cleared => {}
        State::Clean => {
            if present {
                out.report(
                    policy,
                    P::P6_ORPHAN_PRESENT_CLEAN_FILE,
                    ProblemCtx::default(),
                );
            }
        }
        State::Corrupt => {
            let ino = sb.s_orphan_file_inum.get();
            out.report(policy, P::P6_ORPHAN_FILE_CORRUPTED, ProblemCtx::ino(ino));
        }
    }
}
