#!/usr/bin/env bash
# Kernel spares on the GPU machine (docs/benchmarks.md, "A kernel object per launch"): the
# builds before and after, side by side, in alternating runs. Carry carry/bin with
# libsoftpreempt-before.so, libsoftpreempt-after.so and the overhead and pipeline
# benchmarks' binaries (stripped; see scripts/gpu/pack-yield.sh for how they are built).
# $1: "bench" (the overhead rows "create..." and the pipeline benchmark) or "opencv" (the
# lone OpenCV HP, bare and through each build).
set -u
cd "$(dirname "$0")/../.."
. scripts/gpu-env.sh
lib() { echo "$ROOT/carry/bin/libsoftpreempt-$1.so"; }
case ${1:-bench} in
  bench)
    for v in before after before after; do
      echo "== overhead $v"; SOFTPREEMPT_LIB=$(lib $v) timeout 100 carry/bin/overhead --only create
    done
    for v in before after; do
      echo "== pipeline $v"; SOFTPREEMPT_LIB=$(lib $v) timeout 150 carry/bin/pipeline --requests ${REQUESTS:-100}
    done;;
  opencv)
    for v in before after before after; do
      echo "== opencv HP alone, $v"
      python3 benches/opencv_pair.py --lib "$(lib $v)" --vendor-lib "$NV" \
        --runtime /usr/local/cuda/targets/x86_64-linux/lib/libOpenCL.so.1 --device-type GPU \
        --bare-platform 'NVIDIA CUDA' --scenarios hp-alone,hp-alone-sp --duration ${SECONDS_EACH:-6} 2>&1 |
        grep -v WARN | tail -4
    done;;
esac
