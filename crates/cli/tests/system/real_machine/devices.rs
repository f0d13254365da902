//! ffsck on a real machine, the devices: mounted file systems (also through bind mounts,
//! second loop devices, partitions and device-mapper), read-only mounts and media, open
//! failures, and two runs on one image.

use super::*;

#[test]
fn a_mounted_image_is_refused_for_repair_and_warned_for_a_check() {
    let Some(t) = machine() else { return };
    let (img, lp) = image_on_loop(&t);
    let ns = Ns::new();
    let mnt = img.aux("mnt");
    ns.mount(lp.path(), &mnt, "noatime,noinit_itable");
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
    let (img, lp) = image_on_loop(&t);
    let ns = Ns::new();
    ns.mount(lp.path(), &img.aux("mnt"), "ro");
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
        let hint = "You must have r/w access to the filesystem or be root";
        assert_both_refuse(args, &run, &e, &[hint]);
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
        let hint =
            "Disk write-protected; use the -n option to do a read-only\ncheck of the device.";
        assert_both_refuse(args, &run, &e, &[hint]);
    }
    drop(ns);
    // No write permission (root without it: setpriv to nobody): EACCES.
    if runs("setpriv", "--version") {
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
        let hint = "You must have r/w access to the filesystem or be root";
        assert_both_refuse("-fy as nobody", &run, &e, &[hint]);
        assert!(
            run.stderr
                .contains("Permission denied while trying to open"),
            "{}",
            all(&run)
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
        assert_both_refuse(args, &run, &e, &["Possibly non-existent device?"]);
        assert!(
            !all(&run).contains("must be a block device"),
            "{}",
            all(&run)
        );
        let run = ffsck(&[os(args), dir.path().as_os_str()]);
        let e = e2fsck(&t, &[os(args), dir.path().as_os_str()]);
        assert_both_refuse(args, &run, &e, &["Is a directory while trying to open"]);
    }
    assert_eq!(listing(dir.path()), Vec::<String>::new());
    // A bad -C descriptor, as e2fsck reports it.
    let img = mkfs(&t, "ext4", &[], "8M");
    for c in ["99", "-99"] {
        let run = ffsck(&[os("-C"), os(c), os("-fn"), img.path.as_os_str()]);
        let e = e2fsck(&t, &[os("-C"), os(c), os("-fn"), img.path.as_os_str()]);
        assert_both_refuse(
            &format!("-C {c}"),
            &run,
            &e,
            &[
                "Error validating file descriptor 99: Bad file descriptor",
                "Invalid completion information file descriptor",
            ],
        );
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
    if !runs("sfdisk", "--version") {
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
    let lp = Loop::partitioned(&disk);
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
    ns.mount(&part, &mnt, "noatime,noinit_itable");
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
    if !runs("dmsetup", "version") {
        // Stays a skip under REQUIRE_TOOLS: the kernels of this machine and of CI have no
        // device-mapper driver, so `dmsetup version` fails there even with dmsetup installed.
        eprintln!(
            "SKIPPED: needs dmsetup and the kernel's device-mapper driver (scripts/ensure-tools.sh)"
        );
        return;
    }
    let (img, lp) = image_on_loop(&t);
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
    ns.mount(&mapped, &img.aux("mnt"), "noatime,noinit_itable");
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
