# Session 54's second GPU call: the OpenCV pair in turns, this build and head; then
# benches/lp_arrival.py with the linear_id LP (the PoCL row this build changes) and
# kernel_cost.py, both builds.
set -u
. scripts/gpu-env.sh
echo "### opencv"; JOBS='- corun-ab 60; head corun-ab 60' timeout 300 bash scripts/gpu/opencv-turns.sh 2>&1 | tail -14
PY=$(mktemp -d); for w in carry/wheels/{pyopencl,pytools,platformdirs,siphash24,typing_extensions}-*.whl; do python3 -m zipfile -e "$w" "$PY" >/dev/null; done
for lib in libsoftpreempt.so libsoftpreempt-head.so; do
  echo "### lp_arrival linear_id $lib"; PYTHONPATH=$PY timeout 60 python3 benches/lp_arrival.py --lib "$PWD/carry/bin/$lib" --vendor-lib "$NV" --kernel linear_id --scale 4 --duration 6 --json "$OUT/lp_arrival-linear_id-$lib.json" 2>&1 | tail -4
done
echo "### kernel cost"; PYTHONPATH=$PY timeout 150 python3 benches/kernel_cost.py --lib "$PWD/carry/bin/libsoftpreempt.so" --vendor-lib "$NV" --json "$OUT/kernel_cost.json" 2>&1 | tail -8
