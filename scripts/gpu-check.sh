#!/usr/bin/env bash
# Runs the forwarding layer's checks on the GPU machine (after scripts/pack-gpu.sh here),
# wrapping NVIDIA's driver. Its loader is NVIDIA's CUDA libOpenCL, which reads
# OCL_ICD_FILENAMES (not OCL_ICD_VENDORS). Results go to $OUT (default ./gpu-out).
# api_interop is not run: that loader does not export the GL entry points it links to.
set -u
OUT=${OUT:-$PWD/gpu-out}; mkdir -p "$OUT"
ROOT=$PWD
V=$ROOT/vendors; mkdir -p $V
NV=/lib/libnvidia-opencl.so.1
echo "$NV" > $V/nvidia.icd
export SOFTPREEMPT_LIB=$ROOT/carry/bin/libsoftpreempt.so SOFTPREEMPT_TEST_ICD=$V/nvidia.icd SOFTPREEMPT_TEST_VENDOR="NVIDIA CUDA" SOFTPREEMPT_TEST_SUFFIX=NV SOFTPREEMPT_TEST_FILENAMES=1
nvidia-smi -L > $OUT/gpu.txt 2>&1
OCL_ICD_FILENAMES=$SOFTPREEMPT_LIB:$NV timeout 60 clinfo -l > $OUT/clinfo-l.txt 2>&1
OCL_ICD_FILENAMES=$NV timeout 120 carry/bin/softpreempt demo > $OUT/demo.txt 2>&1; echo "demo rc=$?"
timeout 200 carry/bin/overhead --json $OUT/overhead.json > $OUT/overhead.txt 2>&1; echo "overhead rc=$?"

for t in abi api_platform api_mem api_sampler api_program api_kernel api_queue api_event api_enqueue clinfo; do
  timeout 120 carry/bin/$t --test-threads=1 > $OUT/test-$t.txt 2>&1; echo "$t rc=$? $(grep 'test result' $OUT/test-$t.txt)"
done
grep -h -A3 "panicked" $OUT/test-*.txt | head -150 > $OUT/failures.txt
cat $OUT/clinfo-l.txt $OUT/demo.txt $OUT/overhead.txt
