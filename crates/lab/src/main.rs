//! `ffsck-lab` command line: parses the subcommand and hands it to the matching library module;
//! all the work lives in the library so tests can drive it too.

use std::process::ExitCode;

use anyhow::Result;
use clap::{Parser, Subcommand};

use ffsck_lab::{
    age, bench, conformance, corrupt, fuzz, gilbert, hdd, mkfs, repair_conformance, sweep, versus,
};

#[derive(Parser)]
#[command(
    name = "ffsck-lab",
    version,
    about = "Experiments for ffsck: conformance against e2fsck and benchmarks"
)]
struct Cli {
    #[command(subcommand)]
    command: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// Run ffsck and e2fsck -fn on every corpus image and compare verdicts and problem codes.
    Conformance(conformance::ConformanceArgs),
    /// Repair every corpus image with ffsck -fy and with e2fsck -fy (twice), judge each result
    /// with e2fsck -fn, and compare the files each repair keeps.
    RepairConformance(conformance::ConformanceArgs),
    /// Time ffsck -fn against e2fsck -fn on a generated (or given) image.
    Bench(bench::BenchArgs),
    /// One bench per inode count (--sizes), then cost-against-size figures.
    Sweep(sweep::SweepArgs),
    /// Runtime and memory growth of the checkers per corruption type, over a grid of image
    /// shapes (the gilbert experiment; xfs_repair with --fs-type xfs).
    Gilbert(gilbert::GilbertArgs),
    /// The gilbert experiment on ext4 and on XFS, compared per metadata class in one report.
    Versus(gilbert::GilbertArgs),
    /// Build a reproducible image (and IMG.recipe.json) from a seeded tree with mke2fs -d
    /// (mkfs.xfs -p with --fs-type xfs; copied in through a loop mount with --populate kernel).
    Mkfs(mkfs::MkfsArgs),
    /// Damage an image reproducibly (by field, component or meaning; xfs_db blocktrash on XFS)
    /// and log every byte.
    Corrupt(corrupt::CorruptArgs),
    /// Differential fuzzing against e2fsck: seeded image profiles and damage plans, both
    /// checkers on every case, failing cases minimized into regression recipes.
    Fuzz(fuzz::FuzzArgs),
    /// Age an image through a loop mount (root) and report its fragmentation.
    Age(age::AgeArgs),
    /// Trace checkers' block requests (root) and model them on a 7200 rpm hard disk.
    Hdd(hdd::HddArgs),
}

fn main() -> ExitCode {
    // The measuring shim must stay tiny: handle it before clap or anything else allocates.
    let mut argv = std::env::args_os().skip(1);
    if argv.next().is_some_and(|a| a == ffsck_lab::child::SHIM_ARG) {
        let rest: Vec<_> = argv.collect();
        let code = ffsck_lab::child::shim_main(&rest);
        return ExitCode::from(u8::try_from(code).unwrap_or(125));
    }
    let result: Result<()> = match Cli::parse().command {
        Cmd::Conformance(args) => conformance::main(&args),
        Cmd::RepairConformance(args) => repair_conformance::main(&args),
        Cmd::Bench(args) => bench::main(&args),
        Cmd::Sweep(args) => sweep::main(&args),
        Cmd::Gilbert(args) => gilbert::main(&args),
        Cmd::Versus(args) => versus::main(&args),
        Cmd::Mkfs(args) => mkfs::main(&args),
        Cmd::Corrupt(args) => corrupt::main(&args),
        Cmd::Fuzz(args) => fuzz::main(&args),
        Cmd::Age(args) => age::main(&args),
        Cmd::Hdd(args) => hdd::main(&args),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            // `{:#}` prints the whole context chain on one line, without the backtrace that
            // returning the error from main would add whenever RUST_BACKTRACE is set.
            eprintln!("ffsck-lab: error: {e:#}");
            ExitCode::FAILURE
        }
    }
}
