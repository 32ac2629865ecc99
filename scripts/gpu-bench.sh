#!/usr/bin/env bash
# The preemption benchmark on the GPU machine (after scripts/pack-gpu.sh here), wrapping
# NVIDIA's driver (see gpu-env.sh).
# Usage: bash scripts/gpu-bench.sh [extra preempt flags...]
set -u
. "$(dirname "$0")/gpu-env.sh"
tag=${TAG:-preempt}
timeout ${LIMIT:-500} carry/bin/preempt --json $OUT/$tag.json "$@" > $OUT/$tag.txt 2>&1; echo "preempt rc=$?"
cat $OUT/$tag.txt
