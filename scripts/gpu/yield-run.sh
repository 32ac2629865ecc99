#!/usr/bin/env bash
# Yielding launches on the GPU machine (issue 23), with the high-priority path's figures
# (issue 24), in one call. Carry carry/ as left by scripts/gpu/pack-yield.sh: the release
# library, the preempt and pipeline benchmarks, the managed_yield test. Results: the
# printed tables and $OUT/yield-run.tgz.
set -u
cd "$(dirname "$0")/../.."
. scripts/gpu-env.sh
R=$(mktemp -d)/yield-run; mkdir -p "$R"
echo "== managed_yield on $(head -1 $OUT/gpu.txt)"
timeout 120 carry/bin/managed_yield --test-threads=1 > $R/managed_yield.txt 2>&1; echo "managed_yield rc=$? $(grep 'test result' $R/managed_yield.txt)"
grep -A5 panicked $R/managed_yield.txt | head -12
echo "== does the LP yield? (corun-sp, debug log)"
SOFTPREEMPT_LOG=softpreempt=debug timeout 120 carry/bin/preempt --lp-ms 20 --modes corun-sp --duration 2 > $R/yield-debug.txt 2>&1
echo "yielding runs: $(grep -c 'yielding run' $R/yield-debug.txt), asked: $(grep -c 'asked=true' $R/yield-debug.txt), not done after asked: $(grep -c 'done=false' $R/yield-debug.txt)"
grep -m3 "does not yield\|did not build" $R/yield-debug.txt
for row in "compute|" "gemm|--lp-kernel gemm" "mandel|--lp-kernel mandel" "memory|--lp-kernel memory"; do
  name=${row%%|*} flags=${row#*|}
  echo "== $name"
  # shellcheck disable=SC2086
  timeout 150 carry/bin/preempt $flags --lp-ms 50 --hp-us 450 --hp-burst 1 --gap-ms 20 \
    --modes hp-alone,corun-bare,corun-sp,arrival-bare,arrival-sp,lp-bare --duration 4 --arrival-reps 2 \
    --label $name --json $R/$name.json > $R/$name.txt 2>&1
  echo "rc=$?"; grep -A12 "^mode" $R/$name.txt
done
echo "== pipeline (µs per command)"
timeout 200 carry/bin/pipeline --json $R/pipeline.json 2>&1 | tail -14
echo "== OpenCV pair"
python3 benches/opencv_pair.py --lib $SOFTPREEMPT_LIB --vendor-lib $NV \
  --runtime /usr/local/cuda/targets/x86_64-linux/lib/libOpenCL.so.1 --device-type GPU \
  --bare-platform 'NVIDIA CUDA' --json $R/opencv-pair.json 2>&1 | grep -v WARN | tail -8
tar czf "$OUT/yield-run.tgz" -C "$(dirname "$R")" yield-run
