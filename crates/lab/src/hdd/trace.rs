//! Tracing a command's block requests (root): the image is attached read-only through a
//! direct-I/O loop device (so the page cache of the image file plays no part and every read
//! the checker makes reaches the loop device as a request), its read-ahead set, caches
//! dropped, and `block_rq_issue` / `block_rq_complete` for that device recorded in a private
//! tracefs instance while the command runs. The loop device is always detached.
//!
//! The device is not ours alone: another process that opens it while the command runs (a
//! test elsewhere on the machine still holding the loop device's name, a prober) adds its
//! reads to the trace, and one such run at the device's end costs seconds of modeled seeks.
//! So each request's issuer is recorded (tracefs `record-tgid`), and a request issued by a
//! user process other than the traced command is left out and counted
//! ([`Trace::foreign_requests`]); requests the kernel's workers issue are kept (they carry
//! the command's queued reads).

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use anyhow::{bail, Context, Result};
use serde::{Deserialize, Serialize};

use super::model::Req;

/// One traced run.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Trace {
    pub label: String,
    pub command: String,
    pub exit_code: Option<i32>,
    pub wall_s: f64,
    pub device_bytes: u64,
    pub read_ahead_kb: u64,
    /// Read requests in issue order.
    pub reqs: Vec<Req>,
    /// Write or other requests seen (a `-n` check should have none).
    pub other_requests: u64,
    /// Read requests another process issued on the device while the command ran: left out
    /// of `reqs` (see the module's documentation).
    #[serde(default)]
    pub foreign_requests: u64,
}

impl Trace {
    pub fn save(&self, path: &Path) -> Result<()> {
        fs::write(path, serde_json::to_vec(self)?).with_context(|| path.display().to_string())
    }
    /// A trace saved by [`Trace::save`], or (`.jsonl`) one written by the shared `hddsim trace`
    /// instrument, so both models can be run on the very same requests.
    pub fn load(path: &Path) -> Result<Trace> {
        let data = fs::read(path).with_context(|| path.display().to_string())?;
        if path.extension().is_some_and(|e| e == "jsonl") {
            return from_jsonl(path, &data);
        }
        Ok(serde_json::from_slice(&data)?)
    }
}

/// The `hddsim trace` format: a `{"meta": ...}` line, then one request a line with its
/// sector `s`, sectors `n`, kind `rw` and the positions `iq` / `cq` of its issue and
/// completion events.
fn from_jsonl(path: &Path, data: &[u8]) -> Result<Trace> {
    let text = std::str::from_utf8(data)?;
    let mut lines = text.lines();
    let meta: serde_json::Value = serde_json::from_str(lines.next().unwrap_or("{}"))?;
    let meta = &meta["meta"];
    let mut reqs = Vec::new();
    let mut other = 0;
    for line in lines.filter(|l| !l.trim().is_empty()) {
        let v: serde_json::Value = serde_json::from_str(line)?;
        let n = v["n"].as_u64().unwrap_or(0);
        if v["rw"].as_str() != Some("R") {
            other += u64::from(n > 0);
            continue;
        }
        reqs.push(Req {
            sector: v["s"].as_u64().context("s")?,
            sectors: n,
            issue: v["iq"].as_u64().context("iq")?,
            complete: v["cq"].as_u64().context("cq")?,
        });
    }
    reqs.sort_by_key(|r| r.issue);
    let label = path
        .file_name()
        .map(|n| n.to_string_lossy().trim_end_matches(".jsonl").to_string())
        .unwrap_or_default();
    Ok(Trace {
        label,
        command: meta["cmd_str"].as_str().unwrap_or("").to_string(),
        exit_code: meta["exit_code"]
            .as_i64()
            .and_then(|c| i32::try_from(c).ok()),
        wall_s: meta["wall_s"].as_f64().unwrap_or(0.0),
        device_bytes: meta["dev_sectors"].as_u64().unwrap_or(0) * 512,
        read_ahead_kb: meta["queue"]["read_ahead_kb"]
            .as_str()
            .and_then(|s| s.parse().ok())
            .unwrap_or(0),
        reqs,
        other_requests: other,
        foreign_requests: 0,
    })
}

/// A loop device, detached when dropped.
struct Loop {
    dev: String,
}

impl Loop {
    fn attach_direct(image: &Path) -> Result<Loop> {
        let out = Command::new("losetup")
            .args(["--find", "--show", "--read-only", "--direct-io=on"])
            .arg(image)
            .output()
            .context("losetup")?;
        if !out.status.success() {
            bail!("losetup: {}", String::from_utf8_lossy(&out.stderr).trim());
        }
        let lo = Loop {
            dev: String::from_utf8_lossy(&out.stdout).trim().to_string(),
        };
        let dio = fs::read_to_string(lo.sys("loop/dio")).unwrap_or_default();
        if dio.trim() != "1" {
            bail!("{} did not get direct I/O (is the image on tmpfs?)", lo.dev);
        }
        Ok(lo)
    }
    fn name(&self) -> &str {
        self.dev.trim_start_matches("/dev/")
    }
    fn sys(&self, rel: &str) -> PathBuf {
        PathBuf::from(format!("/sys/block/{}/{rel}", self.name()))
    }
    fn dev_t(&self) -> Result<(u32, u32)> {
        let s = fs::read_to_string(self.sys("dev"))?;
        let (a, b) = s.trim().split_once(':').context("bad dev")?;
        Ok((a.parse()?, b.parse()?))
    }
}

impl Drop for Loop {
    fn drop(&mut self) {
        let _ = Command::new("losetup").args(["-d", &self.dev]).status();
    }
}

/// A private tracefs instance, removed when dropped.
struct Instance {
    dir: PathBuf,
}

const TRACEFS: &str = "/sys/kernel/tracing";

impl Instance {
    fn create(name: &str) -> Result<Instance> {
        if !Path::new(TRACEFS).join("instances").is_dir() {
            let ok = Command::new("mount")
                .args(["-t", "tracefs", "nodev", TRACEFS])
                .status()?
                .success();
            if !ok {
                bail!("cannot mount tracefs on {TRACEFS}");
            }
        }
        let dir = Path::new(TRACEFS).join("instances").join(name);
        if dir.exists() {
            let _ = fs::remove_dir(&dir);
        }
        fs::create_dir(&dir).with_context(|| format!("create {}", dir.display()))?;
        Ok(Instance { dir })
    }
    fn write(&self, rel: &str, value: &str) -> Result<()> {
        fs::write(self.dir.join(rel), value).with_context(|| format!("write {rel}"))
    }
}

impl Drop for Instance {
    fn drop(&mut self) {
        let _ = fs::write(self.dir.join("tracing_on"), "0");
        let _ = fs::remove_dir(&self.dir);
    }
}

/// Trace `command` (whitespace-separated, `{dev}` replaced by the loop device) on `image`.
pub fn trace(image: &Path, label: &str, command: &str, read_ahead_kb: u64) -> Result<Trace> {
    let lo = Loop::attach_direct(image)?;
    fs::write(lo.sys("queue/read_ahead_kb"), read_ahead_kb.to_string())
        .context("set read_ahead_kb")?;
    let (major, minor) = lo.dev_t()?;
    // udev probes a new device (blkid reads signatures at its start and end): let it finish
    // before tracing, or its reads land in the checker's trace. Best effort.
    let _ = Command::new("udevadm")
        .args(["settle", "--timeout=10"])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .status();
    let inst = Instance::create(&format!("ffsck-lab-hdd-{}", std::process::id()))?;
    inst.write("tracing_on", "0")?;
    inst.write("buffer_size_kb", "65536")?;
    inst.write("trace_clock", "mono")?;
    // Each line names its issuer's process (thread group), so other processes' reads of the
    // device can be told from the command's.
    inst.write("options/record-tgid", "1")?;
    let filter = format!("dev == {}", (major << 20) | minor);
    for ev in ["block_rq_issue", "block_rq_complete"] {
        inst.write(&format!("events/block/{ev}/filter"), &filter)?;
        inst.write(&format!("events/block/{ev}/enable"), "1")?;
    }
    // The image's file system and the loop device only (no global sync: crate::cache).
    crate::cache::drop_page_cache(&[image, Path::new(&lo.dev)]).context("drop caches")?;
    let argv: Vec<String> = command
        .split_whitespace()
        .map(|a| a.replace("{dev}", &lo.dev))
        .collect();
    let Some((prog, args)) = argv.split_first() else {
        bail!("empty command");
    };
    inst.write("trace", "")?;
    inst.write("tracing_on", "1")?;
    let start = Instant::now();
    let child = Command::new(prog)
        .args(args)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .with_context(|| format!("run {prog}"))?;
    let owner = child.id();
    let out = child
        .wait_with_output()
        .with_context(|| format!("run {prog}"))?;
    let wall_s = start.elapsed().as_secs_f64();
    // Requests still in flight complete within moments of the command's exit (it waited for
    // its reads); a short pause lets their completions land.
    std::thread::sleep(std::time::Duration::from_millis(200));
    inst.write("tracing_on", "0")?;
    let lost = lost_events(&inst.dir)?;
    if lost > 0 {
        bail!("the trace lost {lost} events (ring buffer overrun)");
    }
    let text = fs::read_to_string(inst.dir.join("trace"))?;
    let parsed = parse(&text, Some(owner), &kernel_thread)?;
    let device_bytes = fs::metadata(image)?.len();
    drop(inst);
    drop(lo);
    Ok(Trace {
        label: label.to_string(),
        command: command.to_string(),
        exit_code: out.status.code(),
        wall_s,
        device_bytes,
        read_ahead_kb,
        reqs: parsed.reqs,
        other_requests: parsed.other,
        foreign_requests: parsed.foreign,
    })
}

/// Whether the process `tgid` named `comm` in a trace line is a kernel thread (a block-layer
/// worker dispatching queued requests, an interrupt): its requests may be anyone's, and are
/// kept. A kernel thread has an empty command line; one that has exited since is known by
/// its name.
fn kernel_thread(tgid: u32, comm: &str) -> bool {
    const KERNEL: [&str; 5] = ["kworker/", "ksoftirqd/", "kblockd", "<idle>", "swapper/"];
    if KERNEL.iter().any(|k| comm.starts_with(k)) || tgid == 0 {
        return true;
    }
    fs::read(format!("/proc/{tgid}/cmdline")).is_ok_and(|c| c.is_empty())
}

fn lost_events(dir: &Path) -> Result<u64> {
    let mut lost = 0;
    for cpu in fs::read_dir(dir.join("per_cpu"))? {
        let stats = fs::read_to_string(cpu?.path().join("stats")).unwrap_or_default();
        for line in stats.lines() {
            if let Some(v) = line
                .strip_prefix("overrun: ")
                .or_else(|| line.strip_prefix("dropped events: "))
            {
                lost += v.trim().parse::<u64>().unwrap_or(0);
            }
        }
    }
    Ok(lost)
}

/// The task that logged a trace line, as `comm-pid (tgid) [cpu]` opens it under
/// `record-tgid`: its name and its process (thread group) id; `None` without the tgid
/// column (or with `-------`, not known).
fn issuer(line: &str) -> Option<(&str, u32)> {
    let head = line.split_once(": block_rq_")?.0;
    let close = head.find(") [")?;
    let open = head[..close].rfind('(')?;
    let tgid = head[open + 1..close].trim().parse().ok()?;
    let task = head[..open].trim();
    let comm = task.rsplit_once('-').map_or(task, |(c, _)| c);
    Some((comm, tgid))
}

/// One event of the text trace: issue or complete, rwbs, start sector, sectors.
fn event(line: &str) -> Option<(bool, &str, u64, u64)> {
    let (issue, rest) = if let Some((_, r)) = line.split_once("block_rq_issue: ") {
        (true, r)
    } else {
        (false, line.split_once("block_rq_complete: ")?.1)
    };
    let mut tokens = rest.split_whitespace();
    let _dev = tokens.next()?;
    let rwbs = tokens.next()?;
    let (before, after) = rest.split_once(" + ")?;
    let sector = before.split_whitespace().last()?.parse().ok()?;
    let sectors = after.split_whitespace().next()?.parse().ok()?;
    Some((issue, rwbs, sector, sectors))
}

/// What [`parse`] found in a text trace.
pub struct Parsed {
    /// The read requests, in issue order.
    pub reqs: Vec<Req>,
    /// Requests that were not reads.
    pub other: u64,
    /// Read requests left out: issued by a user process other than `owner`.
    pub foreign: u64,
}

/// The read requests of a text trace (events in trace order), and how many others it saw.
/// A request issued again while outstanding (a requeue) counts once; a completion matches
/// the oldest outstanding request at its sector. With `owner`, a read issued by a process
/// that is neither `owner` nor a kernel thread (`kernel(tgid, comm)`) is foreign: matched
/// with its completion like the rest, then left out.
pub fn parse(text: &str, owner: Option<u32>, kernel: &dyn Fn(u32, &str) -> bool) -> Result<Parsed> {
    use std::collections::{HashMap, VecDeque};
    let mut reqs: Vec<Req> = Vec::new();
    let mut foreign: Vec<bool> = Vec::new();
    let mut open: HashMap<(u64, u64), VecDeque<usize>> = HashMap::new();
    let mut by_sector: HashMap<u64, VecDeque<usize>> = HashMap::new();
    let mut other = 0;
    for (seq, line) in text.lines().filter(|l| !l.starts_with('#')).enumerate() {
        let Some((issue, rwbs, sector, sectors)) = event(line) else {
            continue;
        };
        if !rwbs.contains('R') {
            if issue && sectors > 0 {
                other += 1;
            }
            continue;
        }
        if issue {
            if sectors == 0 || open.get(&(sector, sectors)).is_some_and(|q| !q.is_empty()) {
                continue;
            }
            reqs.push(Req {
                sector,
                sectors,
                issue: seq as u64,
                complete: u64::MAX,
            });
            foreign.push(owner.is_some_and(|owner| {
                issuer(line).is_some_and(|(comm, tgid)| tgid != owner && !kernel(tgid, comm))
            }));
            open.entry((sector, sectors))
                .or_default()
                .push_back(reqs.len() - 1);
            by_sector
                .entry(sector)
                .or_default()
                .push_back(reqs.len() - 1);
        } else if let Some(i) = by_sector.get_mut(&sector).and_then(|q| q.pop_front()) {
            reqs[i].complete = seq as u64;
            if let Some(q) = open.get_mut(&(reqs[i].sector, reqs[i].sectors)) {
                q.retain(|&j| j != i);
            }
        }
    }
    let unmatched = reqs.iter().filter(|r| r.complete == u64::MAX).count();
    if unmatched > 0 {
        // A completion the trace missed: treat it as done at the end (it held nothing up).
        let end = text.lines().count() as u64;
        for r in reqs.iter_mut().filter(|r| r.complete == u64::MAX) {
            r.complete = end;
        }
    }
    let left_out = foreign.iter().filter(|&&f| f).count() as u64;
    let reqs = reqs
        .into_iter()
        .zip(foreign)
        .filter_map(|(r, f)| (!f).then_some(r))
        .collect();
    Ok(Parsed {
        reqs,
        other,
        foreign: left_out,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_events_become_requests_with_requeues_once_and_writes_apart() {
        let text = "\
# tracer: nop
 e2fsck-1 [000] ..... 1.0: block_rq_issue: 7,1 R 4096 () 2048 + 8 be,0,4 [e2fsck]
 e2fsck-1 [000] ..... 1.1: block_rq_issue: 7,1 RA 8192 () 100 + 16 be,0,4 [e2fsck]
 kworker-2 [001] ..... 1.2: block_rq_issue: 7,1 RA 8192 () 100 + 16 be,0,4 [kworker]
 <idle>-0 [001] ..s.. 1.3: block_rq_complete: 7,1 RA () 100 + 16 be,0,4 [0]
 <idle>-0 [001] ..s.. 1.4: block_rq_complete: 7,1 R () 2048 + 8 be,0,4 [0]
 x-3 [000] ..... 1.5: block_rq_issue: 7,1 W 4096 () 9 + 8 be,0,4 [x]
 x-3 [000] ..... 1.6: block_rq_issue: 7,1 R 4096 () 300 + 8 be,0,4 [x]
";
        let Parsed { reqs, other, .. } = parse(text, None, &|_, _| false).unwrap();
        assert_eq!(other, 1);
        let got: Vec<(u64, u64)> = reqs.iter().map(|r| (r.sector, r.sectors)).collect();
        assert_eq!(got, vec![(2048, 8), (100, 16), (300, 8)]);
        assert!(reqs[1].complete < reqs[0].complete);
        assert!(reqs.iter().all(|r| r.complete > r.issue));
    }

    #[test]
    fn reads_of_other_processes_are_left_out_and_counted() {
        // Under record-tgid: the command (tgid 500, two threads), a kernel worker
        // dispatching a queued request, and another process reading the same device.
        let text = "\
 ffsck-500     (    500) [000] ..... 1.0: block_rq_issue: 7,1 R 4096 () 2048 + 8 be,0,4 [ffsck]
 ffsck-stream-501 (    500) [001] ..... 1.1: block_rq_issue: 7,1 R 8192 () 4096 + 16 be,0,4 [ffsck-stream]
 e2fsck-900    (    900) [000] ..... 1.2: block_rq_issue: 7,1 RA 4096 () 16777088 + 8 be,0,6 [e2fsck]
 kworker/1:1H-53 (     53) [001] ..... 1.3: block_rq_issue: 7,1 R 8192 () 8192 + 16 be,0,4 [kworker/1:1H]
 <idle>-0      (-------) [001] ..s.. 1.4: block_rq_complete: 7,1 RA () 16777088 + 8 be,0,6 [0]
 <idle>-0      (-------) [001] ..s.. 1.5: block_rq_complete: 7,1 R () 2048 + 8 be,0,4 [0]
 <idle>-0      (-------) [001] ..s.. 1.6: block_rq_complete: 7,1 R () 4096 + 16 be,0,4 [0]
 <idle>-0      (-------) [001] ..s.. 1.7: block_rq_complete: 7,1 R () 8192 + 16 be,0,4 [0]
";
        let kernel = |_: u32, comm: &str| comm.starts_with("kworker/");
        let p = parse(text, Some(500), &kernel).unwrap();
        let got: Vec<(u64, u64)> = p.reqs.iter().map(|r| (r.sector, r.sectors)).collect();
        assert_eq!(got, vec![(2048, 8), (4096, 16), (8192, 16)]);
        assert_eq!(p.foreign, 1);
        assert!(p
            .reqs
            .iter()
            .all(|r| r.complete > r.issue && r.complete < 100));
        // Without an owner every read is kept.
        assert_eq!(parse(text, None, &kernel).unwrap().reqs.len(), 4);
        assert_eq!(
            issuer(text.lines().nth(1).unwrap()),
            Some(("ffsck-stream", 500))
        );
    }
}
