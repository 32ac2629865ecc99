# Session 51's second GPU call: the pyopencl pair at issue 23's row (12 ms LP launches),
# head and whole (see call1.sh) in three alternating rounds.
set -u
. scripts/gpu-env.sh
PY=$(mktemp -d)
for w in carry/wheels/{pyopencl,pytools,platformdirs,siphash24,typing_extensions}-*.whl; do python3 -m zipfile -e "$w" "$PY" >/dev/null; done
for r in 1 2 3; do for lib in whole head; do
  PYTHONPATH=$PY timeout 150 python3 benches/pyopencl_pair.py --lib carry/bin/libsoftpreempt-$lib.so --vendor-lib "$NV" \
    --duration 6 --lp-ms 12 --json "$OUT/py12-$lib-$r.json" > "$OUT/py12-$lib-$r.txt" 2>&1
  echo "### py12 $lib $r rc=$?"; grep -E "^(hp-alone|corun)" "$OUT/py12-$lib-$r.txt"
done; done
cd $OUT && tar czf py12.tgz py12-* && rm -f py12-*
