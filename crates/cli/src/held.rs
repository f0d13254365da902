//! Where the terminal's text goes: straight to stdout, line by line, or held in one section per
//! pass until the repair ends. A repair runs the check round after round, and a later round
//! finds problems of earlier passes (a reference count once a file is reconnected); held, each
//! is printed under its own pass header, as e2fsck's single run prints it.

use std::io::Write;
use std::sync::Mutex;

/// One pass's section: what goes to stdout and stderr, in order.
struct Section {
    pass: u8,
    parts: Vec<(Stream, Vec<u8>)>,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Stream {
    Out,
    Err,
}

/// The held sections, reachable from the signal thread so an interrupted run still shows
/// what it had found (`release`).
static HELD: Mutex<Option<Held>> = Mutex::new(None);

struct Held {
    sections: Vec<Section>,
    /// The section being written.
    cur: usize,
}

impl Held {
    fn part(&mut self, s: Stream) -> &mut Vec<u8> {
        let parts = &mut self.sections[self.cur].parts;
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
            sections: vec![Section {
                pass: 0,
                parts: Vec::new(),
            }],
            cur: 0,
        });
        self.holding = true;
    }

    pub fn holding(&self) -> bool {
        self.holding
    }

    /// A pass starts: a new section, written from now on.
    pub fn pass_start(&mut self, pass: u8) {
        if let Some(h) = held().as_mut() {
            h.sections.push(Section {
                pass,
                parts: Vec::new(),
            });
            h.cur = h.sections.len() - 1;
        }
    }

    /// Write a finding of `pass` next: at the end of that pass's section (a pass past the
    /// last section opens one of its own, without header). `end_line`: a line left open is
    /// ended in the section left. Returns whether the section changed.
    pub fn select(&mut self, pass: u8, end_line: bool) -> bool {
        let mut g = held();
        let Some(h) = g.as_mut() else {
            return false;
        };
        let at = match h.sections.iter().rposition(|s| s.pass <= pass) {
            Some(i) if i + 1 < h.sections.len() || h.sections[i].pass == pass => i,
            _ => {
                h.sections.push(Section {
                    pass,
                    parts: Vec::new(),
                });
                h.sections.len() - 1
            }
        };
        let changed = at != h.cur;
        if changed && end_line {
            h.part(Stream::Out).push(b'\n');
        }
        h.cur = at;
        changed
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
                let _ = self.live.flush();
                eprintln!("{line}");
            }
        }
    }

    /// Print everything held, in pass order, and write live from now on.
    pub fn release(&mut self) {
        release();
        self.holding = false;
    }
}

/// Print what is held (once) and stop holding.
pub fn release() {
    let Some(h) = held().take() else { return };
    let (mut out, mut err) = (std::io::stdout().lock(), std::io::stderr().lock());
    for s in h.sections {
        for (stream, bytes) in s.parts {
            let _ = match stream {
                Stream::Out => out.write_all(&bytes).and_then(|_| out.flush()),
                Stream::Err => err.write_all(&bytes).and_then(|_| err.flush()),
            };
        }
    }
}

impl Write for Sink {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        if let Some(h) = held().as_mut() {
            h.part(Stream::Out).extend_from_slice(buf);
            return Ok(buf.len());
        }
        self.live.write(buf)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.live.flush()
    }
}
