# Session 51's first GPU call (an H200), from the repository root after
# scripts/gpu/pack-yield.sh, with carry/bin/libsoftpreempt-{head,whole}.so: head = a65e284
# (session 50's), whole = 928d0ec (the first form of the launch-time bound, the last of one
# launch, and a first slice that takes every row sent whole).
set -u
. scripts/gpu-env.sh
PY=$(mktemp -d)
for w in carry/wheels/{pyopencl,pytools,platformdirs,siphash24,typing_extensions}-*.whl; do python3 -m zipfile -e "$w" "$PY" >/dev/null; done
for r in 1 2; do for lib in head whole; do
  PYTHONPATH=$PY timeout 150 python3 benches/pyopencl_pair.py --lib carry/bin/libsoftpreempt-$lib.so --vendor-lib "$NV" \
    --duration 6 --lp-ms 12 --json "$OUT/py12-$lib-$r.json" > "$OUT/py12-$lib-$r.txt" 2>&1
  echo "### py12 $lib $r rc=$?"; tail -8 "$OUT/py12-$lib-$r.txt"
done; done
LIBS="head whole" REPS=1 DURATION=8 timeout 220 bash scripts/gpu/tinygrad-libs.sh 2>&1 | tail -14
ROWS="mandel" LIBS="head whole" REPS=1 timeout 80 bash scripts/gpu/ab-rows.sh 2>&1 | tail -10
