#!/usr/bin/env bash
# Run every test of the workspace (unit, integration, conformance when ../shared is present).
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/ensure-tools.sh
source scripts/build-env.sh
# Formatting and lints first (they fail fast). clippy.toml keeps the check off the clock. The
# release profile and build-env.sh's settings are the build's, so clippy reuses its build
# scripts and proc-macros and its own checked dependencies from the run before.
cargo fmt --all -- --check
cargo clippy --workspace --all-targets --release -- -D warnings
# The integration tests run the release binaries; build them first.
cargo build --release --workspace --bins
# Under REQUIRE_TOOLS=1 (set by .ci/run, which runs as root) a test that would skip for want
# of a tool or of root fails instead (tests/common's skip(); only a kernel without
# device-mapper stays a skip). Run by hand without it, such tests say "SKIPPED".
cargo test --release --workspace
# The in-process fuzzer (fuzz/, scripts/fuzz.sh), bounded to 90 seconds of fuzzing after its
# build: check, repair into the overlay and a check of the result on mutated in-memory images.
# A panic, a write to the input, an input over 10 s, an allocation over 256 MiB or 2 GiB of
# memory fails the run (the input is in fuzz/artifacts/). Longer runs by hand:
# `nice -n 19 scripts/fuzz.sh 7200`.
fuzz_log=target/fuzz-ci.log
# A fresh corpus each time (the seeds only), so the step stays within its two minutes.
rm -rf target/fuzz-ci-corpus
if ! FUZZ_CORPUS=target/fuzz-ci-corpus bash scripts/fuzz.sh 90 >"$fuzz_log" 2>&1; then
  tail -n 80 "$fuzz_log"
  echo "the in-process fuzzer found a crash (log: $fuzz_log, inputs: fuzz/artifacts/)" >&2
  exit 1
fi
grep '^stat::\|^Done' "$fuzz_log" || true
