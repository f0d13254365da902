//! Quota files, checked after pass 5 as e2fsck does: with the `quota` feature, every quota
//! inode the superblock names must open as a quota file (a valid inode number and the v2
//! quota header of its type); otherwise the quota information needs rewriting.
//!
//! Not yet done: recomputing per-id usage (blocks and inodes per uid, gid and project) and
//! comparing it with the quota tree, which e2fsck also reports as `P6_UPDATE_QUOTAS`.

use crate::filemap::{self, Visit};
use crate::fs::Fs;
use crate::problem::Problem as P;
use crate::report::{Findings, Policy, ProblemCtx};
use ffsck_format::inode::RawInode;
use ffsck_format::RoCompat;

/// `dqh_magic` of the v2 quota file header, per quota type (user, group, project).
const QUOTA_MAGIC: [u32; 3] = [0xD9C0_1F11, 0xD9C0_1927, 0xD9C0_3F14];
/// Quota format version e2fsprogs writes and reads (the v2 "vfsv1" tree).
const QUOTA_VERSION: u32 = 1;

/// Why a quota file cannot be opened, or `None` when its header is sound.
fn open_problem(fs: &Fs, qtype: usize, ino: u32) -> Option<String> {
    if ino == 0 || ino > fs.geo.inodes_count {
        return Some(format!("illegal inode number {ino}"));
    }
    let raw = fs.read_inode(ino)?;
    let inode = RawInode::parse(&raw);
    if inode.links_count() == 0 {
        return Some(format!("inode {ino} is not in use"));
    }
    let extents = inode.flags() & ffsck_format::inode::flags::EXTENTS != 0;
    let mut first = None;
    let mut visit = |v: Visit| -> bool {
        match v {
            Visit::Data { lblk: 0, pblk } => {
                first = Some(pblk);
                false
            }
            Visit::Data { .. } => false,
            Visit::Meta { .. } => true,
        }
    };
    filemap::walk(fs, &inode.block_bytes(), extents, false, &mut visit);
    let header = first
        .filter(|&b| fs.geo.is_valid_block(b))
        .and_then(|b| fs.read_block(b));
    let Some(h) = header else {
        return Some(format!("quota file inode {ino} has no readable header"));
    };
    let magic = u32::from_le_bytes([h[0], h[1], h[2], h[3]]);
    let version = u32::from_le_bytes([h[4], h[5], h[6], h[7]]);
    if magic != QUOTA_MAGIC[qtype] || version != QUOTA_VERSION {
        return Some(format!("quota file inode {ino} has a bad header"));
    }
    None
}

/// Check the quota files the superblock names.
pub fn check(fs: &Fs, policy: Policy, out: &mut Findings) {
    let sb = &fs.sb;
    if !sb.ro_compat().has(RoCompat::QUOTA) {
        return;
    }
    let inums = [
        sb.s_usr_quota_inum.get(),
        sb.s_grp_quota_inum.get(),
        sb.s_prj_quota_inum.get(),
    ];
    for (qtype, &ino) in inums.iter().enumerate() {
        if ino == 0 {
            continue;
        }
        if let Some(why) = open_problem(fs, qtype, ino) {
            out.report(
                policy,
                P::P6_UPDATE_QUOTAS,
                ProblemCtx {
                    ino,
                    num: qtype as u64,
                    str: Some(why),
                    ..Default::default()
                },
            );
        }
    }
}
