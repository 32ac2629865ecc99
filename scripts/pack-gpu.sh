#!/usr/bin/env bash
# Builds the release library, the CLI, the integration-test binaries and the overhead and
# preemption benchmarks, and copies them (stripped) into carry/ (git-ignored) for the GPU machine,
# which has no Rust toolchain. Then run there: bash scripts/gpu-check.sh
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release --workspace
list=$( (cargo test --release --workspace --no-run 2>&1; cargo bench --bench overhead --bench preempt --no-run 2>&1) |
  sed -n 's/.*Executable \(tests\|benches\)\/\(api_\|abi\|clinfo\|managed_\|program_binaries\|kernel_rewrite\|yield_rewrite\|overhead\|preempt\).*(\(.*\))/\3/p')
rm -rf carry/bin && mkdir -p carry/bin
for f in $list; do cp "$f" "carry/bin/$(basename "$f" | sed 's/-[0-9a-f]*$//')"; done
cp target/release/libsoftpreempt.so target/release/softpreempt carry/bin/
strip carry/bin/*
ls carry/bin
