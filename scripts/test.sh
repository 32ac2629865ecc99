#!/usr/bin/env bash
# The README's test command: set everything up, build, and run every test through the real
# ICD loader with PoCL underneath.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
cargo build --workspace --all-targets
cargo test --workspace -- --test-threads=2
