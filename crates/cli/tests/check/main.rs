//! The ffsck integration tests of checking: verdicts, messages, exit codes, JSON, hostile input, threads and memory limits, journals read.
//!
//! One test binary per group (cargo builds and links each once); each module is one family.

#[path = "../common/mod.rs"]
mod common;

mod clean_profiles;
mod cli;
mod e2fsck_interface;
mod e2fsck_messages;
mod external_journal;
mod hostile;
mod journal_orphan_quota;
mod json;
mod max_memory;
mod mmp;
mod mounted_journal;
mod perf_modes;
mod problem_families;
mod progress_lines;
mod recovery_fast_commit;
mod superblock_strict;
mod thread_determinism;
