//! Where the terminal's text goes: straight to stdout, line by line, or held in one section per
//! pass until the repair ends. A repair runs the check round after round, and a later round
//! finds problems of earlier passes (a reference count once a file is reconnected); held, each
//! is printed under its own pass header, as e2fsck's single run prints it.

use crate::screen::Stream;
use std::io::Write;
use std::sync::Mutex;

/// One pass's section: what goes to stdout and stderr, in order. Sections are kept in the
/// order of their rank: twice the pass number, and odd ranks for the passes between (7 is
/// pass 3A, between passes 3 and 4).
struct Section {
    rank: u8,
    parts: Vec<(Stream, Vec<u8>)>,
}

/// The held sections, reachable from the signal thread so an interrupted run still shows
/// what it had found (`release`).
static HELD: Mutex<Option<Held>> = Mutex::new(None);

/// Text held at most: past it, what is held goes out and the rest is written live (a
/// hostile image can make a repair report without end; its findings are then shown in the
/// order found rather than held without bound).
const MAX_HELD: usize = 64 << 20;

struct Held {
    sections: Vec<Section>,
    /// Bytes held so far.
    bytes: usize,
    /// The rank being written, and the rank of the pass under way.
    cur: u8,
    live: u8,
    /// Added to every rank: a restarted check's sections follow all of the run before.
    base: u8,
}

/// The ranks one run of the passes spans: a restart moves the base by this much.
const RUN_RANKS: u8 = 32;

impl Held {
    /// The index of the section of `rank`, made if there is none.
    fn section(&mut self, rank: u8) -> usize {
        match self.sections.binary_search_by_key(&rank, |s| s.rank) {
            Ok(i) => i,
            Err(i) => {
                self.sections.insert(
                    i,
                    Section {
                        rank,
                        parts: Vec::new(),
                    },
                );
                i
            }
        }
    }

    fn part(&mut self, s: Stream) -> &mut Vec<u8> {
        let i = self.section(self.cur);
        let parts = &mut self.sections[i].parts;
        if parts.last().is_none_or(|(last, _)| *last != s) {
            parts.push((s, Vec::new()));
        }
        let last = parts.len() - 1;
        &mut parts[last].1
    }
}

fn held() -> std::sync::MutexGuard<'static, Option<Held>> {
    HELD.lock().unwrap_or_else(|e| e.into_inner())
}

/// The terminal's output: live, or held by pass.
pub struct Sink {
    live: std::io::LineWriter<std::io::Stdout>,
    holding: bool,
}

impl Sink {
    pub fn new() -> Self {
        Sink {
            live: std::io::LineWriter::new(std::io::stdout()),
            holding: false,
        }
    }

    /// Hold the text from now on, starting with the section of pass 0.
    pub fn hold(&mut self) {
        let _ = self.live.flush();
        *held() = Some(Held {
            sections: Vec::new(),
            bytes: 0,
            cur: 0,
            live: 0,
            base: 0,
        });
        self.holding = true;
    }

    pub fn holding(&self) -> bool {
        self.holding
    }

    /// A pass starts: its section is written from now on.
    pub fn pass_start(&mut self, pass: u8) {
        if let Some(h) = held().as_mut() {
            h.live = h.base.saturating_add(pass.saturating_mul(2));
            h.cur = h.live;
            h.section(h.cur);
        }
    }

    /// Write next at the end of the section of `rank` (None: of the pass under way).
    /// `end_line`: a line left open is ended in the section left. Returns whether the
    /// section changed.
    pub fn select(&mut self, rank: Option<u8>, end_line: bool) -> bool {
        let mut g = held();
        let Some(h) = g.as_mut() else {
            return false;
        };
        let to = rank.map_or(h.live, |r| h.base.saturating_add(r));
        let changed = to != h.cur;
        if changed && end_line {
            h.part(Stream::Out).push(b'\n');
        }
        h.cur = to;
        changed
    }

    /// Put `header` at the start of the section of `rank`, once.
    pub fn header(&mut self, rank: u8, header: &str) {
        if let Some(h) = held().as_mut() {
            let i = h.section(h.base.saturating_add(rank));
            let parts = &mut h.sections[i].parts;
            let text = header.as_bytes();
            if !parts.first().is_some_and(|(_, b)| b.starts_with(text)) {
                parts.insert(0, (Stream::Out, text.to_vec()));
            }
        }
    }

    /// The check restarts from the beginning: what follows goes to sections after every
    /// section so far (ranks run on; past the last, a restarted run shares the last one's).
    pub fn restart(&mut self) {
        if let Some(h) = held().as_mut() {
            h.base = h.base.saturating_add(RUN_RANKS).min(u8::MAX - RUN_RANKS);
            h.live = h.base;
            h.cur = h.base;
        }
    }

    /// Text for stderr, in its place among the held text (or at once when live).
    pub fn err_line(&mut self, line: &str) {
        match held().as_mut() {
            Some(h) => {
                let p = h.part(Stream::Err);
                p.extend_from_slice(line.as_bytes());
                p.push(b'\n');
            }
            None => {
                let _ = self.flush();
                crate::screen::errln(line);
            }
        }
    }

    /// Print everything held, in pass order, and write live from now on.
    pub fn release(&mut self) {
        release();
        self.holding = false;
    }
}

/// What is held, in order, and no longer held.
fn take() -> Vec<(Stream, Vec<u8>)> {
    held()
        .take()
        .map(|h| h.sections.into_iter().flat_map(|s| s.parts).collect())
        .unwrap_or_default()
}

/// Print what is held (once) and stop holding.
pub fn release() {
    let parts = take();
    if parts.is_empty() {
        return;
    }
    let mut screen = crate::screen::take();
    for (stream, bytes) in parts {
        screen.write(stream, &bytes);
    }
}

impl Write for Sink {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let full = {
            let mut g = held();
            match g.as_mut() {
                Some(h) if h.bytes + buf.len() <= MAX_HELD => {
                    h.bytes += buf.len();
                    h.part(Stream::Out).extend_from_slice(buf);
                    return Ok(buf.len());
                }
                Some(_) => true,
                None => false,
            }
        };
        if full {
            release();
        }
        // The progress bar gives way (see `screen.rs`).
        let mut screen = crate::screen::take();
        let n = self.live.write(buf)?;
        screen.wrote(Stream::Out, &buf[..n]);
        Ok(n)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        let _screen = crate::screen::take();
        self.live.flush()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The held text is one for the process: tests that hold take turns.
    static TURN: Mutex<()> = Mutex::new(());

    /// A later round's findings land at the end of their own pass's section, pass 3A's
    /// between passes 3 and 4 with its header, and stderr text keeps its place.
    #[test]
    fn held_text_is_ordered_by_pass() {
        let _turn = TURN.lock().unwrap_or_else(|e| e.into_inner());
        let mut sink = Sink::new();
        sink.hold();
        for pass in 0..=5u8 {
            sink.pass_start(pass);
            let _ = writeln!(sink, "Pass {pass}");
        }
        // Round 1, pass 5: an open line that a later round's finding of pass 2 ends.
        let _ = write!(sink, "diffs:");
        assert!(sink.select(Some(4), true));
        let _ = writeln!(sink, "late 2");
        sink.err_line("warning 2");
        assert!(sink.select(Some(7), false));
        let _ = writeln!(sink, "in 3A");
        sink.header(7, "Pass 3A\n");
        sink.header(7, "Pass 3A\n");
        assert!(!sink.select(Some(7), false));
        assert!(sink.select(None, false));
        let _ = writeln!(sink, "end");
        let text: Vec<String> = take()
            .into_iter()
            .map(|(s, b)| {
                let t = String::from_utf8(b).unwrap();
                if s == Stream::Err {
                    format!("E:{t}")
                } else {
                    t
                }
            })
            .collect();
        assert_eq!(
            text.concat(),
            "Pass 0\nPass 1\nPass 2\nlate 2\nE:warning 2\nPass 3\nPass 3A\nin 3A\nPass 4\n\
             Pass 5\ndiffs:\nend\n"
        );
    }

    /// After a restart, the passes run again in sections after all of the first run's, and a
    /// later round's finding goes under the restarted run's pass, not the first run's.
    #[test]
    fn a_restart_starts_sections_after_the_first_run() {
        let _turn = TURN.lock().unwrap_or_else(|e| e.into_inner());
        let mut sink = Sink::new();
        sink.hold();
        for pass in 0..=2u8 {
            sink.pass_start(pass);
            let _ = writeln!(sink, "Pass {pass}");
        }
        let _ = writeln!(sink, "Restarting");
        sink.restart();
        for pass in 0..=5u8 {
            sink.pass_start(pass);
            let _ = writeln!(sink, "Pass {pass}");
        }
        sink.select(Some(2), false);
        let _ = writeln!(sink, "late 1");
        sink.header(7, "Pass 3A\n");
        let text: Vec<u8> = take().into_iter().flat_map(|(_, b)| b).collect();
        assert_eq!(
            String::from_utf8(text).unwrap(),
            "Pass 0\nPass 1\nPass 2\nRestarting\nPass 0\nPass 1\nlate 1\nPass 2\nPass 3\n\
             Pass 3A\nPass 4\nPass 5\n"
        );
    }
}
