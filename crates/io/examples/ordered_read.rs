//! Reads a list of byte ranges from a device through the ordered stream with N consumer
//! threads, the way a pass would: `ordered_read DEVICE RANGES_FILE THREADS`, where each line
//! of RANGES_FILE is `OFFSET LEN` in bytes. Prints the ranges, bytes and a checksum of what
//! the consumers saw; used with `ffsck-lab hdd --command` to see the I/O order it gives a disk.

use ffsck_io::stream::{self, ReadPlan, StreamConfig};
use ffsck_io::FileDevice;
use std::sync::atomic::{AtomicU64, Ordering};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().collect();
    let [_, dev, ranges, threads] = &args[..] else {
        return Err("usage: ordered_read DEVICE RANGES_FILE THREADS".into());
    };
    let threads: usize = threads.parse()?;
    let dev = FileDevice::open_read_only(std::path::Path::new(dev))?;
    let mut plan = ReadPlan::new();
    for line in std::fs::read_to_string(ranges)?.lines() {
        let mut it = line.split_whitespace().map(str::parse::<u64>);
        if let (Some(Ok(off)), Some(Ok(len))) = (it.next(), it.next()) {
            plan.add(off, len);
        }
    }
    let (bytes, sum, short) = (AtomicU64::new(0), AtomicU64::new(0), AtomicU64::new(0));
    stream::run(&dev, &plan, &StreamConfig::default(), |s| {
        std::thread::scope(|t| {
            for _ in 0..threads {
                t.spawn(|| {
                    while let Some(p) = s.recv() {
                        bytes.fetch_add(p.len() as u64, Ordering::Relaxed);
                        let x = p.iter().fold(0u64, |a, &b| a.rotate_left(5) ^ u64::from(b));
                        sum.fetch_xor(x, Ordering::Relaxed);
                        short.fetch_add(u64::from(!p.is_full()), Ordering::Relaxed);
                    }
                });
            }
        })
    });
    println!(
        "{} ranges, {} bytes, checksum {:016x}, {} not full",
        plan.len(),
        bytes.into_inner(),
        sum.into_inner(),
        short.into_inner()
    );
    Ok(())
}
