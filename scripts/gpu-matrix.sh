#!/usr/bin/env bash
# The benchmark matrix (scripts/bench-matrix.sh) on the GPU machine, after
# scripts/pack-gpu.sh here, wrapping NVIDIA's driver (see gpu-env.sh). Results: $OUT/matrix.
# Usage: bash scripts/gpu-matrix.sh [bench-matrix flags: --quick, --rows LIST, ...]
set -u
. "$(dirname "$0")/gpu-env.sh"
bash "$(dirname "$0")/bench-matrix.sh" --preempt carry/bin/preempt --out "$OUT/matrix" "$@"
