//! Runs one external program (ffsck, e2fsck, mke2fs…) with an optional wall-clock limit and
//! collects its exit status and resource usage (wall time, user/sys CPU, peak RSS).
//!
//! `std::process::Child::wait` throws the kernel's `rusage` away, so the child is reaped with
//! `wait4` instead. Two e2fsck 1.47.0 `-fn` runs in the corpus never terminate, so every run can
//! carry a deadline enforced by a watchdog thread.

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
        if let Some(limit) = timeout {
            scope.spawn(move || {
                let guard = done.lock().unwrap_or_else(|e| e.into_inner());
                let (guard, _) = wake
                    .wait_timeout_while(guard, limit, |finished| !*finished)
                    .unwrap_or_else(|e| e.into_inner());
                if !*guard {
                    killed.store(true, Ordering::SeqCst);
                    // SAFETY: plain syscall; the negative pid addresses the child's group.
                    unsafe { libc::kill(-pid, libc::SIGKILL) };
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
