#!/usr/bin/env bash
# The tinygrad pair (benches/tinygrad_pair.py) on the GPU machine at GPU sizes: NVIDIA's
# driver bare against SoftPreempt, side by side. That machine has no network: carry
# carry/bin/libsoftpreempt.so (scripts/pack-gpu.sh) and carry/wheels/tinygrad-*.whl; numpy
# is already installed there. Extra arguments go to the pair (e.g. --duration 12).
# Results: printed, and $OUT/tinygrad.tgz (JSON, text, versions).
set -u
cd "$(dirname "$0")/../.."
. scripts/gpu-env.sh
ls carry/wheels/tinygrad-*.whl >/dev/null || { echo "tinygrad-run: no tinygrad wheel in carry/wheels" >&2; exit 1; }
R=$(mktemp -d)/tinygrad; mkdir -p "$R"
# The wheel (pure Python) unpacked onto PYTHONPATH: the machine's python3 has numpy (a
# venv there, even with --system-site-packages, did not see it).
site=$(dirname "$R")/site
python3 -m zipfile -e carry/wheels/tinygrad-*.whl "$site"
export PYTHONPATH=$site${PYTHONPATH:+:$PYTHONPATH}
PY=python3
"$PY" -c 'import sys, numpy, tinygrad; from importlib.metadata import version
print("python", sys.version.split()[0], "numpy", numpy.__version__, "tinygrad", version("tinygrad"))' |
  tee "$R/env.txt"
cp "$OUT/gpu.txt" "$R/" 2>/dev/null
# CUDA's libOpenCL reads OCL_ICD_FILENAMES; the pair sets it (and OCL_ICD_VENDORS) per platform.
timeout 570 "$PY" benches/tinygrad_pair.py --lib "$SOFTPREEMPT_LIB" --vendor-lib "$NV" \
  --runtime /usr/local/cuda/targets/x86_64-linux/lib/libOpenCL.so.1 --profile \
  --json "$R/tinygrad-pair.json" "$@" > "$R/tinygrad-pair.txt" 2> "$R/tinygrad-pair.err"
echo "tinygrad pair rc=$?"
cat "$R/tinygrad-pair.txt"; grep -v WARN "$R/tinygrad-pair.err" | tail -5
tar czf "$OUT/tinygrad.tgz" -C "$(dirname "$R")" tinygrad
