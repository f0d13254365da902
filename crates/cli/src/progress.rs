//! Progress reporting for `-C fd`: e2fsck's "pass current max device" lines on a descriptor,
//! or (for fd 0) a terminal bar with an ETA. Runs on its own thread, polling the engine's
//! atomic counters, so the passes never block on output. The bar weights each pass by the
//! run-time model's prediction for it (`ffsck_check::estimate`) when one is available.

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
    /// `model`: predicted seconds per pass (index = pass), for the bar's weights and ETA.
    pub fn start(fd: i32, prog: Arc<Progress>, dev: String, model: Option<[f64; 6]>) -> Self {
        let stop = Arc::new(AtomicBool::new(false));
        let s2 = stop.clone();
        let handle = std::thread::spawn(move || {
            if fd == 0 {
                bar_loop(&prog, &s2, model);
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

/// Usual shares of the run per pass, when no model is available.
const DEFAULT_WEIGHTS: [f64; 6] = [0.0, 0.60, 0.25, 0.02, 0.03, 0.10];

fn bar_loop(prog: &Progress, stop: &AtomicBool, model: Option<[f64; 6]>) {
    let bar = indicatif::ProgressBar::new(1000);
    bar.set_style(
        indicatif::ProgressStyle::with_template("Pass {prefix} [{bar:40}] {percent:>3}% ETA {msg}")
            .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
    );
    // Predicted seconds per pass; without a model, the fixed shares of a 1 s run.
    let secs = model
        .filter(|m| m.iter().all(|x| x.is_finite() && *x >= 0.0) && m.iter().sum::<f64>() > 0.0)
        .unwrap_or(DEFAULT_WEIGHTS);
    let total: f64 = secs.iter().sum();
    let start = std::time::Instant::now();
    while !stop.load(Ordering::Relaxed) {
        let (pass, done, count) = prog.snapshot();
        let p = pass.min(5) as usize;
        let frac = if count > 0 {
            (done as f64 / count as f64).min(1.0)
        } else {
            0.0
        };
        // Model seconds covered so far, and the remaining ones scaled by how fast the run is
        // going against the model (trusting the model alone at the start).
        let covered = secs[..p].iter().sum::<f64>() + secs[p] * frac;
        let elapsed = start.elapsed().as_secs_f64();
        let slack = 0.1 * total;
        let speed = (elapsed + slack) / (covered + slack);
        let eta = ((total - covered).max(0.0) * speed).round() as u64;
        bar.set_prefix(pass.to_string());
        bar.set_position(((covered / total).min(1.0) * 1000.0) as u64);
        bar.set_message(format!("{}:{:02}", eta / 60, eta % 60));
        std::thread::sleep(Duration::from_millis(100));
    }
    bar.finish_and_clear();
}
