//! libFuzzer target: one input is one packed image (`ffsck_testfs::packed`, at most
//! [`CAP`] bytes unpacked). On it the target runs a read-only check (`-n`), a repair into the
//! copy-on-write overlay, and a read-only check of the repaired image. The input's length
//! picks the repair: `-y`; `-p`; `-yD` (every directory rebuilt); or `-y` after the read-only
//! check ran again on two threads, in the pipeline, and spilling to scratch files under a tiny
//! `--max-memory`, each of which must report the same findings, in the same order, as one
//! thread (the engine's promise: findings do not depend on threads or tuning). The input
//! device refuses every write, so a check or repair that writes its input is a crash, as is a
//! panic, an allocation larger than [`MAX_ALLOC`] (an allocation sized by an unchecked on-disk
//! field), or an input that runs longer than libFuzzer's `-timeout` (an unbounded loop).
//! `scripts/fuzz.sh` builds, seeds and runs it.
#![no_main]

use ffsck_check::repair;
use ffsck_check::testing::{apply, findings, FormatAll, WriteTrap};
use ffsck_check::{check, CheckOptions, Policy};
use libfuzzer_sys::fuzz_target;
use std::alloc::{GlobalAlloc, Layout, System};

/// The largest image an input unpacks to (the seeds are 128 KiB to 4 MiB).
const CAP: usize = 4 << 20;
/// The largest single allocation the check may make on an image of at most [`CAP`] bytes.
const MAX_ALLOC: usize = 256 << 20;
/// The clock of every run (2023-11-14), so runs are reproducible.
const NOW: i64 = 1_700_000_000;

/// The system allocator, aborting on one allocation above [`MAX_ALLOC`] (libFuzzer's
/// `-malloc_limit_mb` needs a sanitizer's malloc hooks; this works without one).
struct Capped;

unsafe impl GlobalAlloc for Capped {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        check_size(layout.size());
        System.alloc(layout)
    }
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        check_size(layout.size());
        System.alloc_zeroed(layout)
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        System.dealloc(ptr, layout)
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        check_size(new_size);
        System.realloc(ptr, layout, new_size)
    }
}

thread_local! {
    /// Set while an oversized allocation is being reported, so the report's own (small)
    /// allocations pass.
    static REPORTING: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

fn check_size(n: usize) {
    if n > MAX_ALLOC && !REPORTING.with(|r| r.replace(true)) {
        // The report allocates (a backtrace, formatting): small allocations, let through by
        // REPORTING. Then abort: libFuzzer reports the crash and saves the input.
        eprintln!(
            "ffsck-fuzz: one allocation of {n} bytes, above MAX_ALLOC (sized by an unchecked field?)\n{}",
            std::backtrace::Backtrace::force_capture()
        );
        std::process::abort();
    }
}

#[global_allocator]
static ALLOC: Capped = Capped;

fn options(policy: Policy) -> CheckOptions {
    CheckOptions {
        policy,
        threads: 1,
        now: NOW,
        ..CheckOptions::default()
    }
}

/// `FFSCK_FUZZ_SELFTEST=1`: an input starting `selftest-panic` panics and one starting
/// `selftest-alloc` allocates over the cap, so `scripts/fuzz.sh` proves both are reported as
/// crashes before it trusts a run that found none.
fn self_test(data: &[u8]) {
    static ON: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    if !*ON.get_or_init(|| std::env::var_os("FFSCK_FUZZ_SELFTEST").is_some()) {
        return;
    }
    if data.starts_with(b"selftest-panic") {
        panic!("self-test panic");
    }
    if data.starts_with(b"selftest-alloc") {
        std::hint::black_box(Vec::<u8>::with_capacity(MAX_ALLOC + 1));
    }
}

fn run(data: &[u8]) {
    self_test(data);
    let image = ffsck_testfs::packed::unpack(data, CAP);
    let dev = WriteTrap::device(image.clone());
    let one = findings(&dev, &options(Policy::No));
    let mut opts = options(Policy::Yes);
    match data.len() % 4 {
        0 => {}
        1 => opts.policy = Policy::Preen,
        2 => {
            let mut other = options(Policy::No);
            other.threads = 2;
            assert_eq!(
                one,
                findings(&dev, &other),
                "findings differ on two threads"
            );
            other.tuning.pipeline = true;
            assert_eq!(
                one,
                findings(&dev, &other),
                "findings differ in the pipeline"
            );
            other.tuning.max_memory = Some(1024);
            assert_eq!(one, findings(&dev, &other), "findings differ when spilled");
        }
        _ => opts.optimize_dirs = true,
    }
    let out = repair(dev, &opts, &mut FormatAll);
    if out.changes.is_empty() {
        return;
    }
    // The repaired image, checked again read-only.
    let fixed = apply(image, &out.changes).unwrap_or_else(|e| panic!("{e}"));
    check(
        WriteTrap::device(fixed),
        &options(Policy::No),
        &mut FormatAll,
    );
}

fuzz_target!(|data: &[u8]| run(data));
