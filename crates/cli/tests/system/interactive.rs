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

/// The terminal's size: tall enough that a run's whole output stays on the screen.
const ROWS: u16 = 1000;
const COLS: u16 = 160;

/// A pseudo-terminal of [`ROWS`] by [`COLS`]: (controller, the terminal side).
fn openpty() -> (std::fs::File, OwnedFd) {
    let (mut ctl, mut term) = (-1, -1);
    let size = libc::winsize {
        ws_row: ROWS,
        ws_col: COLS,
        ws_xpixel: 0,
        ws_ypixel: 0,
    };
    // SAFETY: openpty writes two new descriptors; the null pointers ask for no name and the
    // default settings; the size is only read.
    let r = unsafe {
        libc::openpty(
            &mut ctl,
            &mut term,
            std::ptr::null_mut(),
            std::ptr::null(),
            &size,
        )
    };
    assert_eq!(r, 0, "openpty failed");
    // SAFETY: both descriptors are new and owned by nobody else.
    unsafe { (std::fs::File::from_raw_fd(ctl), OwnedFd::from_raw_fd(term)) }
}

/// Start `cmd` with a new pseudo-terminal as its standard input, output and error. Returns
/// the child, the controller to type on, and what the terminal shows as it comes.
pub(super) fn spawn_on_terminal(
    mut cmd: Command,
) -> (std::process::Child, std::fs::File, mpsc::Receiver<Vec<u8>>) {
    let (ctl, term) = openpty();
    let child = cmd
        .stdin(Stdio::from(term.try_clone().unwrap()))
        .stdout(Stdio::from(term.try_clone().unwrap()))
        .stderr(Stdio::from(term))
        .spawn()
        .unwrap();
    let typing = ctl.try_clone().unwrap();
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
    (child, typing, rx)
}

/// Run `ffsck -f IMG` on a terminal, typing one key of `keys` at each question. Returns the
/// exit code and everything shown on the terminal.
fn run_on_terminal(img: &std::path::Path, keys: &[u8]) -> (i32, String) {
    let (code, bytes) = on_terminal(&["-f"], img, keys, Duration::ZERO);
    (code, String::from_utf8_lossy(&bytes).replace("\r\n", "\n"))
}

/// Run `ffsck ARGS IMG` on a terminal, typing one key of `keys` at each question, `wait`
/// after it is shown. Returns the exit code and the bytes written to the terminal.
fn on_terminal(
    args: &[&str],
    img: &std::path::Path,
    keys: &[u8],
    wait: Duration,
) -> (i32, Vec<u8>) {
    let mut cmd = Command::new(common::ffsck_bin());
    cmd.args(args).arg(img).env("E2FSCK_CONFIG", "/dev/null");
    let (mut child, mut typing, rx) = spawn_on_terminal(cmd);
    let mut shown = Vec::new();
    let mut typed = 0;
    let start = Instant::now();
    let code = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status.code().unwrap_or(-1);
        }
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "ffsck still running; terminal so far:\n{}",
            String::from_utf8_lossy(&shown)
        );
        if let Ok(chunk) = rx.recv_timeout(Duration::from_millis(50)) {
            shown.extend_from_slice(&chunk);
        }
        let asked = String::from_utf8_lossy(&shown).matches("<y>? ").count();
        if asked > typed {
            assert!(
                typed < keys.len(),
                "an unexpected question:\n{}",
                String::from_utf8_lossy(&shown)
            );
            std::thread::sleep(wait);
            typing.write_all(&keys[typed..typed + 1]).unwrap();
            typed += 1;
        }
    };
    while let Ok(chunk) = rx.recv_timeout(Duration::from_millis(200)) {
        shown.extend_from_slice(&chunk);
    }
    (code, shown)
}

/// The lines a terminal shows after `bytes` (carriage returns, erasures and cursor moves
/// applied), trailing blanks trimmed.
fn screen(bytes: &[u8]) -> Vec<String> {
    let size = |n| std::num::NonZeroU16::new(n).unwrap();
    let mut term = vt100::Parser::new(size(ROWS), size(COLS), 0);
    term.process(bytes);
    let rows: Vec<String> = term.screen().rows(0, COLS).collect();
    assert!(
        rows.last().is_some_and(String::is_empty),
        "the output filled the terminal: the test sees only its last screen"
    );
    rows.iter().map(|r| r.trim_end().to_string()).collect()
}

/// Whether `line` holds some of the progress bar ("Pass 1 [█████░░░]  42% ETA 0:01").
fn bar_remnant(line: &str) -> bool {
    let bar_start = line.match_indices("Pass ").any(|(at, _)| {
        let rest = &line[at + 5..];
        let digits = rest.len() - rest.trim_start_matches(|c: char| c.is_ascii_digit()).len();
        digits > 0 && rest[digits..].starts_with(" [")
    });
    bar_start || line.contains('█') || line.contains('░') || line.contains("% ETA")
}

/// What the progress bar draws, somewhere in the bytes written to the terminal.
fn drew_a_bar(bytes: &[u8]) -> bool {
    String::from_utf8_lossy(bytes).contains("% ETA")
}

/// With `-C 0` the bar is drawn while the check runs, and a question waits for its answer
/// with the bar out of the way: on the screen (the terminal's output replayed) every
/// question is whole, with its answer after it, and no line keeps a piece of the bar.
#[test]
fn the_progress_bar_leaves_every_question_readable() {
    let Some(t) = common::tools() else { return };
    let img = damaged(&t);
    let f1 = common::inode_of(&t, &img.path, "/a/f1");
    let f2 = common::inode_of(&t, &img.path, "/a/f2");
    let f3 = common::inode_of(&t, &img.path, "/a/f3");
    // Each answer comes a while after its question: time for the bar to be redrawn ten times.
    let (code, bytes) = on_terminal(
        &["-f", "-C", "0"],
        &img.path,
        b"yny",
        Duration::from_secs(1),
    );
    assert!(drew_a_bar(&bytes), "{}", String::from_utf8_lossy(&bytes));
    let lines = screen(&bytes);
    let shown = lines.join("\n");
    // The version line first, as e2fsck's interactive run starts.
    let version = format!("ffsck {} (", env!("CARGO_PKG_VERSION"));
    assert!(lines[0].starts_with(&version), "{shown}");
    let blocks = (
        format!("Inode {f3}, i_blocks is 999, should be "),
        ".  Fix<y>? yes",
    );
    assert!(
        lines
            .iter()
            .any(|l| l.starts_with(&blocks.0) && l.ends_with(blocks.1)),
        "not on the screen: {}...{}\n{shown}",
        blocks.0,
        blocks.1
    );
    for q in [
        format!("Inode {f1} ref count is 7, should be 1.  Fix<y>? no"),
        format!("Inode {f2} ref count is 5, should be 1.  Fix<y>? yes"),
    ] {
        assert!(lines.contains(&q), "not on the screen: {q}\n{shown}");
    }
    for header in [
        "Pass 1: Checking inodes, blocks, and sizes",
        "Pass 5: Checking group summary information",
    ] {
        assert!(lines.iter().any(|l| l == header), "no {header}:\n{shown}");
    }
    assert!(
        !lines.iter().any(|l| bar_remnant(l)),
        "the bar left a line:\n{shown}"
    );
    // Errors left: 4 (the modified bit goes, as in e2fsck).
    assert_eq!(code, 4, "{shown}");
}

/// A repair that asks nothing (`-fy -C 0` on a terminal) ends with every line it printed on
/// the screen, as a run without the bar prints them, and nothing of the bar.
#[test]
fn the_progress_bar_leaves_nothing_behind() {
    let Some(t) = common::tools() else { return };
    let (img, plain) = (damaged(&t), damaged(&t));
    let (code, bytes) = on_terminal(&["-fy", "-C", "0"], &img.path, b"", Duration::ZERO);
    assert!(drew_a_bar(&bytes), "{}", String::from_utf8_lossy(&bytes));
    let lines = screen(&bytes);
    let shown = lines.join("\n");
    assert!(
        !lines.iter().any(|l| bar_remnant(l)),
        "the bar left a line:\n{shown}"
    );
    let out = Command::new(common::ffsck_bin())
        .arg("-fy")
        .arg(&plain.path)
        .env("E2FSCK_CONFIG", "/dev/null")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(code), "{shown}");
    let name = |p: &std::path::Path| p.display().to_string();
    let expected = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
    .replace(&name(&plain.path), &name(&img.path));
    for line in expected.lines().filter(|l| !l.is_empty()) {
        assert!(
            lines.iter().any(|l| l == line),
            "not on the screen: {line}\n{shown}"
        );
    }
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

/// A device one block short of the file system, its last block in use: the check cannot go
/// on, so a person is not asked "Abort?" (an answer of no would be ignored); the message is
/// shown alone and the run stops with exit 8, writing nothing.
#[test]
fn a_check_that_cannot_go_on_asks_no_abort_question() {
    let Some(t) = common::tools() else { return };
    let img = common::short_device_with_its_last_block_in_use(&t);
    let before = common::read_all(&img.path);
    let (code, bytes) = on_terminal(&["-f"], &img.path, b"", Duration::ZERO);
    let lines = screen(&bytes);
    let shown = lines.join("\n");
    assert_eq!(code, 8, "{shown}");
    assert!(
        lines.iter().any(|l| l
            == "The file system size (according to the superblock) is 8192 blocks, but the \
                device holds only 8191 blocks"),
        "{shown}"
    );
    assert!(!shown.contains("Abort"), "{shown}");
    common::assert_same_bytes(&before, &common::read_all(&img.path), "interactive run");
}
