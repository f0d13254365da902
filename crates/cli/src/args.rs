//! The command line of `ffsck` (clap), and the hidden `--generate` that renders its man page and
//! shell completions from the same definition, as `rg --generate` does.

use clap::{CommandFactory, Parser, ValueEnum};
pub use ffsck_io::device_kind::IoPlan;
use std::io::Write;
use std::path::PathBuf;

/// The e2fsprogs release whose behaviour (verdicts, problem codes, exit codes, messages) ffsck
/// follows; `-V` names it.
macro_rules! follows {
    () => {
        "1.47.0"
    };
}
pub const FOLLOWS_E2FSCK: &str = follows!();

/// What `ffsck --version` prints after the program name: "0.1.0 (follows e2fsck 1.47.0)".
pub const VERSION: &str = concat!(
    env!("CARGO_PKG_VERSION"),
    " (follows e2fsck ",
    follows!(),
    ")"
);

/// The date of this version, which the version line at the start of a check names (as e2fsck
/// names its release's); it changes with the version.
pub const RELEASE_DATE: &str = "1-Dec-2026";

/// The line a check starts with on stderr, as e2fsck's "e2fsck 1.47.0 (5-Feb-2023)".
pub fn banner() -> String {
    format!("ffsck {} ({RELEASE_DATE})", env!("CARGO_PKG_VERSION"))
}

/// What `--generate` writes to standard output.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Generate {
    /// The man page, ffsck.8 (roff).
    Man,
    /// Completions for bash.
    CompleteBash,
    /// Completions for zsh.
    CompleteZsh,
    /// Completions for fish.
    CompleteFish,
}

/// What `ffsck --help` and the man page's DESCRIPTION say ffsck is.
const LONG_ABOUT: &str = "\
Fast, parallel ext2/ext3/ext4 file system checker (e2fsck-compatible flags and exit codes).

ffsck checks an ext2, ext3 or ext4 file system on DEVICE (a block device or an image file) \
as e2fsck does, with the same flags, verdicts, problem codes and exit codes, using all cores. \
A journal that needs recovery is replayed first (in memory under -n). Under -n nothing is \
written. Under -y or -p every change is staged in memory, checked again, and committed as one \
transaction in the file system's own journal, so a crash leaves the original or the repaired \
file system. Without -n, -p or -y each fix is asked on the terminal.";

/// The usage line: e2fsck's, with ffsck's own modes.
const USAGE: &str = "\
ffsck [-panyrcdfktvDFV] [-b SUPERBLOCK] [-B BLOCKSIZE] [-l|-L BAD_BLOCKS_FILE]
             [-C FD] [-j JOURNAL] [-E EXTENDED_OPTIONS] [-z UNDO_FILE] [OPTIONS] DEVICE
       ffsck --estimate [--threads N] [--nice] DEVICE
       ffsck --apply-undo UNDO_FILE DEVICE";

/// The width help is wrapped to (narrower on a narrower terminal).
const HELP_WIDTH: usize = 100;

/// Fast, parallel ext2/ext3/ext4 file system checker (e2fsck-compatible flags and exit codes).
#[derive(Parser, Debug)]
#[command(
    name = "ffsck",
    version = VERSION,
    about = "Fast, parallel ext2/ext3/ext4 file system checker (e2fsck-compatible flags and exit codes)",
    long_about = LONG_ABOUT,
    override_usage = USAGE,
    max_term_width = HELP_WIDTH
)]
pub struct Args {
    /// Open read-only and answer "no" to every question.
    #[arg(short = 'n')]
    pub no: bool,
    /// Answer "yes" to every question.
    #[arg(short = 'y')]
    pub yes: bool,
    /// Preen: fix only what is safe without a human.
    #[arg(short = 'p', short_alias = 'a')]
    pub preen: bool,
    /// Optimize directories: pass 3A rebuilds every directory as e2fsck does, indexing those
    /// of two blocks or more on a dir_index file system (with -y or -p). Without it a repair
    /// still indexes unindexed directories of three blocks or more, as e2fsck does.
    #[arg(short = 'D')]
    pub optimize: bool,
    /// Check even if the file system seems clean.
    #[arg(short = 'f')]
    pub force: bool,
    /// Verbose summary.
    #[arg(short = 'v')]
    pub verbose: bool,
    /// Print timing statistics.
    #[arg(short = 't', action = clap::ArgAction::Count)]
    pub timing: u8,
    /// Use the superblock at this block number instead of the primary.
    #[arg(short = 'b')]
    pub superblock: Option<u64>,
    /// Block size to use with -b.
    #[arg(short = 'B')]
    pub blocksize: Option<u32>,
    /// The external journal device of the file system (as e2fsck's -j); read-only under -n.
    #[arg(short = 'j', value_name = "EXTERNAL_JOURNAL")]
    pub journal: Option<PathBuf>,
    /// Write progress lines ("pass current max device") to this file descriptor; 0 draws a bar;
    /// -N writes nothing until SIGUSR1, then lines to descriptor N (SIGUSR2 stops them).
    #[arg(short = 'C', allow_negative_numbers = true)]
    pub progress_fd: Option<i32>,
    /// e2fsck's -c: find bad blocks with badblocks(8) and add them to the bad-block inode
    /// (-cc: its non-destructive read-write test); implies -f.
    #[arg(short = 'c', action = clap::ArgAction::Count)]
    pub badblocks_scan: u8,
    /// With -c: keep the blocks already on the bad-block list (no effect without -c).
    #[arg(short = 'k')]
    pub keep_badblocks: bool,
    /// Add the blocks listed in FILE (one number a line) to the bad-block list (e2fsck's -l);
    /// implies -f.
    #[arg(short = 'l', value_name = "BAD_BLOCKS_FILE")]
    pub add_badblocks: Option<PathBuf>,
    /// Replace the bad-block list with the blocks listed in FILE (e2fsck's -L); implies -f.
    #[arg(short = 'L', value_name = "BAD_BLOCKS_FILE")]
    pub set_badblocks: Option<PathBuf>,
    /// Debugging output (e2fsck's -d): accepted; ffsck prints nothing more with it.
    #[arg(short = 'd', action = clap::ArgAction::Count)]
    pub debug: u8,
    /// Flush the device's buffer cache before the check (BLKFLSBUF; for an image file, its
    /// dirty pages are synced and its cached pages dropped).
    #[arg(short = 'F')]
    pub flush: bool,
    /// Interactive repair (e2fsck's -r, its default anyway): no effect.
    #[arg(short = 'r')]
    pub interactive_flag: bool,
    /// Extended options, comma separated (e2fsck's -E; may be repeated): ea_ver=1|2,
    /// journal_only, fragcheck, readahead_kb=N, discard, nodiscard, optimize_extents,
    /// no_optimize_extents, inode_count_fullmap, no_inode_count_fullmap, bmap2extent,
    /// fixes_only, unshare_blocks, check_encoding, problem_log=FILE. See EXTENDED OPTIONS in
    /// ffsck(8).
    #[arg(short = 'E', value_name = "OPTIONS")]
    pub extended: Vec<String>,
    /// The device name to print (e2fsck's undocumented -N, which its test suite uses): in
    /// place of the path and of the file system's label.
    #[arg(short = 'N', value_name = "NAME", hide = true)]
    pub device_name: Option<String>,
    /// Worker threads (default: one per core).
    #[arg(long = "threads", short = 'm')]
    pub threads: Option<usize>,
    /// Write a JSON report of the run to this file ("-": standard output, the usual output
    /// then going to standard error): tool, device, options, findings, summary, exit code,
    /// in every outcome (see JSON REPORT in ffsck(8)).
    #[arg(long, value_name = "FILE")]
    pub json: Option<PathBuf>,
    /// Write an e2fsck-format problem log (XML) to this file.
    #[arg(long = "problem-log")]
    pub problem_log: Option<PathBuf>,
    /// Redo log for a repair the file system's journal cannot carry (no journal, the repair
    /// changes the journal, or it is too large): the generation is committed there first, then
    /// written in place. Without it such a repair is written in place, as e2fsck does. An
    /// unfinished log found there is replayed before anything else, if it was made for this
    /// file system in this state.
    #[arg(long = "repair-log")]
    pub repair_log: Option<PathBuf>,
    /// Save every block a repair overwrites to this file first, in e2undo(8)'s format:
    /// `e2undo FILE DEVICE` (or `ffsck --apply-undo FILE DEVICE`) restores the device.
    #[arg(long = "undo-file", short = 'z', value_name = "UNDO_FILE")]
    pub undo_file: Option<PathBuf>,
    /// Put back the blocks saved in an undo file, restoring DEVICE as it was before the repair.
    #[arg(long = "apply-undo", value_name = "UNDO_FILE")]
    pub apply_undo: Option<PathBuf>,
    /// Predict the run time of `-fn` from the superblock, descriptors and a small sample, then exit.
    #[arg(long)]
    pub estimate: bool,
    /// Use only idle cores (by the load average) and run under SCHED_IDLE.
    #[arg(long)]
    pub nice: bool,
    /// Check directory blocks while pass 1 still scans later groups (pipelined passes 1-2).
    /// The findings are the same either way; off by default, as it measured no faster on
    /// 2 cores and holds the early pass-2 outputs (up to 32 MiB) until pass 1 ends.
    #[arg(long)]
    pub pipeline: bool,
    /// Bound the memory of the tables that grow with the file system (e.g. 64M, 1G): past
    /// it the directory-block list and the directories' parent links and generations spill
    /// to scratch files. Slower, same findings. The bitmaps, and 4-8 bytes per directory
    /// while pass 1 scans, stay in memory; a note on stderr says when the peak went above
    /// the limit.
    #[arg(long = "max-memory", value_name = "SIZE", value_parser = parse_size)]
    pub max_memory: Option<u64>,
    /// Directory for --max-memory's scratch files (default: $TMPDIR).
    #[arg(long = "scratch-dir", value_name = "DIR")]
    pub scratch_dir: Option<PathBuf>,
    /// How metadata is read: `sequential` (one ordered read stream, whatever the number of
    /// threads: a hard disk), `parallel` (every worker reads its own: SSD, NVMe, page cache)
    /// or `auto` (sequential when the kernel reports the device, or the disk under an image
    /// file, as rotational, the inode tables are not in the page cache already and a few
    /// scattered reads take as long as a disk's seeks). The findings are the same either way.
    #[arg(long = "io", value_name = "PLAN", value_enum, default_value_t = IoPlan::Auto)]
    pub io: IoPlan,
    /// Write the man page or a shell's completions to standard output, then exit.
    #[arg(long, value_name = "WHAT", hide = true)]
    pub generate: Option<Generate>,
    /// The device or image to check.
    #[arg(required_unless_present = "generate")]
    pub device: Option<PathBuf>,
}

impl Args {
    /// The options of the run as the JSON report shows them.
    pub fn report_options(&self) -> serde_json::Value {
        let modes = [(self.no, "n"), (self.yes, "y"), (self.preen, "p")];
        let given: Vec<&str> = modes.iter().filter(|m| m.0).map(|m| m.1).collect();
        let mode = match given.as_slice() {
            [] if self.estimate => Some("estimate"),
            [] if self.apply_undo.is_some() => Some("undo"),
            [] => Some("interactive"),
            [one] => Some(*one),
            _ => None,
        };
        let path = |p: &Option<PathBuf>| p.as_ref().map(|p| p.display().to_string());
        serde_json::json!({
            "mode": mode,
            "force": self.force,
            "verbose": self.verbose,
            "timing": self.timing,
            "optimize_dirs": self.optimize,
            "threads": self.threads,
            "superblock": self.superblock,
            "blocksize": self.blocksize,
            "external_journal": path(&self.journal),
            "progress_fd": self.progress_fd,
            "problem_log": path(&self.problem_log),
            "repair_log": path(&self.repair_log),
            "undo_file": path(&self.undo_file),
            "apply_undo": path(&self.apply_undo),
            "nice": self.nice,
            "pipeline": self.pipeline,
            "max_memory": self.max_memory,
            "scratch_dir": path(&self.scratch_dir),
            "io": self.io.as_str(),
        })
    }
}

/// The value of `--json` in a command line clap refused, so the usage error is reported
/// there too: `--json FILE` or `--json=FILE`, before any `--`.
pub fn json_path(argv: impl Iterator<Item = std::ffi::OsString>) -> Option<PathBuf> {
    let mut it = argv.skip(1);
    while let Some(a) = it.next() {
        if a == "--" {
            return None;
        }
        if a == "--json" {
            return it.next().map(PathBuf::from);
        }
        if let Some(v) = a.to_str().and_then(|s| s.strip_prefix("--json=")) {
            return Some(PathBuf::from(v));
        }
    }
    None
}

/// The message of a command line clap refused. An unknown option is told as getopt tells it
/// to e2fsck ("invalid option -- 'Q'"), with the usage and no advice on passing it as a
/// value; other refusals are clap's.
pub fn usage_error(e: &clap::Error) -> String {
    use clap::error::{ContextKind, ContextValue, ErrorKind};
    let arg = match (e.kind(), e.get(ContextKind::InvalidArg)) {
        (ErrorKind::UnknownArgument, Some(ContextValue::String(arg))) if arg.starts_with('-') => {
            arg
        }
        _ => return e.render().to_string(),
    };
    let mut msg = match arg.strip_prefix("--") {
        Some(_) => format!("ffsck: unrecognized option '{arg}'\n"),
        None => format!(
            "ffsck: invalid option -- '{}'\n",
            arg.trim_start_matches('-')
        ),
    };
    let similar = match e.get(ContextKind::SuggestedArg) {
        Some(ContextValue::String(name)) => Some(name),
        Some(ContextValue::Strings(names)) => names.first(),
        _ => None,
    };
    if let Some(name) = similar {
        msg += &format!("(did you mean '{name}'?)\n");
    }
    msg + &format!("Usage: {USAGE}\n\nTry 'ffsck --help' for more information.\n")
}

/// A size with an optional K, M, G or T suffix (powers of 1024).
pub fn parse_size(s: &str) -> Result<u64, String> {
    let t = s.trim();
    let (num, shift) = match t.chars().last().map(|c| c.to_ascii_uppercase()) {
        Some('K') => (&t[..t.len() - 1], 10),
        Some('M') => (&t[..t.len() - 1], 20),
        Some('G') => (&t[..t.len() - 1], 30),
        Some('T') => (&t[..t.len() - 1], 40),
        _ => (t, 0),
    };
    let n: u64 = num
        .parse()
        .map_err(|_| format!("not a size: {s} (e.g. 64M)"))?;
    n.checked_mul(1u64 << shift)
        .ok_or_else(|| format!("size too large: {s}"))
}

/// The man page's sections that the flags do not give: exit status, files, environment,
/// e2fsck compatibility, boot use, see also (roff, appended after OPTIONS).
const MAN_EXTRA: &str = include_str!("../doc/ffsck.8.in");

/// Writes what `--generate` asks for to `out`.
pub fn generate(what: Generate, out: &mut dyn Write) -> std::io::Result<()> {
    let cmd = Args::command();
    let shell = match what {
        Generate::Man => return man_page(cmd, out),
        Generate::CompleteBash => clap_complete::Shell::Bash,
        Generate::CompleteZsh => clap_complete::Shell::Zsh,
        Generate::CompleteFish => clap_complete::Shell::Fish,
    };
    // Completions offer what the user may type: the same command without --generate.
    let mut visible = clap::Command::new("ffsck")
        .about(cmd.get_about().cloned().unwrap_or_default())
        .version(VERSION);
    for arg in cmd.get_arguments().filter(|a| a.get_id() != "generate") {
        let arg = if arg.get_id() == "device" {
            arg.clone()
                .required_unless_present(clap::builder::Resettable::<clap::Id>::Reset)
                .required(true)
        } else {
            arg.clone()
        };
        visible = visible.arg(arg);
    }
    clap_complete::generate(shell, &mut visible, "ffsck", out);
    Ok(())
}

/// ffsck.8: clap_mangen's title, name, synopsis, description and options, then the written
/// sections.
fn man_page(cmd: clap::Command, out: &mut dyn Write) -> std::io::Result<()> {
    let man = clap_mangen::Man::new(cmd)
        .section("8")
        .source(format!("ffsck {}", env!("CARGO_PKG_VERSION")))
        .manual("System Administration");
    man.render_title(out)?;
    man.render_name_section(out)?;
    man.render_synopsis_section(out)?;
    man.render_description_section(out)?;
    man.render_options_section(out)?;
    out.write_all(MAN_EXTRA.replace("@FOLLOWS@", FOLLOWS_E2FSCK).as_bytes())
}

#[cfg(test)]
mod json_path_tests {
    use super::json_path;
    use std::path::PathBuf;

    fn of(args: &[&str]) -> Option<PathBuf> {
        json_path(args.iter().map(std::ffi::OsString::from))
    }

    #[test]
    fn finds_the_json_value_in_a_refused_command_line() {
        assert_eq!(
            of(&["ffsck", "-x", "--json", "r.json", "d"]),
            Some("r.json".into())
        );
        assert_eq!(of(&["ffsck", "--json=-", "d"]), Some("-".into()));
        assert_eq!(of(&["ffsck", "--json"]), None);
        assert_eq!(of(&["ffsck", "--", "--json", "r.json"]), None);
        assert_eq!(of(&["ffsck", "-fn", "d"]), None);
    }
}
