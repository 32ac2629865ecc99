#!/usr/bin/env bash
# The high-priority path's figures on the GPU machine (after scripts/gpu/pack-yield.sh):
# the OpenCV pair REPS times (the lone HP's p50 swings between runs), then the per-command
# pipeline benchmark. Results: printed, and $OUT/hp-check.tgz.
set -u
cd "$(dirname "$0")/../.."
. scripts/gpu-env.sh
R=$(mktemp -d)/hp-check; mkdir -p "$R"
for i in $(seq "${REPS:-2}"); do
  python3 benches/opencv_pair.py --lib "$SOFTPREEMPT_LIB" --vendor-lib "$NV" \
    --runtime /usr/local/cuda/targets/x86_64-linux/lib/libOpenCL.so.1 --device-type GPU \
    --bare-platform "NVIDIA CUDA" --duration "${DURATION:-10}" --json "$R/opencv-pair-$i.json" 2>&1 |
    grep -v WARN | tail -8 | tee "$R/opencv-pair-$i.txt"
done
timeout 400 carry/bin/pipeline --json "$R/pipeline.json" 2>&1 | tail -12 | tee "$R/pipeline.txt"
tar czf "$OUT/hp-check.tgz" -C "$(dirname "$R")" hp-check
