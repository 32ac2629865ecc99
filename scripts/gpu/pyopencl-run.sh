#!/usr/bin/env bash
# The pyopencl pair on the GPU machine (after scripts/gpu/pack-yield.sh, with carry/wheels
# holding the cp312 wheels of pyopencl, pytools, platformdirs, siphash24 and
# typing_extensions): the wheels are unpacked onto PYTHONPATH (no pip, no network there),
# then benches/pyopencl_pair.py runs with a GPU-shaped LP (millions of short work-items),
# binary cache warm: 50 ms LP launches ("short") and 12 ms ones, issue 23's row ("short12");
# PAIR_ROWS_EXTRA adds "name|flags" rows. Results: printed, and $OUT/pyopencl.tgz.
set -u
cd "$(dirname "$0")/../.."
. scripts/gpu-env.sh
R=$(mktemp -d)/pyopencl; mkdir -p "$R"
PY=$(mktemp -d)
for w in carry/wheels/{pyopencl,pytools,platformdirs,siphash24,typing_extensions}-*.whl; do
  python3 -m zipfile -e "$w" "$PY" >/dev/null
done
export PYTHONPATH=$PY
python3 -c 'import pyopencl as cl; print("pyopencl", cl.VERSION_TEXT)'
for row in "short|" "short12|--lp-ms 12" ${PAIR_ROWS_EXTRA:-}; do
  name=${row%%|*} flags=${row#*|}
  # shellcheck disable=SC2086
  timeout 300 python3 benches/pyopencl_pair.py --lib "$SOFTPREEMPT_LIB" --vendor-lib "$NV" \
    --duration "${PAIR_DURATION:-8}" $flags --json "$R/$name.json" > "$R/$name.txt" 2>&1
  echo "== pyopencl $name rc=$?"; tail -14 "$R/$name.txt"
done
tar czf "$OUT/pyopencl.tgz" -C "$(dirname "$R")" pyopencl
