#!/usr/bin/env bash
# Writes the persistent entries of scripts/gpu/entry-cost/*.cl into carry/probe/ (for run.py
# on the GPU machine, which has no Rust): OpenCL C in, OpenCL C out.
set -euo pipefail
cd "$(dirname "$0")/../../.."
mkdir -p carry/probe
for k in mandel spin; do
  cargo run -q -p softpreempt-transform --example rewrite -- "scripts/gpu/entry-cost/$k.cl" \
    > "carry/probe/${k}_entry.cl"
done
