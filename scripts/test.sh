#!/usr/bin/env bash
# Run every test of the workspace (unit, integration, conformance when ../shared is present).
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/ensure-tools.sh
source scripts/build-env.sh
# The integration tests run the release binaries; build them first.
cargo build --release --workspace --bins
cargo test --release --workspace
