//! ffsck on a real machine: loop devices, mounts (in private mount namespaces, so nothing
//! leaks), read-only media, two runs on one image, SIGUSR1/SIGUSR2 and util-linux `fsck -C`,
//! and a read-only root checked as systemd-fsck does at boot. Each case is compared with
//! e2fsck where e2fsck has the behaviour. The tests need root and loop devices and skip with a
//! "SKIPPED:" message otherwise; loop devices are detached and namespaces left by Drop guards,
//! also when a test fails.

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
    let have = |cmd: &str| {
        Command::new(cmd)
            .arg("--version")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success())
    };
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

#[test]
fn a_mounted_image_is_refused_for_repair_and_warned_for_a_check() {
    let Some(t) = machine() else { return };
    let img = mkfs(&t, "ext4", &[], "16M");
    let lp = Loop::new(&img.path, false);
    let ns = Ns::new();
    let mnt = img.aux("mnt");
    std::fs::create_dir(&mnt).unwrap();
    ns.sh(&format!(
        "mount -o noatime,noinit_itable {} {} && sync",
        lp.path().display(),
        mnt.display()
    ));
    for target in [lp.path(), img.path.as_path()] {
        for args in ["-fy", "-p", "-fp", "-y"] {
            assert_refused_mounted(&ns, &t, &img.path, target, args, true);
        }
        // The message says where it is mounted, and through which device.
        let run = ns.ffsck(&[os("-fy"), target.as_os_str()]);
        assert!(
            run.stderr.contains(&mnt.display().to_string()),
            "{}",
            all(&run)
        );
        // -n warns and checks, as e2fsck.
        let dev = target.display().to_string();
        let run = ns.ffsck(&[os("-fn"), target.as_os_str()]);
        let e = ns.e2fsck(&t, &[os("-fn"), target.as_os_str()]);
        assert_eq!(run.code(), e.code.unwrap(), "{}\n{}", all(&run), all(&e));
        assert_eq!(run.code(), 0, "{}", all(&run));
        let warn = format!("Warning!  {dev} is mounted.\n");
        assert!(run.stdout.starts_with(&warn), "{}", all(&run));
        assert!(run.stdout.contains("Pass 5"), "{}", all(&run));
        assert!(all(&e).contains(&warn), "{}", all(&e));
    }
    // --apply-undo is refused on it too.
    let undo = img.aux("undo");
    std::fs::write(&undo, b"").unwrap();
    let run = ns.ffsck(&[os("--apply-undo"), undo.as_os_str(), lp.path().as_os_str()]);
    assert_eq!(run.code(), 8, "{}", all(&run));
    assert!(run.stderr.contains("is mounted."), "{}", all(&run));
}

#[test]
fn a_mount_is_found_through_a_bind_mount_and_a_second_loop_device() {
    let Some(t) = machine() else { return };
    let img = mkfs(&t, "ext4", &[], "16M");
    let first = Loop::new(&img.path, false);
    let second = Loop::new(&img.path, false);
    let ns = Ns::new();
    let (m1, m2) = (img.aux("m1"), img.aux("m2 with space"));
    std::fs::create_dir(&m1).unwrap();
    std::fs::create_dir(&m2).unwrap();
    // Mounted through the first loop device, then only a bind mount of it is left.
    ns.sh(&format!(
        "mount -o noatime,noinit_itable {dev} {m1} && mount --bind {m1} '{m2}' && umount {m1} && sync",
        dev = first.path().display(),
        m1 = m1.display(),
        m2 = m2.display()
    ));
    for target in [first.path(), second.path(), img.path.as_path()] {
        // e2fsck finds neither the image nor the second loop device (it matches the
        // mounted device and a loop device's backing file by name): compared on the first.
        let e2 = target == first.path();
        assert_refused_mounted(&ns, &t, &img.path, target, "-fy", e2);
        assert_refused_mounted(&ns, &t, &img.path, target, "-p", e2);
        let run = ns.ffsck(&[os("-fy"), target.as_os_str()]);
        assert!(
            run.stderr.contains(&m2.display().to_string()),
            "the bind mount's point (octal escapes decoded): {}",
            all(&run)
        );
        let run = ns.ffsck(&[os("-fn"), target.as_os_str()]);
        assert_eq!(run.code(), 0, "{}", all(&run));
        assert!(run.stdout.contains("is mounted."), "{}", all(&run));
    }
    // The image renamed: still the same inode behind the loop device.
    let renamed = img.aux("renamed.img");
    std::fs::rename(&img.path, &renamed).unwrap();
    let run = ns.ffsck(&[os("-fy"), renamed.as_os_str()]);
    assert_eq!(run.code(), 8, "{}", all(&run));
    assert!(run.stderr.contains("is mounted."), "{}", all(&run));
}

#[test]
fn a_read_only_mount_is_checked_and_repaired_with_f_without_exclusive_open() {
    let Some(t) = machine() else { return };
    let img = mkfs(&t, "ext4", &[], "16M");
    let lp = Loop::new(&img.path, false);
    let ns = Ns::new();
    let mnt = img.aux("mnt");
    std::fs::create_dir(&mnt).unwrap();
    ns.sh(&format!(
        "mount -o ro {} {}",
        lp.path().display(),
        mnt.display()
    ));
    let dev = lp.path().as_os_str();
    let warn = format!("Warning!  {} is mounted.\n", lp.path().display());
    // -n and -f with a repair: warned and checked (a repair opened O_EXCL would fail with
    // EBUSY, as the mount holds the device).
    for args in [&["-fn"][..], &["-fy"], &["-fp"]] {
        let mut argv: Vec<&OsStr> = args.iter().map(|a| os(a)).collect();
        argv.push(dev);
        let run = ns.ffsck(&argv);
        let e = ns.e2fsck(&t, &argv);
        assert_eq!(run.code(), 0, "ffsck {args:?}: {}", all(&run));
        assert_eq!(e.code, Some(0), "e2fsck {args:?}: {}", all(&e));
        assert!(run.stdout.starts_with(&warn), "{}", all(&run));
        assert!(all(&e).contains(&warn), "{}", all(&e));
    }
    // Without -f a repair is refused (the file system is not the root), as by e2fsck.
    for args in ["-y", "-p"] {
        assert_refused_mounted(&ns, &t, &img.path, lp.path(), args, true);
    }
}

#[test]
fn read_only_media_are_refused_before_anything_is_asked_or_created() {
    let Some(t) = machine() else { return };
    let img = mkfs(&t, "ext4", &[], "16M");
    let rodir = img.aux("ro");
    std::fs::create_dir(&rodir).unwrap();
    let dir_before = listing(img.dir.path());
    let before = read_all(&img.path);
    // A read-only loop device: e2fsck finds it by BLKROGET and reports EPERM.
    let ro = Loop::new(&img.path, true);
    for args in ["-fy", "-p", "-fp", "-y"] {
        let run = ffsck(&[os(args), ro.path().as_os_str()]);
        let e = e2fsck(&t, &[os(args), ro.path().as_os_str()]);
        assert_eq!(run.code(), 8, "ffsck {args}: {}", all(&run));
        assert_eq!(e.code, Some(8), "e2fsck {args}: {}", all(&e));
        let hint = "You must have r/w access to the filesystem or be root";
        assert!(run.stderr.contains(hint), "{}", all(&run));
        assert!(all(&e).contains(hint), "{}", all(&e));
        assert!(!run.stdout.contains("Pass 1"), "{}", all(&run));
        assert!(
            !var_log(&ro.name()).exists(),
            "a log was left for {}",
            ro.name()
        );
    }
    let run = ffsck(&[os("-fn"), ro.path().as_os_str()]);
    assert_eq!(run.code(), 0, "{}", all(&run));
    drop(ro);
    // An image on a read-only bind mount: EROFS.
    let ns = Ns::new();
    ns.sh(&format!(
        "mount --bind {d} {r} && mount -o remount,bind,ro {r}",
        d = img.dir.path().display(),
        r = rodir.display()
    ));
    let on_ro = rodir.join("fs.img");
    for args in ["-fy", "-p"] {
        let run = ns.ffsck(&[os(args), on_ro.as_os_str()]);
        let e = ns.e2fsck(&t, &[os(args), on_ro.as_os_str()]);
        assert_eq!(run.code(), 8, "ffsck {args}: {}", all(&run));
        assert_eq!(e.code, Some(8), "e2fsck {args}: {}", all(&e));
        let hint =
            "Disk write-protected; use the -n option to do a read-only\ncheck of the device.";
        assert!(run.stderr.contains(hint), "{}", all(&run));
        assert!(all(&e).contains(hint), "{}", all(&e));
    }
    drop(ns);
    // No write permission (root without it: setpriv to nobody): EACCES.
    let have_setpriv = Command::new("setpriv")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    if have_setpriv {
        std::fs::set_permissions(img.dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
        std::fs::set_permissions(&img.path, std::fs::Permissions::from_mode(0o444)).unwrap();
        let as_nobody = |prog: &Path, args: &[&str]| {
            let mut c = Command::new("setpriv");
            c.args(["--reuid=65534", "--regid=65534", "--clear-groups"])
                .arg(prog)
                .args(args)
                .arg(&img.path)
                .env("E2FSCK_CONFIG", "/dev/null");
            run_with_timeout(c, DEFAULT_TIMEOUT).unwrap()
        };
        let run = as_nobody(&ffsck_bin(), &["-fy"]);
        let e = as_nobody(&t.e2fsck, &["-fy"]);
        assert_eq!(run.code, Some(8), "{}", all(&run));
        assert_eq!(e.code, Some(8), "{}", all(&e));
        assert!(
            run.stderr
                .contains("Permission denied while trying to open"),
            "{}",
            all(&run)
        );
        let hint = "You must have r/w access to the filesystem or be root";
        assert!(
            run.stderr.contains(hint) && all(&e).contains(hint),
            "{}\n{}",
            all(&run),
            all(&e)
        );
        let run = as_nobody(&ffsck_bin(), &["-fn"]);
        assert_eq!(run.code, Some(0), "{}", all(&run));
    } else {
        eprintln!("note: setpriv not found; the EACCES case is not tested");
    }
    assert_eq!(listing(img.dir.path()), dir_before, "files were created");
    assert_same_bytes(&before, &read_all(&img.path), "image on read-only media");
}

#[test]
fn open_failures_have_their_own_messages() {
    let Some(t) = tools() else { return };
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("missing");
    for args in ["-fn", "-fy"] {
        let run = ffsck(&[os(args), missing.as_os_str()]);
        let e = e2fsck(&t, &[os(args), missing.as_os_str()]);
        assert_eq!(run.code(), 8, "{}", all(&run));
        assert_eq!(e.code, Some(8), "{}", all(&e));
        let hint = "Possibly non-existent device?";
        assert!(
            run.stderr.contains(hint) && all(&e).contains(hint),
            "{}\n{}",
            all(&run),
            all(&e)
        );
        assert!(
            !all(&run).contains("must be a block device"),
            "{}",
            all(&run)
        );
        let run = ffsck(&[os(args), dir.path().as_os_str()]);
        let e = e2fsck(&t, &[os(args), dir.path().as_os_str()]);
        assert_eq!(run.code(), 8, "{}", all(&run));
        assert_eq!(e.code, Some(8), "{}", all(&e));
        let msg = "Is a directory while trying to open";
        assert!(
            run.stderr.contains(msg) && all(&e).contains(msg),
            "{}\n{}",
            all(&run),
            all(&e)
        );
    }
    assert_eq!(listing(dir.path()), Vec::<String>::new());
    // A bad -C descriptor, as e2fsck reports it.
    let img = mkfs(&t, "ext4", &[], "8M");
    for c in ["99", "-99"] {
        let run = ffsck(&[os("-C"), os(c), os("-fn"), img.path.as_os_str()]);
        let e = e2fsck(&t, &[os("-C"), os(c), os("-fn"), img.path.as_os_str()]);
        assert_eq!(run.code(), 8, "{}", all(&run));
        assert_eq!(e.code, Some(8), "{}", all(&e));
        for msg in [
            "Error validating file descriptor 99: Bad file descriptor",
            "Invalid completion information file descriptor",
        ] {
            assert!(
                run.stderr.contains(msg) && all(&e).contains(msg),
                "{}\n{}",
                all(&run),
                all(&e)
            );
        }
    }
}

/// Start `ffsck ARGS` blocked on its first line of output; returns it with its stdout pipe.
fn start_blocked(args: &[&OsStr]) -> (Child, std::io::PipeReader) {
    let (r, w) = choked_pipe(0);
    let child = spawn_ffsck(args, w, None);
    wait_blocked_on_stdout(child.id());
    (child, r)
}

#[test]
fn two_repairs_of_one_image_are_one_too_many() {
    let Some(t) = machine() else { return };
    let img = mkfs(&t, "ext4", &[], "16M");
    // A repair of the image file, held at its first line of output (the image locked).
    let (mut first, out) = start_blocked(&[os("-fy"), img.path.as_os_str()]);
    let lp = Loop::new(&img.path, false);
    for (args, target) in [
        ("-fy", img.path.as_path()),
        ("-p", img.path.as_path()),
        // A check would read a half-written image.
        ("-fn", img.path.as_path()),
        // The same image through a loop device: its backing file is locked.
        ("-fy", lp.path()),
        ("-fn", lp.path()),
    ] {
        let run = ffsck(&[os(args), target.as_os_str()]);
        assert_eq!(
            run.code(),
            8,
            "ffsck {args} {}: {}",
            target.display(),
            all(&run)
        );
        assert!(
            run.stderr
                .contains(&format!("{} is in use.\n", target.display())),
            "{}",
            all(&run)
        );
        assert!(
            !all(&run).contains("must be a block device"),
            "{}",
            all(&run)
        );
    }
    let drained = drain(out);
    let (code, err) = wait_code(&mut first, "the first repair");
    assert_eq!(
        code,
        0,
        "the first repair: {}{err}",
        drained.join().unwrap()
    );

    // A repair through the loop device holds it O_EXCL and locks its backing file.
    let (mut first, out) = start_blocked(&[os("-fy"), lp.path().as_os_str()]);
    for (args, target) in [("-fy", lp.path()), ("-fy", img.path.as_path())] {
        let run = ffsck(&[os(args), target.as_os_str()]);
        assert_eq!(
            run.code(),
            8,
            "ffsck {args} {}: {}",
            target.display(),
            all(&run)
        );
        assert!(run.stderr.contains("is in use.\n"), "{}", all(&run));
    }
    // e2fsck sees the exclusive open too.
    let e = e2fsck(&t, &[os("-fy"), lp.path().as_os_str()]);
    assert_eq!(e.code, Some(8), "{}", all(&e));
    assert!(all(&e).contains("is in use."), "{}", all(&e));
    let drained = drain(out);
    let (code, err) = wait_code(&mut first, "the repair through the loop device");
    assert_eq!(code, 0, "{}{err}", drained.join().unwrap());

    // Two checks run side by side.
    let (mut first, out) = start_blocked(&[os("-fn"), img.path.as_os_str()]);
    let run = ffsck(&[os("-fn"), img.path.as_os_str()]);
    assert_eq!(run.code(), 0, "the second check: {}", all(&run));
    let drained = drain(out);
    let (code, err) = wait_code(&mut first, "the first check");
    assert_eq!(code, 0, "{}{err}", drained.join().unwrap());
    assert!(!var_log(&lp.name()).exists());
}

/// The first line a check prints.
const PASS1: &str = "Pass 1: Checking inodes, blocks, and sizes\n";

#[test]
fn sigusr1_starts_and_sigusr2_stops_the_progress_lines() {
    let Some(t) = tools() else { return };
    let img = mkfs(&t, "ext4", &[], "16M");
    let dev = img.path.display().to_string();
    // `-C -5`: nothing until SIGUSR1, then lines on fd 5. The run is held after its Pass 1
    // line (pass 1 finished, its counters set) until the test reads its output.
    let (prog_r, prog_w) = std::io::pipe().unwrap();
    let (out_r, out_w) = choked_pipe(PASS1.len());
    let mut child = spawn_ffsck(
        &[os("-fn"), os("-C"), os("-5"), img.path.as_os_str()],
        out_w,
        Some(&prog_w),
    );
    drop(prog_w);
    let pid = child.id();
    wait_blocked_on_stdout(pid);
    assert!(sig_in(pid, "SigCgt", libc::SIGUSR1) && sig_in(pid, "SigCgt", libc::SIGUSR2));
    kill(pid, libc::SIGUSR1);
    // A progress line comes while the run is held: SIGUSR1 turned the lines on.
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut lines = std::io::BufReader::new(prog_r).lines();
        while let Some(Ok(l)) = lines.next() {
            if tx.send(l).is_err() {
                break;
            }
        }
    });
    let first = rx
        .recv_timeout(DEFAULT_TIMEOUT)
        .expect("no progress line after SIGUSR1");
    assert!(
        first.starts_with("1 ") && first.ends_with(&format!(" {dev}")),
        "{first}"
    );
    // SIGUSR2: off again before the run goes on (handled once it is no longer pending).
    kill(pid, libc::SIGUSR2);
    for _ in 0..60_000 {
        if !sig_in(pid, "SigPnd", libc::SIGUSR2) && !sig_in(pid, "ShdPnd", libc::SIGUSR2) {
            break;
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    // Margin for the signal thread to act on it (the run cannot go on before the drain).
    std::thread::sleep(Duration::from_millis(200));
    let out = drain(out_r);
    let (code, err) = wait_code(&mut child, "ffsck -fn -C -5");
    let out = out.join().unwrap();
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.starts_with(PASS1) && out.contains("Pass 5"), "{out}");
    let rest: Vec<String> = rx.try_iter().collect();
    assert!(
        rest.iter().all(|l| l.starts_with("1 ")),
        "progress lines after SIGUSR2: {rest:?}"
    );

    // SIGUSR1 with no -C at all: the bar (not drawn without a terminal), and no death.
    let (out_r, out_w) = choked_pipe(PASS1.len());
    let mut child = spawn_ffsck(&[os("-fn"), img.path.as_os_str()], out_w, None);
    wait_blocked_on_stdout(child.id());
    kill(child.id(), libc::SIGUSR1);
    kill(child.id(), libc::SIGUSR2);
    kill(child.id(), libc::SIGUSR1);
    let out = drain(out_r);
    let (code, err) = wait_code(&mut child, "ffsck -fn");
    assert_eq!(code, 0, "{}{err}", out.join().unwrap());
}

/// A directory with `fsck.ext4` linked to ffsck, for util-linux fsck's search path.
fn fsck_ext4_dir() -> tempfile::TempDir {
    let d = tempfile::tempdir().unwrap();
    std::os::unix::fs::symlink(ffsck_bin(), d.path().join("fsck.ext4")).unwrap();
    d
}

fn path_with(dir: &Path) -> std::ffi::OsString {
    let mut p = dir.as_os_str().to_owned();
    p.push(":");
    p.push(std::env::var_os("PATH").unwrap_or_default());
    p
}

#[test]
fn util_linux_fsck_hands_the_progress_over_with_sigusr1() {
    let Some(t) = machine() else { return };
    if Command::new("fsck").arg("--version").output().is_err() {
        common::skip("SKIPPED: util-linux fsck not found");
        return;
    }
    let small = mkfs(&t, "ext4", &[], "8M");
    // The second check takes longer (many inodes), so it is still running when the first
    // ends and fsck passes the progress to it.
    let big = mkfs(&t, "ext4", &["-N", "200000"], "400M");
    let (l1, l2) = (Loop::new(&small.path, false), Loop::new(&big.path, false));
    let bin = fsck_ext4_dir();
    let (prog_r, prog_w) = std::io::pipe().unwrap();
    let mut c = Command::new("fsck");
    c.args(["-V", "-C", "5"])
        .arg(l1.path())
        .arg(l2.path())
        .args(["--", "-fn"])
        .env("PATH", path_with(bin.path()))
        .env("E2FSCK_CONFIG", "/dev/null")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    {
        use std::os::fd::AsRawFd;
        let raw = prog_w.as_raw_fd();
        // SAFETY: as_fd_5 only calls async-signal-safe functions on a descriptor that is
        // open in the parent, hence in the child until exec.
        unsafe {
            c.pre_exec(move || as_fd_5(raw));
        }
    }
    let mut fsck = c.spawn().unwrap();
    drop(prog_w);
    let progress = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = std::io::BufReader::new(prog_r).read_to_string(&mut s);
        s
    });
    // Hold the second checker (it got `-C-5`) once its handlers are in place, so fsck's
    // SIGUSR1 comes while it runs; let it go when the signal is pending.
    let second = (0..60_000).find_map(|_| {
        let found = checker_with_arg("-C-5");
        if found.is_none() {
            std::thread::sleep(Duration::from_millis(1));
        }
        found
    });
    let mut handed_over = false;
    if let Some(pid) = second {
        // Past its start (the signal thread runs), it must catch SIGUSR1.
        let threads = || std::fs::read_dir(format!("/proc/{pid}/task")).map_or(0, |d| d.count());
        while threads() == 1 {
            std::hint::spin_loop();
        }
        // Alive, not a zombie waiting for fsck to reap it.
        let alive = std::fs::read_to_string(format!("/proc/{pid}/status")).is_ok_and(|st| {
            st.lines()
                .find_map(|l| l.strip_prefix("State:"))
                .is_some_and(|v| !v.trim().starts_with('Z') && !v.trim().starts_with('X'))
        });
        // SAFETY: kill has no memory preconditions.
        if alive && unsafe { libc::kill(pid as i32, libc::SIGSTOP) } == 0 {
            assert!(
                sig_in(pid, "SigCgt", libc::SIGUSR1) && sig_in(pid, "SigCgt", libc::SIGUSR2),
                "the checker does not catch SIGUSR1 and SIGUSR2"
            );
            for _ in 0..60_000 {
                if sig_in(pid, "SigPnd", libc::SIGUSR1) || sig_in(pid, "ShdPnd", libc::SIGUSR1) {
                    handed_over = true;
                    break;
                }
                if !Path::new(&format!("/proc/{pid}")).exists() {
                    break;
                }
                std::thread::sleep(Duration::from_millis(1));
            }
            // SAFETY: as above (the process may have ended: then there is nothing to wake).
            unsafe { libc::kill(pid as i32, libc::SIGCONT) };
        }
    }
    let (code, err) = wait_code(&mut fsck, "fsck -C 5");
    let mut out = String::new();
    fsck.stdout
        .take()
        .unwrap()
        .read_to_string(&mut out)
        .unwrap();
    let progress = progress.join().unwrap();
    assert_eq!(code, 0, "{out}{err}");
    let ours = format!("[{}", bin.path().join("fsck.ext4").display());
    assert!(
        out.contains(&ours),
        "fsck did not run ffsck as fsck.ext4: {out}"
    );
    for l in [&l1, &l2] {
        assert!(out.contains(&format!("{}: ", l.path().display())), "{out}");
    }
    let first_lines = format!(" {}\n", l1.path().display());
    assert!(
        progress.contains(&first_lines),
        "no progress from the first check: {progress}"
    );
    if handed_over {
        let second_lines = format!(" {}\n", l2.path().display());
        assert!(
            progress.contains(&second_lines),
            "no progress from the second check after SIGUSR1: {progress}"
        );
    } else {
        eprintln!("note: the second check ended before fsck handed the progress over");
    }
}

/// A running process whose command line has `arg` (a checker started by fsck).
fn checker_with_arg(arg: &str) -> Option<u32> {
    std::fs::read_dir("/proc").ok()?.flatten().find_map(|e| {
        let pid: u32 = e.file_name().to_str()?.parse().ok()?;
        let cmdline = std::fs::read(e.path().join("cmdline")).ok()?;
        let has = cmdline.split(|&b| b == 0).any(|a| a == arg.as_bytes());
        let exe = std::fs::read_link(e.path().join("exe")).ok()?;
        let is_ffsck = std::fs::canonicalize(ffsck_bin()).is_ok_and(|b| b == exe);
        (has && is_ffsck).then_some(pid)
    })
}

/// A tree for a root file system: the directories the boot check needs as mount points,
/// and the host's merged-/usr links.
fn root_tree(t: &Tools) -> Image {
    let dir = tempfile::tempdir().unwrap();
    let tree = dir.path().join("tree");
    for d in [
        "usr", "dev", "proc", "sys", "run", "etc", "tmp", "ffbin", "data",
    ] {
        std::fs::create_dir_all(tree.join(d)).unwrap();
    }
    for l in ["bin", "sbin", "lib", "lib64", "lib32"] {
        match std::fs::read_link(Path::new("/").join(l)) {
            Ok(target) => std::os::unix::fs::symlink(target, tree.join(l)).unwrap(),
            Err(_) if Path::new("/").join(l).is_dir() => std::fs::create_dir(tree.join(l)).unwrap(),
            Err(_) => {}
        }
    }
    std::fs::write(tree.join("data/f"), b"some data\n").unwrap();
    let path = dir.path().join("root.img");
    std::fs::File::create(&path).unwrap();
    let out = Command::new(&t.mke2fs)
        .args(["-q", "-F", "-t", "ext4", "-d"])
        .arg(&tree)
        .arg(&path)
        .arg("16M")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "mke2fs: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    Image { dir, path }
}

/// Run `cmd` in a private mount namespace where the image on `lp` is mounted read-only and
/// is the root (chroot into its mount point: /proc/self/mountinfo shows it at "/"), with the
/// host's programs bound in and `fsck.ext4` linked to ffsck first in PATH. Fd 5 goes to
/// `progress`.
fn in_root(img: &Image, lp: &Loop, bin: &Path, progress: &Path, cmd: &str) -> Run {
    let nr = img.aux("newroot");
    std::fs::create_dir_all(&nr).unwrap();
    let mut script = format!(
        "set -e\nmount -o ro {dev} {nr}\n",
        dev = lp.path().display(),
        nr = nr.display()
    );
    for d in [
        "usr", "dev", "proc", "sys", "etc", "bin", "sbin", "lib", "lib64", "lib32",
    ] {
        let host = Path::new("/").join(d);
        if host.is_dir() && std::fs::read_link(&host).is_err() {
            script += &format!("mount --rbind /{d} {}/{d}\n", nr.display());
        }
    }
    // fsck -l locks under /run (a tmpfs at boot); the root itself stays read-only, and the
    // repair keeps its state on the device.
    script += &format!(
        "mount -t tmpfs tmpfs {nr}/run\n\
         mount --bind {bin} {nr}/ffbin\nexec 5>{progress}\nset +e\n\
         exec chroot {nr} env PATH=/ffbin:/usr/sbin:/usr/bin:/sbin:/bin E2FSCK_CONFIG=/dev/null \
         sh -c '{cmd}'\n",
        nr = nr.display(),
        bin = bin.display(),
        progress = progress.display(),
    );
    let mut c = Command::new("unshare");
    c.args(["-m", "--propagation", "private", "sh", "-c", &script]);
    run_with_timeout(c, DEFAULT_TIMEOUT).expect("the boot check timed out")
}

#[test]
fn a_read_only_root_is_checked_as_systemd_fsck_does_at_boot() {
    let Some(t) = machine() else { return };
    if Command::new("fsck").arg("--version").output().is_err() {
        common::skip("SKIPPED: util-linux fsck not found");
        return;
    }
    let img = root_tree(&t);
    let lp = Loop::new(&img.path, false);
    let dev = lp.path().display().to_string();
    let bin = fsck_ext4_dir();
    let progress = img.aux("progress");
    // What systemd-fsck runs for the root: no -M (util-linux fsck skips every mounted file
    // system with it, the root included).
    let grep_root = "grep \" / / \" /proc/self/mountinfo";
    let run = in_root(&img, &lp, bin.path(), &progress, grep_root);
    assert!(
        run.stdout.contains(" / / ro") && run.stdout.contains(&dev),
        "{}",
        all(&run)
    );
    for (cmd, forced) in [
        (format!("fsck -a -T -l -C 5 {dev}"), false),
        (format!("fsck -f -a -T -l -C 5 {dev}"), true),
    ] {
        let run = in_root(&img, &lp, bin.path(), &progress, &cmd);
        assert_eq!(run.code, Some(0), "{cmd}: {}", all(&run));
        let out = all(&run);
        assert!(
            !out.contains("busy") && !out.contains("in use"),
            "{cmd}: {out}"
        );
        assert!(
            !out.contains("is mounted"),
            "the read-only root is checked silently: {out}"
        );
        if forced {
            let lines = std::fs::read_to_string(&progress).unwrap();
            assert!(
                lines.contains(&format!(" {dev}\n")),
                "{cmd}: no progress: {lines}"
            );
        } else {
            assert!(out.contains(&format!("{dev}: clean, ")), "{cmd}: {out}");
        }
    }
    // With -M fsck does not run the checker at all.
    let cmd = format!("fsck -f -a -T -l -M -C 5 {dev}");
    let run = in_root(&img, &lp, bin.path(), &progress, &cmd);
    assert_eq!(run.code, Some(0), "{}", all(&run));
    assert!(
        !all(&run).contains(&dev),
        "fsck -M ran a check: {}",
        all(&run)
    );
    drop(lp);

    // A repair of the read-only root: fixed, and the exit code asks for a reboot, as
    // e2fsck's does.
    let mut codes = Vec::new();
    for (prog, cmd) in [
        ("ffsck", format!("fsck -f -a -T -l -C 5 {dev}")),
        ("ffsck", format!("fsck.ext4 -fy {dev}")),
        ("e2fsck", format!("e2fsck -fy {dev}")),
    ] {
        let copy = img.aux(&format!("copy-{}.img", codes.len()));
        std::fs::copy(&img.path, &copy).unwrap();
        debugfs_w(&t, &copy, "sif /data/f links_count 5");
        let lp = Loop::new(&copy, false);
        let cmd = cmd.replace(&dev, &lp.path().display().to_string());
        let run = in_root(&img, &lp, bin.path(), &progress, &cmd);
        let out = all(&run);
        assert_eq!(run.code, Some(3), "{prog}: {cmd}: {out}");
        assert!(
            out.contains(&format!(
                "{}: ***** REBOOT SYSTEM *****",
                lp.path().display()
            )),
            "{prog}: {out}"
        );
        codes.push(run.code);
        drop(lp);
        let (code, e) = e2fsck_n(&t, &copy);
        assert_eq!(code, 0, "{prog} left errors: {e}");
    }
}

/// The device nodes the kernel gives the partitions of loop device `lp` (`losetup -P`
/// scans them; `partx -a` adds them where the scan found none), or `None` after saying why
/// the calling test is skipped.
fn partition_node(lp: &Loop) -> Option<PathBuf> {
    let node = PathBuf::from(format!("{}p1", lp.path().display()));
    if !node.exists() {
        let _ = Command::new("partx").arg("-a").arg(lp.path()).status();
    }
    if !node.exists() {
        common::skip(&format!(
            "SKIPPED: needs partitions of loop devices ({} not created)",
            node.display()
        ));
        return None;
    }
    Some(node)
}

/// `ffsck -fy TARGET` refused with exit 8 and "TARGET is WHAT.", the image untouched.
fn assert_refused(ns: &Ns, img: &Path, target: &Path, what: &str) {
    let before = read_all(img);
    let dev = target.display().to_string();
    let run = ns.ffsck(&[os("-fy"), target.as_os_str()]);
    assert_eq!(run.code(), 8, "ffsck -fy {dev}:\n{}", all(&run));
    assert!(
        run.stderr.contains(&format!("{dev} is {what}.\n"))
            && run.stderr.contains("Cannot continue, aborting."),
        "ffsck -fy {dev}:\n{}",
        all(&run)
    );
    assert!(!run.stdout.contains("Pass 1"), "{}", all(&run));
    assert_same_bytes(
        &before,
        &read_all(img),
        &format!("image after ffsck -fy {dev}"),
    );
}

#[test]
fn a_mounted_partition_makes_its_disk_and_image_in_use() {
    let Some(t) = machine() else { return };
    let have_sfdisk = Command::new("sfdisk")
        .arg("--version")
        .stdout(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if !have_sfdisk {
        common::skip("SKIPPED: needs sfdisk (Debian's fdisk package; scripts/ensure-tools.sh)");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let disk = dir.path().join("disk.img");
    std::fs::File::create(&disk)
        .unwrap()
        .set_len(32 << 20)
        .unwrap();
    let mut sf = Command::new("sfdisk")
        .arg("-q")
        .arg(&disk)
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    sf.stdin
        .take()
        .unwrap()
        .write_all(b"start=2048, type=83\n")
        .unwrap();
    assert!(sf.wait().unwrap().success(), "test setup: sfdisk");
    let out = Command::new("losetup")
        .args(["-P", "-f", "--show"])
        .arg(&disk)
        .output()
        .unwrap();
    assert!(out.status.success(), "test setup: losetup -P");
    let lp = Loop(PathBuf::from(String::from_utf8_lossy(&out.stdout).trim()));
    let Some(part) = partition_node(&lp) else {
        return;
    };
    let made = Command::new(&t.mke2fs)
        .args(["-q", "-F", "-t", "ext4"])
        .arg(&part)
        .status()
        .unwrap();
    assert!(made.success(), "test setup: mke2fs on {}", part.display());
    let ns = Ns::new();
    let mnt = dir.path().join("mnt");
    std::fs::create_dir(&mnt).unwrap();
    ns.sh(&format!(
        "mount -o noatime,noinit_itable {} {} && sync",
        part.display(),
        mnt.display()
    ));
    // The disk (by its loop device or its image) is in use through its partition, as
    // e2fsck says of the loop device (found busy by its exclusive-open probe).
    for target in [lp.path(), disk.as_path()] {
        assert_refused(&ns, &disk, target, "in use");
        let run = ns.ffsck(&[os("-fy"), target.as_os_str()]);
        assert!(
            run.stderr.contains(&format!(
                "is in use: {} is mounted read-write on {}.",
                part.display(),
                mnt.display()
            )),
            "{}",
            all(&run)
        );
    }
    let e = ns.e2fsck(&t, &[os("-fy"), lp.path().as_os_str()]);
    assert_eq!(e.code, Some(8), "{}", all(&e));
    assert!(all(&e).contains("is in use."), "{}", all(&e));
    // The partition itself is mounted.
    assert_refused_mounted(&ns, &t, &disk, &part, "-fy", true);
    assert_refused_mounted(&ns, &t, &disk, &part, "-p", true);
    // -n on the partition warns and checks.
    let run = ns.ffsck(&[os("-fn"), part.as_os_str()]);
    assert_eq!(run.code(), 0, "{}", all(&run));
    assert!(run.stdout.contains("is mounted."), "{}", all(&run));
    drop(ns);
    // Unmounted: the partition is repaired as any device.
    let run = ffsck(&[os("-fy"), part.as_os_str()]);
    assert_eq!(run.code(), 0, "{}", all(&run));
}

/// A device-mapper device, removed when dropped.
struct Dm(String);

impl Drop for Dm {
    fn drop(&mut self) {
        let _ = Command::new("dmsetup")
            .args(["remove", "--retry", &self.0])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status();
    }
}

#[test]
fn a_device_mapper_device_over_a_loop_device_is_found() {
    let Some(t) = machine() else { return };
    // `dmsetup version` fails without the kernel's device-mapper driver.
    let dm_ok = Command::new("dmsetup")
        .arg("version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if !dm_ok {
        // Stays a skip under REQUIRE_TOOLS: the kernels of this machine and of CI have no
        // device-mapper driver, so `dmsetup version` fails there even with dmsetup installed.
        eprintln!(
            "SKIPPED: needs dmsetup and the kernel's device-mapper driver (scripts/ensure-tools.sh)"
        );
        return;
    }
    let img = mkfs(&t, "ext4", &[], "16M");
    let lp = Loop::new(&img.path, false);
    let name = format!("ffsck-test-{}", std::process::id());
    let sectors = std::fs::metadata(&img.path).unwrap().len() / 512;
    let out = Command::new("dmsetup")
        .args(["create", &name, "--table"])
        .arg(format!("0 {sectors} linear {} 0", lp.path().display()))
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "test setup: dmsetup create: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let dm = Dm(name);
    let mapped = PathBuf::from(format!("/dev/mapper/{}", dm.0));
    let _ = Command::new("dmsetup").arg("mknodes").status();
    assert!(mapped.exists(), "test setup: {} missing", mapped.display());
    let ns = Ns::new();
    let mnt = img.aux("mnt");
    std::fs::create_dir(&mnt).unwrap();
    ns.sh(&format!(
        "mount -o noatime,noinit_itable {} {} && sync",
        mapped.display(),
        mnt.display()
    ));
    for target in [lp.path(), img.path.as_path()] {
        assert_refused(&ns, &img.path, target, "in use");
    }
    assert_refused_mounted(&ns, &t, &img.path, &mapped, "-fy", true);
    drop(ns);
    // Unmounted, the device-mapper device still holds the loop device exclusively: a repair
    // through the loop device (or the image, whose loop device a repair holds) is refused
    // as "in use", as e2fsck refuses the loop device; -n warns and checks.
    for target in [lp.path(), img.path.as_path()] {
        assert_refused(&Ns::new(), &img.path, target, "in use");
    }
    let e = e2fsck(&t, &[os("-fy"), lp.path().as_os_str()]);
    assert_eq!(e.code, Some(8), "{}", all(&e));
    assert!(all(&e).contains("is in use."), "{}", all(&e));
    let run = ffsck(&[os("-fn"), lp.path().as_os_str()]);
    assert_eq!(run.code(), 0, "{}", all(&run));
    assert!(run.stdout.contains("in use."), "{}", all(&run));
    // The device-mapper device itself is repaired as any unmounted device.
    let run = ffsck(&[os("-fy"), mapped.as_os_str()]);
    assert_eq!(run.code(), 0, "{}", all(&run));
    drop(dm);
}
