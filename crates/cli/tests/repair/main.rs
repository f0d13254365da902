//! The ffsck integration tests of repair: one-run repairs by problem family, the commit path, journals rebuilt, marks.
//!
//! One test binary per group (cargo builds and links each once); each module is one family.

#[path = "../common/mod.rs"]
mod common;

mod journal_errno;
mod journal_reset;
mod mark_checked;
mod repair;
mod repair_asked_once;
mod repair_badblocks;
mod repair_bblist;
mod repair_bigalloc_clone;
mod repair_blocks;
mod repair_commit;
mod repair_converge;
mod repair_dirs;
mod repair_extent_opt;
mod repair_hints;
mod repair_journal;
mod repair_lone_super;
mod repair_lpf;
mod repair_pass3a;
mod repair_quota;
mod repair_relocate;
mod repair_root;
mod repair_sb_rebuild;
mod repair_self_link;
mod repair_short_device;
mod repair_superblock;
mod repair_uninit;
mod repair_xattr;
