//! ffsck on a real machine: loop devices, mounts (in private mount namespaces, so nothing
//! leaks), read-only media, two runs on one image, SIGUSR1/SIGUSR2 and util-linux `fsck -C`,
//! and a read-only root checked as systemd-fsck does at boot. Each case is compared with
//! e2fsck where e2fsck has the behaviour. The tests need root and loop devices and skip with a
//! "SKIPPED:" message otherwise; loop devices are detached and namespaces left by Drop guards,
//! also when a test fails.
//!
//! This module holds the shared setup (tools, loop devices, namespaces, images, pipes); the
//! tests are in `devices` (mounts, read-only media, exclusive use, partitions,
//! device-mapper) and `progress` (signals, util-linux fsck, the boot check).

mod devices;
mod progress;

use crate::common;

use common::*;
use std::ffi::OsStr;
use std::io::{BufRead, Read, Write};
use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

/// Root, loop devices and util-linux's losetup/unshare/nsenter, or `false` after saying why
/// the calling test is skipped.
fn machine() -> Option<Tools> {
    let t = tools()?;
    // SAFETY: geteuid has no preconditions.
    let root = unsafe { libc::geteuid() } == 0;
    let have = |cmd: &str| runs(cmd, "--version");
    let loops = Path::new("/dev/loop-control").exists();
    if !root
        || !loops
        || !["losetup", "unshare", "nsenter", "mount"]
            .iter()
            .all(|c| have(c))
    {
        common::skip(&format!(
            "SKIPPED: needs root and loop devices (/dev/loop-control) with util-linux losetup, \
             unshare, nsenter and mount (root: {root}, loop-control: {loops})"
        ));
        return None;
    }
    Some(t)
}

/// Whether `cmd ARG` runs and succeeds (a tool is installed and usable).
fn runs(cmd: &str, arg: &str) -> bool {
    Command::new(cmd)
        .arg(arg)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// A fresh 16 MiB ext4 image and a loop device over it.
fn image_on_loop(t: &Tools) -> (Image, Loop) {
    let img = mkfs(t, "ext4", &[], "16M");
    let lp = Loop::new(&img.path, false);
    (img, lp)
}

/// A loop device over an image, detached when dropped.
struct Loop(PathBuf);

impl Loop {
    fn new(img: &Path, read_only: bool) -> Loop {
        let mut cmd = Command::new("losetup");
        if read_only {
            cmd.arg("-r");
        }
        let out = cmd.args(["-f", "--show"]).arg(img).output().unwrap();
        assert!(
            out.status.success(),
            "test setup: losetup {}: {}",
            img.display(),
            String::from_utf8_lossy(&out.stderr)
        );
        Loop(PathBuf::from(
            String::from_utf8_lossy(&out.stdout).trim().to_string(),
        ))
    }
    /// A loop device over a partitioned disk image, with its partitions scanned (`-P`).
    fn partitioned(disk: &Path) -> Loop {
        let out = Command::new("losetup")
            .args(["-P", "-f", "--show"])
            .arg(disk)
            .output()
            .unwrap();
        assert!(out.status.success(), "test setup: losetup -P");
        Loop(PathBuf::from(String::from_utf8_lossy(&out.stdout).trim()))
    }
    fn path(&self) -> &Path {
        &self.0
    }
    fn name(&self) -> String {
        self.0.file_name().unwrap().to_string_lossy().into_owned()
    }
}

impl Drop for Loop {
    fn drop(&mut self) {
        // Still held by a dying namespace's mount: the kernel detaches it when released.
        let _ = Command::new("losetup").arg("-d").arg(&self.0).status();
    }
}

/// A private mount namespace, held open by a `cat` waiting on its input; commands run in it
/// with nsenter (which execs them, so a child's pid is the command's). Its mounts vanish with
/// it when dropped.
struct Ns {
    holder: Child,
}

impl Ns {
    fn new() -> Ns {
        let holder = Command::new("unshare")
            .args(["-m", "--propagation", "private", "cat"])
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .spawn()
            .unwrap();
        let ns = Ns { holder };
        // Wait until cat runs in the new namespace (unshare has exec'ed it).
        let own = std::fs::read_link("/proc/self/ns/mnt").unwrap();
        let path = format!("/proc/{}/ns/mnt", ns.holder.id());
        let mut tries = 0;
        while std::fs::read_link(&path).is_ok_and(|l| l == own)
            || !std::fs::read_to_string(format!("/proc/{}/comm", ns.holder.id()))
                .is_ok_and(|c| c.trim() == "cat")
        {
            tries += 1;
            assert!(tries < 60_000, "test setup: unshare did not start");
            std::thread::sleep(Duration::from_millis(1));
        }
        ns
    }
    fn cmd(&self, prog: impl AsRef<OsStr>) -> Command {
        let mut c = Command::new("nsenter");
        c.arg("-t")
            .arg(self.holder.id().to_string())
            .args(["-m", "--"])
            .arg(prog);
        c
    }
    /// Run a setup command in the namespace; it must succeed.
    fn sh(&self, script: &str) {
        let out = self.cmd("sh").args(["-c", script]).output().unwrap();
        assert!(
            out.status.success(),
            "test setup: {script}: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }
    /// Create the directory `mnt` and mount `dev` on it in the namespace with `opts`, synced.
    fn mount(&self, dev: &Path, mnt: &Path, opts: &str) {
        std::fs::create_dir_all(mnt).unwrap();
        self.sh(&format!(
            "mount -o {opts} {} {} && sync",
            dev.display(),
            mnt.display()
        ));
    }
    fn ffsck(&self, args: &[&OsStr]) -> Run {
        let mut c = self.cmd(ffsck_bin());
        c.args(args);
        let run = run_with_timeout(c, DEFAULT_TIMEOUT).expect("ffsck timed out");
        assert_no_panic(&run);
        run
    }
    fn e2fsck(&self, t: &Tools, args: &[&OsStr]) -> Run {
        let mut c = self.cmd(&t.e2fsck);
        c.args(args).env("E2FSCK_CONFIG", "/dev/null");
        run_with_timeout(c, DEFAULT_TIMEOUT).expect("e2fsck timed out")
    }
}

impl Drop for Ns {
    fn drop(&mut self) {
        drop(self.holder.stdin.take());
        let _ = self.holder.wait();
    }
}

fn os(s: &str) -> &OsStr {
    OsStr::new(s)
}

fn all(run: &Run) -> String {
    format!("{}{}", run.stdout, run.stderr)
}

/// e2fsck outside any namespace.
fn e2fsck(t: &Tools, args: &[&OsStr]) -> Run {
    let mut c = Command::new(&t.e2fsck);
    c.args(args).env("E2FSCK_CONFIG", "/dev/null");
    run_with_timeout(c, DEFAULT_TIMEOUT).expect("e2fsck timed out")
}

/// ffsck's run and e2fsck's on the same arguments both fail to open (exit 8), and each says
/// every one of `msgs` (ffsck on stderr, where e2fsck prints its fatal errors).
fn assert_both_refuse(what: &str, ours: &Run, theirs: &Run, msgs: &[&str]) {
    assert_eq!(ours.code, Some(8), "ffsck {what}: {}", all(ours));
    assert_eq!(theirs.code, Some(8), "e2fsck {what}: {}", all(theirs));
    for msg in msgs {
        assert!(ours.stderr.contains(msg), "ffsck {what}: {}", all(ours));
        assert!(all(theirs).contains(msg), "e2fsck {what}: {}", all(theirs));
    }
}

/// The names in a directory, sorted.
fn listing(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    v.sort();
    v
}

/// The redo log a repair of block device `name` would have left under /var/lib/ffsck.
fn var_log(name: &str) -> PathBuf {
    Path::new("/var/lib/ffsck").join(format!("{name}.redo"))
}

/// A stdout pipe for a child that blocks it: the pipe is full except for `room` bytes, so the
/// child's writes fit up to there and the next one waits until the test reads.
fn choked_pipe(room: usize) -> (std::io::PipeReader, std::io::PipeWriter) {
    use rustix::fs::{fcntl_getfl, fcntl_setfl, OFlags};
    const PAGE: usize = 4096;
    assert!(room < PAGE);
    let (mut r, mut w) = std::io::pipe().unwrap();
    let flags = fcntl_getfl(&w).unwrap();
    fcntl_setfl(&w, flags | OFlags::NONBLOCK).unwrap();
    // Whole pages until the pipe is full (each write of a page takes a slot of its own).
    let page = [0u8; PAGE];
    let mut pages = 0;
    loop {
        match w.write(&page) {
            Ok(n) => {
                assert_eq!(n, PAGE);
                pages += 1;
            }
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => break,
            Err(e) => panic!("test setup: filling a pipe: {e}"),
        }
        assert!(pages < 1 << 16, "test setup: the pipe never filled");
    }
    if room > 0 {
        // Free one slot and take it again with a page short of `room` bytes: the child's
        // first writes go to those bytes, the next finds no free slot and waits.
        r.read_exact(&mut [0u8; PAGE]).unwrap();
        assert_eq!(w.write(&page[..PAGE - room]).unwrap(), PAGE - room);
    }
    fcntl_setfl(&w, flags).unwrap();
    (r, w)
}

/// Wait until a thread of process `pid` is blocked writing to its standard output (a hang
/// guard, not a timing: the process cannot get past that write until the test reads).
fn wait_blocked_on_stdout(pid: u32) {
    let writing = |task: &Path| {
        let sc = std::fs::read_to_string(task.join("syscall")).unwrap_or_default();
        let mut f = sc.split_whitespace();
        // write(2) is syscall 1 on x86_64, 64 on aarch64; fd 1.
        let nr = f.next().unwrap_or("");
        (nr == "1" || nr == "64") && f.next() == Some("0x1")
    };
    for _ in 0..60_000 {
        let ended = std::fs::read_to_string(format!("/proc/{pid}/stat")).map_or(true, |st| {
            st.rsplit(')')
                .next()
                .is_some_and(|r| r.trim_start().starts_with('Z'))
        });
        assert!(!ended, "process {pid} ended before blocking on its output");
        let tasks = std::fs::read_dir(format!("/proc/{pid}/task"))
            .unwrap_or_else(|_| panic!("process {pid} ended before blocking on its output"));
        if tasks.flatten().any(|t| writing(&t.path())) {
            return;
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    panic!("process {pid} never blocked on its output");
}

/// Read everything left in a child's stdout pipe (the filler zeros dropped) on a thread.
fn drain(mut r: std::io::PipeReader) -> std::thread::JoinHandle<String> {
    std::thread::spawn(move || {
        let mut v = Vec::new();
        let _ = r.read_to_end(&mut v);
        v.retain(|&b| b != 0);
        String::from_utf8_lossy(&v).into_owned()
    })
}

/// Spawn ffsck with its stdout on `w` (and stderr piped), `extra_fd` (if any) dup'ed to fd 5.
fn spawn_ffsck(
    args: &[&OsStr],
    w: std::io::PipeWriter,
    extra_fd: Option<&std::io::PipeWriter>,
) -> Child {
    let mut c = Command::new(ffsck_bin());
    c.args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::from(w))
        .stderr(Stdio::piped());
    if let Some(fd) = extra_fd {
        use std::os::fd::AsRawFd;
        let raw = fd.as_raw_fd();
        // SAFETY: as_fd_5 only calls async-signal-safe functions on a descriptor that is
        // open in the parent, hence in the child until exec.
        unsafe {
            c.pre_exec(move || as_fd_5(raw));
        }
    }
    c.spawn().unwrap()
}

/// In a child between fork and exec: make `raw` its descriptor 5, kept across exec (dup2
/// clears close-on-exec on the copy; when `raw` is 5 already, the flag is cleared on it).
fn as_fd_5(raw: i32) -> std::io::Result<()> {
    // SAFETY: fcntl and dup2 on descriptors are async-signal-safe and touch no memory.
    let r = unsafe {
        if raw == 5 {
            libc::fcntl(5, libc::F_SETFD, 0)
        } else {
            libc::dup2(raw, 5)
        }
    };
    if r < 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

/// Wait for a child with a hang guard; its exit code (panics if killed by a signal).
fn wait_code(child: &mut Child, what: &str) -> (i32, String) {
    for _ in 0..60_000 {
        if let Some(st) = child.try_wait().unwrap() {
            let mut err = String::new();
            if let Some(mut e) = child.stderr.take() {
                let _ = e.read_to_string(&mut err);
            }
            let code = st
                .code()
                .unwrap_or_else(|| panic!("{what} was killed by a signal ({st:?}): {err}"));
            return (code, err);
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    let _ = child.kill();
    panic!("{what} did not finish");
}

/// Whether process `pid` has `sig` in the `field` mask of its status (SigCgt, SigPnd, ShdPnd).
fn sig_in(pid: u32, field: &str, sig: i32) -> bool {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix(field).and_then(|r| r.strip_prefix(':')))
        .and_then(|hex| u64::from_str_radix(hex.trim(), 16).ok())
        .is_some_and(|mask| mask & (1u64 << (sig - 1)) != 0)
}

fn kill(pid: u32, sig: i32) {
    // SAFETY: kill has no memory preconditions; `pid` is our child.
    assert_eq!(unsafe { libc::kill(pid as i32, sig) }, 0);
}

/// ffsck's and e2fsck's refusals of a mounted file system: exit 8, "DEV is mounted.",
/// "Cannot continue, aborting.", and the image untouched.
fn assert_refused_mounted(ns: &Ns, t: &Tools, img: &Path, target: &Path, args: &str, e2: bool) {
    let before = read_all(img);
    let dev = target.display().to_string();
    let mut argv: Vec<&OsStr> = args.split(' ').map(os).collect();
    argv.push(target.as_os_str());
    let run = ns.ffsck(&argv);
    assert_eq!(run.code(), 8, "ffsck {args} {dev}:\n{}", all(&run));
    assert!(
        run.stderr.contains(&format!("{dev} is mounted.\n"))
            && run.stderr.contains("Cannot continue, aborting."),
        "ffsck {args} {dev}:\n{}",
        all(&run)
    );
    assert!(!run.stdout.contains("Pass 1"), "{}", all(&run));
    assert_same_bytes(
        &before,
        &read_all(img),
        &format!("image after ffsck {args} {dev}"),
    );
    if e2 {
        let e = ns.e2fsck(t, &argv);
        assert_eq!(e.code, Some(8), "e2fsck {args} {dev}:\n{}", all(&e));
        assert!(
            all(&e).contains(&format!("{dev} is mounted.")),
            "{}",
            all(&e)
        );
    }
}
