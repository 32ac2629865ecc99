#!/usr/bin/env bash
# A short look at yielding launches on the GPU machine (after scripts/gpu/pack-yield.sh):
# four LP kernels of the benchmark matrix next to the single-kernel HP, bare and through
# SoftPreempt at defaults, then the OpenCV pair. ROWS picks rows (default: "compute gemm
# mandel memory"). Results: printed, and $OUT/diag.tgz.
set -u
cd "$(dirname "$0")/../.."
. scripts/gpu-env.sh
R=$(mktemp -d)/diag; mkdir -p "$R"
while IFS= read -r row <&3; do
  name=${row%%|*} flags=${row#*|}
  # shellcheck disable=SC2086
  timeout 120 carry/bin/preempt $flags --lp-ms 50 --hp-us 450 --hp-burst 1 --gap-ms 20 \
    --modes hp-alone,corun-bare,corun-sp,arrival-bare,arrival-sp,lp-bare --duration 3 --arrival-reps 2 \
    --label "$name" --json "$R/$name.json" > "$R/$name.txt" 2>&1
  echo "== $name rc=$?"; grep -A7 "^mode" "$R/$name.txt"
done 3< <(matrix_rows "${ROWS:-compute gemm mandel memory}")
python3 benches/opencv_pair.py --lib "$SOFTPREEMPT_LIB" --vendor-lib "$NV" \
  --runtime /usr/local/cuda/targets/x86_64-linux/lib/libOpenCL.so.1 --device-type GPU \
  --bare-platform 'NVIDIA CUDA' --duration "${DURATION:-10}" --json "$R/opencv-pair.json" 2>&1 | grep -v WARN | tail -8
tar czf "$OUT/diag.tgz" -C "$(dirname "$R")" diag
