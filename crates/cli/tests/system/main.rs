//! The ffsck integration tests of the system around a check: mounted and read-only devices, signals, interactive prompts, the package.
//!
//! One test binary per group (cargo builds and links each once); each module is one family.

#[path = "../common/mod.rs"]
mod common;

mod answers;
mod interactive;
mod interrupt;
mod package;
mod readonly;
mod real_machine;
