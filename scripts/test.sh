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
