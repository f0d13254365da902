//! Harness pieces shared by the property tests and the in-process fuzzer (feature `testing`).
//!
//! Both run the check and the repair on in-memory images and hold them to the same promises:
//! the input is never written, every message formats, and the repair's staged changes fit
//! the device. What they share lives here, once.

use std::sync::Arc;

use ffsck_io::overlay::Extent;
use ffsck_io::{Device, MemDevice};

use crate::{check, CheckOptions, Finding, Problem, Reporter};

/// An in-memory input device that reads and refuses every write with a panic, so a check or
/// repair that writes its input fails the test (or is a crash to the fuzzer).
pub struct WriteTrap(MemDevice);

impl WriteTrap {
    /// The trap over `image`, as the device the check takes.
    pub fn device(image: Vec<u8>) -> Arc<dyn Device> {
        Arc::new(WriteTrap(MemDevice::new(image)))
    }
}

impl Device for WriteTrap {
    fn size(&self) -> u64 {
        self.0.size()
    }
    fn read_at(&self, buf: &mut [u8], offset: u64) -> ffsck_io::Result<()> {
        self.0.read_at(buf, offset)
    }
    fn write_at(&self, buf: &[u8], offset: u64) -> ffsck_io::Result<()> {
        panic!("wrote {} bytes at {offset} to the input device", buf.len());
    }
    fn flush(&self) -> ffsck_io::Result<()> {
        Ok(())
    }
    fn bytes_read(&self) -> u64 {
        self.0.bytes_read()
    }
}

/// A reporter that formats every finding's message, as the CLI does, and keeps nothing.
pub struct FormatAll;

impl Reporter for FormatAll {
    fn finding(&mut self, f: &Finding) {
        std::hint::black_box(f.message());
    }
}

/// What a read-only check reports, in order, as the CLI prints it: each finding's problem and
/// message, then the fatal message if the check stopped.
pub fn findings(dev: &Arc<dyn Device>, opts: &CheckOptions) -> Vec<(Option<Problem>, String)> {
    let out = check(dev.clone(), opts, &mut FormatAll);
    let mut v: Vec<_> = out
        .findings
        .iter()
        .map(|f| (Some(f.problem), f.message()))
        .collect();
    v.extend(out.fatal.map(|m| (None, m)));
    v
}

/// `image` with a repair's staged changes applied, or the first change that reaches past
/// the image's end.
pub fn apply(mut image: Vec<u8>, changes: &[Extent]) -> Result<Vec<u8>, String> {
    for e in changes {
        let start = usize::try_from(e.offset).map_err(|_| format!("change at {}", e.offset))?;
        let end = start.saturating_add(e.data.len());
        if end > image.len() {
            return Err(format!("a change past the device's end: {start}..{end}"));
        }
        image[start..end].copy_from_slice(&e.data);
    }
    Ok(image)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn apply_writes_changes_and_refuses_one_past_the_end() {
        let change = |offset, data: &[u8]| Extent {
            offset,
            data: data.to_vec(),
        };
        let img = apply(vec![0; 8], &[change(2, b"ab"), change(6, b"z")]).unwrap();
        assert_eq!(img, b"\0\0ab\0\0z\0");
        assert!(apply(vec![0; 8], &[change(7, b"ab")]).is_err());
    }

    #[test]
    #[should_panic(expected = "to the input device")]
    fn the_trap_panics_on_a_write() {
        let _ = WriteTrap::device(vec![0; 512]).write_at(&[1], 0);
    }
}
