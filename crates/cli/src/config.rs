//! e2fsck.conf: `/etc/e2fsck.conf`, or the file `E2FSCK_CONFIG` names, in the profile syntax
//! e2fsprogs reads (`[section]` headers, `tag = value` relations, `tag = { ... }`
//! subsections, `#`/`;` comments, anything before the first section ignored). A malformed
//! file is refused as e2fsck refuses it (exit 8); unknown sections and tags are ignored.
//!
//! What ffsck honours: `[options]` broken_system_clock, accept_time_fudge,
//! buggy_init_scripts, max_count_problems, no_optimize_extents, inode_count_fullmap,
//! readahead_kb, indexed_dir_slack_percentage, log_dir, log_filename, report_time,
//! report_verbose; `[problems]` per e2fsck problem code; `[scratch_files]` directory;
//! and ffsck's own `[ffsck]` threads, nice, max_memory, scratch_dir.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

/// The default file, as e2fsck's.
pub const DEFAULT_PATH: &str = "/etc/e2fsck.conf";

/// A file larger than this is refused (a profile is a few lines).
const MAX_BYTES: u64 = 1 << 20;
/// Deepest `{ }` nesting accepted.
const MAX_DEPTH: usize = 16;

/// One node of the profile tree: a relation with a value, or a subsection with children.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Node {
    pub name: String,
    pub value: Option<String>,
    pub children: Vec<Node>,
}

impl Node {
    /// The first value of the relation at `path` below this node.
    pub fn get(&self, path: &[&str]) -> Option<&str> {
        let (first, rest) = path.split_first()?;
        for c in self.children.iter().filter(|c| c.name == *first) {
            if rest.is_empty() {
                if let Some(v) = &c.value {
                    return Some(v);
                }
            } else if c.value.is_none() {
                if let Some(v) = c.get(rest) {
                    return Some(v);
                }
            }
        }
        None
    }
    /// The subsections named `name`'s children, merged.
    fn subsections<'a>(&'a self, name: &'a str) -> impl Iterator<Item = &'a Node> + 'a {
        self.children
            .iter()
            .filter(move |c| c.name == name && c.value.is_none())
    }
}

/// A syntax error: its line and e2fsprogs' description of it.
#[derive(Debug, PartialEq, Eq)]
pub struct SyntaxError {
    pub line: usize,
    pub what: &'static str,
}

/// A quoted value, with the escapes the profile syntax knows (\n, \t, \b, \\, \").
fn unquote(s: &str) -> String {
    let mut out = String::new();
    let mut chars = s.chars();
    while let Some(c) = chars.next() {
        match c {
            '"' => break,
            '\\' => match chars.next() {
                Some('n') => out.push('\n'),
                Some('t') => out.push('\t'),
                Some('b') => out.push('\u{8}'),
                Some(o) => out.push(o),
                None => break,
            },
            c => out.push(c),
        }
    }
    out
}

/// Parse a profile's text into its root node (sections are its children).
pub fn parse(text: &str) -> Result<Node, SyntaxError> {
    let mut root = Node::default();
    // The path of open nodes: [section index, subsection index, ...].
    let mut path: Vec<usize> = Vec::new();
    let mut seen_section = false;
    let mut want_obrace = false;
    fn at<'a>(root: &'a mut Node, path: &[usize]) -> &'a mut Node {
        path.iter().fold(root, |n, &i| &mut n.children[i])
    }
    for (i, raw) in text.lines().enumerate() {
        let line = i + 1;
        let err = |what| Err(SyntaxError { line, what });
        let l = raw.trim();
        if want_obrace {
            if !l.starts_with('{') {
                return err("Missing open brace in profile");
            }
            want_obrace = false;
            continue;
        }
        if !seen_section && !raw.starts_with('[') {
            continue;
        }
        if l.is_empty() || l.starts_with('#') || l.starts_with(';') {
            continue;
        }
        if let Some(rest) = l.strip_prefix('[') {
            if path.len() > 1 {
                return err("Profile section header not at top level");
            }
            let Some(end) = rest.find(']') else {
                return err("Syntax error in profile section header");
            };
            let name = rest[..end].trim();
            let name = match name.strip_prefix('"') {
                Some(q) => unquote(q),
                None if name.is_empty() => return err("Syntax error in profile section header"),
                None => name.to_string(),
            };
            seen_section = true;
            let idx = match root
                .children
                .iter()
                .position(|c| c.name == name && c.value.is_none())
            {
                Some(i) => i,
                None => {
                    root.children.push(Node {
                        name,
                        ..Default::default()
                    });
                    root.children.len() - 1
                }
            };
            path = vec![idx];
            continue;
        }
        if l.starts_with('}') {
            if path.len() <= 1 {
                return err("Extra closing brace in profile");
            }
            path.pop();
            continue;
        }
        if path.is_empty() {
            return err("Syntax error in profile relation");
        }
        let Some((tag, value)) = l.split_once('=') else {
            return err("Syntax error in profile relation");
        };
        let tag = tag.trim();
        if tag.is_empty() || tag.contains(char::is_whitespace) {
            return err("Syntax error in profile relation");
        }
        let value = value.trim();
        let node = at(&mut root, &path);
        if value.is_empty() || value.starts_with('{') {
            if path.len() >= MAX_DEPTH {
                return err("Syntax error in profile relation");
            }
            want_obrace = value.is_empty();
            node.children.push(Node {
                name: tag.to_string(),
                ..Default::default()
            });
            let idx = node.children.len() - 1;
            path.push(idx);
            continue;
        }
        let value = match value.strip_prefix('"') {
            Some(q) => unquote(q),
            None => value.to_string(),
        };
        node.children.push(Node {
            name: tag.to_string(),
            value: Some(value),
            children: Vec::new(),
        });
    }
    Ok(root)
}

/// A profile boolean as e2fsprogs reads one; `None` for anything else.
fn boolean(v: &str) -> Option<bool> {
    match v.to_ascii_lowercase().as_str() {
        "y" | "yes" | "true" | "t" | "1" | "on" => Some(true),
        "n" | "no" | "false" | "nil" | "0" | "off" => Some(false),
        _ => None,
    }
}

/// A profile integer (C's strtol base 0: decimal, 0x hex, 0 octal).
fn integer(v: &str) -> Option<i64> {
    let t = v.trim();
    let (neg, t) = match t.strip_prefix('-') {
        Some(r) => (true, r),
        None => (false, t),
    };
    let n = if let Some(h) = t.strip_prefix("0x").or_else(|| t.strip_prefix("0X")) {
        i64::from_str_radix(h, 16).ok()?
    } else if t.len() > 1 && t.starts_with('0') {
        i64::from_str_radix(&t[1..], 8).ok()?
    } else {
        t.parse().ok()?
    };
    Some(if neg { -n } else { n })
}

/// `[problems] 0xNNNNNN = { ... }` for one problem code.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ProblemConf {
    pub preen_ok: Option<bool>,
    pub no_ok: Option<bool>,
    pub no_default: Option<bool>,
    pub force_no: Option<bool>,
    pub preen_nomessage: Option<bool>,
    pub no_nomsg: Option<bool>,
    pub not_a_fix: Option<bool>,
    pub max_count: Option<u32>,
    pub description: Option<String>,
}

/// What ffsck takes from e2fsck.conf.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Config {
    /// The file read (None: there was none).
    pub path: Option<PathBuf>,
    pub broken_system_clock: bool,
    /// accept_time_fudge (and its old name buggy_init_scripts); default true.
    pub accept_time_fudge: bool,
    pub max_count_problems: u32,
    pub no_optimize_extents: bool,
    pub inode_count_fullmap: bool,
    pub readahead_kb: Option<u64>,
    pub indexed_dir_slack_percentage: Option<u32>,
    pub log_dir: Option<PathBuf>,
    pub log_filename: Option<String>,
    pub report_time: bool,
    pub report_verbose: bool,
    /// By e2fsck problem code.
    pub problems: HashMap<u32, ProblemConf>,
    /// `[scratch_files] directory`.
    pub scratch_directory: Option<PathBuf>,
    /// `[ffsck]`.
    pub threads: Option<usize>,
    pub nice: bool,
    pub max_memory: Option<u64>,
    pub scratch_dir: Option<PathBuf>,
}

/// How loading went wrong: e2fsck's words, for stderr; exit 8.
#[derive(Debug)]
pub struct LoadError(pub String);

impl Config {
    /// The configuration of this run: `E2FSCK_CONFIG`'s file, else /etc/e2fsck.conf; none
    /// (defaults) when the file does not exist, as in e2fsck.
    pub fn load() -> Result<Config, LoadError> {
        let path = std::env::var_os("E2FSCK_CONFIG")
            .map(PathBuf::from)
            .unwrap_or_else(|| PathBuf::from(DEFAULT_PATH));
        Config::load_from(&path)
    }

    pub fn load_from(path: &Path) -> Result<Config, LoadError> {
        use std::io::Read;
        let Ok(f) = std::fs::File::open(path) else {
            return Ok(Config::from_tree(&Node::default(), None));
        };
        let mut text = String::new();
        if f.take(MAX_BYTES).read_to_string(&mut text).is_err() {
            return Err(LoadError(format!(
                "Syntax error in e2fsck config file ({}, line #0)\n\tcannot be read as text",
                path.display()
            )));
        }
        let tree = parse(&text).map_err(|e| {
            LoadError(format!(
                "Syntax error in e2fsck config file ({}, line #{})\n\t{}",
                path.display(),
                e.line,
                e.what
            ))
        })?;
        Ok(Config::from_tree(&tree, Some(path.to_path_buf())))
    }

    /// The settings of a parsed profile (unknown tags ignored; an unreadable value keeps
    /// the default, as profile_get_* does).
    pub fn from_tree(t: &Node, path: Option<PathBuf>) -> Config {
        let b = |s: &str, k: &str, d: bool| t.get(&[s, k]).and_then(boolean).unwrap_or(d);
        let int = |s: &str, k: &str| t.get(&[s, k]).and_then(integer);
        let fudge = b("options", "accept_time_fudge", true);
        let mut c = Config {
            path,
            broken_system_clock: b("options", "broken_system_clock", false),
            accept_time_fudge: b("options", "buggy_init_scripts", fudge),
            max_count_problems: int("options", "max_count_problems")
                .and_then(|v| u32::try_from(v).ok())
                .unwrap_or(0),
            no_optimize_extents: b("options", "no_optimize_extents", false),
            inode_count_fullmap: b("options", "inode_count_fullmap", false),
            readahead_kb: int("options", "readahead_kb").and_then(|v| u64::try_from(v).ok()),
            indexed_dir_slack_percentage: int("options", "indexed_dir_slack_percentage")
                .and_then(|v| u32::try_from(v).ok()),
            log_dir: t.get(&["options", "log_dir"]).map(PathBuf::from),
            log_filename: t.get(&["options", "log_filename"]).map(str::to_string),
            report_time: b("options", "report_time", false),
            report_verbose: b("options", "report_verbose", false),
            scratch_directory: t.get(&["scratch_files", "directory"]).map(PathBuf::from),
            threads: int("ffsck", "threads").and_then(|v| usize::try_from(v).ok()),
            nice: b("ffsck", "nice", false),
            max_memory: t
                .get(&["ffsck", "max_memory"])
                .and_then(|v| crate::args::parse_size(v).ok()),
            scratch_dir: t.get(&["ffsck", "scratch_dir"]).map(PathBuf::from),
            ..Default::default()
        };
        for section in t.subsections("problems") {
            for p in section.children.iter().filter(|p| p.value.is_none()) {
                let Some(code) = p
                    .name
                    .strip_prefix("0x")
                    .and_then(|h| u32::from_str_radix(h, 16).ok())
                else {
                    continue;
                };
                let pb = |k: &str| p.get(&[k]).and_then(boolean);
                let e = c.problems.entry(code).or_default();
                e.preen_ok = e.preen_ok.or(pb("preen_ok"));
                e.no_ok = e.no_ok.or(pb("no_ok"));
                e.no_default = e.no_default.or(pb("no_default"));
                e.force_no = e.force_no.or(pb("force_no"));
                e.preen_nomessage = e.preen_nomessage.or(pb("preen_nomessage"));
                e.no_nomsg = e.no_nomsg.or(pb("no_nomsg"));
                e.not_a_fix = e.not_a_fix.or(pb("not_a_fix"));
                e.max_count = e.max_count.or(p
                    .get(&["max_count"])
                    .and_then(integer)
                    .and_then(|v| u32::try_from(v).ok()));
                e.description = e
                    .description
                    .clone()
                    .or(p.get(&["description"]).map(str::to_string));
            }
        }
        c
    }

    /// The `[problems]` entry for an e2fsck code, if any.
    #[cfg(test)]
    pub fn problem(&self, code: u32) -> Option<&ProblemConf> {
        self.problems.get(&code)
    }

    /// The check's overrides: problem flags and the superblock time checks.
    pub fn overrides(&self, fixes_only: bool) -> ffsck_check::Overrides {
        use ffsck_check::problem::{flag, Prompt};
        let mut problems = std::collections::BTreeMap::new();
        for (&code, p) in &self.problems {
            let mut o = ffsck_check::ProblemOverride::default();
            let bits = [
                (p.preen_ok, flag::PREEN_OK),
                (p.no_ok, flag::NO_OK),
                (p.preen_nomessage, flag::PREEN_NOMSG),
                (p.no_nomsg, flag::NO_NOMSG),
                (p.not_a_fix, flag::NOT_A_FIX),
            ];
            for (v, bit) in bits {
                match v {
                    Some(true) => o.set |= bit,
                    Some(false) => o.clear |= bit,
                    None => {}
                }
            }
            o.force_no = p.force_no == Some(true);
            problems.insert(code, o);
        }
        if fixes_only {
            // No optimisation: every "Optimize?" is answered no.
            for p in ffsck_check::Problem::ALL {
                if let (Prompt::Optimize, Some(code)) = (p.info().prompt, p.info().e2fsck_code) {
                    problems.entry(code).or_default().force_no = true;
                }
            }
        }
        ffsck_check::Overrides {
            problems,
            no_optimize_extents: self.no_optimize_extents || fixes_only,
            convert_block_maps: false,
            fragcheck: false,
            ea_ver: None,
            // Out of range, e2fsck takes its default.
            dir_slack: self
                .indexed_dir_slack_percentage
                .map(|v| if v > 100 { 20 } else { v as u8 }),
            broken_clock: self.broken_system_clock,
            time_fudge: Some(if self.accept_time_fudge {
                ffsck_check::DEFAULT_TIME_FUDGE
            } else {
                0
            }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_sections_relations_and_subsections() {
        let t = parse(
            "leading text is ignored\n[options]\n\tbroken_system_clock = true\n\
             # comment\n; comment\n\tlog_filename = \"/var/log/e2fsck-%N.%h\"\n\
             [problems]\n\t0x000031 = {\n\t\tpreen_ok = false\n\t\tmax_count = 3\n\t}\n\
             0x000032 =\n{\nforce_no = 1\n}\n[options]\naccept_time_fudge = off\n",
        )
        .unwrap();
        let c = Config::from_tree(&t, None);
        assert!(c.broken_system_clock);
        assert!(!c.accept_time_fudge);
        assert_eq!(c.log_filename.as_deref(), Some("/var/log/e2fsck-%N.%h"));
        let p = c.problem(0x31).unwrap();
        assert_eq!(p.preen_ok, Some(false));
        assert_eq!(p.max_count, Some(3));
        assert_eq!(c.problem(0x32).unwrap().force_no, Some(true));
    }

    #[test]
    fn malformed_profiles_are_refused_with_their_line() {
        let e = parse("[options]\n}\n").unwrap_err();
        assert_eq!((e.line, e.what), (2, "Extra closing brace in profile"));
        let e = parse("[options\n").unwrap_err();
        assert_eq!(e.what, "Syntax error in profile section header");
        let e = parse("[options]\nno equals sign\n").unwrap_err();
        assert_eq!((e.line, e.what), (2, "Syntax error in profile relation"));
        let e = parse("[p]\na = {\n[q]\n").unwrap_err();
        assert_eq!(e.what, "Profile section header not at top level");
    }

    #[test]
    fn defaults_without_a_file() {
        let c = Config::from_tree(&Node::default(), None);
        assert!(c.accept_time_fudge && !c.broken_system_clock);
        assert_eq!(c.max_count_problems, 0);
    }
}
