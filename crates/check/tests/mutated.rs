//! The in-process fuzzer's property (fuzz/fuzz_targets/check_repair.rs), in the test suite:
//! on images from `ffsck-testfs` with a few bytes of their metadata changed at random (a fixed
//! seed, so every run checks the same cases), a read-only check, a repair into the overlay and
//! a check of the repaired image must not panic, must not write their input, and the
//! read-only check must report the same findings on one thread and on two. (Built without
//! `--release`, the tests have overflow checks, so an overflow on an on-disk value fails here
//! too.) A longer hunt by hand: `FFSCK_MUTATED_CASES=100000 FFSCK_MUTATED_SEED=7 cargo test -p
//! ffsck-check --test mutated -- --nocapture` (cases per flavour; the default is 400 and seed
//! 0x5eedf022).

use ffsck_check::repair;
use ffsck_check::testing::{apply, findings, FormatAll, WriteTrap};
use ffsck_check::{check, CheckOptions, Policy};
use ffsck_testfs::{Image, Options};

fn options(policy: Policy, threads: usize) -> CheckOptions {
    CheckOptions {
        policy,
        threads,
        now: 1_700_000_000,
        ..CheckOptions::default()
    }
}

/// Check, compare thread counts, repair, check the result. Returns whether the check found
/// something and whether the repair fixed something.
fn exercise(image: Vec<u8>, what: &str) -> (bool, bool) {
    let dev = WriteTrap::device(image.clone());
    let one = findings(&dev, &options(Policy::No, 1));
    assert_eq!(
        one,
        findings(&dev, &options(Policy::No, 2)),
        "{what}: findings differ on two threads"
    );
    let out = repair(dev, &options(Policy::Yes, 1), &mut FormatAll);
    let fixed_some = out.findings.iter().any(|f| f.fixed);
    let fixed = apply(image, &out.changes).unwrap_or_else(|e| panic!("{what}: {e}"));
    check(
        WriteTrap::device(fixed),
        &options(Policy::No, 1),
        &mut FormatAll,
    );
    (!one.is_empty(), fixed_some)
}

/// A small deterministic generator (xorshift64*).
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
}

/// Where the damage lands (byte ranges of a built image): the superblock's fields, the
/// descriptor, the used ends of both bitmaps, the used inodes, and the directory and file
/// blocks after the inode table (`ffsck_testfs`'s layout).
const REGIONS: [(usize, usize); 6] = [
    (1024, 1024 + 0x180),
    (2048, 2048 + 32),
    (3 * 1024, 3 * 1024 + 32),
    (4 * 1024, 4 * 1024 + 16),
    (5 * 1024, 5 * 1024 + 14 * 256),
    (37 * 1024, 45 * 1024),
];

#[test]
fn mutated_images_neither_panic_nor_write_their_input() {
    let env = |name: &str, default: u64| {
        std::env::var(name)
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(default)
    };
    let cases = env("FFSCK_MUTATED_CASES", 400) as usize;
    // Odd (xorshift needs a non-zero state), one state per seed.
    let mut rng = Rng(env("FFSCK_MUTATED_SEED", 0x5eed_f022) << 1 | 1);
    for (name, opts) in [("ext2", Options::ext2()), ("ext4", Options::ext4())] {
        let clean = Image::build(Options {
            blocks: Some(128),
            ..opts
        })
        .finish();
        assert_eq!(
            exercise(clean.clone(), name),
            (false, false),
            "{name} is clean"
        );
        let (mut found, mut changed) = (0, 0);
        for case in 0..cases {
            let mut img = clean.clone();
            let mut edits = Vec::new();
            for _ in 0..1 + rng.below(8) {
                let (lo, hi) = REGIONS[rng.below(REGIONS.len())];
                let off = lo + rng.below(hi - lo);
                let v = match rng.below(4) {
                    0 => img[off] ^ (1 << rng.below(8)),
                    1 => 0xff,
                    2 => 0,
                    _ => rng.next() as u8,
                };
                img[off] = v;
                edits.push((off, v));
            }
            let (f, c) = exercise(img, &format!("{name} case {case}: {edits:?}"));
            found += usize::from(f);
            changed += usize::from(c);
        }
        eprintln!("{name}: {found} of {cases} damaged images found damaged, {changed} repaired");
        // The damage reaches the check and the repair (not all of it: free inodes' bytes).
        assert!(
            found > 100 && changed > 50,
            "{name}: {found} found, {changed} repaired"
        );
    }
}
