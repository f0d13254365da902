//! Interactive repair against e2fsck under the same answers: both checkers run on a
//! pseudo-terminal, a person's answers are drawn from the question's text (so both get the
//! same ones), and each result is judged by `e2fsck -fn`. Every "yes" shown must be a fix
//! made, the exit code must be e2fsck's, the questions must come in pass order under their
//! headers, and ffsck's result may not hold more problems than e2fsck's.

use crate::common;

use std::io::Write;
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

/// One interactive run: the exit code, everything shown, and each question with its answer.
struct Session {
    code: i32,
    shown: String,
    asked: Vec<(String, bool)>,
}

/// Run `bin -f IMG` on a terminal; at each question (a prompt ending `<y>? ` or `<n>? `) type
/// what `answer` says for the text shown since the previous answer.
fn run(bin: &Path, img: &Path, answer: &dyn Fn(&str) -> bool) -> Session {
    let mut cmd = Command::new(bin);
    cmd.arg("-f").arg(img);
    let (mut child, mut typing, rx) = super::interactive::spawn_on_terminal(cmd);
    let mut shown = String::new();
    let mut asked = Vec::new();
    let mut since = 0;
    let start = Instant::now();
    let code = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status.code().unwrap_or(-1);
        }
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "{} still running; terminal so far:\n{shown}",
            bin.display()
        );
        if let Ok(chunk) = rx.recv_timeout(Duration::from_millis(20)) {
            shown.push_str(&String::from_utf8_lossy(&chunk));
        }
        if shown.ends_with("<y>? ") || shown.ends_with("<n>? ") {
            let question = shown[since..].replace('\r', "");
            let yes = answer(&question);
            typing.write_all(if yes { b"y" } else { b"n" }).unwrap();
            asked.push((question, yes));
            // The next question starts after the line that echoes this answer.
            let echoed = shown.len();
            while !shown[echoed..].contains('\n') && start.elapsed() < Duration::from_secs(60) {
                if let Ok(chunk) = rx.recv_timeout(Duration::from_millis(20)) {
                    shown.push_str(&String::from_utf8_lossy(&chunk));
                }
                if child.try_wait().unwrap().is_some() {
                    break;
                }
            }
            since = shown[echoed..]
                .find('\n')
                .map_or(shown.len(), |i| echoed + i + 1);
        }
    };
    while let Ok(chunk) = rx.recv_timeout(Duration::from_millis(200)) {
        shown.push_str(&String::from_utf8_lossy(&chunk));
    }
    Session {
        code,
        shown: shown.replace("\r\n", "\n"),
        asked,
    }
}

/// The questions `e2fsck -fn` puts on `img`: each problem it finds, as the lines it shows.
fn problems_left(t: &common::Tools, img: &Path) -> Vec<String> {
    let (_, out) = common::e2fsck_n(t, img);
    out.split("\n\n")
        .filter(|b| b.contains("? no"))
        .map(|b| b.trim().to_string())
        .collect()
}

/// The problem a question (or a finding `e2fsck -fn` shows) is about: its message without
/// the prompt, the answer or the numbers, so the same problem in both checkers' words, and in
/// each round of a repair, has the same shape.
fn shape(question: &str) -> String {
    let q = question.trim_end();
    let q = q
        .strip_suffix(" yes")
        .or_else(|| q.strip_suffix(" no"))
        .unwrap_or(q);
    let body = q.rfind('?').map_or(q, |end| &q[..end]);
    // The prompt follows the message after two spaces or on a line of its own.
    let cut = [body.rfind("  "), body.rfind('\n')]
        .into_iter()
        .flatten()
        .max();
    let message = cut.map_or(body, |c| &body[..c]);
    let kept: Vec<&str> = message
        .lines()
        .map(str::trim)
        .filter(|l| {
            !l.is_empty()
                && !["yes", "no", "es", "o", "yes to all"].contains(l)
                && !l.starts_with("Pass ")
                && !l.starts_with("e2fsck ")
                && !l.starts_with("ffsck ")
        })
        .collect();
    let last = kept.last().copied().unwrap_or("");
    last.chars()
        .filter(|c| !c.is_ascii_digit())
        .collect::<String>()
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
}

/// A person's answers, drawn from `seed` and the question's shape: no with chance
/// `no_in_1000`/1000.
fn person(seed: u64, no_in_1000: u64) -> impl Fn(&str) -> bool {
    move |q: &str| {
        // FNV-1a over the shape, then mixed with the seed.
        let mut h: u64 = 0xcbf2_9ce4_8422_2325 ^ seed.wrapping_mul(0x9E37_79B9_7F4A_7C15);
        for b in shape(q).bytes() {
            h = (h ^ u64::from(b)).wrapping_mul(0x100_0000_01b3);
        }
        h ^= h >> 29;
        h % 1000 >= no_in_1000
    }
}

/// The damaged images: (what, the image). Each is built at run time.
fn damaged(t: &common::Tools) -> Vec<(&'static str, common::Image)> {
    let mut out = Vec::new();
    // The case: a directory's links count, a cleared file, freed blocks of another.
    let img = common::mkfs(t, "ext4", &[], "32M");
    common::debugfs_w(t, &img.path, "sif /a links_count 7");
    common::debugfs_w(t, &img.path, "clri /a/f1");
    let b = common::bmap(t, &img.path, "/a/f3", 0);
    common::debugfs_w(t, &img.path, &format!("freeb {b} 3"));
    out.push(("links, a cleared file, freed blocks", img));
    // A cleared directory: its entries' inodes go to /lost+found; a dtime on a file.
    let img = common::mkfs(t, "ext4", &["-b", "1024"], "16M");
    common::debugfs_w(t, &img.path, "clri /b");
    common::debugfs_w(t, &img.path, "sif /a/f2 dtime 12345");
    common::debugfs_w(t, &img.path, "sif /a/f1 size 1");
    out.push(("a cleared directory, a dtime, a size", img));
    // An inode freed in the bitmap, blocks marked that nobody owns, a bad block number.
    let img = common::mkfs(t, "ext3", &[], "16M");
    common::debugfs_w(t, &img.path, "freei /a/f2");
    common::debugfs_w(t, &img.path, "setb 9000 5");
    common::debugfs_w(t, &img.path, "sif /a/f3 block[1] 15999");
    out.push(("a freed inode, stray blocks, a bad block number", img));
    out
}

/// Run both checkers with `answers` on copies of `img` and judge both results.
fn compare(t: &common::Tools, what: &str, img: &common::Image, seed: u64, no: u64) {
    let ours = img.aux(&format!("ffsck-{seed}-{no}.img"));
    let theirs = img.aux(&format!("e2fsck-{seed}-{no}.img"));
    std::fs::copy(&img.path, &ours).unwrap();
    std::fs::copy(&img.path, &theirs).unwrap();
    let answers = person(seed, no);
    let f = run(&common::ffsck_bin(), &ours, &answers);
    let e = run(&t.e2fsck, &theirs, &answers);
    let (f_left, e_left) = (problems_left(t, &ours), problems_left(t, &theirs));
    let answered = |s: &Session| {
        s.asked
            .iter()
            .map(|(q, y)| format!("{} <- {} ({q:?})", shape(q), if *y { "yes" } else { "no" }))
            .collect::<Vec<_>>()
            .join("\n")
    };
    let context = format!(
        "{what}, answers {seed}/{no}:\n--- ffsck (exit {}):\n{}\n--- e2fsck (exit {}):\n{}\n--- e2fsck -fn on ffsck's result:\n{}\n--- on e2fsck's:\n{}\n--- ffsck's answers:\n{}\n--- e2fsck's:\n{}",
        f.code,
        f.shown,
        e.code,
        e.shown,
        f_left.join("\n\n"),
        e_left.join("\n\n"),
        answered(&f),
        answered(&e),
    );
    assert_eq!(f.code, e.code, "exit codes differ: {context}");
    assert!(
        f_left.len() <= e_left.len(),
        "more problems left than e2fsck leaves: {context}"
    );
    // Every yes shown was carried out: no problem answered yes is found again.
    for (q, _) in f.asked.iter().filter(|(_, yes)| *yes) {
        let s = shape(q);
        assert!(
            !f_left.iter().any(|l| shape(l) == s),
            "answered yes, yet found again: {s}\n{context}"
        );
    }
    assert_pass_order(&f.shown);
}

/// The pass headers come in order, once each, and every question sits under its pass's
/// header (a reference count question under pass 4, a bitmap one under pass 5).
fn assert_pass_order(shown: &str) {
    let mut pass = 0;
    for line in shown.lines() {
        if let Some(rest) = line.strip_prefix("Pass ") {
            let n: u8 = rest[..1].parse().unwrap_or(0);
            assert!(n > pass, "pass {n} after pass {pass}:\n{shown}");
            pass = n;
        }
        let under = |p: u8| assert_eq!(pass, p, "{line:?} under pass {pass}:\n{shown}");
        if line.contains("ref count is") || line.starts_with("Unattached ") {
            under(4);
        }
        if line.contains("bitmap differences") || line.starts_with("Free ") {
            under(5);
        }
        if line.starts_with("Entry '") {
            under(2);
        }
    }
}

/// The case as it was reported: no to the reference count, yes to everything else.
/// Before, ffsck showed "yes" for the bitmaps and counts, made none of them, asked pass 4's
/// question after pass 5's and exited 5.
#[test]
fn yes_to_all_but_a_count_makes_every_yes() {
    let Some(t) = common::tools() else { return };
    let (what, img) = damaged(&t).swap_remove(0);
    let a = common::inode_of(&t, &img.path, "/a");
    let no_count = |q: &str| !q.contains(&format!("Inode {a} ref count"));
    let ours = img.aux("ours.img");
    std::fs::copy(&img.path, &ours).unwrap();
    let f = run(&common::ffsck_bin(), &ours, &no_count);
    assert!(
        f.asked.iter().any(|(q, y)| !y && q.contains("ref count")),
        "{what}: the count was not asked:\n{}",
        f.shown
    );
    assert_eq!(f.code, 4, "errors left: 4, as e2fsck (not 5):\n{}", f.shown);
    let left = problems_left(&t, &ours);
    assert_eq!(
        left.len(),
        1,
        "only the count answered no is left: {left:?}"
    );
    assert!(left[0].contains("ref count"), "{left:?}");
    assert_pass_order(&f.shown);
    compare(&t, what, &img, 0, 0);
}

/// Mixed answers on each damaged image, as e2fsck takes them.
#[test]
fn mixed_answers_end_as_e2fsck_ends() {
    let Some(t) = common::tools() else { return };
    for (what, img) in damaged(&t) {
        for (seed, no) in [(1, 300), (2, 500), (3, 700), (4, 1000), (5, 0)] {
            compare(&t, what, &img, seed, no);
        }
    }
}
