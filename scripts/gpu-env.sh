#!/usr/bin/env bash
# Sourced by the GPU scripts (after scripts/pack-gpu.sh here): a vendors directory holding
# NVIDIA's driver, and the variables that point the test and benchmark binaries in carry/
# at it. NVIDIA's loader there is CUDA's libOpenCL, which reads OCL_ICD_FILENAMES (not
# OCL_ICD_VENDORS). Results go to $OUT (default ./gpu-out).
OUT=${OUT:-$PWD/gpu-out}; mkdir -p "$OUT"
ROOT=$PWD
V=$ROOT/vendors; mkdir -p "$V"
NV=/lib/libnvidia-opencl.so.1
echo "$NV" > "$V/nvidia.icd"
export SOFTPREEMPT_LIB=$ROOT/carry/bin/libsoftpreempt.so SOFTPREEMPT_TEST_ICD=$V/nvidia.icd SOFTPREEMPT_TEST_VENDOR="NVIDIA CUDA" SOFTPREEMPT_TEST_SUFFIX=NV SOFTPREEMPT_TEST_FILENAMES=1
nvidia-smi -L > "$OUT/gpu.txt" 2>&1
# The benchmark matrix's LP kernels, as "name|preempt flags", those of $1 (names) only:
# `matrix_rows "compute mandel"`.
matrix_rows() {
  local row
  for row in "compute|" "gemm|--lp-kernel gemm" "mandel|--lp-kernel mandel" "memory|--lp-kernel memory"; do
    case " $1 " in *" ${row%%|*} "*) echo "$row" ;; esac
  done
}
