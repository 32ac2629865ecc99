#!/usr/bin/env bash
# Chooses `yield_wait_us` by measurement (after scripts/gpu/pack-yield.sh): the compute,
# GEMM and Mandelbrot rows of the preemption benchmark at each cap in CAPS (default
# "400 1000 2000"), bare and through SoftPreempt. Results: printed, and $OUT/cap.tgz.
set -u
cd "$(dirname "$0")/../.."
. scripts/gpu-env.sh
R=$(mktemp -d)/cap; mkdir -p "$R"
for row in "compute|" "gemm|--lp-kernel gemm" "mandel|--lp-kernel mandel"; do
  name=${row%%|*} flags=${row#*|}
  for cap in ${CAPS:-400 1000 2000}; do
    # shellcheck disable=SC2086
    timeout 120 carry/bin/preempt $flags --lp-ms 50 --hp-us 450 --hp-burst 1 --gap-ms 20 \
      --modes hp-alone,corun-bare,corun-sp --duration 3 --sched "yield_wait_us=$cap" \
      --label "$name-$cap" --json "$R/$name-$cap.json" > "$R/$name-$cap.txt" 2>&1
    echo "== $name cap $cap us rc=$?"; grep -A4 "^mode" "$R/$name-$cap.txt" | tail -3
  done
done
tar czf "$OUT/cap.tgz" -C "$(dirname "$R")" cap
