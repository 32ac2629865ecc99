# Session 52's third GPU call: main's head (681ebee, carry/bin/libsoftpreempt-head.so) and
# this session's build (a yielding entry measured slower than its kernel is not used;
# carry/bin/libsoftpreempt.so) side by side: the matrix rows, the pyopencl pair at 12 ms
# and tinygrad, builds alternating; the new build's profiles count `entry_slower`.
set -u
. scripts/gpu-env.sh
export SOFTPREEMPT_PROFILE=$OUT/profile.jsonl
echo "### matrix"; ROWS="compute memory gemm mandel" LIBS="- head" REPS=1 DURATION=4 timeout 200 bash scripts/gpu/ab-rows.sh 2>&1 | grep -E "^==|^(hp-alone|corun)"
PY=$(mktemp -d)
for w in carry/wheels/{pyopencl,pytools,platformdirs,siphash24,typing_extensions}-*.whl; do python3 -m zipfile -e "$w" "$PY" >/dev/null; done
for lib in libsoftpreempt.so libsoftpreempt-head.so; do
  PYTHONPATH=$PY timeout 100 python3 benches/pyopencl_pair.py --lib carry/bin/$lib --vendor-lib "$NV" \
    --duration 6 --lp-ms 12 --json "$OUT/py12-$lib.json" > "$OUT/py12-$lib.txt" 2>&1
  echo "### py12 $lib rc=$?"; grep -E "^(hp-alone|corun|lp-alone)" "$OUT/py12-$lib.txt"
done
echo "### tinygrad"; LIBS="- head" REPS=1 DURATION=8 timeout 200 bash scripts/gpu/tinygrad-libs.sh 2>&1 | grep -E "^==|^(hp-alone|corun|lp-alone)"
cd $OUT && tar czf py12.tgz py12-* && rm -f py12-*
echo "### entry_slower in the profiles"; grep -h '"entry_slower":[1-9]' profile.jsonl | cut -c1-300 | head -20; grep -c entry_slower profile.jsonl
