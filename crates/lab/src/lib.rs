//! Library side of `ffsck-lab`: the experiment harnesses (conformance against e2fsck, benchmarks)
//! live here rather than in `main.rs` so integration tests can drive them and assert on their
//! summaries directly instead of scraping printed Markdown.

pub mod age;
pub mod bench;
pub mod cache;
pub(crate) mod ceiling;
pub(crate) mod change;
pub mod child;
pub mod conformance;
pub mod corrupt;
pub mod fuzz;
pub mod gilbert;
pub mod hdd;
pub mod imagegen;
pub mod loopmount;
pub(crate) mod markdown;
pub mod messages;
pub mod metrics;
pub mod mkfs;
pub(crate) mod perf;
pub mod plots;
pub mod problem_log;
pub(crate) mod readonce;
pub mod repair_conformance;
pub mod sweep;
pub mod tools;
pub mod versus;
pub mod xfs;

use anyhow::Result;

/// Parses `argv` (without the program name) into one of the harnesses' clap argument structs.
///
/// Tests use this so they get exactly the defaults a user gets on the command line, instead of
/// repeating every default in a hand-written constructor that would drift.
pub fn parse_args<A: clap::Args>(argv: &[&str]) -> Result<A> {
    use clap::Parser;

    #[derive(Parser)]
    #[command(name = "ffsck-lab")]
    struct Wrapper<A: clap::Args> {
        #[command(flatten)]
        inner: A,
    }

    let wrapper =
        Wrapper::<A>::try_parse_from(std::iter::once("ffsck-lab").chain(argv.iter().copied()))?;
    Ok(wrapper.inner)
}
