//! Reader for e2fsck's XML problem log (`problem_log_filename` in e2fsck.conf), which ffsck
//! writes in the same format via `--problem-log`.
//!
//! Only `<problem code="0x……" …/>` elements are findings; `<header>` elements mark pass starts
//! and `<problem_log>` is the root. A real XML parser is unnecessary: e2fsck writes one flat,
//! attribute-only element per line, and a killed checker leaves a truncated file that a strict
//! parser would reject outright, while we still want the codes logged before the kill.

use std::collections::BTreeSet;
use std::path::Path;

use anyhow::{Context, Result};

/// The problems found in one log, in file order, with repeats.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ProblemLog {
    pub codes: Vec<u32>,
    /// `<problem` elements whose `code` attribute was missing or not hex.
    pub malformed: usize,
}

impl ProblemLog {
    /// The distinct codes, which is what the Jaccard comparison works on.
    pub fn code_set(&self) -> BTreeSet<u32> {
        self.codes.iter().copied().collect()
    }
}

/// Formats a code the way e2fsck's log and problem.h spell it: `0x010026`.
pub fn format_code(code: u32) -> String {
    format!("0x{code:06x}")
}

/// Reads and parses a log file; `Ok(None)` when the checker never created it.
pub fn read(path: &Path) -> Result<Option<ProblemLog>> {
    match std::fs::read(path) {
        Ok(bytes) => Ok(Some(parse(&String::from_utf8_lossy(&bytes)))),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(e).with_context(|| format!("reading problem log {}", path.display())),
    }
}

/// Extracts every `<problem …>` element's code from the log text.
pub fn parse(text: &str) -> ProblemLog {
    let mut log = ProblemLog::default();
    let mut rest = text;
    while let Some(pos) = rest.find("<problem") {
        let after = &rest[pos + "<problem".len()..];
        // `<problem_log>` (the root) and any other longer name must not count.
        let is_problem_element = after
            .chars()
            .next()
            .is_some_and(|c| c.is_ascii_whitespace() || c == '/' || c == '>');
        if !is_problem_element {
            rest = after;
            continue;
        }
        let (code, consumed) = scan_code_attribute(after);
        match code {
            Some(code) => log.codes.push(code),
            None => log.malformed += 1,
        }
        rest = &after[consumed..];
    }
    log
}

/// Walks the attributes of one start tag, returning the parsed `code` (if any) and how many bytes
/// of the tag were consumed. Values are quoted, so a `>` inside one does not end the tag.
fn scan_code_attribute(tag: &str) -> (Option<u32>, usize) {
    let bytes = tag.as_bytes();
    let mut i = 0;
    let mut code = None;
    loop {
        while i < bytes.len() && bytes[i].is_ascii_whitespace() {
            i += 1;
        }
        if i >= bytes.len() || bytes[i] == b'/' || bytes[i] == b'>' || bytes[i] == b'<' {
            return (code, i);
        }
        let name_start = i;
        while i < bytes.len() && !matches!(bytes[i], b'=' | b'/' | b'>' | b'<') {
            if bytes[i].is_ascii_whitespace() {
                break;
            }
            i += 1;
        }
        let name = &tag[name_start..i];
        while i < bytes.len() && bytes[i].is_ascii_whitespace() {
            i += 1;
        }
        if i >= bytes.len() || bytes[i] != b'=' {
            // Attribute without a value: not something e2fsck writes; stop at the junk.
            return (code, i);
        }
        i += 1;
        while i < bytes.len() && bytes[i].is_ascii_whitespace() {
            i += 1;
        }
        let Some(&quote) = bytes.get(i).filter(|&&q| q == b'"' || q == b'\'') else {
            return (code, i);
        };
        i += 1;
        let value_start = i;
        while i < bytes.len() && bytes[i] != quote {
            i += 1;
        }
        if i >= bytes.len() {
            // Truncated mid-value, e.g. the checker was killed while writing.
            return (code, i);
        }
        let value = &tag[value_start..i];
        i += 1;
        if name == "code" {
            code = parse_hex(value);
        }
    }
}

fn parse_hex(value: &str) -> Option<u32> {
    let digits = value
        .trim()
        .strip_prefix("0x")
        .or_else(|| value.trim().strip_prefix("0X"))?;
    u32::from_str_radix(digits, 16).ok()
}
