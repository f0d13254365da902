//! Tracing a command's block requests (root): the image is attached read-only through a
//! direct-I/O loop device (so the page cache of the image file plays no part and every read
//! the checker makes reaches the loop device as a request), its read-ahead set, caches
//! dropped, and `block_rq_issue` / `block_rq_complete` for that device recorded in a private
//! tracefs instance while the command runs. The loop device is always detached.

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
    let filter = format!("dev == {}", (major << 20) | minor);
    for ev in ["block_rq_issue", "block_rq_complete"] {
        inst.write(&format!("events/block/{ev}/filter"), &filter)?;
        inst.write(&format!("events/block/{ev}/enable"), "1")?;
    }
    let _ = Command::new("sync").status();
    fs::write("/proc/sys/vm/drop_caches", "3").context("drop caches")?;
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
    let out = Command::new(prog)
        .args(args)
        .output()
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
    let (reqs, other_requests) = parse(&text)?;
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
        reqs,
        other_requests,
    })
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

/// The read requests of a text trace (events in trace order), and how many others it saw.
/// A request issued again while outstanding (a requeue) counts once; a completion matches
/// the oldest outstanding request at its sector.
pub fn parse(text: &str) -> Result<(Vec<Req>, u64)> {
    use std::collections::{HashMap, VecDeque};
    let mut reqs: Vec<Req> = Vec::new();
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
    Ok((reqs, other))
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
        let (reqs, other) = parse(text).unwrap();
        assert_eq!(other, 1);
        let got: Vec<(u64, u64)> = reqs.iter().map(|r| (r.sector, r.sectors)).collect();
        assert_eq!(got, vec![(2048, 8), (100, 16), (300, 8)]);
        assert!(reqs[1].complete < reqs[0].complete);
        assert!(reqs.iter().all(|r| r.complete > r.issue));
    }
}
