#!/usr/bin/env bash
# Runs the forwarding layer's checks and the managed-queue tests on the GPU machine (after
# scripts/pack-gpu.sh here), wrapping NVIDIA's driver (see gpu-env.sh).
# api_interop is not run: CUDA's loader does not export the GL entry points it links to.
set -u
. "$(dirname "$0")/gpu-env.sh"
OCL_ICD_FILENAMES=$SOFTPREEMPT_LIB:$NV timeout 60 clinfo -l > $OUT/clinfo-l.txt 2>&1
OCL_ICD_FILENAMES=$NV timeout 120 carry/bin/softpreempt demo > $OUT/demo.txt 2>&1; echo "demo rc=$?"
timeout 200 carry/bin/overhead --json $OUT/overhead.json > $OUT/overhead.txt 2>&1; echo "overhead rc=$?"

for t in abi api_platform api_mem api_sampler api_program api_kernel api_queue api_event api_enqueue clinfo managed_events managed_results managed_procs managed_trace managed_rewrite managed_stress managed_handback managed_short program_binaries kernel_rewrite yield_rewrite; do
  timeout 120 carry/bin/$t --test-threads=1 > $OUT/test-$t.txt 2>&1; echo "$t rc=$? $(grep 'test result' $OUT/test-$t.txt)"
done
# What a yielding launch's entry kernel costs a tiled SGEMM (a measurement, not a test).
for n in 2048 4096; do
  SOFTPREEMPT_COST_N=$n timeout 120 carry/bin/yield_rewrite entry_cost --ignored --nocapture 2>&1 | grep sgemm >> $OUT/entry-cost.txt
done
grep -h -A3 "panicked" $OUT/test-*.txt | head -150 > $OUT/failures.txt
cat $OUT/clinfo-l.txt $OUT/demo.txt $OUT/overhead.txt $OUT/entry-cost.txt
