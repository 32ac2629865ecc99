#!/usr/bin/env bash
# The submitter's FIFO path on the GPU machine, this build against an earlier one, in one
# call (about 6 minutes): what NVIDIA's calls cost in the submitter's patterns on the bare
# driver (evcost), the submitter's steps per piece with the calltime builds of both, and the
# OpenCV pair per matchTemplate block from Chrome traces of both.
#
# Here, before the call:
#   gcc -O2 -o carry/probe/evcost scripts/gpu/evcost.c -lOpenCL -lpthread
#   cargo build --release -p softpreempt-icd --features calltime
#   strip --strip-debug -o carry/bin/libsoftpreempt-calltime.so target/release/libsoftpreempt.so
#   cargo build --release -p softpreempt-icd
#   strip --strip-debug -o carry/bin/libsoftpreempt.so target/release/libsoftpreempt.so
#   and the earlier build's two libraries as carry/bin/libsoftpreempt-$B.so and
#   carry/bin/libsoftpreempt-calltime-$B.so (B, default s32: a worktree at that commit,
#   built the same way with CARGO_TARGET_DIR=target/wt).
# Then: run with carry ["carry/bin","carry/probe"]: B=s32 bash scripts/gpu/submitter-ab.sh
# Results under $OUT: evcost.txt, submitter-calls.tgz, ocv.tgz (blocks.md inside).
set -u
cd "$(dirname "$0")/../.."
. scripts/gpu-env.sh
B=${B:-s32}
LD_LIBRARY_PATH=/usr/local/cuda/targets/x86_64-linux/lib OCL_ICD_FILENAMES=$NV \
  carry/probe/evcost 3000 65536 | tee "$OUT/evcost.txt"
CT_LIBS="calltime calltime-$B" SCEN="corun-sp-idle corun-sp" DURATION=10 \
  bash scripts/gpu/submitter-calls.sh
REPS=1 DURATION=12 SCEN=corun-bare,corun-sp,corun-sp-idle LIB_B=$B TRACED=ab TRACE_REPS=2 \
  bash scripts/gpu/opencv-trace.sh
