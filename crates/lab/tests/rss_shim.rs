//! The `__measure` shim must report a command's own peak RSS, not the lab's: a tiny command
//! started from a process that has grown large reports far less through the shim than it does
//! when forked straight from that process.

use std::ffi::OsString;
use std::path::Path;
use std::process::{Command, Stdio};

use ffsck_lab::child;

#[test]
fn tiny_command_reports_its_own_rss_not_the_labs() {
    // SAFETY (of intent): set before any thread of this test binary reads it.
    std::env::set_var(child::SHIM_ENV, env!("CARGO_BIN_EXE_ffsck-lab"));
    // Grow this process by 256 MiB of touched memory.
    let ballast: Vec<u8> = (0..256usize << 20).map(|i| (i % 251) as u8).collect();
    let sum: u64 = ballast.iter().step_by(4096).map(|&b| u64::from(b)).sum();
    assert!(sum > 0);

    let truth = Path::new("/bin/true");
    let (via_shim, used) = child::run_measured(truth, &[], None, None).unwrap();
    assert!(used, "the shim was not used");
    assert_eq!(via_shim.code(), Some(0));

    let mut direct = Command::new(truth);
    direct.stdin(Stdio::null());
    let direct = child::run(&mut direct, None).unwrap();
    eprintln!(
        "true: {} KiB via the shim, {} KiB forked directly",
        via_shim.max_rss_kib, direct.max_rss_kib
    );
    assert!(
        direct.max_rss_kib > 200 << 10,
        "direct fork did not inherit the floor ({} KiB): the test proves nothing here",
        direct.max_rss_kib
    );
    assert!(
        via_shim.max_rss_kib < 32 << 10,
        "shim reported {} KiB for /bin/true",
        via_shim.max_rss_kib
    );
    drop(ballast);
}

#[test]
fn shim_passes_exit_codes_and_signals_through() {
    std::env::set_var(child::SHIM_ENV, env!("CARGO_BIN_EXE_ffsck-lab"));
    let sh = Path::new("/bin/sh");
    let args = |s: &str| vec![OsString::from("-c"), OsString::from(s)];
    let (o, used) = child::run_measured(sh, &args("exit 4"), None, None).unwrap();
    assert!(used);
    assert_eq!(o.code(), Some(4));
    let (o, _) = child::run_measured(sh, &args("kill -SEGV $$"), None, None).unwrap();
    assert_eq!(o.signal(), Some(libc::SIGSEGV));
    // A timeout kills shim and command alike.
    let (o, used) = child::run_measured(
        sh,
        &args("sleep 30"),
        None,
        Some(std::time::Duration::from_millis(300)),
    )
    .unwrap();
    assert!(o.timed_out && !used);
}
