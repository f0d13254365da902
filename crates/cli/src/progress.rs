//! Progress reporting for `-C fd`: e2fsck's "pass current max device" lines on a descriptor,
//! or (for fd 0) a terminal bar with an ETA. Runs on its own thread, polling the engine's
//! atomic counters, so the passes never block on output.

use ffsck_check::Progress;
use std::io::Write;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

pub struct Ticker {
    stop: Arc<AtomicBool>,
    handle: Option<JoinHandle<()>>,
}

impl Ticker {
    pub fn start(fd: i32, prog: Arc<Progress>, dev: String) -> Self {
        let stop = Arc::new(AtomicBool::new(false));
        let s2 = stop.clone();
        let handle = std::thread::spawn(move || {
            if fd == 0 {
                bar_loop(&prog, &s2);
            } else {
                lines_loop(fd, &prog, &s2, &dev);
            }
        });
        Ticker {
            stop,
            handle: Some(handle),
        }
    }
    pub fn stop(mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(h) = self.handle.take() {
            let _ = h.join();
        }
    }
}

fn lines_loop(fd: i32, prog: &Progress, stop: &AtomicBool, dev: &str) {
    // Reopen the caller's descriptor through /proc so that dropping our handle never closes
    // theirs (fsck front ends keep reading it after we exit).
    if fd < 0 {
        return;
    }
    let Ok(mut f) = std::fs::OpenOptions::new()
        .write(true)
        .open(format!("/proc/self/fd/{fd}"))
    else {
        return;
    };
    let mut last = (u64::MAX, u64::MAX);
    loop {
        let (pass, done, total) = prog.snapshot();
        if pass > 0 && (pass, done) != last {
            let _ = writeln!(f, "{pass} {done} {total} {dev}");
            last = (pass, done);
        }
        if stop.load(Ordering::Relaxed) {
            break;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    let _ = f.flush();
}

fn bar_loop(prog: &Progress, stop: &AtomicBool) {
    let bar = indicatif::ProgressBar::new(100);
    bar.set_style(
        indicatif::ProgressStyle::with_template("Pass {msg} [{bar:40}] {percent:>3}% ETA {eta}")
            .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
    );
    while !stop.load(Ordering::Relaxed) {
        let (pass, done, total) = prog.snapshot();
        // Weight passes by their usual share of the run so the ETA covers the whole check.
        let weights = [0.0, 0.60, 0.25, 0.02, 0.03, 0.10];
        let p = pass.min(5) as usize;
        let base: f64 = weights[..p].iter().sum();
        let frac = if total > 0 {
            done as f64 / total as f64
        } else {
            0.0
        };
        let overall = (base + weights[p] * frac).min(1.0);
        bar.set_message(pass.to_string());
        bar.set_position((overall * 100.0) as u64);
        std::thread::sleep(Duration::from_millis(100));
    }
    bar.finish_and_clear();
}
