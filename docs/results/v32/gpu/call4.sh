# Session 53's fourth GPU call: benches/kernel_cost.py on the GPU (it failed there in session
# 52 with INVALID_PLATFORM: a context by type with no platform, which NVIDIA refuses), and
# benches/lp_arrival.py: an LP that starts next to a busy HP, on the GPU.
set -u
. scripts/gpu-env.sh
PY=$(mktemp -d); for w in carry/wheels/{pyopencl,pytools,platformdirs,siphash24,typing_extensions}-*.whl; do python3 -m zipfile -e "$w" "$PY" >/dev/null; done
echo "### kernel cost"; PYTHONPATH=$PY timeout 150 python3 benches/kernel_cost.py --lib "$PWD/carry/bin/libsoftpreempt.so" --vendor-lib "$NV" --json "$OUT/kernel_cost.json" 2>&1 | tail -8
for k in "groups_2d 4" "mandel 16"; do set -- $k
  echo "### lp_arrival $1"; PYTHONPATH=$PY timeout 120 python3 benches/lp_arrival.py --lib "$PWD/carry/bin/libsoftpreempt.so" --vendor-lib "$NV" --kernel "$1" --scale "$2" --duration 8 --json "$OUT/lp_arrival-$1.json" 2>&1 | tail -5
done
