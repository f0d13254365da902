//! Runs one external program (ffsck, e2fsck, mke2fs…) with an optional wall-clock limit and
//! collects its exit status and resource usage (wall time, user/sys CPU, peak RSS).
//!
//! `std::process::Child::wait` throws the kernel's `rusage` away, so the child is reaped with
//! `wait4` instead. Two e2fsck 1.47.0 `-fn` runs in the corpus never terminate, so every run can
//! carry a deadline enforced by a watchdog thread.
//!
//! Peak RSS needs care: on Linux, `exec` folds the high-water mark of the forked copy of the
//! parent into the child's `ru_maxrss`, so a command started straight from a lab that has grown
//! to hundreds of MiB would report at least that much. [`run_measured`] therefore goes through
//! a shim, `ffsck-lab __measure --report FILE -- CMD…`: a freshly exec'd, still tiny lab
//! process that starts the command, reaps it with `wait4` and writes the command's own rusage
//! to FILE. Only the shim inherits the lab's floor; the command inherits the shim's.

use std::io;
use std::os::unix::process::CommandExt;
use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Condvar, Mutex};
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use serde::Serialize;

/// How the child ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Exit {
    /// Normal exit with this status code.
    Code(i32),
    /// Killed by this signal (including our own SIGKILL on timeout).
    Signal(i32),
}

/// Everything measured about one run.
#[derive(Debug, Clone, Serialize)]
pub struct Outcome {
    pub exit: Exit,
    /// True when the watchdog had to kill the child.
    pub timed_out: bool,
    pub wall_s: f64,
    pub user_s: f64,
    pub sys_s: f64,
    /// Peak resident set size; Linux reports `ru_maxrss` in KiB.
    pub max_rss_kib: u64,
}

impl Outcome {
    /// The exit code, or `None` if the child was killed or timed out.
    pub fn code(&self) -> Option<i32> {
        match self.exit {
            Exit::Code(c) if !self.timed_out => Some(c),
            _ => None,
        }
    }

    /// The terminating signal, unless it was our own timeout kill.
    pub fn signal(&self) -> Option<i32> {
        match self.exit {
            Exit::Signal(s) if !self.timed_out => Some(s),
            _ => None,
        }
    }

    /// Short human form for tables: `4`, `timeout`, `signal 11`.
    pub fn describe(&self) -> String {
        if self.timed_out {
            return "timeout".to_string();
        }
        match self.exit {
            Exit::Code(c) => c.to_string(),
            Exit::Signal(s) => format!("signal {s}"),
        }
    }
}

/// Spawns `cmd` and waits for it, killing it (and its whole process group) after `timeout`.
///
/// The caller sets up arguments, environment and stdio; stdout/stderr should go to files or
/// `/dev/null`, never to pipes nobody drains, or a chatty child would block forever.
pub fn run(cmd: &mut Command, timeout: Option<Duration>) -> Result<Outcome> {
    run_inner(cmd, timeout, None)
}

/// How often [`run_watched`] asks whether the child has gone over its bounds.
const WATCH_EVERY: Duration = Duration::from_millis(50);

/// Like [`run`], but the child is also killed (and the run counts as timed out) as soon as
/// `over` says so, asked every 50 ms: a bound on what the child produces, such as the bytes
/// `debugfs rdump` writes, that no rlimit expresses.
pub fn run_watched(
    cmd: &mut Command,
    timeout: Option<Duration>,
    over: &(dyn Fn() -> bool + Sync),
) -> Result<Outcome> {
    run_inner(cmd, timeout, Some(over))
}

fn run_inner(
    cmd: &mut Command,
    timeout: Option<Duration>,
    over: Option<&(dyn Fn() -> bool + Sync)>,
) -> Result<Outcome> {
    // Own process group: a wrapper script's grandchildren die with it on timeout.
    cmd.process_group(0);
    // SAFETY: the closure runs between fork and exec and only calls prctl, which is
    // async-signal-safe and touches no parent memory.
    unsafe {
        cmd.pre_exec(|| {
            // If the lab is interrupted, do not leave a looping e2fsck behind.
            if libc::prctl(
                libc::PR_SET_PDEATHSIG,
                libc::SIGKILL as libc::c_ulong,
                0,
                0,
                0,
            ) == -1
            {
                return Err(io::Error::last_os_error());
            }
            Ok(())
        });
    }

    let start = Instant::now();
    let child = cmd
        .spawn()
        .with_context(|| format!("cannot start {}", cmd.get_program().to_string_lossy()))?;
    let pid = child.id() as libc::pid_t;
    // `child` is never waited on through std; dropping it neither kills nor reaps.
    drop(child);

    // `done` is set only while the child is still unreaped, and the watchdog kills only while
    // `done` is false under the same lock, so it can never signal a recycled pid.
    let done = Mutex::new(false);
    let wake = Condvar::new();
    let killed = AtomicBool::new(false);
    // Borrowed by the `move` closure below, which must own `limit` and `pid`.
    let (done, wake, killed) = (&done, &wake, &killed);

    let waited = std::thread::scope(|scope| {
        if timeout.is_some() || over.is_some() {
            scope.spawn(move || {
                let deadline = timeout.map(|limit| start + limit);
                let mut guard = done.lock().unwrap_or_else(|e| e.into_inner());
                loop {
                    let left = deadline.map(|d| d.saturating_duration_since(Instant::now()));
                    let step = match (left, over) {
                        (Some(left), Some(_)) => left.min(WATCH_EVERY),
                        (Some(left), None) => left,
                        (None, _) => WATCH_EVERY,
                    };
                    guard = wake
                        .wait_timeout_while(guard, step, |finished| !*finished)
                        .unwrap_or_else(|e| e.into_inner())
                        .0;
                    if *guard {
                        break;
                    }
                    let late = deadline.is_some_and(|d| Instant::now() >= d);
                    if late || over.is_some_and(|over| over()) {
                        killed.store(true, Ordering::SeqCst);
                        // SAFETY: plain syscall; the negative pid addresses the child's group.
                        unsafe { libc::kill(-pid, libc::SIGKILL) };
                        break;
                    }
                }
            });
        }
        let waited = wait_exited_without_reaping(pid);
        let wall = start.elapsed();
        *done.lock().unwrap_or_else(|e| e.into_inner()) = true;
        wake.notify_all();
        waited.map(|()| wall)
    });
    // Reap even if waitid failed, so no zombie is left; its own error takes precedence.
    let reaped = reap(pid);
    let wall = waited.context("waitid on child")?;
    let (status, usage) = reaped?;

    let exit = if libc::WIFEXITED(status) {
        Exit::Code(libc::WEXITSTATUS(status))
    } else if libc::WIFSIGNALED(status) {
        Exit::Signal(libc::WTERMSIG(status))
    } else {
        // wait4 without WUNTRACED/WCONTINUED only reports terminations; keep a value anyway.
        Exit::Signal(0)
    };
    // A child that exited on its own just before the deadline is not a timeout.
    let timed_out = killed.load(Ordering::SeqCst) && exit == Exit::Signal(libc::SIGKILL);

    Ok(Outcome {
        exit,
        timed_out,
        wall_s: wall.as_secs_f64(),
        user_s: timeval_secs(&usage.ru_utime),
        sys_s: timeval_secs(&usage.ru_stime),
        max_rss_kib: u64::try_from(usage.ru_maxrss).unwrap_or(0),
    })
}

/// Argument that makes `ffsck-lab` act as the measuring shim (checked before clap parses).
pub const SHIM_ARG: &str = "__measure";

/// Environment variable naming the `ffsck-lab` binary to use as the shim.
pub const SHIM_ENV: &str = "FFSCK_LAB_SHIM";

/// The `ffsck-lab` binary that can serve as the shim: `$FFSCK_LAB_SHIM`, the running program
/// if it is `ffsck-lab`, or `ffsck-lab` beside it or one directory up (test binaries live in
/// `target/<profile>/deps`).
pub fn shim_binary() -> Option<std::path::PathBuf> {
    if let Some(p) = std::env::var_os(SHIM_ENV) {
        let p = std::path::PathBuf::from(p);
        return p.is_file().then_some(p);
    }
    let exe = std::env::current_exe().ok()?;
    if exe.file_name().is_some_and(|n| n == "ffsck-lab") {
        return Some(exe);
    }
    let dir = exe.parent()?;
    [dir.join("ffsck-lab"), dir.parent()?.join("ffsck-lab")]
        .into_iter()
        .find(|p| p.is_file())
}

/// Like [`run`] with stdin from /dev/null and stdout and stderr both going to `log` (or
/// /dev/null), but through the measuring shim when one is found, so the peak RSS is the
/// command's own and not the lab's. The flag in the result says whether the shim's numbers
/// were used; without the shim (or when the run was killed) they are [`run`]'s.
pub fn run_measured(
    program: &std::path::Path,
    args: &[std::ffi::OsString],
    log: Option<&std::fs::File>,
    timeout: Option<Duration>,
) -> Result<(Outcome, bool)> {
    use std::process::Stdio;
    let out = || -> Result<Stdio> {
        Ok(match log {
            Some(f) => Stdio::from(f.try_clone()?),
            None => Stdio::null(),
        })
    };
    let Some(shim) = shim_binary() else {
        let mut cmd = Command::new(program);
        cmd.args(args)
            .stdin(Stdio::null())
            .stdout(out()?)
            .stderr(out()?);
        return Ok((run(&mut cmd, timeout)?, false));
    };
    let report = tempfile::Builder::new()
        .prefix("ffsck-lab-rusage-")
        .tempfile()
        .context("creating the rusage report file")?;
    let mut wrapped = Command::new(shim);
    wrapped
        .arg(SHIM_ARG)
        .arg("--report")
        .arg(report.path())
        .arg("--")
        .arg(program)
        .args(args)
        .stdin(Stdio::null())
        .stdout(out()?)
        .stderr(out()?);
    let outer = run(&mut wrapped, timeout)?;
    let text = std::fs::read_to_string(report.path()).unwrap_or_default();
    match parse_report(&text) {
        Some(inner) if !outer.timed_out => Ok((inner, true)),
        // Killed (timeout) or the shim failed before reporting: the outer numbers are all
        // there is, and they carry the lab's floor.
        _ => Ok((outer, false)),
    }
}

fn parse_report(text: &str) -> Option<Outcome> {
    let v: serde_json::Value = serde_json::from_str(text).ok()?;
    let exit = match (v.get("code")?.as_i64(), v.get("signal")?.as_i64()) {
        (Some(c), _) => Exit::Code(i32::try_from(c).ok()?),
        (None, Some(s)) => Exit::Signal(i32::try_from(s).ok()?),
        _ => return None,
    };
    Some(Outcome {
        exit,
        timed_out: false,
        wall_s: v.get("wall_s")?.as_f64()?,
        user_s: v.get("user_s")?.as_f64()?,
        sys_s: v.get("sys_s")?.as_f64()?,
        max_rss_kib: v.get("max_rss_kib")?.as_u64()?,
    })
}

/// The shim's `main`: `__measure --report FILE -- CMD [ARGS…]`. Runs CMD with the shim's own
/// stdio, writes CMD's exit and rusage to FILE as JSON, and exits as CMD did (same code, or
/// the same signal re-raised). Exit code 125 means the shim itself could not do its job.
pub fn shim_main(args: &[std::ffi::OsString]) -> i32 {
    let (report, cmd) = match args {
        [flag, report, dashdash, cmd @ ..]
            if flag == "--report" && dashdash == "--" && !cmd.is_empty() =>
        {
            (std::path::PathBuf::from(report), cmd)
        }
        _ => {
            eprintln!("usage: ffsck-lab {SHIM_ARG} --report FILE -- CMD [ARGS...]");
            return 125;
        }
    };
    let mut command = Command::new(&cmd[0]);
    command.args(&cmd[1..]);
    // SAFETY: only prctl between fork and exec, as in `run`.
    unsafe {
        command.pre_exec(|| {
            if libc::prctl(
                libc::PR_SET_PDEATHSIG,
                libc::SIGKILL as libc::c_ulong,
                0,
                0,
                0,
            ) == -1
            {
                return Err(io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let start = Instant::now();
    let child = match command.spawn() {
        Ok(c) => c,
        Err(e) => {
            eprintln!("ffsck-lab {SHIM_ARG}: cannot start {:?}: {e}", cmd[0]);
            return 125;
        }
    };
    let pid = child.id() as libc::pid_t;
    drop(child);
    let (status, usage) = match reap(pid) {
        Ok(x) => x,
        Err(e) => {
            eprintln!("ffsck-lab {SHIM_ARG}: {e:#}");
            return 125;
        }
    };
    let wall = start.elapsed().as_secs_f64();
    let (code, signal) = if libc::WIFEXITED(status) {
        (Some(libc::WEXITSTATUS(status)), None)
    } else if libc::WIFSIGNALED(status) {
        (None, Some(libc::WTERMSIG(status)))
    } else {
        (None, Some(0))
    };
    let json = serde_json::json!({
        "code": code,
        "signal": signal,
        "wall_s": wall,
        "user_s": timeval_secs(&usage.ru_utime),
        "sys_s": timeval_secs(&usage.ru_stime),
        "max_rss_kib": u64::try_from(usage.ru_maxrss).unwrap_or(0),
    });
    if std::fs::write(&report, json.to_string()).is_err() {
        return 125;
    }
    match (code, signal) {
        (Some(c), _) => c,
        (None, Some(s)) if s > 0 => {
            // SAFETY: resetting a disposition and raising a signal on ourselves.
            unsafe {
                libc::signal(s, libc::SIG_DFL);
                libc::raise(s);
            }
            128 + s
        }
        _ => 125,
    }
}

/// Blocks until `pid` has terminated but leaves it a zombie, so its pid stays reserved.
fn wait_exited_without_reaping(pid: libc::pid_t) -> io::Result<()> {
    loop {
        // SAFETY: siginfo_t is plain data; waitid fills it in.
        let mut info: libc::siginfo_t = unsafe { std::mem::zeroed() };
        // SAFETY: valid pointer to a local siginfo_t.
        let rc = unsafe {
            libc::waitid(
                libc::P_PID,
                pid as libc::id_t,
                &mut info,
                libc::WEXITED | libc::WNOWAIT,
            )
        };
        if rc == 0 {
            return Ok(());
        }
        let err = io::Error::last_os_error();
        if err.kind() != io::ErrorKind::Interrupted {
            return Err(err);
        }
    }
}

/// Reaps `pid`, returning its wait status and resource usage.
fn reap(pid: libc::pid_t) -> Result<(libc::c_int, libc::rusage)> {
    loop {
        let mut status: libc::c_int = 0;
        // SAFETY: rusage is plain data; wait4 fills it in.
        let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
        // SAFETY: valid pointers to locals.
        let rc = unsafe { libc::wait4(pid, &mut status, 0, &mut usage) };
        if rc == pid {
            return Ok((status, usage));
        }
        let err = io::Error::last_os_error();
        if err.kind() != io::ErrorKind::Interrupted {
            return Err(err).context("wait4 on child");
        }
    }
}

fn timeval_secs(tv: &libc::timeval) -> f64 {
    tv.tv_sec as f64 + tv.tv_usec as f64 / 1e6
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A child over its bounds is killed and reported as cut short; one within them is not.
    #[test]
    fn a_watched_child_is_killed_when_over() {
        let mut cmd = Command::new("sleep");
        cmd.arg("30");
        let run = run_watched(&mut cmd, Some(Duration::from_secs(60)), &|| true).unwrap();
        assert!(run.timed_out);
        assert_eq!(run.code(), None);
        let mut cmd = Command::new("true");
        let run = run_watched(&mut cmd, Some(Duration::from_secs(60)), &|| false).unwrap();
        assert!(!run.timed_out);
        assert_eq!(run.code(), Some(0));
    }
}
