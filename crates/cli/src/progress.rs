//! Progress reporting for `-C fd`: e2fsck's "pass current max device" lines on a descriptor,
//! or (for fd 0) a terminal bar with an ETA, which gives way to everything printed
//! (`screen.rs`); SIGUSR1 turns it on and SIGUSR2 off, as in
//! e2fsck. Runs on its own thread, polling the engine's atomic counters, so the passes never
//! block on output. The bar weights each pass by the
//! run-time model's prediction for it (`ffsck_check::estimate`) when one is available.

use ffsck_check::Progress;
use std::fs::File;
use std::io::Write;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

/// Whether progress is shown: set by `-C` at the start, and by SIGUSR1 (on) and SIGUSR2 (off)
/// at any time, as e2fsck's signals do (util-linux `fsck -C` hands the bar from one checker to
/// the next with them).
static ON: AtomicBool = AtomicBool::new(false);

/// Turn progress on or off (the signal thread's SIGUSR1 and SIGUSR2).
pub fn set_on(on: bool) {
    ON.store(on, Ordering::Relaxed);
}

/// Where progress goes when it is on.
pub enum Output {
    /// A bar on the terminal (`-C 0`, or SIGUSR1 without `-C`).
    Bar,
    /// e2fsck's "pass current max device" lines on this (duplicated) descriptor.
    Lines(File),
}

/// The progress settings from `-C`: `None` shows nothing until SIGUSR1 (then a bar); `0` a
/// bar; `N` lines on descriptor N; `-N` nothing until SIGUSR1, then lines on descriptor N
/// (util-linux fsck passes this to every checker but the first). The descriptor is checked
/// as e2fsck does; on error the message is printed and `Err` carries the exit code.
pub fn configure(arg: Option<i32>) -> Result<Output, i32> {
    let Some(n) = arg else {
        return Ok(Output::Bar);
    };
    if n == 0 {
        set_on(true);
        return Ok(Output::Bar);
    }
    let fd = n.checked_abs().unwrap_or(-1);
    match dup_fd(fd) {
        Ok(f) => {
            if n > 0 {
                set_on(true);
            }
            Ok(Output::Lines(f))
        }
        Err(e) => {
            let why = e.to_string();
            let why = why.split(" (os error ").next().unwrap_or_default();
            eprintln!("Error validating file descriptor {fd}: {why}");
            eprintln!("ffsck: Invalid completion information file descriptor");
            crate::report::error(format!(
                "invalid completion information file descriptor {fd}: {why}"
            ));
            Err(ffsck_check::exit::ERROR)
        }
    }
}

/// A close-on-exec duplicate of the caller's descriptor `fd`: ours to write and to close,
/// leaving theirs open (fsck front ends keep reading it after we exit).
fn dup_fd(fd: i32) -> std::io::Result<File> {
    use std::os::fd::FromRawFd;
    if fd < 0 {
        return Err(std::io::Error::from_raw_os_error(libc::EBADF));
    }
    // SAFETY: F_DUPFD_CLOEXEC only reads `fd` (failing with EBADF if it is not open) and
    // returns a new descriptor, which nothing else owns.
    let new = unsafe { libc::fcntl(fd, libc::F_DUPFD_CLOEXEC, 3) };
    if new < 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: `new` was just created by fcntl and is owned by nothing else.
    Ok(unsafe { File::from_raw_fd(new) })
}

pub struct Ticker {
    stop: Arc<AtomicBool>,
    handle: Option<JoinHandle<()>>,
}

impl Ticker {
    /// Follow the engine's counters on a thread, drawing to `out` whenever progress is on.
    /// `model`: predicted seconds per pass (index = pass), for the bar's weights and ETA.
    pub fn start(out: Output, prog: Arc<Progress>, dev: String, model: Option<[f64; 6]>) -> Self {
        let stop = Arc::new(AtomicBool::new(false));
        let s2 = stop.clone();
        let work: Box<dyn FnOnce() + Send> = match out {
            Output::Bar => {
                let bar = Bar::new(model);
                if ON.load(Ordering::Relaxed) {
                    // On the terminal from the start, before anything the check prints.
                    bar.draw(&prog);
                }
                Box::new(move || bar_loop(&prog, &s2, bar))
            }
            Output::Lines(f) => Box::new(move || lines_loop(f, &prog, &s2, &dev)),
        };
        let handle = std::thread::Builder::new()
            .name("ffsck-progress".into())
            .spawn(work)
            .ok();
        Ticker { stop, handle }
    }
    pub fn stop(mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(h) = self.handle.take() {
            // Woken from its wait: joining a thread asleep for its tick kept every check
            // alive up to 100 ms longer than its work (a 10 ms check took 100 ms).
            h.thread().unpark();
            let _ = h.join();
        }
    }
}

/// The time between two draws, cut short by [`Ticker::stop`] (a spurious wake-up only draws
/// early).
fn tick_wait() {
    std::thread::park_timeout(Duration::from_millis(100));
}

fn lines_loop(mut f: File, prog: &Progress, stop: &AtomicBool, dev: &str) {
    // From the start of the check: passes before the first sample are shown too.
    let mut lines = Lines { last: Some((0, 0)) };
    loop {
        let stopping = stop.load(Ordering::Relaxed);
        if ON.load(Ordering::Relaxed) {
            lines.tick(&mut f, prog, dev);
            if stopping {
                lines.finish(&mut f, prog, dev);
            }
        } else {
            // Off: the next time it is turned on, the current position is written at once.
            lines = Lines::default();
        }
        if stopping {
            break;
        }
        tick_wait();
    }
    let _ = f.flush();
}

/// e2fsck's `-C fd` lines ("pass done total device") from samples of the counters: a pass
/// that ended between two samples is shown reaching its total, and one that started and
/// ended between them is shown whole, so every pass appears and reaches its maximum.
#[derive(Default)]
struct Lines {
    /// The pass and count last written.
    last: Option<(u64, u64)>,
}

impl Lines {
    fn tick(&mut self, f: &mut File, prog: &Progress, dev: &str) {
        let (pass, done, total) = prog.snapshot();
        if pass == 0 {
            return;
        }
        if let Some((lp, ld)) = self.last {
            if pass != lp {
                let lt = prog.total_of(lp);
                if ld != lt {
                    let _ = writeln!(f, "{lp} {lt} {lt} {dev}");
                }
                // Forward within a check, or a repair's next round from pass 1 again.
                let first = if pass > lp { lp + 1 } else { 1 };
                for p in first..pass {
                    let t = prog.total_of(p);
                    let _ = writeln!(f, "{p} 0 {t} {dev}");
                    let _ = writeln!(f, "{p} {t} {t} {dev}");
                }
                // A pass starts at 0, as e2fsck's lines do, even when it was under way at
                // the first sample.
                if done != 0 {
                    let _ = writeln!(f, "{pass} 0 {total} {dev}");
                }
            }
        }
        if self.last != Some((pass, done)) {
            let _ = writeln!(f, "{pass} {done} {total} {dev}");
            self.last = Some((pass, done));
        }
    }

    /// The check is over: the pass under way ended.
    fn finish(&mut self, f: &mut File, prog: &Progress, dev: &str) {
        if let Some((lp, ld)) = self.last {
            let lt = prog.total_of(lp);
            if ld != lt {
                let _ = writeln!(f, "{lp} {lt} {lt} {dev}");
                self.last = Some((lp, lt));
            }
        }
    }
}

/// Usual shares of the run per pass, when no model is available.
const DEFAULT_WEIGHTS: [f64; 6] = [0.0, 0.60, 0.25, 0.02, 0.03, 0.10];

/// What the bar shows: the share of the run done and the time left, weighing each pass by its
/// predicted seconds.
struct Bar {
    /// Predicted seconds per pass; without a model, the fixed shares of a 1 s run.
    secs: [f64; 6],
    total: f64,
    start: std::time::Instant,
}

impl Bar {
    fn new(model: Option<[f64; 6]>) -> Bar {
        let secs = model
            .filter(|m| m.iter().all(|x| x.is_finite() && *x >= 0.0) && m.iter().sum::<f64>() > 0.0)
            .unwrap_or(DEFAULT_WEIGHTS);
        Bar {
            secs,
            total: secs.iter().sum(),
            start: std::time::Instant::now(),
        }
    }

    /// Draw the bar at the counters' position (unless the terminal is in use, see
    /// `screen.rs`).
    fn draw(&self, prog: &Progress) {
        let (pass, done, count) = prog.snapshot();
        let p = pass.min(5) as usize;
        let frac = if count > 0 {
            (done as f64 / count as f64).min(1.0)
        } else {
            0.0
        };
        // Model seconds covered so far, and the remaining ones scaled by how fast the run is
        // going against the model (trusting the model alone at the start).
        let (secs, total) = (&self.secs, self.total);
        let covered = secs[..p].iter().sum::<f64>() + secs[p] * frac;
        let elapsed = self.start.elapsed().as_secs_f64();
        let slack = 0.1 * total;
        let speed = (elapsed + slack) / (covered + slack);
        let eta = ((total - covered).max(0.0) * speed).round() as u64;
        crate::screen::draw_bar(new_bar, |bar| {
            bar.set_prefix(pass.to_string());
            bar.set_position(((covered / total).min(1.0) * 1000.0) as u64);
            bar.set_message(format!("{}:{:02}", eta / 60, eta % 60));
        });
    }
}

fn bar_loop(prog: &Progress, stop: &AtomicBool, bar: Bar) {
    while !stop.load(Ordering::Relaxed) {
        if ON.load(Ordering::Relaxed) {
            bar.draw(prog);
        } else {
            // Off (SIGUSR2): the bar is cleared from the terminal.
            crate::screen::clear_bar();
        }
        tick_wait();
    }
    crate::screen::clear_bar();
}

fn new_bar() -> indicatif::ProgressBar {
    let bar = indicatif::ProgressBar::new(1000);
    bar.set_style(
        indicatif::ProgressStyle::with_template("Pass {prefix} [{bar:40}] {percent:>3}% ETA {msg}")
            .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
    );
    bar
}
