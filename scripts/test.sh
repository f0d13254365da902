#!/usr/bin/env bash
# Run every test of the workspace (unit, integration, conformance when ../shared is present).
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/ensure-tools.sh
# The integration tests run the release binaries; build them first so the corpus test finds
# target/release/ffsck.
cargo build --release --workspace --bins
cargo test --release --workspace
