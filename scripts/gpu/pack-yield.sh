#!/usr/bin/env bash
# Builds what scripts/gpu/yield-run.sh runs on the GPU machine (it has no Rust) into carry/
# (git-ignored): the release library, the softpreempt command, the preempt and pipeline
# benchmarks and the managed_yield test.
set -euo pipefail
cd "$(dirname "$0")/../.."
cargo build --release -p softpreempt-icd -p softpreempt-cli
bins=$( (cargo test --release --test managed_yield --no-run 2>&1; cargo bench --bench preempt --bench pipeline --no-run 2>&1) |
  sed -n 's/.*Executable \(tests\|benches\)\/\(managed_yield\|preempt\|pipeline\).*(\(.*\))/\3/p')
mkdir -p carry/bin
for f in $bins; do cp "$f" "carry/bin/$(basename "$f" | sed 's/-[0-9a-f]*$//')"; done
strip --strip-debug -o carry/bin/libsoftpreempt.so target/release/libsoftpreempt.so
cp target/release/softpreempt carry/bin/
strip carry/bin/managed_yield carry/bin/preempt carry/bin/pipeline carry/bin/softpreempt
ls -la carry/bin
