#!/usr/bin/env bash
# Writes the preemption benchmark's Mandelbrot and compute kernels (from benches/preempt.rs)
# and their persistent entries into carry/probe/, for run.py on the GPU machine (which has
# no Rust): OpenCL C in, OpenCL C out.
set -euo pipefail
cd "$(dirname "$0")/../../.."
mkdir -p carry/probe
for k in mandel spin; do
  # The kernel's text: from its `__kernel void NAME(` to the `}";` that ends the literal.
  sed -n "/__kernel void $k(/,/^ *}\";/p" benches/preempt.rs | sed 's/^        //; s/}";$/}/' \
    > "carry/probe/$k.cl"
  cargo run -q -p softpreempt-transform --example rewrite -- "carry/probe/$k.cl" \
    > "carry/probe/${k}_entry.cl"
done
