# Session 53's fifth GPU call: where a lone queue's geometry-reading launches lose 2.2-2.8 us
# each (call 4). benches/kernel_cost.py twice with a diagnostic build of this commit
# (carry/bin/libsoftpreempt-diag.so, not committed: SP_DIAG_NOREWRITE set makes the layer
# build no rewritten program, so these kernels run as the application wrote them): the
# defaults, then without the rewrite.
set -u
. scripts/gpu-env.sh
PY=$(mktemp -d); for w in carry/wheels/{pyopencl,pytools,platformdirs,siphash24,typing_extensions}-*.whl; do python3 -m zipfile -e "$w" "$PY" >/dev/null; done
L=$PWD/carry/bin/libsoftpreempt-diag.so
echo "### kernel cost, rewritten"; PYTHONPATH=$PY timeout 100 python3 benches/kernel_cost.py --lib "$L" --vendor-lib "$NV" --json "$OUT/kc-rewritten.json" 2>&1 | tail -6
echo "### kernel cost, not rewritten"; SP_DIAG_NOREWRITE=1 PYTHONPATH=$PY timeout 100 python3 benches/kernel_cost.py --lib "$L" --vendor-lib "$NV" --json "$OUT/kc-plain.json" 2>&1 | tail -6
echo "### kernel cost, rewritten again"; PYTHONPATH=$PY timeout 100 python3 benches/kernel_cost.py --lib "$L" --vendor-lib "$NV" --json "$OUT/kc-rewritten2.json" 2>&1 | tail -6
