//! Interactive repair (no -n, -p or -y): each question is put on the terminal and answered
//! with one key (y, n, a = yes to all); only the fixes answered yes are made. Without a
//! terminal ffsck refuses, as e2fsck does, with exit code 8.

use crate::common;

use std::io::{Read, Write};
use std::os::fd::{FromRawFd, OwnedFd};
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// Three independent problems: i_blocks of /a/f3 (pass 1), then the link counts of /a/f1 and
/// /a/f2 (pass 4, in inode order).
fn damaged(t: &common::Tools) -> common::Image {
    let img = common::mkfs(t, "ext4", &[], "32M");
    // Pass 3A indexes the tree's 3-block directory whatever the answers, as e2fsck does.
    common::settle(t, &img.path);
    common::debugfs_w(t, &img.path, "sif /a/f3 blocks 999");
    common::debugfs_w(t, &img.path, "sif /a/f1 links_count 7");
    common::debugfs_w(t, &img.path, "sif /a/f2 links_count 5");
    img
}

/// A pseudo-terminal: (controller, the terminal side).
fn openpty() -> (std::fs::File, OwnedFd) {
    let (mut ctl, mut term) = (-1, -1);
    // SAFETY: openpty writes two new descriptors; the null pointers ask for no name and the
    // default settings.
    let r = unsafe {
        libc::openpty(
            &mut ctl,
            &mut term,
            std::ptr::null_mut(),
            std::ptr::null(),
            std::ptr::null(),
        )
    };
    assert_eq!(r, 0, "openpty failed");
    // SAFETY: both descriptors are new and owned by nobody else.
    unsafe { (std::fs::File::from_raw_fd(ctl), OwnedFd::from_raw_fd(term)) }
}

/// Run `ffsck -f IMG` on a terminal, typing one key of `keys` at each question. Returns the
/// exit code and everything shown on the terminal.
fn run_on_terminal(img: &std::path::Path, keys: &[u8]) -> (i32, String) {
    let (ctl, term) = openpty();
    let mut child = Command::new(common::ffsck_bin())
        .arg("-f")
        .arg(img)
        .stdin(Stdio::from(term.try_clone().unwrap()))
        .stdout(Stdio::from(term.try_clone().unwrap()))
        .stderr(Stdio::from(term))
        .spawn()
        .unwrap();
    let mut typing = ctl.try_clone().unwrap();
    let (tx, rx) = mpsc::channel();
    let mut reading = ctl;
    std::thread::spawn(move || {
        let mut buf = [0u8; 4096];
        // The read fails (EIO) once the last process holding the terminal side has exited.
        while let Ok(n @ 1..) = reading.read(&mut buf) {
            if tx.send(buf[..n].to_vec()).is_err() {
                break;
            }
        }
    });
    let mut shown = String::new();
    let mut typed = 0;
    let start = Instant::now();
    let code = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status.code().unwrap_or(-1);
        }
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "ffsck still running; terminal so far:\n{shown}"
        );
        if let Ok(chunk) = rx.recv_timeout(Duration::from_millis(50)) {
            shown.push_str(&String::from_utf8_lossy(&chunk));
        }
        let asked = shown.matches("<y>? ").count();
        if asked > typed {
            assert!(typed < keys.len(), "an unexpected question:\n{shown}");
            typing.write_all(&keys[typed..typed + 1]).unwrap();
            typed += 1;
        }
    };
    while let Ok(chunk) = rx.recv_timeout(Duration::from_millis(200)) {
        shown.push_str(&String::from_utf8_lossy(&chunk));
    }
    (code, shown.replace("\r\n", "\n"))
}

#[test]
fn only_the_fixes_answered_yes_are_made() {
    let Some(t) = common::tools() else { return };
    let img = damaged(&t);
    let f1 = common::inode_of(&t, &img.path, "/a/f1");
    let (code, shown) = run_on_terminal(&img.path, b"yny");
    assert!(
        shown.contains("i_blocks is 999, should be") && shown.contains("Fix<y>? yes"),
        "{shown}"
    );
    assert!(
        shown.contains(&format!(
            "Inode {f1} ref count is 7, should be 1.  Fix<y>? no"
        )),
        "{shown}"
    );
    // Modified, errors left: 4, as e2fsck (the modified bit goes).
    assert_eq!(code, 4, "{shown}");
    // What was answered no is all that is left.
    let (rc, out) = common::e2fsck_n(&t, &img.path);
    assert_eq!(rc, 4, "{out}");
    assert!(
        out.contains(&format!("Inode {f1} ref count is 7, should be 1")),
        "{out}"
    );
    assert!(
        !out.contains("i_blocks") && !out.contains("ref count is 5"),
        "{out}"
    );

    // Answering `a` at the first question fixes everything without further questions.
    let (code, shown) = run_on_terminal(&img.path, b"a");
    assert!(shown.contains("Fix<y>? yes to all"), "{shown}");
    assert_eq!(shown.matches("<y>? ").count(), 1, "{shown}");
    assert_eq!(code, 1, "{shown}");
    assert_eq!(common::e2fsck_n(&t, &img.path).0, 0);
}

/// Nothing is fixed; as e2fsck does, the superblock is still marked: checked now, and not
/// valid (its state, write and check times and checksum are all that change).
#[test]
fn answering_no_to_everything_fixes_nothing() {
    let Some(t) = common::tools() else { return };
    let img = damaged(&t);
    let before = common::read_all(&img.path);
    let (code, shown) = run_on_terminal(&img.path, b"nnn");
    assert_eq!(shown.matches("<y>? no").count(), 3, "{shown}");
    assert_eq!(code, 4, "{shown}");
    let after = common::read_all(&img.path);
    let marks = [0x30..0x34, 0x3A..0x3C, 0x40..0x44, 0x3FC..0x400];
    let changed: Vec<usize> = (0..before.len())
        .filter(|&i| before[i] != after[i])
        .collect();
    assert!(
        changed
            .iter()
            .all(|&i| marks.iter().any(|m| m.contains(&(i.wrapping_sub(1024))))),
        "after three noes, bytes besides the superblock's marks changed: {changed:?}"
    );
    assert_eq!(
        common::read_all(&img.path)[1024 + 0x3A] & 1,
        0,
        "state still valid"
    );
}

#[test]
fn without_a_terminal_an_interactive_repair_is_refused() {
    let Some(t) = common::tools() else { return };
    let img = damaged(&t);
    let before = common::read_all(&img.path);
    let out = Command::new(common::ffsck_bin())
        .arg("-f")
        .arg(&img.path)
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(8));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("need terminal for interactive repairs"),
        "{err}"
    );
    common::assert_same_bytes(&before, &common::read_all(&img.path), "refused run");
}
