//! Resource-aware mode and the run-time estimate: how many cores are idle, whether to run
//! under `SCHED_IDLE`, and `--estimate`'s report.
//!
//! With `--nice`, ffsck uses only the idle cores (`cores - round(load)`, at least one) and puts
//! its threads under `SCHED_IDLE` at the lowest nice value, so a check started on a busy machine
//! takes what is left over instead of competing with the work already running. An explicit
//! `--threads` sets the thread count (`--nice` still lowers the priority). The mode is not
//! switched on by the load average alone (see `plan`).

use ffsck_check::Estimate;

/// How the check will use the machine.
#[derive(Clone, Copy, Debug)]
pub struct Plan {
    /// Worker threads to ask for (0 = one per core).
    pub threads: usize,
    pub cpus: usize,
    /// 1-minute load average, if readable.
    pub load: Option<f64>,
    /// Resource-aware mode is on (asked for, or the machine is fully loaded).
    pub nice: bool,
    /// `SCHED_IDLE` was set for the process's threads.
    pub sched_idle: bool,
}

pub fn cpus() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

/// The 1-minute load average from `/proc/loadavg`.
pub fn load_average() -> Option<f64> {
    let s = std::fs::read_to_string("/proc/loadavg").ok()?;
    let v: f64 = s.split_whitespace().next()?.parse().ok()?;
    v.is_finite().then_some(v.max(0.0))
}

/// Decide threads and scheduling. `requested` is `--threads`; `nice` is `--nice`.
pub fn plan(requested: Option<usize>, nice: bool) -> Plan {
    let cpus = cpus();
    let load = load_average();
    // Only on request: on shared virtual machines the load average counts other tenants'
    // runnable tasks and stays high while the CPUs are idle, and an automatic switch to one
    // SCHED_IDLE thread there made a 0.08 s check take 8 s.
    let threads = match (requested, nice) {
        (Some(t), _) => t,
        (None, true) => {
            let used = load.unwrap_or(0.0).round() as usize;
            cpus.saturating_sub(used).max(1)
        }
        (None, false) => 0,
    };
    Plan {
        threads,
        cpus,
        load,
        nice,
        sched_idle: false,
    }
}

/// Put the calling thread (and every thread it creates later, which inherit its policy)
/// under `SCHED_IDLE` with the lowest priority. Returns whether the scheduler accepted it.
pub fn enter_idle() -> bool {
    #[cfg(target_os = "linux")]
    {
        let param = libc::sched_param { sched_priority: 0 };
        // SAFETY: plain system calls on the calling thread with a valid, initialised argument.
        let idle = unsafe { libc::sched_setscheduler(0, libc::SCHED_IDLE, &param) } == 0;
        // SAFETY: as above; a failure only leaves the nice value unchanged.
        unsafe {
            libc::setpriority(libc::PRIO_PROCESS, 0, 19);
        }
        idle
    }
    #[cfg(not(target_os = "linux"))]
    {
        false
    }
}

/// The `-v` line describing resource-aware mode.
pub fn describe(p: &Plan) -> String {
    let load = p.load.map_or("unknown".to_string(), |l| format!("{l:.2}"));
    format!(
        "Resource-aware mode: {} of {} cores (load average {load}), {}",
        if p.threads == 0 { p.cpus } else { p.threads },
        p.cpus,
        if p.sched_idle {
            "threads under SCHED_IDLE"
        } else {
            "SCHED_IDLE refused, nice 19"
        }
    )
}

fn human_bytes(b: u64) -> String {
    let b = b as f64;
    if b >= (1u64 << 30) as f64 {
        format!("{:.2} GiB", b / (1u64 << 30) as f64)
    } else {
        format!("{:.1} MiB", b / (1u64 << 20) as f64)
    }
}

/// Decimals that show at least three significant digits of `secs` (and at least
/// milliseconds), so the bench can compare even a tiny image's estimate with its run.
fn secs_decimals(secs: f64) -> usize {
    if secs > 0.0 && secs.is_finite() {
        (2.0 - secs.log10().floor()).clamp(3.0, 6.0) as usize
    } else {
        3
    }
}

/// `--estimate`'s report.
pub fn render_estimate(dev: &str, e: &Estimate) -> String {
    let mut s = format!(
        "{dev}: estimated time of ffsck -fn: {:.*} s; metadata to read: {} ({} bytes)\n",
        secs_decimals(e.total_secs()),
        e.total_secs(),
        human_bytes(e.metadata_bytes),
        e.metadata_bytes
    );
    let names = [
        "open",
        "inodes",
        "directories",
        "connectivity",
        "reference counts",
        "bitmaps",
    ];
    for (i, (secs, name)) in e.pass_secs.iter().zip(names).enumerate() {
        s += &format!("  pass {i} ({name}): {secs:.3} s\n");
    }
    s += &format!(
        "  model: {} inodes in use, {} directories, ~{} directory blocks, ~{} tree blocks\n",
        e.inodes_used, e.dirs, e.dir_blocks, e.tree_blocks
    );
    s += &format!(
        "  CPU: {} threads worth {:.2} reference cores now ({:.1} M inodes/s in calibration)\n",
        e.threads,
        e.parallelism,
        e.calibration_rate / 1e6
    );
    s += &format!(
        "  sample: {} inode slots, {} directories; read rate {:.0} MB/s, {:.1} us per block read \
         ({})\n",
        e.sampled_inodes,
        e.sampled_dirs,
        e.read_rate / 1e6,
        e.read_latency * 1e6,
        if e.from_device {
            "from the device, hinted in batches"
        } else {
            "from the page cache"
        }
    );
    s
}

#[cfg(test)]
mod tests {
    use super::secs_decimals;

    #[test]
    fn estimates_keep_three_significant_digits() {
        assert_eq!(format!("{:.*}", secs_decimals(0.245), 0.245), "0.245");
        assert_eq!(format!("{:.*}", secs_decimals(12.5), 12.5), "12.500");
        assert_eq!(
            format!("{:.*}", secs_decimals(0.0004321), 0.0004321),
            "0.000432"
        );
        assert_eq!(format!("{:.*}", secs_decimals(1e-9), 1e-9), "0.000000");
        assert_eq!(secs_decimals(0.0), 3);
        assert_eq!(secs_decimals(f64::NAN), 3);
    }
}
