#!/usr/bin/env bash
# Build and run ffsck-lab with the scripts' build settings: ./scripts/lab.sh bench --inodes 250000
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/ensure-tools.sh
source scripts/build-env.sh
cargo build --release --workspace --bins >&2
exec "$BIN/ffsck-lab" "$@"
