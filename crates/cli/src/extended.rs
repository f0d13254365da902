//! e2fsck's `-E` extended options and the conflicts between its flags: parsed, checked and
//! refused with e2fsck's words and exit codes, before anything is opened. An option that is
//! ffsck's behaviour anyway is accepted (ffsck(8), EXTENDED OPTIONS, says why).

use crate::args::Args;
use ffsck_check::exit;
use std::path::PathBuf;

/// The `-E` options of a run.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Extended {
    /// `ea_ver=`: 1 or 2 (e2fsck's default): the xattr block format version pass 1 accepts.
    pub ea_ver: Option<u8>,
    /// `journal_only`: recover the journal, then stop without checking.
    pub journal_only: bool,
    /// `fragcheck`: e2fsck's per-file fragmentation report (each break in a file's physical
    /// contiguity, listed in pass 1).
    pub fragcheck: bool,
    /// `readahead_kb=`: accepted and validated; ffsck sizes its own reads.
    pub readahead_kb: Option<u64>,
    /// `discard` / `nodiscard` (the last given wins).
    pub discard: bool,
    /// `optimize_extents` (Some(true)) / `no_optimize_extents` (Some(false)): whether pass 1
    /// offers to rebuild extent trees that could be narrower or shallower (e2fsck.conf's
    /// `no_optimize_extents` otherwise; on by default, as in e2fsck).
    pub optimize_extents: Option<bool>,
    /// `inode_count_fullmap` / `no_inode_count_fullmap`: no effect in ffsck.
    pub icount_fullmap: Option<bool>,
    /// `bmap2extent`: rewrite every file's mapping as an extent tree (pass 1E), turning the
    /// `extent` feature on.
    pub bmap2extent: bool,
    /// `fixes_only`: fix inconsistencies, make no optimisation.
    pub fixes_only: bool,
    /// `unshare_blocks`: clone every shared block (implies -f).
    pub unshare_blocks: bool,
    /// `check_encoding`: verify the encoding of names in casefolded directories.
    pub check_encoding: bool,
    /// `problem_log=FILE`: as --problem-log.
    pub problem_log: Option<PathBuf>,
    /// `log_filename=FILE`: a copy of the output, as e2fsck.conf's log_filename.
    pub log_filename: Option<PathBuf>,
}

/// e2fsck's list of the extended options, printed after a bad one.
const USAGE: &str = "\nExtended options are separated by commas, and may take an argument which
is set off by an equals ('=') sign.  Valid extended options are:

\tea_ver=<ea_version (1 or 2)>
\tfragcheck
\tjournal_only
\tdiscard
\tnodiscard
\toptimize_extents
\tno_optimize_extents
\tinode_count_fullmap
\tno_inode_count_fullmap
\treadahead_kb=<buffer size>
\tbmap2extent
\tunshare_blocks
\tfixes_only
\tcheck_encoding
";

/// Parse every `-E` argument, in order. An error is the message e2fsck prints (its list of
/// options included).
pub fn parse(list: &[String]) -> Result<Extended, String> {
    let mut e = Extended::default();
    let mut bad: Vec<String> = Vec::new();
    for token in list.iter().flat_map(|s| s.split(',')) {
        if token.is_empty() {
            continue;
        }
        let (name, arg) = match token.split_once('=') {
            Some((n, a)) => (n, Some(a)),
            None => (token, None),
        };
        match (name, arg) {
            ("ea_ver", Some(a)) => match parse_c_ulong(a) {
                Some(v @ (1 | 2)) => e.ea_ver = Some(v as u8),
                _ => bad.push("Invalid EA version.".into()),
            },
            ("readahead_kb", Some(a)) => match parse_c_ulong(a) {
                Some(v) => e.readahead_kb = Some(v),
                None => bad.push("Invalid readahead buffer size.".into()),
            },
            ("problem_log", Some(a)) => e.problem_log = Some(a.into()),
            ("log_filename", Some(a)) => e.log_filename = Some(a.into()),
            ("fragcheck", None) => e.fragcheck = true,
            ("journal_only", None) => e.journal_only = true,
            ("discard", None) => e.discard = true,
            ("nodiscard", None) => e.discard = false,
            ("optimize_extents", None) => e.optimize_extents = Some(true),
            ("no_optimize_extents", None) => e.optimize_extents = Some(false),
            ("inode_count_fullmap", None) => e.icount_fullmap = Some(true),
            ("no_inode_count_fullmap", None) => e.icount_fullmap = Some(false),
            ("bmap2extent", None) => e.bmap2extent = true,
            ("fixes_only", None) => e.fixes_only = true,
            ("unshare_blocks", None) => e.unshare_blocks = true,
            ("check_encoding", None) => e.check_encoding = true,
            ("ea_ver" | "readahead_kb" | "problem_log" | "log_filename", None) => {
                bad.push(String::new())
            }
            _ => bad.push(format!("Unknown extended option: {token}")),
        }
    }
    if bad.is_empty() {
        return Ok(e);
    }
    let mut msg: String = bad
        .iter()
        .filter(|b| !b.is_empty())
        .map(|b| format!("{b}\n"))
        .collect();
    msg += USAGE;
    Err(msg)
}

/// A number as C's strtoul(.., 0) reads one: decimal, 0x hex or 0 octal, all of it.
fn parse_c_ulong(s: &str) -> Option<u64> {
    let s = s.trim_start();
    if let Some(h) = s.strip_prefix("0x").or_else(|| s.strip_prefix("0X")) {
        u64::from_str_radix(h, 16).ok()
    } else if s.len() > 1 && s.starts_with('0') {
        u64::from_str_radix(&s[1..], 8).ok()
    } else {
        s.parse().ok()
    }
}

/// A refusal: what goes to stderr, and the exit code.
#[derive(Debug, PartialEq, Eq)]
pub struct Refusal {
    pub message: String,
    pub code: i32,
}

fn fatal(msg: &str) -> Refusal {
    Refusal {
        message: format!("ffsck: {msg}"),
        code: exit::ERROR,
    }
}

/// e2fsck's refusals of flag combinations, in e2fsck's order, then ffsck's refusals of the
/// flags whose effect it does not have. Returns the parsed `-E` options otherwise.
pub fn check(args: &Args) -> Result<Extended, Refusal> {
    if [args.no, args.yes, args.preen]
        .iter()
        .filter(|&&m| m)
        .count()
        > 1
    {
        return Err(fatal(
            "Only one of the options -p/-a, -n or -y may be specified.",
        ));
    }
    let bad_blocks_file = args.add_badblocks.is_some() || args.set_badblocks.is_some();
    if args.no && args.optimize {
        return Err(fatal("The -n and -D options are incompatible."));
    }
    if args.no && args.badblocks_scan > 0 {
        return Err(fatal("The -n and -c options are incompatible."));
    }
    if args.no && bad_blocks_file {
        return Err(fatal("The -n and -l/-L options are incompatible."));
    }
    let ext = parse(&args.extended).map_err(|message| Refusal {
        message: message.trim_end_matches('\n').to_string(),
        code: exit::USAGE,
    })?;
    let fixes_only = ext.fixes_only || std::env::var_os("E2FSCK_FIXES_ONLY").is_some();
    if args.optimize && fixes_only {
        return Err(fatal("The -D and -E fixes_only options are incompatible."));
    }
    if ext.bmap2extent && fixes_only {
        return Err(fatal(
            "The -E bmap2extent and fixes_only options are incompatible.",
        ));
    }
    if args.badblocks_scan > 0 && bad_blocks_file {
        return Err(Refusal {
            message: "The -c and the -l/-L options may not be both used at the same time.".into(),
            code: exit::USAGE,
        });
    }
    Ok(Extended {
        fixes_only,
        // e2fsck turns discard off in a read-only run.
        discard: ext.discard && !args.no,
        ..ext
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn of(s: &[&str]) -> Result<Extended, String> {
        parse(&s.iter().map(|s| s.to_string()).collect::<Vec<_>>())
    }

    #[test]
    fn every_e2fsck_option_parses() {
        let e = of(&[
            "ea_ver=2,journal_only,readahead_kb=0x10,discard",
            "no_optimize_extents,inode_count_fullmap,fixes_only,unshare_blocks,check_encoding",
        ])
        .unwrap();
        assert_eq!(e.ea_ver, Some(2));
        assert!(e.journal_only && e.discard && e.fixes_only && e.unshare_blocks);
        assert!(e.check_encoding);
        assert_eq!(e.readahead_kb, Some(16));
        assert_eq!(e.optimize_extents, Some(false));
        assert_eq!(e.icount_fullmap, Some(true));
        assert!(!of(&["discard,nodiscard"]).unwrap().discard);
    }

    #[test]
    fn bad_options_get_e2fsck_messages() {
        let e = of(&["foo"]).unwrap_err();
        assert!(e.starts_with("Unknown extended option: foo\n"), "{e}");
        assert!(e.contains("\tcheck_encoding\n"), "{e}");
        assert!(of(&["ea_ver=3"])
            .unwrap_err()
            .starts_with("Invalid EA version."));
        assert!(of(&["readahead_kb=abc"])
            .unwrap_err()
            .starts_with("Invalid readahead buffer size."));
        assert!(of(&["ea_ver"]).unwrap_err().starts_with("\nExtended"));
    }
}
