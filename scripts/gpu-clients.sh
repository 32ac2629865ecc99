#!/usr/bin/env bash
# pyopencl's own test suite on the GPU machine: NVIDIA's platform bare against SoftPreempt
# (scripts/clients.sh's pyopencl part, with NVIDIA's driver for PoCL). That machine has no
# network and no Rust: prepare everything here first.
#
#   here:  bash scripts/pack-gpu.sh            # carry/bin/libsoftpreempt.so (release)
#          bash scripts/gpu-clients.sh pack    # gpu-carry/: cp312 wheels, pyopencl's tests
#   there (carry both carry/ and gpu-carry/):
#          bash scripts/gpu-clients.sh         # results in $OUT/clients (default ./gpu-out)
#
# There, Python 3.12 with numpy must be installed; the wheels (pyopencl and what it needs
# besides numpy, pytest and Mako) are unpacked into a private folder on PYTHONPATH, so no
# pip or venv is needed. pyopencl's wheel carries its own ocl-icd loader, which reads
# OCL_ICD_VENDORS: clients.sh points it at a folder with NVIDIA's library (and, for the
# SoftPreempt runs, carry/bin/libsoftpreempt.so). GPU_PYTHON_VERSION packs for another
# Python (3.12 by default).
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
CARRY=$ROOT/gpu-carry
reqs=scripts/clients/requirements.txt
pin() { grep -i "^$1==" "$reqs"; }

if [ "${1:-}" = pack ]; then
  pyver=${GPU_PYTHON_VERSION:-3.12}
  rm -rf "$CARRY"
  mkdir -p "$CARRY/wheels"
  # numpy is on the GPU machine already; OpenCV and the sdist build tools are not needed.
  pkgs=()
  for p in pyopencl pytools platformdirs siphash24 typing_extensions pytest iniconfig \
      packaging pluggy Pygments Mako MarkupSafe; do
    pkgs+=("$(pin "$p")")
  done
  python3 -m pip download -q --disable-pip-version-check --no-deps --only-binary :all: \
    --python-version "$pyver" --implementation cp \
    --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 \
    --platform manylinux2014_x86_64 -d "$CARRY/wheels" "${pkgs[@]}"
  # The suite is in the sdist only: take its test folder from clients.sh's cached venv.
  cp -r "$(bash scripts/clients.sh --tests-dir)" "$CARRY/pyopencl-test"
  du -sh "$CARRY"
  ls "$CARRY/wheels"
  exit 0
fi

need() { [ -e "$1" ] || { echo "gpu-clients: no $1: run $2 first (before carrying)" >&2; exit 1; }; }
need carry/bin/libsoftpreempt.so scripts/pack-gpu.sh
need "$CARRY/wheels" "'scripts/gpu-clients.sh pack'"
OUT=${OUT:-$ROOT/gpu-out}
mkdir -p "$OUT"
site=$(mktemp -d)/site
for w in "$CARRY"/wheels/*.whl; do python3 -m zipfile -e "$w" "$site"; done
export PYTHONPATH=$site${PYTHONPATH:+:$PYTHONPATH}
python3 - <<'EOF' | tee "$OUT/clients-env.txt"
import sys, numpy, pyopencl, pytest
print("python", sys.version.split()[0], "numpy", numpy.__version__,
      "pyopencl", pyopencl.VERSION_TEXT, "pytest", pytest.__version__)
EOF
nvidia-smi -L >> "$OUT/clients-env.txt" 2>&1 || true
CLIENTS_PYTHON=python3 CLIENTS_TESTS=$CARRY/pyopencl-test \
  CLIENTS_VENDOR_LIB=${GPU_VENDOR_LIB:-/lib/libnvidia-opencl.so.1} \
  CLIENTS_BARE_PLATFORM=${GPU_BARE_PLATFORM:-nvidia} CLIENTS_OUT=$OUT/clients \
  SOFTPREEMPT_LIB=$ROOT/carry/bin/libsoftpreempt.so \
  bash scripts/clients.sh --only pyopencl
