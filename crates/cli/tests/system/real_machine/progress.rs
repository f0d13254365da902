//! ffsck on a real machine, the progress and the boot: SIGUSR1/SIGUSR2, util-linux `fsck -C`
//! handing the progress over, and a read-only root checked as systemd-fsck does at boot.

use super::*;

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
