//! Rendering of an outcome: e2fsck-style terminal text (and preen lines), the final summary,
//! and e2fsck's XML problem log (the JSON report is `report.rs`).

use anyhow::{Context, Result};
use ffsck_check::problem::{Latch, Problem, Prompt};
use ffsck_check::{exit, Finding, Mode, Outcome, Policy, Reporter};
use std::io::Write;
use std::path::Path;

const PASS_NAMES: [&str; 6] = [
    "",
    "Pass 1: Checking inodes, blocks, and sizes",
    "Pass 2: Checking directory structure",
    "Pass 3: Checking directory connectivity",
    "Pass 4: Checking reference counts",
    "Pass 5: Checking group summary information",
];

pub struct Terminal {
    policy: Policy,
    dev: String,
    /// Flushed at each line, so an interrupted run shows what it had found; in a repair,
    /// held by pass until it ends (`held.rs`).
    out: crate::held::Sink,
    /// The last pass whose header was printed.
    last_pass: u8,
    /// `-tt`: the pass under way and when it started, to print each pass's time.
    pass_timer: Option<(u8, Usage)>,
    /// The device whose reads `-t` counts.
    io: Option<std::sync::Arc<dyn ffsck_io::Device>>,
    /// A bitmap-differences line is being written: the next finding ends it first.
    line_open: bool,
    /// Questions go to the person at the terminal (no -n, -p or -y).
    interactive: bool,
    /// They answered `a`: yes to everything from then on.
    yes_to_all: bool,
    /// Questions answered yes in a row (-1 once one is answered no, or after the hint has
    /// been shown long enough), as e2fsck counts them for its "yes to all" hint.
    yes_run: i32,
    /// The file system is the mounted root: a change to it needs a reboot.
    root: bool,
    /// e2fsck.conf's message limits: `[options] max_count_problems`, `[problems] max_count`
    /// per e2fsck code, and how many of each code were shown.
    max_count_default: u32,
    max_count: std::collections::HashMap<u32, u32>,
    shown: std::collections::HashMap<u32, u32>,
    /// `[problems] no_default`: the interactive default answer is no.
    no_default: std::collections::HashSet<u32>,
    /// Preen stopped at a problem it may not fix: nothing more is shown, exit 4.
    halted: bool,
    /// What the device holds instead of ext2/3/4 ("DEV contains a xfs file system").
    foreign: Option<String>,
    /// The pass 1B and 1C-1D headers already printed (by the finding that opens each).
    headers_shown: std::collections::HashSet<Problem>,
    /// The latch questions shown: the inode each was asked about.
    latches: std::collections::HashMap<Problem, u32>,
}

/// What preen prints after a message it fixed, by the question's kind (e2fsck's short
/// descriptions of its answers).
pub fn preen_word(p: Prompt) -> &'static str {
    match p {
        Prompt::None => "(NONE)",
        Prompt::Null => "",
        Prompt::Fix => "FIXED",
        Prompt::Clear => "CLEARED",
        Prompt::Relocate => "RELOCATED",
        Prompt::Allocate => "ALLOCATED",
        Prompt::Expand => "EXPANDED",
        Prompt::Connect => "RECONNECTED",
        Prompt::Create => "CREATED",
        Prompt::Salvage => "SALVAGED",
        Prompt::Truncate => "TRUNCATED",
        Prompt::ClearInode => "INODE CLEARED",
        Prompt::Abort => "ABORTED",
        Prompt::Split => "SPLIT",
        Prompt::Continue => "CONTINUING",
        Prompt::CloneDup => "MULTIPLY-CLAIMED BLOCKS CLONED",
        Prompt::Delete => "FILE DELETED",
        Prompt::Suppress => "SUPPRESSED",
        Prompt::Unlink => "UNLINKED",
        Prompt::ClearHtree => "HTREE INDEX CLEARED",
        Prompt::Recreate => "WILL RECREATE",
        Prompt::Optimize => "WILL OPTIMIZE",
        Prompt::ClearFlag => "FLAG CLEARED",
    }
}

/// `n` and the word, singular or plural as English (ngettext) chooses them.
fn count(n: u64, one: &str, many: &str) -> String {
    format!("{n:>12} {}", if n == 1 { one } else { many })
}

/// Per mille of `part` in `whole`, rounded, as e2fsck shows it ("12.3").
fn permille(part: u64, whole: u64) -> String {
    let p = (10000 * part / whole.max(1) + 5) / 10;
    format!("{}.{}", p / 10, p % 10)
}

/// e2fsck's `-v` statistics block.
fn verbose_stats(s: &ffsck_check::Summary) -> String {
    let c = &s.counts;
    let frag_files = c.fragmented.saturating_sub(c.fragmented_dirs);
    // Names beyond the one each inode needs: e2fsck's "links" (the files' entries less the
    // inodes they name, the directories' own "." and ".." aside).
    // e2fsck's "files" are directory entries, the directories' "." and ".." aside (the
    // root's ".." names the root itself): hard links count once per name.
    let files = s.entries.saturating_sub((2 * c.dirs).saturating_sub(1));
    let named = c.regular + c.dirs + c.chardev + c.blockdev + c.fifo + c.symlinks + c.socket;
    let links = files.saturating_sub(named);
    let pct = |a: u64, b: u64| a as f64 * 100.0 / b.max(1) as f64;
    let mut out = String::new();
    let mut line = |l: String| {
        out.push_str(&l);
        out.push('\n');
    };
    line(format!(
        "\n{} ({:.2}%, out of {})",
        count(s.inodes_used, "inode used", "inodes used"),
        pct(s.inodes_used, s.inodes_count),
        s.inodes_count
    ));
    line(format!(
        "{} ({}%)",
        count(frag_files, "non-contiguous file", "non-contiguous files"),
        permille(frag_files, s.inodes_used)
    ));
    line(format!(
        "{} ({}%)",
        count(
            c.fragmented_dirs,
            "non-contiguous directory",
            "non-contiguous directories"
        ),
        permille(c.fragmented_dirs, s.inodes_used)
    ));
    let [ind, dind, tind] = c.ind_dind_tind;
    line(format!(
        "             # of inodes with ind/dind/tind blocks: {ind}/{dind}/{tind}"
    ));
    // e2fsck counts depths 0-4; deeper trees are rejected before they are counted.
    let hist = &c.extent_depth_hist[..5];
    if let Some(last) = hist.iter().rposition(|&n| n != 0) {
        let h: Vec<String> = hist[..=last].iter().map(u64::to_string).collect();
        line(format!(
            "             Extent depth histogram: {}",
            h.join("/")
        ));
    }
    line(format!(
        "{} ({:.2}%, out of {})",
        count(s.blocks_used, "block used", "blocks used"),
        pct(s.blocks_used, s.blocks_count),
        s.blocks_count
    ));
    line(count(c.bad_blocks, "bad block", "bad blocks"));
    line(count(c.large_files, "large file", "large files"));
    line(format!(
        "\n{}",
        count(c.regular, "regular file", "regular files")
    ));
    line(count(c.dirs, "directory", "directories"));
    line(count(
        c.chardev,
        "character device file",
        "character device files",
    ));
    line(count(c.blockdev, "block device file", "block device files"));
    line(count(c.fifo, "fifo", "fifos"));
    line(count(links, "link", "links"));
    line(format!(
        "{} ({} {})",
        count(c.symlinks, "symbolic link", "symbolic links"),
        c.fast_symlinks,
        if c.fast_symlinks == 1 {
            "fast symbolic link"
        } else {
            "fast symbolic links"
        }
    ));
    line(count(c.socket, "socket", "sockets"));
    line("------------".into());
    line(count(files, "file", "files"));
    out
}

/// How the check's fatal message starts when no superblock could be used.
const SB_INVALID: &str =
    "The superblock could not be read or does not describe a valid ext2/ext3/ext4 file system ";

/// e2fsck's advice when no superblock can be used (its words, with ffsck's name).
const SB_ADVICE: &str = "
The superblock could not be read or does not describe a valid ext2/ext3/ext4
filesystem.  If the device is valid and it really contains an ext2/ext3/ext4
filesystem (and not swap or ufs or something else), then the superblock
is corrupt, and you might try running ffsck with an alternate superblock:
    ffsck -b 8193 <device>
 or
    ffsck -b 32768 <device>
";

/// The volume label in the primary superblock ("" when it has none or is not ext2/3/4).
pub fn fs_label(dev: &dyn ffsck_io::Device) -> String {
    use ffsck_format::SUPERBLOCK_OFFSET;
    let mut magic = [0u8; 2];
    let mut label = [0u8; 16];
    if dev.read_at(&mut magic, SUPERBLOCK_OFFSET + 0x38).is_err()
        || u16::from_le_bytes(magic) != ffsck_format::EXT2_MAGIC
        || dev.read_at(&mut label, SUPERBLOCK_OFFSET + 0x78).is_err()
    {
        return String::new();
    }
    let end = label.iter().position(|&b| b == 0).unwrap_or(label.len());
    String::from_utf8_lossy(&label[..end]).into_owned()
}

/// The stop of a preen run at a problem it may not fix (e2fsck's words, on stderr).
pub fn preen_halt_text(dev: &str) -> String {
    format!(
        "\n\n{dev}: UNEXPECTED INCONSISTENCY; RUN fsck MANUALLY.\n\t(i.e., without -a or -p options)"
    )
}

/// The latch question that answers for `p` (the catalogue's `latch` column), and whether it is
/// asked per inode. Once that question has been answered, a member with a question of its own
/// prints with the short word of the group's answer ("CLEARED.") instead of asking.
fn latch_of(p: Problem) -> Option<(Problem, bool)> {
    let l = p.latch()?;
    (l.collates() && p.info().prompt != Prompt::None).then(|| (l.question(), l.per_inode()))
}

/// A question that answers for the members of its latch group.
fn is_latch_question(p: Problem) -> bool {
    Latch::ALL.iter().any(|l| l.collates() && l.question() == p)
}

/// Whether a run that changed the file system changed it as e2fsck counts a change (its
/// "FILE SYSTEM WAS MODIFIED"): not when its only fixes are ones e2fsck makes without marking
/// the file system changed (`flag::QUIET`: a group descriptor's fields, a new UUID).
fn marks_changed(findings: &[Finding], policy: Policy) -> bool {
    let mut fixed = findings.iter().filter(|f| f.fixed).peekable();
    fixed.peek().is_none()
        || fixed.any(|f| policy.flags(f.problem) & ffsck_check::problem::flag::QUIET == 0)
}

/// Whether the run fixed a problem, as e2fsck counts fixes for its exit code: anything made
/// but what the catalogue marks `not_a_fix` (a new UUID, the superblock's hints). A change
/// no fix explains (a journal replayed into the repair) counts, as it always did.
fn fixes_problem(findings: &[Finding], policy: Policy) -> bool {
    let mut fixed = findings.iter().filter(|f| f.fixed).peekable();
    fixed.peek().is_none()
        || fixed.any(|f| policy.flags(f.problem) & ffsck_check::problem::flag::NOT_A_FIX == 0)
}

/// The rank of pass 3A's held section: between passes 3 and 4 (see `held.rs`).
const PASS_3A: u8 = 7;

/// A fix after which e2fsck rebuilds the directory in pass 3A: an htree index cleared, a
/// duplicate entry, a leaf block given its checksum.
fn rebuilds_directory(f: &Finding) -> bool {
    f.problem == Problem::P3A_OPTIMIZE_DIR_ERR
        || f.fixed
            && (f.problem.info().prompt == Prompt::ClearHtree
                || found_in_pass_3a(f.problem)
                || matches!(
                    f.problem,
                    Problem::P2_REPORT_DUP_DIRENT | Problem::P2_LEAF_NODE_MISSING_CSUM
                ))
}

/// Problems e2fsck finds while it rebuilds a directory, and so prints under pass 3A.
fn found_in_pass_3a(p: Problem) -> bool {
    matches!(
        p,
        Problem::P2_NON_UNIQUE_FILE
            | Problem::P2_NON_UNIQUE_FILE_NO_RENAME
            | Problem::P3A_OPTIMIZE_DIR_ERR
    )
}

/// The headers e2fsck prints before the first finding of passes 1B and 1C-1D (they run only
/// when a block is claimed twice).
fn pass_1b_header(p: Problem) -> Option<&'static str> {
    match p {
        Problem::P1B_DUP_BLOCK_HEADER => Some(
            "\nRunning additional passes to resolve blocks claimed by more than one inode...\n\
             Pass 1B: Rescanning for multiply-claimed blocks",
        ),
        Problem::P1D_NUM_DUP_INODES => Some(
            "Pass 1C: Scanning directories for inodes with multiply-claimed blocks\n\
             Pass 1D: Reconciling multiply-claimed blocks",
        ),
        _ => None,
    }
}

/// Findings e2fsck writes on one line: a bitmap-differences header and its ranges, and pass
/// 1B's list of an inode's multiply-claimed blocks.
fn continues_line(p: Problem) -> bool {
    matches!(
        p,
        Problem::P1B_DUP_BLOCK_HEADER
            | Problem::P1B_DUP_BLOCK
            | Problem::P1B_DUP_RANGE
            | Problem::P5_BLOCK_BITMAP_HEADER
            | Problem::P5_BLOCK_UNUSED
            | Problem::P5_BLOCK_USED
            | Problem::P5_BLOCK_RANGE_UNUSED
            | Problem::P5_BLOCK_RANGE_USED
            | Problem::P5_INODE_BITMAP_HEADER
            | Problem::P5_INODE_UNUSED
            | Problem::P5_INODE_USED
            | Problem::P5_INODE_RANGE_UNUSED
            | Problem::P5_INODE_RANGE_USED
    )
}

impl Terminal {
    pub fn new(policy: Policy, dev: &str) -> Self {
        Terminal {
            policy,
            dev: dev.to_string(),
            out: crate::held::Sink::new(),
            last_pass: 0,
            pass_timer: None,
            io: None,
            line_open: false,
            interactive: false,
            yes_to_all: false,
            yes_run: 0,
            root: false,
            max_count_default: 0,
            max_count: Default::default(),
            shown: Default::default(),
            no_default: Default::default(),
            halted: false,
            foreign: None,
            headers_shown: Default::default(),
            latches: Default::default(),
        }
    }

    /// Name the file system as e2fsck does once it is open: by its label when it has one
    /// (the device otherwise, or always what `-N` gave).
    pub fn name_from(&mut self, dev: &dyn ffsck_io::Device) {
        let mut magic = [0u8; 2];
        let ext = dev
            .read_at(&mut magic, ffsck_format::SUPERBLOCK_OFFSET + 0x38)
            .is_ok()
            && u16::from_le_bytes(magic) == ffsck_format::EXT2_MAGIC;
        if !ext {
            self.foreign = crate::probe::contains_line(&self.dev, dev);
        }
        self.dev = crate::skip::display_name(&fs_label(dev), &self.dev);
    }

    /// Take e2fsck.conf's message limits and default answers.
    pub fn configure(&mut self, cfg: &crate::config::Config) {
        self.max_count_default = cfg.max_count_problems;
        for (&code, p) in &cfg.problems {
            if let Some(m) = p.max_count {
                self.max_count.insert(code, m);
            }
            if p.no_default == Some(true) {
                self.no_default.insert(code);
            }
        }
    }

    /// Count a finding of `p`; whether it is past its `max_count` and so not shown (the
    /// first one past it prints e2fsck's "...problem 0xNNNNNN suppressed").
    fn suppressed(&mut self, p: Problem, flags: u16) -> bool {
        // Only e2fsck's codes can be named in e2fsck.conf or counted by e2fsck.
        let Some(code) = p.info().e2fsck_code else {
            return false;
        };
        let max = self
            .max_count
            .get(&code)
            .copied()
            .unwrap_or(self.max_count_default);
        let n = self.shown.entry(code).or_insert(0);
        *n += 1;
        if max == 0 || *n <= max {
            return false;
        }
        // e2fsck hides the extra messages under -n and -y, and under -p those it may fix.
        let hide = match self.policy.mode {
            Mode::Preen => flags & ffsck_check::problem::flag::PREEN_OK != 0,
            _ => !self.interactive,
        };
        if *n == max + 1 {
            if std::mem::take(&mut self.line_open) {
                let _ = writeln!(self.out);
            }
            let _ = writeln!(self.out, "...problem 0x{code:06x} suppressed");
        }
        hide
    }

    /// The file system is the mounted (read-only) root: when the run changes it, say to
    /// reboot and add e2fsck's REBOOT bit to the exit code.
    pub fn root_file_system(&mut self) {
        self.root = true;
    }

    /// Ask the person at the terminal instead of answering by the policy.
    pub fn ask_on_terminal(&mut self) {
        self.interactive = true;
    }

    /// The finding's message and question up to the answer (`"… Fix"`), or None for a
    /// message without a question.
    fn question(f: &Finding, msg: &str) -> Option<String> {
        let prompt = f.problem.info().prompt;
        // A message that ends its own line puts the question on the next.
        match prompt {
            Prompt::None => None,
            Prompt::Null => Some(msg.to_string()),
            _ if msg.is_empty() || msg.ends_with('\n') || msg.ends_with(' ') => {
                Some(format!("{msg}{}", prompt.text()))
            }
            _ => Some(format!("{msg}  {}", prompt.text())),
        }
    }

    /// Whether `f` asks "Abort?" in a repair where the check stops after it whatever the
    /// answer (under -n the question is answered no and the check goes on, as e2fsck's).
    fn stops_here(&self, f: &Finding, flags: u16) -> bool {
        !f.fixed
            && self.policy.mode == Mode::Yes
            && f.problem.info().prompt == Prompt::Abort
            && flags & ffsck_check::problem::flag::FATAL != 0
    }

    /// Warnings that go to stderr before a finding's message.
    fn warn(&mut self, f: &Finding) {
        for w in f.warnings() {
            self.out.err_line(w);
        }
    }

    /// Print the closing lines and return the exit code.
    /// `-tt`: print the time each pass took (as e2fsck's per-pass statistics).
    pub fn time_passes(&mut self) {
        self.pass_timer = Some((0, Usage::now(self.io.as_deref())));
    }

    /// Count `-t`'s reads on `dev`.
    pub fn count_io(&mut self, dev: std::sync::Arc<dyn ffsck_io::Device>) {
        self.io = Some(dev);
    }

    /// Print the time of the pass under way, if passes are timed.
    fn end_pass(&mut self) {
        if let Some((pass, start)) = &self.pass_timer {
            if (1..=5).contains(pass) {
                let text = start.report(&format!("Pass {pass}: "), self.io.as_deref(), 0);
                let _ = write!(self.out, "{text}");
            }
        }
    }

    /// A finding under `-p`, as e2fsck's preen shows it: "DEV: message" and the fix's short
    /// word ("FIXED."); PREEN_NOMSG problems fixed silently; the first problem preen may not
    /// fix is shown, then the run stops (the fixes before it are kept).
    fn preen_finding(&mut self, f: &Finding, msg: &str, flags: u16) {
        if self.halted {
            return;
        }
        let prompt = f.problem.info().prompt;
        let halt = self.policy.leaves_error(f) && prompt != Prompt::None;
        if flags & ffsck_check::problem::flag::PREEN_NOMSG != 0 && !halt {
            return;
        }
        if msg.trim().is_empty() && (prompt == Prompt::None || halt) {
            return;
        }
        let mut line = format!("{}: {msg}", self.dev);
        if halt {
            // The message as e2fsck leaves it before stopping: its own end, or the two spaces
            // a question would follow.
            if !(line.ends_with('\n') || line.ends_with(' ')) {
                line.push_str("  ");
            }
            let _ = write!(self.out, "{line}");
            let _ = self.out.flush();
            self.halted = true;
            crate::screen::errln(preen_halt_text(&self.dev));
            return;
        }
        if prompt != Prompt::None {
            let word = if f.fixed {
                preen_word(prompt)
            } else {
                "IGNORED"
            };
            if !(line.ends_with('\n') || line.ends_with(' ') || line.is_empty()) {
                line.push_str("  ");
            }
            line.push_str(word);
            line.push('.');
        }
        let _ = writeln!(self.out, "{}", line.trim_end_matches('\n'));
    }

    /// The name the closing preen lines use.
    fn preen_name(&self, o: &Outcome) -> String {
        o.summary.as_ref().map_or_else(
            || self.dev.clone(),
            |s| crate::skip::display_name(&s.label, &self.dev),
        )
    }

    /// The primary superblock would not open, or none would: e2fsck says so as libext2fs's
    /// error and "trying backup blocks"; its advice follows at the end when none opened.
    fn open_failure(&mut self, f: &Finding) -> bool {
        match f.problem {
            Problem::P0_OPEN_FAILED => {
                let why = f.ctx.str.as_deref().unwrap_or_default();
                let err = if why.starts_with("bad magic number") {
                    "Bad magic number in super-block"
                } else {
                    "The ext2 superblock is corrupt"
                };
                let _ = writeln!(
                    self.out,
                    "ext2fs_open2: {err}\nffsck: Superblock invalid, trying backup blocks..."
                );
                true
            }
            // libext2fs's verdict on the descriptors, then (when there are backups to try)
            // e2fsck's word that it tries them.
            Problem::P0_CHECK_DESC_FAILED => {
                let _ = writeln!(self.out, "{}", f.message());
                if f.ctx.num > 1 {
                    let _ = writeln!(
                        self.out,
                        "ffsck: Group descriptors look bad... trying backup blocks..."
                    );
                }
                true
            }
            Problem::P0_SB_CORRUPT => true,
            _ => false,
        }
    }

    /// No superblock could be used: e2fsck's error on stderr, its advice, and what the device
    /// holds instead when it holds something else.
    fn superblock_invalid(&mut self, why: &str) {
        let err = if why.starts_with("(bad magic number)") {
            "Bad magic number in super-block"
        } else {
            "The ext2 superblock is corrupt"
        };
        let _ = self.out.flush();
        crate::screen::errln(format_args!(
            "ffsck: {err} while trying to open {}",
            self.dev
        ));
        let _ = writeln!(self.out, "{SB_ADVICE}");
        if let Some(line) = &self.foreign {
            let _ = writeln!(self.out, "{line}");
        }
    }

    pub fn finish(&mut self, o: &Outcome, verbose: bool) -> i32 {
        self.end_pass();
        if std::mem::take(&mut self.line_open) {
            let _ = writeln!(self.out);
        }
        self.out.release();
        self.pass_timer = None;
        if self.halted {
            // e2fsck exits at the stop: no summary, exit 4 whatever was fixed before it.
            let _ = self.out.flush();
            return exit::UNCORRECTED;
        }
        let mut code = o.exit_code;
        let modified = code & exit::NONDESTRUCT != 0 && marks_changed(&o.findings, self.policy);
        if !(modified && fixes_problem(&o.findings, self.policy)) {
            code &= !exit::NONDESTRUCT;
        }
        if let Some(msg) = &o.fatal {
            match msg.strip_prefix(SB_INVALID) {
                Some(why) => self.superblock_invalid(why),
                None => {
                    let _ = writeln!(self.out, "\n{msg}");
                }
            }
        }
        if let Some(s) = &o.summary {
            let name = crate::skip::display_name(&s.label, &self.dev);
            if modified && self.policy.mode != Mode::Preen {
                let _ = writeln!(self.out, "\n{name}: ***** FILE SYSTEM WAS MODIFIED *****");
            }
            if modified && self.root {
                let _ = writeln!(self.out, "{name}: ***** REBOOT SYSTEM *****");
                code |= exit::REBOOT;
            }
            if code & exit::UNCORRECTED != 0 {
                let _ = writeln!(
                    self.out,
                    "\n{name}: ********** WARNING: Filesystem still has errors **********\n"
                );
            }
            let pct = permille(s.non_contiguous, s.inodes_used);
            if verbose {
                let _ = write!(self.out, "{}", verbose_stats(s));
            } else {
                let _ = writeln!(
                    self.out,
                    "{name}: {}/{} files ({pct}% non-contiguous), {}/{} blocks",
                    s.inodes_used, s.inodes_count, s.blocks_used, s.blocks_count
                );
            }
        }
        if self.policy.mode == Mode::Preen && code & exit::UNCORRECTED != 0 {
            let _ = self.out.flush();
            crate::screen::errln(preen_halt_text(&self.preen_name(o)));
            code = exit::UNCORRECTED;
        }
        // Errors left: the changes made do not count (4, not 5), as in e2fsck, though the
        // file system was modified and says so above.
        if code & (exit::UNCORRECTED | exit::CANCELED) != 0 {
            code &= !exit::NONDESTRUCT;
        }
        let _ = self.out.flush();
        code
    }
}

impl Reporter for Terminal {
    fn pass_start(&mut self, pass: u8) {
        crate::report::pass_start(pass);
        // A repair that answers by itself holds its text by pass (see `held.rs`).
        if pass == 0 && self.policy.mode == Mode::Yes && !self.interactive && !self.out.holding() {
            self.out.hold();
        }
        if self.pass_timer.is_some() {
            self.end_pass();
            self.pass_timer = Some((pass, Usage::now(self.io.as_deref())));
        }
        if std::mem::take(&mut self.line_open) {
            let _ = writeln!(self.out);
        }
        self.out.pass_start(pass);
        self.last_pass = self.last_pass.max(pass);
        if self.policy.mode != Mode::Preen && (1..=5).contains(&pass) {
            let _ = writeln!(self.out, "{}", PASS_NAMES[pass as usize]);
        }
    }
    fn finding(&mut self, f: &Finding) {
        // A run of findings (a directory's holes) is shown one by one.
        for one in f.each() {
            self.finding_one(&one);
        }
    }

    fn restart(&mut self) {
        if std::mem::take(&mut self.line_open) {
            let _ = writeln!(self.out);
        }
        let _ = writeln!(self.out, "Restarting ffsck from the beginning...");
        self.out.restart();
        self.last_pass = 0;
        self.latches.clear();
        self.headers_shown.clear();
    }

    fn asks(&self) -> bool {
        self.interactive
    }

    /// e2fsck's interactive question: `… Fix<y>? ` and one keystroke; a message without a
    /// question, or any question after `a`, is shown answered yes.
    fn ask(&mut self, f: &Finding) -> bool {
        // A member of a group whose question was asked takes that answer ("CLEARED.").
        if let Some((question, per_inode)) = latch_of(f.problem) {
            if self
                .latches
                .get(&question)
                .is_some_and(|&ino| !per_inode || ino == f.ctx.ino)
            {
                self.finding(f);
                return f.fixed;
            }
        }
        let msg = f.message();
        let q = match Self::question(f, &msg) {
            Some(q) if self.interactive && !self.yes_to_all => q,
            _ => {
                self.finding(f);
                return true;
            }
        };
        if std::mem::take(&mut self.line_open) {
            let _ = writeln!(self.out);
        }
        self.warn(f);
        // Its group's members follow it with the answer's word ("CLEARED.", "IGNORED.").
        if latch_of(f.problem).is_none() && is_latch_question(f.problem) {
            self.latches.insert(f.problem, f.ctx.ino);
        }
        // The progress bar stays away until the answer is on the terminal.
        crate::screen::asking(true);
        crate::tty::raw_mode();
        // `[problems] no_default`: the default answer (Enter) is no, shown as e2fsck shows it.
        let default = !f
            .problem
            .info()
            .e2fsck_code
            .is_some_and(|c| self.no_default.contains(&c));
        // After more than eight yeses in a row (up to twelve), the hint e2fsck gives.
        let hint = if (9..=12).contains(&self.yes_run) {
            " ('a' enables 'yes' to all) "
        } else {
            ""
        };
        if self.yes_run > 12 {
            self.yes_run = -1;
        }
        let _ = write!(self.out, "{q}{hint}<{}>? ", if default { "y" } else { "n" });
        let _ = self.out.flush();
        let (yes, word) = match crate::tty::read_answer(default) {
            crate::tty::Answer::Yes => {
                if self.yes_run >= 0 {
                    self.yes_run += 1;
                }
                (true, "yes")
            }
            crate::tty::Answer::No => {
                self.yes_run = -1;
                (false, "no")
            }
            crate::tty::Answer::All => {
                self.yes_to_all = true;
                (true, "yes to all")
            }
        };
        // (One line, as e2fsck answers on a terminal; after "yes to all" the questions are
        // shown as -y shows them.)
        let _ = writeln!(self.out, "{word}");
        if let (true, Some(after)) = (yes, f.epilogue()) {
            let _ = write!(self.out, "{after}");
        }
        let _ = self.out.flush();
        crate::screen::asking(false);
        yes
    }
}

impl Terminal {
    /// Show one finding (not a run).
    fn finding_one(&mut self, f: &Finding) {
        crate::report::finding(f);
        // Pass 3A's rebuilds have no message of their own: e2fsck says its pass header.
        if f.problem == Problem::P3A_OPTIMIZE_DIR {
            if f.fixed && self.out.holding() && self.policy.mode != Mode::Preen {
                self.out
                    .header(PASS_3A, "Pass 3A: Optimizing directories\n");
            }
            return;
        }
        let flags = self.policy.flags(f.problem);
        if flags & ffsck_check::problem::flag::NOMSG != 0 {
            return;
        }
        if !f.fixed && flags & ffsck_check::problem::flag::NO_NOMSG != 0 {
            return;
        }
        if f.fixed && flags & ffsck_check::problem::flag::YES_NOMSG != 0 {
            return;
        }
        if self.suppressed(f.problem, flags) {
            return;
        }
        if self.open_failure(f) {
            return;
        }
        // Once the passes are over, what a later repair round finds goes under its own pass;
        // what e2fsck finds while rebuilding directories goes under pass 3A.
        let pass_3a = self.out.holding() && rebuilds_directory(f);
        // e2fsck's pass 3A header is not said when preening.
        if pass_3a && self.policy.mode != Mode::Preen {
            self.out
                .header(PASS_3A, "Pass 3A: Optimizing directories\n");
        }
        let rank = match f.problem {
            _ if pass_3a && found_in_pass_3a(f.problem) => Some(PASS_3A),
            _ if self.last_pass >= 5 => Some(f.problem.pass().saturating_mul(2)),
            _ => None,
        };
        if self.out.select(rank, self.line_open) {
            // The section changed: a bitmap-differences line left open was ended.
            self.line_open = false;
        }
        let msg = f.message();
        self.warn(f);
        if self.policy.mode == Mode::Preen {
            self.preen_finding(f, &msg, flags);
            return;
        }
        if continues_line(f.problem) {
            if let Some(header) = pass_1b_header(f.problem) {
                if self.headers_shown.insert(f.problem) {
                    let _ = writeln!(self.out, "{header}");
                }
            }
            let _ = write!(self.out, "{msg}");
            self.line_open = true;
            return;
        }
        if std::mem::take(&mut self.line_open) {
            let _ = writeln!(self.out);
        }
        if let Some(header) = pass_1b_header(f.problem) {
            if self.headers_shown.insert(f.problem) {
                let _ = writeln!(self.out, "{header}");
            }
        }
        if let Some((question, per_inode)) = latch_of(f.problem) {
            let asked = self.latches.get(&question);
            if asked.is_some_and(|&ino| !per_inode || ino == f.ctx.ino) {
                let word = if f.fixed {
                    preen_word(f.problem.info().prompt)
                } else {
                    "IGNORED"
                };
                let gap = if msg.ends_with(' ') || msg.ends_with('\n') {
                    ""
                } else {
                    "  "
                };
                let _ = writeln!(self.out, "{msg}{gap}{word}.");
                return;
            }
        }
        if latch_of(f.problem).is_none() && is_latch_question(f.problem) {
            self.latches.insert(f.problem, f.ctx.ino);
        }
        match Self::question(f, &msg) {
            // A question no answer can keep the check going after (the catalogue's FATAL: it
            // stops here), in a repair: under -y e2fsck's "Abort? yes"; a person is not asked
            // a question whose answer would be ignored, the message stands alone.
            Some(q) if self.stops_here(f, flags) => {
                if self.interactive {
                    let _ = writeln!(self.out, "{}\n", msg.trim_end());
                } else {
                    let _ = writeln!(self.out, "{q}? yes\n");
                }
            }
            // `[problems] force_no`: e2fsck says the fix was ignored, without asking.
            Some(_) if self.policy.forced_no(f.problem) => {
                let gap = if msg.ends_with('\n') { "" } else { "  " };
                let _ = writeln!(self.out, "{msg}{gap}IGNORED.");
            }
            None if msg.is_empty() => {}
            None => {
                let _ = writeln!(self.out, "{msg}");
            }
            Some(q) => {
                let answer = if f.fixed { "yes" } else { "no" };
                let _ = writeln!(self.out, "{q}? {answer}\n");
            }
        }
        if let Some(after) = f.epilogue() {
            let _ = write!(self.out, "{after}");
        }
    }
}

fn xml_escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// e2fsck's problem log: one `<problem>` element per finding, in order.
pub fn write_problem_log(path: &Path, o: &Outcome, dev: &str, argv: Vec<String>) -> Result<()> {
    let mut f = std::io::BufWriter::new(
        std::fs::File::create(path).with_context(|| format!("cannot write {}", path.display()))?,
    );
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    writeln!(f, "<?xml version=\"1.0\" encoding=\"utf-8\"?>")?;
    writeln!(f, "<problem_log time=\"{now}\">")?;
    let args: Vec<String> = argv
        .iter()
        .skip(1)
        .enumerate()
        .map(|(i, a)| format!(" arg{}=\"{}\"", i + 1, xml_escape(a)))
        .collect();
    writeln!(f, "<invocation prog=\"ffsck\"{}/>", args.concat())?;
    writeln!(f, "<filesystem dev=\"{}\"/>", xml_escape(dev))?;
    for x in o.findings.iter().flat_map(Finding::each) {
        // A problem of ffsck's own has no e2fsck code (e2fsck prints "recovering journal" and
        // the like directly), so an e2fsck-format log leaves it out.
        let Some(code) = x.problem.info().e2fsck_code else {
            continue;
        };
        let c = &x.ctx;
        let mut attrs = format!("code=\"0x{code:06x}\" answer=\"{}\"", u8::from(x.fixed));
        if c.ino != 0 {
            attrs += &format!(" ino=\"{}\"", c.ino);
        }
        if c.ino2 != 0 {
            attrs += &format!(" ino2=\"{}\"", c.ino2);
        }
        if c.dir != 0 {
            attrs += &format!(" dir=\"{}\"", c.dir);
        }
        if c.blk != 0 {
            attrs += &format!(" blk=\"{}\"", c.blk);
        }
        if c.blk2 != 0 {
            attrs += &format!(" blk2=\"{}\"", c.blk2);
        }
        if c.group != 0 {
            attrs += &format!(" group=\"{}\"", c.group);
        }
        if c.num != 0 {
            attrs += &format!(" num=\"{}\"", c.num);
        }
        writeln!(f, "<problem {attrs} ffsck=\"{}\"/>", x.problem.info().name)?;
    }
    writeln!(f, "</problem_log>")?;
    f.flush()?;
    Ok(())
}

/// Where a stretch of the run started, for e2fsck's resource lines (`-t`, `-tt`).
pub struct Usage {
    start: std::time::Instant,
    cpu: (f64, f64),
    read: u64,
}

impl Usage {
    pub fn now(io: Option<&dyn ffsck_io::Device>) -> Usage {
        Usage {
            start: std::time::Instant::now(),
            cpu: cpu_times(),
            read: io.map_or(0, |d| d.bytes_read()),
        }
    }

    /// e2fsck's two lines for the stretch since `self`, each after `prefix`: the memory the
    /// allocator holds and the real, user and system time; the reads and writes and their
    /// rate.
    pub fn report(&self, prefix: &str, io: Option<&dyn ffsck_io::Device>, written: u64) -> String {
        let real = self.start.elapsed().as_secs_f64();
        let (user, sys) = cpu_times();
        let read = io.map_or(0, |d| d.bytes_read()).saturating_sub(self.read);
        let rate = (read + written) as f64 / f64::from(1 << 20) / real.max(1e-6);
        format!(
            "{prefix}Memory used: {}, time: {real:5.2}/{:5.2}/{:5.2}\n\
             {prefix}I/O read: {}MB, write: {}MB, rate: {rate:.2}MB/s\n",
            malloc_usage(),
            user - self.cpu.0,
            sys - self.cpu.1,
            read >> 20,
            written >> 20,
        )
    }
}

/// The allocator's memory as e2fsck shows it: "heap/mapped (in use/free)", in KiB.
fn malloc_usage() -> String {
    // SAFETY: mallinfo2 only reads the allocator's statistics.
    let m = unsafe { libc::mallinfo2() };
    let k = |b: usize| b / 1024;
    format!(
        "{}k/{}k ({}k/{}k)",
        k(m.arena),
        k(m.hblkhd),
        k(m.uordblks),
        k(m.fordblks)
    )
}

/// User and system CPU time of this process so far, in seconds.
pub fn cpu_times() -> (f64, f64) {
    let mut ru = std::mem::MaybeUninit::<libc::rusage>::zeroed();
    // SAFETY: getrusage fills the struct it is given; it was zero-initialised.
    let ru = unsafe {
        if libc::getrusage(libc::RUSAGE_SELF, ru.as_mut_ptr()) != 0 {
            return (0.0, 0.0);
        }
        ru.assume_init()
    };
    let secs = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    (secs(ru.ru_utime), secs(ru.ru_stime))
}

/// Why a run under `--max-memory LIMIT` peaked at `peak` bytes anyway: what never spills.
pub fn over_limit_note(peak: u64, limit: u64, dirs: Option<u64>) -> String {
    let mib = |b: u64| b as f64 / f64::from(1 << 20);
    let dirs = dirs.map_or(String::new(), |n| format!("; {n} directories here"));
    format!(
        "note: peak memory {:.1} MiB was above --max-memory {:.1} MiB. The directory-block \
         list and the directories' parent links and generations spill; the program itself, \
         the bitmaps and, while pass 1 scans, 4-8 bytes per directory (its inode number, and \
         its generation with metadata_csum{dirs}) stay in memory.",
        mib(peak),
        mib(limit)
    )
}

pub fn peak_rss_kib() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmHWM:"))
                .and_then(|l| l.split_whitespace().nth(1)?.parse().ok())
        })
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The latch table comes from the catalogue: members with questions of their own are
    /// answered by their group's question, per inode for an inode's blocks; groups whose
    /// question answers nothing (the relocation hint) or whose members ask nothing (bitmap
    /// differences, multiply-claimed blocks) print as they are.
    #[test]
    fn latches_come_from_the_catalogue() {
        use Problem as P;
        assert_eq!(
            latch_of(P::P1_ILLEGAL_BLOCK_NUM),
            Some((P::P1_INODE_BLOCK_LATCH, true))
        );
        assert_eq!(
            latch_of(P::P1_BLOCK_OVERLAPS_METADATA),
            Some((P::P1_INODE_BLOCK_LATCH, true))
        );
        assert_eq!(
            latch_of(P::P0_GDT_CSUM),
            Some((P::P0_GDT_CSUM_LATCH, false))
        );
        assert_eq!(
            latch_of(P::P1_LOW_DTIME),
            Some((P::P1_ORPHAN_LIST_REFUGEES, false))
        );
        for p in [
            P::P0_BB_NOT_GROUP,
            P::P5_BLOCK_USED,
            P::P1B_DUP_BLOCK,
            P::P2_BAD_NAME,
        ] {
            assert_eq!(latch_of(p), None, "{p:?}");
        }
        for p in [
            P::P1_INODE_BLOCK_LATCH,
            P::P0_GDT_CSUM_LATCH,
            P::P1_ORPHAN_LIST_REFUGEES,
        ] {
            assert!(is_latch_question(p), "{p:?}");
        }
        assert!(!is_latch_question(P::P0_RELOCATE_HINT));
        assert!(!is_latch_question(P::P1_ILLEGAL_BLOCK_NUM));
    }
}
