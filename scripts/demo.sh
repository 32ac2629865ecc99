#!/usr/bin/env bash
# The README's main-job command: set everything up, build, and run the demo on the default
# (PoCL) device through the real ICD loader.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
cargo build --workspace --release
exec cargo run --release -q -p softpreempt-cli -- demo "$@"
